//! `lua/dead_page.lua`: up to `limit` of a slot's dead letters after a cursor, oldest first
//! (`SlotJobs::dead_page`).

use redis::Value;

use super::super::reply::{Reply, int, text};
use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::model::DeadCursor;
use crate::store::engine::DeadEntry;
use crate::store::keys::SlotKeys;
use crate::store::record::Record;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct DeadPage<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) after: Option<&'a DeadCursor>,
    pub(in crate::store::redis) limit: usize,
}

impl Call for DeadPage<'_> {
    type Reply = Vec<Value>;
    type Out = Vec<DeadEntry>;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.dead_page
    }

    fn answered(&self) -> bool {
        false
    }

    fn build(&self, call: &mut Invocation) {
        let (at, id) = match self.after {
            Some(c) => (c.dead_at.to_string(), c.id.as_str()),
            None => ("-inf".to_string(), ""),
        };
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(at)
            .arg(id)
            .arg(self.limit);
    }

    fn read(self, reply: Vec<Value>) -> Result<Vec<DeadEntry>> {
        Reply::new("dead_page", &reply)
            .records(0, 3)?
            .map(|e| {
                Ok(DeadEntry {
                    cursor: DeadCursor {
                        dead_at: int(&e[1])?,
                        id: text(&e[0])?,
                    },
                    record: Record::parse(&text(&e[2])?)?,
                })
            })
            .collect()
    }
}

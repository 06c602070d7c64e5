//! `lua/list.lua`: a page of one slot's scheduled or running jobs in score order, after a
//! cursor (`SlotJobs::list`).

use redis::Value;

use super::super::reply::{Reply, int, text};
use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::engine::{Range, Stored};
use crate::store::keys::SlotKeys;
use crate::store::record::Record;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct List<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) range: &'a Range<'a>,
}

impl Call for List<'_> {
    type Reply = Vec<Value>;
    type Out = Vec<(String, Stored)>;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.list
    }

    fn answered(&self) -> bool {
        false
    }

    fn build(&self, call: &mut Invocation) {
        let r = self.range;
        let (score, id) = match r.after {
            Some(c) => (c.score.to_string(), c.id.as_str()),
            None => (String::new(), ""),
        };
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(r.state.as_str())
            .arg(r.from)
            .arg(r.to)
            .arg(score)
            .arg(id)
            .arg(r.limit);
    }

    fn read(self, reply: Vec<Value>) -> Result<Vec<(String, Stored)>> {
        Reply::new("list", &reply)
            .records(0, 3)?
            .map(|e| {
                let stored = Stored {
                    state: self.range.state,
                    score: int(&e[1])?,
                    record: Record::parse(&text(&e[2])?)?,
                };
                Ok((text(&e[0])?, stored))
            })
            .collect()
    }
}

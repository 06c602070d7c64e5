//! `lua/get.lua`: the jobs `ids` of one slot, in order, read in one consistent step
//! (`SlotJobs::get`).

use redis::Value;

use super::super::parse_state;
use super::super::reply::Reply;
use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::engine::Stored;
use crate::store::keys::SlotKeys;
use crate::store::record::Record;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct Get<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) ids: &'a [&'a str],
}

impl Call for Get<'_> {
    type Reply = Vec<Value>;
    type Out = Vec<Option<Stored>>;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.get
    }

    fn answered(&self) -> bool {
        false
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.ids);
    }

    fn read(self, reply: Vec<Value>) -> Result<Vec<Option<Stored>>> {
        let reply = Reply::new("get", &reply);
        (0..self.ids.len())
            .map(|i| {
                let Some(state) = parse_state(&reply.text(3 * i)?)? else {
                    return Ok(None);
                };
                Ok(Some(Stored {
                    state,
                    score: reply.int(3 * i + 1)?,
                    record: Record::parse(&reply.text(3 * i + 2)?)?,
                }))
            })
            .collect()
    }
}

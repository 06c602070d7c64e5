//! `lua/reset_many.lua`: moves many jobs of one slot, creating missing ones with `create`
//! (`SlotJobs::reset_many`).

use redis::Value;

use super::super::refired;
use super::super::reply::{Reply, text};
use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::engine::SlotReset;
use crate::store::keys::SlotKeys;
use crate::store::record::Record;
use crate::time::Millis;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct ResetMany<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) items: &'a [(&'a str, Millis)],
    pub(in crate::store::redis) create: Option<&'a Record>,
    pub(in crate::store::redis) now: Millis,
}

impl Call for ResetMany<'_> {
    type Reply = Vec<Value>;
    type Out = SlotReset;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.reset_many
    }

    fn answered(&self) -> bool {
        true
    }

    fn place(&self) -> Option<(&TopicConfig, u32)> {
        Some((self.topic, self.slot))
    }

    fn build(&self, call: &mut Invocation) {
        let create = self.create.map(Record::to_arg);
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.now)
            .arg(create.as_deref().unwrap_or("-"));
        for (id, at) in self.items {
            call.arg(id).arg(at);
        }
        call.arg(self.topic.slots);
    }

    fn read(self, items: Vec<Value>) -> Result<SlotReset> {
        let reply = Reply::new("reset_many", &items);
        let n_missing = usize::try_from(reply.int(2)?).map_err(|e| reply.corrupt(e))?;
        let missing = reply
            .slice(3, 3 + n_missing)?
            .iter()
            .map(text)
            .collect::<Result<_>>()?;
        let rearmed = reply
            .records(3 + n_missing, 3)?
            .map(|r| refired(text(&r[0])?, &r[1], &r[2]))
            .collect::<Result<_>>()?;
        Ok(SlotReset {
            reset: crate::num::unsigned(reply.int(0)?),
            created: crate::num::unsigned(reply.int(1)?),
            missing,
            rearmed,
        })
    }
}

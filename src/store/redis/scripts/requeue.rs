//! `lua/requeue.lua`: schedules a dead job again, due now (`SlotJobs::requeue`).

use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::keys::SlotKeys;
use crate::time::Millis;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct Requeue<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) id: &'a str,
    pub(in crate::store::redis) now: Millis,
}

impl Call for Requeue<'_> {
    type Reply = i64;
    type Out = bool;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.requeue
    }

    fn answered(&self) -> bool {
        true
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.id)
            .arg(self.now);
    }

    fn read(self, n: i64) -> Result<bool> {
        Ok(n == 1)
    }
}

//! `lua/dead_delete.lua`: drops a dead letter (`SlotJobs::dead_delete`).

use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::keys::SlotKeys;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct DeadDelete<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) id: &'a str,
}

impl Call for DeadDelete<'_> {
    type Reply = i64;
    type Out = bool;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.dead_delete
    }

    fn answered(&self) -> bool {
        true
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.id);
    }

    fn read(self, n: i64) -> Result<bool> {
        Ok(n == 1)
    }
}

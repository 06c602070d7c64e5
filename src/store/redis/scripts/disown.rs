//! `lua/disown.lua`: gives up an instance's owner lease of a slot (`Membership::disown`).

use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::keys::SlotKeys;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct Disown<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) instance: &'a str,
}

impl Call for Disown<'_> {
    type Reply = i64;
    type Out = bool;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.disown
    }

    fn answered(&self) -> bool {
        false
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.instance);
    }

    fn read(self, n: i64) -> Result<bool> {
        Ok(n == 1)
    }
}

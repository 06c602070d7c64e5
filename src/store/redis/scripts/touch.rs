//! `lua/touch.lua`: moves a live run's lease deadline; false when the token is stale
//! (`SlotJobs::touch`).

use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::keys::SlotKeys;
use crate::time::Millis;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct Touch<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) id: &'a str,
    pub(in crate::store::redis) token: u64,
    pub(in crate::store::redis) until: Millis,
}

impl Call for Touch<'_> {
    type Reply = i64;
    type Out = bool;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.touch
    }

    fn answered(&self) -> bool {
        true
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.id)
            .arg(self.token)
            .arg(self.until);
    }

    fn read(self, n: i64) -> Result<bool> {
        Ok(n == 1)
    }
}

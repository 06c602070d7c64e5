//! `lua/register.lua`: an instance's heartbeat in the registry (`Membership::register`).

use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::keys::INSTANCES;
use crate::time::Millis;

pub(in crate::store::redis) struct Register<'a> {
    pub(in crate::store::redis) instance: &'a str,
    pub(in crate::store::redis) now: Millis,
    pub(in crate::store::redis) ttl_ms: u64,
}

impl Call for Register<'_> {
    type Reply = Vec<String>;
    type Out = Vec<String>;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.register
    }

    fn answered(&self) -> bool {
        false
    }

    fn build(&self, call: &mut Invocation) {
        call.key(INSTANCES)
            .arg(self.instance)
            .arg(self.now)
            .arg(self.ttl_ms);
    }

    fn read(self, live: Vec<String>) -> Result<Vec<String>> {
        Ok(live)
    }
}

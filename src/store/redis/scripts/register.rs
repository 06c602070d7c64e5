//! `lua/register.lua`: an instance's heartbeat in the registry (`Membership::register`).

use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::engine::Member;
use crate::store::keys::{INSTANCE_TYPES, INSTANCES};
use crate::time::Millis;

pub(in crate::store::redis) struct Register<'a> {
    pub(in crate::store::redis) instance: &'a str,
    pub(in crate::store::redis) types: &'a [String],
    pub(in crate::store::redis) now: Millis,
    pub(in crate::store::redis) ttl_ms: u64,
}

impl Call for Register<'_> {
    type Reply = Vec<String>;
    type Out = Vec<Member>;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.register
    }

    fn answered(&self) -> bool {
        false
    }

    fn build(&self, call: &mut Invocation) {
        call.key(INSTANCES)
            .key(INSTANCE_TYPES)
            .arg(self.instance)
            .arg(self.now)
            .arg(self.ttl_ms)
            .arg(self.types.join(","));
    }

    /// Name, types, name, types, ...: the types comma-separated (none for an instance that
    /// announced none).
    fn read(self, live: Vec<String>) -> Result<Vec<Member>> {
        Ok(live
            .chunks(2)
            .map(|pair| Member {
                name: pair[0].clone(),
                types: pair
                    .get(1)
                    .map(|t| {
                        t.split(',')
                            .filter(|t| !t.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect())
    }
}

//! `lua/own.lua`: takes or renews an instance's owner lease of a slot (`Membership::own`).

use redis::Value;

use super::super::reply::Reply;
use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::engine::Ownership;
use crate::store::keys::SlotKeys;
use crate::time::Millis;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct Own<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) instance: &'a str,
    pub(in crate::store::redis) now: Millis,
    pub(in crate::store::redis) ttl_ms: u64,
}

impl Call for Own<'_> {
    type Reply = Vec<Value>;
    type Out = Ownership;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.own
    }

    fn answered(&self) -> bool {
        false
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.instance)
            .arg(self.now)
            .arg(self.ttl_ms);
    }

    fn read(self, reply: Vec<Value>) -> Result<Ownership> {
        let reply = Reply::new("own", &reply);
        Ok(if reply.int(0)? == 1 {
            Ownership::Owned {
                fence: crate::num::unsigned(reply.int(1)?),
            }
        } else {
            Ownership::Held {
                by: reply.text(1)?,
                until: reply.int(2)?,
            }
        })
    }
}

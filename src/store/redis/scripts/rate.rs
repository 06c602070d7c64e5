//! `lua/rate.lua`: takes fires from a topic's bucket, or gives back those not used
//! (`FireRate`).

use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::rate::Grant;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct Rate<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    /// True to take `n` fires, false to give them back.
    pub(in crate::store::redis) take: bool,
    pub(in crate::store::redis) rate: u32,
    pub(in crate::store::redis) n: u32,
}

impl Call for Rate<'_> {
    type Reply = (u32, u64);
    type Out = Grant;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.rate
    }

    /// Not a job's change: a lost take only holds fires back for a moment.
    fn answered(&self) -> bool {
        false
    }

    fn build(&self, call: &mut Invocation) {
        call.key(crate::store::keys::rate_key(&self.topic.name))
            .arg(if self.take { "take" } else { "give" })
            .arg(self.rate)
            .arg(self.n);
    }

    fn read(self, (granted, retry_in_ms): (u32, u64)) -> Result<Grant> {
        Ok(Grant {
            granted,
            retry_in_ms,
        })
    }
}

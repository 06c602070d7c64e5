//! `lua/adopt.lua`: a slot's runs handed out by pumps whose answer was lost
//! (`SlotJobs::adopt`).

use redis::Value;

use super::super::reply::{Reply, int};
use super::pump::handed;
use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::engine::Handed;
use crate::store::keys::SlotKeys;
use crate::time::Millis;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct Adopt<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) fence: u64,
    pub(in crate::store::redis) above: u64,
}

impl Call for Adopt<'_> {
    type Reply = Vec<Value>;
    type Out = Vec<(Handed, Millis)>;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.adopt
    }

    fn answered(&self) -> bool {
        false
    }

    fn place(&self) -> Option<(&TopicConfig, u32)> {
        Some((self.topic, self.slot))
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.fence)
            .arg(self.above);
    }

    fn read(self, reply: Vec<Value>) -> Result<Vec<(Handed, Millis)>> {
        Reply::new("adopt", &reply)
            .records(0, 3)?
            .map(|entry| Ok((handed("adopt", &entry[0], &entry[1])?, int(&entry[2])?)))
            .collect()
    }
}

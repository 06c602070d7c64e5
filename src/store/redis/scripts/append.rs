//! `lua/append.lua`: appends events no settle carries to one slot's stream
//! (`SlotJobs::append_events`).

use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::keys::SlotKeys;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct Append<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    /// The slot stream's cap, in events.
    pub(in crate::store::redis) cap: usize,
    /// The events' JSON, in order.
    pub(in crate::store::redis) events: Vec<String>,
}

impl Call for Append<'_> {
    type Reply = i64;
    type Out = ();

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.append
    }

    /// Events beside a change that was answered already: a lost one is logged, not retried.
    fn answered(&self) -> bool {
        false
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.cap)
            .arg(&self.events);
    }

    fn read(self, _: i64) -> Result<()> {
        Ok(())
    }
}

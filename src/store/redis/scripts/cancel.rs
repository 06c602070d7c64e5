//! `lua/cancel.lua`: removes a job in any state (`SlotJobs::cancel`).

use super::super::parse_state;
use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::model::JobState;
use crate::store::keys::SlotKeys;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct Cancel<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) id: &'a str,
}

impl Call for Cancel<'_> {
    type Reply = String;
    type Out = Option<JobState>;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.cancel
    }

    fn answered(&self) -> bool {
        true
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.id);
    }

    fn read(self, state: String) -> Result<Option<JobState>> {
        parse_state(&state)
    }
}

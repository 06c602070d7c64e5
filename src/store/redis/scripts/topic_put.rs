//! `lua/topic_put.lua`: a topic's settings written with a compare-and-set
//! (`TopicSettings::put_topic`).

use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::keys::TOPICS;

pub(in crate::store::redis) struct TopicPut<'a> {
    pub(in crate::store::redis) name: &'a str,
    /// The settings' JSON as read ('' when the topic did not exist).
    pub(in crate::store::redis) old: &'a str,
    pub(in crate::store::redis) new: &'a str,
}

impl Call for TopicPut<'_> {
    type Reply = i64;
    /// Whether the settings were still `old`, and are `new` now.
    type Out = bool;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.topic_put
    }

    fn answered(&self) -> bool {
        true
    }

    fn build(&self, call: &mut Invocation) {
        call.key(TOPICS).arg(self.name).arg(self.old).arg(self.new);
    }

    fn read(self, set: i64) -> Result<bool> {
        Ok(set == 1)
    }
}

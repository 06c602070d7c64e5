//! `lua/layout.lua`: marks an old slot with the topic's slot count after a doubling
//! (`TopicSettings::mark_layout`).

use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::store::keys::SlotKeys;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct Layout<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
}

impl Call for Layout<'_> {
    type Reply = i64;
    type Out = ();

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.layout
    }

    fn answered(&self) -> bool {
        false
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.topic.slots);
    }

    fn read(self, _: i64) -> Result<()> {
        Ok(())
    }
}

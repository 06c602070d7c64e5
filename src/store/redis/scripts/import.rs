//! `lua/import.lua`: writes exported jobs into one slot, each unless its id is there
//! (`SlotJobs::import`).

use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::model::JobState;
use crate::store::engine::Imported;
use crate::store::keys::SlotKeys;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct Import<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) jobs: &'a [Imported],
}

impl Call for Import<'_> {
    type Reply = i64;
    type Out = u64;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.import
    }

    fn answered(&self) -> bool {
        true
    }

    fn place(&self) -> Option<(&TopicConfig, u32)> {
        Some((self.topic, self.slot))
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.topic.slots);
        for job in self.jobs {
            let state = match job.state {
                JobState::Dead => "dead",
                _ => "scheduled",
            };
            call.arg(&job.id)
                .arg(state)
                .arg(job.score)
                .arg(job.record.to_arg());
        }
    }

    fn read(self, n: i64) -> Result<u64> {
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

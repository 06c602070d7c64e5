//! `lua/schedule.lua`: creates, replaces or moves one job (`SlotJobs::schedule`).

use redis::Value;

use super::super::reply::Reply;
use super::super::{parse_state, refired};
use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::model::ScheduleOutcome;
use crate::store::engine::{SlotScheduled, Stored, Write};
use crate::store::keys::SlotKeys;
use crate::store::record::Record;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct Schedule<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) write: Write<'a>,
}

impl Call for Schedule<'_> {
    type Reply = Vec<Value>;
    type Out = SlotScheduled;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.schedule
    }

    fn answered(&self) -> bool {
        true
    }

    fn place(&self) -> Option<(&TopicConfig, u32)> {
        Some((self.topic, self.slot))
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(self.write.id)
            .arg(self.write.mode.as_str())
            .arg(self.write.fire_at)
            .arg(self.write.now)
            .arg(self.write.spec.to_arg())
            .arg(self.topic.slots);
    }

    fn read(self, reply: Vec<Value>) -> Result<SlotScheduled> {
        let reply = Reply::new("schedule", &reply);
        let outcome: ScheduleOutcome = reply
            .text(0)?
            .parse()
            .map_err(|_| reply.corrupt("its outcome"))?;
        let fire_at = reply.int(2)?;
        let rearmed = Some(refired(
            self.write.id.to_string(),
            reply.get(4)?,
            reply.get(5)?,
        )?)
        .filter(|r| r.fires > 0);
        let state = parse_state(&reply.text(1)?)?;
        let score = reply.int(6)?;
        let stored = match state {
            Some(state) if score >= 0 => Some(Stored {
                state,
                score,
                record: Record::parse(&reply.text(7)?)?,
            }),
            _ => None,
        };
        Ok(SlotScheduled {
            outcome,
            state,
            fire_at: (fire_at >= 0).then_some(fire_at),
            is_head: reply.int(3)? == 1,
            rearmed,
            stored,
        })
    }
}

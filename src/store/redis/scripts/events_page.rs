//! `lua/events_page.lua`: a slot's share of a topic's events after a stream id, with the
//! slot's clock (`SlotJobs::read_events` merges the slots' pages).

use redis::Value;

use super::super::reply::{Reply, int, text};
use super::{Call, Invocation, Lua, Scripts};
use crate::error::{Error, Result};
use crate::store::event_id::EventId;
use crate::store::keys::SlotKeys;
use crate::topic::TopicConfig;

pub(in crate::store::redis) struct EventsPage<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    /// The first entry to read (inclusive), `-` for the oldest.
    pub(in crate::store::redis) start: String,
    /// Events to skip at the start of that entry.
    pub(in crate::store::redis) skip: u64,
    pub(in crate::store::redis) limit: usize,
}

/// A slot's page: the time before which nothing more can be appended to it (its clock), and
/// its events, each with its id and JSON.
pub(in crate::store::redis) struct SlotEvents {
    pub(in crate::store::redis) horizon: i64,
    pub(in crate::store::redis) entries: Vec<(EventId, String)>,
}

impl Call for EventsPage<'_> {
    type Reply = Vec<Value>;
    type Out = SlotEvents;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.events_page
    }

    fn answered(&self) -> bool {
        false
    }

    fn build(&self, call: &mut Invocation) {
        call.key(SlotKeys::new(&self.topic.name, self.slot).all())
            .arg(&self.start)
            .arg(self.skip)
            .arg(self.limit);
    }

    fn read(self, reply: Vec<Value>) -> Result<SlotEvents> {
        let reply = Reply::new("events_page", &reply);
        let mut entries = Vec::new();
        for event in reply.records(1, 3)? {
            let id = text(&event[0])?;
            let place = crate::num::unsigned(int(&event[1])?);
            let id = EventId::of_stream(&id, self.slot, place)
                .ok_or_else(|| Error::Corrupt(format!("stream id {id:?}, place {place}")))?;
            entries.push((id, text(&event[2])?));
        }
        Ok(SlotEvents {
            horizon: reply.int(0)?,
            entries,
        })
    }
}

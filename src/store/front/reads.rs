//! The store's dead letters, counts and events.

use crate::error::{Error, Result};
use crate::events::{Event, EventPage};
use crate::model::{DeadCursor, DeadPage, JobRef, JobState, TopicStats};
use crate::store::MAX_PAGE;
use crate::store::engine::DeadEntry;
use crate::store::event_id::EventId;
use crate::time::Millis;
use crate::topic::TopicConfig;

use super::Store;

impl Store {
    /// Dead letters oldest first, after the cursor `after` (a previous page's `next`).
    pub async fn dead_list(
        &self,
        topic: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<DeadPage> {
        let t = self.existing_topic(topic).await?;
        let limit = limit.clamp(1, MAX_PAGE);
        let cursor = after
            .map(|s| {
                DeadCursor::decode(s)
                    .ok_or_else(|| Error::invalid("after", format!("{s:?} is not a cursor")))
            })
            .transpose()?;
        // Each slot's oldest `limit` after the cursor, then the oldest `limit` of them all.
        let calls =
            (0..t.slots).map(|slot| self.engine.dead_page(&t, slot, cursor.as_ref(), limit));
        let mut entries = Vec::new();
        for page in futures_util::future::join_all(calls).await {
            entries.extend(page?);
        }
        dead_page(&t, entries, limit)
    }

    /// Schedules a dead job again, due `now`, attempts starting again; false if none.
    pub async fn dead_requeue(&self, topic: &str, job: &JobRef, now: Millis) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        let (slot, old) = Self::places(&t, job)?;
        for slot in std::iter::once(slot).chain(old) {
            if self.engine.requeue(&t, slot, &job.id, now).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Drops a dead letter; false if there is no such dead job.
    pub async fn dead_delete(&self, topic: &str, job: &JobRef) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        let (slot, old) = Self::places(&t, job)?;
        for slot in std::iter::once(slot).chain(old) {
            if self.engine.dead_delete(&t, slot, &job.id).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Scheduled, running and dead counts per slot and in total, and the next fire time.
    pub async fn stats(&self, topic: &str) -> Result<TopicStats> {
        let t = self.existing_topic(topic).await?;
        let calls = (0..t.slots).map(|slot| self.engine.slot_stats(&t, slot));
        let per_slot = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .collect::<Result<Vec<_>>>()?;
        Ok(TopicStats::from_slots(&t.name, per_slot))
    }

    /// Appends events that belong to no run's outcome (a re-arm, the application's own) to
    /// the topic's stream, which keeps about `StoreOptions::events_max_len` entries.
    pub async fn append_events(&self, topic: &str, events: &[Event]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let t = self.existing_topic(topic).await?;
        self.append_events_in(&t, events).await
    }

    /// `append_events` in a topic whose settings the caller has resolved.
    pub(crate) async fn append_events_in(&self, t: &TopicConfig, events: &[Event]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        self.engine.append_events(t, events).await
    }

    /// Events after the position `after` (exclusive; from the oldest when `None`).
    pub async fn read_events(
        &self,
        topic: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<EventPage> {
        let after = after
            .map(|id| {
                EventId::parse(id).ok_or_else(|| {
                    Error::invalid("after", format!("{id:?} is not an event id (ms-seq-slot)"))
                })
            })
            .transpose()?;
        let t = self.existing_topic(topic).await?;
        let items = self
            .engine
            .read_events(&t, after, limit.clamp(1, MAX_PAGE))
            .await?;
        Ok(EventPage::new(items))
    }
}

/// The page of dead letters after a cursor: each slot's oldest `limit` entries merged, and the
/// oldest `limit` of them all kept (both engines page this way).
pub(super) fn dead_page(
    topic: &TopicConfig,
    mut entries: Vec<DeadEntry>,
    limit: usize,
) -> Result<DeadPage> {
    entries.sort_by(|a, b| a.cursor.cmp(&b.cursor));
    let more = entries.len() > limit;
    entries.truncate(limit);
    let next = more
        .then(|| entries.last().map(|e| e.cursor.encode()))
        .flatten();
    let items = entries
        .into_iter()
        .map(|e| {
            let c = e.cursor;
            e.record.into_job(topic, c.id, JobState::Dead, c.dead_at)
        })
        .collect::<Result<_>>()?;
    Ok(DeadPage { items, next })
}

//! One slot's jobs on Redis: each operation is one script of `lua/` (its call in
//! `scripts/`), except the plain reads (counts, scans) and the events appended outside an
//! outcome.

use async_trait::async_trait;
use redis::aio::ConnectionLike;

use super::RedisEngine;
use super::scripts::settle::Runs;
use super::scripts::{
    Adopt, Append, Cancel, DeadDelete, DeadPage, EventsPage, Get, List, Pump, Requeue, ResetMany,
    Schedule, Settle, Touch,
};
use crate::error::{Error, Result};
use crate::events::Event;
use crate::model::{
    DeadCursor, Finished, JobState, ListCursor, ScheduleMode, Settlement, SlotStats,
};
use crate::routing::slot_of;
use crate::store::engine::{
    ClaimSettlement, DeadEntry, Handed, SlotJobs, SlotPumped, SlotReset, SlotScheduled, Stored,
};
use crate::store::event_id::EventId;

use crate::store::keys::SlotKeys;
use crate::store::record::Record;
use crate::time::Millis;
use crate::topic::TopicConfig;

#[async_trait]
impl<C> SlotJobs for RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn schedule(
        &self,
        topic: &TopicConfig,
        slot: u32,
        id: &str,
        mode: ScheduleMode,
        fire_at: Millis,
        now: Millis,
        spec: Record,
    ) -> Result<SlotScheduled> {
        self.run(Schedule {
            topic,
            slot,
            id,
            mode,
            fire_at,
            now,
            spec,
        })
        .await
    }

    async fn reset_many(
        &self,
        topic: &TopicConfig,
        slot: u32,
        items: &[(&str, Millis)],
        create: Option<&Record>,
        now: Millis,
    ) -> Result<SlotReset> {
        self.run(ResetMany {
            topic,
            slot,
            items,
            create,
            now,
        })
        .await
    }

    async fn cancel(&self, topic: &TopicConfig, slot: u32, id: &str) -> Result<Option<JobState>> {
        self.run(Cancel { topic, slot, id }).await
    }

    async fn get(
        &self,
        topic: &TopicConfig,
        slot: u32,
        ids: &[&str],
    ) -> Result<Vec<Option<Stored>>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.run(Get { topic, slot, ids }).await
    }

    async fn pump(
        &self,
        topic: &TopicConfig,
        slot: u32,
        now: Millis,
        limit: usize,
        lease_ms: u64,
        fence: u64,
    ) -> Result<SlotPumped> {
        self.run(Pump {
            topic,
            slot,
            now,
            limit,
            lease_ms,
            fence,
        })
        .await
    }

    async fn adopt(
        &self,
        topic: &TopicConfig,
        slot: u32,
        fence: u64,
        above: u64,
    ) -> Result<Vec<(Handed, Millis)>> {
        self.run(Adopt {
            topic,
            slot,
            fence,
            above,
        })
        .await
    }

    async fn settle(
        &self,
        topic: &TopicConfig,
        slot: u32,
        batch: &[Settlement],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        self.run(Settle {
            topic,
            slot,
            now,
            stream_cap: self.slot_stream_cap(topic),
            runs: Runs::Handed(batch),
        })
        .await
    }

    async fn settle_claimed(
        &self,
        topic: &TopicConfig,
        slot: u32,
        batch: &[ClaimSettlement<'_>],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        self.run(Settle {
            topic,
            slot,
            now,
            stream_cap: self.slot_stream_cap(topic),
            runs: Runs::Claimed(batch),
        })
        .await
    }

    async fn touch(
        &self,
        topic: &TopicConfig,
        slot: u32,
        id: &str,
        token: u64,
        until: Millis,
    ) -> Result<bool> {
        self.run(Touch {
            topic,
            slot,
            id,
            token,
            until,
        })
        .await
    }

    async fn list(
        &self,
        topic: &TopicConfig,
        slot: u32,
        state: JobState,
        from: Millis,
        to: Millis,
        after: Option<&ListCursor>,
        limit: usize,
    ) -> Result<Vec<(String, Stored)>> {
        self.run(List {
            topic,
            slot,
            state,
            from,
            to,
            after,
            limit,
        })
        .await
    }

    async fn dead_page(
        &self,
        topic: &TopicConfig,
        slot: u32,
        after: Option<&DeadCursor>,
        limit: usize,
    ) -> Result<Vec<DeadEntry>> {
        self.run(DeadPage {
            topic,
            slot,
            after,
            limit,
        })
        .await
    }

    async fn requeue(&self, topic: &TopicConfig, slot: u32, id: &str, now: Millis) -> Result<bool> {
        self.run(Requeue {
            topic,
            slot,
            id,
            now,
        })
        .await
    }

    async fn dead_delete(&self, topic: &TopicConfig, slot: u32, id: &str) -> Result<bool> {
        self.run(DeadDelete { topic, slot, id }).await
    }

    async fn slot_stats(&self, topic: &TopicConfig, slot: u32) -> Result<SlotStats> {
        let keys = SlotKeys::new(&topic.name, slot);
        let (scheduled, running, dead, head): (u64, u64, u64, Vec<(String, f64)>) = redis::pipe()
            .zcard(&keys.due)
            // Not ZCARD: the run set's padding member (score +inf, see pump.lua) is no run.
            .zcount(&keys.run, "-inf", "(+inf")
            .zcard(&keys.dead)
            .zrange_withscores(&keys.due, 0, 0)
            .query_async(&mut self.conn())
            .await?;
        Ok(SlotStats {
            slot,
            scheduled,
            running,
            dead,
            next_fire_at: head.first().map(|(_, s)| crate::num::float_int(*s)),
        })
    }

    async fn scan_ids(
        &self,
        topic: &TopicConfig,
        slot: u32,
        state: JobState,
        cursor: u64,
        count: usize,
    ) -> Result<(u64, Vec<String>)> {
        let keys = SlotKeys::new(&topic.name, slot);
        let key = match state {
            JobState::Scheduled => &keys.due,
            JobState::Running => &keys.run,
            JobState::Dead => &keys.dead,
        };
        let (next, page): (u64, Vec<String>) = redis::cmd("ZSCAN")
            .arg(key)
            .arg(cursor)
            .arg("COUNT")
            .arg(count)
            .query_async(&mut self.conn())
            .await?;
        // ZSCAN answers member, score, member, score, ...; the run set's padding member
        // (see pump.lua) is longer than any id may be, and is no job.
        let ids = page
            .into_iter()
            .step_by(2)
            .filter(|id| id.chars().count() <= crate::validate::MAX_ID_LEN)
            .collect();
        Ok((next, ids))
    }

    async fn append_events(&self, topic: &TopicConfig, events: &[Event]) -> Result<()> {
        // One call per slot, appending as settle.lua does (one entry, trimmed alike).
        let cap = self.slot_stream_cap(topic);
        let mut by_slot: std::collections::BTreeMap<u32, Vec<String>> = Default::default();
        for e in events {
            let json = serde_json::to_string(e).expect("an event serialises");
            by_slot
                .entry(slot_of(&e.job_id, topic.slots))
                .or_default()
                .push(json);
        }
        let calls = by_slot.into_iter().map(|(slot, events)| {
            self.run(Append {
                topic,
                slot,
                cap,
                events,
            })
        });
        for done in futures_util::future::join_all(calls).await {
            done?;
        }
        Ok(())
    }

    async fn read_events(
        &self,
        topic: &TopicConfig,
        after: Option<EventId>,
        limit: usize,
    ) -> Result<Vec<Event>> {
        // Each slot's oldest `limit` after the cursor; then, of those older than every
        // slot's clock (nothing can still be appended before that), the oldest `limit`.
        let calls = (0..topic.slots).map(|slot| {
            let (start, skip) = match &after {
                None => ("-".to_string(), 0),
                Some(c) => c.stream_start(slot),
            };
            self.run(EventsPage {
                topic,
                slot,
                start,
                skip,
                limit,
            })
        });
        let mut horizon = i64::MAX;
        let mut entries: Vec<(EventId, String)> = Vec::new();
        for page in futures_util::future::join_all(calls).await {
            let page = page?;
            horizon = horizon.min(page.horizon);
            entries.extend(page.entries);
        }
        entries.retain(|(id, _)| crate::num::signed(id.ms) < horizon);
        entries.sort_by_key(|(id, _)| *id);
        entries.truncate(limit);
        entries
            .into_iter()
            .map(|(id, json)| {
                let mut event: Event = serde_json::from_str(&json)
                    .map_err(|e| Error::Corrupt(format!("event {id}: {e}")))?;
                event.id = id.to_string();
                Ok(event)
            })
            .collect()
    }
}

//! One slot's jobs on Redis: each operation is one script of `lua/` (its call in
//! `scripts/`), except the plain reads (counts, scans) and the events appended outside an
//! outcome.

use std::collections::HashMap;
use std::sync::PoisonError;

use async_trait::async_trait;
use redis::aio::ConnectionLike;

use super::RedisEngine;
use super::scripts::settle::Runs;
use super::scripts::{
    Adopt, Append, Cancel, DeadDelete, DeadPage, EventsPage, Get, Import, List, Pump, Requeue,
    ResetMany, Schedule, Settle, Touch,
};
use crate::error::{Error, Result};
use crate::events::Event;
use crate::model::{DeadCursor, Finished, JobState, Settlement, SlotStats};
use crate::routing::slot_of;
use crate::store::engine::{
    ClaimSettlement, DeadEntry, Handed, Imported, PumpArgs, Range, SlotJobs, SlotPumped, SlotRef,
    SlotReset, SlotScheduled, Stored, Write,
};
use crate::store::event_id::EventId;

use crate::store::keys::{DUE_MARK, SlotKeys};
use crate::store::record::Record;
use crate::time::Millis;
use crate::topic::TopicConfig;

/// How far ahead of now every fire time of a batch must be for the batch to try the plain
/// path first: no pump takes a job it moved before the script that may follow it runs.
const PLAIN_RESET_LEAD_MS: Millis = 2_000;

/// Members per `ZADD` of the plain path (as `reset_many.lua`'s chunks).
const PLAIN_RESET_CHUNK: usize = 1_000;

/// Batches that create skip the plain path in a slot for this many after a try that missed.
const PLAIN_CREATE_SKIP: u8 = 15;

impl<C> RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Whether a batch reset of the slot tries the plain path: `reset_many.lua` has run there
    /// (it marks a slot written before due members were marked, so that none of its jobs
    /// with a record is under its bare id), and, for a batch that creates, no try there
    /// missed within the last [`PLAIN_CREATE_SKIP`] such batches (a bulk creation would pay
    /// a `ZADD` that moves nothing before every script).
    fn tries_plain(&self, topic: &TopicConfig, slot: u32, creates: bool) -> bool {
        let mut plain = self.plain.lock().unwrap_or_else(PoisonError::into_inner);
        match plain.get_mut(&topic.name).and_then(|s| s.get_mut(&slot)) {
            None => false,
            Some(skip) if creates && *skip > 0 => {
                *skip -= 1;
                false
            }
            Some(_) => true,
        }
    }

    /// `reset_many.lua` ran (or is about to run) in the slot; `creating_miss`: a creating
    /// batch's plain try there did not move every id, so the next creating ones skip it.
    fn plain_tried(&self, topic: &TopicConfig, slot: u32, creating_miss: bool) {
        let mut plain = self.plain.lock().unwrap_or_else(PoisonError::into_inner);
        let skip = if creating_miss { PLAIN_CREATE_SKIP } else { 0 };
        match plain.get_mut(&topic.name) {
            Some(slots) => {
                let now = slots.entry(slot).or_insert(skip);
                *now = (*now).max(skip);
            }
            None => {
                plain.insert(topic.name.clone(), HashMap::from([(slot, skip)]));
            }
        }
    }

    /// The heartbeat path: the batch's fire times as `ZADD XX CH` of the bare ids, no script.
    /// Only plain scheduled jobs are due set members under their bare ids (`lua/lib.lua`'s
    /// `MARK`), and moving one is all `reset_many.lua` would do for it, so when every id
    /// moved, that is the whole reset; otherwise (a job with a record, running, dead, gone,
    /// or already at that time) `reset_many.lua` runs for the batch after it and reports
    /// it, finding the moved jobs where they are now. Taken only when every fire time is
    /// [`PLAIN_RESET_LEAD_MS`] ahead, so that no pump hands out a job between the two.
    ///
    /// A writer whose slot count is stale may move an old copy of a job in place (the
    /// script would refuse it, `STALE_LAYOUT`): the job still has one live copy, at the new
    /// time, as if reset before the doubling, and the next write moves it home.
    async fn plain_resets(
        &self,
        topic: &TopicConfig,
        slot: u32,
        items: &[(&str, Millis)],
        creates: bool,
        now: Millis,
    ) -> Result<Option<SlotReset>> {
        if items.is_empty()
            || items.iter().any(|(_, at)| *at < now + PLAIN_RESET_LEAD_MS)
            || !self.tries_plain(topic, slot, creates)
        {
            return Ok(None);
        }
        let due = SlotKeys::new(&topic.name, slot).due;
        // Commands of their own, not a pipeline: a refusal (OOM) keeps its code (StoreFull).
        let place = format!("topic {:?} slot {slot}", topic.name);
        let zadds = items.chunks(PLAIN_RESET_CHUNK).map(|chunk| {
            let mut cmd = redis::cmd("ZADD");
            cmd.arg(&due).arg("XX").arg("CH");
            for (id, at) in chunk {
                cmd.arg(at).arg(id);
            }
            let place = &place;
            async move { self.write::<usize>(&cmd, place).await }
        });
        let mut moved = 0;
        for zadd in futures_util::future::join_all(zadds).await {
            moved += zadd?;
        }
        if moved < items.len() {
            self.plain_tried(topic, slot, creates);
            return Ok(None);
        }
        Ok(Some(SlotReset {
            reset: crate::num::usize_u64(items.len()),
            ..SlotReset::default()
        }))
    }
}

#[async_trait]
impl<C> SlotJobs for RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn schedule(&self, at: SlotRef<'_>, write: Write<'_>) -> Result<SlotScheduled> {
        let SlotRef { topic, slot } = at;
        self.run(Schedule { topic, slot, write }).await
    }

    async fn reset_many(
        &self,
        at: SlotRef<'_>,
        items: &[(&str, Millis)],
        create: Option<&Record>,
        now: Millis,
    ) -> Result<SlotReset> {
        let SlotRef { topic, slot } = at;
        let creates = create.is_some();
        if let Some(reset) = self.plain_resets(topic, slot, items, creates, now).await? {
            return Ok(reset);
        }
        let reset = self
            .run(ResetMany {
                topic,
                slot,
                items,
                create,
                now,
            })
            .await?;
        self.plain_tried(topic, slot, false);
        Ok(reset)
    }

    async fn cancel(&self, at: SlotRef<'_>, id: &str) -> Result<Option<JobState>> {
        let SlotRef { topic, slot } = at;
        self.run(Cancel { topic, slot, id }).await
    }

    async fn get(&self, at: SlotRef<'_>, ids: &[&str]) -> Result<Vec<Option<Stored>>> {
        let SlotRef { topic, slot } = at;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.run(Get { topic, slot, ids }).await
    }

    async fn pump(&self, at: SlotRef<'_>, args: &PumpArgs<'_>) -> Result<SlotPumped> {
        let SlotRef { topic, slot } = at;
        self.run(Pump {
            topic,
            slot,
            args,
            aside: (!args.aside.is_empty()).then(|| args.aside.to_json()),
        })
        .await
    }

    async fn adopt(
        &self,
        at: SlotRef<'_>,
        fence: u64,
        above: u64,
    ) -> Result<Vec<(Handed, Millis)>> {
        let SlotRef { topic, slot } = at;
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
        at: SlotRef<'_>,
        batch: &[Settlement],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        let SlotRef { topic, slot } = at;
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
        at: SlotRef<'_>,
        batch: &[ClaimSettlement<'_>],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        let SlotRef { topic, slot } = at;
        self.run(Settle {
            topic,
            slot,
            now,
            stream_cap: self.slot_stream_cap(topic),
            runs: Runs::Claimed(batch),
        })
        .await
    }

    async fn touch(&self, at: SlotRef<'_>, id: &str, token: u64, until: Millis) -> Result<bool> {
        let SlotRef { topic, slot } = at;
        self.run(Touch {
            topic,
            slot,
            id,
            token,
            until,
        })
        .await
    }

    async fn list(&self, at: SlotRef<'_>, range: &Range<'_>) -> Result<Vec<(String, Stored)>> {
        let SlotRef { topic, slot } = at;
        self.run(List { topic, slot, range }).await
    }

    async fn dead_page(
        &self,
        at: SlotRef<'_>,
        after: Option<&DeadCursor>,
        limit: usize,
    ) -> Result<Vec<DeadEntry>> {
        let SlotRef { topic, slot } = at;
        self.run(DeadPage {
            topic,
            slot,
            after,
            limit,
        })
        .await
    }

    async fn requeue(&self, at: SlotRef<'_>, id: &str, now: Millis) -> Result<bool> {
        let SlotRef { topic, slot } = at;
        self.run(Requeue {
            topic,
            slot,
            id,
            now,
        })
        .await
    }

    async fn dead_delete(&self, at: SlotRef<'_>, id: &str) -> Result<bool> {
        let SlotRef { topic, slot } = at;
        self.run(DeadDelete { topic, slot, id }).await
    }

    async fn slot_stats(&self, at: SlotRef<'_>) -> Result<SlotStats> {
        let SlotRef { topic, slot } = at;
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

    async fn import(&self, at: SlotRef<'_>, jobs: &[Imported]) -> Result<u64> {
        let SlotRef { topic, slot } = at;
        self.run(Import { topic, slot, jobs }).await
    }

    async fn slot_bytes(&self, at: SlotRef<'_>) -> Result<u64> {
        let SlotRef { topic, slot } = at;
        let keys = SlotKeys::new(&topic.name, slot);
        // Exact for a small hash (one listpack); a large one is estimated from 64 of its
        // fields, so the read stays cheap on a slot of millions.
        let bytes: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&keys.job)
            .arg("SAMPLES")
            .arg(64)
            .query_async(&mut self.conn())
            .await?;
        Ok(bytes.unwrap_or(0))
    }

    async fn scan_ids(
        &self,
        at: SlotRef<'_>,
        state: JobState,
        cursor: u64,
        count: usize,
    ) -> Result<(u64, Vec<String>)> {
        let SlotRef { topic, slot } = at;
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
        // (see pump.lua) is longer than any id may be, and is no job; a due set's member of a
        // job with a record is its id and a mark (lib.lua's MARK).
        let ids = page
            .into_iter()
            .step_by(2)
            .filter(|id| id.chars().count() <= crate::validate::MAX_ID_LEN)
            .map(|mut id| {
                if state == JobState::Scheduled && id.ends_with(DUE_MARK) {
                    id.pop();
                }
                id
            })
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
                    .map_err(|e| Error::undecodable(format!("event {id}"), e))?;
                event.id = id.to_string();
                Ok(event)
            })
            .collect()
    }
}

//! One slot's jobs in memory: each operation takes the slot's lock, applies the state
//! machine of `slot.rs` and journals the change before it is answered.

use std::sync::PoisonError;

use async_trait::async_trait;

use super::journal::Op;
use super::slot::SlotState;
use crate::error::{Error, Result};
use crate::events::Event;
use crate::model::{DeadCursor, Finished, JobState, Leased, Settlement, SlotStats};
use crate::store::engine::{
    ClaimSettlement, DeadEntry, Imported, PumpArgs, Range, SlotJobs, SlotPumped, SlotReset,
    SlotScheduled, Stored, Write,
};
use crate::store::event_id::EventId;
use crate::store::record::Record;
use crate::time::Millis;
use crate::topic::TopicConfig;

use super::MemoryEngine;

#[async_trait]
impl SlotJobs for MemoryEngine {
    async fn schedule(
        &self,
        topic: &TopicConfig,
        slot: u32,
        w: Write<'_>,
    ) -> Result<SlotScheduled> {
        self.with_slot(topic, slot, true, |s| {
            let mut r = s.schedule(w.id, w.mode, w.fire_at, w.now, w.spec);
            r.stored = s.get(w.id);
            r
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
        self.with_slot(topic, slot, true, |s| s.reset_many(now, create, items))
            .await
    }

    async fn cancel(&self, topic: &TopicConfig, slot: u32, id: &str) -> Result<Option<JobState>> {
        self.with_slot(topic, slot, true, |s| s.cancel(id)).await
    }

    async fn get(
        &self,
        topic: &TopicConfig,
        slot: u32,
        ids: &[&str],
    ) -> Result<Vec<Option<Stored>>> {
        self.with_slot(topic, slot, false, |s| {
            ids.iter().map(|id| s.get(id)).collect()
        })
        .await
    }

    // In process a run sent back costs no round trip: the slot sends a full key's back, and
    // `args.aside` is not read.
    async fn pump(
        &self,
        topic: &TopicConfig,
        slot: u32,
        args: &PumpArgs<'_>,
    ) -> Result<SlotPumped> {
        let PumpArgs {
            now,
            lead,
            limit,
            lease_ms,
            fence,
            ..
        } = *args;
        let lease = crate::num::millis(lease_ms);
        self.with_slot(topic, slot, true, |s| match s.fenced(fence) {
            Some(held) => Err(Error::Fenced {
                topic: topic.name.clone(),
                slot,
                message: format!("the slot's fence is {held}, not {fence}"),
            }),
            None => Ok(s.pump(now, lead, limit, lease, topic.max_attempts)),
        })
        .await?
    }

    async fn settle(
        &self,
        topic: &TopicConfig,
        slot: u32,
        batch: &[Settlement],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        self.with_slot_events(topic, slot, true, |s| settle_in(s, topic, batch, now))
            .await
    }

    async fn settle_claimed(
        &self,
        topic: &TopicConfig,
        slot: u32,
        batch: &[ClaimSettlement<'_>],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        self.with_slot_events(topic, slot, true, |s| {
            // Each live run's details from its record, under the same lock as its settling.
            let mut live = Vec::new();
            let mut runs = Vec::new();
            for (k, c) in batch.iter().enumerate() {
                let Some(stored) = s.get(c.id) else { continue };
                if stored.state != JobState::Running || stored.record.token != Some(c.token) {
                    continue;
                }
                let lease_until = stored.score;
                let Ok(job) =
                    stored
                        .record
                        .into_job(topic, c.id.to_string(), JobState::Running, lease_until)
                else {
                    continue; // unreadable: left running, it comes back after its lease
                };
                let run = Leased {
                    job,
                    slot,
                    token: c.token,
                    lease_until,
                    handed_record: Default::default(),
                };
                runs.push(Settlement::new(run, c.outcome.clone(), now));
                live.push(k);
            }
            let (results, events) = settle_in(s, topic, &runs, now);
            let mut done = vec![Finished::Stale; batch.len()];
            for (k, f) in live.into_iter().zip(results) {
                done[k] = f;
            }
            (done, events)
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
        self.with_slot(topic, slot, true, |s| s.touch(id, token, until))
            .await
    }

    fn list_reads_whole_slots(&self) -> bool {
        true
    }

    async fn list(
        &self,
        topic: &TopicConfig,
        slot: u32,
        r: &Range<'_>,
    ) -> Result<Vec<(String, Stored)>> {
        self.with_slot(topic, slot, false, |s| s.list(r)).await
    }

    async fn dead_page(
        &self,
        topic: &TopicConfig,
        slot: u32,
        after: Option<&DeadCursor>,
        limit: usize,
    ) -> Result<Vec<DeadEntry>> {
        self.with_slot(topic, slot, false, |s| s.dead_page(after, limit))
            .await
    }

    async fn requeue(&self, topic: &TopicConfig, slot: u32, id: &str, now: Millis) -> Result<bool> {
        self.with_slot(topic, slot, true, |s| s.requeue(id, now))
            .await
    }

    async fn dead_delete(&self, topic: &TopicConfig, slot: u32, id: &str) -> Result<bool> {
        self.with_slot(topic, slot, true, |s| s.dead_delete(id))
            .await
    }

    async fn slot_stats(&self, topic: &TopicConfig, slot: u32) -> Result<SlotStats> {
        self.with_slot(topic, slot, false, |s| s.stats(slot)).await
    }

    async fn import(&self, topic: &TopicConfig, slot: u32, jobs: &[Imported]) -> Result<u64> {
        self.with_slot(topic, slot, true, |s| s.import(jobs)).await
    }

    async fn slot_bytes(&self, topic: &TopicConfig, slot: u32) -> Result<u64> {
        self.with_slot(topic, slot, false, |s| s.bytes()).await
    }

    async fn scan_ids(
        &self,
        topic: &TopicConfig,
        slot: u32,
        state: JobState,
        _cursor: u64,
        _count: usize,
    ) -> Result<(u64, Vec<String>)> {
        // In process: the whole slot in one step, under its lock.
        self.with_slot(topic, slot, false, |s| {
            let ids = s
                .all()
                .filter(|e| e.state == state)
                .map(|e| e.id.to_string())
                .collect();
            (0, ids)
        })
        .await
    }

    async fn append_events(&self, topic: &TopicConfig, events: &[Event]) -> Result<()> {
        self.check_writable()?;
        let ticket = {
            let mut rings = self.events.lock().unwrap_or_else(PoisonError::into_inner);
            let added = rings.ring(&topic.name).number(events.iter().cloned());
            let ticket = self.journal_grouped(&[Op::Events {
                topic: topic.name.clone(),
                events: added.clone(),
            }])?;
            rings.add(&topic.name, added, self.events_cap);
            ticket
        };
        if let Some(ticket) = ticket {
            self.durable(ticket).await?;
        }
        Ok(())
    }

    /// Memory event ids are `seq-0`: the cursor's first number is the ring's position.
    async fn read_events(
        &self,
        topic: &TopicConfig,
        after: Option<EventId>,
        limit: usize,
    ) -> Result<Vec<Event>> {
        let after = after.map_or(0, |c| c.ms);
        let all = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(all
            .get(&topic.name)
            .map(|ring| {
                ring.buf
                    .iter()
                    .filter(|e| {
                        EventId::parse(&e.id)
                            .map(|c| c.ms)
                            .is_some_and(|s| s > after)
                    })
                    .take(limit)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }
}

/// `settle.lua` on a slot's state: each run's outcome applied, and the events it appends.
fn settle_in(
    s: &mut SlotState,
    topic: &TopicConfig,
    batch: &[Settlement],
    now: Millis,
) -> (Vec<Finished>, Vec<Event>) {
    let mut events = Vec::new();
    let done = batch
        .iter()
        .map(|item| {
            let run = &item.run;
            let finished = s.settle_run(
                &run.job.id,
                run.token,
                &item.outcome,
                now,
                topic.max_attempts,
            );
            events.extend(Event::of_settled(item, finished));
            finished
        })
        .collect();
    (done, events)
}

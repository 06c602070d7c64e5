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
    ClaimSettlement, DeadEntry, Imported, PumpArgs, Range, SlotJobs, SlotPumped, SlotRef,
    SlotReset, SlotScheduled, Stored, Write,
};
use crate::store::event_id::EventId;
use crate::store::record::Record;
use crate::time::Millis;
use crate::topic::TopicConfig;

use super::MemoryEngine;

#[async_trait]
impl SlotJobs for MemoryEngine {
    async fn schedule(&self, at: SlotRef<'_>, w: Write<'_>) -> Result<SlotScheduled> {
        let SlotRef { topic, slot } = at;
        self.with_slot(topic, slot, true, |s| {
            let mut r = s.schedule(w.id, w.mode, w.fire_at, w.now, w.spec);
            r.stored = s.get(w.id);
            r
        })
        .await
    }

    async fn reset_many(
        &self,
        at: SlotRef<'_>,
        items: &[(&str, Millis)],
        create: Option<&Record>,
        now: Millis,
    ) -> Result<SlotReset> {
        let SlotRef { topic, slot } = at;
        self.with_slot(topic, slot, true, |s| s.reset_many(now, create, items))
            .await
    }

    async fn cancel(&self, at: SlotRef<'_>, id: &str) -> Result<Option<JobState>> {
        let SlotRef { topic, slot } = at;
        self.with_slot(topic, slot, true, |s| s.cancel(id)).await
    }

    async fn get(&self, at: SlotRef<'_>, ids: &[&str]) -> Result<Vec<Option<Stored>>> {
        let SlotRef { topic, slot } = at;
        self.with_slot(topic, slot, false, |s| {
            ids.iter().map(|id| s.get(id)).collect()
        })
        .await
    }

    // In process a run sent back costs no round trip: the slot sends a full key's back, and
    // `args.aside` is not read.
    async fn pump(&self, at: SlotRef<'_>, args: &PumpArgs<'_>) -> Result<SlotPumped> {
        let SlotRef { topic, slot } = at;
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
        at: SlotRef<'_>,
        batch: &[Settlement],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        let SlotRef { topic, slot } = at;
        self.with_slot_events(topic, slot, true, |s| settle_in(s, topic, batch, now))
            .await
    }

    async fn settle_claimed(
        &self,
        at: SlotRef<'_>,
        batch: &[ClaimSettlement<'_>],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        let SlotRef { topic, slot } = at;
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

    async fn touch(&self, at: SlotRef<'_>, id: &str, token: u64, until: Millis) -> Result<bool> {
        let SlotRef { topic, slot } = at;
        self.with_slot(topic, slot, true, |s| s.touch(id, token, until))
            .await
    }

    fn list_reads_whole_slots(&self) -> bool {
        true
    }

    async fn list(&self, at: SlotRef<'_>, r: &Range<'_>) -> Result<Vec<(String, Stored)>> {
        let SlotRef { topic, slot } = at;
        self.with_slot(topic, slot, false, |s| s.list(r)).await
    }

    async fn dead_page(
        &self,
        at: SlotRef<'_>,
        after: Option<&DeadCursor>,
        limit: usize,
    ) -> Result<Vec<DeadEntry>> {
        let SlotRef { topic, slot } = at;
        self.with_slot(topic, slot, false, |s| s.dead_page(after, limit))
            .await
    }

    async fn requeue(&self, at: SlotRef<'_>, id: &str, now: Millis) -> Result<bool> {
        let SlotRef { topic, slot } = at;
        self.with_slot(topic, slot, true, |s| s.requeue(id, now))
            .await
    }

    async fn dead_delete(&self, at: SlotRef<'_>, id: &str) -> Result<bool> {
        let SlotRef { topic, slot } = at;
        self.with_slot(topic, slot, true, |s| s.dead_delete(id))
            .await
    }

    async fn slot_stats(&self, at: SlotRef<'_>) -> Result<SlotStats> {
        let SlotRef { topic, slot } = at;
        self.with_slot(topic, slot, false, |s| s.stats(slot)).await
    }

    async fn import(&self, at: SlotRef<'_>, jobs: &[Imported]) -> Result<u64> {
        let SlotRef { topic, slot } = at;
        self.with_slot(topic, slot, true, |s| s.import(jobs)).await
    }

    async fn slot_bytes(&self, at: SlotRef<'_>) -> Result<u64> {
        let SlotRef { topic, slot } = at;
        self.with_slot(topic, slot, false, |s| s.bytes()).await
    }

    async fn scan_ids(
        &self,
        at: SlotRef<'_>,
        state: JobState,
        _cursor: u64,
        _count: usize,
    ) -> Result<(u64, Vec<String>)> {
        let SlotRef { topic, slot } = at;
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
            events.extend(
                Event::of_settled(item, finished)
                    .into_iter()
                    .filter(|e| topic.events.keeps(&e.event)),
            );
            finished
        })
        .collect();
    (done, events)
}

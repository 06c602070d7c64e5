//! [`SlotDoor`]: one slot's door to its engine, made once from the topic's settings as the
//! caller holds them, the slot and the owner fence, so that the fire path names no topic
//! and looks none up again. The slot actor keeps one (rebuilt when its settings or its
//! fence change), a claim opens one per slot it takes from, and the conformance suite is
//! handed one (`conformance::RuntimeOps::door`).
//!
//! Its calls: `pump_owned` (the owner's whole pump: the runs of a lost answer adopted, the
//! fires a rate limit grants taken, the slot pumped, the fires it did not use given back),
//! its parts (`pump`, `pump_fenced`, `pump_setting_aside`, `adopt`, `take_fires`,
//! `give_back_fires`), a consumer's `claim`, `settle` and `finish`, `extend`, `head`, and a
//! flow key's room (`flow_take`, `flow_release`).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::flow::{FlowLimits, SetAside};
use crate::model::{Finished, Leased, Pumped, RunOutcome, Settlement};
use crate::store::engine::SlotRef;
use crate::store::engine::{Engine, PumpArgs};
use crate::store::flow::{FlowAsk, FlowGrant};
use crate::store::rate::{FireBudget, Grant};
use crate::time::Millis;
use crate::topic::TopicConfig;

use super::Store;
use super::handouts::Handouts;
use super::runs::{leased, pump_slot, recurring, settle_recurring};

/// One slot's door to the store (see the module doc). Cheap to clone: three `Arc`s.
#[derive(Clone)]
pub struct SlotDoor {
    engine: Arc<dyn Engine>,
    handouts: Arc<Handouts>,
    topic: Arc<TopicConfig>,
    slot: u32,
    /// The owner lease's fence (`Store::own`); 0 for a door that owns nothing (a claim's).
    fence: u64,
}

/// What a slot's owner asks of one pump ([`SlotDoor::pump_owned`]).
#[derive(Debug, Clone, Copy)]
pub struct PumpAsk<'a> {
    /// The time of the pump.
    pub now: Millis,
    /// Jobs due up to this long after `now` are leased too (the slot's lead and window).
    pub reach: Millis,
    /// Most runs to lease (the slot's room).
    pub want: usize,
    /// The highest token the slot saw, when a pump's answer was lost: the runs handed out
    /// above it are adopted first.
    pub adopt_above: Option<u64>,
    /// The full flow keys whose due runs are set aside, not leased.
    pub aside: &'a SetAside,
}

/// What an owner's pump answered.
#[derive(Debug)]
pub struct PumpAnswer {
    /// Runs of a lost answer, adopted.
    pub adopted: Vec<Leased>,
    /// What the pump leased.
    pub pumped: Pumped,
    /// The fires the topic's rate limit granted (all asked for when it has none), and
    /// those the pump handed out.
    pub fires: FireBudget,
}

impl Store {
    /// The door of slot `slot` of the topic `topic` (its settings as the caller holds them)
    /// under owner fence `fence` (0: owns nothing). `slot` must be one of the topic's.
    pub(crate) fn door(&self, topic: Arc<TopicConfig>, slot: u32, fence: u64) -> Result<SlotDoor> {
        Self::check_slot(&topic, slot)?;
        Ok(self.slot_door(topic, slot, fence))
    }

    /// [`Store::door`] for a slot actor, whose slot is one of its topic's by construction
    /// (a topic's slots are only ever doubled).
    pub(crate) fn slot_door(&self, topic: Arc<TopicConfig>, slot: u32, fence: u64) -> SlotDoor {
        debug_assert!(slot < topic.slots, "slot {slot} of {} slots", topic.slots);
        SlotDoor {
            engine: Arc::clone(&self.engine),
            handouts: Arc::clone(&self.handouts),
            topic,
            slot,
            fence,
        }
    }

    /// [`Store::door`] of an existing topic named `topic`, its settings read now.
    pub(crate) async fn door_of(&self, topic: &str, slot: u32, fence: u64) -> Result<SlotDoor> {
        let t = self.existing_topic(topic).await?;
        self.door(t, slot, fence)
    }
}

impl SlotDoor {
    /// The topic's settings this door was made with.
    pub fn topic(&self) -> &Arc<TopicConfig> {
        &self.topic
    }

    /// The slot.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The same door under the topic's new settings (a topic's slots are only ever
    /// doubled, so the slot is still one of its).
    pub(crate) fn with_topic(&self, topic: Arc<TopicConfig>) -> SlotDoor {
        debug_assert!(self.slot < topic.slots);
        SlotDoor {
            topic,
            ..self.clone()
        }
    }

    /// The same door under a new owner fence.
    pub(crate) fn with_fence(&self, fence: u64) -> SlotDoor {
        SlotDoor {
            fence,
            ..self.clone()
        }
    }

    /// The owner fence (0: owns nothing; an owner's fence is never 0).
    fn owner_fence(&self) -> u64 {
        self.fence.max(1)
    }

    /// The owner's pump, in the order it must go: the runs of a lost answer (`adopt_above`)
    /// adopted; for a rate-limited topic, up to `want` fires taken from its bucket; the
    /// slot pumped for that many (`pump_setting_aside`); the fires it did not use given
    /// back (lost, that only holds fires back for a twentieth of a second). Nothing is
    /// pumped when the bucket grants nothing.
    pub async fn pump_owned(&self, ask: &PumpAsk<'_>) -> Result<PumpAnswer> {
        let adopted = match ask.adopt_above {
            Some(above) => self.adopt(above).await?,
            None => Vec::new(),
        };
        let want = crate::num::to_u32(ask.want);
        let mut fires = FireBudget::new(want, self.take_fires(want, ask.now).await?);
        if fires.dry() {
            return Ok(PumpAnswer {
                adopted,
                pumped: Pumped::default(),
                fires,
            });
        }
        let limit = usize::try_from(fires.room()).unwrap_or(ask.want);
        let pumped = self
            .pump_setting_aside(ask.now, ask.reach, limit, ask.aside)
            .await?;
        fires.spend(pumped.jobs.len());
        let _ = self.give_back_fires(fires.unused(), ask.now).await;
        Ok(PumpAnswer {
            adopted,
            pumped,
            fires,
        })
    }

    /// Hands out up to `limit` of the slot's due jobs (fire time at or before `now`) with
    /// the topic's lease, and takes back runs whose lease expired; owns nothing.
    pub async fn pump(&self, now: Millis, limit: usize) -> Result<Pumped> {
        self.lease_unowned(now, limit, self.topic.visibility_timeout_ms)
            .await
    }

    /// `pump` with a lease of `lease_ms`: no fence, no lead, no key set aside.
    async fn lease_unowned(&self, now: Millis, limit: usize, lease_ms: u64) -> Result<Pumped> {
        let aside = SetAside::default();
        let args = PumpArgs {
            now,
            lead: 0,
            limit,
            lease_ms,
            fence: 0,
            aside: &aside,
        };
        pump_slot(&*self.engine, &self.topic, self.slot, &args).await
    }

    /// `pump` by the slot's owner: refused with `Error::Fenced`, changing nothing, unless
    /// the door's fence is the slot's current owner fence (see [`Store::own`]), so an
    /// instance that lost a slot (paused past its lease, say) never pumps it again. It also
    /// hands out jobs due within `lead` ms after `now`, which the caller holds until their
    /// fire time (the slot actor's lead and batch window); `next_at` is then when to pump
    /// again (the next due job's fire time less `lead`, or a lease deadline).
    pub async fn pump_fenced(&self, now: Millis, lead: Millis, limit: usize) -> Result<Pumped> {
        self.pump_setting_aside(now, lead, limit, &SetAside::default())
            .await
    }

    /// `pump_fenced` that may move the due runs of the keys in `aside` to their instants
    /// rather than lease them (`flow::SetAside`): the slot actor's pump while a key's share
    /// of its waiting room is full. `Pumped::set_aside` counts them.
    pub async fn pump_setting_aside(
        &self,
        now: Millis,
        lead: Millis,
        limit: usize,
        aside: &SetAside,
    ) -> Result<Pumped> {
        let args = PumpArgs {
            now,
            lead,
            limit,
            lease_ms: self.topic.visibility_timeout_ms,
            fence: self.owner_fence(),
            aside,
        };
        pump_slot(&*self.engine, &self.topic, self.slot, &args).await
    }

    /// For the slot's owner after a pump whose answer it never got: the runs handed out
    /// with a token above `above` (the highest it saw), so it runs them now rather than when
    /// their leases end. Refused with `Error::Fenced` unless the door's fence is the slot's.
    pub async fn adopt(&self, above: u64) -> Result<Vec<Leased>> {
        let (t, slot) = (&*self.topic, self.slot);
        self.engine
            .adopt(SlotRef::new(t, slot), self.owner_fence(), above)
            .await?
            .into_iter()
            .map(|(h, lease_until)| leased(t, slot, h, lease_until))
            .collect()
    }

    /// `pump` with a lease of `lease_ms` in place of the topic's visibility timeout: a
    /// consumer's claim. Its runs are kept until their acks (`handouts.rs`).
    pub async fn claim(&self, now: Millis, limit: usize, lease_ms: u64) -> Result<Pumped> {
        let pumped = self.lease_unowned(now, limit, lease_ms).await?;
        self.handouts.keep(&self.topic.name, &pumped.jobs, now);
        Ok(pumped)
    }

    /// Takes up to `want` fires of the topic from its rate limit (`max_fires_per_s`),
    /// shared by every instance: all of them when the topic has no limit, with no call to
    /// the store. A pump or claim asks for what it may hand out and gives back with
    /// [`SlotDoor::give_back_fires`] what it did not.
    pub async fn take_fires(&self, want: u32, now: Millis) -> Result<Grant> {
        match self.topic.max_fires_per_s {
            None => Ok(Grant::all(want)),
            Some(rate) => self.engine.take_fires(&self.topic, rate, want, now).await,
        }
    }

    /// Gives back `n` fires taken with [`SlotDoor::take_fires`] and not used.
    pub async fn give_back_fires(&self, n: u32, now: Millis) -> Result<()> {
        match self.topic.max_fires_per_s {
            Some(rate) if n > 0 => self.engine.give_back_fires(&self.topic, rate, n, now).await,
            _ => Ok(()),
        }
    }

    /// Applies the outcomes of runs of the slot and appends their events (see
    /// [`crate::events::Event::of_settled`]): a run's outcome and its events are one atomic
    /// step, so no job is acknowledged whose events were not stored, and the whole batch is
    /// one script call (Redis) or one lock and one journal write (memory). Tokens are
    /// checked run by run: a run whose lease was taken over gets `Finished::Stale`, and
    /// changes nothing. Answers what happened to each run, in order.
    pub async fn settle(&self, batch: &[Settlement], now: Millis) -> Result<Vec<Finished>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let (engine, t, slot) = (&*self.engine, &*self.topic, self.slot);
        let mut done = engine.settle(SlotRef::new(t, slot), batch, now).await?;
        if done.len() != batch.len() {
            return Err(Error::Corrupt(format!(
                "settle answered {} results for {} runs",
                done.len(),
                batch.len()
            )));
        }
        let ended: Vec<(usize, &str, &RunOutcome)> = recurring(&done)
            .into_iter()
            .map(|k| (k, batch[k].run.job.id.as_str(), &batch[k].outcome))
            .collect();
        settle_recurring(engine, t, slot, &mut done, &ended, now, |again| {
            let runs: Vec<Settlement> = again
                .into_iter()
                .map(|(k, outcome)| Settlement {
                    outcome,
                    ..batch[k].clone()
                })
                .collect();
            async move { engine.settle(SlotRef::new(t, slot), &runs, now).await }
        })
        .await?;
        Ok(done)
    }

    /// Applies one run's outcome, with no events of its handler's (`settle` of one).
    pub async fn finish(&self, run: &Leased, outcome: RunOutcome, now: Millis) -> Result<Finished> {
        let batch = [Settlement::new(run.clone(), outcome, now)];
        let done = self.settle(&batch, now).await?;
        done.first()
            .copied()
            .ok_or_else(|| Error::Corrupt("settle answered no result".into()))
    }

    /// Extends a live run's lease to `until`; false when the run is stale.
    pub async fn extend(&self, run: &Leased, until: Millis) -> Result<bool> {
        self.engine
            .touch(
                SlotRef::new(&self.topic, self.slot),
                &run.job.id,
                run.token,
                until,
            )
            .await
    }

    /// The slot's earliest due job or lease deadline, with no change.
    pub async fn head(&self) -> Result<Option<Millis>> {
        self.engine.head(&self.topic, self.slot).await
    }

    /// Grants room on a flow key to the first of `ask`'s runs that fit `limits`, over every
    /// instance on the store.
    pub async fn flow_take(
        &self,
        limits: &FlowLimits,
        ask: &FlowAsk<'_>,
        now: Millis,
    ) -> Result<FlowGrant> {
        self.engine.flow_take(&self.topic, limits, ask, now).await
    }

    /// Ends the room on flow key `key` of runs (`id:token`) that held it.
    pub async fn flow_release(&self, key: &str, runs: &[String]) -> Result<()> {
        self.engine.flow_release(&self.topic, key, runs).await
    }
}

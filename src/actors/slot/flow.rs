//! The slot's flow control: a due run of a limited key waits in its key's line (`flow_gate`)
//! until the store grants room; a key past its share is sent back, or set aside by the pump.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::SlotActor;
use super::flow_gate::{POLL_MS, member};
use super::runs::RoomFreed;
use crate::model::{Leased, RunOutcome};
use crate::time::Millis;

impl SlotActor {
    /// Hands a due job to its handler, or to its flow key's line when the key has limits;
    /// `fired_at` is now, read once for the batch.
    pub(super) fn start(&mut self, lease: Arc<Leased>, fired_at: Millis, ctx: &mut Context<Self>) {
        if let Some(key) = self.gated(&lease.job, fired_at) {
            if self.gate.line(&key)
                >= self.gate.share(
                    self.rt.settings.flow_max_waiting,
                    self.rt.settings.flow_max_waiting_per_key,
                )
            {
                self.defer(lease, &key, fired_at, ctx);
                return;
            }
            self.gate.wait(&key, lease, fired_at);
            self.metrics.waiting(1);
            self.ask_flow(key, ctx);
            self.signs.track(&self.book, &self.core, &self.gate);
            return;
        }
        self.run(lease, fired_at, None, ctx);
    }

    /// Sends a run of `key`, whose share of the waiting room is full, back to the store: due
    /// again when the runs ahead of it have likely had room, the attempt not counted. So one
    /// key's backlog waits in the store, and the slot goes on leasing other keys' jobs.
    pub(super) fn defer(
        &mut self,
        lease: Arc<Leased>,
        key: &str,
        now: Millis,
        ctx: &mut Context<Self>,
    ) {
        if !self.book.holds(&lease) {
            return;
        }
        let at = now.saturating_add(crate::num::millis(self.gate.defer_ms(key, now)));
        self.metrics.deferred(1);
        self.book.end(lease, RunOutcome::Defer { at }, now);
        self.signs.track(&self.book, &self.core, &self.gate);
        self.settle_soon(ctx);
    }

    /// The keys whose share of this slot's waiting room is full, each with the instant its
    /// runs sent back now are due again: the pump sets their due runs aside (`flow::SetAside`)
    /// rather than lease them for `defer` to send back one by one.
    pub(super) fn set_aside(&self, now: Millis) -> crate::flow::SetAside {
        let share = self.gate.share(
            self.rt.settings.flow_max_waiting,
            self.rt.settings.flow_max_waiting_per_key,
        );
        let keys: Vec<_> = self
            .gate
            .full(share)
            .map(|key| {
                let back = crate::num::millis(self.gate.back_in_ms(key, now));
                (key.to_string(), now.saturating_add(back))
            })
            .collect();
        if keys.is_empty() {
            return crate::flow::SetAside::default();
        }
        crate::flow::SetAside {
            keys,
            by_url: self
                .door
                .topic()
                .flow
                .as_ref()
                .is_some_and(|f| f.key == crate::flow::KeyFrom::Url),
        }
    }

    /// The flow key a due job waits on: its own or its type's, when that key has limits.
    /// A fire too late to run (`misfire`) waits for nothing.
    pub(super) fn gated(&self, job: &crate::model::Job, fired_at: Millis) -> Option<String> {
        if !self.door.topic().has_flow_limits() || job.misfire(fired_at).is_some() {
            return None;
        }
        let key = crate::flow::job_key(
            self.door.topic().flow.as_ref(),
            job.flow_key.as_deref(),
            || {
                self.rt
                    .types
                    .get(job.job_type.as_str())?
                    .handler
                    .flow_key(&job.payload)
            },
        )?;
        self.door.topic().flow_limits(&key).map(|_| key)
    }

    /// Asks the store for room on `key` for its line's first runs, starts those granted,
    /// and sets the next ask: when the rate has room again, or after a short poll while
    /// the parallelism is full (a run of the key ending here asks at once).
    pub(super) fn ask_flow(&mut self, key: String, ctx: &mut Context<Self>) {
        if let Some(timer) = self.timers.flow_asks.remove(&key) {
            ctx.cancel_future(timer);
        }
        let Some(ask) = self.gate.ask(&key) else {
            return;
        };
        let Some(limits) = self.door.topic().flow_limits(&key) else {
            // The key's limits are gone: its line fires now.
            let (runs, _) = self.gate.answered(&key, usize::MAX, self.rt.clock.now());
            self.metrics.left_line(runs.len());
            let now = self.rt.clock.now();
            for lease in runs {
                self.run(lease, now, None, ctx);
            }
            return;
        };
        let (door, now) = (self.door.clone(), self.rt.clock.now());
        let waiter = format!("{}/{}", self.rt.instance, self.door.slot());
        let asked_key = key.clone();
        let take = async move {
            let ask = crate::store::FlowAsk {
                key: &asked_key,
                runs: &ask.runs,
                hold_ms: door.topic().visibility_timeout_ms,
                waiter: &waiter,
                waiting: ask.waiting,
                oldest: ask.oldest,
            };
            door.flow_take(&limits, &ask, now).await
        };
        let holds = limits.parallelism.is_some();
        ctx.spawn(take.into_actor(self).map(move |answer, act, ctx| {
            act.flow_answered(key, holds, answer, ctx);
        }));
    }

    /// Takes in the store's answer for `key`'s line: starts the runs granted room (`holds`:
    /// the room is held until each run ends, the key having a parallelism), gives back the
    /// room of runs whose lease ran out while they waited, and sets the next ask.
    fn flow_answered(
        &mut self,
        key: String,
        holds: bool,
        answer: crate::error::Result<crate::store::FlowGrant>,
        ctx: &mut Context<Self>,
    ) {
        let (granted, retry_ms) = match answer {
            Ok(g) => (usize::try_from(g.granted).unwrap_or(0), g.retry_in_ms),
            Err(e) => {
                let (topic, slot) = (&self.door.topic().name, self.door.slot());
                tracing::warn!(topic, slot, key, error = %e, "could not ask for room on a flow key: asking again");
                (0, 4 * POLL_MS)
            }
        };
        let (runs, again) = self.gate.answered(&key, granted, self.rt.clock.now());
        self.metrics.left_line(runs.len());
        let now = self.rt.clock.now();
        let mut gone = Vec::new();
        for lease in runs {
            if !self.book.holds(&lease) {
                // Its lease ran out while it waited: the room goes back.
                gone.push(member(&lease));
                continue;
            }
            self.metrics.waited(now - lease.job.fire_at);
            self.run(lease, now, holds.then(|| key.clone()), ctx);
        }
        if holds && !gone.is_empty() {
            self.release_room(key.clone(), gone, ctx);
        }
        self.signs.track(&self.book, &self.core, &self.gate);
        if !self.gate.waits(&key) {
            return;
        }
        if again {
            self.ask_flow(key, ctx);
            return;
        }
        self.ask_flow_later(key, retry_ms, ctx);
    }

    /// Asks for `key`'s line again when it may have room: the rate, when its oldest fire
    /// leaves the period (`retry_ms`); the parallelism, when a run of the key ends here (its
    /// bell), or after a poll (one ended elsewhere).
    fn ask_flow_later(&mut self, key: String, retry_ms: u64, ctx: &mut Context<Self>) {
        let topic = &self.door.topic().name;
        let bell = (retry_ms == 0).then(|| self.rt.flow_bells.bell(topic, &key));
        let wait = Duration::from_millis(if retry_ms > 0 { retry_ms } else { POLL_MS });
        let until = async move {
            match bell {
                Some(bell) => {
                    let _ = tokio::time::timeout(wait, bell.notified()).await;
                }
                None => tokio::time::sleep(wait).await,
            }
        };
        let next = key.clone();
        let timer = ctx.spawn(until.into_actor(self).map(move |(), act, ctx| {
            act.ask_flow(next, ctx);
        }));
        if let Some(old) = self.timers.flow_asks.insert(key, timer) {
            ctx.cancel_future(old);
        }
    }

    /// Gives every run waiting for room back to the store, due at once and the attempt not
    /// counted (a drain, a pause): they fire from the store again.
    pub(super) fn give_back_waiting(&mut self, ctx: &mut Context<Self>) {
        let runs = self.gate.take_all();
        for (_, timer) in self.timers.flow_asks.drain() {
            ctx.cancel_future(timer);
        }
        if runs.is_empty() {
            return;
        }
        self.metrics.left_line(runs.len());
        let now = self.rt.clock.now();
        for lease in runs {
            self.book.end(lease, RunOutcome::Release, now);
        }
        self.signs.track(&self.book, &self.core, &self.gate);
    }
}

impl Handler<RoomFreed> for SlotActor {
    type Result = ();

    fn handle(&mut self, msg: RoomFreed, ctx: &mut Context<Self>) {
        if self.gate.waits(&msg.0) {
            self.ask_flow(msg.0, ctx);
        }
    }
}

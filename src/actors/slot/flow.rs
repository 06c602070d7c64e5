//! The slot's flow control: a due run of a limited key waits in its key's line (`flow_gate`)
//! until the store grants room; a key past its share is sent back, or set aside by the pump.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::SlotActor;
use super::flow_gate::{POLL_MS, member};
use crate::model::{Leased, RunOutcome};
use crate::time::Millis;

impl SlotActor {
    /// The topic's flow metrics: jobs waiting on this instance, and how long they waited.
    pub(super) fn flow_metrics(&mut self) -> &(prometheus::IntGauge, prometheus::Histogram) {
        self.metrics.flow(&self.rt.metrics, &self.door.topic().name)
    }

    /// Counts `n` more (or fewer) runs waiting for room on their flow key.
    pub(super) fn count_waiting(&mut self, n: i64) {
        self.flow_metrics().0.add(n);
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
        self.rt
            .metrics
            .flow_deferred
            .with_label_values(&[self.door.topic().name.as_str()])
            .inc();
        self.book.end(lease, RunOutcome::Defer { at }, now);
        self.track();
        self.settle_soon(ctx);
    }

    /// The keys whose share of this slot's waiting room is full, each with the instant its
    /// runs sent back now are due again: the pump sets their due runs aside (`flow::SetAside`)
    /// rather than lease them for `defer` to send back one by one.
    pub(super) fn set_aside(&self, now: Millis) -> crate::flow::SetAside {
        let share = self.key_share();
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

    /// Counts the runs a pump set aside as sent back, each under its key and due again at
    /// the instant the pump was given for it (`aside`).
    pub(super) fn count_set_aside(
        &mut self,
        aside: &[(String, Millis)],
        set_aside: &[(String, u32)],
    ) {
        for (key, n) in set_aside {
            let at = aside
                .iter()
                .find(|(k, _)| k == key)
                .map_or(0, |(_, at)| *at);
            self.gate.sent_back(key, u64::from(*n), at);
            self.rt
                .metrics
                .flow_deferred
                .with_label_values(&[self.door.topic().name.as_str()])
                .inc_by(u64::from(*n));
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
            self.count_waiting(-crate::num::signed(crate::num::usize_u64(runs.len())));
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
        self.count_waiting(-crate::num::signed(crate::num::usize_u64(runs.len())));
        let now = self.rt.clock.now();
        let mut gone = Vec::new();
        for lease in runs {
            if !self.book.holds(&lease) {
                // Its lease ran out while it waited: the room goes back.
                gone.push(member(&lease));
                continue;
            }
            self.flow_metrics()
                .1
                .observe(crate::num::float((now - lease.job.fire_at).max(0)) / 1_000.0);
            self.run(lease, now, holds.then(|| key.clone()), ctx);
        }
        if holds && !gone.is_empty() {
            self.release_flow(key.clone(), gone, ctx);
        }
        self.track();
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

    /// Ends the room on `key` of runs that held it, then asks for this slot's line.
    pub(super) fn release_flow(&mut self, key: String, runs: Vec<String>, ctx: &mut Context<Self>) {
        let door = self.door.clone();
        let release = async move {
            let done = door.flow_release(&key, &runs).await;
            (key, done)
        };
        ctx.spawn(release.into_actor(self).map(|(key, done), act, ctx| {
            match done {
                Ok(()) => act.rt.flow_bells.ring(&act.door.topic().name, &key),
                Err(e) => {
                    tracing::warn!(topic = %act.door.topic().name, slot = act.door.slot(), key, error = %e, "could not end a run's room on its flow key: it ends with the run's lease");
                }
            }
            if act.gate.waits(&key) {
                act.ask_flow(key, ctx);
            }
        }));
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
        self.count_waiting(-crate::num::signed(crate::num::usize_u64(runs.len())));
        let now = self.rt.clock.now();
        for lease in runs {
            self.book.end(lease, RunOutcome::Release, now);
        }
        self.track();
    }
}

//! The slot's pumps: what it asks the store for (adopting a lost answer's runs, the fires a
//! rate limit grants, the keys set aside), and the runs it takes in.

use std::sync::Arc;

use actix::prelude::*;

use super::super::messages::Pump;
use super::SlotActor;
use super::core::{AfterPump, PumpEnd};
use crate::model::{Leased, Pumped};
use crate::store::{PumpAnswer, PumpAsk};
use crate::time::Millis;

impl SlotActor {
    /// Sleeps until `next_at`; with none, holds no timer at all. A job written after the
    /// pump that told `next_at` wakes the slot by its notice, and one whose notice was lost
    /// is found by the instance's safety net (the keeper's `safety_net`), not by a poll of
    /// each slot's own.
    pub(super) fn arm(&mut self, next_at: Option<Millis>, ctx: &mut Context<Self>) {
        self.cancel_timer(ctx);
        let Some(at) = next_at else {
            return;
        };
        // To the microsecond: the job is due at the start of its millisecond.
        let wake = self
            .rt
            .clock
            .until(at * 1_000)
            .into_actor(self)
            .map(|_, act, ctx| {
                act.timers.next = None;
                act.signs.status(|s| s.armed_at = None);
                act.pump(ctx);
            });
        let handle = ctx.spawn(wake);
        self.timers.next = Some((handle, at));
        self.signs.status(|s| s.armed_at = Some(at));
    }

    /// Cancels the timer of the next pump.
    pub(super) fn cancel_timer(&mut self, ctx: &mut Context<Self>) {
        if let Some((handle, _)) = self.timers.next.take() {
            ctx.cancel_future(handle);
        }
        self.signs.status(|s| s.armed_at = None);
    }

    /// Pumps now if the core allows it (see `SlotCore::want_pump`).
    pub(super) fn pump(&mut self, ctx: &mut Context<Self>) {
        let capacity = self.capacity();
        let Some(start) = self.core.want_pump(capacity, self.door.topic().paused) else {
            return;
        };
        self.cancel_timer(ctx);
        self.signs.pumping(self.core.pump_in_flight());
        let now = self.rt.clock.now();
        let door = self.door.clone();
        // Past the lead, the window: jobs due in it go out in this pump too.
        let (lead, window) = (
            self.lead.within(
                std::time::Instant::now(),
                self.door.topic().visibility_timeout_ms,
            ),
            self.rt.settings.batch_window(),
        );
        let reach = lead.saturating_add(window);
        self.metrics
            .pump_lead
            .observe(crate::num::float(lead) / 1_000.0);
        let aside = self.set_aside(now);
        let aside_at = aside.keys.clone();
        let fut = async move {
            let ask = PumpAsk {
                now,
                reach,
                want: capacity,
                adopt_above: start.adopt_above,
                aside: &aside,
            };
            door.pump_owned(&ask).await
        };
        let asked = Asked {
            at: std::time::Instant::now(),
            at_us: self.rt.clock.now_us(),
            now,
            capacity,
            reach,
            aside_at,
        };
        ctx.spawn(fut.into_actor(self).map(move |result, act, ctx| {
            act.pump_answered(result, asked, ctx);
        }));
    }

    /// Takes in a pump's answer, tells the core how it ended, and does what the core says
    /// next.
    fn pump_answered(
        &mut self,
        result: crate::error::Result<PumpAnswer>,
        asked: Asked,
        ctx: &mut Context<Self>,
    ) {
        let answered = std::time::Instant::now();
        let round_trip = answered.saturating_duration_since(asked.at);
        self.metrics.pump_seconds.observe(round_trip.as_secs_f64());
        let (end, next_at) = match result {
            Ok(answer) => {
                self.lead.observe(round_trip, answered);
                self.took(answer, &asked, ctx)
            }
            Err(e) => (self.pump_failed(e), None),
        };
        let after = self.core.pump_answered(end);
        self.signs.pumping(self.core.pump_in_flight());
        match after {
            AfterPump::PumpAgain => ctx.notify(Pump),
            // The store counts the next time back from the next fire time by the whole
            // reach; the slot pumps a lead before it (the lead as it stands now, which this
            // pump's round trip may have moved), so that the pump takes the window that
            // follows it.
            AfterPump::SleepUntilNext => {
                let back = asked.reach.saturating_sub(self.lead.within(
                    std::time::Instant::now(),
                    self.door.topic().visibility_timeout_ms,
                ));
                let next = next_at.map(|at| at.saturating_add(back));
                // A wake told during the pump (rule 6 of `core.rs`).
                let next = match (next, self.core.take_woken()) {
                    (Some(n), Some(w)) => Some(n.min(w)),
                    (n, w) => n.or(w),
                };
                self.arm(next, ctx);
                self.offer_sleep();
            }
            AfterPump::SleepFor(wait) => {
                let wait = crate::num::millis(crate::num::duration_ms(wait));
                let at = self.rt.clock.now().saturating_add(wait);
                self.arm(Some(at), ctx);
            }
            AfterPump::Nothing => {}
        }
    }

    /// Takes in what a pump leased: how the pump ended (held back by the rate limit, or
    /// leased, full or not) and the slot's next time.
    fn took(
        &mut self,
        answer: PumpAnswer,
        asked: &Asked,
        ctx: &mut Context<Self>,
    ) -> (PumpEnd, Option<Millis>) {
        let PumpAnswer {
            adopted,
            pumped,
            fires,
        } = answer;
        let full = pumped.jobs.len() >= asked.capacity;
        let next_at = pumped.next_at;
        let sent_back = self.gate.set_aside(&asked.aside_at, &pumped.set_aside);
        self.metrics.deferred(sent_back);
        self.take_runs(adopted, pumped, asked.at_us, asked.now, ctx);
        let end = if fires.held_back() {
            PumpEnd::Limited {
                retry_in_ms: fires.retry_in_ms(),
            }
        } else {
            PumpEnd::Leased { full }
        };
        (end, next_at)
    }

    /// A pump that failed: fenced (another instance owns the slot now) or the store's error.
    fn pump_failed(&mut self, e: crate::error::Error) -> PumpEnd {
        let (topic, slot) = (self.door.topic().name.clone(), self.door.slot());
        if let crate::error::Error::Fenced { .. } = e {
            tracing::info!(topic, slot, error = %e, "another instance owns the slot now: pumping stops");
            self.signs.status(|s| {
                s.last_error = Some(e.to_string());
                s.fenced = true;
            });
            super::signs::slot_changed(&self.rt.slot_changes);
            return PumpEnd::Fenced;
        }
        tracing::warn!(topic, slot, error = %e, "pump failed");
        self.metrics.pump_failed();
        self.signs.status(|s| s.last_error = Some(e.to_string()));
        PumpEnd::Failed
    }

    /// Takes a run in: it is running from now on (for the lease sweep, a drain and the
    /// count in flight), and goes to its handler now if it is due by `now_us` (when its pump
    /// answered, read once for the batch), or into `held` if the pump leased it ahead (the
    /// lead): never early. The caller holds those (`hold`) and tracks the runs in flight
    /// once it has dispatched them all.
    pub(super) fn dispatch(
        &mut self,
        lease: Leased,
        now_us: i64,
        held: &mut Vec<Arc<Leased>>,
        ctx: &mut Context<Self>,
    ) {
        // The lease is shared by the book and this run's future.
        let lease = self.book.take(lease);
        self.arm_lease_sweep(ctx);
        if lease.job.fire_at.saturating_mul(1_000) > now_us {
            held.push(lease);
        } else {
            self.start(lease, now_us.div_euclid(1_000), ctx);
        }
    }

    /// Waits until the runs leased ahead are due on the store's clock, one wait per fire
    /// time, then starts those still this actor's (a run whose lease ran out meanwhile
    /// belongs to the store's next lease of its job).
    pub(super) fn hold(&mut self, mut held: Vec<Arc<Leased>>, ctx: &mut Context<Self>) {
        held.sort_by_key(|lease| lease.job.fire_at);
        for group in held.chunk_by(|a, b| a.job.fire_at == b.job.fire_at) {
            let group = group.to_vec();
            let wait = self
                .rt
                .clock
                .until(group[0].job.fire_at.saturating_mul(1_000));
            ctx.spawn(wait.into_actor(self).map(move |_, act, ctx| {
                let now_us = act.rt.clock.now_us();
                let mut still = Vec::new();
                for lease in group {
                    if !act.book.holds(&lease) {
                        continue;
                    }
                    if lease.job.fire_at.saturating_mul(1_000) > now_us {
                        // Not yet due by the store's clock as sampled (a new sample moved
                        // it back, or a test's clock stands still): wait again.
                        still.push(lease);
                    } else {
                        act.start(lease, now_us.div_euclid(1_000), ctx);
                    }
                }
                act.hold(still, ctx);
            }));
        }
    }

    /// Takes in the runs a pump answered with: the adopted ones (a lost answer's, not yet
    /// running here) and the pumped ones, each to its handler now or held until its fire time.
    pub(super) fn take_runs(
        &mut self,
        adopted: Vec<Leased>,
        pumped: Pumped,
        asked_us: i64,
        now: Millis,
        ctx: &mut Context<Self>,
    ) {
        let now_us = self.rt.clock.now_us();
        let mut held = Vec::new();
        for lease in adopted {
            if !self.book.holds_job(&lease.job.id) {
                tracing::info!(topic = %self.door.topic().name, slot = self.door.slot(), job = %lease.job.id, "running a job whose pump's answer was lost");
                self.core.saw_token(lease.token);
                self.dispatch(lease, now_us, &mut held, ctx);
            }
        }
        let n = pumped.jobs.len();
        self.signs.status(|s| {
            s.last_pump = Some(now);
            s.last_error = None;
        });
        self.metrics
            .pump_batch
            .observe(crate::num::float(crate::num::signed(
                crate::num::usize_u64(n),
            )));
        // Due between the ask and the answer: late by the round trip past the lead.
        let after = pumped
            .jobs
            .iter()
            .filter(|lease| {
                (asked_us + 1..=now_us).contains(&lease.job.fire_at.saturating_mul(1_000))
            })
            .count();
        self.metrics
            .fired_after_pump
            .inc_by(crate::num::usize_u64(after));
        for lease in pumped.jobs {
            self.core.saw_token(lease.token);
            self.dispatch(lease, now_us, &mut held, ctx);
        }
        self.hold(held, ctx);
        self.signs.track(&self.book, &self.core, &self.gate);
    }
}

/// What a pump asked, for taking in its answer.
struct Asked {
    /// When it asked (for its round trip), and the clock then in µs.
    at: std::time::Instant,
    at_us: i64,
    /// The pump's time.
    now: Millis,
    /// The slot's room: most runs it asked for.
    capacity: usize,
    /// Its lead and window: how far past `now` it leased.
    reach: Millis,
    /// The keys it set aside, each with its instant.
    aside_at: Vec<(String, Millis)>,
}

//! The slot's pumps: what it asks the store for (adopting a lost answer's runs, the fires a
//! rate limit grants, the keys set aside), and the runs it takes in.

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
                act.set_status(|s| s.armed_at = None);
                act.pump(ctx);
            });
        let handle = ctx.spawn(wake);
        self.timers.next = Some((handle, at));
        self.set_status(|s| s.armed_at = Some(at));
    }

    /// Pumps now if the core allows it (see `SlotCore::want_pump`).
    pub(super) fn pump(&mut self, ctx: &mut Context<Self>) {
        let capacity = self.capacity();
        let Some(start) = self.core.want_pump(capacity, self.door.topic().paused) else {
            return;
        };
        self.cancel_timer(ctx);
        self.publish_pumping();
        let now = self.rt.clock.now();
        let door = self.door.clone();
        // Past the lead, the window: jobs due in it go out in this pump too.
        let (lead, window) = (self.lead(), self.window());
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
        self.publish_pumping();
        match after {
            AfterPump::PumpAgain => ctx.notify(Pump),
            // The store counts the next time back from the next fire time by the whole
            // reach; the slot pumps a lead before it (the lead as it stands now, which this
            // pump's round trip may have moved), so that the pump takes the window that
            // follows it.
            AfterPump::SleepUntilNext => {
                let back = asked.reach.saturating_sub(self.lead());
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
        self.count_set_aside(&asked.aside_at, &pumped.set_aside);
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
            self.set_status(|s| {
                s.last_error = Some(e.to_string());
                s.fenced = true;
            });
            self.slot_changed();
            return PumpEnd::Fenced;
        }
        tracing::warn!(topic, slot, error = %e, "pump failed");
        self.rt
            .metrics
            .pump_failures
            .with_label_values(&[topic.as_str()])
            .inc();
        self.set_status(|s| s.last_error = Some(e.to_string()));
        PumpEnd::Failed
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
        self.set_status(|s| {
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
        self.track();
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

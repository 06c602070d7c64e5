//! The slot's settles: every outcome gathered since the last one goes to the store in one
//! atomic call, with its events; one the store could not take is kept and sent again.

use std::time::Duration;

use actix::prelude::*;

use super::SlotActor;
use super::core::{SettleEnd, SettleWhen};
use crate::model::{Finished, Settlement};

impl SlotActor {
    /// Settles the gathered outcomes now, or when the batch window closes if other runs of
    /// this slot are still to report (held for their fire time or in their handler): theirs
    /// then go in the same call. Nothing waits with no other run, when the window is 0, while
    /// draining, or once a pump's worth has gathered.
    pub(super) fn settle_soon(&mut self, ctx: &mut Context<Self>) {
        let window = self.rt.settings.batch_window();
        let full = self.book.waiting() >= self.rt.settings.pump_batch;
        let when =
            self.core
                .settle_when(crate::num::unsigned(window), self.book.running() > 0, full);
        match when {
            SettleWhen::Now => self.settle(ctx),
            SettleWhen::OpenWindow => {
                let wait = Duration::from_millis(crate::num::unsigned(window));
                self.timers.flush = Some(ctx.run_later(wait, |act, ctx| {
                    act.timers.flush = None;
                    act.core.window_closed();
                    act.settle(ctx);
                }));
            }
            SettleWhen::Wait => {}
        }
    }

    /// Sends every gathered outcome to the store in one call, unless a call is in flight
    /// (its return sends what gathered meanwhile) or waits out its backoff.
    pub(super) fn settle(&mut self, ctx: &mut Context<Self>) {
        if !self.core.begin_settle(self.book.waiting()) {
            return;
        }
        if let Some(flush) = self.timers.flush.take() {
            ctx.cancel_future(flush);
        }
        let batch = self.book.take_outcomes();
        let (door, now) = (self.door.clone(), self.rt.clock.now());
        // Traced runs' settles are spans of their jobs' traces, ended with the call.
        let spans: Vec<tracing::Span> = batch
            .iter()
            .filter_map(|s| {
                let job = &s.run.job;
                crate::otel::settle_span(
                    &door.topic().name,
                    &job.id,
                    job.traceparent.as_deref(),
                    s.outcome.as_str(),
                )
            })
            .collect();
        let fut = async move {
            let result = door.settle(&batch, now).await;
            drop(spans);
            (batch, result)
        };
        ctx.spawn(fut.into_actor(self).map(|(batch, result), act, ctx| {
            act.settled(batch, result, ctx);
        }));
    }

    /// Takes in a settle's answer: counts what it did, keeps the outcomes the store could
    /// not take for now, and does what the core says next.
    fn settled(
        &mut self,
        batch: Vec<Settlement>,
        result: crate::error::Result<Vec<Finished>>,
        ctx: &mut Context<Self>,
    ) {
        let (topic, slot) = (self.door.topic().name.clone(), self.door.slot());
        let mut unavailable = None;
        let end = match result {
            Ok(done) => SettleEnd::Applied {
                rescheduled: self.metrics.settled(&batch, &done),
            },
            Err(e) if e.is_unavailable() || matches!(e, crate::error::Error::StoreFull(_)) => {
                // Nothing of the batch was applied (one atomic step), and the store may be
                // back in a moment: the outcomes are kept, ahead of those gathered since, and
                // sent again. Each run's token still decides in the store whether its
                // outcome is current.
                self.signs.status(|s| s.last_error = Some(e.to_string()));
                unavailable = Some((batch.len(), e));
                self.book.keep(batch);
                SettleEnd::Unavailable
            }
            Err(e) => {
                // Refused for a reason a retry would not change: the runs stay running in
                // the store, and come back when their lease runs out (at least once).
                tracing::warn!(topic, slot, runs = batch.len(), error = %e, "could not settle runs; their leases will expire and they run again");
                self.signs.status(|s| s.last_error = Some(e.to_string()));
                SettleEnd::Refused
            }
        };
        if let Some(wait) = self.core.settle_answered(end) {
            if let Some((runs, e)) = &unavailable {
                tracing::warn!(topic, slot, runs, error = %e, retry_in_ms = crate::num::duration_ms(wait), "could not settle runs: trying again");
            }
            ctx.run_later(wait, |act, ctx| {
                act.core.backoff_over();
                act.settle(ctx);
            });
        }
        self.signs.track(&self.book, &self.core, &self.gate);
        self.settle_soon(ctx);
        if self.core.pump_wanted() {
            self.pump(ctx);
        }
        self.offer_sleep();
    }
}

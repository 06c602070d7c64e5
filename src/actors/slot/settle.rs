//! The slot's settles: every outcome gathered since the last one goes to the store in one
//! atomic call, with its events; one the store could not take is kept and sent again.

use super::*;

impl SlotActor {
    /// The handler duration histogram of this topic's `job_type`.
    pub(super) fn handler_duration(&mut self, job_type: &str) -> &prometheus::Histogram {
        self.metrics
            .handler_duration(&self.rt.metrics, &self.topic.name, job_type)
    }

    /// Turns a handler's report into the outcome the store applies.
    pub(super) fn settlement(
        &mut self,
        lease: Leased,
        report: RunReport,
        fired_at: Millis,
    ) -> Settlement {
        let now = self.rt.clock.now();
        let job = &lease.job;
        self.handler_duration(&job.job_type)
            .observe(report.duration.as_secs_f64());
        let (attempts, clock) = (job.attempts, &self.rt.clock);
        let outcome = report.outcome.into_run(
            job.fire_at,
            now,
            || self.topic.backoff.delay_ms(attempts, &mut rand::rng()),
            |delay| clock.after(delay),
        );
        Settlement {
            run: lease,
            outcome,
            fired_at,
            emitted: report.emitted,
        }
    }

    /// Settles the gathered outcomes now, or when the batch window closes if other runs of
    /// this slot are still to report (held for their fire time or in their handler): theirs
    /// then go in the same call. Nothing waits with no other run, when the window is 0, while
    /// draining, or once a pump's worth has gathered.
    pub(super) fn settle_soon(&mut self, ctx: &mut Context<Self>) {
        let window = self.window();
        let full = self.outcomes.len() >= self.rt.settings.pump_batch;
        let when =
            self.core
                .settle_when(crate::num::unsigned(window), !self.running.is_empty(), full);
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
        if !self.core.begin_settle(self.outcomes.len()) {
            return;
        }
        if let Some(flush) = self.timers.flush.take() {
            ctx.cancel_future(flush);
        }
        let batch = std::mem::take(&mut self.outcomes);
        let store = self.rt.store.clone();
        let (topic, slot, now) = (self.topic.name.clone(), self.slot, self.rt.clock.now());
        // Traced runs' settles are spans of their jobs' traces, ended with the call.
        let spans: Vec<tracing::Span> = batch
            .iter()
            .filter_map(|s| {
                let job = &s.run.job;
                crate::otel::settle_span(
                    &topic,
                    &job.id,
                    job.traceparent.as_deref(),
                    s.outcome.as_str(),
                )
            })
            .collect();
        let fut = async move {
            let result = store.settle(&topic, slot, &batch, now).await;
            drop(spans);
            (batch, result)
        };
        ctx.spawn(fut.into_actor(self).map(|(batch, result), act, ctx| {
            let mut unavailable = None;
            let end = match result {
                Ok(done) => {
                    let mut rescheduled = false;
                    for (item, finished) in batch.iter().zip(done) {
                        match finished {
                            Finished::Retrying => act.metrics.retried.inc(),
                            Finished::Dead => act.metrics.dead.inc(),
                            Finished::Stale => tracing::warn!(job = %item.run.job.id, "a run's outcome was stale: another run holds the job"),
                            _ => {}
                        }
                        // Scheduled again, perhaps before the slot's timer (armed for the
                        // run's lease deadline): a pump learns the slot's next time.
                        rescheduled |= matches!(finished, Finished::Retrying | Finished::Repeating | Finished::Rescheduled | Finished::Released);
                    }
                    SettleEnd::Applied { rescheduled }
                }
                Err(e) if e.is_unavailable() || matches!(e, crate::error::Error::StoreFull(_)) => {
                    // Nothing of the batch was applied (one atomic step), and the store may
                    // be back in a moment: the outcomes are kept, ahead of those gathered
                    // since, and sent again. Each run's token still decides in the store
                    // whether its outcome is current.
                    act.set_status(|s| s.last_error = Some(e.to_string()));
                    unavailable = Some((batch.len(), e));
                    let mut kept = batch;
                    kept.append(&mut act.outcomes);
                    act.outcomes = kept;
                    SettleEnd::Unavailable
                }
                Err(e) => {
                    // Refused for a reason a retry would not change: the runs stay running
                    // in the store, and come back when their lease runs out (at least once).
                    tracing::warn!(topic = %act.topic.name, slot = act.slot, runs = batch.len(), error = %e, "could not settle runs; their leases will expire and they run again");
                    act.set_status(|s| s.last_error = Some(e.to_string()));
                    SettleEnd::Refused
                }
            };
            if let Some(wait) = act.core.settle_answered(end) {
                if let Some((runs, e)) = &unavailable {
                    tracing::warn!(topic = %act.topic.name, slot = act.slot, runs, error = %e, retry_in_ms = crate::num::duration_ms(wait), "could not settle runs: trying again");
                }
                ctx.run_later(wait, |act, ctx| {
                    act.core.backoff_over();
                    act.settle(ctx);
                });
            }
            act.track();
            act.settle_soon(ctx);
            if act.core.pump_wanted() {
                act.pump(ctx);
            }
            act.offer_sleep();
        }));
    }
}

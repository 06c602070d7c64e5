//! The slot's runs: each leased job to its handler now or held until its fire time, past
//! its flow key's gate, and run on its type's handler actor.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures_util::future::Either;

use super::super::handler::LocalHandlers;
use super::super::messages::{RunJob, RunReport};
use super::super::runtime::Runtime;
use super::SlotActor;
use super::flow_gate::member;
use crate::job_type::{Emitter, JobContext, OtherJobs, Outcome};
use crate::model::Leased;
use crate::time::Millis;
use crate::topic::TopicConfig;

impl SlotActor {
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

    /// Hands a due job to its handler, or to its flow key's line when the key has limits;
    /// `fired_at` is now, read once for the batch.
    pub(super) fn start(&mut self, lease: Arc<Leased>, fired_at: Millis, ctx: &mut Context<Self>) {
        if let Some(key) = self.gated(&lease.job, fired_at) {
            if self.gate.line(&key) >= self.key_share() {
                self.defer(lease, &key, fired_at, ctx);
                return;
            }
            self.gate.wait(&key, lease, fired_at);
            self.count_waiting(1);
            self.ask_flow(key, ctx);
            self.track();
            return;
        }
        self.run(lease, fired_at, None, ctx);
    }

    /// Hands a running job to its handler; `fired_at` is now. `flow`: the key whose room
    /// it holds, ended when it reports.
    pub(super) fn run(
        &mut self,
        lease: Arc<Leased>,
        fired_at: Millis,
        flow: Option<String>,
        ctx: &mut Context<Self>,
    ) {
        self.metrics.fired.inc();
        // Late from its fire time, or from when it was written or last changed if that was
        // after it: a job accepted past due is not late by the time before it existed.
        let since = lease
            .job
            .fire_at
            .max(lease.job.updated_at.or(lease.job.created_at).unwrap_or(0));
        let lateness = crate::num::float((fired_at - since).max(0)) / 1_000.0;
        self.metrics.lateness.observe(lateness);
        // The handler's context holds its own copy of the job; a traced job's fire is a span
        // of its trace, ended with the run (`crate::otel`).
        let span = crate::otel::process_span(&self.door.topic().name, &lease.job, fired_at)
            .unwrap_or_else(tracing::Span::none);
        let run = handler_run(
            &self.rt,
            &self.handlers,
            self.door.topic(),
            &lease,
            fired_at,
            span,
        );
        ctx.spawn(run.into_actor(self).map(move |report, act, ctx| {
            // The map's entry is another run's when the store leased the job again while
            // this one ran (its lease ran out): that one stays.
            act.book.release(&lease.job.id, lease.token);
            if let Some(key) = flow {
                act.release_flow(key, vec![member(&lease)], ctx);
            }
            let lease = Arc::try_unwrap(lease).unwrap_or_else(|shared| (*shared).clone());
            let settlement = act.settlement(lease, report, fired_at);
            act.book.defer(settlement);
            act.settle_soon(ctx);
        }));
    }
}

/// The run of `lease` on its type's handler actor on this thread, as a future of the
/// handler's report (its lease is extended meanwhile by the slot actor's `sweep_leases`).
fn handler_run(
    rt: &Runtime,
    handlers: &LocalHandlers,
    topic: &Arc<TopicConfig>,
    lease: &Leased,
    fired_at: Millis,
    span: tracing::Span,
) -> impl std::future::Future<Output = RunReport> + 'static {
    if let Some(outcome) = lease.job.misfire(fired_at) {
        rt.metrics.misfired.with_label_values(&[&topic.name]).inc();
        return Either::Right(std::future::ready(RunReport {
            outcome,
            duration: Duration::ZERO,
            emitted: Vec::new(),
        }));
    }
    let job_type = lease.job.job_type.as_str();
    let send = handlers.get(job_type).map(|actor| {
        actor.send(RunJob {
            ctx: JobContext {
                topic: topic.name.clone(),
                settings: topic.clone(),
                job: lease.job.clone(),
                payload: lease.job.payload.clone(),
                fired_at,
                events: Emitter::default(),
                jobs: OtherJobs::new(rt.store.clone(), rt.metrics.clone()),
                span,
            },
        })
    });
    match send {
        Some(send) => Either::Left(async move {
            send.await.unwrap_or_else(|e| RunReport {
                outcome: Outcome::retry(format!("handler actor unavailable: {e}")),
                duration: Duration::ZERO,
                emitted: Vec::new(),
            })
        }),
        // Only an instance that runs every type its topic names owns a slot, so a job gets
        // here only when its type is not named (one written as the topic was changed
        // elsewhere, or a built-in type on an instance that left them out): it runs again
        // a backoff later, its attempts untouched (a repeat, never a dead letter for this
        // instance's lack), by then perhaps on an instance that runs it.
        None => {
            let wait = crate::num::signed(topic.backoff.base_ms.max(1_000));
            let late = fired_at.saturating_sub(lease.job.fire_at).max(0);
            tracing::warn!(topic = %topic.name, job = %lease.job.id, job_type,
                "no handler for the job's type on this instance: it runs again later");
            Either::Right(std::future::ready(RunReport {
                outcome: Outcome::Repeat {
                    after: Duration::from_millis(crate::num::unsigned(late + wait)),
                },
                duration: Duration::ZERO,
                emitted: Vec::new(),
            }))
        }
    }
}

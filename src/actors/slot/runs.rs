//! The slot's runs: a due job run on its type's handler actor, its report turned into an
//! outcome to settle, and the room it held on its flow key given back.

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
use crate::model::{Leased, Settlement};
use crate::time::Millis;
use crate::topic::TopicConfig;

impl SlotActor {
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
                act.release_room(key, vec![member(&lease)], ctx);
            }
            let lease = Arc::try_unwrap(lease).unwrap_or_else(|shared| (*shared).clone());
            let settlement = act.settlement(lease, report, fired_at);
            act.book.defer(settlement);
            act.settle_soon(ctx);
        }));
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
        self.metrics.handler_ran(&job.job_type, report.duration);
        let (attempts, clock) = (job.attempts, &self.rt.clock);
        let outcome = report.outcome.into_run(
            job.fire_at,
            now,
            || {
                self.door
                    .topic()
                    .backoff
                    .delay_ms(attempts, &mut rand::rng())
            },
            |delay| clock.after(delay),
        );
        Settlement {
            run: lease,
            outcome,
            fired_at,
            emitted: report.emitted,
        }
    }

    /// Ends the room on `key` of runs that held it; the slot's line for the key then asks
    /// again (`RoomFreed`, taken in by `flow.rs`).
    pub(super) fn release_room(&mut self, key: String, runs: Vec<String>, ctx: &mut Context<Self>) {
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
            ctx.notify(RoomFreed(key));
        }));
    }
}

/// Room on a flow key was given back here: the slot's line for it asks again.
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct RoomFreed(pub(super) String);

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
        rt.metrics
            .fires
            .misfired
            .with_label_values(&[&topic.name])
            .inc();
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

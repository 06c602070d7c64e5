//! A job type's actor: runs that type's handler with bounded concurrency. Each run is its
//! own task (the actor's response), so a handler that panics or hangs fails one attempt and
//! nothing else. Each slot-actor thread has one actor per type (`LocalHandlers`), so that a
//! fire is handed to its handler without leaving its thread; the actors of a type share one
//! bound on the runs at once.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use actix::{Actor, Addr, ArbiterHandle, Context, Handler, ResponseFuture};
use futures_util::FutureExt;
use tokio::sync::Semaphore;

use super::messages::{RunJob, RunReport};
use super::runtime::{Shares, TypeEntry};
use crate::job_type::{ErasedHandler, Outcome};

/// The actor of each job type on one thread, by type.
pub(crate) type LocalHandlers = Arc<HashMap<&'static str, Addr<HandlerActor>>>;

/// Starts one actor per type on `thread` (the current one for `None`), sharing each type's
/// bound on runs at once.
pub(crate) fn start_local(
    types: &HashMap<&'static str, TypeEntry>,
    thread: Option<&ArbiterHandle>,
) -> LocalHandlers {
    let actors = types
        .iter()
        .map(|(name, entry)| {
            let actor = HandlerActor {
                handler: entry.handler.clone(),
                permits: entry.permits.clone(),
                per_topic: entry.per_topic.clone(),
                per_key: entry.per_key.clone(),
                per_tenant: entry.per_tenant.clone(),
            };
            let addr = match thread {
                Some(thread) => HandlerActor::start_in_arbiter(thread, move |_| actor),
                None => actor.start(),
            };
            (*name, addr)
        })
        .collect();
    Arc::new(actors)
}

pub(crate) struct HandlerActor {
    handler: Arc<dyn ErasedHandler>,
    /// Bounds the runs of this type at once, over all its actors; more wait here, and the
    /// slot actors bound how many they hand out, so nothing queues without limit.
    permits: Arc<Semaphore>,
    /// The type's share per tenant, per topic and per flow key, taken before `permits` (in
    /// that order, always, so no two runs wait on each other): runs past their tenant's,
    /// topic's or key's share wait without holding one of the type's permits.
    per_tenant: Option<Arc<Shares>>,
    per_topic: Option<Arc<Shares>>,
    per_key: Option<Arc<Shares>>,
}

/// A run's hold on one name's share, given back when dropped.
struct Held {
    shares: Arc<Shares>,
    name: String,
    sem: Option<Arc<Semaphore>>,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Held {
    async fn take(shares: &Arc<Shares>, name: String) -> Held {
        let sem = shares.of(&name);
        let permit = sem.clone().acquire_owned().await.ok();
        Held {
            shares: shares.clone(),
            name,
            sem: Some(sem),
            permit,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.permit.take());
        if let Some(sem) = self.sem.take() {
            self.shares.done(&self.name, sem);
        }
    }
}

impl Actor for HandlerActor {
    type Context = Context<Self>;
}

impl Handler<RunJob> for HandlerActor {
    type Result = ResponseFuture<RunReport>;

    fn handle(&mut self, msg: RunJob, _: &mut Context<Self>) -> Self::Result {
        let handler = self.handler.clone();
        let permits = self.permits.clone();
        let tenant_share = self
            .per_tenant
            .clone()
            .and_then(|s| Some((s, msg.ctx.settings.tenant.clone()?)));
        let topic_share = self.per_topic.clone().map(|s| (s, msg.ctx.topic.clone()));
        let key_share = self.per_key.clone().and_then(|s| {
            let key = crate::flow::job_key(
                msg.ctx.settings.flow.as_ref(),
                msg.ctx.job.flow_key.as_deref(),
                || handler.flow_key(&msg.ctx.payload),
            )?;
            Some((s, format!("{}\u{0}{key}", msg.ctx.topic)))
        });
        Box::pin(async move {
            let _tenant = match tenant_share {
                Some((s, name)) => Some(Held::take(&s, name).await),
                None => None,
            };
            let _topic = match topic_share {
                Some((s, name)) => Some(Held::take(&s, name).await),
                None => None,
            };
            let _key = match key_share {
                Some((s, name)) => Some(Held::take(&s, name).await),
                None => None,
            };
            let _permit = permits.acquire_owned().await;
            let started = Instant::now();
            let timeout = handler.timeout();
            let events = msg.ctx.events.clone();
            // The run is this response's own task already (actix spawns a ResponseFuture):
            // its panic is caught here, and a run past its timeout is dropped, which cancels
            // it. A task of its own per run cost a spawn and a timer entry for every job.
            let run = AssertUnwindSafe(handler.handle(msg.ctx)).catch_unwind();
            let outcome = match tokio::time::timeout(timeout, run).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(panic)) => {
                    Outcome::retry(format!("handler panicked: {}", panic_text(panic)))
                }
                Err(_) => Outcome::retry(format!("handler timed out after {timeout:?}")),
            };
            RunReport {
                outcome,
                duration: started.elapsed(),
                emitted: events.take(),
            }
        })
    }
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

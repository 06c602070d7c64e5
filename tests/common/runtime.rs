//! Helpers for runtime tests: a probe job type that reports each run on a channel and
//! answers as its script says, and waiting for events with a deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use timeout_center::config::{RuntimeSettings, Settings};
use timeout_center::conformance::*;
use timeout_center::events::Event;
use timeout_center::time::now_ms;
use timeout_center::*;
use tokio::sync::mpsc;

/// One run the probe saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub job: Job,
    pub fired_at: Millis,
    /// The wall clock when the handler started.
    pub handled_at: Millis,
}

type Script = dyn Fn(&Job, u32) -> Outcome + Send + Sync;

/// A job type named `probe`: sends every run to `rx`, then answers `script(job, call)`
/// (`call` counts runs from 1), optionally after `hold`.
pub struct Probe {
    tx: mpsc::UnboundedSender<Seen>,
    script: Arc<Script>,
    calls: AtomicU32,
    pub hold: Option<Arc<tokio::sync::Notify>>,
    /// The type's handler timeout (30 s, the default, unless a test sets it).
    pub timeout: Duration,
}

impl Probe {
    pub fn new(
        script: impl Fn(&Job, u32) -> Outcome + Send + Sync + 'static,
    ) -> (Probe, mpsc::UnboundedReceiver<Seen>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let probe = Probe {
            tx,
            script: Arc::new(script),
            calls: AtomicU32::new(0),
            hold: None,
            timeout: Duration::from_secs(30),
        };
        (probe, rx)
    }

    pub fn done() -> (Probe, mpsc::UnboundedReceiver<Seen>) {
        Probe::new(|_, _| Outcome::Done)
    }
}

#[async_trait]
impl JobHandler for Probe {
    type Payload = Value;

    fn job_type(&self) -> &'static str {
        "probe"
    }

    fn concurrency(&self) -> usize {
        256
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn handle(&self, ctx: JobContext<Value>) -> Outcome {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = self.tx.send(Seen {
            job: ctx.job.clone(),
            fired_at: ctx.fired_at,
            handled_at: now_ms(),
        });
        if let Some(hold) = &self.hold {
            hold.notified().await;
        }
        (self.script)(&ctx.job, call)
    }
}

pub fn settings(poll_ms: u64) -> RuntimeSettings {
    RuntimeSettings {
        poll_ms,
        // Every slot's head read each round, unless a test says otherwise.
        safety_net_ms: poll_ms,
        safety_net_reads_per_s: u64::MAX,
        ..Settings::defaults().runtime
    }
}

/// The next run the probe reports, failing after `secs` seconds.
pub async fn next(rx: &mut mpsc::UnboundedReceiver<Seen>, secs: u64) -> Seen {
    tokio::time::timeout(Duration::from_secs(secs), rx.recv())
        .await
        .unwrap_or_else(|_| panic!("no run within {secs} s"))
        .expect("the probe is alive")
}

/// Polls `topic`'s event stream until `pred` holds for the events so far, or fails.
pub async fn events_until(
    center: &TimeoutCenter,
    topic: &str,
    secs: u64,
    pred: impl Fn(&[Event]) -> bool,
) -> Vec<Event> {
    eventually(secs, || async {
        let events = center.events(topic, None, 1_000).await.unwrap().items;
        if pred(&events) {
            return Ok(events);
        }
        Err(format!(
            "events of {topic} never matched: {:#?}",
            events
                .iter()
                .map(|e| (&e.job_id, &e.event, &e.data))
                .collect::<Vec<_>>()
        ))
    })
    .await
}

/// The runtime tests wait as every test does (`toc_testkit::wait`): a state seen only from
/// outside the runtime (its health, the store, a metric, the event stream) has no notice to
/// await, and the runtime reaches it in its own time (a pump's round trip, an ownership
/// round). Fire times are not waited for this way: the tests that check them drive a
/// `ManualClock`.
pub use toc_testkit::wait::{eventually, quiet, until};

pub fn names(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.event.clone()).collect()
}

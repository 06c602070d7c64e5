//! The code of docs/library.md, whole and run by the suite (`tests/custom_service.rs`): a job
//! type of its own on the embedded store with its journal, in process, no Redis; then the
//! same type moved on a test clock, no waiting.
//!
//! ```sh
//! cargo run --example library_guide
//! ```

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use timeout_center::config::FsyncPolicy;
use timeout_center::time::{Clock, ManualClock, now_ms};
use timeout_center::{
    JobContext, JobHandler, NewJob, Outcome, ScheduleMode, Store, StoreOptions, TimeoutCenter,
};
use tokio::sync::mpsc;

#[derive(Deserialize)]
struct Invoice {
    order: u64,
}

/// Cancels an unpaid order: one struct, one trait, one line to register.
struct CancelUnpaid {
    done: mpsc::UnboundedSender<u64>,
}

#[async_trait]
impl JobHandler for CancelUnpaid {
    type Payload = Invoice;

    fn job_type(&self) -> &'static str {
        "cancel_unpaid"
    }

    async fn handle(&self, ctx: JobContext<Invoice>) -> Outcome {
        match self.done.send(ctx.payload.order) {
            Ok(()) => Outcome::Done,
            Err(_) => Outcome::retry("the order service is away"),
        }
    }
}

/// The embedded store with its journal, in process: a job of its own type fires.
async fn in_process() -> anyhow::Result<()> {
    // The embedded store with its journal: what it acknowledged survives a restart.
    let dir = tempfile::tempdir()?;
    let journal = dir.path().join("journal");
    let store = Store::open_memory(
        StoreOptions::default(),
        Some((journal.as_path(), FsyncPolicy::Always)),
    )?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let center = TimeoutCenter::builder(Arc::new(store))
        .handler(CancelUnpaid { done: tx })
        .start()
        .await?;
    let job = NewJob::new("order-7", now_ms() + 200)
        .job_type("cancel_unpaid")
        .payload(serde_json::json!({"order": 7}));
    center.schedule("orders", job, ScheduleMode::Upsert).await?;
    let order = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await?;
    println!("cancelled order {order:?}");
    center.shutdown(Duration::from_secs(1)).await;
    Ok(())
}

/// A clock the test moves: the handler's 30 minutes pass at once.
async fn on_a_test_clock() -> anyhow::Result<()> {
    // Testing a handler: a clock the test moves. Thirty minutes pass at once.
    let clock = Arc::new(ManualClock::at(now_ms()));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let center = TimeoutCenter::builder(Arc::new(Store::memory(StoreOptions::default())))
        .clock(clock.clone())
        .handler(CancelUnpaid { done: tx })
        .start()
        .await?;
    let job = NewJob::new("order-8", clock.now() + 30 * 60_000)
        .job_type("cancel_unpaid")
        .payload(serde_json::json!({"order": 8}));
    center.schedule("orders", job, ScheduleMode::Upsert).await?;
    clock.advance(30 * 60_000);
    let order = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await?;
    println!("cancelled order {order:?} after 30 minutes on the test clock");
    center.shutdown(Duration::from_secs(1)).await;
    Ok(())
}

#[actix_rt::main]
async fn main() -> anyhow::Result<()> {
    in_process().await?;
    on_a_test_clock().await
}

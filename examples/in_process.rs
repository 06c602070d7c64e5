//! Registers a job type of its own, schedules three jobs to it, and prints what its handler
//! receives. Against a local Redis:
//!
//! ```sh
//! redis-server --port 6379 --daemonize yes --save ''
//! cargo run --example in_process            # TOC_REDIS_URL overrides the address
//! ```

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use timeout_center::Store;
use timeout_center::time::now_ms;
use timeout_center::*;
use tokio::sync::mpsc;

/// The payload of our own job type.
#[derive(Debug, Deserialize)]
struct Reminder {
    user: String,
    text: String,
}

/// A job type: one struct, one trait implementation, one line to register.
struct SendReminder {
    out: mpsc::UnboundedSender<String>,
}

#[async_trait]
impl JobHandler for SendReminder {
    type Payload = Reminder;

    fn job_type(&self) -> &'static str {
        "send_reminder"
    }

    async fn handle(&self, ctx: JobContext<Reminder>) -> Outcome {
        let late = ctx.fired_at - ctx.job.fire_at;
        let line = format!(
            "handler received job {:?}: remind {} to {:?} ({} ms after its fire time)",
            ctx.job.id, ctx.payload.user, ctx.payload.text, late
        );
        let _ = self.out.send(line);
        Outcome::Done
    }
}

#[actix_rt::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("TOC_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let store = Store::redis(&url, StoreOptions::default()).await?;
    store
        .ping()
        .await
        .map_err(|e| anyhow::anyhow!("no Redis at {url}: {e}"))?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let center = TimeoutCenter::builder(Arc::new(store))
        .handler(SendReminder { out: tx })
        .start()
        .await?;

    let topic = format!("example-{}", now_ms());
    for (i, (user, text)) in [("ada", "stand-up"), ("bob", "review"), ("cy", "lunch")]
        .iter()
        .enumerate()
    {
        let job = NewJob::new(format!("reminder-{i}"), now_ms() + 200 * (i as i64 + 1))
            .job_type("send_reminder")
            .payload(serde_json::json!({"user": user, "text": text}));
        center.schedule(&topic, job, ScheduleMode::Upsert).await?;
        println!("scheduled reminder-{i} for {user}");
    }
    for _ in 0..3 {
        let line = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await?
            .ok_or_else(|| anyhow::anyhow!("the handler stopped"))?;
        println!("{line}");
    }
    center.shutdown(Duration::from_secs(1)).await;
    Ok(())
}

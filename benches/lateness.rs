//! Firing lateness through the whole runtime: `TOC_BENCH_JOBS` jobs (default 10,000) come due
//! at a steady rate (default 10,000 per second) and a no-op handler records, in an HDR
//! histogram, the instant it ran minus the job's fire time.
//!
//! Run: `cargo bench --bench lateness` (starts its own redis-server), or
//! `TOC_BENCH_STORE=memory cargo bench --bench lateness` for the embedded engine.
//! Settings: `TOC_BENCH_JOBS`, `TOC_BENCH_RATE` (fires per second).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use hdrhistogram::Histogram;
use serde_json::Value;
use timeout_center::Store;
use timeout_center::time::now_ms;
use timeout_center::*;
use tokio::sync::mpsc;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// Records how late it ran, in microseconds, and is done.
struct Noop(mpsc::UnboundedSender<i64>);

#[async_trait]
impl JobHandler for Noop {
    type Payload = Value;

    fn job_type(&self) -> &'static str {
        "noop"
    }

    fn concurrency(&self) -> usize {
        1024
    }

    async fn handle(&self, ctx: JobContext<Value>) -> Outcome {
        let _ = self.0.send(now_us() - ctx.job.fire_at * 1_000);
        Outcome::Done
    }
}

#[actix_rt::main]
async fn main() {
    let jobs = env_or("TOC_BENCH_JOBS", 10_000);
    let rate = env_or("TOC_BENCH_RATE", 10_000).max(1);
    let engine = std::env::var("TOC_BENCH_STORE").unwrap_or_else(|_| "redis".into());
    let mut topic = TopicConfig::named("bench");
    topic.default_type = "noop".into();
    let options = StoreOptions {
        topic_defaults: topic,
        ..StoreOptions::default()
    };
    let mut _server = None;
    let store: SharedStore = match engine.as_str() {
        "memory" => Arc::new(Store::memory(options)),
        _ => {
            let server = toc_testkit::RedisServer::start();
            let store = Store::redis(&server.url(), options).await.unwrap();
            _server = Some(server);
            Arc::new(store)
        }
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let center = TimeoutCenter::builder(store)
        .handler(Noop(tx))
        .start()
        .await
        .unwrap();

    // All jobs scheduled ahead, due from 2 s from now at `rate` per second.
    let start = now_ms() + 2_000;
    let resets: Vec<Reset> = (0..jobs)
        .map(|i| Reset::new(format!("j{i}"), start + (i * 1_000 / rate) as Millis))
        .collect();
    for chunk in resets.chunks(1_000) {
        center
            .reset_many("bench", chunk, Some(&CreateSpec::default()))
            .await
            .unwrap();
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let mut early = 0u64;
    for _ in 0..jobs {
        let late = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("every job fires within a minute")
            .unwrap();
        if late < 0 {
            early += 1;
        }
        hist.record(late.max(1) as u64).unwrap();
    }
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1_000.0;
    println!(
        "lateness over {jobs} jobs at {rate}/s ({engine} store): p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms; early: {early}",
        ms(0.5),
        ms(0.9),
        ms(0.99),
        ms(0.999),
        hist.max() as f64 / 1_000.0
    );
    center.shutdown(Duration::from_secs(1)).await;
}

//! The pull scenario, on both engines, through the HTTP API as a consumer in another
//! language would use it:
//!
//! - throughput: a burst of due jobs in a pull topic, drained by 16 consumers that claim
//!   batches of 100 and ack each batch in one call (`/acks`); compared with BullMQ's worker
//!   processing rate (its burst drain) in the same run;
//! - delivery lateness: jobs coming due at the latency rate, consumers waiting in long polls;
//!   the time from a job's fire time to its consumer receiving it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::json;

use super::Ctx;
use super::scenarios::{RedisCpu, add_percentiles, histogram, now_us, open, service, topic};
use timeout_center::conformance::RuntimeOps;
use timeout_center::time::now_ms;
use timeout_center::*;

const CONSUMERS: usize = 16;
const BATCH: usize = 100;

/// What a consumer reads of a claimed job, and sends back in its ack.
#[derive(serde::Deserialize, serde::Serialize)]
struct Claimed {
    id: String,
    token: u64,
    #[serde(skip_serializing)]
    fire_at: i64,
}

/// A claim's answer, as a consumer reads it.
#[derive(serde::Deserialize)]
struct ClaimAnswer {
    jobs: Vec<Claimed>,
}

/// The acks of one call.
#[derive(serde::Serialize)]
struct Acks<'a> {
    acks: &'a [Claimed],
}

async fn post<B: serde::Serialize + ?Sized, R: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
    body: &B,
) -> Result<R, String> {
    let res = http
        .post(url)
        .json(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = res.status();
    let bytes = res.bytes().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!(
            "{url}: {status} {}",
            String::from_utf8_lossy(&bytes)
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("{url}: {e}"))
}

/// One consumer: claims, then acks what it got in one call, until `left` reaches zero or
/// `until`. Each job's delivery lateness (ms × 1000) goes to `late` when given. It reads
/// only what a consumer needs of each job (id, token, fire time), as a lean worker would:
/// the consumers share the machine with the service they measure.
async fn consume(
    http: reqwest::Client,
    base: String,
    topic: String,
    left: Arc<AtomicUsize>,
    until: Instant,
    late: Option<Arc<std::sync::Mutex<hdrhistogram::Histogram<u64>>>>,
) -> Result<(), String> {
    let claim = format!("{base}/v1/topics/{topic}/claim");
    let acks = format!("{base}/v1/topics/{topic}/acks");
    let ask = json!({"max": BATCH, "wait_ms": 200});
    while left.load(Ordering::Relaxed) > 0 && Instant::now() < until {
        let answer: ClaimAnswer = post(&http, &claim, &ask).await?;
        let received = now_us();
        let jobs = answer.jobs;
        if jobs.is_empty() {
            continue;
        }
        if let Some(h) = &late {
            let mut h = h.lock().expect("histogram lock");
            for j in &jobs {
                let _ = h.record((received - j.fire_at * 1_000).max(1) as u64);
            }
        }
        let n = jobs.len();
        let _: serde::de::IgnoredAny = post(&http, &acks, &Acks { acks: &jobs }).await?;
        left.fetch_sub(n.min(left.load(Ordering::Relaxed)), Ordering::Relaxed);
    }
    Ok(())
}

fn pull_topic(name: &str) -> TopicConfig {
    TopicConfig {
        slots: 16,
        default_type: "pull".into(),
        ..TopicConfig::named(name)
    }
}

/// Puts `n` pull jobs due at `at(i)`, in batches of 1,000 creating resets.
async fn fill(
    store: &SharedStore,
    topic: &str,
    n: usize,
    at: impl Fn(usize) -> Millis,
) -> Result<(), String> {
    let create = CreateSpec {
        job_type: Some("pull".into()),
        ..CreateSpec::default()
    };
    for start in (0..n).step_by(1_000) {
        let batch: Vec<Reset> = (start..(start + 1_000).min(n))
            .map(|i| Reset::new(format!("p{i}"), at(i)))
            .collect();
        store
            .reset_many(topic, &batch, Some(&create), now_ms())
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

pub(super) async fn pull(ctx: &mut Ctx) -> Result<(), String> {
    let jobs = (ctx.sizes.burst_jobs / 5).max(10_000);
    for engine in ["memory", "redis"] {
        let store = open(ctx, engine).await?;
        let svc = service(store.clone(), engine).await?;
        let http = reqwest::Client::new();

        // Throughput: a burst, drained by 16 consumers.
        let name = topic("pull", engine);
        store
            .put_topic(pull_topic(&name))
            .await
            .map_err(|e| e.to_string())?;
        let t0 = now_ms();
        fill(&store, &name, jobs, |_| t0).await?;
        let left = Arc::new(AtomicUsize::new(jobs));
        let cpu = RedisCpu::start(ctx, engine).await?;
        let started = Instant::now();
        let until = started + Duration::from_secs(600);
        let consumers = (0..CONSUMERS).map(|_| {
            consume(
                http.clone(),
                svc.base.clone(),
                name.clone(),
                left.clone(),
                until,
                None,
            )
        });
        for r in join_all(consumers).await {
            r?;
        }
        let rate = jobs as f64 / started.elapsed().as_secs_f64();
        let figure = "redis-server CPU per 100,000 claimed + acked";
        cpu.add(ctx, "pull", figure, jobs as u64).await?;
        let note = format!(
            "{jobs} jobs due at once, {CONSUMERS} consumers, claim {BATCH} + one /acks call"
        );
        ctx.add(
            "pull",
            engine,
            "claim + ack throughput",
            rate,
            "jobs/s",
            &note,
        );
        if engine == "redis" && !ctx.stopped() {
            let floor = "redis-server CPU per 100,000 claimed + acked, bare Lua floor";
            let bare = super::bare_fire::bare_drain(ctx, "pull", floor, jobs, BATCH).await?;
            ctx.add(
                "pull",
                engine,
                "claim + ack throughput, bare Lua floor",
                bare,
                "jobs/s",
                &format!("the floor: {jobs} members of 16 plain sorted sets due at once, a worker a set claiming {BATCH} into a lease set by a minimal script and acking them by another"),
            );
        }

        // Delivery lateness at the latency rate.
        let name = topic("pull-late", engine);
        store
            .put_topic(pull_topic(&name))
            .await
            .map_err(|e| e.to_string())?;
        let rate = ctx.sizes.rate.max(1);
        let seconds = ctx.sizes.latency_seconds.clamp(2, 20);
        let n = (rate * seconds) as usize;
        let start = now_ms() + 2_000;
        fill(&store, &name, n, |i| {
            start + (i as u64 * 1_000 / rate) as Millis
        })
        .await?;
        let late = histogram();
        let left = Arc::new(AtomicUsize::new(n));
        let until = Instant::now() + Duration::from_secs(seconds + 30);
        let consumers = (0..CONSUMERS).map(|_| {
            consume(
                http.clone(),
                svc.base.clone(),
                name.clone(),
                left.clone(),
                until,
                Some(late.clone()),
            )
        });
        for r in join_all(consumers).await {
            r?;
        }
        let note = format!("{n} jobs at {rate}/s, {CONSUMERS} consumers in long polls");
        let h = late.lock().expect("histogram lock").clone();
        add_percentiles(ctx, "pull", engine, "delivery lateness", &h, &note);
        svc.stop().await;
    }
    Ok(())
}

/// Our claim + ack throughput against BullMQ's worker processing rate (its burst drain),
/// once both are measured.
pub(super) fn ratios(ctx: &mut Ctx) {
    let Some(bullmq) = ctx.find("bullmq", "burst drain rate") else {
        return;
    };
    for engine in ["memory", "redis"] {
        if let Some(ours) = ctx.find(engine, "claim + ack throughput") {
            ctx.add(
                "pull",
                engine,
                "claim + ack throughput / BullMQ worker rate",
                ours / bullmq,
                "x",
                "BullMQ: its burst drain, Worker concurrency 100",
            );
        }
    }
}

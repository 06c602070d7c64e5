//! The scenarios of `toc bench`, each on the embedded engine and on Redis.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::StreamExt;
use futures_util::future::join_all;
use hdrhistogram::Histogram;
use serde_json::{Value, json};

use super::{Ctx, Lateness, redis_benchmark};
use timeout_center::RunEvents;
use timeout_center::config::{Settings, StoreKind};
use timeout_center::conformance::*;
use timeout_center::store::{SharedStore, Store};
use timeout_center::time::now_ms;
use timeout_center::*;

pub(super) const NOOP: &str = "bench_noop";
pub(super) const ENGINES: [&str; 2] = ["memory", "redis"];

/// A job type that does nothing but record how late it ran (µs) and count.
pub(super) struct Noop {
    pub(super) hist: Arc<Mutex<Histogram<u64>>>,
    pub(super) done: Arc<AtomicU64>,
}

#[async_trait]
impl JobHandler for Noop {
    type Payload = Value;

    fn job_type(&self) -> &'static str {
        NOOP
    }

    fn concurrency(&self) -> usize {
        1024
    }

    async fn handle(&self, ctx: JobContext<Value>) -> Outcome {
        let late = now_us() - ctx.job.fire_at * 1_000;
        let _ = self
            .hist
            .lock()
            .expect("histogram lock")
            .record(late.max(1) as u64);
        self.done.fetch_add(1, Ordering::Relaxed);
        Outcome::Done
    }
}

pub(super) fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

pub(super) fn histogram() -> Arc<Mutex<Histogram<u64>>> {
    Arc::new(Mutex::new(
        Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds"),
    ))
}

static RUN: AtomicU64 = AtomicU64::new(0);

/// A topic name no earlier part of this run used.
pub(super) fn topic(what: &str, engine: &str) -> String {
    format!(
        "bench-{what}-{engine}-{}-{}",
        now_ms() % 100_000,
        RUN.fetch_add(1, Ordering::Relaxed)
    )
}

fn options() -> StoreOptions {
    let defaults = TopicConfig {
        default_type: NOOP.to_string(),
        ..TopicConfig::default()
    };
    StoreOptions {
        topic_defaults: defaults,
        // As `toc serve` has it by default (`limits.max_total_slots`): the safety net's
        // longest sweep, which says how far ahead a new head must be told, follows from it.
        max_total_slots: Some(16_384),
        ..StoreOptions::default()
    }
}

pub(super) async fn open(ctx: &Ctx, engine: &str) -> Result<SharedStore, String> {
    Ok(match engine {
        "memory" => Arc::new(Store::memory(options())),
        _ => Arc::new(
            Store::redis(&ctx.redis_url, options())
                .await
                .map_err(|e| e.to_string())?,
        ),
    })
}

/// `open`, for the latency scenarios: Redis through a proxy that adds `--redis-delay-ms` to
/// each round trip (as a network does), when that is set.
async fn open_for_latency(ctx: &Ctx, engine: &str) -> Result<SharedStore, String> {
    let delay = ctx.sizes.redis_delay_ms;
    if engine == "memory" || delay == 0 {
        return open(ctx, engine).await;
    }
    let (host, port) = super::redis_tcp(ctx, "--redis-delay-ms")?;
    let upstream = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| e.to_string())?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?;
    let proxy = toc_testkit::delay_proxy::DelayProxy::start(upstream, Duration::from_millis(delay))
        .map_err(|e| format!("could not start the delay proxy: {e}"))?;
    Ok(Arc::new(
        Store::redis(&proxy.redis_url(), options())
            .await
            .map_err(|e| e.to_string())?,
    ))
}

/// What the latency scenarios' notes add for `--redis-delay-ms`.
fn delay_note(ctx: &Ctx, engine: &str) -> String {
    match ctx.sizes.redis_delay_ms {
        0 => String::new(),
        _ if engine == "memory" => String::new(),
        ms => format!(", {ms} ms added to each round trip to Redis"),
    }
}

/// The HTTP service over `store`, on a free port.
pub(super) struct Service {
    /// The served server (an actix server does nothing until it is polled).
    task: actix_rt::task::JoinHandle<()>,
    pub(super) center: TimeoutCenter,
    pub(super) base: String,
    handle: actix_web::dev::ServerHandle,
}

pub(super) async fn service(store: SharedStore, engine: &str) -> Result<Service, String> {
    let mut settings = Settings::defaults();
    settings.store = if engine == "memory" {
        StoreKind::Memory
    } else {
        StoreKind::Redis
    };
    settings.listen = "127.0.0.1:0".parse().expect("an address");
    settings.http.max_batch_resets = 10_000;
    // The service only schedules the no-op jobs; the scenario's own runtime runs them.
    settings.runtime.foreign_types = vec![NOOP.to_string()];
    let running = timeout_center::serve::start(settings, store)
        .await
        .map_err(|e| e.to_string())?;
    let (center, base, handle) = (
        running.center.clone(),
        format!("http://{}", running.addr),
        running.handle(),
    );
    let task = actix_rt::spawn(async move {
        let _ = running.run().await;
    });
    Ok(Service {
        task,
        center,
        base,
        handle,
    })
}

impl Service {
    /// Stops the server, then the center under it: a center left running would stay a live
    /// instance of the store and take its share of later scenarios' slots.
    pub(super) async fn stop(self) {
        self.handle.stop(true).await;
        let _ = self.task.await;
        self.center.shutdown(Duration::from_secs(1)).await;
    }
}

/// Runs `n` operations over `concurrency` tasks; returns operations per second.
async fn concurrently<F, Fut>(n: usize, concurrency: usize, op: F) -> f64
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let next = AtomicU64::new(0);
    let started = Instant::now();
    let workers = (0..concurrency).map(|_| async {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed) as usize;
            if i >= n {
                break;
            }
            op(i).await;
        }
    });
    join_all(workers).await;
    n as f64 / started.elapsed().as_secs_f64()
}

pub(super) async fn schedule(ctx: &mut Ctx) -> Result<(), String> {
    let n = ctx.sizes.schedule_jobs;
    let http = reqwest::Client::new();
    for engine in ENGINES {
        let store = open(ctx, engine).await?;
        let svc = service(store, engine).await?;
        let (c, t) = (&svc.center, topic("schedule", engine));
        let far = now_ms() + 3_600_000;
        let lib = concurrently(n, 64, |i| {
            let t = &t;
            async move {
                let job = NewJob::new(format!("l{i}"), far);
                let _ = c.schedule(t, job, ScheduleMode::Upsert).await;
            }
        })
        .await;
        ctx.add(
            "schedule",
            engine,
            "schedules/s, library, 64 in flight",
            lib,
            "jobs/s",
            "TimeoutCenter::schedule",
        );
        let create = CreateSpec::default();
        let lib_batch = concurrently(n.div_ceil(1_000), 4, |b| {
            let (t, create) = (&t, &create);
            async move {
                let resets: Vec<Reset> = (0..1_000)
                    .map(|i| Reset::new(format!("lb{b}-{i}"), far))
                    .collect();
                let _ = c.reset_many(t, &resets, Some(create)).await;
            }
        })
        .await
            * 1_000.0;
        ctx.add(
            "schedule",
            engine,
            "schedules/s, library batch of 1,000",
            lib_batch,
            "jobs/s",
            "reset_many with create, 4 in flight",
        );
        let m = n / 2;
        let put = concurrently(m, 64, |i| {
            let (http, base, t) = (&http, &svc.base, &t);
            async move {
                let url = format!("{base}/v1/topics/{t}/jobs/h{i}");
                let _ = http
                    .put(url)
                    .json(&json!({"delay_ms": 3_600_000}))
                    .send()
                    .await;
            }
        })
        .await;
        ctx.add(
            "schedule",
            engine,
            "schedules/s, HTTP PUT, 64 in flight",
            put,
            "jobs/s",
            "one job per request",
        );
        let batches = n.div_ceil(1_000);
        let batch = concurrently(batches, 4, |b| {
            let (http, base, t) = (&http, &svc.base, &t);
            async move {
                let resets: Vec<Value> = (0..1_000)
                    .map(|i| json!({"id": format!("b{b}-{i}"), "delay_ms": 3_600_000}))
                    .collect();
                let _ = http
                    .post(format!("{base}/v1/topics/{t}/resets"))
                    .json(&json!({"resets": resets, "create": {}}))
                    .send()
                    .await;
            }
        })
        .await
            * 1_000.0;
        ctx.add(
            "schedule",
            engine,
            "schedules/s, HTTP batch of 1,000",
            batch,
            "jobs/s",
            "POST /resets with create",
        );
        svc.stop().await;
    }
    journaled_schedules(ctx).await
}

/// The memory engine with a journal and `fsync = always`: every schedule is answered only
/// once it is on disk, so the figure is what one fsync can cover.
async fn journaled_schedules(ctx: &mut Ctx) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("bench.journal");
    let store = Store::open_memory(
        options(),
        Some((path.as_path(), timeout_center::config::FsyncPolicy::Always)),
    )
    .map_err(|e| e.to_string())?;
    let n = (ctx.sizes.schedule_jobs / 5).max(1_000);
    let (far, store) = (now_ms() + 3_600_000, &store);
    let rate = concurrently(n, 64, |i| async move {
        let job = NewJob::new(format!("j{i}"), far);
        let _ = store
            .schedule("bench-journal", job, ScheduleMode::Upsert, now_ms())
            .await;
    })
    .await;
    ctx.add(
        "schedule",
        "memory+journal",
        "schedules/s, fsync always, 64 in flight",
        rate,
        "jobs/s",
        &format!("{n} jobs, Store::schedule, journal with fsync = always"),
    );
    Ok(())
}

/// `n` devices' resets, in batches of 1,000: device `i` to `at` plus `i` modulo `spread_ms`
/// (0: every one at `at`).
pub(super) fn device_batches(n: usize, at: Millis, spread_ms: usize) -> Vec<Vec<Reset>> {
    (0..n)
        .collect::<Vec<_>>()
        .chunks(1_000)
        .map(|ch| {
            ch.iter()
                .map(|&i| {
                    let offset = if spread_ms == 0 { 0 } else { i % spread_ms };
                    Reset::new(format!("dev-{i}"), at + offset as Millis)
                })
                .collect()
        })
        .collect()
}

/// Library resets of `batches` (1,000 each), 4 in flight, for `secs` seconds, each round of
/// a batch 1 ms later than the last (heartbeats move on): resets per second.
pub(super) async fn library_resets(
    c: &TimeoutCenter,
    t: &str,
    batches: &[Vec<Reset>],
    secs: u64,
    stop: &AtomicBool,
) -> f64 {
    let shares: Vec<Vec<Vec<Reset>>> = (0..4)
        .map(|w| batches.iter().skip(w).step_by(4).cloned().collect())
        .collect();
    let done = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    join_all(shares.into_iter().map(|mut share| {
        let done = &done;
        async move {
            let mut round = 0;
            while Instant::now() < deadline && !stop.load(Ordering::Relaxed) && !share.is_empty() {
                let len = share.len();
                let b = &mut share[round % len];
                b.iter_mut().for_each(|r| r.fire_at += 1);
                if let Ok(r) = c.reset_many(t, b, None).await {
                    done.fetch_add(r.reset, Ordering::Relaxed);
                }
                round += 1;
            }
        }
    }))
    .await;
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// Heartbeats through the library for `secs` seconds: batches of 1,000 of the `n` devices
/// (`dev-0` ...) in turn, 4 in flight, each pushing its devices' alarms to an hour from now.
/// Each batch is made as it is sent, as heartbeats arrive: replaying batches kept for
/// millions of devices read cold memory for every reset, a cost of the bench that grew with
/// the device count and that no service pays for the heartbeats it just received.
pub(super) async fn heartbeats(
    c: &TimeoutCenter,
    t: &str,
    n: usize,
    span: Span,
    stop: &AtomicBool,
) -> f64 {
    paced_heartbeats(n, span, stop, |ids, at| async move {
        let b: Vec<Reset> = ids.map(|i| Reset::new(format!("dev-{i}"), at)).collect();
        c.reset_many(t, &b, None).await.map_or(0, |r| r.reset)
    })
    .await
}

/// How long a run of heartbeats lasts.
#[derive(Debug, Clone, Copy)]
pub(super) enum Span {
    /// This many seconds, going round the fleet as often as it takes.
    Seconds(u64),
    /// One heartbeat from every device of the fleet, however long that takes: the first
    /// round after a bulk fill. On Redis it is what ends the fill's cost: a sorted set's
    /// dict that doubled during the fill is still moving its members to the new table
    /// when the fill ends (625,000 members a slot at 10M, doubled at 524,288), one bucket
    /// per command that touches it (Redis' cron rehashes only the keyspace, not a key's
    /// own dict), and every lookup until then reads both tables. A round of the fleet
    /// touches every set at least as often as it has buckets left to move.
    Fleet,
}

/// The heartbeats' pace, whatever sends them: batches of 1,000 of the `n` devices in turn,
/// from the first, 4 in flight, for the `span`; `send(devices, at)` pushes a batch's alarms
/// to `at` (an hour from now) and tells how many it moved. Resets per second.
pub(super) async fn paced_heartbeats<F, Fut>(
    n: usize,
    span: Span,
    stop: &AtomicBool,
    send: F,
) -> f64
where
    F: Fn(std::ops::Range<usize>, Millis) -> Fut,
    Fut: std::future::Future<Output = u64>,
{
    let batches = n.div_ceil(1_000).max(1);
    let done = AtomicU64::new(0);
    let (deadline, rounds) = match span {
        Span::Seconds(secs) => (Some(Instant::now() + Duration::from_secs(secs)), usize::MAX),
        Span::Fleet => (None, batches),
    };
    let started = Instant::now();
    join_all((0..4).map(|w| {
        let (done, send) = (&done, &send);
        async move {
            let mut k = w;
            while k < rounds
                && deadline.is_none_or(|d| Instant::now() < d)
                && !stop.load(Ordering::Relaxed)
            {
                let first = (k % batches) * 1_000;
                let at = now_ms() + 3_600_000;
                done.fetch_add(
                    send(first..n.min(first + 1_000), at).await,
                    Ordering::Relaxed,
                );
                k += 4;
            }
        }
    }))
    .await;
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// The batch endpoint's bodies of `batches`, each reset an hour from now, serialised once:
/// serialising a cold JSON tree per request cost the client more the more devices there
/// were (a cache miss per node), which the figure then charged to the service.
pub(super) fn http_bodies(batches: &[Vec<Reset>]) -> Vec<bytes::Bytes> {
    batches
        .iter()
        .map(|b| {
            let v = json!({"resets": b.iter().map(|r| json!({"id": r.job.id, "delay_ms": 3_600_000})).collect::<Vec<_>>()});
            bytes::Bytes::from(serde_json::to_vec(&v).expect("a body serialises"))
        })
        .collect()
}

/// `bodies` sent to the batch endpoint of `t` at `base`, 4 in flight, for `secs` seconds:
/// resets per second.
pub(super) async fn http_resets(
    http: &reqwest::Client,
    base: &str,
    t: &str,
    bodies: &[bytes::Bytes],
    secs: u64,
    stop: &AtomicBool,
) -> f64 {
    let done = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    join_all((0..4).map(|w| {
        let done = &done;
        async move {
            let mut i = w;
            while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                let res = http
                    .post(format!("{base}/v1/topics/{t}/resets"))
                    .header("content-type", "application/json")
                    .body(bodies[i % bodies.len()].clone())
                    .send()
                    .await;
                if let Ok(r) = res
                    && let Ok(v) = r.json::<Value>().await
                {
                    done.fetch_add(v["reset"].as_u64().unwrap_or(0), Ordering::Relaxed);
                }
                i += 4;
            }
        }
    }))
    .await;
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

pub(super) async fn reset(ctx: &mut Ctx) -> Result<(), String> {
    let (n, secs) = (ctx.sizes.devices, ctx.sizes.reset_seconds);
    let http = reqwest::Client::new();
    for engine in ENGINES {
        let store = open(ctx, engine).await?;
        let svc = service(store, engine).await?;
        let (c, t) = (&svc.center, topic("reset", engine));
        let batches = device_batches(n, now_ms() + 3_600_000, 0);
        for b in &batches {
            c.reset_many(&t, b, Some(&CreateSpec::default()))
                .await
                .map_err(|e| e.to_string())?;
        }
        // Library: batches of 1,000, 4 in flight, each round 1 ms later (heartbeats move on).
        let cpu = RedisCpu::start(ctx, engine).await?;
        let started = Instant::now();
        let lib = library_resets(c, &t, &batches, secs, &ctx.stop).await;
        let done = (lib * started.elapsed().as_secs_f64()) as u64;
        cpu.add(
            ctx,
            "reset",
            "redis-server CPU per 100,000 library resets",
            done,
        )
        .await?;
        ctx.add(
            "reset",
            engine,
            "resets/s, library reset_many",
            lib,
            "resets/s",
            &format!("{n} devices, batches of 1,000, 4 in flight"),
        );
        // HTTP: the batch endpoint, 1,000 per request, 4 in flight.
        let bodies = http_bodies(&batches);
        let via_http = http_resets(&http, &svc.base, &t, &bodies, secs, &ctx.stop).await;
        ctx.add(
            "reset",
            engine,
            "resets/s, HTTP batch endpoint",
            via_http,
            "resets/s",
            "1,000 per request, 4 in flight",
        );
        svc.stop().await;
    }
    // The physical limit, on the same Redis.
    let requests = ctx.sizes.zadd_requests;
    let stock = redis_benchmark(ctx, requests, &["-t", "zadd"])?;
    ctx.add(
        "reset",
        "redis-benchmark",
        "ZADD -P 64 (stock: one member, unchanged)",
        stock,
        "ops/s",
        "redis-benchmark -P 64 -t zadd",
    );
    let n_text = n.to_string();
    let moving = redis_benchmark(
        ctx,
        requests / 2,
        &[
            "-r",
            &n_text,
            "ZADD",
            "bench-moving",
            "__rand_int__",
            "device-__rand_int__",
        ],
    )?;
    ctx.add(
        "reset",
        "redis-benchmark",
        "ZADD -P 64 (moving members)",
        moving,
        "ops/s",
        &format!("-r {n} ZADD key __rand_int__ device-__rand_int__"),
    );
    Ok(())
}

fn curve(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    [
        0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.99, 100.0,
    ]
    .iter()
    .map(|p| (*p, h.value_at_percentile(*p) as f64 / 1_000.0))
    .collect()
}

pub(super) fn add_percentiles(
    ctx: &mut Ctx,
    scenario: &'static str,
    system: &str,
    what: &str,
    h: &Histogram<u64>,
    note: &str,
) {
    for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999)] {
        ctx.add(
            scenario,
            system,
            &format!("{what} {name}"),
            h.value_at_quantile(q) as f64 / 1_000.0,
            "ms",
            note,
        );
    }
    ctx.add(
        scenario,
        system,
        &format!("{what} max"),
        h.max() as f64 / 1_000.0,
        "ms",
        note,
    );
}

/// The service's runtime settings with the run's `fire_lead_ms`, `fire_lead_max_ms` and
/// `batch_window_ms`.
fn lead_settings(ctx: &Ctx) -> timeout_center::config::RuntimeSettings {
    timeout_center::config::RuntimeSettings {
        fire_lead_ms: ctx.sizes.fire_lead_ms,
        fire_lead_max_ms: ctx.sizes.fire_lead_max_ms,
        batch_window_ms: ctx.sizes.batch_window_ms,
        ..Settings::defaults().runtime
    }
}

/// The name of the latency scenario's main rows.
const FIRING_LATENESS: &str = "firing lateness";

/// The name of the latency scenario's rows at its high rate (`Sizes::high_rate`).
pub(super) fn high_rate_rows(rate: u64) -> String {
    format!(
        "firing lateness at {}/s",
        super::report::figure(rate as f64)
    )
}

pub(super) async fn latency(ctx: &mut Ctx) -> Result<(), String> {
    let (rate, secs) = (ctx.sizes.rate, ctx.sizes.latency_seconds);
    for engine in ENGINES {
        fire_at_rate(ctx, engine, rate, secs, FIRING_LATENESS).await?;
        if ctx.stopped() {
            return Ok(());
        }
        webhook_latency(ctx, engine).await?;
    }
    // Ten times the rate: a pump's batches hold dozens of jobs, where lateness shows what
    // a batch costs (its lease, its settle) rather than a round trip.
    let (high, high_secs) = (ctx.sizes.high_rate, ctx.sizes.high_rate_seconds);
    for engine in ENGINES {
        if ctx.stopped() {
            return Ok(());
        }
        fire_at_rate(ctx, engine, high, high_secs, &high_rate_rows(high)).await?;
    }
    // Like with like: BullMQ's lateness is measured at no more than its rate (it falls
    // behind above it, `peer.rs`), so ours is measured at that rate too.
    let peer = super::peer::LATENCY_RATE;
    if rate > peer && !ctx.stopped() {
        fire_at_rate(ctx, "redis", peer, secs, "firing lateness at BullMQ's rate").await?;
    }
    Ok(())
}

/// Fires `rate` jobs a second for `secs` on `engine`, each to a no-op handler that records
/// its lateness, as the rows `what` (the main run also counts the fires after their pump,
/// Redis's CPU, and its curve for the plot).
async fn fire_at_rate(
    ctx: &mut Ctx,
    engine: &'static str,
    rate: u64,
    secs: u64,
    what: &str,
) -> Result<(), String> {
    let jobs = (rate * secs) as usize;
    let store = open_for_latency(ctx, engine).await?;
    let (hist, done) = (histogram(), Arc::new(AtomicU64::new(0)));
    let center = TimeoutCenter::builder(store.clone())
        .settings(lead_settings(ctx))
        .handler(Noop {
            hist: hist.clone(),
            done: done.clone(),
        })
        .start()
        .await
        .map_err(|e| e.to_string())?;
    let t = topic("latency", engine);
    // Everything is scheduled before the first job comes due.
    let start = now_ms() + 2_000 + (jobs as i64 / 100);
    let resets: Vec<Reset> = (0..jobs)
        .map(|i| Reset::new(format!("j{i}"), start + (i as u64 * 1_000 / rate) as i64))
        .collect();
    for chunk in resets.chunks(1_000) {
        center
            .reset_many(&t, chunk, Some(&CreateSpec::default()))
            .await
            .map_err(|e| e.to_string())?;
    }
    // What Redis spends while the jobs fire says whether lateness is its queue.
    let cpu = RedisCpu::start(ctx, engine).await?;
    let bar = ctx.bar(jobs as u64, &format!("latency, {engine}"));
    let deadline = Instant::now() + Duration::from_secs(secs + 60);
    while (done.load(Ordering::Relaxed) as usize) < jobs
        && Instant::now() < deadline
        && !ctx.stopped()
    {
        bar.set_position(done.load(Ordering::Relaxed));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bar.finish_and_clear();
    center.shutdown(Duration::from_secs(1)).await;
    let h = hist.lock().expect("histogram lock").clone();
    let note = format!(
        "{} jobs at {rate}/s, no-op handler{}",
        h.len(),
        delay_note(ctx, engine)
    );
    add_percentiles(ctx, "latency", engine, what, &h, &note);
    if what != FIRING_LATENESS {
        // A comparison's run: its lateness is the figure.
        return Ok(());
    }
    // The part of the lateness the store's round trip makes: jobs that came due while
    // the pump leasing them was in flight (the rest is the host's).
    let after = center
        .metrics()
        .fires
        .fired_after_pump
        .with_label_values(&[t.as_str()])
        .get();
    ctx.add(
        "latency",
        engine,
        "fires after their pump",
        after as f64 * 100.0 / h.len().max(1) as f64,
        "%",
        "toc_jobs_fired_after_their_pump_total over the fires: due while the pump leasing them was in flight",
    );
    cpu.add(
        ctx,
        "latency",
        "redis-server CPU per 100,000 fired",
        h.len(),
    )
    .await?;
    ctx.lateness.push(Lateness {
        system: engine.to_string(),
        rate,
        jobs: h.len(),
        curve: curve(&h),
    });
    Ok(())
}

/// End to end: `webhook` jobs call a local receiver, which records arrival minus fire time.
async fn webhook_latency(ctx: &mut Ctx, engine: &str) -> Result<(), String> {
    use actix_web::{App, HttpResponse, HttpServer, web};
    let (rate, secs) = (ctx.sizes.webhook_rate, ctx.sizes.webhook_seconds);
    let jobs = (rate * secs) as usize;
    let (hist, done) = (histogram(), Arc::new(AtomicU64::new(0)));
    let (h, d) = (hist.clone(), done.clone());
    let server = HttpServer::new(move || {
        let (h, d) = (h.clone(), d.clone());
        App::new().route(
            "/hook",
            web::post().to(move |body: web::Json<Value>| {
                let (h, d) = (h.clone(), d.clone());
                async move {
                    let fire_at = body["fire_at"].as_i64().unwrap_or(0);
                    let _ = h
                        .lock()
                        .expect("histogram lock")
                        .record((now_us() - fire_at * 1_000).max(1) as u64);
                    d.fetch_add(1, Ordering::Relaxed);
                    HttpResponse::Ok().finish()
                }
            }),
        )
    })
    .workers(2)
    .bind(("127.0.0.1", 0))
    .map_err(|e| e.to_string())?;
    let url = format!("http://{}/hook", server.addrs()[0]);
    let server = server.run();
    let handle = server.handle();
    actix_rt::spawn(server);
    let store = open_for_latency(ctx, engine).await?;
    // The receiver is on loopback, which the egress policy refuses by default.
    let center = TimeoutCenter::builder(store)
        .settings(lead_settings(ctx))
        .webhooks(WebhookSettings::allowing_loopback())
        .start()
        .await
        .map_err(|e| e.to_string())?;
    let t = topic("webhook", engine);
    // A webhook topic: its default type is the one its jobs have, which this center runs
    // (the scenarios' default, the Noop type, is not registered here: a topic of it would
    // be served by no instance).
    center
        .put_topic(TopicConfig {
            default_type: "webhook".into(),
            ..TopicConfig::named(t.as_str())
        })
        .await
        .map_err(|e| e.to_string())?;
    let start = now_ms() + 2_000;
    // 64 at a time: behind a slow Redis (--redis-delay-ms) one at a time would still be
    // scheduling when the first ones come due.
    let schedules = (0..jobs).map(|i| {
        let at = start + (i as u64 * 1_000 / rate) as i64;
        let job = NewJob::new(format!("w{i}"), at)
            .job_type("webhook")
            .payload(json!({"url": url, "body": {"fire_at": at}}));
        let (center, t) = (&center, &t);
        async move { center.schedule(t, job, ScheduleMode::Upsert).await }
    });
    let scheduled: Vec<_> = futures_util::stream::iter(schedules)
        .buffer_unordered(64)
        .collect()
        .await;
    for result in scheduled {
        result.map_err(|e| e.to_string())?;
    }
    let deadline = Instant::now() + Duration::from_secs(secs + 30);
    while (done.load(Ordering::Relaxed) as usize) < jobs
        && Instant::now() < deadline
        && !ctx.stopped()
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    center.shutdown(Duration::from_secs(1)).await;
    handle.stop(true).await;
    let h = hist.lock().expect("histogram lock").clone();
    if h.len() < jobs as u64 && !ctx.stopped() {
        return Err(format!(
            "{} of {jobs} webhook calls arrived on {engine}",
            h.len()
        ));
    }
    let note = format!(
        "{} webhook calls at {rate}/s to a local receiver{}",
        h.len(),
        delay_note(ctx, engine)
    );
    add_percentiles(
        ctx,
        "latency",
        engine,
        "webhook end-to-end lateness",
        &h,
        &note,
    );
    Ok(())
}

pub(super) async fn burst(ctx: &mut Ctx) -> Result<(), String> {
    for engine in ENGINES {
        burst_on(ctx, engine, RunEvents::All).await?;
        if ctx.stopped() {
            return Ok(());
        }
    }
    // A topic that keeps no `job.done` (`events = "changes"`): what the events cost a fire.
    burst_on(ctx, "redis", RunEvents::Changes).await
}

/// The burst on one engine, its topic keeping `kept` events: rows named as the main run's,
/// with `, events = changes` (or `none`) after them unless it keeps all.
async fn burst_on(ctx: &mut Ctx, engine: &'static str, kept: RunEvents) -> Result<(), String> {
    let n = ctx.sizes.burst_jobs;
    let tail = match kept {
        RunEvents::All => String::new(),
        other => format!(", events = {}", other.as_str()),
    };
    let store = open(ctx, engine).await?;
    let t = topic("burst", engine);
    store
        .put_topic(TopicConfig {
            events: kept,
            ..TopicConfig {
                name: t.clone(),
                ..options().topic_defaults
            }
        })
        .await
        .map_err(|e| e.to_string())?;
    schedule_burst(ctx, &store, &t, n, &format!("burst, {engine}{tail}")).await?;
    let (hist, done) = (histogram(), Arc::new(AtomicU64::new(0)));
    let cpu = RedisCpu::start(ctx, engine).await?;
    let own_cpu = process_cpu();
    let started = Instant::now();
    let center = TimeoutCenter::builder(store)
        .handler(Noop {
            hist,
            done: done.clone(),
        })
        .start()
        .await
        .map_err(|e| e.to_string())?;
    center.topic(&t).await.map_err(|e| e.to_string())?;
    wait_drained(ctx, &done, n, &format!("burst, {engine}{tail}")).await;
    let secs = started.elapsed().as_secs_f64();
    let handled = done.load(Ordering::Relaxed);
    center.shutdown(Duration::from_secs(1)).await;
    cpu.add(
        ctx,
        "burst",
        &format!("redis-server CPU per 100,000 fired{tail}"),
        handled,
    )
    .await?;
    if let (Some(before), Some(after)) = (own_cpu, process_cpu()) {
        ctx.add(
            "burst",
            engine,
            &format!("this process's CPU per 100,000 fired{tail}"),
            (after - before) * 100_000.0 / handled.max(1) as f64,
            "s",
            "/proc/self/stat utime + stime, before and after the drain (the runtime, its handlers and the bench)",
        );
    }
    ctx.add(
        "burst",
        engine,
        &format!("burst drained in{tail}"),
        secs,
        "s",
        &format!("{handled} of {n} jobs due at one instant"),
    );
    ctx.add(
        "burst",
        engine,
        &format!("burst drain rate{tail}"),
        handled as f64 / secs,
        "jobs/s",
        "no-op handler",
    );
    Ok(())
}

/// Schedules `n` jobs of the topic's default type, all due now, on `t` (before any runtime
/// serves it: a burst), in batches of 1,000.
pub(super) async fn schedule_burst(
    ctx: &Ctx,
    store: &SharedStore,
    t: &str,
    n: usize,
    what: &str,
) -> Result<(), String> {
    let due = now_ms();
    let resets: Vec<Reset> = (0..n).map(|i| Reset::new(format!("b{i}"), due)).collect();
    let bar = ctx.bar(n as u64, &format!("{what}: scheduling"));
    for chunk in resets.chunks(1_000) {
        store
            .reset_many(t, chunk, Some(&CreateSpec::default()), due)
            .await
            .map_err(|e| e.to_string())?;
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    Ok(())
}

/// Waits until `done` reaches `n`, or the run is stopped.
pub(super) async fn wait_drained(ctx: &Ctx, done: &AtomicU64, n: usize, what: &str) {
    let bar = ctx.bar(n as u64, &format!("{what}: draining"));
    while (done.load(Ordering::Relaxed) as usize) < n && !ctx.stopped() {
        bar.set_position(done.load(Ordering::Relaxed));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bar.finish_and_clear();
}

/// A numeric field of Redis's `INFO section`.
async fn info_field(
    c: &mut redis::aio::MultiplexedConnection,
    section: &str,
    field: &str,
) -> Result<f64, String> {
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query_async(c)
        .await
        .map_err(|e| e.to_string())?;
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no {field} in INFO {section}"))
}

pub(super) async fn used_memory(c: &mut redis::aio::MultiplexedConnection) -> Result<i64, String> {
    Ok(info_field(c, "memory", "used_memory").await? as i64)
}

/// redis-server's CPU time and calls of each command over a drain, when the engine is Redis
/// (INFO cpu and INFO commandstats before and after).
pub(super) struct RedisCpu(Option<(redis::aio::MultiplexedConnection, f64, CommandStats)>);

/// Calls and CPU µs of each command, from `INFO commandstats`.
type CommandStats = std::collections::BTreeMap<String, (f64, f64)>;

async fn command_stats(c: &mut redis::aio::MultiplexedConnection) -> Result<CommandStats, String> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(c)
        .await
        .map_err(|e| e.to_string())?;
    Ok(info
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |f: &str| {
                rest.split(',')
                    .find_map(|kv| kv.strip_prefix(f)?.strip_prefix('='))
                    .and_then(|v| v.parse::<f64>().ok())
            };
            Some((name.to_string(), (field("calls")?, field("usec")?)))
        })
        .collect())
}

impl RedisCpu {
    pub(super) async fn start(ctx: &Ctx, engine: &str) -> Result<Self, String> {
        if engine != "redis" {
            return Ok(RedisCpu(None));
        }
        let mut c = redis_conn(ctx).await?;
        let before = redis_cpu(&mut c).await?;
        let stats = command_stats(&mut c).await?;
        Ok(RedisCpu(Some((c, before, stats))))
    }

    /// Adds `figure`, the CPU seconds per 100,000 of the `jobs` drained, to `scenario`, and
    /// for each command Redis ran meanwhile its calls and CPU µs per job (printed, not
    /// published), so that a change that puts work on the path names itself. Redis counts
    /// a function's calls as `fcall`, not by the function's name.
    pub(super) async fn add(
        self,
        ctx: &mut Ctx,
        scenario: &'static str,
        figure: &str,
        jobs: u64,
    ) -> Result<(), String> {
        let Some((mut c, before, stats)) = self.0 else {
            return Ok(());
        };
        let cpu = redis_cpu(&mut c).await? - before;
        let after = command_stats(&mut c).await?;
        ctx.add(
            scenario,
            "redis",
            figure,
            cpu * 100_000.0 / jobs.max(1) as f64,
            "s",
            "INFO cpu used_cpu_user + used_cpu_sys, before the first job ran and after the last",
        );
        let per_job = jobs.max(1) as f64;
        let mut moved: Vec<(String, f64, f64)> = after
            .iter()
            .filter_map(|(name, (calls, usec))| {
                let (c0, u0) = stats.get(name).copied().unwrap_or((0.0, 0.0));
                (calls - c0 > 0.0)
                    .then(|| (name.clone(), (calls - c0) / per_job, (usec - u0) / per_job))
            })
            .collect();
        moved.sort_by(|a, b| b.2.total_cmp(&a.2));
        println!("  redis commands per job ({scenario}, {jobs} jobs), by CPU:");
        for (name, calls, usec) in moved.iter().take(16) {
            println!("    {name:<20} {calls:>10.4} calls/job {usec:>10.3} µs/job");
        }
        Ok(())
    }
}

/// CPU seconds (user and system) this process has used since it started, from
/// `/proc/self/stat` (Linux; `None` elsewhere). Its fields count clock ticks, which Linux
/// reports at 100 a second (`USER_HZ`) on every architecture it runs the bench on.
pub(super) fn process_cpu() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name (which may hold spaces, so it ends at the last ')'):
    // state is the third field of the line, utime the 14th and stime the 15th.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
}

/// CPU seconds (user and system) redis-server has used since it started.
async fn redis_cpu(c: &mut redis::aio::MultiplexedConnection) -> Result<f64, String> {
    Ok(info_field(c, "cpu", "used_cpu_user").await? + info_field(c, "cpu", "used_cpu_sys").await?)
}

/// Waits until Redis has freed what UNLINK handed to its background thread, so the next
/// before-and-after measurement is not disturbed.
pub(super) async fn settle_lazyfree(
    c: &mut redis::aio::MultiplexedConnection,
) -> Result<(), String> {
    for _ in 0..600 {
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query_async(c)
            .await
            .map_err(|e| e.to_string())?;
        let pending = info
            .lines()
            .find_map(|l| l.strip_prefix("lazyfree_pending_objects:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if pending == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err("Redis did not finish freeing memory within 30 s".into())
}

pub(super) async fn redis_conn(ctx: &Ctx) -> Result<redis::aio::MultiplexedConnection, String> {
    let client = redis::Client::open(ctx.redis_url.as_str()).map_err(|e| e.to_string())?;
    client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())
}

/// Removes every bench topic from the Redis a run measures: its keys (`toc:{bench-*`) and
/// its settings. Run before each scenario, so that a scenario's service, which serves every
/// topic of the store, does not pump and fire what earlier scenarios left behind while it
/// measures (it did: the burst drained the reset scenario's devices as well, and its
/// redis-server CPU per job counted theirs).
pub(super) async fn clear_bench_topics(ctx: &Ctx) -> Result<(), String> {
    let mut c = redis_conn(ctx).await?;
    let e = |e: redis::RedisError| e.to_string();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("toc:{bench-*")
            .arg("COUNT")
            .arg(1_000)
            .query_async(&mut c)
            .await
            .map_err(e)?;
        if !keys.is_empty() {
            let _: () = redis::cmd("UNLINK")
                .arg(&keys)
                .query_async(&mut c)
                .await
                .map_err(e)?;
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    // UNLINK frees large keys on a thread of redis-server's own: one scenario's millions of
    // jobs are freed before the next scenario measures.
    settle_lazyfree(&mut c).await?;
    let names: Vec<String> = redis::cmd("HKEYS")
        .arg("toc:topics")
        .query_async(&mut c)
        .await
        .map_err(e)?;
    let bench: Vec<&String> = names.iter().filter(|n| n.starts_with("bench-")).collect();
    if !bench.is_empty() {
        let _: () = redis::cmd("HDEL")
            .arg("toc:topics")
            .arg(&bench)
            .query_async(&mut c)
            .await
            .map_err(e)?;
    }
    Ok(())
}

pub(super) async fn memory(ctx: &mut Ctx) -> Result<(), String> {
    let n = ctx.sizes.memory_jobs;
    let mut c = redis_conn(ctx).await?;
    let store = open(ctx, "redis").await?;
    let ids: Vec<String> = (0..n).map(|i| format!("device-{i:08}")).collect();
    let at = now_ms() + 3_600_000;
    let mut measure = async |payload: Option<Value>| -> Result<f64, String> {
        let t = topic("memory", "redis");
        let before = used_memory(&mut c).await?;
        let create = CreateSpec {
            payload: payload.unwrap_or(Value::Null),
            ..CreateSpec::default()
        };
        for chunk in ids.chunks(1_000) {
            let resets: Vec<Reset> = chunk.iter().map(|id| Reset::new(id.clone(), at)).collect();
            store
                .reset_many(&t, &resets, Some(&create), at)
                .await
                .map_err(|e| e.to_string())?;
        }
        let per_job = (used_memory(&mut c).await? - before) as f64 / n as f64;
        let _: () = redis::cmd("EVAL")
            .arg("for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('UNLINK', k) end")
            .arg(0)
            .arg(format!("toc:{{{t}:*"))
            .query_async(&mut c)
            .await
            .map_err(|e| e.to_string())?;
        settle_lazyfree(&mut c).await?;
        Ok(per_job)
    };
    let empty = measure(None).await?;
    let padded = measure(Some(json!("x".repeat(198)))).await?;
    let before = used_memory(&mut c).await?;
    for chunk in ids.chunks(1_000) {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg("bench-bare");
        for id in chunk {
            cmd.arg(at).arg(id);
        }
        let _: i64 = cmd.query_async(&mut c).await.map_err(|e| e.to_string())?;
    }
    let bare = (used_memory(&mut c).await? - before) as f64 / n as f64;
    let _: i64 = redis::cmd("DEL")
        .arg("bench-bare")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    let note = format!("{n} jobs, 16 slots, INFO used_memory before and after");
    ctx.add(
        "memory",
        "redis",
        "bytes per job, empty payload",
        empty,
        "B",
        &note,
    );
    ctx.add(
        "memory",
        "redis",
        "bytes per job, 200-byte payload",
        padded,
        "B",
        &note,
    );
    ctx.add(
        "memory",
        "bare sorted set",
        "bytes per member",
        bare,
        "B",
        &format!("ZADD of the same {n} ids into one key"),
    );
    ctx.add(
        "memory",
        "redis",
        "empty-payload job / bare sorted set",
        empty / bare,
        "x",
        "target at most 1.0",
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first round after a fill must reach every device once (it is what ends a
    /// Redis fill's rehashing, `Span::Fleet`), and no more: a device sent twice would be
    /// counted as two resets of the round.
    #[tokio::test]
    async fn a_round_of_the_fleet_sends_every_device_once() {
        let sent = std::sync::Mutex::new(Vec::new());
        let stop = AtomicBool::new(false);
        let n = 10_500;
        let rate = paced_heartbeats(n, Span::Fleet, &stop, |ids, _| {
            let len = ids.len() as u64;
            sent.lock().unwrap().extend(ids);
            async move { len }
        })
        .await;
        let mut sent = sent.into_inner().unwrap();
        sent.sort_unstable();
        assert_eq!(sent, (0..n).collect::<Vec<_>>());
        assert!(rate > 0.0);
    }
}

//! `toc bench topics`: what idle topics cost. For each engine and size (1,000 topics; more
//! with `--topics 1000,10000`), a real `toc serve` (this binary) is started empty, its
//! resident memory noted, then `n` topics of the default 16 slots are made with one job each
//! due in an hour (one `PUT` of a job per topic, 64 in flight: the creation time), and after
//! a settling pause, while nothing is due, it measures over a span: the process's resident
//! memory above the empty process, its CPU, and on Redis the commands Redis ran per second
//! and redis-server's CPU. A multi-tenant user's topic per customer costs this much while
//! nothing happens.
//!
//! On Redis a second instance then joins: once the slots are spread over both, each one's
//! idle CPU and Redis' commands are measured again, and one is killed with SIGKILL: the
//! take-over time is how long until the other serves every slot again (its owner leases, 5 s
//! by default, must run out first).
//!
//! And a busy topic's firing lateness (`--rate` jobs a second for 10 s, no-op handler, in
//! process on the library) alone and beside the idle topics: what the idle ones cost the
//! busy one.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;
use timeout_center::time::now_ms;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;
use timeout_center::{CreateSpec, NewJob, Reset, ScheduleMode, TimeoutCenter};

use super::Ctx;
use super::child::Child;
use super::scenarios::{ENGINES, Noop, clear_bench_topics, histogram, open, redis_conn};

/// Topic counts measured when `--topics` gives none.
pub(super) fn default_sizes(quick: bool) -> Vec<usize> {
    if quick { vec![100] } else { vec![1_000] }
}

pub(super) async fn topics(ctx: &mut Ctx) -> Result<(), String> {
    let sizes = ctx.sizes.topics.clone();
    for engine in ENGINES {
        for &n in &sizes {
            if ctx.stopped() {
                return Ok(());
            }
            clear_bench_topics(ctx).await?;
            at_size(ctx, engine, n).await?;
        }
        clear_bench_topics(ctx).await?;
        let alone = busy_lateness(ctx, engine, 0).await?;
        for &n in &sizes {
            if ctx.stopped() {
                return Ok(());
            }
            clear_bench_topics(ctx).await?;
            let among = busy_lateness(ctx, engine, n).await?;
            let (p99, p99_alone) = (
                among.value_at_quantile(0.99) as f64 / 1_000.0,
                alone.value_at_quantile(0.99) as f64 / 1_000.0,
            );
            let how = format!(
                "{} jobs a second for {BUSY_S} s on one topic, no-op handler, in process; beside {n} idle topics (one job each due in an hour) and alone",
                ctx.sizes.rate
            );
            ctx.add(
                "topics",
                engine,
                "busy topic p99 firing lateness, alone",
                p99_alone,
                "ms",
                &how,
            );
            ctx.add(
                "topics",
                engine,
                &format!("busy topic p99 firing lateness, beside {n} idle topics"),
                p99,
                "ms",
                &how,
            );
        }
    }
    clear_bench_topics(ctx).await
}

/// Seconds the busy topic fires for.
const BUSY_S: u64 = 10;

/// A busy topic's firing lateness (µs): `--rate` jobs a second for `BUSY_S` seconds on one
/// topic of an in-process center with `idle` idle topics beside it (one job each due in an
/// hour, made first, then 10 s to settle).
async fn busy_lateness(ctx: &Ctx, engine: &str, idle: usize) -> Result<Histogram<u64>, String> {
    let store = open(ctx, engine).await?;
    let (hist, done) = (histogram(), Arc::new(AtomicU64::new(0)));
    let center = TimeoutCenter::builder(store)
        .handler(Noop {
            hist: hist.clone(),
            done: done.clone(),
        })
        .start()
        .await
        .map_err(|e| e.to_string())?;
    let far = now_ms() + 3_600_000;
    let made: Vec<_> = futures_util::stream::iter(0..idle)
        .map(|i| {
            let center = &center;
            async move {
                center
                    .schedule(
                        &format!("bench-idle-{i}"),
                        NewJob::new("j", far),
                        ScheduleMode::Upsert,
                    )
                    .await
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    for r in made {
        r.map_err(|e| e.to_string())?;
    }
    if idle > 0 {
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    let rate = ctx.sizes.rate;
    let jobs = (rate * BUSY_S) as usize;
    let t = super::scenarios::topic("busy", engine);
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
    let deadline = Instant::now() + Duration::from_secs(BUSY_S + 60);
    while (done.load(Ordering::Relaxed) as usize) < jobs && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    center.shutdown(Duration::from_secs(1)).await;
    let h = hist.lock().expect("histogram lock").clone();
    if h.len() < jobs as u64 {
        return Err(format!(
            "the busy topic fired {} of {jobs} jobs beside {idle} idle topics on {engine}",
            h.len()
        ));
    }
    Ok(h)
}

/// Redis' count of commands run and its CPU seconds (user and system) so far.
async fn redis_counters(ctx: &Ctx) -> Result<(f64, f64), String> {
    let mut c = redis_conn(ctx).await?;
    let info: String = redis::cmd("INFO")
        .arg("all")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    let field = |name: &str| -> f64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    Ok((
        field("total_commands_processed"),
        field("used_cpu_user") + field("used_cpu_sys"),
    ))
}

async fn at_size(ctx: &mut Ctx, engine: &str, n: usize) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut env = vec![
        ("TOC_STORE", engine.to_string()),
        ("TOC_LIMITS_MAX_TOPICS", "0".to_string()),
        ("TOC_LIMITS_MAX_TOTAL_SLOTS", "0".to_string()),
    ];
    if engine == "redis" {
        env.push(("TOC_REDIS_URL", ctx.redis_url.clone()));
    }
    let mut toc = Child::start_with(&env, &dir.path().join("toc")).await?;
    let empty = toc.rss()?;
    let http = reqwest::Client::new();
    let fire_at = now_ms() + 3_600_000;
    let started = Instant::now();
    let made: Vec<Result<(), String>> = futures_util::stream::iter(0..n)
        .map(|i| {
            let (http, base) = (http.clone(), toc.base.clone());
            async move {
                let r = http
                    .put(format!("{base}/v1/topics/bench-idle-{i}/jobs/j"))
                    .json(&json!({"type": "emit", "fire_at": fire_at}))
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                if r.status().is_success() {
                    Ok(())
                } else {
                    Err(format!(
                        "{}: {}",
                        r.status(),
                        r.text().await.unwrap_or_default()
                    ))
                }
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let creation = started.elapsed().as_secs_f64();
    if let Some(Err(e)) = made.into_iter().find(Result::is_err) {
        return Err(format!("making {n} topics on {engine}: {e}; {}", toc.log()));
    }
    let (settle, span) = (
        Duration::from_secs(ctx.sizes.topics_settle_s),
        Duration::from_secs(ctx.sizes.topics_span_s),
    );
    tokio::time::sleep(settle).await;
    let (cpu0, redis0) = (toc.cpu_seconds()?, redis_counters(ctx).await?);
    let t0 = Instant::now();
    tokio::time::sleep(span).await;
    let secs = t0.elapsed().as_secs_f64();
    let (cpu1, redis1) = (toc.cpu_seconds()?, redis_counters(ctx).await?);
    let rss = toc.rss()?;
    let size = format!("{n} topics");
    let how = format!(
        "{n} topics x 16 slots, one job each due in an hour, after {} s settling, over {} s",
        settle.as_secs(),
        span.as_secs()
    );
    ctx.add(
        "topics",
        engine,
        &format!("idle: resident memory above an empty process, {size}"),
        rss.saturating_sub(empty) as f64 / 1e6,
        "MB",
        &how,
    );
    ctx.add(
        "topics",
        engine,
        &format!("idle: toc CPU, {size}"),
        (cpu1 - cpu0) / secs * 100.0,
        "% of a core",
        &how,
    );
    if engine == "redis" {
        ctx.add(
            "topics",
            engine,
            &format!("idle: Redis commands/s, {size}"),
            (redis1.0 - redis0.0) / secs,
            "commands/s",
            &format!("{how}; INFO total_commands_processed (2 of them the measure's own)"),
        );
        ctx.add(
            "topics",
            engine,
            &format!("idle: redis-server CPU, {size}"),
            (redis1.1 - redis0.1) / secs * 100.0,
            "% of a core",
            &how,
        );
    }
    ctx.add(
        "topics",
        engine,
        &format!("creating {size}"),
        creation,
        "s",
        "one PUT of a job per new topic (default settings, 16 slots), 64 in flight",
    );
    if engine == "redis" {
        two_instances(ctx, &mut toc, &env, &dir.path().join("peer"), n).await?;
    }
    toc.stop();
    Ok(())
}

/// How many slots of the idle topics `toc` serves, or `None` while it does not answer.
async fn served(http: &reqwest::Client, toc: &Child) -> Option<usize> {
    let slots = toc_testkit::process::served_slots(http, &toc.base).await?;
    Some(
        slots
            .iter()
            .filter(|s| s["alive"] == true)
            .filter(|s| {
                s["topic"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("bench-idle-"))
            })
            .count(),
    )
}

/// Waits until `all` serve `slots` slots between them, each some; fails after `within`.
async fn spread(
    http: &reqwest::Client,
    all: &[&Child],
    slots: usize,
    within: Duration,
) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let mut counts = Vec::new();
        for c in all {
            counts.push(served(http, c).await.unwrap_or(0));
        }
        if counts.iter().sum::<usize>() == slots && counts.iter().all(|&c| c > 0) {
            return Ok(());
        }
        if start.elapsed() > within {
            return Err(format!(
                "the {slots} slots were not spread over {} instances within {within:?}: {counts:?}",
                all.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A second instance on the same Redis: once the slots are spread over both, their idle CPU
/// and Redis' commands; then it is killed with SIGKILL, and the take-over time measured.
async fn two_instances(
    ctx: &mut Ctx,
    toc: &mut Child,
    env: &[(&str, String)],
    log_base: &std::path::Path,
    n: usize,
) -> Result<(), String> {
    let http = reqwest::Client::new();
    let slots = n * 16;
    let mut peer = Child::start_with(env, log_base).await?;
    spread(&http, &[toc, &peer], slots, Duration::from_secs(600)).await?;
    let (settle, span) = (
        Duration::from_secs(ctx.sizes.topics_settle_s),
        Duration::from_secs(ctx.sizes.topics_span_s),
    );
    tokio::time::sleep(settle).await;
    let (a0, b0, redis0) = (
        toc.cpu_seconds()?,
        peer.cpu_seconds()?,
        redis_counters(ctx).await?,
    );
    let t0 = Instant::now();
    tokio::time::sleep(span).await;
    let secs = t0.elapsed().as_secs_f64();
    let (a1, b1, redis1) = (
        toc.cpu_seconds()?,
        peer.cpu_seconds()?,
        redis_counters(ctx).await?,
    );
    let size = format!("{n} topics");
    let how = format!(
        "{n} topics x 16 slots spread over two instances on one Redis, after {} s settling, over {} s",
        settle.as_secs(),
        span.as_secs()
    );
    ctx.add(
        "topics",
        "redis",
        &format!("idle, two instances: toc CPU of the busier, {size}"),
        (a1 - a0).max(b1 - b0) / secs * 100.0,
        "% of a core",
        &how,
    );
    ctx.add(
        "topics",
        "redis",
        &format!("idle, two instances: Redis commands/s, {size}"),
        (redis1.0 - redis0.0) / secs,
        "commands/s",
        &format!("{how}; both instances' together"),
    );
    peer.kill();
    let killed = Instant::now();
    spread(&http, &[toc], slots, Duration::from_secs(600)).await?;
    ctx.add(
        "topics",
        "redis",
        &format!("take-over of a killed instance's slots, {size}"),
        killed.elapsed().as_secs_f64(),
        "s",
        "one of two instances killed with SIGKILL: until the other serves every slot (owner lease 5 s; /health read every 200 ms)",
    );
    Ok(())
}

//! `toc bench topics`: what idle topics cost. For each engine and size (1,000 topics; more
//! with `--topics 1000,10000`), a real `toc serve` (this binary) is started empty, its
//! resident memory noted, then `n` topics of the default 16 slots are made with one job each
//! due in an hour (one `PUT` of a job per topic, 64 in flight: the creation time), and after
//! a settling pause, while nothing is due, it measures over a span: the process's resident
//! memory above the empty process, its CPU, and on Redis the commands Redis ran per second
//! and redis-server's CPU. A multi-tenant user's topic per customer costs this much while
//! nothing happens.
//!
//! Not measured here yet (issue 48): a busy topic's lateness among idle ones, and the
//! take-over time of a killed instance's slots among them.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;
use timeout_center::time::now_ms;

use super::Ctx;
use super::child::Child;
use super::scenarios::{ENGINES, clear_bench_topics, redis_conn};

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
    }
    clear_bench_topics(ctx).await
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
    toc.stop();
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
    Ok(())
}

//! `toc bench scale`: what a job costs as the resident count grows. For each size (100,000
//! and 1M; 10M and more with `--scale-sizes`) and engine, a fresh store holding that many
//! plain jobs (devices, an hour out) measures: library resets/s (after a first round of
//! the whole fleet, which is reported apart) and HTTP batch resets/s (the reset scenario's
//! loops), creates/s while filling it (batches of 1,000 with `create`), bytes per job
//! (Redis' `used_memory`; for the memory engine the resident memory of a real `toc serve`
//! filled through `POST /resets`), and for that `toc serve`'s journal its size and the time
//! a restart takes to be healthy (the replay). On Redis, the same heartbeats on bare sorted
//! sets of that size (`bare_zset.rs`) give the server's own floor beside them. A size the
//! machine cannot hold is skipped, said so.

use std::time::Instant;

use super::Ctx;
use super::bare_zset::bare_resets;
use super::child::Child;
use super::scenarios::{
    ENGINES, Span, device_batches, heartbeats, http_bodies, http_resets, open, redis_conn, service,
    settle_lazyfree, topic, used_memory,
};
use serde_json::json;

use timeout_center::time::now_ms;
use timeout_center::{CreateSpec, Reset};

/// Memory the machine has available, in bytes (Linux: `MemAvailable`).
fn available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// A size's label: `100k`, `1M`, `10M`.
fn label(n: usize) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

pub(super) async fn scale(ctx: &mut Ctx) -> Result<(), String> {
    let sizes = ctx.sizes.scale.clone();
    for engine in ENGINES {
        for &n in &sizes {
            // About 1 kB a job on memory (the engine and the bench's own ids), 0.5 kB on
            // Redis (its keys and this process's ids): refused before it swaps.
            let need = n as u64 * if engine == "memory" { 1_000 } else { 500 };
            if available().is_some_and(|a| need > a / 10 * 8) {
                println!("  {engine}: {n} resident jobs would not fit in memory here: skipped");
                continue;
            }
            if ctx.stopped() {
                return Ok(());
            }
            at_size(ctx, engine, n).await?;
            super::scenarios::clear_bench_topics(ctx).await?;
            if engine == "redis" {
                let (secs, size) = (ctx.sizes.reset_seconds, label(n));
                let bare = bare_resets(ctx, n, secs, &ctx.stop).await?;
                ctx.add(
                    "scale",
                    engine,
                    &format!("resets/s, bare sorted sets, {size} resident"),
                    bare,
                    "resets/s",
                    &format!("the floor: {n} devices in 16 plain sorted sets, raw ZADD XX CH of 1,000 a pipeline to an hour from now, 4 in flight"),
                );
            }
        }
    }
    Ok(())
}

async fn at_size(ctx: &mut Ctx, engine: &str, n: usize) -> Result<(), String> {
    let secs = ctx.sizes.reset_seconds;
    let size = label(n);
    // A fleet's alarms spread over its timeout (here an hour), as its heartbeats do: with
    // every device due at one instant, each reset on Redis compared its id with millions
    // of others' of the same score (a skiplist orders ties by member), a cost no fleet has.
    let batches = device_batches(n, now_ms() + 3_600_000, 3_600_000);
    let mut redis = match engine {
        "redis" => {
            let mut c = redis_conn(ctx).await?;
            settle_lazyfree(&mut c).await?;
            Some(c)
        }
        _ => None,
    };
    let before = match &mut redis {
        Some(c) => Some(used_memory(c).await? as f64),
        None => None,
    };
    let store = open(ctx, engine).await?;
    let svc = service(store, engine).await?;
    let (c, t) = (&svc.center, topic("scale", engine));
    let started = Instant::now();
    let bar = ctx.bar(n as u64, &format!("scale {size}, {engine}: filling"));
    let create = CreateSpec::default();
    for chunk in batches.chunks(4) {
        let calls = chunk.iter().map(|b| c.reset_many(&t, b, Some(&create)));
        for r in futures_util::future::join_all(calls).await {
            r.map_err(|e| e.to_string())?;
        }
        bar.inc(chunk.iter().map(Vec::len).sum::<usize>() as u64);
    }
    bar.finish_and_clear();
    let fill = n as f64 / started.elapsed().as_secs_f64();
    let note = format!("{n} plain jobs resident, 16 slots");
    if let (Some(c), Some(before)) = (&mut redis, before) {
        let after = used_memory(c).await? as f64;
        ctx.add(
            "scale",
            engine,
            &format!("bytes per job, {size} resident"),
            (after - before) / n as f64,
            "B",
            &format!("{note}; INFO used_memory before and after"),
        );
    }
    ctx.add(
        "scale",
        engine,
        &format!("creates/s, {size} resident"),
        fill,
        "jobs/s",
        &format!("{note}; batches of 1,000 with create, 4 in flight"),
    );
    // Heartbeats: each pushes its device's alarm to an hour from now, as the HTTP loop's
    // `delay_ms` does. The first round of the whole fleet after the bulk fill is measured
    // apart (`Span::Fleet` says what it pays for on Redis: a fill's cost, which a fleet's
    // steady heartbeats do not pay); the library's line is the seconds after it.
    let first = heartbeats(c, &t, n, Span::Fleet, &ctx.stop).await;
    ctx.add(
        "scale",
        engine,
        &format!("first-pass resets/s, library, {size} resident"),
        first,
        "resets/s",
        &format!("{note}; one heartbeat from every device right after the fill, as below"),
    );
    let lib = heartbeats(c, &t, n, Span::Seconds(secs), &ctx.stop).await;
    ctx.add(
        "scale",
        engine,
        &format!("resets/s, library, {size} resident"),
        lib,
        "resets/s",
        &format!(
            "{note}; batches of 1,000 to an hour from now, 4 in flight, after one heartbeat from every device"
        ),
    );
    // From the fleet's other half: at 10M the library's seconds reach a fraction of the
    // devices, and a pass over the ones it just moved found their nodes in the order it
    // left them (on Redis, faster than the bare sets' first pass), which flattered HTTP.
    let mut bodies = http_bodies(&batches);
    let half = bodies.len() / 2;
    bodies.rotate_left(half);
    let http = reqwest::Client::new();
    let via_http = http_resets(&http, &svc.base, &t, &bodies, secs, &ctx.stop).await;
    ctx.add(
        "scale",
        engine,
        &format!("resets/s, HTTP, {size} resident"),
        via_http,
        "resets/s",
        &format!("{note}; 1,000 per request (delay_ms an hour), 4 in flight"),
    );
    svc.stop().await;
    if engine == "memory"
        && let Err(e) = served(ctx, n, &batches).await
    {
        // The other figures stand: say what was not measured, and why.
        println!("  memory: toc serve with {n} jobs not measured: {e}");
    }
    Ok(())
}

/// A real `toc serve` on the memory engine with a journal (this binary, a child process):
/// `n` plain jobs created through `POST /resets`, its resident memory before and after, the
/// journal's size, and the time a restart takes to be healthy again (the replay).
async fn served(ctx: &mut Ctx, n: usize, batches: &[Vec<Reset>]) -> Result<(), String> {
    let size = label(n);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let journal = dir.path().join("toc.journal");
    let bodies: Vec<bytes::Bytes> = batches
        .iter()
        .map(|b| {
            let v = json!({"resets": b.iter().map(|r| json!({"id": r.job.id, "delay_ms": 3_600_000})).collect::<Vec<_>>(), "create": {}});
            bytes::Bytes::from(serde_json::to_vec(&v).expect("a body serialises"))
        })
        .collect();
    let http = reqwest::Client::new();
    let mut toc = Child::start(&journal).await?;
    // The allocator gives freed memory back after a moment: each reading waits for it.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let before = toc.rss()?;
    for chunk in bodies.chunks(4) {
        let calls = chunk.iter().map(|b| {
            http.post(format!("{}/v1/topics/devices/resets", toc.base))
                .header("content-type", "application/json")
                .body(b.clone())
                .send()
        });
        for r in futures_util::future::join_all(calls).await {
            let r = r.map_err(|e| format!("POST /resets: {e}; toc serve said: {}", toc.log()))?;
            if !r.status().is_success() {
                return Err(format!("POST /resets answered {}", r.status()));
            }
        }
    }
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let after = toc.rss()?;
    toc.stop();
    let bytes = std::fs::metadata(&journal)
        .map_err(|e| e.to_string())?
        .len();
    let started = Instant::now();
    let again = Child::start(&journal).await?;
    let secs = started.elapsed().as_secs_f64();
    drop(again);
    let note = format!("toc serve, {n} plain jobs created through POST /resets");
    ctx.add(
        "scale",
        "memory",
        &format!("bytes per job, {size} resident"),
        // Signed: at a small size the allocator may give back more than the jobs took, and
        // the resident memory falls (a --quick run's 10,000 jobs take about 1 MB).
        (after as f64 - before as f64) / n as f64,
        "B",
        &format!("{note}; its resident memory (/proc/PID/statm) before and after"),
    );
    ctx.add(
        "scale",
        "memory+journal",
        &format!("journal bytes per job, {size} resident"),
        bytes as f64 / n as f64,
        "B",
        &format!("{note}, fsync = every second"),
    );
    ctx.add(
        "scale",
        "memory+journal",
        &format!("restart to healthy, {size} resident"),
        secs * 1_000.0,
        "ms",
        &format!("{note}; {:.0} jobs/s replayed", n as f64 / secs),
    );
    Ok(())
}

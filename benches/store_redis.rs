//! The store's headline figures against Redis itself, in one run on one `redis-server` that
//! this benchmark starts:
//!
//! - resets per second through `reset_many` (batches of 1,000) beside `redis-benchmark -P 64`
//!   ZADD on the same server;
//! - Redis memory per job (100,000 plain jobs) beside a bare sorted set of the same ids.
//!
//! Run: `cargo bench --bench store_redis` (needs `redis-server` and `redis-benchmark`).
//! Settings: `TOC_BENCH_JOBS` (default 100000), `TOC_BENCH_SECONDS` (default 5),
//! `TOC_BENCH_SLOTS` (the topic's slots, default 16).

use std::sync::Arc;
use std::time::{Duration, Instant};

use timeout_center::Store;
use timeout_center::conformance::*;
use timeout_center::*;
use toc_testkit::RedisServer;

const BATCH: usize = 1_000;
const IN_FLIGHT: usize = 4;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `redis-benchmark -P 64` with `args` against the server: requests per second.
fn redis_benchmark(port: u16, requests: u64, args: &[&str]) -> f64 {
    toc_testkit::redis_server::redis_benchmark_at("127.0.0.1", port, requests, args)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn used_memory(conn: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("memory").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO")
}

#[tokio::main]
async fn main() {
    let jobs = env_or("TOC_BENCH_JOBS", 100_000) as usize;
    let seconds = env_or("TOC_BENCH_SECONDS", 5);
    let server = RedisServer::start();
    let mut raw = server.conn();
    let slots = env_or("TOC_BENCH_SLOTS", 16) as u32;
    let options = StoreOptions {
        topic_defaults: TopicConfig {
            slots,
            ..TopicConfig::default()
        },
        ..StoreOptions::default()
    };
    let store = Arc::new(Store::redis(&server.url(), options).await.unwrap());
    let version: String = redis::cmd("INFO").arg("server").query(&mut raw).unwrap();
    let version = version
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .to_string();
    println!(
        "redis {version}, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // Memory first, on an empty server.
    let base = used_memory(&mut raw);
    let ids: Vec<String> = (0..jobs).map(|i| format!("device-{i:08}")).collect();
    for chunk in ids.chunks(BATCH) {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg("bare");
        for (i, id) in chunk.iter().enumerate() {
            cmd.arg(1_700_000_000_000i64 + i as i64).arg(id);
        }
        let _: i64 = cmd.query(&mut raw).unwrap();
    }
    let bare = (used_memory(&mut raw) - base) as f64 / jobs as f64;
    let _: i64 = redis::cmd("DEL").arg("bare").query(&mut raw).unwrap();

    let now = time::now_ms();
    let base = used_memory(&mut raw);
    let create = CreateSpec::default();
    for chunk in ids.chunks(BATCH) {
        let resets: Vec<Reset> = chunk
            .iter()
            .map(|id| Reset::new(id.clone(), now + 60_000))
            .collect();
        store
            .reset_many("devices", &resets, Some(&create), now)
            .await
            .unwrap();
    }
    let ours = (used_memory(&mut raw) - base) as f64 / jobs as f64;
    println!(
        "memory per job ({jobs} plain jobs, {slots} slots): {ours:.1} B; bare sorted set: {bare:.1} B; ratio {:.2} (target <= 1.5)",
        ours / bare
    );

    // Throughput: the baseline, then resets of the jobs just created.
    // Two baselines. The stock ZADD test adds one member with score 0 again and again: after
    // the first call each ZADD changes nothing. The second does what a reset does: it moves a
    // random one of `jobs` members to a new score in a set of that size.
    let zadd = redis_benchmark(server.port, 2_000_000, &["-t", "zadd"]);
    let jobs_text = jobs.to_string();
    let moving = redis_benchmark(
        server.port,
        1_000_000,
        &[
            "-r",
            &jobs_text,
            "ZADD",
            "moving",
            "__rand_int__",
            "device-__rand_int__",
        ],
    );
    let _: i64 = redis::cmd("DEL").arg("moving").query(&mut raw).unwrap();
    // Each worker owns every IN_FLIGHT-th batch; each round moves its devices 1 ms later, as
    // heartbeats do.
    let batches: Vec<Vec<Reset>> = ids
        .chunks(BATCH)
        .map(|c| {
            c.iter()
                .map(|id| Reset::new(id.clone(), now + 120_000))
                .collect()
        })
        .collect();
    let mut shares: Vec<Vec<Vec<Reset>>> = vec![Vec::new(); IN_FLIGHT];
    for (i, b) in batches.into_iter().enumerate() {
        shares[i % IN_FLIGHT].push(b);
    }
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let workers = shares.into_iter().map(|mut share| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut done = 0u64;
            let mut i = 0;
            while Instant::now() < deadline {
                let len = share.len();
                let batch = &mut share[i % len];
                for r in batch.iter_mut() {
                    r.fire_at += 1;
                }
                let report = store.reset_many("devices", batch, None, now).await.unwrap();
                assert!(report.missing.is_empty());
                done += report.reset;
                i += 1;
            }
            done
        })
    });
    let mut total = 0;
    for w in workers {
        total += w.await.unwrap();
    }
    let rate = total as f64 / started.elapsed().as_secs_f64();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut raw)
        .unwrap();
    if let Some(line) = stats.lines().find(|l| l.starts_with("cmdstat_evalsha:")) {
        println!("server side: {line}");
    }
    println!("reset_many (batches of {BATCH}, {IN_FLIGHT} in flight): {rate:.0} resets/s");
    println!(
        "  redis-benchmark -P 64 -t zadd (one member, unchanged): {zadd:.0} ops/s; ratio {:.2}",
        rate / zadd
    );
    println!(
        "  redis-benchmark -P 64 -r {jobs} ZADD moving __rand_int__ device-__rand_int__: {moving:.0} ops/s; ratio {:.2}",
        rate / moving
    );
}

//! What a slot doubling costs while old copies remain, on one `redis-server` this benchmark
//! starts: two topics of the same jobs, one left alone and one doubled, each put through the
//! same heartbeat resets and then pumped. Reported per job: Redis script calls and Redis
//! commands (scripts' inner commands included, from `INFO commandstats`), and the rate.
//!
//! Run: `cargo bench --bench doubling` (needs `redis-server`).
//! Settings: `TOC_BENCH_JOBS` (default 100000), `TOC_BENCH_SLOTS` (default 16), and
//! `TOC_BENCH_CLUSTER=1` to run on a local three-primary Redis Cluster instead (commands are
//! then counted over every node).

use std::sync::Arc;
use std::time::Instant;

use timeout_center::Store;
use timeout_center::conformance::*;
use timeout_center::*;
use toc_testkit::RedisCluster;
use toc_testkit::RedisServer;

const BATCH: usize = 1_000;
const T0: Millis = 1_700_000_000_000;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Script calls and all commands Redis has run so far, over every node.
fn counts(conns: &mut [redis::Connection]) -> (u64, u64) {
    let (mut scripts, mut all) = (0, 0);
    for conn in conns {
        let (s, a) = node_counts(conn);
        scripts += s;
        all += a;
    }
    (scripts, all)
}

/// Script calls and all commands one node has run so far.
fn node_counts(conn: &mut redis::Connection) -> (u64, u64) {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    let (mut scripts, mut all) = (0, 0);
    for line in info.lines().filter(|l| l.starts_with("cmdstat_")) {
        let calls: u64 = line
            .split("calls=")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if line.starts_with("cmdstat_evalsha") || line.starts_with("cmdstat_eval:") {
            scripts += calls;
        }
        all += calls;
    }
    (scripts, all)
}

struct Figure {
    per_sec: f64,
    scripts_per_job: f64,
    commands_per_job: f64,
}

async fn measure<F: std::future::Future<Output = ()>>(
    conns: &mut [redis::Connection],
    jobs: usize,
    work: F,
) -> Figure {
    let before = counts(conns);
    let start = Instant::now();
    work.await;
    let secs = start.elapsed().as_secs_f64();
    let after = counts(conns);
    // INFO itself is one command on each node each time.
    let info = conns.len() as u64;
    Figure {
        per_sec: jobs as f64 / secs,
        scripts_per_job: (after.0 - before.0) as f64 / jobs as f64,
        commands_per_job: (after.1 - before.1 - info) as f64 / jobs as f64,
    }
}

async fn resets(s: &SharedStore, topic: &str, ids: &[String], at: Millis) {
    for chunk in ids.chunks(BATCH) {
        let batch: Vec<Reset> = chunk.iter().map(|id| Reset::new(id.clone(), at)).collect();
        let r = s.reset_many(topic, &batch, None, T0).await.unwrap();
        assert_eq!(r.reset as usize, chunk.len(), "every job was found");
    }
}

async fn pump_all(s: &SharedStore, topic: &str, jobs: usize) {
    let slots = s.existing_topic(topic).await.unwrap().slots;
    let mut pumped = 0;
    for slot in 0..slots {
        loop {
            let p = s
                .door(topic, slot, 0)
                .await
                .unwrap()
                .pump(T0 + 10, BATCH)
                .await
                .unwrap();
            pumped += p.jobs.len();
            if p.jobs.len() < BATCH {
                break;
            }
        }
    }
    assert_eq!(pumped, jobs, "every job was pumped once");
}

fn row(what: &str, steady: &Figure, grown: &Figure) {
    println!(
        "| {what} | {:.0}/s, {:.3} scripts, {:.2} commands | {:.0}/s, {:.3} scripts, {:.2} commands |",
        steady.per_sec,
        steady.scripts_per_job,
        steady.commands_per_job,
        grown.per_sec,
        grown.scripts_per_job,
        grown.commands_per_job
    );
}

#[tokio::main]
async fn main() {
    let jobs = env_or("TOC_BENCH_JOBS", 100_000) as usize;
    let slots = env_or("TOC_BENCH_SLOTS", 16) as u32;
    let on_cluster = std::env::var("TOC_BENCH_CLUSTER").is_ok_and(|v| v == "1");
    // Kept alive until the end: dropping them stops the servers.
    let (_server, _cluster, mut conns, s) = if on_cluster {
        let cluster = RedisCluster::start();
        let conns: Vec<_> = cluster.nodes.iter().map(|n| n.conn()).collect();
        let s = Store::redis_cluster(&cluster.urls(), StoreOptions::default())
            .await
            .unwrap();
        (None, Some(cluster), conns, Arc::new(s) as SharedStore)
    } else {
        let server = RedisServer::start();
        let conns = vec![server.conn()];
        let s = Store::redis(&server.url(), StoreOptions::default())
            .await
            .unwrap();
        (Some(server), None, conns, Arc::new(s) as SharedStore)
    };
    let conn = &mut conns[..];
    let ids: Vec<String> = (0..jobs).map(|i| format!("device-{i}")).collect();
    for topic in ["steady", "grown"] {
        s.put_topic(TopicConfig {
            slots,
            ..TopicConfig::named(topic)
        })
        .await
        .unwrap();
        let batch: Vec<Reset> = ids
            .iter()
            .map(|id| Reset::new(id.clone(), T0 + 3_600_000))
            .collect();
        for chunk in batch.chunks(BATCH) {
            s.reset_many(topic, chunk, Some(&CreateSpec::default()), T0)
                .await
                .unwrap();
        }
    }
    let t = s.existing_topic("grown").await.unwrap();
    s.put_topic(TopicConfig {
        slots: slots * 2,
        ..(*t).clone()
    })
    .await
    .unwrap();
    let old = ids
        .iter()
        .filter(|id| slot_of(id, slots * 2) != slot_of(id, slots))
        .count();
    let on = if on_cluster {
        "a three-primary Redis Cluster"
    } else {
        "one redis-server"
    };
    println!("on {on}");
    println!(
        "{jobs} plain jobs; `grown` doubled {slots} → {} slots with every job an old copy ({old} of them, {:.0}%, belong to a new slot)\n",
        slots * 2,
        100.0 * old as f64 / jobs as f64
    );
    println!("| per job | steady topic ({slots} slots) | doubled topic, draining |");
    println!("|---|---|---|");
    let a = measure(conn, jobs, resets(&s, "steady", &ids, T0 + 7_200_000)).await;
    let b = measure(conn, jobs, resets(&s, "grown", &ids, T0 + 7_200_000)).await;
    row(
        "first heartbeat reset after the doubling (old copies move home)",
        &a,
        &b,
    );
    let a = measure(conn, jobs, resets(&s, "steady", &ids, T0 + 1)).await;
    let b = measure(conn, jobs, resets(&s, "grown", &ids, T0 + 1)).await;
    row("second heartbeat reset (every job at home)", &a, &b);
    let a = measure(conn, jobs, pump_all(&s, "steady", jobs)).await;
    let b = measure(conn, jobs, pump_all(&s, "grown", jobs)).await;
    row("pump (batches of 1,000)", &a, &b);
    let left = s.sweep("grown").await.unwrap();
    println!("\nsweep after the drain: draining_from = {left:?}");
}

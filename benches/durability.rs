//! What `redis.durability = "replica"` costs, beside `"none"`, in one run on one primary
//! with one replica that this benchmark starts: schedules per second (one job per call, 64
//! calls in flight, as HTTP clients would send them) and resets per second (`reset_many`
//! batches of 1,000, 4 in flight), through the library.
//!
//! Run: `cargo bench --bench durability` (needs `redis-server`).
//! Settings: `TOC_BENCH_SECONDS` (each measurement, default 3).

use std::sync::Arc;
use std::time::{Duration, Instant};

use timeout_center::Store;
use timeout_center::conformance::*;
use timeout_center::*;
use toc_testkit::RedisServer;

const IN_FLIGHT: usize = 64;
const BATCH: usize = 1_000;

fn seconds() -> Duration {
    Duration::from_secs(
        std::env::var("TOC_BENCH_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3),
    )
}

/// Schedules per second: `IN_FLIGHT` tasks each scheduling one job at a time.
async fn schedules(store: Arc<Store>, prefix: &str, for_: Duration) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = (0..IN_FLIGHT)
        .map(|t| {
            let store = store.clone();
            let prefix = prefix.to_string();
            tokio::spawn(async move {
                let mut n = 0u64;
                while start.elapsed() < for_ {
                    let job = NewJob::new(format!("{prefix}-{t}-{n}"), 4_000_000_000_000);
                    store
                        .schedule("bench", job, ScheduleMode::Upsert, 1_700_000_000_000)
                        .await
                        .unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total as f64 / start.elapsed().as_secs_f64()
}

/// Resets per second: 4 tasks each sending batches of `BATCH` resets (creating the jobs).
async fn resets(store: Arc<Store>, prefix: &str, for_: Duration) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = (0..4)
        .map(|t| {
            let store = store.clone();
            let prefix = prefix.to_string();
            tokio::spawn(async move {
                let create = CreateSpec::default();
                let mut n = 0u64;
                let mut round = 0u64;
                while start.elapsed() < for_ {
                    let batch: Vec<Reset> = (0..BATCH)
                        .map(|k| {
                            Reset::new(
                                format!("{prefix}-{t}-{k}"),
                                4_000_000_000_000 + round as i64,
                            )
                        })
                        .collect();
                    store
                        .reset_many("bench", &batch, Some(&create), 1_700_000_000_000)
                        .await
                        .unwrap();
                    n += BATCH as u64;
                    round += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let primary = RedisServer::start();
    let port = primary.port.to_string();
    let _replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    // Wait for the replica to be linked (start-up, not measurement).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut primary.conn())
            .unwrap();
        if info.contains("connected_slaves:1") && info.contains("state=online") {
            break;
        }
        assert!(Instant::now() < deadline, "the replica did not link");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = primary.url();
    let settings = |durability| config::RedisSettings {
        url: url.clone(),
        cluster_nodes: Vec::new(),
        sentinels: Vec::new(),
        sentinel_master: String::new(),
        durability,
        durability_timeout_ms: 1_000,
        ..config::Settings::defaults().redis
    };
    let (none, replica) = (
        settings(config::Durability::None),
        settings(config::Durability::Replica),
    );
    let none = Arc::new(
        Store::open_redis(&none, StoreOptions::default())
            .await
            .unwrap(),
    );
    let replica = Arc::new(
        Store::open_redis(&replica, StoreOptions::default())
            .await
            .unwrap(),
    );
    none.put_topic(TopicConfig::named("bench")).await.unwrap();
    let for_ = seconds();
    println!("| figure | durability none | durability replica | replica / none |");
    println!("|---|---|---|---|");
    for (name, a, b) in [
        (
            "schedules/s (one job a call, 64 in flight)",
            schedules(none.clone(), "sn", for_).await,
            schedules(replica.clone(), "sr", for_).await,
        ),
        (
            "resets/s (reset_many of 1,000, 4 in flight)",
            resets(none.clone(), "rn", for_).await,
            resets(replica.clone(), "rr", for_).await,
        ),
    ] {
        println!("| {name} | {a:.0} | {b:.0} | {:.2} |", b / a);
    }
}

//! `toc bench cluster`: the burst of `toc bench burst` on a local Redis Cluster of three
//! primaries, drained by one instance and then by three (three runtimes in this process,
//! each its own instance: the slots' owners spread over them). It shows how the design
//! spreads one topic over several primaries: the drain rate, and each primary's share of
//! redis-server CPU. On one machine the three primaries and the instances share its cores,
//! so the rate can grow only as far as idle cores allow: what the figure proves is the
//! spread, not a cluster's throughput on its own hosts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::Ctx;
use super::scenarios::{Noop, histogram, schedule_burst, topic, wait_drained};
use timeout_center::TopicConfig;
use timeout_center::store::{Store, StoreOptions};
use timeout_center::{SharedStore, TimeoutCenter};
use toc_testkit::redis_cluster::RedisCluster;

pub(super) async fn cluster(ctx: &mut Ctx) -> Result<(), String> {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .map_err(|e| format!("the local Redis Cluster did not start: {e}"))?;
    let urls = cluster.urls();
    for instances in [1, 3] {
        if ctx.stopped() {
            break;
        }
        drain(ctx, &cluster, &urls, instances).await?;
    }
    drop(cluster);
    Ok(())
}

async fn open(urls: &[String]) -> Result<SharedStore, String> {
    let options = StoreOptions {
        topic_defaults: TopicConfig {
            default_type: super::scenarios::NOOP.to_string(),
            ..TopicConfig::default()
        },
        ..StoreOptions::default()
    };
    Store::redis_cluster(urls, options)
        .await
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// redis-server CPU seconds of each node since it started.
fn cpu(cluster: &RedisCluster) -> Vec<f64> {
    cluster
        .nodes
        .iter()
        .map(|n| {
            let info: String = redis::cmd("INFO")
                .arg("cpu")
                .query(&mut n.conn())
                .unwrap_or_default();
            ["used_cpu_user", "used_cpu_sys"]
                .iter()
                .filter_map(|f| {
                    toc_testkit::redis_cluster::field(&info, f)?
                        .parse::<f64>()
                        .ok()
                })
                .sum()
        })
        .collect()
}

async fn drain(
    ctx: &mut Ctx,
    cluster: &RedisCluster,
    urls: &[String],
    instances: usize,
) -> Result<(), String> {
    let n = ctx.sizes.burst_jobs;
    let store = open(urls).await?;
    let t = topic("cluster", "redis");
    let what = format!("cluster burst, {instances} instance(s)");
    schedule_burst(ctx, &store, &t, n, &what).await?;
    let done = Arc::new(AtomicU64::new(0));
    let before = cpu(cluster);
    let started = Instant::now();
    let mut centers = Vec::new();
    for i in 0..instances {
        let store = if i == 0 {
            store.clone()
        } else {
            open(urls).await?
        };
        let center = TimeoutCenter::builder(store)
            .handler(Noop {
                hist: histogram(),
                done: done.clone(),
            })
            .start()
            .await
            .map_err(|e| e.to_string())?;
        center.topic(&t).await.map_err(|e| e.to_string())?;
        centers.push(center);
    }
    wait_drained(ctx, &done, n, &what).await;
    let secs = started.elapsed().as_secs_f64();
    let handled = done.load(Ordering::Relaxed);
    let used: Vec<f64> = cpu(cluster)
        .iter()
        .zip(&before)
        .map(|(a, b)| a - b)
        .collect();
    for c in centers {
        c.shutdown(Duration::from_secs(1)).await;
    }
    let total: f64 = used.iter().sum();
    let busiest = used.iter().copied().fold(0.0, f64::max);
    let system = "redis cluster";
    let who = format!("3 primaries, {instances} instance(s)");
    ctx.add(
        "cluster",
        system,
        &format!("burst drain rate, {who}"),
        handled as f64 / secs,
        "jobs/s",
        &format!("{handled} of {n} jobs due at one instant, 16 slots, no-op handler"),
    );
    ctx.add(
        "cluster",
        system,
        &format!("redis-server CPU per 100,000 fired, {who}"),
        total * 100_000.0 / handled.max(1) as f64,
        "s",
        "INFO cpu of the three primaries, summed, before and after the drain",
    );
    ctx.add(
        "cluster",
        system,
        &format!("busiest primary's share of CPU, {who}"),
        if total > 0.0 {
            busiest / total * 100.0
        } else {
            0.0
        },
        "%",
        &format!(
            "per primary: {}",
            used.iter()
                .map(|u| format!("{u:.2} s"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    Ok(())
}

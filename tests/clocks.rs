//! Never early on any host's clock (docs/design.md, invariant 3), with real processes: `toc
//! serve` under libfaketime, its wall clock offset or stepped while its monotonic clock runs
//! true (as after NTP drift, a paused VM or a clock step), webhooks to a local receiver, and
//! every arrival measured on this test's own clock.
//!
//! What this proves: with one host's clock 2 s ahead or behind, or one process's clock
//! stepped 4 s forward, no job reaches its receiver before the instant its client asked for
//! (`fire_at` on the client's clock, or the moment of the request plus `delay_ms`). What it
//! cannot: clocks of separate machines (every process here shares one kernel clock, which
//! libfaketime offsets per process), or a Redis host whose own clock is wrong.

mod common;

use std::time::Duration;

use serde_json::json;

use crate::common::runtime::until;
use common::RedisServer;
use common::process::{Receiver, Skew, Toc, wall_us};

/// One job's request: its id and the earliest instant (µs, this clock) it may arrive.
struct Asked {
    id: String,
    earliest_us: i64,
}

/// Schedules `n` webhook jobs through `toc`, half by `delay_ms` and half by `fire_at` on
/// this clock, due 1.5 to 3.5 s from now.
async fn schedule(
    http: &reqwest::Client,
    toc: &Toc,
    hook: &str,
    prefix: &str,
    n: usize,
) -> Vec<Asked> {
    let mut asked = Vec::new();
    for k in 0..n {
        let id = format!("{prefix}-{k}");
        let delay_ms = 1_500 + (k as i64 * 37) % 2_000;
        let sent_us = wall_us();
        let (body, earliest_us) = if k % 2 == 0 {
            (json!({"delay_ms": delay_ms}), sent_us + delay_ms * 1_000)
        } else {
            let at = sent_us / 1_000 + delay_ms;
            (json!({"fire_at": at}), at * 1_000)
        };
        let mut body = body;
        body["type"] = json!("webhook");
        body["payload"] = json!({"url": hook, "body": {"id": id}});
        toc.put_job(http, "hooks", &id, &body).await;
        asked.push(Asked { id, earliest_us });
    }
    asked
}

/// Every asked job arrived, and none before its instant: the early ones, with how early (ms).
async fn early_fires(receiver: &Receiver, asked: &[Asked]) -> Vec<(String, f64)> {
    let seen = receiver
        .wait_for(asked.len(), Duration::from_secs(30))
        .await;
    let missing: Vec<&str> = asked
        .iter()
        .filter(|a| !seen.contains_key(&a.id))
        .map(|a| a.id.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "{} jobs never fired: {missing:?}",
        missing.len()
    );
    asked
        .iter()
        .filter_map(|a| {
            let first = *seen[&a.id].iter().min().unwrap();
            (first < a.earliest_us)
                .then(|| (a.id.clone(), (a.earliest_us - first) as f64 / 1_000.0))
        })
        .collect()
}

/// Waits until both instances serve some of the topic's slots (the registry balances them),
/// so each one's own clock would decide some fires.
async fn both_serve(http: &reqwest::Client, instances: &[&Toc]) {
    until(20, "the slots spread over both instances", || async {
        let mut all = true;
        for toc in instances {
            let slots = common::process::served_slots(http, &toc.url("")).await;
            let serves = slots.is_some_and(|s| {
                s.iter()
                    .any(|s| s["topic"] == "hooks" && s["alive"] == true)
            });
            all &= serves;
        }
        all
    })
    .await;
}

async fn two_instances_one_skewed(offset: &'static str) {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start();
    let env = [
        ("TOC_STORE", "redis".to_string()),
        ("TOC_REDIS_URL", redis.url()),
        ("TOC_RUNTIME_OWNER_LEASE_MS", "1000".to_string()),
    ];
    let true_clock = Toc::start("a", &env, Skew::None, dir.path()).await;
    let skewed = Toc::start("b", &env, Skew::Fixed(offset), dir.path()).await;
    let http = reqwest::Client::new();
    // The topic exists before the slots can spread.
    let warm = schedule(&http, &true_clock, &receiver.url(), "warm", 1).await;
    both_serve(&http, &[&true_clock, &skewed]).await;
    let mut asked = schedule(&http, &true_clock, &receiver.url(), "a", 150).await;
    asked.extend(schedule(&http, &skewed, &receiver.url(), "b", 150).await);
    asked.extend(warm);
    let early = early_fires(&receiver, &asked).await;
    assert!(
        early.is_empty(),
        "with one host's clock {offset}, {} of {} jobs fired early, the earliest by {:.1} ms: {:?}",
        early.len(),
        asked.len(),
        early.iter().map(|e| e.1).fold(0.0, f64::max),
        &early[..early.len().min(10)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_host_two_seconds_ahead_no_job_fires_early() {
    two_instances_one_skewed("+2s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_host_two_seconds_behind_no_job_fires_early() {
    two_instances_one_skewed("-2s").await;
}

/// One instance whose wall clock steps 4 s forward while its `delay_ms` jobs wait.
async fn a_step_forward(env: &[(&str, String)]) {
    let dir = tempfile::tempdir().unwrap();
    let clock_file = dir.path().join("faketime");
    std::fs::write(&clock_file, "+0\n").unwrap();
    let receiver = Receiver::start();
    let toc = Toc::start("a", env, Skew::File(clock_file.clone()), dir.path()).await;
    let http = reqwest::Client::new();
    let mut asked = Vec::new();
    for k in 0..100 {
        let id = format!("d-{k}");
        let delay_ms = 3_000 + k * 10;
        let sent_us = wall_us();
        let body = json!({"type": "webhook", "delay_ms": delay_ms,
                          "payload": {"url": receiver.url(), "body": {"id": id}}});
        toc.put_job(&http, "hooks", &id, &body).await;
        asked.push(Asked {
            id,
            earliest_us: sent_us + delay_ms * 1_000,
        });
    }
    // The process's wall clock jumps 4 s ahead; its monotonic clock does not.
    std::fs::write(&clock_file, "+4s\n").unwrap();
    let early = early_fires(&receiver, &asked).await;
    assert!(
        early.is_empty(),
        "after a 4 s step forward, {} of {} jobs fired early, the earliest by {:.1} ms",
        early.len(),
        asked.len(),
        early.iter().map(|e| e.1).fold(0.0, f64::max),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wall_clock_step_forward_fires_nothing_early_on_redis() {
    let redis = RedisServer::start();
    a_step_forward(&[
        ("TOC_STORE", "redis".to_string()),
        ("TOC_REDIS_URL", redis.url()),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wall_clock_step_forward_fires_nothing_early_on_memory() {
    a_step_forward(&[("TOC_STORE", "memory".to_string())]).await;
}

//! A device's offline alarm reaches the user's system the three ways docs/operations.md
//! ("A device's alarm, three ways") gives, each through a real `toc serve` and the calls the
//! doc shows: heartbeats are batch resets with `create`, and only the silent device alarms.
//!
//! 1. `device_offline`: `device.offline` events in the topic's stream, repeated up to
//!    `max_alarms`, then `device.recovered` when a heartbeat comes back;
//! 2. a `webhook` job created by the resets: one call to the receiver per silence;
//! 3. a pull topic: a consumer's claim hands out the silent device.
//!
//! What it cannot show: a receiver that is down (tests/webhooks.rs retries calls).

#[macro_use]
mod common;

use std::time::Duration;

use serde_json::{Value, json};

use common::process::{Receiver, Skew, Toc};
use common::runtime::eventually;

/// One batch of heartbeats through `svc`: each device pushed `delay_ms` on, created as
/// `create` says when it has no job yet.
async fn heartbeat(
    http: &reqwest::Client,
    svc: &Toc,
    topic: &str,
    devices: &[(&str, u64)],
    create: Value,
) {
    let resets: Vec<Value> = devices
        .iter()
        .map(|(id, delay)| json!({"id": id, "delay_ms": delay}))
        .collect();
    let r = http
        .post(svc.url(&format!("/v1/topics/{topic}/resets")))
        .json(&json!({"resets": resets, "create": create}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
}

/// The events of `topic` named `name`, as (job id, data).
async fn events(
    http: &reqwest::Client,
    svc: &Toc,
    topic: &str,
    name: &str,
) -> Vec<(String, Value)> {
    svc.events(http, topic, name)
        .await
        .iter()
        .map(|e| (e["job_id"].as_str().unwrap().to_string(), e["data"].clone()))
        .collect()
}

async fn service(dir: &std::path::Path) -> Toc {
    Toc::start("toc", &[], Skew::None, dir).await
}

#[tokio::test]
async fn the_alarm_reaches_the_event_stream_and_the_recovery_follows() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path()).await;
    let http = reqwest::Client::new();
    let create = json!({"type": "device_offline",
        "payload": {"timeout_ms": 300, "repeat_ms": 200, "max_alarms": 2}});
    heartbeat(
        &http,
        &svc,
        "devices",
        &[("dev-1", 300), ("dev-2", 3_600_000)],
        create.clone(),
    )
    .await;
    let alarms = eventually(10, || async {
        let a = events(&http, &svc, "devices", "device.offline").await;
        if a.len() >= 2 {
            Ok(a)
        } else {
            Err(format!("{} alarms so far", a.len()))
        }
    })
    .await;
    assert!(alarms.iter().all(|(id, _)| id == "dev-1"), "{alarms:?}");
    assert_eq!(alarms[0].1["alarm"], 1);
    assert_eq!(alarms[1].1["alarm"], 2);
    assert_eq!(alarms[1].1["max_alarms"], 2);
    assert!(alarms[0].1["silent_ms"].as_u64().unwrap() >= 300);
    // After its last alarm the job is parked: no fire planned, shown as such (not as a
    // date thousands of years out), until the device is heard again.
    let parked = eventually(10, || async {
        let job = svc.get_json(&http, "/v1/topics/devices/jobs/dev-1").await;
        if job["state"] == "scheduled" && job["fires"] == 2 {
            Ok(job)
        } else {
            Err(format!("not yet parked: {job}"))
        }
    })
    .await;
    assert_eq!(parked["fire_at"], json!(timeout_center::time::PARKED_AT));
    let (_, shown, _) = common::toc_cli(&svc.url(""), &["job", "get", "devices", "dev-1"]);
    assert!(
        shown.contains("parked (no fire planned: waits for a reset)"),
        "{shown}"
    );
    // The device is heard again: its recovery is reported, and the cycle starts over.
    heartbeat(&http, &svc, "devices", &[("dev-1", 3_600_000)], create).await;
    let recovered = events(&http, &svc, "devices", "device.recovered").await;
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_eq!(recovered[0].1, json!({"device_id": "dev-1", "alarms": 2}));
}

#[tokio::test]
async fn the_alarm_reaches_a_webhook_created_by_the_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path()).await;
    let receiver = Receiver::start();
    let http = reqwest::Client::new();
    for device in ["dev-1", "dev-2"] {
        let create = json!({"type": "webhook",
            "payload": {"url": receiver.url(), "body": {"id": device}}});
        let delay = if device == "dev-1" { 300 } else { 3_600_000 };
        heartbeat(&http, &svc, "device-hooks", &[(device, delay)], create).await;
    }
    let seen = receiver.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(seen.keys().collect::<Vec<_>>(), ["dev-1"], "{seen:?}");
    assert_eq!(seen["dev-1"].len(), 1, "called more than once per silence");
}

#[tokio::test]
async fn the_alarm_reaches_a_pull_consumer() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path()).await;
    let http = reqwest::Client::new();
    svc.put_topic(&http, "device-pull", json!({"default_type": "pull"}))
        .await;
    heartbeat(
        &http,
        &svc,
        "device-pull",
        &[("dev-1", 300), ("dev-2", 3_600_000)],
        json!({}),
    )
    .await;
    let r = http
        .post(svc.url("/v1/topics/device-pull/claim"))
        .json(&json!({"max": 100, "wait_ms": 10_000}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let claimed: Value = r.json().await.unwrap();
    let jobs = claimed["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{claimed}");
    assert_eq!(jobs[0]["id"], "dev-1");
    let token = jobs[0]["token"].as_u64().unwrap();
    let r = http
        .post(svc.url("/v1/topics/device-pull/jobs/dev-1/ack"))
        .json(&json!({"token": token}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
}

/// The start log says where the dashboard is and where the journal lives, whole (before:
/// neither the dashboard's URL nor a journal path a log read later could use).
#[tokio::test]
async fn the_start_log_gives_the_dashboard_and_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j").join("journal");
    let svc = Toc::start(
        "toc",
        &[("TOC_MEMORY_JOURNAL", journal.display().to_string())],
        Skew::None,
        dir.path(),
    )
    .await;
    let log = svc.log_text();
    let dashboard = format!("dashboard=http://127.0.0.1:{}/ui", svc.port);
    assert!(log.contains(&dashboard), "{log}");
    let whole = std::fs::canonicalize(&journal).unwrap();
    assert!(
        log.contains(&format!("journal={}", whole.display())),
        "{log}"
    );
}

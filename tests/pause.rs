//! Pausing a topic, with real `toc serve` processes: while paused no job fires and no claim
//! is served, on every instance sharing the store, and jobs, resets and cancels are still
//! accepted; on resume what came due fires, in fire-time order.
//!
//! What this proves: a pause set through one instance holds on another within a second
//! (the topic announcement), and a resume fires the backlog at once, in order within the
//! slot. What it cannot: the exact instant a remote instance learns of the change (it is
//! waited for, bounded, not measured).

#[macro_use]
mod common;

use std::time::Duration;

use serde_json::{Value, json};

use common::process::{Receiver, Skew, Toc, wall_us};
use common::{Kind, RedisServer};

/// One instance (`Kind::Memory`) or two sharing one Redis (`Kind::Redis`): the pause is set
/// through the first, jobs are written and the resume is sent through the last.
async fn a_paused_topic_fires_nothing_until_resumed(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let redis = (kind == Kind::Redis).then(RedisServer::start);
    let env = match &redis {
        Some(r) => common::process::redis_env(r.url()),
        None => vec![("TOC_STORE", "memory".to_string())],
    };
    let first = Toc::start("a", &env, Skew::None, dir.path()).await;
    let second = match kind {
        Kind::Redis => Some(Toc::start("b", &env, Skew::None, dir.path()).await),
        Kind::Memory => None,
    };
    let last = second.as_ref().unwrap_or(&first);
    let http = reqwest::Client::new();
    let hook = Receiver::start();
    // One slot, so the order of the backlog is one slot's fire-time order.
    let topic = first
        .put_topic(&http, "hooks", json!({"slots": 1, "paused": true}))
        .await;
    assert_eq!(topic["paused"], true, "{topic}");
    // Every instance hears of the pause within a second (of real time).
    crate::common::runtime::quiet(1_000).await;
    let now_ms = wall_us() / 1_000;
    for k in 0..20 {
        let body = json!({"type": "webhook", "fire_at": now_ms + 100 + k * 10,
                          "payload": {"url": hook.url(), "body": {"id": format!("j-{k}")}}});
        last.put_job(&http, "hooks", &format!("j-{k}"), &body).await;
    }
    // Cancels and resets are accepted while paused.
    let r = http
        .delete(last.url("/v1/topics/hooks/jobs/j-0"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let r = http
        .post(last.url("/v1/topics/hooks/jobs/j-1/reset"))
        .json(&json!({"fire_at": now_ms + 400}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    // Well past every fire time (1.5 s of real time): nothing has fired.
    crate::common::runtime::quiet(1_500).await;
    assert!(
        hook.seen().is_empty(),
        "a paused topic fired: {:?}",
        hook.seen()
    );
    let resumed_us = wall_us();
    let topic = last
        .put_topic(&http, "hooks", json!({"paused": false}))
        .await;
    assert_eq!(topic["paused"], false, "{topic}");
    let seen = hook.wait_for(19, Duration::from_secs(10)).await;
    assert_eq!(seen.len(), 19, "the backlog fired on resume: {seen:?}");
    assert!(
        !seen.contains_key("j-0"),
        "a job cancelled while paused fired"
    );
    let first = seen.values().map(|at| at[0]).min().unwrap();
    assert!(first >= resumed_us, "a job fired before the resume");
    // (Handlers run concurrently, so arrivals are not ordered; the order in which the
    // backlog is handed out is checked through claims, below.)
}

/// One `toc serve` on `kind`'s engine with a paused one-slot pull topic `work`; the
/// directory and Redis it runs on are kept alive by the caller.
async fn paused_pull_topic(
    kind: Kind,
) -> (tempfile::TempDir, Option<RedisServer>, Toc, reqwest::Client) {
    let dir = tempfile::tempdir().unwrap();
    let redis = (kind == Kind::Redis).then(RedisServer::start);
    let env = match &redis {
        Some(r) => common::process::redis_env(r.url()),
        None => vec![("TOC_STORE", "memory".to_string())],
    };
    let toc = Toc::start("a", &env, Skew::None, dir.path()).await;
    let http = reqwest::Client::new();
    toc.put_topic(
        &http,
        "work",
        json!({"default_type": "pull", "slots": 1, "paused": true}),
    )
    .await;
    (dir, redis, toc, http)
}

/// A pull topic: no claim is served while paused; once resumed the backlog is claimed in
/// fire-time order (the order a pump hands jobs out in, for slot actors too).
async fn a_paused_pull_topic_serves_no_claim(kind: Kind) {
    let (_dir, _redis, toc, http) = paused_pull_topic(kind).await;
    let now_ms = wall_us() / 1_000;
    for k in [3, 1, 4, 2] {
        let body = json!({"fire_at": now_ms + 10 * k});
        toc.put_job(&http, "work", &format!("w-{k}"), &body).await;
    }
    crate::common::runtime::quiet(100).await; // the jobs' fire times, 10 to 40 ms out, pass
    let claim = |wait_ms: u64| {
        http.post(toc.url("/v1/topics/work/claim"))
            .json(&json!({"max": 10, "wait_ms": wait_ms}))
            .send()
    };
    let v: Value = claim(300).await.unwrap().json().await.unwrap();
    assert_eq!(v["jobs"], json!([]), "a paused topic served a claim: {v}");
    toc.put_topic(&http, "work", json!({"paused": false})).await;
    let v: Value = claim(1_000).await.unwrap().json().await.unwrap();
    let ids: Vec<&str> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["w-1", "w-2", "w-3", "w-4"],
        "the backlog is handed out in fire-time order: {v}"
    );
}

/// A long poll that starts while its pull topic is paused is served when the topic resumes
/// within its wait, rather than answering nothing at the end of it.
async fn a_long_poll_waiting_out_a_pause_is_served_on_resume(kind: Kind) {
    let (_dir, _redis, toc, http) = paused_pull_topic(kind).await;
    let now_ms = wall_us() / 1_000;
    toc.put_job(&http, "work", "w-1", &json!({"fire_at": now_ms}))
        .await;
    let poll = http
        .post(toc.url("/v1/topics/work/claim"))
        .json(&json!({"max": 10, "wait_ms": 20_000}))
        .send();
    let resume = async {
        crate::common::runtime::quiet(300).await; // the claim waits 300 ms (real time) before the resume
        toc.put_topic(&http, "work", json!({"paused": false})).await
    };
    let (answer, _) = tokio::join!(poll, resume);
    let v: Value = answer.unwrap().json().await.unwrap();
    assert_eq!(
        v["jobs"][0]["id"], "w-1",
        "the long poll was not served on resume: {v}"
    );
}

engine_matrix!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)] crate::common::kind;
    a_paused_topic_fires_nothing_until_resumed,
    a_paused_pull_topic_serves_no_claim,
    a_long_poll_waiting_out_a_pause_is_served_on_resume,
);

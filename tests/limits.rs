//! Limits the operator sets, against the real HTTP server: most topics and most slots (409
//! `limit_reached` naming the setting, nothing created), a floor for `repeat.every_ms` and for
//! a retry's delay (400 naming the field and the setting), most waiting long polls (429 with
//! `Retry-After`), a deadline for a request's body (408 for a body trickled past it), and a
//! deleted topic's metric series removed. The memory engine's byte cap on an event ring is a
//! unit test of `src/store/memory`.

mod common;

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use timeout_center::config::{Settings, StoreKind};

use common::service::Service;

async fn memory_service(tweak: impl FnOnce(&mut Settings)) -> Service {
    let mut settings = Settings::defaults();
    settings.store = StoreKind::Memory;
    settings.listen = "127.0.0.1:0".parse().unwrap();
    tweak(&mut settings);
    Service::start_with(settings).await
}

/// Refused with `status`, the message naming each of `names` (the setting, the field).
fn refused(st: u16, body: &Value, status: u16, names: &[&str]) {
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(st, status, "{body}");
    for name in names {
        assert!(msg.contains(name), "names {name}: {msg}");
    }
}

#[actix_rt::test]
async fn topics_and_slots_stop_at_their_limits_and_nothing_is_created() {
    let s = memory_service(|c| {
        c.limits.max_topics = 3;
        c.limits.max_total_slots = 96;
    })
    .await;
    for (name, slots) in [("a", 32), ("b", 32)] {
        assert_eq!(
            s.send(
                Method::PUT,
                &format!("/v1/topics/{name}"),
                Some(json!({"slots": slots}))
            )
            .await
            .0,
            201
        );
    }
    // 64 of 96 slots: a third topic of 64 would pass the slots.
    let (st, body) = s
        .send(Method::PUT, "/v1/topics/c", Some(json!({"slots": 64})))
        .await;
    refused(st, &body, 409, &["limits.max_total_slots"]);
    assert_eq!(body["error"]["code"], "limit_reached");
    // Doubling a topic past it is refused too; within it, allowed.
    let (st, body) = s
        .send(Method::PUT, "/v1/topics/a", Some(json!({"slots": 128})))
        .await;
    refused(st, &body, 409, &["limits.max_total_slots"]);
    assert_eq!(
        s.send(Method::PUT, "/v1/topics/a", Some(json!({"slots": 64})))
            .await
            .0,
        200
    );
    // 96 of 96 now: a topic a job would auto-create (16 slots) does not fit either.
    let (st, body) = s
        .send(
            Method::PUT,
            "/v1/topics/c/jobs/j",
            Some(json!({"delay_ms": 60_000})),
        )
        .await;
    refused(st, &body, 409, &["limits.max_total_slots"]);
    let (st, body) = s.send(Method::GET, "/v1/topics", None).await;
    assert_eq!(st, 200);
    let list = body
        .as_array()
        .or_else(|| body["items"].as_array())
        .expect("a list of topics");
    let names: Vec<&str> = list.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names.len(), 2, "nothing created: {names:?}");
    let s = memory_service(|c| c.limits.max_topics = 2).await;
    for name in ["x", "y"] {
        assert_eq!(
            s.send(
                Method::PUT,
                &format!("/v1/topics/{name}/jobs/j"),
                Some(json!({"delay_ms": 60_000}))
            )
            .await
            .0,
            201
        );
    }
    let (st, body) = s
        .send(
            Method::PUT,
            "/v1/topics/z/jobs/j",
            Some(json!({"delay_ms": 60_000})),
        )
        .await;
    refused(st, &body, 409, &["limits.max_topics"]);
    let (st, _) = s.send(Method::GET, "/v1/topics/z", None).await;
    assert_eq!(st, 404, "no topic z");
}

#[actix_rt::test]
async fn periods_and_retry_delays_have_a_floor() {
    let s = memory_service(|_| {}).await;
    let (st, body) = s
        .send(
            Method::PUT,
            "/v1/topics/t/jobs/r",
            Some(json!({"repeat": {"every_ms": 1}})),
        )
        .await;
    refused(st, &body, 400, &["limits.min_every_ms", "repeat.every_ms"]);
    assert_eq!(
        s.send(
            Method::PUT,
            "/v1/topics/t/jobs/r",
            Some(json!({"repeat": {"every_ms": 1000}}))
        )
        .await
        .0,
        201
    );
    let (st, body) = s
        .send(
            Method::PUT,
            "/v1/topics/t",
            Some(json!({"backoff": {"base_ms": 10}})),
        )
        .await;
    refused(
        st,
        &body,
        400,
        &["limits.min_retry_delay_ms", "backoff.base_ms"],
    );
    // A consumer's retry below the floor.
    s.send(
        Method::PUT,
        "/v1/topics/q",
        Some(json!({"default_type": "pull"})),
    )
    .await;
    s.send(
        Method::PUT,
        "/v1/topics/q/jobs/p",
        Some(json!({"delay_ms": 0})),
    )
    .await;
    let (_, claimed) = s
        .send(
            Method::POST,
            "/v1/topics/q/claim",
            Some(json!({"max": 1, "wait_ms": 2000})),
        )
        .await;
    let token = claimed["jobs"][0]["token"].as_u64().expect("a claimed job");
    let (st, body) = s
        .send(
            Method::POST,
            "/v1/topics/q/jobs/p/retry",
            Some(json!({"token": token, "delay_ms": 5})),
        )
        .await;
    refused(st, &body, 400, &["limits.min_retry_delay_ms"]);
    let (st, body) = s
        .send(
            Method::POST,
            "/v1/topics/q/jobs/p/retry",
            Some(json!({"token": token, "delay_ms": 1000})),
        )
        .await;
    assert_eq!(
        (st, body["result"].as_str()),
        (200, Some("retrying")),
        "{body}"
    );
}

#[actix_rt::test]
async fn long_polls_past_the_limit_are_told_to_come_back() {
    let s = memory_service(|c| c.limits.max_long_polls = 2).await;
    s.send(
        Method::PUT,
        "/v1/topics/q",
        Some(json!({"default_type": "pull"})),
    )
    .await;
    let poll = || {
        let req = s
            .http
            .post(s.url("/v1/topics/q/claim"))
            .json(&json!({"max": 1, "wait_ms": 3000}));
        async move { req.send().await.unwrap() }
    };
    let (a, b) = (actix_rt::spawn(poll()), actix_rt::spawn(poll()));
    // Once both wait (the instance's gauge says so), a third is refused at once.
    crate::common::runtime::until(10, "the two long polls waiting", || async {
        let text = s.text("/metrics").await;
        text.lines().any(|l| l == "toc_long_polls_waiting 2")
    })
    .await;
    let started = Instant::now();
    let third = poll().await;
    assert_eq!(third.status().as_u16(), 429);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "refused at once, not after waiting"
    );
    assert_eq!(third.headers()["retry-after"], "1");
    let body: Value = third.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limits.max_long_polls")
    );
    assert_eq!(a.await.unwrap().status().as_u16(), 200);
    assert_eq!(b.await.unwrap().status().as_u16(), 200);
    // Once they answered, a long poll waits again.
    let r = s
        .http
        .post(s.url("/v1/topics/q/claim"))
        .json(&json!({"max": 1, "wait_ms": 100}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[actix_rt::test]
async fn a_body_trickled_past_its_deadline_is_answered_408() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = memory_service(|c| c.http.body_timeout_ms = 300).await;
    let mut conn = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let started = Instant::now();
    conn.write_all(
        b"PUT /v1/topics/t/jobs/slow HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 40\r\n\r\n{\"de",
    )
    .await
    .unwrap();
    // A byte every 100 ms: 40 bytes would take 4 s.
    let mut answer = Vec::new();
    for b in b"lay_ms\": 60000}".iter() {
        if conn.write_all(&[*b]).await.is_err() {
            break;
        }
        crate::common::runtime::quiet(100).await; // the slow client's pace: a byte every 100 ms
        let mut buf = [0u8; 4096];
        if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(1), conn.read(&mut buf)).await
            && n > 0
        {
            answer.extend_from_slice(&buf[..n]);
            break;
        }
    }
    if answer.is_empty() {
        let _ = tokio::time::timeout(Duration::from_secs(2), conn.read_to_end(&mut answer)).await;
    }
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("http.body_timeout_ms"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "answered at the deadline"
    );
    let (st, _) = s.send(Method::GET, "/v1/topics/t/jobs/slow", None).await;
    assert_eq!(st, 404, "nothing stored");
}

#[actix_rt::test]
async fn a_deleted_topic_leaves_no_metric_series() {
    let s = memory_service(|_| {}).await;
    s.send(
        Method::PUT,
        "/v1/topics/gone/jobs/j",
        Some(json!({"delay_ms": 0})),
    )
    .await;
    crate::common::runtime::until(10, "the job's fire", || async {
        s.text("/metrics")
            .await
            .contains("toc_jobs_fired_total{topic=\"gone\"}")
    })
    .await;
    assert_eq!(s.send(Method::DELETE, "/v1/topics/gone", None).await.0, 204);
    let text = s.text("/metrics").await;
    let left: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("topic=\"gone\""))
        .collect();
    assert!(left.is_empty(), "series left: {left:?}");
}

/// `limits.max_jobs_per_topic`: a create past a topic's most jobs is refused 409 naming the
/// setting, nothing written; a job that exists is still replaced and reset; a batch of
/// heartbeats with `create` still moves the jobs that exist, and the creations are refused.
/// Another topic has room of its own. Both engines.
async fn a_topic_holds_at_most_its_jobs(engine: &str) {
    let redis = common::RedisServer::start();
    let s = Service::start(&redis, |c| {
        if engine == "memory" {
            c.store = StoreKind::Memory;
        }
        c.limits.max_jobs_per_topic = 100;
    })
    .await;
    let job = || Some(json!({"delay_ms": 3_600_000}));
    for i in 0..100 {
        let (st, _) = s
            .send(Method::PUT, &format!("/v1/topics/t/jobs/j{i}"), job())
            .await;
        assert_eq!(st, 201);
    }
    let (st, body) = s
        .send(Method::PUT, "/v1/topics/t/jobs/one-more", job())
        .await;
    refused(st, &body, 409, &["limits.max_jobs_per_topic"]);
    assert_eq!(body["error"]["code"], "limit_reached");
    let (st, _) = s.send(Method::POST, "/v1/topics/t/jobs", job()).await;
    assert_eq!(st, 409, "a generated id too");
    let (st, _) = s
        .send(Method::GET, "/v1/topics/t/jobs/one-more", None)
        .await;
    assert_eq!(st, 404, "nothing written");
    let (st, _) = s.send(Method::PUT, "/v1/topics/t/jobs/j7", job()).await;
    assert_eq!(st, 200, "an existing job is replaced");
    let beats = json!({"resets": [{"id": "j1", "delay_ms": 60_000}, {"id": "new-device", "delay_ms": 60_000}],
                       "create": {}});
    let (st, report) = s
        .send(Method::POST, "/v1/topics/t/resets", Some(beats))
        .await;
    assert_eq!(st, 200, "{report}");
    assert_eq!(
        (
            report["reset"].clone(),
            report["created"].clone(),
            report["refused"].clone()
        ),
        (json!(1), json!(0), json!(["new-device"])),
        "{report}"
    );
    let only_new = json!({"resets": [{"id": "new-device", "delay_ms": 60_000}], "create": {}});
    let (st, body) = s
        .send(Method::POST, "/v1/topics/t/resets", Some(only_new))
        .await;
    refused(st, &body, 409, &["limits.max_jobs_per_topic"]);
    let (_, topic) = s.send(Method::GET, "/v1/topics/t", None).await;
    assert_eq!(topic["scheduled"], 100, "{topic}");
    let (st, _) = s.send(Method::PUT, "/v1/topics/other/jobs/a", job()).await;
    assert_eq!(st, 201, "another topic has room of its own");
}

#[actix_rt::test]
async fn a_topic_holds_at_most_its_jobs_on_memory() {
    a_topic_holds_at_most_its_jobs("memory").await;
}

#[actix_rt::test]
async fn a_topic_holds_at_most_its_jobs_on_redis() {
    a_topic_holds_at_most_its_jobs("redis").await;
}

/// `limits.max_bytes_per_topic`: 50 KB jobs in a topic of 1 MiB fill it after about twenty
/// (the memory engine counts the records' strings; Redis its `MEMORY USAGE`, whose
/// allocations round each 50 KB string up, so a few fewer fit there); the next create is
/// refused 409 naming the setting, nothing written; a job that exists is replaced by a
/// lighter one but not by a heavier one, which leaves it as it was. Another topic has room
/// of its own. Both engines.
async fn a_topic_holds_at_most_its_bytes(engine: &str) {
    let redis = common::RedisServer::start();
    let s = Service::start(&redis, |c| {
        if engine == "memory" {
            c.store = StoreKind::Memory;
        }
        c.limits.max_bytes_per_topic = 1 << 20;
    })
    .await;
    let job =
        |pad: usize| Some(json!({"delay_ms": 3_600_000, "payload": {"pad": "x".repeat(pad)}}));
    let mut stored = 0;
    let (st, body) = loop {
        let (st, body) = s
            .send(
                Method::PUT,
                &format!("/v1/topics/t/jobs/j{stored}"),
                job(50_000),
            )
            .await;
        if st != 201 || stored > 30 {
            break (st, body);
        }
        stored += 1;
    };
    refused(st, &body, 409, &["limits.max_bytes_per_topic"]);
    assert_eq!(body["error"]["code"], "limit_reached");
    assert!((15..=20).contains(&stored), "{stored} jobs of 50 KB stored");
    let refused_id = format!("/v1/topics/t/jobs/j{stored}");
    assert_eq!(
        s.send(Method::GET, &refused_id, None).await.0,
        404,
        "nothing written"
    );
    let beats = json!({"resets": [{"id": "new-device", "delay_ms": 60_000}],
                       "create": {"payload": {"pad": "x".repeat(50_000)}}});
    let (st, body) = s
        .send(Method::POST, "/v1/topics/t/resets", Some(beats))
        .await;
    refused(st, &body, 409, &["limits.max_bytes_per_topic"]);
    let (st, _) = s
        .send(Method::PUT, "/v1/topics/t/jobs/j0", job(60_000))
        .await;
    assert_eq!(st, 409, "a heavier replacement is refused");
    let (_, j0) = s.send(Method::GET, "/v1/topics/t/jobs/j0", None).await;
    assert_eq!(
        j0["payload"]["pad"].as_str().map(str::len),
        Some(50_000),
        "j0 as it was"
    );
    let (st, _) = s.send(Method::PUT, "/v1/topics/t/jobs/j0", job(10)).await;
    assert_eq!(st, 200, "a lighter replacement is allowed");
    let (_, topic) = s.send(Method::GET, "/v1/topics/t", None).await;
    assert_eq!(topic["scheduled"], stored, "{topic}");
    let (st, _) = s
        .send(Method::PUT, "/v1/topics/other/jobs/a", job(50_000))
        .await;
    assert_eq!(st, 201, "another topic has room of its own");
}

#[actix_rt::test]
async fn a_topic_holds_at_most_its_bytes_on_memory() {
    a_topic_holds_at_most_its_bytes("memory").await;
}

#[actix_rt::test]
async fn a_topic_holds_at_most_its_bytes_on_redis() {
    a_topic_holds_at_most_its_bytes("redis").await;
}

/// Replacing light jobs with heavy ones cannot grow a topic past `limits.max_bytes_per_topic`
/// (before: 50 plain jobs replaced by 65 KB ones were all taken, about 3.25 MB in a topic of
/// 200 KB, since only creates were counted), and neither can writes sent at once (each is
/// counted as it is let through, not after it is written). Both engines.
async fn replacements_and_writes_at_once_count_against_the_bytes(engine: &str) {
    let redis = common::RedisServer::start();
    let s = Service::start(&redis, |c| {
        if engine == "memory" {
            c.store = StoreKind::Memory;
        }
        c.limits.max_bytes_per_topic = 200_000;
    })
    .await;
    let job =
        |pad: usize| Some(json!({"delay_ms": 3_600_000, "payload": {"pad": "x".repeat(pad)}}));
    for i in 0..50 {
        let (st, _) = s
            .send(Method::PUT, &format!("/v1/topics/t/jobs/j{i}"), job(1))
            .await;
        assert_eq!(st, 201);
    }
    let mut taken = 0;
    for i in 0..50 {
        let (st, body) = s
            .send(Method::PUT, &format!("/v1/topics/t/jobs/j{i}"), job(65_000))
            .await;
        match st {
            200 => taken += 1,
            _ => refused(st, &body, 409, &["limits.max_bytes_per_topic"]),
        }
    }
    assert!(
        taken <= 3,
        "{taken} replacements of 65 KB taken in a topic of 200 KB"
    );
    // Writes at once in another topic: 20 of 65 KB sent together.
    let sends = (0..20).map(|i| {
        let s = &s;
        async move {
            s.send(Method::PUT, &format!("/v1/topics/u/jobs/k{i}"), job(65_000))
                .await
                .0
        }
    });
    let answers = futures_util::future::join_all(sends).await;
    let created = answers.iter().filter(|st| **st == 201).count();
    assert!(
        created <= 3,
        "{created} of 20 writes at once taken: {answers:?}"
    );
}

#[actix_rt::test]
async fn replacements_and_writes_at_once_count_against_the_bytes_on_memory() {
    replacements_and_writes_at_once_count_against_the_bytes("memory").await;
}

#[actix_rt::test]
async fn replacements_and_writes_at_once_count_against_the_bytes_on_redis() {
    replacements_and_writes_at_once_count_against_the_bytes("redis").await;
}

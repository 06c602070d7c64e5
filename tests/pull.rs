//! Pull consumers over HTTP, on both engines: claim with a lease, ack, retry, bury, touch,
//! batch acks; a consumer that dies gets its job redelivered after the lease, exactly once
//! more; eight consumers share 10,000 jobs, each acked once and none early; a long poll is
//! answered through the wake-up path; and the Python worker of `examples/` runs against the
//! real service.

#[macro_use]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use timeout_center::config::{Settings, StoreKind};
use timeout_center::time::now_ms;
use timeout_center::*;

use common::RedisServer;
use common::service::Service;

use common::Kind as Engine;

/// The service on `engine`, with a pull topic `q` (4 slots, 1 s lease, 3 attempts) and a
/// push topic `push`.
async fn service(engine: Engine) -> (Service, Option<RedisServer>) {
    let mut settings = Settings::defaults();
    settings.listen = "127.0.0.1:0".parse().unwrap();
    // Consumers here retry at once, below the service's default floor (tests/limits.rs).
    settings.limits.min_retry_delay_ms = 0;
    settings.topics.seed = vec![
        TopicConfig {
            slots: 4,
            default_type: "pull".into(),
            visibility_timeout_ms: 1_000,
            max_attempts: 3,
            ..TopicConfig::named("q")
        },
        TopicConfig::named("push"),
    ];
    let redis = match engine {
        Engine::Memory => {
            settings.store = StoreKind::Memory;
            None
        }
        Engine::Redis => {
            let r = RedisServer::start();
            settings.store = StoreKind::Redis;
            settings.redis.url = r.url();
            Some(r)
        }
    };
    (Service::start_with(settings).await, redis)
}

async fn put(s: &Service, topic: &str, id: &str, body: Value) -> u16 {
    s.send(
        Method::PUT,
        &format!("/v1/topics/{topic}/jobs/{id}"),
        Some(body),
    )
    .await
    .0
}

async fn claim(s: &Service, body: Value) -> Vec<Value> {
    let (st, v) = s.send(Method::POST, "/v1/topics/q/claim", Some(body)).await;
    assert_eq!(st, 200, "{v}");
    v["jobs"].as_array().unwrap().clone()
}

async fn outcome(s: &Service, id: &str, what: &str, body: Value) -> (u16, Value) {
    s.send(
        Method::POST,
        &format!("/v1/topics/q/jobs/{id}/{what}"),
        Some(body),
    )
    .await
}

/// An error answer: its status, and a message that names `what`.
fn refused(status: u16, v: &Value, expected: u16, what: &str) {
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(status == expected && message.contains(what), "{status} {v}");
}

async fn claim_ack_retry_bury_and_touch(engine: Engine) {
    let (s, _redis) = service(engine).await;
    for id in ["a", "b", "c"] {
        assert_eq!(
            put(&s, "q", id, json!({"delay_ms": 0, "payload": {"n": id}})).await,
            201
        );
    }
    let jobs = claim(&s, json!({"max": 10})).await;
    assert_eq!(jobs.len(), 3);
    let token: HashMap<String, u64> = jobs
        .iter()
        .map(|j| {
            (
                j["id"].as_str().unwrap().to_string(),
                j["token"].as_u64().unwrap(),
            )
        })
        .collect();
    for j in &jobs {
        assert_eq!(
            (j["state"].as_str(), j["attempts"].as_u64()),
            (Some("running"), Some(1))
        );
        assert!(j["lease_until"].as_i64().unwrap() > now_ms() - 1_000, "{j}");
        assert_eq!(j["payload"]["n"], j["id"]);
    }
    // Nothing is left to claim, and a claim without a body takes one at most.
    assert!(claim(&s, json!({})).await.is_empty());

    // Ack: done and gone; the same ack again is stale and changes nothing.
    assert_eq!(
        outcome(&s, "a", "ack", json!({"token": token["a"]}))
            .await
            .0,
        204
    );
    let (st, v) = outcome(&s, "a", "ack", json!({"token": token["a"]})).await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (409, Some("stale_token")),
        "{v}"
    );
    assert_eq!(
        s.send(Method::GET, "/v1/topics/q/jobs/a", None).await.0,
        404
    );

    // Retry: due again after its delay, the attempt counted.
    let (st, v) = outcome(
        &s,
        "b",
        "retry",
        json!({"token": token["b"], "delay_ms": 0, "error": "busy"}),
    )
    .await;
    assert_eq!((st, v["result"].as_str()), (200, Some("retrying")), "{v}");
    let again = claim(&s, json!({"max": 10})).await;
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0]["id"].as_str(), again[0]["attempts"].as_u64()),
        (Some("b"), Some(2))
    );
    assert_eq!(again[0]["last_error"], "busy");
    // The old token is stale now, for every outcome.
    for what in ["ack", "bury", "retry", "touch"] {
        let (st, _) = outcome(&s, "b", what, json!({"token": token["b"]})).await;
        assert_eq!(st, 409, "{what} with a stale token");
    }
    // Bury: to the dead letters with its error.
    let new_b = again[0]["token"].as_u64().unwrap();
    assert_eq!(
        outcome(
            &s,
            "b",
            "bury",
            json!({"token": new_b, "error": "bad order"})
        )
        .await
        .0,
        204
    );
    let (_, dead) = s.send(Method::GET, "/v1/topics/q/dead", None).await;
    assert_eq!(dead["items"][0]["id"], "b");
    assert_eq!(dead["items"][0]["last_error"], "bad order");

    // Touch: the lease moves; a wrong token is stale.
    let (st, v) = outcome(
        &s,
        "c",
        "touch",
        json!({"token": token["c"], "lease_ms": 60_000}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert!(
        v["lease_until"].as_i64().unwrap() >= now_ms() + 50_000,
        "{v}"
    );
    let got = s.send(Method::GET, "/v1/topics/q/jobs/c", None).await.1;
    assert_eq!(got["lease_until"], v["lease_until"]);
    assert_eq!(
        outcome(&s, "c", "touch", json!({"token": 999_999})).await.0,
        409
    );

    // Batch acks: one result per ack, a stale one reported, not failed.
    let (st, v) = s
        .send(
            Method::POST,
            "/v1/topics/q/acks",
            Some(json!({"acks": [{"id": "c", "token": token["c"]}, {"id": "c", "token": token["c"]}]})),
        )
        .await;
    assert_eq!(
        (st, v["results"].clone()),
        (200, json!(["done", "stale"])),
        "{v}"
    );

    // Bad input names the field; a push topic cannot be claimed, nor take a pull job.
    let (st, v) = s
        .send(Method::POST, "/v1/topics/q/claim", Some(json!({"max": 0})))
        .await;
    assert_eq!(st, 400);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("max"),
        "{v}"
    );
    let (st, v) = s
        .send(
            Method::POST,
            "/v1/topics/q/claim",
            Some(json!({"wait_ms": 30_001})),
        )
        .await;
    refused(st, &v, 400, "wait_ms");
    let (st, v) = s
        .send(Method::POST, "/v1/topics/push/claim", Some(json!({})))
        .await;
    refused(st, &v, 409, "not a pull topic");
    let (st, v) = s
        .send(
            Method::PUT,
            "/v1/topics/push/jobs/x",
            Some(json!({"type": "pull", "delay_ms": 0})),
        )
        .await;
    refused(st, &v, 409, "pull topic");
    let (st, v) = s
        .send(
            Method::PUT,
            "/v1/topics/q/jobs/x",
            Some(json!({"type": "emit", "delay_ms": 0})),
        )
        .await;
    refused(st, &v, 409, "pull topic");
    let (st, _) = s
        .send(Method::POST, "/v1/topics/ghost/claim", Some(json!({})))
        .await;
    assert_eq!(st, 404);
}

/// A claim's pass asks every due slot at once, each for a share of the claim's `max`: in all
/// never more than `max`. Nine jobs due in `q`'s four slots: a claim of 5 gets 5, the next
/// claim of 10 the other 4.
async fn a_claim_over_several_due_slots_takes_no_more_than_its_max(engine: Engine) {
    let (s, _redis) = service(engine).await;
    for i in 0..9 {
        assert_eq!(
            put(&s, "q", &format!("j{i}"), json!({"delay_ms": 0})).await,
            201
        );
    }
    let first = claim(&s, json!({"max": 5})).await;
    assert_eq!(first.len(), 5);
    let rest = claim(&s, json!({"max": 10})).await;
    assert_eq!(rest.len(), 4);
    let mut ids: Vec<&str> = first
        .iter()
        .chain(&rest)
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 9, "each job claimed once");
}

async fn a_dead_consumers_job_comes_back_after_its_lease_exactly_once_more(engine: Engine) {
    let (s, _redis) = service(engine).await;
    assert_eq!(put(&s, "q", "j", json!({"delay_ms": 0})).await, 201);
    // The consumer claims with a short lease and dies without an outcome.
    let first = claim(&s, json!({"lease_ms": 300})).await;
    assert_eq!(first.len(), 1);
    let lease_until = first[0]["lease_until"].as_i64().unwrap();
    // A long poll sleeps until that lease runs out (its deadline is the slot's next instant),
    // then gets the job again.
    let second = claim(&s, json!({"wait_ms": 20_000})).await;
    assert_eq!(second.len(), 1, "the job came back");
    assert!(
        now_ms() >= lease_until,
        "redelivered before the first lease ended"
    );
    assert_eq!(
        (second[0]["id"].as_str(), second[0]["attempts"].as_u64()),
        (Some("j"), Some(2))
    );
    let (old, new) = (
        first[0]["token"].as_u64().unwrap(),
        second[0]["token"].as_u64().unwrap(),
    );
    assert_ne!(old, new);
    assert_eq!(outcome(&s, "j", "ack", json!({"token": old})).await.0, 409);
    assert_eq!(outcome(&s, "j", "ack", json!({"token": new})).await.0, 204);
    // Exactly once more: nothing comes after the ack, not even past the old lease.
    assert!(claim(&s, json!({"wait_ms": 1_500})).await.is_empty());
}

async fn eight_consumers_ack_ten_thousand_jobs_each_once_and_none_early(engine: Engine) {
    let (s, _redis) = service(engine).await;
    let s = Arc::new(s);
    let t0 = now_ms();
    const N: usize = 10_000;
    for i in 0..N {
        let job = NewJob::new(format!("j{i}"), t0 + (i as i64 % 500)).job_type("pull");
        s.center
            .schedule("q", job, ScheduleMode::Upsert)
            .await
            .unwrap();
    }
    let acked: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let early = Arc::new(Mutex::new(Vec::new()));
    let mut consumers = Vec::new();
    for _ in 0..8 {
        let (s, acked, early) = (s.clone(), acked.clone(), early.clone());
        consumers.push(tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(120);
            while acked.lock().unwrap().len() < N && Instant::now() < deadline {
                let (st, v) = s
                    .send(
                        Method::POST,
                        "/v1/topics/q/claim",
                        Some(json!({"max": 100, "wait_ms": 1_000})),
                    )
                    .await;
                assert_eq!(st, 200, "{v}");
                let received = now_ms();
                let jobs = v["jobs"].as_array().unwrap();
                let mut acks = Vec::new();
                for j in jobs {
                    if j["fire_at"].as_i64().unwrap() > received {
                        early.lock().unwrap().push(j["id"].to_string());
                    }
                    acks.push(json!({"id": j["id"], "token": j["token"]}));
                }
                if acks.is_empty() {
                    continue;
                }
                let (st, v) = s
                    .send(
                        Method::POST,
                        "/v1/topics/q/acks",
                        Some(json!({"acks": acks})),
                    )
                    .await;
                assert_eq!(st, 200, "{v}");
                let mut seen = acked.lock().unwrap();
                for (a, r) in acks.iter().zip(v["results"].as_array().unwrap()) {
                    assert_eq!(r, "done", "{a}");
                    *seen
                        .entry(a["id"].as_str().unwrap().to_string())
                        .or_default() += 1;
                }
            }
        }));
    }
    for c in consumers {
        c.await.unwrap();
    }
    {
        let acked = acked.lock().unwrap();
        assert_eq!(acked.len(), N, "every job acked");
        assert!(acked.values().all(|n| *n == 1), "a job was acked twice");
        let early = early.lock().unwrap();
        assert!(early.is_empty(), "claimed before fire_at: {early:?}");
    }
    let stats = s.center.stats("q").await.unwrap();
    assert_eq!((stats.scheduled, stats.running, stats.dead), (0, 0, 0));
}

async fn a_long_poll_is_answered_when_a_job_comes_due_not_at_its_end(engine: Engine) {
    let (s, _redis) = service(engine).await;
    let s = Arc::new(s);
    let waiter = {
        let s = s.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let jobs = claim(&s, json!({"wait_ms": 30_000})).await;
            (jobs, started.elapsed())
        })
    };
    // The claim is waiting on an empty topic (no due job, no lease: nothing to sleep until
    // but its end). A job scheduled now wakes it through the slot's wake notice.
    crate::common::runtime::quiet(300).await; // the claim has waited 300 ms (real time)
    assert_eq!(put(&s, "q", "now", json!({"delay_ms": 0})).await, 201);
    let (jobs, waited) = waiter.await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["id"], "now");
    assert!(
        waited < Duration::from_secs(15),
        "the claim waited {waited:?}: it was not woken, it ran to the end of its wait"
    );
}

async fn the_python_worker_of_examples_consumes_every_job(engine: Engine) {
    let Ok(python) = which_python() else {
        panic!("python3 is needed to run examples/pull_worker.py: apt-get install -y python3");
    };
    let (s, _redis) = service(engine).await;
    for i in 0..20 {
        assert_eq!(
            put(
                &s,
                "q",
                &format!("w{i}"),
                json!({"delay_ms": 0, "payload": {"i": i}})
            )
            .await,
            201
        );
    }
    let url = s.url("");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/pull_worker.py"
            ))
            .args([
                "--url",
                &url,
                "--topic",
                "q",
                "--batch",
                "7",
                "--wait-ms",
                "1000",
                "--count",
                "20",
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut ids: Vec<String> = stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    ids.sort();
    let mut expected: Vec<String> = (0..20).map(|i| format!("w{i}")).collect();
    expected.sort();
    assert_eq!(ids, expected);
    let stats = s.center.stats("q").await.unwrap();
    assert_eq!((stats.scheduled, stats.running), (0, 0));
}

fn which_python() -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join("python3"))
                .find(|p| p.is_file())
        })
        .ok_or(())
}

/// A claim hands out no fire too late to matter: a job past its `expire_after_ms` goes to
/// the dead letters as expired (or is dropped with `on_expire: drop`), a recurring fire past
/// its catch-up window is skipped to the schedule's next instant after now; a job within its
/// expiry is claimed. The fire times are set in the past (no waiting).
async fn a_claim_leaves_out_what_is_too_late(engine: Engine) {
    let (s, _redis) = service(engine).await;
    let long_ago = now_ms() - 10_000;
    for (id, extra) in [
        ("expired", json!({"expire_after_ms": 1_000})),
        (
            "dropped",
            json!({"expire_after_ms": 1_000, "on_expire": "drop"}),
        ),
        ("in-time", json!({"expire_after_ms": 60_000})),
        (
            "series",
            json!({"repeat": {"every_ms": 4_000, "catchup_window_ms": 1_000}}),
        ),
    ] {
        let mut body = json!({"fire_at": long_ago});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        assert_eq!(put(&s, "q", id, body).await, 201, "{id}");
    }
    let jobs = claim(&s, json!({"max": 10})).await;
    let ids: Vec<&str> = jobs.iter().filter_map(|j| j["id"].as_str()).collect();
    assert_eq!(ids, ["in-time"], "{jobs:?}");
    let (_, dead) = s.send(Method::GET, "/v1/topics/q/dead", None).await;
    let items = dead["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{dead}");
    assert_eq!(items[0]["id"], "expired");
    assert!(
        items[0]["last_error"].as_str().unwrap().contains("expired"),
        "{dead}"
    );
    let (st, _) = s.send(Method::GET, "/v1/topics/q/jobs/dropped", None).await;
    assert_eq!(st, 404, "the dropped job is gone");
    let (_, series) = s.send(Method::GET, "/v1/topics/q/jobs/series", None).await;
    assert_eq!(series["state"], "scheduled", "{series}");
    let next = series["fire_at"].as_i64().unwrap();
    assert!(
        next > now_ms() - 1_000 && (next - long_ago) % 4_000 == 0,
        "skipped to its next instant: {series}"
    );
}

engine_matrix!(
    #[actix_rt::test] crate::common::kind;
    a_claim_leaves_out_what_is_too_late,
    claim_ack_retry_bury_and_touch,
    a_claim_over_several_due_slots_takes_no_more_than_its_max,
    a_dead_consumers_job_comes_back_after_its_lease_exactly_once_more,
    eight_consumers_ack_ten_thousand_jobs_each_once_and_none_early,
    a_long_poll_is_answered_when_a_job_comes_due_not_at_its_end,
    the_python_worker_of_examples_consumes_every_job,
);

/// A claim whose pass fails at one slot answers with the jobs it leased from the slots
/// before, rather than with the error: dropped, those jobs would have stayed leased to no one
/// until their lease ran out. On Redis, with the last of `q`'s four slots broken by hand
/// (its due set made a string, so its script fails with `WRONGTYPE`), a first pass takes
/// slots 0 to 3 in turn: the claim answers with every job of slots 0 to 2, and the next
/// claim, with nothing left but the broken slot, gets the error. (Before, the claim
/// answered the error, and those jobs waited out their lease.) What it cannot show: the
/// same on the memory engine, whose slots a test cannot break.
#[actix_rt::test]
async fn a_claim_answers_with_what_it_took_before_a_slot_failed() {
    let (s, redis) = service(Engine::Redis).await;
    let redis = redis.unwrap();
    let ids: Vec<String> = (0..12).map(|i| format!("g{i}")).collect();
    for id in &ids {
        assert_eq!(put(&s, "q", id, json!({"delay_ms": 0})).await, 201);
    }
    let mut conn = redis.conn();
    let mut before: Vec<&str> = ids
        .iter()
        .filter(|id| {
            (0..3).any(|slot| {
                let at: Option<f64> = redis::cmd("ZSCORE")
                    .arg(format!("toc:{{q:{slot}}}:due"))
                    .arg(id.as_str())
                    .query(&mut conn)
                    .unwrap();
                at.is_some()
            })
        })
        .map(String::as_str)
        .collect();
    assert!(!before.is_empty(), "no job in slots 0 to 2");
    let _: () = redis::cmd("SET")
        .arg("toc:{q:3}:due")
        .arg("not a sorted set")
        .query(&mut conn)
        .unwrap();
    let jobs = claim(&s, json!({"max": 100})).await;
    let mut got: Vec<&str> = jobs.iter().map(|j| j["id"].as_str().unwrap()).collect();
    got.sort_unstable();
    before.sort_unstable();
    assert_eq!(got, before);
    let (status, v) = s
        .send(Method::POST, "/v1/topics/q/claim", Some(json!({"max": 10})))
        .await;
    assert!(
        status >= 500,
        "the broken slot's claim failed: {status} {v}"
    );
}

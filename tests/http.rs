//! The HTTP API against the real server (port 0) and a real Redis: every endpoint's success
//! path, every error status (and that nothing changed), auth, 503 while Redis is down and
//! recovery after, the batch reset path, the OpenAPI document, metrics, and the CLI.

mod common;

use reqwest::Method;
use serde_json::{Value, json};
use timeout_center::conformance::{RuntimeOps, store_of};
use timeout_center::time::now_ms;

use crate::common::runtime::until as eventually;
use common::RedisServer;
use common::service::Service;

#[actix_rt::test]
async fn every_job_endpoint_works() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let later = now_ms() + 60_000;
    let (st, job) = s.send(Method::PUT, "/v1/topics/t/jobs/a", Some(json!({"type": "webhook", "payload": {"url": "http://localhost:9/"}, "fire_at": later}))).await;
    assert_eq!(st, 201);
    assert_eq!(
        (
            job["id"].as_str(),
            job["state"].as_str(),
            job["fire_at"].as_i64()
        ),
        (Some("a"), Some("scheduled"), Some(later))
    );
    let (st, job) = s
        .send(
            Method::PUT,
            "/v1/topics/t/jobs/a",
            Some(json!({"delay_ms": 120_000, "payload": {"v": 2}})),
        )
        .await;
    assert_eq!(
        (st, job["payload"].clone(), job["type"].as_str()),
        (200, json!({"v": 2}), Some("emit"))
    );
    let (st, made) = s
        .send(
            Method::POST,
            "/v1/topics/t/jobs",
            Some(json!({"delay_ms": 60_000})),
        )
        .await;
    assert_eq!(st, 201);
    let gen_id = made["id"].as_str().unwrap().to_string();
    assert_eq!(gen_id.len(), 36);
    let (st, got) = s
        .send(Method::GET, &format!("/v1/topics/t/jobs/{gen_id}"), None)
        .await;
    assert_eq!((st, got["id"].as_str()), (200, Some(gen_id.as_str())));
    let (st, reset) = s
        .send(
            Method::POST,
            "/v1/topics/t/jobs/a/reset",
            Some(json!({"fire_at": later + 5})),
        )
        .await;
    assert_eq!(
        (st, reset["fire_at"].as_i64(), reset["payload"].clone()),
        (200, Some(later + 5), json!({"v": 2}))
    );
    let (st, body) = s.send(Method::DELETE, "/v1/topics/t/jobs/a", None).await;
    assert_eq!((st, body), (204, Value::Null));
    assert_eq!(
        s.send(Method::GET, "/v1/topics/t/jobs/a", None).await.0,
        404
    );
    // With a shard key.
    let (st, _) = s
        .send(
            Method::PUT,
            "/v1/topics/t/jobs/k1",
            Some(json!({"delay_ms": 60_000, "shard_key": "dev-9"})),
        )
        .await;
    assert_eq!(st, 201);
    assert_eq!(
        s.send(Method::GET, "/v1/topics/t/jobs/k1?shard_key=dev-9", None)
            .await
            .0,
        200
    );
    // Topics and figures.
    let (st, topics) = s.send(Method::GET, "/v1/topics", None).await;
    assert_eq!(st, 200);
    let t = topics["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "t")
        .unwrap()
        .clone();
    assert_eq!(
        (t["slots"].as_u64(), t["scheduled"].as_u64()),
        (Some(16), Some(2))
    );
    assert!(topics.get("next").is_some());
    let (st, t) = s.send(Method::GET, "/v1/topics/t", None).await;
    assert_eq!(
        (
            st,
            t["scheduled"].as_u64(),
            t["running"].as_u64(),
            t["dead"].as_u64()
        ),
        (200, Some(2), Some(0), Some(0))
    );
    assert_eq!(s.send(Method::GET, "/v1/topics/nope", None).await.0, 404);
}

#[actix_rt::test]
async fn listing_a_topics_jobs_pages_by_fire_time() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let base = 4_000_000_000_000i64;
    for i in 0..25 {
        // Two jobs at each instant: ties go by id.
        let (st, v) = s
            .send(
                Method::PUT,
                &format!("/v1/topics/ls/jobs/j{i:02}"),
                Some(json!({"fire_at": base + (i / 2) * 1_000})),
            )
            .await;
        assert_eq!(st, 201, "{v}");
    }
    let mut url = format!(
        "/v1/topics/ls/jobs?limit=4&from={}&to={}",
        base + 2_000,
        base + 9_000
    );
    let mut ids = Vec::new();
    loop {
        let (st, page) = s.send(Method::GET, &url, None).await;
        assert_eq!(st, 200, "{page}");
        ids.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["id"].as_str().unwrap().to_string()),
        );
        match page["next"].as_str() {
            Some(next) => {
                url = format!(
                    "/v1/topics/ls/jobs?limit=4&to={}&cursor={next}",
                    base + 9_000
                )
            }
            None => break,
        }
    }
    let expected: Vec<String> = (4..20).map(|i| format!("j{i:02}")).collect();
    assert_eq!(ids, expected);
    for (query, field) in [
        ("state=dead", "state"),
        ("state=soon", "state"),
        ("cursor=x", "cursor"),
        ("limit=0", "limit"),
        ("from=-1", "from"),
    ] {
        let (st, v) = s
            .send(Method::GET, &format!("/v1/topics/ls/jobs?{query}"), None)
            .await;
        assert_eq!(st, 400, "{query}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{query}: {message}");
    }
    let (st, _) = s.send(Method::GET, "/v1/topics/nope/jobs", None).await;
    assert_eq!(st, 404);
}

#[actix_rt::test]
async fn deleting_a_topic_over_http() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let (st, v) = s
        .send(
            Method::PUT,
            "/v1/topics/old/jobs/a",
            Some(json!({"delay_ms": 60_000})),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    let (st, _) = s.send(Method::DELETE, "/v1/topics/old", None).await;
    assert_eq!(st, 204);
    assert_eq!(s.send(Method::GET, "/v1/topics/old", None).await.0, 404);
    assert_eq!(
        s.send(Method::GET, "/v1/topics/old/jobs/a", None).await.0,
        404
    );
    assert_eq!(s.send(Method::DELETE, "/v1/topics/old", None).await.0, 404);
    let (st, v) = s
        .send(Method::DELETE, "/v1/topics/old?force=maybe", None)
        .await;
    assert_eq!(st, 400, "{v}");
}

#[actix_rt::test]
async fn dead_letters_and_events_over_http() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    // A webhook to a name that resolves to loopback dies at once (the egress policy refuses
    // it: the default allows only public addresses); an emit job fires into the stream.
    let (st, body) = s
        .send(
            Method::PUT,
            "/v1/topics/t/jobs/d1",
            Some(json!({"type": "webhook", "payload": {"url": "http://localhost:1/"}, "delay_ms": 0})),
        )
        .await;
    assert_eq!(st, 201, "{body}");
    s.send(
        Method::PUT,
        "/v1/topics/t/jobs/e1",
        Some(json!({"payload": {"hello": 1}, "delay_ms": 0})),
    )
    .await;
    eventually(5, "d1 dead", || async {
        s.send(Method::GET, "/v1/topics/t/dead", None).await.1["items"]
            .as_array()
            .is_some_and(|a| a.len() == 1)
    })
    .await;
    let (st, dead) = s
        .send(Method::GET, "/v1/topics/t/dead?limit=10", None)
        .await;
    assert_eq!(st, 200);
    assert_eq!(dead["items"][0]["id"], "d1");
    assert!(
        dead["items"][0]["last_error"]
            .as_str()
            .unwrap()
            .contains("the egress policy refused the address of localhost")
    );
    assert_eq!(dead["next"], Value::Null);
    let (st, job) = s
        .send(Method::POST, "/v1/topics/t/dead/d1/requeue", None)
        .await;
    assert_eq!(st, 200, "{job}");
    assert_eq!(
        s.send(Method::POST, "/v1/topics/t/dead/zz/requeue", None)
            .await
            .0,
        404
    );
    eventually(5, "d1 dead again", || async {
        s.send(Method::GET, "/v1/topics/t/dead", None).await.1["items"]
            .as_array()
            .is_some_and(|a| a.len() == 1)
    })
    .await;
    assert_eq!(
        s.send(Method::DELETE, "/v1/topics/t/dead/d1", None).await.0,
        204
    );
    assert_eq!(
        s.send(Method::DELETE, "/v1/topics/t/dead/d1", None).await.0,
        404
    );
    let (st, events) = s
        .send(Method::GET, "/v1/topics/t/events?limit=100", None)
        .await;
    assert_eq!(st, 200);
    let items = events["items"].as_array().unwrap();
    let fired = items.iter().find(|e| e["event"] == "job.fired").unwrap();
    assert_eq!(
        (fired["job_id"].as_str(), fired["data"].clone()),
        (Some("e1"), json!({"hello": 1}))
    );
    assert!(fired["fired_at"].as_i64() >= fired["fire_at"].as_i64());
    let first = items[0]["id"].as_str().unwrap();
    let (_, after) = s
        .send(
            Method::GET,
            &format!("/v1/topics/t/events?after={first}"),
            None,
        )
        .await;
    assert_eq!(after["items"].as_array().unwrap().len(), items.len() - 1);
    assert_eq!(
        s.send(Method::GET, "/v1/topics/t/events?after=junk", None)
            .await
            .0,
        400
    );
}

/// A recurring job over HTTP: with no time given, its first fire is its schedule's first
/// instant from now, and its view shows the schedule and the next fire.
#[actix_rt::test]
async fn a_recurring_job_over_http_starts_at_its_first_instant() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let before = now_ms();
    let body = json!({"repeat": {"cron": "0 9 * * MON-FRI", "tz": "Europe/Berlin"}});
    let (st, job) = s
        .send(Method::PUT, "/v1/topics/t/jobs/standup", Some(body))
        .await;
    assert_eq!(st, 201, "{job}");
    let first = timeout_center::Recurrence::cron("0 9 * * MON-FRI", Some("Europe/Berlin"))
        .unwrap()
        .next_after(before)
        .unwrap();
    assert_eq!(
        (
            job["repeat"].clone(),
            job["fire_at"].as_i64(),
            job["next_fire_at"].as_i64()
        ),
        (
            json!({"cron": "0 9 * * MON-FRI", "tz": "Europe/Berlin"}),
            Some(first),
            Some(first)
        ),
        "{job}"
    );
    // A time given wins; every_ms counts from it.
    let at = now_ms() + 60_000;
    let body = json!({"fire_at": at, "repeat": {"every_ms": 1_000}});
    let (st, job) = s.send(Method::POST, "/v1/topics/t/jobs", Some(body)).await;
    assert_eq!(st, 201, "{job}");
    assert_eq!(
        (job["fire_at"].as_i64(), job["repeat"].clone()),
        (Some(at), json!({"every_ms": 1_000}))
    );
    // A replace without `repeat` makes it a one-off.
    let body = json!({"fire_at": at});
    let (st, job) = s
        .send(Method::PUT, "/v1/topics/t/jobs/standup", Some(body))
        .await;
    assert_eq!((st, job.get("repeat")), (200, None), "{job}");
}

/// `GET ?next=N` answers a recurring job's next N instants from its next fire on (issue 49):
/// for a cron series in a zone, each the schedule's next after the one before; a one-off's
/// list is empty; out-of-range N is refused naming `next`, and without it nothing is added.
#[actix_rt::test]
async fn a_recurring_jobs_next_instants_are_answered_on_request() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let r = timeout_center::Recurrence::cron("0 9 * * MON-FRI", Some("Europe/Berlin")).unwrap();
    let body = json!({"repeat": {"cron": "0 9 * * MON-FRI", "tz": "Europe/Berlin"}});
    let (st, job) = s
        .send(Method::PUT, "/v1/topics/t/jobs/standup", Some(body))
        .await;
    assert_eq!(st, 201, "{job}");
    let first = job["next_fire_at"].as_i64().unwrap();
    let mut want = vec![first];
    while want.len() < 7 {
        want.push(r.next_after(*want.last().unwrap()).unwrap());
    }
    let (st, got) = s
        .send(Method::GET, "/v1/topics/t/jobs/standup?next=7", None)
        .await;
    assert_eq!(st, 200, "{got}");
    assert_eq!(got["next_fire_ats"], json!(want), "{got}");
    // Seven weekday instants span a weekend: at least one gap is longer than a day.
    assert!(want.windows(2).any(|w| w[1] - w[0] > 86_400_000));
    // Trigger fires it once now as a one-shot job of its own; the series keeps its time.
    let (st, fired) = s
        .send(Method::POST, "/v1/topics/t/jobs/standup/trigger", None)
        .await;
    assert_eq!(st, 201, "{fired}");
    let once_id = fired["id"].as_str().unwrap().to_string();
    assert!(once_id.starts_with("standup~"), "{once_id}");
    assert!(fired.get("repeat").is_none(), "{fired}");
    assert!(fired["fire_at"].as_i64().unwrap() <= now_ms(), "{fired}");
    let (_, after) = s.send(Method::GET, "/v1/topics/t/jobs/standup", None).await;
    assert_eq!(after["next_fire_at"].as_i64(), Some(first), "{after}");
    let (st, _) = s
        .send(Method::POST, "/v1/topics/t/jobs/nobody/trigger", None)
        .await;
    assert_eq!(st, 404);
    // A trigger keeps the series' flow key, labels and shard key.
    // (A pull topic's job waits for a consumer, so the one-shot is still there to be read.)
    let (st, _) = s
        .send(
            Method::PUT,
            "/v1/topics/p",
            Some(json!({"default_type": "pull"})),
        )
        .await;
    assert_eq!(st, 201);
    let body = json!({"repeat": {"every_ms": 3_600_000}, "flow_key": "api",
                      "labels": {"team": "a"}, "shard_key": "device-9"});
    let (st, made) = s
        .send(Method::PUT, "/v1/topics/p/jobs/keyed", Some(body))
        .await;
    assert_eq!(st, 201, "{made}");
    let (st, fired) = s
        .send(
            Method::POST,
            "/v1/topics/p/jobs/keyed/trigger?shard_key=device-9",
            None,
        )
        .await;
    assert_eq!(st, 201, "{fired}");
    assert_eq!(
        (fired["flow_key"].clone(), fired["labels"].clone()),
        (json!("api"), json!({"team": "a"})),
        "{fired}"
    );
    let once = fired["id"].as_str().unwrap();
    let (st, _) = s
        .send(
            Method::GET,
            &format!("/v1/topics/p/jobs/{once}?shard_key=device-9"),
            None,
        )
        .await;
    assert_eq!(st, 200, "found by the series' shard key");
    // Without ?next the view is as before.
    let (_, plain) = s.send(Method::GET, "/v1/topics/t/jobs/standup", None).await;
    assert!(plain.get("next_fire_ats").is_none(), "{plain}");
    // A one-off has no further instants.
    s.send(
        Method::PUT,
        "/v1/topics/t/jobs/once",
        Some(json!({"delay_ms": 60_000})),
    )
    .await;
    let (st, once) = s
        .send(Method::GET, "/v1/topics/t/jobs/once?next=3", None)
        .await;
    assert_eq!(
        (st, once["next_fire_ats"].clone()),
        (200, json!([])),
        "{once}"
    );
    // A one-shot job is not triggered: it is reset to now.
    let (st, err) = s
        .send(Method::POST, "/v1/topics/t/jobs/once/trigger", None)
        .await;
    assert_eq!(st, 422, "{err}");
    // A series of three fires has three instants, one ending at `until` fewer; the view
    // shows the bounds as given.
    let at = now_ms() + 60_000;
    let body = json!({"fire_at": at, "repeat": {"every_ms": 1_000, "limit": 3}});
    s.send(Method::PUT, "/v1/topics/t/jobs/three", Some(body))
        .await;
    let (_, three) = s
        .send(Method::GET, "/v1/topics/t/jobs/three?next=10", None)
        .await;
    assert_eq!(
        three["next_fire_ats"],
        json!([at, at + 1_000, at + 2_000]),
        "{three}"
    );
    assert_eq!(
        three["repeat"],
        json!({"every_ms": 1_000, "limit": 3}),
        "{three}"
    );
    let body = json!({"fire_at": at, "repeat": {"every_ms": 1_000, "until": at + 1_500}});
    s.send(Method::PUT, "/v1/topics/t/jobs/until", Some(body))
        .await;
    let (_, until) = s
        .send(Method::GET, "/v1/topics/t/jobs/until?next=10", None)
        .await;
    assert_eq!(until["next_fire_ats"], json!([at, at + 1_000]), "{until}");
    // Jitter puts the first instant off by at most its bound, never before it.
    let before = now_ms();
    let body = json!({"repeat": {"cron": "* * * * *", "jitter_ms": 20_000}});
    let (st, spread) = s
        .send(Method::PUT, "/v1/topics/t/jobs/spread", Some(body))
        .await;
    assert_eq!(st, 201, "{spread}");
    let nominal = timeout_center::Recurrence::cron("* * * * *", None)
        .unwrap()
        .next_after(before)
        .unwrap();
    let first = spread["fire_at"].as_i64().unwrap();
    // The service read its clock a moment after `before`: a minute may have turned since.
    assert!(
        [nominal, nominal + 60_000]
            .iter()
            .any(|n| (*n..=n + 20_000).contains(&first)),
        "first fire {first} not within 20 s after the instant {nominal} (or the next)"
    );
    for bad in ["0", "101", "-1"] {
        let (st, err) = s
            .send(
                Method::GET,
                &format!("/v1/topics/t/jobs/standup?next={bad}"),
                None,
            )
            .await;
        assert_eq!(st, 400, "next={bad}: {err}");
        let msg = err["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains("next"),
            "next={bad}: {msg:?} does not name next"
        );
    }
}

#[actix_rt::test]
async fn meetings_over_http() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let t = now_ms();
    let booking = json!({"room": "blue", "start": t + 60_000, "end": t + 120_000, "reminders_ms": [300_000], "approval_deadline": t + 30_000});
    let (st, b) = s
        .send(
            Method::PUT,
            "/v1/topics/rooms/meetings/m1",
            Some(booking.clone()),
        )
        .await;
    assert_eq!((st, b["id"].as_str()), (201, Some("m1")));
    assert_eq!(
        s.send(Method::PUT, "/v1/topics/rooms/meetings/m1", Some(booking))
            .await
            .0,
        200
    );
    let (st, got) = s
        .send(Method::GET, "/v1/topics/rooms/meetings/m1", None)
        .await;
    assert_eq!((st, got["approved"].as_bool()), (200, Some(false)));
    assert_eq!(
        s.send(
            Method::GET,
            "/v1/topics/rooms/jobs/m1%23approval?shard_key=m1",
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        s.send(Method::POST, "/v1/topics/rooms/meetings/m1/approve", None)
            .await
            .0,
        200
    );
    assert_eq!(
        s.send(
            Method::GET,
            "/v1/topics/rooms/jobs/m1%23approval?shard_key=m1",
            None
        )
        .await
        .0,
        404
    );
    assert_eq!(
        s.send(Method::DELETE, "/v1/topics/rooms/meetings/m1", None)
            .await
            .0,
        204
    );
    assert_eq!(
        s.send(Method::GET, "/v1/topics/rooms/meetings/m1", None)
            .await
            .0,
        404
    );
    assert_eq!(
        s.send(Method::POST, "/v1/topics/rooms/meetings/m1/approve", None)
            .await
            .0,
        404
    );
    let (st, err) = s
        .send(
            Method::PUT,
            "/v1/topics/rooms/meetings/m2",
            Some(json!({"room": "x", "start": t, "end": t - 1})),
        )
        .await;
    // Each field is valid; together they are not: 422, naming the field.
    assert_eq!(
        (st, err["error"]["code"].as_str()),
        (422, Some("unprocessable"))
    );
    assert!(err["error"]["message"].as_str().unwrap().contains("end"));
}

#[actix_rt::test]
async fn every_error_status_has_a_json_body_and_changes_nothing() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |c| c.topics.defaults.max_payload_bytes = 100).await;
    s.send(
        Method::PUT,
        "/v1/topics/t/jobs/there",
        Some(json!({"delay_ms": 60_000})),
    )
    .await;
    let before = common::redis_dump(&redis);
    let put = |body: Value| s.send(Method::PUT, "/v1/topics/t/jobs/x", Some(body));
    let check = |(st, body): (u16, Value), want: u16, field: &str| {
        assert_eq!(st, want, "{body}");
        let msg = body["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no JSON error body: {body}"));
        assert!(body["error"]["code"].is_string());
        assert!(msg.contains(field), "{msg:?} does not name {field:?}");
    };
    check(
        put(json!({"fire_at": 1, "delay_ms": 1})).await,
        400,
        "fire_at",
    );
    check(put(json!({"payload": 1})).await, 400, "fire_at");
    let cron = |c: &str| json!({"repeat": {"cron": c}});
    check(put(cron("61 * * * *")).await, 422, "repeat.cron");
    check(put(cron("0 0 30 2 *")).await, 422, "repeat.cron");
    check(
        put(json!({"repeat": {"cron": "0 9 * * *", "tz": "Mars/Olympus"}})).await,
        422,
        "repeat.tz",
    );
    check(
        put(json!({"repeat": {"cron": "0 9 * * *", "every_ms": 5}})).await,
        400,
        "repeat",
    );
    check(put(json!({"repeat": {}})).await, 400, "repeat");
    check(
        put(json!({"repeat": {"every_ms": 0}})).await,
        400,
        "repeat.every_ms",
    );
    check(
        put(json!({"repeat": {"every_ms": 5, "tz": "UTC"}})).await,
        400,
        "repeat.tz",
    );
    check(
        put(json!({"repeat": {"every_ms": 5, "hourly": true}})).await,
        400,
        "hourly",
    );
    check(
        put(json!({"repeat": {"every_ms": 60_000, "limit": 0}})).await,
        400,
        "repeat.limit",
    );
    check(
        put(json!({"delay_ms": 5, "expire_after_ms": -1})).await,
        400,
        "expire_after_ms",
    );
    check(
        put(json!({"delay_ms": 5, "on_expire": "drop"})).await,
        422,
        "on_expire",
    );
    check(
        put(json!({"delay_ms": 5, "expire_after_ms": 5, "on_expire": "later"})).await,
        400,
        "on_expire",
    );
    check(
        put(json!({"expire_after_ms": 5, "repeat": {"every_ms": 60_000}})).await,
        422,
        "expire_after_ms",
    );
    check(
        put(json!({"repeat": {"every_ms": 60_000, "catchup_window_ms": -5}})).await,
        400,
        "repeat.catchup_window_ms",
    );
    check(
        put(json!({"repeat": {"every_ms": 60_000, "limit": -3}})).await,
        400,
        "repeat.limit",
    );
    check(
        put(json!({"repeat": {"every_ms": 60_000, "jitter_ms": 10}})).await,
        422,
        "repeat.jitter_ms",
    );
    check(
        put(json!({"repeat": {"cron": "0 9 * * *", "jitter_ms": 3_600_001}})).await,
        400,
        "repeat.jitter_ms",
    );
    check(
        put(json!({"delay_ms": 60_000, "repeat": {"every_ms": 60_000, "until": 5}})).await,
        422,
        "repeat.until",
    );
    check(put(json!({"delay_ms": -5})).await, 400, "delay_ms");
    check(
        put(json!({"delay_ms": 5, "colour": "red"})).await,
        400,
        "colour",
    );
    check(
        put(json!({"delay_ms": 5, "type": "a b"})).await,
        400,
        "type",
    );
    check(
        put(json!({"delay_ms": 5, "payload": "y".repeat(200)})).await,
        413,
        "limit",
    );
    let long = "x".repeat(513);
    check(
        s.send(
            Method::PUT,
            &format!("/v1/topics/t/jobs/{long}"),
            Some(json!({"delay_ms": 5})),
        )
        .await,
        400,
        "id",
    );
    check(
        s.send(
            Method::PUT,
            "/v1/topics/bad%20topic/jobs/x",
            Some(json!({"delay_ms": 5})),
        )
        .await,
        400,
        "topic",
    );
    check(
        s.send(
            Method::PUT,
            "/v1/topics/t/jobs/there?mode=create_only",
            Some(json!({"delay_ms": 5})),
        )
        .await,
        409,
        "already exists",
    );
    let res = s
        .http
        .put(s.url("/v1/topics/t/jobs/there"))
        .header("if-none-match", "*")
        .json(&json!({"delay_ms": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 409);
    check(
        s.send(Method::GET, "/v1/topics/t/jobs/none", None).await,
        404,
        "none",
    );
    check(
        s.send(Method::DELETE, "/v1/topics/t/jobs/none", None).await,
        404,
        "none",
    );
    check(
        s.send(
            Method::POST,
            "/v1/topics/t/jobs/none/reset",
            Some(json!({"delay_ms": 5})),
        )
        .await,
        404,
        "none",
    );
    check(
        s.send(Method::DELETE, "/v1/topics/t/dead/none", None).await,
        404,
        "none",
    );
    check(
        s.send(Method::GET, "/v1/topics/t/dead?limit=0", None).await,
        400,
        "limit",
    );
    // Not JSON, malformed JSON, a body over 1 MiB.
    let raw = |ct: &'static str, body: String| {
        s.http
            .put(s.url("/v1/topics/t/jobs/x"))
            .header("content-type", ct)
            .body(body)
            .send()
    };
    let res = raw("text/plain", "{}".into()).await.unwrap();
    assert_eq!(res.status().as_u16(), 415);
    assert!(res.json::<Value>().await.unwrap()["error"]["code"].is_string());
    let res = raw("application/json", "{\"delay_ms\": ".into())
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
    let huge = format!(
        "{{\"delay_ms\": 5, \"payload\": \"{}\"}}",
        "z".repeat(1_100_000)
    );
    let res = raw("application/json", huge).await.unwrap();
    assert_eq!(res.status().as_u16(), 413);
    assert_eq!(
        res.json::<Value>().await.unwrap()["error"]["code"],
        "payload_too_large"
    );
    let (st, body) = s.send(Method::PATCH, "/v1/topics/t/jobs/x", None).await;
    assert_eq!(
        (st, body["error"]["code"].as_str()),
        (405, Some("method_not_allowed"))
    );
    // A batch with one bad entry is rejected whole, naming the entry.
    let bad_batch =
        json!({"resets": [{"id": "there", "delay_ms": 5}, {"id": "y", "delay_ms": -1}]});
    check(
        s.send(Method::POST, "/v1/topics/t/resets", Some(bad_batch))
            .await,
        400,
        "resets[1]",
    );
    assert_eq!(
        common::redis_dump(&redis),
        before,
        "a failed request changed the store"
    );
}

/// What the OpenAPI document promises about numbers and cursors, the server keeps: `5.0`
/// is the integer 5, `5.5` is refused, a delay over the documented maximum is refused, and
/// any event position of the documented form is taken.
#[actix_rt::test]
async fn numbers_and_cursors_are_what_the_document_says() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let at = now_ms() + 60_000;
    let (st, job) = s
        .send(
            Method::PUT,
            "/v1/topics/t/jobs/a",
            Some(json!({"fire_at": at as f64, "max_attempts": 3.0})),
        )
        .await;
    assert_eq!(st, 201, "{job}");
    assert_eq!(
        (job["fire_at"].as_i64(), job["max_attempts"].as_i64()),
        (Some(at), Some(3))
    );
    let (st, body) = s
        .send(
            Method::PUT,
            "/v1/topics/t/jobs/b",
            Some(json!({"delay_ms": 1.5})),
        )
        .await;
    assert_eq!(st, 400, "{body}");
    let (st, body) = s
        .send(
            Method::PUT,
            "/v1/topics/t/jobs/b",
            Some(json!({"delay_ms": timeout_center::MAX_DELAY_MS + 1})),
        )
        .await;
    assert_eq!(st, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("delay_ms")
    );
    for after in ["5-0", "5-0-3", "0-0"] {
        let (st, body) = s
            .send(
                Method::GET,
                &format!("/v1/topics/t/events?after={after}"),
                None,
            )
            .await;
        assert_eq!(st, 200, "{after}: {body}");
    }
    let (st, _) = s
        .send(Method::GET, "/v1/topics/t/events?after=5", None)
        .await;
    assert_eq!(st, 400);
    let (st, _) = s
        .send(Method::GET, "/v1/topics/t/dead?after=-5:x", None)
        .await;
    assert_eq!(st, 400);
}

/// A job is checked against its type at the door, for a single job and for the `create` of
/// batch resets: an unknown type and a payload that does not decode as the type's payload
/// get 400 naming the type or the field, and nothing is stored (not even the topic).
#[actix_rt::test]
async fn a_job_is_checked_against_its_type_when_scheduled() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let before = common::redis_dump(&redis);
    let refused = |(st, body): (u16, Value), says: &[&str]| {
        assert_eq!(st, 400, "{body}");
        let msg = body["error"]["message"].as_str().unwrap().to_string();
        for word in says {
            assert!(msg.contains(word), "{msg:?} does not say {word:?}");
        }
    };
    refused(
        s.send(
            Method::PUT,
            "/v1/topics/fresh/jobs/x",
            Some(json!({"type": "no-such-type", "delay_ms": 1000})),
        )
        .await,
        &["no-such-type", "webhook", "emit", "device_offline"],
    );
    refused(
        s.send(
            Method::PUT,
            "/v1/topics/fresh/jobs/x",
            Some(json!({"type": "webhook", "payload": {"method": "POST"}, "delay_ms": 1000})),
        )
        .await,
        &["payload.url"],
    );
    refused(
        s.send(
            Method::PUT,
            "/v1/topics/fresh/jobs/x",
            Some(json!({"type": "webhook", "payload": {"url": 5}, "delay_ms": 1000})),
        )
        .await,
        &["payload.url"],
    );
    refused(
        s.send(
            Method::POST,
            "/v1/topics/fresh/resets",
            Some(json!({"resets": [{"id": "x", "delay_ms": 1000}], "create": {"type": "webhook", "payload": {}}})),
        )
        .await,
        &["payload.url"],
    );
    refused(
        s.send(
            Method::PUT,
            "/v1/topics/fresh/jobs/x",
            Some(json!({"type": "device_offline", "payload": [null, null], "delay_ms": 1000})),
        )
        .await,
        &["payload", "object"],
    );
    assert_eq!(common::redis_dump(&redis), before, "nothing was stored");
    let (st, body) = s
        .send(
            Method::PUT,
            "/v1/topics/fresh/jobs/x",
            Some(json!({"type": "webhook", "payload": {"url": "http://localhost:1/"}, "delay_ms": 60000})),
        )
        .await;
    assert_eq!(st, 201, "{body}");
}

/// Reading, cancelling or resetting a job in an unknown topic answers 404 `topic_not_found`:
/// the topic is not created, not listed, and no slot actor starts for it.
#[actix_rt::test]
async fn reads_of_an_unknown_topic_answer_404_and_create_nothing() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let before = common::redis_dump(&redis);
    let calls = [
        (Method::GET, "/v1/topics/ghost/jobs/x", None),
        (Method::DELETE, "/v1/topics/ghost/jobs/x", None),
        (
            Method::POST,
            "/v1/topics/ghost/jobs/x/reset",
            Some(json!({"delay_ms": 1000})),
        ),
        (
            Method::POST,
            "/v1/topics/ghost/resets",
            Some(json!({"resets": [{"id": "x", "delay_ms": 1000}]})),
        ),
        (Method::GET, "/v1/topics/ghost/events", None),
        (Method::GET, "/v1/topics/ghost/dead", None),
        (Method::POST, "/v1/topics/ghost/dead/x/requeue", None),
        (Method::DELETE, "/v1/topics/ghost/dead/x", None),
        (Method::GET, "/v1/topics/ghost", None),
    ];
    for (method, path, body) in calls {
        let (st, body) = s.send(method.clone(), path, body).await;
        assert_eq!(st, 404, "{method} {path}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains("ghost"),
            "{method} {path}: {body}"
        );
        if path != "/v1/topics/ghost" {
            assert_eq!(body["error"]["code"], "topic_not_found", "{method} {path}");
        }
    }
    let (_, topics) = s.send(Method::GET, "/v1/topics", None).await;
    assert_eq!(topics["items"], json!([]), "{topics}");
    let (_, slots) = s.send(Method::GET, "/v1/slots?topic=ghost", None).await;
    let served: Vec<&Value> = slots["items"].as_array().unwrap().iter().collect();
    assert!(served.is_empty(), "slot actors started: {served:?}");
    assert_eq!(common::redis_dump(&redis), before, "nothing was stored");
}

#[actix_rt::test]
async fn auth_guards_v1_routes_when_tokens_are_set() {
    let redis = RedisServer::start();
    let open = Service::start(&redis, |_| {}).await;
    assert_eq!(
        open.send(Method::GET, "/v1/topics", None).await.0,
        200,
        "auth is off without tokens"
    );
    let s = Service::start(&redis, |c| c.tokens = vec!["s3cret".into(), "other".into()]).await;
    let (st, body) = s.send(Method::GET, "/v1/topics", None).await;
    assert_eq!(
        (st, body["error"]["code"].as_str()),
        (401, Some("unauthorized"))
    );
    let with = |t: &str| {
        s.http
            .get(s.url("/v1/topics"))
            .bearer_auth(t.to_string())
            .send()
    };
    assert_eq!(with("wrong").await.unwrap().status().as_u16(), 401);
    assert_eq!(with("s3cre").await.unwrap().status().as_u16(), 401);
    assert_eq!(with("s3cret").await.unwrap().status().as_u16(), 200);
    assert_eq!(with("other").await.unwrap().status().as_u16(), 200);
    assert_eq!(s.send(Method::GET, "/health", None).await.0, 200);
    assert_eq!(s.send(Method::GET, "/metrics", None).await.0, 200);
    // The dashboard's files hold no data and load without a token; its API calls need one.
    for (path, kind) in [
        ("/ui", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ] {
        let res = s.http.get(s.url(path)).send().await.unwrap();
        assert_eq!(res.status().as_u16(), 200, "{path}");
        let ct = res.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ct.starts_with(kind), "{path}: {ct}");
        // No inline script, no other origin, never framed.
        let csp = res.headers()["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("script-src 'self'")
                && !csp.contains("unsafe-inline")
                && csp.contains("frame-ancestors 'none'"),
            "{path}: {csp}"
        );
        assert_eq!(res.headers()["x-frame-options"], "DENY");
    }
    let closed = Service::start(&redis, |c| {
        c.tokens = vec!["t".into()];
        c.auth_health_and_metrics = true;
    })
    .await;
    assert_eq!(closed.send(Method::GET, "/health", None).await.0, 401);
    assert_eq!(closed.send(Method::GET, "/metrics", None).await.0, 401);
}

#[actix_rt::test]
async fn the_store_going_away_answers_503_and_service_returns_without_a_restart() {
    let mut redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    assert_eq!(
        s.send(
            Method::PUT,
            "/v1/topics/t/jobs/a",
            Some(json!({"delay_ms": 60_000}))
        )
        .await
        .0,
        201
    );
    redis.stop();
    let (st, body) = s.send(Method::GET, "/v1/topics/t/jobs/a", None).await;
    assert_eq!(
        (st, body["error"]["code"].as_str()),
        (503, Some("store_unavailable"))
    );
    let (st, health) = s.send(Method::GET, "/health", None).await;
    assert_eq!(
        (st, health["store"]["reachable"].as_bool()),
        (503, Some(false))
    );
    redis.restart();
    eventually(15, "service after Redis came back", || async {
        s.send(
            Method::PUT,
            "/v1/topics/t/jobs/b",
            Some(json!({"delay_ms": 60_000})),
        )
        .await
        .0 == 201
    })
    .await;
    let (st, got) = s.send(Method::GET, "/v1/topics/t/jobs/b", None).await;
    assert_eq!(st, 200, "{got}");
    assert_eq!(s.send(Method::GET, "/health", None).await.0, 200);
}

#[actix_rt::test]
async fn the_batch_reset_endpoint_takes_ten_thousand_resets_with_create() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let resets: Vec<Value> = (0..10_000)
        .map(|i| json!({"id": format!("dev-{i}"), "delay_ms": 60_000}))
        .collect();
    let body = json!({"resets": resets, "create": {"type": "device_offline"}});
    let (st, report) = s
        .send(
            Method::POST,
            "/v1/topics/devices/resets",
            Some(body.clone()),
        )
        .await;
    assert_eq!(
        (st, report["reset"].as_u64(), report["created"].as_u64()),
        (200, Some(0), Some(10_000))
    );
    let (_, report) = s
        .send(Method::POST, "/v1/topics/devices/resets", Some(body))
        .await;
    assert_eq!(
        (report["reset"].as_u64(), report["created"].as_u64()),
        (Some(10_000), Some(0))
    );
    let some: Vec<Value> = (9_990..10_010)
        .map(|i| json!({"id": format!("dev-{i}"), "delay_ms": 1_000}))
        .collect();
    let (_, report) = s
        .send(
            Method::POST,
            "/v1/topics/devices/resets",
            Some(json!({"resets": some})),
        )
        .await;
    assert_eq!(report["reset"].as_u64(), Some(10));
    let mut missing: Vec<String> = report["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    missing.sort();
    assert_eq!(
        missing,
        (10_000..10_010)
            .map(|i| format!("dev-{i}"))
            .collect::<Vec<_>>()
    );
    let (_, t) = s.send(Method::GET, "/v1/topics/devices", None).await;
    assert_eq!(t["scheduled"].as_u64(), Some(10_000));
    let too_many: Vec<Value> = (0..10_001)
        .map(|i| json!({"id": format!("x{i}"), "delay_ms": 1}))
        .collect();
    let (st, body) = s
        .send(
            Method::POST,
            "/v1/topics/devices/resets",
            Some(json!({"resets": too_many})),
        )
        .await;
    assert_eq!(
        (st, body["error"]["code"].as_str()),
        (413, Some("too_many_resets"))
    );
}

/// The routes of docs/design.md's v1 table, plus the meeting routes.
const ROUTES: &[(&str, &str)] = &[
    ("get", "/v1/topics/{topic}/export"),
    ("post", "/v1/topics/{topic}/import"),
    ("put", "/v1/topics/{topic}/jobs/{id}"),
    ("post", "/v1/topics/{topic}/jobs"),
    ("get", "/v1/topics/{topic}/jobs"),
    ("delete", "/v1/topics/{topic}/jobs"),
    ("post", "/v1/topics/{topic}/dead/requeue"),
    ("delete", "/v1/topics/{topic}"),
    ("get", "/v1/topics/{topic}/jobs/{id}"),
    ("delete", "/v1/topics/{topic}/jobs/{id}"),
    ("post", "/v1/topics/{topic}/jobs/{id}/reset"),
    ("post", "/v1/topics/{topic}/jobs/{id}/trigger"),
    ("post", "/v1/topics/{topic}/resets"),
    ("get", "/v1/topics"),
    ("get", "/v1/topics/{topic}/flows"),
    ("get", "/v1/topics/{topic}/flows/{key}"),
    ("put", "/v1/topics/{topic}/flows/{key}"),
    ("delete", "/v1/topics/{topic}/flows/{key}"),
    ("put", "/v1/topics/{topic}"),
    ("get", "/v1/topics/{topic}"),
    ("get", "/v1/topics/{topic}/dead"),
    ("post", "/v1/topics/{topic}/dead/{id}/requeue"),
    ("delete", "/v1/topics/{topic}/dead/{id}"),
    ("delete", "/v1/topics/{topic}/dead"),
    ("get", "/v1/topics/{topic}/events"),
    ("put", "/v1/topics/{topic}/meetings/{id}"),
    ("get", "/v1/topics/{topic}/meetings/{id}"),
    ("delete", "/v1/topics/{topic}/meetings/{id}"),
    ("post", "/v1/topics/{topic}/meetings/{id}/approve"),
    ("post", "/v1/topics/{topic}/claim"),
    ("post", "/v1/topics/{topic}/jobs/{id}/ack"),
    ("post", "/v1/topics/{topic}/jobs/{id}/retry"),
    ("post", "/v1/topics/{topic}/jobs/{id}/bury"),
    ("post", "/v1/topics/{topic}/jobs/{id}/touch"),
    ("post", "/v1/topics/{topic}/acks"),
    ("get", "/v1/token"),
    ("get", "/health"),
    ("get", "/livez"),
    ("get", "/readyz"),
    ("get", "/v1/slots"),
    ("get", "/v1/history"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
];

#[actix_rt::test]
async fn openapi_lists_every_route_the_server_serves() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let (st, doc) = s.send(Method::GET, "/openapi.json", None).await;
    assert_eq!(st, 200);
    let paths = doc["paths"].as_object().unwrap();
    let mut documented = 0;
    for (method, path) in ROUTES {
        assert!(
            paths.get(*path).and_then(|p| p.get(*method)).is_some(),
            "{method} {path} is not in /openapi.json"
        );
        // The server serves it: a route it lacks answers 404 or 405 with `not_found`/`method_not_allowed`.
        let concrete = path
            .replace("{topic}", "t")
            .replace("{id}", "i")
            .replace("{key}", "k");
        let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let res = s
            .http
            .request(m, s.url(&concrete))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        let code = res.status().as_u16();
        let body: Value = res.json().await.unwrap_or(Value::Null);
        let unrouted = body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no such route"))
            || code == 405;
        assert!(!unrouted, "{method} {path} is documented but not served");
    }
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            assert!(
                ROUTES.contains(&(method.as_str(), path.as_str())),
                "{method} {path} is documented but not in the table"
            );
            documented += 1;
        }
    }
    assert_eq!(documented, ROUTES.len());

    // Every documented error answer has the body the server sends: {"error": {code, message}}.
    let (_, served) = s.send(Method::GET, "/v1/topics/ghost/jobs/x", None).await;
    let error = &doc["components"]["schemas"]["ErrorBody"];
    assert_eq!(error["required"], json!(["error"]), "{error}");
    assert!(served["error"]["code"].is_string() && served["error"]["message"].is_string());
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            for (status, res) in op["responses"].as_object().unwrap() {
                if status.starts_with('4') || status.starts_with('5') {
                    let schema = &res["content"]["application/json"]["schema"]["$ref"];
                    if path != "/health" && path != "/readyz" {
                        assert_eq!(
                            schema, "#/components/schemas/ErrorBody",
                            "{method} {path} {status}"
                        );
                    }
                }
            }
        }
    }
    // A topic's view carries its figures beside its settings, and the schema allows them.
    let config = &doc["components"]["schemas"]["TopicConfig"];
    assert!(config.get("additionalProperties").is_none(), "{config}");
}

/// A pull topic's claims are counted apart from fires run in the service: how late its due
/// jobs were claimed is `toc_claim_lateness_seconds`, and its firing lateness has no series
/// (before, claims went into `toc_firing_lateness_seconds`, which the `TocFiresLate` alert
/// reads, so a consumer that came late looked like a slow service).
#[actix_rt::test]
async fn claims_are_counted_apart_from_fires() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let (st, body) = s
        .send(
            Method::PUT,
            "/v1/topics/p",
            Some(json!({"default_type": "pull"})),
        )
        .await;
    assert!(st == 200 || st == 201, "{body}");
    for i in 0..3 {
        s.send(
            Method::PUT,
            &format!("/v1/topics/p/jobs/j{i}"),
            Some(json!({"delay_ms": 0})),
        )
        .await;
    }
    let claimed = std::cell::Cell::new(0);
    eventually(10, "3 claims", || async {
        let (_, body) = s
            .send(
                Method::POST,
                "/v1/topics/p/claim",
                Some(json!({"max": 3, "wait_ms": 500})),
            )
            .await;
        claimed.set(claimed.get() + body["jobs"].as_array().map_or(0, Vec::len));
        claimed.get() >= 3
    })
    .await;
    let text = s.text("/metrics").await;
    assert!(
        text.contains("toc_claim_lateness_seconds_count{topic=\"p\"} 3"),
        "{text}"
    );
    assert!(
        !text.contains("toc_firing_lateness_seconds_count{topic=\"p\"}"),
        "{text}"
    );
}

#[actix_rt::test]
async fn metrics_show_the_lateness_histogram_after_fires() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    for i in 0..20 {
        s.send(
            Method::PUT,
            &format!("/v1/topics/m/jobs/j{i}"),
            Some(json!({"delay_ms": 10})),
        )
        .await;
    }
    eventually(10, "20 fires", || async {
        s.send(Method::GET, "/v1/topics/m/events?limit=1000", None)
            .await
            .1["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == "job.done")
            .count()
            == 20
    })
    .await;
    let text = s.text("/metrics").await;
    let value = |prefix: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in:\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(
        value("toc_firing_lateness_seconds_count{topic=\"m\"}"),
        20.0
    );
    let sum = value("toc_firing_lateness_seconds_sum{topic=\"m\"}");
    assert!(sum >= 0.0);
    let mut last = 0.0;
    let buckets: Vec<f64> = text
        .lines()
        .filter(|l| {
            l.starts_with("toc_firing_lateness_seconds_bucket{") && l.contains("topic=\"m\"")
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(buckets.len() > 5);
    for b in &buckets {
        assert!(*b >= last, "buckets are cumulative");
        last = *b;
    }
    assert_eq!(last, 20.0, "the +Inf bucket holds every fire");
    assert_eq!(value("toc_jobs_fired_total{topic=\"m\"}"), 20.0);
    assert_eq!(value("toc_jobs_scheduled_total{topic=\"m\"}"), 20.0);
    assert_eq!(value("toc_jobs{state=\"scheduled\",topic=\"m\"}"), 0.0);
    assert!(text.contains("toc_handler_duration_seconds_bucket"));
    assert!(text.contains("toc_pump_batch_size_bucket"));
    // Every fire came from a pump, each timed (the lead hides up to that much).
    assert!(value("toc_pump_seconds_count{topic=\"m\"}") >= 1.0);
    assert!(value("toc_pump_seconds_sum{topic=\"m\"}") > 0.0);
    // Each pump's lead, at least runtime.fire_lead_ms (2 ms by default).
    let leads = value("toc_pump_lead_seconds_count{topic=\"m\"}");
    assert!(leads >= 1.0);
    assert!(value("toc_pump_lead_seconds_sum{topic=\"m\"}") >= 0.002 * leads);
    // Fires whose job came due while its pump was in flight: some of the fires at most.
    assert!(value("toc_jobs_fired_after_their_pump_total{topic=\"m\"}") <= 20.0);
}

#[actix_rt::test]
async fn the_cli_drives_the_api() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |c| c.tokens = vec!["tok".into()]).await;
    let url = format!("http://{}", s.addr);
    let toc = |args: &[&str]| {
        let url = url.clone();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        async move {
            let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toc"))
                .args(&args)
                .env("TOC_URL", &url)
                .env("TOC_TOKEN", "tok")
                .output()
                .await
                .unwrap();
            (
                out.status.code().unwrap(),
                String::from_utf8_lossy(&out.stdout).to_string(),
                String::from_utf8_lossy(&out.stderr).to_string(),
            )
        }
    };
    let (code, out, _) = toc(&[
        "job",
        "put",
        "t",
        "a",
        "--delay-ms",
        "60000",
        "--payload",
        "{\"k\":1}",
    ])
    .await;
    assert_eq!(code, 0);
    assert!(
        out.contains("scheduled") && out.contains("{\"k\":1}"),
        "{out}"
    );
    let (code, out, _) = toc(&["--json", "job", "get", "t", "a"]).await;
    assert_eq!(code, 0);
    let job: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(job["payload"], json!({"k": 1}));
    let at = now_ms() + 90_000;
    let (code, out, _) = toc(&["job", "reset", "t", "a", "--fire-at", &at.to_string()]).await;
    // Printed for people: RFC 3339 in UTC, to the second (`--json` keeps the ms).
    let shown = chrono::DateTime::from_timestamp_millis(at)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    assert!(code == 0 && out.contains(&shown), "{out}");
    let (code, out, _) = toc(&["topic", "ls"]).await;
    assert!(
        code == 0 && out.starts_with("NAME") && out.contains("\nt "),
        "{out}"
    );
    let (code, out, _) = toc(&["topic", "show", "t"]).await;
    assert!(code == 0 && out.contains("scheduled"), "{out}");
    // `topic grow` doubles the slots; the job written before is still found.
    let (code, out, err) = toc(&["topic", "grow", "t"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("32") && out.contains("draining_from"), "{out}");
    let (code, out, _) = toc(&["job", "get", "t", "a"]).await;
    assert!(code == 0 && out.contains(&shown), "{out}");
    // `topic limit` sets the fire rate limit; 0 removes it.
    let (code, out, err) = toc(&["topic", "limit", "t", "25", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let view: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(view["max_fires_per_s"], 25, "{out}");
    let (code, out, _) = toc(&["topic", "limit", "t", "0", "--json"]).await;
    let view: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((code, &view["max_fires_per_s"]), (0, &Value::Null), "{out}");
    let (code, _, _) = toc(&["job", "cancel", "t", "a"]).await;
    assert_eq!(code, 0);
    let (code, _, err) = toc(&["job", "get", "t", "a"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("404 not_found"), "{err}");
    // A dead letter: ls, requeue, rm.
    toc(&[
        "job",
        "put",
        "t",
        "d",
        "--delay-ms",
        "0",
        "--type",
        "webhook",
        "--payload",
        r#"{"url": "http://localhost:1/"}"#,
    ])
    .await;
    eventually(5, "a dead letter", || async {
        toc(&["dead", "ls", "t"]).await.1.contains("egress policy")
    })
    .await;
    let (code, _, _) = toc(&["dead", "requeue", "t", "d"]).await;
    assert_eq!(code, 0);
    eventually(5, "dead again", || async {
        toc(&["dead", "ls", "t"]).await.1.lines().count() == 2
    })
    .await;
    let (code, _, _) = toc(&["dead", "rm", "t", "d"]).await;
    assert_eq!(code, 0);
    let (code, out, _) = toc(&["events", "t"]).await;
    assert!(code == 0 && out.contains("job.dead"), "{out}");
    let (code, out, _) = toc(&["health"]).await;
    assert!(code == 0 && out.contains("status  ok"), "{out}");
    // Errors: a usage error and an unreachable service.
    let (code, _, _) = toc(&["job", "reset", "t", "a"]).await;
    assert_eq!(code, 2);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toc"))
        .args([
            "--url",
            "http://ops:pa55@127.0.0.1:1/base?key=k3y",
            "health",
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach http://127.0.0.1:1"), "{err}");
    for secret in ["pa55", "k3y", "ops"] {
        assert!(!err.contains(secret), "--url's {secret} printed: {err}");
    }
}

#[actix_rt::test]
async fn put_of_a_topic_creates_it_changes_its_settings_and_only_doubles_its_slots() {
    let redis = RedisServer::start();
    // Short retries, below the service's default floor (tests/limits.rs tests the floor).
    let s = Service::start(&redis, |c| c.limits.min_retry_delay_ms = 0).await;
    let (st, v) = s
        .send(
            Method::PUT,
            "/v1/topics/orders",
            Some(json!({"slots": 4, "max_attempts": 3, "default_type": "pull"})),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(
        (
            v["slots"].as_u64(),
            v["max_attempts"].as_u64(),
            v["default_type"].as_str()
        ),
        (Some(4), Some(3), Some("pull"))
    );
    // Unset fields took topics.defaults.
    assert_eq!(v["visibility_timeout_ms"], 30_000, "{v}");
    assert_eq!(v["scheduled"], 0, "{v}");
    // A change keeps what it does not name.
    let (st, v) = s
        .send(
            Method::PUT,
            "/v1/topics/orders",
            Some(json!({"visibility_timeout_ms": 5000, "backoff": {"base_ms": 10, "factor": 3.0, "max_ms": 90, "jitter": 0.0}})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (
            v["slots"].as_u64(),
            v["max_attempts"].as_u64(),
            v["visibility_timeout_ms"].as_u64()
        ),
        (Some(4), Some(3), Some(5000))
    );
    assert_eq!(v["backoff"]["factor"], 3.0, "{v}");
    // Which events its runs keep: shown once it is not `all`, kept by a change that does not
    // name it.
    assert_eq!(v["events"], Value::Null, "{v}");
    let (st, v) = s
        .send(
            Method::PUT,
            "/v1/topics/orders",
            Some(json!({"events": "changes"})),
        )
        .await;
    assert_eq!((st, v["events"].as_str()), (200, Some("changes")), "{v}");
    let (_, v) = s
        .send(
            Method::PUT,
            "/v1/topics/orders",
            Some(json!({"max_attempts": 3})),
        )
        .await;
    assert_eq!(v["events"], "changes", "{v}");
    // The pull topic serves claims at once.
    let (st, v) = s
        .send(Method::POST, "/v1/topics/orders/claim", Some(json!({})))
        .await;
    assert_eq!((st, v["jobs"].clone()), (200, json!([])), "{v}");

    // Refused, naming the field, and nothing changes.
    let (_, before) = s.send(Method::GET, "/v1/topics/orders", None).await;
    let refusals = [
        (json!({"slots": 16}), 409, "slots"),
        (json!({"slots": 2}), 409, "slots"),
        (json!({"slots": 3}), 400, "slots"),
        (json!({"max_attempts": 0}), 400, "max_attempts"),
        (
            json!({"visibility_timeout_ms": 86_400_001u64}),
            400,
            "visibility_timeout_ms",
        ),
        (json!({"max_payload_bytes": 0}), 400, "max_payload_bytes"),
        (json!({"default_type": "nope"}), 400, "default_type"),
        (json!({"backoff": {"factor": 0.5}}), 400, "backoff.factor"),
        (
            json!({"backoff": {"max_ms": 90_000_000_000_000u64}}),
            400,
            "backoff.max_ms",
        ),
        (json!({"backoff": {"jitter": 1.0}}), 400, "backoff.jitter"),
        (json!({"colour": "blue"}), 400, "colour"),
        (json!({"events": "some"}), 400, "events"),
    ];
    for (body, status, field) in refusals {
        let (st, v) = s
            .send(Method::PUT, "/v1/topics/orders", Some(body.clone()))
            .await;
        assert_eq!(st, status, "{body}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{body}: {message}");
    }
    let (_, after) = s.send(Method::GET, "/v1/topics/orders", None).await;
    assert_eq!(before, after);
    assert_eq!(after["draining_from"], Value::Null, "{after}");
    // Doubling, and again: the topic shows the layout it drains from.
    for (slots, from) in [(8, 4), (16, 4)] {
        let (st, v) = s
            .send(
                Method::PUT,
                "/v1/topics/orders",
                Some(json!({"slots": slots})),
            )
            .await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(
            (v["slots"].as_u64(), v["draining_from"].as_u64()),
            (Some(slots), Some(from))
        );
        assert_eq!(v["max_attempts"], 3, "{v}");
    }
    // A bad name creates nothing.
    let (st, _) = s
        .send(Method::PUT, "/v1/topics/bad%20name", Some(json!({})))
        .await;
    assert_eq!(st, 400);
    let (_, topics) = s.send(Method::GET, "/v1/topics", None).await;
    assert_eq!(topics["items"].as_array().unwrap().len(), 1, "{topics}");
}

#[actix_rt::test]
async fn jobs_written_before_and_after_a_doubling_all_fire_once() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let (st, v) = s
        .send(Method::PUT, "/v1/topics/grow", Some(json!({"slots": 2})))
        .await;
    assert_eq!(st, 201, "{v}");
    // Due seconds after they are written, so that none fires before its reset below on a
    // loaded machine (a reset of a job that fired and left is a 404).
    let schedule = |i: usize| {
        let s = &s;
        async move {
            let (st, v) = s
                .send(
                    Method::PUT,
                    &format!("/v1/topics/grow/jobs/g{i}"),
                    Some(json!({"delay_ms": 2_000, "payload": {"i": i}})),
                )
                .await;
            assert_eq!(st, 201, "{v}");
        }
    };
    for i in 0..40 {
        schedule(i).await;
    }
    let (st, v) = s
        .send(Method::PUT, "/v1/topics/grow", Some(json!({"slots": 4})))
        .await;
    assert_eq!((st, v["draining_from"].as_u64()), (200, Some(2)), "{v}");
    for i in 40..80 {
        schedule(i).await;
    }
    // Half of the old jobs get a reset, which moves those whose slot changed home.
    for i in (0..40).step_by(2) {
        let (st, v) = s
            .send(
                Method::POST,
                &format!("/v1/topics/grow/jobs/g{i}/reset"),
                Some(json!({"delay_ms": 2_500})),
            )
            .await;
        assert_eq!(st, 200, "{v}");
    }
    let fired = || async {
        let (_, page) = s
            .send(Method::GET, "/v1/topics/grow/events?limit=1000", None)
            .await;
        let mut ids: Vec<String> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == "job.fired")
            .map(|e| e["job_id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    eventually(10, "80 jobs fired", || async { fired().await.len() >= 80 }).await;
    let ids = fired().await;
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(
        (ids.len(), unique.len()),
        (80, 80),
        "each fired once: {ids:?}"
    );
    let (_, v) = s.send(Method::GET, "/v1/topics/grow", None).await;
    assert_eq!(
        (v["scheduled"].as_u64(), v["running"].as_u64()),
        (Some(0), Some(0)),
        "{v}"
    );
    // Every job has left: a sweep finds no old copy and the topic shows it drained.
    assert_eq!(store_of(&s.center).sweep("grow").await.unwrap(), None);
    let (_, v) = s.send(Method::GET, "/v1/topics/grow", None).await;
    assert_eq!(v["draining_from"], Value::Null, "{v}");
}

/// A job due at once may fire and leave before its PUT answers: the PUT still answers 201
/// with the job as written (it was created), never 404.
#[actix_rt::test]
async fn a_put_of_a_job_due_at_once_answers_201_even_when_it_already_fired() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let puts = (0..400).map(|i| {
        let s = &s;
        async move {
            let path = format!("/v1/topics/now/jobs/n{i}");
            let body = json!({"delay_ms": 0, "payload": {"i": i}});
            let (st, v) = s.send(Method::PUT, &path, Some(body)).await;
            assert_eq!(st, 201, "{v}");
            assert_eq!(
                (v["id"].as_str(), v["payload"]["i"].as_i64()),
                (Some(format!("n{i}").as_str()), Some(i))
            );
        }
    });
    futures_util::future::join_all(puts).await;
}

/// Instants that are surely mistakes are refused at the door, 422 naming the field and what
/// to send instead, and nothing is written (before: `fire_at: 1000` and one in seconds were
/// taken and fired at once, the first adding 56 years to the lateness sum the
/// `TocFiresLate` alert reads; one past the longest delay was taken too). A job accepted a
/// little past due is not late by the time before it was written.
#[actix_rt::test]
async fn instants_that_are_surely_mistakes_are_refused() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let now = common::now_ms();
    let refused = |(st, body): (u16, Value), says: &str| {
        assert_eq!(st, 422, "{body}");
        let msg = body["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains("fire_at") && msg.contains(says), "{msg}");
    };
    for (at, says) in [
        (1_000, "seconds"),
        (1_796_645_848, "seconds"),
        (now - 2 * 3_600_000, "limits.max_past_ms"),
        (
            now + timeout_center::MAX_DELAY_MS + 3_600_000,
            "MAX_DELAY_MS",
        ),
    ] {
        refused(
            s.send(
                Method::PUT,
                "/v1/topics/m/jobs/x",
                Some(json!({"fire_at": at})),
            )
            .await,
            says,
        );
        refused(
            s.send(
                Method::POST,
                "/v1/topics/m/resets",
                Some(json!({"resets": [{"id": "x", "fire_at": at}], "create": {}})),
            )
            .await,
            says,
        );
    }
    assert_eq!(
        s.send(Method::GET, "/v1/topics/m/jobs/x", None).await.0,
        404
    );
    // Half a minute past due is taken, fires at once, and is late by its own run only.
    let (st, body) = s
        .send(
            Method::PUT,
            "/v1/topics/m/jobs/late",
            Some(json!({"fire_at": now - 30_000, "payload": {"n": 1}})),
        )
        .await;
    assert_eq!(st, 201, "{body}");
    eventually(10, "the late job fires", || async {
        s.text("/metrics")
            .await
            .contains("toc_firing_lateness_seconds_count{topic=\"m\"} 1")
    })
    .await;
    let text = s.text("/metrics").await;
    let sum: f64 = text
        .lines()
        .find(|l| l.starts_with("toc_firing_lateness_seconds_sum{topic=\"m\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .expect("a lateness sum");
    assert!(
        sum < 5.0,
        "a job written 30 s past due counted {sum} s late"
    );
}

/// Each limit's refusal names its setting (before: a 70 KB payload and a 2 MB body were
/// refused without saying which setting to change).
#[actix_rt::test]
async fn a_refusal_past_a_limit_names_its_setting() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let big = |n: usize| Some(json!({"delay_ms": 60_000, "payload": {"pad": "x".repeat(n)}}));
    let (st, body) = s
        .send(Method::PUT, "/v1/topics/m/jobs/a", big(70_000))
        .await;
    assert_eq!(st, 413, "{body}");
    assert!(body.to_string().contains("max_payload_bytes"), "{body}");
    let (st, body) = s
        .send(Method::PUT, "/v1/topics/m/jobs/b", big(2_000_000))
        .await;
    assert_eq!(st, 413, "{body}");
    assert!(body.to_string().contains("http.max_body_bytes"), "{body}");
}

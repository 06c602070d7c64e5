//! Shares follow the caller, not the topic: two teams, each a token limited to its topics
//! (`orders*`, `billing*`, each a tenant named by its pattern), on a real `toc serve` on each
//! engine. Making more topics buys a team nothing:
//!
//! - its topics stop at `limits.max_topics_per_tenant`, so its writes cannot take the other
//!   team's first topic (before: `orders*` auto-created all 10 of `limits.max_topics`, and
//!   `billing*`'s first write got 409); it may delete what it made with its write token, and
//!   nothing else;
//! - its long polls stop at `limits.max_long_polls_per_tenant` (before: one team's five made
//!   every other team's claim 429);
//! - its webhooks to a receiver that hangs, spread over 12 topics and 16 keys each, hold
//!   `webhooks.max_in_flight_per_tenant` of the instance's calls, and the other team's
//!   webhook arrives within a second of due (before: 28 s late with 6 topics).
//!
//! - its jobs and their bytes, over every topic it made, stop at `limits.max_jobs_per_tenant`
//!   and `limits.max_bytes_per_tenant` (before: each topic had its own quota, so each new
//!   topic brought a team a whole quota more), while the other team still writes.
//!
//! What it cannot show: shares across instances (each instance counts its own, as
//! `max_in_flight` and `max_long_polls` do).

mod common;

use std::time::Duration;

use serde_json::{Value, json};

use common::RedisServer;
use common::process::{Receiver, Skew, Toc, redis_env};

const TOKENS: &str = "ops-secret,orders-secret:write:orders*,billing-secret:write:billing*";

async fn service(
    redis: &Option<RedisServer>,
    dir: &std::path::Path,
    extra: &[(&str, &str)],
) -> Toc {
    let mut env = match redis {
        Some(r) => redis_env(r.url()),
        None => vec![],
    };
    env.push(("TOC_TOKENS", TOKENS.into()));
    env.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    Toc::start("toc", &env, Skew::None, dir).await
}

async fn call(
    http: &reqwest::Client,
    svc: &Toc,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = http.request(method, svc.url(path)).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The service keeps its last hour (`GET /v1/history`): each step holds the rates of the
/// topics that fired, and a team's token reads only its own topics' (the totals too), the
/// admin's every topic.
#[tokio::test]
async fn the_history_shows_each_team_only_its_topics() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&None, dir.path(), &[("TOC_HTTP_HISTORY_EVERY_MS", "1000")]).await;
    let http = reqwest::Client::new();
    for (topic, n) in [("orders-a", 30), ("billing-b", 10)] {
        let (s, b) = call(
            &http,
            &svc,
            "ops-secret",
            reqwest::Method::PUT,
            &format!("/v1/topics/{topic}"),
            Some(json!({"default_type": "emit", "slots": 1})),
        )
        .await;
        assert!(s == 200 || s == 201, "{s} {b}");
        for i in 0..n {
            let (s, b) = call(
                &http,
                &svc,
                "ops-secret",
                reqwest::Method::PUT,
                &format!("/v1/topics/{topic}/jobs/j{i}"),
                Some(json!({"delay_ms": 0})),
            )
            .await;
            assert!(s == 200 || s == 201, "{s} {b}");
        }
    }
    // Both topics' fires are in one step or another once both have fired.
    let fired = |points: &Value, topic: &str| -> f64 {
        points["points"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| {
                p["topic"]["topic"]
                    .as_str()
                    .filter(|t| *t == topic)
                    .and(p["topic"]["fired_per_s"].as_f64())
            })
            .sum()
    };
    common::runtime::until(15, "both topics' fires are kept", || {
        let http = http.clone();
        let svc = &svc;
        async move {
            let (_, a) = call(
                &http,
                svc,
                "ops-secret",
                reqwest::Method::GET,
                "/v1/history?topic=orders-a",
                None,
            )
            .await;
            let (_, b) = call(
                &http,
                svc,
                "ops-secret",
                reqwest::Method::GET,
                "/v1/history?topic=billing-b",
                None,
            )
            .await;
            fired(&a, "orders-a") > 0.0 && fired(&b, "billing-b") > 0.0
        }
    })
    .await;
    let total = |page: &Value| -> f64 {
        page["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                p["fired_per_s"].as_f64().unwrap() * page["every_ms"].as_f64().unwrap() / 1_000.0
            })
            .sum()
    };
    let (_, all) = call(
        &http,
        &svc,
        "ops-secret",
        reqwest::Method::GET,
        "/v1/history",
        None,
    )
    .await;
    let (_, orders) = call(
        &http,
        &svc,
        "orders-secret",
        reqwest::Method::GET,
        "/v1/history",
        None,
    )
    .await;
    let (_, peek) = call(
        &http,
        &svc,
        "orders-secret",
        reqwest::Method::GET,
        "/v1/history?topic=billing-b",
        None,
    )
    .await;
    assert_eq!(all["every_ms"], 1000);
    // Rates times steps are about the jobs fired (steps are not exactly a second apart).
    let (all_jobs, orders_jobs) = (total(&all), total(&orders));
    assert!(
        (35.0..=45.0).contains(&all_jobs),
        "every topic's: {all_jobs} of 40 ({all})"
    );
    assert!(
        (25.0..=35.0).contains(&orders_jobs),
        "orders* sees only its 30: {orders_jobs} ({orders})"
    );
    assert_eq!(
        fired(&peek, "billing-b"),
        0.0,
        "another team's topic is not shown: {peek}"
    );
}

async fn topics_are_counted_per_tenant(redis: Option<RedisServer>) {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let svc = service(
        &redis,
        dir.path(),
        &[
            ("TOC_LIMITS_MAX_TOPICS", "10"),
            ("TOC_LIMITS_MAX_TOPICS_PER_TENANT", "5"),
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let job = json!({"delay_ms": 3_600_000});
    let mut made = 0;
    for i in 0..10 {
        let path = format!("/v1/topics/orders-{i}/jobs/j");
        let (st, body) = call(
            &http,
            &svc,
            "orders-secret",
            Method::PUT,
            &path,
            Some(job.clone()),
        )
        .await;
        match st {
            201 => made += 1,
            _ => {
                assert_eq!(st, 409, "{body}");
                assert!(
                    body.to_string().contains("limits.max_topics_per_tenant"),
                    "{body}"
                );
            }
        }
    }
    assert_eq!(made, 5, "orders* made {made} topics");
    // The other team's first topic still fits.
    let (st, body) = call(
        &http,
        &svc,
        "billing-secret",
        Method::PUT,
        "/v1/topics/billing-a/jobs/j",
        Some(job.clone()),
    )
    .await;
    assert_eq!(st, 201, "{body}");
    let (_, t) = call(
        &http,
        &svc,
        "ops-secret",
        Method::GET,
        "/v1/topics/orders-1",
        None,
    )
    .await;
    assert_eq!(t["tenant"], "orders*", "{t}");
    // A team deletes what it made, and nothing else.
    let (st, _) = call(
        &http,
        &svc,
        "orders-secret",
        Method::DELETE,
        "/v1/topics/orders-0",
        None,
    )
    .await;
    assert_eq!(st, 204);
    let (st, _) = call(
        &http,
        &svc,
        "ops-secret",
        Method::PUT,
        "/v1/topics/orders-ops",
        Some(json!({})),
    )
    .await;
    assert_eq!(st, 201);
    let (st, body) = call(
        &http,
        &svc,
        "orders-secret",
        Method::DELETE,
        "/v1/topics/orders-ops",
        None,
    )
    .await;
    assert_eq!(st, 403, "the operator's topic: {body}");
    let (st, _) = call(
        &http,
        &svc,
        "orders-secret",
        Method::DELETE,
        "/v1/topics/billing-a",
        None,
    )
    .await;
    assert_eq!(st, 403, "another team's topic");
    // With one made room, the team may make one more.
    let (st, body) = call(
        &http,
        &svc,
        "orders-secret",
        Method::PUT,
        "/v1/topics/orders-new/jobs/j",
        Some(job),
    )
    .await;
    assert_eq!(st, 201, "{body}");
}

async fn long_polls_are_counted_per_tenant(redis: Option<RedisServer>) {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let svc = service(
        &redis,
        dir.path(),
        &[("TOC_LIMITS_MAX_LONG_POLLS_PER_TENANT", "2")],
    )
    .await;
    let http = reqwest::Client::new();
    for topic in ["orders-q", "billing-q"] {
        let (st, _) = call(
            &http,
            &svc,
            "ops-secret",
            Method::PUT,
            &format!("/v1/topics/{topic}"),
            Some(json!({"default_type": "pull"})),
        )
        .await;
        assert_eq!(st, 201);
    }
    let claim = json!({"max": 1, "wait_ms": 20_000});
    let mut waiting = Vec::new();
    for _ in 0..2 {
        let (http, url) = (http.clone(), svc.url("/v1/topics/orders-q/claim"));
        let claim = claim.clone();
        waiting.push(tokio::spawn(async move {
            http.post(url)
                .bearer_auth("orders-secret")
                .json(&claim)
                .send()
                .await
        }));
    }
    // The two are waiting once the instance counts them.
    common::runtime::until(10, "two long polls wait", || async {
        let m = svc.get_text(&http, "/metrics").await;
        m.contains("toc_long_polls_waiting 2")
    })
    .await;
    let (st, body) = call(
        &http,
        &svc,
        "orders-secret",
        Method::POST,
        "/v1/topics/orders-q/claim",
        Some(claim),
    )
    .await;
    assert_eq!(st, 429, "{body}");
    assert!(
        body.to_string()
            .contains("limits.max_long_polls_per_tenant"),
        "{body}"
    );
    let (st, body) = call(
        &http,
        &svc,
        "billing-secret",
        Method::POST,
        "/v1/topics/billing-q/claim",
        Some(json!({"max": 1, "wait_ms": 100})),
    )
    .await;
    assert_eq!(st, 200, "the other team's long poll: {body}");
    for w in waiting {
        w.abort();
    }
}

async fn a_teams_hanging_webhooks_hold_only_its_share(redis: Option<RedisServer>) {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let svc = service(
        &redis,
        dir.path(),
        &[
            ("TOC_WEBHOOKS_MAX_IN_FLIGHT", "8"),
            ("TOC_WEBHOOKS_MAX_IN_FLIGHT_PER_TENANT", "4"),
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let tarpit = Receiver::slow(Duration::from_secs(30));
    let fast = Receiver::start();
    // 12 topics of orders*, 16 keys each, every call held by the tarpit.
    for t in 0..12 {
        for k in 0..16 {
            let body = json!({"type": "webhook", "delay_ms": 0, "flow_key": format!("k{k}"),
                "payload": {"url": tarpit.url(), "body": {"id": format!("o{t}-{k}")}}});
            let (st, b) = call(
                &http,
                &svc,
                "orders-secret",
                Method::PUT,
                &format!("/v1/topics/orders-{t}/jobs/h{k}"),
                Some(body),
            )
            .await;
            assert_eq!(st, 201, "{b}");
        }
    }
    common::runtime::until(10, "the tarpit holds the team's calls", || async {
        tarpit.most_at_once() >= 4
    })
    .await;
    let due = common::now_ms() + 2_000;
    let body = json!({"type": "webhook", "fire_at": due, "payload": {"url": fast.url(), "body": {"id": "b1"}}});
    let (st, b) = call(
        &http,
        &svc,
        "billing-secret",
        Method::PUT,
        "/v1/topics/billing-hooks/jobs/b1",
        Some(body),
    )
    .await;
    assert_eq!(st, 201, "{b}");
    let seen = fast.wait_for(1, Duration::from_secs(10)).await;
    let arrived_ms = seen
        .get("b1")
        .and_then(|a| a.first())
        .copied()
        .expect("billing's webhook arrived")
        / 1_000;
    assert!(
        arrived_ms - due < 1_000,
        "billing's webhook arrived {} ms after due",
        arrived_ms - due
    );
    assert!(
        tarpit.most_at_once() <= 4,
        "orders* held {} calls at once",
        tarpit.most_at_once()
    );
}

async fn jobs_and_bytes_are_counted_per_tenant(redis: Option<RedisServer>) {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(
        &redis,
        dir.path(),
        &[
            ("TOC_LIMITS_MAX_JOBS_PER_TENANT", "6"),
            ("TOC_LIMITS_MAX_BYTES_PER_TENANT", "3000"),
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let put = |token: &'static str, topic: String, id: String, payload: Value| {
        let (http, svc) = (&http, &svc);
        async move {
            call(
                http,
                svc,
                token,
                reqwest::Method::PUT,
                &format!("/v1/topics/{topic}/jobs/{id}"),
                Some(json!({"delay_ms": 3_600_000, "payload": payload})),
            )
            .await
        }
    };
    // Six jobs over three topics of its own: each topic far below any topic quota.
    for n in 0..6 {
        let (status, body) = put(
            "orders-secret",
            format!("orders-{}", n % 3),
            format!("j{n}"),
            Value::Null,
        )
        .await;
        assert_eq!(status, 201, "{n}: {body}");
    }
    // A seventh, in a fourth topic, is past the tenant's jobs.
    let (status, body) = put("orders-secret", "orders-9".into(), "j7".into(), Value::Null).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.to_string().contains("limits.max_jobs_per_tenant"),
        "{body}"
    );
    // A replacement adds nothing, and the other tenant still writes.
    let (status, body) = put("orders-secret", "orders-0".into(), "j0".into(), Value::Null).await;
    assert!(status == 200 || status == 201, "{body}");
    // Bytes: 2 jobs of 1,200 bytes fit in 3,000, a third does not, wherever it goes.
    let big = json!("x".repeat(1_200));
    for n in 0..2 {
        let (status, body) = put(
            "billing-secret",
            format!("billing-{n}"),
            "big".into(),
            big.clone(),
        )
        .await;
        assert_eq!(status, 201, "{n}: {body}");
    }
    let (status, body) = put("billing-secret", "billing-2".into(), "big".into(), big).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.to_string().contains("limits.max_bytes_per_tenant"),
        "{body}"
    );
    let (status, body) = call(
        &http,
        &svc,
        "ops-secret",
        reqwest::Method::GET,
        "/v1/topics/orders-9",
        None,
    )
    .await;
    assert!(status == 404 || body["scheduled"] == 0, "{status} {body}");
}

#[tokio::test]
async fn memory_jobs_and_bytes_are_counted_per_tenant() {
    jobs_and_bytes_are_counted_per_tenant(None).await;
}

#[tokio::test]
async fn redis_jobs_and_bytes_are_counted_per_tenant() {
    jobs_and_bytes_are_counted_per_tenant(Some(RedisServer::start_for_process())).await;
}

#[tokio::test]
async fn memory_topics_are_counted_per_tenant() {
    topics_are_counted_per_tenant(None).await;
}

#[tokio::test]
async fn redis_topics_are_counted_per_tenant() {
    topics_are_counted_per_tenant(Some(RedisServer::start_for_process())).await;
}

#[tokio::test]
async fn memory_long_polls_are_counted_per_tenant() {
    long_polls_are_counted_per_tenant(None).await;
}

#[tokio::test]
async fn redis_long_polls_are_counted_per_tenant() {
    long_polls_are_counted_per_tenant(Some(RedisServer::start_for_process())).await;
}

#[tokio::test]
async fn memory_a_teams_hanging_webhooks_hold_only_its_share() {
    a_teams_hanging_webhooks_hold_only_its_share(None).await;
}

#[tokio::test]
async fn redis_a_teams_hanging_webhooks_hold_only_its_share() {
    a_teams_hanging_webhooks_hold_only_its_share(Some(RedisServer::start_for_process())).await;
}

/// Flow keys a caller cannot multiply past its share: with the slot's waiting room at 20
/// and 5 a key, 6 keys of 10 jobs each whose receiver hangs fill it; another key's job due a
/// second later still fires within a second of due (before: the full room stopped the slot's
/// pump, and it waited 61 s). Both engines.
async fn many_full_keys_do_not_hold_back_a_key_with_room(redis: Option<RedisServer>) {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let svc = service(
        &redis,
        dir.path(),
        &[
            ("TOC_RUNTIME_FLOW_MAX_WAITING", "20"),
            ("TOC_RUNTIME_FLOW_MAX_WAITING_PER_KEY", "5"),
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let (st, b) = call(
        &http,
        &svc,
        "ops-secret",
        Method::PUT,
        "/v1/topics/orders-keys",
        Some(json!({"slots": 1, "flow": {"parallelism": 1}})),
    )
    .await;
    assert_eq!(st, 201, "{b}");
    let tarpit = Receiver::slow(Duration::from_secs(20));
    let fast = Receiver::start();
    let mut resets = Vec::new();
    for k in 0..6 {
        for i in 0..10 {
            let id = format!("k{k}-{i}");
            let body = json!({"type": "webhook", "delay_ms": 3_600_000, "flow_key": format!("k{k}"),
                "payload": {"url": tarpit.url(), "body": {"id": id}}});
            let (st, b) = call(
                &http,
                &svc,
                "orders-secret",
                Method::PUT,
                &format!("/v1/topics/orders-keys/jobs/{id}"),
                Some(body),
            )
            .await;
            assert_eq!(st, 201, "{b}");
            resets.push(json!({"id": id, "delay_ms": 0}));
        }
    }
    let (st, b) = call(
        &http,
        &svc,
        "orders-secret",
        Method::POST,
        "/v1/topics/orders-keys/resets",
        Some(json!({"resets": resets})),
    )
    .await;
    assert_eq!(st, 200, "{b}");
    common::runtime::until(10, "each key holds its one call", || async {
        tarpit.most_at_once() >= 6
    })
    .await;
    let due = common::now_ms() + 1_000;
    let body = json!({"type": "webhook", "fire_at": due, "flow_key": "calm",
        "payload": {"url": fast.url(), "body": {"id": "calm"}}});
    let (st, b) = call(
        &http,
        &svc,
        "orders-secret",
        Method::PUT,
        "/v1/topics/orders-keys/jobs/calm",
        Some(body),
    )
    .await;
    assert_eq!(st, 201, "{b}");
    let seen = fast.wait_for(1, Duration::from_secs(10)).await;
    let arrived_ms = seen
        .get("calm")
        .and_then(|a| a.first())
        .copied()
        .expect("the calm key's job arrived")
        / 1_000;
    assert!(
        arrived_ms - due < 1_000,
        "the calm key's job arrived {} ms after due",
        arrived_ms - due
    );
}

#[tokio::test]
async fn memory_many_full_keys_do_not_hold_back_a_key_with_room() {
    many_full_keys_do_not_hold_back_a_key_with_room(None).await;
}

#[tokio::test]
async fn redis_many_full_keys_do_not_hold_back_a_key_with_room() {
    many_full_keys_do_not_hold_back_a_key_with_room(Some(RedisServer::start_for_process())).await;
}

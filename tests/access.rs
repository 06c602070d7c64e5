//! Scoped tokens against the real HTTP server: each scope allowed and refused on its routes
//! (403 naming what it lacks), a token limited to a topic pattern, `/v1/token` saying what a
//! token may do, `/health` without a token answering a summary that names neither the host
//! nor the topics, and with auth off a `Host` of another name refused (DNS rebinding).

mod common;

use reqwest::Method;
use serde_json::{Value, json};

use common::RedisServer;
use common::service::Service;

/// `method path` with `token` (none when empty): the status and the JSON body.
async fn call(
    s: &Service,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = s.http.request(method, s.url(path));
    if !token.is_empty() {
        req = req.bearer_auth(token);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

#[actix_rt::test]
async fn each_scope_is_allowed_and_refused_on_its_routes() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |c| {
        c.tokens = vec![
            "adm1n".into(),
            "v1ew:read".into(),
            "wr1te:write".into(),
            "ord:write:orders*".into(),
        ];
    })
    .await;
    let job = || Some(json!({"delay_ms": 60_000}));
    // admin: everything.
    assert_eq!(
        call(
            &s,
            "adm1n",
            Method::PUT,
            "/v1/topics/orders",
            Some(json!({"slots": 2}))
        )
        .await
        .0,
        201
    );
    assert_eq!(
        call(&s, "adm1n", Method::PUT, "/v1/topics/billing/jobs/b", job())
            .await
            .0,
        201
    );
    // read: GET routes only.
    for path in [
        "/v1/topics",
        "/v1/topics/orders",
        "/v1/topics/billing/jobs/b",
        "/v1/topics/orders/dead",
        "/v1/topics/orders/events",
    ] {
        assert_eq!(
            call(&s, "v1ew", Method::GET, path, None).await.0,
            200,
            "read may GET {path}"
        );
    }
    for (method, path, need) in [
        (Method::PUT, "/v1/topics/orders/jobs/a", "write"),
        (Method::DELETE, "/v1/topics/billing/jobs/b", "write"),
        (Method::POST, "/v1/topics/orders/claim", "write"),
        (Method::PUT, "/v1/topics/orders", "admin"),
        // A write token of the tenant that made it may delete a topic (tests/tenants.rs):
        // a read token is refused as for any write.
        (Method::DELETE, "/v1/topics/orders", "write"),
    ] {
        let (st, body) = call(&s, "v1ew", method.clone(), path, job()).await;
        let msg = body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert_eq!(
            (st, body["error"]["code"].as_str()),
            (403, Some("forbidden")),
            "read: {method} {path}"
        );
        assert!(
            msg.contains("scope is read") && msg.contains(&format!("needs {need}")),
            "{msg}"
        );
    }
    // write: jobs, not topic settings nor dead letters' changes.
    assert_eq!(
        call(&s, "wr1te", Method::PUT, "/v1/topics/orders/jobs/a", job())
            .await
            .0,
        201
    );
    assert_eq!(
        call(&s, "wr1te", Method::GET, "/v1/topics/orders/jobs/a", None)
            .await
            .0,
        200
    );
    assert_eq!(
        call(
            &s,
            "wr1te",
            Method::DELETE,
            "/v1/topics/orders/jobs/a",
            None
        )
        .await
        .0,
        204
    );
    let (st, body) = call(
        &s,
        "wr1te",
        Method::PUT,
        "/v1/topics/orders",
        Some(json!({"slots": 2})),
    )
    .await;
    assert!(
        st == 403
            && body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("needs admin")
    );
    assert_eq!(
        call(
            &s,
            "wr1te",
            Method::POST,
            "/v1/topics/orders/dead/x/requeue",
            None
        )
        .await
        .0,
        403
    );
    // A pattern: its topics only, and no list of every topic.
    assert_eq!(
        call(&s, "ord", Method::PUT, "/v1/topics/orders-eu/jobs/a", job())
            .await
            .0,
        201
    );
    let (st, body) = call(&s, "ord", Method::PUT, "/v1/topics/billing/jobs/a", job()).await;
    assert!(
        st == 403
            && body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("matching orders*"),
        "{body}"
    );
    assert_eq!(
        call(&s, "ord", Method::GET, "/v1/topics/billing/jobs/b", None)
            .await
            .0,
        403
    );
    assert_eq!(
        call(&s, "ord", Method::GET, "/v1/topics", None).await.0,
        403
    );
    // What a token may do.
    let (st, me) = call(&s, "ord", Method::GET, "/v1/token", None).await;
    assert_eq!(
        (st, me),
        (
            200,
            json!({"auth": true, "scope": "write", "topics": "orders*"})
        )
    );
    let (_, me) = call(&s, "v1ew", Method::GET, "/v1/token", None).await;
    assert_eq!(me["scope"], "read");
    // No token, a wrong one, one of another length, a scope written as a token: 401.
    for t in ["", "nope", "adm1nadm1nadm1nadm1n", "v1ew:read"] {
        assert_eq!(
            call(&s, t, Method::GET, "/v1/topics", None).await.0,
            401,
            "{t:?}"
        );
    }
    // /health: a summary without a token, the detail with one.
    let (st, summary) = call(&s, "", Method::GET, "/health", None).await;
    assert_eq!(st, 200);
    assert!(
        summary.get("instance").is_none() && summary["slots"].is_u64(),
        "{summary}"
    );
    assert!(
        !summary.to_string().contains("orders"),
        "no topic named: {summary}"
    );
    let (_, detail) = call(&s, "v1ew", Method::GET, "/health", None).await;
    assert!(
        detail["instance"].is_string() && detail["slots"].is_u64(),
        "{detail}"
    );
    // The per-slot detail is paged at /v1/slots, only the topics a token may see.
    let (st, all) = call(&s, "v1ew", Method::GET, "/v1/slots", None).await;
    assert_eq!(st, 200);
    let topics = |page: &Value| -> std::collections::BTreeSet<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["topic"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(topics(&all).contains("billing"), "{all}");
    let (_, mine) = call(&s, "ord", Method::GET, "/v1/slots", None).await;
    assert!(
        !topics(&mine).is_empty() && topics(&mine).iter().all(|t| t.starts_with("orders")),
        "{mine}"
    );
    let (_, page) = call(&s, "v1ew", Method::GET, "/v1/slots?limit=3", None).await;
    assert_eq!(page["items"].as_array().unwrap().len(), 3);
    let next = page["next"].as_str().unwrap().to_string();
    let (_, rest) = call(
        &s,
        "v1ew",
        Method::GET,
        &format!("/v1/slots?after={next}&limit=1000"),
        None,
    )
    .await;
    assert_eq!(
        3 + rest["items"].as_array().unwrap().len(),
        all["items"].as_array().unwrap().len(),
        "two pages hold every slot"
    );
    assert_eq!(call(&s, "", Method::GET, "/livez", None).await.0, 200);
    assert_eq!(call(&s, "", Method::GET, "/readyz", None).await.0, 200);
}

#[actix_rt::test]
async fn with_auth_off_a_rebinding_host_is_refused() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |c| {
        c.http.allowed_hosts = vec!["toc.internal".into()]
    })
    .await;
    let port = s.addr.port();
    let with_host = |host: String| {
        let req = s.http.get(s.url("/v1/topics")).header("host", host);
        async move { req.send().await.unwrap().status().as_u16() }
    };
    for host in [
        format!("evil.example:{port}"),
        "attacker.test".into(),
        format!("localhost.evil.example:{port}"),
    ] {
        assert_eq!(with_host(host.clone()).await, 403, "{host}");
    }
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        format!("toc.internal:{port}"),
        "TOC.INTERNAL".into(),
    ] {
        assert_eq!(with_host(host.clone()).await, 200, "{host}");
    }
    let (st, body) = {
        let res = s
            .http
            .get(s.url("/v1/topics"))
            .header("host", "evil.example")
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json::<Value>().await.unwrap())
    };
    assert_eq!(st, 403);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("http.allowed_hosts")
    );
}

/// The secrets a webhook payload carries, none of which a `read` token may see.
const SECRETS: &[&str] = &["pa55", "T0s3cret", "k3y", "Bearer-s3cret"];

/// A `read` token reads a webhook job, the job list and the dead letters without the
/// payload's secrets (header values, the URL's userinfo, path and query); `last_error` names
/// the URL by its origin only; a `write` token reads the payload whole. Both engines.
async fn a_read_token_sees_no_secret_of_a_payload(engine: &str) {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |c| {
        if engine == "memory" {
            c.store = timeout_center::config::StoreKind::Memory;
        }
        c.tokens = vec!["adm1n".into(), "v1ew:read".into(), "wr1te:write".into()];
    })
    .await;
    let payload = json!({
        "url": "http://user:pa55@localhost:1/hooks/T0s3cret?token=k3y",
        "headers": {"Authorization": "Bearer-s3cret"},
        "body": {"order": 7},
    });
    for (id, delay) in [("later", 3_600_000), ("now", 0)] {
        let (st, _) = call(
            &s,
            "wr1te",
            Method::PUT,
            &format!("/v1/topics/hooks/jobs/{id}"),
            Some(json!({"type": "webhook", "payload": payload, "delay_ms": delay})),
        )
        .await;
        assert_eq!(st, 201);
    }
    // `localhost` is refused by the egress policy when the job fires: a dead letter at once.
    let dead = crate::common::runtime::eventually(10, || async {
        let (_, page) = call(&s, "v1ew", Method::GET, "/v1/topics/hooks/dead", None).await;
        match page["items"].as_array().map(Vec::len) {
            Some(1) => Ok(page),
            _ => Err(format!("no dead letter yet: {page}")),
        }
    })
    .await;
    let (_, job) = call(&s, "v1ew", Method::GET, "/v1/topics/hooks/jobs/later", None).await;
    let (_, list) = call(&s, "v1ew", Method::GET, "/v1/topics/hooks/jobs", None).await;
    let (_, events) = call(&s, "v1ew", Method::GET, "/v1/topics/hooks/events", None).await;
    for (what, seen) in [
        ("job", &job),
        ("list", &list),
        ("dead", &dead),
        ("events", &events),
    ] {
        let text = seen.to_string();
        for secret in SECRETS {
            assert!(
                !text.contains(secret),
                "{what} shows {secret:?} to read: {text}"
            );
        }
    }
    assert_eq!(
        job["payload"],
        json!({"url": "http://localhost:1/***", "headers": {"Authorization": "***"}, "body": {"order": 7}})
    );
    assert_eq!(list["items"][0]["payload"], job["payload"]);
    let last_error = dead["items"][0]["last_error"].as_str().unwrap_or_default();
    assert!(
        last_error.contains("http://localhost:1"),
        "the origin is named: {last_error}"
    );
    // A writer, who may schedule such calls, reads them whole.
    let (_, whole) = call(
        &s,
        "wr1te",
        Method::GET,
        "/v1/topics/hooks/jobs/later",
        None,
    )
    .await;
    assert_eq!(whole["payload"], payload);
    let (_, whole) = call(&s, "adm1n", Method::GET, "/v1/topics/hooks/dead", None).await;
    assert_eq!(whole["items"][0]["payload"], payload);
}

#[actix_rt::test]
async fn a_read_token_sees_no_secret_on_redis() {
    a_read_token_sees_no_secret_of_a_payload("redis").await;
}

#[actix_rt::test]
async fn a_read_token_sees_no_secret_on_memory() {
    a_read_token_sees_no_secret_of_a_payload("memory").await;
}

/// With auth off, a request that changes state from another site's page (its `Origin` or
/// `Sec-Fetch-Site` says so) is refused on every such route, and changes nothing; the same
/// origin, a client that is no browser, and reads are served.
#[actix_rt::test]
async fn with_auth_off_another_sites_page_cannot_change_state() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |_| {}).await;
    let port = s.addr.port();
    let (st, _) = s
        .send(
            Method::PUT,
            "/v1/topics/t/jobs/a",
            Some(json!({"delay_ms": 60_000})),
        )
        .await;
    assert_eq!(st, 201);
    let with = |method: Method, path: &str, header: (&'static str, String)| {
        let req = s
            .http
            .request(method, s.url(path))
            .header(header.0, header.1)
            .json(&json!({}));
        async move { req.send().await.unwrap().status().as_u16() }
    };
    for (method, path) in [
        (Method::POST, "/v1/topics/t/jobs/a/trigger"),
        (Method::POST, "/v1/topics/t/dead/requeue?label=a:b"),
        (Method::DELETE, "/v1/topics/t/jobs/a"),
        (Method::PUT, "/v1/topics/t"),
    ] {
        for header in [
            ("origin", "http://evil.example".to_string()),
            ("origin", format!("http://localhost:{}", port + 1)),
            ("origin", "null".to_string()),
            ("sec-fetch-site", "cross-site".to_string()),
            ("sec-fetch-site", "same-site".to_string()),
        ] {
            assert_eq!(
                with(method.clone(), path, header.clone()).await,
                403,
                "{method} {path} {header:?}"
            );
        }
    }
    let (_, job) = s.send(Method::GET, "/v1/topics/t/jobs/a", None).await;
    assert_eq!(job["state"], "scheduled", "nothing changed: {job}");
    assert_eq!(
        with(
            Method::GET,
            "/v1/topics/t/jobs/a",
            ("origin", "http://evil.example".into())
        )
        .await,
        200,
        "a read is served (CORS keeps its answer from the page)"
    );
    assert_eq!(
        with(
            Method::POST,
            "/v1/topics/t/jobs/a/reset",
            ("origin", format!("http://127.0.0.1:{port}"))
        )
        .await,
        400,
        "the same origin is served (here: a reset with no time, 400)"
    );
    assert_eq!(
        with(
            Method::DELETE,
            "/v1/topics/t/jobs/a",
            ("sec-fetch-site", "same-origin".into())
        )
        .await,
        204
    );
}

/// `/health` is a summary of bounded size in every mode: with 16,384 slots (four topics of
/// 4,096, the most `limits.max_total_slots` allows), with auth off (the most it says), it
/// stays under 8 KB; it was 2.6 MB when it listed every slot. `/v1/slots` pages them.
#[actix_rt::test]
async fn health_stays_small_with_16384_slots() {
    let redis = RedisServer::start();
    let s = Service::start(&redis, |c| {
        c.store = timeout_center::config::StoreKind::Memory;
    })
    .await;
    for t in 0..4 {
        let (st, body) = s
            .send(
                Method::PUT,
                &format!("/v1/topics/wide{t}"),
                Some(json!({"slots": 4096})),
            )
            .await;
        assert_eq!(st, 201, "{body}");
    }
    let served = crate::common::runtime::eventually(60, || async {
        let (_, h) = s.send(Method::GET, "/health", None).await;
        match h["slots"].as_u64() {
            Some(16_384) => Ok(h),
            n => Err(format!("{n:?} slots served")),
        }
    })
    .await;
    let bytes = served.to_string().len();
    println!("/health with 16,384 slots: {bytes} bytes");
    assert!(bytes < 8 * 1024, "/health is {bytes} bytes: {served}");
    let (_, page) = s.send(Method::GET, "/v1/slots?limit=1000", None).await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1_000);
    assert_eq!(page["next"], "wide0/999");
}

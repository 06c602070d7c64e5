//! The `webhook` job type against a real receiver on loopback, on both engines: the egress
//! policy (every spelling of a local address refused by default and accepted once allowed, a
//! host name resolving to loopback refused at the call), redirects (not followed; followed
//! with each hop checked when allowed), signed calls with a `webhook-id` stable across a
//! fire's retries, `Retry-After` and 410 steering the retries, and no secret of a URL or a
//! header in `last_error` or the events. The signatures are checked against the
//! `standardwebhooks` package itself by `scripts/webhooks.sh`, through a key rotation.
//!
//! What this cannot prove: a name that resolves to a private address other than loopback (no
//! DNS server of ours answers here), or a call through a real egress proxy.

#[macro_use]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use serde_json::json;
use timeout_center::jobs::webhook::settings::Net;
use timeout_center::jobs::webhook::signing::SigningKey;
use timeout_center::time::now_ms;
use timeout_center::*;

use common::Engine;
use common::runtime::settings;

/// One call as the receiver saw it.
#[derive(Debug, Clone)]
struct Call {
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
    at: Instant,
}

/// A receiver on 127.0.0.1 (and on ::1 where the host has it) that records every call.
struct Receiver {
    v4: u16,
    v6: Option<u16>,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl Receiver {
    async fn start() -> Receiver {
        let calls = Arc::new(Mutex::new(Vec::<Call>::new()));
        let counts = Arc::new(Mutex::new(HashMap::<String, u32>::new()));
        let (c, n) = (calls.clone(), counts.clone());
        let server = HttpServer::new(move || {
            let (c, n) = (c.clone(), n.clone());
            App::new().default_service(web::to(move |req: HttpRequest, body: web::Bytes| {
                let (c, n) = (c.clone(), n.clone());
                async move { answer(&req, body, &c, &n) }
            }))
        })
        .workers(1)
        .bind(("127.0.0.1", 0))
        .unwrap();
        let v4 = server.addrs()[0].port();
        let server = server.bind(("::1", 0));
        let (server, v6) = match server {
            Ok(s) => {
                let v6 = s.addrs().iter().find(|a| a.is_ipv6()).map(|a| a.port());
                (s, v6)
            }
            Err(e) => panic!("cannot bind the receiver on ::1: {e}"),
        };
        actix_rt::spawn(server.run());
        Receiver { v4, v6, calls }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.v4)
    }

    /// The calls that carried `job` in `x-toc-job-id`.
    fn calls_of(&self, job: &str) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.headers.get("x-toc-job-id").map(String::as_str) == Some(job))
            .cloned()
            .collect()
    }

    fn paths(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|c| c.path.clone())
            .collect()
    }
}

/// `/ok` 200; `/gone` 410; `/busy` 503 with `Retry-After: 2`, then 200; `/flaky` 500, then
/// 200; `/redirect?to=URL` 302 to URL; `/echo` 400 with the request's authorization and URI
/// in its body; anything else 404 with a body.
fn answer(
    req: &HttpRequest,
    body: web::Bytes,
    calls: &Mutex<Vec<Call>>,
    counts: &Mutex<HashMap<String, u32>>,
) -> HttpResponse {
    let path = req.path().to_string();
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    calls.lock().unwrap().push(Call {
        path: path.clone(),
        headers,
        body: body.to_vec(),
        at: Instant::now(),
    });
    let job = req
        .headers()
        .get("x-toc-job-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let nth = {
        let mut counts = counts.lock().unwrap();
        let n = counts.entry(format!("{job}{path}")).or_insert(0);
        *n += 1;
        *n
    };
    match path.as_str() {
        "/ok" => HttpResponse::Ok().finish(),
        "/gone" => HttpResponse::Gone().finish(),
        "/busy" if nth == 1 => HttpResponse::ServiceUnavailable()
            .insert_header(("retry-after", "2"))
            .finish(),
        "/flaky" if nth == 1 => HttpResponse::InternalServerError().finish(),
        "/busy" | "/flaky" => HttpResponse::Ok().finish(),
        "/redirect" => {
            let to = req
                .query_string()
                .strip_prefix("to=")
                .unwrap_or("/ok")
                .to_string();
            HttpResponse::Found()
                .insert_header(("location", to))
                .finish()
        }
        // A receiver that echoes the request in its refusal (as many frameworks do).
        "/echo" => HttpResponse::BadRequest().body(format!(
            "denied: authorization {} for {}",
            req.headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or(""),
            req.uri()
        )),
        // A megabyte of failure: at most a few KiB are read, 200 characters kept.
        "/huge" => HttpResponse::BadRequest().body("e".repeat(1 << 20)),
        _ => HttpResponse::NotFound().body("no such hook here"),
    }
}

async fn center(e: &Engine, webhooks: WebhookSettings) -> TimeoutCenter {
    let c = TimeoutCenter::builder(e.store.clone())
        .settings(settings(1_000))
        .webhooks(webhooks)
        .start()
        .await
        .unwrap();
    let mut t = TopicConfig::named("hooks");
    t.slots = 2;
    t.max_attempts = 3;
    t.backoff.base_ms = 20;
    t.backoff.max_ms = 5_000;
    t.default_type = "webhook".into();
    c.put_topic(t).await.unwrap();
    c
}

fn loopback() -> WebhookSettings {
    WebhookSettings::allowing_loopback()
}

async fn schedule(c: &TimeoutCenter, id: &str, payload: serde_json::Value) -> Result<Scheduled> {
    let job = NewJob::new(id, now_ms())
        .job_type("webhook")
        .payload(payload);
    c.schedule("hooks", job, ScheduleMode::Upsert).await
}

/// Waits until job `id` is gone (done) or dead; its last state (`None`: done).
async fn settled(c: &TimeoutCenter, id: &str, secs: u64) -> Option<Job> {
    crate::common::runtime::eventually(secs, || async {
        let job = c.get("hooks", &id.into()).await.unwrap();
        match &job {
            None => Ok(None),
            Some(j) if j.state == JobState::Dead => Ok(job),
            _ => Err(format!("{id} not settled: {job:?}")),
        }
    })
    .await
}

/// The literal spellings of loopback a caller might try, and the receiver's URL in each.
fn spellings(r: &Receiver) -> Vec<(&'static str, String)> {
    let p = r.v4;
    let mut s = vec![
        ("dotted", format!("http://127.0.0.1:{p}/ok")),
        ("decimal", format!("http://2130706433:{p}/ok")),
        ("hex", format!("http://0x7f000001:{p}/ok")),
        ("hex-dotted", format!("http://0x7f.0.0.1:{p}/ok")),
        ("octal", format!("http://0177.0.0.1:{p}/ok")),
        ("short", format!("http://127.1:{p}/ok")),
        ("mapped", format!("http://[::ffff:127.0.0.1]:{p}/ok")),
        ("mapped-hex", format!("http://[::ffff:7f00:1]:{p}/ok")),
    ];
    if let Some(p6) = r.v6 {
        s.push(("ipv6", format!("http://[::1]:{p6}/ok")));
    }
    s
}

async fn every_spelling_of_loopback_is_refused_by_default(e: Engine) {
    let r = Receiver::start().await;
    let c = center(&e, WebhookSettings::default()).await;
    for (name, url) in spellings(&r) {
        let err = schedule(&c, name, json!({"url": url})).await.unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(
                err,
                Error::Unprocessable {
                    field: "payload",
                    ..
                }
            ) && text.contains("payload.url: the egress policy refused"),
            "{name} ({url}): {text}"
        );
        assert!(
            c.get("hooks", &name.into()).await.unwrap().is_none(),
            "{name}: nothing stored"
        );
    }
    // Other schemes never get in; the error names the field.
    let err = schedule(&c, "file", json!({"url": "file:///etc/passwd"}))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Invalid {
                field: "payload",
                ..
            }
        ) && err.to_string().contains("payload.url"),
        "{err}"
    );
    // The metadata service, both families.
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
    ] {
        let err = schedule(&c, "meta", json!({"url": url})).await.unwrap_err();
        assert!(err.to_string().contains("egress policy"), "{url}: {err}");
    }
    // A host name is checked once resolved, at the call: localhost is refused there, and the
    // job is dead at once (one attempt of three), the receiver never called.
    let url = format!("http://localhost:{}/ok", r.v4);
    schedule(&c, "name", json!({"url": url})).await.unwrap();
    let dead = settled(&c, "name", 10).await.expect("dead");
    assert_eq!(dead.attempts, 1, "not retried");
    let error = dead.last_error.unwrap();
    assert!(
        error.contains("the egress policy refused the address of localhost"),
        "{error}"
    );
    assert!(
        r.paths().is_empty(),
        "nothing reached the receiver: {:?}",
        r.paths()
    );
}

async fn every_spelling_is_called_once_loopback_is_allowed(e: Engine) {
    let r = Receiver::start().await;
    let c = center(&e, loopback()).await;
    let mut all = spellings(&r);
    all.push(("name", format!("http://localhost:{}/ok", r.v4)));
    for (name, url) in &all {
        schedule(&c, name, json!({"url": url})).await.unwrap();
    }
    for (name, url) in &all {
        assert!(settled(&c, name, 10).await.is_none(), "{name} ({url}) done");
        assert_eq!(r.calls_of(name).len(), 1, "{name} ({url}) called once");
    }
    // deny_nets wins over allow_nets.
    let mut denied = loopback();
    denied.deny_nets = vec![Net::try_from("127.0.0.0/8".to_string()).unwrap()];
    let c2 = TimeoutCenter::builder(e.store.clone())
        .webhooks(denied)
        .start()
        .await
        .unwrap();
    let err = schedule(&c2, "denied", json!({"url": r.url("/ok")}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("egress policy"), "{err}");
}

async fn redirects_are_not_followed_unless_allowed_each_hop_checked(e: Engine) {
    let r = Receiver::start().await;
    let to_ok = format!("{}?to={}", r.url("/redirect"), r.url("/ok"));
    let c = center(&e, loopback()).await;
    schedule(&c, "r0", json!({"url": to_ok})).await.unwrap();
    let dead = settled(&c, "r0", 10).await.expect("a 3xx is a failure");
    let error = dead.last_error.unwrap();
    assert!(
        error.contains("302") && error.contains("max_redirects"),
        "{error}"
    );
    assert_eq!(dead.attempts, 1);
    assert_eq!(r.paths(), ["/redirect"], "the redirect was not followed");

    // One center at a time on the store: the next one owns the slots.
    c.shutdown(Duration::from_secs(1)).await;
    let mut follow = loopback();
    follow.max_redirects = 2;
    // Only 127.0.0.0/8: a hop to [::1] or to the metadata address is refused.
    follow.allow_nets.truncate(1);
    let c = center(&e, follow).await;
    schedule(&c, "r1", json!({"url": to_ok})).await.unwrap();
    assert!(settled(&c, "r1", 10).await.is_none(), "followed to /ok");
    assert_eq!(
        r.calls_of("r1")
            .iter()
            .map(|c| c.path.as_str())
            .collect::<Vec<_>>(),
        ["/redirect", "/ok"]
    );
    let to_metadata = format!("{}?to=http://169.254.169.254/latest/", r.url("/redirect"));
    schedule(&c, "r2", json!({"url": to_metadata}))
        .await
        .unwrap();
    let dead = settled(&c, "r2", 10).await.expect("a hop refused");
    let error = dead.last_error.unwrap();
    assert!(error.contains("egress policy refused"), "{error}");
    assert_eq!(dead.attempts, 1, "a refused hop is not retried");
    c.shutdown(Duration::from_secs(1)).await;

    // A hop to another origin (`localhost` is another host than 127.0.0.1) carries the
    // method and the body, and nothing of the job's: no header of its own, no signature,
    // no `x-toc-*`, no `Referer`.
    let mut signed = loopback();
    signed.max_redirects = 2;
    signed.signing_keys =
        vec![SigningKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap()];
    let c = center(&e, signed).await;
    let elsewhere = format!("{}?to=http://localhost:{}/ok", r.url("/redirect"), r.v4);
    schedule(
        &c,
        "r3",
        json!({"url": elsewhere, "method": "PUT", "headers": {"authorization": "Bearer s3cret"},
               "body": {"order": 7}}),
    )
    .await
    .unwrap();
    assert!(settled(&c, "r3", 10).await.is_none(), "followed to /ok");
    let first = r.calls_of("r3");
    assert_eq!(first.len(), 1, "the first call is the job's own");
    assert_eq!(first[0].headers["authorization"], "Bearer s3cret");
    assert!(first[0].headers.contains_key("webhook-signature"));
    let hop = r
        .calls
        .lock()
        .unwrap()
        .iter()
        .rfind(|c| {
            c.path == "/ok"
                && c.headers
                    .get("host")
                    .is_some_and(|h| h.starts_with("localhost"))
        })
        .cloned()
        .expect("the hop to another origin was made");
    for secret in [
        "authorization",
        "webhook-signature",
        "webhook-id",
        "x-toc-job-id",
        "referer",
    ] {
        assert!(
            !hop.headers.contains_key(secret),
            "{secret} went to another origin: {:?}",
            hop.headers
        );
    }
    assert_eq!(
        hop.body, br#"{"order":7}"#,
        "a 302 after a PUT keeps the method and body"
    );
}

async fn retry_after_is_respected_and_410_stops(e: Engine) {
    let r = Receiver::start().await;
    let c = center(&e, loopback()).await;
    schedule(&c, "busy", json!({"url": r.url("/busy")}))
        .await
        .unwrap();
    schedule(&c, "gone", json!({"url": r.url("/gone")}))
        .await
        .unwrap();
    assert!(
        settled(&c, "busy", 15).await.is_none(),
        "done on the second call"
    );
    let calls = r.calls_of("busy");
    assert_eq!(calls.len(), 2);
    let waited = calls[1].at - calls[0].at;
    // The topic's backoff would retry after 20 ms; the receiver asked for 2 s.
    assert!(waited >= Duration::from_secs(2), "retried after {waited:?}");
    schedule(&c, "huge", json!({"url": r.url("/huge")}))
        .await
        .unwrap();
    let dead = settled(&c, "huge", 10).await.expect("400 is dead");
    let error = dead.last_error.unwrap();
    assert!(error.contains("400") && error.ends_with("eee…"), "{error}");
    assert!(error.len() < 400, "a short excerpt: {} bytes", error.len());
    let dead = settled(&c, "gone", 10).await.expect("410 is dead");
    assert_eq!(
        (dead.attempts, r.calls_of("gone").len()),
        (1, 1),
        "no retry after 410"
    );
    assert!(dead.last_error.unwrap().contains("410"));
}

async fn signed_calls_keep_their_id_across_a_fire_s_retries(e: Engine) {
    let r = Receiver::start().await;
    let old = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let new = "whsec_c2Vjb25kLWtleS1vZi10aGUtcm90YXRpb24=";
    let mut signed = loopback();
    signed.signing_keys = vec![
        SigningKey::parse(old).unwrap(),
        SigningKey::parse(new).unwrap(),
    ];
    let c = center(&e, signed).await;
    let fire_at = now_ms();
    let job = NewJob::new("s", fire_at)
        .job_type("webhook")
        .payload(json!({"url": r.url("/flaky"), "body": {"order": 7}}));
    c.schedule("hooks", job, ScheduleMode::Upsert)
        .await
        .unwrap();
    assert!(settled(&c, "s", 10).await.is_none());
    let calls = r.calls_of("s");
    assert_eq!(calls.len(), 2, "a 500, then a 200");
    let id = &calls[0].headers["webhook-id"];
    assert!(id.starts_with("msg_"));
    assert_eq!(
        &calls[1].headers["webhook-id"], id,
        "the same id for a fire's retries"
    );
    assert_eq!(calls[0].headers["x-toc-attempt"], "1");
    assert_eq!(calls[1].headers["x-toc-attempt"], "2");
    assert_eq!(calls[0].headers["x-toc-fire-at"], fire_at.to_string());
    for call in &calls {
        assert_eq!(call.body, br#"{"order":7}"#);
        let ts: i64 = call.headers["webhook-timestamp"].parse().unwrap();
        let sigs: Vec<&str> = call.headers["webhook-signature"].split(' ').collect();
        let topic_key = |k: &str, topic: &str| SigningKey::parse(k).unwrap().for_topic(topic);
        let expected = [old, new].map(|k| topic_key(k, "hooks").sign(id, ts, &call.body));
        assert_eq!(
            sigs, expected,
            "one v1 signature per key, derived for the topic"
        );
        for k in [old, new] {
            let other = topic_key(k, "billing").sign(id, ts, &call.body);
            let raw = SigningKey::parse(k).unwrap().sign(id, ts, &call.body);
            assert!(
                !sigs.contains(&other.as_str()) && !sigs.contains(&raw.as_str()),
                "neither another topic's key nor the service's own verifies it"
            );
        }
        assert!((ts - now_ms() / 1000).abs() < 60);
    }
    // Unsigned without keys: no signature headers.
    c.shutdown(Duration::from_secs(1)).await;
    let c = center(&e, loopback()).await;
    schedule(&c, "u", json!({"url": r.url("/ok")}))
        .await
        .unwrap();
    assert!(settled(&c, "u", 10).await.is_none());
    let h = &r.calls_of("u")[0].headers;
    assert!(!h.contains_key("webhook-signature") && !h.contains_key("webhook-id"));
}

async fn no_secret_of_a_url_or_header_reaches_errors_or_events(e: Engine) {
    let r = Receiver::start().await;
    let c = center(&e, loopback()).await;
    let url = format!(
        "http://user:pa55word@127.0.0.1:{}/missing?api_key=k3y",
        r.v4
    );
    let payload = json!({"url": url, "headers": {"authorization": "Bearer t0ken"}});
    schedule(&c, "secret", payload).await.unwrap();
    let dead = settled(&c, "secret", 10).await.expect("404 is dead");
    let error = dead.last_error.clone().unwrap();
    assert!(
        error.contains("404") && error.contains("no such hook here"),
        "{error}"
    );
    let call = &r.calls_of("secret")[0];
    assert_eq!(
        call.headers["authorization"], "Bearer t0ken",
        "sent to the receiver"
    );
    let events = c.events("hooks", None, 100).await.unwrap().items;
    let shown = format!("{error} {}", serde_json::to_string(&events).unwrap());
    assert!(shown.contains("webhook.called"), "{shown}");
    for secret in ["pa55word", "k3y", "t0ken", "user:"] {
        assert!(!shown.contains(secret), "{secret} shown: {shown}");
    }
    // A receiver that echoes the request in its refusal: the job's header values and URL
    // secrets are scrubbed from the reply kept in `last_error` (before, `Bearer …` was kept
    // there, where read tokens see it).
    let url = format!("http://127.0.0.1:{}/echo?api_key=k3y-in-the-query", r.v4);
    let payload = json!({"url": url, "headers": {"authorization": "Bearer t0ken-of-the-job"}});
    schedule(&c, "echoed", payload).await.unwrap();
    let dead = settled(&c, "echoed", 10).await.expect("400 is dead");
    let error = dead.last_error.unwrap();
    assert!(error.contains("denied: authorization ***"), "{error}");
    for secret in ["t0ken-of-the-job", "k3y-in-the-query"] {
        assert!(!error.contains(secret), "{secret} kept: {error}");
    }
}

engine_matrix!(
    #[actix_rt::test] crate::common::Engine::of;
    every_spelling_of_loopback_is_refused_by_default,
    every_spelling_is_called_once_loopback_is_allowed,
    redirects_are_not_followed_unless_allowed_each_hop_checked,
    retry_after_is_respected_and_410_stops,
    signed_calls_keep_their_id_across_a_fire_s_retries,
    no_secret_of_a_url_or_header_reaches_errors_or_events,
);

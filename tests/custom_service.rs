//! A service of the user's own (`examples/custom_service.rs`: `serve::Service` with a
//! `send_reminder` type) run as a process: its jobs are taken by `curl` and by `toc job put`,
//! reach its handler at their time (the handler's `reminder.sent` event, which nothing else
//! emits), are listed by `toc job ls`; `/openapi.json` describes its payload, and a payload
//! missing a field is refused 400 naming it.
//!
//! What it cannot show: the dashboard (scripts/ui.sh drives it in Chromium against `toc
//! serve`; the example serves the same pages from the same code).

#[macro_use]
mod common;

use std::path::PathBuf;

use serde_json::{Value, json};

use common::process::Toc;
use common::runtime::{eventually, until};

/// The example's binary, which `cargo test` builds beside the tests (`target/PROFILE/examples/`).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own executable");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("examples").join(name))
        .expect("the test executable sits in target/PROFILE/deps/");
    assert!(
        bin.is_file(),
        "{} is missing: `cargo test` builds the examples; a focused run needs `cargo build --examples` first",
        bin.display()
    );
    bin
}

use common::toc_cli as toc;

/// The `reminder.sent` events of `topic` so far, by job id, each with when its run began.
async fn sent(http: &reqwest::Client, svc: &Toc, topic: &str) -> Vec<(String, i64)> {
    svc.events(http, topic, "reminder.sent")
        .await
        .iter()
        .map(|e| {
            (
                e["job_id"].as_str().unwrap().to_string(),
                e["fired_at"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// The payload schemas `doc` selects for a job of type `name` (`if` its type is `name`,
/// `then` its payload is ...), wherever a body names them.
fn selections(doc: &Value, name: &str, out: &mut Vec<Value>) {
    match doc {
        Value::Object(map) => {
            if map.get("if").map(|c| &c["properties"]["type"]["const"]) == Some(&json!(name)) {
                out.push(map["then"]["properties"]["payload"].clone());
            }
            map.values().for_each(|v| selections(v, name, out));
        }
        Value::Array(items) => items.iter().for_each(|v| selections(v, name, out)),
        _ => {}
    }
}

#[tokio::test]
async fn a_type_of_the_users_own_is_served_whole() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Toc::start_program(&example("custom_service"), "custom", &[], dir.path()).await;
    let http = reqwest::Client::new();
    let base = svc.url("");

    // curl, as the example's doc comment shows it.
    let fire_at = common::now_ms() + 1_500;
    let body = json!({"type": "send_reminder", "fire_at": fire_at,
        "payload": {"user": "ada", "text": "stand-up"}});
    let out = std::process::Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT"])
        .arg(svc.url("/v1/topics/reminders/jobs/r-1"))
        .args(["-H", "content-type: application/json", "-d"])
        .arg(body.to_string())
        .output()
        .expect("curl runs (apt-get install -y curl)");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "201");

    // toc job put, and one far ahead for the listing.
    let put = |id: &str, span: &str, payload: &str| {
        let args = [
            "job",
            "put",
            "reminders",
            id,
            "--type",
            "send_reminder",
            "--in",
            span,
            "--payload",
            payload,
        ];
        let (ok, _, err) = toc(&base, &args);
        assert!(ok, "toc job put {id}: {err}");
    };
    let r2_before = common::now_ms();
    put("r-2", "1s", r#"{"user": "bob", "text": "review"}"#);
    put("later", "1h", r#"{"user": "cy", "text": "lunch"}"#);

    // Both reach the handler, not before their time.
    let seen = eventually(15, || async {
        let seen = sent(&http, &svc, "reminders").await;
        if seen.len() >= 2 {
            Ok(seen)
        } else {
            Err(format!("reminder.sent for {seen:?} only"))
        }
    })
    .await;
    let at = |id: &str| seen.iter().find(|(j, _)| j == id).map(|(_, at)| *at);
    let r1 = at("r-1").expect("r-1 reached the handler");
    let r2 = at("r-2").expect("r-2 reached the handler");
    assert!(r1 >= fire_at, "r-1 ran {} ms early", fire_at - r1);
    assert!(r2 >= r2_before + 1_000, "r-2 ran before its second");
    assert!(at("later").is_none(), "a job an hour ahead ran");

    // Listed by the CLI, with its type.
    let (ok, out, err) = toc(&base, &["job", "ls", "reminders"]);
    assert!(ok, "toc job ls: {err}");
    assert!(
        out.contains("later") && out.contains("send_reminder"),
        "{out}"
    );

    // Its payload in the API description.
    // (each job body's `type` selects its payload's schema: `if` the type is
    // send_reminder, `then` the payload is the type's own)
    let doc = svc.get_json(&http, "/openapi.json").await;
    let job_types = &doc["components"]["schemas"]["JobType"];
    assert!(
        job_types.to_string().contains("\"send_reminder\""),
        "JobType does not name it: {job_types}"
    );
    let own = json!({"type": "object", "required": ["user", "text"],
        "properties": {"user": {"type": "string"}, "text": {"type": "string"}}});
    let mut selected = Vec::new();
    selections(&doc, "send_reminder", &mut selected);
    assert!(
        !selected.is_empty() && selected.iter().all(|p| *p == own),
        "the bodies that name send_reminder do not all take its payload schema: {selected:?}"
    );

    // A payload missing a field: 400 naming it, nothing stored.
    let r = http
        .put(svc.url("/v1/topics/reminders/jobs/bad"))
        .json(&json!({"type": "send_reminder", "delay_ms": 1000, "payload": {"user": "dee"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let e: Value = r.json().await.unwrap();
    assert!(e.to_string().contains("payload.text"), "{e}");
    let r = http
        .get(svc.url("/v1/topics/reminders/jobs/bad"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
}

/// The `reminders` jobs' states as the service at `svc` lists them: (scheduled, dead).
async fn counts(http: &reqwest::Client, svc: &Toc) -> (u64, u64) {
    let t = svc.get_json(http, "/v1/topics/reminders").await;
    (
        t["scheduled"].as_u64().unwrap_or(0),
        t["dead"].as_u64().unwrap_or(0),
    )
}

/// A fleet on one Redis: a plain `toc serve` (built-in types only) started first, and the
/// custom service. The topic names `send_reminder`, so only the custom service takes its
/// slots, whichever instance took them before: every job runs there and none is buried.
/// With the custom service stopped, the jobs wait, the plain instance says the topic is
/// unserved (`/health`, `toc_topic_unserved`), and they fire once it is back.
///
/// What it cannot show: an instance of an older version, which announces no types (it is
/// taken to run none beyond the built-in ones, so it owns no slot of such a topic).
#[tokio::test]
async fn a_mixed_fleet_runs_each_job_where_its_type_is() {
    let redis = common::RedisServer::start_for_process();
    let dir = tempfile::tempdir().unwrap();
    let mut env = common::process::redis_env(redis.url());
    env.push(("TOC_RUNTIME_POLL_MS", "100".into()));
    env.push(("TOC_RUNTIME_OWNER_LEASE_MS", "1000".into()));
    let http = reqwest::Client::new();
    let plain = Toc::start("plain", &env, common::process::Skew::None, dir.path()).await;
    // The plain instance makes the topic (no types named yet) and owns all its slots.
    plain
        .put_topic(&http, "reminders", json!({"slots": 4}))
        .await;
    until(
        10,
        "the plain instance serves the topic's 4 slots",
        || async {
            common::process::served_slots(&http, &plain.url(""))
                .await
                .is_some_and(|s| s.iter().filter(|s| s["topic"] == "reminders").count() == 4)
        },
    )
    .await;
    let health = plain.get_json(&http, "/health").await;
    assert!(!health["types"].to_string().contains("send_reminder"));
    // It cannot take a job of a type it does not run that the topic does not name.
    let r = http
        .put(plain.url("/v1/topics/reminders/jobs/x"))
        .json(&json!({"type": "send_reminder", "delay_ms": 1000,
            "payload": {"user": "x", "text": "x"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().await.unwrap().contains("send_reminder"));

    let custom = Toc::start_program(&example("custom_service"), "custom", &env, dir.path()).await;
    let health = custom.get_json(&http, "/health").await;
    assert!(
        health["types"].to_string().contains("send_reminder"),
        "{health}"
    );
    // The first job of its type, through the custom service, names the type in the topic:
    // the plain instance hands every slot it held off.
    let due = common::now_ms() + 1_000;
    custom
        .put_job(
            &http,
            "reminders",
            "r-0",
            &json!({"type": "send_reminder", "fire_at": due,
                "payload": {"user": "u0", "text": "hello"}}),
        )
        .await;
    let topic = plain.get_json(&http, "/v1/topics/reminders").await;
    assert_eq!(topic["types"], json!(["send_reminder"]));
    // The rest through the plain instance, which now takes them: the topic names the type.
    for i in 1..20 {
        plain
            .put_job(
                &http,
                "reminders",
                &format!("r-{i}"),
                &json!({"type": "send_reminder", "fire_at": due + i,
                    "payload": {"user": format!("u{i}"), "text": "hello"}}),
            )
            .await;
    }
    let ran = eventually(20, || async {
        let seen = sent(&http, &custom, "reminders").await;
        if seen.len() >= 20 {
            Ok(seen)
        } else {
            Err(format!("{} of 20 ran", seen.len()))
        }
    })
    .await;
    assert_eq!(ran.len(), 20, "a job ran twice: {ran:?}");
    assert_eq!(counts(&http, &plain).await, (0, 0), "left or buried");
    assert!(plain.get_json(&http, "/health").await["unserved"] == json!([]));
    let held = common::process::served_slots(&http, &plain.url(""))
        .await
        .unwrap();
    assert!(
        held.iter().all(|s| s["topic"] != "reminders"),
        "the plain instance still serves slots of the topic: {held:?}"
    );

    // The custom service stops (SIGTERM: it hands its slots off and leaves the registry).
    common::process::signal(custom.pid(), "TERM");
    until(
        15,
        "the plain instance marks the topic unserved",
        || async { plain.get_json(&http, "/health").await["unserved"] == json!(["reminders"]) },
    )
    .await;
    let metrics = plain.get_text(&http, "/metrics").await;
    assert!(metrics.contains("toc_topic_unserved{topic=\"reminders\"} 1"));
    // The CLI says so too: what the instance runs, what waits, and the topic's types.
    let (ok, out, err) = toc(&plain.url(""), &["health"]);
    assert!(ok, "toc health: {err}");
    assert!(out.contains("unserved: reminders"), "{out}");
    assert!(out.contains("types   device_offline, emit"), "{out}");
    let (ok, out, err) = toc(&plain.url(""), &["topic", "ls"]);
    assert!(ok, "toc topic ls: {err}");
    assert!(out.contains("send_reminder"), "{out}");
    drop(custom);
    let due = common::now_ms() + 200;
    for i in 0..5 {
        plain
            .put_job(
                &http,
                "reminders",
                &format!("w-{i}"),
                &json!({"type": "send_reminder", "fire_at": due,
                    "payload": {"user": "w", "text": "wait"}}),
            )
            .await;
    }
    // Well past their time (ownership rounds every 100 ms), they wait: none run, none dead.
    common::runtime::quiet(1_500).await;
    assert_eq!(
        counts(&http, &plain).await,
        (5, 0),
        "the waiting jobs moved"
    );

    // Back: they fire there.
    let custom = Toc::start_program(&example("custom_service"), "custom2", &env, dir.path()).await;
    until(
        20,
        "the waiting jobs run once the custom service is back",
        || async {
            sent(&http, &custom, "reminders")
                .await
                .iter()
                .filter(|(id, _)| id.starts_with("w-"))
                .count()
                == 5
        },
    )
    .await;
    assert_eq!(counts(&http, &plain).await, (0, 0));
}

/// docs/library.md's code, run: a job of its own type on the embedded store with a journal,
/// then on a test clock moved 30 minutes at once.
#[test]
fn the_library_guide_runs() {
    let out = std::process::Command::new(example("library_guide"))
        .output()
        .expect("the example runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("cancelled order Some(7)"), "{text}");
    assert!(
        text.contains("cancelled order Some(8) after 30 minutes on the test clock"),
        "{text}"
    );
}

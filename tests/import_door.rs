//! An import is a door like the others: every line of `POST /v1/topics/{topic}/import` is
//! checked as a `PUT` of its job would be (and for what only an import can get wrong)
//! before anything is written, the topic included; and its digest is the service's own sum
//! of the lines it wrote, not the caller's word. Through a real `toc serve` on each engine.
//!
//! Each refusal: 400 naming the field, nothing written (the topic absent, or its jobs and
//! its export unchanged and answering 200). A job lives in its home slot, which its shard
//! key names when it was written with one (the store keeps the key, and the export shows
//! it): an import into any other slot is refused.

mod common;

use serde_json::{Value, json};

use common::RedisServer;
use common::process::{Skew, Toc, redis_env};
use timeout_center::transfer::digest;

/// A topic's export, as lines: its settings, `jobs`, and its end line.
fn export(topic: &str, jobs: &[Value]) -> Vec<String> {
    let mut lines =
        vec![json!({"kind": "topic", "settings": {"name": topic, "slots": 1}}).to_string()];
    lines.extend(jobs.iter().map(Value::to_string));
    lines.push(json!({"kind": "end", "topic": topic, "jobs": jobs.len()}).to_string());
    lines
}

/// One job line of topic `topic` in slot 0, with `fields` over a plain scheduled job.
fn job(topic: &str, id: &str, fields: Value) -> Value {
    let mut line = json!({"kind": "job", "slot": 0, "topic": topic, "id": id, "type": "emit",
        "payload": null, "state": "scheduled", "fire_at": common::now_ms() + 3_600_000,
        "attempts": 0, "max_attempts": 16, "fires": 0});
    for (k, v) in fields.as_object().unwrap() {
        line[k] = v.clone();
    }
    line
}

/// Posts `lines` as one batch under `digest` (the lines' own unless given): status, body.
async fn import(
    http: &reqwest::Client,
    svc: &Toc,
    topic: &str,
    lines: &[String],
    digest_of: Option<&[String]>,
    last: bool,
) -> (u16, Value) {
    let d = digest(digest_of.unwrap_or(lines).iter().map(String::as_str));
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let r = http
        .post(svc.url(&format!(
            "/v1/topics/{topic}/import?digest={}&slots=1&last={last}",
            d.replace(':', "%3A")
        )))
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn service(redis: &Option<RedisServer>, dir: &std::path::Path) -> Toc {
    let mut env = match redis {
        Some(r) => redis_env(r.url()),
        None => vec![],
    };
    // The service's default floor for a period (the harness lowers it for other tests).
    env.push(("TOC_LIMITS_MIN_EVERY_MS", "1000".into()));
    Toc::start("toc", &env, Skew::None, dir).await
}

async fn each_line_passes_the_checks_of_a_put(redis: Option<RedisServer>) {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&redis, dir.path()).await;
    let http = reqwest::Client::new();
    let refused: Vec<(&str, Value, &str)> = vec![
        (
            "every",
            json!({"repeat": {"every_ms": 1}}),
            "limits.min_every_ms",
        ),
        (
            "attempts",
            json!({"attempts": 4_294_967_295_u64}),
            "max_attempts",
        ),
        (
            "expire",
            json!({"expire_after_ms": u64::MAX}),
            "expire_after_ms",
        ),
        ("created", json!({"created_at": -5}), "created_at"),
        (
            "error",
            json!({"last_error": "x".repeat(70_000)}),
            "last_error",
        ),
    ];
    for (id, fields, names) in refused {
        // Into a new topic: refused, and no topic made.
        let lines = export("fresh", &[job("fresh", id, fields.clone())]);
        let (status, body) = import(&http, &svc, "fresh", &lines, None, true).await;
        assert_eq!(status, 400, "{id}: {body}");
        assert!(body.to_string().contains(names), "{id}: {body}");
        let r = http.get(svc.url("/v1/topics/fresh")).send().await.unwrap();
        assert_eq!(r.status(), 404, "{id}: a refused import made its topic");
    }
    // A 409 (the export's slot count is not its settings') makes no topic either.
    let lines = export("fresh", &[job("fresh", "a", json!({}))]);
    let r = http
        .post(svc.url(&format!(
            "/v1/topics/fresh/import?digest={}&slots=2&last=true",
            digest(lines.iter().map(String::as_str)).replace(':', "%3A")
        )))
        .body(lines.iter().map(|l| format!("{l}\n")).collect::<String>())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let r = http.get(svc.url("/v1/topics/fresh")).send().await.unwrap();
    assert_eq!(r.status(), 404, "a refused import made its topic");
    // Into a topic that holds a job: refused, nothing written, reads and export still 200.
    let ok = export("kept", &[job("kept", "a", json!({}))]);
    let (status, body) = import(&http, &svc, "kept", &ok, None, true).await;
    assert_eq!(status, 200, "{body}");
    let before = svc.get_text(&http, "/v1/topics/kept/export").await;
    let bad = vec![
        job("kept", "b", json!({})),
        job("kept", "c", json!({"attempts": 99, "max_attempts": 3})),
    ];
    let mut lines = export("kept", &bad);
    lines.remove(0);
    let (status, body) = import(&http, &svc, "kept", &lines, None, false).await;
    assert_eq!(status, 400, "{body}");
    let says = body["error"]["message"].as_str().unwrap_or_default();
    assert!(says.contains("job \"c\""), "names the job: {body}");
    // An id twice in one batch.
    let twice = [job("kept", "d", json!({})), job("kept", "d", json!({}))];
    let (status, body) = import(
        &http,
        &svc,
        "kept",
        &twice.iter().map(Value::to_string).collect::<Vec<_>>(),
        None,
        false,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("once"), "{body}");
    let r = http
        .get(svc.url("/v1/topics/kept/export"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.text().await.unwrap(),
        before,
        "a refused batch wrote something"
    );
    let r = http
        .get(svc.url("/v1/topics/kept/jobs/a"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for id in ["b", "c", "d"] {
        let r = http
            .get(svc.url(&format!("/v1/topics/kept/jobs/{id}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{id} of a refused batch was written");
    }
}

async fn a_digest_is_recorded_only_when_the_lines_add_up_to_it(redis: Option<RedisServer>) {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&redis, dir.path()).await;
    let http = reqwest::Client::new();
    let real = export("t", &[job("t", "a", json!({})), job("t", "b", json!({}))]);
    // A caller claims the real import's digest with an empty last batch.
    let empty = vec![real[0].clone()];
    let (status, body) = import(&http, &svc, "t", &empty, Some(&real), true).await;
    assert_eq!(status, 200, "{body}");
    let t = svc.get_json(&http, "/v1/topics/t").await;
    assert!(
        t.get("imports").is_none(),
        "the claimed digest was recorded: {t}"
    );
    // The real import is not skipped: both jobs are written, in two batches.
    let (first, rest) = (real[..2].to_vec(), real[2..].to_vec());
    let (status, body) = import(&http, &svc, "t", &first, Some(&real), false).await;
    assert_eq!(
        (status, body["skipped"].clone()),
        (200, json!(false)),
        "{body}"
    );
    let (status, body) = import(&http, &svc, "t", &rest, Some(&real), true).await;
    assert_eq!(
        (status, body["skipped"].clone()),
        (200, json!(false)),
        "{body}"
    );
    let t = svc.get_json(&http, "/v1/topics/t").await;
    assert_eq!(t["scheduled"], 2, "{t}");
    assert_eq!(
        t["imports"],
        json!([digest(real.iter().map(String::as_str))])
    );
    // Now the same import is skipped whole.
    let (status, body) = import(&http, &svc, "t", &real, None, true).await;
    assert_eq!(
        (status, body["skipped"].clone()),
        (200, json!(true)),
        "{body}"
    );
}

/// A job's shard key goes with it from a `PUT` and a batch of resets that creates it, to
/// its export, and back through an import; a line in a slot that is not its job's home is
/// refused, so no job is written where reads and cancels by its id and key cannot find it.
async fn a_job_is_imported_only_into_its_home_slot(redis: Option<RedisServer>) {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&redis, dir.path()).await;
    let http = reqwest::Client::new();
    let at = common::now_ms() + 3_600_000;
    let r = http
        .put(svc.url("/v1/topics/meet/jobs/start-1"))
        .json(&json!({"fire_at": at, "shard_key": "meeting-7", "payload": {"n": 1}}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let r = http
        .post(svc.url("/v1/topics/meet/resets"))
        .json(
            &json!({"resets": [{"id": "end-1", "fire_at": at, "shard_key": "meeting-7"},
            {"id": "plain-1", "fire_at": at}], "create": {}}),
        )
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let slots = u32::try_from(
        svc.get_json(&http, "/v1/topics/meet").await["slots"]
            .as_u64()
            .unwrap(),
    )
    .unwrap();
    let home = |key: &str| crc32fast::hash(key.as_bytes()) & (slots - 1);
    for id in ["start-1", "end-1"] {
        let j = svc
            .get_json(
                &http,
                &format!("/v1/topics/meet/jobs/{id}?shard_key=meeting-7"),
            )
            .await;
        assert_eq!(j["shard_key"], "meeting-7", "{j}");
    }
    let export = svc.get_text(&http, "/v1/topics/meet/export").await;
    let lines: Vec<String> = export.lines().map(str::to_string).collect();
    for line in &lines[1..lines.len() - 1] {
        let v: Value = serde_json::from_str(line).unwrap();
        let key = v["shard_key"].as_str().unwrap_or(v["id"].as_str().unwrap());
        assert_eq!(v["slot"], home(key), "exported out of its home: {v}");
    }
    assert_eq!(
        lines.iter().filter(|l| l.contains("\"meeting-7\"")).count(),
        2,
        "{export}"
    );
    // Back through an import into a topic of its own: written home, found by id and key,
    // cancelled by them.
    let moved: Vec<String> = lines
        .iter()
        .map(|l| l.replace("\"meet\"", "\"meet2\""))
        .collect();
    let (status, body) = import_slots(&http, &svc, "meet2", &moved, slots).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["written"], 3, "{body}");
    let r = http
        .delete(svc.url("/v1/topics/meet2/jobs/end-1?shard_key=meeting-7"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let t = svc.get_json(&http, "/v1/topics/meet2").await;
    assert_eq!(t["scheduled"], 2, "the cancel missed its job: {t}");
    // A line moved out of its home slot: refused, naming the slot, nothing written.
    let wrong = (home("stray") + 1) % slots;
    let mut line = json!({"kind": "job", "slot": wrong, "topic": "meet2", "id": "stray",
        "type": "emit", "payload": null, "state": "scheduled", "fire_at": at,
        "attempts": 0, "max_attempts": 16, "fires": 0});
    let (status, body) = import_slots(&http, &svc, "meet2", &[line.to_string()], slots).await;
    assert_eq!(status, 400, "{body}");
    let says = body["error"]["message"].as_str().unwrap_or_default();
    assert!(says.contains("slot") && says.contains("home"), "{body}");
    // So is one whose shard key routes elsewhere than its slot.
    line["slot"] = json!(home("stray"));
    line["shard_key"] = json!("k");
    if home("k") != home("stray") {
        let (status, body) = import_slots(&http, &svc, "meet2", &[line.to_string()], slots).await;
        assert_eq!(status, 400, "{body}");
    }
    let r = http
        .get(svc.url("/v1/topics/meet2/jobs/stray"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "a refused line was written");
    let t = svc.get_json(&http, "/v1/topics/meet2").await;
    assert_eq!(t["scheduled"], 2, "{t}");
}

/// Posts `lines` as one last batch of a topic of `slots` slots.
async fn import_slots(
    http: &reqwest::Client,
    svc: &Toc,
    topic: &str,
    lines: &[String],
    slots: u32,
) -> (u16, Value) {
    let d = digest(lines.iter().map(String::as_str));
    let r = http
        .post(svc.url(&format!(
            "/v1/topics/{topic}/import?digest={}&slots={slots}&last=true",
            d.replace(':', "%3A")
        )))
        .header("content-type", "application/x-ndjson")
        .body(lines.iter().map(|l| format!("{l}\n")).collect::<String>())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn memory_a_job_is_imported_only_into_its_home_slot() {
    a_job_is_imported_only_into_its_home_slot(None).await;
}

#[tokio::test]
async fn redis_a_job_is_imported_only_into_its_home_slot() {
    a_job_is_imported_only_into_its_home_slot(Some(RedisServer::start_for_process())).await;
}

#[tokio::test]
async fn memory_each_line_passes_the_checks_of_a_put() {
    each_line_passes_the_checks_of_a_put(None).await;
}

#[tokio::test]
async fn redis_each_line_passes_the_checks_of_a_put() {
    each_line_passes_the_checks_of_a_put(Some(RedisServer::start_for_process())).await;
}

#[tokio::test]
async fn memory_a_digest_is_recorded_only_when_the_lines_add_up_to_it() {
    a_digest_is_recorded_only_when_the_lines_add_up_to_it(None).await;
}

#[tokio::test]
async fn redis_a_digest_is_recorded_only_when_the_lines_add_up_to_it() {
    a_digest_is_recorded_only_when_the_lines_add_up_to_it(Some(RedisServer::start_for_process()))
        .await;
}

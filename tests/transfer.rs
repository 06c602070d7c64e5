//! Backups and moves between engines (`toc export`, `toc import`), with real processes: a
//! `toc serve` on the memory engine with a journal, one on Redis, a second on memory, and
//! the `toc` CLI between them.
//!
//! What this proves: an export of topics holding plain, recurring, labelled, flow-keyed,
//! traced and shard-keyed jobs, dead letters and flow limits reads into Redis and back into
//! memory with the three exports equal line for line; an import run again changes nothing
//! and says so; a job whose fire time passed fires once, however often the import runs; a
//! journal exports offline as its running service does; an export cut short is refused
//! before anything is written. What it cannot: a service that changes while it is exported
//! (an export reads each slot in turn, not one instant of the whole).

mod common;

use std::path::Path;

use serde_json::{Value, json};

use common::RedisServer;
use common::process::{Skew, Toc, redis_env};

/// Runs the `toc` CLI against `toc`; answers its standard error, failing on a non-zero exit.
fn cli(toc: &Toc, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toc"))
        .env("TOC_URL", toc.url(""))
        .args(args)
        .output()
        .expect("toc runs");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "toc {args:?}: {err}");
    err
}

async fn send(http: &reqwest::Client, method: reqwest::Method, url: String, body: Value) -> Value {
    let r = http.request(method, &url).json(&body).send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(status.is_success(), "{url}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// `toc serve` on the memory engine, without a journal.
async fn on_memory(name: &str, dir: &Path) -> Toc {
    Toc::start(
        name,
        &[("TOC_STORE", "memory".to_string())],
        Skew::None,
        dir,
    )
    .await
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// What the source holds: two topics with every kind of job, flow limits and a dead letter.
async fn fill(http: &reqwest::Client, toc: &Toc) {
    use reqwest::Method;
    let later = common::now_ms_u64() + 3_600_000;
    send(
        http,
        Method::PUT,
        toc.url("/v1/topics/orders"),
        json!({"slots": 8, "flow": {"parallelism": 3}, "max_attempts": 7}),
    )
    .await;
    send(
        http,
        Method::PUT,
        toc.url("/v1/topics/orders/flows/api.example.com:443"),
        json!({"rate": 5, "period_ms": 60_000}),
    )
    .await;
    for i in 0..300 {
        send(
            http,
            Method::PUT,
            toc.url(&format!("/v1/topics/orders/jobs/plain-{i}")),
            json!({"fire_at": later + i}),
        )
        .await;
    }
    send(
        http,
        Method::PUT,
        toc.url("/v1/topics/orders/jobs/full"),
        json!({"fire_at": later, "payload": {"amount": 12, "note": "é\n\"q\""},
                "labels": {"campaign": "spring"}, "flow_key": "api.example.com:443",
                "max_attempts": 5, "max_fire_at": later + 60_000, "expire_after_ms": 60_000}),
    )
    .await;
    let traced = http
        .put(toc.url("/v1/topics/orders/jobs/traced"))
        .header(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        .json(&json!({"fire_at": later}))
        .send()
        .await
        .unwrap();
    assert!(traced.status().is_success());
    send(
        http,
        Method::PUT,
        toc.url("/v1/topics/orders/jobs/sharded"),
        json!({"fire_at": later, "shard_key": "device-9"}),
    )
    .await;
    send(
        http,
        Method::PUT,
        toc.url("/v1/topics/orders/jobs/every-minute"),
        json!({"fire_at": later, "repeat": {"every_ms": 60_000}}),
    )
    .await;
    // A dead letter: a pull job claimed and buried.
    send(
        http,
        Method::PUT,
        toc.url("/v1/topics/inbox"),
        json!({"default_type": "pull"}),
    )
    .await;
    send(
        http,
        Method::PUT,
        toc.url("/v1/topics/inbox/jobs/d1"),
        json!({"delay_ms": 0, "payload": {"x": 1}}),
    )
    .await;
    let claimed = crate::common::runtime::eventually(10, || async {
        let c = send(
            http,
            Method::POST,
            toc.url("/v1/topics/inbox/claim"),
            json!({"max": 1}),
        )
        .await;
        c["jobs"][0]["token"]
            .as_u64()
            .ok_or_else(|| format!("claimed {c}"))
    })
    .await;
    let bury = http
        .post(toc.url("/v1/topics/inbox/jobs/d1/bury"))
        .json(&json!({"token": claimed, "error": "no such customer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bury.status(), 204);
    send(
        http,
        Method::PUT,
        toc.url("/v1/topics/inbox/jobs/waiting"),
        json!({"fire_at": later, "payload": {"y": 2}}),
    )
    .await;
}

#[tokio::test]
async fn an_export_moves_between_engines_and_back_line_for_line() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let memory = vec![
        ("TOC_STORE", "memory".to_string()),
        ("TOC_MEMORY_JOURNAL", journal.display().to_string()),
    ];
    let source = Toc::start("source", &memory, Skew::None, dir.path()).await;
    let http = reqwest::Client::new();
    fill(&http, &source).await;
    let a = dir.path().join("a.jsonl");
    let said = cli(&source, &["export", "--out", a.to_str().unwrap()]);
    println!("{said}");
    let exported = lines(&a);
    // 2 settings lines, 2 end lines, 304 jobs of orders, 2 of inbox.
    assert_eq!(exported.len(), 2 + 2 + 304 + 2, "{said}");
    assert!(
        exported
            .iter()
            .any(|l| l.contains(r#""state":"dead""#) && l.contains("no such customer"))
    );
    assert!(
        exported
            .iter()
            .any(|l| l.contains(r#""api.example.com:443":{"#)),
        "flow limits in the settings line"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "an export holds secrets: its owner's only");
    }
    // The journal, offline, exports what the running service does.
    let offline = dir.path().join("offline.jsonl");
    cli(
        &source,
        &[
            "export",
            "--journal",
            journal.to_str().unwrap(),
            "--out",
            offline.to_str().unwrap(),
        ],
    );
    assert_eq!(lines(&offline), exported, "the journal's export");

    let redis = RedisServer::start();
    let on_redis = Toc::start("redis", &redis_env(redis.url()), Skew::None, dir.path()).await;
    let said = cli(
        &on_redis,
        &["import", a.to_str().unwrap(), "--batch", "100"],
    );
    println!("{said}");
    assert!(said.contains("306 jobs written, 0 there already"), "{said}");
    let b = dir.path().join("b.jsonl");
    cli(&on_redis, &["export", "--out", b.to_str().unwrap()]);
    assert_eq!(lines(&b), exported, "memory -> Redis, line for line");
    // Run again: nothing changes, and the import says so.
    let again = cli(&on_redis, &["import", a.to_str().unwrap()]);
    assert!(again.contains("imported before"), "{again}");
    assert!(again.contains("0 jobs written"), "{again}");
    cli(&on_redis, &["export", "--out", b.to_str().unwrap()]);
    assert_eq!(lines(&b), exported, "the second import changed nothing");
    // A job of a shard key is found by it where it went.
    let sharded: Value = on_redis
        .get_json(&http, "/v1/topics/orders/jobs/sharded?shard_key=device-9")
        .await;
    assert_eq!(sharded["id"], "sharded", "{sharded}");

    let dir2 = tempfile::tempdir().unwrap();
    let back = on_memory("back", dir2.path()).await;
    cli(&back, &["import", b.to_str().unwrap()]);
    let c = dir.path().join("c.jsonl");
    cli(&back, &["export", "--out", c.to_str().unwrap()]);
    assert_eq!(
        lines(&c),
        exported,
        "memory -> Redis -> memory, line for line"
    );
}

/// A job whose fire time passed while it moved fires once where it lands, and an import run
/// again does not make it again after it fired and went.
#[tokio::test]
async fn a_job_past_due_fires_once_however_often_it_is_imported() {
    let dir = tempfile::tempdir().unwrap();
    let source = on_memory("source", dir.path()).await;
    let http = reqwest::Client::new();
    // Paused where it is exported, so it is still there to export when it is due.
    send(
        &http,
        reqwest::Method::PUT,
        source.url("/v1/topics/late"),
        json!({"paused": true}),
    )
    .await;
    send(
        &http,
        reqwest::Method::PUT,
        source.url("/v1/topics/late/jobs/j1"),
        json!({"delay_ms": 0, "payload": {"n": 1}}),
    )
    .await;
    let file = dir.path().join("late.jsonl");
    cli(&source, &["export", "--out", file.to_str().unwrap()]);
    // Resumed in the file, as a move resumes it where it lands.
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace(r#""paused":true"#, r#""paused":false"#);
    std::fs::write(&file, text).unwrap();
    let redis = RedisServer::start();
    let target = Toc::start("target", &redis_env(redis.url()), Skew::None, dir.path()).await;
    cli(&target, &["import", file.to_str().unwrap()]);
    let fired = || async {
        let page: Value = target
            .get_json(&http, "/v1/topics/late/events?limit=100")
            .await;
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["job_id"] == "j1" && e["event"] == "job.fired")
            .count()
    };
    crate::common::runtime::eventually(10, || async {
        let n = fired().await;
        (n == 1)
            .then_some(())
            .ok_or_else(|| format!("fired {n} times"))
    })
    .await;
    let again = cli(&target, &["import", file.to_str().unwrap()]);
    assert!(again.contains("imported before"), "{again}");
    // Many times what a due job takes to fire: it would have fired again.
    crate::common::runtime::quiet(1_500).await;
    assert_eq!(fired().await, 1, "fired once");
}

/// An export cut short (a connection lost, a disk full) is refused before anything is
/// written, naming the topic.
#[tokio::test]
async fn an_export_cut_short_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let source = on_memory("source", dir.path()).await;
    let http = reqwest::Client::new();
    for i in 0..10 {
        send(
            &http,
            reqwest::Method::PUT,
            source.url(&format!("/v1/topics/t/jobs/j{i}")),
            json!({"delay_ms": 3_600_000}),
        )
        .await;
    }
    let file = dir.path().join("t.jsonl");
    cli(&source, &["export", "--out", file.to_str().unwrap()]);
    let whole = std::fs::read_to_string(&file).unwrap();
    let cut: String = whole.lines().take(6).map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, cut).unwrap();
    let dir2 = tempfile::tempdir().unwrap();
    let target = on_memory("target", dir2.path()).await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toc"))
        .env("TOC_URL", target.url(""))
        .args(["import", file.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("cut short") && err.contains("\"t\""), "{err}");
    let topic = http.get(target.url("/v1/topics/t")).send().await.unwrap();
    assert_eq!(topic.status(), 404, "nothing written");
    // A line that is not an export's is refused by the service too, naming it.
    let zeros = "0".repeat(64);
    let bad = http
        .post(target.url(&format!(
            "/v1/topics/t/import?digest=sha256:{zeros}&slots=16"
        )))
        .body(format!("{}\nnot a line\n", whole.lines().next().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.unwrap();
    let says = body["error"]["message"].as_str().unwrap_or_default();
    assert!(says.contains("line 2"), "{body}");
    let topic = http.get(target.url("/v1/topics/t")).send().await.unwrap();
    assert_eq!(topic.status(), 404, "nothing written");
}

/// `toc export --out F` writes only a file it makes: a `F.partial` that exists (a symlink
/// to a victim file, or a file anyone may write) is refused, naming it, and nothing is
/// written through it (before, the export wrote through the link, every webhook secret into
/// the victim, and kept a 0666 file's mode); the file it makes is 0600.
#[tokio::test]
async fn an_export_writes_only_a_new_private_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let source = on_memory("source", dir.path()).await;
    let http = reqwest::Client::new();
    send(
        &http,
        reqwest::Method::PUT,
        source.url("/v1/topics/t/jobs/j"),
        json!({"delay_ms": 3_600_000}),
    )
    .await;
    let out = dir.path().join("backup.jsonl");
    let partial = dir.path().join("backup.partial");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, &partial).unwrap();
    let export = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_toc"))
            .env("TOC_URL", source.url(""))
            .args(["export", "--out", out.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let refused = export();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && err.contains("exists"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    std::fs::remove_file(&partial).unwrap();
    std::fs::write(&partial, "").unwrap();
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert!(
        !export().status.success(),
        "a partial file anyone may write is used"
    );
    std::fs::remove_file(&partial).unwrap();
    let done = export();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(!partial.exists());
}

/// `toc export --journal` stopped by SIGTERM (or SIGINT) removes the copy of the journal it
/// replays and its partial file (before, a full copy of the journal, every payload in it,
/// was left in the temporary directory). The signal is sent once the copy's directory
/// exists, so it lands while the export runs.
#[tokio::test]
async fn a_journal_export_stopped_by_a_signal_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("jobs.journal");
    let svc = Toc::start(
        "source",
        &[("TOC_MEMORY_JOURNAL", journal.display().to_string())],
        Skew::None,
        dir.path(),
    )
    .await;
    let http = reqwest::Client::new();
    for batch in 0..20 {
        let resets: Vec<Value> = (0..5_000)
            .map(|i| json!({"id": format!("d{batch}-{i}"), "delay_ms": 3_600_000}))
            .collect();
        send(
            &http,
            reqwest::Method::POST,
            svc.url("/v1/topics/devices/resets"),
            json!({"resets": resets, "create": {"payload": {"pad": "x".repeat(100)}}}),
        )
        .await;
    }
    drop(svc);
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = dir.path().join("offline.jsonl");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toc"))
        .env("TMPDIR", &tmp)
        .args(["export", "--journal", journal.to_str().unwrap()])
        .args(["--out", out.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let copy_made = || {
        std::fs::read_dir(&tmp).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("toc-export-")
        })
    };
    common::runtime::until(30, "the export makes its copy of the journal", || async {
        copy_made()
    })
    .await;
    common::process::signal(child.id(), "TERM");
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "an export stopped by a signal says it failed"
    );
    assert!(!copy_made(), "the copy of the journal was left behind");
    assert!(!out.exists());
    assert!(!dir.path().join("offline.partial").exists());
}

/// A whole-service export while one topic doubles writes every other topic, says which it
/// left out and why, and exits non-zero (before: the whole export stopped with a 409, and a
/// team whose topic doubles as long as its oldest job waits kept every backup from being
/// made).
#[tokio::test]
async fn a_doubling_topic_is_left_out_of_a_whole_export_the_rest_written() {
    let dir = tempfile::tempdir().unwrap();
    let source = on_memory("source", dir.path()).await;
    let http = reqwest::Client::new();
    use reqwest::Method;
    send(
        &http,
        Method::PUT,
        source.url("/v1/topics/growing"),
        json!({"slots": 1}),
    )
    .await;
    for i in 0..20 {
        for topic in ["growing", "steady"] {
            send(
                &http,
                Method::PUT,
                source.url(&format!("/v1/topics/{topic}/jobs/j{i}")),
                json!({"delay_ms": 3_600_000}),
            )
            .await;
        }
    }
    // Doubled while its jobs wait an hour: it drains for that hour.
    send(
        &http,
        Method::PUT,
        source.url("/v1/topics/growing"),
        json!({"slots": 2}),
    )
    .await;
    let t = source.get_json(&http, "/v1/topics/growing").await;
    assert_eq!(t["draining_from"], 1, "{t}");
    let out = dir.path().join("all.jsonl");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_toc"))
        .env("TOC_URL", source.url(""))
        .args(["export", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{err}");
    assert!(err.contains("growing") && err.contains("double"), "{err}");
    let written = lines(&out);
    assert!(
        written.iter().any(|l| l.contains("\"steady\"")),
        "the rest was not written"
    );
    assert!(!written.iter().any(|l| l.contains("\"growing\"")));
    assert_eq!(
        written
            .iter()
            .filter(|l| l.contains("\"kind\":\"job\""))
            .count(),
        20
    );
}

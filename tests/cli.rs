//! The `toc` CLI as people use it, against a real `toc serve` on each engine: times print
//! as RFC 3339 with an age or a countdown, `--in` and `--at` schedule at the instant they
//! name (read back through the API), `job get` lists every field of the API's `Job` schema,
//! bulk changes go in batches to the end, and the completion scripts are produced (bash's
//! checked by `bash -n`).
//!
//! What it cannot show: the progress bar itself, which is drawn only on a terminal (these
//! runs write to pipes, where a plain line stands for it every few seconds).

#[macro_use]
mod common;

use serde_json::{Value, json};

use common::{Fleet, Kind};

use common::toc_cli as toc;

/// `toc ARGS`'s standard output, failing the test on a non-zero exit.
fn ok(url: &str, args: &[&str]) -> String {
    let (success, out, err) = toc(url, args);
    assert!(success, "toc {args:?} failed: {err}");
    out
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// An RFC 3339 instant in UTC to the second, followed by a countdown or an age:
/// `2026-12-06T21:07:15Z (in 59s)`.
fn is_human_instant(text: &str) -> bool {
    text.split_whitespace().enumerate().any(|(i, word)| {
        let rest: Vec<&str> = text.split_whitespace().skip(i + 1).collect();
        let rest = rest.join(" ");
        let span = |s: &str| {
            !s.is_empty()
                && s.split(' ').all(|p| {
                    let digits = p.trim_end_matches(|c: char| c.is_ascii_alphabetic());
                    digits.parse::<u64>().is_ok()
                        && ["d", "h", "m", "s", "ms"].contains(&&p[digits.len()..])
                })
        };
        let told = rest.strip_prefix('(').and_then(|r| r.split(')').next());
        word.len() == 20
            && word.ends_with('Z')
            && chrono::DateTime::parse_from_rfc3339(word).is_ok()
            && told.is_some_and(|t| {
                t == "now"
                    || t.strip_prefix("in ").is_some_and(span)
                    || t.strip_suffix(" ago").is_some_and(span)
            })
    })
}

/// The value of `field` in a key/value view.
fn field<'a>(view: &'a str, field: &str) -> Option<&'a str> {
    view.lines().find_map(|l| {
        let (k, v) = l.split_once(char::is_whitespace)?;
        (k == field).then(|| v.trim())
    })
}

async fn people_read_times_and_schedule_with_in_and_at(kind: Kind) {
    let fleet = Fleet::start(kind, 1, false).await;
    let svc = &fleet.tocs[0];
    let url = svc.url("");
    let http = reqwest::Client::new();

    // --in 90s: due 90 s after the command, read back through the API.
    let before = now_ms();
    ok(&url, &["job", "put", "orders", "o1", "--in", "90s"]);
    let after = now_ms();
    let job = svc.get_json(&http, "/v1/topics/orders/jobs/o1").await;
    let at = job["fire_at"].as_i64().unwrap();
    assert!(
        (before + 90_000..=after + 90_000).contains(&at),
        "--in 90s scheduled {} ms from the command",
        at - before
    );
    // --at an RFC 3339 instant (with an offset): exactly that instant.
    ok(
        &url,
        &[
            "job",
            "put",
            "orders",
            "o2",
            "--at",
            "2030-01-02T04:05:06.789+01:00",
        ],
    );
    let job = svc.get_json(&http, "/v1/topics/orders/jobs/o2").await;
    assert_eq!(
        job["fire_at"], 1_893_553_506_789_i64,
        "2030-01-02T03:05:06.789Z"
    );
    // --fire-at and --delay-ms stay as they were.
    ok(
        &url,
        &["job", "put", "orders", "o3", "--fire-at", "1893553506789"],
    );
    let job = svc.get_json(&http, "/v1/topics/orders/jobs/o3").await;
    assert_eq!(job["fire_at"], 1_893_553_506_789_i64);
    // A reset --in 2h.
    let before = now_ms();
    ok(&url, &["job", "reset", "orders", "o3", "--in", "2h"]);
    let job = svc.get_json(&http, "/v1/topics/orders/jobs/o3").await;
    let moved = job["fire_at"].as_i64().unwrap() - before;
    assert!(
        (7_200_000..7_200_000 + 10_000).contains(&moved),
        "--in 2h moved it {moved} ms"
    );

    // `job get`: the fire time as a date with its countdown, and every field of the Job
    // schema the service describes.
    let view = ok(&url, &["job", "get", "orders", "o1"]);
    // It leads with the job's id, state and fire time.
    let firsts: Vec<&str> = view
        .lines()
        .take(3)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(firsts, ["id", "state", "fire_at"], "{view}");
    let fire_at = field(&view, "fire_at").unwrap_or_default();
    assert!(is_human_instant(fire_at), "fire_at {fire_at:?}");
    assert!(fire_at.contains("(in 1m"), "fire_at {fire_at:?}");
    let api = svc.get_json(&http, "/openapi.json").await;
    let schema = &api["components"]["schemas"]["Job"]["properties"];
    let names: Vec<&String> = schema.as_object().expect("the Job schema").keys().collect();
    assert!(names.len() > 15, "{names:?}");
    for name in names {
        assert!(
            field(&view, name).is_some(),
            "`toc job get` leaves out {name}:\n{view}"
        );
    }
    // A job written with details keeps its times, shown as dates with their age.
    ok(
        &url,
        &[
            "job", "put", "orders", "o4", "--in", "1h", "--label", "c=spring",
        ],
    );
    let view = ok(&url, &["job", "get", "orders", "o4"]);
    for name in ["created_at", "updated_at"] {
        let v = field(&view, name).unwrap_or_default();
        assert!(is_human_instant(v), "{name} {v:?}");
    }
    // --json keeps the API's numbers.
    let raw: Value =
        serde_json::from_str(&ok(&url, &["--json", "job", "get", "orders", "o4"])).expect("JSON");
    assert!(raw["fire_at"].is_i64(), "{raw}");

    // `topic ls`: the next fire as a date with its countdown.
    let table = ok(&url, &["topic", "ls"]);
    let row = table
        .lines()
        .find(|l| l.starts_with("orders "))
        .unwrap_or_default();
    assert!(is_human_instant(row), "{table}");

    // A span with no unit is refused, naming the option; nothing is written.
    let (success, _, err) = toc(&url, &["job", "put", "orders", "o5", "--in", "30"]);
    assert!(!success && err.contains("--in"), "{err}");
    let r = http
        .get(svc.url("/v1/topics/orders/jobs/o5"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    // --create-only refuses to replace a job that exists: 409, the job as it was.
    let (success, _, err) = toc(
        &url,
        &["job", "put", "orders", "o1", "--in", "5h", "--create-only"],
    );
    assert!(!success && err.contains("409"), "{err}");
    ok(
        &url,
        &["job", "put", "orders", "o6", "--in", "5h", "--create-only"],
    );
}

/// A bulk cancel and a bulk requeue go in batches until the filter takes no more: 25
/// labelled jobs in batches of 10 (three requests), the others untouched; five dead
/// letters requeued in batches of 2.
async fn bulk_changes_go_in_batches_to_the_end(kind: Kind) {
    let fleet = Fleet::start(kind, 1, false).await;
    let svc = &fleet.tocs[0];
    let url = svc.url("");
    let http = reqwest::Client::new();
    for k in 0..30 {
        let mut body = json!({"delay_ms": 3_600_000});
        if k < 25 {
            body["labels"] = json!({"c": "spring"});
        }
        svc.put_job(&http, "orders", &format!("j{k}"), &body).await;
    }
    let out = ok(
        &url,
        &[
            "job",
            "cancel-many",
            "orders",
            "--label",
            "c:spring",
            "--batch",
            "10",
        ],
    );
    assert_eq!(field(&out, "cancelled"), Some("25"), "{out}");
    let topic = svc.get_json(&http, "/v1/topics/orders").await;
    assert_eq!(topic["scheduled"], 5, "{topic}");
    // The API's own limit: at most that many.
    let r: Value = http
        .delete(svc.url("/v1/topics/orders/jobs?from=0&limit=2"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["cancelled"], 2, "{r}");
    let r = http
        .delete(svc.url("/v1/topics/orders/jobs?from=0&limit=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("limit"));

    // Dead letters: webhooks to a closed port, one attempt each.
    let hook = format!(
        "http://127.0.0.1:{}/hook",
        common::redis_server::free_port()
    );
    for k in 0..5 {
        let body = json!({"type": "webhook", "delay_ms": 0, "max_attempts": 1,
                          "labels": {"c": "acme"}, "payload": {"url": hook}});
        svc.put_job(&http, "hooks", &format!("d{k}"), &body).await;
    }
    crate::common::runtime::eventually(20, || async {
        let t = svc.get_json(&http, "/v1/topics/hooks").await;
        match t["dead"].as_u64() {
            Some(5) => Ok(()),
            n => Err(format!("{n:?} dead")),
        }
    })
    .await;
    let out = ok(
        &url,
        &[
            "dead",
            "requeue-many",
            "hooks",
            "--label",
            "c:acme",
            "--batch",
            "2",
        ],
    );
    assert_eq!(field(&out, "requeued"), Some("5"), "{out}");
    // They die again (one attempt each), then go for good, in batches of 2.
    crate::common::runtime::eventually(20, || async {
        let t = svc.get_json(&http, "/v1/topics/hooks").await;
        match t["dead"].as_u64() {
            Some(5) => Ok(()),
            n => Err(format!("{n:?} dead again")),
        }
    })
    .await;
    let out = ok(
        &url,
        &[
            "dead", "rm-many", "hooks", "--label", "c:acme", "--batch", "2",
        ],
    );
    assert_eq!(field(&out, "deleted"), Some("5"), "{out}");
    let t = svc.get_json(&http, "/v1/topics/hooks").await;
    assert_eq!(t["dead"], 0, "{t}");
}

engine_matrix!(
    #[tokio::test] crate::common::kind;
    people_read_times_and_schedule_with_in_and_at,
    bulk_changes_go_in_batches_to_the_end,
);

/// `toc completions SHELL` prints a script for each shell; bash's is one `bash -n` accepts.
#[test]
fn completions_are_produced_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let script = ok("http://127.0.0.1:1", &["completions", shell]);
        assert!(
            script.contains("cancel-many") && script.contains("requeue-many"),
            "{shell}: {}",
            &script[..script.len().min(200)]
        );
        if shell == "bash" {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("toc.bash");
            std::fs::write(&path, &script).unwrap();
            let checked = std::process::Command::new("bash")
                .arg("-n")
                .arg(&path)
                .output()
                .expect("bash runs");
            assert!(
                checked.status.success(),
                "bash -n: {}",
                String::from_utf8_lossy(&checked.stderr)
            );
        }
    }
}

/// What a newcomer met (issue 76), each against a real `toc serve`: a closed pipe ends a
/// command quietly with status 0 (before: a panic, exit 101); one label syntax everywhere
/// (`k=v` and the API's `k:v`, before: put refused `k:v` and the filters `k=v`); recurring
/// jobs from the CLI (`--cron --tz`, `--every`, before: no way); `topic ls` shows PAUSED;
/// and errors that say what to do (a URL without its scheme, a service not running, a
/// missing token).
#[tokio::test]
async fn the_cli_covers_the_api_and_says_what_to_do() {
    use common::process::{Skew, Toc};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let svc = Toc::start("toc", &[], Skew::None, dir.path()).await;
    let url = svc.url("");
    for i in 0..300 {
        ok(
            &url,
            &[
                "job",
                "put",
                "orders",
                &format!("o{i}"),
                "--in",
                "1h",
                "--label",
                "c:spring",
            ],
        );
    }
    // A reader that goes away at once: no panic, status 0.
    for args in [
        vec!["topic", "ls"],
        vec!["job", "ls", "orders", "--limit", "300"],
        vec!["completions", "bash"],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toc"))
            .env("TOC_URL", &url)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !err.contains("panicked"),
            "toc {args:?}: {:?} {err}",
            out.status
        );
    }
    // Labels: k=v and k:v alike, in a write and in a filter.
    ok(
        &url,
        &[
            "job",
            "put",
            "orders",
            "x1",
            "--in",
            "1h",
            "--label",
            "team=blue",
        ],
    );
    ok(
        &url,
        &[
            "job",
            "put",
            "orders",
            "x2",
            "--in",
            "1h",
            "--label",
            "team:blue",
        ],
    );
    for filter in ["team=blue", "team:blue"] {
        let listed = ok(&url, &["--json", "job", "ls", "orders", "--label", filter]);
        let v: Value = serde_json::from_str(&listed).unwrap();
        let ids: Vec<&str> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["x1", "x2"], "--label {filter}");
    }
    // Recurring jobs.
    ok(
        &url,
        &[
            "job",
            "put",
            "reports",
            "daily",
            "--cron",
            "0 9 * * MON-FRI",
            "--tz",
            "Europe/Berlin",
            "--repeat-limit",
            "5",
        ],
    );
    ok(&url, &["job", "put", "probes", "p1", "--every", "30s"]);
    let daily: Value =
        serde_json::from_str(&ok(&url, &["--json", "job", "get", "reports", "daily"])).unwrap();
    assert_eq!(daily["repeat"]["cron"], "0 9 * * MON-FRI", "{daily}");
    assert_eq!(daily["repeat"]["tz"], "Europe/Berlin");
    assert_eq!(daily["repeat"]["limit"], 5);
    let p1: Value =
        serde_json::from_str(&ok(&url, &["--json", "job", "get", "probes", "p1"])).unwrap();
    assert_eq!(p1["repeat"]["every_ms"], 30_000, "{p1}");
    // PAUSED in the topic list.
    ok(&url, &["topic", "pause", "orders"]);
    let table = ok(&url, &["topic", "ls"]);
    assert!(
        table.lines().next().unwrap_or_default().contains("PAUSED"),
        "{table}"
    );
    let row = table
        .lines()
        .find(|l| l.starts_with("orders "))
        .unwrap_or_default();
    assert!(row.contains("true"), "{table}");
    // Errors that say what to do.
    let (success, _, err) = toc("127.0.0.1:16080", &["topic", "ls"]);
    assert!(
        !success && err.contains("http://") && err.contains("scheme"),
        "{err}"
    );
    let closed = format!("http://127.0.0.1:{}", common::redis_server::free_port());
    let (success, _, err) = toc(&closed, &["topic", "ls"]);
    assert!(
        !success && err.contains("refused") && err.contains("toc serve"),
        "{err}"
    );
    let locked = Toc::start(
        "locked",
        &[("TOC_TOKENS", "s3cret".into())],
        Skew::None,
        dir.path(),
    )
    .await;
    let (success, _, err) = toc(&locked.url(""), &["topic", "ls"]);
    assert!(
        !success && err.contains("401") && err.contains("TOC_TOKEN"),
        "{err}"
    );
}

/// A topic that does not exist is answered with the nearest names of those that do, and a
/// job that is gone with its last event (before: a bare 404 either way).
#[tokio::test]
async fn a_refusal_says_what_the_service_knows() {
    use common::process::{Skew, Toc};
    let dir = tempfile::tempdir().unwrap();
    let svc = Toc::start("toc", &[], Skew::None, dir.path()).await;
    let url = svc.url("");
    ok(&url, &["job", "put", "orders", "o1", "--in", "1h"]);
    ok(&url, &["job", "put", "orders", "done-1", "--in", "0s"]);
    let (success, _, err) = toc(&url, &["job", "ls", "ordres"]);
    assert!(!success && err.contains("did you mean orders?"), "{err}");
    common::runtime::until(10, "done-1 fired and went", || async {
        !toc(&url, &["job", "get", "orders", "done-1"]).0
    })
    .await;
    let (_, _, err) = toc(&url, &["job", "get", "orders", "done-1"]);
    assert!(
        err.contains("it is gone: its last event was job.done"),
        "{err}"
    );
}

/// `toc topic create` makes a topic with every setting a `PUT` takes, and refuses one that
/// exists; `toc topic set` changes only the settings given, and refuses a topic that does
/// not exist (naming the other command), making nothing. Against a real `toc serve`.
#[tokio::test]
async fn topics_are_made_and_changed_with_their_settings() {
    use common::process::{Skew, Toc};
    let dir = tempfile::tempdir().unwrap();
    let svc = Toc::start("toc", &[], Skew::None, dir.path()).await;
    let url = svc.url("");
    let http = reqwest::Client::new();
    ok(
        &url,
        &[
            "topic",
            "create",
            "made",
            "--slots",
            "4",
            "--max-attempts",
            "5",
            "--backoff-base",
            "2s",
            "--backoff-max",
            "10m",
            "--type",
            "extra",
            "--max-payload-bytes",
            "4096",
        ],
    );
    let t = svc.get_json(&http, "/v1/topics/made").await;
    assert_eq!(
        (
            &t["slots"],
            &t["max_attempts"],
            &t["backoff"]["base_ms"],
            &t["backoff"]["max_ms"],
            &t["max_payload_bytes"]
        ),
        (
            &serde_json::json!(4),
            &serde_json::json!(5),
            &serde_json::json!(2000),
            &serde_json::json!(600_000),
            &serde_json::json!(4096)
        ),
        "{t}"
    );
    assert!(t["types"].to_string().contains("extra"), "{t}");
    let (success, _, err) = toc(&url, &["topic", "create", "made", "--max-attempts", "2"]);
    assert!(!success && err.contains("toc topic set"), "{err}");
    ok(
        &url,
        &[
            "topic",
            "set",
            "made",
            "--max-attempts",
            "9",
            "--visibility-timeout",
            "2m",
            "--events",
            "changes",
        ],
    );
    let t = svc.get_json(&http, "/v1/topics/made").await;
    assert_eq!(t["max_attempts"], 9, "{t}");
    assert_eq!(t["events"], "changes", "{t}");
    assert_eq!(t["visibility_timeout_ms"], 120_000, "{t}");
    assert_eq!(t["slots"], 4, "the settings not given stay: {t}");
    assert_eq!(t["backoff"]["base_ms"], 2000, "{t}");
    let (success, _, err) = toc(&url, &["topic", "set", "nope", "--max-attempts", "3"]);
    assert!(!success && err.contains("toc topic create"), "{err}");
    let r = http.get(svc.url("/v1/topics/nope")).send().await.unwrap();
    assert_eq!(r.status(), 404, "a refused set made its topic");
}

/// `toc events --follow` prints the events kept, then each as it is appended, until it is
/// stopped: a job written after it started is seen done through it (before: one page, no
/// way to follow).
#[tokio::test]
async fn events_are_followed_as_they_come() {
    use common::process::{Skew, Toc};
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let svc = Toc::start("toc", &[], Skew::None, dir.path()).await;
    let url = svc.url("");
    ok(&url, &["job", "put", "seen", "first", "--in", "0s"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_toc"))
        .args(["--url", &url, "--json", "events", "seen", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let done = |id: &str, line: &str| {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        v["job_id"] == id && v["event"] == "job.done"
    };
    let wait_for = |id: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if done(id, &line) => return,
                Ok(_) => {}
                Err(e) => panic!("no job.done of {id} through --follow: {e}"),
            }
        }
    };
    wait_for("first");
    // Written after the follow began, and after it has found nothing new.
    ok(&url, &["job", "put", "seen", "later", "--in", "1s"]);
    wait_for("later");
    child.kill().unwrap();
    child.wait().unwrap();
}

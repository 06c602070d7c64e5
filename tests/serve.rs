//! `toc serve` and the client commands share one shell: the client's variables (`TOC_URL`,
//! `TOC_TOKEN`) do not stop the server, and the client reaches the server through them.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::redis_server::free_port;

/// Kills the server when the test ends, however it ends.
use common::process::KillOnDrop as Running;

#[test]
fn one_shell_runs_the_server_and_the_client() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let shell = [
        ("TOC_URL", url.as_str()),
        ("TOC_TOKEN", "s3cret"),
        ("TOC_TOKENS", "s3cret"),
        ("TOC_LISTEN", &format!("127.0.0.1:{port}")),
        ("RUST_LOG", "warn"),
    ];
    let mut server = Running(
        common::toc_serve(env!("CARGO_BIN_EXE_toc"))
            .envs(shell)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            server
                .0
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("toc serve stopped ({status}): {err}");
        }
        let out = Command::new(env!("CARGO_BIN_EXE_toc"))
            .args(["job", "put", "orders", "o-1", "--delay-ms", "60000"])
            .envs(shell)
            .output()
            .unwrap();
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the client never reached the server: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A poll (the client runs synchronously), every 50 ms of real time.
        std::thread::sleep(Duration::from_millis(50));
    }
    // The client's calls, each asserted to succeed: its standard output.
    let toc = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_toc"))
            .args(args)
            .envs(shell)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let job: serde_json::Value =
        serde_json::from_slice(&toc(&["--json", "job", "get", "orders", "o-1"])).unwrap();
    assert_eq!(job["id"], "o-1");
    assert_eq!(job["state"], "scheduled");
    // `--next N` asks for a recurring job's next instants: none for a one-off; `toc job
    // trigger` refuses a one-off, naming why.
    let job: serde_json::Value = serde_json::from_slice(&toc(&[
        "--json", "job", "get", "orders", "o-1", "--next", "3",
    ]))
    .unwrap();
    assert_eq!(job["next_fire_ats"], serde_json::json!([]));
    let refused = Command::new(env!("CARGO_BIN_EXE_toc"))
        .args(["job", "trigger", "orders", "o-1"])
        .envs(shell)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains("recurring"),
        "{err}"
    );
    // `toc job ls`: the topic's upcoming jobs, by fire time.
    toc(&["job", "put", "orders", "o-0", "--delay-ms", "30000"]);
    let out = toc(&["--json", "job", "ls", "orders", "--state", "scheduled"]);
    let page: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let ids: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["o-0", "o-1"]);
    // Labels: put with one, listed by it, cancelled by it (`toc job cancel-many`).
    toc(&[
        "job",
        "put",
        "orders",
        "o-2",
        "--delay-ms",
        "40000",
        "--label",
        "campaign=spring",
    ]);
    let out = toc(&[
        "--json",
        "job",
        "ls",
        "orders",
        "--label",
        "campaign:spring",
    ]);
    let page: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(page["items"][0]["id"], "o-2", "{page}");
    assert_eq!(page["items"][0]["labels"]["campaign"], "spring", "{page}");
    let out = toc(&[
        "--json",
        "job",
        "cancel-many",
        "orders",
        "--label",
        "campaign:spring",
    ]);
    let answer: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(answer["cancelled"], 1, "{answer}");
    // Flow limits: the topic's, a key's own, shown.
    toc(&["topic", "flow", "orders", "--parallelism", "4"]);
    toc(&[
        "flow",
        "set",
        "orders",
        "api.example.com:443",
        "--rate",
        "10",
    ]);
    let out = toc(&["--json", "flow", "show", "orders", "api.example.com:443"]);
    let view: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        (view["own"].clone(), view["limits"]["rate"].clone()),
        (serde_json::json!(true), serde_json::json!(10)),
        "{view}"
    );
    let out = toc(&["--json", "flow", "ls", "orders"]);
    let list: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(list["default"]["parallelism"], 4, "{list}");
}

/// `toc serve > toc.log`: a log written to a file (not a terminal) carries no colour codes,
/// and `log_format = "json"` writes one JSON object a line, for collectors.
#[tokio::test]
async fn logs_written_to_a_file_are_plain_text_or_json() {
    use common::process::{Skew, Toc};
    let dir = tempfile::tempdir().unwrap();
    let toc = Toc::start(
        "plain",
        &[("TOC_STORE", "memory".into())],
        Skew::None,
        dir.path(),
    )
    .await;
    let text = toc.log_text();
    assert!(text.contains("INFO"), "the log has lines: {text}");
    assert!(
        !text.contains('\x1b'),
        "a log file holds terminal colour codes: {text:?}"
    );
    let toc = Toc::start(
        "json",
        &[
            ("TOC_STORE", "memory".into()),
            ("TOC_LOG_FORMAT", "json".into()),
        ],
        Skew::None,
        dir.path(),
    )
    .await;
    let text = toc.log_text();
    let first = text.lines().next().expect("a log line");
    let line: serde_json::Value =
        serde_json::from_str(first).unwrap_or_else(|e| panic!("{e}: {first}"));
    // (The harness runs it memory only, which the first line warns of.)
    assert!(line["level"] == "INFO" || line["level"] == "WARN", "{line}");
    assert!(line["fields"]["message"].is_string(), "{line}");
}

/// `toc serve` with no settings keeps what it acknowledged: its journal in `toc-data/` of
/// the directory it runs in (made 0700, the journal 0600). A job scheduled, the process
/// killed with SIGKILL and started again in the same directory: the job is there, and fires.
/// With `memory.journal = none` the start log says in one line that nothing survives a
/// restart. What this cannot show: a disk that loses what it said it wrote (fsync is
/// `always` by default; tests/journal.rs and tests/journal_damage.rs cover the journal).
#[tokio::test]
async fn with_no_settings_a_job_survives_a_kill_and_fires() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let start = |log: &std::path::Path| {
        let mut cmd = common::toc_serve(env!("CARGO_BIN_EXE_toc"));
        // The built-in default, as a newcomer runs it: no journal setting at all.
        cmd.env_remove("TOC_MEMORY_JOURNAL")
            .current_dir(dir.path())
            .env("TOC_LISTEN", format!("127.0.0.1:{port}"))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap());
        Running(cmd.spawn().unwrap())
    };
    let http = reqwest::Client::new();
    let up = || async {
        crate::common::runtime::eventually(30, || async {
            match http.get(format!("{base}/health")).send().await {
                Ok(r) if r.status().is_success() => Ok(()),
                other => Err(format!("not up: {other:?}")),
            }
        })
        .await
    };
    let first = start(&dir.path().join("first.log"));
    up().await;
    // A pull topic's job stays until a consumer claims it: its fire is seen as a claim.
    let r = http
        .put(format!("{base}/v1/topics/q"))
        .json(&serde_json::json!({"default_type": "pull", "slots": 1}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let due = common::now_ms() + 2_000;
    let r = http
        .put(format!("{base}/v1/topics/q/jobs/order-1"))
        .json(&serde_json::json!({"fire_at": due}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let data = dir.path().join("toc-data");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700, "the data directory is private");
    assert_eq!(mode(&data.join("journal")), 0o600, "the journal is private");
    common::process::signal(first.0.id(), "KILL");
    drop(first);
    let _second = start(&dir.path().join("second.log"));
    up().await;
    let job: serde_json::Value = http
        .get(format!("{base}/v1/topics/q/jobs/order-1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(job["fire_at"], due, "the job survived the kill: {job}");
    let claimed = crate::common::runtime::eventually(15, || async {
        let r: serde_json::Value = http
            .post(format!("{base}/v1/topics/q/claim"))
            .json(&serde_json::json!({"max": 1}))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        match r["jobs"].as_array().map(Vec::len) {
            Some(1) => Ok(r),
            _ => Err(format!("not due yet: {r}")),
        }
    })
    .await;
    assert_eq!(claimed["jobs"][0]["id"], "order-1");
    assert!(common::now_ms() >= due, "never early");
}

/// `memory.journal = none` is memory only, and the start log says so in one line.
#[tokio::test]
async fn memory_only_is_said_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = dir.path().join("toc.log");
    let _server = Running(
        common::toc_serve(env!("CARGO_BIN_EXE_toc"))
            .current_dir(dir.path())
            .env("TOC_MEMORY_JOURNAL", "none")
            .env("TOC_LISTEN", format!("127.0.0.1:{port}"))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let said = crate::common::runtime::eventually(30, || async {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        match text
            .lines()
            .find(|l| l.contains("nothing survives a restart"))
        {
            Some(line) => Ok(line.to_string()),
            None => Err(format!("not said yet: {text}")),
        }
    })
    .await;
    assert!(said.contains("memory.journal = none"), "{said}");
    assert!(
        !dir.path().join("toc-data").exists(),
        "no data directory made"
    );
}

/// `toc serve --help` gives its own options and the variables of the settings, the listen
/// address first (before: the client's --url and --token only); `--listen` moves the
/// service, and an address beyond loopback with no tokens is refused naming `allow_open`,
/// as the setting is.
#[test]
fn serve_says_and_takes_where_it_listens() {
    let help = Command::new(env!("CARGO_BIN_EXE_toc"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for word in [
        "--listen",
        "TOC_LISTEN",
        "--data-dir",
        "TOC_STORE",
        "TOC_TOKENS",
    ] {
        assert!(
            help.contains(word),
            "toc serve --help names no {word}:\n{help}"
        );
    }
    let refused = common::toc_serve(env!("CARGO_BIN_EXE_toc"))
        .args(["--listen", "0.0.0.0:1"])
        .env_remove("TOC_TOKENS")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("allow_open"), "{err}");
    let port = free_port();
    let _server = Running(
        common::toc_serve(env!("CARGO_BIN_EXE_toc"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let url = format!("http://127.0.0.1:{port}");
    loop {
        let out = Command::new(env!("CARGO_BIN_EXE_toc"))
            .args(["--url", &url, "health"])
            .output()
            .unwrap();
        if out.status.success() {
            break;
        }
        assert!(Instant::now() < deadline, "nothing listens on {url}");
        // A poll (the client runs synchronously), every 50 ms of real time.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The start log calls a Redis store durable only when its primaries append every write
/// (before: "durable (Redis)" for a Redis started with `--save '' --appendonly no`). Through
/// a real `toc serve` on a Redis without persistence, then on one with `appendonly yes`.
#[tokio::test]
async fn the_start_log_says_what_redis_keeps_on_disk() {
    use common::RedisServer;
    use common::process::{Skew, Toc, redis_env};
    for (extra, says) in [
        (&[][..], "not durable"),
        (&["--appendonly", "yes"][..], "durable (Redis appendonly)"),
    ] {
        let redis = RedisServer::start_with(extra);
        let dir = tempfile::tempdir().unwrap();
        let svc = Toc::start("toc", &redis_env(redis.url()), Skew::None, dir.path()).await;
        let log = svc.log_text();
        let opened = log
            .lines()
            .find(|l| l.contains("store opened"))
            .unwrap_or_default()
            .to_string();
        assert!(opened.contains(says), "{extra:?}: {opened}\n{log}");
    }
}

//! A full store refuses whole requests and changes nothing it did not acknowledge, with real
//! processes: a Redis at its `maxmemory` (policy `noeviction`), the memory engine's journal
//! on a small tmpfs (appends fail with ENOSPC), and a Redis that evicts keys.
//!
//! What this proves: the jobs stored equal the jobs acknowledged, also after a `kill -9` and
//! restart of the memory engine; a refused single write is a 503 `store_full`; the journal
//! takes changes again once space is freed, without a restart; `toc serve` refuses an
//! evicting Redis unless told to allow it. What it cannot: a disk that fails in other ways
//! (EIO, a lying fsync), or memory pressure outside Redis' own accounting.

mod common;

use serde_json::{Value, json};

use common::RedisServer;
use common::process::{Skew, Toc, signal};

const TOPIC: &str = "fleet";

/// One batch of `n` creates through `POST /resets`: the jobs it created (0 when refused),
/// and whether the store refused any of it.
async fn batch(
    http: &reqwest::Client,
    toc: &Toc,
    round: usize,
    n: usize,
    pad: usize,
) -> (u64, bool) {
    let resets: Vec<Value> = (0..n)
        .map(|k| json!({"id": format!("j-{round}-{k}"), "delay_ms": 3_600_000}))
        .collect();
    let r = http
        .post(toc.url(&format!("/v1/topics/{TOPIC}/resets")))
        .json(&json!({"resets": resets, "create": {"type": "emit", "payload": {"pad": "x".repeat(pad)}}}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap();
    match status {
        200 => (
            body["created"].as_u64().unwrap(),
            body.get("refused")
                .is_some_and(|r| !r.as_array().unwrap().is_empty()),
        ),
        503 => {
            assert_eq!(body["error"]["code"], "store_full", "{body}");
            (0, true)
        }
        other => panic!("a batch was answered {other}: {body}"),
    }
}

/// The topic's stored jobs (scheduled, as every job here is due in an hour).
async fn stored(http: &reqwest::Client, toc: &Toc) -> u64 {
    let v: Value = http
        .get(toc.url(&format!("/v1/topics/{TOPIC}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["scheduled"].as_u64().unwrap() + v["running"].as_u64().unwrap()
}

/// Batches until the store has refused some, a few times over: the jobs acknowledged.
async fn fill(
    http: &reqwest::Client,
    toc: &Toc,
    from: usize,
    n: usize,
    pad: usize,
) -> (u64, usize) {
    let (mut acked, mut refusals) = (0, 0);
    for round in from..from + 400 {
        let (created, refused) = batch(http, toc, round, n, pad).await;
        acked += created;
        if refused {
            refusals += 1;
            if refusals >= 5 {
                return (acked, round + 1);
            }
        }
    }
    panic!("the store never refused a batch in 400 (acknowledged {acked})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_redis_stores_exactly_what_it_acknowledged() {
    let redis =
        RedisServer::start_with(&["--maxmemory", "8mb", "--maxmemory-policy", "noeviction"]);
    let dir = tempfile::tempdir().unwrap();
    let env = common::process::redis_env(redis.url());
    let toc = Toc::start("a", &env, Skew::None, dir.path()).await;
    let http = reqwest::Client::new();
    let (acked, _) = fill(&http, &toc, 0, 1_000, 512).await;
    let stored = stored(&http, &toc).await;
    eprintln!("Redis at maxmemory: {acked} jobs acknowledged, {stored} stored");
    assert_eq!(
        stored, acked,
        "the store holds jobs of requests it refused (or lost acknowledged ones)"
    );
    // A single write is refused whole, and reads go on. Redis frees a big batch's query
    // buffer a moment after it (its clientsCron), which may leave room for a few single
    // jobs: they are written until one is refused, and each one acknowledged is stored.
    let mut singles = 0;
    let refused_id = loop {
        let id = format!("one-more-{singles}");
        let r = http
            .put(toc.url(&format!("/v1/topics/{TOPIC}/jobs/{id}")))
            .json(&json!({"delay_ms": 60_000, "payload": {"pad": "x".repeat(512)}}))
            .send()
            .await
            .unwrap();
        match r.status().as_u16() {
            201 if singles < 200 => singles += 1,
            503 => {
                let body: Value = r.json().await.unwrap();
                assert_eq!(body["error"]["code"], "store_full", "{body}");
                break id;
            }
            other => panic!("a single write at maxmemory answered {other} after {singles}"),
        }
    };
    assert_eq!(
        self::stored(&http, &toc).await,
        acked + singles,
        "every single write acknowledged is stored"
    );
    let r = http
        .get(toc.url(&format!("/v1/topics/{TOPIC}/jobs/{refused_id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        404,
        "a refused write left a job behind"
    );
    let r = http
        .get(toc.url(&format!("/v1/topics/{TOPIC}/jobs/j-0-0")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        200,
        "reads go on while the store is full"
    );
}

/// A tmpfs of `size` mounted on `dir`, unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &std::path::Path, size: &str) -> Tmpfs {
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .expect("mount runs");
        assert!(
            out.status.success(),
            "this test mounts a small tmpfs to fill a disk, which needs root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_journal_disk_refuses_whole_requests_and_takes_changes_again_once_freed() {
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    let _tmpfs = Tmpfs::mount(&disk, "3m");
    // Room to free later.
    let ballast = disk.join("ballast");
    std::fs::write(&ballast, vec![0u8; 1 << 20]).unwrap();
    let env = [
        ("TOC_STORE", "memory".to_string()),
        (
            "TOC_MEMORY_JOURNAL",
            disk.join("toc.journal").display().to_string(),
        ),
    ];
    let mut toc = Toc::start("a", &env, Skew::None, dir.path()).await;
    let http = reqwest::Client::new();
    let (acked, next) = fill(&http, &toc, 0, 500, 64).await;
    let seen = stored(&http, &toc).await;
    let health: Value = http
        .get(toc.url("/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let warnings = health["store"]["warnings"].to_string();
    // Killed and started again: the journal holds exactly what was acknowledged.
    signal(toc.pid(), "KILL");
    drop(toc);
    toc = Toc::start("a", &env, Skew::None, dir.path()).await;
    let after_restart = stored(&http, &toc).await;
    eprintln!(
        "journal on a full disk: {acked} acknowledged, {seen} seen, {after_restart} after kill -9 and restart"
    );
    assert_eq!(
        seen, acked,
        "readers saw changes of refused requests (or lost acknowledged ones)"
    );
    assert_eq!(after_restart, acked, "the restart lost or added jobs");
    assert!(
        warnings.contains("refused"),
        "/health says why changes were refused: {health}"
    );
    // Space comes back: changes are taken again, without a restart.
    std::fs::remove_file(&ballast).unwrap();
    let (created, refused) = batch(&http, &toc, next, 500, 64).await;
    assert!(
        created == 500 && !refused,
        "the journal took no change once space was freed"
    );
    assert_eq!(stored(&http, &toc).await, acked + 500);
    signal(toc.pid(), "KILL");
    drop(toc);
    let toc = Toc::start("a", &env, Skew::None, dir.path()).await;
    assert_eq!(
        stored(&http, &toc).await,
        acked + 500,
        "after a second kill -9 and restart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toc_serve_refuses_an_evicting_redis_unless_told_to_allow_it() {
    let redis = RedisServer::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    let env = common::process::redis_env(redis.url());
    let (status, log) = Toc::refused(&env);
    assert!(
        !status.success(),
        "toc serve started on an evicting Redis: {log}"
    );
    assert!(
        log.contains("maxmemory-policy allkeys-lru") && log.contains("redis.allow_eviction"),
        "the error names the setting: {log}"
    );
    let mut allowed = env.to_vec();
    allowed.push(("TOC_REDIS_ALLOW_EVICTION", "true".to_string()));
    let dir = tempfile::tempdir().unwrap();
    let toc = Toc::start("a", &allowed, Skew::None, dir.path()).await;
    let health: Value = reqwest::get(toc.url("/health"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        health["store"]["warnings"]
            .to_string()
            .contains("allkeys-lru"),
        "/health warns of eviction: {health}"
    );
    assert!(
        toc.log_text().contains("maxmemory-policy allkeys-lru"),
        "a warning at start"
    );
}

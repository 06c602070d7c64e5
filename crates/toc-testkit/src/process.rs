//! Real processes for fault tests: a `toc serve` (optionally under libfaketime, with its
//! wall clock offset or stepped while its monotonic clock runs true), killed when dropped,
//! and a local webhook receiver that notes when each call arrived on this process's clock.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::redis_server::free_port;

/// The `toc` binary of the build that runs the test: `TOC_BIN` when set, else `toc` in the
/// target directory of the test's own executable (cargo puts test executables in
/// `target/PROFILE/deps/` and builds the package's binaries into `target/PROFILE/` before
/// its integration tests run).
pub fn toc_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("TOC_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("the test's own executable");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("toc"))
        .expect("the test executable sits in target/PROFILE/deps/");
    assert!(
        bin.is_file(),
        "{} is missing: build it with `cargo build` (cargo builds it before the product's \
         integration tests), or point TOC_BIN at a `toc` binary",
        bin.display()
    );
    bin
}

/// A `toc serve` command of the binary `bin`, without the `TOC_*` variables of the test's
/// own environment: `toc serve` refuses a `TOC_*` it does not know, so a harness setting
/// such as `TOC_OWNERS_JOBS` must not reach it, and a developer's own settings must not
/// change what a test runs. The test passes what the service needs with `.env`.
pub fn toc_serve(bin: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut cmd = service_command(bin);
    cmd.arg("serve");
    cmd
}

/// A command of a service binary `bin` (`toc serve`, or a program of the user's own that
/// runs `serve::Service`), with the environment `toc_serve` describes.
pub fn service_command(bin: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut cmd = std::process::Command::new(bin);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("TOC_") {
            cmd.env_remove(name);
        }
    }
    // No journal unless the caller gives one (a later `env` wins): toc serve's default,
    // toc-data/ in the directory it runs in, would be shared by every process a run starts.
    cmd.env("TOC_MEMORY_JOURNAL", "none");
    cmd
}

/// Where Debian's `faketime` package puts the multi-threaded preload library.
const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// The preload library, or a panic saying how to get it (tests never pass without it).
pub fn faketime_lib() -> &'static str {
    assert!(
        Path::new(FAKETIME_LIB).is_file(),
        "{FAKETIME_LIB} is missing: install libfaketime with `apt-get install -y faketime` \
         (scripts/test.sh installs it when missing)"
    );
    FAKETIME_LIB
}

/// Microseconds since the epoch on this (the test's, unskewed) clock.
pub fn wall_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// How a `toc serve` process sees the wall clock.
pub enum Skew {
    /// The real clock.
    None,
    /// Offset by a fixed amount, e.g. `"+2s"` or `"-2s"` (libfaketime's `FAKETIME`).
    Fixed(&'static str),
    /// Read from a file the test rewrites (`"+0"`, later `"+4s"`), to step the clock.
    File(PathBuf),
}

/// A running `toc serve`, killed (SIGKILL) when dropped; its log goes to `log`.
pub struct Toc {
    /// Its instance name (`runtime.instance`).
    pub name: String,
    pub port: u16,
    child: Child,
    pub log: PathBuf,
}

impl Toc {
    /// Starts `toc serve` with the settings `env` and the clock `skew`, and waits until
    /// `/health` answers (start-up, not test logic).
    pub async fn start(name: &str, env: &[(&str, String)], skew: Skew, dir: &Path) -> Toc {
        let mut toc = Toc::spawn(name, env, skew, dir);
        toc.wait_healthy().await;
        toc
    }

    /// Starts `toc serve` as `start` does, without waiting for it to answer.
    pub fn spawn(name: &str, env: &[(&str, String)], skew: Skew, dir: &Path) -> Toc {
        Toc::spawn_on(name, Some(name), free_port(), env, skew, dir)
    }

    /// Starts the service program `bin` (a `serve::Service` of the user's own, run with no
    /// arguments) as `start` starts `toc serve`, and waits until it answers.
    pub async fn start_program(bin: &Path, name: &str, env: &[(&str, String)], dir: &Path) -> Toc {
        let mut cmd = service_command(bin);
        let mut toc = Toc::spawn_cmd(
            &mut cmd,
            name,
            Some(name),
            free_port(),
            env,
            Skew::None,
            dir,
        );
        toc.wait_healthy().await;
        toc
    }

    /// Starts `toc serve` on `port` with no `runtime.instance`, so that it takes its default
    /// name (host and port: the same when started again on that port), and waits until it
    /// answers. `label` names its log (`label.log`, appended to at each start).
    pub async fn start_unnamed(label: &str, port: u16, env: &[(&str, String)], dir: &Path) -> Toc {
        let mut toc = Toc::spawn_on(label, None, port, env, Skew::None, dir);
        toc.wait_healthy().await;
        toc
    }

    fn spawn_on(
        name: &str,
        instance: Option<&str>,
        port: u16,
        env: &[(&str, String)],
        skew: Skew,
        dir: &Path,
    ) -> Toc {
        let mut cmd = toc_serve(toc_binary());
        Toc::spawn_cmd(&mut cmd, name, instance, port, env, skew, dir)
    }

    fn spawn_cmd(
        cmd: &mut std::process::Command,
        name: &str,
        instance: Option<&str>,
        port: u16,
        env: &[(&str, String)],
        skew: Skew,
        dir: &Path,
    ) -> Toc {
        let log = dir.join(format!("{name}.log"));
        // The tests' webhook receivers listen on loopback, which the egress policy refuses by
        // default: allowed here, and a test of the default passes an empty list.
        cmd.env("TOC_WEBHOOKS_ALLOW_NETS", "127.0.0.0/8,::1")
            // Short periods and retries, below the service's default floors (tested in
            // tests/limits.rs): the tests' series run every few hundred ms.
            .env("TOC_LIMITS_MIN_EVERY_MS", "1")
            .env("TOC_LIMITS_MIN_RETRY_DELAY_MS", "0")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env("TOC_LISTEN", format!("127.0.0.1:{port}"))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .unwrap(),
            );
        match instance {
            Some(instance) => cmd.env("TOC_RUNTIME_INSTANCE", instance),
            None => cmd.env_remove("TOC_RUNTIME_INSTANCE"),
        };
        let faked = !matches!(skew, Skew::None);
        match skew {
            Skew::None => {}
            Skew::Fixed(offset) => {
                cmd.env("FAKETIME", offset);
            }
            Skew::File(path) => {
                cmd.env("FAKETIME_TIMESTAMP_FILE", path);
            }
        }
        if faked {
            cmd.env("LD_PRELOAD", faketime_lib())
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
                .env("FAKETIME_NO_CACHE", "1");
        }
        let child = cmd.spawn().expect("toc serve starts");
        Toc {
            name: name.to_string(),
            port,
            child,
            log,
        }
    }

    /// Starts `toc serve` expecting it to refuse to start: its exit status and log, or a
    /// panic if it is still running after 30 s.
    pub fn refused(env: &[(&str, String)]) -> (std::process::ExitStatus, String) {
        let child = toc_serve(toc_binary())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env("TOC_LISTEN", format!("127.0.0.1:{}", free_port()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("toc serve starts");
        let (tx, rx) = std::sync::mpsc::channel();
        let pid = child.id();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(out) => {
                let out = out.unwrap();
                (
                    out.status,
                    String::from_utf8_lossy(&out.stderr).into_owned(),
                )
            }
            Err(_) => {
                let _ = std::process::Command::new("kill")
                    .arg("-9")
                    .arg(pid.to_string())
                    .status();
                panic!("toc serve did not refuse to start within 30 s");
            }
        }
    }

    /// `PUT`s job `id` of `topic` through this instance, which must create it (201).
    pub async fn put_job(
        &self,
        http: &reqwest::Client,
        topic: &str,
        id: &str,
        body: &serde_json::Value,
    ) {
        let r = http
            .put(self.url(&format!("/v1/topics/{topic}/jobs/{id}")))
            .json(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
    }

    /// The JSON `GET path` answers on this instance (a harness step: it must answer).
    pub async fn get_json(&self, http: &reqwest::Client, path: &str) -> serde_json::Value {
        http.get(self.url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The text `GET path` answers on this instance (`/metrics`, an export): a harness step,
    /// it must answer.
    pub async fn get_text(&self, http: &reqwest::Client, path: &str) -> String {
        http.get(self.url(path))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// The events of `topic` named `name` (the first 1,000 of its stream), as this instance
    /// reads them.
    pub async fn events(
        &self,
        http: &reqwest::Client,
        topic: &str,
        name: &str,
    ) -> Vec<serde_json::Value> {
        let page = self
            .get_json(http, &format!("/v1/topics/{topic}/events?limit=1000"))
            .await;
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == name)
            .cloned()
            .collect()
    }

    /// `PUT`s `topic`'s settings through this instance, which must take them; the topic.
    pub async fn put_topic(
        &self,
        http: &reqwest::Client,
        topic: &str,
        body: serde_json::Value,
    ) -> serde_json::Value {
        let r = http
            .put(self.url(&format!("/v1/topics/{topic}")))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
        r.json().await.unwrap()
    }

    /// The process id, for signals.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    async fn wait_healthy(&mut self) {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("toc serve stopped ({status}): {}", self.log_text());
            }
            if let Ok(r) = http.get(self.url("/health")).send().await
                && r.status().is_success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "toc serve did not become healthy in 30 s: {}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What the process has logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Toc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every slot the `toc serve` at `base` serves, as `/v1/slots` pages them (with auth off),
/// or `None` while it does not answer.
pub async fn served_slots(http: &reqwest::Client, base: &str) -> Option<Vec<serde_json::Value>> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut req = http
            .get(format!("{base}/v1/slots"))
            .query(&[("limit", "1000")]);
        if let Some(a) = &after {
            req = req.query(&[("after", a)]);
        }
        let page: serde_json::Value = req.send().await.ok()?.json().await.ok()?;
        out.extend(page["items"].as_array()?.iter().cloned());
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_string()),
            None => return Some(out),
        }
    }
}

/// A local HTTP server that answers every request 200 and notes, per request body's `id`,
/// when it arrived (µs on this process's clock) and how often.
pub struct Receiver {
    pub port: u16,
    seen: Arc<Mutex<HashMap<String, Vec<i64>>>>,
    calls: Arc<Calls>,
}

/// Calls being answered now, and the most there were at once.
#[derive(Default)]
struct Calls {
    /// How long each call is held before its answer.
    delay: Duration,
    now: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

impl Receiver {
    pub fn start() -> Receiver {
        Receiver::slow(Duration::ZERO)
    }

    /// A receiver that holds each call `delay` before it answers.
    pub fn slow(delay: Duration) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<HashMap<String, Vec<i64>>>> = Arc::default();
        let calls = Arc::new(Calls {
            delay,
            ..Calls::default()
        });
        let (s, c) = (seen.clone(), calls.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (s, c) = (s.clone(), c.clone());
                std::thread::spawn(move || serve_connection(stream, &s, &c));
            }
        });
        Receiver { port, seen, calls }
    }

    /// The most calls it was answering at once.
    pub fn most_at_once(&self) -> usize {
        self.calls.most.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// Each id seen, with its arrivals.
    pub fn seen(&self) -> HashMap<String, Vec<i64>> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until `ids` have all arrived, or `limit` passes; answers what arrived.
    pub async fn wait_for(&self, ids: usize, limit: Duration) -> HashMap<String, Vec<i64>> {
        let deadline = Instant::now() + limit;
        loop {
            let seen = self.seen();
            if seen.len() >= ids || Instant::now() >= deadline {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Reads requests off one kept-alive connection and answers each 200.
fn serve_connection(stream: TcpStream, seen: &Mutex<HashMap<String, Vec<i64>>>, calls: &Calls) {
    use std::sync::atomic::Ordering::SeqCst;
    let mut out = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let arrived = wall_us();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let at_once = calls.now.fetch_add(1, SeqCst) + 1;
        calls.most.fetch_max(at_once, SeqCst);
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body)
            && let Some(id) = v["id"].as_str()
        {
            seen.lock()
                .unwrap()
                .entry(id.to_string())
                .or_default()
                .push(arrived);
        }
        if !calls.delay.is_zero() {
            std::thread::sleep(calls.delay);
        }
        calls.now.fetch_sub(1, SeqCst);
        let reply = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        if out.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// A child process killed (SIGKILL) and reaped when dropped, however the test ends.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The settings of a `toc serve` on the Redis at `url`.
pub fn redis_env(url: String) -> Vec<(&'static str, String)> {
    vec![("TOC_STORE", "redis".to_string()), ("TOC_REDIS_URL", url)]
}

/// Sends `signal` (`"STOP"`, `"CONT"`, `"KILL"`) to process `pid`.
pub fn signal(pid: u32, signal: &str) {
    let ok = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "kill -{signal} {pid} failed");
}

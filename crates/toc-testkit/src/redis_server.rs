//! A real `redis-server` started on a free port in a temporary directory and stopped when
//! dropped: what the tests, the benchmarks and `toc bench` run against. A missing
//! `redis-server` is reported with how to install it.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
    clustered: bool,
    /// Settings given after the harness's own, which they override (`--appendonly yes`).
    extra: Vec<String>,
    /// For a server that is never dropped: the shell that stops it when this process exits,
    /// and the write end of the pipe it waits on (see `start_for_process`).
    exit_watch: Option<(Child, std::process::ChildStdin)>,
}

/// How to get `redis-server` when it is missing.
pub const INSTALL_HINT: &str = "redis-server was not found on PATH. Install it with \
     `apt-get update && apt-get install -y redis-server` (Debian/Ubuntu), or run \
     `scripts/test.sh`, which installs it when missing.";

/// The `redis-server` on PATH.
pub fn redis_server_binary() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("redis-server"))
            .find(|p| p.is_file())
    })
}

/// A free port whose cluster bus port (the port + 10000) is free as well.
fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port <= 55_535 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free local port")
}

impl RedisServer {
    /// Starts a server, or panics with how to install one (for tests and benchmarks).
    pub fn start() -> RedisServer {
        RedisServer::start_mode(false, &[])
    }

    /// Starts a server with settings of the test's after the harness's own, for example
    /// `["--appendonly", "yes", "--appendfsync", "always"]` for one whose data survives a
    /// SIGKILL.
    pub fn start_with(extra: &[&str]) -> RedisServer {
        RedisServer::start_mode(false, extra)
    }

    /// Starts a server, or says why not.
    pub fn try_start() -> Result<RedisServer, String> {
        if redis_server_binary().is_none() {
            return Err(INSTALL_HINT.to_string());
        }
        std::panic::catch_unwind(|| RedisServer::start_mode(false, &[])).map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "redis-server did not start".to_string())
        })
    }

    /// A server for a `static`, which Rust never drops: it is stopped when this process
    /// exits, by a shell that waits for the end of a pipe only this process holds (a test
    /// binary's shared server outlived every run before).
    pub fn start_for_process() -> RedisServer {
        let mut server = RedisServer::start();
        let pid = server
            .child
            .as_ref()
            .map(Child::id)
            .expect("a running server");
        let mut watch = Command::new("sh")
            .arg("-c")
            .arg(format!("cat >/dev/null; kill {pid}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh starts");
        let pipe = watch.stdin.take().expect("the watcher's stdin");
        server.exit_watch = Some((watch, pipe));
        server
    }

    /// A node with cluster mode on, for `RedisCluster`.
    pub fn start_clustered() -> RedisServer {
        RedisServer::start_mode(true, &[])
    }

    /// A cluster node with settings of the test's after the harness's own.
    pub fn start_clustered_with(extra: &[&str]) -> RedisServer {
        RedisServer::start_mode(true, extra)
    }

    /// A free port can be taken by another process between the probe and the server's
    /// bind (and a cluster node also needs its bus port, the port + 10000): a server that
    /// exits at start is tried again on another port, a few times.
    fn start_mode(clustered: bool, extra: &[&str]) -> RedisServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut server = RedisServer {
            port: 0,
            child: None,
            dir,
            clustered,
            extra: extra.iter().map(|a| a.to_string()).collect(),
            exit_watch: None,
        };
        let mut last = String::new();
        for _ in 0..5 {
            server.port = if clustered {
                free_cluster_port()
            } else {
                free_port()
            };
            match server.try_launch() {
                Ok(()) => return server,
                Err(e) => last = e,
            }
        }
        panic!("{last}");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn launch(&mut self) {
        if let Err(e) = self.try_launch() {
            panic!("{e}");
        }
    }

    fn try_launch(&mut self) -> Result<(), String> {
        let binary = redis_server_binary().unwrap_or_else(|| panic!("{INSTALL_HINT}"));
        let mut cmd = Command::new(binary);
        if self.clustered {
            cmd.args(["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"]);
        }
        let child = cmd
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        self.wait_until_ready()
    }

    /// Waits for the server to answer PING (start-up, not test logic).
    fn wait_until_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.ping() {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!(
                    "redis-server on port {} exited at start: {status}",
                    self.port
                ));
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not answer within 10 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn ping(&self) -> bool {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_ok()
    }

    /// A blocking connection for assertions on the raw data.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("a connection to the test redis-server")
    }

    /// Stops the server (keeping its port) so a test can see the store unreachable.
    pub fn stop(&mut self) {
        // The watcher first, so that it never kills a process that took the server's pid.
        if let Some((mut watch, _pipe)) = self.exit_watch.take() {
            let _ = watch.kill();
            let _ = watch.wait();
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, with no data.
    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }

    /// Starts a stopped server again on the same port and in the same directory: one
    /// started with an append-only file comes back with its data.
    pub fn start_again(&mut self) {
        self.launch();
    }

    /// The server's process id, for signals (SIGSTOP, SIGKILL).
    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .map(Child::id)
            .expect("a running server")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `redis-benchmark -P 64` with `args` against `host:port`: requests per second.
pub fn redis_benchmark_at(
    host: &str,
    port: u16,
    requests: u64,
    args: &[&str],
) -> Result<f64, String> {
    let out = std::process::Command::new("redis-benchmark")
        .args([
            "-h",
            host,
            "-p",
            &port.to_string(),
            "-P",
            "64",
            "-q",
            "-n",
            &requests.to_string(),
        ])
        .args(args)
        .output()
        .map_err(|e| format!("redis-benchmark (it comes with redis-server): {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.rsplit('\r')
        .next()
        .unwrap_or(&text)
        .split_whitespace()
        .find_map(|w| w.parse::<f64>().ok())
        .ok_or_else(|| format!("cannot read redis-benchmark's output: {text}"))
}

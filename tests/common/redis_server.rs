//! A real `redis-server` for one test: started on a free port in a temporary directory,
//! stopped when dropped. A missing `redis-server` fails the test with how to install it.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
    clustered: bool,
}

pub fn redis_server_binary() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("redis-server"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "redis-server was not found on PATH. The tests need a real Redis: install it with \
             `apt-get update && apt-get install -y redis-server` (Debian/Ubuntu), or run \
             `scripts/test.sh`, which installs it when missing."
        )
    })
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free local port")
}

impl RedisServer {
    pub fn start() -> RedisServer {
        RedisServer::start_mode(false)
    }

    /// A node with cluster mode on, for `RedisCluster`.
    pub fn start_clustered() -> RedisServer {
        RedisServer::start_mode(true)
    }

    fn start_mode(clustered: bool) -> RedisServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut server = RedisServer {
            port: free_port(),
            child: None,
            dir,
            clustered,
        };
        server.launch();
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn launch(&mut self) {
        let binary = redis_server_binary();
        let mut cmd = Command::new(binary);
        if self.clustered {
            cmd.args(["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"]);
        }
        let child = cmd
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        self.wait_until_ready();
    }

    /// Waits for the server to answer PING (start-up, not test logic).
    fn wait_until_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.ping() {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "redis-server on port {} exited at start: {status}",
                    self.port
                );
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
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

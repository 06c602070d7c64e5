//! A real local Redis Cluster of three primaries on free ports, for the tests of cluster
//! behaviour and `toc bench cluster` (the tests include this file). Stopped when dropped.

use std::process::Command;
use std::time::{Duration, Instant};

use super::redis_server::RedisServer;

pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start() -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start_clustered()).collect();
        RedisCluster::create(nodes, 0)
    }

    /// Three primaries, node `i` started with `extra(i)` after the harness's own settings
    /// (a TLS port of its own, say).
    pub fn start_each_with(extra: impl Fn(usize) -> Vec<String>) -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|i| {
                let args = extra(i);
                RedisServer::start_clustered_with(
                    &args.iter().map(String::as_str).collect::<Vec<_>>(),
                )
            })
            .collect();
        RedisCluster::create(nodes, 0)
    }

    /// Makes a cluster of `nodes` with `replicas` replicas per primary, and waits for it.
    fn create(nodes: Vec<RedisServer>, replicas: u32) -> RedisCluster {
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let status = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .expect("redis-cli runs (it comes with redis-server: apt-get install -y redis-server)");
        assert!(
            status.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&status.stdout)
        );
        let cluster = RedisCluster { nodes };
        cluster.wait_until_ok();
        cluster
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url()).collect()
    }

    /// Waits for every node to report `cluster_state:ok` (start-up, not test logic).
    fn wait_until_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let all_ok = self.nodes.iter().all(|n| {
                let mut c = n.conn();
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut c)
                    .unwrap_or_default();
                info.contains("cluster_state:ok")
            });
            if all_ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not become ok within 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl RedisCluster {
    /// Six nodes, three primaries with a replica each, every node started with `extra`
    /// (for example an append-only file and a short `--cluster-node-timeout`); returns once
    /// every replica has caught up with its primary.
    pub fn start_replicated(extra: &[&str]) -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..6)
            .map(|_| RedisServer::start_clustered_with(extra))
            .collect();
        let cluster = RedisCluster::create(nodes, 1);
        cluster.wait_replicas_synced();
        cluster
    }

    /// The index of node `i`'s primary, when `i` is a replica.
    pub fn primary_of(&self, i: usize) -> Option<usize> {
        let info = replication_info(&self.nodes[i]);
        if !info.contains("role:slave") {
            return None;
        }
        let port: u16 = field(&info, "master_port")?.parse().ok()?;
        self.nodes.iter().position(|n| n.port == port)
    }

    /// Waits until every replica's link is up and its offset has reached its primary's.
    pub fn wait_replicas_synced(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let synced = (0..self.nodes.len()).all(|i| match self.primary_of(i) {
                None => true,
                Some(p) => {
                    let mine = replication_info(&self.nodes[i]);
                    let theirs = replication_info(&self.nodes[p]);
                    mine.contains("master_link_status:up")
                        && field(&mine, "slave_repl_offset") == field(&theirs, "master_repl_offset")
                }
            });
            if synced {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the replicas did not catch up within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `INFO replication` of a node ("" when it does not answer).
pub fn replication_info(node: &RedisServer) -> String {
    redis::Client::open(node.url())
        .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
        .and_then(|mut c| {
            redis::cmd("INFO")
                .arg("replication")
                .query::<String>(&mut c)
        })
        .unwrap_or_default()
}

/// A `name:value` line of an INFO reply.
pub fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

//! A real local Redis Cluster of three primaries on free ports, for the tests of cluster
//! behaviour. Stopped when dropped.

use std::process::Command;
use std::time::{Duration, Instant};

use super::redis_server::RedisServer;

pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start() -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start_clustered()).collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let status = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
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

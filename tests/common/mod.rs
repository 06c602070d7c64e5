//! Shared test support: a real Redis per test, and helpers over the store.
#![allow(dead_code, unused_imports, unused_macros)]

// The real processes the tests run against live in the test kit (`crates/toc-testkit`),
// shared with the benchmarks and the load generator.
pub use toc_testkit::delay_proxy as delay;
pub use toc_testkit::{process, redis_cluster, redis_server};
pub mod runtime;
pub mod service;

/// The one clock helper of the tests: the wall clock, as the service's own `now_ms` reads it.
pub use timeout_center::time::now_ms;

/// Runs the `toc` CLI with `args` against the service at `url` (no token): its exit
/// status, standard output and standard error.
pub fn toc_cli(url: &str, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toc"))
        .env("TOC_URL", url)
        .env_remove("TOC_TOKEN")
        .args(args)
        .output()
        .expect("toc runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The wall clock in ms, unsigned (for times compared with `u64` fields).
pub fn now_ms_u64() -> u64 {
    u64::try_from(now_ms()).expect("after the epoch")
}

pub use redis_cluster::RedisCluster;
pub use redis_server::RedisServer;

use std::sync::Arc;

use timeout_center::Store;
use timeout_center::{SharedStore, StoreOptions};

/// Every key and value in `server`, for checking that a rejected call changed nothing. The
/// instance registry (`toc:instances` and its types) is left out: a running service's heartbeat rewrites
/// it on its own.
pub fn redis_dump(server: &RedisServer) -> Vec<(String, Vec<u8>)> {
    let mut conn = server.conn();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    keys.retain(|k| k != "toc:instances" && k != "{toc:instances}:types");
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let v: Vec<u8> = redis::cmd("DUMP").arg(&k).query(&mut conn).unwrap();
            (k, v)
        })
        .collect()
}

/// A store engine under test, with whatever keeps it alive (the Redis server).
pub struct Engine {
    pub store: SharedStore,
    pub redis: Option<RedisServer>,
    pub memory: Option<Arc<Store>>,
}

impl Engine {
    /// A fresh store of `kind` with default options.
    pub async fn of(kind: Kind) -> Engine {
        Engine::of_with(kind, StoreOptions::default()).await
    }

    /// A fresh store of `kind` with `options`.
    pub async fn of_with(kind: Kind, options: StoreOptions) -> Engine {
        match kind {
            Kind::Redis => Engine::redis_with(options).await,
            Kind::Memory => Engine::memory_with(options).await,
        }
    }

    /// The engine's kind.
    pub fn kind(&self) -> Kind {
        if self.redis.is_some() {
            Kind::Redis
        } else {
            Kind::Memory
        }
    }

    pub async fn redis() -> Engine {
        Engine::redis_with(StoreOptions::default()).await
    }

    pub async fn redis_with(options: StoreOptions) -> Engine {
        let server = RedisServer::start();
        let store = Store::redis(&server.url(), options)
            .await
            .expect("connect to the test redis-server");
        Engine {
            store: Arc::new(store),
            redis: Some(server),
            memory: None,
        }
    }

    pub async fn memory() -> Engine {
        Engine::memory_with(StoreOptions::default()).await
    }

    pub async fn memory_with(options: StoreOptions) -> Engine {
        let store = Arc::new(Store::memory(options));
        Engine {
            store: store.clone(),
            redis: None,
            memory: Some(store),
        }
    }

    /// The whole stored state, for checking that a rejected call changed nothing.
    pub fn dump(&self) -> Vec<String> {
        match &self.memory {
            Some(m) => m.dump(),
            None => self
                .redis_dump()
                .into_iter()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect(),
        }
    }

    /// Every key and value in Redis, for checking that a rejected call changed nothing.
    pub fn redis_dump(&self) -> Vec<(String, Vec<u8>)> {
        self.redis.as_ref().map(redis_dump).unwrap_or_default()
    }
}

/// Instantiates `async fn NAME(arg)` tests once per engine, as `redis_engine::NAME` and
/// `memory_engine::NAME`: `$make(Kind)` makes each one's argument (`Engine::of` for a store,
/// `kind` for the kind alone), and `#[$test]` is the test attribute (`tokio::test`,
/// `actix_rt::test`). The one engine matrix of the suite.
macro_rules! engine_matrix {
    (#[$test:meta] $make:path; $($name:ident),* $(,)?) => {
        mod redis_engine {
            $(
                #[$test]
                async fn $name() {
                    super::$name($make(crate::common::Kind::Redis).await).await
                }
            )*
        }
        mod memory_engine {
            $(
                #[$test]
                async fn $name() {
                    super::$name($make(crate::common::Kind::Memory).await).await
                }
            )*
        }
    };
}

/// Which engine a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Memory,
    Redis,
}

/// The kind itself, for `engine_matrix!` tests that build their own service.
pub async fn kind(k: Kind) -> Kind {
    k
}

pub use toc_testkit::process::toc_serve;

/// `toc serve` processes on one engine: their directory, the Redis they share (for
/// `Kind::Redis`), and the processes, named `a`, `b`, ... On memory each has its own store.
pub struct Fleet {
    pub dir: tempfile::TempDir,
    pub redis: Option<RedisServer>,
    /// What each was started with (`TOC_STORE`, the Redis URL or the memory journal).
    pub env: Vec<(&'static str, String)>,
    pub tocs: Vec<process::Toc>,
}

impl Fleet {
    /// `count` instances on `kind`'s engine; `journal`: on memory, keep a journal (in the
    /// fleet's directory) so that a restart finds the jobs.
    pub async fn start(kind: Kind, count: usize, journal: bool) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let redis = (kind == Kind::Redis).then(RedisServer::start);
        let mut env = match &redis {
            Some(r) => process::redis_env(r.url()),
            None => vec![("TOC_STORE", "memory".to_string())],
        };
        if journal && redis.is_none() {
            let path = dir.path().join("journal").display().to_string();
            env.push(("TOC_MEMORY_JOURNAL", path));
        }
        let mut fleet = Fleet {
            dir,
            redis,
            env,
            tocs: Vec::new(),
        };
        fleet.restart(count).await;
        fleet
    }

    /// Starts `count` instances (again), named as at the first start.
    pub async fn restart(&mut self, count: usize) {
        for name in ["a", "b", "c", "d"].into_iter().take(count) {
            let toc =
                process::Toc::start(name, &self.env, process::Skew::None, self.dir.path()).await;
            self.tocs.push(toc);
        }
    }
}

/// The most of `times_us` in any one second.
pub fn busiest_second(times_us: &[i64]) -> usize {
    let mut t = times_us.to_vec();
    t.sort_unstable();
    let mut best = 0;
    let mut start = 0;
    for end in 0..t.len() {
        while t[end] - t[start] >= 1_000_000 {
            start += 1;
        }
        best = best.max(end - start + 1);
    }
    best
}

/// The door of slot `slot` of the existing topic `topic` under owner fence `fence` (0: owns
/// nothing), or the test fails saying which.
pub async fn door(
    s: &Store,
    topic: &str,
    slot: u32,
    fence: u64,
) -> timeout_center::conformance::SlotDoor {
    timeout_center::conformance::RuntimeOps::door(s, topic, slot, fence)
        .await
        .unwrap_or_else(|e| panic!("the door of topic {topic:?} slot {slot}: {e}"))
}

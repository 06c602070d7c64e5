//! The test kit: the real processes that timeout-center's tests, its focused benchmarks and
//! its load generator (`toc-bench`) run against, each started on a free loopback port and
//! stopped when dropped. Nothing here knows the product's types: it starts processes and
//! speaks their protocols.
//!
//! - [`redis_server`]: a `redis-server` (standalone, clustered, or kept for the life of the
//!   process); a missing binary is reported with how to install it.
//! - [`redis_cluster`]: a local Redis Cluster of such servers, with replicas on demand.
//! - [`delay_proxy`]: a slow Redis on loopback (a TCP proxy that delays each read).
//! - [`process`]: `toc serve` as a real process (under libfaketime when a test skews its
//!   clock), a webhook receiver, signals.
//! - [`wait`]: the one way tests wait: `eventually` a state holds, `quiet` while nothing
//!   should happen.

pub mod delay_proxy;
pub mod process;
pub mod redis_cluster;
pub mod redis_server;
pub mod wait;

pub use redis_cluster::RedisCluster;
pub use redis_server::{RedisServer, free_port};

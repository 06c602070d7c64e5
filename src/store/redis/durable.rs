//! Acknowledgements that survive the loss of a primary (`redis.durability = "replica"`):
//! every write answered to a caller is sent in one pipeline with a `WAIT` after it, on the
//! connection that takes the write. `WAIT` returns once that many replicas hold every write
//! sent before it on its connection, so the pair confirms exactly this write, on exactly the
//! node that took it. A `WAIT` cannot run inside a script (it would not block there), so it
//! follows the script in the pipeline.
//!
//! - **No false confirmation.** The write and its `WAIT` leave in one pipeline, on one
//!   connection: no reconnection can come between them (before, the `WAIT` went on a
//!   connection of its own after the write's reply, and a connection remade to another node
//!   in that gap confirmed a write the new node never saw). A connection lost before both
//!   replies came back answers the caller 503, unconfirmed. On a Cluster, a pipeline that the
//!   cluster client sends again (a `MOVED` after a failover) sends the write again with its
//!   `WAIT`: what confirms is the node that then holds it.
//! - **One shard's missing replica refuses only its own slots.** On a Cluster the pipeline
//!   goes to the node of the write's key, and its `WAIT` counts that node's replicas only
//!   (before, one `WAIT` went to every primary and the fewest replicas counted, so a promoted
//!   primary without a replica refused writes to every slot of the store).
//! - A `WAIT` that finds too few replicas in time answers `Error::Unavailable` (HTTP 503)
//!   naming the topic and slot: the write is on its primary but not confirmed, and is never
//!   reported as a success.
//!
//! The settles of slot actors do not wait: a settle lost with a primary leaves its run to
//! run again when its lease ends (at least once), which is what the run's outcome promised.

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Cmd, FromRedisValue, RedisResult};

use crate::error::{Error, Result};

/// What a confirmed write waits for: `replicas` replicas within `timeout`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Wait {
    replicas: u32,
    timeout: Duration,
}

impl Wait {
    pub(super) fn new(replicas: u32, timeout: Duration) -> Self {
        Wait { replicas, timeout }
    }

    /// Sends `cmd` and its `WAIT` in one pipeline over `conn`: the write's reply, and how
    /// many replicas hold it.
    pub(super) async fn send<C: ConnectionLike, T: FromRedisValue>(
        &self,
        conn: &mut C,
        cmd: &Cmd,
    ) -> RedisResult<(T, i64)> {
        let millis = u64::try_from(self.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut pipe = redis::pipe();
        pipe.add_command(cmd.clone())
            .cmd("WAIT")
            .arg(self.replicas)
            .arg(millis);
        pipe.query_async(conn).await
    }

    /// `Ok` when `got` replicas are enough; the refusal names `place` (a topic and slot, or
    /// what was written).
    pub(super) fn check(&self, got: i64, place: &str) -> Result<()> {
        if got >= i64::from(self.replicas) {
            return Ok(());
        }
        Err(Error::Unavailable(format!(
            "the write to {place} reached its primary, but {got} of the {} replica(s) that \
             redis.durability asks for confirmed it within {} ms: it may be lost if that \
             primary fails (a primary without a replica refuses its own slots' writes)",
            self.replicas,
            self.timeout.as_millis()
        )))
    }
}

/// A connection lost before a write's `WAIT` answered: the write is not confirmed.
pub(super) fn unconfirmed(e: &redis::RedisError, place: &str) -> Error {
    Error::Unavailable(format!(
        "the write to {place} could not be confirmed on the node that took it: {e}"
    ))
}

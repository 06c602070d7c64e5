//! Acknowledgements that survive the loss of a primary (`redis.durability = "replica"`):
//! every write answered to a caller is confirmed by a `WAIT` on the connection that took it.
//! `WAIT` returns once that many replicas hold every write sent before it on its connection.
//! A `WAIT` cannot run inside a script (it would not block there), so it follows the write.
//!
//! - **On one node or behind Sentinel, grouped and checked.** The write goes in one pipeline
//!   with `CLIENT ID`, and one `WAIT` (with `CLIENT ID` again) covers every write whose
//!   reply came back before it, on the same connection, so under load a write costs a
//!   fraction of a replica round trip. A write confirms only if both ids match: a connection
//!   remade in between (to a new primary after a failover) confirms nothing, and the caller
//!   gets 503 (before, the `WAIT` went on a connection of its own, and one remade to another
//!   node confirmed a write the new node never saw).
//! - **On a Cluster, one pipeline a write.** The write and its `WAIT` leave in one pipeline,
//!   on one connection, to the write's node: no reconnection can come between them. A
//!   connection lost before both replies came back answers the caller 503, unconfirmed. A
//!   pipeline that the cluster client sends again (a `MOVED` after a failover) sends the
//!   write again with its `WAIT`: what confirms is the node that then holds it.
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

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Cmd, FromRedisValue, RedisResult};

use crate::error::{Error, Result};

/// What a confirmed write waits for: `replicas` replicas within `timeout`; grouped on one
/// node or behind Sentinel, one `WAIT` a write on a Cluster.
pub(super) struct Wait {
    replicas: u32,
    timeout: Duration,
    group: Option<Group>,
}

/// Writes waiting for one `WAIT` together, on the connection they went on.
#[derive(Default)]
struct Group {
    /// Writes whose reply came back, numbered as they joined.
    joined: AtomicU64,
    /// Held while a `WAIT` is in flight: what the last one found.
    last: tokio::sync::Mutex<Last>,
}

/// The last grouped `WAIT`: the writes it covers (numbers up to `covers`), the replicas it
/// counted, and the id of the connection it ran on (`CLIENT ID`), or why it failed.
#[derive(Default)]
struct Last {
    covers: u64,
    got: i64,
    id: i64,
    failed: Option<String>,
}

/// What came back with a write: the replicas its own `WAIT` counted, or the id of the
/// connection it went on (a grouped `WAIT` on that connection follows).
pub(super) enum Sent {
    Waited(i64),
    On(i64),
}

impl Wait {
    /// `grouped`: one `WAIT` covers every write whose reply came back before it, on the
    /// connection they share (one node, or Sentinel's primary); else each write carries its
    /// own `WAIT` to its node (a Cluster).
    pub(super) fn new(replicas: u32, timeout: Duration, grouped: bool) -> Self {
        Wait {
            replicas,
            timeout,
            group: grouped.then(Group::default),
        }
    }

    fn millis(&self) -> u64 {
        u64::try_from(self.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// Sends `cmd` in one pipeline with its own `WAIT`, or with `CLIENT ID` when grouped.
    pub(super) async fn send<C: ConnectionLike, T: FromRedisValue>(
        &self,
        conn: &mut C,
        cmd: &Cmd,
    ) -> RedisResult<(T, Sent)> {
        let mut pipe = redis::pipe();
        pipe.add_command(cmd.clone());
        if self.group.is_some() {
            pipe.cmd("CLIENT").arg("ID");
            let (reply, id): (T, i64) = pipe.query_async(conn).await?;
            Ok((reply, Sent::On(id)))
        } else {
            pipe.cmd("WAIT").arg(self.replicas).arg(self.millis());
            let (reply, got): (T, i64) = pipe.query_async(conn).await?;
            Ok((reply, Sent::Waited(got)))
        }
    }

    /// `Ok` once the replicas hold the write `sent` reports; `conn` is the connection the
    /// write went on (a grouped `WAIT` runs there, and counts only if it ran on the same
    /// connection as the write: a connection remade in between confirms nothing).
    pub(super) async fn confirm<C: ConnectionLike>(
        &self,
        conn: &mut C,
        sent: Sent,
        place: &str,
    ) -> Result<()> {
        let id = match sent {
            Sent::Waited(got) => return self.check(got, place),
            Sent::On(id) => id,
        };
        let Some(group) = &self.group else {
            return Err(Error::Corrupt("a grouped write without its group".into()));
        };
        let mine = group.joined.fetch_add(1, Ordering::SeqCst) + 1;
        let mut last = group.last.lock().await;
        if last.covers < mine {
            // Every write that joined by now came back before this WAIT is sent.
            let covers = group.joined.load(Ordering::SeqCst);
            let mut pipe = redis::pipe();
            pipe.cmd("WAIT")
                .arg(self.replicas)
                .arg(self.millis())
                .cmd("CLIENT")
                .arg("ID");
            *last = match pipe.query_async::<(i64, i64)>(conn).await {
                Ok((got, id)) => Last {
                    covers,
                    got,
                    id,
                    failed: None,
                },
                Err(e) => Last {
                    covers,
                    failed: Some(e.to_string()),
                    ..Last::default()
                },
            };
        }
        if let Some(e) = &last.failed {
            return Err(Error::Unavailable(format!(
                "the write to {place} could not be confirmed on the node that took it: {e}"
            )));
        }
        if last.id != id {
            return Err(Error::Unavailable(format!(
                "the write to {place} went on a connection that was remade before its WAIT: \
                 it is not confirmed"
            )));
        }
        self.check(last.got, place)
    }

    /// `Ok` when `got` replicas are enough; the refusal names `place` (a topic and slot, or
    /// what was written).
    fn check(&self, got: i64, place: &str) -> Result<()> {
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

//! Acknowledgements that survive the loss of a primary (`redis.durability = "replica"`):
//! every write answered to a caller goes over a connection of its own and is followed by a
//! `WAIT`, which returns once that many replicas hold every write sent before it on that
//! connection. A `WAIT` cannot run inside a script (it would not block there), so it follows
//! the script's reply.
//!
//! Waits are grouped: a caller whose write has come back joins the next `WAIT`, and one
//! `WAIT` answers every caller that joined before it was sent, so under load the cost per
//! job is a fraction of one round trip to a replica. A `WAIT` that finds too few replicas in
//! time fails every caller it covered with `Error::Unavailable` (HTTP 503): the write is on
//! the primary, but it is not confirmed, and is never reported as a success.
//!
//! On a Redis Cluster the `WAIT` goes to every primary (the cluster connection sends it on
//! each node's connection, where the writes went) and the fewest replicas count, so a
//! primary whose replica lags refuses confirmations for the whole store until it catches up.
//! The settles of slot actors do not wait: a settle lost with a primary leaves its run to
//! run again when its lease ends (at least once), which is what the run's outcome promised.
//!
//! What it cannot see yet: `WAIT` counts the writes sent on its own connection. A connection
//! that drops after a write's reply and is remade, to another node after a failover, before
//! the next `WAIT` is sent would have that `WAIT` count none of them, and confirm the write
//! falsely. The window is the gap between a write's reply and the `WAIT` after it; closing it
//! needs the write and its `WAIT` sent in one pipeline on a connection that never reconnects
//! by itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::ConnectionLike;

use crate::error::{Error, Result};

/// Confirms writes on a connection of their own, as `WAIT replicas timeout` answers.
pub(super) struct Confirmer<C> {
    conn: C,
    replicas: u32,
    timeout: Duration,
    /// Writes whose reply came back, numbered as they joined.
    joined: AtomicU64,
    /// Held while a `WAIT` is in flight: the newest write numbers that one confirmed and
    /// that one failed (a later success covers every earlier write).
    outcome: tokio::sync::Mutex<(u64, u64)>,
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> Confirmer<C> {
    pub(super) fn new(conn: C, replicas: u32, timeout: Duration) -> Self {
        Confirmer {
            conn,
            replicas,
            timeout,
            joined: AtomicU64::new(0),
            outcome: tokio::sync::Mutex::new((0, 0)),
        }
    }

    /// The connection that writes to confirm must go over.
    pub(super) fn conn(&self) -> C {
        self.conn.clone()
    }

    /// Waits until the replicas hold every write whose reply came back before this call.
    pub(super) async fn confirm(&self) -> Result<()> {
        let mine = self.joined.fetch_add(1, Ordering::SeqCst) + 1;
        let mut outcome = self.outcome.lock().await;
        let (confirmed, failed) = *outcome;
        if confirmed >= mine {
            return Ok(());
        }
        if failed >= mine {
            return Err(self.unconfirmed(None));
        }
        // Every write that joined by now was sent before this WAIT on this connection.
        let covers = self.joined.load(Ordering::SeqCst);
        let millis = u64::try_from(self.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let got: redis::RedisResult<i64> = redis::cmd("WAIT")
            .arg(self.replicas)
            .arg(millis)
            .query_async(&mut self.conn())
            .await;
        match got {
            Ok(n) if n >= i64::from(self.replicas) => {
                outcome.0 = covers;
                Ok(())
            }
            Ok(n) => {
                outcome.1 = covers;
                Err(self.unconfirmed(Some(n)))
            }
            Err(e) => {
                outcome.1 = covers;
                Err(Error::Unavailable(format!(
                    "the write reached the primary, but its replication could not be confirmed: {e}"
                )))
            }
        }
    }

    fn unconfirmed(&self, got: Option<i64>) -> Error {
        let got = got.map_or_else(|| "too few".to_string(), |n| n.to_string());
        Error::Unavailable(format!(
            "the write reached the primary, but {got} of the {} replica(s) that \
             redis.durability asks for confirmed it within {} ms: it may be lost if the \
             primary fails",
            self.replicas,
            self.timeout.as_millis()
        ))
    }
}

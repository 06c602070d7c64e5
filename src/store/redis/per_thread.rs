//! A connection to one Redis node per thread of a current-thread runtime. A connection's
//! driver (the task that writes requests to its socket and reads the replies) runs on the
//! runtime that opened it. With one connection for the process, every pump and settle of a
//! slot actor went from the actor's thread to the driver's thread and back: two thread
//! wake-ups per script call. The slot actors' arbiters and the HTTP workers each run a
//! current-thread runtime, so a connection of their own keeps each call on its thread.
//!
//! Elsewhere (a multi-thread runtime, whose tasks move between threads, or outside any
//! runtime) the shared connection serves. Each connection is a `ConnectionManager`, so each
//! reconnects by itself after a loss, with the same timeouts.
//!
//! What it changes: calls from different threads no longer share one connection's order.
//! No caller relies on that: a caller awaits each call's reply before the next, and the
//! writes whose replicas are awaited with `WAIT` go over a connection of their own
//! (`durable.rs`, opened with [`PerThread::shared_only`]).

use std::cell::RefCell;
use std::sync::{Arc, Weak};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use tokio::runtime::{Handle, RuntimeFlavor};

/// A handle that sends each call over its thread's connection (see the module's doc).
#[derive(Clone)]
pub(crate) struct PerThread {
    shared: ConnectionManager,
    /// How to open a thread's connection; `None`: every call goes over `shared`.
    local: Option<Arc<Opener>>,
}

/// What a thread's connection is opened from; the connections opened for one engine are
/// found by it (and dropped once it is).
struct Opener {
    client: redis::Client,
    config: ConnectionManagerConfig,
}

/// A thread's connection for one engine, on one runtime.
struct Local {
    opener: Weak<Opener>,
    runtime: tokio::runtime::Id,
    conn: ConnectionManager,
}

thread_local! {
    static LOCAL: RefCell<Vec<Local>> = const { RefCell::new(Vec::new()) };
}

impl PerThread {
    /// Calls go over `shared` or, on a current-thread runtime, over a connection of the
    /// thread's own, opened from `client` with `config` at its first call.
    pub(crate) fn new(
        shared: ConnectionManager,
        client: redis::Client,
        config: ConnectionManagerConfig,
    ) -> Self {
        PerThread {
            shared,
            local: Some(Arc::new(Opener { client, config })),
        }
    }

    /// Every call goes over `shared`, in the order it was sent.
    pub(crate) fn shared_only(shared: ConnectionManager) -> Self {
        PerThread {
            shared,
            local: None,
        }
    }

    /// The connection for a call made now, on this thread.
    fn pick(&self) -> ConnectionManager {
        let Some(opener) = &self.local else {
            return self.shared.clone();
        };
        let Ok(handle) = Handle::try_current() else {
            return self.shared.clone();
        };
        if handle.runtime_flavor() != RuntimeFlavor::CurrentThread {
            return self.shared.clone();
        }
        let runtime = handle.id();
        LOCAL.with_borrow_mut(|locals| {
            if let Some(local) = locals
                .iter()
                .find(|l| l.runtime == runtime && l.opener.as_ptr() == Arc::as_ptr(opener))
            {
                return local.conn.clone();
            }
            // A thread runs one runtime at a time: this engine's connection of an earlier
            // runtime (whose driver stopped with it) goes, as do those of dropped engines.
            locals.retain(|l| l.opener.strong_count() > 0 && l.opener.as_ptr() != Arc::as_ptr(opener));
            match ConnectionManager::new_lazy_with_config(
                opener.client.clone(),
                opener.config.clone(),
            ) {
                Ok(conn) => {
                    locals.push(Local {
                        opener: Arc::downgrade(opener),
                        runtime,
                        conn: conn.clone(),
                    });
                    conn
                }
                Err(e) => {
                    tracing::debug!(error = %e, "no connection of this thread's own: the shared one serves");
                    self.shared.clone()
                }
            }
        })
    }
}

impl ConnectionLike for PerThread {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let mut conn = self.pick();
        Box::pin(async move { conn.req_packed_command(cmd).await })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let mut conn = self.pick();
        Box::pin(async move { conn.req_packed_commands(cmd, offset, count).await })
    }

    fn get_db(&self) -> i64 {
        self.shared.get_db()
    }
}

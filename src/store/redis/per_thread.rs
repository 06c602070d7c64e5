//! A connection to one Redis node per slot-actor thread. A connection's driver (the task
//! that writes requests to its socket and reads the replies) runs on the runtime that opened
//! it. With one connection for the process, every pump and settle of a slot actor went from
//! the actor's thread to the driver's thread and back: two thread wake-ups per script call.
//! The threads that slot actors run on (`src/actors/keeper/workers.rs`) each run a
//! current-thread runtime and ask for a connection of their own ([`own_connection`]), so
//! each of their calls stays on its thread.
//!
//! Every other thread (the HTTP workers, the main thread, a multi-thread runtime's workers)
//! shares one connection: calls from many threads there are sent together and read by Redis
//! in one go, which costs it less per call than one connection per thread (`toc bench pull`
//! measured claims and acks 10 % slower over a connection per HTTP worker). Each connection
//! is a `ConnectionManager`, so each reconnects by itself after a loss, with the same
//! timeouts.
//!
//! What it changes: calls from different threads no longer share one connection's order.
//! No caller relies on that: a caller awaits each call's reply before the next, and the
//! writes whose replicas are awaited with `WAIT` go over a connection of their own
//! (`durable.rs`, opened with [`PerThread::shared_only`]).

use std::cell::{Cell, RefCell};
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
    static OWN: Cell<bool> = const { Cell::new(false) };
}

/// From now on this thread's calls to a Redis node go over a connection of its own, while it
/// runs a current-thread runtime (elsewhere the shared connection serves). The runtime
/// asks this of the threads its slot actors run on; an application that runs its own
/// current-thread runtimes on threads of their own may ask it of them.
pub fn own_connection() {
    OWN.set(true);
}

impl PerThread {
    /// Calls go over `shared` or, from a thread that asked for it ([`own_connection`]) and
    /// runs a current-thread runtime, over a connection of the thread's own, opened from
    /// `client` with `config` at its first call.
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

    /// This thread's own connection for a call made now; `None`: the shared one serves.
    fn own(&self) -> Option<ConnectionManager> {
        let opener = self.local.as_ref().filter(|_| OWN.get())?;
        let handle = Handle::try_current().ok()?;
        if handle.runtime_flavor() != RuntimeFlavor::CurrentThread {
            return None;
        }
        let runtime = handle.id();
        LOCAL.with_borrow_mut(|locals| {
            if let Some(local) = locals
                .iter()
                .find(|l| l.runtime == runtime && l.opener.as_ptr() == Arc::as_ptr(opener))
            {
                return Some(local.conn.clone());
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
                    Some(conn)
                }
                Err(e) => {
                    tracing::debug!(error = %e, "no connection of this thread's own: the shared one serves");
                    None
                }
            }
        })
    }
}

impl ConnectionLike for PerThread {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self.own() {
            Some(mut conn) => Box::pin(async move { conn.req_packed_command(cmd).await }),
            None => self.shared.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self.own() {
            Some(mut conn) => {
                Box::pin(async move { conn.req_packed_commands(cmd, offset, count).await })
            }
            None => self.shared.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        self.shared.get_db()
    }
}

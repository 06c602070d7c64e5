//! The threads slot actors run on, one per core by default (`runtime.workers`), so that
//! pumping and settling use the machine; slots are dealt out round robin. Each thread has
//! its own actor per job type, so that a fire reaches its handler on its slot's thread, and
//! on one Redis node a connection of its own, so that a pump's reply is read on it.

use std::collections::HashMap;

use actix::prelude::*;

use crate::actors::handler::{LocalHandlers, start_local};
use crate::actors::runtime::TypeEntry;

pub(super) struct Workers {
    /// Empty: slot actors run on the keeper's own thread.
    arbiters: Vec<(Arbiter, LocalHandlers)>,
    /// The job types' actors on the keeper's thread, when there are no arbiters.
    local: Option<LocalHandlers>,
    next: usize,
}

impl Workers {
    /// `threads` arbiters, with an actor per job type on each. They need a running actix
    /// System; without one (or for one thread) the slot actors share the keeper's thread.
    pub(super) fn new(threads: usize, types: &HashMap<&'static str, TypeEntry>) -> Self {
        let arbiters: Vec<_> = if threads > 1 && System::try_current().is_some() {
            (0..threads)
                .map(|_| {
                    let arbiter = Arbiter::new();
                    // Its slot actors' calls to Redis stay on it (`per_thread.rs`).
                    arbiter.spawn_fn(crate::store::own_redis_connection);
                    let handlers = start_local(types, Some(&arbiter.handle()));
                    (arbiter, handlers)
                })
                .collect()
        } else {
            Vec::new()
        };
        let local = arbiters.is_empty().then(|| start_local(types, None));
        Workers {
            arbiters,
            local,
            next: 0,
        }
    }

    /// The thread the next slot actor starts on, and the job types' actors there.
    pub(super) fn next(&mut self) -> (ArbiterHandle, LocalHandlers) {
        match &self.local {
            Some(local) => (Arbiter::current(), local.clone()),
            None => {
                self.next = (self.next + 1) % self.arbiters.len();
                let (arbiter, handlers) = &self.arbiters[self.next];
                (arbiter.handle(), handlers.clone())
            }
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for (w, _) in &self.arbiters {
            w.stop();
        }
    }
}

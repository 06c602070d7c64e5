//! The threads slot actors run on, one per core by default (`runtime.workers`), so that
//! pumping and settling use the machine; slots are dealt out round robin.

use actix::prelude::*;

pub(super) struct Workers {
    /// Empty: slot actors run on the keeper's own thread.
    arbiters: Vec<Arbiter>,
    next: usize,
}

impl Workers {
    /// `threads` arbiters. They need a running actix System; without one (or for one
    /// thread) the slot actors share the keeper's thread.
    pub(super) fn new(threads: usize) -> Self {
        let arbiters = if threads > 1 && System::try_current().is_some() {
            (0..threads).map(|_| Arbiter::new()).collect()
        } else {
            Vec::new()
        };
        Workers { arbiters, next: 0 }
    }

    /// The thread the next slot actor starts on.
    pub(super) fn next(&mut self) -> ArbiterHandle {
        if self.arbiters.is_empty() {
            return Arbiter::current();
        }
        self.next = (self.next + 1) % self.arbiters.len();
        self.arbiters[self.next].handle()
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &self.arbiters {
            w.stop();
        }
    }
}

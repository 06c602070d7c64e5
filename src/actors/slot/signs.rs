//! What the slot shows outside itself: its status for `/health` (shared with its keeper),
//! its runs not yet settled and whether a pump is in flight (for `Drain` to wait on), and a
//! change of ownership for the keeper's next round. Written by the actor, read elsewhere;
//! it decides nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::super::messages::SlotHealth;
use super::core::SlotCore;
use super::flow_gate::FlowGate;
use super::run_book::RunBook;

pub(super) struct Signs {
    /// Shared with the slot keeper, which reads it for `/health`.
    status: Arc<Mutex<SlotHealth>>,
    /// Runs not yet settled in the store (running, waiting, settling), for `Drain`.
    in_flight: watch::Sender<usize>,
    /// A pump is in flight (the core's state, published). Its answer holds the runs the
    /// store leased to this actor, which `Drain` waits for: stopped before it, they would
    /// stay leased to no one until their lease ran out.
    pumping: watch::Sender<bool>,
}

impl Signs {
    pub(super) fn new(status: Arc<Mutex<SlotHealth>>) -> Self {
        Signs {
            status,
            in_flight: watch::channel(0).0,
            pumping: watch::channel(false).0,
        }
    }

    /// Changes the status `/health` shows.
    pub(super) fn status(&self, f: impl FnOnce(&mut SlotHealth)) {
        f(&mut self.status.lock().expect("slot status lock"));
    }

    /// Publishes whether a pump is in flight.
    pub(super) fn pumping(&self, pumping: bool) {
        self.pumping.send_replace(pumping);
    }

    /// Publishes the runs not yet settled (the book's and those of a settle in flight, as
    /// the core counts them), and the flow line's length and oldest wait.
    pub(super) fn track(&self, book: &RunBook, core: &SlotCore, gate: &FlowGate) {
        let n = book.unsettled(core.settling_runs());
        let (waiting, oldest) = (gate.len(), gate.oldest());
        self.in_flight.send_replace(n);
        self.status(|s| {
            s.in_flight = n;
            s.flow_waiting = waiting;
            s.flow_oldest_wait = oldest;
        });
    }

    /// Receivers of the pump in flight and of the runs not yet settled, for `Drain`.
    pub(super) fn watch(&self) -> (watch::Receiver<bool>, watch::Receiver<usize>) {
        (self.pumping.subscribe(), self.in_flight.subscribe())
    }
}

/// Tells the keeper's next ownership round to look at every slot (this one was fenced or
/// stopped).
pub(super) fn slot_changed(changes: &AtomicU64) {
    changes.fetch_add(1, Ordering::Relaxed);
}

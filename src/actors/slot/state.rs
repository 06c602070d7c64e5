//! The slot actor's own state, read and published: its status for `/health`, its timer,
//! whether it may sleep, how many runs it may take, how far ahead it pumps. Every other file
//! of the wing leans on these; they call none of the others (the timer is armed by
//! `pump.rs`, whose pump it starts).

use actix::prelude::*;

use super::super::messages::{SlotHealth, SlotIdle};
use super::SlotActor;
use crate::time::Millis;

impl SlotActor {
    /// Tells the keeper's next ownership round to look at every slot (this one was fenced
    /// or stopped).
    pub(super) fn slot_changed(&self) {
        self.rt
            .slot_changes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) fn set_status(&self, f: impl FnOnce(&mut SlotHealth)) {
        f(&mut self.status.lock().expect("slot status lock"));
    }

    pub(super) fn cancel_timer(&mut self, ctx: &mut Context<Self>) {
        if let Some((handle, _)) = self.timers.next.take() {
            ctx.cancel_future(handle);
        }
        self.set_status(|s| s.armed_at = None);
    }

    /// Nothing of the slot's is in flight or owed, and its next time is further ahead than
    /// `runtime.dormant_after_ms` (or there is none): it may sleep, its keeper holding that
    /// time (rule 7 of `core.rs`).
    pub(super) fn may_sleep(&self) -> bool {
        let horizon = self
            .rt
            .clock
            .now()
            .saturating_add(crate::num::millis(self.rt.settings.dormant_after_ms));
        self.core.at_rest()
            && self.unsettled() == 0
            && self.timers.flush.is_none()
            && self.timers.next.is_none_or(|(_, at)| at > horizon)
    }

    /// Tells the keeper, once, that the slot may sleep; it answers with `Sleep`.
    pub(super) fn offer_sleep(&mut self) {
        if !self.may_sleep() || !self.core.offer_rest() {
            return;
        }
        self.keeper.do_send(SlotIdle {
            topic: self.door.topic().name.clone(),
            slot: self.door.slot(),
        });
    }

    /// Publishes whether a pump is in flight (for `Drain`).
    pub(super) fn publish_pumping(&self) {
        self.pumping.send_replace(self.core.pump_in_flight());
    }

    pub(super) fn unsettled(&self) -> usize {
        self.book.running() + self.book.waiting() + self.core.settling_runs()
    }

    /// Runs a pump may lease now: runs waiting for room on their flow key do not count
    /// (other keys' jobs are not held behind them). One key holds at most
    /// `runtime.flow_max_waiting_per_key` of them, and once they reach
    /// `runtime.flow_max_waiting` every key that has a run waiting is at its share
    /// ([`SlotActor::key_share`]): the pump goes on for the keys with none, so however many
    /// keys a caller fills, a key with room is not held behind them.
    pub(super) fn capacity(&self) -> usize {
        let waiting = self.gate.len();
        self.rt
            .settings
            .pump_batch
            .saturating_sub(self.unsettled().saturating_sub(waiting))
    }

    /// How many runs one key may have waiting here now: its share of the waiting room, or
    /// one while the room is full (a key with none waiting still gets one in).
    pub(super) fn key_share(&self) -> usize {
        if self.gate.len() >= self.rt.settings.flow_max_waiting {
            1
        } else {
            self.rt.settings.flow_max_waiting_per_key
        }
    }

    pub(super) fn track(&mut self) {
        let n = self.unsettled();
        self.in_flight.send_replace(n);
        let (waiting, oldest) = (self.gate.len(), self.gate.oldest());
        self.set_status(|s| {
            s.in_flight = n;
            s.flow_waiting = waiting;
            s.flow_oldest_wait = oldest;
        });
    }

    /// How long before their fire time this slot's pumps lease jobs now (`runtime.fire_lead_ms`,
    /// up to `runtime.fire_lead_max_ms` while the store answers slowly). A run's lease counts
    /// from its pump, so what the lead grows by is kept within a tenth of the topic's
    /// visibility timeout: a handler keeps nine tenths of it, at least, after its fire time.
    pub(super) fn lead(&self) -> Millis {
        let floor = crate::num::millis(self.rt.settings.fire_lead_ms);
        let tenth = crate::num::millis(self.door.topic().visibility_timeout_ms / 10);
        self.lead
            .ms(std::time::Instant::now())
            .min(tenth.max(floor))
    }

    /// How far past its next fire time a pump also leases jobs, and how long an outcome may
    /// wait for the slot's other runs (`runtime.batch_window_ms`).
    pub(super) fn window(&self) -> Millis {
        crate::num::millis(self.rt.settings.batch_window_ms)
    }
}

//! The slot actor's own state, read and published: its timer, whether it may sleep, how
//! many runs it may take, its runs in flight (`signs.rs` shows them). Every other file of
//! the wing leans on these; they call none of the others (the timer is armed by `pump.rs`,
//! whose pump it starts).

use super::super::messages::SlotIdle;
use super::SlotActor;

impl SlotActor {
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
            && self.book.unsettled(self.core.settling_runs()) == 0
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

    /// Runs a pump may lease now: runs waiting for room on their flow key do not count
    /// (other keys' jobs are not held behind them). One key holds at most
    /// `runtime.flow_max_waiting_per_key` of them, and once they reach
    /// `runtime.flow_max_waiting` every key that has a run waiting is at its share
    /// (`FlowGate::share`): the pump goes on for the keys with none, so however many
    /// keys a caller fills, a key with room is not held behind them.
    pub(super) fn capacity(&self) -> usize {
        let waiting = self.gate.len();
        self.rt.settings.pump_batch.saturating_sub(
            self.book
                .unsettled(self.core.settling_runs())
                .saturating_sub(waiting),
        )
    }
}

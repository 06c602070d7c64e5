//! The slot's lease sweep: one timer that extends each running job's lease before it runs
//! out.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::SlotActor;

impl SlotActor {
    /// Checks the runs' leases every sixth of a lease, from the first run out for as long as
    /// runs are out.
    pub(super) fn arm_lease_sweep(&mut self, ctx: &mut Context<Self>) {
        if self.timers.lease_sweep.is_some() {
            return;
        }
        let every = Duration::from_millis((self.door.topic().visibility_timeout_ms / 6).max(1));
        self.timers.lease_sweep = Some(ctx.run_later(every, |act, ctx| {
            act.timers.lease_sweep = None;
            act.sweep_leases(ctx);
            if act.book.running() > 0 {
                act.arm_lease_sweep(ctx);
            }
        }));
    }

    /// Extends the lease of every run that has used a third of it, so that a long run is not
    /// taken over: checked every sixth of a lease, a run is extended at the latest half way
    /// through its lease. One timer per slot: each run had one of its own, a timer entry
    /// made and dropped per job of a burst.
    pub(super) fn sweep_leases(&mut self, ctx: &mut Context<Self>) {
        let now = self.rt.clock.latest();
        let lease = crate::num::millis(self.door.topic().visibility_timeout_ms);
        let until = self.door.topic().lease_deadline(now);
        for run in self.book.runs() {
            // Two thirds or more of the lease left: not yet.
            if run.lease_until.saturating_sub(now).saturating_mul(3) >= lease.saturating_mul(2) {
                continue;
            }
            let (door, run) = (self.door.clone(), Arc::clone(run));
            let extend = async move {
                let extended = door.extend(&run, until).await;
                (run, extended)
            };
            ctx.spawn(
                extend
                    .into_actor(self)
                    .map(move |(run, extended), act, _| match extended {
                        Ok(true) => act.book.extended(&run.job.id, run.token, until),
                        Ok(false) => tracing::warn!(job = %run.job.id, "lease lost while running"),
                        Err(e) => {
                            tracing::warn!(job = %run.job.id, error = %e, "lease extension failed")
                        }
                    }),
            );
        }
    }
}

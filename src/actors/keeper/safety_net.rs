//! The instance's safety net: once per `runtime.poll_ms` the keeper reads the next time of
//! each slot it owns (its earliest job or lease deadline; nothing written: two `ZRANGE`s in
//! one round trip on Redis) and wakes only the slots whose next time comes before their own
//! timer. A slot actor
//! holds no poll of its own: it sleeps until its next time, and a job written after its
//! last pump wakes it by notice; the net finds the one whose notice was lost (a pub/sub
//! connection remade, a notice the writer skipped because the job was due after the net's
//! next round) within a round.

use actix::prelude::*;
use futures_util::StreamExt;

use super::SlotKeeper;
use crate::actors::messages::Wake;

/// How many heads the net reads at once.
const IN_FLIGHT: usize = 64;

impl SlotKeeper {
    /// One round of the net, unless the last one is still reading.
    pub(super) fn safety_net(&mut self, ctx: &mut Context<Self>) {
        if self.net_running || self.stopping {
            return;
        }
        let mut asks = Vec::new();
        for ((topic, slot), entry) in &self.slots {
            let status = entry.status.lock().expect("slot status lock");
            if !entry.addr.connected() || status.fenced {
                continue;
            }
            let Some(t) = self.topics.get(topic) else {
                continue;
            };
            asks.push((t.clone(), *slot, status.armed_at, entry.addr.clone()));
        }
        if asks.is_empty() {
            return;
        }
        self.net_running = true;
        let store = self.rt.store.clone();
        let round = futures_util::stream::iter(asks)
            .map(move |(t, slot, armed_at, addr)| {
                let store = store.clone();
                async move {
                    match store.head(&t, slot).await {
                        // A head at or after the armed time is pumped in time: the pump
                        // then reaches past its time by at least the lead.
                        Ok(Some(head)) if armed_at.is_none_or(|a| head < a) => {
                            addr.do_send(Wake { at: head });
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::debug!(topic = %t.name, slot, error = %e, "the safety net could not read the slot's head");
                        }
                    }
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect::<Vec<()>>();
        ctx.spawn(round.into_actor(self).map(|_, act, _| {
            act.net_running = false;
        }));
    }
}

//! Sleeping slots. A slot actor at rest (nothing in flight or owed, rule 7 of
//! `slot/core.rs`) whose next time is further ahead than `runtime.dormant_after_ms` says
//! so (`SlotIdle`); the keeper asks it to sleep (`Sleep`), forwarding it nothing until it
//! answers, and, if it agrees, drops its address: the actor stops, and the slot is held
//! here as its fence, its status and its next time, which one keeper timer serves for every
//! sleeping slot. A new actor starts (and pumps) at that time, at a notice of an earlier
//! job, or when the safety net reads an earlier head. Ownership is not touched: the slot's
//! lease stands, and a sleeping slot is counted as served.
//!
//! So an idle topic costs a map entry per slot rather than an actor, its mailbox and
//! timers, and a busy one keeps its actors: a slot whose next job is within the
//! horizon never sleeps.

use std::collections::{BTreeSet, VecDeque};

use actix::prelude::*;
use futures_util::StreamExt;

use super::SlotKeeper;
use crate::actors::messages::{Refence, Retune, Sleep, SlotIdle, Wake};
use crate::actors::slot::SlotActor;
use crate::time::Millis;

type Key = (String, u32);

/// What was meant for an actor while it was being asked to sleep: told to it if it
/// answers busy, folded into its next time if it sleeps.
#[derive(Debug, Default)]
pub(super) struct Asking {
    /// The earliest job a wake told of (its fire time).
    pub(super) woken: Option<Millis>,
    /// The slot's lease was taken anew under another fence.
    pub(super) refenced: bool,
    /// The topic's settings changed.
    pub(super) retuned: bool,
}

/// The sleeping slots' next times, earliest first, and the keeper's one timer for them.
#[derive(Default)]
pub(super) struct Dormant {
    due: BTreeSet<(Millis, Key)>,
    timer: Option<(SpawnHandle, Millis)>,
    /// Slots taken asleep whose heads are still to be read (`look`).
    looks: VecDeque<Key>,
    /// A batch of `looks` is being read.
    looking: bool,
}

/// How many head reads of slots taken asleep are in flight at once.
const LOOKS_IN_FLIGHT: usize = 64;

/// How many of them one keeper turn hands out (their answers are handled together).
const LOOK_BATCH: usize = 1024;

impl Dormant {
    /// The slot no longer waits for `at` here.
    pub(super) fn forget(&mut self, at: Option<Millis>, key: &Key) {
        if let Some(at) = at {
            self.due.remove(&(at, key.clone()));
        }
    }
}

impl SlotKeeper {
    /// A job is due at `at` in the slot `key`, perhaps before the slot knew: told to its
    /// actor, kept for an actor being asked to sleep, or made a sleeping slot's next time.
    pub(super) fn wake(&mut self, ctx: &mut Context<Self>, key: &Key, at: Millis) {
        let Some(entry) = self.slots.get_mut(key) else {
            return;
        };
        match (&entry.addr, &mut entry.asking) {
            (Some(_), Some(asking)) => {
                asking.woken = Some(asking.woken.map_or(at, |w| w.min(at)));
            }
            (Some(addr), None) => addr.do_send(Wake { at }),
            (None, _) => {
                // Pumped a lead before its fire time, as an actor's own next time is.
                let pump_at = at.saturating_sub(crate::num::millis(self.rt.settings.fire_lead_ms));
                self.sleep_until(ctx, key, Some(pump_at));
            }
        }
    }

    /// A sleeping slot's next time is `next` if that is earlier than the one it has: the
    /// keeper's timer is set for it, or, within `runtime.dormant_after_ms`, its actor is
    /// started now (a slot sleeps only while its next time is further ahead).
    fn sleep_until(&mut self, ctx: &mut Context<Self>, key: &Key, next: Option<Millis>) {
        let Some(entry) = self.slots.get(key) else {
            return;
        };
        let Some(next) = next else {
            return;
        };
        if entry.addr.is_some() || entry.next.is_some_and(|a| a <= next) {
            return;
        }
        let horizon = crate::num::millis(self.rt.settings.dormant_after_ms);
        if next <= self.rt.clock.now().saturating_add(horizon) {
            self.rouse(key);
            return;
        }
        let Some(entry) = self.slots.get_mut(key) else {
            return;
        };
        let before = entry.next.replace(next);
        // For the safety net and `/health`: a sleeping slot's armed time is its next time.
        entry.status.lock().expect("slot status lock").armed_at = Some(next);
        self.dormant.forget(before, key);
        self.dormant.due.insert((next, key.clone()));
        self.arm_dormant(ctx);
    }

    /// Sets the keeper's timer for the earliest sleeping slot, unless it is set earlier.
    fn arm_dormant(&mut self, ctx: &mut Context<Self>) {
        let Some(&(first, _)) = self.dormant.due.first() else {
            return;
        };
        if let Some((handle, at)) = self.dormant.timer {
            if at <= first {
                return;
            }
            ctx.cancel_future(handle);
        }
        let wait = self.rt.clock.until(first.saturating_mul(1_000));
        let handle = ctx.spawn(wait.into_actor(self).map(|_, act, ctx| {
            act.dormant.timer = None;
            let now = act.rt.clock.now();
            // Taken out of the set before each is started: what is due is never seen twice.
            while let Some((at, key)) = act.dormant.due.pop_first() {
                if at > now {
                    act.dormant.due.insert((at, key));
                    break;
                }
                if act.slots.get(&key).is_some_and(|e| e.next == Some(at)) {
                    act.rouse(&key);
                }
            }
            act.arm_dormant(ctx);
        }));
        self.dormant.timer = Some((handle, first));
    }

    /// Reads the head of a slot taken asleep (`start`): its next time, or an actor at once
    /// if that is within the horizon or the read fails (the actor's pump retries). A job
    /// written after the read is told by its notice, which this merges with. Reads are
    /// queued and made `LOOKS_IN_FLIGHT` at a time: an instance that obtains 16,000 slots at
    /// once (a peer killed) must not put 16,000 reads before its own lease calls.
    pub(super) fn look(&mut self, ctx: &mut Context<Self>, key: Key) {
        self.dormant.looks.push_back(key);
        if !self.dormant.looking {
            self.look_round(ctx);
        }
    }

    /// Reads the heads of the slots queued by `look`, a batch at a time, until none is left.
    fn look_round(&mut self, ctx: &mut Context<Self>) {
        let mut asks = Vec::new();
        while asks.len() < LOOK_BATCH {
            let Some(key) = self.dormant.looks.pop_front() else {
                break;
            };
            let (Some(topic), Some(entry)) = (self.topics.get(&key.0), self.slots.get(&key)) else {
                continue;
            };
            if entry.addr.is_none() {
                asks.push((topic.clone(), key, entry.fence));
            }
        }
        self.dormant.looking = !asks.is_empty();
        if asks.is_empty() {
            return;
        }
        let store = self.rt.store.clone();
        let reads = futures_util::stream::iter(asks)
            .map(move |(topic, key, fence)| {
                let store = store.clone();
                async move { (store.head(&topic, key.1).await, key, fence) }
            })
            .buffer_unordered(LOOKS_IN_FLIGHT)
            .collect::<Vec<_>>();
        ctx.spawn(reads.into_actor(self).map(|answers, act, ctx| {
            for (head, key, fence) in answers {
                let asleep = act
                    .slots
                    .get(&key)
                    .is_some_and(|e| e.addr.is_none() && e.fence == fence);
                if !asleep {
                    continue; // woken, stopped or taken anew meanwhile
                }
                match head {
                    Ok(Some(at)) => act.wake(ctx, &key, at),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::debug!(topic = %key.0, slot = key.1, error = %e, "could not read the slot's head: its actor pumps instead");
                        act.rouse(&key);
                    }
                }
            }
            act.look_round(ctx);
        }));
    }

    /// Starts a sleeping slot's actor (it pumps at once).
    pub(super) fn rouse(&mut self, key: &Key) {
        let Some(topic) = self.topics.get(&key.0).cloned() else {
            return;
        };
        let Some(entry) = self.slots.get_mut(key) else {
            return;
        };
        if entry.addr.is_some() || self.stopping {
            return;
        }
        let (status, fence, next) = (entry.status.clone(), entry.fence, entry.next.take());
        {
            let mut s = status.lock().expect("slot status lock");
            s.dormant = false;
            s.armed_at = None;
        }
        self.dormant.forget(next, key);
        let addr = self.spawn_actor(topic, key.1, fence, status);
        if let Some(entry) = self.slots.get_mut(key) {
            entry.addr = Some(addr);
        }
    }

    /// The actor of `key` answered whether it sleeps.
    fn answered(
        &mut self,
        ctx: &mut Context<Self>,
        key: &Key,
        addr: &Addr<SlotActor>,
        next: Option<Option<Millis>>,
    ) {
        let Some(entry) = self.slots.get_mut(key) else {
            return; // stopped or given up meanwhile
        };
        if entry.addr.as_ref() != Some(addr) {
            return; // another actor serves it now
        }
        let asking = entry.asking.take().unwrap_or_default();
        let Some(next) = next else {
            // Busy again: what waited is told now.
            if let Some(at) = asking.woken {
                addr.do_send(Wake { at });
            }
            if asking.refenced {
                addr.do_send(Refence(entry.fence));
            }
            if let Some(t) = self.topics.get(&key.0).filter(|_| asking.retuned) {
                addr.do_send(Retune(t.clone()));
            }
            return;
        };
        // Asleep: its address is dropped, and it stops.
        entry.addr = None;
        entry.next = None;
        {
            let mut s = entry.status.lock().expect("slot status lock");
            s.dormant = true;
            s.armed_at = None;
        }
        if asking.refenced {
            self.rouse(key);
            return;
        }
        self.sleep_until(ctx, key, next);
        if let Some(at) = asking.woken {
            self.wake(ctx, key, at);
        }
    }
}

impl Handler<SlotIdle> for SlotKeeper {
    type Result = ();

    fn handle(&mut self, msg: SlotIdle, ctx: &mut Context<Self>) {
        let key = (msg.topic, msg.slot);
        if self.stopping {
            return;
        }
        let Some(entry) = self.slots.get_mut(&key) else {
            return;
        };
        let Some(addr) = entry.awake().cloned() else {
            return;
        };
        entry.asking = Some(Asking::default());
        let asked = addr.send(Sleep);
        ctx.spawn(asked.into_actor(self).map(move |answer, act, ctx| {
            act.answered(ctx, &key, &addr, answer.ok().flatten());
        }));
    }
}

//! The keeper's ownership rounds: the registry heartbeat, then each known topic's slots
//! taken (once: a lease held is not renewed) or handed off (see the module above).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Ownership rounds after which one looks at every slot even though nothing seemed to move.
const FULL_ROUND_EVERY: u32 = 10;

/// Owner-lease calls in flight at once. An instance joining 160,000 slots (10,000 topics)
/// asked for all of them at once, its peer handed off as many at once, and the store's
/// connection queued them past its timeout: the registrations timed out behind them, the
/// membership flapped and every round asked again.
pub(super) const LEASE_CALLS: usize = 256;

use actix::prelude::*;
use futures_util::StreamExt;

use super::SlotKeeper;

/// What the ownership rounds keep between them.
pub(super) struct Rounds {
    /// The live instances as the registry last answered, each with the job types it runs.
    pub(super) live: Vec<Member>,
    /// Their names, in the same order: who may own the slots of a topic every one runs.
    pub(super) names: Vec<String>,
    /// What the last round that looked at every slot saw: the live instances and
    /// `Runtime::slot_changes`; `None` when a slot it asked for was not obtained. While both
    /// stand, a round looks at no slot.
    pub(super) checked: Option<(Vec<Member>, u64)>,
    /// Rounds since the last that looked at every slot.
    pub(super) quiet_rounds: u32,
    /// Owner-lease calls (`own`, `disown`) in flight at once, bounded by [`LEASE_CALLS`].
    pub(super) lease_calls: std::sync::Arc<tokio::sync::Semaphore>,
    /// A batch of `own` calls is not yet answered: a round asks for no slot meanwhile.
    pub(super) owning: bool,
    /// Slots whose owner lease is to be asked for, each with its topic's settings.
    pub(super) asks: Vec<(Arc<TopicConfig>, u32)>,
    /// Sleeping slots whose lease is to be given up.
    pub(super) disowns: Vec<(Arc<TopicConfig>, u32)>,
    /// A batch of them is being given up.
    pub(super) disowning: bool,
}

impl Rounds {
    /// Before the first round: only this instance is known to be live.
    pub(super) fn new(instance: &str, types: Vec<String>) -> Self {
        Rounds {
            live: vec![Member {
                name: instance.to_string(),
                types,
            }],
            names: vec![instance.to_string()],
            checked: None,
            quiet_rounds: 0,
            lease_calls: std::sync::Arc::new(tokio::sync::Semaphore::new(LEASE_CALLS)),
            owning: false,
            asks: Vec::new(),
            disowns: Vec::new(),
            disowning: false,
        }
    }
}
use crate::actors::messages::{Drain, Halt};
use crate::actors::owners;
use crate::store::{Member, Ownership};
use crate::topic::TopicConfig;

impl SlotKeeper {
    /// Takes the owner lease of each slot of `topic` that this instance should
    /// own, starting slot actors for those it gets; hands off those it should not own.
    pub(super) fn own_slots(&mut self, ctx: &mut Context<Self>, topic: &Arc<TopicConfig>) {
        let name = topic.name.clone();
        // Only an instance that runs every type the topic names may own its slots: a job
        // waits for one rather than reach an instance that cannot run it.
        // Every live instance, most rounds (a list made once per membership, not per topic).
        let some: Vec<String>;
        let able: &[String] = if self.rounds.live.iter().all(|m| topic.runs_on(&m.types)) {
            &self.rounds.names
        } else {
            some = self
                .rounds
                .live
                .iter()
                .filter(|m| topic.runs_on(&m.types))
                .map(|m| m.name.clone())
                .collect();
            &some
        };
        let unserved = able.is_empty() && !self.stopping;
        let mine: Vec<u32> = (0..topic.slots)
            .filter(|&slot| owners::owner_of(able, &name, slot) == Some(&self.instance))
            .collect();
        self.rt.metrics.set_unserved(&name, unserved);
        // This topic's actors, each with whether it pumps (running, not fenced): one range of
        // the keeper's map, not a search of it per slot (every round reads every topic).
        let running: Vec<(u32, bool)> = self
            .slots_of(&name)
            .map(|(slot, e)| {
                // A sleeping slot is held: its lease stands while the membership does.
                let pumps = e.addr.as_ref().is_none_or(Addr::connected)
                    && !e.status.lock().expect("slot status lock").fenced;
                (slot, pumps)
            })
            .collect();
        for &(slot, _) in &running {
            if !mine.contains(&slot) {
                self.hand_off(ctx, topic, slot);
            }
        }
        // A lease held is not renewed: while the membership stands, nothing per slot is
        // written. A slot is asked for when this instance has no actor for it, or its actor
        // was fenced (another instance took the slot over meanwhile).
        let mine: Vec<u32> = mine
            .into_iter()
            .filter(|slot| !running.contains(&(*slot, true)))
            .collect();
        if mine.is_empty() {
            return;
        }
        self.rounds
            .asks
            .extend(mine.into_iter().map(|slot| (Arc::clone(topic), slot)));
        self.ask(ctx);
    }

    /// Asks for the owner leases of the slots queued in `asks`, `LEASE_CALLS` at a time, in
    /// one future of the keeper's: actix polls each future an actor spawned whenever the
    /// actor wakes, so a future per topic (10,000 topics taken over at once) made each
    /// wake cost every pending one, and a take-over of 80,000 slots took 15 s.
    fn ask(&mut self, ctx: &mut Context<Self>) {
        if self.stopping || self.rounds.owning || self.rounds.asks.is_empty() {
            return;
        }
        let asks = std::mem::take(&mut self.rounds.asks);
        let (store, owner) = (self.rt.store.clone(), self.owner.clone());
        let (clock, lease) = (self.rt.clock.clone(), self.lease_ms());
        let calls = self.rounds.lease_calls.clone();
        let answers = futures_util::stream::iter(asks)
            .map(move |(topic, slot)| {
                let (store, owner, calls, clock) =
                    (store.clone(), owner.clone(), calls.clone(), clock.clone());
                async move {
                    let _permit = calls.acquire_owned().await;
                    // The lease runs from when it is asked for, not from when the round began.
                    let now = clock.now();
                    let answer = store.own(&topic, slot, &owner, now, lease).await;
                    (topic, slot, answer)
                }
            })
            .buffer_unordered(LEASE_CALLS)
            .collect::<Vec<_>>();
        self.rounds.owning = true;
        ctx.spawn(answers.into_actor(self).map(|answers, act, ctx| {
            act.rounds.owning = false;
            for (topic, slot, answer) in answers {
                match answer {
                    Ok(Ownership::Owned { fence }) => act.start(ctx, &topic.name, slot, fence),
                    Ok(Ownership::Held { by, until }) => {
                        act.rounds.checked = None;
                        // Not ours (yet): its holder's lease has to run out or be handed off
                        // first. An actor this instance still runs for it (it was fenced:
                        // stalled past its registration, the holder took the slot over) is
                        // given up as in a handoff: its runs end or are given back, not
                        // dropped for a lease to end.
                        tracing::debug!(topic = %topic.name, slot, %by, until, "slot held by another instance");
                        act.give_up(ctx, &topic, slot, false);
                    }
                    Err(e) => {
                        act.rounds.checked = None;
                        tracing::warn!(topic = %topic.name, slot, error = %e, "could not take the slot's owner lease");
                    }
                }
            }
            act.ask(ctx);
            act.disown_queued(ctx);
        }));
    }

    /// Gives a slot up to the instance that should own it: its runs are released (their
    /// jobs go back to the store), then its lease is given up, so the next owner need not
    /// wait for it to run out.
    pub(super) fn hand_off(
        &mut self,
        ctx: &mut Context<Self>,
        topic: &Arc<TopicConfig>,
        slot: u32,
    ) {
        self.give_up(ctx, topic, slot, true);
    }

    /// Stops the slot's actor, if it runs, after its drain: runs that end within the drain's
    /// grace settle, the rest are released; then, with `disown`, its owner lease is given
    /// up (a lease another instance holds is left alone).
    fn give_up(
        &mut self,
        ctx: &mut Context<Self>,
        topic: &Arc<TopicConfig>,
        slot: u32,
        disown: bool,
    ) {
        let Some(entry) = self.remove(&topic.name, slot) else {
            return;
        };
        self.watch(&topic.name, slot, false);
        let Some(addr) = entry.addr else {
            // A sleeping slot has nothing in flight to drain: its lease is given up with the
            // others queued (one future for all, as for `ask`).
            if disown {
                self.rounds.disowns.push((Arc::clone(topic), slot));
                self.disown_queued(ctx);
            }
            return;
        };
        let (store, owner, topic) = (self.rt.store.clone(), self.owner.clone(), Arc::clone(topic));
        let grace = Duration::from_millis(self.lease_ms() / 3);
        let calls = self.rounds.lease_calls.clone();
        ctx.spawn(
            async move {
                let _ = addr.send(Drain { grace }).await;
                addr.do_send(Halt);
                if !disown {
                    return;
                }
                let _permit = calls.acquire_owned().await;
                if let Err(e) = store.disown(&topic, slot, &owner).await {
                    tracing::warn!(topic = %topic.name, slot, error = %e, "could not hand the slot off; its lease runs out instead");
                }
            }
            .into_actor(self),
        );
    }

    /// Gives up the leases of the sleeping slots queued by `give_up`, `LEASE_CALLS` at a
    /// time, in one future.
    fn disown_queued(&mut self, ctx: &mut Context<Self>) {
        if self.rounds.disowning || self.rounds.disowns.is_empty() {
            return;
        }
        self.rounds.disowning = true;
        let slots = std::mem::take(&mut self.rounds.disowns);
        let (store, owner, calls) = (
            self.rt.store.clone(),
            self.owner.clone(),
            self.rounds.lease_calls.clone(),
        );
        let gone = futures_util::stream::iter(slots).for_each_concurrent(LEASE_CALLS, move |(topic, slot)| {
            let (store, owner, calls) = (store.clone(), owner.clone(), calls.clone());
            async move {
                let _permit = calls.acquire_owned().await;
                if let Err(e) = store.disown(&topic, slot, &owner).await {
                    tracing::warn!(topic = %topic.name, slot, error = %e, "could not hand the slot off; its lease runs out instead");
                }
            }
        });
        ctx.spawn(gone.into_actor(self).map(|(), act, ctx| {
            act.rounds.disowning = false;
            act.disown_queued(ctx);
        }));
    }

    /// One ownership round: the registry heartbeat, then every known topic's slots.
    pub(super) fn rebalance(&mut self, ctx: &mut Context<Self>) {
        let (store, instance) = (self.rt.store.clone(), self.instance.clone());
        let types = self.rt.type_names();
        let (now, lease) = (self.rt.clock.now(), self.lease_ms());
        ctx.spawn(
            async move { store.register(&instance, &types, now, lease).await }
                .into_actor(self)
                .map(|live, act, ctx| {
                    match live {
                        Ok(live) if !live.is_empty() => {
                            if live != act.rounds.live {
                                tracing::info!(instances = ?live, "the live instances changed");
                            }
                            act.rounds.names = live.iter().map(|m| m.name.clone()).collect();
                            act.rounds.live = live;
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "could not renew this instance's registration"),
                    }
                    // Slots asked for are not yet answered: the next round looks again.
                    if act.stopping || act.rounds.owning || !act.rounds.asks.is_empty() {
                        return;
                    }
                    // Every slot is looked at only when something may have moved: the
                    // membership, a slot fenced or stopped, a slot asked for and not
                    // obtained; and every `FULL_ROUND_EVERY` rounds all the same. A stable
                    // instance's round costs nothing per slot.
                    let seen = (act.rounds.live.clone(), act.rt.slot_changes.load(Ordering::Relaxed));
                    if act.rounds.checked.as_ref() == Some(&seen) && act.rounds.quiet_rounds < FULL_ROUND_EVERY {
                        act.rounds.quiet_rounds += 1;
                        return;
                    }
                    act.rounds.checked = Some(seen);
                    act.rounds.quiet_rounds = 0;
                    let topics: Vec<_> = act.topics.values().cloned().collect();
                    for t in topics {
                        act.own_slots(ctx, &t);
                    }
                }),
        );
    }
}

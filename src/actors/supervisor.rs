//! The supervisor: starts one slot actor per (topic, slot) this instance owns, restarts any
//! that stops (actix `Supervised`), and answers health with each slot's state.
//!
//! Ownership: every third of `runtime.owner_lease_ms` the instance renews its registration
//! in the store, learns the live instances, and for every known topic takes or renews the
//! owner lease of each slot that rendezvous hashing gives it (`owners.rs`), starting a slot
//! actor under the lease's fence; a slot it should no longer own is drained and handed off.
//! A slot actor pumps with its fence, so one whose lease was taken over (a paused process)
//! is refused by the store and stops. A single instance owns every slot.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;

use super::messages::{
    Drain, GetHealth, Halt, HaltSlot, Retune, ServeTopic, Shutdown, SlotHealth, Wake, WakeSlot,
};
use super::owners;
use super::runtime::Runtime;
use super::slot::SlotActor;
use crate::store::Ownership;
use crate::topic::TopicConfig;

struct SlotEntry {
    addr: Addr<SlotActor>,
    status: Arc<Mutex<SlotHealth>>,
    fence: u64,
}

pub(crate) struct Supervisor {
    rt: Arc<Runtime>,
    slots: BTreeMap<(String, u32), SlotEntry>,
    /// The topics whose slots slot actors serve (pull topics have none), by name.
    topics: BTreeMap<String, Arc<TopicConfig>>,
    /// This instance's name, and the live instances as the registry last answered.
    instance: String,
    live: Vec<String>,
    stopping: bool,
    /// The threads slot actors run on, one per core by default (`runtime.workers`), so that
    /// pumping and settling use the machine; slots are dealt out round robin. Empty: slot
    /// actors run on the supervisor's own thread.
    workers: Vec<Arbiter>,
    next_worker: usize,
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        for w in &self.workers {
            w.stop();
        }
    }
}

/// How often the supervisor looks for topics created elsewhere (another instance, the
/// HTTP API), in multiples of the poll interval.
const DISCOVERY_POLLS: u32 = 5;

impl Supervisor {
    pub(crate) fn new(rt: Arc<Runtime>) -> Self {
        let threads = rt.settings.worker_threads();
        // Arbiters need a running actix System; without one (or for one thread) the slot
        // actors share the supervisor's thread.
        let workers = if threads > 1 && System::try_current().is_some() {
            (0..threads).map(|_| Arbiter::new()).collect()
        } else {
            Vec::new()
        };
        let instance = rt.instance.clone();
        Supervisor {
            live: vec![instance.clone()],
            instance,
            rt,
            slots: BTreeMap::new(),
            topics: BTreeMap::new(),
            stopping: false,
            workers,
            next_worker: 0,
        }
    }

    /// The thread the next slot actor starts on.
    fn worker(&mut self) -> ArbiterHandle {
        if self.workers.is_empty() {
            return Arbiter::current();
        }
        self.next_worker = (self.next_worker + 1) % self.workers.len();
        self.workers[self.next_worker].handle()
    }

    fn lease_ms(&self) -> u64 {
        self.rt.settings.owner_lease_ms
    }

    /// Serves a topic: its settings reach its slot actors, and the slots this instance
    /// should own are taken (at once for a topic new here or grown).
    fn serve(&mut self, ctx: &mut Context<Self>, topic: Arc<TopicConfig>) {
        if self.stopping {
            return;
        }
        if topic.default_type == crate::jobs::pull::TYPE {
            // Consumers claim a pull topic's jobs: no slot actor pumps it.
            self.topics.remove(&topic.name);
            let gone: Vec<u32> = self
                .slots
                .keys()
                .filter(|(name, _)| name == &topic.name)
                .map(|(_, slot)| *slot)
                .collect();
            for slot in gone {
                self.stop(&topic.name, slot);
            }
            return;
        }
        for ((name, _), entry) in &self.slots {
            if name == &topic.name {
                entry.addr.do_send(Retune(topic.clone()));
            }
        }
        let before = self.topics.insert(topic.name.clone(), topic.clone());
        if before.is_none_or(|b| b.slots != topic.slots) {
            self.own_slots(ctx, &topic);
        }
    }

    /// Takes or renews the owner lease of each slot of `topic` that this instance should
    /// own, starting slot actors for those it gets; hands off those it should not own.
    fn own_slots(&mut self, ctx: &mut Context<Self>, topic: &TopicConfig) {
        let name = topic.name.clone();
        let mine: Vec<u32> = (0..topic.slots)
            .filter(|&slot| owners::owner_of(&self.live, &name, slot) == Some(&self.instance))
            .collect();
        let leaving: Vec<u32> = self
            .slots
            .keys()
            .filter(|(n, slot)| n == &name && !mine.contains(slot))
            .map(|(_, slot)| *slot)
            .collect();
        for slot in leaving {
            self.hand_off(ctx, &name, slot);
        }
        let (store, instance) = (self.rt.store.clone(), self.instance.clone());
        let (now, lease) = (self.rt.clock.now(), self.lease_ms());
        let asks = mine.into_iter().map(move |slot| {
            let (store, name, instance) = (store.clone(), name.clone(), instance.clone());
            async move { (slot, store.own(&name, slot, &instance, now, lease).await) }
        });
        let topic_name = topic.name.clone();
        ctx.spawn(
            futures_util::future::join_all(asks)
                .into_actor(self)
                .map(move |answers, act, _| {
                    for (slot, answer) in answers {
                        match answer {
                            Ok(Ownership::Owned { fence }) => act.start(&topic_name, slot, fence),
                            Ok(Ownership::Held { by, until }) => {
                                // Not ours (yet): its holder's lease has to run out or be
                                // handed off first.
                                tracing::debug!(topic = %topic_name, slot, %by, until, "slot held by another instance");
                                act.stop(&topic_name, slot);
                            }
                            Err(e) => {
                                tracing::warn!(topic = %topic_name, slot, error = %e, "could not take or renew the slot's owner lease");
                            }
                        }
                    }
                }),
        );
    }

    /// Starts the slot actor of an owned slot under `fence`, unless one runs under it.
    fn start(&mut self, topic: &str, slot: u32, fence: u64) {
        let Some(t) = self.topics.get(topic).cloned() else {
            return; // a pull topic now, or stopping
        };
        if self.stopping || slot >= t.slots {
            return;
        }
        let key = (topic.to_string(), slot);
        if let Some(entry) = self.slots.get(&key) {
            if entry.fence == fence && entry.addr.connected() {
                return;
            }
            // A new lease (this instance had lost the slot): a new actor under its fence.
            self.stop(topic, slot);
        }
        let status = Arc::new(Mutex::new(SlotHealth {
            topic: topic.to_string(),
            slot,
            fence,
            ..SlotHealth::default()
        }));
        let (rt, st) = (self.rt.clone(), status.clone());
        let worker = self.worker();
        let addr = actix::Supervisor::start_in_arbiter(&worker, move |_| {
            SlotActor::new(t, slot, fence, rt, st)
        });
        self.slots.insert(
            key,
            SlotEntry {
                addr,
                status,
                fence,
            },
        );
        self.watch(topic, slot, true);
    }

    /// Starts or stops hearing a slot's notices (sharded pub/sub on a Redis Cluster).
    fn watch(&self, topic: &str, slot: u32, watch: bool) {
        let (store, topic) = (self.rt.store.clone(), topic.to_string());
        actix::spawn(async move {
            if let Err(e) = store.wake_bus().watch_slot(&topic, slot, watch).await {
                tracing::warn!(%topic, slot, error = %e, "could not change the slot's notice subscription; its poll covers it");
            }
        });
    }

    /// Stops a slot's actor for good (no restart: its address is dropped).
    fn stop(&mut self, topic: &str, slot: u32) {
        if let Some(entry) = self.slots.remove(&(topic.to_string(), slot)) {
            entry.addr.do_send(Halt);
            self.watch(topic, slot, false);
        }
    }

    /// Gives a slot up to the instance that should own it: its runs are released (their
    /// jobs go back to the store), then its lease is given up, so the next owner need not
    /// wait for it to run out.
    fn hand_off(&mut self, ctx: &mut Context<Self>, topic: &str, slot: u32) {
        let Some(entry) = self.slots.remove(&(topic.to_string(), slot)) else {
            return;
        };
        self.watch(topic, slot, false);
        let (store, instance, topic) = (
            self.rt.store.clone(),
            self.instance.clone(),
            topic.to_string(),
        );
        let drained = entry.addr.send(Drain {
            grace: Duration::from_millis(self.lease_ms() / 3),
        });
        ctx.spawn(
            async move {
                let _ = drained.await;
                entry.addr.do_send(Halt);
                if let Err(e) = store.disown(&topic, slot, &instance).await {
                    tracing::warn!(%topic, slot, error = %e, "could not hand the slot off; its lease runs out instead");
                }
            }
            .into_actor(self),
        );
    }

    /// One ownership round: the registry heartbeat, then every known topic's slots.
    fn rebalance(&mut self, ctx: &mut Context<Self>) {
        let (store, instance) = (self.rt.store.clone(), self.instance.clone());
        let (now, lease) = (self.rt.clock.now(), self.lease_ms());
        ctx.spawn(
            async move { store.register(&instance, now, lease).await }
                .into_actor(self)
                .map(|live, act, ctx| {
                    match live {
                        Ok(live) if !live.is_empty() => {
                            if live != act.live {
                                tracing::info!(instances = ?live, "the live instances changed");
                            }
                            act.live = live;
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "could not renew this instance's registration"),
                    }
                    if act.stopping {
                        return;
                    }
                    let topics: Vec<_> = act.topics.values().cloned().collect();
                    for t in topics {
                        act.own_slots(ctx, &t);
                    }
                }),
        );
    }

    fn discover(&mut self, ctx: &mut Context<Self>) {
        let store = self.rt.store.clone();
        ctx.spawn(
            async move { store.topics().await }.into_actor(self).map(
                |topics, act, ctx| match topics {
                    Ok(topics) => topics.into_iter().for_each(|t| {
                        if t.draining_from.is_some() {
                            act.sweep(ctx, &t.name);
                        }
                        act.serve(ctx, t)
                    }),
                    Err(e) => tracing::warn!(error = %e, "could not list topics"),
                },
            ),
        );
    }

    /// Looks for a doubled topic's old copies; the topic is marked drained when none is
    /// left, and the next discovery serves it so.
    fn sweep(&self, ctx: &mut Context<Self>, topic: &str) {
        let (store, topic) = (self.rt.store.clone(), topic.to_string());
        ctx.spawn(
            async move {
                match store.sweep(&topic).await {
                    Ok(None) => tracing::info!(%topic, "the doubled topic's old slots hold no old copy: drained"),
                    Ok(Some(_)) => {}
                    Err(e) => tracing::warn!(%topic, error = %e, "could not sweep for old copies"),
                }
            }
            .into_actor(self),
        );
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        tracing::info!(instance = %self.instance, "serving the slots this instance owns");
        self.rebalance(ctx);
        self.discover(ctx);
        let every = Duration::from_millis(self.rt.settings.poll_ms * u64::from(DISCOVERY_POLLS));
        ctx.run_interval(every, |act, ctx| {
            if !act.stopping {
                act.discover(ctx);
            }
        });
        let renew = Duration::from_millis((self.lease_ms() / 3).max(1));
        ctx.run_interval(renew, |act, ctx| {
            if !act.stopping {
                act.rebalance(ctx);
            }
        });
    }
}

impl Handler<ServeTopic> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: ServeTopic, ctx: &mut Context<Self>) {
        self.serve(ctx, msg.0);
    }
}

impl Handler<WakeSlot> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: WakeSlot, ctx: &mut Context<Self>) {
        let notice = msg.0;
        if notice.slot == crate::store::WakeNotice::TOPIC {
            // Another instance serves the topic now, or changed its settings.
            let (store, name) = (self.rt.store.clone(), notice.topic);
            ctx.spawn(
                async move { store.reload_topic(&name).await }
                    .into_actor(self)
                    .map(|found, act, ctx| match found {
                        Ok(Some(topic)) => act.serve(ctx, topic),
                        Ok(None) => {}
                        Err(e) => tracing::warn!(error = %e, "could not read a changed topic"),
                    }),
            );
            return;
        }
        if let Some(entry) = self.slots.get(&(notice.topic.clone(), notice.slot)) {
            entry.addr.do_send(Wake { at: notice.at });
            return;
        }
        if self.topics.contains_key(&notice.topic) {
            return; // a slot another instance owns: its owner hears the notice
        }
        // A topic this instance does not serve yet (created by another instance).
        let store = self.rt.store.clone();
        ctx.spawn(
            async move { store.find_topic(&notice.topic).await.map(|t| (t, notice)) }
                .into_actor(self)
                .map(|found, act, ctx| {
                    if let Ok((Some(topic), notice)) = found {
                        act.serve(ctx, topic);
                        if let Some(entry) = act.slots.get(&(notice.topic.clone(), notice.slot)) {
                            entry.addr.do_send(Wake { at: notice.at });
                        }
                    }
                }),
        );
    }
}

impl Handler<GetHealth> for Supervisor {
    type Result = Vec<SlotHealth>;

    fn handle(&mut self, _: GetHealth, _: &mut Context<Self>) -> Vec<SlotHealth> {
        self.slots
            .values()
            .map(|e| {
                let mut h = e.status.lock().expect("slot status lock").clone();
                h.alive = h.alive && e.addr.connected();
                h
            })
            .collect()
    }
}

impl Handler<HaltSlot> for Supervisor {
    type Result = bool;

    fn handle(&mut self, msg: HaltSlot, _: &mut Context<Self>) -> bool {
        match self.slots.get(&(msg.topic, msg.slot)) {
            Some(e) => {
                e.addr.do_send(Halt);
                true
            }
            None => false,
        }
    }
}

impl Handler<Shutdown> for Supervisor {
    type Result = ResponseFuture<usize>;

    fn handle(&mut self, msg: Shutdown, _: &mut Context<Self>) -> Self::Result {
        self.stopping = true;
        let drains: Vec<_> = self
            .slots
            .values()
            .map(|e| e.addr.send(Drain { grace: msg.grace }))
            .collect();
        // Then the slots are handed off, so other instances take them at once.
        let owned: Vec<(String, u32)> = self.slots.keys().cloned().collect();
        let (store, instance) = (self.rt.store.clone(), self.instance.clone());
        let now = self.rt.clock.now();
        Box::pin(async move {
            let released = futures_util::future::join_all(drains)
                .await
                .into_iter()
                .map(|r| r.unwrap_or(0))
                .sum();
            let gone = owned
                .iter()
                .map(|(topic, slot)| store.disown(topic, *slot, &instance));
            for r in futures_util::future::join_all(gone).await {
                if let Err(e) = r {
                    tracing::warn!(error = %e, "could not hand a slot off; its lease runs out instead");
                }
            }
            // And the instance leaves the registry (a registration that runs out at once).
            if let Err(e) = store.register(&instance, now, 0).await {
                tracing::warn!(error = %e, "could not leave the registry; the registration runs out instead");
            }
            released
        })
    }
}

//! The slot keeper: keeps one slot actor running per (topic, slot) this instance owns, on a
//! pool of threads (`workers.rs`); a slot actor that stops is restarted (actix
//! `Supervised`), and `/health` reads each slot's state here. Its duties are one file
//! each:
//!
//! - `ownership.rs`: every third of `runtime.owner_lease_ms` the instance renews its
//!   registration in the store, learns the live instances, and for every known topic takes
//!   the owner lease of each slot that rendezvous hashing gives it (`actors/owners.rs`) and
//!   it has no actor for, or whose actor was fenced, starting a slot actor under the lease's
//!   fence (a lease held is not renewed: the registration says the instance lives); a slot
//!   it should no longer own is drained and handed off. A slot actor pumps with its fence, so one
//!   whose lease was taken over (a paused process) is refused by the store and stops. A
//!   single instance owns every slot.
//! - `discovery.rs`: topics created or changed elsewhere (another instance, the HTTP API)
//!   are found by a periodic listing and by topic notices, and served.
//! - `safety_net.rs`: once per `runtime.poll_ms`, the heads of a share of the slots it owns
//!   are read (every slot once per `runtime.safety_net_ms`, and all at once after the
//!   listener's reconnection), and a slot whose head comes before its own timer is woken
//!   (a lost notice caught).
//! - `sweep.rs`: a doubled topic's old slots are swept until no old copy is left.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;

mod discovery;
mod ownership;
mod safety_net;
mod sweep;
mod workers;

use self::workers::Workers;
use crate::actors::messages::{
    Drain, DropTopic, GetHealth, Halt, HaltSlot, Refence, ServeTopic, Shutdown, SlotHealth, Wake,
    WakeSlot,
};
use crate::actors::runtime::Runtime;
use crate::actors::slot::SlotActor;
use crate::topic::TopicConfig;

struct SlotEntry {
    addr: Addr<SlotActor>,
    status: Arc<Mutex<SlotHealth>>,
    fence: u64,
}

pub(crate) struct SlotKeeper {
    rt: Arc<Runtime>,
    slots: BTreeMap<(String, u32), SlotEntry>,
    /// The topics whose slots slot actors serve (pull topics have none), by name.
    topics: BTreeMap<String, Arc<TopicConfig>>,
    /// This instance's name, and the live instances as the registry last answered.
    instance: String,
    /// The id this process's owner leases carry: the name and this process's incarnation
    /// (`store::owner_id`), so that a process restarted under the same name takes its
    /// predecessor's slots over at once, under new fences.
    owner: String,
    live: Vec<String>,
    stopping: bool,
    /// The safety net's round and sweep (`safety_net.rs`).
    net: safety_net::Net,
    /// The threads slot actors run on.
    workers: Workers,
    /// What the last ownership round that looked at every slot saw: the live instances and
    /// `Runtime::slot_changes`; `None` when a slot it asked for was not obtained. While both
    /// stand, a round looks at no slot (see `ownership.rs`).
    checked: Option<(Vec<String>, u64)>,
    /// Rounds since the last that looked at every slot.
    quiet_rounds: u32,
}

/// How often the supervisor looks for topics created elsewhere (another instance, the
/// HTTP API), in multiples of the poll interval.
const DISCOVERY_POLLS: u32 = 5;

impl SlotKeeper {
    pub(crate) fn new(rt: Arc<Runtime>) -> Self {
        let workers = Workers::new(rt.settings.worker_threads(), &rt.types);
        let instance = rt.instance.clone();
        SlotKeeper {
            live: vec![instance.clone()],
            owner: crate::store::owner_id(&instance, rand::random()),
            instance,
            rt,
            slots: BTreeMap::new(),
            topics: BTreeMap::new(),
            stopping: false,
            net: safety_net::Net::default(),
            workers,
            checked: None,
            quiet_rounds: 0,
        }
    }

    fn lease_ms(&self) -> u64 {
        self.rt.settings.owner_lease_ms
    }

    /// The slots of `topic` this instance runs an actor for, by slot: a range of the map,
    /// not a look through every topic's slots (that made each discovery round cost topics x
    /// slots, issue 48).
    fn slots_of<'a>(&'a self, topic: &str) -> impl Iterator<Item = (u32, &'a SlotEntry)> + 'a {
        let (from, to) = ((topic.to_string(), 0), (topic.to_string(), u32::MAX));
        self.slots.range(from..=to).map(|((_, slot), e)| (*slot, e))
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
        if let Some(entry) = self.slots.get_mut(&key) {
            if entry.addr.connected() {
                if entry.fence != fence {
                    // A new lease: another instance held the slot between two of this one's
                    // rounds. The actor goes on under the new fence, and its runs with it
                    // (halted, it dropped them, and they waited for their leases to end).
                    entry.fence = fence;
                    entry.addr.do_send(Refence(fence));
                }
                return;
            }
            self.stop(topic, slot);
        }
        let status = Arc::new(Mutex::new(SlotHealth {
            topic: topic.to_string(),
            slot,
            fence,
            ..SlotHealth::default()
        }));
        let (rt, st) = (self.rt.clone(), status.clone());
        let (worker, handlers) = self.workers.next();
        let addr = actix::Supervisor::start_in_arbiter(&worker, move |_| {
            SlotActor::new(t, slot, fence, rt, st, handlers)
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
}

impl Actor for SlotKeeper {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        tracing::info!(instance = %self.instance, "serving the slots this instance owns");
        self.rebalance(ctx);
        self.discover(ctx);
        ctx.run_interval(
            Duration::from_millis(self.rt.settings.poll_ms),
            Self::safety_net,
        );
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

impl Handler<ServeTopic> for SlotKeeper {
    type Result = ();

    fn handle(&mut self, msg: ServeTopic, ctx: &mut Context<Self>) {
        self.serve(ctx, msg.0);
    }
}

impl Handler<DropTopic> for SlotKeeper {
    type Result = ();

    fn handle(&mut self, msg: DropTopic, _: &mut Context<Self>) {
        self.unserve(&msg.0);
    }
}

impl Handler<WakeSlot> for SlotKeeper {
    type Result = ();

    fn handle(&mut self, msg: WakeSlot, ctx: &mut Context<Self>) {
        let notice = msg.0;
        if notice.slot == crate::store::WakeNotice::RESYNC {
            self.resync(ctx);
            return;
        }
        if notice.slot == crate::store::WakeNotice::TOPIC {
            // Another instance serves the topic now, or changed its settings.
            let (store, name) = (self.rt.store.clone(), notice.topic);
            let gone = name.clone();
            ctx.spawn(
                async move { store.reload_topic(&name).await }
                    .into_actor(self)
                    .map(move |found, act, ctx| match found {
                        Ok(Some(topic)) => act.serve(ctx, topic),
                        // Deleted by another instance.
                        Ok(None) => {
                            act.rt.store.forget_topic(&gone);
                            act.unserve(&gone);
                        }
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

impl Handler<GetHealth> for SlotKeeper {
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

impl Handler<HaltSlot> for SlotKeeper {
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

impl Handler<Shutdown> for SlotKeeper {
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
        let (store, instance, owner) = (
            self.rt.store.clone(),
            self.instance.clone(),
            self.owner.clone(),
        );
        let now = self.rt.clock.now();
        Box::pin(async move {
            let released = futures_util::future::join_all(drains)
                .await
                .into_iter()
                .map(|r| r.unwrap_or(0))
                .sum();
            let gone = owned
                .iter()
                .map(|(topic, slot)| store.disown(topic, *slot, &owner));
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

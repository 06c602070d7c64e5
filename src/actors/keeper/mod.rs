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
//! - `dormancy.rs`: a slot at rest whose next job is far ahead sleeps: its actor stops, and
//!   the keeper holds its next time (one timer for every sleeping slot) and starts a new
//!   actor at it, at a notice, or when the safety net finds an earlier head.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use futures_util::StreamExt;

mod discovery;
mod dormancy;
mod ownership;
mod safety_net;
mod sweep;
mod workers;

use self::workers::Workers;
use crate::actors::messages::{
    Drain, DropTopic, GetHealth, Halt, HaltSlot, Refence, ServeTopic, Shutdown, SlotHealth,
    WakeSlot,
};
use crate::actors::runtime::Runtime;
use crate::actors::slot::SlotActor;
use crate::time::Millis;
use crate::topic::TopicConfig;

struct SlotEntry {
    /// The slot's actor; `None` while the slot sleeps (`dormancy.rs`).
    addr: Option<Addr<SlotActor>>,
    status: Arc<Mutex<SlotHealth>>,
    fence: u64,
    /// The actor was asked to sleep and has not answered: what would be told to it waits
    /// here meanwhile.
    asking: Option<dormancy::Asking>,
    /// While the slot sleeps, when its actor is to start again (its pump time), if ever.
    next: Option<Millis>,
}

impl SlotEntry {
    /// The actor, while it runs and is not being asked to sleep: what may be told to it now.
    fn awake(&self) -> Option<&Addr<SlotActor>> {
        self.addr.as_ref().filter(|_| self.asking.is_none())
    }
}

pub(crate) struct SlotKeeper {
    rt: Arc<Runtime>,
    slots: BTreeMap<(String, u32), SlotEntry>,
    /// The topics whose slots slot actors serve (pull topics have none), by name.
    topics: BTreeMap<String, Arc<TopicConfig>>,
    /// This instance's name.
    instance: String,
    /// The id this process's owner leases carry: the name and this process's incarnation
    /// (`store::owner_id`), so that a process restarted under the same name takes its
    /// predecessor's slots over at once, under new fences.
    owner: String,
    stopping: bool,
    /// The ownership rounds' state (`ownership.rs`).
    rounds: ownership::Rounds,
    /// The safety net's round and sweep (`safety_net.rs`).
    net: safety_net::Net,
    /// The threads slot actors run on.
    workers: Workers,
    /// The sleeping slots' next times and their one timer (`dormancy.rs`).
    dormant: dormancy::Dormant,
    /// Where slot actors say they are at rest: this keeper, once started.
    me: Option<Recipient<crate::actors::messages::SlotIdle>>,
}

/// How often the supervisor looks for topics created elsewhere (another instance, the
/// HTTP API), in multiples of the poll interval.
const DISCOVERY_POLLS: u32 = 5;

impl SlotKeeper {
    pub(crate) fn new(rt: Arc<Runtime>) -> Self {
        let workers = Workers::new(rt.settings.worker_threads(), &rt.types);
        let instance = rt.instance.clone();
        SlotKeeper {
            rounds: ownership::Rounds::new(&instance, rt.type_names()),
            owner: crate::store::owner_id(&instance, rand::random()),
            instance,
            rt,
            slots: BTreeMap::new(),
            topics: BTreeMap::new(),
            stopping: false,
            net: safety_net::Net::default(),
            workers,
            dormant: dormancy::Dormant::default(),
            me: None,
        }
    }

    fn lease_ms(&self) -> u64 {
        self.rt.settings.owner_lease_ms
    }

    /// The slots of `topic` this instance runs an actor for, by slot: a range of the map,
    /// not a look through every topic's slots (that made each discovery round cost topics x
    /// slots).
    fn slots_of<'a>(&'a self, topic: &str) -> impl Iterator<Item = (u32, &'a SlotEntry)> + 'a {
        let (from, to) = ((topic.to_string(), 0), (topic.to_string(), u32::MAX));
        self.slots.range(from..=to).map(|((_, slot), e)| (*slot, e))
    }

    /// Serves an owned slot under `fence`: a slot new here starts asleep, its next time read
    /// from the store (`dormancy.rs`: an actor starts at once if a job is due within the
    /// horizon), so an idle topic never has an actor; a slot served already goes on under
    /// the new fence.
    fn start(&mut self, ctx: &mut Context<Self>, topic: &str, slot: u32, fence: u64) {
        let Some(t) = self.topics.get(topic).cloned() else {
            return; // a pull topic now, or stopping
        };
        if self.stopping || slot >= t.slots {
            return;
        }
        let key = (topic.to_string(), slot);
        if let Some(entry) = self.slots.get_mut(&key) {
            let refenced = entry.fence != fence;
            // A new lease: another instance held the slot between two of this one's
            // rounds. The actor goes on under the new fence, and its runs with it (halted,
            // it dropped them, and they waited for their leases to end).
            entry.fence = fence;
            match (&entry.addr, &mut entry.asking) {
                (None, _) => {
                    if refenced {
                        // Asleep: a new actor pumps under the new fence now.
                        entry.status.lock().expect("slot status lock").fence = fence;
                        self.rouse(&key);
                    }
                    return;
                }
                (Some(_), Some(asking)) => {
                    asking.refenced |= refenced;
                    return;
                }
                (Some(addr), None) if addr.connected() => {
                    if refenced {
                        addr.do_send(Refence(fence));
                    }
                    return;
                }
                (Some(_), None) => {}
            }
            self.stop(topic, slot);
        }
        let status = Arc::new(Mutex::new(SlotHealth {
            topic: t.name.clone(),
            slot,
            fence,
            dormant: true,
            ..SlotHealth::default()
        }));
        self.slots.insert(
            key.clone(),
            SlotEntry {
                addr: None,
                status,
                fence,
                asking: None,
                next: None,
            },
        );
        self.watch(topic, slot, true);
        self.look(ctx, key);
    }

    /// Starts a slot actor on the next worker thread; it pumps at once.
    fn spawn_actor(
        &mut self,
        topic: Arc<TopicConfig>,
        slot: u32,
        fence: u64,
        status: Arc<Mutex<SlotHealth>>,
    ) -> Addr<SlotActor> {
        let rt = self.rt.clone();
        let keeper = self.me.clone().expect("the keeper is started");
        let (worker, handlers) = self.workers.next();
        actix::Supervisor::start_in_arbiter(&worker, move |_| {
            SlotActor::new(topic, slot, fence, rt, status, handlers, keeper)
        })
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

    /// Stops a slot's actor for good (no restart: its address is dropped), or forgets the
    /// sleeping slot.
    fn stop(&mut self, topic: &str, slot: u32) {
        if let Some(entry) = self.remove(topic, slot) {
            if let Some(addr) = entry.addr {
                addr.do_send(Halt);
            }
            self.watch(topic, slot, false);
        }
    }

    /// Takes a slot's entry out of the keeper's map (and a sleeping slot's next time out of
    /// the keeper's timer).
    fn remove(&mut self, topic: &str, slot: u32) -> Option<SlotEntry> {
        let key = (topic.to_string(), slot);
        let entry = self.slots.remove(&key)?;
        self.dormant.forget(entry.next, &key);
        Some(entry)
    }
}

impl Actor for SlotKeeper {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.me = Some(ctx.address().recipient());
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
        let key = (notice.topic.clone(), notice.slot);
        if self.slots.contains_key(&key) {
            self.wake(ctx, &key, notice.at);
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
                        let key = (notice.topic.clone(), notice.slot);
                        if act.slots.contains_key(&key) {
                            act.wake(ctx, &key, notice.at);
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
                // A sleeping slot is served: the keeper starts its actor when it is due.
                h.dormant = e.addr.is_none();
                h.alive = h.dormant || (h.alive && e.addr.as_ref().is_some_and(Addr::connected));
                h
            })
            .collect()
    }
}

impl Handler<HaltSlot> for SlotKeeper {
    type Result = bool;

    fn handle(&mut self, msg: HaltSlot, _: &mut Context<Self>) -> bool {
        match self
            .slots
            .get(&(msg.topic, msg.slot))
            .and_then(|e| e.addr.as_ref())
        {
            Some(addr) => {
                addr.do_send(Halt);
                true
            }
            // No actor: the slot is not served here, or it sleeps.
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
            .filter_map(|e| e.addr.as_ref())
            .map(|addr| addr.send(Drain { grace: msg.grace }))
            .collect();
        // Then the slots are handed off, so other instances take them at once.
        // A slot whose topic is gone here has no lease left to give up (a deletion takes
        // the topic's owner leases with it).
        let owned: Vec<(Arc<TopicConfig>, u32)> = self
            .slots
            .keys()
            .filter_map(|(name, slot)| Some((self.topics.get(name)?.clone(), *slot)))
            .collect();
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
            // A bounded number at once: 160,000 calls queued together outlast the store's
            // timeout.
            let gone = futures_util::stream::iter(&owned)
                .map(|(topic, slot)| store.disown(topic, *slot, &owner))
                .buffer_unordered(ownership::LEASE_CALLS)
                .collect::<Vec<_>>()
                .await;
            for r in gone {
                if let Err(e) = r {
                    tracing::warn!(error = %e, "could not hand a slot off; its lease runs out instead");
                }
            }
            // And the instance leaves the registry (a registration that runs out at once).
            if let Err(e) = store.register(&instance, &[], now, 0).await {
                tracing::warn!(error = %e, "could not leave the registry; the registration runs out instead");
            }
            released
        })
    }
}

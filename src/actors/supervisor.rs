//! The supervisor: starts one slot actor per (topic, slot) served, restarts any that stops
//! (actix `Supervised`), and answers health with each slot's state.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;

use super::messages::{
    Drain, GetHealth, Halt, HaltSlot, Retune, ServeTopic, Shutdown, SlotHealth, Wake, WakeSlot,
};
use super::runtime::Runtime;
use super::slot::SlotActor;

struct SlotEntry {
    addr: Addr<SlotActor>,
    status: Arc<Mutex<SlotHealth>>,
}

pub(crate) struct Supervisor {
    rt: Arc<Runtime>,
    slots: BTreeMap<(String, u32), SlotEntry>,
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
        Supervisor {
            rt,
            slots: BTreeMap::new(),
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

    fn serve(&mut self, topic: Arc<crate::topic::TopicConfig>) {
        if self.stopping {
            return;
        }
        if topic.default_type == crate::jobs::pull::TYPE {
            // Consumers claim a pull topic's jobs: no slot actor pumps it.
            self.slots.retain(|(name, _), entry| {
                let keep = name != &topic.name;
                if !keep {
                    entry.addr.do_send(Halt);
                }
                keep
            });
            return;
        }
        for slot in 0..topic.slots {
            let key = (topic.name.clone(), slot);
            if let Some(entry) = self.slots.get(&key) {
                // Served already: the settings may have changed (put_topic).
                entry.addr.do_send(Retune(topic.clone()));
                continue;
            }
            let status = Arc::new(Mutex::new(SlotHealth {
                topic: topic.name.clone(),
                slot,
                ..SlotHealth::default()
            }));
            let (t, rt, st) = (topic.clone(), self.rt.clone(), status.clone());
            let worker = self.worker();
            let addr = actix::Supervisor::start_in_arbiter(&worker, move |_| {
                SlotActor::new(t, slot, rt, st)
            });
            self.slots.insert(key, SlotEntry { addr, status });
        }
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
                        act.serve(t)
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
        self.discover(ctx);
        let every = Duration::from_millis(self.rt.settings.poll_ms * DISCOVERY_POLLS as u64);
        ctx.run_interval(every, |act, ctx| {
            if !act.stopping {
                act.discover(ctx);
            }
        });
    }
}

impl Handler<ServeTopic> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: ServeTopic, _: &mut Context<Self>) {
        self.serve(msg.0);
    }
}

impl Handler<WakeSlot> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: WakeSlot, ctx: &mut Context<Self>) {
        let notice = msg.0;
        if let Some(entry) = self.slots.get(&(notice.topic.clone(), notice.slot)) {
            entry.addr.do_send(Wake { at: notice.at });
            return;
        }
        // A topic this instance does not serve yet (created by another instance).
        let store = self.rt.store.clone();
        ctx.spawn(
            async move { store.find_topic(&notice.topic).await.map(|t| (t, notice)) }
                .into_actor(self)
                .map(|found, act, _| {
                    if let Ok((Some(topic), notice)) = found {
                        act.serve(topic);
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
        Box::pin(async move {
            futures_util::future::join_all(drains)
                .await
                .into_iter()
                .map(|r| r.unwrap_or(0))
                .sum()
        })
    }
}

//! The slot actor: a Reactor dispatcher for one (topic, slot). It sleeps until its slot next
//! needs attention (the earliest due job or lease deadline, as `pump` reports it; with
//! none, it holds no timer), or until told of an earlier job (a wake notice, or the
//! instance's safety net); pumps a bounded batch; hands each job
//! to its type's handler actor; and turns outcomes into ack, retry, repeat or dead letter.
//! It never runs business code itself.
//!
//! Outcomes are settled in batches: every outcome that arrived while the previous settle
//! was in flight goes to the store in one call, which applies them and appends their events
//! in one atomic step (`Store::settle`). Under load that is one script per slot per batch.
//!
//! The batch window (`runtime.batch_window_ms`) makes batches of fires spread in time: a
//! pump also leases what falls due within the window past its next fire time (each job
//! held until its own), and an outcome waits up to the window for those of the slot's
//! other runs, so that at 10,000 fires/s a pump and a settle carry several fires each.
//!
//! The wing's files: `core.rs` the slot's states and numbered rules (no actix, tested
//! alone); this file the actor and its message handlers; `state.rs` whether it may sleep
//! and how many runs it may take, which calls none of the other files; `signs.rs` what it
//! shows outside (status, runs in flight, pump in flight); `pump.rs` its timer, what a pump
//! asks the store and the runs it takes in, each due now or held until its fire time;
//! `run_book.rs` the runs handed out and the outcomes waiting to settle (no actix, tested
//! alone); `flow.rs` a due run at its flow key's gate: run, waiting in its key's line
//! (`flow_gate.rs`, no actix, tested alone), sent back or set aside; `runs.rs` a run on its
//! handler and its report turned into an outcome; `leases.rs` the lease sweep; `settle.rs`
//! outcomes in batches; `lead.rs` how far ahead of a fire its pump goes; `metrics.rs` its
//! topic's series. Calls between the files go one way (a run's room given back reaches the
//! key's line as a message, `RoomFreed`). Every store call of the wing goes through the
//! slot's door (`SlotDoor`): no topic is named or looked up on the fire path.

use std::sync::{Arc, Mutex};

use actix::prelude::*;

pub(crate) mod core;
mod flow;
pub(crate) mod flow_gate;
pub(crate) mod lead;
mod leases;
mod metrics;
mod pump;
mod run_book;
mod runs;
mod settle;
mod signs;
mod state;

use self::core::SlotCore;
use self::flow_gate::FlowGate;
use self::lead::Lead;
use self::metrics::SlotMetrics;
use self::run_book::RunBook;
use self::signs::Signs;
use super::handler::LocalHandlers;
use super::messages::{Drain, Halt, Pump, Refence, Retune, Sleep, SlotHealth, SlotIdle, Wake};
use super::runtime::Runtime;
use crate::model::{Finished, Leased, RunOutcome, Settlement};
use crate::store::SlotDoor;
use crate::time::Millis;
use crate::topic::TopicConfig;

pub(crate) struct SlotActor {
    /// The slot's door to the store: its topic's settings as this actor holds them, the
    /// slot, and the owner lease's fence it pumps under (see `Store::own`). Rebuilt when the
    /// settings (`Retune`) or the fence (`Refence`) change.
    door: SlotDoor,
    /// What the slot is doing (pumping, settling, its batch window): `core.rs`, whose
    /// answers this actor carries out.
    core: SlotCore,
    rt: Arc<Runtime>,
    /// What the slot shows outside: its status, runs in flight, pump in flight (`signs.rs`).
    signs: Signs,
    /// Runs handed out whose report has not come back, each with the lease deadline it
    /// holds now (`sweep_leases` moves it), and the outcomes waiting for the next settle
    /// (`run_book.rs`).
    book: RunBook,
    /// Where this actor tells the slot keeper it is at rest (`offer_sleep`).
    keeper: Recipient<SlotIdle>,
    /// How long before their fire time this slot's pumps lease jobs: `runtime.fire_lead_ms`,
    /// longer while the store answers slowly (see `super::lead`).
    lead: Lead,
    /// The topic's series (`metrics.rs`).
    metrics: SlotMetrics,
    /// The actor's own timers.
    timers: Timers,
    /// The job types' actors on this actor's thread.
    handlers: LocalHandlers,
    /// Due runs waiting for room on their flow key (`flow_gate.rs`).
    gate: FlowGate,
}

/// The slot actor's timers, each its handle in the actor's context while armed.
#[derive(Default)]
struct Timers {
    /// The next pump, and when it is armed for.
    next: Option<(SpawnHandle, Millis)>,
    /// A settle held for the batch window.
    flush: Option<SpawnHandle>,
    /// The lease sweep, while runs are out (`leases.rs`).
    lease_sweep: Option<SpawnHandle>,
    /// Per flow key whose line waits, the timer of its next ask for room (`flow.rs`).
    flow_asks: std::collections::HashMap<String, SpawnHandle>,
}

impl SlotActor {
    pub(crate) fn new(
        topic: Arc<TopicConfig>,
        slot: u32,
        fence: u64,
        rt: Arc<Runtime>,
        status: Arc<Mutex<SlotHealth>>,
        handlers: LocalHandlers,
        keeper: Recipient<SlotIdle>,
    ) -> Self {
        let lead = Lead::new(rt.settings.fire_lead_ms, rt.settings.fire_lead_max_ms);
        SlotActor {
            core: SlotCore::default(),
            lead,
            metrics: SlotMetrics::new(&rt.metrics.fires, &topic.name),
            handlers,
            gate: FlowGate::default(),
            door: rt.store.slot_door(topic, slot, fence),
            rt,
            signs: Signs::new(status),
            book: RunBook::default(),
            timers: Timers::default(),
            keeper,
        }
    }
}

impl Actor for SlotActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.signs.status(|s| s.alive = true);
        self.pump(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.signs.status(|s| s.alive = false);
        if !self.core.asleep() {
            signs::slot_changed(&self.rt.slot_changes);
        }
    }
}

impl Supervised for SlotActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        // Runs in flight were dropped with the old context; their leases expire and the jobs
        // run again (at least once).
        self.book.clear();
        // The old context's timers are gone with it.
        self.timers.lease_sweep = None;
        self.core.restarted();
        self.signs.track(&self.book, &self.core, &self.gate);
        self.signs.pumping(self.core.pump_in_flight());
        self.timers.next = None;
        self.timers.flush = None;
        self.signs.status(|s| {
            s.restarts += 1;
            s.armed_at = None;
        });
    }
}

impl Handler<Pump> for SlotActor {
    type Result = ();

    fn handle(&mut self, _: Pump, ctx: &mut Context<Self>) {
        self.pump(ctx);
    }
}

impl Handler<Retune> for SlotActor {
    type Result = ();

    fn handle(&mut self, msg: Retune, ctx: &mut Context<Self>) {
        let resumed = self.door.topic().paused && !msg.0.paused;
        self.door = self.door.with_topic(msg.0);
        if self.door.topic().paused && self.gate.len() > 0 {
            // Paused: nothing fires, so what waits for room goes back to the store.
            self.give_back_waiting(ctx);
            self.settle_soon(ctx);
        }
        if resumed {
            // What came due while paused fires now, in fire-time order (the pump's order).
            self.pump(ctx);
        }
    }
}

impl Handler<Wake> for SlotActor {
    type Result = ();

    fn handle(&mut self, msg: Wake, ctx: &mut Context<Self>) {
        // Pumped a lead before its fire time, as the pump's own next time is.
        let pump_at = msg.at.saturating_sub(self.lead.within(
            std::time::Instant::now(),
            self.door.topic().visibility_timeout_ms,
        ));
        if !self.core.woken(pump_at) {
            return;
        }
        match self.timers.next {
            Some((_, at)) if at <= pump_at => {}
            _ => self.arm(Some(pump_at), ctx),
        }
    }
}

impl Handler<Sleep> for SlotActor {
    type Result = Option<Option<Millis>>;

    /// The keeper forwards nothing to a slot it asked to sleep until it answers, so every
    /// wake it was told is in the timer by now.
    fn handle(&mut self, _: Sleep, ctx: &mut Context<Self>) -> Option<Option<Millis>> {
        let may = self.may_sleep();
        self.core.rest_answered(may);
        if !may {
            return None;
        }
        let next = self.timers.next.map(|(_, at)| at);
        self.cancel_timer(ctx);
        if let Some(sweep) = self.timers.lease_sweep.take() {
            ctx.cancel_future(sweep);
        }
        Some(next)
    }
}

impl Handler<Refence> for SlotActor {
    type Result = ();

    fn handle(&mut self, msg: Refence, ctx: &mut Context<Self>) {
        self.door = self.door.with_fence(msg.0);
        self.core.refenced();
        self.signs.status(|s| {
            s.fence = msg.0;
            s.fenced = false;
        });
        self.pump(ctx);
    }
}

impl Handler<Halt> for SlotActor {
    type Result = ();

    fn handle(&mut self, _: Halt, ctx: &mut Context<Self>) {
        // Outcomes waiting for the batch window are settled all the same, outside the
        // actor (its futures stop with it), so that their jobs are not run again.
        if self.book.waiting() > 0 && !self.core.settle_backing_off() {
            let batch = self.book.take_outcomes();
            let (door, now) = (self.door.clone(), self.rt.clock.now());
            actix::spawn(async move {
                if let Err(e) = door.settle(&batch, now).await {
                    let (topic, slot) = (&door.topic().name, door.slot());
                    tracing::warn!(topic, slot, error = %e, "could not settle runs at a halt; their leases expire and they run again");
                }
            });
        }
        ctx.stop();
    }
}

impl Handler<Drain> for SlotActor {
    type Result = ResponseActFuture<Self, usize>;

    fn handle(&mut self, msg: Drain, ctx: &mut Context<Self>) -> Self::Result {
        self.core.drain();
        self.cancel_timer(ctx);
        // Runs waiting for room on their flow key go back to the store rather than wait.
        self.give_back_waiting(ctx);
        // Outcomes waiting for the batch window go now.
        self.settle(ctx);
        let until = tokio::time::Instant::now() + msg.grace;
        let (mut pump, mut idle) = self.signs.watch();
        let wait = async move {
            // A pump in flight is waited for whatever the grace (the store's response timeout
            // bounds it): the runs it leased are run, or given back below.
            let _ = pump.wait_for(|pumping| !*pumping).await;
            let _ = tokio::time::timeout_at(until, idle.wait_for(|n| *n == 0)).await;
        };
        Box::pin(wait.into_actor(self).then(|_, act, _| {
            let left: Vec<Leased> = act.book.runs().map(|lease| (**lease).clone()).collect();
            let (door, now) = (act.door.clone(), act.rt.clock.now());
            async move {
                let batch: Vec<Settlement> = left
                    .into_iter()
                    .map(|lease| Settlement::new(lease, RunOutcome::Release, now))
                    .collect();
                match door.settle(&batch, now).await {
                    Ok(done) => {
                        let given_back: Vec<(String, u64)> = batch
                            .iter()
                            .zip(&done)
                            .filter(|(_, f)| **f == Finished::Released)
                            .map(|(s, _)| (s.run.job.id.clone(), s.run.token))
                            .collect();
                        given_back
                    }
                    Err(e) => {
                        let (topic, slot) = (&door.topic().name, door.slot());
                        tracing::warn!(topic, slot, error = %e, "could not give back leases; they expire instead");
                        Vec::new()
                    }
                }
            }
            .into_actor(act)
            .map(|given_back, act, _| {
                // Runs given back are the store's again: a job held for its fire time (the
                // lead) must not start here when that time comes.
                for (id, token) in &given_back {
                    act.book.release(id, *token);
                }
                act.signs.track(&act.book, &act.core, &act.gate);
                given_back.len()
            })
        }))
    }
}

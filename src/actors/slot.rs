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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use futures_util::future::Either;
use tokio::sync::watch;

use super::flow_gate::{FlowGate, POLL_MS, member};
use super::handler::LocalHandlers;
use super::lead::Lead;
use super::messages::{
    Drain, Halt, Pump, Refence, Retune, RunJob, RunReport, Sleep, SlotHealth, SlotIdle, Wake,
};
use super::runtime::Runtime;
use super::slot_core::{AfterPump, PumpEnd, SettleEnd, SettleWhen, SlotCore};
use crate::job_type::{Emitter, JobContext, OtherJobs, Outcome};
use crate::model::{Finished, Leased, Pumped, RunOutcome, Settlement};
use crate::time::Millis;
use crate::topic::TopicConfig;

pub(crate) struct SlotActor {
    topic: Arc<TopicConfig>,
    slot: u32,
    /// The owner lease's fence this actor pumps under (see `Store::own`).
    fence: u64,
    /// What the slot is doing (pumping, settling, its batch window): `slot_core.rs`, whose
    /// answers this actor carries out.
    core: SlotCore,
    rt: Arc<Runtime>,
    /// Shared with the slot keeper, which reads it for `/health`.
    status: Arc<Mutex<SlotHealth>>,
    /// Runs handed to their handler whose report has not come back, by job id, each with
    /// the lease deadline it holds now (`sweep_leases` moves it). Hashed with foldhash: a
    /// burst inserts and removes an id per run.
    running: HashMap<String, Arc<Leased>, foldhash::fast::RandomState>,
    /// Reported outcomes waiting for the next settle.
    outcomes: Vec<Settlement>,
    /// Runs not yet settled in the store (running, waiting, settling), for `Drain` to wait on.
    in_flight: watch::Sender<usize>,
    /// A pump is in flight (the core's state, published). Its answer holds the runs the
    /// store leased to this actor, which `Drain` waits for: stopped before it, they would
    /// stay leased to no one until their lease ran out.
    pumping: watch::Sender<bool>,
    /// The pending wake-up and its instant.
    timer: Option<(SpawnHandle, Millis)>,
    /// The batch window's timer, while it is open.
    flush: Option<SpawnHandle>,
    /// The lease sweep's timer, set only while runs are out (an idle slot holds no timer,
    /// issue 48).
    lease_sweep: Option<SpawnHandle>,
    /// Where this actor tells the slot keeper it is at rest (`offer_sleep`).
    keeper: Recipient<SlotIdle>,
    /// It told the keeper it is at rest and has not been answered busy since.
    offered: bool,
    /// It agreed to sleep: it stops when the keeper drops its address, which is no change
    /// of ownership (the keeper holds the slot).
    asleep: bool,
    /// How long before their fire time this slot's pumps lease jobs: `runtime.fire_lead_ms`,
    /// longer while the store answers slowly (see `super::lead`).
    lead: Lead,
    /// This topic's metric handles, looked up once rather than per job.
    fired: prometheus::IntCounter,
    fired_after_pump: prometheus::IntCounter,
    lateness: prometheus::Histogram,
    pump_batch: prometheus::Histogram,
    pump_seconds: prometheus::Histogram,
    pump_lead: prometheus::Histogram,
    retried: prometheus::IntCounter,
    dead: prometheus::IntCounter,
    /// Handler durations by job type, each looked up once.
    handler_durations: HashMap<String, prometheus::Histogram>,
    /// The job types' actors on this actor's thread.
    handlers: LocalHandlers,
    /// Due runs waiting for room on their flow key (`flow_gate.rs`).
    gate: FlowGate,
    /// The topic's flow metrics (waiting jobs, wait), looked up at the first wait: a topic
    /// without flow limits has no series of them.
    flow_metrics: Option<(prometheus::IntGauge, prometheus::Histogram)>,
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
        let m = &rt.metrics;
        let name = [topic.name.as_str()];
        let lead = Lead::new(rt.settings.fire_lead_ms, rt.settings.fire_lead_max_ms);
        SlotActor {
            fence,
            core: SlotCore::default(),
            lead,
            fired: m.fired.with_label_values(&name),
            fired_after_pump: m.fired_after_pump.with_label_values(&name),
            lateness: m.lateness.with_label_values(&name),
            pump_batch: m.pump_batch.with_label_values(&name),
            pump_seconds: m.pump_seconds.with_label_values(&name),
            pump_lead: m.pump_lead.with_label_values(&name),
            retried: m.retried.with_label_values(&name),
            dead: m.dead.with_label_values(&name),
            handler_durations: HashMap::new(),
            handlers,
            gate: FlowGate::default(),
            flow_metrics: None,
            topic,
            slot,
            rt,
            status,
            running: HashMap::default(),
            outcomes: Vec::new(),
            in_flight: watch::channel(0).0,
            pumping: watch::channel(false).0,
            timer: None,
            flush: None,
            lease_sweep: None,
            keeper,
            offered: false,
            asleep: false,
        }
    }

    /// Tells the keeper's next ownership round to look at every slot (this one was fenced
    /// or stopped).
    fn slot_changed(&self) {
        self.rt
            .slot_changes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn set_status(&self, f: impl FnOnce(&mut SlotHealth)) {
        f(&mut self.status.lock().expect("slot status lock"));
    }

    fn cancel_timer(&mut self, ctx: &mut Context<Self>) {
        if let Some((handle, _)) = self.timer.take() {
            ctx.cancel_future(handle);
        }
        self.set_status(|s| s.armed_at = None);
    }

    /// Sleeps until `next_at`; with none, holds no timer at all. A job written after the
    /// pump that told `next_at` wakes the slot by its notice, and one whose notice was lost
    /// is found by the instance's safety net (the keeper's `safety_net`), not by a poll of
    /// each slot's own.
    fn arm(&mut self, next_at: Option<Millis>, ctx: &mut Context<Self>) {
        self.cancel_timer(ctx);
        let Some(at) = next_at else {
            return;
        };
        // To the microsecond: the job is due at the start of its millisecond.
        let wake = self
            .rt
            .clock
            .until(at * 1_000)
            .into_actor(self)
            .map(|_, act, ctx| {
                act.timer = None;
                act.set_status(|s| s.armed_at = None);
                act.pump(ctx);
            });
        let handle = ctx.spawn(wake);
        self.timer = Some((handle, at));
        self.set_status(|s| s.armed_at = Some(at));
    }

    /// Nothing of the slot's is in flight or owed, and its next time is further ahead than
    /// `runtime.dormant_after_ms` (or there is none): it may sleep, its keeper holding that
    /// time (rule 7 of `slot_core.rs`).
    fn may_sleep(&self) -> bool {
        let horizon = self
            .rt
            .clock
            .now()
            .saturating_add(crate::num::millis(self.rt.settings.dormant_after_ms));
        self.core.at_rest()
            && self.unsettled() == 0
            && self.flush.is_none()
            && self.timer.is_none_or(|(_, at)| at > horizon)
    }

    /// Tells the keeper, once, that the slot may sleep; it answers with `Sleep`.
    fn offer_sleep(&mut self) {
        if self.offered || !self.may_sleep() {
            return;
        }
        self.offered = true;
        self.keeper.do_send(SlotIdle {
            topic: self.topic.name.clone(),
            slot: self.slot,
        });
    }

    /// Publishes whether a pump is in flight (for `Drain`).
    fn publish_pumping(&self) {
        self.pumping.send_replace(self.core.pump_in_flight());
    }

    fn unsettled(&self) -> usize {
        self.running.len() + self.outcomes.len() + self.core.settling_runs()
    }

    /// The topic's flow metrics: jobs waiting on this instance, and how long they waited.
    fn flow_metrics(&mut self) -> &(prometheus::IntGauge, prometheus::Histogram) {
        let (m, name) = (&self.rt.metrics, [self.topic.name.as_str()]);
        self.flow_metrics.get_or_insert_with(|| {
            (
                m.flow_waiting.with_label_values(&name),
                m.flow_wait.with_label_values(&name),
            )
        })
    }

    /// Counts `n` more (or fewer) runs waiting for room on their flow key.
    fn count_waiting(&mut self, n: i64) {
        self.flow_metrics().0.add(n);
    }

    /// Runs a pump may lease now: runs waiting for room on their flow key do not count
    /// (other keys' jobs are not held behind them) until they reach
    /// `runtime.flow_max_waiting`. One key holds at most `runtime.flow_max_waiting_per_key`
    /// of them (`defer`), so it takes many keys without room to reach it.
    fn capacity(&self) -> usize {
        let waiting = self.gate.len();
        if waiting >= self.rt.settings.flow_max_waiting {
            return 0;
        }
        self.rt
            .settings
            .pump_batch
            .saturating_sub(self.unsettled().saturating_sub(waiting))
    }

    /// Pumps now if the core allows it (see `SlotCore::want_pump`).
    fn pump(&mut self, ctx: &mut Context<Self>) {
        let capacity = self.capacity();
        let Some(start) = self.core.want_pump(capacity, self.topic.paused) else {
            return;
        };
        self.cancel_timer(ctx);
        self.publish_pumping();
        let now = self.rt.clock.now();
        let store = self.rt.store.clone();
        let (topic, slot, fence) = (self.topic.name.clone(), self.slot, self.fence);
        let limited = self.topic.max_fires_per_s.is_some();
        // Past the lead, the window: jobs due in it go out in this pump too.
        let (lead, window) = (self.lead(), self.window());
        let reach = lead.saturating_add(window);
        self.pump_lead.observe(crate::num::float(lead) / 1_000.0);
        let aside = self.set_aside(now);
        let fut = async move {
            let adopted = match start.adopt_above {
                Some(above) => store.adopt(&topic, slot, fence, above).await?,
                None => Vec::new(),
            };
            // A rate-limited topic's pump hands out no more than the fires its bucket
            // grants, and gives back those it did not use.
            let want = crate::num::to_u32(capacity);
            let grant = if limited {
                store.take_fires(&topic, want, now).await?
            } else {
                crate::store::Grant::all(want)
            };
            if grant.granted == 0 {
                return Ok((adopted, Pumped::default(), grant));
            }
            let limit = usize::try_from(grant.granted).unwrap_or(capacity);
            let pumped = store
                .pump_setting_aside(&topic, slot, fence, now, reach, limit, &aside)
                .await?;
            let unused = grant.granted - crate::num::to_u32(pumped.jobs.len());
            if limited && unused > 0 {
                // Lost, it would only hold fires back for a twentieth of a second.
                let _ = store.give_back_fires(&topic, unused, now).await;
            }
            Ok::<_, crate::error::Error>((adopted, pumped, grant))
        };
        let asked = std::time::Instant::now();
        let asked_us = self.rt.clock.now_us();
        ctx.spawn(fut.into_actor(self).map(move |result, act, ctx| {
            let answered = std::time::Instant::now();
            let round_trip = answered.saturating_duration_since(asked);
            act.pump_seconds.observe(round_trip.as_secs_f64());
            let (end, next_at) = match result {
                Ok((adopted, pumped, grant)) => {
                    act.lead.observe(round_trip, answered);
                    let granted = usize::try_from(grant.granted).unwrap_or(0);
                    let held_back = granted < capacity && pumped.jobs.len() >= granted;
                    let full = pumped.jobs.len() >= capacity;
                    let next_at = pumped.next_at;
                    act.count_set_aside(&pumped.set_aside);
                    act.take_runs(adopted, pumped, asked_us, now, ctx);
                    let end = if held_back {
                        PumpEnd::Limited { retry_in_ms: grant.retry_in_ms }
                    } else {
                        PumpEnd::Leased { full }
                    };
                    (end, next_at)
                }
                Err(e @ crate::error::Error::Fenced { .. }) => {
                    tracing::info!(topic = %act.topic.name, slot = act.slot, error = %e, "another instance owns the slot now: pumping stops");
                    act.set_status(|s| {
                        s.last_error = Some(e.to_string());
                        s.fenced = true;
                    });
                    act.slot_changed();
                    (PumpEnd::Fenced, None)
                }
                Err(e) => {
                    tracing::warn!(topic = %act.topic.name, slot = act.slot, error = %e, "pump failed");
                    act.rt
                        .metrics
                        .pump_failures
                        .with_label_values(&[act.topic.name.as_str()])
                        .inc();
                    act.set_status(|s| s.last_error = Some(e.to_string()));
                    (PumpEnd::Failed, None)
                }
            };
            let after = act.core.pump_answered(end);
            act.publish_pumping();
            match after {
                AfterPump::PumpAgain => ctx.notify(Pump),
                // The store counts the next time back from the next fire time by the whole
                // reach; the slot pumps a lead before it (the lead as it stands now, which
                // this pump's round trip may have moved), so that the pump takes the window
                // that follows it.
                AfterPump::SleepUntilNext => {
                    let back = reach.saturating_sub(act.lead());
                    let next = next_at.map(|at| at.saturating_add(back));
                    // A wake told during the pump (rule 6 of `slot_core.rs`).
                    let next = match (next, act.core.take_woken()) {
                        (Some(n), Some(w)) => Some(n.min(w)),
                        (n, w) => n.or(w),
                    };
                    act.arm(next, ctx);
                    act.offer_sleep();
                }
                AfterPump::SleepFor(wait) => {
                    let at = act.rt.clock.now().saturating_add(crate::num::millis(crate::num::duration_ms(wait)));
                    act.arm(Some(at), ctx);
                }
                AfterPump::Nothing => {}
            }
        }));
    }

    /// Takes in the runs a pump answered with: the adopted ones (a lost answer's, not yet
    /// running here) and the pumped ones, each to its handler now or held until its fire time.
    fn take_runs(
        &mut self,
        adopted: Vec<Leased>,
        pumped: Pumped,
        asked_us: i64,
        now: Millis,
        ctx: &mut Context<Self>,
    ) {
        let now_us = self.rt.clock.now_us();
        let mut held = Vec::new();
        for lease in adopted {
            if !self.running.contains_key(&lease.job.id) {
                tracing::info!(topic = %self.topic.name, slot = self.slot, job = %lease.job.id, "running a job whose pump's answer was lost");
                self.core.saw_token(lease.token);
                self.dispatch(lease, now_us, &mut held, ctx);
            }
        }
        let n = pumped.jobs.len();
        self.set_status(|s| {
            s.last_pump = Some(now);
            s.last_error = None;
        });
        self.pump_batch
            .observe(crate::num::float(crate::num::signed(
                crate::num::usize_u64(n),
            )));
        // Due between the ask and the answer: late by the round trip past the lead.
        let after = pumped
            .jobs
            .iter()
            .filter(|lease| {
                (asked_us + 1..=now_us).contains(&lease.job.fire_at.saturating_mul(1_000))
            })
            .count();
        self.fired_after_pump.inc_by(crate::num::usize_u64(after));
        for lease in pumped.jobs {
            self.core.saw_token(lease.token);
            self.dispatch(lease, now_us, &mut held, ctx);
        }
        self.hold(held, ctx);
        self.track();
    }

    fn track(&mut self) {
        let n = self.unsettled();
        self.in_flight.send_replace(n);
        let (waiting, oldest) = (self.gate.len(), self.gate.oldest());
        self.set_status(|s| {
            s.in_flight = n;
            s.flow_waiting = waiting;
            s.flow_oldest_wait = oldest;
        });
    }

    /// How long before their fire time this slot's pumps lease jobs now (`runtime.fire_lead_ms`,
    /// up to `runtime.fire_lead_max_ms` while the store answers slowly). A run's lease counts
    /// from its pump, so what the lead grows by is kept within a tenth of the topic's
    /// visibility timeout: a handler keeps nine tenths of it, at least, after its fire time.
    fn lead(&self) -> Millis {
        let floor = crate::num::millis(self.rt.settings.fire_lead_ms);
        let tenth = crate::num::millis(self.topic.visibility_timeout_ms / 10);
        self.lead
            .ms(std::time::Instant::now())
            .min(tenth.max(floor))
    }

    /// How far past its next fire time a pump also leases jobs, and how long an outcome may
    /// wait for the slot's other runs (`runtime.batch_window_ms`).
    fn window(&self) -> Millis {
        crate::num::millis(self.rt.settings.batch_window_ms)
    }

    /// Takes a run in: it is running from now on (for the lease sweep, a drain and the
    /// count in flight), and goes to its handler now if it is due by `now_us` (when its pump
    /// answered, read once for the batch), or into `held` if the pump leased it ahead (the
    /// lead): never early. The caller holds those (`hold`) and tracks the runs in flight
    /// once it has dispatched them all.
    fn dispatch(
        &mut self,
        lease: Leased,
        now_us: i64,
        held: &mut Vec<Arc<Leased>>,
        ctx: &mut Context<Self>,
    ) {
        // The lease is shared by the running map and this run's future.
        let lease = Arc::new(lease);
        self.running.insert(lease.job.id.clone(), lease.clone());
        self.arm_lease_sweep(ctx);
        if lease.job.fire_at.saturating_mul(1_000) > now_us {
            held.push(lease);
        } else {
            self.start(lease, now_us.div_euclid(1_000), ctx);
        }
    }

    /// Waits until the runs leased ahead are due on the store's clock, one wait per fire
    /// time, then starts those still this actor's (a run whose lease ran out meanwhile
    /// belongs to the store's next lease of its job).
    fn hold(&mut self, mut held: Vec<Arc<Leased>>, ctx: &mut Context<Self>) {
        held.sort_by_key(|lease| lease.job.fire_at);
        for group in held.chunk_by(|a, b| a.job.fire_at == b.job.fire_at) {
            let group = group.to_vec();
            let wait = self
                .rt
                .clock
                .until(group[0].job.fire_at.saturating_mul(1_000));
            ctx.spawn(wait.into_actor(self).map(move |_, act, ctx| {
                let now_us = act.rt.clock.now_us();
                let mut still = Vec::new();
                for lease in group {
                    let ours = act
                        .running
                        .get(&lease.job.id)
                        .is_some_and(|run| run.token == lease.token);
                    if !ours {
                        continue;
                    }
                    if lease.job.fire_at.saturating_mul(1_000) > now_us {
                        // Not yet due by the store's clock as sampled (a new sample moved
                        // it back, or a test's clock stands still): wait again.
                        still.push(lease);
                    } else {
                        act.start(lease, now_us.div_euclid(1_000), ctx);
                    }
                }
                act.hold(still, ctx);
            }));
        }
    }

    /// Hands a due job to its handler, or to its flow key's line when the key has limits;
    /// `fired_at` is now, read once for the batch.
    fn start(&mut self, lease: Arc<Leased>, fired_at: Millis, ctx: &mut Context<Self>) {
        if let Some(key) = self.gated(&lease.job, fired_at) {
            if self.gate.line(&key) >= self.rt.settings.flow_max_waiting_per_key {
                self.defer(lease, &key, fired_at, ctx);
                return;
            }
            self.gate.wait(&key, lease, fired_at);
            self.count_waiting(1);
            self.ask_flow(key, ctx);
            self.track();
            return;
        }
        self.run(lease, fired_at, None, ctx);
    }

    /// Sends a run of `key`, whose share of the waiting room is full, back to the store: due
    /// again when the runs ahead of it have likely had room, the attempt not counted. So one
    /// key's backlog waits in the store, and the slot goes on leasing other keys' jobs.
    fn defer(&mut self, lease: Arc<Leased>, key: &str, now: Millis, ctx: &mut Context<Self>) {
        let ours = self
            .running
            .get(&lease.job.id)
            .is_some_and(|run| run.token == lease.token);
        if !ours {
            return;
        }
        self.running.remove(&lease.job.id);
        let at = now.saturating_add(crate::num::millis(self.gate.defer_ms(key, now)));
        let lease = Arc::try_unwrap(lease).unwrap_or_else(|shared| (*shared).clone());
        self.rt
            .metrics
            .flow_deferred
            .with_label_values(&[self.topic.name.as_str()])
            .inc();
        self.outcomes
            .push(Settlement::new(lease, RunOutcome::Defer { at }, now));
        self.track();
        self.settle_soon(ctx);
    }

    /// The keys whose share of this slot's waiting room is full, each with the instant its
    /// runs sent back now are due again: the pump sets their due runs aside (`flow::SetAside`)
    /// rather than lease them for `defer` to send back one by one.
    fn set_aside(&self, now: Millis) -> crate::flow::SetAside {
        let share = self.rt.settings.flow_max_waiting_per_key;
        let keys: Vec<_> = self
            .gate
            .full(share)
            .map(|key| {
                let back = crate::num::millis(self.gate.back_in_ms(key, now));
                (key.to_string(), now.saturating_add(back))
            })
            .collect();
        if keys.is_empty() {
            return crate::flow::SetAside::default();
        }
        crate::flow::SetAside {
            keys,
            by_url: self
                .topic
                .flow
                .as_ref()
                .is_some_and(|f| f.key == crate::flow::KeyFrom::Url),
            url_types: self
                .rt
                .types
                .iter()
                .filter(|(_, t)| t.handler.flow_key_is_url_host())
                .map(|(name, _)| *name)
                .collect(),
        }
    }

    /// Counts the runs a pump set aside as sent back, each under its key.
    fn count_set_aside(&mut self, set_aside: &[(String, u32)]) {
        for (key, n) in set_aside {
            self.gate.sent_back(key, u64::from(*n));
            self.rt
                .metrics
                .flow_deferred
                .with_label_values(&[self.topic.name.as_str()])
                .inc_by(u64::from(*n));
        }
    }

    /// The flow key a due job waits on: its own or its type's, when that key has limits.
    /// A fire too late to run (`misfire`) waits for nothing.
    fn gated(&self, job: &crate::model::Job, fired_at: Millis) -> Option<String> {
        if !self.topic.has_flow_limits() || job.misfire(fired_at).is_some() {
            return None;
        }
        let key = crate::flow::job_key(self.topic.flow.as_ref(), job.flow_key.as_deref(), || {
            self.rt
                .types
                .get(job.job_type.as_str())?
                .handler
                .flow_key(&job.payload)
        })?;
        self.topic.flow_limits(&key).map(|_| key)
    }

    /// Asks the store for room on `key` for its line's first runs, starts those granted,
    /// and sets the next ask: when the rate has room again, or after a short poll while
    /// the parallelism is full (a run of the key ending here asks at once).
    fn ask_flow(&mut self, key: String, ctx: &mut Context<Self>) {
        let (ask, timer) = self.gate.ask(&key);
        if let Some(timer) = timer {
            ctx.cancel_future(timer);
        }
        let Some(ask) = ask else {
            return;
        };
        let Some(limits) = self.topic.flow_limits(&key) else {
            // The key's limits are gone: its line fires now.
            let (runs, _) = self.gate.answered(&key, usize::MAX);
            self.count_waiting(-crate::num::signed(crate::num::usize_u64(runs.len())));
            let now = self.rt.clock.now();
            for lease in runs {
                self.run(lease, now, None, ctx);
            }
            return;
        };
        let (store, topic, now) = (
            self.rt.store.clone(),
            self.topic.clone(),
            self.rt.clock.now(),
        );
        let waiter = format!("{}/{}", self.rt.instance, self.slot);
        let asked_key = key.clone();
        let take = async move {
            let ask = crate::store::FlowAsk {
                key: &asked_key,
                runs: &ask.runs,
                hold_ms: topic.visibility_timeout_ms,
                waiter: &waiter,
                waiting: ask.waiting,
                oldest: ask.oldest,
            };
            store.flow_take(&topic, &limits, &ask, now).await
        };
        ctx.spawn(take.into_actor(self).map(move |answer, act, ctx| {
            let (granted, retry_ms) = match answer {
                Ok(g) => (usize::try_from(g.granted).unwrap_or(0), g.retry_in_ms),
                Err(e) => {
                    tracing::warn!(topic = %act.topic.name, slot = act.slot, key, error = %e, "could not ask for room on a flow key: asking again");
                    (0, 4 * POLL_MS)
                }
            };
            let (runs, again) = act.gate.answered(&key, granted);
            act.count_waiting(-crate::num::signed(crate::num::usize_u64(runs.len())));
            let now = act.rt.clock.now();
            let holds = limits.parallelism.is_some();
            let mut gone = Vec::new();
            for lease in runs {
                let ours = act
                    .running
                    .get(&lease.job.id)
                    .is_some_and(|run| run.token == lease.token);
                if !ours {
                    // Its lease ran out while it waited: the room goes back.
                    gone.push(member(&lease));
                    continue;
                }
                act.flow_metrics()
                    .1
                    .observe(crate::num::float((now - lease.job.fire_at).max(0)) / 1_000.0);
                act.run(lease, now, holds.then(|| key.clone()), ctx);
            }
            if holds && !gone.is_empty() {
                act.release_flow(key.clone(), gone, ctx);
            }
            act.track();
            if !act.gate.waits(&key) {
                return;
            }
            if again {
                act.ask_flow(key, ctx);
                return;
            }
            // The rate: when its oldest fire leaves the period. The parallelism: when a run
            // of the key ends here (its bell), or after a poll (one ended elsewhere).
            let bell = (retry_ms == 0).then(|| act.rt.flow_bells.bell(&act.topic.name, &key));
            let wait = Duration::from_millis(if retry_ms > 0 { retry_ms } else { POLL_MS });
            let until = async move {
                match bell {
                    Some(bell) => {
                        let _ = tokio::time::timeout(wait, bell.notified()).await;
                    }
                    None => tokio::time::sleep(wait).await,
                }
            };
            let next = key.clone();
            let timer = ctx.spawn(until.into_actor(act).map(move |(), act, ctx| {
                act.ask_flow(next, ctx);
            }));
            if let Some(old) = act.gate.set_retry(&key, timer) {
                ctx.cancel_future(old);
            }
        }));
    }

    /// Ends the room on `key` of runs that held it, then asks for this slot's line.
    fn release_flow(&mut self, key: String, runs: Vec<String>, ctx: &mut Context<Self>) {
        let (store, topic) = (self.rt.store.clone(), self.topic.clone());
        let release = async move {
            let done = store.flow_release(&topic, &key, &runs).await;
            (key, done)
        };
        ctx.spawn(release.into_actor(self).map(|(key, done), act, ctx| {
            match done {
                Ok(()) => act.rt.flow_bells.ring(&act.topic.name, &key),
                Err(e) => {
                    tracing::warn!(topic = %act.topic.name, slot = act.slot, key, error = %e, "could not end a run's room on its flow key: it ends with the run's lease");
                }
            }
            if act.gate.waits(&key) {
                act.ask_flow(key, ctx);
            }
        }));
    }

    /// Gives every run waiting for room back to the store, due at once and the attempt not
    /// counted (a drain, a pause): they fire from the store again.
    fn give_back_waiting(&mut self, ctx: &mut Context<Self>) {
        let (runs, timers) = self.gate.take_all();
        for timer in timers {
            ctx.cancel_future(timer);
        }
        if runs.is_empty() {
            return;
        }
        self.count_waiting(-crate::num::signed(crate::num::usize_u64(runs.len())));
        let now = self.rt.clock.now();
        for lease in runs {
            if self
                .running
                .get(&lease.job.id)
                .is_some_and(|run| run.token == lease.token)
            {
                self.running.remove(&lease.job.id);
                let lease = Arc::try_unwrap(lease).unwrap_or_else(|shared| (*shared).clone());
                self.outcomes
                    .push(Settlement::new(lease, RunOutcome::Release, now));
            }
        }
        self.track();
    }

    /// Hands a running job to its handler; `fired_at` is now. `flow`: the key whose room
    /// it holds, ended when it reports.
    fn run(
        &mut self,
        lease: Arc<Leased>,
        fired_at: Millis,
        flow: Option<String>,
        ctx: &mut Context<Self>,
    ) {
        self.fired.inc();
        let lateness = crate::num::float((fired_at - lease.job.fire_at).max(0)) / 1_000.0;
        self.lateness.observe(lateness);
        // The handler's context holds its own copy of the job; a traced job's fire is a span
        // of its trace, ended with the run (`crate::otel`).
        let span = crate::otel::process_span(&self.topic.name, &lease.job, fired_at)
            .unwrap_or_else(tracing::Span::none);
        let run = handler_run(
            &self.rt,
            &self.handlers,
            &self.topic,
            &lease,
            fired_at,
            span,
        );
        ctx.spawn(run.into_actor(self).map(move |report, act, ctx| {
            // The map's entry is another run's when the store leased the job again while
            // this one ran (its lease ran out): that one stays.
            if act
                .running
                .get(&lease.job.id)
                .is_some_and(|held| held.token == lease.token)
            {
                act.running.remove(&lease.job.id);
            }
            if let Some(key) = flow {
                act.release_flow(key, vec![member(&lease)], ctx);
            }
            let lease = Arc::try_unwrap(lease).unwrap_or_else(|shared| (*shared).clone());
            let settlement = act.settlement(lease, report, fired_at);
            act.outcomes.push(settlement);
            act.settle_soon(ctx);
        }));
    }

    /// Checks the runs' leases every sixth of a lease, from the first run out for as long as
    /// runs are out.
    fn arm_lease_sweep(&mut self, ctx: &mut Context<Self>) {
        if self.lease_sweep.is_some() {
            return;
        }
        let every = Duration::from_millis((self.topic.visibility_timeout_ms / 6).max(1));
        self.lease_sweep = Some(ctx.run_later(every, |act, ctx| {
            act.lease_sweep = None;
            act.sweep_leases(ctx);
            if !act.running.is_empty() {
                act.arm_lease_sweep(ctx);
            }
        }));
    }

    /// Extends the lease of every run that has used a third of it, so that a long run is not
    /// taken over: checked every sixth of a lease, a run is extended at the latest half way
    /// through its lease. One timer per slot: each run had one of its own, a timer entry
    /// made and dropped per job of a burst.
    fn sweep_leases(&mut self, ctx: &mut Context<Self>) {
        let now = self.rt.clock.latest();
        let lease = crate::num::millis(self.topic.visibility_timeout_ms);
        let until = self.topic.lease_deadline(now);
        for run in self.running.values() {
            // Two thirds or more of the lease left: not yet.
            if run.lease_until.saturating_sub(now).saturating_mul(3) >= lease.saturating_mul(2) {
                continue;
            }
            let (store, topic, run) = (
                self.rt.store.clone(),
                self.topic.name.clone(),
                Arc::clone(run),
            );
            let extend = async move {
                let extended = store.extend(&topic, &run, until).await;
                (run, extended)
            };
            ctx.spawn(
                extend
                    .into_actor(self)
                    .map(move |(run, extended), act, _| match extended {
                        Ok(true) => {
                            if let Some(held) = act.running.get_mut(&run.job.id)
                                && held.token == run.token
                            {
                                let held = Arc::make_mut(held);
                                held.lease_until = held.lease_until.max(until);
                            }
                        }
                        Ok(false) => tracing::warn!(job = %run.job.id, "lease lost while running"),
                        Err(e) => {
                            tracing::warn!(job = %run.job.id, error = %e, "lease extension failed")
                        }
                    }),
            );
        }
    }

    /// The handler duration histogram of this topic's `job_type`.
    fn handler_duration(&mut self, job_type: &str) -> &prometheus::Histogram {
        if !self.handler_durations.contains_key(job_type) {
            let h = self
                .rt
                .metrics
                .handler_duration
                .with_label_values(&[self.topic.name.as_str(), job_type]);
            self.handler_durations.insert(job_type.to_string(), h);
        }
        &self.handler_durations[job_type]
    }

    /// Turns a handler's report into the outcome the store applies.
    fn settlement(&mut self, lease: Leased, report: RunReport, fired_at: Millis) -> Settlement {
        let now = self.rt.clock.now();
        let job = &lease.job;
        self.handler_duration(&job.job_type)
            .observe(report.duration.as_secs_f64());
        let (attempts, clock) = (job.attempts, &self.rt.clock);
        let outcome = report.outcome.into_run(
            job.fire_at,
            now,
            || self.topic.backoff.delay_ms(attempts, &mut rand::rng()),
            |delay| clock.after(delay),
        );
        Settlement {
            run: lease,
            outcome,
            fired_at,
            emitted: report.emitted,
        }
    }

    /// Settles the gathered outcomes now, or when the batch window closes if other runs of
    /// this slot are still to report (held for their fire time or in their handler): theirs
    /// then go in the same call. Nothing waits with no other run, when the window is 0, while
    /// draining, or once a pump's worth has gathered.
    fn settle_soon(&mut self, ctx: &mut Context<Self>) {
        let window = self.window();
        let full = self.outcomes.len() >= self.rt.settings.pump_batch;
        let when =
            self.core
                .settle_when(crate::num::unsigned(window), !self.running.is_empty(), full);
        match when {
            SettleWhen::Now => self.settle(ctx),
            SettleWhen::OpenWindow => {
                let wait = Duration::from_millis(crate::num::unsigned(window));
                self.flush = Some(ctx.run_later(wait, |act, ctx| {
                    act.flush = None;
                    act.core.window_closed();
                    act.settle(ctx);
                }));
            }
            SettleWhen::Wait => {}
        }
    }

    /// Sends every gathered outcome to the store in one call, unless a call is in flight
    /// (its return sends what gathered meanwhile) or waits out its backoff.
    fn settle(&mut self, ctx: &mut Context<Self>) {
        if !self.core.begin_settle(self.outcomes.len()) {
            return;
        }
        if let Some(flush) = self.flush.take() {
            ctx.cancel_future(flush);
        }
        let batch = std::mem::take(&mut self.outcomes);
        let store = self.rt.store.clone();
        let (topic, slot, now) = (self.topic.name.clone(), self.slot, self.rt.clock.now());
        // Traced runs' settles are spans of their jobs' traces, ended with the call.
        let spans: Vec<tracing::Span> = batch
            .iter()
            .filter_map(|s| {
                let job = &s.run.job;
                crate::otel::settle_span(
                    &topic,
                    &job.id,
                    job.traceparent.as_deref(),
                    s.outcome.as_str(),
                )
            })
            .collect();
        let fut = async move {
            let result = store.settle(&topic, slot, &batch, now).await;
            drop(spans);
            (batch, result)
        };
        ctx.spawn(fut.into_actor(self).map(|(batch, result), act, ctx| {
            let mut unavailable = None;
            let end = match result {
                Ok(done) => {
                    let mut rescheduled = false;
                    for (item, finished) in batch.iter().zip(done) {
                        match finished {
                            Finished::Retrying => act.retried.inc(),
                            Finished::Dead => act.dead.inc(),
                            Finished::Stale => tracing::warn!(job = %item.run.job.id, "a run's outcome was stale: another run holds the job"),
                            _ => {}
                        }
                        // Scheduled again, perhaps before the slot's timer (armed for the
                        // run's lease deadline): a pump learns the slot's next time.
                        rescheduled |= matches!(finished, Finished::Retrying | Finished::Repeating | Finished::Rescheduled | Finished::Released);
                    }
                    SettleEnd::Applied { rescheduled }
                }
                Err(e) if e.is_unavailable() || matches!(e, crate::error::Error::StoreFull(_)) => {
                    // Nothing of the batch was applied (one atomic step), and the store may
                    // be back in a moment: the outcomes are kept, ahead of those gathered
                    // since, and sent again. Each run's token still decides in the store
                    // whether its outcome is current.
                    act.set_status(|s| s.last_error = Some(e.to_string()));
                    unavailable = Some((batch.len(), e));
                    let mut kept = batch;
                    kept.append(&mut act.outcomes);
                    act.outcomes = kept;
                    SettleEnd::Unavailable
                }
                Err(e) => {
                    // Refused for a reason a retry would not change: the runs stay running
                    // in the store, and come back when their lease runs out (at least once).
                    tracing::warn!(topic = %act.topic.name, slot = act.slot, runs = batch.len(), error = %e, "could not settle runs; their leases will expire and they run again");
                    act.set_status(|s| s.last_error = Some(e.to_string()));
                    SettleEnd::Refused
                }
            };
            if let Some(wait) = act.core.settle_answered(end) {
                if let Some((runs, e)) = &unavailable {
                    tracing::warn!(topic = %act.topic.name, slot = act.slot, runs, error = %e, retry_in_ms = crate::num::duration_ms(wait), "could not settle runs: trying again");
                }
                ctx.run_later(wait, |act, ctx| {
                    act.core.backoff_over();
                    act.settle(ctx);
                });
            }
            act.track();
            act.settle_soon(ctx);
            if act.core.pump_wanted() {
                act.pump(ctx);
            }
            act.offer_sleep();
        }));
    }
}

/// The run of `lease` on its type's handler actor on this thread, as a future of the
/// handler's report (its lease is extended meanwhile by the slot actor's `sweep_leases`).
fn handler_run(
    rt: &Runtime,
    handlers: &LocalHandlers,
    topic: &Arc<TopicConfig>,
    lease: &Leased,
    fired_at: Millis,
    span: tracing::Span,
) -> impl std::future::Future<Output = RunReport> + 'static {
    if let Some(outcome) = lease.job.misfire(fired_at) {
        rt.metrics.misfired.with_label_values(&[&topic.name]).inc();
        return Either::Right(std::future::ready(RunReport {
            outcome,
            duration: Duration::ZERO,
            emitted: Vec::new(),
        }));
    }
    let job_type = lease.job.job_type.as_str();
    let send = handlers.get(job_type).map(|actor| {
        actor.send(RunJob {
            ctx: JobContext {
                topic: topic.name.clone(),
                settings: topic.clone(),
                job: lease.job.clone(),
                payload: lease.job.payload.clone(),
                fired_at,
                events: Emitter::default(),
                jobs: OtherJobs::new(rt.store.clone(), rt.metrics.clone()),
                span,
            },
        })
    });
    match send {
        Some(send) => Either::Left(async move {
            send.await.unwrap_or_else(|e| RunReport {
                outcome: Outcome::retry(format!("handler actor unavailable: {e}")),
                duration: Duration::ZERO,
                emitted: Vec::new(),
            })
        }),
        None => Either::Right(std::future::ready(RunReport {
            outcome: Outcome::dead(format!(
                "no handler is registered for job type {job_type:?}"
            )),
            duration: Duration::ZERO,
            emitted: Vec::new(),
        })),
    }
}

impl Actor for SlotActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.set_status(|s| s.alive = true);
        self.pump(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.set_status(|s| s.alive = false);
        if !self.asleep {
            self.slot_changed();
        }
    }
}

impl Supervised for SlotActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        // Runs in flight were dropped with the old context; their leases expire and the jobs
        // run again (at least once).
        self.running.clear();
        self.outcomes.clear();
        // The old context's timers are gone with it.
        self.lease_sweep = None;
        self.offered = false;
        self.core.restarted();
        self.track();
        self.publish_pumping();
        self.timer = None;
        self.flush = None;
        self.set_status(|s| {
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
        let resumed = self.topic.paused && !msg.0.paused;
        self.topic = msg.0;
        if self.topic.paused && self.gate.len() > 0 {
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
        let pump_at = msg.at.saturating_sub(self.lead());
        if !self.core.woken(pump_at) {
            return;
        }
        match self.timer {
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
        self.offered = false;
        if !self.may_sleep() {
            return None;
        }
        let next = self.timer.map(|(_, at)| at);
        self.cancel_timer(ctx);
        if let Some(sweep) = self.lease_sweep.take() {
            ctx.cancel_future(sweep);
        }
        self.asleep = true;
        Some(next)
    }
}

impl Handler<Refence> for SlotActor {
    type Result = ();

    fn handle(&mut self, msg: Refence, ctx: &mut Context<Self>) {
        self.fence = msg.0;
        self.core.refenced();
        self.set_status(|s| {
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
        if !self.outcomes.is_empty() && !self.core.settle_backing_off() {
            let batch = std::mem::take(&mut self.outcomes);
            let (store, topic, slot, now) = (
                self.rt.store.clone(),
                self.topic.name.clone(),
                self.slot,
                self.rt.clock.now(),
            );
            actix::spawn(async move {
                if let Err(e) = store.settle(&topic, slot, &batch, now).await {
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
        let (mut pump, mut idle) = (self.pumping.subscribe(), self.in_flight.subscribe());
        let wait = async move {
            // A pump in flight is waited for whatever the grace (the store's response timeout
            // bounds it): the runs it leased are run, or given back below.
            let _ = pump.wait_for(|pumping| !*pumping).await;
            let _ = tokio::time::timeout_at(until, idle.wait_for(|n| *n == 0)).await;
        };
        Box::pin(wait.into_actor(self).then(|_, act, _| {
            let left: Vec<Leased> = act.running.values().map(|lease| (**lease).clone()).collect();
            let (store, topic, slot, now) = (act.rt.store.clone(), act.topic.name.clone(), act.slot, act.rt.clock.now());
            async move {
                let batch: Vec<Settlement> = left
                    .into_iter()
                    .map(|lease| Settlement::new(lease, RunOutcome::Release, now))
                    .collect();
                match store.settle(&topic, slot, &batch, now).await {
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
                    if act.running.get(id).is_some_and(|run| run.token == *token) {
                        act.running.remove(id);
                    }
                }
                act.track();
                given_back.len()
            })
        }))
    }
}

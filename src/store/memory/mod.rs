//! The `memory` engine, the zero-setup default: each (topic, slot) is a [`slot::SlotState`]
//! (a hierarchical timing wheel with a hash map) behind its own lock, so HTTP workers and
//! slot actors work on different slots at once. Events are a bounded ring per topic. With a
//! journal (`memory.journal`), every accepted change is on disk before the call returns
//! (`fsync = always`) or within a second (`every_second`), and the state is replayed at
//! start; without one the engine is memory only and says so.

mod journal;
mod slot;
pub mod wheel;

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use async_trait::async_trait;

use self::journal::{Journal, Op};
use self::slot::{Finish, SlotState};
use super::record::Record;
use super::topics::{StoreOptions, check_update};
use super::{MAX_PAGE, SharedStore, Store, check_slot};
use crate::config::{FsyncPolicy, Settings};
use crate::error::{Error, Result};
use crate::events::{Event, EventPage};
use crate::job::*;
use crate::routing::slot_of;
use crate::time::{Millis, now_ms};
use crate::topic::{TopicConfig, validate_topic_name};
use crate::validate;

/// Opens the memory engine the settings describe (replaying its journal, if any).
pub async fn open(settings: &Settings) -> Result<SharedStore> {
    let journal = settings.journal().map(|p| (p, settings.memory.fsync));
    Ok(Arc::new(MemoryStore::open(
        settings.store_options(),
        journal,
    )?))
}

struct TopicSlots {
    config: RwLock<Arc<TopicConfig>>,
    slots: Vec<Mutex<SlotState>>,
}

#[derive(Default)]
struct EventRing {
    seq: u64,
    buf: VecDeque<Event>,
}

impl EventRing {
    /// Gives each event its id (`seq-0`) and keeps the newest `max_len`.
    fn push(&mut self, events: impl IntoIterator<Item = Event>, max_len: usize) -> Vec<Event> {
        let mut added = Vec::new();
        for mut e in events {
            self.seq += 1;
            e.id = format!("{}-0", self.seq);
            added.push(e);
        }
        self.restore(added.iter().cloned(), max_len);
        added
    }

    /// Puts back events that already have their ids (replay).
    fn restore(&mut self, events: impl IntoIterator<Item = Event>, max_len: usize) {
        for e in events {
            self.seq = self.seq.max(event_seq(&e.id).unwrap_or(0));
            self.buf.push_back(e);
        }
        while self.buf.len() > max_len.max(1) {
            self.buf.pop_front();
        }
    }
}

/// The memory engine.
pub struct MemoryStore {
    topics: RwLock<HashMap<String, Arc<TopicSlots>>>,
    options: StoreOptions,
    events: Mutex<HashMap<String, EventRing>>,
    journal: Option<Arc<Journal>>,
    /// Set when a journal write failed: later changes are refused, since they could not be
    /// made durable, and the store reports itself unreachable.
    failed: AtomicBool,
    compacting: Mutex<()>,
    durability: &'static str,
}

fn new_topic(config: TopicConfig, journaled: bool) -> Arc<TopicSlots> {
    let now = now_ms();
    Arc::new(TopicSlots {
        slots: (0..config.slots)
            .map(|_| Mutex::new(SlotState::new(now, journaled)))
            .collect(),
        config: RwLock::new(Arc::new(config)),
    })
}

/// The position of an event id `seq-0`. Any id of the API's form (`a-b` or `a-b-c`, the
/// Redis engine's) is taken, by its first number.
fn event_seq(id: &str) -> Option<u64> {
    let mut parts = id.split('-');
    let seq = parts.next()?;
    let rest: Vec<&str> = parts.collect();
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if !(1..=2).contains(&rest.len()) || !digits(seq) || !rest.iter().all(|p| digits(p)) {
        return None;
    }
    seq.parse().ok()
}

impl MemoryStore {
    /// A memory-only store.
    pub fn new(options: StoreOptions) -> Self {
        MemoryStore::open(options, None).expect("a store without a journal always opens")
    }

    /// A store that journals to `journal` (replaying what it holds), or memory only.
    pub fn open(options: StoreOptions, journal: Option<(&Path, FsyncPolicy)>) -> Result<Self> {
        let mut store = MemoryStore {
            topics: RwLock::new(HashMap::new()),
            options,
            events: Mutex::new(HashMap::new()),
            journal: None,
            failed: AtomicBool::new(false),
            compacting: Mutex::new(()),
            durability: "memory only: jobs are lost when the process stops (set memory.journal to keep them)",
        };
        let Some((path, policy)) = journal else {
            return Ok(store);
        };
        let ops = journal::read(path)?;
        let replayed = ops.len();
        store.replay(ops, true)?;
        let journal = Arc::new(Journal::open(path, policy)?);
        store.durability = match policy {
            FsyncPolicy::Always => "durable: journal, fsync before every answer",
            FsyncPolicy::EverySecond => {
                "durable: journal, fsync every second (a crash may lose the last second)"
            }
        };
        if policy == FsyncPolicy::EverySecond {
            let weak = Arc::downgrade(&journal);
            std::thread::spawn(move || {
                while let Some(j) = weak.upgrade() {
                    if let Err(e) = j.sync() {
                        tracing::error!(error = %e, "journal fsync failed");
                    }
                    drop(j);
                    std::thread::sleep(Duration::from_secs(1));
                }
            });
        }
        let live = Self::live_ops(
            store
                .topics
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
            &store.events,
        );
        if replayed > 2 * live.len() {
            journal.compact(&live)?;
        }
        store.journal = Some(journal);
        tracing::info!(journal = %path.display(), records = replayed, live = live.len(), "journal replayed");
        Ok(store)
    }

    fn replay(&mut self, ops: Vec<Op>, journaled: bool) -> Result<()> {
        let topics = self
            .topics
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for op in ops {
            match op {
                Op::Topic { config } => match topics.get(&config.name) {
                    Some(t) => *t.config.write().expect("topic lock") = Arc::new(config),
                    None => {
                        topics.insert(config.name.clone(), new_topic(config, journaled));
                    }
                },
                Op::Put {
                    topic,
                    slot,
                    id,
                    state,
                    score,
                    rec,
                } => {
                    let s = Self::replay_slot(topics, &topic, slot)?;
                    s.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .restore(&id, state, score, rec);
                }
                Op::Del { topic, slot, id } => {
                    let s = Self::replay_slot(topics, &topic, slot)?;
                    s.lock().unwrap_or_else(PoisonError::into_inner).forget(&id);
                }
                Op::Seq { topic, slot, seq } => {
                    let s = Self::replay_slot(topics, &topic, slot)?;
                    s.lock().unwrap_or_else(PoisonError::into_inner).seq = seq;
                }
                Op::Events { topic, events } => {
                    self.events
                        .get_mut()
                        .expect("events lock")
                        .entry(topic)
                        .or_default()
                        .restore(events, self.options.events_max_len);
                }
            }
        }
        for t in topics.values() {
            for s in &t.slots {
                s.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take_dirty();
            }
        }
        Ok(())
    }

    fn replay_slot<'a>(
        topics: &'a HashMap<String, Arc<TopicSlots>>,
        topic: &str,
        slot: u32,
    ) -> Result<&'a Mutex<SlotState>> {
        topics
            .get(topic)
            .and_then(|t| t.slots.get(slot as usize))
            .ok_or_else(|| {
                Error::Corrupt(format!(
                    "journal names slot {slot} of topic {topic:?}, which it never created"
                ))
            })
    }

    /// The whole live state as journal records, events included. Every slot is locked at
    /// once (topics by name, slots in order), then the events, so the records are one consistent cut and no change slips in
    /// between the cut and the rename of the compacted file.
    fn live_ops(
        topics: &HashMap<String, Arc<TopicSlots>>,
        events: &Mutex<HashMap<String, EventRing>>,
    ) -> Vec<Op> {
        let mut names: Vec<&String> = topics.keys().collect();
        names.sort();
        let guards: Vec<(
            &String,
            &TopicSlots,
            Vec<std::sync::MutexGuard<'_, SlotState>>,
        )> = names
            .into_iter()
            .map(|n| {
                let t = topics[n].as_ref();
                (
                    n,
                    t,
                    t.slots
                        .iter()
                        .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner))
                        .collect(),
                )
            })
            .collect();
        let mut ops = Vec::new();
        for (name, t, slots) in &guards {
            let config = t.config.read().expect("topic lock").as_ref().clone();
            ops.push(Op::Topic { config });
            for (i, s) in slots.iter().enumerate() {
                if s.seq > 0 {
                    ops.push(Op::Seq {
                        topic: name.to_string(),
                        slot: i as u32,
                        seq: s.seq,
                    });
                }
                for e in s.all() {
                    ops.push(Op::Put {
                        topic: name.to_string(),
                        slot: i as u32,
                        id: e.id.to_string(),
                        state: e.state,
                        score: e.score,
                        rec: e.rec.as_deref().cloned().unwrap_or_default(),
                    });
                }
            }
        }
        // After the slots, as everywhere: a slot's lock is taken before the events'.
        let events = events.lock().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<&String> = events.keys().collect();
        names.sort();
        for name in names {
            ops.push(Op::Events {
                topic: name.clone(),
                events: events[name].buf.iter().cloned().collect(),
            });
        }
        ops
    }

    /// Rewrites the journal as the live state now. Runs by itself when the journal has grown
    /// well past the live data; public for operations and tests.
    pub fn compact(&self) -> Result<()> {
        let Some(journal) = &self.journal else {
            return Ok(());
        };
        let _one = self
            .compacting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // The topic map's write lock keeps topic changes out; live_ops holds every slot, and
        // the events lock keeps appends out (taken after the slots, as everywhere).
        let topics = self.topics.write().unwrap_or_else(PoisonError::into_inner);
        let live = Self::live_ops(&topics, &self.events);
        journal.compact(&live)
    }

    /// Group commits of the journal so far (`fsync = always`): each covers every change
    /// waiting for the disk at the time. 0 without a journal.
    pub fn group_commits(&self) -> u64 {
        self.journal.as_ref().map_or(0, |j| j.group_commits())
    }

    /// Panics while holding one slot's lock, as a bug in a slot operation would: for the
    /// test that such a panic does not take the slot down for good (a poisoned lock is
    /// taken over, not refused).
    #[doc(hidden)]
    pub fn panic_in_slot(&self, topic: &str, slot: u32) {
        let t = self.existing_slots(topic).expect("the topic exists");
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _held = t.slots[slot as usize].lock();
            panic!("a bug in a slot operation");
        }));
    }

    /// The whole live state, one JSON line per record: for tests that check a rejected call
    /// changed nothing, and for debugging.
    pub fn dump(&self) -> Vec<String> {
        let topics = self.topics.read().unwrap_or_else(PoisonError::into_inner);
        Self::live_ops(&topics, &self.events)
            .iter()
            .map(|op| serde_json::to_string(op).expect("a record serialises"))
            .collect()
    }

    /// Records in the journal file and live records now (for tests of compaction).
    pub fn journal_len(&self) -> Result<(usize, usize)> {
        let Some(journal) = &self.journal else {
            return Ok((0, 0));
        };
        let on_disk = journal::read(journal.path())?.len();
        let live = Self::live_ops(
            &self.topics.read().unwrap_or_else(PoisonError::into_inner),
            &self.events,
        )
        .len();
        Ok((on_disk, live))
    }

    fn check_writable(&self) -> Result<()> {
        if self.failed.load(Ordering::Relaxed) {
            return Err(Error::Unavailable(
                "the journal could not be written earlier; restart to replay it".into(),
            ));
        }
        Ok(())
    }

    /// Appends `ops` to the journal; the ticket, with `fsync = always`, is what to wait for.
    fn journal_grouped(&self, ops: &[Op]) -> Result<Option<journal::Ticket>> {
        let Some(j) = &self.journal else {
            return Ok(None);
        };
        j.append_grouped(ops).inspect_err(|e| {
            tracing::error!(error = %e, "journal write failed: refusing further changes");
            self.failed.store(true, Ordering::Relaxed);
        })
    }

    /// Waits until the change that answered `ticket` is on disk.
    async fn durable(&self, ticket: journal::Ticket) -> Result<()> {
        let Some(j) = &self.journal else {
            return Ok(());
        };
        j.durable(ticket).await.inspect_err(|e| {
            tracing::error!(error = %e, "journal fsync failed: refusing further changes");
            self.failed.store(true, Ordering::Relaxed);
        })
    }

    fn journal(&self, ops: &[Op]) -> Result<()> {
        let Some(j) = &self.journal else {
            return Ok(());
        };
        j.append(ops).inspect_err(|e| {
            tracing::error!(error = %e, "journal write failed: refusing further changes");
            self.failed.store(true, Ordering::Relaxed);
        })
    }

    /// A topic's slots when it exists, or `TopicNotFound`: never creates one.
    fn existing_slots(&self, name: &str) -> Result<Arc<TopicSlots>> {
        validate_topic_name(name)?;
        self.topics
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
            .ok_or_else(|| Error::TopicNotFound(name.to_string()))
    }

    fn topic_slots(&self, name: &str) -> Result<Arc<TopicSlots>> {
        if let Some(t) = self
            .topics
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
        {
            return Ok(t.clone());
        }
        let config = self.options.defaults_for(name)?;
        self.check_writable()?;
        let mut topics = self.topics.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = topics.get(name) {
            return Ok(t.clone());
        }
        self.journal(&[Op::Topic {
            config: config.clone(),
        }])?;
        let t = new_topic(config, self.journal.is_some());
        topics.insert(name.to_string(), t.clone());
        Ok(t)
    }

    /// Runs `f` on one slot under its lock and journals what it changed before returning.
    async fn with_slot<R>(
        &self,
        t: &TopicSlots,
        topic: &str,
        slot: u32,
        mutates: bool,
        f: impl FnOnce(&mut SlotState) -> R,
    ) -> Result<R> {
        self.with_slot_events(t, topic, slot, mutates, |s| (f(s), Vec::new()))
            .await
    }

    /// `with_slot` for a change that also appends events (settled runs): the events join the
    /// topic's ring and the journal in the same write as the jobs' new state, under the
    /// slot's lock, so a restart keeps both or neither.
    ///
    /// With `fsync = always` the answer waits for the disk after the slot's lock is let go:
    /// one fsync covers every change waiting at the time (group commit), and no lock is
    /// held, nor the executor blocked, while it runs.
    async fn with_slot_events<R>(
        &self,
        t: &TopicSlots,
        topic: &str,
        slot: u32,
        mutates: bool,
        f: impl FnOnce(&mut SlotState) -> (R, Vec<Event>),
    ) -> Result<R> {
        if mutates {
            self.check_writable()?;
        }
        let mut ticket = None;
        let result = {
            let mut s = t.slots[slot as usize]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let (r, events) = f(&mut s);
            let (dirty, seq_moved) = s.take_dirty();
            // Held until the journal write, so the journal keeps events in id order.
            let mut rings = (!events.is_empty())
                .then(|| self.events.lock().unwrap_or_else(PoisonError::into_inner));
            let added = match rings.as_mut() {
                Some(rings) => rings
                    .entry(topic.to_string())
                    .or_default()
                    .push(events, self.options.events_max_len),
                None => Vec::new(),
            };
            if self.journal.is_some() && (!dirty.is_empty() || seq_moved || !added.is_empty()) {
                let mut ops: Vec<Op> = dirty
                    .iter()
                    .map(|id| match s.snapshot_of(id) {
                        Some((state, score, rec)) => Op::Put {
                            topic: topic.to_string(),
                            slot,
                            id: id.to_string(),
                            state,
                            score,
                            rec,
                        },
                        None => Op::Del {
                            topic: topic.to_string(),
                            slot,
                            id: id.to_string(),
                        },
                    })
                    .collect();
                if seq_moved {
                    ops.push(Op::Seq {
                        topic: topic.to_string(),
                        slot,
                        seq: s.seq,
                    });
                }
                if !added.is_empty() {
                    ops.push(Op::Events {
                        topic: topic.to_string(),
                        events: added,
                    });
                }
                ticket = self.journal_grouped(&ops)?;
            }
            r
        };
        if let Some(j) = &self.journal
            && j.wants_compaction()
            && let Err(e) = self.compact()
        {
            tracing::warn!(error = %e, "journal compaction failed; the journal keeps growing");
        }
        if let Some(ticket) = ticket {
            self.durable(ticket).await?;
        }
        Ok(result)
    }

    fn route(&self, t: &TopicSlots, job: &JobRef) -> Result<(Arc<TopicConfig>, u32)> {
        validate::job_id(&job.id)?;
        validate::shard_key(job.shard_key.as_deref())?;
        let config = t.config.read().expect("topic lock").clone();
        let slot = slot_of(job.route_key(), config.slots);
        Ok((config, slot))
    }

    fn config(t: &TopicSlots) -> Arc<TopicConfig> {
        t.config.read().expect("topic lock").clone()
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn engine(&self) -> &'static str {
        "memory"
    }

    fn durability(&self) -> &'static str {
        self.durability
    }

    async fn ping(&self) -> Result<()> {
        self.check_writable()
    }

    async fn put_topic(&self, config: TopicConfig) -> Result<Arc<TopicConfig>> {
        config.validate()?;
        self.check_writable()?;
        let mut topics = self.topics.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = topics.get(&config.name) {
            check_update(&Self::config(t), &config)?;
            self.journal(&[Op::Topic {
                config: config.clone(),
            }])?;
            let config = Arc::new(config);
            *t.config.write().expect("topic lock") = config.clone();
            return Ok(config);
        }
        self.journal(&[Op::Topic {
            config: config.clone(),
        }])?;
        let t = new_topic(config, self.journal.is_some());
        let config = Self::config(&t);
        topics.insert(config.name.clone(), t);
        Ok(config)
    }

    async fn topic(&self, name: &str) -> Result<Arc<TopicConfig>> {
        let t = self.topic_slots(name)?;
        Ok(Self::config(&t))
    }

    fn defaults_for(&self, name: &str) -> Result<TopicConfig> {
        self.options.defaults_for(name)
    }

    async fn find_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        match self.existing_slots(name) {
            Ok(t) => Ok(Some(Self::config(&t))),
            Err(Error::TopicNotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn topics(&self) -> Result<Vec<Arc<TopicConfig>>> {
        let topics = self.topics.read().unwrap_or_else(PoisonError::into_inner);
        let mut all: Vec<_> = topics.values().map(|t| Self::config(t)).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }

    async fn schedule(
        &self,
        topic: &str,
        job: NewJob,
        mode: ScheduleMode,
        now: Millis,
    ) -> Result<Scheduled> {
        let t = match mode {
            ScheduleMode::ResetOnly => self.existing_slots(topic)?,
            _ => self.topic_slots(topic)?,
        };
        let config = Self::config(&t);
        validate::new_job(&config, &job)?;
        let job_ref = JobRef::new(job.id.clone()).with_shard_key(job.shard_key.clone());
        let (_, slot) = self.route(&t, &job_ref)?;
        let spec = Record::spec(
            &config,
            job.job_type.as_deref(),
            &job.payload,
            job.max_attempts,
            job.max_fire_at,
        );
        let r = self
            .with_slot(&t, topic, slot, true, |s| {
                s.schedule(&job.id, mode, job.fire_at, now, spec)
            })
            .await?;
        Ok(Scheduled {
            outcome: r.outcome,
            slot,
            state: r.state,
            fire_at: r.fire_at,
            is_head: r.is_head,
            rearmed: r.rearmed.filter(|(n, _)| *n > 0).map(|(fires, t)| Rearmed {
                id: job.id.clone(),
                job_type: t.unwrap_or_else(|| config.default_type.clone()),
                fires,
            }),
        })
    }

    async fn reset_many(
        &self,
        topic: &str,
        resets: &[Reset],
        create: Option<&CreateSpec>,
        now: Millis,
    ) -> Result<ResetReport> {
        let t = match create {
            Some(_) => self.topic_slots(topic)?,
            None => self.existing_slots(topic)?,
        };
        let config = Self::config(&t);
        validate::reset_batch(&config, resets, create)?;
        let spec = create.map(|c| Record::for_create(&config, c));
        let mut by_slot: Vec<Vec<(&str, Millis)>> = vec![Vec::new(); config.slots as usize];
        for r in resets {
            let slot = slot_of(r.job.route_key(), config.slots) as usize;
            by_slot[slot].push((r.job.id.as_str(), r.fire_at));
        }
        let mut report = ResetReport::default();
        for (slot, items) in by_slot
            .into_iter()
            .enumerate()
            .filter(|(_, i)| !i.is_empty())
        {
            let slot = slot as u32;
            let out = self
                .with_slot(&t, topic, slot, true, |s| {
                    s.reset_many(now, spec.as_ref(), &items)
                })
                .await?;
            report.reset += out.reset;
            report.created += out.created;
            report.missing.extend(out.missing);
            report
                .rearmed
                .extend(out.rearmed.into_iter().map(|(id, fires, t)| Rearmed {
                    id,
                    job_type: t.unwrap_or_else(|| config.default_type.clone()),
                    fires,
                }));
            if let Some(h) = out.head {
                report.heads.push((slot, h));
            }
        }
        Ok(report)
    }

    async fn cancel(&self, topic: &str, job: &JobRef) -> Result<Option<JobState>> {
        let t = self.existing_slots(topic)?;
        let (_, slot) = self.route(&t, job)?;
        self.with_slot(&t, topic, slot, true, |s| s.cancel(&job.id))
            .await
    }

    async fn get(&self, topic: &str, job: &JobRef) -> Result<Option<Job>> {
        let t = self.existing_slots(topic)?;
        let (config, slot) = self.route(&t, job)?;
        let found = self
            .with_slot(&t, topic, slot, false, |s| s.get(&job.id))
            .await?;
        found
            .map(|(state, score, rec)| rec.into_job(&config, job.id.clone(), state, score))
            .transpose()
    }

    async fn pump(&self, topic: &str, slot: u32, now: Millis, limit: usize) -> Result<Pumped> {
        let t = self.existing_slots(topic)?;
        let config = Self::config(&t);
        check_slot(&config, slot)?;
        let lease = config.visibility_timeout_ms as Millis;
        let (next_at, expired, handed) = self
            .with_slot(&t, topic, slot, true, |s| {
                s.pump(now, limit.max(1), lease, config.max_attempts)
            })
            .await?;
        let lease_until = config.lease_deadline(now);
        let jobs = handed
            .into_iter()
            .map(|(id, _, token, rec)| {
                let job = rec.into_job(&config, id.to_string(), JobState::Running, lease_until)?;
                Ok(Leased {
                    job,
                    slot,
                    token,
                    lease_until,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Pumped {
            jobs,
            expired,
            next_at,
        })
    }

    async fn settle(
        &self,
        topic: &str,
        slot: u32,
        batch: &[Settlement],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let t = self.existing_slots(topic)?;
        let config = Self::config(&t);
        check_slot(&config, slot)?;
        self.with_slot_events(&t, topic, slot, true, |s| {
            let mut events = Vec::new();
            let done = batch
                .iter()
                .map(|item| {
                    let f = match &item.outcome {
                        RunOutcome::Ack => Finish::Ack,
                        RunOutcome::Retry { error, at } => Finish::Retry { error, at: *at },
                        RunOutcome::Repeat { at } => Finish::Repeat { at: *at },
                        RunOutcome::Bury { error } => Finish::Bury { error },
                        RunOutcome::Release => Finish::Release,
                    };
                    let run = &item.run;
                    let finished = s.finish(&run.job.id, run.token, f, now, config.max_attempts);
                    events.extend(Event::of_settled(item, finished));
                    finished
                })
                .collect();
            (done, events)
        })
        .await
    }

    async fn extend(&self, topic: &str, run: &Leased, until: Millis) -> Result<bool> {
        let t = self.existing_slots(topic)?;
        self.with_slot(&t, topic, run.slot, true, |s| {
            s.touch(&run.job.id, run.token, until)
        })
        .await
    }

    async fn dead_list(&self, topic: &str, after: Option<&str>, limit: usize) -> Result<DeadPage> {
        let t = self.existing_slots(topic)?;
        let config = Self::config(&t);
        let limit = limit.clamp(1, MAX_PAGE);
        let cursor = match after {
            Some(s) => Some(
                DeadCursor::decode(s)
                    .ok_or_else(|| Error::invalid("after", format!("{s:?} is not a cursor")))?,
            ),
            None => None,
        };
        let mut entries = Vec::new();
        for slot in 0..config.slots {
            let page = self
                .with_slot(&t, topic, slot, false, |s| {
                    s.dead_page(cursor.as_ref().map(|c| (c.dead_at, c.id.as_str())), limit)
                })
                .await?;
            entries.extend(page.into_iter().map(|(id, at, rec)| {
                (
                    DeadCursor {
                        dead_at: at,
                        id: id.to_string(),
                    },
                    rec,
                )
            }));
        }
        super::record::dead_page(&config, entries, limit)
    }

    async fn dead_requeue(&self, topic: &str, job: &JobRef, now: Millis) -> Result<bool> {
        let t = self.existing_slots(topic)?;
        let (_, slot) = self.route(&t, job)?;
        self.with_slot(&t, topic, slot, true, |s| s.requeue(&job.id, now))
            .await
    }

    async fn dead_delete(&self, topic: &str, job: &JobRef) -> Result<bool> {
        let t = self.existing_slots(topic)?;
        let (_, slot) = self.route(&t, job)?;
        self.with_slot(&t, topic, slot, true, |s| s.dead_delete(&job.id))
            .await
    }

    async fn stats(&self, topic: &str) -> Result<TopicStats> {
        let t = self.existing_slots(topic)?;
        let config = Self::config(&t);
        let per_slot = (0..config.slots)
            .map(|slot| {
                let (scheduled, running, dead, next_fire_at) = t.slots[slot as usize]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .counts();
                SlotStats {
                    slot,
                    scheduled,
                    running,
                    dead,
                    next_fire_at,
                }
            })
            .collect();
        Ok(TopicStats::from_slots(topic, per_slot))
    }

    async fn append_events(&self, topic: &str, events: &[Event]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        self.existing_slots(topic)?;
        self.check_writable()?;
        let ticket = {
            let mut rings = self.events.lock().unwrap_or_else(PoisonError::into_inner);
            let added = rings
                .entry(topic.to_string())
                .or_default()
                .push(events.iter().cloned(), self.options.events_max_len);
            self.journal_grouped(&[Op::Events {
                topic: topic.to_string(),
                events: added,
            }])?
        };
        if let Some(ticket) = ticket {
            self.durable(ticket).await?;
        }
        Ok(())
    }

    async fn read_events(
        &self,
        topic: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<EventPage> {
        self.existing_slots(topic)?;
        let after = match after {
            Some(id) => event_seq(id)
                .ok_or_else(|| Error::invalid("after", format!("{id:?} is not an event id")))?,
            None => 0,
        };
        let all = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        let items = all
            .get(topic)
            .map(|ring| {
                ring.buf
                    .iter()
                    .filter(|e| event_seq(&e.id).is_some_and(|s| s > after))
                    .take(limit.clamp(1, MAX_PAGE))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        Ok(EventPage::new(items))
    }
}

//! The `memory` engine, the zero-setup default: each (topic, slot) is a [`slot::SlotState`]
//! (a hierarchical timing wheel with a hash map) behind its own lock, so HTTP workers and
//! slot actors work on different slots at once. Events are a bounded ring per topic. With a
//! journal (`memory.journal`), every accepted change is on disk before the call returns
//! (`fsync = always`) or within a second (`every_second`), and the state is replayed at
//! start; without one the engine is memory only and says so.
//!
//! Its four concerns: `topics.rs` (settings), `jobs.rs` (one slot's jobs, over the state
//! machine of `slot.rs` and its `wheel.rs`), `membership.rs` (one process: the only
//! instance), and the wake bus (nothing to carry). This file holds the engine itself: its
//! opening, the journal's replay and compaction, and the store's memory-only calls.

mod framing;
mod id_index;
mod jobs;
mod journal;
mod journal_tool;
pub use self::journal_tool::{JournalCheck, Salvaged, check_journal, salvage_journal};
mod membership;
mod prefetch;
mod rate;
pub(crate) mod settings;
mod slot;
mod topics;
// Reached from outside only through the `conformance` door (the wheel's focused benchmark).
pub(crate) mod wheel;

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use async_trait::async_trait;

use self::journal::{Journal, Live, Op};

use self::settings::FsyncPolicy;
use self::slot::{Dirty, SlotState};
use super::engine::{Engine, WakeBus};
use super::event_id::EventId;
use super::topic_policy::StoreOptions;
use crate::error::{Error, Result};
use crate::events::Event;
use crate::time::now_ms;
use crate::topic::TopicConfig;

struct TopicSlots {
    config: RwLock<Arc<TopicConfig>>,
    /// Shared, so that a doubling builds a longer list around the same slots.
    slots: Vec<Arc<Mutex<SlotState>>>,
}

impl TopicSlots {
    fn config(&self) -> Arc<TopicConfig> {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[derive(Default)]
struct EventRing {
    seq: u64,
    buf: VecDeque<Event>,
    /// Each event's size in `buf` (`event_bytes`), measured once as it joins, so trimming
    /// the oldest walks no event again.
    sizes: VecDeque<usize>,
    /// About how many bytes the events in `buf` hold.
    bytes: usize,
}

/// What a topic's event ring may hold: entries, and about how many bytes; and about how
/// many bytes every topic's rings may hold together.
#[derive(Debug, Clone, Copy)]
pub(super) struct RingCap {
    pub(super) len: usize,
    pub(super) bytes: usize,
    pub(super) total: usize,
}

/// About how many bytes an event holds (its strings and data, without walking allocator
/// overhead): what the ring's byte cap counts.
fn event_bytes(e: &Event) -> usize {
    fn value(v: &serde_json::Value) -> usize {
        match v {
            serde_json::Value::Null | serde_json::Value::Bool(_) => 8,
            serde_json::Value::Number(_) => 16,
            serde_json::Value::String(s) => 24 + s.len(),
            serde_json::Value::Array(a) => 24 + a.iter().map(value).sum::<usize>(),
            serde_json::Value::Object(o) => {
                24 + o
                    .iter()
                    .map(|(k, v)| 24 + k.len() + value(v))
                    .sum::<usize>()
            }
        }
    }
    96 + e.id.len()
        + e.topic.len()
        + e.job_id.len()
        + e.job_type.len()
        + e.event.len()
        + value(&e.data)
}

impl EventRing {
    /// Gives each event the id it will have (`seq-0`) without adding it: the events join
    /// the ring with `restore` once their journal record is written.
    fn number(&self, events: impl IntoIterator<Item = Event>) -> Vec<Event> {
        let mut seq = self.seq;
        events
            .into_iter()
            .map(|mut e| {
                seq += 1;
                e.id = format!("{seq}-0");
                e
            })
            .collect()
    }

    /// Adds events that already have their ids, then trims the oldest while the ring holds
    /// more entries or bytes than `cap` (it keeps the newest one whatever its size).
    fn restore(&mut self, events: impl IntoIterator<Item = Event>, cap: RingCap) {
        for e in events {
            self.seq = self
                .seq
                .max(EventId::parse(&e.id).map(|c| c.ms).unwrap_or(0));
            let size = event_bytes(&e);
            self.bytes += size;
            self.sizes.push_back(size);
            self.buf.push_back(e);
        }
        while self.buf.len() > 1 && (self.buf.len() > cap.len.max(1) || self.bytes > cap.bytes) {
            self.buf.pop_front();
            self.bytes = self
                .bytes
                .saturating_sub(self.sizes.pop_front().unwrap_or(0));
        }
    }
}

/// The memory engine: per slot a timing wheel behind a lock, with an optional journal.
pub(crate) struct MemoryEngine {
    topics: RwLock<HashMap<String, Arc<TopicSlots>>>,
    events_cap: RingCap,
    events: Mutex<Rings>,
    journal: Option<Arc<Journal>>,
    /// Set when a journal write failed: later changes are refused, since they could not be
    /// made durable, and the store reports itself unreachable.
    failed: AtomicBool,
    /// Why the last change was refused for its journal record, until a change succeeds.
    refusal: Mutex<Option<String>>,
    compacting: Mutex<()>,
    durability: &'static str,
    /// Each rate-limited topic's fire bucket (not journaled: a restart starts it full).
    rates: Mutex<HashMap<String, crate::store::rate::Bucket>>,
    /// Each flow key's counters, by topic and key (not journaled: a restart starts empty).
    flows: Mutex<HashMap<(String, String), crate::store::flow::Book>>,
}

fn new_topic(config: TopicConfig, journaled: bool) -> Arc<TopicSlots> {
    grown_topic(&[], config, journaled)
}

/// A topic's slots under `config`: the slots it had (`kept`), then new empty ones up to
/// `config.slots` (a doubling moves no job).
fn grown_topic(
    kept: &[Arc<Mutex<SlotState>>],
    config: TopicConfig,
    journaled: bool,
) -> Arc<TopicSlots> {
    let now = now_ms();
    let mut slots = kept.to_vec();
    slots.extend(
        (kept.len()..config.slots as usize)
            .map(|_| Arc::new(Mutex::new(SlotState::new(now, journaled)))),
    );
    Arc::new(TopicSlots {
        slots,
        config: RwLock::new(Arc::new(config)),
    })
}

/// What only the memory engine has, as the store's front reaches it (`front/open.rs`): its
/// opening with a journal, compaction, and the views tests use.
/// Every topic's event ring, and what they hold together: a topic's appends past the total
/// (`runtime.events_max_bytes_total`) trim that topic's oldest events, so a noisy topic
/// cannot take the room of all the others (each ring keeps its newest event whatever it
/// holds, so the total is passed by at most one event a topic).
#[derive(Default)]
struct Rings {
    map: HashMap<String, EventRing>,
    bytes: usize,
}

impl std::ops::Deref for Rings {
    type Target = HashMap<String, EventRing>;

    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl Rings {
    /// A topic's ring, made empty when it has none, to number events by.
    fn ring(&mut self, topic: &str) -> &mut EventRing {
        self.map.entry(topic.to_string()).or_default()
    }

    /// Adds a topic's events (numbered already) and trims as `cap` says.
    fn add(&mut self, topic: &str, events: Vec<Event>, cap: RingCap) {
        let ring = self.map.entry(topic.to_string()).or_default();
        let before = ring.bytes;
        ring.restore(events, cap);
        self.bytes = (self.bytes + ring.bytes).saturating_sub(before);
        while self.bytes > cap.total && ring.buf.len() > 1 {
            ring.buf.pop_front();
            let size = ring.sizes.pop_front().unwrap_or(0);
            ring.bytes = ring.bytes.saturating_sub(size);
            self.bytes = self.bytes.saturating_sub(size);
        }
    }

    /// Drops a topic's ring.
    fn remove(&mut self, topic: &str) {
        if let Some(ring) = self.map.remove(topic) {
            self.bytes = self.bytes.saturating_sub(ring.bytes);
        }
    }

    /// What every ring holds together, about.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.bytes
    }
}

impl MemoryEngine {
    /// The engine with `options`' event caps, journaling to `journal` (replaying what it
    /// holds), or memory only.
    pub(crate) fn open_with(
        options: &StoreOptions,
        journal: Option<(&Path, FsyncPolicy)>,
    ) -> Result<Self> {
        MemoryEngine::open(
            RingCap {
                len: options.events_max_len,
                bytes: options.events_max_bytes,
                total: options.events_max_bytes_total,
            },
            journal,
        )
    }

    /// Group commits of the journal so far; 0 without a journal.
    pub(crate) fn group_commits(&self) -> u64 {
        self.journal.as_ref().map_or(0, |j| j.group_commits())
    }

    /// Panics while holding one slot's lock, as a bug in a slot operation would.
    pub(crate) fn panic_in_slot(&self, topic: &str, slot: u32) {
        let t = self.slots_of(topic).expect("the topic exists");
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _held = t.slots[slot as usize].lock();
            panic!("a bug in a slot operation");
        }));
    }

    /// The whole live state, one JSON line per record.
    pub(crate) fn dump(&self) -> Vec<String> {
        let topics = self.topics.read().unwrap_or_else(PoisonError::into_inner);
        let mut lines = Vec::new();
        MemoryEngine::each_live_op(&topics, &self.events, &mut |record| {
            let op = record.into_op();
            lines.push(serde_json::to_string(&op).expect("a record serialises"));
        });
        lines
    }

    /// Records in the journal file, and live records now.
    pub(crate) fn journal_len(&self) -> Result<JournalLen> {
        let Some(journal) = &self.journal else {
            return Ok(JournalLen::default());
        };
        let on_disk = journal::read(journal.path())?.len();
        let live = MemoryEngine::live_count(
            &self.topics.read().unwrap_or_else(PoisonError::into_inner),
            &self.events,
        );
        Ok(JournalLen { on_disk, live })
    }
}

/// How long the journal is: records in the file, and records the live state needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalLen {
    /// Records in the journal file.
    pub on_disk: usize,
    /// Records a compacted journal would hold.
    pub live: usize,
}

impl MemoryEngine {
    fn open(events_cap: RingCap, journal: Option<(&Path, FsyncPolicy)>) -> Result<Self> {
        let mut store = MemoryEngine {
            topics: RwLock::new(HashMap::new()),
            events_cap,
            events: Mutex::new(Rings::default()),
            journal: None,
            failed: AtomicBool::new(false),
            refusal: Mutex::new(None),
            compacting: Mutex::new(()),
            rates: Mutex::new(HashMap::new()),
            flows: Mutex::new(HashMap::new()),
            durability: "memory only: jobs are lost when the process stops (set memory.journal to keep them)",
        };
        let Some((path, policy)) = journal else {
            return Ok(store);
        };
        // Each record is applied as it is read: holding every record first cost the
        // memory of a second copy of the jobs, and the time to fault it in.
        // One process per journal: the lock before anything is read.
        let lock = journal::lock(path)?;
        let mut replayed = 0;
        let (_, version) = journal::read_each(path, |op| {
            replayed += 1;
            store.replay_op(op, true)
        })?;
        store.replay_done();
        let journal = Arc::new(Journal::open(path, policy, lock)?);
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
        let topics = store
            .topics
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        // The live state has a record per job and more (topics, token counters, events):
        // a journal of no more than twice the jobs is not compacted, and the live records,
        // a copy of every job, are not built for nothing (a restart of 1M jobs to healthy
        // went from 2.2-3.6 s to 1.45 s; applying each record as it is read, to 1.16 s).
        let jobs: usize = topics
            .values()
            .flat_map(|t| t.slots.iter())
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum();
        // A journal of the first framing is rewritten in this one at once (a compaction).
        let old_framing = version == framing::Version::V1 && replayed > 0;
        if old_framing
            || (replayed > 2 * jobs && replayed > 2 * Self::live_count(topics, &store.events))
        {
            journal.compact(|emit| Self::each_live_op(topics, &store.events, emit))?;
        }
        store.journal = Some(journal);
        tracing::info!(journal = %path.display(), records = replayed, jobs, "journal replayed");
        Ok(store)
    }

    /// Applies one journal record, as replayed at start.
    fn replay_op(&mut self, op: Op, journaled: bool) -> Result<()> {
        let topics = self
            .topics
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        match op {
            Op::Topic { config } => {
                // The API's own checks: a topic of 0 slots would hide its jobs, one of
                // millions take the machine.
                config.validate()?;
                let kept = topics
                    .get(&config.name)
                    .map(|t| t.slots.clone())
                    .unwrap_or_default();
                topics.insert(config.name.clone(), grown_topic(&kept, config, journaled));
            }
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
                    .restore(&id, state, score, *rec);
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
                    .add(&topic, events, self.events_cap);
            }
            Op::Flow { topic, key, limits } => {
                let t = topics.get(&topic).ok_or_else(|| {
                    Error::Corrupt(format!(
                        "flow limits of topic {topic:?}, which the journal does not hold"
                    ))
                })?;
                let mut config = (*t.config()).clone();
                topics::set_flow(&mut config, &key, limits)?;
                *t.config.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
            }
            Op::Drop { topic } => {
                topics.remove(&topic);
                self.events.get_mut().expect("events lock").remove(&topic);
            }
        }
        Ok(())
    }

    /// After the replay: what it restored is not a change to journal again.
    fn replay_done(&mut self) {
        let topics = self
            .topics
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for t in topics.values() {
            for s in &t.slots {
                s.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take_dirty();
            }
        }
    }

    fn replay_slot<'a>(
        topics: &'a HashMap<String, Arc<TopicSlots>>,
        topic: &str,
        slot: u32,
    ) -> Result<&'a Mutex<SlotState>> {
        topics
            .get(topic)
            .and_then(|t| t.slots.get(slot as usize))
            .map(|s| &**s)
            .ok_or_else(|| {
                Error::Corrupt(format!(
                    "journal names slot {slot} of topic {topic:?}, which it never created"
                ))
            })
    }

    /// The whole live state as journal records, events included, each handed to `emit` as
    /// it is made (a compaction writes each one out: a copy of every job at once cost about
    /// 300 bytes a job at its peak, which the allocator kept). Every slot is locked at once
    /// (topics by name, slots in order), then the events, so the records are one consistent
    /// cut and no change slips in between the cut and the rename of the compacted file.
    fn each_live_op(
        topics: &HashMap<String, Arc<TopicSlots>>,
        events: &Mutex<Rings>,
        emit: &mut dyn FnMut(Live<'_>),
    ) {
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
        for (name, t, slots) in &guards {
            let config = t.config.read().expect("topic lock").as_ref().clone();
            emit(Live::Op(Op::Topic { config }));
            for (i, s) in slots.iter().enumerate() {
                if s.seq > 0 {
                    emit(Live::Op(Op::Seq {
                        topic: name.to_string(),
                        slot: crate::num::to_u32(i),
                        seq: s.seq,
                    }));
                }
                for e in s.all() {
                    emit(Live::Put {
                        topic: name,
                        slot: crate::num::to_u32(i),
                        id: &e.id,
                        state: e.state,
                        score: e.score,
                        rec: e.rec.as_deref(),
                    });
                }
            }
        }
        // After the slots, as everywhere: a slot's lock is taken before the events'.
        let events = events.lock().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<&String> = events.keys().collect();
        names.sort();
        for name in names {
            emit(Live::Op(Op::Events {
                topic: name.clone(),
                events: events[name].buf.iter().cloned().collect(),
            }));
        }
    }

    /// How many records `each_live_op` makes, without making them: a topic's settings, a
    /// slot's token counter once it moved, a job, a topic's events.
    fn live_count(topics: &HashMap<String, Arc<TopicSlots>>, events: &Mutex<Rings>) -> usize {
        let slots: usize = topics
            .values()
            .flat_map(|t| t.slots.iter())
            .map(|s| {
                let s = s.lock().unwrap_or_else(PoisonError::into_inner);
                usize::from(s.seq > 0) + s.len()
            })
            .sum();
        topics.len() + slots + events.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Rewrites the journal as the live state now.
    pub(crate) fn compact(&self) -> Result<()> {
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
        let started = std::time::Instant::now();
        let bytes = journal.compact(|emit| Self::each_live_op(&topics, &self.events, emit))?;
        // Every change waited for this (the slots are held through the write and its
        // fsync): the pause is the operator's to see.
        tracing::info!(
            journal = %journal.path().display(),
            bytes,
            paused_ms = started.elapsed().as_millis(),
            "journal compacted; changes waited for it"
        );
        Ok(())
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
        let appended = j.append_grouped(ops);
        match &appended {
            Ok(_) => {
                let mut refusal = self.refusal.lock().unwrap_or_else(PoisonError::into_inner);
                if refusal.is_some() {
                    tracing::info!("the journal takes changes again");
                    *refusal = None;
                }
            }
            Err(e) => self.note_refusal(e),
        }
        appended
    }

    /// A change refused because its journal record could not be written: the change was
    /// undone, later ones are tried again, and `/health` says why until one succeeds.
    fn note_refusal(&self, e: &Error) {
        tracing::error!(error = %e, "journal write failed: the change was refused and undone");
        *self.refusal.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(format!("{e} (at {})", crate::time::now_ms()));
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
        j.append(ops).inspect_err(|e| self.note_refusal(e))
    }

    /// A topic's slots, or `TopicNotFound`.
    fn slots_of(&self, name: &str) -> Result<Arc<TopicSlots>> {
        self.topics
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
            .ok_or_else(|| Error::TopicNotFound(name.to_string()))
    }

    /// Runs `f` on one slot under its lock and journals what it changed before returning.
    async fn with_slot<R>(
        &self,
        topic: &TopicConfig,
        slot: u32,
        mutates: bool,
        f: impl FnOnce(&mut SlotState) -> R,
    ) -> Result<R> {
        self.with_slot_events(topic, slot, mutates, |s| (f(s), Vec::new()))
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
        topic: &TopicConfig,
        slot: u32,
        mutates: bool,
        f: impl FnOnce(&mut SlotState) -> (R, Vec<Event>),
    ) -> Result<R> {
        if mutates {
            self.check_writable()?;
        }
        let t = self.slots_of(&topic.name)?;
        let name = &topic.name;
        let mut ticket = None;
        let result = {
            let mut s = slot_of(&t, name, slot)?
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let (r, events) = f(&mut s);
            let dirty = s.take_dirty();
            // Held until the journal write, so the journal keeps events in id order.
            let mut rings = (!events.is_empty())
                .then(|| self.events.lock().unwrap_or_else(PoisonError::into_inner));
            let added = match rings.as_mut() {
                Some(rings) => rings.ring(name).number(events),
                None => Vec::new(),
            };
            if self.journal.is_some()
                && (!dirty.ids.is_empty() || dirty.seq_moved || !added.is_empty())
            {
                let ops = slot_ops(name, slot, &s, &dirty, &added);
                // Write-ahead: readers wait on the slot's lock, so they see the change only
                // once its record is written; one that cannot be written is undone.
                match self.journal_grouped(&ops) {
                    Ok(t) => ticket = t,
                    Err(e) => {
                        s.undo_changes();
                        return Err(e);
                    }
                }
            }
            s.keep_changes();
            if let Some(rings) = rings.as_mut() {
                rings.add(name, added, self.events_cap);
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
}

/// The journal records of one change to a slot: its events first, then each changed job
/// (its new state, or its removal) and the slot's sequence when it moved.
fn slot_ops(name: &str, slot: u32, s: &SlotState, dirty: &Dirty, added: &[Event]) -> Vec<Op> {
    let mut ops: Vec<Op> = dirty
        .ids
        .iter()
        .map(|id| match s.get(id) {
            Some(job) => Op::Put {
                topic: name.to_string(),
                slot,
                id: id.to_string(),
                state: job.state,
                score: job.score,
                rec: Box::new(job.record),
            },
            None => Op::Del {
                topic: name.to_string(),
                slot,
                id: id.to_string(),
            },
        })
        .collect();
    if dirty.seq_moved {
        ops.push(Op::Seq {
            topic: name.to_string(),
            slot,
            seq: s.seq,
        });
    }
    if !added.is_empty() {
        // The events first: the append is one write of several records, and a
        // SIGKILL may leave only a prefix of it, which replay keeps. Behind the
        // events, a torn tail can drop a run's outcome (it fires again, at least
        // once) but never keep an acknowledgement whose events are lost.
        ops.insert(
            0,
            Op::Events {
                topic: name.to_string(),
                events: added.to_vec(),
            },
        );
    }
    ops
}

#[async_trait]
impl Engine for MemoryEngine {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn durability(&self) -> &'static str {
        self.durability
    }

    async fn ping(&self) -> Result<()> {
        self.check_writable()
    }

    fn warnings(&self) -> Vec<String> {
        self.refusal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|why| format!("the last change was refused: {why}"))
            .collect()
    }
}

#[async_trait]
impl WakeBus for MemoryEngine {}

/// Slot `slot` of `t`, or a stale layout: a caller holding settings from before the topic
/// was made again with fewer slots (a slot actor not yet halted) names a slot it no longer
/// has.
fn slot_of<'a>(t: &'a TopicSlots, topic: &str, slot: u32) -> Result<&'a Mutex<SlotState>> {
    t.slots
        .get(slot as usize)
        .map(|s| &**s)
        .ok_or_else(|| Error::StaleLayout {
            topic: topic.to_string(),
            message: format!("slot {slot} of {} slots", t.slots.len()),
        })
}

#[cfg(test)]
mod ring_tests {
    use super::*;

    fn event(n: usize, bytes: usize) -> Event {
        let mut e: Event = serde_json::from_value(serde_json::json!({
            "id": format!("{n}-0"), "topic": "t", "job_id": format!("j{n}"), "type": "emit",
            "event": "job.emitted", "fire_at": 0, "fired_at": 0, "attempt": 1, "data": null
        }))
        .unwrap();
        e.data = serde_json::json!({"pad": "x".repeat(bytes)});
        e
    }

    /// A ring of 60 KB events capped at 1 MB keeps about 16 of them, whatever its count cap:
    /// one emit job repeating with a large payload no longer grows memory without end.
    #[test]
    fn a_ring_is_bounded_in_bytes_as_well_as_entries() {
        let mut ring = EventRing::default();
        let cap = RingCap {
            len: 100_000,
            bytes: 1 << 20,
            total: usize::MAX,
        };
        for n in 1..=1_000 {
            ring.restore([event(n, 60_000)], cap);
        }
        assert!(ring.bytes <= 1 << 20, "{} bytes", ring.bytes);
        assert!(
            (15..=17).contains(&ring.buf.len()),
            "{} events",
            ring.buf.len()
        );
        assert_eq!(
            ring.buf.back().map(|e| e.id.as_str()),
            Some("1000-0"),
            "the newest kept"
        );
        // Small events: the count cap still rules.
        let mut ring = EventRing::default();
        for n in 1..=50 {
            ring.restore(
                [event(n, 10)],
                RingCap {
                    len: 20,
                    bytes: 1 << 20,
                    total: usize::MAX,
                },
            );
        }
        assert_eq!(ring.buf.len(), 20);
        // One event larger than the cap is kept alone.
        ring.restore(
            [event(51, 2 << 20)],
            RingCap {
                len: 20,
                bytes: 1 << 20,
                total: usize::MAX,
            },
        );
        assert_eq!(ring.buf.len(), 1);
    }

    /// Rings together stay within `total`: a noisy topic's appends past it trim its own
    /// oldest events, not a quiet topic's, and dropping a topic gives its bytes back.
    #[test]
    fn every_ring_together_is_bounded_and_a_noisy_topic_trims_its_own() {
        let cap = RingCap {
            len: 100_000,
            bytes: 64 << 20,
            total: 2 << 20,
        };
        let mut rings = Rings::default();
        rings.add("quiet", (1..=8).map(|n| event(n, 60_000)).collect(), cap);
        let quiet = rings["quiet"].bytes;
        for n in 1..=1_000 {
            rings.add("noisy", vec![event(n, 60_000)], cap);
        }
        assert!(rings.bytes() <= 2 << 20, "{} bytes in all", rings.bytes());
        assert_eq!(
            rings["quiet"].buf.len(),
            8,
            "the quiet topic keeps its events"
        );
        assert_eq!(rings["quiet"].bytes, quiet);
        assert_eq!(
            rings.bytes(),
            rings["quiet"].bytes + rings["noisy"].bytes,
            "the total is what the rings hold"
        );
        assert!(
            rings["noisy"].buf.len() > 1,
            "the noisy topic keeps what room is left"
        );
        rings.remove("noisy");
        assert_eq!(rings.bytes(), quiet);
    }
}

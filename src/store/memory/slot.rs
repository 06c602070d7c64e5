//! One slot of the memory engine: the state machine of `store/state_machine.rs` (as the Lua
//! scripts of `lua/` are on Redis), over a timing wheel (scheduled jobs), ordered sets
//! (running by lease deadline, dead by time of death) and a slab of entries. Each method
//! mirrors the script of the same name, so the conformance suite holds both engines to one
//! behaviour. Every change marks its job dirty, which is what the journal writes.

use std::collections::BTreeSet;
use std::hash::BuildHasher;
use std::ops::Bound;

use super::id_index::IdIndex;
use super::prefetch::prefetch;
use super::wheel::{Due, Wheel};
use crate::model::{DeadCursor, Finished, JobState, RunOutcome, ScheduleOutcome, SlotStats};
use crate::store::engine::{
    DeadEntry, Handed, Imported, Refired, SlotPumped, SlotReset, SlotScheduled, Stored,
};
use crate::store::engine::{Ownership, owner_name};
use crate::store::record::Record;
use crate::time::Millis;

/// A job id, held in its entry: up to 24 bytes inline (a device id, a numbered job), longer
/// ones on the heap. An inline id costs no allocation of its own; an `Arc<str>` per job
/// cost an allocation and a second copy of its pointer in the index.
pub(crate) type Id = compact_str::CompactString;

/// One job: 48 bytes, and the record only for a job that differs from its topic's defaults.
pub(super) struct Entry {
    pub id: Id,
    /// `None` for a plain job: nothing differs from the topic's defaults.
    pub rec: Option<Box<Record>>,
    pub state: JobState,
    /// Fire time (scheduled), lease deadline (running) or time of death (dead).
    pub score: Millis,
}

/// What changed since the journal last looked.
pub(crate) struct Dirty {
    pub(crate) ids: Vec<Id>,
    /// The run-token counter moved.
    pub(crate) seq_moved: bool,
}

pub(crate) struct SlotState {
    /// Job ids to their entries: a table of entry numbers and hash bits (`id_index.rs`),
    /// hashed by the id the entry holds, so an id is stored once. Hashed with foldhash
    /// (seeded at random per slot, so ids a client picks cannot be aimed at one bucket
    /// without the seed) in place of SipHash: resets of 2M resident devices went from 2.5M
    /// to 3.5M a second (`toc bench reset`).
    ids: IdIndex,
    hasher: foldhash::fast::RandomState,
    entries: Vec<Option<Entry>>,
    free: Vec<u32>,
    wheel: Wheel,
    run: BTreeSet<(Millis, u32)>,
    dead: BTreeSet<(Millis, Id)>,
    pub seq: u64,
    /// Whether changes are recorded for a journal (not without one: it costs on every reset).
    track: bool,
    dirty: Vec<Id>,
    seq_dirty: bool,
    /// The owner lease: holder and when it runs out (`own.lua`'s hash).
    owner: Option<(String, Millis)>,
    /// The owner fence: it only grows.
    fence: u64,
    /// With a journal: the jobs the change under way touched, as they were before it
    /// (`None`: it did not exist), and the token counter before it, so that a change whose
    /// journal record cannot be written is undone and leaves no trace (write-ahead as readers
    /// see it: the slot's lock is held until the record is written or the change undone).
    undo: Vec<(Id, Option<Saved>)>,
    undo_seq: Option<u64>,
    /// What the slot's records weigh in all ([`Record::weight`]), kept as they change.
    bytes: u64,
}

/// A job as it was before a change, for undoing it.
struct Saved {
    rec: Option<Box<Record>>,
    state: JobState,
    score: Millis,
}

/// A schedule's answer with nothing re-armed and no stored job.
fn scheduled(
    outcome: ScheduleOutcome,
    state: Option<JobState>,
    fire_at: Option<Millis>,
    is_head: bool,
) -> SlotScheduled {
    SlotScheduled {
        outcome,
        state,
        fire_at,
        is_head,
        rearmed: None,
        stored: None,
    }
}

fn capped(rec: &Record, at: Millis) -> Millis {
    match rec.max_fire_at {
        Some(x) if at > x => x,
        _ => at,
    }
}

impl SlotState {
    pub(super) fn new(now: Millis, track: bool) -> Self {
        SlotState {
            ids: IdIndex::new(),
            hasher: foldhash::fast::RandomState::default(),
            entries: Vec::new(),
            free: Vec::new(),
            wheel: Wheel::new(crate::num::unsigned(now)),
            run: BTreeSet::new(),
            dead: BTreeSet::new(),
            seq: 0,
            track,
            dirty: Vec::new(),
            seq_dirty: false,
            owner: None,
            fence: 0,
            undo: Vec::new(),
            undo_seq: None,
            bytes: 0,
        }
    }

    /// Notes job `k` as it is now, before a change to it, when changes are journaled.
    fn save(&mut self, k: u32) {
        if self.track {
            let e = self.entry(k);
            let saved = Saved {
                rec: e.rec.clone(),
                state: e.state,
                score: e.score,
            };
            self.undo.push((e.id.clone(), Some(saved)));
        }
    }

    /// The change under way was written to the journal: nothing is to be undone.
    pub(super) fn keep_changes(&mut self) {
        self.undo.clear();
        self.undo_seq = None;
    }

    /// The change under way could not be journaled: every job it touched goes back to what
    /// it was, and the token counter too, as if it had never been asked for.
    pub(super) fn undo_changes(&mut self) {
        let track = std::mem::replace(&mut self.track, false);
        for (id, saved) in std::mem::take(&mut self.undo).into_iter().rev() {
            if let Some(k) = self.locate(&id) {
                self.remove(k);
            }
            if let Some(saved) = saved {
                let rec = saved.rec.map(|r| *r).unwrap_or_default();
                self.create(&id, rec, saved.state, saved.score);
            }
        }
        if let Some(seq) = self.undo_seq.take() {
            self.seq = seq;
        }
        self.dirty.clear();
        self.seq_dirty = false;
        self.track = track;
    }

    /// `own.lua`. `instance` is an owner id (`store::owner_id`): a lease held under the
    /// same name by another incarnation is taken over at once.
    pub(super) fn own(&mut self, instance: &str, now: Millis, ttl: Millis) -> Ownership {
        let other_name = |id: &str| owner_name(id) != owner_name(instance);
        match &self.owner {
            Some((id, until)) if id != instance && other_name(id) && *until > now => {
                return Ownership::Held {
                    by: id.clone(),
                    until: *until,
                };
            }
            Some((id, _)) if id == instance => {}
            _ => self.fence += 1,
        }
        self.owner = Some((instance.to_string(), now.saturating_add(ttl)));
        Ownership::Owned { fence: self.fence }
    }

    /// `disown.lua`.
    pub(super) fn disown(&mut self, instance: &str) -> bool {
        let held = self.owner.as_ref().is_some_and(|(id, _)| id == instance);
        if held {
            self.owner = None;
        }
        held
    }

    /// `pump.lua`'s check: the current fence when `fence` (not 0) is not it.
    pub(super) fn fenced(&self, fence: u64) -> Option<u64> {
        (fence != 0 && fence != self.fence).then_some(self.fence)
    }

    fn entry(&self, k: u32) -> &Entry {
        self.entries[k as usize].as_ref().expect("a live entry")
    }

    fn entry_mut(&mut self, k: u32) -> &mut Entry {
        self.entries[k as usize].as_mut().expect("a live entry")
    }

    fn locate(&self, id: &str) -> Option<u32> {
        let entries = &self.entries;
        self.ids.find(self.hasher.hash_one(id), |k| {
            entries[k as usize].as_ref().is_some_and(|e| e.id == id)
        })
    }

    /// Indexes entry `k` under its id (which no other entry holds).
    fn index_id(&mut self, k: u32) {
        let hash = self.hasher.hash_one(self.entry(k).id.as_str());
        self.ids.insert(hash, k);
    }

    /// Forgets entry `k`'s index, `id` being its id.
    fn unindex_id(&mut self, k: u32, id: &str) {
        self.ids.remove(self.hasher.hash_one(id), k);
    }

    fn record(&self, k: u32) -> Record {
        self.entry(k).rec.as_deref().cloned().unwrap_or_default()
    }

    fn mark(&mut self, k: u32) {
        if self.track {
            let id = self.entry(k).id.clone();
            self.dirty.push(id);
        }
    }

    fn set_record(&mut self, k: u32, rec: Record) {
        self.save(k);
        let was = self.entry(k).rec.as_ref().map_or(0, |r| r.weight());
        self.bytes = self.bytes.saturating_sub(was).saturating_add(rec.weight());
        self.entry_mut(k).rec = (!rec.is_empty()).then(|| Box::new(rec));
        self.mark(k);
    }

    fn unindex(&mut self, k: u32) {
        let (state, score) = (self.entry(k).state, self.entry(k).score);
        match state {
            JobState::Scheduled => {
                self.wheel.remove(k);
            }
            JobState::Running => {
                self.run.remove(&(score, k));
            }
            JobState::Dead => {
                let id = self.entry(k).id.clone();
                self.dead.remove(&(score, id));
            }
        }
    }

    fn index(&mut self, k: u32) {
        let (state, score) = (self.entry(k).state, self.entry(k).score);
        match state {
            JobState::Scheduled => self.wheel.insert(k, crate::num::unsigned(score)),
            JobState::Running => {
                self.run.insert((score, k));
            }
            JobState::Dead => {
                let id = self.entry(k).id.clone();
                self.dead.insert((score, id));
            }
        }
    }

    fn set_state(&mut self, k: u32, state: JobState, score: Millis) {
        self.save(k);
        self.unindex(k);
        let e = self.entry_mut(k);
        e.state = state;
        e.score = score;
        self.index(k);
        self.mark(k);
    }

    fn create(&mut self, id: &str, rec: Record, state: JobState, score: Millis) -> u32 {
        self.bytes = self.bytes.saturating_add(rec.weight());
        let entry = Entry {
            id: Id::from(id),
            rec: (!rec.is_empty()).then(|| Box::new(rec)),
            state,
            score,
        };
        let k = match self.free.pop() {
            Some(k) => {
                self.entries[k as usize] = Some(entry);
                k
            }
            None => {
                self.entries.push(Some(entry));
                crate::num::to_u32(self.entries.len() - 1)
            }
        };
        if self.track {
            self.undo.push((Id::from(id), None));
        }
        self.index_id(k);
        self.index(k);
        self.mark(k);
        k
    }

    fn remove(&mut self, k: u32) {
        self.save(k);
        self.unindex(k);
        self.unindex_id(k, &self.entry(k).id.clone());
        let e = self.entries[k as usize].take().expect("a live entry");
        let weight = e.rec.as_ref().map_or(0, |r| r.weight());
        self.bytes = self.bytes.saturating_sub(weight);
        self.free.push(k);
        if self.track {
            self.dirty.push(e.id);
        }
    }

    /// Back to scheduled at `at` after a run: the run's fields go.
    fn reschedule(&mut self, k: u32, mut rec: Record, at: Millis) {
        rec.token = None;
        rec.run_fire_at = None;
        rec.pending_reset = None;
        self.set_record(k, rec);
        self.set_state(k, JobState::Scheduled, at);
    }

    /// Whether no scheduled job fires before `at` (ties count as the head). Exact: the
    /// wheel's head is cached, and scanned for only after the job that held it left.
    fn is_head(&self, at: Millis) -> bool {
        self.head().is_some_and(|h| h >= at)
    }

    pub(super) fn head(&self) -> Option<Millis> {
        self.wheel.next_at().map(crate::num::signed)
    }

    /// The slot's next time for the safety net: its earliest due job or lease deadline.
    pub(super) fn next_time(&self) -> Option<Millis> {
        let lease = self.run.first().map(|(d, _)| *d);
        match (self.head(), lease) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// `schedule.lua`.
    pub(super) fn schedule(
        &mut self,
        id: &str,
        mode: crate::model::ScheduleMode,
        at: Millis,
        now: Millis,
        spec: Record,
    ) -> SlotScheduled {
        use crate::model::ScheduleMode::*;
        let k = self.locate(id);
        let state = k.map(|k| self.entry(k).state);
        if mode == CreateOnly && state.is_some() {
            return scheduled(ScheduleOutcome::Exists, state, None, false);
        }
        if mode == ResetOnly {
            return match (k, state) {
                (Some(k), Some(st @ (JobState::Scheduled | JobState::Running))) => {
                    self.reset_one(k, st, id, at, now, spec.traceparent)
                }
                _ => scheduled(ScheduleOutcome::Missing, state, None, false),
            };
        }
        let mut spec = spec;
        let at = capped(&spec, at);
        if let (Some(k), Some(JobState::Running)) = (k, state) {
            // The run keeps its token and attempt; the new definition fires after it.
            let rec = self.record(k);
            spec.attempts = rec.attempts;
            spec.token = rec.token;
            spec.run_fire_at = rec.run_fire_at;
            spec.pending_reset = Some(at);
            spec.created_at = rec.created_at.or(Some(now));
            spec.updated_at = Some(now);
            self.set_record(k, spec);
            return scheduled(
                ScheduleOutcome::Replaced,
                Some(JobState::Running),
                Some(at),
                false,
            );
        }
        if !spec.is_empty() {
            let old_c = match (k, state) {
                (Some(k), Some(JobState::Scheduled)) => self.record(k).created_at,
                _ => None,
            };
            // A spec names c when a doubling moves a job home.
            spec.created_at = old_c.or(spec.created_at).or(Some(now));
            spec.updated_at = Some(now);
        }
        let outcome = match k {
            Some(k) => {
                self.set_record(k, spec);
                self.set_state(k, JobState::Scheduled, at);
                ScheduleOutcome::Replaced
            }
            None => {
                self.create(id, spec, JobState::Scheduled, at);
                ScheduleOutcome::Created
            }
        };
        scheduled(
            outcome,
            Some(JobState::Scheduled),
            Some(at),
            self.is_head(at),
        )
    }

    /// `schedule` with `ResetOnly` of entry `k`, scheduled or running (`st`): moved to `at`
    /// (capped by its max fire time), or after its run; a traced reset's `traceparent`
    /// becomes the job's.
    fn reset_one(
        &mut self,
        k: u32,
        st: JobState,
        id: &str,
        at: Millis,
        now: Millis,
        traceparent: Option<String>,
    ) -> SlotScheduled {
        let (at, rearmed) = self.reset_recorded(k, st, id, at, now, traceparent);
        let running = st == JobState::Running;
        SlotScheduled {
            rearmed,
            ..scheduled(
                ScheduleOutcome::Reset,
                Some(st),
                Some(at),
                !running && self.is_head(at),
            )
        }
    }

    /// A reset of entry `k`, scheduled or running (`st`), through its record: moved to `at`
    /// capped by its max fire time (or, running, after its run), its fires since the last
    /// reset answered as a re-arm, `traceparent` (a traced reset's) made the job's. Answers
    /// the time it now fires at.
    fn reset_recorded(
        &mut self,
        k: u32,
        st: JobState,
        id: &str,
        at: Millis,
        now: Millis,
        traceparent: Option<String>,
    ) -> (Millis, Option<Refired>) {
        let mut rec = self.record(k);
        // A traced reset: the job's next fire continues the resetting request's trace.
        if traceparent.is_some() {
            rec.traceparent = traceparent;
        }
        let at = capped(&rec, at);
        let rearmed = rec.fires.take().map(|fires| Refired {
            id: id.to_string(),
            fires,
            job_type: rec.job_type.clone(),
        });
        if rec.created_at.is_some() {
            rec.updated_at = Some(now);
        }
        if st == JobState::Running {
            rec.pending_reset = Some(at);
            self.set_record(k, rec);
        } else {
            self.set_record(k, rec);
            self.set_state(k, JobState::Scheduled, at);
        }
        (at, rearmed)
    }

    /// `reset_many.lua`. `create` is the record spec of a created job.
    pub(super) fn reset_many(
        &mut self,
        now: Millis,
        create: Option<&Record>,
        items: &[(&str, Millis)],
    ) -> SlotReset {
        let mut out = SlotReset::default();
        // Every id is looked up first, in passes that each only ask for memory: a large
        // slot's lookups miss the cache, and a batch's misses are waited for together where,
        // one per reset, each waited alone (library resets of 10M resident jobs: see
        // docs/bench/history.md, scale). Its index buckets first (known from the hashes alone), then
        // the entries and wheel places they name, then the wheel slots those name. A hint is
        // checked before use: it may name another id of the same hash bits, or an earlier
        // item of the batch may have created, replaced or removed its job.
        let hashes: Vec<u64> = items
            .iter()
            .map(|(id, _)| {
                let hash = self.hasher.hash_one(id);
                self.ids.prefetch(hash);
                hash
            })
            .collect();
        let hints: Vec<Option<u32>> = hashes
            .iter()
            .map(|&hash| {
                let k = self.ids.candidate(hash);
                if let Some(k) = k {
                    if let Some(e) = self.entries.get(k as usize) {
                        prefetch(e);
                    }
                    self.wheel.prefetch(k);
                }
                k
            })
            .collect();
        for &k in hints.iter().flatten() {
            self.wheel.prefetch_slot(k);
        }
        for ((id, at), hint) in items.iter().zip(hints) {
            let k = hint
                .filter(|&k| {
                    self.entries[k as usize]
                        .as_ref()
                        .is_some_and(|e| e.id == *id)
                })
                .or_else(|| self.locate(id));
            match k.map(|k| (k, self.entry(k).state)) {
                Some((k, st @ (JobState::Scheduled | JobState::Running))) => {
                    let plain = self.entry(k).rec.is_none();
                    if plain && st == JobState::Scheduled {
                        // The heartbeat case: only the fire time moves.
                        self.set_state(k, JobState::Scheduled, *at);
                    } else {
                        let (_, rearmed) = self.reset_recorded(k, st, id, *at, now, None);
                        out.rearmed.extend(rearmed);
                    }
                    out.reset += 1;
                }
                found => {
                    let Some(spec) = create else {
                        out.missing.push(id.to_string());
                        continue;
                    };
                    if let Some((k, _)) = found {
                        self.remove(k); // a dead job is replaced, as a schedule would
                    }
                    let mut rec = spec.clone();
                    if !rec.is_empty() {
                        rec.created_at = Some(now);
                        rec.updated_at = Some(now);
                    }
                    self.create(id, rec, JobState::Scheduled, *at);
                    out.created += 1;
                }
            }
        }
        out
    }

    /// `pump.lua`: takes back expired leases, then hands out jobs due by `now + lead`.
    pub(crate) fn pump(
        &mut self,
        now: Millis,
        lead: Millis,
        limit: usize,
        lease: Millis,
        default_max: u32,
    ) -> SlotPumped {
        let expired = self.take_back_expired(now, limit, default_max);
        let upto = crate::num::unsigned(now.saturating_add(lead));
        self.wheel.advance(upto);
        let mut out = Vec::new();
        while out.len() < limit {
            let Some(Due {
                key: k,
                when: fire_at,
            }) = self.wheel.pop_ready(upto)
            else {
                break;
            };
            out.push(self.hand_out(k, crate::num::signed(fire_at), now.saturating_add(lease)));
        }
        // The next due job is pumped `lead` before its fire time.
        let next_due = self.head().map(|at| at.saturating_sub(lead));
        let next_lease = self.run.first().map(|(d, _)| *d);
        let next = match (next_due, next_lease) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        SlotPumped {
            handed: out,
            expired,
            next_at: next,
            set_aside: Vec::new(),
        }
    }

    /// Takes back up to `limit` runs whose lease ended by `now`: scheduled again (at a
    /// reset's time if one came during the run), or dead with their attempts used up.
    fn take_back_expired(&mut self, now: Millis, limit: usize, default_max: u32) -> u32 {
        let expired: Vec<u32> = self
            .run
            .range(..=(now, u32::MAX))
            .take(limit)
            .map(|(_, k)| *k)
            .collect();
        for &k in &expired {
            let mut rec = self.record(k);
            let (attempts, max) = (
                rec.attempts.unwrap_or(0),
                rec.max_attempts.unwrap_or(default_max),
            );
            if let Some(at) = rec.pending_reset {
                rec.attempts = None;
                rec.last_error = None;
                self.reschedule(k, rec, at);
            } else {
                rec.last_error = Some(format!(
                    "lease expired: the run did not report within the visibility timeout (attempt {attempts} of {max})"
                ));
                if attempts >= max {
                    rec.token = None;
                    self.set_record(k, rec);
                    self.set_state(k, JobState::Dead, now);
                } else {
                    self.reschedule(k, rec, now);
                }
            }
        }
        crate::num::to_u32(expired.len())
    }

    /// Hands out job `k` (popped from the wheel, due at `fire_at`) as a run with a new
    /// token, its lease ending at `until`.
    fn hand_out(&mut self, k: u32, fire_at: Millis, until: Millis) -> Handed {
        self.save(k);
        if self.track && self.undo_seq.is_none() {
            self.undo_seq = Some(self.seq);
        }
        self.seq += 1;
        self.seq_dirty = true;
        let mut rec = self.record(k);
        rec.attempts = Some(rec.attempts.unwrap_or(0) + 1);
        rec.token = Some(self.seq);
        rec.run_fire_at = Some(fire_at);
        // Already out of the wheel: index it as running directly.
        let e = self.entry_mut(k);
        e.state = JobState::Running;
        e.score = until;
        e.rec = Some(Box::new(rec.clone()));
        let id = e.id.clone();
        self.run.insert((until, k));
        self.mark(k);
        Handed {
            id: id.to_string(),
            token: self.seq,
            record: rec,
            text: Default::default(),
        }
    }

    fn running_with(&self, id: &str, token: u64) -> Option<u32> {
        let k = self.locate(id)?;
        let e = self.entry(k);
        let live =
            e.state == JobState::Running && e.rec.as_ref().and_then(|r| r.token) == Some(token);
        live.then_some(k)
    }

    /// `settle.lua`'s step for one run (`Store::settle`, `Store::finish` for one).
    pub(super) fn settle_run(
        &mut self,
        id: &str,
        token: u64,
        outcome: &RunOutcome,
        now: Millis,
        default_max: u32,
    ) -> Finished {
        let Some(k) = self.running_with(id, token) else {
            return Finished::Stale;
        };
        let mut rec = self.record(k);
        if let Some(again) = rec.pending_reset {
            rec.attempts = None;
            rec.last_error = None;
            self.reschedule(k, rec, again);
            return Finished::Rescheduled;
        }
        let attempts_left = rec.attempts.unwrap_or(0) < rec.max_attempts.unwrap_or(default_max);
        let ends = match outcome {
            RunOutcome::Done | RunOutcome::Dead { .. } => true,
            RunOutcome::Retry { .. } => !attempts_left,
            // The series' last fire ends it: no next instant to ask the front for.
            RunOutcome::Repeat { .. }
            | RunOutcome::Release
            | RunOutcome::Defer { .. }
            | RunOutcome::End { .. } => false,
        };
        if ends && rec.schedule.is_some() {
            // A recurring job's run ended: the front settles it again at its next instant.
            return Finished::Recur;
        }
        match outcome {
            RunOutcome::Done | RunOutcome::End { error: None } => {
                self.remove(k);
                Finished::Done
            }
            RunOutcome::Repeat { at, error } => {
                rec.attempts = None;
                rec.last_error = error.clone();
                rec.fires = Some(rec.fires.unwrap_or(0) + 1);
                self.reschedule(k, rec, *at);
                Finished::Repeating
            }
            RunOutcome::Release | RunOutcome::Defer { .. } => {
                let a = rec.attempts.unwrap_or(1).saturating_sub(1);
                rec.attempts = (a > 0).then_some(a);
                let at = match outcome {
                    RunOutcome::Defer { at } => *at,
                    _ => now,
                };
                self.reschedule(k, rec, at);
                Finished::Released
            }
            RunOutcome::Retry { error, at } if attempts_left => {
                rec.last_error = Some(error.to_string());
                self.reschedule(k, rec, *at);
                Finished::Retrying
            }
            RunOutcome::Retry { error, .. }
            | RunOutcome::Dead { error }
            | RunOutcome::End { error: Some(error) } => {
                rec.last_error = Some(error.to_string());
                rec.token = None;
                self.set_record(k, rec);
                self.set_state(k, JobState::Dead, now);
                Finished::Dead
            }
        }
    }

    /// `touch.lua`.
    pub(super) fn touch(&mut self, id: &str, token: u64, deadline: Millis) -> bool {
        match self.running_with(id, token) {
            Some(k) => {
                self.set_state(k, JobState::Running, deadline);
                true
            }
            None => false,
        }
    }

    /// `cancel.lua`.
    pub(super) fn cancel(&mut self, id: &str) -> Option<JobState> {
        let k = self.locate(id)?;
        let state = self.entry(k).state;
        self.remove(k);
        Some(state)
    }

    /// `get.lua`.
    pub(crate) fn get(&self, id: &str) -> Option<Stored> {
        let k = self.locate(id)?;
        let e = self.entry(k);
        Some(Stored {
            state: e.state,
            score: e.score,
            record: self.record(k),
        })
    }

    /// `list.lua`: up to `limit` jobs in `state` with a score from `from` to `to`, after the
    /// cursor in (score, id) order. The wheel keeps no order, so this looks at every job of
    /// the slot: a listing costs the slot's size, which an operator's page can afford.
    pub(crate) fn list(&self, r: &crate::store::engine::Range<'_>) -> Vec<(String, Stored)> {
        let (state, from, to, after, limit) = (r.state, r.from, r.to, r.after, r.limit);
        let mut found: Vec<(Millis, &str, &Entry)> = self
            .all()
            .filter(|e| e.state == state && (from..=to).contains(&e.score))
            .map(|e| (e.score, &*e.id, e))
            .filter(|(score, id, _)| after.is_none_or(|c| (*score, *id) > (c.score, c.id.as_str())))
            .collect();
        found.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        found
            .into_iter()
            .take(limit)
            .map(|(score, id, e)| {
                let stored = Stored {
                    state: e.state,
                    score,
                    record: e.rec.as_deref().cloned().unwrap_or_default(),
                };
                (id.to_string(), stored)
            })
            .collect()
    }

    /// `dead_page.lua`: up to `limit` dead jobs after the cursor, oldest first.
    pub(crate) fn dead_page(&self, after: Option<&DeadCursor>, limit: usize) -> Vec<DeadEntry> {
        let start = match after {
            Some(c) => Bound::Excluded((c.dead_at, Id::from(c.id.as_str()))),
            None => Bound::Unbounded,
        };
        self.dead
            .range((start, Bound::Unbounded))
            .take(limit)
            .map(|(at, id)| DeadEntry {
                cursor: DeadCursor {
                    dead_at: *at,
                    id: id.to_string(),
                },
                record: self.record(self.locate(id).expect("a dead job is indexed")),
            })
            .collect()
    }

    /// `requeue.lua`.
    pub(super) fn requeue(&mut self, id: &str, now: Millis) -> bool {
        let Some(k) = self
            .locate(id)
            .filter(|k| self.entry(*k).state == JobState::Dead)
        else {
            return false;
        };
        let mut rec = self.record(k);
        rec.attempts = None;
        rec.last_error = None;
        if rec.created_at.is_some() {
            rec.updated_at = Some(now);
        }
        self.reschedule(k, rec, now);
        true
    }

    /// `dead_delete.lua`.
    pub(super) fn dead_delete(&mut self, id: &str) -> bool {
        match self
            .locate(id)
            .filter(|k| self.entry(*k).state == JobState::Dead)
        {
            Some(k) => {
                self.remove(k);
                true
            }
            None => false,
        }
    }

    /// The slot's figures; `slot` is its number.
    /// How many jobs the slot holds, in any state.
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    pub(crate) fn stats(&self, slot: u32) -> SlotStats {
        SlotStats {
            slot,
            scheduled: self.wheel.count() as u64,
            running: self.run.len() as u64,
            dead: self.dead.len() as u64,
            next_fire_at: self.head(),
        }
    }

    /// `import.lua`: writes each job as exported unless the slot holds its id already;
    /// answers how many it wrote.
    pub(super) fn import(&mut self, jobs: &[Imported]) -> u64 {
        let mut n = 0;
        for job in jobs {
            if self.locate(&job.id).is_none() {
                self.create(&job.id, job.record.clone(), job.state, job.score);
                n += 1;
            }
        }
        n
    }

    /// What the slot's records weigh in all ([`Record::weight`]).
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The jobs changed since the last call (each once), and whether the token counter moved.
    pub(crate) fn take_dirty(&mut self) -> Dirty {
        let mut ids = std::mem::take(&mut self.dirty);
        ids.sort_unstable();
        ids.dedup();
        Dirty {
            ids,
            seq_moved: std::mem::take(&mut self.seq_dirty),
        }
    }

    /// Every job, for compaction.
    pub(super) fn all(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().flatten()
    }

    /// Puts a job back as the journal recorded it (replay: not a change to journal again,
    /// so nothing is noted for the journal or for undoing).
    pub(super) fn restore(&mut self, id: &str, state: JobState, score: Millis, rec: Record) {
        let track = std::mem::replace(&mut self.track, false);
        if let Some(k) = self.locate(id) {
            self.remove(k);
        }
        self.create(id, rec, state, score);
        self.track = track;
    }

    /// Drops a job the journal recorded as gone (replay).
    pub(super) fn forget(&mut self, id: &str) {
        let track = std::mem::replace(&mut self.track, false);
        if let Some(k) = self.locate(id) {
            self.remove(k);
        }
        self.track = track;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout the engine's bytes per job rest on: an id of up to 24 bytes is held in
    /// its entry, and an entry is 48 bytes.
    #[test]
    fn an_entry_holds_a_short_id_inline_in_48_bytes() {
        assert_eq!(std::mem::size_of::<Option<Entry>>(), 48);
        let id = Id::from("device-0123456789-abcdef");
        assert_eq!(id.len(), 24);
        assert!(!id.is_heap_allocated());
        assert!(Id::from("0123456789-0123456789-0123").is_heap_allocated());
    }

    /// A slot reuses a removed job's entry, and the index finds every job by its id after
    /// removals and reuse (the index holds entry numbers, hashed by the id in the entry).
    #[test]
    fn the_index_finds_each_job_after_removals_and_reuse() {
        let mut s = SlotState::new(0, false);
        for i in 0..1_000 {
            s.create(
                &format!("j{i}"),
                Record::default(),
                JobState::Scheduled,
                10 + i,
            );
        }
        for i in (0..1_000).step_by(3) {
            assert!(s.cancel(&format!("j{i}")).is_some());
        }
        for i in 1_000..1_200 {
            s.create(
                &format!("j{i}"),
                Record::default(),
                JobState::Scheduled,
                10 + i,
            );
        }
        assert_eq!(s.entries.len(), 1_000, "removed entries were reused");
        for i in 0..1_200 {
            let gone = i < 1_000 && i % 3 == 0;
            let got = s.get(&format!("j{i}")).map(|j| j.score);
            assert_eq!(got, (!gone).then_some(10 + i), "job j{i}");
        }
        assert_eq!(s.len(), 1_200 - 334);
    }

    /// A batch looks its ids up before it changes anything: an id created, or dead and
    /// replaced, by an earlier item of the same batch is found by the later ones.
    #[test]
    fn a_batch_sees_the_changes_of_its_own_earlier_items() {
        let mut s = SlotState::new(0, false);
        s.create("dead", Record::default(), JobState::Dead, 1);
        let spec = Record::default();
        let items = [
            ("a", 10),
            ("a", 20),
            ("dead", 5),
            ("b", 7),
            ("dead", 6),
            ("a", 30),
        ];
        let out = s.reset_many(0, Some(&spec), &items);
        assert_eq!((out.created, out.reset), (3, 3));
        let at = |s: &SlotState, id: &str| s.get(id).map(|j| (j.state, j.score));
        assert_eq!(at(&s, "a"), Some((JobState::Scheduled, 30)));
        assert_eq!(at(&s, "dead"), Some((JobState::Scheduled, 6)));
        assert_eq!(at(&s, "b"), Some((JobState::Scheduled, 7)));
        assert_eq!(s.len(), 3);
    }
}

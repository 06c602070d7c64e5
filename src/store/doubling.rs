//! Slot doubling without moving data (seed 000, section 3.3.1), for both engines.
//!
//! A topic's slot count may double (16 → 32, again and again). No job moves when it does:
//! writers route with the new count at once, and a job written before the doubling stays in
//! the slot the old count gave it (an "old copy") until something writes it again or it
//! leaves. A job's slot under the new count is either its old slot `s` or `s + old`.
//! While a topic drains (`TopicConfig::draining_from`):
//!
//! - lookups (get, cancel, reset, touch, a consumer's outcome, dead letters) try the job's
//!   home slot first, then its slot under each earlier count ([`TopicConfig::old_slots`]);
//! - a write that puts a job in its home slot (a create or replace, a reset that finds it
//!   only in an old slot) then removes every old copy, so a job has one live copy: nothing
//!   fires twice because of the doubling, and a reset is never lost to an old copy firing
//!   at its old time. A reset of an old copy that is running is applied after the run, in
//!   place, as any reset of a running job;
//! - pumps need no extra work: each slot pumps what it holds, old copies included;
//! - [`sweep`] looks for old copies in the slots that existed before the last doubling and,
//!   when none is left, marks the topic drained.
//!
//! The write goes home before the old copy is removed: a process killed between the two
//! leaves both (the old one may fire once more at its old time) rather than neither.

use std::collections::{BTreeMap, HashMap};

use super::engine::{Engine, SlotScheduled, Write};
use super::record::Record;
use crate::error::Result;
use crate::model::{JobState, Reset, ResetReport, ScheduleMode, ScheduleOutcome};
use crate::routing::slot_of;
use crate::store::engine::SlotRef;
use crate::time::Millis;
use crate::topic::TopicConfig;

/// Ids a sweep reads from a slot per call.
const SCAN_PAGE: usize = 1_000;

/// Removes the copies of job `id` from `old` slots; the state the first one was in.
pub(super) async fn drop_old_copies(
    engine: &dyn Engine,
    t: &TopicConfig,
    old: &[u32],
    id: &str,
) -> Result<Option<JobState>> {
    let mut found = None;
    for &slot in old {
        let state = engine.cancel(SlotRef::new(t, slot), id).await?;
        found = found.or(state);
    }
    Ok(found)
}

/// The first of `old` slots that holds job `id`, with its state.
pub(super) async fn find_old(
    engine: &dyn Engine,
    t: &TopicConfig,
    old: &[u32],
    id: &str,
) -> Result<Option<(u32, super::engine::Stored)>> {
    for &slot in old {
        if let Some(s) = engine
            .get(SlotRef::new(t, slot), &[id])
            .await?
            .pop()
            .flatten()
        {
            return Ok(Some((slot, s)));
        }
    }
    Ok(None)
}

/// A batch of resets grouped per slot and per the shard key its creates keep (`None` for
/// jobs routed by their ids): each group's ids and fire times, one engine call.
pub(super) type Groups<'a> = BTreeMap<(u32, Option<&'a str>), Vec<(&'a str, Millis)>>;

/// A reset of a job its home slot does not hold: found scheduled in an old slot, it moves
/// home at the reset's time (its record goes along, its fire count is reported as a
/// re-arm) and the old copy goes; found running, the reset is applied after the run, in
/// place. `None` when no old slot holds it scheduled or running. Answers the slot the job
/// is in afterwards and what the reset did.
pub(super) async fn reset_old(
    engine: &dyn Engine,
    t: &TopicConfig,
    home: u32,
    old: &[u32],
    id: &str,
    at: Millis,
    now: Millis,
) -> Result<Option<(u32, SlotScheduled)>> {
    let Some((slot, stored)) = find_old(engine, t, old, id).await? else {
        return Ok(None);
    };
    let reset_in = |slot: u32| {
        engine.schedule(
            SlotRef::new(t, slot),
            Write {
                id,
                mode: ScheduleMode::ResetOnly,
                fire_at: at,
                now,
                spec: Record::default(),
            },
        )
    };
    match stored.state {
        JobState::Dead => Ok(None),
        JobState::Running => {
            let r = reset_in(slot).await?;
            Ok((r.outcome == ScheduleOutcome::Reset).then_some((slot, r)))
        }
        JobState::Scheduled => {
            let mut spec = stored.record;
            let fires = spec.fires.take();
            let job_type = spec.job_type.clone();
            let created = engine
                .schedule(
                    SlotRef::new(t, home),
                    Write {
                        id,
                        mode: ScheduleMode::CreateOnly,
                        fire_at: at,
                        now,
                        spec,
                    },
                )
                .await?;
            let r = if created.outcome == ScheduleOutcome::Exists {
                // Written home meanwhile: that copy is the live one.
                reset_in(home).await?
            } else {
                SlotScheduled {
                    outcome: ScheduleOutcome::Reset,
                    rearmed: fires.map(|fires| super::engine::Refired {
                        id: id.to_string(),
                        fires,
                        job_type,
                    }),
                    ..created
                }
            };
            drop_old_copies(engine, t, old, id).await?;
            Ok((r.outcome == ScheduleOutcome::Reset).then_some((home, r)))
        }
    }
}

/// The second step of a batch of resets on a draining topic: `report.missing` holds the
/// jobs their home slots did not have. Each is looked for in its old slots
/// ([`reset_old`]); those found nowhere are created at home when `create` is given, and
/// stay missing otherwise.
pub(super) async fn reset_missing(
    engine: &dyn Engine,
    t: &TopicConfig,
    resets: &[Reset],
    create: Option<&Record>,
    report: &mut ResetReport,
    now: Millis,
) -> Result<Vec<super::engine::Refired>> {
    let missing = std::mem::take(&mut report.missing);
    let by_id: HashMap<&str, &Reset> = resets.iter().map(|r| (r.job.id.as_str(), r)).collect();
    let tries = missing
        .iter()
        .filter_map(|id| by_id.get(id.as_str()))
        .map(|r| {
            let key = r.job.route_key();
            let (home, old) = (slot_of(key, t.slots), t.old_slots(key));
            async move {
                let found = reset_old(engine, t, home, &old, &r.job.id, r.fire_at, now).await?;
                Ok::<_, crate::error::Error>((home, r, found))
            }
        });
    let mut rearmed = Vec::new();
    // Per home slot, and per reset when its job keeps a shard key of its own (what a
    // created job keeps, `Record::routed`).
    let mut still = Groups::new();
    for result in futures_util::future::join_all(tries).await {
        match result? {
            (_, _, Some((_, r))) => {
                report.reset += 1;
                rearmed.extend(r.rearmed);
            }
            (home, r, None) => {
                let keyed = r.job.shard_key.as_deref().filter(|k| *k != r.job.id);
                still
                    .entry((home, keyed))
                    .or_default()
                    .push((r.job.id.as_str(), r.fire_at));
            }
        }
    }
    for ((slot, keyed), items) in still {
        match create {
            Some(spec) => {
                let spec = spec.routed(keyed);
                let r = engine
                    .reset_many(SlotRef::new(t, slot), &items, Some(&spec), now)
                    .await?;
                report.reset += r.reset;
                report.created += r.created;
                report.missing.extend(r.missing);
                rearmed.extend(r.rearmed);
            }
            None => report
                .missing
                .extend(items.into_iter().map(|(id, _)| id.to_string())),
        }
    }
    Ok(rearmed)
}

/// Whether any of a slot's jobs is routed by its id to another slot: an old copy. A job
/// scheduled with a shard key of its own cannot be told from an old copy by its id (its
/// key is in its record, which a scan of ids does not read), so it counts as one: a topic that uses shard keys stays
/// draining, which costs only the extra lookups of jobs that are not at home.
async fn holds_old_copy(engine: &dyn Engine, t: &TopicConfig, slot: u32) -> Result<bool> {
    for state in [JobState::Running, JobState::Scheduled, JobState::Dead] {
        let mut cursor = 0;
        loop {
            let (next, ids) = engine
                .scan_ids(SlotRef::new(t, slot), state, cursor, SCAN_PAGE)
                .await?;
            if ids.iter().any(|id| slot_of(id, t.slots) != slot) {
                return Ok(true);
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(false)
}

/// Looks for old copies in the slots a draining topic had before its last doubling,
/// starting at `start` (where the last sweep found one), and answers the first slot that
/// holds one, or `None` when none does.
pub(super) async fn sweep(engine: &dyn Engine, t: &TopicConfig, start: u32) -> Result<Option<u32>> {
    let before = (t.slots / 2).max(1);
    for i in 0..before {
        let slot = (start + i) % before;
        if holds_old_copy(engine, t, slot).await? {
            return Ok(Some(slot));
        }
    }
    Ok(None)
}

//! The store's writes and reads of one job: schedule, reset (one or a batch), cancel, get; each
//! tried again under settings read anew when a doubling routed it wrongly.

use std::collections::HashSet;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::model::{
    CreateSpec, Job, JobRef, JobState, NewJob, Reset, ResetReport, ScheduleMode, ScheduleOutcome,
    Scheduled, SlotHead,
};
use crate::routing::slot_of;
use crate::store::doubling;
use crate::store::engine::SlotRef;
use crate::store::engine::{SlotScheduled, Write};
use crate::store::record::Record;
use crate::time::Millis;
use crate::topic::TopicConfig;
use crate::validate;

use super::{LAYOUT_TRIES, Store, rearmed};

impl Store {
    /// `schedule` under the settings `t`, once.
    async fn schedule_once(
        &self,
        t: &Arc<TopicConfig>,
        job: &NewJob,
        mode: ScheduleMode,
        now: Millis,
    ) -> Result<Scheduled> {
        let t = t.clone();
        validate::new_job(t.max_payload_bytes, job)?;
        let (slot, old) = Self::places(
            &t,
            &JobRef::new(job.id.clone()).with_shard_key(job.shard_key.clone()),
        )?;
        let spec = Record {
            type_key: self.type_key(&t, job.job_type.as_deref(), &job.payload),
            ..Record::for_job(&t, job)
        };
        if mode == ScheduleMode::CreateOnly
            && let Some((at, stored)) = doubling::find_old(&*self.engine, &t, &old, &job.id).await?
        {
            let state = stored.state;
            return Ok(Scheduled {
                outcome: ScheduleOutcome::Exists,
                slot: at,
                state: Some(state),
                fire_at: None,
                is_head: false,
                rearmed: None,
                job: Some(
                    stored
                        .record
                        .into_job(&t, job.id.clone(), state, stored.score)?,
                ),
            });
        }
        let r = self
            .engine
            .schedule(
                SlotRef::new(&t, slot),
                Write {
                    id: &job.id,
                    mode,
                    fire_at: job.fire_at,
                    now,
                    spec,
                },
            )
            .await?;
        let (slot, r) = self.settle_old_copies(&t, slot, &old, job, now, r).await?;
        let stored = r
            .stored
            .map(|s| s.record.into_job(&t, job.id.clone(), s.state, s.score))
            .transpose()?;
        Ok(Scheduled {
            outcome: r.outcome,
            slot,
            state: r.state,
            fire_at: r.fire_at,
            is_head: r.is_head,
            rearmed: r.rearmed.filter(|r| r.fires > 0).map(|r| rearmed(&t, r)),
            job: stored,
        })
    }

    /// While the topic drains from a doubling, what `schedule` did at home (`r`, in `slot`)
    /// is completed in the old slots `old`: a reset that missed at home moves an old copy
    /// home; a job created or replaced at home drops its old copies (and was replaced).
    async fn settle_old_copies(
        &self,
        t: &TopicConfig,
        slot: u32,
        old: &[u32],
        job: &NewJob,
        now: Millis,
        mut r: SlotScheduled,
    ) -> Result<(u32, SlotScheduled)> {
        if old.is_empty() {
            return Ok((slot, r));
        }
        match r.outcome {
            ScheduleOutcome::Missing => {
                let engine = &*self.engine;
                let moved =
                    doubling::reset_old(engine, t, slot, old, &job.id, job.fire_at, now).await?;
                if let Some(moved) = moved {
                    return Ok(moved);
                }
            }
            ScheduleOutcome::Created | ScheduleOutcome::Replaced => {
                let dropped = doubling::drop_old_copies(&*self.engine, t, old, &job.id).await?;
                if dropped.is_some() {
                    r.outcome = ScheduleOutcome::Replaced;
                }
            }
            ScheduleOutcome::Exists | ScheduleOutcome::Reset => {}
        }
        Ok((slot, r))
    }

    /// `reset_many` under the settings `t`, once.
    async fn reset_many_once(
        &self,
        t: &Arc<TopicConfig>,
        resets: &[Reset],
        create: Option<&CreateSpec>,
        now: Millis,
    ) -> Result<ResetReport> {
        let t = t.clone();
        validate::reset_batch(t.max_payload_bytes, resets, create)?;
        let spec = create.map(|c| Record {
            type_key: self.type_key(&t, c.job_type.as_deref(), &c.payload),
            ..Record::for_create(&t, c)
        });
        // While the topic drains, a job its home slot does not hold may be an old copy:
        // nothing is created until the old slots were looked at.
        let draining = t.draining_from.is_some();
        let first_create = if draining { None } else { spec.as_ref() };
        // Per slot, and per shard key when jobs it routes may be created: a created job keeps
        // the key that routed it (`Record::routed`), so each key's creates are a call of
        // their own. Ids routed by themselves (heartbeats) share one call per slot.
        let mut by_slot = doubling::Groups::new();
        for r in resets {
            let keyed = r
                .job
                .shard_key
                .as_deref()
                .filter(|k| first_create.is_some() && *k != r.job.id);
            by_slot
                .entry((slot_of(r.job.route_key(), t.slots), keyed))
                .or_default()
                .push((r.job.id.as_str(), r.fire_at));
        }
        // One engine call per slot, all in flight at once (one connection multiplexes them).
        let calls = by_slot.iter().map(|((slot, keyed), items)| {
            let t = &t;
            let spec = first_create.map(|spec| spec.routed(*keyed));
            async move {
                let r = self
                    .engine
                    .reset_many(SlotRef::new(t, *slot), items, spec.as_deref(), now)
                    .await?;
                Ok::<_, Error>((*slot, r))
            }
        });
        let mut report = ResetReport::default();
        let mut full = None;
        let results = futures_util::future::join_all(calls).await;
        let slots = results.len();
        for (result, items) in results.into_iter().zip(by_slot.values()) {
            // A slot refused for a full store changed nothing: its ids are reported refused,
            // and what the other slots applied stands (one script per slot is atomic, a
            // batch over several slots is not).
            let (slot, r) = match result {
                Err(e @ Error::StoreFull(_)) => {
                    report
                        .refused
                        .extend(items.iter().map(|(id, _)| id.to_string()));
                    full = Some(e);
                    continue;
                }
                other => other?,
            };
            report.reset += r.reset;
            report.created += r.created;
            report.missing.extend(r.missing);
            report
                .rearmed
                .extend(r.rearmed.into_iter().map(|r| rearmed(&t, r)));
            if let Some(at) = items.iter().map(|(_, at)| *at).min() {
                report.heads.push(SlotHead { slot, at });
            }
        }
        if let Some(e) = full
            && report.heads.is_empty()
            && slots > 0
        {
            return Err(e);
        }
        if draining && !report.missing.is_empty() {
            let moved =
                doubling::reset_missing(&*self.engine, &t, resets, spec.as_ref(), &mut report, now)
                    .await?;
            report
                .rearmed
                .extend(moved.into_iter().map(|r| rearmed(&t, r)));
        }
        Ok(report)
    }

    /// `cancel` under the settings `t`.
    async fn cancel_in(&self, t: &TopicConfig, job: &JobRef) -> Result<Option<JobState>> {
        let (slot, old) = Self::places(t, job)?;
        let state = self.engine.cancel(SlotRef::new(t, slot), &job.id).await?;
        let old_state = doubling::drop_old_copies(&*self.engine, t, &old, &job.id).await?;
        Ok(state.or(old_state))
    }

    /// `get` under the settings `t`.
    pub(super) async fn get_in(&self, t: &TopicConfig, job: &JobRef) -> Result<Option<Job>> {
        let (slot, old) = Self::places(t, job)?;
        let mut found = self
            .engine
            .get(SlotRef::new(t, slot), &[job.id.as_str()])
            .await?
            .pop()
            .flatten();
        if found.is_none() {
            found = doubling::find_old(&*self.engine, t, &old, &job.id)
                .await?
                .map(|(_, s)| s);
        }
        found
            .map(|s| s.record.into_job(t, job.id.clone(), s.state, s.score))
            .transpose()
    }

    /// Creates, replaces or moves one job, as `mode` says, in a topic whose settings the
    /// caller has resolved.
    pub(crate) async fn schedule(
        &self,
        mut t: Arc<TopicConfig>,
        job: &NewJob,
        mode: ScheduleMode,
        now: Millis,
    ) -> Result<Scheduled> {
        // What the job weighs (`limits.max_bytes_per_topic`): reckoned once, for the check
        // and for the count after, and not for a reset, which creates nothing.
        let weight = match mode {
            ScheduleMode::ResetOnly => 0,
            _ => Record::for_job(&t, job).weight(),
        };
        if mode != ScheduleMode::ResetOnly {
            self.room_for_jobs(&t, 1, weight, Some(job)).await?;
        }
        let mut r = self.schedule_once(&t, job, mode, now).await;
        // Settings read before a doubling route wrongly: a write is refused (STALE_LAYOUT)
        // and a reset may miss; either is tried again under the settings as stored now.
        for _ in 0..LAYOUT_TRIES {
            let again = match &r {
                Err(Error::StaleLayout { .. }) => true,
                Ok(s) => s.outcome == ScheduleOutcome::Missing,
                Err(_) => false,
            };
            match again.then_some(()).and(self.newer(&t).await?) {
                Some(newer) => t = newer,
                None => break,
            }
            r = self.schedule_once(&t, job, mode, now).await;
        }
        if mode != ScheduleMode::ResetOnly {
            // Reserved: a job replaced is no new job, but its weight stays counted until the
            // next read (the one it replaced may have been lighter); a refused write adds
            // nothing.
            match &r {
                Ok(s) if s.outcome == ScheduleOutcome::Created => {}
                Ok(_) => self.unreserve(&t, 1, 0),
                Err(_) => self.unreserve(&t, 1, weight),
            }
        }
        r
    }

    /// Moves many jobs' fire times (heartbeats); with `create`, a missing job is created. A
    /// job named twice in one batch is reset twice, in order, as two calls would. The caller has
    /// resolved the topic's settings.
    pub(crate) async fn reset_many(
        &self,
        t: Arc<TopicConfig>,
        resets: &[Reset],
        create: Option<&CreateSpec>,
        now: Millis,
    ) -> Result<ResetReport> {
        // What each job the batch creates weighs (`limits.max_bytes_per_topic`).
        let each = create.map_or(0, |spec| Record::for_create(&t, spec).weight());
        let limit = match create {
            // Each reset may create its job.
            Some(_) => {
                let n = crate::num::usize_u64(resets.len());
                self.room_for_jobs(&t, n, n.saturating_mul(each), None)
                    .await
                    .err()
            }
            None => None,
        };
        let Some(limit) = limit else {
            let n = create.map_or(0, |_| crate::num::usize_u64(resets.len()));
            let report = self
                .reset_many_layouts(t.clone(), resets, create, now)
                .await;
            // What was reserved and not created is taken back.
            let unmade = n.saturating_sub(report.as_ref().map_or(0, |r| r.created));
            self.unreserve(&t, unmade, unmade.saturating_mul(each));
            return report;
        };
        if !matches!(limit, Error::LimitReached { .. }) {
            return Err(limit);
        }
        // Past `limits.max_jobs_per_topic` (or `max_bytes_per_topic`) the heartbeats still
        // move the jobs that exist; the jobs they would have created are refused, and none
        // is written.
        let mut report = self.reset_many_layouts(t, resets, None, now).await?;
        report.refused.append(&mut report.missing);
        if report.reset == 0 {
            return Err(limit);
        }
        Ok(report)
    }

    /// `reset_many`, tried again under newer settings when a doubling moved jobs.
    async fn reset_many_layouts(
        &self,
        mut t: Arc<TopicConfig>,
        resets: &[Reset],
        create: Option<&CreateSpec>,
        now: Millis,
    ) -> Result<ResetReport> {
        for _ in 0..LAYOUT_TRIES {
            match self.reset_many_once(&t, resets, create, now).await {
                Err(Error::StaleLayout { .. }) => {}
                Ok(mut report) if !report.missing.is_empty() => {
                    // Missing jobs may live where settings read since a doubling route.
                    let Some(newer) = self.newer(&t).await? else {
                        return Ok(report);
                    };
                    let missing: HashSet<&str> =
                        report.missing.iter().map(String::as_str).collect();
                    let again: Vec<Reset> = resets
                        .iter()
                        .filter(|r| missing.contains(r.job.id.as_str()))
                        .cloned()
                        .collect();
                    let more = self.reset_many_once(&newer, &again, create, now).await?;
                    report.missing = more.missing;
                    report.reset += more.reset;
                    report.created += more.created;
                    report.rearmed.extend(more.rearmed);
                    report.heads.extend(more.heads);
                    return Ok(report);
                }
                r => return r,
            }
            if let Some(newer) = self.newer(&t).await? {
                t = newer;
            }
        }
        self.reset_many_once(&t, resets, create, now).await
    }

    /// Removes a job in any state; the state it was in, or `None` if there was none.
    pub async fn cancel(&self, topic: &str, job: &JobRef) -> Result<Option<JobState>> {
        let t = self.existing_topic(topic).await?;
        match self.cancel_in(&t, job).await? {
            None => match self.newer(&t).await? {
                Some(newer) => self.cancel_in(&newer, job).await,
                None => Ok(None),
            },
            found => Ok(found),
        }
    }

    /// A job, or `None`.
    pub async fn get(&self, topic: &str, job: &JobRef) -> Result<Option<Job>> {
        let t = self.existing_topic(topic).await?;
        match self.get_in(&t, job).await? {
            None => match self.newer(&t).await? {
                Some(newer) => self.get_in(&newer, job).await,
                None => Ok(None),
            },
            found => Ok(found),
        }
    }
}

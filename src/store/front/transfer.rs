//! Export and import (`crate::transfer`): a slot's jobs read whole in the export's order, and
//! a batch of exported jobs written into the slots they name.

use std::collections::BTreeMap;

use super::Store;
use crate::error::{Error, Result};
use crate::model::{DeadCursor, Job, JobState, ListCursor, NewJob};
use crate::store::engine::SlotRef;
use crate::store::engine::{Imported, Range};
use crate::store::record::Record;
use crate::time::Millis;
use crate::topic::TopicConfig;
use crate::transfer::Line;

/// Jobs read from a slot per call.
const PAGE: usize = super::MAX_PAGE;

/// What a batch of an import wrote.
pub(crate) struct Imports {
    /// Jobs written.
    pub written: u64,
    /// Per slot written to, the earliest fire time among the scheduled jobs of the batch.
    pub heads: Vec<(u32, Millis)>,
}

/// The settings line of a topic: its settings and its keys' own limits, without the digests
/// of what was imported into it (they say where it came from, not what it holds).
pub(crate) fn settings_line(t: &TopicConfig) -> String {
    let mut settings = t.clone();
    settings.imports.clear();
    serde_json::to_string(&Line::Topic { settings }).expect("a line serialises")
}

/// The last line of a topic's export: how many jobs it holds, so a cut export is known.
pub(crate) fn end_line(topic: &str, jobs: u64) -> String {
    serde_json::to_string(&Line::End {
        topic: topic.to_string(),
        jobs,
    })
    .expect("a line serialises")
}

/// The longest `last_error` an imported job may carry, in bytes.
pub(crate) const MAX_IMPORTED_ERROR_BYTES: usize = 64 * 1024;

/// The most fires an imported job may have counted (a counter the store adds to).
const MAX_IMPORTED_FIRES: u32 = i32::MAX.unsigned_abs();

/// Refuses an exported job that does not belong in `t` or that the API would refuse: every
/// field in the range the store keeps exact, so that no record written here reads back as
/// corrupt. The error names the job and the field.
fn check(t: &TopicConfig, slot: u32, job: &Job) -> Result<()> {
    check_fields(t, slot, job).map_err(|e| match e {
        Error::Invalid { field, message } => Error::Invalid {
            message: format!("job {:?}: {message}", job.id),
            field,
        },
        other => other,
    })
}

fn check_fields(t: &TopicConfig, slot: u32, job: &Job) -> Result<()> {
    check_place(t, slot, job)?;
    check_record(t, job)
}

/// Refuses a line of another topic, or in a slot that is not its job's home.
fn check_place(t: &TopicConfig, slot: u32, job: &Job) -> Result<()> {
    if job.topic != t.name {
        return Err(Error::invalid(
            "topic",
            format!(
                "a line of topic {:?} in the import of {:?}",
                job.topic, t.name
            ),
        ));
    }
    if slot >= t.slots {
        return Err(Error::invalid(
            "slot",
            format!(
                "must be below the topic's {} slots, got {slot} (job {:?})",
                t.slots, job.id
            ),
        ));
    }
    // Its home: where its shard key (kept with it since it was written) or its id routes it.
    // Anywhere else, reads, resets and cancels by its id would miss a job that still fires.
    crate::validate::shard_key(job.shard_key.as_deref())?;
    let home = crate::routing::slot_of(job.shard_key.as_deref().unwrap_or(&job.id), t.slots);
    if slot != home {
        return Err(Error::invalid(
            "slot",
            format!(
                "{slot} is not the job's home slot {home} of {} (routed by its {}): written \
                 there, it could not be read, reset or cancelled",
                t.slots,
                if job.shard_key.is_some() {
                    "shard_key"
                } else {
                    "id"
                }
            ),
        ));
    }
    Ok(())
}

/// Refuses a job a `PUT` would refuse, or whose record fields are out of the range the
/// store keeps exact.
fn check_record(t: &TopicConfig, job: &Job) -> Result<()> {
    let new = NewJob {
        id: job.id.clone(),
        job_type: Some(job.job_type.clone()),
        payload: job.payload.clone(),
        fire_at: job.fire_at,
        max_fire_at: job.max_fire_at,
        max_attempts: Some(job.max_attempts),
        shard_key: job.shard_key.clone(),
        repeat: job.repeat.clone(),
        expire: None,
        flow_key: job.flow_key.clone(),
        labels: job.labels.clone(),
        traceparent: None,
    };
    crate::validate::new_job(t.max_payload_bytes, &new)?;
    if let Some(tp) = &job.traceparent
        && crate::otel::parse(tp).is_none()
    {
        return Err(Error::invalid(
            "traceparent",
            format!("job {:?}: not a W3C traceparent", job.id),
        ));
    }
    for (field, at) in [
        ("dead_at", job.dead_at),
        ("pending_fire_at", job.pending_fire_at),
        ("created_at", job.created_at),
        ("updated_at", job.updated_at),
        ("lease_until", job.lease_until),
    ] {
        if let Some(at) = at {
            crate::validate::fire_at(field, at)?;
        }
    }
    if job.attempts > job.max_attempts {
        return Err(Error::invalid(
            "attempts",
            format!(
                "{} runs counted, more than its max_attempts {}",
                job.attempts, job.max_attempts
            ),
        ));
    }
    if job.fires > MAX_IMPORTED_FIRES {
        return Err(Error::invalid(
            "fires",
            format!("at most {MAX_IMPORTED_FIRES}, got {}", job.fires),
        ));
    }
    if let Some(after) = job.expire_after_ms
        && after > crate::num::unsigned(crate::time::MAX_DELAY_MS)
    {
        return Err(Error::invalid(
            "expire_after_ms",
            format!(
                "at most {} (MAX_DELAY_MS), got {after}",
                crate::time::MAX_DELAY_MS
            ),
        ));
    }
    if job.on_expire.is_some() && job.expire_after_ms.is_none() {
        return Err(Error::invalid("on_expire", "goes with expire_after_ms"));
    }
    if let Some(e) = &job.last_error
        && e.len() > MAX_IMPORTED_ERROR_BYTES
    {
        return Err(Error::invalid(
            "last_error",
            format!("at most {MAX_IMPORTED_ERROR_BYTES} bytes, got {}", e.len()),
        ));
    }
    Ok(())
}

impl Store {
    /// A slot's jobs as an export holds them: scheduled, running, then dead, each in score
    /// order (then id), as `GET` shows them.
    pub(crate) async fn export_slot(&self, t: &TopicConfig, slot: u32) -> Result<Vec<Job>> {
        let mut out = Vec::new();
        for state in [JobState::Scheduled, JobState::Running] {
            let mut after: Option<ListCursor> = None;
            loop {
                let page = self
                    .engine
                    .list(
                        SlotRef::new(t, slot),
                        &Range {
                            state,
                            from: 0,
                            to: crate::time::MAX_MILLIS,
                            after: after.as_ref(),
                            limit: PAGE,
                        },
                    )
                    .await?;
                let full = page.len() == PAGE;
                after = page.last().map(|(id, s)| ListCursor {
                    score: s.score,
                    id: id.clone(),
                });
                for (id, s) in page {
                    out.push(s.record.into_job(t, id, s.state, s.score)?);
                }
                if !full {
                    break;
                }
            }
        }
        let mut after: Option<DeadCursor> = None;
        loop {
            let page = self
                .engine
                .dead_page(SlotRef::new(t, slot), after.as_ref(), PAGE)
                .await?;
            let full = page.len() == PAGE;
            after = page.last().map(|e| e.cursor.clone());
            for e in page {
                let (id, at) = (e.cursor.id, e.cursor.dead_at);
                out.push(e.record.into_job(t, id, JobState::Dead, at)?);
            }
            if !full {
                break;
            }
        }
        Ok(out)
    }

    /// Every check [`Store::import_jobs`] makes of a batch, without writing: the lines, and
    /// the room the topic's quotas leave (all of them when the topic is `new`: not made
    /// yet). What an import checks before it makes its topic.
    pub(crate) async fn check_import(
        &self,
        t: &TopicConfig,
        jobs: &[(u32, Job)],
        new: bool,
    ) -> Result<()> {
        let mut bytes = 0u64;
        for (slot, job) in jobs {
            check(t, *slot, job)?;
            bytes = bytes.saturating_add(Record::from_job(t, job).2.weight());
        }
        let n = crate::num::usize_u64(jobs.len());
        if new {
            self.room_in_new(t, n, bytes).await
        } else {
            // A check only: `import_jobs` reserves when it writes.
            self.room_for_jobs(t, n, bytes, None).await?;
            self.unreserve(t, n, bytes);
            Ok(())
        }
    }

    /// Writes a batch of exported jobs of topic `t` into the slots they name, each unless its
    /// slot holds a job of its id already. Every job is checked first: a bad batch changes
    /// nothing. The topic's quotas count what it would add.
    pub(crate) async fn import_jobs(
        &self,
        t: &TopicConfig,
        jobs: &[(u32, Job)],
    ) -> Result<Imports> {
        let mut by_slot: BTreeMap<u32, Vec<Imported>> = BTreeMap::new();
        let mut bytes = 0u64;
        for (slot, job) in jobs {
            check(t, *slot, job)?;
            let (state, score, mut record) = Record::from_job(t, job);
            record.type_key = self.type_key(t, Some(&job.job_type), &job.payload);
            bytes = bytes.saturating_add(record.weight());
            by_slot.entry(*slot).or_default().push(Imported {
                id: job.id.clone(),
                state,
                score,
                record,
            });
        }
        let n = crate::num::usize_u64(jobs.len());
        self.room_for_jobs(t, n, bytes, None).await?;
        let calls = by_slot
            .iter()
            .map(|(slot, items)| self.engine.import(SlotRef::new(t, *slot), items));
        let written = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .sum::<Result<u64>>();
        // Reserved: what was not written is taken back.
        let made = written.as_ref().map_or(0, |w| *w);
        let unmade = n.saturating_sub(made);
        self.unreserve(t, unmade, bytes.saturating_mul(unmade) / n.max(1));
        let written = written?;
        let heads = by_slot
            .iter()
            .filter_map(|(slot, items)| {
                items
                    .iter()
                    .filter(|j| j.state == JobState::Scheduled)
                    .map(|j| j.score)
                    .min()
                    .map(|at| (*slot, at))
            })
            .collect();
        Ok(Imports { written, heads })
    }
}

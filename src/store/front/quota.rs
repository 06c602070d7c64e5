//! A topic's quotas: most jobs (`limits.max_jobs_per_topic`) and most bytes of job records
//! (`limits.max_bytes_per_topic`). A create past either is refused (409 `limit_reached`
//! naming the setting), nothing written. The usage is read from the store at most once a
//! second per topic (a count and a weight per slot), and what this instance creates
//! meanwhile is added to it, so a burst of creates costs no read each; instances creating
//! at once may pass a limit by about a second of their creates.

use std::time::{Duration, Instant};

use super::Store;
use crate::error::{Error, Result};
use crate::model::{JobRef, NewJob};
use crate::store::record::Record;
use crate::topic::TopicConfig;

/// How long a topic's usage read from the store stands.
const FRESH: Duration = Duration::from_secs(1);

/// A topic's usage as read, when, and what was created here since.
#[derive(Debug, Clone, Copy)]
pub(super) struct Count {
    read: Instant,
    jobs: u64,
    /// What its records weigh (`Record::weight` on memory, `MEMORY USAGE` on Redis); 0 when
    /// `limits.max_bytes_per_topic` is off (not read).
    bytes: u64,
}

/// What a create past the jobs limit is answered.
fn too_many(t: &TopicConfig, max: u64, jobs: u64, adding: u64) -> Error {
    Error::LimitReached {
        setting: "limits.max_jobs_per_topic",
        message: format!(
            "topic {:?} holds {jobs} jobs; {adding} more would pass its most, {max}",
            t.name
        ),
    }
}

/// What a create past the bytes limit is answered.
fn too_big(t: &TopicConfig, max: u64, bytes: u64, adding: u64) -> Error {
    Error::LimitReached {
        setting: "limits.max_bytes_per_topic",
        message: format!(
            "topic {:?} holds about {bytes} bytes of jobs; {adding} more would pass its most, {max}",
            t.name
        ),
    }
}

impl Store {
    /// The topic's usage: as read within the last second, or read now.
    async fn usage(&self, t: &TopicConfig) -> Result<Count> {
        let cached = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&t.name)
            .copied();
        if let Some(c) = cached.filter(|c| c.read.elapsed() < FRESH) {
            return Ok(c);
        }
        let calls = (0..t.slots).map(|slot| self.engine.slot_stats(t, slot));
        let jobs = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .map(|s| s.map(|s| s.scheduled + s.running + s.dead))
            .sum::<Result<u64>>()?;
        let bytes = match self.options.max_bytes_per_topic {
            Some(_) => {
                let calls = (0..t.slots).map(|slot| self.engine.slot_bytes(t, slot));
                futures_util::future::join_all(calls)
                    .await
                    .into_iter()
                    .sum::<Result<u64>>()?
            }
            None => 0,
        };
        let count = Count {
            read: Instant::now(),
            jobs,
            bytes,
        };
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(t.name.clone(), count);
        Ok(count)
    }

    /// Counts `n` jobs weighing `bytes` created here since the last read (what a write
    /// answered it created, not what it might have: a batch of heartbeats with `create`
    /// mostly creates nothing).
    pub(crate) fn created(&self, t: &TopicConfig, n: u64, bytes: u64) {
        if let Some(c) = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_mut(&t.name)
        {
            c.jobs = c.jobs.saturating_add(n);
            c.bytes = c.bytes.saturating_add(bytes);
        }
    }

    /// Refuses up to `adding` creates weighing `bytes` in `t` past the topic's quotas.
    /// `job`: the one job a schedule names, which replaces itself rather than adds when it
    /// exists already (past the bytes limit only with a record no heavier than the one it
    /// replaces). The caller counts what it did create ([`Store::created`]).
    pub(crate) async fn room_for_jobs(
        &self,
        t: &TopicConfig,
        adding: u64,
        bytes: u64,
        job: Option<&NewJob>,
    ) -> Result<()> {
        let (max_jobs, max_bytes) = (
            self.options.max_jobs_per_topic,
            self.options.max_bytes_per_topic,
        );
        if max_jobs.is_none() && max_bytes.is_none() {
            return Ok(());
        }
        let used = self.usage(t).await?;
        let refusal = match (max_jobs, max_bytes) {
            (Some(max), _) if used.jobs.saturating_add(adding) > max => {
                Some((too_many(t, max, used.jobs, adding), None))
            }
            (_, Some(max)) if used.bytes.saturating_add(bytes) > max => {
                Some((too_big(t, max, used.bytes, bytes), Some(bytes)))
            }
            _ => None,
        };
        let Some((refused, weight)) = refusal else {
            return Ok(());
        };
        // At a limit, a job that exists already is replaced, not added.
        if let Some(job) = job {
            let r = JobRef::new(job.id.clone()).with_shard_key(job.shard_key.clone());
            if let Some(old) = self.get_in(t, &r).await? {
                let old_weight = Record {
                    last_error: old.last_error,
                    flow_key: old.flow_key,
                    labels: old.labels,
                    traceparent: old.traceparent,
                    ..Record::spec(t, Some(&old.job_type), &old.payload, None)
                }
                .weight();
                if weight.is_none_or(|w| w <= old_weight) {
                    return Ok(());
                }
            }
        }
        Err(refused)
    }
}

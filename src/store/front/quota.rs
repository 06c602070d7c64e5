//! `limits.max_jobs_per_topic`: a create past a topic's most jobs is refused (409
//! `limit_reached`), nothing written. The count is read from the store at most once a
//! second per topic (a count per slot), and what this instance creates meanwhile is added
//! to it, so a burst of creates costs no read each; instances creating at once may pass the
//! limit by about a second of their creates.

use std::time::{Duration, Instant};

use super::Store;
use crate::error::{Error, Result};
use crate::model::{JobRef, NewJob};
use crate::topic::TopicConfig;

/// How long a topic's count read from the store stands.
const FRESH: Duration = Duration::from_secs(1);

/// A topic's count as read, when, and what was created here since.
#[derive(Debug, Clone, Copy)]
pub(super) struct Count {
    read: Instant,
    jobs: u64,
}

/// What a create past the limit is answered.
fn reached(t: &TopicConfig, max: u64, jobs: u64, adding: u64) -> Error {
    Error::LimitReached {
        setting: "limits.max_jobs_per_topic",
        message: format!(
            "topic {:?} holds {jobs} jobs; {adding} more would pass its most, {max}",
            t.name
        ),
    }
}

impl Store {
    /// The topic's job count: as read within the last second, or read now.
    async fn job_count(&self, t: &TopicConfig) -> Result<u64> {
        let cached = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&t.name)
            .copied();
        if let Some(c) = cached.filter(|c| c.read.elapsed() < FRESH) {
            return Ok(c.jobs);
        }
        let calls = (0..t.slots).map(|slot| self.engine.slot_stats(t, slot));
        let jobs = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .map(|s| s.map(|s| s.scheduled + s.running + s.dead))
            .sum::<Result<u64>>()?;
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(
                t.name.clone(),
                Count {
                    read: Instant::now(),
                    jobs,
                },
            );
        Ok(jobs)
    }

    /// Counts `n` jobs created here since the last read (what a write answered it created,
    /// not what it might have: a batch of heartbeats with `create` mostly creates nothing).
    pub(crate) fn created(&self, t: &TopicConfig, n: u64) {
        if let Some(c) = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_mut(&t.name)
        {
            c.jobs = c.jobs.saturating_add(n);
        }
    }

    /// Refuses up to `adding` creates in `t` past `limits.max_jobs_per_topic`. `job`: the
    /// one job a schedule names, which replaces itself rather than adds when it exists
    /// already. The caller counts what it did create ([`Store::created`]).
    pub(crate) async fn room_for_jobs(
        &self,
        t: &TopicConfig,
        adding: u64,
        job: Option<&NewJob>,
    ) -> Result<()> {
        let Some(max) = self.options.max_jobs_per_topic else {
            return Ok(());
        };
        let jobs = self.job_count(t).await?;
        if jobs.saturating_add(adding) > max {
            // At the limit, a job that exists already is replaced, not added.
            if let Some(job) = job {
                let r = JobRef::new(job.id.clone()).with_shard_key(job.shard_key.clone());
                if self.get_in(t, &r).await?.is_some() {
                    return Ok(());
                }
            }
            return Err(reached(t, max, jobs, adding));
        }
        Ok(())
    }
}

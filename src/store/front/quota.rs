//! A topic's quotas: most jobs (`limits.max_jobs_per_topic`) and most bytes of job records
//! (`limits.max_bytes_per_topic`), and its tenant's over all the topics it made
//! (`limits.max_jobs_per_tenant`, `limits.max_bytes_per_tenant`). A create past any is
//! refused (409 `limit_reached` naming the setting), nothing written. A tenant's usage is
//! the sum of its topics', read as theirs are and at most once a second. The usage is read from the store at most once a
//! second per topic (a count and a weight per slot), and what this instance writes
//! meanwhile is added to it when it is let through (a reservation, so writes at once on one
//! instance are each counted), less what it did not create afterwards. A replacement counts
//! its whole new weight until the next read (it may have replaced a lighter job), so a topic
//! cannot grow past its bytes by replacing its jobs with heavier ones. Exact on each read
//! (the memory engine weighs records, Redis answers `MEMORY USAGE`); between reads a topic
//! may look heavier than it is by what was replaced; instances writing at once may pass a
//! limit by about a second of their writes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::Store;
use crate::error::{Error, Result};
use crate::model::{JobRef, NewJob};
use crate::store::engine::SlotRef;
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

/// What a create past the tenant's jobs limit is answered.
fn too_many_of_tenant(tenant: &str, max: u64, jobs: u64, adding: u64) -> Error {
    Error::LimitReached {
        setting: "limits.max_jobs_per_tenant",
        message: format!(
            "tenant {tenant:?}'s topics hold {jobs} jobs; {adding} more would pass its most, {max}"
        ),
    }
}

/// What a create past the tenant's bytes limit is answered.
fn too_big_for_tenant(tenant: &str, max: u64, bytes: u64, adding: u64) -> Error {
    Error::LimitReached {
        setting: "limits.max_bytes_per_tenant",
        message: format!(
            "tenant {tenant:?}'s topics hold about {bytes} bytes of jobs; {adding} more would \
             pass its most, {max}"
        ),
    }
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
        let calls = (0..t.slots).map(|slot| self.engine.slot_stats(SlotRef::new(t, slot)));
        let jobs = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .map(|s| s.map(|s| s.scheduled + s.running + s.dead))
            .sum::<Result<u64>>()?;
        let weighed = self.options.max_bytes_per_topic.is_some()
            || self.options.max_bytes_per_tenant.is_some();
        let bytes = match weighed {
            true => {
                let calls = (0..t.slots).map(|slot| self.engine.slot_bytes(SlotRef::new(t, slot)));
                futures_util::future::join_all(calls)
                    .await
                    .into_iter()
                    .sum::<Result<u64>>()?
            }
            false => 0,
        };
        let count = Count {
            read: Instant::now(),
            jobs,
            bytes,
        };
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Writes at once each read: the first read to land stands for the second, with what
        // the others reserved on it since (a later read put in its place would drop them).
        if let Some(c) = counts.get(&t.name).filter(|c| c.read.elapsed() < FRESH) {
            return Ok(*c);
        }
        counts.insert(t.name.clone(), count);
        Ok(count)
    }

    /// The usage of `tenant`'s topics together: as read within the last second, or read now
    /// (each topic's as [`Store::usage`] reads it).
    async fn tenant_usage(&self, tenant: &str) -> Result<Count> {
        let fresh = |counts: &std::sync::Mutex<HashMap<String, Count>>| {
            counts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(tenant)
                .filter(|c| c.read.elapsed() < FRESH)
                .copied()
        };
        if let Some(c) = fresh(&self.tenant_counts) {
            return Ok(c);
        }
        let topics = self.engine.topics().await?;
        let own = topics
            .iter()
            .filter(|t| t.tenant.as_deref() == Some(tenant))
            .map(|t| self.usage(t));
        let mut count = Count {
            read: Instant::now(),
            jobs: 0,
            bytes: 0,
        };
        for used in futures_util::future::join_all(own).await {
            let used = used?;
            count.jobs = count.jobs.saturating_add(used.jobs);
            count.bytes = count.bytes.saturating_add(used.bytes);
        }
        let mut counts = self
            .tenant_counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = counts.get(tenant).filter(|c| c.read.elapsed() < FRESH) {
            return Ok(*c);
        }
        counts.insert(tenant.to_string(), count);
        Ok(count)
    }

    /// Refuses `adding` jobs weighing `bytes` in `t` past its tenant's quotas; `None` when
    /// they fit (or `t` has no tenant). The refusal and, for one of bytes, what was weighed.
    async fn tenant_refusal(
        &self,
        t: &TopicConfig,
        adding: u64,
        bytes: u64,
    ) -> Result<Option<(Error, Option<u64>)>> {
        let (max_jobs, max_bytes) = (
            self.options.max_jobs_per_tenant,
            self.options.max_bytes_per_tenant,
        );
        let Some(tenant) = t.tenant.as_deref() else {
            return Ok(None);
        };
        if max_jobs.is_none() && max_bytes.is_none() {
            return Ok(None);
        }
        let used = self.tenant_usage(tenant).await?;
        Ok(match (max_jobs, max_bytes) {
            (Some(max), _) if used.jobs.saturating_add(adding) > max => {
                Some((too_many_of_tenant(tenant, max, used.jobs, adding), None))
            }
            (_, Some(max)) if used.bytes.saturating_add(bytes) > max => Some((
                too_big_for_tenant(tenant, max, used.bytes, bytes),
                Some(bytes),
            )),
            _ => None,
        })
    }

    /// Takes back `n` jobs weighing `bytes` of a reservation (`room_for_jobs`) that were not
    /// written: a batch of heartbeats with `create` mostly creates nothing, a write may fail.
    pub(crate) fn unreserve(&self, t: &TopicConfig, n: u64, bytes: u64) {
        self.count(t, |c| {
            c.jobs = c.jobs.saturating_sub(n);
            c.bytes = c.bytes.saturating_sub(bytes);
        });
    }

    /// Counts `n` jobs weighing `bytes` as written here since the last read.
    fn reserve(&self, t: &TopicConfig, n: u64, bytes: u64) {
        self.count(t, |c| {
            c.jobs = c.jobs.saturating_add(n);
            c.bytes = c.bytes.saturating_add(bytes);
        });
    }

    /// Changes the topic's usage as read, if it was, and its tenant's.
    fn count(&self, t: &TopicConfig, change: impl Fn(&mut Count)) {
        if let Some(c) = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_mut(&t.name)
        {
            change(c);
        }
        if let Some(tenant) = &t.tenant
            && let Some(c) = self
                .tenant_counts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get_mut(tenant)
        {
            change(c);
        }
    }

    /// Refuses `adding` jobs weighing `bytes` in `t`, a topic not made yet, past its quotas
    /// and its tenant's.
    pub(crate) async fn room_in_new(&self, t: &TopicConfig, adding: u64, bytes: u64) -> Result<()> {
        match (
            self.options.max_jobs_per_topic,
            self.options.max_bytes_per_topic,
        ) {
            (Some(max), _) if adding > max => Err(too_many(t, max, 0, adding)),
            (_, Some(max)) if bytes > max => Err(too_big(t, max, 0, bytes)),
            _ => match self.tenant_refusal(t, adding, bytes).await? {
                Some((refused, _)) => Err(refused),
                None => Ok(()),
            },
        }
    }

    /// Refuses up to `adding` creates weighing `bytes` in `t` past the topic's quotas, and
    /// reserves them when it lets them through. `job`: the one job a schedule names, which
    /// replaces itself rather than adds when it exists already (past the bytes limit only
    /// with a record no heavier than the one it replaces). The caller takes back what it did
    /// not write ([`Store::unreserve`]).
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
        let of_tenant = t.tenant.is_some()
            && (self.options.max_jobs_per_tenant.is_some()
                || self.options.max_bytes_per_tenant.is_some());
        if max_jobs.is_none() && max_bytes.is_none() && !of_tenant {
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
            _ => self.tenant_refusal(t, adding, bytes).await?,
        };
        let Some((refused, weight)) = refusal else {
            self.reserve(t, adding, bytes);
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
                    // A replacement no heavier: nothing more to count.
                    self.reserve(t, adding, 0);
                    return Ok(());
                }
            }
        }
        Err(refused)
    }
}

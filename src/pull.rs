//! Pull consumers: jobs of a pull topic (`default_type = "pull"`) are not run by slot actors
//! but claimed by consumers anywhere, two phases as in lmstfy or SQS: a claim leases due
//! jobs (a pump under the consumer's lease, so every invariant of the store holds: never
//! early, a reset during a claim applied after it, stale outcomes refused), then the
//! consumer acks, retries, buries or touches each by its run's token. A consumer that dies
//! leaves its jobs to come back when their lease runs out, the attempt counted.
//!
//! A claim that finds nothing may wait (`wait_ms`, a long poll). It sleeps until the
//! earliest due job or lease deadline of the topic, or until a wake notice for the topic
//! (the same notices that wake slot actors: a job scheduled in this process, or a notice
//! from another instance), whichever comes first; it never polls.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::job::Leased;
use crate::store::SharedStore;
use crate::time::{Millis, SharedClock};
use crate::topic::TopicConfig;

/// Most jobs one claim takes.
pub(crate) const MAX_CLAIM: usize = 1_000;
/// Longest wait of a long poll, in ms.
pub(crate) const MAX_WAIT_MS: u64 = 30_000;
/// Longest lease a claim may ask for, in ms (a day).
pub(crate) const MAX_LEASE_MS: u64 = 86_400_000;

/// What a consumer asks of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimRequest {
    /// Most jobs to take, 1 to 1,000.
    pub max: usize,
    /// How long to wait for a due job when there is none, in ms (0 to 30,000).
    pub wait_ms: u64,
    /// The lease, in ms; the topic's visibility timeout when `None`.
    pub lease_ms: Option<u64>,
}

impl Default for ClaimRequest {
    fn default() -> Self {
        ClaimRequest {
            max: 1,
            wait_ms: 0,
            lease_ms: None,
        }
    }
}

impl ClaimRequest {
    /// Refuses a request out of bounds, naming the field.
    pub(crate) fn check(&self) -> Result<()> {
        if !(1..=MAX_CLAIM).contains(&self.max) {
            return Err(Error::invalid(
                "max",
                format!("must be 1 to {MAX_CLAIM}, got {}", self.max),
            ));
        }
        if self.wait_ms > MAX_WAIT_MS {
            return Err(Error::invalid(
                "wait_ms",
                format!("must be 0 to {MAX_WAIT_MS}, got {}", self.wait_ms),
            ));
        }
        if let Some(l) = self.lease_ms
            && !(1..=MAX_LEASE_MS).contains(&l)
        {
            return Err(Error::invalid(
                "lease_ms",
                format!("must be 1 to {MAX_LEASE_MS}, got {l}"),
            ));
        }
        Ok(())
    }
}

/// The claim side of a center: where long polls wait, and where claims start.
#[derive(Default)]
pub(crate) struct Claims {
    /// Per pull topic, what wakes its waiting claims.
    waiters: Mutex<HashMap<String, Arc<Notify>>>,
    /// Per pull topic, the slot the next claim starts at, so claims take from every slot
    /// in turn.
    next_slot: Mutex<HashMap<String, Arc<AtomicU32>>>,
}

impl Claims {
    fn notify_of(&self, topic: &str) -> Arc<Notify> {
        self.waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(topic.to_string())
            .or_default()
            .clone()
    }

    fn start_of(&self, topic: &str) -> Arc<AtomicU32> {
        self.next_slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(topic.to_string())
            .or_default()
            .clone()
    }

    /// Wakes the claims waiting on `topic`: a job there may have come due.
    pub(crate) fn wake(&self, topic: &str) {
        let notify = self
            .waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(topic)
            .cloned();
        if let Some(n) = notify {
            n.notify_waiters();
        }
    }

    /// Leases up to `req.max` due jobs of the pull topic `topic`, taking from every slot in
    /// turn; with `wait_ms`, waits for one to come due.
    pub(crate) async fn claim(
        &self,
        store: &SharedStore,
        clock: &SharedClock,
        topic: &TopicConfig,
        req: ClaimRequest,
    ) -> Result<Vec<Leased>> {
        let lease_ms = req.lease_ms.unwrap_or(topic.visibility_timeout_ms);
        let notify = self.notify_of(&topic.name);
        let deadline = clock.now().saturating_add(req.wait_ms as Millis);
        loop {
            // Armed before the look, so a wake between the look and the wait is not lost.
            let woken = notify.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let now = clock.now();
            let (jobs, next_at) = self.take(store, topic, now, req.max, lease_ms).await?;
            if !jobs.is_empty() || now >= deadline {
                return Ok(jobs);
            }
            let until = next_at.map_or(deadline, |at| at.min(deadline));
            let sleep = Duration::from_millis(until.saturating_sub(now).max(1) as u64);
            tokio::select! {
                _ = &mut woken => {}
                _ = tokio::time::sleep(sleep) => {}
            }
        }
    }

    /// One pass over the topic's slots, from the one after the last claim's start.
    async fn take(
        &self,
        store: &SharedStore,
        topic: &TopicConfig,
        now: Millis,
        max: usize,
        lease_ms: u64,
    ) -> Result<(Vec<Leased>, Option<Millis>)> {
        let first = self.start_of(&topic.name).fetch_add(1, Ordering::Relaxed);
        let mut jobs = Vec::new();
        let mut next_at: Option<Millis> = None;
        for i in 0..topic.slots {
            let slot = (first.wrapping_add(i)) % topic.slots;
            let want = max - jobs.len();
            if want == 0 {
                break;
            }
            let p = store.claim(&topic.name, slot, now, want, lease_ms).await?;
            jobs.extend(p.jobs);
            if let Some(at) = p.next_at {
                next_at = Some(next_at.map_or(at, |n| n.min(at)));
            }
        }
        Ok((jobs, next_at))
    }
}

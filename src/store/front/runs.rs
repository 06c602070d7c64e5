//! The store's runs across a topic's slots: consumers' outcomes settled and their leases
//! touched by job, and the pieces one slot's door (`door.rs`) is made of: a pump of one
//! slot, a run as handed out, the second settle of recurring jobs.

use std::collections::{BTreeMap, HashMap};

use crate::error::Result;
use crate::model::{ClaimOutcome, Finished, JobRef, JobState, Leased, Outcome, Pumped, RunOutcome};
use crate::store::engine::SlotRef;
use crate::store::engine::{ClaimSettlement, Engine, Handed, PumpArgs};
use crate::time::Millis;
use crate::topic::TopicConfig;

use super::Store;
use super::handouts::Handouts;

impl Store {
    /// Applies consumers' outcomes of claimed jobs, each naming its run by job and token:
    /// `settle` of the runs whose token is live (with their `job.done`, `job.retry` or
    /// `job.dead` event), `Finished::Stale` for the others, which change nothing. Answers
    /// in order.
    pub(crate) async fn settle_claims(
        &self,
        t: &TopicConfig,
        claims: &[ClaimOutcome],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        let mut places = Vec::with_capacity(claims.len());
        for c in claims {
            places.push(Self::places(t, &c.job)?);
        }
        let mut done = vec![Finished::Stale; claims.len()];
        // Round 0 settles each claim in its home slot; while the topic drains, round k
        // settles what is still stale in its k-th old slot (a job claimed from an old copy).
        for round in 0.. {
            let mut by_slot: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
            for (i, (home, old)) in places.iter().enumerate() {
                let slot = if round == 0 {
                    Some(*home)
                } else {
                    old.get(round - 1).copied()
                };
                if let Some(slot) = slot.filter(|_| done[i] == Finished::Stale) {
                    by_slot.entry(slot).or_default().push(i);
                }
            }
            if by_slot.is_empty() {
                break;
            }
            let slots = by_slot.iter().map(|(&slot, indexes)| {
                let handouts = &self.handouts;
                settle_slot_claims(&*self.engine, handouts, t, slot, claims, indexes, now)
            });
            for (results, indexes) in futures_util::future::join_all(slots)
                .await
                .into_iter()
                .zip(by_slot.values())
            {
                for (f, &i) in results?.into_iter().zip(indexes) {
                    done[i] = f;
                }
            }
        }
        Ok(done)
    }

    /// Moves a claimed run's lease deadline to `until`; false when the token is stale.
    pub(crate) async fn touch(
        &self,
        t: &TopicConfig,
        job: &JobRef,
        token: u64,
        until: Millis,
    ) -> Result<bool> {
        let (slot, old) = Self::places(t, job)?;
        for slot in std::iter::once(slot).chain(old) {
            if self
                .engine
                .touch(SlotRef::new(t, slot), &job.id, token, until)
                .await?
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// A flow key's limits under the topic settings `t` and its counters; `None` when the
    /// key has no limits.
    pub async fn flow_state(
        &self,
        t: &TopicConfig,
        key: &str,
        now: Millis,
    ) -> Result<Option<(crate::flow::FlowLimits, crate::store::FlowState)>> {
        let Some(limits) = t.flow_limits(key) else {
            return Ok(None);
        };
        let state = self.engine.flow_state(t, key, &limits, now).await?;
        Ok(Some((limits, state)))
    }
}

/// A run the engine handed out, as the runtime and consumers hold it.
pub(super) fn leased(t: &TopicConfig, slot: u32, h: Handed, lease_until: Millis) -> Result<Leased> {
    let job = h.record.into_job(t, h.id, JobState::Running, lease_until)?;
    Ok(Leased {
        job,
        slot,
        token: h.token,
        lease_until,
        handed_record: h.text,
    })
}

/// A pump of one slot (its lease `args.lease_ms`): the slot actors' pumps and consumers'
/// claims.
pub(super) async fn pump_slot(
    engine: &dyn Engine,
    t: &TopicConfig,
    slot: u32,
    args: &PumpArgs<'_>,
) -> Result<Pumped> {
    Store::check_slot(t, slot)?;
    let asked = PumpArgs {
        lead: args.lead.max(0),
        limit: args.limit.max(1),
        ..*args
    };
    let p = engine.pump(SlotRef::new(t, slot), &asked).await?;
    let (now, lease_ms) = (args.now, args.lease_ms);
    let lease_until =
        now.saturating_add(crate::num::millis(lease_ms).min(crate::time::MAX_DELAY_MS));
    let jobs = p
        .handed
        .into_iter()
        .map(|h| leased(t, slot, h, lease_until))
        .collect::<Result<_>>()?;
    Ok(Pumped {
        jobs,
        expired: p.expired,
        next_at: p.next_at,
        set_aside: p.set_aside,
    })
}

/// Consumers' outcomes of one slot's claimed jobs (`claims[i]` for each of `indexes`), in
/// one settle that reads each run's details from its record as it settles it. Only a retry
/// that leaves its delay to the topic's backoff is read first, for its attempt count; a
/// token that is not the live run's there is stale at once (`settle_claimed` checks every
/// token again, atomically with the change). One result per index, in order.
async fn settle_slot_claims(
    engine: &dyn Engine,
    handouts: &Handouts,
    t: &TopicConfig,
    slot: u32,
    claims: &[ClaimOutcome],
    indexes: &[usize],
    now: Millis,
) -> Result<Vec<Finished>> {
    let backoff: Vec<&str> = indexes
        .iter()
        .map(|&i| &claims[i])
        .filter(|c| matches!(c.outcome, Outcome::Retry { delay: None, .. }))
        .map(|c| c.job.id.as_str())
        .collect();
    let mut attempts: HashMap<&str, Option<u32>> = HashMap::new();
    if !backoff.is_empty() {
        for (id, stored) in backoff
            .iter()
            .zip(engine.get(SlotRef::new(t, slot), &backoff).await?)
        {
            attempts.insert(id, stored.map(|s| s.record.attempts.unwrap_or(0)));
        }
    }
    let mut batch = Vec::new();
    let mut live = Vec::new();
    for (k, &i) in indexes.iter().enumerate() {
        let c = &claims[i];
        let attempts = match (&c.outcome, attempts.get(c.job.id.as_str())) {
            (Outcome::Retry { delay: None, .. }, Some(Some(a))) => *a,
            (Outcome::Retry { delay: None, .. }, _) => continue, // no such job: stale
            _ => 0,
        };
        // A consumer's run has no fire time here: a repeat (refused over HTTP) is after now.
        let outcome = c.outcome.clone().into_run(
            now,
            now,
            || t.backoff.delay_ms(attempts, &mut rand::rng()),
            |delay| now.saturating_add(delay),
        );
        // A run claimed here settles with its record as handed out (settle.lua's short form).
        let handed = handouts.take(&t.name, slot, &c.job.id, c.token);
        batch.push(ClaimSettlement {
            id: &c.job.id,
            token: c.token,
            outcome,
            handed,
        });
        live.push(k);
    }
    let mut done = vec![Finished::Stale; indexes.len()];
    if batch.is_empty() {
        return Ok(done);
    }
    let results = engine
        .settle_claimed(SlotRef::new(t, slot), &batch, now)
        .await?;
    for (k, f) in live.iter().zip(&results) {
        done[*k] = *f;
    }
    let ended: Vec<(usize, &str, &RunOutcome)> = recurring(&results)
        .into_iter()
        .map(|j| (live[j], batch[j].id, &batch[j].outcome))
        .collect();
    let tokens: HashMap<usize, (&str, u64)> = live
        .iter()
        .zip(&batch)
        .map(|(&k, b)| (k, (b.id, b.token)))
        .collect();
    settle_recurring(engine, t, slot, &mut done, &ended, now, |again| {
        let runs: Vec<ClaimSettlement> = again
            .into_iter()
            .map(|(k, outcome)| ClaimSettlement {
                id: tokens[&k].0,
                token: tokens[&k].1,
                outcome,
                handed: None,
            })
            .collect();
        async move {
            engine
                .settle_claimed(SlotRef::new(t, slot), &runs, now)
                .await
        }
    })
    .await?;
    Ok(done)
}

/// The indexes of the runs an engine answered `Finished::Recur` for.
pub(super) fn recurring(results: &[Finished]) -> Vec<usize> {
    results
        .iter()
        .enumerate()
        .filter(|(_, f)| **f == Finished::Recur)
        .map(|(k, _)| k)
        .collect()
}

/// The second settle of the runs of recurring jobs an engine answered `Finished::Recur` for
/// (`ended`: each one's place in `done`, id and outcome): each repeats at its next instant
/// (`next_instants`), settled by `again` (the runtime's form or a consumer's) in one more
/// call; a run whose job is gone since is stale. The one place both settles write it.
pub(super) async fn settle_recurring<Fut>(
    engine: &dyn Engine,
    t: &TopicConfig,
    slot: u32,
    done: &mut [Finished],
    ended: &[(usize, &str, &RunOutcome)],
    now: Millis,
    again: impl FnOnce(Vec<(usize, RunOutcome)>) -> Fut,
) -> Result<()>
where
    Fut: std::future::Future<Output = Result<Vec<Finished>>>,
{
    if ended.is_empty() {
        return Ok(());
    }
    let runs: Vec<(&str, &RunOutcome)> = ended.iter().map(|(_, id, o)| (*id, *o)).collect();
    let next = next_instants(engine, t, slot, &runs, now).await?;
    let mut repeats = Vec::new();
    for (&(k, _, _), outcome) in ended.iter().zip(next) {
        done[k] = Finished::Stale;
        if let Some(outcome) = outcome {
            repeats.push((k, outcome));
        }
    }
    let places: Vec<usize> = repeats.iter().map(|(k, _)| *k).collect();
    for (k, f) in places.into_iter().zip(again(repeats).await?) {
        done[k] = f;
    }
    Ok(())
}

/// For runs of recurring jobs that ended (`(id, outcome)`, answered `Finished::Recur`): the
/// repeat at each one's next instant, from its schedule and this run's fire time as stored,
/// carrying the error of a run that failed for good; `None` for a job that is gone since
/// (its run is stale). Settling these is the fire's outcome and the next instant in one
/// atomic step: a reset or a cancel that came in between wins, as the token check sees it.
async fn next_instants(
    engine: &dyn Engine,
    t: &TopicConfig,
    slot: u32,
    runs: &[(&str, &RunOutcome)],
    now: Millis,
) -> Result<Vec<Option<RunOutcome>>> {
    let ids: Vec<&str> = runs.iter().map(|(id, _)| *id).collect();
    let stored = engine.get(SlotRef::new(t, slot), &ids).await?;
    Ok(runs
        .iter()
        .zip(stored)
        .map(|((_, outcome), stored)| {
            let stored = stored?;
            let schedule = stored.record.schedule.as_ref()?;
            let fire_at = stored.record.run_fire_at.unwrap_or(now);
            let error = match outcome {
                RunOutcome::Retry { error, .. } | RunOutcome::Dead { error } => Some(error.clone()),
                _ => None,
            };
            // This fire's number in the series, counted since the job was written or reset.
            let fired = stored.record.fires.unwrap_or(0).saturating_add(1);
            // A schedule with no instant the store can hold (past the year 5000) parks the
            // job at the latest one: it never fires again, and stays readable and cancellable.
            Some(
                match schedule.after_fire(fired, fire_at, now, rand::random()) {
                    Some(at) => RunOutcome::Repeat { at, error },
                    None => RunOutcome::End { error },
                },
            )
        })
        .collect())
}

//! The store's runs: pumps and claims hand jobs out under a lease, settles apply their
//! outcomes, touches extend their leases.

use std::collections::{BTreeMap, HashMap};

use crate::error::{Error, Result};
use crate::model::{
    ClaimOutcome, Finished, JobRef, JobState, Leased, Outcome, Pumped, RunOutcome, Settlement,
};
use crate::store::engine::{ClaimSettlement, Engine, Handed};
use crate::store::rate::Grant;
use crate::time::Millis;
use crate::topic::TopicConfig;

use super::Store;
use super::handouts::Handouts;

impl Store {
    /// Hands out up to `limit` of a slot's due jobs (fire time at or before `now`) with a
    /// lease, and takes back runs whose lease expired.
    pub(crate) async fn pump(
        &self,
        topic: &str,
        slot: u32,
        now: Millis,
        limit: usize,
    ) -> Result<Pumped> {
        let t = self.existing_topic(topic).await?;
        let lease_ms = t.visibility_timeout_ms;
        let aside = crate::flow::SetAside::default();
        pump_slot(&*self.engine, &t, slot, now, 0, limit, lease_ms, 0, &aside).await
    }

    /// `pump` by the slot's owner: refused with `Error::Fenced`, changing nothing, unless
    /// `fence` is the slot's current owner fence (see [`Store::own`]), so an instance that
    /// lost a slot (paused past its lease, say) never pumps it again. It also hands out jobs
    /// due within `lead` ms after `now`, which the caller holds until their fire time (the
    /// slot actor's lead, `runtime.fire_lead_ms` or longer after slow pumps, plus its
    /// `runtime.batch_window_ms`); `next_at` is
    /// then when to pump again (the next due job's fire time less `lead`, or a lease
    /// deadline).
    pub(crate) async fn pump_fenced(
        &self,
        topic: &str,
        slot: u32,
        fence: u64,
        now: Millis,
        lead: Millis,
        limit: usize,
    ) -> Result<Pumped> {
        let aside = crate::flow::SetAside::default();
        self.pump_setting_aside(topic, slot, fence, now, lead, limit, &aside)
            .await
    }

    /// `pump_fenced` that may move the due runs of the keys in `aside` to their instants
    /// rather than lease them (`flow::SetAside`): the slot actor's pump while a key's share
    /// of its waiting room is full. `Pumped::set_aside` counts them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn pump_setting_aside(
        &self,
        topic: &str,
        slot: u32,
        fence: u64,
        now: Millis,
        lead: Millis,
        limit: usize,
        aside: &crate::flow::SetAside,
    ) -> Result<Pumped> {
        let t = self.existing_topic(topic).await?;
        let lease_ms = t.visibility_timeout_ms;
        // Fence 0 is "no ownership": an owner's fence is never 0.
        let fence = fence.max(1);
        pump_slot(
            &*self.engine,
            &t,
            slot,
            now,
            lead,
            limit,
            lease_ms,
            fence,
            aside,
        )
        .await
    }

    /// For the slot's owner after a pump whose answer it never got: the runs handed out
    /// with a token above `above` (the highest it saw), so it runs them now rather than when
    /// their leases end. Refused with `Error::Fenced` unless `fence` is the slot's.
    pub(crate) async fn adopt(
        &self,
        topic: &str,
        slot: u32,
        fence: u64,
        above: u64,
    ) -> Result<Vec<Leased>> {
        let t = self.existing_topic(topic).await?;
        Self::check_slot(&t, slot)?;
        self.engine
            .adopt(&t, slot, fence.max(1), above)
            .await?
            .into_iter()
            .map(|(h, lease_until)| leased(&t, slot, h, lease_until))
            .collect()
    }

    /// `pump` with a lease of `lease_ms` in place of the topic's visibility timeout: a
    /// consumer's claim.
    pub(crate) async fn claim(
        &self,
        topic: &str,
        slot: u32,
        now: Millis,
        limit: usize,
        lease_ms: u64,
    ) -> Result<Pumped> {
        let t = self.existing_topic(topic).await?;
        let aside = crate::flow::SetAside::default();
        let pumped = pump_slot(&*self.engine, &t, slot, now, 0, limit, lease_ms, 0, &aside).await?;
        self.handouts.keep(topic, &pumped.jobs, now);
        Ok(pumped)
    }

    /// Applies consumers' outcomes of claimed jobs, each naming its run by job and token:
    /// `settle` of the runs whose token is live (with their `job.done`, `job.retry` or
    /// `job.dead` event), `Finished::Stale` for the others, which change nothing. Answers
    /// in order.
    pub(crate) async fn settle_claims(
        &self,
        topic: &str,
        claims: &[ClaimOutcome],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        let t = self.existing_topic(topic).await?;
        let mut places = Vec::with_capacity(claims.len());
        for c in claims {
            places.push(Self::places(&t, &c.job)?);
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
                settle_slot_claims(&*self.engine, handouts, &t, slot, claims, indexes, now)
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
        topic: &str,
        job: &JobRef,
        token: u64,
        until: Millis,
    ) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        let (slot, old) = Self::places(&t, job)?;
        for slot in std::iter::once(slot).chain(old) {
            if self.engine.touch(&t, slot, &job.id, token, until).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Applies the outcomes of runs of one slot and appends their events (see
    /// [`crate::events::Event::of_settled`]): a run's outcome and its events are one atomic step, so no job
    /// is acknowledged whose events were not stored, and the whole batch is one script call
    /// (Redis) or one lock and one journal write (memory). Tokens are checked run by run: a
    /// run whose lease was taken over gets `Finished::Stale`, and changes nothing. Answers
    /// what happened to each run, in order.
    pub(crate) async fn settle(
        &self,
        topic: &str,
        slot: u32,
        batch: &[Settlement],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let t = self.existing_topic(topic).await?;
        Self::check_slot(&t, slot)?;
        let mut done = self.engine.settle(&t, slot, batch, now).await?;
        if done.len() != batch.len() {
            return Err(Error::Corrupt(format!(
                "settle answered {} results for {} runs",
                done.len(),
                batch.len()
            )));
        }
        let ended: Vec<(usize, &str, &RunOutcome)> = recurring(&done)
            .into_iter()
            .map(|k| (k, batch[k].run.job.id.as_str(), &batch[k].outcome))
            .collect();
        let engine = &*self.engine;
        settle_recurring(engine, &t, slot, &mut done, &ended, now, |again| {
            let runs: Vec<Settlement> = again
                .into_iter()
                .map(|(k, outcome)| Settlement {
                    outcome,
                    ..batch[k].clone()
                })
                .collect();
            let t = &t;
            async move { engine.settle(t, slot, &runs, now).await }
        })
        .await?;
        Ok(done)
    }

    /// Applies one run's outcome, with no events of its handler's (`settle` of one).
    pub(crate) async fn finish(
        &self,
        topic: &str,
        run: &Leased,
        outcome: RunOutcome,
        now: Millis,
    ) -> Result<Finished> {
        let batch = [Settlement::new(run.clone(), outcome, now)];
        let done = self.settle(topic, run.slot, &batch, now).await?;
        done.first()
            .copied()
            .ok_or_else(|| crate::error::Error::Corrupt("settle answered no result".into()))
    }

    /// Takes up to `want` fires of `topic` from its rate limit (`max_fires_per_s`), shared
    /// by every instance: all of them when the topic has no limit, with no call to the
    /// store. A pump or claim asks for what it may hand out and gives back with
    /// [`Store::give_back_fires`] what it did not.
    pub(crate) async fn take_fires(&self, topic: &str, want: u32, now: Millis) -> Result<Grant> {
        let t = self.existing_topic(topic).await?;
        match t.max_fires_per_s {
            None => Ok(Grant::all(want)),
            Some(rate) => self.engine.take_fires(&t, rate, want, now).await,
        }
    }

    /// Gives back `n` fires taken with [`Store::take_fires`] and not used.
    pub(crate) async fn give_back_fires(&self, topic: &str, n: u32, now: Millis) -> Result<()> {
        let t = self.existing_topic(topic).await?;
        match t.max_fires_per_s {
            Some(rate) if n > 0 => self.engine.give_back_fires(&t, rate, n, now).await,
            _ => Ok(()),
        }
    }

    /// Grants room on a flow key to the first of `ask`'s runs that fit its limits (`topic`'s
    /// settings as the asking slot holds them), over every instance on the store.
    pub(crate) async fn flow_take(
        &self,
        topic: &TopicConfig,
        limits: &crate::flow::FlowLimits,
        ask: &crate::store::FlowAsk<'_>,
        now: Millis,
    ) -> Result<crate::store::FlowGrant> {
        self.engine.flow_take(topic, limits, ask, now).await
    }

    /// Ends the room on flow key `key` of runs (`id:token`) that held it.
    pub(crate) async fn flow_release(
        &self,
        topic: &TopicConfig,
        key: &str,
        runs: &[String],
    ) -> Result<()> {
        self.engine.flow_release(topic, key, runs).await
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

    /// Extends a live run's lease to `until`; false when the run is stale.
    pub(crate) async fn extend(&self, topic: &str, run: &Leased, until: Millis) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        Self::check_slot(&t, run.slot)?;
        self.engine
            .touch(&t, run.slot, &run.job.id, run.token, until)
            .await
    }
}

/// A pump of one slot with a lease of `lease_ms`: the slot actors' pumps and consumers'
/// claims.
/// A run the engine handed out, as the runtime and consumers hold it.
fn leased(t: &TopicConfig, slot: u32, h: Handed, lease_until: Millis) -> Result<Leased> {
    let job = h.record.into_job(t, h.id, JobState::Running, lease_until)?;
    Ok(Leased {
        job,
        slot,
        token: h.token,
        lease_until,
        handed_record: h.text,
    })
}

#[allow(clippy::too_many_arguments)]
async fn pump_slot(
    engine: &dyn Engine,
    t: &TopicConfig,
    slot: u32,
    now: Millis,
    lead: Millis,
    limit: usize,
    lease_ms: u64,
    fence: u64,
    aside: &crate::flow::SetAside,
) -> Result<Pumped> {
    Store::check_slot(t, slot)?;
    let p = engine
        .pump(
            t,
            slot,
            now,
            lead.max(0),
            limit.max(1),
            lease_ms,
            fence,
            aside,
        )
        .await?;
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
        for (id, stored) in backoff.iter().zip(engine.get(t, slot, &backoff).await?) {
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
    let results = engine.settle_claimed(t, slot, &batch, now).await?;
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
        async move { engine.settle_claimed(t, slot, &runs, now).await }
    })
    .await?;
    Ok(done)
}

/// The indexes of the runs an engine answered `Finished::Recur` for.
fn recurring(results: &[Finished]) -> Vec<usize> {
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
async fn settle_recurring<Fut>(
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
    let stored = engine.get(t, slot, &ids).await?;
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

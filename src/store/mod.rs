//! The store: one trait, and its engines. Every method that changes a job is atomic (one Lua
//! script in Redis), and takes `now` as an argument so callers and tests choose the time.

mod doubling;
mod engine;
mod event_id;
mod front;
mod keys;
pub(crate) mod memory;
mod record;
mod redis;
mod scripts;
mod topic_policy;

use std::sync::Arc;

use async_trait::async_trait;

use tokio::sync::mpsc;

use crate::error::Result;
use crate::events::{Event, EventPage};
use crate::model::{
    ClaimOutcome, CreateSpec, DeadPage, Finished, Job, JobRef, JobState, Leased, NewJob, Pumped,
    Reset, ResetReport, RunOutcome, ScheduleMode, Scheduled, Settlement, TopicStats,
};
use crate::time::{Millis, SharedClock};
use crate::topic::TopicConfig;

pub use self::front::StoreFront;
pub use self::memory::{JournalLen, MemoryEngine, MemoryStore};
pub use self::redis::{RedisEngine, RedisStore, SentinelConnection, open as open_redis};
pub use self::topic_policy::StoreOptions;

/// Largest page of dead letters or events one call returns.
pub const MAX_PAGE: usize = 1_000;

/// A store of jobs. `Arc<dyn Store>` is what the runtime and the HTTP layer hold.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The engine's name, as in the `store` setting (`redis`, `memory`).
    fn engine(&self) -> &'static str;

    /// Succeeds when the store answers.
    async fn ping(&self) -> Result<()>;

    /// The clock that decides every comparison of times for this store's jobs (DESIGN.md,
    /// invariant 3): Redis' own clock, or the memory engine's steady clock. The runtime
    /// reads `now` from it unless a test gives it another.
    fn clock(&self) -> SharedClock;

    /// What an operator should know of the store's state, for `/health` (a change refused
    /// for a full disk, eviction allowed by the settings); empty when all is well.
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether accepted changes survive a restart of this process, in words for the logs.
    fn durability(&self) -> &'static str {
        "durable (Redis)"
    }

    /// Creates or updates a topic. A topic's slot count may only double once it exists (no
    /// job moves; see `TopicConfig::draining_from`).
    async fn put_topic(&self, config: TopicConfig) -> Result<Arc<TopicConfig>>;

    /// A topic's settings; a topic used but never configured is created with the defaults
    /// unless auto-creation is off.
    async fn topic(&self, name: &str) -> Result<Arc<TopicConfig>>;

    /// A topic's settings read from the store past any cache, for an instance told that
    /// another changed them (a doubling). Never creates one.
    async fn reload_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>>;

    /// A topic's settings when it exists. Never creates one: reads, cancels and resets go
    /// through here, so naming an unknown topic leaves no trace.
    async fn find_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>>;

    /// The settings a topic of this name would be created with (`UnknownTopic` when
    /// auto-creation is off), for checking a job before its topic exists.
    fn defaults_for(&self, name: &str) -> Result<TopicConfig>;

    /// A topic's settings, or `TopicNotFound`.
    async fn existing_topic(&self, name: &str) -> Result<Arc<TopicConfig>> {
        self.find_topic(name)
            .await?
            .ok_or_else(|| crate::error::Error::TopicNotFound(name.to_string()))
    }

    /// For a topic draining from a doubling: looks for old copies in the slots it had
    /// before, and marks it drained when none is left. Answers the slot count it still
    /// drains from (`None`: drained, or never doubled).
    async fn sweep(&self, topic: &str) -> Result<Option<u32>>;

    /// Every known topic, by name.
    async fn topics(&self) -> Result<Vec<Arc<TopicConfig>>>;

    /// Creates, replaces or moves one job, as `mode` says.
    async fn schedule(
        &self,
        topic: &str,
        job: NewJob,
        mode: ScheduleMode,
        now: Millis,
    ) -> Result<Scheduled>;

    /// Moves many jobs' fire times (heartbeats); with `create`, a missing job is created. A
    /// job named twice in one batch is reset twice, in order, as two calls would.
    async fn reset_many(
        &self,
        topic: &str,
        resets: &[Reset],
        create: Option<&CreateSpec>,
        now: Millis,
    ) -> Result<ResetReport>;

    /// Removes a job in any state; the state it was in, or `None` if there was none.
    async fn cancel(&self, topic: &str, job: &JobRef) -> Result<Option<JobState>>;

    /// A job, or `None`.
    async fn get(&self, topic: &str, job: &JobRef) -> Result<Option<Job>>;

    /// Hands out up to `limit` of a slot's due jobs (fire time at or before `now`) with a
    /// lease, and takes back runs whose lease expired.
    async fn pump(&self, topic: &str, slot: u32, now: Millis, limit: usize) -> Result<Pumped>;

    /// `pump` by the slot's owner: refused with `Error::Fenced`, changing nothing, unless
    /// `fence` is the slot's current owner fence (see [`Store::own`]), so an instance that
    /// lost a slot (paused past its lease, say) never pumps it again.
    async fn pump_fenced(
        &self,
        topic: &str,
        slot: u32,
        fence: u64,
        now: Millis,
        limit: usize,
    ) -> Result<Pumped>;

    /// For the slot's owner after a pump whose answer it never got: the runs handed out
    /// with a token above `above` (the highest it saw), so it runs them now rather than when
    /// their leases end. Refused with `Error::Fenced` unless `fence` is the slot's.
    async fn adopt(&self, topic: &str, slot: u32, fence: u64, above: u64) -> Result<Vec<Leased>>;

    /// Heartbeat of `instance` in the registry of instances sharing the store, valid for
    /// `ttl_ms` (0: the instance leaves); answers the live instances, sorted. An engine that
    /// is never shared answers this one alone.
    async fn register(&self, instance: &str, now: Millis, ttl_ms: u64) -> Result<Vec<String>>;

    /// Takes or renews `instance`'s owner lease of a slot for `ttl_ms`. A new owner gets a
    /// fence above every earlier one; an owner renewing keeps its own.
    async fn own(
        &self,
        topic: &str,
        slot: u32,
        instance: &str,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Ownership>;

    /// Gives up `instance`'s owner lease of a slot (a handoff); false when it held none.
    async fn disown(&self, topic: &str, slot: u32, instance: &str) -> Result<bool>;

    /// `pump` with a lease of `lease_ms` in place of the topic's visibility timeout: a
    /// consumer's claim.
    async fn claim(
        &self,
        topic: &str,
        slot: u32,
        now: Millis,
        limit: usize,
        lease_ms: u64,
    ) -> Result<Pumped>;

    /// Applies consumers' outcomes of claimed jobs, each naming its run by job and token:
    /// `settle` of the runs whose token is live (with their `job.done`, `job.retry` or
    /// `job.dead` event), `Finished::Stale` for the others, which change nothing. Answers
    /// in order.
    async fn settle_claims(
        &self,
        topic: &str,
        claims: &[ClaimOutcome],
        now: Millis,
    ) -> Result<Vec<Finished>>;

    /// Moves a claimed run's lease deadline to `until`; false when the token is stale.
    async fn touch(&self, topic: &str, job: &JobRef, token: u64, until: Millis) -> Result<bool>;

    /// Applies the outcomes of runs of one slot and appends their events (see
    /// [`Event::of_settled`]): a run's outcome and its events are one atomic step, so no job
    /// is acknowledged whose events were not stored, and the whole batch is one script call
    /// (Redis) or one lock and one journal write (memory). Tokens are checked run by run: a
    /// run whose lease was taken over gets `Finished::Stale`, and changes nothing. Answers
    /// what happened to each run, in order.
    async fn settle(
        &self,
        topic: &str,
        slot: u32,
        batch: &[Settlement],
        now: Millis,
    ) -> Result<Vec<Finished>>;

    /// Applies one run's outcome, with no events of its handler's (`settle` of one).
    async fn finish(
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

    /// Extends a live run's lease to `until`; false when the run is stale.
    async fn extend(&self, topic: &str, run: &Leased, until: Millis) -> Result<bool>;

    /// Dead letters oldest first, after the cursor `after` (a previous page's `next`).
    async fn dead_list(&self, topic: &str, after: Option<&str>, limit: usize) -> Result<DeadPage>;

    /// Schedules a dead job again, due `now`, attempts starting again; false if none.
    async fn dead_requeue(&self, topic: &str, job: &JobRef, now: Millis) -> Result<bool>;

    /// Drops a dead letter; false if there is no such dead job.
    async fn dead_delete(&self, topic: &str, job: &JobRef) -> Result<bool>;

    /// Scheduled, running and dead counts per slot and in total, and the next fire time.
    async fn stats(&self, topic: &str) -> Result<TopicStats>;

    /// Appends events that belong to no run's outcome (a re-arm, the application's own) to
    /// the topic's stream, which keeps about `StoreOptions::events_max_len` entries.
    async fn append_events(&self, topic: &str, events: &[Event]) -> Result<()>;

    /// Events after the position `after` (exclusive; from the oldest when `None`).
    async fn read_events(
        &self,
        topic: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<EventPage>;

    /// Tells other instances sharing this store that a slot has a job due at `notice.at`.
    /// In-process slots are woken by the runtime directly; an engine that is never shared
    /// does nothing here.
    async fn publish_wake(&self, _notice: &WakeNotice) -> Result<()> {
        Ok(())
    }

    /// Tells the owner of `notice.slot`, wherever it runs, that the slot has a job due at
    /// `notice.at`: on a Redis Cluster a sharded channel of the slot's own (only its owner
    /// listens); elsewhere as `publish_wake`.
    async fn publish_slot_wake(&self, notice: &WakeNotice) -> Result<()> {
        self.publish_wake(notice).await
    }

    /// Starts (or, with `watch` false, stops) hearing the slot notices of a slot this
    /// instance owns (`publish_slot_wake`). Only a Redis Cluster needs it: elsewhere every
    /// instance hears every notice.
    async fn watch_slot(&self, _topic: &str, _slot: u32, _watch: bool) -> Result<()> {
        Ok(())
    }

    /// Forwards other instances' wake notices to `tx` until `tx` closes: those of
    /// `publish_wake`, and on a Redis Cluster those of the slots it watches. Engines that
    /// are not shared return at once.
    async fn listen_wakes(&self, _tx: mpsc::UnboundedSender<WakeNotice>) -> Result<()> {
        Ok(())
    }
}

/// What `own` found: the slot is this instance's, under a fence, or another's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// The instance owns the slot until its lease runs out; its pumps carry `fence`.
    Owned {
        /// The lease's fence: it only grows, and a pump with any other is refused.
        fence: u64,
    },
    /// Another instance holds a lease that has not run out.
    Held {
        /// The instance holding it.
        by: String,
        /// When its lease runs out, unless renewed.
        until: Millis,
    },
}

/// A store shared by the runtime and the HTTP layer.
pub type SharedStore = Arc<dyn Store>;

/// A notice that a slot has a job due at `at`, earlier than the slot may be sleeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeNotice {
    /// The topic.
    pub topic: String,
    /// The slot.
    pub slot: u32,
    /// When its earliest job is due.
    pub at: Millis,
}

impl WakeNotice {
    /// The slot number of a notice that names no slot: the topic's settings changed (a
    /// doubling) or an instance began serving it, and the others read them anew.
    pub const TOPIC: u32 = u32::MAX;

    /// The pub/sub message form: `slot:at`.
    pub fn encode(&self) -> String {
        format!("{}:{}", self.slot, self.at)
    }

    /// Reads a pub/sub message of `topic`; `None` when it is not a notice.
    pub fn decode(topic: &str, text: &str) -> Option<Self> {
        let (slot, at) = text.split_once(':')?;
        Some(WakeNotice {
            topic: topic.to_string(),
            slot: slot.parse().ok()?,
            at: at.parse().ok()?,
        })
    }
}

//! The narrow trait under the store's front: the operations on one slot that the Lua scripts
//! of `lua/` implement on Redis and `memory/slot.rs` implements in memory, plus where each
//! engine keeps topic settings and events. Everything both engines would otherwise repeat
//! (validation, routing, limits, cursors, grouping by slot, building `Rearmed`) is the
//! front's, in `front/`.
//!
//! Callers have checked their arguments: the topic exists, the slot is below its count, ids
//! are valid, pages are within `MAX_PAGE`.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::event_id::EventId;
use super::record::Record;
use crate::error::Result;
use crate::events::Event;
use crate::model::{
    DeadCursor, Finished, HandedRecord, JobState, ListCursor, RunOutcome, ScheduleMode,
    ScheduleOutcome, Settlement, SlotStats,
};
use crate::time::Millis;
use crate::topic::TopicConfig;

/// A consumer's outcome of a claimed run, named by id and token. The engine reads the run's
/// details (its events' job type, fire time and attempt) from the stored record in the same
/// step that settles it, so an ack needs no read before it.
pub(crate) struct ClaimSettlement<'a> {
    pub(crate) id: &'a str,
    pub(crate) token: u64,
    pub(crate) outcome: RunOutcome,
    /// The run as this process handed it out, when it did (`front/handouts.rs`): a hint the
    /// Redis engine checks against the stored record; `None` reads the record alone.
    pub(crate) handed: Option<Handout>,
}

/// A handed-out run, as its ack's short form needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Handout {
    pub(crate) id: String,
    /// The record as the store wrote it when it handed the run out (shared with the run).
    pub(crate) record: HandedRecord,
    pub(crate) job_type: String,
    pub(crate) fire_at: Millis,
    pub(crate) attempt: u32,
    pub(crate) lease_until: Millis,
}

impl Handout {
    /// The run's `job.done` event whole, as `settle.lua` would build it from the run's
    /// record (fired at the ack's `now`), for the script's short form.
    pub(crate) fn done_event(&self, topic: &str, now: Millis) -> String {
        let mut text = crate::events::Head {
            topic,
            job_id: &self.id,
            job_type: &self.job_type,
            fire_at: self.fire_at,
            fired_at: now,
            attempt: self.attempt,
        }
        .open_json();
        text.push_str(crate::events::DONE_TAIL);
        text
    }
}

/// A reset job that had fired (and repeated) since its last reset, as an engine reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refired {
    pub(crate) id: String,
    pub(crate) fires: u32,
    /// `None` when the job has the topic's default type.
    pub(crate) job_type: Option<String>,
}

/// What `schedule` did in its slot.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SlotScheduled {
    pub(crate) outcome: ScheduleOutcome,
    pub(crate) state: Option<JobState>,
    pub(crate) fire_at: Option<Millis>,
    /// The job is scheduled and no scheduled job of the slot fires before it.
    pub(crate) is_head: bool,
    pub(crate) rearmed: Option<Refired>,
    /// The job as stored afterwards (`None`: there is none), so the caller reads nothing
    /// back.
    pub(crate) stored: Option<Stored>,
}

/// What `reset` did in its slot.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SlotReset {
    pub(crate) reset: u64,
    pub(crate) created: u64,
    pub(crate) missing: Vec<String>,
    pub(crate) rearmed: Vec<Refired>,
}

/// A job as stored: its state, score (fire time, lease deadline or time of death) and record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stored {
    pub(crate) state: JobState,
    pub(crate) score: Millis,
    pub(crate) record: Record,
}

/// A job as an export holds it, to be written by `import` (`toc import`): scheduled at
/// `score` (its fire time) or dead since `score`, with its whole record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Imported {
    pub(crate) id: String,
    pub(crate) state: JobState,
    pub(crate) score: Millis,
    pub(crate) record: Record,
}

/// A job `pump` handed out, with its run's token; its record holds attempts and fire time.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Handed {
    pub(crate) id: String,
    pub(crate) token: u64,
    pub(crate) record: Record,
    /// The record's text as the store wrote it (Redis), for the run's settle to compare.
    pub(crate) text: HandedRecord,
}

/// What `pump` did in its slot.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct SlotPumped {
    pub(crate) handed: Vec<Handed>,
    /// Leases that had run out and were taken back.
    pub(crate) expired: u32,
    /// The slot's earliest due job or lease deadline afterwards.
    pub(crate) next_at: Option<Millis>,
    /// How many due runs of each key of the pump's `SetAside` it moved on.
    pub(crate) set_aside: Vec<(String, u32)>,
}

/// One dead letter: its place in the topic-wide order and its record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeadEntry {
    pub(crate) cursor: DeadCursor,
    pub(crate) record: Record,
}

/// A store engine: the Redis scripts or the memory slots, in six concerns, a trait each (a
/// topic's settings, the jobs of one slot, membership and ownership, the wake bus, the fire
/// rate, flow control per key). [`super::Store`] holds one as `Arc<dyn Engine>`.
#[async_trait]
pub(crate) trait Engine:
    TopicSettings + SlotJobs + Membership + WakeBus + FireRate + FlowControl
{
    /// The engine's name, as in the `store` setting.
    fn name(&self) -> &'static str;

    /// Whether accepted changes survive a restart, in words for the logs.
    fn durability(&self) -> &'static str;

    async fn ping(&self) -> Result<()>;

    /// What an operator should know of the engine's state, for `/health` (a change refused
    /// for a full disk, eviction allowed by the settings); empty when all is well.
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// The engine's own clock, when it has one (Redis' `TIME`); the front uses a
    /// [`crate::time::SteadyClock`] otherwise.
    fn clock(&self) -> Option<crate::time::SharedClock> {
        None
    }
}

/// Where an engine keeps topics' settings.
#[async_trait]
pub(crate) trait TopicSettings: Send + Sync + 'static {
    /// A topic's stored settings.
    async fn find_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>>;

    /// Stores `config` unless the topic exists; answers the settings that won.
    async fn create_topic(&self, config: TopicConfig) -> Result<Arc<TopicConfig>>;

    /// Creates or replaces a topic's settings, after `topics::check_update` allows it.
    async fn put_topic(&self, config: TopicConfig) -> Result<Arc<TopicConfig>>;

    /// A topic's settings read from where the engine keeps them, past any cache.
    async fn reload_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        self.find_topic(name).await
    }

    /// `layout.lua`: marks an old slot with the topic's slot count after a doubling, so a
    /// write routed with a smaller count is refused (`Error::StaleLayout`). Engines whose
    /// writers always see the current settings (memory, in one process) need no mark.
    async fn mark_layout(&self, _topic: &TopicConfig, _slot: u32) -> Result<()> {
        Ok(())
    }

    /// Sets (`Some`) or removes (`None`) flow key `key`'s own limits in topic `name`, stored
    /// apart from the topic's settings: the change writes that key only. Answers the
    /// topic's settings with the change, and the key's limits before it. A new key past
    /// `flow::MAX_FLOW_KEYS` is refused naming `flows`.
    async fn put_flow(
        &self,
        name: &str,
        key: &str,
        limits: Option<crate::flow::FlowLimits>,
    ) -> Result<(Arc<TopicConfig>, Option<crate::flow::FlowLimits>)>;

    /// Every stored topic, in any order.
    async fn topics(&self) -> Result<Vec<Arc<TopicConfig>>>;

    /// Removes a topic whole: its settings, and every slot's jobs, dead letters, events and
    /// owner lease.
    async fn delete_topic(&self, topic: &TopicConfig) -> Result<()>;

    /// Forgets any copy of a topic's settings held in process: another instance deleted it.
    fn forget_topic(&self, _name: &str) {}
}

/// What a pump asks of a slot (`pump.lua`'s arguments), built once at the slot's door and
/// carried unchanged through the front and either engine to the script.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PumpArgs<'a> {
    /// The instant it pumps at.
    pub now: Millis,
    /// How far past `now` a due job is handed out (the caller holds it until its time).
    pub lead: Millis,
    /// Most runs handed out.
    pub limit: usize,
    /// Each run's lease.
    pub lease_ms: u64,
    /// The owner fence (0: the caller owns nothing and asks none).
    pub fence: u64,
    /// Keys whose due runs are moved to their instants rather than leased.
    pub aside: &'a crate::flow::SetAside,
}

/// What `schedule.lua` writes: one job's id, how, its fire time and record.
#[derive(Debug, Clone)]
pub(crate) struct Write<'a> {
    pub id: &'a str,
    pub mode: ScheduleMode,
    pub fire_at: Millis,
    pub now: Millis,
    /// The new job's record.
    pub spec: Record,
}

/// What `list.lua` reads: up to `limit` jobs in `state` scored from `from` to `to`, after
/// `after` in (score, id) order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Range<'a> {
    pub state: JobState,
    pub from: Millis,
    pub to: Millis,
    pub after: Option<&'a ListCursor>,
    pub limit: usize,
}

/// One slot of a topic, as every slot operation names it: the topic's settings as the
/// caller holds them and the slot's number, carried unchanged from the front through the
/// engine trait to each engine (a Redis script's keys come from it).
#[derive(Clone, Copy)]
pub(crate) struct SlotRef<'a> {
    pub topic: &'a TopicConfig,
    pub slot: u32,
}

impl<'a> SlotRef<'a> {
    pub(crate) fn new(topic: &'a TopicConfig, slot: u32) -> Self {
        SlotRef { topic, slot }
    }
}

/// The operations on one slot's jobs (the slot state machine of `state_machine.rs`), and the
/// topic's event stream their outcomes append to.
#[async_trait]
pub(crate) trait SlotJobs: Send + Sync + 'static {
    /// `schedule.lua`: creates, replaces or moves one job.
    async fn schedule(&self, at: SlotRef<'_>, write: Write<'_>) -> Result<SlotScheduled>;

    /// `reset_many.lua`: moves many jobs of one slot, creating missing ones with `create`.
    async fn reset_many(
        &self,
        at: SlotRef<'_>,
        items: &[(&str, Millis)],
        create: Option<&Record>,
        now: Millis,
    ) -> Result<SlotReset>;

    async fn cancel(&self, at: SlotRef<'_>, id: &str) -> Result<Option<JobState>>;

    /// `get.lua`: the jobs `ids` of one slot, in order, read in one consistent step.
    async fn get(&self, at: SlotRef<'_>, ids: &[&str]) -> Result<Vec<Option<Stored>>>;

    /// `pump.lua`: takes back expired leases, then leases out up to `args.limit` jobs due
    /// by `now + lead` for `lease_ms` (a job due after `now` is the caller's to hold until its
    /// fire time: the slot actor's lead). A `fence` other than 0 must be the slot's owner
    /// fence, or nothing changes and the answer is `Error::Fenced`. The answer's `next_at` is
    /// when to pump again: the next due job's fire time less `lead`, or the earliest lease
    /// deadline, whichever comes first. Due runs of a key in `aside` may be moved to its
    /// instant instead of leased (`flow::SetAside`; an engine may ignore it).
    async fn pump(&self, at: SlotRef<'_>, args: &PumpArgs<'_>) -> Result<SlotPumped>;

    /// `adopt.lua`: the slot's runs with a token above `above`, each with its lease
    /// deadline: those handed out by pumps whose answer was lost. An engine in process never
    /// loses an answer, and has none.
    async fn adopt(
        &self,
        _at: SlotRef<'_>,
        _fence: u64,
        _above: u64,
    ) -> Result<Vec<(Handed, Millis)>> {
        Ok(Vec::new())
    }

    /// `settle.lua`: applies runs' outcomes with their events, one atomic step.
    async fn settle(
        &self,
        at: SlotRef<'_>,
        batch: &[Settlement],
        now: Millis,
    ) -> Result<Vec<Finished>>;

    /// `settle.lua` for claimed runs: as `settle`, with each run's event head built from its
    /// stored record (`fired_at`: now), in the same atomic step.
    async fn settle_claimed(
        &self,
        at: SlotRef<'_>,
        batch: &[ClaimSettlement<'_>],
        now: Millis,
    ) -> Result<Vec<Finished>>;

    /// `touch.lua`: moves a live run's lease deadline; false when the token is stale.
    async fn touch(&self, at: SlotRef<'_>, id: &str, token: u64, until: Millis) -> Result<bool>;

    /// Whether `list` looks at every job of the slot whatever its `limit` (the memory
    /// engine's wheel keeps no order): a listing then asks each slot for a whole page at
    /// once rather than for its share first.
    fn list_reads_whole_slots(&self) -> bool {
        false
    }

    /// `list.lua`: up to `limit` of the slot's jobs in `state` (scheduled or running) whose
    /// score is from `from` to `to`, after `after` in (score, id) order, each with its id.
    async fn list(&self, at: SlotRef<'_>, range: &Range<'_>) -> Result<Vec<(String, Stored)>>;

    /// `dead_page.lua`: up to `limit` of the slot's dead letters after `after`, oldest first.
    async fn dead_page(
        &self,
        at: SlotRef<'_>,
        after: Option<&DeadCursor>,
        limit: usize,
    ) -> Result<Vec<DeadEntry>>;

    async fn requeue(&self, at: SlotRef<'_>, id: &str, now: Millis) -> Result<bool>;

    async fn dead_delete(&self, at: SlotRef<'_>, id: &str) -> Result<bool>;

    async fn slot_stats(&self, at: SlotRef<'_>) -> Result<SlotStats>;

    /// `import.lua`: writes jobs as an export holds them (scheduled or dead, each with its
    /// whole record), each unless the slot holds a job of its id already (that one is left
    /// as it is); answers how many it wrote.
    async fn import(&self, at: SlotRef<'_>, jobs: &[Imported]) -> Result<u64>;

    /// About how many bytes the slot's job records hold (`limits.max_bytes_per_topic`): on
    /// the memory engine what their strings weigh, kept as they change; on Redis the record
    /// hash's `MEMORY USAGE`, sampled.
    async fn slot_bytes(&self, at: SlotRef<'_>) -> Result<u64>;

    /// About `count` ids of the slot's jobs in `state`, from `cursor` (0 to start); the
    /// cursor to go on from, 0 when done. Every job in that state for the whole scan is
    /// named at least once (the slot doubling's sweep).
    async fn scan_ids(
        &self,
        at: SlotRef<'_>,
        state: JobState,
        cursor: u64,
        count: usize,
    ) -> Result<(u64, Vec<String>)>;

    /// Appends events that belong to no run's outcome, each to its job's slot's share.
    async fn append_events(&self, topic: &TopicConfig, events: &[Event]) -> Result<()>;

    /// Up to `limit` events after `after`, oldest first, each with its id.
    async fn read_events(
        &self,
        topic: &TopicConfig,
        after: Option<EventId>,
        limit: usize,
    ) -> Result<Vec<Event>>;
}

/// The registry of instances sharing the store, and each slot's owner lease.
#[async_trait]
pub(crate) trait Membership: Send + Sync + 'static {
    /// `register.lua`: see [`super::Store::register`].
    async fn register(
        &self,
        instance: &str,
        types: &[String],
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Vec<Member>>;

    /// `own.lua`: see [`super::Store::own`].
    async fn own(
        &self,
        topic: &TopicConfig,
        slot: u32,
        instance: &str,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<super::Ownership>;

    /// `disown.lua`: see [`super::Store::disown`].
    async fn disown(&self, topic: &TopicConfig, slot: u32, instance: &str) -> Result<bool>;

    /// The slot's next time, if any: its earliest scheduled job's fire time or run's lease
    /// deadline. What the instance's safety net reads (no write) to find a slot whose wake
    /// notice was lost.
    async fn head(&self, topic: &TopicConfig, slot: u32) -> Result<Option<Millis>>;
}

/// Wake notices between the instances sharing a store: which transport carries a notice
/// (plain or sharded pub/sub) is the engine's choice. An engine that is never shared (memory)
/// has nothing to carry, and keeps every default.
#[async_trait]
pub(crate) trait WakeBus: Send + Sync + 'static {
    /// Tells every instance serving `notice.topic` (a topic announcement: its settings
    /// changed, or an instance began serving it).
    async fn announce(&self, _notice: &WakeNotice) -> Result<()> {
        Ok(())
    }

    /// Tells whoever serves `notice.slot` of `topic` that it has a job due at `notice.at`:
    /// a pull topic's notice goes to every instance (a long poll may wait on any), a slot
    /// actor's to the slot's owner alone (its sharded channel on a Redis Cluster).
    async fn wake(&self, _topic: &TopicConfig, _notice: &WakeNotice) -> Result<()> {
        Ok(())
    }

    /// Starts (or, with `watch` false, stops) hearing the notices of a slot this instance
    /// owns. Only a Redis Cluster needs it: elsewhere every instance hears every notice.
    async fn watch_slot(&self, _topic: &str, _slot: u32, _watch: bool) -> Result<()> {
        Ok(())
    }

    /// Forwards other instances' notices to `tx` until `tx` closes; an engine that is not
    /// shared returns at once.
    async fn listen(&self, _tx: mpsc::UnboundedSender<WakeNotice>) -> Result<()> {
        Ok(())
    }
}

/// A topic's fire rate limit: its token bucket (see [`super::rate`]), one per topic, shared by
/// every instance on the store.
#[async_trait]
pub(crate) trait FireRate: Send + Sync + 'static {
    /// Takes up to `want` fires of `topic`'s bucket at `rate` fires/s.
    async fn take_fires(
        &self,
        topic: &TopicConfig,
        rate: u32,
        want: u32,
        now: Millis,
    ) -> Result<super::rate::Grant>;

    /// Gives back `n` fires taken and not used.
    async fn give_back_fires(
        &self,
        topic: &TopicConfig,
        rate: u32,
        n: u32,
        now: Millis,
    ) -> Result<()>;
}

/// Flow control per key: each key's counters (see [`super::flow`]), shared by every instance
/// on the store.
#[async_trait]
pub(crate) trait FlowControl: Send + Sync + 'static {
    /// Grants room under `limits` to the first of `ask`'s runs that fit.
    async fn flow_take(
        &self,
        topic: &TopicConfig,
        limits: &crate::flow::FlowLimits,
        ask: &super::flow::FlowAsk<'_>,
        now: Millis,
    ) -> Result<super::flow::FlowGrant>;

    /// Ends the room of `runs` (`id:token`).
    async fn flow_release(&self, topic: &TopicConfig, key: &str, runs: &[String]) -> Result<()>;

    /// A key's counters.
    async fn flow_state(
        &self,
        topic: &TopicConfig,
        key: &str,
        limits: &crate::flow::FlowLimits,
        now: Millis,
    ) -> Result<super::flow::FlowState>;
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

/// A live instance as the registry answers it: its name and the job types it runs (none
/// known for an instance of a version that did not announce them).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Member {
    /// The instance's name (`runtime.instance`).
    pub name: String,
    /// The job types it runs, sorted.
    pub types: Vec<String>,
}

/// The id an owner lease carries: an instance's name and one process's incarnation,
/// `name:incarnation`. A lease whose id has the same name but another incarnation belongs to
/// an earlier process under that name (one restarted): `own` takes it over at once, under a
/// new fence, rather than wait for it to run out. A plain name (no incarnation) is an id too.
pub(crate) fn owner_id(instance: &str, incarnation: u64) -> String {
    format!("{instance}:{incarnation:016x}")
}

/// The instance name of an owner id (`owner_id`), or the id itself when it is a plain name.
pub(crate) fn owner_name(id: &str) -> &str {
    id.split_once(':').map_or(id, |(name, _)| name)
}

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

    /// The slot number of a notice the listener makes itself, naming no topic: notices may
    /// have been lost (its connection was remade, or it hears none at all), so the slots'
    /// heads are read anew.
    pub const RESYNC: u32 = u32::MAX - 1;

    /// The listener's own notice that notices may have been lost.
    pub fn resync() -> Self {
        WakeNotice {
            topic: String::new(),
            slot: Self::RESYNC,
            at: 0,
        }
    }

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

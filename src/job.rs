//! Jobs and the values that go in and out of the store: what a caller schedules, what a pump
//! hands out, and what a run reports back.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::time::Millis;

/// Where a job is in its life. A job is in exactly one state, or gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    Scheduled,
    Running,
    Dead,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Scheduled => "scheduled",
            JobState::Running => "running",
            JobState::Dead => "dead",
        }
    }
}

/// A job as the store holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Job {
    pub topic: String,
    pub id: String,
    #[serde(rename = "type")]
    pub job_type: String,
    #[schema(value_type = Object)]
    pub payload: Value,
    pub state: JobState,
    /// When the job is (or was, while running or dead) due.
    pub fire_at: Millis,
    /// The latest instant a reset may move `fire_at` to (debounce with a maximum wait).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_fire_at: Option<Millis>,
    pub attempts: u32,
    pub max_attempts: u32,
    /// Unknown (null) for a plain job: one of its topic's default type with no payload keeps
    /// no record beyond its sorted-set entry, so it has no timestamps to report.
    pub created_at: Option<Millis>,
    pub updated_at: Option<Millis>,
    pub last_error: Option<String>,
    /// While running: when the current run's lease ends. While dead: when it died.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<Millis>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_at: Option<Millis>,
    /// A reset that arrived during the current run: the job fires again then, after the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_fire_at: Option<Millis>,
    /// Times the job fired and repeated since it was last reset (a repeating alarm's count).
    #[serde(default)]
    pub fires: u32,
}

/// What a caller asks to schedule.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewJob {
    pub id: String,
    /// The handler strategy; the topic's `default_type` when `None`.
    pub job_type: Option<String>,
    pub payload: Value,
    pub fire_at: Millis,
    pub max_fire_at: Option<Millis>,
    /// The topic's `max_attempts` when `None`.
    pub max_attempts: Option<u32>,
    /// Routes the job to a slot; the id when `None`. Give the same key to `get`, `cancel`
    /// and resets.
    pub shard_key: Option<String>,
}

impl NewJob {
    pub fn new(id: impl Into<String>, fire_at: Millis) -> Self {
        NewJob {
            id: id.into(),
            fire_at,
            ..NewJob::default()
        }
    }

    pub fn job_type(mut self, t: impl Into<String>) -> Self {
        self.job_type = Some(t.into());
        self
    }

    pub fn payload(mut self, payload: Value) -> Self {
        self.payload = payload;
        self
    }

    pub fn max_fire_at(mut self, at: Millis) -> Self {
        self.max_fire_at = Some(at);
        self
    }

    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    pub fn shard_key(mut self, key: impl Into<String>) -> Self {
        self.shard_key = Some(key.into());
        self
    }
}

/// How `schedule` treats a job that already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleMode {
    /// Create, or replace payload and fire time (attempts start again). A dead job is
    /// replaced by a new scheduled one.
    Upsert,
    /// Create; an existing job (in any state) is left untouched: the idempotent create.
    CreateOnly,
    /// Move an existing scheduled or running job's fire time; the payload is untouched.
    ResetOnly,
}

/// What `schedule` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleOutcome {
    Created,
    Replaced,
    /// `CreateOnly` found the job already there; nothing changed.
    Exists,
    /// `ResetOnly` moved the fire time.
    Reset,
    /// `ResetOnly` found no scheduled or running job; nothing changed.
    Missing,
}

/// The answer of `schedule`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled {
    pub outcome: ScheduleOutcome,
    pub slot: u32,
    /// The job's state afterwards (`None` when it does not exist).
    pub state: Option<JobState>,
    /// The fire time that took effect (after the debounce cap); for a running job, the time
    /// it fires again after its run.
    pub fire_at: Option<Millis>,
    /// True when the job is scheduled and no scheduled job of its slot fires before it: the
    /// slot must wake by `fire_at` if it sleeps longer.
    pub is_head: bool,
    /// For a reset of a job that had fired and repeated: how often, and its type.
    pub rearmed: Option<Rearmed>,
}

/// A reset job that had already fired (and repeated) since its last reset: a device heard
/// again after raising its alarm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Rearmed {
    pub id: String,
    pub job_type: String,
    /// Times it had fired since its last reset.
    pub fires: u32,
}

/// A job addressed by id (and shard key, when it was scheduled with one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobRef {
    pub id: String,
    pub shard_key: Option<String>,
}

impl JobRef {
    pub fn new(id: impl Into<String>) -> Self {
        JobRef {
            id: id.into(),
            shard_key: None,
        }
    }

    pub fn with_shard_key(mut self, key: Option<String>) -> Self {
        self.shard_key = key;
        self
    }

    pub fn route_key(&self) -> &str {
        self.shard_key.as_deref().unwrap_or(&self.id)
    }
}

impl From<&str> for JobRef {
    fn from(id: &str) -> Self {
        JobRef::new(id)
    }
}

/// One reset of a batch (a heartbeat).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reset {
    pub job: JobRef,
    pub fire_at: Millis,
}

impl Reset {
    pub fn new(id: impl Into<String>, fire_at: Millis) -> Self {
        Reset {
            job: JobRef::new(id),
            fire_at,
        }
    }
}

/// With a batch of resets: what a missing job is created as.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CreateSpec {
    pub job_type: Option<String>,
    pub payload: Value,
    pub max_attempts: Option<u32>,
}

/// The answer of `reset_many`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, utoipa::ToSchema)]
pub struct ResetReport {
    pub reset: u64,
    pub created: u64,
    pub missing: Vec<String>,
    /// Jobs that had fired (and repeated) since their last reset.
    #[serde(skip)]
    pub rearmed: Vec<Rearmed>,
    /// Per slot where this call scheduled a job, the earliest fire time it gave one, so the
    /// runtime can wake a slot that would sleep past it.
    #[serde(skip)]
    pub heads: Vec<SlotHead>,
}

/// The earliest fire time a call gave a job of `slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotHead {
    pub slot: u32,
    pub at: Millis,
}

/// A job handed to a run by `pump`: the run must report its outcome with this token.
#[derive(Debug, Clone, PartialEq)]
pub struct Leased {
    pub job: Job,
    pub slot: u32,
    /// Identifies this run; an outcome with an older token is rejected as stale.
    pub token: u64,
    pub lease_until: Millis,
}

impl Leased {
    pub fn job_ref(&self) -> JobRef {
        JobRef::new(self.job.id.clone())
    }
}

/// The answer of `pump`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Pumped {
    pub jobs: Vec<Leased>,
    /// Jobs whose lease had expired and were put back (scheduled again or dead).
    pub expired: u32,
    /// The next instant this slot needs attention: its earliest due job or lease deadline.
    pub next_at: Option<Millis>,
}

/// What a run reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// Done: the job is gone.
    Ack,
    /// Failed: run again at `at`, or go to the dead letters when attempts are used up.
    Retry { error: String, at: Millis },
    /// Run again at `at` with attempts starting again (a repeating alarm).
    Repeat { at: Millis },
    /// Give up: to the dead letters with `error`.
    Bury { error: String },
    /// Not run (shutdown): due again at once, and the attempt does not count.
    Release,
}

/// A run's outcome with the events its handler emitted, for [`Store::settle`]: the store
/// applies the outcome and appends the events (the handler's, then the runtime's own for the
/// result) in one atomic step, so no job is acknowledged whose events were not stored.
///
/// [`Store::settle`]: crate::store::Store::settle
#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    pub run: Leased,
    pub outcome: RunOutcome,
    /// When the run was handed to its handler: the events' `fired_at`.
    pub fired_at: Millis,
    /// Events the handler emitted, as (name, data), in order.
    pub emitted: Vec<(String, Value)>,
}

impl Settlement {
    /// An outcome that carries no events of the handler's.
    pub fn new(run: Leased, outcome: RunOutcome, fired_at: Millis) -> Self {
        Settlement {
            run,
            outcome,
            fired_at,
            emitted: Vec::new(),
        }
    }
}

/// What the store did with a run's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finished {
    Done,
    Retrying,
    Repeating,
    Dead,
    Released,
    /// A reset arrived during the run; the job is scheduled again at that time.
    Rescheduled,
    /// The run's lease was taken over (or the job cancelled): nothing changed.
    Stale,
}

/// Per-slot figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, utoipa::ToSchema)]
pub struct SlotStats {
    pub slot: u32,
    pub scheduled: u64,
    pub running: u64,
    pub dead: u64,
    pub next_fire_at: Option<Millis>,
}

/// A topic's figures: per slot and in total.
#[derive(Debug, Clone, PartialEq, Default, Serialize, utoipa::ToSchema)]
pub struct TopicStats {
    pub topic: String,
    pub slots: u32,
    pub scheduled: u64,
    pub running: u64,
    pub dead: u64,
    pub next_fire_at: Option<Millis>,
    pub per_slot: Vec<SlotStats>,
}

impl TopicStats {
    /// Totals of the per-slot figures.
    pub fn from_slots(topic: &str, per_slot: Vec<SlotStats>) -> Self {
        TopicStats {
            topic: topic.to_string(),
            slots: per_slot.len() as u32,
            scheduled: per_slot.iter().map(|s| s.scheduled).sum(),
            running: per_slot.iter().map(|s| s.running).sum(),
            dead: per_slot.iter().map(|s| s.dead).sum(),
            next_fire_at: per_slot.iter().filter_map(|s| s.next_fire_at).min(),
            per_slot,
        }
    }
}

/// A page of dead letters, oldest first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, utoipa::ToSchema)]
pub struct DeadPage {
    pub items: Vec<Job>,
    /// Pass as `after` for the next page; `None` at the end.
    pub next: Option<String>,
}

/// Position in the topic-wide dead-letter order: (time of death, job id).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeadCursor {
    pub dead_at: Millis,
    pub id: String,
}

impl DeadCursor {
    pub fn encode(&self) -> String {
        format!("{}:{}", self.dead_at, self.id)
    }

    pub fn decode(s: &str) -> Option<Self> {
        let (at, id) = s.split_once(':')?;
        if at.is_empty() || at.len() > 15 || !at.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(DeadCursor {
            dead_at: at.parse().ok()?,
            id: id.to_string(),
        })
    }
}

//! Jobs and the values that go in and out of the store: what a caller schedules, what a pump
//! hands out, and what a run reports back.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::time::Millis;

/// The words a unit enum is written as on the wire (the Lua scripts' arguments and replies,
/// the HTTP answers): `as_str` and `FromStr` from one table, used by the Redis engine, the
/// HTTP layer and the memory engine alike.
macro_rules! wire_words {
    ($ty:ident { $($variant:ident => $word:literal),* $(,)? }) => {
        impl $ty {
            /// Its word on the wire.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $word,)*
                }
            }
        }

        impl std::str::FromStr for $ty {
            type Err = crate::error::Error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($word => Ok($ty::$variant),)*
                    other => Err(crate::error::Error::Corrupt(format!(
                        concat!("not a ", stringify!($ty), " word: {:?}"),
                        other
                    ))),
                }
            }
        }
    };
}

/// Where a job is in its life. A job is in exactly one state, or gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting for its fire time.
    Scheduled,
    /// Leased to a run, until its outcome or the lease's end.
    Running,
    /// Out of attempts or buried: in the dead letters until requeued or deleted.
    Dead,
}

wire_words!(JobState {
    Scheduled => "scheduled",
    Running => "running",
    Dead => "dead",
});

/// A job as the store holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Job {
    /// The topic it belongs to.
    pub topic: String,
    /// Its id, unique in its topic.
    pub id: String,
    /// The job type whose handler runs it.
    #[serde(rename = "type")]
    pub job_type: String,
    /// What the handler gets (JSON).
    #[schema(value_type = Object)]
    pub payload: Value,
    /// Where it is in its life.
    pub state: JobState,
    /// When the job is (or was, while running or dead) due.
    pub fire_at: Millis,
    /// The latest instant a reset may move `fire_at` to (debounce with a maximum wait).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_fire_at: Option<Millis>,
    /// Runs started since it was scheduled (or last requeued).
    pub attempts: u32,
    /// Runs allowed before it goes to the dead letters.
    pub max_attempts: u32,
    /// Unknown (null) for a plain job: one of its topic's default type with no payload keeps
    /// no record beyond its sorted-set entry, so it has no timestamps to report.
    pub created_at: Option<Millis>,
    /// When it last changed (null for a plain job).
    pub updated_at: Option<Millis>,
    /// The error of its last failed run.
    pub last_error: Option<String>,
    /// While running: when the current run's lease ends. While dead: when it died.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<Millis>,
    /// When it went to the dead letters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_at: Option<Millis>,
    /// A reset that arrived during the current run: the job fires again then, after the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_fire_at: Option<Millis>,
    /// Times the job fired and repeated since it was last reset (a repeating alarm's count).
    #[serde(default)]
    pub fires: u32,
    /// A recurring job's schedule: after each fire it is scheduled again at the schedule's
    /// next instant, until it is cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<crate::recurrence::Recurrence>,
    /// A recurring job's next fire: its `fire_at` while scheduled; while running (or dead),
    /// the schedule's first instant after this run's fire time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fire_at: Option<Millis>,
    /// A one-shot job's expiry: how late (ms after `fire_at`) it may still fire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after_ms: Option<u64>,
    /// What becomes of it past its expiry (`dead` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_expire: Option<OnExpire>,
    /// Its flow key, when it was given one (a webhook job without one goes by its URL's host
    /// and port): jobs of one key share its flow limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_key: Option<String>,
    /// Its labels (`{"campaign": "spring"}`): jobs are listed, cancelled and requeued
    /// together by one.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: crate::labels::Labels,
    /// The W3C trace context of the span that created it, kept when its request carried a
    /// `traceparent`: its fire continues that trace (a pull consumer gets it in the claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The shard key that routed it to its slot, when it was written with one other than
    /// its id (meeting jobs share their meeting's): its reads, resets and cancels name it
    /// too (`?shard_key=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_key: Option<String>,
    /// A recurring job's next instants from `next_fire_at` on, as many as `?next=` asked
    /// for (up to 100); absent unless asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fire_ats: Option<Vec<Millis>>,
}

impl Job {
    /// A scheduled job with nothing set, for unit tests.
    #[cfg(test)]
    pub(crate) fn stub(topic: &str, id: &str) -> Job {
        Job {
            topic: topic.to_string(),
            id: id.to_string(),
            job_type: "emit".to_string(),
            payload: Value::Null,
            state: JobState::Scheduled,
            fire_at: 0,
            max_fire_at: None,
            attempts: 0,
            max_attempts: 16,
            created_at: None,
            updated_at: None,
            last_error: None,
            lease_until: None,
            dead_at: None,
            pending_fire_at: None,
            fires: 0,
            repeat: None,
            next_fire_at: None,
            expire_after_ms: None,
            on_expire: None,
            flow_key: None,
            labels: Default::default(),
            traceparent: None,
            shard_key: None,
            next_fire_ats: None,
        }
    }

    /// The outcome of a fire too late to run, which its handler never sees: a one-shot job past
    /// its `expire_after_ms` (dead, saying so, or dropped as done), a recurring fire past its
    /// `repeat.catchup_window_ms` (its error says it was skipped; the series goes on at the
    /// schedule's next instant after now, as for any fire that ended).
    pub fn misfire(&self, fired_at: Millis) -> Option<Outcome> {
        let job = self;
        let late = fired_at.saturating_sub(job.fire_at);
        if let Some(after) = job.expire_after_ms.filter(|_| job.repeat.is_none()) {
            let expiry = Expiry {
                after_ms: after,
                on_expire: job.on_expire.unwrap_or_default(),
            };
            if expiry.expired(job.fire_at, fired_at) {
                return Some(match expiry.on_expire {
                    OnExpire::Drop => Outcome::Done,
                    OnExpire::Dead => Outcome::dead(format!(
                        "expired: fired {late} ms after its fire_at, past expire_after_ms ({after} ms)"
                    )),
                });
            }
        }
        let schedule = job.repeat.as_ref()?;
        schedule.skips(job.fire_at, fired_at).then(|| {
            let window = schedule.series().catchup_window_ms.unwrap_or(0);
            Outcome::dead(format!(
                "skipped: fired {late} ms after its fire_at, past repeat.catchup_window_ms ({window} ms)"
            ))
        })
    }

    /// With its next `n` instants (`next_fire_ats`): a recurring job's schedule from its
    /// `next_fire_at` on; empty for a job that fires once.
    pub fn with_next_instants(mut self, n: usize) -> Self {
        let mut at = self.next_fire_at;
        let mut n = n.min(MAX_NEXT_INSTANTS);
        if let Some(limit) = self.repeat.as_ref().and_then(|r| r.series().limit) {
            // Fires the series has left: a running job's next instant comes after this run.
            let running = u32::from(self.state == JobState::Running);
            let left = limit.saturating_sub(self.fires.saturating_add(running));
            n = n.min(usize::try_from(left).unwrap_or(usize::MAX));
        }
        let until = self.repeat.as_ref().and_then(|r| r.series().until);
        let mut all = Vec::with_capacity(n);
        while let (Some(now), Some(r)) = (at, self.repeat.as_ref()) {
            if all.len() >= n || until.is_some_and(|u| now > u) {
                break;
            }
            all.push(now);
            at = r.next_after(now);
        }
        self.next_fire_ats = Some(all);
        self
    }
}

/// The most instants `?next=` answers.
pub(crate) const MAX_NEXT_INSTANTS: usize = 100;

/// What becomes of a job that could not fire within its `expire_after_ms`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnExpire {
    /// To the dead letters, its `last_error` saying it expired (the default).
    #[default]
    Dead,
    /// Gone, as if done (a `job.done` event, counted as expired).
    Drop,
}

/// A one-shot job's expiry: if it cannot fire within `after_ms` of its fire time (an
/// outage, a paused topic), it does not run and `on_expire` says what becomes of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expiry {
    /// How late a fire may be, in ms.
    #[serde(rename = "ms")]
    pub after_ms: u64,
    /// What becomes of it past that.
    #[serde(rename = "on", default, skip_serializing_if = "is_dead")]
    pub on_expire: OnExpire,
}

fn is_dead(on: &OnExpire) -> bool {
    *on == OnExpire::Dead
}

impl Expiry {
    /// Whether a fire at `fired_at` of a job due at `fire_at` is too late.
    pub fn expired(&self, fire_at: Millis, fired_at: Millis) -> bool {
        fired_at.saturating_sub(fire_at) > crate::num::signed(self.after_ms)
    }
}

/// What a caller asks to schedule.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewJob {
    /// Its id, unique in its topic.
    pub id: String,
    /// The handler strategy; the topic's `default_type` when `None`.
    pub job_type: Option<String>,
    /// What the handler gets (JSON).
    pub payload: Value,
    /// When it is due.
    pub fire_at: Millis,
    /// The latest instant a reset may move its fire time to (debounce with a maximum wait).
    pub max_fire_at: Option<Millis>,
    /// The topic's `max_attempts` when `None`.
    pub max_attempts: Option<u32>,
    /// Routes the job to a slot; the id when `None`. Give the same key to `get`, `cancel`
    /// and resets.
    pub shard_key: Option<String>,
    /// A recurring job's schedule (see [`crate::Recurrence`]); `None` fires once.
    pub repeat: Option<crate::recurrence::Recurrence>,
    /// A one-shot job's expiry: how late it may fire, and what becomes of it past that.
    pub expire: Option<Expiry>,
    /// Its flow key: jobs of one key share the key's flow limits (`crate::flow`).
    pub flow_key: Option<String>,
    /// Its labels: jobs are listed, cancelled and requeued together by one.
    pub labels: crate::labels::Labels,
    /// The trace context its fire continues (a W3C `traceparent`), when it has one.
    pub traceparent: Option<String>,
}

impl NewJob {
    /// A job `id` due at `fire_at`, of the topic's default type.
    pub fn new(id: impl Into<String>, fire_at: Millis) -> Self {
        NewJob {
            id: id.into(),
            fire_at,
            ..NewJob::default()
        }
    }

    /// Its job type.
    pub fn job_type(mut self, t: impl Into<String>) -> Self {
        self.job_type = Some(t.into());
        self
    }

    /// Its payload.
    pub fn payload(mut self, payload: Value) -> Self {
        self.payload = payload;
        self
    }

    /// The latest instant resets may move it to.
    pub fn max_fire_at(mut self, at: Millis) -> Self {
        self.max_fire_at = Some(at);
        self
    }

    /// Runs allowed before it goes to the dead letters.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// Routes it to a slot in place of its id.
    pub fn shard_key(mut self, key: impl Into<String>) -> Self {
        self.shard_key = Some(key.into());
        self
    }

    /// Fires it again on `schedule` after each fire, until it is cancelled.
    pub fn repeat(mut self, schedule: crate::recurrence::Recurrence) -> Self {
        self.repeat = Some(schedule);
        self
    }

    /// Jobs of one flow key share the key's flow limits.
    pub fn flow_key(mut self, key: impl Into<String>) -> Self {
        self.flow_key = Some(key.into());
        self
    }

    /// Carries label `key` = `value`.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Not run if it cannot fire within `after_ms` of its fire time: `on_expire` says what
    /// becomes of it then.
    pub fn expire_after(mut self, after_ms: u64, on_expire: OnExpire) -> Self {
        self.expire = Some(Expiry {
            after_ms,
            on_expire,
        });
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

// The modes as `schedule.lua` takes them.
wire_words!(ScheduleMode {
    Upsert => "upsert",
    CreateOnly => "create",
    ResetOnly => "reset",
});

/// What `schedule` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleOutcome {
    /// A new job.
    Created,
    /// An existing job, replaced.
    Replaced,
    /// `CreateOnly` found the job already there; nothing changed.
    Exists,
    /// `ResetOnly` moved the fire time.
    Reset,
    /// `ResetOnly` found no scheduled or running job; nothing changed.
    Missing,
}

wire_words!(ScheduleOutcome {
    Created => "created",
    Replaced => "replaced",
    Exists => "exists",
    Reset => "reset",
    Missing => "missing",
});

/// The answer of `schedule`.
#[derive(Debug, Clone, PartialEq)]
pub struct Scheduled {
    /// What it did.
    pub outcome: ScheduleOutcome,
    /// The slot the job is in.
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
    /// The job as stored afterwards, read in the same atomic step (`None` when there is
    /// none).
    pub job: Option<Job>,
}

/// A reset job that had already fired (and repeated) since its last reset: a device heard
/// again after raising its alarm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Rearmed {
    /// The job's id.
    pub id: String,
    /// The job's type, whose handler reacts.
    pub job_type: String,
    /// Times it had fired since its last reset.
    pub fires: u32,
}

/// A job addressed by id (and shard key, when it was scheduled with one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobRef {
    /// The job's id.
    pub id: String,
    /// The shard key it was scheduled with, if any.
    pub shard_key: Option<String>,
}

impl JobRef {
    /// The job `id`, scheduled without a shard key.
    pub fn new(id: impl Into<String>) -> Self {
        JobRef {
            id: id.into(),
            shard_key: None,
        }
    }

    /// With the shard key it was scheduled with.
    pub fn with_shard_key(mut self, key: Option<String>) -> Self {
        self.shard_key = key;
        self
    }

    /// What routes the job to its slot: the shard key, or the id.
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
    /// The job to move.
    pub job: JobRef,
    /// Its new fire time.
    pub fire_at: Millis,
}

impl Reset {
    /// Moves job `id` to `fire_at`.
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
    /// The created jobs' type; the topic's default when `None`.
    pub job_type: Option<String>,
    /// The created jobs' payload.
    pub payload: Value,
    /// The created jobs' attempts; the topic's when `None`.
    pub max_attempts: Option<u32>,
}

/// The answer of `reset_many`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, utoipa::ToSchema)]
pub struct ResetReport {
    /// Jobs whose fire time moved.
    pub reset: u64,
    /// Jobs created (with a create spec).
    pub created: u64,
    /// Ids of jobs that do not exist (without a create spec).
    pub missing: Vec<String>,
    /// Ids of resets the store refused because it is full (their slots' writes were
    /// refused before they changed anything; the others were applied), or whose creation
    /// `limits.max_jobs_per_topic` refused (the jobs that existed were reset). Left out when
    /// empty; when nothing was applied the whole call fails (`Error::StoreFull`, or
    /// `Error::LimitReached`) instead.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// Jobs that had fired (and repeated) since their last reset.
    #[serde(skip)]
    pub rearmed: Vec<Rearmed>,
    /// Per slot this call touched, the earliest fire time it asked for, so the runtime can
    /// wake a slot that would sleep past it (a needless wake, for a missing job, costs one
    /// pump; a job's debounce cap never needs an earlier wake than its previous time).
    #[serde(skip)]
    pub heads: Vec<SlotHead>,
}

/// The earliest fire time a call asked for in `slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotHead {
    /// The slot.
    pub slot: u32,
    /// The earliest fire time the call gave one of its jobs.
    pub at: Millis,
}

/// A job handed to a run by `pump`: the run must report its outcome with this token.
#[derive(Debug, Clone, PartialEq)]
pub struct Leased {
    /// The job, as it was handed out.
    pub job: Job,
    /// Its slot.
    pub slot: u32,
    /// Identifies this run; an outcome with an older token is rejected as stale.
    pub token: u64,
    /// When the lease ends: the job comes back unless its outcome arrives first.
    pub lease_until: Millis,
    /// The run's record as the store wrote it when it handed the job out (see
    /// [`HandedRecord`]).
    pub handed_record: HandedRecord,
}

/// A run's record as the Redis store wrote it when it handed the job out, with the token it
/// was written for; empty on the memory engine. The run's settle sends it along: while the
/// stored record is still this text, the run is current, found with one string compare
/// where a decode would be needed. Opaque: only the store makes one, and a run whose token
/// is not the one it was written for settles without it.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HandedRecord(Option<(u64, std::sync::Arc<str>)>);

impl HandedRecord {
    pub(crate) fn new(token: u64, text: std::sync::Arc<str>) -> Self {
        HandedRecord(Some((token, text)))
    }

    /// The text, for a run with `token`; empty when there is none or it was written for
    /// another token.
    pub(crate) fn text_for(&self, token: u64) -> &str {
        match &self.0 {
            Some((t, text)) if *t == token => text,
            _ => "",
        }
    }
}

/// The answer of `pump`.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Pumped {
    /// The jobs leased out, each with its run's token.
    pub jobs: Vec<Leased>,
    /// Jobs whose lease had expired and were put back (scheduled again or dead).
    pub expired: u32,
    /// The next instant this slot needs attention: its earliest due job or lease deadline.
    pub next_at: Option<Millis>,
    /// How many due runs of each full flow key the pump set aside (see `flow::SetAside`).
    pub set_aside: Vec<(String, u32)>,
}

/// How a run went, as its handler or its consumer reports it: the one vocabulary of
/// outcomes from the code that ran a job to the store. The store applies it as a
/// [`RunOutcome`] (times made absolute) and answers a [`Finished`].
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Done: the job is gone.
    Done,
    /// Failed: try again after `delay` (the topic's backoff when `None`), or go to the dead
    /// letters when the attempts are used up.
    Retry {
        /// What went wrong.
        error: String,
        /// When to run again; the topic's backoff when `None`.
        delay: Option<Duration>,
    },
    /// Run again `after` the fire time (never earlier than now), attempts starting again.
    Repeat {
        /// How long after the fire time.
        after: Duration,
    },
    /// Give up: to the dead letters with `error`.
    Dead {
        /// Why it cannot succeed.
        error: String,
    },
}

impl Outcome {
    /// A failure to retry after the topic's backoff.
    pub fn retry(error: impl Into<String>) -> Self {
        Outcome::Retry {
            error: error.into(),
            delay: None,
        }
    }

    /// A failure that retrying cannot fix.
    pub fn dead(error: impl Into<String>) -> Self {
        Outcome::Dead {
            error: error.into(),
        }
    }
}

impl Outcome {
    /// The store's form of this outcome, for a run fired at `fire_at`: a retry at `after`
    /// its delay (`backoff_ms` when it names none), a repeat `after` the fire time but never
    /// before `now`.
    pub(crate) fn into_run(
        self,
        fire_at: Millis,
        now: Millis,
        backoff_ms: impl FnOnce() -> u64,
        after: impl FnOnce(Millis) -> Millis,
    ) -> RunOutcome {
        match self {
            Outcome::Done => RunOutcome::Done,
            Outcome::Retry { error, delay } => {
                let delay = delay.map_or_else(backoff_ms, crate::num::duration_ms);
                RunOutcome::Retry {
                    error,
                    at: after(crate::num::millis(delay).min(crate::time::MAX_DELAY_MS)),
                }
            }
            Outcome::Repeat { after: every } => RunOutcome::Repeat {
                at: fire_at
                    .saturating_add(crate::num::duration_millis(every))
                    .max(now),
                error: None,
            },
            Outcome::Dead { error } => RunOutcome::Dead { error },
        }
    }
}

/// An [`Outcome`] as the store applies it, its times absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// Done: the job is gone.
    Done,
    /// Failed: run again at `at`, or go to the dead letters when attempts are used up.
    Retry {
        /// What went wrong.
        error: String,
        /// When to run again.
        at: Millis,
    },
    /// Run again at `at` with attempts starting again (a repeating alarm, or a recurring
    /// job's next instant).
    Repeat {
        /// When to run again.
        at: Millis,
        /// A recurring job's fire that failed for good: its error, kept as `last_error`.
        error: Option<String>,
    },
    /// Give up: to the dead letters with `error`.
    Dead {
        /// Why.
        error: String,
    },
    /// Not run (shutdown): due again at once, and the attempt does not count.
    Release,
    /// Not run (its flow key's share of the slot's waiting room was full): due again at
    /// `at`, and the attempt does not count. It waits in the store, not in memory.
    Defer {
        /// When it is due again.
        at: Millis,
    },
    /// A recurring job's last fire (its `repeat.limit` reached, or its next instant past
    /// `repeat.until`): the series ends. Gone, or to the dead letters with `error` when the
    /// fire failed for good; never `recur`.
    End {
        /// The last fire's error, when it failed for good.
        error: Option<String>,
    },
}

impl RunOutcome {
    /// Its word on the wire (`settle.lua`'s argument).
    pub fn as_str(&self) -> &'static str {
        match self {
            RunOutcome::Done => "done",
            RunOutcome::Retry { .. } => "retry",
            RunOutcome::Repeat { .. } => "repeat",
            RunOutcome::Dead { .. } => "dead",
            RunOutcome::Release | RunOutcome::Defer { .. } => "release",
            RunOutcome::End { .. } => "end",
        }
    }
}

/// What a consumer reports about a job it claimed, naming the run by its token.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimOutcome {
    /// The job.
    pub job: JobRef,
    /// The token its claim answered with.
    pub token: u64,
    /// How the run went (a consumer reports done, retry or dead).
    pub outcome: Outcome,
}

/// An event a handler emits: its name and data.
#[derive(Debug, Clone, PartialEq)]
pub struct Emitted {
    /// The event's name (`device.offline`).
    pub event: String,
    /// Its data.
    pub data: Value,
}

impl Emitted {
    /// The event `event` with `data`.
    pub fn new(event: impl Into<String>, data: Value) -> Self {
        Emitted {
            event: event.into(),
            data,
        }
    }
}

/// A run's outcome with the events its handler emitted, for [`Store::settle`]: the store
/// applies the outcome and appends the events (the handler's, then the runtime's own for the
/// result) in one atomic step, so no job is acknowledged whose events were not stored.
///
/// [`Store::settle`]: crate::store::Store::settle
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    /// The run.
    pub run: Leased,
    /// Its outcome.
    pub outcome: RunOutcome,
    /// When the run was handed to its handler: the events' `fired_at`.
    pub fired_at: Millis,
    /// Events the handler emitted, in order.
    pub emitted: Vec<Emitted>,
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
    /// Acknowledged: the job is gone.
    Done,
    /// Scheduled to run again after a failure.
    Retrying,
    /// Scheduled to run again, attempts starting again.
    Repeating,
    /// Sent to the dead letters.
    Dead,
    /// Given back, due at once; the attempt did not count.
    Released,
    /// A reset arrived during the run; the job is scheduled again at that time.
    Rescheduled,
    /// The run's lease was taken over (or the job cancelled): nothing changed.
    Stale,
    /// The run of a recurring job ended (done, or out of attempts) and nothing changed yet:
    /// the store's own answer to its front, which settles the run again as a repeat at the
    /// schedule's next instant. Never answered to a caller of `Store`.
    Recur,
}

wire_words!(Finished {
    Done => "done",
    Retrying => "retrying",
    Repeating => "repeating",
    Dead => "dead",
    Released => "released",
    Rescheduled => "rescheduled",
    Stale => "stale",
    Recur => "recur",
});

/// Per-slot figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, utoipa::ToSchema)]
pub struct SlotStats {
    /// The slot.
    pub slot: u32,
    /// Jobs waiting for their fire time.
    pub scheduled: u64,
    /// Jobs leased to a run.
    pub running: u64,
    /// Dead letters.
    pub dead: u64,
    /// The earliest fire time of a scheduled job.
    pub next_fire_at: Option<Millis>,
}

/// A topic's figures: per slot and in total.
#[derive(Debug, Clone, PartialEq, Default, Serialize, utoipa::ToSchema)]
pub struct TopicStats {
    /// The topic.
    pub topic: String,
    /// Its slot count.
    pub slots: u32,
    /// Jobs waiting for their fire time.
    pub scheduled: u64,
    /// Jobs leased to a run.
    pub running: u64,
    /// Dead letters.
    pub dead: u64,
    /// The earliest fire time of a scheduled job.
    pub next_fire_at: Option<Millis>,
    /// The same figures per slot.
    pub per_slot: Vec<SlotStats>,
}

impl TopicStats {
    /// Totals of the per-slot figures.
    pub fn from_slots(topic: &str, per_slot: Vec<SlotStats>) -> Self {
        TopicStats {
            topic: topic.to_string(),
            slots: crate::num::to_u32(per_slot.len()),
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
    /// The dead jobs, oldest first.
    pub items: Vec<Job>,
    /// Pass as `after` for the next page; `None` at the end.
    pub next: Option<String>,
}

/// A page of a topic's scheduled or running jobs, in score order (fire time; lease deadline
/// for running jobs) merged across its slots.
#[derive(Debug, Clone, PartialEq, Default, Serialize, utoipa::ToSchema)]
pub struct JobPage {
    /// The jobs, earliest first.
    pub items: Vec<Job>,
    /// Pass as `cursor` for the next page; `None` at the end.
    pub next: Option<String>,
}

/// Position in a listing's order: (score, job id), ties in byte order of the id as a Redis
/// sorted set keeps them. A page starts after it, so a job that did not move is never skipped
/// nor repeated.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListCursor {
    /// The score: a fire time, or a lease deadline.
    pub score: Millis,
    /// The job's id.
    pub id: String,
}

impl ListCursor {
    /// The cursor's text, as `cursor` takes it.
    pub fn encode(&self) -> String {
        format!("{}:{}", self.score, self.id)
    }

    /// Reads a cursor's text; `None` when it is not one.
    pub fn decode(s: &str) -> Option<Self> {
        let (score, id) = score_and_id(s)?;
        Some(ListCursor { score, id })
    }
}

/// `score:id`, the text of both cursors.
fn score_and_id(s: &str) -> Option<(Millis, String)> {
    let (at, id) = s.split_once(':')?;
    if at.is_empty() || at.len() > 15 || !at.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((at.parse().ok()?, id.to_string()))
}

/// Position in the topic-wide dead-letter order: (time of death, job id).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeadCursor {
    /// When the job died.
    pub dead_at: Millis,
    /// The job's id.
    pub id: String,
}

impl DeadCursor {
    /// The cursor's text, as `after` takes it.
    pub fn encode(&self) -> String {
        format!("{}:{}", self.dead_at, self.id)
    }

    /// Reads a cursor's text; `None` when it is not one.
    pub fn decode(s: &str) -> Option<Self> {
        let (dead_at, id) = score_and_id(s)?;
        Some(DeadCursor { dead_at, id })
    }
}

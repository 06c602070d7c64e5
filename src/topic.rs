//! Topics: named delay queues, each split into `slots` shards, with the defaults their jobs
//! inherit. A topic's settings live in the store so every instance agrees on them.

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::time::Millis;

/// Most fires per second a topic may be limited to.
pub(crate) const MAX_FIRES_PER_S: u32 = 1_000_000;

/// Most slots a topic may have.
pub(crate) const MAX_SLOTS: u32 = 4096;

/// Most attempts a topic may allow a job.
pub(crate) const MAX_ATTEMPTS: u32 = 1_000;
/// Longest lease a topic may give a run, in ms (a day): longer would outlive any sensible
/// run, and past `i64::MAX` a deadline would fall before its start.
pub(crate) const MAX_VISIBILITY_TIMEOUT_MS: u64 = 86_400_000;
/// Largest payload limit a topic may set, in bytes (16 MiB).
pub(crate) const MAX_PAYLOAD_LIMIT: usize = 16 * 1024 * 1024;
/// Largest backoff factor.
pub(crate) const MAX_BACKOFF_FACTOR: f64 = 100.0;
/// Largest backoff jitter the API describes: below 1, and 0.99 at most there, since JSON
/// parsing may round 0.9999999999999999 up to 1.
const MAX_DESCRIBED_JITTER: f64 = 0.99;

/// The API description's schemas of the settings `TopicConfig::validate` bounds (see
/// `http/schema.rs`).
pub(crate) mod schemas {
    use utoipa::openapi::schema::Object;

    use crate::wire::schema::{integer, number, one_of};

    /// `slots`: a power of two up to `MAX_SLOTS`.
    pub(crate) fn slots() -> Object {
        one_of((0..=super::MAX_SLOTS.ilog2()).map(|n| i64::from(1_u32 << n)))
    }

    /// `max_attempts`: 1 to `MAX_ATTEMPTS`.
    pub(crate) fn max_attempts() -> Object {
        integer(1, i64::from(super::MAX_ATTEMPTS), true).build()
    }

    /// `visibility_timeout_ms`: 1 to `MAX_VISIBILITY_TIMEOUT_MS`.
    pub(crate) fn visibility_timeout_ms() -> Object {
        integer(
            1,
            crate::num::signed(super::MAX_VISIBILITY_TIMEOUT_MS),
            true,
        )
        .build()
    }

    /// `max_payload_bytes`: 1 to `MAX_PAYLOAD_LIMIT`.
    pub(crate) fn max_payload_bytes() -> Object {
        let max = crate::num::signed(crate::num::usize_u64(super::MAX_PAYLOAD_LIMIT));
        integer(1, max, true).build()
    }

    /// `types`: at most `MAX_TYPES` job type names (or `null`).
    pub(crate) fn types() -> utoipa::openapi::Array {
        use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, SchemaType, Type};
        use utoipa::openapi::{RefOr, Schema};
        let item: RefOr<Schema> = ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::String))
            .min_length(Some(1))
            .max_length(Some(64))
            .pattern(Some("^[A-Za-z0-9_.-]+$"))
            .build()
            .into();
        ArrayBuilder::new()
            .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
            .items(item)
            .max_items(Some(super::MAX_TYPES))
            .build()
    }

    /// `max_fires_per_s` in a change of settings: 0 (no limit) to `MAX_FIRES_PER_S`.
    pub(crate) fn max_fires_per_s() -> Object {
        integer(0, i64::from(super::MAX_FIRES_PER_S), true).build()
    }

    /// A backoff's `base_ms` and `max_ms`: a delay up to `MAX_DELAY_MS`.
    pub(crate) fn backoff_ms() -> Object {
        integer(0, crate::time::MAX_DELAY_MS, true).build()
    }

    /// A backoff's `factor`: 1 to `MAX_BACKOFF_FACTOR`.
    pub(crate) fn factor() -> Object {
        number(1.0, super::MAX_BACKOFF_FACTOR).build()
    }

    /// A backoff's `jitter`: 0 to below 1.
    pub(crate) fn jitter() -> Object {
        number(0.0, super::MAX_DESCRIBED_JITTER).build()
    }
}

/// Retry delay: `base_ms * factor^(attempt-1)`, capped at `max_ms`, then spread by
/// `±jitter` (a fraction) so retries of many jobs that failed together do not return together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Backoff {
    /// The first retry's delay, in ms.
    pub base_ms: u64,
    /// What each later delay is multiplied by.
    pub factor: f64,
    /// The longest delay, in ms.
    pub max_ms: u64,
    /// Random spread of each delay, as a fraction of it (0.1: ±10%).
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base_ms: 1_000,
            factor: 2.0,
            max_ms: 600_000,
            jitter: 0.2,
        }
    }
}

impl Backoff {
    /// The delay before retry number `attempt` (1 for the first retry), without jitter.
    pub fn nominal_ms(&self, attempt: u32) -> u64 {
        let exp = i32::try_from(attempt.saturating_sub(1).min(64)).unwrap_or(64);
        let (base, max) = (
            crate::num::float(crate::num::signed(self.base_ms)),
            crate::num::float(crate::num::signed(self.max_ms)),
        );
        crate::num::float_ms((base * self.factor.powi(exp)).min(max))
    }

    /// The delay before retry number `attempt`, with jitter drawn from `rng`.
    pub fn delay_ms(&self, attempt: u32, rng: &mut impl Rng) -> u64 {
        let nominal = crate::num::float(crate::num::signed(self.nominal_ms(attempt)));
        let spread = if self.jitter > 0.0 {
            rng.random_range(-self.jitter..=self.jitter)
        } else {
            0.0
        };
        crate::num::float_ms((nominal * (1.0 + spread)).max(0.0))
    }

    fn validate(&self) -> Result<()> {
        if self.factor < 1.0 || self.factor > MAX_BACKOFF_FACTOR || !self.factor.is_finite() {
            return Err(Error::invalid(
                "backoff.factor",
                format!("must be a number from 1 to {MAX_BACKOFF_FACTOR}"),
            ));
        }
        if !(0.0..1.0).contains(&self.jitter) {
            return Err(Error::invalid("backoff.jitter", "must be in [0, 1)"));
        }
        let max_delay = crate::time::MAX_DELAY_MS as u64;
        if self.base_ms > max_delay {
            return Err(Error::invalid(
                "backoff.base_ms",
                format!("must be at most {max_delay}"),
            ));
        }
        if self.max_ms > max_delay {
            return Err(Error::invalid(
                "backoff.max_ms",
                format!("must be at most {max_delay}"),
            ));
        }
        Ok(())
    }
}

/// A topic's settings. Unset fields take the defaults below (equal to `config/default.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TopicConfig {
    /// The topic's name.
    pub name: String,
    /// Number of shards, a power of two from 1 to 4096. Once the topic exists it may only
    /// double (16 → 32): no job moves, and jobs written before the doubling are found in
    /// their old slots until they leave (see `draining_from`).
    pub slots: u32,
    /// Set by a doubling, read only: the slot count whose layout may still hold jobs
    /// written before the doubling ("old copies"). Lookups try a job's slot under every
    /// count from this one up; the store clears it once the old slots hold no old copy.
    /// `None` when the topic has never doubled or has drained.
    #[schema(read_only)]
    pub draining_from: Option<u32>,
    /// Attempts before a failing job goes to the dead letters.
    pub max_attempts: u32,
    /// How long a run holds its job before the job is due again (the lease).
    pub visibility_timeout_ms: u64,
    /// How failed runs are retried.
    pub backoff: Backoff,
    /// Largest payload accepted, in bytes of JSON.
    pub max_payload_bytes: usize,
    /// The job type of a job that names none. Jobs of this type without payload cost no
    /// more than their sorted-set entry in Redis.
    pub default_type: String,
    /// Paused: no job fires and no claim is served, on any instance, while jobs, resets and
    /// cancels are still accepted; on resume what came due fires, in fire-time order.
    pub paused: bool,
    /// The most fires per second (pumps for handler topics, claims for pull topics), over
    /// every instance together; `None`: no limit. Due jobs past it wait, in fire-time order.
    pub max_fires_per_s: Option<u32>,
    /// Every flow key's limits (a rate per period, a parallelism, or both): due jobs whose
    /// key has no room wait, in fire-time order, and fire as soon as it has; `None`: a key
    /// has no limit unless `flows` gives it one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<crate::flow::FlowLimits>,
    /// Keys with limits of their own, in place of `flow` (`PUT /v1/topics/{topic}/flows/{key}`).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schema(read_only)]
    pub flows: std::collections::BTreeMap<String, crate::flow::FlowLimits>,
    /// The imports applied to the topic (`toc import`), each the digest of the topic's lines
    /// in its export: the same lines imported again change nothing. The newest last, at most
    /// 16.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(read_only)]
    pub imports: Vec<String>,
    /// The job types its jobs have beside `default_type`: only an instance that runs every
    /// one of them (and `default_type`) takes the topic's slots, so no job reaches an
    /// instance that cannot run it, and while no live instance runs them the jobs wait
    /// (`toc_topic_unserved`). A job of a type that is not built in names its type here
    /// when it is written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    /// The tenant that made the topic (the topic pattern of its token, `crate::tenant`), set
    /// when it is made: its topics, slots and webhook calls count against that tenant's
    /// shares, and a `write` token of that tenant may delete it. `None`: made by the
    /// operator (a token for every topic, or auth off).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(read_only)]
    pub tenant: Option<String>,
    /// Which events its runs append to the topic's event stream: `all` (the default),
    /// `changes` (all but `job.done`: a run that ends as it should leaves none) or `none`.
    /// Events posted through `POST …/events` are appended whatever it says.
    #[serde(skip_serializing_if = "RunEvents::is_all")]
    pub events: RunEvents,
}

/// Which events a topic's runs append to its stream (`TopicConfig::events`). Fewer events
/// cost a fire less: a burst's `job.done` events are most of what its settles write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunEvents {
    /// Every event: the runtime's own (`job.done`, `job.retry`, `job.repeat`, `job.dead`)
    /// and those its handlers emit (`job.fired` of `emit` among them).
    #[default]
    All,
    /// Every event but `job.done`.
    Changes,
    /// No event of a run.
    None,
}

impl RunEvents {
    /// Whether a run's event named `event` is appended.
    pub fn keeps(self, event: &str) -> bool {
        match self {
            RunEvents::All => true,
            RunEvents::Changes => event != crate::events::kind::DONE,
            RunEvents::None => false,
        }
    }

    /// Its name, as the topic's JSON and `lua/settle.lua` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunEvents::All => "all",
            RunEvents::Changes => "changes",
            RunEvents::None => "none",
        }
    }

    fn is_all(&self) -> bool {
        *self == RunEvents::All
    }
}

/// Read from its name, an error naming the field (`events`), which a derived enum's would not.
impl<'de> Deserialize<'de> for RunEvents {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        [RunEvents::All, RunEvents::Changes, RunEvents::None]
            .into_iter()
            .find(|e| e.as_str() == name)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "events must be \"all\", \"changes\" or \"none\", got {name:?}"
                ))
            })
    }
}

/// How many job types a topic may name (`TopicConfig::types`).
pub(crate) const MAX_TYPES: usize = 32;

/// How many import digests a topic keeps.
pub(crate) const MAX_IMPORTS: usize = 16;

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            name: String::new(),
            slots: 16,
            draining_from: None,
            max_attempts: 16,
            visibility_timeout_ms: 30_000,
            backoff: Backoff::default(),
            max_payload_bytes: 64 * 1024,
            default_type: "emit".to_string(),
            paused: false,
            max_fires_per_s: None,
            flow: None,
            flows: std::collections::BTreeMap::new(),
            imports: Vec::new(),
            types: Vec::new(),
            tenant: None,
            events: RunEvents::All,
        }
    }
}

/// The default type that makes a topic a pull topic (`crate::jobs::pull`): its jobs wait,
/// due, for consumers to claim them, and its slots have no slot actors.
pub(crate) const PULL_TYPE: &str = "pull";

impl TopicConfig {
    /// Whether its jobs wait for consumers to claim them over HTTP (its default type is
    /// `pull`).
    pub fn is_pull(&self) -> bool {
        self.default_type == PULL_TYPE
    }

    /// A topic named `name` with every other setting at its default.
    pub fn named(name: impl Into<String>) -> Self {
        TopicConfig {
            name: name.into(),
            ..TopicConfig::default()
        }
    }

    /// Checks every setting, naming the first one that is wrong.
    pub fn validate(&self) -> Result<()> {
        crate::validate::topic_name(&self.name)?;
        if !self.slots.is_power_of_two() || self.slots > MAX_SLOTS {
            return Err(Error::invalid(
                "slots",
                format!(
                    "must be a power of two from 1 to {MAX_SLOTS}, got {}",
                    self.slots
                ),
            ));
        }
        if !(1..=MAX_ATTEMPTS).contains(&self.max_attempts) {
            return Err(Error::invalid(
                "max_attempts",
                format!("must be 1 to {MAX_ATTEMPTS}, got {}", self.max_attempts),
            ));
        }
        if !(1..=MAX_VISIBILITY_TIMEOUT_MS).contains(&self.visibility_timeout_ms) {
            return Err(Error::invalid(
                "visibility_timeout_ms",
                format!(
                    "must be 1 to {MAX_VISIBILITY_TIMEOUT_MS} (a day), got {}",
                    self.visibility_timeout_ms
                ),
            ));
        }
        if !(1..=MAX_PAYLOAD_LIMIT).contains(&self.max_payload_bytes) {
            return Err(Error::invalid(
                "max_payload_bytes",
                format!(
                    "must be 1 to {MAX_PAYLOAD_LIMIT}, got {}",
                    self.max_payload_bytes
                ),
            ));
        }
        if let Some(rate) = self.max_fires_per_s
            && !(1..=MAX_FIRES_PER_S).contains(&rate)
        {
            return Err(Error::invalid(
                "max_fires_per_s",
                format!("must be 1 to {}, got {rate}", MAX_FIRES_PER_S),
            ));
        }
        self.check_flows()?;
        self.check_names()?;
        self.backoff.validate()
    }

    /// The flow limits: the topic's, and at most `MAX_FLOW_KEYS` keys' own.
    fn check_flows(&self) -> Result<()> {
        if let Some(flow) = &self.flow {
            flow.validate("flow")?;
        }
        if self.flows.len() > crate::flow::MAX_FLOW_KEYS {
            return Err(Error::invalid(
                "flows",
                format!(
                    "at most {} keys may have limits of their own, got {}",
                    crate::flow::MAX_FLOW_KEYS,
                    self.flows.len()
                ),
            ));
        }
        for (key, limits) in &self.flows {
            crate::flow::check_key(key)?;
            limits.validate_own("flows")?;
        }
        Ok(())
    }

    /// The names the topic holds: imports' digests, its tenant, its job types.
    fn check_names(&self) -> Result<()> {
        if self.imports.len() > MAX_IMPORTS
            || self.imports.iter().any(|d| {
                d.is_empty()
                    || d.len() > 128
                    || !d.bytes().all(|b| b.is_ascii_alphanumeric() || b == b':')
            })
        {
            return Err(Error::invalid(
                "imports",
                format!("at most {MAX_IMPORTS} digests of letters, digits and ':'"),
            ));
        }
        if self
            .tenant
            .as_ref()
            .is_some_and(|t| t.is_empty() || t.len() > 512)
        {
            return Err(Error::invalid("tenant", "1 to 512 characters"));
        }
        if self.types.len() > MAX_TYPES {
            return Err(Error::invalid(
                "types",
                format!("at most {MAX_TYPES} job types, got {}", self.types.len()),
            ));
        }
        for t in &self.types {
            crate::validate::job_type(t).map_err(|_| {
                Error::invalid(
                    "types",
                    format!("{t:?}: a type is 1 to 64 characters of [A-Za-z0-9_.-]"),
                )
            })?;
        }
        crate::validate::job_type(&self.default_type).map_err(|_| {
            Error::invalid(
                "default_type",
                "must be 1 to 64 characters of [A-Za-z0-9_.-]",
            )
        })?;
        Ok(())
    }

    /// Every job type the topic's jobs may have: `default_type`, then `types`.
    pub fn needs(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.default_type.as_str()).chain(self.types.iter().map(String::as_str))
    }

    /// Whether the topic names `job_type` (its `default_type` or one of its `types`).
    pub fn names(&self, job_type: &str) -> bool {
        self.needs().any(|t| t == job_type)
    }

    /// Whether an instance that runs `runs` may take the topic's slots: it runs every type
    /// the topic names.
    pub fn runs_on(&self, runs: &[String]) -> bool {
        self.needs().all(|t| runs.iter().any(|r| r == t))
    }

    /// The slots other than `home` that may hold an old copy of a job routed by `key`
    /// (its slot under each earlier count while the topic drains), newest layout first.
    pub(crate) fn old_slots(&self, key: &str) -> Vec<u32> {
        let Some(from) = self.draining_from else {
            return Vec::new();
        };
        let home = crate::routing::slot_of(key, self.slots);
        let mut out = Vec::new();
        let mut count = self.slots / 2;
        while count >= from.max(1) {
            let s = crate::routing::slot_of(key, count);
            if s != home && !out.contains(&s) {
                out.push(s);
            }
            count /= 2;
        }
        out
    }

    /// The limits of flow key `key`: its own, or the topic's `flow`.
    pub fn flow_limits(&self, key: &str) -> Option<crate::flow::FlowLimits> {
        self.flows.get(key).copied().or(self.flow)
    }

    /// Whether any flow key has limits.
    pub fn has_flow_limits(&self) -> bool {
        self.flow.is_some() || !self.flows.is_empty()
    }

    /// When a run that started at `now` must have reported.
    pub fn lease_deadline(&self, now: Millis) -> Millis {
        now.saturating_add(crate::num::millis(self.visibility_timeout_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Backoff::default();
        assert_eq!(b.nominal_ms(1), 1_000);
        assert_eq!(b.nominal_ms(2), 2_000);
        assert_eq!(b.nominal_ms(4), 8_000);
        assert_eq!(b.nominal_ms(30), 600_000);
    }

    #[test]
    fn backoff_jitter_stays_within_its_band() {
        let b = Backoff::default();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..1_000 {
            let d = b.delay_ms(3, &mut rng);
            assert!((3_200..=4_800).contains(&d), "{d}");
        }
    }

    #[test]
    fn topic_validation_names_the_field() {
        let mut t = TopicConfig::named("orders");
        assert!(t.validate().is_ok());
        t.slots = 12;
        assert!(matches!(
            t.validate(),
            Err(Error::Invalid { field: "slots", .. })
        ));
        t.slots = 8192;
        assert!(matches!(
            t.validate(),
            Err(Error::Invalid { field: "slots", .. })
        ));
        let bad = TopicConfig::named("a b");
        assert!(matches!(
            bad.validate(),
            Err(Error::Invalid { field: "topic", .. })
        ));
        let long = TopicConfig::named("x".repeat(129));
        assert!(matches!(
            long.validate(),
            Err(Error::Invalid { field: "topic", .. })
        ));
    }
}

//! Settings: the built-in defaults (`config/default.toml`, embedded so the two cannot
//! differ), a file layered over them, and `TOC_*` environment variables over both.

use std::net::SocketAddr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::{Table, Value};

use crate::error::{Error, Result};
use crate::jobs::webhook::WebhookSettings;
use crate::store::StoreOptions;
use crate::topic::TopicConfig;

/// The annotated defaults, as shipped in `config/default.toml`.
pub const DEFAULTS: &str = include_str!("../config/default.toml");

/// `TOC_*` variables that belong to the command line, not to the service's settings: the
/// client commands' address and token, the settings file's path, and the load generator's
/// Redis. `Settings::load` passes over them, so one shell can run both `toc serve` and the
/// client commands.
pub const CLIENT_VARIABLES: &[&str] =
    &["TOC_URL", "TOC_TOKEN", "TOC_CONFIG", "TOC_BENCH_REDIS_URL"];

/// Which store engine the service runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// The embedded engine (the default): a timing wheel in process, with an optional journal.
    Memory,
    /// Redis, a single node or a Redis Cluster.
    Redis,
}

/// How the service writes its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// `memory.journal`'s word for no journal at all.
pub const MEMORY_ONLY: &str = "none";

/// The service's settings: `config/default.toml`, then a `--config` file, then `TOC_*` variables.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The store engine.
    pub store: StoreKind,
    /// Where `toc serve` keeps what it writes by default: the memory engine's journal
    /// (`DATA_DIR/journal`) when `memory.journal` is not set. Made 0700.
    pub data_dir: PathBuf,
    /// The HTTP address to listen on.
    pub listen: SocketAddr,
    /// Bearer tokens the API accepts; auth is off when empty.
    pub tokens: Vec<String>,
    /// Whether `/health` and `/metrics` need a token too.
    pub auth_health_and_metrics: bool,
    /// Start although listening beyond loopback with no tokens.
    pub allow_open: bool,
    /// Log format.
    pub log_format: LogFormat,
    /// HTTP limits.
    pub http: HttpSettings,
    /// The Redis store's connection.
    pub redis: RedisSettings,
    /// The memory store's journal.
    pub memory: MemorySettings,
    /// The actor runtime.
    pub runtime: RuntimeSettings,
    /// Topics: auto-creation, defaults and the topics created at start.
    pub topics: TopicsSettings,
    /// The `webhook` job type: egress policy, redirects, proxy, signing keys.
    pub webhooks: WebhookSettings,
    /// What callers may ask of the service: topics, slots, periods, retries, long polls.
    pub limits: LimitsSettings,
    /// OpenTelemetry traces.
    pub otel: OtelSettings,
}

/// `[otel]`: kept with the traces it sets (`crate::otel`).
pub use crate::otel::OtelSettings;
/// `[memory]`: kept with the memory engine (`store/memory/settings.rs`).
pub use crate::store::memory::settings::{FsyncPolicy, MemorySettings};
/// `[redis]`: kept with the Redis engine (`store/redis/settings.rs`).
pub use crate::store::redis::settings::{Durability, RedisSettings};

/// Limits the operator sets on what callers may ask; every refusal is a 4xx naming the
/// limit and its setting, and changes nothing.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSettings {
    /// Most topics (0: no limit).
    pub max_topics: usize,
    /// Most slots of every topic together (0: no limit).
    pub max_total_slots: u64,
    /// Most jobs of one topic, in every state (0: no limit): one team's writer cannot fill
    /// the store that every team shares.
    #[serde(default = "default_max_jobs_per_topic")]
    pub max_jobs_per_topic: u64,
    /// Most bytes of one topic's job records, about (0: no limit): payloads, types, labels
    /// and errors, as the store measures them.
    #[serde(default = "default_max_bytes_per_topic")]
    pub max_bytes_per_topic: u64,
    /// The shortest `repeat.every_ms` a job may ask for, in ms.
    pub min_every_ms: u64,
    /// The shortest retry delay a caller may set (a topic's `backoff.base_ms`, a consumer's
    /// retry `delay_ms`), in ms.
    pub min_retry_delay_ms: u64,
    /// Most long polls (claims with `wait_ms`) waiting at once on this instance; beyond it
    /// 429 with `Retry-After` (0: no limit).
    pub max_long_polls: usize,
    /// Most topics one tenant (a token's topic pattern, `crate::tenant`) may make; 409
    /// past it (0: no limit). The operator (a token for every topic, auth off) has none.
    #[serde(default = "default_max_topics_per_tenant")]
    pub max_topics_per_tenant: usize,
    /// Most slots of one tenant's topics together (0: no limit).
    #[serde(default = "default_max_slots_per_tenant")]
    pub max_slots_per_tenant: u64,
    /// Most jobs of one tenant's topics together, in every state (0: no limit): making more
    /// topics buys a tenant no more of the store.
    #[serde(default = "default_max_jobs_per_tenant")]
    pub max_jobs_per_tenant: u64,
    /// Most bytes of one tenant's job records, about, over all its topics (0: no limit).
    #[serde(default = "default_max_bytes_per_tenant")]
    pub max_bytes_per_tenant: u64,
    /// Most long polls one tenant may have waiting at once on this instance; 429 past it
    /// (0: no limit), so one team's long polls cannot take every other team's.
    #[serde(default = "default_max_long_polls_per_tenant")]
    pub max_long_polls_per_tenant: usize,
    /// How far in the past a `fire_at` may be, in ms: further is surely a mistake (a caller
    /// meaning "now" sends `delay_ms: 0`), refused 422 (0: any past instant is taken, due
    /// now).
    #[serde(default = "default_max_past_ms")]
    pub max_past_ms: u64,
}

fn default_max_past_ms() -> u64 {
    3_600_000
}

fn default_max_topics_per_tenant() -> usize {
    250
}

fn default_max_slots_per_tenant() -> u64 {
    4096
}

/// Twice a topic's: a tenant may fill two topics to their most, not 250.
fn default_max_jobs_per_tenant() -> u64 {
    2 * default_max_jobs_per_topic()
}

/// Twice a topic's, 4 GiB.
fn default_max_bytes_per_tenant() -> u64 {
    2 * default_max_bytes_per_topic()
}

fn default_max_long_polls_per_tenant() -> usize {
    250
}

/// Limits on what the HTTP API accepts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSettings {
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Largest body of a batch request (`resets`), in bytes.
    pub max_batch_body_bytes: usize,
    /// Most resets in one batch request.
    pub max_batch_resets: usize,
    /// How long a request's body may take to arrive, in ms (408 past it).
    pub body_timeout_ms: u64,
    /// With auth off, host names a request's `Host` may carry besides IP addresses and
    /// `localhost`.
    pub allowed_hosts: Vec<String>,
    /// How often the instance keeps a step of its recent past (`GET /v1/history`: each
    /// topic's fires and claims a second), in ms.
    pub history_every_ms: u64,
    /// How long it keeps those steps, in ms.
    pub history_keep_ms: u64,
    /// Most topics a step keeps (the busiest).
    pub history_max_topics: usize,
}

impl HttpSettings {
    /// Refuses fields out of range, naming each as `http.FIELD`.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.max_batch_resets == 0 {
            return Err(Error::invalid(
                "http.max_batch_resets",
                "must be at least 1",
            ));
        }
        if !(1_000..=3_600_000).contains(&self.history_every_ms) {
            return Err(Error::invalid(
                "http.history_every_ms",
                "must be 1,000 to 3,600,000 (a second to an hour)",
            ));
        }
        if !(self.history_every_ms..=7 * 86_400_000).contains(&self.history_keep_ms) {
            return Err(Error::invalid(
                "http.history_keep_ms",
                "must be from http.history_every_ms to 604,800,000 (a week)",
            ));
        }
        if !(1..=100_000).contains(&self.history_max_topics) {
            return Err(Error::invalid(
                "http.history_max_topics",
                "must be 1 to 100,000",
            ));
        }
        Ok(())
    }
}

/// The actor runtime's settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeSettings {
    /// The round of the instance's safety net, in ms: how often the heads of the slots it
    /// owns are read, so that a job whose wake notice was lost is found (notices normally
    /// come first).
    pub poll_ms: u64,
    /// How long the safety net takes to read the head of every slot the instance owns, in
    /// ms: each round reads its share, so a lost notice is found within this (its own
    /// listener's reconnections are not lost: they make it read every slot at once). At most
    /// `poll_ms` reads every slot each round.
    pub safety_net_ms: u64,
    /// The most slot heads the safety net's sweep reads per second (two commands each on
    /// Redis): with more slots than `safety_net_ms` allows at this rate, the sweep takes
    /// longer (owned slots / this), and the store's load stays bounded however many idle
    /// topics there are. Notices are not affected: every new head is told to its slot.
    #[serde(default = "default_safety_net_reads_per_s")]
    pub safety_net_reads_per_s: u64,
    /// How far ahead a slot's next time must be, in ms, for its actor to be put to sleep
    /// once it has nothing in flight: the slot keeper then holds the slot's next time and
    /// starts a new actor at it, at a notice or when the safety net finds an earlier head.
    /// A dormant slot holds no actor, timer or mailbox (idle topics cost little memory);
    /// a slot busier than this keeps its actor. 0: every idle slot goes to sleep.
    #[serde(default = "default_dormant_after_ms")]
    pub dormant_after_ms: u64,
    /// Most jobs one pump leases out.
    pub pump_batch: usize,
    /// Most due jobs one slot holds waiting for room on their flow keys: past it the slot
    /// leases no more until some have fired (other keys' jobs then wait too), which bounds
    /// the memory a key with no room can take.
    #[serde(default = "default_flow_max_waiting")]
    pub flow_max_waiting: usize,
    /// Most of those one flow key may hold: a run of a key past it waits in the store, due
    /// again when the runs ahead of it have likely had room, so one key's backlog never
    /// stops the slot leasing other keys' jobs.
    #[serde(default = "default_flow_max_waiting_per_key")]
    pub flow_max_waiting_per_key: usize,
    /// How long a stopping service waits for running jobs, in ms.
    pub grace_ms: u64,
    /// About how many events a topic's stream keeps.
    pub events_max_len: usize,
    /// About how many bytes a topic's event stream keeps on the memory engine.
    pub events_max_bytes: usize,
    /// About how many bytes every topic's event streams keep together on the memory engine.
    #[serde(default = "default_events_max_bytes_total")]
    pub events_max_bytes_total: usize,
    /// Threads (actix arbiters) the slot actors are spread over; 0: one per core.
    pub workers: usize,
    /// Job types this instance accepts without running them: another instance sharing the
    /// store registers them. Their payload is not checked here.
    #[serde(default)]
    pub foreign_types: Vec<String>,
    /// This instance's name among those sharing the store, for slot owners; empty: `toc
    /// serve` uses host name and HTTP port (the same at each start, so a restarted process
    /// takes its predecessor's slots over at once), a library's center host name, process id
    /// and a random part. Two live processes must not share a name (docs/operations.md).
    #[serde(default)]
    pub instance: String,
    /// How long an instance's registration and a slot's owner lease last, in ms. The
    /// registration is renewed every third of it (a slot's lease is taken once and not
    /// renewed while the membership stands); a dead instance's slots are taken over within
    /// two.
    #[serde(default = "default_owner_lease_ms")]
    pub owner_lease_ms: u64,
    /// How long before its fire time a slot's pump may lease a job, in ms: the job is held
    /// in the process until it is due, so the store's round trip is paid before the fire
    /// rather than after. 0: a job is leased only once due.
    #[serde(default = "default_fire_lead_ms")]
    pub fire_lead_ms: u64,
    /// How long the lead may grow, in ms, while the store's round trip runs past
    /// `fire_lead_ms`: a slot's lead follows its slowest recent pump (plus 1 ms) between
    /// the two (and within a tenth of the topic's visibility timeout), so a loaded or distant
    /// store still has its round trip paid before the fire.
    /// At or below `fire_lead_ms` (or with `fire_lead_ms` 0) the lead stays fixed.
    #[serde(default = "default_fire_lead_max_ms")]
    pub fire_lead_max_ms: u64,
    /// How far past its next fire time a slot's pump also leases jobs, and how long a
    /// finished run's outcome may wait for those of the slot's other runs, in ms: under load
    /// one pump and one settle carry several fires. 0: a pump takes what is due by its lead,
    /// and an outcome is settled at once.
    #[serde(default = "default_batch_window_ms")]
    pub batch_window_ms: u64,
}

/// 400 Redis commands a second per instance, at most, for the sweep: 16,000 slots (1,000
/// topics) are swept in 80 s, 160,000 in about 13 minutes.
fn default_safety_net_reads_per_s() -> u64 {
    200
}

/// A slot whose next job is more than a second away sleeps: starting its actor again costs
/// a few microseconds, paid within the fire lead.
fn default_flow_max_waiting() -> usize {
    10_000
}

/// Ten million jobs a topic: about 1 GB of memory on the embedded store, far below a
/// heartbeat fleet's need of one topic, far above what a runaway writer should take.
fn default_max_jobs_per_topic() -> u64 {
    10_000_000
}

/// Two GiB of job records a topic (payloads, types, labels, errors): about seven million
/// webhook jobs of 300 bytes, while 36 writers of 60 KB payloads can no longer take a
/// machine's memory in seconds.
fn default_max_bytes_per_topic() -> u64 {
    2 << 30
}

/// Every topic's events together: 256 MiB, four topics at `events_max_bytes`.
fn default_events_max_bytes_total() -> usize {
    256 << 20
}

/// A tenth of the slot's waiting room: ten keys without room fill it.
fn default_flow_max_waiting_per_key() -> usize {
    1_000
}

fn default_dormant_after_ms() -> u64 {
    1_000
}

fn default_owner_lease_ms() -> u64 {
    5_000
}

/// Above a loaded Redis's usual round trip, and short enough that a reset arriving this close
/// to a fire time is as rare as one racing the pump's round trip.
fn default_fire_lead_ms() -> u64 {
    2
}

/// Covers a loaded Redis's slow round trips, and keeps the reset race they open (a reset
/// within the lead before a fire time finds the job running) to a few milliseconds.
fn default_fire_lead_max_ms() -> u64 {
    20
}

/// The most `runtime.fire_lead_ms` and `runtime.fire_lead_max_ms` may be: a job leased ahead
/// holds its lease meanwhile.
pub const MAX_FIRE_LEAD_MS: u64 = 100;

/// A few fires per slot pump at 10,000 fires/s over 16 slots, and a reset arriving this
/// close to a fire time still rare (it finds the job running: it fires, then runs again).
fn default_batch_window_ms() -> u64 {
    5
}

/// The most `runtime.batch_window_ms` may be: jobs leased ahead hold their leases meanwhile.
pub const MAX_BATCH_WINDOW_MS: u64 = 100;

impl RuntimeSettings {
    /// How far past its next fire time a slot's pump also leases jobs, and how long an
    /// outcome may wait for the slot's other runs (`batch_window_ms`).
    pub(crate) fn batch_window(&self) -> crate::time::Millis {
        crate::num::millis(self.batch_window_ms)
    }

    /// Refuses fields out of range, naming each as `runtime.FIELD`.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.poll_ms == 0 {
            return Err(Error::invalid("runtime.poll_ms", "must be at least 1"));
        }
        if self.safety_net_reads_per_s == 0 {
            return Err(Error::invalid(
                "runtime.safety_net_reads_per_s",
                "must be at least 1",
            ));
        }
        if self.safety_net_ms == 0 {
            return Err(Error::invalid(
                "runtime.safety_net_ms",
                "must be at least 1",
            ));
        }
        if self.owner_lease_ms < 30 {
            return Err(Error::invalid(
                "runtime.owner_lease_ms",
                "must be at least 30 (the registration is renewed every third of it)",
            ));
        }
        if !self.instance.is_empty() {
            crate::validate::instance(&self.instance).map_err(|_| {
                Error::invalid(
                    "runtime.instance",
                    "must be 1 to 128 characters of [A-Za-z0-9_.-]",
                )
            })?;
        }
        if self.fire_lead_ms > MAX_FIRE_LEAD_MS {
            return Err(Error::invalid(
                "runtime.fire_lead_ms",
                format!("must be at most {MAX_FIRE_LEAD_MS}"),
            ));
        }
        if self.fire_lead_max_ms > MAX_FIRE_LEAD_MS {
            return Err(Error::invalid(
                "runtime.fire_lead_max_ms",
                format!("must be at most {MAX_FIRE_LEAD_MS}"),
            ));
        }
        if self.batch_window_ms > MAX_BATCH_WINDOW_MS {
            return Err(Error::invalid(
                "runtime.batch_window_ms",
                format!("must be at most {MAX_BATCH_WINDOW_MS}"),
            ));
        }
        if self.pump_batch == 0 {
            return Err(Error::invalid("runtime.pump_batch", "must be at least 1"));
        }
        let per_key = self.flow_max_waiting_per_key;
        if per_key == 0 || per_key > self.flow_max_waiting {
            return Err(Error::invalid(
                "runtime.flow_max_waiting_per_key",
                format!(
                    "must be 1 to runtime.flow_max_waiting ({})",
                    self.flow_max_waiting
                ),
            ));
        }
        Ok(())
    }

    /// The number of slot-actor threads to start.
    pub fn worker_threads(&self) -> usize {
        match self.workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    /// How long the safety net takes to read every slot once: `safety_net_ms`, and at
    /// least one round.
    pub fn net_sweep_ms(&self) -> u64 {
        self.safety_net_ms.max(self.poll_ms)
    }
}

/// How topics come to exist.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicsSettings {
    /// Create a topic with `defaults` the first time a job names it.
    pub auto_create: bool,
    /// The settings of an auto-created topic (its name aside).
    pub defaults: TopicConfig,
    /// Topics created or updated at start.
    #[serde(default)]
    pub seed: Vec<TopicConfig>,
}

impl TopicsSettings {
    /// Refuses defaults or seeded topics that a `PUT` of the topic would refuse.
    pub(crate) fn validate(&self) -> Result<()> {
        let probe = TopicConfig {
            name: "defaults".into(),
            ..self.defaults.clone()
        };
        probe.validate().map_err(|e| match e {
            Error::Invalid { field, message } => {
                Error::invalid("topics.defaults", format!("{field}: {message}"))
            }
            other => other,
        })?;
        for t in &self.seed {
            t.validate()?;
        }
        Ok(())
    }
}

impl Settings {
    /// The built-in defaults alone.
    pub fn defaults() -> Settings {
        Settings::load(None, std::iter::empty()).expect("the built-in defaults are valid")
    }

    /// Defaults, then `file`, then the `TOC_*` variables among `env`. An error names the
    /// setting (or file) that is wrong.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings> {
        let mut table: Table = DEFAULTS
            .parse()
            .map_err(|e| Error::invalid("config", format!("built-in defaults: {e}")))?;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Error::invalid("config", format!("cannot read {}: {e}", path.display()))
            })?;
            let over: Table = text
                .parse()
                .map_err(|e| Error::invalid("config", format!("{}: {e}", path.display())))?;
            merge(&mut table, over);
        }
        let defaults = table.clone();
        for (name, value) in env {
            if CLIENT_VARIABLES.contains(&name.as_str()) {
                continue;
            }
            if let Some(rest) = name.strip_prefix("TOC_") {
                apply_env(&mut table, &defaults, &name, rest, &value)?;
            }
        }
        // Seeded topics start from topics.defaults.
        if let Some(Value::Table(topics)) = table.get_mut("topics") {
            let base = topics
                .get("defaults")
                .cloned()
                .unwrap_or(Value::Table(Table::new()));
            if let Some(Value::Array(seeds)) = topics.get_mut("seed") {
                for seed in seeds.iter_mut() {
                    let mut full = base.clone();
                    if let (Value::Table(full_t), Value::Table(seed_t)) = (&mut full, seed.clone())
                    {
                        merge(full_t, seed_t);
                    }
                    *seed = full;
                }
            }
        }
        let settings: Settings =
            serde_path_to_error::deserialize(Value::Table(table)).map_err(|e| {
                Error::invalid("config", format!("{}: {}", e.path(), e.inner().message()))
            })?;
        settings.validate()?;
        Ok(settings)
    }

    /// Checks settings changed after they were loaded (`toc serve --listen`).
    pub(crate) fn check(&self) -> Result<()> {
        self.validate()
    }

    /// Each part of the settings checks its own fields, as each loads its own part.
    fn validate(&self) -> Result<()> {
        self.topics.validate()?;
        self.otel.validate()?;
        self.runtime.validate()?;
        self.http.validate()?;
        self.webhooks
            .validate()
            .map_err(|(field, message)| Error::invalid(field, message))?;
        for (i, t) in self.tokens.iter().enumerate() {
            crate::access::Grant::parse(t)
                .map_err(|e| Error::invalid("tokens", format!("token {}: {e}", i + 1)))?;
        }
        if self.tokens.is_empty() && !self.listen.ip().is_loopback() && !self.allow_open {
            return Err(Error::invalid(
                "allow_open",
                format!(
                    "listening on {} with no tokens lets anyone who reaches it drive the service: set tokens, listen on loopback, or set allow_open = true",
                    self.listen
                ),
            ));
        }
        Ok(())
    }

    /// The options the store is opened with.
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            auto_create_topics: self.topics.auto_create,
            topic_defaults: self.topics.defaults.clone(),
            events_max_len: self.runtime.events_max_len,
            events_max_bytes: self.runtime.events_max_bytes,
            events_max_bytes_total: self.runtime.events_max_bytes_total,
            max_topics: (self.limits.max_topics > 0).then_some(self.limits.max_topics),
            max_total_slots: (self.limits.max_total_slots > 0)
                .then_some(self.limits.max_total_slots),
            max_jobs_per_topic: (self.limits.max_jobs_per_topic > 0)
                .then_some(self.limits.max_jobs_per_topic),
            max_bytes_per_topic: (self.limits.max_bytes_per_topic > 0)
                .then_some(self.limits.max_bytes_per_topic),
            max_topics_per_tenant: (self.limits.max_topics_per_tenant > 0)
                .then_some(self.limits.max_topics_per_tenant),
            max_slots_per_tenant: (self.limits.max_slots_per_tenant > 0)
                .then_some(self.limits.max_slots_per_tenant),
            max_jobs_per_tenant: (self.limits.max_jobs_per_tenant > 0)
                .then_some(self.limits.max_jobs_per_tenant),
            max_bytes_per_tenant: (self.limits.max_bytes_per_tenant > 0)
                .then_some(self.limits.max_bytes_per_tenant),
        }
    }

    /// The journal path, when durability is on (`memory.journal` neither empty nor `none`).
    pub fn journal(&self) -> Option<&Path> {
        let j = self.memory.journal.as_path();
        (!j.as_os_str().is_empty() && j != Path::new(MEMORY_ONLY)).then_some(j)
    }

    /// `toc serve`'s durable default: on the memory engine with `memory.journal` unset, the
    /// journal goes to `DATA_DIR/journal`, the directory made private (0700) if missing.
    /// Answers whether the service keeps nothing across a restart (`memory.journal = none`).
    pub fn durable_default(&mut self) -> Result<bool> {
        if self.store != StoreKind::Memory {
            return Ok(false);
        }
        if self.memory.journal.as_os_str().is_empty() {
            let dir = &self.data_dir;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| {
                    Error::invalid("data_dir", format!("cannot make {}: {e}", dir.display()))
                })?;
            self.memory.journal = dir.join("journal");
            return Ok(false);
        }
        Ok(self.memory.journal == Path::new(MEMORY_ONLY))
    }
}

fn merge(base: &mut Table, over: Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(Value::Table(b)), Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// Sets the leaf whose path, joined by `_` and upper-cased, is `rest`, parsing `value` as the
/// type the default has there. Keys may contain `_` themselves, so the path is searched.
fn apply_env(
    table: &mut Table,
    defaults: &Table,
    name: &str,
    rest: &str,
    value: &str,
) -> Result<()> {
    let Some(path) = find_path(defaults, rest) else {
        return Err(Error::invalid(
            "environment",
            format!("{name} names no setting (see config/default.toml)"),
        ));
    };
    let mut node = table;
    for key in &path[..path.len() - 1] {
        node = match node.get_mut(key) {
            Some(Value::Table(t)) => t,
            _ => unreachable!("find_path follows tables"),
        };
    }
    let leaf = &path[path.len() - 1];
    let parsed = parse_like(node.get(leaf), value).ok_or_else(|| {
        Error::invalid(
            "environment",
            format!("{name}={value:?} is not a valid value"),
        )
    })?;
    node.insert(leaf.clone(), parsed);
    Ok(())
}

fn find_path(table: &Table, rest: &str) -> Option<Vec<String>> {
    for (key, value) in table {
        let upper = key.to_ascii_uppercase();
        if rest == upper && !matches!(value, Value::Table(_)) {
            return Some(vec![key.clone()]);
        }
        if let (Some(tail), Value::Table(inner)) = (rest.strip_prefix(&format!("{upper}_")), value)
            && let Some(mut path) = find_path(inner, tail)
        {
            path.insert(0, key.clone());
            return Some(path);
        }
    }
    None
}

fn parse_like(current: Option<&Value>, text: &str) -> Option<Value> {
    Some(match current? {
        Value::String(_) => Value::String(text.to_string()),
        Value::Integer(_) => Value::Integer(text.trim().parse().ok()?),
        Value::Float(_) => Value::Float(text.trim().parse().ok()?),
        Value::Boolean(_) => Value::Boolean(match text.trim() {
            "true" | "1" | "yes" => true,
            "false" | "0" | "no" => false,
            _ => return None,
        }),
        Value::Array(_) => Value::Array(
            text.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_string()))
                .collect(),
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// `toc serve`'s durable default: an unset journal goes to `DATA_DIR/journal`, the
    /// directory made 0700; `none` is memory only, and says so.
    #[test]
    fn toc_serve_keeps_a_journal_in_its_data_dir_unless_told_none() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let mut s = Settings::load(None, env(&[("TOC_DATA_DIR", dir.to_str().unwrap())])).unwrap();
        assert_eq!(s.journal(), None, "a library's center: memory only");
        assert!(!s.durable_default().unwrap());
        assert_eq!(s.journal(), Some(dir.join("journal").as_path()));
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let mut none = Settings::load(None, env(&[("TOC_MEMORY_JOURNAL", "none")])).unwrap();
        assert!(
            none.durable_default().unwrap(),
            "memory only, said at start"
        );
        assert_eq!(none.journal(), None);
        let mut redis = Settings::load(None, env(&[("TOC_STORE", "redis")])).unwrap();
        assert!(!redis.durable_default().unwrap());
        assert_eq!(redis.journal(), None, "no journal on Redis");
    }

    #[test]
    fn the_defaults_are_the_annotated_file() {
        let s = Settings::defaults();
        assert_eq!(s.store, StoreKind::Memory);
        assert_eq!(s.listen.to_string(), "127.0.0.1:8080");
        assert!(s.tokens.is_empty());
        assert_eq!(s.topics.defaults.slots, 16);
        assert_eq!(s.topics.defaults.backoff.max_ms, 600_000);
        assert_eq!(s.journal(), None);
    }

    #[test]
    fn webhook_settings_load_and_bad_ones_are_named_without_their_secret() {
        let s = Settings::load(
            None,
            env(&[
                ("TOC_WEBHOOKS_ALLOW_NETS", "127.0.0.0/8, ::1"),
                ("TOC_WEBHOOKS_DENY_NETS", "127.0.0.9"),
                ("TOC_WEBHOOKS_MAX_REDIRECTS", "3"),
                (
                    "TOC_WEBHOOKS_SIGNING_KEYS",
                    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw,whsec_c2Vjb25kLWtleS1vZi10aGUtcm90YXRpb24=",
                ),
            ]),
        )
        .unwrap();
        let w = &s.webhooks;
        assert_eq!(
            (w.allow_nets.len(), w.deny_nets.len(), w.max_redirects),
            (2, 1, 3)
        );
        assert_eq!(w.keys_for("any").len(), 2);
        let shown = format!("{s:?}");
        assert!(!shown.contains("MfKQ9r8G"), "no key in Debug: {shown}");
        let refused = |k: &str, v: &str| {
            Settings::load(None, env(&[(k, v)]))
                .unwrap_err()
                .to_string()
        };
        let e = refused("TOC_WEBHOOKS_SIGNING_KEYS", "whsec_s3cr3t*not*base64");
        assert!(
            e.contains("webhooks.signing_keys") && !e.contains("s3cr3t"),
            "{e}"
        );
        let e = refused("TOC_WEBHOOKS_ALLOW_NETS", "10.0.0.0/33");
        assert!(e.contains("webhooks.allow_nets"), "{e}");
        let e = refused("TOC_WEBHOOKS_MAX_REDIRECTS", "11");
        assert!(e.contains("webhooks.max_redirects"), "{e}");
        let e = refused("TOC_WEBHOOKS_PROXY", "ftp://user:pa55@proxy/");
        assert!(e.contains("webhooks.proxy") && !e.contains("pa55"), "{e}");
        // The client has no SOCKS: every call would fail, so the start is refused.
        let e = refused("TOC_WEBHOOKS_PROXY", "socks5://proxy:1080");
        assert!(e.contains("webhooks.proxy") && e.contains("SOCKS"), "{e}");
        for (k, setting) in [
            ("TOC_WEBHOOKS_MAX_IN_FLIGHT", "webhooks.max_in_flight"),
            (
                "TOC_WEBHOOKS_MAX_IN_FLIGHT_PER_TOPIC",
                "webhooks.max_in_flight_per_topic",
            ),
            (
                "TOC_WEBHOOKS_MAX_IN_FLIGHT_PER_KEY",
                "webhooks.max_in_flight_per_key",
            ),
            ("TOC_WEBHOOKS_MAX_TIMEOUT_MS", "webhooks.max_timeout_ms"),
        ] {
            let e = refused(k, "0");
            assert!(e.contains(setting), "{e}");
        }
        let e = refused("TOC_WEBHOOKS_MAX_TIMEOUT_MS", "290001");
        assert!(e.contains("webhooks.max_timeout_ms"), "{e}");
    }

    #[test]
    fn tokens_are_checked_and_an_open_listener_needs_allow_open() {
        let e = Settings::load(None, env(&[("TOC_TOKENS", "s3cret:owner")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tokens") && e.contains("token 1") && !e.contains("s3cret"),
            "{e}"
        );
        let e = Settings::load(None, env(&[("TOC_LISTEN", "0.0.0.0:8080")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("allow_open"), "{e}");
        for ok in [
            env(&[("TOC_LISTEN", "0.0.0.0:8080"), ("TOC_ALLOW_OPEN", "true")]),
            env(&[("TOC_LISTEN", "0.0.0.0:8080"), ("TOC_TOKENS", "t:read")]),
            env(&[("TOC_LISTEN", "[::1]:8080")]),
        ] {
            assert!(Settings::load(None, ok).is_ok());
        }
    }

    #[test]
    fn environment_variables_override_by_path() {
        let s = Settings::load(
            None,
            env(&[
                ("TOC_STORE", "redis"),
                ("TOC_REDIS_URL", "redis://example:1/"),
                ("TOC_TOKENS", "a, b"),
                ("TOC_RUNTIME_POLL_MS", "60000"),
                ("TOC_TOPICS_DEFAULTS_SLOTS", "64"),
                ("TOC_MEMORY_JOURNAL", "/tmp/x.journal"),
                ("PATH", "/bin"),
            ]),
        )
        .unwrap();
        assert_eq!(s.store, StoreKind::Redis);
        assert_eq!(s.redis.url, "redis://example:1/");
        assert_eq!(s.tokens, ["a", "b"]);
        assert_eq!(s.runtime.poll_ms, 60_000);
        assert_eq!(s.topics.defaults.slots, 64);
        assert_eq!(s.journal(), Some(Path::new("/tmp/x.journal")));
    }

    #[test]
    fn the_command_line_variables_are_not_settings() {
        let s = Settings::load(
            None,
            env(&[
                ("TOC_URL", "http://127.0.0.1:9"),
                ("TOC_TOKEN", "secret"),
                ("TOC_CONFIG", "/nowhere.toml"),
                ("TOC_BENCH_REDIS_URL", "redis://example:1/"),
                ("TOC_TOKENS", "a"),
            ]),
        )
        .unwrap();
        assert_eq!(
            s.tokens,
            ["a"],
            "TOC_TOKENS is the service's and still applies"
        );
        assert_eq!(s.listen.to_string(), "127.0.0.1:8080");
    }

    #[test]
    fn a_bad_setting_is_named() {
        let err = Settings::load(None, env(&[("TOC_STORE", "mongo")])).unwrap_err();
        assert!(err.to_string().contains("store"), "{err}");
        let err = Settings::load(None, env(&[("TOC_RUNTIME_POLL_MS", "soon")])).unwrap_err();
        assert!(err.to_string().contains("TOC_RUNTIME_POLL_MS"), "{err}");
        let err = Settings::load(None, env(&[("TOC_NO_SUCH", "1")])).unwrap_err();
        assert!(err.to_string().contains("TOC_NO_SUCH"), "{err}");
        let err = Settings::load(None, env(&[("TOC_TOPICS_DEFAULTS_SLOTS", "3")])).unwrap_err();
        assert!(err.to_string().contains("slots"), "{err}");
        let err = Settings::load(None, env(&[("TOC_RUNTIME_FIRE_LEAD_MS", "101")])).unwrap_err();
        assert!(err.to_string().contains("runtime.fire_lead_ms"), "{err}");
        let s = Settings::load(None, env(&[("TOC_RUNTIME_FIRE_LEAD_MS", "0")])).unwrap();
        assert_eq!(s.runtime.fire_lead_ms, 0);
        assert_eq!(Settings::defaults().runtime.fire_lead_ms, 2);
        let err =
            Settings::load(None, env(&[("TOC_RUNTIME_FIRE_LEAD_MAX_MS", "101")])).unwrap_err();
        assert!(
            err.to_string().contains("runtime.fire_lead_max_ms"),
            "{err}"
        );
        assert_eq!(Settings::defaults().runtime.fire_lead_max_ms, 20);
        let err = Settings::load(None, env(&[("TOC_RUNTIME_BATCH_WINDOW_MS", "101")])).unwrap_err();
        assert!(err.to_string().contains("runtime.batch_window_ms"), "{err}");
        let s = Settings::load(None, env(&[("TOC_RUNTIME_BATCH_WINDOW_MS", "0")])).unwrap();
        assert_eq!(s.runtime.batch_window_ms, 0);
        assert_eq!(Settings::defaults().runtime.batch_window_ms, 5);
    }

    #[test]
    fn a_file_layers_over_the_defaults_and_seeds_topics() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "listen = \"127.0.0.1:9999\"\n[topics.defaults]\nmax_attempts = 3\n\n\
             [[topics.seed]]\nname = \"devices\"\nslots = 64\ndefault_type = \"device_offline\"\n",
        )
        .unwrap();
        let s = Settings::load(Some(&path), env(&[])).unwrap();
        assert_eq!(s.listen.port(), 9999);
        let seed = &s.topics.seed[0];
        assert_eq!(
            (seed.name.as_str(), seed.slots, seed.max_attempts),
            ("devices", 64, 3)
        );
        assert_eq!(seed.default_type, "device_offline");
    }
}

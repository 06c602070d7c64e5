//! [`Store`]: the one store type, over an engine (`Arc<dyn Engine>`, the Redis scripts or the
//! memory slots). It checks arguments, finds or creates topics, routes jobs to slots, groups
//! batches by slot, decodes cursors, clamps pages and builds the answers; the engine only
//! runs one slot's operation. Its constructors ([`Store::memory`], [`Store::redis`], ...) are
//! in `open.rs`, over what each engine's module makes; its calls are one file per concern:
//! `topics.rs`, `jobs.rs` (schedule, reset, cancel, get), `door.rs` (one slot's pump,
//! claim, settle, extend: `SlotDoor`), `runs.rs` (consumers' settles and touches across
//! slots), `members.rs` (registry and owners), `reads.rs` (dead letters, counts, events).

mod bulk;
pub(crate) mod door;
mod handouts;
mod jobs;
mod members;
mod open;
mod quota;
mod reads;
pub use bulk::JobFilter;
pub use reads::ListQuery;
mod runs;
mod topics;
pub(crate) mod transfer;

use std::collections::HashMap;
use std::sync::Arc;

use super::engine::{Engine, Refired, WakeBus};
use super::memory::MemoryEngine;
use super::topic_policy::StoreOptions;
use crate::error::{Error, Result};
use crate::model::{JobRef, Rearmed};
use crate::routing::slot_of;
use crate::time::{SharedClock, SteadyClock};
use crate::topic::TopicConfig;
use crate::validate;

/// Largest page of dead letters or events one call returns.
pub const MAX_PAGE: usize = 1_000;

/// A store of jobs: topics, their slots' jobs, dead letters and events, on the engine it was
/// made with (`Store::memory`, `Store::open_memory`, `Store::redis`,
/// `Store::redis_cluster`, `Store::open_redis`). Every method that changes a job is atomic
/// (one Lua script in Redis, one critical section in memory) and takes `now` as an argument,
/// so callers and tests choose the time. `Arc<Store>` ([`super::SharedStore`]) is what the
/// runtime and the HTTP layer hold.
pub struct Store {
    pub(crate) engine: Arc<dyn Engine>,
    /// The same engine when it is the memory engine, for what only it has (its journal).
    pub(crate) memory: Option<Arc<MemoryEngine>>,
    options: StoreOptions,
    /// Per draining topic, the slot where the last sweep found an old copy: the next sweep
    /// starts there, so a topic with old copies left costs a sweep little.
    sweep_from: std::sync::Mutex<HashMap<String, u32>>,
    /// The clock that decides for this store (see `crate::time`).
    clock: SharedClock,
    /// The runs claimed through this store and not yet acked (`handouts.rs`).
    handouts: Arc<handouts::Handouts>,
    /// Per topic, its job count as last read and when, plus what was created here since
    /// (`limits.max_jobs_per_topic`, `quota.rs`).
    counts: std::sync::Mutex<HashMap<String, quota::Count>>,
    /// The same per tenant, over its topics (`limits.max_jobs_per_tenant`).
    tenant_counts: std::sync::Mutex<HashMap<String, quota::Count>>,
    /// How each runtime over this store reads a job type's flow key (`TypeKeys`).
    type_keys: std::sync::RwLock<Vec<TypeKeys>>,
}

/// Of a job type and a payload, the flow key its type gives a job that names none
/// (`JobHandler::flow_key`: a webhook's URL host and port), or `None` (a type it does not
/// run, or one that gives none). Read once when a job is written and kept in its record
/// (`tk`), so the Redis pump reads a field rather than the payload (`lua/pump.lua`), and
/// both engines go by what Rust read.
pub(crate) type TypeKeys = Arc<dyn Fn(&str, &serde_json::Value) -> Option<String> + Send + Sync>;

impl Store {
    pub(crate) fn over(
        engine: Arc<dyn Engine>,
        memory: Option<Arc<MemoryEngine>>,
        options: StoreOptions,
    ) -> Self {
        let clock = engine
            .clock()
            .unwrap_or_else(|| Arc::new(SteadyClock::default()));
        Store {
            engine,
            memory,
            options,
            sweep_from: Default::default(),
            handouts: Default::default(),
            counts: Default::default(),
            tenant_counts: Default::default(),
            type_keys: Default::default(),
            clock,
        }
    }

    /// Learns how a runtime over this store reads its job types' flow keys.
    pub(crate) fn learn_type_keys(&self, keys: TypeKeys) {
        self.type_keys
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(keys);
    }

    /// The flow key a job of `job_type` (the topic's default when `None`) with `payload`
    /// goes by when it names none, as a runtime over this store reads it.
    pub(crate) fn type_key(
        &self,
        t: &TopicConfig,
        job_type: Option<&str>,
        payload: &serde_json::Value,
    ) -> Option<String> {
        if payload.is_null() {
            return None;
        }
        let job_type = job_type.unwrap_or(&t.default_type);
        self.type_keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find_map(|keys| keys(job_type, payload))
    }

    /// `limits.max_total_slots`: the most slots of every topic together; `None`: no limit.
    pub(crate) fn max_total_slots(&self) -> Option<u64> {
        self.options.max_total_slots
    }

    /// A job's home slot (checking its id and shard key), then the old slots that may hold
    /// a copy of it while the topic drains from a doubling.
    fn places(topic: &TopicConfig, job: &JobRef) -> Result<(u32, Vec<u32>)> {
        let home = Self::route(topic, job)?;
        Ok((home, topic.old_slots(job.route_key())))
    }

    /// The slot of a job, after checking its id and shard key.
    fn route(topic: &TopicConfig, job: &JobRef) -> Result<u32> {
        validate::job_id(&job.id)?;
        validate::shard_key(job.shard_key.as_deref())?;
        Ok(slot_of(job.route_key(), topic.slots))
    }

    /// Refuses a slot number the topic does not have.
    fn check_slot(topic: &TopicConfig, slot: u32) -> Result<()> {
        if slot >= topic.slots {
            return Err(Error::invalid(
                "slot",
                format!("{slot} is not below the topic's {} slots", topic.slots),
            ));
        }
        Ok(())
    }
}

/// How often a call is tried again under settings read anew (see `Store::newer`).
const LAYOUT_TRIES: usize = 3;

impl Store {
    /// The topic's settings as stored now, when they route differently from `t` (a doubling
    /// since `t` was read, by this instance or another); `None` when they do not.
    async fn newer(&self, t: &TopicConfig) -> Result<Option<Arc<TopicConfig>>> {
        Ok(self
            .engine
            .reload_topic(&t.name)
            .await?
            .filter(|n| n.slots != t.slots || n.draining_from != t.draining_from))
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn rearmed(topic: &TopicConfig, r: Refired) -> Rearmed {
    Rearmed {
        id: r.id,
        job_type: r.job_type.unwrap_or_else(|| topic.default_type.clone()),
        fires: r.fires,
    }
}

impl Store {
    /// The engine's name, as in the `store` setting (`redis`, `memory`).
    pub fn engine(&self) -> &'static str {
        self.engine.name()
    }

    /// Succeeds when the store answers.
    pub async fn ping(&self) -> Result<()> {
        self.engine.ping().await
    }

    /// The clock that decides every comparison of times for this store's jobs (docs/design.md,
    /// invariant 3): Redis' own clock, or the memory engine's steady clock. The runtime
    /// reads `now` from it unless a test gives it another.
    pub fn clock(&self) -> SharedClock {
        self.clock.clone()
    }

    /// What an operator should know of the store's state, for `/health` (a change refused
    /// for a full disk, eviction allowed by the settings); empty when all is well.
    pub fn warnings(&self) -> Vec<String> {
        self.engine.warnings()
    }

    /// Whether accepted changes survive a restart of this process, in words for the logs.
    pub fn durability(&self) -> &'static str {
        self.engine.durability()
    }

    /// The wake bus of the instances sharing this store (the center's and the slot keeper's).
    pub(crate) fn wake_bus(&self) -> &dyn WakeBus {
        &*self.engine
    }
}

//! The store: one type, [`Store`] (`front/`), over one of two engines (`memory/`,
//! `redis/`), each implementing the five concerns of `engine.rs`: a topic's settings, one
//! slot's jobs, membership and ownership, the wake bus, the fire rate. Every method that
//! changes a job is atomic (one Lua script in Redis), and takes `now` as an argument so
//! callers and tests choose the time.
//!
//! A library user acts through [`crate::TimeoutCenter`], which checks a job's type, serves a
//! new topic's slots and wakes the slot that must fire the job. The `Store`'s public calls are
//! those that mean the same without a runtime: opening, reading, cancelling, maintenance.
//! Writes a runtime must hear of (`schedule`, `reset_many`, `put_topic`, `topic`,
//! `delete_topic`, `dead_requeue`) and the runtime's own calls are crate-private; the
//! conformance suite reaches them through `conformance::RuntimeOps`. The names of one run's
//! trip:
//!
//! - `pump` / `pump_fenced`: a slot's due jobs become runs (`Leased`: the job, its token, its
//!   lease deadline, `HandedRecord`: the record as handed out), answered as `Pumped` (the
//!   runs and the slot's next time); `adopt`: the runs of a pump whose answer was lost.
//! - `settle` / `finish`: a run's outcome (`RunOutcome`, in a `Settlement` with its events)
//!   applied, answered as `Finished` (done, retrying, repeating, dead, stale, ...).
//! - `own` / `disown` / `register`: owner leases with fencing tokens, the instance registry.
//! - `take_fires` / `give_back_fires`: the topic's fire-rate bucket (`Grant`).
//! - `flow_take` / `flow_release` / `flow_state`: a flow key's counters (`FlowGrant`).
//! - `extend`: a run's lease moved on; `sweep`: old copies after a doubling;
//!   `reload_topic`: a topic's settings read again.

mod doubling;
mod engine;
mod event_id;
pub(crate) mod flow;
mod front;
mod keys;
pub(crate) mod memory;
pub(crate) mod rate;
mod record;
pub(crate) mod redis;
#[doc(hidden)]
pub mod state_machine;
mod topic_policy;

use std::sync::Arc;

use crate::time::Millis;

pub use self::flow::{FlowAsk, FlowGrant, FlowState};
pub(crate) use self::front::transfer::{end_line, settings_line};
pub use self::front::{JobFilter, ListQuery, Store};
pub use self::memory::JournalLen;
pub use self::memory::{JournalCheck, Salvaged, check_journal, salvage_journal};
pub use self::rate::Grant;
pub use self::redis::SentinelConnection;
pub use self::redis::own_connection as own_redis_connection;
pub use self::topic_policy::StoreOptions;

/// Largest page of dead letters or events one call returns.
pub const MAX_PAGE: usize = 1_000;

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
pub type SharedStore = Arc<Store>;

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

//! The store: one type, [`Store`] (`front.rs`), over one of two engines (`memory/`,
//! `redis/`), each implementing the four concerns of `engine.rs`: a topic's settings, one
//! slot's jobs, membership and ownership, the wake bus. Every method that changes a job is
//! atomic (one Lua script in Redis), and takes `now` as an argument so callers and tests
//! choose the time.

mod doubling;
mod engine;
mod event_id;
mod front;
mod keys;
pub(crate) mod memory;
pub(crate) mod rate;
mod record;
mod redis;
pub mod state_machine;
mod topic_policy;

use std::sync::Arc;

use crate::time::Millis;

pub use self::front::{ListQuery, Store};
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

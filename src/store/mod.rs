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
//! conformance suite reaches them through `conformance::RuntimeOps`. A slot's own calls go
//! through its door (`SlotDoor`, `front/door.rs`), made once from the topic's settings, the
//! slot and its owner fence. The names of one run's trip:
//!
//! - `pump` / `pump_fenced` / `pump_owned`: a slot's due jobs become runs (`Leased`: the job, its token, its
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
pub(crate) mod front;
mod keys;
pub(crate) mod memory;
pub(crate) mod rate;
mod record;
pub(crate) mod redis;
#[doc(hidden)]
pub mod state_machine;
mod topic_policy;

use std::sync::Arc;

pub use self::flow::{FlowAsk, FlowGrant, FlowState};
pub(crate) use self::front::door::{PumpAnswer, PumpAsk, SlotDoor};
pub(crate) use self::front::transfer::{end_line, settings_line};
pub use self::front::{JobFilter, ListQuery, Store};
pub use self::memory::JournalLen;
pub use self::memory::{JournalCheck, Salvaged, check_journal, salvage_journal};
pub(crate) use self::rate::FireBudget;
pub use self::rate::Grant;
pub use self::redis::SentinelConnection;
pub use self::redis::own_connection as own_redis_connection;
pub use self::topic_policy::StoreOptions;

/// A store shared by the runtime and the HTTP layer.
pub type SharedStore = Arc<Store>;

pub(crate) use self::engine::owner_id;
pub use self::engine::{Member, Ownership, WakeNotice};
pub use self::front::MAX_PAGE;

//! The actors that turn stored jobs into handled events: a [`keeper::SlotKeeper`] owns one
//! [`slot::SlotActor`] per (topic, slot); slot actors hand jobs to one
//! [`handler::HandlerActor`] per job type.

pub(crate) mod handler;
pub(crate) mod keeper;
pub(crate) mod messages;
pub(crate) mod owners;
pub(crate) mod runtime;
pub(crate) mod slot;

pub use messages::SlotHealth;
pub(crate) use runtime::Runtime;

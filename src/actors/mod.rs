//! The actors that turn stored jobs into handled events: a [`supervisor::Supervisor`] owns one
//! [`slot::SlotActor`] per (topic, slot); slot actors hand jobs to one
//! [`handler::HandlerActor`] per job type.

pub mod handler;
pub mod messages;
pub mod runtime;
pub mod slot;
pub mod supervisor;

pub use messages::SlotHealth;
pub use runtime::Runtime;

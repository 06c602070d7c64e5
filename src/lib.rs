//! timeout-center: stores jobs that must fire at a future instant and fires each one, at
//! least once and on time, to the code that handles its type.
//!
//! The map: [`store`] (the `Store` trait and its engines), [`job`] (what goes in and out),
//! [`topic`] (named, sharded delay queues), [`routing`] (job to slot), [`validate`]
//! (argument checks), [`time`] (milliseconds and the clock), [`error`].

pub mod actors;
#[cfg(feature = "bench")]
pub mod bench;
/// What the focused benchmarks of `benches/` measure of the crate's insides.
#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod bench_support {
    pub use crate::store::memory::wheel::Wheel;
}
pub mod center;
pub mod cli;
pub mod config;
pub mod error;
pub mod events;
pub mod handler;
pub mod http;
pub mod job;
pub mod jobs;
pub mod metrics;
pub mod routing;
pub mod serve;
pub mod store;
pub mod time;
pub mod topic;
pub mod validate;

pub use center::{TimeoutCenter, TimeoutCenterBuilder};
pub use error::{Error, Result};
pub use handler::{Handlers, JobContext, JobHandler, Outcome};
pub use job::*;
pub use store::{SharedStore, Store, StoreOptions};
pub use time::Millis;
pub use topic::{Backoff, TopicConfig};

//! timeout-center: stores jobs that must fire at a future instant and fires each one, at
//! least once and on time, to the code that handles its type.
//!
//! What a user of the library needs is public: [`TimeoutCenter`] (schedule, reset, cancel,
//! read, built with [`TimeoutCenterBuilder`]), [`JobHandler`] (the code a job type runs), the
//! one [`Store`] over either engine ([`Store::memory`], [`Store::redis`], ...),
//! the job and topic types, [`events`], the built-in job types ([`jobs`]), the service's
//! [`config`] and [`serve`] for embedding it, and [`Error`]. The rest is the crate's own:
//! the actor runtime (`actors`), the HTTP layer (`http`), routing, validation, metrics and
//! the command line (`cli`, reached through [`toc_main`]).
#![warn(missing_docs, unreachable_pub)]
// Numbers change type only where the change cannot lose what matters: a cast that may
// truncate, wrap or lose its sign or precision is written as a checked conversion, or
// allowed where it stands with the reason it is safe.
#![warn(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    clippy::cast_precision_loss,
    clippy::cast_lossless,
    clippy::unwrap_used
)]

mod access;
mod actors;
mod center;
mod claims;
mod cli;
pub mod config;
#[doc(hidden)]
pub mod conformance;
mod error;
pub mod events;
pub mod flow;
mod http;
mod job_type;
pub mod jobs;
pub mod labels;
pub mod meetings;
mod metrics;
mod model;
mod num;
mod otel;
mod recurrence;
mod routing;
pub mod serve;
pub mod store;
pub mod time;
mod timer;
mod topic;
pub mod transfer;
mod validate;
mod wire;

pub use actors::SlotHealth;
pub use center::{TimeoutCenter, TimeoutCenterBuilder};
pub use claims::ClaimRequest;
pub use cli::toc_main;
pub use error::{Error, Result};
pub use events::{Event, EventPage};
pub use flow::FlowLimits;
pub use job_type::{Handlers, JobContext, JobHandler, OtherJobs, Outcome};
pub use jobs::webhook::WebhookSettings;
pub use model::{
    ClaimOutcome, CreateSpec, DeadCursor, DeadPage, Emitted, Expiry, Finished, Job, JobPage,
    JobRef, JobState, Leased, ListCursor, NewJob, OnExpire, Rearmed, Reset, ResetReport,
    RunOutcome, ScheduleMode, ScheduleOutcome, Scheduled, SlotHead, SlotStats, TopicStats,
};
pub use recurrence::{Recurrence, Series};
pub use routing::slot_of;
pub use store::{SharedStore, Store, StoreOptions};
pub use time::MAX_DELAY_MS;
pub use time::Millis;
pub use topic::{Backoff, TopicConfig};

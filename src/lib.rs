//! timeout-center: stores jobs that must fire at a future instant and fires each one, at
//! least once and on time, to the code that handles its type.
//!
//! A job type of your own, on the embedded store with its journal (the whole program is
//! `examples/library_guide.rs`; the guide is `docs/library.md`):
//!
//! ```rust
//! #[async_trait]
//! impl JobHandler for CancelUnpaid {
//!     type Payload = Invoice;
//!
//!     fn job_type(&self) -> &'static str {
//!         "cancel_unpaid"
//!     }
//!
//!     async fn handle(&self, ctx: JobContext<Invoice>) -> Outcome {
//!         match self.done.send(ctx.payload.order) {
//!             Ok(()) => Outcome::Done,
//!             Err(_) => Outcome::retry("the order service is away"),
//!         }
//!     }
//! }
//!
//! /// The embedded store with its journal, in process: a job of its own type fires.
//! async fn in_process() -> anyhow::Result<()> {
//!     // The embedded store with its journal: what it acknowledged survives a restart.
//!     let dir = tempfile::tempdir()?;
//!     let journal = dir.path().join("journal");
//!     let store = Store::open_memory(
//!         StoreOptions::default(),
//!         Some((journal.as_path(), FsyncPolicy::Always)),
//!     )?;
//!     let (tx, mut rx) = mpsc::unbounded_channel();
//!     let center = TimeoutCenter::builder(Arc::new(store))
//!         .handler(CancelUnpaid { done: tx })
//!         .start()
//!         .await?;
//!     let job = NewJob::new("order-7", now_ms() + 200)
//!         .job_type("cancel_unpaid")
//!         .payload(serde_json::json!({"order": 7}));
//!     center.schedule("orders", job, ScheduleMode::Upsert).await?;
//!     let order = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await?;
//!     println!("cancelled order {order:?}");
//!     center.shutdown(Duration::from_secs(1)).await;
//!     Ok(())
//! }
//! ```
//!
//! The same type served whole, with the HTTP API, the `toc` CLI and the dashboard:
//! [`serve::Service`] (`examples/custom_service.rs`).
//!
//! What a user of the library needs is public: [`TimeoutCenter`] (schedule, reset, cancel,
//! read, built with [`TimeoutCenterBuilder`]), [`JobHandler`] (the code a job type runs), the
//! one [`Store`] over either engine ([`Store::memory`], [`Store::redis`], ...),
//! the job and topic types, [`events`], the built-in job types ([`jobs`]), the service's
//! [`config`] and [`serve`] for embedding it, and [`Error`]. The rest is the crate's own:
//! the actor runtime (`actors`), the HTTP layer (`http`), routing, validation, metrics and
//! the command line ([`cli`], whose one public item is the `toc` binary's `main`). The Rust blocks of these docs
//! are not doc-tests: each stands word for word in an example, which the suite builds and
//! runs (`tests/docs.rs` checks it).
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
pub mod cli;
pub mod config;
#[doc(hidden)]
pub mod conformance;
mod error;
pub mod events;
mod fires;
pub mod flow;
mod history;
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
mod series;
pub mod serve;
pub mod store;
mod tenant;
pub mod time;
mod timer;
mod topic;
pub mod transfer;
mod validate;
mod wire;
mod writes;

pub use actors::SlotHealth;
pub use center::{TimeoutCenter, TimeoutCenterBuilder};
pub use claims::ClaimRequest;
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
pub use topic::{Backoff, RunEvents, TopicConfig};

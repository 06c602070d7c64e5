//! `pull`: a job for a consumer outside the service, in any language. When it comes due no
//! handler runs it: it waits, due, until a consumer claims it over HTTP
//! (`POST /v1/topics/{topic}/claim`) with a lease, then acks, retries or buries it by its
//! run's token (see `claims.rs` of the crate). A topic is a pull topic when its `default_type`
//! is `pull`: its slots have no slot actors, and every job in it is of this type, since a
//! pump hands out due jobs by time, not by type.

use async_trait::async_trait;
use serde_json::Value;

use crate::job_type::{JobContext, JobHandler, Outcome};

/// The job type's name.
pub const TYPE: &str = crate::topic::PULL_TYPE;

/// The `pull` job type: delivered to consumers that claim it, never run in the service.
pub struct Pull;

#[async_trait]
impl JobHandler for Pull {
    type Payload = Value;

    fn job_type(&self) -> &'static str {
        TYPE
    }

    /// Reached only when a pull job sits in a topic that is no longer a pull topic (its
    /// `default_type` was changed): nobody would claim it there.
    async fn handle(&self, _ctx: JobContext<Value>) -> Outcome {
        Outcome::dead("a pull job reached a handler: its topic is no longer a pull topic")
    }
}

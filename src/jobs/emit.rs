//! `emit`, the default type: when the job fires, its payload is appended to the topic's
//! event stream as a `job.fired` event. This makes a topic a delay queue read like any MQ.

use async_trait::async_trait;
use serde_json::Value;

use crate::events::kind;
use crate::job_type::{JobContext, JobHandler, Outcome};

/// The type's name.
pub const TYPE: &str = "emit";

/// The `emit` job type (the default): the job's payload goes to the topic's event stream.
pub struct Emit;

#[async_trait]
impl JobHandler for Emit {
    type Payload = Value;

    fn job_type(&self) -> &'static str {
        TYPE
    }

    async fn handle(&self, ctx: JobContext<Value>) -> Outcome {
        ctx.emit(kind::FIRED, ctx.payload.clone());
        Outcome::Done
    }
}

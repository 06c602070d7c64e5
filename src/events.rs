//! Events: what happened to jobs, appended to the topic's event stream (a capped Redis
//! Stream, or a bounded ring in memory) for any system to consume like an MQ.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::time::Millis;

/// Names of the events the runtime itself appends. Handlers add their own (for example
/// `device.offline`).
pub mod kind {
    /// A job's handler ran and reported done.
    pub const DONE: &str = "job.done";
    /// A run failed and the job will run again.
    pub const RETRY: &str = "job.retry";
    /// A run asked to run again later (a repeating job).
    pub const REPEAT: &str = "job.repeat";
    /// The job went to the dead letters.
    pub const DEAD: &str = "job.dead";
    /// The default `emit` type fired: the job's payload is the event's data.
    pub const FIRED: &str = "job.fired";
}

/// One entry of a topic's event stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Event {
    /// Position in the stream (assigned when appended; empty before).
    #[serde(default)]
    pub id: String,
    pub topic: String,
    pub job_id: String,
    #[serde(rename = "type")]
    pub job_type: String,
    pub event: String,
    pub fire_at: Millis,
    /// The instant the job was handed to its handler.
    pub fired_at: Millis,
    pub attempt: u32,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub data: Value,
}

/// A page of events, oldest first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, utoipa::ToSchema)]
pub struct EventPage {
    pub items: Vec<Event>,
    /// Pass as `after` for the next page (the last id returned); `None` when this page is
    /// empty.
    pub next: Option<String>,
}

impl EventPage {
    pub fn new(items: Vec<Event>) -> Self {
        let next = items.last().map(|e| e.id.clone());
        EventPage { items, next }
    }
}

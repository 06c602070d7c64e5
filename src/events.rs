//! Events: what happened to jobs, appended to the topic's event stream (a capped Redis
//! Stream, or a bounded ring in memory) for any system to consume like an MQ.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::model::{Finished, RunOutcome, Settlement};
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
    /// The topic of the job.
    pub topic: String,
    /// The job's id.
    pub job_id: String,
    /// The job's type.
    #[serde(rename = "type")]
    pub job_type: String,
    /// The event's name (`job.fired`, `job.done`, or a handler's own).
    pub event: String,
    /// The fire time of the run.
    pub fire_at: Millis,
    /// The instant the job was handed to its handler.
    pub fired_at: Millis,
    /// The run's attempt number.
    pub attempt: u32,
    /// The event's data (JSON).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub data: Value,
}

/// A page of events, oldest first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, utoipa::ToSchema)]
pub struct EventPage {
    /// The events, oldest first.
    pub items: Vec<Event>,
    /// Pass as `after` for the next page (the last id returned); `None` when this page is
    /// empty.
    pub next: Option<String>,
}

impl EventPage {
    /// A page of `items`; its `next` is the last one's id.
    pub fn new(items: Vec<Event>) -> Self {
        let next = items.last().map(|e| e.id.clone());
        EventPage { items, next }
    }
}

impl Event {
    /// An event of a settled run: `event` with `data`, stamped with the run's job and times.
    pub fn of_run(s: &Settlement, event: &str, data: Value) -> Event {
        let job = &s.run.job;
        Event {
            id: String::new(),
            topic: job.topic.clone(),
            job_id: job.id.clone(),
            job_type: job.job_type.clone(),
            event: event.to_string(),
            fire_at: job.fire_at,
            fired_at: s.fired_at,
            attempt: job.attempts,
            data,
        }
    }

    /// Every event a settled run appends: the handler's, then the runtime's own for what the
    /// store did with the outcome. A stale run appends none.
    pub fn of_settled(s: &Settlement, finished: Finished) -> Vec<Event> {
        if matches!(finished, Finished::Stale | Finished::Recur) {
            // Nothing changed: a recurring run's events come with its settle as a repeat.
            return Vec::new();
        }
        let mut events: Vec<Event> = s
            .emitted
            .iter()
            .map(|e| Event::of_run(s, &e.event, e.data.clone()))
            .collect();
        if let Some((name, data)) = outcome_event(&s.outcome, finished) {
            events.push(Event::of_run(s, name, data));
        }
        events
    }

    /// The event's JSON without its `event` and `data` fields and closing brace, for
    /// `settle.lua`, which finishes it once it knows the run's result. Written from the
    /// run's fields by reference, in `Event`'s order: a burst's settle builds one per run,
    /// and building an `Event` and a JSON tree to cut fields from cost the runtime's thread a
    /// sixth of its time (docs/bench/history.md, burst).
    pub fn head_json(s: &Settlement) -> String {
        let job = &s.run.job;
        Head {
            topic: &job.topic,
            job_id: &job.id,
            job_type: &job.job_type,
            fire_at: job.fire_at,
            fired_at: s.fired_at,
            attempt: job.attempts,
        }
        .open_json()
    }
}

/// What follows a run's event head ([`Event::head_json`]) in its `job.done` event, as
/// `settle.lua` finishes it (its `DONE_TAIL`): a run that ends `done` with no events of its
/// handler's is sent to the script with its event whole.
pub(crate) const DONE_TAIL: &str = r#","event":"job.done","data":null}"#;

/// The fields of an [`Event`] that a run's settle knows before the store answers, named by
/// reference (see [`Event::head_json`]).
#[derive(Serialize)]
pub(crate) struct Head<'a> {
    pub(crate) topic: &'a str,
    pub(crate) job_id: &'a str,
    #[serde(rename = "type")]
    pub(crate) job_type: &'a str,
    pub(crate) fire_at: Millis,
    pub(crate) fired_at: Millis,
    pub(crate) attempt: u32,
}

impl Head<'_> {
    /// The head as JSON without its closing brace.
    pub(crate) fn open_json(&self) -> String {
        let mut text = serde_json::to_string(self).expect("an event's head serialises");
        text.pop();
        text
    }
}

/// The runtime's own event for what the store did with a run's outcome: its name and data.
/// `lua/settle.lua` writes the same events; the conformance suite holds the two together.
/// A released or stale run has none.
fn outcome_event(outcome: &RunOutcome, finished: Finished) -> Option<(&'static str, Value)> {
    let error = match outcome {
        RunOutcome::Retry { error, .. } | RunOutcome::Dead { error } => error.as_str(),
        RunOutcome::Repeat {
            error: Some(error), ..
        }
        | RunOutcome::End { error: Some(error) } => error.as_str(),
        _ => "",
    };
    let at = match outcome {
        RunOutcome::Retry { at, .. } | RunOutcome::Repeat { at, .. } => *at,
        _ => 0,
    };
    Some(match finished {
        Finished::Done => (kind::DONE, Value::Null),
        Finished::Retrying => (kind::RETRY, json!({"error": error, "retry_at": at})),
        Finished::Repeating if !error.is_empty() => {
            (kind::REPEAT, json!({"repeat_at": at, "error": error}))
        }
        Finished::Repeating => (kind::REPEAT, json!({"repeat_at": at})),
        Finished::Dead => (kind::DEAD, json!({"error": error})),
        Finished::Rescheduled => {
            // A reset arrived during the run and wins: the job fires again at the reset time.
            let name = match outcome {
                RunOutcome::Done => kind::DONE,
                RunOutcome::Retry { .. } => kind::RETRY,
                RunOutcome::Repeat { .. } => kind::REPEAT,
                RunOutcome::Dead { .. } | RunOutcome::End { error: Some(_) } => kind::DEAD,
                RunOutcome::End { error: None } => kind::DONE,
                RunOutcome::Release | RunOutcome::Defer { .. } => return None,
            };
            let mut data = json!({"rescheduled": true});
            if !error.is_empty() {
                data["error"] = json!(error);
            }
            (name, data)
        }
        Finished::Released | Finished::Stale | Finished::Recur => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Job, JobState, Leased};

    fn settlement(id: &str, job_type: &str) -> Settlement {
        let job = Job {
            job_type: job_type.to_string(),
            state: JobState::Running,
            fire_at: 1_700_000_000_123,
            attempts: 3,
            max_attempts: 5,
            lease_until: Some(9_000),
            ..Job::stub("t\"opic", id)
        };
        let run = Leased {
            job,
            slot: 2,
            token: 7,
            lease_until: 9_000,
            handed_record: Default::default(),
        };
        Settlement::new(run, RunOutcome::Done, 1_700_000_000_456)
    }

    #[test]
    fn a_head_finished_as_settle_lua_does_is_the_event_of_the_run() {
        for (id, job_type) in [("device-1", "noop"), ("a \"quoted\"\\ id\n", "t\u{e9}")] {
            let s = settlement(id, job_type);
            let finished = format!("{}{DONE_TAIL}", Event::head_json(&s));
            let got: Value = serde_json::from_str(&finished).expect("the finished head is JSON");
            let mut want = serde_json::to_value(Event::of_run(&s, "job.done", Value::Null))
                .expect("an event serialises");
            want.as_object_mut().expect("an object").remove("id");
            assert_eq!(got, want, "{id:?}");
        }
    }
}

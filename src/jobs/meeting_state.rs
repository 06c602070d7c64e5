//! `meeting_state`: a meeting booking becomes its jobs. `meeting.started` at start,
//! `meeting.ended` at end, `meeting.reminder` before start and before end, and
//! `meeting.approval_expired` (the booking is rejected and its other jobs cancelled) if it is
//! still unapproved at its approval deadline.
//!
//! A booking's jobs share its id as their shard key, so they live in one slot. The `end` job
//! carries the whole booking, which is how a change finds the jobs of the old plan. This is
//! the job type and the booking's plan; the booking API over a center is `meetings`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::job_type::{JobContext, JobHandler, Outcome};
use crate::model::JobRef;
use crate::time::Millis;

/// The job type's name.
pub const TYPE: &str = "meeting_state";

/// Most reminders of one kind a booking may have.
const MAX_REMINDERS: usize = 16;

/// The API description's schemas of the booking fields `Booking::check` bounds (see
/// `http/schema.rs`).
mod schemas {
    use utoipa::openapi::schema::{ArrayBuilder, Object, ObjectBuilder, SchemaType, Type};
    use utoipa::openapi::{Array, RefOr, Schema};

    use crate::time::MAX_MILLIS;
    use crate::wire::schema::integer;

    pub(super) fn room() -> Object {
        ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::String))
            .min_length(Some(1))
            .build()
    }

    pub(super) fn time() -> Object {
        integer(0, MAX_MILLIS, false).build()
    }

    pub(super) fn deadline() -> Object {
        integer(0, MAX_MILLIS, true).build()
    }

    pub(super) fn reminders() -> Array {
        let item: RefOr<Schema> = integer(0, i64::MAX, false).build().into();
        ArrayBuilder::new()
            .items(item)
            .max_items(Some(super::MAX_REMINDERS))
            .build()
    }
}

crate::wire::schema::described! {
    fn booking_deadline() -> utoipa::openapi::schema::Object = schemas::deadline,
        "Unapproved at this instant: the booking is rejected.";
    fn booking_end() -> utoipa::openapi::schema::Object = schemas::time,
        "When it ends.";
    fn booking_start() -> utoipa::openapi::schema::Object = schemas::time,
        "When the meeting starts.";
    fn booking_room() -> utoipa::openapi::schema::Object = schemas::room,
        "The room booked.";
    fn booking_reminders() -> utoipa::openapi::Array = schemas::reminders,
        "Reminders this long before the start, in ms.";
    fn booking_end_reminders() -> utoipa::openapi::Array = schemas::reminders,
        "Reminders this long before the end, in ms.";
}

/// A meeting booking, as the API takes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Booking {
    /// The meeting's id.
    #[serde(default)]
    pub id: String,
    /// The room booked.
    #[schema(schema_with = booking_room)]
    pub room: String,
    /// When the meeting starts.
    #[serde(deserialize_with = "crate::wire::integer::required")]
    #[schema(schema_with = booking_start)]
    pub start: Millis,
    /// When it ends.
    #[serde(deserialize_with = "crate::wire::integer::required")]
    #[schema(schema_with = booking_end)]
    pub end: Millis,
    /// Reminders this long before the start, in ms.
    #[serde(default, deserialize_with = "crate::wire::integer::list")]
    #[schema(schema_with = booking_reminders)]
    pub reminders_ms: Vec<u64>,
    /// Reminders this long before the end, in ms.
    #[serde(default, deserialize_with = "crate::wire::integer::list")]
    #[schema(schema_with = booking_end_reminders)]
    pub end_reminders_ms: Vec<u64>,
    /// Unapproved at this instant: the booking is rejected.
    #[serde(default, deserialize_with = "crate::wire::integer::option")]
    #[schema(schema_with = booking_deadline)]
    pub approval_deadline: Option<Millis>,
    /// Whether it is approved (an unapproved booking is released at its deadline).
    #[serde(default)]
    pub approved: bool,
}

/// What one of a booking's jobs does when it fires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MeetingJob {
    /// The meeting starts.
    Start {
        /// The meeting's id.
        meeting_id: String,
        /// The room.
        room: String,
    },
    /// The meeting ends.
    End {
        /// The booking.
        booking: Booking,
    },
    /// A reminder before the start.
    Reminder {
        /// The meeting's id.
        meeting_id: String,
        /// The room.
        room: String,
        /// What it reminds of.
        of: String,
        /// How long before the start.
        #[serde(deserialize_with = "crate::wire::integer::required")]
        before_ms: u64,
    },
    /// The approval deadline of an unapproved booking.
    Approval {
        /// The meeting's id.
        meeting_id: String,
        /// The room.
        room: String,
    },
}

impl Booking {
    /// Checks the booking's fields and their order.
    pub fn validate(&self) -> Result<()> {
        meeting_id(&self.id)?;
        if self.room.is_empty() {
            return Err(Error::invalid("room", "must not be empty"));
        }
        crate::validate::fire_at("start", self.start)?;
        crate::validate::fire_at("end", self.end)?;
        if self.end <= self.start {
            return Err(Error::unprocessable("end", "must be after start"));
        }
        if let Some(d) = self.approval_deadline {
            crate::validate::fire_at("approval_deadline", d)?;
        }
        for (field, list) in [
            ("reminders_ms", &self.reminders_ms),
            ("end_reminders_ms", &self.end_reminders_ms),
        ] {
            if list.len() > MAX_REMINDERS {
                return Err(Error::invalid(
                    field,
                    format!("at most {MAX_REMINDERS} reminders"),
                ));
            }
            if list.iter().any(|ms| crate::num::millis(*ms) > self.start) {
                return Err(Error::unprocessable(
                    field,
                    "a reminder would fall before the epoch",
                ));
            }
        }
        Ok(())
    }

    /// The jobs of this booking, by job id, with their fire times.
    pub fn plan(&self) -> BTreeMap<String, (Millis, MeetingJob)> {
        let (id, room) = (self.id.clone(), self.room.clone());
        let mut jobs = BTreeMap::new();
        jobs.insert(
            format!("{id}#start"),
            (
                self.start,
                MeetingJob::Start {
                    meeting_id: id.clone(),
                    room: room.clone(),
                },
            ),
        );
        jobs.insert(
            format!("{id}#end"),
            (
                self.end,
                MeetingJob::End {
                    booking: self.clone(),
                },
            ),
        );
        for (of, at, list) in [
            ("start", self.start, &self.reminders_ms),
            ("end", self.end, &self.end_reminders_ms),
        ] {
            for before in list {
                let job = MeetingJob::Reminder {
                    meeting_id: id.clone(),
                    room: room.clone(),
                    of: of.to_string(),
                    before_ms: *before,
                };
                jobs.insert(
                    format!("{id}#remind-{of}-{before}"),
                    (at - crate::num::millis(*before), job),
                );
            }
        }
        if let (Some(deadline), false) = (self.approval_deadline, self.approved) {
            let job = MeetingJob::Approval {
                meeting_id: id.clone(),
                room,
            };
            jobs.insert(format!("{id}#approval"), (deadline, job));
        }
        jobs
    }
}

/// Longest meeting id, in characters: its jobs' ids add a suffix (`#remind-start-…`).
pub const MAX_MEETING_ID_LEN: usize = crate::validate::MAX_ID_LEN - 64;

/// A meeting id: a job id with room left for its jobs' suffixes.
pub fn meeting_id(id: &str) -> Result<()> {
    crate::validate::job_id(id)?;
    let len = id.chars().count();
    if len > MAX_MEETING_ID_LEN {
        return Err(Error::invalid(
            "id",
            format!("is {len} characters, over the limit of {MAX_MEETING_ID_LEN} for a meeting"),
        ));
    }
    Ok(())
}

/// A job of booking `meeting_id`: its id as the shard key keeps a booking's jobs in one slot.
pub(crate) fn job_ref(meeting_id: &str, job_id: &str) -> JobRef {
    JobRef::new(job_id).with_shard_key(Some(meeting_id.to_string()))
}

/// The `meeting_state` job type: a booking's start, end, reminders and approval deadline.
pub struct MeetingState;

/// A struct's `schema` without the bounds of its fields (what a validation checks beyond
/// their types: a time's range, a room's length, a list's count); the items of a list keep
/// their type's.
fn unbounded(mut schema: Value) -> Value {
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for field in props.values_mut().filter_map(Value::as_object_mut) {
            for key in ["minimum", "maximum", "minLength", "maxLength", "maxItems"] {
                field.remove(key);
            }
        }
    }
    schema
}

#[async_trait]
impl JobHandler for MeetingState {
    type Payload = MeetingJob;

    fn job_type(&self) -> &'static str {
        TYPE
    }

    fn payload_schema(&self) -> Option<Value> {
        let s = serde_json::json!({"type": "string"});
        let kind = |k: &str, mut props: serde_json::Value| {
            props["kind"] = serde_json::json!({"const": k});
            let required: Vec<&String> = props
                .as_object()
                .map(|o| o.keys().collect())
                .unwrap_or_default();
            serde_json::json!({"type": "object", "required": required, "properties": props})
        };
        Some(serde_json::json!({"oneOf": [
            kind("start", serde_json::json!({"meeting_id": s, "room": s})),
            // The booking as stored: decoded, not checked again (an empty room included),
            // so without the bounds `Booking::validate` checks of a new booking.
            kind("end", serde_json::json!({"booking": unbounded(serde_json::to_value(
                <Booking as utoipa::PartialSchema>::schema()
            ).expect("a schema serialises"))})),
            kind("reminder", serde_json::json!({"meeting_id": s, "room": s, "of": s,
                "before_ms": {"type": "integer", "minimum": 0, "maximum": i64::MAX}})),
            kind("approval", serde_json::json!({"meeting_id": s, "room": s})),
        ]}))
    }

    async fn handle(&self, ctx: JobContext<MeetingJob>) -> Outcome {
        match &ctx.payload {
            MeetingJob::Start { meeting_id, room } => {
                ctx.emit(
                    "meeting.started",
                    json!({"meeting_id": meeting_id, "room": room}),
                );
            }
            MeetingJob::End { booking } => {
                ctx.emit(
                    "meeting.ended",
                    json!({"meeting_id": booking.id, "room": booking.room}),
                );
            }
            MeetingJob::Reminder {
                meeting_id,
                room,
                of,
                before_ms,
            } => {
                ctx.emit(
                    "meeting.reminder",
                    json!({"meeting_id": meeting_id, "room": room, "of": of, "before_ms": before_ms}),
                );
            }
            MeetingJob::Approval { meeting_id, room } => {
                // Rejected: nothing else of this booking happens.
                let end = job_ref(meeting_id, &format!("{meeting_id}#end"));
                if let Ok(Some(job)) = ctx.jobs.get(&ctx.topic, &end).await
                    && let Ok(MeetingJob::End { booking }) = serde_json::from_value(job.payload)
                {
                    for job_id in booking.plan().keys().filter(|k| **k != ctx.job.id) {
                        if let Err(e) = ctx
                            .jobs
                            .cancel(&ctx.topic, &job_ref(meeting_id, job_id))
                            .await
                        {
                            return Outcome::retry(format!("could not cancel {job_id}: {e}"));
                        }
                    }
                }
                ctx.emit(
                    "meeting.approval_expired",
                    json!({"meeting_id": meeting_id, "room": room, "rejected": true}),
                );
            }
        }
        Outcome::Done
    }
}

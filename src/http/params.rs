//! The routes' path parameters as types, each field with the bounds its handler checks, so
//! that the OpenAPI document's parameters come from the same place as the routes' own
//! (`#[utoipa::path(params(JobPath, …))]`), and the schemas of path and query parameters
//! that more than one route shares. A handler still reads its path as it always has; these
//! types say what it accepts. (A path parameter is always required: `openapi::describe_paths`
//! marks it so, as OpenAPI asks.)

use serde::Deserialize;
use utoipa::IntoParams;
use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};

/// A string parameter matching `pattern`.
fn string(pattern: &str) -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .pattern(Some(pattern))
        .build()
}

/// A topic's name, as `validate::topic_name` checks it.
pub(crate) fn topic_name() -> Object {
    string(&format!(
        "^[A-Za-z0-9_.-]{{1,{}}}$",
        crate::validate::MAX_TOPIC_NAME
    ))
}

/// A job's id in a path, as `validate::job_id` checks it.
pub(crate) fn job_id() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .min_length(Some(1))
        .max_length(Some(crate::validate::MAX_ID_LEN))
        .pattern(Some(crate::validate::KEY_PATTERN))
        .build()
}

/// A shard key in a query, as `validate::shard_key` checks it.
pub(crate) fn shard_key() -> Object {
    job_id()
}

/// A meeting's id, as the meetings' routes check it.
fn meeting_id() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .min_length(Some(1))
        .max_length(Some(crate::jobs::meeting_state::MAX_MEETING_ID_LEN))
        .build()
}

/// A flow key, as `flow::check_key` checks it.
fn flow_key() -> Object {
    string(crate::flow::FLOW_KEY_PATTERN)
}

/// A page's size: 1 to `store::MAX_PAGE`.
pub(crate) fn page_limit() -> Object {
    let max = crate::num::signed(crate::num::usize_u64(crate::store::MAX_PAGE));
    crate::wire::schema::integer(1, max, false).build()
}

/// A listing's or a dead letter page's cursor: `score:id`.
pub(crate) fn score_cursor() -> Object {
    string("^[0-9]{1,15}:")
}

/// An event's id in the topic's stream: `ms-seq`, or `ms-seq-n` within a settle's entry.
pub(crate) fn event_id() -> Object {
    string("^[0-9]{1,19}-[0-9]{1,19}(-[0-9]{1,9})?$")
}

/// A page of slots' cursor: `topic/slot`.
pub(crate) fn slot_cursor() -> Object {
    string(&format!(
        "^[A-Za-z0-9_.-]{{1,{}}}/[0-9]{{1,9}}$",
        crate::validate::MAX_TOPIC_NAME
    ))
}

/// `PUT …/jobs/{id}`'s `mode`.
pub(crate) fn put_mode() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .enum_values(Some(["upsert", "create_only"]))
        .build()
}

/// `/v1/topics/{topic}/…`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct TopicPath {
    /// The topic.
    #[param(schema_with = topic_name)]
    topic: String,
}

/// `/v1/topics/{topic}/jobs/{id}…` and `/v1/topics/{topic}/dead/{id}…`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct JobPath {
    /// The topic.
    #[param(schema_with = topic_name)]
    topic: String,
    /// The job's id.
    #[param(schema_with = job_id)]
    id: String,
}

/// `/v1/topics/{topic}/meetings/{id}…`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct MeetingPath {
    /// The topic.
    #[param(schema_with = topic_name)]
    topic: String,
    /// The meeting's id.
    #[param(schema_with = meeting_id)]
    id: String,
}

/// `/v1/topics/{topic}/flows/{key}`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct FlowPath {
    /// The topic.
    #[param(schema_with = topic_name)]
    topic: String,
    /// The flow key.
    #[param(schema_with = flow_key)]
    key: String,
}

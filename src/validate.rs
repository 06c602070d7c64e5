//! Argument checks made before any store is touched, so bad input changes nothing and its
//! error names the field.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::model::{CreateSpec, NewJob, Reset};
use crate::time::MAX_MILLIS;
use crate::time::Millis;

/// Longest job id or shard key, in characters.
pub(crate) const MAX_ID_LEN: usize = 512;
/// What an id or shard key may hold, as the API document says it: anything but NUL.
pub(crate) const KEY_PATTERN: &str = "^[^\\u0000]*$";
/// Longest topic name accepted.
pub(crate) const MAX_TOPIC_NAME: usize = 128;
/// Longest job type name.
pub(crate) const MAX_TYPE_LEN: usize = 64;

pub(crate) fn job_id(id: &str) -> Result<()> {
    key_like("id", id)
}

pub(crate) fn shard_key(key: Option<&str>) -> Result<()> {
    match key {
        Some(k) => key_like("shard_key", k),
        None => Ok(()),
    }
}

fn key_like(field: &'static str, s: &str) -> Result<()> {
    if s.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if s.contains('\0') {
        // The Redis store marks a due set's member with it (src/store/keys.rs, DUE_MARK).
        return Err(Error::invalid(
            field,
            "must not contain the NUL character (U+0000)",
        ));
    }
    let len = s.chars().count();
    if len > MAX_ID_LEN {
        return Err(Error::invalid(
            field,
            format!("is {len} characters, over the limit of {MAX_ID_LEN}"),
        ));
    }
    Ok(())
}

pub(crate) fn job_type(t: &str) -> Result<()> {
    if t.is_empty() || t.len() > MAX_TYPE_LEN || !t.chars().all(is_name_char) {
        return Err(Error::invalid(
            "type",
            format!("must be 1 to {MAX_TYPE_LEN} characters of [A-Za-z0-9_.-], got {t:?}"),
        ));
    }
    Ok(())
}

/// The payload's size as stored (compact JSON), checked against its topic's `limit`.
pub(crate) fn payload(limit: usize, payload: &Value) -> Result<()> {
    if payload.is_null() {
        return Ok(());
    }
    let size = serde_json::to_vec(payload).map(|v| v.len()).unwrap_or(0);
    if size > limit {
        return Err(Error::PayloadTooLarge { size, limit });
    }
    Ok(())
}

pub(crate) fn fire_at(field: &'static str, at: Millis) -> Result<()> {
    // A fire time in the past is legal (due now); one before the epoch is a client bug. The
    // upper bound (year 5138) keeps times exact through Lua's cjson, which prints 14 digits.
    if !(0..=MAX_MILLIS).contains(&at) {
        return Err(Error::invalid(
            field,
            format!("must be milliseconds since the Unix epoch, got {at}"),
        ));
    }
    Ok(())
}

/// The API description's schemas of the fields these checks bound (see `http/schema.rs`).
pub(crate) mod schemas {
    use utoipa::openapi::schema::Object;

    use crate::wire::schema::integer;

    const EXACTLY_ONE: &str = "Exactly one of fire_at (ms since the epoch, on the client's \
                               clock) and delay_ms (ms from now, on the store's clock) is given.";

    /// A job's `fire_at`: an instant up to `MAX_MILLIS` (`instant`).
    pub(crate) fn fire_at() -> Object {
        integer(0, crate::time::MAX_MILLIS, true)
            .description(Some(EXACTLY_ONE))
            .build()
    }

    /// A job's `delay_ms`: up to `MAX_DELAY_MS` (`http::body::when`).
    pub(crate) fn delay_ms() -> Object {
        integer(0, crate::time::MAX_DELAY_MS, true)
            .description(Some(EXACTLY_ONE))
            .build()
    }

    /// A span of time in ms up to the longest delay (`expire_after_ms`,
    /// `repeat.catchup_window_ms`).
    pub(crate) fn span_ms() -> Object {
        integer(0, crate::time::MAX_DELAY_MS, true).build()
    }

    /// An instant other than a fire time (`max_fire_at`).
    pub(crate) fn instant() -> Object {
        integer(0, crate::time::MAX_MILLIS, true).build()
    }

    /// A job's id, as `job_id` checks it (a body's; a path's is described with its route).
    pub(crate) fn id() -> Object {
        key(false)
    }

    /// A shard key, as `shard_key` checks it.
    pub(crate) fn shard_key() -> Object {
        key(true)
    }

    fn key(nullable: bool) -> Object {
        use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
        let kind = if nullable {
            SchemaType::from_iter([Type::String, Type::Null])
        } else {
            SchemaType::Type(Type::String)
        };
        ObjectBuilder::new()
            .schema_type(kind)
            .min_length(Some(1))
            .max_length(Some(super::MAX_ID_LEN))
            .pattern(Some(super::KEY_PATTERN))
            .build()
    }

    /// A job's `max_attempts`: at least 1 (`max_attempts`).
    pub(crate) fn max_attempts() -> Object {
        integer(1, i64::from(u32::MAX), true).build()
    }
}

fn max_attempts(n: Option<u32>) -> Result<()> {
    if n == Some(0) {
        return Err(Error::invalid("max_attempts", "must be at least 1"));
    }
    Ok(())
}

/// Every check of a job to schedule; `payload_limit` is its topic's `max_payload_bytes`.
pub(crate) fn new_job(payload_limit: usize, job: &NewJob) -> Result<()> {
    job_id(&job.id)?;
    shard_key(job.shard_key.as_deref())?;
    if let Some(t) = &job.job_type {
        job_type(t)?;
    }
    fire_at("fire_at", job.fire_at)?;
    // A max_fire_at before fire_at is no error: it caps the first fire time as it caps every
    // reset, so the job fires at max_fire_at.
    if let Some(max) = job.max_fire_at {
        fire_at("max_fire_at", max)?;
    }
    max_attempts(job.max_attempts)?;
    if let Some(r) = &job.repeat {
        r.check()?;
    }
    if let Some(k) = &job.flow_key {
        crate::flow::check_key(k)?;
    }
    crate::labels::check(&job.labels)?;
    payload(payload_limit, &job.payload)
}

/// Every check of the create part of a batch of resets.
pub(crate) fn create_spec(payload_limit: usize, spec: &CreateSpec) -> Result<()> {
    if let Some(t) = &spec.job_type {
        job_type(t)?;
    }
    max_attempts(spec.max_attempts)?;
    payload(payload_limit, &spec.payload)
}

/// Every check of a batch of resets and its create part, before any slot is touched: a bad
/// batch changes nothing.
pub(crate) fn reset_batch(
    payload_limit: usize,
    resets: &[Reset],
    create: Option<&CreateSpec>,
) -> Result<()> {
    for r in resets {
        job_id(&r.job.id)?;
        shard_key(r.job.shard_key.as_deref())?;
        fire_at("fire_at", r.fire_at)?;
    }
    match create {
        Some(spec) => create_spec(payload_limit, spec),
        None => Ok(()),
    }
}

/// An instance name (`runtime.instance`): 1 to 128 characters of `[A-Za-z0-9_.-]`.
pub(crate) fn instance(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_TOPIC_NAME || !name.chars().all(is_name_char) {
        return Err(Error::invalid(
            "instance",
            format!("must be 1 to {MAX_TOPIC_NAME} characters of [A-Za-z0-9_.-], got {name:?}"),
        ));
    }
    Ok(())
}

/// An owner lease's id: an instance name, alone or with a process's incarnation after a
/// colon (`store::owner_id`: 16 hex digits).
pub(crate) fn owner(id: &str) -> Result<()> {
    let (name, incarnation) = id.split_once(':').unwrap_or((id, "0"));
    instance(name)?;
    if incarnation.is_empty()
        || incarnation.len() > 16
        || !incarnation.chars().all(|c| c.is_ascii_hexdigit())
    {
        return Err(Error::invalid(
            "instance",
            format!("an owner id is NAME or NAME:INCARNATION (1 to 16 hex digits), got {id:?}"),
        ));
    }
    Ok(())
}

/// A topic name: 1 to 128 characters of `[A-Za-z0-9_.-]`.
pub(crate) fn topic_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_TOPIC_NAME {
        return Err(Error::invalid(
            "topic",
            format!(
                "must be 1 to {MAX_TOPIC_NAME} characters, got {}",
                name.len()
            ),
        ));
    }
    if let Some(c) = name.chars().find(|c| !is_name_char(*c)) {
        return Err(Error::invalid(
            "topic",
            format!("{c:?} is not allowed; use [A-Za-z0-9_.-]"),
        ));
    }
    Ok(())
}

pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

//! Request bodies and query strings of the v1 API, and the checks that name the field.

use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ApiResult};
use crate::model::{CreateSpec, JobRef, JobState};
use crate::time::Millis;
use crate::wire::integer;

/// When a job fires: exactly one of `fire_at` (ms since the epoch, on the client's clock)
/// and `delay_ms`, turned into an instant by `after` (the store's clock, never early). A
/// `fire_at` that is surely a mistake is refused (422, naming the field and what to send
/// instead), as [`Instants::check`] says.
pub(crate) fn when(
    fire_at: Option<Millis>,
    delay_ms: Option<i64>,
    instants: Instants,
    after: impl FnOnce(Millis) -> Millis,
) -> ApiResult<Millis> {
    match (fire_at, delay_ms) {
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "fire_at",
            "give either fire_at or delay_ms, not both",
        )),
        (None, None) => Err(ApiError::invalid(
            "fire_at",
            "give fire_at (ms since the epoch) or delay_ms",
        )),
        (Some(at), None) => instants.check("fire_at", at).map(|()| at),
        (None, Some(d)) if d < 0 => Err(ApiError::invalid(
            "delay_ms",
            format!("must not be negative, got {d}"),
        )),
        (None, Some(d)) if d > crate::time::MAX_DELAY_MS => Err(ApiError::invalid(
            "delay_ms",
            format!("must be at most {}, got {d}", crate::time::MAX_DELAY_MS),
        )),
        (None, Some(d)) => Ok(after(d)),
    }
}

/// Below this, an instant in ms is before 1973-03-03: surely seconds since the epoch
/// (`1796645848`) or a small number sent by mistake (`1000`).
const SECONDS_LIKE: Millis = 100_000_000_000;

/// What a given instant is judged against: the store's clock now and the operator's
/// `limits.max_past_ms` (0: any past instant is taken, as due now).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Instants {
    pub now: Millis,
    pub max_past_ms: u64,
}

impl Instants {
    /// Refuses an instant that is surely a mistake (422 naming `field`): one that reads as
    /// seconds, one further in the past than `limits.max_past_ms` (a caller meaning "now"
    /// sends `delay_ms: 0`), and one further ahead than the longest delay (`MAX_DELAY_MS`).
    pub(crate) fn check(self, field: &'static str, at: Millis) -> ApiResult<()> {
        let refuse = |why: String| Err(crate::error::Error::unprocessable(field, why).into());
        if at < SECONDS_LIKE && self.now >= SECONDS_LIKE {
            return refuse(format!(
                "{at} is before 1973 as milliseconds: instants are ms since the epoch (seconds \
                 times 1000); for now, send delay_ms 0"
            ));
        }
        let past = self.now.saturating_sub(at);
        if self.max_past_ms > 0 && past > crate::num::signed(self.max_past_ms) {
            return refuse(format!(
                "{at} is {past} ms in the past, more than limits.max_past_ms ({} ms): for \
                 now, send delay_ms 0",
                self.max_past_ms
            ));
        }
        if at.saturating_sub(self.now) > crate::time::MAX_DELAY_MS {
            return refuse(format!(
                "{at} is further ahead than the longest delay, {} ms (MAX_DELAY_MS)",
                crate::time::MAX_DELAY_MS
            ));
        }
        Ok(())
    }
}

/// `PUT /v1/topics/{topic}/jobs/{id}` and `POST /v1/topics/{topic}/jobs`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobBody {
    /// The job type (the topic's default type when absent).
    #[serde(rename = "type")]
    pub job_type: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub payload: Value,
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::validate::schemas::fire_at)]
    pub fire_at: Option<Millis>,
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::validate::schemas::delay_ms)]
    pub delay_ms: Option<i64>,
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::validate::schemas::max_attempts)]
    pub max_attempts: Option<u32>,
    /// The latest fire time a reset may move the job to (debounce with a maximum wait).
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::validate::schemas::instant)]
    pub max_fire_at: Option<Millis>,
    #[schema(schema_with = crate::validate::schemas::shard_key)]
    pub shard_key: Option<String>,
    /// Fire again on this schedule after each fire, until the job is cancelled. With neither
    /// `fire_at` nor `delay_ms`, the first fire is the schedule's first instant from now.
    #[serde(default, deserialize_with = "object_only")]
    pub repeat: Option<RepeatBody>,
    /// A job that fires once: if it cannot fire within this many ms of its fire time (an
    /// outage, a paused topic), it does not run and goes to the dead letters, its
    /// `last_error` saying it expired (or is dropped, with `on_expire: "drop"`). A recurring
    /// job takes `repeat.catchup_window_ms` instead.
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::validate::schemas::span_ms)]
    pub expire_after_ms: Option<i64>,
    /// What becomes of a job past its `expire_after_ms`: `dead` (the default) or `drop`.
    #[schema(schema_with = on_expire)]
    pub on_expire: Option<String>,
    #[schema(schema_with = crate::flow::schemas::flow_key)]
    pub flow_key: Option<String>,
    #[serde(default, deserialize_with = "object_or_null")]
    #[schema(schema_with = crate::labels::schema)]
    pub labels: crate::labels::Labels,
}

/// A map that may be given as `null` (none).
fn object_or_null<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<crate::labels::Labels, D::Error> {
    Ok(Option::<crate::labels::Labels>::deserialize(d)?.unwrap_or_default())
}

impl JobBody {
    /// The job's expiry, checked: the error names the field.
    pub(crate) fn expiry(&self) -> ApiResult<Option<crate::model::Expiry>> {
        let max = crate::num::unsigned(crate::time::MAX_DELAY_MS);
        let after: Option<u64> = in_range(self.expire_after_ms, "expire_after_ms", 0, max)?;
        let on = match self.on_expire.as_deref() {
            None => None,
            Some("dead") => Some(crate::model::OnExpire::Dead),
            Some("drop") => Some(crate::model::OnExpire::Drop),
            Some(other) => {
                return Err(ApiError::invalid(
                    "on_expire",
                    format!("must be dead or drop, got {other:?}"),
                ));
            }
        };
        match (after, on, &self.repeat) {
            (None, None, _) => Ok(None),
            // Each field is valid alone: 422, as for a schedule that never fires.
            (None, Some(_), _) => Err(crate::error::Error::unprocessable(
                "on_expire",
                "goes with expire_after_ms",
            )
            .into()),
            (Some(_), _, Some(_)) => Err(crate::error::Error::unprocessable(
                "expire_after_ms",
                "goes with a job that fires once: a recurring job takes repeat.catchup_window_ms",
            )
            .into()),
            (Some(after_ms), on, None) => Ok(Some(crate::model::Expiry {
                after_ms,
                on_expire: on.unwrap_or_default(),
            })),
        }
    }
}

/// A recurring job's schedule: exactly one of `cron` (with an optional `tz`) and
/// `every_ms`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RepeatBody {
    /// A cron pattern: five fields (minute hour day-of-month month day-of-week), or six with
    /// seconds first, names allowed (`0 9 * * MON-FRI`).
    #[schema(schema_with = crate::recurrence::schemas::cron)]
    pub cron: Option<String>,
    /// The IANA time zone the pattern is read in (`Europe/Berlin`); UTC when absent. Across
    /// a daylight-saving change no instant is skipped or doubled.
    pub tz: Option<String>,
    /// A period in ms, counted from each fire's scheduled time.
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::recurrence::schemas::every_ms)]
    pub every_ms: Option<i64>,
    /// Fires in all (from 1), counted since the job was written or last reset: the series
    /// ends with its last fire (the job is gone, or dead if that fire failed for good).
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::recurrence::schemas::limit)]
    pub limit: Option<i64>,
    /// No fire after this instant (ms since the epoch): the series ends with the last fire
    /// whose next instant would come after it.
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::validate::schemas::instant)]
    pub until: Option<Millis>,
    /// Cron only: each instant is put off by a random delay of 0 to this many ms (at most
    /// an hour), never brought forward.
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::recurrence::schemas::jitter_ms)]
    pub jitter_ms: Option<i64>,
    /// A fire whose latest missed instant is more than this many ms old (an outage, a
    /// paused topic) is skipped and the job waits for the next instant; within it, a late
    /// fire runs once.
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::validate::schemas::span_ms)]
    pub catchup_window_ms: Option<i64>,
}

impl RepeatBody {
    /// The schedule, checked; the error names the field.
    pub(crate) fn recurrence(self) -> ApiResult<crate::Recurrence> {
        let max_limit = u64::from(u32::MAX);
        let max_jitter = crate::recurrence::MAX_JITTER_MS;
        let series = crate::recurrence::Series {
            limit: in_range(self.limit, "repeat.limit", 1, max_limit)?,
            until: self.until,
            jitter_ms: in_range(self.jitter_ms, "repeat.jitter_ms", 0, max_jitter)?,
            catchup_window_ms: in_range(
                self.catchup_window_ms,
                "repeat.catchup_window_ms",
                0,
                crate::num::unsigned(crate::time::MAX_DELAY_MS),
            )?,
        };
        let r = match (self.cron, self.every_ms) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid(
                    "repeat",
                    "give either cron or every_ms, not both",
                ));
            }
            (None, None) => {
                return Err(ApiError::invalid(
                    "repeat",
                    "give cron (with an optional tz) or every_ms",
                ));
            }
            (Some(cron), None) => crate::Recurrence::Cron {
                cron,
                tz: self.tz,
                series: Box::default(),
            },
            (None, Some(_)) if self.tz.is_some() => {
                return Err(ApiError::invalid(
                    "repeat.tz",
                    "a time zone goes with cron, not every_ms",
                ));
            }
            (None, Some(ms)) => crate::Recurrence::Every {
                every_ms: u64::try_from(ms).map_err(|_| {
                    ApiError::invalid("repeat.every_ms", format!("must be positive, got {ms}"))
                })?,
                series: Box::default(),
            },
        };
        r.check()?;
        Ok(r.with_series(series)?)
    }
}

/// `value` as a `T` from `min` to `max`; the error names `field`.
fn in_range<T: TryFrom<u64>>(
    value: Option<i64>,
    field: &str,
    min: u64,
    max: u64,
) -> ApiResult<Option<T>> {
    value
        .map(|v| {
            u64::try_from(v)
                .ok()
                .filter(|v| (min..=max).contains(v))
                .and_then(|v| T::try_from(v).ok())
                .ok_or_else(|| ApiError::invalid(field, format!("must be {min} to {max}, got {v}")))
        })
        .transpose()
}

/// `POST /v1/topics/{topic}/jobs/{id}/reset`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResetBody {
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::validate::schemas::fire_at)]
    pub fire_at: Option<Millis>,
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::validate::schemas::delay_ms)]
    pub delay_ms: Option<i64>,
}

/// One reset of a batch.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchReset {
    #[schema(schema_with = crate::validate::schemas::id)]
    pub id: String,
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::validate::schemas::fire_at)]
    pub fire_at: Option<Millis>,
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::validate::schemas::delay_ms)]
    pub delay_ms: Option<i64>,
    #[schema(schema_with = crate::validate::schemas::shard_key)]
    pub shard_key: Option<String>,
}

/// What a missing job of a batch is created as.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchCreate {
    #[serde(rename = "type")]
    pub job_type: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub payload: Value,
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::validate::schemas::max_attempts)]
    pub max_attempts: Option<u32>,
}

impl From<BatchCreate> for CreateSpec {
    fn from(c: BatchCreate) -> Self {
        CreateSpec {
            job_type: c.job_type,
            payload: c.payload,
            max_attempts: c.max_attempts,
        }
    }
}

/// `POST /v1/topics/{topic}/resets`: the heartbeat path.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchBody {
    pub resets: Vec<BatchReset>,
    #[serde(default, deserialize_with = "object_only")]
    pub create: Option<BatchCreate>,
}

/// A struct given as a JSON object only (serde would also take an array of its fields).
fn object_only<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::de::Error;
    match Option::<Value>::deserialize(d)? {
        None => Ok(None),
        Some(v) if v.is_object() => serde_json::from_value(v)
            .map(Some)
            .map_err(D::Error::custom),
        Some(other) => Err(D::Error::custom(format!("expected an object, got {other}"))),
    }
}

/// `?shard_key=`: for jobs scheduled with a shard key other than their id.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ShardQuery {
    /// The job's shard key, when it was written with one.
    #[param(schema_with = super::params::shard_key)]
    pub shard_key: Option<String>,
}

impl ShardQuery {
    pub(crate) fn job(&self, id: &str) -> JobRef {
        JobRef::new(id).with_shard_key(self.shard_key.clone())
    }
}

/// `GET` of a job: `?shard_key=` as for every job route, and `?next=N` for a recurring
/// job's next `N` instants (`next_fire_ats`).
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct GetQuery {
    /// The job's shard key, when it was written with one.
    #[param(schema_with = super::params::shard_key)]
    pub shard_key: Option<String>,
    /// How many of a recurring job's next instants to answer in `next_fire_ats`, 1 to 100
    /// (from `next_fire_at` on, without jitter); an empty list for a job that fires once.
    #[param(schema_with = next_instants)]
    pub next: Option<i64>,
}

impl GetQuery {
    pub(crate) fn job(&self, id: &str) -> JobRef {
        JobRef::new(id).with_shard_key(self.shard_key.clone())
    }

    /// `next`, checked: the error names it.
    pub(crate) fn next(&self) -> ApiResult<Option<usize>> {
        let max = u64::try_from(crate::model::MAX_NEXT_INSTANTS).unwrap_or(u64::MAX);
        in_range(self.next, "next", 1, max)
    }
}

/// `?next=`'s bounds.
fn next_instants() -> utoipa::openapi::schema::Object {
    let max = u64::try_from(crate::model::MAX_NEXT_INSTANTS).unwrap_or(u64::MAX);
    crate::wire::schema::integer(1, crate::num::signed(max), true).build()
}

/// `?mode=create_only`: 409 instead of replacing an existing job.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct PutQuery {
    /// `upsert` (the default) or `create_only`.
    #[param(schema_with = super::params::put_mode)]
    pub mode: Option<String>,
}

/// `GET /v1/topics/{topic}/jobs`: which jobs, and the page.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    /// `scheduled` (the default: by fire time) or `running` (by lease deadline).
    #[param(schema_with = listed_state)]
    pub state: Option<String>,
    /// The earliest fire time (lease deadline) listed, ms since the epoch (default 0).
    #[param(schema_with = crate::validate::schemas::instant)]
    pub from: Option<i64>,
    /// The latest fire time (lease deadline) listed, ms since the epoch (default: any).
    #[param(schema_with = crate::validate::schemas::instant)]
    pub to: Option<i64>,
    /// At most this many jobs (default 100, at most 1000).
    #[param(schema_with = super::params::page_limit)]
    pub limit: Option<usize>,
    /// The `next` of the previous page.
    #[param(schema_with = super::params::score_cursor)]
    pub cursor: Option<String>,
    /// Only jobs carrying this label, as `key:value` (`campaign:spring`); a page may then
    /// hold fewer than `limit` jobs, with a `next` to go on from.
    #[param(schema_with = label_param)]
    pub label: Option<String>,
}

/// `?label=key:value`.
fn label_param() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .pattern(Some("^[A-Za-z0-9_.-]{1,64}:"))
        .description(Some("A label as key:value (campaign:spring)."))
        .build()
}

/// `DELETE /v1/topics/{topic}/jobs` and `POST /v1/topics/{topic}/dead/requeue`: the jobs a
/// bulk change takes, by label and fire-time range; at least one of them.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct BulkParams {
    /// Jobs carrying this label, as `key:value` (`campaign:spring`).
    #[param(schema_with = label_param)]
    pub label: Option<String>,
    /// The earliest fire time taken, ms since the epoch.
    #[param(schema_with = crate::validate::schemas::instant)]
    pub from: Option<i64>,
    /// The latest fire time taken, ms since the epoch.
    #[param(schema_with = crate::validate::schemas::instant)]
    pub to: Option<i64>,
    /// At most this many jobs change (from 1; all when absent): a client that wants to show
    /// progress asks again until fewer come back.
    #[param(minimum = 1)]
    pub limit: Option<u64>,
}

impl BulkParams {
    pub(crate) fn filter(&self) -> ApiResult<crate::store::JobFilter> {
        if self.label.is_none() && self.from.is_none() && self.to.is_none() {
            // Each is optional alone: 422, as for other refusals across fields.
            return Err(crate::error::Error::unprocessable(
                "label",
                "give label, from or to: a bulk change takes no job unless asked for some",
            )
            .into());
        }
        for (field, v) in [("from", self.from), ("to", self.to)] {
            if let Some(v) = v {
                crate::validate::fire_at(field, v)?;
            }
        }
        if self.limit == Some(0) {
            return Err(crate::error::Error::invalid("limit", "must be at least 1").into());
        }
        let all = crate::store::ListQuery::default();
        Ok(crate::store::JobFilter {
            limit: self.limit,
            label: self
                .label
                .as_deref()
                .map(crate::labels::LabelFilter::parse)
                .transpose()?,
            from: self.from.unwrap_or(all.from),
            to: self.to.unwrap_or(all.to),
        })
    }
}

/// `on_expire`'s words.
fn on_expire() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some(["dead", "drop"]))
        .description(Some(
            "What becomes of a job past its expire_after_ms: dead (the default) or drop.",
        ))
        .build()
}

/// The states a listing takes (`ListParams::query` checks them).
fn listed_state() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some(["scheduled", "running"]))
        .description(Some(
            "scheduled (the default: by fire time) or running (by lease deadline).",
        ))
        .build()
}

impl ListParams {
    pub(crate) fn query(&self) -> ApiResult<crate::store::ListQuery> {
        let state = match self.state.as_deref() {
            None | Some("scheduled") => JobState::Scheduled,
            Some("running") => JobState::Running,
            Some(other) => {
                return Err(ApiError::invalid(
                    "state",
                    format!("must be scheduled or running, got {other:?}"),
                ));
            }
        };
        let page = PageQuery {
            limit: self.limit,
            after: None,
        };
        let defaults = crate::store::ListQuery::default();
        for (field, v) in [("from", self.from), ("to", self.to)] {
            if let Some(v) = v {
                crate::validate::fire_at(field, v)?;
            }
        }
        Ok(crate::store::ListQuery {
            state,
            from: self.from.unwrap_or(defaults.from),
            to: self.to.unwrap_or(defaults.to),
            cursor: self.cursor.clone(),
            limit: page.limit()?,
            label: self
                .label
                .as_deref()
                .map(crate::labels::LabelFilter::parse)
                .transpose()?,
        })
    }
}

/// Paging of dead letters: `?limit=&after=`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct PageQuery {
    /// At most this many items (default 100, at most 1000).
    #[param(schema_with = super::params::page_limit)]
    pub limit: Option<usize>,
    /// The `next` of the previous page.
    #[param(schema_with = super::params::score_cursor)]
    pub after: Option<String>,
}

impl PageQuery {
    pub(crate) fn limit(&self) -> ApiResult<usize> {
        page_limit(self.limit)
    }
}

/// Paging of events: `?limit=&after=`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventsQuery {
    /// At most this many events (default 100, at most 1000).
    #[param(schema_with = super::params::page_limit)]
    pub limit: Option<usize>,
    /// The `next` of the previous page: the last event's id.
    #[param(schema_with = super::params::event_id)]
    pub after: Option<String>,
}

impl EventsQuery {
    pub(crate) fn limit(&self) -> ApiResult<usize> {
        page_limit(self.limit)
    }
}

/// A page's size as asked (`limit`), 100 when not.
fn page_limit(limit: Option<usize>) -> ApiResult<usize> {
    match limit {
        Some(0) => Err(ApiError::invalid("limit", "must be at least 1")),
        Some(n) if n > crate::store::MAX_PAGE => Err(ApiError::invalid(
            "limit",
            format!("must be at most {}", crate::store::MAX_PAGE),
        )),
        Some(n) => Ok(n),
        None => Ok(100),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct N {
        #[serde(deserialize_with = "integer::required")]
        n: i64,
    }

    /// A whole number written as a float reads as that integer, however close to 2^53: the
    /// JSON is parsed with correct rounding (serde_json's `float_roundtrip`), where the fast
    /// default was one unit in the last place off (4278880735107878.0 read as ...878.5, so
    /// a schema-valid integer was refused; found by schemathesis).
    #[test]
    fn a_whole_float_near_the_top_of_the_exact_range_is_its_integer() {
        for text in [
            "4278880735107878.0",
            "8999999999999999.0",
            "19490791576609.0",
        ] {
            let n: N = serde_json::from_str(&format!("{{\"n\": {text}}}")).unwrap();
            assert_eq!(n.n.to_string(), text.trim_end_matches(".0"));
        }
    }
}

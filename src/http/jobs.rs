//! The job routes: create, replace, read, cancel, reset, and the batch reset (heartbeats).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::json;

use super::AppState;
use tracing::Instrument;

use super::body::{
    BatchBody, BulkParams, GetQuery, JobBody, ListParams, PutQuery, ResetBody, ShardQuery, when,
};
use super::error::{ApiError, ApiResult, ErrorBody};
use crate::model::{
    CreateSpec, Job, JobPage, JobRef, NewJob, Reset, ResetReport, ScheduleMode, ScheduleOutcome,
    Scheduled,
};

/// `jobs` as the caller may see them: a caller below `write` on the topic reads payloads
/// without their secrets (`jobs::webhook::redact`).
pub(crate) fn shown_to(req: &HttpRequest, jobs: &mut [Job]) {
    if !super::guard::sees_secrets(req) {
        for j in jobs {
            crate::jobs::webhook::redact::payload(&mut j.payload);
        }
    }
}

/// The W3C `traceparent` a request carried, if any.
fn incoming_trace(req: &HttpRequest) -> Option<&str> {
    req.headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
}

fn new_job(id: String, body: JobBody, state: &AppState) -> ApiResult<NewJob> {
    let center = &state.center;
    let expire = body.expiry()?;
    let repeat = body.repeat.map(|r| r.recurrence()).transpose()?;
    let floor = state.settings.limits.min_every_ms;
    if let Some(crate::Recurrence::Every { every_ms, .. }) = &repeat
        && *every_ms < floor
    {
        return Err(ApiError::invalid(
            "repeat.every_ms",
            format!("must be at least {floor} (limits.min_every_ms), got {every_ms}"),
        ));
    }
    let fire_at = match (&repeat, body.fire_at, body.delay_ms) {
        // A recurring job given no first fire starts at its schedule's first instant
        // (put off by its jitter).
        (Some(r), None, None) => r
            .next_after(center.after(0))
            .map(|at| r.jittered(at, rand::random()))
            .ok_or_else(|| {
                ApiError::invalid("repeat", "the schedule has no instant the store can hold")
            })?,
        _ => when(body.fire_at, body.delay_ms, state.instants(), |d| {
            center.after(d)
        })?,
    };
    if let Some(until) = repeat.as_ref().and_then(|r| r.series().until)
        && until < fire_at
    {
        // Each field is valid alone: 422, as for a cron pattern that never fires.
        return Err(crate::error::Error::unprocessable(
            "repeat.until",
            format!("is {until}, before the first fire at {fire_at}"),
        )
        .into());
    }
    Ok(NewJob {
        id,
        job_type: body.job_type,
        payload: body.payload,
        fire_at,
        max_fire_at: body.max_fire_at,
        max_attempts: body.max_attempts,
        shard_key: body.shard_key,
        repeat,
        expire,
        flow_key: body.flow_key,
        labels: body.labels,
        traceparent: None,
    })
}

/// The job a create, replace or reset stored: the store answers it from the same atomic
/// step, so a job due at once that fired since is still answered as it was written.
fn stored(r: Scheduled) -> ApiResult<Job> {
    r.job.ok_or_else(|| {
        crate::error::Error::Corrupt("the store answered a stored job with no job".into()).into()
    })
}

/// Creates (201) or replaces (200) a job. With `?mode=create_only` or `If-None-Match: *`,
/// an existing job is left untouched and the answer is 409.
#[utoipa::path(put, path = "/v1/topics/{topic}/jobs/{id}", tag = "jobs",
    params(super::params::JobPath, PutQuery),
    request_body = JobBody,
    responses((status = 201, body = Job), (status = 200, body = Job), (status = 400, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)))]
pub(crate) async fn put_job(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<PutQuery>,
    req: HttpRequest,
    body: web::Json<JobBody>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    let create_only = match query.mode.as_deref() {
        None | Some("upsert") => req
            .headers()
            .get(actix_web::http::header::IF_NONE_MATCH)
            .is_some_and(|v| v.as_bytes() == b"*"),
        Some("create_only") => true,
        Some(other) => {
            return Err(ApiError::invalid(
                "mode",
                format!("{other:?}: use upsert or create_only"),
            ));
        }
    };
    let span = crate::otel::job_span("create", &topic, &id);
    let mut job = new_job(id, body.into_inner(), &state)?;
    job.traceparent = crate::otel::kept(incoming_trace(&req), &span);
    let mode = if create_only {
        ScheduleMode::CreateOnly
    } else {
        ScheduleMode::Upsert
    };
    let r = state
        .center
        .schedule(&topic, job.clone(), mode)
        .instrument(span)
        .await?;
    let status = match r.outcome {
        ScheduleOutcome::Created => StatusCode::CREATED,
        ScheduleOutcome::Exists => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                format!("job {:?} already exists", job.id),
            ));
        }
        _ => StatusCode::OK,
    };
    Ok(HttpResponse::build(status).json(stored(r)?))
}

/// A page of the topic's scheduled jobs in fire-time order (or its running ones, by lease
/// deadline), merged across its slots; `next` is the cursor of the page after.
#[utoipa::path(operation_id = "list_jobs", get, path = "/v1/topics/{topic}/jobs", tag = "jobs",
    params(super::params::TopicPath, ListParams),
    responses((status = 200, body = JobPage), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn list_jobs(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<ListParams>,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let mut page = state.center.list(&path, &query.query()?).await?;
    shown_to(&req, &mut page.items);
    Ok(HttpResponse::Ok().json(page))
}

/// How many jobs a bulk change took.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct Cancelled {
    pub cancelled: u64,
}

/// Cancels the topic's scheduled jobs with a label and/or fire times in a range (at least
/// one of `label`, `from`, `to`): `{"cancelled": n}`. Running jobs finish their run; dead
/// letters stay. A job that a reset moves during it is cancelled once at most, and found
/// wherever it moved within the range.
#[utoipa::path(operation_id = "cancel_jobs", delete, path = "/v1/topics/{topic}/jobs", tag = "jobs",
    params(super::params::TopicPath, BulkParams),
    responses((status = 200, body = Cancelled), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "Neither label, from nor to")))]
pub(crate) async fn cancel_jobs(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<BulkParams>,
) -> ApiResult<HttpResponse> {
    let filter = query.filter()?;
    let cancelled = state.center.cancel_where(&path, &filter).await?;
    Ok(HttpResponse::Ok().json(Cancelled { cancelled }))
}

/// Creates a job with a generated id (201).
#[utoipa::path(operation_id = "create_job", post, path = "/v1/topics/{topic}/jobs", tag = "jobs",
    params(super::params::TopicPath), request_body = JobBody,
    responses((status = 201, body = Job), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub(crate) async fn post_job(
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
    body: web::Json<JobBody>,
) -> ApiResult<HttpResponse> {
    let topic = path.into_inner();
    let id = uuid::Uuid::new_v4().to_string();
    let span = crate::otel::job_span("create", &topic, &id);
    let mut job = new_job(id, body.into_inner(), &state)?;
    job.traceparent = crate::otel::kept(incoming_trace(&req), &span);
    let r = state
        .center
        .schedule(&topic, job.clone(), ScheduleMode::CreateOnly)
        .instrument(span)
        .await?;
    Ok(HttpResponse::Created().json(stored(r)?))
}

#[utoipa::path(get, path = "/v1/topics/{topic}/jobs/{id}", tag = "jobs",
    params(super::params::JobPath, GetQuery),
    responses((status = 200, body = Job), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn get_job(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<GetQuery>,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    let next = query.next()?;
    match state.center.get(&topic, &query.job(&id)).await? {
        Some(job) => {
            let mut job = match next {
                Some(n) => job.with_next_instants(n),
                None => job,
            };
            shown_to(&req, std::slice::from_mut(&mut job));
            Ok(HttpResponse::Ok().json(job))
        }
        None => Err(ApiError::not_found(format!(
            "no job {id:?} in topic {topic:?}"
        ))),
    }
}

/// Cancels a job in any state (204), 404 if there is none.
#[utoipa::path(operation_id = "cancel_job", delete, path = "/v1/topics/{topic}/jobs/{id}", tag = "jobs",
    params(super::params::JobPath, ShardQuery),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub(crate) async fn delete_job(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<ShardQuery>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    let span = crate::otel::job_span("cancel", &topic, &id);
    match state
        .center
        .cancel(&topic, &query.job(&id))
        .instrument(span)
        .await?
    {
        Some(_) => Ok(HttpResponse::NoContent().finish()),
        None => Err(ApiError::not_found(format!(
            "no job {id:?} in topic {topic:?}"
        ))),
    }
}

/// Moves a job's fire time; its payload stays. A running job fires again at this time
/// after its run. A `fire_at` that is surely a mistake (further in the past than
/// `limits.max_past_ms`, one that reads as seconds, one past the longest delay) is 422.
#[utoipa::path(post, path = "/v1/topics/{topic}/jobs/{id}/reset", tag = "jobs",
    params(super::params::JobPath, ShardQuery), request_body = ResetBody,
    responses((status = 200, body = Job), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "A fire_at that is surely a mistake")))]
pub(crate) async fn reset_job(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    req: HttpRequest,
    query: web::Query<ShardQuery>,
    body: web::Json<ResetBody>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    let at = when(body.fire_at, body.delay_ms, state.instants(), |d| {
        state.center.after(d)
    })?;
    let job = query.job(&id);
    let span = crate::otel::job_span("reset", &topic, &id);
    let traced = crate::otel::kept(incoming_trace(&req), &span);
    let r = state
        .center
        .reset_traced(&topic, &job, at, traced)
        .instrument(span)
        .await?;
    if r.outcome == ScheduleOutcome::Missing {
        return Err(ApiError::not_found(format!(
            "no scheduled or running job {id:?} in topic {topic:?}"
        )));
    }
    Ok(HttpResponse::Ok().json(stored(r)?))
}

/// Fires a recurring job once, now, without touching its series (201): a one-shot job of its
/// own, `{id}~{now}`, with the job's type, payload, attempts, flow key, labels and shard key;
/// 404 if there is no job, 422 for a job that fires once.
#[utoipa::path(operation_id = "trigger_job", post, path = "/v1/topics/{topic}/jobs/{id}/trigger", tag = "jobs",
    params(super::params::JobPath, ShardQuery),
    responses((status = 201, body = Job), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub(crate) async fn trigger_job(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<ShardQuery>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    match state.center.trigger(&topic, &query.job(&id)).await? {
        Some(r) => Ok(HttpResponse::Created().json(stored(r)?)),
        None => Err(ApiError::not_found(format!(
            "no job {id:?} in topic {topic:?}"
        ))),
    }
}

/// The heartbeat path: many resets at once; with `create`, a missing job is created.
#[utoipa::path(operation_id = "reset_many", post, path = "/v1/topics/{topic}/resets", tag = "jobs",
    params(super::params::TopicPath), request_body = BatchBody,
    responses((status = 200, body = ResetReport), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub(crate) async fn batch_reset(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<BatchBody>,
) -> ApiResult<HttpResponse> {
    let topic = path.into_inner();
    let body = body.into_inner();
    let limit = state.settings.http.max_batch_resets;
    if body.resets.len() > limit {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_many_resets",
            format!(
                "{} resets in one request, over the limit of {limit}",
                body.resets.len()
            ),
        ));
    }
    let center = &state.center;
    let instants = state.instants();
    let resets = body
        .resets
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let fire_at =
                when(r.fire_at, r.delay_ms, instants, |d| center.after(d)).map_err(|e| {
                    ApiError {
                        message: format!("resets[{i}]: {}", e.message),
                        ..e
                    }
                })?;
            Ok(Reset {
                job: JobRef::new(r.id).with_shard_key(r.shard_key),
                fire_at,
            })
        })
        .collect::<ApiResult<Vec<_>>>()?;
    let create: Option<CreateSpec> = body.create.map(Into::into);
    let report = state
        .center
        .reset_many(&topic, &resets, create.as_ref())
        .await?;
    let mut answer = json!({
        "reset": report.reset,
        "created": report.created,
        "missing": report.missing,
    });
    if !report.refused.is_empty() {
        answer["refused"] = json!(report.refused);
    }
    Ok(HttpResponse::Ok().json(answer))
}

//! Pull consumers over HTTP: claim due jobs of a pull topic with a lease (a long poll with
//! `wait_ms`), then ack, retry, bury or touch each by its run's token. A token that is not
//! the job's live run is answered 409 `stale_token`, and nothing changes.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::body::ShardQuery;
use super::error::{ApiError, ApiResult, ErrorBody};
use crate::claims::ClaimRequest;
use crate::model::{ClaimOutcome, Finished, Job, JobRef, Outcome};
use crate::wire::integer;
use crate::wire::schema::described;
use utoipa::openapi::{Array, schema::Object};

described! {
    fn claim_max() -> Object = crate::claims::schemas::max,
        "Most jobs to take (1 to 1,000; default 1).";
    fn claim_wait_ms() -> Object = crate::claims::schemas::wait_ms,
        "How long to wait for a due job when there is none, in ms (0 to 30,000; default 0).";
    fn claim_lease_ms() -> Object = crate::claims::schemas::lease_ms,
        "The lease, in ms (default: the topic's visibility timeout).";
    fn claim_token() -> Object = crate::claims::schemas::token,
        "The token of the claim.";
    fn retry_delay_ms() -> Object = crate::claims::schemas::delay_ms,
        "Run again after this many ms (default: the topic's backoff).";
    fn touch_lease_ms() -> Object = crate::claims::schemas::lease_ms,
        "The new lease from now, in ms (default: the topic's visibility timeout).";
    fn ack_id() -> Object = crate::validate::schemas::id,
        "The job's id.";
    fn ack_token() -> Object = crate::claims::schemas::token,
        "The token of its claim.";
    fn ack_shard_key() -> Object = crate::validate::schemas::shard_key,
        "Its shard key, when it was scheduled with one.";
    fn ack_list() -> Array = crate::claims::schemas::acks,
        "The acks, at most 1,000.";
}

/// `POST /v1/topics/{topic}/claim`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClaimBody {
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = claim_max)]
    pub max: Option<u32>,
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = claim_wait_ms)]
    pub wait_ms: Option<u64>,
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = claim_lease_ms)]
    pub lease_ms: Option<u64>,
}

/// A claimed job: the job as stored (running, with its `lease_until`) and its run's token.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ClaimedJob {
    #[serde(flatten)]
    pub job: Job,
    /// Names this run in its outcome; an older token is refused as stale.
    pub token: u64,
}

/// The answer of a claim.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Claimed {
    /// The jobs leased, possibly none (the wait ended).
    pub jobs: Vec<ClaimedJob>,
}

/// `.../ack` and `.../bury`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TokenBody {
    #[serde(deserialize_with = "integer::required")]
    #[schema(schema_with = claim_token)]
    pub token: u64,
    /// Why (bury only).
    pub error: Option<String>,
    /// The consumer's own W3C trace context (ack only): the settle is a span of that trace.
    #[schema(schema_with = traceparent)]
    pub traceparent: Option<String>,
}

/// A W3C `traceparent`.
fn traceparent() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .pattern(Some("^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"))
        .build()
}

/// `.../retry`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetryBody {
    #[serde(deserialize_with = "integer::required")]
    #[schema(schema_with = claim_token)]
    pub token: u64,
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = retry_delay_ms)]
    pub delay_ms: Option<u64>,
    /// What went wrong.
    pub error: Option<String>,
}

/// `.../touch`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TouchBody {
    #[serde(deserialize_with = "integer::required")]
    #[schema(schema_with = claim_token)]
    pub token: u64,
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = touch_lease_ms)]
    pub lease_ms: Option<u64>,
}

/// The answer of a touch.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Touched {
    /// The lease's new end.
    pub lease_until: i64,
}

/// The answer of a retry: `retrying`, or `dead` when its attempts are used up.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Settled {
    /// What happened to the job.
    pub result: String,
}

/// One ack of a batch.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AckItem {
    #[schema(schema_with = ack_id)]
    pub id: String,
    #[serde(deserialize_with = "integer::required")]
    #[schema(schema_with = ack_token)]
    pub token: u64,
    #[schema(schema_with = ack_shard_key)]
    pub shard_key: Option<String>,
}

/// `POST /v1/topics/{topic}/acks`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AcksBody {
    #[schema(schema_with = ack_list)]
    pub acks: Vec<AckItem>,
}

/// The answer of a batch of acks, one result per ack in order: `done`, or `stale` for a
/// token that is not the job's live run (that ack changed nothing).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AcksAnswer {
    /// Per ack, in order.
    pub results: Vec<String>,
}

fn stale(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "stale_token",
        format!(
            "job {id:?} is not running under this token: its lease ran out and the job came \
             back (or went to another claim), or it is gone"
        ),
    )
}

/// Leases due jobs of a pull topic; with `wait_ms`, waits for one (a long poll).
#[utoipa::path(operation_id = "claim_jobs", post, path = "/v1/topics/{topic}/claim", tag = "consumers",
    params(super::params::TopicPath), request_body = ClaimBody,
    responses((status = 200, body = Claimed), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn claim(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<ClaimBody>,
) -> ApiResult<HttpResponse> {
    let body = body.into_inner();
    let req = ClaimRequest {
        max: body.max.unwrap_or(1) as usize,
        wait_ms: body.wait_ms.unwrap_or(0),
        lease_ms: body.lease_ms,
    };
    let _waiting = match req.wait_ms {
        0 => None,
        _ => Some(LongPoll::enter(&state)?),
    };
    let jobs = state.center.claim(&path, req).await?;
    let jobs = jobs
        .into_iter()
        .map(|l| ClaimedJob {
            job: l.job,
            token: l.token,
        })
        .collect();
    Ok(HttpResponse::Ok().json(Claimed { jobs }))
}

/// A long poll counted among this instance's while it waits (`limits.max_long_polls`), and
/// among its tenant's (`limits.max_long_polls_per_tenant`).
struct LongPoll<'a> {
    state: &'a AppState,
    tenant: Option<String>,
}

impl<'a> LongPoll<'a> {
    /// Counts one more waiting long poll, or refuses it (429, `Retry-After: 1`) at the
    /// instance's limit or its tenant's.
    fn enter(state: &'a AppState) -> ApiResult<Self> {
        use std::sync::atomic::Ordering;
        let max = state.settings.limits.max_long_polls;
        let before = state.long_polls.fetch_add(1, Ordering::SeqCst);
        state.center.metrics().claims.long_polls.inc();
        let tenant = crate::tenant::current();
        let held_by_tenant = tenant.as_ref().map(|t| {
            let mut by = state
                .long_polls_by_tenant
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let n = by.entry(t.clone()).or_insert(0);
            *n += 1;
            *n - 1
        });
        let poll = LongPoll { state, tenant };
        let refused = |setting: &str, held: usize, whose: &str| {
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_long_polls",
                format!(
                    "{held} long polls {whose} are waiting on this instance already (the limit is {setting}); claim again shortly, or without wait_ms"
                ),
            )
            .retry_after(1)
        };
        if max > 0 && before >= max {
            return Err(refused("limits.max_long_polls", max, "of every caller"));
        }
        let share = state.settings.limits.max_long_polls_per_tenant;
        if let (Some(held), Some(t)) = (held_by_tenant, &poll.tenant)
            && share > 0
            && held >= share
        {
            return Err(refused(
                "limits.max_long_polls_per_tenant",
                share,
                &format!("of tenant {t:?}"),
            ));
        }
        Ok(poll)
    }
}

impl Drop for LongPoll<'_> {
    fn drop(&mut self) {
        self.state
            .long_polls
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.state.center.metrics().claims.long_polls.dec();
        if let Some(t) = &self.tenant {
            let mut by = self
                .state
                .long_polls_by_tenant
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(n) = by.get_mut(t) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    by.remove(t);
                }
            }
        }
    }
}

async fn settle_one(
    state: &AppState,
    topic: &str,
    job: JobRef,
    token: u64,
    outcome: Outcome,
) -> ApiResult<Finished> {
    let id = job.id.clone();
    let outcome = ClaimOutcome {
        job,
        token,
        outcome,
    };
    let done = state
        .center
        .settle_claims(topic, std::slice::from_ref(&outcome))
        .await?;
    match done.first() {
        Some(Finished::Stale) | None => Err(stale(&id)),
        Some(f) => Ok(*f),
    }
}

/// Acknowledges a claimed job: it is done and gone (204).
#[utoipa::path(operation_id = "ack_job", post, path = "/v1/topics/{topic}/jobs/{id}/ack", tag = "consumers",
    params(super::params::JobPath, ShardQuery), request_body = TokenBody,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub(crate) async fn ack(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<ShardQuery>,
    body: web::Json<TokenBody>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    let span = crate::otel::settle_span(&topic, &id, body.traceparent.as_deref(), "done")
        .unwrap_or_else(tracing::Span::none);
    let settle = settle_one(&state, &topic, query.job(&id), body.token, Outcome::Done);
    tracing::Instrument::instrument(settle, span).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// A claimed job failed: it runs again after `delay_ms` (or the topic's backoff), or goes to
/// the dead letters when its attempts are used up.
#[utoipa::path(operation_id = "retry_job", post, path = "/v1/topics/{topic}/jobs/{id}/retry", tag = "consumers",
    params(super::params::JobPath, ShardQuery), request_body = RetryBody,
    responses((status = 200, body = Settled), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn retry(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<ShardQuery>,
    body: web::Json<RetryBody>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    let body = body.into_inner();
    let floor = state.settings.limits.min_retry_delay_ms;
    if let Some(d) = body.delay_ms
        && d < floor
    {
        return Err(ApiError::invalid(
            "delay_ms",
            format!("must be at least {floor} (limits.min_retry_delay_ms), got {d}"),
        ));
    }
    let outcome = Outcome::Retry {
        error: body
            .error
            .unwrap_or_else(|| "the consumer asked to retry".into()),
        delay: body.delay_ms.map(std::time::Duration::from_millis),
    };
    let f = settle_one(&state, &topic, query.job(&id), body.token, outcome).await?;
    Ok(HttpResponse::Ok().json(Settled {
        result: f.as_str().into(),
    }))
}

/// Gives a claimed job up: to the dead letters with `error` (204).
#[utoipa::path(operation_id = "bury_job", post, path = "/v1/topics/{topic}/jobs/{id}/bury", tag = "consumers",
    params(super::params::JobPath, ShardQuery), request_body = TokenBody,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub(crate) async fn bury(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<ShardQuery>,
    body: web::Json<TokenBody>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    let body = body.into_inner();
    let outcome = Outcome::Dead {
        error: body
            .error
            .unwrap_or_else(|| "buried by the consumer".into()),
    };
    settle_one(&state, &topic, query.job(&id), body.token, outcome).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Extends a claimed job's lease, `lease_ms` from now.
#[utoipa::path(operation_id = "touch_job", post, path = "/v1/topics/{topic}/jobs/{id}/touch", tag = "consumers",
    params(super::params::JobPath, ShardQuery), request_body = TouchBody,
    responses((status = 200, body = Touched), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn touch(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<ShardQuery>,
    body: web::Json<TouchBody>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    let job = query.job(&id);
    match state
        .center
        .touch(&topic, &job, body.token, body.lease_ms)
        .await?
    {
        Some(until) => Ok(HttpResponse::Ok().json(Touched { lease_until: until })),
        None => Err(stale(&id)),
    }
}

/// Acknowledges many claimed jobs at once; a stale ack is reported, not failed.
#[utoipa::path(operation_id = "ack_many", post, path = "/v1/topics/{topic}/acks", tag = "consumers",
    params(super::params::TopicPath), request_body = AcksBody,
    responses((status = 200, body = AcksAnswer), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn acks(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<AcksBody>,
) -> ApiResult<HttpResponse> {
    let acks = body.into_inner().acks;
    if acks.len() > crate::claims::MAX_CLAIM {
        return Err(ApiError::invalid(
            "acks",
            format!(
                "{} acks, over the limit of {}",
                acks.len(),
                crate::claims::MAX_CLAIM
            ),
        ));
    }
    let outcomes: Vec<ClaimOutcome> = acks
        .into_iter()
        .map(|a| ClaimOutcome {
            job: JobRef::new(a.id).with_shard_key(a.shard_key),
            token: a.token,
            outcome: Outcome::Done,
        })
        .collect();
    let done = state.center.settle_claims(&path, &outcomes).await?;
    Ok(HttpResponse::Ok().json(AcksAnswer {
        results: done.into_iter().map(|f| f.as_str().to_string()).collect(),
    }))
}

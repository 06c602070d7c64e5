//! Topics and their figures, dead letters, and the event stream.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::AppState;
use super::body::{EventsQuery, PageQuery, ShardQuery};
use super::error::{ApiError, ApiResult, ErrorBody};
use crate::events::EventPage;
use crate::model::{DeadPage, Job};
use crate::time::Millis;
use crate::topic::{Backoff, TopicConfig};
use crate::wire::integer;

/// A topic: its settings and its figures.
#[derive(Serialize, ToSchema)]
pub(crate) struct TopicView {
    #[serde(flatten)]
    pub settings: TopicConfig,
    /// How many flow keys have limits of their own: they are listed, with their counters,
    /// at `GET /v1/topics/{topic}/flows`, not here (a topic may have a thousand).
    pub own_flow_keys: u64,
    pub scheduled: u64,
    pub running: u64,
    pub dead: u64,
    pub next_fire_at: Option<Millis>,
}

async fn view(state: &AppState, topic: &TopicConfig) -> ApiResult<TopicView> {
    let stats = state.center.stats(&topic.name).await?;
    let mut settings = topic.clone();
    let own = std::mem::take(&mut settings.flows);
    Ok(TopicView {
        settings,
        own_flow_keys: crate::num::usize_u64(own.len()),
        scheduled: stats.scheduled,
        running: stats.running,
        dead: stats.dead,
        next_fire_at: stats.next_fire_at,
    })
}

async fn existing(state: &AppState, name: &str) -> ApiResult<std::sync::Arc<TopicConfig>> {
    crate::validate::topic_name(name)?;
    state
        .center
        .topics()
        .await?
        .into_iter()
        .find(|t| t.name == name)
        .ok_or_else(|| ApiError::not_found(format!("no topic {name:?}")))
}

/// Every topic, in one page: the list answers' shape (`items`, and `next`, always null here).
#[derive(Serialize, ToSchema)]
pub(crate) struct TopicList {
    pub items: Vec<TopicView>,
    pub next: Option<String>,
}

/// Every topic with its figures.
#[utoipa::path(get, path = "/v1/topics", tag = "topics",
    responses((status = 200, body = TopicList)))]
pub(crate) async fn list_topics(state: web::Data<AppState>) -> ApiResult<HttpResponse> {
    let mut items = Vec::new();
    for t in state.center.topics().await? {
        items.push(view(&state, &t).await?);
    }
    Ok(HttpResponse::Ok().json(TopicList { items, next: None }))
}

#[utoipa::path(get, path = "/v1/topics/{topic}", tag = "topics",
    params(super::params::TopicPath),
    responses((status = 200, body = TopicView), (status = 404, body = ErrorBody)))]
pub(crate) async fn get_topic(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let topic = existing(&state, &path).await?;
    Ok(HttpResponse::Ok().json(view(&state, &topic).await?))
}

/// `DELETE /v1/topics/{topic}?force=true`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeleteQuery {
    /// Delete the topic even while some of its jobs are running.
    pub force: Option<bool>,
}

/// Deletes a topic whole: its settings, jobs, dead letters, events and owner leases, on
/// every instance (204). Refused (409 `topic_conflict`) while any of its jobs is running,
/// unless `force=true`. A topic of the same name made later starts empty. Needs `admin`, or
/// a `write` token of the tenant that made the topic (403 otherwise, whether or not it
/// exists).
#[utoipa::path(delete, path = "/v1/topics/{topic}", tag = "topics",
    params(super::params::TopicPath, DeleteQuery),
    responses((status = 204, description = "Deleted"),
        (status = 409, body = ErrorBody, description = "Jobs are running (topic_conflict)")))]
pub(crate) async fn delete_topic(
    req: actix_web::HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<DeleteQuery>,
) -> ApiResult<HttpResponse> {
    if let Some(g) = super::guard::granted(&req)
        && g.scope < crate::access::Scope::Admin
    {
        // A name that is no topic's is no tenant's either: refused as not its own.
        let made = match state.center.store().find_topic(&path).await {
            Ok(t) => t,
            Err(crate::error::Error::Invalid { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        let own = made.is_some_and(|t| t.tenant.is_some() && t.tenant == g.pattern);
        if !own {
            return Err(ApiError::forbidden(format!(
                "this token's scope is {}; DELETE of topic {:?} needs admin, or a write token \
                 of the tenant that made it",
                g.scope, *path
            )));
        }
    }
    let force = query.force.unwrap_or(false);
    state.center.delete_topic(&path, force).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// How many dead letters a bulk requeue scheduled again.
#[derive(Serialize, ToSchema)]
pub(crate) struct Requeued {
    pub requeued: u64,
}

/// Schedules again, due now, the topic's dead letters with a label and/or whose last run's
/// fire time is in a range (at least one of `label`, `from`, `to`): `{"requeued": n}`.
#[utoipa::path(operation_id = "requeue_dead_many", post, path = "/v1/topics/{topic}/dead/requeue", tag = "dead letters",
    params(super::params::TopicPath, super::body::BulkParams),
    responses((status = 200, body = Requeued), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "Neither label, from nor to")))]
pub(crate) async fn requeue_dead_many(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<super::body::BulkParams>,
) -> ApiResult<HttpResponse> {
    let filter = query.filter()?;
    let requeued = state.center.requeue_where(&path, &filter).await?;
    Ok(HttpResponse::Ok().json(Requeued { requeued }))
}

/// How many dead letters a bulk deletion removed.
#[derive(Serialize, ToSchema)]
pub(crate) struct Deleted {
    pub deleted: u64,
}

/// Deletes the topic's dead letters with a label and/or whose last run's fire time is in a
/// range (at least one of `label`, `from`, `to`; `from=0` takes every one): `{"deleted": n}`.
/// It cannot be undone.
#[utoipa::path(operation_id = "delete_dead_many", delete, path = "/v1/topics/{topic}/dead", tag = "dead letters",
    params(super::params::TopicPath, super::body::BulkParams),
    responses((status = 200, body = Deleted), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "Neither label, from nor to")))]
pub(crate) async fn delete_dead_many(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<super::body::BulkParams>,
) -> ApiResult<HttpResponse> {
    let filter = query.filter()?;
    let deleted = state.center.delete_dead_where(&path, &filter).await?;
    Ok(HttpResponse::Ok().json(Deleted { deleted }))
}

/// Dead letters, oldest first, with their last error.
#[utoipa::path(get, path = "/v1/topics/{topic}/dead", tag = "dead letters",
    params(super::params::TopicPath, PageQuery),
    responses((status = 200, body = DeadPage), (status = 400, body = ErrorBody)))]
pub(crate) async fn list_dead(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<PageQuery>,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let limit = query.limit()?;
    let mut page = state
        .center
        .dead_list(&path, query.after.as_deref(), limit)
        .await?;
    super::jobs::shown_to(&req, &mut page.items);
    Ok(HttpResponse::Ok().json(page))
}

/// Schedules a dead job again, due now, with attempts starting again.
#[utoipa::path(post, path = "/v1/topics/{topic}/dead/{id}/requeue", tag = "dead letters",
    params(super::params::JobPath, ShardQuery),
    responses((status = 200, body = Job), (status = 404, body = ErrorBody)))]
pub(crate) async fn requeue_dead(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<ShardQuery>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    let job = query.job(&id);
    if !state.center.dead_requeue(&topic, &job).await? {
        return Err(ApiError::not_found(format!(
            "no dead letter {id:?} in topic {topic:?}"
        )));
    }
    match state.center.get(&topic, &job).await? {
        Some(job) => Ok(HttpResponse::Ok().json(job)),
        None => Ok(HttpResponse::Ok().json(json!({"id": id, "state": "done"}))),
    }
}

#[utoipa::path(delete, path = "/v1/topics/{topic}/dead/{id}", tag = "dead letters",
    params(super::params::JobPath, ShardQuery),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub(crate) async fn delete_dead(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<ShardQuery>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    if !state.center.dead_delete(&topic, &query.job(&id)).await? {
        return Err(ApiError::not_found(format!(
            "no dead letter {id:?} in topic {topic:?}"
        )));
    }
    Ok(HttpResponse::NoContent().finish())
}

/// The topic's event stream, oldest first.
#[utoipa::path(get, path = "/v1/topics/{topic}/events", tag = "events",
    params(super::params::TopicPath, EventsQuery),
    responses((status = 200, body = EventPage), (status = 400, body = ErrorBody)))]
pub(crate) async fn list_events(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<EventsQuery>,
) -> ApiResult<HttpResponse> {
    let limit = query.limit()?;
    let page = state
        .center
        .events(&path, query.after.as_deref(), limit)
        .await?;
    Ok(HttpResponse::Ok().json(page))
}

/// A topic's settings to create it with or change: every field is optional, and one left
/// out keeps its current value (or, for a new topic, `topics.defaults`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TopicSettings {
    /// Number of shards, a power of two from 1 to 4096. Once the topic exists it may only
    /// double (twice the current count): no job moves, and `draining_from` shows the old
    /// layout until its slots hold no old copy.
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::topic::schemas::slots)]
    pub slots: Option<u32>,
    /// Attempts before a failing job goes to the dead letters (1 to 1,000).
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::topic::schemas::max_attempts)]
    pub max_attempts: Option<u32>,
    /// How long a run holds its job before the job is due again, in ms (1 to a day).
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::topic::schemas::visibility_timeout_ms)]
    pub visibility_timeout_ms: Option<u64>,
    /// How failed runs are retried; fields left out keep their values.
    pub backoff: Option<BackoffSettings>,
    /// Largest payload accepted, in bytes of JSON (1 to 16 MiB).
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::topic::schemas::max_payload_bytes)]
    pub max_payload_bytes: Option<usize>,
    /// The job type of a job that names none: a type this instance accepts. Jobs already
    /// stored without a type of their own take the new one.
    pub default_type: Option<String>,
    /// The job types its jobs have beside `default_type` (at most 32): only an instance
    /// that runs every one of them takes the topic's slots, and while none does its jobs
    /// wait. A type need not be run by this instance: its jobs are then taken here and
    /// run by the instances that register it. Replaces the list; a job of a type not built
    /// in adds its type when written.
    #[schema(schema_with = crate::topic::schemas::types)]
    pub types: Option<Vec<String>>,
    /// Pause (`true`) or resume (`false`) the topic: while paused no job fires and no claim
    /// is served, on every instance; jobs, resets and cancels are still accepted.
    pub paused: Option<bool>,
    /// The most fires per second, over every instance (pumps of a handler topic, claims of
    /// a pull topic), to spare a fragile downstream; 0 removes the limit. Due jobs past it
    /// wait in fire-time order; over any second the fires stay within the limit and a twentieth.
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::topic::schemas::max_fires_per_s)]
    pub max_fires_per_s: Option<u32>,
    /// Every flow key's limits (a rate per period, a parallelism, or both), unless the key
    /// has its own (`PUT .../flows/{key}`); `null` removes them. Due jobs whose key has no
    /// room wait in fire-time order and fire as soon as it has, never failed for it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<crate::flow::FlowLimits>)]
    pub flow: Option<Option<crate::flow::FlowLimits>>,
    /// Which events its runs append to its stream: `all`, `changes` (all but `job.done`) or
    /// `none` (see `TopicConfig`).
    pub events: Option<crate::topic::RunEvents>,
}

/// A field that may be given as `null` (to remove what it sets): present, as `Some`.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A change of a topic's retry backoff (see `Backoff`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BackoffSettings {
    /// The first retry's delay, in ms.
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::topic::schemas::backoff_ms)]
    pub base_ms: Option<u64>,
    /// What each later delay is multiplied by (1 to 100).
    #[schema(schema_with = crate::topic::schemas::factor)]
    pub factor: Option<f64>,
    /// The longest delay, in ms.
    #[serde(default, deserialize_with = "integer::option")]
    #[schema(schema_with = crate::topic::schemas::backoff_ms)]
    pub max_ms: Option<u64>,
    /// Random spread of each delay, as a fraction of it (0 to 0.99).
    #[schema(schema_with = crate::topic::schemas::jitter)]
    pub jitter: Option<f64>,
}

impl BackoffSettings {
    fn over(self, mut base: Backoff) -> Backoff {
        if let Some(v) = self.base_ms {
            base.base_ms = v;
        }
        if let Some(v) = self.factor {
            base.factor = v;
        }
        if let Some(v) = self.max_ms {
            base.max_ms = v;
        }
        if let Some(v) = self.jitter {
            base.jitter = v;
        }
        base
    }
}

impl TopicSettings {
    fn over(self, mut base: TopicConfig) -> TopicConfig {
        if let Some(v) = self.slots {
            base.slots = v;
        }
        if let Some(v) = self.max_attempts {
            base.max_attempts = v;
        }
        if let Some(v) = self.visibility_timeout_ms {
            base.visibility_timeout_ms = v;
        }
        if let Some(v) = self.backoff {
            base.backoff = v.over(base.backoff);
        }
        if let Some(v) = self.max_payload_bytes {
            base.max_payload_bytes = v;
        }
        if let Some(v) = self.default_type {
            base.default_type = v;
        }
        if let Some(mut v) = self.types {
            v.dedup();
            base.types = v;
        }
        if let Some(v) = self.paused {
            base.paused = v;
        }
        if let Some(v) = self.max_fires_per_s {
            base.max_fires_per_s = (v > 0).then_some(v);
        }
        if let Some(v) = self.flow {
            base.flow = v;
        }
        if let Some(v) = self.events {
            base.events = v;
        }
        base
    }
}

/// Creates a topic (201) or changes its settings (200). `slots` may double (no job moves:
/// writers route with the new count at once, and jobs written before are found in their old
/// slots until they leave); any other change of it is refused (409 `topic_conflict`), since
/// jobs would be looked for in the wrong slot. Nothing changes on an error.
#[utoipa::path(put, path = "/v1/topics/{topic}", tag = "topics",
    params(super::params::TopicPath),
    request_body = TopicSettings,
    responses((status = 201, body = TopicView, description = "Created"),
        (status = 200, body = TopicView, description = "Changed"),
        (status = 409, body = ErrorBody, description = "The slot count may only double (topic_conflict)"),
        (status = 422, body = ErrorBody, description = "A flow with neither rate nor parallelism")))]
pub(crate) async fn put_topic(
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<TopicSettings>,
) -> ApiResult<HttpResponse> {
    crate::validate::topic_name(&path)?;
    let existing = state
        .center
        .topics()
        .await?
        .into_iter()
        .find(|t| t.name == *path);
    let base = match &existing {
        Some(t) => (**t).clone(),
        None => TopicConfig {
            name: path.to_string(),
            // Made by this request: its tenant's topic.
            tenant: crate::tenant::current(),
            ..state.settings.topics.defaults.clone()
        },
    };
    let config = body.into_inner().over(base);
    config.validate()?;
    let floor = state.settings.limits.min_retry_delay_ms;
    if config.backoff.base_ms < floor {
        return Err(crate::error::Error::invalid(
            "backoff.base_ms",
            format!(
                "must be at least {floor} (limits.min_retry_delay_ms), got {}",
                config.backoff.base_ms
            ),
        )
        .into());
    }
    let types = state.center.job_types();
    if !types.contains(&config.default_type) && !config.types.contains(&config.default_type) {
        return Err(crate::error::Error::invalid(
            "default_type",
            format!(
                "{:?} is not a type this instance accepts: one of {} (or name it in types, for \
                 the instances that run it)",
                config.default_type,
                types.join(", ")
            ),
        )
        .into());
    }
    let topic = state.center.put_topic(config).await?;
    let view = view(&state, &topic).await?;
    Ok(if existing.is_some() {
        HttpResponse::Ok().json(view)
    } else {
        HttpResponse::Created().json(view)
    })
}

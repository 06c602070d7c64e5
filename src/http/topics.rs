//! Topics and their figures, dead letters, and the event stream.

use actix_web::{HttpResponse, web};
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use super::AppState;
use super::body::{PageQuery, ShardQuery};
use super::error::{ApiError, ApiResult, ErrorBody};
use crate::events::EventPage;
use crate::job::{DeadPage, Job};
use crate::time::Millis;
use crate::topic::TopicConfig;

/// A topic: its settings and its figures.
#[derive(Serialize, ToSchema)]
pub(crate) struct TopicView {
    #[serde(flatten)]
    pub settings: TopicConfig,
    pub scheduled: u64,
    pub running: u64,
    pub dead: u64,
    pub next_fire_at: Option<Millis>,
}

async fn view(state: &AppState, topic: &TopicConfig) -> ApiResult<TopicView> {
    let stats = state.center.stats(&topic.name).await?;
    Ok(TopicView {
        settings: topic.clone(),
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

/// Every topic with its figures: `{"items": [...], "next": null}`.
#[utoipa::path(get, path = "/v1/topics", tag = "topics",
    responses((status = 200, description = "{\"items\": [TopicView], \"next\": null}")))]
pub(crate) async fn list_topics(state: web::Data<AppState>) -> ApiResult<HttpResponse> {
    let mut items = Vec::new();
    for t in state.center.topics().await? {
        items.push(view(&state, &t).await?);
    }
    Ok(HttpResponse::Ok().json(json!({"items": items, "next": null})))
}

#[utoipa::path(get, path = "/v1/topics/{topic}", tag = "topics",
    params(("topic" = String, Path)),
    responses((status = 200, body = TopicView), (status = 404, body = ErrorBody)))]
pub(crate) async fn get_topic(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let topic = existing(&state, &path).await?;
    Ok(HttpResponse::Ok().json(view(&state, &topic).await?))
}

/// Dead letters, oldest first, with their last error.
#[utoipa::path(get, path = "/v1/topics/{topic}/dead", tag = "dead letters",
    params(("topic" = String, Path), PageQuery),
    responses((status = 200, body = DeadPage), (status = 400, body = ErrorBody)))]
pub(crate) async fn list_dead(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<PageQuery>,
) -> ApiResult<HttpResponse> {
    let limit = query.limit()?;
    let page = state
        .center
        .dead_list(&path, query.after.as_deref(), limit)
        .await?;
    Ok(HttpResponse::Ok().json(page))
}

/// Schedules a dead job again, due now, with attempts starting again.
#[utoipa::path(post, path = "/v1/topics/{topic}/dead/{id}/requeue", tag = "dead letters",
    params(("topic" = String, Path), ("id" = String, Path), ShardQuery),
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
    params(("topic" = String, Path), ("id" = String, Path), ShardQuery),
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
    params(("topic" = String, Path), PageQuery),
    responses((status = 200, body = EventPage), (status = 400, body = ErrorBody)))]
pub(crate) async fn list_events(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<PageQuery>,
) -> ApiResult<HttpResponse> {
    let limit = query.limit()?;
    let page = state
        .center
        .events(&path, query.after.as_deref(), limit)
        .await?;
    Ok(HttpResponse::Ok().json(page))
}

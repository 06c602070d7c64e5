//! Flow keys of a topic: their limits and how many jobs wait for room (`crate::flow`).

use actix_web::{HttpResponse, web};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ApiResult, ErrorBody};
use crate::flow::FlowLimits;
use crate::time::Millis;
use crate::topic::TopicConfig;

/// A flow key: its limits and its counters, over every instance on the store.
#[derive(Serialize, ToSchema)]
pub(crate) struct FlowView {
    /// The key.
    pub key: String,
    /// Whether the limits are the key's own (`PUT .../flows/{key}`) or the topic's `flow`.
    pub own: bool,
    /// Its limits.
    pub limits: FlowLimits,
    /// Runs holding its room now.
    pub in_flight: u32,
    /// Fires started in its current period.
    pub in_period: u32,
    /// Due jobs waiting for room.
    pub waiting: u64,
    /// The fire time of the oldest of them (ms since the epoch).
    pub oldest_wait_at: Option<Millis>,
}

/// The keys with limits of their own, and what waits on this instance.
#[derive(Serialize, ToSchema)]
pub(crate) struct FlowList {
    /// The keys with limits of their own, by key.
    pub items: Vec<FlowView>,
    /// Every key's limits unless it has its own (the topic's `flow`).
    pub default: Option<FlowLimits>,
    /// Due jobs of the topic waiting for room on their key, in this instance's slots (the
    /// metric `toc_flow_waiting_jobs` sums the instances).
    pub waiting_here: u64,
    /// The fire time of the oldest of them.
    pub oldest_wait_here_at: Option<Millis>,
}

/// Key `key` under the topic settings `t` (read once by the caller, fresh from the store).
async fn view(state: &AppState, t: &TopicConfig, key: &str) -> ApiResult<FlowView> {
    crate::flow::check_key(key)?;
    let now = state.center.after(0);
    let Some((limits, counters)) = state.center.store().flow_state(t, key, now).await? else {
        return Err(ApiError::not_found(format!(
            "flow key {key:?} has no limits: the topic has no flow, nor the key its own"
        )));
    };
    Ok(FlowView {
        key: key.to_string(),
        own: t.flows.contains_key(key),
        limits,
        in_flight: counters.in_flight,
        in_period: counters.in_period,
        waiting: counters.waiting,
        oldest_wait_at: counters.oldest_wait,
    })
}

/// The topic's flow keys with limits of their own, with their counters, and what waits for
/// room in this instance's slots.
#[utoipa::path(get, path = "/v1/topics/{topic}/flows", tag = "flows",
    params(super::params::TopicPath),
    responses((status = 200, body = FlowList), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn list_flows(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let t = state.center.topic_settings(&path).await?;
    let mut items = Vec::new();
    for key in t.flows.keys() {
        items.push(view(&state, &t, key).await?);
    }
    let here: Vec<_> = state
        .center
        .health()
        .await
        .into_iter()
        .filter(|s| s.topic == t.name)
        .collect();
    Ok(HttpResponse::Ok().json(FlowList {
        items,
        default: t.flow,
        waiting_here: here
            .iter()
            .map(|s| crate::num::usize_u64(s.flow_waiting))
            .sum(),
        oldest_wait_here_at: here.iter().filter_map(|s| s.flow_oldest_wait).min(),
    }))
}

/// A flow key's limits (its own or the topic's) and counters; 404 when it has none.
#[utoipa::path(get, path = "/v1/topics/{topic}/flows/{key}", tag = "flows",
    params(super::params::FlowPath),
    responses((status = 200, body = FlowView), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn get_flow(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> ApiResult<HttpResponse> {
    let (topic, key) = path.into_inner();
    let t = state.center.topic_settings(&topic).await?;
    Ok(HttpResponse::Ok().json(view(&state, &t, &key).await?))
}

/// Gives a flow key limits of its own, in place of the topic's `flow` (201 when it had
/// none, 200 when they changed). At most 1,000 keys of a topic have their own.
#[utoipa::path(put, path = "/v1/topics/{topic}/flows/{key}", tag = "flows",
    params(super::params::FlowPath),
    request_body = FlowLimits,
    responses((status = 201, body = FlowView, description = "Set"),
        (status = 200, body = FlowView, description = "Changed"),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "Neither rate nor parallelism")))]
pub(crate) async fn put_flow(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Json<FlowLimits>,
) -> ApiResult<HttpResponse> {
    let (topic, key) = path.into_inner();
    crate::flow::check_key(&key)?;
    let limits = body.into_inner();
    limits.validate_own("flow")?;
    let (t, before) = state.center.put_flow(&topic, &key, Some(limits)).await?;
    let view = view(&state, &t, &key).await?;
    Ok(if before.is_some() {
        HttpResponse::Ok().json(view)
    } else {
        HttpResponse::Created().json(view)
    })
}

/// Takes a flow key's own limits away: it goes by the topic's `flow` again (204; 404 when
/// it had none of its own).
#[utoipa::path(delete, path = "/v1/topics/{topic}/flows/{key}", tag = "flows",
    params(super::params::FlowPath),
    responses((status = 204, description = "Removed"), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn delete_flow(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> ApiResult<HttpResponse> {
    let (topic, key) = path.into_inner();
    crate::flow::check_key(&key)?;
    let (_, before) = state.center.put_flow(&topic, &key, None).await?;
    if before.is_none() {
        return Err(ApiError::not_found(format!(
            "flow key {key:?} has no limits of its own"
        )));
    }
    Ok(HttpResponse::NoContent().finish())
}

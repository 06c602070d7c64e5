//! The operator's routes: `/health`, `/metrics` and `/v1/token` (what the
//! caller's token may do).

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::json;

use super::AppState;
use super::guard::granted;
use crate::access::Scope;
use crate::actors::SlotHealth;

/// What the caller's token may do.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct TokenInfo {
    /// Whether tokens are required at all (false: auth is off, and every call is allowed).
    auth: bool,
    /// The token's scope: read, write or admin.
    scope: Scope,
    /// The topics it may touch (a pattern, `*` matching any run of characters); every topic
    /// when null.
    topics: Option<String>,
}

/// What the caller's token may do: its scope and topic pattern (the dashboard hides what it
/// cannot do).
#[utoipa::path(operation_id = "get_token", get, path = "/v1/token", tag = "operations",
    responses((status = 200, body = TokenInfo)))]
pub(crate) async fn token(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let granted = granted(&req);
    HttpResponse::Ok().json(TokenInfo {
        auth: !state.settings.tokens.is_empty(),
        scope: granted.as_ref().map_or(Scope::Admin, |g| g.scope),
        topics: granted.and_then(|g| g.pattern),
    })
}

/// How long `/health` waits for the store.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// Most slots `/health` names among those down; the rest are counted.
const DOWN_NAMED: usize = 16;

/// The store's reachability: `Ok`, or why not.
async fn ping(state: &AppState) -> Result<(), String> {
    match tokio::time::timeout(PING_TIMEOUT, state.center.store().ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {PING_TIMEOUT:?}")),
    }
}

fn answer(healthy: bool, body: serde_json::Value) -> HttpResponse {
    if healthy {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

/// The store's reachability and the slots' figures, summed: a few hundred bytes however many
/// slots there are (the per-slot detail is paged at `/v1/slots`). 200 when healthy, 503 when
/// not. A caller with a token (or any, with auth off) also gets the instance's name, the job
/// types it runs, the store's error and warnings, up to 16 of the slots down and the topics
/// no live instance can serve (`unserved`: none runs every type they name), among the
/// topics it may see.
#[utoipa::path(operation_id = "get_health", get, path = "/health", tag = "operations",
    responses((status = 200, description = "healthy"), (status = 503, description = "store unreachable or a slot actor down")))]
pub(crate) async fn health(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let ping = ping(&state).await;
    let slots = state.center.health().await;
    let down: Vec<&SlotHealth> = slots.iter().filter(|s| !s.alive).collect();
    let healthy = ping.is_ok() && down.is_empty();
    let store = state.center.store();
    let mut body = json!({
        "status": if healthy { "ok" } else { "unhealthy" },
        "store": {"engine": store.engine(), "reachable": ping.is_ok()},
        "slots": slots.len(),
        "slots_alive": down.is_empty(),
        "slots_down": down.len(),
        "dormant": slots.iter().filter(|s| s.dormant).count(),
        "in_flight": slots.iter().map(|s| s.in_flight).sum::<usize>(),
        "flow_waiting": slots.iter().map(|s| s.flow_waiting).sum::<usize>(),
        "restarts": slots.iter().map(|s| u64::from(s.restarts)).sum::<u64>(),
    });
    // With tokens set, a caller without one learns nothing of the host (the instance name
    // holds the host name and pid), the store's errors or the topics.
    let granted = granted(&req);
    if state.settings.tokens.is_empty() || granted.is_some() {
        let pattern = granted.and_then(|g| g.pattern);
        let named: Vec<_> = down
            .iter()
            .filter(|s| sees(pattern.as_deref(), &s.topic))
            .take(DOWN_NAMED)
            .map(|s| json!({"topic": s.topic, "slot": s.slot, "last_error": s.last_error}))
            .collect();
        body["instance"] = json!(state.center.instance());
        body["types"] = json!(state.center.runs());
        let unserved: Vec<String> = state
            .center
            .metrics()
            .unserved()
            .into_iter()
            .filter(|t| sees(pattern.as_deref(), t))
            .collect();
        body["unserved"] = json!(unserved);
        body["store"]["error"] = json!(ping.err());
        body["store"]["warnings"] = json!(store.warnings());
        body["down"] = json!(named);
    }
    answer(healthy, body)
}

/// `GET /v1/history`'s query.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct HistoryQuery {
    /// Also this topic's own rates at each step.
    #[param(schema_with = super::params::topic_name)]
    topic: Option<String>,
}

/// `GET /v1/history`'s answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct HistoryPage {
    /// How long each step is, in ms (`http.history_every_ms`).
    every_ms: u64,
    /// The steps kept (`http.history_keep_ms`), oldest first.
    points: Vec<HistoryPoint>,
}

/// One step of `GET /v1/history`: the rates over the topics the caller may see.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct HistoryPoint {
    /// When the step ended, in ms since the epoch.
    at: crate::time::Millis,
    /// Jobs fired a second on this instance.
    fired_per_s: f64,
    /// Pull jobs claimed a second from this instance.
    claimed_per_s: f64,
    /// The topic asked for (`topic`), when it moved in the step.
    topic: Option<crate::history::TopicRates>,
}

/// This instance's recent past, step by step: jobs fired and pull jobs claimed a second,
/// over the topics the caller's token may see, and one topic's own with `topic`; kept by
/// the service (the last hour by default), so a chart has it at once.
#[utoipa::path(operation_id = "get_history", get, path = "/v1/history", tag = "operations",
    params(HistoryQuery),
    responses((status = 200, body = HistoryPage), (status = 400, body = super::error::ErrorBody)))]
pub(crate) async fn history(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<HistoryQuery>,
) -> super::error::ApiResult<HttpResponse> {
    if let Some(t) = &query.topic {
        crate::validate::topic_name(t)?;
    }
    let pattern = granted(&req).and_then(|g| g.pattern);
    let points = state
        .history
        .points(|t| sees(pattern.as_deref(), t))
        .into_iter()
        .map(|p| HistoryPoint {
            at: p.at,
            fired_per_s: p.topics.iter().map(|t| t.fired_per_s).sum(),
            claimed_per_s: p.topics.iter().map(|t| t.claimed_per_s).sum(),
            topic: p
                .topics
                .into_iter()
                .find(|t| query.topic.as_deref() == Some(t.topic.as_str())),
        })
        .collect();
    Ok(HttpResponse::Ok().json(HistoryPage {
        every_ms: state.history.every_ms(),
        points,
    }))
}

/// Whether a token limited to `pattern` (every topic when `None`) may see `topic`.
fn sees(pattern: Option<&str>, topic: &str) -> bool {
    pattern.is_none_or(|p| crate::access::glob(p, topic))
}

/// Liveness, for a probe: the process serves HTTP. Asks nothing of the store.
#[utoipa::path(operation_id = "get_livez", get, path = "/livez", tag = "operations",
    responses((status = 200, description = "the process serves")))]
pub(crate) async fn livez() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// Readiness, for a probe: the store answers and every slot this instance owns is served.
/// 200 or 503, a few bytes.
#[utoipa::path(operation_id = "get_readyz", get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "ready"), (status = 503, description = "store unreachable or a slot actor down")))]
pub(crate) async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    let ready = ping(&state).await.is_ok() && state.center.health().await.iter().all(|s| s.alive);
    answer(
        ready,
        json!({"status": if ready { "ok" } else { "unhealthy" }}),
    )
}

/// `GET /v1/slots`'s query.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct SlotsQuery {
    /// Only this topic's slots.
    #[param(schema_with = super::params::topic_name)]
    topic: Option<String>,
    /// The `next` of the page before: slots after this `topic/slot`.
    #[param(schema_with = super::params::slot_cursor)]
    after: Option<String>,
    /// Most slots in the page, 1 to 1,000 (100 by default).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u64>,
}

/// A page of the slots this instance serves.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct SlotPage {
    /// By topic, then slot.
    items: Vec<SlotHealth>,
    /// Pass as `after` for the next page; `None` at the end.
    next: Option<String>,
}

/// The slots this instance serves, one by one, in pages, by topic then slot: only the
/// topics the caller's token may see.
#[utoipa::path(operation_id = "list_slots", get, path = "/v1/slots", tag = "operations",
    params(SlotsQuery),
    responses((status = 200, body = SlotPage), (status = 400, body = super::error::ErrorBody)))]
pub(crate) async fn slots(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<SlotsQuery>,
) -> super::error::ApiResult<HttpResponse> {
    if let Some(t) = &query.topic {
        crate::validate::topic_name(t)?;
    }
    let limit = query.limit.unwrap_or(100);
    if !(1..=1_000).contains(&limit) {
        return Err(super::error::ApiError::invalid(
            "limit",
            format!("must be 1 to 1000, got {limit}"),
        ));
    }
    let after = match query.after.as_deref() {
        None => None,
        Some(a) => {
            let parsed = a
                .rsplit_once('/')
                .and_then(|(t, s)| Some((t.to_string(), s.parse::<u32>().ok()?)));
            Some(parsed.ok_or_else(|| {
                super::error::ApiError::invalid("after", "must be a page's next: TOPIC/SLOT")
            })?)
        }
    };
    let pattern = granted(&req).and_then(|g| g.pattern);
    let mut slots: Vec<SlotHealth> = state
        .center
        .health()
        .await
        .into_iter()
        .filter(|s| sees(pattern.as_deref(), &s.topic))
        .filter(|s| query.topic.as_deref().is_none_or(|t| t == s.topic))
        .filter(|s| {
            after
                .as_ref()
                .is_none_or(|(t, n)| (s.topic.as_str(), s.slot) > (t.as_str(), *n))
        })
        .collect();
    slots.sort_by(|a, b| (a.topic.as_str(), a.slot).cmp(&(b.topic.as_str(), b.slot)));
    let limit = usize::try_from(limit).unwrap_or(1_000);
    let next = (slots.len() > limit).then(|| {
        let last = &slots[limit - 1];
        format!("{}/{}", last.topic, last.slot)
    });
    slots.truncate(limit);
    Ok(HttpResponse::Ok().json(SlotPage { items: slots, next }))
}

/// Prometheus text: counters, job gauges per topic, lateness and duration histograms.
#[utoipa::path(operation_id = "get_metrics", get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
pub(crate) async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    // The gauges are read from the store now; counters and histograms are kept as jobs move.
    let m = state.center.metrics();
    let ping = tokio::time::timeout(PING_TIMEOUT, state.center.store().ping()).await;
    m.store_up.set(i64::from(matches!(ping, Ok(Ok(())))));
    let slots = state.center.health().await;
    let down = slots.iter().filter(|s| !s.alive).count();
    m.slots_down
        .set(crate::num::signed(crate::num::usize_u64(down)));
    if let Ok(topics) = state.center.topics().await {
        for t in topics {
            let _ = state.center.stats(&t.name).await;
        }
    }
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.center.metrics().render())
}

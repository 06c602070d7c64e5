//! The operator's routes: `/health`, `/metrics` and `/v1/token` (what the
//! caller's token may do).

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::json;

use super::AppState;
use super::guard::granted;
use crate::access::Scope;

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

/// The slot keeper's view and the store's reachability: 200 when healthy, 503 when not.
#[utoipa::path(operation_id = "get_health", get, path = "/health", tag = "operations",
    responses((status = 200, description = "healthy"), (status = 503, description = "store unreachable or a slot actor down")))]
pub(crate) async fn health(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let store = state.center.store();
    let ping = match tokio::time::timeout(PING_TIMEOUT, store.ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {PING_TIMEOUT:?}")),
    };
    let slots = state.center.health().await;
    let all_alive = slots.iter().all(|s| s.alive);
    let healthy = ping.is_ok() && all_alive;
    // With tokens set, a caller without one gets a summary that says nothing of the host
    // (its instance name holds the host name and pid), the store's errors or the topics,
    // and stays small however many slots there are.
    let detail = state.settings.tokens.is_empty() || granted(&req).is_some();
    if !detail {
        let body = json!({
            "status": if healthy { "ok" } else { "unhealthy" },
            "store": {"engine": store.engine(), "reachable": ping.is_ok()},
            "slots_alive": all_alive,
            "slots": slots.len(),
        });
        return if healthy {
            HttpResponse::Ok().json(body)
        } else {
            HttpResponse::ServiceUnavailable().json(body)
        };
    }
    let body = json!({
        "status": if healthy { "ok" } else { "unhealthy" },
        "store": {
            "engine": store.engine(),
            "reachable": ping.is_ok(),
            "error": ping.err(),
            "warnings": store.warnings(),
        },
        "instance": state.center.instance(),
        "slots_alive": all_alive,
        "slots": slots,
    });
    if healthy {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
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

//! The operator's routes: `/health`, `/metrics`, `/openapi.json`.

use std::time::Duration;

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::AppState;

/// How long `/health` waits for the store.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// The slot keeper's view and the store's reachability: 200 when healthy, 503 when not.
#[utoipa::path(operation_id = "get_health", get, path = "/health", tag = "operations",
    responses((status = 200, description = "healthy"), (status = 503, description = "store unreachable or a slot actor down")))]
pub(crate) async fn health(state: web::Data<AppState>) -> HttpResponse {
    let store = state.center.store();
    let ping = match tokio::time::timeout(PING_TIMEOUT, store.ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {PING_TIMEOUT:?}")),
    };
    let slots = state.center.health().await;
    let all_alive = slots.iter().all(|s| s.alive);
    let healthy = ping.is_ok() && all_alive;
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
    if let Ok(topics) = state.center.topics().await {
        for t in topics {
            let _ = state.center.stats(&t.name).await;
        }
    }
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.center.metrics().render())
}

/// This API's description, generated from the route handlers.
#[utoipa::path(operation_id = "get_openapi", get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "OpenAPI 3 document")))]
pub(crate) async fn openapi(state: web::Data<AppState>) -> HttpResponse {
    let (types, payloads) = (state.center.job_types(), state.center.payload_schemas());
    HttpResponse::Ok().json(super::openapi::document(&types, &payloads))
}

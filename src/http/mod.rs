//! The HTTP API (v1): routes in `routes.rs` (each route's path, method, need, handler and
//! OpenAPI operation registered in one place), shared by `toc serve` and the tests; errors
//! in `error.rs`; auth in `auth.rs`; the OpenAPI document generated from the handlers.

pub(crate) mod auth;
pub(crate) mod body;
pub(crate) mod claims;
pub(crate) mod deadline;
pub(crate) mod error;
pub(crate) mod flows;
pub(crate) mod guard;
pub(crate) mod jobs;
pub(crate) mod meetings;
pub(crate) mod openapi;
pub(crate) mod ops;
pub(crate) mod params;
pub(crate) mod routes;
pub(crate) mod topics;
pub(crate) mod transfer;
pub(crate) mod ui;

use actix_web::middleware::ErrorHandlers;
use actix_web::web;

use crate::center::TimeoutCenter;
use crate::config::Settings;

/// What every handler reads.
pub(crate) struct AppState {
    pub center: TimeoutCenter,
    pub settings: Settings,
    /// Long polls waiting now on this instance (`limits.max_long_polls`).
    pub long_polls: std::sync::atomic::AtomicUsize,
    /// Of them, each tenant's (`limits.max_long_polls_per_tenant`); a tenant with none has
    /// no entry.
    pub long_polls_by_tenant: std::sync::Mutex<std::collections::HashMap<String, usize>>,
    /// The instance's recent past (`GET /v1/history`), stepped by `serve`.
    pub history: std::sync::Arc<crate::history::History>,
}

impl AppState {
    /// What a given instant is judged against now (`body::Instants`).
    pub(crate) fn instants(&self) -> body::Instants {
        body::Instants {
            now: self.center.now(),
            max_past_ms: self.settings.limits.max_past_ms,
        }
    }
}

/// Every route of the API ([`routes`]), with the request configuration they share. The same
/// function serves `toc serve` and the tests.
pub(crate) fn configure(cfg: &mut web::ServiceConfig, settings: &Settings) {
    let json = web::JsonConfig::default()
        .limit(settings.http.max_body_bytes)
        .error_handler(error::json_error);
    cfg.app_data(json)
        .app_data(web::QueryConfig::default().error_handler(error::query_error))
        .app_data(web::PathConfig::default().error_handler(error::path_error));
    routes::register(cfg, &routes::Bodies::of(settings));
    cfg.configure(ui::configure);
}

/// Turns every error response without a JSON body into one.
pub(crate) fn json_errors<B: actix_web::body::MessageBody + 'static>() -> ErrorHandlers<B> {
    ErrorHandlers::new().default_handler(error::ensure_json_body)
}

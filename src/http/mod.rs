//! The HTTP API (v1): routes in [`configure`], shared by `toc serve` and the tests; errors
//! in `error.rs`; auth in `auth.rs`; the OpenAPI document generated from the handlers.

pub(crate) mod auth;
pub(crate) mod body;
pub(crate) mod claims;
pub(crate) mod deadline;
pub(crate) mod error;
pub(crate) mod flows;
pub(crate) mod jobs;
pub(crate) mod meetings;
pub(crate) mod openapi;
pub(crate) mod ops;
pub(crate) mod topics;
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
}

/// Every route of the API. The same function serves `toc serve` and the tests.
pub(crate) fn configure(cfg: &mut web::ServiceConfig, settings: &Settings) {
    let json = web::JsonConfig::default()
        .limit(settings.http.max_body_bytes)
        .error_handler(error::json_error);
    let batch_json = web::JsonConfig::default()
        .limit(settings.http.max_batch_body_bytes)
        .error_handler(error::json_error);
    cfg.app_data(json)
        .app_data(web::QueryConfig::default().error_handler(error::query_error))
        .app_data(web::PathConfig::default().error_handler(error::path_error))
        // Routes are tried in order, each with a regex match: the ones a busy service serves
        // most (a pull consumer's claim and acks, a job's write, heartbeats) come first.
        .service(web::resource("/v1/topics/{topic}/claim").post(claims::claim))
        .service(
            web::resource("/v1/topics/{topic}/acks")
                .app_data(batch_json.clone())
                .post(claims::acks),
        )
        .service(web::resource("/v1/topics/{topic}/jobs/{id}/ack").post(claims::ack))
        .service(web::resource("/v1/topics/{topic}/jobs/{id}/retry").post(claims::retry))
        .service(web::resource("/v1/topics/{topic}/jobs/{id}/bury").post(claims::bury))
        .service(web::resource("/v1/topics/{topic}/jobs/{id}/touch").post(claims::touch))
        .service(
            web::resource("/v1/topics/{topic}/jobs/{id}")
                .put(jobs::put_job)
                .get(jobs::get_job)
                .delete(jobs::delete_job),
        )
        .service(
            web::resource("/v1/topics/{topic}/jobs")
                .get(jobs::list_jobs)
                .post(jobs::post_job)
                .delete(jobs::cancel_jobs),
        )
        .service(web::resource("/v1/topics/{topic}/jobs/{id}/reset").post(jobs::reset_job))
        .service(web::resource("/v1/topics/{topic}/jobs/{id}/trigger").post(jobs::trigger_job))
        .service(
            web::resource("/v1/topics/{topic}/resets")
                .app_data(batch_json)
                .post(jobs::batch_reset),
        )
        .service(web::resource("/v1/topics").get(topics::list_topics))
        .service(web::resource("/v1/topics/{topic}/flows").get(flows::list_flows))
        .service(
            web::resource("/v1/topics/{topic}/flows/{key}")
                .get(flows::get_flow)
                .put(flows::put_flow)
                .delete(flows::delete_flow),
        )
        .service(
            web::resource("/v1/topics/{topic}")
                .get(topics::get_topic)
                .put(topics::put_topic)
                .delete(topics::delete_topic),
        )
        .service(web::resource("/v1/topics/{topic}/dead").get(topics::list_dead))
        .service(web::resource("/v1/topics/{topic}/dead/requeue").post(topics::requeue_dead_many))
        .service(web::resource("/v1/topics/{topic}/dead/{id}/requeue").post(topics::requeue_dead))
        .service(web::resource("/v1/topics/{topic}/dead/{id}").delete(topics::delete_dead))
        .service(web::resource("/v1/topics/{topic}/events").get(topics::list_events))
        .service(
            web::resource("/v1/topics/{topic}/meetings/{id}")
                .put(meetings::put_meeting)
                .get(meetings::get_meeting)
                .delete(meetings::delete_meeting),
        )
        .service(
            web::resource("/v1/topics/{topic}/meetings/{id}/approve")
                .post(meetings::approve_meeting),
        )
        .service(web::resource("/v1/token").get(ops::token))
        .service(web::resource("/health").get(ops::health))
        .service(web::resource("/metrics").get(ops::metrics))
        .service(web::resource("/openapi.json").get(openapi::openapi))
        .configure(ui::configure);
}

/// Turns every error response without a JSON body into one.
pub(crate) fn json_errors<B: actix_web::body::MessageBody + 'static>() -> ErrorHandlers<B> {
    ErrorHandlers::new().default_handler(error::ensure_json_body)
}

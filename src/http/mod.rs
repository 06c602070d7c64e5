//! The HTTP API (v1): routes in [`configure`], shared by `toc serve` and the tests; errors
//! in `error.rs`; auth in `auth.rs`; the OpenAPI document generated from the handlers.

pub mod auth;
pub mod body;
pub mod error;
pub mod jobs;
pub mod meetings;
pub mod ops;
pub mod topics;

use actix_web::middleware::ErrorHandlers;
use actix_web::web;
use utoipa::OpenApi;

use crate::center::TimeoutCenter;
use crate::config::Settings;

/// What every handler reads.
pub struct AppState {
    pub center: TimeoutCenter,
    pub settings: Settings,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "timeout-center",
        description = "Jobs that fire at a future instant, at least once and on time. Times are ms since the Unix epoch."
    ),
    paths(
        jobs::put_job,
        jobs::post_job,
        jobs::get_job,
        jobs::delete_job,
        jobs::reset_job,
        jobs::batch_reset,
        topics::list_topics,
        topics::get_topic,
        topics::list_dead,
        topics::requeue_dead,
        topics::delete_dead,
        topics::list_events,
        meetings::put_meeting,
        meetings::get_meeting,
        meetings::delete_meeting,
        meetings::approve_meeting,
        ops::health,
        ops::metrics,
        ops::openapi,
    ),
    components(schemas(
        error::ApiError,
        crate::job::Job,
        crate::job::JobState,
        crate::events::Event
    ))
)]
pub struct ApiDoc;

/// Every route of the API. The same function serves `toc serve` and the tests.
pub fn configure(cfg: &mut web::ServiceConfig, settings: &Settings) {
    let json = web::JsonConfig::default()
        .limit(settings.http.max_body_bytes)
        .error_handler(error::json_error);
    let batch_json = web::JsonConfig::default()
        .limit(settings.http.max_batch_body_bytes)
        .error_handler(error::json_error);
    cfg.app_data(json)
        .app_data(web::QueryConfig::default().error_handler(error::query_error))
        .app_data(web::PathConfig::default().error_handler(error::path_error))
        .service(
            web::resource("/v1/topics/{topic}/jobs/{id}")
                .put(jobs::put_job)
                .get(jobs::get_job)
                .delete(jobs::delete_job),
        )
        .service(web::resource("/v1/topics/{topic}/jobs").post(jobs::post_job))
        .service(web::resource("/v1/topics/{topic}/jobs/{id}/reset").post(jobs::reset_job))
        .service(
            web::resource("/v1/topics/{topic}/resets")
                .app_data(batch_json)
                .post(jobs::batch_reset),
        )
        .service(web::resource("/v1/topics").get(topics::list_topics))
        .service(web::resource("/v1/topics/{topic}").get(topics::get_topic))
        .service(web::resource("/v1/topics/{topic}/dead").get(topics::list_dead))
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
        .service(web::resource("/health").get(ops::health))
        .service(web::resource("/metrics").get(ops::metrics))
        .service(web::resource("/openapi.json").get(ops::openapi));
}

/// Turns every error response without a JSON body into one.
pub fn json_errors<B: actix_web::body::MessageBody + 'static>() -> ErrorHandlers<B> {
    ErrorHandlers::new().default_handler(error::ensure_json_body)
}

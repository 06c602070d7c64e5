//! The HTTP API (v1): routes in [`configure`], shared by `toc serve` and the tests; errors
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
pub(crate) mod topics;
pub(crate) mod transfer;
pub(crate) mod ui;

use actix_web::middleware::ErrorHandlers;
use actix_web::web;

use crate::access::Scope;
use crate::center::TimeoutCenter;
use crate::config::Settings;
use guard::{Need, Topics, admin, read, write};

/// What every handler reads.
pub(crate) struct AppState {
    pub center: TimeoutCenter,
    pub settings: Settings,
    /// Long polls waiting now on this instance (`limits.max_long_polls`).
    pub long_polls: std::sync::atomic::AtomicUsize,
    /// Of them, each tenant's (`limits.max_long_polls_per_tenant`); a tenant with none has
    /// no entry.
    pub long_polls_by_tenant: std::sync::Mutex<std::collections::HashMap<String, usize>>,
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
        // Each route says what it needs beside its handler (`guard`): `read`, `write` or
        // `admin` on the topic its path names, judged on what the router matched.
        .service(
            web::resource("/v1/topics/{topic}/claim").route(write(web::post().to(claims::claim))),
        )
        .service(
            web::resource("/v1/topics/{topic}/acks")
                .app_data(batch_json.clone())
                .route(write(web::post().to(claims::acks))),
        )
        .service(
            web::resource("/v1/topics/{topic}/jobs/{id}/ack")
                .route(write(web::post().to(claims::ack))),
        )
        .service(
            web::resource("/v1/topics/{topic}/jobs/{id}/retry")
                .route(write(web::post().to(claims::retry))),
        )
        .service(
            web::resource("/v1/topics/{topic}/jobs/{id}/bury")
                .route(write(web::post().to(claims::bury))),
        )
        .service(
            web::resource("/v1/topics/{topic}/jobs/{id}/touch")
                .route(write(web::post().to(claims::touch))),
        )
        .service(
            web::resource("/v1/topics/{topic}/jobs/{id}")
                .route(write(web::put().to(jobs::put_job)))
                .route(read(web::get().to(jobs::get_job)))
                .route(write(web::delete().to(jobs::delete_job))),
        )
        .service(
            web::resource("/v1/topics/{topic}/jobs")
                .route(read(web::get().to(jobs::list_jobs)))
                .route(write(web::post().to(jobs::post_job)))
                .route(write(web::delete().to(jobs::cancel_jobs))),
        )
        .service(
            web::resource("/v1/topics/{topic}/jobs/{id}/reset")
                .route(write(web::post().to(jobs::reset_job))),
        )
        .service(
            web::resource("/v1/topics/{topic}/jobs/{id}/trigger")
                .route(write(web::post().to(jobs::trigger_job))),
        )
        .service(
            web::resource("/v1/topics/{topic}/resets")
                .app_data(batch_json)
                .route(write(web::post().to(jobs::batch_reset))),
        )
        .service(web::resource("/v1/topics").route(guard::route(
            Need::Token(Scope::Read, Topics::Every),
            web::get().to(topics::list_topics),
        )))
        .service(
            web::resource("/v1/topics/{topic}/flows").route(read(web::get().to(flows::list_flows))),
        )
        .service(
            web::resource("/v1/topics/{topic}/flows/{key}")
                .route(read(web::get().to(flows::get_flow)))
                .route(admin(web::put().to(flows::put_flow)))
                .route(admin(web::delete().to(flows::delete_flow))),
        )
        .service(
            web::resource("/v1/topics/{topic}")
                .route(read(web::get().to(topics::get_topic)))
                .route(admin(web::put().to(topics::put_topic)))
                // Admin, or a write token of the tenant that made the topic (the handler).
                .route(write(web::delete().to(topics::delete_topic))),
        )
        .service(
            web::resource("/v1/topics/{topic}/dead").route(read(web::get().to(topics::list_dead))),
        )
        // An export holds every payload whole, and an import writes any job: admin only.
        .service(
            web::resource("/v1/topics/{topic}/export")
                .route(admin(web::get().to(transfer::export_topic))),
        )
        .service(
            web::resource("/v1/topics/{topic}/import")
                .app_data(web::PayloadConfig::new(settings.http.max_batch_body_bytes))
                .route(admin(web::post().to(transfer::import_topic))),
        )
        .service(
            web::resource("/v1/topics/{topic}/dead/requeue")
                .route(admin(web::post().to(topics::requeue_dead_many))),
        )
        .service(
            web::resource("/v1/topics/{topic}/dead/{id}/requeue")
                .route(admin(web::post().to(topics::requeue_dead))),
        )
        .service(
            web::resource("/v1/topics/{topic}/dead/{id}")
                .route(admin(web::delete().to(topics::delete_dead))),
        )
        .service(
            web::resource("/v1/topics/{topic}/events")
                .route(read(web::get().to(topics::list_events))),
        )
        .service(
            web::resource("/v1/topics/{topic}/meetings/{id}")
                .route(write(web::put().to(meetings::put_meeting)))
                .route(read(web::get().to(meetings::get_meeting)))
                .route(write(web::delete().to(meetings::delete_meeting))),
        )
        .service(
            web::resource("/v1/topics/{topic}/meetings/{id}/approve")
                .route(write(web::post().to(meetings::approve_meeting))),
        )
        .service(web::resource("/v1/token").route(guard::route(
            Need::Token(Scope::Read, Topics::None),
            web::get().to(ops::token),
        )))
        .service(
            web::resource("/health").route(guard::route(Need::Ops, web::get().to(ops::health))),
        )
        .service(web::resource("/livez").route(guard::route(Need::Ops, web::get().to(ops::livez))))
        .service(
            web::resource("/readyz").route(guard::route(Need::Ops, web::get().to(ops::readyz))),
        )
        .service(web::resource("/v1/slots").route(guard::route(
            Need::Token(Scope::Read, Topics::None),
            web::get().to(ops::slots),
        )))
        .service(
            web::resource("/metrics").route(guard::route(Need::Ops, web::get().to(ops::metrics))),
        )
        .service(
            web::resource("/openapi.json")
                .route(guard::route(Need::Ops, web::get().to(openapi::openapi))),
        )
        .configure(ui::configure);
}

/// Turns every error response without a JSON body into one.
pub(crate) fn json_errors<B: actix_web::body::MessageBody + 'static>() -> ErrorHandlers<B> {
    ErrorHandlers::new().default_handler(error::ensure_json_body)
}

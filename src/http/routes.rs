//! The route table: each route's path, its methods, what each needs (`guard`) and its
//! handler, written once. From it come the router's registrations ([`register`]), the
//! OpenAPI document's paths ([`ApiDoc`], each handler's `#[utoipa::path]`) and the table of
//! needs ([`NEEDS`]), so a route cannot be served without being described, or described
//! without being served (the test below holds the handlers' own paths to the table, and
//! `tests/docs.rs` the design's table to the document).
//!
//! Routes are tried in order, each with a regex match: the ones a busy service serves most
//! (a pull consumer's claim and acks, a job's write, heartbeats) come first.

use actix_web::web;
use utoipa::OpenApi;

use super::guard::{self, Need, Topics};
use super::{claims, error, flows, jobs, meetings, openapi, ops, topics, transfer};
use crate::access::Scope;
use crate::config::Settings;

/// `read` on the topic the path names.
const READ: Need = Need::Token(Scope::Read, Topics::Named);
/// `write` on the topic the path names.
const WRITE: Need = Need::Token(Scope::Write, Topics::Named);
/// `admin` on the topic the path names.
const ADMIN: Need = Need::Token(Scope::Admin, Topics::Named);
/// Any valid token, whatever its topics.
const ANY_TOKEN: Need = Need::Token(Scope::Read, Topics::None);
/// A `read` token for every topic (the list of topics).
const EVERY_TOPIC: Need = Need::Token(Scope::Read, Topics::Every);
/// The operations routes: open unless `auth_health_and_metrics`.
const OPS: Need = Need::Ops;

/// The body limits a route may take over the service's (`http.max_body_bytes`).
pub(crate) struct Bodies {
    /// JSON of batches (`http.max_batch_body_bytes`).
    batch: web::JsonConfig,
    /// A raw body as large as a batch (an import's JSON Lines).
    lines: web::PayloadConfig,
}

impl Bodies {
    pub(crate) fn of(settings: &Settings) -> Self {
        Bodies {
            batch: web::JsonConfig::default()
                .limit(settings.http.max_batch_body_bytes)
                .error_handler(error::json_error),
            lines: web::PayloadConfig::new(settings.http.max_batch_body_bytes),
        }
    }

    /// `resource` with the body limit `kind` names (`json`: the service's own).
    fn apply(&self, kind: &str, resource: actix_web::Resource) -> actix_web::Resource {
        match kind {
            "batch" => resource.app_data(self.batch.clone()),
            "lines" => resource.app_data(self.lines.clone()),
            _ => resource,
        }
    }
}

/// The table: `PATH [body] { METHOD NEED => HANDLER, ... }`.
macro_rules! routes {
    ( $( $path:literal [$body:ident] { $( $method:ident $need:ident => $handler:path ),+ $(,)? } )* ) => {
        /// Registers every route in the table's order, each behind its need.
        pub(crate) fn register(cfg: &mut web::ServiceConfig, bodies: &Bodies) {
            $(
                cfg.service(
                    bodies
                        .apply(stringify!($body), web::resource($path))
                        $( .route(guard::route($need, web::$method().to($handler))) )+
                );
            )*
        }

        /// Each route's path, method (lower case) and need, in the table's order.
        pub(crate) const NEEDS: &[(&str, &str, Need)] = &[
            $( $( ($path, stringify!($method), $need), )+ )*
        ];

        /// The OpenAPI document utoipa derives from the table's handlers.
        #[derive(OpenApi)]
        #[openapi(
            info(
                title = "timeout-center",
                description = "Jobs that fire at a future instant, at least once and on time. Times are ms since the Unix epoch."
            ),
            paths( $( $( $handler ),+ ),* ),
            components(schemas(
                error::ErrorBody,
                error::ApiError,
                crate::model::Job,
                crate::model::JobState,
                crate::events::Event,
                claims::AckItem
            ))
        )]
        pub(crate) struct ApiDoc;
    };
}

routes! {
    "/v1/topics/{topic}/claim" [json] { post WRITE => claims::claim }
    "/v1/topics/{topic}/acks" [batch] { post WRITE => claims::acks }
    "/v1/topics/{topic}/jobs/{id}/ack" [json] { post WRITE => claims::ack }
    "/v1/topics/{topic}/jobs/{id}/retry" [json] { post WRITE => claims::retry }
    "/v1/topics/{topic}/jobs/{id}/bury" [json] { post WRITE => claims::bury }
    "/v1/topics/{topic}/jobs/{id}/touch" [json] { post WRITE => claims::touch }
    "/v1/topics/{topic}/jobs/{id}" [json] {
        put WRITE => jobs::put_job,
        get READ => jobs::get_job,
        delete WRITE => jobs::delete_job,
    }
    "/v1/topics/{topic}/jobs" [json] {
        get READ => jobs::list_jobs,
        post WRITE => jobs::post_job,
        delete WRITE => jobs::cancel_jobs,
    }
    "/v1/topics/{topic}/jobs/{id}/reset" [json] { post WRITE => jobs::reset_job }
    "/v1/topics/{topic}/jobs/{id}/trigger" [json] { post WRITE => jobs::trigger_job }
    "/v1/topics/{topic}/resets" [batch] { post WRITE => jobs::batch_reset }
    "/v1/topics" [json] { get EVERY_TOPIC => topics::list_topics }
    "/v1/topics/{topic}/flows" [json] { get READ => flows::list_flows }
    "/v1/topics/{topic}/flows/{key}" [json] {
        get READ => flows::get_flow,
        put ADMIN => flows::put_flow,
        delete ADMIN => flows::delete_flow,
    }
    // DELETE: admin, or a write token of the tenant that made the topic (the handler).
    "/v1/topics/{topic}" [json] {
        get READ => topics::get_topic,
        put ADMIN => topics::put_topic,
        delete WRITE => topics::delete_topic,
    }
    "/v1/topics/{topic}/dead" [json] {
        get READ => topics::list_dead,
        delete ADMIN => topics::delete_dead_many,
    }
    // An export holds every payload whole, and an import writes any job: admin only.
    "/v1/topics/{topic}/export" [json] { get ADMIN => transfer::export_topic }
    "/v1/topics/{topic}/import" [lines] { post ADMIN => transfer::import_topic }
    "/v1/topics/{topic}/dead/requeue" [json] { post ADMIN => topics::requeue_dead_many }
    "/v1/topics/{topic}/dead/{id}/requeue" [json] { post ADMIN => topics::requeue_dead }
    "/v1/topics/{topic}/dead/{id}" [json] { delete ADMIN => topics::delete_dead }
    "/v1/topics/{topic}/events" [json] { get READ => topics::list_events }
    "/v1/topics/{topic}/meetings/{id}" [json] {
        put WRITE => meetings::put_meeting,
        get READ => meetings::get_meeting,
        delete WRITE => meetings::delete_meeting,
    }
    "/v1/topics/{topic}/meetings/{id}/approve" [json] { post WRITE => meetings::approve_meeting }
    "/v1/token" [json] { get ANY_TOKEN => ops::token }
    "/health" [json] { get OPS => ops::health }
    "/livez" [json] { get OPS => ops::livez }
    "/readyz" [json] { get OPS => ops::readyz }
    "/v1/slots" [json] { get ANY_TOKEN => ops::slots }
    "/v1/history" [json] { get ANY_TOKEN => ops::history }
    "/metrics" [json] { get OPS => ops::metrics }
    "/openapi.json" [json] { get OPS => openapi_json }
}

/// This API's description, generated from the route handlers.
#[utoipa::path(operation_id = "get_openapi", get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "OpenAPI 3 document")))]
async fn openapi_json(state: web::Data<super::AppState>) -> actix_web::HttpResponse {
    let (types, payloads) = (state.center.job_types(), state.center.payload_schemas());
    actix_web::HttpResponse::Ok().json(described(&types, &payloads, &state.settings.limits))
}

/// The document `/openapi.json` serves (`openapi::document` over the table's).
pub(crate) fn described(
    job_types: &[String],
    payloads: &std::collections::BTreeMap<String, serde_json::Value>,
    limits: &crate::config::LimitsSettings,
) -> serde_json::Value {
    openapi::document(ApiDoc::openapi(), NEEDS, job_types, payloads, limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route of the table is a path and method of the document its handlers make,
    /// and the document has no other: a handler whose `#[utoipa::path]` names another path
    /// or method than its route is caught here.
    #[test]
    fn the_table_and_the_documents_paths_are_one() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let mut documented: Vec<(String, String)> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .unwrap()
                    .keys()
                    .map(|m| (path.clone(), m.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut table: Vec<(String, String)> = NEEDS
            .iter()
            .map(|(p, m, _)| (p.to_string(), m.to_string()))
            .collect();
        documented.sort();
        table.sort();
        assert_eq!(table, documented);
        assert_eq!(table.len(), 43);
    }
}

/// The field schemas of `wire/schema.rs` as the served document shows them.
#[cfg(test)]
mod field_schemas {
    use serde_json::Value;

    fn doc() -> Value {
        super::described(
            &[],
            &Default::default(),
            &crate::config::Settings::defaults().limits,
        )
    }

    fn field<'a>(doc: &'a Value, schema: &str, field: &str) -> &'a Value {
        &doc["components"]["schemas"][schema]["properties"][field]
    }

    /// The parameter `name` (in `place`) of `method path`.
    fn param<'a>(doc: &'a Value, method: &str, path: &str, name: &str) -> &'a Value {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{method} {path} has no parameter {name}"))
    }

    /// The parameters' bounds come from their types (`params.rs`, the query structs), and
    /// are those the handlers check: a bulk change takes any count (the document said at
    /// most 1,000 when the bounds were matched by a parameter's name), a page of slots
    /// goes on after a topic of any allowed name's length (it said 64 of 128), an import's
    /// slots stop where a topic's do, and every path parameter is required.
    #[test]
    fn the_parameters_state_the_bounds_their_handlers_check() {
        let doc = doc();
        for (method, path) in [
            ("delete", "/v1/topics/{topic}/jobs"),
            ("post", "/v1/topics/{topic}/dead/requeue"),
            ("delete", "/v1/topics/{topic}/dead"),
        ] {
            let limit = &param(&doc, method, path, "limit")["schema"];
            assert_eq!(limit["minimum"], 1, "{method} {path}");
            assert!(limit.get("maximum").is_none(), "{method} {path}: {limit}");
        }
        let page = crate::num::usize_u64(crate::store::MAX_PAGE);
        for (method, path) in [
            ("get", "/v1/topics/{topic}/jobs"),
            ("get", "/v1/topics/{topic}/dead"),
            ("get", "/v1/topics/{topic}/events"),
        ] {
            assert_eq!(
                param(&doc, method, path, "limit")["schema"]["maximum"],
                page
            );
        }
        let after = param(&doc, "get", "/v1/slots", "after")["schema"]["pattern"]
            .as_str()
            .unwrap();
        let longest = format!("{{1,{}}}/", crate::validate::MAX_TOPIC_NAME);
        assert!(after.contains(&longest), "{after}");
        assert_eq!(
            param(&doc, "post", "/v1/topics/{topic}/import", "slots")["schema"]["maximum"],
            crate::topic::MAX_SLOTS
        );
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                for p in op["parameters"].as_array().into_iter().flatten() {
                    if p["in"] == "path" {
                        assert_eq!(p["required"], true, "{method} {path} {}", p["name"]);
                        assert!(
                            p["schema"].get("pattern").is_some()
                                || p["schema"].get("maxLength").is_some(),
                            "{method} {path} {}: a path parameter with no bound",
                            p["name"]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_description_states_the_bounds_that_are_checked() {
        let doc = doc();
        let max = |s, f| field(&doc, s, f)["maximum"].as_i64();
        assert_eq!(max("JobBody", "delay_ms"), Some(crate::time::MAX_DELAY_MS));
        assert_eq!(max("JobBody", "fire_at"), Some(crate::time::MAX_MILLIS));
        assert_eq!(
            max("ClaimBody", "max"),
            Some(crate::num::signed(crate::num::usize_u64(
                crate::claims::MAX_CLAIM
            )))
        );
        assert_eq!(
            max("TopicSettings", "max_attempts"),
            Some(i64::from(crate::topic::MAX_ATTEMPTS))
        );
        let slots = field(&doc, "TopicSettings", "slots")["enum"]
            .as_array()
            .cloned();
        assert_eq!(
            slots.and_then(|s| s.last().and_then(Value::as_i64)),
            Some(i64::from(crate::topic::MAX_SLOTS))
        );
        assert_eq!(
            field(&doc, "AckItem", "id")["maxLength"].as_u64(),
            Some(crate::num::usize_u64(crate::validate::MAX_ID_LEN))
        );
        // Integer bounds are written as integers, and a field keeps its description.
        assert!(field(&doc, "ClaimBody", "wait_ms")["maximum"].is_u64());
        assert!(field(&doc, "ClaimBody", "wait_ms")["description"].is_string());
    }
}

//! The OpenAPI document: what utoipa derives from the handlers and the request types (whose
//! bounded fields build their schemas beside their checks, see `wire/schema.rs`), and what it
//! cannot say.

use super::guard::Need;

/// The OpenAPI document as served: what utoipa derives from the handlers, with what it cannot
/// say. A topic view carries its figures beside its settings, so the settings' schema (which
/// refuses unknown fields as a request would) must not forbid them there.
///
/// `api` is what utoipa derives from the route table's handlers, `needs` what each route
/// needs (shown per operation as `x-toc-needs`).
/// `job_types` are the types this instance accepts (registered and foreign): a job's `type`
/// is one of them.
/// `payloads` are the payload schemas of the types that declare one: a job of such a type
/// must match it.
/// `limits` are the operator's floors (`limits.min_every_ms`, `limits.min_retry_delay_ms`):
/// the fields they bound say so as their minimum.
pub(crate) fn document(
    api: utoipa::openapi::OpenApi,
    needs: &[(&str, &str, Need)],
    job_types: &[String],
    payloads: &std::collections::BTreeMap<String, serde_json::Value>,
    limits: &crate::config::LimitsSettings,
) -> serde_json::Value {
    let mut doc = serde_json::to_value(api).expect("the OpenAPI document serialises");
    if let Some(config) = doc
        .pointer_mut("/components/schemas/TopicConfig")
        .and_then(|c| c.as_object_mut())
    {
        config.remove("additionalProperties");
    }
    describe_paths(&mut doc);
    for (path, method, need) in needs {
        let pointer = format!("/paths/{}/{method}", path.replace('/', "~1"));
        if let Some(op) = doc.pointer_mut(&pointer).and_then(|o| o.as_object_mut()) {
            op.insert("x-toc-needs".into(), serde_json::json!(need.words()));
        }
    }
    describe_bodies(&mut doc);
    for (pointer, floor) in [
        (
            "/components/schemas/RepeatBody/properties/every_ms",
            limits.min_every_ms,
        ),
        (
            "/components/schemas/BackoffSettings/properties/base_ms",
            limits.min_retry_delay_ms,
        ),
        (
            "/components/schemas/RetryBody/properties/delay_ms",
            limits.min_retry_delay_ms,
        ),
    ] {
        if let Some(field) = doc.pointer_mut(pointer).and_then(|f| f.as_object_mut()) {
            let least = field.get("minimum").and_then(|m| m.as_u64()).unwrap_or(0);
            field.insert("minimum".into(), serde_json::json!(least.max(floor)));
        }
    }
    describe_job_types(&mut doc, job_types, payloads);
    tidy(&mut doc);
    doc
}

/// What utoipa cannot derive of the routes: the error answers every route can give (bad
/// input, auth, unknown topic, body too large or not JSON, the store away). Their
/// parameters' bounds are on the parameter types (`params.rs`, the query structs).
fn describe_paths(doc: &mut serde_json::Value) {
    if let Some(paths) = doc.pointer_mut("/paths").and_then(|p| p.as_object_mut()) {
        for (path, item) in paths.iter_mut() {
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            for (method, op) in item.iter_mut() {
                // OpenAPI: a path parameter is always required.
                for param in op
                    .get_mut("parameters")
                    .and_then(|p| p.as_array_mut())
                    .into_iter()
                    .flatten()
                    .filter(|p| p["in"] == "path")
                {
                    param["required"] = serde_json::json!(true);
                }
                if !path.starts_with("/v1/") {
                    continue;
                }
                let with_body = op.get("requestBody").is_some();
                let Some(responses) = op.get_mut("responses").and_then(|r| r.as_object_mut())
                else {
                    continue;
                };
                for (status, what) in error_answers(path, method, with_body) {
                    responses.entry(status).or_insert_with(|| serde_json::json!({
                        "description": what,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
                    }));
                }
            }
        }
    }
}

/// The error answers a route may give beside its own: bad input, auth, an unknown topic, a
/// body too late, large or not JSON, a limit, the store away.
fn error_answers(path: &str, method: &str, with_body: bool) -> Vec<(&'static str, &'static str)> {
    let mut statuses = vec![
        ("400", "Bad input: the message names the field."),
        ("401", "A bearer token is required (when tokens are set)."),
        (
            "403",
            "The token's scope or topic pattern does not allow this call (the message says what it lacks); with auth off, a Host that is neither an IP address, localhost nor an allowed name.",
        ),
        ("503", "The store is unavailable."),
    ];
    if path.contains("{topic}") {
        statuses.push(("404", "No such topic (topic_not_found), or no such job."));
    }
    if with_body || method == "put" || method == "post" {
        statuses.push((
            "408",
            "The body did not arrive within http.body_timeout_ms.",
        ));
        statuses.push(("413", "The body is over the limit."));
        statuses.push(("415", "The body must be JSON."));
        if path.contains("{topic}") {
            statuses.push(("409", "A limit the operator set (limit_reached: limits.max_topics, limits.max_total_slots), or a conflict the message names."));
        }
    }
    if path.ends_with("/claim") {
        statuses.push(("429", "Too many long polls wait on this instance (limits.max_long_polls): claim again after Retry-After."));
    }
    if path.ends_with("/meetings/{id}") && method == "put" {
        statuses.push(("422", "Fields valid one by one disagree: the booking ends before it starts, a reminder falls before the epoch, or the body's id is not the path's."));
    }
    let job_body = (path.ends_with("/jobs/{id}") && method == "put")
        || (path.ends_with("/jobs") && method == "post");
    if job_body {
        statuses.push(("422", "What a job's schema cannot tell from a good one: a recurring job's repeat.cron does not parse or names no instant that exists, or repeat.tz is not an IANA time zone; or a payload its type refuses, such as a webhook's payload.url that does not parse or whose address the egress policy refuses."));
    }
    if path.ends_with("/resets") && method == "post" {
        statuses.push(("422", "The create's payload is refused by its type: a webhook's payload.url that does not parse or whose address the egress policy refuses."));
    }
    statuses
}

/// What no one field of a body says: a topic's default type is a job type, a job's time is
/// `fire_at` or `delay_ms`, exactly one (or neither for a recurring job), and a schedule is
/// `cron` or `every_ms`.
fn describe_bodies(doc: &mut serde_json::Value) {
    // The bounds of fields are the request types' own (`#[schema(schema_with = ...)]`, see
    // `schema.rs`); what remains is what no one field says.
    if let Some(props) = doc.pointer_mut("/components/schemas/TopicSettings/properties") {
        props["default_type"] = serde_json::json!({
            "description": "The type of a job scheduled without one.",
            "anyOf": [{"$ref": "#/components/schemas/JobType"}, {"type": "null"}]
        });
    }
    for name in ["JobBody", "ResetBody", "BatchReset"] {
        let Some(schema) = doc.pointer_mut(&format!("/components/schemas/{name}")) else {
            continue;
        };
        // A job's time is `fire_at` or `delay_ms`: exactly one of the two, said as a condition rather than a `oneOf` of two partial
        // schemas, which client generators turn into two anonymous body types.
        let one_time = serde_json::json!({
            "if": {"required": ["fire_at"], "properties": {"fire_at": {"type": "integer"}}},
            "then": {"properties": {"delay_ms": {"type": "null"}}},
            "else": {"required": ["delay_ms"], "properties": {"delay_ms": {"type": "integer"}}}
        });
        let one_time = if name == "JobBody" {
            // Or, for a recurring job, neither: its first fire is its schedule's first instant.
            serde_json::json!({
                "if": {"required": ["fire_at"], "properties": {"fire_at": {"type": "integer"}}},
                "then": {"properties": {"delay_ms": {"type": "null"}}},
                "else": {"anyOf": [
                    {"required": ["delay_ms"], "properties": {"delay_ms": {"type": "integer"}}},
                    {"required": ["repeat"], "properties": {"repeat": {"type": "object"}}}
                ]}
            })
        } else {
            one_time
        };
        match schema.get_mut("allOf").and_then(|a| a.as_array_mut()) {
            Some(all) => all.push(one_time),
            None => schema["allOf"] = serde_json::json!([one_time]),
        }
    }
    // A schedule is `cron` (with an optional `tz`) or `every_ms`: exactly one.
    if let Some(schema) = doc.pointer_mut("/components/schemas/RepeatBody") {
        schema["allOf"] = serde_json::json!([{
            "if": {"required": ["cron"], "properties": {"cron": {"type": "string"}}},
            "then": {"properties": {"every_ms": {"type": "null"}}},
            "else": {"required": ["every_ms"],
                     "properties": {"every_ms": {"type": "integer"}, "tz": {"type": "null"}}}
        }]);
    }
}

/// The job types this instance accepts (`JobType`), and each type's payload schema as a
/// condition of the bodies that create jobs.
fn describe_job_types(
    doc: &mut serde_json::Value,
    job_types: &[String],
    payloads: &std::collections::BTreeMap<String, serde_json::Value>,
) {
    let per_type: Vec<serde_json::Value> = payloads
        .iter()
        .map(|(name, schema)| {
            // An absent payload is null: required unless the type takes null.
            let nullable = schema["type"]
                .as_array()
                .is_some_and(|t| t.contains(&"null".into()));
            let mut then = serde_json::json!({"properties": {"payload": schema}});
            if !nullable {
                then["required"] = serde_json::json!(["payload"]);
            }
            serde_json::json!({
                "if": {"required": ["type"], "properties": {"type": {"const": name}}},
                "then": then
            })
        })
        .collect();
    for name in ["JobBody", "BatchCreate"] {
        let Some(schema) = doc.pointer_mut(&format!("/components/schemas/{name}")) else {
            continue;
        };
        schema["properties"]["type"] = serde_json::json!({
            "description": "The job type (the topic's default type when absent).",
            "anyOf": [{"$ref": "#/components/schemas/JobType"}, {"type": "null"}]
        });
        if !per_type.is_empty() {
            let mut all = per_type.clone();
            if let Some(serde_json::Value::Array(before)) = schema.get("allOf") {
                all.extend(before.iter().cloned());
            }
            schema["allOf"] = all.into();
        }
    }
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(|s| s.as_object_mut())
    {
        let names: Vec<serde_json::Value> = job_types.iter().map(|t| t.as_str().into()).collect();
        schemas.insert(
            "JobType".into(),
            serde_json::json!({"type": "string", "enum": names, "description": "A job type this service accepts."}),
        );
    }
}

/// Shapes client generators need: a field of one schema is that schema, and a payload is any
/// JSON value.
fn tidy(doc: &mut serde_json::Value) {
    // A field of one schema is that schema, not a `oneOf` of one reference (what utoipa
    // writes for a field with a default), which client generators refuse.
    if let Some(schemas) = doc.pointer_mut("/components/schemas") {
        unwrap_single_refs(schemas);
    }
    // A payload and an event's data are any JSON value, not only objects.
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(|s| s.as_object_mut())
    {
        for schema in schemas.values_mut() {
            for field in ["payload", "data"] {
                if let Some(p) = schema.pointer_mut(&format!("/properties/{field}"))
                    && let Some(p) = p.as_object_mut()
                {
                    p.remove("type");
                }
            }
        }
    }
}

/// Replaces every `{"oneOf": [{"$ref": ...}], "default": ...}` under `value` by its one
/// reference (with its description).
fn unwrap_single_refs(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            let single = map
                .get("oneOf")
                .and_then(|o| o.as_array())
                .filter(|o| o.len() == 1 && o[0].get("$ref").is_some())
                .map(|o| o[0].clone());
            if let Some(reference) = single {
                *value = reference;
                return;
            }
            map.values_mut().for_each(unwrap_single_refs);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(unwrap_single_refs),
        _ => {}
    }
}

//! A topic's export and import (`crate::transfer`), what `toc export` and `toc import` call:
//! admin only, since an export holds every payload whole.

use actix_web::{HttpResponse, web};
use bytes::Bytes;
use futures_util::StreamExt;
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppState;
use super::error::{ApiError, ApiResult, ErrorBody};
use crate::store::{end_line, settings_line};
use crate::transfer::{Batch, ImportReport, Line, LineSum, MEDIA_TYPE};

/// Most jobs one import request may carry.
pub(crate) const MAX_IMPORT_JOBS: usize = 10_000;

/// The topic's settings and every job, as JSON Lines: its settings line, the jobs of each
/// slot in turn (scheduled, running, then dead, each in score order), and an `end` line
/// with the count. Streamed a slot at a time. Refused (409) while the topic doubles: jobs
/// still in their old slots would be written where a lookup does not find them.
#[utoipa::path(get, path = "/v1/topics/{topic}/export", tag = "topics",
    params(super::params::TopicPath),
    responses((status = 200, description = "JSON Lines (`kind`: `topic`, `job`, `end`)",
            content_type = "application/x-ndjson", body = String),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub(crate) async fn export_topic(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let t = state.center.topic_settings(&path).await?;
    if let Some(from) = t.draining_from {
        return Err(crate::error::Error::TopicConflict {
            topic: t.name.clone(),
            message: format!(
                "the topic doubles now (from {from} slots to {}): export it once its sweep \
                 has moved every job home (GET /v1/topics/{} shows no draining_from)",
                t.slots, t.name
            ),
        }
        .into());
    }
    let head = Bytes::from(settings_line(&t) + "\n");
    let slots = futures_util::stream::unfold((0u32, 0u64, false), move |(slot, jobs, done)| {
        let (state, t) = (state.clone(), t.clone());
        async move {
            if done {
                return None;
            }
            if slot == t.slots {
                let end = Bytes::from(end_line(&t.name, jobs) + "\n");
                return Some((Ok(end), (slot, jobs, true)));
            }
            match state.center.export_slot(&t, slot).await {
                Ok(found) => {
                    let n = crate::num::usize_u64(found.len());
                    let mut text = String::new();
                    for job in found {
                        let line = Line::Job { slot, job };
                        text.push_str(&serde_json::to_string(&line).expect("a line serialises"));
                        text.push('\n');
                    }
                    Some((Ok(Bytes::from(text)), (slot + 1, jobs + n, false)))
                }
                // The answer is under way: the connection ends without the `end` line,
                // which is how the reader knows the export is not whole.
                Err(e) => Some((
                    Err(actix_web::error::ErrorServiceUnavailable(e.to_string())),
                    (slot, jobs, true),
                )),
            }
        }
    });
    let body =
        futures_util::stream::once(async move { Ok::<_, actix_web::Error>(head) }).chain(slots);
    Ok(HttpResponse::Ok().content_type(MEDIA_TYPE).streaming(body))
}

/// `POST /v1/topics/{topic}/import`'s query.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ImportQuery {
    /// The digest of the topic's lines in the export (`sha256:` and 64 hex digits).
    #[param(pattern = "^sha256:[0-9a-f]{64}$")]
    pub digest: String,
    /// The slot count the topic had where it was exported.
    /// (1 to `topic::MAX_SLOTS`: a literal here, held to the constant by a test of
    /// `routes.rs`.)
    #[param(minimum = 1, maximum = 4096)]
    pub slots: u32,
    /// The topic's last batch: the digest is recorded once it is written, and the same
    /// import is skipped whole after.
    #[serde(default)]
    pub last: bool,
}

fn is_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    })
}

/// Writes a batch of a topic's export (JSON Lines: its settings line in the first batch,
/// then up to 10,000 job lines), each job into the slot it was exported from unless that
/// slot holds its id already. Every line is checked before any is written.
#[utoipa::path(post, path = "/v1/topics/{topic}/import", tag = "topics",
    params(super::params::TopicPath, ImportQuery),
    request_body(content = String, content_type = "application/x-ndjson",
        description = "Lines of the topic's export"),
    responses((status = 200, body = ImportReport), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn import_topic(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<ImportQuery>,
    body: Bytes,
) -> ApiResult<HttpResponse> {
    let query = query.into_inner();
    if !is_digest(&query.digest) {
        return Err(ApiError::invalid(
            "digest",
            "must be sha256: and 64 lower-case hex digits",
        ));
    }
    let text = std::str::from_utf8(&body)
        .map_err(|_| ApiError::invalid("body", "must be JSON Lines in UTF-8"))?;
    let mut settings = None;
    let mut jobs = Vec::new();
    let mut lines = LineSum::default();
    let mut ids = std::collections::HashMap::new();
    let floor = state.settings.limits.min_every_ms;
    for (n, text) in text.lines().enumerate() {
        if text.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(text)
            .map_err(|e| ApiError::invalid("body", format!("line {}: {e}", n + 1)))?;
        lines.add(text);
        match line {
            Line::Topic { settings: s } => settings = Some(s),
            Line::Job { slot, job } => {
                // The checks a PUT of the job makes that are the service's (the store's
                // own are made on every line before any is written).
                if let Some(crate::Recurrence::Every { every_ms, .. }) = &job.repeat
                    && *every_ms < floor
                {
                    return Err(ApiError::invalid(
                        "repeat.every_ms",
                        format!(
                            "line {}: job {:?}: must be at least {floor} (limits.min_every_ms), got {every_ms}",
                            n + 1,
                            job.id
                        ),
                    ));
                }
                if let Some(first) = ids.insert(job.id.clone(), n + 1) {
                    return Err(ApiError::invalid(
                        "id",
                        format!(
                            "line {}: job {:?} is on line {first} of the batch too: an id is imported once",
                            n + 1,
                            job.id
                        ),
                    ));
                }
                jobs.push((slot, job));
            }
            Line::End { .. } => {}
        }
        if jobs.len() > MAX_IMPORT_JOBS {
            return Err(ApiError::invalid(
                "body",
                format!("at most {MAX_IMPORT_JOBS} jobs a request"),
            ));
        }
    }
    let batch = Batch {
        settings,
        slots: query.slots,
        digest: query.digest,
        jobs,
        last: query.last,
        lines,
    };
    Ok(HttpResponse::Ok().json(state.center.import(&path, batch).await?))
}

//! Every error the API answers, in one place: `{"error": {"code", "message"}}` with the
//! status its code maps to. Library errors, extractor errors (bad JSON, wrong content type,
//! bodies too large) and anything the framework answers on its own all end up here.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::ServiceResponse;
use actix_web::error::{JsonPayloadError, PathError, QueryPayloadError};
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::ErrorHandlerResponse;
use actix_web::{HttpRequest, HttpResponse, ResponseError};
use serde::Serialize;
use serde_json::json;

use crate::error::Error;

/// The body of every error answer: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody {
    pub error: ApiError,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub(crate) struct ApiError {
    #[serde(skip)]
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    /// Seconds for a `Retry-After` header (a 429 at a limit).
    #[serde(skip)]
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status: status.as_u16(),
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The same error, answered with `Retry-After: secs`.
    pub(crate) fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    pub(crate) fn invalid(field: &str, message: impl std::fmt::Display) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            format!("invalid {field}: {message}"),
        )
    }

    pub(crate) fn not_found(what: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", what)
    }

    /// 403: the token (or, with auth off, the `Host`) does not allow the call; `message`
    /// says what it lacks.
    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub(crate) fn unauthorized() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid bearer token is required: Authorization: Bearer <token>",
        )
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let mut res = HttpResponse::build(self.status_code());
        if let Some(secs) = self.retry_after {
            res.insert_header((actix_web::http::header::RETRY_AFTER, secs.to_string()));
        }
        res.json(json!({"error": self}))
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let message = e.to_string();
        match e {
            Error::Invalid { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
            }
            Error::Unprocessable { .. } => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable", message)
            }
            Error::PayloadTooLarge { .. } => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
            }
            Error::UnknownTopic(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_topic", message)
            }
            Error::TopicNotFound(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "topic_not_found", message)
            }
            Error::TopicConflict { .. } => {
                ApiError::new(StatusCode::CONFLICT, "topic_conflict", message)
            }
            Error::LimitReached { .. } => {
                ApiError::new(StatusCode::CONFLICT, "limit_reached", message)
            }
            Error::Fenced { .. } => ApiError::new(StatusCode::CONFLICT, "fenced", message),
            Error::StaleLayout { .. } => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
            }
            Error::WrongTopicKind { .. } => {
                ApiError::new(StatusCode::CONFLICT, "wrong_topic_kind", message)
            }
            Error::Unavailable(_) | Error::Redis(_) | Error::Io { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                message,
            ),
            Error::StoreFull(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_full", message)
            }
            Error::Corrupt(_) | Error::Undecodable { .. } => {
                tracing::error!(error = %message, "corrupt store data");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
            }
        }
    }
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;

pub(crate) fn json_error(err: JsonPayloadError, req: &HttpRequest) -> actix_web::Error {
    let e = match &err {
        JsonPayloadError::ContentType => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be JSON (Content-Type: application/json)",
        ),
        JsonPayloadError::Overflow { limit }
        | JsonPayloadError::OverflowKnownLength { limit, .. } => {
            // Named by the setting that gave this route its limit.
            let setting = req
                .app_data::<actix_web::web::Data<super::AppState>>()
                .filter(|s| s.settings.http.max_batch_body_bytes == *limit)
                .map_or("http.max_body_bytes", |_| "http.max_batch_body_bytes");
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("the body is over the limit of {limit} bytes ({setting})"),
            )
        }
        JsonPayloadError::Deserialize(e) => ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            format!("invalid body: {e}"),
        ),
        other => ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", other.to_string()),
    };
    e.into()
}

pub(crate) fn query_error(err: QueryPayloadError, _: &HttpRequest) -> actix_web::Error {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        format!("invalid query: {err}"),
    )
    .into()
}

pub(crate) fn path_error(err: PathError, _: &HttpRequest) -> actix_web::Error {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        format!("invalid path: {err}"),
    )
    .into()
}

/// Gives any error response that is not JSON yet (a 404 of an unknown route, a 405, a
/// framework error) the JSON error body.
pub(crate) fn ensure_json_body<B: MessageBody + 'static>(
    res: ServiceResponse<B>,
) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if is_json {
        return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
    }
    let status = res.status();
    let code = match status {
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        s if s.is_client_error() => "bad_request",
        _ => "internal",
    };
    let message = status.canonical_reason().unwrap_or("error").to_string();
    let (req, res) = res.into_parts();
    let mut res = res.set_body(BoxBody::new(
        json!({"error": {"code": code, "message": message}}).to_string(),
    ));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(ErrorHandlerResponse::Response(
        ServiceResponse::new(req, res).map_into_right_body(),
    ))
}

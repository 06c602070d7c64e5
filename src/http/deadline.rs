//! A deadline for a request's body (`http.body_timeout_ms`): the headers have one of their
//! own (actix's client request timeout), but a body trickled a byte at a time would hold its
//! connection and a handler for as long as the client likes. The body is read here, up to
//! the largest body any route accepts, within the deadline: 408 past it (the connection is
//! closed), 413 past the size; the route then reads it from memory.

use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage};
use bytes::BytesMut;
use futures_util::StreamExt;

use super::error::ApiError;

#[derive(Clone, Copy)]
pub(crate) struct BodyDeadline {
    deadline: Duration,
    max_bytes: usize,
}

impl BodyDeadline {
    pub(crate) fn new(deadline: Duration, max_bytes: usize) -> Self {
        BodyDeadline {
            deadline,
            max_bytes,
        }
    }
}

/// Why a body was not read whole.
enum Unread {
    Large,
    Broken,
}

impl BodyDeadline {
    /// The middleware (`actix_web::middleware::from_fn`): reads the body whole within the
    /// deadline, then hands the request on with it.
    pub(crate) async fn read_body(
        self,
        mut req: ServiceRequest,
        next: Next<impl MessageBody + 'static>,
    ) -> Result<ServiceResponse<impl MessageBody>, Error> {
        let BodyDeadline {
            deadline,
            max_bytes,
        } = self;
        let mut payload = req.take_payload();
        let mut body = BytesMut::new();
        let read = async {
            while let Some(chunk) = payload.next().await {
                let chunk = chunk.map_err(|_| Unread::Broken)?;
                if body.len() + chunk.len() > max_bytes {
                    return Err(Unread::Large);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(())
        };
        let refused = match tokio::time::timeout(deadline, read).await {
            Ok(Ok(())) => None,
            Err(_) => Some(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                format!(
                    "the body did not arrive within {} ms (http.body_timeout_ms)",
                    deadline.as_millis()
                ),
            )),
            Ok(Err(Unread::Large)) => Some(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("the body is over {max_bytes} bytes (http.max_batch_body_bytes)"),
            )),
            Ok(Err(Unread::Broken)) => Some(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                "the body could not be read",
            )),
        };
        if let Some(e) = refused {
            let mut res = actix_web::ResponseError::error_response(&e);
            res.head_mut()
                .set_connection_type(actix_web::http::ConnectionType::Close);
            return Ok(req.into_response(res).map_into_right_body());
        }
        req.set_payload(Payload::from(body.freeze()));
        Ok(next.call(req).await?.map_into_left_body())
    }
}

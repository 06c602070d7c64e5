//! Meeting bookings over HTTP: `PUT`/`GET`/`DELETE /v1/topics/{topic}/meetings/{id}` and
//! `POST .../approve` (see `jobs/meeting_state.rs`).

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::AppState;
use super::error::{ApiError, ApiResult, ErrorBody};
use crate::jobs::meeting_state::Booking;
use crate::meetings;

/// Creates (201) or moves (200) a booking's jobs.
#[utoipa::path(put, path = "/v1/topics/{topic}/meetings/{id}", tag = "meetings",
    params(super::params::MeetingPath), request_body = Booking,
    responses((status = 201, body = Booking), (status = 200, body = Booking), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn put_meeting(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Json<Booking>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    let mut booking = body.into_inner();
    if !booking.id.is_empty() && booking.id != id {
        return Err(crate::error::Error::unprocessable(
            "id",
            "the body's id differs from the path's",
        )
        .into());
    }
    booking.id = id;
    let existed = meetings::put_meeting(&state.center, &topic, booking.clone()).await?;
    let mut res = if existed {
        HttpResponse::Ok()
    } else {
        HttpResponse::Created()
    };
    Ok(res.json(booking))
}

#[utoipa::path(get, path = "/v1/topics/{topic}/meetings/{id}", tag = "meetings",
    params(super::params::MeetingPath),
    responses((status = 200, body = Booking), (status = 404, body = ErrorBody)))]
pub(crate) async fn get_meeting(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    crate::validate::job_id(&id)?;
    match meetings::get_meeting(&state.center, &topic, &id).await? {
        Some(b) => Ok(HttpResponse::Ok().json(b)),
        None => Err(ApiError::not_found(format!(
            "no meeting {id:?} in topic {topic:?}"
        ))),
    }
}

/// Cancels every job of a booking (204).
#[utoipa::path(delete, path = "/v1/topics/{topic}/meetings/{id}", tag = "meetings",
    params(super::params::MeetingPath),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub(crate) async fn delete_meeting(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    crate::validate::job_id(&id)?;
    if !meetings::cancel_meeting(&state.center, &topic, &id).await? {
        return Err(ApiError::not_found(format!(
            "no meeting {id:?} in topic {topic:?}"
        )));
    }
    Ok(HttpResponse::NoContent().finish())
}

/// Approves a booking: its approval expiry no longer applies.
#[utoipa::path(post, path = "/v1/topics/{topic}/meetings/{id}/approve", tag = "meetings",
    params(super::params::MeetingPath),
    responses((status = 200), (status = 404, body = ErrorBody)))]
pub(crate) async fn approve_meeting(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> ApiResult<HttpResponse> {
    let (topic, id) = path.into_inner();
    crate::validate::job_id(&id)?;
    if !meetings::approve_meeting(&state.center, &topic, &id).await? {
        return Err(ApiError::not_found(format!(
            "no meeting {id:?} in topic {topic:?}"
        )));
    }
    Ok(HttpResponse::Ok().json(json!({"id": id, "approved": true})))
}

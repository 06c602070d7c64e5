//! Meeting bookings over a center: [`put_meeting`] creates or moves a booking as the jobs of
//! its plan (`jobs::meeting_state`), [`approve_meeting`] and [`cancel_meeting`] cancel what
//! no longer applies, [`get_meeting`] reads it back. Every change goes through the center,
//! so it is counted and wakes slots as any other.

use crate::center::TimeoutCenter;
use crate::error::Result;
use crate::jobs::meeting_state::{Booking, MeetingJob, TYPE, job_ref, meeting_id};
use crate::model::{NewJob, ScheduleMode};

/// The booking as stored, if any (carried by its `end` job).
pub async fn get_meeting(center: &TimeoutCenter, topic: &str, id: &str) -> Result<Option<Booking>> {
    meeting_id(id)?;
    let end = center
        .get(topic, &job_ref(id, &format!("{id}#end")))
        .await?;
    Ok(
        end.and_then(|job| match serde_json::from_value(job.payload) {
            Ok(MeetingJob::End { booking }) => Some(booking),
            _ => None,
        }),
    )
}

/// Creates or changes a booking: jobs of the old plan that the new one lacks are cancelled,
/// the others created or moved. A job of a change whose time has already passed is not
/// created again (it fired, or its moment is gone); on creation every job is made.
/// Returns whether the booking existed.
pub async fn put_meeting(center: &TimeoutCenter, topic: &str, booking: Booking) -> Result<bool> {
    booking.validate()?;
    // A booking schedules jobs, so it may create its topic (reads alone never do).
    center.topic(topic).await?;
    let id = booking.id.clone();
    let old = get_meeting(center, topic, &id).await?;
    let now = center.now();
    let new_plan = booking.plan();
    if let Some(old) = &old {
        for job_id in old.plan().keys().filter(|k| !new_plan.contains_key(*k)) {
            center.cancel(topic, &job_ref(&id, job_id)).await?;
        }
    }
    for (job_id, (at, job)) in new_plan {
        let is_end = matches!(job, MeetingJob::End { .. });
        if old.is_some() && at < now && !is_end {
            continue;
        }
        let new = NewJob::new(job_id, at)
            .job_type(TYPE)
            .payload(serde_json::to_value(&job).expect("a meeting job serialises"))
            .shard_key(id.clone());
        center.schedule(topic, new, ScheduleMode::Upsert).await?;
    }
    Ok(old.is_some())
}

/// Approves a booking: its approval expiry no longer applies. False if there is no booking.
pub async fn approve_meeting(center: &TimeoutCenter, topic: &str, id: &str) -> Result<bool> {
    let Some(mut booking) = get_meeting(center, topic, id).await? else {
        return Ok(false);
    };
    booking.approved = true;
    put_meeting(center, topic, booking).await?;
    Ok(true)
}

/// Cancels every job of a booking. False if there is no booking.
pub async fn cancel_meeting(center: &TimeoutCenter, topic: &str, id: &str) -> Result<bool> {
    let Some(booking) = get_meeting(center, topic, id).await? else {
        return Ok(false);
    };
    for job_id in booking.plan().keys() {
        center.cancel(topic, &job_ref(id, job_id)).await?;
    }
    Ok(true)
}

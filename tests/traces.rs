//! The trace context a job keeps (`traceparent`), on both engines through the store: kept
//! from its creation, replaced by a traced reset (its next fire continues the resetting
//! request's trace), left alone by an untraced one, and kept by a plain job only once a
//! traced reset gives it one. The spans themselves are checked end to end by
//! `scripts/otel.sh` against a real OTLP receiver.

#[macro_use]
mod common;

use timeout_center::conformance::*;
use timeout_center::*;

use common::Engine;

const NOW: Millis = 1_700_000_000_000;
const CREATED: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const RESET: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

async fn reset(s: &Store, id: &str, at: Millis, traceparent: Option<&str>) {
    let job = NewJob {
        traceparent: traceparent.map(str::to_string),
        ..NewJob::new(id, at)
    };
    let r = s
        .schedule("t", job, ScheduleMode::ResetOnly, NOW)
        .await
        .unwrap();
    assert_eq!(r.outcome, ScheduleOutcome::Reset, "{id}");
}

async fn traceparent(s: &Store, id: &str) -> Option<String> {
    s.get("t", &JobRef::new(id))
        .await
        .unwrap()
        .unwrap()
        .traceparent
}

async fn a_traced_reset_replaces_the_context_a_job_keeps(e: Engine) {
    let s = &*e.store;
    let traced = NewJob {
        traceparent: Some(CREATED.into()),
        ..NewJob::new("traced", NOW + 60_000)
    };
    s.schedule("t", traced, ScheduleMode::Upsert, NOW)
        .await
        .unwrap();
    s.schedule(
        "t",
        NewJob::new("plain", NOW + 60_000),
        ScheduleMode::Upsert,
        NOW,
    )
    .await
    .unwrap();
    assert_eq!(traceparent(s, "traced").await.as_deref(), Some(CREATED));
    assert_eq!(
        traceparent(s, "plain").await,
        None,
        "a plain job keeps none"
    );
    // Untraced resets leave the context as it was.
    reset(s, "traced", NOW + 70_000, None).await;
    assert_eq!(traceparent(s, "traced").await.as_deref(), Some(CREATED));
    reset(s, "plain", NOW + 70_000, None).await;
    assert_eq!(traceparent(s, "plain").await, None);
    // A traced reset gives its own, to a job with a record and to a plain one.
    reset(s, "traced", NOW + 80_000, Some(RESET)).await;
    assert_eq!(traceparent(s, "traced").await.as_deref(), Some(RESET));
    reset(s, "plain", NOW + 80_000, Some(RESET)).await;
    let plain = s.get("t", &JobRef::new("plain")).await.unwrap().unwrap();
    assert_eq!(
        (plain.traceparent.as_deref(), plain.fire_at),
        (Some(RESET), NOW + 80_000)
    );
}

engine_matrix!(
    #[tokio::test] crate::common::Engine::of;
    a_traced_reset_replaces_the_context_a_job_keeps,
);

//! The built-in job types, end to end on a real Redis: `webhook` against a local HTTP
//! receiver, the `device_offline` cycle, and the `meeting_state` plan.

#[macro_use]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use actix_web::{App, HttpResponse, HttpServer, web};
use serde_json::json;
use timeout_center::events::kind;
use timeout_center::jobs::meeting_state::Booking;
use timeout_center::meetings;
use timeout_center::time::now_ms;
use timeout_center::*;

use common::Engine;
use common::runtime::{events_until, names, settings};

async fn center(e: &Engine) -> TimeoutCenter {
    // The receiver listens on loopback, which the egress policy refuses by default.
    TimeoutCenter::builder(e.store.clone())
        .settings(settings(1_000))
        .webhooks(WebhookSettings::allowing_loopback())
        .start()
        .await
        .unwrap()
}

async fn fast_topic(c: &TimeoutCenter, name: &str, default_type: &str) {
    let mut t = TopicConfig::named(name);
    t.slots = 4;
    t.max_attempts = 3;
    t.backoff.base_ms = 20;
    t.backoff.max_ms = 40;
    t.default_type = default_type.to_string();
    c.put_topic(t).await.unwrap();
}

/// A local receiver: `/ok` answers 200, `/flaky` 500 then 200, `/missing` 404.
async fn receiver() -> (String, Arc<AtomicU32>) {
    let flaky = Arc::new(AtomicU32::new(0));
    let f = flaky.clone();
    let server = HttpServer::new(move || {
        let f = f.clone();
        App::new()
            .route(
                "/ok",
                web::post().to(|body: web::Json<serde_json::Value>| async move {
                    assert_eq!(body.into_inner(), json!({"order": 7}));
                    HttpResponse::Ok().finish()
                }),
            )
            .route(
                "/flaky",
                web::post().to(move || {
                    let n = f.fetch_add(1, Ordering::SeqCst);
                    async move {
                        if n == 0 {
                            HttpResponse::InternalServerError().finish()
                        } else {
                            HttpResponse::Ok().finish()
                        }
                    }
                }),
            )
            .route(
                "/missing",
                web::post().to(|| async { HttpResponse::NotFound().finish() }),
            )
    })
    .workers(1)
    .bind(("127.0.0.1", 0))
    .unwrap();
    let addr = server.addrs()[0];
    actix_rt::spawn(server.run());
    (format!("http://{addr}"), flaky)
}

async fn webhook_done_on_2xx_retried_on_5xx_dead_on_404(e: Engine) {
    let c = center(&e).await;
    fast_topic(&c, "hooks", "webhook").await;
    let (base, flaky) = receiver().await;
    let now = now_ms();
    for (id, path) in [("ok", "/ok"), ("flaky", "/flaky"), ("missing", "/missing")] {
        let payload = json!({"url": format!("{base}{path}"), "body": {"order": 7}});
        let job = NewJob::new(id, now).job_type("webhook").payload(payload);
        c.schedule("hooks", job, ScheduleMode::Upsert)
            .await
            .unwrap();
    }
    let events = events_until(&c, "hooks", 10, |ev| {
        let final_of = |id: &str| {
            ev.iter()
                .any(|e| e.job_id == id && (e.event == kind::DONE || e.event == kind::DEAD))
        };
        final_of("ok") && final_of("flaky") && final_of("missing")
    })
    .await;
    let of = |id: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e.job_id == id && e.event.starts_with("job."))
            .map(|e| e.event.clone())
            .collect()
    };
    assert_eq!(of("ok"), [kind::DONE]);
    assert_eq!(of("flaky"), [kind::RETRY, kind::DONE]);
    assert_eq!(flaky.load(Ordering::SeqCst), 2);
    assert_eq!(of("missing"), [kind::DEAD]);
    let dead = c.get("hooks", &"missing".into()).await.unwrap().unwrap();
    assert_eq!(dead.state, JobState::Dead);
    assert!(
        dead.last_error.unwrap().contains("404"),
        "the status is in the error"
    );
    assert!(c.get("hooks", &"ok".into()).await.unwrap().is_none());
}

async fn device_offline_alarms_repeat_and_recovery_is_reported(e: Engine) {
    let c = center(&e).await;
    fast_topic(&c, "devices", "device_offline").await;
    let create = CreateSpec {
        payload: json!({"timeout_ms": 100, "repeat_ms": 100, "max_alarms": 2}),
        ..CreateSpec::default()
    };
    let beat = |at| vec![Reset::new("dev-1", at)];
    let report = c
        .reset_many("devices", &beat(now_ms() + 100), Some(&create))
        .await
        .unwrap();
    assert_eq!(report.created, 1);
    // Silent: two alarms, then it waits for the device.
    let events = events_until(&c, "devices", 10, |ev| {
        ev.iter().filter(|e| e.event == "device.offline").count() == 2
    })
    .await;
    let alarms: Vec<_> = events
        .iter()
        .filter(|e| e.event == "device.offline")
        .collect();
    assert_eq!(alarms[0].data["alarm"], 1);
    assert_eq!(alarms[1].data["alarm"], 2);
    assert_eq!(alarms[0].data["device_id"], "dev-1");
    assert!(alarms[1].data["silent_ms"].as_u64().unwrap() >= 200);
    crate::common::runtime::quiet(250).await; // 250 ms of real time: no third alarm comes
    let count = c
        .events("devices", None, 100)
        .await
        .unwrap()
        .items
        .iter()
        .filter(|e| e.event == "device.offline")
        .count();
    assert_eq!(count, 2, "max_alarms is 2");
    // Heard again: recovered, and the cycle starts over.
    let report = c
        .reset_many("devices", &beat(now_ms() + 100), Some(&create))
        .await
        .unwrap();
    assert_eq!((report.reset, report.created), (1, 0));
    let events = events_until(&c, "devices", 10, |ev| {
        ev.iter().filter(|e| e.event == "device.offline").count() == 3
    })
    .await;
    let after: Vec<_> = names(&events)
        .into_iter()
        .filter(|n| n.starts_with("device."))
        .collect();
    assert_eq!(
        after,
        [
            "device.offline",
            "device.offline",
            "device.recovered",
            "device.offline"
        ]
    );
    let recovered = events
        .iter()
        .find(|e| e.event == "device.recovered")
        .unwrap();
    assert_eq!(recovered.data, json!({"device_id": "dev-1", "alarms": 2}));
    let third = events
        .iter()
        .filter(|e| e.event == "device.offline")
        .nth(2)
        .unwrap();
    assert_eq!(third.data["alarm"], 1, "the cycle started again");
}

async fn meeting_state_plans_start_end_reminders_and_approval(e: Engine) {
    let c = center(&e).await;
    fast_topic(&c, "rooms", "emit").await;
    // The bookings' instants start a second from now: the puts, moves and the cancel below
    // are all made before the first of them (a reminder at t + 100). From now itself, a
    // loaded machine once took past t + 100 to cancel m4, whose reminder had fired.
    let t = now_ms() + 1_000;
    let approved = Booking {
        id: "m1".into(),
        room: "blue".into(),
        start: t + 300,
        end: t + 700,
        reminders_ms: vec![200],
        end_reminders_ms: vec![100],
        approval_deadline: Some(t + 150),
        approved: false,
    };
    assert!(
        !meetings::put_meeting(&c, "rooms", approved.clone())
            .await
            .unwrap()
    );
    assert!(meetings::approve_meeting(&c, "rooms", "m1").await.unwrap());
    let unapproved = Booking {
        id: "m2".into(),
        start: t + 400,
        end: t + 800,
        ..approved.clone()
    };
    meetings::put_meeting(&c, "rooms", unapproved)
        .await
        .unwrap();
    let moved = Booking {
        id: "m3".into(),
        reminders_ms: vec![],
        approval_deadline: None,
        ..approved.clone()
    };
    meetings::put_meeting(&c, "rooms", moved.clone())
        .await
        .unwrap();
    let moved_again = Booking {
        start: t + 350,
        end: t + 450,
        end_reminders_ms: vec![],
        ..moved
    };
    assert!(
        meetings::put_meeting(&c, "rooms", moved_again)
            .await
            .unwrap()
    );
    let cancelled = Booking {
        id: "m4".into(),
        approval_deadline: None,
        ..approved.clone()
    };
    meetings::put_meeting(&c, "rooms", cancelled).await.unwrap();
    assert!(meetings::cancel_meeting(&c, "rooms", "m4").await.unwrap());
    assert!(!meetings::cancel_meeting(&c, "rooms", "m4").await.unwrap());

    events_until(&c, "rooms", 10, |ev| {
        ev.iter().filter(|e| e.event == "meeting.ended").count() == 2
            && ev.iter().any(|e| e.event == "meeting.approval_expired")
    })
    .await;
    crate::common::runtime::quiet(300).await; // 300 ms of real time: anything cancelled would fire by now
    let events = c.events("rooms", None, 1_000).await.unwrap().items;
    let of = |id: &str| -> Vec<(String, i64)> {
        events
            .iter()
            .filter(|e| e.event.starts_with("meeting.") && e.data["meeting_id"] == id)
            .map(|e| (e.event.clone(), e.fire_at - t))
            .collect()
    };
    assert_eq!(
        of("m1"),
        [
            ("meeting.reminder".into(), 100),
            ("meeting.started".into(), 300),
            ("meeting.reminder".into(), 600),
            ("meeting.ended".into(), 700)
        ]
    );
    assert_eq!(
        of("m2"),
        [("meeting.approval_expired".into(), 150)],
        "rejected: nothing else"
    );
    assert_eq!(
        of("m3"),
        [
            ("meeting.started".into(), 350),
            ("meeting.ended".into(), 450)
        ]
    );
    assert!(of("m4").is_empty());
    assert!(events.iter().all(|e| e.fired_at >= e.fire_at));
    let bad = Booking { end: t, ..approved };
    let err = meetings::put_meeting(&c, "rooms", bad).await.unwrap_err();
    assert!(
        matches!(err, Error::Unprocessable { field: "end", .. }),
        "{err}"
    );
}

// Every test above that takes an engine, once per engine (see tests/common).
engine_matrix!(
    #[actix_rt::test] crate::common::Engine::of;
    webhook_done_on_2xx_retried_on_5xx_dead_on_404,
    device_offline_alarms_repeat_and_recovery_is_reported,
    meeting_state_plans_start_end_reminders_and_approval,
);

//! The store conformance suite: every operation and invariant of the `Store` trait, written
//! once and run against each engine (see the `engines!` list at the bottom). Time is passed
//! as `now`; nothing sleeps.

#[macro_use]
mod common;
use common::door;

use std::collections::{HashMap, HashSet};

use rand::{Rng, SeedableRng};
use serde_json::json;
use timeout_center::conformance::*;
use timeout_center::store::{MAX_PAGE, Ownership};
use timeout_center::*;

use common::Engine;

const T0: Millis = 1_700_000_000_000;

fn topic_with(name: &str, slots: u32, max_attempts: u32) -> TopicConfig {
    TopicConfig {
        slots,
        max_attempts,
        visibility_timeout_ms: 1_000,
        ..TopicConfig::named(name)
    }
}

async fn pump_all(s: &Store, topic: &str, now: Millis) -> Vec<Leased> {
    let t = s.topic(topic).await.unwrap();
    let mut out = Vec::new();
    for slot in 0..t.slots {
        out.extend(
            door(s, topic, slot, 0)
                .await
                .pump(now, 10_000)
                .await
                .unwrap()
                .jobs,
        );
    }
    out
}

async fn pump_one(s: &Store, topic: &str, id: &str, now: Millis) -> Leased {
    let mut jobs = pump_all(s, topic, now).await;
    let i = jobs
        .iter()
        .position(|l| l.job.id == id)
        .unwrap_or_else(|| panic!("{id} was not pumped at {now}"));
    jobs.swap_remove(i)
}

async fn state(s: &Store, topic: &str, id: &str) -> Option<JobState> {
    s.get(topic, &JobRef::new(id))
        .await
        .unwrap()
        .map(|j| j.state)
}

/// A slot's door opened before its topic was deleted and made again with fewer slots (a
/// slot actor not yet halted, a request in flight) names a slot the new layout has not:
/// its pump is refused with an error, and the store goes on. Before: the memory engine
/// indexed past its slots and panicked on the actor's thread (found by schemathesis's
/// stateful phase, which deletes and makes topics).
async fn a_door_to_a_slot_the_topic_no_longer_has_is_refused_not_a_panic(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 16, 3)).await.unwrap();
    let stale = door(s, "t", 14, 0).await;
    s.delete_topic("t", true).await.unwrap();
    s.put_topic(topic_with("t", 2, 3)).await.unwrap();
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    match stale.pump(T0, 100).await {
        Err(_) => {}
        // Redis keeps a slot's keys apart by number: slot 14 of the new layout is empty.
        Ok(p) => assert!(p.jobs.is_empty(), "{:?}", p.jobs),
    }
    // The store still answers, and the job is in the new layout.
    assert_eq!(pump_all(s, "t", T0).await.len(), 1);
}

async fn schedule_upsert_creates_then_replaces(e: Engine) {
    let s = &*e.store;
    let job = NewJob::new("a", T0 + 100)
        .job_type("webhook")
        .payload(json!({"v": 1}));
    let r = s
        .schedule("t", job, ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    assert_eq!(r.outcome, ScheduleOutcome::Created);
    assert_eq!(r.state, Some(JobState::Scheduled));
    assert!(r.is_head);
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!((got.fire_at, got.job_type.as_str()), (T0 + 100, "webhook"));
    assert_eq!(got.payload, json!({"v": 1}));
    assert_eq!(got.created_at, Some(T0));

    let job = NewJob::new("a", T0 + 500)
        .job_type("webhook")
        .payload(json!({"v": 2}));
    let r = s
        .schedule("t", job, ScheduleMode::Upsert, T0 + 1)
        .await
        .unwrap();
    assert_eq!(r.outcome, ScheduleOutcome::Replaced);
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(
        (got.fire_at, got.payload.clone()),
        (T0 + 500, json!({"v": 2}))
    );
    assert_eq!((got.created_at, got.updated_at), (Some(T0), Some(T0 + 1)));
}

async fn schedule_create_only_leaves_an_existing_job_untouched(e: Engine) {
    let s = &*e.store;
    let first = NewJob::new("a", T0 + 100).payload(json!("first"));
    s.schedule("t", first, ScheduleMode::CreateOnly, T0)
        .await
        .unwrap();
    let again = NewJob::new("a", T0 + 900).payload(json!("second"));
    let r = s
        .schedule("t", again, ScheduleMode::CreateOnly, T0)
        .await
        .unwrap();
    assert_eq!(r.outcome, ScheduleOutcome::Exists);
    assert_eq!(r.state, Some(JobState::Scheduled));
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!((got.fire_at, got.payload), (T0 + 100, json!("first")));
}

async fn schedule_reset_only_moves_the_fire_time_and_keeps_the_payload(e: Engine) {
    let s = &*e.store;
    let job = NewJob::new("a", T0 + 100).payload(json!({"keep": true}));
    s.schedule("t", job, ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let reset = NewJob::new("a", T0 + 5_000).payload(json!("ignored"));
    let r = s
        .schedule("t", reset, ScheduleMode::ResetOnly, T0)
        .await
        .unwrap();
    assert_eq!(
        (r.outcome, r.fire_at),
        (ScheduleOutcome::Reset, Some(T0 + 5_000))
    );
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(
        (got.fire_at, got.payload),
        (T0 + 5_000, json!({"keep": true}))
    );

    let r = s
        .schedule("t", NewJob::new("nope", T0), ScheduleMode::ResetOnly, T0)
        .await
        .unwrap();
    assert_eq!((r.outcome, r.state), (ScheduleOutcome::Missing, None));
    assert_eq!(s.get("t", &"nope".into()).await.unwrap(), None);
}

async fn reset_many_resets_creates_and_reports_missing(e: Engine) {
    let s = &*e.store;
    for i in 0..10 {
        let job = NewJob::new(format!("d{i}"), T0 + 1_000);
        s.schedule("t", job, ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    let resets: Vec<Reset> = (0..15)
        .map(|i| Reset::new(format!("d{i}"), T0 + 60_000))
        .collect();
    let report = s.reset_many("t", &resets, None, T0).await.unwrap();
    assert_eq!((report.reset, report.created), (10, 0));
    let mut missing = report.missing.clone();
    missing.sort();
    assert_eq!(missing, ["d10", "d11", "d12", "d13", "d14"]);
    assert_eq!(s.get("t", &"d10".into()).await.unwrap(), None);
    assert_eq!(
        s.get("t", &"d3".into()).await.unwrap().unwrap().fire_at,
        T0 + 60_000
    );

    let create = CreateSpec {
        job_type: Some("device_offline".into()),
        payload: json!({"device": "x"}),
        max_attempts: None,
    };
    let report = s.reset_many("t", &resets, Some(&create), T0).await.unwrap();
    assert_eq!((report.reset, report.created), (10, 5));
    assert!(report.missing.is_empty());
    let made = s.get("t", &"d12".into()).await.unwrap().unwrap();
    assert_eq!(
        (made.job_type.as_str(), made.fire_at),
        ("device_offline", T0 + 60_000)
    );
    assert_eq!(made.payload, json!({"device": "x"}));
    // An existing job keeps its own type and payload: create applies to missing jobs only.
    let kept = s.get("t", &"d3".into()).await.unwrap().unwrap();
    assert_eq!(
        (kept.job_type.as_str(), kept.payload),
        ("emit", serde_json::Value::Null)
    );
    let stats = s.stats("t").await.unwrap();
    assert_eq!(stats.scheduled, 15);
}

async fn debounce_never_moves_fire_at_past_max_fire_at(e: Engine) {
    let s = &*e.store;
    let job = NewJob::new("a", T0 + 100).max_fire_at(T0 + 1_000);
    s.schedule("t", job, ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let r = s
        .schedule(
            "t",
            NewJob::new("a", T0 + 900),
            ScheduleMode::ResetOnly,
            T0 + 50,
        )
        .await
        .unwrap();
    assert_eq!(r.fire_at, Some(T0 + 900));
    let r = s
        .schedule(
            "t",
            NewJob::new("a", T0 + 5_000),
            ScheduleMode::ResetOnly,
            T0 + 60,
        )
        .await
        .unwrap();
    assert_eq!(r.fire_at, Some(T0 + 1_000));
    let report = s
        .reset_many("t", &[Reset::new("a", T0 + 9_000)], None, T0 + 70)
        .await
        .unwrap();
    assert_eq!(report.reset, 1);
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(
        (got.fire_at, got.max_fire_at),
        (T0 + 1_000, Some(T0 + 1_000))
    );
    // The job that kept being reset still fires at its cap.
    assert!(pump_all(s, "t", T0 + 999).await.is_empty());
    assert_eq!(
        pump_one(s, "t", "a", T0 + 1_000).await.job.fire_at,
        T0 + 1_000
    );
}

async fn max_fire_at_caps_the_first_fire_time_too(e: Engine) {
    let s = &*e.store;
    let job = NewJob {
        max_fire_at: Some(T0 + 100),
        ..NewJob::new("a", T0 + 500)
    };
    let r = s
        .schedule("t", job, ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    assert_eq!(r.fire_at, Some(T0 + 100));
    assert_eq!(pump_one(s, "t", "a", T0 + 100).await.job.fire_at, T0 + 100);
}

async fn cancel_removes_a_job_in_any_state(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 1, 1)).await.unwrap();
    for id in ["r", "d"] {
        s.schedule("t", NewJob::new(id, T0), ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    s.schedule("t", NewJob::new("s", T0 + 10), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let runs = pump_all(s, "t", T0).await;
    let d = runs.iter().find(|l| l.job.id == "d").unwrap();
    door(s, "t", d.slot, 0)
        .await
        .finish(d, RunOutcome::Dead { error: "x".into() }, T0)
        .await
        .unwrap();

    assert_eq!(
        s.cancel("t", &"s".into()).await.unwrap(),
        Some(JobState::Scheduled)
    );
    assert_eq!(
        s.cancel("t", &"r".into()).await.unwrap(),
        Some(JobState::Running)
    );
    assert_eq!(
        s.cancel("t", &"d".into()).await.unwrap(),
        Some(JobState::Dead)
    );
    assert_eq!(s.cancel("t", &"s".into()).await.unwrap(), None);
    let stats = s.stats("t").await.unwrap();
    assert_eq!((stats.scheduled, stats.running, stats.dead), (0, 0, 0));
    // The cancelled run's outcome is stale and brings nothing back.
    let r = runs.iter().find(|l| l.job.id == "r").unwrap();
    assert_eq!(
        door(s, "t", r.slot, 0)
            .await
            .finish(r, RunOutcome::Done, T0)
            .await
            .unwrap(),
        Finished::Stale
    );
    assert_eq!(state(s, "t", "r").await, None);
}

async fn get_reports_state_attempts_and_last_error(e: Engine) {
    let s = &*e.store;
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(
        (got.state, got.attempts, got.max_attempts),
        (JobState::Scheduled, 0, 16)
    );
    assert_eq!(got.last_error, None);
    let run = pump_one(s, "t", "a", T0).await;
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!((got.state, got.attempts), (JobState::Running, 1));
    assert_eq!((got.fire_at, got.lease_until), (T0, Some(T0 + 30_000)));
    let retry = RunOutcome::Retry {
        error: "boom".into(),
        at: T0 + 50,
    };
    assert_eq!(
        door(s, "t", run.slot, 0)
            .await
            .finish(&run, retry, T0 + 1)
            .await
            .unwrap(),
        Finished::Retrying
    );
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(
        (got.state, got.attempts, got.fire_at),
        (JobState::Scheduled, 1, T0 + 50)
    );
    assert_eq!(got.last_error.as_deref(), Some("boom"));
    assert_eq!(s.get("t", &"other".into()).await.unwrap(), None);
}

async fn pump_never_returns_a_job_before_its_fire_at(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 1, 16)).await.unwrap();
    for (id, at) in [("a", T0 + 10), ("b", T0 + 20), ("c", T0 + 30)] {
        s.schedule("t", NewJob::new(id, at), ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    let p = door(s, "t", 0, 0).await.pump(T0 + 9, 100).await.unwrap();
    assert!(p.jobs.is_empty());
    assert_eq!(p.next_at, Some(T0 + 10));
    let p = door(s, "t", 0, 0).await.pump(T0 + 20, 100).await.unwrap();
    let ids: Vec<_> = p.jobs.iter().map(|l| l.job.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert!(p.jobs.iter().all(|l| l.job.fire_at <= T0 + 20));
    assert_eq!(p.next_at, Some(T0 + 30));
    // The limit bounds a batch; the rest comes with the next pump.
    for i in 0..5 {
        s.schedule(
            "t",
            NewJob::new(format!("n{i}"), T0 + 40),
            ScheduleMode::Upsert,
            T0,
        )
        .await
        .unwrap();
    }
    let p = door(s, "t", 0, 0).await.pump(T0 + 40, 3).await.unwrap();
    assert_eq!(p.jobs.len(), 3);
    assert_eq!(p.next_at, Some(T0 + 40), "a job left due is next");
    let p = door(s, "t", 0, 0).await.pump(T0 + 40, 10).await.unwrap();
    assert_eq!(p.jobs.len(), 3); // c and the last two of n*
    assert_eq!(
        p.next_at,
        Some(T0 + 20 + 1_000),
        "earliest lease deadline is next"
    );
}

/// A slot owner's pump with a lead (`runtime.fire_lead_ms`) also hands out what falls due
/// within the lead after `now`, each run with its own fire time for the caller to wait for,
/// and names the next pump a lead before the next fire time; without one it is the plain
/// pump. (The runtime's holding until the fire time is `tests/runtime.rs`'s.)
async fn a_pump_with_a_lead_hands_out_what_falls_due_within_it(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 1, 16)).await.unwrap();
    for (id, at) in [("a", T0 + 10), ("b", T0 + 12), ("c", T0 + 30)] {
        s.schedule("t", NewJob::new(id, at), ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    let Ownership::Owned { fence } = s.own("t", 0, "me", T0, 60_000).await.unwrap() else {
        panic!("the slot has no owner yet");
    };
    let p = door(s, "t", 0, fence)
        .await
        .pump_fenced(T0 + 8, 2, 100)
        .await
        .unwrap();
    let got: Vec<_> = p
        .jobs
        .iter()
        .map(|l| (l.job.id.as_str(), l.job.fire_at))
        .collect();
    assert_eq!(got, [("a", T0 + 10)], "due within the lead, and no later");
    assert_eq!(p.next_at, Some(T0 + 10), "b's fire time less the lead");
    assert_eq!(state(s, "t", "a").await, Some(JobState::Running));
    assert_eq!(state(s, "t", "b").await, Some(JobState::Scheduled));
    // Without a lead, b (due at T0 + 12) is not handed out at T0 + 11.
    let p = door(s, "t", 0, fence)
        .await
        .pump_fenced(T0 + 11, 0, 100)
        .await
        .unwrap();
    assert!(p.jobs.is_empty());
    assert_eq!(p.next_at, Some(T0 + 12));
    let p = door(s, "t", 0, fence)
        .await
        .pump_fenced(T0 + 11, 5, 100)
        .await
        .unwrap();
    let got: Vec<_> = p
        .jobs
        .iter()
        .map(|l| (l.job.id.as_str(), l.job.fire_at))
        .collect();
    assert_eq!(got, [("b", T0 + 12)]);
    assert_eq!(p.next_at, Some(T0 + 25), "c's fire time less the lead");
    // A lease deadline before that comes first: a's, leased at T0 + 8 for 1 s.
    let p = door(s, "t", 0, fence)
        .await
        .pump_fenced(T0 + 11, 995, 100)
        .await
        .unwrap();
    assert_eq!(p.jobs.len(), 1, "c, due within 995 ms");
    assert_eq!(p.next_at, Some(T0 + 8 + 1_000));
}

async fn expired_leases_go_back_to_scheduled_or_dead(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 1, 2)).await.unwrap();
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let first = pump_one(s, "t", "a", T0).await;
    assert_eq!(first.lease_until, T0 + 1_000);
    // Before its deadline the lease holds.
    assert!(
        door(s, "t", 0, 0)
            .await
            .pump(T0 + 999, 10)
            .await
            .unwrap()
            .jobs
            .is_empty()
    );
    assert_eq!(state(s, "t", "a").await, Some(JobState::Running));
    // At the deadline the job is taken back and, being due, handed out again.
    let p = door(s, "t", 0, 0).await.pump(T0 + 1_000, 10).await.unwrap();
    assert_eq!(p.expired, 1);
    let second = &p.jobs[0];
    assert_eq!((second.job.attempts, second.job.id.as_str()), (2, "a"));
    assert_ne!(second.token, first.token);
    // Its attempts are used up when the second lease expires: dead, with the reason.
    let p = door(s, "t", 0, 0).await.pump(T0 + 2_000, 10).await.unwrap();
    assert_eq!((p.expired, p.jobs.len()), (1, 0));
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(got.state, JobState::Dead);
    assert!(got.last_error.unwrap().contains("lease expired"));
}

async fn ack_removes_the_job(e: Engine) {
    let s = &*e.store;
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let run = pump_one(s, "t", "a", T0).await;
    assert_eq!(
        door(s, "t", run.slot, 0)
            .await
            .finish(&run, RunOutcome::Done, T0)
            .await
            .unwrap(),
        Finished::Done
    );
    assert_eq!(state(s, "t", "a").await, None);
    assert_eq!(s.stats("t").await.unwrap().running, 0);
}

async fn retry_reschedules_until_attempts_are_used_up(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 1, 2)).await.unwrap();
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let run = pump_one(s, "t", "a", T0).await;
    let retry = RunOutcome::Retry {
        error: "e1".into(),
        at: T0 + 100,
    };
    assert_eq!(
        door(s, "t", run.slot, 0)
            .await
            .finish(&run, retry, T0)
            .await
            .unwrap(),
        Finished::Retrying
    );
    assert!(
        pump_all(s, "t", T0 + 99).await.is_empty(),
        "a retry is never early"
    );
    let run = pump_one(s, "t", "a", T0 + 100).await;
    let retry = RunOutcome::Retry {
        error: "e2".into(),
        at: T0 + 200,
    };
    assert_eq!(
        door(s, "t", run.slot, 0)
            .await
            .finish(&run, retry, T0 + 100)
            .await
            .unwrap(),
        Finished::Dead
    );
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!((got.state, got.attempts), (JobState::Dead, 2));
    assert_eq!(got.last_error.as_deref(), Some("e2"));
}

async fn repeat_runs_again_with_attempts_starting_again(e: Engine) {
    let s = &*e.store;
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let run = pump_one(s, "t", "a", T0).await;
    let repeat = RunOutcome::Repeat {
        at: T0 + 1_000,
        error: None,
    };
    assert_eq!(
        door(s, "t", run.slot, 0)
            .await
            .finish(&run, repeat, T0)
            .await
            .unwrap(),
        Finished::Repeating
    );
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(
        (got.state, got.attempts, got.fire_at),
        (JobState::Scheduled, 0, T0 + 1_000)
    );
    let run = pump_one(s, "t", "a", T0 + 1_000).await;
    assert_eq!(run.job.attempts, 1);
}

async fn a_reset_rearms_a_job_that_had_fired_and_reports_it(e: Engine) {
    let s = &*e.store;
    let job = NewJob::new("dev", T0).job_type("device_offline");
    s.schedule("t", job, ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    s.schedule("t", NewJob::new("quiet", T0 + 50), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    for round in 0..2 {
        let now = T0 + round * 100;
        let run = pump_one(s, "t", "dev", now).await;
        assert_eq!(run.job.fires, round as u32);
        let repeat = RunOutcome::Repeat {
            at: now + 100,
            error: None,
        };
        door(s, "t", run.slot, 0)
            .await
            .finish(&run, repeat, now)
            .await
            .unwrap();
    }
    assert_eq!(s.get("t", &"dev".into()).await.unwrap().unwrap().fires, 2);
    let resets = [
        Reset::new("dev", T0 + 10_000),
        Reset::new("quiet", T0 + 10_000),
    ];
    let report = s.reset_many("t", &resets, None, T0 + 150).await.unwrap();
    assert_eq!(report.reset, 2);
    let expected = Rearmed {
        id: "dev".into(),
        job_type: "device_offline".into(),
        fires: 2,
    };
    assert_eq!(report.rearmed, [expected]);
    assert_eq!(s.get("t", &"dev".into()).await.unwrap().unwrap().fires, 0);
    // Once re-armed, a second reset reports nothing.
    let r = s
        .schedule(
            "t",
            NewJob::new("dev", T0 + 20_000),
            ScheduleMode::ResetOnly,
            T0 + 160,
        )
        .await
        .unwrap();
    assert_eq!(r.rearmed, None);
}

async fn bury_sends_the_job_to_the_dead_letters(e: Engine) {
    let s = &*e.store;
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let run = pump_one(s, "t", "a", T0).await;
    let bury = RunOutcome::Dead {
        error: "bad payload".into(),
    };
    assert_eq!(
        door(s, "t", run.slot, 0)
            .await
            .finish(&run, bury, T0 + 5)
            .await
            .unwrap(),
        Finished::Dead
    );
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(
        (got.state, got.dead_at, got.fire_at),
        (JobState::Dead, Some(T0 + 5), T0)
    );
    assert_eq!(got.last_error.as_deref(), Some("bad payload"));
    assert!(
        pump_all(s, "t", T0 + 100_000).await.is_empty(),
        "the dead never fire"
    );
}

async fn release_gives_the_job_back_without_counting_the_attempt(e: Engine) {
    let s = &*e.store;
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let run = pump_one(s, "t", "a", T0).await;
    assert_eq!(
        door(s, "t", run.slot, 0)
            .await
            .finish(&run, RunOutcome::Release, T0 + 7)
            .await
            .unwrap(),
        Finished::Released
    );
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(
        (got.state, got.attempts, got.fire_at),
        (JobState::Scheduled, 0, T0 + 7)
    );
}

/// A run past its flow key's share goes back due at a later time, the attempt not counted,
/// and is not pumped before then.
async fn defer_gives_the_job_back_due_later_without_counting_the_attempt(e: Engine) {
    let s = &*e.store;
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let run = pump_one(s, "t", "a", T0).await;
    assert_eq!(
        door(s, "t", run.slot, 0)
            .await
            .finish(&run, RunOutcome::Defer { at: T0 + 1_000 }, T0 + 7)
            .await
            .unwrap(),
        Finished::Released
    );
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(
        (got.state, got.attempts, got.fire_at),
        (JobState::Scheduled, 0, T0 + 1_000)
    );
    assert!(
        pump_all(s, "t", T0 + 999).await.is_empty(),
        "not due before its time"
    );
    assert_eq!(pump_all(s, "t", T0 + 1_000).await.len(), 1);
}

async fn extend_keeps_a_long_run_from_being_taken_over(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 1, 16)).await.unwrap();
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let run = pump_one(s, "t", "a", T0).await;
    assert!(
        door(s, "t", run.slot, 0)
            .await
            .extend(&run, T0 + 5_000)
            .await
            .unwrap()
    );
    let p = door(s, "t", 0, 0).await.pump(T0 + 4_999, 10).await.unwrap();
    assert_eq!((p.expired, p.jobs.len()), (0, 0));
    assert_eq!(p.next_at, Some(T0 + 5_000));
    let stale = Leased {
        token: run.token + 1000,
        ..run.clone()
    };
    assert!(
        !door(s, "t", stale.slot, 0)
            .await
            .extend(&stale, T0 + 9_000)
            .await
            .unwrap()
    );
}

async fn a_reset_during_a_run_fires_the_job_again_after_the_run(e: Engine) {
    let s = &*e.store;
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    s.schedule("t", NewJob::new("b", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let runs = pump_all(s, "t", T0).await;
    let (ra, rb) = (
        runs.iter().find(|l| l.job.id == "a").unwrap(),
        runs.iter().find(|l| l.job.id == "b").unwrap(),
    );
    let r = s
        .schedule(
            "t",
            NewJob::new("a", T0 + 500),
            ScheduleMode::ResetOnly,
            T0 + 1,
        )
        .await
        .unwrap();
    assert_eq!(
        (r.outcome, r.state),
        (ScheduleOutcome::Reset, Some(JobState::Running))
    );
    let report = s
        .reset_many("t", &[Reset::new("b", T0 + 700)], None, T0 + 1)
        .await
        .unwrap();
    assert_eq!(report.reset, 1);
    assert_eq!(
        s.get("t", &"a".into())
            .await
            .unwrap()
            .unwrap()
            .pending_fire_at,
        Some(T0 + 500)
    );
    // The ack does not delete them: they fire again at the reset times.
    assert_eq!(
        door(s, "t", ra.slot, 0)
            .await
            .finish(ra, RunOutcome::Done, T0 + 2)
            .await
            .unwrap(),
        Finished::Rescheduled
    );
    assert_eq!(
        door(s, "t", rb.slot, 0)
            .await
            .finish(rb, RunOutcome::Done, T0 + 2)
            .await
            .unwrap(),
        Finished::Rescheduled
    );
    let a = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(
        (a.state, a.fire_at, a.attempts),
        (JobState::Scheduled, T0 + 500, 0)
    );
    assert!(pump_all(s, "t", T0 + 499).await.is_empty());
    assert_eq!(pump_one(s, "t", "a", T0 + 500).await.job.fire_at, T0 + 500);
    assert_eq!(pump_one(s, "t", "b", T0 + 700).await.job.fire_at, T0 + 700);
}

/// Plain acks of a settle batch (done, no handler events: on Redis the runtime sends these
/// with their `job.done` event whole) append that event when the run settles as sent, and
/// the rescheduled `job.done`, with the run's head, when a reset came during the run.
async fn plain_acks_append_their_done_or_rescheduled_events(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 1, 16)).await.unwrap();
    for id in ["acked", "reset"] {
        s.schedule("t", NewJob::new(id, T0), ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    let runs = pump_all(s, "t", T0 + 2).await;
    s.reset_many("t", &[Reset::new("reset", T0 + 900)], None, T0 + 3)
        .await
        .unwrap();
    let batch: Vec<Settlement> = runs
        .into_iter()
        .map(|run| Settlement::new(run, RunOutcome::Done, T0 + 4))
        .collect();
    let done = door(s, "t", 0, 0)
        .await
        .settle(&batch, T0 + 5)
        .await
        .unwrap();
    let finished = |id: &str| {
        let k = batch.iter().position(|st| st.run.job.id == id).unwrap();
        done[k]
    };
    assert_eq!(
        (finished("acked"), finished("reset")),
        (Finished::Done, Finished::Rescheduled)
    );
    let want: Vec<events::Event> = batch
        .iter()
        .zip(&done)
        .flat_map(|(st, f)| events::Event::of_settled(st, *f))
        .collect();
    let got: Vec<events::Event> = events_of(s, "t", 2)
        .await
        .into_iter()
        .map(unplaced)
        .collect();
    assert_eq!(got, want);
    let rescheduled = got.iter().find(|e| e.job_id == "reset").unwrap();
    assert_eq!(
        (rescheduled.event.as_str(), &rescheduled.data),
        ("job.done", &json!({"rescheduled": true}))
    );
    assert_eq!(
        (
            rescheduled.fire_at,
            rescheduled.fired_at,
            rescheduled.attempt
        ),
        (T0, T0 + 4, 1)
    );
    let reset = s.get("t", &"reset".into()).await.unwrap().unwrap();
    assert_eq!(
        (reset.state, reset.fire_at),
        (JobState::Scheduled, T0 + 900)
    );
    assert_eq!(s.get("t", &"acked".into()).await.unwrap(), None);
}

/// A topic's `events` says which of its runs' events it keeps: `all` every one, `changes`
/// all but `job.done` (the short form's, a rescheduled run's and a consumer's alike), `none`
/// none, on both paths (the runtime's settles and consumers' acks). The jobs change as they
/// would with every event kept. (A check of what was not appended waits out the millisecond
/// a Redis page holds back.)
async fn a_topic_keeps_only_the_events_its_events_setting_names(e: Engine) {
    use timeout_center::RunEvents;
    let s = &*e.store;
    for kept in [RunEvents::All, RunEvents::Changes, RunEvents::None] {
        let name = format!("t-{}", kept.as_str());
        let t = name.as_str();
        s.put_topic(TopicConfig {
            events: kept,
            ..topic_with(t, 1, 16)
        })
        .await
        .unwrap();
        for id in ["acked", "reset", "failed", "emitting"] {
            s.schedule(t, NewJob::new(id, T0), ScheduleMode::Upsert, T0)
                .await
                .unwrap();
        }
        let runs = pump_all(s, t, T0 + 2).await;
        s.reset_many(t, &[Reset::new("reset", T0 + 900)], None, T0 + 3)
            .await
            .unwrap();
        let batch: Vec<Settlement> = runs
            .into_iter()
            .map(|run| match run.job.id.as_str() {
                "failed" => Settlement::new(
                    run,
                    RunOutcome::Retry {
                        error: "busy".into(),
                        at: T0 + 5_000,
                    },
                    T0 + 4,
                ),
                "emitting" => Settlement {
                    emitted: vec![Emitted::new("job.fired", json!({"n": 1}))],
                    ..Settlement::new(run, RunOutcome::Done, T0 + 4)
                },
                _ => Settlement::new(run, RunOutcome::Done, T0 + 4),
            })
            .collect();
        let done = door(s, t, 0, 0).await.settle(&batch, T0 + 5).await.unwrap();
        let mut finished: Vec<(String, Finished)> = batch
            .iter()
            .zip(&done)
            .map(|(st, f)| (st.run.job.id.clone(), *f))
            .collect();
        finished.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            finished,
            [
                ("acked".to_string(), Finished::Done),
                ("emitting".to_string(), Finished::Done),
                ("failed".to_string(), Finished::Retrying),
                ("reset".to_string(), Finished::Rescheduled),
            ],
            "{kept:?}"
        );
        let want: Vec<(String, String)> = batch
            .iter()
            .zip(&done)
            .flat_map(|(st, f)| events::Event::of_settled(st, *f))
            .filter(|e| kept.keeps(&e.event))
            .map(|e| (e.job_id, e.event))
            .collect();
        crate::common::runtime::quiet(5).await;
        let mut got: Vec<(String, String)> = events_of(s, t, want.len())
            .await
            .into_iter()
            .map(|e| (e.job_id, e.event))
            .collect();
        let mut want_sorted = want.clone();
        want_sorted.sort();
        got.sort();
        assert_eq!(got, want_sorted, "{kept:?}");
        let named = |n: &str| want.iter().filter(|(_, e)| e == n).count();
        let expected = match kept {
            RunEvents::All => (3, 1, 1),
            RunEvents::Changes => (0, 1, 1),
            RunEvents::None => (0, 0, 0),
        };
        assert_eq!(
            (named("job.done"), named("job.retry"), named("job.fired")),
            expected,
            "{kept:?}"
        );
        let failed = s.get(t, &"failed".into()).await.unwrap().unwrap();
        assert_eq!(
            (failed.state, failed.fire_at),
            (JobState::Scheduled, T0 + 5_000)
        );
        assert_eq!(s.get(t, &"acked".into()).await.unwrap(), None);
    }
    // A consumer's acks: a pull topic that keeps changes appends a death, not a done.
    s.put_topic(TopicConfig {
        default_type: "pull".into(),
        events: RunEvents::Changes,
        ..topic_with("q", 1, 1)
    })
    .await
    .unwrap();
    for id in ["ok", "bad"] {
        s.schedule("q", NewJob::new(id, T0), ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    let runs: HashMap<String, Leased> = door(s, "q", 0, 0)
        .await
        .claim(T0, 10, 30_000)
        .await
        .unwrap()
        .jobs
        .into_iter()
        .map(|r| (r.job.id.clone(), r))
        .collect();
    let outcomes = [
        ClaimOutcome {
            job: JobRef::new("ok"),
            token: runs["ok"].token,
            outcome: Outcome::Done,
        },
        ClaimOutcome {
            job: JobRef::new("bad"),
            token: runs["bad"].token,
            outcome: Outcome::Dead { error: "no".into() },
        },
    ];
    let done = s.settle_claims("q", &outcomes, T0 + 7).await.unwrap();
    assert_eq!(done, [Finished::Done, Finished::Dead]);
    crate::common::runtime::quiet(5).await;
    let got: Vec<(String, String)> = events_of(s, "q", 1)
        .await
        .into_iter()
        .map(|e| (e.job_id, e.event))
        .collect();
    assert_eq!(got, [("bad".to_string(), "job.dead".to_string())]);
}

/// Job `a` of a one-slot topic, run twice: the first run's lease expired (at `T0 + 1_000`)
/// and the second took the job over.
async fn two_runs_of_one_job(s: &Store) -> (Leased, Leased) {
    s.put_topic(topic_with("t", 1, 16)).await.unwrap();
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let old = pump_one(s, "t", "a", T0).await;
    let new = pump_one(s, "t", "a", T0 + 1_000).await;
    (old, new)
}

/// One run settled twice in one batch (a client's batch of acks naming a job twice): the
/// first settles it, the second is stale, and only one `job.done` is appended, as if the two
/// were settled one at a time. (Redis read every run before applying any, and answered Done
/// twice with two events: found by the differential test.)
async fn a_run_settled_twice_in_one_batch_is_settled_once(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 1, 16)).await.unwrap();
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let run = pump_one(s, "t", "a", T0).await;
    let batch = [
        Settlement::new(run.clone(), RunOutcome::Done, T0),
        Settlement::new(run, RunOutcome::Done, T0),
    ];
    let done = door(s, "t", 0, 0)
        .await
        .settle(&batch, T0 + 1)
        .await
        .unwrap();
    assert_eq!(done, [Finished::Done, Finished::Stale]);
    let events = events_of(s, "t", 1).await;
    let dones = events.iter().filter(|e| e.event == "job.done").count();
    assert_eq!(dones, 1, "{events:?}");
}

/// A reset batch far enough ahead for the Redis store's plain path (one `ZADD XX` of the bare
/// ids, no script) that also names a capped job, a job that had fired, a running job and a
/// missing one: each is reset as it would be alone, the plain ones included. And a batch of
/// plain jobs only is reset whole.
async fn a_far_reset_batch_of_every_kind_of_job_resets_each_as_alone(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 1, 3)).await.unwrap();
    let far = T0 + 60_000;
    let plain: Vec<Reset> = (0..5)
        .map(|i| Reset::new(format!("p{i}"), T0 + 100))
        .collect();
    s.reset_many("t", &plain, Some(&CreateSpec::default()), T0)
        .await
        .unwrap();
    let capped = NewJob::new("cap", T0 + 100).max_fire_at(T0 + 1_000);
    s.schedule("t", capped, ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let dev = NewJob::new("dev", T0).job_type("device_offline");
    s.schedule("t", dev, ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let run = pump_one(s, "t", "dev", T0).await;
    let again = RunOutcome::Repeat {
        at: T0 + 100,
        error: None,
    };
    door(s, "t", run.slot, 0)
        .await
        .finish(&run, again, T0)
        .await
        .unwrap();
    s.schedule("t", NewJob::new("busy", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let busy = pump_one(s, "t", "busy", T0).await;

    let mut batch: Vec<Reset> = plain
        .iter()
        .map(|r| Reset::new(r.job.id.clone(), far))
        .collect();
    for id in ["cap", "dev", "busy", "none"] {
        batch.push(Reset::new(id, far));
    }
    let report = s.reset_many("t", &batch, None, T0 + 10).await.unwrap();
    assert_eq!(report.reset, 8, "{report:?}");
    assert_eq!(report.missing, ["none"]);
    let rearmed = Rearmed {
        id: "dev".into(),
        job_type: "device_offline".into(),
        fires: 1,
    };
    assert_eq!(report.rearmed, [rearmed]);
    let fire_at = |id: &'static str| async move {
        let job = s.get("t", &id.into()).await.unwrap().unwrap();
        (job.state, job.fire_at, job.fires)
    };
    assert_eq!(fire_at("p3").await, (JobState::Scheduled, far, 0));
    assert_eq!(fire_at("cap").await, (JobState::Scheduled, T0 + 1_000, 0));
    assert_eq!(fire_at("dev").await, (JobState::Scheduled, far, 0));
    door(s, "t", busy.slot, 0)
        .await
        .finish(&busy, RunOutcome::Done, T0 + 20)
        .await
        .unwrap();
    assert_eq!(fire_at("busy").await, (JobState::Scheduled, far, 0));

    let plain_again: Vec<Reset> = plain
        .iter()
        .map(|r| Reset::new(r.job.id.clone(), far + 1))
        .collect();
    let report = s
        .reset_many("t", &plain_again, None, T0 + 30)
        .await
        .unwrap();
    assert_eq!((report.reset, report.missing.len()), (5, 0), "{report:?}");
    assert_eq!(fire_at("p0").await, (JobState::Scheduled, far + 1, 0));
    let mut due: Vec<String> = pump_all(s, "t", far)
        .await
        .into_iter()
        .map(|l| l.job.id)
        .collect();
    due.sort();
    assert_eq!(
        due,
        ["busy", "cap", "dev"],
        "the plain jobs moved past `far`"
    );
}

/// A job named twice in one reset batch is reset twice, in order, as two calls would. (Redis
/// read every record before applying any: a job that had fired was reported re-armed twice,
/// and a dead job replaced by the first occurrence got its dead record back from the second.
/// Found by the differential test.)
async fn a_job_named_twice_in_a_reset_batch_is_reset_twice_in_order(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 1, 1)).await.unwrap();
    let job = NewJob::new("dev", T0).job_type("device_offline");
    s.schedule("t", job, ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let run = pump_one(s, "t", "dev", T0).await;
    door(s, "t", run.slot, 0)
        .await
        .finish(
            &run,
            RunOutcome::Repeat {
                at: T0 + 100,
                error: None,
            },
            T0,
        )
        .await
        .unwrap();
    let twice = [Reset::new("dev", T0 + 500), Reset::new("dev", T0 + 700)];
    let report = s.reset_many("t", &twice, None, T0 + 1).await.unwrap();
    assert_eq!((report.reset, report.rearmed.len()), (2, 1), "{report:?}");
    let heads: Vec<Millis> = report.heads.iter().map(|h| h.at).collect();
    assert_eq!(heads, [T0 + 500], "the earliest time the call gave");
    let got = s.get("t", &"dev".into()).await.unwrap().unwrap();
    assert_eq!((got.fire_at, got.fires), (T0 + 700, 0));

    // A dead job, replaced by a creating reset that names it twice, is a new plain job.
    s.schedule(
        "t",
        NewJob::new("d", T0).payload(json!({"x": 1})),
        ScheduleMode::Upsert,
        T0,
    )
    .await
    .unwrap();
    let run = pump_one(s, "t", "d", T0 + 800).await;
    let bury = RunOutcome::Dead {
        error: "gone".into(),
    };
    door(s, "t", run.slot, 0)
        .await
        .finish(&run, bury, T0 + 800)
        .await
        .unwrap();
    let twice = [Reset::new("d", T0 + 900), Reset::new("d", T0 + 950)];
    let create = CreateSpec::default();
    let report = s
        .reset_many("t", &twice, Some(&create), T0 + 801)
        .await
        .unwrap();
    assert_eq!((report.created, report.reset), (1, 1), "{report:?}");
    let got = s.get("t", &"d".into()).await.unwrap().unwrap();
    assert_eq!(
        (got.state, got.fire_at, got.last_error, got.payload),
        (JobState::Scheduled, T0 + 950, None, serde_json::Value::Null)
    );
}

async fn an_outcome_with_a_stale_token_changes_nothing(e: Engine) {
    let s = &*e.store;
    let (old, new) = two_runs_of_one_job(s).await;
    for outcome in [
        RunOutcome::Done,
        RunOutcome::Dead {
            error: "late".into(),
        },
        RunOutcome::Retry {
            error: "late".into(),
            at: T0,
        },
        RunOutcome::Repeat {
            at: T0,
            error: None,
        },
        RunOutcome::Release,
    ] {
        assert_eq!(
            door(s, "t", old.slot, 0)
                .await
                .finish(&old, outcome, T0 + 1_001)
                .await
                .unwrap(),
            Finished::Stale
        );
    }
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!((got.state, got.attempts), (JobState::Running, 2));
    assert_eq!(
        door(s, "t", new.slot, 0)
            .await
            .finish(&new, RunOutcome::Done, T0 + 1_002)
            .await
            .unwrap(),
        Finished::Done
    );
}

/// Consumers' outcomes settled by id and token: the engine builds each run's events from
/// its stored record in the settling step (Redis: in settle.lua, with no read before it),
/// and they are the events a settle of the same runs would append: the job's own type or
/// the topic's default, the run's fire time and attempt, fired_at the settle's time. A
/// stale token appends nothing.
async fn settled_claims_append_the_events_their_records_describe(e: Engine) {
    const QUOTED: &str = "pl\"ai/n\\\u{1}";
    let s = &*e.store;
    s.put_topic(TopicConfig {
        default_type: "pull".into(),
        ..topic_with("q", 1, 1)
    })
    .await
    .unwrap();
    // Two plain jobs, one with an id that JSON must escape.
    for id in ["plain", QUOTED] {
        s.schedule("q", NewJob::new(id, T0), ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    for id in ["typed", "buried", "retried", "stale"] {
        s.schedule(
            "q",
            NewJob::new(id, T0 - 5)
                .job_type("pull")
                .payload(json!({"n": id})),
            ScheduleMode::Upsert,
            T0,
        )
        .await
        .unwrap();
    }
    let runs: HashMap<String, Leased> = door(s, "q", 0, 0)
        .await
        .claim(T0, 10, 30_000)
        .await
        .unwrap()
        .jobs
        .into_iter()
        .map(|r| (r.job.id.clone(), r))
        .collect();
    assert_eq!(runs.len(), 6);
    let claim = |id: &str, token: u64, outcome: Outcome| ClaimOutcome {
        job: JobRef::new(id),
        token,
        outcome,
    };
    let outcomes = [
        claim("plain", runs["plain"].token, Outcome::Done),
        claim(QUOTED, runs[QUOTED].token, Outcome::Done),
        claim("typed", runs["typed"].token, Outcome::Done),
        claim(
            "buried",
            runs["buried"].token,
            Outcome::Dead {
                error: "bad \"input\"".into(),
            },
        ),
        claim(
            "retried",
            runs["retried"].token,
            Outcome::Retry {
                error: "busy".into(),
                delay: Some(std::time::Duration::from_millis(1_000)),
            },
        ),
        claim("stale", runs["stale"].token + 1_000, Outcome::Done),
    ];
    let done = s.settle_claims("q", &outcomes, T0 + 7).await.unwrap();
    // max_attempts 1: the retry has no attempt left, so it is dead too.
    assert_eq!(
        done,
        [
            Finished::Done,
            Finished::Done,
            Finished::Done,
            Finished::Dead,
            Finished::Dead,
            Finished::Stale
        ]
    );
    let mut got: Vec<events::Event> = events_of(s, "q", 5)
        .await
        .into_iter()
        .map(unplaced)
        .collect();
    got.sort_by(|a, b| a.job_id.cmp(&b.job_id));
    let event = |id: &str, fire_at: Millis, name: &str, data: serde_json::Value| events::Event {
        id: String::new(),
        topic: "q".into(),
        job_id: id.into(),
        job_type: "pull".into(),
        event: name.into(),
        fire_at,
        fired_at: T0 + 7,
        attempt: 1,
        data,
    };
    assert_eq!(
        got,
        [
            event(
                "buried",
                T0 - 5,
                "job.dead",
                json!({"error": "bad \"input\""})
            ),
            event(QUOTED, T0, "job.done", serde_json::Value::Null),
            event("plain", T0, "job.done", serde_json::Value::Null),
            event("retried", T0 - 5, "job.dead", json!({"error": "busy"})),
            event("typed", T0 - 5, "job.done", serde_json::Value::Null),
        ]
    );
}

/// Every event of `topic`, waiting (up to 5 s) until at least `n` are readable: an engine
/// may hold back the events of the current millisecond until it has passed.
async fn events_of(s: &Store, topic: &str, n: usize) -> Vec<events::Event> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let mut all = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = s.read_events(topic, after.as_deref(), 100).await.unwrap();
            if page.items.is_empty() {
                break;
            }
            after = page.next.clone();
            all.extend(page.items);
        }
        if all.len() >= n || std::time::Instant::now() > deadline {
            return all;
        }
        // A poll until the deadline: a page holds back the store's current millisecond.
        crate::common::runtime::quiet(2).await;
    }
}

/// An event without its stream position, for comparing what two engines stored.
fn unplaced(mut e: events::Event) -> events::Event {
    e.id = String::new();
    e
}

async fn settle_applies_a_batch_with_its_events_in_one_step(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 1, 2)).await.unwrap();
    for id in [
        "ack", "retry", "repeat", "bury", "release", "stale", "reset",
    ] {
        s.schedule(
            "t",
            NewJob::new(id, T0).job_type("emit"),
            ScheduleMode::Upsert,
            T0,
        )
        .await
        .unwrap();
    }
    let mut runs: HashMap<String, Leased> = pump_all(s, "t", T0)
        .await
        .into_iter()
        .map(|l| (l.job.id.clone(), l))
        .collect();
    runs.get_mut("stale").unwrap().token += 1_000;
    s.schedule(
        "t",
        NewJob::new("reset", T0 + 900),
        ScheduleMode::ResetOnly,
        T0 + 1,
    )
    .await
    .unwrap();
    let settle = |id: &str, outcome: RunOutcome| {
        let mut st = Settlement::new(runs[id].clone(), outcome, T0 + 3);
        st.emitted = vec![
            Emitted::new("job.fired", json!({"id": id})),
            Emitted::new("custom.note", json!([1, "two"])),
        ];
        st
    };
    let batch = vec![
        settle("ack", RunOutcome::Done),
        settle(
            "retry",
            RunOutcome::Retry {
                error: "boom".into(),
                at: T0 + 100,
            },
        ),
        settle(
            "repeat",
            RunOutcome::Repeat {
                at: T0 + 200,
                error: None,
            },
        ),
        settle(
            "bury",
            RunOutcome::Dead {
                error: "gave up".into(),
            },
        ),
        settle("release", RunOutcome::Release),
        settle("stale", RunOutcome::Done),
        settle(
            "reset",
            RunOutcome::Retry {
                error: "late".into(),
                at: T0 + 100,
            },
        ),
    ];
    let done = door(s, "t", 0, 0)
        .await
        .settle(&batch, T0 + 5)
        .await
        .unwrap();
    assert_eq!(
        done,
        vec![
            Finished::Done,
            Finished::Retrying,
            Finished::Repeating,
            Finished::Dead,
            Finished::Released,
            Finished::Stale,
            Finished::Rescheduled,
        ]
    );
    assert_eq!(state(s, "t", "ack").await, None);
    assert_eq!(state(s, "t", "bury").await, Some(JobState::Dead));
    let stale = s.get("t", &"stale".into()).await.unwrap().unwrap();
    assert_eq!(
        stale.state,
        JobState::Running,
        "a stale outcome changes nothing"
    );
    let reset = s.get("t", &"reset".into()).await.unwrap().unwrap();
    assert_eq!(
        (reset.state, reset.fire_at),
        (JobState::Scheduled, T0 + 900)
    );

    let expected: Vec<events::Event> = batch
        .iter()
        .zip(&done)
        .flat_map(|(st, f)| events::Event::of_settled(st, *f))
        .collect();
    // Handler events then the outcome's: two each for the released run (no outcome event),
    // none for the stale one.
    assert_eq!(expected.len(), 2 * 6 + 5);
    let mut got: Vec<events::Event> = events_of(s, "t", expected.len())
        .await
        .into_iter()
        .map(unplaced)
        .collect();
    let key = |e: &events::Event| (e.job_id.clone(), e.event.clone());
    let mut want = expected.clone();
    got.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(got, want);
    let rescheduled = got
        .iter()
        .find(|e| e.job_id == "reset" && e.event == events::kind::RETRY)
        .unwrap();
    assert_eq!(
        rescheduled.data,
        json!({"rescheduled": true, "error": "late"})
    );
    assert_eq!((rescheduled.fired_at, rescheduled.attempt), (T0 + 3, 1));
}

async fn a_stale_settlement_appends_no_event(e: Engine) {
    let s = &*e.store;
    let (old, new) = two_runs_of_one_job(s).await;
    let mut late = Settlement::new(old, RunOutcome::Done, T0);
    late.emitted = vec![Emitted::new("job.fired", json!(null))];
    let mut fresh = Settlement::new(new, RunOutcome::Done, T0 + 1_000);
    fresh.emitted = vec![Emitted::new("job.fired", json!(null))];
    // Both runs of the job in one batch: only the one holding the lease counts.
    let done = door(s, "t", 0, 0)
        .await
        .settle(&[late, fresh], T0 + 1_001)
        .await
        .unwrap();
    assert_eq!(done, vec![Finished::Stale, Finished::Done]);
    assert_eq!(state(s, "t", "a").await, None);
    let got = events_of(s, "t", 2).await;
    let seen: Vec<(u32, &str)> = got.iter().map(|e| (e.attempt, e.event.as_str())).collect();
    assert_eq!(seen, vec![(2, "job.fired"), (2, events::kind::DONE)]);
}

async fn reads_cancels_and_resets_never_create_a_topic(e: Engine) {
    let s = &*e.store;
    let before = e.dump();
    let job = JobRef::new("a");
    let not_found = |r: Result<()>| match r {
        Err(Error::TopicNotFound(t)) => assert_eq!(t, "nope"),
        other => panic!("expected TopicNotFound, got {other:?}"),
    };
    not_found(s.get("nope", &job).await.map(drop));
    not_found(s.cancel("nope", &job).await.map(drop));
    not_found(
        s.schedule("nope", NewJob::new("a", T0), ScheduleMode::ResetOnly, T0)
            .await
            .map(drop),
    );
    not_found(
        s.reset_many("nope", &[Reset::new("a", T0)], None, T0)
            .await
            .map(drop),
    );
    not_found(s.dead_list("nope", None, 10).await.map(drop));
    not_found(s.dead_requeue("nope", &job, T0).await.map(drop));
    not_found(s.dead_delete("nope", &job).await.map(drop));
    not_found(s.stats("nope").await.map(drop));
    not_found(s.read_events("nope", None, 10).await.map(drop));
    not_found(s.door("nope", 0, 0).await.map(drop));
    assert_eq!(s.find_topic("nope").await.unwrap(), None);
    assert!(s.topics().await.unwrap().is_empty());
    assert_eq!(e.dump(), before, "nothing was created");
    // A write that schedules does create it.
    s.schedule("nope", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    assert_eq!(s.find_topic("nope").await.unwrap().unwrap().name, "nope");
}

async fn dead_letters_page_oldest_first_requeue_and_delete(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 8, 1)).await.unwrap();
    for i in 0..25 {
        let id = format!("j{i:02}");
        s.schedule("t", NewJob::new(id.clone(), T0), ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    let runs = pump_all(s, "t", T0).await;
    for run in &runs {
        // Deaths at five distinct instants, five jobs each: ties are ordered by id.
        let n: i64 = run.job.id[1..].parse().unwrap();
        let bury = RunOutcome::Dead {
            error: format!("e{n}"),
        };
        door(s, "t", run.slot, 0)
            .await
            .finish(run, bury, T0 + 10 + n / 5)
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = s.dead_list("t", after.as_deref(), 7).await.unwrap();
        assert!(page.items.len() <= 7);
        seen.extend(
            page.items
                .iter()
                .map(|j| (j.dead_at.unwrap(), j.id.clone())),
        );
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let expected: Vec<_> = (0..25)
        .map(|i| (T0 + 10 + i / 5, format!("j{i:02}")))
        .collect();
    assert_eq!(seen, expected);
    let first = s.dead_list("t", None, MAX_PAGE).await.unwrap();
    assert_eq!(first.items[3].last_error.as_deref(), Some("e3"));

    assert!(s.dead_requeue("t", &"j03".into(), T0 + 100).await.unwrap());
    assert!(!s.dead_requeue("t", &"j03".into(), T0 + 100).await.unwrap());
    let got = s.get("t", &"j03".into()).await.unwrap().unwrap();
    assert_eq!(
        (got.state, got.attempts, got.fire_at),
        (JobState::Scheduled, 0, T0 + 100)
    );
    assert_eq!(got.last_error, None);
    assert!(s.dead_delete("t", &"j04".into()).await.unwrap());
    assert!(!s.dead_delete("t", &"j04".into()).await.unwrap());
    assert!(
        !s.dead_delete("t", &"j03".into()).await.unwrap(),
        "a live job is not a dead letter"
    );
    assert_eq!(state(s, "t", "j04").await, None);
    let stats = s.stats("t").await.unwrap();
    assert_eq!((stats.scheduled, stats.dead), (1, 23));
    let bad = s.dead_list("t", Some("garbage"), 5).await.unwrap_err();
    assert!(
        matches!(bad, Error::Invalid { field: "after", .. }),
        "{bad}"
    );
}

async fn stats_count_per_slot_and_in_total(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 4, 16)).await.unwrap();
    for i in 0..40 {
        let at = T0 + 100 + i;
        s.schedule(
            "t",
            NewJob::new(format!("j{i}"), at),
            ScheduleMode::Upsert,
            T0,
        )
        .await
        .unwrap();
    }
    let runs = pump_all(s, "t", T0 + 109).await;
    assert_eq!(runs.len(), 10);
    let stats = s.stats("t").await.unwrap();
    assert_eq!(
        (stats.slots, stats.scheduled, stats.running, stats.dead),
        (4, 30, 10, 0)
    );
    assert_eq!(stats.next_fire_at, Some(T0 + 110));
    assert_eq!(stats.per_slot.len(), 4);
    for slot in &stats.per_slot {
        let expected = (0..40)
            .filter(|i| slot_of(&format!("j{i}"), 4) == slot.slot && *i >= 10)
            .count() as u64;
        assert_eq!(slot.scheduled, expected, "slot {}", slot.slot);
    }
}

async fn topics_are_created_on_first_use_and_keep_their_slots(e: Engine) {
    let s = &*e.store;
    let t = s.topic("fresh").await.unwrap();
    assert_eq!(
        (t.slots, t.max_attempts, t.visibility_timeout_ms),
        (16, 16, 30_000)
    );
    s.put_topic(topic_with("custom", 64, 3)).await.unwrap();
    assert_eq!(s.topic("custom").await.unwrap().max_attempts, 3);
    let changed = s.put_topic(topic_with("custom", 32, 3)).await.unwrap_err();
    assert!(matches!(changed, Error::TopicConflict { .. }), "{changed}");
    s.put_topic(topic_with("custom", 64, 5)).await.unwrap();
    assert_eq!(s.topic("custom").await.unwrap().max_attempts, 5);
    let names: Vec<_> = s
        .topics()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(names.contains(&"fresh".to_string()) && names.contains(&"custom".to_string()));
}

async fn bad_arguments_are_rejected_and_change_nothing(e: Engine) {
    let s = &*e.store;
    s.put_topic(TopicConfig {
        max_payload_bytes: 100,
        ..TopicConfig::named("t")
    })
    .await
    .unwrap();
    s.schedule("t", NewJob::new("ok", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let before = e.dump();
    let field = |r: Result<Scheduled>| match r {
        Err(Error::Invalid { field, .. }) => field,
        Err(Error::PayloadTooLarge { .. }) => "payload",
        other => panic!("expected a rejection, got {other:?}"),
    };
    let up = ScheduleMode::Upsert;
    assert_eq!(
        field(s.schedule("t", NewJob::new("", T0), up, T0).await),
        "id"
    );
    let long = "x".repeat(513);
    assert_eq!(
        field(s.schedule("t", NewJob::new(long.clone(), T0), up, T0).await),
        "id"
    );
    // NUL is the Redis store's mark of a due member (src/store/keys.rs): no id holds it.
    assert_eq!(
        field(s.schedule("t", NewJob::new("a\0", T0), up, T0).await),
        "id"
    );
    assert_eq!(
        field(s.schedule("bad topic", NewJob::new("a", T0), up, T0).await),
        "topic"
    );
    let big = NewJob::new("a", T0).payload(json!("y".repeat(200)));
    assert_eq!(field(s.schedule("t", big, up, T0).await), "payload");
    let bad_cap = NewJob::new("a", T0 + 10).max_fire_at(-1);
    assert_eq!(field(s.schedule("t", bad_cap, up, T0).await), "max_fire_at");
    assert_eq!(
        field(s.schedule("t", NewJob::new("a", -5), up, T0).await),
        "fire_at"
    );
    let bad_type = NewJob::new("a", T0).job_type("no spaces");
    assert_eq!(field(s.schedule("t", bad_type, up, T0).await), "type");
    let bad_slots = s
        .put_topic(TopicConfig {
            slots: 3,
            ..TopicConfig::named("u")
        })
        .await;
    assert!(matches!(
        bad_slots,
        Err(Error::Invalid { field: "slots", .. })
    ));
    // A batch with one bad id is rejected whole.
    let resets = vec![Reset::new("ok", T0 + 5), Reset::new(long, T0 + 5)];
    let r = s.reset_many("t", &resets, None, T0).await;
    assert!(
        matches!(r, Err(Error::Invalid { field: "id", .. })),
        "{r:?}"
    );
    assert!(matches!(
        s.get("t", &"".into()).await,
        Err(Error::Invalid { field: "id", .. })
    ));
    assert!(matches!(
        s.cancel("t", &"".into()).await,
        Err(Error::Invalid { field: "id", .. })
    ));
    assert_eq!(e.dump(), before, "a rejected call changed the store");
    assert_eq!(s.get("t", &"ok".into()).await.unwrap().unwrap().fire_at, T0);
    // A fire time in the past is legal: due at once.
    s.schedule("t", NewJob::new("past", T0 - 60_000), up, T0)
        .await
        .unwrap();
    assert!(
        pump_all(s, "t", T0)
            .await
            .iter()
            .any(|l| l.job.id == "past")
    );
}

async fn unconfigured_topics_are_refused_when_auto_creation_is_off(e: Engine) {
    let options = timeout_center::StoreOptions {
        auto_create_topics: false,
        ..Default::default()
    };
    let e = Engine::of_with(e.kind(), options).await;
    let s = &*e.store;
    let r = s
        .schedule("nope", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await;
    assert!(
        matches!(r, Err(Error::UnknownTopic(ref t)) if t == "nope"),
        "{r:?}"
    );
    s.put_topic(TopicConfig::named("yes")).await.unwrap();
    s.schedule("yes", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
}

async fn shard_keys_route_jobs_together(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 64, 16)).await.unwrap();
    for id in ["start", "end", "reminder"] {
        let job = NewJob::new(id, T0).shard_key("meeting-42");
        let r = s
            .schedule("t", job, ScheduleMode::Upsert, T0)
            .await
            .unwrap();
        assert_eq!(r.slot, slot_of("meeting-42", 64));
    }
    let by_key = JobRef::new("end").with_shard_key(Some("meeting-42".into()));
    assert!(s.get("t", &by_key).await.unwrap().is_some());
    let slot = slot_of("meeting-42", 64);
    assert_eq!(
        door(s, "t", slot, 0)
            .await
            .pump(T0, 10)
            .await
            .unwrap()
            .jobs
            .len(),
        3
    );
}

/// 10,000 jobs over 64 slots at random times, pumped with an advancing `now`: each is handed
/// out exactly once, never early, and the per-slot figures add up at every step.
async fn ten_thousand_jobs_fire_exactly_once_and_never_early(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("t", 64, 16)).await.unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut fire_at = HashMap::new();
    let resets: Vec<Reset> = (0..10_000)
        .map(|i| {
            let at = T0 + rng.random_range(0..60_000);
            fire_at.insert(format!("job-{i}"), at);
            Reset::new(format!("job-{i}"), at)
        })
        .collect();
    let create = CreateSpec::default();
    for chunk in resets.chunks(1_000) {
        s.reset_many("t", chunk, Some(&create), T0).await.unwrap();
    }
    let mut seen = HashSet::new();
    let mut now = T0;
    while now <= T0 + 61_000 {
        for slot in 0..64 {
            let p = door(s, "t", slot, 0).await.pump(now, 50).await.unwrap();
            for run in p.jobs {
                assert!(run.job.fire_at <= now, "{} fired early", run.job.id);
                assert_eq!(run.job.fire_at, fire_at[&run.job.id]);
                assert!(
                    seen.insert(run.job.id.clone()),
                    "{} fired twice",
                    run.job.id
                );
                assert_eq!(
                    door(s, "t", run.slot, 0)
                        .await
                        .finish(&run, RunOutcome::Done, now)
                        .await
                        .unwrap(),
                    Finished::Done
                );
            }
        }
        let stats = s.stats("t").await.unwrap();
        let expected_left = fire_at.len() - seen.len();
        assert_eq!(stats.scheduled as usize, expected_left, "at {now}");
        assert_eq!(
            stats.per_slot.iter().map(|x| x.scheduled).sum::<u64>(),
            stats.scheduled
        );
        assert_eq!((stats.running, stats.dead), (0, 0));
        // Every job due by now has been handed out (batches of 50 may need a second round).
        let due_left = fire_at
            .iter()
            .filter(|(id, at)| **at <= now && !seen.contains(*id))
            .count();
        if due_left == 0 {
            now += 997;
        }
    }
    assert_eq!(seen.len(), 10_000);
}

// Every test above, once per engine: `redis_engine::NAME` and `memory_engine::NAME`.
/// A listing pages through a topic's scheduled jobs in (fire time, id) order across its
/// slots: ties at one instant included, each job that did not move exactly once, whatever
/// is written between pages; the window and the running state are honoured, and bad
/// arguments are refused naming the field.
async fn list_pages_in_fire_time_order_without_skips_or_repeats(e: Engine) {
    use timeout_center::store::ListQuery;
    let s = &*e.store;
    s.put_topic(topic_with("ls", 4, 3)).await.unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut model: std::collections::BTreeMap<String, Millis> = Default::default();
    for i in 0..300 {
        // A third of the jobs share one instant: their order is their ids'.
        let at = if i % 3 == 0 {
            T0 + 5_000
        } else {
            T0 + rng.random_range(1..20_000)
        };
        let id = format!("j{:x}", rng.random::<u32>());
        s.schedule("ls", NewJob::new(id.clone(), at), ScheduleMode::Upsert, T0)
            .await
            .unwrap();
        model.insert(id, at);
    }
    let (from, to) = (T0 + 2_000, T0 + 15_000);
    let mut q = ListQuery {
        from,
        to,
        limit: 7,
        ..ListQuery::default()
    };
    let mut seen: Vec<(Millis, String)> = Vec::new();
    let mut pages = 0;
    loop {
        let page = s.list("ls", &q).await.unwrap();
        assert!(page.items.len() <= 7);
        seen.extend(page.items.iter().map(|j| (j.fire_at, j.id.clone())));
        pages += 1;
        // Between pages, writes elsewhere in the order: new jobs behind the cursor and ahead
        // of it (the latter may or may not show; the former never), none of them counted.
        let behind = format!("new-behind-{pages}");
        let ahead = format!("new-ahead-{pages}");
        for (id, at) in [(&behind, from), (&ahead, to)] {
            s.schedule("ls", NewJob::new(id.clone(), at), ScheduleMode::Upsert, T0)
                .await
                .unwrap();
        }
        match page.next {
            Some(next) => q.cursor = Some(next),
            None => break,
        }
    }
    let listed: Vec<(Millis, String)> = seen
        .iter()
        .filter(|(_, id)| !id.starts_with("new-"))
        .cloned()
        .collect();
    let mut expected: Vec<(Millis, String)> = model
        .iter()
        .filter(|(_, at)| (from..=to).contains(*at))
        .map(|(id, at)| (*at, id.clone()))
        .collect();
    expected.sort();
    assert_eq!(
        listed, expected,
        "the listing is the window's jobs, once each, in order"
    );
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "pages ascend and never repeat"
    );
    assert!(
        !seen.iter().any(|(_, id)| id.starts_with("new-behind")),
        "a job written behind the cursor is not on a later page"
    );
    assert!(pages > 10, "{pages} pages");
    // Running jobs, by lease deadline.
    let runs = pump_all(s, "ls", T0 + 3_000).await;
    let running = s
        .list(
            "ls",
            &ListQuery {
                state: JobState::Running,
                limit: 1_000,
                ..ListQuery::default()
            },
        )
        .await
        .unwrap();
    let mut ids: Vec<String> = runs.iter().map(|r| r.job.id.clone()).collect();
    ids.sort();
    assert_eq!(
        running
            .items
            .iter()
            .map(|j| j.id.clone())
            .collect::<Vec<_>>(),
        ids,
        "one pump's runs share a lease deadline: ordered by id"
    );
    assert!(running.items.iter().all(|j| j.state == JobState::Running));
    // Bad arguments.
    for (bad, field) in [
        (
            ListQuery {
                state: JobState::Dead,
                ..ListQuery::default()
            },
            "state",
        ),
        (
            ListQuery {
                cursor: Some("nope".into()),
                ..ListQuery::default()
            },
            "cursor",
        ),
    ] {
        match s.list("ls", &bad).await {
            Err(Error::Invalid { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(matches!(
        s.list("no-such-topic", &ListQuery::default()).await,
        Err(Error::TopicNotFound(_))
    ));
    let empty = ListQuery {
        from: T0 + 1,
        to: T0,
        ..ListQuery::default()
    };
    assert_eq!(s.list("ls", &empty).await.unwrap(), JobPage::default());
}

/// Deleting a topic takes its settings, jobs, dead letters and events; it is refused while a
/// job runs unless forced; a topic of the same name made later starts empty.
async fn deleting_a_topic_removes_all_of_it_and_a_new_one_starts_empty(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic_with("gone", 4, 1)).await.unwrap();
    for i in 0..30 {
        let job = NewJob::new(format!("j{i}"), T0 + 100).payload(json!({"i": i}));
        s.schedule("gone", job, ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    let runs = pump_all(s, "gone", T0 + 100).await;
    assert_eq!(runs.len(), 30);
    let dead = RunOutcome::Dead { error: "x".into() };
    door(s, "gone", runs[0].slot, 0)
        .await
        .finish(&runs[0], dead, T0 + 101)
        .await
        .unwrap();
    match s.delete_topic("gone", false).await {
        Err(Error::TopicConflict { message, .. }) => {
            assert!(message.contains("force"), "{message}")
        }
        other => panic!("a topic with running jobs was deleted: {other:?}"),
    }
    assert_eq!(
        s.stats("gone").await.unwrap().running,
        29,
        "a refusal changes nothing"
    );
    let held = s.delete_topic("gone", true).await.unwrap();
    assert_eq!((held.running, held.dead), (29, 1));
    assert_eq!(s.find_topic("gone").await.unwrap(), None);
    assert!(matches!(
        s.stats("gone").await,
        Err(Error::TopicNotFound(_))
    ));
    assert!(matches!(
        s.delete_topic("gone", true).await,
        Err(Error::TopicNotFound(_))
    ));
    // The same name again: nothing of the old topic is there.
    s.put_topic(topic_with("gone", 4, 1)).await.unwrap();
    let stats = s.stats("gone").await.unwrap();
    assert_eq!((stats.scheduled, stats.running, stats.dead), (0, 0, 0));
    assert_eq!(s.get("gone", &JobRef::new("j1")).await.unwrap(), None);
    assert!(
        s.read_events("gone", None, 100)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(pump_all(s, "gone", T0 + 1_000_000).await.is_empty());
    assert!(
        s.dead_list("gone", None, 10)
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

/// Every row of the state machine's table (`store::state_machine::TRANSITIONS`), played on
/// a job of its own: the job is brought to the row's state, the row's operation applied, and
/// the state after and the operation's answer compared with the row's.
async fn every_transition_of_the_state_machine_holds(e: Engine) {
    use timeout_center::conformance::state_machine::{From, Op, TRANSITIONS, To};
    let s = &*e.store;
    for (i, t) in TRANSITIONS.iter().enumerate() {
        let topic = format!("sm{i}");
        s.put_topic(topic_with(&topic, 1, 5)).await.unwrap();
        let (id, job) = ("j", JobRef::new("j"));
        let at = T0 + 100;
        // The row's state; `run` is the live run when there is one.
        let mut run = None;
        if t.from != From::None {
            let mut new = NewJob::new(id, at);
            if t.from == From::RunningRecurring {
                let mut every = Recurrence::every(std::time::Duration::from_secs(60)).unwrap();
                if t.op == Op::Last {
                    // A series of one fire: the one about to run is its last.
                    let one = Series {
                        limit: Some(1),
                        ..Series::default()
                    };
                    every = every.with_series(one).unwrap();
                }
                new = new.repeat(every);
            }
            s.schedule(&topic, new, ScheduleMode::Upsert, T0)
                .await
                .unwrap();
        }
        if matches!(
            t.from,
            From::Running
                | From::RunningReset
                | From::RunningExpired
                | From::Dead
                | From::RunningRecurring
        ) {
            run = Some(pump_one(s, &topic, id, at).await);
        }
        if t.from == From::RunningReset {
            let again = NewJob::new(id, at + 5_000);
            s.schedule(&topic, again, ScheduleMode::ResetOnly, at)
                .await
                .unwrap();
        }
        if t.from == From::Dead {
            let lease = run.take().unwrap();
            let dead = RunOutcome::Dead { error: "x".into() };
            door(s, &topic, lease.slot, 0)
                .await
                .finish(&lease, dead, at)
                .await
                .unwrap();
        }
        let now = match t.from {
            From::RunningExpired => at + 1_001,
            From::Due => at,
            _ => at,
        };
        let before = state(s, &topic, id).await;
        let topic_ref = topic.as_str();
        let settle = |outcome: RunOutcome| {
            let lease = run.clone().expect("a running job");
            async move {
                door(s, topic_ref, lease.slot, 0)
                    .await
                    .finish(&lease, outcome, now)
                    .await
                    .unwrap()
                    .as_str()
                    .to_string()
            }
        };
        let answer: String = match t.op {
            Op::Upsert | Op::Create | Op::Reset => {
                let mode = match t.op {
                    Op::Upsert => ScheduleMode::Upsert,
                    Op::Create => ScheduleMode::CreateOnly,
                    _ => ScheduleMode::ResetOnly,
                };
                let job = NewJob::new(id, now + 2_000);
                let r = s.schedule(&topic, job, mode, now).await.unwrap();
                r.outcome.as_str().to_string()
            }
            Op::ResetOrCreate => {
                let resets = [Reset::new(id, now + 2_000)];
                let create = CreateSpec::default();
                let r = s
                    .reset_many(&topic, &resets, Some(&create), now)
                    .await
                    .unwrap();
                if r.created == 1 { "created" } else { "reset" }.to_string()
            }
            Op::Pump => {
                let p = door(s, &topic, 0, 0).await.pump(now, 10).await.unwrap();
                if p.expired > 0 {
                    "expired".into()
                } else if !p.jobs.is_empty() {
                    "handed".into()
                } else {
                    "nothing".into()
                }
            }
            Op::Done => settle(RunOutcome::Done).await,
            Op::Retry => {
                let error = "x".into();
                settle(RunOutcome::Retry {
                    error,
                    at: now + 2_000,
                })
                .await
            }
            Op::Repeat => {
                settle(RunOutcome::Repeat {
                    at: now + 2_000,
                    error: None,
                })
                .await
            }
            Op::Bury => settle(RunOutcome::Dead { error: "x".into() }).await,
            Op::Ends => {
                // Each way a run can end gives the same answer; the series continues.
                let done = settle(RunOutcome::Done).await;
                let again = pump_one(s, &topic, id, at + 60_000).await;
                let dead = RunOutcome::Dead { error: "x".into() };
                let buried = door(s, &topic, again.slot, 0)
                    .await
                    .finish(&again, dead, now)
                    .await
                    .unwrap();
                assert_eq!(buried.as_str(), done, "row {i}: a dead fire");
                done
            }
            Op::Last => settle(RunOutcome::Done).await,
            Op::Release => settle(RunOutcome::Release).await,
            Op::StaleSettle => {
                let mut lease = run.clone().unwrap();
                lease.token += 1;
                let f = door(s, &topic, lease.slot, 0)
                    .await
                    .finish(&lease, RunOutcome::Done, now)
                    .await;
                f.unwrap().as_str().to_string()
            }
            Op::Touch => {
                let lease = run.clone().unwrap();
                let live = door(s, &topic, lease.slot, 0)
                    .await
                    .extend(&lease, now + 9_000)
                    .await
                    .unwrap();
                live.to_string()
            }
            Op::Cancel => {
                let was = s.cancel(&topic, &job).await.unwrap();
                was.map_or("none", JobState::as_str).to_string()
            }
            Op::Requeue => s.dead_requeue(&topic, &job, now).await.unwrap().to_string(),
            Op::DeadDelete => s.dead_delete(&topic, &job).await.unwrap().to_string(),
        };
        let after = state(s, &topic, id).await;
        let expected = match t.to {
            To::Gone => None,
            To::Scheduled => Some(JobState::Scheduled),
            To::Running => Some(JobState::Running),
            To::Dead => Some(JobState::Dead),
            To::Unchanged => before,
        };
        assert_eq!(
            (answer.as_str(), after),
            (t.answer, expected),
            "row {i}: {:?} {:?}",
            t.from,
            t.op
        );
    }
}

/// The architecture document's table is the module's.
#[test]
fn the_architecture_documents_the_state_machine_of_the_code() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/architecture.md"))
        .unwrap();
    let table = timeout_center::conformance::state_machine::markdown();
    assert!(
        doc.contains(&table),
        "docs/architecture.md's state machine table is not store::state_machine::markdown(), \
         which reads:\n{table}"
    );
}

engine_matrix!(
    #[tokio::test] crate::common::Engine::of;
    unconfigured_topics_are_refused_when_auto_creation_is_off,
    a_door_to_a_slot_the_topic_no_longer_has_is_refused_not_a_panic,
    schedule_upsert_creates_then_replaces,
    schedule_create_only_leaves_an_existing_job_untouched,
    schedule_reset_only_moves_the_fire_time_and_keeps_the_payload,
    reset_many_resets_creates_and_reports_missing,
    debounce_never_moves_fire_at_past_max_fire_at,
    max_fire_at_caps_the_first_fire_time_too,
    cancel_removes_a_job_in_any_state,
    get_reports_state_attempts_and_last_error,
    pump_never_returns_a_job_before_its_fire_at,
    a_pump_with_a_lead_hands_out_what_falls_due_within_it,
    expired_leases_go_back_to_scheduled_or_dead,
    ack_removes_the_job,
    retry_reschedules_until_attempts_are_used_up,
    repeat_runs_again_with_attempts_starting_again,
    bury_sends_the_job_to_the_dead_letters,
    a_reset_rearms_a_job_that_had_fired_and_reports_it,
    a_far_reset_batch_of_every_kind_of_job_resets_each_as_alone,
    release_gives_the_job_back_without_counting_the_attempt,
    defer_gives_the_job_back_due_later_without_counting_the_attempt,
    extend_keeps_a_long_run_from_being_taken_over,
    a_reset_during_a_run_fires_the_job_again_after_the_run,
    an_outcome_with_a_stale_token_changes_nothing,
    dead_letters_page_oldest_first_requeue_and_delete,
    stats_count_per_slot_and_in_total,
    topics_are_created_on_first_use_and_keep_their_slots,
    bad_arguments_are_rejected_and_change_nothing,
    shard_keys_route_jobs_together,
    ten_thousand_jobs_fire_exactly_once_and_never_early,
    settle_applies_a_batch_with_its_events_in_one_step,
    a_stale_settlement_appends_no_event,
    reads_cancels_and_resets_never_create_a_topic,
    every_transition_of_the_state_machine_holds,
    list_pages_in_fire_time_order_without_skips_or_repeats,
    deleting_a_topic_removes_all_of_it_and_a_new_one_starts_empty,
    a_run_settled_twice_in_one_batch_is_settled_once,
    settled_claims_append_the_events_their_records_describe,
    a_job_named_twice_in_a_reset_batch_is_reset_twice_in_order,
    plain_acks_append_their_done_or_rescheduled_events,
    a_topic_keeps_only_the_events_its_events_setting_names,
);

//! Recurring schedules (`repeat`): on both engines through the store, with `now` given, and
//! through real `toc serve` processes.
//!
//! What the store tests prove: each fire's outcome and the next instant are stored in one
//! settle (the job is never seen done between two fires), a cron series in a time zone keeps
//! its wall clock across a daylight-saving change with no instant skipped or doubled, a fire
//! that fails for good records its error and the series goes on, a late fire is not replayed,
//! a reset moves the next fire, a cancel ends the series, and a consumer's ack of a claimed
//! recurring job schedules it again. What the process tests prove: a series fires on its
//! period through a real runtime and webhook, stops on cancel, and survives the SIGKILL of
//! the instance that ran it (another instance takes the slot and the series goes on). What
//! they cannot: the exact instant a taken-over slot resumes (bounded, not measured).

#[macro_use]
mod common;
use common::door;

use std::time::Duration;

use serde_json::json;
use timeout_center::conformance::*;
use timeout_center::*;

use common::Engine;

/// 2026-03-27T12:00:00Z, a Friday: Berlin's clocks go forward on Sunday the 29th.
const SPRING: Millis = 1_774_612_800_000;
const H: Millis = 3_600_000;

fn berlin_at_half_past_two() -> Recurrence {
    Recurrence::cron("30 2 * * *", Some("Europe/Berlin")).unwrap()
}

/// The one job of `topic` due by `now`, handed out.
async fn pump_one(s: &Store, topic: &str, now: Millis) -> Leased {
    let t = s.topic(topic).await.unwrap();
    let mut jobs = Vec::new();
    for slot in 0..t.slots {
        jobs.extend(
            door(s, topic, slot, 0)
                .await
                .pump(now, 10)
                .await
                .unwrap()
                .jobs,
        );
    }
    assert_eq!(jobs.len(), 1, "one job due by {now}: {jobs:?}");
    jobs.pop().unwrap()
}

async fn job(s: &Store, topic: &str, id: &str) -> Option<Job> {
    s.get(topic, &id.into()).await.unwrap()
}

async fn a_cron_series_keeps_berlin_time_across_the_spring_change(e: Engine) {
    let s = &*e.store;
    let r = berlin_at_half_past_two();
    let first = r.next_after(SPRING).unwrap();
    let new = NewJob::new("daily", first).repeat(r.clone());
    let made = s
        .schedule("cron", new, ScheduleMode::Upsert, SPRING)
        .await
        .unwrap();
    let view = made.job.unwrap();
    assert_eq!(
        (view.repeat.as_ref(), view.next_fire_at),
        (Some(&r), Some(first))
    );
    let mut fires = Vec::new();
    for _ in 0..3 {
        let at = job(s, "cron", "daily").await.unwrap().fire_at;
        // Not due a millisecond early.
        let t = s.topic("cron").await.unwrap();
        for slot in 0..t.slots {
            assert!(
                door(s, "cron", slot, 0)
                    .await
                    .pump(at - 1, 10)
                    .await
                    .unwrap()
                    .jobs
                    .is_empty()
            );
        }
        let run = pump_one(s, "cron", at).await;
        // While it runs, its view shows the fire after this one.
        let running = job(s, "cron", "daily").await.unwrap();
        assert_eq!(running.next_fire_at, r.next_after(at));
        fires.push(at);
        let f = door(s, "cron", run.slot, 0)
            .await
            .finish(&run, RunOutcome::Done, at + 5)
            .await
            .unwrap();
        assert_eq!(f, Finished::Repeating);
    }
    // 02:30 CET (01:30Z), then 03:00 CEST on the day 02:30 does not exist (01:00Z), then
    // 02:30 CEST (00:30Z): one fire a day, none skipped, none doubled.
    let day = 24 * H;
    let base = SPRING + 12 * H + H + H / 2; // 2026-03-28T01:30Z
    assert_eq!(fires, vec![base, base + day - H / 2, base + 2 * day - H]);
    let after = job(s, "cron", "daily").await.unwrap();
    assert_eq!((after.state, after.fires), (JobState::Scheduled, 3));
}

async fn a_fire_that_fails_for_good_keeps_its_error_and_the_series_goes_on(e: Engine) {
    let s = &*e.store;
    let every = Recurrence::every(Duration::from_secs(60)).unwrap();
    let new = NewJob::new("tick", SPRING).repeat(every).max_attempts(2);
    s.schedule("t", new, ScheduleMode::Upsert, SPRING)
        .await
        .unwrap();
    let run = pump_one(s, "t", SPRING).await;
    let retry = RunOutcome::Retry {
        error: "down".into(),
        at: SPRING + 1_000,
    };
    assert_eq!(
        door(s, "t", run.slot, 0)
            .await
            .finish(&run, retry, SPRING)
            .await
            .unwrap(),
        Finished::Retrying
    );
    let run = pump_one(s, "t", SPRING + 1_000).await;
    let retry = RunOutcome::Retry {
        error: "still down".into(),
        at: SPRING + 3_000,
    };
    // Out of attempts: not dead, but the next instant, counted from this run's fire time.
    assert_eq!(
        door(s, "t", run.slot, 0)
            .await
            .finish(&run, retry, SPRING + 1_200)
            .await
            .unwrap(),
        Finished::Repeating
    );
    let got = job(s, "t", "tick").await.unwrap();
    assert_eq!(
        (
            got.state,
            got.fire_at,
            got.attempts,
            got.last_error.as_deref()
        ),
        (JobState::Scheduled, SPRING + 61_000, 0, Some("still down"))
    );
    // The retry's event and the repeat's; an engine may hold back the events of the current
    // millisecond until it has passed (up to 5 s).
    let events = crate::common::runtime::eventually(5, || async {
        let events = s.read_events("t", None, 100).await.unwrap().items;
        match events.len() {
            n if n >= 2 => Ok(events),
            n => Err(format!("{n} events: {events:?}")),
        }
    })
    .await;
    assert_eq!(events.len(), 2, "{events:?}");
    let last = events.last().unwrap();
    assert_eq!(
        (last.event.as_str(), &last.data),
        (
            "job.repeat",
            &json!({"repeat_at": SPRING + 61_000, "error": "still down"})
        )
    );
    // A dead outcome is the same.
    let run = pump_one(s, "t", SPRING + 61_000).await;
    let dead = RunOutcome::Dead { error: "no".into() };
    assert_eq!(
        door(s, "t", run.slot, 0)
            .await
            .finish(&run, dead, SPRING + 61_000)
            .await
            .unwrap(),
        Finished::Repeating
    );
    assert!(s.dead_list("t", None, 10).await.unwrap().items.is_empty());
}

async fn a_late_fire_is_not_replayed_a_reset_moves_the_next_and_cancel_ends_it(e: Engine) {
    let s = &*e.store;
    let every = Recurrence::every(Duration::from_secs(60)).unwrap();
    s.schedule(
        "t",
        NewJob::new("tick", SPRING).repeat(every),
        ScheduleMode::Upsert,
        SPRING,
    )
    .await
    .unwrap();
    // Nothing ran for ten minutes and a half: one late fire, then the grid goes on.
    let late = SPRING + 630_000;
    let run = pump_one(s, "t", late).await;
    door(s, "t", run.slot, 0)
        .await
        .finish(&run, RunOutcome::Done, late)
        .await
        .unwrap();
    assert_eq!(job(s, "t", "tick").await.unwrap().fire_at, SPRING + 660_000);
    // A reset moves the next fire; the series counts on from there.
    s.schedule(
        "t",
        NewJob::new("tick", SPRING + 700_000),
        ScheduleMode::ResetOnly,
        late,
    )
    .await
    .unwrap();
    let run = pump_one(s, "t", SPRING + 700_000).await;
    door(s, "t", run.slot, 0)
        .await
        .finish(&run, RunOutcome::Done, SPRING + 700_001)
        .await
        .unwrap();
    let got = job(s, "t", "tick").await.unwrap();
    assert_eq!(
        (got.fire_at, got.repeat.is_some()),
        (SPRING + 760_000, true)
    );
    // A reset during a run wins over the schedule, as for any job.
    let run = pump_one(s, "t", SPRING + 760_000).await;
    s.schedule(
        "t",
        NewJob::new("tick", SPRING + 765_000),
        ScheduleMode::ResetOnly,
        SPRING + 760_000,
    )
    .await
    .unwrap();
    assert_eq!(
        door(s, "t", run.slot, 0)
            .await
            .finish(&run, RunOutcome::Done, SPRING + 760_001)
            .await
            .unwrap(),
        Finished::Rescheduled
    );
    assert_eq!(job(s, "t", "tick").await.unwrap().fire_at, SPRING + 765_000);
    // Cancel ends the series: no record, nothing due later.
    s.cancel("t", &"tick".into()).await.unwrap();
    assert!(job(s, "t", "tick").await.is_none());
}

async fn a_consumers_ack_of_a_recurring_job_schedules_its_next_instant(e: Engine) {
    let s = &*e.store;
    let pull = TopicConfig {
        default_type: "pull".into(),
        slots: 1,
        ..TopicConfig::named("work")
    };
    s.put_topic(pull).await.unwrap();
    let r = berlin_at_half_past_two();
    let first = r.next_after(SPRING).unwrap();
    s.schedule(
        "work",
        NewJob::new("report", first).repeat(r.clone()),
        ScheduleMode::Upsert,
        SPRING,
    )
    .await
    .unwrap();
    let claimed = door(s, "work", 0, 0)
        .await
        .claim(first, 10, 30_000)
        .await
        .unwrap()
        .jobs;
    assert_eq!(claimed.len(), 1);
    let ack = ClaimOutcome {
        job: "report".into(),
        token: claimed[0].token,
        outcome: Outcome::Done,
    };
    let done = s
        .settle_claims("work", std::slice::from_ref(&ack), first + 10)
        .await
        .unwrap();
    assert_eq!(done, vec![Finished::Repeating]);
    let got = job(s, "work", "report").await.unwrap();
    assert_eq!(
        (got.state, got.fire_at),
        (JobState::Scheduled, r.next_after(first).unwrap())
    );
    // The same ack again is stale: the instant is not settled twice.
    let again = s.settle_claims("work", &[ack], first + 20).await.unwrap();
    assert_eq!(again, vec![Finished::Stale]);
}

fn every_minute(series: Series) -> Recurrence {
    Recurrence::every(Duration::from_secs(60))
        .unwrap()
        .with_series(series)
        .unwrap()
}

/// `repeat.limit` ends a series with its last fire (the job gone), a failed last fire goes to
/// the dead letters with its error, and `repeat.until` ends it with the last fire whose next
/// instant would pass it; each settled in one step with the fire, as any outcome.
async fn a_series_ends_at_its_limit_or_until_and_a_failed_last_fire_is_dead(e: Engine) {
    let s = &*e.store;
    let twice = every_minute(Series {
        limit: Some(2),
        ..Series::default()
    });
    s.schedule(
        "t",
        NewJob::new("twice", SPRING).repeat(twice),
        ScheduleMode::Upsert,
        SPRING,
    )
    .await
    .unwrap();
    let run = pump_one(s, "t", SPRING).await;
    let first = door(s, "t", run.slot, 0)
        .await
        .finish(&run, RunOutcome::Done, SPRING + 1)
        .await
        .unwrap();
    assert_eq!(first, Finished::Repeating);
    assert_eq!(job(s, "t", "twice").await.unwrap().fire_at, SPRING + 60_000);
    let run = pump_one(s, "t", SPRING + 60_000).await;
    let last = door(s, "t", run.slot, 0)
        .await
        .finish(&run, RunOutcome::Done, SPRING + 60_001)
        .await
        .unwrap();
    assert_eq!(
        last,
        Finished::Done,
        "the second of two fires ends the series"
    );
    assert!(job(s, "t", "twice").await.is_none());

    let once = every_minute(Series {
        limit: Some(1),
        ..Series::default()
    });
    let new = NewJob::new("once", SPRING).repeat(once).max_attempts(1);
    s.schedule("d", new, ScheduleMode::Upsert, SPRING)
        .await
        .unwrap();
    let run = pump_one(s, "d", SPRING).await;
    let failed = RunOutcome::Dead {
        error: "receiver gone".into(),
    };
    assert_eq!(
        door(s, "d", run.slot, 0)
            .await
            .finish(&run, failed, SPRING + 1)
            .await
            .unwrap(),
        Finished::Dead
    );
    let dead = job(s, "d", "once").await.unwrap();
    assert_eq!(
        (dead.state, dead.last_error.as_deref()),
        (JobState::Dead, Some("receiver gone"))
    );

    let bounded = every_minute(Series {
        until: Some(SPRING + 60_000),
        ..Series::default()
    });
    let new = NewJob::new("bounded", SPRING).repeat(bounded);
    s.schedule("u", new, ScheduleMode::Upsert, SPRING)
        .await
        .unwrap();
    let run = pump_one(s, "u", SPRING).await;
    door(s, "u", run.slot, 0)
        .await
        .finish(&run, RunOutcome::Done, SPRING + 1)
        .await
        .unwrap();
    assert_eq!(
        job(s, "u", "bounded").await.unwrap().fire_at,
        SPRING + 60_000,
        "an instant at `until` fires"
    );
    let run = pump_one(s, "u", SPRING + 60_000).await;
    let last = door(s, "u", run.slot, 0)
        .await
        .finish(&run, RunOutcome::Done, SPRING + 60_001)
        .await
        .unwrap();
    assert_eq!(last, Finished::Done, "the next instant is past until");
    assert!(job(s, "u", "bounded").await.is_none());
}

engine_matrix!(
    #[tokio::test] crate::common::Engine::of;
    a_series_ends_at_its_limit_or_until_and_a_failed_last_fire_is_dead,
    a_cron_series_keeps_berlin_time_across_the_spring_change,
    a_fire_that_fails_for_good_keeps_its_error_and_the_series_goes_on,
    a_late_fire_is_not_replayed_a_reset_moves_the_next_and_cancel_ends_it,
    a_consumers_ack_of_a_recurring_job_schedules_its_next_instant,
);

mod processes {

    use serde_json::json;

    use crate::common::RedisServer;
    use crate::common::process::{Receiver, Skew, Toc, redis_env, signal, wall_us};

    /// A webhook every 300 ms through two `toc serve` on one Redis: it fires on its period,
    /// goes on after the instance that ran it is killed, and stops when cancelled.
    #[tokio::test]
    async fn a_series_fires_on_its_period_survives_a_sigkill_and_stops_on_cancel() {
        let dir = tempfile::tempdir().unwrap();
        let redis = RedisServer::start();
        let mut env = redis_env(redis.url());
        env.push(("TOC_RUNTIME_OWNER_LEASE_MS", "1000".into()));
        let a = Toc::start("a", &env, Skew::None, dir.path()).await;
        let b = Toc::start("b", &env, Skew::None, dir.path()).await;
        let http = reqwest::Client::new();
        let hook = Receiver::start();
        // One slot, so one instance runs the whole series.
        a.put_topic(&http, "hooks", json!({"slots": 1})).await;
        let start = wall_us() / 1_000 + 200;
        let body = json!({"type": "webhook", "fire_at": start, "repeat": {"every_ms": 300},
                          "payload": {"url": hook.url(), "body": {"id": "tick"}}});
        a.put_job(&http, "hooks", "tick", &body).await;
        let view = b.get_json(&http, "/v1/topics/hooks/jobs/tick").await;
        assert_eq!(view["repeat"], json!({"every_ms": 300}), "{view}");
        crate::common::runtime::quiet(1_400).await; // the series fires every 300 ms: 1.4 s of real time
        let before = hook.seen().get("tick").cloned().unwrap_or_default();
        assert!(before.len() >= 3, "fired {} times in 1.2 s", before.len());
        for (k, at_us) in before.iter().enumerate() {
            let due_ms = start + 300 * crate::num(k);
            assert!(
                *at_us >= due_ms * 1_000,
                "fire {k} came at {at_us} µs, before its instant {due_ms} ms"
            );
        }
        // Kill the instance that runs the slot: the other takes it once the owner lease ends.
        let (owner, survivor) = if crate::serves(&http, &a).await {
            (&a, &b)
        } else {
            (&b, &a)
        };
        assert!(
            crate::serves(&http, owner).await,
            "neither instance serves the slot"
        );
        signal(owner.pid(), "KILL");
        let killed_at = hook.seen()["tick"].len();
        crate::common::runtime::until(10, "the series going on after the SIGKILL", || async {
            hook.seen()["tick"].len() >= killed_at + 3
        })
        .await;
        let r = http
            .delete(survivor.url("/v1/topics/hooks/jobs/tick"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204);
        let cancelled = hook.seen()["tick"].len();
        crate::common::runtime::quiet(900).await; // three periods of the series, in real time
        // At most a fire already under way when the cancel came.
        assert!(
            hook.seen()["tick"].len() <= cancelled + 1,
            "the series went on after its cancel"
        );
    }
}

/// Whether `toc` serves slot 0 of `hooks` (its health lists the slot alive).
async fn serves(http: &reqwest::Client, toc: &common::process::Toc) -> bool {
    let slots = common::process::served_slots(http, &toc.url("")).await;
    slots.is_some_and(|slots| {
        slots
            .iter()
            .any(|s| s["topic"] == "hooks" && s["slot"] == 0 && s["alive"] == true)
    })
}

fn num(k: usize) -> i64 {
    i64::try_from(k).unwrap()
}

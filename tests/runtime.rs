//! The actor runtime, on both engines (the memory engine and a real Redis): firing on time
//! and never early, waking early jobs, retries, repeats, dead letters, resets during runs,
//! panics, restarts, shutdown, long runs; and, on Redis, two runtimes sharing one store.

#[macro_use]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use timeout_center::config::RuntimeSettings;
use timeout_center::conformance::*;
use timeout_center::events::kind;
use timeout_center::time::{Clock, ManualClock, now_ms};
use timeout_center::*;

use common::runtime::{Probe, events_until, eventually, names, next, quiet, settings, until};
use common::{Engine, RedisServer};

async fn center(e: &Engine, probe: Probe, poll_ms: u64) -> TimeoutCenter {
    TimeoutCenter::builder(e.store.clone())
        .settings(settings(poll_ms))
        .handler(probe)
        .start()
        .await
        .unwrap()
}

fn probe_job(id: &str, at: Millis) -> NewJob {
    NewJob::new(id, at).job_type("probe")
}

async fn one_slot_topic(c: &TimeoutCenter, name: &str, max_attempts: u32) {
    let mut t = TopicConfig::named(name);
    t.slots = 1;
    t.max_attempts = max_attempts;
    t.backoff.base_ms = 20;
    t.backoff.max_ms = 40;
    c.put_topic(t).await.unwrap();
}

async fn a_job_fires_on_time_and_never_before_its_fire_at(e: Engine) {
    let (probe, mut rx) = Probe::done();
    let c = center(&e, probe, 1_000).await;
    let at = now_ms() + 200;
    c.schedule("t", probe_job("a", at), ScheduleMode::Upsert)
        .await
        .unwrap();
    let seen = next(&mut rx, 5).await;
    assert_eq!(seen.job.id, "a");
    assert!(seen.fired_at >= at, "fired {} ms early", at - seen.fired_at);
    assert!(seen.handled_at >= at);
    assert!(
        seen.handled_at - at < 1_000,
        "{} ms late on an idle instance",
        seen.handled_at - at
    );
    let events = events_until(&c, "t", 5, |ev| ev.iter().any(|x| x.event == kind::DONE)).await;
    assert_eq!((events[0].fire_at, events[0].job_id.as_str()), (at, "a"));
    assert!(
        c.get("t", &"a".into()).await.unwrap().is_none(),
        "a done job is gone"
    );
}

async fn an_earlier_job_wakes_its_slot_without_waiting_for_the_poll(e: Engine) {
    let (probe, mut rx) = Probe::done();
    let c = center(&e, probe, 60_000).await;
    // Let the slot go to sleep until the late job (or its 60 s poll).
    asleep_before(&c, "late", 50_000).await;
    let at = now_ms() + 100;
    c.schedule("t", probe_job("early", at), ScheduleMode::Upsert)
        .await
        .unwrap();
    let seen = next(&mut rx, 5).await;
    assert_eq!(seen.job.id, "early");
    assert!(seen.fired_at >= at);
    assert!(
        seen.handled_at - at < 2_000,
        "woken {} ms late",
        seen.handled_at - at
    );
}

async fn a_failed_run_retries_with_backoff_then_succeeds(e: Engine) {
    let (probe, mut rx) = Probe::new(|_, call| {
        if call == 1 {
            Outcome::retry("first try fails")
        } else {
            Outcome::Done
        }
    });
    let c = center(&e, probe, 1_000).await;
    one_slot_topic(&c, "t", 5).await;
    c.schedule("t", probe_job("a", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    let first = next(&mut rx, 5).await;
    let second = next(&mut rx, 5).await;
    assert_eq!((first.job.attempts, second.job.attempts), (1, 2));
    assert!(
        second.fired_at - first.fired_at >= 16,
        "retried before its backoff (20 ms ± 20 %)"
    );
    assert_eq!(second.job.last_error.as_deref(), Some("first try fails"));
    let ev = events_until(&c, "t", 5, |ev| names(ev).contains(&kind::DONE.to_string())).await;
    assert_eq!(names(&ev), [kind::RETRY, kind::DONE]);
}

/// `put_topic` reaches slot actors that are already running: a retry after the change waits
/// the new backoff, not the one the actor started with.
async fn new_topic_settings_reach_running_slot_actors(e: Engine) {
    let (probe, mut rx) = Probe::new(|_, _| Outcome::retry("fails"));
    let c = center(&e, probe, 1_000).await;
    let mut t = TopicConfig::named("t");
    t.slots = 1;
    t.max_attempts = 5;
    t.backoff.base_ms = 3_600_000;
    t.backoff.max_ms = 3_600_000;
    t.backoff.jitter = 0.0;
    c.put_topic(t.clone()).await.unwrap();
    c.schedule("t", probe_job("slow", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    let first = next(&mut rx, 5).await;
    let ev = events_until(&c, "t", 5, |ev| {
        names(ev).contains(&kind::RETRY.to_string())
    })
    .await;
    let retry_at = ev[0].data["retry_at"].as_i64().unwrap();
    assert!(
        retry_at - first.fired_at >= 3_600_000,
        "the old backoff applied at first"
    );

    t.backoff.base_ms = 10;
    t.backoff.max_ms = 10;
    c.put_topic(t).await.unwrap();
    c.schedule("t", probe_job("fast", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    let first = next(&mut rx, 5).await;
    assert_eq!(first.job.id, "fast");
    let second = next(&mut rx, 5).await;
    assert_eq!((second.job.id.as_str(), second.job.attempts), ("fast", 2));
    assert!(
        second.fired_at - first.fired_at < 60_000,
        "the retry waited the old backoff"
    );
}

async fn a_job_that_keeps_failing_goes_dead_with_its_last_error(e: Engine) {
    let (probe, mut rx) = Probe::new(|_, call| Outcome::retry(format!("failure {call}")));
    let c = center(&e, probe, 1_000).await;
    one_slot_topic(&c, "t", 3).await;
    c.schedule("t", probe_job("a", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    for attempt in 1..=3 {
        assert_eq!(next(&mut rx, 5).await.job.attempts, attempt);
    }
    events_until(&c, "t", 5, |ev| names(ev).contains(&kind::DEAD.to_string())).await;
    let dead = c.dead_list("t", None, 10).await.unwrap();
    assert_eq!(dead.items.len(), 1);
    assert_eq!(
        (dead.items[0].attempts, dead.items[0].last_error.as_deref()),
        (3, Some("failure 3"))
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(300), rx.recv())
            .await
            .is_err(),
        "a dead job ran"
    );
}

async fn a_repeating_job_runs_again_after_its_interval(e: Engine) {
    let (probe, mut rx) = Probe::new(|_, call| {
        if call < 3 {
            Outcome::Repeat {
                after: Duration::from_millis(100),
            }
        } else {
            Outcome::Done
        }
    });
    let c = center(&e, probe, 1_000).await;
    let at = now_ms() + 50;
    c.schedule("t", probe_job("a", at), ScheduleMode::Upsert)
        .await
        .unwrap();
    let runs = [
        next(&mut rx, 5).await,
        next(&mut rx, 5).await,
        next(&mut rx, 5).await,
    ];
    assert_eq!(runs[0].job.fire_at, at);
    for (i, run) in runs.iter().enumerate() {
        assert!(run.fired_at >= run.job.fire_at, "fired early");
        assert_eq!((run.job.attempts, run.job.fires), (1, i as u32));
        if i > 0 {
            // Due one interval after the previous fire time (or at once, if that run was late).
            let prev = &runs[i - 1];
            assert!(run.job.fire_at >= prev.job.fire_at + 100);
            assert!(run.job.fire_at <= (prev.job.fire_at + 100).max(run.fired_at));
        }
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(300), rx.recv())
            .await
            .is_err(),
        "ran after done"
    );
}

async fn a_reset_during_a_run_fires_the_job_again_at_the_reset_time(e: Engine) {
    let (mut probe, mut rx) = Probe::done();
    let hold = Arc::new(tokio::sync::Notify::new());
    probe.hold = Some(hold.clone());
    let c = center(&e, probe, 1_000).await;
    c.schedule("t", probe_job("a", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    next(&mut rx, 5).await;
    let again_at = now_ms() + 300;
    let r = c.reset("t", &"a".into(), again_at).await.unwrap();
    assert_eq!(r.state, Some(JobState::Running));
    hold.notify_one(); // the first run reports done
    let second = next(&mut rx, 5).await;
    hold.notify_one();
    assert_eq!(second.job.fire_at, again_at);
    assert!(second.fired_at >= again_at, "fired before the reset time");
}

async fn a_panicking_handler_is_retried_and_the_slot_actor_survives(e: Engine) {
    let (probe, mut rx) = Probe::new(|_, call| {
        if call == 1 {
            panic!("handler bug");
        }
        Outcome::Done
    });
    let c = center(&e, probe, 1_000).await;
    one_slot_topic(&c, "t", 5).await;
    c.schedule("t", probe_job("a", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    assert_eq!(next(&mut rx, 5).await.job.attempts, 1);
    let second = next(&mut rx, 5).await;
    assert_eq!(second.job.attempts, 2);
    assert!(
        second
            .job
            .last_error
            .unwrap()
            .contains("handler panicked: handler bug")
    );
    let health = c.health().await;
    let slot = health.iter().find(|h| h.topic == "t").unwrap();
    assert!(slot.alive);
    assert_eq!(slot.restarts, 0);
}

/// A run that outlasts its type's timeout fails that attempt (the next names why) and is
/// cancelled; the job runs again.
async fn a_handler_that_hangs_past_its_timeout_is_retried(e: Engine) {
    let (mut probe, mut rx) = Probe::done();
    let hold = Arc::new(tokio::sync::Notify::new());
    probe.hold = Some(hold.clone());
    probe.timeout = Duration::from_millis(200);
    let c = center(&e, probe, 1_000).await;
    one_slot_topic(&c, "t", 5).await;
    c.schedule("t", probe_job("a", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    let first = next(&mut rx, 5).await; // and it hangs: nothing notifies it
    let second = next(&mut rx, 5).await;
    hold.notify_one(); // the second run reports done
    assert_eq!((first.job.attempts, second.job.attempts), (1, 2));
    assert!(
        second.handled_at - first.handled_at >= 200,
        "retried before the first run's timeout"
    );
    assert_eq!(
        second.job.last_error.as_deref(),
        Some("handler timed out after 200ms")
    );
    let ev = events_until(&c, "t", 5, |ev| names(ev).contains(&kind::DONE.to_string())).await;
    assert_eq!(names(&ev), [kind::RETRY, kind::DONE]);
}

/// A type only another instance registers (`runtime.foreign_types`) is accepted, and the
/// topic then names it (`types`): an instance that cannot run it takes none of the topic's
/// slots, so the job waits, unrun and not dead, and the topic is marked unserved (before,
/// the instance that owned the slot buried the job as dead).
async fn a_job_of_a_type_no_instance_runs_waits_unserved(e: Engine) {
    let (probe, _rx) = Probe::done();
    let mut settings = settings(100);
    settings.foreign_types = vec!["nobody".into()];
    let c = TimeoutCenter::builder(e.store.clone())
        .settings(settings)
        .handler(probe)
        .start()
        .await
        .unwrap();
    c.schedule(
        "t",
        NewJob::new("a", now_ms()).job_type("nobody"),
        ScheduleMode::Upsert,
    )
    .await
    .unwrap();
    assert_eq!(c.topic_settings("t").await.unwrap().types, ["nobody"]);
    until(10, "the topic is marked unserved", || async {
        c.metrics()
            .render()
            .contains("toc_topic_unserved{topic=\"t\"} 1")
    })
    .await;
    // Several ownership rounds (100 ms each) later, still no slot of it is served here and
    // the job has not run.
    quiet(500).await;
    assert!(
        c.health().await.iter().all(|s| s.topic != "t"),
        "an instance that cannot run the topic's types serves its slots"
    );
    let job = c.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Scheduled, 0));
    // A topic of types this instance runs is served as before.
    c.schedule("u", probe_job("b", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    assert!(
        !c.metrics()
            .render()
            .contains("toc_topic_unserved{topic=\"u\"}")
    );
}

async fn the_slot_keeper_restarts_a_slot_actor_that_stopped(e: Engine) {
    let (probe, mut rx) = Probe::done();
    // A slot that does not sleep (its next job is within the horizon): a sleeping slot has
    // no actor to halt.
    let c = TimeoutCenter::builder(e.store.clone())
        .settings(RuntimeSettings {
            dormant_after_ms: u64::MAX,
            ..settings(1_000)
        })
        .handler(probe)
        .start()
        .await
        .unwrap();
    one_slot_topic(&c, "t", 16).await;
    c.schedule(
        "t",
        probe_job("later", now_ms() + 3_600_000),
        ScheduleMode::Upsert,
    )
    .await
    .unwrap();
    eventually(5, || async {
        c.health()
            .await
            .iter()
            .any(|h| h.topic == "t" && h.last_pump.is_some() && !h.dormant)
            .then_some(())
            .ok_or("the slot never started".to_string())
    })
    .await;
    assert!(c.halt_slot("t", 0).await);
    eventually(5, || async {
        let h = c
            .health()
            .await
            .into_iter()
            .find(|h| h.topic == "t")
            .unwrap();
        (h.restarts == 1 && h.alive)
            .then_some(())
            .ok_or(format!("not restarted: {h:?}"))
    })
    .await;
    c.schedule("t", probe_job("after", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    assert_eq!(next(&mut rx, 5).await.job.id, "after");
}

async fn shutdown_gives_back_a_long_runs_lease_and_it_runs_on_the_next_start(e: Engine) {
    let (mut probe, mut rx) = Probe::done();
    probe.hold = Some(Arc::new(tokio::sync::Notify::new())); // never released: a long run
    let c = center(&e, probe, 1_000).await;
    c.schedule("t", probe_job("long", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    next(&mut rx, 5).await;
    let released = c.shutdown(Duration::from_millis(100)).await;
    assert_eq!(released, 1);
    let job = c.get("t", &"long".into()).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Scheduled, 0));

    let (probe2, mut rx2) = Probe::done();
    let c2 = center(&e, probe2, 1_000).await;
    let seen = next(&mut rx2, 5).await;
    assert_eq!((seen.job.id.as_str(), seen.job.attempts), ("long", 1));
    drop(c2);
}

/// A runtime on the Redis `server` with short owner leases (so slots move within the test),
/// running the probe type, and the probe's runs.
async fn redis_runtime(
    server: &RedisServer,
) -> (
    TimeoutCenter,
    tokio::sync::mpsc::UnboundedReceiver<common::runtime::Seen>,
) {
    let store = Store::redis(&server.url(), StoreOptions::default())
        .await
        .unwrap();
    let (probe, rx) = Probe::done();
    let c = TimeoutCenter::builder(Arc::new(store))
        .settings(RuntimeSettings {
            owner_lease_ms: 300,
            ..settings(200)
        })
        .handler(probe)
        .start()
        .await
        .unwrap();
    (c, rx)
}

#[actix_rt::test]
async fn two_runtimes_on_one_redis_share_the_slots_and_handle_each_job_exactly_once() {
    let server = RedisServer::start();
    let counts: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let mut centers = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..2 {
        let (c, rx) = redis_runtime(&server).await;
        centers.push(c);
        receivers.push(rx);
    }
    // Each slot gets one owner; both runtimes own some.
    centers[0].topic("shared").await.unwrap();
    centers[1].topic("shared").await.unwrap();
    eventually(10, || async {
        let mut owners: HashMap<u32, u32> = HashMap::new();
        let mut mine = [0; 2];
        for (i, c) in centers.iter().enumerate() {
            for h in c.health().await.into_iter().filter(|h| h.topic == "shared") {
                *owners.entry(h.slot).or_default() += 1;
                mine[i] += 1;
            }
        }
        let settled =
            owners.len() == 16 && owners.values().all(|n| *n == 1) && mine.iter().all(|n| *n > 0);
        settled
            .then_some(())
            .ok_or(format!("the slots did not settle: {owners:?}"))
    })
    .await;
    let at = now_ms() + 500;
    let resets: Vec<Reset> = (0..5_000)
        .map(|i| Reset::new(format!("j{i}"), at))
        .collect();
    let create = CreateSpec {
        job_type: Some("probe".into()),
        ..CreateSpec::default()
    };
    for chunk in resets.chunks(1_000) {
        centers[0]
            .reset_many("shared", chunk, Some(&create))
            .await
            .unwrap();
    }
    let mut per_runtime = [0u32; 2];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let [rx0, rx1] = &mut receivers[..] else {
        unreachable!("two runtimes")
    };
    while counts.lock().unwrap().len() < 5_000 {
        let (i, seen) = tokio::select! {
            Some(seen) = rx0.recv() => (0, seen),
            Some(seen) = rx1.recv() => (1, seen),
            () = tokio::time::sleep_until(deadline) => {
                panic!("only {} jobs ran within 30 s", counts.lock().unwrap().len())
            }
        };
        assert!(seen.fired_at >= at);
        per_runtime[i] += 1;
        *counts.lock().unwrap().entry(seen.job.id).or_default() += 1;
    }
    // Nothing more arrives: every job ran exactly once.
    quiet(300).await;
    for rx in receivers.iter_mut() {
        assert!(rx.try_recv().is_err(), "a job ran twice");
    }
    assert!(counts.lock().unwrap().values().all(|n| *n == 1));
    assert!(
        per_runtime.iter().all(|n| *n > 0),
        "both runtimes took jobs: {per_runtime:?}"
    );
    let stats = centers[0].stats("shared").await.unwrap();
    assert_eq!((stats.scheduled, stats.running), (0, 0));
    let _ = json!(null);
}

/// A slot's owner lease is taken once and not renewed while the membership stands: the
/// instance's registration (renewed every third of the 300 ms owner lease) says it lives,
/// and the lease's fence keeps any other owner's pumps out. Over ten of its rounds the
/// owner hash is not written again, and the slot still fires. (Each round renewed every
/// slot's lease: 16 writes a round per topic, the largest part of an idle topic's cost
/// after its polls.) What it cannot show: a take-over, which `tests/owners.rs` shows with
/// killed processes.
#[actix_rt::test]
async fn a_stable_membership_renews_no_slot_lease() {
    let server = RedisServer::start();
    let (c, mut rx) = redis_runtime(&server).await;
    let mut t = TopicConfig::named("t");
    t.slots = 1;
    c.put_topic(t).await.unwrap();
    let mut redis = server.conn();
    let mut owner_hash = move || -> Vec<Option<String>> {
        redis::cmd("HMGET")
            .arg("toc:{t:0}:owner")
            .arg("id")
            .arg("until")
            .arg("fence")
            .query(&mut redis)
            .unwrap()
    };
    let taken = eventually(10, || {
        let hash = owner_hash();
        async move {
            hash[0]
                .is_some()
                .then_some(hash.clone())
                .ok_or("the slot was never owned".to_string())
        }
    })
    .await;
    // An absence: ten ownership rounds (every 100 ms) pass without a write.
    quiet(1_000).await;
    assert_eq!(owner_hash(), taken, "the slot's lease was written again");
    c.schedule("t", probe_job("a", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    assert_eq!(next(&mut rx, 5).await.job.id, "a");
}

/// Two runtimes on one Redis serve a topic; one deletes it, and the other stops serving its
/// slots too (it hears the deletion as a topic notice), so neither runs a slot actor for it
/// and neither holds its settings. What it cannot show: a notice lost on the way.
#[actix_rt::test]
async fn a_topic_deleted_by_one_runtime_is_no_longer_served_by_the_other() {
    let server = RedisServer::start();
    let mut centers = Vec::new();
    for _ in 0..2 {
        centers.push(redis_runtime(&server).await.0);
    }
    centers[0].topic("doomed").await.unwrap();
    centers[1].topic("doomed").await.unwrap();
    let served = |c: &TimeoutCenter| {
        let c = c.clone();
        async move {
            c.health()
                .await
                .into_iter()
                .filter(|h| h.topic == "doomed")
                .count()
        }
    };
    eventually(10, || async {
        (served(&centers[1]).await > 0)
            .then_some(())
            .ok_or("the other runtime never served the topic".to_string())
    })
    .await;
    centers[0].delete_topic("doomed", true).await.unwrap();
    eventually(10, || async {
        (served(&centers[0]).await + served(&centers[1]).await == 0)
            .then_some(())
            .ok_or("a runtime still serves the deleted topic's slots".to_string())
    })
    .await;
    assert!(
        store_of(&centers[1])
            .find_topic("doomed")
            .await
            .unwrap()
            .is_none()
    );
}

/// A runtime polling every 100 ms whose probe runs hold until released, a one-slot topic
/// `t` with leases of `lease_ms`, and job `long` running: the runtime, the probe's runs, the
/// release, and the run.
async fn a_held_run(
    e: &Engine,
    lease_ms: u64,
) -> (
    TimeoutCenter,
    tokio::sync::mpsc::UnboundedReceiver<common::runtime::Seen>,
    Arc<tokio::sync::Notify>,
    common::runtime::Seen,
) {
    let (mut probe, mut rx) = Probe::done();
    let hold = Arc::new(tokio::sync::Notify::new());
    probe.hold = Some(hold.clone());
    let c = center(e, probe, 100).await;
    let mut t = TopicConfig::named("t");
    t.slots = 1;
    t.visibility_timeout_ms = lease_ms;
    c.put_topic(t).await.unwrap();
    c.schedule("t", probe_job("long", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    let run = next(&mut rx, 5).await;
    (c, rx, hold, run)
}

async fn a_long_run_keeps_its_lease_and_is_not_taken_over(e: Engine) {
    let (c, mut rx, hold, _) = a_held_run(&e, 300).await;
    // Three lease lengths pass while the run holds; the safety net reads the slot's head
    // every 100 ms meanwhile.
    // On the wall clock, as it must be: the lease is extended by the runtime's renewals (a
    // duration on Tokio's timer) against the store's clock, and the test samples the job
    // every 50 ms for 900 ms to see it never lapse.
    let started = now_ms();
    while now_ms() < started + 900 {
        let job = c.get("t", &"long".into()).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Running);
        assert!(
            job.lease_until.unwrap() > now_ms(),
            "the lease was not extended"
        );
        crate::common::runtime::quiet(50).await; // a look every 50 ms of real time, for 900 ms
    }
    assert!(rx.try_recv().is_err(), "a second run took the job over");
    hold.notify_one();
    events_until(&c, "t", 5, |ev| names(ev) == [kind::DONE]).await;
    assert_eq!(
        c.get("t", &"long".into())
            .await
            .unwrap()
            .map(|j| j.attempts),
        None
    );
}

/// A clock held still at an instant, whose waits run on the wall clock as the machine's
/// clocks' do (the default `Clock::until`): a slot on it pumps again and again while the
/// store's time stands still. Only the slow-store test uses it, and must: it shows that a
/// lead fixed at 2 ms never reaches a job 50 ms ahead however many pumps the slot makes.
struct Frozen(Millis);

impl timeout_center::time::Clock for Frozen {
    fn now(&self) -> Millis {
        self.0
    }
}

/// The injected clock's instant in the lead tests.
const T: Millis = 1_700_000_000_000;

/// A center on an injected clock held still at `T`, with a 100 ms lead, whose one-slot topic
/// `t` holds job `a` due at `T + 60`, once the slot has leased it ahead (it is running).
async fn a_job_leased_ahead(
    e: &Engine,
) -> (
    TimeoutCenter,
    Arc<ManualClock>,
    tokio::sync::mpsc::UnboundedReceiver<common::runtime::Seen>,
) {
    let window = timeout_center::config::Settings::defaults()
        .runtime
        .batch_window_ms;
    leased_ahead(e, window, &[("a", 60)]).await
}

/// A center on an injected clock standing at `T`, with a 100 ms lead and a batch window of
/// `window_ms`, whose one-slot topic `t` holds `jobs` (id, fire time after `T`, in order),
/// once the slot has leased them all ahead (they are running). A job whose pump time (its
/// fire time less the lead) is after `T` is leased when the clock is moved there, as it
/// would be on the machine's clock; no job is due yet when this returns.
async fn leased_ahead(
    e: &Engine,
    window_ms: u64,
    jobs: &[(&str, Millis)],
) -> (
    TimeoutCenter,
    Arc<ManualClock>,
    tokio::sync::mpsc::UnboundedReceiver<common::runtime::Seen>,
) {
    let clock = Arc::new(ManualClock::at(T));
    let (probe, rx) = Probe::done();
    let c = TimeoutCenter::builder(e.store.clone())
        .settings(RuntimeSettings {
            fire_lead_ms: 100,
            batch_window_ms: window_ms,
            ..settings(1_000)
        })
        .clock(clock.clone())
        .handler(probe)
        .start()
        .await
        .unwrap();
    one_slot_topic(&c, "t", 16).await;
    for (id, after) in jobs {
        c.schedule("t", probe_job(id, T + after), ScheduleMode::Upsert)
            .await
            .unwrap();
    }
    for (id, after) in jobs {
        let pump_at = T + after - 100;
        if pump_at > clock.now() {
            clock.set(pump_at);
        }
        eventually(10, || async {
            (state(&c, id).await == Some(JobState::Running)).then_some(()).ok_or(format!(
                "{id} (due at T + {after}) not leased ahead with a 100 ms lead and a {window_ms} ms window"
            ))
        })
        .await;
    }
    (c, clock, rx)
}

/// Job `id`'s state in topic `t`, if the store holds it.
async fn state(c: &TimeoutCenter, id: &str) -> Option<JobState> {
    c.get("t", &id.into()).await.unwrap().map(|j| j.state)
}

/// Sets the injected clock: the runtime's waits for fire times it reaches end now.
fn set(clock: &ManualClock, at: Millis) {
    clock.set(at);
}

/// Sets the injected clock to `T + after` and expects `id` handled next, fired then.
async fn fires_at(
    clock: &ManualClock,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<common::runtime::Seen>,
    id: &str,
    after: Millis,
) {
    set(clock, T + after);
    let seen = next(rx, 5).await;
    assert_eq!((seen.job.id.as_str(), seen.fired_at), (id, T + after));
}

/// Waits up to 10 s for the store to hold none of `ids` in topic `t` (settled done), or
/// fails with `why`.
async fn until_gone(c: &TimeoutCenter, ids: &[&str], why: &str) {
    for id in ids {
        eventually(10, || async {
            state(c, id)
                .await
                .is_none()
                .then_some(())
                .ok_or(why.to_string())
        })
        .await;
    }
}

/// `a` and `b` (due at `T + 60` and `T + 80`) leased ahead with a ten-minute batch window,
/// and `a` run (the clock set to its fire time): its outcome waits for `b`'s, so `a` is
/// still running in the store 300 ms after its handler returned.
async fn an_outcome_waiting(
    e: &Engine,
) -> (
    TimeoutCenter,
    Arc<ManualClock>,
    tokio::sync::mpsc::UnboundedReceiver<common::runtime::Seen>,
) {
    let (c, clock, mut rx) = leased_ahead(e, 600_000, &[("a", 60), ("b", 80)]).await;
    set(&clock, T + 60);
    assert_eq!(next(&mut rx, 5).await.job.id, "a");
    quiet(300).await;
    assert_eq!(
        state(&c, "a").await,
        Some(JobState::Running),
        "a's outcome did not wait for b's"
    );
    (c, clock, rx)
}

/// A slot's pump also leases what falls due within the batch window past its lead
/// (`runtime.batch_window_ms`), and each job so taken still fires at its own time: `b`, due
/// 150 ms out, is leased with `a` by a 100 ms lead and a 100 ms window (a pump reaching the
/// lead only would leave it scheduled), is not handled when `a` fires, and is handled when
/// the clock reaches its own fire time.
async fn a_pump_leases_its_window_and_each_job_fires_at_its_own_time(e: Engine) {
    let (_c, clock, mut rx) = leased_ahead(&e, 100, &[("a", 60), ("b", 150)]).await;
    fires_at(&clock, &mut rx, "a", 60).await;
    quiet(300).await;
    assert!(rx.try_recv().is_err(), "b was handled before its fire time");
    fires_at(&clock, &mut rx, "b", 150).await;
}

/// A finished run's outcome waits while another run of its slot is still to report (here
/// `b`, held for its fire time), and goes to the store with that one's as soon as none is
/// left: with a window far longer than the test, `a` stays running in the store after its
/// handler returned, and both are settled (done, so gone) once `b` has run, without waiting
/// for the window to close. An outcome settled at once would leave `a` running no time.
async fn a_runs_outcome_waits_for_the_slots_other_runs_and_settles_with_them(e: Engine) {
    let (c, clock, mut rx) = an_outcome_waiting(&e).await;
    set(&clock, T + 80);
    assert_eq!(next(&mut rx, 5).await.job.id, "b");
    until_gone(
        &c,
        &["a", "b"],
        "a and b were not settled once neither was left to report",
    )
    .await;
}

/// An outcome waits no longer than the batch window: `a`'s run is settled 100 ms after it
/// ended although `b`, held for a fire time the injected clock never reaches, is still to
/// report.
async fn a_runs_outcome_is_settled_when_the_window_closes(e: Engine) {
    let (c, clock, mut rx) = leased_ahead(&e, 100, &[("a", 60), ("b", 150)]).await;
    set(&clock, T + 60);
    assert_eq!(next(&mut rx, 5).await.job.id, "a");
    until_gone(&c, &["a"], "a's outcome waited past the window").await;
    assert_eq!(state(&c, "b").await, Some(JobState::Running));
    assert!(rx.try_recv().is_err(), "b was handled before its fire time");
}

/// A slot leases a job `runtime.fire_lead_ms` ahead of its fire time and holds it: the job
/// is running in the store while the runtime's clock (injected, and held still) reads before
/// its fire time, its handler has not started, and it starts once the clock reaches that
/// time, never early. What it cannot show is the store round trip this saves a fire under
/// load (`toc bench latency`).
async fn a_job_leased_ahead_is_held_until_its_fire_time(e: Engine) {
    let (_c, clock, mut rx) = a_job_leased_ahead(&e).await;
    // Held: the hold waits for the clock to reach the fire time.
    quiet(300).await;
    assert!(rx.try_recv().is_err(), "handled before its fire time");
    fires_at(&clock, &mut rx, "a", 60).await;
}

/// A job leased ahead that a shutdown gives back (its grace ended before the job's fire
/// time) is not run by the drained slot actor when its time comes: it is the store's again.
/// (The hold kept it and started it at its fire time: a run of a job given back.) On an
/// injected clock held still until after the shutdown.
async fn a_job_leased_ahead_and_given_back_by_a_shutdown_does_not_run_here(e: Engine) {
    let (c, clock, mut rx) = a_job_leased_ahead(&e).await;
    assert_eq!(
        c.shutdown(Duration::ZERO).await,
        1,
        "the held job is given back"
    );
    assert_eq!(state(&c, "a").await, Some(JobState::Scheduled));
    set(&clock, T + 60);
    // The hold's wait for the fire time ended with the move of the clock.
    quiet(300).await;
    assert!(rx.try_recv().is_err(), "a job given back ran here");
}

/// A deleted topic's due jobs never fire (its slot actors stop with it), and a topic of the
/// same name made at once after fires only its own jobs.
async fn a_deleted_topics_jobs_never_fire_and_its_successor_starts_empty(e: Engine) {
    let (probe, mut rx) = Probe::done();
    let c = center(&e, probe, 1_000).await;
    one_slot_topic(&c, "del", 3).await;
    let at = now_ms() + 300;
    for i in 0..20 {
        c.schedule(
            "del",
            probe_job(&format!("old{i}"), at),
            ScheduleMode::Upsert,
        )
        .await
        .unwrap();
    }
    let held = c.delete_topic("del", false).await.unwrap();
    assert_eq!((held.scheduled, held.running), (20, 0));
    assert!(matches!(c.stats("del").await, Err(Error::TopicNotFound(_))));
    c.schedule("del", probe_job("fresh", at + 300), ScheduleMode::Upsert)
        .await
        .unwrap();
    let seen = next(&mut rx, 5).await;
    assert_eq!(seen.job.id, "fresh", "a job of the deleted topic fired");
    let stats = c.stats("del").await.unwrap();
    assert_eq!(stats.scheduled, 0);
}

/// A slot actor halted while a finished run's outcome waits for the batch window settles
/// that outcome all the same (outside the actor, whose futures stop with it): `a`, done, is
/// not left running until its lease runs out, to run again. (`b`, held for its fire time,
/// is dropped with the actor, as any run in flight at a halt: its lease brings it back.)
async fn a_halted_slot_settles_the_outcomes_waiting_for_its_window(e: Engine) {
    let (c, _clock, _rx) = an_outcome_waiting(&e).await;
    assert!(c.halt_slot("t", 0).await);
    until_gone(
        &c,
        &["a"],
        "a's waiting outcome was dropped with the halted actor",
    )
    .await;
}

/// A shutdown settles at once the outcomes waiting for the batch window, and gives back the
/// runs held for their fire time: after it, `a` (done) is gone and `b` is scheduled again,
/// though the window (ten minutes) never closed.
async fn a_shutdown_settles_the_outcomes_waiting_for_its_window(e: Engine) {
    let (c, _clock, _rx) = an_outcome_waiting(&e).await;
    assert_eq!(
        c.shutdown(Duration::from_secs(1)).await,
        1,
        "b is given back"
    );
    assert_eq!(state(&c, "a").await, None, "a's outcome was not settled");
    assert_eq!(state(&c, "b").await, Some(JobState::Scheduled));
}

/// A job type whose runs each take 50 ms and count how many run at once.
struct Bounded {
    now: Arc<std::sync::atomic::AtomicUsize>,
    most: Arc<std::sync::atomic::AtomicUsize>,
    done: tokio::sync::mpsc::UnboundedSender<()>,
}

#[async_trait::async_trait]
impl JobHandler for Bounded {
    type Payload = serde_json::Value;

    fn job_type(&self) -> &'static str {
        "bounded"
    }

    fn concurrency(&self) -> usize {
        2
    }

    async fn handle(&self, _: JobContext<serde_json::Value>) -> Outcome {
        use std::sync::atomic::Ordering::SeqCst;
        let at_once = self.now.fetch_add(1, SeqCst) + 1;
        self.most.fetch_max(at_once, SeqCst);
        // The run's work: it must last (50 ms of real time), so that runs overlap if nothing
        // bounds them.
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.now.fetch_sub(1, SeqCst);
        let _ = self.done.send(());
        Outcome::Done
    }
}

/// A job type's `concurrency` bounds its runs at once over the whole runtime, though each
/// slot-actor thread has its own actor for the type: 12 jobs due at once over 8 slots on two
/// threads run two at a time, never more (and two do run at once).
async fn a_job_types_concurrency_bounds_its_runs_over_every_thread(e: Engine) {
    let (done, mut finished) = tokio::sync::mpsc::unbounded_channel();
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c = TimeoutCenter::builder(e.store.clone())
        .settings(RuntimeSettings {
            workers: 2,
            ..settings(1_000)
        })
        .handler(Bounded {
            now: Arc::default(),
            most: most.clone(),
            done,
        })
        .start()
        .await
        .unwrap();
    let mut t = TopicConfig::named("t");
    t.slots = 8;
    c.put_topic(t).await.unwrap();
    let at = now_ms() + 200;
    for i in 0..12 {
        c.schedule(
            "t",
            NewJob::new(format!("j{i}"), at).job_type("bounded"),
            ScheduleMode::Upsert,
        )
        .await
        .unwrap();
    }
    for _ in 0..12 {
        tokio::time::timeout(Duration::from_secs(10), finished.recv())
            .await
            .expect("every job runs within 10 s");
    }
    assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 2);
}

// Every test above that takes an engine, once per engine (see tests/common).
/// The pumps `t`'s slots have made so far.
fn pumps(c: &TimeoutCenter) -> u64 {
    c.metrics()
        .fires
        .pump_seconds
        .with_label_values(&["t"])
        .get_sample_count()
}

/// Waits until `n` slots of `t` are served here (asleep or with an actor: a slot taken
/// starts asleep, its head read from the store).
async fn served(c: &TimeoutCenter, n: usize) {
    eventually(20, || async {
        let seen = c
            .health()
            .await
            .iter()
            .filter(|h| h.topic == "t" && h.alive)
            .count();
        (seen >= n)
            .then_some(())
            .ok_or(format!("{seen} of {n} slots served"))
    })
    .await
}

/// An idle slot (its one job due in an hour) pumps nothing of its own accord: with the
/// safety net's round every 100 ms, ten rounds pass without a pump, the net having read the
/// slot's next time and found it later than the slot's own timer. (Each slot polled the
/// store itself every `runtime.poll_ms`: ten pumps here.) What it cannot show: the cost this
/// saves at scale, which `toc bench topics` measures.
async fn an_idle_slot_pumps_nothing_of_its_own_accord(e: Engine) {
    let (probe, _rx) = Probe::done();
    let c = center(&e, probe, 100).await;
    asleep_before(&c, "later", 3_600_000).await;
    let first = pumps(&c);
    // An absence: ten of the net's rounds.
    quiet(1_000).await;
    assert_eq!(pumps(&c), first, "the idle slot pumped again");
}

/// A job written with no wake notice (straight into the store, as a lost notice leaves it)
/// is found by the instance's safety net within its round and fires: the slot holds no poll
/// of its own, so nothing else would pump it before the job's hour-later neighbour.
async fn a_job_whose_notice_was_lost_is_found_by_the_safety_net(e: Engine) {
    let (probe, mut rx) = Probe::done();
    let c = center(&e, probe, 200).await;
    // Asleep (its job is an hour away): the keeper holds its next time, and the net reads
    // the slot's head for it.
    asleep_before(&c, "later", 3_600_000).await;
    let at = now_ms() + 50;
    store_of(&c)
        .schedule(
            "t",
            probe_job("unannounced", at),
            ScheduleMode::Upsert,
            now_ms(),
        )
        .await
        .unwrap();
    let seen = next(&mut rx, 5).await;
    assert_eq!(seen.job.id, "unannounced");
    assert!(seen.fired_at >= at, "fired before its time");
}

/// The health of `topic`'s slot `slot`, if served.
async fn slot_health(c: &TimeoutCenter, topic: &str, slot: u32) -> Option<SlotHealth> {
    c.health()
        .await
        .into_iter()
        .find(|h| h.topic == topic && h.slot == slot)
}

/// Waits until `topic`'s slot `slot` sleeps (no actor; served all the same).
async fn until_dormant(c: &TimeoutCenter, topic: &str, slot: u32) {
    eventually(10, || async {
        match slot_health(c, topic, slot).await {
            Some(h) if h.dormant && h.alive => Ok(()),
            other => Err(format!("not asleep: {other:?}")),
        }
    })
    .await;
}

/// The one-slot topic `t` holding only the job `id`, due in `in_ms`, once its slot sleeps.
async fn asleep_before(c: &TimeoutCenter, id: &str, in_ms: i64) {
    one_slot_topic(c, "t", 16).await;
    c.schedule("t", probe_job(id, now_ms() + in_ms), ScheduleMode::Upsert)
        .await
        .unwrap();
    until_dormant(c, "t", 0).await;
}

/// A slot at rest whose job is further ahead than `runtime.dormant_after_ms` (1 s) sleeps:
/// its actor stops, `/health` shows it served and dormant, and the keeper starts a new actor
/// at its next time: the job fires at its time, not before, and not a poll later. Then,
/// asleep again with its next job an hour away, a job scheduled for sooner (a notice) wakes
/// it. What it cannot show: the memory this saves, which `toc bench topics` measures.
async fn a_sleeping_slot_wakes_at_its_next_time_and_at_a_notice(e: Engine) {
    let (probe, mut rx) = Probe::done();
    // The safety net's round every minute: only the keeper's timer and notices wake it.
    let c = center(&e, probe, 60_000).await;
    one_slot_topic(&c, "t", 16).await;
    let at = now_ms() + 2_500;
    c.schedule("t", probe_job("later", at), ScheduleMode::Upsert)
        .await
        .unwrap();
    until_dormant(&c, "t", 0).await;
    let seen = next(&mut rx, 10).await;
    assert_eq!(seen.job.id, "later");
    assert!(seen.fired_at >= at, "fired before its time");
    assert!(
        seen.fired_at < at + 1_000,
        "fired {} ms late: the sleeping slot was not started at its time",
        seen.fired_at - at
    );
    c.schedule(
        "t",
        probe_job("in an hour", now_ms() + 3_600_000),
        ScheduleMode::Upsert,
    )
    .await
    .unwrap();
    until_dormant(&c, "t", 0).await;
    let at = now_ms() + 300;
    c.schedule("t", probe_job("soon", at), ScheduleMode::Upsert)
        .await
        .unwrap();
    let seen = next(&mut rx, 5).await;
    assert_eq!(seen.job.id, "soon");
    assert!(seen.fired_at >= at, "fired before its time");
}

/// A slot whose next job is within `runtime.dormant_after_ms` (1 s) keeps its actor, or is
/// given one at once: from a notice of a job due in 700 ms (the slot asleep, its next job an
/// hour away) to that job's fire, `/health` never shows the slot asleep (a busy slot pays no
/// restart per job).
async fn a_slot_with_a_job_within_the_horizon_keeps_its_actor(e: Engine) {
    let (probe, rx) = Probe::done();
    let c = center(&e, probe, 60_000).await;
    asleep_before(&c, "in an hour", 3_600_000).await;
    let at = now_ms() + 700;
    c.schedule("t", probe_job("soon", at), ScheduleMode::Upsert)
        .await
        .unwrap();
    // The notice reaches the keeper before the next look.
    eventually(5, || async {
        match slot_health(&c, "t", 0).await {
            Some(h) if !h.dormant => Ok(()),
            other => Err(format!("still asleep: {other:?}")),
        }
    })
    .await;
    let rx = std::cell::RefCell::new(rx);
    crate::common::runtime::eventually(5, || async {
        if let Ok(seen) = rx.borrow_mut().try_recv() {
            assert_eq!(seen.job.id, "soon");
            return Ok(());
        }
        let h = slot_health(&c, "t", 0).await.expect("the slot is served");
        assert!(!h.dormant, "a slot with a job due within the horizon slept");
        Err(format!("the job due at {at} never fired"))
    })
    .await;
}

/// A center whose safety net reads one slot per 100 ms round (a sweep of 600 s over the
/// topic's slots: each of 64 slots read every 6.4 s), with a topic of `slots` slots.
async fn slow_sweep_center(e: &Engine, probe: Probe, slots: u32) -> TimeoutCenter {
    sweep_center(
        e,
        probe,
        slots,
        RuntimeSettings {
            safety_net_ms: 600_000,
            ..settings(100)
        },
    )
    .await
}

/// A center with `settings` and a topic of `slots` slots.
async fn sweep_center(
    e: &Engine,
    probe: Probe,
    slots: u32,
    settings: RuntimeSettings,
) -> TimeoutCenter {
    let c = TimeoutCenter::builder(e.store.clone())
        .settings(settings)
        .handler(probe)
        .start()
        .await
        .unwrap();
    let mut t = TopicConfig::named("t");
    t.slots = slots;
    c.put_topic(t).await.unwrap();
    c
}

/// An id whose slot among `slots` is in the upper half: the sweep, walking the slots in
/// order one a round from the first, reaches none of them within the test.
fn id_in_upper_half(prefix: &str, slots: u32) -> String {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .find(|id| slot_of(id, slots) >= slots / 2)
        .unwrap()
}

/// A job due after the safety net's round but before its sweep comes round is told to its
/// slot by the writer, not left to the sweep: with a round of 100 ms and a sweep of 600 s
/// over 64 slots, a job due in 1.5 s in a slot the sweep reaches only after 3 s fires on
/// time. (The writer told only of jobs due within one round, when every slot was read each
/// round.) What it cannot show: a notice lost on its way, which the next tests cover.
async fn a_job_due_before_the_sweep_comes_round_is_told_to_its_slot(e: Engine) {
    let (probe, mut rx) = Probe::done();
    let c = slow_sweep_center(&e, probe, 64).await;
    // Every slot served (its head read: it would find the job), and the net's full rounds after
    // the listener's first subscription over.
    served(&c, 64).await;
    quiet(1_000).await;
    let at = now_ms() + 1_500;
    let id = id_in_upper_half("soon", 64);
    c.schedule("t", probe_job(&id, at), ScheduleMode::Upsert)
        .await
        .unwrap();
    let seen = next(&mut rx, 3).await;
    assert_eq!(seen.job.id, id);
    assert!(seen.fired_at >= at, "fired before its time");
}

/// The sweep's reads are bounded (`runtime.safety_net_reads_per_s`), so it may take far
/// longer than `safety_net_ms`: a writer tells of every new head however far ahead. With a
/// nominal sweep of 300 ms but one read a second over 64 slots (a real sweep of 64 s), a job
/// due in 1.5 s in a slot the sweep reaches only after 32 s fires on time. (The writer once
/// left a job due after the nominal sweep to the sweep.)
async fn a_job_due_after_the_nominal_sweep_is_told_when_reads_slow_the_sweep(e: Engine) {
    let (probe, mut rx) = Probe::done();
    let c = sweep_center(
        &e,
        probe,
        64,
        RuntimeSettings {
            safety_net_ms: 300,
            safety_net_reads_per_s: 1,
            ..settings(100)
        },
    )
    .await;
    served(&c, 64).await;
    quiet(1_000).await;
    let at = now_ms() + 1_500;
    let id = id_in_upper_half("far", 64);
    c.schedule("t", probe_job(&id, at), ScheduleMode::Upsert)
        .await
        .unwrap();
    let seen = next(&mut rx, 4).await;
    assert_eq!(seen.job.id, id);
    assert!(seen.fired_at >= at, "fired before its time");
}

/// The job `id` of topic `t` (or its absence) once `done` holds for it, within 5 s.
async fn job_once(c: &TimeoutCenter, id: &str, done: impl Fn(Option<&Job>) -> bool) -> Option<Job> {
    eventually(5, || async {
        let job = c.get("t", &id.into()).await.unwrap();
        if done(job.as_ref()) {
            Ok(job)
        } else {
            Err(format!("{id}: not yet: {job:?}"))
        }
    })
    .await
}

fn misfired(c: &TimeoutCenter) -> u64 {
    c.metrics().fires.misfired.with_label_values(&["t"]).get()
}

/// `expire_after_ms` (issue 49): a one-shot job that fires later than that after its
/// `fire_at` is not run: dead with a `last_error` saying it expired, or gone with
/// `on_expire: drop`; one within it runs. The fire times are set in the past, so each job is
/// as late as an outage would make it, with no waiting. What it cannot show: a stop of every
/// instance (the fire is late for whatever reason; the rule looks only at how late).
async fn a_job_past_its_expiry_is_not_run(e: Engine) {
    let (probe, mut rx) = Probe::done();
    let c = center(&e, probe, 100).await;
    one_slot_topic(&c, "t", 16).await;
    let now = now_ms();
    let jobs = [
        probe_job("stale", now - 5_000).expire_after(1_000, OnExpire::Dead),
        probe_job("dropped", now - 5_000).expire_after(1_000, OnExpire::Drop),
        probe_job("in time", now - 100).expire_after(60_000, OnExpire::Dead),
    ];
    for j in jobs {
        c.schedule("t", j, ScheduleMode::Upsert).await.unwrap();
    }
    let seen = next(&mut rx, 5).await;
    assert_eq!(seen.job.id, "in time");
    let stale = job_once(&c, "stale", |j| {
        j.is_some_and(|j| j.state == JobState::Dead)
    })
    .await;
    let stale = stale.unwrap();
    let error = stale.last_error.unwrap_or_default();
    assert!(error.starts_with("expired"), "{error}");
    assert_eq!(stale.expire_after_ms, Some(1_000));
    job_once(&c, "dropped", |j| j.is_none()).await;
    assert_eq!(misfired(&c), 2);
    // Neither expired job reached the handler.
    quiet(200).await;
    assert!(rx.try_recv().is_err(), "an expired job ran");
}

/// `repeat.catchup_window_ms` (issue 49): a recurring fire whose latest missed instant is
/// older than the window is skipped (not run; `last_error` says so) and the series waits for
/// its next instant; within the window the late fire runs once, as without it.
async fn a_recurring_fire_past_its_catchup_window_is_skipped(e: Engine) {
    let (probe, mut rx) = Probe::done();
    let c = center(&e, probe, 100).await;
    one_slot_topic(&c, "t", 16).await;
    let now = now_ms();
    let hourly = |window| {
        Recurrence::every(Duration::from_secs(3_600))
            .unwrap()
            .with_series(Series {
                catchup_window_ms: Some(window),
                ..Series::default()
            })
            .unwrap()
    };
    // Ten minutes late: past a 1-minute window, within a 1-hour one.
    let missed = now - 600_000;
    c.schedule(
        "t",
        probe_job("skipped", missed).repeat(hourly(60_000)),
        ScheduleMode::Upsert,
    )
    .await
    .unwrap();
    c.schedule(
        "t",
        probe_job("caught up", missed).repeat(hourly(3_600_000)),
        ScheduleMode::Upsert,
    )
    .await
    .unwrap();
    let seen = next(&mut rx, 5).await;
    assert_eq!(seen.job.id, "caught up");
    let skipped = job_once(&c, "skipped", |j| j.is_some_and(|j| j.fire_at > missed)).await;
    let skipped = skipped.unwrap();
    assert_eq!(
        (skipped.state, skipped.fire_at),
        (JobState::Scheduled, missed + 3_600_000),
        "the series waits for its next instant"
    );
    let error = skipped.last_error.unwrap_or_default();
    assert!(error.starts_with("skipped"), "{error}");
    assert_eq!(misfired(&c), 1);
    quiet(200).await;
    assert!(rx.try_recv().is_err(), "the skipped fire ran");
}

engine_matrix!(
    #[actix_rt::test] crate::common::Engine::of;
    a_job_past_its_expiry_is_not_run,
    a_recurring_fire_past_its_catchup_window_is_skipped,
    an_idle_slot_pumps_nothing_of_its_own_accord,
    a_job_due_before_the_sweep_comes_round_is_told_to_its_slot,
    a_job_due_after_the_nominal_sweep_is_told_when_reads_slow_the_sweep,
    a_job_whose_notice_was_lost_is_found_by_the_safety_net,
    a_job_fires_on_time_and_never_before_its_fire_at,
    an_earlier_job_wakes_its_slot_without_waiting_for_the_poll,
    a_failed_run_retries_with_backoff_then_succeeds,
    a_job_that_keeps_failing_goes_dead_with_its_last_error,
    new_topic_settings_reach_running_slot_actors,
    a_repeating_job_runs_again_after_its_interval,
    a_reset_during_a_run_fires_the_job_again_at_the_reset_time,
    a_panicking_handler_is_retried_and_the_slot_actor_survives,
    a_handler_that_hangs_past_its_timeout_is_retried,
    a_job_of_a_type_no_instance_runs_waits_unserved,
    the_slot_keeper_restarts_a_slot_actor_that_stopped,
    shutdown_gives_back_a_long_runs_lease_and_it_runs_on_the_next_start,
    a_long_run_keeps_its_lease_and_is_not_taken_over,
    a_deleted_topics_jobs_never_fire_and_its_successor_starts_empty,
    a_job_leased_ahead_is_held_until_its_fire_time,
    a_topic_made_a_pull_topic_lets_its_runs_settle,
    a_job_leased_ahead_and_given_back_by_a_shutdown_does_not_run_here,
    a_pump_leases_its_window_and_each_job_fires_at_its_own_time,
    a_runs_outcome_waits_for_the_slots_other_runs_and_settles_with_them,
    a_runs_outcome_is_settled_when_the_window_closes,
    a_job_types_concurrency_bounds_its_runs_over_every_thread,
    a_halted_slot_settles_the_outcomes_waiting_for_its_window,
    a_shutdown_settles_the_outcomes_waiting_for_its_window,
    a_sleeping_slot_wakes_at_its_next_time_and_at_a_notice,
    a_slot_with_a_job_within_the_horizon_keeps_its_actor,
);

/// A slot whose owner lease another instance holds now (as when this one was stalled past
/// its registration, and the other took the slot over) is given up as a handoff is, once
/// this instance learns of it: a pump (here woken by a job scheduled meanwhile) is refused
/// by the new fence, the next ownership round finds the lease held, and the run still in its
/// handler is given back when the drain's grace ends, so the slot's new owner can run the
/// job at once. (The actor was halted, its run dropped with it, and the job left running
/// until its 60 s lease ran out.) A lease held is not renewed, so nothing tells an idle
/// slot's actor of the takeover before its next pump. What it cannot show: that the other
/// instance then runs it; the owner here is a name written into the owner hash, with no
/// process behind it.
#[actix_rt::test]
async fn a_slot_another_instance_took_over_gives_its_runs_back_not_a_lease_later() {
    let e = Engine::redis().await;
    let (c, _rx, hold, _run) = a_held_run(&e, 60_000).await;
    let _: () = redis::cmd("HSET")
        .arg("toc:{t:0}:owner")
        .arg("id")
        .arg("elsewhere")
        .arg("until")
        .arg(now_ms() + 600_000)
        .arg("fence")
        .arg(1_000)
        .query(&mut e.redis.as_ref().unwrap().conn())
        .unwrap();
    c.schedule("t", probe_job("woken", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    // The pump it wakes is fenced; the next ownership round (every third of the 5 s owner
    // lease) finds the slot held.
    eventually(15, || async {
        let job = c.get("t", &"long".into()).await.unwrap().unwrap();
        (job.state == JobState::Scheduled)
            .then_some(())
            .ok_or(format!("the run was left running: {job:?}"))
    })
    .await;
    hold.notify_one();
}

/// A slot this instance owns again under a new owner lease (another instance held it between
/// two of this one's ownership rounds: here a name written into the owner hash, its lease
/// already over) goes on with the same slot actor under the new fence: the run in its
/// handler settles when it ends, and the slot pumps on. (The keeper halted the actor and
/// started another: the run's outcome was dropped, and the job stayed running until its
/// 60 s lease ran out.) A lease held is not renewed, so the takeover is learnt at the next
/// pump (here woken by a job scheduled meanwhile), which the fence refuses; the next
/// ownership round takes the run-out lease. What it cannot show: a real second instance's
/// runs in between.
#[actix_rt::test]
async fn a_slot_owned_again_under_a_new_fence_keeps_its_runs() {
    let e = Engine::redis().await;
    let (c, mut rx, hold, _run) = a_held_run(&e, 60_000).await;
    let _: () = redis::cmd("HSET")
        .arg("toc:{t:0}:owner")
        .arg("id")
        .arg("elsewhere")
        .arg("until")
        .arg(now_ms() - 1)
        .arg("fence")
        .arg(1_000)
        .query(&mut e.redis.as_ref().unwrap().conn())
        .unwrap();
    c.schedule("t", probe_job("woken", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    // The pump it wakes is fenced; the next ownership round (every third of the 5 s owner
    // lease) takes the run-out lease: fence 1001, and the woken job runs under it.
    eventually(15, || async {
        let health = c.health().await;
        health
            .iter()
            .any(|h| (h.topic.as_str(), h.slot, h.fence) == ("t", 0, 1_001))
            .then_some(())
            .ok_or(format!("the slot was not owned again: {health:?}"))
    })
    .await;
    assert_eq!(next(&mut rx, 5).await.job.id, "woken");
    hold.notify_one();
    hold.notify_one();
    events_until(&c, "t", 5, |ev| names(ev) == [kind::DONE, kind::DONE]).await;
    assert!(c.get("t", &"long".into()).await.unwrap().is_none());
    assert!(c.get("t", &"woken".into()).await.unwrap().is_none());
    // And the slot pumps under its new fence.
    c.schedule("t", probe_job("next", now_ms()), ScheduleMode::Upsert)
        .await
        .unwrap();
    hold.notify_one();
    assert_eq!(next(&mut rx, 5).await.job.id, "next");
}

/// A topic made a pull topic while a run is in its handler hands its slots off: the run
/// settles when it ends (within the drain's grace), and no slot actor pumps the topic after.
/// (The keeper halted the slot actors: the run's outcome was dropped, and the job stayed
/// running until its 60 s lease ran out.)
async fn a_topic_made_a_pull_topic_lets_its_runs_settle(e: Engine) {
    let (c, _rx, hold, _run) = a_held_run(&e, 60_000).await;
    let mut t = (*c.topic("t").await.unwrap()).clone();
    t.default_type = "pull".into();
    c.put_topic(t).await.unwrap();
    eventually(10, || async {
        (!c.health().await.iter().any(|h| h.topic == "t"))
            .then_some(())
            .ok_or("the pull topic's slots are still served".to_string())
    })
    .await;
    hold.notify_one();
    events_until(&c, "t", 5, |ev| names(ev) == [kind::DONE]).await;
    assert!(c.get("t", &"long".into()).await.unwrap().is_none());
}

/// A run whose lease ran out while it ran (here its deadline is moved to the past in Redis,
/// as an outage past the lease would leave it) is leased again by the next pump, to the same
/// slot actor, while the first still runs. When the first ends, the second stays the slot's
/// to extend and to give back: a shutdown gives its lease back. (The first run's end took
/// the second's entry out of the slot's running map, and the shutdown gave back nothing.)
/// What it cannot show: the same on the memory engine, whose leases a test cannot move.
#[actix_rt::test]
async fn a_run_that_ends_after_its_job_was_leased_again_leaves_the_new_run_held() {
    let e = Engine::redis().await;
    let (c, mut rx, hold, first) = a_held_run(&e, 30_000).await;
    // The lease (30 s) runs out now: the safety net sees the slot's head move before its
    // timer and wakes it, and the pump takes the job back and leases it again.
    let _: i64 = redis::cmd("ZADD")
        .arg("toc:{t:0}:run")
        .arg("XX")
        .arg("CH")
        .arg(1)
        .arg("long")
        .query(&mut e.redis.as_ref().unwrap().conn())
        .unwrap();
    let second = next(&mut rx, 5).await;
    assert_eq!((first.job.attempts, second.job.attempts), (1, 2));
    // The first run (the longest waiting) ends, its outcome stale. The shutdown waits up to
    // its grace for the slot's runs to end: the second never does, so the grace runs out
    // and its lease is given back. Had the first run's end dropped the second from the
    // slot's runs, the shutdown would have found none left and given back nothing.
    hold.notify_one();
    assert_eq!(c.shutdown(Duration::from_secs(1)).await, 1);
    let job = c.get("t", &"long".into()).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Scheduled);
}

/// Starts `builder`'s center with a one-slot topic `t`, as `edit` leaves it.
async fn with_one_slot_t(
    builder: TimeoutCenterBuilder,
    edit: impl FnOnce(&mut TopicConfig),
) -> TimeoutCenter {
    let c = builder.start().await.unwrap();
    let mut t = TopicConfig::named("t");
    t.slots = 1;
    edit(&mut t);
    c.put_topic(t).await.unwrap();
    c
}

/// A store on `server` through a loopback proxy that adds `delay_ms` to every round trip
/// (`common::delay`; the proxy's threads live as long as the test process).
async fn behind_a_delay(server: &RedisServer, delay_ms: u64) -> Store {
    let upstream = format!("127.0.0.1:{}", server.port).parse().unwrap();
    let proxy = common::delay::DelayProxy::start(upstream, Duration::from_millis(delay_ms))
        .expect("start the delay proxy");
    Store::redis(&proxy.redis_url(), StoreOptions::default())
        .await
        .expect("connect through the proxy")
}

/// What a slot leases ahead behind a store that answers slowly, on a Redis to which a loopback
/// proxy adds 60 ms to every round trip (`common::delay`): a center with a 2 ms lead, no batch window,
/// and the runtime's clock injected and held still at `T`, whose one-slot topic holds `a`
/// due at `T + 50`, its visibility timeout `visibility_ms`. Returns whether `a` was leased
/// ahead (running) within 3 s, and how many pumps the slot made.
async fn leased_ahead_behind_a_slow_store(lead_max_ms: u64, visibility_ms: u64) -> (bool, u64) {
    let server = RedisServer::start();
    let store = behind_a_delay(&server, 60).await;
    let clock = Arc::new(Frozen(T));
    let (probe, _rx) = Probe::done();
    let builder = TimeoutCenter::builder(Arc::new(store))
        .settings(RuntimeSettings {
            fire_lead_ms: 2,
            fire_lead_max_ms: lead_max_ms,
            batch_window_ms: 0,
            ..settings(1_000)
        })
        .clock(clock)
        .handler(probe);
    let c = with_one_slot_t(builder, |t| t.visibility_timeout_ms = visibility_ms).await;
    c.schedule("t", probe_job("a", T + 50), ScheduleMode::Upsert)
        .await
        .unwrap();
    let leased = toc_testkit::wait::holds_within(3, || async {
        state(&c, "a").await == Some(JobState::Running)
    })
    .await;
    let pumps = c
        .metrics()
        .fires
        .pump_seconds
        .with_label_values(&["t"])
        .get_sample_count();
    c.shutdown(Duration::ZERO).await;
    (leased, pumps)
}

/// A slot's lead follows a slow store's round trip, up to `runtime.fire_lead_max_ms` and a
/// tenth of the topic's visibility timeout: with every round trip 60 ms longer, a job due 50 ms
/// ahead of the (held) clock is leased ahead under a 2 ms lead that may grow to 100 ms, and
/// is not under one fixed at 2 ms, nor in a topic whose 300 ms visibility timeout keeps the
/// lead within 30 ms, though those slots pumped over and over meanwhile. (Before the lead
/// followed the round trip, the first case failed as the second.) What it cannot show: the
/// lateness this saves behind a slow Redis (`toc bench latency --redis-delay-ms`,
/// BENCHMARKS.md); the runs of `tests/fire_path.rs` show no job leased ahead fires early.
#[actix_rt::test]
async fn a_slow_stores_round_trip_lengthens_the_lead_up_to_its_maximum() {
    let (leased, _) = leased_ahead_behind_a_slow_store(100, 30_000).await;
    assert!(
        leased,
        "not leased 50 ms ahead behind 60 ms round trips, with the lead free to grow to 100 ms"
    );
    let (leased, pumps) = leased_ahead_behind_a_slow_store(2, 30_000).await;
    assert!(!leased, "leased 50 ms ahead with the lead fixed at 2 ms");
    assert!(
        pumps >= 5,
        "the fixed-lead slot pumped {pumps} times in 3 s"
    );
    let (leased, pumps) = leased_ahead_behind_a_slow_store(100, 300).await;
    assert!(
        !leased,
        "leased 50 ms ahead with a 300 ms visibility timeout (the lead at most 30 ms)"
    );
    assert!(pumps >= 5, "the slot pumped {pumps} times in 3 s");
}

/// A slot given up while its pump is in flight (at a shutdown, or a handoff to another
/// instance) waits for that pump's answer: the runs it leased run, or go back to the store,
/// rather than stay leased to no one until their lease runs out (the visibility timeout,
/// 30 s by default). On a Redis behind a proxy that adds 400 ms to each round trip, the
/// shutdown (grace 0) comes once Redis itself shows `a`, due now, leased by the slot's pump:
/// the pump's answer is still 200 ms away. `a`'s run never ends (the probe holds it), so the shutdown
/// gives it back. (Before, the drain found no run in flight, gave back nothing, and stopped
/// the actor: `a` stayed running, leased to no one. Three instances joining a burst's drain
/// left about 3,000 such runs for 30 s: `toc bench cluster`.) What it cannot show: the same
/// on the memory engine, whose pumps answer before a shutdown can come between.
#[actix_rt::test]
async fn a_shutdown_waits_for_the_pump_in_flight_and_gives_back_what_it_leased() {
    let server = RedisServer::start();
    let store = behind_a_delay(&server, 400).await;
    let (mut probe, _rx) = Probe::done();
    probe.hold = Some(Arc::new(tokio::sync::Notify::new())); // never released
    let builder = TimeoutCenter::builder(Arc::new(store))
        .settings(RuntimeSettings {
            owner_lease_ms: 60_000,
            ..settings(500)
        })
        .handler(probe);
    let c = with_one_slot_t(builder, |_| {}).await;
    served(&c, 1).await;
    // Scheduled on Redis itself, with no notice: the safety net's next round (every 500 ms)
    // wakes the slot (an actor starts for it), which leases it.
    let direct = Store::redis(&server.url(), StoreOptions::default())
        .await
        .unwrap();
    direct
        .schedule(
            "t",
            probe_job("a", now_ms()),
            ScheduleMode::Upsert,
            now_ms(),
        )
        .await
        .unwrap();
    // Seen on Redis itself, not through the proxy: once the pump has leased `a`, its answer
    // is half a round trip (200 ms) away.
    let redis = std::cell::RefCell::new(server.conn());
    eventually(10, || async {
        let leased: Option<f64> = redis::cmd("ZSCORE")
            .arg("toc:{t:0}:run")
            .arg("a")
            .query(&mut *redis.borrow_mut())
            .unwrap();
        leased.map(|_| ()).ok_or("a was never leased".to_string())
    })
    .await;
    assert_eq!(
        c.shutdown(Duration::ZERO).await,
        1,
        "the run the pump in flight leased was not given back"
    );
    assert_eq!(state(&c, "a").await, Some(JobState::Scheduled));
}

/// A job that comes due while the pump leasing it is in flight is counted as fired after
/// its pump (`toc_jobs_fired_after_their_pump_total`): on a Redis behind a proxy that adds
/// 60 ms to each round trip, with the lead fixed at 20 ms and no batch window, the slot pumps
/// for `a` 20 ms before its fire time and has the answer about 40 ms after it. (With a 2 ms
/// lead, a slot timer held 2 ms late by a loaded machine asked after the fire time, and the
/// job was rightly not counted: the test failed under a parallel build.) What it cannot
/// show: that a pump answering within its lead counts nothing (on a shared machine a stall
/// can hold any pump past its lead); `tests/http.rs` shows the counter among the metrics.
#[actix_rt::test]
async fn a_job_due_while_its_pump_is_in_flight_counts_as_fired_after_its_pump() {
    let server = RedisServer::start();
    let store = behind_a_delay(&server, 60).await;
    let (probe, mut rx) = Probe::done();
    let builder = TimeoutCenter::builder(Arc::new(store))
        .settings(RuntimeSettings {
            fire_lead_ms: 20,
            fire_lead_max_ms: 20,
            batch_window_ms: 0,
            ..settings(60_000)
        })
        .handler(probe);
    // The topic names the probe's type from the start: the first job of a type it does not
    // name yet costs two more round trips (the topic read afresh and written with the
    // type), 120 ms here, which would pass `a`'s fire time before its write.
    let c = with_one_slot_t(builder, |t| t.types = vec!["probe".into()]).await;
    let after = || {
        c.metrics()
            .fires
            .fired_after_pump
            .with_label_values(&["t"])
            .get()
    };
    assert_eq!(after(), 0);
    c.schedule("t", probe_job("a", now_ms() + 500), ScheduleMode::Upsert)
        .await
        .unwrap();
    let seen = next(&mut rx, 5).await;
    assert_eq!(seen.job.id, "a");
    assert_eq!(after(), 1, "a came due while its pump was in flight");
    c.shutdown(Duration::ZERO).await;
}

/// Wake notices published while the listener's connection was down are lost; a listener
/// that connects again says so, and the safety net reads every slot's head at once. Here a
/// job is written straight into Redis (no notice, as a lost one leaves it) in a slot the
/// sweep (one slot of 1,024 a round) would reach only after a minute or more; it stays
/// unfired for a second, then the service's pub/sub connection is killed (`CLIENT KILL TYPE
/// pubsub`), and the job fires within the reconnection. What it cannot show: a notice lost in
/// flight on a Cluster, whose connection resubscribes by itself and says only that it lost
/// its connection.
#[actix_rt::test]
async fn a_listener_that_connects_again_has_every_slot_read_at_once() {
    let e = Engine::redis().await;
    let (probe, mut rx) = Probe::done();
    let c = slow_sweep_center(&e, probe, 1_024).await;
    // Every slot served (its head read), and the net's full rounds after the listener's
    // first subscription over.
    served(&c, 1_024).await;
    quiet(1_000).await;
    let id = id_in_upper_half("unannounced", 1_024);
    let at = now_ms();
    store_of(&c)
        .schedule("t", probe_job(&id, at), ScheduleMode::Upsert, now_ms())
        .await
        .unwrap();
    // An absence: ten rounds of the net, none reaching the job's slot.
    quiet(1_000).await;
    assert!(rx.try_recv().is_err(), "the sweep reached the slot");
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut e.redis.as_ref().unwrap().conn())
        .unwrap();
    assert!(killed >= 1, "no pub/sub connection to kill");
    let seen = next(&mut rx, 5).await;
    assert_eq!(seen.job.id, id);
}

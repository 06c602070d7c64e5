//! Slot doubling without moving data, on both engines: a doubling moves no job, every job is
//! found while old copies remain, nothing fires early or twice, no reset is lost (resets
//! arriving around and between doublings included), and a sweep tells when the old slots
//! hold no old copy. Time is passed as `now`; nothing sleeps.

#[macro_use]
mod common;
use common::door;

use std::collections::{BTreeMap, HashSet};

use rand::{Rng, SeedableRng};
use serde_json::json;
use timeout_center::conformance::*;
use timeout_center::*;

use common::Engine;

const T0: Millis = 1_700_000_000_000;

fn topic(name: &str, slots: u32) -> TopicConfig {
    TopicConfig {
        slots,
        visibility_timeout_ms: 60_000,
        ..TopicConfig::named(name)
    }
}

async fn double(s: &Store, name: &str) -> std::sync::Arc<TopicConfig> {
    let t = s.existing_topic(name).await.unwrap();
    s.put_topic(TopicConfig {
        slots: t.slots * 2,
        ..(*t).clone()
    })
    .await
    .unwrap()
}

async fn per_slot(s: &Store, name: &str) -> Vec<u64> {
    let stats = s.stats(name).await.unwrap();
    stats.per_slot.iter().map(|x| x.scheduled).collect()
}

/// Pumps every slot at `now`; every job handed out is checked against `model` (the fire
/// time its last write gave it) and acknowledged.
async fn fire_due(
    s: &Store,
    name: &str,
    now: Millis,
    model: &mut BTreeMap<String, Millis>,
    fired: &mut HashSet<String>,
) {
    let t = s.existing_topic(name).await.unwrap();
    for slot in 0..t.slots {
        let p = door(s, name, slot, 0)
            .await
            .pump(now, 100_000)
            .await
            .unwrap();
        for run in p.jobs {
            let id = run.job.id.clone();
            let Some(expected) = model.remove(&id) else {
                panic!(
                    "{id} fired at {now} in slot {slot}, but no live job has that id (fired twice, or an old copy fired)"
                );
            };
            assert_eq!(
                run.job.fire_at, expected,
                "{id} fired from a stale time (a reset lost)"
            );
            assert!(
                expected <= now,
                "{id} fired early: due {expected}, now {now}"
            );
            assert!(fired.insert(id.clone()), "{id} fired twice");
            let done = door(s, name, run.slot, 0)
                .await
                .finish(&run, RunOutcome::Done, now)
                .await
                .unwrap();
            assert_eq!(done, Finished::Done, "{id}");
        }
    }
}

async fn a_doubling_moves_no_job_and_finds_every_job_in_its_old_slot(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic("d", 4)).await.unwrap();
    for i in 0..400 {
        let job = NewJob::new(format!("j{i}"), T0 + 1_000 + i)
            .job_type("webhook")
            .payload(json!({"url": format!("http://x/{i}")}));
        s.schedule("d", job, ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    let before = per_slot(s, "d").await;
    let t = double(s, "d").await;
    assert_eq!((t.slots, t.draining_from), (8, Some(4)));
    let after = per_slot(s, "d").await;
    assert_eq!(&after[..4], &before[..], "no job moved");
    assert_eq!(&after[4..], &[0, 0, 0, 0], "the new slots start empty");
    for i in 0..400 {
        let got = s.get("d", &JobRef::new(format!("j{i}"))).await.unwrap();
        let got = got.unwrap_or_else(|| panic!("j{i} not found after the doubling"));
        assert_eq!(got.fire_at, T0 + 1_000 + i);
        assert_eq!(got.payload, json!({"url": format!("http://x/{i}")}));
        assert_eq!(got.created_at, Some(T0));
    }
    // Creating a job that exists in an old slot finds it there.
    let again = NewJob::new("j7", T0 + 99_999);
    let r = s
        .schedule("d", again, ScheduleMode::CreateOnly, T0)
        .await
        .unwrap();
    assert_eq!(r.outcome, ScheduleOutcome::Exists);
    // A job that moves home on a reset keeps its definition and its creation time, and
    // leaves no copy behind.
    let moved: Vec<String> = (0..400)
        .map(|i| format!("j{i}"))
        .filter(|id| slot_of(id, 8) >= 4)
        .collect();
    assert!(!moved.is_empty());
    for id in &moved {
        let r = s
            .schedule(
                "d",
                NewJob::new(id.clone(), T0 + 5_000),
                ScheduleMode::ResetOnly,
                T0 + 1,
            )
            .await
            .unwrap();
        assert_eq!(
            (r.outcome, r.slot),
            (ScheduleOutcome::Reset, slot_of(id, 8))
        );
        let got = s.get("d", &JobRef::new(id.clone())).await.unwrap().unwrap();
        assert_eq!((got.fire_at, got.created_at), (T0 + 5_000, Some(T0)));
        assert_eq!(got.job_type, "webhook");
    }
    let total: u64 = per_slot(s, "d").await.iter().sum();
    assert_eq!(total, 400, "a moved job leaves no old copy");
    // Cancelling finds old copies too.
    assert_eq!(
        s.cancel("d", &JobRef::new("j0")).await.unwrap(),
        Some(JobState::Scheduled)
    );
    assert_eq!(s.get("d", &JobRef::new("j0")).await.unwrap(), None);
}

/// Random writes around two doublings (4 → 8 → 16), with time moving and slots pumped
/// throughout: every job fires exactly once, at the time of its last write, never before.
async fn writes_around_doublings_fire_once_never_early_and_lose_no_reset(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic("w", 4)).await.unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    // Ordered, so that the seeded picks below are the same in every run.
    let mut model: BTreeMap<String, Millis> = BTreeMap::new();
    let mut fired = HashSet::new();
    let mut now = T0;
    let mut next_id = 0;
    for step in 0..60 {
        if step == 15 || step == 35 {
            double(s, "w").await;
        }
        // New jobs, some with payloads.
        for _ in 0..40 {
            let id = format!("n{next_id}");
            next_id += 1;
            let at = now + rng.random_range(1..3_000);
            let mut job = NewJob::new(id.clone(), at);
            if rng.random_bool(0.3) {
                job = job.payload(json!({"n": next_id}));
            }
            s.schedule("w", job, ScheduleMode::Upsert, now)
                .await
                .unwrap();
            model.insert(id, at);
        }
        // Heartbeats: a batch of resets of live jobs, some creating jobs that never were.
        let live: Vec<String> = model.keys().cloned().collect();
        let mut resets = Vec::new();
        let picked: Vec<&String> = live.iter().filter(|_| rng.random_bool(0.3)).collect();
        for id in picked {
            let at = now + rng.random_range(1..3_000);
            resets.push(Reset::new(id.clone(), at));
        }
        for _ in 0..5 {
            let id = format!("h{next_id}");
            next_id += 1;
            resets.push(Reset::new(id, now + rng.random_range(1..3_000)));
        }
        let create = CreateSpec::default();
        let report = s
            .reset_many("w", &resets, Some(&create), now)
            .await
            .unwrap();
        assert_eq!(report.missing, Vec::<String>::new());
        assert_eq!(report.reset + report.created, resets.len() as u64);
        for r in &resets {
            model.insert(r.job.id.clone(), r.fire_at);
        }
        // Single resets, replaces and cancels of live jobs.
        let live: Vec<String> = model.keys().cloned().collect();
        let picked: Vec<&String> = live.iter().filter(|_| rng.random_bool(0.05)).collect();
        for id in picked {
            let at = now + rng.random_range(1..3_000);
            let r = s
                .schedule(
                    "w",
                    NewJob::new(id.clone(), at),
                    ScheduleMode::ResetOnly,
                    now,
                )
                .await
                .unwrap();
            assert_eq!(r.outcome, ScheduleOutcome::Reset, "{id}");
            model.insert(id.clone(), at);
        }
        let picked: Vec<&String> = live.iter().filter(|_| rng.random_bool(0.05)).collect();
        for id in picked {
            let at = now + rng.random_range(1..3_000);
            let job = NewJob::new(id.clone(), at).payload(json!("replaced"));
            let r = s
                .schedule("w", job, ScheduleMode::Upsert, now)
                .await
                .unwrap();
            assert_eq!(r.outcome, ScheduleOutcome::Replaced, "{id}");
            model.insert(id.clone(), at);
        }
        for id in live.iter().filter(|_| rng.random_bool(0.03)) {
            if model.contains_key(id) {
                let was = s.cancel("w", &JobRef::new(id.clone())).await.unwrap();
                assert_eq!(was, Some(JobState::Scheduled), "{id}");
                model.remove(id);
            }
        }
        now += rng.random_range(50..400);
        fire_due(s, "w", now, &mut model, &mut fired).await;
        // Everything not yet fired is found, at the time of its last write.
        if step % 10 == 9 {
            for (id, at) in &model {
                let got = s.get("w", &JobRef::new(id.clone())).await.unwrap();
                assert_eq!(got.map(|j| j.fire_at), Some(*at), "{id}");
            }
        }
    }
    let t = s.existing_topic("w").await.unwrap();
    assert_eq!((t.slots, t.draining_from), (16, Some(4)));
    while !model.is_empty() {
        now += 500;
        fire_due(s, "w", now, &mut model, &mut fired).await;
        assert!(now < T0 + 1_000_000, "jobs never fired: {:?}", model.keys());
    }
    let stats = s.stats("w").await.unwrap();
    assert_eq!(
        (stats.scheduled, stats.running),
        (0, 0),
        "an old copy was left"
    );
    assert!(fired.len() > 2_000, "{}", fired.len());
}

async fn a_reset_of_an_old_copy_that_is_running_applies_after_its_run(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic("r", 1)).await.unwrap();
    // With one slot, every job is in slot 0; one whose home becomes slot 1 is an old copy.
    let id = (0..)
        .map(|i| format!("run{i}"))
        .find(|id| slot_of(id, 2) == 1)
        .unwrap();
    s.schedule(
        "r",
        NewJob::new(id.clone(), T0 + 10),
        ScheduleMode::Upsert,
        T0,
    )
    .await
    .unwrap();
    let run = door(s, "r", 0, 0)
        .await
        .pump(T0 + 10, 10)
        .await
        .unwrap()
        .jobs
        .pop()
        .unwrap();
    double(s, "r").await;
    let r = s
        .schedule(
            "r",
            NewJob::new(id.clone(), T0 + 5_000),
            ScheduleMode::ResetOnly,
            T0 + 20,
        )
        .await
        .unwrap();
    assert_eq!(
        (r.outcome, r.state, r.slot),
        (ScheduleOutcome::Reset, Some(JobState::Running), 0)
    );
    let done = door(s, "r", run.slot, 0)
        .await
        .finish(&run, RunOutcome::Done, T0 + 30)
        .await
        .unwrap();
    assert_eq!(done, Finished::Rescheduled);
    let got = s.get("r", &JobRef::new(id.clone())).await.unwrap().unwrap();
    assert_eq!((got.state, got.fire_at), (JobState::Scheduled, T0 + 5_000));
    // It fires once, at the reset's time, from wherever it is.
    for slot in 0..2 {
        assert!(
            door(s, "r", slot, 0)
                .await
                .pump(T0 + 4_999, 10)
                .await
                .unwrap()
                .jobs
                .is_empty()
        );
    }
    let mut runs = Vec::new();
    for slot in 0..2 {
        runs.extend(
            door(s, "r", slot, 0)
                .await
                .pump(T0 + 5_000, 10)
                .await
                .unwrap()
                .jobs,
        );
    }
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].job.id, id);
}

async fn a_reset_that_moves_a_fired_job_home_reports_its_rearm(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic("a", 1)).await.unwrap();
    let id = (0..)
        .map(|i| format!("dev{i}"))
        .find(|id| slot_of(id, 2) == 1)
        .unwrap();
    let job = NewJob::new(id.clone(), T0 + 10).job_type("device_offline");
    s.schedule("a", job, ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let run = door(s, "a", 0, 0)
        .await
        .pump(T0 + 10, 10)
        .await
        .unwrap()
        .jobs
        .pop()
        .unwrap();
    let out = RunOutcome::Repeat {
        at: T0 + 1_000,
        error: None,
    };
    assert_eq!(
        door(s, "a", run.slot, 0)
            .await
            .finish(&run, out, T0 + 11)
            .await
            .unwrap(),
        Finished::Repeating
    );
    double(s, "a").await;
    let report = s
        .reset_many("a", &[Reset::new(id.clone(), T0 + 60_000)], None, T0 + 20)
        .await
        .unwrap();
    assert_eq!((report.reset, report.missing.len()), (1, 0));
    assert_eq!(
        report.rearmed.len(),
        1,
        "the repeat before the reset is reported"
    );
    assert_eq!(
        (report.rearmed[0].id.as_str(), report.rearmed[0].fires),
        (id.as_str(), 1)
    );
    assert_eq!(per_slot(s, "a").await, vec![0, 1], "the job moved home");
}

async fn a_consumer_settles_a_job_claimed_from_an_old_copy(e: Engine) {
    let s = &*e.store;
    let pull = TopicConfig {
        default_type: "pull".into(),
        ..topic("p", 1)
    };
    s.put_topic(pull).await.unwrap();
    let ids: Vec<String> = (0..40).map(|i| format!("c{i}")).collect();
    for id in &ids {
        s.schedule("p", NewJob::new(id.clone(), T0), ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    let claimed = door(s, "p", 0, 0)
        .await
        .claim(T0, 100, 10_000)
        .await
        .unwrap()
        .jobs;
    assert_eq!(claimed.len(), 40);
    double(s, "p").await;
    let (first, rest) = claimed.split_at(1);
    assert!(
        s.touch(
            "p",
            &first[0].job.id.as_str().into(),
            first[0].token,
            T0 + 20_000
        )
        .await
        .unwrap()
    );
    let acks: Vec<ClaimOutcome> = claimed
        .iter()
        .map(|l| ClaimOutcome {
            job: JobRef::new(l.job.id.clone()),
            token: l.token,
            outcome: Outcome::Done,
        })
        .collect();
    let done = s.settle_claims("p", &acks, T0 + 1).await.unwrap();
    assert!(done.iter().all(|f| *f == Finished::Done), "{done:?}");
    assert!(!rest.is_empty());
    let stats = s.stats("p").await.unwrap();
    assert_eq!((stats.scheduled, stats.running), (0, 0));
}

async fn only_a_doubling_changes_the_slot_count(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic("g", 16)).await.unwrap();
    for slots in [8, 64, 128, 1] {
        let err = s.put_topic(topic("g", slots)).await.unwrap_err();
        assert!(matches!(err, Error::TopicConflict { .. }), "{slots}: {err}");
        assert!(err.to_string().contains("double"), "{err}");
    }
    assert_eq!(s.existing_topic("g").await.unwrap().slots, 16);
    let t = double(s, "g").await;
    assert_eq!((t.slots, t.draining_from), (32, Some(16)));
    // A change of other settings keeps the mark; a second doubling keeps the oldest layout.
    let t = s
        .put_topic(TopicConfig {
            max_attempts: 3,
            ..topic("g", 32)
        })
        .await
        .unwrap();
    assert_eq!((t.max_attempts, t.draining_from), (3, Some(16)));
    let t = double(s, "g").await;
    assert_eq!((t.slots, t.draining_from), (64, Some(16)));
    // Nothing was ever scheduled: the sweep finds no old copy.
    assert_eq!(s.sweep("g").await.unwrap(), None);
    let t = s.existing_topic("g").await.unwrap();
    assert_eq!((t.slots, t.draining_from), (64, None));
}

async fn a_sweep_marks_the_topic_drained_once_no_old_copy_is_left(e: Engine) {
    let s = &*e.store;
    s.put_topic(topic("s", 2)).await.unwrap();
    let ids: Vec<String> = (0..200).map(|i| format!("s{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let at = T0 + 100 + i as Millis;
        s.schedule("s", NewJob::new(id.clone(), at), ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    double(s, "s").await;
    assert_eq!(s.sweep("s").await.unwrap(), Some(2), "old copies are left");
    // Jobs written after the doubling are at home: not old copies.
    for i in 0..50 {
        let id = format!("new{i}");
        s.schedule("s", NewJob::new(id, T0 + 50_000), ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    let mut model: BTreeMap<String, Millis> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.clone(), T0 + 100 + i as Millis))
        .collect();
    let mut fired = HashSet::new();
    fire_due(s, "s", T0 + 1_000, &mut model, &mut fired).await;
    assert!(model.is_empty());
    assert_eq!(s.sweep("s").await.unwrap(), None);
    assert_eq!(s.existing_topic("s").await.unwrap().draining_from, None);
    assert_eq!(s.stats("s").await.unwrap().scheduled, 50);
}

engine_matrix!(
    #[tokio::test] crate::common::Engine::of;
    a_doubling_moves_no_job_and_finds_every_job_in_its_old_slot,
    writes_around_doublings_fire_once_never_early_and_lose_no_reset,
    a_reset_of_an_old_copy_that_is_running_applies_after_its_run,
    a_reset_that_moves_a_fired_job_home_reports_its_rearm,
    a_consumer_settles_a_job_claimed_from_an_old_copy,
    only_a_doubling_changes_the_slot_count,
    a_sweep_marks_the_topic_drained_once_no_old_copy_is_left,
);

#[tokio::test]
async fn a_doubling_survives_a_restart_of_the_journaled_memory_engine() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toc.journal");
    let open = || {
        Store::open_memory(
            StoreOptions::default(),
            Some((&path, config::FsyncPolicy::Always)),
        )
        .unwrap()
    };
    let s = open();
    s.put_topic(topic("j", 2)).await.unwrap();
    for i in 0..20 {
        let job = NewJob::new(format!("k{i}"), T0 + 100);
        s.schedule("j", job, ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    double(&s, "j").await;
    s.schedule(
        "j",
        NewJob::new("after", T0 + 100),
        ScheduleMode::Upsert,
        T0,
    )
    .await
    .unwrap();
    drop(s);
    let s = open();
    let t = s.existing_topic("j").await.unwrap();
    assert_eq!((t.slots, t.draining_from), (4, Some(2)));
    for i in 0..20 {
        assert!(
            s.get("j", &JobRef::new(format!("k{i}")))
                .await
                .unwrap()
                .is_some()
        );
    }
    assert!(s.get("j", &JobRef::new("after")).await.unwrap().is_some());
}

/// The same random writes around two doublings on a real three-primary Redis Cluster, where
/// a job's old and new slots live on different nodes, so moving it home is two scripts on
/// two nodes.
#[tokio::test]
async fn writes_around_doublings_on_a_redis_cluster() {
    let cluster = common::RedisCluster::start();
    let store = Store::redis_cluster(&cluster.urls(), StoreOptions::default())
        .await
        .expect("connect to the cluster");
    let e = Engine {
        store: std::sync::Arc::new(store),
        redis: None,
        memory: None,
    };
    writes_around_doublings_fire_once_never_early_and_lose_no_reset(e).await;
    drop(cluster);
}

/// Settings changes decided on the count before a doubling, racing it, must not write that
/// count back: jobs written to the new slots would be looked for in the wrong slot.
#[tokio::test]
async fn a_settings_change_racing_a_doubling_never_undoes_it() {
    let e = Engine::redis().await;
    for round in 0..20 {
        let name = format!("race{round}");
        e.store.put_topic(topic(&name, 16)).await.unwrap();
        let (s, n) = (e.store.clone(), name.clone());
        let grow = tokio::spawn(async move { s.put_topic(topic(&n, 32)).await });
        let changes: Vec<_> = (0..10)
            .map(|i| {
                let (s, name) = (e.store.clone(), name.clone());
                tokio::spawn(async move {
                    let change = TopicConfig {
                        max_attempts: 1 + i,
                        ..topic(&name, 16)
                    };
                    let _ = s.put_topic(change).await;
                })
            })
            .collect();
        for c in changes {
            c.await.unwrap();
        }
        let grown = grow.await.unwrap();
        let stored = e.store.topics().await.unwrap();
        let stored = stored.iter().find(|t| t.name == name).unwrap();
        if grown.is_ok() {
            assert_eq!(stored.slots, 32, "round {round}: the doubling was undone");
        }
    }
}

/// A seed names the count a topic started with; opening the service again after the topic
/// doubled keeps the doubled count (and applies the seed's other settings).
#[tokio::test]
async fn a_seeded_topic_that_has_doubled_keeps_its_slots_when_the_service_opens_again() {
    let redis = common::RedisServer::start();
    let mut settings = config::Settings::defaults();
    settings.store = config::StoreKind::Redis;
    settings.redis.url = redis.url();
    settings.topics.seed = vec![TopicConfig {
        slots: 4,
        max_attempts: 5,
        ..TopicConfig::named("seeded")
    }];
    let s = serve::open_store(&settings).await.unwrap();
    double(&s, "seeded").await;
    settings.topics.seed[0].max_attempts = 7;
    let s = serve::open_store(&settings)
        .await
        .expect("the doubled seed opens");
    let t = s.existing_topic("seeded").await.unwrap();
    assert_eq!((t.slots, t.max_attempts, t.draining_from), (8, 7, Some(4)));
}

/// Instances over one Redis (stores, each with its own cache of topic settings): one
/// doubles the topic; each of the others read the settings before. A stale one never writes
/// a job to the slot the old count gives it (its write is refused and routed anew), and
/// finds, resets and cancels jobs written to their new slots.
#[tokio::test]
async fn an_instance_that_missed_a_doubling_routes_with_the_new_count() {
    let redis = common::RedisServer::start();
    let open = || async {
        let s = Store::redis(&redis.url(), StoreOptions::default())
            .await
            .unwrap();
        std::sync::Arc::new(s)
    };
    let a = open().await;
    a.put_topic(topic("m", 4)).await.unwrap();
    // Four instances that read the settings before the doubling, one per check.
    let mut stale = Vec::new();
    for _ in 0..4 {
        let s = open().await;
        assert_eq!(s.existing_topic("m").await.unwrap().slots, 4);
        stale.push(s);
    }
    double(&a, "m").await;
    let moved: Vec<String> = (0..)
        .map(|i| format!("m{i}"))
        .filter(|id| slot_of(id, 8) != slot_of(id, 4))
        .take(20)
        .collect();
    // A stale writer.
    let job = NewJob::new(moved[0].clone(), T0 + 1_000);
    let r = stale[0]
        .schedule("m", job, ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    assert_eq!(
        (r.outcome, r.slot),
        (ScheduleOutcome::Created, slot_of(&moved[0], 8))
    );
    for id in &moved[1..] {
        let job = NewJob::new(id.clone(), T0 + 1_000);
        a.schedule("m", job, ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    // A stale reader.
    let got = stale[1]
        .get("m", &JobRef::new(moved[1].clone()))
        .await
        .unwrap();
    assert_eq!(got.map(|j| j.fire_at), Some(T0 + 1_000));
    // Stale heartbeats: every job is reset where it lives, none created a second time.
    let beats: Vec<Reset> = moved
        .iter()
        .map(|id| Reset::new(id.clone(), T0 + 2_000))
        .collect();
    let r = stale[2]
        .reset_many("m", &beats, Some(&CreateSpec::default()), T0 + 1)
        .await
        .unwrap();
    assert_eq!((r.reset, r.created), (20, 0));
    let per = per_slot(&a, "m").await;
    for id in &moved {
        assert_eq!(
            per[slot_of(id, 4) as usize],
            0,
            "an old slot got a copy of {id}: {per:?}"
        );
    }
    assert_eq!(per.iter().sum::<u64>(), 20);
    // A stale cancel.
    let c = stale[3]
        .cancel("m", &JobRef::new(moved[2].clone()))
        .await
        .unwrap();
    assert_eq!(c, Some(JobState::Scheduled));
}

//! Many idle topics, with real `toc serve` processes (issue 48). A slot with nothing due holds
//! no timer and polls nothing: what wakes it is a wake notice from the writer, its own pump's
//! answer, or the instance's one safety net that sweeps the slots' heads. These tests show,
//! among 2,000 idle topics (32,000 slots) spread over two instances on one Redis, that a job
//! in any topic fires on time (the notice reaches whichever instance owns its slot), that a
//! job written with no notice at all is found by the sweep, and that a killed instance's
//! slots are taken over within two owner leases and their jobs fire; and, on both engines,
//! that a process killed with SIGKILL and started again fires a job written before the kill
//! when it comes due, with no notice and no wait for the sweep.
//!
//! What they cannot show: the cost of idle topics (`toc bench topics` measures it), nor a
//! notice lost inside Redis' pub/sub (a job written straight to the store stands for it).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;
use timeout_center::conformance::RuntimeOps;
use timeout_center::{NewJob, ScheduleMode, Store, StoreOptions, slot_of};

use common::RedisServer;
use common::process::{Skew, Toc, redis_env};

const TOPICS: usize = 2_000;
const SLOTS: usize = 16;
const LEASE_MS: u64 = 1_000;
/// The sweep reads every slot's head once in this span.
const NET_MS: u64 = 10_000;

fn topic(i: usize) -> String {
    format!("idle-{i}")
}

/// The settings of these tests' instances: no cap on topics, short leases, a 10 s sweep
/// (its reads raised from the default 200 a second, at which 16,000 slots take 80 s).
fn settings(store: Vec<(&'static str, String)>) -> Vec<(&'static str, String)> {
    let mut env = store;
    env.extend([
        ("TOC_LIMITS_MAX_TOPICS", "0".to_string()),
        ("TOC_LIMITS_MAX_TOTAL_SLOTS", "0".to_string()),
        ("TOC_TOPICS_DEFAULTS_SLOTS", SLOTS.to_string()),
        ("TOC_RUNTIME_OWNER_LEASE_MS", LEASE_MS.to_string()),
        ("TOC_RUNTIME_SAFETY_NET_MS", NET_MS.to_string()),
        ("TOC_RUNTIME_SAFETY_NET_READS_PER_S", "5000".to_string()),
        ("RUST_LOG", "warn".to_string()),
    ]);
    env
}

/// Makes `n` topics with one job each due in an hour, through the instances in turn, 32
/// requests in flight.
async fn idle_topics(http: &reqwest::Client, instances: &[&Toc], n: usize) {
    let fire_at = common::now_ms_u64() + 3_600_000;
    futures_util::stream::iter(0..n)
        .map(|i| {
            let req = http
                .put(
                    instances[i % instances.len()]
                        .url(&format!("/v1/topics/{}/jobs/idle", topic(i))),
                )
                .json(&json!({"fire_at": fire_at}));
            async move {
                // A PUT is idempotent: sent again when a kept-alive connection was closed as
                // it went out (hyper's IncompleteMessage, seen once in a loaded test run).
                let mut tries = 0;
                let r = loop {
                    match req.try_clone().expect("a plain body").send().await {
                        Ok(r) => break r,
                        Err(e) if tries < 3 && e.is_request() => tries += 1,
                        Err(e) => panic!("{e}"),
                    }
                };
                assert!(
                    matches!(r.status().as_u16(), 200 | 201),
                    "{}",
                    r.text().await.unwrap()
                );
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
}

/// The live slots each instance serves, as (topic, slot), or `None` while it does not answer.
async fn served(http: &reqwest::Client, i: &Toc) -> Option<Vec<(String, u64)>> {
    let slots = common::process::served_slots(http, &i.url("")).await?;
    Some(
        slots
            .iter()
            .filter(|s| s["alive"] == true)
            .map(|s| {
                (
                    s["topic"].as_str().unwrap().to_string(),
                    s["slot"].as_u64().unwrap(),
                )
            })
            .collect(),
    )
}

/// Waits until `instances` serve every slot of the `TOPICS` topics, each exactly once and
/// every instance some; answers the owner of each slot and how long it took.
async fn settled(
    http: &reqwest::Client,
    instances: &[&Toc],
    within: Duration,
) -> (HashMap<(String, u64), String>, Duration) {
    let start = Instant::now();
    loop {
        let mut owner: HashMap<(String, u64), String> = HashMap::new();
        let mut twice = 0;
        let mut per: BTreeMap<String, usize> = BTreeMap::new();
        for i in instances {
            for s in served(http, i).await.unwrap_or_default() {
                if !s.0.starts_with("idle-") {
                    continue;
                }
                *per.entry(i.name.clone()).or_default() += 1;
                if owner.insert(s, i.name.clone()).is_some() {
                    twice += 1;
                }
            }
        }
        if owner.len() == TOPICS * SLOTS && twice == 0 && per.len() == instances.len() {
            return (owner, start.elapsed());
        }
        if start.elapsed() >= within {
            let logs: Vec<String> = instances
                .iter()
                .map(|i| {
                    let log = i.log_text();
                    let tail: String = log.lines().rev().take(30).collect::<Vec<_>>().join("\n");
                    format!("{} (last lines, newest first):\n{tail}", i.name)
                })
                .collect();
            panic!(
                "the slots did not settle within {within:?}: {} of {} served, {twice} twice, per instance {per:?}; logs:\n{}",
                owner.len(),
                TOPICS * SLOTS,
                logs.join("\n")
            );
        }
        // A poll, every 200 ms of real time, of what the instances serve: each reads every
        // slot of 1,000 topics, too much for `eventually`'s pace; on a timeout the panic
        // above carries the instances' logs.
        crate::common::runtime::quiet(200).await;
    }
}

/// The `job.fired` events of `topic` whose job id starts with `prefix`: (id, fire_at,
/// fired_at).
async fn fired(
    http: &reqwest::Client,
    i: &Toc,
    topic: &str,
    prefix: &str,
) -> Vec<(String, u64, u64)> {
    let page = i
        .get_json(http, &format!("/v1/topics/{topic}/events?limit=1000"))
        .await;
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "job.fired")
        .filter(|e| e["job_id"].as_str().unwrap().starts_with(prefix))
        .map(|e| {
            (
                e["job_id"].as_str().unwrap().to_string(),
                e["fire_at"].as_u64().unwrap(),
                e["fired_at"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Waits until each of `jobs` (topic, id) has fired, asking `i`; answers each one's
/// (fire_at, fired_at).
async fn all_fired(
    http: &reqwest::Client,
    i: &Toc,
    jobs: &[(String, String)],
    within: Duration,
) -> HashMap<(String, String), (u64, u64)> {
    crate::common::runtime::eventually(within.as_secs().max(1), || async {
        let mut seen = HashMap::new();
        for (t, id) in jobs {
            for (fid, at, fired_at) in fired(http, i, t, id).await {
                if &fid == id {
                    seen.insert((t.clone(), fid), (at, fired_at));
                }
            }
        }
        if seen.len() == jobs.len() {
            return Ok(seen);
        }
        let missing: Vec<_> = jobs.iter().filter(|j| !seen.contains_key(*j)).collect();
        Err(format!("not fired: {missing:?}; log: {}", i.log_text()))
    })
    .await
}

/// Asserts none fired early and answers the greatest lateness (ms).
fn latest(seen: &HashMap<(String, String), (u64, u64)>) -> u64 {
    for (job, (at, fired_at)) in seen {
        assert!(fired_at >= at, "{job:?} fired {} ms early", at - fired_at);
    }
    seen.values().map(|(at, f)| f - at).max().unwrap_or(0)
}

/// Two instances on one Redis share 2,000 idle topics' 32,000 slots. A job in any of 20
/// topics spread over them, written through either instance (so half the notices cross to
/// the other instance), fires on time, as does a new topic's first job; a job written
/// straight to the store, with no notice, is found by the sweep; one instance killed with
/// SIGKILL has its slots taken over within two owner leases, and the jobs due in them fire.
#[tokio::test]
async fn two_instances_with_2000_idle_topics_fire_on_time_catch_a_lost_notice_and_take_over() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let env = settings(redis_env(redis.url()));
    let a = Toc::start("toc-a", &env, Skew::None, dir.path()).await;
    let b = Toc::start("toc-b", &env, Skew::None, dir.path()).await;
    let http = reqwest::Client::new();
    let made = Instant::now();
    idle_topics(&http, &[&a, &b], TOPICS).await;
    eprintln!("made {TOPICS} topics in {:?}", made.elapsed());
    let (owner, took) = settled(&http, &[&a, &b], Duration::from_secs(120)).await;
    eprintln!(
        "their {} slots settled over both instances in {took:?}",
        owner.len()
    );

    // On time: 20 topics spread over the 2,000, written through each instance in turn, and a
    // topic made now. Were a notice not heard, its job would wait for the sweep: a random
    // share of 10 s each, so all 21 within 3 s does not happen by chance.
    let sample: Vec<usize> = (0..20).map(|k| k * 97 % TOPICS).collect();
    let due = common::now_ms_u64() + 2_000;
    let mut jobs = Vec::new();
    for (k, &i) in sample.iter().enumerate() {
        let via = if k % 2 == 0 { &a } else { &b };
        via.put_job(&http, &topic(i), "soon", &json!({"fire_at": due}))
            .await;
        jobs.push((topic(i), "soon".to_string()));
    }
    b.put_job(&http, "brand-new", "first", &json!({"fire_at": due}))
        .await;
    jobs.push(("brand-new".to_string(), "first".to_string()));
    let seen = all_fired(&http, &a, &jobs, Duration::from_secs(30)).await;
    let late = latest(&seen);
    eprintln!("21 jobs among idle topics fired at most {late} ms late");
    assert!(
        late < 3_000,
        "a job fired {late} ms late: it waited for the sweep"
    );

    // A lost notice: jobs written by another process straight to the store, which tells no
    // instance. Only the sweep can find them: within one sweep (10 s), with room for a debug
    // build on a loaded machine.
    let store = Store::redis(&redis.url(), StoreOptions::default())
        .await
        .unwrap();
    let due = common::now_ms() + 500;
    let mut unannounced = Vec::new();
    for k in 0..5 {
        let t = topic(k * 389 % TOPICS);
        store
            .schedule(
                &t,
                NewJob::new("unannounced", due),
                ScheduleMode::Upsert,
                common::now_ms(),
            )
            .await
            .unwrap();
        unannounced.push((t, "unannounced".to_string()));
    }
    let seen = all_fired(&http, &a, &unannounced, Duration::from_millis(3 * NET_MS)).await;
    eprintln!(
        "5 jobs written with no notice fired at most {} ms late (the sweep takes {NET_MS} ms)",
        latest(&seen)
    );

    // A kill: jobs due 3 s from now in 10 topics whose slot for them toc-b owns and 10 that
    // toc-a owns, written through toc-a, then toc-b killed with SIGKILL.
    let slot = u64::from(slot_of("after-kill", SLOTS as u32));
    let mut of_b = Vec::new();
    let mut of_a = Vec::new();
    for i in 0..TOPICS {
        let mine = if owner[&(topic(i), slot)] == "toc-b" {
            &mut of_b
        } else {
            &mut of_a
        };
        if mine.len() < 10 {
            mine.push(i);
        }
    }
    let due = common::now_ms_u64() + 3_000;
    let mut after = Vec::new();
    for &i in of_b.iter().chain(&of_a) {
        a.put_job(&http, &topic(i), "after-kill", &json!({"fire_at": due}))
            .await;
        after.push((topic(i), "after-kill".to_string()));
    }
    let bs = owner.values().filter(|o| *o == "toc-b").count();
    common::process::signal(b.pid(), "KILL");
    let killed = Instant::now();
    settled(&http, &[&a], Duration::from_secs(60)).await;
    let took = killed.elapsed();
    eprintln!("toc-b's {bs} slots were taken over by toc-a after {took:?} (lease {LEASE_MS} ms)");
    // A debug build asking for 16,000 slots and starting their actors on two shared cores
    // takes seconds beyond the two leases (5 to 10 s seen while the suite ran beside it): the
    // bound rules out a take-over that waited for something unbounded. The release figure
    // is `toc bench topics`'s.
    assert!(
        took < Duration::from_millis(2 * LEASE_MS + 30_000),
        "the killed instance's slots were taken over after {took:?}"
    );
    let seen = all_fired(&http, &a, &after, Duration::from_secs(30)).await;
    eprintln!(
        "20 jobs due after the kill (10 in toc-b's slots) fired at most {} ms late",
        latest(&seen)
    );
    drop(b);
}

/// One process with 500 idle topics and jobs in 10 of them due 6 s out, killed with SIGKILL
/// and started again under the same name: the jobs fire when due (a random share of the
/// 10 s sweep for each of 10 jobs would not keep all within 3 s), though nothing told the
/// new process of them.
async fn a_restarted_process_fires_what_was_written_before_the_kill(
    store: Vec<(&'static str, String)>,
) {
    const N: usize = 500;
    let dir = tempfile::tempdir().unwrap();
    let env = settings(store);
    let toc = Toc::start("toc", &env, Skew::None, dir.path()).await;
    let http = reqwest::Client::new();
    idle_topics(&http, &[&toc], N).await;
    let due = common::now_ms_u64() + 6_000;
    let jobs: Vec<(String, String)> = (0..10)
        .map(|k| (topic(k * 47 % N), "later".to_string()))
        .collect();
    for (t, id) in &jobs {
        toc.put_job(&http, t, id, &json!({"fire_at": due})).await;
    }
    common::process::signal(toc.pid(), "KILL");
    drop(toc);
    let toc = Toc::start("toc", &env, Skew::None, dir.path()).await;
    let up = common::now_ms_u64();
    let seen = all_fired(&http, &toc, &jobs, Duration::from_secs(30)).await;
    latest(&seen);
    let late = seen
        .values()
        .map(|(at, fired_at)| fired_at - (*at).max(up))
        .max()
        .unwrap();
    eprintln!(
        "restarted {} ms before the jobs were due; they fired at most {late} ms after the later of due and restarted",
        due as i64 - up as i64
    );
    assert!(late < 3_000, "a job fired {late} ms late after the restart");
}

#[tokio::test]
async fn redis_a_restarted_process_fires_what_was_written_before_the_kill() {
    let redis = RedisServer::start();
    a_restarted_process_fires_what_was_written_before_the_kill(redis_env(redis.url())).await;
}

#[tokio::test]
async fn memory_a_restarted_process_fires_what_was_written_before_the_kill() {
    let journal = tempfile::tempdir().unwrap();
    a_restarted_process_fires_what_was_written_before_the_kill(vec![
        ("TOC_STORE", "memory".to_string()),
        (
            "TOC_MEMORY_JOURNAL",
            journal
                .path()
                .join("journal")
                .to_string_lossy()
                .into_owned(),
        ),
    ])
    .await;
}

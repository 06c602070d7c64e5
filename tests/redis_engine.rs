//! What only the Redis engine has: scripts that are functions of one library (or called by
//! SHA where Redis has no functions), the
//! record encoding that keeps plain jobs to their sorted-set entry, and a topic sharded
//! across a real Redis Cluster.

mod common;
use common::door;

use std::collections::HashSet;

use serde_json::json;
use timeout_center::Store;
use timeout_center::conformance::*;
use timeout_center::store::Ownership;
use timeout_center::*;

use common::{Engine, RedisCluster};

const T0: Millis = 1_700_000_000_000;

/// Calls of each command in Redis' `INFO commandstats` (0 when never called).
fn command_calls(conn: &mut redis::Connection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// The names of the function libraries Redis holds, with their functions.
fn libraries(conn: &mut redis::Connection) -> Vec<(String, Vec<String>)> {
    let list: Vec<redis::Value> = redis::cmd("FUNCTION").arg("LIST").query(conn).unwrap();
    list.iter()
        .map(|library| {
            let fields: std::collections::HashMap<String, redis::Value> =
                redis::FromRedisValue::from_redis_value(library.clone()).unwrap();
            let name: String =
                redis::FromRedisValue::from_redis_value(fields["library_name"].clone()).unwrap();
            let functions: Vec<std::collections::HashMap<String, redis::Value>> =
                redis::FromRedisValue::from_redis_value(fields["functions"].clone()).unwrap();
            let functions = functions
                .iter()
                .map(|f| redis::FromRedisValue::from_redis_value(f["name"].clone()).unwrap())
                .collect();
            (name, functions)
        })
        .collect()
}

/// Each call is an FCALL of one function library, which the first call loads: no script
/// is sent or run by SHA. (What this cannot show: that FCALL costs Redis less; `toc bench`
/// measures that.)
#[tokio::test]
async fn the_scripts_are_functions_of_one_library_that_the_first_call_loads() {
    let e = Engine::redis().await;
    let s = &*e.store;
    let mut conn = e.redis.as_ref().unwrap().conn();
    assert!(libraries(&mut conn).is_empty());
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    s.reset_many("t", &[Reset::new("a", T0 + 5)], None, T0)
        .await
        .unwrap();
    assert_eq!(
        s.get("t", &"a".into()).await.unwrap().unwrap().fire_at,
        T0 + 5
    );
    let libraries = libraries(&mut conn);
    assert_eq!(libraries.len(), 1, "{libraries:?}");
    let (name, functions) = &libraries[0];
    assert!(name.starts_with("toc_"), "{name}");
    for script in ["schedule", "reset_many", "get", "pump", "settle"] {
        assert!(
            functions.contains(&format!("{name}_{script}")),
            "{functions:?}"
        );
    }
    assert!(command_calls(&mut conn, "fcall") >= 3);
    assert_eq!(command_calls(&mut conn, "evalsha"), 0);
    assert_eq!(command_calls(&mut conn, "eval"), 0);
}

/// A node without the library (here after FUNCTION FLUSH; in production a new Cluster
/// primary, or a replica promoted before the load reached it) answers "Function not
/// found", and the call loads the library and goes on.
#[tokio::test]
async fn a_flushed_function_library_is_loaded_again_by_the_next_call() {
    let e = Engine::redis().await;
    let s = &*e.store;
    let mut conn = e.redis.as_ref().unwrap().conn();
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query(&mut conn)
        .unwrap();
    s.schedule("t", NewJob::new("b", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let report = s
        .reset_many("t", &[Reset::new("a", T0 + 5)], None, T0)
        .await
        .unwrap();
    assert_eq!(report.reset, 1);
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query(&mut conn)
        .unwrap();
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(got.fire_at, T0 + 5);
    assert_eq!(s.stats("t").await.unwrap().scheduled, 2);
    assert_eq!(libraries(&mut conn).len(), 1);
    assert_eq!(command_calls(&mut conn, "evalsha"), 0);
}

/// On a Redis without FCALL (before 7.0; here FCALL renamed away) every call runs its
/// script by SHA, loaded again after NOSCRIPT (a flushed script cache or a failed-over
/// node), and the jobs fire as on functions.
#[tokio::test]
async fn without_fcall_the_scripts_run_by_sha_and_are_reloaded_after_a_script_flush() {
    let server = common::RedisServer::start_with(&["--rename-command", "FCALL", ""]);
    let s = Store::redis(&server.url(), StoreOptions::default())
        .await
        .unwrap();
    s.put_topic(TopicConfig {
        slots: 1,
        ..TopicConfig::named("t")
    })
    .await
    .unwrap();
    s.schedule("t", NewJob::new("a", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let mut conn = server.conn();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
    // Every script is gone; each call loads its script again and goes on.
    s.schedule("t", NewJob::new("b", T0), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let report = s
        .reset_many("t", &[Reset::new("a", T0 + 5)], None, T0)
        .await
        .unwrap();
    assert_eq!(report.reset, 1);
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(got.fire_at, T0 + 5);
    assert_eq!(s.stats("t").await.unwrap().scheduled, 2);
    let runs = door(&s, "t", 0, 0)
        .await
        .pump(T0 + 10, 10)
        .await
        .unwrap()
        .jobs;
    assert_eq!(runs.len(), 2);
    let done: Vec<Settlement> = runs
        .into_iter()
        .map(|run| Settlement::new(run, RunOutcome::Done, T0 + 11))
        .collect();
    door(&s, "t", 0, 0)
        .await
        .settle(&done, T0 + 11)
        .await
        .unwrap();
    assert_eq!(s.stats("t").await.unwrap().running, 0);
    assert!(s.get("t", &"a".into()).await.unwrap().is_none());
    assert!(command_calls(&mut conn, "evalsha") >= 5);
    assert!(libraries(&mut conn).is_empty());
}

/// The outcome and its events are one step: when the event append fails, the job is not
/// acknowledged; it stays running and comes back when its lease runs out.
#[tokio::test]
async fn a_failed_event_append_leaves_the_job_running_until_its_lease_ends() {
    let e = Engine::redis().await;
    let s = &*e.store;
    s.put_topic(TopicConfig {
        slots: 1,
        visibility_timeout_ms: 1_000,
        ..TopicConfig::named("t")
    })
    .await
    .unwrap();
    s.schedule(
        "t",
        NewJob::new("a", T0).job_type("emit"),
        ScheduleMode::Upsert,
        T0,
    )
    .await
    .unwrap();
    let run = door(s, "t", 0, 0)
        .await
        .pump(T0, 10)
        .await
        .unwrap()
        .jobs
        .remove(0);
    // The slot's stream key holds a string: every XADD to it fails with WRONGTYPE.
    let mut conn = e.redis.as_ref().unwrap().conn();
    // The key layout of `store/keys.rs`: slot 0 of topic `t`.
    let events = "toc:{t:0}:events";
    let _: () = redis::cmd("SET")
        .arg(events)
        .arg("x")
        .query(&mut conn)
        .unwrap();
    let mut settlement = Settlement::new(run, RunOutcome::Done, T0);
    settlement.emitted = vec![Emitted::new("job.fired", json!({"n": 1}))];
    let err = door(s, "t", 0, 0).await.settle(&[settlement], T0 + 1).await;
    assert!(err.is_err(), "a failed append is an error: {err:?}");
    let got = s.get("t", &"a".into()).await.unwrap().unwrap();
    assert_eq!(got.state, JobState::Running, "never acknowledged");
    assert!(
        door(s, "t", 0, 0)
            .await
            .pump(T0 + 999, 10)
            .await
            .unwrap()
            .jobs
            .is_empty()
    );
    let _: () = redis::cmd("DEL").arg(events).query(&mut conn).unwrap();
    let again = door(s, "t", 0, 0)
        .await
        .pump(T0 + 1_000, 10)
        .await
        .unwrap()
        .jobs;
    assert_eq!(again.len(), 1, "the job comes back after its lease");
    assert_eq!((again[0].job.id.as_str(), again[0].job.attempts), ("a", 2));
}

/// A pump's lead is added to the node's clock, not to the caller's: a process whose clock runs
/// a minute ahead, pumping with a lead, is handed nothing due later than the node's `TIME`
/// plus the lead (docs/design.md, invariant 3). What it cannot show is a skewed process's runtime
/// (`tests/clocks.rs` runs those, with the default lead).
#[tokio::test]
async fn a_pumps_lead_counts_from_the_nodes_clock_not_the_callers() {
    let e = Engine::redis().await;
    let s = &*e.store;
    s.put_topic(TopicConfig {
        slots: 1,
        ..TopicConfig::named("t")
    })
    .await
    .unwrap();
    let mut conn = e.redis.as_ref().unwrap().conn();
    let (secs, us): (i64, i64) = redis::cmd("TIME").query(&mut conn).unwrap();
    let node_now = secs * 1_000 + us / 1_000;
    for (id, at) in [("soon", node_now - 1), ("later", node_now + 30_000)] {
        s.schedule("t", NewJob::new(id, at), ScheduleMode::Upsert, node_now)
            .await
            .unwrap();
    }
    let Ownership::Owned { fence } = s.own("t", 0, "me", node_now, 60_000).await.unwrap() else {
        panic!("the slot has no owner yet");
    };
    let ahead = node_now + 60_000;
    let p = door(s, "t", 0, fence)
        .await
        .pump_fenced(ahead, 100, 10)
        .await
        .unwrap();
    let ids: Vec<_> = p.jobs.iter().map(|l| l.job.id.as_str()).collect();
    assert_eq!(
        ids,
        ["soon"],
        "a job 30 s out on the node's clock was handed out"
    );
    let later = s.get("t", &"later".into()).await.unwrap().unwrap();
    assert_eq!(later.state, JobState::Scheduled);
}

/// A store whose topics' streams keep about 50 events, with `n` plain jobs in the one slot
/// of topic `t`, due at `T0`.
async fn capped_slot_of_plain_jobs(n: usize) -> Engine {
    let e = Engine::redis_with(StoreOptions {
        events_max_len: 50,
        ..StoreOptions::default()
    })
    .await;
    plain_jobs_in_one_slot(&e.store, n).await;
    e
}

/// Pumps slot 0 of topic `t` 7 jobs at a time and settles each batch as done, `n` in all.
async fn settle_in_sevens(s: &Store, n: usize) {
    let mut settled = 0;
    while settled < n {
        let runs = door(s, "t", 0, 0).await.pump(T0, 7).await.unwrap().jobs;
        let batch: Vec<Settlement> = runs
            .into_iter()
            .map(|r| Settlement::new(r, RunOutcome::Done, T0))
            .collect();
        settled += batch.len();
        door(s, "t", 0, 0)
            .await
            .settle(&batch, T0 + 1)
            .await
            .unwrap();
    }
}

/// The entries of slot 0's event stream of topic `t`: id and fields.
fn slot_stream(conn: &mut redis::Connection) -> Vec<(String, Vec<String>)> {
    redis::cmd("XRANGE")
        .arg("toc:{t:0}:events")
        .arg("-")
        .arg("+")
        .query(conn)
        .unwrap()
}

/// A slot's event stream keeps about its share of `events_max_len`: each settle appends its
/// events as one entry, and the oldest entries go once the stream holds more than the share
/// and a 64th (the sizes list says how many events each holds).
#[tokio::test]
async fn settling_keeps_the_event_stream_near_its_cap() {
    let e = capped_slot_of_plain_jobs(2_000).await;
    let s = &*e.store;
    settle_in_sevens(s, 2_000).await;
    let mut conn = e.redis.as_ref().unwrap().conn();
    let entries = slot_stream(&mut conn);
    // One entry per settle of 7 runs, with their 7 events (the last settle had 2,000 % 7).
    let (last, full) = entries.split_last().unwrap();
    assert!(full.iter().all(|(_, fields)| fields.len() == 2 * 7));
    assert_eq!(last.1.len(), 2 * (2_000 % 7));
    let kept: usize = entries.iter().map(|(_, fields)| fields.len() / 2).sum();
    // At least the cap, and at most a 64th of it (rounded up) and one settle's events more.
    assert!(
        (50..=50 + 1 + 7).contains(&kept),
        "2,000 job.done events, cap 50: {kept} kept in {} entries",
        entries.len()
    );
    // The slot's owner hash counts what the stream holds.
    let counted: usize = redis::cmd("HGET")
        .arg("toc:{t:0}:owner")
        .arg("events")
        .query(&mut conn)
        .unwrap();
    assert_eq!(counted, kept);
    // And its sizes list each entry's, oldest first.
    let sizes: Vec<String> = redis::cmd("LRANGE")
        .arg("toc:{t:0}:sizes")
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    let listed: Vec<String> = entries
        .iter()
        .map(|(id, fields)| format!("{} {id}", fields.len() / 2))
        .collect();
    assert_eq!(sizes, listed);
}

/// A slot stream appended to by an earlier version (one event an entry, no count of them)
/// joins the count at the first append: trimming takes its entries too.
#[tokio::test]
async fn a_stream_from_before_the_count_of_its_events_is_trimmed_too() {
    let e = capped_slot_of_plain_jobs(500).await;
    let s = &*e.store;
    let mut conn = e.redis.as_ref().unwrap().conn();
    for i in 0..40 {
        let _: String = redis::cmd("XADD")
            .arg("toc:{t:0}:events")
            .arg("*")
            .arg("e")
            .arg(format!("{{\"old\":{i}}}"))
            .query(&mut conn)
            .unwrap();
    }
    settle_in_sevens(s, 500).await;
    let entries = slot_stream(&mut conn);
    assert!(
        entries.iter().all(|(_, f)| !f[1].contains("old")),
        "the old entries went"
    );
    let kept: usize = entries.iter().map(|(_, fields)| fields.len() / 2).sum();
    assert!((50..=50 + 1 + 7).contains(&kept), "{kept} kept");
}

/// A stream entry holds a settle's events, and an event's id names its entry and its place
/// in it: pages of any size, over several slots, give every event once, in the order of one
/// read of them all.
#[tokio::test]
async fn event_pages_of_any_size_go_through_settles_of_many_events_each_once() {
    let e = Engine::redis().await;
    let s = &*e.store;
    s.put_topic(TopicConfig {
        slots: 4,
        ..TopicConfig::named("t")
    })
    .await
    .unwrap();
    let resets: Vec<Reset> = (0..200)
        .map(|i| Reset::new(format!("dev-{i}"), T0))
        .collect();
    s.reset_many("t", &resets, Some(&CreateSpec::default()), T0)
        .await
        .unwrap();
    for slot in 0..4 {
        let runs = door(s, "t", slot, 0)
            .await
            .pump(T0, 1_000)
            .await
            .unwrap()
            .jobs;
        let batch: Vec<Settlement> = runs
            .into_iter()
            .map(|r| Settlement::new(r, RunOutcome::Done, T0))
            .collect();
        door(s, "t", slot, 0)
            .await
            .settle(&batch, T0 + 1)
            .await
            .unwrap();
    }
    // A page holds back the events of the millisecond its slots' clocks are in (more may
    // still come in it): wait until Redis' clock has passed the settles.
    let mut conn = e.redis.as_ref().unwrap().conn();
    let redis_ms = |conn: &mut redis::Connection| {
        let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).unwrap();
        s * 1_000 + us / 1_000
    };
    let settled_at = redis_ms(&mut conn);
    while redis_ms(&mut conn) <= settled_at {
        tokio::task::yield_now().await;
    }
    let all: Vec<(String, String)> = s
        .read_events("t", None, 1_000)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|ev| (ev.id, ev.job_id))
        .collect();
    assert_eq!(all.len(), 200);
    let distinct: HashSet<&String> = all.iter().map(|(_, job)| job).collect();
    assert_eq!(distinct.len(), 200, "each job's job.done once");
    for limit in [1, 7, 64] {
        let mut paged = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = s.read_events("t", after.as_deref(), limit).await.unwrap();
            if page.items.is_empty() {
                break;
            }
            assert!(page.items.len() <= limit);
            paged.extend(page.items.into_iter().map(|ev| (ev.id, ev.job_id)));
            after = page.next;
        }
        assert_eq!(paged, all, "pages of {limit}");
    }
}

/// Topic `t` with one slot, holding `n` plain jobs `dev-0`, `dev-1`, ... due at `T0`.
async fn plain_jobs_in_one_slot(s: &Store, n: usize) {
    s.put_topic(TopicConfig {
        slots: 1,
        ..TopicConfig::named("t")
    })
    .await
    .unwrap();
    let resets: Vec<Reset> = (0..n).map(|i| Reset::new(format!("dev-{i}"), T0)).collect();
    s.reset_many("t", &resets, Some(&CreateSpec::default()), T0)
        .await
        .unwrap();
}

/// `n` plain jobs in the one-slot topic `t`, and `rich`, a job with a payload (a record),
/// all due at `T0`.
async fn plain_jobs_and_a_rich_one(s: &Store, n: usize) {
    plain_jobs_in_one_slot(s, n).await;
    s.schedule(
        "t",
        NewJob::new("rich", T0).payload(json!({"x": 1})),
        ScheduleMode::Upsert,
        T0,
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_plain_job_keeps_no_record_beyond_its_sorted_set_entry() {
    let e = Engine::redis().await;
    let s = &*e.store;
    plain_jobs_and_a_rich_one(s, 100).await;
    let mut conn = e.redis.as_ref().unwrap().conn();
    let due: u64 = redis::cmd("ZCARD")
        .arg("toc:{t:0}:due")
        .query(&mut conn)
        .unwrap();
    let records: u64 = redis::cmd("HLEN")
        .arg("toc:{t:0}:job")
        .query(&mut conn)
        .unwrap();
    assert_eq!(
        (due, records),
        (101, 1),
        "only the job with a payload has a record"
    );
    // Its details still read back in full, from the topic's defaults.
    let got = s.get("t", &"dev-7".into()).await.unwrap().unwrap();
    assert_eq!((got.job_type.as_str(), got.max_attempts), ("emit", 16));
    // A record made for a run is dropped again once the job is plain and scheduled.
    let run = door(s, "t", 0, 0)
        .await
        .pump(T0, 1_000)
        .await
        .unwrap()
        .jobs
        .into_iter()
        .find(|l| l.job.id == "dev-7")
        .unwrap();
    door(s, "t", run.slot, 0)
        .await
        .finish(&run, RunOutcome::Release, T0)
        .await
        .unwrap();
    let has: bool = redis::cmd("HEXISTS")
        .arg("toc:{t:0}:job")
        .arg("dev-7")
        .query(&mut conn)
        .unwrap();
    assert!(!has);
}

/// Heartbeats for plain jobs, far enough ahead, are one `ZADD XX` of the bare ids: no
/// script runs. A batch that names a job with a record runs reset_many.lua after it, and the
/// record's cap holds. (What this cannot show: that it costs Redis less; `toc bench reset`
/// measures that.)
#[tokio::test]
async fn heartbeats_for_plain_jobs_run_no_script() {
    let e = Engine::redis().await;
    let s = &*e.store;
    plain_jobs_in_one_slot(s, 100).await;
    let mut conn = e.redis.as_ref().unwrap().conn();
    let (fcalls, zadds) = (
        command_calls(&mut conn, "fcall"),
        command_calls(&mut conn, "zadd"),
    );
    let far = T0 + 60_000;
    let beats: Vec<Reset> = (0..100)
        .map(|i| Reset::new(format!("dev-{i}"), far + i))
        .collect();
    let report = s.reset_many("t", &beats, None, T0).await.unwrap();
    assert_eq!((report.reset, report.missing.len()), (100, 0));
    assert_eq!(command_calls(&mut conn, "fcall"), fcalls, "no script ran");
    assert_eq!(command_calls(&mut conn, "zadd"), zadds + 1);
    let got = s.get("t", &"dev-42".into()).await.unwrap().unwrap();
    assert_eq!(got.fire_at, far + 42);

    let capped = NewJob::new("cap", T0 + 100).max_fire_at(T0 + 1_000);
    s.schedule("t", capped, ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let fcalls = command_calls(&mut conn, "fcall");
    let mixed = [Reset::new("dev-1", far + 5), Reset::new("cap", far)];
    let report = s.reset_many("t", &mixed, None, T0).await.unwrap();
    assert_eq!(report.reset, 2);
    assert_eq!(
        command_calls(&mut conn, "fcall"),
        fcalls + 1,
        "the script ran"
    );
    let got = s.get("t", &"cap".into()).await.unwrap().unwrap();
    assert_eq!(got.fire_at, T0 + 1_000, "the cap holds");
    assert_eq!(
        s.get("t", &"dev-1".into()).await.unwrap().unwrap().fire_at,
        far + 5
    );
}

/// A slot written before due members were marked holds a job with a record under its bare
/// id. A store that starts on it takes no plain path there before reset_many.lua has marked
/// the slot: the first far batch runs the script (the cap holds), which marks the job; the
/// next runs none.
#[tokio::test]
async fn a_slot_from_before_the_marks_is_marked_by_its_first_batch_reset() {
    let e = Engine::redis().await;
    plain_jobs_in_one_slot(&e.store, 10).await;
    let capped = NewJob::new("cap", T0 + 100).max_fire_at(T0 + 1_000);
    e.store
        .schedule("t", capped, ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    let server = e.redis.as_ref().unwrap();
    let mut conn = server.conn();
    // As an earlier version left it: the member unmarked, the slot never marked.
    let _: () = redis::pipe()
        .cmd("ZREM")
        .arg("toc:{t:0}:due")
        .arg("cap\0")
        .cmd("ZADD")
        .arg("toc:{t:0}:due")
        .arg(T0 + 100)
        .arg("cap")
        .cmd("HDEL")
        .arg("toc:{t:0}:owner")
        .arg("marked")
        .query(&mut conn)
        .unwrap();
    let s = Store::redis(&server.url(), StoreOptions::default())
        .await
        .unwrap();
    let far = T0 + 60_000;
    let fcalls = command_calls(&mut conn, "fcall");
    let batch = [Reset::new("dev-1", far), Reset::new("cap", far)];
    assert_eq!(s.reset_many("t", &batch, None, T0).await.unwrap().reset, 2);
    assert_eq!(command_calls(&mut conn, "fcall"), fcalls + 1);
    let got = s.get("t", &"cap".into()).await.unwrap().unwrap();
    assert_eq!(got.fire_at, T0 + 1_000, "the cap holds");
    let marked: Option<f64> = redis::cmd("ZSCORE")
        .arg("toc:{t:0}:due")
        .arg("cap\0")
        .query(&mut conn)
        .unwrap();
    assert_eq!(marked, Some((T0 + 1_000) as f64));
    let fcalls = command_calls(&mut conn, "fcall");
    let batch = [Reset::new("dev-1", far + 1), Reset::new("dev-2", far)];
    assert_eq!(s.reset_many("t", &batch, None, T0).await.unwrap().reset, 2);
    assert_eq!(command_calls(&mut conn, "fcall"), fcalls, "the plain path");
}

/// A pump that hands out one plain job of a marked slot reads what it needs in one look at
/// the due set's first two members (the job, and the next fire time after it) and one at
/// the run set's first, and reads no record: no `ZRANGEBYSCORE`, no `HMGET`. A pump with
/// more due than one reads them by score. (What this cannot show: what that saves Redis per
/// fire; BENCHMARKS.md gives callgrind's instruction counts.)
#[tokio::test]
async fn a_pump_of_one_plain_job_reads_no_record_and_the_due_set_once() {
    let e = Engine::redis().await;
    let s = &*e.store;
    plain_jobs_in_one_slot(s, 3).await;
    let later = [Reset::new("dev-1", T0 + 10), Reset::new("dev-2", T0 + 20)];
    s.reset_many("t", &later, None, T0).await.unwrap();
    let mut conn = e.redis.as_ref().unwrap().conn();
    log_every_command(&mut conn);
    let pumped = door(s, "t", 0, 0).await.pump(T0, 100).await.unwrap();
    let ids: Vec<&str> = pumped.jobs.iter().map(|l| l.job.id.as_str()).collect();
    assert_eq!((ids, pumped.next_at), (vec!["dev-0"], Some(T0 + 10)));
    let commands: Vec<String> = slow_log(&mut conn)
        .iter()
        .map(|args| String::from_utf8_lossy(&args[0]).to_uppercase())
        .collect();
    let count = |name: &str| commands.iter().filter(|c| *c == name).count();
    assert_eq!(
        (count("ZRANGE"), count("ZRANGEBYSCORE"), count("HMGET")),
        (2, 0, 1),
        "one look at each set, and the owner hash's HMGET only: {commands:?}"
    );
    log_every_command(&mut conn);
    let both = door(s, "t", 0, 0).await.pump(T0 + 20, 100).await.unwrap();
    assert_eq!(both.jobs.len(), 2);
    assert_eq!(
        both.next_at,
        Some(pumped.jobs[0].lease_until),
        "the first run's lease deadline, before the new runs'"
    );
}

/// The padding members that keep a slot's job hash and run set a hash table and a skiplist
/// are sent with the slot's first runs only (the owner hash's `padded` says they are there):
/// a pump of one job later carries no 600-byte member. A slot padded by an earlier version,
/// which did not say so, gets them once more, harmlessly, and says so from then on.
#[tokio::test]
async fn a_slots_padding_goes_with_its_first_runs_only() {
    let e = Engine::redis().await;
    let s = &*e.store;
    plain_jobs_in_one_slot(s, 5).await;
    let later = [
        Reset::new("dev-1", T0 + 10),
        Reset::new("dev-2", T0 + 20),
        Reset::new("dev-3", T0 + 30),
        Reset::new("dev-4", T0 + 30),
    ];
    s.reset_many("t", &later, None, T0).await.unwrap();
    let mut conn = e.redis.as_ref().unwrap().conn();
    // Whether the pump's ZADD to the run set and HSET to the job hash carried the padding.
    let padding_sent = |conn: &mut redis::Connection| -> (bool, bool) {
        let log = slow_log(conn);
        let sent = |command: &str, key: &str, pad: &[u8]| {
            log.iter().any(|args| {
                String::from_utf8_lossy(&args[0]).eq_ignore_ascii_case(command)
                    && args[1] == key.as_bytes()
                    && args[2..].iter().any(|a| a.as_slice() == pad)
            })
        };
        (
            sent("ZADD", "toc:{t:0}:run", b"+inf"),
            sent("HSET", "toc:{t:0}:job", b""),
        )
    };
    let padded = |conn: &mut redis::Connection| -> Option<String> {
        redis::cmd("HGET")
            .arg("toc:{t:0}:owner")
            .arg("padded")
            .query(conn)
            .unwrap()
    };
    assert_eq!(padded(&mut conn), None);
    log_every_command(&mut conn);
    assert_eq!(
        door(s, "t", 0, 0)
            .await
            .pump(T0, 10)
            .await
            .unwrap()
            .jobs
            .len(),
        1
    );
    assert_eq!(
        padding_sent(&mut conn),
        (true, true),
        "the first runs bring it"
    );
    assert_eq!(padded(&mut conn).as_deref(), Some("1"));
    log_every_command(&mut conn);
    assert_eq!(
        door(s, "t", 0, 0)
            .await
            .pump(T0 + 10, 10)
            .await
            .unwrap()
            .jobs
            .len(),
        1
    );
    assert_eq!(padding_sent(&mut conn), (false, false), "one job, later");
    let _: () = redis::cmd("HDEL")
        .arg("toc:{t:0}:owner")
        .arg("padded")
        .query(&mut conn)
        .unwrap();
    log_every_command(&mut conn);
    assert_eq!(
        door(s, "t", 0, 0)
            .await
            .pump(T0 + 20, 10)
            .await
            .unwrap()
            .jobs
            .len(),
        1
    );
    assert_eq!(
        padding_sent(&mut conn),
        (true, true),
        "a slot that did not say so"
    );
    assert_eq!(padded(&mut conn).as_deref(), Some("1"));
    // A batch of two takes the general path, which sends none either.
    log_every_command(&mut conn);
    assert_eq!(
        door(s, "t", 0, 0)
            .await
            .pump(T0 + 30, 10)
            .await
            .unwrap()
            .jobs
            .len(),
        2
    );
    assert_eq!(padding_sent(&mut conn), (false, false), "two jobs, later");
    // Still one padding member each.
    let run_pads: usize = redis::cmd("ZCOUNT")
        .arg("toc:{t:0}:run")
        .arg("+inf")
        .arg("+inf")
        .query(&mut conn)
        .unwrap();
    assert_eq!(run_pads, 1);
    assert_eq!(s.stats("t").await.unwrap().running, 5);
}

/// A slot written before due members were marked, whose first write since is a pump: the
/// pump marks it before it reads no record for a bare member, so a job with a record under
/// its bare id runs with its record (its payload, its attempts), not as a plain job.
#[tokio::test]
async fn a_slot_from_before_the_marks_is_marked_by_its_first_pump() {
    let e = Engine::redis().await;
    let s = &*e.store;
    plain_jobs_and_a_rich_one(s, 2).await;
    let mut conn = e.redis.as_ref().unwrap().conn();
    // As an earlier version left it: the member unmarked, the slot never marked.
    let _: () = redis::pipe()
        .cmd("ZREM")
        .arg("toc:{t:0}:due")
        .arg("rich\0")
        .cmd("ZADD")
        .arg("toc:{t:0}:due")
        .arg(T0)
        .arg("rich")
        .cmd("HDEL")
        .arg("toc:{t:0}:owner")
        .arg("marked")
        .query(&mut conn)
        .unwrap();
    let pumped = door(s, "t", 0, 0).await.pump(T0, 100).await.unwrap();
    let rich = pumped.jobs.iter().find(|l| l.job.id == "rich").unwrap();
    assert_eq!(rich.job.payload, json!({"x": 1}));
    assert_eq!(pumped.jobs.len(), 3);
    let marked: Option<String> = redis::cmd("HGET")
        .arg("toc:{t:0}:owner")
        .arg("marked")
        .query(&mut conn)
        .unwrap();
    assert_eq!(marked.as_deref(), Some("1"));
}

/// The commands Redis' slow log holds (each with its arguments; threshold 0, see
/// `log_every_command`), oldest first: those a client sent, and those its scripts ran.
fn slow_log(conn: &mut redis::Connection) -> Vec<Vec<Vec<u8>>> {
    // Each entry: id, time, duration, arguments, then client fields.
    let log: Vec<Vec<redis::Value>> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1_000)
        .query(conn)
        .unwrap();
    log.into_iter()
        .rev()
        .map(|entry| redis::FromRedisValue::from_redis_value(entry[3].clone()).unwrap())
        .collect()
}

fn log_every_command(conn: &mut redis::Connection) {
    let _: () = redis::pipe()
        .cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(0)
        .cmd("SLOWLOG")
        .arg("RESET")
        .query(conn)
        .unwrap();
}

/// The argument counts of the settle calls in the slow log, oldest first.
fn settle_calls(conn: &mut redis::Connection) -> Vec<usize> {
    slow_log(conn)
        .into_iter()
        .filter(|args| args.len() > 1 && args[1].ends_with(b"_settle"))
        .map(|args| args.len())
        .collect()
}

/// Batches that create new jobs far ahead try the plain path once, and after it missed
/// (the ids are new) skip it for the next fifteen in that slot: a bulk creation pays the
/// `ZADD` that moves nothing once in sixteen batches, not before every script.
#[tokio::test]
async fn a_bulk_creation_skips_the_plain_path_after_it_missed() {
    let e = Engine::redis().await;
    let s = &*e.store;
    plain_jobs_in_one_slot(s, 1).await;
    let mut conn = e.redis.as_ref().unwrap().conn();
    log_every_command(&mut conn);
    let far = T0 + 60_000;
    for batch in 0..17 {
        let new: Vec<Reset> = (0..10)
            .map(|i| Reset::new(format!("n-{batch}-{i}"), far))
            .collect();
        let report = s
            .reset_many("t", &new, Some(&CreateSpec::default()), T0)
            .await
            .unwrap();
        assert_eq!(report.created, 10);
    }
    let tries: Vec<usize> = slow_log(&mut conn)
        .iter()
        .enumerate()
        .filter(|(_, args)| args[0].eq_ignore_ascii_case(b"zadd") && args[2] == b"XX")
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        tries.len(),
        2,
        "the first batch and the seventeenth: {tries:?}"
    );
}

/// A consumer's ack of a run claimed through the same store settles in settle.lua's short
/// form (the record as handed out, the event built in Rust: four arguments, not eight); one
/// claimed through another store (another instance) in the long form. Both append the same
/// event. (What this cannot show: that the short form costs Redis less; `toc bench pull`
/// measures that.)
#[tokio::test]
async fn an_ack_of_a_run_claimed_here_settles_in_the_short_form() {
    let e = Engine::redis().await;
    let (a, server) = (&*e.store, e.redis.as_ref().unwrap());
    let b = Store::redis(&server.url(), StoreOptions::default())
        .await
        .unwrap();
    a.put_topic(TopicConfig {
        default_type: "pull".into(),
        slots: 1,
        ..TopicConfig::named("q")
    })
    .await
    .unwrap();
    for id in ["here", "there"] {
        a.schedule("q", NewJob::new(id, T0), ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    let runs = door(a, "q", 0, 0)
        .await
        .claim(T0, 10, 30_000)
        .await
        .unwrap()
        .jobs;
    let token = |id: &str| runs.iter().find(|r| r.job.id == id).unwrap().token;
    let mut conn = server.conn();
    log_every_command(&mut conn);
    let ack = |id: &str| ClaimOutcome {
        job: JobRef::new(id),
        token: token(id),
        outcome: Outcome::Done,
    };
    assert_eq!(
        a.settle_claims("q", &[ack("here")], T0 + 7).await.unwrap(),
        [Finished::Done]
    );
    assert_eq!(
        b.settle_claims("q", &[ack("there")], T0 + 7).await.unwrap(),
        [Finished::Done]
    );
    // FCALL, the function, 8, the eight keys, six arguments, then the run's.
    assert_eq!(settle_calls(&mut conn), [3 + 8 + 6 + 4, 3 + 8 + 6 + 8]);
    let mut events = events_of(a, "q", 2).await;
    assert_eq!(events.len(), 2);
    for ev in &mut events {
        ev.id = String::new();
    }
    events[1].job_id = "here".into();
    assert_eq!(events[0], events[1], "the same event either way");
}

#[tokio::test]
async fn one_topic_spreads_over_the_nodes_of_a_redis_cluster() {
    let cluster = RedisCluster::start();
    let store = Store::redis_cluster(&cluster.urls(), StoreOptions::default())
        .await
        .expect("connect to the cluster");
    let s: &Store = &store;
    s.put_topic(TopicConfig {
        slots: 16,
        ..TopicConfig::named("orders")
    })
    .await
    .unwrap();
    let resets: Vec<Reset> = (0..2_000)
        .map(|i| Reset::new(format!("o{i}"), T0 + i))
        .collect();
    let report = s
        .reset_many("orders", &resets, Some(&CreateSpec::default()), T0)
        .await
        .unwrap();
    assert_eq!(report.created, 2_000);
    s.schedule(
        "orders",
        NewJob::new("p", T0).payload(json!(1)),
        ScheduleMode::Upsert,
        T0,
    )
    .await
    .unwrap();

    // Each node holds some of the topic's slots.
    let holding = cluster
        .nodes
        .iter()
        .filter(|n| {
            let mut c = n.conn();
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("toc:{orders:*")
                .query(&mut c)
                .unwrap();
            !keys.is_empty()
        })
        .count();
    assert!(holding >= 2, "the topic's slots sit on {holding} node(s)");

    // Every operation works across the cluster, and every job fires exactly once.
    let mut seen = HashSet::new();
    for slot in 0..16 {
        let p = door(s, "orders", slot, 0)
            .await
            .pump(T0 + 2_000, 10_000)
            .await
            .unwrap();
        for run in p.jobs {
            assert!(seen.insert(run.job.id.clone()));
            assert_eq!(
                door(s, "orders", run.slot, 0)
                    .await
                    .finish(&run, RunOutcome::Done, T0)
                    .await
                    .unwrap(),
                Finished::Done
            );
        }
    }
    assert_eq!(seen.len(), 2_001);
    let stats = s.stats("orders").await.unwrap();
    assert_eq!((stats.scheduled, stats.running), (0, 0));
}

/// The slot's job hash holds a record per run in flight, and its run set a lease per run.
/// Left small, Redis would keep them as listpacks, where every HSET, HMGET, HDEL, ZADD,
/// ZMSCORE and ZREM scans the whole list; the
/// first pump makes them a hash table and a skiplist, and they stay so once every run is
/// settled. The members that do it are no job: not counted as running, not a lease that
/// runs out, not the slot's next deadline.
#[tokio::test]
async fn a_slots_job_hash_and_run_set_are_a_hash_table_and_a_skiplist_from_the_first_pump_on() {
    let e = Engine::redis().await;
    let s = &*e.store;
    plain_jobs_in_one_slot(s, 3).await;
    let mut conn = e.redis.as_ref().unwrap().conn();
    let encodings = |conn: &mut redis::Connection| -> (String, String) {
        let of = |conn: &mut redis::Connection, key: &str| -> String {
            redis::cmd("OBJECT")
                .arg("ENCODING")
                .arg(key)
                .query(conn)
                .unwrap()
        };
        (of(conn, "toc:{t:0}:job"), of(conn, "toc:{t:0}:run"))
    };
    let tables = ("hashtable".to_string(), "skiplist".to_string());
    let runs = door(s, "t", 0, 0).await.pump(T0, 10).await.unwrap().jobs;
    assert_eq!(runs.len(), 3);
    assert_eq!(encodings(&mut conn), tables);
    assert_eq!(s.stats("t").await.unwrap().running, 3);
    for run in &runs {
        door(s, "t", run.slot, 0)
            .await
            .finish(run, RunOutcome::Done, T0)
            .await
            .unwrap();
    }
    assert_eq!(encodings(&mut conn), tables, "kept with no run left");
    // The members that do it are the ones earlier versions wrote (RUN_PAD_LEN and
    // JOB_PAD_LEN dots, src/store/keys.rs), so a slot written before an upgrade gets no
    // second one.
    let pads: Vec<String> = redis::cmd("ZRANGEBYSCORE")
        .arg("toc:{t:0}:run")
        .arg("+inf")
        .arg("+inf")
        .query(&mut conn)
        .unwrap();
    assert_eq!(pads, vec![".".repeat(600)]);
    let pad: String = redis::cmd("HGET")
        .arg("toc:{t:0}:job")
        .arg("")
        .query(&mut conn)
        .unwrap();
    assert_eq!(pad, ".".repeat(128));
    assert_eq!(s.stats("t").await.unwrap().running, 0);
    assert!(s.get("t", &"dev-0".into()).await.unwrap().is_none());
    // Long after every lease would have run out: nothing comes back, nothing is next.
    let later = door(s, "t", 0, 0)
        .await
        .pump(T0 + 86_400_000, 10)
        .await
        .unwrap();
    assert!(later.jobs.is_empty());
    assert_eq!(later.next_at, None);
}

/// The invariants the scripts rely on: a record names a run token (`k`) exactly while its
/// job is in the run set (settle.lua skips a run-set lookup), and a scheduled job is in the
/// due set under its marked member exactly when it has a record (the plain reset path moves
/// bare members without a script). Checked after every step of a seeded mix of schedules,
/// replaces, resets (of running jobs too), cancels, pumps with leases running out, settles
/// of every outcome (stale and doubled runs among them), requeues and batch resets that
/// create, near and far ahead.
#[tokio::test]
async fn records_name_run_tokens_exactly_while_running_and_mark_due_members() {
    use rand::{Rng, SeedableRng};
    let e = Engine::redis().await;
    let s = &*e.store;
    s.put_topic(TopicConfig {
        slots: 1,
        max_attempts: 2,
        visibility_timeout_ms: 40,
        ..TopicConfig::named("t")
    })
    .await
    .unwrap();
    let mut conn = e.redis.as_ref().unwrap().conn();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut runs: Vec<Leased> = Vec::new();
    let mut now = T0;
    let mut settled = 0;
    let mut marked_seen = false;
    let id = |rng: &mut rand::rngs::StdRng| format!("j{}", rng.random_range(0..12));
    for step in 0..1_500 {
        now += rng.random_range(0..8);
        match rng.random_range(0..9) {
            0 | 1 => {
                let mut job = NewJob::new(id(&mut rng), now + rng.random_range(0..30));
                if rng.random_bool(0.5) {
                    job = job.job_type("emit").payload(json!({"step": step}));
                }
                s.schedule("t", job, ScheduleMode::Upsert, now)
                    .await
                    .unwrap();
            }
            2 => {
                let job = NewJob::new(id(&mut rng), now + rng.random_range(0..30));
                s.schedule("t", job, ScheduleMode::ResetOnly, now)
                    .await
                    .unwrap();
            }
            3 => {
                s.cancel("t", &id(&mut rng).as_str().into()).await.unwrap();
            }
            4 | 5 => runs.extend(door(s, "t", 0, 0).await.pump(now, 4).await.unwrap().jobs),
            6 if !runs.is_empty() => {
                // One to three runs, maybe one twice, each with any outcome.
                let mut batch = Vec::new();
                for _ in 0..rng.random_range(1..4) {
                    let run = runs[rng.random_range(0..runs.len())].clone();
                    let outcome = match rng.random_range(0..5) {
                        0 => RunOutcome::Done,
                        1 => RunOutcome::Retry {
                            error: "x".into(),
                            at: now + 5,
                        },
                        2 => RunOutcome::Repeat {
                            at: now + 9,
                            error: None,
                        },
                        3 => RunOutcome::Dead { error: "y".into() },
                        _ => RunOutcome::Release,
                    };
                    batch.push(Settlement::new(run, outcome, now));
                }
                settled += door(s, "t", 0, 0)
                    .await
                    .settle(&batch, now)
                    .await
                    .unwrap()
                    .len();
            }
            7 => {
                s.dead_requeue("t", &id(&mut rng).as_str().into(), now)
                    .await
                    .unwrap();
            }
            _ => {
                // Half of the batches far enough ahead for the plain path (a ZADD XX first).
                let ahead = if rng.random_bool(0.5) { 2_500 } else { 0 };
                let resets = [
                    Reset::new(id(&mut rng), now + ahead + 3),
                    Reset::new(id(&mut rng), now + ahead + 20),
                ];
                let create = CreateSpec {
                    job_type: None,
                    payload: serde_json::Value::Null,
                    max_attempts: None,
                };
                let create = rng.random_bool(0.5).then_some(&create);
                s.reset_many("t", &resets, create, now).await.unwrap();
            }
        }
        let records: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg("toc:{t:0}:job")
            .query(&mut conn)
            .unwrap();
        let running: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg("toc:{t:0}:run")
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(&mut conn)
            .unwrap();
        let running: HashSet<String> = running
            .into_iter()
            .filter(|(_, lease)| lease.is_finite()) // the padding member, at +inf
            .map(|(id, _)| id)
            .collect();
        let with_record: HashSet<String> = records
            .iter()
            .filter(|(id, _)| !id.is_empty())
            .map(|(id, _)| id.clone())
            .collect();
        let with_token: HashSet<String> = records
            .into_iter()
            .filter(|(id, raw)| {
                !id.is_empty()
                    && serde_json::from_str::<serde_json::Value>(raw).unwrap()["k"].is_u64()
            })
            .map(|(id, _)| id)
            .collect();
        assert_eq!(with_token, running, "step {step}");
        // A scheduled job is in the due set once, under its id and the mark exactly when it
        // has a record (lua/lib.lua's MARK): a ZADD XX of bare ids moves plain jobs only.
        let due: Vec<String> = redis::cmd("ZRANGE")
            .arg("toc:{t:0}:due")
            .arg(0)
            .arg(-1)
            .query(&mut conn)
            .unwrap();
        let mut scheduled = HashSet::new();
        for member in due {
            let (id, marked) = match member.strip_suffix('\0') {
                Some(id) => (id.to_string(), true),
                None => (member, false),
            };
            assert_eq!(marked, with_record.contains(&id), "step {step}: {id}");
            assert!(scheduled.insert(id), "step {step}: one member per job");
        }
        marked_seen |= scheduled.iter().any(|id| with_record.contains(id));
    }
    assert!(marked_seen, "the mix scheduled jobs with records");
    assert!(settled > 100, "the mix settled runs: {settled}");
}

/// The connections Redis serves now, other than `conn`'s own.
fn other_clients(conn: &mut redis::Connection) -> usize {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(conn).unwrap();
    list.lines().count() - 1
}

/// Waits (at most 5 s) until Redis serves `n` connections besides `conn`'s.
fn until_clients(conn: &mut redis::Connection, n: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let now = other_clients(conn);
        if now == n || std::time::Instant::now() > deadline {
            return now;
        }
        // A poll (this test is synchronous), every 10 ms of real time, up to the deadline.
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A store's calls from a thread that asked for a connection of its own (as the runtime's
/// slot-actor threads do) and runs a current-thread runtime go over that connection, so
/// that its replies are read on the thread that waits for them; every other thread's calls
/// (a multi-thread runtime, a current-thread one that did not ask) share one connection; a
/// thread's connection closes when the thread ends. (What this cannot show: the thread
/// wake-ups it saves; `perf stat -e context-switches` around `toc bench latency` measures
/// that.)
#[test]
fn a_thread_that_asks_calls_over_a_connection_of_its_own() {
    let server = common::RedisServer::start();
    let mut probe = server.conn();
    let shared = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = std::sync::Arc::new(
        shared
            .block_on(Store::redis(&server.url(), StoreOptions::default()))
            .unwrap(),
    );
    for _ in 0..4 {
        assert!(shared.block_on(store.reload_topic("t")).unwrap().is_none());
    }
    assert_eq!(
        until_clients(&mut probe, 1),
        1,
        "calls from a multi-thread runtime share one connection"
    );
    // Three threads on current-thread runtimes, two of which ask for a connection of their
    // own; each is held until all have called.
    let (called_tx, called_rx) = std::sync::mpsc::channel();
    let release = std::sync::Arc::new(std::sync::Barrier::new(4));
    let threads: Vec<_> = [true, true, false]
        .into_iter()
        .map(|own| {
            let (store, called, release) = (store.clone(), called_tx.clone(), release.clone());
            std::thread::spawn(move || {
                if own {
                    timeout_center::store::own_redis_connection();
                }
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                for _ in 0..3 {
                    assert!(rt.block_on(store.reload_topic("t")).unwrap().is_none());
                }
                called.send(()).unwrap();
                release.wait();
            })
        })
        .collect();
    for _ in 0..3 {
        called_rx.recv().unwrap();
    }
    assert_eq!(
        other_clients(&mut probe),
        3,
        "the shared connection and one of each thread that asked"
    );
    release.wait();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        until_clients(&mut probe, 1),
        1,
        "a thread's connection closes when the thread ends"
    );
    assert!(shared.block_on(store.reload_topic("t")).unwrap().is_none());
}

/// The events of `topic`, once `n` of them can be read (or after 2 s). A page holds back the
/// events of Redis' current millisecond (so that a later page never misses one): read again
/// until that millisecond has passed (CI once read in it).
async fn events_of(store: &Store, topic: &str, n: usize) -> Vec<events::Event> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let items = store.read_events(topic, None, 100).await.unwrap().items;
        if items.len() >= n || std::time::Instant::now() > deadline {
            return items;
        }
        // A poll until the deadline: a page holds back Redis's current millisecond.
        crate::common::runtime::quiet(1).await;
    }
}

/// How a settle reaches `lua/settle.lua`.
#[derive(Clone, Copy, Debug)]
enum SettleForm {
    /// The runtime's runs (`Store::settle`): a `done` with no events in the short form (the
    /// record as handed out, the event whole), the rest in the long form with their heads.
    Runtime,
    /// A consumer's acks through the store that claimed the runs: `done` in the short form,
    /// the rest in the long form with an empty head (the script reads the record).
    ConsumerHere,
    /// A consumer's acks through another store (another instance): every run in the long
    /// form with an empty head.
    ConsumerElsewhere,
}

/// The same runs (one done, one retried, one dead, one recurring) leased at `T0` and settled
/// at `T0 + 7` through `form` on a fresh Redis: each job as read after, the dead letters and
/// the events (their stream ids left out: Redis makes them from its own clock).
async fn settled_through(form: SettleForm) -> (Vec<Option<Job>>, Vec<String>, Vec<events::Event>) {
    let e = Engine::redis().await;
    let (a, server) = (&*e.store, e.redis.as_ref().unwrap());
    let b = Store::redis(&server.url(), StoreOptions::default())
        .await
        .unwrap();
    a.put_topic(TopicConfig {
        default_type: "pull".into(),
        slots: 1,
        max_attempts: 2,
        ..TopicConfig::named("q")
    })
    .await
    .unwrap();
    let ids = ["done", "retry", "dead", "every"];
    for id in ids {
        let mut job = NewJob::new(id, T0);
        if id == "every" {
            job = job.repeat(Recurrence::every(std::time::Duration::from_secs(60)).unwrap());
        }
        a.schedule("q", job, ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    let outcome = |id: &str| match id {
        "done" | "every" => Outcome::Done,
        "retry" => Outcome::Retry {
            error: "boom".into(),
            delay: Some(std::time::Duration::from_millis(1_000)),
        },
        _ => Outcome::Dead {
            error: "no such order".into(),
        },
    };
    let now = T0 + 7;
    let done = match form {
        SettleForm::Runtime => {
            let runs = door(a, "q", 0, 0).await.pump(T0, 10).await.unwrap().jobs;
            let batch: Vec<Settlement> = runs
                .into_iter()
                .map(|run| {
                    // What the runtime makes of `outcome` (`Outcome::into_run`).
                    let o = match run.job.id.as_str() {
                        "done" | "every" => RunOutcome::Done,
                        "retry" => RunOutcome::Retry {
                            error: "boom".into(),
                            at: now + 1_000,
                        },
                        _ => RunOutcome::Dead {
                            error: "no such order".into(),
                        },
                    };
                    Settlement::new(run, o, now)
                })
                .collect();
            door(a, "q", 0, 0).await.settle(&batch, now).await.unwrap()
        }
        SettleForm::ConsumerHere | SettleForm::ConsumerElsewhere => {
            let runs = door(a, "q", 0, 0)
                .await
                .claim(T0, 10, 30_000)
                .await
                .unwrap()
                .jobs;
            let acks: Vec<ClaimOutcome> = runs
                .iter()
                .map(|run| ClaimOutcome {
                    job: JobRef::new(run.job.id.clone()),
                    token: run.token,
                    outcome: outcome(&run.job.id),
                })
                .collect();
            let through = if matches!(form, SettleForm::ConsumerHere) {
                a
            } else {
                &b
            };
            through.settle_claims("q", &acks, now).await.unwrap()
        }
    };
    assert_eq!(done.len(), ids.len(), "{form:?}: every run settled");
    let mut jobs = Vec::new();
    for id in ids {
        jobs.push(a.get("q", &JobRef::new(id)).await.unwrap());
    }
    let dead: Vec<String> = a
        .dead_list("q", None, 10)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|d| format!("{d:?}"))
        .collect();
    let mut events = events_of(a, "q", ids.len()).await;
    for ev in &mut events {
        ev.id = String::new();
    }
    events.sort_by(|x, y| x.job_id.cmp(&y.job_id));
    (jobs, dead, events)
}

/// Every form of `lua/settle.lua` (the runtime's short and long, a consumer's through the
/// instance that claimed the runs and through another) leaves the store the same for the
/// same runs and outcomes: the jobs, the dead letters and the events.
#[tokio::test]
async fn every_form_of_settle_lua_leaves_the_same_store() {
    let runtime = settled_through(SettleForm::Runtime).await;
    assert_eq!(runtime.2.len(), 4, "an event per run: {:?}", runtime.2);
    assert!(
        runtime.0[0].is_none() && runtime.0[3].is_some(),
        "{:?}",
        runtime.0
    );
    for form in [SettleForm::ConsumerHere, SettleForm::ConsumerElsewhere] {
        assert_eq!(
            settled_through(form).await,
            runtime,
            "{form:?} against the runtime's"
        );
    }
}

/// Heartbeats through the center (the path `POST /resets` and the library take): pushing
/// plain jobs an hour ahead is one `ZADD XX CH` per slot per batch and nothing else: no
/// script, no wake notice published (a head past the safety net's longest sweep is found by
/// the sweep before it is due). Resets had grown a `PUBLISH` per slot per batch, which halved
/// the heartbeat rate unseen. A reset to a second from now is still told to its slot.
#[actix_rt::test]
async fn heartbeats_an_hour_ahead_are_one_zadd_per_slot_and_nothing_else() {
    let redis = common::RedisServer::start();
    let s = common::service::Service::start(&redis, |_| {}).await;
    let c = &s.center;
    let mut t = TopicConfig::named("fleet");
    t.slots = 4;
    c.put_topic(t).await.unwrap();
    let hour = common::now_ms() + 3_600_000;
    let batch = |at: Millis| -> Vec<Reset> {
        (0..1_000)
            .map(|i| Reset::new(format!("dev-{i}"), at + i))
            .collect()
    };
    c.reset_many("fleet", &batch(hour), Some(&CreateSpec::default()))
        .await
        .unwrap();
    // A slot's first heartbeats learn that its jobs are plain (a script once per slot).
    c.reset_many("fleet", &batch(hour), None).await.unwrap();
    let mut conn = redis.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut conn)
        .unwrap();
    for round in 1..6 {
        let r = c
            .reset_many("fleet", &batch(hour + round), None)
            .await
            .unwrap();
        assert_eq!(r.reset, 1_000);
    }
    let mut calls = |cmd: &str| command_calls(&mut conn, cmd);
    assert_eq!(
        (
            calls("zadd"),
            calls("fcall"),
            calls("evalsha"),
            calls("publish"),
            calls("spublish")
        ),
        (5 * 4, 0, 0, 0, 0),
        "one ZADD per slot per batch and nothing else"
    );
    // A head due soon is told at once.
    c.reset_many(
        "fleet",
        &[Reset::new("dev-1", common::now_ms() + 1_000)],
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        calls("publish") + calls("spublish"),
        1,
        "a head due soon is told"
    );
}

/// A pump told that a flow key is full moves that key's due jobs to the key's instant
/// without leasing them (their attempts uncounted), and leases every other job as before:
/// a job of another key, a plain job, and a job of the full key that has an expiry (whose
/// misfire the slot judges first). The keys are those `flow::job_key` gives: a job's own
/// `fk`, or on a topic keyed by URL a webhook's URL host and port, read as the url crate
/// reads them (the scheme's port when none is written, userinfo dropped, the host in lower
/// case). What it cannot show is the slot actor choosing the keys: `tests/flow_control.rs`
/// runs 50,000 due runs of one key through a `toc serve`.
#[tokio::test]
async fn a_pump_sets_a_full_keys_due_jobs_aside_without_leasing_them() {
    use timeout_center::flow::SetAside;
    let e = Engine::redis().await;
    let s = &*e.store;
    timeout_center::conformance::learn_builtin_type_keys(s);
    for name in ["own", "url"] {
        s.put_topic(TopicConfig {
            slots: 1,
            ..TopicConfig::named(name)
        })
        .await
        .unwrap();
    }
    let put = |topic: &'static str, job: NewJob| async move {
        s.schedule(topic, job, ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    };
    for k in 0..5 {
        put(
            "own",
            NewJob::new(format!("hog-{k}"), T0 - 100 + k).flow_key("hog"),
        )
        .await;
    }
    put("own", NewJob::new("calm", T0 - 98).flow_key("calm")).await;
    put("own", NewJob::new("plain", T0 - 97)).await;
    put(
        "own",
        NewJob::new("hog-expiring", T0 - 96)
            .flow_key("hog")
            .expire_after(60_000, OnExpire::Dead),
    )
    .await;
    let webhook = |id: &str, url: &str, at: Millis| {
        NewJob::new(id, at)
            .job_type("webhook")
            .payload(json!({"url": url, "body": {"id": id}}))
    };
    for (id, url) in [
        ("hog-a", "http://user:pw@Hog.Example/a?b=1"),
        ("hog-b", "http://hog.example:80/b"),
        ("tls", "https://hog.example/c"),
        ("calm", "http://calm.example:8080/"),
    ] {
        put("url", webhook(id, url, T0 - 50)).await;
    }
    // Its own key, which a topic keyed by URL does not go by.
    put(
        "url",
        webhook("own-key", "http://other.example/", T0 - 49).flow_key("hog"),
    )
    .await;

    let back = T0 + 5_000;
    let aside = |key: &str, by_url: bool| SetAside {
        keys: vec![(key.to_string(), back)],
        by_url,
    };
    let ids = |p: &Pumped| {
        let mut ids: Vec<String> = p.jobs.iter().map(|l| l.job.id.clone()).collect();
        ids.sort();
        ids
    };
    let fence = |topic: &'static str| async move {
        match s.own(topic, 0, "me", T0, 60_000).await.unwrap() {
            Ownership::Owned { fence } => fence,
            other => panic!("the slot is not mine: {other:?}"),
        }
    };

    let f = fence("own").await;
    let p = door(s, "own", 0, f)
        .await
        .pump_setting_aside(T0, 0, 100, &aside("hog", false))
        .await
        .unwrap();
    assert_eq!(ids(&p), ["calm", "hog-expiring", "plain"]);
    assert_eq!(p.set_aside, [("hog".to_string(), 5)]);
    for k in 0..5 {
        let job = s
            .get("own", &format!("hog-{k}").as_str().into())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (job.state, job.fire_at, job.attempts),
            (JobState::Scheduled, back, 0),
            "hog-{k} is due again at its key's instant, its attempt not counted"
        );
    }

    let f = fence("url").await;
    let p = door(s, "url", 0, f)
        .await
        .pump_setting_aside(T0, 0, 100, &aside("hog.example:80", true))
        .await
        .unwrap();
    assert_eq!(ids(&p), ["calm", "own-key", "tls"]);
    assert_eq!(p.set_aside, [("hog.example:80".to_string(), 2)]);
    // Keyed by the job's own key first, the same topic sets aside the one naming `hog`.
    s.schedule(
        "url",
        webhook("again", "http://hog.example/", T0 - 10).flow_key("hog"),
        ScheduleMode::Upsert,
        T0,
    )
    .await
    .unwrap();
    let p = door(s, "url", 0, f)
        .await
        .pump_setting_aside(T0, 0, 100, &aside("hog", false))
        .await
        .unwrap();
    assert!(p.jobs.is_empty(), "{:?}", ids(&p));
    assert_eq!(p.set_aside, [("hog".to_string(), 1)]);
    // With no key set aside the same jobs are leased, due or not yet: the plain pump.
    let p = door(s, "url", 0, f)
        .await
        .pump_fenced(back, 0, 100)
        .await
        .unwrap();
    assert_eq!(ids(&p), ["again", "hog-a", "hog-b"]);
    assert!(p.set_aside.is_empty());
}

//! The memory engine's journal: a `toc serve` killed with SIGKILL in the middle of a burst
//! loses no accepted job; a torn last record is dropped and the rest loads; a corrupt middle
//! record stops the start naming the file and offset; compaction keeps exactly the live jobs.

mod common;
use common::door;

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::json;
use timeout_center::Store;
use timeout_center::config::FsyncPolicy;
use timeout_center::conformance::*;
use timeout_center::*;

use common::redis_server::free_port;

const T0: Millis = 1_700_000_000_000;

fn open(path: &Path) -> Result<Store> {
    Store::open_memory(StoreOptions::default(), Some((path, FsyncPolicy::Always)))
}

async fn ids(s: &Store) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..100 {
        let id = format!("j{i}");
        if s.get("t", &JobRef::new(id.clone()))
            .await
            .unwrap()
            .is_some()
        {
            out.push(id);
        }
    }
    out
}

async fn fill(s: &Store, n: usize) {
    for i in 0..n {
        let job = NewJob::new(format!("j{i}"), T0 + 1_000 + i as Millis).payload(json!({"n": i}));
        s.schedule("t", job, ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn the_journal_replays_every_accepted_change() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toc.journal");
    {
        let s = open(&path).unwrap();
        fill(&s, 10).await;
        s.cancel("t", &"j3".into()).await.unwrap();
        let run = door(&s, "t", timeout_center::slot_of("j0", 16), 0)
            .await
            .pump(T0 + 1_000, 10)
            .await
            .unwrap();
        assert_eq!(run.jobs[0].job.id, "j0");
        s.reset_many("t", &[Reset::new("j5", T0 + 9_999)], None, T0)
            .await
            .unwrap();
    }
    let s = open(&path).unwrap();
    assert_eq!(ids(&s).await.len(), 9);
    let j0 = s.get("t", &"j0".into()).await.unwrap().unwrap();
    assert_eq!((j0.state, j0.attempts), (JobState::Running, 1));
    assert_eq!(
        s.get("t", &"j5".into()).await.unwrap().unwrap().fire_at,
        T0 + 9_999
    );
    assert_eq!(
        s.get("t", &"j7".into()).await.unwrap().unwrap().payload,
        json!({"n": 7})
    );
    assert!(s.durability().contains("journal"));
}

/// A journal this process still holds for a moment (a store of its own closing; a child
/// process being started elsewhere in it holds a copy of the lock's descriptor until it runs
/// its program) is waited for, not refused: here the first store is dropped 200 ms after
/// the second open began, and the second opens. (It was refused at once as "in use by
/// another process", naming this process: `a_deleted_topic_stays_deleted_after_a_restart_and_compaction`
/// failed one run in five while `toc serve` children were started beside it.) Another
/// process's lock is still refused at once (`tests/journal_damage.rs`).
#[tokio::test]
async fn a_journal_this_process_is_closing_is_waited_for_not_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toc.journal");
    let first = open(&path).unwrap();
    fill(&first, 3).await;
    let closer = std::thread::spawn(move || {
        // The other store closes 200 ms (real time) after the second open began to wait.
        std::thread::sleep(std::time::Duration::from_millis(200));
        drop(first);
    });
    let second = open(&path).expect("the journal, once this process's other store closed");
    closer.join().unwrap();
    assert_eq!(ids(&second).await, ["j0", "j1", "j2"]);
}

/// A run's outcome and its events are one journal record: a restart (and a compaction) keeps
/// the event stream as well as the jobs.
#[tokio::test]
async fn a_deleted_topic_stays_deleted_after_a_restart_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toc.journal");
    {
        let s = open(&path).unwrap();
        fill(&s, 10).await;
        s.delete_topic("t", false).await.unwrap();
        // A topic of the same name, with one job of its own.
        let job = NewJob::new("j1", T0 + 5_000);
        s.schedule("t", job, ScheduleMode::Upsert, T0)
            .await
            .unwrap();
    }
    let s = open(&path).unwrap();
    assert_eq!(ids(&s).await, ["j1"]);
    s.compact().unwrap();
    drop(s);
    let s = open(&path).unwrap();
    assert_eq!(ids(&s).await, ["j1"]);
    assert_eq!(s.stats("t").await.unwrap().scheduled, 1);
}

#[tokio::test]
async fn the_journal_keeps_settled_events_with_their_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toc.journal");
    let before = {
        let s = open(&path).unwrap();
        fill(&s, 3).await;
        let mut batch = Vec::new();
        for slot in 0..16 {
            for run in door(&s, "t", slot, 0)
                .await
                .pump(T0 + 5_000, 10)
                .await
                .unwrap()
                .jobs
            {
                let mut st = Settlement::new(run, RunOutcome::Done, T0 + 5_000);
                st.emitted = vec![Emitted::new("job.fired", json!({"slot": slot}))];
                let done = door(&s, "t", slot, 0)
                    .await
                    .settle(&[st], T0 + 5_001)
                    .await
                    .unwrap();
                batch.extend(done);
            }
        }
        assert_eq!(batch, vec![Finished::Done; 3]);
        s.read_events("t", None, 100).await.unwrap().items
    };
    assert_eq!(before.len(), 6, "a job.fired and a job.done per job");
    let s = open(&path).unwrap();
    assert!(ids(&s).await.is_empty());
    assert_eq!(s.read_events("t", None, 100).await.unwrap().items, before);
    s.compact().unwrap();
    drop(s);
    let s = open(&path).unwrap();
    assert_eq!(s.read_events("t", None, 100).await.unwrap().items, before);
}

#[tokio::test]
async fn a_torn_last_record_is_dropped_and_the_rest_loads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toc.journal");
    {
        let s = open(&path).unwrap();
        fill(&s, 10).await;
    }
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 3).unwrap(); // a crash in the middle of the last write
    drop(f);
    let s = open(&path).unwrap();
    let found = ids(&s).await;
    assert_eq!(found.len(), 9, "{found:?}");
    assert!(
        !found.contains(&"j9".to_string()),
        "the torn record's job is not there"
    );
    // The file was cut back to whole records, so new appends read back too.
    s.schedule("t", NewJob::new("j50", T0 + 5), ScheduleMode::Upsert, T0)
        .await
        .unwrap();
    drop(s);
    let s = open(&path).unwrap();
    assert_eq!(ids(&s).await.len(), 10);
    assert!(s.get("t", &"j50".into()).await.unwrap().is_some());
}

#[tokio::test]
async fn a_corrupt_middle_record_stops_the_start_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toc.journal");
    {
        let s = open(&path).unwrap();
        fill(&s, 10).await;
    }
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    let err = match open(&path) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a corrupt journal opened"),
    };
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("offset"), "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the journal is left as it was"
    );

    // The service refuses to start, saying the same.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toc"))
        .arg("serve")
        .env("TOC_MEMORY_JOURNAL", &path)
        .env("TOC_LISTEN", format!("127.0.0.1:{}", free_port()))
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("offset") && stderr.contains("toc.journal"),
        "{stderr}"
    );
}

#[tokio::test]
async fn compaction_keeps_exactly_the_live_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toc.journal");
    let s = open(&path).unwrap();
    fill(&s, 100).await;
    for round in 0..5 {
        let resets: Vec<Reset> = (0..100)
            .map(|i| Reset::new(format!("j{i}"), T0 + 2_000 + round))
            .collect();
        s.reset_many("t", &resets, None, T0).await.unwrap();
    }
    for i in (0..100).filter(|i| i % 4 != 0) {
        s.cancel("t", &JobRef::new(format!("j{i}"))).await.unwrap();
    }
    let before = s.journal_len().unwrap();
    assert!(
        before.on_disk > 5 * before.live,
        "{} records for {} live",
        before.on_disk,
        before.live
    );
    s.compact().unwrap();
    let after = s.journal_len().unwrap();
    assert_eq!((after.on_disk, after.live), (before.live, before.live));
    let expected: Vec<_> = (0..100)
        .filter(|i| i % 4 == 0)
        .map(|i| format!("j{i}"))
        .collect();
    drop(s);
    let s = open(&path).unwrap();
    assert_eq!(ids(&s).await, expected);
    let j8 = s.get("t", &"j8".into()).await.unwrap().unwrap();
    assert_eq!((j8.fire_at, j8.payload), (T0 + 2_004, json!({"n": 8})));
}

#[tokio::test]
async fn a_killed_server_loses_no_accepted_job() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("toc.journal");
    let port = free_port();
    let spawn = || {
        common::toc_serve(env!("CARGO_BIN_EXE_toc"))
            .env("TOC_MEMORY_JOURNAL", &journal)
            .env("TOC_MEMORY_FSYNC", "always")
            .env("TOC_LISTEN", format!("127.0.0.1:{port}"))
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let wait_ready = || {
        crate::common::runtime::until(20, "toc serve's health", || async {
            http.get(format!("{base}/health"))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .ok()
                == Some(200)
        })
    };
    let mut child = spawn();
    wait_ready().await;

    let accepted = Arc::new(Mutex::new(Vec::new()));
    let mut writers = Vec::new();
    for w in 0..8 {
        let (http, base, accepted) = (http.clone(), base.clone(), accepted.clone());
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let id = format!("w{w}-{i}");
                let res = http
                    .put(format!("{base}/v1/topics/burst/jobs/{id}"))
                    .json(&json!({"delay_ms": 3_600_000, "payload": {"i": i}}))
                    .send()
                    .await;
                match res {
                    Ok(r) if r.status().as_u16() == 201 => accepted.lock().unwrap().push(id),
                    _ => break, // the server is gone
                }
            }
        }));
    }
    // Kill it in the middle of the burst.
    crate::common::runtime::until(20, "the burst getting going", || async {
        accepted.lock().unwrap().len() >= 300
    })
    .await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for w in writers {
        w.await.unwrap();
    }
    let accepted = accepted.lock().unwrap().clone();

    let mut child = spawn();
    wait_ready().await;
    let mut lost = Vec::new();
    for id in &accepted {
        let res = http
            .get(format!("{base}/v1/topics/burst/jobs/{id}"))
            .send()
            .await
            .unwrap();
        if res.status().as_u16() != 200 {
            lost.push(id.clone());
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        lost.is_empty(),
        "{} of {} accepted jobs lost: {lost:?}",
        lost.len(),
        accepted.len()
    );
}

/// A panic inside a slot's lock (a bug in a slot operation) does not take the slot down for
/// good: the next call takes the lock over and the slot goes on serving.
#[tokio::test]
async fn a_panic_inside_a_slot_lock_does_not_poison_the_slot() {
    let s = Store::memory(StoreOptions::default());
    fill(&s, 1).await;
    let slot = timeout_center::slot_of("j0", 16);
    s.panic_in_slot("t", slot);
    let got = s.get("t", &"j0".into()).await.unwrap().unwrap();
    assert_eq!(got.state, JobState::Scheduled);
    let run = door(&s, "t", slot, 0)
        .await
        .pump(T0 + 1_000, 10)
        .await
        .unwrap();
    assert_eq!(run.jobs.len(), 1);
    assert_eq!(
        door(&s, "t", run.jobs[0].slot, 0)
            .await
            .finish(&run.jobs[0], RunOutcome::Done, T0 + 1_001)
            .await
            .unwrap(),
        Finished::Done
    );
}

/// With `fsync = always`, changes waiting for the disk at the same time share one fsync
/// (group commit), and each is answered only once it is on disk: all are there after a
/// reopen.
#[tokio::test]
async fn concurrent_changes_share_fsyncs_and_all_are_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toc.journal");
    let n = 200;
    {
        let s = open(&path).unwrap();
        let calls = (0..n).map(|i| {
            let s = &s;
            async move {
                let job = NewJob::new(format!("g{i}"), T0 + 1_000);
                s.schedule("t", job, ScheduleMode::Upsert, T0)
                    .await
                    .unwrap();
            }
        });
        futures_util::future::join_all(calls).await;
        let fsyncs = s.group_commits();
        assert!(fsyncs >= 1, "no change went through the group commit");
        assert!(
            fsyncs < n,
            "{fsyncs} fsyncs for {n} concurrent changes: nothing was shared"
        );
    }
    let s = open(&path).unwrap();
    for i in 0..n {
        let id = format!("g{i}");
        assert!(
            s.get("t", &JobRef::new(id.clone()))
                .await
                .unwrap()
                .is_some(),
            "{id} lost"
        );
    }
}

/// A settle is one append of several records (the jobs' new states and their events), and a
/// SIGKILL may leave only a prefix of that write on disk. Cut at every byte of the last
/// append, the journal must never replay a job acknowledged (gone) whose events are not
/// there: at worst the run is still running and fires again (at least once). Found by the
/// fire-path test under CI's load: 128 jobs (one pump's batch) were gone with no event.
#[tokio::test]
async fn a_settle_torn_at_any_byte_never_keeps_an_ack_without_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toc.journal");
    let slot = timeout_center::slot_of("j0", 16);
    let before_settle = {
        let s = open(&path).unwrap();
        fill(&s, 1).await;
        let run = door(&s, "t", slot, 0)
            .await
            .pump(T0 + 1_000, 10)
            .await
            .unwrap()
            .jobs;
        assert_eq!(run.len(), 1);
        let before = std::fs::metadata(&path).unwrap().len();
        let mut settled = Settlement::new(run[0].clone(), RunOutcome::Done, T0 + 1_000);
        settled.emitted = vec![Emitted::new("job.fired", json!({"n": 0}))];
        door(&s, "t", slot, 0)
            .await
            .settle(&[settled], T0 + 1_001)
            .await
            .unwrap();
        before
    };
    let whole = std::fs::read(&path).unwrap();
    assert!(
        whole.len() as u64 > before_settle,
        "the settle wrote nothing"
    );
    for cut in before_settle..=whole.len() as u64 {
        let torn = dir.path().join(format!("torn-{cut}.journal"));
        std::fs::write(&torn, &whole[..cut as usize]).unwrap();
        let s = open(&torn).unwrap();
        let job = s.get("t", &"j0".into()).await.unwrap();
        let fired = s
            .read_events("t", None, 100)
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| e.event == "job.fired");
        assert!(
            job.is_some() || fired,
            "cut at byte {cut}: the job is acknowledged but its event is lost"
        );
    }
}

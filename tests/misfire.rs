//! The misfire rules across an outage: every instance of a service stops (SIGKILL) for 10 s
//! while jobs come due, then starts again, on memory (one instance with its journal) and on
//! two instances sharing one Redis.
//!
//! What this proves: a one-shot job whose `expire_after_ms` passed during the stop goes to the
//! dead letters as expired (or is dropped with `on_expire: drop`) and its receiver never sees
//! it, while jobs within their expiry and jobs with none fire once the service is back; a
//! recurring job with `repeat.catchup_window_ms` skips the instants it missed by more than
//! the window and fires next on its own grid, while one without a window fires once at once
//! (today's rule). What it cannot: a stop shorter than the window is only shown by the
//! runtime tests (fire times set in the past), and the rule on hosts whose clocks differ.
//!
//! `schedule_controls`: `repeat.limit`, `repeat.until`, `repeat.jitter_ms`, `?next=` and
//! `trigger` against a real `toc serve` and a webhook receiver, on both engines.

#[macro_use]
mod common;

use std::time::Duration;

use serde_json::{Value, json};

use common::process::{Receiver, wall_us};
use common::{Fleet, Kind};

const STOP_MS: u64 = 10_000;
const EVERY_MS: i64 = 4_000;

fn hook(url: &str, id: &str) -> Value {
    json!({"url": url, "body": {"id": id}})
}

/// Lets real time pass until the wall clock reads `at_ms`.
async fn sleep_until(at_ms: i64) {
    let now = wall_us() / 1_000;
    crate::common::runtime::quiet((at_ms - now).max(0).unsigned_abs()).await;
}

async fn expiry_and_catch_up_hold_across_a_stop_of_every_instance(kind: Kind) {
    let count = if kind == Kind::Redis { 2 } else { 1 };
    let mut fleet = Fleet::start(kind, count, true).await;
    let http = reqwest::Client::new();
    let receiver = Receiver::start();
    let url = receiver.url();
    let t0 = wall_us() / 1_000 + 2_500;
    let jobs = [
        ("short", json!({"expire_after_ms": 3_000})),
        (
            "dropped",
            json!({"expire_after_ms": 3_000, "on_expire": "drop"}),
        ),
        ("long", json!({"expire_after_ms": 60_000})),
        ("plain", json!({})),
        (
            "windowed",
            json!({"repeat": {"every_ms": EVERY_MS, "catchup_window_ms": 1_000}}),
        ),
        ("recurring", json!({"repeat": {"every_ms": EVERY_MS}})),
    ];
    for (i, (id, extra)) in jobs.iter().enumerate() {
        let mut body = json!({"type": "webhook", "fire_at": t0, "payload": hook(&url, id)});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        fleet.tocs[i % count].put_job(&http, "t", id, &body).await;
    }
    // Every instance stops a second before the jobs are due, for 10 s.
    sleep_until(t0 - 1_000).await;
    fleet.tocs.clear();
    let stopped = wall_us() / 1_000;
    crate::common::runtime::quiet(STOP_MS).await; // every instance stays stopped this long, in real time
    fleet.restart(count).await;
    let all = &fleet.tocs;
    let back = wall_us() / 1_000;
    println!(
        "{kind:?}: stopped {} ms before the jobs' fire time, back {} ms after it",
        t0 - stopped,
        back - t0
    );
    assert!(back - t0 > 3_000, "the stop outlasted the short expiry");

    // The jobs within their expiry, with none, and both series arrive.
    let seen = receiver.wait_for(4, Duration::from_secs(20)).await;
    let first = |id: &str| {
        seen.get(id)
            .and_then(|at| at.iter().min().copied())
            .map(|us| us / 1_000)
    };
    for id in ["long", "plain", "windowed", "recurring"] {
        assert!(first(id).is_some(), "{id} fired after the stop: {seen:?}");
    }
    for id in ["short", "dropped"] {
        assert!(!seen.contains_key(id), "{id} fired past its expiry");
    }
    // The windowed series skipped what it missed: its first fire is one of its own instants
    // after the stop, on time; the one without a window fired once at once.
    let windowed = first("windowed").unwrap();
    let since = windowed - t0;
    println!(
        "{kind:?}: windowed first fire {since} ms after t0 ({} ms past its instant); the plain series' {} ms after t0",
        since % EVERY_MS,
        first("recurring").unwrap() - t0
    );
    assert!(
        windowed >= back - 100,
        "the windowed series fired a missed instant"
    );
    assert!(
        since % EVERY_MS < 1_000,
        "the windowed series fired off its grid: {since} ms after its first instant"
    );

    // The expired job is dead, saying so; the dropped one is gone.
    let dead = all[0].get_json(&http, "/v1/topics/t/dead").await;
    let items = dead["items"].as_array().unwrap();
    let short = items.iter().find(|j| j["id"] == "short");
    let error = short.map(|j| j["last_error"].as_str().unwrap_or("").to_string());
    assert!(
        error.as_deref().is_some_and(|e| e.contains("expired")),
        "the short job is dead as expired: {dead}"
    );
    assert!(items.iter().all(|j| j["id"] != "dropped"), "{dead}");
    let dropped = http
        .get(all[0].url("/v1/topics/t/jobs/dropped"))
        .send()
        .await
        .unwrap();
    assert_eq!(dropped.status(), 404, "the dropped job is gone");
}

engine_matrix!(
    #[tokio::test] crate::common::kind;
    expiry_and_catch_up_hold_across_a_stop_of_every_instance,
);

mod schedule_controls {
    use super::*;

    /// Schedule controls against a real `toc serve` and a receiver: a series that ends after
    /// `limit` fires and one that ends at `until` stop there (and are gone); a jittered
    /// per-second cron never fires before its instant nor later than its jitter (and a
    /// little); `?next=3` answers the coming instants; `trigger` fires a series once now
    /// without moving it.
    async fn limit_until_jitter_next_and_trigger_on_a_real_service(kind: Kind) {
        let fleet = Fleet::start(kind, 1, false).await;
        let toc = &fleet.tocs[0];
        let http = reqwest::Client::new();
        let receiver = Receiver::start();
        let url = receiver.url();
        let t0 = wall_us() / 1_000 + 1_000;
        let put = |id: &str, repeat: Value, fire_at: Option<i64>| {
            let mut body = json!({"type": "webhook", "repeat": repeat, "payload": hook(&url, id)});
            if let Some(at) = fire_at {
                body["fire_at"] = json!(at);
            }
            body
        };
        toc.put_job(
            &http,
            "s",
            "limited",
            &put("limited", json!({"every_ms": 300, "limit": 3}), Some(t0)),
        )
        .await;
        toc.put_job(
            &http,
            "s",
            "until",
            &put(
                "until",
                json!({"every_ms": 300, "until": t0 + 700}),
                Some(t0),
            ),
        )
        .await;
        toc.put_job(
            &http,
            "s",
            "jittered",
            &put(
                "jittered",
                json!({"cron": "* * * * * *", "jitter_ms": 300}),
                None,
            ),
        )
        .await;
        toc.put_job(
            &http,
            "s",
            "daily",
            &put("daily", json!({"cron": "0 9 * * *"}), None),
        )
        .await;
        // The coming instants of the daily series: three mornings, a day apart.
        let next = toc.get_json(&http, "/v1/topics/s/jobs/daily?next=3").await;
        let at: Vec<i64> = next["next_fire_ats"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(at.len(), 3, "{next}");
        assert!(at.windows(2).all(|w| w[1] - w[0] == 86_400_000), "{next}");
        // Fired once now, the series untouched.
        let r = http
            .post(toc.url("/v1/topics/s/jobs/daily/trigger"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
        let after = toc.get_json(&http, "/v1/topics/s/jobs/daily").await;
        assert_eq!(after["fire_at"].as_i64(), Some(at[0]), "{after}");

        // Until both bounded series are gone (no fire can come after that) and the jittered
        // series fired a few times; bounded by 20 s.
        crate::common::runtime::eventually(20, || async {
            let mut gone = 0;
            for id in ["limited", "until"] {
                let r = http
                    .get(toc.url(&format!("/v1/topics/s/jobs/{id}")))
                    .send()
                    .await
                    .unwrap();
                gone += usize::from(r.status() == 404);
            }
            let jittered = receiver.seen().get("jittered").map_or(0, Vec::len);
            if gone == 2 && jittered >= 3 {
                Ok(())
            } else {
                Err(format!("the series never ended: {:?}", receiver.seen()))
            }
        })
        .await;
        let seen = receiver.seen();
        let fires = |id: &str| seen.get(id).map_or(0, Vec::len);
        assert_eq!(fires("limited"), 3, "{seen:?}");
        assert_eq!(
            fires("until"),
            3,
            "fires at t0, +300, +600, none past +700: {seen:?}"
        );
        assert_eq!(fires("daily"), 1, "the trigger's one fire: {seen:?}");
        for id in ["limited", "until"] {
            let r = http
                .get(toc.url(&format!("/v1/topics/s/jobs/{id}")))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 404, "{id}'s series ended");
        }
        let jittered = &seen["jittered"];
        for us in jittered {
            let into_second = (us / 1_000).rem_euclid(1_000);
            assert!(
                into_second < 300 + 100,
                "a jittered fire {into_second} ms past its instant"
            );
        }
        println!(
            "{kind:?}: jittered fires at {:?} ms past their instants",
            jittered
                .iter()
                .map(|us| (us / 1_000).rem_euclid(1_000))
                .collect::<Vec<_>>()
        );
    }

    engine_matrix!(
        #[tokio::test] crate::common::kind;
        limit_until_jitter_next_and_trigger_on_a_real_service,
    );
}

//! Flow control per key (`flow`, `flows`, a job's `flow_key`): a key's counters on both
//! engines through the store, and the limits held by real `toc serve` processes, one on
//! memory and two sharing one Redis, with webhook receivers that count what reaches them.
//!
//! What this proves: a burst of webhooks for one receiver reaches it no more than the key's
//! parallelism at once and no more than its rate in any second, every job arrives, and a
//! second receiver's jobs arrive on time meanwhile; two instances draw on one key's counters.
//! What it cannot: the limits across hosts whose clocks differ (the Redis counters run on the
//! server's clock, which this test does not skew), or fairness between slots beyond the
//! order of their asks.

#[macro_use]
mod common;
use common::door;

use std::time::Duration;

use serde_json::{Value, json};
use timeout_center::conformance::*;
use timeout_center::store::FlowAsk;
use timeout_center::*;

use common::Engine;

fn runs(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("j{i}:1")).collect()
}

fn ask<'a>(runs: &'a [String], waiting: u32) -> FlowAsk<'a> {
    FlowAsk {
        key: "host:443",
        runs,
        hold_ms: 30_000,
        waiter: "test/0",
        waiting,
        oldest: 5,
    }
}

/// A key's parallelism grants what is free, a release frees it, the rate counts the fires of
/// its period, and who waits is counted for the key's view.
async fn a_keys_counters_grant_room_and_count_who_waits(e: Engine) {
    let s = &*e.store;
    let t = TopicConfig {
        flow: Some(FlowLimits {
            rate: None,
            period_ms: 1_000,
            parallelism: Some(3),
            key: Default::default(),
        }),
        ..TopicConfig::named("hooks")
    };
    let t = s.put_topic(t).await.unwrap();
    let limits = t.flow.unwrap();
    let now = common::now_ms_u64() as i64;
    let asked = runs(5);
    let g = door(s, &t.name, 0, 0)
        .await
        .flow_take(&limits, &ask(&asked, 5), now)
        .await
        .unwrap();
    assert_eq!((g.granted, g.retry_in_ms), (3, 0), "room for three");
    let (_, state) = s.flow_state(&t, "host:443", now).await.unwrap().unwrap();
    assert_eq!(
        (state.in_flight, state.waiting, state.oldest_wait),
        (3, 2, Some(5))
    );
    let g = door(s, &t.name, 0, 0)
        .await
        .flow_take(&limits, &ask(&asked[3..], 2), now)
        .await
        .unwrap();
    assert_eq!(g.granted, 0, "the parallelism is full");
    door(s, &t.name, 0, 0)
        .await
        .flow_release("host:443", &asked[..1])
        .await
        .unwrap();
    let g = door(s, &t.name, 0, 0)
        .await
        .flow_take(&limits, &ask(&asked[3..], 2), now)
        .await
        .unwrap();
    assert_eq!(g.granted, 1, "one room freed");
    let g = door(s, &t.name, 0, 0)
        .await
        .flow_take(&limits, &ask(&asked[4..], 1), now)
        .await
        .unwrap();
    assert_eq!(g.granted, 0);
    door(s, &t.name, 0, 0)
        .await
        .flow_release("host:443", &asked[1..3])
        .await
        .unwrap();
    let g = door(s, &t.name, 0, 0)
        .await
        .flow_take(&limits, &ask(&asked[4..], 1), now)
        .await
        .unwrap();
    assert_eq!(g.granted, 1);
    let (_, state) = s.flow_state(&t, "host:443", now).await.unwrap().unwrap();
    assert_eq!((state.in_flight, state.waiting), (2, 0), "no one waits now");

    // A rate: two fires a minute, then the wait until the first leaves the period.
    let rated = FlowLimits {
        rate: Some(2),
        period_ms: 60_000,
        parallelism: None,
        key: Default::default(),
    };
    let asked = runs(4);
    let other = FlowAsk {
        key: "other:80",
        ..ask(&asked, 4)
    };
    let g = door(s, &t.name, 0, 0)
        .await
        .flow_take(&rated, &other, now)
        .await
        .unwrap();
    assert_eq!(g.granted, 2);
    let g = door(s, &t.name, 0, 0)
        .await
        .flow_take(
            &rated,
            &FlowAsk {
                runs: &asked[2..],
                ..other
            },
            now,
        )
        .await
        .unwrap();
    assert_eq!(g.granted, 0);
    assert!(
        (59_000..=63_000).contains(&g.retry_in_ms),
        "room again when the first fire leaves the minute: {g:?}"
    );
    // Under a topic with no flow, a key has no limits and no view.
    let free = s.put_topic(TopicConfig::named("free")).await.unwrap();
    assert!(s.flow_state(&free, "x", now).await.unwrap().is_none());
}

/// Limits out of bounds are refused, naming the field.
async fn flow_limits_out_of_bounds_are_refused_naming_them(e: Engine) {
    let s = &*e.store;
    for (flow, says) in [
        (json!({}), "give rate"),
        (json!({"rate": 0}), "rate must be"),
        (json!({"parallelism": 10_001}), "parallelism must be"),
        (json!({"rate": 5, "period_ms": 0}), "period_ms must be"),
    ] {
        let t = TopicConfig {
            flow: Some(serde_json::from_value(flow.clone()).unwrap()),
            ..TopicConfig::named("t")
        };
        match s.put_topic(t).await {
            Err(Error::Invalid { field, message } | Error::Unprocessable { field, message }) => {
                assert_eq!(field, "flow", "{flow}");
                assert!(message.contains(says), "{flow}: {message}");
            }
            other => panic!("{flow} was not refused: {other:?}"),
        }
    }
    assert!(s.find_topic("t").await.unwrap().is_none());
}

engine_matrix!(
    #[tokio::test] crate::common::Engine::of;
    a_keys_counters_grant_room_and_count_who_waits,
    flow_limits_out_of_bounds_are_refused_naming_them,
);

mod processes {
    use super::*;
    use common::process::{Receiver, wall_us};
    use common::{Fleet, Kind, busiest_second};

    /// Held by each process test of this file: run one at a time, none shares the two cores
    /// with another's burst or thousand writes, which delays a call's arrival past the
    /// rate's guard (a twentieth of its period) or a calm job past its second.
    static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    const JOBS: usize = 1_000;
    const RATE: usize = 100;
    const PARALLELISM: usize = 5;

    /// 1,000 webhooks due at one instant for one receiver whose key allows 5 at once and 100
    /// a second: it never sees more, every job arrives, and another receiver's jobs (its own
    /// key) arrive on time meanwhile.
    async fn a_burst_for_one_receiver_keeps_to_its_key(kind: Kind) {
        let _alone = ALONE.lock().await;
        let count = if kind == Kind::Redis { 2 } else { 1 };
        let fleet = Fleet::start(kind, count, false).await;
        let all = &fleet.tocs;
        let http = reqwest::Client::new();
        let busy = Receiver::slow(Duration::from_millis(20));
        let calm = Receiver::start();
        let flow = json!({"rate": RATE, "period_ms": 1_000, "parallelism": PARALLELISM});
        let topic = all[0]
            .put_topic(&http, "hooks", json!({"flow": flow}))
            .await;
        assert_eq!(topic["flow"]["parallelism"], PARALLELISM, "{topic}");
        // Every instance hears of the setting (and serves some of the topic's slots): a
        // second of real time, many ownership rounds.
        crate::common::runtime::quiet(1_000).await;
        // Every job is written due in an hour, then the burst and the calm jobs are moved to
        // their times in one batch of resets: the writes take seconds in a debug build over
        // two instances (3 to 4 s here, more under a loaded test run), which would otherwise
        // run into the burst and count as lateness.
        let later = wall_us() / 1_000 + 3_600_000;
        for k in 0..JOBS {
            let body = json!({"type": "webhook", "fire_at": later,
                              "payload": {"url": busy.url(), "body": {"id": format!("b-{k}")}}});
            all[k % count]
                .put_job(&http, "hooks", &format!("b-{k}"), &body)
                .await;
        }
        // The other receiver's jobs, due while the burst waits for room.
        for k in 0..20 {
            let body = json!({"type": "webhook", "fire_at": later,
                              "payload": {"url": calm.url(), "body": {"id": format!("c-{k}")}}});
            all[k % count]
                .put_job(&http, "hooks", &format!("c-{k}"), &body)
                .await;
        }
        let due = wall_us() / 1_000 + 500;
        let calm_due = due + 2_000;
        let resets: Vec<Value> = (0..JOBS)
            .map(|k| json!({"id": format!("b-{k}"), "fire_at": due}))
            .chain((0..20).map(|k| json!({"id": format!("c-{k}"), "fire_at": calm_due})))
            .collect();
        let moved: Value = http
            .post(all[0].url("/v1/topics/hooks/resets"))
            .json(&json!({"resets": resets}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(moved["reset"], JOBS + 20, "{moved}");
        // The busy key's view, while it waits: over every instance.
        // Until the calm jobs are due: the real instant they were scheduled for.
        crate::common::runtime::quiet(u64::try_from(calm_due - wall_us() / 1_000).unwrap_or(0))
            .await;
        let key = format!("127.0.0.1:{}", busy.port);
        let view: Value = http
            .get(all[count - 1].url(&format!("/v1/topics/hooks/flows/{key}")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        println!("{kind:?}: the busy key at the calm jobs' fire time: {view}");
        assert!(view["waiting"].as_u64().unwrap() > 0, "{view}");
        assert_eq!(view["own"], false, "{view}");

        let calm_seen = calm.wait_for(20, Duration::from_secs(10)).await;
        assert_eq!(calm_seen.len(), 20, "every calm job fired");
        let latest = calm_seen.values().flatten().max().unwrap() / 1_000 - calm_due;
        let seen = busy.wait_for(JOBS, Duration::from_secs(40)).await;
        assert_eq!(seen.len(), JOBS, "every busy job fired");
        let times: Vec<i64> = seen.values().flatten().copied().collect();
        let busiest = busiest_second(&times);
        let span = times.iter().max().unwrap() - times.iter().min().unwrap();
        println!(
            "{kind:?}, {count} instance(s): the busiest second {busiest} (rate {RATE}), at once {} (parallelism {PARALLELISM}), the burst took {span} µs, the calm key's latest {latest} ms late",
            busy.most_at_once()
        );
        assert!(busiest <= RATE, "{busiest} calls in one second");
        assert!(
            busy.most_at_once() <= PARALLELISM,
            "{} at once",
            busy.most_at_once()
        );
        // Behind the busy key they would be about 8 s late (its backlog takes 10 s from
        // 2 s before their fire time); on a quiet machine they are 7 to 15 ms late, on a
        // loaded one (the store's clock waits out slow samples) up to about a second.
        assert!(
            latest < 3_000,
            "the calm key's jobs waited behind the busy key: {latest} ms late"
        );
        // The rate is used, not undercut: 1,000 at 100/s take about ten seconds.
        assert!(span < 14_000_000, "the burst took {span} µs");
    }

    /// A key's own limits: set, listed, shown and taken away.
    async fn a_key_has_limits_of_its_own(kind: Kind) {
        let _alone = ALONE.lock().await;
        let fleet = Fleet::start(kind, 1, false).await;
        let toc = &fleet.tocs[0];
        let http = reqwest::Client::new();
        toc.put_topic(&http, "hooks", json!({"flow": {"parallelism": 10}}))
            .await;
        let url = toc.url("/v1/topics/hooks/flows/api.example.com:443");
        let r = http
            .put(&url)
            .json(&json!({"rate": 5, "period_ms": 60_000}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let again = http
            .put(&url)
            .json(&json!({"rate": 6}))
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 200);
        let list: Value = toc.get_json(&http, "/v1/topics/hooks/flows").await;
        assert_eq!(list["items"][0]["key"], "api.example.com:443", "{list}");
        assert_eq!(list["items"][0]["limits"]["rate"], 6, "{list}");
        assert_eq!(list["items"][0]["own"], true, "{list}");
        assert_eq!(list["default"]["parallelism"], 10, "{list}");
        let bad = http
            .put(&url)
            .json(&json!({"rate": 0}))
            .send()
            .await
            .unwrap();
        assert_eq!(bad.status(), 400);
        let body: Value = bad.json().await.unwrap();
        assert!(
            body["error"]["message"].as_str().unwrap().contains("rate"),
            "{body}"
        );
        assert_eq!(http.delete(&url).send().await.unwrap().status(), 204);
        assert_eq!(http.delete(&url).send().await.unwrap().status(), 404);
        // A topic that does not exist is just that (auto-creation is on: a read never
        // creates one, and the answer does not blame the setting).
        let missing = http
            .get(toc.url("/v1/topics/missing/flows"))
            .send()
            .await
            .unwrap();
        assert_eq!(missing.status(), 404);
        let body: Value = missing.json().await.unwrap();
        assert_eq!(body["error"]["code"], "topic_not_found", "{body}");
        let other: Value = http.get(&url).send().await.unwrap().json().await.unwrap();
        assert_eq!(
            (other["own"].clone(), other["limits"]["parallelism"].clone()),
            (json!(false), json!(10))
        );
        // A key's own limits say no `key`: only the topic's flow says which key a job goes by.
        let keyed = http
            .put(&url)
            .json(&json!({"rate": 6, "key": "url"}))
            .send()
            .await
            .unwrap();
        assert_eq!(keyed.status(), 422);
        // A topic keyed by URL: a webhook job may not name a key of its own (422), and one
        // that names none is taken.
        toc.put_topic(
            &http,
            "hooks",
            json!({"flow": {"parallelism": 10, "key": "url"}}),
        )
        .await;
        let job = |flow_key: Option<&str>| {
            let mut body = json!({"type": "webhook", "delay_ms": 60_000,
                                  "payload": {"url": "http://127.0.0.1:9/hook"}});
            if let Some(k) = flow_key {
                body["flow_key"] = json!(k);
            }
            http.put(toc.url("/v1/topics/hooks/jobs/j"))
                .json(&body)
                .send()
        };
        let refused = job(Some("around-the-limits")).await.unwrap();
        assert_eq!(refused.status(), 422);
        let body: Value = refused.json().await.unwrap();
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("flow_key"),
            "{body}"
        );
        assert_eq!(job(None).await.unwrap().status(), 201);
        // A topic with no flow: a key has no limits.
        toc.put_topic(&http, "hooks", json!({"flow": null})).await;
        assert_eq!(http.get(&url).send().await.unwrap().status(), 404);
    }

    /// A SIGKILL of the instance holding a key's room mid-burst: the room its runs held ends
    /// with their leases (2 s here), and every job still arrives, never more than the key's
    /// parallelism at once. On Redis the other instance takes the slots over; on memory the
    /// instance restarts on its journal (the counters, not journaled, start empty). What it
    /// cannot show: a receiver's view of calls cut by the kill (they count as answered).
    async fn a_killed_instance_gives_its_keys_room_back(kind: Kind) {
        let _alone = ALONE.lock().await;
        const BURST: usize = 200;
        const AT_ONCE: usize = 3;
        let count = if kind == Kind::Redis { 2 } else { 1 };
        let mut fleet = Fleet::start(kind, count, true).await;
        let http = reqwest::Client::new();
        let busy = Receiver::slow(Duration::from_millis(20));
        let flow = json!({"flow": {"parallelism": AT_ONCE}, "visibility_timeout_ms": 2_000});
        fleet.tocs[0].put_topic(&http, "hooks", flow).await;
        // Every instance hears of the topic: a second of real time, many ownership rounds.
        crate::common::runtime::quiet(1_000).await;
        let due = wall_us() / 1_000 + 500;
        for k in 0..BURST {
            let body = json!({"type": "webhook", "fire_at": due,
                              "payload": {"url": busy.url(), "body": {"id": format!("k-{k}")}}});
            fleet.tocs[k % count]
                .put_job(&http, "hooks", &format!("k-{k}"), &body)
                .await;
        }
        // Mid-burst, the first instance dies.
        busy.wait_for(BURST / 5, Duration::from_secs(20)).await;
        fleet.tocs.remove(0);
        let killed_at = busy.seen().len();
        if kind == Kind::Memory {
            fleet.restart(1).await;
        }
        let seen = busy.wait_for(BURST, Duration::from_secs(60)).await;
        println!(
            "{kind:?}: killed after {killed_at} arrivals; {} of {BURST} arrived, at most {} at once",
            seen.len(),
            busy.most_at_once()
        );
        assert_eq!(seen.len(), BURST, "every job arrived after the kill");
        assert!(
            busy.most_at_once() <= AT_ONCE,
            "{} at once",
            busy.most_at_once()
        );
    }

    /// One key's backlog past the slot's whole waiting room (12,000 due runs of a key that
    /// allows one at a time, against `runtime.flow_max_waiting` 10,000; `TOC_FLOW_BACKLOG`
    /// for more, as with a release `toc` in `TOC_BIN`: a debug build sends about 10,000
    /// runs a second back to the store, so at 50,000 the calm key's job waits behind that
    /// pass for seconds, as the first pass over the backlog is in fire-time order): the slot holds only
    /// the key's share (`runtime.flow_max_waiting_per_key`, 1,000) in memory, sends the rest
    /// back to the store, and another key's job in the same slot fires within 1 s of its
    /// time. The topic keys webhooks by their URL (`flow.key = "url"`), so the two receivers
    /// are two keys whatever a job says. What it cannot show: the order in which the
    /// sent-back runs come back (they are due back in turn, at the pace the key's line moves).
    async fn one_keys_backlog_never_stops_another_key(kind: Kind) {
        let _alone = ALONE.lock().await;
        let backlog: usize = std::env::var("TOC_FLOW_BACKLOG")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(12_000);
        const SHARE: u64 = 1_000;
        let fleet = Fleet::start(kind, 1, false).await;
        let toc = &fleet.tocs[0];
        let http = reqwest::Client::new();
        let hog = Receiver::slow(Duration::from_millis(100));
        let calm = Receiver::start();
        let flow = json!({"slots": 1, "flow": {"parallelism": 1, "key": "url"}});
        toc.put_topic(&http, "hooks", flow).await;
        // Made due in an hour by batches of resets that create them, then made due at once
        // by batches of resets: the line must fill from the store, whatever the writes take.
        let create = json!({"type": "webhook", "payload": {"url": hog.url(), "body": {"id": "h"}}});
        for delay_ms in [3_600_000, 0] {
            for chunk in (0..backlog).collect::<Vec<_>>().chunks(5_000) {
                let resets: Vec<Value> = chunk
                    .iter()
                    .map(|k| json!({"id": format!("h-{k}"), "delay_ms": delay_ms}))
                    .collect();
                let r = http
                    .post(toc.url("/v1/topics/hooks/resets"))
                    .json(&json!({"resets": resets, "create": create}))
                    .send()
                    .await
                    .unwrap();
                assert!(r.status().is_success(), "{}", r.text().await.unwrap());
            }
        }
        // The hog's line fills; with the share it stops at the share.
        let waiting_here = || async {
            let list: Value = toc.get_json(&http, "/v1/topics/hooks/flows").await;
            list["waiting_here"].as_u64().unwrap_or(0)
        };
        crate::common::runtime::eventually(30, || async {
            match waiting_here().await {
                n if n >= SHARE => Ok(()),
                n => Err(format!("{n} runs of the hog wait")),
            }
        })
        .await;
        let due = wall_us() / 1_000 + 1_000;
        let body = json!({"type": "webhook", "fire_at": due,
                          "payload": {"url": calm.url(), "body": {"id": "calm"}}});
        toc.put_job(&http, "hooks", "calm", &body).await;
        let seen = calm.wait_for(1, Duration::from_secs(15)).await;
        let late = seen
            .get("calm")
            .and_then(|a| a.first())
            .map(|us| us / 1_000 - due);
        let held = waiting_here().await;
        println!(
            "{kind:?}: the calm key's job {late:?} ms late; the hog holds {held} waiting runs here"
        );
        assert!(
            late.is_some_and(|l| (0..1_000).contains(&l)),
            "the calm key waited behind the hog's backlog: {late:?} ms late, {held} of the hog's runs waiting here"
        );
        assert!(
            held <= SHARE,
            "the hog holds {held} runs in memory, past its share"
        );
    }

    /// What the store holds of the topic and its keys: on memory the journal's size, on
    /// Redis the topic's settings JSON and how many fields the keys' hash has.
    async fn stored(fleet: &Fleet) -> (u64, String, usize) {
        match &fleet.redis {
            None => {
                let journal = fleet.dir.path().join("journal");
                (std::fs::metadata(&journal).unwrap().len(), String::new(), 0)
            }
            Some(r) => {
                let client = redis::Client::open(r.url()).unwrap();
                let mut c = client.get_multiplexed_async_connection().await.unwrap();
                let json: String = redis::cmd("HGET")
                    .arg("toc:topics")
                    .arg("hooks")
                    .query_async(&mut c)
                    .await
                    .unwrap();
                let keys: usize = redis::cmd("HLEN")
                    .arg("toc:{hooks}:flows")
                    .query_async(&mut c)
                    .await
                    .unwrap();
                (0, json, keys)
            }
        }
    }

    /// A key's own limits live apart from the topic's settings: 1,000 keys set one by one
    /// grow the memory journal by about a key's record each (each wrote the whole topic
    /// with every key before, 80 MB for 1,000) and leave the topic's JSON on Redis as it
    /// was; the topic's view counts them and lists none (179 KB before); the 1,001st is
    /// refused naming `flows`; a change of the topic keeps them; a restart finds them.
    async fn a_keys_limits_are_written_apart_from_the_topic(kind: Kind) {
        let _alone = ALONE.lock().await;
        const KEYS: usize = 1_000;
        let mut fleet = Fleet::start(kind, 1, true).await;
        let http = reqwest::Client::new();
        fleet.tocs[0]
            .put_topic(&http, "hooks", json!({"flow": {"parallelism": 10}}))
            .await;
        let before = stored(&fleet).await;
        let toc = &fleet.tocs[0];
        for k in 0..KEYS {
            let r = http
                .put(toc.url(&format!("/v1/topics/hooks/flows/host-{k}:443")))
                .json(&json!({"rate": 5, "period_ms": 60_000}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201, "key {k}");
        }
        let after = stored(&fleet).await;
        println!(
            "{kind:?}: before {before:?}, after 1,000 keys {:?}",
            (after.0, after.1.len(), after.2)
        );
        match kind {
            Kind::Memory => assert!(
                after.0.saturating_sub(before.0) < 400 * KEYS as u64,
                "the journal grew by {} bytes for {KEYS} keys",
                after.0.saturating_sub(before.0)
            ),
            Kind::Redis => {
                assert_eq!(after.1, before.1, "the topic's settings were not written");
                assert_eq!(after.2, KEYS, "one field a key");
            }
        }
        let full = http
            .put(toc.url("/v1/topics/hooks/flows/one-more:443"))
            .json(&json!({"rate": 5}))
            .send()
            .await
            .unwrap();
        assert_eq!(full.status(), 400);
        let body: Value = full.json().await.unwrap();
        assert!(
            body["error"]["message"].as_str().unwrap().contains("flows"),
            "{body}"
        );
        let view = http.get(toc.url("/v1/topics/hooks")).send().await.unwrap();
        let text = view.text().await.unwrap();
        let view: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(view["own_flow_keys"], KEYS, "{view}");
        assert!(view.get("flows").is_none(), "{view}");
        assert!(
            text.len() < 4_096,
            "the topic's view is {} bytes",
            text.len()
        );
        // A change of the topic keeps the keys' limits.
        toc.put_topic(&http, "hooks", json!({"max_attempts": 3}))
            .await;
        let restarted = match kind {
            Kind::Memory => {
                fleet.tocs.clear();
                fleet.restart(1).await;
                true
            }
            Kind::Redis => false,
        };
        let toc = &fleet.tocs[0];
        let list: Value = toc.get_json(&http, "/v1/topics/hooks/flows").await;
        assert_eq!(
            list["items"].as_array().map(Vec::len),
            Some(KEYS),
            "every key's limits kept (restarted: {restarted})"
        );
        let one: Value = toc
            .get_json(&http, "/v1/topics/hooks/flows/host-500:443")
            .await;
        assert_eq!(
            (one["own"].clone(), one["limits"]["rate"].clone()),
            (json!(true), json!(5)),
            "{one}"
        );
    }

    /// Settings written by an earlier build kept the keys' own limits in the topic's JSON:
    /// they are read as before, and a key removed stays removed (they moved to the keys'
    /// hash, the JSON was written without them), across a restart. Redis only: the memory
    /// journal keeps reading its topic records as they were written.
    #[tokio::test]
    async fn keys_limits_an_earlier_build_kept_in_the_topic_move_apart() {
        let _alone = ALONE.lock().await;
        let mut fleet = Fleet::start(Kind::Redis, 0, false).await;
        let client = redis::Client::open(fleet.redis.as_ref().unwrap().url()).unwrap();
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let legacy = json!({"name": "hooks", "flows": {"old:443": {"rate": 5, "period_ms": 1_000},
                                                       "kept:443": {"parallelism": 2}}});
        let _: i64 = redis::cmd("HSET")
            .arg("toc:topics")
            .arg("hooks")
            .arg(legacy.to_string())
            .query_async(&mut c)
            .await
            .unwrap();
        fleet.restart(1).await;
        let http = reqwest::Client::new();
        let url = |toc: &common::process::Toc, key: &str| {
            toc.url(&format!("/v1/topics/hooks/flows/{key}"))
        };
        let old: Value = http
            .get(url(&fleet.tocs[0], "old:443"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            (old["own"].clone(), old["limits"]["rate"].clone()),
            (json!(true), json!(5)),
            "{old}"
        );
        let gone = http
            .delete(url(&fleet.tocs[0], "old:443"))
            .send()
            .await
            .unwrap();
        assert_eq!(gone.status(), 204);
        let json: String = redis::cmd("HGET")
            .arg("toc:topics")
            .arg("hooks")
            .query_async(&mut c)
            .await
            .unwrap();
        assert!(
            !json.contains("flows"),
            "the topic's JSON keeps no keys: {json}"
        );
        fleet.tocs.clear();
        fleet.restart(1).await;
        let old = http
            .get(url(&fleet.tocs[0], "old:443"))
            .send()
            .await
            .unwrap();
        assert_eq!(old.status(), 404, "a removed key stays removed");
        let kept: Value = http
            .get(url(&fleet.tocs[0], "kept:443"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(kept["limits"]["parallelism"], 2, "{kept}");
    }

    engine_matrix!(
        #[tokio::test] crate::common::kind;
        a_keys_limits_are_written_apart_from_the_topic,
        one_keys_backlog_never_stops_another_key,
        a_burst_for_one_receiver_keeps_to_its_key,
        a_key_has_limits_of_its_own,
        a_killed_instance_gives_its_keys_room_back,
    );
}

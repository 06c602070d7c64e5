//! Labels and bulk operations: jobs listed, cancelled and requeued together by a label and a
//! fire-time range, through the store on both engines and through real `toc serve`
//! processes (on memory, and two sharing one Redis) while resets move the jobs.
//!
//! What this proves: a label is kept with its job and only with it (a plain job still has no
//! record); a filtered listing pages through every labelled job once; a bulk cancel takes
//! exactly the labelled jobs in its range, each once, though resets move some of them
//! backwards and forwards during it; a bulk requeue takes the labelled dead letters. What it
//! cannot: a slot with more than a thousand labelled jobs whose resets move them behind the
//! walk in every one of five walks (the walk's bound, said in docs/operations.md).

#[macro_use]
mod common;

use futures_util::StreamExt;
use serde_json::{Value, json};
use timeout_center::conformance::*;
use timeout_center::labels::LabelFilter;
use timeout_center::store::{JobFilter, ListQuery};
use timeout_center::*;

use common::Engine;

const NOW: Millis = 1_700_000_000_000;

fn spring() -> Option<LabelFilter> {
    Some(LabelFilter::parse("campaign:spring").unwrap())
}

async fn labelled_jobs_are_listed_and_cancelled_together(e: Engine) {
    let s = &*e.store;
    for i in 0..30 {
        let mut job = NewJob::new(format!("j{i:02}"), NOW + 1_000 * i);
        job = match i % 3 {
            0 => job.label("campaign", "spring"),
            1 => job.label("campaign", "autumn").label("tier", "gold"),
            _ => job,
        };
        s.schedule("t", job, ScheduleMode::Upsert, NOW)
            .await
            .unwrap();
    }
    let plain = s.get("t", &JobRef::new("j02")).await.unwrap().unwrap();
    assert!(
        plain.labels.is_empty() && plain.created_at.is_none(),
        "a plain job keeps no record: {plain:?}"
    );
    let labelled = s.get("t", &JobRef::new("j01")).await.unwrap().unwrap();
    assert_eq!(
        labelled.labels.get("tier").map(String::as_str),
        Some("gold")
    );

    // Pages of 4 through the 10 spring jobs, in fire-time order, each once.
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let q = ListQuery {
            limit: 4,
            cursor,
            label: spring(),
            ..ListQuery::default()
        };
        let page = s.list("t", &q).await.unwrap();
        seen.extend(page.items.iter().map(|j| j.id.clone()));
        match page.next {
            Some(n) => cursor = Some(n),
            None => break,
        }
    }
    let want: Vec<String> = (0..30).step_by(3).map(|i| format!("j{i:02}")).collect();
    assert_eq!(seen, want);

    // Cancel the spring jobs due in the first 15 s: j00 .. j12, five of them.
    let filter = JobFilter {
        label: spring(),
        from: NOW,
        to: NOW + 14_000,
        limit: None,
    };
    assert_eq!(s.cancel_where("t", &filter).await.unwrap(), 5);
    assert_eq!(
        s.cancel_where("t", &filter).await.unwrap(),
        0,
        "none counted twice"
    );
    assert!(s.get("t", &JobRef::new("j12")).await.unwrap().is_none());
    assert!(s.get("t", &JobRef::new("j15")).await.unwrap().is_some());
    assert!(s.get("t", &JobRef::new("j01")).await.unwrap().is_some());
    // A range alone takes every job in it; a limit at most that many, the rest next time
    // (how `toc job cancel-many` moves its progress bar).
    let late = JobFilter {
        label: None,
        from: NOW + 25_000,
        to: Millis::MAX,
        limit: Some(2),
    };
    assert_eq!(
        s.cancel_where("t", &late).await.unwrap(),
        2,
        "two of j25 to j29"
    );
    let rest = JobFilter {
        limit: None,
        ..late
    };
    assert_eq!(
        s.cancel_where("t", &rest).await.unwrap(),
        3,
        "the other three"
    );
}

/// Labels out of bounds are refused, naming the field, and nothing is stored.
async fn labels_out_of_bounds_are_refused_naming_them(e: Engine) {
    let s = &*e.store;
    let bad = NewJob::new("x", NOW).label("no spaces", "v");
    match s.schedule("t", bad, ScheduleMode::Upsert, NOW).await {
        Err(Error::Invalid { field, .. }) => assert_eq!(field, "labels"),
        other => panic!("a bad label key was not refused: {other:?}"),
    }
    let mut many = NewJob::new("y", NOW);
    for i in 0..9 {
        many = many.label(format!("k{i}"), "v");
    }
    assert!(
        s.schedule("t", many, ScheduleMode::Upsert, NOW)
            .await
            .is_err()
    );
    assert!(s.get("t", &JobRef::new("x")).await.unwrap().is_none());
}

engine_matrix!(
    #[tokio::test] crate::common::Engine::of;
    labelled_jobs_are_listed_and_cancelled_together,
    labels_out_of_bounds_are_refused_naming_them,
);

mod processes {
    use super::*;
    use common::process::wall_us;
    use common::{Fleet, Kind};

    const LABELLED: usize = 20_000;
    const OTHERS: usize = 2_000;

    /// 20,000 jobs of a campaign and 2,000 others; a bulk cancel of the campaign while
    /// resets move 2,000 of its jobs back and forth: exactly the campaign's jobs are
    /// cancelled, each counted once, and the others stay.
    async fn a_bulk_cancel_takes_a_campaign_while_resets_move_it(kind: Kind) {
        let count = if kind == Kind::Redis { 2 } else { 1 };
        let fleet = Fleet::start(kind, count, false).await;
        let all = &fleet.tocs;
        let http = reqwest::Client::new();
        let base = wall_us() / 1_000 + 3_600_000;
        let puts = (0..LABELLED + OTHERS).map(|k| {
            let (http, toc) = (http.clone(), &all[k % count]);
            async move {
                let mut body = json!({"fire_at": base + (k as i64 % 5_000) * 100});
                if k < LABELLED {
                    body["labels"] = json!({"campaign": "spring"});
                }
                toc.put_job(&http, "t", &format!("j{k}"), &body).await;
            }
        });
        futures_util::stream::iter(puts)
            .buffer_unordered(32)
            .collect::<Vec<()>>()
            .await;

        // Resets move the campaign's jobs, earlier and later, from before the cancel until
        // it has answered (200 at a time, a different 200 each round).
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (first, first_done) = tokio::sync::oneshot::channel();
        let mover = {
            let (http, url) = (http.clone(), all[count - 1].url("/v1/topics/t/resets"));
            let done = done.clone();
            tokio::spawn(async move {
                let (mut moved, mut rounds, mut first) = (0, 0i64, Some(first));
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    let resets: Vec<Value> = (0..200)
                        .map(|i| {
                            let k = (rounds * 200 + i) % (LABELLED as i64 / 9);
                            let shift = if k % 2 == 0 { -3_000_000 } else { 3_000_000 };
                            json!({"id": format!("j{}", k * 9), "fire_at": base + shift + k})
                        })
                        .collect();
                    let r: Value = http
                        .post(&url)
                        .json(&json!({"resets": resets}))
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap();
                    moved += r["reset"].as_u64().unwrap_or(0);
                    rounds += 1;
                    if let Some(tx) = first.take() {
                        let _ = tx.send(());
                    }
                }
                (moved, rounds)
            })
        };
        first_done.await.unwrap();
        let r = http
            .delete(all[0].url("/v1/topics/t/jobs?label=campaign:spring"))
            .send()
            .await
            .unwrap();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(r.status(), 200);
        let answer: Value = r.json().await.unwrap();
        let (moved, rounds) = mover.await.unwrap();
        println!(
            "{kind:?}: {answer} while {rounds} rounds of resets moved {moved} of the campaign's jobs"
        );
        assert_eq!(answer["cancelled"], LABELLED as u64, "{answer}");
        // Nothing of the campaign is left, and the others are all there.
        let left: Value = all[0]
            .get_json(&http, "/v1/topics/t/jobs?label=campaign:spring&limit=10")
            .await;
        assert_eq!(left["items"].as_array().unwrap().len(), 0, "{left}");
        let topic = all[0].get_json(&http, "/v1/topics/t").await;
        assert_eq!(topic["scheduled"], OTHERS as u64, "{topic}");
        // A bulk change asks for some jobs.
        let bare = http
            .delete(all[0].url("/v1/topics/t/jobs"))
            .send()
            .await
            .unwrap();
        assert_eq!(bare.status(), 422);
    }

    /// Dead letters of one label are requeued together; the others stay dead.
    async fn a_bulk_requeue_takes_a_labels_dead_letters(kind: Kind) {
        let fleet = Fleet::start(kind, 1, false).await;
        let toc = &fleet.tocs[0];
        let http = reqwest::Client::new();
        // Webhooks to a closed port fail at once; one attempt each, so they die.
        let url = format!(
            "http://127.0.0.1:{}/hook",
            common::redis_server::free_port()
        );
        for k in 0..6 {
            let mut body = json!({"type": "webhook", "delay_ms": 0, "max_attempts": 1,
                                  "payload": {"url": url}});
            if k % 2 == 0 {
                body["labels"] = json!({"customer": "acme"});
            }
            toc.put_job(&http, "d", &format!("d{k}"), &body).await;
        }
        crate::common::runtime::eventually(20, || async {
            let dead = toc.get_json(&http, "/v1/topics/d/dead").await;
            if dead["items"].as_array().unwrap().len() == 6 {
                Ok(())
            } else {
                Err(format!("the jobs never died: {dead}"))
            }
        })
        .await;
        let r: Value = http
            .post(toc.url("/v1/topics/d/dead/requeue?label=customer:acme"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["requeued"], 3, "{r}");
        // The requeued ones fire (and die) again; the others stayed dead throughout.
        let dead = toc.get_json(&http, "/v1/topics/d/dead").await;
        let ids: Vec<&str> = dead["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|j| j["id"].as_str())
            .collect();
        for id in ["d1", "d3", "d5"] {
            assert!(ids.contains(&id), "{id} stays dead: {dead}");
        }
        // A bulk deletion takes what its filter names: no letter of a label none has, and at
        // most its limit of every letter (`from=0`).
        let deleted = |query: &'static str| {
            let (http, toc) = (&http, toc);
            async move {
                let r = http
                    .delete(toc.url(&format!("/v1/topics/d/dead?{query}")))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                r.json::<Value>().await.unwrap()["deleted"].clone()
            }
        };
        // Once the requeued three died again, all six are dead letters.
        crate::common::runtime::eventually(20, || async {
            let dead = toc.get_json(&http, "/v1/topics/d/dead").await;
            if dead["items"].as_array().unwrap().len() == 6 {
                Ok(())
            } else {
                Err(format!("the requeued jobs never died again: {dead}"))
            }
        })
        .await;
        let before = 6;
        assert_eq!(deleted("label=customer:none").await, 0);
        let gone = deleted("from=0&limit=2").await;
        assert_eq!(gone, 2);
        let left = toc.get_json(&http, "/v1/topics/d/dead").await["items"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(left, before - 2, "two deleted, the rest kept");
    }

    engine_matrix!(
        #[tokio::test] crate::common::kind;
        a_bulk_cancel_takes_a_campaign_while_resets_move_it,
        a_bulk_requeue_takes_a_labels_dead_letters,
    );
}

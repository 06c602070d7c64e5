//! The two engines held to one behaviour: random sequences of operations run on the memory
//! engine and on Redis side by side, under one controlled clock, and after every step the
//! answers, every job (`get`), the topic's `stats` and the pumped jobs must agree.
//!
//! `TOC_DIFF_CASES` sets how many sequences run (128 by default, the CI count); for a longer
//! search run `TOC_DIFF_CASES=5000 cargo test --release --test differential`. A failure is
//! shrunk to a short sequence and printed with the step where the engines parted.

mod common;
use common::door;

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use serde_json::json;
use timeout_center::Store;
use timeout_center::conformance::*;
use timeout_center::*;

use common::RedisServer;

const T0: Millis = 1_700_000_000_000;
const IDS: u8 = 6;
const SLOTS: u32 = 2;

#[derive(Debug, Clone)]
enum Kind {
    Plain,
    /// A type and payload of its own: the job has a record.
    Typed,
    /// A debounce cap at this many ms after now.
    Capped(Millis),
    /// One attempt only.
    OneAttempt,
    /// Recurring, every this many ms, with one attempt (so a retry ends the fire too).
    Every(u64),
    /// Recurring as `Every`, ending after this many fires (`repeat.limit`): its last fire
    /// is settled as the series' end.
    Limited(u64, u32),
}

#[derive(Debug, Clone)]
enum Outcome {
    Ack,
    Retry(Millis),
    Repeat(Millis),
    Bury,
    Release,
}

#[derive(Debug, Clone)]
enum ClaimPick {
    Ack,
    Retry(u64),
    Bury,
}

#[derive(Debug, Clone)]
enum Op {
    Schedule {
        id: u8,
        mode: ScheduleMode,
        delay: Millis,
        kind: Kind,
    },
    ResetMany {
        items: Vec<(u8, Millis)>,
        create: bool,
    },
    Cancel(u8),
    Pump(u32),
    /// Settles runs picked from every run of the slot handed out so far, newest first (stale
    /// ones included).
    Settle {
        slot: u32,
        picks: Vec<(usize, Outcome)>,
    },
    Extend {
        pick: usize,
        by: Millis,
    },
    /// A consumer's claim: a pump under its own lease.
    Claim {
        slot: u32,
        limit: usize,
        lease_ms: u64,
    },
    /// Consumers' outcomes by job and token, of runs picked as `Settle` picks them.
    SettleClaims {
        slot: u32,
        picks: Vec<(usize, ClaimPick)>,
    },
    /// A consumer's touch by job and token.
    Touch {
        pick: usize,
        by: Millis,
    },
    Requeue(u8),
    DeadDelete(u8),
    Advance(Millis),
}

fn id() -> impl Strategy<Value = u8> {
    0..IDS
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Ack),
        (0..600i64).prop_map(Outcome::Retry),
        (0..600i64).prop_map(Outcome::Repeat),
        Just(Outcome::Bury),
        Just(Outcome::Release),
    ]
}

fn claim_pick() -> impl Strategy<Value = ClaimPick> {
    prop_oneof![
        Just(ClaimPick::Ack),
        // A given delay: the topic's backoff has jitter, which the engines draw apart.
        (0..600u64).prop_map(ClaimPick::Retry),
        Just(ClaimPick::Bury),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let mode = prop_oneof![
        Just(ScheduleMode::Upsert),
        Just(ScheduleMode::CreateOnly),
        Just(ScheduleMode::ResetOnly),
    ];
    let kind = prop_oneof![
        Just(Kind::Plain),
        Just(Kind::Typed),
        (0..500i64).prop_map(Kind::Capped),
        Just(Kind::OneAttempt),
        (1..400u64).prop_map(Kind::Every),
        (1..400u64, 1..4u32).prop_map(|(ms, n)| Kind::Limited(ms, n)),
    ];
    prop_oneof![
        4 => (id(), mode, 0..600i64, kind)
            .prop_map(|(id, mode, delay, kind)| Op::Schedule { id, mode, delay, kind }),
        2 => (prop::collection::vec((id(), 0..600i64), 1..5), any::<bool>())
            .prop_map(|(items, create)| Op::ResetMany { items, create }),
        1 => id().prop_map(Op::Cancel),
        3 => (0..SLOTS).prop_map(Op::Pump),
        3 => (0..SLOTS, prop::collection::vec((0..16usize, outcome()), 1..4))
            .prop_map(|(slot, picks)| Op::Settle { slot, picks }),
        1 => (0..16usize, 0..3_000i64).prop_map(|(pick, by)| Op::Extend { pick, by }),
        // Every due job: under a smaller limit the engines may take different jobs of one
        // due set (memory in the order they came due, Redis by fire time and id).
        2 => (0..SLOTS, 1..2_000u64)
            .prop_map(|(slot, lease_ms)| Op::Claim { slot, limit: 100, lease_ms }),
        2 => (0..SLOTS, prop::collection::vec((0..16usize, claim_pick()), 1..4))
            .prop_map(|(slot, picks)| Op::SettleClaims { slot, picks }),
        1 => (0..16usize, 0..3_000i64).prop_map(|(pick, by)| Op::Touch { pick, by }),
        1 => id().prop_map(Op::Requeue),
        1 => id().prop_map(Op::DeadDelete),
        3 => (0..800i64).prop_map(Op::Advance),
    ]
}

fn job_id(i: u8) -> String {
    format!("j{i}")
}

fn new_job(i: u8, fire_at: Millis, kind: &Kind, now: Millis) -> NewJob {
    let job = NewJob::new(job_id(i), fire_at);
    match kind {
        Kind::Plain => job,
        Kind::Typed => job.job_type("webhook").payload(json!({"n": i})),
        Kind::Capped(after) => job.max_fire_at(now + after),
        Kind::OneAttempt => job.max_attempts(1),
        Kind::Every(ms) => job
            .repeat(Recurrence::every(std::time::Duration::from_millis(*ms)).unwrap())
            .max_attempts(1),
        Kind::Limited(ms, limit) => {
            let series = Series {
                limit: Some(*limit),
                ..Series::default()
            };
            let every = Recurrence::every(std::time::Duration::from_millis(*ms)).unwrap();
            job.repeat(every.with_series(series).unwrap())
                .max_attempts(1)
        }
    }
}

/// One engine's side of a case: its store and the runs it handed out, in order.
struct Side {
    store: SharedStore,
    runs: Vec<Leased>,
}

/// The pair of engines of one case, on one topic.
struct Pair {
    topic: String,
    sides: [Side; 2],
    now: Millis,
}

/// Compares the two engines' answers to one step.
fn agree<T: PartialEq + std::fmt::Debug>(
    step: usize,
    op: &Op,
    what: &str,
    memory: T,
    redis: T,
) -> Result<(), TestCaseError> {
    if memory != redis {
        return Err(TestCaseError::fail(format!(
            "step {step} ({op:?}): {what} differs\n  memory: {memory:?}\n  redis:  {redis:?}"
        )));
    }
    Ok(())
}

/// A run as both engines must report it. Tokens are opaque: each engine numbers the runs of
/// one pump in its own order (Redis by fire time and id, memory as jobs came due), so they
/// are compared by what they do (a stale one is refused), not by value.
fn run_view(l: &Leased) -> (String, u32, Millis, Millis) {
    (
        l.job.id.clone(),
        l.job.attempts,
        l.job.fire_at,
        l.lease_until,
    )
}

/// What a pump or claim answered, as both engines must report it; its runs join `runs`,
/// in one order on both sides (runs are picked by position later).
fn took(p: Result<Pumped>, runs: &mut Vec<Leased>) -> String {
    let view = format!(
        "{:?}",
        p.as_ref().map(|p| {
            let mut jobs: Vec<_> = p.jobs.iter().map(run_view).collect();
            jobs.sort();
            (jobs, p.expired, p.next_at)
        })
    );
    if let Ok(mut p) = p {
        p.jobs.sort_by(|a, b| a.job.id.cmp(&b.job.id));
        runs.extend(p.jobs);
    }
    view
}

/// The run of `slot` at `pick`, counted from the newest (recent runs are the live ones).
fn pick_run(runs: &[Leased], slot: u32, pick: usize) -> Option<&Leased> {
    let runs: Vec<&Leased> = runs.iter().filter(|r| r.slot == slot).collect();
    let back = pick % runs.len().max(1);
    runs.get(runs.len().checked_sub(back + 1)?).copied()
}

impl Pair {
    async fn step(&mut self, step: usize, op: &Op) -> Result<(), TestCaseError> {
        let (topic, now) = (self.topic.clone(), self.now);
        let mut answers = Vec::new();
        for side in &mut self.sides {
            let s = &side.store;
            let answer = match op {
                Op::Schedule {
                    id,
                    mode,
                    delay,
                    kind,
                } => {
                    let job = new_job(*id, now + delay, kind, now);
                    format!("{:?}", s.schedule(&topic, job, *mode, now).await)
                }
                Op::ResetMany { items, create } => {
                    let resets: Vec<Reset> = items
                        .iter()
                        .map(|(id, delay)| Reset::new(job_id(*id), now + delay))
                        .collect();
                    let spec = create.then(CreateSpec::default);
                    let mut r = s.reset_many(&topic, &resets, spec.as_ref(), now).await;
                    if let Ok(r) = &mut r {
                        r.missing.sort();
                        r.heads.sort_by_key(|h| h.slot);
                    }
                    format!("{r:?}")
                }
                Op::Cancel(id) => {
                    format!("{:?}", s.cancel(&topic, &JobRef::new(job_id(*id))).await)
                }
                Op::Pump(slot) => took(
                    door(s, &topic, *slot, 0).await.pump(now, 100).await,
                    &mut side.runs,
                ),
                Op::Settle { slot, picks } => {
                    let batch: Vec<Settlement> = picks
                        .iter()
                        .filter_map(|(pick, outcome)| {
                            let run = pick_run(&side.runs, *slot, *pick)?.clone();
                            let outcome = match outcome {
                                Outcome::Ack => RunOutcome::Done,
                                Outcome::Retry(d) => RunOutcome::Retry {
                                    error: "failed".into(),
                                    at: now + d,
                                },
                                Outcome::Repeat(d) => RunOutcome::Repeat {
                                    at: now + d,
                                    error: None,
                                },
                                Outcome::Bury => RunOutcome::Dead {
                                    error: "buried".into(),
                                },
                                Outcome::Release => RunOutcome::Release,
                            };
                            Some(Settlement::new(run, outcome, now))
                        })
                        .collect();
                    format!(
                        "{:?}",
                        door(s, &topic, *slot, 0).await.settle(&batch, now).await
                    )
                }
                Op::Claim {
                    slot,
                    limit,
                    lease_ms,
                } => took(
                    door(s, &topic, *slot, 0)
                        .await
                        .claim(now, *limit, *lease_ms)
                        .await,
                    &mut side.runs,
                ),
                Op::SettleClaims { slot, picks } => {
                    let outcomes: Vec<ClaimOutcome> = picks
                        .iter()
                        .filter_map(|(pick, what)| {
                            let run = pick_run(&side.runs, *slot, *pick)?;
                            let outcome = match what {
                                ClaimPick::Ack => timeout_center::Outcome::Done,
                                ClaimPick::Retry(d) => timeout_center::Outcome::Retry {
                                    error: "failed".into(),
                                    delay: Some(std::time::Duration::from_millis(*d)),
                                },
                                ClaimPick::Bury => timeout_center::Outcome::Dead {
                                    error: "buried".into(),
                                },
                            };
                            Some(ClaimOutcome {
                                job: JobRef::new(run.job.id.clone()),
                                token: run.token,
                                outcome,
                            })
                        })
                        .collect();
                    format!("{:?}", s.settle_claims(&topic, &outcomes, now).await)
                }
                Op::Touch { pick, by } => match side.runs.get(pick % side.runs.len().max(1)) {
                    Some(run) => format!(
                        "{:?}",
                        s.touch(
                            &topic,
                            &JobRef::new(run.job.id.clone()),
                            run.token,
                            now + by
                        )
                        .await
                    ),
                    None => "no run".to_string(),
                },
                Op::Extend { pick, by } => match side.runs.get(pick % side.runs.len().max(1)) {
                    Some(run) => format!(
                        "{:?}",
                        door(s, &topic, run.slot, 0)
                            .await
                            .extend(run, now + by)
                            .await
                    ),
                    None => "no run".to_string(),
                },
                Op::Requeue(id) => {
                    format!(
                        "{:?}",
                        s.dead_requeue(&topic, &JobRef::new(job_id(*id)), now).await
                    )
                }
                Op::DeadDelete(id) => {
                    format!(
                        "{:?}",
                        s.dead_delete(&topic, &JobRef::new(job_id(*id))).await
                    )
                }
                Op::Advance(ms) => {
                    format!("{}", now + ms)
                }
            };
            answers.push(answer);
        }
        agree(step, op, "the answer", &answers[0], &answers[1])?;
        if let Op::Advance(ms) = op {
            self.now += ms;
        }
        self.compare_state(step, op).await
    }

    /// Every job, the stats, the listings and the dead letters, on both sides.
    async fn compare_state(&self, step: usize, op: &Op) -> Result<(), TestCaseError> {
        let mut views = Vec::new();
        for side in &self.sides {
            let s = &side.store;
            let mut jobs = BTreeMap::new();
            for i in 0..IDS {
                let job = s.get(&self.topic, &JobRef::new(job_id(i))).await;
                jobs.insert(i, format!("{job:?}"));
            }
            let stats = match s.find_topic(&self.topic).await.unwrap() {
                Some(_) => format!("{:?}", s.stats(&self.topic).await),
                None => "no topic".to_string(),
            };
            let dead = match s.find_topic(&self.topic).await.unwrap() {
                Some(_) => format!("{:?}", s.dead_list(&self.topic, None, 100).await),
                None => "no topic".to_string(),
            };
            // The listings of scheduled and running jobs, page by page (3 a page).
            let mut listed = Vec::new();
            if s.find_topic(&self.topic).await.unwrap().is_some() {
                for state in [JobState::Scheduled, JobState::Running] {
                    let mut q = timeout_center::store::ListQuery {
                        state,
                        limit: 3,
                        ..Default::default()
                    };
                    loop {
                        let page = s.list(&self.topic, &q).await;
                        listed.push(format!("{page:?}"));
                        match page.ok().and_then(|p| p.next) {
                            Some(next) => q.cursor = Some(next),
                            None => break,
                        }
                    }
                }
            }
            views.push((jobs, stats, dead, listed));
        }
        for i in 0..IDS {
            agree(
                step,
                op,
                &format!("get {}", job_id(i)),
                &views[0].0[&i],
                &views[1].0[&i],
            )?;
        }
        agree(step, op, "stats", &views[0].1, &views[1].1)?;
        agree(step, op, "listings", &views[0].3, &views[1].3)?;
        agree(step, op, "dead letters", &views[0].2, &views[1].2)
    }
}

fn redis() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(RedisServer::start_for_process)
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    })
}

fn cases() -> u32 {
    std::env::var("TOC_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128)
}

/// Runs one sequence on a fresh memory store and a fresh topic of the shared Redis.
fn run_case(ops: Vec<Op>) -> Result<(), TestCaseError> {
    static CASE: AtomicU32 = AtomicU32::new(0);
    let topic = format!("d{}", CASE.fetch_add(1, Ordering::Relaxed));
    runtime().block_on(async move {
        let options = StoreOptions::default();
        let memory: SharedStore = std::sync::Arc::new(Store::memory(options.clone()));
        let redis: SharedStore =
            std::sync::Arc::new(Store::redis(&redis().url(), options).await.unwrap());
        let config = TopicConfig {
            slots: SLOTS,
            max_attempts: 2,
            visibility_timeout_ms: 1_000,
            ..TopicConfig::named(&topic)
        };
        memory.put_topic(config.clone()).await.unwrap();
        redis.put_topic(config).await.unwrap();
        let mut pair = Pair {
            topic,
            sides: [
                Side {
                    store: memory,
                    runs: Vec::new(),
                },
                Side {
                    store: redis,
                    runs: Vec::new(),
                },
            ],
            now: T0,
        };
        for (step, op) in ops.iter().enumerate() {
            pair.step(step, op).await?;
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })]

    #[test]
    fn both_engines_agree_on_every_step(ops in prop::collection::vec(op(), 1..40)) {
        run_case(ops)?;
    }
}

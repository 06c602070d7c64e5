//! The memory engine's figures, in one run on one core:
//!
//! 1. the timing wheel beside a `BTreeMap` baseline written for the comparison (an ordered
//!    set of (fire time, key) and each key's time), both behind the same `HashMap` from job
//!    id to key as the engine uses: schedule, reset, cancel and pump operations per second;
//! 2. the whole engine through the `Store` trait (no journal): `schedule`, `reset_many`
//!    (batches of 1,000), `cancel`, and `pump` (batches of 1,000).
//!
//! Firing lateness at 10,000 fires per second is `TOC_BENCH_STORE=memory cargo bench --bench
//! lateness`. Run this one with `cargo bench --bench memory_engine`; `TOC_BENCH_JOBS` sets the
//! job count (default 1,000,000).

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use rand::{Rng, SeedableRng};
use timeout_center::Store;
use timeout_center::conformance::Wheel;
use timeout_center::conformance::*;
use timeout_center::*;

const T0: u64 = 1_700_000_000_000;

/// The two indexes under comparison.
trait Index {
    fn insert(&mut self, key: u32, when: u64);
    fn remove(&mut self, key: u32);
    /// Takes every key due by `now`; returns how many.
    fn pump(&mut self, now: u64) -> usize;
}

impl Index for Wheel {
    fn insert(&mut self, key: u32, when: u64) {
        Wheel::insert(self, key, when);
    }
    fn remove(&mut self, key: u32) {
        Wheel::remove(self, key);
    }
    fn pump(&mut self, now: u64) -> usize {
        self.advance(now);
        std::iter::from_fn(|| self.pop_ready(now)).count()
    }
}

/// The baseline: an ordered set by fire time, and each key's time to find its entry.
#[derive(Default)]
struct BTreeIndex {
    set: BTreeSet<(u64, u32)>,
    whens: Vec<u64>,
}

impl Index for BTreeIndex {
    fn insert(&mut self, key: u32, when: u64) {
        let k = key as usize;
        if self.whens.len() <= k {
            self.whens.resize(k + 1, u64::MAX);
        }
        if self.whens[k] != u64::MAX {
            self.set.remove(&(self.whens[k], key));
        }
        self.whens[k] = when;
        self.set.insert((when, key));
    }
    fn remove(&mut self, key: u32) {
        let when = std::mem::replace(&mut self.whens[key as usize], u64::MAX);
        self.set.remove(&(when, key));
    }
    fn pump(&mut self, now: u64) -> usize {
        let mut n = 0;
        while let Some(&(w, k)) = self.set.first() {
            if w > now {
                break;
            }
            self.set.pop_first();
            self.whens[k as usize] = u64::MAX;
            n += 1;
        }
        n
    }
}

fn rate(n: usize, started: Instant) -> f64 {
    n as f64 / started.elapsed().as_secs_f64()
}

/// (schedule, reset, cancel, pump) operations per second.
fn index_figures<I: Index>(mut index: I, ids: &[String]) -> [f64; 4] {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let n = ids.len();
    let mut map: HashMap<&str, u32> = HashMap::with_capacity(n);
    let t = Instant::now();
    for (i, id) in ids.iter().enumerate() {
        map.insert(id, i as u32);
        index.insert(i as u32, T0 + 30_000 + rng.random_range(0..60_000));
    }
    let schedule = rate(n, t);
    let t = Instant::now();
    for (round, id) in ids.iter().enumerate() {
        // A heartbeat: the device's deadline moves 30 s past now.
        index.insert(map[id.as_str()], T0 + 60_000 + (round as u64 % 30_000));
    }
    let reset = rate(n, t);
    let t = Instant::now();
    for id in ids {
        index.remove(map[id.as_str()]);
    }
    let cancel = rate(n, t);
    // Pump: every job due within one second, taken out millisecond by millisecond.
    for i in 0..n {
        index.insert(i as u32, T0 + 100_000 + (i as u64 % 1_000));
    }
    let t = Instant::now();
    let mut taken = 0;
    for ms in 0..=1_000 {
        taken += index.pump(T0 + 100_000 + ms);
    }
    assert_eq!(taken, n);
    [schedule, reset, cancel, rate(n, t)]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: usize = std::env::var("TOC_BENCH_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let ids: Vec<String> = (0..n).map(|i| format!("device-{i:08}")).collect();
    println!("{n} jobs, one core");
    println!(
        "{:<28}{:>14}{:>14}{:>14}{:>14}",
        "ops/s", "schedule", "reset", "cancel", "pump"
    );
    let wheel = index_figures(Wheel::new(T0), &ids);
    let btree = index_figures(BTreeIndex::default(), &ids);
    let row = |name: &str, f: &[f64; 4]| {
        println!(
            "{name:<28}{:>14.0}{:>14.0}{:>14.0}{:>14.0}",
            f[0], f[1], f[2], f[3]
        );
    };
    row("timing wheel", &wheel);
    row("BTreeMap baseline", &btree);
    println!(
        "{:<28}{:>14.2}{:>14.2}{:>14.2}{:>14.2}",
        "ratio wheel / baseline",
        wheel[0] / btree[0],
        wheel[1] / btree[1],
        wheel[2] / btree[2],
        wheel[3] / btree[3]
    );

    // The whole engine through the Store trait.
    let store = Store::memory(StoreOptions::default());
    let s: &Store = &store;
    let now = T0 as Millis;
    let t = Instant::now();
    for id in &ids {
        s.schedule(
            "d",
            NewJob::new(id.clone(), now + 30_000),
            ScheduleMode::Upsert,
            now,
        )
        .await
        .unwrap();
    }
    let schedule = rate(n, t);
    let mut batches: Vec<Vec<Reset>> = ids
        .chunks(1_000)
        .map(|c| {
            c.iter()
                .map(|id| Reset::new(id.clone(), now + 60_000))
                .collect()
        })
        .collect();
    let t = Instant::now();
    for b in &mut batches {
        let r = s.reset_many("d", b, None, now).await.unwrap();
        assert_eq!(r.reset as usize, b.len());
    }
    let reset = rate(n, t);
    let t = Instant::now();
    for id in &ids {
        s.cancel("d", &JobRef::new(id.clone())).await.unwrap();
    }
    let cancel = rate(n, t);
    let create = CreateSpec::default();
    for b in &mut batches {
        for (i, r) in b.iter_mut().enumerate() {
            r.fire_at = now + 100_000 + (i as Millis % 1_000);
        }
        s.reset_many("d", b, Some(&create), now).await.unwrap();
    }
    let t = Instant::now();
    let mut taken = 0;
    for slot in 0..16 {
        loop {
            let p = s
                .door("d", slot, 0)
                .await
                .unwrap()
                .pump(now + 101_000, 1_000)
                .await
                .unwrap();
            if p.jobs.is_empty() {
                break;
            }
            taken += p.jobs.len();
        }
    }
    assert_eq!(taken, n);
    let pump = rate(n, t);
    row(
        "memory store (Store trait)",
        &[schedule, reset, cancel, pump],
    );
    println!("target: at least 2,000,000 resets per second on one core");
}

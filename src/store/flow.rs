//! A flow key's counters (see `crate::flow`): the runs that hold its room (each until its
//! lease would run out, so a run whose instance died stops counting), the fires of its last
//! period, and who waits for it. On Redis they are `lua/flow.lua`'s three keys in the hash
//! tag of the key's slot, so every instance counts alike and a Cluster keeps one key's
//! counters on one node; the memory engine keeps a [`Book`] per key. The arithmetic is this
//! module's, which `flow.lua` follows.

use std::collections::{HashMap, VecDeque};

use crate::flow::FlowLimits;
use crate::time::Millis;

/// A slot's ask for room for some of its runs waiting on one key.
#[derive(Debug, Clone, Copy)]
pub struct FlowAsk<'a> {
    /// The key.
    pub key: &'a str,
    /// The runs asking, oldest fire time first, each as `id:token`: the first ones get room.
    pub runs: &'a [String],
    /// How long a granted run holds its room at most (its topic's visibility timeout).
    pub hold_ms: u64,
    /// Who asks (instance and slot): how its waiting is counted for the key's view.
    pub waiter: &'a str,
    /// Runs the asker holds waiting for the key, those asking among them.
    pub waiting: u32,
    /// The fire time of the oldest of them.
    pub oldest: Millis,
}

/// What an ask was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowGrant {
    /// The first this many runs asking may fire now.
    pub granted: u32,
    /// When fewer were granted than asked because of the rate: ms until the period's oldest
    /// fire stops counting. 0 when all were granted, or when the parallelism is what is full
    /// (room comes back as a run ends).
    pub retry_in_ms: u64,
}

/// A key's counters as they stand.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowState {
    /// Runs holding its room now.
    pub in_flight: u32,
    /// Fires started in its current period.
    pub in_period: u32,
    /// Due jobs waiting for room, over every instance.
    pub waiting: u64,
    /// The fire time of the oldest of them.
    pub oldest_wait: Option<Millis>,
}

/// A waiter's report: how many it holds, the oldest fire time, and when it said so.
#[derive(Debug, Clone, Copy)]
struct Waiter {
    n: u32,
    oldest: Millis,
    at: Millis,
}

/// A waiter that has not asked again for this long past the period has gone (its instance
/// stopped): it no longer counts.
pub(crate) const WAITER_STALE_MS: Millis = 60_000;

/// One key's counters in memory.
#[derive(Debug, Default)]
pub(crate) struct Book {
    /// Runs holding room, each until when.
    holders: HashMap<String, Millis>,
    /// Fire instants of the period, oldest first.
    log: VecDeque<Millis>,
    waiters: HashMap<String, Waiter>,
}

impl Book {
    fn clean(&mut self, limits: &FlowLimits, now: Millis) {
        self.holders.retain(|_, until| *until > now);
        let keep_after = now - crate::num::signed(limits.period_ms + limits.guard_ms());
        while self.log.front().is_some_and(|at| *at <= keep_after) {
            self.log.pop_front();
        }
    }

    /// Grants room to the first runs asking, as much as the key has (`flow.lua`'s take).
    pub(crate) fn take(
        &mut self,
        limits: &FlowLimits,
        ask: &FlowAsk<'_>,
        now: Millis,
    ) -> FlowGrant {
        self.clean(limits, now);
        let mut room = ask.runs.len();
        if let Some(p) = limits.parallelism {
            room = room.min(
                usize::try_from(p)
                    .unwrap_or(usize::MAX)
                    .saturating_sub(self.holders.len()),
            );
        }
        let rate_room = limits.rate.map(|r| {
            usize::try_from(r)
                .unwrap_or(usize::MAX)
                .saturating_sub(self.log.len())
        });
        if let Some(r) = rate_room {
            room = room.min(r);
        }
        let until = now.saturating_add(crate::num::signed(ask.hold_ms));
        for run in &ask.runs[..room] {
            if limits.parallelism.is_some() {
                self.holders.insert(run.clone(), until);
            }
            if limits.rate.is_some() {
                self.log.push_back(now);
            }
        }
        let granted = crate::num::to_u32(room);
        let retry_in_ms = match (room < ask.runs.len(), rate_room, self.log.front()) {
            (true, Some(r), Some(oldest)) if r <= room => {
                let back = oldest + crate::num::signed(limits.period_ms + limits.guard_ms());
                crate::num::unsigned((back - now).max(1))
            }
            _ => 0,
        };
        let left = ask.waiting.saturating_sub(granted);
        if left > 0 {
            self.waiters.insert(
                ask.waiter.to_string(),
                Waiter {
                    n: left,
                    oldest: ask.oldest,
                    at: now,
                },
            );
        } else {
            self.waiters.remove(ask.waiter);
        }
        FlowGrant {
            granted,
            retry_in_ms,
        }
    }

    /// Ends the room of runs (`id:token`) that held it.
    pub(crate) fn release(&mut self, runs: &[String]) {
        for run in runs {
            self.holders.remove(run);
        }
    }

    /// The key's counters at `now`.
    pub(crate) fn state(&mut self, limits: &FlowLimits, now: Millis) -> FlowState {
        self.clean(limits, now);
        let fresh = now - crate::num::signed(limits.period_ms) - WAITER_STALE_MS;
        self.waiters.retain(|_, w| w.at > fresh);
        FlowState {
            in_flight: crate::num::to_u32(self.holders.len()),
            in_period: crate::num::to_u32(self.log.len()),
            waiting: self.waiters.values().map(|w| u64::from(w.n)).sum(),
            oldest_wait: self.waiters.values().map(|w| w.oldest).min(),
        }
    }

    /// Nothing held, counted or waiting: the book may go.
    pub(crate) fn is_idle(&self) -> bool {
        self.holders.is_empty() && self.log.is_empty() && self.waiters.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("j{i}:1")).collect()
    }

    fn ask<'a>(runs: &'a [String], waiting: u32) -> FlowAsk<'a> {
        FlowAsk {
            key: "k",
            runs,
            hold_ms: 30_000,
            waiter: "a/0",
            waiting,
            oldest: 0,
        }
    }

    #[test]
    fn parallelism_grants_what_is_free_and_a_release_frees_it() {
        let limits = FlowLimits {
            rate: None,
            period_ms: 1_000,
            parallelism: Some(5),
            key: Default::default(),
        };
        let mut b = Book::default();
        let asked = runs(8);
        let g = b.take(&limits, &ask(&asked, 8), 0);
        assert_eq!((g.granted, g.retry_in_ms), (5, 0));
        assert_eq!(b.state(&limits, 0).waiting, 3);
        assert_eq!(b.take(&limits, &ask(&asked[5..], 3), 1).granted, 0);
        b.release(&asked[..2]);
        assert_eq!(b.take(&limits, &ask(&asked[5..], 3), 2).granted, 2);
        // A holder whose lease ran out stops counting.
        assert_eq!(b.take(&limits, &ask(&asked[7..], 1), 30_003).granted, 1);
        assert_eq!(b.state(&limits, 30_003).waiting, 0);
    }

    /// Over any period (and its guard), a key whose runs always ask gets at most its rate.
    #[test]
    fn no_period_grants_more_than_the_rate() {
        let limits = FlowLimits {
            rate: Some(100),
            period_ms: 1_000,
            parallelism: None,
            key: Default::default(),
        };
        let mut b = Book::default();
        let mut grants = Vec::new();
        let mut now = 0;
        let asked = runs(30);
        while now < 10_000 {
            let g = b.take(&limits, &ask(&asked, 30), now);
            grants.push((now, g.granted));
            now += i64::try_from(g.retry_in_ms.max(1)).unwrap();
        }
        for start in 0..9_000 {
            let in_window: u32 = grants
                .iter()
                .filter(|(at, _)| (start..start + 1_050).contains(at))
                .map(|(_, n)| n)
                .sum();
            assert!(
                in_window <= 100,
                "{in_window} fires in the period from {start} ms"
            );
        }
        let total: u32 = grants.iter().map(|(_, n)| n).sum();
        assert!(total >= 850, "the rate is used: {total} in 10 s");
    }
}

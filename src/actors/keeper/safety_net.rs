//! The instance's safety net. A slot actor holds no poll of its own: it sleeps until its
//! next time, and a job written after its last pump wakes it by notice. The net finds the
//! job whose notice was lost: every `runtime.poll_ms` the keeper reads the next time of a
//! share of the slots it owns (its earliest job or lease deadline; nothing written: two
//! `ZRANGE`s in one round trip on Redis), so that every slot is read once per
//! `runtime.safety_net_ms`, and wakes only the slots whose next time comes before their own
//! timer.
//!
//! What can lose a notice, and what finds it:
//! - the listener's connection lost and remade (or a Cluster's resubscription): the
//!   listener says so (`WakeNotice::RESYNC`), and the net reads every slot for the next
//!   `RESYNC_ROUNDS` rounds;
//! - a listener that hears nothing at all (a store made on a connection of its own): a
//!   resync every round, so every slot is read each round;
//! - a writer gone between its write and its notice, a write made to the store around the
//!   service, a job due after the net's sweep (whose notice the writer skips): the sweep,
//!   within `runtime.safety_net_ms`.

use std::collections::BTreeMap;
use std::ops::Bound;

use actix::prelude::*;
use futures_util::StreamExt;

use super::SlotKeeper;

/// How many heads the net reads at once.
const IN_FLIGHT: usize = 64;

/// Rounds that read every slot after a resync: the time a Cluster connection takes to
/// resubscribe after it says it lost its connection.
const RESYNC_ROUNDS: u32 = 5;

/// Where the net stands.
#[derive(Debug, Default)]
pub(super) struct Net {
    /// A round is reading heads.
    running: bool,
    /// A resync came while a round was reading: another round follows it at once.
    again: bool,
    /// The last slot read by the sweep; the next round starts after it.
    cursor: Option<(String, u32)>,
    /// Rounds left that read every slot.
    full_rounds: u32,
    /// Reads the sweep may still make, in thousandths (see `allowance`).
    credit: u64,
}

/// How many of the `want` heads a round of the sweep reads, when it may read `per_s` a
/// second with a round every `round_ms`: each round earns `per_s * round_ms` thousandths of a
/// read, and unspent credit is kept up to one round's worth and less than a read more (so one
/// read a second over 100 ms rounds reads once every tenth round, and an idle spell earns no
/// burst).
pub(super) fn allowance(credit: &mut u64, per_s: u64, round_ms: u64, want: usize) -> usize {
    let earned = per_s.saturating_mul(round_ms);
    *credit = credit
        .saturating_add(earned)
        .min(earned.saturating_add(999));
    let n = usize::try_from(*credit / 1_000)
        .unwrap_or(usize::MAX)
        .min(want);
    *credit -= u64::try_from(n).unwrap_or(u64::MAX).saturating_mul(1_000);
    n
}

/// How many of `total` slots a round reads, so that each is read once per `sweep_ms`
/// with a round every `round_ms`.
pub(super) fn share(total: usize, round_ms: u64, sweep_ms: u64) -> usize {
    let rounds = sweep_ms.div_ceil(round_ms.max(1)).max(1);
    total.div_ceil(usize::try_from(rounds).unwrap_or(usize::MAX))
}

/// The `n` keys after `cursor` in `map`, going round to its start, each at most once.
pub(super) fn after<K: Ord + Clone, V>(
    map: &BTreeMap<K, V>,
    cursor: Option<&K>,
    n: usize,
) -> Vec<K> {
    let n = n.min(map.len());
    let tail = match cursor {
        Some(c) => map.range((Bound::Excluded(c), Bound::Unbounded)),
        None => map.range::<K, _>(..),
    };
    tail.chain(map.iter())
        .take(n)
        .map(|(k, _)| k.clone())
        .collect()
}

impl SlotKeeper {
    /// Notices may have been lost: every slot is read at once and for the next rounds.
    pub(super) fn resync(&mut self, ctx: &mut Context<Self>) {
        self.net.full_rounds = RESYNC_ROUNDS;
        if self.net.running {
            self.net.again = true;
        } else {
            self.safety_net(ctx);
        }
    }

    /// One round of the net, unless the last one is still reading.
    pub(super) fn safety_net(&mut self, ctx: &mut Context<Self>) {
        if self.net.running || self.stopping {
            return;
        }
        let keys = if self.net.full_rounds > 0 {
            self.net.full_rounds -= 1;
            self.slots.keys().cloned().collect()
        } else {
            let s = &self.rt.settings;
            let want = share(self.slots.len(), s.poll_ms, s.net_sweep_ms());
            let n = allowance(
                &mut self.net.credit,
                s.safety_net_reads_per_s,
                s.poll_ms,
                want,
            );
            let keys = after(&self.slots, self.net.cursor.as_ref(), n);
            self.net.cursor = keys.last().cloned().or(self.net.cursor.take());
            keys
        };
        let mut asks = Vec::new();
        for key in keys {
            let (Some(entry), Some(t)) = (self.slots.get(&key), self.topics.get(&key.0)) else {
                continue;
            };
            let status = entry.status.lock().expect("slot status lock");
            // A sleeping slot's armed time is its next time as the keeper holds it.
            if entry.addr.as_ref().is_some_and(|a| !a.connected()) || status.fenced {
                continue;
            }
            asks.push((t.clone(), key.1, status.armed_at));
        }
        if asks.is_empty() {
            return;
        }
        self.net.running = true;
        let store = self.rt.store.clone();
        let round = futures_util::stream::iter(asks)
            .map(move |(t, slot, armed_at)| {
                let store = store.clone();
                async move {
                    match store.head(&t, slot).await {
                        // A head at or after the armed time is pumped in time: the pump
                        // then reaches past its time by at least the lead.
                        Ok(Some(head)) if armed_at.is_none_or(|a| head < a) => {
                            Some((t.name.clone(), slot, head))
                        }
                        Ok(_) => None,
                        Err(e) => {
                            tracing::debug!(topic = %t.name, slot, error = %e, "the safety net could not read the slot's head");
                            None
                        }
                    }
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .filter_map(std::future::ready)
            .collect::<Vec<_>>();
        ctx.spawn(round.into_actor(self).map(|found, act, ctx| {
            for (topic, slot, head) in found {
                let key = (topic, slot);
                if act.slots.contains_key(&key) {
                    act.wake(ctx, &key, head);
                }
            }
            act.net.running = false;
            if std::mem::take(&mut act.net.again) {
                act.safety_net(ctx);
            }
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_reads_its_share_of_a_sweep() {
        // 16,000 slots, a round a second, a sweep a minute: 267 a round.
        assert_eq!(share(16_000, 1_000, 60_000), 267);
        // A sweep no longer than a round reads every slot.
        assert_eq!(share(16_000, 1_000, 1_000), 16_000);
        assert_eq!(share(16_000, 1_000, 10), 16_000);
        // A sweep that is not a whole number of rounds still reads each slot within it.
        assert_eq!(share(10, 1_000, 2_500), 4);
        assert_eq!(share(0, 1_000, 60_000), 0);
        assert_eq!(share(1, 1_000, 60_000), 1);
    }

    #[test]
    fn the_sweep_reads_no_more_than_its_rate() {
        let reads = |per_s: u64, round_ms: u64, want: usize, rounds: usize| {
            let mut credit = 0;
            (0..rounds)
                .map(|_| allowance(&mut credit, per_s, round_ms, want))
                .collect::<Vec<_>>()
        };
        // 200 a second, a round a second: 200 of the 2,667 a minute's sweep of 160,000 wants.
        assert_eq!(reads(200, 1_000, 2_667, 3), [200, 200, 200]);
        // Fewer wanted than allowed: no more, and no credit saved up for a burst.
        assert_eq!(reads(200, 1_000, 10, 2), [10, 10]);
        // One a second over 100 ms rounds: one read every tenth round.
        let slow = reads(1, 100, 64, 30);
        assert_eq!(slow.iter().sum::<usize>(), 3);
        assert_eq!(slow.iter().position(|&n| n == 1), Some(9));
        // 15 a second over 100 ms rounds: 1 or 2 a round, 15 in ten rounds.
        assert_eq!(reads(15, 100, 64, 10).iter().sum::<usize>(), 15);
        // Unbounded (the tests' setting): every slot wanted.
        assert_eq!(reads(u64::MAX, 100, 64, 1), [64]);
    }

    #[test]
    fn the_sweep_goes_round_every_slot_once_before_any_twice() {
        let map: BTreeMap<u32, ()> = (0..10).map(|k| (k, ())).collect();
        let mut cursor = None;
        let mut seen = Vec::new();
        for _ in 0..3 {
            let keys = after(&map, cursor.as_ref(), 4);
            cursor = keys.last().copied();
            seen.extend(keys);
        }
        assert_eq!(seen, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]);
        // A cursor whose slot is gone starts after where it was.
        let fewer: BTreeMap<u32, ()> = [1, 5, 9].into_iter().map(|k| (k, ())).collect();
        assert_eq!(after(&fewer, Some(&4), 2), [5, 9]);
        // More than there are: each once.
        assert_eq!(after(&fewer, Some(&5), 10), [9, 1, 5]);
        assert!(after(&BTreeMap::<u32, ()>::new(), None, 3).is_empty());
    }
}

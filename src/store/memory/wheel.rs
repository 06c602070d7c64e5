//! A hierarchical timing wheel of 1 ms ticks: 6 levels of 64 slots, each level's slot 64
//! times as long as the one below (1 ms, 64 ms, 4.1 s, 4.4 min, 4.7 h, 12.4 days), covering
//! 2^36 ms (about 795 days) from the wheel's current time; anything later waits in an ordered
//! overflow set. A key sits in the slot of the highest level at which its fire time differs
//! from the current time, and cascades to lower levels as that slot comes due, so insert and
//! remove are O(1) and a millisecond's due keys come out together. Occupancy bitmaps find
//! the next non-empty slot without stepping through empty ticks. (The layout follows the
//! wheel in tokio's timer driver.)
//!
//! Keys are small integers (the owner's slab indices); due keys wait in a FIFO ready queue
//! until taken.

// The wheel's casts are between its own small indices: a level is below LEVELS (6), a slot
// below SLOTS (64), a position in a slot below the count of u32 keys, and a time in a slot's
// arithmetic below MAX_RANGE or reduced modulo SLOTS first. None can truncate or wrap.
#![allow(clippy::cast_possible_truncation, clippy::cast_lossless)]

use std::collections::{BTreeSet, VecDeque};

const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
const LEVELS: usize = 6;
/// The span the levels cover from the current time.
const MAX_RANGE: u64 = 1 << (SLOT_BITS * LEVELS as u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loc {
    None,
    Slot {
        level: u8,
        slot: u8,
        pos: u32,
    },
    Overflow,
    /// In the ready queue, under this generation (stale queue entries are skipped).
    Ready(u32),
}

#[derive(Debug, Clone, Copy)]
struct Key {
    loc: Loc,
    when: u64,
}

struct Level {
    occupied: u64,
    /// Empty until a key is first placed in the level: an idle topic's slot holds one job or
    /// none, and 6 levels of 64 lists made up for 9 KB of each slot's 15.
    slots: Vec<Vec<u32>>,
}

/// A key that came due, with its fire time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    /// The key.
    pub key: u32,
    /// Its fire time, in ms.
    pub when: u64,
}

/// The wheel: keys (slab indices) by fire time, in ms.
pub struct Wheel {
    /// The wheel's current time: every key at or before it is in the ready queue.
    elapsed: u64,
    levels: Vec<Level>,
    overflow: BTreeSet<(u64, u32)>,
    ready: VecDeque<(u32, u32)>,
    /// Each key's place and fire time, side by side: a reset reads both, one cache line.
    keys: Vec<Key>,
    /// The generation the next key to enter the ready queue gets (queue entries of a key
    /// that left it since are stale). One counter for the wheel: a stale entry could only
    /// be taken for a live one after 2^32 entries while it still waited in the queue.
    next_gen: u32,
    len: usize,
    /// The exact earliest fire time, when known. An insert lowers it; removing the key that
    /// held it, or advancing, forgets it until `next_at` scans again. Heartbeats rarely move
    /// the earliest job, so the scan is rare.
    head: std::cell::Cell<Option<Option<u64>>>,
}

fn slot_range(level: usize) -> u64 {
    1 << (SLOT_BITS * level as u32)
}

fn level_range(level: usize) -> u64 {
    slot_range(level + 1)
}

impl Wheel {
    /// An empty wheel whose current time is `now`.
    pub fn new(now: u64) -> Self {
        Wheel {
            elapsed: now,
            levels: Vec::new(),
            overflow: BTreeSet::new(),
            ready: VecDeque::new(),
            keys: Vec::new(),
            next_gen: 0,
            len: 0,
            head: std::cell::Cell::new(Some(None)),
        }
    }

    /// Keys in the wheel (waiting or ready).
    pub fn count(&self) -> usize {
        self.len
    }

    fn grow(&mut self, key: u32) {
        let need = key as usize + 1;
        if self.keys.len() < need {
            self.keys.resize(
                need,
                Key {
                    loc: Loc::None,
                    when: 0,
                },
            );
        }
    }

    /// Adds `key` due at `when` (a key already in the wheel is moved).
    pub fn insert(&mut self, key: u32, when: u64) {
        self.grow(key);
        if self.keys[key as usize].loc != Loc::None {
            self.remove(key);
        }
        self.len += 1;
        self.place(key, when);
        if let Some(head) = self.head.get() {
            self.head
                .set(Some(Some(head.map_or(when, |h| h.min(when)))));
        }
    }

    fn place(&mut self, key: u32, when: u64) {
        let k = key as usize;
        self.keys[k].when = when;
        if when <= self.elapsed {
            let generation = self.next_gen;
            self.next_gen = generation.wrapping_add(1);
            self.ready.push_back((key, generation));
            self.keys[k].loc = Loc::Ready(generation);
        } else if when - self.elapsed >= MAX_RANGE {
            self.overflow.insert((when, key));
            self.keys[k].loc = Loc::Overflow;
        } else {
            let level = self.level_for(when);
            let slot = ((when >> (level as u32 * SLOT_BITS)) as usize) & (SLOTS - 1);
            if self.levels.is_empty() {
                self.levels = (0..LEVELS)
                    .map(|_| Level {
                        occupied: 0,
                        slots: Vec::new(),
                    })
                    .collect();
            }
            let lv = &mut self.levels[level];
            if lv.slots.is_empty() {
                lv.slots = (0..SLOTS).map(|_| Vec::new()).collect();
            }
            lv.slots[slot].push(key);
            lv.occupied |= 1 << slot;
            self.keys[k].loc = Loc::Slot {
                level: level as u8,
                slot: slot as u8,
                pos: (lv.slots[slot].len() - 1) as u32,
            };
        }
    }

    fn level_for(&self, when: u64) -> usize {
        let mut masked = (self.elapsed ^ when) | (SLOTS as u64 - 1);
        if masked >= MAX_RANGE {
            masked = MAX_RANGE - 1;
        }
        let significant = 63 - masked.leading_zeros() as usize;
        significant / SLOT_BITS as usize
    }

    /// Asks the CPU for `key`'s place without waiting for it, so that a batch that moves
    /// many keys of a large wheel waits for their lines together (see `prefetch_slot`).
    pub fn prefetch(&self, key: u32) {
        if let Some(k) = self.keys.get(key as usize) {
            super::prefetch::prefetch(k);
        }
    }

    /// Asks the CPU for the line of `key`'s entry in its slot, once its place is at hand
    /// (after `prefetch`): a remove reads it, and the key it moves into its stead.
    pub fn prefetch_slot(&self, key: u32) {
        if let Some(Key {
            loc: Loc::Slot { level, slot, pos },
            ..
        }) = self.keys.get(key as usize)
            && let Some(x) = self.levels[*level as usize].slots[*slot as usize].get(*pos as usize)
        {
            super::prefetch::prefetch(x);
        }
    }

    /// Removes `key`; false if it was not in the wheel.
    pub fn remove(&mut self, key: u32) -> bool {
        let k = key as usize;
        let Some(loc) = self.keys.get(k).map(|x| x.loc) else {
            return false;
        };
        match loc {
            Loc::None => return false,
            Loc::Slot { level, slot, pos } => {
                let lv = &mut self.levels[level as usize];
                let bucket = &mut lv.slots[slot as usize];
                bucket.swap_remove(pos as usize);
                if let Some(&moved) = bucket.get(pos as usize) {
                    self.keys[moved as usize].loc = Loc::Slot { level, slot, pos };
                }
                if bucket.is_empty() {
                    lv.occupied &= !(1 << slot);
                }
            }
            Loc::Overflow => {
                self.overflow.remove(&(self.keys[k].when, key));
            }
            // The queue entry goes stale and is skipped when it comes up.
            Loc::Ready(_) => {}
        }
        self.keys[k].loc = Loc::None;
        self.len -= 1;
        if self.head.get() == Some(Some(self.keys[k].when)) {
            self.head.set(None);
        }
        true
    }

    /// The next slot to come due: (level, slot, deadline).
    fn next_expiration(&self) -> Option<(usize, usize, u64)> {
        for (level, lv) in self.levels.iter().enumerate() {
            if lv.occupied == 0 {
                continue;
            }
            let now_slot = self.elapsed / slot_range(level);
            let rotated = lv.occupied.rotate_right((now_slot % SLOTS as u64) as u32);
            let slot = ((rotated.trailing_zeros() as u64 + now_slot) % SLOTS as u64) as usize;
            let level_start = self.elapsed & !(level_range(level) - 1);
            let mut deadline = level_start + slot as u64 * slot_range(level);
            if deadline <= self.elapsed {
                // Only the top level wraps: its slot is in the next turn.
                deadline += level_range(level);
            }
            return Some((level, slot, deadline));
        }
        None
    }

    /// Moves the wheel's time to `now`: every key due by then goes to the ready queue, and
    /// keys of slots that came due cascade to lower levels.
    pub fn advance(&mut self, now: u64) {
        // Cascading moves keys between levels without changing the earliest one, so the
        // cached head stays right.
        while let Some((level, slot, deadline)) = self.next_expiration() {
            if deadline > now {
                break;
            }
            self.elapsed = deadline;
            let lv = &mut self.levels[level];
            lv.occupied &= !(1 << slot);
            let keys = std::mem::take(&mut lv.slots[slot]);
            for key in keys {
                let when = self.keys[key as usize].when;
                self.place(key, when);
            }
        }
        self.elapsed = self.elapsed.max(now);
        // Overflow keys that came within range (or due) join the levels.
        while let Some(&(when, key)) = self.overflow.first() {
            if when - self.elapsed.min(when) >= MAX_RANGE {
                break;
            }
            self.overflow.pop_first();
            self.place(key, when);
        }
    }

    /// Takes the next key due by `now` (call `advance` first), with its fire time. A key
    /// that is ready by the wheel's time but not by `now` (a caller whose clock is behind
    /// the wheel's) stays.
    pub fn pop_ready(&mut self, now: u64) -> Option<Due> {
        let mut skipped = Vec::new();
        let mut found = None;
        while let Some((key, generation)) = self.ready.pop_front() {
            if self.keys[key as usize].loc != Loc::Ready(generation) {
                continue;
            }
            if self.keys[key as usize].when > now {
                skipped.push((key, generation));
                continue;
            }
            self.keys[key as usize].loc = Loc::None;
            self.len -= 1;
            found = Some(Due {
                key,
                when: self.keys[key as usize].when,
            });
            self.head.set(None);
            break;
        }
        for entry in skipped.into_iter().rev() {
            self.ready.push_front(entry);
        }
        found
    }

    /// The earliest fire time in the wheel, exactly.
    pub fn next_at(&self) -> Option<u64> {
        if let Some(head) = self.head.get() {
            return head;
        }
        let head = self.scan_head();
        self.head.set(Some(head));
        head
    }

    fn scan_head(&self) -> Option<u64> {
        let ready = self
            .ready
            .iter()
            .filter(|(k, g)| self.keys[*k as usize].loc == Loc::Ready(*g))
            .map(|(k, _)| self.keys[*k as usize].when)
            .min();
        if ready.is_some() {
            return ready;
        }
        // Lower levels hold earlier keys than higher ones, so the earliest key of the levels
        // is in the next slot to come due. An overflow key may still be earlier than a key
        // placed in the levels after it.
        let levels = self.next_expiration().and_then(|(level, slot, deadline)| {
            if level == 0 {
                return Some(deadline); // a level-0 slot is one millisecond
            }
            self.levels[level].slots[slot]
                .iter()
                .map(|k| self.keys[*k as usize].when)
                .min()
        });
        let overflow = self.overflow.first().map(|(w, _)| *w);
        match (levels, overflow) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn drain(w: &mut Wheel, now: u64) -> Vec<(u32, u64)> {
        w.advance(now);
        std::iter::from_fn(|| w.pop_ready(now))
            .map(|d| (d.key, d.when))
            .collect()
    }

    /// A wheel holds its levels only once a key is placed in one, and a level's 64 lists
    /// only once a key is placed in it: an empty wheel none (an idle topic's slots are
    /// mostly empty), a wheel of one job due in an hour one level's; the job still fires on
    /// time.
    #[test]
    fn levels_hold_lists_only_once_used() {
        let allocated = |w: &Wheel| w.levels.iter().filter(|l| !l.slots.is_empty()).count();
        let mut w = Wheel::new(1_000);
        assert!(w.levels.is_empty(), "an empty wheel holds no level");
        w.insert(7, 500); // due already: the ready queue, no level
        assert!(w.levels.is_empty(), "a key due at once needs no level");
        assert_eq!(drain(&mut w, 1_000), vec![(7, 500)]);
        assert_eq!(allocated(&w), 0);
        w.insert(0, 1_000 + 3_600_000);
        assert_eq!(allocated(&w), 1);
        assert_eq!(
            drain(&mut w, 1_000 + 3_600_000),
            vec![(0, 1_000 + 3_600_000)]
        );
        assert_eq!(w.next_at(), None);
    }

    #[test]
    fn keys_come_out_when_due_and_never_before() {
        let t0 = 1_700_000_000_000;
        let mut w = Wheel::new(t0);
        w.insert(1, t0 + 5);
        w.insert(2, t0 + 70);
        w.insert(3, t0 + 5_000);
        w.insert(4, t0 + 3 * 24 * 3600 * 1000);
        w.insert(5, t0 + 900 * 24 * 3600 * 1000); // past the levels: overflow
        assert_eq!(w.next_at(), Some(t0 + 5));
        assert!(drain(&mut w, t0 + 4).is_empty());
        assert_eq!(drain(&mut w, t0 + 5), [(1, t0 + 5)]);
        assert_eq!(w.next_at(), Some(t0 + 70));
        assert!(drain(&mut w, t0 + 69).is_empty());
        assert_eq!(drain(&mut w, t0 + 4_999), [(2, t0 + 70)]);
        assert_eq!(drain(&mut w, t0 + 5_000), [(3, t0 + 5_000)]);
        assert_eq!(
            drain(&mut w, t0 + 3 * 24 * 3600 * 1000),
            [(4, t0 + 3 * 24 * 3600 * 1000)]
        );
        assert_eq!(w.next_at(), Some(t0 + 900 * 24 * 3600 * 1000));
        assert_eq!(
            drain(&mut w, t0 + 1_000 * 24 * 3600 * 1000),
            [(5, t0 + 900 * 24 * 3600 * 1000)]
        );
        assert_eq!(w.count(), 0);
    }

    #[test]
    fn remove_and_move_are_exact() {
        let mut w = Wheel::new(0);
        for k in 0..100 {
            w.insert(k, 1_000);
        }
        assert!(w.remove(42));
        assert!(!w.remove(42));
        w.insert(7, 2_000); // moved
        let out = drain(&mut w, 1_000);
        assert_eq!(out.len(), 98);
        assert!(out.iter().all(|(k, _)| *k != 42 && *k != 7));
        assert_eq!(drain(&mut w, 2_000), [(7, 2_000)]);
    }

    #[test]
    fn a_key_in_the_past_is_ready_at_once_and_removable() {
        let mut w = Wheel::new(10_000);
        w.insert(1, 5);
        w.insert(2, 6);
        assert!(w.remove(1));
        assert_eq!(drain(&mut w, 10_000), [(2, 6)]);
    }

    #[test]
    fn a_caller_behind_the_wheel_gets_nothing_early() {
        let mut w = Wheel::new(0);
        w.advance(1_000);
        w.insert(1, 900); // ready by the wheel's time
        assert_eq!(drain(&mut w, 800), []);
        assert_eq!(drain(&mut w, 900), [(1, 900)]);
    }

    #[test]
    fn random_keys_match_a_sorted_model() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let t0 = 1_000_000u64;
        let mut w = Wheel::new(t0);
        let mut model = std::collections::BTreeMap::new();
        for k in 0..5_000u32 {
            let when = t0 + rng.random_range(0..10_000_000u64);
            w.insert(k, when);
            model.insert(k, when);
        }
        for k in (0..5_000u32).step_by(7) {
            w.remove(k);
            model.remove(&k);
        }
        for k in (0..5_000u32).step_by(11) {
            let when = t0 + rng.random_range(0..10_000_000u64);
            w.insert(k, when);
            model.insert(k, when);
        }
        let mut now = t0;
        while !model.is_empty() {
            now += rng.random_range(1..50_000);
            let expected_next = model.values().min().copied();
            assert_eq!(w.next_at(), expected_next);
            let mut got = drain(&mut w, now);
            got.sort();
            let mut want: Vec<(u32, u64)> = model
                .iter()
                .filter(|(_, w)| **w <= now)
                .map(|(k, w)| (*k, *w))
                .collect();
            want.sort();
            assert_eq!(got, want, "at {now}");
            for (k, _) in want {
                model.remove(&k);
            }
        }
        assert_eq!(w.count(), 0);
    }
}

//! A memory slot's id index: job ids to entry numbers, as one array of 8-byte buckets with
//! linear probing. A bucket holds the entry number and 32 bits of the id's hash, which both
//! place it and tell most other ids apart without reading their entries, so a lookup of a
//! large slot waits for one line of memory where a SwissTable (hashbrown) waited for two (its
//! control bytes, then its bucket: three fifths of a 10M-job reset's time, see docs/bench/history.md,
//! Scale). And the bucket of an id is known from its hash alone, so a batch of resets fetches
//! all its buckets at once (`prefetch`) before it looks any up.
//!
//! The index holds numbers, not ids: the caller hashes ids (one seeded hasher per slot) and
//! confirms a candidate against its entry. Removal shifts the probe run back (no tombstones),
//! so a table of heartbeats that never grows never degrades.

// Casts between a hash's 32 bits, bucket positions and entry numbers: positions are masked
// below the table's length, and entry numbers are u32 by construction.
#![allow(clippy::cast_possible_truncation)]

use super::prefetch::prefetch;

/// An empty bucket (no entry number reaches `u32::MAX`: `insert` refuses it).
const EMPTY: u64 = u64::MAX;

/// The smallest table, in buckets.
const MIN_BUCKETS: usize = 16;

pub(super) struct IdIndex {
    /// `(hash32 << 32) | entry`, or `EMPTY`; a power of two long (or empty).
    buckets: Vec<u64>,
    len: usize,
}

/// The 32 bits of a hash the index keeps (the high ones: foldhash mixes them best).
fn hash32(hash: u64) -> u32 {
    (hash >> 32) as u32
}

impl IdIndex {
    pub(super) fn new() -> Self {
        IdIndex {
            buckets: Vec::new(),
            len: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    fn mask(&self) -> usize {
        self.buckets.len().wrapping_sub(1)
    }

    fn home(&self, h: u32) -> usize {
        h as usize & self.mask()
    }

    /// Asks the CPU for the line of `hash`'s first bucket without waiting for it: a batch
    /// prefetches all its lookups' buckets, then looks them up from the cache.
    pub(super) fn prefetch(&self, hash: u64) {
        if let Some(b) = self.buckets.get(self.home(hash32(hash))) {
            prefetch(b);
        }
    }

    /// The first entry number filed under `hash`'s 32 bits: the entry of that id, or (rarely)
    /// of another id whose hash agrees in those bits. For a batch's hints, which the caller
    /// confirms.
    pub(super) fn candidate(&self, hash: u64) -> Option<u32> {
        self.probe(hash32(hash)).next()
    }

    /// The entry number `is_it` accepts among those filed under `hash`.
    pub(super) fn find(&self, hash: u64, mut is_it: impl FnMut(u32) -> bool) -> Option<u32> {
        self.probe(hash32(hash)).find(|&k| is_it(k))
    }

    /// The entry numbers filed under `h`, in probe order.
    fn probe(&self, h: u32) -> impl Iterator<Item = u32> + '_ {
        let mask = self.mask();
        let start = self.home(h);
        let mut i = 0;
        std::iter::from_fn(move || {
            if self.buckets.is_empty() {
                return None;
            }
            loop {
                let b = self.buckets[(start + i) & mask];
                i += 1;
                if b == EMPTY {
                    return None;
                }
                if (b >> 32) as u32 == h {
                    return Some(b as u32);
                }
            }
        })
    }

    /// Files entry `k` under `hash` (its id is not filed already: the caller looked).
    pub(super) fn insert(&mut self, hash: u64, k: u32) {
        assert!(k != u32::MAX, "an entry number below u32::MAX");
        // At most three quarters full: a missing id's probe run stays a few buckets long.
        if (self.len + 1) * 4 > self.buckets.len() * 3 {
            self.grow();
        }
        self.place((u64::from(hash32(hash)) << 32) | u64::from(k));
        self.len += 1;
    }

    fn place(&mut self, bucket: u64) {
        let mask = self.mask();
        let mut i = self.home((bucket >> 32) as u32);
        while self.buckets[i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.buckets[i] = bucket;
    }

    fn grow(&mut self) {
        let size = (self.buckets.len() * 2).max(MIN_BUCKETS);
        let old = std::mem::replace(&mut self.buckets, vec![EMPTY; size]);
        for b in old.into_iter().filter(|&b| b != EMPTY) {
            self.place(b);
        }
    }

    /// Unfiles entry `k` from under `hash`; false if it was not filed there.
    pub(super) fn remove(&mut self, hash: u64, k: u32) -> bool {
        let want = (u64::from(hash32(hash)) << 32) | u64::from(k);
        if self.buckets.is_empty() {
            return false;
        }
        let mask = self.mask();
        let mut hole = self.home(hash32(hash));
        loop {
            match self.buckets[hole] {
                EMPTY => return false,
                b if b == want => break,
                _ => hole = (hole + 1) & mask,
            }
        }
        // Backward shift: each later bucket of the run that may sit in the hole (its home is
        // not between the hole and it) moves into it, and leaves a hole of its own.
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let b = self.buckets[j];
            if b == EMPTY {
                break;
            }
            let home = self.home((b >> 32) as u32);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.buckets[hole] = b;
                hole = j;
            }
        }
        self.buckets[hole] = EMPTY;
        self.len -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Hashes that collide in their home bucket and in their 32 bits, as the worst ids would.
    fn colliding(i: u32) -> u64 {
        u64::from(i % 3) << 32
    }

    #[test]
    fn an_id_filed_is_found_and_one_unfiled_is_gone() {
        let mut ix = IdIndex::new();
        ix.insert(7 << 32, 1);
        ix.insert(9 << 32, 2);
        assert_eq!(ix.find(7 << 32, |k| k == 1), Some(1));
        assert_eq!(ix.candidate(9 << 32), Some(2));
        assert!(ix.remove(7 << 32, 1));
        assert_eq!(ix.find(7 << 32, |_| true), None);
        assert!(!ix.remove(7 << 32, 1), "removing twice finds nothing");
        assert_eq!(ix.len(), 1);
    }

    #[test]
    fn ids_sharing_a_hash_are_told_apart_by_their_entries() {
        let mut ix = IdIndex::new();
        for k in 0..40 {
            ix.insert(colliding(0), k);
        }
        for k in 0..40 {
            assert_eq!(ix.find(colliding(0), |x| x == k), Some(k));
        }
        // Unfiling from the middle of one long run keeps the rest of it reachable.
        for k in (0..40).step_by(3) {
            assert!(ix.remove(colliding(0), k));
        }
        for k in 0..40 {
            let found = ix.find(colliding(0), |x| x == k);
            assert_eq!(found.is_some(), k % 3 != 0, "entry {k}");
        }
    }

    proptest! {
        /// Any sequence of filings and unfilings, with hashes from a small set (so that runs
        /// wrap, collide and shift), leaves the index agreeing with a map.
        #[test]
        fn the_index_agrees_with_a_map(ops in proptest::collection::vec((any::<bool>(), 0u32..300, 0u64..64), 1..2000)) {
            let mut ix = IdIndex::new();
            let mut model: HashMap<u32, u64> = HashMap::new();
            for (file, k, h) in ops {
                let hash = (h.wrapping_mul(0x9e37_79b9) << 32) | h;
                match model.get(&k) {
                    Some(&old) if !file => {
                        prop_assert!(ix.remove(old, k));
                        model.remove(&k);
                    }
                    None if file => {
                        ix.insert(hash, k);
                        model.insert(k, hash);
                    }
                    _ => {}
                }
                prop_assert_eq!(ix.len(), model.len());
            }
            for k in 0..300 {
                match model.get(&k) {
                    Some(&hash) => prop_assert_eq!(ix.find(hash, |x| x == k), Some(k)),
                    None => for h in 0u64..64 {
                        let hash = (h.wrapping_mul(0x9e37_79b9) << 32) | h;
                        prop_assert_eq!(ix.find(hash, |x| x == k), None);
                    },
                }
            }
        }
    }
}

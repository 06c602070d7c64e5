//! Which live instance should own a slot: rendezvous hashing. Every instance computes the
//! same answer from the same list of live instances, and when one joins or leaves only the
//! slots it wins or held change hands. The owner lease in the store (`Store::own`) decides
//! who actually pumps: two instances that disagree for a moment (one has not yet seen a
//! join) never pump one slot together.

/// A stable 64-bit score of (instance, topic, slot): FNV-1a, then the splitmix64 finaliser
/// so that close inputs score far apart. The same in every process and build.
fn score(instance: &str, topic: &str, slot: u32) -> u64 {
    let bytes = instance
        .bytes()
        .chain([0])
        .chain(topic.bytes())
        .chain([0])
        .chain(slot.to_le_bytes());
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The instance of `live` that should own `(topic, slot)`; `None` when `live` is empty.
pub(crate) fn owner_of<'a>(live: &'a [String], topic: &str, slot: u32) -> Option<&'a str> {
    if let [only] = live {
        return Some(only); // no score to compute: an instance alone is asked for every slot
    }
    live.iter()
        .max_by_key(|i| (score(i, topic, slot), i.as_str()))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("toc-{i}")).collect()
    }

    #[test]
    fn slots_spread_evenly_over_the_live_instances() {
        let live = names(3);
        let mut count = [0usize; 3];
        for slot in 0..3_000 {
            let o = owner_of(&live, "orders", slot).unwrap();
            count[live.iter().position(|i| i == o).unwrap()] += 1;
        }
        for c in count {
            assert!((850..=1_150).contains(&c), "{count:?}");
        }
    }

    #[test]
    fn an_instance_leaving_moves_only_its_own_slots() {
        let live = names(4);
        let left: Vec<String> = live.iter().filter(|i| *i != "toc-2").cloned().collect();
        for slot in 0..2_000 {
            let before = owner_of(&live, "t", slot).unwrap();
            let after = owner_of(&left, "t", slot).unwrap();
            if before != "toc-2" {
                assert_eq!(before, after, "slot {slot} moved without cause");
            }
        }
        assert_eq!(owner_of(&[], "t", 0), None);
    }
}

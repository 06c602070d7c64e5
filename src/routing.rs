//! Which slot a job lives in: `crc32(shard_key) & (slots - 1)`. The shard key is the job id
//! unless the caller gives one (for example a device id shared by several jobs).

/// The slot of `shard_key` in a topic of `slots` slots (a power of two).
pub fn slot_of(shard_key: &str, slots: u32) -> u32 {
    debug_assert!(slots.is_power_of_two());
    crc32fast::hash(shard_key.as_bytes()) & (slots - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_is_the_crc32_masked_by_the_slot_count() {
        // crc32("123456789") is the standard check value 0xCBF43926.
        assert_eq!(slot_of("123456789", 1), 0);
        assert_eq!(slot_of("123456789", 16), 0xCBF4_3926 & 15);
        assert_eq!(slot_of("123456789", 4096), 0xCBF4_3926 & 4095);
    }
}

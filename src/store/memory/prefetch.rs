//! A hint to the CPU: fetch a value's cache line now, without waiting for it. A batch that
//! will read many lines far larger than the cache asks for all of them first, so that their
//! misses overlap (`SlotState::reset_many`). Safe: `safe_arch` wraps the instruction, which
//! reads nothing the program sees (the crate forbids `unsafe`).

/// Asks for `value`'s cache line (a no-op off x86-64).
pub(super) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    safe_arch::prefetch_t0(value);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

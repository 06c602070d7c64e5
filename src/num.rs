//! Conversions between the numeric types the crate mixes (times in ms as `i64`, durations
//! and counts as `u64`, `u32` or `usize`): each saturates at the target's bounds rather
//! than wrapping or truncating, so a value out of range becomes the nearest one the target
//! holds. Every bound the API checks is far inside them; these keep an unchecked value from
//! turning into a different one.

use std::time::Duration;

use crate::time::Millis;

/// A span or count in ms as a time offset.
pub(crate) fn millis(v: u64) -> Millis {
    Millis::try_from(v).unwrap_or(Millis::MAX)
}

/// A duration's whole ms as a time offset.
pub(crate) fn duration_millis(d: Duration) -> Millis {
    Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)
}

/// A duration's whole ms.
pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A signed value as unsigned: negative values are 0.
pub(crate) fn unsigned(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// An unsigned value as signed.
pub(crate) fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A count as `u64` (a `usize` is at most 64 bits on every target Rust supports here).
pub(crate) fn usize_u64(v: usize) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// A count or index as `u32`.
pub(crate) fn to_u32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// A signed count as `u32`: negative values are 0.
pub(crate) fn count_u32(v: i64) -> u32 {
    u32::try_from(v.max(0)).unwrap_or(u32::MAX)
}

/// A count or a span as a float, for metrics and the backoff's arithmetic: exact up to
/// 2^53, far past any count or span here.
#[allow(clippy::cast_precision_loss)]
pub(crate) fn float(v: i64) -> f64 {
    v as f64
}

/// A float as whole ms (rounded down), saturating: NaN is 0.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub(crate) fn float_ms(v: f64) -> u64 {
    // `as` from a float saturates at the integer's bounds and maps NaN to 0 (Rust 1.45).
    v as u64
}

/// A float known to hold an integer (checked by the caller) as `i64`, saturating.
#[allow(clippy::cast_possible_truncation)]
pub(crate) fn float_int(v: f64) -> i64 {
    // `as` from a float saturates at the integer's bounds and maps NaN to 0.
    v as i64
}

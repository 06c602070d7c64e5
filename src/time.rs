//! Time as the store sees it: integer milliseconds since the Unix epoch. Time enters every
//! store call as an argument (`now`), so tests choose it; only the runtime's edge reads the
//! wall clock, through [`Clock`].

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

/// The wall clock, in milliseconds.
pub fn now_ms() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

/// A source of `now`, injected where code must read time itself (the runtime).
pub trait Clock: Send + Sync + 'static {
    /// Now, in ms since the Unix epoch.
    fn now(&self) -> Millis;

    /// Microseconds since the epoch, for sleeping until an instant without losing the
    /// fraction of a millisecond that truncation to `now` drops.
    fn now_us(&self) -> i64 {
        self.now() * 1_000
    }
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        now_ms()
    }

    fn now_us(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0)
    }
}

/// A clock shared by the runtime.
pub type SharedClock = Arc<dyn Clock>;

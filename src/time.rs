//! Time as the store sees it: integer milliseconds since the Unix epoch. Time enters every
//! store call as an argument (`now`), so tests choose it; only the runtime's edge reads a
//! clock, through [`Clock`].
//!
//! One clock decides (docs/design.md, invariant 3): the store's. A process never trusts its own
//! wall clock for a comparison of times, since another host's may differ from it and either
//! may step (NTP, a VM resumed). The memory engine's clock is [`SteadyClock`]: the wall clock
//! read once, then carried forward by the monotonic clock, so no step forward fires anything
//! early. The Redis engine's is [`ServerClock`]: Redis' `TIME`, sampled in the background,
//! carried forward by the monotonic clock, and known only to within a sample's round trip,
//! so it answers the earliest the server's clock may read now (`now`, for "is it due?") and
//! the latest (`latest`, the base a delay is added to), and neither is ever early.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

/// Longest delay a job may be scheduled with (about 2,850 years), so that every delay the
/// API documents fits below `MAX_MILLIS` whatever the clock says.
pub const MAX_DELAY_MS: i64 = 89_999_999_999_999;
/// Latest instant accepted (as a job's `fire_at`): the largest 14-digit number of milliseconds.
pub(crate) const MAX_MILLIS: Millis = 99_999_999_999_999;

/// The fire time of a parked job: the last instant the store holds. It never fires there;
/// a reset brings it back (a device that used up its alarms waits for its next heartbeat).
/// The CLI and the dashboard show it as parked, not as a date 3,000 years away.
pub const PARKED_AT: Millis = MAX_MILLIS;

/// The wall clock, in milliseconds.
pub fn now_ms() -> Millis {
    wall_us() / 1_000
}

/// The wall clock, in microseconds.
fn wall_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A source of `now`, injected where code must read time itself (the runtime).
pub trait Clock: Send + Sync + 'static {
    /// Now, in ms since the Unix epoch: the earliest the deciding clock may read, so a job
    /// found due by it is due.
    fn now(&self) -> Millis;

    /// Microseconds since the epoch, for sleeping until an instant without losing the
    /// fraction of a millisecond that truncation to `now` drops.
    fn now_us(&self) -> i64 {
        self.now() * 1_000
    }

    /// The latest the deciding clock may read now: what a delay is added to, so that a job
    /// due `delay_ms` from now is never due before that delay has passed.
    fn latest(&self) -> Millis {
        // Rounded up: the millisecond under way has partly passed.
        (self.now_us() + 999).div_euclid(1_000)
    }

    /// The instant `delay_ms` from now, never early on the deciding clock: the latest it may
    /// read plus the delay. No delay means now (due at once, as asked).
    fn after(&self, delay_ms: Millis) -> Millis {
        if delay_ms <= 0 {
            self.now()
        } else {
            self.latest().saturating_add(delay_ms)
        }
    }

    /// Resolves once this clock's `now_us` reads `at_us` or later, or about then: the clocks
    /// that follow the machine's time sleep (to within tens of µs, see `timer.rs`), and a
    /// [`ManualClock`] waits until a test moves it there. The runtime waits for every fire
    /// time through this, so a test that drives the clock drives the firing.
    fn until(&self, at_us: i64) -> WaitUntil {
        let left = at_us.saturating_sub(self.now_us());
        Box::pin(crate::timer::sleep(Duration::from_micros(
            u64::try_from(left).unwrap_or(0),
        )))
    }
}

/// What [`Clock::until`] answers.
pub type WaitUntil = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A clock that reads what a test sets, and wakes the runtime's waits as it is moved: the
/// test clock of the runtime (fire times, holds of runs leased ahead, a long poll's wait for
/// a head). Durations that are not instants on the store's clock (a batch window, a settle's
/// backoff, lease renewals) stay on Tokio's timer.
#[derive(Debug)]
pub struct ManualClock {
    us: watch::Sender<i64>,
}

impl ManualClock {
    /// A clock standing at `at` (ms since the epoch).
    pub fn at(at: Millis) -> Self {
        ManualClock {
            us: watch::Sender::new(at.saturating_mul(1_000)),
        }
    }

    /// Sets the clock to `at` (ms), forward or back, and wakes every wait it reaches.
    pub fn set(&self, at: Millis) {
        self.us.send_replace(at.saturating_mul(1_000));
    }

    /// Moves the clock `ms` forward.
    pub fn advance(&self, ms: Millis) {
        self.us
            .send_modify(|us| *us = us.saturating_add(ms.saturating_mul(1_000)));
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        self.now_us().div_euclid(1_000)
    }

    fn now_us(&self) -> i64 {
        *self.us.borrow()
    }

    fn until(&self, at_us: i64) -> WaitUntil {
        let mut moved = self.us.subscribe();
        Box::pin(async move {
            // The sender lives as long as the clock; a clock dropped ends every wait.
            let _ = moved.wait_for(|us| *us >= at_us).await;
        })
    }
}

/// The system's wall clock, as it is (for tests and tools that want exactly that).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        now_ms()
    }

    fn now_us(&self) -> i64 {
        wall_us()
    }
}

/// The wall clock read once, then carried forward by the monotonic clock, which no step of
/// the wall clock moves. When the wall clock reads earlier than this clock (it was stepped
/// back, or ran ahead at start), this clock takes the wall clock's reading from then on: it
/// never runs ahead of the wall clock nor of the monotonic time since its earliest reading,
/// so no step either way makes anything due early.
#[derive(Debug)]
pub struct SteadyClock {
    base: Instant,
    /// Wall-clock µs at `base`, as adjusted down by the wall clock's steps back.
    offset_us: AtomicI64,
}

impl Default for SteadyClock {
    fn default() -> Self {
        let base = Instant::now();
        SteadyClock {
            base,
            offset_us: AtomicI64::new(wall_us()),
        }
    }
}

impl SteadyClock {
    fn elapsed_us(&self) -> i64 {
        i64::try_from(self.base.elapsed().as_micros()).unwrap_or(i64::MAX)
    }
}

impl Clock for SteadyClock {
    fn now(&self) -> Millis {
        self.now_us().div_euclid(1_000)
    }

    fn now_us(&self) -> i64 {
        let elapsed = self.elapsed_us();
        let steady = self.offset_us.load(Ordering::Relaxed) + elapsed;
        let wall = wall_us();
        if wall < steady {
            self.offset_us.fetch_min(wall - elapsed, Ordering::Relaxed);
            return wall;
        }
        steady
    }
}

/// One reading of a server's clock: it read `server_us` at some instant between `sent` and
/// `received` on the local monotonic clock.
#[derive(Debug, Clone, Copy)]
pub struct ClockSample {
    /// When the request left, on the monotonic clock.
    pub sent: Instant,
    /// What the server's clock read, in µs since the epoch.
    pub server_us: i64,
    /// When the reply came back, on the monotonic clock.
    pub received: Instant,
}

impl ClockSample {
    /// The earliest and latest the server's clock may read at `at` (not before `received`),
    /// in µs, assuming its clock runs at the monotonic clock's rate.
    fn bounds(&self, at: Instant) -> (i64, i64) {
        let since = |t: Instant| {
            i64::try_from(at.saturating_duration_since(t).as_micros()).unwrap_or(i64::MAX)
        };
        (
            self.server_us + since(self.received),
            self.server_us + since(self.sent),
        )
    }
}

/// How many recent samples bound a [`ServerClock`]'s reading.
const SAMPLES_KEPT: usize = 8;

/// A server's clock as its samples bound it: the latest of their earliest readings and the
/// earliest of their latest, so one quick round trip narrows the window for as long as it is
/// kept. Until the first sample it answers the local [`SteadyClock`] (and says so through
/// [`ServerClock::synced`]).
#[derive(Debug, Default)]
pub struct ServerClock {
    samples: Mutex<Vec<ClockSample>>,
    fallback: SteadyClock,
}

impl ServerClock {
    /// Takes in a new reading of the server's clock. A reading that no longer fits the
    /// kept ones (the server's clock was stepped) replaces them all.
    pub fn observe(&self, sample: ClockSample) {
        let mut kept = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let (lo, hi) = window(&kept, sample.received);
        let (new_lo, new_hi) = sample.bounds(sample.received);
        if !kept.is_empty() && (new_hi < lo || new_lo > hi) {
            kept.clear();
        }
        if kept.len() == SAMPLES_KEPT {
            kept.remove(0);
        }
        kept.push(sample);
    }

    /// Whether a reading of the server's clock has been taken.
    pub fn synced(&self) -> bool {
        !self
            .samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// The earliest and latest the server's clock may read now, in µs.
    fn bounds_us(&self) -> (i64, i64) {
        let kept = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if kept.is_empty() {
            let us = self.fallback.now_us();
            return (us, us);
        }
        window(&kept, Instant::now())
    }
}

/// The intersection of the samples' bounds at `at` (everything for no samples).
fn window(samples: &[ClockSample], at: Instant) -> (i64, i64) {
    samples.iter().fold((i64::MIN, i64::MAX), |(lo, hi), s| {
        let (l, h) = s.bounds(at);
        (lo.max(l), hi.min(h))
    })
}

impl Clock for ServerClock {
    fn now(&self) -> Millis {
        self.now_us().div_euclid(1_000)
    }

    fn now_us(&self) -> i64 {
        self.bounds_us().0
    }

    fn latest(&self) -> Millis {
        // Rounded up: the server's millisecond may already have begun.
        (self.bounds_us().1 + 999).div_euclid(1_000)
    }
}

/// A clock shared by the runtime.
pub type SharedClock = Arc<dyn Clock>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sample(sent: Instant, rtt_us: u64, server_us: i64) -> ClockSample {
        ClockSample {
            sent,
            server_us,
            received: sent + Duration::from_micros(rtt_us),
        }
    }

    #[test]
    fn a_sample_bounds_the_server_clock_by_its_round_trip() {
        let t = Instant::now();
        let s = sample(t, 2_000, 1_000_000);
        // 10 ms after the reply: at least 10 ms past the reading, at most 12 ms.
        let (lo, hi) = s.bounds(t + Duration::from_micros(12_000));
        assert_eq!((lo, hi), (1_010_000, 1_012_000));
    }

    #[test]
    fn samples_narrow_the_window_to_their_intersection() {
        let clock = ServerClock::default();
        let t = Instant::now();
        // A slow round trip, then a quick one 100 ms later that fits inside it.
        clock.observe(sample(t, 20_000, 5_000_000));
        clock.observe(sample(t + Duration::from_millis(100), 200, 5_110_000));
        let kept = clock.samples.lock().unwrap().clone();
        let (lo, hi) = window(&kept, t + Duration::from_millis(200));
        assert!(hi - lo <= 200, "window {lo}..{hi}");
        assert!(
            lo <= 5_200_000 + 10_000 && hi >= 5_190_000,
            "window {lo}..{hi}"
        );
    }

    #[test]
    fn a_server_clock_that_stepped_replaces_the_old_samples() {
        let clock = ServerClock::default();
        let t = Instant::now();
        clock.observe(sample(t, 100, 5_000_000));
        // The server's clock stepped back 3 s.
        clock.observe(sample(t + Duration::from_millis(10), 100, 2_010_000));
        let kept = clock.samples.lock().unwrap().clone();
        assert_eq!(kept.len(), 1);
        let (lo, _) = window(&kept, t + Duration::from_millis(20));
        assert!((2_019_000..2_021_000).contains(&lo), "{lo}");
    }

    #[test]
    fn the_steady_clock_never_runs_ahead_of_the_wall_clock() {
        let clock = SteadyClock::default();
        // As if the wall clock had read 5 s later at the clock's start and then stepped back.
        clock.offset_us.fetch_add(5_000_000, Ordering::Relaxed);
        let wall = wall_us();
        let read = clock.now_us();
        assert!(
            read <= wall_us() && read >= wall - 1_000_000,
            "{read} vs {wall}"
        );
        // And it keeps the wall clock's reading from then on: it was taken down to it, not
        // left 5 s ahead (each read is at most the wall clock read inside it).
        assert!(clock.offset_us.load(Ordering::Relaxed) <= wall_us());
        let again = clock.now_us();
        assert!(again >= read && again <= wall_us(), "{again} after {read}");
    }

    /// A manual clock's wait ends when the clock is moved to its instant or past it, not
    /// before, and a wait for an instant already reached ends at once.
    #[test]
    fn a_manual_clocks_wait_ends_when_the_clock_reaches_it() {
        use futures_util::FutureExt;
        let clock = ManualClock::at(1_000);
        let mut wait = clock.until(1_050_000);
        assert!(
            (&mut wait).now_or_never().is_none(),
            "ended before any move"
        );
        clock.set(1_049);
        assert!((&mut wait).now_or_never().is_none(), "ended 1 ms early");
        clock.advance(1);
        assert!(
            (&mut wait).now_or_never().is_some(),
            "not ended at its instant"
        );
        assert_eq!((clock.now(), clock.now_us()), (1_050, 1_050_000));
        assert!(clock.until(1_000_000).now_or_never().is_some());
    }
}

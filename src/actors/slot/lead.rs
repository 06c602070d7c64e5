//! How long before its fire time a slot's pump leases a job: the lead. It is
//! `runtime.fire_lead_ms` while the store answers within it, and follows the slowest recent
//! pump's round trip (plus a millisecond) when it does not, up to `runtime.fire_lead_max_ms`,
//! so that a loaded or distant store's round trip is still paid before the fire rather than
//! after. A slow round trip raises the lead at once; it then halves its excess over the
//! floor every `HALF_LIFE`, so a passing stall costs a longer lead (a reset race of that
//! length) for a few seconds only.

use std::time::{Duration, Instant};

use crate::time::Millis;

/// How long a slow round trip's share of the lead takes to halve.
const HALF_LIFE: Duration = Duration::from_secs(2);

/// Added to a round trip: the slot's timers count whole milliseconds.
const MARGIN_US: f64 = 1_000.0;

/// One slot's lead.
#[derive(Debug, Clone)]
pub(crate) struct Lead {
    floor_us: f64,
    max_us: f64,
    /// The slowest recent round trip, as it stood at `at`.
    peak_us: f64,
    at: Option<Instant>,
}

impl Lead {
    /// A lead of `floor_ms` that may grow to `max_ms` (to `floor_ms` where that is larger).
    /// A floor of 0 leases nothing ahead, whatever the maximum (`fire_lead_ms = 0`).
    pub(crate) fn new(floor_ms: u64, max_ms: u64) -> Self {
        let floor_us = ms_to_us(floor_ms);
        let max_us = if floor_ms == 0 {
            0.0
        } else {
            ms_to_us(max_ms).max(floor_us)
        };
        Lead {
            floor_us,
            max_us,
            peak_us: 0.0,
            at: None,
        }
    }

    /// A pump answered after `round_trip`, at `now`.
    pub(crate) fn observe(&mut self, round_trip: Duration, now: Instant) {
        let wanted = round_trip.as_secs_f64() * 1e6 + MARGIN_US;
        self.peak_us = self.wanted_us(now).max(wanted);
        self.at = Some(now);
    }

    /// The lead at `now`, in whole ms (rounded up): at least the floor, at most the maximum.
    pub(crate) fn ms(&self, now: Instant) -> Millis {
        let us = self.wanted_us(now).clamp(self.floor_us, self.max_us);
        crate::num::millis(crate::num::float_ms((us / 1_000.0).ceil()))
    }

    /// The lead at `now` for a topic whose lease is `visibility_timeout_ms`: a run's lease
    /// counts from its pump, so what the lead grows by is kept within a tenth of it (at
    /// least the floor): a handler keeps nine tenths of its lease, at least, after its fire
    /// time.
    pub(crate) fn within(&self, now: Instant, visibility_timeout_ms: u64) -> Millis {
        let floor = crate::num::millis(crate::num::float_ms((self.floor_us / 1_000.0).ceil()));
        let tenth = crate::num::millis(visibility_timeout_ms / 10);
        self.ms(now).min(tenth.max(floor))
    }

    /// The lead the recorded peak asks for at `now`: the floor, and the peak's excess over
    /// it halved each half-life (none once under a microsecond).
    fn wanted_us(&self, now: Instant) -> f64 {
        let Some(at) = self.at else {
            return self.floor_us;
        };
        let halves = now.saturating_duration_since(at).as_secs_f64() / HALF_LIFE.as_secs_f64();
        let excess = (self.peak_us - self.floor_us).max(0.0) * 0.5f64.powf(halves);
        if excess < 1.0 {
            self.floor_us
        } else {
            self.floor_us + excess
        }
    }
}

fn ms_to_us(ms: u64) -> f64 {
    crate::num::float(crate::num::millis(ms)) * 1_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_grown_lead_stays_within_a_tenth_of_the_lease_but_not_below_the_floor() {
        let now = Instant::now();
        let mut lead = Lead::new(2, 1_000);
        lead.observe(ms(500), now);
        assert_eq!(lead.ms(now), 501);
        assert_eq!(
            lead.within(now, 30_000),
            501,
            "a tenth of 30 s is room enough"
        );
        assert_eq!(lead.within(now, 1_000), 100, "a tenth of a 1 s lease");
        assert_eq!(lead.within(now, 10), 2, "never below the floor");
    }

    #[test]
    fn a_quick_store_keeps_the_floor() {
        let t = Instant::now();
        let mut lead = Lead::new(2, 20);
        assert_eq!(lead.ms(t), 2, "before any pump");
        lead.observe(Duration::from_micros(300), t);
        assert_eq!(lead.ms(t), 2);
    }

    #[test]
    fn a_slow_round_trip_raises_the_lead_at_once_and_by_a_millisecond_more() {
        let t = Instant::now();
        let mut lead = Lead::new(2, 20);
        lead.observe(Duration::from_micros(6_300), t);
        assert_eq!(lead.ms(t), 8, "6.3 ms + 1 ms, rounded up");
        // A quicker pump after it does not lower it at once.
        lead.observe(Duration::from_micros(200), t + ms(10));
        assert!(lead.ms(t + ms(10)) >= 7, "{}", lead.ms(t + ms(10)));
    }

    #[test]
    fn the_lead_never_passes_its_maximum() {
        let t = Instant::now();
        let mut lead = Lead::new(2, 20);
        lead.observe(ms(500), t);
        assert_eq!(lead.ms(t), 20);
    }

    #[test]
    fn a_stall_s_share_halves_every_half_life_and_goes_back_to_the_floor() {
        let t = Instant::now();
        let mut lead = Lead::new(2, 100);
        // A round trip of 41 ms asks for 42.
        lead.observe(ms(41), t);
        assert_eq!(lead.ms(t), 42);
        // One half-life later: 2 ms and half the excess of 42 ms over it.
        assert_eq!(lead.ms(t + HALF_LIFE), 22);
        assert_eq!(lead.ms(t + HALF_LIFE * 20), 2, "back to the floor");
    }

    #[test]
    fn a_maximum_at_or_below_the_floor_or_a_floor_of_0_keeps_the_lead_fixed() {
        let t = Instant::now();
        for (floor, max) in [(2, 2), (50, 20), (0, 0), (0, 20)] {
            let mut lead = Lead::new(floor, max);
            lead.observe(ms(30), t);
            assert_eq!(
                lead.ms(t),
                crate::num::millis(floor),
                "floor {floor}, max {max}"
            );
        }
    }
}

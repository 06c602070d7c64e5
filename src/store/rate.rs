//! A topic's fire rate limit (`max_fires_per_s`): one token bucket per topic in the store,
//! shared by every instance, so the topic's fires (pumps of handler topics, claims of pull
//! topics) stay within the limit however many instances serve its slots.
//!
//! The bucket holds up to a twentieth of a second's fires (at least one), so over any second
//! the grants stay within the limit and a twentieth: within 10 % of it where the fires are
//! counted, which see them a little spread by the network and the handlers. A pump takes tokens for what it may hand out and
//! gives back what it did not; when it gets none, it learns how long until enough have come
//! and sleeps that long (no polling). Due jobs past the limit wait in their slots, in
//! fire-time order. `lua/rate.lua` is the Redis engine's bucket, on the server's clock; this
//! module is the memory engine's and the arithmetic both follow.

use crate::time::Millis;

/// What a take of fires answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// Fires granted now (at most those asked for).
    pub granted: u32,
    /// When fewer were granted than asked: ms until the bucket holds what was asked for (or
    /// its fill), the time to ask again. 0 when all were granted.
    pub retry_in_ms: u64,
}

impl Grant {
    /// Everything asked for: a topic with no limit.
    pub(crate) fn all(want: u32) -> Self {
        Grant {
            granted: want,
            retry_in_ms: 0,
        }
    }
}

/// The fires one pump or one claim pass holds from its topic's bucket, and what follows
/// from them: the one rate-grant step of the slot actors and the claims, a plain decider.
/// Made from what was asked and what the bucket granted; each handout spends from it; what
/// is left at the end goes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FireBudget {
    asked: u32,
    grant: Grant,
    spent: u32,
}

impl FireBudget {
    /// `grant` of a take of `asked` fires.
    pub(crate) fn new(asked: u32, grant: Grant) -> Self {
        FireBudget {
            asked,
            grant,
            spent: 0,
        }
    }

    /// Nothing was granted: nothing is handed out before the bucket holds more, in
    /// `retry_in_ms`.
    pub(crate) fn dry(&self) -> bool {
        self.grant.granted == 0
    }

    /// Most runs that may still be handed out.
    pub(crate) fn room(&self) -> u32 {
        self.grant.granted.saturating_sub(self.spent)
    }

    /// `n` runs were handed out.
    pub(crate) fn spend(&mut self, n: usize) {
        self.spent = self.spent.saturating_add(crate::num::to_u32(n));
    }

    /// The fires granted and not handed out: given back at the end.
    pub(crate) fn unused(&self) -> u32 {
        self.room()
    }

    /// The limit held the handouts back: fewer were granted than asked, and all of them
    /// went out (so more were likely due). The slot then waits `retry_in_ms`.
    pub(crate) fn held_back(&self) -> bool {
        self.grant.granted < self.asked && self.spent >= self.grant.granted
    }

    /// When the bucket holds more, after a grant short of what was asked; 0 otherwise.
    pub(crate) fn retry_in_ms(&self) -> u64 {
        self.grant.retry_in_ms
    }
}

/// The bucket's fill, in thousandths of a fire: a twentieth of a second's fires, at least one.
pub(crate) fn capacity_milli(rate: u32) -> i64 {
    i64::from(rate.div_ceil(20).max(1)) * 1_000
}

/// One topic's bucket, in thousandths of a fire so refills are exact integers (a rate of
/// `r` fires/s adds `r` thousandths per ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bucket {
    milli: i64,
    at: Millis,
}

impl Bucket {
    /// A full bucket at `now`.
    pub(crate) fn full(rate: u32, now: Millis) -> Self {
        Bucket {
            milli: capacity_milli(rate),
            at: now,
        }
    }

    fn refill(&mut self, rate: u32, now: Millis) {
        if now > self.at {
            let added = (now - self.at).saturating_mul(i64::from(rate));
            self.milli = self.milli.saturating_add(added).min(capacity_milli(rate));
            self.at = now;
        }
    }

    /// Takes up to `want` fires at `now` (`rate.lua`'s take).
    pub(crate) fn take(&mut self, rate: u32, want: u32, now: Millis) -> Grant {
        self.refill(rate, now);
        let whole = u32::try_from(self.milli / 1_000).unwrap_or(u32::MAX);
        let granted = want.min(whole);
        self.milli -= i64::from(granted) * 1_000;
        let retry_in_ms = if granted < want {
            let goal = (i64::from(want) * 1_000).min(capacity_milli(rate));
            crate::num::unsigned((goal - self.milli).max(1)).div_ceil(u64::from(rate))
        } else {
            0
        };
        Grant {
            granted,
            retry_in_ms,
        }
    }

    /// Gives back `n` fires taken and not used (`rate.lua`'s give).
    pub(crate) fn give_back(&mut self, rate: u32, n: u32, now: Millis) {
        self.refill(rate, now);
        self.milli = (self.milli + i64::from(n) * 1_000).min(capacity_milli(rate));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over any second, a bucket taken from as fast as it refills grants at most the rate
    /// and its fill (a twentieth).
    #[test]
    fn no_second_grants_more_than_the_rate_and_a_tenth() {
        let rate = 200;
        let mut b = Bucket::full(rate, 0);
        let mut grants = Vec::new();
        let mut now = 0;
        while now < 10_000 {
            let g = b.take(rate, 64, now);
            grants.push((now, g.granted));
            now += i64::try_from(g.retry_in_ms.max(1)).unwrap();
        }
        for start in 0..9_000 {
            let in_window: u32 = grants
                .iter()
                .filter(|(at, _)| (start..start + 1_000).contains(at))
                .map(|(_, n)| n)
                .sum();
            assert!(
                in_window <= 220,
                "{in_window} fires in the second from {start} ms"
            );
        }
        let total: u32 = grants.iter().map(|(_, n)| n).sum();
        assert!(total >= 200 * 10 - 64, "the limit is used: {total} in 10 s");
    }

    /// The rate-grant step: asked, granted and handed out in; room, what goes back,
    /// whether the limit held the pump back, and dry out.
    #[test]
    fn a_budget_decides_room_give_back_and_held_back() {
        // (asked, granted, spent) -> (room, unused, held_back, dry)
        let rows = [
            ((64, 64, 0), (64, 64, false, false)),
            ((64, 64, 10), (54, 54, false, false)),
            ((64, 64, 64), (0, 0, false, false)),
            ((64, 10, 10), (0, 0, true, false)),
            ((64, 10, 3), (7, 7, false, false)),
            ((64, 0, 0), (0, 0, true, true)),
            ((5, 5, 9), (0, 0, false, false)),
            ((1, 1, 1), (0, 0, false, false)),
        ];
        for ((asked, granted, spent), want) in rows {
            let grant = Grant {
                granted,
                retry_in_ms: if granted < asked { 50 } else { 0 },
            };
            let mut b = FireBudget::new(asked, grant);
            b.spend(usize::try_from(spent).unwrap());
            let got = (b.room(), b.unused(), b.held_back(), b.dry());
            assert_eq!(got, want, "asked {asked}, granted {granted}, spent {spent}");
            assert_eq!(b.retry_in_ms(), grant.retry_in_ms);
        }
    }

    #[test]
    fn an_empty_bucket_says_when_to_ask_again_and_given_back_fires_return() {
        let mut b = Bucket::full(100, 0);
        assert_eq!(b.take(100, 50, 0).granted, 5);
        let g = b.take(100, 50, 0);
        // Five fires (its fill) come in 50 ms at 100 fires/s.
        assert_eq!((g.granted, g.retry_in_ms), (0, 50));
        assert_eq!(b.take(100, 50, 50).granted, 5);
        b.give_back(100, 4, 50);
        assert_eq!(b.take(100, 50, 50).granted, 4);
    }
}

//! The slot actor's state, as a plain state machine: what a slot is doing (pumping, settling,
//! waiting for its batch window) and what it must do next, with no actix, no store and no
//! clock in it. The actor (`slot.rs`) feeds it events (a pump asked for, a pump's answer, a
//! settle's answer, a wake, a fence renewed, a drain) and carries out what each returns:
//! start a pump, sleep, settle, pump again.
//!
//! Ground rules (each is a test below):
//! 1. At most one pump in flight per slot: a pump asked for while one is in flight is
//!    remembered (`again`) and made when that one answers, never alongside it.
//! 2. A fenced slot pumps no more until its fence is renewed (another instance owns it); a
//!    draining slot pumps no more at all. Neither loses the answer of the pump in flight:
//!    its runs are dispatched (and, when draining, given back).
//! 3. At most one settle in flight per slot; outcomes that arrive meanwhile wait and go in
//!    the next one. A settle the store could not take is retried after a backoff that doubles
//!    per failure (50 ms up to 1 s), and nothing else is settled before it.
//! 4. A pump whose answer was lost (the store failed) makes the next pump adopt the runs
//!    leased above the highest token this slot has seen, unless the fence changed since.
//! 5. Outcomes wait for the batch window only while other runs of the slot may still join
//!    them; a window that closes while a settle is in flight is honoured when it returns.
//! 6. A wake notice that comes while a pump is in flight does not pump again: its instant is
//!    kept, and the slot sleeps until the earlier of it and the pump's next time (the
//!    pump's answer may predate the job, whose own instant is then known). Every new head
//!    is told, however far ahead, so a pump again per notice would pump for nothing.
//! 7. A slot may be put to sleep (its actor stopped, its next time held by the keeper)
//!    only at rest: no pump in flight or wanted, no settle in flight or backing off, no
//!    outcome waiting for the window, no lost pump to adopt from, no wake kept. What it
//!    would lose otherwise (a lost answer's runs, outcomes) is not in the store's next time.
//! 8. A slot rests in one of three ways: awake, offered (it told its keeper, once, that it
//!    may sleep, and waits for the answer), asleep (the keeper holds its next time). It
//!    offers at most once until answered; the answer puts it to sleep only if it may still
//!    sleep then (rule 7), else it is awake again and may offer again; a restart wakes it.

use std::time::Duration;

/// The first wait before settling again outcomes the store could not take, doubled at each
/// failure up to `SETTLE_RETRY_MAX`: a store back from an outage hears of them within about
/// a second, rather than when their leases run out.
const SETTLE_RETRY_FIRST: Duration = Duration::from_millis(50);
const SETTLE_RETRY_MAX: Duration = Duration::from_secs(1);

/// What the slot's pumping is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pumping {
    /// No pump in flight; `again`: one is wanted as soon as there is room for its runs.
    Idle { again: bool },
    /// A pump is in flight; `again`: pump once more when it answers.
    InFlight { again: bool },
    /// Another instance owns the slot now: no pump until the fence is renewed.
    Fenced,
    /// Shutting down: no pump any more; `in_flight` while the last one has not answered.
    Draining { in_flight: bool },
}

/// What the slot's settling is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settling {
    Idle,
    /// A settle of this many outcomes is in flight.
    InFlight(usize),
    /// The store could not take the last settle; it is tried again when the backoff ends.
    Backoff,
}

/// The batch window outcomes may wait in for the slot's other runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Window {
    Closed,
    /// Open: its timer runs, and the outcomes go when it closes.
    Open,
    /// It closed while a settle was in flight: what waits goes when that returns.
    Due,
}

/// A pump to make now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PumpStart {
    /// Adopt first the runs leased above this token (a lost pump's answer, rule 4).
    pub(crate) adopt_above: Option<u64>,
}

/// How a pump ended, as the actor read its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PumpEnd {
    /// It leased runs (perhaps none); `full`: as many as it could take, so more may be due.
    Leased { full: bool },
    /// The topic's rate limit held it back: the bucket has room again in `retry_in_ms`.
    Limited { retry_in_ms: u64 },
    /// Refused for an old fence.
    Fenced,
    /// The store failed; what it leased may be lost.
    Failed,
}

/// What the slot does after a pump's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterPump {
    /// Pump again now.
    PumpAgain,
    /// Sleep until the store's next time for the slot.
    SleepUntilNext,
    /// Sleep this long, then pump.
    SleepFor(Duration),
    /// Nothing: the slot is fenced or draining.
    Nothing,
}

/// How a settle ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SettleEnd {
    /// Applied; `rescheduled`: some job is due again (a retry, a repeat, a release), perhaps
    /// before the slot's timer, so a pump should learn the slot's next time.
    Applied { rescheduled: bool },
    /// Nothing applied, and the store may be back in a moment: the outcomes are kept and
    /// settled again after the returned wait.
    Unavailable,
    /// Refused for a reason a retry would not change: the runs come back when their leases
    /// run out.
    Refused,
}

/// Whether outcomes go to the store now (`settle_soon`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SettleWhen {
    Now,
    /// Open the batch window (start its timer).
    OpenWindow,
    /// The window is open already.
    Wait,
}

/// One slot's state. See the ground rules at the top of this file.
#[derive(Debug)]
pub(crate) struct SlotCore {
    pumping: Pumping,
    /// How the slot rests (rule 8).
    rest: Rest,
    settling: Settling,
    window: Window,
    /// Settles that failed in a row because the store was unavailable (the backoff).
    settle_failures: u32,
    /// The last pump failed: the next adopts what it may have leased (rule 4).
    pump_lost: bool,
    /// The highest run token this slot's pumps handed it.
    max_token: u64,
    /// The earliest instant a wake told while a pump was in flight (rule 6).
    woken_at: Option<i64>,
}

/// How a slot rests (rule 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rest {
    /// Working, or at rest without having told its keeper.
    Awake,
    /// It told its keeper it may sleep and waits for the answer.
    Offered,
    /// The keeper holds its next time; its actor stops.
    Asleep,
}

impl Default for SlotCore {
    fn default() -> Self {
        SlotCore {
            pumping: Pumping::Idle { again: false },
            rest: Rest::Awake,
            settling: Settling::Idle,
            window: Window::Closed,
            settle_failures: 0,
            pump_lost: false,
            max_token: 0,
            woken_at: None,
        }
    }
}

impl SlotCore {
    #[cfg(test)]
    fn pumping(&self) -> Pumping {
        self.pumping
    }

    #[cfg(test)]
    fn settling(&self) -> Settling {
        self.settling
    }

    /// A pump is in flight (a drain waits for its answer: its runs must be run or given back).
    pub(crate) fn pump_in_flight(&self) -> bool {
        matches!(
            self.pumping,
            Pumping::InFlight { .. } | Pumping::Draining { in_flight: true }
        )
    }

    pub(crate) fn draining(&self) -> bool {
        matches!(self.pumping, Pumping::Draining { .. })
    }

    /// Outcomes in the settle now in flight.
    pub(crate) fn settling_runs(&self) -> usize {
        match self.settling {
            Settling::InFlight(n) => n,
            Settling::Idle | Settling::Backoff => 0,
        }
    }

    /// A settle waits out its backoff: new outcomes wait for it (and a halt leaves them to
    /// their leases rather than settle around it).
    pub(crate) fn settle_backing_off(&self) -> bool {
        self.settling == Settling::Backoff
    }

    /// A pump is wanted: the slot's timer, a wake, a settled run. `capacity`: runs the slot
    /// may take now; `paused`: the topic's setting. Returns the pump to make, if any.
    pub(crate) fn want_pump(&mut self, capacity: usize, paused: bool) -> Option<PumpStart> {
        match &mut self.pumping {
            Pumping::Fenced | Pumping::Draining { .. } => None,
            // Paused: nothing is pumped until a retune resumes the topic.
            _ if paused => None,
            Pumping::InFlight { again } => {
                *again = true;
                None
            }
            // Every run slot is taken: the next settled run pumps again.
            Pumping::Idle { again } if capacity == 0 => {
                *again = true;
                None
            }
            Pumping::Idle { .. } => {
                self.pumping = Pumping::InFlight { again: false };
                Some(PumpStart {
                    adopt_above: (self.pump_lost && self.max_token > 0).then_some(self.max_token),
                })
            }
        }
    }

    /// A run with `token` came from this slot's pump.
    pub(crate) fn saw_token(&mut self, token: u64) {
        self.max_token = self.max_token.max(token);
    }

    /// The pump in flight answered.
    pub(crate) fn pump_answered(&mut self, end: PumpEnd) -> AfterPump {
        let again = match self.pumping {
            Pumping::InFlight { again } => again,
            Pumping::Draining { .. } => {
                self.pumping = Pumping::Draining { in_flight: false };
                self.pump_lost = matches!(end, PumpEnd::Failed);
                return AfterPump::Nothing;
            }
            // No pump was in flight (a restarted actor's stale answer): nothing follows.
            Pumping::Idle { .. } | Pumping::Fenced => return AfterPump::Nothing,
        };
        self.pump_lost = matches!(end, PumpEnd::Failed);
        if !matches!(end, PumpEnd::Leased { full: false }) || again {
            // Another pump follows (now, or after a wait), and it finds the job.
            self.woken_at = None;
        }
        match end {
            PumpEnd::Leased { full } if full || again => {
                self.pumping = Pumping::Idle { again: false };
                AfterPump::PumpAgain
            }
            PumpEnd::Leased { .. } => {
                self.pumping = Pumping::Idle { again: false };
                AfterPump::SleepUntilNext
            }
            // Held back by the rate limit: the slot sleeps until the bucket holds more (never
            // sooner: no polling); a wanted pump stays wanted.
            PumpEnd::Limited { retry_in_ms } => {
                self.pumping = Pumping::Idle { again };
                AfterPump::SleepFor(Duration::from_millis(retry_in_ms.max(1)))
            }
            PumpEnd::Fenced => {
                self.pumping = Pumping::Fenced;
                AfterPump::Nothing
            }
            PumpEnd::Failed => {
                self.pumping = Pumping::Idle { again };
                AfterPump::SleepFor(Duration::from_millis(ERROR_BACKOFF_MS))
            }
        }
    }

    /// A wake notice: a job whose pump is due at `pump_at` (ms), perhaps earlier than the
    /// slot knew. True when the actor should arm its timer for it; with a pump in flight,
    /// whose answer may predate the job, the instant is kept for `take_woken` (rule 6).
    pub(crate) fn woken(&mut self, pump_at: i64) -> bool {
        match &mut self.pumping {
            Pumping::Idle { .. } => true,
            Pumping::InFlight { .. } => {
                self.woken_at = Some(self.woken_at.map_or(pump_at, |w| w.min(pump_at)));
                false
            }
            Pumping::Fenced | Pumping::Draining { .. } => false,
        }
    }

    /// The instant a wake told while the last pump was in flight: the actor sleeps until
    /// the earlier of it and the pump's next time.
    pub(crate) fn take_woken(&mut self) -> Option<i64> {
        self.woken_at.take()
    }

    /// The slot's owner lease was renewed under a new fence: a fenced slot pumps again, and
    /// nothing is adopted (runs above the highest token seen may be another owner's, leased
    /// while it held the slot: a lost pump's runs wait for their lease).
    pub(crate) fn refenced(&mut self) {
        if self.pumping == Pumping::Fenced {
            self.pumping = Pumping::Idle { again: false };
        }
        self.pump_lost = false;
    }

    /// Shutting down: no pump any more.
    pub(crate) fn drain(&mut self) {
        self.pumping = Pumping::Draining {
            in_flight: self.pump_in_flight(),
        };
    }

    /// The actor restarted after a panic: what was in flight went with its old context.
    pub(crate) fn restarted(&mut self) {
        if let Pumping::InFlight { .. } | Pumping::Idle { .. } = self.pumping {
            self.pumping = Pumping::Idle { again: false };
        }
        if let Pumping::Draining { .. } = self.pumping {
            self.pumping = Pumping::Draining { in_flight: false };
        }
        self.settling = Settling::Idle;
        self.settle_failures = 0;
        self.window = Window::Closed;
        self.rest = Rest::Awake;
    }

    /// The slot may sleep (rule 7 holds): whether to offer it to the keeper now, once until
    /// answered (rule 8).
    pub(crate) fn offer_rest(&mut self) -> bool {
        if self.rest != Rest::Awake {
            return false;
        }
        self.rest = Rest::Offered;
        true
    }

    /// The keeper answered an offer: asleep when the slot `may_sleep` still, else awake.
    pub(crate) fn rest_answered(&mut self, may_sleep: bool) {
        self.rest = if may_sleep { Rest::Asleep } else { Rest::Awake };
    }

    /// Whether the slot was put to sleep (its actor stops as asleep, not fenced or halted).
    pub(crate) fn asleep(&self) -> bool {
        self.rest == Rest::Asleep
    }

    /// An outcome joined those waiting. `window_ms`: the batch window; `others_running`:
    /// other runs of the slot may still report; `full`: a pump's worth has gathered.
    pub(crate) fn settle_when(
        &mut self,
        window_ms: u64,
        others_running: bool,
        full: bool,
    ) -> SettleWhen {
        let now = window_ms == 0
            || self.window == Window::Due
            || self.draining()
            || !others_running
            || full;
        if now {
            SettleWhen::Now
        } else if self.window == Window::Closed {
            self.window = Window::Open;
            SettleWhen::OpenWindow
        } else {
            SettleWhen::Wait
        }
    }

    /// The batch window's timer ran out.
    pub(crate) fn window_closed(&mut self) {
        self.window = Window::Due;
    }

    /// May `waiting` outcomes be settled now? When true they are in flight from now on, and
    /// the window (if open) is closed: the actor cancels its timer.
    pub(crate) fn begin_settle(&mut self, waiting: usize) -> bool {
        if self.settling != Settling::Idle || waiting == 0 {
            return false;
        }
        self.window = Window::Closed;
        self.settling = Settling::InFlight(waiting);
        true
    }

    /// The settle in flight answered. For `Unavailable`, the wait before trying again.
    pub(crate) fn settle_answered(&mut self, end: SettleEnd) -> Option<Duration> {
        self.settling = Settling::Idle;
        match end {
            SettleEnd::Applied { rescheduled } => {
                self.settle_failures = 0;
                if rescheduled {
                    self.want_again();
                }
                None
            }
            SettleEnd::Unavailable => {
                self.settle_failures += 1;
                self.settling = Settling::Backoff;
                Some(
                    SETTLE_RETRY_FIRST
                        .saturating_mul(1 << (self.settle_failures - 1).min(8))
                        .min(SETTLE_RETRY_MAX),
                )
            }
            SettleEnd::Refused => None,
        }
    }

    /// The settle's backoff ended: it may go again.
    pub(crate) fn backoff_over(&mut self) {
        if self.settling == Settling::Backoff {
            self.settling = Settling::Idle;
        }
    }

    /// A pump is wanted once there is room (a settled run freed some, or a job is due again).
    fn want_again(&mut self) {
        if let Pumping::Idle { again } | Pumping::InFlight { again } = &mut self.pumping {
            *again = true;
        }
    }

    /// Nothing of the slot's is in flight or owed (rule 7): it may sleep, with nothing to
    /// remember but the store's next time.
    pub(crate) fn at_rest(&self) -> bool {
        self.pumping == Pumping::Idle { again: false }
            && self.settling == Settling::Idle
            && self.window == Window::Closed
            && !self.pump_lost
            && self.woken_at.is_none()
    }

    /// A pump is wanted and none is in flight: the actor pumps now.
    pub(crate) fn pump_wanted(&self) -> bool {
        self.pumping == Pumping::Idle { again: true }
    }
}

/// Wait before pumping again after the store failed.
pub(crate) const ERROR_BACKOFF_MS: u64 = 500;

#[cfg(test)]
mod tests {
    use super::*;

    fn started() -> SlotCore {
        let mut core = SlotCore::default();
        assert!(core.want_pump(10, false).is_some());
        core
    }

    #[test]
    fn one_pump_in_flight_and_a_pump_asked_for_meanwhile_follows_it() {
        let mut core = started();
        assert_eq!(core.want_pump(10, false), None, "rule 1: not alongside");
        assert!(!core.woken(5_000), "a wake during a pump arms nothing now");
        assert_eq!(
            core.pump_answered(PumpEnd::Leased { full: false }),
            AfterPump::PumpAgain
        );
        assert_eq!(core.pumping(), Pumping::Idle { again: false });
        assert!(core.want_pump(10, false).is_some());
        assert_eq!(
            core.pump_answered(PumpEnd::Leased { full: false }),
            AfterPump::SleepUntilNext
        );
        assert!(core.woken(5_000), "idle: the wake arms the timer");
        assert_eq!(core.take_woken(), None, "a pump followed: it found the job");
    }

    #[test]
    fn a_wake_during_a_pump_is_slept_until_not_pumped_for() {
        let mut core = started();
        assert!(!core.woken(9_000));
        assert!(!core.woken(7_000), "rule 6: the earlier instant is kept");
        assert_eq!(
            core.pump_answered(PumpEnd::Leased { full: false }),
            AfterPump::SleepUntilNext,
            "rule 6: no pump again for a wake"
        );
        assert_eq!(core.take_woken(), Some(7_000));
        assert_eq!(core.take_woken(), None);
    }

    #[test]
    fn a_slot_sleeps_only_at_rest() {
        let mut core = SlotCore::default();
        assert!(core.at_rest(), "a new slot owes nothing");
        assert!(core.want_pump(10, false).is_some());
        assert!(!core.at_rest(), "rule 7: not with a pump in flight");
        assert!(!core.woken(7_000));
        assert_eq!(
            core.pump_answered(PumpEnd::Leased { full: false }),
            AfterPump::SleepUntilNext
        );
        assert!(!core.at_rest(), "rule 7: not with a wake kept");
        core.take_woken();
        assert!(core.at_rest());
        assert_eq!(core.settle_when(5, true, false), SettleWhen::OpenWindow);
        assert!(!core.at_rest(), "rule 7: not with outcomes in the window");
        assert!(core.begin_settle(1));
        assert!(!core.at_rest(), "rule 7: not with a settle in flight");
        assert!(core.settle_answered(SettleEnd::Unavailable).is_some());
        assert!(!core.at_rest(), "rule 7: not while a settle backs off");
        core.backoff_over();
        assert!(core.begin_settle(1));
        core.settle_answered(SettleEnd::Applied { rescheduled: true });
        assert!(!core.at_rest(), "rule 7: not with a pump wanted");
        assert!(core.want_pump(10, false).is_some());
        assert_eq!(
            core.pump_answered(PumpEnd::Failed),
            AfterPump::SleepFor(Duration::from_millis(ERROR_BACKOFF_MS))
        );
        assert!(
            !core.at_rest(),
            "rule 7: not with a lost pump to adopt from"
        );
        assert!(core.want_pump(10, false).is_some());
        core.pump_answered(PumpEnd::Leased { full: false });
        assert!(core.at_rest());
        core.drain();
        assert!(
            !core.at_rest(),
            "a draining slot is stopped, not put to sleep"
        );
    }

    #[test]
    fn a_full_pump_pumps_again_and_no_room_waits_for_a_settled_run() {
        let mut core = started();
        assert_eq!(
            core.pump_answered(PumpEnd::Leased { full: true }),
            AfterPump::PumpAgain
        );
        assert_eq!(core.want_pump(0, false), None, "no room");
        assert!(core.pump_wanted());
        assert!(core.begin_settle(3));
        assert_eq!(
            core.settle_answered(SettleEnd::Applied { rescheduled: false }),
            None
        );
        assert!(core.pump_wanted(), "the settled runs made room: pump");
        assert!(core.want_pump(3, false).is_some());
    }

    #[test]
    fn a_paused_topic_pumps_nothing() {
        let mut core = SlotCore::default();
        assert_eq!(core.want_pump(10, true), None);
        assert_eq!(core.pumping(), Pumping::Idle { again: false });
    }

    #[test]
    fn a_fenced_slot_pumps_again_only_under_a_new_fence_and_adopts_nothing() {
        let mut core = started();
        core.saw_token(7);
        assert_eq!(
            core.pump_answered(PumpEnd::Failed),
            AfterPump::SleepFor(Duration::from_millis(500))
        );
        assert_eq!(
            core.want_pump(10, false),
            Some(PumpStart {
                adopt_above: Some(7)
            }),
            "rule 4: a lost answer is adopted"
        );
        assert_eq!(core.pump_answered(PumpEnd::Fenced), AfterPump::Nothing);
        assert_eq!(core.want_pump(10, false), None, "rule 2: fenced");
        assert!(!core.woken(5_000));
        core.refenced();
        assert_eq!(
            core.want_pump(10, false),
            Some(PumpStart { adopt_above: None })
        );
    }

    #[test]
    fn a_drain_waits_for_the_pump_in_flight_and_pumps_no_more() {
        let mut core = started();
        core.drain();
        assert!(core.pump_in_flight(), "the drain waits for this answer");
        assert_eq!(
            core.pump_answered(PumpEnd::Leased { full: true }),
            AfterPump::Nothing
        );
        assert!(!core.pump_in_flight());
        assert_eq!(core.want_pump(10, false), None);
        assert!(!core.woken(5_000));
        core.refenced();
        assert_eq!(core.want_pump(10, false), None, "a drain is for good");
    }

    #[test]
    fn the_rate_limit_sleeps_until_the_bucket_has_room_and_keeps_a_wanted_pump() {
        let mut core = started();
        assert_eq!(core.want_pump(10, false), None);
        assert_eq!(
            core.pump_answered(PumpEnd::Limited { retry_in_ms: 0 }),
            AfterPump::SleepFor(Duration::from_millis(1))
        );
        assert!(core.pump_wanted());
    }

    #[test]
    fn one_settle_in_flight_and_an_unavailable_store_backs_off_doubling() {
        let mut core = SlotCore::default();
        assert!(core.begin_settle(2));
        assert!(!core.begin_settle(1), "rule 3: one at a time");
        assert_eq!(core.settling_runs(), 2);
        let mut waits = Vec::new();
        for _ in 0..7 {
            let wait = core
                .settle_answered(SettleEnd::Unavailable)
                .expect("a backoff");
            waits.push(wait.as_millis());
            assert!(core.settle_backing_off());
            assert!(!core.begin_settle(3), "nothing settles before the retry");
            core.backoff_over();
            assert!(core.begin_settle(3));
        }
        assert_eq!(waits, [50, 100, 200, 400, 800, 1000, 1000]);
        assert_eq!(
            core.settle_answered(SettleEnd::Applied { rescheduled: false }),
            None
        );
        assert!(core.begin_settle(1));
        assert_eq!(
            core.settle_answered(SettleEnd::Unavailable),
            Some(Duration::from_millis(50)),
            "a success resets the backoff"
        );
    }

    #[test]
    fn the_batch_window_waits_only_for_runs_that_may_join() {
        let mut core = SlotCore::default();
        assert_eq!(core.settle_when(5, false, false), SettleWhen::Now, "alone");
        assert_eq!(
            core.settle_when(0, true, false),
            SettleWhen::Now,
            "no window"
        );
        assert_eq!(
            core.settle_when(5, true, true),
            SettleWhen::Now,
            "a pump's worth"
        );
        assert_eq!(core.settle_when(5, true, false), SettleWhen::OpenWindow);
        assert_eq!(core.settle_when(5, true, false), SettleWhen::Wait);
        // Rule 5: the window closes while a settle is in flight.
        assert!(core.begin_settle(1));
        assert_eq!(core.settle_when(5, true, false), SettleWhen::OpenWindow);
        core.window_closed();
        assert!(!core.begin_settle(1));
        core.settle_answered(SettleEnd::Applied { rescheduled: false });
        assert_eq!(core.settle_when(5, true, false), SettleWhen::Now);
        assert!(core.begin_settle(1));
        assert_eq!(
            core.settle_when(5, true, false),
            SettleWhen::OpenWindow,
            "closed again"
        );
    }

    #[test]
    fn a_rescheduled_job_makes_an_idle_slot_pump_but_not_a_fenced_one() {
        let mut core = started();
        core.pump_answered(PumpEnd::Leased { full: false });
        assert!(core.begin_settle(1));
        core.settle_answered(SettleEnd::Applied { rescheduled: true });
        assert!(core.pump_wanted());
        assert!(core.want_pump(1, false).is_some());
        core.pump_answered(PumpEnd::Fenced);
        assert!(core.begin_settle(1));
        core.settle_answered(SettleEnd::Applied { rescheduled: true });
        assert!(!core.pump_wanted());
    }

    #[test]
    fn a_restart_forgets_what_was_in_flight() {
        let mut core = started();
        assert!(core.begin_settle(4));
        core.restarted();
        assert!(!core.pump_in_flight());
        assert_eq!(core.settling(), Settling::Idle);
        assert!(core.want_pump(10, false).is_some());
    }

    #[test]
    fn rule_8_a_slot_offers_its_rest_once_and_sleeps_only_if_it_still_may() {
        let mut core = SlotCore::default();
        assert!(core.offer_rest(), "an awake slot offers");
        assert!(!core.offer_rest(), "once until answered");
        core.rest_answered(false);
        assert!(!core.asleep(), "it may not sleep any more: awake");
        assert!(core.offer_rest(), "awake again, it may offer again");
        core.rest_answered(true);
        assert!(core.asleep());
        assert!(!core.offer_rest(), "asleep: nothing to offer");
        core.restarted();
        assert!(!core.asleep() && core.offer_rest(), "a restart wakes it");
    }
}

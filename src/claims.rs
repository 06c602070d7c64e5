//! Pull consumers: jobs of a pull topic (`default_type = "pull"`) are not run by slot actors
//! but claimed by consumers anywhere, two phases as in lmstfy or SQS: a claim leases due
//! jobs (a pump under the consumer's lease, so every invariant of the store holds: never
//! early, a reset during a claim applied after it, stale outcomes refused), then the
//! consumer acks, retries, buries or touches each by its run's token. A consumer that dies
//! leaves its jobs to come back when their lease runs out, the attempt counted.
//!
//! A claim that finds nothing may wait (`wait_ms`, a long poll). It sleeps until the
//! earliest due job or lease deadline of the topic, or until a wake notice for the topic
//! (the same notices that wake slot actors: a job scheduled in this process, or a notice
//! from another instance), whichever comes first; it never polls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::model::Leased;
use crate::store::{FireBudget, SharedStore, SlotDoor};
use crate::time::{Millis, SharedClock};
use crate::topic::TopicConfig;

/// The series pull claims record: registered here, beside the claims that record them.
pub struct ClaimSeries {
    /// How late a pull topic's due jobs were claimed by its consumers (apart from firing
    /// lateness: a claim waits for a consumer to ask).
    pub lateness: prometheus::HistogramVec,
    /// Long polls (claims with `wait_ms`) waiting now on this instance.
    pub long_polls: prometheus::IntGauge,
}

impl ClaimSeries {
    pub(crate) fn register(r: &crate::series::Reg) -> Self {
        ClaimSeries {
            lateness: r.histogram(
                "claim_lateness_seconds",
                "Instant a pull topic's job was claimed by a consumer minus its fire time (how long due jobs waited for a consumer to ask)",
                &["topic"],
                crate::series::seconds(),
            ),
            long_polls: r.gauge(
                "long_polls_waiting",
                "Long polls (claims with wait_ms) waiting on this instance (limits.max_long_polls)",
            ),
        }
    }

    /// Removes a deleted topic's series.
    pub(crate) fn forget(&self, topic: &str) {
        let _ = self.lateness.remove_label_values(&[topic]);
    }
}

/// Most jobs one claim takes.
pub(crate) const MAX_CLAIM: usize = 1_000;
/// Longest wait of a long poll, in ms.
pub(crate) const MAX_WAIT_MS: u64 = 30_000;
/// Longest lease a claim may ask for, in ms (a day).
pub(crate) const MAX_LEASE_MS: u64 = 86_400_000;

/// The API description's schemas of the claim fields these bounds check (see
/// `http/schema.rs`).
pub(crate) mod schemas {
    use utoipa::openapi::schema::Object;

    use crate::wire::schema::integer;

    /// A run's token: a run counter, far below 10^14 (a bound every JSON parser carries
    /// exactly).
    pub(crate) fn token() -> Object {
        integer(0, crate::time::MAX_MILLIS, false).build()
    }

    /// A claim's or a touch's `lease_ms`: 1 to `MAX_LEASE_MS`.
    pub(crate) fn lease_ms() -> Object {
        integer(1, crate::num::signed(super::MAX_LEASE_MS), true).build()
    }

    /// A claim's `wait_ms`: 0 to `MAX_WAIT_MS`.
    pub(crate) fn wait_ms() -> Object {
        integer(0, crate::num::signed(super::MAX_WAIT_MS), true).build()
    }

    /// A claim's `max`: 1 to `MAX_CLAIM`.
    pub(crate) fn max() -> Object {
        integer(
            1,
            crate::num::signed(crate::num::usize_u64(super::MAX_CLAIM)),
            true,
        )
        .build()
    }

    /// A batch of acks: at most `MAX_CLAIM` (one claim's worth).
    pub(crate) fn acks() -> utoipa::openapi::Array {
        utoipa::openapi::schema::ArrayBuilder::new()
            .items(utoipa::openapi::Ref::from_schema_name("AckItem"))
            .max_items(Some(super::MAX_CLAIM))
            .build()
    }

    /// A retry's `delay_ms`: up to `MAX_DELAY_MS`.
    pub(crate) fn delay_ms() -> Object {
        integer(0, crate::time::MAX_DELAY_MS, true).build()
    }
}

/// What a consumer asks of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimRequest {
    /// Most jobs to take, 1 to 1,000.
    pub max: usize,
    /// How long to wait for a due job when there is none, in ms (0 to 30,000).
    pub wait_ms: u64,
    /// The lease, in ms; the topic's visibility timeout when `None`.
    pub lease_ms: Option<u64>,
}

impl Default for ClaimRequest {
    fn default() -> Self {
        ClaimRequest {
            max: 1,
            wait_ms: 0,
            lease_ms: None,
        }
    }
}

impl ClaimRequest {
    /// Refuses a request out of bounds, naming the field.
    pub(crate) fn check(&self) -> Result<()> {
        if !(1..=MAX_CLAIM).contains(&self.max) {
            return Err(Error::invalid(
                "max",
                format!("must be 1 to {MAX_CLAIM}, got {}", self.max),
            ));
        }
        if self.wait_ms > MAX_WAIT_MS {
            return Err(Error::invalid(
                "wait_ms",
                format!("must be 0 to {MAX_WAIT_MS}, got {}", self.wait_ms),
            ));
        }
        if let Some(l) = self.lease_ms
            && !(1..=MAX_LEASE_MS).contains(&l)
        {
            return Err(Error::invalid(
                "lease_ms",
                format!("must be 1 to {MAX_LEASE_MS}, got {l}"),
            ));
        }
        Ok(())
    }
}

/// The claim side of a center: where long polls wait, and what each pull topic's slots are
/// known to hold, so a claim asks the store only for slots that have something due.
pub(crate) struct Claims {
    /// Per pull topic, its view.
    topics: Mutex<HashMap<String, Arc<TopicView>>>,
    /// How long a slot's known next time is trusted before the slot is asked again: the
    /// safety net's round, since notices of far-off jobs from other instances are not
    /// sent (the instance's safety net finds them in time).
    refresh_ms: Millis,
}

/// One pull topic: what wakes its waiting claims, and its slots.
#[derive(Default)]
struct TopicView {
    woken: Notify,
    /// Wakes claims waiting out a pause when the topic's settings change.
    changed: Notify,
    slots: Mutex<SlotsView>,
}

impl TopicView {
    /// A claim of `slot` answered `claimed`: the slot is free again, its next time known
    /// (unknown after an error); wakes the sleeping claims that must look again.
    fn claimed(&self, slot: u32, claimed: &Result<crate::model::Pumped>, now: Millis) {
        let next_at = match claimed {
            Ok(p) => p.next_at,
            Err(_) => Some(0),
        };
        if lock(&self.slots).release(slot, next_at, now) {
            self.woken.notify_waiters();
        }
    }
}

/// What the claims of one process know of a topic's slots.
#[derive(Default)]
struct SlotsView {
    /// Per slot, when it next needs a claim: its earliest due job or lease deadline as the
    /// last claim or notice told; 0 (unknown) asks the store at once, `Millis::MAX` none.
    next_at: Vec<Millis>,
    /// Per slot, whether a claim of this process is asking the store for it: one claim per
    /// slot at a time, so waiting consumers do not all ask for the one job that came due.
    busy: Vec<bool>,
    /// Per slot, whether a consumer went to sleep while the slot was busy, so its release
    /// must wake the sleepers.
    watched: Vec<bool>,
    /// Per slot, whether a sleeping consumer will wake at its next time: the others sleep
    /// until the next slot's, so one job coming due wakes one consumer, not all of them.
    reserved: Vec<bool>,
    /// Where the next look starts, so claims take from every slot in turn.
    start: u32,
    /// When every slot's next time was last forgotten (see `refresh_ms`).
    refreshed_at: Millis,
}

/// What a look at a topic's slots found.
enum Look {
    /// This slot is due and now busy under the caller.
    Take(u32),
    /// Nothing is due: the earliest next time of a slot that is neither busy nor reserved
    /// by a sleeper, and that slot.
    Wait(Option<(Millis, u32)>),
}

impl SlotsView {
    fn fit(&mut self, slots: u32) {
        let n = slots as usize;
        if self.next_at.len() != n {
            self.next_at.resize(n, 0);
            self.busy.resize(n, false);
            self.watched.resize(n, false);
            self.reserved.resize(n, false);
        }
    }

    /// The next due slot that no claim is asking for, marked busy; else when to look again.
    fn look(&mut self, slots: u32, now: Millis, refresh_ms: Millis) -> Look {
        self.fit(slots);
        if now >= self.refreshed_at.saturating_add(refresh_ms) {
            self.next_at.iter_mut().for_each(|at| *at = 0);
            self.refreshed_at = now;
        }
        let first = self.start;
        let mut earliest: Option<(Millis, u32)> = None;
        for i in 0..slots {
            let s = (first.wrapping_add(i) % slots) as usize;
            if self.busy[s] {
                continue;
            }
            let at = self.next_at[s];
            if at <= now {
                self.busy[s] = true;
                self.start = (crate::num::to_u32(s) + 1) % slots;
                return Look::Take(crate::num::to_u32(s));
            }
            if at != Millis::MAX && !self.reserved[s] && earliest.is_none_or(|(e, _)| at < e) {
                earliest = Some((at, crate::num::to_u32(s)));
            }
        }
        Look::Wait(earliest)
    }

    /// A sleeper will wake at `slot`'s next time (or gives that up: `on` false).
    fn reserve(&mut self, slot: u32, on: bool) {
        if let Some(r) = self.reserved.get_mut(slot as usize) {
            *r = on;
        }
    }

    /// Marks the busy slots watched: the caller sleeps, and their release wakes it.
    fn watch_busy(&mut self) {
        for (w, b) in self.watched.iter_mut().zip(&self.busy) {
            *w |= *b;
        }
    }

    /// A claim of `slot` is over: the slot next needs one at `next_at` (`None`: nothing
    /// there; 0: unknown). Whether sleeping claims must look again.
    fn release(&mut self, slot: u32, next_at: Option<Millis>, now: Millis) -> bool {
        let s = slot as usize;
        if s >= self.busy.len() {
            return true;
        }
        self.busy[s] = false;
        let at = next_at.unwrap_or(Millis::MAX);
        self.next_at[s] = at;
        std::mem::take(&mut self.watched[s]) || at <= now
    }

    /// A notice: `slot` has a job due at `at`. Whether sleeping claims must look again.
    fn heard(&mut self, slot: u32, at: Millis) -> bool {
        let s = slot as usize;
        if s >= self.next_at.len() {
            return true;
        }
        if at < self.next_at[s] {
            self.next_at[s] = at;
            return !self.busy[s];
        }
        false
    }
}

impl Claims {
    /// Claims that trust a slot's known next time for `refresh_ms` (the slots' poll).
    pub(crate) fn new(refresh_ms: u64) -> Self {
        Claims {
            topics: Mutex::new(HashMap::new()),
            refresh_ms: crate::num::millis(refresh_ms.max(1)),
        }
    }

    /// The topic's settings changed (a pause or a resume, here or on another instance):
    /// claims waiting out a pause look again.
    pub(crate) fn topic_changed(&self, topic: &str) {
        self.view(topic).changed.notify_waiters();
    }

    /// Waits until the topic's settings change or `wait` passes; true when they changed.
    pub(crate) async fn until_changed(&self, topic: &str, wait: std::time::Duration) -> bool {
        let view = self.view(topic);
        let changed = view.changed.notified();
        tokio::time::timeout(wait, changed).await.is_ok()
    }

    fn view(&self, topic: &str) -> Arc<TopicView> {
        lock(&self.topics)
            .entry(topic.to_string())
            .or_default()
            .clone()
    }

    /// A job of `topic` in `slot` is due at `at`: wakes the claims waiting there when that
    /// is sooner than they knew.
    pub(crate) fn wake(&self, topic: &str, slot: u32, at: Millis) {
        let Some(view) = lock(&self.topics).get(topic).cloned() else {
            return;
        };
        if lock(&view.slots).heard(slot, at) {
            view.woken.notify_waiters();
        }
    }

    /// Leases up to `req.max` due jobs of the pull topic `topic`, taking from every slot in
    /// turn; with `wait_ms`, waits for one to come due.
    pub(crate) async fn claim(
        &self,
        store: &SharedStore,
        clock: &SharedClock,
        topic: &Arc<TopicConfig>,
        req: ClaimRequest,
    ) -> Result<Vec<Leased>> {
        let lease_ms = req.lease_ms.unwrap_or(topic.visibility_timeout_ms);
        let view = self.view(&topic.name);
        let deadline = clock.now().saturating_add(crate::num::millis(req.wait_ms));
        let mut jobs = Vec::new();
        loop {
            // Armed before the look, so a wake between the look and the wait is not lost.
            let woken = view.woken.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            // One pass: every slot due at `now`, each once unless it holds more than asked.
            // Jobs that come due during the pass wait for the next claim, so the first ones
            // taken are not held back while later ones are gathered.
            let now = clock.now();
            // A rate-limited topic's fires granted for this pass and not yet handed out
            // (given back at its end), and when its bucket holds more if it ran dry.
            let mut budget = Budget::default();
            let next_at = loop {
                // Bound first: a guard in a match's scrutinee lives through the whole match.
                let look = lock(&view.slots).look(topic.slots, now, self.refresh_ms);
                match look {
                    Look::Wait(next_at) => break next_at,
                    Look::Take(slot) => {
                        let want = req.max - jobs.len();
                        let (door, want) = match budget.open(store, topic, slot, want, now).await {
                            Ok(Some(open)) => open,
                            Err(e) => {
                                lock(&view.slots).release(slot, Some(0), now);
                                return Err(e);
                            }
                            // Dry: the slot stays due, and no other claim is woken for it
                            // (the bucket is dry for all).
                            Ok(None) => {
                                lock(&view.slots).release(slot, Some(0), now);
                                break None;
                            }
                        };
                        let claimed = door.claim(now, want, lease_ms).await;
                        view.claimed(slot, &claimed, clock.now());
                        let claimed = match claimed {
                            Ok(p) => p.jobs,
                            Err(e) if jobs.is_empty() => return Err(e),
                            Err(e) => {
                                // What the pass leased from the slots before goes out all
                                // the same: dropped, it would wait out its lease.
                                tracing::warn!(topic = %topic.name, slot, error = %e, "a slot's claim failed; the claim answers with what it took before");
                                budget.give_back(now).await;
                                return Ok(jobs);
                            }
                        };
                        budget.spend(claimed.len());
                        jobs.extend(claimed);
                        if jobs.len() >= req.max {
                            budget.give_back(now).await;
                            return Ok(jobs);
                        }
                    }
                }
            };
            budget.give_back(now).await;
            if !jobs.is_empty() || now >= deadline {
                return Ok(jobs);
            }
            let wake = Wake {
                next_at,
                dry_until: budget.dry_until,
                deadline,
            };
            wake.sleep(&view, clock, woken.as_mut()).await;
        }
    }
}

/// When a claim that found nothing looks again.
struct Wake {
    /// The earliest next time of a slot no one else waits for, and that slot.
    next_at: Option<(Millis, u32)>,
    /// The rate limit's bucket ran dry: when it holds more.
    dry_until: Option<Millis>,
    /// The end of the claim's wait.
    deadline: Millis,
}

impl Wake {
    /// Sleeps until the slot's next time (not before the bucket holds more), a wake notice
    /// (`woken`), or the deadline, whichever comes first. The slot it wakes for is reserved
    /// while it sleeps (and released however the sleep ends, a dropped request too).
    async fn sleep(
        &self,
        view: &TopicView,
        clock: &SharedClock,
        woken: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
    ) {
        // With the bucket dry, nothing is claimed before it holds more.
        let wake_at = match (self.next_at, self.dry_until) {
            (Some((at, _)), Some(dry)) => Some(at.max(dry)),
            (None, Some(dry)) => Some(dry),
            (next, None) => next.map(|(at, _)| at),
        };
        let _reserved = {
            let mut slots = lock(&view.slots);
            slots.watch_busy();
            self.next_at.map(|(_, slot)| {
                slots.reserve(slot, true);
                Reservation { view, slot }
            })
        };
        let until = wake_at.map_or(self.deadline, |at| at.min(self.deadline));
        // To the microsecond: `now` is truncated to the ms, and sleeping whole ms from it
        // would wake up to a ms after the job came due.
        let at_us = until.saturating_mul(1_000).max(clock.now_us() + 1);
        tokio::select! {
            _ = woken => {}
            _ = clock.until(at_us) => {}
        }
    }
}

/// The fires of a rate-limited pull topic one claim pass holds.
#[derive(Default)]
struct Budget {
    /// The last take's fires and the door they were taken through (any of the topic's:
    /// they share its bucket).
    fires: Option<(FireBudget, SlotDoor)>,
    /// The bucket ran dry: when it holds more.
    dry_until: Option<Millis>,
}

impl Budget {
    /// Fires granted and not yet handed out.
    fn room(&self) -> u32 {
        self.fires.as_ref().map_or(0, |(f, _)| f.room())
    }

    /// The door of `slot` and how many of `want` runs its claim may take (`fit`); `None`
    /// when the bucket is dry.
    async fn open(
        &mut self,
        store: &SharedStore,
        topic: &Arc<TopicConfig>,
        slot: u32,
        want: usize,
        now: Millis,
    ) -> Result<Option<(SlotDoor, usize)>> {
        let door = store.door(Arc::clone(topic), slot, 0)?;
        Ok(self.fit(&door, want, now).await?.map(|want| (door, want)))
    }

    /// How many of `want` runs a slot's claim may take: all of them on a topic with no
    /// limit; else what this pass holds, taking more from the bucket when it holds none.
    /// `None` when the bucket is dry (`dry_until` then says when it holds more).
    async fn fit(&mut self, door: &SlotDoor, want: usize, now: Millis) -> Result<Option<usize>> {
        if door.topic().max_fires_per_s.is_none() {
            return Ok(Some(want));
        }
        if self.room() == 0 {
            let asked = crate::num::to_u32(want);
            let fires = FireBudget::new(asked, door.take_fires(asked, now).await?);
            if fires.dry() {
                let wait = crate::num::millis(fires.retry_in_ms().max(1));
                self.dry_until = Some(now.saturating_add(wait));
                return Ok(None);
            }
            self.took(fires, door);
        }
        Ok(Some(want.min(usize::try_from(self.room()).unwrap_or(want))))
    }

    fn took(&mut self, fires: FireBudget, door: &SlotDoor) {
        self.fires = Some((fires, door.clone()));
    }

    fn spend(&mut self, n: usize) {
        if let Some((f, _)) = &mut self.fires {
            f.spend(n);
        }
    }

    /// Gives back what the pass did not hand out (lost, it would only hold fires back for a
    /// tenth of a second).
    async fn give_back(&mut self, now: Millis) {
        if let Some((fires, door)) = self.fires.take()
            && fires.unused() > 0
        {
            let _ = door.give_back_fires(fires.unused(), now).await;
        }
    }
}

/// A sleeper's hold on the slot it wakes for; dropped when the sleep ends.
struct Reservation<'a> {
    view: &'a TopicView,
    slot: u32,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        lock(&self.view.slots).reserve(self.slot, false);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(l: Look) -> Option<u32> {
        match l {
            Look::Take(s) => Some(s),
            Look::Wait(_) => None,
        }
    }

    #[test]
    fn a_due_slot_goes_to_one_claim_at_a_time_and_unknown_slots_are_due() {
        let mut v = SlotsView::default();
        // Unknown slots are due: two looks take two different slots.
        let a = taken(v.look(2, 10, 1_000)).unwrap();
        let b = taken(v.look(2, 10, 1_000)).unwrap();
        assert_ne!(a, b);
        // Both busy: nothing to take and no known time to wait for.
        assert!(matches!(v.look(2, 10, 1_000), Look::Wait(None)));
        // Released with later times: the earliest is when to look again.
        v.release(a, Some(50), 10);
        v.release(b, Some(30), 10);
        assert!(matches!(v.look(2, 10, 1_000), Look::Wait(Some((30, _)))));
        // At 30 the slot with 30 is due, the other not.
        assert_eq!(taken(v.look(2, 30, 1_000)), Some(b));
        assert!(matches!(v.look(2, 30, 1_000), Look::Wait(Some((50, _)))));
    }

    #[test]
    fn each_sleeper_wakes_for_a_slot_of_its_own() {
        let mut v = SlotsView::default();
        for _ in 0..3 {
            let s = taken(v.look(3, 0, 1_000)).unwrap();
            v.release(s, Some(100 + 10 * Millis::from(s)), 0);
        }
        // The first sleeper wakes for slot 0's time; with slot 0 reserved, the next one for
        // slot 1's, then slot 2's; a fourth has no slot left, and waits for a notice.
        let mut woken = Vec::new();
        for _ in 0..3 {
            let Look::Wait(Some((at, s))) = v.look(3, 50, 1_000) else {
                panic!("a slot to wake for");
            };
            v.reserve(s, true);
            woken.push((at, s));
        }
        assert_eq!(woken, [(100, 0), (110, 1), (120, 2)]);
        assert!(matches!(v.look(3, 50, 1_000), Look::Wait(None)));
        // A sleeper gone: its slot is the next sleeper's again.
        v.reserve(1, false);
        assert!(matches!(v.look(3, 50, 1_000), Look::Wait(Some((110, 1)))));
    }

    #[test]
    fn a_release_wakes_sleepers_when_it_was_watched_or_is_still_due() {
        let mut v = SlotsView::default();
        let a = taken(v.look(1, 10, 1_000)).unwrap();
        // Released with nothing due and nobody watching: no wake.
        assert!(!v.release(a, Some(100), 10));
        let a = taken(v.look(1, 100, 1_000)).unwrap();
        // A consumer sleeps while the slot is busy: the release wakes it.
        v.watch_busy();
        assert!(v.release(a, Some(500), 100));
        // A release that leaves jobs due wakes sleepers too.
        let a = taken(v.look(1, 500, 1_000)).unwrap();
        assert!(v.release(a, Some(400), 500));
    }

    #[test]
    fn a_notice_wakes_only_when_it_is_sooner_and_old_knowledge_is_asked_again() {
        let mut v = SlotsView::default();
        let a = taken(v.look(1, 0, 1_000)).unwrap();
        v.release(a, None, 0);
        assert!(matches!(v.look(1, 10, 1_000), Look::Wait(None)));
        assert!(v.heard(0, 200));
        assert!(!v.heard(0, 300), "a later job changes nothing");
        assert!(matches!(v.look(1, 10, 1_000), Look::Wait(Some((200, 0)))));
        // After the refresh period every slot is asked again.
        assert_eq!(taken(v.look(1, 1_000, 1_000)), Some(0));
    }
}

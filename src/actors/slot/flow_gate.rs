//! A slot's runs waiting for room on their flow key (`crate::flow`): per key, the runs in
//! fire-time order, and whether an ask for room is in flight. The slot actor asks the store
//! for room for a key's first runs (`Store::flow_take`), starts those granted, and asks again
//! when a run of the key ends here, when the rate has room again, or after a short poll (a
//! run of the key that ended on another instance; one that ended in another slot here rings
//! the key's bell, [`FlowBells`]). Waiting runs stay leased to the slot, in
//! its run book, so their leases are kept and a crash hands them to the next owner. The
//! gate holds no timer: it answers what to ask and what to start, and the actor keeps the
//! timers of the next asks.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::Notify;

use crate::model::Leased;
use crate::time::Millis;

/// Most runs of one key one ask names: room is granted to the first ones that fit.
pub(super) const ASK_MAX: usize = 64;

/// How often a slot asks again for a key whose parallelism is full: room freed on another
/// instance is seen this late at most (room freed here is asked for at once).
pub(super) const POLL_MS: u64 = 50;

/// How long a run past its key's share waits in the store before it is due again, while its
/// key's line has not moved here yet; and the least and the most it waits.
pub(super) const DEFER_FIRST_MS: u64 = 1_000;
pub(super) const DEFER_MIN_MS: u64 = 100;
pub(super) const DEFER_MAX_MS: u64 = 60_000;

/// Runs of a key that must have had room before its line's pace is trusted to say how long
/// a run sent back waits: the first asks' round trips make an early pace far too slow (a
/// hot key's runs were sent back for the whole 60 s, and its calls ran at a tenth of their
/// rate); until then a run sent back waits [`DEFER_FIRST_MS`] and is looked at again.
pub(super) const PACE_SAMPLE: u64 = 1_000;

/// A run's name in a key's counters: `id:token`.
pub(super) fn member(lease: &Leased) -> String {
    format!("{}:{}", lease.job.id, lease.token)
}

/// One bell per (topic, flow key) that slots of this instance wait on: a run that ends its
/// room rings it, so every slot here waiting for the key asks at once rather than at its
/// next poll. Held weakly: a bell no slot waits on goes.
#[derive(Default)]
pub(crate) struct FlowBells {
    bells: Mutex<HashMap<(String, String), Weak<Notify>>>,
}

impl FlowBells {
    /// The bell of `key` in `topic`, to wait on.
    pub(crate) fn bell(&self, topic: &str, key: &str) -> Arc<Notify> {
        let mut bells = self.bells.lock().unwrap_or_else(PoisonError::into_inner);
        let k = (topic.to_string(), key.to_string());
        if let Some(bell) = bells.get(&k).and_then(Weak::upgrade) {
            return bell;
        }
        if bells.len() >= 1_024 {
            bells.retain(|_, b| b.strong_count() > 0);
        }
        let bell = Arc::new(Notify::new());
        bells.insert(k, Arc::downgrade(&bell));
        bell
    }

    /// Wakes every slot here waiting on `key`.
    pub(crate) fn ring(&self, topic: &str, key: &str) {
        let bells = self.bells.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(bell) = bells
            .get(&(topic.to_string(), key.to_string()))
            .and_then(Weak::upgrade)
        {
            bell.notify_waiters();
        }
    }
}

#[derive(Default)]
struct KeyQueue {
    /// Oldest fire time first.
    runs: VecDeque<Arc<Leased>>,
    /// An ask is in flight.
    asking: bool,
    /// Room was freed here while an ask was in flight: ask again at its answer.
    again: bool,
    /// How long the line has held runs (the slot's clock: `busy_ms`, and since
    /// `busy_since` while it holds some now), and how many of its runs had room in that
    /// time: the pace it moves at, not slowed by the time it stood empty.
    busy_ms: u64,
    busy_since: Option<Millis>,
    started: u64,
    /// Runs past the key's share sent back to the store (by the slot, or set aside by its
    /// pump), by the instant they are due again: until then they queue behind the line's
    /// runs. The key's queue is kept while any are out, so its pace is known when they
    /// come back.
    sent_back: BTreeMap<Millis, u64>,
}

impl KeyQueue {
    /// The time the line has held runs, up to `now`.
    fn busy(&self, now: Millis) -> u64 {
        let open = self
            .busy_since
            .map_or(0, |since| u64::try_from(now - since).unwrap_or(0));
        self.busy_ms + open
    }

    /// Runs sent back that are not due again by `now`.
    fn out(&self, now: Millis) -> u64 {
        self.sent_back
            .range(now.saturating_add(1)..)
            .map(|(_, n)| n)
            .sum()
    }

    /// Nothing waits and nothing sent back is still out at `now` (an ask is answered when
    /// this is asked).
    fn idle(&mut self, now: Millis) -> bool {
        self.sent_back = self.sent_back.split_off(&now.saturating_add(1));
        self.runs.is_empty() && self.sent_back.is_empty()
    }
}

/// What one ask for room names.
pub(super) struct Ask {
    /// The first runs, as `id:token`.
    pub(super) runs: Vec<String>,
    /// Runs waiting for the key in all.
    pub(super) waiting: u32,
    /// The oldest one's fire time.
    pub(super) oldest: Millis,
}

#[derive(Default)]
pub(super) struct FlowGate {
    keys: HashMap<String, KeyQueue>,
    waiting: usize,
}

impl FlowGate {
    /// Runs waiting, over every key.
    pub(super) fn len(&self) -> usize {
        self.waiting
    }

    /// The oldest waiting run's fire time.
    pub(super) fn oldest(&self) -> Option<Millis> {
        self.keys
            .values()
            .filter_map(|q| q.runs.front().map(|r| r.job.fire_at))
            .min()
    }

    /// The keys whose line holds `share` runs or more: their next runs go back to the store.
    pub(super) fn full(&self, share: usize) -> impl Iterator<Item = &str> {
        self.keys
            .iter()
            .filter(move |(_, q)| q.runs.len() >= share)
            .map(|(k, _)| k.as_str())
    }

    /// How many runs one key may have waiting here now: its share of the waiting room
    /// (`per_key`), or one while the room (`room`, over every key) is full: a key with none
    /// waiting still gets one in.
    pub(super) fn share(&self, room: usize, per_key: usize) -> usize {
        if self.waiting >= room { 1 } else { per_key }
    }

    /// Takes in the runs a pump set aside (`set_aside`, a count per key), each sent back and
    /// due again at the instant the pump was given for its key (`aside`); answers how many.
    pub(super) fn set_aside(
        &mut self,
        aside: &[(String, Millis)],
        set_aside: &[(String, u32)],
    ) -> u64 {
        let mut n = 0;
        for (key, count) in set_aside {
            let at = aside
                .iter()
                .find(|(k, _)| k == key)
                .map_or(0, |(_, at)| *at);
            self.sent_back(key, u64::from(*count), at);
            n += u64::from(*count);
        }
        n
    }

    /// Runs of `key` waiting here.
    pub(super) fn line(&self, key: &str) -> usize {
        self.keys.get(key).map_or(0, |q| q.runs.len())
    }

    /// A run of `key` past its share goes back to the store: how long from `now` until it
    /// is due again. About the time the runs ahead of it (the line, and those sent back
    /// before it) take to have room at the pace the line has moved, within
    /// [`DEFER_MIN_MS`] and [`DEFER_MAX_MS`]; [`DEFER_FIRST_MS`] before it has moved. Those
    /// sent back in turn are due back in turn.
    pub(super) fn defer_ms(&mut self, key: &str, now: Millis) -> u64 {
        let ms = self.wait_ms(key, now, 1);
        self.sent_back(key, 1, now.saturating_add(crate::num::millis(ms)));
        ms
    }

    /// Counts `n` runs of `key` sent back to the store (by the slot, or set aside by its
    /// pump), due again `at`: they queue behind the line until then.
    pub(super) fn sent_back(&mut self, key: &str, n: u64, at: Millis) {
        if let Some(q) = self.keys.get_mut(key) {
            *q.sent_back.entry(at).or_default() += n;
        }
    }

    /// When, from `now`, runs of `key` sent back now are due again (see `defer_ms`): after
    /// the line's runs and those sent back before them.
    pub(super) fn back_in_ms(&self, key: &str, now: Millis) -> u64 {
        self.wait_ms(key, now, 0)
    }

    /// The time the line's runs, the runs sent back and still out, and `more` take at the
    /// line's pace, within the bounds; [`DEFER_FIRST_MS`] before the line has moved.
    fn wait_ms(&self, key: &str, now: Millis, more: u64) -> u64 {
        let Some(q) = self.keys.get(key) else {
            return DEFER_FIRST_MS;
        };
        let busy = q.busy(now);
        if q.started < PACE_SAMPLE || busy == 0 {
            return DEFER_FIRST_MS;
        }
        let ahead = crate::num::usize_u64(q.runs.len()) + q.out(now) + more;
        (ahead.saturating_mul(busy) / q.started).clamp(DEFER_MIN_MS, DEFER_MAX_MS)
    }

    /// Puts a run in its key's line, by fire time; `now` on the slot's clock.
    pub(super) fn wait(&mut self, key: &str, lease: Arc<Leased>, now: Millis) {
        let q = self.keys.entry(key.to_string()).or_default();
        if q.runs.is_empty() {
            q.busy_since = Some(now);
        }
        let at = q
            .runs
            .partition_point(|r| r.job.fire_at <= lease.job.fire_at);
        q.runs.insert(at, lease);
        self.waiting += 1;
    }

    /// Starts an ask for `key`: `None` when its line is empty or an ask is in flight (which
    /// is then asked again at its answer).
    pub(super) fn ask(&mut self, key: &str) -> Option<Ask> {
        let q = self.keys.get_mut(key)?;
        if q.asking {
            q.again = true;
            return None;
        }
        let first = q.runs.front()?;
        q.asking = true;
        q.again = false;
        let ask = Ask {
            runs: q.runs.iter().take(ASK_MAX).map(|r| member(r)).collect(),
            waiting: crate::num::to_u32(q.runs.len()),
            oldest: first.job.fire_at,
        };
        Some(ask)
    }

    /// An ask was answered at `now`: its first `n` runs leave the line (to start). Answers
    /// them, and whether to ask again at once (room freed meanwhile).
    pub(super) fn answered(
        &mut self,
        key: &str,
        n: usize,
        now: Millis,
    ) -> (Vec<Arc<Leased>>, bool) {
        let Some(q) = self.keys.get_mut(key) else {
            return (Vec::new(), false);
        };
        q.asking = false;
        let n = n.min(q.runs.len());
        let out: Vec<_> = q.runs.drain(..n).collect();
        q.started += crate::num::usize_u64(out.len());
        self.waiting -= out.len();
        let again = std::mem::take(&mut q.again) && !q.runs.is_empty();
        if q.runs.is_empty()
            && let Some(since) = q.busy_since.take()
        {
            q.busy_ms += u64::try_from(now - since).unwrap_or(0);
        }
        if q.idle(now) {
            self.keys.remove(key);
        }
        (out, again)
    }

    /// Whether runs of `key` still wait.
    pub(super) fn waits(&self, key: &str) -> bool {
        self.keys.get(key).is_some_and(|q| !q.runs.is_empty())
    }

    /// Every waiting run, taken out (a drain, a pause).
    pub(super) fn take_all(&mut self) -> Vec<Arc<Leased>> {
        self.waiting = 0;
        self.keys.drain().flat_map(|(_, q)| q.runs).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(id: &str, fire_at: Millis) -> Arc<Leased> {
        let mut job = crate::model::Job::stub("t", id);
        job.fire_at = fire_at;
        Arc::new(Leased {
            job,
            token: 1,
            lease_until: 0,
            slot: 0,
            handed_record: Default::default(),
        })
    }

    #[test]
    fn a_key_has_its_share_until_the_room_is_full_then_one() {
        let mut gate = FlowGate::default();
        assert_eq!(gate.share(2, 5), 5, "an empty room: the key's own share");
        gate.wait("a", lease("1", 10), 10);
        assert_eq!(gate.share(2, 5), 5);
        gate.wait("b", lease("2", 10), 10);
        assert_eq!(gate.share(2, 5), 1, "the room full: one each");
    }

    #[test]
    fn runs_set_aside_count_per_key_and_are_due_back_at_their_instant() {
        let mut gate = FlowGate::default();
        gate.wait("a", lease("1", 0), 0);
        gate.wait("b", lease("2", 0), 0);
        let aside = [("a".to_string(), 5_000), ("b".to_string(), 9_000)];
        let n = gate.set_aside(&aside, &[("a".to_string(), 3), ("b".to_string(), 4)]);
        assert_eq!(n, 7);
        // Sent back, not waiting here: the lines are as they were.
        assert_eq!((gate.len(), gate.line("a"), gate.line("b")), (2, 1, 1));
    }

    #[test]
    fn a_line_keeps_fire_time_order_and_one_ask_at_a_time() {
        let mut g = FlowGate::default();
        g.wait("k", lease("b", 20), 0);
        g.wait("k", lease("a", 10), 0);
        g.wait("k", lease("c", 30), 0);
        let ask = g.ask("k");
        let ask = ask.expect("an ask");
        assert_eq!(ask.runs, ["a:1", "b:1", "c:1"]);
        assert_eq!((ask.waiting, ask.oldest), (3, 10));
        // In flight: a second ask waits for the answer, and is made then.
        assert!(g.ask("k").is_none());
        let (started, again) = g.answered("k", 2, 0);
        let ids: Vec<_> = started.iter().map(|r| r.job.id.as_str()).collect();
        assert_eq!((ids, again), (vec!["a", "b"], true));
        assert_eq!((g.len(), g.oldest()), (1, Some(30)));
        let rest = g.take_all();
        assert_eq!((rest.len(), g.len()), (1, 0));
    }

    /// A run sent back waits about as long as the runs ahead of it take at the line's pace
    /// (the line's runs, and those sent back before it that are not due again yet), within
    /// the bounds; before the line has moved, or while too few of its runs had room for the
    /// pace to be trusted, the first wait.
    #[test]
    fn a_run_past_its_share_waits_as_long_as_the_runs_ahead_take() {
        let mut g = FlowGate::default();
        for i in 0..1_010 {
            g.wait("k", lease(&format!("j{i}"), i), 1_000);
        }
        assert_eq!(g.line("k"), 1_010);
        assert_eq!(
            g.defer_ms("k", 1_000),
            DEFER_FIRST_MS,
            "the line has not moved"
        );
        assert_eq!(g.defer_ms("other", 1_000), DEFER_FIRST_MS, "no line");
        // A thousand runs had room in 200 s: 200 ms a run.
        let _ = g.ask("k");
        let _ = g.answered("k", 1_000, 201_000);
        // Ahead: the 10 still in line and this one (the first sent back is due at 2,000,
        // no longer out): 11 × 200 ms.
        assert_eq!(g.defer_ms("k", 201_000), 2_200);
        assert_eq!(
            g.defer_ms("k", 201_000),
            2_400,
            "each sent back later than the last"
        );
        // Set aside by the pump: 100 more, due at once at the instant the line gives.
        let at = 201_000 + i64::try_from(g.back_in_ms("k", 201_000)).unwrap();
        assert_eq!(at, 203_400);
        g.sent_back("k", 100, at);
        assert_eq!(g.back_in_ms("k", 201_000), (10 + 2 + 100) * 200);
        // Once they are due again they are no longer ahead (the pace moves with the time
        // the line stays busy).
        assert_eq!(g.back_in_ms("k", 203_399), (10 + 101) * 202_399 / 1_000);
        assert_eq!(g.back_in_ms("k", 203_400), 10 * 202_400 / 1_000);
        for _ in 0..1_000 {
            g.defer_ms("k", 201_000);
        }
        assert_eq!(g.defer_ms("k", 201_000), DEFER_MAX_MS);
        // A fast line: the least wait.
        let mut fast = FlowGate::default();
        for i in 0..1_001 {
            fast.wait("f", lease(&format!("f{i}"), 0), 0);
        }
        let _ = fast.ask("f");
        let _ = fast.answered("f", 1_000, 1);
        assert_eq!(fast.defer_ms("f", 1), DEFER_MIN_MS);
        // Too few runs had room to trust the pace (the first asks' round trips in it).
        let mut young = FlowGate::default();
        for i in 0..10 {
            young.wait("y", lease(&format!("y{i}"), i), 0);
        }
        let _ = young.ask("y");
        let _ = young.answered("y", 5, 1_000);
        assert_eq!(young.defer_ms("y", 1_000), DEFER_FIRST_MS);
    }

    /// A line that empties while runs it sent back are out keeps its pace: when they come
    /// back, the next sent back wait what the line's pace says, not the first wait again;
    /// the time it stood empty does not slow the pace. Once nothing is out, it is forgotten.
    #[test]
    fn a_line_keeps_its_pace_while_what_it_sent_back_is_out() {
        let mut g = FlowGate::default();
        for i in 0..1_004 {
            g.wait("k", lease(&format!("j{i}"), i), 0);
        }
        assert_eq!(g.defer_ms("k", 100_000), DEFER_FIRST_MS); // due again at 101,000
        let _ = g.ask("k");
        let (ran, _) = g.answered("k", 1_004, 100_400); // about 100 ms a run
        assert_eq!(ran.len(), 1_004);
        assert_eq!(g.line("k"), 0);
        // Empty from 100,400 to 101,000; the one sent back comes in, with 9 more.
        for i in 0..10 {
            g.wait("k", lease(&format!("r{i}"), i), 101_000);
        }
        assert_eq!(
            g.defer_ms("k", 101_000),
            11 * 100_400 / 1_004,
            "11 runs ahead at the busy line's pace, the empty 600 ms not counted"
        );
        let _ = g.ask("k");
        let _ = g.answered("k", 10, 102_000);
        assert_eq!(g.keys.len(), 1, "one run is still out");
        let _ = g.ask("k");
        let _ = g.answered("k", 0, 102_200);
        assert!(g.keys.is_empty(), "nothing out, nothing waits: forgotten");
    }
}

//! The slot's runs as one book: the runs handed out and not yet reported (by job id, each
//! with the lease it holds now) and the outcomes waiting for the next settle. "Is this run
//! still ours" is asked here, once: a run is ours while the book holds its job under the
//! same token (the store may have leased the job again, to a newer run, when a lease ran
//! out). No actix: its answers are values, tested alone below.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::{Leased, RunOutcome, Settlement};
use crate::time::Millis;

/// The slot's runs and the outcomes waiting to settle.
#[derive(Default)]
pub(crate) struct RunBook {
    /// Runs handed out whose report has not come back, by job id. Hashed with foldhash: a
    /// burst inserts and removes an id per run.
    running: HashMap<String, Arc<Leased>, foldhash::fast::RandomState>,
    /// Reported outcomes waiting for the next settle, in the order they came.
    outcomes: Vec<Settlement>,
}

impl RunBook {
    /// Takes a leased run in; answers it shared (the book keeps one handle, the run's
    /// future the other). A newer lease of the same job replaces an older one.
    pub(crate) fn take(&mut self, lease: Leased) -> Arc<Leased> {
        let lease = Arc::new(lease);
        self.running.insert(lease.job.id.clone(), lease.clone());
        lease
    }

    /// Whether `lease` is still this book's run of its job: the job is held under the same
    /// token (not released, not leased again to a newer run).
    pub(crate) fn holds(&self, lease: &Leased) -> bool {
        self.holds_token(&lease.job.id, lease.token)
    }

    /// [`RunBook::holds`] by id and token.
    pub(crate) fn holds_token(&self, id: &str, token: u64) -> bool {
        self.running.get(id).is_some_and(|run| run.token == token)
    }

    /// Whether any run of job `id` is held (whatever its token).
    pub(crate) fn holds_job(&self, id: &str) -> bool {
        self.running.contains_key(id)
    }

    /// Forgets `id`'s run if it is still the run of `token`; answers whether it was.
    pub(crate) fn release(&mut self, id: &str, token: u64) -> bool {
        let ours = self.holds_token(id, token);
        if ours {
            self.running.remove(id);
        }
        ours
    }

    /// Ends `lease`'s run with `outcome` (decided here, not by a handler: a release, a
    /// deferral) when it is still ours: it leaves the running runs and waits to settle.
    /// Answers whether it did.
    pub(crate) fn end(&mut self, lease: Arc<Leased>, outcome: RunOutcome, now: Millis) -> bool {
        if !self.release(&lease.job.id, lease.token) {
            return false;
        }
        let lease = Arc::try_unwrap(lease).unwrap_or_else(|shared| (*shared).clone());
        self.outcomes.push(Settlement::new(lease, outcome, now));
        true
    }

    /// Files a reported outcome for the next settle.
    pub(crate) fn defer(&mut self, settlement: Settlement) {
        self.outcomes.push(settlement);
    }

    /// The outcomes waiting, taken for a settle.
    pub(crate) fn take_outcomes(&mut self) -> Vec<Settlement> {
        std::mem::take(&mut self.outcomes)
    }

    /// Puts back outcomes a settle could not apply, ahead of those filed since.
    pub(crate) fn keep(&mut self, mut batch: Vec<Settlement>) {
        batch.append(&mut self.outcomes);
        self.outcomes = batch;
    }

    /// Runs not yet settled in the store: running, waiting to settle, and the `settling`
    /// runs of a settle in flight.
    pub(crate) fn unsettled(&self, settling: usize) -> usize {
        self.running() + self.waiting() + settling
    }

    /// How many outcomes wait.
    pub(crate) fn waiting(&self) -> usize {
        self.outcomes.len()
    }

    /// How many runs are out.
    pub(crate) fn running(&self) -> usize {
        self.running.len()
    }

    /// The runs out, in no order.
    pub(crate) fn runs(&self) -> impl Iterator<Item = &Arc<Leased>> {
        self.running.values()
    }

    /// Moves the lease deadline `id`'s run holds to `until` (never back), when it is still
    /// the run of `token`.
    pub(crate) fn extended(&mut self, id: &str, token: u64, until: Millis) {
        if let Some(held) = self.running.get_mut(id)
            && held.token == token
        {
            let held = Arc::make_mut(held);
            held.lease_until = held.lease_until.max(until);
        }
    }

    /// Forgets everything (a restarted actor: its runs' leases expire and they run again).
    pub(crate) fn clear(&mut self) {
        self.running.clear();
        self.outcomes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Job;

    fn lease(id: &str, token: u64) -> Leased {
        Leased {
            job: Job::stub("t", id),
            slot: 0,
            token,
            lease_until: 1_000,
            handed_record: Default::default(),
        }
    }

    /// Each row: what happens to the book, then whether run `a` of token 1 is still ours
    /// and how many runs and outcomes it holds.
    #[test]
    fn a_run_is_ours_while_the_book_holds_its_job_under_its_token() {
        type Step = fn(&mut RunBook);
        let rows: &[(&str, Step, bool, usize, usize)] = &[
            ("taken", |_| {}, true, 1, 0),
            (
                "released",
                |b| {
                    assert!(b.release("a", 1));
                },
                false,
                0,
                0,
            ),
            (
                "leased again to a newer run",
                |b| {
                    b.take(lease("a", 2));
                },
                false,
                1,
                0,
            ),
            (
                "a stale release changes nothing",
                |b| {
                    assert!(!b.release("a", 7));
                },
                true,
                1,
                0,
            ),
            (
                "ended by the slot",
                |b| {
                    let run = Arc::new(lease("a", 1));
                    assert!(b.end(run, RunOutcome::Release, 5));
                },
                false,
                0,
                1,
            ),
            (
                "a stale end files nothing",
                |b| {
                    let run = Arc::new(lease("a", 9));
                    assert!(!b.end(run, RunOutcome::Release, 5));
                },
                true,
                1,
                0,
            ),
            ("cleared", RunBook::clear, false, 0, 0),
        ];
        for (what, step, ours, running, waiting) in rows {
            let mut book = RunBook::default();
            let run = book.take(lease("a", 1));
            step(&mut book);
            assert_eq!(book.holds(&run), *ours, "{what}: ours");
            assert_eq!(book.running(), *running, "{what}: running");
            assert_eq!(book.waiting(), *waiting, "{what}: waiting");
        }
    }

    #[test]
    fn outcomes_a_settle_could_not_apply_go_back_ahead_of_those_filed_since() {
        let mut book = RunBook::default();
        for (id, token) in [("a", 1), ("b", 2)] {
            let run = book.take(lease(id, token));
            book.end(run, RunOutcome::Release, 0);
        }
        let batch = book.take_outcomes();
        assert_eq!(book.waiting(), 0);
        let run = book.take(lease("c", 3));
        book.end(run, RunOutcome::Release, 0);
        book.keep(batch);
        let order: Vec<String> = book
            .take_outcomes()
            .iter()
            .map(|s| s.run.job.id.clone())
            .collect();
        assert_eq!(order, ["a", "b", "c"]);
    }

    #[test]
    fn an_extension_moves_only_its_own_runs_deadline_and_never_back() {
        let mut book = RunBook::default();
        book.take(lease("a", 1));
        book.extended("a", 1, 5_000);
        book.extended("a", 1, 2_000);
        book.extended("a", 9, 9_000);
        let deadline = book.runs().next().map(|r| r.lease_until);
        assert_eq!(deadline, Some(5_000));
    }
}

//! The runs this process's claims handed to consumers, kept until their acks: an ack of one
//! (by id and token) then settles with the run's record as it was handed out and its
//! `job.done` event built here, `settle.lua`'s short form, as the runtime's own runs do,
//! where an ack alone has the script read the record and build the event. A consumer that
//! acks through another instance, or a run forgotten here, settles as before: what is kept
//! is a hint, checked by the script against the stored record, never trusted.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::model::Leased;
use crate::store::engine::Handout;
use crate::time::Millis;

/// Most runs kept per process: past it, those whose lease ended go, then all of them.
const MAX_KEPT: usize = 200_000;

/// One topic's runs claimed here and not yet settled, by slot and token.
type TopicRuns = HashMap<(u32, u64), Handout>;

/// Per topic, the runs claimed here and not yet settled.
#[derive(Default)]
pub(crate) struct Handouts {
    topics: Mutex<HashMap<String, TopicRuns>>,
}

impl Handouts {
    /// Keeps the runs a claim handed out (those with a handed record: the Redis store's).
    pub(crate) fn keep(&self, topic: &str, runs: &[Leased], now: Millis) {
        let mut kept = runs
            .iter()
            .filter(|r| !r.handed_record.text_for(r.token).is_empty())
            .map(|r| {
                let handout = Handout {
                    id: r.job.id.clone(),
                    record: r.handed_record.clone(),
                    job_type: r.job.job_type.clone(),
                    fire_at: r.job.fire_at,
                    attempt: r.job.attempts,
                    lease_until: r.lease_until,
                };
                ((r.slot, r.token), handout)
            });
        let Some(first) = kept.next() else { return };
        let mut topics = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        if !topics.contains_key(topic) {
            topics.insert(topic.to_string(), TopicRuns::new());
        }
        let held: usize = topics.values().map(TopicRuns::len).sum();
        if held + runs.len() > MAX_KEPT {
            for runs in topics.values_mut() {
                runs.retain(|_, h| h.lease_until > now);
            }
            if topics.values().map(TopicRuns::len).sum::<usize>() + runs.len() > MAX_KEPT {
                topics.values_mut().for_each(TopicRuns::clear);
            }
        }
        let runs = topics.get_mut(topic).expect("inserted above");
        runs.extend(std::iter::once(first).chain(kept));
    }

    /// Takes run `token` of job `id` in `slot` back out, if this process handed it out.
    pub(crate) fn take(&self, topic: &str, slot: u32, id: &str, token: u64) -> Option<Handout> {
        let mut topics = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        let runs = topics.get_mut(topic)?;
        match runs.remove(&(slot, token)) {
            Some(h) if h.id == id => Some(h),
            _ => None,
        }
    }

    /// Forgets a topic's runs (the topic was deleted).
    pub(crate) fn forget(&self, topic: &str) {
        self.topics
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(topic);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{HandedRecord, Job};

    fn run(id: &str, token: u64, lease_until: Millis) -> Leased {
        let job: Job = serde_json::from_value(serde_json::json!({
            "topic": "q", "id": id, "type": "pull", "payload": null, "state": "running",
            "fire_at": 5, "attempts": 1, "max_attempts": 3, "fires": 0,
        }))
        .unwrap();
        Leased {
            job,
            slot: 0,
            token,
            lease_until,
            handed_record: HandedRecord::new(token, Arc::from("{\"a\":1}")),
        }
    }

    #[test]
    fn a_run_is_taken_once_and_only_by_its_own_id() {
        let h = Handouts::default();
        h.keep("q", &[run("a", 1, 100), run("b", 2, 100)], 0);
        assert_eq!(h.take("q", 0, "x", 1), None, "another job's ack");
        assert_eq!(h.take("q", 0, "a", 1), None, "gone with the wrong ack");
        let b = h.take("q", 0, "b", 2).expect("kept");
        assert_eq!(
            (b.id.as_str(), b.record.text_for(2), b.attempt),
            ("b", "{\"a\":1}", 1)
        );
        assert_eq!(h.take("q", 0, "b", 2), None, "taken once");
    }

    #[test]
    fn past_the_bound_ended_leases_go_first_then_all() {
        let h = Handouts::default();
        let ended: Vec<Leased> = (0..10).map(|t| run("e", t, 50)).collect();
        h.keep("q", &ended, 0);
        let live: Vec<Leased> = (10..MAX_KEPT as u64 + 5)
            .map(|t| run("l", t, 500))
            .collect();
        h.keep("q", &live, 100);
        assert!(h.take("q", 0, "e", 3).is_none(), "an ended lease went");
        assert!(h.take("q", 0, "l", 10).is_some(), "a live one stayed");
        h.keep(
            "q",
            &(0..10)
                .map(|t| run("n", 1_000_000 + t, 500))
                .collect::<Vec<_>>(),
            100,
        );
        assert!(h.take("q", 0, "l", 11).is_none(), "all went at the bound");
        assert!(h.take("q", 0, "n", 1_000_000).is_some());
    }
}

//! `lua/settle.lua`: applies runs' outcomes with their events, one atomic step
//! (`SlotJobs::settle` for the runtime's runs, `SlotJobs::settle_claimed` for consumers').

use super::{Call, Invocation, Lua, Scripts};
use crate::error::{Error, Result};
use crate::events::Event;
use crate::model::{Finished, RunOutcome, Settlement};
use crate::store::engine::ClaimSettlement;
use crate::store::keys::SlotKeys;
use crate::time::Millis;
use crate::topic::TopicConfig;

/// A short-form run's event when the topic keeps no `job.done` (`TopicConfig::events`):
/// `lua/settle.lua` appends nothing for it.
const NO_EVENT: &str = "{}";

/// The runs a settle applies.
pub(in crate::store::redis) enum Runs<'a> {
    /// The runtime's runs, each with its handed record and its handler's events.
    Handed(&'a [Settlement]),
    /// Consumers' runs, named by id and token: the script reads the rest from the record.
    Claimed(&'a [ClaimSettlement<'a>]),
}

pub(in crate::store::redis) struct Settle<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) slot: u32,
    pub(in crate::store::redis) now: Millis,
    /// The slot's share of the topic's event stream cap.
    pub(in crate::store::redis) stream_cap: usize,
    pub(in crate::store::redis) runs: Runs<'a>,
}

/// An outcome's word, time and error text, as `settle.lua` takes them.
fn outcome_args(outcome: &RunOutcome, now: Millis) -> (&'static str, Millis, &str) {
    let (at, error) = match outcome {
        RunOutcome::Retry { error, at } => (*at, error.as_str()),
        RunOutcome::Repeat { at, error } => (*at, error.as_deref().unwrap_or("")),
        RunOutcome::Dead { error } => (now, error.as_str()),
        RunOutcome::End { error } => (now, error.as_deref().unwrap_or("")),
        RunOutcome::Done | RunOutcome::Release => (now, ""),
        RunOutcome::Defer { at } => (*at, ""),
    };
    (outcome.as_str(), at, error)
}

impl Call for Settle<'_> {
    type Reply = Vec<String>;
    type Out = Vec<Finished>;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.settle
    }

    /// A consumer is told its ack's outcome, so that write is confirmed like any other; the
    /// runtime's settles are not answered to anyone (a lost one fires the job again).
    fn answered(&self) -> bool {
        matches!(self.runs, Runs::Claimed(_))
    }

    fn build(&self, call: &mut Invocation) {
        let (t, now) = (self.topic, self.now);
        call.key(SlotKeys::new(&t.name, self.slot).all())
            .arg(now)
            .arg(t.max_attempts)
            .arg(self.stream_cap)
            .arg(&t.name)
            .arg(&t.default_type)
            .arg(t.events.as_str());
        // A run that ends done with no events of its handler's, in the short form: its event
        // whole, or NO_EVENT when the topic keeps no `job.done`.
        let keeps_done = t.events.keeps(crate::events::kind::DONE);
        match self.runs {
            Runs::Handed(batch) => {
                for s in batch {
                    call.arg(&s.run.job.id)
                        .arg(s.run.token)
                        .arg(s.run.handed_record.text_for(s.run.token));
                    let emitted: Vec<_> = s
                        .emitted
                        .iter()
                        .filter(|e| t.events.keeps(&e.event))
                        .collect();
                    if matches!(s.outcome, RunOutcome::Done) && emitted.is_empty() {
                        // The short form: the event whole, which settle.lua writes as it
                        // is when the run settles as sent.
                        if !keeps_done {
                            call.arg(NO_EVENT);
                            continue;
                        }
                        let mut head = Event::head_json(s);
                        head.push_str(crate::events::DONE_TAIL);
                        call.arg(head);
                        continue;
                    }
                    let (kind, at, error) = outcome_args(&s.outcome, now);
                    call.arg(kind)
                        .arg(at)
                        .arg(error)
                        .arg(Event::head_json(s))
                        .arg(emitted.len());
                    for e in emitted {
                        let event = Event::of_run(s, &e.event, e.data.clone());
                        call.arg(serde_json::to_string(&event).expect("an event serialises"));
                    }
                }
            }
            Runs::Claimed(batch) => {
                for c in batch {
                    if let (Some(run), RunOutcome::Done) = (&c.handed, &c.outcome) {
                        // A run this process handed out: the short form, as the runtime's.
                        call.arg(c.id)
                            .arg(c.token)
                            .arg(run.record.text_for(c.token));
                        if keeps_done {
                            call.arg(run.done_event(&t.name, now));
                        } else {
                            call.arg(NO_EVENT);
                        }
                        continue;
                    }
                    let (kind, at, error) = outcome_args(&c.outcome, now);
                    // An empty head: settle.lua builds it from the run's record.
                    call.arg(c.id)
                        .arg(c.token)
                        .arg("")
                        .arg(kind)
                        .arg(at)
                        .arg(error)
                        .arg("")
                        .arg(0);
                }
            }
        }
    }

    fn read(self, reply: Vec<String>) -> Result<Vec<Finished>> {
        reply
            .iter()
            .map(|r| {
                r.parse()
                    .map_err(|_| Error::Corrupt(format!("settle.lua answered {r:?}")))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::NO_EVENT;
    use crate::events::DONE_TAIL;
    use crate::topic::RunEvents;

    /// A short run's event is written as sent only when it settles as `done`, and the script
    /// cuts `DONE_TAIL` off it for a head when it does not: the script's tail is this one.
    #[test]
    fn the_script_cuts_the_tail_that_the_runtime_appends() {
        let script = include_str!("../../../../lua/settle.lua");
        assert!(
            script.contains(&format!("local DONE_TAIL = '{DONE_TAIL}'")),
            "lua/settle.lua's DONE_TAIL is not {DONE_TAIL:?}"
        );
        assert!(
            script.contains(&format!("local NO_EVENT = '{NO_EVENT}'")),
            "lua/settle.lua's NO_EVENT is not {NO_EVENT:?}"
        );
    }

    /// The script's `keeps` reads the words `TopicConfig::events` sends.
    #[test]
    fn the_script_knows_every_word_of_a_topics_events() {
        let script = include_str!("../../../../lua/settle.lua");
        for kept in [RunEvents::All, RunEvents::Changes] {
            assert!(
                script.contains(&format!("kept == '{}'", kept.as_str())),
                "lua/settle.lua's keeps does not read {kept:?}"
            );
        }
        assert_eq!(RunEvents::None.as_str(), "none");
        assert!(!RunEvents::None.keeps("job.retry"));
    }
}

//! The slot state machine, written once: for each state a job can be in and each operation of
//! the store, the state it goes to, the record fields that change, and the word the operation
//! answers. Both engines implement it (`lua/NAME.lua` on Redis, the method of the same name
//! in `memory/slot.rs`); the conformance suite (`tests/store.rs`) plays every row of
//! [`TRANSITIONS`] on both, and the differential test (`tests/differential.rs`) checks that
//! random mixes of them agree. The table in `docs/architecture.md` is [`markdown`]'s, which a
//! test keeps in step.
//!
//! Record fields are named as in `record.rs` (stored as one letter each): `attempts`,
//! `token` (the run's), `run_fire_at`, `pending_reset` (a reset that arrived during the run),
//! `last_error`, `fires` (since the last reset), `schedule` (a recurring job's).

use std::fmt::Write as _;

/// Where a job is before an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// No such job.
    None,
    /// Scheduled, not yet due.
    Scheduled,
    /// Scheduled and due.
    Due,
    /// Running under a live lease.
    Running,
    /// Running, and reset during the run (`pending_reset` set).
    RunningReset,
    /// Running, a recurring job (its record holds a `schedule`).
    RunningRecurring,
    /// Running, its lease run out.
    RunningExpired,
    /// In the dead letters.
    Dead,
}

impl From {
    fn word(self) -> &'static str {
        match self {
            From::None => "none",
            From::Scheduled => "scheduled",
            From::Due => "scheduled, due",
            From::Running => "running",
            From::RunningReset => "running, reset during the run",
            From::RunningRecurring => "running, recurring",
            From::RunningExpired => "running, lease ran out",
            From::Dead => "dead",
        }
    }
}

/// An operation of the store on one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `schedule` with `ScheduleMode::Upsert`.
    Upsert,
    /// `schedule` with `ScheduleMode::CreateOnly`.
    Create,
    /// `schedule` with `ScheduleMode::ResetOnly` (and `reset_many` alike).
    Reset,
    /// `reset_many` with a `create` spec.
    ResetOrCreate,
    /// `pump` (and a consumer's `claim`).
    Pump,
    /// `settle` with `RunOutcome::Done`.
    Done,
    /// `settle` with `RunOutcome::Retry`, attempts left.
    Retry,
    /// `settle` with `RunOutcome::Repeat`.
    Repeat,
    /// `settle` with `RunOutcome::Dead`.
    Bury,
    /// `settle` with `RunOutcome::Done` or `RunOutcome::Dead` (or a retry out of attempts).
    Ends,
    /// `settle` of a recurring job's last fire: done, dead or retry out of attempts, with
    /// its `repeat.limit` reached or its next instant past `repeat.until`.
    Last,
    /// `settle` with `RunOutcome::Release` (shutdown), or `RunOutcome::Defer` (a run past
    /// its flow key's share of the slot's waiting room, due again later).
    Release,
    /// `settle` of any outcome with a token that is not the run's.
    StaleSettle,
    /// `touch` (`extend`) with the run's token.
    Touch,
    /// `cancel`.
    Cancel,
    /// `dead_requeue` (`requeue.lua`).
    Requeue,
    /// `dead_delete`.
    DeadDelete,
}

impl Op {
    fn word(self) -> &'static str {
        match self {
            Op::Upsert => "`schedule` upsert",
            Op::Create => "`schedule` create",
            Op::Reset => "`schedule` reset, `reset_many`",
            Op::ResetOrCreate => "`reset_many` with `create`",
            Op::Pump => "`pump`, `claim`",
            Op::Done => "`settle` done",
            Op::Retry => "`settle` retry, attempts left",
            Op::Repeat => "`settle` repeat",
            Op::Bury => "`settle` dead",
            Op::Ends => "`settle` done, dead or retry out of attempts",
            Op::Last => "`settle` of a series' last fire (`limit` reached, or `until` passed)",
            Op::Release => "`settle` release (shutdown, or deferred: its flow key's share full)",
            Op::StaleSettle => "`settle` with a token that is not the run's",
            Op::Touch => "`touch` with the run's token",
            Op::Cancel => "`cancel`",
            Op::Requeue => "`dead_requeue`",
            Op::DeadDelete => "`dead_delete`",
        }
    }
}

/// Where the job is after the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum To {
    /// Gone.
    Gone,
    /// Scheduled (at the time the `next` column says).
    Scheduled,
    /// Running.
    Running,
    /// In the dead letters.
    Dead,
    /// Where it was.
    Unchanged,
}

/// One row of the state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The job's state before.
    pub from: From,
    /// The operation.
    pub op: Op,
    /// Its state after.
    pub to: To,
    /// What the state after means, in words (its time, its lease).
    pub next: &'static str,
    /// The record fields that change.
    pub record: &'static str,
    /// The operation's answer: a `ScheduleOutcome` or `Finished` word, `expired` (a lease
    /// taken back) or else `handed` for a pump, the state it was in for a cancel, `true` or `false`.
    pub answer: &'static str,
}

const fn row(
    from: From,
    op: Op,
    to: To,
    next: &'static str,
    record: &'static str,
    answer: &'static str,
) -> Transition {
    Transition {
        from,
        op,
        to,
        next,
        record,
        answer,
    }
}

/// Every transition, in the order the architecture document lists them.
pub const TRANSITIONS: &[Transition] = &[
    row(
        From::None,
        Op::Upsert,
        To::Scheduled,
        "at its fire time",
        "the new job's",
        "created",
    ),
    row(
        From::None,
        Op::Create,
        To::Scheduled,
        "at its fire time",
        "the new job's",
        "created",
    ),
    row(
        From::Scheduled,
        Op::Upsert,
        To::Scheduled,
        "at the new time",
        "replaced",
        "replaced",
    ),
    row(
        From::Running,
        Op::Upsert,
        To::Running,
        "then scheduled at the new time after the run",
        "replaced; the run's fields kept, `pending_reset` set",
        "replaced",
    ),
    row(
        From::Dead,
        Op::Upsert,
        To::Scheduled,
        "at the new time",
        "replaced",
        "replaced",
    ),
    row(
        From::Scheduled,
        Op::Create,
        To::Unchanged,
        "",
        "unchanged",
        "exists",
    ),
    row(
        From::Running,
        Op::Create,
        To::Unchanged,
        "",
        "unchanged",
        "exists",
    ),
    row(
        From::Dead,
        Op::Create,
        To::Unchanged,
        "",
        "unchanged",
        "exists",
    ),
    row(
        From::Scheduled,
        Op::Reset,
        To::Scheduled,
        "at the new time (capped by `max_fire_at`)",
        "`fires` dropped (the job is re-armed)",
        "reset",
    ),
    row(
        From::Running,
        Op::Reset,
        To::Running,
        "then scheduled at the reset's time after the run",
        "`pending_reset` set",
        "reset",
    ),
    row(From::None, Op::Reset, To::Unchanged, "", "", "missing"),
    row(From::Dead, Op::Reset, To::Unchanged, "", "", "missing"),
    row(
        From::None,
        Op::ResetOrCreate,
        To::Scheduled,
        "at the reset's time",
        "the create spec's",
        "created",
    ),
    row(
        From::Due,
        Op::Pump,
        To::Running,
        "lease until now + the visibility timeout",
        "`attempts` + 1, a new `token`, `run_fire_at`",
        "handed",
    ),
    row(
        From::RunningExpired,
        Op::Pump,
        To::Running,
        "again: taken back (scheduled at `pending_reset` if a reset arrived, else now; dead \
         when attempts are used up), then handed out in the same pump once due",
        "`last_error`: the lease expired; then as a pump of a due job",
        "expired",
    ),
    row(From::Running, Op::Done, To::Gone, "", "gone", "done"),
    row(
        From::Running,
        Op::Retry,
        To::Scheduled,
        "at the retry's time",
        "`last_error`",
        "retrying",
    ),
    row(
        From::Running,
        Op::Repeat,
        To::Scheduled,
        "at the repeat's time",
        "`attempts` cleared, `fires` + 1",
        "repeating",
    ),
    row(
        From::Running,
        Op::Bury,
        To::Dead,
        "",
        "`last_error`",
        "dead",
    ),
    row(
        From::Running,
        Op::Release,
        To::Scheduled,
        "now (a deferral: its later time)",
        "the attempt given back",
        "released",
    ),
    row(
        From::RunningReset,
        Op::Done,
        To::Scheduled,
        "at `pending_reset` (whatever the outcome)",
        "`attempts`, `last_error` cleared",
        "rescheduled",
    ),
    row(
        From::RunningRecurring,
        Op::Ends,
        To::Scheduled,
        "at the schedule's next instant after the run's fire time and now (the engine \
         answers `recur` and changes nothing; the store settles the run again as a repeat)",
        "`attempts` cleared, `fires` + 1, `last_error` the failure's (none when done)",
        "repeating",
    ),
    row(
        From::RunningRecurring,
        Op::Last,
        To::Gone,
        "the series ends (dead instead when the fire failed for good; the engine answers \
         `recur`, and the store settles the run again as `RunOutcome::End`)",
        "gone; dead: `last_error` the failure's",
        "done",
    ),
    row(
        From::Running,
        Op::StaleSettle,
        To::Unchanged,
        "",
        "unchanged",
        "stale",
    ),
    row(
        From::Running,
        Op::Touch,
        To::Running,
        "a new lease",
        "",
        "true",
    ),
    row(
        From::Scheduled,
        Op::Cancel,
        To::Gone,
        "",
        "gone",
        "scheduled",
    ),
    row(From::Running, Op::Cancel, To::Gone, "", "gone", "running"),
    row(From::Dead, Op::Cancel, To::Gone, "", "gone", "dead"),
    row(From::None, Op::Cancel, To::Unchanged, "", "", "none"),
    row(
        From::Dead,
        Op::Requeue,
        To::Scheduled,
        "now",
        "`attempts` cleared",
        "true",
    ),
    row(From::Dead, Op::DeadDelete, To::Gone, "", "gone", "true"),
];

/// The table as `docs/architecture.md` shows it.
pub fn markdown() -> String {
    let mut out = String::from(
        "| state | operation | next state | record | answer |\n|---|---|---|---|---|\n",
    );
    for t in TRANSITIONS {
        let to = match t.to {
            To::Gone => "gone",
            To::Scheduled => "scheduled",
            To::Running => "running",
            To::Dead => "dead",
            To::Unchanged => "unchanged",
        };
        let next = if t.next.is_empty() {
            to.to_string()
        } else {
            format!("{to}, {}", t.next)
        };
        let _ = writeln!(
            out,
            "| {} | {} | {next} | {} | `{}` |",
            t.from.word(),
            t.op.word(),
            t.record,
            t.answer
        );
    }
    out
}

//! Recurring schedules: a job that fires on a cron schedule in a time zone, or every so many
//! milliseconds, until it is cancelled.
//!
//! The store keeps the schedule in the job's record (`s`). When a run of a recurring job ends
//! (done, or out of attempts), the store answers `Finished::Recur` and changes nothing; the
//! store front then reads the schedule, computes the next instant here, and settles the run
//! as a repeat at that instant: the fire's outcome and the next instant are one atomic step,
//! so a crash neither drops the series nor fires one instant twice (beyond at-least-once: a
//! run whose outcome was never stored fires again).
//!
//! Cron patterns are parsed and evaluated by `croner` (OCPS: five fields, or six with
//! seconds first; names like `MON-FRI`), in an IANA time zone from `chrono-tz`. Across a
//! daylight-saving change no instant is skipped or doubled: a wall-clock time that falls in
//! the spring-forward gap fires at the first instant after the gap, and one that occurs twice
//! at fall-back fires once, at its first occurrence (patterns with a wildcard or a step in
//! the hour, like `*/15 * * * *`, keep firing in real time through both).
//!
//! Instants missed while nothing ran (every instance down) fire once, late, on recovery; the
//! series then continues from the next instant after that fire.

use std::str::FromStr;

use chrono::TimeZone;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::time::Millis;

/// How a recurring job repeats: exactly one of `cron` (with an optional `tz`) and `every_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum Recurrence {
    /// On a cron schedule, in a time zone.
    Cron {
        /// Five fields (minute hour day-of-month month day-of-week), or six with seconds
        /// first: `0 9 * * MON-FRI`.
        cron: String,
        /// An IANA time zone (`Europe/Berlin`); UTC when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tz: Option<String>,
    },
    /// Every `every_ms` milliseconds, counted from the fire time of the run that ended.
    Every {
        /// The period.
        every_ms: u64,
    },
}

/// 2000-01-01T00:00:00Z, where `check` looks for a first instant.
const EPOCH_2000: Millis = 946_684_800_000;

/// The shortest period `every_ms` takes.
pub(crate) const MIN_EVERY_MS: u64 = 1;

impl Recurrence {
    /// On the cron schedule `pattern` in time zone `tz` (UTC when `None`), checked.
    pub fn cron(pattern: impl Into<String>, tz: Option<&str>) -> Result<Self> {
        let r = Recurrence::Cron {
            cron: pattern.into(),
            tz: tz.map(str::to_string),
        };
        r.check()?;
        Ok(r)
    }

    /// Every `period`, checked.
    pub fn every(period: std::time::Duration) -> Result<Self> {
        let r = Recurrence::Every {
            every_ms: u64::try_from(period.as_millis()).unwrap_or(u64::MAX),
        };
        r.check()?;
        Ok(r)
    }

    /// Refuses a schedule that does not parse, names an unknown zone, or never fires
    /// (`Error::Unprocessable`: a string its schema cannot tell from a good one), or a period
    /// out of bounds (`Error::Invalid`); the error names the field (`repeat.cron`,
    /// `repeat.tz`, `repeat.every_ms`).
    pub fn check(&self) -> Result<()> {
        match self {
            Recurrence::Cron { cron, tz } => {
                compile(cron, tz.as_deref())?;
                // Without a year field, a pattern that matches once matches every year it
                // names a day of: one search from 2000 tells whether it ever fires.
                if self.next_after(EPOCH_2000).is_none() {
                    return Err(Error::unprocessable(
                        "repeat.cron",
                        format!("{cron:?} names no instant that exists (like February 30)"),
                    ));
                }
                Ok(())
            }
            Recurrence::Every { every_ms } => {
                let max = crate::num::unsigned(crate::time::MAX_DELAY_MS);
                if !(MIN_EVERY_MS..=max).contains(every_ms) {
                    return Err(Error::invalid(
                        "repeat.every_ms",
                        format!("must be {MIN_EVERY_MS} to {max}, got {every_ms}"),
                    ));
                }
                Ok(())
            }
        }
    }

    /// The first instant of the schedule strictly after `after`.
    pub fn next_after(&self, after: Millis) -> Option<Millis> {
        match self {
            Recurrence::Cron { cron, tz } => {
                let (pattern, zone) = compile(cron, tz.as_deref()).ok()?;
                let start = zone.timestamp_millis_opt(after).single()?;
                let next = pattern.find_next_occurrence(&start, false).ok()?;
                Some(next.timestamp_millis())
            }
            Recurrence::Every { every_ms } => after.checked_add(i64::try_from(*every_ms).ok()?),
        }
        .filter(|at| *at <= crate::time::MAX_MILLIS)
    }

    /// The instant a run fired at `fire_at` and ended at `now` fires again: the schedule's
    /// first instant after both (so instants missed while nothing ran fire once, late, and
    /// are not replayed). For `every_ms` the period is counted from `fire_at`. `None` when
    /// the schedule has no further instant the store can hold.
    pub fn next_fire(&self, fire_at: Millis, now: Millis) -> Option<Millis> {
        match self {
            Recurrence::Cron { .. } => self.next_after(fire_at.max(now)),
            Recurrence::Every { every_ms } => {
                let every = i64::try_from(*every_ms).ok()?;
                // The first fire_at + k * every (k >= 1) after now.
                let k = if now < fire_at {
                    1
                } else {
                    (now - fire_at) / every + 1
                };
                fire_at
                    .checked_add(k.checked_mul(every)?)
                    .filter(|at| *at <= crate::time::MAX_MILLIS)
            }
        }
    }
}

/// The pattern, and its zone.
fn compile(cron: &str, tz: Option<&str>) -> Result<(Cron, chrono_tz::Tz)> {
    let len = cron.chars().count();
    if len > MAX_PATTERN_LEN {
        return Err(Error::invalid(
            "repeat.cron",
            format!("is {len} characters, over the limit of {MAX_PATTERN_LEN}"),
        ));
    }
    let pattern = CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(cron)
        .map_err(|e| Error::unprocessable("repeat.cron", format!("{cron:?}: {e}")))?;
    let zone = match tz {
        None => chrono_tz::UTC,
        Some(name) => chrono_tz::Tz::from_str(name).map_err(|_| {
            Error::unprocessable(
                "repeat.tz",
                format!("{name:?} is not an IANA time zone (like Europe/Berlin)"),
            )
        })?,
    };
    Ok((pattern, zone))
}

/// Longest cron pattern accepted, in characters.
pub(crate) const MAX_PATTERN_LEN: usize = 128;

/// The API description's schemas of the fields these checks bound (see `http/schema.rs`).
pub(crate) mod schemas {
    use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};

    use crate::wire::schema::integer;

    /// `repeat.cron`: a pattern of up to `MAX_PATTERN_LEN` characters.
    pub(crate) fn cron() -> Object {
        ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
            .min_length(Some(1))
            .max_length(Some(super::MAX_PATTERN_LEN))
            .build()
    }

    /// `repeat.every_ms`: `MIN_EVERY_MS` up to the longest delay.
    pub(crate) fn every_ms() -> Object {
        integer(
            crate::num::signed(super::MIN_EVERY_MS),
            crate::time::MAX_DELAY_MS,
            true,
        )
        .build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{NaiveDate, Utc};

    fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> Millis {
        Utc.from_utc_datetime(
            &NaiveDate::from_ymd_opt(y, m, d)
                .unwrap()
                .and_hms_opt(h, min, 0)
                .unwrap(),
        )
        .timestamp_millis()
    }

    /// The series of `r` from `from`, each fire on time.
    fn series(r: &Recurrence, from: Millis, n: usize) -> Vec<Millis> {
        let mut out = Vec::new();
        let mut at = r.next_after(from).unwrap();
        for _ in 0..n {
            out.push(at);
            at = r.next_fire(at, at).unwrap();
        }
        out
    }

    #[test]
    fn a_weekday_schedule_in_berlin_keeps_its_wall_clock_across_both_dst_changes() {
        let r = Recurrence::cron("0 9 * * MON-FRI", Some("Europe/Berlin")).unwrap();
        // Friday 2026-03-27 09:00 CET is 08:00 UTC; Monday 2026-03-30 (after the change on
        // Sunday the 29th) 09:00 CEST is 07:00 UTC.
        let got = series(&r, utc(2026, 3, 27, 0, 0), 2);
        assert_eq!(got, vec![utc(2026, 3, 27, 8, 0), utc(2026, 3, 30, 7, 0)]);
        // Autumn: Friday 2026-10-23 07:00 UTC (CEST), Monday the 26th 08:00 UTC (CET).
        let got = series(&r, utc(2026, 10, 23, 0, 0), 2);
        assert_eq!(got, vec![utc(2026, 10, 23, 7, 0), utc(2026, 10, 26, 8, 0)]);
    }

    #[test]
    fn a_time_in_the_spring_gap_fires_once_after_the_gap_and_none_is_skipped() {
        // 02:30 does not exist in Berlin on 2026-03-29 (02:00 CET jumps to 03:00 CEST).
        let r = Recurrence::cron("30 2 * * *", Some("Europe/Berlin")).unwrap();
        let got = series(&r, utc(2026, 3, 27, 12, 0), 3);
        assert_eq!(
            got,
            vec![
                utc(2026, 3, 28, 1, 30), // 02:30 CET
                utc(2026, 3, 29, 1, 0),  // 03:00 CEST, the first instant after the gap
                utc(2026, 3, 30, 0, 30), // 02:30 CEST
            ]
        );
    }

    #[test]
    fn a_time_that_occurs_twice_at_fall_back_fires_once() {
        // 02:30 happens twice in Berlin on 2026-10-25 (03:00 CEST falls back to 02:00 CET).
        let r = Recurrence::cron("30 2 * * *", Some("Europe/Berlin")).unwrap();
        let got = series(&r, utc(2026, 10, 23, 12, 0), 3);
        assert_eq!(
            got,
            vec![
                utc(2026, 10, 24, 0, 30), // 02:30 CEST
                utc(2026, 10, 25, 0, 30), // 02:30 CEST, its first occurrence only
                utc(2026, 10, 26, 1, 30), // 02:30 CET
            ]
        );
    }

    #[test]
    fn every_ms_counts_from_the_fire_and_a_late_fire_is_not_replayed() {
        let r = Recurrence::every(std::time::Duration::from_secs(60)).unwrap();
        assert_eq!(r.next_fire(1_000, 1_005), Some(61_000));
        // Down for ten periods: the late fire at 601,500 is followed by the next instant of
        // the same grid, not by the nine missed ones.
        assert_eq!(r.next_fire(1_000, 601_500), Some(661_000));
    }

    #[test]
    fn a_late_cron_fire_continues_on_the_schedule() {
        let r = Recurrence::cron("0 * * * *", None).unwrap();
        // Due at 10:00, run at 13:20 after an outage: next at 14:00, not 11:00.
        assert_eq!(
            r.next_fire(utc(2026, 1, 1, 10, 0), utc(2026, 1, 1, 13, 20)),
            Some(utc(2026, 1, 1, 14, 0))
        );
    }

    #[test]
    fn bad_schedules_name_their_field() {
        let field = |r: Result<Recurrence>| match r {
            Err(Error::Invalid { field, .. } | Error::Unprocessable { field, .. }) => field,
            other => panic!("expected an invalid field, got {other:?}"),
        };
        assert_eq!(field(Recurrence::cron("61 * * * *", None)), "repeat.cron");
        assert_eq!(field(Recurrence::cron("not cron", None)), "repeat.cron");
        assert_eq!(field(Recurrence::cron("0 0 30 2 *", None)), "repeat.cron");
        assert_eq!(
            field(Recurrence::cron("0 9 * * *", Some("Mars/Olympus"))),
            "repeat.tz"
        );
        assert_eq!(
            field(Recurrence::every(std::time::Duration::ZERO)),
            "repeat.every_ms"
        );
    }
}

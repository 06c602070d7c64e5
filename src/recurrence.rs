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
        /// Where the series ends, and how its instants are spread (boxed: a record holds
        /// its schedule, and most series have no bounds).
        #[serde(flatten)]
        #[schema(inline)]
        series: Box<Series>,
    },
    /// Every `every_ms` milliseconds, counted from the fire time of the run that ended.
    Every {
        /// The period.
        every_ms: u64,
        /// Where the series ends.
        #[serde(flatten)]
        #[schema(inline)]
        series: Box<Series>,
    },
}

/// Where a series ends, and how its instants are spread: each optional, stored with the
/// schedule (a series without them stores nothing more).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Series {
    /// Fires in all, counted since the job was written or last reset: the series ends with
    /// its `limit`th fire (the job is then gone, or dead if that fire failed for good).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// No fire after this instant (ms since the epoch): the series ends with the last fire
    /// whose next instant would come after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Millis>,
    /// Each instant is put off by a random delay of 0 to this many ms, never brought
    /// forward (cron only: a fleet's identical instants spread over the window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<u64>,
    /// A fire whose latest missed instant is more than this many ms old (an outage, a paused
    /// topic) is skipped: the job does not run and waits for the schedule's next instant.
    /// Within it, a late fire runs once and the series continues (the rule without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catchup_window_ms: Option<u64>,
}

/// Most instants `skips` steps through to find the latest missed one of a cron schedule;
/// past it the fire runs (a fire is never skipped for want of counting).
const MAX_CATCHUP_STEPS: usize = 10_000;

/// The widest `jitter_ms`: an hour.
pub(crate) const MAX_JITTER_MS: u64 = 3_600_000;

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
            series: Box::default(),
        };
        r.check()?;
        Ok(r)
    }

    /// Every `period`, checked.
    pub fn every(period: std::time::Duration) -> Result<Self> {
        let r = Recurrence::Every {
            every_ms: u64::try_from(period.as_millis()).unwrap_or(u64::MAX),
            series: Box::default(),
        };
        r.check()?;
        Ok(r)
    }

    /// Refuses a schedule that does not parse, names an unknown zone, or never fires
    /// (`Error::Unprocessable`: a string its schema cannot tell from a good one), or a period
    /// out of bounds (`Error::Invalid`); the error names the field (`repeat.cron`,
    /// `repeat.tz`, `repeat.every_ms`).
    pub fn check(&self) -> Result<()> {
        self.check_series()?;
        match self {
            Recurrence::Cron { cron, tz, .. } => {
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
            Recurrence::Every { every_ms, .. } => {
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

    /// Where the series ends and how its instants spread.
    pub fn series(&self) -> &Series {
        match self {
            Recurrence::Cron { series, .. } | Recurrence::Every { series, .. } => series,
        }
    }

    /// The same schedule, ending and spread as `series` says; checked (the error names the
    /// field: `repeat.limit`, `repeat.until`, `repeat.jitter_ms`).
    pub fn with_series(mut self, series: Series) -> Result<Self> {
        match &mut self {
            Recurrence::Cron { series: s, .. } | Recurrence::Every { series: s, .. } => {
                **s = series;
            }
        }
        self.check_series()?;
        Ok(self)
    }

    fn check_series(&self) -> Result<()> {
        let s = self.series();
        if s.limit == Some(0) {
            return Err(Error::invalid("repeat.limit", "must be at least 1, got 0"));
        }
        if let Some(w) = s.catchup_window_ms
            && w > crate::num::unsigned(crate::time::MAX_DELAY_MS)
        {
            return Err(Error::invalid(
                "repeat.catchup_window_ms",
                format!("must be 0 to {}, got {w}", crate::time::MAX_DELAY_MS),
            ));
        }
        if let Some(until) = s.until
            && !(0..=crate::time::MAX_MILLIS).contains(&until)
        {
            return Err(Error::invalid(
                "repeat.until",
                format!(
                    "must be an instant from 0 to {}, got {until}",
                    crate::time::MAX_MILLIS
                ),
            ));
        }
        match (self, s.jitter_ms) {
            (_, None) => Ok(()),
            (Recurrence::Every { .. }, Some(_)) => Err(Error::unprocessable(
                "repeat.jitter_ms",
                "goes with cron: an every_ms series is spread by its own first fire",
            )),
            (Recurrence::Cron { .. }, Some(j)) if j > MAX_JITTER_MS => Err(Error::invalid(
                "repeat.jitter_ms",
                format!("must be 0 to {MAX_JITTER_MS}, got {j}"),
            )),
            (Recurrence::Cron { .. }, Some(_)) => Ok(()),
        }
    }

    /// Whether a fire due at `fire_at` and firing at `fired_at` is skipped: its schedule's
    /// latest instant by `fired_at` (`fire_at` or one missed after it) is more than
    /// `catchup_window_ms` old.
    pub fn skips(&self, fire_at: Millis, fired_at: Millis) -> bool {
        let Some(window) = self.series().catchup_window_ms else {
            return false;
        };
        let window = crate::num::signed(window);
        if fired_at.saturating_sub(fire_at) <= window {
            return false;
        }
        let latest = match self {
            Recurrence::Every { every_ms, .. } => {
                let every = crate::num::signed(*every_ms).max(1);
                fire_at + (fired_at - fire_at) / every * every
            }
            Recurrence::Cron { .. } => {
                let mut latest = fire_at;
                for _ in 0..MAX_CATCHUP_STEPS {
                    match self.next_after(latest) {
                        Some(at) if at <= fired_at => latest = at,
                        _ => return fired_at - latest > window,
                    }
                }
                return false;
            }
        };
        fired_at - latest > window
    }

    /// `at` put off by the series' jitter: `draw` (a random number) reduced to 0 to
    /// `jitter_ms`. Never earlier than `at`.
    pub fn jittered(&self, at: Millis, draw: u64) -> Millis {
        match self.series().jitter_ms {
            Some(j) if j > 0 => {
                let delay = crate::num::signed(draw % (j + 1));
                at.saturating_add(delay)
                    .min(crate::time::MAX_MILLIS)
                    .max(at)
            }
            _ => at,
        }
    }

    /// Whether the series ends with its `fired`th fire, whose next instant would be `next`:
    /// its limit reached, or `next` past `until`.
    pub fn ends(&self, fired: u32, next: Millis) -> bool {
        let s = self.series();
        s.limit.is_some_and(|limit| fired >= limit) || s.until.is_some_and(|until| next > until)
    }

    /// After the series' `fired`th fire (counted since the job was written or reset), run at
    /// `fire_at` and ended at `now`: its next fire (`next_fire`, put off by the jitter drawn
    /// from `draw`; the latest instant the store holds when the schedule has none), or
    /// `None` when the series ends there (its limit reached, or its next instant past
    /// `until`).
    pub fn after_fire(
        &self,
        fired: u32,
        fire_at: Millis,
        now: Millis,
        draw: u64,
    ) -> Option<Millis> {
        let next = self
            .next_fire(fire_at, now)
            .unwrap_or(crate::time::MAX_MILLIS);
        if self.ends(fired, next) {
            return None;
        }
        Some(self.jittered(next, draw))
    }

    /// The first instant of the schedule strictly after `after`.
    pub fn next_after(&self, after: Millis) -> Option<Millis> {
        match self {
            Recurrence::Cron { cron, tz, .. } => {
                let (pattern, zone) = compile(cron, tz.as_deref()).ok()?;
                let start = zone.timestamp_millis_opt(after).single()?;
                let next = pattern.find_next_occurrence(&start, false).ok()?;
                Some(next.timestamp_millis())
            }
            Recurrence::Every { every_ms, .. } => after.checked_add(i64::try_from(*every_ms).ok()?),
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
            Recurrence::Every { every_ms, .. } => {
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
        .map_err(|e| {
            let why = field_fault(cron).unwrap_or_else(|| e.to_string());
            Error::unprocessable("repeat.cron", format!("{cron:?}: {why}"))
        })?;
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

/// Which field of a cron pattern is wrong, said as a person would: its name, the text given
/// and the range it takes (`the minute field "61" is outside 0-59`). `None` when no field
/// is plainly wrong (the parser's own words are given then).
fn field_fault(cron: &str) -> Option<String> {
    const MONTHS: &[&str] = &[
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ];
    const DAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
    let fields: Vec<&str> = cron.split_whitespace().collect();
    let names: &[(&str, u32, u32, &[&str])] = match fields.len() {
        5 => &[
            ("minute", 0, 59, &[]),
            ("hour", 0, 23, &[]),
            ("day-of-month", 1, 31, &[]),
            ("month", 1, 12, MONTHS),
            ("day-of-week", 0, 7, DAYS),
        ],
        6 => &[
            ("second", 0, 59, &[]),
            ("minute", 0, 59, &[]),
            ("hour", 0, 23, &[]),
            ("day-of-month", 1, 31, &[]),
            ("month", 1, 12, MONTHS),
            ("day-of-week", 0, 7, DAYS),
        ],
        n => {
            return Some(format!(
                "{n} fields; a pattern has 5 (minute hour day-of-month month day-of-week) or 6 \
                 (a second first)"
            ));
        }
    };
    for (text, (name, lo, hi, words)) in fields.iter().zip(names) {
        let value_ok = |v: &str| {
            v.parse::<u32>().is_ok_and(|n| (*lo..=*hi).contains(&n))
                || words.iter().any(|w| w.eq_ignore_ascii_case(v))
        };
        let part_ok = |part: &str| {
            let (range, step) = part.split_once('/').unwrap_or((part, "1"));
            let step_ok = step.parse::<u32>().is_ok_and(|n| n >= 1);
            let range_ok = match range {
                "*" | "?" => true,
                r => match r.split_once('-') {
                    Some((a, b)) => value_ok(a) && value_ok(b),
                    // L, W and # (day-of-month and day-of-week only) are the parser's to judge.
                    None => value_ok(r) || r.contains(['L', 'W', '#', 'l', 'w']),
                },
            };
            step_ok && range_ok
        };
        if !text.split(',').all(part_ok) {
            let words = if words.is_empty() {
                String::new()
            } else {
                format!(" or {}-{}", words[0], words[words.len() - 1])
            };
            return Some(format!(
                "the {name} field {text:?} is not a value, range or step within {lo}-{hi}{words}"
            ));
        }
    }
    None
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

    /// `repeat.limit`: 1 up to `u32::MAX` fires.
    pub(crate) fn limit() -> Object {
        integer(1, i64::from(u32::MAX), true).build()
    }

    /// `repeat.jitter_ms`: 0 up to `MAX_JITTER_MS`.
    pub(crate) fn jitter_ms() -> Object {
        integer(0, crate::num::signed(super::MAX_JITTER_MS), true).build()
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
mod cron_words {
    use super::field_fault;

    #[test]
    fn a_wrong_field_is_named_with_its_range() {
        let said = field_fault("61 * * * *").unwrap();
        assert!(
            said.contains("minute field \"61\"") && said.contains("0-59"),
            "{said}"
        );
        let said = field_fault("0 9 * * 1-FRY").unwrap();
        assert!(
            said.contains("day-of-week field \"1-FRY\"") && said.contains("SUN-SAT"),
            "{said}"
        );
        let said = field_fault("0 9 *").unwrap();
        assert!(said.contains("3 fields"), "{said}");
        assert_eq!(field_fault("0 9 * * MON-FRI"), None);
        assert_eq!(field_fault("*/15 0-23 1,15 JAN-DEC 1-5"), None);
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

    fn bounds(limit: Option<u32>, until: Option<Millis>, jitter_ms: Option<u64>) -> Series {
        Series {
            limit,
            until,
            jitter_ms,
            catchup_window_ms: None,
        }
    }

    /// A limit ends the series with its `limit`th fire; `until` with the last fire whose next
    /// instant would pass it; without either it goes on (and parks past year 5000).
    #[test]
    fn a_series_ends_at_its_limit_or_at_until() {
        let every = Recurrence::every(std::time::Duration::from_secs(60)).unwrap();
        let three = every
            .clone()
            .with_series(bounds(Some(3), None, None))
            .unwrap();
        assert_eq!(three.after_fire(1, 0, 5, 0), Some(60_000));
        assert_eq!(three.after_fire(2, 60_000, 60_005, 0), Some(120_000));
        assert_eq!(three.after_fire(3, 120_000, 120_005, 0), None);
        let until = every
            .clone()
            .with_series(bounds(None, Some(120_000), None))
            .unwrap();
        assert_eq!(
            until.after_fire(1, 60_000, 60_001, 0),
            Some(120_000),
            "at until: fires"
        );
        assert_eq!(
            until.after_fire(2, 120_000, 120_001, 0),
            None,
            "past until: ends"
        );
        assert_eq!(every.after_fire(u32::MAX, 0, 1, 0), Some(60_000));
    }

    /// Jitter puts an instant off by 0 to `jitter_ms`, never before it, whatever the draw;
    /// it goes with cron only, and at most an hour.
    #[test]
    fn jitter_never_brings_an_instant_forward() {
        let r = Recurrence::cron("0 * * * *", None)
            .unwrap()
            .with_series(bounds(None, None, Some(30_000)))
            .unwrap();
        let at = utc(2026, 1, 1, 10, 0);
        for draw in [0, 1, 29_999, 30_000, 30_001, u64::MAX, 123_456_789] {
            let got = r.jittered(at, draw);
            assert!((at..=at + 30_000).contains(&got), "draw {draw}: {got}");
        }
        assert_eq!(r.jittered(at, 30_000), at + 30_000);
        let next = r.after_fire(1, at + 29_000, at + 29_500, 7).unwrap();
        assert_eq!(
            next,
            utc(2026, 1, 1, 11, 0) + 7,
            "from the next instant, put off"
        );
        let field = |r: Result<Recurrence>| match r {
            Err(Error::Invalid { field, .. } | Error::Unprocessable { field, .. }) => field,
            other => panic!("expected an invalid field, got {other:?}"),
        };
        let every = Recurrence::every(std::time::Duration::from_secs(60)).unwrap();
        assert_eq!(
            field(every.clone().with_series(bounds(None, None, Some(5)))),
            "repeat.jitter_ms"
        );
        let hourly = Recurrence::cron("0 * * * *", None).unwrap();
        assert_eq!(
            field(hourly.with_series(bounds(None, None, Some(MAX_JITTER_MS + 1)))),
            "repeat.jitter_ms"
        );
        assert_eq!(
            field(every.clone().with_series(bounds(Some(0), None, None))),
            "repeat.limit"
        );
        assert_eq!(
            field(every.with_series(bounds(None, Some(-1), None))),
            "repeat.until"
        );
    }

    /// A fire is skipped only when the latest instant it stands for is older than the
    /// window: an hourly job down three hours runs once if an instant is within the window,
    /// not if none is; a period shorter than the window always has one.
    #[test]
    fn a_fire_is_skipped_only_past_its_catchup_window() {
        let window = |r: Recurrence, ms| {
            r.with_series(Series {
                catchup_window_ms: Some(ms),
                ..Series::default()
            })
            .unwrap()
        };
        let hourly = window(Recurrence::cron("0 * * * *", None).unwrap(), 600_000);
        let ten = utc(2026, 1, 1, 10, 0);
        assert!(!hourly.skips(ten, ten + 599_000), "within the window");
        assert!(
            hourly.skips(ten, ten + 700_000),
            "10 min 40 s late, no later instant"
        );
        // Down until 13:05: 13:00 is 5 min old, within the window.
        assert!(!hourly.skips(ten, utc(2026, 1, 1, 13, 5)));
        assert!(hourly.skips(ten, utc(2026, 1, 1, 13, 20)));
        let minutely = window(
            Recurrence::every(std::time::Duration::from_secs(60)).unwrap(),
            120_000,
        );
        assert!(
            !minutely.skips(0, 3_600_000 + 59_000),
            "a minute's grid always has a recent instant"
        );
        let strict = window(
            Recurrence::every(std::time::Duration::from_secs(60)).unwrap(),
            0,
        );
        assert!(strict.skips(0, 60_001 + 1), "1 ms past its latest instant");
        assert!(!strict.skips(0, 60_000));
        let none = Recurrence::every(std::time::Duration::from_secs(60)).unwrap();
        assert!(
            !none.skips(0, 86_400_000),
            "without a window nothing is skipped"
        );
    }

    /// The bounds are stored beside the schedule, and a schedule without them reads and
    /// writes as before (records written before they existed still read).
    #[test]
    fn series_bounds_are_stored_with_the_schedule_and_old_records_read() {
        let old: Recurrence = serde_json::from_str(r#"{"every_ms":60000}"#).unwrap();
        assert_eq!(
            old,
            Recurrence::every(std::time::Duration::from_secs(60)).unwrap()
        );
        assert_eq!(
            serde_json::to_string(&old).unwrap(),
            r#"{"every_ms":60000}"#
        );
        let cron = Recurrence::cron("0 9 * * *", Some("UTC"))
            .unwrap()
            .with_series(bounds(Some(5), Some(9_000), Some(100)))
            .unwrap();
        let text = serde_json::to_string(&cron).unwrap();
        assert_eq!(
            text,
            r#"{"cron":"0 9 * * *","tz":"UTC","limit":5,"until":9000,"jitter_ms":100}"#
        );
        assert_eq!(serde_json::from_str::<Recurrence>(&text).unwrap(), cron);
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

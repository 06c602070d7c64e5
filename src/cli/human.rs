//! Times for people: what the CLI prints (instants as RFC 3339 in UTC with an age or a
//! countdown, spans as `1m 30s`) and what it takes (`--at` an RFC 3339 instant or ms since the
//! epoch, `--in` a span with its unit). `--json` prints the API's numbers untouched.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

/// Now on this machine's clock, ms since the epoch: what ages are counted from.
pub(super) fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// `ms` since the epoch as `2026-12-06T21:07:15Z (in 59s)` or `… (3m ago)`, seen at `now`.
/// Whole seconds: a table has no room for more, and `--json` keeps the milliseconds.
pub(super) fn instant(ms: i64, now: i64) -> String {
    if ms >= crate::time::PARKED_AT {
        return "parked (no fire planned: waits for a reset)".into();
    }
    let Some(at) = DateTime::<Utc>::from_timestamp_millis(ms) else {
        return ms.to_string();
    };
    let when = at.to_rfc3339_opts(SecondsFormat::Secs, true);
    let away = ms - now;
    let span = span(away.unsigned_abs());
    if away.abs() < 1_000 {
        format!("{when} (now)")
    } else if away > 0 {
        format!("{when} (in {span})")
    } else {
        format!("{when} ({span} ago)")
    }
}

/// A span of `ms` in its two largest units: `250ms`, `59s`, `1m 30s`, `2h 5m`, `3d 4h`.
pub(super) fn span(ms: u64) -> String {
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    let secs = ms / 1_000;
    let parts = [
        (secs / 86_400, "d"),
        (secs / 3_600 % 24, "h"),
        (secs / 60 % 60, "m"),
        (secs % 60, "s"),
    ];
    let first = parts.iter().position(|(n, _)| *n > 0).unwrap_or(3);
    parts[first..]
        .iter()
        .take(2)
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// An instant on the command line (`--at`, `--from`, `--to`): RFC 3339
/// (`2026-12-06T21:07:15Z`, any offset, fractions of a second) or ms since the epoch.
pub(super) fn parse_at(s: &str) -> Result<i64, String> {
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp_millis())
        .map_err(|e| {
            format!("{s:?} is not an RFC 3339 instant (2026-12-06T21:07:15Z) nor ms since the epoch: {e}")
        })
}

/// A span on the command line (`--in`): a number with its unit, `90s`, `30m`, `2h`,
/// `1h30m`, `500ms`, `1d`; in ms. A bare number is refused: `--in 30` could mean anything.
pub(super) fn parse_in(s: &str) -> Result<u64, String> {
    if s.trim().parse::<u64>().is_ok() {
        return Err(format!(
            "{s:?} has no unit: give one, as in 90s, 30m, 2h or 500ms (--delay-ms takes ms)"
        ));
    }
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a span such as 90s, 30m, 2h or 1h30m: {e}"))?;
    u64::try_from(d.as_millis()).map_err(|_| format!("{s:?} is too long"))
}

/// The API's answer as people read it: each instant field (`…_at`, `…_until`, and the
/// `next_fire_ats` list) as [`instant`], each span field (`…_ms`) as [`span`], at every
/// depth; everything else as it came.
pub(super) fn humanize(value: &Value, now: i64) -> Value {
    match value {
        Value::Object(obj) => Value::Object(
            obj.iter()
                .map(|(k, v)| (k.clone(), field(k, v, now)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| humanize(v, now)).collect()),
        other => other.clone(),
    }
}

/// One field of an answer, by its name (see [`humanize`]).
fn field(name: &str, v: &Value, now: i64) -> Value {
    let is_instant = name.ends_with("_at") || name.ends_with("_until") || name == "until";
    match v {
        Value::Number(n) if is_instant => n
            .as_i64()
            .map_or_else(|| v.clone(), |ms| Value::String(instant(ms, now))),
        Value::Number(n) if name.ends_with("_ms") => n
            .as_u64()
            .map_or_else(|| v.clone(), |ms| Value::String(span(ms))),
        Value::Array(items) if name.ends_with("_ats") => Value::Array(
            items
                .iter()
                .map(|i| {
                    i.as_i64()
                        .map_or_else(|| i.clone(), |ms| instant(ms, now).into())
                })
                .collect(),
        ),
        _ => humanize(v, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_796_591_175_913; // 2026-12-06T21:06:15.913Z

    #[test]
    fn an_instant_reads_as_a_date_with_its_countdown_or_age() {
        assert_eq!(instant(NOW + 60_000, NOW), "2026-12-06T21:07:15Z (in 1m)");
        assert_eq!(instant(NOW + 59_000, NOW), "2026-12-06T21:07:14Z (in 59s)");
        assert_eq!(
            instant(NOW - 3 * 60_000 - 5_000, NOW),
            "2026-12-06T21:03:10Z (3m 5s ago)"
        );
        assert_eq!(instant(NOW + 400, NOW), "2026-12-06T21:06:16Z (now)");
    }

    #[test]
    fn a_span_shows_its_two_largest_units() {
        for (ms, text) in [
            (0, "0ms"),
            (250, "250ms"),
            (59_000, "59s"),
            (90_000, "1m 30s"),
            (3_600_000, "1h"),
            (2 * 3_600_000 + 5 * 60_000 + 7_000, "2h 5m"),
            (3 * 86_400_000 + 4 * 3_600_000 + 1, "3d 4h"),
            (86_400_000 + 30_000, "1d"),
        ] {
            assert_eq!(span(ms), text, "{ms} ms");
        }
    }

    #[test]
    fn at_takes_rfc_3339_or_epoch_ms_and_names_what_it_wants() {
        assert_eq!(parse_at("2026-12-06T21:06:15.913Z"), Ok(NOW));
        assert_eq!(parse_at("2026-12-06T22:06:15.913+01:00"), Ok(NOW));
        assert_eq!(parse_at("1796591175913"), Ok(NOW));
        let e = parse_at("tomorrow").unwrap_err();
        assert!(e.contains("RFC 3339"), "{e}");
    }

    #[test]
    fn in_takes_a_span_with_its_unit() {
        for (text, ms) in [
            ("90s", 90_000),
            ("30m", 1_800_000),
            ("2h", 7_200_000),
            ("1h30m", 5_400_000),
            ("500ms", 500),
            ("1d", 86_400_000),
        ] {
            assert_eq!(parse_in(text), Ok(ms), "{text}");
        }
        assert!(parse_in("30").unwrap_err().contains("no unit"));
        assert!(parse_in("soon").is_err());
    }

    #[test]
    fn an_answer_reads_with_dates_and_spans_at_every_depth() {
        let job = serde_json::json!({
            "id": "o1", "fire_at": NOW + 60_000, "created_at": NOW - 1_000,
            "updated_at": null, "visibility_timeout_ms": 30_000, "attempts": 0,
            "next_fire_ats": [NOW + 60_000],
            "items": [{"lease_until": NOW + 90_000}],
        });
        let h = humanize(&job, NOW);
        assert_eq!(h["fire_at"], "2026-12-06T21:07:15Z (in 1m)");
        assert_eq!(h["created_at"], "2026-12-06T21:06:14Z (1s ago)");
        assert_eq!(h["updated_at"], Value::Null);
        assert_eq!(h["visibility_timeout_ms"], "30s");
        assert_eq!(h["attempts"], 0);
        assert_eq!(h["next_fire_ats"][0], "2026-12-06T21:07:15Z (in 1m)");
        assert_eq!(
            h["items"][0]["lease_until"],
            "2026-12-06T21:07:45Z (in 1m 30s)"
        );
    }
}

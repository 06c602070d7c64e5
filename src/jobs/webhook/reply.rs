//! How a receiver's reply steers the job (`Answered::outcome`, a plain decider): its status
//! chooses done, retry or dead, `Retry-After` on 429 and 503 sets the next attempt, and the first bytes of a failure's body are kept for `last_error`. A body is read
//! to at most `webhooks.max_reply_bytes` (4 KiB), so a huge one never holds a handler.

use std::time::{Duration, SystemTime};

use crate::model::Outcome;

/// The most of a failure's body kept in `last_error`.
const EXCERPT_CHARS: usize = 200;

/// The delay a `Retry-After` value asks for, at `now`: seconds, or an HTTP date (a date in
/// the past asks for none). `None` when it is neither.
pub fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// What a receiver answered, as far as the job's outcome goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    /// The HTTP status, after the redirects followed.
    pub status: u16,
    /// The delay its `Retry-After` asked for, when it had one that reads.
    pub retry_after: Option<Duration>,
    /// The first characters of its body (`excerpt`).
    pub excerpt: String,
}

impl Answered {
    /// The job's outcome (`what`: the call, as `last_error` names it; `most`: the topic's
    /// backoff ceiling): done on 2xx; dead on 410 (the receiver asked to stop); a retry
    /// after `Retry-After`, capped at `most`, on 429 and 503 that carry one; a retry after
    /// the topic's backoff on 408, 429 and 5xx; dead on a redirect not followed and on any
    /// other status (a 4xx will not change by calling again).
    pub fn outcome(&self, what: &str, most: Duration) -> Outcome {
        if (200..300).contains(&self.status) {
            return Outcome::Done;
        }
        let shown = reqwest::StatusCode::from_u16(self.status)
            .map_or_else(|_| self.status.to_string(), |s| s.to_string());
        let mut error = format!("{what} answered {shown}");
        if !self.excerpt.is_empty() {
            error = format!("{error}: {}", self.excerpt);
        }
        match self.status {
            410 => Outcome::dead(format!("{error} (the receiver asked to stop)")),
            429 | 503 if self.retry_after.is_some() => Outcome::Retry {
                error,
                delay: self.retry_after.map(|d| d.min(most)),
            },
            408 | 429 | 500..=599 => Outcome::retry(error),
            300..=399 => Outcome::dead(format!(
                "{error} (redirects are not followed beyond webhooks.max_redirects)"
            )),
            _ => Outcome::dead(error),
        }
    }
}

/// Reads at most `max` bytes of a reply's body (less if it ends or fails first).
pub async fn read_capped(reply: &mut reqwest::Response, max: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < max {
        match reply.chunk().await {
            Ok(Some(chunk)) => {
                let room = max - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    body
}

/// The first characters of a body, on one line, for `last_error`; empty for an empty body.
pub fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(EXCERPT_CHARS)
        .collect();
    out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() > EXCERPT_CHARS {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each reply's outcome: status, `Retry-After` and the backoff ceiling in, outcome out.
    #[test]
    fn a_reply_decides_the_outcome() {
        let s = Duration::from_secs;
        let most = s(3_600);
        let what = "POST https://r.example/h";
        let retry = |e: &str, d: Option<Duration>| Outcome::Retry {
            error: format!("{what} answered {e}"),
            delay: d,
        };
        let dead = |e: &str| Outcome::dead(format!("{what} answered {e}"));
        let rows: Vec<(u16, Option<Duration>, &str, Outcome)> = vec![
            (200, None, "", Outcome::Done),
            (204, Some(s(5)), "", Outcome::Done),
            (299, None, "", Outcome::Done),
            (
                410,
                Some(s(5)),
                "",
                dead("410 Gone (the receiver asked to stop)"),
            ),
            (
                429,
                Some(s(5)),
                "",
                retry("429 Too Many Requests", Some(s(5))),
            ),
            (
                429,
                Some(s(86_400)),
                "",
                retry("429 Too Many Requests", Some(most)),
            ),
            (
                503,
                Some(s(0)),
                "",
                retry("503 Service Unavailable", Some(s(0))),
            ),
            (503, None, "", retry("503 Service Unavailable", None)),
            (429, None, "", retry("429 Too Many Requests", None)),
            (408, Some(s(5)), "", retry("408 Request Timeout", None)),
            (
                500,
                Some(s(5)),
                "",
                retry("500 Internal Server Error", None),
            ),
            (599, None, "", retry("599 <unknown status code>", None)),
            (
                302,
                None,
                "",
                dead("302 Found (redirects are not followed beyond webhooks.max_redirects)"),
            ),
            (
                404,
                None,
                "no such hook",
                dead("404 Not Found: no such hook"),
            ),
            (400, Some(s(5)), "", dead("400 Bad Request")),
            (100, None, "", dead("100 Continue")),
        ];
        for (status, retry_after, excerpt, want) in rows {
            let answered = Answered {
                status,
                retry_after,
                excerpt: excerpt.into(),
            };
            assert_eq!(answered.outcome(what, most), want, "{answered:?}");
        }
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2026 07:28:00 GMT").unwrap();
        assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(retry_after(" 2 ", now), Some(Duration::from_secs(2)));
        assert_eq!(
            retry_after("Wed, 21 Oct 2026 07:30:00 GMT", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            retry_after("Wed, 21 Oct 2026 07:00:00 GMT", now),
            Some(Duration::ZERO),
            "a date past asks for no wait"
        );
        assert_eq!(retry_after("soon", now), None);
        assert_eq!(retry_after("-5", now), None);
    }

    #[test]
    fn an_excerpt_is_one_short_line() {
        assert_eq!(excerpt(b"busy\r\n  try\tlater"), "busy try later");
        let long = vec![b'x'; 1000];
        let e = excerpt(&long);
        assert_eq!(e.chars().count(), EXCERPT_CHARS + 1);
        assert!(e.ends_with('…'));
        assert_eq!(excerpt(b""), "");
    }
}

//! How a receiver's reply steers the job: `Retry-After` on 429 and 503 sets the next
//! attempt, and the first bytes of a failure's body are kept for `last_error`. A body is read
//! to at most `webhooks.max_reply_bytes` (4 KiB), so a huge one never holds a handler.

use std::time::{Duration, SystemTime};

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

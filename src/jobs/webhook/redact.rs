//! What of a webhook's secrets may be shown, and to whom.
//!
//! - In `last_error`, events, logs and the dashboard a URL appears as its scheme, host and
//!   port only (`https://hooks.example.com/…`): its userinfo, query and path (where Slack,
//!   Discord and Teams hooks carry their secret) never do. The headers' values never appear.
//! - A caller below `write` on a topic reads a payload with its `headers` values, and its
//!   `url`'s userinfo, path and query, replaced by `***` ([`payload`]).

use serde_json::Value;

/// What stands for a secret a caller may not see.
pub const HIDDEN: &str = "***";

/// `text` as it may be shown: a URL's scheme, host and port, or a placeholder when it does
/// not parse as one.
pub fn url_text(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(u) => shown(&u),
        Err(_) if text.is_empty() => String::new(),
        Err(_) => "(a URL that does not parse)".into(),
    }
}

/// `url`'s origin (scheme, host, port), followed by `/…` when it has more.
pub fn shown(url: &url::Url) -> String {
    let origin = origin(url);
    if more_than_origin(url) {
        format!("{origin}/…")
    } else {
        origin
    }
}

fn origin(url: &url::Url) -> String {
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => format!("[{a}]"),
        Some(h) => h.to_string(),
        None => String::new(),
    };
    match url.port() {
        Some(p) => format!("{}://{host}:{p}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

fn more_than_origin(url: &url::Url) -> bool {
    !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
        || !matches!(url.path(), "" | "/")
}

/// A payload as a caller below `write` may read it: a top-level `url` string as its origin
/// followed by `/***` when it has userinfo, a path or a query; each value of a top-level
/// `headers` object as `***`. Any type's payload of that shape is treated alike.
pub fn payload(p: &mut Value) {
    let Some(obj) = p.as_object_mut() else {
        return;
    };
    if let Some(Value::String(u)) = obj.get_mut("url") {
        *u = match url::Url::parse(u) {
            Ok(parsed) if more_than_origin(&parsed) => format!("{}/{HIDDEN}", origin(&parsed)),
            Ok(parsed) => origin(&parsed),
            Err(_) => HIDDEN.to_string(),
        };
    }
    if let Some(Value::Object(headers)) = obj.get_mut("headers") {
        for v in headers.values_mut() {
            *v = Value::String(HIDDEN.into());
        }
    }
}

/// Words shorter than this are not scrubbed on their own (a scheme, `Bearer`, a port).
const SHORTEST_SECRET: usize = 8;

/// `text` (a receiver's reply) with what of the job's secrets it echoes replaced by `***`:
/// each of `headers`' values and each long word of them (a token after `Bearer`), and the
/// `url`'s userinfo, path and query (where hooks carry their secret). What `last_error`
/// keeps of a reply, which callers below `write` read.
pub fn scrub<'a>(text: &str, url: &str, headers: impl IntoIterator<Item = &'a String>) -> String {
    let mut secrets: Vec<String> = Vec::new();
    for value in headers {
        secrets.push(value.clone());
        secrets.extend(
            value
                .split_whitespace()
                .filter(|w| w.len() >= SHORTEST_SECRET)
                .map(str::to_string),
        );
    }
    if let Ok(u) = url::Url::parse(url) {
        secrets.push(u.username().to_string());
        secrets.extend(u.password().map(str::to_string));
        secrets.extend(u.query().map(str::to_string));
        if !matches!(u.path(), "" | "/") {
            secrets.push(u.path().to_string());
        }
        if more_than_origin(&u) {
            secrets.push(url.to_string());
        }
    }
    // The longest first, so a secret is not left in part by a shorter one inside it.
    secrets.retain(|s| s.len() >= 4);
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = text.to_string();
    for secret in secrets {
        if out.contains(&secret) {
            out = out.replace(&secret, HIDDEN);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reply_echoing_the_request_keeps_none_of_its_secrets() {
        let headers = ["Bearer s3cr3t-t0ken-value".to_string(), "x".to_string()];
        let url = "https://user:pa55word@hooks.example.com/T0/B1/XXsecretXX?sig=abcd1234";
        let reply = "denied: Authorization: Bearer s3cr3t-t0ken-value for \
                     https://user:pa55word@hooks.example.com/T0/B1/XXsecretXX?sig=abcd1234 \
                     (token s3cr3t-t0ken-value, path /T0/B1/XXsecretXX, sig=abcd1234)";
        let out = scrub(reply, url, &headers);
        for secret in ["s3cr3t-t0ken-value", "pa55word", "XXsecretXX", "abcd1234"] {
            assert!(!out.contains(secret), "{secret} left in {out}");
        }
        assert!(out.starts_with("denied: Authorization: ***"), "{out}");
        assert_eq!(scrub("plain failure", url, &headers), "plain failure");
    }

    #[test]
    fn only_the_origin_is_shown() {
        assert_eq!(
            url_text("https://user:s3cret@example.com:8443/hook?api_key=k3y#f"),
            "https://example.com:8443/…"
        );
        assert_eq!(
            url_text("https://hooks.slack.com/services/T0/B0/s3cret"),
            "https://hooks.slack.com/…"
        );
        assert_eq!(url_text("http://example.com/"), "http://example.com");
        assert_eq!(url_text("http://[::1]:9/x"), "http://[::1]:9/…");
        assert_eq!(
            url_text("not a url :s3cret@"),
            "(a URL that does not parse)"
        );
    }

    #[test]
    fn a_payload_loses_its_secrets() {
        let mut p = json!({
            "url": "https://u:pw@hooks.example.com:444/T0/s3cret?token=k3y",
            "method": "POST",
            "headers": {"Authorization": "Bearer s3cret", "X-Other": "k3y"},
            "body": {"order": 1},
        });
        payload(&mut p);
        assert_eq!(
            p,
            json!({
                "url": "https://hooks.example.com:444/***",
                "method": "POST",
                "headers": {"Authorization": "***", "X-Other": "***"},
                "body": {"order": 1},
            })
        );
        let mut plain = json!({"url": "https://example.com"});
        payload(&mut plain);
        assert_eq!(plain, json!({"url": "https://example.com"}));
        let mut other = json!([1, 2]);
        payload(&mut other);
        assert_eq!(other, json!([1, 2]));
    }
}

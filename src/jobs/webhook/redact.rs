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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

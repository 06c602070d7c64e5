//! What of a webhook's URL may be shown: in `last_error`, events, logs and the dashboard a
//! URL appears without its userinfo (`https://user:secret@host/`) and without its query
//! (where API keys travel); the headers' values never appear at all.

/// `text` as it may be shown: a URL without userinfo and query, or a placeholder when it
/// does not parse as one.
pub fn url_text(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(u) => shown(&u),
        Err(_) if text.is_empty() => String::new(),
        Err(_) => "(a URL that does not parse)".into(),
    }
}

/// `url` without userinfo, query and fragment.
pub fn shown(url: &url::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    let had_query = u.query().is_some();
    u.set_query(None);
    u.set_fragment(None);
    let mut s = u.to_string();
    if had_query {
        s.push_str("?…");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_and_query_are_not_shown() {
        assert_eq!(
            url_text("https://user:s3cret@example.com:8443/hook?api_key=k3y#f"),
            "https://example.com:8443/hook?…"
        );
        assert_eq!(url_text("http://example.com/a"), "http://example.com/a");
        assert_eq!(
            url_text("not a url :s3cret@"),
            "(a URL that does not parse)"
        );
    }
}

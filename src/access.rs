//! Who may do what: scoped tokens. A token is written `SECRET[:SCOPE[:PATTERN]]` in the one
//! list of tokens (`TOC_TOKENS=ops-secret,view-secret:read,orders-secret:write:orders*`):
//!
//! - `read`: GET routes (jobs, topics, dead letters, events), the dashboard;
//! - `write`: what `read` may, and schedule, reset, cancel, claim, ack (every other call on a
//!   topic's jobs and meetings);
//! - `admin` (no scope written): everything, topic settings, flow keys' own limits,
//!   deletion and dead letters' requeue and removal included.
//!
//! Each route declares the scope it needs where it is registered (`crate::http::configure`),
//! and the check is made on the route the router matched (`crate::http::guard`). A `read`
//! token sees payloads with their secrets (header values, a URL's userinfo, path and query)
//! redacted (`crate::jobs::webhook::redact`).
//!
//! A pattern (`orders*`, `*-eu`, `exact`; `*` matches any run of characters) limits a token
//! to the topics it matches; such a token cannot list every topic. Tokens are compared as
//! SHA-256 digests in constant time, so neither a token's content nor its length shows in
//! the time a refusal takes. A secret may not contain `:`.

use std::fmt;

use subtle::ConstantTimeEq;

/// What a token may do; each scope may do what the ones before it may.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Scope {
    /// Read: GET routes, events, the dashboard.
    Read,
    /// Read, and schedule, reset, cancel, claim and ack.
    Write,
    /// Everything: topic settings, deletion, dead letters.
    Admin,
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        })
    }
}

/// One token of the list: its secret's digest, its scope, the topics it may touch.
#[derive(Clone)]
pub(crate) struct Grant {
    digest: [u8; 32],
    /// What it may do.
    pub(crate) scope: Scope,
    /// The topics it may touch; every topic when `None`.
    pub(crate) pattern: Option<String>,
}

impl fmt::Debug for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Grant")
            .field("scope", &self.scope)
            .field("pattern", &self.pattern)
            .finish_non_exhaustive()
    }
}

fn digest(secret: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, secret);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

impl Grant {
    /// Parses `SECRET[:SCOPE[:PATTERN]]`; the error never repeats the secret.
    pub(crate) fn parse(spec: &str) -> Result<Grant, String> {
        let mut parts = spec.trim().splitn(3, ':');
        let secret = parts.next().unwrap_or_default();
        if secret.is_empty() {
            return Err("a token must not be empty".into());
        }
        let scope = match parts.next().map(str::trim) {
            None | Some("admin") => Scope::Admin,
            Some("read") => Scope::Read,
            Some("write") => Scope::Write,
            Some(other) => {
                return Err(format!(
                    "a token's scope is read, write or admin (SECRET:SCOPE:PATTERN), not {other:?}"
                ));
            }
        };
        let pattern = match parts.next().map(str::trim) {
            None | Some("") | Some("*") => None,
            Some(p)
                if p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-*".contains(c)) =>
            {
                Some(p.to_string())
            }
            Some(p) => {
                return Err(format!(
                    "a token's topic pattern is topic-name characters and *, not {p:?}"
                ));
            }
        };
        Ok(Grant {
            digest: digest(secret.as_bytes()),
            scope,
            pattern,
        })
    }
}

/// The grant whose secret is `given`, comparing every one in constant time.
pub(crate) fn find<'a>(grants: &'a [Grant], given: &str) -> Option<&'a Grant> {
    let d = digest(given.trim().as_bytes());
    let mut found = None;
    for g in grants {
        if bool::from(g.digest.ct_eq(&d)) {
            found = Some(g);
        }
    }
    found
}

/// `*` matches any run of characters; everything else itself.
pub(crate) fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            let Some(tail) = name.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len()).any(|i| tail.is_char_boundary(i) && glob(rest, &tail[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_secret_scope_and_pattern() {
        let g = Grant::parse("s3cret").unwrap();
        assert_eq!((g.scope, g.pattern.clone()), (Scope::Admin, None));
        let g = Grant::parse("view:read").unwrap();
        assert_eq!(g.scope, Scope::Read);
        let g = Grant::parse("o:write:orders*").unwrap();
        assert_eq!(
            (g.scope, g.pattern.as_deref()),
            (Scope::Write, Some("orders*"))
        );
        let p = g.pattern.as_deref().unwrap();
        assert!(glob(p, "orders") && glob(p, "orders-eu") && !glob(p, "billing"));
        for bad in ["", ":read", "x:owner", "x:read:a/b"] {
            let e = Grant::parse(bad).unwrap_err();
            assert!(!e.contains("s3cret"), "{e}");
        }
        let e = Grant::parse("s3cret:owner").unwrap_err();
        assert!(!e.contains("s3cret"), "{e}");
    }

    #[test]
    fn tokens_are_found_by_their_secret_alone() {
        let grants = [Grant::parse("a:read").unwrap(), Grant::parse("bb").unwrap()];
        assert_eq!(find(&grants, "a").map(|g| g.scope), Some(Scope::Read));
        assert_eq!(find(&grants, " bb ").map(|g| g.scope), Some(Scope::Admin));
        assert!(find(&grants, "b").is_none() && find(&grants, "a:read").is_none());
    }

    #[test]
    fn patterns_glob_on_star() {
        assert!(glob("orders*", "orders"));
        assert!(glob("*-eu", "billing-eu") && !glob("*-eu", "billing-us"));
        assert!(glob("a*b*c", "axxbyyc") && !glob("a*b*c", "axxc"));
        assert!(glob("exact", "exact") && !glob("exact", "exactly"));
    }
}

//! Redis over TLS and credentials kept out of sight: `rediss://` URLs (managed Redis:
//! ElastiCache with in-transit encryption, Azure Cache, Upstash) verified against the system's
//! roots or `redis.tls_ca`, with a client certificate and key when `redis.tls_cert` and
//! `redis.tls_key` are set (mutual TLS); and every URL shown with its password redacted.

use redis::{ClientTlsConfig, TlsCertificates};

use super::settings::RedisSettings;
use crate::error::{Error, Result};

/// The certificates the settings name, read from their files; `None` when none is set (a
/// `rediss://` URL then verifies against the system's roots).
pub(crate) fn certificates(settings: &RedisSettings) -> Result<Option<TlsCertificates>> {
    let read = |field: &'static str, path: &str| -> Result<Option<Vec<u8>>> {
        if path.is_empty() {
            return Ok(None);
        }
        std::fs::read(path)
            .map(Some)
            .map_err(|e| Error::invalid(field, format!("cannot read {path}: {e}")))
    };
    let root_cert = read("redis.tls_ca", &settings.tls_ca)?;
    let cert = read("redis.tls_cert", &settings.tls_cert)?;
    let key = read("redis.tls_key", &settings.tls_key)?;
    let client_tls = match (cert, key) {
        (Some(client_cert), Some(client_key)) => Some(ClientTlsConfig {
            client_cert,
            client_key,
        }),
        (None, None) => None,
        (Some(_), None) => {
            return Err(Error::invalid(
                "redis.tls_key",
                "is needed with redis.tls_cert",
            ));
        }
        (None, Some(_)) => {
            return Err(Error::invalid(
                "redis.tls_cert",
                "is needed with redis.tls_key",
            ));
        }
    };
    Ok(
        (root_cert.is_some() || client_tls.is_some()).then_some(TlsCertificates {
            client_tls,
            root_cert,
        }),
    )
}

/// A client for `url`, with `certs` when the URL is `rediss://`; an error names `field` and
/// shows the URL without its password.
pub(crate) fn client(
    url: &str,
    certs: Option<&TlsCertificates>,
    field: &'static str,
) -> Result<redis::Client> {
    let made = match certs {
        Some(c) if url.starts_with("rediss://") => redis::Client::build_with_tls(url, c.clone()),
        _ => redis::Client::open(url),
    };
    made.map_err(|e| {
        Error::invalid(
            field,
            format!("{}: {}", redact(url), redact_text(&e.to_string(), url)),
        )
    })
}

/// `url` with the password of its userinfo replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            if u.password().is_some() {
                let _ = u.set_password(Some("***"));
            }
            u.to_string()
        }
        Err(_) => match url.rsplit_once('@') {
            Some((_, host)) => format!("(userinfo hidden)@{host}"),
            None => url.to_string(),
        },
    }
}

/// `text` with any password of `url` in it replaced.
pub(crate) fn redact_text(text: &str, url: &str) -> String {
    match url::Url::parse(url)
        .ok()
        .and_then(|u| u.password().map(str::to_string))
    {
        Some(p) if !p.is_empty() => text.replace(&p, "***"),
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(
            redact("rediss://toc:s3cret@cache.example:6380/0"),
            "rediss://toc:***@cache.example:6380/0"
        );
        assert_eq!(redact("redis://127.0.0.1:6379/"), "redis://127.0.0.1:6379/");
        assert!(!redact("not a url://u:s3cret@h").contains("s3cret"));
        assert_eq!(
            redact_text("auth s3cret failed", "redis://u:s3cret@h/"),
            "auth *** failed"
        );
        for bad in [
            "redis://u:s3cret@h:99999999/",
            "rediss://u:s3cret@/x",
            "nope://u:s3cret@h/",
        ] {
            let e = client(bad, None, "redis.url").unwrap_err().to_string();
            assert!(e.contains("redis.url") && !e.contains("s3cret"), "{e}");
        }
    }
}

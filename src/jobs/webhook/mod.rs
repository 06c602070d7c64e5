//! `webhook`: calls a URL when the job fires, to the standard of Standard Webhooks.
//!
//! - Only `http` and `https`; the address of every connection is checked by the egress
//!   policy ([`egress`]), at schedule for a literal address and at every fire after name
//!   resolution. A refusal sends the job to the dead letters at once.
//! - Redirects are not followed unless `webhooks.max_redirects` allows some; a 3xx reply
//!   is then a failure. Each hop is followed here, not by the HTTP client, and checked
//!   again: only `http` and `https`, never from `https` down to `http`, its address by the
//!   egress policy. A hop to another origin carries no `Referer`, none of the job's headers,
//!   no `x-toc-*` and no signature: only the method and the body.
//! - Only the methods GET, POST, PUT, PATCH and DELETE.
//! - With signing keys set, every call is signed ([`signing`]): `webhook-id` (stable across
//!   a fire's retries), `webhook-timestamp`, `webhook-signature`.
//! - A 2xx reply is done; 410 Gone sends the job to the dead letters at once; 429 and 503
//!   with `Retry-After` retry when the receiver asked (bounded by the topic's backoff
//!   maximum); timeouts, connection errors, 408, 429 and 5xx retry on the topic's backoff;
//!   any other status sends the job to the dead letters. At most `webhooks.max_reply_bytes`
//!   (4 KiB) of a reply is read,
//!   and the first bytes of a failure's body go into `last_error`.
//! - A URL's userinfo and query, and the headers' values, never appear in `last_error`,
//!   events or logs ([`redact`]).

pub mod egress;
pub mod redact;
pub mod reply;
pub mod settings;
pub mod signing;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use reqwest::header::{HeaderName, HeaderValue};
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use crate::job_type::{JobContext, JobHandler, Outcome};
pub use egress::Egress;
pub use settings::WebhookSettings;

const DEFAULT_TIMEOUT_MS: u64 = 10_000;

/// Headers a job may not set: the connection's own, and the ones the service signs or sets.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
    "proxy-connection",
];

/// Header prefixes a job may not set: the signature's and the service's own.
const RESERVED_PREFIXES: &[&str] = &["webhook-", "x-toc-"];

/// The type's name.
pub const TYPE: &str = "webhook";

/// A webhook job: the HTTP call to make when it fires.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookPayload {
    /// The URL to call: `http://` or `https://`.
    #[serde(deserialize_with = "http_url")]
    pub url: String,
    /// The HTTP method.
    #[serde(default = "post")]
    pub method: String,
    /// Headers to send.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Sent as JSON; no body when absent.
    #[serde(default)]
    pub body: Option<Value>,
    /// The call's timeout, in ms; the type's default when `None`.
    #[serde(default, deserialize_with = "crate::wire::integer::option")]
    pub timeout_ms: Option<u64>,
}

fn post() -> String {
    "POST".to_string()
}

/// A URL whose scheme is `http` or `https` (any case); whether the rest parses is checked
/// by [`Webhook::admit`].
fn http_url<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let url = String::deserialize(d)?;
    let lower = url.get(..8).unwrap_or(&url).to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        Ok(url)
    } else {
        Err(serde::de::Error::custom(
            "must be an http:// or https:// URL",
        ))
    }
}

/// The `webhook` job type: an HTTP call at the fire time; a failed call is retried.
pub struct Webhook {
    client: reqwest::Client,
    egress: Arc<Egress>,
    settings: WebhookSettings,
}

impl Default for Webhook {
    /// Only public addresses, no redirect, unsigned.
    fn default() -> Self {
        Webhook::new(WebhookSettings::default())
    }
}

impl Webhook {
    /// The job type with `settings` (validated by [`WebhookSettings::validate`]).
    pub fn new(settings: WebhookSettings) -> Self {
        let mut egress = Egress::new(
            settings.allow_nets.iter().map(|n| n.0).collect(),
            settings.deny_nets.iter().map(|n| n.0).collect(),
        );
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("timeout-center/", env!("CARGO_PKG_VERSION")));
        let proxy = (!settings.proxy.is_empty())
            .then(|| reqwest::Proxy::all(&settings.proxy).ok())
            .flatten();
        if let Some(proxy) = proxy {
            if let Some(host) = url::Url::parse(&settings.proxy)
                .ok()
                .and_then(|u| u.host_str().map(str::to_string))
            {
                egress.trust(&host);
            }
            builder = builder.proxy(proxy);
        } else {
            // No proxy from the environment either: a call goes where the policy says.
            builder = builder.no_proxy();
        }
        let egress = Arc::new(egress);
        // Redirects are followed by `handle`, hop by hop, so that what a hop carries is
        // decided here; the client follows none and sends no `Referer`.
        let client = builder
            .redirect(reqwest::redirect::Policy::none())
            .referer(false)
            .dns_resolver(Arc::new(egress::PolicyResolver::new(egress.clone())))
            .build()
            .expect("an HTTP client");
        Webhook {
            client,
            egress,
            settings,
        }
    }

    /// The URL parsed, an `http` or `https` one, and allowed by the policy if it names an
    /// address: the error names `payload.url`.
    fn target(&self, text: &str) -> Result<url::Url, String> {
        let url = url::Url::parse(text)
            .map_err(|e| format!("payload.url: does not parse as a URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("payload.url: must be an http:// or https:// URL".into());
        }
        if url.host().is_none() {
            return Err("payload.url: names no host".into());
        }
        self.egress
            .check_url(&url)
            .map_err(|r| format!("payload.url: {r}"))?;
        Ok(url)
    }
}

/// The methods a job may call with.
const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];

/// `method` upper-cased, when a job may call with it.
fn method(text: &str) -> Result<reqwest::Method, String> {
    let upper = text.to_ascii_uppercase();
    if !METHODS.contains(&upper.as_str()) {
        return Err(format!(
            "payload.method: one of {} (got {text:?})",
            METHODS.join(", ")
        ));
    }
    reqwest::Method::from_bytes(upper.as_bytes())
        .map_err(|_| "payload.method: not an HTTP method".to_string())
}

/// Where a redirect from `from` leads (`location`, resolved against it), or why the hop is
/// not made: a scheme other than `http` and `https`, or `https` down to `http`.
fn next_hop(from: &url::Url, location: &str) -> Result<url::Url, String> {
    let next = from
        .join(location)
        .map_err(|_| "a redirect to a URL that does not parse".to_string())?;
    if !matches!(next.scheme(), "http" | "https") {
        return Err("a redirect to a scheme other than http or https".into());
    }
    if from.scheme() == "https" && next.scheme() == "http" {
        return Err("a redirect from https down to http is not followed".into());
    }
    Ok(next)
}

/// Whether two URLs share scheme, host and port: a hop to another origin carries none of
/// the job's headers and no signature.
fn same_origin(a: &url::Url, b: &url::Url) -> bool {
    a.scheme() == b.scheme()
        && a.host() == b.host()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// A URL's host, for a span (never its path or query, which may hold a secret).
fn url_host(text: &str) -> Option<String> {
    url::Url::parse(text).ok()?.host_str().map(str::to_string)
}

/// A header a job may set: a valid name and value, and none the service sets itself.
fn check_header(name: &str, value: &str) -> Result<(), String> {
    let lower = name.to_ascii_lowercase();
    let field = format!("payload.headers.{name}");
    HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("{field}: not a valid header name"))?;
    HeaderValue::from_str(value).map_err(|_| format!("{field}: not a valid header value"))?;
    if RESERVED_HEADERS.contains(&lower.as_str())
        || RESERVED_PREFIXES.iter().any(|p| lower.starts_with(p))
    {
        return Err(format!(
            "{field}: set by the service, not by a job (reserved: {}, and webhook-*, x-toc-*)",
            RESERVED_HEADERS.join(", ")
        ));
    }
    Ok(())
}

#[async_trait]
impl JobHandler for Webhook {
    type Payload = WebhookPayload;

    fn job_type(&self) -> &'static str {
        TYPE
    }

    /// The URL's host and port (`example.com:443`): one receiver's jobs share its room.
    fn flow_key(&self, payload: &Value) -> Option<String> {
        let url = url::Url::parse(payload.get("url")?.as_str()?).ok()?;
        Some(format!(
            "{}:{}",
            url.host_str()?,
            url.port_or_known_default()?
        ))
    }

    /// `webhooks.max_in_flight`.
    fn concurrency(&self) -> usize {
        self.settings.max_in_flight
    }

    /// `webhooks.max_in_flight_per_topic`.
    fn share_per_topic(&self) -> Option<usize> {
        Some(self.settings.max_in_flight_per_topic)
    }

    /// `webhooks.max_in_flight_per_key`.
    fn share_per_key(&self) -> Option<usize> {
        Some(self.settings.max_in_flight_per_key)
    }

    fn share_per_tenant(&self) -> Option<usize> {
        Some(self.settings.max_in_flight_per_tenant)
    }

    /// Above any request timeout a payload may ask for (`webhooks.max_timeout_ms`).
    fn timeout(&self) -> Duration {
        Duration::from_millis(self.settings.max_timeout_ms) + Duration::from_secs(5)
    }

    fn payload_schema(&self) -> Option<Value> {
        Some(serde_json::json!({
            "type": "object",
            "required": ["url"],
            "additionalProperties": false,
            "properties": {
                "url": {"type": "string", "pattern": "^[hH][tT][tT][pP][sS]?://"},
                "method": {"type": "string"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "body": {},
                "timeout_ms": {"type": ["integer", "null"], "minimum": 0, "maximum": self.settings.max_timeout_ms}
            }
        }))
    }

    fn admit(&self, p: &WebhookPayload) -> Result<(), String> {
        self.target(&p.url)?;
        method(&p.method)?;
        let most = self.settings.max_timeout_ms;
        if p.timeout_ms.is_some_and(|t| t > most) {
            return Err(format!(
                "payload.timeout_ms: at most {most} (webhooks.max_timeout_ms)"
            ));
        }
        for (name, value) in &p.headers {
            check_header(name, value)?;
        }
        Ok(())
    }

    async fn handle(&self, ctx: JobContext<WebhookPayload>) -> Outcome {
        let p = &ctx.payload;
        let shown = redact::url_text(&p.url);
        // Checked again at every fire: the job may predate the policy, and DNS changes.
        let url = match self.target(&p.url) {
            Ok(u) => u,
            Err(e) => return Outcome::dead(e),
        };
        let method = match method(&p.method) {
            Ok(m) => m,
            Err(e) => return Outcome::dead(e),
        };
        let what = format!("{method} {shown}");
        // A job stored before the ceiling was lowered is held to it too.
        let timeout_ms = p
            .timeout_ms
            .unwrap_or(DEFAULT_TIMEOUT_MS)
            .min(self.settings.max_timeout_ms);
        for (k, v) in &p.headers {
            if let Err(e) = check_header(k, v) {
                return Outcome::dead(e);
            }
        }
        let body = p
            .body
            .as_ref()
            .map(|b| serde_json::to_vec(b).unwrap_or_default());
        let mut own = self.own_headers(&ctx, body.as_deref());
        let call = call_span(&ctx, &method);
        if let Some(tp) = crate::otel::traceparent(&call).or_else(|| ctx.job.traceparent.clone()) {
            own.push(("traceparent".into(), tp));
        }
        let send = Send {
            method,
            body,
            own,
            timeout_ms,
        };
        let mut reply = match self.follow(url, send, &what, &call).await {
            Ok(reply) => reply,
            Err(outcome) => return outcome,
        };
        let code = reply.status().as_u16();
        call.record("http.response.status_code", i64::from(code));
        call.in_scope(|| tracing::debug!(status = code, "webhook called"));
        drop(call);
        ctx.emit("webhook.called", json!({"url": shown, "status": code}));
        let retry_after = reply
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| reply::retry_after(v, SystemTime::now()));
        let body = reply::read_capped(&mut reply, self.settings.max_reply_bytes).await;
        let most = Duration::from_millis(ctx.settings.backoff.max_ms);
        // The reply may echo the request: the job's secrets are scrubbed from it before it
        // is cut to an excerpt (a secret cut in two would escape the scrub).
        let text = redact::scrub(&String::from_utf8_lossy(&body), &p.url, p.headers.values());
        let answered = reply::Answered {
            status: code,
            retry_after,
            excerpt: reply::excerpt(text.as_bytes()),
        };
        answered.outcome(&what, most)
    }
}

impl Webhook {
    /// The headers only the job's own origin gets: its own, the service's, and the
    /// signature (over `body` as first sent) when the topic has keys.
    fn own_headers(
        &self,
        ctx: &JobContext<WebhookPayload>,
        body: Option<&[u8]>,
    ) -> Vec<(String, String)> {
        let mut own: Vec<(String, String)> = ctx
            .payload
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        own.extend([
            ("x-toc-topic".into(), ctx.topic.clone()),
            ("x-toc-job-id".into(), ctx.job.id.clone()),
            ("x-toc-attempt".into(), ctx.job.attempts.to_string()),
            ("x-toc-fire-at".into(), ctx.job.fire_at.to_string()),
        ]);
        let keys = self.settings.keys_for(&ctx.topic);
        if !keys.is_empty() {
            let id = signing::message_id(&ctx.job);
            let ts = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            own.extend([
                (
                    "webhook-signature".into(),
                    signing::signature(&keys, &id, ts, body.unwrap_or_default()),
                ),
                ("webhook-id".into(), id),
                ("webhook-timestamp".into(), ts.to_string()),
            ]);
        }
        own
    }

    /// Sends the call to `url`, following up to `webhooks.max_redirects` redirects (each hop
    /// checked against the egress policy; the job's own headers go only to its own origin):
    /// the reply, or the outcome of a call that got none.
    async fn follow(
        &self,
        url: reqwest::Url,
        send: Send,
        what: &str,
        call: &tracing::Span,
    ) -> Result<reqwest::Response, Outcome> {
        let Send {
            mut method,
            mut body,
            own,
            timeout_ms,
        } = send;
        let hops = self.settings.max_redirects.min(settings::MAX_REDIRECTS);
        let (first, mut at, mut hop) = (url.clone(), url, 0);
        loop {
            let mut req = self
                .client
                .request(method.clone(), at.clone())
                .timeout(Duration::from_millis(timeout_ms));
            if same_origin(&first, &at) {
                for (k, v) in &own {
                    req = req.header(k, v);
                }
            }
            if let Some(b) = &body {
                req = req
                    .header("content-type", "application/json")
                    .body(b.clone());
            }
            let sent = req.send();
            let reply = match tracing::Instrument::instrument(sent, call.clone()).await {
                Ok(r) => r,
                Err(e) => return Err(failed_call(what, &e, timeout_ms)),
            };
            let location = reply
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok());
            let (true, Some(location)) = (reply.status().is_redirection() && hop < hops, location)
            else {
                return Ok(reply);
            };
            let next = match next_hop(&at, location) {
                Ok(next) => next,
                Err(why) => return Err(Outcome::dead(format!("{what}: {why}"))),
            };
            if let Err(refused) = self.egress.check_url(&next) {
                return Err(Outcome::dead(format!("{what}: {refused}")));
            }
            // 303, and 301 or 302 after a POST, go on as a GET without the body (as
            // browsers do); 307 and 308 keep the method and the body.
            let code = reply.status().as_u16();
            if code == 303 || (matches!(code, 301 | 302) && method == reqwest::Method::POST) {
                method = reqwest::Method::GET;
                body = None;
            }
            hop += 1;
            at = next;
        }
    }
}

/// What one webhook call sends, before its redirects.
struct Send {
    method: reqwest::Method,
    body: Option<Vec<u8>>,
    /// The headers only the job's own origin gets.
    own: Vec<(String, String)>,
    timeout_ms: u64,
}

/// A traced job's call is a client span of its trace, whose context the receiver gets;
/// with traces off, none (the context the job kept goes on as it came).
fn call_span(ctx: &JobContext<WebhookPayload>, method: &reqwest::Method) -> tracing::Span {
    if ctx.span.is_none() {
        return tracing::Span::none();
    }
    tracing::info_span!(
        parent: &ctx.span,
        "webhook",
        otel.name = %method,
        otel.kind = "client",
        http.request.method = %method,
        server.address = url_host(&ctx.payload.url).as_deref().unwrap_or(""),
        http.response.status_code = tracing::field::Empty,
    )
}

/// A call that got no reply: refused by the egress policy (dead at once, the only case told
/// apart), timed out, or failed to connect or to complete (retried). Nothing else of the
/// error is shown, so the dead letters tell no more about a network than the policy does.
fn failed_call(what: &str, e: &reqwest::Error, timeout_ms: u64) -> Outcome {
    if let Some(refused) = egress::refusal(e) {
        return Outcome::dead(format!("{what}: {refused}"));
    }
    if e.is_redirect() {
        return Outcome::dead(format!(
            "{what}: a redirect was refused (webhooks.max_redirects, or a hop to a scheme or address not allowed)"
        ));
    }
    if e.is_timeout() {
        Outcome::retry(format!("{what}: no reply within {timeout_ms} ms"))
    } else {
        Outcome::retry(format!(
            "{what}: the call failed (no connection, or it closed early)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(v: Value) -> Result<WebhookPayload, serde_json::Error> {
        serde_json::from_value(v)
    }

    #[test]
    fn only_http_and_https_urls_decode() {
        assert!(payload(json!({"url": "https://example.com/"})).is_ok());
        assert!(payload(json!({"url": "HTTP://example.com/"})).is_ok());
        for bad in [
            "file:///etc/passwd",
            "gopher://x/",
            "example.com",
            "ftp://x/",
        ] {
            let e = payload(json!({"url": bad})).unwrap_err().to_string();
            assert!(e.contains("http:// or https://"), "{bad}: {e}");
        }
    }

    #[test]
    fn admit_names_the_field_it_refuses() {
        let w = Webhook::default();
        let admit = |v: Value| w.admit(&payload(v).unwrap());
        assert!(admit(json!({"url": "https://example.com/hook"})).is_ok());
        assert!(admit(json!({"url": "https://example.com/", "timeout_ms": 30_000})).is_ok());
        let e = admit(json!({"url": "https://example.com/", "timeout_ms": 30_001})).unwrap_err();
        assert_eq!(
            e,
            "payload.timeout_ms: at most 30000 (webhooks.max_timeout_ms)"
        );
        let e = admit(json!({"url": "http://2130706433/"})).unwrap_err();
        assert!(
            e.starts_with("payload.url: the egress policy refused"),
            "{e}"
        );
        let e = admit(json!({"url": "http://[::1"})).unwrap_err();
        assert!(e.starts_with("payload.url: does not parse"), "{e}");
        let e = admit(json!({"url": "https://x.com/", "method": "NO PE"})).unwrap_err();
        assert!(e.starts_with("payload.method"), "{e}");
        for m in ["TRACE", "FOO", "CONNECT", "OPTIONS"] {
            let e = admit(json!({"url": "https://x.com/", "method": m})).unwrap_err();
            assert!(
                e.contains("one of GET, POST, PUT, PATCH, DELETE"),
                "{m}: {e}"
            );
        }
        assert!(admit(json!({"url": "https://x.com/", "method": "patch"})).is_ok());
        for h in [
            "Host",
            "content-length",
            "Webhook-Signature",
            "x-toc-attempt",
        ] {
            let e = admit(json!({"url": "https://x.com/", "headers": {h: "v"}})).unwrap_err();
            assert!(
                e.starts_with(&format!("payload.headers.{h}: set by the service")),
                "{e}"
            );
        }
        let e = admit(json!({"url": "https://x.com/", "headers": {"a": "b\nc"}})).unwrap_err();
        assert!(
            e.contains("not a valid header value") && !e.contains("b\nc"),
            "{e}"
        );
        let allowed = Webhook::new(WebhookSettings::allowing_loopback());
        assert!(
            allowed
                .admit(&payload(json!({"url": "http://127.0.0.1:9/"})).unwrap())
                .is_ok()
        );
    }

    #[test]
    fn a_hop_stays_on_http_never_goes_down_to_it_and_knows_its_origin() {
        let https = url::Url::parse("https://a.example/hook").unwrap();
        let http = url::Url::parse("http://a.example/hook").unwrap();
        assert_eq!(
            next_hop(&https, "/next").unwrap().as_str(),
            "https://a.example/next"
        );
        assert!(
            next_hop(&https, "http://a.example/")
                .unwrap_err()
                .contains("https down to http")
        );
        assert!(
            next_hop(&http, "ftp://a.example/")
                .unwrap_err()
                .contains("scheme")
        );
        assert_eq!(
            next_hop(&http, "https://b.example/").unwrap().as_str(),
            "https://b.example/"
        );
        let same = |a: &str, b: &str| {
            same_origin(&url::Url::parse(a).unwrap(), &url::Url::parse(b).unwrap())
        };
        assert!(same("https://a.example/x", "https://a.example:443/y?q"));
        assert!(!same("https://a.example/", "https://b.example/"));
        assert!(!same("http://a.example/", "https://a.example/"));
        assert!(!same("http://a.example/", "http://a.example:8080/"));
    }
}

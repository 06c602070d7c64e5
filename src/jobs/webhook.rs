//! `webhook`: calls a URL when the job fires. A 2xx reply is done; timeouts, connection
//! errors, 408, 429 and 5xx are retried with the topic's backoff; any other status sends the
//! job to the dead letters with the status in its error.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::job_type::{JobContext, JobHandler, Outcome};

const DEFAULT_TIMEOUT_MS: u64 = 10_000;

/// A webhook job: the HTTP call to make when it fires.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookPayload {
    /// The URL to call.
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
    #[serde(default, deserialize_with = "crate::http::body::integer::option")]
    pub timeout_ms: Option<u64>,
}

fn post() -> String {
    "POST".to_string()
}

/// The `webhook` job type: an HTTP call at the fire time; a failed call is retried.
pub struct Webhook {
    client: reqwest::Client,
}

impl Default for Webhook {
    fn default() -> Self {
        let client = reqwest::Client::builder()
            .user_agent(concat!("timeout-center/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("an HTTP client");
        Webhook { client }
    }
}

#[async_trait]
impl JobHandler for Webhook {
    type Payload = WebhookPayload;

    fn job_type(&self) -> &'static str {
        "webhook"
    }

    /// Above any request timeout a payload may ask for.
    fn timeout(&self) -> Duration {
        Duration::from_secs(300)
    }

    fn payload_schema(&self) -> Option<Value> {
        Some(serde_json::json!({
            "type": "object",
            "required": ["url"],
            "additionalProperties": false,
            "properties": {
                "url": {"type": "string"},
                "method": {"type": "string"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "body": {},
                "timeout_ms": {"type": ["integer", "null"], "minimum": 0, "maximum": i64::MAX}
            }
        }))
    }

    async fn handle(&self, ctx: JobContext<WebhookPayload>) -> Outcome {
        let p = &ctx.payload;
        let method = match reqwest::Method::from_bytes(p.method.to_ascii_uppercase().as_bytes()) {
            Ok(m) => m,
            Err(_) => return Outcome::dead(format!("invalid method {:?}", p.method)),
        };
        let timeout =
            Duration::from_millis(p.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS).min(290_000));
        let mut req = self.client.request(method, &p.url).timeout(timeout);
        for (k, v) in &p.headers {
            req = req.header(k, v);
        }
        req = req
            .header("x-toc-topic", &ctx.topic)
            .header("x-toc-job-id", &ctx.job.id)
            .header("x-toc-attempt", ctx.job.attempts.to_string());
        if let Some(body) = &p.body {
            req = req.json(body);
        }
        let reply = match req.send().await {
            Ok(r) => r,
            Err(e) if e.is_builder() => {
                return Outcome::dead(format!("invalid request to {:?}: {e}", p.url));
            }
            Err(e) => return Outcome::retry(format!("{} {}: {e}", p.method, p.url)),
        };
        let status = reply.status();
        ctx.emit(
            "webhook.called",
            json!({"url": p.url, "status": status.as_u16()}),
        );
        let code = status.as_u16();
        if status.is_success() {
            Outcome::Done
        } else if code == 408 || code == 429 || status.is_server_error() {
            Outcome::retry(format!("{} {} answered {status}", p.method, p.url))
        } else {
            Outcome::dead(format!("{} {} answered {status}", p.method, p.url))
        }
    }
}

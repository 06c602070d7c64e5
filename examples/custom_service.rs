//! The whole service with a job type of your own: the HTTP API, `/openapi.json`, the
//! dashboard, `/metrics`, the `toc` CLI and auth of `toc serve`, on the embedded store with
//! its journal (`./toc-data/`), and `send_reminder` beside the built-in types.
//!
//! ```sh
//! cargo run --release --example custom_service     # listens on 127.0.0.1:8080 (TOC_LISTEN)
//! curl -X PUT localhost:8080/v1/topics/reminders/jobs/r-1 -H 'content-type: application/json' \
//!   -d '{"type": "send_reminder", "delay_ms": 2000, "payload": {"user": "ada", "text": "stand-up"}}'
//! cargo run --release -- job put reminders r-2 --type send_reminder --in 5s \
//!   --payload '{"user": "bob", "text": "review"}'
//! cargo run --release -- events reminders         # reminder.sent, emitted by the handler
//! ```
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use timeout_center::serve::Service;
use timeout_center::{JobContext, JobHandler, Outcome};

#[derive(Deserialize)]
struct Reminder {
    user: String,
    text: String,
}

struct SendReminder;

#[async_trait]
impl JobHandler for SendReminder {
    type Payload = Reminder;

    fn job_type(&self) -> &'static str {
        "send_reminder"
    }

    fn payload_schema(&self) -> Option<serde_json::Value> {
        Some(json!({"type": "object", "required": ["user", "text"],
            "properties": {"user": {"type": "string"}, "text": {"type": "string"}}}))
    }

    async fn handle(&self, ctx: JobContext<Reminder>) -> Outcome {
        println!("remind {} to {:?}", ctx.payload.user, ctx.payload.text);
        ctx.emit("reminder.sent", json!({"user": ctx.payload.user}));
        Outcome::Done
    }
}

fn main() -> std::process::ExitCode {
    match Service::from_env() {
        Ok(service) => service.handler(SendReminder).run(),
        Err(e) => {
            eprintln!("custom_service: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

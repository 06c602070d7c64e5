//! The built-in job types, one file each. Registering one is one line below; an
//! application registers its own with `TimeoutCenter::builder(..).handler(MyType)`.

pub mod device_offline;
pub mod emit;
pub mod meeting_state;
pub mod pull;
pub mod webhook;

use crate::job_type::Handlers;

/// The built-in job types' names: every `toc serve` runs them, so a topic need not name
/// them in its `types`.
pub const BUILTIN: [&str; 5] = [
    emit::TYPE,
    webhook::TYPE,
    device_offline::TYPE,
    meeting_state::TYPE,
    pull::TYPE,
];

/// Whether `job_type` is a built-in type's name.
pub fn is_builtin(job_type: &str) -> bool {
    BUILTIN.contains(&job_type)
}

/// Registers the built-in job types: `emit`, `webhook`, `device_offline`, `meeting_state`,
/// `pull`.
/// `webhooks` sets the `webhook` type's egress policy and signing keys.
pub fn register_builtin(handlers: &mut Handlers, webhooks: &webhook::WebhookSettings) {
    handlers.register(emit::Emit);
    handlers.register(webhook::Webhook::new(webhooks.clone()));
    handlers.register(device_offline::DeviceOffline::default());
    handlers.register(meeting_state::MeetingState);
    handlers.register(pull::Pull);
}

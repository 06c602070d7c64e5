//! What every actor of one runtime shares: the store, the job types, the clock, the settings
//! and the metrics.

use std::collections::HashMap;
use std::sync::Arc;

use actix::Addr;

use super::handler::HandlerActor;
use crate::config::RuntimeSettings;
use crate::job_type::ErasedHandler;
use crate::metrics::Metrics;
use crate::store::SharedStore;
use crate::time::SharedClock;

/// A registered job type and the actor that runs it.
pub(crate) struct TypeEntry {
    pub handler: Arc<dyn ErasedHandler>,
    pub actor: Addr<HandlerActor>,
}

pub(crate) struct Runtime {
    pub store: SharedStore,
    pub types: HashMap<&'static str, TypeEntry>,
    pub clock: SharedClock,
    pub settings: RuntimeSettings,
    pub metrics: Arc<Metrics>,
    /// This instance's name among those sharing the store (`runtime.instance`, or made).
    pub instance: String,
}

/// This instance's name: `runtime.instance`, or one made from host, process and a random
/// part.
pub(crate) fn instance_name(settings: &RuntimeSettings) -> String {
    match settings.instance.as_str() {
        "" => made_name(),
        name => name.to_string(),
    }
}

/// A name for this instance when `runtime.instance` gives none: host, process and a random
/// part, so that two processes on one host, or one restarted, never share a name.
fn made_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let host = if host.is_empty() {
        "toc".to_string()
    } else {
        host
    };
    format!(
        "{host}-{}-{:04x}",
        std::process::id(),
        rand::random::<u16>()
    )
}

//! What every actor of one runtime shares: the store, the job types, the clock, the settings
//! and the metrics.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::config::RuntimeSettings;
use crate::job_type::ErasedHandler;
use crate::metrics::Metrics;
use crate::store::SharedStore;
use crate::time::SharedClock;

/// A registered job type, and its bound on runs at once, which its actors (one per slot-actor
/// thread: `super::handler::start_local`) share.
pub(crate) struct TypeEntry {
    pub handler: Arc<dyn ErasedHandler>,
    pub permits: Arc<Semaphore>,
}

impl TypeEntry {
    pub(crate) fn new(handler: Arc<dyn ErasedHandler>) -> Self {
        let permits = Arc::new(Semaphore::new(handler.concurrency()));
        TypeEntry { handler, permits }
    }
}

pub(crate) struct Runtime {
    pub store: SharedStore,
    pub types: HashMap<&'static str, TypeEntry>,
    pub clock: SharedClock,
    pub settings: RuntimeSettings,
    pub metrics: Arc<Metrics>,
    /// This instance's name among those sharing the store (`runtime.instance`, or made).
    pub instance: String,
    /// Counts slot actors fenced or stopped: the keeper's ownership round looks at every
    /// slot again only when this moved (or the membership changed, or a backstop round).
    pub slot_changes: std::sync::atomic::AtomicU64,
    /// Rung when a run here ends its room on a flow key, for the slots waiting on it.
    pub flow_bells: super::flow_gate::FlowBells,
}

/// This instance's name: `runtime.instance`, or one made from host, process and a random
/// part.
pub(crate) fn instance_name(settings: &RuntimeSettings) -> String {
    match settings.instance.as_str() {
        "" => made_name(),
        name => name.to_string(),
    }
}

/// A name for this instance when `runtime.instance` gives none and nothing stable names it
/// (a library user's center): host, process and a random part, so that two processes on one
/// host never share a name.
fn made_name() -> String {
    format!(
        "{}-{}-{:04x}",
        host(),
        std::process::id(),
        rand::random::<u16>()
    )
}

/// `toc serve`'s name when `runtime.instance` gives none: host and HTTP port, the same at
/// each start, so that a restarted process takes its predecessor's slots over at once (its
/// owner leases carry the name and a new incarnation: `store::owner_id`) rather than wait
/// for them to run out.
pub(crate) fn served_name(port: u16) -> String {
    format!("{}-{port}", host())
}

/// The host's name, in the characters an instance name may hold ("toc" when unknown).
fn host() -> String {
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
    if host.is_empty() {
        "toc".to_string()
    } else {
        host
    }
}

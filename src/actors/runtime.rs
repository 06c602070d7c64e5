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

/// A registered job type, and its bounds on runs at once (in all, per tenant, per topic, per
/// flow key),
/// which its actors (one per slot-actor thread: `super::handler::start_local`) share.
pub(crate) struct TypeEntry {
    pub handler: Arc<dyn ErasedHandler>,
    pub permits: Arc<Semaphore>,
    pub per_topic: Option<Arc<Shares>>,
    pub per_key: Option<Arc<Shares>>,
    pub per_tenant: Option<Arc<Shares>>,
}

impl TypeEntry {
    pub(crate) fn new(handler: Arc<dyn ErasedHandler>) -> Self {
        let permits = Arc::new(Semaphore::new(handler.concurrency()));
        TypeEntry {
            per_topic: handler.share_per_topic().map(|n| Arc::new(Shares::new(n))),
            per_key: handler.share_per_key().map(|n| Arc::new(Shares::new(n))),
            per_tenant: handler.share_per_tenant().map(|n| Arc::new(Shares::new(n))),
            handler,
            permits,
        }
    }
}

/// A bound on runs at once for each of many names (topics, or a topic's flow keys): a
/// semaphore per name, made when a run of it first waits and dropped when none holds it, so
/// the map holds only names with runs now.
pub(crate) struct Shares {
    each: usize,
    by_name: std::sync::Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Shares {
    pub(crate) fn new(each: usize) -> Self {
        Shares {
            each,
            by_name: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// `name`'s semaphore, made if none holds it.
    pub(crate) fn of(&self, name: &str) -> Arc<Semaphore> {
        let mut map = self.by_name.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(name.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.each)))
            .clone()
    }

    /// Gives back `sem`, `name`'s, whose permit was dropped: forgotten when none holds it.
    pub(crate) fn done(&self, name: &str, sem: Arc<Semaphore>) {
        let mut map = self.by_name.lock().unwrap_or_else(|p| p.into_inner());
        drop(sem);
        if map.get(name).is_some_and(|s| Arc::strong_count(s) == 1) {
            map.remove(name);
        }
    }

    /// Names held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.by_name.lock().map_or(0, |m| m.len())
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
    pub flow_bells: super::slot::flow_gate::FlowBells,
}

impl Runtime {
    /// The job types this instance runs, sorted: what it announces in the registry.
    pub(crate) fn type_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.types.keys().map(|t| t.to_string()).collect();
        names.sort();
        names
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A name's share bounds its runs, other names are not held back, and a name none holds
    /// is forgotten.
    #[tokio::test]
    async fn a_share_bounds_one_name_and_is_forgotten_when_free() {
        let shares = Shares::new(2);
        let a = shares.of("a");
        let p1 = a.clone().acquire_owned().await.unwrap();
        let p2 = a.clone().acquire_owned().await.unwrap();
        assert!(a.clone().try_acquire_owned().is_err(), "a's share is full");
        let b = shares.of("b");
        assert!(b.clone().try_acquire_owned().is_ok(), "b is not held back");
        shares.done("b", b);
        assert_eq!(shares.held(), 1, "b forgotten");
        drop((p1, p2));
        shares.done("a", a);
        assert_eq!(shares.held(), 0, "a forgotten once free");
    }
}

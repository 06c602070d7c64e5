//! What every actor of one runtime shares: the store, the job types, the clock, the settings
//! and the metrics.

use std::collections::HashMap;
use std::sync::Arc;

use actix::Addr;

use super::handler::HandlerActor;
use crate::config::RuntimeSettings;
use crate::handler::ErasedHandler;
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
}

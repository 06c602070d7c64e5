//! The keeper's doubling sweep: a topic draining from a doubling is looked through for old
//! copies until none is left, and then marked drained (`Store::sweep`).

use std::sync::Arc;

use actix::prelude::*;

use super::SlotKeeper;
use crate::topic::TopicConfig;

impl SlotKeeper {
    /// Looks for a doubled topic's old copies; the topic is marked drained when none is
    /// left, and the next discovery serves it so.
    pub(super) fn sweep(&self, ctx: &mut Context<Self>, topic: &Arc<TopicConfig>) {
        let (store, t) = (self.rt.store.clone(), Arc::clone(topic));
        ctx.spawn(
            async move {
                let topic = &t.name;
                match store.sweep(&t).await {
                    Ok(None) => tracing::info!(%topic, "the doubled topic's old slots hold no old copy: drained"),
                    Ok(Some(_)) => {}
                    Err(e) => tracing::warn!(%topic, error = %e, "could not sweep for old copies"),
                }
            }
            .into_actor(self),
        );
    }
}

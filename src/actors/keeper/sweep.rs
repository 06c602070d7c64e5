//! The keeper's doubling sweep: a topic draining from a doubling is looked through for old
//! copies until none is left, and then marked drained (`Store::sweep`).

use actix::prelude::*;

use super::SlotKeeper;

impl SlotKeeper {
    /// Looks for a doubled topic's old copies; the topic is marked drained when none is
    /// left, and the next discovery serves it so.
    pub(super) fn sweep(&self, ctx: &mut Context<Self>, topic: &str) {
        let (store, topic) = (self.rt.store.clone(), topic.to_string());
        ctx.spawn(
            async move {
                match store.sweep(&topic).await {
                    Ok(None) => tracing::info!(%topic, "the doubled topic's old slots hold no old copy: drained"),
                    Ok(Some(_)) => {}
                    Err(e) => tracing::warn!(%topic, error = %e, "could not sweep for old copies"),
                }
            }
            .into_actor(self),
        );
    }
}

//! The store's membership: the registry of instances and each slot's owner lease.

use crate::error::Result;
use crate::store::engine::{Member, Ownership};
use crate::time::Millis;
use crate::topic::TopicConfig;
use crate::validate;

use super::Store;

impl Store {
    /// Heartbeat of `instance`, which runs the job types `types`, in the registry of
    /// instances sharing the store, valid for `ttl_ms` (0: the instance leaves); answers the
    /// live instances with the types each runs, sorted by name. An engine that is never
    /// shared answers this one alone.
    pub(crate) async fn register(
        &self,
        instance: &str,
        types: &[String],
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Vec<Member>> {
        validate::instance(instance)?;
        for t in types {
            validate::job_type(t)?;
        }
        let mut live = self.engine.register(instance, types, now, ttl_ms).await?;
        for m in &mut live {
            m.types.sort();
        }
        live.sort();
        Ok(live)
    }

    /// Takes or renews the owner lease of a slot for `ttl_ms`, for `instance`: an owner id
    /// (`store::owner_id`, or a plain name). A new owner gets a fence above every earlier
    /// one; an owner renewing keeps its own; a lease of the same name under another
    /// incarnation (a restarted process's predecessor) is taken over at once.
    pub(crate) async fn own(
        &self,
        t: &TopicConfig,
        slot: u32,
        instance: &str,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Ownership> {
        validate::owner(instance)?;
        Self::check_slot(t, slot)?;
        self.engine.own(t, slot, instance, now, ttl_ms.max(1)).await
    }

    /// A slot's next time, if any: its earliest job's fire time or run's lease deadline (the
    /// safety net's read).
    pub(crate) async fn head(&self, topic: &TopicConfig, slot: u32) -> Result<Option<Millis>> {
        self.engine.head(topic, slot).await
    }

    /// Gives up `instance`'s owner lease of a slot (a handoff); false when it held none.
    pub(crate) async fn disown(&self, t: &TopicConfig, slot: u32, instance: &str) -> Result<bool> {
        Self::check_slot(t, slot)?;
        self.engine.disown(t, slot, instance).await
    }
}

//! Membership in memory: one process, so it is the only instance and owns every slot.

use async_trait::async_trait;

use crate::error::Result;
use crate::store::engine::Membership;
use crate::store::engine::{Member, Ownership};
use crate::time::Millis;
use crate::topic::TopicConfig;

use super::MemoryEngine;

#[async_trait]
impl Membership for MemoryEngine {
    async fn register(
        &self,
        instance: &str,
        types: &[String],
        _: Millis,
        _: u64,
    ) -> Result<Vec<Member>> {
        // Never shared: this process is every instance there is.
        Ok(vec![Member {
            name: instance.to_string(),
            types: types.to_vec(),
        }])
    }

    async fn own(
        &self,
        topic: &TopicConfig,
        slot: u32,
        instance: &str,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Ownership> {
        let ttl = crate::num::millis(ttl_ms);
        self.with_slot(topic, slot, false, |s| s.own(instance, now, ttl))
            .await
    }

    async fn disown(&self, topic: &TopicConfig, slot: u32, instance: &str) -> Result<bool> {
        self.with_slot(topic, slot, false, |s| s.disown(instance))
            .await
    }

    async fn head(&self, topic: &TopicConfig, slot: u32) -> Result<Option<Millis>> {
        self.with_slot(topic, slot, false, |s| s.next_time()).await
    }
}

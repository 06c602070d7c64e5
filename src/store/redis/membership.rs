//! Membership on Redis: the registry of instances (`register.lua`, `toc:instances`) and each
//! slot's owner lease with its fence (`own.lua`, `disown.lua`, the slot's `owner` hash).

use async_trait::async_trait;
use redis::aio::ConnectionLike;

use super::RedisEngine;
use super::scripts::{Disown, Own, Register};
use crate::error::Result;
use crate::store::engine::Membership;
use crate::store::engine::{Member, Ownership};
use crate::store::keys::SlotKeys;
use crate::time::Millis;
use crate::topic::TopicConfig;

#[async_trait]
impl<C> Membership for RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn register(
        &self,
        instance: &str,
        types: &[String],
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Vec<Member>> {
        self.run(Register {
            instance,
            types,
            now,
            ttl_ms,
        })
        .await
    }

    async fn own(
        &self,
        topic: &TopicConfig,
        slot: u32,
        instance: &str,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Ownership> {
        self.run(Own {
            topic,
            slot,
            instance,
            now,
            ttl_ms,
        })
        .await
    }

    async fn disown(&self, topic: &TopicConfig, slot: u32, instance: &str) -> Result<bool> {
        self.run(Disown {
            topic,
            slot,
            instance,
        })
        .await
    }

    async fn head(&self, topic: &TopicConfig, slot: u32) -> Result<Option<Millis>> {
        let keys = SlotKeys::new(&topic.name, slot);
        let (due, run): (Vec<(String, f64)>, Vec<(String, f64)>) = redis::pipe()
            .zrange_withscores(&keys.due, 0, 0)
            .zrange_withscores(&keys.run, 0, 0)
            .query_async(&mut self.conn())
            .await?;
        // The run set's padding member (score +inf, see pump.lua) is no run.
        let first = |set: &[(String, f64)]| {
            set.first()
                .filter(|(_, s)| s.is_finite())
                .map(|(_, s)| crate::num::float_int(*s))
        };
        Ok(match (first(&due), first(&run)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }
}

//! A topic's fire rate limit in memory: one bucket per topic (`store::rate::Bucket`), not
//! journaled (a restart starts it full).

use std::sync::PoisonError;

use async_trait::async_trait;

use super::MemoryEngine;
use crate::error::Result;
use crate::store::engine::FireRate;
use crate::store::rate::{Bucket, Grant};
use crate::time::Millis;
use crate::topic::TopicConfig;

#[async_trait]
impl FireRate for MemoryEngine {
    async fn take_fires(
        &self,
        topic: &TopicConfig,
        rate: u32,
        want: u32,
        now: Millis,
    ) -> Result<Grant> {
        let mut rates = self.rates.lock().unwrap_or_else(PoisonError::into_inner);
        let bucket = rates
            .entry(topic.name.clone())
            .or_insert_with(|| Bucket::full(rate, now));
        Ok(bucket.take(rate, want, now))
    }

    async fn give_back_fires(
        &self,
        topic: &TopicConfig,
        rate: u32,
        n: u32,
        now: Millis,
    ) -> Result<()> {
        let mut rates = self.rates.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(bucket) = rates.get_mut(&topic.name) {
            bucket.give_back(rate, n, now);
        }
        Ok(())
    }
}

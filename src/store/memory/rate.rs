//! A topic's fire rate limit in memory: one bucket per topic (`store::rate::Bucket`), not
//! journaled (a restart starts it full); and each flow key's counters (`store::flow::Book`),
//! likewise not journaled.

use std::sync::PoisonError;

use async_trait::async_trait;

use super::MemoryEngine;
use crate::error::Result;
use crate::flow::FlowLimits;
use crate::store::engine::{FireRate, FlowControl};
use crate::store::flow::{FlowAsk, FlowGrant, FlowState};
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

#[async_trait]
impl FlowControl for MemoryEngine {
    async fn flow_take(
        &self,
        topic: &TopicConfig,
        limits: &FlowLimits,
        ask: &FlowAsk<'_>,
        now: Millis,
    ) -> Result<FlowGrant> {
        let mut flows = self.flows.lock().unwrap_or_else(PoisonError::into_inner);
        let book = flows
            .entry((topic.name.clone(), ask.key.to_string()))
            .or_default();
        Ok(book.take(limits, ask, now))
    }

    async fn flow_release(&self, topic: &TopicConfig, key: &str, runs: &[String]) -> Result<()> {
        let mut flows = self.flows.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(book) = flows.get_mut(&(topic.name.clone(), key.to_string())) {
            book.release(runs);
        }
        Ok(())
    }

    async fn flow_state(
        &self,
        topic: &TopicConfig,
        key: &str,
        limits: &FlowLimits,
        now: Millis,
    ) -> Result<FlowState> {
        let mut flows = self.flows.lock().unwrap_or_else(PoisonError::into_inner);
        let k = (topic.name.clone(), key.to_string());
        let Some(book) = flows.get_mut(&k) else {
            return Ok(FlowState::default());
        };
        let state = book.state(limits, now);
        if book.is_idle() {
            flows.remove(&k);
        }
        Ok(state)
    }
}

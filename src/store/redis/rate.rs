//! A topic's fire rate limit on Redis: its bucket (`rate.lua`, the topic's `rate` key); and
//! each flow key's counters (`flow.lua`, in the hash tag of the key's slot).

use async_trait::async_trait;
use redis::aio::ConnectionLike;

use super::RedisEngine;
use super::scripts::{Flow, FlowOp, FlowRead, Rate};
use crate::error::Result;
use crate::flow::FlowLimits;
use crate::store::engine::{FireRate, FlowControl};
use crate::store::flow::{FlowAsk, FlowGrant, FlowState};
use crate::store::rate::Grant;
use crate::time::Millis;
use crate::topic::TopicConfig;

#[async_trait]
impl<C> FireRate for RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// On the server's clock: `now` is not sent.
    async fn take_fires(
        &self,
        topic: &TopicConfig,
        rate: u32,
        want: u32,
        _now: Millis,
    ) -> Result<Grant> {
        self.run(Rate {
            topic,
            take: true,
            rate,
            n: want,
        })
        .await
    }

    async fn give_back_fires(
        &self,
        topic: &TopicConfig,
        rate: u32,
        n: u32,
        _now: Millis,
    ) -> Result<()> {
        self.run(Rate {
            topic,
            take: false,
            rate,
            n,
        })
        .await
        .map(|_| ())
    }
}

#[async_trait]
impl<C> FlowControl for RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// On the server's clock: `now` is not sent.
    async fn flow_take(
        &self,
        topic: &TopicConfig,
        limits: &FlowLimits,
        ask: &FlowAsk<'_>,
        _now: Millis,
    ) -> Result<FlowGrant> {
        let (granted, retry_in_ms) = self
            .run(Flow {
                topic,
                key: ask.key,
                limits: Some(limits),
                op: FlowOp::Take(ask),
            })
            .await?;
        Ok(FlowGrant {
            granted: crate::num::to_u32(usize::try_from(granted).unwrap_or(0)),
            retry_in_ms: crate::num::unsigned(retry_in_ms),
        })
    }

    async fn flow_release(&self, topic: &TopicConfig, key: &str, runs: &[String]) -> Result<()> {
        self.run(Flow {
            topic,
            key,
            limits: None,
            op: FlowOp::Release(runs),
        })
        .await
        .map(|_| ())
    }

    async fn flow_state(
        &self,
        topic: &TopicConfig,
        key: &str,
        limits: &FlowLimits,
        _now: Millis,
    ) -> Result<FlowState> {
        self.run(FlowRead { topic, key, limits }).await
    }
}

//! A topic's fire rate limit on Redis: its bucket (`rate.lua`, the topic's `rate` key).

use async_trait::async_trait;
use redis::aio::ConnectionLike;

use super::RedisEngine;
use super::scripts::Rate;
use crate::error::Result;
use crate::store::engine::FireRate;
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

//! Topics' settings on Redis: one hash (`toc:topics`, name → settings JSON), cached in
//! process; a change is a compare-and-set (`topic_put.lua`), and a doubling marks the old
//! slots (`layout.lua`).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use redis::AsyncCommands;
use redis::aio::ConnectionLike;

use super::scripts::{Layout, TopicPut};
use super::{RedisEngine, parse_topic};
use crate::error::{Error, Result};
use crate::store::engine::TopicSettings;
use crate::store::keys::{SlotKeys, TOPICS};
use crate::store::topic_policy::{check_update, fresh};
use crate::topic::TopicConfig;

/// How often a topic change is decided again when the settings changed under it.
const PUT_TRIES: usize = 16;

#[async_trait]
impl<C> TopicSettings for RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn find_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        match self.topics.get(name) {
            Some(t) => Ok(Some(t)),
            None => self.load_topic(name).await,
        }
    }

    async fn create_topic(&self, config: TopicConfig) -> Result<Arc<TopicConfig>> {
        let config = fresh(config);
        let json = serde_json::to_string(&config).expect("topic config serialises");
        // Another instance may create it at the same moment: the first one wins and both
        // read back the same settings.
        let mut hsetnx = redis::cmd("HSETNX");
        hsetnx.arg(TOPICS).arg(&config.name).arg(json);
        let _: bool = self
            .write(&hsetnx, &format!("the settings of topic {:?}", config.name))
            .await?;
        self.load_topic(&config.name).await?.ok_or_else(|| {
            Error::Corrupt(format!(
                "topic {:?} vanished as it was created",
                config.name
            ))
        })
    }

    async fn put_topic(&self, config: TopicConfig) -> Result<Arc<TopicConfig>> {
        // Read, decide, then set only if nothing changed since (another instance, or a
        // call of this one, may be changing the topic at the same moment).
        for _ in 0..PUT_TRIES {
            let old: Option<String> = self.conn().hget(TOPICS, &config.name).await?;
            let next = match &old {
                Some(old) => check_update(&parse_topic(old)?, config.clone())?,
                None => fresh(config.clone()),
            };
            let json = serde_json::to_string(&next).expect("topic config serialises");
            let put = TopicPut {
                name: &config.name,
                old: old.as_deref().unwrap_or(""),
                new: &json,
            };
            if self.run(put).await? {
                return Ok(self.topics.insert(next));
            }
        }
        Err(Error::TopicConflict {
            topic: config.name.clone(),
            message: "the topic's settings kept changing while this change was applied; \
                      try again"
                .to_string(),
        })
    }

    async fn reload_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        self.load_topic(name).await
    }

    async fn mark_layout(&self, topic: &TopicConfig, slot: u32) -> Result<()> {
        self.run(Layout { topic, slot }).await
    }

    async fn delete_topic(&self, topic: &TopicConfig) -> Result<()> {
        // The settings first, so no instance that reads them anew writes to the topic again;
        // then each slot's keys (one hash tag: one DEL per slot, on its node of a Cluster).
        let place = format!("topic {:?}", topic.name);
        let mut hdel = redis::cmd("HDEL");
        hdel.arg(TOPICS).arg(&topic.name);
        let _: i64 = self.write(&hdel, &place).await?;
        self.topics.remove(&topic.name);
        let slots = topic.slots.max(topic.draining_from.unwrap_or(0));
        let dels = (0..slots).map(|slot| {
            let mut del = redis::cmd("DEL");
            del.arg(SlotKeys::new(&topic.name, slot).all().to_vec());
            let place = &place;
            async move { self.write::<i64>(&del, place).await.map(|_| ()) }
        });
        for r in futures_util::future::join_all(dels).await {
            r?;
        }
        let mut del = redis::cmd("DEL");
        del.arg(crate::store::keys::rate_key(&topic.name));
        let _: i64 = self.write(&del, &place).await?;
        Ok(())
    }

    fn forget_topic(&self, name: &str) {
        self.topics.remove(name);
    }

    async fn topics(&self) -> Result<Vec<Arc<TopicConfig>>> {
        let all: BTreeMap<String, String> = self.conn().hgetall(TOPICS).await?;
        all.values()
            .map(|json| parse_topic(json).map(|c| self.topics.insert(c)))
            .collect()
    }
}

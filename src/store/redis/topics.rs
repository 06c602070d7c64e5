//! Topics' settings on Redis: one hash (`toc:topics`, name → settings JSON), cached in
//! process; a change is a compare-and-set (`topic_put.lua`), and a doubling marks the old
//! slots (`layout.lua`).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use redis::AsyncCommands;
use redis::aio::ConnectionLike;

use super::flows::stored_json;
use super::scripts::{Layout, TopicPut};
use super::{RedisEngine, parse_topic};
use crate::error::{Error, Result};
use crate::flow::FlowLimits;
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
        let json = stored_json(&config);
        // Another instance may create it at the same moment: the first one wins and both
        // read back the same settings.
        let mut hsetnx = redis::cmd("HSETNX");
        hsetnx.arg(TOPICS).arg(&config.name).arg(json);
        let made: bool = self
            .write(&hsetnx, &format!("the settings of topic {:?}", config.name))
            .await?;
        if made {
            // Keys' own limits a library caller gave the new topic: into its hash.
            self.move_old_flows(&config).await?;
        }
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
                Some(old) => {
                    // Keys' own limits change by `put_flow` only, and live in their hash;
                    // an earlier build's, kept in the JSON, move there first.
                    let old = parse_topic(old)?;
                    self.move_old_flows(&old).await?;
                    check_update(&old, config.clone())?
                }
                None => fresh(config.clone()),
            };
            let json = stored_json(&next);
            let put = TopicPut {
                name: &config.name,
                old: old.as_deref().unwrap_or(""),
                new: &json,
            };
            if self.run(put).await? {
                if old.is_none() {
                    self.move_old_flows(&next).await?;
                }
                return self
                    .load_topic(&config.name)
                    .await?
                    .ok_or_else(|| Error::TopicNotFound(config.name.clone()));
            }
        }
        Err(Error::TopicConflict {
            topic: config.name.clone(),
            message: "the topic's settings kept changing while this change was applied; \
                      try again"
                .to_string(),
        })
    }

    async fn put_flow(
        &self,
        name: &str,
        key: &str,
        limits: Option<FlowLimits>,
    ) -> Result<(Arc<TopicConfig>, Option<FlowLimits>)> {
        // An earlier build's keys, kept in the topic's JSON, move to the hash first, so a
        // key removed from the hash is not read back from the JSON.
        for _ in 0..PUT_TRIES {
            let Some(old) = self
                .conn()
                .hget::<_, _, Option<String>>(TOPICS, name)
                .await?
            else {
                return Err(Error::TopicNotFound(name.to_string()));
            };
            let parsed = parse_topic(&old)?;
            if parsed.flows.is_empty() {
                let before = self.set_flow(name, key, limits).await?;
                let config = self
                    .load_topic(name)
                    .await?
                    .ok_or_else(|| Error::TopicNotFound(name.to_string()))?;
                return Ok((config, before));
            }
            self.move_old_flows(&parsed).await?;
            let json = stored_json(&parsed);
            let _: bool = self
                .run(TopicPut {
                    name,
                    old: &old,
                    new: &json,
                })
                .await?;
        }
        Err(Error::TopicConflict {
            topic: name.to_string(),
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
        self.drop_flows(&topic.name).await
    }

    fn forget_topic(&self, name: &str) {
        self.topics.remove(name);
    }

    async fn topics(&self) -> Result<Vec<Arc<TopicConfig>>> {
        let all: BTreeMap<String, String> = self.conn().hgetall(TOPICS).await?;
        let revs = self.flow_revs().await?;
        // A topic's keys are read again only when their revision moved since the last read.
        let each = all.iter().map(|(name, json)| {
            let rev = revs.get(name).copied();
            async move { self.with_flows(parse_topic(json)?, rev).await }
        });
        futures_util::future::join_all(each)
            .await
            .into_iter()
            .collect()
    }
}

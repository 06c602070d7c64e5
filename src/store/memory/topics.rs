//! Topics' settings in memory: each topic's slots under a lock, its settings beside them;
//! a doubling builds a longer list around the same slots.

use std::sync::{Arc, PoisonError};

use async_trait::async_trait;

use super::journal::Op;
use crate::error::{Error, Result};
use crate::store::engine::TopicSettings;
use crate::store::topic_policy::{check_update, fresh};
use crate::topic::TopicConfig;

use super::{MemoryEngine, grown_topic, new_topic};

#[async_trait]
impl TopicSettings for MemoryEngine {
    async fn find_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        match self.slots_of(name) {
            Ok(t) => Ok(Some(t.config())),
            Err(Error::TopicNotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn create_topic(&self, config: TopicConfig) -> Result<Arc<TopicConfig>> {
        self.check_writable()?;
        let mut topics = self.topics.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = topics.get(&config.name) {
            return Ok(t.config());
        }
        let config = fresh(config);
        self.journal(&[Op::Topic {
            config: config.clone(),
        }])?;
        let t = new_topic(config, self.journal.is_some());
        let config = t.config();
        topics.insert(config.name.clone(), t);
        Ok(config)
    }

    async fn put_topic(&self, config: TopicConfig) -> Result<Arc<TopicConfig>> {
        self.check_writable()?;
        let mut topics = self.topics.write().unwrap_or_else(PoisonError::into_inner);
        let existing = topics.get(&config.name).cloned();
        let config = match &existing {
            Some(t) => check_update(&t.config(), config)?,
            None => fresh(config),
        };
        self.journal(&[Op::Topic {
            config: config.clone(),
        }])?;
        match existing {
            Some(t) if t.slots.len() == config.slots as usize => {
                let config = Arc::new(config);
                *t.config.write().unwrap_or_else(PoisonError::into_inner) = config.clone();
                Ok(config)
            }
            _ => {
                // New, or doubled: the same slots, then new empty ones.
                let kept = existing.map(|t| t.slots.clone()).unwrap_or_default();
                let t = grown_topic(&kept, config, self.journal.is_some());
                let config = t.config();
                topics.insert(config.name.clone(), t);
                Ok(config)
            }
        }
    }

    async fn topics(&self) -> Result<Vec<Arc<TopicConfig>>> {
        let topics = self.topics.read().unwrap_or_else(PoisonError::into_inner);
        Ok(topics.values().map(|t| t.config()).collect())
    }

    async fn delete_topic(&self, topic: &TopicConfig) -> Result<()> {
        self.check_writable()?;
        let mut topics = self.topics.write().unwrap_or_else(PoisonError::into_inner);
        self.journal(&[Op::Drop {
            topic: topic.name.clone(),
        }])?;
        topics.remove(&topic.name);
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&topic.name);
        self.rates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&topic.name);
        Ok(())
    }
}

//! Topics' settings in memory: each topic's slots under a lock, its settings beside them;
//! a doubling builds a longer list around the same slots.

use std::sync::{Arc, PoisonError};

use async_trait::async_trait;

use super::journal::Op;
use crate::error::{Error, Result};
use crate::flow::FlowLimits;
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
            // Keys' own limits change by `put_flow` only: what the caller read may be older.
            Some(t) => TopicConfig {
                flows: t.config().flows.clone(),
                ..check_update(&t.config(), config)?
            },
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

    async fn put_flow(
        &self,
        name: &str,
        key: &str,
        limits: Option<FlowLimits>,
    ) -> Result<(Arc<TopicConfig>, Option<FlowLimits>)> {
        self.check_writable()?;
        // The topics' write lock: a topic change and a key's change are made one at a time.
        let topics = self.topics.write().unwrap_or_else(PoisonError::into_inner);
        let t = topics
            .get(name)
            .cloned()
            .ok_or_else(|| Error::TopicNotFound(name.to_string()))?;
        if limits.is_none() && !t.config().flows.contains_key(key) {
            return Ok((t.config(), None));
        }
        let mut config = (*t.config()).clone();
        let before = set_flow(&mut config, key, limits)?;
        self.journal(&[Op::Flow {
            topic: name.to_string(),
            key: key.to_string(),
            limits,
        }])?;
        let config = Arc::new(config);
        *t.config.write().unwrap_or_else(PoisonError::into_inner) = config.clone();
        Ok((config, before))
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

/// Sets or removes a key's own limits in `config` (a change, or its replay), refusing a new
/// key past `flow::MAX_FLOW_KEYS`; answers the key's limits before.
pub(super) fn set_flow(
    config: &mut TopicConfig,
    key: &str,
    limits: Option<FlowLimits>,
) -> Result<Option<FlowLimits>> {
    crate::flow::check_key(key)?;
    match limits {
        Some(limits) => {
            limits.validate_own("flow")?;
            if !config.flows.contains_key(key) && config.flows.len() >= crate::flow::MAX_FLOW_KEYS {
                return Err(crate::flow::too_many_keys(&config.name));
            }
            Ok(config.flows.insert(key.to_string(), limits))
        }
        None => Ok(config.flows.remove(key)),
    }
}

//! Topics in a store: how a store treats them ([`StoreOptions`]: auto-creation and the
//! defaults), the rule for changing one ([`check_update`]), and the cache the Redis engine
//! keeps of settings it has read ([`TopicCache`]). The engine keeps the settings; this decides
//! what is allowed.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::error::{Error, Result};
use crate::topic::TopicConfig;
use crate::validate::topic_name;

/// How a store treats topics.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Create a topic with `topic_defaults` the first time it is used.
    pub auto_create_topics: bool,
    /// Settings of an auto-created topic (its name aside).
    pub topic_defaults: TopicConfig,
    /// About how many entries a topic's event stream keeps (the oldest are trimmed).
    pub events_max_len: usize,
    /// About how many bytes a topic's event stream keeps on the memory engine (the oldest
    /// are trimmed; on Redis its `maxmemory` bounds them).
    pub events_max_bytes: usize,
    /// About how many bytes every topic's event streams keep together on the memory engine
    /// (`runtime.events_max_bytes_total`): past it a topic's appends trim its own oldest.
    pub events_max_bytes_total: usize,
    /// Most topics the store may hold (`limits.max_topics`); `None`: no limit (the
    /// library's default; the service sets one).
    pub max_topics: Option<usize>,
    /// Most slots of every topic together (`limits.max_total_slots`); `None`: no limit.
    pub max_total_slots: Option<u64>,
    /// Most jobs of one topic (`limits.max_jobs_per_topic`); `None`: no limit.
    pub max_jobs_per_topic: Option<u64>,
    /// Most bytes of one topic's job records (`limits.max_bytes_per_topic`); `None`: no
    /// limit.
    pub max_bytes_per_topic: Option<u64>,
    /// Most topics one tenant may make (`limits.max_topics_per_tenant`); `None`: no limit.
    pub max_topics_per_tenant: Option<usize>,
    /// Most slots of one tenant's topics together (`limits.max_slots_per_tenant`); `None`:
    /// no limit.
    pub max_slots_per_tenant: Option<u64>,
    /// Most jobs of one tenant's topics together (`limits.max_jobs_per_tenant`); `None`: no
    /// limit.
    pub max_jobs_per_tenant: Option<u64>,
    /// Most bytes of one tenant's job records (`limits.max_bytes_per_tenant`); `None`: no
    /// limit.
    pub max_bytes_per_tenant: Option<u64>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            auto_create_topics: true,
            topic_defaults: TopicConfig::default(),
            events_max_len: 100_000,
            events_max_bytes: 64 << 20,
            events_max_bytes_total: usize::MAX,
            max_topics: None,
            max_total_slots: None,
            max_jobs_per_topic: None,
            max_topics_per_tenant: None,
            max_slots_per_tenant: None,
            max_bytes_per_topic: None,
            max_jobs_per_tenant: None,
            max_bytes_per_tenant: None,
        }
    }
}

impl StoreOptions {
    /// The settings an auto-created topic called `name` gets.
    pub fn defaults_for(&self, name: &str) -> Result<TopicConfig> {
        topic_name(name)?;
        if !self.auto_create_topics {
            return Err(Error::UnknownTopic(name.to_string()));
        }
        Ok(TopicConfig {
            name: name.to_string(),
            ..self.topic_defaults.clone()
        })
    }
}

/// Topic settings already read from the engine. Settings change rarely and only through
/// `put_topic`, which updates this cache; a change made by another instance is seen by this
/// one after its restart (slots, the one setting that matters for routing, never changes).
#[derive(Default)]
pub(super) struct TopicCache {
    // A std lock: it is never held across an await.
    map: RwLock<HashMap<String, Arc<TopicConfig>>>,
}

impl TopicCache {
    pub(super) fn get(&self, name: &str) -> Option<Arc<TopicConfig>> {
        self.map
            .read()
            .expect("topic cache lock")
            .get(name)
            .cloned()
    }

    /// Forgets a topic (deleted here, or found gone from the store).
    pub(super) fn remove(&self, name: &str) {
        self.map.write().expect("topic cache lock").remove(name);
    }

    pub(super) fn insert(&self, config: TopicConfig) -> Arc<TopicConfig> {
        let config = Arc::new(config);
        self.map
            .write()
            .expect("topic cache lock")
            .insert(config.name.clone(), config.clone());
        config
    }
}

/// Checks that `new` may replace `old`, and answers the settings to store. The slot count
/// may stay or double; a doubling marks the topic draining from the oldest layout that may
/// still hold old copies. Any other change of the count is refused: jobs would be looked for
/// in the wrong slot.
pub(super) fn check_update(old: &TopicConfig, mut new: TopicConfig) -> Result<TopicConfig> {
    // The tenant that made the topic stays its tenant.
    if old.tenant.is_some() {
        new.tenant = old.tenant.clone();
    }
    if new.slots == old.slots {
        // A sweep that found no old copy clears the mark by naming a count at or above the
        // topic's own; any other change keeps what the store has.
        new.draining_from = match new.draining_from {
            Some(n) if n >= new.slots => None,
            _ => old.draining_from,
        };
        return Ok(new);
    }
    if new.slots == old.slots.saturating_mul(2) {
        new.draining_from = Some(old.draining_from.unwrap_or(old.slots));
        return Ok(new);
    }
    Err(Error::TopicConflict {
        topic: new.name.clone(),
        message: format!(
            "slots can only double, from {} to {}; {} was asked: jobs would be looked for in \
             the wrong slot",
            old.slots,
            old.slots.saturating_mul(2),
            new.slots
        ),
    })
}

/// A new topic has never doubled.
pub(super) fn fresh(mut config: TopicConfig) -> TopicConfig {
    config.draining_from = None;
    config
}

//! The store's topics: creating, finding and changing their settings, and a doubling's sweep.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::model::TopicStats;
use crate::store::doubling;
use crate::topic::TopicConfig;
use crate::validate;

use super::{Store, lock};

impl Store {
    /// Creates or updates a topic. A topic's slot count may only double once it exists (no
    /// job moves; see `TopicConfig::draining_from`).
    pub(crate) async fn put_topic(&self, mut config: TopicConfig) -> Result<Arc<TopicConfig>> {
        config.validate()?;
        // Only a doubling and a sweep change `draining_from`: it is the store's.
        config.draining_from = None;
        let before = self.engine.reload_topic(&config.name).await?;
        let tenant = before
            .as_ref()
            .map_or(config.tenant.clone(), |b| b.tenant.clone());
        self.check_room(
            &config.name,
            before.as_ref().map(|b| b.slots),
            config.slots,
            tenant.as_deref(),
        )
        .await?;
        let now = self.engine.put_topic(config).await?;
        if let Some(before) = before
            && now.slots > before.slots
        {
            // Writers that read the settings before the doubling route with the old count,
            // to the old slots: each is marked, so their writes are refused and retried.
            let marks = (0..now.slots / 2).map(|slot| self.engine.mark_layout(&now, slot));
            for r in futures_util::future::join_all(marks).await {
                r?;
            }
        }
        Ok(now)
    }

    /// Sets (`Some`) or removes (`None`) a flow key's own limits in an existing topic,
    /// writing that key only; answers the topic's settings with the change and the key's
    /// limits before it.
    pub(crate) async fn put_flow(
        &self,
        topic: &str,
        key: &str,
        limits: Option<crate::flow::FlowLimits>,
    ) -> Result<(Arc<TopicConfig>, Option<crate::flow::FlowLimits>)> {
        validate::topic_name(topic)?;
        crate::flow::check_key(key)?;
        if let Some(limits) = &limits {
            limits.validate_own("flow")?;
        }
        self.existing_topic(topic).await?;
        self.engine.put_flow(topic, key, limits).await
    }

    /// A topic's settings; a topic used but never configured is created with the defaults
    /// unless auto-creation is off.
    pub(crate) async fn topic(&self, name: &str) -> Result<Arc<TopicConfig>> {
        validate::topic_name(name)?;
        match self.engine.find_topic(name).await? {
            Some(t) => Ok(t),
            None => {
                let mut config = self.options.defaults_for(name)?;
                // Made by a write: the tenant the request acts for made it.
                config.tenant = crate::tenant::current();
                self.check_room(name, None, config.slots, config.tenant.as_deref())
                    .await?;
                self.engine.create_topic(config).await
            }
        }
    }

    /// Refuses a topic made, or grown to `slots`, past `limits.max_topics` or
    /// `limits.max_total_slots`, or past its tenant's share (`limits.max_topics_per_tenant`,
    /// `limits.max_slots_per_tenant`); `before`: its slots now, when it exists; `tenant`:
    /// the one that made it (or makes it). Instances that create topics at the same moment
    /// may pass a limit by the few each makes.
    pub(crate) async fn check_room(
        &self,
        name: &str,
        before: Option<u32>,
        slots: u32,
        tenant: Option<&str>,
    ) -> Result<()> {
        let (max_topics, max_slots) = (self.options.max_topics, self.options.max_total_slots);
        let shares = tenant.is_some()
            && (self.options.max_topics_per_tenant.is_some()
                || self.options.max_slots_per_tenant.is_some());
        if max_topics.is_none() && max_slots.is_none() && !shares {
            return Ok(());
        }
        let topics = self.engine.topics().await?;
        if let Some(tenant) = tenant {
            self.check_tenant_room(&topics, name, before, slots, tenant)?;
        }
        if let (None, Some(max)) = (before, max_topics)
            && topics.len() >= max
        {
            return Err(Error::LimitReached {
                setting: "limits.max_topics",
                message: format!(
                    "topic {name:?} would be topic {} of at most {max}",
                    topics.len() + 1
                ),
            });
        }
        let held: u64 = topics
            .iter()
            .map(|t| u64::from(t.slots.max(t.draining_from.unwrap_or(0))))
            .sum();
        let after = held - u64::from(before.unwrap_or(0)).min(held)
            + u64::from(slots.max(before.unwrap_or(0)));
        match max_slots {
            Some(max) if after > max && slots > before.unwrap_or(0) => Err(Error::LimitReached {
                setting: "limits.max_total_slots",
                message: format!(
                    "topic {name:?} with {slots} slots would bring the slots of every topic to {after}, over {max}"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Refuses a topic made, or grown to `slots`, past its tenant's shares.
    fn check_tenant_room(
        &self,
        topics: &[Arc<TopicConfig>],
        name: &str,
        before: Option<u32>,
        slots: u32,
        tenant: &str,
    ) -> Result<()> {
        let own: Vec<&Arc<TopicConfig>> = topics
            .iter()
            .filter(|t| t.tenant.as_deref() == Some(tenant) && t.name != name)
            .collect();
        if let (None, Some(max)) = (before, self.options.max_topics_per_tenant)
            && own.len() >= max
        {
            return Err(Error::LimitReached {
                setting: "limits.max_topics_per_tenant",
                message: format!(
                    "topic {name:?} would be topic {} of tenant {tenant:?}, which may make at most {max}",
                    own.len() + 1
                ),
            });
        }
        let held: u64 = own
            .iter()
            .map(|t| u64::from(t.slots.max(t.draining_from.unwrap_or(0))))
            .sum();
        let after = held + u64::from(slots.max(before.unwrap_or(0)));
        match self.options.max_slots_per_tenant {
            Some(max) if after > max && slots > before.unwrap_or(0) => Err(Error::LimitReached {
                setting: "limits.max_slots_per_tenant",
                message: format!(
                    "topic {name:?} with {slots} slots would bring tenant {tenant:?}'s slots to {after}, over {max}"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// A topic's settings read from the store past any cache, for an instance told that
    /// another changed them (a doubling). Never creates one.
    pub(crate) async fn reload_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        validate::topic_name(name)?;
        self.engine.reload_topic(name).await
    }

    /// A topic's settings when it exists. Never creates one: reads, cancels and resets go
    /// through here, so naming an unknown topic leaves no trace.
    pub async fn find_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        validate::topic_name(name)?;
        self.engine.find_topic(name).await
    }

    /// The settings a topic of this name would be created with (`UnknownTopic` when
    /// auto-creation is off), for checking a job before its topic exists.
    pub fn defaults_for(&self, name: &str) -> Result<TopicConfig> {
        self.options.defaults_for(name)
    }

    /// A topic's settings, or `TopicNotFound`.
    pub async fn existing_topic(&self, name: &str) -> Result<Arc<TopicConfig>> {
        self.find_topic(name)
            .await?
            .ok_or_else(|| crate::error::Error::TopicNotFound(name.to_string()))
    }

    /// Deletes a topic whole: its settings, jobs, dead letters, events and owner leases.
    /// Refused with `TopicConflict` while any of its jobs is running (a handler or a consumer
    /// holds it), unless `force`. Answers what it held. A topic of the same name made later
    /// starts empty.
    pub(crate) async fn delete_topic(&self, name: &str, force: bool) -> Result<TopicStats> {
        let t = self.existing_topic(name).await?;
        let held = self.stats(name).await?;
        if held.running > 0 && !force {
            return Err(Error::TopicConflict {
                topic: name.to_string(),
                message: format!(
                    "{} of its jobs are running (a handler or a consumer holds them); \
                     force=true deletes them anyway",
                    held.running
                ),
            });
        }
        self.engine.delete_topic(&t).await?;
        self.handouts.forget(name);
        lock(&self.sweep_from).remove(name);
        Ok(held)
    }

    /// Forgets the settings of a topic another instance deleted (the keeper, told so).
    pub(crate) fn forget_topic(&self, name: &str) {
        self.engine.forget_topic(name);
    }

    /// For a topic draining from a doubling: looks for old copies in the slots it had
    /// before, and marks it drained when none is left. Answers the slot count it still
    /// drains from (`None`: drained, or never doubled).
    pub(crate) async fn sweep(&self, t: &TopicConfig) -> Result<Option<u32>> {
        if t.draining_from.is_none() {
            return Ok(None);
        }
        let topic = t.name.as_str();
        let start = lock(&self.sweep_from).get(topic).copied().unwrap_or(0);
        if let Some(slot) = doubling::sweep(&*self.engine, t, start).await? {
            lock(&self.sweep_from).insert(topic.to_string(), slot);
            return Ok(t.draining_from);
        }
        lock(&self.sweep_from).remove(topic);
        // A count at or above the topic's own marks it drained (see `check_update`); a
        // doubling since the sweep began makes the engine refuse this and keep draining.
        let drained = TopicConfig {
            draining_from: Some(t.slots),
            ..(*t).clone()
        };
        match self.engine.put_topic(drained).await {
            Ok(now) => Ok(now.draining_from),
            Err(Error::TopicConflict { .. }) => Ok(t.draining_from),
            Err(e) => Err(e),
        }
    }

    /// Every known topic, by name.
    pub async fn topics(&self) -> Result<Vec<Arc<TopicConfig>>> {
        let mut all = self.engine.topics().await?;
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }
}

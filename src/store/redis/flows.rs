//! Flow keys' own limits on Redis, apart from the topic's settings: one hash per topic
//! (`keys::flows_key`, field key → limits JSON), so a change writes that key only, and a
//! revision per topic (`keys::FLOW_REVS`) so that a listing of every topic reads again only
//! the keys of topics whose limits changed. Settings written by an earlier build carry the
//! keys in the topic's JSON: they are read as the keys' limits (the hash's win) and moved
//! into the hash at the next change of the topic or of a key.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use redis::AsyncCommands;
use redis::aio::ConnectionLike;

use super::RedisEngine;
use crate::error::{Error, Result};
use crate::flow::FlowLimits;
use crate::store::keys::{FLOW_REVS, flows_key};
use crate::topic::TopicConfig;

/// One key's change: `before` is its limits before (`''`: none). A new key past the most
/// keys is refused (`full`), nothing written.
/// KEYS[1] the topic's flows hash; ARGV[1] the key; ARGV[2] its limits JSON, `''` to remove
/// them; ARGV[3] the most keys with limits of their own.
const SET_FLOW: &str = r"
local before = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if ARGV[2] == '' then
  if before ~= '' then redis.call('HDEL', KEYS[1], ARGV[1]) end
  return {'ok', before}
end
if before == '' and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return {'full', ''}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {'ok', before}
";

/// Each topic's flow limits as last read here, with their revision.
pub(super) type FlowCache = std::sync::Mutex<HashMap<String, (i64, BTreeMap<String, FlowLimits>)>>;

fn parse_limits(topic: &str, key: &str, json: &str) -> Result<FlowLimits> {
    serde_json::from_str(json).map_err(|e| {
        Error::Corrupt(format!(
            "flow limits of key {key:?} of topic {topic:?} ({json:?}): {e}"
        ))
    })
}

/// The settings as stored in `toc:topics`: without the keys' own limits.
pub(super) fn stored_json(config: &TopicConfig) -> String {
    let mut bare = config.clone();
    bare.flows.clear();
    serde_json::to_string(&bare).expect("topic config serialises")
}

impl<C> RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// A topic's keys with limits of their own, as its hash holds them.
    async fn read_flows(&self, topic: &str) -> Result<BTreeMap<String, FlowLimits>> {
        let all: BTreeMap<String, String> = self.conn().hgetall(flows_key(topic)).await?;
        all.iter()
            .map(|(k, v)| Ok((k.clone(), parse_limits(topic, k, v)?)))
            .collect()
    }

    /// `config` (as parsed from `toc:topics`) with its keys' own limits at revision `rev`
    /// (`None`: the topic's hash was never written), read again only when the revision is
    /// not the one read last; put in the topic cache.
    pub(super) async fn with_flows(
        &self,
        mut config: TopicConfig,
        rev: Option<i64>,
    ) -> Result<Arc<TopicConfig>> {
        if let Some(rev) = rev {
            let cached = self
                .flow_cache
                .lock()
                .expect("flow cache lock")
                .get(&config.name)
                .filter(|(at, _)| *at == rev)
                .map(|(_, flows)| flows.clone());
            let flows = match cached {
                Some(flows) => flows,
                None => {
                    let flows = self.read_flows(&config.name).await?;
                    self.flow_cache
                        .lock()
                        .expect("flow cache lock")
                        .insert(config.name.clone(), (rev, flows.clone()));
                    flows
                }
            };
            // What an earlier build kept in the topic's JSON, unless the hash says otherwise.
            config.flows.extend(flows);
        }
        Ok(self.topics.insert(config))
    }

    /// A topic's flow-limits revision.
    pub(super) async fn flow_rev(&self, topic: &str) -> Result<Option<i64>> {
        Ok(self.conn().hget(FLOW_REVS, topic).await?)
    }

    /// Every topic's flow-limits revision.
    pub(super) async fn flow_revs(&self) -> Result<HashMap<String, i64>> {
        Ok(self.conn().hgetall(FLOW_REVS).await?)
    }

    /// Tells every instance's listing that a topic's keys changed.
    async fn bump_flows(&self, topic: &str) -> Result<()> {
        let mut incr = redis::cmd("HINCRBY");
        incr.arg(FLOW_REVS).arg(topic).arg(1);
        let _: i64 = self
            .write(&incr, &format!("the flow limits of topic {topic:?}"))
            .await?;
        Ok(())
    }

    /// Moves keys' limits an earlier build kept in the topic's JSON into its hash (a key
    /// the hash holds already keeps the hash's), before the JSON is written without them.
    pub(super) async fn move_old_flows(&self, old: &TopicConfig) -> Result<()> {
        if old.flows.is_empty() {
            return Ok(());
        }
        let place = format!("the flow limits of topic {:?}", old.name);
        for (key, limits) in &old.flows {
            let mut set = redis::cmd("HSETNX");
            set.arg(flows_key(&old.name))
                .arg(key)
                .arg(serde_json::to_string(limits).expect("limits serialise"));
            let _: bool = self.write(&set, &place).await?;
        }
        self.bump_flows(&old.name).await
    }

    /// Sets or removes one key's own limits, writing that key only; answers its limits
    /// before. A new key past `flow::MAX_FLOW_KEYS` is refused, nothing written.
    pub(super) async fn set_flow(
        &self,
        topic: &str,
        key: &str,
        limits: Option<FlowLimits>,
    ) -> Result<Option<FlowLimits>> {
        let json = limits.map_or(String::new(), |l| {
            serde_json::to_string(&l).expect("limits serialise")
        });
        let mut eval = redis::cmd("EVAL");
        eval.arg(SET_FLOW)
            .arg(1)
            .arg(flows_key(topic))
            .arg(key)
            .arg(&json)
            .arg(crate::flow::MAX_FLOW_KEYS);
        let place = format!("the flow limits of topic {topic:?}");
        let (answer, before): (String, String) = self.write(&eval, &place).await?;
        if answer == "full" {
            return Err(crate::flow::too_many_keys(topic));
        }
        let before = (!before.is_empty())
            .then(|| parse_limits(topic, key, &before))
            .transpose()?;
        if before.is_some() || limits.is_some() {
            self.bump_flows(topic).await?;
        }
        Ok(before)
    }

    /// Forgets a deleted topic's keys: their hash, revision and cached copy.
    pub(super) async fn drop_flows(&self, topic: &str) -> Result<()> {
        let place = format!("the flow limits of topic {topic:?}");
        let mut del = redis::cmd("DEL");
        del.arg(flows_key(topic));
        let _: i64 = self.write(&del, &place).await?;
        let mut hdel = redis::cmd("HDEL");
        hdel.arg(FLOW_REVS).arg(topic);
        let _: i64 = self.write(&hdel, &place).await?;
        self.flow_cache
            .lock()
            .expect("flow cache lock")
            .remove(topic);
        Ok(())
    }
}

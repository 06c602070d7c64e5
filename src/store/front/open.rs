//! How a [`Store`] is made, on either engine, and what only the memory engine has (its
//! journal): each constructor asks its engine's module for the engine (`memory::MemoryEngine`,
//! `redis::connect`) and puts the front over it. On the Redis engine the memory-only calls
//! answer as a memory store without a journal would.

use std::path::Path;
use std::sync::Arc;

use super::Store;
use crate::error::Result;
use crate::store::memory::settings::FsyncPolicy;
use crate::store::memory::{JournalLen, MemoryEngine};
use crate::store::redis::connect;
use crate::store::redis::settings::RedisSettings;
use crate::store::topic_policy::StoreOptions;

impl Store {
    /// A memory-only store: the zero-setup default.
    pub fn memory(options: StoreOptions) -> Self {
        Store::open_memory(options, None).expect("a store without a journal always opens")
    }

    /// A memory store that journals to `journal` (replaying what it holds), or memory only.
    pub fn open_memory(
        options: StoreOptions,
        journal: Option<(&Path, FsyncPolicy)>,
    ) -> Result<Self> {
        let engine = Arc::new(MemoryEngine::open_with(&options, journal)?);
        Ok(Store::over(engine.clone(), Some(engine), options))
    }

    /// Opens the Redis store `settings` describe: a Cluster, a primary behind Sentinel, or
    /// one node; with `durability = "replica"`, writes answered to callers are confirmed on
    /// a connection of their own (`redis/durable.rs`).
    pub async fn open_redis(settings: &RedisSettings, options: StoreOptions) -> Result<Store> {
        let engine = connect::open(settings, &options).await?;
        Ok(Store::over(engine, None, options))
    }

    /// A store on one Redis node. The connection is made lazily and remade after a loss, so
    /// a store created while Redis is down starts serving once Redis is back.
    pub async fn redis(url: &str, options: StoreOptions) -> Result<Store> {
        let engine = connect::one_node(url, None, &options).await?;
        Ok(Store::over(Arc::new(engine), None, options))
    }

    /// A store on a Redis Cluster, reached through any of its nodes.
    pub async fn redis_cluster(nodes: &[String], options: StoreOptions) -> Result<Store> {
        let engine = connect::cluster(nodes, None, &options).await?;
        Ok(Store::over(Arc::new(engine), None, options))
    }

    /// Rewrites the memory engine's journal as the live state now. Runs by itself when the
    /// journal has grown well past the live data; public for operations and tests.
    pub fn compact(&self) -> Result<()> {
        self.memory.as_ref().map_or(Ok(()), |e| e.compact())
    }

    /// Group commits of the journal so far (`fsync = always`): each covers every change
    /// waiting for the disk at the time. 0 without a journal.
    pub fn group_commits(&self) -> u64 {
        self.memory.as_ref().map_or(0, |e| e.group_commits())
    }

    /// Panics while holding one slot's lock, as a bug in a slot operation would: for the
    /// test that such a panic does not take the slot down for good (a poisoned lock is
    /// taken over, not refused).
    pub(crate) fn panic_in_slot(&self, topic: &str, slot: u32) {
        if let Some(engine) = &self.memory {
            engine.panic_in_slot(topic, slot);
        }
    }

    /// The memory engine's whole live state, one JSON line per record: for tests that check
    /// a rejected call changed nothing, and for debugging. Empty on another engine.
    pub fn dump(&self) -> Vec<String> {
        self.memory.as_ref().map(|e| e.dump()).unwrap_or_default()
    }

    /// Records in the journal file, and live records now (for tests of compaction).
    pub fn journal_len(&self) -> Result<JournalLen> {
        self.memory
            .as_ref()
            .map_or(Ok(JournalLen::default()), |e| e.journal_len())
    }
}

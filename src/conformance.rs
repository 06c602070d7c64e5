//! The one door to the crate's insides, for its own conformance tests and focused benchmarks
//! (not an API: it may change with any release, and is hidden from the docs).
//!
//! A library user acts through [`crate::TimeoutCenter`], which validates a job's type, serves
//! a new topic's slots and wakes the slot that must fire a job. The [`Store`]'s public calls
//! are those that keep their meaning without a runtime: reading, cancelling, maintenance.
//! The rest of the store (writes that a runtime must hear of, and the runtime's own calls) is
//! reached from outside the crate only through [`RuntimeOps`], so that the conformance suite
//! can play each transition on each engine with the time it chooses.

use std::future::Future;
use std::sync::Arc;

use crate::TimeoutCenter;
use crate::error::Result;
use crate::events::Event;
use crate::model::{
    ClaimOutcome, CreateSpec, Finished, JobRef, NewJob, Reset, ResetReport, ScheduleMode,
    Scheduled, TopicStats,
};
use crate::store::{Ownership, SharedStore, Store};
use crate::time::Millis;
use crate::topic::TopicConfig;

pub use crate::model::{HandedRecord, Pumped, Settlement};
pub use crate::store::front::door::{PumpAnswer, PumpAsk, SlotDoor};
pub use crate::store::memory::wheel::Wheel;
pub use crate::store::state_machine;

/// Teaches `store` the built-in job types' flow keys (a webhook's URL host and port), which
/// a center teaches its store when it starts: a job written after keeps its type's key.
pub fn learn_builtin_type_keys(store: &Store) {
    let mut handlers = crate::job_type::Handlers::new();
    crate::jobs::register_builtin(
        &mut handlers,
        &crate::jobs::webhook::WebhookSettings::default(),
    );
    store.learn_type_keys(Arc::new(
        move |job_type: &str, payload: &serde_json::Value| {
            handlers.get(job_type).and_then(|h| h.flow_key(payload))
        },
    ));
}

/// The store a center runs on (its writes bypass the center's checks and wakes).
pub fn store_of(center: &TimeoutCenter) -> &SharedStore {
    center.store()
}

/// The store's calls that only a runtime makes, or that change what a runtime must hear of.
/// Each has the meaning of the crate-private method of the same name on [`Store`], which
/// takes the topic's settings its caller resolved; here the topic is named, and resolved as
/// the service resolves it (created by a write that may create it, else it must exist).
#[allow(missing_docs)]
pub trait RuntimeOps {
    fn schedule(
        &self,
        topic: &str,
        job: NewJob,
        mode: ScheduleMode,
        now: Millis,
    ) -> impl Future<Output = Result<Scheduled>> + Send;
    fn reset_many(
        &self,
        topic: &str,
        resets: &[Reset],
        create: Option<&CreateSpec>,
        now: Millis,
    ) -> impl Future<Output = Result<ResetReport>> + Send;
    fn dead_requeue(
        &self,
        topic: &str,
        job: &JobRef,
        now: Millis,
    ) -> impl Future<Output = Result<bool>> + Send;
    fn put_topic(
        &self,
        config: TopicConfig,
    ) -> impl Future<Output = Result<Arc<TopicConfig>>> + Send;
    fn topic(&self, name: &str) -> impl Future<Output = Result<Arc<TopicConfig>>> + Send;
    fn reload_topic(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Arc<TopicConfig>>>> + Send;
    fn delete_topic(
        &self,
        name: &str,
        force: bool,
    ) -> impl Future<Output = Result<TopicStats>> + Send;
    fn sweep(&self, topic: &str) -> impl Future<Output = Result<Option<u32>>> + Send;
    fn register(
        &self,
        instance: &str,
        now: Millis,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// `register` of an instance that runs `types`: each live instance with its types.
    fn register_types(
        &self,
        instance: &str,
        types: &[String],
        now: Millis,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<Vec<(String, Vec<String>)>>> + Send;
    fn own(
        &self,
        topic: &str,
        slot: u32,
        instance: &str,
        now: Millis,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<Ownership>> + Send;
    fn disown(
        &self,
        topic: &str,
        slot: u32,
        instance: &str,
    ) -> impl Future<Output = Result<bool>> + Send;
    fn append_events(
        &self,
        topic: &str,
        events: &[Event],
    ) -> impl Future<Output = Result<()>> + Send;
    fn settle_claims(
        &self,
        topic: &str,
        claims: &[ClaimOutcome],
        now: Millis,
    ) -> impl Future<Output = Result<Vec<Finished>>> + Send;
    fn touch(
        &self,
        topic: &str,
        job: &JobRef,
        token: u64,
        until: Millis,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// The door of slot `slot` of the existing topic `topic` under owner fence `fence` (0:
    /// owns nothing): a slot's own calls (pumps, claims, settles, lease extensions, fires,
    /// flow room) go through it, as the slot actors' and claims' do.
    fn door(
        &self,
        topic: &str,
        slot: u32,
        fence: u64,
    ) -> impl Future<Output = Result<SlotDoor>> + Send;
    /// The memory engine's slot `slot` of `topic` panics at its next call (a test hook).
    fn panic_in_slot(&self, topic: &str, slot: u32);
}

impl RuntimeOps for Store {
    async fn schedule(
        &self,
        topic: &str,
        job: NewJob,
        mode: ScheduleMode,
        now: Millis,
    ) -> Result<Scheduled> {
        let t = match mode {
            ScheduleMode::ResetOnly => self.existing_topic(topic).await?,
            _ => Store::topic(self, topic).await?,
        };
        Store::schedule(self, t, &job, mode, now).await
    }
    async fn reset_many(
        &self,
        topic: &str,
        resets: &[Reset],
        create: Option<&CreateSpec>,
        now: Millis,
    ) -> Result<ResetReport> {
        let t = match create {
            Some(_) => Store::topic(self, topic).await?,
            None => self.existing_topic(topic).await?,
        };
        Store::reset_many(self, t, resets, create, now).await
    }
    async fn dead_requeue(&self, topic: &str, job: &JobRef, now: Millis) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        Store::dead_requeue(self, &t, job, now).await
    }
    async fn put_topic(&self, config: TopicConfig) -> Result<Arc<TopicConfig>> {
        Store::put_topic(self, config).await
    }
    async fn topic(&self, name: &str) -> Result<Arc<TopicConfig>> {
        Store::topic(self, name).await
    }
    async fn reload_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        Store::reload_topic(self, name).await
    }
    async fn delete_topic(&self, name: &str, force: bool) -> Result<TopicStats> {
        Store::delete_topic(self, name, force).await
    }
    async fn sweep(&self, topic: &str) -> Result<Option<u32>> {
        let t = self.existing_topic(topic).await?;
        Store::sweep(self, &t).await
    }
    async fn register(&self, instance: &str, now: Millis, ttl_ms: u64) -> Result<Vec<String>> {
        let live = Store::register(self, instance, &[], now, ttl_ms).await?;
        Ok(live.into_iter().map(|m| m.name).collect())
    }
    async fn register_types(
        &self,
        instance: &str,
        types: &[String],
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Vec<(String, Vec<String>)>> {
        let live = Store::register(self, instance, types, now, ttl_ms).await?;
        Ok(live.into_iter().map(|m| (m.name, m.types)).collect())
    }
    async fn own(
        &self,
        topic: &str,
        slot: u32,
        instance: &str,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Ownership> {
        let t = self.existing_topic(topic).await?;
        Store::own(self, &t, slot, instance, now, ttl_ms).await
    }
    async fn disown(&self, topic: &str, slot: u32, instance: &str) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        Store::disown(self, &t, slot, instance).await
    }
    async fn append_events(&self, topic: &str, events: &[Event]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let t = self.existing_topic(topic).await?;
        Store::append_events(self, &t, events).await
    }
    async fn settle_claims(
        &self,
        topic: &str,
        claims: &[ClaimOutcome],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        let t = self.existing_topic(topic).await?;
        Store::settle_claims(self, &t, claims, now).await
    }
    async fn touch(&self, topic: &str, job: &JobRef, token: u64, until: Millis) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        Store::touch(self, &t, job, token, until).await
    }
    async fn door(&self, topic: &str, slot: u32, fence: u64) -> Result<SlotDoor> {
        Store::door_of(self, topic, slot, fence).await
    }
    fn panic_in_slot(&self, topic: &str, slot: u32) {
        Store::panic_in_slot(self, topic, slot);
    }
}

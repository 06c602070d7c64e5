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
    ClaimOutcome, CreateSpec, Finished, JobRef, Leased, NewJob, Reset, ResetReport, RunOutcome,
    ScheduleMode, Scheduled, TopicStats,
};
use crate::store::{Grant, Ownership, SharedStore, Store};
use crate::time::Millis;
use crate::topic::TopicConfig;

pub use crate::model::{HandedRecord, Pumped, Settlement};
pub use crate::store::memory::wheel::Wheel;
pub use crate::store::state_machine;

/// The store a center runs on (its writes bypass the center's checks and wakes).
pub fn store_of(center: &TimeoutCenter) -> &SharedStore {
    center.store()
}

/// The store's calls that only a runtime makes, or that change what a runtime must hear of.
/// Each has the meaning of the crate-private method of the same name on [`Store`].
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
    fn pump(
        &self,
        topic: &str,
        slot: u32,
        now: Millis,
        limit: usize,
    ) -> impl Future<Output = Result<Pumped>> + Send;
    #[allow(clippy::too_many_arguments)]
    fn pump_fenced(
        &self,
        topic: &str,
        slot: u32,
        fence: u64,
        now: Millis,
        lead: Millis,
        limit: usize,
    ) -> impl Future<Output = Result<Pumped>> + Send;
    #[allow(clippy::too_many_arguments)]
    fn pump_setting_aside(
        &self,
        topic: &str,
        slot: u32,
        fence: u64,
        now: Millis,
        lead: Millis,
        limit: usize,
        aside: &crate::flow::SetAside,
    ) -> impl Future<Output = Result<Pumped>> + Send;
    fn adopt(
        &self,
        topic: &str,
        slot: u32,
        fence: u64,
        above: u64,
    ) -> impl Future<Output = Result<Vec<Leased>>> + Send;
    fn claim(
        &self,
        topic: &str,
        slot: u32,
        now: Millis,
        limit: usize,
        lease_ms: u64,
    ) -> impl Future<Output = Result<Pumped>> + Send;
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
    fn settle(
        &self,
        topic: &str,
        slot: u32,
        batch: &[Settlement],
        now: Millis,
    ) -> impl Future<Output = Result<Vec<Finished>>> + Send;
    fn finish(
        &self,
        topic: &str,
        run: &Leased,
        outcome: RunOutcome,
        now: Millis,
    ) -> impl Future<Output = Result<Finished>> + Send;
    fn take_fires(
        &self,
        topic: &str,
        want: u32,
        now: Millis,
    ) -> impl Future<Output = Result<Grant>> + Send;
    fn give_back_fires(
        &self,
        topic: &str,
        n: u32,
        now: Millis,
    ) -> impl Future<Output = Result<()>> + Send;
    fn flow_take(
        &self,
        topic: &TopicConfig,
        limits: &crate::flow::FlowLimits,
        ask: &crate::store::FlowAsk<'_>,
        now: Millis,
    ) -> impl Future<Output = Result<crate::store::FlowGrant>> + Send;
    fn flow_release(
        &self,
        topic: &TopicConfig,
        key: &str,
        runs: &[String],
    ) -> impl Future<Output = Result<()>> + Send;
    fn extend(
        &self,
        topic: &str,
        run: &Leased,
        until: Millis,
    ) -> impl Future<Output = Result<bool>> + Send;
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
        Store::schedule(self, topic, job, mode, now).await
    }
    async fn reset_many(
        &self,
        topic: &str,
        resets: &[Reset],
        create: Option<&CreateSpec>,
        now: Millis,
    ) -> Result<ResetReport> {
        Store::reset_many(self, topic, resets, create, now).await
    }
    async fn dead_requeue(&self, topic: &str, job: &JobRef, now: Millis) -> Result<bool> {
        Store::dead_requeue(self, topic, job, now).await
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
        Store::sweep(self, topic).await
    }
    async fn register(&self, instance: &str, now: Millis, ttl_ms: u64) -> Result<Vec<String>> {
        Store::register(self, instance, now, ttl_ms).await
    }
    async fn own(
        &self,
        topic: &str,
        slot: u32,
        instance: &str,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Ownership> {
        Store::own(self, topic, slot, instance, now, ttl_ms).await
    }
    async fn disown(&self, topic: &str, slot: u32, instance: &str) -> Result<bool> {
        Store::disown(self, topic, slot, instance).await
    }
    async fn append_events(&self, topic: &str, events: &[Event]) -> Result<()> {
        Store::append_events(self, topic, events).await
    }
    async fn pump(&self, topic: &str, slot: u32, now: Millis, limit: usize) -> Result<Pumped> {
        Store::pump(self, topic, slot, now, limit).await
    }
    async fn pump_fenced(
        &self,
        topic: &str,
        slot: u32,
        fence: u64,
        now: Millis,
        lead: Millis,
        limit: usize,
    ) -> Result<Pumped> {
        Store::pump_fenced(self, topic, slot, fence, now, lead, limit).await
    }
    async fn pump_setting_aside(
        &self,
        topic: &str,
        slot: u32,
        fence: u64,
        now: Millis,
        lead: Millis,
        limit: usize,
        aside: &crate::flow::SetAside,
    ) -> Result<Pumped> {
        Store::pump_setting_aside(self, topic, slot, fence, now, lead, limit, aside).await
    }
    async fn adopt(&self, topic: &str, slot: u32, fence: u64, above: u64) -> Result<Vec<Leased>> {
        Store::adopt(self, topic, slot, fence, above).await
    }
    async fn claim(
        &self,
        topic: &str,
        slot: u32,
        now: Millis,
        limit: usize,
        lease_ms: u64,
    ) -> Result<Pumped> {
        Store::claim(self, topic, slot, now, limit, lease_ms).await
    }
    async fn settle_claims(
        &self,
        topic: &str,
        claims: &[ClaimOutcome],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        Store::settle_claims(self, topic, claims, now).await
    }
    async fn touch(&self, topic: &str, job: &JobRef, token: u64, until: Millis) -> Result<bool> {
        Store::touch(self, topic, job, token, until).await
    }
    async fn settle(
        &self,
        topic: &str,
        slot: u32,
        batch: &[Settlement],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        Store::settle(self, topic, slot, batch, now).await
    }
    async fn finish(
        &self,
        topic: &str,
        run: &Leased,
        outcome: RunOutcome,
        now: Millis,
    ) -> Result<Finished> {
        Store::finish(self, topic, run, outcome, now).await
    }
    async fn take_fires(&self, topic: &str, want: u32, now: Millis) -> Result<Grant> {
        Store::take_fires(self, topic, want, now).await
    }
    async fn give_back_fires(&self, topic: &str, n: u32, now: Millis) -> Result<()> {
        Store::give_back_fires(self, topic, n, now).await
    }
    async fn flow_take(
        &self,
        topic: &TopicConfig,
        limits: &crate::flow::FlowLimits,
        ask: &crate::store::FlowAsk<'_>,
        now: Millis,
    ) -> Result<crate::store::FlowGrant> {
        Store::flow_take(self, topic, limits, ask, now).await
    }
    async fn flow_release(&self, topic: &TopicConfig, key: &str, runs: &[String]) -> Result<()> {
        Store::flow_release(self, topic, key, runs).await
    }
    async fn extend(&self, topic: &str, run: &Leased, until: Millis) -> Result<bool> {
        Store::extend(self, topic, run, until).await
    }
    fn panic_in_slot(&self, topic: &str, slot: u32) {
        Store::panic_in_slot(self, topic, slot);
    }
}

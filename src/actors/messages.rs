//! Every message the actors exchange, one small struct each.

use std::sync::Arc;
use std::time::Duration;

use actix::Message;
use serde::Serialize;
use serde_json::Value;

use crate::job_type::{JobContext, Outcome};
use crate::model::Emitted;
use crate::store::WakeNotice;
use crate::time::Millis;
use crate::topic::TopicConfig;

/// To a handler actor: run this job.
#[derive(Message)]
#[rtype(result = "RunReport")]
pub(crate) struct RunJob {
    pub ctx: JobContext<Value>,
}

/// What a handler actor reports of a run.
pub(crate) struct RunReport {
    pub outcome: Outcome,
    pub duration: Duration,
    pub emitted: Vec<Emitted>,
}

/// To a slot actor: pump now.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Pump;

/// To a slot actor: this instance owns the slot again under a new owner lease, whose fence
/// its pumps carry from now on (its runs in flight go on).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Refence(pub u64);

/// To a slot actor (through the slot keeper): a job is due at `at`, maybe before you wake.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Wake {
    pub at: Millis,
}

/// To a slot actor (through the slot keeper): the topic's settings changed (`put_topic`);
/// runs handed out from now on use them (backoff, lease extension).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Retune(pub Arc<TopicConfig>);

/// To a slot actor: stop pumping, wait for the pump in flight (its runs are the actor's
/// too), let runs finish within `grace`, give back the leases of those that do not. Answers
/// how many leases it gave back.
#[derive(Message)]
#[rtype(result = "usize")]
pub(crate) struct Drain {
    pub grace: Duration,
}

/// To the slot keeper, from a slot actor: I am at rest and my next time is further ahead
/// than `runtime.dormant_after_ms`; put me to sleep (see [`Sleep`]).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct SlotIdle {
    pub topic: String,
    pub slot: u32,
}

/// To a slot actor, from the slot keeper, which forwards it nothing more until it answers:
/// sleep if you still may. `Some(next)`: it cancelled its timer and holds nothing, and the
/// keeper drops its address (the actor stops) and starts a new one at `next` (its timer's
/// instant, with every wake it was told); `None`: it is busy again and goes on.
#[derive(Message)]
#[rtype(result = "Option<Option<Millis>>")]
pub(crate) struct Sleep;

/// To a slot actor: stop (the slot keeper restarts it). For operations and tests.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Halt;

/// To the slot keeper: serve every slot of this topic.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct ServeTopic(pub std::sync::Arc<TopicConfig>);

/// To the slot keeper: the topic is deleted; stop its slot actors and forget it.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct DropTopic(pub String);

/// To the slot keeper: wake a slot.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct WakeSlot(pub WakeNotice);

/// To the slot keeper: each slot actor's state.
#[derive(Message)]
#[rtype(result = "Vec<SlotHealth>")]
pub(crate) struct GetHealth;

/// To the slot keeper: drain every slot (see [`Drain`]); answers the leases given back.
#[derive(Message)]
#[rtype(result = "usize")]
pub(crate) struct Shutdown {
    pub grace: Duration,
}

/// To the slot keeper: stop one slot actor, which it then restarts.
#[derive(Message)]
#[rtype(result = "bool")]
pub(crate) struct HaltSlot {
    pub topic: String,
    pub slot: u32,
}

/// A slot actor's state, as `/health` shows it.
#[derive(Debug, Clone, Default, Serialize, PartialEq, utoipa::ToSchema)]
pub struct SlotHealth {
    /// The topic the slot belongs to.
    pub topic: String,
    /// The slot's number within its topic.
    pub slot: u32,
    /// The owner lease's fence this instance pumps the slot under.
    pub fence: u64,
    /// The slot is served: its actor runs, or it sleeps (`dormant`).
    pub alive: bool,
    /// The slot is served but asleep: nothing of it is in flight and its next job is
    /// further ahead than `runtime.dormant_after_ms`, so it holds no actor; the instance
    /// starts one at its next time or at a notice (`alive` is true).
    pub dormant: bool,
    /// When the slot last pumped (ms since the epoch), if it has since this instance took it.
    pub last_pump: Option<Millis>,
    /// Runs of the slot not yet settled in the store.
    pub in_flight: usize,
    /// Of those, due runs waiting for room on their flow key.
    #[serde(skip_serializing_if = "is_zero")]
    pub flow_waiting: usize,
    /// The fire time of the oldest of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_oldest_wait: Option<Millis>,
    /// How often the slot's actor was restarted after it stopped.
    pub restarts: u32,
    /// The slot's last pump or settle error, cleared by a pump that succeeds.
    pub last_error: Option<String>,
    /// The store refused the slot's last pump: another owner's fence is current. The keeper
    /// asks for the slot's lease again at its next round (it renews no lease it holds).
    #[serde(skip)]
    pub(crate) fenced: bool,
    /// When the slot's timer will pump it (its next time less the lead), if armed: the
    /// safety net wakes a slot only when the store shows a job it would pump too late for.
    #[serde(skip)]
    pub(crate) armed_at: Option<Millis>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

//! `lua/flow.lua`: a flow key's counters: room taken or ended (`Flow`), or read (`FlowRead`).

use super::{Call, Invocation, Lua, Scripts};
use crate::error::Result;
use crate::flow::FlowLimits;
use crate::store::flow::{FlowAsk, FlowState};
use crate::topic::TopicConfig;

/// What a [`Flow`] call does.
pub(in crate::store::redis) enum FlowOp<'a> {
    Take(&'a FlowAsk<'a>),
    Release(&'a [String]),
}

pub(in crate::store::redis) struct Flow<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) key: &'a str,
    /// The key's limits (a release needs none).
    pub(in crate::store::redis) limits: Option<&'a FlowLimits>,
    pub(in crate::store::redis) op: FlowOp<'a>,
}

fn keys_and_limits(
    call: &mut Invocation,
    topic: &TopicConfig,
    key: &str,
    op: &str,
    limits: Option<&FlowLimits>,
) {
    for k in crate::store::keys::flow_keys(&topic.name, topic.slots, key) {
        call.key(k);
    }
    let (rate, period, guard, par) = limits.map_or((0, 1, 0, 0), |l| {
        (
            l.rate.unwrap_or(0),
            l.period_ms,
            l.guard_ms(),
            l.parallelism.unwrap_or(0),
        )
    });
    call.arg(op).arg(rate).arg(period).arg(guard).arg(par);
}

impl Call for Flow<'_> {
    type Reply = (i64, i64);
    type Out = (i64, i64);

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.flow
    }

    /// Not a job's change: a lost take only holds fires back until the room runs out.
    fn answered(&self) -> bool {
        false
    }

    fn build(&self, call: &mut Invocation) {
        match &self.op {
            FlowOp::Take(ask) => {
                keys_and_limits(call, self.topic, self.key, "take", self.limits);
                call.arg(ask.hold_ms)
                    .arg(ask.waiter)
                    .arg(ask.waiting)
                    .arg(ask.oldest);
                for run in ask.runs {
                    call.arg(run.as_str());
                }
            }
            FlowOp::Release(runs) => {
                keys_and_limits(call, self.topic, self.key, "release", self.limits);
                for run in *runs {
                    call.arg(run.as_str());
                }
            }
        }
    }

    fn read(self, reply: (i64, i64)) -> Result<(i64, i64)> {
        Ok(reply)
    }
}

pub(in crate::store::redis) struct FlowRead<'a> {
    pub(in crate::store::redis) topic: &'a TopicConfig,
    pub(in crate::store::redis) key: &'a str,
    pub(in crate::store::redis) limits: &'a FlowLimits,
}

impl Call for FlowRead<'_> {
    type Reply = (i64, i64, i64, i64);
    type Out = FlowState;

    fn script(scripts: &Scripts) -> &Lua {
        &scripts.flow
    }

    fn answered(&self) -> bool {
        false
    }

    fn build(&self, call: &mut Invocation) {
        keys_and_limits(call, self.topic, self.key, "state", Some(self.limits));
    }

    fn read(
        self,
        (in_flight, in_period, waiting, oldest): (i64, i64, i64, i64),
    ) -> Result<FlowState> {
        Ok(FlowState {
            in_flight: u32::try_from(in_flight).unwrap_or(0),
            in_period: u32::try_from(in_period).unwrap_or(0),
            waiting: crate::num::unsigned(waiting),
            oldest_wait: (oldest >= 0).then_some(oldest),
        })
    }
}

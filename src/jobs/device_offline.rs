//! `device_offline`: a device's job is created or pushed back by each heartbeat
//! (`reset_many` with create). When it fires, the device has been silent too long:
//! `device.offline` is emitted and the alarm repeats every `repeat_ms`, up to `max_alarms`.
//! When a heartbeat reaches a device that has raised an alarm, `device.recovered` is emitted
//! and the cycle starts again.
//!
//! Payload (every field optional, so a device topic whose `default_type` is this type keeps
//! plain jobs that cost only their sorted-set entry): `{"timeout_ms", "repeat_ms",
//! "max_alarms"}`. After the last alarm the job is parked (its fire time
//! `time::PARKED_AT`, shown as parked) rather than going away, so the device's recovery is
//! still reported when its next heartbeat resets it.

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::job_type::{JobContext, JobHandler, Outcome};
use crate::model::{Emitted, Rearmed};

/// The type's name.
pub const TYPE: &str = "device_offline";

/// A device's job: its alarm repeats while the device stays silent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DevicePayload {
    /// The silence that raises the alarm (the heartbeat's delay), to report silence in full.
    #[serde(default, deserialize_with = "crate::wire::integer::option")]
    pub timeout_ms: Option<u64>,
    /// How often the alarm repeats, in ms; the type's default when `None`.
    #[serde(default, deserialize_with = "crate::wire::integer::option")]
    pub repeat_ms: Option<u64>,
    /// Most alarms before the job stops repeating; the type's default when `None`.
    #[serde(default, deserialize_with = "crate::wire::integer::option")]
    pub max_alarms: Option<u32>,
}

/// The `device_offline` job type: an alarm when a device's heartbeats stop, repeated until it is heard again.
pub struct DeviceOffline {
    /// Default repeat interval, in ms.
    pub repeat_ms: u64,
    /// Default most alarms.
    pub max_alarms: u32,
}

impl Default for DeviceOffline {
    fn default() -> Self {
        DeviceOffline {
            repeat_ms: 60_000,
            max_alarms: 3,
        }
    }
}

#[async_trait]
impl JobHandler for DeviceOffline {
    type Payload = Option<DevicePayload>;

    fn job_type(&self) -> &'static str {
        TYPE
    }

    fn payload_schema(&self) -> Option<Value> {
        let ms =
            serde_json::json!({"type": ["integer", "null"], "minimum": 0, "maximum": i64::MAX});
        Some(serde_json::json!({
            "type": ["object", "null"],
            "additionalProperties": false,
            "properties": {
                "timeout_ms": ms,
                "repeat_ms": ms,
                "max_alarms": {"type": ["integer", "null"], "minimum": 0, "maximum": u32::MAX}
            }
        }))
    }

    async fn handle(&self, ctx: JobContext<Option<DevicePayload>>) -> Outcome {
        let p = ctx.payload.clone().unwrap_or_default();
        let repeat_ms = p.repeat_ms.unwrap_or(self.repeat_ms).max(1);
        let max_alarms = p.max_alarms.unwrap_or(self.max_alarms).max(1);
        let alarm = ctx.job.fires + 1;
        // Time past the deadline of the first alarm.
        let overdue_ms = crate::num::unsigned(ctx.fired_at - ctx.job.fire_at)
            + u64::from(ctx.job.fires) * repeat_ms;
        let mut data = json!({
            "device_id": ctx.job.id,
            "alarm": alarm,
            "max_alarms": max_alarms,
            "overdue_ms": overdue_ms,
        });
        if let Some(t) = p.timeout_ms {
            data["silent_ms"] = json!(t + overdue_ms);
        }
        ctx.emit("device.offline", data);
        if alarm < max_alarms {
            Outcome::Repeat {
                after: Duration::from_millis(repeat_ms),
            }
        } else {
            // Parked: no fire planned, the job waits for the device's next heartbeat.
            let to_park = crate::time::PARKED_AT
                .saturating_sub(ctx.job.fire_at)
                .max(0);
            Outcome::Repeat {
                after: Duration::from_millis(crate::num::unsigned(to_park)),
            }
        }
    }

    fn on_rearm(&self, rearmed: &Rearmed) -> Option<Emitted> {
        Some(Emitted::new(
            "device.recovered",
            json!({"device_id": rearmed.id, "alarms": rearmed.fires}),
        ))
    }
}

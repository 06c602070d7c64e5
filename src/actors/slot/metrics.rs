//! The slot's metrics: its topic's series, looked up once when the slot starts (and, for a
//! job type's handler duration or the flow gauges, at their first use), so that a fire
//! touches no label map.

use std::collections::HashMap;

use prometheus::{Histogram, IntCounter, IntGauge};

use crate::metrics::Metrics;

pub(super) struct SlotMetrics {
    pub(super) fired: IntCounter,
    pub(super) fired_after_pump: IntCounter,
    pub(super) lateness: Histogram,
    pub(super) pump_batch: Histogram,
    pub(super) pump_seconds: Histogram,
    pub(super) pump_lead: Histogram,
    pub(super) retried: IntCounter,
    pub(super) dead: IntCounter,
    /// Per job type, at its first run here.
    handler_durations: HashMap<String, Histogram>,
    /// Runs waiting for room and their wait, at the first that waits.
    flow: Option<(IntGauge, Histogram)>,
}

impl SlotMetrics {
    /// The series of `topic`.
    pub(super) fn new(m: &Metrics, topic: &str) -> Self {
        let name = [topic];
        SlotMetrics {
            fired: m.fired.with_label_values(&name),
            fired_after_pump: m.fired_after_pump.with_label_values(&name),
            lateness: m.lateness.with_label_values(&name),
            pump_batch: m.pump_batch.with_label_values(&name),
            pump_seconds: m.pump_seconds.with_label_values(&name),
            pump_lead: m.pump_lead.with_label_values(&name),
            retried: m.retried.with_label_values(&name),
            dead: m.dead.with_label_values(&name),
            handler_durations: HashMap::new(),
            flow: None,
        }
    }

    /// How long `job_type`'s handler ran, in `topic`.
    pub(super) fn handler_duration(
        &mut self,
        m: &Metrics,
        topic: &str,
        job_type: &str,
    ) -> &Histogram {
        self.handler_durations
            .entry(job_type.to_string())
            .or_insert_with(|| m.handler_duration.with_label_values(&[topic, job_type]))
    }

    /// The flow gauges of `topic`: runs waiting for room, and how long each waited.
    pub(super) fn flow(&mut self, m: &Metrics, topic: &str) -> &(IntGauge, Histogram) {
        self.flow.get_or_insert_with(|| {
            (
                m.flow_waiting.with_label_values(&[topic]),
                m.flow_wait.with_label_values(&[topic]),
            )
        })
    }
}

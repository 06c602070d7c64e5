//! The series fires record (jobs fired, retried, dead, their lateness, the slots' pumps and
//! flow lines), beside the two that record them: the slot actors (`actors/slot/metrics.rs`
//! holds a slot's handles on them) and a pull topic's claims and settles (`center.rs`).

use prometheus::{HistogramVec, IntCounterVec, IntGaugeVec};

use crate::series::{Reg, seconds};

/// The series a fire records, per topic.
pub struct FireSeries {
    pub fired: IntCounterVec,
    pub fired_after_pump: IntCounterVec,
    pub retried: IntCounterVec,
    pub dead: IntCounterVec,
    /// Fires not run for being too late: one-shot jobs past `expire_after_ms`, recurring
    /// fires past `repeat.catchup_window_ms`.
    pub misfired: IntCounterVec,
    /// Pumps that failed (the store refused or did not answer), by topic.
    pub pump_failures: IntCounterVec,
    /// Due runs sent back to the store for their flow key's share of a slot's waiting room
    /// was full (`runtime.flow_max_waiting_per_key`).
    pub flow_deferred: IntCounterVec,
    /// Due jobs waiting for room on their flow key, on this instance.
    pub flow_waiting: IntGaugeVec,
    /// How long a due job waited for room on its flow key.
    pub flow_wait: HistogramVec,
    pub lateness: HistogramVec,
    pub handler_duration: HistogramVec,
    pub pump_batch: HistogramVec,
    pub pump_seconds: HistogramVec,
    pub pump_lead: HistogramVec,
}

impl FireSeries {
    pub(crate) fn register(r: &Reg) -> Self {
        let topic = &["topic"];
        FireSeries {
            fired: r.counter("jobs_fired_total", "Jobs handed to their handler"),
            retried: r.counter("jobs_retried_total", "Runs that failed and will retry"),
            fired_after_pump: r.counter(
                "jobs_fired_after_their_pump_total",
                "Jobs that came due while the pump leasing them was in flight, so fired late by the part of its round trip past the lead (rising: the store answers slowly; runtime.fire_lead_max_ms lets the lead follow it further)",
            ),
            dead: r.counter("jobs_dead_total", "Jobs sent to the dead letters"),
            misfired: r.counter(
                "jobs_misfired_total",
                "Fires not run for being too late (expire_after_ms, repeat.catchup_window_ms)",
            ),
            pump_failures: r.counter(
                "pump_failures_total",
                "Pumps that failed: the store refused or did not answer (not a fence: another owner)",
            ),
            flow_deferred: r.counter(
                "flow_deferred_total",
                "Due runs sent back to the store, their flow key's share of a slot's waiting room full (runtime.flow_max_waiting_per_key)",
            ),
            flow_waiting: r.gauges(
                "flow_waiting_jobs",
                "Due jobs waiting for room on their flow key, on this instance",
                topic,
            ),
            flow_wait: r.histogram(
                "flow_wait_seconds",
                "How long a due job waited for room on its flow key before it fired",
                topic,
                seconds(),
            ),
            lateness: r.histogram(
                "firing_lateness_seconds",
                "Instant a job was handed to its handler minus its fire time",
                topic,
                seconds(),
            ),
            handler_duration: r.histogram(
                "handler_duration_seconds",
                "How long handlers ran",
                &["topic", "type"],
                seconds(),
            ),
            pump_seconds: r.histogram(
                "pump_seconds",
                "How long a slot's pump took, from asking the store to its answer (the slot's lead, runtime.fire_lead_ms and up to runtime.fire_lead_max_ms after slow pumps, hides up to that much of it from firing lateness)",
                topic,
                seconds(),
            ),
            pump_lead: r.histogram(
                "pump_lead_seconds",
                "How far ahead of now a slot's pump leased jobs: its lead, runtime.fire_lead_ms, longer after slow pumps up to runtime.fire_lead_max_ms (a reset or cancel reaching the store this close to a fire time finds the job running)",
                topic,
                vec![0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1],
            ),
            pump_batch: r.histogram(
                "pump_batch_size",
                "Jobs handed out by one pump",
                topic,
                vec![0.0, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0],
            ),
        }
    }

    /// Removes a deleted topic's series (its handler durations for each of `job_types`).
    pub(crate) fn forget(&self, topic: &str, job_types: &[String]) {
        for vec in [
            &self.fired,
            &self.fired_after_pump,
            &self.retried,
            &self.dead,
            &self.misfired,
            &self.pump_failures,
            &self.flow_deferred,
        ] {
            let _ = vec.remove_label_values(&[topic]);
        }
        let _ = self.flow_waiting.remove_label_values(&[topic]);
        for vec in [
            &self.flow_wait,
            &self.lateness,
            &self.pump_batch,
            &self.pump_seconds,
            &self.pump_lead,
        ] {
            let _ = vec.remove_label_values(&[topic]);
        }
        for t in job_types {
            let _ = self
                .handler_duration
                .remove_label_values(&[topic, t.as_str()]);
        }
    }
}

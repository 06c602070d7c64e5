//! The slot's metrics: its topic's series, looked up once when the slot starts (and, for a
//! job type's handler duration or the flow gauges, at their first use), so that a fire
//! touches no label map; and what the slot counts in them.

use std::collections::HashMap;
use std::sync::Arc;

use prometheus::{Histogram, IntCounter, IntGauge};

use crate::fires::FireSeries;
use crate::model::{Finished, Settlement};

/// One slot's handles on its topic's series.
pub(super) struct SlotMetrics {
    /// Every fire series, for those looked up at their first use.
    all: Arc<FireSeries>,
    topic: String,
    pub(super) fired: IntCounter,
    pub(super) fired_after_pump: IntCounter,
    pub(super) lateness: Histogram,
    pub(super) pump_batch: Histogram,
    pub(super) pump_seconds: Histogram,
    pub(super) pump_lead: Histogram,
    retried: IntCounter,
    dead: IntCounter,
    /// Per job type, at its first run here.
    handler_durations: HashMap<String, Histogram>,
    /// Runs waiting for room and their wait, at the first that waits.
    flow: Option<(IntGauge, Histogram)>,
}

impl SlotMetrics {
    /// The series of `topic`.
    pub(super) fn new(m: &Arc<FireSeries>, topic: &str) -> Self {
        let name = [topic];
        SlotMetrics {
            all: Arc::clone(m),
            topic: topic.to_string(),
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

    /// How long a handler of `job_type` ran.
    pub(super) fn handler_ran(&mut self, job_type: &str, took: std::time::Duration) {
        let (all, topic) = (&self.all, &self.topic);
        self.handler_durations
            .entry(job_type.to_string())
            .or_insert_with(|| all.handler_duration.with_label_values(&[topic, job_type]))
            .observe(took.as_secs_f64());
    }

    /// The flow gauges: runs waiting for room, and how long each waited.
    fn flow(&mut self) -> &(IntGauge, Histogram) {
        let (all, topic) = (&self.all, &self.topic);
        self.flow.get_or_insert_with(|| {
            (
                all.flow_waiting.with_label_values(&[topic]),
                all.flow_wait.with_label_values(&[topic]),
            )
        })
    }

    /// `n` more runs wait for room on their flow key.
    pub(super) fn waiting(&mut self, n: usize) {
        self.flow()
            .0
            .add(crate::num::signed(crate::num::usize_u64(n)));
    }

    /// `n` runs waiting for room left their line.
    pub(super) fn left_line(&mut self, n: usize) {
        self.flow()
            .0
            .sub(crate::num::signed(crate::num::usize_u64(n)));
    }

    /// A run waited `ms` for room on its flow key.
    pub(super) fn waited(&mut self, ms: crate::time::Millis) {
        self.flow()
            .1
            .observe(crate::num::float(ms.max(0)) / 1_000.0);
    }

    /// `n` runs of a key past its share were sent back to the store.
    pub(super) fn deferred(&self, n: u64) {
        self.all
            .flow_deferred
            .with_label_values(&[self.topic.as_str()])
            .inc_by(n);
    }

    /// A pump failed (not fenced).
    pub(super) fn pump_failed(&self) {
        self.all
            .pump_failures
            .with_label_values(&[self.topic.as_str()])
            .inc();
    }

    /// Counts what a settle applied (retried, dead, stale), and answers whether any run was
    /// scheduled again.
    pub(super) fn settled(&self, batch: &[Settlement], done: &[Finished]) -> bool {
        let mut rescheduled = false;
        for (item, finished) in batch.iter().zip(done) {
            match finished {
                Finished::Retrying => self.retried.inc(),
                Finished::Dead => self.dead.inc(),
                Finished::Stale => {
                    tracing::warn!(job = %item.run.job.id, "a run's outcome was stale: another run holds the job")
                }
                _ => {}
            }
            rescheduled |= matches!(
                finished,
                Finished::Retrying
                    | Finished::Repeating
                    | Finished::Rescheduled
                    | Finished::Released
            );
        }
        rescheduled
    }
}

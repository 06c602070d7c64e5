//! Prometheus metrics: one registry per runtime, rendered by `/metrics`. Each group of series
//! is registered beside the code that records it (the fires in `fires.rs`, the
//! writes in `writes.rs`, the claims in `claims.rs`); this file holds the registry, the store's
//! state read at a scrape, and the rendering.

use prometheus::{Encoder, IntGauge, IntGaugeVec, Registry, TextEncoder};

use crate::model::TopicStats;
use crate::series::Reg;

/// Every series of a runtime, each group registered beside the code that records it; the
/// store's state at a scrape is this file's own.
pub struct Metrics {
    registry: Registry,
    /// What a fire records: jobs fired, retried, dead, their lateness, the slots' pumps and
    /// flow lines (`fires.rs`, beside the slot actors and the claims that record them).
    pub fires: std::sync::Arc<crate::fires::FireSeries>,
    /// What writes record: jobs scheduled, reset, cancelled (`writes.rs`, beside the
    /// center and a handler's `OtherJobs`, which record them).
    pub writes: crate::writes::WriteSeries,
    /// What pull claims record: how late they took jobs, long polls waiting
    /// (`claims.rs`).
    pub claims: crate::claims::ClaimSeries,
    /// Jobs in the store by state, as read at a scrape.
    pub jobs: IntGaugeVec,
    /// 1 for a topic whose job types no live instance runs all of (its jobs wait); no series
    /// for a topic that is served.
    pub topic_unserved: IntGaugeVec,
    /// 1 when the store answered its last ping (at a scrape of `/metrics`), 0 when not.
    pub store_up: IntGauge,
    /// Slots this instance serves whose actor is not alive (stopped, or not yet started).
    pub slots_down: IntGauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Counts a cancel that found a job (`state` is what the store answered).
    pub(crate) fn count_cancelled(&self, topic: &str, state: Option<crate::model::JobState>) {
        if state.is_some() {
            self.writes.cancelled.with_label_values(&[topic]).inc();
        }
    }

    pub fn new() -> Self {
        let r = Reg(Registry::new_custom(Some("toc".into()), None).expect("valid registry"));
        Metrics {
            fires: std::sync::Arc::new(crate::fires::FireSeries::register(&r)),
            writes: crate::writes::WriteSeries::register(&r),
            claims: crate::claims::ClaimSeries::register(&r),
            jobs: r.gauges("jobs", "Jobs in the store by state", &["topic", "state"]),
            topic_unserved: r.gauges(
                "topic_unserved",
                "1 while no live instance runs every job type the topic names (default_type and types): its jobs wait",
                &["topic"],
            ),
            store_up: r.gauge(
                "store_up",
                "1 when the store answered this instance's last ping (at a scrape), 0 when not",
            ),
            slots_down: r.gauge(
                "slots_down",
                "Slots this instance serves whose actor is not alive (stopped and not yet restarted)",
            ),
            registry: r.0,
        }
    }

    /// Marks `topic` unserved (its series at 1) or served (no series).
    pub(crate) fn set_unserved(&self, topic: &str, unserved: bool) {
        if unserved {
            self.topic_unserved.with_label_values(&[topic]).set(1);
        } else {
            let _ = self.topic_unserved.remove_label_values(&[topic]);
        }
    }

    /// The topics marked unserved, sorted.
    pub(crate) fn unserved(&self) -> Vec<String> {
        use prometheus::core::Collector;
        let mut out: Vec<String> = self
            .topic_unserved
            .collect()
            .iter()
            .flat_map(|f| f.get_metric().iter())
            .filter(|m| m.get_gauge().get_value() > 0.0)
            .filter_map(|m| m.get_label().first().map(|l| l.value().to_string()))
            .collect();
        out.sort();
        out
    }

    /// Sets the job gauges from a topic's figures.
    pub fn observe_stats(&self, stats: &TopicStats) {
        for (state, n) in [
            ("scheduled", stats.scheduled),
            ("running", stats.running),
            ("dead", stats.dead),
        ] {
            self.jobs
                .with_label_values(&[stats.topic.as_str(), state])
                .set(crate::num::signed(n));
        }
    }

    /// Removes a deleted topic's series (its handler durations for each of `job_types`), so
    /// that topics made and deleted leave no series behind.
    pub fn forget_topic(&self, topic: &str, job_types: &[String]) {
        self.fires.forget(topic, job_types);
        self.writes.forget(topic);
        self.claims.forget(topic);
        let _ = self.topic_unserved.remove_label_values(&[topic]);
        for state in ["scheduled", "running", "dead"] {
            let _ = self.jobs.remove_label_values(&[topic, state]);
        }
    }

    /// The Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("metrics encode");
        String::from_utf8(out).expect("metrics are UTF-8")
    }
}

//! Prometheus metrics: counters of what happened to jobs, histograms of firing lateness,
//! handler duration, pump batch sizes, pump durations and leads. One registry per runtime, rendered by `/metrics`.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use crate::model::TopicStats;

pub struct Metrics {
    registry: Registry,
    pub scheduled: IntCounterVec,
    pub reset: IntCounterVec,
    pub cancelled: IntCounterVec,
    pub fired: IntCounterVec,
    pub fired_after_pump: IntCounterVec,
    pub retried: IntCounterVec,
    pub dead: IntCounterVec,
    /// Fires not run for being too late: one-shot jobs past `expire_after_ms`, recurring
    /// fires past `repeat.catchup_window_ms`.
    pub misfired: IntCounterVec,
    pub jobs: IntGaugeVec,
    /// Due jobs waiting for room on their flow key, on this instance.
    pub flow_waiting: IntGaugeVec,
    /// How long a due job waited for room on its flow key.
    pub flow_wait: HistogramVec,
    /// Due runs sent back to the store for their flow key's share of a slot's waiting room
    /// was full (`runtime.flow_max_waiting_per_key`).
    pub flow_deferred: IntCounterVec,
    /// Long polls (claims with `wait_ms`) waiting now on this instance.
    pub long_polls: IntGauge,
    /// 1 for a topic whose job types no live instance runs all of (its jobs wait); no series
    /// for a topic that is served.
    pub topic_unserved: IntGaugeVec,
    /// 1 when the store answered its last ping (at a scrape of `/metrics`), 0 when not.
    pub store_up: IntGauge,
    /// Slots this instance serves whose actor is not alive (stopped, or not yet started).
    pub slots_down: IntGauge,
    /// Pumps that failed (the store refused or did not answer), by topic.
    pub pump_failures: IntCounterVec,
    pub lateness: HistogramVec,
    /// How late a pull topic's due jobs were claimed by its consumers (apart from firing
    /// lateness: a claim waits for a consumer to ask).
    pub claim_lateness: HistogramVec,
    pub handler_duration: HistogramVec,
    pub pump_batch: HistogramVec,
    pub pump_seconds: HistogramVec,
    pub pump_lead: HistogramVec,
}

/// A registry that hands back each metric it registers.
struct Reg(Registry);

impl Reg {
    fn add<M: prometheus::core::Collector + Clone + 'static>(&self, m: M) -> M {
        self.0.register(Box::new(m.clone())).expect("unique metric");
        m
    }

    /// A counter per topic.
    fn counter(&self, name: &str, help: &str) -> IntCounterVec {
        self.add(IntCounterVec::new(Opts::new(name, help), &["topic"]).expect("valid metric"))
    }

    fn gauge(&self, name: &str, help: &str) -> IntGauge {
        self.add(IntGauge::new(name, help).expect("valid metric"))
    }

    fn gauges(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        self.add(IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric"))
    }

    fn histogram(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
        buckets: Vec<f64>,
    ) -> HistogramVec {
        let opts = HistogramOpts::new(name, help).buckets(buckets);
        self.add(HistogramVec::new(opts, labels).expect("valid metric"))
    }
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
            self.cancelled.with_label_values(&[topic]).inc();
        }
    }

    pub fn new() -> Self {
        let r = Reg(Registry::new_custom(Some("toc".into()), None).expect("valid registry"));
        let seconds = vec![
            0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            30.0, 60.0,
        ];
        let topic = &["topic"];
        Metrics {
            jobs: r.gauges("jobs", "Jobs in the store by state", &["topic", "state"]),
            flow_waiting: r.gauges(
                "flow_waiting_jobs",
                "Due jobs waiting for room on their flow key, on this instance",
                topic,
            ),
            long_polls: r.gauge(
                "long_polls_waiting",
                "Long polls (claims with wait_ms) waiting on this instance (limits.max_long_polls)",
            ),
            topic_unserved: r.gauges(
                "topic_unserved",
                "1 while no live instance runs every job type the topic names (default_type and types): its jobs wait",
                topic,
            ),
            store_up: r.gauge(
                "store_up",
                "1 when the store answered this instance's last ping (at a scrape), 0 when not",
            ),
            slots_down: r.gauge(
                "slots_down",
                "Slots this instance serves whose actor is not alive (stopped and not yet restarted)",
            ),
            pump_failures: r.counter(
                "pump_failures_total",
                "Pumps that failed: the store refused or did not answer (not a fence: another owner)",
            ),
            scheduled: r.counter("jobs_scheduled_total", "Jobs created or replaced"),
            reset: r.counter("jobs_reset_total", "Fire times moved by resets"),
            cancelled: r.counter("jobs_cancelled_total", "Jobs cancelled"),
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
            flow_deferred: r.counter(
                "flow_deferred_total",
                "Due runs sent back to the store, their flow key's share of a slot's waiting room full (runtime.flow_max_waiting_per_key)",
            ),
            flow_wait: r.histogram(
                "flow_wait_seconds",
                "How long a due job waited for room on its flow key before it fired",
                topic,
                seconds.clone(),
            ),
            lateness: r.histogram(
                "firing_lateness_seconds",
                "Instant a job was handed to its handler minus its fire time",
                topic,
                seconds.clone(),
            ),
            claim_lateness: r.histogram(
                "claim_lateness_seconds",
                "Instant a pull topic's job was claimed by a consumer minus its fire time (how long due jobs waited for a consumer to ask)",
                topic,
                seconds.clone(),
            ),
            handler_duration: r.histogram(
                "handler_duration_seconds",
                "How long handlers ran",
                &["topic", "type"],
                seconds.clone(),
            ),
            pump_seconds: r.histogram(
                "pump_seconds",
                "How long a slot's pump took, from asking the store to its answer (the slot's lead, runtime.fire_lead_ms and up to runtime.fire_lead_max_ms after slow pumps, hides up to that much of it from firing lateness)",
                topic,
                seconds,
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
        for vec in [
            &self.scheduled,
            &self.reset,
            &self.cancelled,
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
        let _ = self.topic_unserved.remove_label_values(&[topic]);
        let _ = self.flow_wait.remove_label_values(&[topic]);
        for state in ["scheduled", "running", "dead"] {
            let _ = self.jobs.remove_label_values(&[topic, state]);
        }
        for vec in [
            &self.lateness,
            &self.claim_lateness,
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

    /// The Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("metrics encode");
        String::from_utf8(out).expect("metrics are UTF-8")
    }
}

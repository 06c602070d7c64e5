//! A registry that hands back each series it registers, and the buckets of a histogram in
//! seconds: what every group of series (`metrics.rs` composes them) registers with. It
//! imports nothing of the crate, so a group may live beside the code that records it.

use prometheus::{
    HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

/// The buckets of a histogram in seconds: half a millisecond to a minute.
pub(crate) fn seconds() -> Vec<f64> {
    vec![
        0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
        60.0,
    ]
}

/// A registry that hands back each metric it registers.
pub(crate) struct Reg(pub(crate) Registry);

impl Reg {
    pub(crate) fn add<M: prometheus::core::Collector + Clone + 'static>(&self, m: M) -> M {
        self.0.register(Box::new(m.clone())).expect("unique metric");
        m
    }

    /// A counter per topic.
    pub(crate) fn counter(&self, name: &str, help: &str) -> IntCounterVec {
        self.add(IntCounterVec::new(Opts::new(name, help), &["topic"]).expect("valid metric"))
    }

    pub(crate) fn gauge(&self, name: &str, help: &str) -> IntGauge {
        self.add(IntGauge::new(name, help).expect("valid metric"))
    }

    pub(crate) fn gauges(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        self.add(IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric"))
    }

    pub(crate) fn histogram(
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

//! The instance's recent past, kept by the service so that a chart does not start empty at
//! every page load: every `http.history_every_ms` it reads its own counters (jobs fired and
//! pull jobs claimed, per topic) and keeps each topic's rate over the step, for
//! `http.history_keep_ms` (an hour by default). `GET /v1/history` serves it; the dashboard
//! draws it. Memory is bounded: at most `http.history_max_topics` topics a point (the
//! busiest), and only topics that moved.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use prometheus::core::Collector;
use serde::Serialize;

use crate::config::HttpSettings;
use crate::metrics::Metrics;
use crate::time::Millis;

/// One step: when it ended and each topic's rates over it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub(crate) struct Point {
    /// When the step ended, in ms since the epoch.
    pub(crate) at: Millis,
    /// Per topic that moved in the step: jobs fired a second, pull jobs claimed a second.
    pub(crate) topics: Vec<TopicRates>,
}

/// A topic's rates over one step.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub(crate) struct TopicRates {
    pub(crate) topic: String,
    /// Jobs fired a second (handed to a handler on this instance).
    pub(crate) fired_per_s: f64,
    /// Pull jobs claimed a second (by consumers of this instance).
    pub(crate) claimed_per_s: f64,
}

/// Counter totals per topic: fired, claimed.
type Totals = HashMap<String, (u64, u64)>;

/// The kept steps, and the totals they were measured from.
pub(crate) struct History {
    every_ms: u64,
    keep: usize,
    max_topics: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    points: VecDeque<Point>,
    last: Option<(Millis, Totals)>,
}

impl History {
    pub(crate) fn new(settings: &HttpSettings) -> Self {
        let every = settings.history_every_ms.max(1);
        History {
            every_ms: every,
            keep: usize::try_from(settings.history_keep_ms / every).unwrap_or(usize::MAX),
            max_topics: settings.history_max_topics,
            inner: Mutex::default(),
        }
    }

    /// How often a step is taken, in ms.
    pub(crate) fn every_ms(&self) -> u64 {
        self.every_ms
    }

    /// Takes a step at `now` from the counter `totals`: each topic's rate since the last
    /// step (none at the first). A counter that went back (the process's own, so only at a
    /// restart, which empties the history anyway) counts from 0.
    pub(crate) fn step(&self, now: Millis, totals: Totals) {
        let mut inner = self.inner.lock().expect("history lock");
        let Some((then, before)) = inner.last.replace((now, totals.clone())) else {
            return;
        };
        let secs = crate::num::float(now.saturating_sub(then).max(1)) / 1_000.0;
        let rate = |now: u64, before: u64| {
            crate::num::float(crate::num::signed(if now >= before {
                now - before
            } else {
                now
            })) / secs
        };
        let mut topics: Vec<TopicRates> = totals
            .into_iter()
            .filter_map(|(topic, (fired, claimed))| {
                let (f0, c0) = before.get(&topic).copied().unwrap_or((0, 0));
                let r = TopicRates {
                    topic,
                    fired_per_s: rate(fired, f0),
                    claimed_per_s: rate(claimed, c0),
                };
                (r.fired_per_s > 0.0 || r.claimed_per_s > 0.0).then_some(r)
            })
            .collect();
        topics.sort_by(|a, b| {
            (b.fired_per_s + b.claimed_per_s)
                .total_cmp(&(a.fired_per_s + a.claimed_per_s))
                .then_with(|| a.topic.cmp(&b.topic))
        });
        topics.truncate(self.max_topics);
        inner.points.push_back(Point { at: now, topics });
        while inner.points.len() > self.keep {
            inner.points.pop_front();
        }
    }

    /// The kept steps, oldest first, each with only the topics `sees` lets through.
    pub(crate) fn points(&self, sees: impl Fn(&str) -> bool) -> Vec<Point> {
        let inner = self.inner.lock().expect("history lock");
        inner
            .points
            .iter()
            .map(|p| Point {
                at: p.at,
                topics: p
                    .topics
                    .iter()
                    .filter(|t| sees(&t.topic))
                    .cloned()
                    .collect(),
            })
            .collect()
    }
}

/// The counter totals per topic the history is made from: jobs fired, pull jobs claimed.
pub(crate) fn totals(m: &Metrics) -> Totals {
    let mut out: Totals = HashMap::new();
    let topic_of = |metric: &prometheus::proto::Metric| {
        metric
            .get_label()
            .iter()
            .find(|l| l.name() == "topic")
            .map(|l| l.value().to_string())
    };
    for family in m.fires.fired.collect() {
        for metric in family.get_metric() {
            if let Some(topic) = topic_of(metric) {
                out.entry(topic).or_default().0 += float_count(metric.get_counter().get_value());
            }
        }
    }
    for family in m.claims.lateness.collect() {
        for metric in family.get_metric() {
            if let Some(topic) = topic_of(metric) {
                out.entry(topic).or_default().1 += metric.get_histogram().get_sample_count();
            }
        }
    }
    out
}

/// A counter's value as the whole count it is.
fn float_count(v: f64) -> u64 {
    crate::num::unsigned(crate::num::float_int(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(every_ms: u64, keep_ms: u64, max_topics: usize) -> History {
        let mut s = crate::config::Settings::defaults().http;
        s.history_every_ms = every_ms;
        s.history_keep_ms = keep_ms;
        s.history_max_topics = max_topics;
        History::new(&s)
    }

    fn totals(of: &[(&str, u64, u64)]) -> Totals {
        of.iter()
            .map(|(t, f, c)| (t.to_string(), (*f, *c)))
            .collect()
    }

    #[test]
    fn a_step_is_each_topics_rate_since_the_last() {
        let h = history(10_000, 3_600_000, 10);
        h.step(0, totals(&[("a", 100, 0), ("b", 5, 0)]));
        assert!(
            h.points(|_| true).is_empty(),
            "the first step only reads the counters"
        );
        h.step(
            10_000,
            totals(&[("a", 1_100, 0), ("b", 5, 0), ("p", 0, 500)]),
        );
        let points = h.points(|_| true);
        assert_eq!(points.len(), 1);
        assert_eq!(points[0].at, 10_000);
        let rates: Vec<(&str, f64, f64)> = points[0]
            .topics
            .iter()
            .map(|t| (t.topic.as_str(), t.fired_per_s, t.claimed_per_s))
            .collect();
        assert_eq!(
            rates,
            vec![("a", 100.0, 0.0), ("p", 0.0, 50.0)],
            "b did not move"
        );
    }

    #[test]
    fn an_hour_is_kept_and_the_busiest_topics_only() {
        let h = history(10_000, 30_000, 1);
        for i in 0..6u64 {
            h.step(
                crate::num::signed(i * 10_000),
                totals(&[("quiet", i, 0), ("busy", i * 100, 0)]),
            );
        }
        let points = h.points(|_| true);
        assert_eq!(
            points.iter().map(|p| p.at).collect::<Vec<_>>(),
            [30_000, 40_000, 50_000]
        );
        assert!(
            points
                .iter()
                .all(|p| p.topics.len() == 1 && p.topics[0].topic == "busy")
        );
    }

    #[test]
    fn a_caller_sees_only_its_topics() {
        let h = history(1_000, 60_000, 10);
        h.step(0, totals(&[("orders-a", 0, 0), ("billing", 0, 0)]));
        h.step(1_000, totals(&[("orders-a", 7, 0), ("billing", 9, 0)]));
        let seen = h.points(|t| t.starts_with("orders"));
        assert_eq!(seen[0].topics.len(), 1);
        assert_eq!(seen[0].topics[0].topic, "orders-a");
    }
}

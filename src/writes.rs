//! The series writes record (jobs scheduled, reset, cancelled), beside the two that record
//! them: the center (`center.rs`) and a handler's writes to other jobs (`job_type.rs`).

/// The series writes record, per topic.
pub struct WriteSeries {
    pub scheduled: prometheus::IntCounterVec,
    pub reset: prometheus::IntCounterVec,
    pub cancelled: prometheus::IntCounterVec,
}

impl WriteSeries {
    pub(crate) fn register(r: &crate::series::Reg) -> Self {
        WriteSeries {
            scheduled: r.counter("jobs_scheduled_total", "Jobs created or replaced"),
            reset: r.counter("jobs_reset_total", "Fire times moved by resets"),
            cancelled: r.counter("jobs_cancelled_total", "Jobs cancelled"),
        }
    }

    /// Removes a deleted topic's series.
    pub(crate) fn forget(&self, topic: &str) {
        for vec in [&self.scheduled, &self.reset, &self.cancelled] {
            let _ = vec.remove_label_values(&[topic]);
        }
    }
}

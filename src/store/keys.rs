//! Every Redis key name, built here and nowhere else.
//!
//! All keys of one (topic, slot) share the hash tag `{topic:slot}`, so each script touches a
//! single Redis Cluster hash slot, and a topic's slots spread over the cluster's nodes.

/// The five keys of one slot, in the order every script takes them as KEYS[1..5].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotKeys {
    /// Sorted set of scheduled jobs: member id, score fire time.
    pub due: String,
    /// Sorted set of running jobs: member id, score lease deadline.
    pub run: String,
    /// Sorted set of dead jobs: member id, score time of death.
    pub dead: String,
    /// Hash of job records (see `record.rs`): field id, value compact JSON.
    pub job: String,
    /// Counter that issues run tokens.
    pub seq: String,
    list: [String; 5],
}

impl SlotKeys {
    pub fn new(topic: &str, slot: u32) -> Self {
        let tag = format!("toc:{{{topic}:{slot}}}");
        let [due, run, dead, job, seq] =
            ["due", "run", "dead", "job", "seq"].map(|k| format!("{tag}:{k}"));
        SlotKeys {
            list: [
                due.clone(),
                run.clone(),
                dead.clone(),
                job.clone(),
                seq.clone(),
            ],
            due,
            run,
            dead,
            job,
            seq,
        }
    }

    pub fn all(&self) -> &[String] {
        &self.list
    }
}

/// Hash of topic settings: field topic name, value JSON.
pub const TOPICS: &str = "toc:topics";

/// A topic's event stream (a capped Redis Stream).
pub fn events(topic: &str) -> String {
    format!("toc:{{{topic}}}:events")
}

/// The pub/sub channel on which a topic's slots are told to wake: the message is the slot.
pub fn wake_channel(topic: &str) -> String {
    format!("toc:wake:{topic}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_keys_share_one_hash_tag() {
        let k = SlotKeys::new("orders", 5);
        for key in k.all() {
            assert!(key.starts_with("toc:{orders:5}:"), "{key}");
        }
    }
}

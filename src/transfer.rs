//! Backups and moves between engines (`toc export`, `toc import`): a service's state as JSON
//! Lines, one topic after another. A topic's first line is its settings, with its flow keys'
//! own limits; then each of its jobs as `GET /v1/topics/{topic}/jobs/{id}` shows it, with
//! the slot it lives in: scheduled, then running, then dead, each in score order (fire time,
//! lease deadline, time of death; then id). Two services holding the same jobs export the
//! same lines, whichever their engines.
//!
//! An import writes each job into the slot it was exported from, unless that slot holds a
//! job of its id already, with its whole record (attempts, fires, timestamps, error, labels,
//! flow key, trace context); a running job is written scheduled, so its run is made again
//! (at least once). A topic's lines carry a digest ([`digest`]), which the service works out
//! again over the lines it wrote, whatever batches they came in: once every line of it is
//! written the topic keeps it (`imports`), and the same lines imported again are skipped
//! whole (a job that fired and was deleted since the first import is not made again). A
//! digest the lines written do not add up to is not recorded.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::model::Job;
use crate::topic::TopicConfig;

/// The media type of an export.
pub const MEDIA_TYPE: &str = "application/x-ndjson";

/// One line of an export. (A line is made and read one at a time, never kept in bulk: its
/// size is not worth a box.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Line {
    /// A topic's settings, with its keys' own flow limits (`flows`): its first line.
    Topic {
        /// The settings, as `GET /v1/topics/{topic}` shows them, `flows` included.
        settings: TopicConfig,
    },
    /// One of the topic's jobs, in the slot it was exported from.
    Job {
        /// The slot: a job routed by a shard key lives where its key sends it, which its
        /// id alone does not say.
        slot: u32,
        /// The job.
        #[serde(flatten)]
        job: Job,
    },
    /// The topic's last line: how many jobs its export holds, so an export cut short (a
    /// connection lost, a disk full) is refused rather than taken for the whole.
    End {
        /// The topic.
        topic: String,
        /// Its job lines.
        jobs: u64,
    },
}

impl Line {
    /// The topic the line belongs to.
    pub fn topic(&self) -> &str {
        match self {
            Line::Topic { settings } => &settings.name,
            Line::Job { job, .. } => &job.topic,
            Line::End { topic, .. } => topic,
        }
    }
}

/// The digest of a topic's lines in an export: `sha256:` and 64 hex digits, the SHA-256 of
/// each line's bytes, summed modulo 2^256. A sum, so the service can add up the lines of an
/// import's batches in whatever order they arrive (`toc import` sends several at once) and
/// compare.
pub fn digest<'a>(lines: impl IntoIterator<Item = &'a str>) -> String {
    let mut sum = LineSum::default();
    for line in lines {
        sum.add(line);
    }
    sum.digest()
}

/// A running [`digest`]: lines added one by one, in any order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineSum([u8; 32]);

impl LineSum {
    /// Adds one line (without its newline).
    pub fn add(&mut self, line: &str) {
        let h = ring::digest::digest(&ring::digest::SHA256, line.as_bytes());
        self.add_sum(&LineSum(
            h.as_ref().try_into().expect("SHA-256 is 32 bytes"),
        ));
    }

    /// Adds the lines another sum holds.
    pub fn add_sum(&mut self, other: &LineSum) {
        let mut carry = 0u16;
        for i in (0..32).rev() {
            let v = u16::from(self.0[i]) + u16::from(other.0[i]) + carry;
            self.0[i] = v.to_be_bytes()[1];
            carry = v >> 8;
        }
    }

    /// The digest of the lines added: `sha256:` and 64 hex digits.
    pub fn digest(&self) -> String {
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }
}

/// The imports under way on this instance: per topic and digest, the lines written so far.
/// Bounded: past `MAX_OPEN` the oldest is dropped (its digest is then not recorded, and the
/// same import is written again rather than skipped: nothing is lost).
#[derive(Debug, Default)]
pub struct Imports {
    open: std::sync::Mutex<std::collections::VecDeque<((String, String), LineSum)>>,
}

impl Imports {
    /// Imports followed at once.
    const MAX_OPEN: usize = 256;

    /// Adds a batch's `lines` to the import of `topic` under `digest`, and answers the sum
    /// so far; `last` ends it.
    pub fn add(&self, topic: &str, digest: &str, lines: &LineSum, last: bool) -> LineSum {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (topic.to_string(), digest.to_string());
        let at = open.iter().position(|(k, _)| *k == key);
        let mut sum = at
            .and_then(|i| open.remove(i))
            .map_or_else(LineSum::default, |(_, s)| s);
        sum.add_sum(lines);
        if !last {
            open.push_back((key, sum));
            while open.len() > Self::MAX_OPEN {
                open.pop_front();
            }
        }
        sum
    }
}

/// One batch of an import of one topic, as `POST /v1/topics/{topic}/import` reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// The topic's settings line, when the batch carries it (the first one does).
    pub settings: Option<TopicConfig>,
    /// The slot count the export was made with.
    pub slots: u32,
    /// The digest of the topic's lines in the export ([`digest`]).
    pub digest: String,
    /// The jobs, each with the slot it was exported from.
    pub jobs: Vec<(u32, Job)>,
    /// The topic's last batch: the digest is recorded once it is written, if the lines
    /// written under it add up to it.
    pub last: bool,
    /// The batch's lines as received, summed ([`LineSum`]): what the service adds up to
    /// check the digest.
    pub lines: LineSum,
}

/// What one batch of an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImportReport {
    /// The topic was made from the settings line (it did not exist).
    pub topic_created: bool,
    /// Jobs written.
    pub written: u64,
    /// Jobs left as they were: their slot holds a job of their id.
    pub existing: u64,
    /// The whole batch was skipped: the topic holds this import's digest already.
    pub skipped: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_as_it_was_written() {
        let topic = Line::Topic {
            settings: TopicConfig::named("orders"),
        };
        let text = serde_json::to_string(&topic).unwrap();
        assert!(text.starts_with(r#"{"kind":"topic""#), "{text}");
        assert_eq!(serde_json::from_str::<Line>(&text).unwrap(), topic);
        let job = Line::Job {
            slot: 3,
            job: Job::stub("orders", "o-1"),
        };
        let text = serde_json::to_string(&job).unwrap();
        assert!(
            text.contains(r#""slot":3"#) && text.contains(r#""id":"o-1""#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Line>(&text).unwrap(), job);
    }

    #[test]
    fn the_digest_is_of_the_lines_in_any_order() {
        let a = digest(["x", "y"]);
        assert_eq!(a.len(), "sha256:".len() + 64);
        assert_eq!(a, digest(["x", "y"]));
        assert_eq!(a, digest(["y", "x"]));
        assert_ne!(a, digest(["xy"]));
        assert_ne!(a, digest(["x"]));
        assert_ne!(a, digest(["x", "y", "y"]));
        // Batches add up to the whole.
        let (mut one, mut two) = (LineSum::default(), LineSum::default());
        one.add("y");
        two.add("x");
        one.add_sum(&two);
        assert_eq!(one.digest(), a);
    }

    #[test]
    fn a_sum_carries_across_bytes() {
        let mut a = LineSum([0xff; 32]);
        let mut one = [0u8; 32];
        one[31] = 1;
        a.add_sum(&LineSum(one));
        assert_eq!(a, LineSum([0; 32]), "wraps modulo 2^256");
        let mut b = LineSum([0; 32]);
        b.0[31] = 0xff;
        b.add_sum(&LineSum(one));
        assert_eq!((b.0[30], b.0[31]), (1, 0));
    }
}

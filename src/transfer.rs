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
//! (at least once). A topic's lines carry a digest ([`digest`]); once they are all written
//! the topic keeps it (`imports`), and the same lines imported again are skipped whole: a
//! job that fired and was deleted since the first import is not made again.

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

/// The digest of a topic's lines in an export (their bytes, each with its newline):
/// `sha256:` and 64 hex digits.
pub fn digest<'a>(lines: impl IntoIterator<Item = &'a str>) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for line in lines {
        ctx.update(line.as_bytes());
        ctx.update(b"\n");
    }
    let hex: String = ctx
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
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
    /// The topic's last batch: the digest is recorded once it is written.
    pub last: bool,
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
    fn the_digest_is_of_the_lines_and_their_order() {
        let a = digest(["x", "y"]);
        assert_eq!(a.len(), "sha256:".len() + 64);
        assert_eq!(a, digest(["x", "y"]));
        assert_ne!(a, digest(["y", "x"]));
        assert_ne!(a, digest(["xy"]));
    }
}

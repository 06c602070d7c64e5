//! The stored form of a job's details, shared by Rust and the Lua scripts.
//!
//! A record holds only what differs from its topic's defaults, under one-letter names, so a
//! plain job (the topic's default type, no payload, default limits) has no record at all and
//! costs no more than its sorted-set entry. The fields, as the scripts read and write them:
//!
//! | field | meaning | absent means |
//! |---|---|---|
//! | `t` | job type | the topic's `default_type` |
//! | `p` | payload, as JSON text | `null` |
//! | `m` | max attempts | the topic's `max_attempts` |
//! | `x` | max fire time (debounce cap) | none |
//! | `a` | attempts made | 0 |
//! | `c`, `u` | created and updated instants | unknown (plain jobs) |
//! | `e` | last error | none |
//! | `k` | token of the current run | not running |
//! | `f` | fire time of the current run, or of the last one for a dead job | the due score |
//! | `r` | fire time of a reset that arrived during the current run | none |
//! | `n` | times the job fired and repeated since it was last reset | 0 |
//! | `s` | a recurring job's schedule (`{"cron":..,"tz":..}` or `{"every_ms":..}`, with its `limit`, `until`, `jitter_ms`, `catchup_window_ms`) | fires once |
//! | `xp` | a one-shot job's expiry (`{"ms":..}`, `"on":"drop"` to drop it) | never expires |
//! | `fk` | its flow key | its type's (a webhook's URL host and port), or none |
//! | `l` | its labels (`{"campaign":"spring"}`) | none |
//! | `tp` | the W3C trace context its fire continues | untraced |
//! | `sk` | the shard key that routed it, when not its id | routed by its id |
//! | `tk` | its type's flow key (a webhook's URL host and port), read once when it was written | its type gives none (or it was written before the field) |

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::model::{Job, JobState};
use crate::time::Millis;
use crate::topic::TopicConfig;

/// The shard key a record keeps for job `id`: `key` when it routes the job elsewhere than
/// its id would (a key equal to the id routes as the id does, and is not kept).
pub(crate) fn own_shard_key(id: &str, key: Option<&str>) -> Option<String> {
    key.filter(|k| *k != id).map(str::to_string)
}

/// A job's record: named in Rust, stored under the one-letter names of the table above.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Record {
    #[serde(rename = "t", skip_serializing_if = "Option::is_none")]
    pub job_type: Option<String>,
    #[serde(rename = "p", skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    #[serde(rename = "m", skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    #[serde(rename = "x", skip_serializing_if = "Option::is_none")]
    pub max_fire_at: Option<Millis>,
    #[serde(rename = "a", skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    #[serde(rename = "c", skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Millis>,
    #[serde(rename = "u", skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Millis>,
    #[serde(rename = "e", skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(rename = "k", skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    #[serde(rename = "f", skip_serializing_if = "Option::is_none")]
    pub run_fire_at: Option<Millis>,
    #[serde(rename = "r", skip_serializing_if = "Option::is_none")]
    pub pending_reset: Option<Millis>,
    #[serde(rename = "n", skip_serializing_if = "Option::is_none")]
    pub fires: Option<u32>,
    #[serde(rename = "s", skip_serializing_if = "Option::is_none")]
    pub schedule: Option<crate::recurrence::Recurrence>,
    #[serde(rename = "xp", skip_serializing_if = "Option::is_none")]
    pub expire: Option<crate::model::Expiry>,
    #[serde(rename = "fk", skip_serializing_if = "Option::is_none")]
    pub flow_key: Option<String>,
    #[serde(
        rename = "l",
        default,
        skip_serializing_if = "std::collections::BTreeMap::is_empty"
    )]
    pub labels: crate::labels::Labels,
    #[serde(rename = "tp", skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    #[serde(rename = "sk", skip_serializing_if = "Option::is_none")]
    pub shard_key: Option<String>,
    #[serde(rename = "tk", skip_serializing_if = "Option::is_none")]
    pub type_key: Option<String>,
}

impl Record {
    /// The definition part of a new job's record: only what differs from the topic's
    /// defaults. Empty for a plain job.
    pub(crate) fn spec(
        topic: &TopicConfig,
        job_type: Option<&str>,
        payload: &Value,
        max_attempts: Option<u32>,
    ) -> Record {
        Record {
            job_type: job_type
                .filter(|t| *t != topic.default_type)
                .map(str::to_string),
            payload: (!payload.is_null()).then(|| payload.to_string()),
            max_attempts: max_attempts.filter(|m| *m != topic.max_attempts),
            ..Record::default()
        }
    }

    /// The record a new job is written with.
    pub(crate) fn for_job(topic: &TopicConfig, job: &crate::model::NewJob) -> Record {
        Record {
            max_fire_at: job.max_fire_at,
            schedule: job.repeat.clone(),
            expire: job.expire,
            flow_key: job.flow_key.clone(),
            labels: job.labels.clone(),
            traceparent: job.traceparent.clone(),
            shard_key: own_shard_key(&job.id, job.shard_key.as_deref()),
            ..Record::spec(
                topic,
                job.job_type.as_deref(),
                &job.payload,
                job.max_attempts,
            )
        }
    }

    /// A job as an export shows it (`Record::into_job`), back to its state, score and
    /// record (`toc import`). A running job is written scheduled, so its run is made again
    /// (at least once): at the reset that waited for the run when there was one, else at the
    /// run's fire time.
    pub(crate) fn from_job(
        topic: &TopicConfig,
        job: &crate::model::Job,
    ) -> (JobState, Millis, Record) {
        let mut rec = Record {
            max_fire_at: job.max_fire_at,
            attempts: (job.attempts > 0).then_some(job.attempts),
            created_at: job.created_at,
            updated_at: job.updated_at,
            last_error: job.last_error.clone(),
            fires: (job.fires > 0).then_some(job.fires),
            schedule: job.repeat.clone(),
            expire: job.expire_after_ms.map(|after_ms| crate::model::Expiry {
                after_ms,
                on_expire: job.on_expire.unwrap_or_default(),
            }),
            flow_key: job.flow_key.clone(),
            labels: job.labels.clone(),
            traceparent: job.traceparent.clone(),
            shard_key: own_shard_key(&job.id, job.shard_key.as_deref()),
            ..Record::spec(
                topic,
                Some(&job.job_type),
                &job.payload,
                Some(job.max_attempts),
            )
        };
        match job.state {
            JobState::Scheduled => (JobState::Scheduled, job.fire_at, rec),
            JobState::Running => (
                JobState::Scheduled,
                job.pending_fire_at.unwrap_or(job.fire_at),
                rec,
            ),
            JobState::Dead => {
                let at = job.dead_at.unwrap_or(job.fire_at);
                if job.fire_at != at {
                    rec.run_fire_at = Some(job.fire_at);
                }
                (JobState::Dead, at, rec)
            }
        }
    }

    /// The record a batch of resets gives the jobs it creates.
    pub(crate) fn for_create(topic: &TopicConfig, spec: &crate::model::CreateSpec) -> Record {
        Record::spec(
            topic,
            spec.job_type.as_deref(),
            &spec.payload,
            spec.max_attempts,
        )
    }

    /// This create spec for a job routed by `key`, a shard key other than its id
    /// ([`own_shard_key`]), which the created job keeps.
    pub(crate) fn routed(&self, key: Option<&str>) -> std::borrow::Cow<'_, Record> {
        match key {
            None => std::borrow::Cow::Borrowed(self),
            Some(key) => std::borrow::Cow::Owned(Record {
                shard_key: Some(key.to_string()),
                ..self.clone()
            }),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        *self == Record::default()
    }

    /// About how many bytes the record holds: its strings (payload, type, last error, flow
    /// key, labels, trace context), what `limits.max_bytes_per_topic` counts on the memory
    /// engine. The fixed-size fields are left out: they cost the same for every job.
    pub(crate) fn weight(&self) -> u64 {
        let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        let labels: usize = self.labels.iter().map(|(k, v)| k.len() + v.len()).sum();
        crate::num::usize_u64(
            text(&self.payload)
                + text(&self.job_type)
                + text(&self.last_error)
                + text(&self.flow_key)
                + text(&self.traceparent)
                + text(&self.shard_key)
                + text(&self.type_key)
                + labels,
        )
    }

    /// The JSON text handed to a script ("" for an empty spec, which the scripts read as a
    /// plain job).
    pub(crate) fn to_arg(&self) -> String {
        if self.is_empty() {
            String::new()
        } else {
            serde_json::to_string(self).expect("a record always serialises")
        }
    }

    pub(crate) fn parse(raw: &str) -> Result<Record> {
        if raw.is_empty() {
            return Ok(Record::default());
        }
        if let Some(plain) = Record::plain_run(raw) {
            return Ok(plain);
        }
        serde_json::from_str(raw).map_err(|e| Error::undecodable(format!("job record {raw:?}"), e))
    }

    /// The record `pump.lua` writes for a run of a plain job, `{"a":A,"k":K,"f":F}`, read
    /// without a JSON parser: a burst hands out one per job. Any other text is `None`, and
    /// goes to the parser.
    fn plain_run(raw: &str) -> Option<Record> {
        let (a, rest) = raw.strip_prefix("{\"a\":")?.split_once(",\"k\":")?;
        let (k, rest) = rest.split_once(",\"f\":")?;
        let f = rest.strip_suffix('}')?;
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if !(digits(a) && digits(k) && digits(f)) {
            return None;
        }
        Some(Record {
            attempts: Some(a.parse().ok()?),
            token: Some(k.parse().ok()?),
            run_fire_at: Some(f.parse().ok()?),
            ..Record::default()
        })
    }

    /// The job this record describes, given where the job was found: `score` is the due
    /// time (scheduled), the lease deadline (running) or the time of death (dead).
    pub(crate) fn into_job(
        self,
        topic: &TopicConfig,
        id: String,
        state: JobState,
        score: Millis,
    ) -> Result<Job> {
        let payload = match &self.payload {
            Some(text) => serde_json::from_str(text)
                .map_err(|e| Error::undecodable(format!("payload of job {id:?}"), e))?,
            None => Value::Null,
        };
        let next_fire_at = self.schedule.as_ref().and_then(|s| match state {
            JobState::Scheduled => Some(score),
            // After this run: none when it is the series' last (its limit or `until`).
            _ => {
                let fired = self.fires.unwrap_or(0).saturating_add(1);
                s.next_after(self.run_fire_at.unwrap_or(score))
                    .filter(|at| !s.ends(fired, *at))
            }
        });
        let (fire_at, lease_until, dead_at) = match state {
            JobState::Scheduled => (score, None, None),
            JobState::Running => (self.run_fire_at.unwrap_or(score), Some(score), None),
            JobState::Dead => (self.run_fire_at.unwrap_or(score), None, Some(score)),
        };
        Ok(Job {
            topic: topic.name.clone(),
            id,
            job_type: self.job_type.unwrap_or_else(|| topic.default_type.clone()),
            payload,
            state,
            fire_at,
            max_fire_at: self.max_fire_at,
            attempts: self.attempts.unwrap_or(0),
            max_attempts: self.max_attempts.unwrap_or(topic.max_attempts),
            created_at: self.created_at,
            updated_at: self.updated_at,
            last_error: self.last_error,
            lease_until,
            dead_at,
            pending_fire_at: self.pending_reset,
            fires: self.fires.unwrap_or(0),
            repeat: self.schedule,
            next_fire_at,
            expire_after_ms: self.expire.map(|e| e.after_ms),
            on_expire: self.expire.map(|e| e.on_expire),
            flow_key: self.flow_key,
            labels: self.labels,
            traceparent: self.traceparent,
            shard_key: self.shard_key,
            next_fire_ats: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_record_that_does_not_decode_keeps_the_decoders_error_as_its_source() {
        let e = Record::parse("{not json").unwrap_err();
        assert!(matches!(e, Error::Undecodable { .. }), "{e:?}");
        let source = std::error::Error::source(&e).expect("the cause is kept");
        assert!(source.is::<serde_json::Error>());
        assert!(
            e.to_string().starts_with("corrupt store data: job record"),
            "{e}"
        );
    }

    #[test]
    fn a_plain_run_reads_as_the_json_parser_reads_it() {
        let parsed = |raw: &str| serde_json::from_str::<Record>(raw).ok();
        for raw in [
            r#"{"a":1,"k":42,"f":1700000000123}"#,
            r#"{"a":12,"k":18446744073709551615,"f":0}"#,
        ] {
            assert_eq!(Record::plain_run(raw), parsed(raw), "{raw}");
            assert_eq!(Record::parse(raw).ok(), parsed(raw), "{raw}");
        }
        // Anything else goes to the parser, which reads it or says why not.
        for raw in [
            r#"{"a":1,"k":42,"f":17.5}"#,
            r#"{"a":1,"k":-4,"f":1}"#,
            r#"{"a":1,"k":4,"f":1,"t":"x"}"#,
            r#"{"a":+1,"k":4,"f":1}"#,
            r#"{"a":1,"k":4,"f":}"#,
            r#"{"a":4294967296,"k":4,"f":1}"#,
        ] {
            assert_eq!(Record::plain_run(raw), None, "{raw}");
            assert_eq!(Record::parse(raw).ok(), parsed(raw), "{raw}");
        }
    }

    #[test]
    fn a_plain_job_has_an_empty_record() {
        let topic = TopicConfig::named("t");
        let spec = Record::spec(&topic, Some("emit"), &Value::Null, Some(16));
        assert!(spec.is_empty());
        assert_eq!(spec.to_arg(), "");
    }

    #[test]
    fn a_record_keeps_only_what_differs() {
        let topic = TopicConfig::named("t");
        let spec = Record::spec(&topic, Some("webhook"), &json!({"a": 1}), Some(3));
        let spec = Record {
            max_fire_at: Some(9),
            ..spec
        };
        assert_eq!(
            spec.to_arg(),
            r#"{"t":"webhook","p":"{\"a\":1}","m":3,"x":9}"#
        );
        let job = spec
            .into_job(&topic, "j".into(), JobState::Scheduled, 5)
            .unwrap();
        assert_eq!(job.payload, json!({"a": 1}));
        assert_eq!(
            (job.fire_at, job.max_attempts, job.max_fire_at),
            (5, 3, Some(9))
        );
    }
}

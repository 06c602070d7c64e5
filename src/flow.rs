//! Flow control per key: the room a receiver gets. A job may carry a `flow_key` (a `webhook`
//! job's defaults to its URL's host and port); a topic's `flow` gives every key its limits,
//! and `flows` gives one key its own. A key's limits are a rate (`rate` fires started in any
//! `period_ms`) and a parallelism (runs at once), either or both. A due job whose key has no
//! room waits, still leased to its slot, and fires as soon as the key has room; it is never
//! failed or dropped for it, and other keys' jobs do not wait behind it. The counters live
//! in the store, shared by every instance (`store::flow`).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Most fires a key's rate may allow in one period.
pub const MAX_FLOW_RATE: u32 = 10_000;
/// Most runs at once a key's parallelism may allow.
pub const MAX_FLOW_PARALLELISM: u32 = 10_000;
/// Longest period of a key's rate: a day.
pub const MAX_FLOW_PERIOD_MS: u64 = 86_400_000;
/// Most keys with limits of their own (`flows`) in one topic.
pub const MAX_FLOW_KEYS: usize = 1_000;
/// Longest flow key, in characters.
pub const MAX_FLOW_KEY_LEN: usize = 128;

/// One key's limits: a rate, a parallelism, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowLimits {
    /// Most fires started in any `period_ms` (1 to 10,000); none when absent.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::wire::integer::option"
    )]
    #[schema(schema_with = schemas::rate)]
    pub rate: Option<u32>,
    /// The period of `rate`, in ms (1 to a day; 1,000 when absent).
    #[serde(
        default = "second",
        deserialize_with = "crate::wire::integer::required"
    )]
    #[schema(schema_with = schemas::period_ms)]
    pub period_ms: u64,
    /// Most runs at once (1 to 10,000); none when absent.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::wire::integer::option"
    )]
    #[schema(schema_with = schemas::parallelism)]
    pub parallelism: Option<u32>,
    /// Which key a job goes by (the topic's `flow` only): `job` (when absent) a job's own
    /// `flow_key`, else its type's (a webhook's URL host and port); `url` a webhook's is
    /// always its URL's host and port, and a webhook job naming a `flow_key` is refused, so
    /// no caller steps around the limits that protect a receiver.
    #[serde(default, skip_serializing_if = "KeyFrom::is_job")]
    pub key: KeyFrom,
}

/// Which flow key a job goes by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum KeyFrom {
    /// Its own `flow_key`, else its type's.
    #[default]
    Job,
    /// Its type's (a webhook's URL host and port) whenever the type has one.
    Url,
}

impl KeyFrom {
    fn is_job(&self) -> bool {
        *self == KeyFrom::Job
    }
}

/// The flow keys whose due runs a slot's pump sets aside rather than leases (`pump.lua`'s
/// ARGV[7]): each key whose share of the slot's waiting room is full, with the instant its
/// runs are due again. A run set aside is as one the slot sent back (`RunOutcome::Defer`),
/// without the lease and the settle, so a key's backlog of 50,000 due runs never stands
/// before another key's job. An engine may lease them all the same (the memory engine
/// does: it has no round trip to save), and the slot then sends them back itself.
#[doc(hidden)]
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SetAside {
    /// Each full key, and when its runs are due again.
    pub keys: Vec<(String, crate::time::Millis)>,
    /// The topic keys its jobs by their type's key first (`flow.key = "url"`).
    pub by_url: bool,
}

impl SetAside {
    /// No key set aside.
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The script's argument: `{"keys": {key: at}, "url": ..}`.
    pub(crate) fn to_json(&self) -> String {
        let keys: serde_json::Map<String, serde_json::Value> = self
            .keys
            .iter()
            .map(|(k, at)| (k.clone(), (*at).into()))
            .collect();
        serde_json::json!({"keys": keys, "url": self.by_url}).to_string()
    }
}

/// The flow key a job goes by under the topic's `flow`: `own` (its `flow_key`) or, when it
/// has none or the topic says `url`, `of_type()` (a webhook's URL host and port).
pub fn job_key(
    flow: Option<&FlowLimits>,
    own: Option<&str>,
    of_type: impl FnOnce() -> Option<String>,
) -> Option<String> {
    match (flow.map(|f| f.key), own) {
        (Some(KeyFrom::Url), _) | (_, None) => of_type().or_else(|| own.map(str::to_string)),
        (_, Some(own)) => Some(own.to_string()),
    }
}

fn second() -> u64 {
    1_000
}

impl FlowLimits {
    /// Checks the limits; the error names `field` and the part that is wrong.
    pub fn validate(&self, field: &'static str) -> Result<()> {
        let bad = |what: String| Err(Error::invalid(field, what));
        if self.rate.is_none() && self.parallelism.is_none() {
            // Each field is optional alone: 422, as for other refusals across fields.
            return Err(Error::unprocessable(
                field,
                "give rate, parallelism or both",
            ));
        }
        if let Some(r) = self.rate
            && !(1..=MAX_FLOW_RATE).contains(&r)
        {
            return bad(format!("rate must be 1 to {MAX_FLOW_RATE}, got {r}"));
        }
        if !(1..=MAX_FLOW_PERIOD_MS).contains(&self.period_ms) {
            return bad(format!(
                "period_ms must be 1 to {MAX_FLOW_PERIOD_MS} (a day), got {}",
                self.period_ms
            ));
        }
        if let Some(p) = self.parallelism
            && !(1..=MAX_FLOW_PARALLELISM).contains(&p)
        {
            return bad(format!(
                "parallelism must be 1 to {MAX_FLOW_PARALLELISM}, got {p}"
            ));
        }
        Ok(())
    }

    /// Checks the limits of one key (`PUT .../flows/{key}`): as [`FlowLimits::validate`], and
    /// no `key`, which only the topic's `flow` says.
    pub fn validate_own(&self, field: &'static str) -> Result<()> {
        self.validate(field)?;
        if self.key != KeyFrom::Job {
            // Valid alone, refused here: 422, as other refusals across fields.
            return Err(Error::unprocessable(
                field,
                "key is the topic's flow's only (which key a job goes by)",
            ));
        }
        Ok(())
    }

    /// How far past `period_ms` a fire still counts against the rate: a twentieth of the
    /// period, so that a receiver counting arrivals (each call's way there a little longer
    /// or shorter than another's, by up to that much) never sees more than `rate` in a
    /// period either. The rate's throughput is a twentieth below `rate` per period for it.
    pub fn guard_ms(&self) -> u64 {
        self.period_ms / 20
    }
}

/// What a flow key may hold: 1 to 128 characters, no space or control character (a host and
/// port, a customer id).
pub const FLOW_KEY_PATTERN: &str = r"^[^\x00-\x20\x7f-\x9f]{1,128}$";

/// Checks a flow key against [`FLOW_KEY_PATTERN`].
pub fn check_key(key: &str) -> Result<()> {
    let n = key.chars().count();
    if !(1..=MAX_FLOW_KEY_LEN).contains(&n) {
        return Err(Error::invalid(
            "flow_key",
            format!("must be 1 to {MAX_FLOW_KEY_LEN} characters, got {n}"),
        ));
    }
    if key
        .chars()
        .any(|c| c <= ' ' || ('\u{7f}'..='\u{9f}').contains(&c))
    {
        return Err(Error::invalid(
            "flow_key",
            "must hold no space or control character",
        ));
    }
    Ok(())
}

/// The refusal of a new key's own limits when `MAX_FLOW_KEYS` keys have theirs.
pub(crate) fn too_many_keys(topic: &str) -> Error {
    Error::invalid(
        "flows",
        format!("at most {MAX_FLOW_KEYS} keys of topic {topic:?} may have limits of their own"),
    )
}

/// The API description's bounds of the limits.
pub(crate) mod schemas {
    use utoipa::openapi::schema::Object;

    use crate::wire::schema::integer;

    pub(crate) fn rate() -> Object {
        integer(1, i64::from(super::MAX_FLOW_RATE), true).build()
    }

    pub(crate) fn period_ms() -> Object {
        integer(1, crate::num::signed(super::MAX_FLOW_PERIOD_MS), false).build()
    }

    pub(crate) fn parallelism() -> Object {
        integer(1, i64::from(super::MAX_FLOW_PARALLELISM), true).build()
    }

    pub(crate) fn flow_key() -> Object {
        use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
        ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
            .min_length(Some(1))
            .max_length(Some(super::MAX_FLOW_KEY_LEN))
            .pattern(Some(super::FLOW_KEY_PATTERN))
            .description(Some(
                "Jobs of one key share its flow limits (the topic's `flow`, or the key's own); \
                 a webhook job's defaults to its URL's host and port.",
            ))
            .build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_name_what_is_wrong() {
        let ok = FlowLimits {
            rate: Some(100),
            period_ms: 1_000,
            parallelism: Some(5),
            key: Default::default(),
        };
        assert!(ok.validate("flow").is_ok());
        for (bad, says) in [
            (
                FlowLimits {
                    rate: None,
                    parallelism: None,
                    ..ok
                },
                "give rate",
            ),
            (
                FlowLimits {
                    rate: Some(0),
                    ..ok
                },
                "rate must be",
            ),
            (FlowLimits { period_ms: 0, ..ok }, "period_ms must be"),
            (
                FlowLimits {
                    parallelism: Some(10_001),
                    ..ok
                },
                "parallelism must be",
            ),
        ] {
            let e = bad.validate("flow").unwrap_err().to_string();
            assert!(e.contains("flow") && e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_key_is_short_and_has_no_space() {
        assert!(check_key("example.com:443").is_ok());
        assert!(check_key("").is_err());
        assert!(check_key("a b").is_err());
        assert!(check_key("a\u{0}").is_err());
        assert!(check_key("h\u{e9}te").is_ok());
        assert!(check_key("a\u{85}").is_err());
        assert!(check_key(&"k".repeat(129)).is_err());
    }

    /// A job goes by its own key unless the topic keys by URL; by its type's when it has
    /// none.
    #[test]
    fn a_job_goes_by_its_own_key_unless_the_topic_keys_by_url() {
        let by_job = FlowLimits {
            rate: Some(1),
            period_ms: 1_000,
            parallelism: None,
            key: KeyFrom::Job,
        };
        let by_url = FlowLimits {
            key: KeyFrom::Url,
            ..by_job
        };
        let url = || Some("hooks.example.com:443".to_string());
        let none = || None;
        assert_eq!(
            job_key(Some(&by_job), Some("mine"), url).as_deref(),
            Some("mine")
        );
        assert_eq!(job_key(None, Some("mine"), url).as_deref(), Some("mine"));
        assert_eq!(
            job_key(Some(&by_url), Some("mine"), url).as_deref(),
            Some("hooks.example.com:443"),
            "no caller steps around the receiver's limits"
        );
        assert_eq!(
            job_key(Some(&by_url), Some("mine"), none).as_deref(),
            Some("mine"),
            "a type with no URL keeps the job's own"
        );
        assert_eq!(
            job_key(Some(&by_job), None, url).as_deref(),
            Some("hooks.example.com:443")
        );
        assert_eq!(job_key(Some(&by_job), None, none), None);
        assert!(by_url.validate("flow").is_ok());
        assert!(
            by_url.validate_own("flow").is_err(),
            "a key's own limits say no key"
        );
    }
}

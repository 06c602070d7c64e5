//! Labels: a few short `key=value` pairs a job may carry (`{"campaign": "spring"}`), by which
//! jobs are listed, cancelled and (when dead) requeued together. Kept in the job's record
//! only when given, so a job without labels costs nothing more.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// Most labels one job may carry.
pub const MAX_LABELS: usize = 8;
/// Longest label key, in characters.
pub const MAX_LABEL_KEY: usize = 64;
/// Longest label value, in characters.
pub const MAX_LABEL_VALUE: usize = 128;
/// What a label key may hold.
pub const LABEL_KEY_PATTERN: &str = "^[A-Za-z0-9_.-]{1,64}$";

/// A job's labels, by key.
pub type Labels = BTreeMap<String, String>;

/// Checks a job's labels, naming the one at fault (`labels.campaign`).
pub fn check(labels: &Labels) -> Result<()> {
    if labels.len() > MAX_LABELS {
        return Err(Error::invalid(
            "labels",
            format!("at most {MAX_LABELS} labels, got {}", labels.len()),
        ));
    }
    for (k, v) in labels {
        check_key(k)?;
        let n = v.chars().count();
        if n > MAX_LABEL_VALUE || v.chars().any(char::is_control) {
            return Err(Error::invalid(
                "labels",
                format!(
                    "the value of {k:?} must be at most {MAX_LABEL_VALUE} characters with no control character"
                ),
            ));
        }
    }
    Ok(())
}

fn check_key(k: &str) -> Result<()> {
    let ok = (1..=MAX_LABEL_KEY).contains(&k.len())
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "labels",
            format!("a key must be 1 to {MAX_LABEL_KEY} characters of [A-Za-z0-9_.-], got {k:?}"),
        ))
    }
}

/// A label to select jobs by: `key:value` as a query gives it (`campaign:spring`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelFilter {
    /// The label's key.
    pub key: String,
    /// The value it must have.
    pub value: String,
}

impl LabelFilter {
    /// Reads `key:value`; the error names `label`.
    pub fn parse(s: &str) -> Result<LabelFilter> {
        let Some((key, value)) = s.split_once(':') else {
            return Err(Error::invalid(
                "label",
                format!("must be key:value, got {s:?}"),
            ));
        };
        check_key(key).map_err(|_| {
            Error::invalid(
                "label",
                format!(
                    "the key must be 1 to {MAX_LABEL_KEY} characters of [A-Za-z0-9_.-], got {key:?}"
                ),
            )
        })?;
        Ok(LabelFilter {
            key: key.to_string(),
            value: value.to_string(),
        })
    }

    /// Whether `labels` hold this label.
    pub fn matches(&self, labels: &Labels) -> bool {
        labels.get(&self.key).is_some_and(|v| *v == self.value)
    }
}

/// The API description of a job's labels.
pub(crate) fn schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, SchemaType, Type};
    let value = ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .max_length(Some(MAX_LABEL_VALUE))
        .pattern(Some("^[^\\x00-\\x1f\\x7f-\\x9f]*$"))
        .build();
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .max_properties(Some(MAX_LABELS))
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(SchemaType::Type(Type::String))
                .pattern(Some(LABEL_KEY_PATTERN)),
        ))
        .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(Schema::Object(value)))))
        .description(Some(
            "A few short key=value pairs (at most 8; keys of [A-Za-z0-9_.-], values up to 128 characters): jobs are listed, cancelled and requeued together by one (`?label=key:value`).",
        ))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_few_and_short_and_a_filter_reads_key_value() {
        let mut l = Labels::new();
        l.insert("campaign".into(), "spring".into());
        assert!(check(&l).is_ok());
        l.insert("bad key".into(), "x".into());
        assert!(check(&l).unwrap_err().to_string().contains("labels"));
        let many: Labels = (0..9).map(|i| (format!("k{i}"), "v".into())).collect();
        assert!(check(&many).is_err());
        let f = LabelFilter::parse("campaign:spring:2026").unwrap();
        assert_eq!(
            (f.key.as_str(), f.value.as_str()),
            ("campaign", "spring:2026")
        );
        assert!(LabelFilter::parse("nocolon").is_err());
        let mut j = Labels::new();
        j.insert("campaign".into(), "spring:2026".into());
        assert!(f.matches(&j));
        j.insert("campaign".into(), "autumn".into());
        assert!(!f.matches(&j));
    }
}

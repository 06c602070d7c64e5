//! Field schemas for the API description, built from the bounds where they are checked:
//! each bounded field of a request type names, in its `#[schema(schema_with = ...)]`, a
//! function next to its check (`validate.rs`, `topic.rs`, `claims.rs`) that builds its schema
//! with these helpers. Integer bounds stay integers (a generator drawing from a float bound
//! would send fractions).

use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};

/// An integer from `min` to `max`; with `nullable`, also `null` (a field that may be left
/// out).
pub(crate) fn integer(min: i64, max: i64, nullable: bool) -> ObjectBuilder {
    let kind = if nullable {
        SchemaType::from_iter([Type::Integer, Type::Null])
    } else {
        SchemaType::Type(Type::Integer)
    };
    ObjectBuilder::new()
        .schema_type(kind)
        .minimum(Some(min))
        .maximum(Some(max))
}

/// A number (or `null`) from `min` to `max`.
pub(crate) fn number(min: f64, max: f64) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Number, Type::Null]))
        .minimum(Some(min))
        .maximum(Some(max))
}

/// An integer (or `null`) that is one of `values`.
pub(crate) fn one_of(values: impl IntoIterator<Item = i64>) -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .enum_values(Some(values))
        .build()
}

/// Defines `fn $name() -> $ty`: the schema `$base()` with `$text` as its description. A field
/// whose schema is built with `schema_with` loses its doc comment in the description, so the
/// text is given here, beside the request type, once.
macro_rules! described {
    ($(fn $name:ident() -> $ty:ty = $base:path, $text:literal;)+) => {
        $(
            fn $name() -> $ty {
                let mut schema: $ty = $base();
                schema.description = Some($text.to_string());
                schema
            }
        )+
    };
}
pub(crate) use described;

#[cfg(test)]
mod tests {
    use serde_json::Value;

    fn doc() -> Value {
        super::super::openapi::document(
            &[],
            &Default::default(),
            &crate::config::Settings::defaults().limits,
        )
    }

    fn field<'a>(doc: &'a Value, schema: &str, field: &str) -> &'a Value {
        &doc["components"]["schemas"][schema]["properties"][field]
    }

    #[test]
    fn the_description_states_the_bounds_that_are_checked() {
        let doc = doc();
        let max = |s, f| field(&doc, s, f)["maximum"].as_i64();
        assert_eq!(
            max("JobBody", "delay_ms"),
            Some(crate::validate::MAX_DELAY_MS)
        );
        assert_eq!(max("JobBody", "fire_at"), Some(crate::validate::MAX_MILLIS));
        assert_eq!(
            max("ClaimBody", "max"),
            Some(crate::num::signed(crate::num::usize_u64(
                crate::claims::MAX_CLAIM
            )))
        );
        assert_eq!(
            max("TopicSettings", "max_attempts"),
            Some(i64::from(crate::topic::MAX_ATTEMPTS))
        );
        let slots = field(&doc, "TopicSettings", "slots")["enum"]
            .as_array()
            .cloned();
        assert_eq!(
            slots.and_then(|s| s.last().and_then(Value::as_i64)),
            Some(i64::from(crate::topic::MAX_SLOTS))
        );
        assert_eq!(
            field(&doc, "AckItem", "id")["maxLength"].as_u64(),
            Some(crate::num::usize_u64(crate::validate::MAX_ID_LEN))
        );
        // Integer bounds are written as integers, and a field keeps its description.
        assert!(field(&doc, "ClaimBody", "wait_ms")["maximum"].is_u64());
        assert!(field(&doc, "ClaimBody", "wait_ms")["description"].is_string());
    }
}

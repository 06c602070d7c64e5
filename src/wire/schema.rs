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

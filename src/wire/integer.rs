//! Integers as JSON (and JSON Schema) count them: `5` and `5.0` alike; `5.5` is refused.

use serde::de::Error;
use serde::{Deserialize, Deserializer};

fn exact<T: TryFrom<i64>>(n: serde_json::Number) -> Result<T, String> {
    let i = match (n.as_i64(), n.as_f64()) {
        (Some(i), _) => i,
        (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => crate::num::float_int(f),
        _ => return Err(format!("expected an integer, got {n}")),
    };
    T::try_from(i).map_err(|_| format!("{i} is out of range"))
}

pub(crate) fn option<'de, D: Deserializer<'de>, T: TryFrom<i64>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Option::<serde_json::Number>::deserialize(d)?
        .map(exact)
        .transpose()
        .map_err(D::Error::custom)
}

pub(crate) fn required<'de, D: Deserializer<'de>, T: TryFrom<i64>>(d: D) -> Result<T, D::Error> {
    exact(serde_json::Number::deserialize(d)?).map_err(D::Error::custom)
}

pub(crate) fn list<'de, D: Deserializer<'de>, T: TryFrom<i64>>(d: D) -> Result<Vec<T>, D::Error> {
    Vec::<serde_json::Number>::deserialize(d)?
        .into_iter()
        .map(exact)
        .collect::<Result<_, _>>()
        .map_err(D::Error::custom)
}

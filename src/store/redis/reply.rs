//! Reading a script's reply with checks: a short or odd reply is an error that names the
//! script, never an index panic.

use redis::Value;

use crate::error::{Error, Result};

/// A script's reply, read with checks: a short or odd reply is an error that names the
/// script, never an index panic.
pub(super) struct Reply<'a> {
    script: &'static str,
    pub(super) items: &'a [Value],
}

impl<'a> Reply<'a> {
    pub(super) fn new(script: &'static str, items: &'a [Value]) -> Self {
        Reply { script, items }
    }

    pub(super) fn corrupt(&self, what: impl std::fmt::Display) -> Error {
        Error::Corrupt(format!(
            "{}.lua answered {} values: {what}",
            self.script,
            self.items.len()
        ))
    }

    pub(super) fn get(&self, i: usize) -> Result<&'a Value> {
        self.items
            .get(i)
            .ok_or_else(|| self.corrupt(format!("value {} is missing", i + 1)))
    }

    pub(super) fn int(&self, i: usize) -> Result<i64> {
        int(self.get(i)?).map_err(|e| self.corrupt(e))
    }

    pub(super) fn text(&self, i: usize) -> Result<String> {
        text(self.get(i)?).map_err(|e| self.corrupt(e))
    }

    pub(super) fn slice(&self, from: usize, to: usize) -> Result<&'a [Value]> {
        self.items
            .get(from..to)
            .ok_or_else(|| self.corrupt(format!("values {}..{to} are missing", from + 1)))
    }

    /// The values from `from` on, as records of `width` values each.
    pub(super) fn records(
        &self,
        from: usize,
        width: usize,
    ) -> Result<std::slice::ChunksExact<'a, Value>> {
        let rest = self.slice(from, self.items.len().max(from))?;
        if rest.len() % width != 0 {
            return Err(self.corrupt(format!(
                "records of {width} values do not divide {}",
                rest.len()
            )));
        }
        Ok(rest.chunks_exact(width))
    }
}

pub(super) fn int(v: &Value) -> Result<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .map(crate::num::float_int)
            .ok_or_else(|| Error::Corrupt(format!("not a number: {v:?}"))),
        other => Err(Error::Corrupt(format!("not a number: {other:?}"))),
    }
}

pub(super) fn text(v: &Value) -> Result<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone())
            .map_err(|_| Error::Corrupt("a reply is not UTF-8".to_string())),
        Value::SimpleString(s) => Ok(s.clone()),
        Value::Int(i) => Ok(i.to_string()),
        Value::Nil => Ok(String::new()),
        other => Err(Error::Corrupt(format!("not text: {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_or_odd_reply_is_an_error_naming_the_script() {
        let items = vec![
            Value::Int(-1),
            Value::Int(0),
            Value::BulkString(b"a".to_vec()),
        ];
        let reply = Reply::new("pump", &items);
        let err = reply.records(2, 4).unwrap_err().to_string();
        assert!(err.contains("pump.lua"), "{err}");
        let err = reply.int(7).unwrap_err().to_string();
        assert!(err.contains("pump.lua") && err.contains("value 8"), "{err}");
        let err = reply.slice(2, 9).unwrap_err().to_string();
        assert!(err.contains("pump.lua"), "{err}");
        assert_eq!(reply.int(0).unwrap(), -1);
        assert_eq!(reply.records(3, 4).unwrap().count(), 0);
    }
}

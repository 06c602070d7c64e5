//! Typed errors of the library. The HTTP layer maps them to statuses in one place
//! (`http/error.rs`); nothing else decides what a caller sees.

use thiserror::Error;

/// Everything a store or runtime call can fail with.
#[derive(Debug, Error)]
pub enum Error {
    /// A caller's argument was rejected before the store was touched.
    #[error("invalid {field}: {message}")]
    Invalid {
        /// The field (or query parameter) at fault.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },

    /// Every field is valid on its own, but they disagree (a booking that ends before it
    /// starts): what a schema of the fields one by one cannot say.
    #[error("invalid {field}: {message}")]
    Unprocessable {
        /// The field at fault.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },

    /// A payload larger than its topic allows.
    #[error(
        "payload is {size} bytes, over the topic's limit of {limit} bytes (its max_payload_bytes, set by PUT /v1/topics/TOPIC)"
    )]
    PayloadTooLarge {
        /// The payload's size, in bytes.
        size: usize,
        /// The topic's limit, in bytes.
        limit: usize,
    },

    /// A limit the operator set refuses the call (most topics, most slots in all, ...):
    /// nothing changed.
    #[error("{message} (the limit is {setting})")]
    LimitReached {
        /// The setting that sets the limit (`limits.max_topics`).
        setting: &'static str,
        /// What would pass the limit.
        message: String,
    },

    /// A topic that does not exist while auto-creation is off.
    #[error("topic {0:?} does not exist and auto-creation is off")]
    UnknownTopic(String),

    /// A read, cancel or reset named a topic that does not exist (these never create one).
    #[error("topic {0:?} does not exist")]
    TopicNotFound(String),

    /// A topic setting that may not change once jobs may exist (it would misroute them).
    #[error("topic {topic:?}: {message}")]
    TopicConflict {
        /// The topic.
        topic: String,
        /// What may not change, and why.
        message: String,
    },

    /// A job or a claim that does not fit its topic's kind: a pull job in a topic whose jobs
    /// the service runs, another type in a pull topic, or a claim of a topic that is not a
    /// pull topic. It depends on the topic's settings, not on the request alone.
    #[error("topic {topic:?}: {message}")]
    WrongTopicKind {
        /// The topic.
        topic: String,
        /// What does not fit, and how to fix it.
        message: String,
    },

    /// A pump whose owner fence is not the slot's current one: another instance owns the
    /// slot now.
    #[error("topic {topic:?} slot {slot}: fenced: {message}")]
    Fenced {
        /// The topic.
        topic: String,
        /// The slot.
        slot: u32,
        /// The fences involved.
        message: String,
    },

    /// A write routed with a slot count that a doubling has left behind (this instance's
    /// settings were read before it). The store front reads the settings again and retries;
    /// it reaches a caller only if the topic keeps changing.
    #[error("topic {topic:?}: {message}; try again")]
    StaleLayout {
        /// The topic.
        topic: String,
        /// The counts involved.
        message: String,
    },

    /// The store could not be reached or answered with an error.
    #[error("store unavailable: {0}")]
    Unavailable(String),

    /// Redis could not be reached or answered with an error: that error is the source.
    #[error("store unavailable: {0}")]
    Redis(#[source] redis::RedisError),

    /// A file of the store (the journal) could not be read or written: `what` was being
    /// done, and the I/O error is the source.
    #[error("store unavailable: {what}: {source}")]
    Io {
        /// What was being done, and to which file.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },

    /// The store is full (Redis over its `maxmemory`, or the journal's disk): the write was
    /// refused before it changed anything.
    #[error("store full, nothing was changed: {0}")]
    StoreFull(String),

    /// The store's data is not what this version expects (a bug or a foreign writer).
    #[error("corrupt store data: {0}")]
    Corrupt(String),

    /// Stored text that does not decode (a job record, a payload, a topic's settings, an
    /// event): `what` it was, and the decoder's error as the source.
    #[error("corrupt store data: {what}: {source}")]
    Undecodable {
        /// What was read, and where.
        what: String,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
}

impl Error {
    /// Fields that are each valid but disagree: 422.
    pub fn unprocessable(field: &'static str, message: impl Into<String>) -> Self {
        Error::Unprocessable {
            field,
            message: message.into(),
        }
    }

    /// An `Undecodable` error: `what` did not decode, with `source`.
    pub(crate) fn undecodable(what: impl Into<String>, source: serde_json::Error) -> Self {
        Error::Undecodable {
            what: what.into(),
            source,
        }
    }

    /// An `Io` error: `what` (with the file) failed with `source`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    /// The store did not answer, or not well: the call may succeed later and changed
    /// nothing it can name (503).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Error::Unavailable(_) | Error::Redis(_) | Error::Io { .. }
        )
    }

    /// An `Invalid` error about `field`.
    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        Error::Invalid {
            field,
            message: message.into(),
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        // Scripts and commands are refused with OOM before they run (scripts/`maxmemory`).
        if e.code() == Some("OOM") {
            return Error::StoreFull(e.to_string());
        }
        Error::Redis(e)
    }
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_wrapped_error_keeps_its_cause() {
        let io = Error::io(
            "journal /x: appending",
            std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied"),
        );
        let cause = io.source().expect("the I/O error is the source");
        assert_eq!(cause.to_string(), "denied");
        assert_eq!(
            io.to_string(),
            "store unavailable: journal /x: appending: denied"
        );
        let refused = redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ));
        let e = Error::from(refused);
        assert!(e.source().is_some(), "{e:?}");
        assert!(e.is_unavailable() && io.is_unavailable());
    }
}

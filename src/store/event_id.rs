//! An event's position in a topic's stream, and the `after` cursor of a page of events.
//! Its text is `ms-seq-slot` (Redis: the slot stream's id and the slot; memory: the ring's
//! sequence number, then zeros); `ms-seq` is accepted too, as a position before every slot's
//! entries of that instant. Pages are ordered by (ms, seq, slot).

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct EventId {
    pub(crate) ms: u64,
    pub(crate) seq: u64,
    pub(crate) slot: u32,
}

impl EventId {
    /// A Redis stream id (`ms-seq`) of slot `slot`'s stream.
    pub(crate) fn of_stream(id: &str, slot: u32) -> Option<Self> {
        let (ms, seq) = id.split_once('-')?;
        Some(EventId {
            ms: ms.parse().ok()?,
            seq: seq.parse().ok()?,
            slot,
        })
    }

    /// The API's form, `ms-seq-slot` or `ms-seq`; `None` for anything else.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, '-');
        fn number<T: std::str::FromStr>(part: Option<&str>) -> Option<T> {
            part.filter(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))?
                .parse()
                .ok()
        }
        let (ms, seq) = (number(parts.next())?, number(parts.next())?);
        let slot = match parts.next() {
            None => 0,
            some => number(some)?,
        };
        Some(EventId { ms, seq, slot })
    }
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}-{}", self.ms, self.seq, self.slot)
    }
}

#[cfg(test)]
mod tests {
    use super::EventId;

    #[test]
    fn both_forms_parse_and_anything_else_is_refused() {
        let id = EventId::parse("17-2-3").unwrap();
        assert_eq!((id.ms, id.seq, id.slot), (17, 2, 3));
        assert_eq!(id.to_string(), "17-2-3");
        assert_eq!(EventId::parse("17-2").unwrap().slot, 0);
        for bad in ["", "17", "a-1", "1--2", "1-2-3-4", "-1-2", "1-2-x"] {
            assert!(EventId::parse(bad).is_none(), "{bad:?}");
        }
    }
}

//! An event's position in a topic's stream, and the `after` cursor of a page of events.
//! Its text is `ms-seq-slot` (Redis: the slot stream's entry and the slot; memory: the ring's
//! sequence number, then zeros); `ms-seq` is accepted too, with slot 0. Pages are ordered by
//! (ms, seq, slot).
//!
//! On Redis a stream entry holds the events of one settle, so an event's `seq` is its
//! entry's sequence number times [`PER_ENTRY`] plus its place in the entry: the text keeps
//! its form and its order. (A cursor handed out before entries held several events reads
//! as a place in an earlier entry: the page after it repeats a few events, and loses none.)

/// How many places one stream entry's events can have in an id.
pub(crate) const PER_ENTRY: u64 = 1 << 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct EventId {
    pub(crate) ms: u64,
    pub(crate) seq: u64,
    pub(crate) slot: u32,
}

impl EventId {
    /// The event at `place` in the entry `id` (`ms-seq`) of slot `slot`'s stream.
    pub(crate) fn of_stream(id: &str, slot: u32, place: u64) -> Option<Self> {
        let (ms, seq) = id.split_once('-')?;
        let seq: u64 = seq.parse().ok()?;
        (place < PER_ENTRY).then_some(())?;
        Some(EventId {
            ms: ms.parse().ok()?,
            seq: seq.checked_mul(PER_ENTRY)? + place,
            slot,
        })
    }

    /// Where slot `slot`'s events after this one start: the entry (`ms-seq`, inclusive)
    /// and how many of its events to skip.
    pub(crate) fn stream_start(&self, slot: u32) -> (String, u64) {
        let (seq, place) = (self.seq / PER_ENTRY, self.seq % PER_ENTRY);
        // Of the events at this place, a later slot's come after this one.
        let skip = if slot > self.slot { place } else { place + 1 };
        (format!("{}-{}", self.ms, seq), skip)
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

    #[test]
    fn a_stream_event_is_its_entry_and_place_and_the_start_after_it_skips_what_came_before() {
        let a = EventId::of_stream("17-2", 3, 0).unwrap();
        let b = EventId::of_stream("17-2", 3, 5).unwrap();
        let c = EventId::of_stream("17-3", 3, 0).unwrap();
        let d = EventId::of_stream("18-0", 0, 0).unwrap();
        assert!(a < b && b < c && c < d);
        assert_eq!(EventId::parse(&b.to_string()), Some(b));
        // After b: slot 3 (and earlier slots) skip b's place and those before it; a later
        // slot's events at that place come after b.
        assert_eq!(b.stream_start(3), ("17-2".to_string(), 6));
        assert_eq!(b.stream_start(1), ("17-2".to_string(), 6));
        assert_eq!(b.stream_start(4), ("17-2".to_string(), 5));
        assert!(EventId::of_stream("17-2", 0, super::PER_ENTRY).is_none());
        assert!(EventId::of_stream("17-x", 0, 0).is_none());
    }
}

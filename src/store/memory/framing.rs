//! The journal's framing on disk, and how a damaged file is told from a torn one.
//!
//! A journal of this version opens with [`MAGIC`]; each record is
//! `[length: u32 LE][crc32 of the body: u32 LE][crc32 of those 8 bytes: u32 LE][body]`.
//! The header's own checksum is what tells a damaged length from a torn tail: a length that
//! runs past the end of the file is believed only when its header checks, so only the last
//! record, incomplete, can be dropped as torn. A header that does not check is damage,
//! unless every byte from it to the end is zero (a file extended by a crash before its data
//! reached the disk). A body that does not check is damage, unless it is the last record's.
//!
//! A file without the magic is of the first version (`[length][crc32 of the body][body]`)
//! only when it reads whole and clean to its end under that version's rules (every record's
//! checksum, nothing torn): it is then read once, and rewritten in this one at start. Any
//! other file without the magic is damaged at offset 0 (a damaged magic must never be read
//! as the first framing, whose length past the end would pass for a torn tail and lose
//! every record). The first framing is retired in two steps: this release rewrites every
//! such file at its first start; the next refuses a file without the magic outright.

/// The first bytes of a journal of this version.
pub(super) const MAGIC: &[u8; 8] = b"TOCJ\x00\x02\r\n";
/// Largest record accepted when reading (a length beyond it is damage, not a job).
pub(super) const MAX_RECORD: usize = 64 * 1024 * 1024;

/// A journal file's framing version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Version {
    /// No magic, 8-byte headers without a checksum of their own.
    V1,
    /// [`MAGIC`], 12-byte headers with a checksum of their own.
    V2,
}

impl Version {
    /// The header's length.
    pub(super) fn header(self) -> usize {
        match self {
            Version::V1 => 8,
            Version::V2 => 12,
        }
    }

    /// Where the first record starts.
    pub(super) fn start(self) -> usize {
        match self {
            Version::V1 => 0,
            Version::V2 => MAGIC.len(),
        }
    }
}

/// What cannot be read at an offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Fault {
    /// An incomplete last record (a write torn by a crash): may be dropped.
    Torn(&'static str),
    /// Anything else: the file is damaged there.
    Damaged(String),
}

/// Appends one record to `out`: its header, then the body `write` puts there.
pub(super) fn framed(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; 12]);
    write(out);
    let body = &out[start + 12..];
    // Records are far below MAX_RECORD (64 MiB), so the length fits.
    let (len, crc) = (crate::num::to_u32(body.len()), crc32fast::hash(body));
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    let own = crc32fast::hash(&out[start..start + 8]);
    out[start + 8..start + 12].copy_from_slice(&own.to_le_bytes());
}

/// The version of a file that starts with `first` (up to 8 bytes) and is `size` long;
/// `None` for the start of a file whose magic was torn (shorter than it, a prefix of it).
pub(super) fn version(first: &[u8], size: usize) -> Option<Version> {
    if first == MAGIC {
        Some(Version::V2)
    } else if size < MAGIC.len() && MAGIC.starts_with(first) {
        None
    } else {
        Some(Version::V1)
    }
}

/// Judges the header at `at` of a file of `size` bytes: the body's length and checksum, or
/// the fault. `rest_is_zero` is asked only when the header does not check.
pub(super) fn header(
    version: Version,
    head: &[u8],
    at: usize,
    size: usize,
    rest_is_zero: impl FnOnce() -> bool,
) -> Result<(usize, u32), Fault> {
    let word = |i: usize| u32::from_le_bytes(head[i..i + 4].try_into().expect("4 bytes"));
    if version == Version::V2 && crc32fast::hash(&head[..8]) != word(8) {
        return Err(if rest_is_zero() {
            Fault::Torn("a zero-filled tail")
        } else {
            Fault::Damaged(
                "the record's header fails its checksum (a damaged length or checksum)".into(),
            )
        });
    }
    let len = word(0) as usize;
    if len > MAX_RECORD {
        return Err(Fault::Damaged(format!("a record claims {len} bytes")));
    }
    if at + version.header() + len > size {
        return Err(Fault::Torn("a partial body"));
    }
    Ok((len, word(4)))
}

/// Judges a body read whole against its checksum; `last`: nothing follows it.
pub(super) fn body(body: &[u8], crc: u32, last: bool) -> Result<(), Fault> {
    match (crc32fast::hash(body) == crc, last) {
        (true, _) => Ok(()),
        (false, true) => Err(Fault::Torn("the last record's body fails its checksum")),
        (false, false) => Err(Fault::Damaged(
            "the record's body fails its checksum".into(),
        )),
    }
}

/// One record found by [`scan`]: its body.
pub(super) struct Found<'a> {
    pub body: &'a [u8],
}

/// What [`scan`] found in a whole file.
pub(super) struct Scan<'a> {
    pub version: Version,
    pub records: Vec<Found<'a>>,
    /// A torn tail: where it starts, and why.
    pub torn: Option<(usize, &'static str)>,
    /// Damaged stretches: start, end, why. With `resync` off, at most one, to the end.
    pub damaged: Vec<(usize, usize, String)>,
}

/// Whether a file without the magic reads whole and clean as the first framing: `Err` with
/// the offset and the fault that stops it when not.
pub(super) fn reads_whole_as_v1(
    buf: &[u8],
    decodes: impl Fn(&[u8]) -> bool,
) -> Result<(), (usize, String)> {
    let s = scan_as(buf, Version::V1, false, decodes);
    if let Some((at, why)) = s.torn {
        return Err((at, why.to_string()));
    }
    match s.damaged.first() {
        Some((at, _, why)) => Err((*at, why.clone())),
        None => Ok(()),
    }
}

/// Why a file without the magic that does not read as the first framing is refused.
pub(super) fn no_magic(at: usize, why: &str) -> String {
    format!(
        "the file does not open with the journal's magic, and it does not read whole as the \
         first framing either (at offset {at}: {why}): a damaged magic, not a journal of before"
    )
}

/// Reads the records of a whole file in memory (for `toc journal check` and `salvage`).
/// With `resync`, reading goes on after damage at the next offset where a whole record
/// checks (its header and body, and `decodes`), so that one bad byte costs one record. A
/// file without the magic that does not read whole as the first framing is damaged at
/// offset 0, and what follows the magic's place is read as this version.
pub(super) fn scan<'a>(buf: &'a [u8], resync: bool, decodes: impl Fn(&[u8]) -> bool) -> Scan<'a> {
    let size = buf.len();
    let first = &buf[..size.min(MAGIC.len())];
    let version = version(first, size).unwrap_or(Version::V2);
    if version == Version::V1 {
        match reads_whole_as_v1(buf, &decodes) {
            Ok(()) => return scan_as(buf, Version::V1, resync, decodes),
            Err((at, why)) => {
                let mut v2 = scan_as(buf, Version::V2, resync, decodes);
                v2.damaged
                    .insert(0, (0, MAGIC.len().min(size), no_magic(at, &why)));
                return v2;
            }
        }
    }
    scan_as(buf, version, resync, decodes)
}

/// [`scan`] under `version`'s rules, whatever the file's first bytes.
fn scan_as<'a>(
    buf: &'a [u8],
    version: Version,
    resync: bool,
    decodes: impl Fn(&[u8]) -> bool,
) -> Scan<'a> {
    let size = buf.len();
    let mut out = Scan {
        version,
        records: Vec::new(),
        torn: None,
        damaged: Vec::new(),
    };
    if size < MAGIC.len() && version == Version::V2 {
        if size > 0 {
            out.torn = Some((0, "a partial magic"));
        }
        return out;
    }
    let mut at = version.start();
    let hl = version.header();
    while at < size {
        let fault = if size - at < hl {
            Fault::Torn("a partial header")
        } else {
            match record_at(buf, version, at, &decodes) {
                Ok(len) => {
                    out.records.push(Found {
                        body: &buf[at + hl..at + hl + len],
                    });
                    at += hl + len;
                    continue;
                }
                Err(f) => f,
            }
        };
        match fault {
            Fault::Torn(why) => {
                out.torn = Some((at, why));
                break;
            }
            Fault::Damaged(why) => {
                let next = resync
                    .then(|| (at + 1..size).find(|&p| record_at(buf, version, p, &decodes).is_ok()))
                    .flatten();
                out.damaged.push((at, next.unwrap_or(size), why));
                match next {
                    Some(p) => at = p,
                    None => break,
                }
            }
        }
    }
    out
}

/// The body length of a whole, checked record at `at`, or its fault.
fn record_at(
    buf: &[u8],
    version: Version,
    at: usize,
    decodes: &impl Fn(&[u8]) -> bool,
) -> Result<usize, Fault> {
    let (size, hl) = (buf.len(), version.header());
    if size - at < hl {
        return Err(Fault::Torn("a partial header"));
    }
    let (len, crc) = header(version, &buf[at..at + hl], at, size, || {
        buf[at..].iter().all(|b| *b == 0)
    })?;
    let b = &buf[at + hl..at + hl + len];
    body(b, crc, at + hl + len == size)?;
    if !decodes(b) {
        return Err(Fault::Damaged("the record's body does not decode".into()));
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(bodies: &[&[u8]]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        for b in bodies {
            framed(&mut out, |o| o.extend_from_slice(b));
        }
        out
    }

    fn ok(_: &[u8]) -> bool {
        true
    }

    #[test]
    fn a_whole_file_reads_every_record() {
        let f = file(&[b"one", b"two", b"three"]);
        let s = scan(&f, false, ok);
        assert_eq!(s.version, Version::V2);
        let got: Vec<&[u8]> = s.records.iter().map(|r| r.body).collect();
        assert_eq!(got, [&b"one"[..], b"two", b"three"]);
        assert!(s.torn.is_none() && s.damaged.is_empty());
    }

    /// A damaged length anywhere, the first record's included, is damage: before the header
    /// checksum it was taken for a torn tail and every record after it was cut off.
    #[test]
    fn a_damaged_length_is_damage_not_a_torn_tail() {
        let f = file(&[b"one", b"two", b"three"]);
        for (n, at) in [(0, 8), (1, 8 + 15)] {
            let mut bad = f.clone();
            bad[at + 1] ^= 0x40; // the length now runs past the end
            let s = scan(&bad, false, ok);
            assert_eq!(s.records.len(), n, "records before the damage");
            assert!(s.torn.is_none(), "not torn");
            assert_eq!(s.damaged[0].0, at, "damage named at its offset");
        }
    }

    #[test]
    fn only_an_incomplete_last_record_is_torn() {
        let f = file(&[b"one", b"two"]);
        for cut in 1..15 {
            let s = scan(&f[..f.len() - cut], false, ok);
            assert_eq!(s.records.len(), 1, "cut {cut}");
            assert!(s.torn.is_some() && s.damaged.is_empty(), "cut {cut}");
        }
        let mut zeros = f.clone();
        zeros.extend_from_slice(&[0; 40]);
        let s = scan(&zeros, false, ok);
        assert_eq!(
            (s.records.len(), s.torn.map(|t| t.1)),
            (2, Some("a zero-filled tail"))
        );
        let mut body = f.clone();
        let n = body.len();
        body[n - 1] ^= 1;
        assert!(scan(&body, false, ok).torn.is_some(), "the last body");
        let mut middle = f.clone();
        middle[8 + 12] ^= 1;
        let s = scan(&middle, false, ok);
        assert!(
            s.torn.is_none() && s.damaged.len() == 1,
            "a body in the middle is damage"
        );
    }

    #[test]
    fn resync_skips_one_damaged_record_and_keeps_the_rest() {
        let f = file(&[b"one", b"two", b"three", b"four"]);
        let mut bad = f.clone();
        bad[8 + 15 + 2] ^= 0xff; // inside the second record's length
        let s = scan(&bad, true, ok);
        let got: Vec<&[u8]> = s.records.iter().map(|r| r.body).collect();
        assert_eq!(got, [&b"one"[..], b"three", b"four"]);
        assert_eq!(s.damaged.len(), 1);
        assert_eq!((s.damaged[0].0, s.damaged[0].1), (8 + 15, 8 + 30));
    }

    #[test]
    fn the_version_is_told_by_the_magic() {
        assert_eq!(version(MAGIC, 100), Some(Version::V2));
        assert_eq!(version(&MAGIC[..3], 3), None, "a torn magic");
        assert_eq!(version(&[3, 0, 0, 0, 1, 2, 3, 4], 100), Some(Version::V1));
    }
}

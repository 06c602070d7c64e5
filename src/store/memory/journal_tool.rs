//! `toc journal check FILE` and `toc journal salvage FILE`: what an operator does with a
//! journal the service refused to start on. Check reads it and reports; salvage keeps a
//! copy of the original, keeps every record that reads (going on past damage at the next
//! whole record), and rewrites the journal with them.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::framing::{self, MAGIC, Version};
use super::journal;
use crate::error::{Error, Result};

/// What `toc journal check` found.
#[derive(Debug, Clone)]
pub struct JournalCheck {
    /// The framing: 1 (before the header checksum) or 2.
    pub version: u8,
    /// Records that read.
    pub records: usize,
    /// The file's size.
    pub bytes: usize,
    /// A torn last record: its offset, bytes and why. The service drops it at start.
    pub torn: Option<(usize, usize, &'static str)>,
    /// The first damage: its offset and why. The service refuses to start on it.
    pub damaged: Option<(usize, String)>,
}

/// What `toc journal salvage` did.
#[derive(Debug, Clone)]
pub struct Salvaged {
    /// Records kept.
    pub records: usize,
    /// Damaged stretches skipped: offset, bytes, why. Each held at least one record.
    pub skipped: Vec<(usize, usize, String)>,
    /// Bytes of a torn last record dropped.
    pub torn_bytes: usize,
    /// Where the original was copied.
    pub original: PathBuf,
}

fn version_number(v: Version) -> u8 {
    match v {
        Version::V1 => 1,
        Version::V2 => 2,
    }
}

fn decodes(body: &[u8]) -> bool {
    journal::decode(body).is_ok()
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(format!("reading journal {}", path.display()), e))
}

/// Reads the journal at `path` and reports what it holds; changes nothing. Its verdict is
/// the start's: the framing's rules, then each record applied in turn to an engine in
/// memory, as the start applies them, so a record that reads but does not hold (settings
/// the API would refuse) is damage at its offset here too.
pub fn check_journal(path: &Path) -> Result<JournalCheck> {
    let buf = read(path)?;
    let scan = framing::scan(&buf, false, decodes);
    let damaged = match scan.damaged.first() {
        Some((at, _, why)) => Some((*at, why.clone())),
        None => first_refused(&buf, &scan.records, scan.version.header()),
    };
    Ok(JournalCheck {
        version: version_number(scan.version),
        records: scan.records.len(),
        bytes: buf.len(),
        torn: scan.torn.map(|(at, why)| (at, buf.len() - at, why)),
        damaged,
    })
}

/// The first record the start would refuse although it reads (its offset and why): each
/// applied in turn to an engine in memory, with the start's checks.
fn first_refused(
    buf: &[u8],
    records: &[framing::Found<'_>],
    header: usize,
) -> Option<(usize, String)> {
    let cap = super::RingCap {
        len: usize::MAX,
        bytes: usize::MAX,
        total: usize::MAX,
    };
    let mut scratch = super::MemoryEngine::open(cap, None).ok()?;
    for r in records {
        let at = (r.body.as_ptr() as usize - buf.as_ptr() as usize) - header;
        let Ok(op) = journal::decode(r.body) else {
            return Some((at, "the record's body does not decode".into()));
        };
        if let Err(e) = scratch.replay_op(op, false) {
            return Some((at, format!("the record does not apply: {e}")));
        }
    }
    None
}

/// Salvages the journal at `path`: copies it to `PATH.orig-SECONDS`, then rewrites it with
/// every record that reads. Refused while a service holds the journal.
pub fn salvage_journal(path: &Path) -> Result<Salvaged> {
    let _lock = journal::lock(path)?;
    let buf = read(path)?;
    let scan = framing::scan(&buf, true, decodes);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut original = path.as_os_str().to_owned();
    original.push(format!(".orig-{secs}"));
    let original = PathBuf::from(original);
    let failed = |what: &str, p: &Path| {
        let what = what.to_string();
        let p = p.display().to_string();
        move |e: std::io::Error| Error::io(format!("salvage: {what} {p}"), e)
    };
    write_private(&original, &buf).map_err(failed("copying the original to", &original))?;
    let mut out = MAGIC.to_vec();
    for r in &scan.records {
        framing::framed(&mut out, |o| o.extend_from_slice(r.body));
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".salvaging");
    let tmp = PathBuf::from(tmp);
    write_private(&tmp, &out).map_err(failed("writing", &tmp))?;
    std::fs::rename(&tmp, path).map_err(failed("renaming over", path))?;
    Ok(Salvaged {
        records: scan.records.len(),
        skipped: scan
            .damaged
            .iter()
            .map(|(a, b, why)| (*a, b - a, why.clone()))
            .collect(),
        torn_bytes: scan.torn.map_or(0, |(at, _)| buf.len() - at),
        original,
    })
}

/// Writes `bytes` to a new file at `path`, private to its user, and syncs it.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.create_new(true).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

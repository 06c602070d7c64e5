//! The memory engine's journal: every accepted change, appended before the caller is
//! answered. It is a physical log (each record is the state a job was left in, or its
//! removal), so replay applies records without running any logic again.
//!
//! A record is `[length: u32 LE][crc32 of the body: u32 LE][body: JSON]`. At start a record
//! that runs past the end of the file or fails its checksum while nothing follows it is a
//! write torn by a crash: it is dropped and the file cut back. Anything else that does not
//! read is corruption, and the start stops with the file and offset rather than lose jobs.
//! Compaction writes the live state to a new file and renames it over the old one.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::config::FsyncPolicy;
use crate::error::{Error, Result};
use crate::job::JobState;
use crate::store::record::Record;
use crate::time::Millis;
use crate::topic::TopicConfig;

const HEADER: usize = 8;
/// Largest record accepted when reading (a length beyond it is corruption, not a job).
const MAX_RECORD: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    Topic {
        config: TopicConfig,
    },
    Put {
        topic: String,
        slot: u32,
        id: String,
        state: JobState,
        score: Millis,
        rec: Record,
    },
    Del {
        topic: String,
        slot: u32,
        id: String,
    },
    Seq {
        topic: String,
        slot: u32,
        seq: u64,
    },
    /// Events appended to a topic's ring, with their ids. A settled run's events are in the
    /// same record batch (one append) as its job's new state.
    Events {
        topic: String,
        events: Vec<crate::events::Event>,
    },
}

pub struct Journal {
    path: PathBuf,
    policy: FsyncPolicy,
    inner: Mutex<Inner>,
}

struct Inner {
    file: BufWriter<File>,
    /// Bytes in the file.
    bytes: u64,
    /// Bytes of the last compacted file: the journal compacts when it has grown well past it.
    compacted_bytes: u64,
    /// Appended since the last fsync (for `every_second`).
    unsynced: bool,
}

fn encode(op: &Op, out: &mut Vec<u8>) {
    let body = serde_json::to_vec(op).expect("a journal record serialises");
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
}

fn corrupt(path: &Path, offset: usize, why: impl std::fmt::Display) -> Error {
    Error::Corrupt(format!(
        "journal {} is corrupt at byte offset {offset}: {why}; the store will not start rather than lose jobs (move the file aside to start empty)",
        path.display()
    ))
}

/// Reads every record of the journal at `path` (none if it does not exist), dropping a torn
/// last record and cutting the file back to the records that read.
pub fn read(path: &Path) -> Result<Vec<Op>> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes).map_err(|e| {
                Error::Unavailable(format!("reading journal {}: {e}", path.display()))
            })?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(Error::Unavailable(format!(
                "opening journal {}: {e}",
                path.display()
            )));
        }
    }
    let mut ops = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = bytes.len() - at;
        let torn = |why: &str| {
            tracing::warn!(journal = %path.display(), offset = at, "dropping a torn last record ({why})");
        };
        if rest < HEADER {
            torn("partial header");
            break;
        }
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
        if len > MAX_RECORD {
            return Err(corrupt(path, at, format!("a record claims {len} bytes")));
        }
        let end = at + HEADER + len;
        if end > bytes.len() {
            torn("partial body");
            break;
        }
        let body = &bytes[at + HEADER..end];
        if crc32fast::hash(body) != crc {
            if end == bytes.len() {
                torn("checksum of the last record");
                break;
            }
            return Err(corrupt(path, at, "checksum mismatch"));
        }
        let op: Op = serde_json::from_slice(body).map_err(|e| corrupt(path, at, e))?;
        ops.push(op);
        at = end;
    }
    if at < bytes.len() {
        let f = OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(at as u64).map(|_| f))
            .and_then(|f| f.sync_all());
        f.map_err(|e| Error::Unavailable(format!("cutting journal {}: {e}", path.display())))?;
    }
    Ok(ops)
}

fn io(path: &Path, what: &str) -> impl Fn(std::io::Error) -> Error {
    let path = path.display().to_string();
    let what = what.to_string();
    move |e| Error::Unavailable(format!("journal {path}: {what}: {e}"))
}

impl Journal {
    /// Opens `path` for appending (creating it).
    pub fn open(path: &Path, policy: FsyncPolicy) -> Result<Journal> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io(path, "creating its directory"))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io(path, "opening"))?;
        let bytes = file.metadata().map_err(io(path, "reading its size"))?.len();
        Ok(Journal {
            path: path.to_path_buf(),
            policy,
            inner: Mutex::new(Inner {
                file: BufWriter::new(file),
                bytes,
                compacted_bytes: bytes,
                unsynced: false,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `ops` as one write; with `always`, on disk before this returns.
    pub fn append(&self, ops: &[Op]) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(ops.len() * 96);
        for op in ops {
            encode(op, &mut buf);
        }
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner
            .file
            .write_all(&buf)
            .map_err(io(&self.path, "appending"))?;
        inner.file.flush().map_err(io(&self.path, "appending"))?;
        if self.policy == FsyncPolicy::Always {
            inner
                .file
                .get_ref()
                .sync_data()
                .map_err(io(&self.path, "fsync"))?;
        } else {
            inner.unsynced = true;
        }
        inner.bytes += buf.len() as u64;
        Ok(())
    }

    /// For `every_second`: fsyncs what was appended since the last call.
    pub fn sync(&self) -> Result<()> {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if inner.unsynced {
            inner
                .file
                .get_ref()
                .sync_data()
                .map_err(io(&self.path, "fsync"))?;
            inner.unsynced = false;
        }
        Ok(())
    }

    /// True when the journal has grown well beyond its last compaction (four times, and by
    /// at least 4 MiB).
    pub fn wants_compaction(&self) -> bool {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.bytes > (inner.compacted_bytes * 4).max(4 * 1024 * 1024)
    }

    /// Replaces the journal with `live` (the whole live state), atomically.
    pub fn compact(&self, live: &[Op]) -> Result<()> {
        let mut buf = Vec::with_capacity(live.len() * 96);
        for op in live {
            encode(op, &mut buf);
        }
        let tmp = self.path.with_extension("compacting");
        {
            let mut f = File::create(&tmp).map_err(io(&tmp, "creating"))?;
            f.write_all(&buf).map_err(io(&tmp, "writing"))?;
            f.sync_all().map_err(io(&tmp, "fsync"))?;
        }
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::fs::rename(&tmp, &self.path).map_err(io(&self.path, "renaming the compacted file"))?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty())
            && let Ok(d) = File::open(dir)
        {
            let _ = d.sync_all();
        }
        let file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(io(&self.path, "reopening"))?;
        inner.file = BufWriter::new(file);
        inner.bytes = buf.len() as u64;
        inner.compacted_bytes = buf.len() as u64;
        inner.unsynced = false;
        Ok(())
    }
}

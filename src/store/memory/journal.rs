//! The memory engine's journal: every accepted change, appended before the caller is
//! answered. It is a physical log (each record is the state a job was left in, or its
//! removal), so replay applies records without running any logic again.
//!
//! The framing on disk, and how a torn tail is told from damage, is `framing.rs`: only an
//! incomplete last record is dropped (with a warning naming the bytes), and any other damage
//! stops the start with the file and offset, leaving the file as it was. One process holds
//! the journal at a time (an exclusive lock on `FILE.lock`), and every file it writes is
//! private to its user (0600).
//! Compaction writes the live state to a new file and renames it over the old one.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use tokio::sync::watch;

use serde::{Deserialize, Serialize};

use super::settings::FsyncPolicy;
use crate::error::{Error, Result};
use crate::model::JobState;
use crate::store::record::Record;
use crate::time::Millis;
use crate::topic::TopicConfig;

use super::framing::{self, Fault, MAGIC, Version, framed};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(super) enum Op {
    Topic {
        config: TopicConfig,
    },
    Put {
        topic: String,
        slot: u32,
        id: String,
        state: JobState,
        score: Millis,
        /// Boxed: most records are empty or small, and an `Op` is otherwise sized by its
        /// largest variant.
        rec: Box<Record>,
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
    /// A flow key's own limits set (`Some`) or removed (`None`): one key, not the topic's
    /// whole settings (a topic's settings record carries every key's).
    Flow {
        topic: String,
        key: String,
        limits: Option<crate::flow::FlowLimits>,
    },
    /// A topic deleted whole: what the journal held of it before is gone with it.
    Drop {
        topic: String,
    },
    /// Events appended to a topic's ring, with their ids. A settled run's events are in the
    /// same record batch (one append) as its job's new state.
    Events {
        topic: String,
        events: Vec<crate::events::Event>,
    },
}

pub(super) struct Journal {
    path: PathBuf,
    /// The exclusive locks, held while the journal is open: `FILE.lock` and the file's own.
    locks: Locks,
    policy: FsyncPolicy,
    inner: Mutex<Inner>,
    /// Group commit for `always`: one fsync, on a thread of its own, covers every append
    /// waiting for it.
    commit: Arc<Commit>,
}

/// Where an append ends in this process's stream of appends: wait for it with
/// [`Journal::durable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Ticket(u64);

struct Commit {
    state: Mutex<CommitState>,
    /// Wakes the fsync thread.
    wake: Condvar,
    /// What is on disk, for the waiters.
    synced: watch::Sender<Synced>,
    /// Group commits so far (fsyncs of the thread).
    fsyncs: std::sync::atomic::AtomicU64,
}

struct CommitState {
    /// Bytes appended in this process (never reset, unlike the file's length).
    appended: u64,
    /// A second handle on the current file, for fsync without the append lock.
    file: Arc<File>,
    stop: bool,
}

#[derive(Debug, Clone, Default)]
struct Synced {
    upto: u64,
    /// The first fsync failure: every later waiter gets it (the store then refuses changes).
    error: Option<String>,
}

impl Commit {
    fn state(&self) -> std::sync::MutexGuard<'_, CommitState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The fsync thread: waits for appends, fsyncs once for all of them, tells the waiters.
    fn run(self: Arc<Self>) {
        let mut done = 0;
        loop {
            let (target, file) = {
                let mut st = self.state();
                while st.appended <= done && !st.stop {
                    st = self.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
                }
                if st.stop {
                    return;
                }
                (st.appended, st.file.clone())
            };
            let result = file.sync_data();
            self.fsyncs
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            done = target;
            self.synced.send_modify(|s| match result {
                Ok(()) => s.upto = target,
                Err(e) => {
                    s.error.get_or_insert_with(|| e.to_string());
                }
            });
        }
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.commit.state().stop = true;
        self.commit.wake.notify_one();
    }
}

struct Inner {
    file: BufWriter<File>,
    /// Bytes in the file.
    bytes: u64,
    /// Bytes of the last compacted file: the journal compacts when it has grown well past it.
    compacted_bytes: u64,
    /// Appended since the last fsync (for `every_second`).
    unsynced: bool,
    /// Bytes appended in this process: the tickets.
    appended: u64,
    /// A failed append could not be cut off the file: a later append would follow a torn
    /// record, which replay refuses, so every append is refused until a restart.
    broken: bool,
}

/// A record of the live state as a compaction writes it: a job's state borrowed from its
/// slot, so that no copy of the job is made (building an owned record per job was most of
/// a compaction's pause), or any other record.
// One at a time, handed on and dropped: never held in bulk, so its size does not matter.
#[allow(clippy::large_enum_variant)]
pub(super) enum Live<'a> {
    Put {
        topic: &'a str,
        slot: u32,
        id: &'a str,
        state: JobState,
        score: Millis,
        /// `None` for a plain job.
        rec: Option<&'a Record>,
    },
    Op(Op),
}

impl Live<'_> {
    /// The record as an owned `Op` (for a dump of the state).
    pub(super) fn into_op(self) -> Op {
        match self {
            Live::Put {
                topic,
                slot,
                id,
                state,
                score,
                rec,
            } => owned_put(topic, slot, id, state, score, rec),
            Live::Op(op) => op,
        }
    }
}

/// A job's state as an owned record.
fn owned_put(
    topic: &str,
    slot: u32,
    id: &str,
    state: JobState,
    score: Millis,
    rec: Option<&Record>,
) -> Op {
    Op::Put {
        topic: topic.to_string(),
        slot,
        id: id.to_string(),
        state,
        score,
        rec: Box::new(rec.cloned().unwrap_or_default()),
    }
}

fn encode(op: &Op, out: &mut Vec<u8>) {
    if let Op::Put {
        topic,
        slot,
        id,
        state,
        score,
        rec,
    } = op
    {
        let rec = (!rec.is_empty()).then_some(&**rec);
        encode_live(
            &Live::Put {
                topic,
                slot: *slot,
                id,
                state: *state,
                score: *score,
                rec,
            },
            out,
        );
    } else {
        framed(out, |b| {
            serde_json::to_writer(b, op).expect("a journal record serialises")
        });
    }
}

/// Appends a live record to `out`, a job's state in binary when its names fit.
pub(super) fn encode_live(live: &Live<'_>, out: &mut Vec<u8>) {
    match live {
        Live::Put {
            topic,
            slot,
            id,
            state,
            score,
            rec,
        } => match (u16::try_from(topic.len()), u16::try_from(id.len())) {
            (Ok(t), Ok(i)) => framed(out, |b| {
                put_body(b, (topic, t), *slot, (id, i), *state, *score, *rec);
            }),
            _ => {
                let op = owned_put(topic, *slot, id, *state, *score, *rec);
                framed(out, |b| {
                    serde_json::to_writer(b, &op).expect("a journal record serialises")
                });
            }
        },
        Live::Op(op) => encode(op, out),
    }
}

/// The first byte of a job's state written in binary (every JSON record starts with `{`).
const PUT: u8 = 1;

/// A job's new state, the record most of a journal is made of, in binary: `PUT`, the slot
/// (u32), the state (u8), the score (i64), the topic and the id (each a u16 length and its
/// bytes), then the record's JSON, left out for a plain job. A plain device's put
/// (`dev-1014` of topic `devices`) is 33 bytes where its JSON was 107, so a restart reads
/// and parses far less. A name too long for its length field is written as JSON instead.
fn put_body(
    body: &mut Vec<u8>,
    (topic, t): (&str, u16),
    slot: u32,
    (id, i): (&str, u16),
    state: JobState,
    score: Millis,
    rec: Option<&Record>,
) {
    body.push(PUT);
    body.extend_from_slice(&slot.to_le_bytes());
    body.push(match state {
        JobState::Scheduled => 0,
        JobState::Running => 1,
        JobState::Dead => 2,
    });
    body.extend_from_slice(&score.to_le_bytes());
    body.extend_from_slice(&t.to_le_bytes());
    body.extend_from_slice(topic.as_bytes());
    body.extend_from_slice(&i.to_le_bytes());
    body.extend_from_slice(id.as_bytes());
    if let Some(rec) = rec {
        serde_json::to_writer(body, rec).expect("a record serialises");
    }
}

/// Reads a record's body: a binary put, or JSON.
pub(super) fn decode(body: &[u8]) -> std::result::Result<Op, String> {
    if body.first() != Some(&PUT) {
        return serde_json::from_slice(body).map_err(|e| e.to_string());
    }
    let mut rest = &body[1..];
    let mut take = |n: usize| -> std::result::Result<&[u8], String> {
        if rest.len() < n {
            return Err("a put record ends early".into());
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Ok(head)
    };
    let slot = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes"));
    let state = match take(1)?[0] {
        0 => JobState::Scheduled,
        1 => JobState::Running,
        2 => JobState::Dead,
        x => return Err(format!("a put record names state {x}")),
    };
    let score = Millis::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
    let mut text = || -> std::result::Result<String, String> {
        let len = u16::from_le_bytes(take(2)?.try_into().expect("2 bytes"));
        String::from_utf8(take(usize::from(len))?.to_vec()).map_err(|e| e.to_string())
    };
    let (topic, id) = (text()?, text()?);
    let rec = if rest.is_empty() {
        Record::default()
    } else {
        serde_json::from_slice(rest).map_err(|e| e.to_string())?
    };
    Ok(Op::Put {
        topic,
        slot,
        id,
        state,
        score,
        rec: Box::new(rec),
    })
}

fn corrupt(path: &Path, offset: usize, why: impl std::fmt::Display) -> Error {
    Error::Corrupt(format!(
        "journal {} is corrupt at byte offset {offset}: {why}; the store will not start rather than lose jobs (move the file aside to start empty)",
        path.display()
    ))
}

/// Reads every record of the journal at `path` (none if it does not exist), dropping a torn
/// last record and cutting the file back to the records that read.
pub(super) fn read(path: &Path) -> Result<Vec<Op>> {
    let mut ops = Vec::new();
    read_each(path, |op| {
        ops.push(op);
        Ok(())
    })?;
    Ok(ops)
}

/// `read`, handing each record to `apply` as it is read; how many there were, and the
/// file's framing version. A record that does not read stops it with the error, after the
/// records before it were applied, and the file is left as it was; only a torn last record
/// is dropped, with a warning naming the bytes. The file is read through a buffer, a record
/// at a time: reading it whole first cost its size again in memory (1.2 GB at 10M jobs) and
/// a third of a restart's time in zeroing the pages of the growing copy.
pub(super) fn read_each(
    path: &Path,
    mut apply: impl FnMut(Op) -> Result<()>,
) -> Result<(usize, Version)> {
    let reading = |e: std::io::Error| Error::io(format!("reading journal {}", path.display()), e);
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, Version::V2)),
        Err(e) => {
            return Err(Error::io(format!("opening journal {}", path.display()), e));
        }
    };
    let size = usize::try_from(file.metadata().map_err(reading)?.len())
        .map_err(|_| corrupt(path, 0, "larger than this machine can address"))?;
    let mut input = std::io::BufReader::with_capacity(1 << 20, file);
    let mut first = vec![0u8; size.min(MAGIC.len())];
    input.read_exact(&mut first).map_err(reading)?;
    let Some(version) = framing::version(&first, size) else {
        cut_torn(path, 0, size, "a partial magic")?;
        return Ok((0, Version::V2));
    };
    if version == Version::V1 {
        // Only a file that reads whole and clean as the first framing is one (a damaged
        // magic is not): checked before any record is applied or any byte cut.
        let whole = std::fs::read(path).map_err(reading)?;
        if let Err((at, why)) = framing::reads_whole_as_v1(&whole, |b| decode(b).is_ok()) {
            return Err(corrupt(path, 0, framing::no_magic(at, &why)));
        }
        input.rewind().map_err(reading)?;
    }
    let (hl, mut count, mut at) = (version.header(), 0, version.start());
    let (mut head, mut body) = ([0u8; 12], Vec::new());
    while at < size {
        if size - at < hl {
            return cut_torn(path, at, size, "a partial header").map(|()| (count, version));
        }
        input.read_exact(&mut head[..hl]).map_err(reading)?;
        // A zero-filled tail is zero from this header on, the header included: a damaged
        // header followed by zeros is damage, as `toc journal check` says.
        let zero_header = head[..hl].iter().all(|b| *b == 0);
        let judged = framing::header(version, &head[..hl], at, size, || {
            let mut rest = Vec::new();
            zero_header && input.read_to_end(&mut rest).is_ok() && rest.iter().all(|b| *b == 0)
        });
        let (len, crc) = match judged {
            Ok(h) => h,
            Err(Fault::Torn(why)) => {
                return cut_torn(path, at, size, why).map(|()| (count, version));
            }
            Err(Fault::Damaged(why)) => return Err(corrupt(path, at, why)),
        };
        body.resize(len, 0);
        input.read_exact(&mut body).map_err(reading)?;
        match framing::body(&body, crc, at + hl + len == size) {
            Ok(()) => {}
            Err(Fault::Torn(why)) => {
                return cut_torn(path, at, size, why).map(|()| (count, version));
            }
            Err(Fault::Damaged(why)) => return Err(corrupt(path, at, why)),
        }
        let op = decode(&body).map_err(|e| corrupt(path, at, e))?;
        // A record that reads but does not hold (a topic's settings the API would refuse,
        // a job of a slot its topic does not have) stops the start, naming its offset.
        apply(op).map_err(|e| corrupt(path, at, format!("the record does not apply: {e}")))?;
        count += 1;
        at += hl + len;
    }
    Ok((count, version))
}

/// Drops a torn last record: its bytes kept beside the journal (`FILE.torn-SECONDS`, 0600),
/// never destroyed, then the file cut back to `at`, with a warning naming both.
fn cut_torn(path: &Path, at: usize, size: usize, why: &str) -> Result<()> {
    let kept = torn_path(path);
    let keep = || -> std::io::Result<()> {
        let mut from = File::open(path)?;
        from.seek(std::io::SeekFrom::Start(at as u64))?;
        let mut to = private(OpenOptions::new().write(true).create_new(true)).open(&kept)?;
        std::io::copy(&mut from, &mut to)?;
        to.sync_all()
    };
    keep().map_err(|e| {
        Error::io(
            format!(
                "keeping the torn tail of journal {} in {} (nothing was cut)",
                path.display(),
                kept.display()
            ),
            e,
        )
    })?;
    tracing::warn!(journal = %path.display(), offset = at, bytes = size - at, kept = %kept.display(), "dropping a torn last record ({why}): {} bytes at offset {at}, kept in {}", size - at, kept.display());
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(at as u64).map(|_| f))
        .and_then(|f| f.sync_all());
    f.map_err(|e| Error::io(format!("cutting journal {}", path.display()), e))
}

/// Opening options that create a file private to its user (0600): journals hold payloads,
/// webhook header secrets among them.
fn private(opts: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(opts, 0o600);
    opts
}

/// Makes an existing file private to its user (a journal made before files were).
fn make_private(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
            tracing::warn!(file = %path.display(), error = %e, "could not make the file private (0600)");
        }
    }
}

/// Where a torn tail's bytes are kept: `FILE.torn-SECONDS` (and `-N` when that is taken).
fn torn_path(path: &Path) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let named = |n: u32| {
        let mut p = path.as_os_str().to_owned();
        p.push(format!(".torn-{secs}"));
        if n > 0 {
            p.push(format!("-{n}"));
        }
        PathBuf::from(p)
    };
    (0..).map(named).find(|p| !p.exists()).expect("a free name")
}

/// The lock file of the journal at `path`: beside the file the path leads to, whatever name
/// it is reached by (a symlink, `..`), so two services never write one file.
pub(super) fn lock_path(path: &Path) -> PathBuf {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        let dir = parent.map_or_else(|| std::path::PathBuf::from("."), Path::to_path_buf);
        match (std::fs::canonicalize(dir), path.file_name()) {
            (Ok(d), Some(name)) => d.join(name),
            _ => path.to_path_buf(),
        }
    });
    let mut p = real.into_os_string();
    p.push(".lock");
    PathBuf::from(p)
}

/// How long an open waits for a lock that this very process holds (see [`lock`]).
const OWN_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Takes the journal's exclusive lock (`FILE.lock`, held until the returned file is
/// dropped), or refuses naming the process that holds it: two processes on one journal
/// would each lose the other's jobs at the next start. A lock this process holds (by its
/// own pid in the file) is waited for a moment before the refusal: a store of this process
/// just closed, and a child process being started elsewhere in it may hold a copy of the
/// lock's descriptor until it runs its program (an `flock` is released only when every
/// copy is closed).
pub(super) fn lock(path: &Path) -> Result<Locks> {
    let by_name = lock_name(path)?;
    let file = lock_file(path)?;
    Ok(Locks {
        _by_name: by_name,
        file: Mutex::new(file),
    })
}

/// A journal's locks: on `FILE.lock` (the name the journal is reached by, whatever link or
/// `..` leads there) and on the file itself (the inode, whatever other name, a hard link,
/// reaches it). Both are `flock`s, so they go with the process however it ends.
pub(super) struct Locks {
    _by_name: File,
    /// A descriptor of the journal file holding its lock; taken again on the new file after
    /// a compaction renamed it into place.
    file: Mutex<File>,
}

impl Locks {
    /// The journal at `path` is a new file (a compaction's): its lock is taken on it, and
    /// the old file's released.
    fn moved(&self, path: &Path) {
        match lock_file(path) {
            Ok(f) => *self.file.lock().unwrap_or_else(PoisonError::into_inner) = f,
            Err(e) => {
                tracing::warn!(journal = %path.display(), error = %e, "could not lock the compacted journal file; FILE.lock still guards it");
            }
        }
    }
}

/// The lock on the journal file itself (made, empty and private, when it does not exist):
/// held by another process when another name of the same file is open there.
fn lock_file(path: &Path) -> Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io(path, "creating its directory"))?;
    }
    let f = private(OpenOptions::new().create(true).append(true))
        .open(path)
        .map_err(io(path, "opening"))?;
    make_private(path);
    // Held a moment by this very process too (a store just closed, a child being started
    // with a copy of the descriptor): waited for as `FILE.lock` is.
    let started = std::time::Instant::now();
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(f),
            Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < OWN_LOCK_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::Unavailable(format!(
                    "journal {} is in use by another process under another name (a hard link to it): one journal serves one process",
                    path.display()
                )));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(path, "locking")(e)),
        }
    }
}

/// Takes `FILE.lock` (see [`lock`]).
fn lock_name(path: &Path) -> Result<File> {
    let started = std::time::Instant::now();
    loop {
        match try_lock(path) {
            Err(Held(holder)) if holder == own_pid() && started.elapsed() < OWN_LOCK_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(Held(holder)) => {
                return Err(Error::Unavailable(format!(
                    "journal {} is in use by another process ({holder}, holding {}): one journal serves one process",
                    path.display(),
                    lock_path(path).display()
                )));
            }
            Err(Failed(e)) => return Err(e),
            Ok(f) => return Ok(f),
        }
    }
}

/// What the lock file says of this process.
fn own_pid() -> String {
    format!("pid {}", std::process::id())
}

/// Why [`try_lock`] did not take the lock.
enum NotLocked {
    /// Held, by the process the lock file names.
    Held(String),
    Failed(Error),
}
use NotLocked::{Failed, Held};

fn try_lock(path: &Path) -> std::result::Result<File, NotLocked> {
    lock_once(path).map_err(Failed)?
}

/// One attempt: the lock file, or who holds it (the outer error: the attempt failed).
fn lock_once(path: &Path) -> Result<std::result::Result<File, NotLocked>> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io(path, "creating its directory"))?;
    }
    let lp = lock_path(path);
    let mut f = private(OpenOptions::new().create(true).read(true).write(true))
        .truncate(false)
        .open(&lp)
        .map_err(io(&lp, "opening the lock"))?;
    match f.try_lock() {
        Ok(()) => {
            make_private(&lp);
            let me = format!("{}\n", own_pid());
            f.set_len(0)
                .and_then(|()| f.write_all(me.as_bytes()))
                .map_err(io(&lp, "writing the lock"))?;
            Ok(Ok(f))
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&lp).unwrap_or_default();
            Ok(Err(Held(holder.trim().to_string())))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(io(&lp, "locking")(e)),
    }
}

/// A failed append: the change was refused and is not in the journal. A full disk is
/// `StoreFull`, anything else `Unavailable`.
fn refused(path: &Path, e: &std::io::Error) -> Error {
    use std::io::ErrorKind;
    let message = format!("journal {}: appending: {e}", path.display());
    match e.kind() {
        ErrorKind::StorageFull | ErrorKind::FileTooLarge | ErrorKind::QuotaExceeded => {
            Error::StoreFull(message)
        }
        _ => Error::Unavailable(message),
    }
}

fn io(path: &Path, what: &str) -> impl Fn(std::io::Error) -> Error {
    let path = path.display().to_string();
    let what = what.to_string();
    move |e| Error::io(format!("journal {path}: {what}"), e)
}

impl Journal {
    /// Opens `path` for appending (creating it, private, with the magic of its version),
    /// holding `lock` (from [`lock`]) while it is open.
    pub(super) fn open(path: &Path, policy: FsyncPolicy, lock: Locks) -> Result<Journal> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io(path, "creating its directory"))?;
        }
        let mut file = private(OpenOptions::new().create(true).append(true))
            .open(path)
            .map_err(io(path, "opening"))?;
        make_private(path);
        let mut bytes = file.metadata().map_err(io(path, "reading its size"))?.len();
        if bytes == 0 {
            file.write_all(MAGIC)
                .and_then(|()| file.sync_all())
                .map_err(io(path, "writing its magic"))?;
            bytes = MAGIC.len() as u64;
        }
        let handle = file.try_clone().map_err(io(path, "opening"))?;
        let commit = Arc::new(Commit {
            state: Mutex::new(CommitState {
                appended: 0,
                file: Arc::new(handle),
                stop: false,
            }),
            wake: Condvar::new(),
            synced: watch::Sender::new(Synced::default()),
            fsyncs: Default::default(),
        });
        if policy == FsyncPolicy::Always {
            let c = commit.clone();
            std::thread::Builder::new()
                .name("toc-journal-fsync".into())
                .spawn(move || c.run())
                .map_err(io(path, "starting its fsync thread"))?;
        }
        Ok(Journal {
            path: path.to_path_buf(),
            locks: lock,
            policy,
            inner: Mutex::new(Inner {
                file: BufWriter::new(file),
                bytes,
                compacted_bytes: bytes,
                unsynced: false,
                appended: 0,
                broken: false,
            }),
            commit,
        })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// After a failed append: the file back to its last whole record and a fresh buffer
    /// (the old one's unwritten bytes dropped, not flushed), so that the next append, once
    /// there is room, follows a whole record and replay reads on past it.
    fn cut_back(&self, inner: &mut Inner) {
        let fresh = match inner.file.get_ref().try_clone() {
            Ok(file) => file,
            Err(e) => {
                tracing::error!(journal = %self.path.display(), error = %e, "could not reopen the journal after a failed append: refusing every change until a restart");
                inner.broken = true;
                return;
            }
        };
        let old = std::mem::replace(&mut inner.file, BufWriter::new(fresh));
        let (file, _unwritten) = old.into_parts();
        if let Err(e) = file.set_len(inner.bytes) {
            tracing::error!(journal = %self.path.display(), error = %e, "could not cut a failed append off the journal: refusing every change until a restart");
            inner.broken = true;
        }
    }

    /// Appends `ops` as one write and fsyncs it (with `always`) before returning: for the
    /// rare changes made outside an async call (a topic created).
    pub(super) fn append(&self, ops: &[Op]) -> Result<()> {
        let Some(ticket) = self.append_grouped(ops)? else {
            return Ok(());
        };
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .file
            .get_ref()
            .sync_data()
            .map_err(io(&self.path, "fsync"))?;
        drop(inner);
        self.commit
            .synced
            .send_modify(|s| s.upto = s.upto.max(ticket.0));
        Ok(())
    }

    /// Appends `ops` as one write (to the OS, not yet to disk). With `always`, answers the
    /// ticket to wait for with [`Journal::durable`] before the change is acknowledged; the
    /// lock held meanwhile is only the append's, never an fsync's.
    pub(super) fn append_grouped(&self, ops: &[Op]) -> Result<Option<Ticket>> {
        if ops.is_empty() {
            return Ok(None);
        }
        let mut buf = Vec::with_capacity(ops.len() * 96);
        for op in ops {
            encode(op, &mut buf);
        }
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.broken {
            return Err(Error::Unavailable(format!(
                "journal {}: a failed append could not be cut off it; restart to replay it",
                self.path.display()
            )));
        }
        let written = inner.file.write_all(&buf).and_then(|()| inner.file.flush());
        if let Err(e) = written {
            self.cut_back(&mut inner);
            return Err(refused(&self.path, &e));
        }
        inner.bytes += buf.len() as u64;
        inner.appended += buf.len() as u64;
        if self.policy != FsyncPolicy::Always {
            inner.unsynced = true;
            return Ok(None);
        }
        let ticket = Ticket(inner.appended);
        self.commit.state().appended = ticket.0;
        drop(inner);
        self.commit.wake.notify_one();
        Ok(Some(ticket))
    }

    /// Group commits (fsyncs covering waiting appends) so far.
    pub(super) fn group_commits(&self) -> u64 {
        self.commit
            .fsyncs
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until the append that answered `ticket` is on disk (one fsync covers every
    /// append waiting at the time).
    pub(super) async fn durable(&self, ticket: Ticket) -> Result<()> {
        let mut rx = self.commit.synced.subscribe();
        let synced = rx
            .wait_for(|s| s.upto >= ticket.0 || s.error.is_some())
            .await
            .map_err(|_| Error::Unavailable(format!("journal {}: closed", self.path.display())))?;
        match &synced.error {
            Some(e) => Err(Error::Unavailable(format!(
                "journal {}: fsync: {e}",
                self.path.display()
            ))),
            None => Ok(()),
        }
    }

    /// For `every_second`: fsyncs what was appended since the last call.
    pub(super) fn sync(&self) -> Result<()> {
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
    pub(super) fn wants_compaction(&self) -> bool {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.bytes > (inner.compacted_bytes * 4).max(4 * 1024 * 1024)
    }

    /// Replaces the journal with the whole live state, atomically: `live` hands each record
    /// to the writer as it makes it, so no copy of the state is held. The new file's bytes.
    pub(super) fn compact(&self, live: impl FnOnce(&mut dyn FnMut(Live<'_>))) -> Result<u64> {
        let tmp = self.path.with_extension("compacting");
        let written = {
            let f = private(OpenOptions::new().create(true).write(true).truncate(true))
                .open(&tmp)
                .map_err(io(&tmp, "creating"))?;
            make_private(&tmp);
            let mut out = BufWriter::with_capacity(1 << 20, f);
            let (mut buf, mut written, mut failed) =
                (Vec::new(), MAGIC.len() as u64, out.write_all(MAGIC).err());
            live(&mut |record| {
                if failed.is_none() {
                    buf.clear();
                    encode_live(&record, &mut buf);
                    written += buf.len() as u64;
                    failed = out.write_all(&buf).err();
                }
            });
            if let Some(e) = failed {
                return Err(io(&tmp, "writing")(e));
            }
            let f = out
                .into_inner()
                .map_err(|e| io(&tmp, "writing")(e.into_error()))?;
            f.sync_all().map_err(io(&tmp, "fsync"))?;
            written
        };
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
        let handle = file.try_clone().map_err(io(&self.path, "reopening"))?;
        self.locks.moved(&self.path);
        self.commit.state().file = Arc::new(handle);
        inner.file = BufWriter::new(file);
        inner.bytes = written;
        inner.compacted_bytes = written;
        inner.unsynced = false;
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(state: JobState, rec: Record) -> Op {
        Op::Put {
            topic: "devices".into(),
            slot: 7,
            id: "dev-1014".into(),
            state,
            score: -3,
            rec: Box::new(rec),
        }
    }

    fn body(op: &Op) -> Vec<u8> {
        let mut out = Vec::new();
        encode(op, &mut out);
        out[12..].to_vec()
    }

    #[test]
    fn a_put_is_written_in_binary_and_reads_back_the_same() {
        let full = Record {
            payload: Some(r#"{"n":1}"#.into()),
            attempts: Some(2),
            token: Some(9),
            last_error: Some("boom".into()),
            ..Record::default()
        };
        for state in [JobState::Scheduled, JobState::Running, JobState::Dead] {
            for rec in [Record::default(), full.clone()] {
                let op = put(state, rec);
                let b = body(&op);
                assert_eq!(b[0], PUT);
                assert_eq!(decode(&b).unwrap(), op);
            }
        }
        assert_eq!(body(&put(JobState::Scheduled, Record::default())).len(), 33);
    }

    #[test]
    fn a_put_of_an_earlier_version_in_json_still_reads() {
        let op = put(JobState::Running, Record::default());
        let json = serde_json::to_vec(&op).unwrap();
        assert_eq!(json[0], b'{');
        assert_eq!(decode(&json).unwrap(), op);
    }

    #[test]
    fn a_cut_or_damaged_binary_put_is_an_error_not_a_job() {
        let b = body(&put(JobState::Scheduled, Record::default()));
        for cut in 1..b.len() {
            assert!(decode(&b[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = b.clone();
        bad[5] = 9;
        assert!(decode(&bad).unwrap_err().contains("state 9"));
    }

    #[test]
    fn a_name_too_long_for_its_length_field_is_written_as_json() {
        let op = Op::Put {
            topic: "t".into(),
            slot: 0,
            id: "x".repeat(70_000),
            state: JobState::Scheduled,
            score: 1,
            rec: Box::default(),
        };
        let b = body(&op);
        assert_eq!(b[0], b'{');
        assert_eq!(decode(&b).unwrap(), op);
    }

    /// The reader, exhaustively, in process: a journal of 60 records (a topic and job puts
    /// of several sizes), then every truncation point within its last three records, and
    /// 12,000 single- and multi-byte damages spread over the whole file (magic, headers,
    /// lengths, bodies). Each case either refuses naming an offset, or yields exactly the
    /// records before an incomplete last one: never more, never another record, never a
    /// silent loss of a record before the last.
    #[test]
    fn every_truncation_and_damage_refuses_or_yields_the_records_before_a_torn_last_one() {
        let mut file = MAGIC.to_vec();
        let mut ends = Vec::new();
        let topic = Op::Topic {
            config: TopicConfig::named("devices"),
        };
        encode(&topic, &mut file);
        ends.push(file.len());
        for i in 0..59u32 {
            let rec = Record {
                payload: (i % 3 == 0).then(|| {
                    serde_json::json!({"n": i, "pad": "x".repeat(usize::try_from(i).unwrap())})
                        .to_string()
                }),
                ..Record::default()
            };
            let op = Op::Put {
                topic: "devices".into(),
                slot: i % 16,
                id: format!("dev-{i}"),
                state: JobState::Scheduled,
                score: i64::from(i),
                rec: Box::new(rec),
            };
            encode(&op, &mut file);
            ends.push(file.len());
        }
        let n = ends.len();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let read = |bytes: &[u8]| -> std::result::Result<usize, String> {
            std::fs::write(&path, bytes).unwrap();
            read_each(&path, |_| Ok(()))
                .map(|(count, _)| count)
                .map_err(|e| e.to_string())
        };
        assert_eq!(read(&file), Ok(n), "the whole file reads");
        let starts: Vec<usize> = std::iter::once(MAGIC.len())
            .chain(ends.iter().copied())
            .take(n)
            .collect();
        // Every truncation point within the last three records.
        let mut truncations = 0;
        for cut in starts[n - 3]..file.len() {
            let whole = ends.iter().filter(|&&e| e <= cut).count();
            assert_eq!(read(&file[..cut]), Ok(whole), "cut at {cut}");
            truncations += 1;
        }
        // Damages: a deterministic xorshift picks where and what.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut refused, mut torn_last) = (0, 0);
        for case in 0..12_000u32 {
            let mut bad = file.clone();
            let pick = |n: usize, r: u64| usize::try_from(r % u64::try_from(n).unwrap()).unwrap();
            let at = pick(bad.len(), next());
            let width = if case % 3 == 0 {
                1 + pick(8, next())
            } else {
                1
            };
            let end = (at + width).min(bad.len());
            for b in &mut bad[at..end] {
                let flip = u8::try_from(next() % 255 + 1).unwrap();
                *b ^= flip;
            }
            match read(&bad) {
                Err(e) => {
                    assert!(e.contains("offset"), "case {case} at {at}: {e}");
                    refused += 1;
                }
                Ok(count) => {
                    // Only damage within the last record may pass, as a torn last record.
                    assert!(
                        at >= starts[n - 1] && count == n - 1,
                        "case {case}: damage at {at}..{end} read {count} of {n} records"
                    );
                    torn_last += 1;
                }
            }
        }
        assert!(
            refused > 11_000,
            "{refused} refused, {torn_last} torn last records"
        );
        println!(
            "{truncations} truncations read to the records before them; 12,000 damages: {refused} refused naming an offset, {torn_last} read as a torn last record"
        );
    }
}

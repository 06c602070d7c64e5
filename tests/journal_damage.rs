//! The memory engine's journal against damage, with real `toc serve` processes over a real
//! 10,000-job journal: a damaged length, a damaged header checksum and a damaged byte inside
//! a body each stop the start with the file and offset, leaving the file byte for byte as it
//! was; a torn last record is dropped and every other job loads; `toc journal check` names
//! the damage and `toc journal salvage` keeps every record but the damaged one; a second
//! process on one journal is refused naming the first; the files are private (0600).
//!
//! Before the header checksum a damaged length was taken for a torn tail wherever it was,
//! and the file was cut there: every job after it was lost for good.
//!
//! What this cannot prove: damage the checksums cannot see (a crc32 collision), or a disk
//! that lies about fsync.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use common::process::{Skew, Toc};

const JOBS: usize = 10_000;

/// A journal of `JOBS` jobs written by a real `toc serve`, killed after the last answer.
async fn real_journal(dir: &Path) -> PathBuf {
    let journal = dir.join("jobs.journal");
    let env = [("TOC_MEMORY_JOURNAL", journal.display().to_string())];
    let toc = Toc::start("maker", &env, Skew::None, dir).await;
    let resets: Vec<_> = (0..JOBS)
        .map(|i| json!({"id": format!("job-{i}"), "delay_ms": 3_600_000}))
        .collect();
    let r = reqwest::Client::new()
        .post(toc.url("/v1/topics/t/resets"))
        .json(&json!({"resets": resets, "create": {"type": "emit", "payload": {"order": 7}}}))
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["created"].as_u64(), Some(JOBS as u64), "{body}");
    drop(toc); // SIGKILL: with fsync "always" every answered change is on disk
    journal
}

/// Each record's offset in a journal of the current framing (magic, 12-byte headers).
fn records(buf: &[u8]) -> Vec<usize> {
    let (mut at, mut out) = (8, Vec::new());
    while at + 12 <= buf.len() {
        out.push(at);
        let len = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
        at += 12 + len;
    }
    out
}

fn sha256(path: &Path) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, &std::fs::read(path).unwrap())
        .as_ref()
        .to_vec()
}

fn toc_cli(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_toc"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

async fn scheduled(toc: &Toc) -> u64 {
    toc.get_json(&reqwest::Client::new(), "/v1/topics/t").await["scheduled"]
        .as_u64()
        .unwrap()
}

#[actix_rt::test]
async fn damage_refuses_the_start_and_leaves_the_file_a_torn_tail_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let journal = real_journal(dir.path()).await;
    let buf = std::fs::read(&journal).unwrap();
    let recs = records(&buf);
    assert!(
        recs.len() >= JOBS,
        "a record per job at least: {}",
        recs.len()
    );
    let first_job = recs[1]; // after the topic's record
    let middle = recs[recs.len() / 2];
    for (name, at, byte) in [
        ("a length field of the first job", first_job, first_job + 1),
        ("a length field in the middle", middle, middle + 1),
        ("a header checksum", middle, middle + 9),
        ("a byte inside a body", middle, middle + 12 + 3),
    ] {
        let copy = dir
            .path()
            .join(format!("{}.journal", name.replace(' ', "-")));
        let mut bad = buf.clone();
        bad[byte] ^= 0x5a;
        std::fs::write(&copy, &bad).unwrap();
        let before = sha256(&copy);
        let (status, log) = Toc::refused(&[("TOC_MEMORY_JOURNAL", copy.display().to_string())]);
        assert!(!status.success(), "{name}: the start must be refused");
        assert!(
            log.contains(&copy.display().to_string()) && log.contains(&format!("offset {at}")),
            "{name}: the error names the file and offset {at}: {log}"
        );
        assert_eq!(sha256(&copy), before, "{name}: the file is left as it was");
        let (ok, out) = toc_cli(&["journal", "check", copy.to_str().unwrap()]);
        assert!(
            !ok && out.contains(&format!("DAMAGED at byte offset {at}")),
            "{name}: {out}"
        );
    }

    // A torn last record: dropped with a warning, every other job loads.
    let torn = dir.path().join("torn.journal");
    std::fs::write(&torn, &buf[..buf.len() - 3]).unwrap();
    let (ok, out) = toc_cli(&["journal", "check", torn.to_str().unwrap()]);
    assert!(ok && out.contains("a torn last record"), "{out}");
    let toc = Toc::start(
        "torn",
        &[("TOC_MEMORY_JOURNAL", torn.display().to_string())],
        Skew::None,
        dir.path(),
    )
    .await;
    let n = scheduled(&toc).await;
    assert!(
        n as usize >= JOBS - 1,
        "every job but the torn record's: {n}"
    );
    assert!(
        toc.log_text().contains("dropping a torn last record"),
        "{}",
        toc.log_text()
    );
    // The bytes cut are kept beside the journal, never destroyed.
    let kept = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("torn.journal.torn-"))
        .expect("the torn tail is kept beside the journal");
    let last = *recs.last().unwrap();
    assert_eq!(
        std::fs::read(&kept).unwrap(),
        &buf[last..buf.len() - 3],
        "the kept bytes are the torn record's"
    );
    drop(toc);

    // Salvage keeps every record but the damaged one, and the original.
    let salvage = dir.path().join("salvage.journal");
    let mut bad = buf.clone();
    bad[middle + 1] ^= 0x5a;
    std::fs::write(&salvage, &bad).unwrap();
    let (ok, out) = toc_cli(&["journal", "salvage", salvage.to_str().unwrap()]);
    assert!(ok && out.contains("1 damaged stretch(es) skipped"), "{out}");
    let original = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("salvage.journal.orig-"))
        .expect("the original is kept");
    assert_eq!(
        std::fs::read(&original).unwrap(),
        bad,
        "the original as it was"
    );
    let toc = Toc::start(
        "salvaged",
        &[("TOC_MEMORY_JOURNAL", salvage.display().to_string())],
        Skew::None,
        dir.path(),
    )
    .await;
    assert_eq!(
        scheduled(&toc).await as usize,
        JOBS - 1,
        "one job lost with its record"
    );
}

#[actix_rt::test]
async fn one_process_per_journal_and_its_files_are_private() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("jobs.journal");
    let env = [("TOC_MEMORY_JOURNAL", journal.display().to_string())];
    let first = Toc::start("first", &env, Skew::None, dir.path()).await;
    let (status, log) = Toc::refused(&env);
    assert!(
        !status.success(),
        "a second process on one journal must not start"
    );
    assert!(
        log.contains("in use by another process") && log.contains(&format!("pid {}", first.pid())),
        "the refusal names the holder: {log}"
    );
    use std::os::unix::fs::PermissionsExt;
    let lock = PathBuf::from(format!("{}.lock", journal.display()));
    for f in [&journal, &lock] {
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is private", f.display());
    }
    // A journal made before files were private is made private at start.
    drop(first);
    std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o644)).unwrap();
    let again = Toc::start("again", &env, Skew::None, dir.path()).await;
    let mode = std::fs::metadata(&journal).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    drop(again);
}

/// A journal of the first framing (no magic, 8-byte headers) still replays, and is
/// rewritten in the current framing at start.
#[actix_rt::test]
async fn a_journal_of_the_first_framing_replays_and_is_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let journal = real_journal(dir.path()).await;
    let buf = std::fs::read(&journal).unwrap();
    let mut v1 = Vec::new();
    for at in records(&buf) {
        let len = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
        v1.extend_from_slice(&buf[at..at + 8]); // length and the body's crc32
        v1.extend_from_slice(&buf[at + 12..at + 12 + len]);
    }
    let old = dir.path().join("v1.journal");
    std::fs::write(&old, &v1).unwrap();
    let (ok, out) = toc_cli(&["journal", "check", old.to_str().unwrap()]);
    assert!(ok && out.contains("framing version 1"), "{out}");
    let toc = Toc::start(
        "v1",
        &[("TOC_MEMORY_JOURNAL", old.display().to_string())],
        Skew::None,
        dir.path(),
    )
    .await;
    assert_eq!(scheduled(&toc).await as usize, JOBS);
    let now = std::fs::read(&old).unwrap();
    assert_eq!(
        &now[..8],
        b"TOCJ\x00\x02\r\n",
        "rewritten in the current framing"
    );
    drop(toc);
    let (ok, out) = toc_cli(&["journal", "check", old.to_str().unwrap()]);
    assert!(
        ok && out.contains("framing version 2") && out.contains("no damage"),
        "{out}"
    );
}

/// A damaged magic is damage, never a journal of the first framing: its first byte, its
/// fourth (a length of 4.4 MB past the end, which once passed for a torn tail: the service
/// started with 0 jobs and cut the journal to 8 bytes) or the whole word. The start is
/// refused naming offset 0, the file left byte for byte, and `toc journal check` exits
/// non-zero saying so. And a header that fails its checksum followed by zeros is damage to
/// the service as it is to `check`, not a zero-filled tail.
#[actix_rt::test]
async fn a_damaged_magic_is_refused_never_read_as_the_first_framing() {
    let dir = tempfile::tempdir().unwrap();
    let journal = real_journal(dir.path()).await;
    let buf = std::fs::read(&journal).unwrap();
    let mut zeroed_tail = buf[..records(&buf)[3]].to_vec();
    zeroed_tail.extend_from_slice(&[0x11; 12]); // a header that fails its checksum
    zeroed_tail.extend_from_slice(&vec![0; 20_000]);
    for (name, bad, offset) in [
        (
            "first byte",
            {
                let mut b = buf.clone();
                b[0] ^= 0x5a;
                b
            },
            0,
        ),
        (
            "fourth byte zeroed",
            {
                let mut b = buf.clone();
                b[3] = 0;
                b
            },
            0,
        ),
        (
            "whole word",
            {
                let mut b = buf.clone();
                b[..4].copy_from_slice(b"\xde\xad\xbe\xef");
                b
            },
            0,
        ),
        (
            "a damaged header before zeros",
            zeroed_tail,
            records(&buf)[3],
        ),
    ] {
        let copy = dir
            .path()
            .join(format!("{}.journal", name.replace(' ', "-")));
        std::fs::write(&copy, &bad).unwrap();
        let before = sha256(&copy);
        let (status, log) = Toc::refused(&[("TOC_MEMORY_JOURNAL", copy.display().to_string())]);
        assert!(
            !status.success(),
            "{name}: the start must be refused: {log}"
        );
        assert!(
            log.contains(&format!("offset {offset}")),
            "{name}: names offset {offset}: {log}"
        );
        assert_eq!(sha256(&copy), before, "{name}: the file is left as it was");
        let (ok, out) = toc_cli(&["journal", "check", copy.to_str().unwrap()]);
        assert!(
            !ok && out.contains(&format!("DAMAGED at byte offset {offset}")),
            "{name}: check agrees: {out}"
        );
    }
}

/// The lock holds whatever name the journal is reached by: a second process naming it
/// through a symlink is refused.
#[actix_rt::test]
async fn a_journal_reached_through_a_symlink_is_still_one_process_s() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("jobs.journal");
    let env = [("TOC_MEMORY_JOURNAL", journal.display().to_string())];
    let first = Toc::start("first", &env, Skew::None, dir.path()).await;
    let link = dir.path().join("alias.journal");
    std::os::unix::fs::symlink(&journal, &link).unwrap();
    let (status, log) = Toc::refused(&[("TOC_MEMORY_JOURNAL", link.display().to_string())]);
    assert!(
        !status.success(),
        "a second process through a symlink must not start"
    );
    assert!(
        log.contains("in use by another process") && log.contains(&format!("pid {}", first.pid())),
        "the refusal names the holder: {log}"
    );
}

/// The lock holds whatever name reaches the file: a second process naming the journal
/// through a hard link (another name of the same file, with a lock file of its own) is
/// refused before it reads or writes anything (before, both appended to one file).
#[actix_rt::test]
async fn a_journal_reached_through_a_hard_link_is_still_one_process_s() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("jobs.journal");
    let env = [("TOC_MEMORY_JOURNAL", journal.display().to_string())];
    let first = Toc::start("first", &env, Skew::None, dir.path()).await;
    let http = reqwest::Client::new();
    first
        .put_job(&http, "t", "a", &serde_json::json!({"delay_ms": 3_600_000}))
        .await;
    let before = sha256(&journal);
    let link = dir.path().join("alias.journal");
    std::fs::hard_link(&journal, &link).unwrap();
    let (status, log) = Toc::refused(&[("TOC_MEMORY_JOURNAL", link.display().to_string())]);
    assert!(
        !status.success(),
        "a second process through a hard link must not start"
    );
    assert!(
        log.contains("in use by another process") && log.contains("hard link"),
        "the refusal says why: {log}"
    );
    assert_eq!(
        sha256(&journal),
        before,
        "the refused process wrote to the journal"
    );
}

/// Replay checks what it reads as the API would: a topic record of 0 slots (which hid its
/// jobs and made the next start refuse) or of 4,000,000 is refused naming its offset.
#[actix_rt::test]
async fn a_topic_record_the_api_would_refuse_stops_the_start_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let journal = real_journal(dir.path()).await;
    let buf = std::fs::read(&journal).unwrap();
    let recs = records(&buf);
    // The topic's record comes first: its body is the topic's settings as JSON.
    let at = recs[0];
    let len = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
    let body = String::from_utf8(buf[at + 12..at + 12 + len].to_vec()).expect("a JSON record");
    assert!(body.contains("\"slots\":16"), "{body}");
    for slots in ["0", "4000000"] {
        let new_body = body.replace("\"slots\":16", &format!("\"slots\":{slots}"));
        let mut record = Vec::new();
        let (l, crc) = (new_body.len() as u32, crc32fast::hash(new_body.as_bytes()));
        record.extend_from_slice(&l.to_le_bytes());
        record.extend_from_slice(&crc.to_le_bytes());
        let own = crc32fast::hash(&record[..8]);
        record.extend_from_slice(&own.to_le_bytes());
        record.extend_from_slice(new_body.as_bytes());
        let mut bad = buf[..at].to_vec();
        bad.extend_from_slice(&record);
        bad.extend_from_slice(&buf[at + 12 + len..]);
        let copy = dir.path().join(format!("slots-{slots}.journal"));
        std::fs::write(&copy, &bad).unwrap();
        let (status, log) = Toc::refused(&[("TOC_MEMORY_JOURNAL", copy.display().to_string())]);
        assert!(!status.success(), "slots {slots}: refused: {log}");
        assert!(
            log.contains(&format!("offset {at}")) && log.contains("slots"),
            "slots {slots}: names the record's offset and the field: {log}"
        );
        // `toc journal check` says what the start does: the same record, the same offset.
        let (ok, out) = toc_cli(&["journal", "check", copy.to_str().unwrap()]);
        assert!(!ok, "slots {slots}: check exits non-zero: {out}");
        assert!(
            out.contains(&format!("offset {at}")) && out.contains("slots"),
            "slots {slots}: check names the offset and the field: {out}"
        );
    }
}

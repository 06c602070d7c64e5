//! `toc export` and `toc import` (`crate::transfer`): a service's topics as JSON Lines, from
//! a running service or a journal offline, and back into a running service of either engine.

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::Value;

use super::client::{Client, Failure, enc};
use super::{Cli, Command};
use crate::transfer::{ImportReport, Line, MEDIA_TYPE, digest};

/// The most bytes of lines one import request carries.
const BATCH_BYTES: usize = 8 << 20;

/// Requests of one topic's import in flight at once (the first and the last go alone).
const IN_FLIGHT: usize = 4;

pub(super) async fn run(cli: Cli) -> Result<(), Failure> {
    let client = Client::of(&cli);
    match cli.command {
        Command::Export {
            topics,
            out,
            journal,
        } => {
            let started = Instant::now();
            let mut stops = Stops::catch();
            let mut sink = Sink::open(out)?;
            let export = async {
                match journal {
                    Some(path) => export_journal(&path, &topics, &mut sink)
                        .await
                        .map(|(n, jobs)| (n, jobs, Vec::new())),
                    None => export_service(&client, &topics, &mut sink).await,
                }
            };
            // Stopped by a signal, the export is dropped where it stands: its partial file
            // and a journal's copy are removed on the way out (their guards), not left.
            let (n_topics, jobs, skipped) = tokio::select! {
                biased;
                why = stops.next() => return Err(Failure::new(1, format!("stopped by {why}: nothing was written"))),
                r = export => r?,
            };
            sink.finish()?;
            let secs = started.elapsed().as_secs_f64();
            eprintln!(
                "toc export: {n_topics} topics, {jobs} jobs in {secs:.1} s ({:.0} jobs/s)",
                crate::num::float(crate::num::signed(jobs)) / secs.max(1e-6)
            );
            if skipped.is_empty() {
                Ok(())
            } else {
                Err(Failure::new(
                    1,
                    format!(
                        "the export leaves out {} topic(s) that double now: {}; export them \
                         once their sweep is done (GET /v1/topics/TOPIC shows no draining_from)",
                        skipped.len(),
                        skipped.join(", ")
                    ),
                ))
            }
        }
        Command::Import { file, batch } => import(&client, &file, batch).await,
        _ => unreachable!("not a transfer command"),
    }
}

/// Where an export goes: standard output, or a file only its owner may read, written under
/// a name of its own and renamed into place once whole (a failed export leaves no file that
/// could be taken for a backup).
struct Sink {
    out: Box<dyn Write>,
    /// The partial file and the name it takes once whole.
    file: Option<(PathBuf, PathBuf)>,
}

impl Sink {
    fn open(path: Option<PathBuf>) -> Result<Sink, Failure> {
        let Some(path) = path else {
            return Ok(Sink {
                out: Box::new(std::io::BufWriter::new(std::io::stdout())),
                file: None,
            });
        };
        let partial = path.with_extension("partial");
        let f = private_file(&partial).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => Failure::new(
                1,
                format!(
                    "--out: {} exists (another export under way, or one that stopped): \
                     remove it and export again; nothing was written",
                    partial.display()
                ),
            ),
            _ => Failure::new(1, format!("--out: cannot write {}: {e}", partial.display())),
        })?;
        Ok(Sink {
            out: Box::new(std::io::BufWriter::with_capacity(1 << 20, f)),
            file: Some((partial, path)),
        })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        self.out
            .write_all(bytes)
            .map_err(|e| Failure::new(1, format!("cannot write the export: {e}")))
    }

    fn finish(mut self) -> Result<(), Failure> {
        self.out
            .flush()
            .map_err(|e| Failure::new(1, format!("cannot write the export: {e}")))?;
        if let Some((partial, path)) = self.file.take() {
            std::fs::rename(&partial, &path).map_err(|e| {
                Failure::new(
                    1,
                    format!("--out: cannot rename into {}: {e}", path.display()),
                )
            })?;
        }
        Ok(())
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        if let Some((partial, _)) = &self.file {
            let _ = std::fs::remove_file(partial);
        }
    }
}

/// A new file only its owner may read: made here (O_CREAT|O_EXCL, which follows no symbolic
/// link), never one that exists, whoever made it and whatever its mode.
#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

/// Every topic of a running service (or `only`), in name order, as it streams them.
async fn export_service(
    client: &Client,
    only: &[String],
    sink: &mut Sink,
) -> Result<(usize, u64, Vec<String>), Failure> {
    let topics = client
        .call(reqwest::Method::GET, "/v1/topics", None)
        .await?;
    let listed: Vec<&Value> = topics["items"].as_array().into_iter().flatten().collect();
    let mut names: Vec<String> = if only.is_empty() {
        listed
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect()
    } else {
        only.to_vec()
    };
    names.sort();
    names.dedup();
    // The bar's length: the topics' counts as listed (jobs may come and go meanwhile).
    let most: u64 = listed
        .iter()
        .filter(|t| {
            t["name"]
                .as_str()
                .is_some_and(|n| names.iter().any(|m| m == n))
        })
        .map(|t| {
            ["scheduled", "running", "dead"]
                .iter()
                .map(|f| t[*f].as_u64().unwrap_or(0))
                .sum::<u64>()
        })
        .sum();
    let mut bar = super::progress::Progress::new(Some(most), "jobs exported");
    let mut jobs = 0;
    let mut skipped = Vec::new();
    for name in &names {
        let path = format!("/v1/topics/{}/export", enc(name));
        let mut res = client
            .request(reqwest::Method::GET, &path)
            .send()
            .await
            .map_err(|e| client.unreachable(e))?;
        if res.status() == reqwest::StatusCode::CONFLICT && only.is_empty() {
            // A topic that doubles now: the rest of the service is written, and the run
            // ends in failure naming it (export it once its sweep is done).
            let why = Client::refusal(res).await;
            bar.note(&format!("topic {name:?} skipped: {}", why.message));
            skipped.push(name.clone());
            continue;
        }
        if !res.status().is_success() {
            return Err(Client::refusal(res).await);
        }
        // The topic's last line says how many jobs it holds: without it the export was cut.
        let mut tail: Vec<u8> = Vec::new();
        loop {
            let chunk = res.chunk().await.map_err(|e| {
                Failure::new(
                    1,
                    format!(
                        "the export of topic {name:?} was cut short: {}",
                        e.without_url()
                    ),
                )
            })?;
            let Some(chunk) = chunk else { break };
            sink.write(&chunk)?;
            bar.inc(crate::num::usize_u64(bytecount_lines(&chunk)));
            tail.extend_from_slice(&chunk);
            let keep = tail.len().saturating_sub(4_096);
            tail.drain(..keep);
        }
        jobs += ended(name, &tail)?;
    }
    bar.finish();
    Ok((names.len() - skipped.len(), jobs, skipped))
}

/// The lines a chunk of an export ends (a job line each, but for a topic's first and last).
fn bytecount_lines(chunk: &[u8]) -> usize {
    chunk.iter().filter(|b| **b == b'\n').count()
}

/// The job count of a topic's `end` line, the last line of `tail`; a failure when there is
/// none (the export was cut short).
fn ended(topic: &str, tail: &[u8]) -> Result<u64, Failure> {
    let text = String::from_utf8_lossy(tail);
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    match serde_json::from_str::<Line>(last) {
        Ok(Line::End { topic: t, jobs }) if t == topic => Ok(jobs),
        _ => Err(Failure::new(
            1,
            format!("the export of topic {topic:?} was cut short: it has no end line"),
        )),
    }
}

/// SIGINT and SIGTERM, caught from when this is made (so one that comes while an export
/// replays a journal, a long step that does not yield, is kept for the next yield).
struct Stops {
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl Stops {
    fn catch() -> Stops {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Stops {
                int: signal(SignalKind::interrupt()).ok(),
                term: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        Stops {}
    }

    /// The first of them to come: its name.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            async fn one(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending().await,
                }
            }
            tokio::select! {
                () = one(&mut self.int) => "SIGINT",
                () = one(&mut self.term) => "SIGTERM",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

/// A private directory, removed with what it holds when dropped (an export ended, failed,
/// or stopped by a signal).
struct PrivateDir(PathBuf);

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every topic of a memory engine's journal (or `only`), offline: a copy of the journal is
/// replayed in a private directory, and the file named is only read.
async fn export_journal(
    journal: &Path,
    only: &[String],
    sink: &mut Sink,
) -> Result<(usize, u64), Failure> {
    let dir = std::env::temp_dir().join(format!("toc-export-{}", uuid::Uuid::new_v4()));
    make_private_dir(&dir)
        .map_err(|e| Failure::new(1, format!("cannot make {}: {e}", dir.display())))?;
    let dir = PrivateDir(dir);
    export_copy(journal, &dir.0, only, sink).await
}

#[cfg(unix)]
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir(dir)
}

async fn export_copy(
    journal: &Path,
    dir: &Path,
    only: &[String],
    sink: &mut Sink,
) -> Result<(usize, u64), Failure> {
    let copy = dir.join("journal");
    std::fs::copy(journal, &copy).map_err(|e| {
        Failure::new(
            1,
            format!("--journal: cannot read {}: {e}", journal.display()),
        )
    })?;
    // Each long step that does not yield is followed by a yield, so a signal caught meanwhile
    // stops the export there.
    tokio::task::yield_now().await;
    let store = crate::store::Store::open_memory(
        crate::store::StoreOptions::default(),
        Some((&copy, crate::config::FsyncPolicy::EverySecond)),
    )
    .map_err(|e| Failure::new(1, format!("--journal {}: {e}", journal.display())))?;
    tokio::task::yield_now().await;
    let failed =
        |e: crate::error::Error| Failure::new(1, format!("--journal {}: {e}", journal.display()));
    let mut topics = store.topics().await.map_err(failed)?;
    topics.retain(|t| only.is_empty() || only.contains(&t.name));
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    let mut jobs = 0;
    for t in &topics {
        sink.write(crate::store::settings_line(t).as_bytes())?;
        sink.write(b"\n")?;
        let mut n = 0;
        for slot in 0..t.slots {
            tokio::task::yield_now().await;
            for job in store.export_slot(t, slot).await.map_err(failed)? {
                let line = Line::Job { slot, job };
                sink.write(
                    serde_json::to_string(&line)
                        .expect("a line serialises")
                        .as_bytes(),
                )?;
                sink.write(b"\n")?;
                n += 1;
            }
        }
        sink.write(crate::store::end_line(&t.name, n).as_bytes())?;
        sink.write(b"\n")?;
        jobs += n;
    }
    Ok((topics.len(), jobs))
}

/// What the import reads of a line to group it: its kind and topic (a job line is checked
/// whole by the service).
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    topic: Option<Cow<'a, str>>,
    #[serde(default)]
    jobs: Option<u64>,
}

/// One topic's lines in an export.
struct Section<'a> {
    topic: String,
    slots: u32,
    settings: &'a str,
    jobs: Vec<&'a str>,
    /// Its end line, sent with its last batch: the digest covers it too.
    end: &'a str,
    digest: String,
}

/// The export's topics, each whole (its settings line, its jobs, its end line with their
/// count); a failure naming the line when one is not.
fn sections<'a>(file: &Path, text: &'a str) -> Result<Vec<Section<'a>>, Failure> {
    let bad = |n: usize, why: String| {
        Failure::new(1, format!("{}: line {}: {why}", file.display(), n + 1))
    };
    let mut out = Vec::new();
    let mut open: Option<(Section<'a>, Vec<&'a str>)> = None;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let head: Head<'_> = serde_json::from_str(line).map_err(|e| bad(n, e.to_string()))?;
        match head.kind.as_ref() {
            "topic" => {
                if let Some((s, _)) = &open {
                    return Err(bad(
                        n,
                        format!(
                            "topic {:?} has no end line: the export was cut short",
                            s.topic
                        ),
                    ));
                }
                let Ok(Line::Topic { settings }) = serde_json::from_str::<Line>(line) else {
                    return Err(bad(n, "not a topic's settings".into()));
                };
                let section = Section {
                    topic: settings.name.clone(),
                    slots: settings.slots,
                    settings: line,
                    jobs: Vec::new(),
                    end: "",
                    digest: String::new(),
                };
                open = Some((section, vec![line]));
            }
            "job" | "end" => {
                let Some((s, lines)) = open.as_mut() else {
                    return Err(bad(n, "a line before its topic's settings".into()));
                };
                if head.topic.as_deref() != Some(s.topic.as_str()) {
                    return Err(bad(
                        n,
                        format!("a line of another topic inside topic {:?}", s.topic),
                    ));
                }
                lines.push(line);
                if head.kind == "job" {
                    s.jobs.push(line);
                    continue;
                }
                let (mut s, lines) = open.take().expect("an open topic");
                if head.jobs != Some(s.jobs.len() as u64) {
                    return Err(bad(
                        n,
                        format!(
                            "topic {:?} ends with {:?} jobs, but {} lines of its jobs were read",
                            s.topic,
                            head.jobs,
                            s.jobs.len()
                        ),
                    ));
                }
                s.digest = digest(lines.iter().copied());
                s.end = line;
                out.push(s);
            }
            other => return Err(bad(n, format!("unknown kind {other:?}"))),
        }
    }
    if let Some((s, _)) = open {
        return Err(Failure::new(
            1,
            format!(
                "{}: topic {:?} has no end line: the export was cut short",
                file.display(),
                s.topic
            ),
        ));
    }
    Ok(out)
}

/// `toc import FILE`: each topic in turn; its first batch alone (it may make the topic),
/// the middle ones a few at a time, the last alone (it records the import's digest).
async fn import(client: &Client, file: &Path, batch: usize) -> Result<(), Failure> {
    if !(1..=crate::http::transfer::MAX_IMPORT_JOBS).contains(&batch) {
        return Err(Failure::new(2, "--batch: 1 to 10,000 jobs a request"));
    }
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure::new(1, format!("cannot read {}: {e}", file.display())))?;
    let sections = sections(file, &text)?;
    let started = Instant::now();
    let mut total = ImportReport::default();
    let jobs: usize = sections.iter().map(|s| s.jobs.len()).sum();
    let mut bar =
        super::progress::Progress::new(Some(crate::num::usize_u64(jobs)), "jobs imported");
    for s in &sections {
        let mut chunks = chunked(&s.jobs, batch);
        if chunks.is_empty() {
            chunks.push(Vec::new());
        }
        let send = |i: usize, chunk: &[&str]| {
            let mut body = String::new();
            if i == 0 {
                body.push_str(s.settings);
                body.push('\n');
            }
            for line in chunk {
                body.push_str(line);
                body.push('\n');
            }
            let last = i + 1 == chunks.len();
            if last {
                body.push_str(s.end);
                body.push('\n');
            }
            let path = format!(
                "/v1/topics/{}/import?digest={}&slots={}&last={last}",
                enc(&s.topic),
                enc(&s.digest),
                s.slots
            );
            let req = client
                .request(reqwest::Method::POST, &path)
                .header(reqwest::header::CONTENT_TYPE, MEDIA_TYPE)
                .body(body);
            async move {
                let res = req.send().await.map_err(|e| client.unreachable(e))?;
                if !res.status().is_success() {
                    return Err(Client::refusal(res).await);
                }
                res.json::<ImportReport>().await.map_err(|e| {
                    Failure::new(1, format!("an import's answer: {}", e.without_url()))
                })
            }
        };
        let first = send(0, &chunks[0]).await?;
        let mut report = first.clone();
        if first.skipped {
            bar.inc(crate::num::usize_u64(s.jobs.len()));
        } else {
            bar.inc(first.written + first.existing);
        }
        if !first.skipped && chunks.len() > 1 {
            let middle: Vec<_> = (1..chunks.len() - 1).map(|i| send(i, &chunks[i])).collect();
            let mut answers = futures_util::stream::iter(middle).buffer_unordered(IN_FLIGHT);
            while let Some(r) = answers.next().await {
                let r = r?;
                bar.inc(r.written + r.existing);
                add(&mut report, &r);
            }
            let i = chunks.len() - 1;
            let r = send(i, &chunks[i]).await?;
            bar.inc(r.written + r.existing);
            add(&mut report, &r);
        }
        bar.note(&section_note(s, &report));
        add(&mut total, &report);
    }
    bar.finish();
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "toc import: {} topics, {} jobs written, {} there already in {secs:.1} s ({:.0} jobs/s)",
        sections.len(),
        total.written,
        total.existing,
        crate::num::float(crate::num::signed(total.written + total.existing)) / secs.max(1e-6)
    );
    Ok(())
}

/// What an import did to one topic, for the progress line.
fn section_note(s: &Section<'_>, report: &ImportReport) -> String {
    if report.skipped {
        return format!(
            "topic {:?}: imported before ({}), nothing changed",
            s.topic, s.digest
        );
    }
    let made = if report.topic_created {
        " (topic made)"
    } else {
        ""
    };
    format!(
        "topic {:?}: {} jobs written, {} there already{made}",
        s.topic, report.written, report.existing
    )
}

fn add(total: &mut ImportReport, r: &ImportReport) {
    total.written += r.written;
    total.existing += r.existing;
    total.topic_created |= r.topic_created;
    total.skipped |= r.skipped;
}

/// The lines in batches of at most `n` lines and about `BATCH_BYTES`.
fn chunked<'a>(lines: &[&'a str], n: usize) -> Vec<Vec<&'a str>> {
    let mut out: Vec<Vec<&'a str>> = Vec::new();
    let mut bytes = 0;
    for line in lines {
        match out.last_mut() {
            Some(c) if c.len() < n && bytes + line.len() < BATCH_BYTES => {
                bytes += line.len() + 1;
                c.push(line);
            }
            _ => {
                bytes = line.len() + 1;
                out.push(vec![line]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_keep_to_their_count_and_bytes() {
        let lines: Vec<String> = (0..25).map(|i| format!("line {i}")).collect();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let chunks = chunked(&refs, 10);
        assert_eq!(chunks.iter().map(Vec::len).collect::<Vec<_>>(), [10, 10, 5]);
        let big = "x".repeat(BATCH_BYTES / 2);
        let chunks = chunked(&[&big, &big, &big], 10);
        assert_eq!(chunks.len(), 3, "each about half the bytes: one a batch");
    }

    #[test]
    fn an_export_cut_short_is_refused_naming_its_topic() {
        let file = Path::new("export.jsonl");
        let topic = r#"{"kind":"topic","settings":{"name":"t"}}"#;
        let job = r#"{"kind":"job","slot":0,"topic":"t","id":"a"}"#;
        let end = |n: u64| format!(r#"{{"kind":"end","topic":"t","jobs":{n}}}"#);
        let whole = format!("{topic}\n{job}\n{}\n", end(1));
        let s = sections(file, &whole).ok().unwrap();
        assert_eq!((s.len(), s[0].jobs.len(), s[0].slots), (1, 1, 16));
        for (text, says) in [
            (format!("{topic}\n{job}\n"), "no end line"),
            (format!("{topic}\n{job}\n{}\n", end(2)), "ends with"),
            (format!("{job}\n"), "before its topic"),
            (format!("{topic}\n{topic}\n"), "no end line"),
        ] {
            let why = sections(file, &text).err().unwrap().message;
            assert!(why.contains(says), "{why}");
        }
    }
}

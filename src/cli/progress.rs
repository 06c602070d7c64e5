//! Progress of long work (bulk changes, export, import) on standard error: on a terminal a
//! bar with the count, the rate and the time left (indicatif); otherwise, for a log or a
//! pipe, a plain line every few seconds. Standard output keeps only the command's answer.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often a plain line is written when standard error is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

pub(super) struct Progress {
    bar: ProgressBar,
    /// Plain lines: standard error is not a terminal.
    plain: bool,
    what: &'static str,
    started: Instant,
    last_line: Instant,
}

impl Progress {
    /// Progress over `len` items (`None`: not known ahead), each one `what` (`jobs
    /// cancelled`).
    pub(super) fn new(len: Option<u64>, what: &'static str) -> Progress {
        let plain = !std::io::stderr().is_terminal();
        let target = if plain {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let bar = ProgressBar::with_draw_target(len, target);
        let template = if len.is_some() {
            "{msg} [{bar:30}] {human_pos}/{human_len} ({per_sec}, {eta} left)"
        } else {
            "{msg} {human_pos} ({per_sec}, {elapsed})"
        };
        bar.set_style(
            ProgressStyle::with_template(template)
                .expect("a valid template")
                .progress_chars("=> "),
        );
        bar.set_message(what);
        let now = Instant::now();
        Progress {
            bar,
            plain,
            what,
            started: now,
            last_line: now,
        }
    }

    /// `n` more items done.
    pub(super) fn inc(&mut self, n: u64) {
        self.bar.inc(n);
        if self.plain && self.last_line.elapsed() >= PLAIN_EVERY {
            self.last_line = Instant::now();
            eprintln!("toc: {}", self.line());
        }
    }

    /// The count, of the length when known, and the rate: `1200/5000 jobs cancelled
    /// (400/s)`.
    fn line(&self) -> String {
        let done = self.bar.position();
        let of = self
            .bar
            .length()
            .map(|l| format!("/{l}"))
            .unwrap_or_default();
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        format!(
            "{done}{of} {} ({:.0}/s)",
            self.what,
            crate::num::float(crate::num::signed(done)) / secs
        )
    }

    /// A line of its own above the bar.
    pub(super) fn note(&self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }

    /// Ends the bar (a bulk change may take fewer than its length said).
    pub(super) fn finish(self) {
        self.bar.finish_and_clear();
    }
}

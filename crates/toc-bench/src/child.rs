//! A `toc serve` child process of the load generator (this binary's `serve`), on a free port,
//! for the scenarios that measure a whole process: its resident memory and CPU time.

use std::time::Instant;

/// `toc serve` (this binary), on a free port, killed when dropped.
pub(super) struct Child {
    child: std::process::Child,
    pub(super) base: String,
    log: std::path::PathBuf,
}

impl Child {
    /// On the memory engine with a journal at `journal` (written every second).
    pub(super) async fn start(journal: &std::path::Path) -> Result<Child, String> {
        let journal_env = journal.to_string_lossy().into_owned();
        let env = [
            ("TOC_STORE", "memory".to_string()),
            ("TOC_MEMORY_JOURNAL", journal_env),
            ("TOC_MEMORY_FSYNC", "every_second".to_string()),
            ("TOC_HTTP_MAX_BATCH_RESETS", "10000".to_string()),
        ];
        Child::start_with(&env, &journal.with_extension("")).await
    }

    /// With the settings `env`, its log at `log_base.PORT.log`.
    pub(super) async fn start_with(
        env: &[(&str, String)],
        log_base: &std::path::Path,
    ) -> Result<Child, String> {
        let port = toc_testkit::redis_server::free_port();
        let log = log_base.with_extension(format!("{port}.log"));
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let child = std::process::Command::new(exe)
            .arg("serve")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            // No journal unless asked for (toc serve's default is toc-data/ here).
            .env("TOC_MEMORY_JOURNAL", "none")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env("TOC_LISTEN", format!("127.0.0.1:{port}"))
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| e.to_string())?;
        let mut c = Child {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        let http = reqwest::Client::new();
        let deadline = Instant::now() + std::time::Duration::from_secs(600);
        loop {
            if let Ok(r) = http.get(format!("{}/health", c.base)).send().await
                && r.status().is_success()
            {
                return Ok(c);
            }
            if let Ok(Some(status)) = c.child.try_wait() {
                return Err(format!("toc serve stopped ({status}): {}", c.log()));
            }
            if Instant::now() > deadline {
                c.stop();
                return Err("toc serve was not healthy within 10 minutes".into());
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// The end of what the child logged.
    pub(super) fn log(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }

    pub(super) fn rss(&self) -> Result<u64, String> {
        let statm = std::fs::read_to_string(format!("/proc/{}/statm", self.child.id()))
            .map_err(|e| e.to_string())?;
        let pages: u64 = statm
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .ok_or("cannot read statm")?;
        Ok(pages * 4096)
    }

    /// The CPU time (user and system) the process has used so far, in seconds.
    pub(super) fn cpu_seconds(&self) -> Result<f64, String> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .map_err(|e| e.to_string())?;
        // Fields after the command (in parentheses, which may hold spaces): utime and stime
        // are the 12th and 13th, in clock ticks.
        let after = stat.rsplit_once(')').ok_or("cannot read stat")?.1;
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks = |i: usize| -> Result<f64, String> {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .ok_or_else(|| "cannot read stat".to_string())
        };
        Ok((ticks(11)? + ticks(12)?) / clock_ticks())
    }

    /// Kills the process with SIGKILL, as a crash would.
    pub(super) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(super) fn stop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Clock ticks per second (`getconf CLK_TCK`; 100, Linux's, when it cannot be read).
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

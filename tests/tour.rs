//! The README's five-minute tour, run as a newcomer runs it: its shell lines, word for word
//! but for the address, against a real `toc serve` on the embedded store with its journal,
//! killed (SIGKILL) and started again where the tour says to restart it. Each step's output
//! is checked for what its comment says it prints: the fired jobs in the event streams, the
//! webhook's dead letter and why, the metrics line, the job read back after the restart,
//! the backup file.
//!
//! What it cannot show: the tour's `sleep`s are the newcomer's, so the run takes their
//! seconds (about six); the CLI block after it is covered by `tests/cli.rs`.

mod common;

use std::path::Path;

use common::process::Toc;
use common::redis_server::free_port;

/// The tour's shell block, split where the service is to be restarted: before, after.
fn tour() -> (String, String) {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let block = readme
        .split("## Five-minute tour")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("\n```").next())
        .expect("the README has a tour in a sh block")
        .to_string();
    let (before, after) = block
        .split_once("# ... restart")
        .expect("the tour says where to restart");
    let after = after.split_once('\n').map_or("", |(_, rest)| rest);
    (before.to_string(), after.to_string())
}

/// Runs `script` with bash in `dir`, the service at `port` and `cargo run --release --`
/// being the `toc` binary: its standard output.
fn run(script: &str, dir: &Path, port: u16) -> String {
    let script = script
        .replace("localhost:8080", &format!("127.0.0.1:{port}"))
        .replace(
            "cargo run --release --",
            &format!(
                "{} --url http://127.0.0.1:{port}",
                env!("CARGO_BIN_EXE_toc")
            ),
        );
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("set -e\n{script}"))
        .current_dir(dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "the tour failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test]
async fn the_readmes_tour_prints_what_it_says() {
    let curl = std::process::Command::new("curl").arg("--version").output();
    assert!(
        curl.is_ok_and(|o| o.status.success()),
        "curl is missing: apt-get install -y curl (scripts/test.sh installs it)"
    );
    let (before, after) = tour();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let journal = dir.path().join("journal");
    let env = [
        ("TOC_MEMORY_JOURNAL", journal.display().to_string()),
        // The service's own egress policy, which the tour's webhook step shows refusing.
        ("TOC_WEBHOOKS_ALLOW_NETS", String::new()),
    ];
    let svc = Toc::start_unnamed("tour", port, &env, dir.path()).await;
    let out = run(&before, dir.path(), port);
    for (says, what) in [
        ("order-1", "the order's events"),
        ("dev-1", "the devices' events"),
        ("\"hook-1\"", "the webhook's dead letter"),
        ("egress", "why the webhook was refused"),
        ("204", "the dead letter deleted"),
        ("toc_jobs_fired_total", "the metrics line"),
        ("\"title\":\"timeout-center\"", "the API description"),
    ] {
        assert!(out.contains(says), "no {what} ({says:?}) in:\n{out}");
    }
    let fired = out
        .lines()
        .find(|l| l.starts_with("toc_jobs_fired_total"))
        .unwrap_or_default()
        .to_string();
    assert!(
        !fired.ends_with(" 0"),
        "no job fired by the metrics step: {fired}"
    );
    // Stop it as a crash would, and start it again on its journal.
    drop(svc);
    let _svc = Toc::start_unnamed("tour", port, &env, dir.path()).await;
    let out = run(&after, dir.path(), port);
    assert!(out.contains("\"order-2\""), "order-2 not read back:\n{out}");
    let backup = std::fs::read_to_string(dir.path().join("backup.jsonl")).unwrap();
    assert!(backup.contains("order-2"), "{backup}");
}

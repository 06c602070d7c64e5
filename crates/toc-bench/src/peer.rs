//! The peer: BullMQ (`crates/toc-bench/peers/bullmq/`), installed from the npm registry on first use and
//! run with Node on the same Redis. Its figures join the run's table.

use std::path::PathBuf;

/// The most fires a second BullMQ's latency is measured at: above it, its worker falls
/// behind and lateness grows with the run. Ours is measured at it too (`scenarios.rs`), so
/// the two are compared at one load.
pub(super) const LATENCY_RATE: u64 = 2_000;

use serde_json::Value;

use super::Ctx;

fn peer_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/bullmq")
}

async fn command(
    program: &str,
    args: &[&str],
    dir: &PathBuf,
    envs: &[(&str, String)],
) -> Result<String, String> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .await
        .map_err(|e| format!("{program}: {e} (BullMQ's figures need node and npm)"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

pub(super) async fn bullmq(ctx: &mut Ctx) -> Result<(), String> {
    let dir = peer_dir();
    if !dir.join("bench.js").is_file() {
        return Err(format!("{} is missing", dir.display()));
    }
    if !dir.join("node_modules/bullmq").is_dir() {
        println!("  installing BullMQ from the npm registry (once)");
        command(
            "npm",
            &["install", "--no-audit", "--no-fund", "--silent"],
            &dir,
            &[],
        )
        .await?;
    }
    let s = &ctx.sizes;
    // BullMQ's latency at the reference rate (at most `LATENCY_RATE`), its burst at most
    // 100,000 jobs: compared as rates, since BullMQ needs minutes for a million.
    let rate = s.rate.min(LATENCY_RATE);
    let burst = s.burst_jobs.min(100_000);
    let envs = [
        ("REDIS_URL", ctx.redis_url.clone()),
        ("JOBS", s.schedule_jobs.to_string()),
        ("DEVICES", s.devices.to_string()),
        ("RESET_SECONDS", s.reset_seconds.to_string()),
        ("RATE", rate.to_string()),
        ("SECONDS", s.latency_seconds.to_string()),
        ("BURST", burst.to_string()),
    ];
    println!("  running crates/toc-bench/peers/bullmq/bench.js (this takes a while)");
    let stdout = command("node", &["bench.js"], &dir, &envs).await?;
    let line = stdout.lines().last().unwrap_or_default();
    let v: Value =
        serde_json::from_str(line).map_err(|e| format!("BullMQ's output: {e}: {line}"))?;
    let num = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    ctx.add(
        "schedule",
        "bullmq",
        "schedules/s, addBulk of 1,000",
        num(&v["schedule_per_s"]),
        "jobs/s",
        "Queue.addBulk, delayed jobs",
    );
    ctx.add(
        "memory",
        "bullmq",
        "bytes per delayed job",
        num(&v["bytes_per_delayed_job"]),
        "B",
        "INFO used_memory before and after addBulk",
    );
    ctx.add(
        "reset",
        "bullmq",
        "resets/s, changeDelay, 64 in flight",
        num(&v["reset_per_s"]),
        "resets/s",
        "Job.changeDelay",
    );
    let l = &v["latency"];
    let note = format!(
        "{} jobs at {}/s, worker concurrency 100",
        l["jobs"], l["rate"]
    );
    for p in ["p50", "p90", "p99", "p99.9", "max"] {
        ctx.add(
            "latency",
            "bullmq",
            &format!("firing lateness {p}"),
            num(&l[p]),
            "ms",
            &note,
        );
    }
    let b = &v["burst"];
    let note = format!("{} jobs due at one instant", b["jobs"]);
    ctx.add(
        "burst",
        "bullmq",
        "burst drained in",
        num(&b["seconds"]),
        "s",
        &note,
    );
    ctx.add(
        "burst",
        "bullmq",
        "burst drain rate",
        num(&b["rate"]),
        "jobs/s",
        &note,
    );
    let mut curve = Vec::new();
    for (p, key) in [
        (50.0, "p50"),
        (90.0, "p90"),
        (99.0, "p99"),
        (99.9, "p99.9"),
        (100.0, "max"),
    ] {
        curve.push((p, num(&l[key])));
    }
    ctx.lateness.push(super::Lateness {
        system: "bullmq".into(),
        rate,
        jobs: l["jobs"].as_u64().unwrap_or(0),
        curve,
    });
    for n in v["notes"].as_array().into_iter().flatten() {
        println!("  note: {}", n.as_str().unwrap_or_default());
    }
    Ok(())
}

//! `toc bench all --quick` runs end to end (BullMQ aside, which needs npm), so the load
//! generator cannot rot. Its figures are not asserted (speed is measured, not tested): only
//! that every scenario produced them, and that the report, the JSON and the plot are written.

use serde_json::Value;

#[test]
fn toc_bench_all_quick_produces_every_scenario_and_the_report() {
    let out = tempfile::tempdir().unwrap();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_toc-bench"))
        .args(["all", "--quick", "--no-peers", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "toc bench failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );

    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("docs/bench/benchmarks.json")).unwrap(),
    )
    .unwrap();
    let figures = json["figures"].as_array().unwrap();
    let has = |scenario: &str, system: &str| {
        figures.iter().any(|f| {
            f["scenario"] == scenario
                && f["system"] == system
                && f["value"].as_f64().is_some_and(f64::is_finite)
        })
    };
    for scenario in ["schedule", "reset", "latency", "burst", "pull", "scale"] {
        for engine in ["memory", "redis"] {
            assert!(has(scenario, engine), "no {scenario} figure for {engine}");
        }
    }
    assert!(
        has("cluster", "redis cluster"),
        "no burst figure on the three-primary cluster"
    );
    assert!(
        has("reset", "redis-benchmark"),
        "no redis-benchmark baseline"
    );
    assert!(
        has("memory", "redis") && has("memory", "bare sorted set"),
        "no memory figures"
    );
    let names: Vec<&str> = figures.iter().filter_map(|f| f["name"].as_str()).collect();
    for name in [
        "firing lateness p99",
        "webhook end-to-end lateness p99",
        "burst drain rate",
        "this process's CPU per 100,000 fired",
        "resets/s, HTTP batch endpoint",
        "resets/s, HTTP, 50k resident",
        "resets/s, bare sorted sets, 50k resident",
        "first-pass resets/s, library, 50k resident",
        "bytes per job, 50k resident",
        "restart to healthy, 50k resident",
        "burst drain rate, 3 primaries, 3 instance(s)",
        "burst drain rate, bare Lua floor",
        "claim + ack throughput, bare Lua floor",
        "webhook calls/s, unsigned",
        "webhook calls/s, signed",
        "webhook calls/s, flow control, 1 key, parallelism 64",
        "one signature, CPU",
        "burst drain rate, traces off",
        "burst drain rate, traces on, every fire sampled",
        "library resets, traces on, nothing sampled",
    ] {
        assert!(names.contains(&name), "no {name:?} figure");
    }
    assert_eq!(
        json["lateness"].as_array().unwrap().len(),
        2,
        "a lateness curve per engine"
    );

    let md = std::fs::read_to_string(out.path().join("BENCHMARKS.md")).unwrap();
    for part in [
        "Machine:",
        "Redis:",
        "## This run's ratios",
        "## reset",
        "## burst",
        "## scale",
        "## cluster",
        "## Commands",
        "docs/bench/lateness.svg",
    ] {
        assert!(md.contains(part), "BENCHMARKS.md lacks {part:?}");
    }
    let svg = std::fs::read_to_string(out.path().join("docs/bench/lateness.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("memory") && svg.contains("redis"));
    assert!(stdout.contains("Headline ratios"));
}

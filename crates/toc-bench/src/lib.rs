//! `toc-bench` (also reached as `toc bench`): the load generator. Each scenario measures one figure users choose a timeout
//! center by, against a baseline measured in the same run on the same Redis
//! (`redis-benchmark`, a bare sorted set) and, with `all`, beside BullMQ (the peer users would
//! pick instead) running the same scenarios on the same Redis. `all` writes `BENCHMARKS.md`,
//! `docs/bench/benchmarks.json` and a lateness plot.

// The load generator computes rates, ratios and percentiles from measured counts and times:
// its casts between integers and floats are the arithmetic of a report, not of stored data.
#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    clippy::cast_precision_loss,
    clippy::cast_lossless
)]

mod bare_fire;
mod bare_zset;
mod child;
mod cluster;
pub mod median;
mod peer;
mod pull;
mod report;
mod scale;
mod scenarios;
mod steal;
mod topics;
mod traces;
mod transfer;
mod webhooks;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde::Serialize;

use toc_testkit::RedisServer;

/// What a run measures (each on the memory engine and on a Redis it starts, unless named).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Jobs written a second, one at a time and in batches, library and HTTP.
    Schedule,
    /// Heartbeat resets a second (library and HTTP batches) against bare ZADD XX CH.
    Reset,
    /// Firing lateness p50 to max at a steady rate, and webhooks end to end.
    Latency,
    /// A million jobs due at once, drained: jobs a second and CPU per 100,000, against the bare Lua floor.
    Burst,
    /// Bytes a job costs resident, against a bare sorted set.
    Memory,
    /// Pull consumers: claim + ack a second and delivery lateness, against the BullMQ worker.
    Pull,
    /// Resets and bursts at 100,000 to 10,000,000 resident jobs.
    Scale,
    /// The burst on a local three-primary Redis Cluster.
    Cluster,
    /// Webhook calls a second under flow control, signed and not.
    Webhook,
    /// Idle topics: CPU and store calls of 1,000 to 10,000 topics at rest.
    Topics,
    /// What traces cost: the burst and resets with every fire sampled, against traces off.
    Traces,
    /// Export and import between the engines, jobs a second.
    Transfer,
    /// Every scenario, then the report: BENCHMARKS.md and docs/bench/ under --out.
    All,
    /// The published headline from several `all` runs (`toc-bench median --out . DIR1
    /// DIR2 DIR3`): each ratio's median over the runs, written with the median run's data
    /// into --out's docs/bench/benchmarks.json, and as one table into its BENCHMARKS.md
    /// and README.md (between their marks). Runs nothing.
    Median,
}

/// Where a run writes its report unless told (`--out`).
pub const DEFAULT_OUT: &str = "toc-bench-out";

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    #[arg(value_enum)]
    pub scenario: Scenario,
    /// A scaled-down run for checking (under two minutes).
    #[arg(long)]
    pub quick: bool,
    /// Measure against this Redis instead of starting one (its data is left alone: only
    /// `toc:{bench-*` keys are used, and those of earlier scenarios and runs are removed
    /// before each scenario).
    #[arg(long, env = "TOC_BENCH_REDIS_URL")]
    pub redis_url: Option<String>,
    /// Where `all` writes its report: BENCHMARKS.md, and docs/bench/ (benchmarks.json,
    /// lateness.svg). A directory of its own by default, so a run in the repository leaves
    /// the published BENCHMARKS.md alone; `--out .` publishes into the repository.
    #[arg(long, default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    /// For `median`: the `--out` directories of the runs.
    pub runs: Vec<PathBuf>,
    /// Leave out the BullMQ peer (it needs node and npm).
    #[arg(long)]
    pub no_peers: bool,
    /// Devices for the reset scenario.
    #[arg(long)]
    pub devices: Option<usize>,
    /// Jobs for the burst scenario.
    #[arg(long)]
    pub burst_jobs: Option<usize>,
    /// Fires per second for the latency scenario.
    #[arg(long)]
    pub rate: Option<u64>,
    /// Seconds of the latency scenario.
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Resident job counts for the scale scenario, comma separated (default 100000,1000000;
    /// with --quick 10000,50000): 10000000 for the 10M figures.
    #[arg(long, value_delimiter = ',')]
    pub scale_sizes: Option<Vec<usize>>,
    /// Topic counts for the topics scenario, comma separated (default 1000; with --quick
    /// 100): 1000,10000 for the published table, 100000 on demand.
    #[arg(long, value_delimiter = ',')]
    pub topics: Option<Vec<usize>>,
    /// The runtime's `fire_lead_ms` in the latency and webhook scenarios (default: the
    /// service's, 2): 0 leases a job only once it is due.
    #[arg(long)]
    pub fire_lead_ms: Option<u64>,
    /// The runtime's `fire_lead_max_ms` in the latency and webhook scenarios (default: the
    /// service's, 20): at or below the lead, a lead that does not follow slow pumps.
    #[arg(long)]
    pub fire_lead_max_ms: Option<u64>,
    /// Add this much to every round trip to Redis in the latency and webhook scenarios, half
    /// each way, through a proxy on loopback, as a network does (default 0: no proxy).
    #[arg(long)]
    pub redis_delay_ms: Option<u64>,
    /// The runtime's `batch_window_ms` in the latency and webhook scenarios (default: the
    /// service's, 5): 0 batches no fires spread in time.
    #[arg(long)]
    pub batch_window_ms: Option<u64>,
}

/// One measured figure.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub scenario: &'static str,
    /// `memory`, `redis`, `redis-benchmark`, `bare sorted set`, `bullmq`.
    pub system: String,
    pub name: String,
    pub value: f64,
    pub unit: &'static str,
    /// How it was measured, or what it is compared to.
    pub note: String,
}

/// Lateness percentiles of one run, for the table and the plot.
#[derive(Debug, Clone, Serialize)]
pub struct Lateness {
    pub system: String,
    pub rate: u64,
    pub jobs: u64,
    /// (percentile, ms) pairs, for the plot.
    pub curve: Vec<(f64, f64)>,
}

/// Sizes of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Sizes {
    pub schedule_jobs: usize,
    pub devices: usize,
    pub reset_seconds: u64,
    pub rate: u64,
    pub latency_seconds: u64,
    /// The latency scenario's second rate, ten times the first: lateness where the pump's
    /// batches are large (issue's 100,000 a second), and how long it lasts.
    pub high_rate: u64,
    pub high_rate_seconds: u64,
    pub webhook_rate: u64,
    pub webhook_seconds: u64,
    /// Webhook calls due at one instant in the webhook scenario, unsigned and signed.
    pub webhook_burst: usize,
    pub burst_jobs: usize,
    pub memory_jobs: usize,
    /// Jobs of the transfer scenario's export and import.
    pub transfer_jobs: usize,
    pub zadd_requests: u64,
    /// Resident job counts of the scale scenario.
    pub scale: Vec<usize>,
    /// Topic counts of the topics scenario, and its settling pause and measured span (s).
    pub topics: Vec<usize>,
    pub topics_settle_s: u64,
    pub topics_span_s: u64,
    /// The runtime's `fire_lead_ms` in the latency and webhook scenarios.
    pub fire_lead_ms: u64,
    /// The runtime's `fire_lead_max_ms` in the latency and webhook scenarios.
    pub fire_lead_max_ms: u64,
    /// What a proxy adds to each round trip to Redis in the latency and webhook scenarios.
    pub redis_delay_ms: u64,
    /// The runtime's `batch_window_ms` in the latency and webhook scenarios.
    pub batch_window_ms: u64,
}

impl Sizes {
    fn new(args: &BenchArgs) -> Sizes {
        let q = args.quick;
        Sizes {
            schedule_jobs: if q { 5_000 } else { 100_000 },
            devices: args.devices.unwrap_or(if q { 20_000 } else { 100_000 }),
            reset_seconds: if q { 2 } else { 10 },
            rate: args.rate.unwrap_or(if q { 2_000 } else { 10_000 }),
            latency_seconds: args.seconds.unwrap_or(if q { 3 } else { 60 }),
            high_rate: if q { 20_000 } else { 100_000 },
            high_rate_seconds: if q { 2 } else { 10 },
            webhook_rate: if q { 200 } else { 1_000 },
            webhook_seconds: if q { 2 } else { 10 },
            webhook_burst: if q { 2_000 } else { 20_000 },
            burst_jobs: args
                .burst_jobs
                .unwrap_or(if q { 20_000 } else { 1_000_000 }),
            memory_jobs: if q { 20_000 } else { 1_000_000 },
            transfer_jobs: if q { 20_000 } else { 1_000_000 },
            zadd_requests: if q { 200_000 } else { 2_000_000 },
            scale: args.scale_sizes.clone().unwrap_or(if q {
                vec![10_000, 50_000]
            } else {
                vec![100_000, 1_000_000]
            }),
            topics: args
                .topics
                .clone()
                .unwrap_or_else(|| topics::default_sizes(q)),
            topics_settle_s: if q { 3 } else { 30 },
            topics_span_s: if q { 3 } else { 20 },
            fire_lead_ms: args.fire_lead_ms.unwrap_or_else(|| {
                timeout_center::config::Settings::defaults()
                    .runtime
                    .fire_lead_ms
            }),
            fire_lead_max_ms: args.fire_lead_max_ms.unwrap_or_else(|| {
                timeout_center::config::Settings::defaults()
                    .runtime
                    .fire_lead_max_ms
            }),
            redis_delay_ms: args.redis_delay_ms.unwrap_or(0),
            batch_window_ms: args.batch_window_ms.unwrap_or_else(|| {
                timeout_center::config::Settings::defaults()
                    .runtime
                    .batch_window_ms
            }),
        }
    }
}

/// What a run shares: where Redis is, the sizes, the stop flag (Ctrl-C) and the figures so far.
pub struct Ctx {
    pub redis_url: String,
    pub redis_port: Option<u16>,
    /// True when this run started the Redis it measures (it may then flush it).
    pub own_redis: bool,
    pub sizes: Sizes,
    pub stop: Arc<AtomicBool>,
    pub figures: Vec<Figure>,
    pub lateness: Vec<Lateness>,
    pub redis_version: String,
}

impl Ctx {
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn add(
        &mut self,
        scenario: &'static str,
        system: &str,
        name: &str,
        value: f64,
        unit: &'static str,
        note: &str,
    ) {
        println!("  {system:<16} {name:<44} {value:>14.1} {unit}  {note}");
        self.figures.push(Figure {
            scenario,
            system: system.to_string(),
            name: name.to_string(),
            value,
            unit,
            note: note.to_string(),
        });
    }

    /// The share of the CPUs' time stolen by the hypervisor since `before`, as a figure of
    /// the `machine` table.
    fn add_steal(&mut self, during: &str, before: Option<steal::CpuTimes>) {
        let stolen = before
            .zip(steal::CpuTimes::now())
            .and_then(|(b, a)| b.stolen_since(a));
        if let Some(stolen) = stolen {
            self.add(
                "machine",
                "machine",
                &format!("CPU time stolen during {during}"),
                stolen,
                "%",
                "/proc/stat steal over all CPU time: another guest had this share of the cores",
            );
        }
    }

    /// A figure of one scenario, where several scenarios measure a figure of that name.
    pub fn find_in(&self, scenario: &str, system: &str, name: &str) -> Option<f64> {
        self.figures
            .iter()
            .find(|f| f.scenario == scenario && f.system == system && f.name == name)
            .map(|f| f.value)
    }

    pub fn find(&self, system: &str, name: &str) -> Option<f64> {
        self.figures
            .iter()
            .find(|f| f.system == system && f.name == name)
            .map(|f| f.value)
    }

    /// A progress bar over `len` steps (hidden when stdout is not a terminal).
    pub fn bar(&self, len: u64, what: &str) -> indicatif::ProgressBar {
        let bar = indicatif::ProgressBar::new(len);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "  {msg:<28} [{bar:30}] {pos}/{len} {per_sec} eta {eta}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        bar.set_message(what.to_string());
        bar
    }
}

/// The run's Redis as a TCP host and port, or an error saying that `what` needs one.
pub(crate) fn redis_tcp(ctx: &Ctx, what: &str) -> Result<(String, u16), String> {
    let url = redis::Client::open(ctx.redis_url.as_str()).map_err(|e| e.to_string())?;
    match url.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(h, p) => Ok((h.clone(), *p)),
        other => Err(format!("{what} needs a TCP address, not {other:?}")),
    }
}

/// `redis-benchmark -P 64` with `args` against the run's Redis: requests per second.
pub fn redis_benchmark(ctx: &Ctx, requests: u64, args: &[&str]) -> Result<f64, String> {
    let (host, port) = redis_tcp(ctx, "redis-benchmark")?;
    redis_benchmark_at(&host, port, requests, args)
}

pub use toc_testkit::redis_server::redis_benchmark_at;

/// The repository's top folder, as written in this build (shown as `.` in reports).
pub(crate) fn repo_root() -> String {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .and_then(std::path::Path::parent)
        .unwrap_or(here)
        .display()
        .to_string()
}

/// Runs `toc bench`; the process's exit code.
pub fn run(args: BenchArgs) -> std::process::ExitCode {
    if args.scenario == Scenario::Median {
        return match median::publish(&args.out, &args.runs) {
            Ok(paths) => {
                println!("wrote {paths}");
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("toc bench median: {e}");
                std::process::ExitCode::from(1)
            }
        };
    }
    if !args.runs.is_empty() {
        eprintln!("toc bench: only `median` takes directories");
        return std::process::ExitCode::from(2);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let server = match &args.redis_url {
        Some(_) => None,
        None => match RedisServer::try_start() {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("toc bench: {e}");
                return std::process::ExitCode::from(2);
            }
        },
    };
    let redis_url = args
        .redis_url
        .clone()
        .unwrap_or_else(|| server.as_ref().expect("started").url());
    let mut ctx = Ctx {
        redis_url,
        redis_port: server.as_ref().map(|s| s.port),
        own_redis: server.is_some(),
        sizes: Sizes::new(&args),
        stop: stop.clone(),
        figures: Vec::new(),
        lateness: Vec::new(),
        redis_version: String::new(),
    };
    let result = actix_web::rt::System::new().block_on(async move {
        let s = stop.clone();
        actix_rt::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\ntoc bench: stopping; printing what was measured so far");
                s.store(true, Ordering::Relaxed);
            }
        });
        let outcome = run_scenarios(&mut ctx, args.scenario, !args.no_peers).await;
        (ctx, outcome)
    });
    let (ctx, outcome) = result;
    if let Err(e) = &outcome {
        eprintln!("toc bench: {e}");
    }
    report::print_summary(&ctx);
    if args.scenario == Scenario::All || args.out.as_path() != std::path::Path::new(DEFAULT_OUT) {
        match report::write(&ctx, &args) {
            Ok(paths) => println!("wrote {paths}"),
            Err(e) => {
                eprintln!("toc bench: writing the report: {e}");
                return std::process::ExitCode::from(1);
            }
        }
    }
    drop(server);
    // Give a stopped run a moment to let pending output out.
    std::thread::sleep(Duration::from_millis(10));
    if outcome.is_err() {
        std::process::ExitCode::from(1)
    } else {
        std::process::ExitCode::SUCCESS
    }
}

/// One scenario, as `run_scenarios` calls it.
type Step =
    fn(&mut Ctx) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + '_>>;

/// Runs `scenario` (every one for `all`), then the peer with `all`.
async fn run_scenarios(ctx: &mut Ctx, scenario: Scenario, peers: bool) -> Result<(), String> {
    if let Ok(client) = redis::Client::open(ctx.redis_url.as_str())
        && let Ok(mut c) = client.get_multiplexed_async_connection().await
    {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut c)
            .await
            .unwrap_or_default();
        ctx.redis_version = info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("?")
            .trim()
            .to_string();
    }
    let all = scenario == Scenario::All;
    let steps: [(Scenario, Step); 12] = [
        (Scenario::Schedule, |c| Box::pin(scenarios::schedule(c))),
        (Scenario::Reset, |c| Box::pin(scenarios::reset(c))),
        (Scenario::Latency, |c| Box::pin(scenarios::latency(c))),
        (Scenario::Burst, |c| Box::pin(bare_fire::burst(c))),
        (Scenario::Memory, |c| Box::pin(scenarios::memory(c))),
        (Scenario::Pull, |c| Box::pin(pull::pull(c))),
        (Scenario::Scale, |c| Box::pin(scale::scale(c))),
        (Scenario::Cluster, |c| Box::pin(cluster::cluster(c))),
        (Scenario::Webhook, |c| Box::pin(webhooks::webhook(c))),
        (Scenario::Topics, |c| Box::pin(topics::topics(c))),
        (Scenario::Traces, |c| Box::pin(traces::traces(c))),
        (Scenario::Transfer, |c| Box::pin(transfer::transfer(c))),
    ];
    for (s, step) in steps {
        if (all || s == scenario) && !ctx.stopped() {
            println!("\n== {s:?}");
            scenarios::clear_bench_topics(ctx).await?;
            let before = steal::CpuTimes::now();
            step(ctx).await?;
            ctx.add_steal(&format!("{s:?}").to_lowercase(), before);
        }
    }
    if all && peers && !ctx.stopped() {
        println!("\n== BullMQ (the peer), same Redis");
        let before = steal::CpuTimes::now();
        if let Err(e) = peer::bullmq(ctx).await {
            println!("  BullMQ not measured: {e}");
        }
        ctx.add_steal("BullMQ's runs", before);
        pull::ratios(ctx);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: BenchArgs,
    }

    /// A run writes its report into a directory of its own unless told (`--out .` rewrote
    /// the repository's BENCHMARKS.md before), and `--help` says what each scenario
    /// measures.
    #[test]
    fn a_run_writes_apart_and_each_scenario_says_what_it_measures() {
        let cli = Cli::parse_from(["toc-bench", "all", "--quick"]);
        assert_eq!(cli.args.out, PathBuf::from(DEFAULT_OUT));
        assert_ne!(cli.args.out, PathBuf::from("."));
        let mut cmd = Cli::command();
        let help = cmd.render_long_help().to_string();
        for s in Scenario::value_variants() {
            let name = s.to_possible_value().expect("a name");
            let text = name.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(!text.is_empty(), "{} has no help", name.get_name());
            assert!(help.contains(&text), "{} is not in --help", name.get_name());
        }
    }
}

//! The `toc` command line: `toc serve`, and a client of the HTTP API for everything else
//! (`client.rs`).

mod client;
mod transfer;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::config::{LogFormat, Settings};
use crate::serve;

const ENV_HELP: &str = "\
Environment (client commands): TOC_URL, TOC_TOKEN (toc serve passes over them).

Environment (serve), layered over --config and the built-in defaults (config/default.toml):
  TOC_STORE                 memory (default) or redis
  TOC_REDIS_URL             redis://127.0.0.1:6379/
  TOC_REDIS_CLUSTER_NODES   comma-separated node URLs of a Redis Cluster
  TOC_LISTEN                127.0.0.1:8080
  TOC_TOKENS                comma-separated bearer tokens (auth is off when empty)
  TOC_AUTH_HEALTH_AND_METRICS  true to require a token on /health and /metrics too
  TOC_LOG_FORMAT            text or json (levels from RUST_LOG, default info)
  TOC_DATA_DIR              where the journal goes by default (toc-data: DATA_DIR/journal)
  TOC_MEMORY_JOURNAL        journal file of the memory store (none: memory only)
  TOC_MEMORY_FSYNC          always or every_second
  TOC_RUNTIME_POLL_MS, TOC_RUNTIME_PUMP_BATCH, TOC_RUNTIME_GRACE_MS, TOC_RUNTIME_EVENTS_MAX_LEN,
  TOC_RUNTIME_WORKERS (slot actor threads; 0: one per core), TOC_RUNTIME_FOREIGN_TYPES
  TOC_HTTP_MAX_BODY_BYTES, TOC_HTTP_MAX_BATCH_BODY_BYTES, TOC_HTTP_MAX_BATCH_RESETS
  TOC_TOPICS_AUTO_CREATE, TOC_TOPICS_DEFAULTS_<SETTING> (e.g. TOC_TOPICS_DEFAULTS_SLOTS)
Every setting has one: TOC_ + its path in config/default.toml, in upper case.";

#[derive(Parser)]
#[command(name = "toc", version, about = "timeout-center: jobs that fire at a future instant, at least once and on time", after_help = ENV_HELP)]
pub(crate) struct Cli {
    /// The service's address (client commands).
    #[arg(
        long,
        env = "TOC_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub url: String,
    /// Bearer token (client commands).
    #[arg(long, env = "TOC_TOKEN", global = true, hide_env_values = true)]
    pub token: Option<String>,
    /// Print the API's JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Run the service: store, runtime and HTTP API.
    Serve {
        /// A settings file layered over the built-in defaults.
        #[arg(long, env = "TOC_CONFIG")]
        config: Option<PathBuf>,
        /// Where the journal goes when `memory.journal` is not set (`data_dir`, TOC_DATA_DIR;
        /// `toc-data` in the current directory by default).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Schedule, read, cancel and reset jobs.
    #[command(subcommand)]
    Job(JobCmd),
    /// Dead letters.
    #[command(subcommand)]
    Dead(DeadCmd),
    /// Topics and their figures.
    #[command(subcommand)]
    Topic(TopicCmd),
    /// Flow keys: their limits, runs in flight and jobs waiting for room.
    #[command(subcommand)]
    Flow(FlowCmd),
    /// A topic's event stream.
    Events {
        topic: String,
        #[arg(long)]
        after: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Claim due jobs of a pull topic with a lease (prints each job and its token).
    Claim {
        topic: String,
        /// Most jobs to take (1 to 1,000).
        #[arg(long, default_value_t = 1)]
        max: u32,
        /// Wait this long for a due job when there is none (ms, up to 30,000).
        #[arg(long, default_value_t = 0)]
        wait_ms: u64,
        /// The lease in ms (default: the topic's visibility timeout).
        #[arg(long)]
        lease_ms: Option<u64>,
    },
    /// Acknowledge a claimed job: it is done.
    Ack {
        topic: String,
        id: String,
        /// The token its claim gave.
        #[arg(long)]
        token: u64,
        /// Its shard key, when it was scheduled with one.
        #[arg(long)]
        shard_key: Option<String>,
    },
    /// The service's health.
    Health,
    /// The memory engine's journal, offline: check it, or salvage what reads of it.
    #[command(subcommand)]
    Journal(JournalCmd),
    /// Back up a service, or move it to another engine: every topic's settings, flow
    /// limits and jobs (dead letters too) as JSON Lines, from a running service (admin
    /// token) or, with --journal, from a memory engine's journal offline.
    Export {
        /// Only these topics (every topic when none is given).
        #[arg(long = "topic")]
        topics: Vec<String>,
        /// Where to write it, as a file only its owner may read (0600); standard output
        /// when absent. It holds every payload whole, secrets included.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Read this journal (`memory.journal`) instead of a running service: a copy of it is
        /// replayed, the file itself is not touched.
        #[arg(long)]
        journal: Option<PathBuf>,
    },
    /// Read an export into a running service, of either engine, in batches. Each job goes
    /// to the slot it was exported from unless that slot holds its id; run again, the
    /// import changes nothing.
    Import {
        /// The export (`toc export --out FILE`).
        file: PathBuf,
        /// Jobs a request (1 to 10,000).
        #[arg(long, default_value_t = 5_000)]
        batch: usize,
    },
    /// Webhooks' signing keys, from the settings (never over HTTP).
    #[command(subcommand)]
    Webhooks(WebhooksCmd),
    /// The load generator (`toc-bench`, a crate of its own: `cargo build --release -p
    /// toc-bench`): `toc bench all --quick` for a short check, `toc bench all` for the
    /// published figures (BENCHMARKS.md). `toc bench --help` for its options.
    #[command(disable_help_flag = true)]
    Bench {
        /// What `toc-bench` is given.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

#[derive(Subcommand)]
pub(crate) enum JournalCmd {
    /// Reads a journal and reports its records, a torn tail and the first damage; changes
    /// nothing. Exits 1 when it is damaged (the service would refuse to start on it).
    Check { file: PathBuf },
    /// Copies a journal to FILE.orig-SECONDS, then rewrites it with every record that
    /// reads, going on past damage; says what was skipped. Refused while a service holds it.
    Salvage { file: PathBuf },
}

#[derive(Subcommand)]
pub(crate) enum WebhooksCmd {
    /// Prints the keys a topic's calls are signed with (whsec_ + base64, one a line, in the
    /// order of `webhooks.signing_keys`): what that topic's receivers verify with. Reads the
    /// settings as `toc serve` does (--config, TOC_* variables); asks no service.
    SigningKey {
        /// The topic whose receivers the keys are for.
        #[arg(long)]
        topic: String,
        /// A settings file layered over the built-in defaults, as for `toc serve`.
        #[arg(long, env = "TOC_CONFIG")]
        config: Option<PathBuf>,
    },
}

#[derive(Args)]
pub(crate) struct When {
    /// Fire time, ms since the Unix epoch.
    #[arg(long, conflicts_with = "delay_ms")]
    pub fire_at: Option<i64>,
    /// Fire this many ms from now.
    #[arg(long)]
    pub delay_ms: Option<i64>,
}

#[derive(Subcommand)]
pub(crate) enum JobCmd {
    /// Create or replace a job.
    Put {
        topic: String,
        id: String,
        #[command(flatten)]
        when: When,
        #[arg(long = "type")]
        job_type: Option<String>,
        /// JSON payload.
        #[arg(long)]
        payload: Option<String>,
        #[arg(long)]
        max_attempts: Option<u32>,
        #[arg(long)]
        shard_key: Option<String>,
        /// Its flow key: jobs of one key share the key's flow limits.
        #[arg(long)]
        flow_key: Option<String>,
        /// Not run if it cannot fire within this many ms of its fire time.
        #[arg(long)]
        expire_after_ms: Option<u64>,
        /// A label, `key=value` (repeat for more).
        #[arg(long = "label")]
        labels: Vec<String>,
        /// Fail (409) instead of replacing an existing job.
        #[arg(long)]
        create_only: bool,
    },
    /// Fire a recurring job once, now, leaving its series as it is (a one-shot job of its
    /// own, `ID~NOW`).
    Trigger {
        topic: String,
        id: String,
        #[arg(long)]
        shard_key: Option<String>,
    },
    Get {
        topic: String,
        id: String,
        #[arg(long)]
        shard_key: Option<String>,
        /// Also show a recurring job's next N instants (1 to 100), as `next_fire_ats`.
        #[arg(long)]
        next: Option<u32>,
    },
    /// List a topic's scheduled jobs by fire time (or its running ones by lease deadline).
    Ls {
        topic: String,
        /// `scheduled` or `running`.
        #[arg(long, default_value = "scheduled")]
        state: String,
        /// The earliest fire time listed, ms since the epoch.
        #[arg(long)]
        from: Option<i64>,
        /// The latest fire time listed, ms since the epoch.
        #[arg(long)]
        to: Option<i64>,
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// The `next` of a previous page.
        #[arg(long)]
        after: Option<String>,
        /// Only jobs with this label, `key:value`.
        #[arg(long)]
        label: Option<String>,
    },
    /// Cancel a topic's scheduled jobs by label and/or fire-time range (prints how many).
    CancelMany {
        topic: String,
        #[command(flatten)]
        filter: BulkArgs,
    },
    Cancel {
        topic: String,
        id: String,
        #[arg(long)]
        shard_key: Option<String>,
    },
    /// Move a job's fire time.
    Reset {
        topic: String,
        id: String,
        #[command(flatten)]
        when: When,
        #[arg(long)]
        shard_key: Option<String>,
    },
}

#[derive(Subcommand)]
pub(crate) enum DeadCmd {
    Ls {
        topic: String,
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[arg(long)]
        after: Option<String>,
    },
    /// Requeue a topic's dead letters by label and/or fire-time range (prints how many).
    RequeueMany {
        topic: String,
        #[command(flatten)]
        filter: BulkArgs,
    },
    Requeue {
        topic: String,
        id: String,
    },
    Rm {
        topic: String,
        id: String,
    },
}

#[derive(Subcommand)]
pub(crate) enum TopicCmd {
    Ls,
    Show {
        topic: String,
    },
    /// Doubles a topic's slots. No job moves: jobs written before are found in their old
    /// slots until they leave, and `draining_from` shows the old layout until then.
    Grow {
        topic: String,
    },
    /// Pauses a topic: no job fires and no claim is served, on every instance; jobs, resets
    /// and cancels are still accepted.
    Pause {
        topic: String,
    },
    /// Resumes a paused topic: what came due fires, in fire-time order.
    Resume {
        topic: String,
    },
    /// Limits a topic's fires per second over every instance (0 removes the limit).
    Limit {
        topic: String,
        max_fires_per_s: u32,
    },
    /// Gives every flow key of a topic its limits (`--off` removes them).
    Flow {
        topic: String,
        #[command(flatten)]
        limits: FlowArgs,
        /// Remove the topic's flow limits.
        #[arg(long, conflicts_with_all = ["rate", "period_ms", "parallelism"])]
        off: bool,
    },
    /// Deletes a topic whole: its settings, jobs, dead letters and events.
    Rm {
        topic: String,
        /// Delete it even while some of its jobs are running.
        #[arg(long)]
        force: bool,
    },
}

/// Which jobs a bulk change takes: at least one of these.
#[derive(Args)]
pub(crate) struct BulkArgs {
    /// Jobs with this label, `key:value`.
    #[arg(long)]
    pub label: Option<String>,
    /// The earliest fire time, ms since the epoch.
    #[arg(long)]
    pub from: Option<i64>,
    /// The latest fire time, ms since the epoch.
    #[arg(long)]
    pub to: Option<i64>,
}

/// A flow key's limits on the command line.
#[derive(Args)]
pub(crate) struct FlowArgs {
    /// Most fires started in any period.
    #[arg(long)]
    pub rate: Option<u32>,
    /// The rate's period in ms (1,000 when left out).
    #[arg(long)]
    pub period_ms: Option<u64>,
    /// Most runs at once.
    #[arg(long)]
    pub parallelism: Option<u32>,
}

#[derive(Subcommand)]
pub(crate) enum FlowCmd {
    /// The keys with limits of their own, and what waits for room on this instance.
    Ls { topic: String },
    /// A key's limits and counters, over every instance.
    Show { topic: String, key: String },
    /// Gives a key limits of its own, in place of the topic's.
    Set {
        topic: String,
        key: String,
        #[command(flatten)]
        limits: FlowArgs,
    },
    /// Takes a key's own limits away: it goes by the topic's again.
    Rm { topic: String, key: String },
}

/// `toc bench ARGS`: runs `toc-bench ARGS`, found beside this binary (cargo builds both into
/// one target folder) or on PATH.
fn bench_main(args: &[std::ffi::OsString]) -> ExitCode {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("toc-bench")))
        .filter(|p| p.is_file());
    let bench = beside.unwrap_or_else(|| PathBuf::from("toc-bench"));
    match std::process::Command::new(&bench).args(args).status() {
        Ok(status) => match status.code().and_then(|c| u8::try_from(c).ok()) {
            Some(code) => ExitCode::from(code),
            None => ExitCode::FAILURE,
        },
        Err(e) => {
            eprintln!(
                "toc bench: cannot run {} ({e}): the load generator is a crate of its own; \
                 build it with `cargo build --release -p toc-bench` (it lands beside toc)",
                bench.display()
            );
            ExitCode::from(2)
        }
    }
}

/// The `toc` binary: parses the command line and runs the command.
pub fn toc_main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { config, data_dir } => return serve_main(config, data_dir),
        Command::Journal(cmd) => return journal_main(cmd),
        Command::Webhooks(cmd) => return webhooks_main(cmd),
        Command::Bench { args } => return bench_main(&args),
        _ => {}
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let done = match cli.command {
        Command::Export { .. } | Command::Import { .. } => runtime.block_on(transfer::run(cli)),
        _ => runtime.block_on(client::run(cli)),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => client::exit(f),
    }
}

/// `toc webhooks signing-key --topic T`.
fn webhooks_main(cmd: WebhooksCmd) -> ExitCode {
    let WebhooksCmd::SigningKey { topic, config } = cmd;
    if let Err(e) = crate::validate::topic_name(&topic) {
        eprintln!("toc webhooks signing-key: --topic: {e}");
        return ExitCode::from(2);
    }
    let settings = match Settings::load(config.as_deref(), std::env::vars()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("toc webhooks signing-key: {e}");
            return ExitCode::from(2);
        }
    };
    let keys = settings.webhooks.keys_for(&topic);
    if keys.is_empty() {
        eprintln!("toc webhooks signing-key: webhooks.signing_keys is empty: calls are not signed");
        return ExitCode::FAILURE;
    }
    for k in keys.iter() {
        println!("{}", k.reveal());
    }
    ExitCode::SUCCESS
}

/// `toc journal check|salvage FILE`.
fn journal_main(cmd: JournalCmd) -> ExitCode {
    match cmd {
        JournalCmd::Check { file } => match crate::store::check_journal(&file) {
            Ok(c) => {
                println!("journal {} (framing version {})", file.display(), c.version);
                println!("  {} records read, {} bytes", c.records, c.bytes);
                if let Some((at, bytes, why)) = c.torn {
                    println!(
                        "  a torn last record: {bytes} bytes at offset {at} ({why}); dropped at start"
                    );
                }
                match c.damaged {
                    Some((at, why)) => {
                        println!("  DAMAGED at byte offset {at}: {why}");
                        println!(
                            "  the service refuses to start on it; `toc journal salvage` keeps what reads"
                        );
                        ExitCode::FAILURE
                    }
                    None => {
                        println!("  no damage");
                        ExitCode::SUCCESS
                    }
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        JournalCmd::Salvage { file } => match crate::store::salvage_journal(&file) {
            Ok(s) => {
                println!(
                    "journal {}: the original is kept as {}",
                    file.display(),
                    s.original.display()
                );
                println!("  {} records kept", s.records);
                for (at, bytes, why) in &s.skipped {
                    println!(
                        "  skipped {bytes} bytes at offset {at} ({why}): at least one record lost"
                    );
                }
                if s.torn_bytes > 0 {
                    println!("  dropped a torn last record of {} bytes", s.torn_bytes);
                }
                println!(
                    "  {} damaged stretch(es) skipped; {}",
                    s.skipped.len(),
                    if s.skipped.is_empty() && s.torn_bytes == 0 {
                        "nothing was lost"
                    } else {
                        "what they held is lost"
                    }
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// Logs to stderr in `format`, with span fields (a request's or a fire's `trace_id` among
/// them), and spans to `tracer`'s collector when traces are on (`crate::otel`).
fn init_logging(format: LogFormat, tracer: Option<opentelemetry_sdk::trace::Tracer>) {
    use tracing_subscriber::prelude::*;
    // The spans that carry a request's and a fire's trace ids (`crate::otel`, the request's
    // root span) are always in a log line's context, whatever RUST_LOG says of their level:
    // they log nothing themselves.
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    for always in ["timeout_center::otel=info", "tracing_actix_web=info"] {
        if let Ok(d) = always.parse() {
            filter = filter.add_directive(d);
        }
    }
    // Colour only for a person at a terminal: a file or a log collector gets plain text.
    use std::io::IsTerminal;
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    // RUST_LOG filters what is logged, not what is traced: the spans go to the collector
    // whatever the log level.
    let logs: Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync> =
        match format {
            LogFormat::Text => tracing_subscriber::fmt::layer()
                .with_ansi(colour)
                .with_writer(std::io::stderr)
                .with_filter(filter)
                .boxed(),
            LogFormat::Json => tracing_subscriber::fmt::layer()
                .json()
                .with_current_span(true)
                .with_writer(std::io::stderr)
                .with_filter(filter)
                .boxed(),
        };
    let traces = tracer.map(|t| {
        tracing_opentelemetry::layer()
            .with_tracer(t)
            .with_filter(tracing_subscriber::filter::LevelFilter::INFO)
    });
    tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .init();
}

/// `toc serve`: the service until a signal stops it.
fn serve_main(config: Option<PathBuf>, data_dir: Option<PathBuf>) -> ExitCode {
    let mut settings = match Settings::load(config.as_deref(), std::env::vars()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("toc serve: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(dir) = data_dir {
        settings.data_dir = dir;
    }
    let memory_only = match settings.durable_default() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("toc serve: {e}");
            return ExitCode::from(2);
        }
    };
    let (tracer, traces) = match crate::otel::start(&settings.otel) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("toc serve: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(settings.log_format, tracer);
    let result = actix_web::rt::System::new().block_on(async move {
        if memory_only {
            tracing::warn!(
                "memory.journal = none: jobs are kept in memory only, and nothing survives a restart"
            );
        }
        let store = serve::open_store(&settings).await?;
        tracing::info!(
            store = store.engine(),
            durable = store.durability(),
            "store opened"
        );
        serve::start(settings, store).await?.run().await
    });
    // Spans still in the exporter's queue go out before the process ends.
    drop(traces);
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "toc serve stopped");
            eprintln!("toc serve: {e}");
            ExitCode::from(1)
        }
    }
}

//! The `toc` command line: `toc serve`, and a client of the HTTP API for everything else
//! (`client.rs`).

mod client;
mod human;
mod progress;
mod transfer;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::config::Settings;
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

const SERVE_HELP: &str = "\
Its own options are --config, --data-dir and --listen (--url, --token and --json are the
client commands' and pass over it). Every setting has a variable: TOC_ + its path in
config/default.toml, in upper case, layered over --config and the built-in defaults:
  TOC_LISTEN                127.0.0.1:8080 (the dashboard at http://ADDR/ui)
  TOC_STORE                 memory (default: durable, its journal in DATA_DIR/journal) or redis
  TOC_DATA_DIR              toc-data
  TOC_MEMORY_JOURNAL        the journal file (none: memory only, nothing kept)
  TOC_REDIS_URL             redis://127.0.0.1:6379/ (TOC_REDIS_CLUSTER_NODES for a Cluster)
  TOC_TOKENS                comma-separated bearer tokens: secret[:scope[:topic pattern]]
  TOC_LOG_FORMAT            text or json (levels from RUST_LOG, default info)
  TOC_LIMITS_<SETTING>      every limit, e.g. TOC_LIMITS_MAX_TOPICS (docs/operations.md)

Examples:
  toc serve                              (the memory engine, its journal in ./toc-data)
  toc serve --listen 0.0.0.0:8080 --config prod.toml
  TOC_STORE=redis TOC_REDIS_URL=redis://127.0.0.1:6379/ toc serve";

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
    #[command(after_help = SERVE_HELP, after_long_help = SERVE_HELP)]
    Serve {
        /// A settings file layered over the built-in defaults.
        #[arg(long, env = "TOC_CONFIG")]
        config: Option<PathBuf>,
        /// Where the journal goes when `memory.journal` is not set (`data_dir`, TOC_DATA_DIR;
        /// `toc-data` in the current directory by default).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// The address the HTTP API listens on (`listen`, TOC_LISTEN; 127.0.0.1:8080 by
        /// default). Any other than loopback needs tokens, or allow_open = true.
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
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
    /// A topic's event stream: a page of it, or with --follow every event as it comes.
    #[command(
        after_long_help = "Examples:\n  toc events orders                 (the oldest 100)\n  toc events orders --after ID      (the page after a page's `next`)\n  toc events orders --follow        (from the oldest kept, then each as it is appended, until ^C)"
    )]
    Events {
        /// The topic.
        topic: String,
        /// Events after this id (the `next` of a previous page).
        #[arg(long)]
        after: Option<String>,
        /// Most events on the page.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Keep printing events as they are appended, one line each (a JSON object each
        /// with --json), until interrupted.
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Claim due jobs of a pull topic with a lease (prints each job and its token).
    #[command(
        after_long_help = "Example:\n  toc claim reports --max 10 --wait-ms 5000\n  toc ack reports r1 --token 42"
    )]
    Claim {
        /// The topic.
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
        /// The topic.
        topic: String,
        /// The job's id.
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
    #[command(
        after_long_help = "Examples:\n  toc export --out backup.jsonl\n  toc export --topic orders --out orders.jsonl\n  toc export --journal toc-data/journal --out backup.jsonl   (the service stopped)"
    )]
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
    #[command(after_long_help = "Example:\n  TOC_URL=http://new-host:8080 toc import backup.jsonl")]
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
    /// Print a shell's completion script for `toc`: `source <(toc completions bash)`.
    #[command(
        after_long_help = "Examples:\n  toc completions bash > ~/.local/share/bash-completion/completions/toc\n  toc completions zsh > \"${fpath[1]}/_toc\"\n  toc completions fish > ~/.config/fish/completions/toc.fish"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
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
    Check {
        /// The journal file (`memory.journal`; toc-data/journal by default).
        file: PathBuf,
    },
    /// Copies a journal to FILE.orig-SECONDS, then rewrites it with every record that
    /// reads, going on past damage; says what was skipped. Refused while a service holds it.
    Salvage {
        /// The journal file (`memory.journal`; toc-data/journal by default).
        file: PathBuf,
    },
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
    /// When it fires: an RFC 3339 instant (2026-12-06T21:07:15Z) or ms since the epoch.
    #[arg(long, visible_alias = "fire-at", value_name = "INSTANT",
          value_parser = human::parse_at, conflicts_with_all = ["after", "delay_ms"])]
    pub at: Option<i64>,
    /// Fire this long from now: 90s, 30m, 2h, 1h30m, 500ms.
    #[arg(long = "in", value_name = "SPAN", value_parser = human::parse_in,
          conflicts_with = "delay_ms")]
    pub after: Option<u64>,
    /// Fire this many ms from now (--in, in ms).
    #[arg(long, value_name = "MS")]
    pub delay_ms: Option<i64>,
}

/// A recurring job's schedule (`repeat`): `--cron` (with `--tz`) or `--every`.
#[derive(Args)]
pub(crate) struct RepeatArgs {
    /// Recur on a cron pattern (`0 9 * * MON-FRI`); the first fire is its next instant
    /// unless --in or --at says otherwise.
    #[arg(long, value_name = "EXPR", conflicts_with = "every")]
    pub cron: Option<String>,
    /// The IANA time zone the cron pattern is read in (Europe/Berlin; UTC when absent).
    #[arg(long, value_name = "ZONE", requires = "cron")]
    pub tz: Option<String>,
    /// Recur every SPAN (30s, 5m, 1h), counted from each fire time.
    #[arg(long, value_name = "SPAN", value_parser = human::parse_in)]
    pub every: Option<u64>,
    /// End the series after N fires.
    #[arg(long = "repeat-limit", value_name = "N")]
    pub limit: Option<u32>,
    /// No fire after this instant (RFC 3339 or ms since the epoch).
    #[arg(long, value_name = "INSTANT", value_parser = human::parse_at)]
    pub until: Option<i64>,
    /// Put each cron instant off by a random delay of up to SPAN, never early.
    #[arg(long, value_name = "SPAN", value_parser = human::parse_in, requires = "cron")]
    pub jitter: Option<u64>,
}

#[derive(Subcommand)]
pub(crate) enum JobCmd {
    /// Create or replace a job, one-shot or recurring (--cron or --every).
    #[command(
        after_long_help = "Examples:\n  toc job put orders o1 --in 30m\n  toc job put orders o2 --at 2026-12-24T18:00:00Z --payload '{\"order\":2}'\n  toc job put hooks h1 --in 90s --type webhook --payload '{\"url\":\"https://example.com/hook\"}'\n  toc job put reports daily --cron '0 9 * * MON-FRI' --tz Europe/Berlin\n  toc job put probes p1 --every 30s --repeat-limit 10"
    )]
    Put(Box<PutArgs>),
    /// Fire a recurring job once, now, leaving its series as it is (a one-shot job of its
    /// own, `ID~NOW`).
    Trigger {
        /// The topic.
        topic: String,
        /// The job's id.
        id: String,
        /// Its shard key, when it was scheduled with one.
        #[arg(long)]
        shard_key: Option<String>,
    },
    /// Show a job: its state, times, attempts, payload and every other field the API gives.
    #[command(
        after_long_help = "Example:\n  toc job get orders o1\n  toc job get billing invoice-7 --next 5   (a recurring job's next five instants)"
    )]
    Get {
        /// The topic.
        topic: String,
        /// The job's id.
        id: String,
        /// Its shard key, when it was scheduled with one.
        #[arg(long)]
        shard_key: Option<String>,
        /// Also show a recurring job's next N instants (1 to 100), as `next_fire_ats`.
        #[arg(long)]
        next: Option<u32>,
    },
    /// List a topic's scheduled jobs by fire time (or its running ones by lease deadline).
    #[command(
        after_long_help = "Examples:\n  toc job ls orders --to 2026-12-07T00:00:00Z\n  toc job ls orders --state running\n  toc job ls orders --label campaign:spring --limit 20"
    )]
    Ls {
        /// The topic.
        topic: String,
        /// `scheduled` or `running`.
        #[arg(long, default_value = "scheduled")]
        state: String,
        /// The earliest fire time listed: RFC 3339 or ms since the epoch.
        #[arg(long, value_name = "INSTANT", value_parser = human::parse_at)]
        from: Option<i64>,
        /// The latest fire time listed: RFC 3339 or ms since the epoch.
        #[arg(long, value_name = "INSTANT", value_parser = human::parse_at)]
        to: Option<i64>,
        /// Most jobs on the page (1 to 1,000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// The `next` of a previous page.
        #[arg(long)]
        after: Option<String>,
        /// Only jobs with this label, `key:value` or `key=value`.
        #[arg(long)]
        label: Option<String>,
    },
    /// Cancel a topic's scheduled jobs by label and/or fire-time range (prints how many),
    /// in batches, with a progress bar on a terminal.
    #[command(
        after_long_help = "Examples:\n  toc job cancel-many orders --label campaign:spring\n  toc job cancel-many orders --from 2026-12-06T00:00:00Z --to 2026-12-07T00:00:00Z"
    )]
    CancelMany {
        /// The topic.
        topic: String,
        #[command(flatten)]
        filter: BulkArgs,
    },
    /// Cancel a scheduled job (a running one finishes its run).
    Cancel {
        /// The topic.
        topic: String,
        /// The job's id.
        id: String,
        /// Its shard key, when it was scheduled with one.
        #[arg(long)]
        shard_key: Option<String>,
    },
    /// Move a job's fire time.
    #[command(
        after_long_help = "Examples:\n  toc job reset devices d42 --in 5m     (a heartbeat pushes the alarm back)\n  toc job reset orders o1 --at 2026-12-07T09:00:00Z"
    )]
    Reset {
        /// The topic.
        topic: String,
        /// The job's id.
        id: String,
        #[command(flatten)]
        when: When,
        /// Its shard key, when it was scheduled with one.
        #[arg(long)]
        shard_key: Option<String>,
    },
}

/// `toc job put`'s arguments.
#[derive(Args)]
pub(crate) struct PutArgs {
    /// The topic.
    pub topic: String,
    /// The job's id.
    pub id: String,
    #[command(flatten)]
    pub when: When,
    #[command(flatten)]
    pub repeat: Box<RepeatArgs>,
    /// Its job type (the topic's default type when absent): which handler runs it.
    #[arg(long = "type")]
    pub job_type: Option<String>,
    /// Its payload, as JSON.
    #[arg(long)]
    pub payload: Option<String>,
    /// Runs it may take before it is dead (the topic's max_attempts when absent).
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// Where the job lives: jobs of one shard key share a slot (its id when absent).
    #[arg(long)]
    pub shard_key: Option<String>,
    /// Its flow key: jobs of one key share the key's flow limits.
    #[arg(long)]
    pub flow_key: Option<String>,
    /// Not run if it cannot fire within this many ms of its fire time.
    #[arg(long)]
    pub expire_after_ms: Option<u64>,
    /// A label, `key=value` or `key:value` (repeat for more).
    #[arg(long = "label")]
    pub labels: Vec<String>,
    /// Fail (409) instead of replacing an existing job.
    #[arg(long)]
    pub create_only: bool,
}

#[derive(Subcommand)]
pub(crate) enum DeadCmd {
    /// List a topic's dead letters, the oldest death first (as the API pages them).
    Ls {
        /// The topic.
        topic: String,
        /// Most dead letters on the page.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// The `next` of a previous page.
        #[arg(long)]
        after: Option<String>,
    },
    /// Requeue a topic's dead letters by label and/or fire-time range (prints how many), in
    /// batches, with a progress bar on a terminal.
    #[command(after_long_help = "Example:\n  toc dead requeue-many hooks --label tenant:acme")]
    RequeueMany {
        /// The topic.
        topic: String,
        #[command(flatten)]
        filter: BulkArgs,
    },
    /// Delete a topic's dead letters by label and/or fire-time range (prints how many), in
    /// batches: it cannot be undone.
    #[command(after_long_help = "Example:\n  toc dead rm-many hooks --label tenant:acme")]
    RmMany {
        /// The topic.
        topic: String,
        #[command(flatten)]
        filter: BulkArgs,
    },
    /// Schedule a dead letter again, due now, its attempts counted from 0.
    Requeue {
        /// The topic.
        topic: String,
        /// The dead letter's job id.
        id: String,
    },
    /// Delete a dead letter for good.
    Rm {
        /// The topic.
        topic: String,
        /// The dead letter's job id.
        id: String,
    },
}

#[derive(Subcommand)]
pub(crate) enum TopicCmd {
    /// List the topics with their figures: slots, jobs scheduled, running and dead, the next fire.
    #[command(
        after_long_help = "Example:\n  toc topic ls\n  toc topic ls --json   (the API's numbers, times in ms since the epoch)"
    )]
    Ls,
    /// Makes a topic with the settings given (the service's defaults for the rest); refused
    /// when it exists (`toc topic set` changes one).
    #[command(
        after_long_help = "Examples:\n  toc topic create orders --slots 64 --max-attempts 5 --backoff-base 2s\n  toc topic create hooks --default-type webhook --max-payload-bytes 65536 --max-fires-per-s 200"
    )]
    Create {
        /// The topic.
        topic: String,
        #[command(flatten)]
        settings: TopicArgs,
    },
    /// Changes the settings given of a topic that exists, leaving the others as they are.
    #[command(
        after_long_help = "Example:\n  toc topic set orders --max-attempts 10 --visibility-timeout 2m"
    )]
    Set {
        /// The topic.
        topic: String,
        #[command(flatten)]
        settings: TopicArgs,
    },
    /// A topic's settings and figures.
    Show {
        /// The topic.
        topic: String,
    },
    /// Doubles a topic's slots. No job moves: jobs written before are found in their old
    /// slots until they leave, and `draining_from` shows the old layout until then.
    Grow {
        /// The topic.
        topic: String,
    },
    /// Pauses a topic: no job fires and no claim is served, on every instance; jobs, resets
    /// and cancels are still accepted.
    Pause {
        /// The topic.
        topic: String,
    },
    /// Resumes a paused topic: what came due fires, in fire-time order.
    Resume {
        /// The topic.
        topic: String,
    },
    /// Limits a topic's fires per second over every instance (0 removes the limit).
    Limit {
        /// The topic.
        topic: String,
        /// Most fires a second over every instance; 0 removes the limit.
        max_fires_per_s: u32,
    },
    /// Gives every flow key of a topic its limits (`--off` removes them).
    Flow {
        /// The topic.
        topic: String,
        #[command(flatten)]
        limits: FlowArgs,
        /// Remove the topic's flow limits.
        #[arg(long, conflicts_with_all = ["rate", "period_ms", "parallelism"])]
        off: bool,
    },
    /// Deletes a topic whole: its settings, jobs, dead letters and events.
    Rm {
        /// The topic.
        topic: String,
        /// Delete it even while some of its jobs are running.
        #[arg(long)]
        force: bool,
    },
}

/// Which jobs a bulk change takes: at least one of these.
#[derive(Args)]
pub(crate) struct BulkArgs {
    /// Jobs a request changes at most (1 to 100,000): the bar moves once a batch.
    #[arg(long, default_value_t = 10_000)]
    pub batch: u64,
    /// Jobs with this label, `key:value` or `key=value`.
    #[arg(long)]
    pub label: Option<String>,
    /// The earliest fire time: RFC 3339 or ms since the epoch.
    #[arg(long, value_name = "INSTANT", value_parser = human::parse_at)]
    pub from: Option<i64>,
    /// The latest fire time: RFC 3339 or ms since the epoch.
    #[arg(long, value_name = "INSTANT", value_parser = human::parse_at)]
    pub to: Option<i64>,
}

/// A topic's settings on the command line: each left out keeps its value (or the service's
/// default, for a topic made).
#[derive(Args)]
pub(crate) struct TopicArgs {
    /// Its shards, a power of two (1 to 4096); a topic that exists may only double.
    #[arg(long)]
    pub slots: Option<u32>,
    /// Runs a failing job takes before it is dead (1 to 1,000).
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// How long a run holds its job before it is due again (`30s`, `5m`).
    #[arg(long, value_name = "SPAN", value_parser = human::parse_in)]
    pub visibility_timeout: Option<u64>,
    /// The first retry's delay (`1s`).
    #[arg(long, value_name = "SPAN", value_parser = human::parse_in)]
    pub backoff_base: Option<u64>,
    /// What each later retry's delay is multiplied by (1 to 100).
    #[arg(long)]
    pub backoff_factor: Option<f64>,
    /// The longest retry delay (`10m`).
    #[arg(long, value_name = "SPAN", value_parser = human::parse_in)]
    pub backoff_max: Option<u64>,
    /// The largest payload it accepts, in bytes of JSON.
    #[arg(long)]
    pub max_payload_bytes: Option<usize>,
    /// The type of a job that names none.
    #[arg(long)]
    pub default_type: Option<String>,
    /// A job type its jobs have beside the default (repeat for more; replaces the list).
    #[arg(long = "type", value_name = "TYPE")]
    pub types: Vec<String>,
    /// Most fires a second over every instance (0 removes the limit).
    #[arg(long)]
    pub max_fires_per_s: Option<u32>,
    /// Which events its runs append to its stream: all, changes (all but job.done), none.
    #[arg(long, value_parser = ["all", "changes", "none"])]
    pub events: Option<String>,
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
    Ls {
        /// The topic.
        topic: String,
    },
    /// A key's limits and counters, over every instance.
    Show {
        /// The topic.
        topic: String,
        /// The flow key.
        key: String,
    },
    /// Gives a key limits of its own, in place of the topic's.
    Set {
        /// The topic.
        topic: String,
        /// The flow key.
        key: String,
        #[command(flatten)]
        limits: FlowArgs,
    },
    /// Takes a key's own limits away: it goes by the topic's again.
    Rm {
        /// The topic.
        topic: String,
        /// The flow key.
        key: String,
    },
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
    if !matches!(cli.command, Command::Serve { .. }) {
        quiet_on_closed_pipe();
    }
    match cli.command {
        Command::Serve {
            config,
            data_dir,
            listen,
        } => return serve_main(config, data_dir, listen),
        Command::Journal(cmd) => return journal_main(cmd),
        Command::Webhooks(cmd) => return webhooks_main(cmd),
        Command::Bench { args } => return bench_main(&args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "toc", &mut std::io::stdout());
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // What a refusal may be explained by, taken before the command is run.
    let gone = match &cli.command {
        Command::Job(JobCmd::Get { topic, id, .. }) => Some((topic.clone(), id.clone())),
        _ => None,
    };
    let lookup = client::Client::of(&cli);
    let done = match cli.command {
        Command::Export { .. } | Command::Import { .. } => runtime.block_on(transfer::run(cli)),
        _ => runtime.block_on(client::run(cli)),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => client::exit(runtime.block_on(client::explain(&lookup, f, gone))),
    }
}

/// A reader that closed the pipe (`toc topic ls | head -2`) ends a client command quietly
/// with status 0, as `ls` or `cat` do: Rust's runtime ignores SIGPIPE, so printing to a
/// closed pipe panics (`println!`, clap_complete's writer); the panic that says so exits
/// instead of printing a trace and exiting 101.
fn quiet_on_closed_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if text.contains("Broken pipe") || text.contains("BrokenPipe") {
            std::process::exit(0);
        }
        report(info);
    }));
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

/// `toc serve`: the service until a signal stops it ([`serve::Service`] with the built-in
/// types only).
fn serve_main(
    config: Option<PathBuf>,
    data_dir: Option<PathBuf>,
    listen: Option<std::net::SocketAddr>,
) -> ExitCode {
    let service = serve::Service::load(config.as_deref(), data_dir).and_then(|s| match listen {
        Some(addr) => s.listening_on(addr),
        None => Ok(s),
    });
    match service {
        Ok(service) => service.run(),
        Err(e) => {
            eprintln!("toc serve: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every subcommand and every option or argument of `toc`, at every depth, with its
    /// path (`toc job put --type`) and whether it has a line of help.
    fn helps(cmd: &clap::Command, path: &str, out: &mut Vec<(String, bool)>) {
        for arg in cmd.get_arguments() {
            let name = arg.get_id().as_str();
            if matches!(name, "help" | "version") {
                continue;
            }
            let shown = arg
                .get_long()
                .map_or_else(|| format!("<{name}>"), |l| format!("--{l}"));
            out.push((format!("{path} {shown}"), arg.get_help().is_some()));
        }
        for sub in cmd.get_subcommands() {
            let here = format!("{path} {}", sub.get_name());
            out.push((here.clone(), sub.get_about().is_some()));
            helps(sub, &here, out);
        }
    }

    #[test]
    fn every_command_and_option_has_help() {
        let mut all = Vec::new();
        helps(&Cli::command(), "toc", &mut all);
        let missing: Vec<&str> = all
            .iter()
            .filter(|(_, has)| !has)
            .map(|(p, _)| p.as_str())
            .collect();
        assert!(
            all.len() > 100,
            "only {} commands and options seen",
            all.len()
        );
        assert!(missing.is_empty(), "no help: {missing:#?}");
    }

    #[test]
    fn the_main_commands_show_an_example_in_their_long_help() {
        let cli = Cli::command();
        for path in [
            &["job", "put"][..],
            &["job", "get"],
            &["job", "ls"],
            &["job", "reset"],
            &["job", "cancel-many"],
            &["topic", "ls"],
            &["export"],
            &["import"],
            &["claim"],
            &["serve"],
            &["completions"],
        ] {
            let mut cmd = &cli;
            for name in path {
                cmd = cmd.find_subcommand(name).expect("a subcommand");
            }
            let long = cmd.get_after_long_help().map(|h| h.to_string());
            assert!(
                long.is_some_and(|h| h.contains("toc ")),
                "toc {}: no example in --help",
                path.join(" ")
            );
        }
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}

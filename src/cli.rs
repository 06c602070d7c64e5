//! The `toc` command line: `toc serve`, and a client of the HTTP API for everything else.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};

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
  TOC_MEMORY_JOURNAL        journal file of the memory store (empty: memory only)
  TOC_MEMORY_FSYNC          always or every_second
  TOC_RUNTIME_POLL_MS, TOC_RUNTIME_PUMP_BATCH, TOC_RUNTIME_GRACE_MS, TOC_RUNTIME_EVENTS_MAX_LEN,
  TOC_RUNTIME_WORKERS (slot actor threads; 0: one per core), TOC_RUNTIME_FOREIGN_TYPES
  TOC_HTTP_MAX_BODY_BYTES, TOC_HTTP_MAX_BATCH_BODY_BYTES, TOC_HTTP_MAX_BATCH_RESETS
  TOC_TOPICS_AUTO_CREATE, TOC_TOPICS_DEFAULTS_<SETTING> (e.g. TOC_TOPICS_DEFAULTS_SLOTS)
Every setting has one: TOC_ + its path in config/default.toml, in upper case.";

#[derive(Parser)]
#[command(name = "toc", version, about = "timeout-center: jobs that fire at a future instant, at least once and on time", after_help = ENV_HELP)]
pub struct Cli {
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
pub enum Command {
    /// Run the service: store, runtime and HTTP API.
    Serve {
        /// A settings file layered over the built-in defaults.
        #[arg(long, env = "TOC_CONFIG")]
        config: Option<PathBuf>,
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
    /// A topic's event stream.
    Events {
        topic: String,
        #[arg(long)]
        after: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// The service's health.
    Health,
    /// Load generator and benchmark: `toc bench all --quick` for a short check, `toc bench
    /// all` for the published figures (BENCHMARKS.md).
    #[cfg(feature = "bench")]
    Bench(crate::bench::BenchArgs),
}

#[derive(Args)]
pub struct When {
    /// Fire time, ms since the Unix epoch.
    #[arg(long, conflicts_with = "delay_ms")]
    pub fire_at: Option<i64>,
    /// Fire this many ms from now.
    #[arg(long)]
    pub delay_ms: Option<i64>,
}

#[derive(Subcommand)]
pub enum JobCmd {
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
        /// Fail (409) instead of replacing an existing job.
        #[arg(long)]
        create_only: bool,
    },
    Get {
        topic: String,
        id: String,
        #[arg(long)]
        shard_key: Option<String>,
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
pub enum DeadCmd {
    Ls {
        topic: String,
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[arg(long)]
        after: Option<String>,
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
pub enum TopicCmd {
    Ls,
    Show { topic: String },
}

/// A failed command: its message and exit code.
pub struct Failure {
    pub message: String,
    pub code: u8,
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn shard_q(shard_key: &Option<String>) -> String {
    shard_key
        .as_ref()
        .map(|k| format!("?shard_key={}", enc(k)))
        .unwrap_or_default()
}

/// `/v1/topics/{topic}/jobs/{id}{tail}`, with the shard key when one is given.
fn job_path(topic: &str, id: &str, tail: &str, shard_key: &Option<String>) -> String {
    format!(
        "/v1/topics/{}/jobs/{}{tail}{}",
        enc(topic),
        enc(id),
        shard_q(shard_key)
    )
}

/// A paged list of a topic: `/v1/topics/{topic}/{what}?limit=&after=`.
fn page_path(topic: &str, what: &str, limit: usize, after: &Option<String>) -> String {
    let mut path = format!("/v1/topics/{}/{what}?limit={limit}", enc(topic));
    if let Some(a) = after {
        path.push_str(&format!("&after={}", enc(a)));
    }
    path
}

struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Failure> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base.trim_end_matches('/')));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.map_err(|e| Failure {
            message: format!("cannot reach {}: {e}", self.base),
            code: 3,
        })?;
        let status = res.status();
        let text = res.text().await.unwrap_or_default();
        let value: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() || (status.as_u16() == 503 && path == "/health") {
            return Ok(value);
        }
        let (code, message) = match value.get("error") {
            Some(e) => (
                e["code"].as_str().unwrap_or("error").to_string(),
                e["message"].as_str().unwrap_or("").to_string(),
            ),
            None => ("error".to_string(), value.to_string()),
        };
        Err(Failure {
            message: format!("{} {code}: {message}", status.as_u16()),
            code: 1,
        })
    }
}

fn when_body(when: &When) -> Result<Value, Failure> {
    match (when.fire_at, when.delay_ms) {
        (Some(at), _) => Ok(json!({"fire_at": at})),
        (None, Some(d)) => Ok(json!({"delay_ms": d})),
        (None, None) => Err(Failure {
            message: "give --fire-at MS or --delay-ms MS".into(),
            code: 2,
        }),
    }
}

/// Runs a client command; prints its result.
pub async fn run(cli: Cli) -> Result<(), Failure> {
    use reqwest::Method;
    let client = Client {
        http: reqwest::Client::new(),
        base: cli.url.clone(),
        token: cli.token.clone(),
    };
    let (value, view): (Value, View) = match cli.command {
        Command::Serve { .. } => unreachable!("not a client command"),
        #[cfg(feature = "bench")]
        Command::Bench(_) => unreachable!("not a client command"),
        Command::Job(JobCmd::Put {
            topic,
            id,
            when,
            job_type,
            payload,
            max_attempts,
            shard_key,
            create_only,
        }) => {
            let mut body = when_body(&when)?;
            if let Some(t) = job_type {
                body["type"] = json!(t);
            }
            if let Some(p) = payload {
                body["payload"] = serde_json::from_str(&p).map_err(|e| Failure {
                    message: format!("--payload is not JSON: {e}"),
                    code: 2,
                })?;
            }
            if let Some(n) = max_attempts {
                body["max_attempts"] = json!(n);
            }
            if let Some(k) = shard_key {
                body["shard_key"] = json!(k);
            }
            let mode = if create_only { "?mode=create_only" } else { "" };
            let path = job_path(&topic, &id, mode, &None);
            (
                client.call(Method::PUT, &path, Some(body)).await?,
                View::Record,
            )
        }
        Command::Job(JobCmd::Get {
            topic,
            id,
            shard_key,
        }) => {
            let path = job_path(&topic, &id, "", &shard_key);
            (client.call(Method::GET, &path, None).await?, View::Record)
        }
        Command::Job(JobCmd::Cancel {
            topic,
            id,
            shard_key,
        }) => {
            let path = job_path(&topic, &id, "", &shard_key);
            client.call(Method::DELETE, &path, None).await?;
            (json!({"cancelled": id}), View::Record)
        }
        Command::Job(JobCmd::Reset {
            topic,
            id,
            when,
            shard_key,
        }) => {
            let path = job_path(&topic, &id, "/reset", &shard_key);
            (
                client
                    .call(Method::POST, &path, Some(when_body(&when)?))
                    .await?,
                View::Record,
            )
        }
        Command::Dead(DeadCmd::Ls {
            topic,
            limit,
            after,
        }) => {
            let path = page_path(&topic, "dead", limit, &after);
            let cols = &["id", "type", "attempts", "dead_at", "last_error"];
            (
                client.call(Method::GET, &path, None).await?,
                View::Table(cols),
            )
        }
        Command::Dead(DeadCmd::Requeue { topic, id }) => {
            let path = format!("/v1/topics/{}/dead/{}/requeue", enc(&topic), enc(&id));
            (client.call(Method::POST, &path, None).await?, View::Record)
        }
        Command::Dead(DeadCmd::Rm { topic, id }) => {
            let path = format!("/v1/topics/{}/dead/{}", enc(&topic), enc(&id));
            client.call(Method::DELETE, &path, None).await?;
            (json!({"deleted": id}), View::Record)
        }
        Command::Topic(TopicCmd::Ls) => {
            let cols = &[
                "name",
                "slots",
                "scheduled",
                "running",
                "dead",
                "next_fire_at",
            ];
            (
                client.call(Method::GET, "/v1/topics", None).await?,
                View::Table(cols),
            )
        }
        Command::Topic(TopicCmd::Show { topic }) => {
            let path = format!("/v1/topics/{}", enc(&topic));
            (client.call(Method::GET, &path, None).await?, View::Record)
        }
        Command::Events {
            topic,
            after,
            limit,
        } => {
            let path = page_path(&topic, "events", limit, &after);
            let cols = &[
                "id", "event", "job_id", "type", "fire_at", "fired_at", "data",
            ];
            (
                client.call(Method::GET, &path, None).await?,
                View::Table(cols),
            )
        }
        Command::Health => {
            let v = client.call(Method::GET, "/health", None).await?;
            let healthy = v["status"] == "ok";
            print(&v, if cli.json { View::Json } else { View::Health });
            return if healthy {
                Ok(())
            } else {
                Err(Failure {
                    message: "unhealthy".into(),
                    code: 1,
                })
            };
        }
    };
    print(&value, if cli.json { View::Json } else { view });
    Ok(())
}

#[derive(Clone, Copy)]
enum View {
    Json,
    Record,
    Table(&'static [&'static str]),
    Health,
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn print(value: &Value, view: View) {
    match view {
        View::Json => println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        ),
        View::Record => {
            if let Some(obj) = value.as_object() {
                let width = obj.keys().map(|k| k.len()).max().unwrap_or(0);
                for (k, v) in obj {
                    println!("{k:<width$}  {}", cell(v));
                }
            } else {
                println!("{}", cell(value));
            }
        }
        View::Table(cols) => {
            let items = value["items"].as_array().cloned().unwrap_or_default();
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|i| cols.iter().map(|c| cell(&i[*c])).collect())
                .collect();
            let widths: Vec<usize> = cols
                .iter()
                .enumerate()
                .map(|(n, c)| {
                    rows.iter()
                        .map(|r| r[n].len())
                        .chain([c.len()])
                        .max()
                        .unwrap_or(0)
                        .min(60)
                })
                .collect();
            let line = |cells: Vec<String>| {
                cells
                    .iter()
                    .zip(&widths)
                    .map(|(c, w)| format!("{:<w$}", c.chars().take(*w).collect::<String>()))
                    .collect::<Vec<_>>()
                    .join("  ")
            };
            println!("{}", line(cols.iter().map(|c| c.to_uppercase()).collect()));
            for r in rows {
                println!("{}", line(r));
            }
            if let Some(next) = value["next"].as_str() {
                println!("(more: --after {next})");
            }
        }
        View::Health => {
            println!("status  {}", cell(&value["status"]));
            println!(
                "store   {} (reachable: {})",
                cell(&value["store"]["engine"]),
                cell(&value["store"]["reachable"])
            );
            let slots = value["slots"].as_array().cloned().unwrap_or_default();
            let alive = slots.iter().filter(|s| s["alive"] == true).count();
            let restarts: u64 = slots.iter().filter_map(|s| s["restarts"].as_u64()).sum();
            println!("slots   {alive}/{} alive, {restarts} restarts", slots.len());
        }
    }
}

/// Exit code of a failure.
pub fn exit(f: Failure) -> ExitCode {
    eprintln!("toc: {}", f.message);
    ExitCode::from(f.code)
}

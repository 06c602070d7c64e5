//! The client commands: each one HTTP call to the service, its answer printed.

use std::process::ExitCode;

use serde_json::{Value, json};

use super::{
    BulkArgs, Cli, Command, DeadCmd, FlowArgs, FlowCmd, JobCmd, PutArgs, TopicArgs, TopicCmd, When,
};

/// A failed command: its message and exit code.
pub(super) struct Failure {
    pub message: String,
    pub code: u8,
}

impl Failure {
    /// A failure of exit code `code`.
    pub(super) fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code,
        }
    }
}

pub(super) fn enc(s: &str) -> String {
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

/// The columns of `toc job ls`.
const JOB_COLUMNS: &[&str] = &["id", "type", "fire_at", "attempts", "lease_until"];

/// `&from=&to=`, each when given: a range of fire times.
fn range_query(from: Option<i64>, to: Option<i64>) -> String {
    [("from", from), ("to", to)]
        .into_iter()
        .filter_map(|(name, v)| Some(format!("&{name}={}", v?)))
        .collect()
}

/// A paged list of a topic: `/v1/topics/{topic}/{what}?limit=&after=`.
fn page_path(topic: &str, what: &str, limit: usize, after: &Option<String>) -> String {
    let mut path = format!("/v1/topics/{}/{what}?limit={limit}", enc(topic));
    if let Some(a) = after {
        path.push_str(&format!("&after={}", enc(a)));
    }
    path
}

pub(super) struct Client {
    pub(super) http: reqwest::Client,
    pub(super) base: String,
    pub(super) token: Option<String>,
}

impl Client {
    /// The client `--url` and `--token` describe.
    pub(super) fn of(cli: &Cli) -> Client {
        Client {
            http: reqwest::Client::new(),
            base: cli.url.clone(),
            token: cli.token.clone(),
        }
    }

    /// A request to `path`, with the token.
    pub(super) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self
            .http
            .request(method, format!("{}{path}", self.base.trim_end_matches('/')));
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// A request that could not be sent: the URL shown by its origin, and the client's
    /// error without it, so a password in --url never reaches the terminal or a log.
    pub(super) fn unreachable(&self, e: reqwest::Error) -> Failure {
        let shown = crate::jobs::webhook::redact::url_text(&self.base);
        if e.is_builder() || url::Url::parse(&self.base).is_err() {
            // Shown as given, unless it may hold a password.
            let given = if self.base.contains('@') {
                "(a value with credentials, not shown)".to_string()
            } else {
                format!("{:?}", self.base)
            };
            return Failure {
                message: format!(
                    "--url {given} is not a URL: give one with its scheme, like \
                     http://127.0.0.1:8080 (or set TOC_URL)"
                ),
                code: 2,
            };
        }
        // What went wrong, as deep as the error says (connection refused, a name that does
        // not resolve), then what to do.
        let e = e.without_url();
        let mut cause = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            cause = s.to_string();
            source = s.source();
        }
        let hint = if e.is_connect() {
            " — is `toc serve` running there? (the address: --url or TOC_URL)"
        } else if e.is_timeout() {
            " — the service did not answer in time"
        } else {
            ""
        };
        Failure {
            message: format!("cannot reach {shown}: {cause}{hint}"),
            code: 3,
        }
    }

    /// What the service answered a refused request: `STATUS code: message`.
    pub(super) async fn refusal(res: reqwest::Response) -> Failure {
        let status = res.status();
        let text = res.text().await.unwrap_or_default();
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        let (code, message) = match value.get("error") {
            Some(e) => (
                e["code"].as_str().unwrap_or("error").to_string(),
                e["message"].as_str().unwrap_or("").to_string(),
            ),
            None => ("error".to_string(), value.to_string()),
        };
        let hint = match status.as_u16() {
            401 => " (give a token with --token or TOC_TOKEN)",
            403 => {
                " (this token's scope or topic pattern does not allow it: use a token that does)"
            }
            _ => "",
        };
        Failure {
            message: format!("{} {code}: {message}{hint}", status.as_u16()),
            code: 1,
        }
    }

    pub(super) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Failure> {
        let mut req = self.request(method, path);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.map_err(|e| self.unreachable(e))?;
        let status = res.status();
        if !(status.is_success() || (status.as_u16() == 503 && path == "/health")) {
            return Err(Client::refusal(res).await);
        }
        let text = res.text().await.unwrap_or_default();
        Ok(if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        })
    }
}

fn when_body(when: &When) -> Result<Value, Failure> {
    match (when.at, when.after, when.delay_ms) {
        (Some(at), _, _) => Ok(json!({"fire_at": at})),
        (None, Some(ms), _) => Ok(json!({"delay_ms": ms})),
        (None, None, Some(d)) => Ok(json!({"delay_ms": d})),
        (None, None, None) => Err(Failure {
            message: "give --in SPAN (90s, 30m) or --at INSTANT (RFC 3339 or ms since the epoch)"
                .into(),
            code: 2,
        }),
    }
}

/// The `repeat` of a recurring job's body.
fn repeat_body(r: &super::RepeatArgs) -> Value {
    let mut repeat = json!({});
    if let Some(c) = &r.cron {
        repeat["cron"] = json!(c);
    }
    if let Some(tz) = &r.tz {
        repeat["tz"] = json!(tz);
    }
    if let Some(ms) = r.every {
        repeat["every_ms"] = json!(ms);
    }
    if let Some(n) = r.limit {
        repeat["limit"] = json!(n);
    }
    if let Some(at) = r.until {
        repeat["until"] = json!(at);
    }
    if let Some(ms) = r.jitter {
        repeat["jitter_ms"] = json!(ms);
    }
    repeat
}

/// A label as given on the command line, `key=value` or `key:value` (the API's spelling):
/// the key and the value. The first `=` splits it, else the first `:`.
pub(super) fn label_pair(label: &str) -> Result<(&str, &str), Failure> {
    label
        .split_once('=')
        .or_else(|| label.split_once(':'))
        .ok_or_else(|| Failure {
            message: format!("--label {label:?}: give key=value (or key:value)"),
            code: 2,
        })
}

/// A label filter as the API's query takes it: `key:value`.
fn label_filter(label: &str) -> Result<String, Failure> {
    let (k, v) = label_pair(label)?;
    Ok(enc(&format!("{k}:{v}")))
}

/// A bulk change's query string: `?limit=&label=&from=&to=`, the ones given.
fn bulk_query(filter: &BulkArgs, to: Option<i64>, limit: u64) -> Result<String, Failure> {
    let mut parts = vec![format!("limit={limit}")];
    if let Some(l) = &filter.label {
        parts.push(format!("label={}", label_filter(l)?));
    }
    for (name, v) in [("from", filter.from), ("to", to)] {
        if let Some(v) = v {
            parts.push(format!("{name}={v}"));
        }
    }
    Ok(format!("?{}", parts.join("&")))
}

/// A bulk change in batches of `--batch` (`path` answers `{field: n}` with `n` at most the
/// batch), asked again until a batch comes back short; the bar's length is `most`, what
/// the filter could take at most (the topic's count). A requeue takes only what was dead
/// when it began, each letter once, although a letter requeued may die again while it
/// runs: it asks only for letters whose last run fired by then (`to`; a letter requeued
/// runs again after), and no more than the topic held then. Answers `{field: total}`.
async fn in_batches(
    client: &Client,
    method: reqwest::Method,
    path: &str,
    filter: &BulkArgs,
    field: &'static str,
    most: Option<u64>,
    what: &'static str,
) -> Result<Value, Failure> {
    if !(1..=100_000).contains(&filter.batch) {
        return Err(Failure::new(2, "--batch: 1 to 100,000 jobs a request"));
    }
    let requeue = field == "requeued";
    let started = super::human::now_ms();
    let to = match (requeue, filter.to) {
        (true, Some(to)) => Some(to.min(started)),
        (true, None) => Some(started),
        (false, to) => to,
    };
    let mut bar = super::progress::Progress::new(most, what);
    let mut total = 0;
    loop {
        let mut limit = filter.batch;
        if let (true, Some(most)) = (requeue, most) {
            if total >= most {
                break;
            }
            limit = limit.min(most - total);
        }
        let query = match bulk_query(filter, to, limit) {
            Ok(q) => q,
            Err(f) => {
                bar.finish();
                return Err(f);
            }
        };
        let path = format!("{path}{query}");
        let answer = client.call(method.clone(), &path, None).await;
        let n = match answer {
            Ok(v) => v[field].as_u64().unwrap_or(0),
            Err(f) => {
                bar.finish();
                return Err(f);
            }
        };
        total += n;
        bar.inc(n);
        if n < limit {
            break;
        }
    }
    bar.finish();
    Ok(json!({ field: total }))
}

/// One of a topic's counts (`scheduled`, `dead`): how many a bulk change could take.
async fn topic_count(client: &Client, topic: &str, field: &str) -> Option<u64> {
    let path = format!("/v1/topics/{}", enc(topic));
    let v = client.call(reqwest::Method::GET, &path, None).await.ok()?;
    v[field].as_u64()
}

/// A flow key's limits as the API takes them: the fields given.
fn flow_body(limits: &FlowArgs) -> Value {
    let mut body = json!({});
    if let Some(r) = limits.rate {
        body["rate"] = json!(r);
    }
    if let Some(p) = limits.period_ms {
        body["period_ms"] = json!(p);
    }
    if let Some(p) = limits.parallelism {
        body["parallelism"] = json!(p);
    }
    body
}

async fn pause(client: &Client, topic: &str, paused: bool) -> Result<(Value, View), Failure> {
    change_topic(client, topic, json!({ "paused": paused })).await
}

/// `PUT`s a change of `topic`'s settings; answers the topic.
/// The columns of an event, as `toc events` shows them.
const EVENT_COLUMNS: &[&str] = &[
    "id", "event", "job_id", "type", "fire_at", "fired_at", "data",
];

/// How long `toc events --follow` waits before it asks again when nothing was new.
const FOLLOW_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// `toc events --follow`: every event after `after` (from the oldest kept), then each as
/// it is appended, one line each, until interrupted (or the reader goes away).
async fn follow_events(
    client: &Client,
    topic: &str,
    mut after: Option<String>,
    json: bool,
) -> Result<(), Failure> {
    use std::io::Write;
    if !json {
        println!("{}", EVENT_COLUMNS.join("  ").to_uppercase());
    }
    loop {
        let path = page_path(topic, "events", 1_000, &after);
        let page = client.call(reqwest::Method::GET, &path, None).await?;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        for event in &items {
            if json {
                println!("{event}");
            } else {
                let shown = super::human::humanize(event, super::human::now_ms());
                let cells: Vec<String> = EVENT_COLUMNS.iter().map(|c| cell(&shown[*c])).collect();
                println!("{}", cells.join("  "));
            }
        }
        let _ = std::io::stdout().flush();
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_string()),
            None => tokio::time::sleep(FOLLOW_POLL).await,
        }
    }
}

/// The body of `PUT /v1/topics/{topic}` for the settings given.
fn topic_body(a: &TopicArgs) -> Value {
    let mut body = json!({});
    let mut set = |field: &str, v: Value| {
        if !v.is_null() {
            body[field] = v;
        }
    };
    set("slots", json!(a.slots));
    set("max_attempts", json!(a.max_attempts));
    set("visibility_timeout_ms", json!(a.visibility_timeout));
    set("max_payload_bytes", json!(a.max_payload_bytes));
    set("default_type", json!(a.default_type));
    set("max_fires_per_s", json!(a.max_fires_per_s));
    set("events", json!(a.events));
    if !a.types.is_empty() {
        set("types", json!(a.types));
    }
    let mut backoff = json!({});
    for (field, v) in [
        ("base_ms", json!(a.backoff_base)),
        ("factor", json!(a.backoff_factor)),
        ("max_ms", json!(a.backoff_max)),
    ] {
        if !v.is_null() {
            backoff[field] = v;
        }
    }
    if backoff.as_object().is_some_and(|b| !b.is_empty()) {
        set("backoff", backoff);
    }
    body
}

/// `toc topic create` (`exists`: false) or `set` (true): refused when the topic's
/// existence is not what the command expects, naming the other command.
async fn put_topic_settings(
    client: &Client,
    topic: &str,
    settings: &TopicArgs,
    exists: bool,
) -> Result<(Value, View), Failure> {
    let path = format!("/v1/topics/{}", enc(topic));
    let found = client.call(reqwest::Method::GET, &path, None).await;
    match (found, exists) {
        (Ok(_), false) => {
            return Err(Failure {
                message: format!("topic {topic:?} exists: `toc topic set {topic} ...` changes it"),
                code: 1,
            });
        }
        (Err(e), true) if e.message.contains("404") => {
            return Err(Failure {
                message: format!(
                    "topic {topic:?} does not exist: `toc topic create {topic} ...` makes it"
                ),
                code: 1,
            });
        }
        (Err(e), _) if !e.message.contains("404") => return Err(e),
        _ => {}
    }
    change_topic(client, topic, topic_body(settings)).await
}

async fn change_topic(client: &Client, topic: &str, body: Value) -> Result<(Value, View), Failure> {
    let path = format!("/v1/topics/{}", enc(topic));
    Ok((
        client.call(reqwest::Method::PUT, &path, Some(body)).await?,
        View::Record,
    ))
}

pub(super) async fn run(cli: Cli) -> Result<(), Failure> {
    use reqwest::Method;
    let client = Client::of(&cli);
    let (value, view): (Value, View) = match cli.command {
        Command::Serve { .. }
        | Command::Journal(_)
        | Command::Webhooks(_)
        | Command::Export { .. }
        | Command::Import { .. }
        | Command::Bench { .. }
        | Command::Completions { .. } => {
            unreachable!("not a client command")
        }
        Command::Job(cmd) => job(&client, cmd).await?,
        Command::Dead(cmd) => dead(&client, cmd).await?,
        Command::Topic(cmd) => topic(&client, cmd).await?,
        Command::Flow(cmd) => flow(&client, cmd).await?,
        Command::Events {
            topic,
            after,
            follow: true,
            ..
        } => return follow_events(&client, &topic, after, cli.json).await,
        Command::Events {
            topic,
            after,
            limit,
            ..
        } => {
            let path = page_path(&topic, "events", limit, &after);
            (
                client.call(Method::GET, &path, None).await?,
                View::Table(EVENT_COLUMNS),
            )
        }
        Command::Claim {
            topic,
            max,
            wait_ms,
            lease_ms,
        } => {
            let path = format!("/v1/topics/{}/claim", enc(&topic));
            let mut body = json!({"max": max, "wait_ms": wait_ms});
            if let Some(l) = lease_ms {
                body["lease_ms"] = l.into();
            }
            let mut v = client.call(Method::POST, &path, Some(body)).await?;
            if !cli.json {
                v["items"] = v["jobs"].take(); // the table view lists `items`
            }
            let cols = &[
                "id",
                "token",
                "attempts",
                "fire_at",
                "lease_until",
                "payload",
            ];
            (v, View::Table(cols))
        }
        Command::Ack {
            topic,
            id,
            token,
            shard_key,
        } => {
            let path = job_path(&topic, &id, "/ack", &shard_key);
            client
                .call(Method::POST, &path, Some(json!({"token": token})))
                .await?;
            (json!({"acked": id}), View::Record)
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

/// The body of `toc job put`'s `PUT`.
fn put_body(put: &PutArgs) -> Result<Value, Failure> {
    let PutArgs {
        when,
        repeat,
        job_type,
        payload,
        max_attempts,
        shard_key,
        flow_key,
        expire_after_ms,
        labels,
        ..
    } = put;
    let recurring = repeat.cron.is_some() || repeat.every.is_some();
    let mut body = match (recurring, &when) {
        // A series given no first fire starts at its schedule's first instant.
        (
            true,
            When {
                at: None,
                after: None,
                delay_ms: None,
            },
        ) => json!({}),
        _ => when_body(when)?,
    };
    if recurring {
        body["repeat"] = repeat_body(repeat);
    } else if repeat.limit.is_some() || repeat.until.is_some() {
        return Err(Failure {
            message: "--repeat-limit and --until go with --cron or --every".into(),
            code: 2,
        });
    }
    if let Some(t) = job_type {
        body["type"] = json!(t);
    }
    if let Some(p) = payload {
        body["payload"] = serde_json::from_str(p).map_err(|e| Failure {
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
    if let Some(k) = flow_key {
        body["flow_key"] = json!(k);
    }
    if let Some(ms) = expire_after_ms {
        body["expire_after_ms"] = json!(ms);
    }
    for label in labels {
        let (k, v) = label_pair(label)?;
        body["labels"][k] = json!(v);
    }
    Ok(body)
}

/// `toc job …`: one job, or jobs by label.
async fn job(client: &Client, cmd: JobCmd) -> Result<(Value, View), Failure> {
    use reqwest::Method;
    Ok(match cmd {
        JobCmd::Put(put) => {
            let body = put_body(&put)?;
            let mode = put.create_only.then_some("?mode=create_only");
            let path = job_path(&put.topic, &put.id, mode.unwrap_or_default(), &None);
            (
                client.call(Method::PUT, &path, Some(body)).await?,
                View::Job,
            )
        }
        JobCmd::Trigger {
            topic,
            id,
            shard_key,
        } => {
            let path = job_path(&topic, &id, "/trigger", &shard_key);
            (client.call(Method::POST, &path, None).await?, View::Job)
        }
        JobCmd::Get {
            topic,
            id,
            shard_key,
            next,
        } => {
            let path = job_path(&topic, &id, "", &shard_key);
            let path = match next {
                Some(n) if path.contains('?') => format!("{path}&next={n}"),
                Some(n) => format!("{path}?next={n}"),
                None => path,
            };
            (client.call(Method::GET, &path, None).await?, View::Job)
        }
        JobCmd::Ls {
            topic,
            state,
            from,
            to,
            limit,
            after,
            label,
        } => {
            let mut path = format!(
                "/v1/topics/{}/jobs?state={}&limit={limit}{}",
                enc(&topic),
                enc(&state),
                range_query(from, to)
            );
            if let Some(l) = label {
                path.push_str(&format!("&label={}", label_filter(&l)?));
            }
            if let Some(c) = after {
                path.push_str(&format!("&cursor={}", enc(&c)));
            }
            let page = client.call(Method::GET, &path, None).await?;
            (page, View::Table(JOB_COLUMNS))
        }
        JobCmd::Cancel {
            topic,
            id,
            shard_key,
        } => {
            let path = job_path(&topic, &id, "", &shard_key);
            client.call(Method::DELETE, &path, None).await?;
            (json!({"cancelled": id}), View::Record)
        }
        JobCmd::Reset {
            topic,
            id,
            when,
            shard_key,
        } => {
            let path = job_path(&topic, &id, "/reset", &shard_key);
            (
                client
                    .call(Method::POST, &path, Some(when_body(&when)?))
                    .await?,
                View::Job,
            )
        }
        JobCmd::CancelMany { topic, filter } => {
            let path = format!("/v1/topics/{}/jobs", enc(&topic));
            let most = topic_count(client, &topic, "scheduled").await;
            let v = in_batches(
                client,
                Method::DELETE,
                &path,
                &filter,
                "cancelled",
                most,
                "jobs cancelled",
            )
            .await?;
            (v, View::Record)
        }
    })
}

/// `toc dead …`: dead letters.
async fn dead(client: &Client, cmd: DeadCmd) -> Result<(Value, View), Failure> {
    use reqwest::Method;
    Ok(match cmd {
        DeadCmd::Ls {
            topic,
            limit,
            after,
        } => {
            let path = page_path(&topic, "dead", limit, &after);
            let cols = &["id", "type", "attempts", "dead_at", "last_error"];
            (
                client.call(Method::GET, &path, None).await?,
                View::Table(cols),
            )
        }
        DeadCmd::RequeueMany { topic, filter } => {
            let path = format!("/v1/topics/{}/dead/requeue", enc(&topic));
            let most = topic_count(client, &topic, "dead").await;
            let v = in_batches(
                client,
                Method::POST,
                &path,
                &filter,
                "requeued",
                most,
                "dead letters requeued",
            )
            .await?;
            (v, View::Record)
        }
        DeadCmd::RmMany { topic, filter } => {
            let path = format!("/v1/topics/{}/dead", enc(&topic));
            let most = topic_count(client, &topic, "dead").await;
            let v = in_batches(
                client,
                Method::DELETE,
                &path,
                &filter,
                "deleted",
                most,
                "dead letters deleted",
            )
            .await?;
            (v, View::Record)
        }
        DeadCmd::Requeue { topic, id } => {
            let path = format!("/v1/topics/{}/dead/{}/requeue", enc(&topic), enc(&id));
            (client.call(Method::POST, &path, None).await?, View::Record)
        }
        DeadCmd::Rm { topic, id } => {
            let path = format!("/v1/topics/{}/dead/{}", enc(&topic), enc(&id));
            client.call(Method::DELETE, &path, None).await?;
            (json!({"deleted": id}), View::Record)
        }
    })
}

/// `toc topic …`: topics and their settings.
async fn topic(client: &Client, cmd: TopicCmd) -> Result<(Value, View), Failure> {
    use reqwest::Method;
    Ok(match cmd {
        TopicCmd::Ls => {
            let cols = &[
                "name",
                "slots",
                "scheduled",
                "running",
                "dead",
                "next_fire_at",
                "paused",
                "default_type",
                "types",
            ];
            (
                client.call(Method::GET, "/v1/topics", None).await?,
                View::Table(cols),
            )
        }
        TopicCmd::Create { topic, settings } => {
            put_topic_settings(client, &topic, &settings, false).await?
        }
        TopicCmd::Set { topic, settings } => {
            put_topic_settings(client, &topic, &settings, true).await?
        }
        TopicCmd::Show { topic } => {
            let path = format!("/v1/topics/{}", enc(&topic));
            (client.call(Method::GET, &path, None).await?, View::Record)
        }
        TopicCmd::Grow { topic } => {
            let path = format!("/v1/topics/{}", enc(&topic));
            let now = client.call(Method::GET, &path, None).await?;
            let slots = now["slots"].as_u64().unwrap_or(0);
            let body = json!({"slots": slots * 2});
            (
                client.call(Method::PUT, &path, Some(body)).await?,
                View::Record,
            )
        }
        TopicCmd::Pause { topic } => pause(client, &topic, true).await?,
        TopicCmd::Resume { topic } => pause(client, &topic, false).await?,
        TopicCmd::Limit {
            topic,
            max_fires_per_s,
        } => {
            let body = json!({ "max_fires_per_s": max_fires_per_s });
            change_topic(client, &topic, body).await?
        }
        TopicCmd::Flow { topic, limits, off } => {
            let flow = if off { Value::Null } else { flow_body(&limits) };
            change_topic(client, &topic, json!({ "flow": flow })).await?
        }
        TopicCmd::Rm { topic, force } => {
            let path = format!("/v1/topics/{}?force={force}", enc(&topic));
            client.call(Method::DELETE, &path, None).await?;
            (json!({"deleted": topic}), View::Record)
        }
    })
}

/// `toc flow …`: flow keys' own limits.
async fn flow(client: &Client, cmd: FlowCmd) -> Result<(Value, View), Failure> {
    use reqwest::Method;
    Ok(match cmd {
        FlowCmd::Ls { topic } => {
            let path = format!("/v1/topics/{}/flows", enc(&topic));
            (client.call(Method::GET, &path, None).await?, View::Record)
        }
        FlowCmd::Show { topic, key } => {
            let path = format!("/v1/topics/{}/flows/{}", enc(&topic), enc(&key));
            (client.call(Method::GET, &path, None).await?, View::Record)
        }
        FlowCmd::Set { topic, key, limits } => {
            let path = format!("/v1/topics/{}/flows/{}", enc(&topic), enc(&key));
            let body = flow_body(&limits);
            (
                client.call(Method::PUT, &path, Some(body)).await?,
                View::Record,
            )
        }
        FlowCmd::Rm { topic, key } => {
            let path = format!("/v1/topics/{}/flows/{}", enc(&topic), enc(&key));
            client.call(Method::DELETE, &path, None).await?;
            (json!({"removed": key}), View::Record)
        }
    })
}

#[derive(Clone, Copy)]
enum View {
    Json,
    Record,
    /// A job: every field of the API's `Job` schema, those it left out too (as `-`).
    Job,
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
    let shown;
    let value = match view {
        View::Json => value,
        _ => {
            shown = super::human::humanize(value, super::human::now_ms());
            &shown
        }
    };
    match view {
        View::Json => println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        ),
        View::Job => print_job(value),
        View::Record => print_record(value),
        View::Table(cols) => print_table(value, cols),
        View::Health => print_health(value),
    }
}

/// A job, a field a line: which job, in what state and firing when, first.
fn print_job(value: &Value) {
    let mut obj = value.as_object().cloned().unwrap_or_default();
    for field in job_fields() {
        obj.entry(field).or_insert(Value::Null);
    }
    // A job written plain (no payload, labels or other details) keeps no record,
    // so its times are not known: the reason resets of plain jobs cost one ZADD.
    for field in ["created_at", "updated_at"] {
        if obj.get(field).is_some_and(Value::is_null) {
            obj.insert(field.into(), "- (not kept for a plain job)".into());
        }
    }
    // What a reader looks for first: which job, in what state, firing when.
    let lead = ["id", "state", "fire_at", "type", "topic"];
    let width = obj.keys().map(String::len).max().unwrap_or(0);
    let rest = obj.iter().filter(|(k, _)| !lead.contains(&k.as_str()));
    for (k, v) in lead
        .iter()
        .filter_map(|k| obj.get_key_value(*k))
        .chain(rest)
    {
        println!("{k:<width$}  {}", cell(v));
    }
}

/// An object, a field a line.
fn print_record(value: &Value) {
    if let Some(obj) = value.as_object() {
        let width = obj.keys().map(|k| k.len()).max().unwrap_or(0);
        for (k, v) in obj {
            println!("{k:<width$}  {}", cell(v));
        }
    } else {
        println!("{}", cell(value));
    }
}

/// A page of items as a table of `cols`, with the cursor of the next page.
fn print_table(value: &Value, cols: &[&str]) {
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

/// `/health`, as an operator reads it.
fn print_health(value: &Value) {
    println!("status  {}", cell(&value["status"]));
    println!(
        "store   {} (reachable: {})",
        cell(&value["store"]["engine"]),
        cell(&value["store"]["reachable"])
    );
    let slots = value["slots"].as_u64().unwrap_or(0);
    let down = value["slots_down"].as_u64().unwrap_or(0);
    let restarts = value["restarts"].as_u64().unwrap_or(0);
    println!(
        "slots   {}/{slots} alive, {restarts} restarts",
        slots.saturating_sub(down)
    );
    for d in value["down"].as_array().into_iter().flatten() {
        println!(
            "  down: {} slot {} {}",
            cell(&d["topic"]),
            cell(&d["slot"]),
            cell(&d["last_error"])
        );
    }
    if let Some(types) = value["types"].as_array() {
        let names: Vec<String> = types.iter().map(cell).collect();
        println!(
            "types   {} (the job types this instance runs)",
            names.join(", ")
        );
    }
    for t in value["unserved"].as_array().into_iter().flatten() {
        println!(
            "  unserved: {} (no live instance runs every job type it names; its jobs wait)",
            cell(t)
        );
    }
}

/// The fields of the API's `Job` schema (`/openapi.json`), by name.
pub(super) fn job_fields() -> Vec<String> {
    use utoipa::openapi::{RefOr, schema::Schema};
    match <crate::model::Job as utoipa::PartialSchema>::schema() {
        RefOr::T(Schema::Object(o)) => o.properties.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// Exit code of a failure.
/// A refusal said with what to do next, from what the service can tell: a topic that does
/// not exist with the nearest names of those that do; a job that is gone (`gone`: the
/// topic and id `toc job get` asked for) with its last event, if its topic's stream still
/// holds it. Anything else as it was.
pub(super) async fn explain(
    client: &Client,
    f: Failure,
    gone: Option<(String, String)>,
) -> Failure {
    if let Some(name) = f
        .message
        .split_once("topic_not_found: topic \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(name, _)| name.to_string())
    {
        let near = nearest_topics(client, &name).await;
        if !near.is_empty() {
            return Failure {
                message: format!("{} — did you mean {}?", f.message, near.join(", ")),
                ..f
            };
        }
        return f;
    }
    if let Some((topic, id)) = gone
        && f.message.starts_with("404 not_found")
        && let Some(last) = last_event(client, &topic, &id).await
    {
        let now = super::human::now_ms();
        return Failure {
            message: format!(
                "{} — it is gone: its last event was {} at {} (toc events {topic} shows them)",
                f.message,
                last["event"].as_str().unwrap_or("?"),
                super::human::instant(last["fired_at"].as_i64().unwrap_or(0), now)
            ),
            ..f
        };
    }
    f
}

/// The names of the service's topics nearest to `name` (a typo of one or two letters, or
/// one that begins the same), at most three.
async fn nearest_topics(client: &Client, name: &str) -> Vec<String> {
    let Ok(list) = client.call(reqwest::Method::GET, "/v1/topics", None).await else {
        return Vec::new();
    };
    let mut near: Vec<(usize, String)> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .map(|t| (strsim::levenshtein(name, t), t.to_string()))
        .filter(|(d, t)| *d <= 2.max(name.len() / 4) || t.starts_with(name))
        .collect();
    near.sort();
    near.into_iter().take(3).map(|(_, t)| t).collect()
}

/// The last event of job `id` in `topic`'s stream (its first 20 pages of 1,000), if any.
async fn last_event(client: &Client, topic: &str, id: &str) -> Option<Value> {
    let mut after: Option<String> = None;
    let mut last = None;
    for _ in 0..20 {
        let path = page_path(topic, "events", 1_000, &after);
        let page = client.call(reqwest::Method::GET, &path, None).await.ok()?;
        let items = page["items"].as_array()?;
        if let Some(e) = items.iter().rev().find(|e| e["job_id"] == id) {
            last = Some(e.clone());
        }
        match page["next"].as_str() {
            Some(next) if !items.is_empty() => after = Some(next.to_string()),
            _ => break,
        }
    }
    last
}

pub(super) fn exit(f: Failure) -> ExitCode {
    eprintln!("toc: {}", f.message);
    ExitCode::from(f.code)
}

//! The service: the store, the runtime and the HTTP server, started from settings, and shut
//! down in a written order: stop accepting HTTP, stop pumping, let running handlers finish
//! within the grace period or give their leases back, exit.
//!
//! [`Service`] is the whole of `toc serve` (the HTTP API, `/openapi.json`, the dashboard,
//! `/metrics`, the health routes, auth) with job types of your own registered beside the
//! built-in ones; `toc serve` is a `Service` with none of its own. See `examples/custom_service.rs`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};
use tracing_actix_web::TracingLogger;

use crate::center::TimeoutCenter;
use crate::config::{LogFormat, Settings, StoreKind};
use crate::error::{Error, Result};
use crate::http::{self, AppState, auth::Auth};
use crate::job_type::{Handlers, JobHandler};
use crate::store::{SharedStore, Store};

/// Opens the store the settings name, and creates or updates the seeded topics.
pub async fn open_store(settings: &Settings) -> Result<SharedStore> {
    let options = settings.store_options();
    let store: SharedStore = match settings.store {
        StoreKind::Redis => Arc::new(Store::open_redis(&settings.redis, options).await?),
        StoreKind::Memory => {
            let journal = settings.journal().map(|p| (p, settings.memory.fsync));
            Arc::new(Store::open_memory(options, journal)?)
        }
    };
    for topic in &settings.topics.seed {
        let mut topic = topic.clone();
        // A seeded topic doubled since (over HTTP or `toc topic grow`) keeps its slots: the
        // seed's count is where it started, not a request to shrink it.
        if let Some(stored) = store.find_topic(&topic.name).await?
            && stored.slots > topic.slots
        {
            tracing::info!(topic = %topic.name, seeded = topic.slots, stored = stored.slots,
                "the seeded topic has doubled since: it keeps its stored slot count");
            topic.slots = stored.slots;
        }
        store.put_topic(topic).await?;
    }
    Ok(store)
}

/// A started service.
pub struct Running {
    /// The address the HTTP server listens on.
    pub addr: SocketAddr,
    /// The center behind it.
    pub center: TimeoutCenter,
    server: actix_web::dev::Server,
    grace: Duration,
}

/// The service, built from its settings and the job types it runs: the built-in ones and
/// yours. `toc serve` is `Service::load(..)?.run()`.
///
/// ```no_run
/// # use timeout_center::serve::Service;
/// # fn reminders() -> timeout_center::jobs::emit::Emit { timeout_center::jobs::emit::Emit }
/// fn main() -> std::process::ExitCode {
///     // Settings as `toc serve` reads them: TOC_CONFIG's file, then the TOC_* variables.
///     match Service::from_env() {
///         Ok(service) => service.handler(reminders()).run(),
///         Err(e) => {
///             eprintln!("{e}");
///             std::process::ExitCode::from(2)
///         }
///     }
/// }
/// ```
pub struct Service {
    settings: Settings,
    handlers: Handlers,
}

impl Service {
    /// A service over `settings` (for example `Settings::load(file, std::env::vars())`), with
    /// the built-in job types.
    pub fn new(settings: Settings) -> Service {
        Service {
            settings,
            handlers: Handlers::new(),
        }
    }

    /// Settings as `toc serve` reads them: the built-in defaults, then the file `TOC_CONFIG`
    /// names (if any), then the `TOC_*` variables. An error names the setting that is wrong.
    pub fn from_env() -> Result<Service> {
        let file = std::env::var_os("TOC_CONFIG").map(PathBuf::from);
        Service::load(file.as_deref(), None)
    }

    /// Settings from `file` (or none) and the `TOC_*` variables, with the journal's directory
    /// `data_dir` when given (`toc serve --config --data-dir`).
    pub fn load(file: Option<&Path>, data_dir: Option<PathBuf>) -> Result<Service> {
        let mut settings = Settings::load(file, std::env::vars())?;
        if let Some(dir) = data_dir {
            settings.data_dir = dir;
        }
        Ok(Service::new(settings))
    }

    /// Listens on `addr` in place of the settings' `listen` (`toc serve --listen`): refused,
    /// as the setting would be, for an address beyond loopback with no tokens unless
    /// `allow_open`.
    pub fn listening_on(mut self, addr: std::net::SocketAddr) -> Result<Service> {
        self.settings.listen = addr;
        self.settings.check()?;
        Ok(self)
    }

    /// Registers a job type of your own (one line per type); a type named like a built-in
    /// one replaces it. Its jobs are checked at the door (`JobHandler::payload_schema` and
    /// `admit`), described in `/openapi.json`, listed by the API, the CLI and the dashboard.
    pub fn handler<H: JobHandler>(mut self, handler: H) -> Self {
        self.handlers.register(handler);
        self
    }

    /// The settings the service runs with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Opens the store the settings name and starts the runtime and the HTTP server. Must
    /// run inside an actix system (`#[actix_web::main]`); [`Service::run`] makes one.
    pub async fn start(mut self) -> Result<Running> {
        self.settings.durable_default()?;
        let store = open_store(&self.settings).await?;
        // The journal by its whole path: a relative one says nothing in a log read later.
        let journal = self.settings.journal().map(|p| {
            std::fs::canonicalize(p)
                .unwrap_or_else(|_| p.to_path_buf())
                .display()
                .to_string()
        });
        tracing::info!(
            store = store.engine(),
            durable = store.durability(),
            journal = journal.as_deref().unwrap_or("none"),
            "store opened"
        );
        start_with(self.settings, store, self.handlers).await
    }

    /// Serves until SIGINT or SIGTERM, as `toc serve` does: logs to stderr (`log_format`,
    /// RUST_LOG), traces when `otel` says so, then drains. The exit code: 0 after a clean
    /// stop, 1 when the service failed, 2 when its settings are wrong.
    pub fn run(mut self) -> ExitCode {
        let memory_only = match self.settings.durable_default() {
            Ok(m) => m,
            Err(e) => {
                eprintln!("toc serve: {e}");
                return ExitCode::from(2);
            }
        };
        let (tracer, traces) = match crate::otel::start(&self.settings.otel) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("toc serve: {e}");
                return ExitCode::from(2);
            }
        };
        init_logging(self.settings.log_format, tracer);
        let result = actix_web::rt::System::new().block_on(async move {
            if memory_only {
                tracing::warn!(
                    "memory.journal = none: jobs are kept in memory only, and nothing survives a restart"
                );
            }
            self.start().await?.run().await
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
}

/// Steps the instance's history every `http.history_every_ms`, for as long as the actix
/// system runs.
fn keep_history(state: &web::Data<AppState>) {
    let (history, center) = (state.history.clone(), state.center.clone());
    actix_web::rt::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(history.every_ms()));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            history.step(center.now(), crate::history::totals(center.metrics()));
        }
    });
}

/// Starts the runtime and the HTTP server over `store`, with the built-in job types. Must
/// run inside an actix system.
pub async fn start(settings: Settings, store: SharedStore) -> Result<Running> {
    start_with(settings, store, Handlers::new()).await
}

/// Starts the runtime and the HTTP server over `store` with the built-in job types and
/// `handlers`.
async fn start_with(settings: Settings, store: SharedStore, handlers: Handlers) -> Result<Running> {
    let mut runtime = settings.runtime.clone();
    if runtime.instance.is_empty() && settings.listen.port() != 0 {
        runtime.instance = crate::actors::runtime::served_name(settings.listen.port());
    }
    let center = TimeoutCenter::builder(store)
        .settings(runtime)
        .webhooks(settings.webhooks.clone())
        .handlers(handlers)
        .start()
        .await?;
    for topic in &settings.topics.seed {
        center.topic(&topic.name).await?;
    }
    let state = web::Data::new(AppState {
        center: center.clone(),
        settings: settings.clone(),
        long_polls: Default::default(),
        long_polls_by_tenant: Default::default(),
        history: std::sync::Arc::new(crate::history::History::new(&settings.http)),
    });
    keep_history(&state);
    let auth = Auth::new(&settings);
    let deadline = http::deadline::BodyDeadline::new(
        std::time::Duration::from_millis(settings.http.body_timeout_ms.max(1)),
        settings
            .http
            .max_batch_body_bytes
            .max(settings.http.max_body_bytes),
    );
    let config = settings.clone();
    let server = HttpServer::new(move || {
        let config = config.clone();
        App::new()
            .app_data(state.clone())
            .wrap(http::json_errors())
            .wrap(from_fn(move |req, next| deadline.read_body(req, next)))
            .wrap(from_fn({
                let auth = auth.clone();
                move |req, next| auth.clone().identify_caller(req, next)
            }))
            .wrap(TracingLogger::default())
            .configure(move |cfg| http::configure(cfg, &config))
            .default_service(web::to(|| async {
                Err::<actix_web::HttpResponse, _>(http::error::ApiError::not_found(
                    "no such route: see /openapi.json",
                ))
            }))
    })
    .shutdown_timeout(5)
    // An idle kept-alive connection is closed after 75 s (as nginx does), not actix's 5 s:
    // HTTP clients keep idle connections for a minute or more (reqwest 90 s), and one sent
    // on just as the server closed it fails with no answer (hyper's IncompleteMessage).
    .keep_alive(Duration::from_secs(75))
    .bind(settings.listen)
    .map_err(|e| {
        Error::invalid(
            "listen",
            format!("cannot listen on {}: {e}", settings.listen),
        )
    })?;
    let addr = server.addrs()[0];
    let server = server.run();
    tracing::info!(%addr, dashboard = %format!("http://{addr}/ui"), "listening");
    Ok(Running {
        addr,
        center,
        server,
        grace: Duration::from_millis(settings.runtime.grace_ms),
    })
}

impl Running {
    /// A handle that stops the server.
    pub fn handle(&self) -> ServerHandle {
        self.server.handle()
    }

    /// Serves until the HTTP server stops (SIGINT, SIGTERM, or `handle().stop()`), then stops
    /// pumping and drains the runtime. Returns the leases given back.
    pub async fn run(self) -> Result<usize> {
        self.server.await.map_err(|e| Error::io("HTTP server", e))?;
        tracing::info!(
            grace_ms = crate::num::duration_ms(self.grace),
            "HTTP stopped; draining running jobs"
        );
        let released = self.center.shutdown(self.grace).await;
        tracing::info!(released, "stopped");
        Ok(released)
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

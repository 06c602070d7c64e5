//! `toc serve`: the store, the runtime and the HTTP server, started from settings, and shut
//! down in a written order: stop accepting HTTP, stop pumping, let running handlers finish
//! within the grace period or give their leases back, exit.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpServer, web};
use tracing_actix_web::TracingLogger;

use crate::center::TimeoutCenter;
use crate::config::{Settings, StoreKind};
use crate::error::{Error, Result};
use crate::http::{self, AppState, auth::Auth};
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

/// Starts the runtime and the HTTP server over `store`. Must run inside an actix system.
pub async fn start(settings: Settings, store: SharedStore) -> Result<Running> {
    let mut runtime = settings.runtime.clone();
    if runtime.instance.is_empty() && settings.listen.port() != 0 {
        runtime.instance = crate::actors::runtime::served_name(settings.listen.port());
    }
    let center = TimeoutCenter::builder(store)
        .settings(runtime)
        .webhooks(settings.webhooks.clone())
        .start()
        .await?;
    for topic in &settings.topics.seed {
        center.topic(&topic.name).await?;
    }
    let state = web::Data::new(AppState {
        center: center.clone(),
        settings: settings.clone(),
        long_polls: Default::default(),
    });
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
            .wrap(deadline)
            .wrap(auth.clone())
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
    tracing::info!(%addr, "listening");
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

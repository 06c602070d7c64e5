//! `toc bench traces`: what traces cost, in one run: the burst drain (memory engine, no-op
//! handler) and library resets, with traces off, on with nothing sampled, and on with every
//! fire sampled. Every job carries a trace context (as a job created by a traced request
//! does); its sampled flag is what "nothing sampled" and "everything sampled" change, with
//! the service's parent-based sampler (ratio 0, then 1). Spans go over OTLP/HTTP to a local
//! receiver that counts the bytes, through the exporter `otel.endpoint` uses.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, Tracer};
use timeout_center::conformance::RuntimeOps;
use timeout_center::time::now_ms;
use timeout_center::*;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{Registry, reload};

use super::Ctx;
use super::scenarios::{Noop, histogram, library_resets, open, topic, wait_drained};

type Traces = Option<tracing_opentelemetry::OpenTelemetryLayer<Registry, Tracer>>;

/// The process's subscriber, whose traces layer each phase swaps; `None` when another
/// subscriber was set first (`RUST_LOG`), and the scenario cannot measure.
fn handle() -> Option<&'static reload::Handle<Traces, Registry>> {
    static HANDLE: OnceLock<Option<reload::Handle<Traces, Registry>>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let (layer, handle) = reload::Layer::new(None);
            tracing::subscriber::set_global_default(Registry::default().with(layer))
                .ok()
                .map(|()| handle)
        })
        .as_ref()
}

pub(super) async fn traces(ctx: &mut Ctx) -> Result<(), String> {
    let Some(handle) = handle() else {
        println!("  traces: not measured (RUST_LOG set a subscriber of its own)");
        return Ok(());
    };
    use actix_web::{App, HttpResponse, HttpServer, web};
    let bytes = Arc::new(AtomicU64::new(0));
    let b = bytes.clone();
    let server = HttpServer::new(move || {
        let b = b.clone();
        App::new().default_service(web::to(move |body: web::Bytes| {
            b.fetch_add(body.len() as u64, Ordering::Relaxed);
            async { HttpResponse::Ok().finish() }
        }))
    })
    .workers(1)
    .bind(("127.0.0.1", 0))
    .map_err(|e| e.to_string())?;
    let collector = format!("http://{}/v1/traces", server.addrs()[0]);
    let server = server.run();
    let stop = server.handle();
    actix_rt::spawn(server);
    let n = ctx.sizes.burst_jobs;
    for (label, sampled) in [
        ("traces off", None),
        ("traces on, nothing sampled", Some(false)),
        ("traces on, every fire sampled", Some(true)),
    ] {
        if ctx.stopped() {
            break;
        }
        bytes.store(0, Ordering::Relaxed);
        // A blocking client is made and dropped off the runtime's threads.
        let url = collector.clone();
        let provider = match sampled {
            None => None,
            Some(all) => Some(
                tokio::task::spawn_blocking(move || provider(&url, all))
                    .await
                    .map_err(|e| e.to_string())??,
            ),
        };
        let layer = provider.as_ref().map(|p| {
            use opentelemetry::trace::TracerProvider as _;
            tracing_opentelemetry::layer().with_tracer(p.tracer("toc-bench"))
        });
        handle.reload(layer).map_err(|e| e.to_string())?;
        let flag = if sampled == Some(true) { "01" } else { "00" };
        let context = format!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-{flag}");

        // The burst: n traced jobs due at one instant, drained by a no-op handler.
        let store = open(ctx, "memory").await?;
        let t = topic("traces", "memory");
        let due = now_ms();
        for i in 0..n {
            let mut job = NewJob::new(format!("b{i}"), due).job_type(super::scenarios::NOOP);
            job.traceparent = Some(context.clone());
            store
                .schedule(&t, job, ScheduleMode::Upsert, due)
                .await
                .map_err(|e| e.to_string())?;
        }
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let center = TimeoutCenter::builder(store)
            .handler(Noop {
                hist: histogram(),
                done: done.clone(),
            })
            .start()
            .await
            .map_err(|e| e.to_string())?;
        center.topic(&t).await.map_err(|e| e.to_string())?;
        wait_drained(ctx, &done, n, &format!("traces, {label}")).await;
        let secs = started.elapsed().as_secs_f64();
        let handled = done.load(Ordering::Relaxed);

        // Resets of traced jobs far ahead.
        let r = topic("traces-resets", "memory");
        let far = now_ms() + 3_600_000;
        let devices = n.min(100_000);
        for i in 0..devices {
            let mut job = NewJob::new(format!("d{i}"), far);
            job.traceparent = Some(context.clone());
            center
                .schedule(&r, job, ScheduleMode::Upsert)
                .await
                .map_err(|e| e.to_string())?;
        }
        let batches: Vec<Vec<Reset>> = (0..devices)
            .collect::<Vec<_>>()
            .chunks(1_000)
            .map(|c| c.iter().map(|i| Reset::new(format!("d{i}"), far)).collect())
            .collect();
        let rate = library_resets(
            &center,
            &r,
            &batches,
            ctx.sizes.reset_seconds.min(5),
            &ctx.stop,
        )
        .await;
        center.shutdown(Duration::from_secs(1)).await;
        handle.reload(None).map_err(|e| e.to_string())?;
        if let Some(p) = provider {
            tokio::task::spawn_blocking(move || p.shutdown())
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
        }
        let note = format!("{handled} of {n} traced jobs due at one instant, no-op handler");
        ctx.add(
            "traces",
            "memory",
            &format!("burst drain rate, {label}"),
            handled as f64 / secs,
            "jobs/s",
            &note,
        );
        ctx.add(
            "traces",
            "memory",
            &format!("library resets, {label}"),
            rate,
            "resets/s",
            "batches of 1,000, 4 in flight",
        );
        ctx.add(
            "traces",
            "memory",
            &format!("bytes exported, {label}"),
            bytes.load(Ordering::Relaxed) as f64,
            "B",
            "OTLP/HTTP protobuf to a local receiver",
        );
    }
    stop.stop(true).await;
    Ok(())
}

/// A provider exporting to `url`, sampling (parent-based) every trace or none.
fn provider(url: &str, all: bool) -> Result<SdkTracerProvider, String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url)
        .build()
        .map_err(|e| e.to_string())?;
    let ratio = if all { 1.0 } else { 0.0 };
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            ratio,
        ))))
        .build())
}

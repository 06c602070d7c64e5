//! `toc bench webhook`: webhook calls per second to a local receiver, unsigned and signed
//! (Standard Webhooks) in one run, and with flow control (one flow key, and 1,000 keys, each
//! with a parallelism of 64: the cost of asking for and ending room per call) on the memory
//! engine and on Redis; and what one signature costs on its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;

use super::Ctx;
use timeout_center::jobs::webhook::signing::{self, SigningKey};
use timeout_center::time::now_ms;
use timeout_center::*;

/// A key of the run's own (not a secret: it signs calls to the bench's receiver).
const KEY: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

pub(super) async fn webhook(ctx: &mut Ctx) -> Result<(), String> {
    use actix_web::{App, HttpResponse, HttpServer, web};
    let n = ctx.sizes.webhook_burst;
    let calls = Arc::new(AtomicU64::new(0));
    let c = calls.clone();
    let server = HttpServer::new(move || {
        let c = c.clone();
        App::new().default_service(web::to(move || {
            c.fetch_add(1, Ordering::Relaxed);
            async { HttpResponse::Ok().finish() }
        }))
    })
    .workers(2)
    .bind(("127.0.0.1", 0))
    .map_err(|e| e.to_string())?;
    let url = format!("http://{}/hook", server.addrs()[0]);
    let server = server.run();
    let handle = server.handle();
    actix_rt::spawn(server);
    let key = SigningKey::parse(KEY).map_err(|e| e.to_string())?;
    let (one, thousand) = (
        "flow control, 1 key, parallelism 64",
        "flow control, 1,000 keys, parallelism 64 each",
    );
    let runs = [
        ("memory", "unsigned", Vec::new(), None),
        ("memory", "signed", vec![key.clone()], None),
        ("memory", one, Vec::new(), Some(1)),
        ("memory", thousand, Vec::new(), Some(1_000)),
        ("redis", "unsigned", Vec::new(), None),
        ("redis", one, Vec::new(), Some(1)),
        ("redis", thousand, Vec::new(), Some(1_000)),
    ];
    for (run, (engine, label, keys, flow_keys)) in runs.into_iter().enumerate() {
        let topic = format!("bench-webhook-{run}");
        if ctx.stopped() {
            break;
        }
        calls.store(0, Ordering::Relaxed);
        // The receiver is on loopback, which the egress policy refuses by default.
        let mut settings = WebhookSettings::allowing_loopback();
        settings.signing_keys = keys;
        let store = super::scenarios::open(ctx, engine).await?;
        let center = TimeoutCenter::builder(store)
            .webhooks(settings)
            .start()
            .await
            .map_err(|e| e.to_string())?;
        // A webhook topic (the scenarios' default type, Noop, is not registered here: a
        // topic of it would be served by no instance), with flow limits when asked.
        let flow = flow_keys.map(|_| FlowLimits {
            rate: None,
            period_ms: 1_000,
            parallelism: Some(64),
            key: Default::default(),
        });
        center
            .put_topic(TopicConfig {
                flow,
                default_type: "webhook".into(),
                ..TopicConfig::named(topic.as_str())
            })
            .await
            .map_err(|e| e.to_string())?;
        let due = now_ms() + 1_000 + (n as i64) / 20;
        let schedules = (0..n).map(|i| {
            let mut job = NewJob::new(format!("w{i}"), due)
                .job_type("webhook")
                .payload(json!({"url": url, "body": {"n": i, "order": "A-1001"}}));
            if let Some(keys) = flow_keys {
                job = job.flow_key(format!("k{}", i % keys));
            }
            let (center, topic) = (&center, &topic);
            async move { center.schedule(topic, job, ScheduleMode::Upsert).await }
        });
        let done: Vec<_> = futures_util::stream::iter(schedules)
            .buffer_unordered(64)
            .collect()
            .await;
        for r in done {
            r.map_err(|e| e.to_string())?;
        }
        while now_ms() < due {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let (started, cpu) = (Instant::now(), super::scenarios::process_cpu());
        let deadline = started + Duration::from_secs(120);
        while (calls.load(Ordering::Relaxed) as usize) < n && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let secs = started.elapsed().as_secs_f64();
        let cpu = cpu.zip(super::scenarios::process_cpu()).map(|(a, b)| b - a);
        center.shutdown(Duration::from_secs(1)).await;
        let got = calls.load(Ordering::Relaxed);
        if (got as usize) < n {
            return Err(format!(
                "{got} of {n} webhook calls arrived within 120 s on {engine} ({label})"
            ));
        }
        let note =
            format!("{got} of {n} calls due at one instant, {engine} engine, local receiver");
        ctx.add(
            "webhook",
            engine,
            &format!("webhook calls/s, {label}"),
            got as f64 / secs,
            "calls/s",
            &note,
        );
        if let Some(cpu) = cpu {
            ctx.add(
                "webhook",
                engine,
                &format!("this process's CPU per call, {label}"),
                cpu * 1e6 / got.max(1) as f64,
                "µs",
                "service and receiver share the process",
            );
        }
    }
    handle.stop(true).await;
    // One signature alone, as a call's body would be signed.
    let body = serde_json::to_vec(&json!({"n": 1, "order": "A-1001", "pad": "x".repeat(200)}))
        .map_err(|e| e.to_string())?;
    let rounds = 100_000u32;
    let started = Instant::now();
    for i in 0..rounds {
        std::hint::black_box(signing::signature(
            std::slice::from_ref(&key),
            "msg_0123456789abcdef0123456789abcdef",
            1_700_000_000 + i64::from(i),
            &body,
        ));
    }
    let us = started.elapsed().as_secs_f64() * 1e6 / f64::from(rounds);
    ctx.add(
        "webhook",
        "memory",
        "one signature, CPU",
        us,
        "µs",
        &format!(
            "HMAC-SHA256 over a {}-byte body, one key, {rounds} rounds",
            body.len()
        ),
    );
    Ok(())
}

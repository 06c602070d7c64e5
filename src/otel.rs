//! OpenTelemetry traces: off unless `otel.endpoint` or an `OTEL_EXPORTER_OTLP_*`
//! variable names a collector. The service's `tracing` spans go out through
//! `tracing-opentelemetry` and an OTLP/HTTP exporter on a thread of its own.
//!
//! A job's trace: the HTTP request (its caller's W3C `traceparent` honoured, by
//! `tracing-actix-web`), the job's `create` (a producer span, child of the request); the fire,
//! `process` (a consumer span, child of and linked to the create span, or the last traced
//! reset's, whose context the job keeps); the webhook call (a client span, whose `traceparent` the receiver gets); the
//! `settle`. A job keeps the context (`traceparent`, 55 bytes in its record) only when its
//! request carried one, so a plain job costs not a byte more; a job without one fires
//! untraced. With traces off, a request's `traceparent` is still kept and passed on to the
//! webhook as it came, so a trace runs through the service unseen.

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, Tracer};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::error::{Error, Result};
use crate::model::Job;
use crate::time::Millis;

/// `[otel]`, the traces this module sends: off while `endpoint` is empty and no `OTEL_*`
/// variable names a collector.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtelSettings {
    /// The OTLP/HTTP collector's base URL; spans go to its `/v1/traces`.
    pub endpoint: String,
    /// The share of traces started here that are recorded (0 to 1).
    pub sample_ratio: f64,
}

impl OtelSettings {
    /// Refuses a sample ratio outside 0 to 1, naming `otel.sample_ratio`.
    pub(crate) fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return Err(Error::invalid(
                "otel.sample_ratio",
                format!("must be 0 to 1, got {}", self.sample_ratio),
            ));
        }
        Ok(())
    }
}

/// The exporter's provider, flushed and stopped when dropped (at the end of `toc serve`).
pub(crate) struct Traces(Option<SdkTracerProvider>);

impl Drop for Traces {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = p.shutdown();
        }
    }
}

/// The collector's traces URL: `otel.endpoint`'s `/v1/traces`, or what the standard
/// variables say (`None` from the setting leaves them to the exporter).
fn endpoint(settings: &OtelSettings) -> Option<Option<String>> {
    if !settings.endpoint.is_empty() {
        let base = settings.endpoint.trim_end_matches('/');
        return Some(Some(format!("{base}/v1/traces")));
    }
    let named = [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var(v).is_ok_and(|s| !s.is_empty()));
    named.then_some(None)
}

/// Starts the exporter when traces are on: its tracer, for `tracing-opentelemetry`'s layer,
/// and the guard that flushes it. Sets the W3C trace-context propagator either way.
pub(crate) fn start(settings: &OtelSettings) -> Result<(Option<Tracer>, Traces)> {
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let Some(url) = endpoint(settings) else {
        return Ok((None, Traces(None)));
    };
    use opentelemetry_otlp::WithExportConfig;
    let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http();
    if let Some(url) = url {
        builder = builder.with_endpoint(url);
    }
    let exporter = builder
        .build()
        .map_err(|e| Error::invalid("otel.endpoint", e.to_string()))?;
    let ratio = std::env::var("OTEL_TRACES_SAMPLER_ARG")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(settings.sample_ratio);
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("timeout-center");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            ratio,
        ))))
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("timeout-center");
    Ok((Some(tracer), Traces(Some(provider))))
}

/// A W3C `traceparent` read: its context (remote), or `None` when it does not parse.
pub(crate) fn parse(traceparent: &str) -> Option<SpanContext> {
    let lower_hex = |s: &str| s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let mut parts = traceparent.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    // Version 00 has exactly these four fields, in lower-case hex (W3C Trace Context).
    if parts.next().is_some()
        || version != "00"
        || trace.len() != 32
        || span.len() != 16
        || flags.len() != 2
        || ![trace, span, flags].iter().all(|f| lower_hex(f))
    {
        return None;
    }
    let cx = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(u8::from_str_radix(flags, 16).ok()?),
        true,
        TraceState::default(),
    );
    cx.is_valid().then_some(cx)
}

/// The `traceparent` of a span's context, when it has one (traces on).
pub(crate) fn traceparent(span: &tracing::Span) -> Option<String> {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// The context a job keeps from a request that carried `incoming` (its `traceparent`): the
/// producer span's when traces are on, else the caller's as it came. `None` without one.
pub(crate) fn kept(incoming: Option<&str>, producer: &tracing::Span) -> Option<String> {
    let incoming = incoming.and_then(parse)?;
    // Written anew from what was parsed (55 bytes), never stored as it came.
    Some(traceparent(producer).unwrap_or_else(|| {
        format!(
            "00-{}-{}-{:02x}",
            incoming.trace_id(),
            incoming.span_id(),
            incoming.trace_flags().to_u8()
        )
    }))
}

/// A kept context whose caller sampled it. An unsampled one gets no span here (the
/// parent-based sampler would record none): its fire costs what an untraced one does, and its
/// webhook call passes the context on as it came.
fn sampled(traceparent: Option<&str>) -> Option<SpanContext> {
    parse(traceparent?).filter(SpanContext::is_sampled)
}

/// A producer span for `op` (`create`, `reset`, `cancel`) on job `id` of `topic`, a child of
/// the current (the request's).
pub(crate) fn job_span(op: &'static str, topic: &str, id: &str) -> tracing::Span {
    tracing::info_span!(
        "job",
        otel.name = %format_args!("{op} {topic}"),
        otel.kind = "producer",
        messaging.system = "timeout-center",
        messaging.operation.name = op,
        messaging.destination.name = %topic,
        messaging.message.id = %id,
    )
}

/// The fire of a traced job: a consumer span, child of the context the job kept and linked
/// to it, with the topic, job id, attempt, fire time and lateness. `None` for a job that
/// kept no context, or an unsampled one: it fires untraced.
pub(crate) fn process_span(topic: &str, job: &Job, fired_at: Millis) -> Option<tracing::Span> {
    let created = sampled(job.traceparent.as_deref())?;
    let span = tracing::info_span!(
        "process",
        otel.name = %format_args!("process {topic}"),
        otel.kind = "consumer",
        messaging.system = "timeout-center",
        messaging.operation.name = "process",
        messaging.destination.name = %topic,
        messaging.message.id = %job.id,
        toc.attempt = job.attempts,
        toc.fire_at = job.fire_at,
        toc.lateness_ms = (fired_at - job.fire_at).max(0),
        trace_id = %created.trace_id(),
        span_id = tracing::field::Empty,
    );
    let _ =
        span.set_parent(opentelemetry::Context::new().with_remote_span_context(created.clone()));
    span.add_link(created);
    // The fire's own id, for log lines within it (known once the span is in a trace).
    let own = span.context().span().span_context().span_id();
    if own != SpanId::INVALID {
        span.record("span_id", tracing::field::display(own));
    }
    Some(span)
}

/// The settle of a traced run (`traceparent`: the context its job kept, or the one a pull
/// consumer sent with its ack): a span of that trace, a child of that context.
pub(crate) fn settle_span(
    topic: &str,
    id: &str,
    traceparent: Option<&str>,
    outcome: &str,
) -> Option<tracing::Span> {
    let parent = sampled(traceparent)?;
    let span = tracing::info_span!(
        "settle",
        otel.name = %format_args!("settle {topic}"),
        otel.kind = "internal",
        messaging.system = "timeout-center",
        messaging.operation.name = "settle",
        messaging.destination.name = %topic,
        messaging.message.id = %id,
        toc.outcome = outcome,
        trace_id = %parent.trace_id(),
    );
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
    Some(span)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_reads_and_a_bad_one_does_not() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let cx = parse(tp).expect("a valid traceparent");
        assert_eq!(
            cx.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(cx.is_sampled());
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-xyz-00f067aa0ba902b7-01",
            // Extra fields (a 30 KB tail once went through whole), upper-case hex, zero ids.
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            &format!("{tp}-{}", "a".repeat(30_000)),
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
        // Stored written anew: 55 bytes, whatever spacing it came with.
        let spaced = format!("  {tp} ");
        assert_eq!(
            kept(Some(&spaced), &tracing::Span::none()).map(|t| t.len()),
            Some(55)
        );
        // With traces off, the caller's context is kept as it came.
        assert_eq!(kept(Some(tp), &tracing::Span::none()).as_deref(), Some(tp));
        assert_eq!(kept(Some("junk"), &tracing::Span::none()), None);
        assert_eq!(kept(None, &tracing::Span::none()), None);
    }
}

//! `transfer`: a topic of N jobs (a small payload each) exported through the HTTP API and
//! imported into a service of the other engine, as `toc export` and `toc import` do it
//! (batches of 5,000 jobs, 4 in flight, the first and the last alone): memory to Redis,
//! then Redis to memory. The target: import at least 100,000 jobs/s into
//! Redis.

use std::time::Instant;

use futures_util::StreamExt;
use serde_json::json;
use timeout_center::transfer::{ImportReport, Line, MEDIA_TYPE, digest};
use timeout_center::{CreateSpec, Reset};

use super::Ctx;
use super::scenarios::{open, service, topic};

/// Jobs a request, and requests in flight, as `toc import` sends them.
const BATCH: usize = 5_000;
const IN_FLIGHT: usize = 4;

pub(super) async fn transfer(ctx: &mut Ctx) -> Result<(), String> {
    let n = ctx.sizes.transfer_jobs;
    for (from, to) in [("memory", "redis"), ("redis", "memory")] {
        let source = service(open(ctx, from).await?, from).await?;
        let t = topic("transfer", from);
        let at = timeout_center::time::now_ms() + 3_600_000;
        let create = CreateSpec {
            payload: json!({"order": 1, "customer": "c-0001"}),
            ..CreateSpec::default()
        };
        let ids: Vec<usize> = (0..n).collect();
        for chunk in ids.chunks(4_000) {
            let calls = chunk.chunks(1_000).map(|c| {
                let batch: Vec<Reset> = c
                    .iter()
                    .map(|i| Reset::new(format!("order-{i}"), at + (*i % 60_000) as i64))
                    .collect();
                let (center, t, create) = (&source.center, &t, &create);
                async move { center.reset_many(t, &batch, Some(create)).await }
            });
            for r in futures_util::future::join_all(calls).await {
                r.map_err(|e| e.to_string())?;
            }
        }
        let http = reqwest::Client::new();
        let started = Instant::now();
        let text = http
            .get(format!("{}/v1/topics/{t}/export", source.base))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .text()
            .await
            .map_err(|e| e.to_string())?;
        let secs = started.elapsed().as_secs_f64();
        source.stop().await;
        let lines: Vec<&str> = text.lines().collect();
        let jobs = lines.len().saturating_sub(2);
        if jobs != n {
            return Err(format!("the export of {from} holds {jobs} jobs, not {n}"));
        }
        let mb = text.len() as f64 / 1e6;
        ctx.add(
            "transfer",
            from,
            "export, HTTP",
            n as f64 / secs,
            "jobs/s",
            &format!("{n} jobs of one topic, GET /v1/topics/{{topic}}/export, {mb:.0} MB"),
        );
        let Ok(Line::Topic { settings }) = serde_json::from_str::<Line>(lines[0]) else {
            return Err("the export does not begin with its settings".into());
        };
        let target = service(open(ctx, to).await?, to).await?;
        let sum = digest(lines.iter().copied());
        let body_jobs = &lines[1..lines.len() - 1];
        let chunks: Vec<&[&str]> = body_jobs.chunks(BATCH).collect();
        let send = |i: usize| {
            let mut body = String::new();
            if i == 0 {
                body.push_str(lines[0]);
                body.push('\n');
            }
            for line in chunks[i] {
                body.push_str(line);
                body.push('\n');
            }
            if i + 1 == chunks.len() {
                // The end line: the digest covers it too.
                body.push_str(lines[lines.len() - 1]);
                body.push('\n');
            }
            let url = format!(
                "{}/v1/topics/{t}/import?digest={}&slots={}&last={}",
                target.base,
                sum.replace(':', "%3A"),
                settings.slots,
                i + 1 == chunks.len()
            );
            let req = http.post(url).header("content-type", MEDIA_TYPE).body(body);
            async move {
                let res = req.send().await.map_err(|e| e.to_string())?;
                if !res.status().is_success() {
                    return Err(format!("import: {}", res.text().await.unwrap_or_default()));
                }
                res.json::<ImportReport>().await.map_err(|e| e.to_string())
            }
        };
        let started = Instant::now();
        let mut written = send(0).await?.written;
        let middle = (1..chunks.len().saturating_sub(1)).map(&send);
        let mut answers = futures_util::stream::iter(middle).buffer_unordered(IN_FLIGHT);
        while let Some(r) = answers.next().await {
            written += r?.written;
        }
        drop(answers);
        if chunks.len() > 1 {
            written += send(chunks.len() - 1).await?.written;
        }
        let secs = started.elapsed().as_secs_f64();
        target.stop().await;
        if written != n as u64 {
            return Err(format!(
                "the import into {to} wrote {written} jobs, not {n}"
            ));
        }
        ctx.add(
            "transfer",
            to,
            "import, HTTP",
            n as f64 / secs,
            "jobs/s",
            &format!(
                "{n} jobs exported by the {from} engine, POST /v1/topics/{{topic}}/import, {BATCH} a request, {IN_FLIGHT} in flight"
            ),
        );
    }
    Ok(())
}

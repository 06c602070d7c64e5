//! The run's report: a summary on stdout, and with `all` `BENCHMARKS.md`, `benchmarks.json`
//! and `lateness.svg` (percentile against lateness, log scale, one line per system).

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use serde_json::json;

use super::{BenchArgs, Ctx};

/// (goal, measured ratio or value, target, whether it is met) for the headline comparisons.
fn goals(ctx: &Ctx) -> Vec<(String, Option<f64>, String, Option<bool>)> {
    let f = |s: &str, n: &str| ctx.find(s, n);
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let lib_reset = f("redis", "resets/s, library reset_many");
    let http_reset = f("redis", "resets/s, HTTP batch endpoint");
    let bull_reset = f("bullmq", "resets/s, changeDelay, 64 in flight");
    let high_p99 = format!(
        "{} p99",
        super::scenarios::high_rate_rows(ctx.sizes.high_rate)
    );
    let mut g = vec![
        (
            "library resets / redis-benchmark ZADD -P 64 (stock)",
            ratio(
                lib_reset,
                f(
                    "redis-benchmark",
                    "ZADD -P 64 (stock: one member, unchanged)",
                ),
            ),
            ">= 1",
            1.0,
            true,
        ),
        (
            "library resets / redis-benchmark ZADD -P 64 (moving members)",
            ratio(
                lib_reset,
                f("redis-benchmark", "ZADD -P 64 (moving members)"),
            ),
            ">= 1",
            1.0,
            true,
        ),
        (
            "library resets / bare ZADD XX CH floor (redis, 1M resident)",
            ratio(
                f("redis", "resets/s, library, 1M resident"),
                f("redis", "resets/s, bare sorted sets, 1M resident"),
            ),
            ">= 0.95",
            0.95,
            true,
        ),
        (
            "HTTP batch resets / library resets (redis, 1M resident)",
            ratio(
                f("redis", "resets/s, HTTP, 1M resident"),
                f("redis", "resets/s, library, 1M resident"),
            ),
            ">= 0.8",
            0.8,
            true,
        ),
        (
            "library resets / BullMQ changeDelay",
            ratio(lib_reset, bull_reset),
            ">= 15",
            15.0,
            true,
        ),
        (
            "HTTP batch resets / BullMQ changeDelay",
            ratio(http_reset, bull_reset),
            ">= 5",
            5.0,
            true,
        ),
        (
            "library schedules (batch) / BullMQ addBulk",
            ratio(
                f("redis", "schedules/s, library batch of 1,000"),
                f("bullmq", "schedules/s, addBulk of 1,000"),
            ),
            ">= 5",
            5.0,
            true,
        ),
        (
            "burst drain rate / BullMQ's",
            ratio(
                f("redis", "burst drain rate"),
                f("bullmq", "burst drain rate"),
            ),
            ">= 8",
            8.0,
            true,
        ),
        (
            "burst drain rate / bare Lua floor (redis)",
            ratio(
                f("redis", "burst drain rate"),
                f("redis", "burst drain rate, bare Lua floor"),
            ),
            "-",
            f64::NAN,
            true,
        ),
        (
            "burst drain rate, events = changes / bare Lua floor (redis)",
            ratio(
                f("redis", "burst drain rate, events = changes"),
                f("redis", "burst drain rate, bare Lua floor"),
            ),
            "-",
            f64::NAN,
            true,
        ),
        (
            "redis-server CPU per 100,000 fired in the burst (s)",
            // The burst's: the latency scenario measures one of the same name at 10,000 a
            // second, where batches are small.
            ctx.find_in("burst", "redis", "redis-server CPU per 100,000 fired"),
            "<= 0.4",
            0.4,
            false,
        ),
        (
            "p99 firing lateness, redis store (ms)",
            f("redis", "firing lateness p99"),
            "<= 1",
            1.0,
            false,
        ),
        (
            "p99 firing lateness at ten times the rate, memory store (ms)",
            f("memory", &high_p99),
            "<= 1",
            1.0,
            false,
        ),
        (
            "p99 firing lateness at ten times the rate, redis store (ms)",
            f("redis", &high_p99),
            "<= 2",
            2.0,
            false,
        ),
        (
            "pull claim + ack (redis, 16 consumers) / BullMQ worker rate",
            ratio(
                f("redis", "claim + ack throughput"),
                f("bullmq", "burst drain rate"),
            ),
            ">= 8",
            8.0,
            true,
        ),
        (
            "claim + ack / bare Lua floor (redis)",
            ratio(
                f("redis", "claim + ack throughput"),
                f("redis", "claim + ack throughput, bare Lua floor"),
            ),
            "-",
            f64::NAN,
            true,
        ),
        (
            "redis-server CPU per 100,000 claimed + acked (s)",
            f("redis", "redis-server CPU per 100,000 claimed + acked"),
            "<= 0.35",
            0.35,
            false,
        ),
        (
            "p99 pull delivery lateness, redis store (ms)",
            f("redis", "delivery lateness p99"),
            "<= 5",
            5.0,
            false,
        ),
        (
            "p99.9 pull delivery lateness, redis store (ms)",
            f("redis", "delivery lateness p99.9"),
            "<= 5",
            5.0,
            false,
        ),
        (
            "bytes per job / bare sorted set",
            f("redis", "empty-payload job / bare sorted set"),
            "<= 1.0",
            1.0,
            false,
        ),
    ];
    g.drain(..)
        .map(|(name, v, target, bound, at_least)| {
            // A figure that is not positive was not measured properly.
            let v = v.filter(|v| v.is_finite() && *v > 0.0);
            // A figure with no target (a distance from a floor) is neither met nor short.
            let met = v
                .filter(|_| !bound.is_nan())
                .map(|v| if at_least { v >= bound } else { v <= bound });
            (name.to_string(), v, target.to_string(), met)
        })
        .collect()
}

pub(super) fn print_summary(ctx: &Ctx) {
    println!("\n== Headline ratios");
    for (name, v, target, met) in goals(ctx) {
        let v = v.map_or("not measured".to_string(), |v| format!("{v:.2}"));
        let met = match met {
            Some(true) => "met",
            Some(false) => "SHORT",
            None => "-",
        };
        println!("  {name:<62} {v:>14}  target {target:<6} {met}");
    }
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal"))
                .map(|l| l.split_whitespace().nth(1).unwrap_or("0").to_string())
        })
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or("?".to_string(), |kb| format!("{:.1} GiB", kb / 1_048_576.0));
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "?".to_string());
    format!("{cores} cores ({cpu}), {mem} memory")
}

fn plot(ctx: &Ctx, path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let max = ctx
        .lateness
        .iter()
        .flat_map(|l| l.curve.iter().map(|(_, ms)| *ms))
        .fold(1.0f64, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "firing lateness by percentile (ms, log scale)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..100f64, (0.01f64..max * 2.0).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("lateness (ms)")
        .draw()
        .map_err(|e| e.to_string())?;
    let colours = [BLUE, RED, GREEN, MAGENTA];
    for (i, l) in ctx.lateness.iter().enumerate() {
        let colour = colours[i % colours.len()];
        let points: Vec<(f64, f64)> = l.curve.iter().map(|(p, ms)| (*p, ms.max(0.01))).collect();
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(format!("{} ({} jobs at {}/s)", l.system, l.jobs, l.rate))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// A scale figure's resident count, from its name's size label (`..., 1M resident`).
fn resident(name: &str) -> Option<f64> {
    let label = name.strip_suffix(" resident")?.rsplit(", ").next()?;
    let (digits, unit) = match label.strip_suffix('M') {
        Some(d) => (d, 1e6),
        None => match label.strip_suffix('k') {
            Some(d) => (d, 1e3),
            None => (label, 1.0),
        },
    };
    digits.parse::<f64>().ok().map(|d| d * unit)
}

/// The scale scenario's resets per second against the resident count, both log scale.
fn plot_scale(ctx: &Ctx, path: &Path) -> Result<(), String> {
    let lines: Vec<(String, Vec<(f64, f64)>)> = ["memory", "redis"]
        .iter()
        .flat_map(|engine| {
            ["library", "HTTP", "bare sorted sets"]
                .iter()
                .map(move |via| {
                    let prefix = format!("resets/s, {via}, ");
                    let mut points: Vec<(f64, f64)> = ctx
                        .figures
                        .iter()
                        .filter(|f| f.scenario == "scale" && f.system == *engine)
                        .filter(|f| f.name.starts_with(&prefix))
                        .filter_map(|f| Some((resident(&f.name)?, f.value.max(1.0))))
                        .collect();
                    points.sort_by(|a, b| a.0.total_cmp(&b.0));
                    (format!("{engine}, {via}"), points)
                })
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    let all = lines.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, 1.0f64, f64::MAX, 1.0f64);
    for (x, y) in all {
        (x0, x1, y0, y1) = (x0.min(*x), x1.max(*x), y0.min(*y), y1.max(*y));
    }
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "resets per second against resident jobs (log scales)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(72)
        .build_cartesian_2d(
            (x0 / 2.0..x1 * 2.0).log_scale(),
            (y0 / 2.0..y1 * 2.0).log_scale(),
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("resident jobs")
        .y_desc("resets/s")
        .draw()
        .map_err(|e| e.to_string())?;
    let colours = [BLUE, CYAN, RED, MAGENTA];
    for (i, (label, points)) in lines.into_iter().enumerate() {
        let colour = colours[i % colours.len()];
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerLeft)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// The commands a run executes, for BENCHMARKS.md.
pub(super) fn commands(command: &str, s: &super::Sizes) -> String {
    let bullmq_rate = s.rate.min(2_000);
    let bullmq_burst = s.burst_jobs.min(100_000);
    format!(
        "## Commands\n\n\
         - `{command}`: every timeout-center figure, through the library, the HTTP API (served in\n  \
         process on a free port) and the embedded engine.\n\
         - `redis-benchmark -h <redis host> -p <redis port> -P 64 -q -n {} -t zadd`\n\
         - `redis-benchmark -h <redis host> -p <redis port> -P 64 -q -n {} -r {} ZADD bench-moving __rand_int__ device-__rand_int__`\n\
         - `cd crates/toc-bench/peers/bullmq && npm install && REDIS_URL=<the same Redis> JOBS={} DEVICES={} RESET_SECONDS={} RATE={bullmq_rate} SECONDS={} BURST={bullmq_burst} node bench.js`\n",
        s.zadd_requests,
        s.zadd_requests / 2,
        s.devices,
        s.schedule_jobs,
        s.devices,
        s.reset_seconds,
        s.latency_seconds,
    )
}

/// A figure as the tables print it: two decimals under 100, a whole number with thousands
/// separated at or above it.
pub(crate) fn figure(v: f64) -> String {
    if v.abs() < 100.0 {
        return format!("{v:.2}");
    }
    let whole = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 { format!("-{out}") } else { out }
}

/// A sentence for the two rows of one table, in one unit, furthest apart when they differ
/// by more than ten times: what each measured (its load, from its `how`), so that a reader
/// does not take one for the other.
fn far_apart(rows: &[&super::Figure]) -> Option<String> {
    let mut worst: Option<(f64, &super::Figure, &super::Figure)> = None;
    for a in rows.iter().filter(|f| f.value > 0.0) {
        for b in rows
            .iter()
            .filter(|f| f.unit == a.unit && f.value > 0.0 && quantile(&f.name) == quantile(&a.name))
        {
            let times = a.value / b.value;
            if times > 10.0 && worst.is_none_or(|(w, _, _)| times > w) {
                worst = Some((times, a, b));
            }
        }
    }
    let (times, a, b) = worst?;
    Some(format!(
        "Rows {} apart in {}: {} {} ({}) measures {}; {} {} ({}) measures {}.",
        format_args!("{}×", figure(times)),
        a.unit,
        a.system,
        a.name,
        figure(a.value),
        if a.note.is_empty() {
            "another load"
        } else {
            a.note.as_str()
        },
        b.system,
        b.name,
        figure(b.value),
        if b.note.is_empty() {
            "another load"
        } else {
            b.note.as_str()
        },
    ))
}

/// The percentile a row of a distribution names (`p99`, `max`): rows of one distribution
/// are told apart only from rows of the same percentile (a p50 and a max are meant to differ).
fn quantile(name: &str) -> Option<&str> {
    let last = name.rsplit(' ').next()?;
    let is = last == "max"
        || (last.starts_with('p') && last[1..].starts_with(|c: char| c.is_ascii_digit()));
    is.then_some(last)
}

/// Where BENCHMARKS.md's hand-written part begins: `all` keeps what follows it.
pub(super) const HAND_WRITTEN: &str = "<!-- Hand-written below this line";

/// BENCHMARKS.md's headline (the median of several runs: its table written by `toc-bench
/// median`, its words by hand) between these two lines at the top: `all` keeps it there,
/// above the tables of its own run.
pub(super) const HEADLINE: (&str, &str) = ("<!-- Headline", "<!-- End of the headline. -->");

/// The published BENCHMARKS.md `published` with the tables of its run replaced by those
/// of the run whose BENCHMARKS.md is `run` (`toc-bench median`: the median run's): the
/// headline block and the hand-written part are `published`'s.
pub(super) fn with_run(published: &str, run: &str) -> String {
    let (headline, hand) = kept(published);
    let (run_headline, _) = kept(run);
    let body = run
        .strip_prefix("# Benchmarks\n")
        .unwrap_or(run)
        .trim_start();
    let body = body.strip_prefix(run_headline).unwrap_or(body).trim_start();
    let body = body
        .strip_prefix("## This run\n")
        .unwrap_or(body)
        .trim_start();
    let body = body.find(HAND_WRITTEN).map_or(body, |at| &body[..at]);
    format!(
        "# Benchmarks\n\n{headline}\n\n## This run\n\n{}\n\n{hand}",
        body.trim_end()
    )
}

/// The kept parts of the BENCHMARKS.md a run replaces: its headline block, and its
/// hand-written part (each empty when the file has none).
fn kept(old: &str) -> (&str, &str) {
    let headline = old
        .find(HEADLINE.0)
        .and_then(|a| {
            old[a..]
                .find(HEADLINE.1)
                .map(|b| &old[a..a + b + HEADLINE.1.len()])
        })
        .unwrap_or("");
    let hand = old.find(HAND_WRITTEN).map_or("", |at| &old[at..]);
    (headline, hand)
}

/// Where `all` publishes the figures' data and plot, beside BENCHMARKS.md (which links it).
pub(super) const DATA_DIR: &str = "docs/bench";

/// Writes BENCHMARKS.md into `args.out`, and benchmarks.json and lateness.svg into its
/// `docs/bench/`, published with it.
pub(super) fn write(ctx: &Ctx, args: &BenchArgs) -> Result<String, String> {
    let data = args.out.join(DATA_DIR);
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    let (md, js, svg) = (
        args.out.join("BENCHMARKS.md"),
        data.join("benchmarks.json"),
        data.join("lateness.svg"),
    );
    if !ctx.lateness.is_empty() {
        plot(ctx, &svg)?;
    }
    let scale_svg = data.join("scale.svg");
    let scaled = ctx.figures.iter().any(|f| f.scenario == "scale");
    if scaled {
        plot_scale(ctx, &scale_svg)?;
    }
    let command: Vec<String> = std::env::args().collect();
    let json = json!({
        "machine": machine(),
        "redis_version": ctx.redis_version,
        "command": command.join(" "),
        "quick": args.quick,
        "sizes": ctx.sizes,
        "figures": ctx.figures,
        "lateness": ctx.lateness,
        "headline": goals(ctx)
            .into_iter()
            .map(|(name, value, target, met)| {
                json!({"name": name, "value": value, "target": target, "met": met})
            })
            .collect::<Vec<_>>(),
    });
    std::fs::write(&js, serde_json::to_string_pretty(&json).expect("json"))
        .map_err(|e| e.to_string())?;

    let old = std::fs::read_to_string(&md).unwrap_or_default();
    let (headline, hand) = kept(&old);
    let mut m = String::new();
    let _ = writeln!(m, "# Benchmarks\n");
    if !headline.is_empty() {
        let _ = writeln!(m, "{headline}\n\n## This run\n");
    }
    let _ = writeln!(
        m,
        "Written by `{}`{}.\n",
        command.join(" ").replace(&super::repo_root(), "."),
        if args.quick {
            " (a scaled-down run: figures are for checking, not for comparing)"
        } else {
            ""
        }
    );
    let _ = writeln!(m, "- Machine: {}", machine());
    let _ = writeln!(
        m,
        "- Redis: {} ({})",
        ctx.redis_version,
        if ctx.own_redis {
            "started by this run, `--save '' --appendonly no`"
        } else {
            "given with --redis-url"
        }
    );
    let _ = writeln!(
        m,
        "- Sizes: {}",
        serde_json::to_string(&ctx.sizes).expect("json")
    );
    let _ = writeln!(
        m,
        "- Every figure below comes from this one run, on the same machine and Redis; baselines (`redis-benchmark`, a bare sorted set, BullMQ) ran in it too.\n"
    );
    let _ = writeln!(
        m,
        "## This run's ratios\n\n| comparison | measured | target | |\n|---|---|---|---|"
    );
    for (name, v, target, met) in goals(ctx) {
        let v = v.map_or("not measured".to_string(), figure);
        let met = match met {
            Some(true) => "met",
            Some(false) => "**short**",
            None => "",
        };
        let _ = writeln!(m, "| {name} | {v} | {target} | {met} |");
    }
    for scenario in [
        "schedule", "reset", "latency", "burst", "memory", "pull", "scale", "cluster", "webhook",
        "topics", "traces", "machine",
    ] {
        let rows: Vec<_> = ctx
            .figures
            .iter()
            .filter(|f| f.scenario == scenario)
            .collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(
            m,
            "\n## {scenario}\n\n| system | figure | value | unit | how |\n|---|---|---|---|---|"
        );
        for f in &rows {
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} |",
                f.system,
                f.name,
                figure(f.value),
                f.unit,
                f.note
            );
        }
        if let Some(why) = far_apart(&rows) {
            let _ = writeln!(m, "\n{why}");
        }
    }
    if !ctx.lateness.is_empty() {
        let _ = writeln!(
            m,
            "\n![firing lateness by percentile]({DATA_DIR}/lateness.svg)"
        );
    }
    if scaled {
        let _ = writeln!(
            m,
            "\n![resets per second against resident jobs]({DATA_DIR}/scale.svg)"
        );
    }
    let shown = command.join(" ").replace(&super::repo_root(), ".");
    let _ = writeln!(m, "\n{}", commands(&shown, &ctx.sizes));
    let _ = writeln!(m, "## Notes\n");
    let _ = writeln!(
        m,
        "- `redis-benchmark -P 64 -t zadd` adds one member with score 0 again and again: after the first call it changes nothing. The `moving members` line does a reset's work (a random one of the devices gets a new score), and is the fair limit."
    );
    let _ = writeln!(
        m,
        "- BullMQ cannot do the same thing in one case: `changeDelay` only moves a job that is still delayed, so a heartbeat for a job that is running is refused (`JobNotInState`); timeout-center applies it after the run. BullMQ has no batch reset: its figure is one `changeDelay` per job with 64 in flight."
    );
    let _ = writeln!(
        m,
        "- BullMQ's latency runs at no more than 2,000 fires per second and its burst at no more than 100,000 jobs (it needs minutes for a million); bursts are compared as drain rates, and our Redis store's latency is measured at BullMQ's rate too (the rows *firing lateness at BullMQ's rate*), so that lateness is compared at one load."
    );
    let _ = writeln!(
        m,
        "- Lateness is the instant the handler started minus the job's fire time (webhook: the receiver's arrival minus the fire time)."
    );
    let _ = writeln!(
        m,
        "- The latency scenario runs at {} fires a second too (the rows *firing lateness at {}/s*, {} s on each engine), where a pump's batches hold dozens of jobs: lateness there shows what a batch costs, its lease and its settle, more than a round trip.",
        figure(ctx.sizes.high_rate as f64),
        figure(ctx.sizes.high_rate as f64),
        ctx.sizes.high_rate_seconds
    );
    let _ = writeln!(
        m,
        "- The burst runs once more on Redis with a topic that keeps no `job.done` events (`events = \"changes\"`; the rows *…, events = changes*): what its event stream costs a fire."
    );
    let _ = writeln!(
        m,
        "- Each headline figure stands beside a floor measured on the same Redis in the same run: resets beside bare `ZADD XX CH` pipelines, the burst and claim + ack beside a bare Lua floor (16 plain sorted sets; one minimal script takes due members into a lease set, another acks them by removing each member and its record, with none of our features: `crates/toc-bench/src/bare_fire.rs`)."
    );
    let _ = writeln!(
        m,
        "- The machine table: the share of CPU time the hypervisor gave other guests during each scenario (`/proc/stat` steal). A scenario run in such a stretch is slower as a whole, and a ratio moves with it when its baseline ran at another moment (BullMQ runs last)."
    );
    // Figures measured by other commands (focused benchmarks, fault tests) are kept below
    // the marker of the file this run replaces.
    if !hand.is_empty() {
        let _ = write!(m, "\n{hand}");
    }
    std::fs::write(&md, m).map_err(|e| e.to_string())?;
    Ok(format!(
        "{}, {} and {}",
        md.display(),
        js.display(),
        svg.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(name: &str, value: f64, note: &str) -> crate::Figure {
        crate::Figure {
            scenario: "webhook",
            system: "memory".into(),
            name: name.into(),
            value,
            unit: "calls/s",
            note: note.into(),
        }
    }

    #[test]
    fn the_median_runs_tables_replace_the_published_ones_between_headline_and_notes() {
        let published = "# Benchmarks\n\n<!-- Headline x -->\nmedians\n<!-- End of the headline. -->\n\n## This run\n\nold run\n\n<!-- Hand-written below this line -->\nnotes\n";
        let run = "# Benchmarks\n\nWritten by run 2.\n\n## burst\n\n| a |\n\n<!-- Hand-written below this line -->\nthe run's own notes\n";
        assert_eq!(
            with_run(published, run),
            "# Benchmarks\n\n<!-- Headline x -->\nmedians\n<!-- End of the headline. -->\n\n## This run\n\nWritten by run 2.\n\n## burst\n\n| a |\n\n<!-- Hand-written below this line -->\nnotes\n"
        );
    }

    #[test]
    fn rows_ten_times_apart_are_told_apart_by_their_loads() {
        let (slow, fast, near) = (
            figure("one key", 327.0, "flow control on one key, parallelism 4"),
            figure("no limits", 16_094.0, "20,000 calls due at once"),
            figure("signed", 15_000.0, ""),
        );
        let why = far_apart(&[&slow, &fast, &near]).expect("49x apart");
        assert!(why.starts_with("Rows 49.22× apart in calls/s:"), "{why}");
        assert!(
            why.contains("memory no limits (16,094) measures 20,000 calls due at once"),
            "{why}"
        );
        assert!(
            why.contains("memory one key (327) measures flow control on one key"),
            "{why}"
        );
        assert_eq!(
            far_apart(&[&fast, &near]),
            None,
            "within 10x: nothing to say"
        );
    }

    #[test]
    fn a_run_keeps_the_headline_on_top_and_the_hand_written_part_below() {
        let old = "# Benchmarks\n\n<!-- Headline: hand-written. -->\nmedian\n<!-- End of the headline. -->\n\n## This run\n\nold figures\n\n<!-- Hand-written below this line -->\nnotes\n";
        let (headline, hand) = kept(old);
        assert_eq!(
            headline,
            "<!-- Headline: hand-written. -->\nmedian\n<!-- End of the headline. -->"
        );
        assert_eq!(hand, "<!-- Hand-written below this line -->\nnotes\n");
        assert_eq!(kept("# Benchmarks\n\nfigures\n"), ("", ""));
    }
}

//! `toc-bench`: the load generator's command (`toc bench ARGS` runs it too). It is also a
//! `toc` in its own right (`toc-bench serve ...` is `toc serve ...`), so the scenarios that
//! measure a `toc serve` process run the very build that is measuring.

use clap::Parser;

/// The allocator `toc` runs with (`src/main.rs`), so that the runtime measured here is the
/// runtime that serves: with glibc's, a burst drained 13 to 20 % slower.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// timeout-center's load generator: `toc-bench all --quick` for a short check, `toc-bench
/// all` for the published figures (BENCHMARKS.md). With RUST_LOG set (e.g. `info`), the
/// service's own log goes to stderr.
#[derive(Parser)]
#[command(name = "toc-bench", version)]
struct Cli {
    #[command(flatten)]
    args: toc_bench::BenchArgs,
}

fn main() -> std::process::ExitCode {
    if std::env::args_os().nth(1).is_some_and(|a| a == "serve") {
        return timeout_center::cli::toc_main();
    }
    let cli = Cli::parse();
    // The service's own log (warnings of failed pumps, slots changing hands) only when asked
    // for: it would break the progress bars.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    toc_bench::run(cli.args)
}

//! The `toc` binary: `toc serve` runs the service; every other command is a client of its
//! HTTP API.

use std::process::ExitCode;

/// Every job allocates and frees small buffers on its way through the runtime; glibc's
/// allocator was a third of the runtime's CPU under a burst (perf), mimalloc much less.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use timeout_center::cli::{self, Cli, Command};
use timeout_center::config::{LogFormat, Settings};
use timeout_center::serve;

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn serve_main(config: Option<std::path::PathBuf>) -> ExitCode {
    let settings = match Settings::load(config.as_deref(), std::env::vars()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("toc serve: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(settings.log_format);
    let result = actix_web::rt::System::new().block_on(async move {
        let store = serve::open_store(&settings).await?;
        tracing::info!(
            store = store.engine(),
            durable = store.durability(),
            "store opened"
        );
        serve::start(settings, store).await?.run().await
    });
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "toc serve stopped");
            eprintln!("toc serve: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { config } => return serve_main(config),
        #[cfg(feature = "bench")]
        Command::Bench(args) => return timeout_center::bench::run(args),
        _ => {}
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => cli::exit(f),
    }
}

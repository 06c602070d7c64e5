//! The `toc` binary: `toc serve` runs the service; every other command is a client of its
//! HTTP API.

/// Every job allocates and frees small buffers on its way through the runtime; glibc's
/// allocator showed as a large part of the runtime's CPU under a burst, mimalloc far less.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    timeout_center::cli::toc_main()
}

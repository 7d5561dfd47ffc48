//! `fencepost-server`: the fencepost MCP server over stdio.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fencepost_server::{Config, FencepostServer};
use rmcp::ServiceExt;

/// MCP server for fencepost: leases with fencing tokens and fenced file writes for
/// agents sharing one working tree. Speaks JSON-RPC on stdin/stdout; logs to stderr.
#[derive(Debug, Parser)]
#[command(name = "fencepost-server", version, about)]
struct Cli {
    /// The working tree: file targets and write paths are relative to it and
    /// confined to it.
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// The lease store directory; relative to --root. Default: each resource's store
    /// by the location rule the CLI follows (a .fencepost directory at or above the
    /// file's directory, or the root for locks; else the repository's common git
    /// directory; else the per-user store). Or an etcd store,
    /// `etcd://host:2379[,host:2379…]/prefix` (built with the `etcd` feature).
    #[arg(long, env = "FENCEPOST_STORE", value_name = "DIR")]
    store: Option<PathBuf>,
    /// Owner name recorded with each claim (diagnostics only).
    #[arg(
        long,
        env = "FENCEPOST_OWNER",
        default_value = "mcp",
        value_name = "NAME"
    )]
    owner: String,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            let _ = e.print();
            return ExitCode::from(1);
        }
        Err(e) => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    init_logging();
    let root = std::path::absolute(&cli.root).unwrap_or(cli.root);
    let server = match FencepostServer::new(Config {
        root,
        store: cli.store.filter(|s| !s.as_os_str().is_empty()),
        owner: cli.owner,
    }) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("fencepost-server: {e}");
            return ExitCode::from(1);
        }
    };
    tracing::info!(
        root = %server.root().display(),
        store = %server.store_dir().display(),
        "serving on stdio"
    );
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("fencepost-server: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(serve(server));
    // A read of stdin may still be pending on the blocking pool (it cannot be
    // cancelled); do not wait for it.
    runtime.shutdown_background();
    code
}

/// Serves until the client disconnects or a termination signal arrives, then
/// releases the leases this server holds.
async fn serve(server: FencepostServer) -> ExitCode {
    let session = {
        let server = server.clone();
        async move {
            let running = server.serve(rmcp::transport::stdio()).await?;
            running.waiting().await?;
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        }
    };
    let code = tokio::select! {
        outcome = session => match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!("session ended: {e}");
                ExitCode::from(1)
            }
        },
        signal = shutdown_signal() => {
            tracing::info!("{signal}: shutting down");
            ExitCode::SUCCESS
        }
    };
    let released = tokio::task::spawn_blocking(move || server.release_all())
        .await
        .unwrap_or(0);
    if released > 0 {
        tracing::info!(released, "released the leases this server held");
    }
    code
}

/// Resolves on SIGINT or SIGTERM (Ctrl-C on Windows).
async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            },
            _ => std::future::pending().await,
        }
    }
    #[cfg(not(unix))]
    {
        match tokio::signal::ctrl_c().await {
            Ok(()) => "Ctrl-C",
            Err(_) => std::future::pending().await,
        }
    }
}

/// Logs to stderr only: stdout is the protocol. `FENCEPOST_LOG` picks the level.
fn init_logging() {
    let level = match std::env::var("FENCEPOST_LOG").as_deref() {
        Ok("error") => tracing::Level::ERROR,
        Ok("warn") => tracing::Level::WARN,
        Ok("debug") => tracing::Level::DEBUG,
        Ok("trace") => tracing::Level::TRACE,
        _ => tracing::Level::INFO,
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_max_level(level)
        .with_target(false)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}

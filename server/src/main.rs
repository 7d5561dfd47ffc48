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
        value_name = "NAME",
        value_parser = parse_owner
    )]
    owner: String,
    /// This server's session: its claims of what the session already holds return
    /// the same token, renewed, and any process naming the session (a hook, the CLI
    /// with --session) can renew and release them. A name the agent's processes
    /// already share; knowing it is acting as the session, so others are shown only
    /// its tag. Default: inside Claude Code, `claude-code:` + its
    /// CLAUDE_CODE_SESSION_ID (the session its edit hooks claim for); else a fresh id
    /// for this server process.
    #[arg(long, env = "FENCEPOST_SESSION", value_name = "ID")]
    session: Option<String>,
}

/// Inside Claude Code (`CLAUDECODE=1`), the session Claude Code names in the
/// environment of the servers it spawns (`CLAUDE_CODE_SESSION_ID`), spelled as
/// `fencepost hook claude-code` spells the session of its payloads
/// (`claude-code:ID`): the server and the agent's edit hooks are one session
/// (docs/design-06-agent-hooks.md, "Sessions").
fn claude_code_session() -> Option<String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if var("CLAUDECODE").as_deref() != Some("1") {
        return None;
    }
    var("CLAUDE_CODE_SESSION_ID").map(|id| format!("claude-code:{id}"))
}

/// Owners are printed in other agents' terminals and messages ("held by …"), so,
/// as the CLI does, the library's rule decides (`fencepost::check_owner`: not
/// empty, no control characters, at most 256 characters).
fn parse_owner(text: &str) -> Result<String, String> {
    match fencepost::check_owner(text) {
        Ok(()) => Ok(text.to_string()),
        Err(fencepost::Error::InvalidArgument(problem)) => Err(problem),
        Err(other) => Err(other.to_string()),
    }
}

/// Clap's usage error as one line, as the CLI prints its own: the message, clap's
/// hint as its own clause, and where to read the usage.
fn usage_error_line(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let mut parts: Vec<String> = Vec::new();
    for raw in rendered.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with("For more information") {
            continue;
        }
        if line.starts_with("Usage:") {
            break;
        }
        if raw.starts_with(char::is_whitespace)
            && !line.starts_with("tip: ")
            && let Some(last) = parts.last_mut()
        {
            last.push(' ');
            last.push_str(line);
            continue;
        }
        let clause = line.strip_prefix("error: ").unwrap_or(line);
        parts.push(clause.strip_prefix("tip: ").unwrap_or(clause).to_string());
    }
    format!("{}; see 'fencepost-server --help'", parts.join("; "))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            eprintln!("fencepost-server: {}", usage_error_line(&e));
            return ExitCode::from(1);
        }
        Err(e) => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    let _log = init_logging();
    let root = std::path::absolute(&cli.root).unwrap_or(cli.root);
    let server = match FencepostServer::new(Config {
        root,
        store: cli.store.filter(|s| !s.as_os_str().is_empty()),
        owner: cli.owner,
        session: cli
            .session
            .filter(|s| !s.is_empty())
            .or_else(claude_code_session),
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
/// releases the leases this server holds (a tenure it re-entered, which its
/// session held before, is left held).
async fn serve(server: FencepostServer) -> ExitCode {
    let (transport, writer) = fencepost_server::transport::stdio();
    let session = {
        let server = server.clone();
        async move {
            let running = match server.serve(transport).await {
                Ok(running) => running,
                // A client that closed its end before `initialize` (a probe that
                // only starts the server) asked for nothing: not an error (a new
                // user saw "ERROR session ended" and exit 1).
                Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
                    tracing::info!("the client closed the connection before initialize");
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            };
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
    // The last responses rmcp wrote reach stdout before the process ends.
    writer.flush(std::time::Duration::from_secs(2)).await;
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

/// What is logged when neither `FENCEPOST_LOG` nor `RUST_LOG` says: one line per
/// request from this server at info, and only warnings from the libraries (rmcp logs
/// every message it handles as a Rust `Debug` dump at info).
const DEFAULT_LOG: &str = "warn,fencepost_server=info";

/// The log filter: `FENCEPOST_LOG`, else `RUST_LOG`, else [`DEFAULT_LOG`]; each a
/// level (`debug`) or directives (`warn,fencepost_server=debug,rmcp=info`). An
/// empty variable counts as unset; one that does not parse is reported and the
/// default used.
fn log_filter() -> (tracing_subscriber::filter::Targets, Option<String>) {
    let chosen = ["FENCEPOST_LOG", "RUST_LOG"].into_iter().find_map(|name| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| (name, v))
    });
    let default = || DEFAULT_LOG.parse().expect("the default log filter parses");
    match chosen {
        None => (default(), None),
        Some((name, value)) => match value.trim().parse() {
            Ok(filter) => (filter, None),
            Err(e) => (
                default(),
                Some(format!(
                    "{name}={value:?} is not a log filter ({e}); using {DEFAULT_LOG:?}"
                )),
            ),
        },
    }
}

/// rmcp's warning for every error it answers (`response error`, fields `id` and
/// `error`, the error as a Rust `Debug` dump holding the method name rmcp had before
/// our message replaced it). Our own line for the request already says what was
/// answered, so at every level this one only repeats it, wrongly worded; rmcp's
/// other warnings (a send that failed, a request rejected) are kept.
fn is_rmcp_response_error(meta: &tracing::Metadata<'_>) -> bool {
    let fields = meta.fields();
    meta.is_event()
        && meta.target() == "rmcp::service"
        && *meta.level() == tracing::Level::WARN
        && fields.field("error").is_some()
        && fields.field("id").is_some()
}

/// Lines of log the writer thread holds while stderr is not taken: about a
/// megabyte at the default level.
const LOG_LINES_HELD: usize = 10_000;

/// Logs to stderr only: stdout is the protocol. Through a writer thread, dropping
/// lines when it falls behind: a client may ignore the server's stderr (the MCP
/// stdio transport allows it), and a pipe nobody reads must never stall a tool
/// call (`server/tests/polish.rs::a_client_that_never_reads_stderr_does_not_stall_the_server`).
/// Keep the guard until exit: dropping it writes what is held, waiting at most
/// about a second.
fn init_logging() -> tracing_appender::non_blocking::WorkerGuard {
    use tracing_subscriber::layer::{Layer, SubscriberExt};
    use tracing_subscriber::util::SubscriberInitExt;
    let (filter, problem) = log_filter();
    let (stderr, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(LOG_LINES_HELD)
        .thread_name("fencepost-server-log")
        .finish(std::io::stderr());
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(stderr)
                .with_ansi(false)
                .with_target(false)
                .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                    !is_rmcp_response_error(meta)
                })),
        )
        .with(filter)
        .init();
    if let Some(problem) = problem {
        tracing::warn!("{problem}");
    }
    guard
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

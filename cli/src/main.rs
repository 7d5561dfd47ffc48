//! `fencepost`: leases with fencing tokens from the command line (docs/protocol.md §7).
//!
//! `main` maps the outcome of [`run`] to the documented exit codes: 0 success, 1 an
//! error (usage, bad input, I/O; one line on stderr), 3 a refusal (held, stale
//! token, not the holder, lease lost). A closed stdout is not an error.

mod args;
mod commands;
mod elsewhere;
mod hooks;
mod output;
mod run;
mod store;
mod sys;
mod waiting;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches};
use fencepost::Error;

use crate::args::{CheckAlone, CheckArgs, Cli, Command, ReleaseArgs, RenewArgs, Root};
use crate::commands::Context;
use crate::output::{describe_error, report};
use crate::store::Access;

/// Exit code for errors: usage, bad input, I/O.
const EXIT_ERROR: u8 = 1;
/// Exit code for refusals: held, stale token, not the holder, lease lost.
const EXIT_REFUSED: u8 = 3;

/// Why a command did not succeed, and so which exit code it ends with.
#[derive(Debug)]
pub enum Failure {
    /// Exit 1 with this one-line message: bad usage or input, or the store failed.
    Error(String),
    /// Exit 3 with this one-line message: the resource is held, the token is stale
    /// or not the holder.
    Refused(String),
    /// Exit with this code and this one-line message: a refusal with the
    /// caller's `--conflict-exit-code`, or `run`'s 126 / 127 for a command that
    /// cannot be executed / was not found.
    Code(u8, String),
    /// Stdout was closed by the reader (`fencepost status | head -1`): end quietly.
    BrokenPipe,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        let message = describe_error(&error);
        match error {
            Error::Held { .. }
            | Error::NotHolder { .. }
            | Error::Superseded { .. }
            | Error::Expired { .. }
            | Error::Broken { .. }
            | Error::Released { .. }
            | Error::NotHeld { .. }
            | Error::NotSessionHolder { .. } => Failure::Refused(message),
            // Bad input, and every I/O failure: never a refusal (docs/protocol.md §5).
            _ => Failure::Error(message),
        }
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(Failure::BrokenPipe) => ExitCode::SUCCESS,
        Err(Failure::Error(message)) => {
            report(&message);
            ExitCode::from(EXIT_ERROR)
        }
        Err(Failure::Refused(message)) => {
            report(&in_store(message));
            ExitCode::from(EXIT_REFUSED)
        }
        Err(Failure::Code(code @ (126 | 127), message)) => {
            report(&message);
            ExitCode::from(code)
        }
        Err(Failure::Code(code, message)) => {
            report(&in_store(message));
            ExitCode::from(code)
        }
    }
}

/// The store the command used, once it is open: every refusal names it, since "held"
/// or "never claimed" is only true of one store (issue 19).
static STORE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `message`, naming the store unless it already does.
pub(crate) fn in_store(message: String) -> String {
    match STORE.get() {
        Some(store) if !message.contains(store.as_str()) => format!("{message} (store {store})"),
        _ => message,
    }
}

fn run() -> Result<ExitCode, Failure> {
    let cli = match parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(error) if !error.use_stderr() => {
            // --help and --version: clap's text on stdout, exit 0.
            let _ = error.print();
            return Ok(ExitCode::SUCCESS);
        }
        Err(error)
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand
            ) =>
        {
            let (path, names) = named_command();
            return Err(Failure::Error(format!(
                "no command given; use one of {}; see '{path} --help'",
                names.join(", ")
            )));
        }
        Err(error) if is_hook_invocation() => {
            // An agent's hook with arguments it cannot parse must still block
            // (exit 2), never fail open with a usage error's exit 1.
            return Err(Failure::Code(
                2,
                hooks::fail_closed(&format!(
                    "the hook command in the agent's settings is wrong ({})",
                    usage_error_line(&error)
                )),
            ));
        }
        Err(error) => return Err(Failure::Error(usage_error_line(&error))),
    };
    // The commands that describe the CLI itself touch no store.
    match &cli.command {
        Command::Completions(args) => return output::completions(args.shell),
        Command::Man(args) => return output::man_page(&args.command),
        // These open the stores of the paths they read from stdin or git.
        Command::Hook(args) => return Ok(hooks::hook(cli.global.store.as_deref(), args)),
        Command::Guard(args) => return hooks::git::guard(cli.global.store.as_deref(), args),
        Command::Hooks(command) => return hooks::install::run(command),
        _ => {}
    }
    let ctx = open_store(&cli)?;
    match &cli.command {
        Command::Claim(args) => commands::claim(&ctx, args),
        Command::Check(args) => commands::check(&ctx, args),
        Command::Renew(args) => commands::renew(&ctx, args),
        Command::Release(args) => commands::release(&ctx, args),
        Command::Status(args) => commands::status(&ctx, args),
        Command::Run(args) => run::run(&ctx, args),
        Command::Break(args) => commands::break_lease(&ctx, args),
        Command::Completions(_)
        | Command::Man(_)
        | Command::Hook(_)
        | Command::Guard(_)
        | Command::Hooks(_) => unreachable!("handled before the store opens"),
    }
}

/// True when the command line is `fencepost [--store DIR] hook …`.
fn is_hook_invocation() -> bool {
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--store" {
            args.next();
        } else if !arg.to_string_lossy().starts_with('-') {
            return arg == "hook";
        }
    }
    false
}

/// The command line `argv` (program name first), parsed.
///
/// A `check` in its plain form is read without clap ([`args::check_plain`]): building
/// a clap tree and parsing with it was most of what a whole `check` process cost
/// beyond starting (docs/design-07, "The CLI's `check`"). Any other `check` is
/// parsed with [`CheckAlone`]'s tree: the same root and the same `check` as
/// [`Cli`]'s, without building the other commands' arguments. Whatever that tree
/// does not accept (help, version, any usage error, another command) is parsed
/// again with the whole tree, so every message and help text is the whole tree's;
/// `check_plain_parses_as_clap` and `check_alone_parses_as_the_whole_tree` pin that,
/// and `a_plain_check_builds_no_clap_command` that the plain form stays off clap.
fn parse(argv: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    if let Some(cli) = args::check_plain(&argv, std::env::var_os("FENCEPOST_STORE").as_deref()) {
        return Ok(cli);
    }
    if argv.iter().skip(1).any(|arg| arg == "check")
        && let Ok(matches) = command(Root::<CheckAlone>::command()).try_get_matches_from(&argv)
        && let Ok(alone) = Root::<CheckAlone>::from_arg_matches(&matches)
    {
        let CheckAlone::Check(args) = alone.command;
        return Ok(Cli {
            global: alone.global,
            command: Command::Check(args),
        });
    }
    let tree = shared_without_session_env(command(Cli::command()), &argv);
    tree.try_get_matches_from(argv)
        .and_then(|matches| Cli::from_arg_matches(&matches))
}

/// A shared claim takes no session, so `FENCEPOST_SESSION` in the environment —
/// which `run --session` gives its command — is not read for a command line with
/// `--shared` (before any `--`): it was taken for a `--session` and refused as one
/// ("the argument '--shared' cannot be used with '--session <ID>'", a breaker). An
/// explicit `--session` with `--shared` is still refused.
fn shared_without_session_env(
    mut command: clap::Command,
    argv: &[std::ffi::OsString],
) -> clap::Command {
    let shared = argv
        .iter()
        .skip(1)
        .take_while(|arg| *arg != "--")
        .any(|arg| arg == "--shared");
    if shared {
        for sub in ["claim", "run"] {
            if command.find_subcommand(sub).is_some() {
                command =
                    command.mut_subcommand(sub, |c| c.mut_arg("session", |arg| arg.env(None)));
            }
        }
    }
    command
}

/// The command line definition `command`, with an environment variable that is set
/// but empty treated as unset (`FENCEPOST_STORE=` means "locate the store", as the
/// server already reads it), instead of clap's "a value is required" (issue 19).
fn command(mut command: clap::Command) -> clap::Command {
    #[cfg(test)]
    tests::COMMANDS_BUILT.with(|built| built.set(built.get() + 1));
    let empty = |name: &str| std::env::var_os(name).is_some_and(|v| v.is_empty());
    // Only the subcommands the tree has: `mut_subcommand` would add a missing one.
    let has = |command: &clap::Command, sub: &str| command.find_subcommand(sub).is_some();
    if empty("FENCEPOST_STORE") {
        command = command.mut_arg("store", |arg| arg.env(None));
    }
    if empty("FENCEPOST_SESSION") {
        for sub in ["claim", "run", "renew", "release"] {
            if has(&command, sub) {
                command =
                    command.mut_subcommand(sub, |c| c.mut_arg("session", |arg| arg.env(None)));
            }
        }
    }
    if empty("FENCEPOST_OWNER") {
        for sub in ["claim", "run"] {
            if has(&command, sub) {
                command = command.mut_subcommand(sub, |c| c.mut_arg("owner", |arg| arg.env(None)));
            }
        }
    }
    command
}

/// Opens the store of the command's resource (`status`: of the working directory),
/// named by --store / FENCEPOST_STORE or located by the store location rule.
/// `claim` and `run` may create it; every other command creates nothing.
fn open_store(cli: &Cli) -> Result<Context, Failure> {
    let cwd = std::env::current_dir().map_err(|e| {
        Failure::Error(format!(
            "cannot read the current directory: {e}; run from an existing directory or pass --store"
        ))
    })?;
    let (resource, access) = match &cli.command {
        Command::Claim(args) => (args.target.resources().first().cloned(), Access::Create),
        Command::Run(args) => (Some(args.target.resource()), Access::Create),
        Command::Check(args) => (Some(args.target.resource()), Access::Existing),
        Command::Release(args) => (Some(args.target.resource()), Access::Existing),
        Command::Renew(args) => (Some(args.target.resource()), Access::Existing),
        // Nothing to break in a store that does not exist (exit 3, "not held").
        // `--session`: the store of the working directory, as `status` reads.
        Command::Break(args) => (
            args.session.is_none().then(|| args.target.resource()),
            Access::Existing,
        ),
        Command::Status(_)
        | Command::Completions(_)
        | Command::Man(_)
        | Command::Hook(_)
        | Command::Guard(_)
        | Command::Hooks(_) => (None, Access::Existing),
    };
    let opened = store::open(cli.global.store.as_deref(), resource.as_ref(), &cwd, access)
        .map_err(Failure::Error)?;
    if let Command::Claim(args) = &cli.command {
        one_store(cli, &args.target.resources(), &cwd)?;
    }
    if access == Access::Create && cli.global.store.is_none() {
        let claimed = match &cli.command {
            Command::Claim(args) => args.target.resources(),
            Command::Run(args) => vec![args.target.resource()],
            _ => Vec::new(),
        };
        whole_subtrees(&claimed, &cwd)?;
    }
    let locator = opened.backend.locator();
    let _ = STORE.set(locator.clone());
    // A claim of a file or directory also asks the other stores on its path
    // (`elsewhere`): the layout may have changed since another claim of it.
    let elsewhere = match &cli.command {
        Command::Claim(args) => elsewhere::Elsewhere::new(
            &args.target.resources(),
            &cwd,
            std::path::Path::new(&locator),
        ),
        Command::Run(args) => elsewhere::Elsewhere::new(
            &[args.target.resource()],
            &cwd,
            std::path::Path::new(&locator),
        ),
        // A lease claimed in another store before the layout changed, which the
        // location rule no longer picks (a store moved away and back).
        Command::Check(CheckArgs { target, .. })
        | Command::Renew(RenewArgs { target, .. })
        | Command::Release(ReleaseArgs { target, .. }) => {
            elsewhere::Elsewhere::new(&[target.resource()], &cwd, std::path::Path::new(&locator))
        }
        _ => elsewhere::Elsewhere::default(),
    };
    Ok(Context {
        store: fencepost::Store::new(opened.backend),
        locator,
        scope: opened.scope,
        exists: opened.exists,
        elsewhere,
    })
}

/// A subtree claim must reach every file below its directory: one whose directory
/// holds a nested repository or a `.fencepost` store below it is refused, since
/// claims of the files there are made in another store and would never meet it
/// (`fencepost_fs::subtree_split`). Only where the location rule chooses the store.
fn whole_subtrees(resources: &[fencepost::Resource], cwd: &std::path::Path) -> Result<(), Failure> {
    for resource in resources {
        match fencepost_fs::subtree_split(resource, cwd) {
            Ok(None) => {}
            Ok(Some(split)) => return Err(Failure::Error(split.to_string())),
            Err(e) => {
                return Err(Failure::Error(format!(
                    "cannot choose a store for {}: {e}",
                    shown_target(resource)
                )));
            }
        }
    }
    Ok(())
}

/// `resource` as a refusal names it before saying why: at most 80 characters (a
/// path refused for its length was printed whole ahead of the reason, an 8 KB
/// line: a breaker), escaped.
fn shown_target(resource: &fencepost::Resource) -> String {
    output::elide_middle(&output::printable(&resource.target()), 80)
}

/// Several resources claimed at once must share one store (all or nothing is only
/// possible within one): each is located by the store location rule unless
/// `--store` names the store.
fn one_store(
    cli: &Cli,
    resources: &[fencepost::Resource],
    cwd: &std::path::Path,
) -> Result<(), Failure> {
    if resources.len() < 2 || cli.global.store.is_some() {
        return Ok(());
    }
    let locate = |resource: &fencepost::Resource| {
        fencepost_fs::locate_store(None, Some(resource), cwd)
            .map(|location| location.path)
            .map_err(|e| {
                Failure::Error(format!(
                    "cannot choose a store for {}: {e}",
                    shown_target(resource)
                ))
            })
    };
    let first = locate(&resources[0])?;
    for resource in &resources[1..] {
        let other = locate(resource)?;
        if other != first {
            return Err(Failure::Error(format!(
                "{} and {} are in different stores ({} and {}), and several resources are claimed together only within one store; claim them with separate commands, or pass --store",
                resources[0].target(),
                resource.target(),
                first.display(),
                other.display()
            )));
        }
    }
    Ok(())
}

/// The most characters of a bad value a usage error shows.
const SHOWN_VALUE_MAX_CHARS: usize = 64;

/// Clap's usage error on one line: its message (and tip, if any) without the usage
/// block, plus where to read the usage. Clap renders several lines; scripts and
/// agents read one.
fn usage_error_line(error: &clap::Error) -> String {
    let mut rendered = error.render().to_string();
    // A value with a line break in it (`--owner $'a\nb'`) is shown escaped, as
    // every message shows what a user typed: split below, it would read as two
    // clauses ("invalid value 'a; b'").
    if let Some(clap::error::ContextValue::String(value)) =
        error.get(clap::error::ContextKind::InvalidValue)
    {
        // A long value is shown by its start and its length: the whole of it (a
        // 100 KB argument) made a 100 KB line (a breaker).
        let chars = value.chars().count();
        if chars > SHOWN_VALUE_MAX_CHARS {
            let start: String = value.chars().take(SHOWN_VALUE_MAX_CHARS).collect();
            let shown = format!("{}… ({chars} characters)", output::printable(&start));
            rendered = rendered.replace(value.as_str(), &shown);
        } else if value.contains(char::is_control) {
            if rendered.contains(value.as_str()) {
                rendered = rendered.replace(value.as_str(), &output::printable(value));
            } else if let Some(start) = rendered.find("invalid value '").map(|at| at + 15)
                && let Some(len) = rendered[start..].find("' for '")
            {
                // Clap's rendering dropped some control characters (DEL), so the
                // value read as empty (a breaker): show it escaped instead.
                rendered.replace_range(start..start + len, &output::printable(value));
            }
        }
    }
    let mut parts = Vec::new();
    // Errors about a value carry no usage block; name the subcommand from argv.
    let mut command_path = named_command().0;
    for raw in rendered.lines() {
        let line = raw.trim();
        if let Some(usage) = line.strip_prefix("Usage:") {
            // `Usage: fencepost claim <--lock ...>`: the words before the first
            // placeholder or flag name the (sub)command. The message came before.
            let words: Vec<&str> = usage
                .split_whitespace()
                .take_while(|w| !w.starts_with(['-', '<', '[']))
                .collect();
            if !words.is_empty() {
                command_path = words.join(" ");
            }
            break;
        }
        if line.is_empty() || line.starts_with("For more information") {
            continue;
        }
        if raw.starts_with(char::is_whitespace) && !line.starts_with("tip: ") && !parts.is_empty() {
            // An indented line continues the one before (a list of missing arguments).
            let last: &mut String = parts.last_mut().expect("checked non-empty");
            last.push(' ');
            last.push_str(line);
            continue;
        }
        // Clap's hint ("tip: a similar argument exists: '--lock'") is its own clause,
        // not glued onto the sentence before it (issue 19).
        let clause = line.strip_prefix("error: ").unwrap_or(line);
        parts.push(clause.strip_prefix("tip: ").unwrap_or(clause).to_string());
    }
    // `fencepost claim db:migrations`: the resource without its flag, the first
    // thing a new user types.
    if error.kind() == ErrorKind::UnknownArgument
        // The subcommand, whatever the binary is called (`fencepost.exe claim` on
        // Windows, where the hint was never given: found under Wine).
        && matches!(
            command_path.split_once(' ').map(|(_, sub)| sub),
            Some("claim" | "break")
        )
        && let Some(clap::error::ContextValue::String(arg)) =
            error.get(clap::error::ContextKind::InvalidArg)
        && !arg.starts_with('-')
    {
        let arg = output::printable(arg);
        parts.push(format!(
            "name the resource with --lock {arg} (a named lock), --file {arg} or --dir {arg}"
        ));
    }
    // `fencepost --session s1 claim …`: an option of some commands given before the
    // command, or to a command that does not take it (`check --session`). Clap's
    // tip would name whatever flag is spelled alike (`--version` for `--session`);
    // say where the option goes instead.
    if error.kind() == ErrorKind::UnknownArgument
        && let Some(clap::error::ContextValue::String(arg)) =
            error.get(clap::error::ContextKind::InvalidArg)
        && let Some((flag, commands)) = match arg.split('=').next() {
            Some("--owner") => Some(("--owner NAME", "claim, run and break")),
            Some("--session") => Some(("--session ID", "claim, run, renew and release")),
            _ => None,
        }
    {
        parts.retain(|part| !part.contains("exists"));
        // The subcommand, whatever the binary is called (`fencepost.exe` on
        // Windows, found under Wine): none when the option came before it.
        match command_path.split_once(' ') {
            None => parts.push(format!(
                "{flag} goes after the command it applies to ({commands}), as in 'fencepost claim {flag} --lock NAME'"
            )),
            Some((_, sub)) => parts.push(format!(
                "'{sub}' takes no {} (only {commands} do)",
                flag.split(' ').next().unwrap_or(flag)
            )),
        }
    }
    // `--session -rf`: a value that begins with `-` reads as options (a breaker
    // was told only "unexpected argument '-r'").
    if error.kind() == ErrorKind::UnknownArgument
        && let Some(clap::error::ContextValue::String(arg)) =
            error.get(clap::error::ContextKind::InvalidArg)
    {
        let argv: Vec<String> = std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let taken = argv.windows(2).find(|pair| {
            pair[0].starts_with("--")
                && !pair[0].contains('=')
                && pair[1].starts_with('-')
                && pair[1] != "--"
                && pair[1].starts_with(arg.as_str())
                && VALUE_OPTIONS.contains(&pair[0].as_str())
        });
        if let Some(pair) = taken {
            parts.retain(|part| !part.contains("to pass"));
            parts.push(format!(
                "a value that begins with '-' is given with '=': {}={}",
                pair[0],
                output::printable(&pair[1])
            ));
        }
    }
    // `fencepost claim --lock a --slot 2`: clap's tip names `--slots`, which means
    // something else (how many slots the lock has; a new user's find).
    let sub = command_path.split_once(' ').map(|(_, sub)| sub);
    if error.kind() == ErrorKind::UnknownArgument
        && matches!(sub, Some("claim" | "run"))
        && let Some(clap::error::ContextValue::String(arg)) =
            error.get(clap::error::ContextKind::InvalidArg)
        && arg.split('=').next() == Some("--slot")
    {
        parts.retain(|part| !part.contains("exists"));
        parts.push(format!(
            "{} takes no --slot: --slots N claims a free one of the lock's N slots and prints which; --slot SLOT names a slot already held, for check, renew and release",
            sub.unwrap_or("claim")
        ));
    }
    // `fencepost run -- cmd --lock x`: everything after `--` is the command, so the
    // resource went to it (a new user's find).
    if error.kind() == ErrorKind::MissingRequiredArgument
        && sub == Some("run")
        && std::env::args_os()
            .skip_while(|arg| arg != "--")
            .any(|arg| {
                let arg = arg.to_string_lossy();
                ["--lock", "--file", "--dir"]
                    .iter()
                    .any(|flag| arg == *flag || arg.starts_with(&format!("{flag}=")))
            })
    {
        parts.push(
            "run's options go before `--`: everything after it is the command to run, as in 'fencepost run --lock NAME -- COMMAND'"
                .to_string(),
        );
    }
    let message = parts.join("; ");
    format!("{message}; see '{command_path} --help'")
}

/// Options whose value may begin with `-` (a name, a path, a reason), for the hint
/// that such a value is given with `=`.
const VALUE_OPTIONS: [&str; 7] = [
    "--session",
    "--owner",
    "--lock",
    "--file",
    "--dir",
    "--reason",
    "--store",
];

/// The names of the subcommands, for messages.
fn names_below(command: &clap::Command) -> Vec<String> {
    command
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .filter(|name| name != "help")
        .collect()
}

/// The (sub)command the command line names, as `fencepost hooks install`, and the
/// subcommands below it: `fencepost hooks` alone is told its own (install,
/// uninstall, status), not the top level's (a new user's find).
fn named_command() -> (String, Vec<String>) {
    let mut command = Cli::command();
    let mut path = vec!["fencepost".to_string()];
    for arg in std::env::args_os().skip(1) {
        let Some(sub) = command
            .get_subcommands()
            .find(|sub| sub.get_name() != "help" && arg == sub.get_name())
            .cloned()
        else {
            continue;
        };
        path.push(sub.get_name().to_string());
        command = sub;
    }
    (path.join(" "), names_below(&command))
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// How many clap trees this thread's [`parse`] calls built ([`command`]).
        pub static COMMANDS_BUILT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// `argv` with the program name first.
    fn argv_of(argv: &[&str]) -> Vec<std::ffi::OsString> {
        std::iter::once("fencepost")
            .chain(argv.iter().copied())
            .map(Into::into)
            .collect()
    }

    /// A `check` as agents and scripts run it (and as the bench times it) is parsed
    /// without building any clap tree: undoing `check_plain` in [`parse`] fails here.
    #[test]
    fn a_plain_check_builds_no_clap_command() {
        let plain: &[&[&str]] = &[
            &["--store", "/tmp/s", "check", "--lock", "cli-check", "1"],
            &["check", "--lock", "db:migrations", "7"],
            &[
                "check",
                "--lock",
                "db",
                "7.55a26ff860f4dda2c5a42e9405381a81",
                "--json",
            ],
            &["check", "--file", "src/a.rs", "12"],
            &["check", "--dir", "src", "--store", "/tmp/s", "3"],
            &["check", "--lock", "db", "--slot", "2", "4"],
        ];
        for argv in plain {
            let before = COMMANDS_BUILT.with(std::cell::Cell::get);
            let parsed = parse(argv_of(argv));
            assert!(
                matches!(
                    parsed,
                    Ok(Cli {
                        command: Command::Check(_),
                        ..
                    })
                ),
                "{argv:?}"
            );
            let built = COMMANDS_BUILT.with(std::cell::Cell::get) - before;
            assert_eq!(built, 0, "{argv:?} built {built} clap trees");
        }
        // Anything else still goes through clap (and so builds a tree).
        let before = COMMANDS_BUILT.with(std::cell::Cell::get);
        let _ = parse(argv_of(&["check", "--lock=db", "7"]));
        assert!(COMMANDS_BUILT.with(std::cell::Cell::get) > before);
    }

    /// Whatever [`args::check_plain`] accepts, clap's whole tree parses to the same
    /// [`Cli`]: over the words a `check` is made of, in every order and count up to
    /// six words, and over thousands of longer random lines.
    #[test]
    fn check_plain_parses_as_clap() {
        let store_env = std::env::var_os("FENCEPOST_STORE");
        let words = [
            "check",
            "--store",
            "/s",
            "--lock",
            "db",
            "--file",
            "a.txt",
            "--dir",
            "src",
            "--slot",
            "2",
            "0",
            "7",
            "7.3f9a00",
            "--json",
            "-1",
            "x",
            "",
            "--lock=db",
            "--",
            "-h",
            "status",
            "Db ",
            "1x",
            "7.55a26ff860f4dda2c5a42e9405381a81",
        ];
        let accepted = std::cell::Cell::new(0);
        let mut try_line = |line: &[&str]| {
            let argv = argv_of(line);
            if let Some(plain) = args::check_plain(&argv, store_env.as_deref()) {
                accepted.set(accepted.get() + 1);
                assert_eq!(
                    format!("ok {plain:?}"),
                    seen(whole_tree(
                        &argv.iter().map(|a| a.to_str().unwrap()).collect::<Vec<_>>()
                    )),
                    "{line:?}"
                );
            }
        };
        // Every line of up to six words from a smaller set (about a million lines).
        let small = [
            "check", "--store", "/s", "--lock", "db", "--file", "--slot", "2", "7", "--json",
        ];
        let mut line = Vec::new();
        fn every(
            small: &[&'static str],
            line: &mut Vec<&'static str>,
            left: usize,
            f: &mut dyn FnMut(&[&str]),
        ) {
            f(line);
            if left == 0 {
                return;
            }
            for word in small {
                line.push(word);
                every(small, line, left - 1, f);
                line.pop();
            }
        }
        every(&small, &mut line, 6, &mut try_line);
        // Longer lines from the whole vocabulary (a fixed pseudo-random sequence).
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let mut line = vec!["check"];
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = 2 + (state >> 60) as usize % 8;
            for _ in 0..len {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                line.push(words[(state >> 33) as usize % words.len()]);
            }
            let at = (state >> 20) as usize % line.len();
            line.swap(0, at);
            try_line(&line);
        }
        let accepted = accepted.get();
        assert!(accepted > 1000, "only {accepted} lines were plain");
    }

    /// `argv` parsed by the whole tree alone, as before `check` had its own.
    fn whole_tree(argv: &[&str]) -> Result<Cli, clap::Error> {
        command(Cli::command())
            .try_get_matches_from(argv)
            .and_then(|matches| Cli::from_arg_matches(&matches))
    }

    /// What a parse shows the user: the parsed command, or the error's kind, stream
    /// and rendered text (help and version are errors in clap).
    fn seen(parsed: Result<Cli, clap::Error>) -> String {
        match parsed {
            Ok(cli) => format!("ok {cli:?}"),
            Err(e) => format!(
                "err {:?} stderr={} {}",
                e.kind(),
                e.use_stderr(),
                e.render()
            ),
        }
    }

    /// Parsing a `check` with `CheckAlone`'s tree first is observably the whole
    /// tree's parse: the same command, or the same help, version or error text.
    #[test]
    fn check_alone_parses_as_the_whole_tree() {
        let argvs: &[&[&str]] = &[
            &["check", "--lock", "db", "7"],
            &["check", "--lock", "db", "7.3f9a00", "--json"],
            &["--store", "/tmp/s", "check", "--file", "a.txt", "12"],
            &["check", "--store=/tmp/s", "--dir", "src", "1"],
            &["--store", "check", "check", "--lock", "check", "3"],
            &["check", "--lock", "db", "--slot", "2", "4"],
            &["check", "--lock", "db", "--", "5"],
            &["check", "--lock", "db", "-1"],
            &["check", "--lock", "db", "x"],
            &["check", "--lock", "db"],
            &["check", "7"],
            &["check", "--lock", "a", "--file", "b", "7"],
            &["check", "--slot", "2", "--file", "b", "7"],
            &["check", "--lok", "db", "7"],
            &["check", "--lock", "db", "7", "8"],
            &["check", "--lock", "db", "7", "--json", "--json"],
            &["check"],
            &["check", "--help"],
            &["check", "-h"],
            &["check", "--version"],
            &["check", "-V"],
            &["--help", "check"],
            &["help", "check"],
            &["chec", "--lock", "db", "7"],
            &["claim", "--lock", "check"],
            &["release", "--lock", "check", "1.ab"],
            &["status", "check"],
            &["check", "check"],
            &["--store"],
            &["--store", "/tmp/s", "check"],
        ];
        for argv in argvs {
            let argv: Vec<&str> = std::iter::once("fencepost")
                .chain(argv.iter().copied())
                .collect();
            let fast = seen(parse(argv.iter().map(Into::into).collect()));
            assert_eq!(fast, seen(whole_tree(&argv)), "{argv:?}");
        }
    }

    /// `CheckAlone`'s `check` is the whole tree's `check`, argument for argument and
    /// help text for help text.
    #[test]
    fn check_alone_has_the_whole_trees_check() {
        let find = |mut root: clap::Command| {
            root.build();
            // Its place in the root's list of commands differs, and only the root's
            // help shows it (always the whole tree's).
            let check = (root
                .find_subcommand("check")
                .expect("a check command")
                .clone())
            .display_order(0);
            (format!("{check:?}"), root.get_subcommands().count())
        };
        let (alone, count) = find(Root::<CheckAlone>::command());
        let (whole, _) = find(Cli::command());
        // `check` and clap's `help`.
        assert_eq!(count, 2);
        assert_eq!(alone, whole);
    }
}

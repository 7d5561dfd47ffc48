//! The command line, as clap derive types (docs/protocol.md §7).

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use fencepost::{AcquireOptions, LeaseHandle, Resource};

/// Default lease duration for `claim` and `run`, in milliseconds.
pub const DEFAULT_TTL_MS: u64 = 30_000;

/// Default grace between SIGTERM and SIGKILL when `run` loses its lease.
pub const DEFAULT_GRACE_MS: u64 = 5_000;

/// The "Store" section: how a command picks its store. Shown under every command
/// that opens one (the `--store` help points here).
macro_rules! store_rule {
    () => {
        "\
Store (one resource, one store): --store, else $FENCEPOST_STORE; else the
nearest .fencepost directory at or above the anchor (a --file's own directory,
the current directory for --lock and status); else, inside a git repository,
fencepost/ in its common git directory (shared by every worktree; the repository
holding the file decides); else the per-user store ($XDG_STATE_HOME/fencepost or
~/.local/state/fencepost; %LOCALAPPDATA%\\fencepost on Windows). check, status,
renew and release never create a store."
    };
}

/// Exit codes and authority, then the "Store" section: the commands that claim, check,
/// renew, release, break and list leases.
const EXIT_CODES: &str = concat!(
    "\
Exit codes:
    0  success (for `run`: the child's own exit code)
    1  error: bad usage or input, or the store could not be used (I/O);
       one line on stderr says what went wrong
    3  refused: the resource is held by someone else, the token is stale,
       the handle is not the holder's, there is nothing to break, or `run`
       / `claim --hold` lost its lease
       (for `claim` and `run`, --conflict-exit-code N replaces this 3)
  126  run: the command was found but could not be executed
  127  run: the command was not found

Authority: `claim` prints a lease handle, TOKEN.SECRET (e.g. 7.3f9a...).
The token (the number) is public: `status` and messages show it, and anyone
may `check` it. Only the handle renews or releases the lease, so keep it to
yourself. A lease claimed with --session ID (or $FENCEPOST_SESSION) can also be
renewed and released by any process naming that session, and a claim by that
session gets the same token back: a session id is the name the agent's processes
share, and whoever knows it acts as the session, so status shows only its tag. `break` is for a human operator ending someone else's lease.

",
    store_rule!()
);

/// The "Store" section alone: `hook` and `guard` open stores too, and have exit
/// codes of their own (said in their long help).
const STORE_RULE: &str = store_rule!();

/// Leases with fencing tokens for agents, scripts and humans sharing one working tree.
///
/// `claim` a resource to get a fencing token, present the token with `check` before
/// each guarded write, and `release` it when done; or let `run` hold the lease (and
/// renew it) for as long as a command runs.
#[derive(Debug, Parser)]
#[command(name = "fencepost", version, after_help = EXIT_CODES, propagate_version = true)]
pub struct Root<C: Subcommand> {
    /// Options every command takes.
    #[command(flatten, next_help_heading = "Global options")]
    pub global: Global,
    /// What to do.
    #[command(subcommand)]
    pub command: C,
}

/// The whole command line.
pub type Cli = Root<Command>;

/// Options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// The store directory [default: located from the resource, as the "Store" section
    /// of `fencepost --help` says], or an etcd store URL
    /// etcd://host:2379[,host:2379…]/prefix (builds with the `etcd` feature)
    #[arg(long, global = true, env = "FENCEPOST_STORE", value_name = "DIR")]
    pub store: Option<PathBuf>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Claim a lease and print its handle, TOKEN.SECRET (exit 3 if someone else holds it)
    ///
    /// The handle's number is the fencing token; the rest is the secret that proves
    /// you hold the lease (`renew` and `release` need it). Several resources
    /// (`--lock a --lock b --file c`) are claimed all or nothing, in one canonical
    /// order, so two claimers never deadlock: one lease each, one handle per line
    /// (the locks in the order given, then the files, then the directories). The lease lives until its
    /// ttl runs out unless renewed: this process exits and nothing renews it. Use
    /// `run` to hold a lease for as long as a command runs.
    #[command(after_help = EXIT_CODES)]
    Claim(ClaimArgs),
    // Its help is in constants: `CheckAlone` declares the same subcommand.
    #[command(about = CHECK_ABOUT, long_about = CHECK_LONG_ABOUT, after_help = EXIT_CODES)]
    Check(CheckArgs),
    /// Extend your lease, given the handle `claim` printed; the token stays the same
    #[command(after_help = EXIT_CODES)]
    Renew(RenewArgs),
    /// Release your lease, given the handle `claim` printed (exit 3 if it is not the
    /// holder's)
    #[command(after_help = EXIT_CODES)]
    Release(ReleaseArgs),
    /// End someone else's lease on purpose, recording who, when and why (for a human
    /// operator; exit 3 if nothing holds the resource)
    ///
    /// The holder's next renew, check or mediated write reports "broken by WHO at
    /// TIME: REASON", `status` shows it, and the next claim gets a higher token. Use
    /// it when a holder is wedged or gone and waiting for its ttl is not an option;
    /// the fencing token keeps the broken holder from landing a write afterwards.
    #[command(name = "break", after_help = EXIT_CODES)]
    Break(BreakArgs),
    /// Hold a lease while COMMAND runs, renewing it; exit with COMMAND's exit code
    ///
    /// The child gets FENCEPOST_TOKEN, FENCEPOST_LEASE (the lease handle, so it can
    /// renew or release the lease itself), FENCEPOST_STORE, FENCEPOST_RESOURCE,
    /// FENCEPOST_LOCK (and FENCEPOST_SLOT for a slot), FENCEPOST_FILE or
    /// FENCEPOST_DIR, FENCEPOST_SESSION with --session and FENCEPOST_SHARED=1 with
    /// --shared, and runs in its own
    /// process group (a job object on Windows). SIGINT, SIGTERM and SIGHUP are forwarded to that group.
    /// The lease is released when the child ends. If the lease is lost meanwhile
    /// (taken over, broken, the store failed until it expired), that is reported on
    /// stderr at once, the child's whole group gets SIGTERM and, after --grace,
    /// SIGKILL (see --on-loss), and the exit code is 3 whatever the child returned.
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// List every resource in the store with its state, token, owner and expiry
    #[command(after_help = EXIT_CODES)]
    Status(StatusArgs),
    /// Print a shell completion script to stdout
    ///
    /// bash: `fencepost completions bash > ~/.local/share/bash-completion/completions/fencepost`;
    /// zsh: into a directory on $fpath as `_fencepost`; fish:
    /// `~/.config/fish/completions/fencepost.fish`; PowerShell: add the output to $PROFILE.
    Completions(CompletionsArgs),
    /// Print a manual page (roff) to stdout: `fencepost man > fencepost.1`, and one
    /// per command, `fencepost man claim > fencepost-claim.1` (the pages the main
    /// page's list of commands refers to)
    Man(ManArgs),
    /// An agent CLI's pre-edit hook: read its payload on stdin, claim the file for
    /// the agent's session, or block the edit when another session holds it
    ///
    /// Installed by `fencepost hooks install`; not meant to be typed. Exit 0 allows
    /// the edit, exit 2 blocks it with the reason on stderr (the agents' blocking
    /// code). Fails closed: a payload it cannot read, a store it cannot use or any
    /// internal error blocks too. FENCEPOST_HOOKS=off (set by a human in the
    /// environment the agent was started from) turns the hook off.
    #[command(after_help = STORE_RULE)]
    Hook(HookArgs),
    /// A git hook: refuse a commit (pre-commit; a merge's, pre-merge-commit; `git
    /// am`'s, pre-applypatch) or push (pre-push) that changes a file another session
    /// holds
    ///
    /// Installed by `fencepost hooks install --git`. The committer's session is
    /// FENCEPOST_SESSION (or, inside Claude Code, its session id); with none, every
    /// held file counts as someone else's. Exit 0 lets git go on, 3 refuses (one
    /// line per held path on stderr), 1 is an error.
    #[command(after_help = STORE_RULE)]
    Guard(GuardArgs),
    /// Install, remove or show the agent hooks and git hooks of a project
    #[command(subcommand)]
    Hooks(HooksCommand),
}

/// `check`'s one-line help.
const CHECK_ABOUT: &str = "Exit 0 if TOKEN is the current, live token of the resource, 3 otherwise";
/// `check`'s long help.
const CHECK_LONG_ABOUT: &str = concat!(
    "Exit 0 if TOKEN is the current, live token of the resource, 3 otherwise\n\n",
    "Anyone may check any token. A whole lease handle (TOKEN.SECRET) is accepted too, ",
    "and then its secret must be that of the tenure holding the token: two stores on a ",
    "file's path number their tokens apart, so a number alone may be another store's."
);

/// The command line with `check` as its only command: the same root (global options,
/// help, version) and the same `check` as [`Cli`], without building every other
/// command's arguments. `main` parses a `check` with it first and falls back to
/// [`Cli`] for anything it does not accept, so every help text and error is
/// [`Cli`]'s (pinned by `main`'s tests).
#[derive(Debug, Subcommand)]
pub enum CheckAlone {
    // The same attributes as `Command::Check`.
    #[command(about = CHECK_ABOUT, long_about = CHECK_LONG_ABOUT, after_help = EXIT_CODES)]
    Check(CheckArgs),
}

/// A `check` command line in its plain form, read without clap; `None` for anything
/// else, which `main` hands to clap.
///
/// Building even [`CheckAlone`]'s clap tree and parsing with it was most of what a
/// whole `check` process cost beyond starting one: its code and heap pages fault in
/// for a process that runs for about a millisecond (docs/design-07-performance.md,
/// "The CLI's `check`"). The plain form is `[--store DIR] check` followed, in any
/// order, by one of `--lock NAME` (with an optional `--slot N`), `--file PATH` or
/// `--dir PATH`, one TOKEN and an optional `--json`, `--store DIR` also anywhere after
/// `check`: every option once, spelled out and separated from its value, every word
/// valid UTF-8, no value empty or starting with `-`, the token and slot valid. That
/// is exactly where clap would accept the line and produce this [`Cli`]; every other
/// line (help, version, `--lock=NAME`, `--`, any mistake) goes to clap, so its
/// errors and help are clap's. `store_env` is `FENCEPOST_STORE`, read by the caller
/// (empty means unset, as [`Global::store`]'s environment variable is read).
/// `main`'s `check_plain_parses_as_clap` pins the equivalence.
pub fn check_plain(argv: &[OsString], store_env: Option<&OsStr>) -> Option<Cli> {
    let mut words = argv.get(1..)?.iter().map(|w| w.to_str());
    let (mut store, mut checked) = (None, false);
    let (mut lock, mut file, mut dir, mut slot, mut token, mut json) =
        (None, None, None, None, None, false);
    // A value: present, not empty, not taken for an option by clap.
    fn value(word: Option<Option<&str>>) -> Option<&str> {
        word.flatten()
            .filter(|v| !v.is_empty() && !v.starts_with('-'))
    }
    // Each option at most once: a repeat is clap's error to report.
    fn once<T>(slot: &mut Option<T>, value: Option<T>) -> Option<()> {
        if slot.is_some() {
            return None;
        }
        *slot = Some(value?);
        Some(())
    }
    while let Some(word) = words.next() {
        match word? {
            "--store" => once(&mut store, value(words.next()).map(PathBuf::from))?,
            "check" if !checked => checked = true,
            _ if !checked => return None,
            "--lock" => once(&mut lock, value(words.next()).map(str::to_string))?,
            "--file" => once(&mut file, value(words.next()).map(PathBuf::from))?,
            "--dir" => once(&mut dir, value(words.next()).map(PathBuf::from))?,
            "--slot" => once(
                &mut slot,
                value(words.next()).and_then(|v| parse_slots(v).ok()),
            )?,
            "--json" if !json => json = true,
            word if word.is_empty() || word.starts_with('-') => return None,
            word => once(&mut token, parse_checked(word).ok())?,
        }
    }
    let one_resource =
        usize::from(lock.is_some()) + usize::from(file.is_some()) + usize::from(dir.is_some()) == 1;
    if !checked || !one_resource || (slot.is_some() && lock.is_none()) {
        return None;
    }
    Some(Cli {
        global: Global {
            store: store.or_else(|| store_env.filter(|v| !v.is_empty()).map(PathBuf::from)),
        },
        command: Command::Check(CheckArgs {
            target: Target {
                one: OneResource { lock, file, dir },
                slot,
            },
            token: token?,
            json,
        }),
    })
}

/// The agent CLIs whose pre-edit hooks `fencepost hook` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AgentName {
    /// Claude Code: PreToolUse for Edit, Write, MultiEdit and NotebookEdit (claims the
    /// file) and Bash (blocks the human's escapes); SessionEnd
    ClaudeCode,
    /// Gemini CLI: BeforeTool for write_file and replace (claims the file) and
    /// run_shell_command (blocks the human's escapes); SessionEnd
    Gemini,
}

/// Arguments of `hook`.
#[derive(Debug, Args)]
pub struct HookArgs {
    /// Which agent's payload and reply format
    #[arg(value_enum, value_name = "AGENT")]
    pub agent: AgentName,
    /// How long a claim lasts after the session's last edit of the file, in
    /// milliseconds (every further edit renews it)
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_HOOK_TTL_MS, value_parser = parse_ttl)]
    pub ttl: u64,
}

/// Default ttl of a hook's claim: an editing session's pause between two edits of
/// one file, and then some (30 minutes).
pub const DEFAULT_HOOK_TTL_MS: u64 = 30 * 60 * 1000;

/// Which git hook `guard` runs as.
// The variants are git's hook names (clap derives the values from them), all
// "pre-" something.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GitHook {
    /// Check the staged paths (both names of a rename, deletions too)
    PreCommit,
    /// As pre-commit, for the commit `git merge` makes (git runs no pre-commit then)
    PreMergeCommit,
    /// As pre-commit, for each commit `git am` makes (git runs no pre-commit then)
    PreApplypatch,
    /// Check the paths of the commits being pushed (read from stdin as git gives them)
    PrePush,
}

/// Arguments of `guard`.
#[derive(Debug, Args)]
pub struct GuardArgs {
    /// The git hook this runs as
    #[arg(value_enum, value_name = "HOOK")]
    pub hook: GitHook,
    /// The arguments git passed to the hook (pre-push: remote name and URL)
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<OsString>,
}

/// `hooks install`, `hooks uninstall`, `hooks status`.
#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Add the hook entries to the agents' project settings and the git hooks
    /// (idempotent: twice is once; every existing entry is kept)
    Install(HooksArgs),
    /// Remove exactly what `hooks install` added
    Uninstall(HooksArgs),
    /// Say which hooks are installed
    Status(HooksArgs),
}

/// What `hooks install|uninstall|status` act on.
#[derive(Debug, Args)]
pub struct HooksArgs {
    /// An agent whose project settings get the hook (repeatable; with neither
    /// --agent nor --git: every agent and git)
    #[arg(long, value_enum, value_name = "AGENT")]
    pub agent: Vec<AgentName>,
    /// The git pre-commit, pre-merge-commit, pre-applypatch and pre-push hooks (in
    /// the repository's hooks directory, shared by every worktree)
    #[arg(long)]
    pub git: bool,
    /// Claude Code: write .claude/settings.local.json (not committed) instead of
    /// .claude/settings.json
    #[arg(long)]
    pub local: bool,
    /// The project directory [default: the top of the current git work tree, else
    /// the current directory]
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
}

/// Arguments of `man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The command whose page to print (`claim`, `hooks install`); none: the main
    /// page
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Arguments of `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// `--lock NAME` (with `--slot N`, one slot of it), `--file PATH` or `--dir PATH`,
/// exactly one.
#[derive(Debug, Args)]
pub struct Target {
    #[command(flatten)]
    pub one: OneResource,
    /// With --lock: slot N (from 1) of the lock, as `claim --slots` printed it;
    /// each slot is its own lease
    #[arg(long, value_name = "N", requires = "lock", conflicts_with_all = ["file", "dir"], value_parser = parse_slots)]
    pub slot: Option<u32>,
}

/// `--lock NAME`, `--file PATH` or `--dir PATH`, exactly one. (`--slot` is apart
/// from this group, so usage lines show it as an option of `--lock`, not a fourth
/// kind of resource.)
#[derive(Debug, Args)]
#[group(id = "resource", required = true, multiple = false)]
pub struct OneResource {
    /// A named lock such as db:migrations (trimmed, case-folded, invisible characters ignored)
    #[arg(long, value_name = "NAME")]
    pub lock: Option<String>,
    /// A file, existing or not, relative to the current directory
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// A directory and everything below it (a subtree), existing or not; a claim of
    /// it conflicts with claims of files and directories below it and of
    /// directories above it
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
}

impl Target {
    /// The resource named on the command line.
    pub fn resource(&self) -> Resource {
        let OneResource { lock, file, dir } = &self.one;
        match (lock, file, dir, self.slot) {
            (Some(name), _, _, Some(slot)) => Resource::slot(name.clone(), slot),
            (Some(name), _, _, None) => Resource::lock(name.clone()),
            (None, Some(path), _, _) => Resource::file(path.clone()),
            (None, None, Some(path), _) => Resource::dir(path.clone()),
            (None, None, None, _) => unreachable!("clap requires --lock, --file or --dir"),
        }
    }
}

/// `claim`'s resources: `--lock NAME`, `--file PATH` and `--dir PATH`, each as often
/// as needed (several at once are claimed all or nothing).
#[derive(Debug, Args)]
#[group(id = "resources", required = true, multiple = true)]
pub struct Targets {
    /// A named lock such as db:migrations (trimmed, case-folded, invisible
    /// characters ignored); repeat for several
    #[arg(long, value_name = "NAME")]
    pub lock: Vec<String>,
    /// A file, existing or not, relative to the current directory; repeat for
    /// several
    #[arg(long, value_name = "PATH")]
    pub file: Vec<PathBuf>,
    /// A directory and everything below it (a subtree), existing or not; conflicts
    /// with claims of files and directories below it and of directories above it;
    /// repeat for several
    #[arg(long, value_name = "PATH")]
    pub dir: Vec<PathBuf>,
}

impl Targets {
    /// The resources named on the command line: the locks in the order given, then
    /// the files, then the directories (the order results are printed in).
    pub fn resources(&self) -> Vec<Resource> {
        self.lock
            .iter()
            .map(|name| Resource::lock(name.clone()))
            .chain(self.file.iter().map(|path| Resource::file(path.clone())))
            .chain(self.dir.iter().map(|path| Resource::dir(path.clone())))
            .collect()
    }
}

/// How a lease is acquired, shared by `claim` and `run`.
#[derive(Debug, Args)]
pub struct Timing {
    /// Lease duration in milliseconds (`run` renews it every ttl/3; keep it at 1000
    /// or more there: a renewal must land within ttl/3, and on a busy machine a
    /// shorter ttl is lost now and then with no rival)
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_TTL_MS, value_parser = parse_ttl, allow_negative_numbers = true)]
    pub ttl: u64,
    /// How long to wait for a held resource, in milliseconds, or `forever` (0: fail
    /// at once). On a terminal, a status line shows who holds it while waiting
    #[arg(long, value_name = "MS|forever", default_value = "0", value_parser = parse_wait, allow_negative_numbers = true)]
    pub wait: u64,
    /// Who is claiming, recorded for `status` and other claimants' error messages
    ///
    /// Offered only by the commands that write it (`claim`, `run`, and `break`, whose
    /// record names the breaker): elsewhere it would do nothing.
    #[arg(
        long,
        env = "FENCEPOST_OWNER",
        default_value = "cli",
        value_name = "NAME",
        value_parser = parse_owner
    )]
    pub owner: String,
    /// Wait out the ttl even when the holder's process provably died on this host
    /// (pure ttl semantics; by default such a holder is taken over at once)
    #[arg(long, env = "FENCEPOST_NO_DEAD_HOLDER_TAKEOVER", value_parser = clap::builder::FalseyValueParser::new())]
    pub no_dead_holder_takeover: bool,
    /// Exit with N instead of 3 when the resource is held (or `run` lost its
    /// lease), for scripts whose own command may exit 3 (flock's -E)
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = parse_exit_code)]
    pub conflict_exit_code: u8,
    /// Claim for this session: a name all of one agent's processes agree on (such
    /// as the agent's session id). A claim by the session that already holds the
    /// resource returns the same token, renewed; anyone else is refused as usual.
    /// Any process naming the session can renew and release its leases (`renew
    /// --session`, `release --session`), so knowing the id is acting as the session:
    /// others are shown only its tag
    #[arg(long, env = "FENCEPOST_SESSION", value_name = "ID", value_parser = parse_session)]
    pub session: Option<String>,
    /// A shared claim, for reading: many shared holders at once, none while an
    /// exclusive claim of the resource (or of a subtree around it, or a file in it)
    /// is held or waiting. A waiting exclusive claimer keeps new shared claimers
    /// out, so it waits only for the shared holders already in. Takes no --session
    #[arg(long, conflicts_with = "session")]
    pub shared: bool,
}

/// `--wait forever`.
pub const WAIT_FOREVER: u64 = u64::MAX;

impl Timing {
    /// The acquire options: ttl, wait and owner.
    pub fn options(&self) -> AcquireOptions {
        let options = AcquireOptions::new(self.ttl)
            .owner(self.owner.clone())
            .wait_ms(self.wait)
            .dead_holder_takeover(!self.no_dead_holder_takeover)
            .shared(self.shared);
        match &self.session {
            Some(session) => options.session(session.clone()),
            None => options,
        }
    }
}

/// What `run` does to its child when the lease is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnLoss {
    /// SIGTERM to the child's process group, SIGKILL after --grace (on Windows the
    /// child's job object is terminated at once, for `signal` too)
    Term,
    /// SIGTERM to the child's process group only; the child decides
    Signal,
    /// Leave the child running (run still exits 3)
    Keep,
}

/// Arguments of `claim`.
#[derive(Debug, Args)]
pub struct ClaimArgs {
    #[command(flatten)]
    pub target: Targets,
    #[command(flatten)]
    pub timing: Timing,
    /// Print one JSON object instead of the bare handle
    #[arg(long)]
    pub json: bool,
    /// With one --lock: claim one of N slots of it instead (at most N holders at
    /// once, e.g. 4 dev servers); prints `SLOT HANDLE` (act on it later with
    /// `--slot SLOT`)
    #[arg(long, value_name = "N", value_parser = parse_slots)]
    pub slots: Option<u32>,
    /// Keep the lease alive in the foreground until SIGINT or SIGTERM (Ctrl+C),
    /// then release it; the lease handle is printed first. Exit 3 if it is lost meanwhile
    #[arg(long)]
    pub hold: bool,
}

/// Arguments of `check`: a resource and a token.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub target: Target,
    /// The fencing token (or the whole handle `claim` printed: then its secret must
    /// be that of the tenure holding that token, too)
    #[arg(value_name = "TOKEN", value_parser = parse_checked, allow_negative_numbers = true)]
    pub token: Checked,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
}

/// What `renew` and `release` were given: the holder's handle, or (refused with
/// an explanation, exit 3) a bare token.
#[derive(Debug, Clone)]
pub enum Proof {
    /// TOKEN.SECRET, as `claim` printed it.
    Handle(LeaseHandle),
    /// A number alone: public, so it proves nothing.
    TokenOnly(u64),
    /// No handle: the lease the session holds (`--session`).
    Session(String),
}

impl Proof {
    /// What `renew` or `release` acts with: the handle (or token) when one is
    /// given, else the session; `None` when neither is.
    pub fn given(handle: &Option<Proof>, session: &Option<String>) -> Option<Proof> {
        handle
            .clone()
            .or_else(|| session.clone().map(Proof::Session))
    }

    /// The token presented (0 for a session, which presents none).
    pub fn token(&self) -> u64 {
        match self {
            Proof::Handle(handle) => handle.token(),
            Proof::TokenOnly(token) => *token,
            Proof::Session(_) => 0,
        }
    }
}

/// Arguments of `release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub target: Target,
    /// The lease handle `claim` printed (TOKEN.SECRET); without it, --session
    #[arg(value_name = "HANDLE", value_parser = parse_proof, allow_negative_numbers = true)]
    pub handle: Option<Proof>,
    /// Act on the lease this session holds (claimed with --session ID), instead of
    /// a handle
    #[arg(long, env = "FENCEPOST_SESSION", value_name = "ID", value_parser = parse_session)]
    pub session: Option<String>,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `renew`.
#[derive(Debug, Args)]
pub struct RenewArgs {
    #[command(flatten)]
    pub target: Target,
    /// The lease handle `claim` printed (TOKEN.SECRET); without it, --session
    #[arg(value_name = "HANDLE", value_parser = parse_proof, allow_negative_numbers = true)]
    pub handle: Option<Proof>,
    /// Act on the lease this session holds (claimed with --session ID), instead of
    /// a handle
    #[arg(long, env = "FENCEPOST_SESSION", value_name = "ID", value_parser = parse_session)]
    pub session: Option<String>,
    /// New lease duration in milliseconds [default: the lease's own ttl]
    #[arg(long, value_name = "MS", value_parser = parse_ttl, allow_negative_numbers = true)]
    pub ttl: Option<u64>,
    /// Print one JSON object instead of the bare handle
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub timing: Timing,
    /// With --lock: hold one of N slots of it instead (at most N holders at once);
    /// the child gets FENCEPOST_SLOT
    #[arg(long, value_name = "N", requires = "lock", conflicts_with = "slot", value_parser = parse_slots)]
    pub slots: Option<u32>,
    /// What to do with the child when the lease is lost
    #[arg(long, value_enum, value_name = "POLICY", default_value = "term")]
    pub on_loss: OnLoss,
    /// Milliseconds between SIGTERM and SIGKILL when the lease is lost (with
    /// --on-loss term)
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_GRACE_MS, value_parser = parse_grace, allow_negative_numbers = true)]
    pub grace: u64,
    /// The command to run while holding the lease, and its arguments (after `--`)
    #[arg(value_name = "COMMAND", required = true, trailing_var_arg = true)]
    pub command: Vec<OsString>,
}

/// Arguments of `break`.
#[derive(Debug, Args)]
pub struct BreakArgs {
    #[command(flatten)]
    pub target: Target,
    /// Instead of one resource: every lease in the store of the session with this
    /// tag (as `status` shows it) or this session id, for an agent that ended
    /// without releasing (its CLI crashed, so its session's end never ran)
    #[arg(long, value_name = "TAG|ID", group = "resource")]
    pub session: Option<String>,
    /// Why, in one line; recorded and shown to the holder and in `status`
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// Who breaks it, recorded with the reason (the login name, from $USER,
    /// $LOGNAME or %USERNAME%, is added when it differs)
    #[arg(
        long,
        env = "FENCEPOST_OWNER",
        default_value = "cli",
        value_name = "NAME",
        value_parser = parse_owner
    )]
    pub owner: String,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print a JSON array of entries instead of a table
    #[arg(long)]
    pub json: bool,
    /// Only the resources held now; the table's last line counts the others (a
    /// store keeps a row for every resource ever claimed: its last token)
    #[arg(long)]
    pub held: bool,
}

/// What `check` checks: a token, and the handle it came in when a whole one was
/// given.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The fencing token.
    pub number: u64,
    /// The whole handle, TOKEN.SECRET: its secret must be the tenure's too (two
    /// stores number their tokens apart, so a number alone can name another
    /// store's tenure; a breaker's stranded holder passed `check` by number).
    pub handle: Option<LeaseHandle>,
}

/// A token, or a whole handle ([`parse_token`]).
fn parse_checked(text: &str) -> Result<Checked, String> {
    Ok(Checked {
        number: parse_token(text)?,
        handle: text.contains('.').then(|| text.parse().ok()).flatten(),
    })
}

/// Any whole number is a well-formed token; 0 is never issued, so it simply never
/// passes (`check` exits 3 for it, as for any stale token: `check N-1` after the first
/// claim must say "stale", not "bad input").
fn parse_token(text: &str) -> Result<u64, String> {
    if text.contains('.') {
        // A whole handle: its number is the token (its secret is `Checked::handle`'s).
        return text.parse::<LeaseHandle>().map(|h| h.token()).map_err(|_| {
            "a token is a whole number (or the whole handle TOKEN.SECRET `claim` printed)".into()
        });
    }
    match text.parse::<u64>() {
        Ok(token) => Ok(token),
        Err(_) => Err(
            "a token is a whole number: the part of the handle `claim` printed (TOKEN.SECRET) before the dot, or the whole handle"
                .into(),
        ),
    }
}

/// A lease handle, or a bare token (refused later with the reason, exit 3: the
/// caller is told why a token is not enough rather than that its input is malformed).
fn parse_proof(text: &str) -> Result<Proof, String> {
    if let Ok(token) = text.parse::<u64>() {
        return Ok(Proof::TokenOnly(token));
    }
    // `claim --slots` prints `SLOT HANDLE`; passed whole, as one word (a new user:
    // told to pass what `claim` printed, which they had).
    if let Some((slot, handle)) = text.split_once(' ')
        && slot.parse::<u32>().is_ok()
        && handle.trim().parse::<LeaseHandle>().is_ok()
    {
        return Err(format!(
            "this is `SLOT HANDLE` as `claim --slots` printed it; pass them apart: \
             --slot {slot} {}",
            handle.trim()
        ));
    }
    text.parse::<LeaseHandle>()
        .map(Proof::Handle)
        .map_err(|e| format!("{e}; pass the whole handle `claim` printed, such as 7.3f9a…"))
}

/// The longest ttl a command accepts: 30 days, in ms. Longer was accepted up to
/// 2^64 − 1 ms ("until 584556019-04-03"), a lease nobody can outwait that only a
/// `break` ends (found by a breaker). A longer tenure is renewed: `run` and
/// `claim --hold` renew theirs.
pub(crate) const TTL_MAX_MS: u64 = 30 * 24 * 3_600_000;

fn parse_ttl(text: &str) -> Result<u64, String> {
    let too_long = || {
        format!(
            "the ttl is at most 30 days ({TTL_MAX_MS} ms); for longer, renew the lease \
             (`fencepost run` and `claim --hold` renew it for you)"
        )
    };
    match text.parse::<u64>() {
        Ok(0) => Err("the ttl must be at least 1 millisecond".into()),
        Ok(ttl) if ttl > TTL_MAX_MS => Err(too_long()),
        Ok(ttl) => Ok(ttl),
        // All digits, yet no u64: far above the most.
        Err(_) if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => Err(too_long()),
        Err(_) => Err("the ttl is a positive whole number of milliseconds, such as 30000".into()),
    }
}

fn parse_wait(text: &str) -> Result<u64, String> {
    if text.trim().eq_ignore_ascii_case("forever") {
        return Ok(WAIT_FOREVER);
    }
    text.parse::<u64>().map_err(|_| {
        "the wait is a whole number of milliseconds, 0 or more, such as 60000, or `forever`"
            .to_string()
    })
}

fn parse_grace(text: &str) -> Result<u64, String> {
    text.parse::<u64>().map_err(|_| {
        "the grace is a whole number of milliseconds, 0 or more, such as 5000".to_string()
    })
}

fn parse_exit_code(text: &str) -> Result<u8, String> {
    match text.parse::<u8>() {
        Ok(0) => Err("the conflict exit code must not be 0, which means success".into()),
        Ok(code) => Ok(code),
        Err(_) => Err("the conflict exit code is a whole number from 1 to 255".into()),
    }
}

fn parse_slots(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if (1..=fencepost::SLOTS_MAX).contains(&n) => Ok(n),
        _ => Err(format!(
            "slots are counted from 1 to {}; pass a whole number such as 4",
            fencepost::SLOTS_MAX
        )),
    }
}

fn parse_session(text: &str) -> Result<String, String> {
    match fencepost::check_session(text) {
        Ok(()) => Ok(text.to_string()),
        Err(fencepost::Error::InvalidArgument(problem)) => Err(problem),
        Err(other) => Err(other.to_string()),
    }
}

fn parse_owner(text: &str) -> Result<String, String> {
    match fencepost::check_owner(text) {
        Ok(()) => Ok(text.to_string()),
        Err(fencepost::Error::InvalidArgument(problem)) => Err(problem),
        Err(other) => Err(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Every command path below `fencepost` (`["hooks", "install"]`), parents first.
    fn command_paths(command: &clap::Command, path: &[String], out: &mut Vec<Vec<String>>) {
        for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
            let mut here = path.to_vec();
            here.push(sub.get_name().to_string());
            out.push(here.clone());
            command_paths(sub, &here, out);
        }
    }

    /// The long help of `fencepost PATH… --help`, as the binary prints it.
    fn long_help(path: &[String]) -> String {
        let argv = std::iter::once("fencepost".to_string())
            .chain(path.iter().cloned())
            .chain(std::iter::once("--help".to_string()));
        match Cli::command().try_get_matches_from(argv) {
            Err(help) if help.kind() == clap::error::ErrorKind::DisplayHelp => {
                help.render().to_string()
            }
            other => panic!("`{path:?} --help` did not print help: {other:?}"),
        }
    }

    /// The references in one help text that do not resolve: a `"Section" below` with
    /// no such section after it, a `"Section" … of \`fencepost --help\`` missing
    /// there, `see --option` naming no option of the command, and a backticked
    /// `fencepost A B --opt` or `A --opt` naming a command or option that does not
    /// exist.
    fn dangling(help: &str, top: &str, root: &clap::Command, path: &[String]) -> Vec<String> {
        let mut problems = Vec::new();
        let lines_after = |text: &str, name: &str| {
            text.lines().any(|line| {
                line.trim_start().starts_with(&format!("{name} "))
                    || line.trim_start().starts_with(&format!("{name}:"))
            })
        };
        let mut rest = help;
        while let Some(at) = rest.find('"') {
            let after = &rest[at + 1..];
            let Some(end) = after.find('"') else { break };
            let name = &after[..end];
            let tail = &after[end + 1..];
            let words: Vec<&str> = tail.split_whitespace().take(6).collect();
            if name.chars().next().is_some_and(char::is_uppercase) && !name.contains(' ') {
                if words.first() == Some(&"below") || words.first() == Some(&"below],") {
                    if !lines_after(tail, name) {
                        problems.push(format!("\"{name}\" below: no such section below"));
                    }
                } else if words.first() == Some(&"section")
                    && words.iter().any(|w| w.starts_with("`fencepost"))
                    && !lines_after(top, name)
                {
                    problems.push(format!("\"{name}\" section: not in `fencepost --help`"));
                }
            }
            rest = tail;
        }
        // The command a path names, and whether it (or the root, for globals) has
        // the long option `--name`.
        let find = |path: &[String]| {
            let mut command = root;
            for name in path {
                command = command.find_subcommand(name)?;
            }
            Some(command)
        };
        let has_option = |command: &clap::Command, name: &str| {
            command
                .get_arguments()
                .chain(root.get_arguments())
                .any(|arg| arg.get_long() == Some(name) || (name == "help" || name == "version"))
        };
        let own = find(path).expect("walked from the root");
        for (i, _) in help.match_indices("see --") {
            let name: String = help[i + 6..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if !has_option(own, &name) {
                problems.push(format!("see --{name}: no such option"));
            }
        }
        for span in help.split('`').skip(1).step_by(2) {
            let mut words = span.split_whitespace().peekable();
            let mut command_path: Vec<String> = Vec::new();
            if words.peek() == Some(&"fencepost") {
                words.next();
                let Some(first) = words.peek() else { continue };
                if !first.starts_with('-') && root.find_subcommand(first).is_none() {
                    problems.push(format!("`{span}`: no command {first}"));
                    continue;
                }
            } else if words
                .peek()
                .is_none_or(|w| root.find_subcommand(w).is_none())
            {
                continue;
            }
            while let Some(word) = words.peek() {
                let command = find(&command_path).expect("resolved so far");
                if word.starts_with('-') || command.get_subcommands().next().is_none() {
                    break;
                }
                if command.find_subcommand(word).is_none() {
                    problems.push(format!("`{span}`: no command {word}"));
                    break;
                }
                command_path.push(word.to_string());
                words.next();
            }
            let Some(command) = find(&command_path) else {
                continue;
            };
            for word in words.take_while(|w| !["|", ">", "&&", ";"].contains(w)) {
                if let Some(name) = word.strip_prefix("--") {
                    let name = name.split('=').next().unwrap_or(name);
                    if !name.is_empty() && !has_option(command, name) {
                        problems.push(format!("`{span}`: {} has no --{name}", command.get_name()));
                    }
                }
            }
        }
        problems
    }

    /// Every command's --help resolves what it points to (issue 15's `hook --help`
    /// pointed to a "Store" section only other commands had).
    #[test]
    fn every_help_reference_resolves() {
        let root = Cli::command();
        let top = long_help(&[]);
        let mut paths = vec![Vec::new()];
        command_paths(&root, &[], &mut paths);
        assert!(paths.len() > 14, "walked only {paths:?}");
        let mut problems = Vec::new();
        for path in &paths {
            for problem in dangling(&long_help(path), &top, &root, path) {
                problems.push(format!("fencepost {} --help: {problem}", path.join(" ")));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// The README's synopsis (the `text` block of "Command line" whose lines start
    /// with `fencepost `) names every command, every command below it and every
    /// option of each: the README and the clap definition do not drift apart.
    #[test]
    fn the_readme_synopsis_names_every_command_and_option() {
        let readme = include_str!("../../README.md");
        let section = &readme[readme
            .find("\n## Command line")
            .expect("a Command line section")..];
        let block = section
            .split("```text\n")
            .skip(1)
            .map(|rest| rest.split("```").next().unwrap_or(rest))
            .find(|block| block.starts_with("fencepost "))
            .expect("a synopsis block of `fencepost …` lines");
        // Each command's lines: its own (and their indented continuations), lines
        // shared with others (`claim and run:`), and the `global:` lines.
        let mut lines_of: std::collections::HashMap<String, String> = Default::default();
        let mut global = String::new();
        let mut current: Vec<String> = Vec::new();
        for line in block.lines() {
            if let Some(rest) = line.strip_prefix("fencepost ") {
                let name = rest.split_whitespace().next().unwrap_or("").to_string();
                current = vec![name];
            } else if let Some((names, _)) = line.split_once(':').filter(|_| !line.starts_with(' '))
            {
                current = names
                    .split([' ', ','])
                    .filter(|w| !w.is_empty() && *w != "and")
                    .map(String::from)
                    .collect();
                if current == ["global"] {
                    current.clear();
                    global.push_str(line);
                    continue;
                }
            } else if current.is_empty() {
                global.push_str(line);
                continue;
            }
            for name in &current {
                let text = lines_of.entry(name.clone()).or_default();
                text.push_str(line);
                text.push('\n');
            }
        }
        let mut missing = Vec::new();
        let root = Cli::command();
        for command in root.get_subcommands().filter(|c| c.get_name() != "help") {
            let name = command.get_name();
            let Some(text) = lines_of.get(name) else {
                missing.push(format!("fencepost {name}"));
                continue;
            };
            let mut arguments: Vec<&clap::Arg> = command.get_arguments().collect();
            for sub in command.get_subcommands().filter(|c| c.get_name() != "help") {
                if !text.contains(sub.get_name()) {
                    missing.push(format!("fencepost {name} {}", sub.get_name()));
                }
                arguments.extend(sub.get_arguments());
            }
            for arg in arguments {
                let Some(long) = arg.get_long() else { continue };
                if ["help", "version"].contains(&long) {
                    continue;
                }
                let flag = format!("--{long}");
                let named = |text: &str| {
                    text.match_indices(&flag).any(|(i, _)| {
                        !text[i + flag.len()..]
                            .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-')
                    })
                };
                let in_global = named(&global) && global.contains(name);
                if !named(text) && !in_global {
                    missing.push(format!("fencepost {name} {flag}"));
                }
            }
        }
        for arg in root.get_arguments() {
            if let Some(long) = arg.get_long().filter(|l| !["help", "version"].contains(l))
                && !global.contains(&format!("--{long}"))
            {
                missing.push(format!("global --{long}"));
            }
        }
        missing.dedup();
        assert!(
            missing.is_empty(),
            "the README synopsis lacks: {}",
            missing.join(", ")
        );
    }

    #[test]
    fn run_takes_the_command_verbatim_after_its_first_word() {
        // `run` passes everything from COMMAND on to the child, flags included.
        let cli = Cli::try_parse_from([
            "fencepost",
            "run",
            "--lock",
            "x",
            "--",
            "sh",
            "-c",
            "exit 3",
            "--ttl",
            "5",
        ])
        .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("parsed as another command")
        };
        assert_eq!(run.timing.ttl, DEFAULT_TTL_MS);
        assert_eq!(run.command, ["sh", "-c", "exit 3", "--ttl", "5"]);
    }
}

//! What the commands print: JSON objects, the status table, human durations, and
//! the one-line messages of refusals and errors.

use std::io::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use clap::CommandFactory;
use fencepost::{ClaimState, Error, Holder, Key, Lease, StatusEntry};
use serde::Serialize;

use crate::Failure;

/// Wall-clock milliseconds since the Unix epoch (the clock records are stamped with).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `at_ms - now` as a signed number of milliseconds.
pub fn until_ms(at_ms: u64, now: u64) -> i64 {
    (at_ms as i128 - now as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// A duration for the status table: `29s`, `-3s`, `4m05s`, `2h03m`.
pub fn human(ms: i64) -> String {
    // Whole seconds rounded down: 29.9s is `29s`, and 0.2s ago is `-1s` (expired,
    // never shown as a misleading `0s`).
    let whole = ms.div_euclid(1000);
    let sign = if whole < 0 { "-" } else { "" };
    let secs = whole.unsigned_abs();
    match secs {
        0..60 => format!("{sign}{secs}s"),
        60..3600 => format!("{sign}{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{sign}{}h{:02}m", secs / 3600, secs % 3600 / 60),
    }
}

/// A duration for messages, one decimal under a minute: `29.1s`, `-0.4s`.
pub fn human_precise(ms: i64) -> String {
    if ms.unsigned_abs() < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        human(ms)
    }
}

/// Writes `text` and a newline to stdout. A closed pipe is reported as
/// [`Failure::BrokenPipe`], which ends the program quietly.
pub fn emit(text: &str) -> Result<(), Failure> {
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{text}")
        .and_then(|()| stdout.flush())
        .map_err(|e| {
            if e.kind() == io::ErrorKind::BrokenPipe {
                Failure::BrokenPipe
            } else {
                Failure::Error(format!("cannot write to stdout: {e}"))
            }
        })
}

/// `fencepost completions SHELL`: the completion script, generated from the same clap
/// definition that parses the command line.
pub fn completions(shell: clap_complete::Shell) -> Result<std::process::ExitCode, Failure> {
    let mut script = Vec::new();
    clap_complete::generate(
        shell,
        &mut crate::args::Cli::command(),
        "fencepost",
        &mut script,
    );
    write_stdout(&script)
}

/// `fencepost man [COMMAND…]`: a manual page in roff, generated from the clap
/// definition: the main one, or `fencepost-claim(1)`, `fencepost-hooks-install(1)`
/// and so on, which the main page's list of commands names.
pub fn man_page(path: &[String]) -> Result<std::process::ExitCode, Failure> {
    // No `help` command in the pages: each page is the help.
    let mut command = without_help_commands(crate::args::Cli::command());
    // Built, so each command carries the global options it accepts.
    command.build();
    let mut name = String::from("fencepost");
    for word in path {
        let Some(sub) = command
            .get_subcommands()
            .find(|sub| sub.get_name() == word && sub.get_name() != "help")
            .cloned()
        else {
            let known: Vec<_> = command
                .get_subcommands()
                .map(|sub| sub.get_name().to_string())
                .filter(|sub| sub != "help")
                .collect();
            return Err(Failure::Error(format!(
                "`{name}` has no command {word:?}; pages exist for: {}",
                known.join(", ")
            )));
        };
        name = format!("{name}-{}", sub.get_name());
        command = sub;
    }
    let mut page = Vec::new();
    clap_mangen::Man::new(command.name(name))
        .render(&mut page)
        .map_err(|e| Failure::Error(format!("cannot render the manual page: {e}")))?;
    write_stdout(&page)
}

/// `command` and every command below it without clap's `help` command.
fn without_help_commands(command: clap::Command) -> clap::Command {
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    names
        .into_iter()
        .fold(command.disable_help_subcommand(true), |command, name| {
            command.mut_subcommand(name, without_help_commands)
        })
}

fn write_stdout(bytes: &[u8]) -> Result<std::process::ExitCode, Failure> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(|e| {
            if e.kind() == io::ErrorKind::BrokenPipe {
                Failure::BrokenPipe
            } else {
                Failure::Error(format!("cannot write to stdout: {e}"))
            }
        })?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// Writes `value` as one line of JSON to stdout.
pub fn emit_json(value: &impl Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string(value)
        .map_err(|e| Failure::Error(format!("cannot encode the JSON output: {e}")))?;
    emit(&text)
}

/// Writes one line to stderr, prefixed `fencepost: `, on one line whatever the
/// message contains; a message that already begins with `fencepost ` ("fencepost
/// blocked this edit…", "fencepost guard cannot…") is not prefixed again. Never
/// panics (a closed stderr is ignored).
pub fn report(message: &str) {
    let line = message.replace(['\n', '\r'], " ");
    let prefix = if line.starts_with("fencepost ") {
        ""
    } else {
        "fencepost: "
    };
    let _ = writeln!(io::stderr().lock(), "{prefix}{line}");
}

/// A lease, as `claim --json` and `renew --json` print it.
#[derive(Debug, Serialize)]
pub struct LeaseJson<'a> {
    pub ok: bool,
    /// `lock:NAME` or `file:/absolute/path`.
    pub resource: String,
    /// The fencing token: public, what guarded writes check.
    pub token: u64,
    /// The tenure's secret: the proof of holding that renew and release need.
    pub secret: &'a str,
    /// `token.secret`, what `renew` and `release` take.
    pub handle: String,
    pub generation: u64,
    pub key: &'a Key,
    pub label: &'a str,
    pub owner: &'a str,
    /// The tenure's unique holder id.
    pub holder: &'a str,
    pub granted_at_ms: u64,
    pub expires_at_ms: u64,
    pub ttl_ms: u64,
    /// The session that claimed the lease, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<&'a str>,
    /// True when the claim re-entered the lease its session already held (same
    /// token, renewed).
    pub reentered: bool,
    /// The slot held (from 1), for a claim with `--slots`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot: Option<u32>,
    /// True for a shared claim (`--shared`): it authorizes reading.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
    /// The store's locator (its directory).
    pub store: &'a str,
}

impl<'a> LeaseJson<'a> {
    pub fn new(lease: &'a Lease, store: &'a str) -> Self {
        LeaseJson {
            ok: true,
            resource: resource_name(lease.resource().kind(), lease.label()),
            token: lease.token(),
            secret: lease.secret().expose(),
            handle: lease.handle().to_string(),
            generation: lease.generation(),
            key: lease.key(),
            label: lease.label(),
            owner: lease.owner(),
            holder: lease.holder_id(),
            granted_at_ms: lease.granted_at_ms(),
            expires_at_ms: lease.expires_at_ms(),
            // What the newest record grants: a session's renewal keeps a longer
            // end a sibling was promised, so the ttl asked for may be shorter (a
            // new user: `renew --session --ttl 1000 --json` said 1000 with the
            // lease ending in 60 s).
            ttl_ms: lease.expires_at_ms().saturating_sub(lease.granted_at_ms()),
            session: lease.session(),
            reentered: lease.reentered(),
            slot: lease.slot(),
            shared: lease.shared(),
            store,
        }
    }
}

/// The answer of `check --json` and `release --json`, and of every command that
/// was refused (exit 3) with `--json`.
#[derive(Debug, Serialize)]
pub struct VerdictJson<'a> {
    pub ok: bool,
    pub resource: String,
    /// The token presented (absent for `claim`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// Why it was refused: `held`, `stale`, `not_holder`, `superseded`, `expired`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// Who holds the resource, when someone does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<&'a Holder>,
    /// The same one-line message as on stderr.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'a str>,
    pub store: &'a str,
}

/// `lock:NAME` or `file:PATH`.
pub fn resource_name(kind: &str, label: &str) -> String {
    format!("{kind}:{}", printable(label))
}

/// `text` with control characters escaped (`\u{1b}`): labels and owners come from
/// records anyone could have written, and must not drive the reader's terminal
/// (breaker trial: an owner with ANSI escapes was printed raw). So are the line and
/// paragraph separators and the bidirectional controls, which break a one-line
/// message or reorder what it shows (a breaker: an owner `ci\u{2028}bot` split a
/// hook's refusal in two). Pinned by `output::tests::printable_escapes_what_breaks_a_line`.
pub fn printable(text: &str) -> String {
    let unsafe_char = |c: char| {
        c.is_control()
            || matches!(
                c,
                '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
            )
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    };
    if !text.chars().any(unsafe_char) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if unsafe_char(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// An etcd store's failure and what to do about it: a member that answered gets no
/// "check that the endpoints are reachable" (a full quota was told so: a breaker),
/// and "the outcome is unknown" is said of creates only (a read that timed out
/// changed nothing).
fn etcd_error(e: &fencepost::BackendError) -> String {
    let mut text = e.to_string();
    if e.operation != "create" {
        text = text.replace("; the outcome is unknown", "");
    }
    let next = if text.contains("space exceeded") {
        "the etcd cluster is out of space (its quota): an operator must compact and \
         defragment it, or raise --quota-backend-bytes"
    } else if text.contains("etcd answered HTTP") {
        "the etcd member answered with that error; check the store URL (--store or \
         FENCEPOST_STORE) names etcd's client port"
    } else {
        "check that the etcd endpoints of the store (--store or FENCEPOST_STORE) are \
         reachable"
    };
    format!("store error: {}; {next}", printable(&text))
}

/// `db:migrations is held by cli (pid 123, token 4) until 2026-12-01T12:30:05Z (in 29.1s)`.
pub fn held_message(label: &str, holder: &Holder) -> String {
    format!("{} is {}", printable(label), in_the_way(holder, false))
}

/// `held by HOLDER`; for a holder of another resource in the way (a subtree above,
/// a claim inside a subtree) `blocked by dir PATH, held by HOLDER`; for a claimer
/// waiting for a directory above, `kept free for dir PATH, which HOLDER is waiting
/// for`; for a file claimed under another of its names (`of_file`: the refused
/// resource is a file too), `held as PATH (one file under two names …) by HOLDER`.
fn in_the_way(holder: &Holder, of_file: bool) -> String {
    match (holder.in_the_way.as_deref(), holder.waiting) {
        (Some(other @ fencepost::Resource::File(_)), false) if of_file => format!(
            "held as {} (one file under two names: a hard link, or moved since) by {}",
            printable(&other.target()),
            describe_holder(holder)
        ),
        (Some(other), true) => format!(
            "kept free for {} {}, which {} is waiting for",
            other.kind(),
            printable(&other.target()),
            describe_holder(holder)
        ),
        (None, true) => format!(
            "kept free for {}, who is waiting for it",
            describe_holder(holder)
        ),
        (Some(other), false) => format!(
            "blocked by {} {}, held by {}",
            other.kind(),
            printable(&other.target()),
            describe_holder(holder)
        ),
        (None, false) => format!("held by {}", describe_holder(holder)),
    }
}

/// The refusal of `claim` or `run` when the resource stayed held: who holds it and
/// until when, and the next steps (written for a model as much as for a person;
/// never "release it yourself"). With a wait, it says that it waited and for how
/// long (`waited_ms`, measured). When another resource is in the way (a subtree
/// above it, a claim inside it), that resource is named and the `break` suggested
/// is of it; for a claimer waiting for it, there is nothing to break.
/// `store`: the store the holder's claim is in when it is not the command's own
/// (a claim made there before the layout changed), so the `break` suggested is
/// made there.
pub fn held_refusal(
    resource: &fencepost::Resource,
    holder: &Holder,
    wait_ms: u64,
    waited_ms: u64,
    store: Option<&str>,
) -> String {
    // Under `run --shared`: the run holds a reader's lease, whose token passes no
    // `check`, and a claim to write waits for every reader, the run included (a
    // breaker: its command was told it held the resource and could write). Which
    // reader the refusal names does not matter: the run is one of them.
    let shared_run = std::env::var_os("FENCEPOST_SHARED").is_some();
    if shared_run
        && let Some(dir) = holder
            .in_the_way
            .as_deref()
            .filter(|dir| matches!(dir, fencepost::Resource::Dir(_)) && under_own_run(dir))
    {
        return format!(
            "{} is inside {}, which the `fencepost run --shared` this command runs under \
             holds as a reader: this command may read it, but a claim to write it waits for \
             every reader of {}, this run's too, so it cannot be made from inside the run. \
             To write, run the command under an exclusive claim instead (without --shared)",
            printable(&shown_name(resource)),
            printable(&dir.target()),
            printable(&dir.target()),
        );
    }
    if shared_run && under_own_run(resource) {
        return format!(
            "{} is shared by the `fencepost run --shared` this command runs under, a \
             reader's lease (FENCEPOST_TOKEN passes no `check`): this command may read it, \
             but a claim to write it waits for every reader, this run's too, so it cannot \
             be made from inside the run. To write, run the command under an exclusive \
             claim instead (without --shared)",
            printable(&shown_name(resource)),
        );
    }
    if let Some(dir) = holder
        .in_the_way
        .as_deref()
        .filter(|dir| matches!(dir, fencepost::Resource::Dir(_)) && held_by_own_run(dir, holder))
    {
        return format!(
            "{} is inside {}, which the `fencepost run` this command runs under holds (token \
             {}, in FENCEPOST_TOKEN): this command may write it under that claim already. For \
             its own claims of what is inside to pass, start the run with --session ID (its \
             command's claims then act for the same session)",
            printable(&shown_name(resource)),
            printable(&dir.target()),
            holder.token
        );
    }
    if held_by_own_run(resource, holder) {
        return format!(
            "{} is held by the `fencepost run` this command runs under (token {}, in \
             FENCEPOST_TOKEN): this command holds it already. Use that token where a write \
             is checked, and FENCEPOST_LEASE to renew or release it; a claim of it from \
             inside the run waits for the run itself",
            printable(&shown_name(resource)),
            holder.token
        );
    }
    let steps = next_steps_for(resource, holder, wait_ms, store);
    let of_file = matches!(resource, fencepost::Resource::File(_));
    if wait_ms == 0 {
        return format!(
            "{} is {}; {steps}",
            printable(&shown_name(resource)),
            in_the_way(holder, of_file)
        );
    }
    let waited = human_precise(i64::try_from(waited_ms).unwrap_or(i64::MAX));
    if holder.in_the_way.is_some() || holder.waiting {
        return format!(
            "gave up after {waited} waiting for {} ({}); {steps}",
            printable(&shown_name(resource)),
            in_the_way(holder, of_file),
        );
    }
    format!(
        "gave up after {waited} waiting for {} (held by {}, {}pid {}, token {}, until {}, expires in {}); {steps}",
        printable(&shown_name(resource)),
        printable(&holder.owner),
        session_clause(holder),
        holder.pid,
        holder.token,
        fencepost::utc_timestamp(holder.expires_at_ms),
        human_precise(until_ms(holder.expires_at_ms, now_ms())),
    )
}

/// Whether `holder` is the `fencepost run` this process runs under: the
/// environment `run` gives its command names the holder's token
/// (`FENCEPOST_TOKEN`) and this resource (`FENCEPOST_RESOURCE`, as `run` spells it).
/// A child that claimed its own parent's lock was told "held by cli (pid …)" with
/// the usual advice (a breaker).
fn held_by_own_run(resource: &fencepost::Resource, holder: &Holder) -> bool {
    let token = std::env::var("FENCEPOST_TOKEN").ok();
    if token.as_deref().map(str::trim) != Some(holder.token.to_string().as_str()) {
        return false;
    }
    std::env::var_os("FENCEPOST_SHARED").is_none() && under_own_run(resource)
}

/// Whether this process runs under a `fencepost run` of `resource`
/// (`FENCEPOST_RESOURCE`, as `run` spells it, or another spelling of the same
/// resource: a lock name's case or blanks, another path or hard link of the file —
/// a breaker: those got the generic refusal); never for a slot.
fn under_own_run(resource: &fencepost::Resource) -> bool {
    let (Some(named), Ok(identity)) = (std::env::var_os("FENCEPOST_RESOURCE"), resource.identity())
    else {
        return false;
    };
    if matches!(resource, fencepost::Resource::Slot(..)) {
        return false;
    }
    if named == crate::run::resource_variable(resource, &identity) {
        return true;
    }
    let Some(run) = named.to_str().and_then(|named| {
        let (kind, target) = named.split_once(':')?;
        match kind {
            "lock" => Some(fencepost::Resource::lock(target)),
            "file" => Some(fencepost::Resource::file(target)),
            "dir" => Some(fencepost::Resource::dir(target)),
            _ => None,
        }
    }) else {
        return false;
    };
    run.identity().is_ok_and(|run| {
        run.key == identity.key || (run.file_id.is_some() && run.file_id == identity.file_id)
    })
}

/// The name a refusal shows for `resource`: a lock's as `status` shows it
/// (trimmed, invisible characters gone), not as typed (a new user's `  C1  `
/// came back with its blanks); a path as given.
fn shown_name(resource: &fencepost::Resource) -> String {
    match resource {
        fencepost::Resource::Lock(_) => resource
            .identity()
            .map(|identity| identity.label)
            .unwrap_or_else(|_| resource.target()),
        _ => resource.target(),
    }
}

/// [`next_steps`] for a refusal by `holder`: a `break` of the resource in the way,
/// and none for a waiting claimer (it holds nothing yet).
fn next_steps_for(
    resource: &fencepost::Resource,
    holder: &Holder,
    wait_ms: u64,
    store: Option<&str>,
) -> String {
    if holder.waiting {
        let wait = if wait_ms == 0 {
            "pass --wait MS to wait"
        } else {
            "wait longer with --wait MS or --wait forever"
        };
        return format!(
            "{wait}: the waiting claim goes first and this one after it; or work on something else meanwhile"
        );
    }
    if let Some(v) = holder.newer_format() {
        return newer_format_steps(v, wait_ms);
    }
    let command = break_command_in(holder.in_the_way.as_deref().unwrap_or(resource), store);
    next_steps_with(&command, wait_ms)
}

/// What a caller refused by a record of a newer format `v` can do: wait, do other
/// work, or have it ended by the newer fencepost that wrote it (this version's
/// `break` refuses it). Pinned by
/// `cli/tests/bad_input.rs::a_newer_format_holder_is_not_sent_to_break`.
fn newer_format_steps(v: u64, wait_ms: u64) -> String {
    let wait = if wait_ms == 0 {
        "pass --wait MS to wait for it"
    } else {
        "wait longer with --wait MS or --wait forever"
    };
    format!(
        "{wait}, work on something else meanwhile, or, if it must end sooner, ask a human to \
         end it with the newer fencepost that wrote it (format v{v}; this version's `fencepost \
         break` cannot)"
    )
}

/// What a caller refused by a live holder can do: wait, do other work, or ask a
/// human to run `command` (the `break` of the lease).
fn next_steps_with(command: &str, wait_ms: u64) -> String {
    let wait = if wait_ms == 0 {
        "pass --wait MS to wait for it"
    } else {
        "wait longer with --wait MS or --wait forever"
    };
    format!(
        "{wait}, work on something else meanwhile, or, if its holder is gone or stuck, ask a human to run `{command}`"
    )
}

/// [`break_command`] made in `store` when it is given (`--store DIR`): the
/// holder's claim is in a store the location rule no longer picks.
fn break_command_in(resource: &fencepost::Resource, store: Option<&str>) -> String {
    let command = break_command(resource);
    match store {
        Some(store) => command.replacen(
            "fencepost break",
            &format!("fencepost --store {} break", shell_word(store)),
            1,
        ),
        None => command,
    }
}

/// [`next_steps`] where the resource is known only by its label.
const NEXT_STEPS_ANY: &str = "claim it with --wait MS to wait for it, work on something else meanwhile, or, if its holder is gone or stuck, ask a human to run `fencepost break`";

/// `fencepost break --lock NAME --reason '…'` for `resource` (a slot:
/// `--lock NAME --slot N`).
fn break_command(resource: &fencepost::Resource) -> String {
    let (kind, target, slot) = match resource {
        fencepost::Resource::Slot(name, slot) => ("lock", name.clone(), format!(" --slot {slot}")),
        // A path as the claimer spelled it means something only in its working
        // directory; the human asked to break may be elsewhere (a new user was
        // told `break --dir src`). Resolved as its key is (`..` and links), so the
        // command names the file the human will look at (a breaker was told
        // `break --file /repo/src/missing/../alias/b.rs`).
        fencepost::Resource::File(path) | fencepost::Resource::Dir(path) => (
            resource.kind(),
            resource
                .identity()
                .ok()
                .and_then(|identity| identity.path)
                .or_else(|| std::path::absolute(path).ok())
                .map_or_else(|| resource.target(), |path| path.display().to_string()),
            String::new(),
        ),
        _ => (resource.kind(), resource.target(), String::new()),
    };
    let quoted = shell_word(&target);
    // A name that begins with `-` would be read as an option: attach it.
    let separator = if target.starts_with('-') { "=" } else { " " };
    format!("fencepost break --{kind}{separator}{quoted}{slot} --reason '…'")
}

/// `text` as one shell word: as is when it needs no quoting, in `'…'` otherwise,
/// and in `$'…'` when it holds a control character.
fn shell_word(text: &str) -> String {
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.:/@+,=".contains(c))
    {
        printable(text)
    } else if text.chars().any(char::is_control) {
        // A control character cannot be typed inside '…': bash's and zsh's $'…',
        // whose escapes name it (a breaker: `'n\u{a}l'` named another file).
        ansi_c_quoted(text)
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// `text` as one word of bash's and zsh's ANSI-C quoting, `$'…'`: control
/// characters as `\n`, `\t` or `\xHH` (`\uHHHH` beyond ASCII), `\` and `'`
/// escaped, everything else as is.
fn ansi_c_quoted(text: &str) -> String {
    let mut quoted = String::from("$'");
    for c in text.chars() {
        match c {
            '\\' => quoted.push_str("\\\\"),
            '\'' => quoted.push_str("\\'"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            '\r' => quoted.push_str("\\r"),
            // `\xHH` is one byte: only for ASCII; a C1 control (U+0080 to
            // U+009F) is two bytes in UTF-8, which `\uHHHH` gives (a breaker).
            c if c.is_control() && c.is_ascii() => {
                quoted.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('\'');
    quoted
}

/// `session 0ed754fc9054df0b, ` when the holder claimed for a session (named by its
/// tag, never its id), else nothing.
fn session_clause(holder: &Holder) -> String {
    holder
        .session_to_show()
        .map(|tag| format!("session {}, ", printable(tag.as_str())))
        .unwrap_or_default()
}

/// `cli (pid 123, token 4) until 2026-12-01T12:30:05Z (in 29.1s)`; with a session,
/// `cli (session 0ed754fc9054df0b, pid 123, token 4) until …`.
pub fn describe_holder(holder: &Holder) -> String {
    format!(
        "{} ({}pid {}, token {}) until {} (in {})",
        printable(&holder.owner),
        session_clause(holder),
        holder.pid,
        holder.token,
        fencepost::utc_timestamp(holder.expires_at_ms),
        human_precise(until_ms(holder.expires_at_ms, now_ms()))
    )
}

/// The machine-readable reason for a refusal.
pub fn refusal_reason(error: &Error) -> Option<&'static str> {
    match error {
        Error::Held { .. } => Some("held"),
        Error::NotHolder { .. } | Error::NotSessionHolder { .. } => Some("not_holder"),
        Error::Broken { .. } => Some("broken"),
        Error::Released { .. } => Some("released"),
        Error::NotHeld { .. } => Some("not_held"),
        Error::Superseded { .. } => Some("superseded"),
        Error::Expired { .. } => Some("expired"),
        _ => None,
    }
}

/// The holder named in a refusal, if any.
pub fn refusal_holder(error: &Error) -> Option<&Holder> {
    match error {
        Error::Held { holder, .. } => Some(holder),
        Error::NotHolder { newest, .. } => newest.as_deref(),
        Error::NotSessionHolder { newest, .. } => newest.as_deref(),
        _ => None,
    }
}

/// The one-line message for a core error, with what to do about it where there is
/// something to do.
pub fn describe_error(error: &Error) -> String {
    describe_with(error, NEXT_STEPS_ANY)
}

/// [`describe_error`] for an error about `resource`: a refusal's next steps name
/// the whole `break` command (`fencepost break --lock x --reason '…'`), as `claim`'s
/// do, where the label alone could only say `fencepost break` (found by a new
/// user: `renew` and `release` refusals named no resource;
/// `cli/tests/polish.rs::a_refused_renew_names_the_whole_break_command`).
pub fn describe_error_for(error: &Error, resource: &fencepost::Resource) -> String {
    let next = format!(
        "claim it with --wait MS to wait for it, work on something else meanwhile, or, if its holder is gone or stuck, ask a human to run `{}`",
        break_command(resource)
    );
    describe_with(error, &next)
}

/// The message for `error`, with `next_steps_any` as what to do about a refusal.
fn describe_with(error: &Error, next_steps_any: &str) -> String {
    match error {
        Error::Held { label, holder } => held_message(label, holder),
        Error::NotHolder {
            label,
            token,
            newest,
        } => match newest {
            // The token is the holder's, but the secret was not: a token is public.
            Some(holder) if holder.token == *token => format!(
                "token {token} is the lease of {} on {label} (pid {}, until {}); renewing or releasing it needs the lease handle (TOKEN.SECRET) that claim printed to its holder alone: a token is public, not a key. Nothing was changed. To use {label} yourself: {}",
                printable(&holder.who()),
                holder.pid,
                fencepost::utc_timestamp(holder.expires_at_ms),
                next_steps_any
            ),
            Some(holder) => format!(
                "token {token} does not hold {label}: it is held by {}; nothing was changed. Your lease ended: stop writing to {label}; to use it again, {}",
                describe_holder(holder),
                next_steps_any
            ),
            None => format!(
                "token {token} does not hold {label}: it was released, expired or superseded; claim it again for a new token"
            ),
        },
        Error::NotSessionHolder {
            label,
            session,
            newest,
        } => match newest {
            // The tag `status` shows for the holder's session, passed as a session id:
            // a tag names a session, it does not prove it (a breaker: "session T holds
            // no lease …: it is held by … (session T, …)").
            Some(holder)
                if holder
                    .session
                    .as_deref()
                    .is_some_and(|tag| tag.as_str() == session.trim()) =>
            {
                format!(
                    "{} is the session tag `status` shows for the holder of {label}, not a session id: a tag names a session without proving it, so it renews and releases nothing; nothing was changed. Only that session's own processes, which know its id, act for it. To use {label} yourself: {}",
                    printable(session),
                    next_steps_any
                )
            }
            Some(holder) => format!(
                "session {} holds no lease on {label}: it is held by {}; nothing was changed. To use {label} yourself: {}",
                printable(session),
                describe_holder(holder),
                next_steps_any
            ),
            None => format!(
                "session {} holds no lease on {label} (never claimed by it, released, expired or superseded); nothing was changed; claim it with --session for a lease",
                printable(session)
            ),
        },
        Error::Broken { .. } => format!("{error}; claim it again for a new token"),
        Error::Released { label, token } => format!(
            "token {token} does not hold {label}: its lease was released by its holder; claim it again for a new token"
        ),
        Error::NotHeld { label } => format!(
            "{label} is not held by anyone (never claimed, released, expired or already broken): there is nothing to break"
        ),
        Error::Superseded {
            through: Some(_), ..
        } => format!(
            "{error}; claim it again for a new token (while that holder keeps the file, the \
             claim is refused and says who holds it and until when)"
        ),
        Error::Superseded { .. } => format!("{error}; claim it again for a new token"),
        Error::Expired {
            label,
            token,
            expired_at_ms,
        } => format!(
            "lease on {label} with token {token} {}; claim it again for a new token",
            expired_when(*expired_at_ms, now_ms())
        ),
        Error::Backend(e) if e.location.contains("etcd://") => etcd_error(e),
        // A cause that says what to do itself gets no store remedy after it.
        Error::Backend(e) if e.source.to_string().contains("largest possible generation") => {
            format!("store error: {e}")
        }
        Error::Backend(e) => format!("store error: {e}; {}", store_remedy(e)),
        other => other.to_string(),
    }
}

/// What to do about a store failure, from its real cause (issue 19: every store
/// error used to end "check that the store is a writable directory", even a full
/// disk or a symbolic link inside the store).
pub fn store_remedy(error: &fencepost::BackendError) -> &'static str {
    use std::io::ErrorKind;
    let text = error.source.to_string();
    match error.kind() {
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => {
            "the disk (or quota) holding the store is full; free space and try again"
        }
        ErrorKind::ReadOnlyFilesystem => {
            "the store is on a read-only filesystem; pass a writable one with --store or FENCEPOST_STORE"
        }
        ErrorKind::PermissionDenied => {
            "you lack permission on the store; fix its permissions or pass another with --store or FENCEPOST_STORE"
        }
        // The cause already says it is a link fencepost does not follow: say only
        // what to do. Moving a directory back is right only for this key's own.
        _ if text.contains("symbolic link") => {
            "if the link points to this key's own directory (moved away, same name), move that directory back in place of the link; otherwise remove the link"
        }
        ErrorKind::NotADirectory => {
            "something other than a directory stands at that path; move it out of the store (fencepost never writes a file there), and the next claim creates the directory"
        }
        _ => "check that the store (--store or FENCEPOST_STORE) is a writable directory",
    }
}

/// Why a kept-alive lease was lost, for `lease on X lost: <reason>`.
pub fn loss_reason(error: &Error) -> String {
    match error {
        Error::Superseded { by_token: 0, .. } => {
            "superseded (the newest record is unreadable)".into()
        }
        Error::Superseded {
            through: Some(name),
            ..
        } => format!(
            "written around: another holder claimed the same file as {} (a hard link of it, or \
             its name before it moved)",
            printable(name)
        ),
        Error::Superseded {
            by_token,
            by: Some(holder),
            ..
        } => format!(
            "superseded by token {by_token} ({}, until {})",
            printable(&holder.who()),
            fencepost::utc_timestamp(holder.expires_at_ms)
        ),
        Error::Superseded { by_token, .. } => format!("superseded by token {by_token}"),
        Error::Expired { expired_at_ms, .. } => format!(
            "it {} before it could be renewed",
            expired_when(*expired_at_ms, now_ms())
        ),
        // A release that finds another tenure's record newest (the child ended
        // before the watch saw the takeover) was written around, not released.
        Error::NotHolder {
            newest: Some(holder),
            ..
        } => format!(
            "superseded by token {} ({}, until {})",
            holder.token,
            printable(&holder.who()),
            fencepost::utc_timestamp(holder.expires_at_ms)
        ),
        Error::NotHolder { .. } => "it was released outside this run".into(),
        Error::Broken { note, .. } => printable(&note.to_string()),
        Error::Released { .. } => {
            "it was released by a process given its handle or naming its session".into()
        }
        Error::Backend(e) => format!("the store stayed unusable until the lease expired: {e}"),
        other => other.to_string(),
    }
}

/// When a lease ends, relative to now, as a person says it: `in 29.1s`, `in 4m05s`,
/// `expired 0.4s ago`, `expired 2m38s ago` (never `0s` for a live lease, never `-1s`).
/// `expired 2.5s ago` for a lease the core reports expired; `expired` alone
/// when its end is not behind this clock (judged by the holder's clock, which
/// may run ahead of this one), never a negative time.
fn expired_when(expired_at_ms: u64, now: u64) -> String {
    match -until_ms(expired_at_ms, now) {
        ago if ago > 0 => format!("expired {} ago", human_precise(ago)),
        _ => "expired".into(),
    }
}

pub fn expiry_phrase(expires_at_ms: u64, now: u64) -> String {
    let ms = until_ms(expires_at_ms, now);
    if ms > 0 {
        format!("in {}", human_duration(ms.unsigned_abs()))
    } else {
        format!("expired {} ago", human_duration(ms.unsigned_abs()))
    }
}

/// `29.1s` under a minute (one decimal, so a 1 s ttl right after a claim is `1.0s`),
/// else `4m05s` or `2h03m`.
fn human_duration(ms: u64) -> String {
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        human(ms as i64)
    }
}

/// The widest a text column of the status table gets, in characters: a longer cell
/// is elided in the middle, so one 60,000-character lock name cannot pad every row
/// (issue 19: 1.4 MB of output for 22 rows). `--json` has every label whole.
const MAX_RESOURCE_WIDTH: usize = 64;
const MAX_NAME_WIDTH: usize = 24;

/// `text` cut to at most `max` characters by replacing its middle with `…`, keeping
/// both ends (a path's file name and a lock's distinguishing tail stay visible).
pub fn elide_middle(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max || max < 3 {
        return text.to_string();
    }
    let keep = max - 1;
    let head = keep / 2;
    let tail = keep - head;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(count - tail).collect();
    format!("{start}…{end}")
}

/// The owner as the OWNER column shows it: a hook of an earlier version recorded
/// `AGENT session TAG`; the SESSION column has the tag, so it is not repeated.
fn shown_owner(entry: &StatusEntry) -> String {
    match &entry.session {
        Some(tag) => entry
            .owner
            .strip_suffix(&format!(" session {tag}"))
            .unwrap_or(&entry.owner)
            .to_string(),
        None => entry.owner.clone(),
    }
}

/// The status table: resource, state, token, owner (or the shared holders), the
/// session's tag (a SESSION column only when some claim has a session), the
/// holder's pid and host, and when the lease ends. Pinned by
/// `the_status_table_shows_each_kind_of_claim_in_one_row`.
pub fn status_table(entries: &[StatusEntry], now: u64) -> String {
    let header = [
        "RESOURCE", "STATE", "TOKEN", "OWNER", "SESSION", "PID", "HOST", "EXPIRES",
    ]
    .map(String::from);
    let mut rows = vec![header];
    // Who broke what, when and why, and whose holder's process ended: one line each
    // under the table (a reason does not fit a column).
    let mut notes = Vec::new();
    for entry in entries {
        let mut note = |text: &str| {
            notes.push(format!(
                "{} token {}: {text}",
                elide_middle(&printable(&entry.resource), MAX_RESOURCE_WIDTH),
                entry.token
            ));
        };
        if let Some(broken) = &entry.broken {
            note(&printable(&broken.to_string()));
        }
        if entry.holder_ended && !entry.shared.is_empty() {
            note(
                "the processes of its shared holders have ended; the next claim takes the resource over at once",
            );
        } else if entry.holder_ended {
            note(&format!(
                "its holder's process (pid {}) has ended; the next claim takes the lease over at once",
                entry.pid
            ));
        }
        let state = match (entry.state, entry.live) {
            (ClaimState::Held, _) if entry.holder_ended => "held (process ended)",
            (ClaimState::Held, _) => "held",
            (ClaimState::Expired, _) => "expired",
            (ClaimState::Released, _) => "released",
            (ClaimState::Broken, _) => "broken",
            (ClaimState::Unreadable, _) => "unreadable",
            (ClaimState::NewerFormat, true) => "held (newer format)",
            (ClaimState::NewerFormat, false) => "expired (newer format)",
        };
        let expires = match entry.state {
            ClaimState::Held | ClaimState::Expired | ClaimState::NewerFormat => {
                expiry_phrase(entry.expires_at_ms, now)
            }
            ClaimState::Released | ClaimState::Broken | ClaimState::Unreadable => "-".into(),
        };
        let or_dash = |text: String| if text.is_empty() { "-".into() } else { text };
        let number = |n: u64| if n == 0 { String::new() } else { n.to_string() };
        rows.push([
            elide_middle(&printable(&entry.resource), MAX_RESOURCE_WIDTH),
            state.into(),
            or_dash(number(entry.token)),
            // Shared holders: how many, and who (one row however many share it).
            or_dash(if entry.shared.is_empty() {
                elide_middle(&printable(&shown_owner(entry)), MAX_NAME_WIDTH)
            } else {
                let names: Vec<String> = entry
                    .shared
                    .iter()
                    .map(|o| elide_middle(&printable(o), MAX_NAME_WIDTH))
                    .collect();
                let shared = format!("{} shared: {}", names.len(), names.join(", "));
                if entry.owner.is_empty() {
                    shared
                } else {
                    format!(
                        "{}; {shared}",
                        elide_middle(&printable(&shown_owner(entry)), MAX_NAME_WIDTH)
                    )
                }
            }),
            // The session's tag, whole: it is what tells two sessions apart (who
            // may re-enter the claim), never the session id.
            or_dash(
                entry
                    .session
                    .as_ref()
                    .map(|tag| elide_middle(&printable(tag.as_str()), MAX_NAME_WIDTH))
                    .unwrap_or_default(),
            ),
            or_dash(number(u64::from(entry.pid))),
            or_dash(elide_middle(&printable(&entry.host), MAX_NAME_WIDTH)),
            expires,
        ]);
    }
    // The SESSION column only when some claim has a session: most stores have none.
    let shown: Vec<usize> = (0..8)
        .filter(|&i| i != 4 || entries.iter().any(|e| e.session.is_some()))
        .collect();
    let rows: Vec<Vec<&String>> = rows
        .iter()
        .map(|row| shown.iter().map(|&i| &row[i]).collect())
        .collect();
    let numeric: Vec<bool> = rows[0]
        .iter()
        .map(|h| *h == "TOKEN" || *h == "PID")
        .collect();
    let mut widths = vec![0usize; shown.len()];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            // Numbers right-aligned, text left-aligned. Padded by hand: `{:width$}`
            // counts bytes of multi-byte characters differently on some versions, and
            // the cells are already bounded.
            let padding = " ".repeat(width - cell.chars().count());
            if numeric[i] {
                line.push_str(&padding);
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&padding);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    for note in notes {
        out.push_str(&note);
        out.push('\n');
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An etcd member's answer is not told to check reachability, a full quota
    /// names its remedy, and only a create's timeout leaves its outcome unknown
    /// (a breaker's finds).
    #[test]
    fn etcd_errors_say_what_to_do() {
        let error = |operation, cause: &str| {
            fencepost::BackendError::new(
                operation,
                "etcd://h:2379/p",
                std::io::Error::other(cause.to_string()),
            )
        };
        let full = etcd_error(&error(
            "create",
            "etcd answered HTTP 429: etcdserver: mvcc: database space exceeded",
        ));
        assert!(
            full.contains("out of space") && !full.contains("reachable"),
            "{full}"
        );
        let answered = etcd_error(&error("list", "etcd answered HTTP 404: undecodable JSON"));
        assert!(
            answered.contains("client port") && !answered.contains("reachable"),
            "{answered}"
        );
        let read = etcd_error(&error("read", "timed out (global); the outcome is unknown"));
        assert!(
            read.contains("reachable") && !read.contains("outcome"),
            "{read}"
        );
        let create = etcd_error(&error(
            "create",
            "timed out (global); the outcome is unknown",
        ));
        assert!(create.contains("the outcome is unknown"), "{create}");
    }

    #[test]
    fn printable_escapes_what_breaks_a_line() {
        assert_eq!(printable("src/a.rs"), "src/a.rs");
        assert_eq!(printable("Straße ✓"), "Straße ✓");
        for bad in [
            "\n", "\u{1b}", "\u{2028}", "\u{2029}", "\u{202e}", "\u{2067}", "\u{200f}",
        ] {
            let shown = printable(&format!("ci{bad}bot"));
            assert!(
                shown.starts_with("ci\\u{") && shown.ends_with("}bot"),
                "{shown}"
            );
        }
    }

    /// A status row as the core reports it.
    fn row(resource: &str, owner: &str, session: Option<&str>, pid: u32) -> StatusEntry {
        let (kind, label) = resource.split_once(':').unwrap();
        StatusEntry {
            resource: resource.into(),
            key: fencepost::Key::parse(&format!("{kind}-{}", "0".repeat(32))).unwrap(),
            label: label.into(),
            state: ClaimState::Held,
            live: true,
            token: 7,
            generation: 9,
            owner: owner.into(),
            pid,
            host: if pid == 0 { "" } else { "vm" }.into(),
            expires_at_ms: NOW + 29_100,
            broken: None,
            session: session.map(fencepost::SessionTag::of),
            shared: Vec::new(),
            holder_ended: false,
        }
    }

    const NOW: u64 = 1_796_135_405_000;

    /// One row per resource, each kind readable: the owner once, the session's tag
    /// in its own column (not the id, not twice), shared holders counted and named,
    /// a slot as `slot:NAME#N`, a subtree as `dir:`.
    #[test]
    fn the_status_table_shows_each_kind_of_claim_in_one_row() {
        let tag = |id: &str| fencepost::SessionTag::of(id).to_string();
        let mut shared = row("file:/repo/docs/api.md", "", None, 0);
        shared.shared = vec!["bob".into(), "cli".into()];
        // What a hook of an earlier version recorded as its owner.
        let old_hook = format!("claude-code session {}", tag("claude-code:s2"));
        let table = status_table(
            &[
                row("lock:db:migrations", "ci", None, 4242),
                row(
                    "file:/repo/src/a.rs",
                    "claude-code",
                    Some("claude-code:s1"),
                    17,
                ),
                row("file:/repo/src/b.rs", &old_hook, Some("claude-code:s2"), 18),
                row("dir:/repo/src/auth", "cli", Some("agent-a"), 19),
                shared,
                row("slot:dev#2", "cli", None, 20),
            ],
            NOW,
        );
        let expected = format!(
            "\
RESOURCE                STATE  TOKEN  OWNER               SESSION            PID  HOST  EXPIRES
lock:db:migrations      held       7  ci                  -                 4242  vm    in 29.1s
file:/repo/src/a.rs     held       7  claude-code         {a}    17  vm    in 29.1s
file:/repo/src/b.rs     held       7  claude-code         {b}    18  vm    in 29.1s
dir:/repo/src/auth      held       7  cli                 {c}    19  vm    in 29.1s
file:/repo/docs/api.md  held       7  2 shared: bob, cli  -                    -  -     in 29.1s
slot:dev#2              held       7  cli                 -                   20  vm    in 29.1s",
            a = tag("claude-code:s1"),
            b = tag("claude-code:s2"),
            c = tag("agent-a"),
        );
        assert_eq!(table, expected, "\n{table}");
        for id in ["claude-code:s1", "agent-a"] {
            assert!(!table.contains(id), "the table shows the session id {id}");
        }
        // Without any session claim, no SESSION column.
        let plain = status_table(&[row("lock:db:migrations", "ci", None, 4242)], NOW);
        assert_eq!(
            plain,
            "\
RESOURCE            STATE  TOKEN  OWNER   PID  HOST  EXPIRES
lock:db:migrations  held       7  ci     4242  vm    in 29.1s"
        );
    }

    #[test]
    fn a_release_written_around_is_reported_as_superseded() {
        let holder = fencepost::Holder {
            owner: "rival".into(),
            holder_id: "rival-1-x".into(),
            pid: 1,
            token: 7,
            generation: 7,
            expires_at_ms: 0,
            in_the_way: None,
            waiting: false,
            session: None,
        };
        let written_around = Error::NotHolder {
            label: "x".into(),
            token: 1,
            newest: Some(Box::new(holder.clone())),
        };
        assert_eq!(
            loss_reason(&written_around),
            "superseded by token 7 (rival, until 1970-01-01T00:00:00Z)"
        );
        // Superseded while held by the rival: who, and until when, the same way.
        let superseded = Error::Superseded {
            label: "x".into(),
            token: 1,
            by_token: 7,
            through: None,
            by: Some(Box::new(holder)),
        };
        assert_eq!(
            loss_reason(&superseded),
            "superseded by token 7 (rival, until 1970-01-01T00:00:00Z)"
        );
        assert_eq!(
            superseded.to_string(),
            "lease on x with token 1 was superseded by token 7, held by rival (pid 1, token 7) \
             until 1970-01-01T00:00:00Z"
        );
        let released = Error::NotHolder {
            label: "x".into(),
            token: 1,
            newest: None,
        };
        assert_eq!(loss_reason(&released), "it was released outside this run");
    }

    #[test]
    fn an_expiry_is_never_a_negative_time_ago() {
        assert_eq!(expired_when(10_000, 12_500), "expired 2.5s ago");
        // An end this clock has not reached (the holder's clock ran ahead).
        assert_eq!(expired_when(60_000, 3_600), "expired");
        assert_eq!(expired_when(5_000, 5_000), "expired");
    }

    #[test]
    fn expiries_say_in_or_ago() {
        assert_eq!(expiry_phrase(10_998, 10_000), "in 1.0s");
        assert_eq!(expiry_phrase(10_000, 10_200), "expired 0.2s ago");
        assert_eq!(expiry_phrase(0, 158_000), "expired 2m38s ago");
        assert_eq!(expiry_phrase(300_000, 55_000), "in 4m05s");
    }

    #[test]
    fn long_cells_are_elided_in_the_middle() {
        assert_eq!(elide_middle("abcdefghij", 5), "ab…ij");
        assert_eq!(elide_middle("abc", 5), "abc");
        assert_eq!(elide_middle(&"x".repeat(60_000), 64).chars().count(), 64);
    }

    #[test]
    fn durations_read_like_a_person_would_say_them() {
        assert_eq!(human(29_400), "29s");
        assert_eq!(human(-3_000), "-3s");
        assert_eq!(human(-200), "-1s");
        assert_eq!(human(999), "0s");
        assert_eq!(human(245_000), "4m05s");
        assert_eq!(human(7_380_000), "2h03m");
        assert_eq!(human_precise(29_140), "29.1s");
        assert_eq!(human_precise(-400), "-0.4s");
    }
}

//! Fencing the agents' own edits: `fencepost hook AGENT` (an agent CLI's pre-edit
//! hook), `fencepost guard` (git's pre-commit and pre-push) and `fencepost hooks
//! install|uninstall|status` (`docs/design-06-agent-hooks.md`).
//!
//! The hook fails closed: every path out of it is exit 0 (allow) or the agent's
//! blocking exit code with a reason. A payload it cannot read, a store it cannot
//! use, an internal error and even a panic block the edit, because both agents
//! treat any other exit code as "hook broken, go ahead".

pub mod agent;
mod escape;
pub mod git;
pub mod install;
pub mod session;
pub mod settings;
mod shell;

use std::io::{Read, Write};
use std::panic::AssertUnwindSafe;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use fencepost::{Holder, Resource};

use crate::args::{AgentName, HookArgs};
use crate::output::{expiry_phrase, now_ms, printable};
use crate::store::{self, Access};
use agent::Event;
pub use escape::{escape_reason, guard_escape};
use session::Claimed;

/// The environment variable a human sets to `off` (or `0`, `false`, `no`) in the
/// environment an agent CLI was started from, to turn the hook off deliberately:
/// every edit is allowed and nothing is claimed.
pub const OFF_SWITCH: &str = "FENCEPOST_HOOKS";

/// The most a payload may weigh (a Write carries the whole new file).
const PAYLOAD_LIMIT: u64 = 256 * 1024 * 1024;

/// What the hook tells the agent.
#[derive(Debug)]
enum Decision {
    /// Let the tool run (with a note on stderr for the human, if any).
    Allow(Option<String>),
    /// Block the tool call; the reason reaches the model.
    Block(String),
}

/// True when `FENCEPOST_HOOKS` (or the guard's variable) switches fencepost off.
pub fn switched_off(variable: &str) -> bool {
    std::env::var(variable).is_ok_and(|value| {
        matches!(
            value.trim().to_ascii_lowercase().as_str(),
            "off" | "0" | "false" | "no"
        )
    })
}

/// `fencepost hook AGENT`: never anything but allow (0) or block (2).
pub fn hook(store_flag: Option<&Path>, args: &HookArgs) -> ExitCode {
    let agent = args.agent;
    // A panic must not become Rust's exit code 101, which both agents read as
    // "hook broken, go ahead": catch it and block. Its message is kept for the reason.
    std::panic::set_hook(Box::new(|_| {}));
    let decision = closed(|| decide(store_flag, args));
    match decision {
        Decision::Allow(note) => {
            if let Some(note) = note {
                let _ = writeln!(std::io::stderr(), "fencepost: {note}");
            }
            let _ = std::io::stdout().write_all(agent.allow_stdout().as_bytes());
            ExitCode::SUCCESS
        }
        Decision::Block(reason) => {
            let _ = writeln!(std::io::stderr(), "{reason}");
            ExitCode::from(agent.block_exit_code())
        }
    }
}

/// Runs `decide`, turning its error and even its panic into a block.
fn closed(decide: impl FnOnce() -> Result<Decision, String>) -> Decision {
    match std::panic::catch_unwind(AssertUnwindSafe(decide)) {
        Ok(Ok(decision)) => decision,
        Ok(Err(reason)) => Decision::Block(fail_closed(&reason)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            Decision::Block(fail_closed(&format!("internal error ({what})")))
        }
    }
}

/// The reason given when the hook could not decide: it blocks, says why, and sends
/// the model to the human (who can fix the store, or switch the hook off).
pub fn fail_closed(what: &str) -> String {
    format!(
        "fencepost blocked this edit because it could not check whether another agent session \
         is editing the file: {what}. Do not make this change another way; tell the human that \
         the fencepost hook failed, and work on something else until they have fixed it."
    )
}

/// The reason given when another session holds the file (shown verbatim in the
/// README, "Guarding agents' own edits").
pub fn held_reason(path: &Path, holder: &Holder, now: u64) -> String {
    let who = match session::holder_session(holder) {
        // A hook's claim outlives the hook process: its pid says nothing.
        Some(session) => format!("another agent session ({})", printable(&session)),
        None => format!("{} (pid {})", printable(&holder.owner), holder.pid),
    };
    let until = fencepost::utc_timestamp(holder.expires_at_ms);
    let shown = printable(&path.display().to_string());
    // A file in the way of a file is the same file under another name: a hard link
    // of it, or the name it had when it was claimed (a breaker: the model was told
    // the file was inside a directory, and to work outside it).
    if let Some(other @ fencepost::Resource::File(_)) = holder.in_the_way.as_deref() {
        let name = printable(&other.target());
        return format!(
            "fencepost: {shown} is the file that {who} claimed as {name} (one file under two \
             names: a hard link, or moved since), and it holds it until {until} ({}). This edit \
             was blocked so that two sessions do not overwrite each other's work. Do not edit \
             this file now, under either name, and do not write it another way (a shell \
             command, another tool). Work on other files meanwhile, try this edit again after \
             {until}, or ask the human to coordinate the two sessions.",
            expiry_phrase(holder.expires_at_ms, now),
        );
    }
    if let Some(other) = holder.in_the_way.as_deref() {
        let dir = printable(&other.target());
        let (what, again) = if holder.waiting {
            (
                format!(
                    "{who} is waiting to claim it with everything below it, and no new edit \
                     starts there until it had its turn"
                ),
                "try this edit again in a while".to_string(),
            )
        } else {
            (
                format!(
                    "{who} holds it with everything below it until {until} ({})",
                    expiry_phrase(holder.expires_at_ms, now)
                ),
                format!("try this edit again after {until}"),
            )
        };
        return format!(
            "fencepost: {shown} is inside {dir}, and {what}. This edit was blocked so that two \
             sessions do not overwrite each other's work. Do not edit files under {dir} now, \
             and do not write them another way (a shell command, another tool). Work on files \
             outside {dir} meanwhile, {again}, or ask the human to coordinate the two sessions."
        );
    }
    // A shared claim's holder reads the file (the protocol names it "OWNER (shared)"
    // or "OWNER and N other readers (shared)"; shared claims carry no session).
    let doing = if holder.owner.ends_with("(shared)") {
        "read"
    } else {
        "edited"
    };
    format!(
        "fencepost: {} is being {doing} by {who}, which holds it until {until} ({}). This edit \
         was blocked so that two sessions do not overwrite each other's work. Do not edit this \
         file now, and do not write it another way (a shell command, another tool). Work on \
         other files meanwhile, try this edit again after {until}, or ask the human to \
         coordinate the two sessions.",
        printable(&path.display().to_string()),
        expiry_phrase(holder.expires_at_ms, now),
    )
}

/// The reason given when the editing session's own claim refuses the edit: one it
/// cannot renew for the file now at the path (another of its files was moved or
/// renamed onto the path after it edited the one there; it holds the file through
/// another hard link or in another store; or a record of the claim in the store
/// cannot be read, which ends its renewals until the ttl). It is the session's
/// own, so it never says "another agent session" (a breaker: the model was told
/// someone else was editing its file); the way out it names is the human's
/// `break --session` of this very session, never acting as another holder.
/// Pinned by `cli/tests/agent_hooks.rs::a_path_the_session_moved_another_file_onto_is_refused_as_its_own`
/// and `a_torn_record_above_the_sessions_claim_is_refused_as_its_own`.
pub fn own_claim_reason(path: &Path, holder: &Holder, now: u64) -> String {
    let until = fencepost::utc_timestamp(holder.expires_at_ms);
    let tag = printable(&session::holder_session(holder).unwrap_or_default());
    let held = match holder.in_the_way.as_deref() {
        Some(other @ fencepost::Resource::File(_)) => {
            format!("it as {}", printable(&other.target()))
        }
        Some(other) => format!("{} with everything below it", printable(&other.target())),
        None => "it".to_string(),
    };
    format!(
        "fencepost: {} is held by an earlier claim of this same session ({tag}) that cannot be \
         renewed for this edit: another file was moved or renamed onto this path after this \
         session edited the one there, this session holds {held} through another path or \
         store, or the store has a record of the claim it cannot read. The claim lasts until \
         {until} ({}). This edit was blocked so that no edit lands under a claim that cannot \
         be renewed. Do not write this file another way (a shell command, another tool). Work \
         on other files meanwhile, try this edit again after {until}, or ask the human to end \
         this session's claims (`fencepost break --session {tag} --reason ...`).",
        printable(&path.display().to_string()),
        expiry_phrase(holder.expires_at_ms, now),
    )
}

/// The reason given when the session's last claim of the file was broken
/// (`fencepost break`, by a human or a tool) and the file is now claimed for it
/// again: `old` is the broken claim's token and the break's note, `new` the new
/// claim's token and end. Another session may have edited the file between the
/// break and now, so the edit is refused once, for the model to read the file
/// again; the edit made again passes under the new claim (a breaker: after
/// `break --session` the session's next edit re-claimed the file in silence).
/// Pinned by `cli/tests/agent_hooks.rs::an_edit_after_a_break_of_the_sessions_claim_is_refused_once`.
pub fn broken_reason(
    path: &Path,
    tag: &str,
    (old_token, note): (u64, &fencepost::record::BreakNote),
    (token, expires_at_ms): (u64, u64),
) -> String {
    let shown = printable(&path.display().to_string());
    format!(
        "fencepost: this session's claim of {shown} (session {}, token {old_token}) was broken \
         by {} at {} (reason: {}), so another session may have changed the file since this \
         session last read it. This edit was blocked so that it does not overwrite that work. \
         The file is claimed for this session again (token {token}) until {}: read {shown} \
         again, then make this edit again.",
        printable(tag),
        printable(&note.by),
        fencepost::utc_timestamp(note.at_ms),
        printable(&note.reason),
        fencepost::utc_timestamp(expires_at_ms),
    )
}

/// Why an edit is refused once when the session's tenure of the file is another
/// than the one its last hook claim of it noted: that tenure (`old_token`, when the
/// note could be read) ended in between — its ttl ran out, it was broken and the
/// break is no longer the newest record, or another process of the session claimed
/// the file anew — and another holder may have had the file meanwhile (`after`: the
/// holder whose record came after the session's, as the series' status read it
/// before this claim, when it names one). The file is now claimed for the session
/// again (`token`, until `expires_at_ms`). Pinned by
/// `cli/tests/agent_hooks.rs::an_edit_after_another_session_held_the_file_is_refused_once`.
pub fn ended_reason(
    path: &Path,
    tag: &str,
    (old_token, after): (Option<u64>, Option<&fencepost::StatusEntry>),
    (token, expires_at_ms): (u64, u64),
) -> String {
    let shown = printable(&path.display().to_string());
    let old = old_token.map_or_else(String::new, |t| format!(", token {t}"));
    let meanwhile = after.map_or_else(
        || {
            "another session may have held the file meanwhile (through a claim of a \
             directory above it, say)"
                .to_string()
        },
        |entry| {
            format!(
                "{} claimed the file after it (token {})",
                printable(&entry.who()),
                entry.token
            )
        },
    );
    format!(
        "fencepost: this session's earlier claim of {shown} (session {}{old}) ended since this \
         session last edited the file (its ttl ran out, it was broken or released, or it was \
         claimed anew), and {meanwhile}, so the file may have changed since this session last read it. \
         This edit was blocked so that it does not overwrite that work. The file is claimed \
         for this session again (token {token}) until {}: read {shown} again, then make this \
         edit again.",
        printable(tag),
        fencepost::utc_timestamp(expires_at_ms),
    )
}

fn decide(store_flag: Option<&Path>, args: &HookArgs) -> Result<Decision, String> {
    let agent = args.agent;
    let mut payload = Vec::new();
    std::io::stdin()
        .take(PAYLOAD_LIMIT)
        .read_to_end(&mut payload)
        .map_err(|e| format!("cannot read the hook payload on stdin ({e})"))?;
    if switched_off(OFF_SWITCH) {
        return Ok(Decision::Allow(None));
    }
    match agent::parse(agent, &payload)? {
        Event::Ignore => Ok(Decision::Allow(None)),
        Event::Shell { command } => Ok(match guard_escape(&command) {
            Some(what) => Decision::Block(escape_reason(what)),
            None => Decision::Allow(None),
        }),
        Event::Edit {
            session,
            cwd,
            tool,
            paths,
        } => edit(store_flag, agent, args.ttl, &session, cwd, &tool, &paths),
        Event::SessionEnd { session, cwd } => {
            Ok(session_end(store_flag, agent, args.ttl, session, cwd))
        }
    }
}

/// SessionEnd: releases the session's claims in every store it claimed in.
/// Never the edit-blocking text (there is no edit): what could not be done is
/// said in words for a session's end, for the human, with how long the claims
/// left stay held. The session is named by its tag only (its id lets a process
/// act as it).
fn session_end(
    store_flag: Option<&Path>,
    agent: AgentName,
    ttl_ms: u64,
    session: Result<String, String>,
    cwd: Option<String>,
) -> Decision {
    let left = |what: String| {
        format!(
            "fencepost: at this session's end, {what}. Claims it could not release stay held \
             for up to the hook's ttl ({ttl_ms} ms) after the session's last edit (`fencepost \
             --store DIR status` lists what a store named here holds), and the stores noted for \
             the session are tried again at its next end."
        )
    };
    let session = match session {
        Ok(id) => session::hook_session(agent.name(), &id),
        Err(why) => return Decision::Block(left(format!("nothing was released: {why}"))),
    };
    let cwd = match payload_cwd(cwd) {
        Ok(cwd) => cwd,
        Err(why) => return Decision::Block(left(format!("nothing was released: {why}"))),
    };
    let ended = session::release_everywhere(store_flag, &cwd, &session);
    let released = ended.released;
    let claims = format!("{released} claim{}", if released == 1 { "" } else { "s" });
    let tag = session::tag(&session);
    if ended.problems.is_empty() {
        return Decision::Allow(
            (released > 0).then(|| format!("released {claims} of session {tag}")),
        );
    }
    Decision::Block(left(format!(
        "session {tag} released {claims}, and could not use every store it claimed in: {}",
        ended.problems.join("; ")
    )))
}

/// The payload's `cwd` (it must be absolute), else this process's.
fn payload_cwd(cwd: Option<String>) -> Result<PathBuf, String> {
    match cwd {
        Some(cwd) if Path::new(&cwd).is_absolute() => Ok(PathBuf::from(cwd)),
        Some(cwd) => Err(format!("the payload's cwd {cwd:?} is not an absolute path")),
        None => std::env::current_dir().map_err(|e| {
            format!("the payload has no cwd and the current directory cannot be read ({e})")
        }),
    }
}

fn edit(
    store_flag: Option<&Path>,
    agent: AgentName,
    ttl_ms: u64,
    payload_session: &str,
    cwd: Option<String>,
    tool: &str,
    paths: &[String],
) -> Result<Decision, String> {
    // The hook runs in whichever directory the agent `cd`ed to: a relative store
    // would be another store from each, and two sessions could both hold a file
    // (a breaker). The CLI takes it against its working directory, the MCP server
    // against its root; the hook has neither to offer, so it says so.
    // (A store URL, `etcd://…`, is no path.)
    let url = |flag: &Path| flag.to_string_lossy().contains("://");
    if let Some(flag) = store_flag.filter(|flag| flag.is_relative() && !url(flag)) {
        return Err(format!(
            "FENCEPOST_STORE (or --store) is the relative path {}, and the hook runs in \
             whichever directory the agent is in, so it would name another store from each \
             directory; it must be an absolute path",
            printable(&flag.display().to_string())
        ));
    }
    let session = session::hook_session(agent.name(), payload_session);
    let cwd = payload_cwd(cwd)?;
    let root = project_root(&cwd)?;
    let mut notes = Vec::new();
    let mut broken = Vec::new();
    for path in paths {
        let target = cwd.join(path);
        let location = location(&target)
            .map_err(|e| format!("cannot resolve {tool}'s path {path:?} ({e})"))?;
        // A dangling symbolic link (the file, or a directory on its way) is written
        // through: where it leads is judged too, as file identity follows it (a
        // breaker: a link to a record not yet written in the store, and one to
        // `sub/.git`, were allowed).
        let leads_to = dangling_link_target(&location);
        if let Some(reason) = [Some(&location), leads_to.as_ref()]
            .into_iter()
            .flatten()
            .find_map(|at| {
                into_metadata(&root, at, tool).or_else(|| into_store(store_flag, at, tool))
            })
        {
            return Ok(Decision::Block(reason));
        }
        let resource = Resource::file(&location);
        let opened = (!location.starts_with(&root))
            .then(|| store::open(store_flag, Some(&resource), &cwd, Access::Existing))
            .transpose()?
            .filter(|opened| !claimed_outside(opened));
        if let Some(opened) = opened {
            // Outside the project and outside every repository: not claimed, no
            // store made for it (docs), but still not written over another
            // session's claim.
            let locator = opened.backend.locator();
            let mut stores = Vec::new();
            if opened.exists {
                stores.push(fencepost::Store::new(opened.backend));
            }
            // And every other store on its path: a claim kept in one (the layout
            // changed since it was made) holds the file as much (a breaker: only
            // the located store was read).
            let elsewhere = crate::elsewhere::Elsewhere::new(
                std::slice::from_ref(&resource),
                &cwd,
                Path::new(&locator),
            );
            stores.extend(
                elsewhere
                    .list()
                    .map_err(|e| crate::output::describe_error(&e))?,
            );
            for store in &stores {
                let holder = store
                    .holder(&resource)
                    .map_err(|e| crate::output::describe_error(&e))?;
                if let Some(holder) = holder
                    && session::holder_session(&holder) != Some(session::tag(&session))
                {
                    return Ok(Decision::Block(held_reason(&location, &holder, now_ms())));
                }
            }
            continue;
        }
        let opened = store::open(store_flag, Some(&resource), &cwd, Access::Create)?;
        let elsewhere = crate::elsewhere::Elsewhere::new(
            std::slice::from_ref(&resource),
            &cwd,
            Path::new(&opened.backend.locator()),
        );
        let claimed_in = opened.backend.locator();
        let store = fencepost::Store::new(opened.backend);
        // Read before the claim, which writes over it: the session's last claim of
        // the file was broken by someone (`fencepost break`), or ended and another
        // holder came after it, so the file may have been changed by another
        // session since the model last read it.
        let noted = session::TenureNotes::read(&claimed_in, &resource, &session);
        let prior = session::prior_claim(&store, &resource, &session, noted.any());
        match session::claim(
            &store,
            &elsewhere,
            &resource,
            agent.name(),
            &session,
            ttl_ms,
        )
        .map_err(|e| crate::output::describe_error(&e))?
        {
            Claimed::Ours {
                token,
                expires_at_ms,
            } => {
                // So that the session's end finds it (a submodule's store, say).
                let noted_store = session::note_store(store_flag, &cwd, &claimed_in, &session);
                noted.note(token);
                // Another tenure than the one this session's last edit of the file
                // noted: it ended in between (broken, run out, released or claimed
                // anew), and another session may have held the file meanwhile. A
                // note that cannot be read tells nothing (tokens start at 1): told,
                // a note that cannot be replaced either would refuse every edit (a
                // breaker planted a directory in its place).
                let old_token = noted.other_than(token);
                match prior {
                    session::Prior::Broken(old_token, note) => {
                        broken.push(broken_reason(
                            &location,
                            &session::tag(&session),
                            (old_token, &note),
                            (token, expires_at_ms),
                        ));
                        continue;
                    }
                    _ if old_token.is_some() => {
                        let after = match &prior {
                            session::Prior::NotOurs(after) => after.as_deref(),
                            _ => None,
                        };
                        broken.push(ended_reason(
                            &location,
                            &session::tag(&session),
                            (old_token, after),
                            (token, expires_at_ms),
                        ));
                        continue;
                    }
                    _ => {}
                }
                notes.push(format!(
                    "{} is held by this session ({}, token {token}) until {}",
                    printable(&location.display().to_string()),
                    session::tag(&session),
                    fencepost::utc_timestamp(expires_at_ms)
                ));
                if let Err(e) = noted_store {
                    notes.push(format!(
                        "the session's end will not release it ({e}): it ends by its ttl"
                    ));
                }
            }
            Claimed::Theirs(holder) => {
                let reason = if session::holder_session(&holder) == Some(session::tag(&session)) {
                    own_claim_reason(&location, &holder, now_ms())
                } else {
                    held_reason(&location, &holder, now_ms())
                };
                return Ok(Decision::Block(reason));
            }
        }
    }
    // Every file is claimed first, so that the edit made again after reading the
    // files passes.
    if !broken.is_empty() {
        return Ok(Decision::Block(broken.join(" ")));
    }
    // For the human's transcript (both agents show a hook's stderr on exit 0 only
    // in their verbose views).
    Ok(Decision::Allow(
        (!notes.is_empty()).then(|| notes.join("; ")),
    ))
}

/// Whether a file outside the project is claimed all the same: when its claims
/// belong in a tree's own store — its repository's (another worktree of this
/// repository shares it), a `.fencepost` directory's, the one its claims were kept
/// in, or the store named for the hook — made if need be, so that a session
/// editing another worktree's file holds it as that worktree's session would (a
/// breaker: a session in one worktree editing the other's file claimed nothing,
/// and the other worktree's session was let edit it at once). Only a file whose
/// claims would go to the per-user store (outside every repository) is left
/// unclaimed, and no store is made for it.
/// Pinned by `cli/tests/agent_hooks.rs::a_linked_worktree_claims_into_the_shared_store`.
fn claimed_outside(opened: &store::Opened) -> bool {
    !matches!(opened.scope, Some(fencepost_fs::StoreScope::User))
}

/// Why an edit of `location` (resolved) is refused when it lies inside a `.git` or
/// `.fencepost` entry below the project `root` (or, outside it, below the directory
/// the two share): either made or changed there moves
/// the lease store of the files around it (the store location rule), and another
/// session could then claim a file this one holds in a fresh store (found by a
/// breaker: a Write of `sub/.git/notes` let a second session hold `sub/a.txt`).
/// The MCP server's `write` refuses the same paths.
fn into_metadata(root: &Path, location: &Path, tool: &str) -> Option<String> {
    // Below the project, or, for a path outside it, below the nearest directory
    // the two share: a session in a nested repository writing its outer
    // repository's `.git` moves stores as surely (a breaker).
    let base = root.ancestors().find(|dir| location.starts_with(dir))?;
    let below = location.strip_prefix(base).ok()?;
    let mut at = base.to_path_buf();
    for component in below.components() {
        at.push(component);
        let name = component.as_os_str().to_string_lossy();
        let named = [".git", fencepost_fs::STORE_DIR_NAME]
            .into_iter()
            .find(|meta| name.eq_ignore_ascii_case(meta));
        if let Some(meta) = named {
            return Some(format!(
                "fencepost: refused: {} lies in {} — {tool} does not write inside a {meta} entry: one made or changed there moves the lease store of the files around it and splits their claims; leave {} to {}",
                printable(&location.display().to_string()),
                printable(&at.display().to_string()),
                if meta == ".git" {
                    "git's files"
                } else {
                    "fencepost's files"
                },
                if meta == ".git" { "git" } else { "fencepost" },
            ));
        }
    }
    None
}

/// Where a write of `location` lands when a dangling symbolic link on its way
/// leads elsewhere (the write creates the link's target, or goes through it), as
/// file identity resolves it; `None` where that is `location` itself.
fn dangling_link_target(location: &Path) -> Option<PathBuf> {
    Resource::file(location)
        .identity()
        .ok()
        .and_then(|identity| identity.path)
        .filter(|path| path != location)
}

/// Why an edit of `location` (resolved) is refused when it lies in a lease store
/// (`named`, the `--store` or `FENCEPOST_STORE` one, or any store the location rule
/// could pick: a bare repository's inside the project, the per-user store), or
/// when writing it would make a directory a git directory, or when it is a hard
/// link to a record (`an_edit_of_a_hard_link_to_a_record_is_refused`): a record written there
/// could forge or end any claim, and a new git directory moves the store of every
/// file below it (a breaker: each was allowed). The MCP server's `write` refuses
/// the same paths. Pinned by
/// `cli/tests/agent_hooks.rs::edits_into_any_store_or_making_a_git_directory_are_refused`.
fn into_store(named: Option<&Path>, location: &Path, tool: &str) -> Option<String> {
    let shown = printable(&location.display().to_string());
    if let Some(store) = fencepost_fs::store_holding(location, named) {
        return Some(format!(
            "fencepost: refused: {shown} lies in the lease store {} — {tool} does not write \
             there: a record written there could forge or end any session's claim. Leave the \
             store to fencepost (`fencepost status` shows its claims), and do not write it \
             another way (a shell command, another tool).",
            printable(&store.display().to_string())
        ));
    }
    if fencepost_fs::store_record_linked_at(location) {
        return Some(format!(
            "fencepost: refused: {shown} is another name (a hard link) of a lease record in a \
             store — {tool} does not write it: the write would change the record and could \
             forge or end a session's claim. Leave it alone, do not write it another way (a \
             shell command, another tool), and ask the human to remove the link."
        ));
    }
    let dir = fencepost_fs::git_dir_made_by_write(location)?;
    Some(format!(
        "fencepost: refused: writing {shown} would make {} a git directory (a HEAD file with \
         objects/ and refs/ directories) or change its commondir, which moves the lease store \
         of every file below it and splits their claims. Do not make or change a repository \
         this way, nor another way (a shell command, another tool); if one is needed, ask the \
         human to set it up.",
        printable(&dir.display().to_string())
    ))
}

/// The project a payload's `cwd` belongs to: the git work tree containing it (the
/// nearest `.git` entry at or above it, a linked worktree's own), else the
/// directory the agent CLI names (`CLAUDE_PROJECT_DIR`, `GEMINI_PROJECT_DIR`), else
/// the `cwd` itself; resolved.
pub fn project_root(cwd: &Path) -> Result<PathBuf, String> {
    let cwd = location(cwd).map_err(|e| format!("cannot resolve the cwd {cwd:?} ({e})"))?;
    if let Some(top) = cwd
        .ancestors()
        .find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())
    {
        return Ok(top.to_path_buf());
    }
    for variable in ["CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR"] {
        if let Some(dir) = std::env::var_os(variable).filter(|d| Path::new(d).is_absolute())
            && let Ok(dir) = location(Path::new(&dir))
        {
            return Ok(dir);
        }
    }
    Ok(cwd)
}

/// Where `path` (absolute) is: its deepest existing ancestor resolved through the
/// filesystem (symlinks, `..`), the rest appended with `.` and `..` applied, and
/// after a `..` resolved again, as the core resolves a file's identity.
pub fn location(path: &Path) -> std::io::Result<PathBuf> {
    let mut rest = Vec::new();
    let mut existing = path;
    let resolved = loop {
        match std::fs::canonicalize(existing) {
            Ok(resolved) => break resolved,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (Some(last), Some(parent)) =
                    (existing.components().next_back(), existing.parent())
                else {
                    return Err(e);
                };
                rest.push(last.as_os_str().to_os_string());
                existing = parent;
            }
            Err(e) => return Err(e),
        }
    };
    let mut out = resolved;
    let mut names = rest.iter().rev();
    while let Some(name) = names.next() {
        match Path::new(name).components().next() {
            Some(Component::ParentDir) => {
                // A `..` out of a missing directory can lead back into existing ones
                // and their symbolic links (`src/missing/../link-to-store/…`, and a
                // later `..` after such a link): what follows is resolved again, as
                // the core does (a breaker wrote a lease record through it). Each
                // round has one `..` fewer.
                out.pop();
                out.extend(names);
                return location(&out);
            }
            Some(Component::CurDir) | None => {}
            _ => out.push(name),
        }
    }
    Ok(strip_verbatim(out))
}

/// `\\?\C:\x` as `C:\x` (what `canonicalize` returns on Windows), so prefixes compare.
fn strip_verbatim(path: PathBuf) -> PathBuf {
    #[cfg(windows)]
    if let Some(rest) = path.to_str().and_then(|text| text.strip_prefix(r"\\?\"))
        && !rest.starts_with("UNC\\")
    {
        return PathBuf::from(rest);
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic inside the hook blocks (Rust's own exit code 101 would let the edit
    /// through), and says what panicked.
    #[test]
    fn a_panic_blocks() {
        let decision = closed(|| panic!("index out of bounds"));
        let Decision::Block(reason) = decision else {
            panic!("a panic allowed the edit: {decision:?}")
        };
        assert!(
            reason.contains("internal error (index out of bounds)"),
            "{reason}"
        );
        assert!(matches!(
            closed(|| Ok(Decision::Allow(None))),
            Decision::Allow(None)
        ));
        assert!(matches!(closed(|| Err("x".into())), Decision::Block(_)));
    }

    /// A `..` out of a missing directory leads back through a symbolic link, as the
    /// core keys the file (a breaker: the hook judged `src/lnk/…` where the write
    /// lands in what `lnk` names).
    #[cfg(unix)]
    #[test]
    fn a_climb_out_of_a_missing_directory_is_located_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("src/held")).unwrap();
        std::os::unix::fs::symlink("held", root.join("src/alias")).unwrap();
        std::fs::create_dir_all(root.join("deep/dir")).unwrap();
        std::os::unix::fs::symlink("../deep/dir", root.join("src/dlink")).unwrap();
        assert_eq!(
            location(&root.join("src/missing/../dlink/../x")).unwrap(),
            root.join("deep/x")
        );
        for spelled in ["src/missing/../alias/x", "src/a/b/../../alias/x"] {
            assert_eq!(
                location(&root.join(spelled)).unwrap(),
                root.join("src/held/x"),
                "{spelled}"
            );
        }
    }

    /// The README shows the reasons verbatim; this keeps it true.
    #[test]
    fn the_readme_shows_the_reasons_verbatim() {
        let readme = include_str!("../../../README.md").replace("\n", " ");
        let holder = Holder {
            // What a hook of session `claude-code:7f3c2a` records: the agent, and
            // the session's tag.
            owner: "claude-code".into(),
            session: Some(Box::new(fencepost::SessionTag::of("claude-code:7f3c2a"))),
            holder_id: "h".into(),
            pid: 4242,
            token: 7,
            generation: 9,
            expires_at_ms: 1_796_135_405_000,
            in_the_way: None,
            waiting: false,
        };
        let held = held_reason(
            Path::new("/repo/src/auth.rs"),
            &holder,
            1_796_135_405_000 - 29 * 60_000 - 5_000,
        );
        let own = own_claim_reason(
            Path::new("/repo/src/auth.rs"),
            &holder,
            1_796_135_405_000 - 29 * 60_000 - 5_000,
        );
        let closed = fail_closed(
            "the hook payload on stdin is not JSON (expected value at line 1 column 1)",
        );
        let note = fencepost::record::BreakNote {
            by: "alice".into(),
            at_ms: 1_796_135_405_000 - 31 * 60_000,
            reason: "session stuck".into(),
        };
        let broken = broken_reason(
            Path::new("/repo/src/auth.rs"),
            "0ed754fc9054df0b",
            (7, &note),
            (12, 1_796_135_405_000 + 30 * 60_000),
        );
        let after = fencepost::StatusEntry {
            resource: "file:/repo/src/auth.rs".into(),
            key: fencepost::Key::parse("file-0123456789abcdef0123456789abcdef").unwrap(),
            label: "/repo/src/auth.rs".into(),
            state: fencepost::ClaimState::Released,
            live: false,
            token: 14,
            generation: 15,
            owner: "gemini".into(),
            pid: 4242,
            host: "vm".into(),
            expires_at_ms: 0,
            broken: None,
            session: Some(fencepost::SessionTag::parse("9c1f0e4b7a2d3e58").unwrap()),
            shared: Vec::new(),
            holder_ended: false,
        };
        let ended = ended_reason(
            Path::new("/repo/src/auth.rs"),
            "0ed754fc9054df0b",
            (Some(12), Some(&after)),
            (16, 1_796_135_405_000 + 30 * 60_000),
        );
        let lapsed = ended_reason(
            Path::new("/repo/src/auth.rs"),
            "0ed754fc9054df0b",
            (Some(12), None),
            (16, 1_796_135_405_000 + 30 * 60_000),
        );
        for reason in [held, own, closed, broken, ended, lapsed] {
            assert!(
                readme.contains(&reason),
                "README lacks the reason:\n{reason}"
            );
        }
    }
}

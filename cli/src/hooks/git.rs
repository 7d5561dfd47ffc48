//! The git side: `fencepost guard pre-commit|pre-push`, and installing it as git's
//! hooks, chaining whatever hook was there.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use fencepost::{ClaimState, Resource, StatusEntry};

use super::session;
use crate::Failure;
use crate::args::{GitHook, GuardArgs};
use crate::output::{expiry_phrase, now_ms, printable};

/// The environment variable a human sets to `off` for one commit or push, to let
/// it through the guard deliberately (as `git commit --no-verify` skips every hook).
pub const GUARD_OFF_SWITCH: &str = "FENCEPOST_GUARD";

/// The suffix an existing hook is kept under while fencepost's hook chains it.
const CHAINED: &str = ".fencepost-chained";

/// Marks a hook file as fencepost's.
const MARKER: &str = "# fencepost guard: added by `fencepost hooks install --git`";

/// The hook script for `hook` (`pre-commit` or `pre-push`).
pub fn script(hook: &str) -> String {
    let chained = format!("\"$(dirname \"$0\")/{hook}{CHAINED}\"");
    // `-x`, as git itself decides: a hook that is not executable was ignored by git
    // before the install, and stays ignored when chained.
    let (read_input, guard, then) = if hook == "pre-push" {
        // git gives the pushed refs on stdin: both the guard and the chained hook
        // read them.
        (
            "input=$(cat)\n",
            format!("printf '%s\\n' \"$input\" | fencepost guard {hook} \"$@\" || exit $?"),
            format!(
                "if [ -x {chained} ]; then printf '%s\\n' \"$input\" | {chained} \"$@\"; exit $?; fi\n"
            ),
        )
    } else {
        (
            "",
            format!("fencepost guard {hook} \"$@\" || exit $?"),
            format!("if [ -x {chained} ]; then exec {chained} \"$@\"; fi\n"),
        )
    };
    // Without `fencepost` on PATH the shell's own "fencepost: not found" said
    // nothing of what to do (a new user). The commit is still refused unless the
    // guard is switched off: a guard that cannot look lets nothing through unseen.
    let what = if hook == "pre-push" { "push" } else { "commit" };
    let switch =
        "$(printf '%s' \"${FENCEPOST_GUARD:-}\" | tr -d '[:space:]' | tr '[:upper:]' '[:lower:]')";
    format!(
        "#!/bin/sh\n{MARKER}; `fencepost hooks uninstall --git` removes it\n\
         # and puts back the hook it chains ({hook}{CHAINED}), if there was one.\n\
         {read_input}\
         if command -v fencepost >/dev/null 2>&1; then\n  {guard}\n\
         else\n  case \"{switch}\" in\n    off|0|false|no) ;;\n    \
         *) echo \"fencepost guard: cannot check this {what}: the fencepost command is not \
         on PATH; put it on PATH (cargo install --locked --path cli, from fencepost's source), \
         or {what} once without the check with FENCEPOST_GUARD=off\" >&2; exit 1 ;;\n  esac\nfi\n\
         {then}"
    )
}

/// The hooks installed: a commit that `git merge` or `git am` makes runs no
/// pre-commit, only its own hook, so each is guarded as a commit (a breaker: a
/// merge, and an applied patch, committed a file another session held).
/// `git cherry-pick` and `git rebase` run no hook that can refuse a commit; their
/// commits are refused at pre-push.
const HOOKS: [&str; 4] = [
    "pre-commit",
    "pre-merge-commit",
    "pre-applypatch",
    "pre-push",
];

fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let output = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run git ({e}); is git installed and on PATH?"))?;
    if !output.status.success() {
        return Err(format!(
            "`git {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(output.stdout)
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes)
        .trim_end_matches(['\n', '\r'])
        .to_string()
}

/// The directory git runs hooks from for the repository at `project`: the common
/// git directory's `hooks/` (shared by every worktree), or `core.hooksPath`.
pub fn hooks_dir(project: &Path) -> Result<PathBuf, String> {
    let path = text(git(project, &["rev-parse", "--git-path", "hooks"])?);
    Ok(project.join(path))
}

pub fn install(hooks: &Path) -> Result<String, String> {
    std::fs::create_dir_all(hooks)
        .map_err(|e| format!("cannot create {} ({e})", hooks.display()))?;
    let mut done = Vec::new();
    for hook in HOOKS {
        let path = hooks.join(hook);
        let ours = script(hook);
        match std::fs::read(&path) {
            Ok(bytes) if bytes == ours.as_bytes() => {
                done.push(format!("{hook}: already installed"));
                continue;
            }
            Ok(_) => {
                let chained = hooks.join(format!("{hook}{CHAINED}"));
                if chained.exists() {
                    return Err(format!(
                        "cannot install {}: both it and {} exist; remove one of them first",
                        path.display(),
                        chained.display()
                    ));
                }
                // Keep the existing hook, byte for byte and with its mode, under the
                // chained name; ours runs it after the guard.
                std::fs::rename(&path, &chained)
                    .map_err(|e| format!("cannot move {} aside ({e})", path.display()))?;
                done.push(format!("{hook}: installed, chaining the existing hook"));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                done.push(format!("{hook}: installed"));
            }
            Err(e) => return Err(format!("cannot read {} ({e})", path.display())),
        }
        std::fs::write(&path, ours)
            .map_err(|e| format!("cannot write {} ({e})", path.display()))?;
        make_executable(&path)?;
    }
    Ok(format!("git ({}): {}", hooks.display(), done.join("; ")))
}

pub fn uninstall(hooks: &Path) -> Result<String, String> {
    let mut done = Vec::new();
    for hook in HOOKS {
        let path = hooks.join(hook);
        let chained = hooks.join(format!("{hook}{CHAINED}"));
        match std::fs::read(&path) {
            Ok(bytes) if bytes == script(hook).as_bytes() => {
                std::fs::remove_file(&path)
                    .map_err(|e| format!("cannot remove {} ({e})", path.display()))?;
                if chained.exists() {
                    std::fs::rename(&chained, &path)
                        .map_err(|e| format!("cannot put {} back ({e})", chained.display()))?;
                    done.push(format!("{hook}: removed, the chained hook is back"));
                } else {
                    done.push(format!("{hook}: removed"));
                }
            }
            Ok(bytes) if String::from_utf8_lossy(&bytes).contains(MARKER) => {
                return Err(format!(
                    "{} was changed since fencepost installed it; remove it by hand",
                    path.display()
                ));
            }
            _ => done.push(format!("{hook}: not installed")),
        }
    }
    Ok(format!("git ({}): {}", hooks.display(), done.join("; ")))
}

pub fn status(hooks: &Path) -> String {
    let states: Vec<String> = HOOKS
        .iter()
        .map(|hook| {
            let path = hooks.join(hook);
            let chained = hooks.join(format!("{hook}{CHAINED}")).exists();
            match std::fs::read(&path) {
                Ok(bytes) if bytes == script(hook).as_bytes() && chained => {
                    format!("{hook}: installed, chaining {hook}{CHAINED}")
                }
                Ok(bytes) if bytes == script(hook).as_bytes() => format!("{hook}: installed"),
                Ok(_) => format!("{hook}: not installed (another hook is there)"),
                Err(_) => format!("{hook}: not installed"),
            }
        })
        .collect();
    format!("git ({}): {}", hooks.display(), states.join("; "))
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("cannot make {} executable ({e})", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Result<(), String> {
    Ok(())
}

/// A live claim the guard found, by the path it covers.
struct HeldBy {
    /// The directory, for a subtree claim.
    subtree: Option<String>,
    /// The name the holder claimed the file by, for a file held through another
    /// hard link (its file-id series).
    link: Option<String>,
    session: Option<String>,
    owner: String,
    pid: u32,
    expires_at_ms: u64,
}

/// `fencepost guard pre-commit|pre-push`: exit 0, or 3 with one line per refused
/// path (1 when it cannot check).
pub fn guard(store_flag: Option<&Path>, args: &GuardArgs) -> Result<ExitCode, Failure> {
    if super::switched_off(GUARD_OFF_SWITCH) {
        return Ok(ExitCode::SUCCESS);
    }
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::Error(format!("cannot read the current directory ({e})")))?;
    let fail = |e: String| {
        Failure::Error(format!(
            "fencepost guard cannot check this {}: {e}",
            what(args.hook)
        ))
    };
    let top = PathBuf::from(text(git(&cwd, &["rev-parse", "--show-toplevel"]).map_err(
        |e| {
            fail(format!(
                "{e}; it runs inside a git work tree, as the hook `fencepost hooks install \
                 --git` installs (git runs it there)"
            ))
        },
    )?));
    let top = super::location(&top)
        .map_err(|e| fail(format!("cannot resolve {} ({e})", top.display())))?;
    let ignore_case = git(&top, &["config", "--bool", "core.ignorecase"])
        .map(|out| text(out) == "true")
        .unwrap_or(false);
    let paths = match args.hook {
        GitHook::PreCommit | GitHook::PreMergeCommit | GitHook::PreApplypatch => {
            staged(&top).map_err(fail)?
        }
        GitHook::PrePush => pushed(&top, &args.args).map_err(fail)?,
    };
    if paths.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    // Holders are known by their sessions' tags (never the ids).
    let mine = session::env_session().map(|s| session::tag(&s));
    let held = held_files(store_flag, &top, &paths, ignore_case, mine.as_deref()).map_err(fail)?;
    let now = now_ms();
    let mut refused = 0;
    for rel in &paths {
        let file = top.join(rel);
        // The file's own claim, else a subtree claim of a directory above it.
        // A staged directory (a submodule's commit) is refused by a subtree claim
        // of itself too.
        // Else the file itself under another name: a hard link of it, or the name
        // it was claimed by before it moved (its file-id series; a breaker: a
        // commit of a file held through a hard link went through).
        let found = std::iter::once(("file", file.as_path()))
            .chain(file.ancestors().map(|dir| ("dir", dir)))
            .find_map(|(kind, path)| held.by_path.get(&(kind, fold(path, ignore_case))))
            .or_else(|| {
                if held.by_file_id.is_empty() || !file.is_file() {
                    return None;
                }
                let file_id = Resource::file(&file).identity().ok()?.file_id?;
                held.by_file_id.get(&file_id)
            });
        let Some(holder) = found else {
            continue;
        };
        if holder.session.is_some() && holder.session == mine {
            continue;
        }
        let who = match &holder.session {
            Some(session) => format!("agent session {}", printable(session)),
            None => format!("{} (pid {})", printable(&holder.owner), holder.pid),
        };
        let who = match (&holder.subtree, &holder.link) {
            (Some(dir), _) => format!("{who}, which holds the directory {}", printable(dir)),
            (None, Some(link)) => format!(
                "{who}, which claimed it as {} (one file under two names: a hard link, or \
                 moved since)",
                printable(
                    &Path::new(link)
                        .strip_prefix(&top)
                        .map_or_else(|_| link.clone(), |rel| rel.display().to_string())
                )
            ),
            (None, None) => who,
        };
        // A claim made without a session names no one the guard could recognise
        // as the committer: its holder may be the committer (a `claim` or `run`
        // from this shell), and is told how to go on.
        let own = if holder.session.is_none() {
            format!(
                "; a claim made without --session cannot be told apart from the committer's: \
                 if it is your own, release it with the handle its claim printed (or claim with \
                 --session and {} with FENCEPOST_SESSION set to the same session)",
                what(args.hook)
            )
        } else {
            String::new()
        };
        // A commit can leave a file out; a push cannot leave out commits already made.
        let leave_out = match args.hook {
            GitHook::PreCommit => "leave it out of this commit",
            // A merge or an applied patch cannot leave one file out.
            GitHook::PreMergeCommit => "merge later (`git merge --abort` undoes this merge)",
            GitHook::PreApplypatch => "apply this patch later (`git am --abort` stops applying)",
            GitHook::PrePush => "push only commits that do not change it",
        };
        crate::output::report(&format!(
            "refusing to {} {}: it is held by {who} until {} ({}); wait until it is released, {leave_out}, or ask the human{own}",
            what(args.hook),
            printable(rel),
            fencepost::utc_timestamp(holder.expires_at_ms),
            expiry_phrase(holder.expires_at_ms, now),
        ));
        refused += 1;
    }
    Ok(if refused == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}

fn what(hook: GitHook) -> &'static str {
    match hook {
        GitHook::PreCommit | GitHook::PreMergeCommit | GitHook::PreApplypatch => "commit",
        GitHook::PrePush => "push",
    }
}

/// Splits `git … -z` output into paths.
fn split_z(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// Every staged path, relative to the top: additions, changes, deletions, and both
/// names of a rename (`--no-renames` shows it as a deletion and an addition).
fn staged(top: &Path) -> Result<Vec<String>, String> {
    let out = git(
        top,
        &[
            "diff",
            "--cached",
            "--name-only",
            "-z",
            "--no-renames",
            "--no-ext-diff",
        ],
    )?;
    Ok(split_z(&out))
}

/// Every path changed by the commits being pushed: git gives `<local ref> <local
/// sha> <remote ref> <remote sha>` lines on stdin.
fn pushed(top: &Path, args: &[OsString]) -> Result<Vec<String>, String> {
    let _ = args; // remote name and URL: the refs on stdin say what is pushed
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| format!("cannot read the pushed refs on stdin ({e})"))?;
    let mut paths = Vec::new();
    for line in input.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, local, _, remote] = fields[..] else {
            return Err(format!("unexpected pre-push input line {line:?}"));
        };
        if local.bytes().all(|b| b == b'0') {
            continue; // a deletion pushes no content
        }
        let out = if remote.bytes().all(|b| b == b'0') {
            git(
                top,
                &[
                    "log",
                    "--format=",
                    "--name-only",
                    "-z",
                    "--no-renames",
                    local,
                    "--not",
                    "--remotes",
                ],
            )?
        } else {
            // A remote commit this repository does not have (pushed by someone
            // else since the last fetch; a force-push over it) cannot be compared:
            // say so and what to do, rather than git's "bad object" (a breaker).
            let object = format!("{remote}^{{commit}}");
            if git(top, &["cat-file", "-e", &object]).is_err() {
                return Err(format!(
                    "the remote's commit {remote} is not in this repository (pushed there \
                     since the last fetch), so the paths this push changes cannot be listed; \
                     run `git fetch`, then push again"
                ));
            }
            git(
                top,
                &[
                    "diff",
                    "--name-only",
                    "-z",
                    "--no-renames",
                    "--no-ext-diff",
                    remote,
                    local,
                ],
            )?
        };
        paths.extend(split_z(&out));
    }
    paths.sort();
    paths.dedup();
    Ok(paths)
}

fn fold(path: &Path, ignore_case: bool) -> String {
    let text = path.to_string_lossy();
    if ignore_case {
        text.to_lowercase()
    } else {
        text.into_owned()
    }
}

/// The live claims a commit can touch, in the stores its paths belong to.
#[derive(Default)]
struct Held {
    /// File and subtree claims, by kind and path.
    by_path: HashMap<(&'static str, String), HeldBy>,
    /// Claims of files by their file-id series, for a file staged under another
    /// name than the one it was claimed by.
    by_file_id: HashMap<fencepost::Key, HeldBy>,
}

/// The live file and subtree claims of the stores these paths belong to ([`Held`]).
/// Two reads of each store (its status, and its series one by one for the file-id
/// ones), a store located once per directory, so the cost is the store's size plus
/// the commit's, never their product.
fn held_files(
    store_flag: Option<&Path>,
    top: &Path,
    paths: &[String],
    ignore_case: bool,
    mine: Option<&str>,
) -> Result<Held, String> {
    let mut stores: HashMap<PathBuf, ()> = HashMap::new();
    let mut located: HashMap<PathBuf, PathBuf> = HashMap::new();
    let mut held = Held::default();
    for rel in paths {
        let file = top.join(rel);
        // A staged entry that is a directory — a submodule's commit, a symbolic
        // link to a directory, a file replaced by a directory — is no file: its
        // stores are those of a subtree claim of it (a breaker: the guard refused
        // every submodule bump, "is a directory"). Its parent's are found by the
        // stores on its path.
        let (dir, resource) = if file.is_dir() {
            (file.clone(), Resource::dir(&file))
        } else {
            (
                file.parent().unwrap_or(top).to_path_buf(),
                Resource::file(&file),
            )
        };
        if located.contains_key(&dir) {
            continue;
        }
        let opened = crate::store::open(
            store_flag,
            Some(&resource),
            top,
            crate::store::Access::Existing,
        )?;
        let locator = PathBuf::from(opened.backend.locator());
        located.insert(dir, locator.clone());
        // The other stores on the directory's path too: the layout may have
        // changed since a file here was claimed (docs/format-v1.md §1.1, rule 5),
        // and one directory's files may have their claims in different stores.
        let others = fencepost_fs::other_stores(store_flag, &resource, top, &locator)
            .map_err(|e| format!("cannot choose a store for {}: {e}", file.display()))?;
        let mut backends: Vec<(PathBuf, Box<dyn fencepost::LeaseStore>)> = Vec::new();
        if opened.exists {
            backends.push((locator, opened.backend));
        }
        for other in others {
            if let Ok(backend) = fencepost_fs::FsStore::open_existing(&other.path) {
                backends.push((other.path, Box::new(backend)));
            }
        }
        for (locator, backend) in backends {
            if stores.insert(locator, ()).is_some() {
                continue;
            }
            let store = fencepost::Store::new(backend);
            let entries = store
                .status()
                .map_err(|e| crate::output::describe_error(&e))?;
            for entry in entries.iter().filter(|e| live_claim(e)) {
                let kind = if entry.resource.starts_with("dir:") {
                    "dir"
                } else {
                    "file"
                };
                held.by_path.insert(
                    (kind, fold(Path::new(&entry.label), ignore_case)),
                    HeldBy {
                        subtree: (kind == "dir").then(|| entry.label.clone()),
                        link: None,
                        session: session::entry_session(entry),
                        owner: entry.owner.clone(),
                        pid: entry.pid,
                        expires_at_ms: entry.expires_at_ms,
                    },
                );
            }
            let series = store
                .key_status()
                .map_err(|e| crate::output::describe_error(&e))?;
            // The committer's own claims refuse nothing: left out, so that a commit
            // of many files costs no file-id lookups for them.
            for entry in series.iter().filter(|e| {
                e.live
                    && e.state == ClaimState::Held
                    && e.key.as_str().starts_with("inode-")
                    && (mine.is_none() || session::entry_session(e).as_deref() != mine)
            }) {
                held.by_file_id.insert(
                    entry.key.clone(),
                    HeldBy {
                        subtree: None,
                        link: Some(entry.label.clone()),
                        session: session::entry_session(entry),
                        owner: entry.owner.clone(),
                        pid: entry.pid,
                        expires_at_ms: entry.expires_at_ms,
                    },
                );
            }
        }
    }
    Ok(held)
}

/// A live claim of a file, or of a subtree (`dir:`), the kinds a commit can touch.
fn live_claim(entry: &StatusEntry) -> bool {
    entry.live
        && entry.state == ClaimState::Held
        && (entry.resource.starts_with("file:") || entry.resource.starts_with("dir:"))
}

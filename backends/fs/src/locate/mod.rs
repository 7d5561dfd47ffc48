//! Store location: one resource, one store, whatever the caller's working
//! directory, worktree or nesting (`docs/format-v1.md`, "Store location").
//!
//! - `git` — finds a repository's common git directory by reading `.git` files and
//!   `commondir`, without running git.
//! - `unix` / `windows` / `other` — per platform: the per-user state directory, and
//!   the plain spelling of a resolved path. Same signatures on every platform.

mod git;
mod history;
mod split;
mod worktrees;

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as sys;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as sys;

#[cfg(not(any(unix, windows)))]
mod other;
#[cfg(not(any(unix, windows)))]
use other as sys;

pub use split::{
    SPLIT_SCAN_LIMIT, SubtreeSplit, stores_below, subtree_split, subtree_split_within,
};

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use fencepost::Resource;

/// The name of a deliberate store marker: an existing directory by this name, at
/// the anchor or above it, is the store (rule 2).
pub const STORE_DIR_NAME: &str = ".fencepost";

/// The name of a repository's store inside its common git directory (rule 3).
pub const REPOSITORY_STORE_NAME: &str = "fencepost";

/// Which rule picked a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreScope {
    /// Rule 1: named by the caller (`--store` / `FENCEPOST_STORE`).
    Explicit,
    /// Rule 2: the nearest existing `.fencepost` directory at or above the anchor.
    Marker,
    /// Rule 3: `fencepost/` in the common git directory of the repository that
    /// contains the anchor, shared by every worktree of that repository.
    Repository,
    /// Rule 4: the per-user store, outside any repository.
    User,
    /// Rule 5: the store a file's or directory's claims were made in, kept after
    /// the layout around it changed (a repository or a `.fencepost` directory made
    /// or removed since), so its claims do not start over in another store.
    Earlier,
}

impl fmt::Display for StoreScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreScope::Explicit => "named by --store or FENCEPOST_STORE",
            StoreScope::Marker => "a .fencepost directory",
            StoreScope::Repository => "the repository's store, shared by all its worktrees",
            StoreScope::User => "the per-user store",
            StoreScope::Earlier => {
                "the store its claims were made in, kept since the layout around it changed"
            }
        })
    }
}

/// Where a resource's store is, and which rule said so.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreLocation {
    /// The store directory: absolute, valid UTF-8 (so its locator round-trips). It
    /// may not exist yet; [`FsStore::open`](crate::FsStore::open) creates it,
    /// [`FsStore::open_existing`](crate::FsStore::open_existing) does not.
    pub path: PathBuf,
    /// The rule that picked it.
    pub scope: StoreScope,
}

/// Why no store could be located. Each variant displays as one line that says what
/// to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocateError {
    /// The store path is not valid Unicode, so it cannot be handed to other
    /// processes exactly (the locator, and `FENCEPOST_STORE`, are text).
    #[error(
        "the store path {} is not valid UTF-8, so it cannot be passed on to other processes \
         exactly (FENCEPOST_STORE is text); use a store path that is valid UTF-8 (--store or \
         FENCEPOST_STORE)",
        .path.display()
    )]
    NotUtf8 {
        /// The path (displayed lossily).
        path: PathBuf,
    },
    /// The named store reads as a URL (`scheme:/…`), not a directory: a mistyped
    /// `etcd://` address, or another service's, would otherwise become a
    /// directory of that name where nobody else looks (a new user's
    /// `etcd:/host:2379/x` made `./etcd:/host:2379/x` and claimed there).
    #[error(
        "the store {store} reads as a URL, not a directory; the store URL fencepost \
         knows is etcd://host:2379/prefix (the etcd backend), or name a directory \
         (write ./{store} for a directory of that name)"
    )]
    NotADirectory {
        /// The store as named.
        store: String,
    },
    /// A lock or slot whose store the worktrees of its repository do not agree on:
    /// the same place in another worktree (or the main checkout) locates another
    /// store, so the name could be held in each at once (`.fencepost` markers made
    /// in one checkout only; a breaker found two holders).
    #[error(
        "the checkouts of this repository locate different stores for locks: {} from \
         here, {} from {}, so a lock could have a holder in each; make every checkout \
         find one store{hint}, or give every agent one FENCEPOST_STORE",
        .here.display(), .there.display(), .worktree.display()
    )]
    WorktreesSplit {
        /// The store located from here.
        here: PathBuf,
        /// The store located from the same place in `worktree`.
        there: PathBuf,
        /// The same place in the other worktree (or main checkout).
        worktree: PathBuf,
        /// What to do about a marker store of the two, if one is (empty when
        /// neither is).
        hint: String,
    },
    /// The resource itself is invalid (an empty file path, no working directory).
    #[error(transparent)]
    Resource(#[from] fencepost::Error),
    /// A `.git` file or `commondir` could not be read or does not lead to a git
    /// directory.
    #[error(
        "cannot find the git directory of the repository at {}: {} {reason}; repair the \
         repository (git worktree repair), or name a store with --store or FENCEPOST_STORE",
        .work_tree.display(), .path.display()
    )]
    Repository {
        /// The work tree whose `.git` entry was followed.
        work_tree: PathBuf,
        /// The file or directory that was wrong.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
    /// Outside any repository, and the per-user state directory is unknown.
    #[error(
        "no store for {anchor}: it is outside any git repository, and there is no per-user \
         store because {reason}; set {fix}, or name a store with --store or FENCEPOST_STORE",
        anchor = .anchor.display()
    )]
    NoUserStore {
        /// The anchor that is outside every repository.
        anchor: PathBuf,
        /// Why the per-user directory is unknown (which variable is unset).
        reason: String,
        /// The variable(s) to set.
        fix: &'static str,
    },
    /// A directory below a subtree's directory cannot be listed, so whether a
    /// repository or store below it holds claims of its own cannot be seen.
    #[error(
        "cannot look below dir {} at {} ({reason}): a subtree claim must see every \
         repository and store below it, whose claims could stand beside it; {}, claim \
         a smaller directory, or name one store with --store or FENCEPOST_STORE",
        .dir.display(), .below.display(),
        if *.denied { "make it readable" } else { "fix or remove what cannot be listed" }
    )]
    Unreadable {
        /// The subtree's directory.
        dir: PathBuf,
        /// The directory below it that could not be listed.
        below: PathBuf,
        /// Why.
        reason: String,
        /// The listing was refused for lack of permission (the advice is then to
        /// make it readable; for another cause, a path too long to list say, that
        /// would not help).
        denied: bool,
    },
}

/// Finds the store for `resource` (`None`: for `status`, which reads the store of
/// the working directory), for a process working in `cwd`.
///
/// The *anchor* is the file's own resolved parent directory for a file resource
/// (every spelling of one file, from any working directory, has one anchor), and
/// `cwd` for a lock or `None`. First match wins:
///
/// 1. `explicit` (from `--store` / `FENCEPOST_STORE`, chosen by the caller; an empty
///    path counts as not given), made absolute against `cwd`;
/// 2. the nearest existing `.fencepost` **directory** at or above the anchor (a
///    deliberate marker of a store's scope);
/// 3. inside a git repository: `fencepost/` in the repository's **common git
///    directory**, found from the nearest `.git` entry at or above the anchor (a
///    directory, or a file whose `gitdir:` line names one) — or the nearest
///    directory that is itself a git directory (a bare repository), whichever git
///    would find first — and that directory's `commondir` file, without running git. Every linked worktree of a repository
///    shares it; for a file, the repository containing the file decides, so a
///    nested repository or submodule cannot split one file into two stores;
/// 4. outside any repository: the per-user store, `$XDG_STATE_HOME/fencepost`, else
///    `$HOME/.local/state/fencepost` (`%LOCALAPPDATA%\fencepost` on Windows);
/// 5. for a file or a directory, when the store rules 2 to 4 pick holds no record
///    touching it ([`Resource::history_keys`]) but another store on its path does
///    (a `.fencepost` directory or repository store at or above the anchor, or the
///    per-user store): the nearest such store ([`StoreScope::Earlier`]). Claims
///    stay where they were made when the layout changes under them — a repository
///    initialised or a `.fencepost` made since — instead of starting over, token 1,
///    beside a live lease.
///
/// Nothing is created or written. Pass [`StoreLocation::path`] to
/// [`FsStore::open`](crate::FsStore::open) to claim, or to
/// [`FsStore::open_existing`](crate::FsStore::open_existing) to only read.
///
/// # Errors
///
/// [`LocateError::NotUtf8`] when the store path is not valid UTF-8 (never passed on
/// lossily); [`LocateError::Resource`] for an invalid file resource (an empty path,
/// a directory);
/// [`LocateError::Repository`] when a `.git` file or `commondir` is unreadable or
/// leads nowhere; [`LocateError::WorktreesSplit`] for a lock or slot whose store
/// another checkout of the repository locates elsewhere (`worktrees.rs`);
/// [`LocateError::NotADirectory`] for a named store that reads as a URL; [`LocateError::NoUserStore`] outside every repository when
/// `HOME` (and `XDG_STATE_HOME`; `LOCALAPPDATA` on Windows) is unset — never a
/// store in `/`.
///
/// Pinned by the tests of `backends/fs/tests/fs.rs` (`locate_*`) and, with real git
/// repositories and processes, `cli/tests/store_location.rs`.
///
/// # Examples
///
/// ```
/// # let tmp = tempfile::tempdir()?;
/// # // Resolved, as the rule resolves anchors (Windows: without the `\\?\` prefix).
/// # let top = if cfg!(windows) { tmp.path().to_path_buf() } else { tmp.path().canonicalize()? };
/// # std::fs::create_dir_all(top.join(".fencepost"))?;
/// # std::fs::create_dir_all(top.join("src/deep"))?;
/// use fencepost::Resource;
/// use fencepost_fs::{StoreScope, locate_store};
///
/// // A .fencepost directory above the file marks the store.
/// let file = Resource::file(top.join("src/deep/a.txt"));
/// let found = locate_store(None, Some(&file), &top)?;
/// assert_eq!(found.path, top.join(".fencepost"));
/// assert_eq!(found.scope, StoreScope::Marker);
/// // An explicit path always wins, made absolute against the working directory.
/// let lock = Resource::lock("db:migrations");
/// assert_eq!(locate_store(Some("s".as_ref()), Some(&lock), &top)?.path, top.join("s"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn locate_store(
    explicit: Option<&Path>,
    resource: Option<&Resource>,
    cwd: &Path,
) -> Result<StoreLocation, LocateError> {
    locate_with(explicit, resource, cwd, &|name| std::env::var_os(name))
}

/// [`locate_store`] with the environment given as a function (for tests).
#[doc(hidden)]
pub fn locate_with(
    explicit: Option<&Path>,
    resource: Option<&Resource>,
    cwd: &Path,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<StoreLocation, LocateError> {
    let cwd = std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let location = match explicit.filter(|p| !p.as_os_str().is_empty()) {
        Some(explicit) if reads_as_url(explicit) => {
            return Err(LocateError::NotADirectory {
                store: explicit.display().to_string(),
            });
        }
        Some(explicit) => StoreLocation {
            path: cwd.join(explicit),
            scope: StoreScope::Explicit,
        },
        None => {
            let anchor = anchor(resource, &cwd)?;
            let location = history::follow(discover(&anchor, env)?, resource, &anchor, env);
            // A lock's name is scoped by its store: every worktree of the
            // repository must find the same one, or a lock gets two holders.
            if matches!(resource, Some(Resource::Lock(_) | Resource::Slot(..))) {
                worktrees::one_store_for_names(&anchor, &location, env, &discover)?;
            }
            location
        }
    };
    if location.path.to_str().is_none() {
        return Err(LocateError::NotUtf8 {
            path: location.path,
        });
    }
    Ok(location)
}

/// The stores other than `chosen` (the one [`locate_store`] gave) that the
/// location rule could pick for `resource` under another layout of the directories
/// above it, and that exist: each `.fencepost` directory and repository store at or
/// above its anchor, and the per-user store, nearest first; for a directory also
/// the stores of the directories below it that have one of their own
/// ([`stores_below`]). A claim of a file or directory made in `chosen` asks each of
/// them, after it landed, for a live claim in its way
/// ([`fencepost::Store::claim_beside`], [`fencepost::Store::conflict`]), so a claim
/// made while the layout changed cannot stand beside one made before. Stores are
/// told apart by the directory they are, not by how they are spelled: one reached
/// through a symbolic link (a `.fencepost` link to the per-user store) is listed
/// once, and never when it is `chosen` itself. Empty for a lock or a slot (a name is
/// scoped by its store) and when `explicit` names the store.
///
/// # Errors
///
/// [`LocateError::Resource`] for an invalid resource.
///
/// Pinned by `cli/tests/store_location.rs` (`layout_changes`).
pub fn other_stores(
    explicit: Option<&Path>,
    resource: &Resource,
    cwd: &Path,
    chosen: &Path,
) -> Result<Vec<StoreLocation>, LocateError> {
    if explicit.is_some_and(|p| !p.as_os_str().is_empty())
        || !matches!(resource, Resource::File(_) | Resource::Dir(_))
    {
        return Ok(Vec::new());
    }
    let cwd = std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let anchor = anchor(Some(resource), &cwd)?;
    let env = |name: &str| std::env::var_os(name);
    let mut candidates = history::stores_on_the_path(&anchor, &env);
    candidates.extend(
        stores_below(resource, &cwd)?
            .into_iter()
            .filter(|s| s.path.is_dir()),
    );
    // The directory each is: a store under two names is one store.
    let identity = store_identity;
    let mut seen = vec![identity(chosen)];
    let mut others = Vec::new();
    for store in candidates {
        let id = identity(&store.path);
        if !seen.contains(&id) {
            seen.push(id);
            others.push(store);
        }
    }
    Ok(others)
}

/// The directory a store path is, for telling stores apart: resolved (symbolic
/// links followed), or the path as given when it cannot be resolved. One store
/// reached under two names has one identity.
pub fn store_identity(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The existing stores the location rule could pick for a path in `dir` under one
/// layout or another: each `.fencepost` directory and repository store at or
/// above it, and the per-user store, nearest first (rule 5's "stores on the
/// path"). `status` reads them for claims kept in an earlier store.
pub fn stores_on_the_path(dir: &Path) -> Vec<StoreLocation> {
    let dir = std::fs::canonicalize(dir).map_or_else(|_| dir.to_path_buf(), sys::plain);
    let env = |name: &str| std::env::var_os(name);
    history::stores_on_the_path(&dir, &env)
}

/// The per-user store (rule 4's directory), whether or not it exists, or `None`
/// when neither `XDG_STATE_HOME` nor `HOME` (`LOCALAPPDATA` on Windows) names
/// one. The agent hooks keep their session notes there
/// (`docs/format-v1.md` §1.3): one place, whichever directory a session works
/// from.
pub fn user_store() -> Option<PathBuf> {
    let env = |name: &str| std::env::var_os(name);
    sys::user_state_dir(&env)
        .ok()
        .map(|dir| dir.join("fencepost"))
}

/// The store rules 2 to 4 pick for `resource` (`None`: the working directory's)
/// from `cwd`, whatever rule 5 would keep: the store of the layout as it is now.
/// `status` uses it to show claims that rule 5 keeps elsewhere beside the ones of
/// the store it reads (`cli/tests/store_location.rs`, `layout_changes`).
///
/// # Errors
///
/// As [`locate_store`] without an explicit store.
pub fn locate_by_layout(
    resource: Option<&Resource>,
    cwd: &Path,
) -> Result<StoreLocation, LocateError> {
    let cwd = std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let env = |name: &str| std::env::var_os(name);
    discover(&anchor(resource, &cwd)?, &env)
}

/// Rules 2 to 4, from `anchor`.
fn discover(
    anchor: &Path,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<StoreLocation, LocateError> {
    if let Some(marker) = anchor
        .ancestors()
        .map(|dir| dir.join(STORE_DIR_NAME))
        .find(|candidate| candidate.is_dir())
    {
        return Ok(StoreLocation {
            path: marker,
            scope: StoreScope::Marker,
        });
    }
    if let Some(common) = git::common_dir(anchor)? {
        return Ok(StoreLocation {
            path: common.join(REPOSITORY_STORE_NAME),
            scope: StoreScope::Repository,
        });
    }
    match sys::user_state_dir(env) {
        Ok(dir) => Ok(StoreLocation {
            path: dir.join("fencepost"),
            scope: StoreScope::User,
        }),
        Err(reason) => Err(LocateError::NoUserStore {
            anchor: anchor.to_path_buf(),
            reason,
            fix: sys::USER_DIR_FIX,
        }),
    }
}

/// Whether a named store reads as a URL: a scheme of two or more characters (a
/// letter, then letters, digits, `+`, `-` or `.`; one letter is a Windows drive,
/// `C:/store`) followed by `:/`, or `etcd` followed by `:` whatever comes next
/// (`etcd:host:2379/x`); blanks around the scheme do not hide it (` etcd://…`,
/// `etcd ://…`, a breaker). Pinned by `a_store_named_like_a_url_is_refused`.
fn reads_as_url(store: &Path) -> bool {
    let Some(text) = store.to_str() else {
        return false;
    };
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let scheme = scheme.trim();
    let etcd = scheme.eq_ignore_ascii_case("etcd");
    (etcd || rest.trim_start().starts_with('/'))
        && scheme.len() >= 2
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// The directory whose surroundings decide the store: a file's resolved parent, a
/// subtree claim's resolved directory, else the (resolved) working directory.
fn anchor(resource: Option<&Resource>, cwd: &Path) -> Result<PathBuf, LocateError> {
    if let Some(Resource::Dir(path)) = resource {
        let identity = Resource::dir(cwd.join(path)).identity()?;
        if let Some(resolved) = identity.path {
            return Ok(sys::plain(resolved));
        }
    }
    if let Some(Resource::File(path)) = resource {
        // The path its key is derived from (resolved exactly as for the key).
        let identity = Resource::file(cwd.join(path)).identity()?;
        if let Some(resolved) = identity.path {
            let parent = resolved.parent().unwrap_or(&resolved);
            return Ok(sys::plain(parent.to_path_buf()));
        }
    }
    Ok(std::fs::canonicalize(cwd).map_or_else(|_| cwd.to_path_buf(), sys::plain))
}

/// The lease store a write of the file `path` (absolute, resolved) would land in,
/// if any: the store `named` (`--store`, `FENCEPOST_STORE`), a `.fencepost`
/// directory or repository store at or above it, existing or not (the store the
/// rule picks for a file there is one of them), or the per-user store (existing or
/// not). Only
/// fencepost writes a store: an agent's edit tool that wrote a record there could
/// forge or end any claim (a breaker: Write of a record file in the per-user store,
/// a named store and a bare repository's store inside the work tree were allowed).
/// Compared component by component, ASCII case folded (a store on a
/// case-insensitive filesystem under another spelling is the same store).
///
/// Pinned by `backends/fs/tests/fs.rs::a_write_into_any_store_is_found`.
pub fn store_holding(path: &Path, named: Option<&Path>) -> Option<PathBuf> {
    let parent = path.parent().unwrap_or(path);
    // The nearest existing directory above the file: the store rules look there.
    let existing = parent
        .ancestors()
        .find(|dir| dir.is_dir())
        .unwrap_or(parent);
    let mut candidates: Vec<PathBuf> = named
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .into_iter()
        .collect();
    // Every store at or above it, existing or not (a record written into a store
    // not made yet would be found by the first claim there).
    for dir in existing.ancestors() {
        candidates.push(dir.join(STORE_DIR_NAME));
        if git::marks_repository(dir)
            && let Ok(Some(common)) = git::common_dir(dir)
        {
            candidates.push(common.join(REPOSITORY_STORE_NAME));
        }
    }
    // (What the rule picks is among these: the nearest marker, the nearest
    // repository's store, else the per-user store.)
    candidates.extend(user_store());
    // Spelt alike on Windows (no `\\?\` prefix), whichever way each was resolved.
    let path = sys::plain(path.to_path_buf());
    candidates.into_iter().find_map(|store| {
        let resolved = sys::plain(store_identity(&store));
        [resolved, sys::plain(store)]
            .into_iter()
            .find(|store| starts_with_ascii_folded(&path, store))
    })
}

/// True when the file at `path` has another name and holds a lease store record:
/// a hard link to a record, made beside the store (a shell command's `ln`). An
/// edit through it would change the record in the store, forging or ending a
/// claim; a record the store has since removed has one name left, and is a plain
/// file again. A symbolic link is not followed (judge where it leads separately).
///
/// Pinned by `backends/fs/tests/fs.rs::a_hard_link_to_a_record_is_found`.
pub fn store_record_linked_at(path: &Path) -> bool {
    let is_file = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file());
    is_file
        && crate::sys::link_count(path).is_some_and(|names| names >= 2)
        && crate::sys::read_record(path)
            .ok()
            .flatten()
            .is_some_and(|bytes| fencepost::record::is_record(&bytes))
}

/// The directory a write creating the file `path` (and any directory missing
/// above it) would turn into a git directory (a `HEAD` file with `objects/` and
/// `refs/` directories, or with a `commondir` file naming a directory that has
/// them), or whose `commondir` it would write: either moves the
/// lease store of every file below that directory (the location rule treats a git
/// directory as a repository), splitting their claims between two stores (a
/// breaker: three allowed Writes, `x/HEAD`, `x/objects/.keep` and `x/refs/.keep`,
/// made `x` a repository). `None` when the write changes no directory's part in
/// the rule.
///
/// Pinned by `backends/fs/tests/fs.rs::a_write_that_makes_a_git_directory_is_found`.
pub fn git_dir_made_by_write(path: &Path) -> Option<PathBuf> {
    let named = |name: &std::ffi::OsStr, expected: &str| {
        name.to_str()
            .is_some_and(|name| name.eq_ignore_ascii_case(expected))
    };
    for dir in path.ancestors().skip(1) {
        let Ok(rest) = path.strip_prefix(dir) else {
            continue;
        };
        let mut components = rest.components();
        let Some(child) = components.next().map(|c| c.as_os_str()) else {
            continue;
        };
        // The write makes `dir/child` a file when it is the path itself, else a
        // directory on the way to it.
        let child_is_file = components.next().is_none();
        if git::is_git_dir(dir) {
            if child_is_file && named(child, "commondir") {
                return Some(dir.to_path_buf());
            }
            continue;
        }
        let head = dir.join("HEAD").is_file() || (child_is_file && named(child, "HEAD"));
        let objects = dir.join("objects").is_dir() || (!child_is_file && named(child, "objects"));
        let refs = dir.join("refs").is_dir() || (!child_is_file && named(child, "refs"));
        // A `HEAD` with a `commondir` is a git directory when the directory it
        // names has the rest, which the content being written decides: refused
        // whatever it names (a breaker: `w/HEAD` and then `w/commondir` naming
        // another repository's `.git` moved `w`'s claims into that store).
        let commondir =
            dir.join("commondir").is_file() || (child_is_file && named(child, "commondir"));
        if head && (commondir || (objects && refs)) {
            return Some(dir.to_path_buf());
        }
    }
    None
}

/// `path.starts_with(prefix)` with each component compared ASCII case folded.
fn starts_with_ascii_folded(path: &Path, prefix: &Path) -> bool {
    let mut path = path.components();
    prefix.components().all(|p| {
        path.next().is_some_and(|c| {
            let (c, p) = (c.as_os_str(), p.as_os_str());
            c == p
                || c.to_str()
                    .zip(p.to_str())
                    .is_some_and(|(c, p)| c.eq_ignore_ascii_case(p))
        })
    })
}

/// True when `path` lies in a git work tree (below a directory holding a `.git`
/// entry) and not inside that `.git` itself: a store created there needs a
/// `.gitignore`, or `git add -A` would commit it.
pub(crate) fn in_work_tree(path: &Path) -> bool {
    let nearest = path
        .ancestors()
        .skip(1)
        .find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok());
    nearest.is_some_and(|work_tree| {
        path.strip_prefix(work_tree)
            .ok()
            .and_then(|rest| rest.components().next())
            .is_none_or(|first| first.as_os_str() != ".git")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_inside_dot_git_is_not_in_the_work_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join(".git/modules/sub")).unwrap();
        assert!(in_work_tree(&repo.join("store")));
        assert!(in_work_tree(&repo.join("a/b/.fencepost")));
        assert!(!in_work_tree(&repo.join(".git/fencepost")));
        assert!(!in_work_tree(&repo.join(".git/modules/sub/fencepost")));
        assert!(!in_work_tree(&tmp.path().join("elsewhere")));
        // A repository nested in another's work tree: its own .git decides.
        std::fs::create_dir_all(repo.join("inner/.git")).unwrap();
        assert!(!in_work_tree(&repo.join("inner/.git/fencepost")));
        assert!(in_work_tree(&repo.join("inner/x/.fencepost")));
    }

    #[test]
    fn a_store_named_like_a_url_is_refused() {
        let cwd = std::env::temp_dir();
        for url in [
            "etcd:/127.0.0.1:2379/x",
            "http://x",
            "Etcd:/h/p",
            "s3://bucket/p",
            "git+ssh://h/r",
            "etcd:10.0.0.1:2379/x",
            " etcd://h:2379/x",
            "etcd ://h:2379/x",
        ] {
            let error = locate_store(Some(Path::new(url)), None, &cwd).unwrap_err();
            assert!(
                matches!(error, LocateError::NotADirectory { .. }),
                "{url}: {error}"
            );
            assert!(
                error.to_string().contains(&format!("write ./{url}")),
                "{error}"
            );
        }
        for directory in ["C:/store", "./http://x", "stores/a:/b", "plain", "a:b"] {
            assert!(
                locate_store(Some(Path::new(directory)), None, &cwd).is_ok(),
                "{directory}"
            );
        }
    }
}

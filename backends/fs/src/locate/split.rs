//! Where a subtree claim would not reach: a directory below it whose files the
//! location rule puts in another store (a nested repository or submodule, or a
//! `.fencepost` marker), so a claim of a file there would never meet the subtree's.

use std::fmt;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use fencepost::Resource;

use super::{
    LocateError, STORE_DIR_NAME, StoreLocation, StoreScope, anchor, discover, git, store_identity,
};

/// Most directories below a subtree's directory that [`subtree_split`] looks
/// through; a larger subtree is reported as [`SubtreeSplit::TooLarge`] rather than
/// walked (a claim of `/` or of a home directory).
pub const SPLIT_SCAN_LIMIT: usize = 50_000;

/// Why a subtree claim of a directory would not cover everything below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubtreeSplit {
    /// `boundary` (a `.git` entry or a `.fencepost` directory) lies below `dir`: the
    /// files beside it are located in a store of their own, where a claim of one of
    /// them never meets the subtree claim.
    StoreBelow {
        /// The subtree's directory, resolved.
        dir: PathBuf,
        /// The `.git` entry or `.fencepost` directory found below it.
        boundary: PathBuf,
    },
    /// More than [`SPLIT_SCAN_LIMIT`] directories lie below `dir`: not looked through.
    TooLarge {
        /// The subtree's directory, resolved.
        dir: PathBuf,
    },
}

impl fmt::Display for SubtreeSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubtreeSplit::StoreBelow { dir, boundary } => {
                let name = boundary.file_name();
                let what = if name.is_some_and(|n| n == STORE_DIR_NAME) {
                    "a .fencepost store directory"
                } else {
                    "a nested repository or submodule"
                };
                // A `.git` entry or `.fencepost` names the directory it sits in; a
                // bare repository is the directory itself (its parent, claimed,
                // would hold it again: a breaker's advice that looped).
                let inner = if name.is_some_and(|n| n == STORE_DIR_NAME || n == ".git") {
                    boundary.parent().unwrap_or(boundary)
                } else {
                    boundary
                };
                write!(
                    f,
                    "a claim of dir {} cannot cover {}: it holds {what} ({}), whose files are claimed in a store of their own, so dir {} cannot be claimed whole; claim dir {} and the other directories of {} you need separately, or put both in one store (a .fencepost directory above both, or --store / FENCEPOST_STORE)",
                    dir.display(),
                    inner.display(),
                    boundary.display(),
                    dir.display(),
                    inner.display(),
                    dir.display()
                )
            }
            SubtreeSplit::TooLarge { dir } => write!(
                f,
                "a claim of dir {} was not made: it holds more than {SPLIT_SCAN_LIMIT} directories, too many to look through for nested repositories whose files are claimed in stores of their own; claim a smaller directory, or name one store with --store / FENCEPOST_STORE",
                dir.display()
            ),
        }
    }
}

/// For a subtree claim (`resource` a directory, located by the rule, not named by
/// `--store`): the first directory below it that the location rule gives a store
/// of its own, so a claim of a file there would not meet the subtree claim; `None`
/// for any other resource, a directory that does not exist, or a subtree with no
/// such boundary. In a marker's store (`.fencepost` above the directory) only
/// another `.fencepost` below splits it; in a repository's or the per-user store, a
/// `.git` entry below does too. Symbolic links are not followed (a file reached
/// through one is the file it resolves to, outside the subtree).
///
/// The look is made before claiming; after the claim landed, the stores below
/// ([`stores_below`]) are asked for claims in its way, so a repository made below
/// while the claim was made cannot hold a file of the subtree beside it. One made
/// below a subtree already held is met by the claims of files there: they ask the
/// stores on their path, the subtree's among them.
///
/// # Errors
///
/// As [`locate_store`](super::locate_store) for the directory itself.
///
/// Pinned by `backends/fs/tests/fs.rs` (`subtree_split_*`) and, through the CLI,
/// `cli/tests/store_location.rs`.
pub fn subtree_split(resource: &Resource, cwd: &Path) -> Result<Option<SubtreeSplit>, LocateError> {
    subtree_split_within(resource, cwd, SPLIT_SCAN_LIMIT)
}

/// [`subtree_split`] looking through at most `limit` directories (for tests).
#[doc(hidden)]
pub fn subtree_split_within(
    resource: &Resource,
    cwd: &Path,
    limit: usize,
) -> Result<Option<SubtreeSplit>, LocateError> {
    let mut split = None;
    walk(resource, cwd, limit, Walk::Splits, &mut |found| {
        split = Some(match found {
            Found::Boundary { dir, boundary, .. } => SubtreeSplit::StoreBelow { dir, boundary },
            Found::TooLarge { dir } => SubtreeSplit::TooLarge { dir },
        });
        ControlFlow::Break(())
    })?;
    Ok(split)
}

/// For a subtree claim: the stores of every directory below it that the location
/// rule gives a store of its own (as [`subtree_split`] finds them, looking
/// through at most [`SPLIT_SCAN_LIMIT`] directories), existing or not. A subtree
/// claim asks them, after it landed, for a claim below it
/// (`fencepost::Store::claim_beside`): one made below since [`subtree_split`]
/// looked (a repository initialised there while the claim waited) must not stand
/// beside it. In a marker's store, where repositories below do not split the
/// subtree, their stores that exist are listed too: claims made there before the
/// marker appeared stay there (rule 5). Empty for any other resource.
///
/// # Errors
///
/// As [`subtree_split`].
///
/// Pinned by `cli/tests/store_location.rs` (`layout_changes`).
pub fn stores_below(resource: &Resource, cwd: &Path) -> Result<Vec<StoreLocation>, LocateError> {
    let mut stores: Vec<StoreLocation> = Vec::new();
    walk(
        resource,
        cwd,
        SPLIT_SCAN_LIMIT,
        Walk::EveryStore,
        &mut |found| {
            if let Found::Boundary { store, .. } = found
                && !stores.contains(&store)
            {
                stores.push(store);
            }
            ControlFlow::Continue(())
        },
    )?;
    Ok(stores)
}

/// What [`walk`] reports as a boundary.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// Where the location rule as it is now gives files another store: a
    /// repository below splits a subtree only when no marker above decides.
    Splits,
    /// Also every repository's store below, whether or not the rule picks it now:
    /// a claim made there before a `.fencepost` directory appeared above stays
    /// there (rule 5; a breaker: a subtree claim made in a new marker's store did
    /// not ask a nested repository's store, where a subtree below it was held).
    EveryStore,
}

/// What [`walk`] found below a subtree's directory.
enum Found {
    /// A `.git` entry, a git directory or a `.fencepost` directory below `dir`,
    /// whose files are located in `store`.
    Boundary {
        dir: PathBuf,
        boundary: PathBuf,
        store: StoreLocation,
    },
    /// More than the limit of directories below `dir`.
    TooLarge { dir: PathBuf },
}

/// Walks the directories below `resource` (a directory), calling `visit` with each
/// boundary found, until it breaks. The boundaries are what the location rule
/// sees (`discover`): a `.fencepost` entry that is a directory (a symbolic link to
/// one too, as the rule follows it), a `.git` entry, and a directory that is
/// itself a git directory (a bare repository); each of another store than the
/// directory's own. Directories are not entered through symbolic links.
fn walk(
    resource: &Resource,
    cwd: &Path,
    limit: usize,
    mode: Walk,
    visit: &mut dyn FnMut(Found) -> ControlFlow<()>,
) -> Result<(), LocateError> {
    if !matches!(resource, Resource::Dir(_)) {
        return Ok(());
    }
    let cwd = std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let dir = anchor(Some(resource), &cwd)?;
    if !dir.is_dir() {
        return Ok(());
    }
    let env = |name: &str| std::env::var_os(name);
    let own = discover(&dir, &env)?;
    let repositories_split = own.scope != StoreScope::Marker;
    let mut pending = vec![dir.clone()];
    let mut seen = 0usize;
    let mut boundary = |boundary: PathBuf, store: StoreLocation| {
        visit(Found::Boundary {
            dir: dir.clone(),
            boundary,
            store,
        })
    };
    // The store of the repository at `repository` (its `.git`'s directory, or a
    // bare repository), when `mode` counts it though the rule does not pick it.
    let every_store = |repository: &Path| -> Option<StoreLocation> {
        if mode != Walk::EveryStore || repositories_split {
            return None;
        }
        let common = git::common_dir(repository).ok()??;
        let path = common.join(super::REPOSITORY_STORE_NAME);
        (path.is_dir() && store_identity(&path) != store_identity(&own.path)).then_some(
            StoreLocation {
                path,
                scope: StoreScope::Repository,
            },
        )
    };
    while let Some(current) = pending.pop() {
        // Unreadable, the claims below it cannot be ruled out: an error, never a
        // skip (a breaker: a directory made unreadable for a moment let a subtree
        // claim stand beside a nested repository's claim below it). Removed since
        // it was listed, it holds nothing.
        let unreadable = |e: std::io::Error| LocateError::Unreadable {
            dir: dir.clone(),
            below: current.clone(),
            reason: e.to_string(),
            denied: e.kind() == std::io::ErrorKind::PermissionDenied,
        };
        let entries = match std::fs::read_dir(&current) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(unreadable(e)),
        };
        for entry in entries {
            let entry = entry.map_err(unreadable)?;
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            let path = entry.path();
            let below = current != dir;
            if name == ".git" {
                // A linked worktree of the same repository (its `.git` a file
                // naming a worktree of ours) shares this store: its files' claims
                // meet the subtree's (a breaker: `claim --dir .` was refused over
                // a worktree made inside the checkout, and no advice helped).
                if below
                    && repositories_split
                    && let Ok(there) = discover(&current, &env)
                    && there.path != own.path
                    && boundary(path.clone(), there).is_break()
                {
                    return Ok(());
                }
                if below
                    && let Some(there) = every_store(&current)
                    && boundary(path, there).is_break()
                {
                    return Ok(());
                }
                continue;
            }
            // Followed as the rule follows it (a breaker: a `.fencepost` link to a
            // directory below a subtree split it unseen).
            if name == STORE_DIR_NAME && path.is_dir() {
                // A link to the subtree's own store is that store, not another
                // (a breaker: it was taken for a boundary).
                if below && store_identity(&path) != store_identity(&own.path) {
                    let store = StoreLocation {
                        path: path.clone(),
                        scope: StoreScope::Marker,
                    };
                    if boundary(path, store).is_break() {
                        return Ok(());
                    }
                }
                continue;
            }
            if kind.is_dir() {
                // A directory that is itself a git directory is a repository of
                // its own to the rule (a breaker: a bare repository below a
                // subtree split it unseen).
                if repositories_split
                    && git::is_git_dir(&path)
                    && let Ok(there) = discover(&path, &env)
                    && there.path != own.path
                {
                    if boundary(path, there).is_break() {
                        return Ok(());
                    }
                    continue;
                }
                if git::is_git_dir(&path)
                    && let Some(there) = every_store(&path)
                {
                    if boundary(path, there).is_break() {
                        return Ok(());
                    }
                    continue;
                }
                seen += 1;
                if seen > limit {
                    let _ = visit(Found::TooLarge { dir });
                    return Ok(());
                }
                pending.push(path);
            }
        }
    }
    Ok(())
}

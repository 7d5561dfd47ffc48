//! Where a subtree claim would not reach: a directory below it whose files the
//! location rule puts in another store (a nested repository or submodule, or a
//! `.fencepost` marker), so a claim of a file there would never meet the subtree's.

use std::fmt;
use std::path::{Path, PathBuf};

use fencepost::Resource;

use super::{LocateError, STORE_DIR_NAME, StoreScope, anchor, discover};

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
                let what = if boundary.file_name().is_some_and(|n| n == STORE_DIR_NAME) {
                    "a .fencepost store directory"
                } else {
                    "a nested repository or submodule"
                };
                let inner = boundary.parent().unwrap_or(boundary);
                write!(
                    f,
                    "a claim of dir {} cannot cover {}: it holds {what} ({}), whose files are claimed in a store of their own; claim dir {} separately as well, or put both in one store (a .fencepost directory above both, or --store / FENCEPOST_STORE)",
                    dir.display(),
                    inner.display(),
                    boundary.display(),
                    inner.display()
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
/// The look is made once, when claiming: a repository created below a held
/// subtree afterwards is not noticed.
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
    if !matches!(resource, Resource::Dir(_)) {
        return Ok(None);
    }
    let cwd = std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let dir = anchor(Some(resource), &cwd)?;
    if !dir.is_dir() {
        return Ok(None);
    }
    let env = |name: &str| std::env::var_os(name);
    let own = discover(&dir, &env)?;
    let repositories_split = own.scope != StoreScope::Marker;
    let mut pending = vec![dir.clone()];
    let mut seen = 0usize;
    while let Some(current) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            // Unreadable: nobody claims a file there through this user's view.
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            let below = current != dir;
            if name == ".git" {
                // A linked worktree of the same repository (its `.git` a file
                // naming a worktree of ours) shares this store: its files' claims
                // meet the subtree's (a breaker: `claim --dir .` was refused over
                // a worktree made inside the checkout, and no advice helped).
                let same_store =
                    || discover(&current, &env).is_ok_and(|there| there.path == own.path);
                if below && repositories_split && !same_store() {
                    return Ok(Some(SubtreeSplit::StoreBelow {
                        dir,
                        boundary: entry.path(),
                    }));
                }
                continue;
            }
            if name == STORE_DIR_NAME && kind.is_dir() {
                if below {
                    return Ok(Some(SubtreeSplit::StoreBelow {
                        dir,
                        boundary: entry.path(),
                    }));
                }
                continue;
            }
            if kind.is_dir() {
                seen += 1;
                if seen > limit {
                    return Ok(Some(SubtreeSplit::TooLarge { dir }));
                }
                pending.push(entry.path());
            }
        }
    }
    Ok(None)
}

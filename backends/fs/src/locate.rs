//! Store discovery (docs/protocol.md §5).

use std::path::{Path, PathBuf};

/// The name of a store directory found by walking up, and of the default one.
pub const STORE_DIR_NAME: &str = ".fencepost";

/// Finds the store directory for a process working in `cwd` (docs/protocol.md §5), in this
/// order:
///
/// 1. `explicit` (from `--store` or `FENCEPOST_STORE`, already chosen by the
///    caller), made absolute against `cwd`;
/// 2. the nearest existing `.fencepost` **directory** in `cwd` or any ancestor;
/// 3. `.fencepost` at the root of the enclosing git work tree: the nearest ancestor
///    of `cwd` (or `cwd` itself) that contains a `.git` entry, a directory or a file
///    (worktrees and submodules use a file);
/// 4. `cwd/.fencepost`.
///
/// Two agents in different subdirectories of one tree must land in one store, or
/// there is no mutual exclusion: steps 2 and 3 make them agree without
/// configuration. Nothing is created; pass the result to
/// [`FsStore::open`](crate::FsStore::open).
///
/// The path is not canonicalized (symbolic links in it are kept as written), and a
/// `cwd` that is relative is made absolute against the process's working directory
/// first.
///
/// # Examples
///
/// ```
/// # let tmp = tempfile::tempdir()?;
/// # let repo = tmp.path().join("repo");
/// # std::fs::create_dir_all(repo.join(".git"))?;
/// # std::fs::create_dir_all(repo.join("src/deep"))?;
/// use fencepost_fs::locate_store;
///
/// // No store yet: agents anywhere in the work tree agree on its root.
/// assert_eq!(locate_store(None, &repo.join("src/deep")), repo.join(".fencepost"));
/// // An explicit path always wins, made absolute against the working directory.
/// assert_eq!(locate_store(Some("s".as_ref()), &repo), repo.join("s"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn locate_store(explicit: Option<&Path>, cwd: &Path) -> PathBuf {
    let cwd = std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    if let Some(explicit) = explicit {
        return cwd.join(explicit);
    }
    if let Some(found) = cwd
        .ancestors()
        .map(|dir| dir.join(STORE_DIR_NAME))
        .find(|candidate| candidate.is_dir())
    {
        return found;
    }
    if let Some(work_tree) = cwd
        .ancestors()
        .find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())
    {
        return work_tree.join(STORE_DIR_NAME);
    }
    cwd.join(STORE_DIR_NAME)
}

//! The mediated write: replace a file so that a crash leaves the old content or the
//! new, never a torn file.
//!
//! The content goes to a staging file created exclusively next to the target,
//! flushed, and then renamed over the target. Why a rename here, when the store
//! never renames (docs/protocol.md §5)? The store's rule is about contention: many processes
//! race to create one claim name, and only an exclusive create (or a hard link that
//! fails when the name exists) decides such a race on every platform. Here nothing
//! races for a name: the fence already decided who may write, and the rename only
//! has to publish one complete file atomically. `rename(2)` replaces the target
//! atomically on POSIX; on Windows the standard library renames with
//! replace-existing semantics (`MoveFileExW` with `MOVEFILE_REPLACE_EXISTING`, or
//! the POSIX-semantics rename where the OS has it), which never exposes a partial
//! file either. Writing in place, the alternative, tears the file on a crash.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A staging file in the target's directory; removed on drop unless published.
struct Staged {
    path: PathBuf,
    published: bool,
}

impl Staged {
    /// Creates a fresh staging file in `dir` (exclusively: an existing name, or a
    /// symbolic link planted there, makes the create fail and another name is
    /// tried).
    fn create(dir: &Path, target_name: &str) -> io::Result<(Staged, File)> {
        // Keep the staging name well under every filesystem's 255-byte limit.
        let stem: String = target_name.chars().take(64).collect();
        let mut last_error = None;
        for _ in 0..4 {
            let path = dir.join(format!(
                ".{stem}.{}-{:016x}.fencepost-tmp",
                std::process::id(),
                fencepost::nonce()
            ));
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    return Ok((
                        Staged {
                            path,
                            published: false,
                        },
                        file,
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("no staging name was free")))
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.published {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Why a mediated write did not happen.
#[derive(Debug)]
pub(crate) enum WriteFailure {
    /// The second fence check refused the token: nothing was written.
    Fenced,
    /// The target's directory resolved elsewhere after the confinement check (a
    /// directory was swapped for a symbolic link): nothing was written.
    Moved(PathBuf),
    /// The target is a directory or another non-regular file.
    NotAFile(PathBuf),
    /// The filesystem failed; the target is unchanged.
    Io(&'static str, PathBuf, io::Error),
}

/// Replaces the file at `target` (absolute, already confined) with `content`.
///
/// Creates missing parent directories, stages and flushes the content, then calls
/// `still_authorized` **immediately before** publishing the file, and publishes
/// only if it returns true. On POSIX the directory is flushed after the rename, so
/// the new name survives a power cut.
pub(crate) fn replace(
    target: &Path,
    content: &[u8],
    still_authorized: impl FnOnce() -> bool,
) -> Result<(), WriteFailure> {
    let io = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |e: io::Error| WriteFailure::Io(what, path, e)
    };
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else {
        return Err(WriteFailure::NotAFile(target.to_path_buf()));
    };
    match fs::metadata(target) {
        Ok(metadata) if !metadata.is_file() => {
            return Err(WriteFailure::NotAFile(target.to_path_buf()));
        }
        _ => {}
    }
    fs::create_dir_all(dir).map_err(io("create directory", dir))?;
    // `dir` came out of confinement fully resolved; if it no longer resolves to
    // itself, something was swapped for a link in between.
    let unmoved = || fs::canonicalize(dir).is_ok_and(|real| real == dir);
    if !unmoved() {
        return Err(WriteFailure::Moved(dir.to_path_buf()));
    }

    remove_stale_staging(dir);
    let (mut staged, mut file) =
        Staged::create(dir, &name.to_string_lossy()).map_err(io("create staging file in", dir))?;
    file.write_all(content).map_err(io("write", &staged.path))?;
    if let Ok(metadata) = fs::metadata(target) {
        // Keep the replaced file's permissions (an executable script stays one).
        fs::set_permissions(&staged.path, metadata.permissions())
            .map_err(io("set permissions of", &staged.path))?;
    }
    file.sync_all().map_err(io("flush", &staged.path))?;
    drop(file);

    if !still_authorized() {
        return Err(WriteFailure::Fenced);
    }
    if !unmoved() {
        return Err(WriteFailure::Moved(dir.to_path_buf()));
    }
    fs::rename(&staged.path, target).map_err(io("replace", target))?;
    staged.published = true;
    flush_dir(dir);
    Ok(())
}

/// How old a staging file must be before a write in its directory removes it: far
/// longer than any write takes, so a concurrent writer's file is never touched.
const STALE_STAGING_AGE: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// True for a name this module gives staging files: `.<name>.<pid>-<16 hex>.fencepost-tmp`.
fn is_staging_name(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(".fencepost-tmp"))
    else {
        return false;
    };
    let Some((_, tail)) = rest.rsplit_once('.') else {
        return false;
    };
    let Some((pid, nonce)) = tail.split_once('-') else {
        return false;
    };
    !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && nonce.len() == 16
        && nonce
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Removes staging files left in `dir` by a writer that died mid-write (a killed
/// server): ours by name, regular files (never a link), older than
/// [`STALE_STAGING_AGE`]. Best effort; nothing else in the directory is touched.
fn remove_stale_staging(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(is_staging_name) {
            continue;
        }
        let Ok(metadata) = fs::symlink_metadata(entry.path()) else {
            continue;
        };
        let stale = metadata
            .modified()
            .ok()
            .and_then(|at| at.elapsed().ok())
            .is_some_and(|age| age >= STALE_STAGING_AGE);
        if metadata.is_file() && stale {
            match fs::remove_file(entry.path()) {
                Ok(()) => {
                    tracing::info!(path = %entry.path().display(), "removed a stale staging file")
                }
                Err(e) => {
                    tracing::debug!(path = %entry.path().display(), "cannot remove a stale staging file: {e}")
                }
            }
        }
    }
}

/// Flushes a directory so a rename in it is durable (POSIX); best effort, the
/// content itself was already flushed.
fn flush_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_and_creates_parents() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let target = root.join("a/b/c.txt");
        replace(&target, b"one", || true).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"one");
        replace(&target, b"two", || true).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"two");
        assert_eq!(
            entries(&root.join("a/b")),
            ["c.txt"],
            "staging file left behind"
        );
    }

    #[test]
    fn a_failed_second_check_leaves_the_file_and_no_staging_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let target = root.join("f");
        fs::write(&target, "old").unwrap();
        assert!(matches!(
            replace(&target, b"new", || false),
            Err(WriteFailure::Fenced)
        ));
        assert_eq!(fs::read_to_string(&target).unwrap(), "old");
        assert_eq!(entries(&root), ["f"]);
    }

    #[test]
    fn directories_are_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir(root.join("d")).unwrap();
        assert!(matches!(
            replace(&root.join("d"), b"x", || true),
            Err(WriteFailure::NotAFile(_))
        ));
        assert!(root.join("d").is_dir());
    }

    #[cfg(unix)]
    #[test]
    fn permissions_of_the_replaced_file_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let target = root.join("run.sh");
        fs::write(&target, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o751)).unwrap();
        replace(&target, b"#!/bin/sh\necho hi\n", || true).unwrap();
        let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o751);
    }
}

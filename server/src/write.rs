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
//!
//! **Never outside the root, whatever is swapped meanwhile.** Confinement resolves
//! the target by name, and a directory on that path can be swapped for a symbolic
//! link after it looked (a breaker did it with `renameat2(RENAME_EXCHANGE)` in a
//! loop, and landed a write outside the root in 25 s, leaving staging files there).
//! So every step here acts through handles, not names: the root is opened as a
//! capability ([`cap_std::fs::Dir`]), the target's directory is opened beneath it
//! (a path that would lead outside the root, through a link or `..`, is refused in
//! the same call), and the staging file, the look at the target, the rename and the
//! directory flush all act on that one directory handle. A swap after the open
//! changes nothing: the handle keeps naming the directory that was opened, which
//! is inside the root. (It may be another directory inside the root than the one
//! confinement resolved, if a process swaps directories within the root at that
//! instant; the name check below narrows that, and such a process could write
//! there itself.) The handle follows its directory when it is renamed away, even
//! into `.git`, and a directory made again under the old name passes a name check;
//! so right before the publish, and again after it, the handle's directory must be
//! the one the name leads to (same device and inode, on POSIX): refused before,
//! and reported failed after, never "written" when the content went elsewhere
//! (a breaker: moved into `.git` during a write, reported written).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};

/// A staging file in the target's directory; removed on drop unless published.
struct Staged<'d> {
    dir: &'d Dir,
    name: String,
    published: bool,
}

impl<'d> Staged<'d> {
    /// Creates a fresh staging file in `dir` (exclusively: an existing name, or a
    /// symbolic link planted there, makes the create fail and another name is
    /// tried).
    fn create(dir: &'d Dir, target_name: &str) -> io::Result<(Staged<'d>, cap_std::fs::File)> {
        // Keep the staging name well under every filesystem's 255-byte limit.
        let stem: String = target_name.chars().take(64).collect();
        let mut last_error = None;
        for _ in 0..4 {
            let name = format!(
                ".{stem}.{}-{:016x}.fencepost-tmp",
                std::process::id(),
                fencepost::nonce()
            );
            match dir.open_with(&name, OpenOptions::new().write(true).create_new(true)) {
                Ok(file) => {
                    return Ok((
                        Staged {
                            dir,
                            name,
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

impl Drop for Staged<'_> {
    fn drop(&mut self) {
        if !self.published {
            let _ = self.dir.remove_file(&self.name);
        }
    }
}

/// Why a mediated write did not happen.
#[derive(Debug)]
pub(crate) enum WriteFailure {
    /// The second fence check refused the token: nothing was written.
    Fenced,
    /// The target's directory resolved elsewhere after the confinement check (a
    /// directory was swapped for a symbolic link), or would lead outside the root:
    /// nothing was written.
    Moved(PathBuf),
    /// The target is a directory or another non-regular file.
    NotAFile(PathBuf),
    /// The filesystem failed; the target is unchanged.
    Io(&'static str, PathBuf, io::Error),
    /// The target's directory was moved away (another made in its place) in the
    /// instant between the last look and the publish: the content landed in the
    /// directory moved away, not at the target, which is unchanged.
    MovedWhilePublishing(PathBuf),
}

/// Replaces the file at `target` (absolute, already confined below `root`, both
/// canonical) with `content`.
///
/// Creates missing parent directories, stages and flushes the content, then calls
/// `still_authorized` **immediately before** publishing the file, and publishes
/// only if it returns true. Every step acts through a handle on the target's
/// directory opened beneath `root` (module docs), so nothing is ever created,
/// replaced or removed outside `root`. On POSIX the directory is flushed after the
/// rename, so the new name survives a power cut.
///
/// # Errors
///
/// [`WriteFailure::Moved`] when the directory would resolve outside `root` or no
/// longer resolves to itself; [`WriteFailure::NotAFile`] when the target is not a
/// regular file; [`WriteFailure::Fenced`] when `still_authorized` says no;
/// [`WriteFailure::Io`] otherwise. In every case the target is unchanged and no
/// staging file is left. Pinned by this module's tests, among them
/// `a_directory_swapped_for_a_link_never_takes_a_write_outside_the_root`.
pub(crate) fn replace(
    root: &Path,
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
    let Ok(below) = dir.strip_prefix(root) else {
        return Err(WriteFailure::Moved(dir.to_path_buf()));
    };
    let root_dir = Dir::open_ambient_dir(root, ambient_authority()).map_err(io("open", root))?;
    // Beneath the root: a component swapped for a link that leads out, or `..`,
    // fails here rather than being followed.
    let moved = |_| WriteFailure::Moved(dir.to_path_buf());
    let parent = if below.as_os_str().is_empty() {
        root_dir
    } else {
        match root_dir.create_dir_all(below) {
            Ok(()) => {}
            Err(e) if escaped(&e) => return Err(moved(e)),
            Err(e) => return Err(io("create directory", dir)(e)),
        }
        match root_dir.open_dir(below) {
            Ok(parent) => parent,
            Err(e) if escaped(&e) => return Err(moved(e)),
            Err(e) => return Err(io("open directory", dir)(e)),
        }
    };
    // `dir` came out of confinement fully resolved; if it no longer resolves to
    // itself, something was swapped for a link in between: refuse rather than
    // write into whatever directory inside the root the handle names now. And the
    // directory it names must still be the one the handle holds: a handle follows
    // its directory when it is renamed away, and a new directory made under the
    // old name resolves to itself (a breaker moved `sub` into `.git` and made a
    // fresh `sub`: the write landed in `.git` and was reported written).
    let unmoved =
        || std::fs::canonicalize(dir).is_ok_and(|real| real == dir) && same_directory(&parent, dir);
    if !unmoved() {
        return Err(WriteFailure::Moved(dir.to_path_buf()));
    }
    let existing = match parent.symlink_metadata(name) {
        Ok(metadata) if !metadata.is_file() => {
            return Err(WriteFailure::NotAFile(target.to_path_buf()));
        }
        Ok(metadata) => Some(metadata),
        Err(_) => None,
    };

    remove_stale_staging(&parent, dir);
    let (mut staged, mut file) = Staged::create(&parent, &name.to_string_lossy())
        .map_err(io("create staging file in", dir))?;
    let staged_path = dir.join(&staged.name);
    file.write_all(content).map_err(io("write", &staged_path))?;
    if let Some(metadata) = existing {
        // Keep the replaced file's permissions (an executable script stays one).
        file.set_permissions(metadata.permissions())
            .map_err(io("set permissions of", &staged_path))?;
    }
    file.sync_all().map_err(io("flush", &staged_path))?;
    drop(file);

    if !still_authorized() {
        return Err(WriteFailure::Fenced);
    }
    if !unmoved() {
        return Err(WriteFailure::Moved(dir.to_path_buf()));
    }
    #[cfg(test)]
    tests::BEFORE_PUBLISH.with(|hook| hook.take().map(|hook| hook()));
    parent
        .rename(&staged.name, &parent, name)
        .map_err(io("replace", target))?;
    staged.published = true;
    flush_dir(&parent);
    // Moved in the instant between the look above and the rename: the content
    // went wherever the directory went, and is never reported written at `target`.
    if !unmoved() {
        return Err(WriteFailure::MovedWhilePublishing(dir.to_path_buf()));
    }
    Ok(())
}

/// Whether `handle` still is the directory `dir` names: the same device and inode
/// (POSIX). Windows keeps a directory with an open handle from being renamed unless
/// the opener allowed it, and has no stable file index in std: the name check alone
/// stands there.
#[cfg(unix)]
fn same_directory(handle: &Dir, dir: &Path) -> bool {
    use cap_std::fs::MetadataExt as _;
    use std::os::unix::fs::MetadataExt as _;
    match (handle.dir_metadata(), std::fs::symlink_metadata(dir)) {
        (Ok(held), Ok(named)) => held.dev() == named.dev() && held.ino() == named.ino(),
        _ => false,
    }
}

/// [`same_directory`] where only the name check stands.
#[cfg(not(unix))]
fn same_directory(_handle: &Dir, _dir: &Path) -> bool {
    true
}

/// True for cap-std's refusal of a path that would leave the directory it is
/// resolved beneath (through a symbolic link or `..`).
fn escaped(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::PermissionDenied
        && error.to_string().contains("outside of the filesystem")
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

/// Removes staging files left in `parent` (the directory `shown` names, for the
/// log) by a writer that died mid-write (a killed server): ours by name, regular
/// files (never a link), older than [`STALE_STAGING_AGE`]. Best effort; nothing
/// else in the directory is touched.
fn remove_stale_staging(parent: &Dir, shown: &Path) {
    let Ok(entries) = parent.entries() else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|name| is_staging_name(name)) else {
            continue;
        };
        let Ok(metadata) = parent.symlink_metadata(name) else {
            continue;
        };
        let stale = metadata
            .modified()
            .ok()
            .and_then(|at| at.into_std().elapsed().ok())
            .is_some_and(|age| age >= STALE_STAGING_AGE);
        if metadata.is_file() && stale {
            let path = shown.join(name);
            match parent.remove_file(name) {
                Ok(()) => tracing::info!(path = %path.display(), "removed a stale staging file"),
                Err(e) => {
                    tracing::debug!(path = %path.display(), "cannot remove a stale staging file: {e}")
                }
            }
        }
    }
}

/// Flushes a directory so a rename in it is durable (POSIX); best effort, the
/// content itself was already flushed.
fn flush_dir(dir: &Dir) {
    #[cfg(unix)]
    if let Ok(handle) = dir.try_clone() {
        let _ = handle.into_std_file().sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

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
        replace(&root, &target, b"one", || true).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"one");
        replace(&root, &target, b"two", || true).unwrap();
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
            replace(&root, &target, b"new", || false),
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
            replace(&root, &root.join("d"), b"x", || true),
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
        replace(&root, &target, b"#!/bin/sh\necho hi\n", || true).unwrap();
        let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o751);
    }

    /// A root with `sub/` and `.git/stolen/` (where `sub` is moved away to), and the
    /// target `sub/f`; the scratch directory lives as long as the first item.
    #[cfg(unix)]
    fn sub_and_stolen() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let scratch = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(scratch.path()).unwrap();
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::create_dir_all(root.join(".git/stolen")).unwrap();
        let target = root.join("sub/f");
        (scratch, root, target)
    }

    /// A directory moved away (into `.git` here) and made again under its name
    /// between the open and the publish: the handle followed the old one, and the
    /// new one resolves to itself, so only the directory's identity tells (a
    /// breaker: the write landed in `.git` and was reported written). Moved right
    /// before the last look (inside the fence's second check): refused, nothing
    /// written anywhere.
    #[cfg(unix)]
    #[test]
    fn a_directory_moved_away_and_made_again_is_refused() {
        let (_scratch, root, target) = sub_and_stolen();
        let outcome = replace(&root, &target, b"new", || {
            fs::rename(root.join("sub"), root.join(".git/stolen/sub")).unwrap();
            fs::create_dir(root.join("sub")).unwrap();
            true
        });
        assert!(
            matches!(outcome, Err(WriteFailure::Moved(_))),
            "{outcome:?}"
        );
        assert!(!target.exists());
        assert_eq!(entries(&root.join(".git/stolen/sub")), Vec::<String>::new());
    }

    std::thread_local! {
        /// Run once between the last look at the target's directory and the
        /// publish, by the next [`replace`] on this thread.
        pub(super) static BEFORE_PUBLISH: std::cell::Cell<Option<Box<dyn FnOnce()>>> =
            const { std::cell::Cell::new(None) };
    }

    /// Moved away and made again in the instant after the last look: the content
    /// went with the directory, and the write is reported failed, never written
    /// at the target.
    #[cfg(unix)]
    #[test]
    fn a_directory_moved_away_while_publishing_is_not_reported_written() {
        let (_scratch, root, target) = sub_and_stolen();
        let (from, to) = (root.join("sub"), root.join(".git/stolen/sub"));
        BEFORE_PUBLISH.with(|hook| {
            hook.set(Some(Box::new(move || {
                fs::rename(&from, &to).unwrap();
                fs::create_dir(&from).unwrap();
            })))
        });
        let outcome = replace(&root, &target, b"new", || true);
        assert!(
            matches!(outcome, Err(WriteFailure::MovedWhilePublishing(_))),
            "{outcome:?}"
        );
        assert!(!target.exists());
        assert_eq!(
            entries(&root.join(".git/stolen/sub")),
            vec!["f".to_string()]
        );
    }

    /// A breaker swapped a directory on the target's path for a symbolic link to a
    /// directory outside the root, over and over (`renameat2(RENAME_EXCHANGE)`),
    /// while writes ran: a write landed outside the root within 25 s, and staging
    /// files were left there. Every step now acts through a handle on the directory
    /// opened beneath the root: however the swaps fall, nothing ever appears outside
    /// the root, and each write lands inside it or is refused.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_swapped_for_a_link_never_takes_a_write_outside_the_root() {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::time::{Duration, Instant};

        let scratch = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(scratch.path()).unwrap();
        let (root, outside) = (base.join("root"), base.join("outside"));
        fs::create_dir_all(root.join("d")).unwrap();
        fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let swapper = {
            let (stop, swaps) = (stop.clone(), swaps.clone());
            let c = |p: PathBuf| CString::new(p.as_os_str().as_bytes()).unwrap();
            let (d, link) = (c(root.join("d")), c(root.join("link")));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: two valid NUL-terminated paths; no memory is shared.
                    let done = unsafe {
                        libc::renameat2(
                            libc::AT_FDCWD,
                            d.as_ptr(),
                            libc::AT_FDCWD,
                            link.as_ptr(),
                            libc::RENAME_EXCHANGE,
                        )
                    };
                    assert_eq!(done, 0, "{}", io::Error::last_os_error());
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let target = root.join("d/file.txt");
        let (mut landed, mut refused) = (0u64, 0u64);
        let end = Instant::now() + Duration::from_secs(1);
        while Instant::now() < end {
            match replace(&root, &target, b"x", || true) {
                Ok(()) => landed += 1,
                Err(_) => refused += 1,
            }
            let escaped: Vec<_> = fs::read_dir(&outside)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert!(
                escaped.is_empty(),
                "after {landed} writes, outside the root: {escaped:?}"
            );
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        // Both outcomes happened: the swaps did fall inside writes.
        assert!(
            landed > 0 && refused > 0,
            "{landed} landed, {refused} refused"
        );
        assert!(swaps.load(Ordering::Relaxed) > 1000);
    }
}

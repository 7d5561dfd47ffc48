//! Platform code, chosen with `cfg`; every module exports the same items:
//!
//! - `sync_dir(path)`: make the entries of directory `path` durable (POSIX: open it
//!   read-only and fsync; elsewhere a no-op, since opening a directory as a file
//!   fails on Windows and NTFS journals names itself).
//! - `open_record(path)` (not POSIX, where `read_record` opens with `O_NOFOLLOW`
//!   itself): open a record for reading without following a symbolic link in its
//!   last component, and only if it is a regular file.
//! - `read_record(path)`: a record's bytes (`None` when absent; empty bytes when the
//!   name is not a regular file, a torn record), in as few system calls as the
//!   platform allows.
//! - `list_names(dir, each)`: every UTF-8 entry name of directory `dir`, refusing a
//!   `dir` that is a symbolic link or not a directory.
//! - `links_unsupported(error)`: whether a failed `hard_link` means "this
//!   filesystem has no hard links" (so the exclusive-create fallback applies).
//! - `link_count(path)`: the number of names of the file at `path`, where the
//!   platform tells it cheaply (`None` elsewhere).
//! - `anonymous_file(dir)` / `link_anonymous(nameless, name)` / `sync_dir_of(nameless)`:
//!   a file with no name yet in `dir`, with `dir` itself open beside it ([`Nameless`];
//!   Linux `O_TMPFILE`; `Ok(None)` where there is none), giving it its record name
//!   exclusively, and flushing `dir` through the handle already open.
//! - `watch_dir(dir)` / `DirWatch::wait(timeout)`: a change notification on a key
//!   directory (Linux inotify; `None` elsewhere, where waiters poll).
//! - `remove_in(dir, name)`: remove an entry of a key directory, never following a
//!   link in place of the directory (POSIX: `unlinkat` on the directory opened with
//!   `O_NOFOLLOW`, no check-then-use window; elsewhere a check, then the removal).
//! - `remove_empty_dir(dir)`: remove a key directory if it is empty, never following
//!   a link in its place (POSIX `rmdir` refuses one; elsewhere a check first).
//! - `watch_ticket(blank, ticket)` / `TicketWatch::wait(timeout)` / `ring(dir, name)`: a
//!   queued waiter's watch on its own ticket, and the ring that wakes it (Linux
//!   inotify and a touch; `None` and a no-op elsewhere).
//! - `FLUSH_AFTER_LINK`: whether a flushed create flushes the record's file after
//!   linking it into place (one journal commit for data and name together) rather
//!   than before (docs/design-07-performance.md).

#[cfg(unix)]
mod unix;
#[cfg(all(test, unix))]
pub(crate) use unix::DIR_FLUSHES;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) use unix::{DirWatch, Inotify, TicketWatch, ring, watch_dir, watch_ticket};
#[cfg(unix)]
pub(crate) use unix::{
    FLUSH_AFTER_LINK, anonymous_file, link_anonymous, link_count, links_unsupported, list_names,
    read_record, remove_in, sync_dir, sync_dir_of,
};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::{
    FLUSH_AFTER_LINK, anonymous_file, link_anonymous, link_count, links_unsupported, list_names,
    open_record, read_record, sync_dir, sync_dir_of,
};

#[cfg(not(any(unix, windows)))]
mod other;
#[cfg(not(any(unix, windows)))]
pub(crate) use other::{
    FLUSH_AFTER_LINK, anonymous_file, link_anonymous, link_count, links_unsupported, list_names,
    open_record, read_record, sync_dir, sync_dir_of,
};

use std::fs::File;
use std::io;
#[cfg(not(unix))]
use std::io::Read;
use std::path::Path;

/// A new file with no name yet (Linux `O_TMPFILE`), and the key directory it is to
/// be linked into, open with `O_DIRECTORY | O_NOFOLLOW`: one path walk serves the
/// nameless file, its link and the directory's flush, and nothing done through
/// `dir` can land outside it (a link swapped in for the directory is refused when it
/// is opened). Never made on platforms without nameless files.
#[cfg_attr(not(any(target_os = "linux", target_os = "android")), allow(dead_code))]
pub(crate) struct Nameless {
    pub(crate) file: File,
    pub(crate) dir: File,
}

/// Rejects an opened record that is not a regular file (a directory or device named
/// like a record), and gives a symbolic link a message that says why it is refused.
#[cfg(not(unix))]
pub(crate) fn require_regular_file(path: &Path, file: File) -> io::Result<File> {
    let metadata = file.metadata()?;
    if metadata.is_file() {
        Ok(file)
    } else {
        Err(not_a_regular_file(path))
    }
}

/// The error for a record name that is not a regular file; says "symbolic link" when
/// it is one.
#[cfg(not(unix))]
pub(crate) fn not_a_regular_file(path: &Path) -> io::Error {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if is_link {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "is a symbolic link; fencepost never follows links inside the store (remove it)",
        )
    } else {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "is not a regular file; a record must be one (remove it)",
        )
    }
}

/// `Ok` when `path` is a directory and not a symbolic link; `NotFound` when it does
/// not exist; an explanatory error otherwise.
pub(crate) fn check_real_dir(path: &Path) -> io::Result<()> {
    let metadata = std::fs::symlink_metadata(path)?;
    if metadata.is_dir() {
        Ok(())
    } else if metadata.file_type().is_symlink() {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "is a symbolic link; fencepost never follows links inside the store",
        ))
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            "is not a directory",
        ))
    }
}

/// The most a record read takes: a v1 record is about 250 bytes, and even one with
/// the longest label a path can give stays far below. A larger file under a
/// record's name is foreign: it reads as empty (torn), so a planted file of any
/// size costs one bounded read, never its size in memory, and the protocol treats
/// it as it treats a torn record (supersedes it, or removes it from a queue).
pub(crate) const RECORD_MAX_BYTES: u64 = 1 << 20;

/// The portable record read: refuse a name that is not a regular file (empty
/// bytes, read as torn), open without following a link, read whole up to
/// [`RECORD_MAX_BYTES`] (a larger file reads as empty).
#[cfg(not(unix))]
pub(crate) fn read_record_portable(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_file() => return Ok(Some(Vec::new())),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut file = match open_record(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    (&mut file)
        .take(RECORD_MAX_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > RECORD_MAX_BYTES {
        bytes.clear();
    }
    Ok(Some(bytes))
}

/// Removes the entry `name` of directory `dir` without following a link anywhere
/// in `dir` itself: `dir` is checked to be a real directory first (missing:
/// success). A name that is a link is removed itself.
#[cfg(not(unix))]
pub(crate) fn remove_in(dir: &Path, name: &str) -> io::Result<()> {
    match check_real_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    match std::fs::remove_file(dir.join(name)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Removes the key directory `dir` if it is empty; "not empty" and "missing" are
/// success. Never follows a link in place of `dir`: POSIX `rmdir` refuses one
/// (`ENOTDIR`, reported with [`check_real_dir`]'s explanation); elsewhere (Windows,
/// where `remove_dir` of a directory link removes the link) `dir` is checked to be
/// a real directory first, leaving the same window as [`remove_in`].
pub(crate) fn remove_empty_dir(dir: &Path) -> io::Result<()> {
    #[cfg(not(unix))]
    match check_real_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::DirectoryNotEmpty
            ) =>
        {
            Ok(())
        }
        Err(e) => match check_real_dir(dir) {
            // A link or a file in place of the directory: say so.
            Err(explained) if explained.kind() != io::ErrorKind::NotFound => Err(explained),
            _ => Err(e),
        },
    }
}

/// The portable listing: check `dir` is a real directory, then list it.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn list_names_portable(dir: &Path, each: &mut dyn FnMut(&str)) -> io::Result<()> {
    check_real_dir(dir)?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(name) = entry.file_name().to_str() {
            each(name);
        }
    }
    Ok(())
}

/// Where there is no change notification (every platform but Linux and Android; on
/// Windows `ReadDirectoryChangesW` would be the counterpart of inotify), waiters
/// poll with backoff: one polling `DirWatch` for all of them.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) struct DirWatch;

/// No change notification here: waiters poll.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn watch_dir(_dir: &Path) -> Option<DirWatch> {
    None
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
impl DirWatch {
    /// Never made here.
    pub(crate) fn wait(&mut self, _timeout: std::time::Duration) -> bool {
        false
    }

    /// Never made here.
    pub(crate) fn drain(&mut self) -> bool {
        false
    }

    /// Never made here.
    pub(crate) fn live(&self) -> bool {
        false
    }
}

/// No inotify here: never made.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) struct Inotify;

/// No ticket watches here: queued waiters poll like every waiter.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) struct TicketWatch;

/// No ticket watches here.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn watch_ticket(_blank: Option<Inotify>, _ticket: &Path) -> Option<TicketWatch> {
    None
}

/// Nobody sleeps on a ticket here: nothing to ring.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn ring(_dir: &Path, _name: &str) -> std::io::Result<()> {
    Ok(())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
impl TicketWatch {
    /// Never made here.
    pub(crate) fn wait(&mut self, _timeout: std::time::Duration) -> bool {
        false
    }

    /// Never made here.
    pub(crate) fn into_blank(self) -> Inotify {
        Inotify
    }
}

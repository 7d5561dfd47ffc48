//! Platform code, chosen with `cfg`; every module exports the same four functions:
//!
//! - `sync_dir(path)`: make the entries of directory `path` durable (POSIX: open it
//!   read-only and fsync; elsewhere a no-op, since opening a directory as a file
//!   fails on Windows and NTFS journals names itself).
//! - `open_record(path)`: open a record for reading without following a symbolic
//!   link in its last component, and only if it is a regular file.
//! - `links_unsupported(error)`: whether a failed `hard_link` means "this
//!   filesystem has no hard links" (so the exclusive-create fallback applies).
//! - `link_count(path)`: the number of names of the file at `path`, where the
//!   platform tells it cheaply (`None` elsewhere).

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::{link_count, links_unsupported, open_record, sync_dir};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::{link_count, links_unsupported, open_record, sync_dir};

#[cfg(not(any(unix, windows)))]
mod other;
#[cfg(not(any(unix, windows)))]
pub(crate) use other::{link_count, links_unsupported, open_record, sync_dir};

use std::fs::File;
use std::io;
use std::path::Path;

/// Rejects an opened record that is not a regular file (a directory or device named
/// like a record), and gives a symbolic link a message that says why it is refused.
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

//! Other targets: no directory flush, a checked open, kind-based classification.

use std::fs::File;
use std::io;
use std::path::Path;

/// Flush before linking, the order that needs nothing of the platform.
pub(crate) const FLUSH_AFTER_LINK: bool = false;

/// A no-op: no portable way to flush a directory here.
pub(crate) fn sync_dir(_path: &Path) -> io::Result<()> {
    Ok(())
}

/// Opens record `path` for reading after checking it is not a symbolic link (a
/// check-then-open window remains on these targets), then requires a regular file.
pub(crate) fn open_record(path: &Path) -> io::Result<File> {
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(super::not_a_regular_file(path));
    }
    super::require_regular_file(path, File::open(path)?)
}

/// True when `hard_link` failed as unsupported.
pub(crate) fn links_unsupported(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::Unsupported
}

/// Unknown here (the standard library exposes no stable link count on this
/// platform): an `AlreadyExists` from a hard link is then taken at its word.
pub(crate) fn link_count(_path: &Path) -> Option<u64> {
    None
}

/// Reads record `path` (`None` when absent, empty bytes when not a regular file).
pub(crate) fn read_record(path: &Path) -> io::Result<Option<Vec<u8>>> {
    super::read_record_portable(path)
}

/// Lists directory `dir` after refusing a link or a file in its place.
pub(crate) fn list_names(dir: &Path, each: &mut dyn FnMut(&str)) -> io::Result<()> {
    super::list_names_portable(dir, each)
}

/// No nameless files on this platform: creates stage a named file.
pub(crate) fn anonymous_file(_dir: &Path) -> io::Result<Option<super::Nameless>> {
    Ok(None)
}

/// Never called here ([`anonymous_file`] returns `None`).
pub(crate) fn link_anonymous(_nameless: &super::Nameless, _name: &str) -> io::Result<bool> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Never called here ([`anonymous_file`] returns `None`).
pub(crate) fn sync_dir_of(_nameless: &super::Nameless) -> io::Result<()> {
    Ok(())
}

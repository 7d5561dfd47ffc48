//! POSIX: directory fsync, `O_NOFOLLOW` opens, errno classification.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Flushes the entries of directory `path` (names created or removed in it).
///
/// `EINVAL` and `ENOTSUP` are taken as "this filesystem cannot flush a directory"
/// and ignored, as databases do: there is nothing more a caller could do.
pub(crate) fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = File::open(path)?;
    match dir.sync_all() {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(code) if code == libc::EINVAL || code == libc::ENOTSUP || code == libc::EOPNOTSUPP) => {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Opens record `path` for reading with `O_NOFOLLOW` (a symbolic link is refused by
/// the kernel, with no window between a check and the open) and `O_NONBLOCK` (a FIFO
/// named like a record cannot block the reader), then requires a regular file.
pub(crate) fn open_record(path: &Path) -> io::Result<File> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    match opened {
        Ok(file) => super::require_regular_file(path, file),
        // ELOOP on Linux and macOS, EMLINK on FreeBSD, EFTYPE on NetBSD: say what it is.
        Err(e)
            if e.kind() != io::ErrorKind::NotFound
                && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) =>
        {
            Err(super::not_a_regular_file(path))
        }
        Err(e) => Err(e),
    }
}

/// True when `hard_link` failed because the filesystem has no hard links: `EPERM`
/// (Linux vfat/exfat and some FUSE filesystems), `ENOTSUP`/`EOPNOTSUPP` (macOS msdos,
/// SMB mounts), `ENOSYS`.
///
/// `EPERM` is otherwise a permission refusal, but the link source is a staging file
/// this process just created and owns (so `protected_hardlinks` does not apply), and
/// a directory we may not write to fails the staging create first. A misreading is
/// harmless anyway: the fallback is itself an exclusive create, and fails on its own
/// if the directory really refuses us.
pub(crate) fn links_unsupported(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::Unsupported
        || matches!(error.raw_os_error(), Some(code)
            if code == libc::EPERM
                || code == libc::ENOTSUP
                || code == libc::EOPNOTSUPP
                || code == libc::ENOSYS)
}

/// The number of names (hard links) of the file at `path`, without following a
/// symbolic link.
pub(crate) fn link_count(path: &Path) -> Option<u64> {
    std::fs::symlink_metadata(path).ok().map(|m| m.nlink())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_errors_are_classified() {
        for code in [libc::EPERM, libc::ENOTSUP, libc::EOPNOTSUPP, libc::ENOSYS] {
            assert!(
                links_unsupported(&io::Error::from_raw_os_error(code)),
                "{code}"
            );
        }
        // Real failures stay failures (and EEXIST is handled before this is asked).
        for code in [
            libc::EACCES,
            libc::ENOSPC,
            libc::EROFS,
            libc::EIO,
            libc::ENOENT,
            libc::EEXIST,
        ] {
            assert!(
                !links_unsupported(&io::Error::from_raw_os_error(code)),
                "{code}"
            );
        }
    }
}

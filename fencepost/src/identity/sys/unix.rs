//! Unix: the path's bytes, and the (device, inode, birth time) of an existing file.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The bytes a resolved path's key is derived from: the path case-folded when it is
/// UTF-8 (merge when unsure: the volume may be case-insensitive — macOS by default,
/// ext4 casefold directories, a macOS folder mounted into a Linux container), its raw
/// bytes otherwise.
pub(crate) fn path_material(resolved: &Path) -> Vec<u8> {
    match resolved.to_str() {
        Some(text) => super::super::fold(text).into_bytes(),
        None => resolved.as_os_str().as_bytes().to_vec(),
    }
}

/// `"<dev>:<ino>"` of the file `path` names (following symlinks), followed by
/// `":<seconds>.<nanoseconds>"` of its birth time where the filesystem records one
/// (ext4, XFS, Btrfs, tmpfs: `statx`'s `STATX_BTIME`); `None` when the file does
/// not exist or cannot be examined.
///
/// The birth time tells a file from a later one given the same inode number:
/// journaled ext4 hands a freed inode to the next file made in its directory, so an
/// editor's save (a temporary file renamed over the original) often gets the inode
/// of a file deleted a moment before. Under `<dev>:<ino>` alone the saved file took
/// over that other file's series, with its history: another session's old record
/// there fenced the tenure that adopted it, and locked the session out of its own
/// file until the ttl (a breaker, 2026-12-07). Hard links and renames keep the
/// birth time, so every link to one file still has one key.
pub(crate) fn file_id(path: &Path) -> Option<String> {
    let metadata = std::fs::metadata(path).ok()?;
    Some(file_id_text(
        metadata.dev(),
        metadata.ino(),
        metadata.created().ok(),
    ))
}

/// The text [`file_id`] derives a key from, given what `stat` said.
fn file_id_text(dev: u64, ino: u64, born: Option<std::time::SystemTime>) -> String {
    let Some(born) = born else {
        return format!("{dev}:{ino}");
    };
    // Before the epoch (a filesystem can say so) keeps its sign: distinct too.
    let (sign, since) = match born.duration_since(std::time::UNIX_EPOCH) {
        Ok(after) => ("", after),
        Err(before) => ("-", before.duration()),
    };
    format!(
        "{dev}:{ino}:{sign}{}.{:09}",
        since.as_secs(),
        since.subsec_nanos()
    )
}

/// The resolved path as people read it: itself.
pub(crate) fn display_path(resolved: &Path) -> std::path::PathBuf {
    resolved.to_path_buf()
}

/// How many names the file `path` names has (its hard links; following symlinks);
/// 1 when it cannot be examined.
pub(crate) fn link_count(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(1, |metadata| metadata.nlink())
}

#[cfg(test)]
mod tests {
    use super::{file_id, file_id_text};
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn a_later_file_with_the_same_inode_number_has_another_id() {
        let born = UNIX_EPOCH + Duration::new(1_765_000_000, 5);
        let later = born + Duration::from_nanos(1);
        assert_eq!(file_id_text(1, 2, Some(born)), "1:2:1765000000.000000005");
        assert_ne!(
            file_id_text(1, 2, Some(born)),
            file_id_text(1, 2, Some(later))
        );
        assert_ne!(
            file_id_text(1, 2, Some(UNIX_EPOCH - Duration::from_secs(3))),
            file_id_text(1, 2, Some(UNIX_EPOCH + Duration::from_secs(3)))
        );
        // Where the filesystem keeps no birth time, the pair alone.
        assert_eq!(file_id_text(1, 2, None), "1:2");
    }

    #[test]
    fn every_link_and_name_of_one_file_has_one_id() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, b"one").unwrap();
        let id = file_id(&a).unwrap();
        let b = dir.path().join("b");
        std::fs::hard_link(&a, &b).unwrap();
        assert_eq!(file_id(&b).unwrap(), id);
        let c = dir.path().join("c");
        std::fs::rename(&a, &c).unwrap();
        assert_eq!(file_id(&c).unwrap(), id);
        std::fs::write(&c, b"rewritten in place").unwrap();
        assert_eq!(file_id(&c).unwrap(), id);
        // Where the filesystem records births (the test machine's does), they are in it.
        if std::fs::metadata(&c).unwrap().created().is_ok() {
            assert_eq!(id.split(':').count(), 3, "{id}");
        }
    }
}

//! Unix: the path's bytes, and the (device, inode) pair of an existing file.

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

/// `"<dev>:<ino>"` of the file `path` names (following symlinks), or `None` when it
/// does not exist or cannot be examined.
pub(crate) fn file_id(path: &Path) -> Option<String> {
    let metadata = std::fs::metadata(path).ok()?;
    Some(format!("{}:{}", metadata.dev(), metadata.ino()))
}

/// The resolved path as people read it: itself.
pub(crate) fn display_path(resolved: &Path) -> std::path::PathBuf {
    resolved.to_path_buf()
}

//! Other targets: the path as text, case-folded; no file id.

use std::path::Path;

/// The bytes a resolved path's key is derived from: the path as (lossy) text,
/// case-folded.
pub(crate) fn path_material(resolved: &Path) -> Vec<u8> {
    super::super::fold(&resolved.to_string_lossy()).into_bytes()
}

/// Always `None`: no portable file id on this target.
pub(crate) fn file_id(_path: &Path) -> Option<String> {
    None
}

/// The resolved path as people read it: itself.
pub(crate) fn display_path(resolved: &Path) -> std::path::PathBuf {
    resolved.to_path_buf()
}

/// Always 1: without a file id, another name of a file is another resource.
pub(crate) fn link_count(_path: &Path) -> u64 {
    1
}

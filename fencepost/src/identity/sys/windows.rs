//! Windows: the resolved path through the Windows spelling rules; no file id yet.

use std::path::Path;

/// The bytes a resolved path's key is derived from: the canonical text of the
/// Windows spelling rules (prefixes, UNC, loopback admin shares, separators,
/// trailing dots and spaces, case).
pub(crate) fn path_material(resolved: &Path) -> Vec<u8> {
    super::super::windows_rules::normalize(&resolved.to_string_lossy()).into_bytes()
}

/// Always `None` for now. The volume serial number and file index that would name a
/// file across its hard links are exposed by `std::os::windows::fs::MetadataExt`
/// only behind the unstable `windows_by_handle` feature (rust-lang/rust#63010), and
/// the core takes no Windows API crate; so on Windows a hard link is a different
/// resource from its target (documented in `docs/design-02-resource-identity.md`).
pub(crate) fn file_id(_path: &Path) -> Option<String> {
    None
}

/// The resolved path as people read it: without the verbatim prefix that
/// `canonicalize` adds (`\\?\C:\x` is shown `C:\x`, `\\?\UNC\srv\share` as
/// `\\srv\share`).
pub(crate) fn display_path(resolved: &Path) -> std::path::PathBuf {
    let text = resolved.as_os_str().to_string_lossy();
    if let Some(rest) = text.strip_prefix(r"\\?\UNC\") {
        return format!(r"\\{rest}").into();
    }
    match text.strip_prefix(r"\\?\") {
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') => rest.into(),
        _ => resolved.to_path_buf(),
    }
}

/// Always 1: without a file id (see [`file_id`]), another name of a file is another
/// resource.
pub(crate) fn link_count(_path: &Path) -> u64 {
    1
}

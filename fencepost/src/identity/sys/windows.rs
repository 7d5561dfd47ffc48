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

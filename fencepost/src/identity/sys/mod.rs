//! Platform parts of file identity, one module per platform family with identical
//! signatures: `path_material(resolved) -> Vec<u8>`, `file_id(path) ->
//! Option<String>`, `link_count(path) -> u64` and `display_path(resolved) -> PathBuf`.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::{display_path, file_id, link_count, path_material};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::{display_path, file_id, link_count, path_material};

#[cfg(not(any(unix, windows)))]
mod other;
#[cfg(not(any(unix, windows)))]
pub(crate) use other::{display_path, file_id, link_count, path_material};

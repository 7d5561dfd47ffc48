//! Platform parts of file identity, one module per platform family with identical
//! signatures: `path_material(resolved) -> Vec<u8>` and `file_id(path) ->
//! Option<String>`.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::{file_id, path_material};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::{file_id, path_material};

#[cfg(not(any(unix, windows)))]
mod other;
#[cfg(not(any(unix, windows)))]
pub(crate) use other::{file_id, path_material};

//! Other targets: no known per-user state directory; paths as they are.

use std::ffi::OsString;
use std::path::PathBuf;

/// What to set when [`user_state_dir`] fails, for the error message.
pub(super) const USER_DIR_FIX: &str = "FENCEPOST_STORE";

/// Unknown on this platform: outside a repository, a store must be named.
pub(super) fn user_state_dir(_env: &dyn Fn(&str) -> Option<OsString>) -> Result<PathBuf, String> {
    Err("this platform has no known per-user state directory".into())
}

/// `path` as it is.
pub(super) fn plain(path: PathBuf) -> PathBuf {
    path
}

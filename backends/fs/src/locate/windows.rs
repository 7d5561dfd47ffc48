//! Windows: `%LOCALAPPDATA%`, and resolved paths without the `\\?\` prefix that
//! `canonicalize` adds (so the store path a user reads is the one they would type).

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf, Prefix};

/// What to set when [`user_state_dir`] fails, for the error message.
pub(super) const USER_DIR_FIX: &str = "LOCALAPPDATA";

/// The user's local application data directory, `%LOCALAPPDATA%` (never the
/// roaming profile: a store is per machine). `Err` when it is unset or relative.
pub(super) fn user_state_dir(env: &dyn Fn(&str) -> Option<OsString>) -> Result<PathBuf, String> {
    match env("LOCALAPPDATA")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
    {
        Some(dir) if dir.is_absolute() => Ok(dir),
        Some(dir) => Err(format!(
            "LOCALAPPDATA ({}) is not an absolute path",
            dir.display()
        )),
        None => Err("LOCALAPPDATA is not set".into()),
    }
}

/// `\\?\C:\x` as `C:\x` and `\\?\UNC\server\share\x` as `\\server\share\x`; any
/// other path as it is.
pub(super) fn plain(path: PathBuf) -> PathBuf {
    let mut components = path.components();
    let rebuilt = match components.next() {
        Some(Component::Prefix(prefix)) => match prefix.kind() {
            Prefix::VerbatimDisk(letter) => format!("{}:", char::from(letter)),
            Prefix::VerbatimUNC(server, share) => format!(
                r"\\{}\{}",
                server.to_string_lossy(),
                share.to_string_lossy()
            ),
            _ => return path,
        },
        _ => return path,
    };
    // Only when the server and share names survived text conversion intact.
    if rebuilt.contains('\u{FFFD}') {
        return path;
    }
    let mut plain = PathBuf::from(rebuilt);
    plain.push(Path::new(r"\"));
    for component in components.filter(|c| !matches!(c, Component::RootDir)) {
        plain.push(component.as_os_str());
    }
    plain
}

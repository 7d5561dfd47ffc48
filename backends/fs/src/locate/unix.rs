//! POSIX (and macOS): the XDG state directory; resolved paths are already plain.

use std::ffi::OsString;
use std::path::PathBuf;

/// What to set when [`user_state_dir`] fails, for the error message.
pub(super) const USER_DIR_FIX: &str = "HOME (or XDG_STATE_HOME)";

/// The user's state directory: `$XDG_STATE_HOME` when it is set to an absolute path
/// (the XDG rule: a relative value is ignored), else `$HOME/.local/state`. `Err`
/// says what is missing; there is no fallback to `/` or the working directory, which
/// would give each process its own store.
pub(super) fn user_state_dir(env: &dyn Fn(&str) -> Option<OsString>) -> Result<PathBuf, String> {
    let absolute = |name: &str| {
        env(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    if let Some(state) = absolute("XDG_STATE_HOME").filter(|p| p.is_absolute()) {
        return Ok(state);
    }
    match absolute("HOME") {
        Some(home) if home.is_absolute() => Ok(home.join(".local/state")),
        Some(home) => Err(format!("HOME ({}) is not an absolute path", home.display())),
        None => Err("neither HOME nor XDG_STATE_HOME is set".into()),
    }
}

/// `path` as it is: POSIX resolved paths carry no prefixes.
pub(super) fn plain(path: PathBuf) -> PathBuf {
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Result<PathBuf, String> {
        let vars: Vec<(String, OsString)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        user_state_dir(&|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn xdg_state_home_wins_when_absolute_else_home() {
        assert_eq!(
            with(&[("XDG_STATE_HOME", "/x/state"), ("HOME", "/home/u")]),
            Ok(PathBuf::from("/x/state"))
        );
        // Relative and empty values are ignored (the XDG rule).
        for ignored in ["state", ""] {
            assert_eq!(
                with(&[("XDG_STATE_HOME", ignored), ("HOME", "/home/u")]),
                Ok(PathBuf::from("/home/u/.local/state"))
            );
        }
        assert!(
            with(&[])
                .unwrap_err()
                .contains("neither HOME nor XDG_STATE_HOME")
        );
        assert!(with(&[("HOME", "")]).is_err());
        assert!(
            with(&[("HOME", "rel")])
                .unwrap_err()
                .contains("not an absolute")
        );
    }
}

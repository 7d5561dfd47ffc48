//! Platform code for `run` and `claim --hold`: the child's process tree (its own
//! process group on POSIX, a job object on Windows) and how it is stopped when the
//! lease is lost, forwarding termination signals, waiting for a termination
//! request, and turning the child's exit status into our exit code. Each platform
//! module exports the same items with the same signatures.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::{ProcessTree, SignalForwarder, Termination, exit_code, stderr_takes_a_line};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::{ProcessTree, SignalForwarder, Termination, exit_code};

/// The user this process runs as, for a record of who did something when the
/// environment names nobody (`USER` unset in a container): `uid N` on POSIX.
#[cfg(unix)]
pub fn user_id() -> Option<String> {
    // SAFETY: getuid has no preconditions and cannot fail.
    Some(format!("uid {}", unsafe { libc::getuid() }))
}

/// [`user_id`] where there is no number to give.
#[cfg(not(unix))]
pub fn user_id() -> Option<String> {
    None
}

/// Whether a short line written to stderr now would not block: always assumed
/// where there is no cheap way to ask.
#[cfg(not(unix))]
pub fn stderr_takes_a_line() -> bool {
    true
}

#[cfg(not(any(unix, windows)))]
mod other;
#[cfg(not(any(unix, windows)))]
pub use other::{ProcessTree, SignalForwarder, Termination, exit_code};

/// When `run`'s child tree is stopped although `run` is not there to stop it: `run`
/// killed, or silent (stopped) for longer than its ttl. POSIX only, by a guard
/// process (`unix.rs`); elsewhere a killed `run` leaves its child running.
#[cfg_attr(not(unix), allow(dead_code))]
pub struct StopOnDeath {
    /// SIGKILL this long after SIGTERM if some of the tree is left; `None`: never.
    pub kill_after: Option<std::time::Duration>,
    /// The lease's ttl: silence for a ttl and two heartbeats counts as stopped.
    pub ttl: std::time::Duration,
}

//! Platform code for `run` and `claim --hold`: the child's process tree (its own
//! process group on POSIX, a job object on Windows) and how it is stopped when the
//! lease is lost, forwarding termination signals, waiting for a termination
//! request, and turning the child's exit status into our exit code. Each platform
//! module exports the same items with the same signatures.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::{ProcessTree, SignalForwarder, Termination, exit_code};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::{ProcessTree, SignalForwarder, Termination, exit_code};

#[cfg(not(any(unix, windows)))]
mod other;
#[cfg(not(any(unix, windows)))]
pub use other::{ProcessTree, SignalForwarder, Termination, exit_code};

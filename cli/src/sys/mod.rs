//! Platform code for `run`: forwarding termination signals to the child and
//! turning its exit status into our exit code. Each platform module exports the
//! same items with the same signatures.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::{SignalForwarder, exit_code};

#[cfg(not(unix))]
mod other;
#[cfg(not(unix))]
pub use other::{SignalForwarder, exit_code};

//! Platforms without POSIX signals. On Windows a console Ctrl+C or Ctrl+Break is
//! delivered to every process attached to the console, the child included, so
//! there is nothing to forward.

use std::io;
use std::process::{ExitCode, ExitStatus};

/// Does nothing here; see the module docs.
pub struct SignalForwarder;

impl SignalForwarder {
    /// Does nothing.
    pub fn install() -> io::Result<SignalForwarder> {
        Ok(SignalForwarder)
    }

    /// Does nothing.
    pub fn set_child(&self, _pid: u32) {}

    /// Does nothing.
    pub fn finish(self) {}
}

/// The child's exit code; codes that do not fit in 0..=255 become 1.
pub fn exit_code(status: ExitStatus) -> ExitCode {
    match status.code().map(u8::try_from) {
        Some(Ok(code)) => ExitCode::from(code),
        _ => ExitCode::FAILURE,
    }
}

//! Platforms that are neither POSIX nor Windows: the child is a single process, and
//! nothing is forwarded.

use std::io;

use super::StopOnDeath;
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};

/// The child alone.
pub struct ProcessTree;

/// Nothing is set up before the child is spawned here.
pub struct Prepared;

impl Prepared {
    /// No guard is started here, so none failed.
    pub fn guard_error(&mut self) -> Option<io::Error> {
        None
    }

    /// Nothing to stand down.
    pub fn abandon(self) {}
}

impl ProcessTree {
    /// Nothing to prepare.
    pub fn prepare(_command: &mut Command, _stop: Option<&StopOnDeath>) -> Prepared {
        Prepared
    }

    /// Cannot stop a child here.
    /// No process group here: the lease's evidence names none.
    pub fn group(&self) -> Option<u32> {
        None
    }

    pub fn adopt(_child: &Child, _prepared: Prepared) -> io::Result<ProcessTree> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "stopping a child is not supported on this platform",
        ))
    }

    /// Nothing.
    pub fn terminate(&self) {}

    /// Nothing.
    pub fn kill(&self) {}

    /// Unknown: false.
    pub fn is_alive(&self) -> bool {
        false
    }

    /// Nothing.
    pub fn finish(&self) {}
}

/// Does nothing here.
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

/// No termination signals here.
pub struct Termination;

impl Termination {
    /// Nothing to install.
    pub fn install() -> io::Result<Termination> {
        Ok(Termination)
    }

    /// Waits until `stop` is set (false).
    pub fn wait(&mut self, stop: &AtomicBool, poll: std::time::Duration) -> bool {
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(poll);
        }
        false
    }
}

/// The child's exit code; codes that do not fit in 0..=255 become 1.
pub fn exit_code(status: ExitStatus) -> ExitCode {
    match status.code().map(u8::try_from) {
        Some(Ok(code)) => ExitCode::from(code),
        _ => ExitCode::FAILURE,
    }
}

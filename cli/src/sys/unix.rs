//! POSIX: SIGINT, SIGTERM and SIGHUP received by `fencepost run` are sent on to the
//! child with `kill(2)`, so the child decides how to stop and `run` stays alive to
//! release the lease after it ends.

use std::io;
use std::process::{ExitCode, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::thread::JoinHandle;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

/// The signals `run` forwards.
const FORWARDED: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// A thread that forwards termination signals to the child once it is known.
///
/// Installed *before* the child is spawned, so a signal that arrives in between is
/// not lost: it is kept and delivered as soon as the child's pid is set.
pub struct SignalForwarder {
    handle: Handle,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

struct Shared {
    /// The child's pid, 0 until it is spawned.
    child: AtomicI32,
    /// A signal that arrived before the child existed, 0 if none.
    pending: AtomicI32,
}

impl Shared {
    /// Sends the pending signal, if any, to the child, if it exists. Whoever swaps
    /// the pending signal out sends it, so it is delivered exactly once.
    fn deliver_pending(&self) {
        let pid = self.child.load(Ordering::SeqCst);
        if pid > 0 {
            let signal = self.pending.swap(0, Ordering::SeqCst);
            if signal != 0 {
                send(pid, signal);
            }
        }
    }
}

impl SignalForwarder {
    /// Starts catching the forwarded signals (they no longer end this process).
    pub fn install() -> io::Result<SignalForwarder> {
        let mut signals = Signals::new(FORWARDED)?;
        let handle = signals.handle();
        let shared = Arc::new(Shared {
            child: AtomicI32::new(0),
            pending: AtomicI32::new(0),
        });
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("fencepost-signals".into())
                .spawn(move || {
                    for signal in signals.forever() {
                        shared.pending.store(signal, Ordering::SeqCst);
                        shared.deliver_pending();
                    }
                })?
        };
        Ok(SignalForwarder {
            handle,
            thread: Some(thread),
            shared,
        })
    }

    /// Names the child to forward to, and delivers a signal that arrived before it.
    pub fn set_child(&self, pid: u32) {
        let pid = i32::try_from(pid).unwrap_or(0);
        self.shared.child.store(pid, Ordering::SeqCst);
        self.shared.deliver_pending();
    }

    /// Stops forwarding (call as soon as the child has been waited for, so a signal
    /// never reaches a process that reused its pid).
    pub fn finish(mut self) {
        self.shared.child.store(0, Ordering::SeqCst);
        self.handle.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn send(pid: i32, signal: i32) {
    // SAFETY: kill(2) takes plain integers and has no memory-safety preconditions;
    // `pid` is positive, so it names one process, never a group.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// The exit code `run` ends with for a child that ended with `status`: its own
/// code, or 128 + the signal number if a signal killed it (the shell convention).
pub fn exit_code(status: ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1)),
        (None, Some(signal)) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(1)),
        (None, None) => ExitCode::FAILURE,
    }
}

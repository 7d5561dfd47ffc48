//! POSIX: the child runs in its own process group, so the whole tree it starts (a
//! `sh -c` wrapper and the real command below it) is signalled at once. SIGINT,
//! SIGTERM and SIGHUP received by `fencepost run` are sent on to that group with
//! `kill(2)`, so the child decides how to stop and `run` stays alive to release the
//! lease after it ends. When `run` owns the terminal, the child's group is made the
//! terminal's foreground group, so an interactive child reads the terminal and gets
//! its Ctrl+C as it would without `run`.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread::JoinHandle;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

/// The signals `run` forwards.
const FORWARDED: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// The child's process group.
pub struct ProcessTree {
    /// The group id (the child's pid: it leads its own group).
    group: libc::pid_t,
    /// The terminal was handed to the child's group and is taken back at the end.
    terminal: bool,
}

/// True when stdin is a terminal whose foreground group is ours.
fn own_the_terminal() -> bool {
    // SAFETY: isatty, tcgetpgrp and getpgrp only read process and terminal state.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() }
}

/// Makes `group` the foreground group of the terminal on stdin, with SIGTTOU
/// blocked (a background process may otherwise not change it). Async-signal-safe:
/// also called in the child between fork and exec.
fn give_terminal_to(group: libc::pid_t) {
    // SAFETY: plain system calls on stack values; the signal mask is restored.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        libc::tcsetpgrp(0, group);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

impl ProcessTree {
    /// Makes `command` start its child as the leader of a new process group (and
    /// the terminal's foreground group, when `run` is in the foreground).
    pub fn prepare(command: &mut Command) -> bool {
        command.process_group(0);
        let terminal = own_the_terminal();
        if terminal {
            // SAFETY: the closure only makes async-signal-safe calls (setpgid,
            // getpid, sigprocmask, tcsetpgrp), as required between fork and exec.
            unsafe {
                command.pre_exec(|| {
                    // Our own group first (std does it too), then the terminal.
                    libc::setpgid(0, 0);
                    give_terminal_to(libc::getpid());
                    Ok(())
                });
            }
        }
        terminal
    }

    /// The tree of a child spawned from a command given to [`ProcessTree::prepare`]
    /// (which returned `terminal`).
    pub fn adopt(child: &Child, terminal: bool) -> io::Result<ProcessTree> {
        let group = libc::pid_t::try_from(child.id())
            .map_err(|_| io::Error::other("the child's pid does not fit a pid_t"))?;
        if terminal {
            // Also from the parent: whichever runs first, the child never reads the
            // terminal from the background.
            give_terminal_to(group);
        }
        Ok(ProcessTree { group, terminal })
    }

    /// Asks every process of the tree to stop: SIGTERM to the group.
    pub fn terminate(&self) {
        signal_group(self.group, libc::SIGTERM);
    }

    /// Stops every process of the tree at once: SIGKILL to the group.
    pub fn kill(&self) {
        signal_group(self.group, libc::SIGKILL);
    }

    /// True while some process of the group is left (its leader, once reaped,
    /// no longer counts).
    pub fn is_alive(&self) -> bool {
        // SAFETY: signal 0 to a negative pid only checks that the group exists.
        let found = unsafe { libc::kill(-self.group, 0) } == 0;
        found || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }

    /// Takes the terminal back after the child ended.
    pub fn finish(&self) {
        if self.terminal {
            // SAFETY: getpgrp has no preconditions.
            give_terminal_to(unsafe { libc::getpgrp() });
        }
    }
}

fn signal_group(group: libc::pid_t, signal: i32) {
    if group > 0 {
        // SAFETY: kill(2) with a negative pid signals one process group; `group` is
        // the positive id of the child's own group.
        unsafe {
            libc::kill(-group, signal);
        }
    }
}

/// A thread that forwards termination signals to the child's group once it is
/// known.
///
/// Installed *before* the child is spawned, so a signal that arrives in between is
/// not lost: it is kept and delivered as soon as the child's pid is set.
pub struct SignalForwarder {
    handle: Handle,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

struct Shared {
    /// The child's pid (its group id), 0 until it is spawned.
    child: AtomicI32,
    /// A signal that arrived before the child existed, 0 if none.
    pending: AtomicI32,
}

impl Shared {
    /// Sends the pending signal, if any, to the child's group, if it exists.
    /// Whoever swaps the pending signal out sends it, so it is delivered once.
    fn deliver_pending(&self) {
        let pid = self.child.load(Ordering::SeqCst);
        if pid > 0 {
            let signal = self.pending.swap(0, Ordering::SeqCst);
            if signal != 0 {
                signal_group(pid, signal);
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
    /// never reaches a group that reused its id).
    pub fn finish(mut self) {
        self.shared.child.store(0, Ordering::SeqCst);
        self.handle.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Catches SIGINT, SIGTERM and SIGHUP for `claim --hold`, which ends on them.
pub struct Termination {
    signals: Signals,
}

impl Termination {
    /// Starts catching the signals (they no longer end this process).
    pub fn install() -> io::Result<Termination> {
        Ok(Termination {
            signals: Signals::new(FORWARDED)?,
        })
    }

    /// Blocks until one of the signals arrives (true) or `stop` is set (false,
    /// checked every `poll`).
    pub fn wait(&mut self, stop: &AtomicBool, poll: std::time::Duration) -> bool {
        loop {
            if self.signals.pending().next().is_some() {
                return true;
            }
            if stop.load(Ordering::SeqCst) {
                return false;
            }
            std::thread::sleep(poll);
        }
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

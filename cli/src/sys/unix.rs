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

use super::StopOnDeath;

/// The signals `run` forwards.
const FORWARDED: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// The child's process group.
pub struct ProcessTree {
    /// The group id (the child's pid: it leads its own group).
    group: libc::pid_t,
    /// The terminal was handed to the child's group and is taken back at the end.
    terminal: bool,
    /// The guard that stops the group if `run` dies or falls silent, once started.
    guard: Arc<std::sync::Mutex<Option<Guard>>>,
}

/// A forked process that stops the child's group when `run` cannot: when `run`
/// dies without standing it down (SIGKILL, a crash; the child sits in its own
/// group, so nothing else would stop it, and a waiter on this host takes a dead
/// `run`'s lease over once the group is gone), or falls silent for a whole ttl
/// (SIGSTOP: its lease can no longer be renewed, so a rival may hold it while the
/// child writes). It reads a pipe whose only write end `run` holds: a 0 byte is a
/// heartbeat (every ttl/4; silence is a ttl and a half), a 1 byte means "stand
/// down", end of file means `run` is gone.
///
/// It is forked *before* the child, and learns the child's group from the child
/// itself (its pid, written between fork and exec to a second pipe): a `run`
/// killed at any point after the child exists still has its command stopped.
struct Guard {
    pid: libc::pid_t,
    /// The write end of the heartbeat pipe.
    pipe: libc::c_int,
}

/// What [`ProcessTree::prepare`] set up for the child about to be spawned: the
/// terminal hand-over, and the guard (already running) with the write end of the
/// pipe the child names its group on.
pub struct Prepared {
    terminal: bool,
    guard: Arc<std::sync::Mutex<Option<Guard>>>,
    /// The write end of the group pipe: the child's copy closes at its exec, ours
    /// once it is spawned (or not), so the guard sees its end of file.
    group_pipe: Option<libc::c_int>,
    guard_error: Option<io::Error>,
}

impl Prepared {
    /// Why no guard was started, if one was asked for and could not be.
    pub fn guard_error(&mut self) -> Option<io::Error> {
        self.guard_error.take()
    }

    /// The child was not spawned after all: the guard stands down.
    pub fn abandon(mut self) {
        self.close_group_pipe();
        stand_down(&self.guard);
    }

    fn close_group_pipe(&mut self) {
        if let Some(fd) = self.group_pipe.take() {
            // SAFETY: our own descriptor, closed once.
            unsafe {
                libc::close(fd);
            }
        }
    }
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
    /// the terminal's foreground group, when `run` is in the foreground), and with
    /// `stop` forks the guard that stops that group if `run` dies or falls silent
    /// (see [`Guard`]); the child tells it its group before it execs. Call
    /// [`ProcessTree::adopt`] with the spawned child, or [`Prepared::abandon`].
    pub fn prepare(command: &mut Command, stop: Option<&StopOnDeath>) -> Prepared {
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
        let mut prepared = Prepared {
            terminal,
            guard: Arc::new(std::sync::Mutex::new(None)),
            group_pipe: None,
            guard_error: None,
        };
        if let Some(stop) = stop {
            match fork_guard(stop) {
                Ok((guard, group_pipe)) => {
                    *prepared.guard.lock().unwrap_or_else(|e| e.into_inner()) = Some(guard);
                    if let Err(error) = heartbeat_thread(&prepared.guard, stop.ttl) {
                        // Unheard, the guard would stop a healthy child: none.
                        stand_down(&prepared.guard);
                        // SAFETY: our own descriptor, closed once; no pre_exec
                        // names it yet.
                        unsafe {
                            libc::close(group_pipe);
                        }
                        prepared.guard_error = Some(error);
                        return prepared;
                    }
                    // SAFETY: between fork and exec the child writes its pid (its
                    // group's id: it leads it) to the guard: write and getpid are
                    // async-signal-safe. The descriptor is close-on-exec.
                    unsafe {
                        command.pre_exec(move || {
                            let pid = libc::getpid();
                            libc::write(
                                group_pipe,
                                (&pid as *const libc::pid_t).cast(),
                                std::mem::size_of::<libc::pid_t>(),
                            );
                            Ok(())
                        });
                    }
                    prepared.group_pipe = Some(group_pipe);
                }
                Err(error) => prepared.guard_error = Some(error),
            }
        }
        prepared
    }

    /// The tree of a child spawned from a command given to [`ProcessTree::prepare`].
    pub fn adopt(child: &Child, mut prepared: Prepared) -> io::Result<ProcessTree> {
        prepared.close_group_pipe();
        let Ok(group) = libc::pid_t::try_from(child.id()) else {
            prepared.abandon();
            return Err(io::Error::other("the child's pid does not fit a pid_t"));
        };
        if prepared.terminal {
            // Also from the parent: whichever runs first, the child never reads the
            // terminal from the background.
            give_terminal_to(group);
        }
        Ok(ProcessTree {
            group,
            terminal: prepared.terminal,
            guard: Arc::clone(&prepared.guard),
        })
    }

    /// The tree's process group, which the lease's evidence names
    /// ([`fencepost::Keepalive::tie_to_group`]).
    pub fn group(&self) -> Option<u32> {
        u32::try_from(self.group).ok()
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
    /// no longer counts, nor do members that have exited and wait to be reaped by
    /// a parent outside the group: they can do nothing more).
    pub fn is_alive(&self) -> bool {
        // SAFETY: signal 0 to a negative pid only checks that the group exists.
        let found = unsafe { libc::kill(-self.group, 0) } == 0;
        (found || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH))
            && !only_zombies_in(self.group)
    }

    /// Stands the guard down (the child ended, or was stopped) and takes the
    /// terminal back.
    pub fn finish(&self) {
        stand_down(&self.guard);
        if self.terminal {
            // SAFETY: getpgrp has no preconditions.
            give_terminal_to(unsafe { libc::getpgrp() });
        }
    }
}

/// True when every process `/proc` shows in process group `group` has exited
/// (a zombie, waiting for a parent outside the group to reap it: a new user's
/// `run -- sh -c '…'` waited for the orphaned command's zombie after a loss), and
/// there is at least one. False whenever it cannot tell (no `/proc`, a member not
/// shown), so the caller goes on treating the group as alive.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn only_zombies_in(group: libc::pid_t) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    let mut zombies = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let (Some(state), Some(_ppid), Some(pgrp)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if pgrp.parse::<libc::pid_t>() != Ok(group) {
            continue;
        }
        if !matches!(state, "Z" | "X") {
            return false;
        }
        zombies += 1;
    }
    zombies > 0
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn only_zombies_in(_group: libc::pid_t) -> bool {
    false
}

/// Stands the guard down, if it is still up, and reaps it.
fn stand_down(guard: &std::sync::Mutex<Option<Guard>>) {
    let guard = guard.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(guard) = guard {
        // SAFETY: our own pipe end and our own child, each used once.
        unsafe {
            libc::write(guard.pipe, [1u8].as_ptr().cast(), 1);
            libc::close(guard.pipe);
            let mut status = 0;
            while libc::waitpid(guard.pid, &mut status, 0) < 0
                && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
            {}
        }
    }
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(libc::c_int, libc::c_int)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe writes two descriptors into the array; close-on-exec, so no
    // exec'd process (the child, whatever it starts) inherits either end.
    unsafe {
        if libc::pipe(fds.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        for fd in fds {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    Ok((fds[0], fds[1]))
}

/// Forks the guard (see [`Guard`]); returns it and the write end of the pipe the
/// child names its group on.
fn fork_guard(stop: &StopOnDeath) -> io::Result<(Guard, libc::c_int)> {
    let (beat_read, beat_write) = pipe()?;
    let (group_read, group_write) = match pipe() {
        Ok(ends) => ends,
        Err(error) => {
            // SAFETY: both descriptors are ours and open.
            unsafe {
                libc::close(beat_read);
                libc::close(beat_write);
            }
            return Err(error);
        }
    };
    let kill_after_ms = stop
        .kill_after
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let silence_ms = i64::try_from(silence(stop.ttl).as_millis()).unwrap_or(i64::MAX);
    // SAFETY: fork in a threaded process; the child only makes async-signal-safe
    // system calls (no allocation, no locks) and ends with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let error = io::Error::last_os_error();
        // SAFETY: all four descriptors are ours and open.
        unsafe {
            for fd in [beat_read, beat_write, group_read, group_write] {
                libc::close(fd);
            }
        }
        return Err(error);
    }
    if pid == 0 {
        // SAFETY: in the forked child, see above.
        unsafe {
            libc::close(beat_write);
            libc::close(group_write);
            guard_main(beat_read, group_read, kill_after_ms, silence_ms)
        }
    }
    // SAFETY: the read ends are the guard's now.
    unsafe {
        libc::close(beat_read);
        libc::close(group_read);
    }
    Ok((
        Guard {
            pid,
            pipe: beat_write,
        },
        group_write,
    ))
}

/// Tells the guard every [`heartbeat`] that `run` still runs, until it stands down.
fn heartbeat_thread(
    guard: &Arc<std::sync::Mutex<Option<Guard>>>,
    ttl: std::time::Duration,
) -> io::Result<()> {
    let guard = Arc::clone(guard);
    let beat = heartbeat(ttl);
    std::thread::Builder::new()
        .name("fencepost-heartbeat".into())
        .spawn(move || {
            loop {
                std::thread::sleep(beat);
                let guard = guard.lock().unwrap_or_else(|e| e.into_inner());
                let Some(guard) = guard.as_ref() else {
                    return;
                };
                // SAFETY: our pipe end, open while the guard is set (a gone guard
                // gives EPIPE; SIGPIPE is ignored in Rust programs).
                unsafe {
                    libc::write(guard.pipe, [0u8].as_ptr().cast(), 1);
                }
            }
        })?;
    Ok(())
}

/// How often `run` tells its guard it still runs: four times per ttl.
fn heartbeat(ttl: std::time::Duration) -> std::time::Duration {
    (ttl / 4).max(std::time::Duration::from_millis(5))
}

/// How long the guard waits for a heartbeat before it takes `run` for stopped:
/// ttl + 2 heartbeats. A `run` stopped right after a renewal (lease valid for a
/// ttl from then) sent its last heartbeat at most one beat before, so the guard
/// acts only after the lease expired — within half a ttl of that.
fn silence(ttl: std::time::Duration) -> std::time::Duration {
    ttl + 2 * heartbeat(ttl)
}

/// The guard process (see [`Guard`]): reads heartbeats from `beat_read` until a
/// stand-down byte, and the child's group from `group_read`; on end of file (`run`
/// died) or `silence_ms` without a byte (`run` stopped) stops that group, if a
/// child was started. Async-signal-safe calls only.
unsafe fn guard_main(
    beat_read: libc::c_int,
    group_read: libc::c_int,
    kill_after_ms: Option<i64>,
    silence_ms: i64,
) -> ! {
    const DIED: &[u8] = b"fencepost: `fencepost run` ended without releasing its lease (killed?); stopping its command's process group\n";
    // The silence is ttl + 2 heartbeats = 1.5 x ttl ([`silence`]); a breaker saw
    // "longer than its ttl" and the stop come at 1.45 x ttl.
    const SILENT: &[u8] = b"fencepost: `fencepost run` was not heard from for 1.5 x its ttl (stopped, or starved of CPU: a ttl this short may not fit this machine), so its lease has expired and may be held by someone else now; stopping its command's process group\n";
    // The two pipes' read ends, once moved: heartbeats on 0, the group on 3.
    const BEAT: libc::c_int = 0;
    const GROUP: libc::c_int = 3;
    // SAFETY (whole body): plain system calls on values of this stack.
    unsafe {
        // Out of `run`'s group and deaf to the signals a terminal or a supervisor
        // sends it, so what ends `run` does not end its guard.
        libc::setpgid(0, 0);
        for signal in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGPIPE,
        ] {
            libc::signal(signal, libc::SIG_IGN);
        }
        // Hold nothing `run` had open but stderr (for the one line below): a reader
        // of `run`'s stdout sees its end when `run` ends. Both ends are first moved
        // above the numbers they go to, so neither dup2 overwrites the other.
        let beat = libc::fcntl(beat_read, libc::F_DUPFD, 10);
        let group_fd = libc::fcntl(group_read, libc::F_DUPFD, 10);
        libc::dup2(beat, BEAT);
        libc::dup2(group_fd, GROUP);
        libc::close(1);
        close_from(GROUP + 1);
        // The child's group: 0 until the child names it; `GROUP` open until then.
        let mut group: libc::pid_t = 0;
        let mut group_open = true;
        let mut heard = monotonic_ms();
        let (message, died) = loop {
            let left = heard.saturating_add(silence_ms) - monotonic_ms();
            if left <= 0 {
                break (SILENT, false);
            }
            let mut polls = [
                libc::pollfd {
                    fd: BEAT,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: if group_open { GROUP } else { -1 },
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let ready = libc::poll(polls.as_mut_ptr(), 2, left.min(60_000) as libc::c_int);
            if ready == 0 || (ready < 0 && errno() == libc::EINTR) {
                continue;
            }
            if polls[1].revents != 0 {
                group = read_group(GROUP);
                libc::close(GROUP);
                group_open = false;
            }
            if polls[0].revents == 0 {
                continue;
            }
            let mut byte = 0u8;
            let n = libc::read(BEAT, (&mut byte as *mut u8).cast(), 1);
            match n {
                0 => break (DIED, true),
                1 if byte == 0 => heard = monotonic_ms(),
                _ if n < 0 && errno() == libc::EINTR => {}
                // Stood down, or the pipe failed (nothing proves `run` is gone).
                _ => libc::_exit(0),
            }
        };
        if group_open {
            if died {
                // `run` is gone, so the pipe ends as soon as a child it started
                // has exec'd or exited: wait for its pid or for that end.
                group = read_group(GROUP);
            } else {
                // `run` is stopped, perhaps before it started a child: take what
                // the pipe holds now (a child started long ago has written).
                let flags = libc::fcntl(GROUP, libc::F_GETFL);
                libc::fcntl(GROUP, libc::F_SETFL, flags | libc::O_NONBLOCK);
                group = read_group(GROUP);
            }
        }
        if group <= 0 {
            // No child was started: nothing to stop.
            libc::_exit(0);
        }
        // The stop first, then the line, and the line only if stderr takes it now:
        // a full pipe nobody reads (the command may have filled it) blocked the
        // write, and the command wrote on beside a rival (a breaker).
        libc::kill(-group, libc::SIGTERM);
        let mut out = libc::pollfd {
            fd: 2,
            events: libc::POLLOUT,
            revents: 0,
        };
        if libc::poll(&mut out, 1, 0) == 1 && out.revents & libc::POLLOUT != 0 {
            libc::write(2, message.as_ptr().cast(), message.len());
        }
        if let Some(limit) = kill_after_ms {
            let start = monotonic_ms();
            loop {
                if libc::kill(-group, 0) != 0 && errno() == libc::ESRCH {
                    break;
                }
                if monotonic_ms().saturating_sub(start) >= limit {
                    libc::kill(-group, libc::SIGKILL);
                    break;
                }
                let pause = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 20_000_000,
                };
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
        }
        libc::_exit(0)
    }
}

/// Reads the child's pid (its group's id) from pipe `fd`: 0 at end of file or on
/// an error (no child named a group). Async-signal-safe.
unsafe fn read_group(fd: libc::c_int) -> libc::pid_t {
    let mut pid: libc::pid_t = 0;
    loop {
        // SAFETY: reads at most one pid_t into our stack value (a pipe write of
        // that size is atomic: all of it or nothing).
        let n = unsafe {
            libc::read(
                fd,
                (&mut pid as *mut libc::pid_t).cast(),
                std::mem::size_of::<libc::pid_t>(),
            )
        };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        return if n == std::mem::size_of::<libc::pid_t>() as isize {
            pid
        } else {
            0
        };
    }
}

/// The calling thread's errno (reads it; no allocation: async-signal-safe).
fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// CLOCK_MONOTONIC in milliseconds (async-signal-safe).
fn monotonic_ms() -> i64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec on our stack.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now);
    }
    now.tv_sec.saturating_mul(1000) + now.tv_nsec / 1_000_000
}

/// Closes every descriptor from `first` on (async-signal-safe).
fn close_from(first: libc::c_int) {
    // SAFETY: close_range and close only close descriptors of this process.
    unsafe {
        #[cfg(target_os = "linux")]
        if libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            0,
        ) == 0
        {
            return;
        }
        for fd in first..1024 {
            libc::close(fd);
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

/// Whether a short line (under a pipe's atomic size) written to stderr now would not
/// block: a pipe with room, a terminal, a file. A full pipe nobody reads says no.
pub fn stderr_takes_a_line() -> bool {
    let mut out = libc::pollfd {
        fd: 2,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: polls one descriptor of our own stack array, without waiting.
    let ready = unsafe { libc::poll(&mut out, 1, 0) };
    ready == 1 && out.revents & libc::POLLOUT != 0
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

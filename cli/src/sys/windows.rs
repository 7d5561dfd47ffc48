//! Windows: the child runs in a job object, so every process it starts (a `cmd /c`
//! wrapper's child included) belongs to one tree that can be terminated at once.
//! It stays in our console process group: a console Ctrl+C or Ctrl+Break is
//! delivered to every process attached to the console, the child included, so
//! there is nothing to forward (a new process group would have Ctrl+C disabled).
//! There is no polite stop for a console tree that reaches only it, so on a loss
//! the job is terminated at once, whatever `--on-loss term|signal` says.

use std::io;

use super::StopOnDeath;
use std::os::windows::io::AsRawHandle;
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
use windows_sys::Win32::System::Console::{
    CTRL_BREAK_EVENT, CTRL_C_EVENT, CTRL_CLOSE_EVENT, SetConsoleCtrlHandler,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION,
    JobObjectBasicAccountingInformation, QueryInformationJobObject, TerminateJobObject,
};

/// The child's job object.
pub struct ProcessTree {
    job: HANDLE,
}

// SAFETY: a job handle may be used from any thread; it is closed once, on drop.
unsafe impl Send for ProcessTree {}
// SAFETY: the job functions used here are safe to call concurrently.
unsafe impl Sync for ProcessTree {}

/// Nothing is set up before the child is spawned here. Not done yet: a job object
/// with a kill-on-close limit would also kill what the child left running at a
/// normal end, so a `run` that is killed leaves its child running; the lease
/// still ends with its ttl (Windows gives no dead-holder takeover).
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
    /// Nothing to prepare: the job is made after spawning, and no guard is
    /// started (see [`Prepared`]).
    pub fn prepare(_command: &mut Command, _stop: Option<&StopOnDeath>) -> Prepared {
        Prepared
    }

    /// Puts the spawned `child` into a new job object. Processes the child started
    /// before this call are outside the job (there is no portable way to start it
    /// suspended from the standard library).
    /// No process group here: the lease's evidence names none.
    pub fn group(&self) -> Option<u32> {
        None
    }

    pub fn adopt(child: &Child, _prepared: Prepared) -> io::Result<ProcessTree> {
        // SAFETY: no security attributes, no name: a new anonymous job.
        let job = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if job.is_null() {
            return Err(io::Error::last_os_error());
        }
        let tree = ProcessTree { job };
        // SAFETY: both handles are valid for the duration of the call.
        if unsafe { AssignProcessToJobObject(job, child.as_raw_handle() as HANDLE) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(tree)
    }

    /// Stops the tree: the job is terminated (see the module docs).
    pub fn terminate(&self) {
        self.kill();
    }

    /// Stops every process of the job at once.
    pub fn kill(&self) {
        // SAFETY: `job` is a valid job handle until drop.
        unsafe {
            TerminateJobObject(self.job, 1);
        }
    }

    /// True while some process of the job still runs.
    pub fn is_alive(&self) -> bool {
        // SAFETY: the buffer is a correctly sized, writable accounting structure.
        unsafe {
            let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = std::mem::zeroed();
            let ok = QueryInformationJobObject(
                self.job,
                JobObjectBasicAccountingInformation,
                (&mut info as *mut JOBOBJECT_BASIC_ACCOUNTING_INFORMATION).cast(),
                std::mem::size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
                std::ptr::null_mut(),
            );
            ok == 0 || info.ActiveProcesses > 0
        }
    }

    /// Nothing to give back.
    pub fn finish(&self) {}
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        // SAFETY: closed exactly once. The job has no kill-on-close limit, so its
        // processes live on, as a process group does on POSIX.
        unsafe {
            CloseHandle(self.job);
        }
    }
}

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

/// Set by the console control handler.
static TERMINATION: AtomicBool = AtomicBool::new(false);

unsafe extern "system" fn on_console_event(event: u32) -> i32 {
    if matches!(event, CTRL_C_EVENT | CTRL_BREAK_EVENT | CTRL_CLOSE_EVENT) {
        TERMINATION.store(true, Ordering::SeqCst);
        1
    } else {
        0
    }
}

/// Catches Ctrl+C, Ctrl+Break and console close for `claim --hold`.
pub struct Termination;

impl Termination {
    /// Registers the console control handler.
    pub fn install() -> io::Result<Termination> {
        // SAFETY: registers a handler that only stores to an atomic.
        if unsafe { SetConsoleCtrlHandler(Some(on_console_event), 1) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Termination)
    }

    /// Blocks until a console event arrives (true) or `stop` is set (false,
    /// checked every `poll`).
    pub fn wait(&mut self, stop: &AtomicBool, poll: std::time::Duration) -> bool {
        loop {
            if TERMINATION.load(Ordering::SeqCst) {
                return true;
            }
            if stop.load(Ordering::SeqCst) {
                return false;
            }
            std::thread::sleep(poll);
        }
    }
}

/// The child's exit code; codes that do not fit in 0..=255 become 1.
pub fn exit_code(status: ExitStatus) -> ExitCode {
    match status.code().map(u8::try_from) {
        Some(Ok(code)) => ExitCode::from(code),
        _ => ExitCode::FAILURE,
    }
}

//! Keeps one exploration on one CPU: the worker thread that runs seeds and every
//! actor thread it starts.
//!
//! Why: exactly one thread of a run moves at a time, so a run is a chain of
//! handoffs. A handoff to a thread on another CPU is a cross-CPU wake-up (in a
//! virtual machine, an exit to the host); on the same CPU it is a plain switch. On
//! the two-core machine this project is built on, a pinned run took a fraction of
//! the unpinned time, almost all of the difference kernel time. Pinning changes
//! nothing a run decides: the controller, not the OS scheduler, picks who moves.

use std::cell::Cell;

thread_local! {
    static PINNED: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Pins the calling thread to the `n`-th CPU this process may use (wrapping), and
/// remembers it so the actors this thread starts follow ([`follow`]). Best effort:
/// where the platform refuses, nothing changes.
pub(crate) fn pin_to_nth_cpu(n: usize) {
    if let Some(cpu) = platform::nth_allowed_cpu(n) {
        platform::pin_current_thread(cpu);
        PINNED.with(|p| p.set(Some(cpu)));
    }
}

/// The CPU the calling thread was pinned to, if any.
pub(crate) fn current() -> Option<usize> {
    PINNED.with(Cell::get)
}

/// Pins the calling (actor) thread to `cpu`, the CPU of the thread that started it.
/// Only where a new thread does not inherit its creator's CPU: Windows threads start
/// with the process's mask, Linux threads with their creator's.
pub(crate) fn follow(cpu: Option<usize>) {
    if let Some(cpu) = cpu
        && !platform::THREADS_INHERIT
    {
        platform::pin_current_thread(cpu);
    }
}

#[cfg(target_os = "linux")]
mod platform {
    pub(super) const THREADS_INHERIT: bool = true;

    pub(super) fn nth_allowed_cpu(n: usize) -> Option<usize> {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes
        // at most size_of::<cpu_set_t>() bytes into it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let got =
            unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        if got != 0 {
            return None;
        }
        let allowed: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: cpu < CPU_SETSIZE, the set's capacity.
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .collect();
        (!allowed.is_empty()).then(|| allowed[n % allowed.len()])
    }

    pub(super) fn pin_current_thread(cpu: usize) {
        // SAFETY: as above; pid 0 is the calling thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

#[cfg(windows)]
mod platform {
    pub(super) const THREADS_INHERIT: bool = false;

    use windows_sys::Win32::System::Threading::{
        GetCurrentProcess, GetCurrentThread, GetProcessAffinityMask, SetThreadAffinityMask,
    };

    pub(super) fn nth_allowed_cpu(n: usize) -> Option<usize> {
        let (mut process, mut system) = (0usize, 0usize);
        // SAFETY: both out-pointers are valid for writes; the pseudo-handle needs no closing.
        if unsafe { GetProcessAffinityMask(GetCurrentProcess(), &mut process, &mut system) } == 0 {
            return None;
        }
        let allowed: Vec<usize> = (0..usize::BITS as usize)
            .filter(|&cpu| process & (1 << cpu) != 0)
            .collect();
        (!allowed.is_empty()).then(|| allowed[n % allowed.len()])
    }

    pub(super) fn pin_current_thread(cpu: usize) {
        // SAFETY: the pseudo-handle names the calling thread; a refused mask changes nothing.
        unsafe { SetThreadAffinityMask(GetCurrentThread(), 1 << cpu) };
    }
}

#[cfg(not(any(target_os = "linux", windows)))]
mod platform {
    pub(super) const THREADS_INHERIT: bool = true;

    pub(super) fn nth_allowed_cpu(_n: usize) -> Option<usize> {
        None
    }
    pub(super) fn pin_current_thread(_cpu: usize) {}
}

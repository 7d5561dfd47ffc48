//! The removal thread: removals of superseded records
//! ([`LeaseStore::remove_superseded`](fencepost::LeaseStore::remove_superseded)) made
//! on a background thread per store handle, so the claimant does not wait for them
//! (docs/design-07-performance.md, "What the floors leave out").
//!
//! Where removing a flushed file waits for the device (ext4 without a journal,
//! mounted `discard`: the `unlink` waits for a synchronous discard), the sweep after
//! every claim put that wait on the claimant's clock. The protocol's order is
//! unchanged: a removal is queued only when the protocol asks for it, which it does
//! only after the superseding claim's flush returned, so it can only run later.
//!
//! - **Bounded.** At most [`QUEUE_MAX`] removals wait; one more is made on the
//!   caller's thread (a disk slower than the claims cannot grow memory).
//! - **Seen as done.** Through the handle that queued them, queued removals read as
//!   made: listings leave them out and reads return `None`
//!   ([`Removals::hides`]), so a caller never sees the difference but in time.
//! - **Never through a link.** The thread checks the key directory itself right
//!   before each removal (`lstat`), whatever the handle checked earlier: a directory
//!   swapped for a symbolic link after the removal was queued is refused, and a
//!   record that is a link is removed itself, never its target.
//! - **Lifecycle.** The thread starts with the first queued removal; the last clone
//!   of the store handle to go waits for the queue to drain (at most
//!   [`DRAIN_ON_DROP`]) and joins it. [`FsStore::settle`](crate::FsStore::settle)
//!   waits for every removal queued before it.
//! - **Lost removals are harmless.** A process killed with removals queued leaves
//!   superseded records behind; the next claim's sweep removes every generation
//!   listed below it (docs/protocol.md §3.6).

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fencepost::Key;

/// At most this many removals wait for the thread; one more is made on the
/// caller's thread. A sweep queues one or two, so this is tens of claims' worth.
pub(crate) const QUEUE_MAX: usize = 64;

/// The longest dropping the last clone of a store handle waits for its queued
/// removals (tens of milliseconds on a discarding disk; a hung one is left behind:
/// its records are superseded, and the next claim's sweep removes them).
pub(crate) const DRAIN_ON_DROP: Duration = Duration::from_secs(5);

/// One queued removal: the record `generation` of `key`, in `dir`.
#[derive(Debug)]
struct Job {
    key: Key,
    generation: u64,
    dir: PathBuf,
    path: PathBuf,
}

#[derive(Debug, Default)]
struct State {
    jobs: VecDeque<Job>,
    /// The job the thread is making now (still hidden from listings until done).
    running: Option<Job>,
    /// Removals queued so far, and made (or given up) so far: `settle` waits for
    /// the second to reach what the first was when it was called.
    queued: u64,
    finished: u64,
    /// The last handle went: drain, then stop.
    closing: bool,
    /// The drain timed out: stop after the current job.
    abandoned: bool,
    /// The thread is asleep on `work` (only then does a new job notify it: a
    /// notification is a `futex` call even with nobody waiting).
    asleep: bool,
    /// Callers asleep on `done` (`settle`, the drain): only then does a finished
    /// job notify.
    settling: usize,
    /// Tests: the thread takes no job while set.
    #[cfg(test)]
    paused: bool,
    /// Tests: a slow disk, slept before each removal.
    #[cfg(test)]
    delay: Option<Duration>,
    /// Tests: the next listing, between reading the directory and leaving out
    /// pending removals, unpauses the thread and settles.
    #[cfg(test)]
    settle_mid_listing: bool,
}

#[derive(Debug, Default)]
struct Queue {
    state: Mutex<State>,
    /// Wakes the thread: a job, closing, or (tests) unpausing.
    work: Condvar,
    /// Wakes `settle` and the drain: a job finished.
    done: Condvar,
    /// Jobs queued or running; read without the lock so that listings and reads
    /// pay nothing while nothing is pending.
    pending: AtomicUsize,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The removal queue and thread of one store handle (shared by its clones).
#[derive(Debug, Default)]
pub(crate) struct Removals {
    queue: Arc<Queue>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Whether [`Removals::queue`] took the removal or the caller must make it itself.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Queued {
    Yes,
    /// The queue is full or the thread could not be started.
    No,
}

impl Removals {
    /// Queues the removal of record `generation` of `key` (file `path` in key
    /// directory `dir`), starting the thread if this is the first.
    pub(crate) fn queue(&self, key: &Key, generation: u64, dir: &Path, path: PathBuf) -> Queued {
        let mut state = self.queue.lock();
        if state.jobs.len() >= QUEUE_MAX || state.closing {
            return Queued::No;
        }
        if !self.ensure_thread() {
            return Queued::No;
        }
        state.jobs.push_back(Job {
            key: key.clone(),
            generation,
            dir: dir.to_path_buf(),
            path,
        });
        state.queued += 1;
        self.queue.pending.fetch_add(1, Ordering::Release);
        let asleep = state.asleep;
        drop(state);
        if asleep {
            self.queue.work.notify_one();
        }
        Queued::Yes
    }

    /// Starts the thread unless it runs; false when it cannot be started.
    fn ensure_thread(&self) -> bool {
        let mut thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if thread.is_some() {
            return true;
        }
        let queue = Arc::clone(&self.queue);
        match std::thread::Builder::new()
            .name("fencepost-fs-removals".into())
            .spawn(move || run(&queue))
        {
            Ok(handle) => {
                *thread = Some(handle);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether record `generation` of `key` is queued or being removed: it reads as
    /// removed through this handle.
    pub(crate) fn hides(&self, key: &Key, generation: u64) -> bool {
        if self.queue.pending.load(Ordering::Acquire) == 0 {
            return false;
        }
        let state = self.queue.lock();
        state
            .running
            .iter()
            .chain(state.jobs.iter())
            .any(|job| job.generation == generation && job.key == *key)
    }

    /// The generations of `key` queued or being removed now. A listing made after
    /// this call leaves them out: taken before the listing, a removal that
    /// finishes while the directory is read is still left out, which taken after
    /// it would miss (the thread is done, yet the listing saw the record).
    pub(crate) fn pending_of(&self, key: &Key) -> Vec<u64> {
        if self.queue.pending.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let state = self.queue.lock();
        state
            .running
            .iter()
            .chain(state.jobs.iter())
            .filter(|job| job.key == *key)
            .map(|job| job.generation)
            .collect()
    }

    /// Waits until every removal queued before this call was made (or failed: a
    /// failed removal is dropped, as the protocol ignores it).
    pub(crate) fn settle(&self) {
        let mut state = self.queue.lock();
        let target = state.queued;
        while state.finished < target && !state.abandoned {
            state.settling += 1;
            state = self
                .queue
                .done
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
            state.settling -= 1;
        }
    }

    /// How many removals are queued or running.
    #[cfg(all(test, unix))]
    pub(crate) fn pending(&self) -> usize {
        self.queue.pending.load(Ordering::Acquire)
    }

    /// Tests: a slow disk (each removal sleeps `delay` first).
    #[cfg(all(test, unix))]
    pub(crate) fn slow_down(&self, delay: Duration) {
        self.queue.lock().delay = Some(delay);
    }

    /// Tests: the next listing finishes every pending removal after reading the
    /// directory and before leaving pending removals out (the race of a removal
    /// made while a listing runs).
    #[cfg(all(test, unix))]
    pub(crate) fn settle_mid_next_listing(&self) {
        self.queue.lock().settle_mid_listing = true;
    }

    /// Tests: called by a listing after it read the directory.
    #[cfg(test)]
    pub(crate) fn listed(&self) {
        let mut state = self.queue.lock();
        if !std::mem::take(&mut state.settle_mid_listing) {
            return;
        }
        state.paused = false;
        drop(state);
        self.queue.work.notify_all();
        self.settle();
    }

    /// Tests: hold the thread (no job taken) or let it go.
    #[cfg(all(test, unix))]
    pub(crate) fn pause(&self, paused: bool) {
        self.queue.lock().paused = paused;
        self.queue.work.notify_all();
    }
}

impl Drop for Removals {
    /// The last clone of the store handle went: drain the queue (at most
    /// [`DRAIN_ON_DROP`]) and join the thread; past that, the thread stops after
    /// its current removal and is left to finish it.
    fn drop(&mut self) {
        let Some(thread) = self
            .thread
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        let deadline = Instant::now() + DRAIN_ON_DROP;
        let mut state = self.queue.lock();
        state.closing = true;
        self.queue.work.notify_all();
        while state.finished < state.queued {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                state.abandoned = true;
                drop(state);
                self.queue.work.notify_all();
                return; // detached: it stops after its current removal
            }
            state.settling += 1;
            state = self
                .queue
                .done
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            state.settling -= 1;
        }
        drop(state);
        let _ = thread.join();
    }
}

/// The thread: takes jobs in the order they were queued until closed and drained.
fn run(queue: &Queue) {
    loop {
        let mut state = queue.lock();
        let job = loop {
            if state.abandoned {
                return;
            }
            #[cfg(test)]
            let paused = state.paused;
            #[cfg(not(test))]
            let paused = false;
            if !paused && let Some(job) = state.jobs.pop_front() {
                break job;
            }
            if state.closing && state.jobs.is_empty() {
                return;
            }
            state.asleep = true;
            state = queue.work.wait(state).unwrap_or_else(|e| e.into_inner());
            state.asleep = false;
        };
        let (dir, path) = (job.dir.clone(), job.path.clone());
        state.running = Some(job);
        #[cfg(test)]
        let delay = state.delay;
        drop(state);
        #[cfg(test)]
        if let Some(delay) = delay {
            std::thread::sleep(delay);
        }
        let _ = remove_checked(&dir, &path);
        let mut state = queue.lock();
        state.running = None;
        state.finished += 1;
        queue.pending.fetch_sub(1, Ordering::Release);
        let settling = state.settling > 0;
        drop(state);
        if settling {
            queue.done.notify_all();
        }
    }
}

/// Removes record file `path` in key directory `dir` without following a link in
/// place of `dir` (`sys::remove_in`; missing is success): the check the handle
/// made when the removal was queued may be stale by now. A record name that is a
/// symbolic link is removed itself, never its target.
pub(crate) fn remove_checked(dir: &Path, path: &Path) -> io::Result<()> {
    match path.file_name().and_then(|name| name.to_str()) {
        Some(name) => crate::sys::remove_in(dir, name),
        None => Ok(()),
    }
}

//! `__ops sweep-probe N DIR`: what removing a superseded record costs next to a
//! flushed create, and whether any placement of the removal makes it cheaper
//! (docs/design-07-performance.md, "What the floors leave out"). Diagnostic only: the
//! report does not run it.
//!
//! Six ways of doing one flushed create and one removal of an older file, timed
//! round-robin (one of each per round, each in its own directory, so all see the same
//! disk weather), each printing its p50 and mean per create and the mean of its
//! removal calls. Then a seventh, the removal handed to another thread, which cannot
//! share a round-robin (its removal would land on the next way's clock): timed in
//! blocks of back-to-back creates alternated with blocks of the floor and of the
//! removal right after the flush, the other thread drained (untimed) at each block's
//! end.

use std::collections::VecDeque;
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::R;
use crate::floor::RECORD_BYTES;
use crate::stats::{fmt, summarize};

/// How many removals the batched variant makes in one go.
const BATCH: usize = 4;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    /// The floor: the old file is removed untimed.
    Untimed,
    /// Removal by path right after the flushes (what a sweep does).
    AfterFlush,
    /// Removal by path before the create (the next operation's).
    BeforeCreate,
    /// Removal with `unlinkat` on a directory handle kept open.
    KeptDirHandle,
    /// Every BATCH-th create removes BATCH old files in one go.
    Batched,
    /// Creates never flushed, so the removed file never had a block on disk.
    NeverFlushed,
    /// The removal handed to another thread; the create does not wait for it.
    OtherThread,
}

const WAYS: [(Way, &str); 6] = [
    (
        Way::Untimed,
        "flushed create, old file removed untimed (the floor)",
    ),
    (
        Way::AfterFlush,
        "flushed create, then unlink of the oldest file",
    ),
    (
        Way::BeforeCreate,
        "unlink of the oldest file, then flushed create",
    ),
    (
        Way::KeptDirHandle,
        "flushed create, then unlinkat on a kept directory handle",
    ),
    (
        Way::Batched,
        "flushed create; every 4th removes the 4 oldest in one go",
    ),
    (
        Way::NeverFlushed,
        "unflushed create, then unlink of an unflushed file",
    ),
];

/// The blocked phase: these three, in blocks of [`BLOCK`] back-to-back creates.
const BLOCKED: [(Way, &str); 3] = [
    (
        Way::Untimed,
        "blocks: flushed create, old file removed untimed (the floor)",
    ),
    (
        Way::AfterFlush,
        "blocks: flushed create, then unlink of the oldest file",
    ),
    (
        Way::OtherThread,
        "blocks: flushed create, unlink handed to another thread (not awaited)",
    ),
];

/// Creates per block in the blocked phase.
const BLOCK: usize = 50;

struct Dir {
    path: PathBuf,
    handle: File,
    next: u64,
    files: VecDeque<u64>,
    samples: Vec<Duration>,
    removal: Duration,
    removals: u32,
}

fn name(g: u64) -> String {
    format!("g{g:08}.json")
}

impl Dir {
    fn create(&mut self, flush: bool) -> R<()> {
        let g = self.next;
        self.next += 1;
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.path.join(name(g)))?;
        file.write_all(&[b'x'; RECORD_BYTES])?;
        if flush {
            file.sync_all()?;
            File::open(&self.path)?.sync_all()?;
        }
        self.files.push_back(g);
        Ok(())
    }

    /// Removes the oldest file, timed into `removal`.
    fn remove_oldest(&mut self, kept_handle: bool) -> R<()> {
        let Some(g) = self.files.pop_front() else {
            return Ok(());
        };
        let start = Instant::now();
        if kept_handle {
            let c = CString::new(name(g))?;
            // SAFETY: a valid directory descriptor and a NUL-terminated name.
            if unsafe { libc::unlinkat(self.handle.as_raw_fd(), c.as_ptr(), 0) } != 0 {
                return Err(std::io::Error::last_os_error().into());
            }
        } else {
            fs::remove_file(self.path.join(name(g)))?;
        }
        self.removal += start.elapsed();
        self.removals += 1;
        Ok(())
    }
}

/// One directory per way under `dir`, each holding two flushed files to start with,
/// as a swept series does.
fn dirs(dir: &Path, prefix: &str, ways: usize, rounds: usize) -> R<Vec<Dir>> {
    let mut dirs = Vec::new();
    for i in 0..ways {
        let path = dir.join(format!("{prefix}{i}"));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path)?;
        let handle = File::open(&path)?;
        let mut d = Dir {
            path,
            handle,
            next: 1,
            files: VecDeque::new(),
            samples: Vec::with_capacity(rounds),
            removal: Duration::ZERO,
            removals: 0,
        };
        for _ in 0..2 {
            d.create(true)?;
        }
        dirs.push(d);
    }
    Ok(dirs)
}

/// A removal thread: removes every path it is sent; answers each `None` (a drain
/// request) once everything sent before it is removed.
struct Remover {
    tx: mpsc::Sender<Option<PathBuf>>,
    done: mpsc::Receiver<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Remover {
    fn start() -> Remover {
        let (tx, rx) = mpsc::channel::<Option<PathBuf>>();
        let (done_tx, done) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            for path in rx {
                match path {
                    Some(path) => {
                        let _ = fs::remove_file(path);
                    }
                    None => {
                        if done_tx.send(()).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Remover { tx, done, thread }
    }

    fn drain(&self) -> R<()> {
        self.tx.send(None)?;
        self.done.recv()?;
        Ok(())
    }
}

/// Runs the probe: `rounds` rounds under `dir`.
pub fn run(dir: &Path, rounds: usize) -> R<()> {
    let remover = Remover::start();
    let mut ways = dirs(dir, "way", WAYS.len(), rounds)?;
    let warmup = rounds / 10;
    for round in 0..warmup + rounds {
        for (d, (way, _)) in ways.iter_mut().zip(WAYS) {
            step(d, way, &remover, round >= warmup)?;
        }
    }
    report(ways, &WAYS);
    let mut blocked = dirs(dir, "block", BLOCKED.len(), rounds)?;
    let blocks = (warmup + rounds).div_ceil(BLOCK);
    for block in 0..blocks {
        for (d, (way, _)) in blocked.iter_mut().zip(BLOCKED) {
            for _ in 0..BLOCK {
                step(d, way, &remover, block * BLOCK >= warmup)?;
            }
            remover.drain()?;
        }
    }
    report(blocked, &BLOCKED);
    drop(remover.tx);
    let _ = remover.thread.join();
    Ok(())
}

/// One create of `way` in `d`, its removal as `way` places it; `keep` records the
/// sample (else it is warm-up).
fn step(d: &mut Dir, way: Way, remover: &Remover, keep: bool) -> R<()> {
    {
        {
            let start = Instant::now();
            match way {
                Way::Untimed => d.create(true)?,
                Way::AfterFlush | Way::KeptDirHandle => {
                    d.create(true)?;
                    d.remove_oldest(way == Way::KeptDirHandle)?;
                }
                Way::BeforeCreate => {
                    d.remove_oldest(false)?;
                    d.create(true)?;
                }
                Way::Batched => {
                    d.create(true)?;
                    if d.files.len() > 1 + BATCH {
                        for _ in 0..BATCH {
                            d.remove_oldest(false)?;
                        }
                    }
                }
                Way::NeverFlushed => {
                    d.create(false)?;
                    d.remove_oldest(false)?;
                }
                Way::OtherThread => {
                    d.create(true)?;
                    if let Some(g) = d.files.pop_front() {
                        remover.tx.send(Some(d.path.join(name(g))))?;
                    }
                }
            }
            let took = start.elapsed();
            if way == Way::Untimed {
                while d.files.len() > 2 {
                    let g = d.files.pop_front().expect("non-empty");
                    fs::remove_file(d.path.join(name(g)))?;
                }
            }
            if keep {
                d.samples.push(took);
            } else {
                d.removal = Duration::ZERO;
                d.removals = 0;
            }
        }
    }
    Ok(())
}

fn report(dirs: Vec<Dir>, ways: &[(Way, &str)]) {
    for (d, (_, what)) in dirs.into_iter().zip(ways) {
        let removal = if d.removals == 0 {
            "—".to_string()
        } else {
            fmt(d.removal / d.removals)
        };
        let s = summarize(d.samples);
        println!(
            "{what}: p50 {}, mean {} per create; removal call mean {removal} over {} calls",
            fmt(s.p50),
            fmt(s.mean),
            d.removals
        );
        let _ = fs::remove_dir_all(&d.path);
    }
}

//! The floor: what the filesystem itself charges for the operations the protocol is
//! built from, measured on the same directory in the same run.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::R;

/// The size of one record on disk (a fencepost v1 record is about 250 bytes).
pub const RECORD_BYTES: usize = 256;

/// A scratch directory plus the state the floor operations need.
pub struct FloorKit {
    create_dir: PathBuf,
    list_dir: PathBuf,
    status_dir: PathBuf,
    next: u64,
    /// The files in `create_dir`, oldest first.
    files: std::collections::VecDeque<u64>,
    bytes: Vec<u8>,
}

/// Which flushes a floor create makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flush {
    None,
    File,
    Both,
}

/// The generation number in a record-like name `g00000012.json`.
fn parse_name(name: &str) -> Option<u64> {
    name.strip_prefix('g')?.strip_suffix(".json")?.parse().ok()
}

/// Lists `dir`, picks the highest-numbered record-like name, reads it.
fn list_and_read_newest(dir: &Path) -> R<usize> {
    let mut newest = None;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(g) = entry.file_name().to_str().and_then(parse_name) {
            newest = newest.max(Some(g));
        }
    }
    let g = newest.ok_or("floor directory without records")?;
    Ok(fs::read(dir.join(format!("g{g:08}.json")))?.len())
}

impl FloorKit {
    /// Prepares the scratch directories under `root`: one for creates, one holding
    /// two small records, and `status_keys` key directories of two records each.
    pub fn new(root: &Path, status_keys: usize) -> R<FloorKit> {
        let kit = FloorKit {
            create_dir: root.join("create"),
            list_dir: root.join("list"),
            status_dir: root.join("status"),
            next: 1,
            files: std::collections::VecDeque::new(),
            bytes: vec![b'x'; RECORD_BYTES],
        };
        fs::create_dir_all(&kit.create_dir)?;
        fs::create_dir_all(&kit.list_dir)?;
        for g in 1..=2 {
            fs::write(kit.list_dir.join(format!("g{g:08}.json")), &kit.bytes)?;
        }
        for k in 0..status_keys {
            let dir = kit.status_dir.join(format!("k{k:05}"));
            fs::create_dir_all(&dir)?;
            for g in 1..=2 {
                fs::write(dir.join(format!("g{g:08}.json")), &kit.bytes)?;
            }
        }
        Ok(kit)
    }

    /// One exclusive create of a new name plus a write of one record, and with
    /// `flush` a flush of the file and then of the directory. The file from two
    /// creates ago is removed first, untimed, so the directory stays as small as a
    /// swept claim series.
    pub fn create(&mut self, flush: bool) -> R<Duration> {
        self.create_with(if flush { Flush::Both } else { Flush::None }, 0)
    }

    /// The single-fsync floor: one exclusive create of a new name, a write of one
    /// record and ONE flush, of the file. On a journaling filesystem that is one
    /// journal commit carrying both the data and the name; it is the least a durable
    /// claim could cost, though POSIX alone does not promise the name survives it
    /// (that takes the directory flush of [`create`](FloorKit::create)).
    pub fn create_one_flush(&mut self) -> R<Duration> {
        self.create_with(Flush::File, 0)
    }

    /// A flushed create: the single-fsync one when `one_flush`, else file + directory.
    pub fn create_flushed(&mut self, one_flush: bool) -> R<Duration> {
        if one_flush {
            self.create_one_flush()
        } else {
            self.create(true)
        }
    }

    /// A create (flushed as `flush` says) that first removes, **timed**, the
    /// `removals` oldest files of the directory: what a sweep charges. A renewal
    /// removes the record it superseded and an acquisition the claim and tombstone
    /// below its own (docs/protocol.md §3.6: the series stays bounded); the plain
    /// floors remove the file from two creates ago untimed, so this is the same
    /// work with the removal on the clock.
    pub fn create_removing(&mut self, flush: bool, removals: usize) -> R<Duration> {
        self.create_with(if flush { Flush::Both } else { Flush::None }, removals)
    }

    fn create_with(&mut self, flush: Flush, removals: usize) -> R<Duration> {
        let n = self.next;
        self.next += 1;
        // Untimed: leave one file before the create (two after it, as a swept
        // series holds), besides the ones the timed removal takes.
        while self.files.len() > 1 + removals {
            let old = self.files.pop_front().expect("non-empty");
            let _ = fs::remove_file(self.create_dir.join(format!("g{old:08}.json")));
        }
        let path = self.create_dir.join(format!("g{n:08}.json"));
        let start = Instant::now();
        for _ in 0..removals {
            if let Some(old) = self.files.pop_front() {
                fs::remove_file(self.create_dir.join(format!("g{old:08}.json")))?;
            }
        }
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        file.write_all(&self.bytes)?;
        if flush != Flush::None {
            file.sync_all()?;
        }
        if flush == Flush::Both {
            File::open(&self.create_dir)?.sync_all()?;
        }
        drop(file);
        let elapsed = start.elapsed();
        self.files.push_back(n);
        Ok(elapsed)
    }

    /// One directory listing plus a read of the newest of two small files.
    pub fn list_read(&mut self) -> R<Duration> {
        let start = Instant::now();
        std::hint::black_box(list_and_read_newest(&self.list_dir)?);
        Ok(start.elapsed())
    }

    /// A listing of the status directory, then listing + read in each key directory:
    /// the shape of `status` over that many keys.
    pub fn status(&mut self) -> R<Duration> {
        let start = Instant::now();
        for entry in fs::read_dir(&self.status_dir)? {
            std::hint::black_box(list_and_read_newest(&entry?.path())?);
        }
        Ok(start.elapsed())
    }
}

/// The wake floor of a handoff: what the kernel charges to tell a thread asleep on a
/// directory's change notification (inotify, as the fs backend's waiters use) that
/// another thread created a name in it, with no protocol at all. Per round the waker
/// sleeps `hold` (so the waiter is really asleep, as in the handoff row), then creates
/// an unflushed file; timed from just before that create to the waiter's `poll`
/// returning. On an idle machine this is mostly the time to wake an idle CPU.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn wake(dir: &Path, rounds: usize, hold: Duration) -> R<crate::stats::Summary> {
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::sync::mpsc;

    fs::create_dir_all(dir)?;
    // SAFETY: no pointers; checked below.
    let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if raw < 0 {
        return Err(format!("inotify_init1: {}", std::io::Error::last_os_error()).into());
    }
    // SAFETY: a descriptor just opened, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let path = CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: valid descriptor and NUL-terminated path.
    if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), libc::IN_CREATE) } < 0 {
        return Err(format!("inotify_add_watch: {}", std::io::Error::last_os_error()).into());
    }
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let (woke_tx, woke_rx) = mpsc::channel::<Instant>();
    std::thread::scope(|scope| -> R<crate::stats::Summary> {
        let fd = &fd;
        scope.spawn(move || {
            let mut events = [0u8; 4096];
            for _ in 0..rounds {
                if ready_tx.send(()).is_err() {
                    return;
                }
                let mut poll = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut poll, 1, 30_000) };
                let woke = Instant::now();
                // SAFETY: valid writable buffer, non-blocking descriptor.
                while unsafe { libc::read(fd.as_raw_fd(), events.as_mut_ptr().cast(), 4096) } > 0 {}
                if woke_tx.send(woke).is_err() {
                    return;
                }
            }
        });
        let mut samples = Vec::with_capacity(rounds);
        for n in 0..rounds {
            ready_rx.recv()?;
            std::thread::sleep(hold);
            let name = dir.join(format!("w{n}"));
            let start = Instant::now();
            File::create(&name)?;
            let woke = woke_rx.recv()?;
            samples.push(woke.saturating_duration_since(start));
            fs::remove_file(&name)?;
        }
        Ok(crate::stats::summarize(samples))
    })
}

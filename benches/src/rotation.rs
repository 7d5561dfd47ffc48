//! The rotation floor of a contention size: W processes taking turns on one key with
//! no protocol at all — only the disk work a handoff must do and a wake-up of the
//! next process in a fixed ring. What the disk, the kernel and the scheduler allow
//! for a fair handoff among W processes on this machine.
//!
//! Each member sleeps on change notification (inotify, `IN_ATTRIB`) of its own
//! ticket file. Woken, it does one tenure's disk work: a listing of the key
//! directory and a read of its newest record, an exclusive create of the next
//! record (flushed: file and directory, or not), a line appended to a shared log;
//! then the release's listing, read and unflushed tombstone create; then it touches
//! (`utimensat`) the next member's ticket, removes the two records below its claim
//! (the sweep, off the handoff's path as the fs backend's removal thread makes it)
//! and sleeps again. Nothing is queued, nothing is decided, nothing is read twice:
//! the order is fixed in advance, which is what the protocol's turns must discover.
//! The records are [`RECORD_BYTES`] long, as the floors' are.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::R;
use crate::floor::RECORD_BYTES;

/// One rotation run: how many handoffs, in how long, and the CPU they took.
#[derive(Debug, Clone, Copy)]
pub struct Rotation {
    pub handoffs: usize,
    pub elapsed: Duration,
    pub cpu: Duration,
}

impl Rotation {
    /// Handoffs per second.
    pub fn rate(&self) -> f64 {
        self.handoffs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn ticket(dir: &Path, member: usize) -> std::path::PathBuf {
    dir.join(format!("t{member}"))
}

/// The newest record-like generation in `key`, read (0 when there is none).
fn list_read_newest(key: &Path) -> R<u64> {
    let mut newest = 0;
    for entry in fs::read_dir(key)? {
        let name = entry?.file_name();
        if let Some(g) = name
            .to_str()
            .and_then(|n| n.strip_prefix('g')?.strip_suffix(".json")?.parse().ok())
        {
            newest = newest.max(g);
        }
    }
    if newest > 0 {
        std::hint::black_box(fs::read(key.join(format!("g{newest:08}.json")))?);
    }
    Ok(newest)
}

fn create(key: &Path, g: u64, bytes: &[u8], flush: bool) -> R<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(key.join(format!("g{g:08}.json")))?;
    file.write_all(bytes)?;
    if flush {
        file.sync_all()?;
        File::open(key)?.sync_all()?;
    }
    Ok(())
}

/// Member mode: waits for `go` on stdin (member 0 then begins), `rounds` tenures.
pub fn member(dir: &Path, index: usize, members: usize, rounds: usize, flush: bool) -> R<()> {
    // SAFETY: no pointers; checked below.
    let raw = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if raw < 0 {
        return Err(format!("inotify_init1: {}", std::io::Error::last_os_error()).into());
    }
    // SAFETY: a descriptor just opened, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let own = CString::new(ticket(dir, index).as_os_str().as_bytes())?;
    // SAFETY: valid descriptor and NUL-terminated path.
    if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), own.as_ptr(), libc::IN_ATTRIB) } < 0 {
        return Err(format!("inotify_add_watch: {}", std::io::Error::last_os_error()).into());
    }
    let next = CString::new(ticket(dir, (index + 1) % members).as_os_str().as_bytes())?;
    let key = dir.join("key");
    let mut log = OpenOptions::new().append(true).open(dir.join("log"))?;
    let bytes = vec![b'x'; RECORD_BYTES];
    let mut events = [0u8; 4096];
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    for round in 0..rounds {
        if !(index == 0 && round == 0) {
            // SAFETY: valid writable buffer; a blocking read returns at the first event.
            if unsafe { libc::read(fd.as_raw_fd(), events.as_mut_ptr().cast(), events.len()) } <= 0
            {
                return Err(format!("inotify read: {}", std::io::Error::last_os_error()).into());
            }
        }
        let newest = list_read_newest(&key)?;
        let claim = newest + 1;
        create(&key, claim, &bytes, flush)?;
        log.write_all(format!("{claim} {index} {round}\n").as_bytes())?;
        let newest = list_read_newest(&key)?;
        create(&key, newest + 1, &bytes, false)?;
        // SAFETY: NUL-terminated path; a null `times` sets both to now.
        if unsafe { libc::utimensat(libc::AT_FDCWD, next.as_ptr(), std::ptr::null(), 0) } != 0 {
            return Err(format!("utimensat: {}", std::io::Error::last_os_error()).into());
        }
        // The sweep of the two records below this tenure's claim, after the next
        // member was woken: off the handoff's path, as the fs backend's removal
        // thread makes it.
        for old in claim.saturating_sub(2)..claim {
            if old > 0 {
                let _ = fs::remove_file(key.join(format!("g{old:08}.json")));
            }
        }
    }
    // When this member's last tenure ended (the monotonic clock every process
    // shares): the run ends with the last of these, not with the processes' exits,
    // as the contention row's does.
    println!("D {}", crate::contention::mono_ns());
    Ok(())
}

/// Runs a rotation of `members` processes, `rounds` tenures each, in a fresh
/// directory under `dir`, and checks its log (every tenure, in order).
pub fn run(dir: &Path, members: usize, rounds: usize, flush: bool) -> R<Rotation> {
    let dir = dir.join(format!(
        "rotation-{members}-{}",
        if flush { "flush" } else { "noflush" }
    ));
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    fs::create_dir_all(dir.join("key"))?;
    fs::write(dir.join("log"), "")?;
    for m in 0..members {
        fs::write(ticket(&dir, m), "")?;
    }
    let exe = std::env::current_exe()?;
    let cpu_before = crate::contention::children_cpu();
    let mut children: Vec<Child> = (0..members)
        .map(|m| {
            Command::new(&exe)
                .arg("__rotation-member")
                .arg(&dir)
                .arg(m.to_string())
                .arg(members.to_string())
                .arg(rounds.to_string())
                .arg(if flush { "flush" } else { "noflush" })
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    // Let every member make its watch before the start.
    std::thread::sleep(Duration::from_millis(200));
    let go = crate::contention::mono_ns();
    for child in &mut children {
        child.stdin.take().ok_or("no stdin")?.write_all(b"go\n")?;
    }
    let mut done = go;
    for child in children {
        let out = child.wait_with_output()?;
        if !out.status.success() {
            return Err(format!("a rotation member exited with {}", out.status).into());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let at: u64 = text
            .trim()
            .strip_prefix("D ")
            .ok_or_else(|| format!("bad rotation member output: {text}"))?
            .parse()?;
        done = done.max(at);
    }
    let elapsed = Duration::from_nanos(done - go);
    let cpu = crate::contention::children_cpu().saturating_sub(cpu_before);
    let handoffs = members * rounds;
    let log = fs::read_to_string(dir.join("log"))?;
    let claims: Vec<u64> = log
        .lines()
        .map(|l| l.split(' ').next().unwrap_or("").parse())
        .collect::<Result<_, _>>()?;
    if claims.len() != handoffs || claims.windows(2).any(|w| w[1] <= w[0]) {
        return Err("the rotation's log is not one increasing line per tenure".into());
    }
    Ok(Rotation {
        handoffs,
        elapsed,
        cpu,
    })
}

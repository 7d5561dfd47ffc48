//! The wedged-holder comparison: per library, two real OS processes. The holder
//! takes the lock and is stopped with SIGSTOP past its ttl / stale time; a second
//! process takes over (or cannot); the holder is resumed with SIGCONT and tries to
//! write and to release. Every outcome in the table is observed, not assumed.

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fencepost::{AcquireOptions, Error, Resource, Store, TryAcquire};
use fencepost_fs::FsStore;

use crate::R;
use crate::rivals::{MtimeLockfile, flock_file};

/// The libraries compared.
pub const LIBRARIES: [&str; 3] = ["fencepost", "lockfile", "flock"];

/// What one library let happen.
#[derive(Debug)]
pub struct Outcome {
    pub library: &'static str,
    pub stale_ms: u64,
    pub paused: Duration,
    /// The successor's own report: `took <id>` or `blocked <ms>`.
    pub successor: String,
    pub took_over: bool,
    /// Whether anything the resumed holder called told it the lock was lost.
    pub learned: bool,
    /// How the holder's gate and release answered.
    pub holder_saw: String,
    /// Whether the resumed holder's write is in the shared data file.
    pub write_landed: bool,
    /// After the holder's release: does the successor still hold its lock?
    pub successor_intact: Option<bool>,
}

const RESOURCE: &str = "wedged";
const WRITE_MARK: &str = "write by the resumed holder";

fn append(dir: &Path, line: &str) -> R<()> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("data.log"))?;
    f.write_all(format!("{line}\n").as_bytes())?;
    Ok(())
}

fn wait_for_go() -> R<()> {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    Ok(())
}

fn say(line: &str) -> R<()> {
    let mut out = std::io::stdout();
    writeln!(out, "{line}")?;
    Ok(out.flush()?)
}

/// Holder mode: take the lock, say `ready`, block until resumed and told `go`,
/// then gate (where the library has a gate), write, release, and say what happened.
pub fn holder(library: &str, dir: &Path, stale_ms: u64) -> R<()> {
    match library {
        "fencepost" => {
            let store = Store::new(FsStore::open(dir.join("store"))?);
            let resource = Resource::lock(RESOURCE);
            let lease = store.acquire(&resource, &AcquireOptions::new(stale_ms).owner("holder"))?;
            say(&format!("ready {}", lease.token()))?;
            wait_for_go()?;
            let gate = store.check(&resource, lease.token())?;
            if gate {
                append(dir, WRITE_MARK)?;
            }
            let release = match store.release(&lease) {
                Ok(()) => "release: ok".to_string(),
                Err(e @ Error::NotHolder { .. }) => {
                    format!("release: refused, not the holder ({e})")
                }
                Err(e) => return Err(e.into()),
            };
            let learned = !gate || release != "release: ok";
            say(&format!(
                "result {learned} check(token) = {gate}; {release}"
            ))
        }
        "lockfile" => {
            let lock = MtimeLockfile {
                path: dir.join("mtime.lock"),
                stale: Duration::from_millis(stale_ms),
                id: format!("holder-{}", std::process::id()),
            };
            while !lock.try_lock()? {
                std::thread::sleep(Duration::from_millis(5));
            }
            say(&format!("ready {}", lock.id))?;
            wait_for_go()?;
            append(dir, WRITE_MARK)?;
            let release = match lock.unlock() {
                Ok(()) => "unlock: ok".to_string(),
                Err(e) => format!("unlock: error ({e})"),
            };
            let learned = release != "unlock: ok";
            say(&format!("result {learned} no gate to call; {release}"))
        }
        "flock" => {
            let mut lock = fd_lock::RwLock::new(flock_file(&dir.join("flock.lock"))?);
            let guard = lock.write()?;
            say("ready flock")?;
            wait_for_go()?;
            append(dir, WRITE_MARK)?;
            drop(guard);
            say("result false no gate to call; unlock: ok (the lock was never lost)")
        }
        other => Err(format!("unknown library {other}").into()),
    }
}

/// Successor mode: try to take the lock for up to three stale times; say
/// `took <id>` or `blocked <ms>`. A fencepost or lockfile successor exits holding
/// its lock (the lease / file outlives the process).
pub fn successor(library: &str, dir: &Path, stale_ms: u64) -> R<()> {
    let patience = Duration::from_millis(3 * stale_ms);
    let start = Instant::now();
    match library {
        "fencepost" => {
            let store = Store::new(FsStore::open(dir.join("store"))?);
            let options = AcquireOptions::new(600_000)
                .owner("successor")
                .wait_ms(patience.as_millis() as u64);
            match store.try_acquire(&Resource::lock(RESOURCE), &options)? {
                TryAcquire::Acquired(lease) => {
                    append(dir, "write by the successor")?;
                    say(&format!("took token {}", lease.token()))
                }
                TryAcquire::Held(_) => say(&format!("blocked {}", start.elapsed().as_millis())),
            }
        }
        "lockfile" => {
            let lock = MtimeLockfile {
                path: dir.join("mtime.lock"),
                stale: Duration::from_millis(stale_ms),
                id: format!("successor-{}", std::process::id()),
            };
            while start.elapsed() < patience {
                if lock.try_lock()? {
                    append(dir, "write by the successor")?;
                    return say(&format!("took {}", lock.id));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            say(&format!("blocked {}", start.elapsed().as_millis()))
        }
        "flock" => {
            let mut lock = fd_lock::RwLock::new(flock_file(&dir.join("flock.lock"))?);
            while start.elapsed() < patience {
                if let Ok(guard) = lock.try_write() {
                    append(dir, "write by the successor")?;
                    drop(guard);
                    return say("took flock");
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            say(&format!("blocked {}", start.elapsed().as_millis()))
        }
        other => Err(format!("unknown library {other}").into()),
    }
}

fn signal(pid: u32, sig: libc::c_int) -> R<()> {
    // SAFETY: plain kill(2) on a child we spawned and have not yet reaped.
    if unsafe { libc::kill(pid as libc::pid_t, sig) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

/// Runs the scenario for `library` in a fresh `dir`.
pub fn run(library: &'static str, dir: &Path, stale_ms: u64) -> R<Outcome> {
    fs::create_dir_all(dir)?;
    let exe = std::env::current_exe()?;
    let mode = |m: &str| {
        let mut c = Command::new(&exe);
        c.arg(m).arg(library).arg(dir).arg(stale_ms.to_string());
        c
    };
    let mut holder = mode("__wedge-holder")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut lines = BufReader::new(holder.stdout.take().ok_or("no holder stdout")?).lines();
    let ready = lines.next().ok_or("the holder said nothing")??;
    if !ready.starts_with("ready ") {
        return Err(format!("the {library} holder did not get ready: {ready}").into());
    }

    signal(holder.id(), libc::SIGSTOP)?;
    let stopped = Instant::now();
    std::thread::sleep(Duration::from_millis(stale_ms + stale_ms / 2));
    let out = mode("__wedge-successor").stdin(Stdio::null()).output()?;
    if !out.status.success() {
        let _ = signal(holder.id(), libc::SIGKILL);
        return Err(format!(
            "the successor failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let successor = String::from_utf8(out.stdout)?.trim().to_string();
    let took = successor.strip_prefix("took ").map(str::to_string);

    signal(holder.id(), libc::SIGCONT)?;
    let paused = stopped.elapsed();
    holder
        .stdin
        .take()
        .ok_or("no holder stdin")?
        .write_all(b"go\n")?;
    let result = lines.next().ok_or("the resumed holder said nothing")??;
    let status = holder.wait()?;
    if !status.success() {
        return Err(format!("the {library} holder exited with {status}").into());
    }
    let (learned, holder_saw) = result
        .strip_prefix("result ")
        .and_then(|r| r.split_once(' '))
        .ok_or("bad holder result")?;
    let data = fs::read_to_string(dir.join("data.log")).unwrap_or_default();
    let successor_intact = match (&took, library) {
        (None, _) => None,
        (Some(token), "fencepost") => {
            let store = Store::new(FsStore::open(dir.join("store"))?);
            let token = token.trim_start_matches("token ").parse()?;
            Some(store.check(&Resource::lock(RESOURCE), token)?)
        }
        (Some(id), _) => Some(fs::read_to_string(dir.join("mtime.lock")).is_ok_and(|c| &c == id)),
    };
    Ok(Outcome {
        library,
        stale_ms,
        paused,
        took_over: took.is_some(),
        successor,
        learned: learned == "true",
        holder_saw: holder_saw.to_string(),
        write_landed: data.lines().any(|l| l == WRITE_MARK),
        successor_intact,
    })
}

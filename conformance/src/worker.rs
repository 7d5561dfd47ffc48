//! Worker processes for the cross-process scenarios: the test binary re-executed
//! with [`crate::WORKER_ENV`] set to a job, opening the same store by locator.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fencepost::{AcquireOptions, BackendError, Resource, Store};
use serde::{Deserialize, Serialize};

use crate::{Failed, WORKER_ENV};

/// What a worker process does.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "job", rename_all = "snake_case")]
pub enum Job {
    /// `rounds` times: acquire `lock` (waiting), mark `busy` exclusively (a second
    /// marker means two holders overlapped), append the token to `log`, unmark,
    /// release.
    Contend {
        /// The lock name.
        lock: String,
        /// How many critical sections.
        rounds: u32,
        /// Lease ttl in milliseconds.
        ttl_ms: u64,
        /// The shared log, one token per line (`OVERLAP` on a violation).
        log: PathBuf,
        /// The busy marker.
        busy: PathBuf,
    },
    /// Acquire `lock`, keep it alive, write the token to `token_file`, then wait to
    /// be killed.
    Hold {
        /// The lock name.
        lock: String,
        /// Lease ttl in milliseconds.
        ttl_ms: u64,
        /// Where the token is written once held.
        token_file: PathBuf,
        /// Acquire with [`AcquireOptions::tied_to_process`], so the records carry
        /// this worker's liveness evidence (dead-holder takeover).
        #[serde(default)]
        tied_to_process: bool,
        /// Acquire for this session ([`AcquireOptions::session`]).
        #[serde(default)]
        session: Option<String>,
    },
    /// `rounds` times: acquire every lock of `locks` at once (all or nothing,
    /// waiting), mark `busy` exclusively while holding `marked` (a second marker
    /// means two holders of it overlapped), append `marked`'s token to `log`,
    /// unmark, release them all.
    ContendAll {
        /// The locks, in the order this worker names them.
        locks: Vec<String>,
        /// The lock whose holders the marker and the log follow.
        marked: String,
        /// How many critical sections.
        rounds: u32,
        /// Lease ttl in milliseconds.
        ttl_ms: u64,
        /// The shared log, one token per line (`OVERLAP` on a violation).
        log: PathBuf,
        /// The busy marker.
        busy: PathBuf,
    },
    /// `rounds` times: acquire one of `slots` slots of `lock` (waiting), mark
    /// `busy/slot-N` exclusively (a second marker means two holders of one slot:
    /// the worker fails), append `TOKEN` to `log/slot-N`, unmark, release.
    ContendSlots {
        /// The lock name.
        lock: String,
        /// How many slots it has.
        slots: u32,
        /// How many critical sections.
        rounds: u32,
        /// The directory of the per-slot logs: `slot-N` gets one token per line,
        /// appended only by slot N's holder. One log shared by the slots would be
        /// appended by several processes at once, and Wine loses lines of
        /// concurrent appends (docs/windows.md).
        log: PathBuf,
        /// The directory of the per-slot markers.
        busy: PathBuf,
    },
    /// Forever: acquire, renew, release `lock` — to be killed at a random point.
    Churn {
        /// The lock name.
        lock: String,
        /// Lease ttl in milliseconds.
        ttl_ms: u64,
    },
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    locator: String,
    job: Job,
}

pub(crate) fn spawn(locator: &str, job: &Job) -> Result<Child, Failed> {
    let exe = std::env::current_exe().map_err(|e| format!("finding the test binary: {e}"))?;
    let envelope = serde_json::to_string(&Envelope {
        locator: locator.to_string(),
        job: job.clone(),
    })
    .map_err(|e| format!("encoding a job: {e}"))?;
    Command::new(exe)
        .env(WORKER_ENV, envelope)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawning a worker: {e}").into())
}

pub(crate) fn run_job(encoded: &str, open: impl Fn(&str) -> Result<Store, BackendError>) -> ! {
    let outcome = (|| -> Result<(), String> {
        let envelope: Envelope =
            serde_json::from_str(encoded).map_err(|e| format!("bad job: {e}"))?;
        let store = open(&envelope.locator).map_err(|e| e.to_string())?;
        match envelope.job {
            Job::Contend {
                lock,
                rounds,
                ttl_ms,
                log,
                busy,
            } => {
                let resource = Resource::lock(lock);
                let options = AcquireOptions::new(ttl_ms).owner("worker").wait_ms(120_000);
                for _ in 0..rounds {
                    let lease = store
                        .acquire(&resource, &options)
                        .map_err(|e| e.to_string())?;
                    let mut line = format!("{}\n", lease.token());
                    let marked = OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&busy)
                        .is_ok();
                    if !marked {
                        line = format!("OVERLAP {}\n", lease.token());
                    }
                    append(&log, &line)?;
                    if marked {
                        std::fs::remove_file(&busy).map_err(|e| e.to_string())?;
                    }
                    store.release(&lease).map_err(|e| e.to_string())?;
                }
                Ok(())
            }
            Job::Hold {
                lock,
                ttl_ms,
                token_file,
                tied_to_process,
                session,
            } => {
                let resource = Resource::lock(lock);
                let mut options = AcquireOptions::new(ttl_ms)
                    .owner("worker")
                    .wait_ms(120_000)
                    .tied_to_process(tied_to_process);
                options.session = session;
                let lease = store
                    .acquire(&resource, &options)
                    .map_err(|e| e.to_string())?;
                let keepalive = store.keepalive(lease);
                append(&token_file, &format!("{}\n", keepalive.token()))?;
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            Job::ContendAll {
                locks,
                marked,
                rounds,
                ttl_ms,
                log,
                busy,
            } => {
                let resources: Vec<Resource> = locks.iter().map(Resource::lock).collect();
                let at = locks
                    .iter()
                    .position(|l| *l == marked)
                    .ok_or("the marked lock is not among the locks")?;
                let options = AcquireOptions::new(ttl_ms).owner("worker").wait_ms(120_000);
                for _ in 0..rounds {
                    let leases = store
                        .acquire_all(&resources, &options)
                        .map_err(|e| e.to_string())?;
                    let token = leases[at].token();
                    let mut line = format!("{token}\n");
                    let marked = OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&busy)
                        .is_ok();
                    if !marked {
                        line = format!("OVERLAP {token}\n");
                    }
                    append(&log, &line)?;
                    if marked {
                        std::fs::remove_file(&busy).map_err(|e| e.to_string())?;
                    }
                    for lease in &leases {
                        store.release(lease).map_err(|e| e.to_string())?;
                    }
                }
                Ok(())
            }
            Job::ContendSlots {
                lock,
                slots,
                rounds,
                log,
                busy,
            } => {
                let options = AcquireOptions::new(60_000).owner("worker").wait_ms(120_000);
                for _ in 0..rounds {
                    let lease = store
                        .acquire_slot(&lock, slots, &options)
                        .map_err(|e| e.to_string())?;
                    let slot = lease.slot().ok_or("a slot lease without a slot")?;
                    let marker = busy.join(format!("slot-{slot}"));
                    let marked = OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&marker)
                        .is_ok();
                    if !marked {
                        return Err(format!(
                            "OVERLAP: two holders in slot {slot} (this one's token {})",
                            lease.token()
                        ));
                    }
                    append(
                        &log.join(format!("slot-{slot}")),
                        &format!("{}\n", lease.token()),
                    )?;
                    std::thread::sleep(Duration::from_millis(5));
                    std::fs::remove_file(&marker).map_err(|e| e.to_string())?;
                    store.release(&lease).map_err(|e| e.to_string())?;
                }
                Ok(())
            }
            Job::Churn { lock, ttl_ms } => {
                let resource = Resource::lock(lock);
                let options = AcquireOptions::new(ttl_ms).owner("churn").wait_ms(120_000);
                loop {
                    let mut lease = store
                        .acquire(&resource, &options)
                        .map_err(|e| e.to_string())?;
                    let _ = store.renew(&mut lease);
                    let _ = store.release(&lease);
                }
            }
        }
    })();
    match outcome {
        Ok(()) => std::process::exit(0),
        Err(message) => {
            eprintln!("conformance worker: {message}");
            std::process::exit(1)
        }
    }
}

fn append(path: &PathBuf, line: &str) -> Result<(), String> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.write_all(line.as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))
}

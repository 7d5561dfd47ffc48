//! Contention: N worker processes on ONE resource, each doing acquire → append to a
//! shared log → release, no hold time; the log oracle must hold.

use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fencepost::{AcquireOptions, Resource, Store};
use fencepost_fs::FsStore;

use crate::R;
use crate::stats::{Summary, summarize};

/// The hot resource every worker claims.
const HOT: &str = "contention-hot";

/// One contention size's outcome.
#[derive(Debug)]
pub struct ContentionRow {
    pub workers: usize,
    /// Whether the workers' store flushes its claims (the target is judged with it
    /// on; the rows with it off show the protocol without the disk's flushes).
    pub flush: bool,
    pub handoffs: usize,
    pub elapsed: Duration,
    pub wait: Summary,
    /// Release → the next tenure's acquire returning, between consecutive tenures
    /// (token order): from just before the release call to the next acquire's return.
    pub gap: Summary,
    /// flushed create + unflushed create, timed just before this size ran.
    pub floor_pair: Summary,
    /// The disk work of one handoff as the protocol must do it (the release's
    /// listing, read and tombstone; the next holder's listing, read, flushed create
    /// and sweep of two records), timed just before this size ran.
    pub floor_handoff: Summary,
    /// The same two floors timed again right after this size ran, in a directory of
    /// its store: the filesystem as the run left it. `None` where only the run was
    /// timed (`__ops`).
    pub floor_pair_after: Option<Summary>,
    pub floor_handoff_after: Option<Summary>,
    /// The rotation floor of this size (`crate::rotation`): as many processes,
    /// as many handoffs, each only the handoff's disk work and a wake of the next
    /// in a fixed ring; run just before this size and again right after it, in a
    /// directory of its store. `None` where only the run was timed (`__ops`), or
    /// off Linux (it sleeps on inotify).
    pub rotation_before: Option<crate::rotation::Rotation>,
    pub rotation_after: Option<crate::rotation::Rotation>,
    /// The wake order, measured: the most other tenures that began during any one
    /// wait, and during any of the slowest 1% of waits (those at or above the wait
    /// p99). A fair rotation lets at most `workers - 1` begin during a wait; more
    /// means the waiter was overtaken.
    pub passed_max: usize,
    pub slowest_passed_max: usize,
    /// CPU time (user + system) the worker processes used in all, from their
    /// resource usage as they were reaped (`getrusage(RUSAGE_CHILDREN)`, before and
    /// after): with `elapsed`, how many of the machine's cores the run kept busy.
    pub cpu: Duration,
}

/// CPU time (user + system) of every child process reaped so far.
pub fn children_cpu() -> Duration {
    // SAFETY: an out-pointer to a zeroed `rusage` alive for the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// For each wait (when it was asked, when its acquire returned), how many tenures
/// began strictly inside it, given every tenure's start sorted.
pub fn tenures_during(waits: &[(u64, u64)], starts_sorted: &[u64]) -> Vec<usize> {
    waits
        .iter()
        .map(|&(asked, start)| {
            let from = starts_sorted.partition_point(|&s| s <= asked);
            let to = starts_sorted.partition_point(|&s| s < start);
            to.saturating_sub(from)
        })
        .collect()
}

/// Nanoseconds of the system-wide monotonic clock (comparable across processes).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One tenure as the oracle sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tenure {
    pub token: u64,
    /// When acquire returned (monotonic ns).
    pub start: u64,
    /// Just before release was called (monotonic ns).
    pub end: u64,
}

/// The contention oracle: `log_tokens` (in the shared log's order) strictly
/// increase, there are exactly `expected` of them, each tenure reported by a worker
/// appears in the log, and no two tenures overlap in time.
pub fn check_oracle(log_tokens: &[u64], tenures: &[Tenure], expected: usize) -> Result<(), String> {
    if log_tokens.len() != expected {
        return Err(format!(
            "the log has {} entries, expected {expected}",
            log_tokens.len()
        ));
    }
    if let Some(w) = log_tokens.windows(2).find(|w| w[1] <= w[0]) {
        return Err(format!(
            "log tokens do not strictly increase: {} then {}",
            w[0], w[1]
        ));
    }
    let logged: HashSet<u64> = log_tokens.iter().copied().collect();
    if tenures.len() != expected || tenures.iter().any(|t| !logged.contains(&t.token)) {
        return Err("the workers' tenures do not match the log".into());
    }
    let mut sorted = tenures.to_vec();
    sorted.sort_by_key(|t| t.token);
    if let Some(w) = sorted.windows(2).find(|w| w[1].start < w[0].end) {
        return Err(format!(
            "tenures overlap: token {} held until {} ns, token {} acquired at {} ns",
            w[0].token, w[0].end, w[1].token, w[1].start
        ));
    }
    Ok(())
}

/// Worker mode: waits for `go` on stdin, then `iters` rounds of acquire → append
/// `token pid round` to `log` → release. Prints `T token start end wait_ns` per
/// round and `D done_ns` at the end.
pub fn worker(store_dir: &Path, log: &Path, iters: usize, flush: bool) -> R<()> {
    let store = Store::new(FsStore::open(store_dir)?.with_flush(flush));
    let resource = Resource::lock(HOT);
    let options = AcquireOptions::new(30_000)
        .owner("bench-worker")
        .wait_ms(300_000);
    let mut log = OpenOptions::new().append(true).open(log)?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let mut report = String::new();
    for round in 0..iters {
        let asked = mono_ns();
        let lease = store.acquire(&resource, &options)?;
        let start = mono_ns();
        log.write_all(format!("{} {} {round}\n", lease.token(), std::process::id()).as_bytes())?;
        let end = mono_ns();
        store.release(&lease)?;
        report.push_str(&format!(
            "T {} {start} {end} {}\n",
            lease.token(),
            start - asked
        ));
    }
    report.push_str(&format!("D {}\n", mono_ns()));
    std::io::stdout().write_all(report.as_bytes())?;
    Ok(())
}

/// Runs `workers` processes of `per_worker` rounds each on a fresh store in `dir`,
/// flushing claims or not (`flush`).
/// The store a contention size of `workers` runs on, under `dir`.
pub fn store_dir(dir: &Path, workers: usize, flush: bool) -> std::path::PathBuf {
    let mode = if flush { "flush" } else { "noflush" };
    dir.join(format!("store-{workers}-{mode}"))
}

pub fn run(
    dir: &Path,
    workers: usize,
    per_worker: usize,
    flush: bool,
    floor_pair: Summary,
    floor_handoff: Summary,
) -> R<ContentionRow> {
    let mode = if flush { "flush" } else { "noflush" };
    let store_dir = store_dir(dir, workers, flush);
    let log = dir.join(format!("log-{workers}-{mode}.txt"));
    fs::create_dir_all(&store_dir)?;
    fs::write(&log, "")?;
    let exe = std::env::current_exe()?;
    let cpu_before = children_cpu();
    let mut children: Vec<Child> = (0..workers)
        .map(|_| {
            Command::new(&exe)
                .arg("__contention-worker")
                .arg(&store_dir)
                .arg(&log)
                .arg(per_worker.to_string())
                .arg(mode)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    // Let every worker reach its read of stdin before the start.
    std::thread::sleep(Duration::from_millis(200));
    let go = mono_ns();
    for child in &mut children {
        child.stdin.take().ok_or("no stdin")?.write_all(b"go\n")?;
    }
    let mut tenures = Vec::new();
    let mut waits = Vec::new();
    // (asked, acquire returned) of each wait, for the wake-order count.
    let mut spans = Vec::new();
    let mut done = go;
    for child in children {
        let out = child.wait_with_output()?;
        if !out.status.success() {
            return Err(format!("a contention worker exited with {}", out.status).into());
        }
        for line in BufReader::new(&out.stdout[..]).lines() {
            let line = line?;
            let f: Vec<u64> = line
                .split(' ')
                .skip(1)
                .map(str::parse)
                .collect::<Result<_, _>>()?;
            match (line.as_bytes()[0], f.as_slice()) {
                (b'T', [token, start, end, wait]) => {
                    tenures.push(Tenure {
                        token: *token,
                        start: *start,
                        end: *end,
                    });
                    waits.push(Duration::from_nanos(*wait));
                    spans.push((start.saturating_sub(*wait), *start));
                }
                (b'D', [at]) => done = done.max(*at),
                _ => return Err(format!("bad worker line: {line}").into()),
            }
        }
    }
    let cpu = children_cpu().saturating_sub(cpu_before);
    let log_tokens: Vec<u64> = fs::read_to_string(&log)?
        .lines()
        .map(|l| l.split(' ').next().unwrap_or("").parse())
        .collect::<Result<_, _>>()?;
    check_oracle(&log_tokens, &tenures, workers * per_worker)
        .map_err(|e| format!("MUTUAL EXCLUSION BROKEN with {workers} workers: {e}"))?;
    tenures.sort_by_key(|t| t.token);
    let starts: Vec<u64> = tenures.iter().map(|t| t.start).collect();
    let during = tenures_during(&spans, &starts);
    let wait = summarize(waits.clone());
    let passed_max = during.iter().copied().max().unwrap_or(0);
    let slowest_passed_max = waits
        .iter()
        .zip(&during)
        .filter(|(w, _)| **w >= wait.p99)
        .map(|(_, n)| *n)
        .max()
        .unwrap_or(0);
    let gaps: Vec<Duration> = tenures
        .windows(2)
        .map(|w| Duration::from_nanos(w[1].start.saturating_sub(w[0].end)))
        .collect();
    Ok(ContentionRow {
        cpu,
        workers,
        flush,
        handoffs: tenures.len(),
        elapsed: Duration::from_nanos(done - go),
        wait,
        gap: summarize(if gaps.is_empty() {
            vec![Duration::ZERO]
        } else {
            gaps
        }),
        floor_pair,
        floor_handoff,
        floor_pair_after: None,
        floor_handoff_after: None,
        rotation_before: None,
        rotation_after: None,
        passed_max,
        slowest_passed_max,
    })
}

/// How long the holder keeps the lease in the handoff row before releasing: long
/// enough that the waiter is asleep inside its acquire when the release lands.
pub const HANDOFF_HOLD: Duration = Duration::from_millis(20);

/// The handoff row: one holder and one waiter (threads, each with its own store
/// handle, as two processes would have). Per round the holder acquires, the waiter
/// starts its acquire (which must wait), the holder releases after
/// [`HANDOFF_HOLD`]; timed from just before that release call to the waiter's
/// acquire returning. The waiter then releases, and the roles stay.
pub fn handoff(dir: &Path, rounds: usize, flush: bool) -> R<Summary> {
    use std::sync::mpsc;
    use std::time::Instant;

    fs::create_dir_all(dir)?;
    let open = || -> R<Store> { Ok(Store::new(FsStore::open(dir)?.with_flush(flush))) };
    let (holder, waiter) = (open()?, open()?);
    let resource = Resource::lock("handoff");
    let options = AcquireOptions::new(30_000)
        .owner("bench-handoff")
        .wait_ms(30_000);
    // The holder sends twice per round: once it holds (the waiter then starts its
    // acquire), and the instant just before its release call.
    let (held_tx, held_rx) = mpsc::channel::<Instant>();
    let (done_tx, done_rx) = mpsc::channel::<Result<Duration, String>>();
    std::thread::scope(|scope| -> R<Summary> {
        let (resource, options) = (&resource, &options);
        scope.spawn(move || {
            while held_rx.recv().is_ok() {
                let outcome = (|| -> Result<Duration, String> {
                    let lease = waiter
                        .acquire(resource, options)
                        .map_err(|e| e.to_string())?;
                    let returned = Instant::now();
                    let released = held_rx.recv().map_err(|e| e.to_string())?;
                    waiter.release(&lease).map_err(|e| e.to_string())?;
                    Ok(returned.saturating_duration_since(released))
                })();
                if done_tx.send(outcome).is_err() {
                    return;
                }
            }
        });
        let mut samples = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let lease = holder.acquire(resource, options)?;
            held_tx.send(Instant::now())?;
            std::thread::sleep(HANDOFF_HOLD);
            let released = Instant::now();
            holder.release(&lease)?;
            held_tx.send(released)?;
            samples.push(
                done_rx
                    .recv()?
                    .map_err(|e| format!("the handoff waiter failed: {e}"))?,
            );
        }
        drop(held_tx);
        Ok(summarize(samples))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(token: u64, start: u64, end: u64) -> Tenure {
        Tenure { token, start, end }
    }

    /// A fair rotation of three workers lets at most two tenures begin during a
    /// wait; a waiter overtaken by one worker twice sees three.
    #[test]
    fn tenures_during_counts_the_tenures_that_began_inside_each_wait() {
        // Tenures begin at 10, 20, 30, 40, 50.
        let starts = [10, 20, 30, 40, 50];
        // Asked at 12, got it at 40: 20 and 30 began inside (fair for 3 workers).
        // Asked at 5, got it at 50: 10, 20, 30, 40 began inside (overtaken).
        // Asked at 40 (as 40 began), got it at 50: none inside.
        assert_eq!(
            tenures_during(&[(12, 40), (5, 50), (40, 50)], &starts),
            vec![2, 4, 0]
        );
    }

    #[test]
    fn oracle_accepts_a_clean_run() {
        let tenures = [t(1, 0, 10), t(3, 11, 20), t(5, 20, 30)];
        assert_eq!(check_oracle(&[1, 3, 5], &tenures, 3), Ok(()));
    }

    #[test]
    fn oracle_catches_each_breakage() {
        let tenures = [t(1, 0, 10), t(3, 11, 20), t(5, 21, 30)];
        assert!(check_oracle(&[1, 3], &tenures, 3).is_err(), "missing entry");
        assert!(
            check_oracle(&[1, 5, 3], &tenures, 3).is_err(),
            "decreasing tokens"
        );
        assert!(
            check_oracle(&[1, 3, 3], &tenures, 3).is_err(),
            "repeated token"
        );
        let overlapping = [t(1, 0, 10), t(3, 9, 20), t(5, 21, 30)];
        assert!(
            check_oracle(&[1, 3, 5], &overlapping, 3).is_err(),
            "overlap"
        );
        let unknown = [t(1, 0, 10), t(4, 11, 20), t(5, 21, 30)];
        assert!(
            check_oracle(&[1, 3, 5], &unknown, 3).is_err(),
            "tenure not in log"
        );
    }
}

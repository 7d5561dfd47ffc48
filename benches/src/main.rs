//! `fencepost-bench`: what a fenced lease costs, against the machine's floor and the
//! rivals, written to `benches/RESULTS.md` (issue 8). See `benches/README.md`.
//!
//! A small timing loop (`Instant` around each call, sorted samples) rather than a
//! harness crate: every row needs its floor timed *alternately* with it, whole
//! processes and multi-process scenarios are measured too, and the report is one
//! generated Markdown file — none of which criterion's model fits, and its build
//! would triple this crate's on a 2-core machine.

// The benchmark drives POSIX processes (SIGSTOP, fork-style workers); elsewhere only
// its shared helpers compile, unused.
#![cfg_attr(not(unix), allow(dead_code))]

#[cfg(unix)]
mod contention;
#[cfg(unix)]
mod control;
#[cfg(unix)]
mod device;
#[cfg(unix)]
mod floor;
#[cfg(unix)]
mod guard;
#[cfg(unix)]
mod loss;
#[cfg(unix)]
mod machine;
#[cfg(unix)]
mod removal_ab;
#[cfg(unix)]
mod report;
#[cfg(unix)]
mod rivals;
#[cfg(unix)]
mod rotation;
#[cfg(unix)]
mod rows;
mod stats;
#[cfg(unix)]
mod sweep_probe;
#[cfg(unix)]
mod wedged;

/// Every fallible step of the bench.
pub type R<T> = Result<T, Box<dyn std::error::Error>>;

/// How many iterations each kind of row runs.
#[derive(Debug, Clone)]
pub struct Iters {
    /// Quick mode (CI): proves the bench works, measures nothing.
    pub quick: bool,
    /// Untimed rounds before each row.
    pub warmup: usize,
    /// fs protocol rows, floors and rivals.
    pub fs: usize,
    /// fs rows that create a new key each time.
    pub fs_new_key: usize,
    /// memory backend rows.
    pub memory: usize,
    /// `status` calls, and how many keys the store holds.
    pub status: usize,
    /// How many keys the `status` row's store holds.
    pub status_keys: usize,
    /// whole-process CLI rows.
    pub process: usize,
    /// (workers, rounds per worker, flush) per contention size.
    pub contention: Vec<(usize, usize, bool)>,
    /// ttl / stale time in the wedged-holder scenario.
    pub stale_ms: u64,
    /// Rounds of the loss-notice and dead-holder handoff rows.
    pub loss: usize,
    /// Rounds of the handoff row (release → the waiter's acquire returns).
    pub handoff: usize,
    /// Unrelated file claims, and files below a subtree, in the subtree rows.
    pub tree_files: usize,
}

impl Iters {
    fn full() -> Iters {
        Iters {
            quick: false,
            warmup: 20,
            fs: 2000,
            fs_new_key: 200,
            memory: 20_000,
            status: 20,
            status_keys: 1000,
            process: 300,
            contention: [2, 4, 8, 16]
                .iter()
                .map(|&n| (n, 800 / n, true))
                .chain([2, 8].iter().map(|&n| (n, 800 / n, false)))
                .collect(),
            stale_ms: 300,
            loss: 20,
            handoff: 200,
            tree_files: 1000,
        }
    }

    fn quick() -> Iters {
        Iters {
            quick: true,
            warmup: 2,
            fs: 20,
            fs_new_key: 5,
            memory: 200,
            status: 2,
            status_keys: 1000,
            process: 5,
            contention: vec![(2, 10, true), (4, 5, true), (2, 10, false)],
            stale_ms: 300,
            loss: 2,
            handoff: 5,
            tree_files: 100,
        }
    }
}

#[cfg(not(unix))]
fn main() -> std::process::ExitCode {
    eprintln!("fencepost-bench: the benchmark uses SIGSTOP and POSIX clocks; it runs on Unix only");
    std::process::ExitCode::FAILURE
}

#[cfg(unix)]
fn main() -> std::process::ExitCode {
    match app::run(std::env::args_os().skip(1).collect()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fencepost-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(unix)]
mod app {
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};

    use fencepost::Store;
    use fencepost_fs::FsStore;
    use fencepost_memory::MemoryStore;

    use crate::floor::FloorKit;
    use crate::machine::Machine;
    use crate::report::Report;
    use crate::rows::{Group, Settle, cli_rows, paired_floors, protocol_rows};
    use crate::{Iters, R, contention, loss, rivals, wedged};

    const USAGE: &str = "\
usage: fencepost-bench [--quick] [--out FILE] [--dir DIR] [--fencepost BIN] [--keep]

  --out FILE      where to write the report [default: benches/RESULTS.md; with
                  --quick, fencepost-bench-quick.md in the temp directory]
  --quick         a few iterations per row and the smallest contention sizes:
                  proves the bench still works (CI), not a measurement
  --dir DIR       the bench directory; every fs row, floor and rival runs in it
                  [default: target/fencepost-bench in the workspace]
  --fencepost BIN the CLI binary to time [default: `fencepost` beside this binary,
                  i.e. target/release/fencepost; build it first]
  --keep          leave the bench directory behind";

    /// The workspace root (this crate lives in `<root>/benches`).
    fn workspace() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("benches has a parent")
            .to_path_buf()
    }

    fn path_arg(args: &mut impl Iterator<Item = OsString>, flag: &str) -> R<PathBuf> {
        args.next()
            .map(PathBuf::from)
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}").into())
    }

    pub fn run(args: Vec<OsString>) -> R<()> {
        // Worker modes: this binary re-executed by the contention and wedged rows.
        let text: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        match text
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["__noop"] => return Ok(()),
            ["__contention-worker", store, log, iters, mode] => {
                return contention::worker(
                    Path::new(store),
                    Path::new(log),
                    iters.parse()?,
                    *mode == "flush",
                );
            }
            ["__rotation-member", dir, index, members, rounds, mode] => {
                return crate::rotation::member(
                    Path::new(dir),
                    index.parse()?,
                    members.parse()?,
                    rounds.parse()?,
                    *mode == "flush",
                );
            }
            ["__ops", op, n, dir] => return ops(op, n.parse()?, Path::new(dir)),
            ["__wedge-holder", lib, dir, stale] => {
                return wedged::holder(lib, Path::new(dir), stale.parse()?);
            }
            ["__wedge-successor", lib, dir, stale] => {
                return wedged::successor(lib, Path::new(dir), stale.parse()?);
            }
            _ => {}
        }

        let (mut quick, mut keep) = (false, false);
        let (mut out, mut dir, mut bin) = (None, None, None);
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.to_str() {
                Some("--quick") => quick = true,
                Some("--keep") => keep = true,
                Some("--out") => out = Some(path_arg(&mut args, "--out")?),
                Some("--dir") => dir = Some(path_arg(&mut args, "--dir")?),
                Some("--fencepost") => bin = Some(path_arg(&mut args, "--fencepost")?),
                Some("-h" | "--help") => {
                    println!("{USAGE}");
                    return Ok(());
                }
                _ => return Err(format!("unexpected argument {arg:?}\n{USAGE}").into()),
            }
        }
        let it = if quick { Iters::quick() } else { Iters::full() };
        let out = out.unwrap_or_else(|| {
            if quick {
                std::env::temp_dir().join("fencepost-bench-quick.md")
            } else {
                workspace().join("benches").join("RESULTS.md")
            }
        });
        let bin = match bin {
            Some(bin) => bin,
            None => std::env::current_exe()?.with_file_name("fencepost"),
        };
        if !bin.is_file() {
            return Err(format!(
                "the fencepost CLI binary was not found at {}; build it first with \
                 `cargo build --release -p fencepost-cli`, or pass --fencepost BIN",
                bin.display()
            )
            .into());
        }
        let dir = dir.unwrap_or_else(|| workspace().join("target").join("fencepost-bench"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| format!("cannot clear the bench directory {}: {e}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir)?;
        let dir = std::fs::canonicalize(&dir)?;
        let result = measure(&it, &dir, &bin, &out);
        if !keep {
            let _ = std::fs::remove_dir_all(&dir);
        }
        result
    }

    /// `__ops OP N DIR`: `N` times one protocol operation on an fs store in `DIR`
    /// (flush on), nothing else, so `strace -c -f` of this mode divided by `N` is the
    /// syscalls one operation makes (docs/design-07-performance.md). OP is `check`,
    /// `renew` or `acquire-release`, or `memory-` and one of those for the memory
    /// backend (for a profiler); `sweep-probe` times a removal next to a flushed
    /// create placed seven ways, `removal-ab` the removal thread against removals in
    /// line, alternated (docs/design-07-performance.md).
    fn ops(op: &str, n: usize, dir: &Path) -> R<()> {
        use fencepost::{AcquireOptions, Resource};
        // `handoff` / `handoff-noflush`: N rounds of the handoff row (for a trace).
        if let Some(flush) = match op {
            "handoff" => Some(true),
            "handoff-noflush" => Some(false),
            _ => None,
        } {
            let summary = contention::handoff(dir, n, flush)?;
            println!("handoff p50 {:?}", summary.p50);
            return Ok(());
        }
        // `contention-W` / `contention-noflush-W`: the contention row with W workers,
        // N rounds each, on a store that flushes its claims or not.
        if let Some(workers) = op.strip_prefix("contention-") {
            let (workers, flush) = match workers.strip_prefix("noflush-") {
                Some(workers) => (workers, false),
                None => (workers, true),
            };
            let zero = crate::stats::summarize(vec![std::time::Duration::ZERO]);
            let row = contention::run(dir, workers.parse()?, n, flush, zero, zero)?;
            println!(
                "{} handoffs in {:?}: {:.0}/s, wait p50 {:?} p99 {:?} max {:?}, gap p50 {:?} p99 {:?}, tenures begun during a wait: most {}, most in the slowest 1% {}, CPU per handoff {:?}",
                row.handoffs,
                row.elapsed,
                row.handoffs as f64 / row.elapsed.as_secs_f64(),
                row.wait.p50,
                row.wait.p99,
                row.wait.max,
                row.gap.p50,
                row.gap.p99,
                row.passed_max,
                row.slowest_passed_max,
                row.cpu / row.handoffs.max(1) as u32
            );
            return Ok(());
        }
        // `rotation-W` / `rotation-noflush-W`: the rotation floor of W processes, N
        // tenures each (no protocol: the disk work of a handoff and a wake of the next).
        if let Some(members) = op.strip_prefix("rotation-") {
            let (members, flush) = match members.strip_prefix("noflush-") {
                Some(members) => (members, false),
                None => (members, true),
            };
            let r = crate::rotation::run(dir, members.parse()?, n, flush)?;
            println!(
                "{} handoffs in {:?}: {:.0}/s, CPU per handoff {:?}",
                r.handoffs,
                r.elapsed,
                r.rate(),
                r.cpu / r.handoffs.max(1) as u32
            );
            return Ok(());
        }
        // `churn-W`: the handoff's disk work (flush off) timed before a contention run
        // of W workers, then right after it inside the run's key directory.
        if let Some(workers) = op.strip_prefix("churn-") {
            let zero = crate::stats::summarize(vec![std::time::Duration::ZERO]);
            let mut before = FloorKit::new(&dir.join("floor"), 0)?;
            let b: Vec<_> = (0..n)
                .map(|_| handoff_work(&mut before, false))
                .collect::<R<_>>()?;
            let row = contention::run(dir, workers.parse()?, 200, false, zero, zero)?;
            let key_dir = std::fs::read_dir(dir.join(format!("store-{workers}-noflush/claims")))?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .find(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("lock-"))
                })
                .ok_or("no key directory")?;
            let mut after = FloorKit::new(&key_dir.join("floor-after"), 0)?;
            let a: Vec<_> = (0..n)
                .map(|_| handoff_work(&mut after, false))
                .collect::<R<_>>()?;
            let mut fresh = FloorKit::new(&dir.join("floor-fresh"), 0)?;
            let f: Vec<_> = (0..n)
                .map(|_| handoff_work(&mut fresh, false))
                .collect::<R<_>>()?;
            println!(
                "{:.0}/s; handoff work p50: before {:?}, after in the key dir {:?}, after in a fresh dir {:?}",
                row.handoffs as f64 / row.elapsed.as_secs_f64(),
                crate::stats::summarize(b).p50,
                crate::stats::summarize(a).p50,
                crate::stats::summarize(f).p50
            );
            return Ok(());
        }
        // `sweep-probe`: a removal next to a flushed create, placed seven ways.
        if op == "sweep-probe" {
            return crate::sweep_probe::run(dir, n);
        }
        // `cli-check`: only the CLI `check` row and its alternated no-op floor (the
        // `fencepost` binary beside this one), N of each: both p50s and the ratio.
        if op == "cli-check" {
            let built = std::env::current_exe()?.with_file_name("fencepost");
            let (bin, noop) = crate::rows::installed(&built, &dir.join("installed"))?;
            let store = dir.join("cli-store");
            if store.exists() {
                std::fs::remove_dir_all(&store)?;
            }
            let (check, noop) = crate::rows::cli_check(&bin, &noop, &store, n)?;
            let noop = noop.ok_or("no floor")?;
            println!(
                "fencepost check p50 {:?}, no-op p50 {:?}: {:.3}x",
                check.p50,
                noop.p50,
                check.p50.as_secs_f64() / noop.p50.as_secs_f64()
            );
            return Ok(());
        }
        // `removal-ab`: the removal thread against removals in line, alternated.
        if op == "removal-ab" {
            return crate::removal_ab::run(dir, n);
        }
        if op == "wake" {
            let summary = crate::floor::wake(dir, n, contention::HANDOFF_HOLD)?;
            println!("wake p50 {:?} p95 {:?}", summary.p50, summary.p95);
            return Ok(());
        }
        // `file-claim-U`: N claims + releases of one file, with U unrelated file claims
        // held in the store first (as the "unrelated claims" row sets them up): strace
        // of U=0 and U=1000, each minus its N=0 run, is what a file claim does in an
        // empty and in a crowded store (docs/design-05-subtrees-and-shared.md §3.5).
        if let Some(unrelated) = op.strip_prefix("file-claim-") {
            let store = Store::new(FsStore::open(dir.join("store"))?);
            let options = AcquireOptions::new(600_000).owner("ops");
            let base = dir.join("tree");
            for k in 0..unrelated.parse::<usize>()? {
                let other = base.join(format!("other/d{}/f{k}.rs", k / 50));
                store.acquire(&Resource::file(other), &options)?;
            }
            let file = Resource::file(base.join("work/src/auth/login.rs"));
            store.release(&store.acquire(&file, &options)?)?;
            for _ in 0..n {
                store.release(&store.acquire(&file, &options)?)?;
            }
            return Ok(());
        }
        // `memory-OP`: the same on the memory backend (the protocol's own cost).
        // `noflush-OP`: the same on an fs store with flush off.
        // `inline-OP`: the same with the sweep's removals made in line, before the
        // operation returns (no removal thread).
        let (store, op) = match (op.strip_prefix("memory-"), op.strip_prefix("noflush-")) {
            (Some(op), _) => (Store::new(MemoryStore::new()), op),
            (None, Some(op)) => (Store::new(FsStore::open(dir)?.with_flush(false)), op),
            (None, None) => match op.strip_prefix("inline-") {
                Some(op) => (crate::removal_ab::inline_store(dir)?, op),
                None => (Store::new(FsStore::open(dir)?), op),
            },
        };
        let resource = Resource::lock(format!("ops-{op}"));
        let options = AcquireOptions::new(600_000).owner("ops");
        let started = std::time::Instant::now();
        match op {
            "check" => {
                let lease = store.acquire(&resource, &options)?;
                for _ in 0..n {
                    if !store.check(&resource, lease.token())? {
                        return Err("check of a held lease failed".into());
                    }
                }
            }
            "renew" => {
                let mut lease = store.acquire(&resource, &options)?;
                for _ in 0..n {
                    store.renew(&mut lease)?;
                }
            }
            "acquire-release" => {
                for _ in 0..n {
                    store.release(&store.acquire(&resource, &options)?)?;
                }
            }
            other => return Err(format!("unknown op {other:?}").into()),
        }
        eprintln!(
            "{op}: {:?} per operation (mean)",
            started.elapsed() / n.max(1) as u32
        );
        Ok(())
    }

    /// The disk work of one handoff as the protocol does it: the release's listing,
    /// read and (unflushed) tombstone, then the next holder's listing, read, create
    /// (flushed or not) and the sweep of the two records below it.
    fn handoff_work(kit: &mut FloorKit, flush: bool) -> R<std::time::Duration> {
        Ok(kit.list_read()?
            + kit.create(false)?
            + kit.list_read()?
            + kit.create_removing(flush, 2)?)
    }

    fn step(name: &str) {
        eprintln!("fencepost-bench: {name}");
        crate::machine::steal::mark(name);
        // A reference block of the CPU control (see `crate::control`) at every step.
        crate::control::sample();
    }

    fn measure(it: &Iters, dir: &Path, built: &Path, out: &Path) -> R<()> {
        let started = std::time::Instant::now();
        let machine = Machine::gather(dir);
        crate::device::watch(dir);
        // Every process the bench starts runs from copies, as installed.
        let (bin, noop) = crate::rows::installed(built, &dir.join("installed"))?;
        let (bin, noop) = (bin.as_path(), noop.as_path());
        let mut report = Report::new(machine, it.clone(), bin.to_path_buf(), built.to_path_buf());
        let mut kit = FloorKit::new(&dir.join("floor"), it.status_keys)?;
        // Reference blocks of the CPU control, spread over a second before any row.
        for _ in 0..10 {
            crate::control::sample();
            std::thread::sleep(std::time::Duration::from_millis(100));
        }

        step("floor");
        report.floors(&mut kit, it)?;

        let mut notes = Vec::new();
        for flush in [true, false] {
            let name = if flush {
                "fs, flush on"
            } else {
                "fs, flush off"
            };
            step(name);
            let root = dir.join(if flush { "fs-flush" } else { "fs-noflush" });
            let make = |sub: &str| -> R<(Store, Settle)> {
                let fs = FsStore::open(root.join(sub))?.with_flush(flush);
                let handle = fs.clone();
                Ok((Store::new(fs), Box::new(move || handle.settle())))
            };
            let group = Group {
                name,
                make_store: &make,
                floor: Some((&mut kit, flush)),
                targets: true,
                store_root: Some(&root),
            };
            report.rows.extend(protocol_rows(group, it, &mut notes)?);
        }
        step("memory");
        let make = |_: &str| -> R<(Store, Settle)> {
            Ok((Store::new(MemoryStore::new()), Box::new(|| {})))
        };
        let group = Group {
            name: "memory",
            make_store: &make,
            floor: None,
            targets: true,
            store_root: None,
        };
        report.rows.extend(protocol_rows(group, it, &mut notes)?);

        step("CLI processes");
        report
            .rows
            .extend(cli_rows((bin, noop), dir.join("cli-store"), &mut kit, it)?);

        step("git guard");
        report.rows.extend(crate::guard::rows(bin, dir, it)?);

        // The wake floor: a thread asleep on a directory's change notification woken
        // by another's create, no protocol (what a handoff cannot do without).
        step("wake floor");
        let wake = crate::floor::wake(&dir.join("wake"), it.handoff, contention::HANDOFF_HOLD)?;
        report.wake = Some(wake);

        for &(workers, rounds, flush) in &it.contention {
            step(&format!(
                "contention, {workers} processes, flush {}",
                if flush { "on" } else { "off" }
            ));
            let mut floors = |i: usize| match i {
                0 => Ok(kit.create(flush)? + kit.create(false)?),
                _ => handoff_work(&mut kit, flush),
            };
            let (_, mut f) = paired_floors(
                it.fs / 5,
                it.warmup,
                &mut || Ok(Default::default()),
                2,
                &mut floors,
            )?;
            let floor_handoff = f.pop().ok_or("no floor")?;
            let floor_pair = f.pop().ok_or("no floor")?;
            // The rotation floor of this size (no protocol: the handoff's disk work
            // and a wake of the next process in a fixed ring), before the run and
            // again after it in a directory of its store (below).
            let rotation_before =
                crate::rotation::run(&dir.join("rotation"), workers, rounds, flush)?;
            let mut row = contention::run(
                &dir.join("contention"),
                workers,
                rounds,
                flush,
                floor_pair,
                floor_handoff,
            )?;
            // The same floors again at once, in a directory of the run's store: the
            // filesystem as the run left it (docs/design-07-performance.md, "The
            // contention floors, before and after").
            let store = contention::store_dir(&dir.join("contention"), workers, flush);
            let mut after = FloorKit::new(&store.join("floor-after"), 0)?;
            let mut floors = |i: usize| match i {
                0 => Ok(after.create(flush)? + after.create(false)?),
                _ => handoff_work(&mut after, flush),
            };
            let (_, mut f) =
                paired_floors(it.fs / 5, 0, &mut || Ok(Default::default()), 2, &mut floors)?;
            row.floor_handoff_after = f.pop();
            row.floor_pair_after = f.pop();
            row.rotation_before = Some(rotation_before);
            row.rotation_after = Some(crate::rotation::run(
                &store.join("rotation-after"),
                workers,
                rounds,
                flush,
            )?);
            report.contention.push(row);
        }

        for flush in [true, false] {
            step(if flush {
                "handoff, flush on"
            } else {
                "handoff, flush off"
            });
            // Its floor: the disk work of the handoff (timed just before) plus the
            // wake floor. The row's holder and waiter are idle for HANDOFF_HOLD before
            // every handoff, and the same disk work costs more after such an idle than
            // back to back (docs/design-07-performance.md, "The handoff's floor after
            // the same idle"), so each floor sample follows a sleep of HANDOFF_HOLD,
            // as the wake floor's does; the back-to-back figure is timed alternately.
            let (mut work, mut back_to_back) = (Vec::new(), Vec::new());
            for round in 0..it.warmup + it.handoff {
                let hot = handoff_work(&mut kit, flush)?;
                std::thread::sleep(contention::HANDOFF_HOLD);
                let after_idle = handoff_work(&mut kit, flush)?;
                if round >= it.warmup {
                    back_to_back.push(hot);
                    work.push(after_idle);
                }
            }
            let (work, back_to_back) = (
                crate::stats::summarize(work),
                crate::stats::summarize(back_to_back),
            );
            let sub = if flush { "flush-on" } else { "flush-off" };
            let measured = contention::handoff(&dir.join("handoff").join(sub), it.handoff, flush)?;
            report.handoffs.push(crate::report::HandoffRow {
                flush,
                measured,
                work,
                back_to_back,
            });
        }

        step("rivals");
        report.rivals = rivals::rival_rows(&dir.join("rivals"), it)?;

        for library in wedged::LIBRARIES {
            step(&format!("wedged holder, {library}"));
            report.wedged.push(wedged::run(
                library,
                &dir.join("wedged").join(library),
                it.stale_ms,
            )?);
        }
        step("loss notice and dead-holder handoff");
        report.loss_notice = Some(loss::notice(bin, &dir.join("loss"), it.loss)?);
        report.handoff = Some(loss::handoff(bin, &dir.join("loss"), it.loss)?);
        report.notes = notes;
        report.elapsed = started.elapsed();
        let verdict = report.fencepost_wedged_verdict();
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(out, report.render())?;
        eprintln!(
            "fencepost-bench: wrote {} in {:.0?}",
            out.display(),
            started.elapsed()
        );
        verdict
    }
}

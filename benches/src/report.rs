//! Renders `RESULTS.md`: every figure comes from this run.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use crate::contention::ContentionRow;
use crate::floor::{FloorKit, RECORD_BYTES};
use crate::machine::Machine;
use crate::rows::{Row, Target};
use crate::stats::{Summary, fmt, ratio, summarize};
use crate::wedged::Outcome;
use crate::{Iters, R};

/// Everything measured in one run.
pub struct Report {
    machine: Machine,
    it: Iters,
    bin: PathBuf,
    /// Where `bin` was copied from (the build's own file).
    built: PathBuf,
    floors: Vec<Row>,
    pub rows: Vec<Row>,
    pub contention: Vec<ContentionRow>,
    pub rivals: Vec<Row>,
    pub wedged: Vec<Outcome>,
    /// Loss-notice latency of `run` (issue 16).
    pub loss_notice: Option<Summary>,
    /// Dead-holder handoff time (issue 16).
    pub handoff: Option<Summary>,
    /// The handoff rows (issue 17).
    pub handoffs: Vec<HandoffRow>,
    /// The wake floor: a thread asleep on inotify woken by another's create.
    pub wake: Option<Summary>,
    pub notes: Vec<String>,
    pub elapsed: Duration,
}

/// One handoff row: release → the waiting claimant's acquire returns.
pub struct HandoffRow {
    /// Flush on?
    pub flush: bool,
    pub measured: Summary,
    /// The handoff's disk work (see `handoff_work` in main.rs), timed just before,
    /// each sample after an idle of `HANDOFF_HOLD` as the row's handoffs are.
    pub work: Summary,
    /// The same disk work timed back to back (alternated with `work`), for
    /// comparison: what the idle costs.
    pub back_to_back: Summary,
}

const FLUSHED: &str = "exclusive create + write + file flush + directory flush";
const FLUSHED_ONE: &str =
    "single-fsync: exclusive create + write + file flush (one journal commit, no directory flush)";
const UNFLUSHED: &str = "exclusive create + write, no flush";
const LIST_READ: &str = "directory listing + read of the newest of two small files";

fn yes_no(b: bool) -> &'static str {
    if b { "**yes**" } else { "no" }
}

impl Report {
    pub fn new(machine: Machine, it: Iters, bin: PathBuf, built: PathBuf) -> Report {
        Report {
            machine,
            it,
            bin,
            built,
            floors: Vec::new(),
            rows: Vec::new(),
            contention: Vec::new(),
            rivals: Vec::new(),
            wedged: Vec::new(),
            loss_notice: None,
            handoff: None,
            handoffs: Vec::new(),
            wake: None,
            notes: Vec::new(),
            elapsed: Duration::ZERO,
        }
    }

    /// The four floor rows, measured round-robin (one of each per round) so that
    /// none of them alone gets the disk's warm-up or a burst of outside I/O.
    pub fn floors(&mut self, kit: &mut FloorKit, it: &Iters) -> R<()> {
        let mut samples = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for round in 0..it.warmup * 3 + it.fs {
            let taken = [
                kit.create(true)?,
                kit.create_one_flush()?,
                kit.create(false)?,
                kit.list_read()?,
            ];
            if round >= it.warmup * 3 {
                for (all, one) in samples.iter_mut().zip(taken) {
                    all.push(one);
                }
            }
        }
        for (name, samples) in [FLUSHED, FLUSHED_ONE, UNFLUSHED, LIST_READ]
            .into_iter()
            .zip(samples)
        {
            self.floors.push(Row {
                group: "floor".into(),
                name: name.into(),
                summary: summarize(samples),
                floor: None,
                floor_one: None,
                floor_swept: None,
                back_to_back: None,
                weather: None,
                target: None,
            });
        }
        Ok(())
    }

    fn floor(&self, name: &str) -> Summary {
        self.floors
            .iter()
            .find(|r| r.name == name)
            .expect("floor measured")
            .summary
    }

    fn row(&self, group: &str, name: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.group == group && r.name == name)
    }

    /// The serial ceiling of one hot resource: one flushed and one unflushed create
    /// per handoff, nothing else.
    fn serial_ceiling(&self) -> f64 {
        let per = self.floor(FLUSHED).p50 + self.floor(UNFLUSHED).p50;
        1.0 / per.as_secs_f64()
    }

    /// The wake floor's p50 (zero when it was not measured).
    fn wake_p50(&self) -> Duration {
        self.wake.map_or(Duration::ZERO, |w| w.p50)
    }

    /// A size's ceiling if every handoff cost only its disk work and one wake-up:
    /// 1 / (handoff work + wake floor).
    fn handoff_ceiling_of(&self, c: &ContentionRow) -> f64 {
        1.0 / (around(&c.floor_handoff, &c.floor_handoff_after) + self.wake_p50()).as_secs_f64()
    }

    /// A size's rotation ceiling: handoffs per second of its rotation floor (the
    /// mean time per handoff of the run before the size and the run after it), or
    /// `None` where it was not run.
    fn rotation_ceiling_of(c: &ContentionRow) -> Option<f64> {
        let runs: Vec<_> = [c.rotation_before, c.rotation_after]
            .into_iter()
            .flatten()
            .collect();
        if runs.is_empty() {
            return None;
        }
        let per = runs
            .iter()
            .map(|r| r.elapsed.as_secs_f64() / r.handoffs.max(1) as f64)
            .sum::<f64>()
            / runs.len() as f64;
        Some(1.0 / per)
    }

    /// A contention size's own serial ceiling, from the create pair timed just before
    /// it and right after it.
    fn ceiling_of(c: &ContentionRow) -> f64 {
        1.0 / around(&c.floor_pair, &c.floor_pair_after).as_secs_f64()
    }

    /// The bench fails when fencepost let a resumed holder write or remove its
    /// successor's claim, or no successor could take over.
    pub fn fencepost_wedged_verdict(&self) -> R<()> {
        for o in self.wedged.iter().filter(|o| o.library == "fencepost") {
            if !o.took_over || o.write_landed || o.successor_intact != Some(true) || !o.learned {
                return Err(format!("fencepost failed the wedged-holder scenario: {o:?}").into());
            }
        }
        Ok(())
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        let m = &self.machine;
        let mode = if self.it.quick {
            "**quick** (a few iterations per row: proves the bench works, measures nothing)"
        } else {
            "full"
        };
        let _ = writeln!(
            s,
            "# fencepost benchmarks\n\n\
             Generated by `fencepost-bench` — do not edit; regenerate with\n\
             `cargo build --release -p fencepost-cli -p fencepost-benches && \
             target/release/fencepost-bench --out benches/RESULTS.md`\n\
             (see [README.md](README.md)). Every figure below was measured in one run.\n\n\
             ## Machine\n\n| fact | value |\n| --- | --- |\n\
             | CPU | {} |\n| cores | {} |\n| kernel | {} |\n\
             | filesystem of the bench directory | {} |\n| its mount (type, source, options) | {} |\n| rustc | {} |\n| date | {} |\n\
             | commit measured (`git describe --always --dirty`) | {} |\n| mode | {mode} |\n| CLI timed | `{}`, copied (as `cargo install` places a binary) from `{}`; the no-op process is a copy of the bench binary beside it |\n| run took | {:.1} s |\n\
             | load average (1, 5, 15 min) at start | {} |\n| load average at end | {} |\n\
             | CPU time taken by the hypervisor (steal, share of busy time, `/proc/stat`) | {} |\n",
            m.cpu,
            m.cores,
            m.kernel,
            m.filesystem,
            m.mount.described,
            m.rustc,
            m.date,
            m.commit,
            self.bin.display(),
            self.built.display(),
            self.elapsed.as_secs_f64(),
            m.load,
            crate::machine::load_now(),
            crate::machine::steal::summary()
        );

        let _ = writeln!(
            s,
            "## Floor: what the filesystem charges\n\n\
             Measured first, round-robin (one of each per round), in the bench directory; \
             records are {RECORD_BYTES} bytes (a v1 record is about 250).\n"
        );
        table_head(&mut s, false);
        for r in &self.floors {
            table_row(&mut s, r, false);
        }
        let _ = writeln!(
            s,
            "\nSerial ceiling of one hot resource, 1 / (flushed + unflushed create): \
             **{:.0} handoffs/s**.\n",
            self.serial_ceiling()
        );

        let _ = writeln!(
            s,
            "## Protocol and CLI rows, each with its ratio to its floor\n\n\
             Each row's floor is the sequence of floor operations it is built from, timed \
             **alternately** with the row (op, floor, op, floor …) so both see the same disk \
             weather. ratio = row p50 / floor p50. A flushed row is timed against two floors \
             in one rotation: with the file + directory flush (what POSIX needs for the name \
             to survive), and with the single-fsync create in its place (one journal commit: \
             the least a durable claim could cost); a row that sweeps (renew, acquire) also \
             against its floor with the sweep's removals timed (the plain floors remove their \
             old files untimed). A sweeping row also gives its mean against each floor's \
             mean: a removal that only some operations make would not show in the p50, and \
             the mean charges every one. The fs backend makes a sweep's removals on a removal \
             thread after the operation returned; a sweeping row settles them, untimed, before \
             every floor sample, so none lands on a floor's clock (the back-to-back table \
             below charges them). The cold acquire + release and renew rows with the flush on \
             (the rows with targets) time their floors \
             in a directory inside their own key directory: on ext4 without a journal, \
             allocating an inode passes over every inode freed near its directory in the last \
             seconds, so floors timed elsewhere left out kernel CPU that the row's own churn \
             costs its creates (docs/design-07-performance.md, \"Telling the disk from the \
             code\"); the other fs rows share one floor directory. The memory backend has no \
             floor: it is the protocol's own CPU cost.\n"
        );
        table_head(&mut s, true);
        for r in &self.rows {
            table_row(&mut s, r, true);
        }
        self.render_back_to_back(&mut s);

        let _ = writeln!(
            s,
            "\n## Contention: worker processes on ONE resource\n\n\
             Each worker: acquire (fs, wait up to 300 s) → append one line to a \
             shared log → release, no hold time. Wait = time inside `acquire`. The rows \
             with flush off (a store on tmpfs, or a throwaway one) show the protocol's \
             handoffs without the disk's flushes; the target is judged with flush on. The serial \
             ceiling of each size is 1 / (its claim's create — flushed, or not with flush \
             off — + unflushed create), that pair timed as the handoff ceiling's floor is \
             (below). The oracle \
             (exact count, strictly increasing tokens in log order, no two tenures overlapping \
             on the system monotonic clock) held for every size below — the bench fails \
             otherwise.\n\n\
             Fairness is the slowest acquire's wait against the median wait (1× is perfectly \
             even); *overtaken* counts, per wait, the other tenures that began during it: a \
             fair rotation lets at most (processes − 1) begin, so more means the waiter was \
             passed over (shown: the most during any wait, and during any of the slowest 1% \
             of waits); *handoff gap* is, between consecutive tenures in token order, the time \
             from just before one's release call to the next one's acquire returning. The \
             *handoff ceiling* is 1 / (the disk work one handoff must do — the release's \
             listing, read and tombstone, the next holder's listing, read, create (flushed \
             with flush on) and the sweep of the two records below it — plus the \
             wake floor): what the filesystem and the kernel allow when a waiter must be woken \
             for every handoff. The *rotation ceiling* is that handoff made real: as many \
             processes as the size, each asleep on change notification (inotify) of its own \
             file, taking turns in a fixed ring with no protocol at all — woken, one does \
             the handoff's disk work as above (and appends to a log), then touches the next \
             one's file and sleeps (`benches/src/rotation.rs`). It is run for as many \
             handoffs as the size, just before the size and again right after it in a \
             directory of the run's store; the ceiling is 1 / the mean of the two runs' time \
             per handoff (both shown). It charges what the handoff ceiling leaves out and no \
             protocol can: waking a process (not a thread) on this machine's CPUs, the \
             processes' own scheduling, and the filesystem as a rotation's own churn leaves \
             it; what the run spends beyond it is the protocol's — deciding who is next \
             (a queue of tickets, its reads and removals), the confirming read, the checks \
             for shared claims.\n\n\
             Both ceilings' floors are timed just before the size ran and again right after it, \
             in a directory of the run's store, and each ceiling takes the mean of the two p50s: \
             the same disk work costs more on the filesystem the run left behind (on ext4 \
             without a journal, a new file's inode is found by passing over every inode freed \
             in the last minute, and a run frees several per handoff: \
             docs/design-07-performance.md, \"The contention floors, before and after\"). \
             Both p50s of the handoff's disk work are shown. *CPU per handoff* is the CPU \
             time (user + system) all the worker processes used, from their resource usage \
             as they were reaped, divided by the handoffs; *cores busy* is that CPU time over \
             the elapsed time (this machine has the cores the Machine table gives): near the \
             core count, the run was bound by CPU (the code's and the kernel's), not by \
             waiting for the disk.\n\n\
             | claims | processes | handoffs | elapsed | handoffs/s | serial ceiling /s | % of ceiling | \
             handoff work p50: before / after the run | \
             handoff ceiling /s | % of it | rotation ceiling /s (runs before / after) | % of it | wait p50 | \
             wait p99 | wait max | fairness (max / median wait) | tenures begun during a wait: most / most in the slowest 1% (fair: ≤ processes − 1) | handoff gap p50 | CPU per handoff: run / rotation | cores busy | oracle |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
        );
        for c in &self.contention {
            let rate = c.handoffs as f64 / c.elapsed.as_secs_f64();
            let ceiling = Self::ceiling_of(c);
            let handoff_ceiling = self.handoff_ceiling_of(c);
            let rotation = Self::rotation_ceiling_of(c);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.2} s | {:.0} | {:.0} | {:.0}% | {} / {} | {:.0} | {:.0}% | {} | {} | {} | {} | {} | {:.0}× | {} / {} | {} | {} / {} | {:.2} | held |",
                if c.flush { "flush on" } else { "flush off" },
                c.workers,
                c.handoffs,
                c.elapsed.as_secs_f64(),
                rate,
                ceiling,
                100.0 * rate / ceiling,
                fmt(c.floor_handoff.p50),
                c.floor_handoff_after
                    .as_ref()
                    .map_or("—".into(), |a| fmt(a.p50)),
                handoff_ceiling,
                100.0 * rate / handoff_ceiling,
                rotation.map_or("—".into(), |r| {
                    let each = |x: Option<crate::rotation::Rotation>| {
                        x.map_or("—".into(), |x| format!("{:.0}", x.rate()))
                    };
                    format!(
                        "{r:.0} ({} / {})",
                        each(c.rotation_before),
                        each(c.rotation_after)
                    )
                }),
                rotation.map_or("—".into(), |r| format!("{:.0}%", 100.0 * rate / r)),
                fmt(c.wait.p50),
                fmt(c.wait.p99),
                fmt(c.wait.max),
                ratio(c.wait.max, c.wait.p50),
                c.passed_max,
                c.slowest_passed_max,
                fmt(c.gap.p50),
                fmt(c.cpu / c.handoffs.max(1) as u32),
                rotation_cpu(c),
                c.cpu.as_secs_f64() / c.elapsed.as_secs_f64()
            );
        }

        let fence = self.row("fs, flush on", "acquire + release, cold resource");
        let _ = writeln!(
            s,
            "\n## Rivals, same run, same directory\n\n\
             The lockfile is **this bench's own implementation of the common design** \
             (`O_EXCL` create, stale when its mtime is older than the stale time, unlink on \
             release, nothing flushed), not a published crate. Last column: fencepost's \
             acquire + release (fs, flush on) p50 divided by the rival's p50.\n\n\
             | rival | iterations | p50 | p95 | p99 | min | max | fencepost / rival |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
        for r in &self.rivals {
            let x = fence.map_or("—".into(), |f| {
                format!("{:.1}×", ratio(f.summary.p50, r.summary.p50))
            });
            let q = &r.summary;
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {x} |",
                r.name,
                q.n,
                fmt(q.p50),
                fmt(q.p95),
                fmt(q.p99),
                fmt(q.min),
                fmt(q.max)
            );
        }

        let _ = writeln!(
            s,
            "\n## The wedged holder: two real OS processes per library\n\n\
             The holder takes the lock (ttl / stale time below), is stopped with SIGSTOP, \
             and stays stopped while a second process tries to take over (for up to three \
             stale times); then it gets SIGCONT and — as its code would next — calls its \
             gate if the library has one, writes to the shared data file, and releases. \
             Every cell is what the run observed.\n\n\
             | library | ttl / stale | holder stopped for | successor | resumed holder was told it lost the lock | \
             its write landed | its release removed the successor's lock | what the holder's calls returned |\n\
             | --- | ---: | ---: | --- | --- | --- | --- | --- |"
        );
        for o in &self.wedged {
            let removed = match o.successor_intact {
                Some(intact) => yes_no(!intact),
                None => "— (no successor)",
            };
            let _ = writeln!(
                s,
                "| {} | {} ms | {} ms | {} | {} | {} | {removed} | {} |",
                o.library,
                o.stale_ms,
                o.paused.as_millis(),
                if o.took_over {
                    format!("took over ({})", o.successor.trim_start_matches("took "))
                } else {
                    format!(
                        "could not take over ({} ms)",
                        o.successor.trim_start_matches("blocked ")
                    )
                },
                yes_no(o.learned),
                yes_no(o.write_landed),
                o.holder_saw
            );
        }

        self.render_handoffs(&mut s);
        self.render_loss(&mut s);
        self.render_targets(&mut s);
        self.render_reading(&mut s);
        s
    }

    fn render_handoffs(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "\n## Handoff: release → the waiting claimant's acquire returns\n\n\
             One holder and one waiter (two store handles, as two processes have): the \
             waiter is already inside `acquire` when the holder releases, {} ms after \
             acquiring; timed from just before the release call to the waiter's `acquire` \
             returning. Its floor is what the handoff cannot do without: its disk work (the \
             release's listing, read and unflushed tombstone; the waiter's listing, read, its \
             own create, flushed or not, and the sweep of the two records below it), timed \
             (p50) just before, plus the **wake floor**: a thread asleep on the key \
             directory's change notification (inotify) woken by another thread's create, no \
             protocol at all (p50 {} over {} rounds). Both are timed as the row's handoffs \
             run: after {} ms idle. The disk work costs more after an idle than back to back \
             (cold caches, and the device's first flush after a quiet spell); the back-to-back \
             figure, timed alternately with it, is shown beside it.\n\n\
             | row | iterations | p50 | p95 | p99 | max | disk work p50, after the idle | disk work p50, back to back | after the idle + wake floor = floor p50 | ratio | p50 − floor |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            crate::contention::HANDOFF_HOLD.as_millis(),
            self.wake.map_or("not measured".into(), |w| fmt(w.p50)),
            self.wake.map_or(0, |w| w.n),
            crate::contention::HANDOFF_HOLD.as_millis(),
        );
        for h in &self.handoffs {
            let m = &h.measured;
            let floor = h.work.p50 + self.wake_p50();
            let _ = writeln!(
                s,
                "| handoff, fs, flush {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2}× | {} |",
                if h.flush { "on" } else { "off" },
                m.n,
                fmt(m.p50),
                fmt(m.p95),
                fmt(m.p99),
                fmt(m.max),
                fmt(h.work.p50),
                fmt(h.back_to_back.p50),
                fmt(floor),
                ratio(m.p50, floor),
                fmt(m.p50.saturating_sub(floor))
            );
        }
    }

    fn render_loss(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "\n## Losing a lease, and dead holders (real `fencepost` processes, fs store)\n\n\
             - *loss notice*: a `fencepost run --ttl 30000` holds a lock; its tenure is ended \
             from outside (a release with its token); timed from that record landing to \
             `run`'s loss line on stderr. Without the keepalive's watch between renewals \
             this is up to ttl/3 = 10 s.\n\
             - *dead-holder handoff*: a `fencepost claim --hold --ttl 60000` is SIGKILLed; \
             timed from its reaping to a waiter's acquire returning the lease. Without \
             dead-holder takeover this is the rest of the ttl (about 60 s).\n\n\
             | row | iterations | p50 | p95 | min | max |\n| --- | ---: | ---: | ---: | ---: | ---: |"
        );
        for (name, summary) in [
            ("loss notice (run, ttl 30 s)", &self.loss_notice),
            (
                "dead-holder handoff (claim --hold, ttl 60 s)",
                &self.handoff,
            ),
        ] {
            match summary {
                Some(m) => {
                    let _ = writeln!(
                        s,
                        "| {name} | {} | {} | {} | {} | {} |",
                        m.n,
                        fmt(m.p50),
                        fmt(m.p95),
                        fmt(m.min),
                        fmt(m.max)
                    );
                }
                None => {
                    let _ = writeln!(s, "| {name} | not run | — | — | — | — |");
                }
            }
        }
    }

    /// The sweeping rows timed in back-to-back blocks (`rows::BackToBack`).
    fn render_back_to_back(&self, s: &mut String) {
        let rows: Vec<_> = self
            .rows
            .iter()
            .filter_map(|r| r.back_to_back.as_ref().map(|b| (r, b)))
            .collect();
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(
            s,
            "\n### The sweeping rows, back to back\n\n\
             The fs backend makes the sweep's removals on a removal thread, after the \
             operation returned; above, they are settled untimed before every floor sample, so \
             the p50 shows the operation without them. Here each row runs in blocks of \
             operations in a row (its queued removals overlapping the next operations, as in \
             real use), the removals still queued at the end of a block settled **on the \
             clock**, alternated block by block with as many of its plain floor and of its \
             floor with the sweep. Mean per operation over all blocks; a removal's disk time \
             that did not overlap is charged here. These means decide the sweeping rows' \
             targets below.\n\n\
             Per operation, beside the means: the CPU time this process used (every thread, \
             the removal thread included; `getrusage`) and the requests the bench \
             directory's block device completed (`/proc/diskstats`: writes, flushes, \
             discards; the whole device, so nothing else runs beside the bench), for the row \
             and for its floor with the sweep. The same requests (writes within the \
             spread the floor's own blocks showed) and less extra CPU than the excess, yet a \
             longer mean, is time spent waiting for the device.\n\n\
             | group | row | blocks × operations | row mean | floor mean | ratio | \
             floor with the sweep mean | ratio to it | CPU per operation: row / floor with \
             the sweep | device requests per operation (writes, flushes, discards): row / \
             floor with the sweep |\n\
             | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
        for (r, b) in rows {
            let _ = writeln!(
                s,
                "| {} | {} | {} × {} | {} | {} | {:.2}× | {} | {:.2}× | {} / {} | {} / {} |",
                r.group,
                r.name,
                b.blocks,
                b.per_block,
                fmt(b.row_mean),
                fmt(b.floor_mean),
                ratio(b.row_mean, b.floor_mean),
                fmt(b.swept_mean),
                ratio(b.row_mean, b.swept_mean),
                fmt(b.row_usage.cpu),
                fmt(b.swept_usage.cpu),
                requests(&b.row_usage),
                requests(&b.swept_usage),
            );
        }
    }

    fn render_targets(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "\n## Targets, as measured in this run (issue 17, and each row's own)\n\n\
             Ratios are row p50 / floor p50 of the floor timed alternately with the row. For \
             flushed rows, two more floors from the same rotation: the single-fsync floor (one \
             journal commit, which no POSIX-durable claim can beat) and the floor with the \
             sweep's removals on the clock (a renewal removes the record it superseded, an \
             acquisition the two below its claim, so that a series stays bounded; the plain \
             floors remove their old files untimed). *Why* is worked out by the bench from \
             these rows: a miss is put down to the disk or the kernel only when the row is \
             within its target of a floor that does only what the protocol must do.\n\n\
             A sweeping row's *why* also gives its mean against its floors' means, which \
             charges every removal even where only some operations make one.\n\n\
             **A sweeping fs row is judged by its back-to-back mean** (the table above): its \
             removals run on the fs backend's removal thread after it returns, so its p50 \
             (shown beside it) leaves out disk time the removals still spend; the back-to-back \
             mean, with the last removals settled on the clock, cannot. *Measured*, *met* and \
             the ratio to the floor with the sweep are then back-to-back means against the \
             floors' back-to-back means.\n\n\
             | row | target | measured | met | by how much | against the single-fsync floor | \
             against the floor with the sweep | why (from the floor rows) |\n\
             | --- | --- | ---: | --- | ---: | ---: | ---: | --- |"
        );
        let verdict = |met: bool| if met { "yes" } else { "**no**" };
        for r in self.rows.iter().filter(|r| r.target.is_some()) {
            let (target, measured, met, by, limit) = match (r.target, &r.floor, &r.back_to_back) {
                (Some(Target::RatioAtMost(limit)), Some((_, f)), Some(b)) => {
                    let x = ratio(b.row_mean, b.floor_mean);
                    (
                        format!("p50 ≤ {limit}× floor; sweeping: back-to-back mean"),
                        format!(
                            "{x:.2}× back to back (p50 alone, removals settled off the clock: \
                             {:.2}×)",
                            ratio(r.summary.p50, f.p50)
                        ),
                        x <= limit,
                        x / limit,
                        Some(limit),
                    )
                }
                (Some(Target::RatioAtMost(limit)), Some((_, f)), None) => {
                    let x = ratio(r.summary.p50, f.p50);
                    (
                        format!("p50 ≤ {limit}× floor"),
                        format!("{x:.2}×"),
                        x <= limit,
                        x / limit,
                        Some(limit),
                    )
                }
                (Some(Target::P50AtMost(limit)), ..) => {
                    let x = ratio(r.summary.p50, limit);
                    (
                        format!("p50 ≤ {}", fmt(limit)),
                        fmt(r.summary.p50),
                        x <= 1.0,
                        x,
                        None,
                    )
                }
                _ => continue,
            };
            let by_text = if met {
                "—".into()
            } else {
                format!("{by:.2}× over")
            };
            let one = r.floor_one.as_ref().map_or("—".into(), |(_, f)| {
                format!("{:.2}×", ratio(r.summary.p50, f.p50))
            });
            // Back to back where the row has it (the honest figure for a row whose
            // removals run after it returns), else the alternated p50s.
            let swept_at =
                |b: &crate::rows::BackToBack| (ratio(b.row_mean, b.swept_mean), b.swept_mean);
            let swept_both = match (&r.back_to_back, &r.floor_swept) {
                (Some(b), Some(_)) => Some((swept_at(b), "mean back to back")),
                (None, Some((_, f))) => Some(((ratio(r.summary.p50, f.p50), f.p50), "p50")),
                _ => None,
            };
            let swept_x = swept_both.map(|((x, _), _)| x);
            let swept = swept_x.map_or("—".into(), |x| format!("{x:.2}×"));
            let discard = if self.machine.mount.online_discard {
                "; the bench directory's filesystem is mounted with online discard \
                 (`discard`), so every removal of a flushed record waits for the device to \
                 discard its block (docs/design-07-performance.md, \"What the floors leave \
                 out\")"
            } else {
                ""
            };
            let why = match (met, swept_both, limit, &r.floor_swept) {
                (true, ..) => "—".to_string(),
                (false, Some(((x, at), how)), Some(limit), Some((name, _))) if x <= limit => {
                    let counts = r
                        .back_to_back
                        .as_ref()
                        .map_or(String::new(), |b| format!("; {}", counts(b)));
                    format!(
                        "the disk: the sweep's removals the plain floor leaves off the clock; \
                     its floor with them ({name}) is {} ({how}), and the row is {x:.2}× that \
                     (≤ {limit}×){counts}{discard}",
                        fmt(at)
                    )
                }
                (false, Some(((x, _), how)), Some(limit), Some(_)) => match &r.back_to_back {
                    Some(b) => waiting_or_code(b, limit, discard),
                    None => {
                        format!(
                            "the code: {x:.2}× even the floor with the sweep's removals ({how})"
                        )
                    }
                },
                // A memory row: no floor, but the CPU control timed beside it says
                // whether the CPU itself was slower during the row (crate::control).
                (false, ..) => match (&r.weather, r.target) {
                    (Some(w), Some(Target::P50AtMost(limit))) => w
                        .verdict(r.summary.p50, limit)
                        .unwrap_or_else(|| "the code: no floor row accounts for it".into()),
                    _ => "the code: no floor row accounts for it".to_string(),
                },
            };
            let why = match mean_ratios(r) {
                Some((plain, swept)) => format!(
                    "{why}. Mean: {plain:.2}× the floor's mean, {swept:.2}× the mean of the \
                     floor with the sweep"
                ),
                None => why,
            };
            let _ = writeln!(
                s,
                "| {}: {} | {target} | {measured} | {} | {by_text} | {one} | {swept} | {why} |",
                r.group,
                r.name,
                verdict(met)
            );
        }
        match self.contention.iter().find(|c| c.workers == 8 && c.flush) {
            Some(c) => {
                let rate = c.handoffs as f64 / c.elapsed.as_secs_f64();
                let share = rate / Self::ceiling_of(c);
                let handoff_share = rate / self.handoff_ceiling_of(c);
                let p99_ok = c.wait.p99 <= Duration::from_millis(10);
                let met = share >= 0.8 && p99_ok;
                let mut by = Vec::new();
                if share < 0.8 {
                    by.push(format!("{:.2}× short of 80%", 0.8 / share));
                }
                if !p99_ok {
                    by.push(format!(
                        "wait p99 {:.1}× over",
                        ratio(c.wait.p99, Duration::from_millis(10))
                    ));
                }
                let by = if by.is_empty() {
                    "—".into()
                } else {
                    by.join("; ")
                };
                let mut why = Vec::new();
                // The floor the throughput is judged against: the rotation of as many
                // processes with no protocol where it ran, else the handoff ceiling.
                let rotation = Self::rotation_ceiling_of(c);
                let floor_share = rotation.map_or(handoff_share, |r| rate / r);
                let disk_bound = floor_share >= 0.8;
                if share < 0.8 {
                    let cpu = format!(
                        "the worker processes used {} of CPU per handoff{} and kept {:.2} \
                         cores busy",
                        fmt(c.cpu / c.handoffs.max(1) as u32),
                        if rotation.is_some() {
                            format!(", the rotation's {}", rotation_cpu(c))
                        } else {
                            String::new()
                        },
                        c.cpu.as_secs_f64() / c.elapsed.as_secs_f64()
                    );
                    why.extend(throughput_why(
                        Ceilings {
                            rate,
                            serial: Self::ceiling_of(c),
                            handoff: self.handoff_ceiling_of(c),
                            rotation,
                        },
                        c.workers,
                        &cpu,
                    ));
                }
                if !p99_ok {
                    // The wake order, measured: a fair rotation lets at most
                    // workers - 1 other tenures begin during a wait. When none of the
                    // slowest waits saw more, they were long because the handoffs
                    // during them were, and those are the throughput verdict's.
                    let fair_most = c.workers - 1;
                    if c.slowest_passed_max > fair_most {
                        why.push(format!(
                            "wait p99: the code's wake order — during one of the slowest 1% \
                             of waits {} other tenures began, more than the {fair_most} a fair \
                             rotation lets begin",
                            c.slowest_passed_max
                        ));
                    } else {
                        why.push(format!(
                            "wait p99: {} — no waiter among the slowest 1% was overtaken (at \
                             most {} other tenures began during each, a fair rotation lets \
                             {fair_most}), so they were long because the handoffs during them \
                             were (handoff gap p50 {}, p99 {}); a p99 of 10 ms needs {:.0} \
                             handoffs/s",
                            if disk_bound {
                                "the handoffs' length, which is the disk's and the kernel's \
                                 (throughput above), not the wake order"
                            } else {
                                "the code's handoffs (throughput above), not the wake order"
                            },
                            c.slowest_passed_max,
                            fmt(c.gap.p50),
                            fmt(c.gap.p99),
                            fair_most as f64 / 0.010
                        ));
                    }
                }
                let why = if why.is_empty() {
                    "—".into()
                } else {
                    why.join("; ")
                };
                let _ = writeln!(
                    s,
                    "| contention, 8 processes | ≥ 80% of the serial ceiling, wait p99 ≤ 10 ms | \
                     {:.0}%, wait p99 {} | {} | {by} | — | — | {why} |",
                    100.0 * share,
                    fmt(c.wait.p99),
                    verdict(met)
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "| contention, 8 processes | ≥ 80% of the serial ceiling, wait p99 ≤ 10 ms | \
                     not run in this mode | — | — | — | — | — |"
                );
            }
        }
        for h in &self.handoffs {
            let limit = Duration::from_millis(1);
            let m = &h.measured;
            let floor = h.work.p50 + self.wake_p50();
            let met = m.p50 <= limit;
            let by = if met {
                "—".into()
            } else {
                format!("{:.2}× over", ratio(m.p50, limit))
            };
            let x = ratio(m.p50, floor);
            let why = if met {
                "—".into()
            } else if floor > limit {
                format!(
                    "the disk: its floor alone (disk work after the row's {} ms idle {} + \
                     wake floor {}) is {}, over 1 ms; the row is {x:.2}× its floor (the same \
                     disk work back to back: {})",
                    crate::contention::HANDOFF_HOLD.as_millis(),
                    fmt(h.work.p50),
                    fmt(self.wake_p50()),
                    fmt(floor),
                    fmt(h.back_to_back.p50)
                )
            } else {
                format!(
                    "the code: its floor is {} (≤ 1 ms) and the row {x:.2}× that",
                    fmt(floor)
                )
            };
            let _ = writeln!(
                s,
                "| handoff, fs, flush {}: release → waiter's acquire returns | p50 ≤ 1 ms | {} | {} | {by} | — | — | {why} |",
                if h.flush { "on" } else { "off" },
                fmt(m.p50),
                verdict(met)
            );
        }
    }

    fn render_reading(&self, s: &mut String) {
        let flushed = self.floor(FLUSHED).p50;
        let unflushed = self.floor(UNFLUSHED).p50;
        let on = self.row("fs, flush on", "acquire + release, cold resource");
        let off = self.row("fs, flush off", "acquire + release, cold resource");
        let renew_floor = self
            .row("fs, flush on", "renew")
            .and_then(|r| r.floor.as_ref())
            .map(|(_, f)| f.p50);
        let _ = writeln!(
            s,
            "\n## How to read this\n\n\
             - **Ratios over absolute times.** A ratio to a floor measured in the same run \
             on the same directory survives a change of disk; the absolute figures do not. \
             Compare machines and runs by ratio.\n\
             - **Variance across runs.** Disk latency swings several-fold with recent I/O \
             history, on this machine kind too. Within this run the flushed-create floor had \
             p50 {} in the floor table and {} when timed alternately with `renew`, with p99 {} \
             in the floor table; rerun before believing a difference of tens of percent.\n\
             - **What the fsync pair buys.** A flushed create cost {} at p50 (single-fsync: {}) \
             against {} unflushed: the file flush plus the directory flush are most of a \
             claim's price. Acquire + release cost {} with flush on and {} with flush off. The claim's \
             flush is load-bearing (lose it and a rival can be handed the same generation — \
             two authorized holders); the release's tombstone is never flushed (losing it \
             only delays the next contender). Flush off is for tmpfs and throwaway stores.\n\
             - **Percentiles** are nearest-rank over the row's samples (after untimed warm-up \
             rounds); min and max are single samples.",
            fmt(flushed),
            renew_floor.map_or("—".into(), fmt),
            fmt(self.floor(FLUSHED).p99),
            fmt(flushed),
            fmt(self.floor(FLUSHED_ONE).p50),
            fmt(unflushed),
            on.map_or("—".into(), |r| fmt(r.summary.p50)),
            off.map_or("—".into(), |r| fmt(r.summary.p50)),
        );
        for note in &self.notes {
            let _ = writeln!(s, "- Observed: {note}");
        }
    }
}

/// For a row that sweeps (it has a floor with the sweep's removals timed): its mean
/// against its plain floor's mean and against the mean of its floor with the sweep.
/// Where only some operations remove records, the p50 shows the ones that do not; the
/// mean charges every removal.
fn mean_ratios(r: &Row) -> Option<(f64, f64)> {
    let (_, plain) = r.floor.as_ref()?;
    let (_, swept) = r.floor_swept.as_ref()?;
    Some((
        ratio(r.summary.mean, plain.mean),
        ratio(r.summary.mean, swept.mean),
    ))
}

fn table_head(s: &mut String, with_floor: bool) {
    if with_floor {
        let _ = writeln!(
            s,
            "| group | row | iterations | p50 | p95 | p99 | min | max | floor (alternated) | floor p50 | ratio | \
             single-fsync floor p50 | ratio to it | floor with the sweep p50 | ratio to it | \
             mean: row / floor | mean: row / floor with the sweep |\n\
             | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
    } else {
        let _ = writeln!(
            s,
            "| floor | iterations | p50 | p95 | p99 | min | max |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
    }
}

fn table_row(s: &mut String, r: &Row, with_floor: bool) {
    let q = &r.summary;
    let cells = format!(
        "{} | {} | {} | {} | {} | {}",
        q.n,
        fmt(q.p50),
        fmt(q.p95),
        fmt(q.p99),
        fmt(q.min),
        fmt(q.max)
    );
    if !with_floor {
        let _ = writeln!(s, "| {} | {cells} |", r.name);
        return;
    }
    let (floor, fp50, x) = match &r.floor {
        Some((name, f)) => (
            name.as_str(),
            fmt(f.p50),
            format!("{:.2}×", ratio(q.p50, f.p50)),
        ),
        None => ("—", "—".into(), "—".into()),
    };
    let (one_p50, one_x) = match &r.floor_one {
        Some((_, f)) => (fmt(f.p50), format!("{:.2}×", ratio(q.p50, f.p50))),
        None => ("—".into(), "—".into()),
    };
    let (swept_p50, swept_x) = match &r.floor_swept {
        Some((_, f)) => (fmt(f.p50), format!("{:.2}×", ratio(q.p50, f.p50))),
        None => ("—".into(), "—".into()),
    };
    let (mean_x, mean_swept_x) = match mean_ratios(r) {
        Some((plain, swept)) => (format!("{plain:.2}×"), format!("{swept:.2}×")),
        None => ("—".into(), "—".into()),
    };
    let _ = writeln!(
        s,
        "| {} | {} | {cells} | {floor} | {fp50} | {x} | {one_p50} | {one_x} | {swept_p50} | {swept_x} | {mean_x} | {mean_swept_x} |",
        r.group, r.name
    );
}

/// A contention floor's p50 over the run: the mean of its p50 timed just before the
/// run and right after it, in the run's store (the filesystem as the run left it:
/// docs/design-07-performance.md, "The contention floors, before and after"); the
/// p50 before alone when it was not timed after.
/// A contention size's rate and the ceilings it is judged against (handoffs/s).
#[derive(Debug, Clone, Copy)]
struct Ceilings {
    /// The run's own handoffs per second.
    rate: f64,
    /// 1 / (flushed + unflushed create).
    serial: f64,
    /// 1 / (one handoff's disk work + the wake floor).
    handoff: f64,
    /// The rotation floor of as many processes, where it ran.
    rotation: Option<f64>,
}

/// Why a size's throughput is under 80% of its serial ceiling: the disk and the
/// kernel when the run reached 80% of what no protocol at all reaches (the rotation
/// floor where it ran, else the handoff ceiling), otherwise the code; and, where
/// that floor is itself under 80% of the serial ceiling, that the target is beyond
/// this disk and kernel. `cpu` describes the processes' CPU time.
fn throughput_why(c: Ceilings, workers: usize, cpu: &str) -> Vec<String> {
    let mut why = Vec::new();
    let (best, share) = match c.rotation {
        Some(r) => (r, c.rate / r),
        None => (c.handoff, c.rate / c.handoff),
    };
    why.push(match c.rotation {
        Some(r) if share >= 0.8 => format!(
            "throughput: the disk and the kernel — {workers} processes taking turns with no \
             protocol at all (the handoff's disk work and a wake-up of the next, nothing \
             decided) reach {r:.0}/s, and the run reached {:.0}% of that",
            100.0 * share
        ),
        Some(r) => format!(
            "throughput: the code — only {:.0}% of the {r:.0}/s that {workers} processes \
             taking turns with no protocol at all reach (the handoff's disk work and a \
             wake-up of the next, nothing decided); {cpu}; the rest is the protocol's own \
             steps on each handoff's path (docs/design-07-performance.md, \"The rotation \
             floor\")",
            100.0 * share
        ),
        None if share >= 0.8 => format!(
            "throughput: the disk and the kernel — one handoff's own disk work plus one \
             wake-up allow {:.0}/s, and the run reached {:.0}% of that",
            c.handoff,
            100.0 * share
        ),
        None => format!(
            "throughput: the code — only {:.0}% of the {:.0}/s that one handoff's disk work \
             plus one wake-up allow ({cpu})",
            100.0 * share,
            c.handoff
        ),
    });
    // Where the floor itself is below 80% of the serial ceiling, no code could meet
    // the target on this disk: say so, and by how much the disk and the kernel
    // alone fall short.
    let what = if c.rotation.is_some() {
        "a rotation with no protocol at all reaches"
    } else {
        "the handoff ceiling itself is"
    };
    let beyond = best / c.serial;
    if beyond < 0.8 {
        why.push(format!(
            "and 80% of the serial ceiling is beyond this disk and kernel: {what} {:.0}% of \
             the serial ceiling (a waiter must be woken and must read before it claims, \
             which the serial ceiling leaves out)",
            100.0 * beyond
        ));
    }
    why
}

/// The CPU time per handoff of a size's rotation floor (both runs), or `—`.
fn rotation_cpu(c: &ContentionRow) -> String {
    let runs: Vec<_> = [c.rotation_before, c.rotation_after]
        .into_iter()
        .flatten()
        .collect();
    let handoffs: usize = runs.iter().map(|r| r.handoffs).sum();
    if handoffs == 0 {
        return "—".into();
    }
    fmt(runs.iter().map(|r| r.cpu).sum::<Duration>() / handoffs as u32)
}

fn around(before: &Summary, after: &Option<Summary>) -> Duration {
    match after {
        Some(after) => (before.p50 + after.p50) / 2,
        None => before.p50,
    }
}

/// Device requests per operation, `writes, flushes, discards`, or `—` where they
/// were not counted.
fn requests(usage: &crate::device::Usage) -> String {
    usage.requests.map_or("—".into(), |r| {
        format!("{:.1}, {:.1}, {:.1}", r.writes, r.flushes, r.discards)
    })
}

/// Why a sweeping row is over `limit` × its floor with the sweep, back to back: the
/// code can account at most for the CPU it spent beyond the floor's and for the
/// device requests it sent beyond the floor's. With no more flushes and discards
/// than the floor (within a hundredth per operation), no more writes than the
/// floor's plus the spread the floor's own blocks showed (background writeback
/// lands in any block), and less extra CPU than the excess, the excess is waiting
/// for the device on the same requests: the disk.
fn waiting_or_code(b: &crate::rows::BackToBack, limit: f64, discard: &str) -> String {
    let x = ratio(b.row_mean, b.swept_mean);
    let allowed = b.swept_mean.mul_f64(limit);
    let over = b.row_mean.saturating_sub(allowed);
    let cpu_extra = b.row_usage.cpu.saturating_sub(b.swept_usage.cpu);
    let (Some(row), Some(floor)) = (b.row_usage.requests, b.swept_usage.requests) else {
        return format!(
            "the code: {x:.2}× even the floor with the sweep's removals (mean back to back; \
             the device's requests were not counted here, so waiting cannot be told from \
             the code)"
        );
    };
    let same = row.writes <= floor.writes + b.swept_writes_spread
        && row.flushes <= floor.flushes + 0.01
        && row.discards <= floor.discards + 0.01;
    let counts = counts(b);
    if same && cpu_extra < over {
        format!(
            "the disk: {x:.2}× the floor with the sweep's removals (mean back to back), \
             but {counts}: the {} it is over its target is not its CPU (at most {} more) \
             nor more requests; it is the device taking longer over the same requests{discard}",
            fmt(over),
            fmt(cpu_extra)
        )
    } else {
        format!(
            "the code: {x:.2}× even the floor with the sweep's removals (mean back to back); {counts}"
        )
    }
}

/// What a back-to-back row and its floor with the sweep asked of the device and the
/// CPU, per operation, in words.
fn counts(b: &crate::rows::BackToBack) -> String {
    format!(
        "per operation the row sent the device {} requests (writes, flushes, discards) \
         against its floor's {} (whose writes per operation varied by {:.1} from block to \
         block) and used {} of CPU against {}",
        requests(&b.row_usage),
        requests(&b.swept_usage),
        b.swept_writes_spread,
        fmt(b.row_usage.cpu),
        fmt(b.swept_usage.cpu)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Requests, Usage};
    use crate::rows::BackToBack;

    fn b2b(row_us: u64, cpu_us: u64, row: Requests) -> BackToBack {
        let usage = |cpu_us: u64, requests| Usage {
            cpu: Duration::from_micros(cpu_us),
            requests: Some(requests),
        };
        let floor = Requests {
            writes: 6.0,
            flushes: 2.0,
            discards: 1.0,
        };
        BackToBack {
            blocks: 20,
            per_block: 50,
            row_mean: Duration::from_micros(row_us),
            floor_mean: Duration::from_micros(400),
            swept_mean: Duration::from_micros(500),
            row_usage: usage(cpu_us, row),
            swept_usage: usage(200, floor),
            swept_writes_spread: 0.8,
        }
    }

    /// Contention's throughput is the disk and the kernel only within 80% of the
    /// rotation floor (the handoff ceiling where none ran), and the target is called
    /// beyond the disk only when that floor is under 80% of the serial ceiling.
    #[test]
    fn contention_is_the_disk_only_within_80_percent_of_the_rotation() {
        let c = Ceilings {
            rate: 1500.0,
            serial: 3000.0,
            handoff: 2000.0,
            rotation: Some(1800.0),
        };
        let why = throughput_why(c, 8, "cpu");
        assert!(why[0].starts_with("throughput: the disk"), "{why:?}");
        assert!(
            why[1].contains("a rotation with no protocol at all reaches 60%"),
            "{why:?}"
        );
        let why = throughput_why(
            Ceilings {
                rotation: Some(2000.0),
                ..c
            },
            8,
            "cpu",
        );
        assert!(
            why[0].starts_with("throughput: the code — only 75%"),
            "{why:?}"
        );
        // The rotation itself within 80% of the serial ceiling: no "beyond".
        let why = throughput_why(
            Ceilings {
                rotation: Some(2500.0),
                ..c
            },
            8,
            "cpu",
        );
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].starts_with("throughput: the code"), "{why:?}");
        // No rotation: judged against the handoff ceiling.
        let why = throughput_why(
            Ceilings {
                rotation: None,
                ..c
            },
            8,
            "cpu",
        );
        assert!(
            why[0].starts_with("throughput: the code — only 75% of the 2000/s"),
            "{why:?}"
        );
        assert!(
            why[1].contains("the handoff ceiling itself is 67%"),
            "{why:?}"
        );
        let why = throughput_why(
            Ceilings {
                rotation: None,
                handoff: 1800.0,
                ..c
            },
            8,
            "cpu",
        );
        assert!(why[0].starts_with("throughput: the disk"), "{why:?}");
    }

    /// The disk only with the same requests and less extra CPU than the excess;
    /// an extra flush, writes beyond the floor's spread, or CPU enough to explain
    /// the excess, and it is the code.
    #[test]
    fn waiting_is_the_disk_only_with_the_same_requests_and_cpu() {
        let same = Requests {
            writes: 6.7,
            flushes: 2.0,
            discards: 1.0,
        };
        // 700 µs against 1.2 × 500 µs: 100 µs over, 50 µs more CPU.
        let verdict = waiting_or_code(&b2b(700, 250, same), 1.2, "");
        assert!(verdict.starts_with("the disk"), "{verdict}");
        let verdict = waiting_or_code(&b2b(700, 350, same), 1.2, "");
        assert!(
            verdict.starts_with("the code"),
            "more CPU than the excess: {verdict}"
        );
        let flush = Requests {
            flushes: 3.0,
            ..same
        };
        let verdict = waiting_or_code(&b2b(700, 250, flush), 1.2, "");
        assert!(verdict.starts_with("the code"), "an extra flush: {verdict}");
        let writes = Requests {
            writes: 7.0,
            ..same
        };
        let verdict = waiting_or_code(&b2b(700, 250, writes), 1.2, "");
        assert!(
            verdict.starts_with("the code"),
            "writes beyond the spread: {verdict}"
        );
    }
}

//! Protocol rows (fs flush on/off, memory) and whole-process CLI rows, each timed
//! alternately with the floor it is compared to.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use fencepost::{AcquireOptions, Resource, Store, TryAcquire};

use crate::floor::FloorKit;
use crate::stats::{Summary, summarize};
use crate::{Iters, R};

/// What a row promises, from issue 17's targets.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// p50 at most this many times the floor's p50.
    RatioAtMost(f64),
    /// p50 at most this long.
    P50AtMost(Duration),
}

/// One measured row.
#[derive(Debug)]
pub struct Row {
    /// The group, e.g. `fs, flush on`.
    pub group: String,
    /// What was timed.
    pub name: String,
    /// The row's samples.
    pub summary: Summary,
    /// The floor it is compared with, measured alternately with it.
    pub floor: Option<(String, Summary)>,
    /// For a flushed row, the same floor with the single-fsync create (one file
    /// flush, no directory flush) in place of the flushed create, measured in the
    /// same rotation: how close the row is to one journal commit.
    pub floor_one: Option<(String, Summary)>,
    /// For a row whose operation sweeps (renew, acquire), its floor with the sweep's
    /// removals timed too (the plain floors remove their old files untimed),
    /// measured in the same rotation: what the filesystem charges for all the work
    /// the protocol must do.
    pub floor_swept: Option<(String, Summary)>,
    /// For a row whose removals the fs backend makes on its removal thread: the row
    /// and its floors timed in back-to-back blocks (see [`BackToBack`]).
    pub back_to_back: Option<BackToBack>,
    /// For a memory row timed beside the CPU control: what the control saw.
    pub weather: Option<Weather>,
    /// Issue 17's target for the row, if it has one.
    pub target: Option<Target>,
}

/// A sweeping row timed in back-to-back blocks: `per_block` operations in a row with
/// no settle in between (the removals each one queued overlap the next ones, as in
/// real use), then the removals still queued settled **on the clock**, so every
/// removal's disk time that did not overlap is charged; alternated block by block
/// with `per_block` of its plain floor and `per_block` of its floor with the sweep,
/// each a sum of the floor's own timings (the plain floor's removals stay off its
/// clock, the swept floor's on it).
#[derive(Debug, Clone)]
pub struct BackToBack {
    /// Blocks of each, and operations per block.
    pub blocks: usize,
    pub per_block: usize,
    /// Mean per operation: the row's (wall time of its blocks, settle included),
    /// its plain floor's and its floor with the sweep's.
    pub row_mean: Duration,
    pub floor_mean: Duration,
    pub swept_mean: Duration,
    /// Per operation, what each asked of the CPU (this process, every thread) and
    /// of the bench directory's device (`crate::device`): the row's blocks (settle
    /// included) and its floor with the sweep's.
    pub row_usage: crate::device::Usage,
    pub swept_usage: crate::device::Usage,
    /// The spread (largest − smallest) of the floor with the sweep's device writes
    /// per operation from block to block: the same operations, counted again, differ
    /// by this much (the kernel's background writeback lands in any block).
    pub swept_writes_spread: f64,
}

type Op<'a> = dyn FnMut() -> R<Duration> + 'a;

/// Runs `op` (and `floor`, alternately, so both see the same disk weather) `iters`
/// times after `warmup` untimed rounds; each call returns the time it measured.
pub fn paired(
    iters: usize,
    warmup: usize,
    op: &mut Op<'_>,
    mut floor: Option<&mut Op<'_>>,
) -> R<(Summary, Option<Summary>)> {
    for _ in 0..warmup {
        op()?;
        if let Some(f) = floor.as_mut() {
            f()?;
        }
    }
    let mut samples = Vec::with_capacity(iters);
    let mut floor_samples = Vec::with_capacity(iters);
    for _ in 0..iters {
        samples.push(op()?);
        if let Some(f) = floor.as_mut() {
            floor_samples.push(f()?);
        }
    }
    let floor = (!floor_samples.is_empty()).then(|| summarize(floor_samples));
    Ok((summarize(samples), floor))
}

/// As [`paired`], with `k` floors timed in the rotation (op, floor 0, floor 1, …, op
/// …): `floors(i)` runs floor `i`. Returns the row's samples and each floor's.
pub fn paired_floors(
    iters: usize,
    warmup: usize,
    op: &mut Op<'_>,
    k: usize,
    floors: &mut dyn FnMut(usize) -> R<Duration>,
) -> R<(Summary, Vec<Summary>)> {
    for _ in 0..warmup {
        op()?;
        for i in 0..k {
            floors(i)?;
        }
    }
    let mut row = Vec::with_capacity(iters);
    let mut samples: Vec<Vec<Duration>> = (0..k).map(|_| Vec::with_capacity(iters)).collect();
    for _ in 0..iters {
        row.push(op()?);
        for (i, samples) in samples.iter_mut().enumerate() {
            samples.push(floors(i)?);
        }
    }
    Ok((summarize(row), samples.into_iter().map(summarize).collect()))
}

/// Times `f`.
pub fn timed<T>(f: impl FnOnce() -> R<T>) -> R<(T, Duration)> {
    let start = Instant::now();
    let value = f()?;
    Ok((value, start.elapsed()))
}

/// A long ttl: no row may see its lease expire.
const TTL_MS: u64 = 600_000;

fn options() -> AcquireOptions {
    AcquireOptions::new(TTL_MS).owner("bench")
}

/// Waits, untimed, until the removals a store queued on its removal thread were made
/// (`FsStore::settle`; nothing for the memory backend).
pub type Settle = Box<dyn Fn()>;

/// How a group of protocol rows is built and what it is compared with.
pub struct Group<'a> {
    /// `fs, flush on`, `fs, flush off` or `memory`.
    pub name: &'a str,
    /// A fresh store for the row set (`main`) or for the status row (`status`).
    pub make_store: &'a dyn Fn(&str) -> R<(Store, Settle)>,
    /// The floor kit (fs groups only) and whether claims are flushed.
    pub floor: Option<(&'a mut FloorKit, bool)>,
    /// Whether issue 8's targets apply to this group.
    pub targets: bool,
    /// The directory `make_store` opens its stores in (fs groups only): the
    /// sweeping rows time their floors inside their own key directory there.
    pub store_root: Option<&'a Path>,
}

/// The floor kit of a sweeping row with `flush` on: inside its key directory
/// ([`kit_in_key_dir`]); with the flush off, `None` (the group's shared kit): at
/// flush-off rates the floor's own churn beside the row made the kernel's inode
/// allocation cost both several times what either costs alone
/// (docs/design-07-performance.md, "Telling the disk from the code").
fn row_kit(root: Option<&Path>, flush: bool, resource: &Resource) -> R<Option<FloorKit>> {
    match root {
        Some(root) if flush => Ok(Some(kit_in_key_dir(root, resource)?)),
        _ => Ok(None),
    }
}

/// A floor kit inside the key directory of `resource` in the fs store `main` under
/// `root` (the key must have been claimed): its creates meet the filesystem as the
/// row's own churn left it. On ext4 without a journal every inode allocation passes
/// over the inodes freed in the last minute near its directory, so a floor timed
/// elsewhere leaves out CPU the kernel spends on the row's creates
/// (docs/design-07-performance.md, "Telling the disk from the code").
fn kit_in_key_dir(root: &Path, resource: &Resource) -> R<FloorKit> {
    let key = resource.identity()?.key;
    let key_dir = root.join("main").join("claims").join(key.as_str());
    if !key_dir.is_dir() {
        return Err(format!("no key directory {} for the row's floor", key_dir.display()).into());
    }
    FloorKit::new(&key_dir.join("floor"), 0)
}

/// check, acquire + release (cold and first claim), renew, refused claim, status.
pub fn protocol_rows(group: Group<'_>, it: &Iters, notes: &mut Vec<String>) -> R<Vec<Row>> {
    let Group {
        name: group_name,
        make_store,
        mut floor,
        targets,
        store_root,
    } = group;
    let (store, settle) = make_store("main")?;
    let settle = &*settle;
    let memory = floor.is_none();
    let (iters, few) = if memory {
        (it.memory, it.memory)
    } else {
        (it.fs, it.fs_new_key)
    };
    let mut rows = Vec::new();
    let mut push = |name: &str,
                    Measured {
                        row: summary,
                        floor: fl,
                        one,
                        swept,
                        b2b,
                        weather,
                    }: Measured,
                    floor_name: &str,
                    target| {
        rows.push(Row {
            group: group_name.to_string(),
            name: name.to_string(),
            summary,
            floor: fl.map(|f| (floor_name.to_string(), f)),
            floor_one: one.map(|f| (single_fsync_name(floor_name), f)),
            floor_swept: swept.map(|(removals, f)| (swept_name(floor_name, removals), f)),
            back_to_back: b2b,
            weather,
            target: if targets { target } else { None },
        });
    };
    let claim_floor_name = |flush: bool| {
        if flush {
            "flushed create + unflushed create + listing/read"
        } else {
            "2 unflushed creates + listing/read"
        }
    };

    // check
    let res = Resource::lock("row-check");
    let lease = store.acquire(&res, &options())?;
    let token = lease.token();
    let mut op = || {
        let (ok, t) = timed(|| Ok(store.check(&res, token)?))?;
        if !ok {
            return Err("check of a held lease's token returned false".into());
        }
        Ok(t)
    };
    let measured = three(match floor.as_mut() {
        Some((kit, _)) => paired(iters, it.warmup, &mut op, Some(&mut || kit.list_read()))?,
        None => paired(iters, it.warmup, &mut op, None)?,
    });
    // issue 17: "fs check (lock)"; the flush-off group's check is the same code path.
    let target = floor
        .as_ref()
        .is_some_and(|(_, flush)| *flush)
        .then_some(Target::RatioAtMost(1.3));
    push("check", measured, "listing + read", target);

    // The sweeping rows: acquire (sweeps the claim and tombstone below its claim)
    // and renew (the record it superseded). The fs backend makes those removals on
    // its removal thread, after the operation returned: they are settled, untimed,
    // before every floor sample, so none lands on the floor's clock; and each row is
    // also timed in back-to-back blocks, its removals overlapping the next operations
    // as in real use and the last ones settled on the clock (`back_to_back`).
    let (blocks, per_block) = if it.quick { (2, 5) } else { (20, 50) };
    let (new_blocks, new_per_block) = if it.quick { (1, 5) } else { (4, 25) };

    // acquire + release, cold resource (free: its newest record is a tombstone)
    let res = Resource::lock("row-cold");
    store.release(&store.acquire(&res, &options())?)?;
    let mut op = || {
        timed(|| {
            let lease = store.acquire(&res, &options())?;
            store.release(&lease)?;
            Ok(())
        })
        .map(|(_, t)| t)
    };
    let cold_floor = |kit: &mut FloorKit, flush: bool, variant: Variant| -> R<Duration> {
        Ok(variant.claim(kit, flush, 2)? + kit.create(false)? + kit.list_read()?)
    };
    let (measured, flush) = match (floor.as_mut(), store_root) {
        (Some((shared, flush)), root) => {
            let flush = *flush;
            let mut own = row_kit(root, flush, &res)?;
            let kit = match own.as_mut() {
                Some(own) => own,
                None => &mut **shared,
            };
            let mut measured =
                sweeping(iters, it.warmup, &mut op, kit, flush, 2, settle, cold_floor)?;
            measured.b2b = Some(back_to_back(
                blocks, per_block, &mut op, settle, kit, flush, cold_floor,
            )?);
            (measured, flush)
        }
        _ => {
            let (summary, weather) = with_control(iters, it.warmup, &mut op)?;
            notes.push(weather.note(group_name, "acquire + release, cold resource", summary.p50));
            let mut measured = three((summary, None));
            measured.weather = Some(weather);
            (measured, false)
        }
    };
    let target = match (memory, flush) {
        (true, _) => Some(Target::P50AtMost(Duration::from_micros(4))),
        (false, true) => Some(Target::RatioAtMost(1.2)),
        (false, false) => None,
    };
    push(
        "acquire + release, cold resource",
        measured,
        claim_floor_name(flush),
        target,
    );

    // acquire + release of a key never claimed before (creates its directory)
    let mut n = 0u64;
    let mut op = || {
        n += 1;
        let res = Resource::lock(format!("row-new-{n}"));
        timed(|| {
            let lease = store.acquire(&res, &options())?;
            store.release(&lease)?;
            Ok(())
        })
        .map(|(_, t)| t)
    };
    let measured = match floor.as_mut() {
        Some((kit, flush)) => {
            let flush = *flush;
            let mut measured = sweeping(few, 0, &mut op, kit, flush, 2, settle, cold_floor)?;
            measured.b2b = Some(back_to_back(
                new_blocks,
                new_per_block,
                &mut op,
                settle,
                kit,
                flush,
                cold_floor,
            )?);
            measured
        }
        None => three(paired(few, 0, &mut op, None)?),
    };
    push(
        "acquire + release, first claim of a new key",
        measured,
        claim_floor_name(flush),
        None,
    );

    // renew
    let res = Resource::lock("row-renew");
    let mut lease = store.acquire(&res, &options())?;
    let mut op = || timed(|| Ok(store.renew(&mut lease)?)).map(|(_, t)| t);
    let renew_floor = |kit: &mut FloorKit, flush: bool, variant: Variant| -> R<Duration> {
        variant.claim(kit, flush, 1)
    };
    let measured = match (floor.as_mut(), store_root) {
        (Some((shared, flush)), root) => {
            let flush = *flush;
            let mut own = row_kit(root, flush, &res)?;
            let kit = match own.as_mut() {
                Some(own) => own,
                None => &mut **shared,
            };
            let mut measured = sweeping(
                iters,
                it.warmup,
                &mut op,
                kit,
                flush,
                1,
                settle,
                renew_floor,
            )?;
            measured.b2b = Some(back_to_back(
                blocks,
                per_block,
                &mut op,
                settle,
                kit,
                flush,
                renew_floor,
            )?);
            measured
        }
        _ => three(paired(iters, it.warmup, &mut op, None)?),
    };
    // Counted on disk: the removals the last renewals queued are made first.
    settle();
    let records = store.backend().generations(lease.key())?.len();
    notes.push(renew_note(
        group_name,
        iters + it.warmup + blocks * per_block,
        records,
    ));
    let target = (!memory && flush).then_some(Target::RatioAtMost(1.1));
    let floor_name = if flush {
        "flushed create"
    } else {
        "unflushed create"
    };
    push("renew", measured, floor_name, target);

    // check of that renewed lease: what its series (as renew left it) costs every reader
    let token = lease.token();
    let mut op = || {
        let (ok, t) = timed(|| Ok(store.check(&res, token)?))?;
        if !ok {
            return Err("check of a renewed lease's token returned false".into());
        }
        Ok(t)
    };
    let measured = three(match floor.as_mut() {
        Some((kit, _)) => paired(iters, it.warmup, &mut op, Some(&mut || kit.list_read()))?,
        None => paired(iters, it.warmup, &mut op, None)?,
    });
    let name = format!("check of the lease just renewed (its series: {records} records)");
    push(&name, measured, "listing + read", None);

    // claim refused while held
    let res = Resource::lock("row-held");
    let _holder = store.acquire(&res, &options())?;
    let mut op = || {
        let (outcome, t) = timed(|| Ok(store.try_acquire(&res, &options())?))?;
        match outcome {
            TryAcquire::Held(_) => Ok(t),
            TryAcquire::Acquired(_) => Err("a held resource was acquired".into()),
        }
    };
    let measured = three(match floor.as_mut() {
        Some((kit, _)) => paired(iters, it.warmup, &mut op, Some(&mut || kit.list_read()))?,
        None => paired(iters, it.warmup, &mut op, None)?,
    });
    push("claim refused while held", measured, "listing + read", None);

    // status over 1,000 keys, in a store of its own
    let (status_store, _) = make_store("status")?;
    for k in 0..it.status_keys {
        status_store.acquire(&Resource::lock(format!("status-{k:05}")), &options())?;
    }
    let mut op = || {
        let (entries, t) = timed(|| Ok(status_store.status()?))?;
        if entries.len() != it.status_keys {
            return Err(format!(
                "status listed {} keys, not {}",
                entries.len(),
                it.status_keys
            )
            .into());
        }
        Ok(t)
    };
    let measured = three(match floor.as_mut() {
        Some((kit, _)) => paired(it.status, 1, &mut op, Some(&mut || kit.status()))?,
        None => paired(it.status, 1, &mut op, None)?,
    });
    let name = format!("status over {} keys", it.status_keys);
    let floor_name = format!("{} × listing + read", it.status_keys);
    push(&name, measured, &floor_name, None);

    // Subtree claims (docs/design-05-subtrees-and-shared.md §3.5). Paths under a
    // directory that does not exist: nothing but the store is written.
    let base = std::env::temp_dir().join(format!(
        "fencepost-bench-tree-{}-{}",
        std::process::id(),
        group_name.replace([',', ' '], "")
    ));
    let file = Resource::file(base.join("work/src/auth/login.rs"));
    let claim_release = |store: &Store, res: &Resource| -> R<Duration> {
        timed(|| {
            let lease = store.acquire(res, &options())?;
            store.release(&lease)?;
            Ok(())
        })
        .map(|(_, t)| t)
    };
    let n = it.tree_files;
    // The same number of samples in every group (the memory group's 20,000 would
    // make the index walk alone take minutes), fewer for the whole walk.
    let (reps, warm) = (it.fs_new_key.max(2), it.warmup.min(5));
    let walk_reps = (it.fs_new_key / 10).max(2);
    let (empty, _) = make_store("tree-empty")?;
    let measured = three(paired(
        reps,
        warm,
        &mut || claim_release(&empty, &file),
        None,
    )?);
    push(
        "file claim + release, no other claims in the store",
        measured,
        "",
        None,
    );
    // The same file with `n` unrelated file claims held (beside it, sharing its
    // ancestors above `work/`).
    let (crowded, _) = make_store("tree-crowded")?;
    for k in 0..n {
        let other = base.join(format!("other/d{}/f{k}.rs", k / 50));
        crowded.acquire(&Resource::file(other), &options())?;
    }
    // Timed alternately with the same claim in the empty store as its floor: rows
    // measured one after the other differ by whatever the machine did in between
    // (load, the writeback of the `n` claims just created), which is not the claim's
    // cost. The ratio is what grows with unrelated claims (design-05 §3.5).
    let measured = three(paired(
        reps,
        warm,
        &mut || claim_release(&crowded, &file),
        Some(&mut || claim_release(&empty, &file)),
    )?);
    let name = format!("file claim + release, {n} unrelated file claims held in the store");
    push(
        &name,
        measured,
        "the same claim, no other claims (alternated)",
        None,
    );
    // A subtree claim over `n` held files: refused, at the first live claim its walk
    // meets (a look before claiming writes nothing).
    let over_held = Resource::dir(base.join("other"));
    let mut op = || {
        let (outcome, t) = timed(|| Ok(crowded.try_acquire(&over_held, &options())?))?;
        match outcome {
            TryAcquire::Held(_) => Ok(t),
            TryAcquire::Acquired(_) => Err("a subtree over held files was acquired".into()),
        }
    };
    let measured = three(paired(reps, warm, &mut op, None)?);
    let name = format!("subtree claim refused over {n} held files");
    push(&name, measured, "", None);
    // A subtree claim over `n` files claimed before and released: the whole index
    // walk (every entry and every file's newest record read), then claimed.
    let (walked, _) = make_store("tree-walked")?;
    for k in 0..n {
        let other = base.join(format!("other/d{}/f{k}.rs", k / 50));
        walked.release(&walked.acquire(&Resource::file(other), &options())?)?;
    }
    let measured = three(paired(
        walk_reps,
        1,
        &mut || claim_release(&walked, &over_held),
        None,
    )?);
    let name = format!("subtree claim + release over {n} released files (the whole index walk)");
    push(&name, measured, "", None);
    Ok(rows)
}

/// The CPU weather during a memory row, read off the control (`crate::control`)
/// timed in blocks alternated with the row's.
#[derive(Debug, Clone)]
pub struct Weather {
    /// Blocks of each, the row's operations per block and the control's runs.
    pub blocks: usize,
    pub per_block: usize,
    pub control_per_block: usize,
    /// The row's fastest block (by its p50).
    pub row_fastest: Duration,
    /// The control over the whole row.
    pub control: Summary,
    /// The control's fastest block in the run so far (the row's blocks included),
    /// and how many blocks that is of.
    pub reference: Duration,
    pub reference_blocks: usize,
    /// The row's blocks whose control p50 was over [`SLOW_BLOCK`] × `reference`.
    pub slow_blocks: usize,
}

/// How much slower than its fastest block in the run a block of the control may run
/// before it counts as a slow spell of the CPU.
pub const SLOW_BLOCK: f64 = 1.15;

impl Weather {
    /// Why a memory row whose p50 (`row_p50`) missed `limit` missed, when the
    /// control says the CPU was slow during it: the CPU's, when the row's fastest
    /// block met the target, or when the row's p50 over the control's slowdown does
    /// (the same kind of work slowed alike, scaled back as a floor timed beside a row
    /// is); undecided when every block was slow and neither holds. `None`: the
    /// control saw a steady CPU, or the row is over even so (the code's).
    pub fn verdict(&self, row_p50: Duration, limit: Duration) -> Option<String> {
        use crate::stats::{fmt, ratio};
        if self.slow_blocks == 0 {
            return None;
        }
        let slowdown = ratio(self.control.p50, self.reference);
        let during = format!(
            "a control that runs no fencepost code ran {slowdown:.2}× its fastest block of \
             the run during the row (over {SLOW_BLOCK}× in {} of {} blocks)",
            self.slow_blocks, self.blocks
        );
        if self.row_fastest <= limit {
            return Some(format!(
                "the CPU: {during}, and the row's fastest block's p50, {}, is within the target",
                fmt(self.row_fastest)
            ));
        }
        let scaled = row_p50.div_f64(slowdown.max(1.0));
        if scaled <= limit {
            return Some(format!(
                "the CPU: {during}; the row's p50 over that slowdown is {}, within the target",
                fmt(scaled)
            ));
        }
        (self.slow_blocks == self.blocks).then(|| {
            format!(
                "undecided: {during}, so no block ran on a steady CPU, and even scaled by \
                 that the row is {}; run again on a quiet machine",
                fmt(scaled)
            )
        })
    }

    /// The observation for RESULTS.md, worded from what was measured.
    fn note(&self, group: &str, row: &str, row_p50: Duration) -> String {
        use crate::stats::{fmt, ratio};
        let head = format!(
            "{group}, {row}: timed in {} blocks of {} operations, each followed by {} runs \
             of a control that runs no fencepost code (a sort of 256 numbers and 500 \
             steps of a random walk through 512 KiB). Row p50 {} ({} in its fastest \
             block); control p50 {} during the row, {} in its fastest block of the run \
             so far ({} blocks: at the start, at each step, beside the row)",
            self.blocks,
            self.per_block,
            self.control_per_block,
            fmt(row_p50),
            fmt(self.row_fastest),
            fmt(self.control.p50),
            fmt(self.reference),
            self.reference_blocks,
        );
        if self.slow_blocks == 0 {
            format!(
                "{head}: in every block of the row the control ran within {SLOW_BLOCK}× \
                 of that, so the row's p50 is the protocol's cost on a steady CPU."
            )
        } else {
            format!(
                "{head}: in {} of the {} blocks of the row the control ran over \
                 {SLOW_BLOCK}× that, i.e. the CPU was slower then for code that is not \
                 fencepost's ({:.2}× over the row); the row's p50 is {:.2}× its fastest \
                 block's.",
                self.slow_blocks,
                self.blocks,
                ratio(self.control.p50, self.reference),
                ratio(row_p50, self.row_fastest),
            )
        }
    }
}

/// Runs `op` `iters` times (after `warmup` untimed rounds) in blocks, each followed
/// by timed runs of the CPU control (`crate::control`, which says why), and returns
/// the row's samples, as [`paired`] would, and the control's weather.
fn with_control(iters: usize, warmup: usize, op: &mut Op<'_>) -> R<(Summary, Weather)> {
    for _ in 0..warmup {
        op()?;
        crate::control::with(|c| c.run());
    }
    let blocks = iters.clamp(1, 20);
    let per_block = iters.div_ceil(blocks);
    let control_per_block = (per_block / 10).clamp(10, crate::control::BLOCK);
    let mut samples = Vec::with_capacity(iters);
    let mut controls = Vec::new();
    let (mut row_blocks, mut control_blocks) = (Vec::new(), Vec::new());
    let mut left = iters;
    while left > 0 {
        let n = per_block.min(left);
        left -= n;
        let block: Vec<Duration> = (0..n).map(|_| op()).collect::<R<_>>()?;
        let (p50, checks) = crate::control::with(|c| c.block(control_per_block));
        row_blocks.push(summarize(block.clone()).p50);
        control_blocks.push(p50);
        samples.extend(block);
        controls.extend(checks);
    }
    let (reference, reference_blocks) = crate::control::with(|c| c.fastest());
    let reference = reference.ok_or("the control never ran")?;
    let slow_blocks = control_blocks
        .iter()
        .filter(|b| b.as_secs_f64() > SLOW_BLOCK * reference.as_secs_f64())
        .count();
    let weather = Weather {
        blocks: row_blocks.len(),
        per_block,
        control_per_block,
        row_fastest: row_blocks.iter().min().copied().unwrap_or_default(),
        control: summarize(controls),
        reference,
        reference_blocks,
        slow_blocks,
    };
    Ok((summarize(samples), weather))
}

/// A row and the floors it was timed against.
pub struct Measured {
    row: Summary,
    floor: Option<Summary>,
    /// With the single-fsync create in place of the flushed one.
    one: Option<Summary>,
    /// With the sweep's removals timed (how many, and the samples).
    swept: Option<(usize, Summary)>,
    /// Back-to-back blocks (sweeping fs rows).
    b2b: Option<BackToBack>,
    /// The CPU control beside a memory row.
    weather: Option<Weather>,
}

/// A row measured against one floor only.
fn three((row, floor): (Summary, Option<Summary>)) -> Measured {
    Measured {
        row,
        floor,
        one: None,
        swept: None,
        b2b: None,
        weather: None,
    }
}

/// Which flushed create a claim floor is built on.
#[derive(Debug, Clone, Copy)]
pub enum Variant {
    /// File + directory flush (what POSIX needs).
    Both,
    /// The single-fsync create (one journal commit).
    One,
    /// File + directory flush, with the sweep's removals timed.
    Swept,
}

impl Variant {
    /// A claim's create in a floor: flushed as this variant says with `flush`;
    /// without it an unflushed create, with the sweep's `removals` timed for
    /// [`Variant::Swept`] (there is no single-fsync variant without a flush).
    pub fn claim(self, kit: &mut FloorKit, flush: bool, removals: usize) -> R<Duration> {
        match (flush, self) {
            (true, variant) => variant.create(kit, removals),
            (false, Variant::Swept) => kit.create_removing(false, removals),
            (false, _) => kit.create(false),
        }
    }

    /// The flushed create of this variant; `removals` applies to [`Variant::Swept`].
    pub fn create(self, kit: &mut FloorKit, removals: usize) -> R<Duration> {
        match self {
            Variant::Both => kit.create(true),
            Variant::One => kit.create_one_flush(),
            Variant::Swept => kit.create_removing(true, removals),
        }
    }
}

/// A sweeping fs row against its claim floors in one rotation (flush on: the floor
/// with the file and directory flush, the single-fsync floor and the floor with the
/// sweep; flush off: the plain floor and the floor with the sweep). The removals the row left
/// queued on the fs backend's removal thread are settled, untimed, before every
/// floor sample, so they never land on a floor's clock.
#[allow(clippy::too_many_arguments)]
fn sweeping(
    iters: usize,
    warmup: usize,
    op: &mut Op<'_>,
    kit: &mut FloorKit,
    flush: bool,
    removals: usize,
    settle: &dyn Fn(),
    floor: impl Fn(&mut FloorKit, bool, Variant) -> R<Duration>,
) -> R<Measured> {
    let variants: &[Variant] = if flush {
        &[Variant::Both, Variant::One, Variant::Swept]
    } else {
        &[Variant::Both, Variant::Swept]
    };
    let mut floors = |i: usize| {
        settle();
        floor(kit, flush, variants[i])
    };
    let (row, mut f) = paired_floors(iters, warmup, op, variants.len(), &mut floors)?;
    let swept = f.pop();
    let one = if flush { f.pop() } else { None };
    Ok(Measured {
        row,
        floor: f.pop(),
        one,
        swept: swept.map(|s| (removals, s)),
        b2b: None,
        weather: None,
    })
}

/// Times `op` in back-to-back blocks against its plain floor and its floor with the
/// sweep (see [`BackToBack`]).
fn back_to_back(
    blocks: usize,
    per_block: usize,
    op: &mut Op<'_>,
    settle: &dyn Fn(),
    kit: &mut FloorKit,
    flush: bool,
    floor: impl Fn(&mut FloorKit, bool, Variant) -> R<Duration>,
) -> R<BackToBack> {
    use crate::device::{Usage, now};
    settle();
    let (mut row, mut plain, mut swept) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut row_usage, mut swept_usage) = (Usage::zero(), Usage::zero());
    let mut spread = (f64::MAX, 0.0_f64);
    for _ in 0..blocks {
        let before = now();
        let start = Instant::now();
        for _ in 0..per_block {
            op()?;
        }
        settle();
        row += start.elapsed();
        row_usage = row_usage.plus(&now().since(&before));
        for _ in 0..per_block {
            plain += floor(kit, flush, Variant::Both)?;
        }
        let after_plain = now();
        for _ in 0..per_block {
            swept += floor(kit, flush, Variant::Swept)?;
        }
        let block = now().since(&after_plain);
        if let Some(r) = block.requests {
            let per_op = r.writes / per_block.max(1) as f64;
            spread.0 = spread.0.min(per_op);
            spread.1 = spread.1.max(per_op);
        }
        swept_usage = swept_usage.plus(&block);
    }
    let ops = (blocks * per_block).max(1);
    let n = u32::try_from(ops)?;
    Ok(BackToBack {
        blocks,
        per_block,
        row_mean: row / n,
        floor_mean: plain / n,
        swept_mean: swept / n,
        row_usage: row_usage.per(ops),
        swept_usage: swept_usage.per(ops),
        swept_writes_spread: (spread.1 - spread.0).max(0.0),
    })
}

/// The name of a claim floor with the sweep's removals on the clock.
pub fn swept_name(floor_name: &str, removals: usize) -> String {
    let what = if removals == 1 { "removal" } else { "removals" };
    format!("{floor_name} + {removals} timed {what} (the sweep)")
}

/// The name of a claim floor with the single-fsync create in place of the flushed
/// one.
pub fn single_fsync_name(floor_name: &str) -> String {
    floor_name.replacen("flushed create", "single-fsync create", 1)
}

/// Runs one whole `fencepost` process and returns its output, failing on an
/// unexpected exit code.
fn run_cli(bin: &Path, store: &Path, args: &[&str]) -> R<Output> {
    let out = Command::new(bin)
        .arg("--store")
        .arg(store)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`fencepost {}` exited with {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    Ok(out)
}

/// Copies of the `fencepost` binary `bin` and of this bench binary in `dir`, as
/// `cargo install` places a binary (a plain copy): the CLI rows time these. A file
/// the linker has just written sits in the page cache page by page and costs every
/// process more page faults than the same file once copied
/// (docs/design-07-performance.md, "The CLI's `check`"); both binaries are timed
/// alike, as installed. Returns (fencepost, bench).
pub fn installed(bin: &Path, dir: &Path) -> R<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let fencepost = dir.join(
        bin.file_name()
            .ok_or("the fencepost binary has no file name")?,
    );
    let bench = dir.join(
        std::env::current_exe()?
            .file_name()
            .ok_or("the bench binary has no file name")?,
    );
    std::fs::copy(bin, &fencepost)?;
    std::fs::copy(std::env::current_exe()?, &bench)?;
    Ok((fencepost, bench))
}

/// Spawns the bench binary `exe` doing nothing: the cost of starting any process.
///
/// Started as [`run_cli`] starts `fencepost` (stdin null, stdout and stderr piped
/// and read to the end), so that a CLI row's ratio to this floor is the CLI's own
/// cost, not the pipes': timed with `.status()` (output inherited) the floor left
/// out two pipes and the reads that every CLI row pays.
pub fn spawn_noop(exe: &Path) -> R<Duration> {
    let (out, t) = timed(|| {
        Ok(Command::new(exe)
            .arg("__noop")
            .stdin(Stdio::null())
            .output()?)
    })?;
    if !out.status.success() {
        return Err(format!("the no-op process exited with {}", out.status).into());
    }
    Ok(t)
}

/// The `fencepost check` row: `iters` whole `fencepost --store DIR check --lock NAME
/// TOKEN` processes on a held lease in `store_dir`, each followed by a no-op process
/// (issue 17's target compares the two p50s). Returns the check's summary and the
/// no-op's. Also run alone by `__ops cli-check N DIR`.
pub fn cli_check(
    bin: &Path,
    noop: &Path,
    store_dir: &Path,
    iters: usize,
) -> R<(Summary, Option<Summary>)> {
    let store = Store::new(fencepost_fs::FsStore::open(store_dir)?);
    let lease = store.acquire(&Resource::lock("cli-check"), &options())?;
    let token = lease.token().to_string();
    let mut op = || {
        timed(|| run_cli(bin, store_dir, &["check", "--lock", "cli-check", &token])).map(|(_, t)| t)
    };
    // issue 17: the whole `check` process against a no-op process (the listing and
    // read it adds are microseconds against a process's milliseconds).
    paired(iters, 2, &mut op, Some(&mut || spawn_noop(noop)))
}

/// `fencepost check` and `fencepost claim` + `release` as whole processes.
pub fn cli_rows(
    (bin, noop): (&Path, &Path),
    store_dir: PathBuf,
    kit: &mut FloorKit,
    it: &Iters,
) -> R<Vec<Row>> {
    let group = "CLI process, fs".to_string();
    let mut rows = Vec::new();
    let (summary, _) = paired(it.process, 2, &mut || spawn_noop(noop), None)?;
    rows.push(Row {
        group: group.clone(),
        name: "spawn + wait of a no-op Rust process (floor)".into(),
        summary,
        floor: None,
        floor_one: None,
        floor_swept: None,
        back_to_back: None,
        weather: None,
        target: None,
    });

    let (summary, fl) = cli_check(bin, noop, &store_dir, it.process)?;
    rows.push(Row {
        group: group.clone(),
        name: "`fencepost check`".into(),
        summary,
        floor: fl.map(|f| ("no-op process".into(), f)),
        floor_one: None,
        floor_swept: None,
        back_to_back: None,
        weather: None,
        target: Some(Target::RatioAtMost(1.15)),
    });

    let mut op = || {
        timed(|| {
            let out = run_cli(
                bin,
                &store_dir,
                &["claim", "--lock", "cli-claim", "--ttl", "600000"],
            )?;
            let token = String::from_utf8(out.stdout)?.trim().to_string();
            run_cli(bin, &store_dir, &["release", "--lock", "cli-claim", &token])?;
            Ok(())
        })
        .map(|(_, t)| t)
    };
    let mut floors = |i: usize| {
        Ok(spawn_noop(noop)?
            + spawn_noop(noop)?
            + kit.create_flushed(i == 1)?
            + kit.create(false)?
            + kit.list_read()?)
    };
    let (summary, mut f) = paired_floors(it.process, 2, &mut op, 2, &mut floors)?;
    let (one, fl) = (f.pop().ok_or("no floor")?, f.pop().ok_or("no floor")?);
    let floor_name = "2 no-op processes + flushed create + unflushed create + listing/read";
    rows.push(Row {
        group,
        name: "`fencepost claim` + `fencepost release`".into(),
        summary,
        floor: Some((floor_name.into(), fl)),
        floor_one: Some((single_fsync_name(floor_name), one)),
        floor_swept: None,
        back_to_back: None,
        weather: None,
        target: None,
    });
    Ok(rows)
}

/// The observation after the renew row, worded from what was measured: whether renewals
/// were swept is read off the record count, never assumed.
fn renew_note(group_name: &str, renewals: usize, records: usize) -> String {
    let records_word = if records == 1 { "record" } else { "records" };
    if records <= 2 {
        format!(
            "{group_name}: after {renewals} renewals of one lease its series holds {records} \
             {records_word}: each renewal sweeps the records below it, so a long-held lease \
             costs a reader no more than a fresh one."
        )
    } else {
        format!(
            "{group_name}: after {renewals} renewals of one lease its series holds {records} \
             {records_word}: renewals were not swept, so every later read of that key lists \
             them all."
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{Weather, renew_note};
    use crate::stats::summarize;
    use std::time::Duration;

    /// A miss is the CPU's only when the control saw it slow and the row met the
    /// target in its fastest block or scaled by the control's slowdown; undecided
    /// when every block was slow and neither holds; the code's otherwise.
    #[test]
    fn a_memory_miss_is_put_on_the_cpu_only_with_the_control_s_evidence() {
        let us = |v: u64| Duration::from_micros(v);
        let weather = |slow_blocks: usize, row_fastest: u64, control_p50: u64| Weather {
            blocks: 20,
            per_block: 1000,
            control_per_block: 100,
            row_fastest: us(row_fastest),
            control: summarize(vec![us(control_p50)]),
            reference: us(10),
            reference_blocks: 34,
            slow_blocks,
        };
        let limit = us(4);
        // A steady CPU: the code's.
        assert_eq!(weather(0, 3, 30).verdict(us(6), limit), None);
        // The fastest block met the target.
        let v = weather(5, 3, 16).verdict(us(6), limit).unwrap();
        assert!(
            v.starts_with("the CPU:") && v.contains("fastest block"),
            "{v}"
        );
        // Scaled by the control's 1.6× the row's 6 µs is 3.75 µs.
        let v = weather(18, 5, 16).verdict(us(6), limit).unwrap();
        assert!(v.starts_with("the CPU:") && v.contains("3.75 µs"), "{v}");
        // Slow only in part, over the target even scaled: the code's.
        assert_eq!(weather(18, 5, 11).verdict(us(6), limit), None);
        // Slow in every block and over even scaled: undecided.
        let v = weather(20, 5, 11).verdict(us(6), limit).unwrap();
        assert!(v.starts_with("undecided:"), "{v}");
    }

    #[test]
    fn the_cpu_note_says_what_the_control_saw() {
        let us = |v: u64| Duration::from_micros(v);
        let mut weather = Weather {
            blocks: 20,
            per_block: 1000,
            control_per_block: 100,
            row_fastest: us(3),
            control: summarize(vec![us(7); 10]),
            reference: us(7),
            reference_blocks: 34,
            slow_blocks: 0,
        };
        let steady = weather.note("memory", "acquire + release, cold resource", us(3));
        assert!(steady.contains("within 1.15×"), "{steady}");
        assert!(
            steady.contains("protocol's cost on a steady CPU"),
            "{steady}"
        );
        weather.slow_blocks = 11;
        weather.control = summarize(vec![us(14); 10]);
        let slow = weather.note("memory", "acquire + release, cold resource", us(6));
        assert!(slow.contains("in 11 of the 20 blocks"), "{slow}");
        assert!(slow.contains("(2.00× over the row)"), "{slow}");
        assert!(slow.contains("2.00× its fastest block's"), "{slow}");
        assert!(!slow.contains("steady"), "{slow}");
    }

    #[test]
    fn the_renew_note_says_what_the_record_count_shows() {
        // issue 19: RESULTS.md said "renew never sweeps" next to a count of 1 record.
        let swept = renew_note("fs, flush on", 2020, 1);
        assert!(swept.contains("holds 1 record:"), "{swept}");
        assert!(swept.contains("each renewal sweeps"), "{swept}");
        assert!(!swept.contains("never sweeps"), "{swept}");
        let piled = renew_note("memory", 20, 21);
        assert!(
            piled.contains("holds 21 records: renewals were not swept"),
            "{piled}"
        );
    }
}

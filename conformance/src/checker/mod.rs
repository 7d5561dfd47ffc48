//! The interleaving checker: explores schedules of several actors (holders,
//! waiters, keepalives, a process after a power cut, someone changing files) over
//! a scripted model backend, with every `LeaseStore` call, clock read and sleep a
//! scheduling point, and judges every step with oracles on the oracle's own clock.
//!
//! - A **seed** stands for one schedule: PCT-style actor priorities with random
//!   change points, plus faults and time decisions drawn from the schedule's
//!   [`FaultMix`]. The decisions actually taken are recorded, so a run replays
//!   exactly from its decision list ([`replay`]).
//! - A failing schedule is **shrunk** ([`shrink`]): faults are dropped, time
//!   decisions removed and the list cut, while the same oracle still fails; the
//!   report prints the short decision list and a readable trace.
//! - **Oracles**: never two tenures promised one key at one instant (true time,
//!   promise = stamp + ttl, voided by forward wall-clock steps and release); an
//!   acquire or renewal never acknowledges a lease whose ttl already ran out; a
//!   renewal is never acknowledged when its record landed after the renewed lease
//!   expired; a token fenced by another tenure's record in any series of its
//!   resource never passes `check` or renews again; tokens of successive tenures
//!   strictly increase (across power cuts); at most one `Created` per (key,
//!   generation) while the name exists; a release never writes its tombstone over
//!   another tenure's claim; only a holder of a tenure's secret writes its records
//!   (a wrong or stale secret never renews or releases); a break is final (the
//!   broken tenure never passes `check` or renews again, across power cuts); an
//!   actor never panics.
//!
//! What it explores and what it cannot: docs/interleaving-checker.md.

mod pin;
mod sched;
pub mod schedules;
mod side;
mod world;

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use fencepost::Store;

pub use sched::{Decision, Fault, Point, Rng, decode, encode};
pub use schedules::{SCHEDULES, TTL_MS, schedule};
pub use world::{Ctx, ModelClock, ModelStore, World};
// `CreateProcedure` is defined below, with `FaultMix`.

use sched::{Killed, Sched, Status, set_current_actor};

/// True time (ms since the epoch) at which every run starts.
pub(crate) const START_MS: u64 = 1_800_000_000_000;

/// Environment variable: how many seeds each schedule explores (default in the
/// test that reads it).
pub const SCHEDULES_ENV: &str = "FENCEPOST_SCHEDULES";

/// What a schedule's actors get to set up: a fresh directory for file resources.
#[derive(Debug)]
pub struct Setup {
    /// An empty directory, removed after the run.
    pub dir: PathBuf,
}

type Body = Box<dyn FnOnce(&Ctx) + Send>;

/// One actor: a thread running `body` with the protocol.
pub struct Actor {
    name: String,
    late: bool,
    body: Body,
}

impl fmt::Debug for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Actor").field("name", &self.name).finish()
    }
}

impl Actor {
    /// An actor that runs from the start.
    pub fn new(name: &str, body: impl FnOnce(&Ctx) + Send + 'static) -> Self {
        Actor {
            name: name.into(),
            late: false,
            body: Box::new(body),
        }
    }

    /// An actor that starts only once every other actor finished or after a power
    /// cut: a fresh process.
    pub fn late(name: &str, body: impl FnOnce(&Ctx) + Send + 'static) -> Self {
        Actor {
            late: true,
            ..Actor::new(name, body)
        }
    }
}

/// How often (per mille of decisions or calls) each fault and time decision is
/// drawn while exploring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultMix {
    /// A create stays in flight while others act.
    pub slow: u32,
    /// A list, read or remove stalls before it happens (time passes inside it).
    pub stall: u32,
    /// A create is visible half written, completed later.
    pub half_written: u32,
    /// A create fails before landing.
    pub create_error: u32,
    /// A create lands, then reports an error.
    pub error_after_landing: u32,
    /// A list, read or remove fails.
    pub io_error: u32,
    /// The actor dies at this point.
    pub crash: u32,
    /// True time passes before the next step (a pause).
    pub advance: u32,
    /// The wall clock steps (either way).
    pub step_wall: u32,
    /// Runs with a power cut (at most one per run, at a random step).
    pub power_cut: u32,
    /// How the model backend's flushed creates reach the disk: in one step, or step
    /// by step as a real backend orders its writes, links and flushes, so a power
    /// cut can fall between them.
    pub procedure: CreateProcedure,
    /// Whether the model backend offers change notifications: waiters then sleep on
    /// a watch of the key (`LeaseStore::watch_changes`) instead of a backoff.
    pub notify: bool,
    /// 0: the sweep's removals are made before `remove_superseded` returns. Above
    /// 0, the model backend defers them as the fs backend's removal thread does:
    /// the record is hidden from its own actor at once, and stays for everyone else
    /// until it lands at a later point of that actor — each chance to land passed
    /// up with this per mille — or never, if the actor dies or the power is cut.
    pub defer: u32,
}

/// How a flushed create reaches the disk in the model backend, with POSIX power-cut
/// semantics: a name survives only once its directory was flushed (by anyone), its
/// bytes only once its file was flushed. docs/design-07-performance.md argues which
/// flushes the fs backend needs; the `power_cut_*` schedules pin each procedure it
/// uses, and the planted ones must be caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateProcedure {
    /// The contract's abstraction: the record lands durable in one step.
    Atomic,
    /// Write a nameless (`O_TMPFILE`) or staging file, link it into place, flush the
    /// file, flush the directory, acknowledge: the fs backend on POSIX.
    LinkThenFlush,
    /// Write and flush a staging file, link it into place, flush the directory,
    /// acknowledge: the fs backend on Windows (and on POSIX before issue 17).
    FlushThenLink,
    /// Create the record name, write it, flush the file, flush the directory: the fs
    /// backend's fallback without hard links.
    InPlace,
    /// Planted: link, flush the file, acknowledge — the directory flush left out (the
    /// single-fsync floor as a procedure). POSIX may lose the name.
    PlantedNoDirFlush,
    /// Planted: link, flush the directory, acknowledge — the file flush left out. The
    /// name survives with its data lost.
    PlantedNoFileFlush,
}

/// One step of a [`CreateProcedure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcedureStep {
    /// The record name appears (exclusively), with its bytes or still empty.
    Name { complete: bool },
    /// The bytes are written to the named record.
    Write,
    /// The record's file is flushed.
    FlushFile,
    /// The key's directory is flushed.
    FlushDir,
}

impl CreateProcedure {
    pub(crate) fn steps(self) -> &'static [ProcedureStep] {
        use ProcedureStep::*;
        match self {
            CreateProcedure::Atomic => &[Name { complete: true }, FlushFile, FlushDir],
            CreateProcedure::LinkThenFlush => &[Name { complete: true }, FlushFile, FlushDir],
            CreateProcedure::FlushThenLink => &[FlushFile, Name { complete: true }, FlushDir],
            CreateProcedure::InPlace => &[Name { complete: false }, Write, FlushFile, FlushDir],
            CreateProcedure::PlantedNoDirFlush => &[Name { complete: true }, FlushFile],
            CreateProcedure::PlantedNoFileFlush => &[Name { complete: true }, FlushDir],
        }
    }
}

impl FaultMix {
    /// No faults, no time decisions.
    pub const NONE: FaultMix = FaultMix {
        slow: 0,
        stall: 0,
        half_written: 0,
        create_error: 0,
        error_after_landing: 0,
        io_error: 0,
        crash: 0,
        advance: 0,
        step_wall: 0,
        power_cut: 0,
        procedure: CreateProcedure::Atomic,
        notify: false,
        defer: 0,
    };

    /// A little of everything.
    pub const EVERYTHING: FaultMix = FaultMix {
        slow: 60,
        stall: 20,
        half_written: 60,
        create_error: 15,
        error_after_landing: 15,
        io_error: 10,
        crash: 4,
        advance: 50,
        step_wall: 8,
        power_cut: 150,
        procedure: CreateProcedure::Atomic,
        notify: false,
        defer: 0,
    };

    fn roll(&self, point: Point, rng: &mut Rng) -> Fault {
        for fault in point.faults() {
            let p = match fault {
                Fault::Slow if point == Point::Create => self.slow,
                Fault::Slow if point == Point::Deferred => self.defer,
                Fault::Slow => self.stall,
                Fault::HalfWritten => self.half_written,
                Fault::ErrBefore if point == Point::Create => self.create_error,
                Fault::ErrBefore => self.io_error,
                Fault::ErrAfter => self.error_after_landing,
                Fault::Crash => self.crash,
                Fault::None => 0,
            };
            if p > 0 && rng.chance(p) {
                return *fault;
            }
        }
        Fault::None
    }
}

/// A named set of actors plus the faults to inject (see [`SCHEDULES`]).
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// Short name, used to replay.
    pub name: &'static str,
    /// One line: what it exercises.
    pub about: &'static str,
    /// Whether the model backend's listing is a snapshot (false: a cursor scan in
    /// hash order, with the backend saying so).
    pub snapshot_listing: bool,
    /// Faults and time decisions while exploring.
    pub mix: FaultMix,
    /// Decisions after which a run is cut short (a livelock is not a violation).
    pub max_steps: usize,
    /// How long a slow or half-written create stays in flight (true ms).
    pub inflight_ms: u64,
    /// The actors, built fresh for every run.
    pub actors: fn(&Setup) -> Vec<Actor>,
}

/// The result of one run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The decisions taken (replaying them reproduces the run).
    pub decisions: Vec<Decision>,
    /// What happened, one line per call and decision.
    pub trace: Vec<String>,
    /// The first oracle violation, if any.
    pub violation: Option<String>,
}

enum Chooser<'a> {
    Explore {
        rng: Rng,
        priorities: Vec<u64>,
        changes: Vec<usize>,
        cut: Option<usize>,
    },
    Replay(&'a [Decision]),
}

impl Chooser<'_> {
    fn explore(seed: u64, actors: usize, mix: &FaultMix) -> Self {
        let mut rng = Rng::new(seed);
        let priorities = (0..actors).map(|_| rng.next_u64() >> 8).collect();
        let changes = (0..3).map(|_| rng.below(250) as usize).collect();
        // A power cut, if any, at one step drawn up front: uniform over the
        // interesting part of a run rather than almost always in its first steps.
        let cut =
            (mix.power_cut > 0 && rng.chance(mix.power_cut)).then(|| 10 + rng.below(200) as usize);
        Chooser::Explore {
            rng,
            priorities,
            changes,
            cut,
        }
    }

    fn next(&mut self, step: usize, runnable: &[(usize, Point)], mix: &FaultMix) -> Decision {
        let default = Decision::Run(runnable[0].0, Fault::None);
        match self {
            Chooser::Replay(decisions) => decisions.get(step).copied().unwrap_or(default),
            Chooser::Explore {
                rng,
                priorities,
                changes,
                cut,
            } => {
                if mix.advance > 0 && rng.chance(mix.advance) {
                    let ms = [1, TTL_MS / 10, TTL_MS / 3, TTL_MS / 2, TTL_MS, 2 * TTL_MS];
                    return Decision::Advance(ms[rng.below(ms.len() as u64) as usize]);
                }
                if mix.step_wall > 0 && rng.chance(mix.step_wall) {
                    let ms = [TTL_MS / 2, TTL_MS, 10 * TTL_MS][rng.below(3) as usize] as i64;
                    return Decision::StepWall(if rng.below(2) == 0 { ms } else { -ms });
                }
                if *cut == Some(step) {
                    *cut = None;
                    return Decision::PowerCut;
                }
                let top = *runnable
                    .iter()
                    .max_by_key(|(a, _)| priorities[*a])
                    .expect("runnable is not empty");
                if changes.contains(&step) {
                    // A PCT change point: the highest-priority actor drops below all.
                    priorities[top.0] = rng.below(64);
                }
                let (actor, point) = if rng.chance(80) {
                    runnable[rng.below(runnable.len() as u64) as usize]
                } else {
                    *runnable
                        .iter()
                        .max_by_key(|(a, _)| priorities[*a])
                        .expect("runnable is not empty")
                };
                Decision::Run(actor, mix.roll(point, rng))
            }
        }
    }
}

/// Runs `schedule` once with the decisions of `seed`.
pub fn run_seed(schedule: &Schedule, seed: u64) -> Outcome {
    run(schedule, None, seed)
}

/// Replays `decisions` (the decision list of an [`Outcome`], or one printed by a
/// report); past its end, the lowest-numbered runnable actor runs without faults.
pub fn replay(schedule: &Schedule, decisions: &[Decision]) -> Outcome {
    run(schedule, Some(decisions), 0)
}

fn run(schedule: &Schedule, decisions: Option<&[Decision]>, seed: u64) -> Outcome {
    if pin::current().is_some() {
        return run_here(schedule, decisions, seed);
    }
    // A caller outside `explore` (a kept seed, a replay, a shrink): the run moves to
    // a thread of its own, pinned like an exploring worker, CPUs taken in turn.
    static NEXT_CPU: AtomicUsize = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let runner = scope.spawn(|| {
            pin::pin_to_nth_cpu(NEXT_CPU.fetch_add(1, Ordering::Relaxed));
            run_here(schedule, decisions, seed)
        });
        runner
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

fn run_here(schedule: &Schedule, decisions: Option<&[Decision]>, seed: u64) -> Outcome {
    let dir = tempfile::tempdir().expect("a scratch directory for the checker");
    let setup = Setup {
        dir: dir
            .path()
            .canonicalize()
            .unwrap_or_else(|_| dir.path().into()),
    };
    let actors = (schedule.actors)(&setup);
    let names: Vec<String> = actors.iter().map(|a| a.name.clone()).collect();
    let late: Vec<bool> = actors.iter().map(|a| a.late).collect();
    let world = Arc::new(World::new(
        names,
        &late,
        schedule.snapshot_listing,
        schedule.inflight_ms,
        schedule.mix.procedure,
        schedule.mix.notify,
        schedule.mix.defer > 0,
    ));
    let store = Store::from_parts(
        Arc::new(ModelStore(Arc::clone(&world))),
        Arc::new(ModelClock(Arc::clone(&world))),
    );
    let mut chooser = match decisions {
        Some(d) => Chooser::Replay(d),
        None => Chooser::explore(seed, actors.len(), &schedule.mix),
    };
    let mut taken = Vec::new();
    let cpu = pin::current();
    std::thread::scope(|scope| {
        for (i, actor) in actors.into_iter().enumerate() {
            let ctx = Ctx {
                store: store.clone(),
                world: Arc::clone(&world),
                name: actor.name,
            };
            let body = actor.body;
            std::thread::Builder::new()
                .name(format!("checker-{}", ctx.name))
                .spawn_scoped(scope, move || {
                    pin::follow(cpu);
                    set_current_actor(i);
                    let outcome = catch_unwind(AssertUnwindSafe(|| {
                        ctx.world.sched.arrive();
                        body(&ctx);
                        // The process exits: its handle drains the removal thread.
                        ctx.world.drain_deferred();
                    }));
                    let crashed = match outcome {
                        Ok(()) => false,
                        Err(payload) if payload.is::<Killed>() => true,
                        Err(payload) => {
                            let message = payload
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default();
                            ctx.world
                                .violate(format!("{} panicked: {message}", ctx.name));
                            true
                        }
                    };
                    if crashed {
                        ctx.world.drop_deferred(i);
                    } else {
                        ctx.world.check_ring_due("finish");
                    }
                    ctx.world.sched.finish(i, crashed);
                })
                .expect("spawning a checker actor");
        }
        control(&world, schedule, &mut chooser, &mut taken);
    });
    let violation = world
        .oracle
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .violation
        .clone();
    Outcome {
        decisions: taken,
        trace: world.take_trace(),
        violation,
    }
}

fn control(world: &World, schedule: &Schedule, chooser: &mut Chooser, taken: &mut Vec<Decision>) {
    let sched: &Sched = &world.sched;
    loop {
        let mut st = sched.quiescent();
        world.set_step(taken.len() as u64);
        if world.violated() {
            drop(st);
            sched.kill_everyone();
            return;
        }
        let unfinished = |s: &Status| matches!(s, Status::Waiting(_) | Status::Running);
        if !st.status.iter().any(unfinished) {
            if st.status.contains(&Status::Held) {
                Sched::release_late(&mut st);
                continue;
            }
            return;
        }
        if taken.len() >= schedule.max_steps {
            drop(st);
            world.log_controller("step budget exhausted; the run is cut short");
            sched.kill_everyone();
            return;
        }
        let now = st.now;
        let runnable: Vec<(usize, Point)> = st
            .status
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Status::Waiting(p) if Sched::not_before(*p) <= now => Some((i, *p)),
                _ => None,
            })
            .collect();
        if runnable.is_empty() {
            // Everyone sleeps: time jumps to the earliest wake-up.
            let wake = st
                .status
                .iter()
                .filter_map(|s| match s {
                    Status::Waiting(p) => Some(Sched::not_before(*p)),
                    _ => None,
                })
                .min()
                .unwrap_or(now + 1);
            st.now = wake;
            continue;
        }
        let decision = match chooser.next(taken.len(), &runnable, &schedule.mix) {
            Decision::Run(actor, fault) => match runnable.iter().find(|(a, _)| *a == actor) {
                Some((_, point)) if fault == Fault::None || point.faults().contains(&fault) => {
                    Decision::Run(actor, fault)
                }
                Some(_) => Decision::Run(actor, Fault::None),
                None => Decision::Run(runnable[0].0, Fault::None),
            },
            other => other,
        };
        taken.push(decision);
        match decision {
            Decision::Run(actor, fault) => sched.run(st, actor, fault),
            Decision::Advance(ms) => {
                st.now += ms;
                drop(st);
                world.log_controller(format!("{ms}ms pass"));
            }
            Decision::StepWall(ms) => {
                st.wall_offset += ms;
                drop(st);
                world.log_controller(format!("the wall clock steps {ms:+}ms"));
                world.wall_step();
                if ms > 0 {
                    world.forward_step();
                }
            }
            Decision::PowerCut => {
                drop(st);
                let dropped = world.power_cut();
                world.log_controller(format!(
                    "POWER CUT: {dropped} unflushed record(s) lost, every running process dies"
                ));
                kill_started(sched);
                let mut st = sched.quiescent();
                Sched::release_late(&mut st);
            }
        }
    }
}

/// Kills every started actor (a power cut), leaving the late ones.
fn kill_started(sched: &Sched) {
    loop {
        let st = sched.quiescent();
        let Some(victim) = st
            .status
            .iter()
            .position(|s| matches!(s, Status::Waiting(_)))
        else {
            return;
        };
        sched.run(st, victim, Fault::Crash);
    }
}

/// A failing schedule, shrunk.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The schedule's name.
    pub schedule: &'static str,
    /// The seed that found it.
    pub seed: u64,
    /// How many decisions the original run took.
    pub original_decisions: usize,
    /// The shrunk run (replays to the same violation).
    pub shrunk: Outcome,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "schedule `{}`, seed {}: {}",
            self.schedule,
            self.seed,
            self.shrunk.violation.as_deref().unwrap_or("?")
        )?;
        writeln!(
            f,
            "shrunk from {} to {} decisions; replay with\n  {}='{}: {}' cargo test -p fencepost-conformance --test interleave replay",
            self.original_decisions,
            self.shrunk.decisions.len(),
            REPLAY_ENV,
            self.schedule,
            encode(&self.shrunk.decisions)
        )?;
        writeln!(f, "trace (true time since start, actor, what happened):")?;
        for line in &self.shrunk.trace {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// Environment variable holding `schedule: decisions` to replay one run.
pub const REPLAY_ENV: &str = "FENCEPOST_CHECK_REPLAY";

/// The category of a violation (its text without numbers), so shrinking keeps the
/// same kind of failure.
fn category(violation: &str) -> String {
    let text = violation
        .split_once(": ")
        .map_or(violation, |(_, rest)| rest);
    text.chars()
        .filter(|c| !c.is_ascii_digit())
        .take(40)
        .collect()
}

/// Shrinks a failing run: drops faults and time decisions and cuts the list while
/// the same kind of violation still occurs, within `budget` replays.
pub fn shrink(schedule: &Schedule, failing: Outcome, mut budget: usize) -> Outcome {
    let Some(kind) = failing.violation.as_deref().map(category) else {
        return failing;
    };
    let mut best = failing;
    let attempt = |candidate: Vec<Decision>, best: &mut Outcome, budget: &mut usize| {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let outcome = replay(schedule, &candidate);
        let same = outcome.violation.as_deref().map(category).as_ref() == Some(&kind);
        if same && outcome.decisions.len() <= best.decisions.len() {
            *best = outcome;
            true
        } else {
            false
        }
    };
    // Drop faults, time passing and clock steps one at a time.
    let mut i = 0;
    while i < best.decisions.len() {
        let mut candidate = best.decisions.clone();
        let changed = match candidate[i] {
            Decision::Run(actor, fault) if fault != Fault::None => {
                candidate[i] = Decision::Run(actor, Fault::None);
                true
            }
            Decision::Advance(_) | Decision::StepWall(_) | Decision::PowerCut => {
                candidate.remove(i);
                true
            }
            _ => false,
        };
        if !(changed && attempt(candidate, &mut best, &mut budget)) {
            i += 1;
        }
    }
    // Fewer context switches: let the previous actor keep running instead.
    let mut i = 1;
    while i < best.decisions.len() {
        if let (Decision::Run(prev, _), Decision::Run(actor, fault)) =
            (best.decisions[i - 1], best.decisions[i])
            && prev != actor
        {
            let mut candidate = best.decisions.clone();
            candidate[i] = Decision::Run(prev, fault);
            attempt(candidate, &mut best, &mut budget);
        }
        i += 1;
    }
    // Remove chunks of actor steps, halving the chunk size.
    let mut chunk = best.decisions.len() / 2;
    while chunk > 0 {
        let mut start = 0;
        while start + chunk <= best.decisions.len() {
            let mut candidate = best.decisions.clone();
            candidate.drain(start..start + chunk);
            if !attempt(candidate, &mut best, &mut budget) {
                start += chunk;
            }
        }
        chunk /= 2;
    }
    best
}

/// What an exploration did.
#[derive(Debug, Clone, Copy)]
pub struct Explored {
    /// Schedules run.
    pub schedules: u64,
    /// Decisions taken over all of them.
    pub decisions: u64,
    /// Wall time spent, in seconds.
    pub seconds: f64,
}

/// Runs `schedule` for every seed in `seeds`; the violation of the lowest failing
/// seed is shrunk and returned.
///
/// Seeds run on [`explore_workers`] threads at once, each taking the next
/// unexplored seed; a seed above a known failure is not started. Every seed below
/// the lowest failure has therefore run, so the failure reported is the one a
/// one-at-a-time search finds (pinned by the planted-bug tests' kept seeds).
///
/// # Errors
///
/// The shrunk [`Failure`] of the lowest seed whose run violated an oracle.
pub fn explore(schedule: &Schedule, seeds: std::ops::Range<u64>) -> Result<Explored, Box<Failure>> {
    let started = Instant::now();
    let next = AtomicU64::new(seeds.start);
    let lowest_failing = AtomicU64::new(u64::MAX);
    let failed: Mutex<Option<(u64, Outcome)>> = Mutex::new(None);
    let counts = Mutex::new((0u64, 0u64));
    std::thread::scope(|scope| {
        for worker in 0..explore_workers() {
            let (next, lowest_failing, failed, counts) = (&next, &lowest_failing, &failed, &counts);
            let seeds = &seeds;
            scope.spawn(move || {
                pin::pin_to_nth_cpu(worker);
                let (mut schedules, mut decisions) = (0, 0);
                loop {
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if seed >= seeds.end || seed > lowest_failing.load(Ordering::SeqCst) {
                        break;
                    }
                    let outcome = run_seed(schedule, seed);
                    schedules += 1;
                    decisions += outcome.decisions.len() as u64;
                    if outcome.violation.is_some() {
                        lowest_failing.fetch_min(seed, Ordering::SeqCst);
                        let mut failed = failed.lock().unwrap_or_else(|e| e.into_inner());
                        if failed.as_ref().is_none_or(|(lowest, _)| seed < *lowest) {
                            *failed = Some((seed, outcome));
                        }
                    }
                }
                let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
                counts.0 += schedules;
                counts.1 += decisions;
            });
        }
    });
    if let Some((seed, outcome)) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        let original_decisions = outcome.decisions.len();
        let shrunk = shrink(schedule, outcome, 300);
        return Err(Box::new(Failure {
            schedule: schedule.name,
            seed,
            original_decisions,
            shrunk,
        }));
    }
    let (schedules, decisions) = counts.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(Explored {
        schedules,
        decisions,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// How many seeds [`explore`] runs at once: one per available core, at most four
/// (each run is a handful of threads of which one moves at a time), and
/// `FENCEPOST_CHECK_WORKERS` when set (1 gives the one-at-a-time search).
pub fn explore_workers() -> usize {
    std::env::var(WORKERS_ENV)
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)))
}

/// The variable that sets [`explore_workers`].
pub const WORKERS_ENV: &str = "FENCEPOST_CHECK_WORKERS";

//! The deterministic scheduler: actors are real threads, and exactly one runs at a
//! time. Every backend call, clock read and sleep is a *scheduling point* where the
//! running actor hands the baton back to the controller, which decides who runs
//! next (and which fault, if any, the chosen actor's pending call suffers).

use std::cell::Cell;
use std::sync::{Condvar, Mutex, MutexGuard};

/// A fault the controller attaches to the call an actor is about to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// No fault.
    None,
    /// A create that stays in flight (invisible) while others act, then lands; a
    /// list, read or remove that stalls that long before it happens.
    Slow,
    /// A create whose name is reserved at once with half of its bytes (readers see
    /// it torn), completed later.
    HalfWritten,
    /// The call fails and nothing happens.
    ErrBefore,
    /// A create lands, then reports an error (outcome unknown, docs/protocol.md I4).
    ErrAfter,
    /// The actor dies here (a crash or kill inside the call).
    Crash,
}

impl Fault {
    fn letter(self) -> &'static str {
        match self {
            Fault::None => "",
            Fault::Slow => "s",
            Fault::HalfWritten => "h",
            Fault::ErrBefore => "e",
            Fault::ErrAfter => "a",
            Fault::Crash => "x",
        }
    }
}

/// What an actor is about to do at a scheduling point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Not started yet (its first point).
    Start,
    /// `LeaseStore::create`.
    Create,
    /// The completion of a slow or half-written create, runnable once true time
    /// reached this (the create takes that long, while others act).
    Landing(u64),
    /// `LeaseStore::generations` (start of the listing).
    List,
    /// One more entry of a cursor-scan listing.
    ListCursor,
    /// `LeaseStore::read`.
    Read,
    /// `LeaseStore::remove`.
    Remove,
    /// `LeaseStore::keys`.
    Keys,
    /// A removal deferred by `remove_superseded` may land now, before its actor's
    /// next call (`Slow`: not yet; `ErrBefore`: it fails and is dropped).
    Deferred,
    /// A clock read.
    Clock,
    /// A sleep until this true time (ms); runnable only once time got there.
    Sleep(u64),
    /// A change to the world outside the store (file created, linked, renamed).
    Env,
}

impl Point {
    /// The faults that make sense at this point.
    pub fn faults(self) -> &'static [Fault] {
        match self {
            Point::Create => &[
                Fault::Slow,
                Fault::HalfWritten,
                Fault::ErrBefore,
                Fault::ErrAfter,
                Fault::Crash,
            ],
            Point::Deferred => &[Fault::Slow, Fault::ErrBefore],
            Point::List | Point::Read | Point::Remove => {
                &[Fault::Slow, Fault::ErrBefore, Fault::Crash]
            }
            Point::Landing(_) | Point::ListCursor | Point::Clock | Point::Sleep(_) => {
                &[Fault::Crash]
            }
            Point::Start | Point::Keys | Point::Env => &[],
        }
    }
}

/// One decision of a schedule. A schedule is the list of decisions taken; replaying
/// the same list reproduces the same run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Let this actor run to its next point, with a fault for its pending call.
    Run(usize, Fault),
    /// Let true time pass (ms) before anyone runs: a pause, a slow machine.
    Advance(u64),
    /// Step the shared wall clock (ms, either way); monotonic time is unaffected.
    StepWall(i64),
    /// A power cut: unflushed records are lost and every running actor dies.
    PowerCut,
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decision::Run(actor, fault) => write!(f, "{actor}{}", fault.letter()),
            Decision::Advance(ms) => write!(f, "+{ms}"),
            Decision::StepWall(ms) => write!(f, "w{ms}"),
            Decision::PowerCut => write!(f, "P"),
        }
    }
}

/// Parses the compact form printed by [`encode`].
pub fn decode(text: &str) -> Option<Vec<Decision>> {
    text.split_whitespace()
        .map(|word| {
            if let Some(ms) = word.strip_prefix('+') {
                return ms.parse().ok().map(Decision::Advance);
            }
            if let Some(ms) = word.strip_prefix('w') {
                return ms.parse().ok().map(Decision::StepWall);
            }
            if word == "P" {
                return Some(Decision::PowerCut);
            }
            let digits: String = word.chars().take_while(char::is_ascii_digit).collect();
            let actor = digits.parse().ok()?;
            let fault = match &word[digits.len()..] {
                "" => Fault::None,
                "s" => Fault::Slow,
                "h" => Fault::HalfWritten,
                "e" => Fault::ErrBefore,
                "a" => Fault::ErrAfter,
                "x" => Fault::Crash,
                _ => return None,
            };
            Some(Decision::Run(actor, fault))
        })
        .collect()
}

/// The compact, replayable form of a schedule: decisions separated by spaces.
pub fn encode(decisions: &[Decision]) -> String {
    decisions
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Where an actor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// The thread has not reached its first point yet (true: a late actor).
    Arriving(bool),
    /// A late actor, not released yet.
    Held,
    /// Waiting at a point for the baton.
    Waiting(Point),
    /// Holding the baton.
    Running,
    /// Finished its body.
    Done,
    /// Died (a crash fault, a power cut, or the run was aborted).
    Crashed,
}

/// The payload of the unwind that kills an actor.
pub(crate) struct Killed;

thread_local! {
    static ACTOR: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The actor this thread is, if it is one.
pub(crate) fn current_actor() -> Option<usize> {
    ACTOR.with(Cell::get)
}

pub(crate) fn set_current_actor(actor: usize) {
    ACTOR.with(|a| a.set(Some(actor)));
}

#[derive(Debug)]
pub(crate) struct SchedState {
    pub(crate) status: Vec<Status>,
    directive: Vec<Fault>,
    pub(crate) running: Option<usize>,
    /// Every waiting actor dies at its next point (power cut, abort).
    kill_all: bool,
    /// True time in ms.
    pub(crate) now: u64,
    /// Shared wall clock = now + offset.
    pub(crate) wall_offset: i64,
}

#[derive(Debug)]
pub(crate) struct Sched {
    state: Mutex<SchedState>,
    /// One condition variable per actor, rung only when that actor is handed the
    /// baton, and one for the controller: a handoff wakes exactly the thread that
    /// runs next. (One shared variable woke every actor at every step; the
    /// checker's time went to the kernel.)
    actor_cv: Vec<Condvar>,
    controller_cv: Condvar,
}

impl Sched {
    pub(crate) fn new(actors: &[bool], start_ms: u64) -> Self {
        Sched {
            state: Mutex::new(SchedState {
                status: actors.iter().map(|late| Status::Arriving(*late)).collect(),
                directive: vec![Fault::None; actors.len()],
                running: None,
                kill_all: false,
                now: start_ms,
                wall_offset: 0,
            }),
            actor_cv: actors.iter().map(|_| Condvar::new()).collect(),
            controller_cv: Condvar::new(),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, SchedState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Called by an actor thread: hand the baton back and wait to be chosen. Returns
    /// the fault for the call about to be made; unwinds the thread if it must die.
    pub(crate) fn point(&self, point: Point) -> Fault {
        let Some(me) = current_actor() else {
            return Fault::None;
        };
        let mut st = self.lock();
        st.status[me] = Status::Waiting(point);
        st.running = None;
        self.controller_cv.notify_one();
        self.wait_for_baton(st, me)
    }

    /// Called by an actor thread first: wait to be started.
    pub(crate) fn arrive(&self) {
        let Some(me) = current_actor() else {
            return;
        };
        let mut st = self.lock();
        st.status[me] = match st.status[me] {
            Status::Arriving(true) => Status::Held,
            _ => Status::Waiting(Point::Start),
        };
        self.controller_cv.notify_one();
        self.wait_for_baton(st, me);
    }

    fn wait_for_baton(&self, mut st: MutexGuard<'_, SchedState>, me: usize) -> Fault {
        while st.running != Some(me) {
            st = self.actor_cv[me]
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
        st.status[me] = Status::Running;
        let fault = std::mem::replace(&mut st.directive[me], Fault::None);
        if fault == Fault::Crash || st.kill_all {
            drop(st);
            std::panic::resume_unwind(Box::new(Killed));
        }
        fault
    }

    /// Called by an actor thread when its body ended (normally or by unwinding).
    pub(crate) fn finish(&self, me: usize, crashed: bool) {
        let mut st = self.lock();
        st.status[me] = if crashed {
            Status::Crashed
        } else {
            Status::Done
        };
        st.running = None;
        self.controller_cv.notify_one();
    }

    /// Controller: waits until no actor holds the baton.
    pub(crate) fn quiescent(&self) -> MutexGuard<'_, SchedState> {
        let mut st = self.lock();
        while st.running.is_some() || st.status.iter().any(|s| matches!(s, Status::Arriving(_))) {
            st = self
                .controller_cv
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
        st
    }

    /// Controller: hands the baton to `actor` with `fault`.
    pub(crate) fn run(&self, mut st: MutexGuard<'_, SchedState>, actor: usize, fault: Fault) {
        st.directive[actor] = fault;
        st.running = Some(actor);
        st.status[actor] = Status::Running;
        drop(st);
        self.actor_cv[actor].notify_one();
    }

    /// Controller: kills every actor that has not finished, one at a time.
    pub(crate) fn kill_everyone(&self) {
        loop {
            let mut st = self.quiescent();
            st.kill_all = true;
            let victim = st
                .status
                .iter()
                .position(|s| matches!(s, Status::Waiting(_) | Status::Held));
            let Some(victim) = victim else {
                st.kill_all = false;
                return;
            };
            if st.status[victim] == Status::Held {
                st.status[victim] = Status::Waiting(Point::Start);
            }
            self.run(st, victim, Fault::Crash);
        }
    }

    /// Controller: releases the late actors (after the others finished, or after a
    /// power cut).
    /// The true time before which an actor waiting at `point` cannot run.
    pub(crate) fn not_before(point: Point) -> u64 {
        match point {
            Point::Sleep(until) | Point::Landing(until) => until,
            _ => 0,
        }
    }

    pub(crate) fn release_late(st: &mut SchedState) {
        for s in &mut st.status {
            if *s == Status::Held {
                *s = Status::Waiting(Point::Start);
            }
        }
    }
}

/// A deterministic generator (xorshift64*): a seed is a whole schedule.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03 | 1)
    }
    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform below `n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// True with probability `per_mille`/1000.
    pub fn chance(&mut self, per_mille: u32) -> bool {
        self.below(1000) < u64::from(per_mille)
    }
}

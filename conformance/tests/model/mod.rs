//! A seeded, reproducible explorer of the protocol over the memory backend.
//!
//! N holders, each with its own manual clock (true time plus a per-holder offset),
//! run random interleavings of acquire / check / renew / release / crash / time
//! passing / clock steps / torn writes / failed-after-landing creates / power cuts.
//! After every step the oracle checks docs/protocol.md §3:
//! - at most one holder's token passes `check` at any instant;
//! - tokens issued strictly increase (I2);
//! - a superseded token never passes `check` again (I3);
//! - the fence (highest token in the series) never goes down (I2, release);
//! - a takeover only happens when the previous newest record was not live by the
//!   taker's own clock under the docs/protocol.md §3.3 liveness rule (computed here, independently
//!   of the implementation).
//!
//! A failure is shrunk by dropping steps while it still fails, and printed as the
//! seed plus the remaining history, which [`replay`] runs again.

use fencepost::record::{Decoded, decode};
use fencepost::{
    AcquireOptions, Clock, Error, Lease, LeaseStore, ManualClock, Resource, Store, TryAcquire,
};
use fencepost_memory::{Fault, MemoryStore};

const TTL_MS: u64 = 1_000;
const START_MS: u64 = 1_800_000_000_000;
const HOLDERS: usize = 3;
/// Clock offsets stay within two hours either way.
const MAX_OFFSET_MS: i64 = 7_200_000;

/// One step of a history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Acquire(usize),
    Check(usize),
    Renew(usize),
    Release(usize),
    Crash(usize),
    Advance(u64),
    StepClock(usize, i64),
    Torn,
    FailAfterLanding,
    PowerCut,
}

/// A deterministic generator (xorshift64*), so a seed is a whole history.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The history a seed stands for.
pub fn generate(seed: u64, steps: usize) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    (0..steps)
        .map(|_| {
            let h = rng.below(HOLDERS as u64) as usize;
            match rng.below(100) {
                0..=24 => Op::Acquire(h),
                25..=39 => Op::Check(h),
                40..=51 => Op::Renew(h),
                52..=63 => Op::Release(h),
                64..=67 => Op::Crash(h),
                68..=82 => Op::Advance([1, TTL_MS / 3, TTL_MS, 2 * TTL_MS][rng.below(4) as usize]),
                83..=89 => {
                    let magnitude =
                        [TTL_MS as i64 / 2, 10 * TTL_MS as i64, 3_600_000][rng.below(3) as usize];
                    Op::StepClock(
                        h,
                        if rng.below(2) == 0 {
                            magnitude
                        } else {
                            -magnitude
                        },
                    )
                }
                90..=92 => Op::Torn,
                93..=95 => Op::FailAfterLanding,
                _ => Op::PowerCut,
            }
        })
        .collect()
}

struct Holder {
    clock: ManualClock,
    offset_ms: i64,
    store: Store,
    lease: Option<Lease>,
}

struct World {
    backend: MemoryStore,
    observer_clock: ManualClock,
    observer: Store,
    holders: Vec<Holder>,
    lock: Resource,
    key: fencepost::Key,
    true_ms: u64,
    max_issued: u64,
    recent_superseded: Vec<u64>,
    fence: u64,
}

impl World {
    fn new() -> Self {
        let backend = MemoryStore::new();
        let observer_clock = ManualClock::new(START_MS);
        let lock = Resource::lock("model");
        let key = lock.identity().expect("valid lock").key;
        let holders = (0..HOLDERS)
            .map(|_| {
                let clock = ManualClock::new(START_MS);
                Holder {
                    store: Store::with_clock(backend.clone(), clock.clone()),
                    clock,
                    offset_ms: 0,
                    lease: None,
                }
            })
            .collect();
        World {
            observer: Store::with_clock(backend.clone(), observer_clock.clone()),
            backend,
            observer_clock,
            holders,
            lock,
            key,
            true_ms: START_MS,
            max_issued: 0,
            recent_superseded: Vec::new(),
            fence: 0,
        }
    }

    fn holder_now(&self, h: usize) -> u64 {
        (self.true_ms as i64 + self.holders[h].offset_ms) as u64
    }

    /// The newest record as the backend holds it, decoded.
    fn newest(&self) -> Option<Decoded> {
        let newest = self
            .backend
            .generations(&self.key)
            .ok()?
            .into_iter()
            .max()?;
        let bytes = self.backend.read(&self.key, newest).ok()??;
        Some(decode(&bytes, self.key.as_str(), newest))
    }

    fn check(&self, store: &Store, token: u64) -> Result<bool, String> {
        store
            .check(&self.lock, token)
            .map_err(|e| format!("check failed: {e}"))
    }

    fn step(&mut self, op: Op) -> Result<(), String> {
        match op {
            Op::Acquire(h) => {
                if self.holders[h].lease.is_some() {
                    return Ok(());
                }
                let before = self.newest();
                let options = AcquireOptions::new(TTL_MS).owner(format!("h{h}"));
                let outcome = self.holders[h].store.try_acquire(&self.lock, &options);
                // The holder's own clock when it decided: acquire may sleep inside
                // the call (waiting out a create in progress), which moves its
                // manual clock past the model's true time.
                let now = self.holders[h].clock.wall_ms();
                match outcome {
                    Ok(TryAcquire::Acquired(lease)) => {
                        if lease.token() <= self.max_issued {
                            return Err(format!(
                                "token {} issued after {}: tokens must strictly increase",
                                lease.token(),
                                self.max_issued
                            ));
                        }
                        // docs/protocol.md §3.3 liveness, computed independently: live while
                        // now < expires_at, or now < granted_at (clock behind).
                        let was_live = match &before {
                            Some(Decoded::Record(r)) if !r.released => {
                                now < r.expires_at_ms || now < r.granted_at_ms
                            }
                            Some(Decoded::Newer { envelope, .. }) => {
                                now < envelope.expires_at_ms || now < envelope.granted_at_ms
                            }
                            _ => false,
                        };
                        if was_live {
                            return Err(format!(
                                "h{h} took over a record that is live by its own clock ({now}): {before:?}"
                            ));
                        }
                        if self.max_issued > 0 {
                            self.recent_superseded.push(self.max_issued);
                            if self.recent_superseded.len() > 8 {
                                self.recent_superseded.remove(0);
                            }
                        }
                        self.max_issued = lease.token();
                        self.holders[h].lease = Some(lease);
                    }
                    Ok(TryAcquire::Held(_)) | Err(Error::Backend(_)) => {}
                    Err(other) => return Err(format!("acquire returned {other}")),
                }
            }
            Op::Check(h) => {
                if let Some(lease) = &self.holders[h].lease
                    && self.check(&self.holders[h].store, lease.token())?
                    && lease.token() < self.max_issued
                {
                    return Err(format!(
                        "superseded token {} passed its holder's check",
                        lease.token()
                    ));
                }
            }
            Op::Renew(h) => {
                if let Some(mut lease) = self.holders[h].lease.take() {
                    let token = lease.token();
                    match self.holders[h].store.renew(&mut lease) {
                        Ok(()) => {
                            if lease.token() != token {
                                return Err(format!(
                                    "renew changed the token {token} → {}",
                                    lease.token()
                                ));
                            }
                            self.holders[h].lease = Some(lease);
                        }
                        Err(Error::Backend(_)) => self.holders[h].lease = Some(lease),
                        Err(_) => {}
                    }
                }
            }
            Op::Release(h) => {
                if let Some(lease) = self.holders[h].lease.take() {
                    let _ = self.holders[h].store.release(&lease);
                }
            }
            Op::Crash(h) => self.holders[h].lease = None,
            Op::Advance(ms) => {
                self.true_ms += ms;
                self.observer_clock.advance_ms(ms);
                for holder in &self.holders {
                    holder.clock.advance_ms(ms);
                }
            }
            Op::StepClock(h, delta) => {
                let offset =
                    (self.holders[h].offset_ms + delta).clamp(-MAX_OFFSET_MS, MAX_OFFSET_MS);
                self.holders[h].offset_ms = offset;
                let now = self.holder_now(h);
                self.holders[h].clock.set_wall_ms(now);
            }
            Op::Torn => self.backend.inject(Fault::Torn),
            Op::FailAfterLanding => self.backend.inject(Fault::FailAfterLanding),
            Op::PowerCut => {
                self.backend.power_cut();
            }
        }
        self.invariants()
    }

    fn invariants(&mut self) -> Result<(), String> {
        let mut passing = Vec::new();
        for (h, holder) in self.holders.iter().enumerate() {
            if let Some(lease) = &holder.lease
                && self.check(&self.observer, lease.token())?
            {
                passing.push((h, lease.token()));
            }
        }
        if passing.len() > 1 {
            return Err(format!(
                "several holders' tokens pass check at once: {passing:?}"
            ));
        }
        for &token in &self.recent_superseded {
            if self.check(&self.observer, token)? {
                return Err(format!("superseded token {token} passes check again"));
            }
        }
        let fence = self
            .backend
            .generations(&self.key)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|g| {
                let bytes = self.backend.read(&self.key, g).ok()??;
                match decode(&bytes, self.key.as_str(), g) {
                    Decoded::Record(r) => Some(r.token),
                    Decoded::Newer { envelope, .. } => Some(envelope.token),
                    Decoded::Torn(_) => None,
                }
            })
            .max()
            .unwrap_or(0);
        if fence < self.fence {
            return Err(format!(
                "the fence went down from {} to {fence}",
                self.fence
            ));
        }
        self.fence = fence;
        Ok(())
    }
}

/// Runs `history` from an empty store; the failing step and why, if any.
pub fn replay(history: &[Op]) -> Result<(), (usize, String)> {
    let mut world = World::new();
    for (i, op) in history.iter().enumerate() {
        world.step(*op).map_err(|message| (i, message))?;
    }
    Ok(())
}

/// Drops steps while the history still fails, so what is printed is short.
pub fn shrink(mut history: Vec<Op>) -> Vec<Op> {
    if let Err((failing, _)) = replay(&history) {
        history.truncate(failing + 1);
    }
    let mut i = history.len();
    while i > 0 {
        i -= 1;
        let mut candidate = history.clone();
        candidate.remove(i);
        if replay(&candidate).is_err() {
            history = candidate;
        }
    }
    history
}

/// Explores `seeds` histories of `steps` each, starting at `first_seed`; the first
/// failure is shrunk and returned as a printable report.
pub fn explore(first_seed: u64, seeds: u64, steps: usize) -> Result<u64, String> {
    let mut ops = 0;
    for seed in first_seed..first_seed + seeds {
        let history = generate(seed, steps);
        if let Err((step, message)) = replay(&history) {
            let minimal = shrink(history);
            let why = replay(&minimal).err().map(|(_, m)| m).unwrap_or_default();
            return Err(format!(
                "seed {seed} fails at step {step}: {message}\n\
                 minimal history ({} steps, fails with: {why}):\n{minimal:#?}\n\
                 replay: FENCEPOST_MODEL_SEED={seed} cargo test -p fencepost-conformance --test model_check",
                minimal.len()
            ));
        }
        ops += steps as u64;
    }
    Ok(ops)
}

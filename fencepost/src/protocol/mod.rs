//! The lease protocol, once, generic over the backend (docs/protocol.md §3), in two
//! layers (docs/design-04-claims.md):
//!
//! - [`series`]: one key's series — read the newest record, create the next
//!   generation and confirm it, judge a holder, renew, release or break one tenure's
//!   record, sweep. The single-key rules of docs/protocol.md §3; nothing here knows
//!   what a resource is.
//! - [`claim`]: the composition of keys into a claim — which keys a resource's claim
//!   takes, in canonical order, taken all or given back, cross-checked on check,
//!   renew and resume. Every kind of claim is a composition of series operations.
//!
//! [`Store`] is the handle both layers hang their operations on; [`status`] reads
//! every series for display.

mod claim;
mod lease;
mod options;
mod series;
mod status;

pub use claim::{BESIDE_POLL_MS, Beside, SLOTS_MAX, TryAcquireAll, check_session};
pub use lease::Lease;
pub(crate) use lease::{HeldKey, Stamp, Written};
pub use options::{AcquireOptions, Cancel, OWNER_MAX_CHARS, TryAcquire, check_owner};
pub use status::{ClaimState, StatusEntry};

use std::sync::Arc;
use std::time::Duration;

use crate::Error;
use crate::backend::LeaseStore;
use crate::clock::{Clock, SystemClock};
use crate::liveness::{Liveness, SystemLiveness};

/// First backoff step while waiting for a held resource, in milliseconds.
pub(crate) const BACKOFF_START_MS: u64 = 4;

/// Largest backoff step; keeps a handoff to a waiter within about this much of the
/// release.
pub(crate) const BACKOFF_CAP_MS: u64 = 64;

/// How often release retries when a concurrent create takes its generation.
pub(crate) const RELEASE_ATTEMPTS: usize = 8;

/// How long a create may take before a reader that sees it torn (in progress, or
/// cut off by a crash) treats it as abandoned, in milliseconds of the reader's
/// monotonic clock; and, symmetrically, how long an acquire's create may take
/// before the acquirer gives its claim back instead of trusting it. Readers wait
/// this out even past their own deadline, so a crash mid-create blocks a key for
/// at most this long beyond any live predecessor (design-01, "torn newest
/// record"; pinned by the checker's `lock_handover` and `torn_renewal` schedules).
pub const CREATE_GRACE_MS: u64 = 1_000;

/// Past the wait, how long a claimer that gave back because of a rival found only
/// after its own claim landed keeps looking before it reports that rival: the
/// rival may be a claimer in the same race, giving back too (both sides write
/// first and read second), and a report must name a holder, not a claimer that
/// holds nothing. Within it the claimer looks before taking, so a rival that does
/// hold is reported at the next look (docs/design-05-subtrees-and-shared.md §4.4).
pub(crate) const RACE_GRACE_MS: u64 = CREATE_GRACE_MS;

/// How long a contended release's turn ([`crate::record::Turn`]) keeps the key for
/// the waiter it names, in milliseconds from the tombstone's stamp, and at most this
/// long of a reader's monotonic clock from when it first saw the tombstone. Other
/// claimants wait it out even past their own deadline (as a create in progress);
/// a named waiter that has not claimed by then is passed over and its ticket
/// removed. Long enough for a sleeping waiter to be woken and land its create on a
/// busy machine, short enough that a waiter that died costs little
/// (docs/design-07-performance.md, "Who is woken: turns"; pinned by the checker's
/// `turn_handover` schedule).
pub const TURN_MS: u64 = 25;

/// A backend plus the protocol on top: acquire, check, renew, release, status,
/// sweep and keepalive.
///
/// Cheap to clone (a few `Arc`s); clones share the backend, clock and liveness probe.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Arc<dyn LeaseStore>,
    clock: Arc<dyn Clock>,
    liveness: Arc<dyn Liveness>,
    watch_interval: Duration,
    /// The most the wall clock was seen ahead of the monotonic clock (ms, wall −
    /// monotonic) in one reading of both: what a holder's judgement of its own
    /// tenure's expiry goes by after the wall clock stepped back ([`Store::holder_now`]).
    wall_ahead: Arc<std::sync::atomic::AtomicI64>,
}

/// How often a [`crate::Keepalive`] looks at its lease between renewals by default,
/// so a takeover or break is noticed within about this long.
pub const DEFAULT_WATCH_INTERVAL: Duration = Duration::from_millis(40);

impl Store {
    /// The protocol over `backend`, with the system clock.
    pub fn new(backend: impl LeaseStore + 'static) -> Self {
        Self::with_clock(backend, SystemClock::new())
    }

    /// The protocol over `backend`, with an injected clock (tests step it).
    pub fn with_clock(backend: impl LeaseStore + 'static, clock: impl Clock + 'static) -> Self {
        Self::from_parts(Arc::new(backend), Arc::new(clock))
    }

    /// The protocol over an already shared backend and clock.
    pub fn from_parts(backend: Arc<dyn LeaseStore>, clock: Arc<dyn Clock>) -> Self {
        Store {
            backend,
            clock,
            liveness: Arc::new(SystemLiveness),
            watch_interval: DEFAULT_WATCH_INTERVAL,
            wall_ahead: Arc::new(std::sync::atomic::AtomicI64::new(i64::MIN)),
        }
    }

    /// The wall-clock time (ms) by which a holder judges whether its own tenure's
    /// record is still live, from a reading `wall_ms` of the wall clock and one
    /// `mono_ms` of the monotonic clock taken just before it: the wall clock, or
    /// later when the wall clock stepped back since this handle last saw how far
    /// ahead of the monotonic clock it ran ([`Store::note_clocks`]) — never later
    /// than the wall clock would read without the step. A wall clock that stepped
    /// back would otherwise make a record stamped before the step look live for as
    /// long as the step, and a renewal, or a renewal a sibling process of the
    /// session wrote, be acknowledged after its ttl ran out (found by the
    /// interleaving checker, `session_reentry` seed 1976 of 2000). Readers judging
    /// *other* tenures keep the plain wall clock (docs/protocol.md §3.3): a later
    /// "now" there would end someone else's lease early.
    pub(crate) fn holder_now(&self, wall_ms: u64, mono_ms: u64) -> u64 {
        let seen = self.wall_ahead.load(std::sync::atomic::Ordering::Relaxed);
        if seen == i64::MIN {
            return wall_ms;
        }
        let judged = i64::try_from(mono_ms)
            .unwrap_or(i64::MAX)
            .saturating_add(seen);
        u64::try_from(judged).unwrap_or(0).max(wall_ms)
    }

    /// Notes how far the wall clock runs ahead of the monotonic clock, from a
    /// wall-clock reading `wall_ms` and a monotonic reading `mono_after_ms` taken
    /// after it. A pause between the two only makes the note smaller, so
    /// [`Store::holder_now`] never judges later than the wall clock would read
    /// without a step.
    pub(crate) fn note_clocks(&self, wall_ms: u64, mono_after_ms: u64) {
        self.wall_ahead.fetch_max(
            lease::wall_ahead(wall_ms, mono_after_ms),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// The same store with another liveness probe (tests and model checks decide
    /// which processes are dead).
    pub fn with_liveness(mut self, liveness: impl Liveness + 'static) -> Self {
        self.liveness = Arc::new(liveness);
        self
    }

    /// The same store with another watch interval for keepalives (at least 1 ms):
    /// shorter notices a loss sooner, longer reads the backend less often.
    pub fn with_watch_interval(mut self, interval: Duration) -> Self {
        self.watch_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// How often a keepalive looks at its lease between renewals.
    pub fn watch_interval(&self) -> Duration {
        self.watch_interval
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn LeaseStore> {
        &self.backend
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Uniform in `[step/2, step]`: waiters that started together spread out.
    pub(crate) fn jittered(&self, step_ms: u64) -> u64 {
        let half = step_ms / 2;
        half + self.clock.random_u64() % (step_ms - half + 1)
    }

    /// A waiter's pause before it looks again: one jittered step of `backoff_ms`,
    /// cut to what is left before `deadline_ms` but never below the first step (so
    /// a last look still happens at the deadline); then `backoff_ms` doubles up to
    /// its cap. Every wait loop of a claim kind sleeps through here.
    /// A grace past the wait (`until`, set on first use to `mono_ms + grace_ms`):
    /// while it lasts, backs off (as [`Store::back_off`]) and returns true, for the
    /// caller to go round again; false once it is over.
    pub(crate) fn within_grace(
        &self,
        until: &mut Option<u64>,
        grace_ms: u64,
        backoff_ms: &mut u64,
        mono_ms: u64,
    ) -> bool {
        let until = *until.get_or_insert(mono_ms.saturating_add(grace_ms));
        if mono_ms >= until {
            return false;
        }
        self.back_off(backoff_ms, until, mono_ms);
        true
    }

    pub(crate) fn back_off(&self, backoff_ms: &mut u64, deadline_ms: u64, mono_ms: u64) {
        let step = self
            .jittered(*backoff_ms)
            .min(deadline_ms.saturating_sub(mono_ms).max(BACKOFF_START_MS))
            .max(1);
        self.clock.sleep(Duration::from_millis(step));
        *backoff_ms = (*backoff_ms * 2).min(BACKOFF_CAP_MS);
    }
}

/// True for the errors that mean the lease is gone (as opposed to a store failure).
pub(crate) fn is_loss(error: &Error) -> bool {
    error.is_loss()
}

/// A holder id unique to one tenure: owner, pid and a random nonce; with the pid
/// written in it, which the tenure's records carry as their `pid`.
///
/// One `getpid` per acquisition serves both, so they cannot disagree. Never kept
/// across calls: a forked child would carry its parent's pid (the reason
/// [`SystemLiveness`] checks the pid of its evidence).
pub(crate) fn new_holder_id(owner: &str) -> (String, u32) {
    let pid = std::process::id();
    // `{owner}-{pid}-{nonce:016x}`, written piece by piece: one allocation, the pid
    // in decimal and the nonce through the hex table, never through the formatter
    // (every acquire makes one).
    let mut id = String::with_capacity(owner.len() + 1 + 10 + 1 + 16);
    id.push_str(owner);
    id.push('-');
    crate::record::push_decimal(&mut id, u64::from(pid));
    id.push('-');
    crate::identity::push_hex(&mut id, &nonce().to_be_bytes());
    (id, pid)
}

/// A random number for nonces: holder ids, staging-file names, backoff jitter. From
/// the standard library's per-process random hash keys mixed with a counter and the
/// time — unique enough that a collision only costs a retry; not for secrets.
pub fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    hasher.finish()
}

#[cfg(test)]
mod tests {
    /// The holder id written piece by piece reads as `format!` wrote it:
    /// `{owner}-{pid}-{nonce:016x}`, and the pid it returns (the records' `pid`)
    /// is the one written in it: this process's.
    #[test]
    fn a_holder_id_is_owner_pid_and_sixteen_hex_digits() {
        for _ in 0..100 {
            let (id, pid) = super::new_holder_id("agent-a");
            assert_eq!(pid, std::process::id());
            let rest = id.strip_prefix("agent-a-").expect("the owner first");
            let (written, nonce) = rest.split_once('-').expect("pid-nonce");
            assert_eq!(written, pid.to_string());
            let value = u64::from_str_radix(nonce, 16).expect("hex");
            assert_eq!(nonce, format!("{value:016x}"));
        }
    }

    /// The pid is written as `{}` writes it, at every number of digits.
    #[test]
    fn a_pid_is_written_in_decimal_as_the_formatter_writes_it() {
        let mut n = 1u32;
        for value in [0, 1, 9, 10, 99, 100, 4_194_304, u32::MAX]
            .into_iter()
            .chain(std::iter::from_fn(|| {
                n = n.checked_mul(7)?;
                Some(n - 1)
            }))
        {
            let mut text = String::new();
            crate::record::push_decimal(&mut text, u64::from(value));
            assert_eq!(text, value.to_string());
        }
    }
}

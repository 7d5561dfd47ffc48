//! Time, injectable: a wall clock for records and a monotonic clock for waiting.
//!
//! Records carry wall-clock milliseconds (they are compared across processes); the
//! stagnation bound and backoff use the caller's own monotonic clock, which never
//! steps (docs/protocol.md §3.4).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The time source of a [`crate::Store`].
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Wall-clock time in milliseconds since the Unix epoch. May step backwards or
    /// forwards.
    fn wall_ms(&self) -> u64;
    /// Monotonic time in milliseconds since an arbitrary origin; never decreases.
    fn monotonic_ms(&self) -> u64;
    /// Sleeps for `duration` (a manual clock advances instead).
    fn sleep(&self, duration: Duration);
    /// Randomness for backoff jitter. A clock for deterministic tests (the
    /// conformance crate's interleaving checker) overrides it so a seed replays the
    /// same sleeps; the default is [`crate::nonce`].
    fn random_u64(&self) -> u64 {
        crate::nonce()
    }
    /// Whether a waiter may sleep on a backend's change watch
    /// ([`crate::ChangeWatch`]) instead of [`sleep`](Clock::sleep): only when the
    /// watch passes time as this clock does — real time for the system clock, the
    /// checker's virtual time for its model. The default, `false`, keeps a clock that
    /// advances by itself (a manual clock) in charge of every wait: a watch blocking
    /// in real time would never bring its deadline.
    fn waits_on_change_watches(&self) -> bool {
        false
    }
}

/// The real clocks: [`SystemTime`] and [`Instant`].
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// The system clock.
    pub fn new() -> Self {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn wall_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
    fn monotonic_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }
    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration)
    }
    fn waits_on_change_watches(&self) -> bool {
        true
    }
}

/// A clock for tests: the system clock plus an adjustable wall-clock offset, so a
/// test can step wall time backwards or forwards while waiting stays real.
///
/// Clones share the offset.
#[derive(Debug, Clone, Default)]
pub struct SteppedClock {
    system: SystemClock,
    offset_ms: Arc<Mutex<i64>>,
}

impl SteppedClock {
    /// A clock that starts equal to the system clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves wall time by `delta_ms` (negative steps backwards). Monotonic time is
    /// unaffected, as on a real machine whose clock is corrected.
    pub fn step_ms(&self, delta_ms: i64) {
        *self.offset_ms.lock().unwrap_or_else(|e| e.into_inner()) += delta_ms;
    }
}

impl Clock for SteppedClock {
    fn wall_ms(&self) -> u64 {
        let offset = *self.offset_ms.lock().unwrap_or_else(|e| e.into_inner());
        (self.system.wall_ms() as i64).saturating_add(offset).max(0) as u64
    }
    fn monotonic_ms(&self) -> u64 {
        self.system.monotonic_ms()
    }
    fn sleep(&self, duration: Duration) {
        self.system.sleep(duration)
    }
    fn waits_on_change_watches(&self) -> bool {
        true
    }
}

/// A fully manual clock for deterministic tests: both clocks stand still until
/// advanced, and [`Clock::sleep`] advances both instead of blocking.
///
/// Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    state: Arc<Mutex<(u64, u64)>>,
}

impl ManualClock {
    /// A clock at wall time `wall_ms` and monotonic time 0.
    pub fn new(wall_ms: u64) -> Self {
        ManualClock {
            state: Arc::new(Mutex::new((wall_ms, 0))),
        }
    }

    /// Advances both clocks by `ms`.
    pub fn advance_ms(&self, ms: u64) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.0 += ms;
        state.1 += ms;
    }

    /// Sets the wall clock to `wall_ms` (a step in either direction); monotonic time
    /// is unaffected.
    pub fn set_wall_ms(&self, wall_ms: u64) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0 = wall_ms;
    }
}

impl Clock for ManualClock {
    fn wall_ms(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0
    }
    fn monotonic_ms(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1
    }
    fn sleep(&self, duration: Duration) {
        self.advance_ms(duration.as_millis().max(1) as u64);
        std::thread::yield_now();
    }
}

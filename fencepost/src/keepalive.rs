//! Keeping a lease alive from a background thread (docs/protocol.md §3.2, keepalive).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{Error, Lease, Result, Store};

/// Retry interval after a renewal failed with a backend error, as a fraction of the
/// ttl: several retries fit before the lease would expire.
const RETRY_FRACTION: u64 = 10;

type LossCallback = Box<dyn FnOnce(&Error) + Send>;

#[derive(Default)]
struct State {
    stop: bool,
    lease: Option<Lease>,
    loss: Option<Error>,
    /// Set as soon as the lease is known lost (before the loss callback runs).
    lost: bool,
    /// The process group every renewal's evidence names ([`Keepalive::tie_to_group`]).
    group: Option<u32>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A lease renewed every ttl/3 by a background thread until released, stopped or
/// dropped. The token never changes across renewals (docs/protocol.md I5). Between renewals the
/// thread looks at the lease every [`Store::watch_interval`] (one read per key), so
/// a loss is reported at once rather than at the next renewal.
///
/// When the lease is lost (superseded, expired, released by someone else, or the
/// store stayed unusable until the ttl ran out) the thread stops, calls the loss
/// callback once (if one was given) and records the loss for
/// [`Keepalive::take_loss`]. The renewal interval uses real time, not the store's clock.
///
/// Dropping a `Keepalive` stops renewing and releases the lease, best effort.
pub struct Keepalive {
    store: Store,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    token: u64,
}

impl std::fmt::Debug for Keepalive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keepalive")
            .field("token", &self.token)
            .finish()
    }
}

impl Store {
    /// Keeps `lease` alive: renews it every ttl/3 on a background thread.
    pub fn keepalive(&self, lease: Lease) -> Keepalive {
        self.keepalive_with(lease, |_| {})
    }

    /// Like [`Store::keepalive`], and calls `on_loss` on the renewal thread as soon
    /// as the lease is lost, with the reason ([`Error::Superseded`],
    /// [`Error::Expired`], [`Error::Broken`] (an operator broke it),
    /// [`Error::Released`] (a process given the lease's handle released it),
    /// [`Error::NotHolder`], or the last [`Error::Backend`] when
    /// the store stayed unusable past the lease's expiry).
    pub fn keepalive_with(
        &self,
        lease: Lease,
        on_loss: impl FnOnce(&Error) + Send + 'static,
    ) -> Keepalive {
        let token = lease.token();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                stop: false,
                lease: Some(lease),
                loss: None,
                lost: false,
                group: None,
            }),
            wake: Condvar::new(),
        });
        let thread = {
            let store = self.clone();
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("fencepost-keepalive".into())
                .spawn(move || renew_until_stopped(&store, &shared, Box::new(on_loss)))
                .expect("spawning the keepalive thread")
        };
        Keepalive {
            store: self.clone(),
            shared,
            thread: Some(thread),
            token,
        }
    }
}

fn renew_until_stopped(store: &Store, shared: &Shared, on_loss: LossCallback) {
    let mut state = shared.lock();
    let Some(lease) = state.lease.clone() else {
        return;
    };
    let interval = Duration::from_millis(Keepalive::renewal_period_ms(lease.ttl_ms()));
    let retry = Duration::from_millis((lease.ttl_ms() / RETRY_FRACTION).max(1));
    let mut wait = interval;
    // The last backend error since the last successful renewal.
    let mut failure = None;
    loop {
        state = match watch_while_waiting(store, shared, state, wait) {
            Ok(state) => state,
            Err(loss) => {
                // Lost before the callback runs, so a caller woken by the
                // callback already sees `is_lost`.
                shared.lock().lost = true;
                on_loss(&loss);
                shared.lock().loss = Some(loss);
                return;
            }
        };
        if state.stop {
            return;
        }
        let mut lease = state
            .lease
            .clone()
            .expect("the lease is present while renewing");
        lease.group = state.group.or(lease.group);
        drop(state);
        // The next renewal is due a period after this one *started*, not after it
        // finished: a slow renewal must not eat the slack (design-01, "keepalive
        // timing"; pinned by `keepalive_renews_on_schedule_when_renewals_are_slow`).
        let started = Instant::now();
        let outcome = store.renew(&mut lease);
        state = shared.lock();
        if state.stop {
            return;
        }
        match outcome {
            Ok(()) => {
                state.lease = Some(lease);
                wait = interval.saturating_sub(started.elapsed());
                failure = None;
            }
            Err(Error::Backend(error)) if store.clock().wall_ms() < lease.expires_at_ms() => {
                // Transient until the lease would have expired anyway: retry soon.
                failure = Some(error);
                wait = retry;
            }
            Err(loss) => {
                // Expired after failed renewals: the cause is the store's failure
                // (a full disk, say), not a pause; report that.
                let loss = match (loss, failure.take()) {
                    (Error::Expired { .. }, Some(error)) => Error::Backend(error),
                    (loss, _) => loss,
                };
                drop(state);
                // Lost before the callback runs, so a caller woken by the
                // callback already sees `is_lost`.
                shared.lock().lost = true;
                on_loss(&loss);
                shared.lock().loss = Some(loss);
                return;
            }
        }
    }
}

/// Waits `wait` (or until stopped), looking at the lease every
/// [`Store::watch_interval`] meanwhile, so a takeover, a break or a release from
/// elsewhere is reported within about one watch interval instead of at the next
/// renewal. Returns the lock when the wait is over or a stop was asked, or the loss.
fn watch_while_waiting<'a>(
    store: &Store,
    shared: &'a Shared,
    mut state: MutexGuard<'a, State>,
    wait: Duration,
) -> std::result::Result<MutexGuard<'a, State>, Error> {
    let until = Instant::now() + wait;
    loop {
        let now = Instant::now();
        if state.stop || now >= until {
            return Ok(state);
        }
        let step = (until - now).min(store.watch_interval());
        state = shared
            .wake
            .wait_timeout_while(state, step, |s| !s.stop)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        if state.stop || Instant::now() >= until {
            return Ok(state);
        }
        let lease = state
            .lease
            .clone()
            .expect("the lease is present while renewing");
        drop(state);
        let loss = store.watch(&lease);
        state = shared.lock();
        if let Some(loss) = loss.filter(|_| !state.stop) {
            drop(state);
            return Err(loss);
        }
    }
}

impl Keepalive {
    /// How often a lease of `ttl_ms` is renewed, in milliseconds: ttl/3, counted
    /// from *before* the previous renewal started, so a slow renewal does not eat
    /// the slack (design-01, "keepalive timing").
    pub fn renewal_period_ms(ttl_ms: u64) -> u64 {
        (ttl_ms / 3).max(1)
    }

    /// The fencing token (constant across renewals).
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The lease as of the latest successful renewal.
    pub fn lease(&self) -> Lease {
        self.shared
            .lock()
            .lease
            .clone()
            .expect("the lease is present until release")
    }

    /// Names process group `group` in the evidence of every renewal from now on,
    /// and renews at once so the records say so: the lease's holder then counts as
    /// gone (dead-holder takeover) only once this process has ended *and* no process
    /// is left in the group. `fencepost run` ties its lease to its command's group,
    /// which may outlive a killed `run` until its guard has stopped it
    /// (docs/design-01-lease-and-fence.md, "A dead holder's command";
    /// `cli/tests/run.rs::a_killed_run_is_not_taken_over_while_its_command_runs`).
    /// Only for a lease tied to its process ([`crate::AcquireOptions::tied_to_process`]);
    /// others carry no evidence.
    ///
    /// # Errors
    ///
    /// As [`Store::renew`]; the group is named by later renewals all the same.
    pub fn tie_to_group(&self, group: u32) -> Result<()> {
        let mut lease = {
            let mut state = self.shared.lock();
            state.group = Some(group);
            state
                .lease
                .clone()
                .expect("the lease is present until release")
        };
        lease.tie_to_group(group);
        self.store.renew(&mut lease)?;
        let mut state = self.shared.lock();
        if let Some(current) = state.lease.as_mut()
            && current.generation < lease.generation
        {
            *current = lease;
        }
        Ok(())
    }

    /// True once the lease was lost.
    pub fn is_lost(&self) -> bool {
        let state = self.shared.lock();
        state.lost || state.loss.is_some()
    }

    /// Takes the reason the lease was lost, if it was.
    pub fn take_loss(&self) -> Option<Error> {
        self.shared.lock().loss.take()
    }

    fn stop_thread(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    /// Stops renewing and releases the lease.
    ///
    /// # Errors
    ///
    /// The recorded loss if the lease was lost while kept alive; otherwise as
    /// [`Store::release`].
    pub fn release(mut self) -> Result<()> {
        self.stop_thread();
        let mut state = self.shared.lock();
        if let Some(loss) = state.loss.take() {
            state.lease = None;
            return Err(loss);
        }
        let lease = state
            .lease
            .take()
            .expect("the lease is present until release");
        drop(state);
        self.store.release(&lease)
    }

    /// Stops renewing without releasing; the lease lives until its ttl runs out.
    pub fn stop(mut self) -> Lease {
        self.stop_thread();
        self.shared
            .lock()
            .lease
            .take()
            .expect("the lease is present until release")
    }
}

impl Drop for Keepalive {
    fn drop(&mut self) {
        if self.thread.is_none() && self.shared.lock().lease.is_none() {
            return;
        }
        self.stop_thread();
        let lease = {
            let mut state = self.shared.lock();
            if state.loss.is_some() {
                None
            } else {
                state.lease.take()
            }
        };
        if let Some(lease) = lease {
            let _ = self.store.release(&lease);
        }
    }
}

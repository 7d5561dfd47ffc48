//! Keeping a lease alive from a background thread (docs/protocol.md §3.2, keepalive).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{Error, Lease, Result, Store};

/// Retry interval after a renewal failed with a backend error, as a fraction of the
/// ttl: several retries fit before the lease would expire.
const RETRY_FRACTION: u64 = 10;

type LossCallback = Box<dyn FnOnce(&Error) + Send>;

/// How long the watchdog lets the renewal thread look first when the deadline
/// passed while that thread was not blocked in a store call begun before it (its
/// process was paused): the look says who took the lease over.
const LOOK_GRACE: Duration = Duration::from_millis(500);

struct State {
    stop: bool,
    lease: Option<Lease>,
    loss: Option<Error>,
    /// Set as soon as the lease is known lost (before the loss callback runs).
    lost: bool,
    /// The process group every renewal's evidence names ([`Keepalive::tie_to_group`]).
    group: Option<u32>,
    /// When the lease runs out by this process's monotonic clock unless a renewal
    /// succeeds first: what the watchdog thread waits for.
    deadline: Instant,
    /// Called once, by whichever thread finds the lease lost first.
    on_loss: Option<LossCallback>,
    /// The last backend error since the last successful renewal: a lease that
    /// runs out after failed renewals was lost to the store's failure (a full
    /// disk, say), not to a pause, and is reported so by either thread.
    failure: Option<crate::BackendError>,
    /// When the renewal thread's store call in progress (a renewal, or a look at
    /// the lease) began, if one is: one begun before the deadline and still going
    /// is blocked across it.
    call_started: Option<Instant>,
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
    watchdog: Option<JoinHandle<()>>,
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
        let left_ms = lease.expires_at_ms().saturating_sub(self.clock().wall_ms());
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                stop: false,
                lease: Some(lease),
                loss: None,
                lost: false,
                group: None,
                deadline: Instant::now() + Duration::from_millis(left_ms),
                on_loss: Some(Box::new(on_loss)),
                failure: None,
                call_started: None,
            }),
            wake: Condvar::new(),
        });
        let thread = {
            let store = self.clone();
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("fencepost-keepalive".into())
                .spawn(move || renew_until_stopped(&store, &shared))
                .expect("spawning the keepalive thread")
        };
        let watchdog = {
            let store = self.clone();
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("fencepost-keepalive-watchdog".into())
                .spawn(move || watch_the_deadline(&store, &shared))
                .expect("spawning the keepalive watchdog thread")
        };
        Keepalive {
            store: self.clone(),
            shared,
            thread: Some(thread),
            watchdog: Some(watchdog),
            token,
        }
    }
}

/// Records `loss` and calls the loss callback, unless the lease was already found
/// lost (by the other thread) or the keepalive is stopping. `lost` is set before
/// the callback runs, so a caller woken by the callback already sees `is_lost`.
fn declare_loss(shared: &Shared, loss: Error) {
    let mut state = shared.lock();
    if state.lost || state.stop {
        return;
    }
    state.lost = true;
    let on_loss = state.on_loss.take();
    drop(state);
    if let Some(on_loss) = on_loss {
        on_loss(&loss);
    }
    shared.lock().loss = Some(loss);
    shared.wake.notify_all();
}

/// The watchdog: declares the lease lost once its deadline passes with no renewal
/// landed, even while a renewal or a look at the lease is still blocked in the
/// store. A store that stops answering without closing its connections (a paused
/// etcd member: every request runs into its timeout) held the renewal thread
/// past the ttl, and `run`'s command went on while a rival's ran (a breaker:
/// seconds of overlap); the loss is now reported at the deadline, as the lease
/// ends (`backends/memory/tests/faults.rs::a_renewal_blocked_past_the_ttl_is_a_loss_at_the_deadline`).
fn watch_the_deadline(store: &Store, shared: &Shared) {
    let mut state = shared.lock();
    let mut grace_given = false;
    loop {
        if state.stop || state.lost {
            return;
        }
        let now = Instant::now();
        let blocked = state.call_started.is_some_and(|at| at < state.deadline);
        if now >= state.deadline && !blocked && !grace_given {
            // Not blocked in the store across the deadline (the process was
            // paused, say): the renewal thread is about to look, or looking, and
            // says how the lease ended (superseded by whom) better than "expired"
            // can. A moment for it, once (a busy machine took more than 50 ms: CI).
            grace_given = true;
            state.deadline = now + LOOK_GRACE;
            continue;
        }
        if now >= state.deadline {
            let lease = state.lease.clone();
            let failure = state.failure.take();
            drop(state);
            let Some(lease) = lease else { return };
            let expired_at_ms = lease.expires_at_ms().min(store.clock().wall_ms());
            let loss = match failure {
                Some(error) => Error::Backend(error),
                None => Error::Expired {
                    label: lease.label().to_string(),
                    token: lease.token(),
                    expired_at_ms,
                },
            };
            declare_loss(shared, loss);
            return;
        }
        let left = state.deadline - now;
        state = shared
            .wake
            .wait_timeout(state, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

fn renew_until_stopped(store: &Store, shared: &Shared) {
    let mut state = shared.lock();
    let Some(lease) = state.lease.clone() else {
        return;
    };
    let interval = Duration::from_millis(Keepalive::renewal_period_ms(lease.ttl_ms()));
    let retry = Duration::from_millis((lease.ttl_ms() / RETRY_FRACTION).max(1));
    let mut wait = interval;
    loop {
        state = match watch_while_waiting(store, shared, state, wait) {
            Ok(state) => state,
            Err(loss) => {
                declare_loss(shared, loss);
                return;
            }
        };
        if state.stop || state.lost {
            return;
        }
        let mut lease = state
            .lease
            .clone()
            .expect("the lease is present while renewing");
        lease.group = state.group.or(lease.group);
        state.call_started = Some(Instant::now());
        drop(state);
        // The next renewal is due a period after this one *started*, not after it
        // finished: a slow renewal must not eat the slack (design-01, "keepalive
        // timing"; pinned by `keepalive_renews_on_schedule_when_renewals_are_slow`).
        let started = Instant::now();
        let outcome = store.renew(&mut lease);
        state = shared.lock();
        state.call_started = None;
        if state.stop || state.lost {
            return;
        }
        match outcome {
            Ok(()) => {
                // Live until a ttl after this renewal started, at the latest (its
                // record was stamped after that): the watchdog's next deadline.
                let renewed_until = started + Duration::from_millis(lease.ttl_ms());
                state.deadline = state.deadline.max(renewed_until);
                state.lease = Some(lease);
                shared.wake.notify_all();
                wait = interval.saturating_sub(started.elapsed());
                state.failure = None;
            }
            Err(Error::Backend(error)) if store.clock().wall_ms() < lease.expires_at_ms() => {
                // Transient until the lease would have expired anyway: retry soon.
                state.failure = Some(error);
                wait = retry;
            }
            Err(loss) => {
                // Expired after failed renewals: the cause is the store's failure
                // (a full disk, say), not a pause; report that.
                let loss = match (loss, state.failure.take()) {
                    (Error::Expired { .. }, Some(error)) => Error::Backend(error),
                    (loss, _) => loss,
                };
                drop(state);
                declare_loss(shared, loss);
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
        state.call_started = Some(Instant::now());
        drop(state);
        let loss = store.watch(&lease);
        state = shared.lock();
        state.call_started = None;
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
        let started = Instant::now();
        self.store.renew(&mut lease)?;
        let mut state = self.shared.lock();
        let renewed_until = started + Duration::from_millis(lease.ttl_ms());
        state.deadline = state.deadline.max(renewed_until);
        if let Some(current) = state.lease.as_mut()
            && current.generation < lease.generation
        {
            *current = lease;
        }
        self.shared.wake.notify_all();
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
        if let Some(thread) = self.watchdog.take() {
            let _ = thread.join();
        }
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

//! The waiting line: while `claim --wait` or `run --wait` waits on a terminal, one
//! status line on stderr says what it waits for, who holds it and for how long it
//! has waited, updated in place and cleared when the wait ends. Off a terminal
//! nothing is printed until the result (scripts and agents read one line).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use fencepost::{Beside, Holder, Resource};

use crate::args::WAIT_FOREVER;
use crate::elsewhere::Elsewhere;
use crate::output::{describe_holder, human_precise, printable};

/// The longest line drawn, in characters: it must fit a common terminal row.
const MAX_COLUMNS: usize = 79;

/// How often the line is redrawn at most.
const REDRAW: Duration = Duration::from_millis(200);

/// The status line of one wait.
pub struct WaitLine {
    what: String,
    wait_ms: u64,
    enabled: bool,
    drawn: bool,
    last_draw: Option<Instant>,
}

impl WaitLine {
    /// A line for waiting up to `wait_ms` for `resource`; drawn only when stderr is
    /// a terminal and there is a wait.
    pub fn new(resource: &Resource, wait_ms: u64) -> WaitLine {
        WaitLine {
            what: printable(&resource.target()),
            wait_ms,
            enabled: wait_ms > 0 && std::io::stderr().is_terminal(),
            drawn: false,
            last_draw: None,
        }
    }

    /// Redraws the line (at most every [`REDRAW`]): `holder` is in the way and
    /// `waited_ms` have passed.
    pub fn update(&mut self, holder: &Holder, waited_ms: u64) {
        if !self.enabled || self.last_draw.is_some_and(|at| at.elapsed() < REDRAW) {
            return;
        }
        self.last_draw = Some(Instant::now());
        let limit = if self.wait_ms == WAIT_FOREVER {
            "(no limit)".to_string()
        } else {
            format!("of {}", seconds(self.wait_ms))
        };
        // The time first: a long holder description is what gets cut.
        let line = format!(
            "fencepost: waiting {} {limit} for {}, held by {}",
            seconds(waited_ms),
            self.what,
            describe_holder(holder),
        );
        // One terminal row, or the in-place rewrite would leave wrapped rows behind.
        let line: String = if line.chars().count() > MAX_COLUMNS {
            line.chars()
                .take(MAX_COLUMNS - 1)
                .chain(std::iter::once('…'))
                .collect()
        } else {
            line
        };
        // \r and "erase line": the line is rewritten in place.
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[2K{line}");
        let _ = stderr.flush();
        self.drawn = true;
    }

    /// Erases the line, if it was drawn, so the result starts on a clean line.
    pub fn clear(&mut self) {
        if self.drawn {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[2K");
            let _ = stderr.flush();
            self.drawn = false;
        }
    }
}

impl Drop for WaitLine {
    fn drop(&mut self) {
        self.clear();
    }
}

/// `3.2s` under a minute, `4m05s` above.
pub fn seconds(ms: u64) -> String {
    human_precise(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// The outcome of [`try_acquire`].
// One per command, moved once: boxing the lease would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Acquired {
    /// Acquired.
    Lease(fencepost::Lease),
    /// Still held when the wait ended, after waiting this many milliseconds; the
    /// store the holder's claim is in when it is not the command's own.
    Held(Holder, u64, Option<String>),
}

/// Acquires `resource` with `options`, showing the waiting line meanwhile, beside
/// the other stores on its path ([`Elsewhere`], `Store::claim_beside`): a live
/// claim of it in one of them is waited for, or reported as the holder.
pub fn try_acquire(
    store: &fencepost::Store,
    elsewhere: &Elsewhere,
    resource: &Resource,
    options: &fencepost::AcquireOptions,
) -> fencepost::Result<Acquired> {
    let started = Instant::now();
    let mut line = WaitLine::new(resource, options.wait_ms);
    let outcome = store.claim_beside(
        std::slice::from_ref(resource),
        options,
        || elsewhere.list(),
        |options| {
            let outcome =
                store.try_acquire_observed(resource, options, &mut |holder, waited_ms| {
                    line.update(holder, waited_ms)
                })?;
            Ok(match outcome {
                fencepost::TryAcquire::Acquired(lease) => Ok(vec![lease]),
                fencepost::TryAcquire::Held(holder) => Err(holder),
            })
        },
    );
    line.clear();
    let waited = elapsed_ms(started);
    Ok(match outcome? {
        Beside::Taken(mut leases) => Acquired::Lease(leases.remove(0)),
        Beside::Held(holder) => Acquired::Held(holder, waited, None),
        Beside::Elsewhere {
            store,
            resource,
            holder,
        } => Acquired::Held(
            elsewhere.named(&store, &resource, holder),
            waited,
            Some(store),
        ),
    })
}

/// Milliseconds since `started`.
fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The outcome of [`try_acquire_all`].
pub enum AcquiredAll {
    /// Every resource, one lease each, in the order given.
    Leases(Vec<fencepost::Lease>),
    /// This resource was still held when the wait ended (nothing is held), after
    /// waiting this many milliseconds; the store the holder's claim is in when it
    /// is not the command's own.
    Held(Resource, Holder, u64, Option<String>),
}

/// Acquires every resource in `resources`, all or nothing, showing the waiting line
/// (naming the resource in the way) meanwhile; beside the other stores on their
/// paths, as [`try_acquire`].
pub fn try_acquire_all(
    store: &fencepost::Store,
    elsewhere: &Elsewhere,
    resources: &[Resource],
    options: &fencepost::AcquireOptions,
) -> fencepost::Result<AcquiredAll> {
    let started = Instant::now();
    let mut line = WaitLine::new(&resources[0], options.wait_ms);
    let outcome = store.claim_beside(
        resources,
        options,
        || elsewhere.list(),
        |options| {
            let outcome = store.try_acquire_all_observed(
                resources,
                options,
                &mut |resource, holder, waited_ms| {
                    line.what = printable(&resource.target());
                    line.update(holder, waited_ms)
                },
            )?;
            Ok(match outcome {
                fencepost::TryAcquireAll::Acquired(leases) => Ok(leases),
                fencepost::TryAcquireAll::Held { resource, holder } => Err((resource, holder)),
            })
        },
    );
    line.clear();
    let waited = elapsed_ms(started);
    Ok(match outcome? {
        Beside::Taken(leases) => AcquiredAll::Leases(leases),
        Beside::Held((resource, holder)) => AcquiredAll::Held(resource, holder, waited, None),
        Beside::Elsewhere {
            store,
            resource,
            holder,
        } => AcquiredAll::Held(
            resource.clone(),
            elsewhere.named(&store, &resource, holder),
            waited,
            Some(store),
        ),
    })
}

/// The slot of the lock `name` that `holder` (the one a slot claim was refused by)
/// holds, so that the refusal names a resource its reader can act on
/// (`break --lock NAME --slot N`); the lock itself when no slot has that tenure any
/// more (it changed hands meanwhile).
pub fn slot_in_the_way(
    store: &fencepost::Store,
    name: &str,
    slots: u32,
    holder: &Holder,
) -> Resource {
    (1..=slots)
        .map(|slot| Resource::slot(name, slot))
        .find(|slot| {
            matches!(store.holder(slot), Ok(Some(current)) if current.holder_id == holder.holder_id)
        })
        .unwrap_or_else(|| Resource::lock(name))
}

/// Acquires one of the `slots` slots of the lock `name`, showing the waiting line
/// meanwhile.
pub fn try_acquire_slot(
    store: &fencepost::Store,
    name: &str,
    slots: u32,
    options: &fencepost::AcquireOptions,
) -> fencepost::Result<Acquired> {
    let started = Instant::now();
    let mut line = WaitLine::new(&Resource::lock(name), options.wait_ms);
    line.what = format!("one of {slots} slots of {}", printable(name));
    let outcome =
        store.try_acquire_slot_observed(name, slots, options, &mut |holder, waited_ms| {
            line.update(holder, waited_ms)
        });
    line.clear();
    Ok(match outcome? {
        fencepost::TryAcquire::Acquired(lease) => Acquired::Lease(lease),
        fencepost::TryAcquire::Held(holder) => Acquired::Held(
            holder,
            u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            None,
        ),
    })
}

//! The world an explored schedule runs in: a scripted model backend whose every
//! call is a scheduling point (with faults), a virtual clock, the actors' harness
//! ([`Ctx`]) and the oracle that judges every step by the true (oracle) clock.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fencepost::record::{Decoded, decode};
use fencepost::{
    AcquireOptions, BackendError, Clock, CreateOutcome, Durability, Error, Holder, Key, Lease,
    LeaseHandle, LeaseStore, Resource, Store, TryAcquire,
};

use super::sched::{Fault, Point, Sched, current_actor};
use super::{CreateProcedure, ProcedureStep};

/// A record in the model store.
#[derive(Debug, Clone)]
struct Rec {
    bytes: Vec<u8>,
    /// False while a half-written create is still in progress (or was cut off).
    complete: bool,
    /// Survives a power cut (flushed file and directory).
    durable: bool,
    /// Which create made this name (a half-written create completes only its own).
    id: u64,
    /// Staged create procedures only ([`CreateProcedure`]): the name was made
    /// durable by a flush of its directory (this create's or anyone's).
    name_durable: bool,
    /// Staged create procedures only: the bytes were made durable by a file flush.
    data_durable: bool,
    /// A flushed create of this record returned `Created`: the contract promises it
    /// survives a power cut.
    acked: bool,
    /// Its create took `CREATE_GRACE_MS` or longer, so its creator never trusts
    /// it (never hands it out): a reader may have waited out its torn name and
    /// written above it.
    untrusted: bool,
}

impl Rec {
    fn new(bytes: Vec<u8>, complete: bool, durable: bool, id: u64) -> Rec {
        Rec {
            bytes,
            complete,
            durable,
            id,
            name_durable: false,
            data_durable: false,
            acked: false,
            untrusted: false,
        }
    }

    /// Name and complete data both flushed: it survives a power cut whole.
    fn settle(&mut self) {
        self.durable |= self.name_durable && self.data_durable && self.complete;
    }
}

/// A record as the oracle saw it land.
#[derive(Debug, Clone)]
struct Landed {
    holder: String,
    released: bool,
    /// True time the writer read the wall clock for its stamp.
    stamp_true: u64,
    /// The decision step of that read.
    stamp_step: u64,
    ttl_ms: u64,
    landed_at: u64,
    /// The hash of the tenure's secret the record carries (its proof of holding).
    secret_sha256: Option<String>,
}

/// One tenure as the oracle knows it (keyed by holder id).
#[derive(Debug, Clone)]
struct Tenure {
    actor: String,
    token: u64,
    resource: Resource,
    keys: Vec<Key>,
    /// End of the promise: the earliest stamp + ttl of its newest records, cut at a
    /// forward wall-clock step or at release.
    end: u64,
    /// Step at which another tenure's record landed in one of its series.
    fenced_at: Option<u64>,
    /// Highest generation this tenure wrote per key.
    gens: HashMap<Key, u64>,
    /// The subtree keys of every directory above its resource (a file or subtree):
    /// a subtree tenure whose key is among them covers this one.
    above: Vec<Key>,
    /// A shared tenure (docs/design-05-subtrees-and-shared.md §4): it may hold with
    /// other shared tenures, never with an exclusive one of the same resource.
    shared: bool,
    /// The resource's primary key (for a shared tenure, not among `keys`, which
    /// are its participant series).
    claim: Key,
    /// The tag of the session that claimed it, if one did: a release by key for
    /// that session ends its promise ([`Ctx::release_session_series`]).
    session: Option<fencepost::SessionTag>,
}

/// The primary key of the resource `lease` holds: its own for an exclusive tenure,
/// the resource's for a shared one (whose own series is its participant key).
fn claim_key(lease: &Lease) -> Key {
    if lease.shared() {
        lease
            .resource()
            .identity()
            .map_or_else(|_| lease.key().clone(), |identity| identity.key)
    } else {
        lease.key().clone()
    }
}

/// True when tenures over these resources may not hold at one instant beyond a
/// shared key: one is a subtree claim covering the other
/// (docs/design-05-subtrees-and-shared.md §1).
fn covers(
    a: &Resource,
    a_key: &Key,
    a_above: &[Key],
    b: &Resource,
    b_key: &Key,
    b_above: &[Key],
) -> bool {
    (matches!(a, Resource::Dir(_)) && b_above.contains(a_key))
        || (matches!(b, Resource::Dir(_)) && a_above.contains(b_key))
        || same_path(a, b)
}

/// A subtree and a file of one path: the subtree covers its directory itself.
fn same_path(a: &Resource, b: &Resource) -> bool {
    let path = |r: &Resource| r.identity().ok().and_then(|i| i.path);
    match (a, b) {
        (Resource::Dir(_), Resource::File(_)) | (Resource::File(_), Resource::Dir(_)) => {
            path(a).is_some() && path(a) == path(b)
        }
        _ => false,
    }
}

#[derive(Debug, Default)]
pub(crate) struct Oracle {
    /// Every record that landed, per (key, generation, writer's holder id). The
    /// writer is part of the key because a swept generation can be created again by
    /// another tenure (a claimant that read the series before the sweep; the fs
    /// backend and etcd allow it, docs/protocol.md R5): keyed by (key, generation)
    /// alone, that re-create overwrote the sweeper's own record, and the renewal
    /// oracle then took the tenure's older record as the one renewed and reported a
    /// renewal that landed in time as late (lock_handover seed 3653).
    landed: HashMap<(Key, u64, String), Landed>,
    tenures: HashMap<String, Tenure>,
    /// Highest token an acquire acknowledged, per primary key.
    tokens: HashMap<Key, u64>,
    /// Highest token a shared acquire acknowledged, per resource primary key: an
    /// exclusive token is never below it, and a shared token is above every
    /// exclusive token acknowledged before it.
    shared_tokens: HashMap<Key, u64>,
    /// Creates that returned Created per (key, generation) since the name was last
    /// free.
    created: HashMap<(Key, u64), u32>,
    /// Per holder id: the actors entitled to write that tenure's records — the one
    /// that wrote its first record (the acquirer) and any that resumed it with a
    /// handle carrying its secret. Anyone else writing one (other than a break's
    /// tombstone) acted as a holder it is not (docs/protocol.md §11).
    entitled: HashMap<String, HashSet<usize>>,
    /// Per actor: the hashes of the session secrets it holds because it claims for
    /// that session (a session tenure's secret is derived from the session id,
    /// docs/design-04-claims.md, "Sessions"). Such an actor holds the secret of
    /// every tenure of its session, and so is entitled to write its records.
    session_secrets: HashMap<usize, HashSet<String>>,
    /// Per (holder id, token): the step at which a break ended that tenure (its
    /// tombstone landed, or `break_lease` returned it as broken). It never passes
    /// `check` or renews again, even after a power cut. The token is part of the
    /// key because an acquire whose claim was broken before it could confirm it
    /// retries under the same holder id, as a new tenure with a new token.
    /// Values: (step, true time).
    broken: HashMap<(String, u64), (u64, u64)>,
    /// Break tombstones that landed on top of a series of a tenure the oracle could
    /// not yet name by its token (its acquisition not acknowledged, or a series
    /// other than its resource's own: a file's file-id series numbers its own
    /// tokens): (holder id, key, generation) -> (step, true time). An
    /// acknowledged lease whose own newest record in that key lies below it was
    /// broken then.
    pending_breaks: HashMap<(String, Key, u64), (u64, u64)>,
    /// Per (holder id, token) of a session's tenure: the step and true time at which
    /// a `release` by one of its processes landed its tombstone on top. A release by
    /// any process of the session ends the tenure for all of them
    /// (docs/design-04-claims.md, "Sessions"), a process re-entering it at that
    /// instant included: a re-entry or renewal acknowledged after such a release
    /// landed *during its call* promises nothing past it.
    session_released: HashMap<(String, u64), (u64, u64)>,
    pub(crate) violation: Option<String>,
}

#[derive(Debug, Default)]
struct Model {
    series: BTreeMap<Key, BTreeMap<u64, Rec>>,
    creates: u64,
}

/// Everything one run shares: scheduler, model store, oracle, trace.
#[derive(Debug)]
pub struct World {
    pub(crate) sched: Sched,
    model: Mutex<Model>,
    pub(crate) oracle: Mutex<Oracle>,
    trace: Mutex<Vec<String>>,
    names: Vec<String>,
    snapshot_listing: bool,
    inflight_ms: u64,
    /// How a flushed create reaches the disk (which flush makes what durable).
    procedure: CreateProcedure,
    /// Whether the model backend offers change notifications (`watch_changes`).
    notify: bool,
    /// Whether `remove_superseded` defers its removal, as the fs backend's removal
    /// thread does ([`FaultMix::defer`](super::FaultMix::defer)).
    defer: bool,
    /// Per actor: its deferred removals not made yet, oldest first.
    deferred: Mutex<HashMap<usize, VecDeque<(Key, u64)>>>,
    /// Open change watches: (watch id, actor, key, a change pending, waiting now).
    watchers: Mutex<Vec<WatchSlot>>,
    next_watch: std::sync::atomic::AtomicU64,
    /// Per actor: true time and step of its latest wall-clock read.
    last_wall_read: Mutex<Vec<(u64, u64)>>,
    step: std::sync::atomic::AtomicU64,
    /// (step, true time) of forward wall-clock steps.
    forward_steps: Mutex<Vec<(u64, u64)>>,
    /// Steps at which the wall clock stepped, either way.
    wall_steps: Mutex<Vec<u64>>,
    jitter: std::sync::atomic::AtomicU64,
    /// Wait-queue tickets as they landed: the ticket's holder id and the change
    /// watch its waiter had open then (one acquisition: one watch, one ticket).
    tickets: Mutex<HashMap<String, Vec<u64>>>,
    /// Holder ids a release's tombstone ever named (their tickets may be removed
    /// by the claim over a lapsed turn).
    named: Mutex<HashSet<String>>,
    /// Tickets whose create was half written: read then, one does not decode, and
    /// a release removes it as foreign (see `check_live_ticket_kept`).
    torn_tickets: Mutex<HashSet<(Key, u64)>>,
    /// Per actor: the ring its last tombstone owes (the claim's key and the ticket
    /// named, `None` for the whole queue). A release that lands a tombstone must
    /// ring before its next backend call.
    ring_due: Mutex<HashMap<usize, RingDue>>,
    /// Rings a release could not make because its listing of the queue failed:
    /// the key and its newest generation then (the release's tombstone). A waiter
    /// asleep on its ticket then wakes by its fallback read, within
    /// CHANGE_WAIT_MAX (see the lost wake-up oracle).
    rings_lost: Mutex<HashSet<(Key, u64)>>,
    /// Per (watch, key, tombstone generation): how long that waiter has slept on
    /// another waiter's turn, in ms of true time.
    turn_sleeps: Mutex<HashMap<(u64, Key, u64), u64>>,
    /// Actors inside [`Ctx::release`], and actors a call on a wait queue failed
    /// for (their ticket's removal may have been the call that failed).
    releasing: Mutex<HashSet<usize>>,
    queue_faulted: Mutex<HashSet<usize>>,
    /// The dead-waiter oracle's facts, in schedules with a model process table:
    /// per pid, the step at which that process ended (a crash fault); per ticket
    /// holder id, the pid its ticket names; per actor, the step at which its
    /// latest listing of a wait queue began.
    ended: Mutex<HashMap<u32, u64>>,
    ticket_pids: Mutex<HashMap<String, u32>>,
    queue_listed: Mutex<HashMap<usize, u64>>,
}

/// What a release owes the waiters once its tombstone landed, before its next
/// backend call (the ring oracle).
#[derive(Debug)]
enum RingDue {
    /// A ring of the ticket the tombstone names (the claim's key, the ticket).
    Ring(Key, u64),
    /// The tombstone names nobody: a listing of the key's queue, then a ring of
    /// every ticket it lists.
    ListQueue(Key),
    /// Rings still owed, after that listing: the tickets listed not yet rung.
    RingAll(Key, std::collections::BTreeSet<u64>),
}

/// One open change watch of the model backend.
#[derive(Debug)]
struct WatchSlot {
    id: u64,
    actor: usize,
    key: Key,
    /// A change landed since the watch was made or its last wait returned.
    pending: bool,
    /// Its actor is inside `wait` now (and may be woken early).
    waiting: bool,
    /// A queued waiter's watch on its own ticket (`watch_ticket`): only a ring of
    /// that ticket, or of the whole queue, wakes it; a landing record does not.
    ticket: Option<u64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl World {
    pub(crate) fn new(
        names: Vec<String>,
        late: &[bool],
        snapshot_listing: bool,
        inflight_ms: u64,
        procedure: CreateProcedure,
        notify: bool,
        defer: bool,
    ) -> Self {
        World {
            procedure,
            notify,
            defer,
            deferred: Mutex::default(),
            watchers: Mutex::default(),
            next_watch: Default::default(),
            sched: Sched::new(late, super::START_MS),
            model: Mutex::default(),
            oracle: Mutex::default(),
            trace: Mutex::default(),
            last_wall_read: Mutex::new(vec![(0, 0); names.len()]),
            names,
            snapshot_listing,
            inflight_ms,
            step: Default::default(),
            forward_steps: Mutex::default(),
            wall_steps: Mutex::default(),
            jitter: Default::default(),
            tickets: Mutex::default(),
            named: Mutex::default(),
            torn_tickets: Mutex::default(),
            releasing: Mutex::default(),
            queue_faulted: Mutex::default(),
            ended: Mutex::default(),
            ticket_pids: Mutex::default(),
            queue_listed: Mutex::default(),
            ring_due: Mutex::default(),
            rings_lost: Mutex::default(),
            turn_sleeps: Mutex::default(),
        }
    }

    pub(crate) fn now(&self) -> u64 {
        self.sched.lock().now
    }

    fn who(&self) -> &str {
        current_actor()
            .and_then(|a| self.names.get(a))
            .map_or("?", String::as_str)
    }

    /// A slow call: the actor is stuck in it for `inflight_ms` while others act.
    fn stall(&self, fault: Fault) -> Fault {
        if fault == Fault::Slow {
            self.log(format!(
                "... stalls for {}ms inside the call",
                self.inflight_ms
            ));
            self.sched
                .point(Point::Landing(self.now() + self.inflight_ms));
        }
        fault
    }

    pub(crate) fn set_step(&self, step: u64) {
        self.step.store(step, std::sync::atomic::Ordering::Relaxed);
    }

    fn step(&self) -> u64 {
        self.step.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Appends a line to the trace, stamped with true time and the actor.
    pub(crate) fn log(&self, line: impl AsRef<str>) {
        let now = self.now() - super::START_MS;
        let line = format!("{:>6}ms {:>10}: {}", now, self.who(), line.as_ref());
        lock(&self.trace).push(line);
    }

    pub(crate) fn log_controller(&self, line: impl AsRef<str>) {
        let now = self.now() - super::START_MS;
        lock(&self.trace).push(format!("{:>6}ms {:>10}: {}", now, "--", line.as_ref()));
    }

    pub(crate) fn take_trace(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.trace))
    }

    pub(crate) fn violate(&self, what: String) {
        self.log(format!("VIOLATION: {what}"));
        let mut oracle = lock(&self.oracle);
        if oracle.violation.is_none() {
            oracle.violation = Some(what);
        }
    }

    pub(crate) fn violated(&self) -> bool {
        lock(&self.oracle).violation.is_some()
    }

    /// Notes a failed call on a wait queue.
    fn note_queue_fault(&self, key: &Key, fault: Fault) {
        if key.as_str().starts_with("queue-")
            && matches!(fault, Fault::ErrBefore | Fault::ErrAfter)
            && let Some(actor) = current_actor()
        {
            lock(&self.queue_faulted).insert(actor);
        }
    }

    /// The own-ticket oracle, when a release's tombstone (by `holder`) lands on
    /// `key`: the holder's own ticket must be gone from the key's queue by then
    /// (a waiter leaves the queue as its acquisition returns). Left until after,
    /// the next holder's release may list the queue first (this releaser
    /// descheduled right after its tombstone) and name a waiter that already held:
    /// every claimant then waits out that turn (docs/design-07-performance.md, "A
    /// ticket outlives its tenure"). Not judged for an actor a queue call failed
    /// for.
    fn check_own_ticket_gone(&self, key: &Key, holder: &str) {
        let Some(actor) = current_actor() else {
            return;
        };
        if !lock(&self.releasing).contains(&actor) || lock(&self.queue_faulted).contains(&actor) {
            return;
        }
        let queue = key.queue();
        let left = {
            let model = lock(&self.model);
            model.series.get(&queue).and_then(|tickets| {
                tickets
                    .iter()
                    .find_map(|(g, rec)| match decode(&rec.bytes, queue.as_str(), *g) {
                        Decoded::Record(t) if rec.complete && *t.holder == *holder => Some(*g),
                        _ => None,
                    })
            })
        };
        if let Some(ticket) = left {
            self.violate(format!(
                "stale ticket: {holder}'s release landed its tombstone on {} with its own ticket g{ticket} still queued: the next release may name a waiter that already held, and every claimant waits out its turn",
                short(key)
            ));
        }
    }

    /// The kept-ticket oracle, when the current actor removes ticket `generation`
    /// of the queue `queue`: a ticket another acquisition is still queued on (its
    /// waiter watches it) is removed only when no release could name it any more:
    /// expired, its waiter's process ended, or named by a turn (which lapsed: the
    /// claim over it removes it). Otherwise the removal costs a live waiter its
    /// place: a waiter leaving, or clearing a lapsed turn, by a ticket number given
    /// again since to another waiter (docs/design-07-performance.md, "A ticket
    /// number is never given twice"). Not judged for an actor a queue call failed
    /// for, nor for a ticket whose create was half written: a release that read it
    /// then removes it as foreign, a loss of place the protocol accepts, for where
    /// queues are used (the fs backend on Linux, etcd, memory) a ticket lands whole.
    fn check_live_ticket_kept(&self, queue: &Key, generation: u64) {
        let Some(actor) = current_actor() else {
            return;
        };
        if !queue.as_str().starts_with("queue-") || lock(&self.queue_faulted).contains(&actor) {
            return;
        }
        let ticket = lock(&self.model)
            .series
            .get(queue)
            .and_then(|series| series.get(&generation))
            .and_then(|rec| match decode(&rec.bytes, queue.as_str(), generation) {
                Decoded::Record(t) if rec.complete => Some(t),
                _ => None,
            });
        let Some(ticket) = ticket else {
            return;
        };
        let holder = ticket.holder.to_string();
        let wall = {
            let st = self.sched.lock();
            (st.now as i64 + st.wall_offset).max(0) as u64
        };
        let watches = lock(&self.tickets)
            .get(&holder)
            .cloned()
            .unwrap_or_default();
        let queued_on = lock(&self.watchers).iter().any(|w| {
            w.actor != actor
                && w.ticket == Some(generation)
                && w.key.queue() == *queue
                && watches.contains(&w.id)
        });
        let dead = lock(&self.ticket_pids)
            .get(&holder)
            .is_some_and(|pid| lock(&self.ended).contains_key(pid));
        let torn = lock(&self.torn_tickets).contains(&(queue.clone(), generation));
        if queued_on
            && !torn
            && wall < ticket.expires_at_ms
            && !dead
            && !lock(&self.named).contains(&holder)
        {
            self.violate(format!(
                "live ticket removed: ticket g{generation} of {} is {holder}'s, still queued on it, unexpired, alive and never named by a turn, and another acquisition removed it: {holder} loses its place",
                short(queue)
            ));
        }
    }

    /// Notes that the model process `pid` ended at this step (its actor died).
    pub(crate) fn process_ended(&self, pid: u32) {
        let step = self.step();
        lock(&self.ended).entry(pid).or_insert(step);
    }

    /// The dead-waiter oracle, when a release's tombstone naming `named` (a
    /// ticket's holder id) lands: the process of the waiter it names must not have
    /// ended before the release began listing the queue. A release passes over a
    /// waiter whose process certainly ended (`Liveness::surely_gone`); named, that
    /// waiter's turn lapses, and every claimant waits it out
    /// (docs/design-07-performance.md, "A waiter whose process ended is passed
    /// over at once"). A death after the listing began may go unseen: not judged.
    fn check_named_waiter_alive(&self, key: &Key, named: &str) {
        let Some(actor) = current_actor() else {
            return;
        };
        let Some(listed) = lock(&self.queue_listed).get(&actor).copied() else {
            return;
        };
        let Some(pid) = lock(&self.ticket_pids).get(named).copied() else {
            return;
        };
        let Some(died) = lock(&self.ended).get(&pid).copied() else {
            return;
        };
        if died < listed {
            self.violate(format!(
                "dead waiter named: a release's tombstone on {} names {named}, whose process (pid {pid}) ended at step {died}, before the release listed the queue at step {listed}: its turn lapses unclaimed and every claimant waits it out",
                short(key)
            ));
        }
    }

    /// A power cut with filesystem semantics: a record is durable only once its
    /// file and directory were flushed; a create cut off mid-write leaves its name
    /// with no data (torn). Removals are taken as durable (the worst case for the
    /// series). With a staged [`CreateProcedure`], a name whose directory was flushed
    /// survives even when its data was not (it reads as torn), and any other name
    /// not yet flushed is lost. An acknowledged flushed create that does not survive
    /// whole is a violation: the contract's durability promise (docs/protocol.md §4).
    pub(crate) fn power_cut(&self) -> usize {
        // Every process dies: removals still queued in them are never made.
        lock(&self.deferred).clear();
        let mut model = lock(&self.model);
        let mut oracle = lock(&self.oracle);
        let mut dropped = 0;
        let procedure = self.procedure;
        for (key, series) in &mut model.series {
            series.retain(|g, rec| {
                if rec.durable {
                    return true;
                }
                dropped += 1;
                oracle.created.remove(&(key.clone(), *g));
                if rec.acked && oracle.violation.is_none() {
                    oracle.violation = Some(format!(
                        "the power cut {} {} generation {g}, whose flushed create had returned Created (procedure {procedure:?}): an acknowledged claim must survive",
                        if rec.name_durable {
                            "left only a torn record of"
                        } else {
                            "lost"
                        },
                        short(key)
                    ));
                }
                if rec.name_durable {
                    rec.bytes.clear();
                    return true;
                }
                if !rec.complete {
                    rec.bytes.clear();
                    return true;
                }
                false
            });
        }
        dropped
    }

    /// A forward wall-clock step voids every open promise at once (docs/protocol.md §3.3: a
    /// forward step can expire a lease early; the fence makes that survivable).
    pub(crate) fn wall_step(&self) {
        lock(&self.wall_steps).push(self.step());
    }

    pub(crate) fn forward_step(&self) {
        let now = self.now();
        lock(&self.forward_steps).push((self.step(), now));
        for tenure in lock(&self.oracle).tenures.values_mut() {
            tenure.end = tenure.end.min(now);
        }
    }

    /// A record landed in `key`'s series: every watch of that key has a change
    /// pending, and a watcher asleep in `wait` becomes runnable at once.
    fn notify(&self, key: &Key) {
        self.wake(|w| &w.key == key && w.ticket.is_none());
    }

    /// Opens a watch of `key` for the current actor (of its ticket `ticket` of
    /// the key's queue, or of every record of the key): its id.
    fn open_watch(&self, key: &Key, ticket: Option<u64>) -> Option<u64> {
        let actor = current_actor()?;
        let id = self
            .next_watch
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.watchers).push(WatchSlot {
            id,
            actor,
            key: key.clone(),
            pending: false,
            waiting: false,
            ticket,
        });
        Some(id)
    }

    /// Every watch `which` picks has a change pending, and one asleep in `wait`
    /// becomes runnable at once.
    fn wake(&self, which: impl Fn(&WatchSlot) -> bool) {
        let now = self.now();
        let mut watchers = lock(&self.watchers);
        if watchers.is_empty() {
            return;
        }
        let mut st = self.sched.lock();
        for slot in watchers.iter_mut().filter(|w| which(w)) {
            slot.pending = true;
            if slot.waiting
                && let super::sched::Status::Waiting(Point::Sleep(until)) = st.status[slot.actor]
                && until > now
            {
                st.status[slot.actor] = super::sched::Status::Waiting(Point::Sleep(now));
            }
        }
    }

    /// Whether `key` is free for the oracle: its newest record is a tombstone, or a
    /// record whose expiry passed on the shared wall clock.
    /// The turn on `key`'s newest record, when it is a tombstone naming the next
    /// waiter: the generation and the named holder id.
    fn turn(&self, key: &Key) -> Option<(u64, String)> {
        let model = lock(&self.model);
        let (generation, rec) = model.series.get(key)?.iter().next_back()?;
        let Decoded::Record(record) = decode(&rec.bytes, key.as_str(), *generation) else {
            return None;
        };
        let turn = record.next.as_ref().filter(|_| record.released)?;
        Some((*generation, turn.holder.to_string()))
    }

    fn key_is_free(&self, key: &Key) -> Option<&'static str> {
        let model = lock(&self.model);
        let (generation, rec) = model.series.get(key)?.iter().next_back()?;
        let Decoded::Record(record) = decode(&rec.bytes, key.as_str(), *generation) else {
            return None;
        };
        let st = self.sched.lock();
        let wall = (st.now as i64 + st.wall_offset).max(0) as u64;
        if record.released {
            Some("released")
        } else if wall >= record.expires_at_ms && wall >= record.granted_at_ms {
            Some("expired")
        } else {
            None
        }
    }

    /// `key`'s newest generation in the model (0 when it has none).
    fn newest_generation(&self, key: &Key) -> u64 {
        lock(&self.model)
            .series
            .get(key)
            .and_then(|series| series.keys().next_back().copied())
            .unwrap_or(0)
    }

    /// The ticket at `ticket` in `queue` as the model holds it: `None` when there is
    /// none, `Some(None)` when it does not decode, else its holder id.
    fn ticket_holder(&self, queue: &Key, ticket: u64) -> Option<Option<String>> {
        lock(&self.model)
            .series
            .get(queue)
            .and_then(|series| series.get(&ticket))
            .map(|rec| match decode(&rec.bytes, queue.as_str(), ticket) {
                Decoded::Record(r) => Some(r.holder.to_string()),
                _ => None,
            })
    }

    /// Whether the current actor is a release that named nobody, between its
    /// tombstone and its listing of the queue `queue` (it drops the tickets it
    /// found gone then).
    fn dropping_gone(&self, queue: &Key) -> bool {
        current_actor().is_some_and(|actor| {
            matches!(lock(&self.ring_due).get(&actor),
                Some(RingDue::ListQueue(owner)) if owner.queue() == *queue)
        })
    }

    /// The ring oracle's check, at an actor's backend call: a tombstone it landed
    /// must have been rung first (see `ring_due`).
    pub(crate) fn check_ring_due(&self, what: &str) {
        let Some(actor) = current_actor() else {
            return;
        };
        if let Some(due) = lock(&self.ring_due).remove(&actor) {
            self.violate(format!(
                "lost ring: a tombstone landed and its releaser went on to {what} before {}: a waiter asleep on its ticket sleeps through the release",
                match due {
                    RingDue::Ring(key, ticket) =>
                        format!("ringing the ticket g{ticket} it names on {}", short(&key)),
                    RingDue::ListQueue(key) => format!(
                        "listing the queue of {} (it names nobody) to ring every ticket",
                        short(&key)
                    ),
                    RingDue::RingAll(key, left) => format!(
                        "ringing tickets {left:?} it listed in the queue of {}",
                        short(&key)
                    ),
                }
            ));
        }
    }

    fn landed(&self, key: &Key, generation: u64, bytes: &[u8]) {
        self.notify(key);
        let Decoded::Record(record) = decode(bytes, key.as_str(), generation) else {
            return;
        };
        if key.as_str().starts_with("queue-") {
            // A waiter's ticket: remember which acquisition (its open watch) it is.
            let actor = current_actor();
            let watch = lock(&self.watchers)
                .iter()
                .filter(|w| Some(w.actor) == actor)
                .map(|w| w.id)
                .max();
            if let Some(watch) = watch {
                lock(&self.tickets)
                    .entry(record.holder.to_string())
                    .or_default()
                    .push(watch);
            }
            if let Some(process) = &record.process {
                lock(&self.ticket_pids).insert(record.holder.to_string(), process.pid);
            }
            return;
        }
        if record.released && record.broken.is_none() {
            self.check_own_ticket_gone(key, &record.holder);
            if let Some(next) = &record.next {
                self.check_named_waiter_alive(key, &next.holder);
                lock(&self.named).insert(next.holder.to_string());
            }
        }
        let now = self.now();
        let (stamp_true, stamp_step) = current_actor()
            .map(|a| lock(&self.last_wall_read)[a])
            .unwrap_or((now, self.step()));
        let step = self.step();
        // Whether the record landed as the newest of its series: a break's
        // tombstone that lands below a newer record (a generation the holder's
        // renewals created and swept) ends nothing; its break looks again.
        let on_top = lock(&self.model)
            .series
            .get(key)
            .is_some_and(|s| s.range(generation + 1..).next().is_none());
        let mut violation = None;
        let by_release = current_actor().is_some_and(|a| lock(&self.releasing).contains(&a));
        {
            let mut oracle = lock(&self.oracle);
            if by_release && on_top && record.released && record.session.is_some() {
                oracle
                    .session_released
                    .entry((record.holder.to_string(), record.token))
                    .or_insert((step, now));
            }
            let count = oracle.created.entry((key.clone(), generation)).or_default();
            *count += 1;
            if *count > 1 {
                violation = Some(format!(
                    "two creates of {key} generation {generation} both reported Created"
                ));
            }
            // Release never evicts a successor: a tombstone that becomes the top of
            // the series must sit on its own tenure's record.
            if record.released {
                let model = lock(&self.model);
                // The record the tombstone sits on. A claim its creator never
                // trusts (its create took CREATE_GRACE_MS or longer) is never
                // handed out: a release that waited out its torn name for that
                // long may write above it (the release's `read_settled`).
                let below = model.series.get(key).and_then(|series| {
                    series.range(..generation).rev().find_map(|(g, rec)| {
                        match decode(&rec.bytes, key.as_str(), *g) {
                            Decoded::Record(r) => Some((r, rec.untrusted)),
                            _ => None,
                        }
                    })
                });
                let below = below.and_then(|(r, untrusted)| (!untrusted).then_some(r));
                let is_top = model
                    .series
                    .get(key)
                    .is_some_and(|s| s.range(generation + 1..).next().is_none());
                if let Some(below) =
                    below.filter(|b| is_top && b.holder != record.holder && !b.released)
                {
                    violation = Some(format!(
                        "release by {} wrote a tombstone over {}'s claim (generation {}) in {key}",
                        record.holder, below.holder, below.generation
                    ));
                }
            }
            // Only a holder of the tenure's secret writes its records: its acquirer,
            // or a process that resumed it with its handle. A break's tombstone is
            // the one record of a tenure someone else writes.
            if let Some(writer) = current_actor() {
                if record.broken.is_some() {
                    // One that lands below a newer record fences nothing; its
                    // break's acknowledgment, if any, does (`Ctx::break_lease`).
                    if on_top {
                        // The tenure it ends: the one whose record in this key lies
                        // below it (tokens are per series, so not by token).
                        let known = oracle.tenures.get(&*record.holder).and_then(|t| {
                            (t.keys.contains(key)
                                && t.gens.get(key).is_some_and(|g| *g < generation))
                            .then_some(t.token)
                        });
                        match known {
                            Some(token) => {
                                oracle
                                    .broken
                                    .entry((record.holder.to_string(), token))
                                    .or_insert((step, now));
                                if let Some(t) = oracle.tenures.get_mut(&*record.holder) {
                                    t.end = t.end.min(now);
                                    t.fenced_at = t.fenced_at.or(Some(step));
                                }
                            }
                            None => {
                                oracle
                                    .pending_breaks
                                    .entry((record.holder.to_string(), key.clone(), generation))
                                    .or_insert((step, now));
                            }
                        }
                    }
                } else {
                    let holds_session_secret =
                        oracle.session_secrets.get(&writer).is_some_and(|held| {
                            record
                                .secret_sha256
                                .as_ref()
                                .is_some_and(|hash| held.contains(&**hash))
                        });
                    let entitled = oracle
                        .entitled
                        .entry(record.holder.to_string())
                        .or_default();
                    if entitled.is_empty() || holds_session_secret {
                        entitled.insert(writer);
                    } else if !entitled.contains(&writer) {
                        let owner = &record.owner;
                        violation = Some(format!(
                            "{} wrote {} generation {generation} of {owner}'s tenure (token {}) without holding its secret: a non-holder {}",
                            self.names.get(writer).map_or("?", String::as_str),
                            short(key),
                            record.token,
                            if record.released {
                                "released it"
                            } else {
                                "renewed it"
                            }
                        ));
                    }
                }
            }
            // A release's tombstone that lands as the newest ends the tenure for
            // every handle of it, whichever released: a session's processes share
            // one tenure, and a renewal one of them had acknowledged while another
            // was releasing promises nothing past the release (found at
            // FENCEPOST_SCHEDULES=10000, `session_reentry` seed 7176).
            if record.released
                && record.broken.is_none()
                && on_top
                && let Some(t) = oracle
                    .tenures
                    .get_mut(&*record.holder)
                    .filter(|t| t.token == record.token)
            {
                t.end = t.end.min(now);
            }
            // Keyed apart by holder and kind: a break's tombstone carries the
            // holder's id and can land on a generation the holder's renewal held
            // before it was swept (its slow create), which must not erase that
            // renewal from what the oracle judges the tenure's promise by.
            oracle.landed.insert(
                (
                    key.clone(),
                    generation,
                    format!(
                        "{}{}",
                        record.holder,
                        if record.released { " (tombstone)" } else { "" }
                    ),
                ),
                Landed {
                    holder: record.holder.to_string(),
                    released: record.released,
                    stamp_true,
                    stamp_step,
                    ttl_ms: record.ttl_ms,
                    landed_at: now,
                    secret_sha256: record.secret_sha256.as_deref().map(str::to_string),
                },
            );
            // Another tenure's record in one of a tenure's series (its primary key,
            // or the file-id key of its file as it is now) fences it for good.
            for (holder, tenure) in oracle.tenures.iter_mut() {
                if **holder == *record.holder {
                    tenure
                        .gens
                        .entry(key.clone())
                        .and_modify(|g| *g = (*g).max(generation))
                        .or_insert(generation);
                    continue;
                }
                if tenure.fenced_at.is_some() {
                    continue;
                }
                let mine = tenure.gens.get(key).copied().unwrap_or(0);
                let in_series = tenure.keys.first() == Some(key)
                    || tenure
                        .resource
                        .identity()
                        .ok()
                        .and_then(|i| i.file_id)
                        .as_ref()
                        == Some(key)
                    || tenure.keys.contains(key);
                if in_series && generation > mine {
                    tenure.fenced_at = Some(step);
                }
            }
        }
        if let Some(v) = violation {
            self.violate(v);
        }
    }

    /// The hash of the secret in the records of tenure `holder`, if any landed.
    fn tenure_secret(&self, holder: &str) -> Option<String> {
        lock(&self.oracle)
            .landed
            .values()
            .find(|l| l.holder == holder)
            .and_then(|l| l.secret_sha256.clone())
    }

    /// Oracle for an act as the holder (resume, renew, release) that succeeded:
    /// the secret it presented must be the tenure's own. Returns false on a
    /// violation.
    fn proved(&self, who: &str, what: &str, lease: &Lease, presented: &fencepost::Secret) -> bool {
        let stored = self.tenure_secret(lease.holder_id());
        if stored.as_deref() == Some(presented.sha256().as_str()) {
            return true;
        }
        self.violate(format!(
            "{who}: {what} of token {} succeeded with a secret that is not the tenure's: a non-holder acted as the holder",
            lease.token()
        ));
        false
    }

    /// The promise a lease carries, in true time: the earliest stamp + ttl over the
    /// newest record of this holder in each of its keys.
    fn promise(&self, lease: &Lease) -> (u64, u64) {
        let oracle = lock(&self.oracle);
        let mut end = u64::MAX;
        let mut uncut = u64::MAX;
        for key in lease.keys() {
            let newest = oracle
                .landed
                .iter()
                .filter(|((k, _, _), l)| k == key && l.holder == lease.holder_id() && !l.released)
                .max_by_key(|((_, g, _), _)| *g)
                .map(|(_, l)| l.clone());
            if let Some(l) = newest {
                // A forward step after the stamp expires the record early.
                let cut = lock(&self.forward_steps)
                    .iter()
                    .copied()
                    .filter(|(step, _)| *step > l.stamp_step)
                    .map(|(_, t)| t)
                    .min()
                    .unwrap_or(u64::MAX);
                end = end.min(l.stamp_true + l.ttl_ms).min(cut);
                uncut = uncut.min(l.stamp_true + l.ttl_ms);
            } else {
                end = 0;
                uncut = 0;
            }
        }
        (end, uncut)
    }

    /// Oracle for an acknowledged acquire or renewal.
    fn acknowledged(&self, who: &str, lease: &Lease, renewal: bool, call_step: u64) {
        let now = self.now();
        let (end, uncut) = self.promise(lease);
        let mut violations = Vec::new();
        // The **reported-end oracle**: the end the lease reports is no later than
        // its records promise, the earliest over its keys (judged while the wall
        // clock never stepped, when wall and true time agree): a holder that works
        // until the end it was told must hold every key until then (a breaker: a
        // renewal that stalled between a file's keys reported the later one).
        if lock(&self.wall_steps).is_empty() && uncut > 0 && lease.expires_at_ms() > uncut {
            violations.push(format!(
                "{who}: {} reported token {} held until +{}ms, but its records end at +{}ms (a key ends sooner than the lease says)",
                if renewal { "renew" } else { "acquire" },
                lease.token(),
                lease.expires_at_ms().saturating_sub(now),
                uncut.saturating_sub(now),
            ));
        }
        {
            let mut oracle = lock(&self.oracle);
            if uncut <= now {
                violations.push(format!(
                    "{who}: {} acknowledged a lease (token {}) whose ttl had already run out by the oracle's clock ({}ms late)",
                    if renewal { "renew" } else { "acquire" },
                    lease.token(),
                    now - uncut
                ));
            }
            let holder = lease.holder_id().to_string();
            // A renewal acknowledged after a break landed (its confirming read came
            // first) promises nothing past the break.
            let broken = oracle.broken.get(&(holder.clone(), lease.token())).copied();
            // Or a break that landed in one of its series above its own record
            // there before the oracle knew the tenure by its token.
            let broken = broken.or_else(|| {
                lease
                    .keys()
                    .filter_map(|key| {
                        let own = oracle
                            .landed
                            .iter()
                            .filter(|((k, _, _), l)| k == key && l.holder == holder && !l.released)
                            .map(|((_, g, _), _)| *g)
                            .max()?;
                        oracle
                            .pending_breaks
                            .iter()
                            .filter(|((h, k, g), _)| *h == holder && k == key && *g > own)
                            .map(|(_, at)| *at)
                            .min()
                    })
                    .min()
            });
            if let Some(at) = broken {
                oracle
                    .broken
                    .entry((holder.clone(), lease.token()))
                    .or_insert(at);
            }
            let end = broken.map_or(end, |(_, at)| end.min(at));
            // Likewise one acknowledged after a release of its session's tenure by
            // another of its processes landed during this call.
            let released = oracle
                .session_released
                .get(&(holder.clone(), lease.token()))
                .copied()
                .filter(|(step, _)| *step > call_step);
            let end = released.map_or(end, |(_, at)| end.min(at));
            if renewal {
                if let Some(t) = oracle.tenures.get(&holder) {
                    // Per key: the renewal's record must land before the record it
                    // renews expired. A wall-clock step since that record's stamp
                    // changes when it expires (backwards: held while expiry is
                    // unknowable; forwards: early, survivable by the fence), so
                    // only renewals without one are judged.
                    for key in lease.keys() {
                        let mut mine: Vec<(&u64, &Landed)> = oracle
                            .landed
                            .iter()
                            .filter(|((k, _, _), l)| k == key && l.holder == holder && !l.released)
                            .map(|((_, g, _), l)| (g, l))
                            .collect();
                        mine.sort_by_key(|(g, _)| std::cmp::Reverse(**g));
                        let [(_, newest), (_, renewed), ..] = mine.as_slice() else {
                            continue;
                        };
                        let expired_at = renewed.stamp_true + renewed.ttl_ms;
                        let stepped = lock(&self.wall_steps)
                            .iter()
                            .any(|s| *s > renewed.stamp_step);
                        if newest.landed_at >= expired_at && !stepped {
                            violations.push(format!(
                                "{who}: renew of token {} was acknowledged, but its record landed {}ms after the renewed lease expired",
                                lease.token(),
                                newest.landed_at - expired_at
                            ));
                        }
                    }
                    if let Some(fenced) = t.fenced_at.filter(|f| *f < call_step) {
                        violations.push(format!(
                            "{who}: renew of token {} succeeded after it was fenced (by another tenure's record or a break, step {fenced})",
                            lease.token()
                        ));
                    }
                }
            } else if end > now {
                // (A promise a forward wall-clock step already voided is exempt: a
                // forward step may expire a lease early; the fence survives it.)
                let claim = claim_key(lease);
                let shared_best = oracle.shared_tokens.get(&claim).copied().unwrap_or(0);
                if !lease.shared() && lease.token() < shared_best {
                    violations.push(format!(
                        "{who}: acquire returned token {}, below the earlier shared token {shared_best} (tokens went down)",
                        lease.token(),
                    ));
                }
                let best = oracle.tokens.entry(claim.clone()).or_default();
                if lease.token() <= *best {
                    violations.push(format!(
                        "{who}: acquire returned token {}, not above the earlier {}tenure's token {}",
                        lease.token(),
                        if lease.shared() { "exclusive " } else { "" },
                        best
                    ));
                }
                if lease.shared() {
                    let shared = oracle.shared_tokens.entry(claim).or_default();
                    *shared = (*shared).max(lease.token());
                } else {
                    *best = (*best).max(lease.token());
                }
            }
            let keys: Vec<Key> = lease.keys().cloned().collect();
            let claim = claim_key(lease);
            let above = lease.resource().subtree_keys_above().unwrap_or_default();
            for (other, t) in &oracle.tenures {
                // Shared with shared never conflicts; shared with exclusive as two
                // exclusive claims of the resource would.
                let same_key = match (lease.shared(), t.shared) {
                    (true, true) => false,
                    (true, false) => t.keys.contains(&claim),
                    (false, true) => keys.contains(&t.claim),
                    (false, false) => t.keys.iter().any(|k| keys.contains(k)),
                };
                let overlap = !(lease.shared() && t.shared)
                    && (same_key
                        || covers(
                            lease.resource(),
                            &claim,
                            &above,
                            &t.resource,
                            &t.claim,
                            &t.above,
                        ));
                if *other != holder && end > now && t.end > now && overlap {
                    violations.push(format!(
                        "{who} was told it holds token {} while {} was still promised token {} until +{}ms (two holders at one instant{})",
                        lease.token(),
                        t.actor,
                        t.token,
                        t.end - now,
                        if same_key {
                            ""
                        } else {
                            ", one a subtree covering the other"
                        }
                    ));
                }
            }
            let gens: HashMap<Key, u64> = oracle
                .landed
                .iter()
                .filter(|(_, l)| l.holder == holder)
                .fold(HashMap::new(), |mut m, ((k, g, _), _)| {
                    let e = m.entry(k.clone()).or_insert(0);
                    *e = (*e).max(*g);
                    m
                });
            let fenced_at = oracle
                .tenures
                .get(&holder)
                .filter(|t| t.token == lease.token())
                .and_then(|t| t.fenced_at)
                .or_else(|| broken.map(|(step, _)| step));
            oracle.tenures.insert(
                holder,
                Tenure {
                    actor: who.to_string(),
                    token: lease.token(),
                    resource: lease.resource().clone(),
                    keys,
                    end,
                    fenced_at,
                    gens,
                    above,
                    shared: lease.shared(),
                    claim,
                    session: lease.session_tag().cloned(),
                },
            );
        }
        for v in violations {
            self.violate(v);
        }
    }
}

/// The scripted model backend: exclusive create under one mutex, with every call a
/// scheduling point and the faults the controller attaches.
#[derive(Debug, Clone)]
pub struct ModelStore(pub(crate) Arc<World>);

fn injected(op: &'static str, key: &Key) -> BackendError {
    BackendError::new(op, key, std::io::Error::other("injected fault"))
}

/// A fixed scramble: the order of a hashed directory.
fn hash_position(generation: u64) -> u64 {
    generation
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(17)
}

impl ModelStore {
    fn land(&self, key: &Key, generation: u64, bytes: &[u8], durable: bool) -> CreateOutcome {
        let mut model = lock(&self.0.model);
        model.creates += 1;
        let id = model.creates;
        let series = model.series.entry(key.clone()).or_default();
        if series.contains_key(&generation) {
            return CreateOutcome::AlreadyExists;
        }
        series.insert(generation, Rec::new(bytes.to_vec(), true, durable, id));
        drop(model);
        self.0.landed(key, generation, bytes);
        CreateOutcome::Created
    }
}

impl ModelStore {
    /// Runs `f` on the record `generation` of `key` made by create `id`, if that
    /// name still holds it (a sweep may have removed it, and someone re-created it).
    fn with_rec<T>(
        &self,
        key: &Key,
        generation: u64,
        id: u64,
        f: impl FnOnce(&mut Rec) -> T,
    ) -> Option<T> {
        lock(&self.0.model)
            .series
            .get_mut(key)
            .and_then(|s| s.get_mut(&generation))
            .filter(|rec| rec.id == id)
            .map(f)
    }

    /// A flushed create by the world's staged [`CreateProcedure`]: one step at a
    /// time, a scheduling point between steps, so a power cut (or a crash) can fall
    /// between any two of them.
    fn create_by_procedure(
        &self,
        key: &Key,
        generation: u64,
        bytes: &[u8],
        what: &str,
    ) -> Result<CreateOutcome, BackendError> {
        let world = &self.0;
        let label = short(key);
        let mut data_durable = false;
        let mut id = None;
        for (i, step) in world.procedure.steps().iter().enumerate() {
            if i > 0 {
                world.sched.point(Point::Landing(world.now()));
            }
            match *step {
                ProcedureStep::Name { complete } => {
                    let new_id = {
                        let mut model = lock(&world.model);
                        model.creates += 1;
                        let new_id = model.creates;
                        let series = model.series.entry(key.clone()).or_default();
                        if series.contains_key(&generation) {
                            drop(model);
                            world.log(format!(
                                "create {label} g{generation} ({what}) -> AlreadyExists"
                            ));
                            return Ok(CreateOutcome::AlreadyExists);
                        }
                        let shown = if complete { bytes.to_vec() } else { Vec::new() };
                        let mut rec = Rec::new(shown, complete, false, new_id);
                        rec.data_durable = data_durable;
                        series.insert(generation, rec);
                        new_id
                    };
                    id = Some(new_id);
                    if complete {
                        world.landed(key, generation, bytes);
                    }
                    world.log(format!(
                        "create {label} g{generation} ({what}): name linked{}",
                        if complete {
                            ""
                        } else {
                            ", nothing written yet"
                        }
                    ));
                }
                ProcedureStep::Write => {
                    let visible = id.and_then(|id| {
                        self.with_rec(key, generation, id, |rec| {
                            rec.bytes = bytes.to_vec();
                            rec.complete = true;
                            rec.settle();
                        })
                    });
                    if visible.is_some() {
                        world.landed(key, generation, bytes);
                    }
                    world.log(format!("create {label} g{generation}: written"));
                }
                ProcedureStep::FlushFile => {
                    data_durable = true;
                    if let Some(id) = id {
                        self.with_rec(key, generation, id, |rec| {
                            rec.data_durable = true;
                            rec.settle();
                        });
                    }
                    world.log(format!("create {label} g{generation}: file flushed"));
                }
                ProcedureStep::FlushDir => {
                    // A directory flush makes every name in it durable, whoever
                    // made them; their data only if it was flushed too.
                    if let Some(series) = lock(&world.model).series.get_mut(key) {
                        for rec in series.values_mut() {
                            rec.name_durable = true;
                            rec.settle();
                        }
                    }
                    world.log(format!("create {label} g{generation}: directory flushed"));
                }
            }
        }
        if let Some(id) = id {
            self.with_rec(key, generation, id, |rec| rec.acked = true);
        }
        world.log(format!(
            "create {label} g{generation} -> Created ({:?})",
            world.procedure
        ));
        Ok(CreateOutcome::Created)
    }
}

/// A change watch of the model backend: `wait` is a sleep that a landing record of
/// its key ends early.
struct ModelWatch {
    world: Arc<World>,
    id: u64,
    key: Key,
}

impl ModelWatch {
    fn boxed(world: &Arc<World>, id: u64, key: &Key) -> Box<dyn fencepost::ChangeWatch> {
        Box::new(ModelWatch {
            world: Arc::clone(world),
            id,
            key: key.clone(),
        })
    }
}

impl fencepost::ChangeWatch for ModelWatch {
    fn wait(&mut self, timeout: Duration) -> bool {
        let world = &self.world;
        world.land_deferred();
        let ms = (timeout.as_millis() as u64).max(1);
        let label = short(&self.key);
        let on_ticket = {
            let mut watchers = lock(&world.watchers);
            let Some(slot) = watchers.iter_mut().find(|w| w.id == self.id) else {
                return false;
            };
            if slot.pending {
                slot.pending = false;
                drop(watchers);
                world.log(format!("wait for a change of {label}: one is pending"));
                return true;
            }
            slot.waiting = true;
            slot.ticket
        };
        // The gone-ticket oracle: a watch on a ticket that was removed, with its
        // removal's wake-up already taken, is rung by nobody: its waiter sleeps to
        // the fallback through every release (it must look for its ticket, and
        // join again, before it sleeps on one).
        if let Some(ticket) = on_ticket {
            let queue = self.key.queue();
            let there = lock(&world.model)
                .series
                .get(&queue)
                .is_some_and(|series| series.contains_key(&ticket));
            if !there {
                world.violate(format!(
                    "gone ticket: a waiter sleeps on the watch of its ticket g{ticket} of {label}, removed since: nobody rings it"
                ));
            }
            // The reused-ticket oracle: the ticket there is another acquisition's
            // (its number given again after ours was removed): a release that names
            // it rings the other waiter's turn, and none ever names this one.
            let now_holder = world.ticket_holder(&queue, ticket).flatten();
            let mine = lock(&world.tickets)
                .iter()
                .find(|(_, watches)| watches.contains(&self.id))
                .map(|(holder, _)| holder.clone());
            if let (Some(now_holder), Some(mine)) = (now_holder, mine)
                && now_holder != mine
            {
                world.violate(format!(
                    "reused ticket: {mine} sleeps on the watch of its ticket g{ticket} of {label}, which is now {now_holder}'s (the number given again after {mine}'s was removed): rings for {now_holder}'s turn wake it, and no release names it"
                ));
            }
        }
        let on_ticket = on_ticket.is_some();
        // The turn oracle: a release's tombstone that names the next waiter keeps
        // the key for it for TURN_MS. The named waiter must not sleep on it (the
        // key is free for it), and any other waiter may sleep on one turn no longer
        // than TURN_MS in all (after that the turn lapsed and the key is free).
        let turn = world.turn(&self.key).filter(|(_, named)| {
            !lock(&world.tickets)
                .get(named)
                .is_some_and(|watches| watches.contains(&self.id))
        });
        // What it already slept on this turn (woken early or not) plus what it asks
        // for now must stay within TURN_MS. A waiter asleep on its ticket is not
        // woken by the tombstone that starts a turn (only the named waiter is
        // rung), so one sleep begun on an older read may run to CHANGE_WAIT_MAX
        // first: TURN_MS + CHANGE_WAIT_MAX in all (docs/design-07-performance.md,
        // "Who is woken: rings").
        let fallback = fencepost::CHANGE_WAIT_MAX.as_millis() as u64;
        let bound = fencepost::TURN_MS + if on_ticket { fallback } else { 0 };
        let turn_slot = turn
            .as_ref()
            .map(|(generation, _)| (self.id, self.key.clone(), *generation));
        if let Some(slot) = &turn_slot {
            let slept = lock(&world.turn_sleeps).get(slot).copied().unwrap_or(0);
            if slept + ms > bound {
                world.violate(format!(
                    "lapsed turn: a waiter that slept {slept} ms on the turn of another waiter on {label} (g{}) asks to sleep {ms} ms more (more than {bound} ms in all), past the turn's lapse",
                    slot.2
                ));
            }
        }
        let sleep_began = world.now();
        // The lost wake-up oracle: sleeping on a key that is already free, with
        // nothing pending, is sleeping through the resource. After a release (an
        // event) that means the watch missed it; after an expiry (no event) the
        // wait must end within CHANGE_WAIT_MAX. A tombstone naming another waiter
        // is judged above; one naming this waiter is free for it, as any other.
        // On a ticket: a release whose tombstone already landed and that owes its
        // ring (not yet made) is a wake-up in flight, not a lost one; the ring
        // oracle holds the release to making it.
        let ring_in_flight = on_ticket
            && lock(&world.ring_due).values().any(|due| match due {
                RingDue::Ring(key, _) | RingDue::ListQueue(key) | RingDue::RingAll(key, _) => {
                    *key == self.key
                }
            });
        // A ring its release could not make (its listing of the queue failed) is
        // made up for by the fallback: a waiter on its ticket sleeps no longer
        // than CHANGE_WAIT_MAX while that release's tombstone is the newest.
        let ring_lost = on_ticket
            && ms <= fallback
            && lock(&world.rings_lost)
                .contains(&(self.key.clone(), world.newest_generation(&self.key)));
        match world
            .key_is_free(&self.key)
            .filter(|_| turn.is_none() && !ring_in_flight && !ring_lost)
        {
            Some("released") => world.violate(format!(
                "lost wake-up: a waiter sleeps up to {ms} ms on a change of {label}, whose newest record is already a tombstone and no change is pending"
            )),
            Some(why) if timeout > fencepost::CHANGE_WAIT_MAX => world.violate(format!(
                "lost wake-up: a waiter sleeps {ms} ms (more than CHANGE_WAIT_MAX) on {label}, which is {why}"
            )),
            _ => {}
        }
        world.log(format!(
            "wait for a change of {label} (up to {ms} ms{})",
            if on_ticket { ", on its ticket" } else { "" }
        ));
        world.sched.point(Point::Sleep(world.now() + ms));
        if let Some(slot) = turn_slot {
            *lock(&world.turn_sleeps).entry(slot).or_default() +=
                world.now().saturating_sub(sleep_began);
        }
        let mut watchers = lock(&world.watchers);
        let Some(slot) = watchers.iter_mut().find(|w| w.id == self.id) else {
            return false;
        };
        slot.waiting = false;
        let woken = std::mem::take(&mut slot.pending);
        drop(watchers);
        world.log(format!(
            "wait for a change of {label} -> {}",
            if woken { "woken" } else { "timed out" }
        ));
        woken
    }
}

impl Drop for ModelWatch {
    fn drop(&mut self) {
        lock(&self.world.watchers).retain(|w| w.id != self.id);
    }
}

impl ModelStore {
    fn create_model(
        &self,
        key: &Key,
        generation: u64,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<CreateOutcome, BackendError> {
        let world = &self.0;
        let durable = durability == Durability::Flushed;
        let what = match decode(bytes, key.as_str(), generation) {
            Decoded::Record(r) if r.released => "tombstone",
            Decoded::Record(_) => "claim",
            _ => "record",
        };
        let fault = world.sched.point(Point::Create);
        // When the create started: one that completes CREATE_GRACE_MS or more
        // later is never trusted by its creator (`Rec::untrusted`).
        let started = world.now();
        let label = short(key);
        match fault {
            Fault::ErrBefore => {
                world.log(format!(
                    "create {label} g{generation} ({what}) -> error, nothing landed"
                ));
                Err(injected("create", key))
            }
            Fault::Slow => {
                world.log(format!(
                    "create {label} g{generation} ({what}) ... in flight"
                ));
                world
                    .sched
                    .point(Point::Landing(world.now() + world.inflight_ms));
                let outcome = self.land(key, generation, bytes, durable);
                if outcome == CreateOutcome::Created {
                    world.mark_if_untrusted(key, generation, None, started);
                }
                world.log(format!(
                    "create {label} g{generation} lands late -> {outcome:?}"
                ));
                Ok(outcome)
            }
            Fault::HalfWritten => {
                let id = {
                    let mut model = lock(&world.model);
                    model.creates += 1;
                    let id = model.creates;
                    let series = model.series.entry(key.clone()).or_default();
                    if series.contains_key(&generation) {
                        drop(model);
                        world.log(format!(
                            "create {label} g{generation} ({what}) -> AlreadyExists"
                        ));
                        return Ok(CreateOutcome::AlreadyExists);
                    }
                    series.insert(
                        generation,
                        Rec::new(bytes[..bytes.len() / 2].to_vec(), false, false, id),
                    );
                    id
                };
                if key.as_str().starts_with("queue-") {
                    lock(&world.torn_tickets).insert((key.clone(), generation));
                }
                world.log(format!(
                    "create {label} g{generation} ({what}) ... name reserved, half written"
                ));
                world
                    .sched
                    .point(Point::Landing(world.now() + world.inflight_ms));
                // The write goes to the file this create made; if a sweep removed
                // that name meanwhile (and someone else created it again), the
                // bytes go nowhere visible, as with an unlinked open file.
                let visible = {
                    let mut model = lock(&world.model);
                    match model
                        .series
                        .get_mut(key)
                        .and_then(|s| s.get_mut(&generation))
                        .filter(|rec| rec.id == id)
                    {
                        Some(rec) => {
                            rec.bytes = bytes.to_vec();
                            rec.complete = true;
                            rec.durable = durable;
                            true
                        }
                        None => false,
                    }
                };
                if visible {
                    world.mark_if_untrusted(key, generation, Some(id), started);
                    world.landed(key, generation, bytes);
                    world.log(format!("create {label} g{generation} completes -> Created"));
                } else {
                    world.log(format!(
                        "create {label} g{generation} completes into a removed file -> Created"
                    ));
                }
                Ok(CreateOutcome::Created)
            }
            Fault::ErrAfter => {
                let outcome = self.land(key, generation, bytes, durable);
                world.log(format!(
                    "create {label} g{generation} ({what}) -> {outcome:?}, then reports an error"
                ));
                Err(injected("create", key))
            }
            _ if durable && world.procedure != CreateProcedure::Atomic => {
                self.create_by_procedure(key, generation, bytes, what)
            }
            _ => {
                let outcome = self.land(key, generation, bytes, durable);
                world.log(format!(
                    "create {label} g{generation} ({what}) -> {outcome:?}"
                ));
                Ok(outcome)
            }
        }
    }
}

impl LeaseStore for ModelStore {
    fn notifies_changes(&self) -> bool {
        self.0.notify
    }

    fn watch_changes(&self, key: &Key) -> Option<Box<dyn fencepost::ChangeWatch>> {
        let world = &self.0;
        if !world.notify {
            return None;
        }
        world.check_ring_due("watch a key");
        let id = world.open_watch(key, None)?;
        world.log(format!("watch {} for changes", short(key)));
        Some(ModelWatch::boxed(world, id, key))
    }

    fn watch_ticket(&self, key: &Key, ticket: u64) -> Option<Box<dyn fencepost::ChangeWatch>> {
        let world = &self.0;
        if !world.notify {
            return None;
        }
        world.check_ring_due("watch a ticket");
        // As the trait asks (and inotify does): no watch on a ticket that is gone.
        let queue = key.queue();
        // The acquisition this ticket is (its holder id, if it decodes), for the
        // turn oracles.
        let landed = world.ticket_holder(&queue, ticket);
        let Some(holder) = landed else {
            world.log(format!(
                "watch ticket g{ticket} of {}: gone, no watch",
                short(key)
            ));
            return None;
        };
        let id = world.open_watch(key, Some(ticket))?;
        if let Some(holder) = holder {
            lock(&world.tickets).entry(holder).or_default().push(id);
        }
        world.log(format!("watch ticket g{ticket} of {}", short(key)));
        Some(ModelWatch::boxed(world, id, key))
    }

    fn ring(&self, key: &Key, ticket: u64) {
        let world = &self.0;
        let label = short(key);
        if let Some(actor) = current_actor() {
            let mut owed = lock(&world.ring_due);
            let due = owed.remove(&actor);
            match due {
                Some(RingDue::Ring(due_key, due_ticket))
                    if due_key == *key && due_ticket == ticket => {}
                Some(RingDue::RingAll(due_key, mut left))
                    if due_key == *key && left.contains(&ticket) =>
                {
                    left.remove(&ticket);
                    if !left.is_empty() {
                        owed.insert(actor, RingDue::RingAll(due_key, left));
                    }
                }
                Some(due) => world.violate(format!(
                    "wrong ring: its releaser owed {due:?}, and rang ticket g{ticket} of {label}"
                )),
                // A ring nobody owes wakes a waiter early: harmless.
                None => {}
            }
        }
        // A ring of a ticket nobody watches any more (its waiter, passed over,
        // removed it and queued again under a new number, or left) reaches nobody:
        // a waiter of the key on another ticket wakes by its fallback read, within
        // CHANGE_WAIT_MAX, as after a ring its release could not make (found at
        // FENCEPOST_SCHEDULES=10000, `turn_handover` seed 9857).
        let watched = lock(&world.watchers)
            .iter()
            .any(|w| &w.key == key && w.ticket == Some(ticket));
        if watched {
            world.log(format!("ring ticket g{ticket} of {label}"));
        } else {
            world.log(format!(
                "ring ticket g{ticket} of {label} (nobody watches it: lost)"
            ));
            let newest = world.newest_generation(key);
            lock(&world.rings_lost).insert((key.clone(), newest));
        }
        world.wake(|w| &w.key == key && w.ticket == Some(ticket));
    }

    fn create(
        &self,
        key: &Key,
        generation: u64,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<CreateOutcome, BackendError> {
        self.0.land_deferred();
        let world = &self.0;
        world.check_ring_due("create a record");
        let outcome = self.create_model(key, generation, bytes, durability);
        // The ring oracle: a tombstone that landed (as its releaser was told) must
        // be rung before the releaser's next backend call, where waiters sleep on
        // tickets: its named waiter's, or the whole queue's when it names nobody.
        if world.notify
            && matches!(outcome, Ok(CreateOutcome::Created))
            && !key.as_str().starts_with("queue-")
            && let Decoded::Record(record) = decode(bytes, key.as_str(), generation)
            && record.released
            && let Some(actor) = current_actor()
        {
            let due = match record.next.as_ref() {
                Some(turn) => RingDue::Ring(key.clone(), turn.ticket),
                None => RingDue::ListQueue(key.clone()),
            };
            world.log(format!("tombstone landed: owes {due:?}"));
            lock(&world.ring_due).insert(actor, due);
        }
        outcome
    }

    fn generations(&self, key: &Key) -> Result<Vec<u64>, BackendError> {
        self.0.land_deferred();
        let world = &self.0;
        // A release whose tombstone names nobody lists the queue next, to ring its
        // oldest ticket; any other listing first is a lost ring.
        // (Looked at, not taken, until the listing is done: the ring is still
        // owed while this actor waits at the listing's scheduling point.)
        let actor = current_actor();
        let owed = actor.is_some_and(|actor| {
            matches!(lock(&world.ring_due).get(&actor),
                Some(RingDue::ListQueue(owner)) if owner.queue() == *key)
        });
        if !owed {
            world.check_ring_due("list a series");
        }
        let fault = world.stall(world.sched.point(Point::List));
        world.note_queue_fault(key, fault);
        if fault != Fault::ErrBefore
            && key.as_str().starts_with("queue-")
            && let Some(actor) = actor
        {
            lock(&world.queue_listed).insert(actor, world.step());
        }
        if fault == Fault::ErrBefore {
            world.log(format!("list {} -> error", short(key)));
            if owed && let Some(actor) = actor {
                // No listing, nobody to ring: the waiter's fallback read covers it.
                if let Some(RingDue::ListQueue(owner)) = lock(&world.ring_due).remove(&actor) {
                    let newest = world.newest_generation(&owner);
                    lock(&world.rings_lost).insert((owner, newest));
                }
            }
            return Err(injected("list", key));
        }
        let listed: Vec<u64> = if world.snapshot_listing {
            lock(&world.model)
                .series
                .get(key)
                .map(|s| s.keys().copied().collect())
                .unwrap_or_default()
        } else {
            // A cursor scan in hash order: an entry created behind the cursor, or
            // removed before the cursor reaches it, is missed.
            let mut out = Vec::new();
            let mut cursor = None;
            loop {
                let next = lock(&world.model).series.get(key).and_then(|s| {
                    s.keys()
                        .copied()
                        .filter(|g| cursor.is_none_or(|c| hash_position(*g) > c))
                        .min_by_key(|g| hash_position(*g))
                });
                let Some(g) = next else { break };
                out.push(g);
                cursor = Some(hash_position(g));
                world.sched.point(Point::ListCursor);
            }
            out
        };
        // What this actor's handle handed to its removal thread reads as removed.
        let (listed, hiding): (Vec<u64>, Vec<u64>) =
            listed.into_iter().partition(|g| !world.hidden(key, *g));
        if hiding.is_empty() {
            world.log(format!("list {} -> {listed:?}", short(key)));
        } else {
            world.log(format!(
                "list {} -> {listed:?} (hidden from its handle: {hiding:?}, their removal queued)",
                short(key)
            ));
        }
        if owed && let Some(actor) = actor {
            let mut due = lock(&world.ring_due);
            if let Some(RingDue::ListQueue(owner)) = due.remove(&actor)
                && !listed.is_empty()
            {
                due.insert(
                    actor,
                    RingDue::RingAll(owner, listed.iter().copied().collect()),
                );
            }
        }
        Ok(listed)
    }

    fn read(&self, key: &Key, generation: u64) -> Result<Option<Vec<u8>>, BackendError> {
        self.0.land_deferred();
        let world = &self.0;
        // A release that names nobody reads each ticket it found gone before it
        // removes it (the same ticket still?), before it lists the queue to ring.
        if !world.dropping_gone(key) {
            world.check_ring_due("read a record");
        }
        let fault = world.stall(world.sched.point(Point::Read));
        world.note_queue_fault(key, fault);
        if fault == Fault::ErrBefore {
            world.log(format!("read {} g{generation} -> error", short(key)));
            return Err(injected("read", key));
        }
        if world.hidden(key, generation) {
            world.log(format!(
                "read {} g{generation} -> absent (its removal is queued: hidden from its handle)",
                short(key)
            ));
            return Ok(None);
        }
        let rec = lock(&world.model)
            .series
            .get(key)
            .and_then(|s| s.get(&generation))
            .cloned();
        world.log(format!(
            "read {} g{generation} -> {}",
            short(key),
            match &rec {
                None => "absent".to_string(),
                Some(r) if !r.complete => "torn (a create in progress or cut off)".to_string(),
                Some(r) => describe(&r.bytes, key, generation),
            }
        ));
        Ok(rec.map(|r| r.bytes))
    }

    fn remove(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
        self.0.land_deferred();
        let world = &self.0;
        // A release that names nobody removes the tickets it found gone before
        // it lists the queue to ring.
        if !world.dropping_gone(key) {
            world.check_ring_due("remove a record");
        }
        let fault = world.stall(world.sched.point(Point::Remove));
        world.note_queue_fault(key, fault);
        if fault == Fault::ErrBefore {
            world.log(format!("remove {} g{generation} -> error", short(key)));
            return Err(injected("remove", key));
        }
        world.remove_model(key, generation);
        Ok(())
    }

    /// The sweep's removal: made before returning, or (with [`FaultMix::defer`](super::FaultMix::defer))
    /// handed over and made at a later point of this actor, as the fs backend's
    /// removal thread makes it (`World::land_deferred`).
    fn remove_superseded(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
        let world = &self.0;
        let Some(actor) = current_actor().filter(|_| world.defer) else {
            return self.remove(key, generation);
        };
        world.land_deferred();
        world.check_ring_due("hand over a removal");
        world.log(format!(
            "hand the removal of {} g{generation} to the removal thread",
            short(key)
        ));
        lock(&world.deferred)
            .entry(actor)
            .or_default()
            .push_back((key.clone(), generation));
        Ok(())
    }
    /// Drops `key`'s series from the model when it holds no records (the fs
    /// backend's `rmdir`), so that [`keys`](LeaseStore::keys) no longer lists it:
    /// a scheduling point of its own, which may fail before anything is done.
    fn remove_key_if_empty(&self, key: &Key) -> Result<(), BackendError> {
        self.0.land_deferred();
        let world = &self.0;
        let fault = world.stall(world.sched.point(Point::Remove));
        if fault == Fault::ErrBefore {
            world.log(format!("remove key {} -> error", short(key)));
            return Err(injected("remove key", key));
        }
        let mut model = lock(&world.model);
        if model.series.get(key).is_some_and(BTreeMap::is_empty) {
            model.series.remove(key);
            drop(model);
            world.log(format!("remove key {}", short(key)));
        }
        Ok(())
    }

    fn keys(&self) -> Result<Vec<Key>, BackendError> {
        self.0.land_deferred();
        self.0.sched.point(Point::Keys);
        Ok(lock(&self.0.model).series.keys().cloned().collect())
    }

    fn listing_is_snapshot(&self) -> bool {
        self.0.snapshot_listing
    }

    fn locator(&self) -> String {
        "checker:".into()
    }
}

impl World {
    /// Removes record `generation` of `key` from the model, judging the removal:
    /// what a `remove` does once its fault point passed, and what a deferred removal
    /// does when it lands.
    fn remove_model(&self, key: &Key, generation: u64) {
        let world = self;
        world.check_live_ticket_kept(key, generation);
        let durable_max = {
            let mut model = lock(&world.model);
            let series = model.series.entry(key.clone()).or_default();
            series.remove(&generation);
            series
                .iter()
                // A name that survives torn keeps numbering above it too.
                .filter(|(_, rec)| rec.durable || rec.name_durable)
                .map(|(g, _)| *g)
                .max()
                .unwrap_or(0)
        };
        let issued = {
            let mut oracle = lock(&world.oracle);
            oracle.created.remove(&(key.clone(), generation));
            oracle.tokens.get(key).copied().unwrap_or(0)
        };
        world.log(format!("remove {} g{generation}", short(key)));
        if key.as_str().starts_with("queue-") {
            // A ticket's removal wakes the waiter asleep on it, as its file's
            // unlink does a ticket watch (passed over: it queues again).
            world.wake(|w| w.key.queue() == *key && w.ticket == Some(generation));
        }
        // I2 across power cuts, judged at every removal: were the power cut now,
        // numbering must still continue above every token already issued.
        if durable_max < issued {
            world.violate(format!(
                "removing {} generation {generation} left no durable record at or above issued token {issued}: a power cut now would restart numbering below it",
                short(key)
            ));
        }
    }

    /// Gives the current actor's oldest deferred removal its chance to land, as a
    /// scheduling point of its own: called before each of the actor's backend calls
    /// and sleeps, so the removal thread's removal falls anywhere after the call
    /// that handed it over, relative to every other actor. `Slow` passes this chance
    /// up; `ErrBefore` makes the removal fail (the thread ignores it, as the
    /// protocol does any removal's error).
    pub(crate) fn land_deferred(&self) {
        self.land_one_deferred(false);
    }

    /// Makes the actor's remaining deferred removals (its handle dropped: the
    /// thread drains its queue), each still able to fail.
    pub(crate) fn drain_deferred(&self) {
        while self.land_one_deferred(true) {}
    }

    /// Marks record `generation` of `key` (the one created as `id`, when given)
    /// untrusted if its create, started at true time `started`, took
    /// `CREATE_GRACE_MS` or longer.
    fn mark_if_untrusted(&self, key: &Key, generation: u64, id: Option<u64>, started: u64) {
        if self.now().saturating_sub(started) < fencepost::CREATE_GRACE_MS {
            return;
        }
        if let Some(rec) = lock(&self.model)
            .series
            .get_mut(key)
            .and_then(|s| s.get_mut(&generation))
            .filter(|rec| id.is_none_or(|id| rec.id == id))
        {
            rec.untrusted = true;
        }
    }

    /// Forgets the actor's deferred removals: its process died with them queued.
    pub(crate) fn drop_deferred(&self, actor: usize) {
        if let Some(queue) = lock(&self.deferred).remove(&actor)
            && !queue.is_empty()
        {
            self.log(format!(
                "{} deferred removal(s) die with the process, never made",
                queue.len()
            ));
        }
    }

    fn land_one_deferred(&self, draining: bool) -> bool {
        let Some(actor) = current_actor().filter(|_| self.defer) else {
            return false;
        };
        let pending = lock(&self.deferred)
            .get(&actor)
            .and_then(|queue| queue.front().cloned());
        let Some((key, generation)) = pending else {
            return false;
        };
        let fault = self.sched.point(Point::Deferred);
        if fault == Fault::Slow && !draining {
            return false;
        }
        if let Some(queue) = lock(&self.deferred).get_mut(&actor) {
            queue.pop_front();
        }
        if fault == Fault::ErrBefore {
            self.log(format!(
                "the removal thread's removal of {} g{generation} -> error (ignored)",
                short(&key)
            ));
        } else {
            self.log(format!(
                "the removal thread removes {} g{generation}",
                short(&key)
            ));
            self.remove_model(&key, generation);
        }
        true
    }

    /// Whether `generation` of `key` waits in the current actor's deferred
    /// removals: its handle already reads it as removed.
    fn hidden(&self, key: &Key, generation: u64) -> bool {
        current_actor().is_some_and(|actor| {
            lock(&self.deferred)
                .get(&actor)
                .is_some_and(|queue| queue.iter().any(|(k, g)| k == key && *g == generation))
        })
    }
}

fn short(key: &Key) -> String {
    let s = key.as_str();
    let (kind, hash) = s.split_once('-').unwrap_or(("key", s));
    format!("{kind}:{}", &hash[..hash.len().min(6)])
}

fn describe(bytes: &[u8], key: &Key, generation: u64) -> String {
    match decode(bytes, key.as_str(), generation) {
        Decoded::Record(r) if r.released => format!("tombstone of token {}", r.token),
        Decoded::Record(r) => format!(
            "claim token {} by {} expires {}",
            r.token,
            r.owner,
            r.expires_at_ms.saturating_sub(super::START_MS) as i64
        ),
        Decoded::Newer { v, .. } => format!("format v{v}"),
        Decoded::Torn(why) => format!("torn ({why})"),
    }
}

/// The virtual clock: true time advances only by the controller's decisions and by
/// sleeps; the wall clock is true time plus a shared offset the controller steps.
#[derive(Debug, Clone)]
pub struct ModelClock(pub(crate) Arc<World>);

impl Clock for ModelClock {
    fn wall_ms(&self) -> u64 {
        self.0.sched.point(Point::Clock);
        let st = self.0.sched.lock();
        let wall = (st.now as i64 + st.wall_offset).max(0) as u64;
        let now = st.now;
        drop(st);
        if let Some(a) = current_actor() {
            lock(&self.0.last_wall_read)[a] = (now, self.0.step());
        }
        wall
    }
    fn monotonic_ms(&self) -> u64 {
        self.0.sched.point(Point::Clock);
        self.0.sched.lock().now
    }
    fn sleep(&self, duration: Duration) {
        self.0.land_deferred();
        let until = self.0.now() + (duration.as_millis() as u64).max(1);
        self.0.sched.point(Point::Sleep(until));
    }
    /// The model backend's watches sleep in this clock's virtual time.
    fn waits_on_change_watches(&self) -> bool {
        true
    }
    fn random_u64(&self) -> u64 {
        let n = self
            .0
            .jitter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        super::sched::Rng::new(n).next_u64()
    }
}

/// What an actor's body gets: the protocol over the model store, plus operations
/// that tell the oracle what each tenure was told.
#[derive(Debug)]
pub struct Ctx {
    /// The protocol over the model store and clock.
    pub store: Store,
    pub(crate) world: Arc<World>,
    pub(crate) name: String,
}

impl Ctx {
    /// The actor's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn call_step(&self) -> u64 {
        self.world.step()
    }

    /// Acquires `resource`; logs and judges the outcome. `None` when held or failed.
    pub fn acquire(&self, resource: &Resource, ttl_ms: u64, wait_ms: u64) -> Option<Lease> {
        let options = AcquireOptions::new(ttl_ms)
            .owner(self.name.clone())
            .wait_ms(wait_ms);
        self.acquire_with(resource, &options)
    }

    /// Acquires `resource` with `options` (e.g. a tenure tied to its process);
    /// logs and judges the outcome. `None` when held or failed.
    pub fn acquire_with(&self, resource: &Resource, options: &AcquireOptions) -> Option<Lease> {
        self.acquire_or_holder(resource, options).ok()
    }

    /// As [`Ctx::acquire_with`], and on a refusal the holder that refused it
    /// (`Err(None)` on an error): for schedules that judge who refused.
    pub fn acquire_or_holder(
        &self,
        resource: &Resource,
        options: &AcquireOptions,
    ) -> Result<Lease, Option<fencepost::Holder>> {
        self.world.log(format!(
            "acquire {} (ttl {}ms, wait {}ms{}{})",
            resource.target(),
            options.ttl_ms,
            options.wait_ms,
            if options.tied_to_process {
                ", tied to its process"
            } else {
                ""
            },
            session_note(options)
        ));
        self.holds_session_secret(options);
        let step = self.call_step();
        match self.store.try_acquire(resource, options) {
            Ok(TryAcquire::Acquired(lease)) => {
                self.world.log(format!(
                    "acquire -> token {} (generation {}{})",
                    lease.token(),
                    lease.generation(),
                    if lease.reentered() {
                        ", re-entered"
                    } else {
                        ""
                    }
                ));
                // A re-entered tenure (its session already held it) was renewed,
                // not begun: judged as that tenure's renewal.
                self.world
                    .acknowledged(&self.name, &lease, lease.reentered(), step);
                Ok(lease)
            }
            Ok(TryAcquire::Held(holder)) => {
                self.world.log(format!(
                    "acquire -> held by {} (token {})",
                    holder.owner, holder.token
                ));
                Err(Some(holder))
            }
            Err(e) => {
                self.world.log(format!("acquire -> error: {e}"));
                Err(None)
            }
        }
    }

    /// Claiming for a session is holding its derived secret: the oracle lets this
    /// actor write the records of every tenure of that session.
    fn holds_session_secret(&self, options: &AcquireOptions) {
        if let Some(session) = &options.session
            && let Some(me) = super::sched::current_actor()
        {
            lock(&self.world.oracle)
                .session_secrets
                .entry(me)
                .or_default()
                .insert(fencepost::Secret::for_session(session).sha256());
        }
    }

    /// Acquires every resource of `resources`, all or nothing
    /// ([`Store::try_acquire_all`]); logs and judges each lease as an acquire (a
    /// re-entered one as its tenure's renewal). `None` when held or failed.
    pub fn acquire_all(
        &self,
        resources: &[Resource],
        options: &AcquireOptions,
    ) -> Option<Vec<Lease>> {
        let names: Vec<String> = resources.iter().map(Resource::target).collect();
        self.world.log(format!(
            "acquire all of [{}] (ttl {}ms, wait {}ms{})",
            names.join(", "),
            options.ttl_ms,
            options.wait_ms,
            session_note(options)
        ));
        self.holds_session_secret(options);
        let step = self.call_step();
        match self.store.try_acquire_all(resources, options) {
            Ok(fencepost::TryAcquireAll::Acquired(leases)) => {
                let tokens: Vec<String> = leases.iter().map(|l| l.token().to_string()).collect();
                self.world
                    .log(format!("acquire all -> tokens [{}]", tokens.join(", ")));
                for lease in &leases {
                    self.world
                        .acknowledged(&self.name, lease, lease.reentered(), step);
                }
                Some(leases)
            }
            Ok(fencepost::TryAcquireAll::Held { resource, holder }) => {
                self.world.log(format!(
                    "acquire all -> {} held by {} (token {})",
                    resource.target(),
                    holder.owner,
                    holder.token
                ));
                None
            }
            Err(e) => {
                self.world.log(format!("acquire all -> error: {e}"));
                None
            }
        }
    }

    /// Acquires one of `slots` slots of the lock `name` ([`Store::try_acquire_slot`]);
    /// logs and judges the lease as an acquire, and judges that no more than `slots`
    /// tenures of the lock's slots are promised at this instant. `None` when held or
    /// failed.
    pub fn acquire_slot(&self, name: &str, slots: u32, options: &AcquireOptions) -> Option<Lease> {
        self.world.log(format!(
            "acquire a slot of {name} (of {slots}; ttl {}ms, wait {}ms)",
            options.ttl_ms, options.wait_ms
        ));
        let step = self.call_step();
        match self.store.try_acquire_slot(name, slots, options) {
            Ok(TryAcquire::Acquired(lease)) => {
                self.world.log(format!(
                    "acquire a slot -> slot {} token {} (generation {})",
                    lease.slot().unwrap_or(0),
                    lease.token(),
                    lease.generation()
                ));
                self.world
                    .acknowledged(&self.name, &lease, lease.reentered(), step);
                let now = self.world.now();
                let inside = lock(&self.world.oracle)
                    .tenures
                    .values()
                    .filter(|t| {
                        t.end > now && matches!(&t.resource, Resource::Slot(n, _) if n == name)
                    })
                    .count();
                if inside > slots as usize {
                    self.world.violate(format!(
                        "{}: {inside} tenures of the {slots} slots of {name} promised at one instant",
                        self.name
                    ));
                }
                Some(lease)
            }
            Ok(TryAcquire::Held(holder)) => {
                self.world.log(format!(
                    "acquire a slot -> all held (first to end: {}, token {})",
                    holder.owner, holder.token
                ));
                None
            }
            Err(e) => {
                self.world.log(format!("acquire a slot -> error: {e}"));
                None
            }
        }
    }

    /// Renews `lease`; true when renewed.
    pub fn renew(&self, lease: &mut Lease) -> bool {
        self.world.log(format!("renew token {}", lease.token()));
        let step = self.call_step();
        match self.store.renew(lease) {
            Ok(()) => {
                self.world
                    .log(format!("renew -> ok (generation {})", lease.generation()));
                self.world
                    .proved(&self.name, "renew", lease, lease.secret());
                self.world.acknowledged(&self.name, lease, true, step);
                true
            }
            Err(e) => {
                self.world.log(format!("renew -> {}", kind(&e)));
                if !matches!(e, Error::Backend(_)) {
                    self.end_promise(lease);
                }
                false
            }
        }
    }

    /// Checks `token` for `resource`; judges a pass after the tenure was fenced.
    pub fn check(&self, lease: &Lease) -> bool {
        let step = self.call_step();
        // A shared token is checked with its proof: `check(resource, token)` judges
        // the resource's exclusive series.
        let passed = if lease.shared() {
            match self.store.check_lease(lease) {
                Ok(()) => Ok(true),
                Err(e) if matches!(e, fencepost::Error::Backend(_)) => Err(e),
                Err(_) => Ok(false),
            }
        } else {
            self.store.check(lease.resource(), lease.token())
        };
        let passed = match passed {
            Ok(p) => p,
            Err(e) => {
                self.world
                    .log(format!("check token {} -> error: {e}", lease.token()));
                return false;
            }
        };
        self.world
            .log(format!("check token {} -> {passed}", lease.token()));
        if passed && matches!(lease.resource(), Resource::Dir(_)) && !lease.shared() {
            // A subtree token passes only while no claim it covers is promised: a
            // covered claim that got in over a dead subtree holder fenced it.
            let now = self.world.now();
            let oracle = lock(&self.world.oracle);
            let above_of = |r: &Resource| r.subtree_keys_above().unwrap_or_default();
            let (mine, my_above) = (claim_key(lease), above_of(lease.resource()));
            if let Some(t) = oracle.tenures.iter().find_map(|(holder, t)| {
                (holder != lease.holder_id()
                    && t.end > now
                    && covers(
                        lease.resource(),
                        &mine,
                        &my_above,
                        &t.resource,
                        &t.claim,
                        &t.above,
                    ))
                .then_some(t)
            }) {
                let what = format!(
                    "{}: subtree token {} passed check while {} was promised token {} of a claim it covers (a covered claim got in without fencing the subtree's tenure)",
                    self.name,
                    lease.token(),
                    t.actor,
                    t.token
                );
                drop(oracle);
                self.world.violate(what);
            }
        }
        if passed && !lease.shared() {
            // An exclusive token passes only while no reader of its resource is
            // promised: a shared claim that got in over a dead holder fenced it.
            let now = self.world.now();
            let oracle = lock(&self.world.oracle);
            let keys: Vec<Key> = lease.keys().cloned().collect();
            if let Some(t) = oracle.tenures.iter().find_map(|(holder, t)| {
                (holder != lease.holder_id() && t.shared && t.end > now && keys.contains(&t.claim))
                    .then_some(t)
            }) {
                let what = format!(
                    "{}: token {} passed check while {} was promised shared token {} of the same resource (a shared claim got in without fencing the exclusive tenure)",
                    self.name,
                    lease.token(),
                    t.actor,
                    t.token
                );
                drop(oracle);
                self.world.violate(what);
            }
        }
        if passed {
            let fenced = lock(&self.world.oracle)
                .tenures
                .get(lease.holder_id())
                .and_then(|t| t.fenced_at)
                .filter(|f| *f < step);
            if let Some(fenced) = fenced {
                let broken = lock(&self.world.oracle)
                    .broken
                    .get(&(lease.holder_id().to_string(), lease.token()))
                    .is_some_and(|(b, _)| *b <= fenced);
                self.world.violate(format!(
                    "{}: token {} passed check after {} (step {fenced}): a {} token passed again",
                    self.name,
                    lease.token(),
                    if broken {
                        "a break ended its tenure"
                    } else {
                        "another tenure's record fenced it"
                    },
                    if broken { "broken" } else { "superseded" },
                ));
            }
        }
        passed
    }

    /// Releases `lease`; the promise ends when the call starts.
    pub fn release(&self, lease: &Lease) {
        self.end_promise(lease);
        self.world.log(format!("release token {}", lease.token()));
        let actor = current_actor();
        if let Some(actor) = actor {
            lock(&self.world.releasing).insert(actor);
        }
        let outcome = self.store.release(lease);
        if let Some(actor) = actor {
            lock(&self.world.releasing).remove(&actor);
        }
        self.world.log(format!(
            "release -> {}",
            match &outcome {
                Ok(()) => "ok".to_string(),
                Err(e) => kind(e),
            }
        ));
        if outcome.is_ok() {
            self.world
                .proved(&self.name, "release", lease, lease.secret());
        }
    }

    /// Ends `session`'s tenure in the series `key` alone
    /// ([`Store::release_session_series`]), as a session's end does for a file it
    /// renamed. Naming the session is holding its secret; the promise of every
    /// tenure of the session in that series ends when the call starts, as a
    /// release's does. True when the call says it ended one.
    pub fn release_session_series(&self, key: &Key, session: &str) -> bool {
        let tag = fencepost::SessionTag::of(session);
        let now = self.world.now();
        self.world.log(format!(
            "release by key {} for session {}",
            short(key),
            tag.as_str()
        ));
        let actor = current_actor();
        {
            let mut oracle = lock(&self.world.oracle);
            for t in oracle.tenures.values_mut() {
                if t.session.as_ref() == Some(&tag) && t.keys.contains(key) {
                    t.end = t.end.min(now);
                }
            }
            if let Some(me) = actor {
                oracle
                    .session_secrets
                    .entry(me)
                    .or_default()
                    .insert(fencepost::Secret::for_session(session).sha256());
            }
        }
        if let Some(actor) = actor {
            lock(&self.world.releasing).insert(actor);
        }
        let outcome = self.store.release_session_series(key, session);
        if let Some(actor) = actor {
            lock(&self.world.releasing).remove(&actor);
        }
        self.world.log(format!(
            "release by key -> {}",
            match &outcome {
                Ok(ended) => format!("ok, ended: {ended}"),
                Err(e) => kind(e),
            }
        ));
        matches!(outcome, Ok(true))
    }

    /// Resumes the tenure `handle` names (another process of the holder, or
    /// someone presenting a token with a wrong or stale secret). A resume that
    /// succeeds must have presented the tenure's own secret; the actor is then
    /// entitled to renew and release it. `None` when refused or failed.
    pub fn resume(&self, resource: &Resource, handle: &LeaseHandle) -> Option<Lease> {
        self.world.log(format!(
            "resume {} with token {} and a secret",
            resource.target(),
            handle.token()
        ));
        match self.store.resume(resource, handle) {
            Ok(lease) => {
                self.world.log(format!(
                    "resume -> lease of token {} (generation {})",
                    lease.token(),
                    lease.generation()
                ));
                if self
                    .world
                    .proved(&self.name, "resume", &lease, handle.secret())
                    && let Some(me) = super::sched::current_actor()
                {
                    lock(&self.world.oracle)
                        .entitled
                        .entry(lease.holder_id().to_string())
                        .or_default()
                        .insert(me);
                }
                Some(lease)
            }
            Err(e) => {
                self.world.log(format!("resume -> {}", kind(&e)));
                None
            }
        }
    }

    /// Breaks whatever tenure holds `resource`, as an operator. A tenure the break
    /// returns is over for good: it never passes `check` or renews again (its
    /// tombstone is flushed; a power cut must not give it back).
    pub fn break_lease(&self, resource: &Resource) -> Option<Holder> {
        self.world.log(format!("break {}", resource.target()));
        match self
            .store
            .break_lease(resource, &self.name, "the interleaving checker breaks it")
        {
            Ok(holder) => {
                let step = self.call_step();
                self.world.log(format!(
                    "break -> broke {} (token {})",
                    holder.owner, holder.token
                ));
                let mut oracle = lock(&self.world.oracle);
                oracle
                    .broken
                    .entry((holder.holder_id.clone(), holder.token))
                    .or_insert((step, self.world.now()));
                if let Some(t) = oracle
                    .tenures
                    .get_mut(&holder.holder_id)
                    .filter(|t| t.token == holder.token)
                {
                    t.fenced_at = t.fenced_at.or(Some(step));
                }
                Some(holder)
            }
            Err(e) => {
                self.world.log(format!("break -> {}", kind(&e)));
                None
            }
        }
    }

    /// This actor's process dies holding `lease` (no release): a dead process makes
    /// no more writes, so its promise ends now. Whoever decides liveness (the
    /// schedule's probe) must learn of the death in the same step.
    pub fn die(&self, lease: &Lease) {
        self.world
            .log(format!("dies holding token {}", lease.token()));
        self.end_promise(lease);
    }

    /// This actor's process, `pid` in the schedule's process table, died (a crash
    /// fault): every promise made to it ends now, as a dead process makes no more
    /// writes, and the dead-waiter oracle learns when it ended.
    pub(crate) fn process_ended(&self, pid: u32) {
        self.world.process_ended(pid);
        self.end_every_promise();
    }

    /// Every promise made to this actor ends now (see [`Ctx::process_ended`]).
    fn end_every_promise(&self) {
        let now = self.world.now();
        let mut oracle = lock(&self.world.oracle);
        for t in oracle.tenures.values_mut() {
            if t.actor == self.name {
                t.end = t.end.min(now);
            }
        }
    }

    /// Records a violation found by a schedule's own judgement (e.g. starvation).
    pub(crate) fn violate(&self, what: String) {
        self.world.violate(what);
    }

    /// The same actor with another protocol instance (e.g. another liveness probe:
    /// another host).
    pub fn with_store(&self, store: Store) -> Ctx {
        Ctx {
            store,
            world: Arc::clone(&self.world),
            name: self.name.clone(),
        }
    }

    fn end_promise(&self, lease: &Lease) {
        let now = self.world.now();
        if let Some(t) = lock(&self.world.oracle).tenures.get_mut(lease.holder_id()) {
            t.end = t.end.min(now);
        }
    }

    /// Steps the host's wall clock back by `ms` (an NTP correction of a clock that
    /// ran ahead), as one scheduling point: every process sees it at once. The
    /// monotonic clock does not move.
    pub fn step_wall_back(&self, ms: u64) {
        self.world.sched.point(Point::Env);
        {
            let mut st = self.world.sched.lock();
            st.wall_offset -= i64::try_from(ms).unwrap_or(i64::MAX);
        }
        self.world.log(format!("the wall clock steps -{ms}ms"));
        self.world.wall_step();
    }

    /// Sleeps on the store's clock.
    pub fn sleep(&self, ms: u64) {
        self.store.clock().sleep(Duration::from_millis(ms));
    }

    /// Holds `lease` for `renewals` keepalive periods: renews every ttl/3 counted
    /// from *before* the previous renewal started (as `Keepalive` does), checking
    /// the token in between. Returns false once the lease is lost.
    pub fn keep(&self, lease: &mut Lease, renewals: usize) -> bool {
        for _ in 0..renewals {
            let period = fencepost::Keepalive::renewal_period_ms(lease.ttl_ms());
            let started = self.store.clock().monotonic_ms();
            self.check(lease);
            let elapsed = self.store.clock().monotonic_ms().saturating_sub(started);
            self.sleep(period.saturating_sub(elapsed).max(1));
            if !self.renew(lease) {
                return false;
            }
        }
        true
    }

    /// Acquires `resource` (ttl [`super::TTL_MS`], waiting up to `wait_ms`), keeps
    /// it for `renewals` keepalive periods and releases it; false when it was not
    /// acquired or was lost.
    pub fn hold(&self, resource: &Resource, wait_ms: u64, renewals: usize) -> bool {
        let Some(mut lease) = self.acquire(resource, super::TTL_MS, wait_ms) else {
            return false;
        };
        let kept = self.keep(&mut lease, renewals);
        if kept {
            self.release(&lease);
        }
        kept
    }

    /// Changes the world outside the store (creates, links or renames files) as one
    /// scheduling point.
    pub fn env(&self, what: &str, change: impl FnOnce() -> std::io::Result<()>) {
        self.world.sched.point(Point::Env);
        let outcome = change();
        self.world.log(format!(
            "{what}{}",
            outcome
                .err()
                .map(|e| format!(" -> {e}"))
                .unwrap_or_default()
        ));
    }
}

fn kind(e: &Error) -> String {
    match e {
        Error::Superseded { by_token, .. } => format!("superseded (by token {by_token})"),
        Error::Expired { .. } => "expired".into(),
        Error::NotHolder { .. } => "not the holder".into(),
        Error::Broken { .. } => "broken".into(),
        Error::Released { .. } => "released".into(),
        Error::NotHeld { .. } => "nothing to break".into(),
        other => format!("error: {other}"),
    }
}

/// ", session S" for a log line of a claim made for a session; empty otherwise.
fn session_note(options: &AcquireOptions) -> String {
    options
        .session
        .as_ref()
        .map(|s| format!(", session {s}"))
        .unwrap_or_default()
}

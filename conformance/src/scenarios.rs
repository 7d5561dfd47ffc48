//! The scenarios. Each pins a rule of docs/protocol.md §3–§4 and fails when it breaks.

use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use fencepost::record::{self, Record};
use fencepost::{
    AcquireOptions, ClaimState, Durability, Error, Key, LeaseStore, Liveness, ManualClock,
    ProcessEvidence, Resource, SteppedClock, Store, SystemLiveness, TryAcquire, Verdict,
};

use crate::{Failed, Fixture, Job, Requirement};

/// A scenario body for backend type `S`.
pub type ScenarioFn<S> = fn(&Fixture<S>) -> Result<(), Failed>;

/// One named scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// The test name (after the backend name).
    pub name: &'static str,
    /// What the backend must offer to run it.
    pub requirement: Requirement,
    /// The rule it pins.
    pub pins: &'static str,
    id: usize,
}

macro_rules! scenarios {
    ($($id:literal $name:ident $req:ident $pins:literal;)*) => {
        /// Every scenario, in the order they are listed.
        pub static SCENARIOS: &[Scenario] = &[
            $(Scenario { name: stringify!($name), requirement: Requirement::$req, pins: $pins, id: $id },)*
        ];
        impl Scenario {
            /// The body of this scenario for backend type `S`.
            pub fn run<S: LeaseStore + Clone + 'static>(&self) -> ScenarioFn<S> {
                match self.id {
                    $($id => $name::<S>,)*
                    _ => unreachable!("scenario ids are the list's"),
                }
            }
        }
    };
}

scenarios! {
    0 acquire_check_release None "docs/protocol.md §3.2 acquire/check/release; I3";
    1 held_reports_holder None "docs/protocol.md §3.2 acquire: held → report who holds it";
    2 released_is_claimable_with_higher_token None "docs/protocol.md §3.2 release; I2";
    3 renew_keeps_token_and_moves_expiry None "docs/protocol.md I5";
    4 keepalive_keeps_token_across_renewals None "docs/protocol.md I5, keepalive at ttl/3";
    5 zombie_is_fenced None "docs/protocol.md I3: superseded holder refused by check, renew, release";
    6 expired_lease_is_not_revived None "docs/protocol.md §3.2: an expired lease is lost";
    7 clock_backwards_holds None "docs/protocol.md §3.3 liveness rule: backwards step holds";
    8 clock_forward_fences_old_holder None "docs/protocol.md §3/§10: forward step ends early, fence holds";
    9 clock_behind_newest_grant None "docs/protocol.md §3.3 liveness: now < granted_at is held";
    10 future_stamped_newest_is_bounded_by_stagnation None "docs/protocol.md §3.4 stagnation bound";
    11 corrupt_newest_is_superseded_not_restarted None "docs/protocol.md §3.5 undecodable newest; I2";
    12 newer_format_is_held None "docs/protocol.md §3.5: newer v honoured, never free";
    13 missing_middle_generation None "docs/protocol.md §5: readers parse numbers; I1";
    14 deleted_newest_never_restarts None "docs/protocol.md I2";
    15 lost_tombstone_is_held_until_ttl None "docs/protocol.md §3.6, durability: tombstone loss delays only";
    16 sweep_never_removes_newest None "docs/protocol.md I2, sweep";
    17 release_never_sweeps None "docs/protocol.md §3.2 release";
    18 status_lists_every_key None "docs/protocol.md §3.2 status";
    19 second_handle_contends None "docs/protocol.md §4 visibility across handles";
    20 contention_threads None "docs/protocol.md I1/I2: 16 threads × 50 rounds, log oracle";
    21 contention_processes SharedAcrossProcesses "docs/protocol.md I1/I2: 8 processes × 10 rounds, log oracle";
    22 hard_kill SharedAcrossProcesses "docs/protocol.md §10: a killed holder blocks until ttl; I3";
    23 kill_during_claim SharedAcrossProcesses "docs/protocol.md §3.5: crash mid-claim blocks ≤ one ttl; I2";
    24 power_cut_keeps_claims PowerCut "docs/protocol.md §3.6, durability: claims are flushed";
    25 power_cut_lost_tombstone_is_held_until_ttl PowerCut "docs/protocol.md §3.6, durability: tombstones unflushed";
    26 create_is_exclusive None "docs/protocol.md §4: atomic exclusive create";
    27 records_round_trip None "docs/protocol.md §4: listing, reads and removal";
    28 dead_holder_is_taken_over_early SharedAcrossProcesses "dead-holder takeover: SIGKILLed holder, ttl 60 s, successor < 1 s; I3";
    29 paused_holder_is_not_taken_over_early SharedAcrossProcesses "dead-holder takeover: an alive (SIGSTOPped) holder keeps its ttl";
    30 takeover_needs_same_host_and_a_definite_death None "dead-holder takeover: never across hosts or boots, never on doubt";
    31 listing_snapshot_under_renewals None "LeaseStore listing: a snapshot with respect to the maximum (docs/protocol.md R5)";
    32 subtree_conflicts_both_ways None "subtree claims: a held subtree refuses files and directories below it, a held file refuses subtrees above it (docs/design-05-subtrees-and-shared.md §1)";
    33 subtree_spellings_are_one_tree None "subtree claims: a file not created yet, a symlinked directory and `..` spellings land on one chain (design-05 §1)";
    34 subtree_contention_threads None "subtree claims: 8 threads claim a subtree and files inside it, never a subtree holder and a file holder inside it at once (log oracle)";
    // Issue 14, claims (docs/design-04-claims.md), in `scenarios/claims.rs`.
    40 session_reclaim_is_reentrant None "sessions: a claim by the holding session keeps its token, renewed; anyone else is held";
    41 session_acts_without_the_handle None "sessions: any handle of the session renews and releases; other sessions refused; no revival";
    42 session_reentry_across_processes SharedAcrossProcesses "sessions: a second process of the holding session keeps the token; another session is refused";
    43 several_resources_all_or_nothing None "several resources: one lease each, all or nothing; nothing held after a refusal; one resource named twice, or a subtree with a path inside it, is refused";
    44 several_resources_contend_threads None "several resources: {a, b} and {b, a} in threads never deadlock, never both hold b";
    46 several_resources_give_back_on_a_rival None "several resources: a rival arriving between look and take makes the claim give back what it took";
    47 slots_hold_at_most_n None "slots: at most N holders, each slot its own fenced tenure; the result says which slot";
    48 slots_contend_processes SharedAcrossProcesses "slots: 12 processes on 4 slots: never two in one slot (so never more than 4 inside), tokens per slot increase";
    45 several_resources_contend_processes SharedAcrossProcesses "several resources: two processes claiming {a, b} and {b, a} in a loop never deadlock, never both hold b";
    50 shared_claims_exclude_writers None "shared claims: 8 holders at once, exclusive refused until all released, shared refused while exclusive, tokens never go down; subtrees both ways (docs/design-05-subtrees-and-shared.md §4)";
    51 waiting_writer_is_not_starved None "shared claims: once a writer waits, arriving readers are refused; it holds as soon as the earlier readers released (design-05 §4.3)";
    // Issue 14, gaps closed (docs/design-05-subtrees-and-shared.md), in `scenarios/covered.rs`.
    52 refusal_names_what_is_in_the_way None "subtree claims: a refusal by another resource (a subtree above, a claim below) names it and its holder (design-05 §3.2)";
    53 subtree_covers_its_own_path None "subtree claims: dir:P and file:P are never held at once, either way, exclusive or shared (design-05 §1)";
    54 covered_claims_honour_a_waiting_subtree None "subtree claims: a stream of covered claims does not starve a waiting subtree claimer; covered claims are refused naming it (design-05 §4.3)";
    57 renewal_from_the_record_written_is_judged None "docs/protocol.md §3.2 renew, from the record written: a generation swept free above the lease's record is caught by the confirming listing; a renewal through another handle is adopted";
    55 dead_holders_in_the_way_and_index_healing None "subtree and shared claims: a dead holder in the way is fenced at once; participant-index entries of ended or dead participants are swept (design-05 §3.2, §4.2)";
    58 break_ends_every_reader None "shared claims: a break of a resource held by readers ends every reader, and a writer then holds (design-05 §4)";
    60 ended_participants_are_removed None "shared claims: an exclusive claimer's look removes an ended participant's index entry and whole series; a stale handle of it cannot renew and leaves nothing behind (design-05 §4.2, docs/protocol.md §3.2)";
    56 several_resources_refuse_shared None "several resources: a shared claim of a set is refused in one line, nothing written (design-04)";
    59 session_series_released_by_key None "sessions: a tenure ended by key alone (a renamed file's file-id series); another session's, a sessionless, a released and an expired tenure left alone, nothing written";
    39 session_records_never_carry_the_session_id None "sessions: records and status carry the session's tag, never the id its secret derives from";
}

const TTL_MS: u64 = 30_000;
const START_MS: u64 = 1_800_000_000_000;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(Failed::from(format!($($msg)+)));
        }
    };
}

mod claims;
use claims::*;
mod shared;
use shared::*;
mod covered;
use covered::*;

fn fail(context: &str, error: impl std::fmt::Display) -> Failed {
    Failed::from(format!("{context}: {error}"))
}

fn opts(owner: &str) -> AcquireOptions {
    AcquireOptions::new(TTL_MS).owner(owner)
}

fn key_of(resource: &Resource) -> Result<Key, Failed> {
    resource
        .identity()
        .map(|i| i.key)
        .map_err(|e| fail("identity", e))
}

fn newest_generation<S: LeaseStore>(raw: &S, key: &Key) -> Result<u64, Failed> {
    Ok(raw
        .generations(key)
        .map_err(|e| fail("list", e))?
        .into_iter()
        .max()
        .unwrap_or(0))
}

fn acquire(
    store: &Store,
    resource: &Resource,
    options: &AcquireOptions,
) -> Result<fencepost::Lease, Failed> {
    store
        .acquire(resource, options)
        .map_err(|e| fail("acquire", e))
}

fn check(store: &Store, resource: &Resource, token: u64) -> Result<bool, Failed> {
    store.check(resource, token).map_err(|e| fail("check", e))
}

fn acquire_check_release<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    let store = f.store();
    let lock = Resource::lock("db:migrations");
    let lease = acquire(&store, &lock, &opts("a"))?;
    ensure!(lease.token() >= 1, "token {} below 1", lease.token());
    ensure!(
        check(&store, &lock, lease.token())?,
        "the holder's token fails check"
    );
    ensure!(
        !check(&store, &lock, lease.token() + 1)?,
        "a token never issued passes check"
    );
    ensure!(
        !check(&store, &lock, lease.token() - 1)?,
        "an older token passes check"
    );
    store.release(&lease).map_err(|e| fail("release", e))?;
    ensure!(
        !check(&store, &lock, lease.token())?,
        "a released token passes check"
    );
    Ok(())
}

fn held_reports_holder<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    let store = f.store();
    let lock = Resource::lock("port:8080");
    let lease = acquire(&store, &lock, &opts("first-agent"))?;
    match store.try_acquire(&lock, &opts("second-agent")) {
        Ok(TryAcquire::Held(holder)) => {
            ensure!(
                holder.owner == "first-agent",
                "holder reported as {:?}",
                holder.owner
            );
            ensure!(
                holder.token == lease.token(),
                "holder token {} != {}",
                holder.token,
                lease.token()
            );
        }
        other => return Err(format!("second acquire while held returned {other:?}").into()),
    }
    match store.acquire(&lock, &opts("second-agent")) {
        Err(Error::Held { holder, .. }) => ensure!(holder.owner == "first-agent", "wrong holder"),
        other => return Err(format!("acquire while held returned {other:?}").into()),
    }
    Ok(())
}

fn released_is_claimable_with_higher_token<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let lock = Resource::lock("release-tag");
    let mut last = 0;
    for round in 0..5 {
        let lease = acquire(&store, &lock, &opts("a"))?;
        ensure!(
            lease.token() > last,
            "round {round}: token {} not above {last}",
            lease.token()
        );
        last = lease.token();
        store.release(&lease).map_err(|e| fail("release", e))?;
    }
    Ok(())
}

fn renew_keeps_token_and_moves_expiry<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let lock = Resource::lock("fixture");
    let mut lease = acquire(&store, &lock, &opts("a"))?;
    let (token, generation, expires) = (lease.token(), lease.generation(), lease.expires_at_ms());
    clock.advance_ms(10_000);
    store.renew(&mut lease).map_err(|e| fail("renew", e))?;
    ensure!(
        lease.token() == token,
        "renew changed the token {token} → {}",
        lease.token()
    );
    ensure!(
        lease.generation() > generation,
        "renew did not write a new generation"
    );
    ensure!(
        lease.expires_at_ms() == expires + 10_000,
        "expiry did not move by the elapsed time"
    );
    clock.advance_ms(25_000); // past the first expiry, within the renewed one
    ensure!(
        check(&store, &lock, token)?,
        "renewed lease does not pass check past its first expiry"
    );
    let mut resumed = store
        .resume(&lock, &lease.handle())
        .map_err(|e| fail("resume", e))?;
    store
        .renew(&mut resumed)
        .map_err(|e| fail("renew a resumed lease", e))?;
    ensure!(
        resumed.token() == token,
        "renewing a resumed lease changed the token"
    );
    for _ in 0..20 {
        store.renew(&mut lease).map_err(|e| fail("renew", e))?;
    }
    let kept = f
        .raw()
        .generations(&key_of(&lock)?)
        .map_err(|e| fail("list", e))?;
    ensure!(
        kept == vec![lease.generation()],
        "renewals left superseded records behind (sweep after a durable renewal): {kept:?}"
    );
    Ok(())
}

/// A renewal writes the generation above the record its lease remembers without
/// reading the series first; the two cases where that generation is free although
/// something newer exists must still be judged right.
fn renewal_from_the_record_written_is_judged<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    // 1. Broken, then claimed anew: the new claim's sweep frees the generations of
    // the break and of the holder's record; the holder's renewal must not stand.
    let lock = Resource::lock("renew-written-broken");
    let mut holder = acquire(&store, &lock, &opts("holder"))?;
    store
        .break_lease(&lock, "operator", "the holder is stuck")
        .map_err(|e| fail("break", e))?;
    let successor = acquire(&store, &lock, &opts("successor"))?;
    let key = key_of(&lock)?;
    let listed = f.raw().generations(&key).map_err(|e| fail("list", e))?;
    ensure!(
        !listed.contains(&(holder.generation() + 1)),
        "the successor's sweep left the generation above the holder's record: {listed:?} (the case this scenario needs)"
    );
    match store.renew(&mut holder) {
        Err(Error::Superseded { .. } | Error::Broken { .. }) => {}
        other => {
            return Err(
                format!("a renewal over a broken and re-claimed lease returned {other:?}").into(),
            );
        }
    }
    ensure!(
        !check(&store, &lock, holder.token())?,
        "the broken holder's token passes check after its renewal"
    );
    ensure!(
        check(&store, &lock, successor.token())?,
        "the successor lost the lease to the broken holder's renewal"
    );
    // 2. Renewed twice through another handle (its sweep frees the generation above
    // this lease's record): the tenure is still live, so the renewal is adopted.
    let lock = Resource::lock("renew-written-resumed");
    let mut lease = acquire(&store, &lock, &opts("a"))?;
    let mut other = store
        .resume(&lock, &lease.handle())
        .map_err(|e| fail("resume", e))?;
    clock.advance_ms(1_000);
    store.renew(&mut other).map_err(|e| fail("renew", e))?;
    store.renew(&mut other).map_err(|e| fail("renew", e))?;
    store
        .renew(&mut lease)
        .map_err(|e| fail("renew after another handle's renewals", e))?;
    ensure!(
        lease.generation() >= other.generation(),
        "the renewal returned generation {} below the newest {}",
        lease.generation(),
        other.generation()
    );
    ensure!(
        check(&store, &lock, lease.token())?,
        "the lease does not pass check after its renewal"
    );
    store.renew(&mut lease).map_err(|e| fail("renew", e))?;
    let newest = f
        .raw()
        .generations(&key_of(&lock)?)
        .map_err(|e| fail("list", e))?
        .into_iter()
        .max();
    ensure!(
        newest == Some(lease.generation()),
        "the lease's generation {} is not the newest {newest:?}",
        lease.generation()
    );
    Ok(())
}

fn keepalive_keeps_token_across_renewals<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let lock = Resource::lock("keepalive");
    let ttl_ms = 300;
    let lease = acquire(&store, &lock, &AcquireOptions::new(ttl_ms).owner("a"))?;
    let (token, generation) = (lease.token(), lease.generation());
    let keepalive = store.keepalive(lease);
    // Wait (real time: the keepalive thread renews on real time) until at least three
    // renewals landed, bounded generously.
    let deadline = Instant::now() + Duration::from_secs(20);
    while keepalive.lease().generation() < generation + 3 {
        ensure!(
            Instant::now() < deadline,
            "keepalive did not renew three times"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    ensure!(!keepalive.is_lost(), "keepalive reported a loss");
    ensure!(
        keepalive.lease().token() == token,
        "keepalive changed the token"
    );
    ensure!(
        check(&store, &lock, token)?,
        "token fails check after several ttls of keepalive"
    );
    ensure!(
        matches!(
            store.try_acquire(&lock, &opts("b")),
            Ok(TryAcquire::Held(_))
        ),
        "a rival acquired while keepalive held"
    );
    keepalive
        .release()
        .map_err(|e| fail("keepalive release", e))?;
    ensure!(!check(&store, &lock, token)?, "token passes after release");
    Ok(())
}

fn zombie_is_fenced<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let lock = Resource::lock("shared-fixture");
    let mut zombie = acquire(&store, &lock, &opts("zombie"))?;
    clock.advance_ms(TTL_MS + 1); // the zombie stalls past its ttl
    let successor = acquire(&store, &lock, &opts("successor"))?;
    ensure!(
        successor.token() > zombie.token(),
        "successor token not above the zombie's"
    );
    ensure!(
        !check(&store, &lock, zombie.token())?,
        "the zombie's token passes check"
    );
    // The loss names who wrote around it (its token there and until when).
    match store.renew(&mut zombie) {
        Err(Error::Superseded {
            by_token,
            by: Some(holder),
            ..
        }) if by_token == successor.token()
            && holder.owner == "successor"
            && holder.expires_at_ms == successor.expires_at_ms() => {}
        other => return Err(format!("zombie renew returned {other:?}").into()),
    }
    match store.release(&zombie) {
        Err(Error::NotHolder { .. }) => {}
        other => return Err(format!("zombie release returned {other:?}").into()),
    }
    ensure!(
        store.resume(&lock, &zombie.handle()).is_err(),
        "the zombie's handle resumed a lease"
    );
    ensure!(
        check(&store, &lock, successor.token())?,
        "the zombie's release evicted the successor"
    );
    Ok(())
}

fn expired_lease_is_not_revived<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let lock = Resource::lock("lapsed");
    let mut lease = acquire(&store, &lock, &opts("a"))?;
    clock.advance_ms(TTL_MS);
    match store.renew(&mut lease) {
        Err(Error::Expired { .. }) => {}
        other => return Err(format!("renew after expiry returned {other:?}").into()),
    }
    ensure!(
        !check(&store, &lock, lease.token())?,
        "expired token passes check"
    );
    let next = acquire(&store, &lock, &opts("a"))?;
    ensure!(
        next.token() > lease.token(),
        "re-acquire did not get a new token"
    );
    Ok(())
}

fn clock_backwards_holds<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let lock = Resource::lock("clock-back");
    let lease = acquire(&store, &lock, &opts("a"))?;
    clock.set_wall_ms(START_MS - 3_600_000);
    ensure!(
        check(&store, &lock, lease.token())?,
        "a backwards step freed the holder's check"
    );
    ensure!(
        matches!(
            store.try_acquire(&lock, &opts("b")),
            Ok(TryAcquire::Held(_))
        ),
        "a backwards step freed the resource"
    );
    Ok(())
}

fn clock_forward_fences_old_holder<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let holder_clock = SteppedClock::new();
    let holder_store = f.store_with_clock(holder_clock.clone());
    let rival_clock = SteppedClock::new();
    let rival_store = f.store_with_clock(rival_clock.clone());
    let lock = Resource::lock("clock-forward");
    let mut lease = acquire(&holder_store, &lock, &opts("a"))?;
    rival_clock.step_ms(3_600_000); // the rival's clock jumps an hour ahead
    let rival = acquire(&rival_store, &lock, &opts("b"))?;
    ensure!(
        rival.token() > lease.token(),
        "rival token not above the old holder's"
    );
    ensure!(
        !check(&holder_store, &lock, lease.token())?,
        "the old holder still passes check"
    );
    ensure!(
        holder_store.renew(&mut lease).is_err(),
        "the old holder renewed over the rival"
    );
    ensure!(
        check(&rival_store, &lock, rival.token())?,
        "the rival lost its lease"
    );
    Ok(())
}

fn clock_behind_newest_grant<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let lock = Resource::lock("behind");
    let lease = acquire(&store, &lock, &AcquireOptions::new(1_000).owner("a"))?;
    // A waiter whose clock is behind the grant by more than the ttl: by its clock the
    // lease has not even started, so expiry is unknowable and the record is held.
    let behind = ManualClock::new(START_MS - 10_000);
    let waiter = f.store_with_clock(behind);
    ensure!(
        matches!(
            waiter.try_acquire(&lock, &opts("b")),
            Ok(TryAcquire::Held(_))
        ),
        "a waiter whose clock is behind the grant took the resource"
    );
    ensure!(
        check(&waiter, &lock, lease.token())?,
        "check by a clock behind the grant failed"
    );
    Ok(())
}

fn future_stamped_newest_is_bounded_by_stagnation<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    // The holder's clock was an hour ahead when it claimed with a short ttl, then
    // died. The waiter's wall clock says the record is live for an hour; its own
    // monotonic clock must free it after about one ttl.
    let ttl_ms = 2_000;
    let ahead = ManualClock::new(START_MS + 3_600_000);
    let holder = f.store_with_clock(ahead);
    let lock = Resource::lock("future");
    let dead = acquire(&holder, &lock, &AcquireOptions::new(ttl_ms).owner("ahead"))?;
    let clock = ManualClock::new(START_MS);
    let waiter = f.store_with_clock(clock.clone());
    ensure!(
        matches!(
            waiter.try_acquire(
                &lock,
                &AcquireOptions::new(ttl_ms).owner("w").wait_ms(ttl_ms / 2)
            ),
            Ok(TryAcquire::Held(_))
        ),
        "the future-stamped record was free before one ttl of waiting"
    );
    let started = clock_mono(&clock);
    let lease = waiter
        .acquire(
            &lock,
            &AcquireOptions::new(ttl_ms).owner("w").wait_ms(3 * ttl_ms),
        )
        .map_err(|e| fail("acquire after one ttl of stagnation", e))?;
    let waited = clock_mono(&clock) - started;
    ensure!(
        waited <= 2 * ttl_ms,
        "waited {waited} ms of monotonic time, more than about one ttl"
    );
    ensure!(
        lease.token() > dead.token(),
        "takeover token not above the stale one"
    );
    ensure!(
        !check(&holder, &lock, dead.token())?,
        "the stale token passes after takeover"
    );
    Ok(())
}

fn clock_mono(clock: &ManualClock) -> u64 {
    use fencepost::Clock;
    clock.monotonic_ms()
}

fn plant<S: LeaseStore>(raw: &S, key: &Key, generation: u64, bytes: &[u8]) -> Result<(), Failed> {
    raw.create(key, generation, bytes, Durability::Flushed)
        .map_err(|e| fail("planting a record", e))
        .map(|_| ())
}

fn corrupt_newest_is_superseded_not_restarted<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let cases: &[(&str, &[u8])] = &[
        ("empty", b""),
        ("truncated", b"{\"v\":1,\"key\":\"lock-"),
        ("garbage", b"\x00\xff\xfegarbage"),
        ("wrong-type", b"{\"v\":1,\"token\":\"seven\"}"),
    ];
    for (name, bytes) in cases {
        let lock = Resource::lock(format!("corrupt-{name}"));
        let key = key_of(&lock)?;
        let first = acquire(&store, &lock, &opts("a"))?;
        store.release(&first).map_err(|e| fail("release", e))?;
        let newest = newest_generation(f.raw(), &key)?;
        plant(f.raw(), &key, newest + 1, bytes)?;
        ensure!(
            !check(&store, &lock, first.token())?,
            "{name}: a token passes against a corrupt newest"
        );
        let next = store
            .acquire(&lock, &opts("b"))
            .map_err(|e| fail(&format!("{name}: acquire"), e))?;
        ensure!(
            next.token() == newest + 2,
            "{name}: token {} after corrupt generation {}, expected {} (restarted or skipped)",
            next.token(),
            newest + 1,
            newest + 2
        );
    }
    Ok(())
}

fn newer_format_is_held<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let lock = Resource::lock("from-the-future");
    let key = key_of(&lock)?;
    let record = format!(
        r#"{{"v":9,"token":5,"generation":5,"granted_at_ms":{},"expires_at_ms":{},"new_field":[1,2]}}"#,
        START_MS,
        START_MS + TTL_MS
    );
    plant(f.raw(), &key, 5, record.as_bytes())?;
    ensure!(
        matches!(store.try_acquire(&lock, &opts("a")), Ok(TryAcquire::Held(h)) if h.token == 5),
        "a live newer-format record was not held"
    );
    ensure!(
        check(&store, &lock, 5)?,
        "the newer-format record's token fails check"
    );
    clock.advance_ms(TTL_MS);
    let lease = acquire(&store, &lock, &opts("a"))?;
    ensure!(
        lease.token() == 6,
        "after the newer record expired, token {} (expected 6)",
        lease.token()
    );
    Ok(())
}

fn sample_record(key: &Key, token: u64, generation: u64, granted_at_ms: u64) -> Vec<u8> {
    Record {
        v: record::FORMAT_VERSION,
        key: key.as_str().into(),
        label: "planted".into(),
        token,
        generation,
        holder: format!("planted-{token}").into(),
        owner: "planted".into(),
        pid: 1,
        host: "".into(),
        granted_at_ms,
        expires_at_ms: granted_at_ms + TTL_MS,
        ttl_ms: TTL_MS,
        released: false,
        secret_sha256: None,
        broken: None,
        next: None,
        process: None,
        session: None,
    }
    .encode()
}

fn missing_middle_generation<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let lock = Resource::lock("gappy");
    let key = key_of(&lock)?;
    plant(
        f.raw(),
        &key,
        3,
        &sample_record(&key, 3, 3, START_MS - 2 * TTL_MS),
    )?;
    plant(f.raw(), &key, 11, &sample_record(&key, 11, 11, START_MS))?;
    ensure!(
        check(&store, &lock, 11)?,
        "the newest of a gappy series (11) is not the holder"
    );
    ensure!(
        !check(&store, &lock, 3)?,
        "an older generation passes check"
    );
    clock.advance_ms(TTL_MS);
    let lease = acquire(&store, &lock, &opts("a"))?;
    ensure!(
        lease.token() == 12,
        "token {} after generation 11 (expected 12)",
        lease.token()
    );
    Ok(())
}

fn deleted_newest_never_restarts<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let lock = Resource::lock("hand-deleted");
    let key = key_of(&lock)?;
    let mut last = 0;
    for _ in 0..3 {
        let lease = acquire(&store, &lock, &opts("a"))?;
        last = lease.token();
        store.release(&lease).map_err(|e| fail("release", e))?;
    }
    let newest = newest_generation(f.raw(), &key)?;
    f.raw()
        .remove(&key, newest)
        .map_err(|e| fail("remove", e))?;
    let remaining = newest_generation(f.raw(), &key)?;
    ensure!(
        remaining > 0,
        "the series was emptied by deleting only its newest record"
    );
    // The tombstone is gone, so the claim under it is honoured until its ttl (held),
    // and numbering continues above what is left — never from 1.
    match store.try_acquire(&lock, &opts("b")) {
        Ok(TryAcquire::Held(holder)) => ensure!(
            holder.token == last,
            "held by token {} not {last}",
            holder.token
        ),
        Ok(TryAcquire::Acquired(lease)) => {
            ensure!(
                lease.token() > remaining,
                "numbering restarted at {}",
                lease.token()
            )
        }
        Err(e) => return Err(fail("acquire", e)),
    }
    Ok(())
}

fn lost_tombstone_is_held_until_ttl<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let lock = Resource::lock("lost-tombstone");
    let key = key_of(&lock)?;
    let lease = acquire(&store, &lock, &opts("a"))?;
    store.release(&lease).map_err(|e| fail("release", e))?;
    let tombstone = newest_generation(f.raw(), &key)?;
    f.raw()
        .remove(&key, tombstone)
        .map_err(|e| fail("remove", e))?;
    ensure!(
        matches!(
            store.try_acquire(&lock, &opts("b")),
            Ok(TryAcquire::Held(_))
        ),
        "with the tombstone lost the claim was not held until its ttl"
    );
    clock.advance_ms(TTL_MS);
    let next = acquire(&store, &lock, &opts("b"))?;
    ensure!(
        next.token() > lease.token(),
        "token {} reused after a lost tombstone",
        next.token()
    );
    Ok(())
}

fn sweep_never_removes_newest<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let lock = Resource::lock("sweep");
    let key = key_of(&lock)?;
    for _ in 0..4 {
        let mut lease = acquire(&store, &lock, &opts("a"))?;
        store.renew(&mut lease).map_err(|e| fail("renew", e))?;
        let generations = f.raw().generations(&key).map_err(|e| fail("list", e))?;
        ensure!(
            generations.contains(&lease.generation()),
            "the newest record was swept"
        );
        store.release(&lease).map_err(|e| fail("release", e))?;
        let newest = newest_generation(f.raw(), &key)?;
        store.sweep(&lock).map_err(|e| fail("sweep", e))?;
        ensure!(
            newest_generation(f.raw(), &key)? == newest,
            "an explicit sweep removed the newest record"
        );
        ensure!(
            f.raw()
                .generations(&key)
                .map_err(|e| fail("list", e))?
                .contains(&lease.generation()),
            "an explicit sweep removed the claim under an unflushed tombstone"
        );
    }
    let lease = acquire(&store, &lock, &opts("a"))?;
    let generations = f.raw().generations(&key).map_err(|e| fail("list", e))?;
    ensure!(
        generations == vec![lease.generation()],
        "acquire left superseded records: {generations:?}"
    );
    Ok(())
}

fn release_never_sweeps<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    let store = f.store();
    let lock = Resource::lock("release-keeps");
    let key = key_of(&lock)?;
    let lease = acquire(&store, &lock, &opts("a"))?;
    store.release(&lease).map_err(|e| fail("release", e))?;
    let generations = f.raw().generations(&key).map_err(|e| fail("list", e))?;
    ensure!(
        generations.contains(&lease.generation())
            && generations.contains(&(lease.generation() + 1)),
        "release removed records: {generations:?}"
    );
    Ok(())
}

fn status_lists_every_key<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    let store = f.store();
    let held = acquire(&store, &Resource::lock("status-held"), &opts("holder"))?;
    let released = acquire(&store, &Resource::lock("status-released"), &opts("x"))?;
    store.release(&released).map_err(|e| fail("release", e))?;
    let entries = store.status().map_err(|e| fail("status", e))?;
    ensure!(
        entries.len() == 2,
        "status listed {} keys, expected 2",
        entries.len()
    );
    let by_label = |label: &str| entries.iter().find(|e| e.label == label);
    let h = by_label("status-held").ok_or("held key missing from status")?;
    ensure!(
        h.live && h.state == ClaimState::Held && h.token == held.token() && h.owner == "holder",
        "held entry wrong: {h:?}"
    );
    let r = by_label("status-released").ok_or("released key missing from status")?;
    ensure!(
        !r.live && r.state == ClaimState::Released,
        "released entry wrong: {r:?}"
    );
    Ok(())
}

fn second_handle_contends<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    let first = f.store();
    let second = Store::new(f.reopen()?);
    let lock = Resource::lock("two-handles");
    let lease = acquire(&first, &lock, &opts("a"))?;
    ensure!(
        matches!(
            second.try_acquire(&lock, &opts("b")),
            Ok(TryAcquire::Held(_))
        ),
        "a second handle did not see the first handle's lease"
    );
    ensure!(
        check(&second, &lock, lease.token())?,
        "a second handle does not accept the token"
    );
    first.release(&lease).map_err(|e| fail("release", e))?;
    let next = acquire(&second, &lock, &opts("b"))?;
    ensure!(
        next.token() > lease.token(),
        "second handle's token not higher"
    );
    Ok(())
}

/// Checks a contention log: `expected` lines, strictly increasing tokens, no overlap.
fn check_log(lines: &[String], expected: usize) -> Result<(), Failed> {
    ensure!(
        !lines.iter().any(|l| l.starts_with("OVERLAP")),
        "two holders were inside the critical section at once"
    );
    ensure!(
        lines.len() == expected,
        "{} critical sections logged, expected {expected}",
        lines.len()
    );
    let mut previous = 0u64;
    let mut seen = HashSet::new();
    for line in lines {
        let token: u64 = line
            .trim()
            .parse()
            .map_err(|_| format!("bad log line {line:?}"))?;
        ensure!(seen.insert(token), "token {token} issued twice");
        ensure!(
            token > previous,
            "token {token} after {previous}: not strictly increasing"
        );
        previous = token;
    }
    Ok(())
}

fn contention_threads<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    const THREADS: usize = 16;
    const ROUNDS: usize = 50;
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(THREADS));
    let lock = Resource::lock("contended");
    let mut threads = Vec::new();
    for t in 0..THREADS {
        let store = Store::new(f.reopen()?);
        let (log, inside, barrier, lock) =
            (log.clone(), inside.clone(), barrier.clone(), lock.clone());
        threads.push(std::thread::spawn(move || -> Result<(), String> {
            barrier.wait();
            let options = AcquireOptions::new(60_000)
                .owner(format!("thread-{t}"))
                .wait_ms(120_000);
            for _ in 0..ROUNDS {
                let lease = store.acquire(&lock, &options).map_err(|e| e.to_string())?;
                let concurrent = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let entry = if concurrent == 0 {
                    lease.token().to_string()
                } else {
                    format!("OVERLAP {}", lease.token())
                };
                log.lock().unwrap().push(entry);
                inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                store.release(&lease).map_err(|e| e.to_string())?;
            }
            Ok(())
        }));
    }
    for thread in threads {
        thread.join().map_err(|_| "a contender panicked")??;
    }
    let lines = log.lock().unwrap().clone();
    check_log(&lines, THREADS * ROUNDS)
}

fn contention_processes<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    const PROCESSES: usize = 8;
    const ROUNDS: u32 = 10;
    let log = f.scratch_file("log");
    let job = Job::Contend {
        lock: "contended".into(),
        rounds: ROUNDS,
        ttl_ms: 60_000,
        log: log.clone(),
        busy: f.scratch_file("busy"),
    };
    let workers: Vec<_> = (0..PROCESSES)
        .map(|_| f.spawn_worker(&job))
        .collect::<Result<_, _>>()?;
    for mut worker in workers {
        let status = worker.wait().map_err(|e| fail("waiting for a worker", e))?;
        ensure!(status.success(), "a worker failed: {status}");
    }
    let text = std::fs::read_to_string(&log).map_err(|e| fail("reading the log", e))?;
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    check_log(&lines, PROCESSES * ROUNDS as usize)
}

fn wait_for_line(path: &std::path::Path, limit: Duration) -> Result<String, Failed> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Some(line) = text.lines().next().filter(|_| text.ends_with('\n'))
        {
            return Ok(line.to_string());
        }
        ensure!(
            Instant::now() < deadline,
            "the worker never reported holding the lease"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn hard_kill<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    let ttl_ms = 1_000;
    let token_file = f.scratch_file("token");
    let lock = Resource::lock("killed-holder");
    let mut worker = f.spawn_worker(&Job::Hold {
        lock: "killed-holder".into(),
        ttl_ms,
        token_file: token_file.clone(),
        tied_to_process: false,
        session: None,
    })?;
    let dead_token: u64 = wait_for_line(&token_file, Duration::from_secs(30))?
        .parse()
        .map_err(|_| "bad token from the holder")?;
    worker.kill().map_err(|e| fail("SIGKILL", e))?;
    let _ = worker.wait();
    let store = f.store();
    // The newest record is the dead holder's last renewal; nothing may take over
    // before it expires.
    let entry = store
        .status()
        .map_err(|e| fail("status", e))?
        .into_iter()
        .find(|e| e.label == "killed-holder")
        .ok_or("no status entry for the killed holder")?;
    let lease = acquire(
        &store,
        &lock,
        &AcquireOptions::new(ttl_ms)
            .owner("successor")
            .wait_ms(10 * ttl_ms),
    )?;
    ensure!(
        lease.granted_at_ms() >= entry.expires_at_ms || entry.token != dead_token,
        "successor granted at {} before the dead lease expired at {}",
        lease.granted_at_ms(),
        entry.expires_at_ms
    );
    ensure!(
        lease.token() > dead_token,
        "successor token {} not above {dead_token}",
        lease.token()
    );
    ensure!(
        !check(&store, &lock, dead_token)?,
        "the dead holder's token passes check"
    );
    store.release(&lease).map_err(|e| fail("release", e))?;
    ensure!(
        !check(&store, &lock, dead_token)?,
        "the dead token passes after the successor released"
    );
    Ok(())
}

fn kill_iterations() -> usize {
    match std::env::var("FENCEPOST_CONFORMANCE_STRESS") {
        Ok(v) if !v.is_empty() && v != "0" => 300,
        _ => 24,
    }
}

fn kill_during_claim<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    let ttl_ms = 400;
    let lock = Resource::lock("churn");
    let key = key_of(&lock)?;
    let store = f.store();
    let mut high_water = 0;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
    for iteration in 0..kill_iterations() {
        let mut worker = f.spawn_worker(&Job::Churn {
            lock: "churn".into(),
            ttl_ms,
        })?;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(5 + seed % 60));
        worker.kill().map_err(|e| fail("SIGKILL", e))?;
        let _ = worker.wait();
        // The series is readable and numbering never went back.
        let newest = newest_generation(f.raw(), &key)?;
        ensure!(
            newest >= high_water,
            "iteration {iteration}: newest generation went back {high_water} → {newest}"
        );
        store.status().map_err(|e| fail("status after a kill", e))?;
        let lease = store
            .acquire(
                &lock,
                &AcquireOptions::new(ttl_ms)
                    .owner("after-kill")
                    .wait_ms(ttl_ms * 3),
            )
            .map_err(|e| fail(&format!("iteration {iteration}: acquire after a kill"), e))?;
        ensure!(
            lease.token() > newest,
            "iteration {iteration}: token {} not above {newest}",
            lease.token()
        );
        store.release(&lease).map_err(|e| fail("release", e))?;
        high_water = lease.generation() + 1;
    }
    Ok(())
}

fn power_cut_keeps_claims<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    let store = f.store();
    let lock = Resource::lock("durable");
    let mut lease = acquire(&store, &lock, &opts("a"))?;
    store.renew(&mut lease).map_err(|e| fail("renew", e))?;
    f.power_cut();
    ensure!(
        check(&store, &lock, lease.token())?,
        "a flushed claim did not survive the power cut"
    );
    ensure!(
        matches!(
            store.try_acquire(&lock, &opts("b")),
            Ok(TryAcquire::Held(_))
        ),
        "after a power cut a rival got the resource"
    );
    Ok(())
}

fn power_cut_lost_tombstone_is_held_until_ttl<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let lock = Resource::lock("cut-tombstone");
    let key = key_of(&lock)?;
    let lease = acquire(&store, &lock, &opts("a"))?;
    store.release(&lease).map_err(|e| fail("release", e))?;
    let dropped = f.power_cut().unwrap_or(0);
    ensure!(dropped >= 1, "the power cut dropped no unflushed tombstone");
    ensure!(
        newest_generation(f.raw(), &key)? == lease.generation(),
        "the claim itself was lost"
    );
    ensure!(
        matches!(
            store.try_acquire(&lock, &opts("b")),
            Ok(TryAcquire::Held(_))
        ),
        "after losing the tombstone the claim was not held until its ttl"
    );
    clock.advance_ms(TTL_MS);
    let next = acquire(&store, &lock, &opts("b"))?;
    ensure!(
        next.token() > lease.token(),
        "a number was reused after a lost tombstone"
    );
    Ok(())
}

fn create_is_exclusive<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    use fencepost::CreateOutcome;
    let key = key_of(&Resource::lock("exclusive"))?;
    let first = f
        .raw()
        .create(&key, 1, b"first", Durability::Flushed)
        .map_err(|e| fail("create", e))?;
    ensure!(
        first == CreateOutcome::Created,
        "the first create of generation 1 returned {first:?}"
    );
    let second = f
        .raw()
        .create(&key, 1, b"second", Durability::Flushed)
        .map_err(|e| fail("create", e))?;
    ensure!(
        second == CreateOutcome::AlreadyExists,
        "a second create of generation 1 returned {second:?}"
    );
    let bytes = f.raw().read(&key, 1).map_err(|e| fail("read", e))?;
    ensure!(
        bytes.as_deref() == Some(&b"first"[..]),
        "a losing create changed the record: {bytes:?}"
    );
    // Racing creates from another handle: exactly one wins each generation.
    let other = f.reopen()?;
    for generation in 2..40 {
        let barrier = Arc::new(Barrier::new(2));
        let (k, b, o) = (key.clone(), barrier.clone(), other.clone());
        let racer = std::thread::spawn(move || {
            b.wait();
            o.create(&k, generation, b"racer", Durability::Unflushed)
        });
        barrier.wait();
        let mine = f
            .raw()
            .create(&key, generation, b"mine", Durability::Unflushed)
            .map_err(|e| fail("create", e))?;
        let theirs = racer
            .join()
            .map_err(|_| "racer panicked")?
            .map_err(|e| fail("create", e))?;
        let winners = [mine, theirs]
            .iter()
            .filter(|o| **o == CreateOutcome::Created)
            .count();
        ensure!(
            winners == 1,
            "generation {generation}: {winners} creates succeeded"
        );
    }
    Ok(())
}

/// A renewer creates g+1 and then removes g, over and over, from another handle;
/// every listing taken meanwhile must show a generation at least as high as the one
/// published (created, not yet superseded) when the listing began. A backend that
/// says it cannot promise this (`listing_is_snapshot` false) is exempt: the protocol
/// never sweeps it.
fn listing_snapshot_under_renewals<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    if !f.raw().listing_is_snapshot() {
        return Ok(());
    }
    let key = key_of(&Resource::lock("listing-snapshot"))?;
    f.raw()
        .create(&key, 1, b"1", Durability::Unflushed)
        .map_err(|e| fail("create", e))?;
    let published = Arc::new(AtomicU64::new(1));
    let done = Arc::new(AtomicBool::new(false));
    let renewer = {
        let (other, key) = (f.reopen()?, key.clone());
        let (published, done) = (Arc::clone(&published), Arc::clone(&done));
        std::thread::spawn(move || -> Result<(), String> {
            let started = std::time::Instant::now();
            let mut g = 1;
            // At least 300 ms of renewals, so a loaded machine still lists meanwhile.
            while (g < 2_000 || started.elapsed() < Duration::from_millis(300))
                && started.elapsed() < Duration::from_secs(2)
            {
                other
                    .create(&key, g + 1, b"r", Durability::Unflushed)
                    .map_err(|e| e.to_string())?;
                published.store(g + 1, Ordering::SeqCst);
                other.remove(&key, g).map_err(|e| e.to_string())?;
                g += 1;
            }
            done.store(true, Ordering::SeqCst);
            Ok(())
        })
    };
    let mut listings = 0;
    let mut failure = None;
    while !done.load(Ordering::SeqCst) {
        let before = published.load(Ordering::SeqCst);
        let listed = f.raw().generations(&key).map_err(|e| fail("list", e))?;
        let max = listed.iter().copied().max().unwrap_or(0);
        listings += 1;
        if max < before && failure.is_none() {
            failure = Some(format!(
                "a listing during renewals returned {listed:?}, missing generation {before} that existed when it began"
            ));
        }
    }
    renewer
        .join()
        .map_err(|_| "renewer panicked")?
        .map_err(|e| fail("renewer", e))?;
    if let Some(failure) = failure {
        return Err(Failed::from(failure));
    }
    ensure!(listings > 0, "no listing ran during the renewals");
    Ok(())
}

fn records_round_trip<S: LeaseStore + Clone + 'static>(f: &Fixture<S>) -> Result<(), Failed> {
    let key = key_of(&Resource::lock("round-trip"))?;
    let other_key = key_of(&Resource::file("/round/trip"))?;
    let generations = [1u64, 2, 10, 123_456_789];
    for g in generations {
        let bytes = format!("record {g}");
        f.raw()
            .create(&key, g, bytes.as_bytes(), Durability::Unflushed)
            .map_err(|e| fail("create", e))?;
    }
    f.raw()
        .create(&other_key, 7, b"other", Durability::Flushed)
        .map_err(|e| fail("create", e))?;
    let mut listed = f.raw().generations(&key).map_err(|e| fail("list", e))?;
    listed.sort_unstable();
    ensure!(
        listed == generations,
        "listed {listed:?}, created {generations:?}"
    );
    for g in generations {
        let bytes = f.raw().read(&key, g).map_err(|e| fail("read", e))?;
        ensure!(
            bytes == Some(format!("record {g}").into_bytes()),
            "generation {g} read back wrong"
        );
    }
    ensure!(
        f.raw()
            .read(&key, 3)
            .map_err(|e| fail("read", e))?
            .is_none(),
        "a never-created generation read as present"
    );
    f.raw().remove(&key, 2).map_err(|e| fail("remove", e))?;
    f.raw()
        .remove(&key, 2)
        .map_err(|e| fail("removing a missing record", e))?;
    let listed = f.raw().generations(&key).map_err(|e| fail("list", e))?;
    ensure!(
        !listed.contains(&2) && listed.len() == 3,
        "after removing 2, listed {listed:?}"
    );
    let mut keys = f.raw().keys().map_err(|e| fail("keys", e))?;
    keys.sort();
    let mut expected = vec![key.clone(), other_key.clone()];
    expected.sort();
    ensure!(
        keys == expected,
        "keys listed {keys:?}, expected {expected:?}"
    );
    let empty = key_of(&Resource::lock("never-used"))?;
    ensure!(
        f.raw()
            .generations(&empty)
            .map_err(|e| fail("list", e))?
            .is_empty(),
        "an unused key lists generations"
    );
    Ok(())
}

/// A holder that keeps its lease alive (records with liveness evidence), ttl 60 s,
/// in a worker process: the worker and its token (written to `token_file`).
fn tied_holder<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
    lock: &str,
    token_file: &str,
) -> Result<(std::process::Child, u64), Failed> {
    let token_file = f.scratch_file(token_file);
    let worker = f.spawn_worker(&Job::Hold {
        lock: lock.into(),
        ttl_ms: 60_000,
        token_file: token_file.clone(),
        tied_to_process: true,
        session: None,
    })?;
    let token = wait_for_line(&token_file, Duration::from_secs(30))?
        .parse()
        .map_err(|_| "bad token from the holder")?;
    Ok((worker, token))
}

fn dead_holder_is_taken_over_early<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let lock = Resource::lock("dead-holder");
    let (mut worker, dead) = tied_holder(f, "dead-holder", "first")?;
    worker.kill().map_err(|e| fail("SIGKILL", e))?;
    let _ = worker.wait();
    let killed = Instant::now();
    let store = f.store();
    let options = AcquireOptions::new(TTL_MS)
        .owner("successor")
        .wait_ms(5_000);
    let outcome = store
        .try_acquire(&lock, &options)
        .map_err(|e| fail("acquire", e))?;
    if SystemLiveness.this_process().is_none() {
        // No evidence on this platform: the dead holder keeps plain ttl semantics.
        ensure!(
            matches!(outcome, TryAcquire::Held(_)),
            "taken over early on a platform that gives no liveness evidence"
        );
        return Ok(());
    }
    let TryAcquire::Acquired(lease) = outcome else {
        return Err("the SIGKILLed holder was not taken over within 5 s of its death".into());
    };
    ensure!(
        killed.elapsed() < Duration::from_secs(1),
        "the successor waited {:?} for a dead holder",
        killed.elapsed()
    );
    ensure!(
        lease.token() > dead,
        "successor token {} not above the dead holder's {dead}",
        lease.token()
    );
    ensure!(
        !check(&store, &lock, dead)?,
        "the dead holder's token passes check"
    );
    // The off switch: a second dead holder is waited out.
    store.release(&lease).map_err(|e| fail("release", e))?;
    let (mut worker, _) = tied_holder(f, "dead-holder", "second")?;
    worker.kill().map_err(|e| fail("SIGKILL", e))?;
    let _ = worker.wait();
    let pure_ttl = AcquireOptions::new(TTL_MS)
        .owner("patient")
        .dead_holder_takeover(false);
    ensure!(
        matches!(
            store
                .try_acquire(&lock, &pure_ttl)
                .map_err(|e| fail("acquire", e))?,
            TryAcquire::Held(_)
        ),
        "dead_holder_takeover(false) took over before the ttl"
    );
    Ok(())
}

fn paused_holder_is_not_taken_over_early<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let lock = Resource::lock("paused-holder");
    let (worker, token) = tied_holder(f, "paused-holder", "token")?;
    let mut worker = KillOnDrop(worker);
    // A paused process is alive: it may wake up and renew. (Where there is no
    // SIGSTOP, a running holder is the same question.)
    #[cfg(unix)]
    signal(worker.0.id(), "STOP")?;
    let outcome = f
        .store()
        .try_acquire(
            &lock,
            &AcquireOptions::new(TTL_MS).owner("waiter").wait_ms(1_500),
        )
        .map_err(|e| fail("acquire", e));
    #[cfg(unix)]
    signal(worker.0.id(), "CONT")?;
    match outcome? {
        TryAcquire::Held(holder) => ensure!(
            holder.token == token,
            "held by token {}, expected the paused holder's {token}",
            holder.token
        ),
        TryAcquire::Acquired(_) => {
            return Err("a paused (alive) holder was taken over before its ttl".into());
        }
    }
    let _ = worker.0.kill();
    let _ = worker.0.wait();
    Ok(())
}

/// Kills a worker when the scenario ends, even when it fails.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(unix)]
fn signal(pid: u32, name: &str) -> Result<(), Failed> {
    let status = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .map_err(|e| fail("kill", e))?;
    ensure!(status.success(), "kill -{name} {pid} failed");
    Ok(())
}

/// A liveness probe that says what the scenario wants: this process is on host
/// `this`, and every process it is asked about has `verdict`.
#[derive(Debug)]
struct Told {
    this: ProcessEvidence,
    verdict: Verdict,
}

impl Liveness for Told {
    fn this_process(&self) -> Option<ProcessEvidence> {
        Some(self.this.clone())
    }
    fn verdict(&self, _evidence: &ProcessEvidence) -> Verdict {
        self.verdict
    }
}

fn takeover_needs_same_host_and_a_definite_death<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let here = ProcessEvidence {
        host: "host-a pid:[1]".into(),
        boot: "boot-a".into(),
        pid: 4242,
        start: 7,
        group: None,
    };
    let cases = [
        (
            "another host",
            ProcessEvidence {
                host: "host-b pid:[1]".into(),
                ..here.clone()
            },
            Verdict::Gone,
            false,
        ),
        (
            "another pid namespace",
            ProcessEvidence {
                host: "host-a pid:[2]".into(),
                ..here.clone()
            },
            Verdict::Gone,
            false,
        ),
        (
            "another boot",
            ProcessEvidence {
                boot: "boot-b".into(),
                ..here.clone()
            },
            Verdict::Gone,
            false,
        ),
        ("an unknown verdict", here.clone(), Verdict::Unknown, false),
        ("a running holder", here.clone(), Verdict::Running, false),
        ("a dead holder here", here.clone(), Verdict::Gone, true),
    ];
    for (i, (case, evidence, verdict, taken_over)) in cases.into_iter().enumerate() {
        let lock = Resource::lock(format!("evidence-{i}"));
        let key = key_of(&lock)?;
        let now = SteppedClock::new();
        let granted = fencepost::Clock::wall_ms(&now);
        let record = Record {
            v: record::FORMAT_VERSION,
            key: key.as_str().into(),
            label: format!("evidence-{i}").into(),
            token: 1,
            generation: 1,
            holder: "planted-1".into(),
            owner: "planted".into(),
            pid: evidence.pid,
            host: "".into(),
            granted_at_ms: granted,
            expires_at_ms: granted + TTL_MS,
            ttl_ms: TTL_MS,
            released: false,
            secret_sha256: None,
            broken: None,
            next: None,
            process: Some(evidence),
            session: None,
        };
        plant(f.raw(), &key, 1, &record.encode())?;
        let store = f.store().with_liveness(Told {
            this: here.clone(),
            verdict,
        });
        let outcome = store
            .try_acquire(&lock, &opts("waiter"))
            .map_err(|e| fail(case, e))?;
        match (outcome, taken_over) {
            (TryAcquire::Acquired(lease), true) => {
                ensure!(
                    lease.token() == 2,
                    "{case}: token {} after 1",
                    lease.token()
                );
                ensure!(
                    !check(&store, &lock, 1)?,
                    "{case}: the dead token passes check"
                );
            }
            (TryAcquire::Held(_), false) => {}
            (TryAcquire::Acquired(_), false) => {
                return Err(format!("{case}: taken over before its ttl").into());
            }
            (TryAcquire::Held(_), true) => {
                return Err(format!("{case}: a provably dead holder was waited out").into());
            }
        }
    }
    Ok(())
}

/// `store.try_acquire` that must report the resource held by `owner`.
fn held_by(store: &Store, resource: &Resource, owner: &str, what: &str) -> Result<(), Failed> {
    held_by_one_of(store, resource, &[owner], what)
}

/// As [`held_by`], for a resource that several live claims cover.
fn held_by_one_of(
    store: &Store,
    resource: &Resource,
    owners: &[&str],
    what: &str,
) -> Result<(), Failed> {
    match store.try_acquire(resource, &opts("intruder")) {
        Ok(TryAcquire::Held(holder)) => {
            ensure!(
                owners.contains(&holder.owner.as_str()),
                "{what}: held by {:?}, expected one of {owners:?}",
                holder.owner
            );
            Ok(())
        }
        other => {
            Err(format!("{what}: acquire returned {other:?}, expected held by {owners:?}").into())
        }
    }
}

fn subtree_conflicts_both_ways<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let root = f.scratch().join("repo");
    std::fs::create_dir_all(root.join("src/auth")).map_err(|e| fail("mkdir", e))?;
    std::fs::write(root.join("src/auth/login.rs"), b"x").map_err(|e| fail("write", e))?;
    let src = Resource::dir(root.join("src"));
    // A held subtree refuses a file below it (existing, and not created yet, in a
    // directory that does not exist yet), a directory below it, and itself.
    let tree = acquire(&store, &src, &opts("tree"))?;
    held_by(
        &store,
        &Resource::file(root.join("src/auth/login.rs")),
        "tree",
        "an existing file below a held subtree",
    )?;
    held_by(
        &store,
        &Resource::file(root.join("src/new/deep/file.rs")),
        "tree",
        "a file not created yet below a held subtree",
    )?;
    held_by(
        &store,
        &Resource::dir(root.join("src/auth")),
        "tree",
        "a directory below a held subtree",
    )?;
    held_by(
        &store,
        &Resource::dir(root.join("src")),
        "tree",
        "the held subtree itself",
    )?;
    held_by(
        &store,
        &Resource::dir(&root),
        "tree",
        "a directory above a held subtree",
    )?;
    // Beside it: free.
    let beside = acquire(
        &store,
        &Resource::file(root.join("README.md")),
        &opts("beside"),
    )?;
    let sibling = acquire(&store, &Resource::dir(root.join("docs")), &opts("sibling"))?;
    store.release(&tree).map_err(|e| fail("release", e))?;
    // A held file refuses a subtree of any directory above it.
    let file = acquire(
        &store,
        &Resource::file(root.join("src/auth/login.rs")),
        &opts("file"),
    )?;
    held_by(
        &store,
        &Resource::dir(root.join("src/auth")),
        "file",
        "the parent of a held file",
    )?;
    held_by(
        &store,
        &Resource::dir(root.join("src")),
        "file",
        "an ancestor of a held file",
    )?;
    // A held subtree refuses a subtree above it.
    let auth_free = store.try_acquire(&Resource::dir(root.join("src/other")), &opts("other"));
    let other = match auth_free {
        Ok(TryAcquire::Acquired(lease)) => lease,
        other => return Err(format!("a subtree beside a held file: {other:?}").into()),
    };
    held_by_one_of(
        &store,
        &Resource::dir(root.join("src")),
        &["file", "other"],
        "an ancestor of a held file and subtree",
    )?;
    store.release(&file).map_err(|e| fail("release", e))?;
    held_by(
        &store,
        &Resource::dir(root.join("src")),
        "other",
        "an ancestor of a held subtree",
    )?;
    store.release(&other).map_err(|e| fail("release", e))?;
    store.release(&beside).map_err(|e| fail("release", e))?;
    // Released everything below: the subtree is free, with a token above its first.
    let again = acquire(&store, &src, &opts("tree"))?;
    ensure!(
        again.token() > tree.token(),
        "token {} did not rise above {}",
        again.token(),
        tree.token()
    );
    ensure!(
        check(&store, &src, again.token())?,
        "the subtree's token does not pass check"
    );
    ensure!(
        !check(&store, &src, tree.token())?,
        "the released subtree token passes check"
    );
    store.release(&again).map_err(|e| fail("release", e))?;
    store.release(&sibling).map_err(|e| fail("release", e))?;
    // `status` shows one row per claim and no index series.
    let rows = store.status().map_err(|e| fail("status", e))?;
    ensure!(
        rows.iter().all(|r| r.key.is_claim()),
        "status shows index or marker keys: {:?}",
        rows.iter().map(|r| r.key.as_str()).collect::<Vec<_>>()
    );
    // A session holding a subtree may claim files in it; anyone else may not.
    let session = AcquireOptions::new(TTL_MS)
        .owner("agent")
        .session("subtree-session");
    let tree = acquire(&store, &src, &session)?;
    let login = Resource::file(root.join("src/auth/login.rs"));
    let mine = acquire(&store, &login, &session)?;
    held_by(
        &store,
        &Resource::file(root.join("src/auth/other.rs")),
        "agent",
        "a file below another session's subtree",
    )?;
    store.release(&mine).map_err(|e| fail("release", e))?;
    store.release(&tree).map_err(|e| fail("release", e))?;
    // A path that is a file is not a subtree.
    ensure!(
        matches!(
            Resource::dir(root.join("src/auth/login.rs")).identity(),
            Err(Error::InvalidResource(_))
        ),
        "a file was accepted as a subtree"
    );
    Ok(())
}

fn subtree_spellings_are_one_tree<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let root = f.scratch().join("repo");
    std::fs::create_dir_all(root.join("src/auth")).map_err(|e| fail("mkdir", e))?;
    // A held subtree through `..`: the real path is below it.
    let dotted = Resource::dir(root.join("docs/../src"));
    let tree = acquire(&store, &dotted, &opts("tree"))?;
    held_by(
        &store,
        &Resource::file(root.join("src/auth/x.rs")),
        "tree",
        "a file below a subtree claimed through ..",
    )?;
    held_by(
        &store,
        &Resource::file(root.join("src/./auth/../auth/y.rs")),
        "tree",
        "a `..` spelling of a file below a held subtree",
    )?;
    #[cfg(unix)]
    {
        // A symlinked directory: claims through the link are claims of the real path.
        std::os::unix::fs::symlink(root.join("src"), root.join("link"))
            .map_err(|e| fail("symlink", e))?;
        held_by(
            &store,
            &Resource::file(root.join("link/auth/z.rs")),
            "tree",
            "a file below a held subtree through a symlinked directory",
        )?;
        held_by(
            &store,
            &Resource::dir(root.join("link")),
            "tree",
            "the held subtree through a symlink to it",
        )?;
    }
    store.release(&tree).map_err(|e| fail("release", e))?;
    // A file not created yet, then created: one chain before and after.
    let new = root.join("src/auth/new.rs");
    let file = acquire(&store, &Resource::file(&new), &opts("file"))?;
    std::fs::write(&new, b"x").map_err(|e| fail("write", e))?;
    held_by(
        &store,
        &Resource::dir(root.join("src")),
        "file",
        "an ancestor of a file claimed before it existed",
    )?;
    #[cfg(unix)]
    held_by(
        &store,
        &Resource::dir(root.join("link/auth")),
        "file",
        "an ancestor of a held file through a symlinked directory",
    )?;
    store.release(&file).map_err(|e| fail("release", e))?;
    Ok(())
}

fn subtree_contention_threads<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    use std::sync::Mutex;
    let root = f.scratch().join("repo");
    std::fs::create_dir_all(root.join("src/a")).map_err(|e| fail("mkdir", e))?;
    let resources = [
        Resource::dir(root.join("src")),
        Resource::dir(root.join("src/a")),
        Resource::file(root.join("src/a/one.rs")),
        Resource::file(root.join("src/b/two.rs")),
    ];
    // Which resources cover which (index pairs that must never be held at once).
    let conflicts =
        |a: usize, b: usize| a == b || a == 0 || b == 0 || (a.min(b) == 1 && a.max(b) == 2);
    // One uncontended claim and release of a resource like theirs, on this backend
    // and machine: the unit of the wait bound below.
    let unit_ms = {
        let store = f.store();
        let probe = Resource::file(root.join("src/b/unit.rs"));
        let started = Instant::now();
        let lease = store
            .acquire(&probe, &AcquireOptions::new(TTL_MS))
            .map_err(|e| fail("unit claim", e))?;
        store.release(&lease).map_err(|e| fail("release", e))?;
        u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
    };
    // A claim waits only for the claims in its way when it arrives: a waiting
    // subtree claimer's intent keeps covered claims that arrive later out
    // (design-05 §4.3), so no claim is starved by the others' stream. That is at
    // most the 7 other threads' claims (about a unit each, plus backoff): 100 units,
    // and at least 30 s, bound it on a loaded machine.
    let wait_ms = unit_ms.saturating_mul(100).max(30_000);
    let inside: Arc<Mutex<Vec<usize>>> = Arc::default();
    let violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let (store, resources) = (f.store(), resources.clone());
            let (inside, violations, barrier) =
                (inside.clone(), violations.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for round in 0..12 {
                    let which = (t + round) % resources.len();
                    let options = AcquireOptions::new(TTL_MS)
                        .owner(format!("t{t}"))
                        .wait_ms(wait_ms);
                    let Ok(lease) = store.acquire(&resources[which], &options) else {
                        violations.lock().unwrap().push(format!(
                            "t{t} could not acquire {which} within {wait_ms} ms (a claim took {unit_ms} ms alone)"
                        ));
                        return;
                    };
                    {
                        let mut now = inside.lock().unwrap();
                        if let Some(other) = now.iter().find(|o| conflicts(**o, which)) {
                            violations.lock().unwrap().push(format!(
                                "t{t} holds resource {which} while resource {other} is held"
                            ));
                        }
                        now.push(which);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                    {
                        let mut now = inside.lock().unwrap();
                        let at = now.iter().position(|o| *o == which).expect("entered");
                        now.remove(at);
                    }
                    let _ = store.release(&lease);
                }
            })
        })
        .collect();
    for handle in handles {
        handle
            .join()
            .map_err(|_| Failed::from("a contention thread panicked"))?;
    }
    let violations = violations.lock().unwrap();
    ensure!(violations.is_empty(), "{}", violations.join("; "));
    Ok(())
}

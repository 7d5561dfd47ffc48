//! Scenarios for the kinds of claim (issue 14, docs/design-04-claims.md): sessions,
//! several resources at once, slots.

use std::time::Duration;

use fencepost::{Clock, Error, LeaseStore, ManualClock, Resource, TryAcquire, TryAcquireAll};

use super::{
    KillOnDrop, START_MS, TTL_MS, acquire, check, fail, key_of, newest_generation, opts,
    wait_for_line,
};
use crate::{Failed, Fixture, Job};

/// A claim by the session whose tenure holds the resource returns that tenure (same
/// token, same holder), renewed for the new ttl — for a lock and for an existing
/// file (two keys); another session, or no session, is held.
pub(super) fn session_reclaim_is_reentrant<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let path = f.scratch_file("session.txt");
    std::fs::write(&path, b"x").map_err(|e| fail("write", e))?;
    for resource in [Resource::lock("session-lock"), Resource::file(&path)] {
        let first = acquire(&store, &resource, &opts("a").session("agent-7"))?;
        ensure!(!first.reentered(), "a fresh claim reported re-entry");
        clock.advance_ms(TTL_MS / 2);
        // Another handle on the store: another process of the session.
        let other = f.store_with_clock(clock.clone());
        let mut longer = opts("b").session("agent-7");
        longer.ttl_ms = 2 * TTL_MS;
        let again = acquire(&other, &resource, &longer)?;
        ensure!(
            again.token() == first.token() && again.holder_id() == first.holder_id(),
            "re-entry gave token {} of {}, not the tenure's token {} of {}",
            again.token(),
            again.holder_id(),
            first.token(),
            first.holder_id()
        );
        ensure!(again.reentered(), "a re-entry did not say so");
        ensure!(
            again.generation() > first.generation()
                && again.expires_at_ms() == clock.wall_ms() + 2 * TTL_MS,
            "re-entry was not renewed for the new ttl: {again:?}"
        );
        ensure!(
            again.keys().count() == first.keys().count(),
            "re-entry holds {} keys, the tenure {}",
            again.keys().count(),
            first.keys().count()
        );
        ensure!(
            check(&store, &resource, first.token())?,
            "the tenure's token fails check after re-entry"
        );
        for (who, options) in [
            ("another session", opts("c").session("agent-8")),
            ("a claim without a session", opts("c")),
        ] {
            match store.try_acquire(&resource, &options) {
                Ok(TryAcquire::Held(holder)) if holder.token == first.token() => {}
                other => return Err(format!("{who} was not held: {other:?}").into()),
            }
        }
        store.release(&again).map_err(|e| fail("release", e))?;
        ensure!(
            !check(&store, &resource, first.token())?,
            "the released tenure's token passes check"
        );
    }
    Ok(())
}

/// Any process naming the session acts on its tenure without the handle
/// (`resume_session`): renew keeps the token, release ends it; another session and
/// a tenure claimed without a session are refused with nothing written; an expired
/// session tenure is never revived (a new claim gets a new token).
pub(super) fn session_acts_without_the_handle<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let lock = Resource::lock("session-acts");
    let key = key_of(&lock)?;
    let first = acquire(&store, &lock, &opts("a").session("agent-7"))?;
    let before = newest_generation(f.raw(), &key)?;
    match store.resume_session(&lock, "agent-8") {
        Err(Error::NotSessionHolder {
            newest: Some(h), ..
        }) if h.token == first.token() => {}
        other => return Err(format!("another session resumed the tenure: {other:?}").into()),
    }
    ensure!(
        newest_generation(f.raw(), &key)? == before,
        "a refused session wrote a record"
    );
    clock.advance_ms(TTL_MS / 2);
    let mut resumed = store
        .resume_session(&lock, "agent-7")
        .map_err(|e| fail("resume_session", e))?;
    store.renew(&mut resumed).map_err(|e| fail("renew", e))?;
    ensure!(
        resumed.token() == first.token()
            && resumed.expires_at_ms() == START_MS + TTL_MS / 2 + TTL_MS,
        "the session's renewal changed the token or not the expiry: {resumed:?}"
    );
    let last = store
        .resume_session(&lock, "agent-7")
        .map_err(|e| fail("resume_session", e))?;
    store.release(&last).map_err(|e| fail("release", e))?;
    ensure!(
        !check(&store, &lock, first.token())?,
        "released through the session, the token still passes"
    );
    match store.resume_session(&lock, "agent-7") {
        Err(Error::Released { .. } | Error::NotSessionHolder { .. }) => {}
        other => return Err(format!("a released tenure was resumed: {other:?}").into()),
    }

    // A tenure without a session is no session's.
    let plain = acquire(&store, &lock, &opts("plain"))?;
    ensure!(
        store.resume_session(&lock, "agent-7").is_err(),
        "a session resumed a tenure claimed without one"
    );
    store.release(&plain).map_err(|e| fail("release", e))?;

    // Expired: the session's next claim is a new tenure with a higher token.
    let lapsed = acquire(&store, &lock, &opts("a").session("agent-7"))?;
    clock.advance_ms(TTL_MS);
    let next = acquire(&store, &lock, &opts("a").session("agent-7"))?;
    ensure!(
        !next.reentered() && next.token() > lapsed.token(),
        "an expired session tenure was revived: token {} after {}",
        next.token(),
        lapsed.token()
    );
    Ok(())
}

/// The test through real processes: a worker holds a lock for session
/// `agent-7` (kept alive); this process's claim for the same session keeps the
/// worker's token; another session is refused.
pub(super) fn session_reentry_across_processes<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let token_file = f.scratch_file("session-token");
    let worker = KillOnDrop(f.spawn_worker(&Job::Hold {
        lock: "session-procs".into(),
        ttl_ms: 60_000,
        token_file: token_file.clone(),
        tied_to_process: true,
        session: Some("agent-7".into()),
    })?);
    let token: u64 = wait_for_line(&token_file, Duration::from_secs(30))?
        .parse()
        .map_err(|_| "bad token from the worker")?;
    let store = f.store();
    let lock = Resource::lock("session-procs");
    match store.try_acquire(&lock, &opts("other").session("agent-8")) {
        Ok(TryAcquire::Held(holder)) if holder.token == token => {}
        other => return Err(format!("another session was not held: {other:?}").into()),
    }
    let again = acquire(&store, &lock, &opts("second").session("agent-7"))?;
    ensure!(
        again.token() == token && again.reentered(),
        "the second process of the session got token {} (re-entered: {}), not {token}",
        again.token(),
        again.reentered()
    );
    drop(worker);
    Ok(())
}

/// Nothing a session writes or shows names the session id, from which its
/// tenures' secret is derived: every record of every key (claim, renewal,
/// tombstone) and every `status` entry carries the session's tag instead, and the
/// tag is no proof — a reader who takes it for the id acts on nothing.
pub(super) fn session_records_never_carry_the_session_id<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let session = "agent-secret-name-7";
    let tag = fencepost::SessionTag::of(session);
    let path = f.scratch_file("tagged.txt");
    std::fs::write(&path, b"x").map_err(|e| fail("write", e))?;
    for resource in [Resource::lock("tagged-lock"), Resource::file(&path)] {
        let mut lease = acquire(&store, &resource, &opts("a").session(session))?;
        store.renew(&mut lease).map_err(|e| fail("renew", e))?;
        // What a reader of the store sees while the tenure is live.
        let entries = store.status().map_err(|e| fail("status", e))?;
        let shown: Vec<_> = entries
            .iter()
            .filter(|e| e.token == lease.token() && e.live)
            .collect();
        ensure!(
            !shown.is_empty(),
            "status does not show the live session tenure"
        );
        for entry in &shown {
            ensure!(
                entry.session.as_ref() == Some(&tag),
                "status shows session {:?}, not the tag {tag}",
                entry.session
            );
            let json = serde_json::to_string(entry).map_err(|e| fail("encode", e))?;
            ensure!(
                !json.contains(session),
                "status shows the session id: {json}"
            );
        }
        // Taking the tag (or the owner) for the session id proves nothing.
        for guess in [tag.as_str(), "a"] {
            match store.resume_session(&resource, guess) {
                Err(Error::NotSessionHolder { .. }) => {}
                other => {
                    return Err(format!(
                        "a reader's guess {guess:?} resumed the tenure: {other:?}"
                    )
                    .into());
                }
            }
        }
        store.release(&lease).map_err(|e| fail("release", e))?;
        for key in lease.keys() {
            let generations = f.raw().generations(key).map_err(|e| fail("list", e))?;
            ensure!(!generations.is_empty(), "no records for {key}");
            for generation in generations {
                let Some(bytes) = f.raw().read(key, generation).map_err(|e| fail("read", e))?
                else {
                    continue;
                };
                let text = String::from_utf8_lossy(&bytes);
                ensure!(
                    !text.contains(session),
                    "record {key} #{generation} carries the session id: {text}"
                );
                ensure!(
                    text.contains(tag.as_str()),
                    "record {key} #{generation} does not carry the session tag: {text}"
                );
            }
        }
    }
    Ok(())
}

/// Several resources at once: one lease each (its own tenure and token), in the
/// order given; a claim that finds one held takes nothing (the others stay free);
/// the same resource named twice, or none, is refused.
pub(super) fn several_resources_all_or_nothing<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let path = f.scratch_file("several.txt");
    std::fs::write(&path, b"x").map_err(|e| fail("write", e))?;
    let (z, a, file) = (
        Resource::lock("several-z"),
        Resource::lock("several-a"),
        Resource::file(&path),
    );
    let leases = store
        .acquire_all(&[z.clone(), a.clone(), file.clone()], &opts("all"))
        .map_err(|e| fail("acquire_all", e))?;
    ensure!(leases.len() == 3, "{} leases for 3 resources", leases.len());
    for (lease, resource) in leases.iter().zip([&z, &a, &file]) {
        ensure!(
            lease.resource() == resource,
            "leases out of the order given: {:?} where {:?} was",
            lease.resource(),
            resource
        );
        ensure!(
            check(&store, resource, lease.token())?,
            "the lease on {} fails check",
            resource.target()
        );
    }
    let holders: std::collections::HashSet<&str> =
        leases.iter().map(fencepost::Lease::holder_id).collect();
    ensure!(holders.len() == 3, "the leases share a tenure: {holders:?}");

    // Another claimer of {free, a}: held on a, and the free one is left free.
    let free = Resource::lock("several-free");
    match store.try_acquire_all(&[free.clone(), a.clone()], &opts("other")) {
        Ok(TryAcquireAll::Held { resource, holder })
            if resource == a && holder.token == leases[1].token() => {}
        other => return Err(format!("the overlapping claim was not held on a: {other:?}").into()),
    }
    ensure!(
        store
            .holder(&free)
            .map_err(|e| fail("holder", e))?
            .is_none(),
        "a refused all-or-nothing claim left a resource held"
    );
    for lease in &leases {
        store.release(lease).map_err(|e| fail("release", e))?;
    }
    let both = store
        .acquire_all(&[free.clone(), a.clone()], &opts("other"))
        .map_err(|e| fail("acquire_all after release", e))?;
    ensure!(
        both[1].token() > leases[1].token(),
        "a's next tenure did not get a higher token"
    );

    // A subtree and a path inside it, or one path as a directory and as a file:
    // the set would meet its own subtree claim as another tenure's, round after
    // round (planted bug `SEVERAL_NESTED_UNCHECKED`).
    let tree = f.scratch_file("several-tree");
    let series = || -> Result<usize, Failed> {
        Ok(store.key_status().map_err(|e| fail("status", e))?.len())
    };
    let before = series()?;
    for (what, resources) in [
        (
            "one lock spelled twice",
            vec![Resource::lock("Dup"), Resource::lock(" dup")],
        ),
        ("nothing", vec![]),
        (
            "a subtree and a file inside it",
            vec![Resource::dir(&tree), Resource::file(tree.join("f.txt"))],
        ),
        (
            "a subtree and a subtree inside it",
            vec![Resource::dir(tree.join("in")), Resource::dir(&tree)],
        ),
        (
            "one path as a directory and as a file",
            vec![Resource::dir(&tree), Resource::file(&tree)],
        ),
    ] {
        match store.acquire_all(&resources, &opts("x")) {
            Err(Error::InvalidArgument(_)) => {}
            other => return Err(format!("{what} was not refused: {other:?}").into()),
        }
    }
    ensure!(
        store
            .holder(&Resource::lock("dup"))
            .map_err(|e| fail("holder", e))?
            .is_none(),
        "a refused claim took something"
    );
    let after = series()?;
    ensure!(
        after == before,
        "the refused sets wrote {} series",
        after.saturating_sub(before)
    );
    Ok(())
}

/// Two threads claim `{a, b}` and `{b, a}` all or nothing, 30 rounds each, and a
/// third claims `b` alone: every round completes (no deadlock) and no two are
/// inside `b` at once (log oracle: tokens of `b` strictly increase).
pub(super) fn several_resources_contend_threads<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    const ROUNDS: usize = 30;
    let log = Arc::new(Mutex::new(Vec::new()));
    let inside = Arc::new(AtomicUsize::new(0));
    let sets: [&[&str]; 3] = [&["a", "b"], &["b", "a"], &["b"]];
    let mut threads = Vec::new();
    for (t, set) in sets.into_iter().enumerate() {
        let store = fencepost::Store::new(f.reopen()?);
        let (log, inside) = (Arc::clone(&log), Arc::clone(&inside));
        let resources: Vec<Resource> = set
            .iter()
            .map(|n| Resource::lock(format!("several-{n}")))
            .collect();
        let at = set.iter().position(|n| *n == "b").expect("every set has b");
        threads.push(std::thread::spawn(move || -> Result<(), String> {
            let options = fencepost::AcquireOptions::new(60_000)
                .owner(format!("thread-{t}"))
                .wait_ms(120_000);
            for _ in 0..ROUNDS {
                let leases = store
                    .acquire_all(&resources, &options)
                    .map_err(|e| e.to_string())?;
                let token = leases[at].token();
                let entry = if inside.fetch_add(1, Ordering::SeqCst) == 0 {
                    token.to_string()
                } else {
                    format!("OVERLAP {token}")
                };
                log.lock().unwrap_or_else(|e| e.into_inner()).push(entry);
                inside.fetch_sub(1, Ordering::SeqCst);
                for lease in &leases {
                    store.release(lease).map_err(|e| e.to_string())?;
                }
            }
            Ok(())
        }));
    }
    for thread in threads {
        thread.join().map_err(|_| "a contender panicked")??;
    }
    let lines = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    super::check_log(&lines, 3 * ROUNDS)
}

/// The test through real processes: two workers claim `{a, b}` and
/// `{b, a}` in a loop, all or nothing; both finish every round (no deadlock) and
/// the log of `b`'s holders shows no overlap and strictly increasing tokens.
pub(super) fn several_resources_contend_processes<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    const ROUNDS: u32 = 15;
    let log = f.scratch_file("several-log");
    let busy = f.scratch_file("several-busy");
    let workers = [["a", "b"], ["b", "a"]]
        .iter()
        .map(|set| {
            f.spawn_worker(&Job::ContendAll {
                locks: set.iter().map(|n| format!("several-{n}")).collect(),
                marked: "several-b".into(),
                rounds: ROUNDS,
                ttl_ms: 60_000,
                log: log.clone(),
                busy: busy.clone(),
            })
            .map(KillOnDrop)
        })
        .collect::<Result<Vec<_>, _>>()?;
    for mut worker in workers {
        let status = worker
            .0
            .wait()
            .map_err(|e| fail("waiting for a worker", e))?;
        ensure!(status.success(), "a worker failed: {status}");
    }
    let text = std::fs::read_to_string(&log).map_err(|e| fail("reading the log", e))?;
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    super::check_log(&lines, 2 * ROUNDS as usize)
}

/// The backend under test, with one rival planted the moment the claim's first
/// create lands: a live claim of another tenure in `rival_key`'s series (a rival
/// that arrived between the claim's look and its take).
#[derive(Debug)]
struct RivalAfterFirstCreate<S> {
    inner: S,
    rival_key: fencepost::Key,
    rival: Vec<u8>,
    planted: std::sync::atomic::AtomicBool,
}

impl<S: LeaseStore> LeaseStore for RivalAfterFirstCreate<S> {
    fn create(
        &self,
        key: &fencepost::Key,
        generation: u64,
        bytes: &[u8],
        durability: fencepost::Durability,
    ) -> Result<fencepost::CreateOutcome, fencepost::BackendError> {
        let outcome = self.inner.create(key, generation, bytes, durability)?;
        if *key != self.rival_key && !self.planted.swap(true, std::sync::atomic::Ordering::SeqCst) {
            self.inner.create(
                &self.rival_key,
                1,
                &self.rival,
                fencepost::Durability::Flushed,
            )?;
        }
        Ok(outcome)
    }
    fn generations(&self, key: &fencepost::Key) -> Result<Vec<u64>, fencepost::BackendError> {
        self.inner.generations(key)
    }
    fn read(
        &self,
        key: &fencepost::Key,
        generation: u64,
    ) -> Result<Option<Vec<u8>>, fencepost::BackendError> {
        self.inner.read(key, generation)
    }
    fn remove(&self, key: &fencepost::Key, generation: u64) -> Result<(), fencepost::BackendError> {
        self.inner.remove(key, generation)
    }
    fn remove_key_if_empty(&self, key: &fencepost::Key) -> Result<(), fencepost::BackendError> {
        self.inner.remove_key_if_empty(key)
    }
    fn keys(&self) -> Result<Vec<fencepost::Key>, fencepost::BackendError> {
        self.inner.keys()
    }
    fn listing_is_snapshot(&self) -> bool {
        self.inner.listing_is_snapshot()
    }
    fn locator(&self) -> String {
        self.inner.locator()
    }
}

/// A rival takes the second resource (in canonical order) right after the claim
/// took the first: the claim reports the rival as the holder and gives the first
/// back (its newest record is our tombstone), so nothing is left held.
pub(super) fn several_resources_give_back_on_a_rival<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let mut pair = [Resource::lock("rival-p"), Resource::lock("rival-q")];
    pair.sort_by_key(|r| r.identity().map(|i| i.key).ok());
    let [first, second] = pair;
    let rival_key = key_of(&second)?;
    let store = fencepost::Store::with_clock(
        RivalAfterFirstCreate {
            inner: f.raw().clone(),
            rival: super::sample_record(&rival_key, 1, 1, START_MS),
            rival_key,
            planted: std::sync::atomic::AtomicBool::new(false),
        },
        clock,
    );
    match store.try_acquire_all(&[second.clone(), first.clone()], &opts("claim")) {
        Ok(TryAcquireAll::Held { resource, holder }) if resource == second && holder.token == 1 => {
        }
        other => return Err(format!("the rival was not reported as the holder: {other:?}").into()),
    }
    ensure!(
        store
            .holder(&first)
            .map_err(|e| fail("holder", e))?
            .is_none(),
        "the resource taken before the rival arrived was not given back"
    );
    let entry = store
        .key_status()
        .map_err(|e| fail("status", e))?
        .into_iter()
        .find(|e| e.key == key_of(&first).unwrap_or_else(|_| e.key.clone()))
        .ok_or("the first resource was never taken")?;
    ensure!(
        entry.state == fencepost::ClaimState::Released && entry.owner == "claim",
        "the first resource's newest record is not the claim's tombstone: {entry:?}"
    );
    Ok(())
}

/// Slots: N claimers get slots 1..N, each its own tenure and series; the next is
/// held (naming the holder whose lease ends first); a released slot is taken again
/// with a higher token in that slot's series; the plain lock is apart from its
/// slots; a session re-enters the slot it holds.
pub(super) fn slots_hold_at_most_n<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let mut leases = Vec::new();
    for i in 0..3 {
        let lease = store
            .acquire_slot("dev-server", 3, &opts(&format!("c{i}")))
            .map_err(|e| fail("acquire_slot", e))?;
        ensure!(
            lease.slot() == Some(i + 1) && lease.resource() == &Resource::slot("dev-server", i + 1),
            "claimer {i} got slot {:?}",
            lease.slot()
        );
        ensure!(
            check(&store, lease.resource(), lease.token())?,
            "slot {:?}'s token fails check",
            lease.slot()
        );
        leases.push(lease);
    }
    match store.try_acquire_slot("dev-server", 3, &opts("fourth")) {
        Ok(TryAcquire::Held(holder)) if holder.owner.starts_with('c') => {}
        other => return Err(format!("a fourth claimer of 3 slots was not held: {other:?}").into()),
    }
    // The plain lock is another resource.
    let plain = acquire(&store, &Resource::lock("dev-server"), &opts("plain"))?;
    store.release(&plain).map_err(|e| fail("release", e))?;
    store.release(&leases[1]).map_err(|e| fail("release", e))?;
    let again = store
        .acquire_slot("dev-server", 3, &opts("fourth"))
        .map_err(|e| fail("acquire_slot", e))?;
    ensure!(
        again.slot() == Some(2) && again.token() > leases[1].token(),
        "the released slot 2 came back as slot {:?} token {} (was token {})",
        again.slot(),
        again.token(),
        leases[1].token()
    );
    ensure!(
        !check(&store, leases[1].resource(), leases[1].token())?,
        "the released slot's old token passes"
    );
    // A session holding slot 3 of a new lock re-enters it rather than take slot 1.
    let first = store
        .acquire_slot("ports", 2, &opts("s").session("agent-7"))
        .map_err(|e| fail("acquire_slot", e))?;
    let reentry = store
        .acquire_slot("ports", 2, &opts("s").session("agent-7"))
        .map_err(|e| fail("acquire_slot", e))?;
    ensure!(
        reentry.slot() == first.slot() && reentry.token() == first.token() && reentry.reentered(),
        "the session's second claim took slot {:?} (token {}), not its slot {:?}",
        reentry.slot(),
        reentry.token(),
        first.slot()
    );
    for (what, slots) in [("0 slots", 0), ("too many slots", fencepost::SLOTS_MAX + 1)] {
        match store.acquire_slot("dev-server", slots, &opts("x")) {
            Err(Error::InvalidArgument(_)) => {}
            other => return Err(format!("{what} was not refused: {other:?}").into()),
        }
    }
    ensure!(
        Resource::slot("dev-server", 0).identity().is_err(),
        "slot 0 has a key"
    );
    Ok(())
}

/// The test through real processes: 12 workers take turns on the 4 slots
/// of one lock, 5 rounds each; never two in one slot (an exclusive marker per slot:
/// a worker that finds it taken fails), so never more than 4 inside; every slot
/// number is 1..4; tokens per slot strictly increase in that slot's log.
pub(super) fn slots_contend_processes<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    const PROCESSES: usize = 12;
    const ROUNDS: u32 = 5;
    const SLOTS: u32 = 4;
    let log = f.scratch_file("slots-log");
    let busy = f.scratch_file("slots-busy");
    for dir in [&log, &busy] {
        std::fs::create_dir_all(dir).map_err(|e| fail("mkdir", e))?;
    }
    let workers = (0..PROCESSES)
        .map(|_| {
            f.spawn_worker(&Job::ContendSlots {
                lock: "slots-pool".into(),
                slots: SLOTS,
                rounds: ROUNDS,
                log: log.clone(),
                busy: busy.clone(),
            })
            .map(KillOnDrop)
        })
        .collect::<Result<Vec<_>, _>>()?;
    for mut worker in workers {
        let status = worker
            .0
            .wait()
            .map_err(|e| fail("waiting for a worker", e))?;
        ensure!(
            status.success(),
            "a worker failed (its stderr says why; OVERLAP is two holders in one slot): {status}"
        );
    }
    let mut lines = 0;
    for entry in std::fs::read_dir(&log).map_err(|e| fail("reading the logs", e))? {
        let path = entry.map_err(|e| fail("reading the logs", e))?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let slot: u32 = name
            .strip_prefix("slot-")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("a log of no slot: {name}"))?;
        ensure!((1..=SLOTS).contains(&slot), "slot {slot} of {SLOTS}");
        let text = std::fs::read_to_string(&path).map_err(|e| fail("reading a log", e))?;
        let mut previous = 0;
        for line in text.lines() {
            lines += 1;
            let token: u64 = line.parse().map_err(|_| format!("a bad token: {line:?}"))?;
            ensure!(
                token > previous,
                "slot {slot}: token {token} after {previous}"
            );
            previous = token;
        }
    }
    ensure!(
        lines == PROCESSES * ROUNDS as usize,
        "{lines} critical sections, expected {}",
        PROCESSES * ROUNDS as usize
    );
    Ok(())
}

/// A session's tenure ended by key alone (`release_session_series`): the file-id
/// series of a file the session renamed after claiming it, which a release through
/// the resource no longer reaches. Another session, a tenure without a session, a
/// released and an expired tenure are left alone, with nothing written.
pub(super) fn session_series_released_by_key<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let released = |key: &fencepost::Key, session: &str| {
        store
            .release_session_series(key, session)
            .map_err(|e| fail("release_session_series", e))
    };

    // Left alone: another session's tenure, one without a session.
    let lock = Resource::lock("session-series");
    let key = key_of(&lock)?;
    for (options, session) in [
        (opts("a").session("agent-8"), "agent-7"),
        (opts("a"), "agent-7"),
    ] {
        let lease = acquire(&store, &lock, &options)?;
        let before = newest_generation(f.raw(), &key)?;
        ensure!(
            !released(&key, session)?,
            "{session} ended a tenure not its own"
        );
        ensure!(
            newest_generation(f.raw(), &key)? == before,
            "a refused release by key wrote a record"
        );
        ensure!(check(&store, &lock, lease.token())?, "the tenure was ended");
        store.release(&lease).map_err(|e| fail("release", e))?;
    }
    // Ended: the session's own, once; then nothing more to end.
    let lease = acquire(&store, &lock, &opts("a").session("agent-7"))?;
    ensure!(
        released(&key, "agent-7")?,
        "the session's own tenure was not ended"
    );
    ensure!(
        !check(&store, &lock, lease.token())?,
        "ended by key, its token still passes"
    );
    ensure!(
        !released(&key, "agent-7")?,
        "a released tenure was ended again"
    );
    // Expired: not the session's any more; nothing written.
    let lapsed = acquire(&store, &lock, &opts("a").session("agent-7"))?;
    clock.advance_ms(TTL_MS);
    let before = newest_generation(f.raw(), &key)?;
    ensure!(!released(&key, "agent-7")?, "an expired tenure was ended");
    ensure!(
        newest_generation(f.raw(), &key)? == before && lapsed.token() > lease.token(),
        "an expired tenure's release by key wrote a record"
    );

    // A file renamed by the session: its file-id series (where the platform has
    // file ids) is reached by key, and the renamed file is free for another session.
    let path = f.scratch_file("series-renamed.txt");
    std::fs::write(&path, b"x").map_err(|e| fail("write", e))?;
    let file = Resource::file(&path);
    let Some(file_id) = file.identity().map_err(|e| fail("identity", e))?.file_id else {
        return Ok(());
    };
    let held = acquire(&store, &file, &opts("a").session("agent-7"))?;
    let moved = f.scratch_file("series-moved.txt");
    std::fs::rename(&path, &moved).map_err(|e| fail("rename", e))?;
    let last = store
        .resume_session(&file, "agent-7")
        .map_err(|e| fail("resume_session", e))?;
    store.release(&last).map_err(|e| fail("release", e))?;
    let renamed = Resource::file(&moved);
    match store.try_acquire(&renamed, &opts("b").session("agent-8")) {
        Ok(TryAcquire::Held(holder)) if holder.token == held.token() => {}
        other => {
            return Err(format!(
                "the renamed file was not held by its file-id series before the release by key: {other:?}"
            )
            .into());
        }
    }
    ensure!(
        released(&file_id, "agent-7")?,
        "the file-id series was not ended"
    );
    let next = acquire(&store, &renamed, &opts("b").session("agent-8"))?;
    store.release(&next).map_err(|e| fail("release", e))?;
    Ok(())
}

//! Memory-backend fault injection against the protocol: the outcome-unknown create
//! (docs/protocol.md I4), torn records, and why claims must be flushed (docs/protocol.md §3.6, durability).

use fencepost::{AcquireOptions, Clock, Error, Resource, Store, TryAcquire};
use fencepost_memory::{Fault, MemoryStore};

fn options(owner: &str) -> AcquireOptions {
    AcquireOptions::new(30_000).owner(owner)
}

#[test]
fn unflushed_claim_lost_in_a_power_cut_hands_its_number_to_a_rival() {
    // Pins why claims are flushed: without it, two holders get the same token.
    let backend = MemoryStore::new();
    backend.ignore_flush(true);
    let store = Store::new(backend.clone());
    let lock = Resource::lock("db:migrations");
    let first = store.acquire(&lock, &options("first")).unwrap();
    assert_eq!(
        backend.power_cut(),
        1,
        "the unflushed claim should be dropped"
    );
    let rival = store.acquire(&lock, &options("rival")).unwrap();
    assert_eq!(
        rival.token(),
        first.token(),
        "the lost claim's number was handed out again"
    );
    assert!(
        store.check(&lock, first.token()).unwrap(),
        "the first holder's token passes for the rival's claim: two authorized holders"
    );
}

#[test]
fn flushed_claims_keep_their_number_across_a_power_cut() {
    let backend = MemoryStore::new();
    let store = Store::new(backend.clone());
    let lock = Resource::lock("db:migrations");
    let first = store.acquire(&lock, &options("first")).unwrap();
    backend.power_cut();
    assert!(matches!(
        store.try_acquire(&lock, &options("rival")).unwrap(),
        TryAcquire::Held(_)
    ));
    assert!(
        store.check(&lock, first.token()).unwrap(),
        "the flushed claim's token no longer passes"
    );
}

#[test]
fn a_create_that_failed_after_landing_is_reread_and_given_up() {
    // docs/protocol.md I4: the outcome was unknown; acquire must re-read, must not hand out the
    // unconfirmed claim, and must not leave the resource blocked.
    let backend = MemoryStore::new();
    let store = Store::new(backend.clone());
    let lock = Resource::lock("x");
    backend.inject(Fault::FailAfterLanding);
    match store.acquire(&lock, &options("a")) {
        Err(Error::Backend(_)) => {}
        other => panic!("expected a backend error, got {other:?}"),
    }
    assert!(
        !store.check(&lock, 1).unwrap(),
        "the unconfirmed claim passes check"
    );
    let lease = store.acquire(&lock, &options("b")).unwrap();
    assert!(
        lease.token() > 1,
        "numbering went back to a landed generation: {}",
        lease.token()
    );
}

#[test]
fn a_create_that_failed_before_landing_is_an_error_not_held() {
    let backend = MemoryStore::new();
    let store = Store::new(backend.clone());
    let lock = Resource::lock("x");
    backend.inject(Fault::FailBeforeLanding);
    assert!(matches!(
        store.acquire(&lock, &options("a")),
        Err(Error::Backend(_))
    ));
    assert_eq!(store.acquire(&lock, &options("a")).unwrap().token(), 1);
}

#[test]
fn a_torn_record_is_superseded_after_the_create_grace() {
    // docs/design-01 "torn newest record": a torn newest record may be a create in
    // progress, so it is waited out for CREATE_GRACE_MS (even with no wait), then
    // superseded, never reused: a crash mid-create blocks for at most that long.
    let clock = fencepost::ManualClock::new(1_800_000_000_000);
    let backend = MemoryStore::new();
    let store = Store::with_clock(backend.clone(), clock.clone());
    let lock = Resource::lock("x");
    backend.inject(Fault::Torn);
    assert!(store.acquire(&lock, &options("crashed")).is_err());
    let before = clock.monotonic_ms();
    let lease = store.acquire(&lock, &options("next")).unwrap();
    let waited = clock.monotonic_ms() - before;
    assert_eq!(
        lease.token(),
        2,
        "the torn generation 1 must be superseded by 2"
    );
    assert!(
        (fencepost::CREATE_GRACE_MS..fencepost::CREATE_GRACE_MS + 200).contains(&waited),
        "waited {waited} ms for the torn record"
    );
}

#[test]
fn keepalive_renews_on_schedule_when_renewals_are_slow() {
    // docs/design-01 "keepalive timing": the next renewal is due ttl/3 after the
    // previous one started, not after it finished, so a slow renewal does not eat
    // the slack. Every create here takes 250 ms; ttl 900 ms (period 300 ms): on
    // schedule the creates start about 300 ms apart, not 550 ms.
    let starts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&starts);
    let backend = Hooked {
        before_create: std::sync::Arc::new(Box::new(move |_, _, _, _| {
            seen.lock().unwrap().push(std::time::Instant::now());
            std::thread::sleep(std::time::Duration::from_millis(250));
        })),
        ..Hooked::new(MemoryStore::new())
    };
    let store = Store::new(backend);
    let lease = store
        .acquire(&Resource::lock("x"), &AcquireOptions::new(900).owner("k"))
        .unwrap();
    let keepalive = store.keepalive(lease);
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    let lease = keepalive.stop();
    let starts = starts.lock().unwrap().clone();
    assert!(starts.len() >= 4, "only {} creates", starts.len());
    let mut gaps: Vec<u128> = starts
        .windows(2)
        .skip(1)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    gaps.sort_unstable();
    let median = gaps[gaps.len() / 2];
    assert!(
        median < 450,
        "renewals {median} ms apart (gaps {gaps:?}); due every 300 ms"
    );
    assert!(store.check(lease.resource(), lease.token()).unwrap());
}

/// A store that stops answering without failing (a paused etcd member: every
/// request runs into its timeout) holds a renewal past the lease's ttl. The loss is
/// reported at the deadline, while the renewal is still blocked, not when it
/// returns (a breaker: `run`'s command went on for 7–18 s beside a rival's). The
/// bound is the behaviour: ttl 600 ms, the renewal blocked for 4 s.
#[test]
fn a_renewal_blocked_past_the_ttl_is_a_loss_at_the_deadline() {
    let blocking = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let block = std::sync::Arc::clone(&blocking);
    let backend = Hooked {
        before_create: std::sync::Arc::new(Box::new(move |_, _, _, _| {
            if block.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_secs(4));
            }
        })),
        ..Hooked::new(MemoryStore::new())
    };
    let store = Store::new(backend);
    let lease = store
        .acquire(&Resource::lock("x"), &AcquireOptions::new(600).owner("k"))
        .unwrap();
    let acquired = std::time::Instant::now();
    blocking.store(true, std::sync::atomic::Ordering::SeqCst);
    let (tx, rx) = std::sync::mpsc::channel();
    let keepalive = store.keepalive_with(lease, move |loss| {
        let _ = tx.send((std::time::Instant::now(), loss.to_string()));
    });
    let (at, loss) = rx
        .recv_timeout(std::time::Duration::from_secs(3))
        .expect("the loss is reported while the renewal is still blocked");
    let after = at.duration_since(acquired);
    assert!(
        after < std::time::Duration::from_millis(1_500),
        "reported {after:?} after the claim"
    );
    assert!(loss.contains("expired"), "{loss}");
    assert!(keepalive.is_lost());
}

#[test]
fn a_failed_renew_leaves_the_lease_renewable() {
    let backend = MemoryStore::new();
    let store = Store::new(backend.clone());
    let lock = Resource::lock("x");
    let mut lease = store.acquire(&lock, &options("a")).unwrap();
    backend.inject(Fault::FailAfterLanding);
    assert!(store.renew(&mut lease).is_err());
    store
        .renew(&mut lease)
        .expect("a renew after an unknown outcome matches by holder and token");
    assert!(store.check(&lock, lease.token()).unwrap());
}

#[test]
fn a_failed_release_that_landed_reports_success() {
    let backend = MemoryStore::new();
    let store = Store::new(backend.clone());
    let lock = Resource::lock("x");
    let lease = store.acquire(&lock, &options("a")).unwrap();
    backend.inject(Fault::FailAfterLanding);
    store
        .release(&lease)
        .expect("the re-read shows the tombstone landed");
    assert!(!store.check(&lock, lease.token()).unwrap());
}

type CreateHook = Box<dyn Fn(&MemoryStore, &fencepost::Key, u64, &[u8]) + Send + Sync>;
type RemoveHook = Box<dyn Fn() + Send + Sync>;

/// The memory backend with test hooks run around its creates and removals: another
/// process racing us, a stalling sweep, slow creates.
#[derive(Clone)]
struct Hooked {
    inner: MemoryStore,
    before_create: std::sync::Arc<CreateHook>,
    after_create: std::sync::Arc<RemoveHook>,
    before_remove: std::sync::Arc<RemoveHook>,
}

impl Hooked {
    fn new(inner: MemoryStore) -> Self {
        Hooked {
            inner,
            before_create: std::sync::Arc::new(Box::new(|_, _, _, _| {})),
            after_create: std::sync::Arc::new(Box::new(|| {})),
            before_remove: std::sync::Arc::new(Box::new(|| {})),
        }
    }
}

impl std::fmt::Debug for Hooked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hooked")
    }
}

impl fencepost::LeaseStore for Hooked {
    fn create(
        &self,
        key: &fencepost::Key,
        generation: u64,
        bytes: &[u8],
        durability: fencepost::Durability,
    ) -> Result<fencepost::CreateOutcome, fencepost::BackendError> {
        (self.before_create)(&self.inner, key, generation, bytes);
        let outcome = self.inner.create(key, generation, bytes, durability);
        (self.after_create)();
        outcome
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
        (self.before_remove)();
        self.inner.remove(key, generation)
    }
    fn remove_key_if_empty(&self, key: &fencepost::Key) -> Result<(), fencepost::BackendError> {
        self.inner.remove_key_if_empty(key)
    }
    fn keys(&self) -> Result<Vec<fencepost::Key>, fencepost::BackendError> {
        self.inner.keys()
    }
    fn locator(&self) -> String {
        "hooked".into()
    }
}

#[test]
fn losing_a_renewal_race_to_the_same_tenure_is_not_a_loss() {
    // Reported by the MCP server work: a concurrent renew of the same tenure made a
    // keepalive give up a lease nobody had superseded.
    // Once armed, another renewer of the same tenure creates the next generation
    // (with the same bytes) just before ours.
    let armed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let racing = armed.clone();
    let backend = Hooked {
        before_create: std::sync::Arc::new(Box::new(move |inner, key, generation, bytes| {
            if racing.swap(false, std::sync::atomic::Ordering::SeqCst) {
                let _ = fencepost::LeaseStore::create(
                    inner,
                    key,
                    generation,
                    bytes,
                    fencepost::Durability::Flushed,
                );
            }
        })),
        ..Hooked::new(MemoryStore::new())
    };
    let store = Store::new(backend);
    let lock = Resource::lock("x");
    let mut lease = store.acquire(&lock, &options("a")).unwrap();
    armed.store(true, std::sync::atomic::Ordering::SeqCst);
    store
        .renew(&mut lease)
        .expect("the same tenure renewed concurrently is still ours");
    assert!(store.check(&lock, lease.token()).unwrap());
}

#[test]
fn a_sweep_that_stalls_past_the_ttl_never_yields_an_expired_lease() {
    // docs/protocol.md §3.2: acquire returns only a lease confirmed newest and live. Reported by the
    // etcd cluster test, where a sweep stalled on a member without a leader.
    use fencepost::Clock;
    let clock = fencepost::ManualClock::new(1_800_000_000_000);
    // The first removal (a sweep) stalls past any ttl, as a sweep on a slow disk or an
    // etcd member without a leader can.
    let stalled = std::sync::atomic::AtomicBool::new(false);
    let stalling = clock.clone();
    let backend = Hooked {
        before_remove: std::sync::Arc::new(Box::new(move || {
            if !stalled.swap(true, std::sync::atomic::Ordering::SeqCst) {
                stalling.advance_ms(60_000);
            }
        })),
        ..Hooked::new(MemoryStore::new())
    };
    let store = Store::with_clock(backend, clock.clone());
    let lock = Resource::lock("x");
    let first = store.acquire(&lock, &options("a")).unwrap();
    store.release(&first).unwrap();
    let lease = store.acquire(&lock, &options("b")).unwrap(); // sweeps, stalls once
    assert!(
        lease.expires_at_ms() > clock.wall_ms(),
        "acquire returned a lease that expired at {} (now {})",
        lease.expires_at_ms(),
        clock.wall_ms()
    );
    assert!(store.check(&lock, lease.token()).unwrap());
}

#[test]
fn creates_slower_than_the_ttl_end_at_the_deadline_not_in_a_loop() {
    // Found by the breaker trial: `claim --ttl 100` on a disk whose fsync took 150 ms
    // looped forever, ignoring --wait and writing a record per pass.
    let clock = fencepost::ManualClock::new(1_800_000_000_000);
    let inner = MemoryStore::new();
    // Every create takes 150 ms, longer than the ttl of 100 ms.
    let slow = clock.clone();
    let backend = Hooked {
        after_create: std::sync::Arc::new(Box::new(move || slow.advance_ms(150))),
        ..Hooked::new(inner.clone())
    };
    let store = Store::with_clock(backend, clock);
    let lock = Resource::lock("x");
    for wait_ms in [0, 2_000] {
        match store.acquire(&lock, &AcquireOptions::new(100).owner("a").wait_ms(wait_ms)) {
            Err(Error::ClaimLapsed { ttl_ms: 100, .. }) => {}
            other => panic!("wait {wait_ms}: expected ClaimLapsed, got {other:?}"),
        }
    }
    assert!(
        inner.create_count() < 200,
        "{} creates: a tight loop",
        inner.create_count()
    );
    let lease = store
        .acquire(&lock, &AcquireOptions::new(10_000).owner("a"))
        .unwrap();
    assert!(
        store.check(&lock, lease.token()).unwrap(),
        "a long enough ttl still works"
    );
}

#[test]
fn a_series_at_the_largest_generation_is_an_error_not_a_panic() {
    // Found by the breaker trial: `newest.generation + 1` overflowed on a hand-made
    // record named g18446744073709551615.json.
    use fencepost::LeaseStore;
    let backend = MemoryStore::new();
    let store = Store::new(backend.clone());
    let lock = Resource::lock("x");
    let key = lock.identity().unwrap().key;
    let expired = format!(
        r#"{{"v":1,"key":"{key}","label":"x","token":{max},"generation":{max},"holder":"h","owner":"o","pid":1,"granted_at_ms":1,"expires_at_ms":2,"ttl_ms":1}}"#,
        max = u64::MAX
    );
    backend
        .create(
            &key,
            u64::MAX,
            expired.as_bytes(),
            fencepost::Durability::Flushed,
        )
        .unwrap();
    assert!(matches!(
        store.acquire(&lock, &options("a")),
        Err(Error::Backend(_))
    ));
    assert!(!store.check(&lock, u64::MAX).unwrap());
    let handle = format!("{}.{}", u64::MAX, "0".repeat(32)).parse().unwrap();
    assert!(store.resume(&lock, &handle).is_err());
}

#[test]
fn a_slow_renewal_from_a_stale_record_is_judged_against_the_newest() {
    // Found by the breaker: a handle whose remembered record was about to expire
    // renews slowly while another handle kept the lease alive; measured against its
    // own stale record the renewal looked late and was reported expired, and
    // `fencepost run` killed its command over a live lease. Both ways the renewal
    // from the record written can meet the other handle's renewals: the next
    // generation taken, and free (swept) below a newer renewal.
    for renewals_by_the_other in [1, 2] {
        let clock = fencepost::ManualClock::new(1_000_000);
        let inner = MemoryStore::new();
        // Creates through `store` take `delay_ms` of the manual clock once armed (a
        // slow disk).
        let delay_ms = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (slow_clock, armed) = (clock.clone(), delay_ms.clone());
        let slow = Hooked {
            after_create: std::sync::Arc::new(Box::new(move || {
                slow_clock.advance_ms(armed.load(std::sync::atomic::Ordering::SeqCst));
            })),
            ..Hooked::new(inner.clone())
        };
        let store = Store::with_clock(slow, clock.clone());
        let other = Store::with_clock(inner.clone(), clock.clone());
        let lock = Resource::lock("kept-alive-elsewhere");
        let lease = store
            .acquire(&lock, &AcquireOptions::new(1_000).owner("run"))
            .unwrap();
        let mut keeper = other.resume(&lock, &lease.handle()).unwrap();
        let mut lease = lease;
        for _ in 0..renewals_by_the_other {
            clock.advance_ms(300);
            other.renew(&mut keeper).unwrap();
        }
        // Our remembered record expires 10 ms from now; our create takes 50 ms.
        clock.advance_ms(lease.expires_at_ms() - clock.wall_ms() - 10);
        delay_ms.store(50, std::sync::atomic::Ordering::SeqCst);
        store.renew(&mut lease).unwrap_or_else(|e| {
            panic!(
                "after {renewals_by_the_other} renewal(s) through the other handle, a live \
                 lease was reported lost: {e}"
            )
        });
        assert!(store.check(&lock, lease.token()).unwrap());
        assert!(lease.expires_at_ms() > clock.wall_ms());
    }
}

/// A file lease is held in two series (its path and its file id), renewed one after
/// the other; a renewal that stalls between them must report the earlier end, so
/// that a holder working until the end it was told still holds every series (a
/// breaker: the later, primary end was reported, and another session got the file
/// through a hard link before it). The same for the acquisition.
#[test]
fn a_file_lease_reports_the_earliest_end_of_its_series() {
    let clock = fencepost::ManualClock::new(1_800_000_000_000);
    let (dir, file) = scratch_file("faults");
    let resource = Resource::file(&file);
    let identity = resource.identity().unwrap();
    let primary = identity.key.clone();
    let armed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (stalling, arming) = (clock.clone(), armed.clone());
    let backend = Hooked {
        before_create: std::sync::Arc::new(Box::new(move |_, key, _, _| {
            // The file id's create stalls 3 s (its record already stamped), once per
            // operation armed: the primary's record, stamped after it, ends later.
            if *key != primary && arming.swap(false, std::sync::atomic::Ordering::SeqCst) {
                stalling.advance_ms(3_000);
            }
        })),
        ..Hooked::new(MemoryStore::new())
    };
    let store = Store::with_clock(backend, clock.clone());
    let newest_end = |store: &Store, key: &fencepost::Key| {
        let g = *store
            .backend()
            .generations(key)
            .unwrap()
            .iter()
            .max()
            .unwrap();
        let bytes = store.backend().read(key, g).unwrap().unwrap();
        match fencepost::record::decode(&bytes, key.as_str(), g) {
            fencepost::record::Decoded::Record(r) => r.expires_at_ms,
            other => panic!("{other:?}"),
        }
    };
    let mut lease = store
        .acquire(&resource, &AcquireOptions::new(10_000).owner("s"))
        .unwrap();
    let ends = |store: &Store, lease: &fencepost::Lease| {
        lease
            .keys()
            .map(|key| newest_end(store, key))
            .min()
            .unwrap()
    };
    if identity.file_id.is_some() {
        assert_eq!(lease.keys().count(), 2, "a path and a file id");
    }
    assert!(
        lease.expires_at_ms() <= ends(&store, &lease),
        "acquire reported {} past a series' end {}",
        lease.expires_at_ms(),
        ends(&store, &lease)
    );
    armed.store(true, std::sync::atomic::Ordering::SeqCst);
    store.renew(&mut lease).unwrap();
    assert!(
        lease.expires_at_ms() <= ends(&store, &lease),
        "renew reported {} past a series' end {}",
        lease.expires_at_ms(),
        ends(&store, &lease)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A wall clock stepped back (an NTP correction) by more than 2/3 of the ttl while
/// a holder keeps its lease: every renewal after the step succeeds. The renewal
/// judged the record it had just stamped by the clock it had before the step, so
/// that record looked a step older than it was, and the renewal after it found it
/// expired (a breaker: `run` lost its lease and stopped its command, with nobody
/// else about). Records stamped before the step are still judged by the clock
/// before it (`Store::holder_now`).
#[test]
fn renewals_go_on_after_the_wall_clock_steps_back() {
    // A file too: its lease also holds the file's file-id series, renewed each time
    // beside the path's (a breaker found those still judged by the clock before
    // the step).
    let (dir, file) = scratch_file("ntp");
    for resource in [Resource::lock("ntp"), Resource::file(&file)] {
        let clock = fencepost::ManualClock::new(1_800_000_000_000);
        let store = Store::with_clock(MemoryStore::new(), clock.clone());
        let mut lease = store
            .acquire(&resource, &AcquireOptions::new(3_000).owner("holder"))
            .unwrap();
        clock.advance_ms(1_000);
        store.renew(&mut lease).unwrap();
        for step_back in [2_500, 60_000] {
            clock.set_wall_ms(clock.wall_ms() - step_back);
            for _ in 0..4 {
                clock.advance_ms(1_000);
                store.renew(&mut lease).unwrap_or_else(|e| {
                    panic!("{resource}: after a step back of {step_back} ms: {e}")
                });
                assert!(store.check(&resource, lease.token()).unwrap());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory under the system's temporary one, holding a file `f.rs`: the
/// directory (removed by the test) and the file.
fn scratch_file(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "fencepost-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("f.rs");
    std::fs::write(&file, "x").unwrap();
    (dir, file)
}

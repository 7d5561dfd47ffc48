//! Authority through the public API (issue 13): a token is an ordering, not a key.
//! Renew and release act only for a caller with the tenure's secret; `break` ends a
//! tenure on purpose and tells its holder who, when and why.

use std::time::{Duration, Instant};

use fencepost::doc_support::TinyStore;
use fencepost::record::{self, Record};
use fencepost::{
    AcquireOptions, ClaimState, Durability, Error, LeaseHandle, LeaseStore, ManualClock, Resource,
    Store,
};

const START_MS: u64 = 1_800_000_000_000;
const TTL_MS: u64 = 30_000;

fn store() -> (Store, ManualClock) {
    let clock = ManualClock::new(START_MS);
    (
        Store::with_clock(TinyStore::default(), clock.clone()),
        clock,
    )
}

fn options(owner: &str) -> AcquireOptions {
    AcquireOptions::new(TTL_MS).owner(owner)
}

fn generations(store: &Store, resource: &Resource) -> Vec<u64> {
    let key = resource.identity().unwrap().key;
    let mut listed = store.backend().generations(&key).unwrap();
    listed.sort_unstable();
    listed
}

/// A handle with the holder's (public) token and a secret that is not its own.
fn forged(token: u64) -> LeaseHandle {
    format!("{token}.{}", "0".repeat(32)).parse().unwrap()
}

#[test]
fn the_token_alone_never_acts_as_the_holder() {
    let (store, _) = store();
    let lock = Resource::lock("db:migrations");
    let lease = store.acquire(&lock, &options("agent-a")).unwrap();
    let before = generations(&store, &lock);

    // Agent B read the token from `status` or a "held by" message.
    let refused = store.resume(&lock, &forged(lease.token()));
    match refused {
        Err(Error::NotHolder { token, newest, .. }) => {
            assert_eq!(token, lease.token());
            assert_eq!(newest.map(|h| h.owner), Some("agent-a".into()));
        }
        other => panic!("a forged handle resumed the lease: {other:?}"),
    }
    assert_eq!(generations(&store, &lock), before, "nothing was written");
    assert!(store.check(&lock, lease.token()).unwrap());

    // The holder's own handle, in another process, renews and releases.
    let mut resumed = store.resume(&lock, &lease.handle()).unwrap();
    assert_eq!(resumed.token(), lease.token());
    store.renew(&mut resumed).unwrap();
    assert_eq!(resumed.token(), lease.token(), "same token (I5)");
    store.release(&resumed).unwrap();
    assert!(!store.check(&lock, lease.token()).unwrap());
    // The original lease learns its tenure was released by a holder of the secret.
    assert!(matches!(store.release(&lease), Err(Error::Released { .. })));
}

#[test]
fn a_record_without_a_proof_is_checked_but_never_acted_on() {
    // Records written before proofs existed carry no secret hash: check passes their
    // token, but no handle can act as their holder.
    let (store, _) = store();
    let lock = Resource::lock("legacy");
    let key = lock.identity().unwrap().key;
    let legacy = Record {
        v: record::FORMAT_VERSION,
        key: key.to_string().into(),
        label: "legacy".into(),
        token: 1,
        generation: 1,
        holder: "old-1-0".into(),
        owner: "old".into(),
        pid: 1,
        host: "".into(),
        granted_at_ms: START_MS,
        expires_at_ms: START_MS + TTL_MS,
        ttl_ms: TTL_MS,
        released: false,
        secret_sha256: None,
        broken: None,
        next: None,
        process: None,
        session: None,
    };
    store
        .backend()
        .create(&key, 1, &legacy.encode(), Durability::Flushed)
        .unwrap();
    assert!(store.check(&lock, 1).unwrap());
    assert!(matches!(
        store.resume(&lock, &forged(1)),
        Err(Error::NotHolder { .. })
    ));
    assert_eq!(generations(&store, &lock), [1]);
}

#[test]
fn check_lease_says_why_a_lease_is_not_current() {
    let (store, clock) = store();
    let lock = Resource::lock("reasons");
    let lease = store.acquire(&lock, &options("a")).unwrap();
    store.check_lease(&lease).unwrap();
    clock.advance_ms(TTL_MS);
    assert!(matches!(
        store.check_lease(&lease),
        Err(Error::Expired { .. })
    ));
    let successor = store.acquire(&lock, &options("b")).unwrap();
    match store.check_lease(&lease) {
        Err(Error::Superseded { by_token, .. }) => assert_eq!(by_token, successor.token()),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        store.holder(&lock).unwrap().map(|h| h.token),
        Some(successor.token())
    );
    store.release(&successor).unwrap();
    assert_eq!(store.holder(&lock).unwrap(), None);
}

#[test]
fn break_ends_the_tenure_and_tells_its_holder_who_when_and_why() {
    let (store, clock) = store();
    let lock = Resource::lock("db:migrations");
    let mut lease = store.acquire(&lock, &options("agent-a")).unwrap();
    clock.advance_ms(1_000);
    let broken = store
        .break_lease(&lock, "ops", "agent-a is wedged")
        .unwrap();
    assert_eq!(broken.owner, "agent-a");
    assert_eq!(broken.token, lease.token());
    assert!(!store.check(&lock, lease.token()).unwrap());

    // The holder's next renew, release and lease check report the break.
    for outcome in [
        store.renew(&mut lease),
        store.check_lease(&lease),
        store.release(&lease),
    ] {
        match outcome {
            Err(Error::Broken { note, token, .. }) => {
                assert_eq!(token, lease.token());
                assert_eq!(note.by, "ops");
                assert_eq!(note.reason, "agent-a is wedged");
                assert_eq!(note.at_ms, START_MS + 1_000);
            }
            other => panic!("expected Broken, got {other:?}"),
        }
    }
    let message = store.renew(&mut lease).unwrap_err().to_string();
    assert!(
        message.contains("broken by ops at 2027-01-15T08:00:01Z: agent-a is wedged"),
        "{message}"
    );

    // Status shows it while the tombstone is newest.
    let entry = &store.status().unwrap()[0];
    assert_eq!(entry.state, ClaimState::Broken);
    assert!(!entry.live);
    assert_eq!(entry.broken.as_ref().map(|n| n.by.as_str()), Some("ops"));

    // The next claim gets a higher token, and the break is no longer shown.
    let next = store.acquire(&lock, &options("agent-b")).unwrap();
    assert!(next.token() > lease.token());
    assert_eq!(store.status().unwrap()[0].broken, None);
}

#[test]
fn break_of_a_free_resource_is_not_held() {
    let (store, clock) = store();
    let lock = Resource::lock("free");
    assert!(matches!(
        store.break_lease(&lock, "ops", "why not"),
        Err(Error::NotHeld { .. })
    ));
    let lease = store.acquire(&lock, &options("a")).unwrap();
    store.release(&lease).unwrap();
    assert!(matches!(
        store.break_lease(&lock, "ops", "why not"),
        Err(Error::NotHeld { .. })
    ));
    let _expired = store.acquire(&lock, &options("a")).unwrap();
    clock.advance_ms(TTL_MS);
    let before = generations(&store, &lock);
    assert!(matches!(
        store.break_lease(&lock, "ops", "why not"),
        Err(Error::NotHeld { .. })
    ));
    assert_eq!(generations(&store, &lock), before, "nothing was written");
}

#[test]
fn break_needs_a_name_and_a_one_line_reason() {
    let (store, _) = store();
    let lock = Resource::lock("held");
    let lease = store.acquire(&lock, &options("a")).unwrap();
    let long = "x".repeat(1_001);
    for (by, reason) in [
        ("ops", ""),
        ("ops", "   "),
        ("", "wedged"),
        ("ops", "two\nlines"),
        ("ops", long.as_str()),
    ] {
        assert!(
            matches!(
                store.break_lease(&lock, by, reason),
                Err(Error::InvalidArgument(_))
            ),
            "{by:?} {reason:?} was accepted"
        );
    }
    assert!(store.check(&lock, lease.token()).unwrap(), "nothing broken");
}

#[test]
fn a_kept_alive_lease_reports_the_break() {
    let store = Store::new(TinyStore::default());
    let lock = Resource::lock("kept");
    let lease = store
        .acquire(&lock, &AcquireOptions::new(300).owner("a"))
        .unwrap();
    let (send, receive) = std::sync::mpsc::channel();
    let keepalive = store.keepalive_with(lease, move |loss| {
        let _ = send.send(loss.to_string());
    });
    store.break_lease(&lock, "ops", "maintenance").unwrap();
    let started = Instant::now();
    let loss = receive
        .recv_timeout(Duration::from_secs(20))
        .expect("the keepalive reported the break");
    assert!(loss.contains("broken by ops at "), "{loss}");
    assert!(loss.ends_with(": maintenance"), "{loss}");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(matches!(keepalive.release(), Err(Error::Broken { .. })));
}

#[test]
fn the_held_message_says_who_until_when_and_what_to_do() {
    let (store, _) = store();
    let lock = Resource::lock("busy");
    store.acquire(&lock, &options("agent-a")).unwrap();
    let message = store
        .acquire(&lock, &options("agent-b"))
        .unwrap_err()
        .to_string();
    assert!(message.contains("held by agent-a"), "{message}");
    assert!(message.contains("until 2027-01-15T08:00:30Z"), "{message}");
    assert!(message.contains("wait for it"), "{message}");
    assert!(message.contains("break"), "{message}");
    assert!(
        !message.contains("release"),
        "never suggest releasing: {message}"
    );
}

//! A keepalive watches its lease between renewals: a takeover or a release from
//! elsewhere is reported within about one watch interval, long before the next
//! renewal (ttl/3); a torn newest record (a create in progress) is no loss
//! (docs/protocol.md §3.2, keepalive).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use fencepost::doc_support::TinyStore;
use fencepost::{AcquireOptions, Durability, Error, LeaseStore, Resource, Store};

const TTL_MS: u64 = 30_000;

#[test]
fn a_takeover_is_reported_within_the_watch_interval() {
    let store = Store::new(TinyStore::default()).with_watch_interval(Duration::from_millis(10));
    let lock = Resource::lock("watched");
    let lease = store.acquire(&lock, &AcquireOptions::new(TTL_MS)).unwrap();
    let (sender, receiver) = mpsc::channel();
    let keepalive = store.keepalive_with(lease, move |loss| {
        let _ = sender.send((
            Instant::now(),
            loss.to_string(),
            matches!(loss, Error::Broken { .. } | Error::Superseded { .. }),
        ));
    });
    // Written around: broken by an operator, then claimed by a rival.
    store.break_lease(&lock, "ops", "written around").unwrap();
    let rival = store
        .acquire(&lock, &AcquireOptions::new(TTL_MS).owner("rival"))
        .unwrap();
    let ended = Instant::now();
    let (at, loss, kind) = receiver
        .recv_timeout(Duration::from_secs(5))
        .expect("the loss was not reported before the next renewal (10 s)");
    assert!(kind, "unexpected loss: {loss}");
    assert!(
        at.saturating_duration_since(ended) < Duration::from_secs(2),
        "reported {:?} after the takeover",
        at.saturating_duration_since(ended)
    );
    assert!(keepalive.is_lost());
    // The rival is untouched by the lost keepalive's end.
    drop(keepalive);
    assert!(store.check(&lock, rival.token()).unwrap());
}

#[test]
fn a_torn_record_above_the_lease_is_not_a_loss() {
    let backend = std::sync::Arc::new(TinyStore::default());
    let store = Store::from_parts(
        backend.clone(),
        std::sync::Arc::new(fencepost::SystemClock::new()),
    )
    .with_watch_interval(Duration::from_millis(5));
    let lock = Resource::lock("watched");
    let lease = store.acquire(&lock, &AcquireOptions::new(TTL_MS)).unwrap();
    let key = lease.key().clone();
    let (sender, receiver) = mpsc::channel();
    let keepalive = store.keepalive_with(lease.clone(), move |loss| {
        let _ = sender.send(loss.to_string());
    });
    // A rival's create caught half-written: its generation is taken, nothing more.
    backend
        .create(
            &key,
            lease.generation() + 1,
            b"{\"v\":1,\"tok",
            Durability::Flushed,
        )
        .unwrap();
    assert!(
        receiver.recv_timeout(Duration::from_millis(300)).is_err(),
        "a torn record was reported as a loss"
    );
    assert!(!keepalive.is_lost());
    drop(keepalive);
}

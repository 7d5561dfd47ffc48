//! `Store::conflict`: the read-only look a claim made in another store takes at
//! this one (docs/protocol.md §5, "Layout changes"). It must find exactly what the
//! claim would have met here — holders of its keys, covering and covered subtree
//! claims, shared holders for a writer, writers for a reader — and nothing of the
//! claimant's own session. And `Store::claim_beside`'s wait, which looks before it
//! claims again.

use fencepost::doc_support::TinyStore;
use fencepost::{AcquireOptions, Resource, Store};

const TTL_MS: u64 = 30_000;

fn options(owner: &str) -> AcquireOptions {
    AcquireOptions::new(TTL_MS).owner(owner)
}

/// The owner of the conflict a claim of `resource` with `options` meets, if any.
fn met(store: &Store, resource: &Resource, options: &AcquireOptions) -> Option<String> {
    store
        .conflict(resource, options)
        .unwrap()
        .map(|holder| holder.owner)
}

#[test]
fn a_holder_of_the_file_is_met_by_writers_and_readers_alike() {
    let dir = tempfile::tempdir().unwrap();
    let file = Resource::file(dir.path().join("a.txt"));
    let store = Store::new(TinyStore::default());
    assert_eq!(met(&store, &file, &options("bob")), None);
    let lease = store.acquire(&file, &options("alice")).unwrap();
    assert_eq!(
        met(&store, &file, &options("bob")).as_deref(),
        Some("alice")
    );
    let reader = options("bob").shared(true);
    assert_eq!(met(&store, &file, &reader).as_deref(), Some("alice"));
    store.release(&lease).unwrap();
    assert_eq!(met(&store, &file, &options("bob")), None);
}

#[test]
fn readers_are_met_by_a_writer_only() {
    let dir = tempfile::tempdir().unwrap();
    let file = Resource::file(dir.path().join("a.txt"));
    let store = Store::new(TinyStore::default());
    let _read = store
        .acquire(&file, &options("carol").shared(true))
        .unwrap();
    assert!(met(&store, &file, &options("bob")).is_some_and(|o| o.contains("carol")));
    assert_eq!(met(&store, &file, &options("bob").shared(true)), None);
}

#[test]
fn subtree_claims_are_met_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("d/e")).unwrap();
    let store = Store::new(TinyStore::default());
    let subtree = store
        .acquire(&Resource::dir(dir.path().join("d")), &options("alice"))
        .unwrap();
    // Covered: a file below, a directory below.
    let below = Resource::file(dir.path().join("d/e/f.txt"));
    assert_eq!(
        met(&store, &below, &options("bob")).as_deref(),
        Some("alice")
    );
    let inner = Resource::dir(dir.path().join("d/e"));
    assert_eq!(
        met(&store, &inner, &options("bob")).as_deref(),
        Some("alice")
    );
    store.release(&subtree).unwrap();
    // Covering: a subtree above a held file.
    let _file = store.acquire(&below, &options("carol")).unwrap();
    let above = Resource::dir(dir.path().join("d"));
    assert_eq!(
        met(&store, &above, &options("bob")).as_deref(),
        Some("carol")
    );
    // A sibling is free.
    let sibling = Resource::file(dir.path().join("d/g.txt"));
    assert_eq!(met(&store, &sibling, &options("bob")), None);
}

#[test]
fn the_claimants_own_session_is_no_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let file = Resource::file(dir.path().join("a.txt"));
    let store = Store::new(TinyStore::default());
    let _lease = store
        .acquire(&file, &options("agent").session("s1"))
        .unwrap();
    assert_eq!(met(&store, &file, &options("agent").session("s1")), None);
    assert!(met(&store, &file, &options("agent").session("s2")).is_some());
    assert!(met(&store, &file, &options("agent")).is_some());
}

/// A claim beside another store that holds the file waits, looking at that store
/// before each later try: only its first try claims here (and gives the claim
/// back), so a wait burns no tokens and shows no passing holder here (a breaker:
/// every 100 ms try claimed and released, two generations each).
#[test]
fn a_wait_beside_another_stores_holder_claims_here_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = Resource::file(dir.path().join("a.txt"));
    let here = Store::new(TinyStore::default());
    let there = Store::new(TinyStore::default());
    let _held = there.acquire(&file, &options("alice")).unwrap();
    let waiting = options("bob").wait_ms(450);
    let outcome = here
        .claim_beside(
            std::slice::from_ref(&file),
            &waiting,
            || Ok(vec![there.clone()]),
            |options| {
                Ok(match here.try_acquire(&file, options)? {
                    fencepost::TryAcquire::Acquired(lease) => Ok(vec![lease]),
                    fencepost::TryAcquire::Held(holder) => Err(holder),
                })
            },
        )
        .unwrap();
    assert!(
        matches!(&outcome, fencepost::Beside::Elsewhere { holder, .. } if holder.owner == "alice"),
        "{outcome:?}"
    );
    // One claim and its give-back: the next claim here is the series' third record.
    let next = here.acquire(&file, &options("carol")).unwrap();
    assert_eq!(next.token(), 3, "the wait claimed here more than once");
}

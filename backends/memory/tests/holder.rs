//! What a tenure's records say about its holder: the `pid` of every record is this
//! process's, and the one its holder id names (an acquisition reads the process id
//! once for both, docs/design-07-performance.md, "The memory backend").

use fencepost::record::{Decoded, decode};
use fencepost::{AcquireOptions, Key, Lease, Resource, Store};
use fencepost_memory::MemoryStore;

/// Every record of `key`, decoded (each must be a v1 record).
fn records(store: &Store, key: &Key) -> Vec<fencepost::record::Record> {
    let backend = store.backend();
    let mut generations = backend.generations(key).unwrap();
    generations.sort_unstable();
    generations
        .into_iter()
        .map(|generation| {
            let bytes = backend.read(key, generation).unwrap().expect("listed");
            match decode(&bytes, key.as_str(), generation) {
                Decoded::Record(record) => record,
                other => panic!("generation {generation} of {key}: {other:?}"),
            }
        })
        .collect()
}

/// The claim and the tombstone of `lease`'s tenure name this process as their pid,
/// and that pid is the one in their holder id (`{owner}-{pid}-{nonce}`).
fn assert_names_this_process(store: &Store, lease: &Lease, owner: &str) {
    let pid = std::process::id();
    let expected = format!("{owner}-{pid}-");
    assert!(
        lease.holder_id().starts_with(&expected),
        "holder id {} does not name pid {pid}",
        lease.holder_id()
    );
    let ours: Vec<_> = records(store, lease.key())
        .into_iter()
        .filter(|r| *r.holder == *lease.holder_id())
        .collect();
    // The claim and its tombstone (earlier tenures' records may be swept).
    assert_eq!(ours.len(), 2, "{ours:?}");
    assert!(ours[1].released);
    for record in ours {
        assert_eq!(record.pid, pid, "{record:?}");
    }
}

#[test]
fn a_tenures_records_carry_the_pid_its_holder_id_names() {
    let store = Store::new(MemoryStore::new());
    let options = AcquireOptions::new(60_000).owner("agent-a");
    // Exclusive, several tenures in a row (each reads the process id afresh).
    let resource = Resource::lock("pid-check");
    for _ in 0..3 {
        let lease = store.acquire(&resource, &options).unwrap();
        store.release(&lease).unwrap();
        assert_names_this_process(&store, &lease, "agent-a");
    }
    // Shared: the participant series' claim and tombstone.
    let shared = store
        .acquire(
            &Resource::lock("pid-check-shared"),
            &options.clone().shared(true),
        )
        .unwrap();
    store.release(&shared).unwrap();
    assert_names_this_process(&store, &shared, "agent-a");
}

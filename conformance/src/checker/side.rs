//! A second store for schedules of claims made in two stores (a layout change
//! between two claims of one file, docs/protocol.md §5): an in-memory store whose
//! every call is a scheduling point of the run, so the other actors' steps
//! interleave with its calls, but which the oracles do not judge (their record
//! oracles are per key of the model store; a schedule over two stores brings its
//! own oracle). No faults: it stands for another store working normally. Its
//! records live in the core's small in-memory store (`doc_support::TinyStore`).

use std::sync::Arc;

use fencepost::doc_support::TinyStore;
use fencepost::{BackendError, CreateOutcome, Durability, Key, LeaseStore, Store};

use super::sched::Point;
use super::world::{ModelClock, World};

/// The side store's backend: the memory backend behind scheduling points.
struct SideBackend {
    world: Arc<World>,
    inner: TinyStore,
}

impl std::fmt::Debug for SideBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SideBackend")
    }
}

impl SideBackend {
    /// A scheduling point before the call (its fault is not applied), logged.
    fn point(&self, point: Point, what: &str, key: &Key) {
        let _ = self.world.sched.point(point);
        let name = key.as_str();
        self.world.log(format!(
            "side store: {what} {}",
            &name[..name.len().min(14)]
        ));
    }
}

impl LeaseStore for SideBackend {
    fn create(
        &self,
        key: &Key,
        generation: u64,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<CreateOutcome, BackendError> {
        self.point(Point::Create, &format!("create g{generation}"), key);
        self.inner.create(key, generation, bytes, durability)
    }

    fn generations(&self, key: &Key) -> Result<Vec<u64>, BackendError> {
        self.point(Point::List, "list", key);
        self.inner.generations(key)
    }

    fn read(&self, key: &Key, generation: u64) -> Result<Option<Vec<u8>>, BackendError> {
        self.point(Point::Read, &format!("read g{generation}"), key);
        self.inner.read(key, generation)
    }

    fn remove(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
        self.point(Point::Remove, &format!("remove g{generation}"), key);
        self.inner.remove(key, generation)
    }

    fn remove_key_if_empty(&self, key: &Key) -> Result<(), BackendError> {
        self.point(Point::Remove, "remove key", key);
        self.inner.remove_key_if_empty(key)
    }

    fn keys(&self) -> Result<Vec<Key>, BackendError> {
        let _ = self.world.sched.point(Point::Keys);
        self.inner.keys()
    }

    fn locator(&self) -> String {
        "side-store".into()
    }
}

/// A protocol instance over a fresh side store, on the run's model clock.
pub(crate) fn side_store(world: &Arc<World>) -> Store {
    Store::from_parts(
        Arc::new(SideBackend {
            world: Arc::clone(world),
            inner: TinyStore::default(),
        }),
        Arc::new(ModelClock(Arc::clone(world))),
    )
}

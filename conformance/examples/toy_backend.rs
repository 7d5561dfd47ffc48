//! A toy backend proven by the whole suite: the example `docs/writing-a-backend.md`
//! walks through. Run it with `cargo run -p fencepost-conformance --example toy_backend`
//! (it accepts the usual test-harness flags, e.g. `-- --list`).

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

use fencepost::{BackendError, CreateOutcome, Durability, Key, LeaseStore};

/// Record bytes by key and generation.
type Records = BTreeMap<(Key, u64), Vec<u8>>;

/// Records in a map behind one mutex: create-if-absent is atomic under the lock.
#[derive(Debug, Clone, Default)]
struct ToyStore(Arc<Mutex<Records>>);

impl ToyStore {
    fn records(&self) -> Result<std::sync::MutexGuard<'_, Records>, BackendError> {
        self.0
            .lock()
            .map_err(|_| BackendError::new("lock", "toy", io::Error::other("poisoned")))
    }
}

impl LeaseStore for ToyStore {
    fn create(
        &self,
        key: &Key,
        generation: u64,
        bytes: &[u8],
        _: Durability,
    ) -> Result<CreateOutcome, BackendError> {
        let mut records = self.records()?;
        if records.contains_key(&(key.clone(), generation)) {
            return Ok(CreateOutcome::AlreadyExists);
        }
        records.insert((key.clone(), generation), bytes.to_vec());
        Ok(CreateOutcome::Created)
    }
    fn generations(&self, key: &Key) -> Result<Vec<u64>, BackendError> {
        Ok(self
            .records()?
            .keys()
            .filter(|(k, _)| k == key)
            .map(|(_, g)| *g)
            .collect())
    }
    fn read(&self, key: &Key, generation: u64) -> Result<Option<Vec<u8>>, BackendError> {
        Ok(self.records()?.get(&(key.clone(), generation)).cloned())
    }
    fn remove(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
        self.records()?.remove(&(key.clone(), generation));
        Ok(())
    }
    fn keys(&self) -> Result<Vec<Key>, BackendError> {
        let mut keys: Vec<Key> = self.records()?.keys().map(|(k, _)| k.clone()).collect();
        keys.dedup();
        Ok(keys)
    }
    fn locator(&self) -> String {
        "toy:".into()
    }
}

// The whole suite, in one line.
fn main() {
    fencepost_conformance::run(fencepost_conformance::Backend::in_process(
        "toy",
        ToyStore::default,
    ));
}

//! An in-memory [`LeaseStore`] for tests: thread-safe, in-process, with fault
//! injection.
//!
//! **A test backend.** Records live in one process's memory: nothing is shared
//! across processes and nothing survives the process. Use `fencepost-fs` for real
//! coordination.
//!
//! Capabilities: exclusive create (one mutex), shared across threads and clones;
//! not shared across processes; "durability" is simulated: creates remember whether
//! they were flushed, and [`MemoryStore::power_cut`] drops every unflushed one.
//!
//! Faults ([`Fault`]), each armed for the next create:
//! - [`Fault::FailAfterLanding`]: the record lands, then the create reports an error
//!   (the outcome-unknown case of docs/protocol.md I4).
//! - [`Fault::FailBeforeLanding`]: the create reports an error and nothing lands.
//! - [`Fault::Torn`]: half of the bytes land (a crash mid-write), and the create
//!   reports an error.
//!
//! [`MemoryStore::ignore_flush`] makes every create unflushed, which is how a test
//! shows *why* claims must be flushed: after a power cut the lost claim's generation
//! is handed to a rival.

#![warn(missing_docs)]

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

use fencepost::{BackendError, CreateOutcome, Durability, Key, LeaseStore};

/// A fault injected into the next [`LeaseStore::create`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The record lands (durably if asked), then the call returns an error.
    FailAfterLanding,
    /// The call returns an error and nothing lands.
    FailBeforeLanding,
    /// The first half of the bytes land, unflushed, and the call returns an error:
    /// what a crash in the middle of writing leaves behind.
    Torn,
}

#[derive(Debug, Clone)]
struct StoredRecord {
    bytes: Vec<u8>,
    flushed: bool,
}

#[derive(Debug, Default)]
struct Inner {
    records: BTreeMap<Key, BTreeMap<u64, StoredRecord>>,
    faults: VecDeque<Fault>,
    ignore_flush: bool,
    creates: u64,
}

/// The in-memory backend. Clones share the same records (a clone is a second
/// handle, as a second process would open the same directory).
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking test thread must not take every other test handle down.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Arms `fault` for a later create: faults are consumed in order, one per create.
    pub fn inject(&self, fault: Fault) {
        self.lock().faults.push_back(fault);
    }

    /// Treats every create as unflushed from now on (a backend that skips flushes),
    /// so [`MemoryStore::power_cut`] can drop claims too.
    pub fn ignore_flush(&self, ignore: bool) {
        self.lock().ignore_flush = ignore;
    }

    /// Simulates a power cut: drops every record created without a flush. Returns
    /// how many records were dropped.
    pub fn power_cut(&self) -> usize {
        let mut inner = self.lock();
        let mut dropped = 0;
        for series in inner.records.values_mut() {
            let before = series.len();
            series.retain(|_, record| record.flushed);
            dropped += before - series.len();
        }
        dropped
    }

    /// Number of create calls made so far (including failed ones).
    pub fn create_count(&self) -> u64 {
        self.lock().creates
    }

    fn fault_error(key: &Key, generation: u64, fault: Fault) -> BackendError {
        BackendError::new(
            "create",
            format!("memory:{key}/{generation}"),
            io::Error::other(format!("injected fault: {fault:?}")),
        )
    }
}

impl LeaseStore for MemoryStore {
    /// Atomic under one mutex: of concurrent creates of one generation exactly one
    /// lands. A removed generation can be created again, also below the newest: like
    /// the fs backend, this one does not keep the second promise of
    /// docs/protocol.md R5 (the protocol's confirming reads and listings catch it). Remembers whether the create was flushed, for
    /// [`MemoryStore::power_cut`].
    fn create(
        &self,
        key: &Key,
        generation: u64,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<CreateOutcome, BackendError> {
        let mut inner = self.lock();
        inner.creates += 1;
        let fault = inner.faults.pop_front();
        let flushed = durability == Durability::Flushed && !inner.ignore_flush;
        // One search of the map; a key's clone shares its text (no allocation).
        let series = inner.records.entry(key.clone()).or_default();
        if series.contains_key(&generation) {
            return match fault {
                Some(fault) => Err(Self::fault_error(key, generation, fault)),
                None => Ok(CreateOutcome::AlreadyExists),
            };
        }
        match fault {
            None => {
                series.insert(
                    generation,
                    StoredRecord {
                        bytes: bytes.to_vec(),
                        flushed,
                    },
                );
                Ok(CreateOutcome::Created)
            }
            Some(Fault::FailBeforeLanding) => {
                Err(Self::fault_error(key, generation, Fault::FailBeforeLanding))
            }
            Some(Fault::FailAfterLanding) => {
                series.insert(
                    generation,
                    StoredRecord {
                        bytes: bytes.to_vec(),
                        flushed,
                    },
                );
                Err(Self::fault_error(key, generation, Fault::FailAfterLanding))
            }
            Some(Fault::Torn) => {
                let torn = bytes[..bytes.len() / 2].to_vec();
                series.insert(
                    generation,
                    StoredRecord {
                        bytes: torn,
                        flushed: false,
                    },
                );
                Err(Self::fault_error(key, generation, Fault::Torn))
            }
        }
    }

    fn generations(&self, key: &Key) -> Result<Vec<u64>, BackendError> {
        Ok(self
            .lock()
            .records
            .get(key)
            .map(|series| series.keys().copied().collect())
            .unwrap_or_default())
    }

    fn read(&self, key: &Key, generation: u64) -> Result<Option<Vec<u8>>, BackendError> {
        Ok(self
            .lock()
            .records
            .get(key)
            .and_then(|series| series.get(&generation))
            .map(|record| record.bytes.clone()))
    }

    /// Removal is not durable either way; a power cut does not bring records back.
    fn remove(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
        if let Some(series) = self.lock().records.get_mut(key) {
            series.remove(&generation);
        }
        Ok(())
    }

    /// Drops `key` when it holds no records, so that [`keys`](LeaseStore::keys) no
    /// longer lists it; a key with records is left alone.
    fn remove_key_if_empty(&self, key: &Key) -> Result<(), BackendError> {
        let mut inner = self.lock();
        if inner.records.get(key).is_some_and(BTreeMap::is_empty) {
            inner.records.remove(key);
        }
        Ok(())
    }

    fn keys(&self) -> Result<Vec<Key>, BackendError> {
        Ok(self.lock().records.keys().cloned().collect())
    }

    fn locator(&self) -> String {
        "memory:".into()
    }
}

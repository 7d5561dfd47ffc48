//! The suite must fail against broken backends: each mutant breaks one promise of the
//! `LeaseStore` contract (docs/protocol.md §4) and the scenario that pins that promise must catch
//! it, while the honest memory backend passes the same scenario.

use fencepost::{BackendError, CreateOutcome, Durability, Key, LeaseStore};
use fencepost_conformance::{Backend, run_scenario};
use fencepost_memory::MemoryStore;

#[derive(Debug, Clone, Copy)]
enum Mutation {
    /// create overwrites an existing generation and reports Created.
    NotExclusive,
    /// the listing never shows the newest generation (a stale index).
    LosesNewest,
    /// every create is unflushed, so a power cut drops claims too.
    IgnoresFlush,
    /// reads of records return only their first half (partial writes stay visible).
    TornReads,
}

#[derive(Debug, Clone)]
struct Mutant {
    inner: MemoryStore,
    mutation: Mutation,
}

impl LeaseStore for Mutant {
    fn create(
        &self,
        key: &Key,
        generation: u64,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<CreateOutcome, BackendError> {
        match self.mutation {
            Mutation::NotExclusive => {
                self.inner.remove(key, generation)?;
                self.inner.create(key, generation, bytes, durability)
            }
            Mutation::IgnoresFlush => {
                self.inner
                    .create(key, generation, bytes, Durability::Unflushed)
            }
            _ => self.inner.create(key, generation, bytes, durability),
        }
    }
    fn generations(&self, key: &Key) -> Result<Vec<u64>, BackendError> {
        let mut generations = self.inner.generations(key)?;
        if let Mutation::LosesNewest = self.mutation
            && let Some(max) = generations.iter().copied().max()
        {
            generations.retain(|g| *g != max);
        }
        Ok(generations)
    }
    fn read(&self, key: &Key, generation: u64) -> Result<Option<Vec<u8>>, BackendError> {
        let bytes = self.inner.read(key, generation)?;
        Ok(match self.mutation {
            Mutation::TornReads => bytes.map(|b| b[..b.len() / 2].to_vec()),
            _ => bytes,
        })
    }
    fn remove(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
        self.inner.remove(key, generation)
    }
    fn remove_key_if_empty(&self, key: &Key) -> Result<(), BackendError> {
        self.inner.remove_key_if_empty(key)
    }
    fn keys(&self) -> Result<Vec<Key>, BackendError> {
        self.inner.keys()
    }
    fn locator(&self) -> String {
        format!("mutant:{:?}", self.mutation)
    }
}

fn mutant(mutation: Mutation) -> Backend<Mutant> {
    Backend::in_process(format!("{mutation:?}"), move || Mutant {
        inner: MemoryStore::new(),
        mutation,
    })
    .with_power_cut(|m: &Mutant| m.inner.power_cut())
}

fn honest() -> Backend<MemoryStore> {
    Backend::in_process("memory", MemoryStore::new).with_power_cut(MemoryStore::power_cut)
}

fn assert_caught(mutation: Mutation, scenario: &str) {
    assert_eq!(
        run_scenario(&honest(), scenario).map_err(|f| format!("{f:?}")),
        Ok(true),
        "honest backend fails {scenario}"
    );
    let outcome = run_scenario(&mutant(mutation), scenario);
    assert!(
        outcome.is_err(),
        "{scenario} did not catch the {mutation:?} mutant: {outcome:?}"
    );
}

#[test]
fn a_create_that_is_not_exclusive_is_caught() {
    assert_caught(Mutation::NotExclusive, "create_is_exclusive");
}

#[test]
fn a_backend_that_loses_the_newest_record_is_caught() {
    assert_caught(Mutation::LosesNewest, "acquire_check_release");
    assert_caught(Mutation::LosesNewest, "records_round_trip");
    // A listing that misses the newest generation while renewals create and sweep.
    assert_caught(Mutation::LosesNewest, "listing_snapshot_under_renewals");
}

#[test]
fn a_backend_that_ignores_flush_is_caught() {
    assert_caught(Mutation::IgnoresFlush, "power_cut_keeps_claims");
}

#[test]
fn a_backend_with_torn_reads_is_caught() {
    assert_caught(Mutation::TornReads, "acquire_check_release");
    assert_caught(Mutation::TornReads, "records_round_trip");
}

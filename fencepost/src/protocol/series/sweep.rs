//! Removing superseded records of a key (docs/protocol.md §3.6).

use crate::protocol::Store;
use crate::record::{self, Decoded};
use crate::{Key, Resource, Result};

impl Store {
    /// Removes the superseded records of `resource`'s series that lie below its newest
    /// *claim* (a flushed record); returns how many were removed. The newest record,
    /// and any tombstone above the newest claim, are kept: a lost unflushed tombstone
    /// plus a surviving removal must never empty the series (docs/protocol.md §3.6).
    ///
    /// Acquire already sweeps after each confirmed claim; this is for tidying by hand.
    /// Its removals are made before it returns ([`LeaseStore::remove`](crate::LeaseStore::remove)),
    /// so the count is of removals made; the sweep after a claim may leave them to the
    /// backend's removal thread ([`LeaseStore::remove_superseded`](crate::LeaseStore::remove_superseded)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidResource`](crate::Error::InvalidResource) or [`Error::Backend`](crate::Error::Backend) when the series cannot be
    /// listed or read. Individual removals are best effort.
    pub fn sweep(&self, resource: &Resource) -> Result<usize> {
        let mut removed = 0;
        for key in resource.identity()?.keys() {
            removed += self.sweep_key(&key)?;
        }
        Ok(removed)
    }

    fn sweep_key(&self, key: &Key) -> Result<usize> {
        let key = key.clone();
        let mut generations = self.backend.generations(&key)?;
        generations.sort_unstable_by(|a, b| b.cmp(a));
        for generation in generations {
            if let Some(bytes) = self.backend.read(&key, generation)?
                && let Decoded::Record(r) = record::decode(&bytes, key.as_str(), generation)
                && !r.released
            {
                return Ok(self.sweep_below(&key, generation));
            }
        }
        Ok(0)
    }

    /// Removes every record of `key` below `generation`, best effort and before
    /// returning; returns how many removals succeeded.
    fn sweep_below(&self, key: &Key, generation: u64) -> usize {
        let Ok(generations) = self.backend.generations(key) else {
            return 0;
        };
        let below: Vec<u64> = generations
            .into_iter()
            .filter(|g| *g < generation)
            .collect();
        below
            .iter()
            .filter(|g| self.backend.remove(key, **g).is_ok())
            .count()
    }

    /// The sweep right after a durable claim of ours (generation `claimed`) was
    /// confirmed newest: removes the generations the confirming read listed below
    /// it, without listing again (design-01, "sweep reuses the confirming listing").
    /// A backend whose listing is not a snapshot is never swept.
    pub(crate) fn sweep_after_claim(&self, key: &Key, claimed: u64, below: &[u64]) {
        if !self.backend.listing_is_snapshot() {
            return;
        }
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::SWEEP_LISTS_AFRESH) {
            // The planted bug: a fresh listing, keeping only whatever is newest now.
            if let Ok(listed) = self.backend.generations(key) {
                let newest = listed.iter().copied().max().unwrap_or(0);
                let stale: Vec<u64> = listed.into_iter().filter(|g| *g < newest).collect();
                self.remove_generations(key, &stale);
            }
            return;
        }
        debug_assert!(below.iter().all(|g| *g < claimed));
        self.remove_generations(key, below);
    }

    /// Removes `generations` of `key`, superseded by a durable claim of ours, best
    /// effort: through [`remove_superseded`](crate::LeaseStore::remove_superseded),
    /// which a backend may complete after it returns (the fs backend hands it to a
    /// removal thread, so the claimant does not wait for the disk). Callers pass only
    /// generations below a durable claim of their own, after its flush returned.
    fn remove_generations(&self, key: &Key, generations: &[u64]) {
        for generation in generations {
            let _ = self.backend.remove_superseded(key, *generation);
        }
    }
}

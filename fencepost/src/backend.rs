//! The `LeaseStore` contract: what a backend must honour (docs/protocol.md §4).
//!
//! A backend stores, for each [`Key`], a series of immutable records indexed by
//! generation. The protocol ([`crate::Store`]) lives once in this crate and only
//! ever *creates* records exclusively, *reads* them, and *removes* superseded ones.
//! A backend therefore needs no compare-and-swap, no rename and no lock held open:
//! one atomic create-if-absent per generation is the whole contract.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::Key;

/// Whether a create must be durable before it is acknowledged.
///
/// Claims (acquire, renew) are created [`Durability::Flushed`]: losing one could
/// hand its exact generation to a rival. Tombstones written by release are
/// [`Durability::Unflushed`]: losing one only delays the next contender (docs/protocol.md §3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Durability {
    /// Acknowledge only once the record survives power loss (file and, on POSIX,
    /// directory flushed).
    Flushed,
    /// Acknowledge once the record is visible to every reader; it may be lost in a
    /// power cut.
    Unflushed,
}

/// The outcome of [`LeaseStore::create`] when the backend knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateOutcome {
    /// This call created the record; no other create of the same generation can
    /// succeed.
    Created,
    /// A record with this generation already existed; nothing was written.
    AlreadyExists,
}

/// A backend failure: which operation, on what (a path or a key), and the cause.
///
/// Backends keep their own detailed errors and map them into this one, keeping the
/// [`io::ErrorKind`] so callers can tell "permission denied" from "disk full".
#[derive(Debug, thiserror::Error)]
#[error("{operation} {location}: {source}")]
pub struct BackendError {
    /// The operation that failed (`create`, `read`, `list`, `remove`, `open store`).
    pub operation: &'static str,
    /// What it was applied to: a filesystem path, a key, a URL.
    pub location: String,
    /// The underlying cause.
    #[source]
    pub source: io::Error,
}

impl BackendError {
    /// Builds an error for `operation` on `location` caused by `source`.
    pub fn new(operation: &'static str, location: impl fmt::Display, source: io::Error) -> Self {
        Self {
            operation,
            location: location.to_string(),
            source,
        }
    }

    /// The kind of the underlying I/O error.
    pub fn kind(&self) -> io::ErrorKind {
        self.source.kind()
    }
}

/// The exclusive-create contract a backend must honour (docs/protocol.md §4).
///
/// # What the protocol assumes
///
/// - **Atomic exclusive create**: of any number of concurrent
///   [`create`](LeaseStore::create) calls for one `(key, generation)`, from any
///   thread or process sharing the store, at most one returns
///   [`CreateOutcome::Created`].
/// - **Visibility**: once `create` returned `Created`, every later
///   [`read`](LeaseStore::read) of that generation returns the complete bytes, and
///   every later [`generations`](LeaseStore::generations) lists it (until
///   [`remove`](LeaseStore::remove)). A reader *may* observe a create that is still
///   in progress as torn bytes; the protocol stays safe when it does.
/// - **Durability**: a create with [`Durability::Flushed`] survives power loss once
///   acknowledged.
/// - **No invention**: a backend never returns a generation that was not created,
///   and never returns bytes that were not written for that generation.
/// - **Listing is a snapshot with respect to the maximum**: a
///   [`generations`](LeaseStore::generations) call concurrent with creates and
///   removes never omits the newest generation that existed for its whole
///   duration, and never omits *both* a generation removed during it and every
///   generation created above that one during it (a renewal creating g+1 and
///   sweeping g). A backend that cannot promise this (a cursor scan over a hashed
///   directory) says so through [`listing_is_snapshot`](LeaseStore::listing_is_snapshot)
///   returning `false`; the protocol then never removes records, so a scan that
///   races only creates still sees at least the maximum that existed when it began.
///   Pinned by the conformance scenario `listing_snapshot_under_renewals` and the
///   checker's cursor-scan schedules.
///
/// # What the protocol does *not* assume
///
/// - **A swept generation may be re-created.** A slow create of generation g may
///   land after g was created, superseded and removed by a sweep: the fs backend
///   and etcd both accept the freed name. Such a record is below the newest, so no
///   reader judges by it, and the creator's *confirming read* (the listing after
///   its create, which shows a newer generation) is what makes it lose: that read
///   is load-bearing and the protocol never skips it (docs/design-01, "swept
///   generation re-created"; pinned by the checker's `swept_recreate` schedule and
///   the planted bug `ACQUIRE_SKIPS_CONFIRM`).
/// - **Creates are not instantaneous.** A reader may see a create in progress as
///   torn bytes (the fs backend without hard links); the protocol judges liveness
///   by the newest *decodable* record, so a torn newest record over a live claim is
///   a create in progress, never a vacancy.
///
/// Any error from `create` means *unknown*: the record may or may not have landed.
/// The protocol then re-reads the series (docs/protocol.md I4); it never assumes either way.
///
/// The conformance crate (`fencepost-conformance`) is the executable form of this
/// contract; every backend should run it.
pub trait LeaseStore: Send + Sync + fmt::Debug {
    /// Creates record `generation` of `key` with `bytes`, only if that generation
    /// does not exist yet.
    ///
    /// Creates whatever container the key needs (a directory, a prefix) first.
    ///
    /// # Errors
    ///
    /// Any [`BackendError`] means the outcome is unknown: the record may have landed
    /// (possibly not durably). The caller re-reads.
    ///
    /// # Crash safety
    ///
    /// With [`Durability::Flushed`], an acknowledged record survives a power cut.
    /// A crash mid-create leaves either no record, a complete record, or a record
    /// that decodes as torn; never a record that decodes as a different one.
    fn create(
        &self,
        key: &Key,
        generation: u64,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<CreateOutcome, BackendError>;

    /// Lists the generations present for `key`, in any order; empty when the key has
    /// no records.
    ///
    /// Entries that are not records (foreign files, staging files) are skipped, never
    /// an error.
    ///
    /// # Errors
    ///
    /// A [`BackendError`] when the listing itself fails (permission, I/O). A missing
    /// key is not an error.
    fn generations(&self, key: &Key) -> Result<Vec<u64>, BackendError>;

    /// Reads the bytes of record `generation` of `key`; `None` when it does not exist
    /// (never created, or removed by a sweep since it was listed).
    ///
    /// # Errors
    ///
    /// A [`BackendError`] when the record exists but cannot be read.
    fn read(&self, key: &Key, generation: u64) -> Result<Option<Vec<u8>>, BackendError>;

    /// Removes record `generation` of `key`, best effort, before returning. Used by the
    /// sweep by hand ([`Store::sweep`](crate::Store::sweep)), only for generations
    /// below a claim the caller durably created (the sweep after a claim uses
    /// [`remove_superseded`](LeaseStore::remove_superseded)), and for tickets of a
    /// wait queue (`queue-…` keys, which carry no token); removing a missing record
    /// succeeds.
    ///
    /// # Errors
    ///
    /// A [`BackendError`] when the removal failed; the protocol ignores it (a record
    /// left behind is harmless).
    fn remove(&self, key: &Key, generation: u64) -> Result<(), BackendError>;

    /// Removes record `generation` of `key`, superseded by a claim the caller durably
    /// created and confirmed newest (the sweep after a claim, docs/protocol.md §3.6),
    /// and may **complete after it returns**: a backend may hand the removal to
    /// another thread so the claimant does not wait for it. The default is
    /// [`remove`](LeaseStore::remove).
    ///
    /// A backend that defers must keep three promises. Through this handle (and its
    /// clones) the record reads as removed once this returns: later
    /// [`generations`](LeaseStore::generations) leave it out and
    /// [`read`](LeaseStore::read) returns `None`. The removal is never made before
    /// this call (so never before the superseding claim's flush returned, which the
    /// protocol guarantees by calling this only after it). And memory stays bounded.
    /// A deferred removal that never lands (the process killed first) leaves a
    /// superseded record behind, which is harmless: the next claim's sweep removes
    /// every generation listed below it.
    ///
    /// # Errors
    ///
    /// As [`remove`](LeaseStore::remove) when the removal is made before returning;
    /// a deferred removal that fails is not reported (the protocol ignores the
    /// error either way).
    fn remove_superseded(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
        self.remove(key, generation)
    }

    /// Removes the container of `key` (a directory, a prefix) when it holds no
    /// records, so that [`keys`](LeaseStore::keys) no longer lists it. Used once a
    /// participant series of a shared claim (`share-…`, whose key is never reused)
    /// ended, its index entry was removed and every record of it was removed with
    /// [`remove`](LeaseStore::remove), newest last (docs/protocol.md §3.6); and by a
    /// renewal that removes its own stray record from such a removed series. A
    /// [`create`](LeaseStore::create) racing it makes the container again, so the
    /// protocol never relies on it having happened. The default does nothing (a
    /// backend whose keys have no container of their own, or that lists a key with
    /// no records anyway, loses only tidiness).
    ///
    /// A container that is not empty, or missing, is left alone: success. A
    /// container that is a symbolic link (or not what the backend made) is never
    /// followed.
    ///
    /// # Errors
    ///
    /// A [`BackendError`] when the removal failed for another reason (permission,
    /// a symbolic link in place of the container); the protocol ignores it (an
    /// empty container left behind is harmless).
    fn remove_key_if_empty(&self, key: &Key) -> Result<(), BackendError> {
        let _ = key;
        Ok(())
    }

    /// Lists every key that has (or had) a series, in any order. Names that are not
    /// keys are skipped.
    ///
    /// # Errors
    ///
    /// A [`BackendError`] when the listing fails.
    fn keys(&self) -> Result<Vec<Key>, BackendError>;

    /// Whether [`generations`](LeaseStore::generations) is a snapshot with respect
    /// to the maximum under concurrent creates and removes (see the trait docs).
    /// `true` by default; a backend that returns `false` is never swept by the
    /// protocol (its series keep every record), which keeps it safe.
    fn listing_is_snapshot(&self) -> bool {
        true
    }

    /// A subscription to changes of `key`'s series, for a waiter to sleep on instead
    /// of a fixed backoff (docs/design-07-performance.md, "Waiting"). `None` (the
    /// default) when the backend cannot notify: the protocol then polls with backoff,
    /// as it always did. The protocol never relies on a notification arriving: it
    /// waits at most [`CHANGE_WAIT_MAX`] before it reads again.
    fn watch_changes(&self, key: &Key) -> Option<Box<dyn ChangeWatch>> {
        let _ = key;
        None
    }

    /// Whether [`watch_changes`](LeaseStore::watch_changes) gives watches, so that
    /// waiters sleep on notifications and queue for turns: a release then looks in
    /// the key's wait queue for the next in line (docs/design-07-performance.md,
    /// "Who is woken: turns"). `false` by default, and for a backend whose waiters
    /// poll: its queues are always empty, so a release does not look.
    fn notifies_changes(&self) -> bool {
        false
    }

    /// A subscription to rings of ticket `ticket` of `key`'s wait queue (the waiter's
    /// own place in line, [`Key::queue`]): what a queued waiter sleeps on instead of
    /// every change of the key, so that a release wakes the waiter it names and no
    /// other (docs/design-07-performance.md, "Who is woken: rings"). It wakes on
    /// [`ring`](LeaseStore::ring) of that ticket and when the ticket is removed, and
    /// may wake spuriously. `None` (the default) when the backend cannot: the waiter
    /// then sleeps on [`watch_changes`](LeaseStore::watch_changes), as before.
    ///
    /// A watch is only made on a ticket that is there when it is made (`None`
    /// otherwise): the protocol relies on it after joining, when it sleeps on a new
    /// ticket's watch without reading the ticket again (a removal before the watch
    /// would then wake nobody; after it, the removal wakes it).
    fn watch_ticket(&self, key: &Key, ticket: u64) -> Option<Box<dyn ChangeWatch>> {
        let _ = (key, ticket);
        None
    }

    /// Wakes the waiter asleep on ticket `ticket` of `key`'s wait queue (see
    /// [`watch_ticket`](LeaseStore::watch_ticket)). Best effort and never an error:
    /// a ring lost costs its waiter no more than [`CHANGE_WAIT_MAX`], after which it
    /// reads anyway. The protocol rings after every tombstone it lands, on a backend
    /// that [`notifies_changes`](LeaseStore::notifies_changes). The default does
    /// nothing.
    fn ring(&self, key: &Key, ticket: u64) {
        let _ = (key, ticket);
    }

    /// A string that opens this same store again, in another process if the backend
    /// is shared across processes (for the fs backend: the store directory). Exported
    /// to children of `fencepost run` as `FENCEPOST_STORE`.
    fn locator(&self) -> String;
}

/// The longest a waiter sleeps on a [`ChangeWatch`] before it reads the series again
/// anyway: the fallback that covers a lost or never-sent notification, and a holder
/// that dies without releasing (expiry is not an event). The same bound as the
/// polling backoff's cap.
pub const CHANGE_WAIT_MAX: Duration = Duration::from_millis(64);

/// Changes of one key's series, from [`LeaseStore::watch_changes`]: made *before*
/// the read that found the key held, so a change after that read is never missed.
pub trait ChangeWatch: Send {
    /// Blocks until the series may have changed since the watch was made or the
    /// last `wait` returned, or `timeout` passed. True when woken by a change
    /// (spurious wake-ups allowed); false on timeout.
    fn wait(&mut self, timeout: Duration) -> bool;
}

macro_rules! forward_lease_store {
    ($($wrapper:ty),*) => {$(
        impl<S: LeaseStore + ?Sized> LeaseStore for $wrapper {
            fn create(&self, key: &Key, generation: u64, bytes: &[u8], durability: Durability)
                -> Result<CreateOutcome, BackendError> {
                (**self).create(key, generation, bytes, durability)
            }
            fn generations(&self, key: &Key) -> Result<Vec<u64>, BackendError> {
                (**self).generations(key)
            }
            fn read(&self, key: &Key, generation: u64) -> Result<Option<Vec<u8>>, BackendError> {
                (**self).read(key, generation)
            }
            fn remove(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
                (**self).remove(key, generation)
            }
            fn remove_superseded(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
                (**self).remove_superseded(key, generation)
            }
            fn remove_key_if_empty(&self, key: &Key) -> Result<(), BackendError> {
                (**self).remove_key_if_empty(key)
            }
            fn keys(&self) -> Result<Vec<Key>, BackendError> {
                (**self).keys()
            }
            fn listing_is_snapshot(&self) -> bool {
                (**self).listing_is_snapshot()
            }
            fn watch_changes(&self, key: &Key) -> Option<Box<dyn ChangeWatch>> {
                (**self).watch_changes(key)
            }
            fn notifies_changes(&self) -> bool {
                (**self).notifies_changes()
            }
            fn watch_ticket(&self, key: &Key, ticket: u64) -> Option<Box<dyn ChangeWatch>> {
                (**self).watch_ticket(key, ticket)
            }
            fn ring(&self, key: &Key, ticket: u64) {
                (**self).ring(key, ticket)
            }
            fn locator(&self) -> String {
                (**self).locator()
            }
        }
    )*};
}

forward_lease_store!(Arc<S>, Box<S>);

//! Creating the next generation of a key and confirming it is newest.

use std::cell::RefCell;
use std::sync::Arc;
use std::thread::LocalKey;

use super::{Watch, next_generation};
use crate::backend::{CreateOutcome, Durability};
use crate::protocol::{AcquireOptions, CREATE_GRACE_MS, Store};
use crate::record::{FORMAT_VERSION, Record};
use crate::{Error, Holder, Key, Result};

/// How many times acquire may lose the create of one generation while the listing
/// still shows the generation below it before the backend is declared broken (it
/// says a record exists that it never lists): a bound instead of a spin.
const INVISIBLE_RECORD_LIMIT: usize = 64;

/// One key's outcome within an acquisition.
#[allow(clippy::large_enum_variant)] // short-lived, one per key per attempt
pub(crate) enum Claim {
    /// Our claim, confirmed newest (possibly lapsed), with the generations below it
    /// and the monotonic time just before it was stamped; `false` when its create
    /// took so long that a reader may have taken it for abandoned.
    Taken(Record, Vec<u64>, u64, bool),
    /// A live holder that has not stagnated.
    Held(Holder),
}

impl Store {
    /// Claims one key without waiting: creates generation newest+1 (token = that
    /// generation), flushed, and confirms it is the newest and live; or reports the
    /// live holder. `(holder_id, pid)`: the tenure's holder id and the pid written
    /// in it ([`new_holder_id`](crate::protocol::new_holder_id)).
    pub(crate) fn claim_key(
        &self,
        key: &Key,
        label: &str,
        (holder_id, pid): (&str, u32),
        proof: &Arc<str>,
        options: &AcquireOptions,
        watch: &mut Watch,
    ) -> Result<Claim> {
        loop {
            let newest = self.read_newest(key)?;
            if let Some(holder) = self.live_holder(&newest, watch, options) {
                return Ok(Claim::Held(holder));
            }

            let generation = next_generation(key, newest.generation)?;
            watch.invisible = match watch.invisible {
                (g, n) if g == generation => (g, n + 1),
                _ => (generation, 0),
            };
            if watch.invisible.1 >= INVISIBLE_RECORD_LIMIT {
                return Err(Error::Backend(crate::BackendError::new(
                    "create",
                    format!("{key} generation {generation}"),
                    std::io::Error::other(
                        "the backend keeps refusing a generation it never lists; it breaks the LeaseStore contract",
                    ),
                )));
            }
            let since_mono = self.clock.monotonic_ms();
            let granted_at_ms = self.clock.wall_ms();
            let claim = self.fresh_claim(
                key,
                label,
                (generation, generation),
                (holder_id, pid),
                options,
                proof,
                granted_at_ms,
            );
            match self
                .backend
                .create(key, generation, &claim.encode(), Durability::Flushed)
            {
                Ok(CreateOutcome::Created) => {}
                Ok(CreateOutcome::AlreadyExists) => continue,
                Err(error) => {
                    self.give_up_if_landed(key, generation, holder_id);
                    return Err(error.into());
                }
            }
            // A create that took CREATE_GRACE_MS or longer may have been seen torn
            // and taken for abandoned by a reader that then superseded it after
            // this process's confirming read: never trust it.
            let after_mono = self.clock.monotonic_ms();
            let trusted = after_mono.saturating_sub(since_mono) < CREATE_GRACE_MS;
            // How far ahead the wall clock runs, for this tenure's later judgements
            // by its holder (`Store::holder_now`).
            self.note_clocks(granted_at_ms, after_mono);

            #[cfg(feature = "planted-bugs")]
            if crate::planted::on(&crate::planted::ACQUIRE_SKIPS_CONFIRM) {
                return Ok(Claim::Taken(claim, newest.below, since_mono, true));
            }
            // The confirming read is load-bearing: a slow create may land a
            // generation that was already created, superseded and swept (backends
            // accept the freed name), and only this read shows a newer one exists
            // (design-01, "swept generation re-created").
            let confirmed = self.read_newest(key)?;
            let ours = confirmed.generation == generation
                && confirmed
                    .top_record()
                    .is_some_and(|r| !r.released && *r.holder == *holder_id);
            // Above ours, our own tenure renewed: another process of the session
            // re-entered it before this read. The tenure is still the one this
            // claim began (same holder id, same token), so this process began it
            // and says so; taking it for lost and re-entering made every process
            // of the session report a re-entry, and none released it at its end
            // (a breaker: held for the whole ttl with nobody behind it).
            let renewed_by_sibling = confirmed.generation > generation
                && !sibling_claim_ignored()
                && confirmed.top_record().is_some_and(|r| {
                    !r.released
                        && r.broken.is_none()
                        && *r.holder == *holder_id
                        && r.token == claim.token
                });
            if renewed_by_sibling {
                // The sweep below it is the sibling's renewal's (ours is among
                // the records below that); ours sweeps only below our claim.
                let mut below = confirmed.below;
                below.retain(|g| *g < generation);
                return Ok(Claim::Taken(claim, below, since_mono, trusted));
            }
            if confirmed.generation == generation && !ours {
                // Our exclusive create succeeded, yet the record read back is not
                // ours: the backend broke the visibility promise of the contract.
                return Err(Error::Backend(crate::BackendError::new(
                    "read",
                    format!("{key} generation {generation}"),
                    std::io::Error::other(
                        "a record this process created reads back as something else; the backend breaks the LeaseStore contract",
                    ),
                )));
            }
            if !ours {
                // Superseded before we confirmed (a reader saw our create in progress
                // as torn, or a later claimant won): nothing of ours to clean up.
                continue;
            }
            // Ours, but possibly already expired (a pause, or a create slower than the
            // ttl): the caller's final liveness check decides, under its deadline.
            return Ok(Claim::Taken(claim, confirmed.below, since_mono, trusted));
        }
    }

    /// After a create failed with an unknown outcome: if our claim landed anyway, it
    /// may not be durable, so give it up with a tombstone rather than hand it out.
    /// The first record of a tenure: a claim at `generation` with fencing token
    /// `token` (`(token, generation)`), written at `granted_at_ms` for
    /// `options`' ttl, owner, process tie and session (as its tag), with the proof
    /// `proof` (the SHA-256 of the tenure's secret), for holder id `holder_id` of
    /// process `pid` (both from one [`new_holder_id`](crate::protocol::new_holder_id),
    /// so the record's pid is the one its holder id names).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fresh_claim(
        &self,
        key: &Key,
        label: &str,
        (token, generation): (u64, u64),
        (holder_id, pid): (&str, u32),
        options: &AcquireOptions,
        proof: &Arc<str>,
        granted_at_ms: u64,
    ) -> Record {
        Record {
            v: FORMAT_VERSION,
            key: key.shared_text(),
            label: kept_text(&LAST_LABEL, label),
            token,
            generation,
            holder: holder_id.into(),
            owner: kept_text(&LAST_OWNER, &options.owner),
            pid,
            host: crate::host_name_shared(),
            granted_at_ms,
            expires_at_ms: granted_at_ms.saturating_add(options.ttl_ms),
            ttl_ms: options.ttl_ms,
            released: false,
            secret_sha256: Some(Arc::clone(proof)),
            broken: None,
            next: None,
            process: self.tied_evidence(options),
            session: options.session.as_deref().map(crate::SessionTag::of),
        }
    }

    pub(crate) fn give_up_if_landed(&self, key: &Key, generation: u64, holder_id: &str) {
        let Ok(newest) = self.read_newest(key) else {
            return;
        };
        let Some(tombstone_generation) = generation.checked_add(1) else {
            return;
        };
        if newest.generation == generation
            && let Some(record) = newest
                .top_record()
                .filter(|r| !r.released && *r.holder == *holder_id)
        {
            let now = self.clock.wall_ms();
            let tombstone = Record {
                generation: tombstone_generation,
                granted_at_ms: now,
                expires_at_ms: now,
                ttl_ms: 0,
                released: true,
                ..record.clone()
            };
            if let Ok(CreateOutcome::Created) = self.backend.create(
                key,
                tombstone_generation,
                &tombstone.encode(),
                Durability::Unflushed,
            ) {
                self.ring_after_tombstone(key, None, &[]);
            }
        }
    }
}

thread_local! {
    static LAST_LABEL: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
    static LAST_OWNER: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// `text` as shared text, reusing the one `last` handed out when it is the same
/// text: a process claims under the same few labels and owner names, and each
/// claim would otherwise copy them into new strings (docs/design-07-performance.md).
fn kept_text(last: &'static LocalKey<RefCell<Option<Arc<str>>>>, text: &str) -> Arc<str> {
    last.try_with(|last| {
        let mut last = last.borrow_mut();
        match last.as_ref() {
            Some(kept) if **kept == *text => Arc::clone(kept),
            _ => Arc::clone(last.insert(Arc::from(text))),
        }
    })
    .unwrap_or_else(|_| Arc::from(text))
}

/// Planted bug [`crate::planted::SIBLING_CLAIM_IGNORED`]: a claim whose own tenure
/// was renewed above it by another process of its session takes itself for lost.
fn sibling_claim_ignored() -> bool {
    #[cfg(feature = "planted-bugs")]
    if crate::planted::on(&crate::planted::SIBLING_CLAIM_IGNORED) {
        return true;
    }
    false
}

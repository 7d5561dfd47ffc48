//! Renewing every key of a tenure, adopting a file's new file-id key.

use crate::backend::{CreateOutcome, Durability};
use crate::liveness::ProcessEvidence;
use crate::proof::Secret;
use crate::protocol::series::{Newest, next_generation};
use crate::protocol::{HeldKey, Lease, RELEASE_ATTEMPTS, Store, Written, is_loss};
use crate::record::{FORMAT_VERSION, Record};
use crate::{Error, Key, Result};

impl Store {
    /// Renews `lease`: writes generation newest+1 with the **same token** and a new
    /// expiry of now + ttl, flushed, and updates `lease` (docs/protocol.md I5).
    ///
    /// Acts only for the tenure: the newest record must carry the lease's token and
    /// the hash of its secret.
    ///
    /// For a file, the file-id key is that of the file *as it is now*: a file
    /// created since the claim, or replaced by rename (a new inode), has its new
    /// file-id series adopted, and the old one is given back. A file-id series whose
    /// newest record belongs to another tenure ends this tenure for good
    /// ([`Error::Superseded`]; design-01, "once fenced, fenced for good").
    ///
    /// A renewal whose create lands after the renewed record expired (measured on
    /// the monotonic clock from just before the stamp), or that stalls afterwards
    /// until its own ttl ran out, is not a renewal: it is reported as
    /// [`Error::Expired`] and the late record is given up with a tombstone
    /// (design-01, "no silent revival"). When the lease is lost after its other
    /// keys were renewed in this call, those are given back, so a lost tenure
    /// holds nothing for a fresh ttl.
    ///
    /// # Errors
    ///
    /// - [`Error::Expired`] when the lease's ttl ran out, before or during the call
    ///   (an expired lease is never revived; acquire again).
    /// - [`Error::Superseded`] when a newer tenure owns the resource, or a rival
    ///   created the next generation first, or another tenure's record is the newest
    ///   of the file's file-id series.
    /// - [`Error::Broken`] when an operator broke the lease; [`Error::Released`]
    ///   when a holder of its secret already released it.
    /// - [`Error::Backend`] when the store fails; `lease` is unchanged and a later
    ///   renew may still succeed (it matches the newest record by token and proof,
    ///   not by generation).
    pub fn renew(&self, lease: &mut Lease) -> Result<()> {
        let started = self.clock.monotonic_ms();
        // The keeper of a tied tenure records its own evidence; a resumed lease
        // (renewed from another process) none.
        let evidence = if lease.tied && !lease.siblings {
            self.liveness
                .this_process()
                .map(|evidence| crate::ProcessEvidence {
                    group: lease.group,
                    ..evidence
                })
        } else {
            None
        };
        // The other keys first: if one of them is lost, the primary is left to expire
        // rather than renewed for a lease that no longer holds the whole file.
        let others = self.renew_others(lease, &evidence)?;
        // From the record this handle wrote last when it has it (no read first),
        // else, or when that cannot decide, from a read of the series.
        let written = lease
            .written
            .at(lease.token, lease.generation)
            .and_then(|written| {
                self.renew_written(
                    &lease.key,
                    &lease.label,
                    written,
                    &lease.secret,
                    lease.ttl_ms,
                    (evidence.clone(), lease.siblings),
                )
            })
            .map(|renewed| renewed.map(|renewed| (renewed, lease.siblings)));
        // Judged on a read: a newest record of the tenure other than the one this
        // handle knew was written through another handle (see `renew_tenure_kept`).
        let renewed = match written.unwrap_or_else(|| {
            self.renew_tenure_kept(
                &lease.key,
                &lease.label,
                (lease.token, &lease.secret),
                lease.ttl_ms,
                evidence,
                (Some(lease.generation), lease.siblings),
            )
        }) {
            Ok((renewed, siblings)) => {
                lease.siblings |= siblings;
                renewed
            }
            Err(error) => {
                if is_loss(&error) {
                    self.give_back_keys(&others, &lease.label, &lease.secret);
                }
                return Err(error);
            }
        };
        // A renewal of several keys is live only while the first key's renewal is:
        // one that stalled between keys until a ttl passed is given back, never
        // returned with a lapsed key (found by the interleaving checker, schedule
        // `file_contention`).
        if self.clock.monotonic_ms().saturating_sub(started) >= lease.ttl_ms {
            self.give_back_keys(&others, &lease.label, &lease.secret);
            let _ = self.release_tenure(&lease.key, &lease.label, lease.token, &lease.secret);
            // The end the lease had before this renewal (already behind the wall
            // clock: a ttl has passed since the renewal began), not the given-back
            // record's end, which is ahead.
            return Err(Error::Expired {
                label: lease.label.as_str().into(),
                token: lease.token,
                expired_at_ms: lease.expires_at_ms,
            });
        }
        lease.others = others;
        lease.generation = renewed.generation;
        lease.granted_at_ms = renewed.granted_at_ms;
        lease.expires_at_ms = renewed.expires_at_ms;
        lease.written = Written(Some(std::sync::Arc::new(renewed)));
        Ok(())
    }

    /// Renews the keys of `lease` other than the primary for the file as it is now:
    /// the held file-id key if it still names the file, else the current one
    /// adopted; keys that no longer name the file are given back (best effort).
    fn renew_others(
        &self,
        lease: &Lease,
        evidence: &Option<ProcessEvidence>,
    ) -> Result<Vec<HeldKey>> {
        // Each series as the primary: a renewal through a sibling's handle keeps
        // the later end it finds, and carries no evidence, in every series of the
        // tenure. Kept in the primary alone, it cut the file-id series short to
        // this process's ttl, and another session claimed the file through another
        // hard link while the session held it (found by a breaker; the checker's
        // `session_sibling_file`, planted bug `OTHER_KEYS_CUT_SHORT`).
        let siblings = lease.siblings;
        #[cfg(feature = "planted-bugs")]
        let siblings = siblings && !crate::planted::on(&crate::planted::OTHER_KEYS_CUT_SHORT);
        let renew = |h: &HeldKey| -> Result<HeldKey> {
            let (r, _) = self.renew_tenure_kept(
                &h.key,
                &lease.label,
                (h.token, &lease.secret),
                lease.ttl_ms,
                evidence.clone(),
                (Some(h.generation), siblings),
            )?;
            Ok(HeldKey {
                generation: r.generation,
                ..h.clone()
            })
        };
        // The identity cannot be resolved now (a directory vanished): keep renewing
        // what is held rather than losing the lease over a lookup.
        // A shared tenure holds its participant series only.
        if lease.shared {
            return lease.others.iter().map(renew).collect();
        }
        let Ok(identity) = lease.resource.identity() else {
            return lease.others.iter().map(renew).collect();
        };
        let current = identity.file_id;
        let stale: Vec<HeldKey> = lease
            .others
            .iter()
            .filter(|h| Some(&h.key) != current.as_ref())
            .cloned()
            .collect();
        let mut others = Vec::new();
        if let Some(file_id) = current {
            others.push(match lease.others.iter().find(|h| h.key == file_id) {
                Some(h) => renew(h)?,
                None => self.adopt_key(&file_id, lease, evidence)?,
            });
        }
        self.give_back_keys(&stale, &lease.label, &lease.secret);
        Ok(others)
    }

    /// Takes `key` (the file-id key of a file that is not the one the tenure
    /// claimed: created after the claim, or a replacement) into the tenure of
    /// `lease`: only when no other tenure's record is its newest.
    fn adopt_key(
        &self,
        key: &Key,
        lease: &Lease,
        evidence: &Option<ProcessEvidence>,
    ) -> Result<HeldKey> {
        let superseded = |newest: &Newest| Error::Superseded {
            label: lease.label.as_str().into(),
            token: lease.token,
            by_token: newest.token(),
        };
        for _ in 0..RELEASE_ATTEMPTS {
            let newest = self.read_settled(key)?;
            if let Some(r) = newest
                .claim()
                // The holder id too: every tenure of a session shares its secret.
                .filter(|r| {
                    *r.holder == *lease.holder_id && lease.secret.proves(r.secret_sha256.as_deref())
                })
            {
                let r = self.renew_tenure(
                    key,
                    &lease.label,
                    r.token,
                    &lease.secret,
                    lease.ttl_ms,
                    evidence.clone(),
                )?;
                return Ok(HeldKey {
                    key: key.clone(),
                    token: r.token,
                    generation: r.generation,
                });
            }
            if newest.holder_id().is_some() {
                return Err(superseded(&newest));
            }
            let generation = next_generation(key, newest.generation)?;
            let now = self.clock.wall_ms();
            let claim = Record {
                v: FORMAT_VERSION,
                key: key.as_str().into(),
                label: lease.label.as_str().into(),
                token: generation,
                generation,
                holder: lease.holder_id.as_str().into(),
                owner: lease.owner.as_str().into(),
                pid: std::process::id(),
                host: crate::host_name_shared(),
                granted_at_ms: now,
                expires_at_ms: now.saturating_add(lease.ttl_ms),
                ttl_ms: lease.ttl_ms,
                released: false,
                secret_sha256: Some(lease.secret.sha256().into()),
                broken: None,
                next: None,
                // The same evidence as the tenure's renewals.
                process: evidence.clone(),
                session: lease.session_tag.clone(),
            };
            match self
                .backend
                .create(key, generation, &claim.encode(), Durability::Flushed)
            {
                Ok(CreateOutcome::Created) => {}
                Ok(CreateOutcome::AlreadyExists) => continue,
                Err(error) => {
                    self.give_up_if_landed(key, generation, &lease.holder_id);
                    return Err(error.into());
                }
            }
            let confirmed = self.read_newest(key)?;
            if confirmed.generation == generation
                && confirmed
                    .top_record()
                    .is_some_and(|r| *r.holder == *lease.holder_id)
            {
                return Ok(HeldKey {
                    key: key.clone(),
                    token: generation,
                    generation,
                });
            }
        }
        Err(superseded(&self.read_newest(key)?))
    }

    /// Gives back keys of a tenure that is over or no longer names them, best
    /// effort (a tombstone that does not land leaves a claim that expires).
    fn give_back_keys(&self, keys: &[HeldKey], label: &str, secret: &Secret) {
        for held in keys {
            let _ = self.release_tenure(&held.key, label, held.token, secret);
        }
    }
}

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
        let (others, others_end) = self.renew_others(lease, &evidence)?;
        // From the record this handle wrote last when it has it (no read first),
        // else, or when that cannot decide, from a read of the series.
        let written = lease
            .written
            .at(lease.token, lease.generation)
            .and_then(|written| {
                self.renew_written(
                    &lease.key,
                    &lease.label,
                    (written, lease.written.stamped_ahead()),
                    &lease.secret,
                    lease.ttl_ms,
                    (evidence.clone(), lease.siblings),
                )
            })
            .map(|renewed| renewed.map(|(renewed, ahead)| (renewed, lease.siblings, ahead)));
        // Judged on a read: a newest record of the tenure other than the one this
        // handle knew was written through another handle (see `renew_tenure_kept`).
        let (renewed, stamped_ahead) = match written.unwrap_or_else(|| {
            self.renew_tenure_stamped(
                &lease.key,
                &lease.label,
                (lease.token, &lease.secret),
                lease.ttl_ms,
                evidence,
                (
                    Some(lease.generation),
                    lease.siblings,
                    lease
                        .written
                        .at(lease.token, lease.generation)
                        .and(lease.written.stamped_ahead()),
                ),
            )
        }) {
            Ok((renewed, siblings, ahead)) => {
                lease.siblings |= siblings;
                (renewed, ahead)
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
        // The whole file is held until the earliest of its series ends: the others
        // were renewed first, so theirs may end sooner (a breaker: a renewal that
        // stalled between its keys reported the primary's later end, and another
        // session got the file through a hard link inside it).
        lease.expires_at_ms = renewed.expires_at_ms.min(others_end);
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::LEASE_END_FROM_PRIMARY) {
            lease.expires_at_ms = renewed.expires_at_ms;
        }
        // With the clock of its stamp when this call stamped it.
        lease.written = Written(
            Some(std::sync::Arc::new(renewed)),
            crate::protocol::Stamp(stamped_ahead),
        );
        Ok(())
    }

    /// Renews the keys of `lease` other than the primary for the file as it is now:
    /// the held file-id key if it still names the file, else the current one
    /// adopted; keys that no longer name the file are given back (best effort).
    ///
    /// Returns the keys held and the earliest end of their renewed records
    /// (`u64::MAX` when there are none).
    fn renew_others(
        &self,
        lease: &Lease,
        evidence: &Option<ProcessEvidence>,
    ) -> Result<(Vec<HeldKey>, u64)> {
        // Each series as the primary: a renewal through a sibling's handle keeps
        // the later end it finds, and carries no evidence, in every series of the
        // tenure. Kept in the primary alone, it cut the file-id series short to
        // this process's ttl, and another session claimed the file through another
        // hard link while the session held it (found by a breaker; the checker's
        // `session_sibling_file`, planted bug `OTHER_KEYS_CUT_SHORT`).
        let siblings = lease.siblings;
        #[cfg(feature = "planted-bugs")]
        let siblings = siblings && !crate::planted::on(&crate::planted::OTHER_KEYS_CUT_SHORT);
        // Each record judged by the clock it was stamped with, when this handle
        // stamped it (as the primary's: a step back of 2/3 ttl ended every file
        // lease at its next renewal through its file-id series, a breaker).
        let renew = |h: &HeldKey| -> Result<(HeldKey, u64)> {
            let (r, _, stamped) = self.renew_tenure_stamped(
                &h.key,
                &lease.label,
                (h.token, &lease.secret),
                lease.ttl_ms,
                evidence.clone(),
                (Some(h.generation), siblings, h.stamped.0),
            )?;
            let end = r.expires_at_ms;
            Ok((
                HeldKey {
                    generation: r.generation,
                    stamped: crate::protocol::Stamp(stamped),
                    ..h.clone()
                },
                end,
            ))
        };
        let renew_all = |held: &[HeldKey]| -> Result<(Vec<HeldKey>, u64)> {
            let mut end = u64::MAX;
            let mut others = Vec::new();
            for h in held {
                let (h, h_end) = renew(h)?;
                end = end.min(h_end);
                others.push(h);
            }
            Ok((others, end))
        };
        // The identity cannot be resolved now (a directory vanished): keep renewing
        // what is held rather than losing the lease over a lookup.
        // A shared tenure holds its participant series only.
        if lease.shared {
            return renew_all(&lease.others);
        }
        let Ok(identity) = lease.resource.identity() else {
            return renew_all(&lease.others);
        };
        let current = identity.file_id;
        let stale: Vec<HeldKey> = lease
            .others
            .iter()
            .filter(|h| Some(&h.key) != current.as_ref())
            .cloned()
            .collect();
        let mut others = Vec::new();
        let mut end = u64::MAX;
        if let Some(file_id) = current {
            let (held, held_end) = match lease.others.iter().find(|h| h.key == file_id) {
                Some(h) => renew(h)?,
                None => self.adopt_key(&file_id, lease, evidence, siblings)?,
            };
            others.push(held);
            end = held_end;
        }
        self.give_back_keys(&stale, &lease.label, &lease.secret);
        Ok((others, end))
    }

    /// Takes `key` (the file-id key of a file that is not the one the tenure
    /// claimed: created after the claim, or a replacement) into the tenure of
    /// `lease`: only when no other tenure's record is its newest. The key is held
    /// no shorter than the tenure's primary record promises (a breaker: a file
    /// replaced by an editor's save, then a shorter re-entry, gave the new file id
    /// only the short ttl, and another session got the file through a hard link
    /// while the session was promised it; planted bug `ADOPTED_KEY_CUT_SHORT`); a
    /// record of the tenure already there was written through another handle (a
    /// sibling's) and is renewed as one. With `siblings`, no liveness evidence is
    /// written. Returns the key held and its end.
    fn adopt_key(
        &self,
        key: &Key,
        lease: &Lease,
        evidence: &Option<ProcessEvidence>,
        siblings: bool,
    ) -> Result<(HeldKey, u64)> {
        let keep = true;
        #[cfg(feature = "planted-bugs")]
        let keep = keep && !crate::planted::on(&crate::planted::ADOPTED_KEY_CUT_SHORT);
        let superseded = |newest: &Newest| self.superseded(newest, key, &lease.label, lease.token);
        for _ in 0..RELEASE_ATTEMPTS {
            let newest = self.read_settled(key)?;
            if let Some(r) = newest
                .claim()
                // The holder id too: every tenure of a session shares its secret.
                .filter(|r| {
                    *r.holder == *lease.holder_id && lease.secret.proves(r.secret_sha256.as_deref())
                })
            {
                let (r, _) = self.renew_tenure_kept(
                    key,
                    &lease.label,
                    (r.token, &lease.secret),
                    lease.ttl_ms,
                    evidence.clone(),
                    (None, keep),
                )?;
                return Ok((
                    HeldKey {
                        key: key.clone(),
                        token: r.token,
                        generation: r.generation,
                        stamped: crate::protocol::Stamp(None),
                    },
                    r.expires_at_ms,
                ));
            }
            if newest.holder_id().is_some() {
                return Err(superseded(&newest));
            }
            // The end the tenure's primary series promises now, to keep.
            let kept_until = if keep {
                self.read_settled(&lease.key)?
                    .claim()
                    .filter(|r| {
                        r.token == lease.token && lease.secret.proves(r.secret_sha256.as_deref())
                    })
                    .map(|r| (r.expires_at_ms, r.ttl_ms))
            } else {
                None
            };
            let generation = next_generation(key, newest.generation)?;
            let now = self.clock.wall_ms();
            // As a renewal through a sibling's handle keeps the later end: never
            // sooner than the primary record ends (capped at its ttl from now: a
            // clock far ahead where it was written does not lengthen it further).
            let ttl_ms = kept_until.map_or(lease.ttl_ms, |(expires, ttl)| {
                let kept = expires.min(now.saturating_add(ttl));
                lease.ttl_ms.max(kept.saturating_sub(now))
            });
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
                expires_at_ms: now.saturating_add(ttl_ms),
                ttl_ms,
                released: false,
                secret_sha256: Some(lease.secret.sha256().into()),
                broken: None,
                next: None,
                // The same evidence as the tenure's renewals (none when kept by
                // other processes too).
                process: if siblings { None } else { evidence.clone() },
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
                return Ok((
                    HeldKey {
                        key: key.clone(),
                        token: generation,
                        generation,
                        // Stamped without a monotonic reading before it: judged
                        // by the holder's clock.
                        stamped: crate::protocol::Stamp(None),
                    },
                    claim.expires_at_ms,
                ));
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

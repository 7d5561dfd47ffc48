//! Writing on top of a tenure's own record: renewal, release and break of one key.

use super::{Newest, ended, holder_of, next_generation};
use crate::backend::{CreateOutcome, Durability};
use crate::liveness::ProcessEvidence;
use crate::proof::Secret;
use crate::protocol::{RELEASE_ATTEMPTS, Store};
use crate::record::{self, BreakNote, Decoded, Record};
use crate::{Error, Holder, Key, Result};

impl Store {
    /// `evidence`: what the renewal records as its keeper's liveness evidence. The
    /// keeper of a tied tenure (the process that claimed it) passes its own; a
    /// renewal through a resumed handle (another process keeping the lease alive)
    /// passes none: the lease no longer lives and dies with the claimer, so it must
    /// not be taken over when that process ends.
    pub(crate) fn renew_tenure(
        &self,
        key: &Key,
        label: &str,
        token: u64,
        secret: &Secret,
        ttl_ms: u64,
        evidence: Option<ProcessEvidence>,
    ) -> Result<Record> {
        self.renew_tenure_kept(key, label, (token, secret), ttl_ms, evidence, (None, false))
            .map(|(renewed, _)| renewed)
    }

    /// [`Store::renew_tenure`] for a handle that last knew the tenure at generation
    /// `known` (`None`: nothing known), with `siblings` when another process is
    /// already known to keep it (the renewal then keeps the later expiry and
    /// carries no evidence whatever it finds). When the newest record of the tenure is not the one it knew, another
    /// process renewed it through another handle (a session's sibling, `renew`
    /// with the handle): the renewal then ends no sooner than that record does and
    /// carries no evidence, and the flag returned says so (the lease keeps it:
    /// `siblings`). A process that began a tenure must not cut short what a
    /// sibling was promised, nor hand it to a waiter when it alone dies (found by
    /// a breaker: a session re-entry "renewed for 60 s" was shortened to the first
    /// process's 3 s and taken over once that process was killed).
    pub(crate) fn renew_tenure_kept(
        &self,
        key: &Key,
        label: &str,
        (token, secret): (u64, &Secret),
        ttl_ms: u64,
        evidence: Option<ProcessEvidence>,
        (known, siblings): (Option<u64>, bool),
    ) -> Result<(Record, bool)> {
        self.renew_tenure_stamped(
            key,
            label,
            (token, secret),
            ttl_ms,
            evidence,
            (known, siblings, None),
        )
        .map(|(renewed, siblings, _)| (renewed, siblings))
    }

    /// [`Store::renew_tenure_kept`], with the clock the record at `known` was
    /// stamped by when this handle stamped it (`stamped`: the wall clock's lead
    /// over the monotonic clock then); it is judged by that clock when it is still
    /// the newest. Returns the clock of the renewal's own stamp too, when this call
    /// stamped the record it returns.
    pub(crate) fn renew_tenure_stamped(
        &self,
        key: &Key,
        label: &str,
        (token, secret): (u64, &Secret),
        ttl_ms: u64,
        evidence: Option<ProcessEvidence>,
        (known, siblings, stamped): (Option<u64>, bool, Option<i64>),
    ) -> Result<(Record, bool, Option<i64>)> {
        let newest = self.read_settled(key)?;
        let superseded = |newest: &Newest| self.superseded(newest, key, label, token);
        let current = match newest.decoded() {
            Some(Decoded::Record(r))
                if r.token == token && secret.proves(r.secret_sha256.as_deref()) =>
            {
                r
            }
            // Nothing in the series: an ended participant series removed whole
            // (docs/design-05-subtrees-and-shared.md §4.2), or a key never
            // claimed. Not "superseded by a record that cannot be read": there
            // is no record at all.
            None if newest.generation == 0 => {
                return Err(Error::NotHolder {
                    label: label.to_string(),
                    token,
                    newest: None,
                });
            }
            _ => return Err(superseded(&newest)),
        };
        if let Some(ended) = ended(current, label) {
            return Err(ended);
        }
        let siblings = siblings
            || known
                .is_some_and(|generation| current.generation != generation && !siblings_ignored());
        let renewal = Renewal {
            key,
            label,
            secret,
            current,
            above: newest.generation,
            ttl_ms,
            evidence: if siblings { None } else { evidence },
            keep_later: siblings,
            again: SIBLING_RENEWALS_MAX,
            // The record this handle knew, stamped by it: by that clock; any other
            // by the holder's clock.
            stamped_ahead: stamped.filter(|_| known == Some(current.generation)),
        };
        match self.write_renewal(renewal, false)? {
            Some((renewed, ahead)) => Ok((renewed, siblings, ahead)),
            // Not reached: only a renewal from the record written falls back.
            None => Err(superseded(&newest)),
        }
    }

    /// Renews the tenure whose newest record, as this handle wrote or read it, is
    /// `written`, **without reading the series first**: creates the generation
    /// above it and confirms with a listing that nothing landed above that. `None`
    /// when the renewal must be judged on a read of the series instead
    /// ([`Store::renew_tenure`]): the record has lapsed by this clock, or the next
    /// generation is taken (a rival's claim, a break, a release, a renewal through
    /// another handle, or a create in progress) — nothing was written then.
    ///
    /// What the skipped read would have decided is decided by the create: any record
    /// above ours takes the generation first. A record that landed above ours and
    /// was swept leaves the generation free, and ours lands below a newer record:
    /// the confirming listing shows it, and the read that follows judges it as
    /// [`Store::renew_tenure`] does (docs/protocol.md §3.2, renew; explored by the
    /// interleaving checker, planted bug `RENEW_WRITTEN_SKIPS_CONFIRM`).
    pub(crate) fn renew_written(
        &self,
        key: &Key,
        label: &str,
        (written, stamped_ahead): (&Record, Option<i64>),
        secret: &Secret,
        ttl_ms: u64,
        (evidence, keep_later): (Option<ProcessEvidence>, bool),
    ) -> Option<Result<(Record, Option<i64>)>> {
        if ended(written, label).is_some()
            || !record::is_live(&written.envelope(), self.clock.wall_ms())
        {
            return None;
        }
        let renewal = Renewal {
            key,
            label,
            secret,
            current: written,
            above: written.generation,
            ttl_ms,
            evidence,
            keep_later,
            again: SIBLING_RENEWALS_MAX,
            stamped_ahead,
        };
        self.write_renewal(renewal, true).transpose()
    }

    /// Writes `r.current` renewed at the generation above `r.above`, flushed, and
    /// judges the outcome. With `blind` (no read of the series preceded it), a
    /// create that finds the generation taken returns `Ok(None)` for the caller to
    /// read and judge.
    ///
    /// The renewed record comes with how far the wall clock ran ahead of the
    /// monotonic clock when it was stamped, when this call stamped it (`None` for a
    /// sibling's record taken as the renewal).
    fn write_renewal(&self, r: Renewal<'_>, blind: bool) -> Result<Option<(Record, Option<i64>)>> {
        let Renewal {
            key,
            label,
            secret,
            current,
            above,
            ttl_ms,
            evidence,
            keep_later,
            again,
            stamped_ahead,
        } = r;
        let asked_ttl_ms = ttl_ms;
        let token = current.token;
        let superseded = |newest: &Newest| self.superseded(newest, key, label, token);
        let ours = |r: &Record| r.token == token && secret.proves(r.secret_sha256.as_deref());
        let since_mono = self.clock.monotonic_ms();
        let now = self.clock.wall_ms();
        // Our own tenure's expiry is judged by the holder's clock (a wall clock
        // that stepped back since must not lengthen it); the renewal is stamped
        // with the wall clock every reader judges by. A record this handle stamped
        // itself is judged by the clock it was stamped with: by the holder's clock
        // after a step back, a record stamped since the step looked as much older
        // as the step, and a step of 2/3 ttl ended every kept-alive lease at its
        // next renewal, `run` stopping its command (a breaker; the checker's
        // `clock_step_back_renewals`, planted bug `OWN_STAMP_JUDGED_BY_HOLDER_CLOCK`).
        let stamped_ahead = stamped_ahead.filter(|_| !own_stamp_ignored());
        let judged_now = match stamped_ahead {
            Some(ahead) => {
                let by_stamp = i64::try_from(since_mono)
                    .unwrap_or(i64::MAX)
                    .saturating_add(ahead);
                u64::try_from(by_stamp).unwrap_or(0).max(now)
            }
            None => self.holder_now(now, since_mono),
        };
        let expired = || Error::Expired {
            label: label.to_string(),
            token,
            expired_at_ms: current.expires_at_ms,
        };
        if !record::is_live(&current.envelope(), judged_now) {
            return if blind { Ok(None) } else { Err(expired()) };
        }
        // How long the renewed record stays live from now, by this clock; capped at
        // its ttl (a clock that stepped back makes expiry unknowable, not longer).
        let remaining_ms = current
            .expires_at_ms
            .saturating_sub(judged_now)
            .min(current.ttl_ms);
        // Kept by other processes too: never sooner than the record renewed ends
        // (its own expiry, capped at its ttl from now: a clock far ahead where it
        // was written does not lengthen it further).
        let ttl_ms = if keep_later {
            let kept_until = current
                .expires_at_ms
                .min(now.saturating_add(current.ttl_ms));
            ttl_ms.max(kept_until.saturating_sub(now))
        } else {
            ttl_ms
        };
        let generation = next_generation(key, above)?;
        let renewal = Record {
            generation,
            granted_at_ms: now,
            expires_at_ms: now.saturating_add(ttl_ms),
            ttl_ms,
            process: evidence,
            ..current.clone()
        };
        let created = self
            .backend
            .create(key, generation, &renewal.encode(), Durability::Flushed);
        // The post-create check on the monotonic clock: a create that landed after
        // the renewed record expired is no renewal (design-01, "no silent revival";
        // pinned by the checker's `slow_renewal` schedule).
        let after_mono = self.clock.monotonic_ms();
        self.note_clocks(now, after_mono);
        let late = after_mono.saturating_sub(since_mono) >= remaining_ms;
        #[cfg(feature = "planted-bugs")]
        let late = late && !crate::planted::on(&crate::planted::RENEW_SKIPS_POST_CREATE_CHECK);
        if late {
            // Without a read first, lateness was measured against the record this
            // handle remembers, which another handle of the tenure may have renewed
            // since: unless our record landed and is the newest (a revival to give
            // up), nothing of ours stands above anything live, and the read judges
            // against the record that is newest (found by the breaker: `run` killed
            // its command over a lease its command had kept alive).
            if blind {
                let newest_is_ours = matches!(created, Ok(CreateOutcome::Created))
                    && self
                        .backend
                        .generations(key)
                        .is_ok_and(|listed| listed.iter().copied().max() == Some(generation));
                let unknown = created.is_err();
                #[cfg(feature = "planted-bugs")]
                let newest_is_ours = newest_is_ours
                    && !crate::planted::on(&crate::planted::LATE_RENEWAL_READ_OVER_OURS);
                if !newest_is_ours && !unknown {
                    return Ok(None);
                }
            }
            // A session's tenure is held by every process of the session: lateness
            // is measured conservatively (from before the wall-clock reading), so
            // this renewal may be late only by that measure while a sibling's
            // promise still runs; a tombstone would end the tenure under it
            // (found by the interleaving checker, `session_reentry` seed 2444 of
            // 3000). Its late record is left for the session (who re-enter it)
            // and expires within a ttl; no rival can have claimed below it.
            // A late record that landed alone in a participant series removed
            // under it is taken back rather than given up with a tombstone on top.
            if matches!(created, Ok(CreateOutcome::Created))
                && key.as_str().starts_with("share-")
                && self.backend.generations(key).is_ok_and(|listed| {
                    listed.iter().copied().max() == Some(generation)
                        && removed_under_us(above, &listed)
                })
            {
                self.take_back_stray(key, generation);
                return Err(expired());
            }
            if !matches!(created, Ok(CreateOutcome::AlreadyExists)) && current.session.is_none() {
                self.give_up_if_landed(key, generation, &current.holder);
            }
            return Err(expired());
        }
        let created = created?;
        if blind && created == CreateOutcome::AlreadyExists {
            return Ok(None);
        }
        // A renewal is a durable claim of ours that became the newest: the same
        // moment acquire sweeps (docs/protocol.md §3.6). Without it a lease kept
        // alive for hours piles up thousands of records that every read lists
        // (found by the benchmark). As acquire: a renewal that stalled after
        // landing (in its confirming listing or sweep) until its own ttl ran out is
        // not handed back as live (found by the interleaving checker, schedule
        // `lock_handover`).
        let landed_newest = |below: &[u64]| {
            self.sweep_after_claim(key, generation, below);
            if self.clock.monotonic_ms().saturating_sub(since_mono) >= ttl_ms {
                return Err(expired());
            }
            Ok(Some((
                renewal.clone(),
                crate::protocol::Stamp::at(now, since_mono).0,
            )))
        };
        if created == CreateOutcome::Created {
            // Newest is all the confirmation needs: our own record's bytes are known.
            let mut listed = self.backend.generations(key)?;
            #[cfg(feature = "planted-bugs")]
            if blind && crate::planted::on(&crate::planted::RENEW_WRITTEN_SKIPS_CONFIRM) {
                listed.retain(|g| *g <= generation);
            }
            if listed.iter().copied().max() == Some(generation) {
                listed.retain(|g| *g < generation);
                if renewed_removed_series(above, &listed) {
                    self.take_back_stray(key, generation);
                    return Err(expired());
                }
                return landed_newest(&listed);
            }
        }
        let confirmed = self.read_newest(key)?;
        if created == CreateOutcome::Created && confirmed.generation == generation {
            if renewed_removed_series(above, &confirmed.below) {
                self.take_back_stray(key, generation);
                return Err(expired());
            }
            return landed_newest(&confirmed.below);
        }
        // Lost the create to a record still being written above ours: someone's
        // create in progress (a claimant that judged this tenure expired, or a
        // concurrent renewal of it). Reading through it would find our own old
        // record and report a renewal that never happened (found by the
        // interleaving checker, schedule `lock_handover`, seed 175 of
        // FENCEPOST_SCHEDULES=20000): wait it out and judge what it settles to.
        let confirmed = if confirmed.top_is_torn() {
            let settled = self.read_settled(key)?;
            if settled.top_is_torn() {
                // Still unreadable past the grace: our renewal is not trusted
                // (docs/protocol.md R2). Superseded, not expired: the lease's own
                // end may well be ahead, and an "expired" at a time not yet
                // reached told the holder a negative time (a breaker).
                return Err(Error::Superseded {
                    label: label.to_string(),
                    token,
                    by_token: 0,
                    through: None,
                    by: None,
                });
            }
            settled
        } else {
            confirmed
        };
        // Lost the create, or something landed above ours: if the newest record is
        // still this same tenure, live (a concurrent renewal of it by the CLI, the
        // server or another keepalive), the lease is renewed, not superseded. Live
        // by the holder's clock, no earlier than it was when this renewal began.
        let now = self.clock.wall_ms().max(judged_now);
        match confirmed.decoded() {
            Some(Decoded::Record(r)) if ours(r) => match ended(r, label) {
                Some(ended) => Err(ended),
                // A sibling's record that ends sooner than this renewal meant to (a
                // sibling that re-entered with a shorter ttl keeps the tenure's end,
                // no more): renewed again on top of it, as a sibling's. Taken for
                // this renewal, the tenure never got longer, and ran out under a
                // `run` whose command kept re-entering it (found by a breaker; the
                // checker's `session_sibling_short`, planted bug
                // `SIBLING_RECORD_TAKEN_AS_RENEWAL`).
                None if record::is_live(&r.envelope(), now)
                    && again > 0
                    && r.expires_at_ms < renewal.expires_at_ms
                    && !sibling_record_taken() =>
                {
                    self.write_renewal(
                        Renewal {
                            key,
                            label,
                            secret,
                            current: r,
                            above: confirmed.generation,
                            ttl_ms: asked_ttl_ms,
                            evidence: None,
                            keep_later: true,
                            again: again - 1,
                            stamped_ahead: None,
                        },
                        false,
                    )
                }
                None if record::is_live(&r.envelope(), now) => Ok(Some((r.clone(), None))),
                None => Err(superseded(&confirmed)),
            },
            _ => Err(superseded(&confirmed)),
        }
    }

    /// Takes back a record of ours (generation `generation` of `key`) that landed
    /// in a participant series removed under it (see [`removed_under_us`]):
    /// removes the record, then the key's now empty container, best effort, so
    /// that a stale handle leaves nothing behind.
    fn take_back_stray(&self, key: &Key, generation: u64) {
        if self.backend.remove(key, generation).is_ok() {
            let _ = self.backend.remove_key_if_empty(key);
        }
    }

    pub(crate) fn release_tenure(
        &self,
        key: &Key,
        label: &str,
        token: u64,
        secret: &Secret,
    ) -> Result<()> {
        self.release_tenure_to(key, label, token, secret, false)
    }

    /// Gives back the claim an acquisition made at `generation` of `key` and will
    /// not hand out: tombstones it only while that very record is still the
    /// newest. A newer record of the same tenure is a renewal by another process
    /// of its session, which re-entered the tenure (resumed from the claim we made
    /// first) and was told it holds it; ending the tenure now would fence that
    /// process while it was promised the lease (found by the interleaving checker,
    /// `session_file_race` with four processes of one session, seed 5234; planted
    /// bug `GIVE_BACK_OVER_RENEWAL`). Such a tenure is left to the session, and
    /// the acquisition re-enters it on its next round. Best effort, as every
    /// give-back.
    pub(crate) fn give_back_claim(
        &self,
        key: &Key,
        label: &str,
        (token, generation): (u64, u64),
        secret: &Secret,
    ) {
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::GIVE_BACK_OVER_RENEWAL) {
            let _ = self.release_tenure(key, label, token, secret);
            return;
        }
        let _ = self.release_at(key, label, token, secret, false, Some(generation));
    }

    /// Releases as [`Store::release_tenure`]; with `hand_over` (the tenure was
    /// contended), the tombstone names the oldest waiter of the key's queue
    /// ([`Record::next`]), whose turn it is next.
    pub(crate) fn release_tenure_to(
        &self,
        key: &Key,
        label: &str,
        token: u64,
        secret: &Secret,
        hand_over: bool,
    ) -> Result<()> {
        self.release_at(key, label, token, secret, hand_over, None)
    }

    /// [`Store::release_tenure_to`]; with `only_at`, only while the tenure's newest
    /// record is at that generation (see [`Store::give_back_claim`]), Ok without a
    /// tombstone otherwise.
    fn release_at(
        &self,
        key: &Key,
        label: &str,
        token: u64,
        secret: &Secret,
        hand_over: bool,
        only_at: Option<u64>,
    ) -> Result<()> {
        for _ in 0..RELEASE_ATTEMPTS {
            let mut newest = self.read_settled(key)?;
            // Taken by value: the tombstone is built from it without a clone.
            let current = match newest.judged.take() {
                Some((_, Decoded::Record(r)))
                    if r.token == token && secret.proves(r.secret_sha256.as_deref()) =>
                {
                    if let Some(ended) = ended(&r, label) {
                        return Err(ended);
                    }
                    // Re-read every attempt: a renewal that landed since is
                    // another process's of the session, and not ours to end.
                    if only_at.is_some_and(|g| g != newest.generation) {
                        return Ok(());
                    }
                    r
                }
                judged => {
                    newest.judged = judged;
                    let now = self.clock.wall_ms();
                    return Err(Error::NotHolder {
                        label: label.to_string(),
                        token,
                        newest: newest
                            .holder()
                            .filter(|_| newest.envelope().is_some_and(|e| record::is_live(&e, now)))
                            .map(Box::new),
                    });
                }
            };
            let generation = next_generation(key, newest.generation)?;
            let (next, gone_tickets) = if hand_over {
                self.next_in_line(key, &current.holder)
            } else {
                (None, Vec::new())
            };
            let named = next.as_ref().map(|turn| turn.ticket);
            let now = self.clock.wall_ms();
            let tombstone = Record {
                generation,
                granted_at_ms: now,
                expires_at_ms: now,
                ttl_ms: 0,
                released: true,
                next,
                ..current
            };
            let bytes = tombstone.encode_owned();
            match self
                .backend
                .create(key, generation, &bytes, Durability::Unflushed)
            {
                Ok(CreateOutcome::Created) => {
                    // A release of an ended participant (expired) whose series an
                    // exclusive claimer's look removed meanwhile lands its
                    // tombstone in an empty series: taken back, so the stale
                    // handle leaves nothing behind (the tenure had ended anyway).
                    if key.as_str().starts_with("share-")
                        && self.backend.generations(key).is_ok_and(|listed| {
                            listed.iter().max() == Some(&generation)
                                && removed_under_us(newest.generation, &listed)
                        })
                    {
                        self.take_back_stray(key, generation);
                        return Ok(());
                    }
                    self.ring_after_tombstone(key, named, &gone_tickets);
                    #[cfg(feature = "planted-bugs")]
                    if crate::planted::on(&crate::planted::RELEASE_SWEEPS_NEWEST) {
                        for g in self.backend.generations(key)? {
                            let _ = self.backend.remove(key, g);
                        }
                    }
                    return Ok(());
                }
                // Someone created the next generation first; re-read decides whether
                // we are still the holder.
                Ok(CreateOutcome::AlreadyExists) => continue,
                Err(error) => {
                    // The holder id from the tombstone's own bytes (this rare path
                    // pays the decode the hot path saved).
                    let ours = match record::decode(&bytes, key.as_str(), generation) {
                        Decoded::Record(r) => Some(r.holder),
                        _ => None,
                    };
                    let landed = self.read_newest(key).ok().is_some_and(|n| {
                        n.generation == generation
                            && n.top_record().is_some_and(|r| {
                                r.released && ours.as_ref().is_some_and(|h| *h == r.holder)
                            })
                    });
                    return if landed { Ok(()) } else { Err(error.into()) };
                }
            }
        }
        Err(Error::NotHolder {
            label: label.to_string(),
            token,
            newest: None,
        })
    }

    /// Breaks the live tenure newest in `key`, if there is one; returns its holder.
    pub(crate) fn break_key(&self, key: &Key, note: &BreakNote) -> Result<Option<Holder>> {
        self.break_key_of(key, note, None)
    }

    /// [`break_key`](Self::break_key), of tenure `holder_id` only when given: a
    /// newest live record of another tenure is left alone.
    pub(crate) fn break_key_of(
        &self,
        key: &Key,
        note: &BreakNote,
        holder_id: Option<&str>,
    ) -> Result<Option<Holder>> {
        let now = self.clock.wall_ms();
        // Settled: a renewal in progress is waited out (within CREATE_GRACE_MS), not
        // taken for a tenure that ended (found by the interleaving checker,
        // `break_shared` seed 1433: a break of two readers, one mid-renewal with
        // the record below it swept, broke the other and reported success).
        #[cfg(feature = "planted-bugs")]
        let first = if crate::planted::on(&crate::planted::BREAK_READS_UNSETTLED) {
            self.read_newest(key)?
        } else {
            self.read_settled(key)?
        };
        #[cfg(not(feature = "planted-bugs"))]
        let first = self.read_settled(key)?;
        let target = match first.decoded() {
            Some(Decoded::Record(r))
                if !r.released
                    && record::is_live(&r.envelope(), now)
                    && holder_id.is_none_or(|h| *r.holder == *h) =>
            {
                r.clone()
            }
            Some(Decoded::Record(_)) if holder_id.is_some() => return Ok(None),
            Some(Decoded::Newer { v, envelope }) if record::is_live(envelope, now) => {
                return Err(Error::InvalidArgument(format!(
                    "the live lease there was written by a newer fencepost (format v{v}), which this \
                     version cannot break; end it with that version, or wait until it expires \
                     at {}",
                    crate::utc_timestamp(envelope.expires_at_ms)
                )));
            }
            _ => return Ok(None),
        };
        let mut newest = first;
        for _ in 0..RELEASE_ATTEMPTS {
            let Some(current) = newest
                .claim()
                .filter(|r| r.token == target.token && r.holder == target.holder)
            else {
                // The tenure ended by itself meanwhile: nothing of it left to break.
                return Ok(None);
            };
            let generation = next_generation(key, newest.generation)?;
            let now = self.clock.wall_ms();
            let tombstone = Record {
                generation,
                granted_at_ms: now,
                expires_at_ms: now,
                ttl_ms: 0,
                released: true,
                broken: Some(note.clone()),
                ..current.clone()
            };
            #[cfg(feature = "planted-bugs")]
            let durability = if crate::planted::on(&crate::planted::BREAK_UNFLUSHED) {
                Durability::Unflushed
            } else {
                Durability::Flushed
            };
            #[cfg(not(feature = "planted-bugs"))]
            let durability = Durability::Flushed;
            match self
                .backend
                .create(key, generation, &tombstone.encode(), durability)
            {
                Ok(CreateOutcome::Created) => {
                    self.ring_after_tombstone(key, None, &[]);
                    // Confirmed newest, as a claim is: a slow create can land on a
                    // generation the holder's renewals already created and swept,
                    // below the renewal that now holds, where it ends nothing
                    // (found by the interleaving checker, `break_renewal` seed 3232
                    // of 10000). Then look again, and break above it.
                    #[cfg(feature = "planted-bugs")]
                    if crate::planted::on(&crate::planted::BREAK_SKIPS_CONFIRM) {
                        return Ok(Some(holder_of(&target)));
                    }
                    let listed = self.backend.generations(key)?;
                    if listed.iter().copied().max() == Some(generation) {
                        return Ok(Some(holder_of(&target)));
                    }
                    newest = self.reread_for_break(key)?;
                }
                // A renewal (or release) landed first: look again.
                #[cfg(feature = "planted-bugs")]
                Ok(CreateOutcome::AlreadyExists)
                    if crate::planted::on(&crate::planted::BREAK_TRUSTS_LOST_CREATE) =>
                {
                    // The planted bug: the lost create is taken for a break that
                    // landed, and the renewal that won goes on holding.
                    return Ok(Some(holder_of(&target)));
                }
                // Settled here too: above a create in progress the break would land
                // over whoever's claim it turns out to be (found by the checker,
                // `break_race` seed 1014 once the first read was settled).
                Ok(CreateOutcome::AlreadyExists) => newest = self.reread_for_break(key)?,
                Err(error) => {
                    let landed = self.read_newest(key).ok().is_some_and(|n| {
                        n.generation == generation
                            && n.top_record()
                                .is_some_and(|r| r.broken.as_ref() == Some(note))
                    });
                    return if landed {
                        Ok(Some(holder_of(&target)))
                    } else {
                        Err(error.into())
                    };
                }
            }
        }
        Err(Error::Backend(crate::BackendError::new(
            "create",
            key,
            std::io::Error::other(
                "the lease was renewed every time the break tried to land; try again",
            ),
        )))
    }
}

impl Store {
    /// The re-read of a break whose create lost or landed below a newer record:
    /// settled, so that it never writes above a create in progress (planted bug
    /// `BREAK_REREADS_UNSETTLED` reads unsettled here).
    fn reread_for_break(&self, key: &Key) -> Result<Newest> {
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::BREAK_REREADS_UNSETTLED) {
            return self.read_newest(key);
        }
        self.read_settled(key)
    }
}

/// One renewal to write: `current` (the tenure's record at generation `above`, or
/// below a torn record at `above`) renewed for `ttl_ms` with `evidence`.
struct Renewal<'a> {
    key: &'a Key,
    label: &'a str,
    secret: &'a Secret,
    current: &'a Record,
    above: u64,
    ttl_ms: u64,
    evidence: Option<ProcessEvidence>,
    /// Another process keeps the tenure too ([`crate::Lease`]'s `siblings`): the
    /// renewal lasts at least as long as `current` still does.
    keep_later: bool,
    /// How many more times the renewal is made again on top of a sibling's record
    /// that ends sooner than it meant to.
    again: u8,
    /// How far the wall clock ran ahead of the monotonic clock when this handle
    /// stamped `current`, if it did ([`crate::protocol::Written`]).
    stamped_ahead: Option<i64>,
}

/// How many times a renewal is made again on top of a sibling's record that ends
/// sooner (each time another sibling's record landed first: bounded, then the
/// sibling's record is taken, as before).
const SIBLING_RENEWALS_MAX: u8 = 3;

/// Whether a renewal that created generation `above + 1`, and found it the newest,
/// landed in a series emptied under it: `above` (the record it renewed, > 0) is no
/// longer listed (`below`: the generations listed under ours). Only an ended
/// participant series of a shared claim is ever removed whole, its records lowest
/// first and the newest last (docs/design-05-subtrees-and-shared.md §4.2), so the
/// tenure had ended (released, broken or expired, as another process judged it)
/// and its index entry is gone: acknowledged, the renewal would revive a shared
/// lease that no exclusive claimer can find (docs/protocol.md §3.2, "renewal into
/// a removed series"). In every other series this never holds: a record below
/// ours is removed only by the sweep of a claim that landed above it, and a claim
/// above `above` that is not ours would be listed above ours (newest records are
/// never removed there). Explored by the checker's `shared_cleanup` schedule
/// (planted bug `STALE_RENEWAL_REVIVES_REMOVED_SERIES`).
fn removed_under_us(above: u64, below: &[u64]) -> bool {
    above > 0 && !below.contains(&above)
}

/// [`removed_under_us`] for a renewal: the rule that refuses it (left out by the
/// planted bug).
fn renewed_removed_series(above: u64, below: &[u64]) -> bool {
    #[cfg(feature = "planted-bugs")]
    if crate::planted::on(&crate::planted::STALE_RENEWAL_REVIVES_REMOVED_SERIES) {
        return false;
    }
    removed_under_us(above, below)
}

/// Planted bug [`crate::planted::OWN_STAMP_JUDGED_BY_HOLDER_CLOCK`]: a record this
/// handle stamped is judged by the holder's clock like any other.
fn own_stamp_ignored() -> bool {
    #[cfg(feature = "planted-bugs")]
    if crate::planted::on(&crate::planted::OWN_STAMP_JUDGED_BY_HOLDER_CLOCK) {
        return true;
    }
    false
}

/// Planted bug [`crate::planted::SIBLING_RECORD_TAKEN_AS_RENEWAL`]: a sibling's
/// record that ends sooner is taken for this renewal.
fn sibling_record_taken() -> bool {
    #[cfg(feature = "planted-bugs")]
    if crate::planted::on(&crate::planted::SIBLING_RECORD_TAKEN_AS_RENEWAL) {
        return true;
    }
    false
}

/// Planted bug [`crate::planted::SIBLING_RENEWAL_IGNORED`]: a renewal over a record
/// another handle of the tenure wrote is made as if this handle had written it.
fn siblings_ignored() -> bool {
    #[cfg(feature = "planted-bugs")]
    if crate::planted::on(&crate::planted::SIBLING_RENEWAL_IGNORED) {
        return true;
    }
    false
}

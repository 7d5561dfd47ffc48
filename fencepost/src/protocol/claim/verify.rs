//! Asking whether a claim is still held: check, check_lease, watch, holder, resume.

use crate::proof::LeaseHandle;
use crate::protocol::claim::subtree::InTheWay;
use crate::protocol::series::ended;
use crate::protocol::{HeldKey, Lease, Store, Written};
use crate::record::{self, Decoded};
use crate::{Error, Holder, Key, Resource, Result};

impl Store {
    /// True only if `token` is the token of the newest record of `resource`'s
    /// (primary) series and that record is live (docs/protocol.md I3). A superseded, released or
    /// expired token returns false, as does any token when the newest record is
    /// unreadable.
    ///
    /// For an existing file it also reads the series of its file-id key: a record
    /// there of another tenure (a rival that claimed the file through another
    /// hard link) makes the check false, and so does this tenure's own tombstone
    /// there (a break through another link ends the tenure in the file-id series
    /// alone). A file-id series that is free — the file was created after the
    /// claim, or its inode changed — does not.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidResource`] for a resource without a key; [`Error::Backend`]
    /// when the store cannot be read (never reported as `false`).
    pub fn check(&self, resource: &Resource, token: u64) -> Result<bool> {
        let identity = resource.identity()?;
        let newest = self.read_newest(&identity.key)?;
        let now = self.clock.wall_ms();
        let current = newest
            .envelope()
            .is_some_and(|e| e.token == token && token > 0 && record::is_live(&e, now));
        if !current {
            return Ok(false);
        }
        let holder = newest.claim().map(|r| &*r.holder).unwrap_or("");
        // A name on the spelling that became a symbolic link since someone claimed
        // through it: that claim lives under the key the spelling had before, and
        // the spelling now names two claimed files. Neither passes through it: a
        // bare token could be either's, as every series starts at 1 (a breaker:
        // a directory moved away and linked back, both holders' checks passed).
        for before in resource.keys_before_links(&identity.key) {
            let other = self.read_newest(&before)?;
            let live_other = other.claim().is_some_and(|r| {
                *r.holder != *holder && !r.released && record::is_live(&r.envelope(), now)
            });
            if live_other {
                return Ok(false);
            }
        }
        let Some(file_id) = identity.file_id else {
            return Ok(true);
        };
        Ok(self
            .fenced_in(&file_id, holder, resource.target(), token)?
            .is_none())
    }

    /// Whether the file-id series `file_id` (the file's identity as it is now)
    /// fences tenure `holder_id`, as the error its holder is told (naming `label`
    /// and `token`), from one read of its newest decodable record:
    ///
    /// - [`Error::Superseded`] when it is another tenure's, live or not: a rival
    ///   came in through another hard link, or the file was replaced and someone
    ///   claimed the new one. Such a tenure is fenced for good (design-01, "once
    ///   fenced, fenced for good"; the checker's `hard_link_revival` and
    ///   `rename_revival` schedules). A newer-format record always fences (its
    ///   holder cannot be compared).
    /// - [`Error::Broken`] / [`Error::Released`] when it is this tenure's own
    ///   tombstone: a break through another hard link ends the tenure in the
    ///   file-id series without touching the path key its holder claimed, if the
    ///   break could not find that key (a new user: `break --file b.txt` "broke"
    ///   alice's lease on `a.txt`, whose `check` still passed;
    ///   `cli/tests/identity.rs::a_break_through_another_link_fences_the_holder`,
    ///   checker `break_through_another_link`).
    ///
    /// An empty series, or one with only torn records, fences nothing.
    fn fenced_in(
        &self,
        file_id: &Key,
        holder_id: &str,
        label: String,
        token: u64,
    ) -> Result<Option<Error>> {
        let newest = self.read_newest(file_id)?;
        Ok(match newest.holder_id() {
            Some(h) if h != holder_id || h.is_empty() => newest
                .holder()
                .map(|_| self.superseded(&newest, file_id, &label, token)),
            Some(_) => match newest.decoded() {
                #[cfg(feature = "planted-bugs")]
                Some(_) if crate::planted::on(&crate::planted::FILE_ID_TOMBSTONE_IGNORED) => None,
                Some(Decoded::Record(r)) => ended(r, &label).map(|ended| match ended {
                    // The resource's token, not the file-id series' own.
                    Error::Broken { note, .. } => Error::Broken { label, token, note },
                    _ => Error::Released { label, token },
                }),
                _ => None,
            },
            None => None,
        })
    }

    /// A cheap look at whether `lease` was lost since its last renewal: one read of
    /// the newest record of each of its keys. `Some(loss)` only on a definite
    /// answer — a decodable newest record of another tenure (a takeover, or a
    /// record of a newer format), or this tenure's own tombstone (broken, or
    /// released through its handle) — classified as [`Store::renew`] would report it. A torn newest
    /// record (a create in progress) or a backend error is no answer: the next
    /// renewal decides.
    pub fn watch(&self, lease: &Lease) -> Option<Error> {
        let keys = std::iter::once((&lease.key, lease.token))
            .chain(lease.others.iter().map(|held| (&held.key, held.token)));
        for (key, token) in keys {
            let Ok(newest) = self.read_newest(key) else {
                continue;
            };
            if newest.top_is_torn() {
                continue;
            }
            let lost = match newest.decoded() {
                Some(Decoded::Record(r))
                    if r.token == token && lease.secret.proves(r.secret_sha256.as_deref()) =>
                {
                    // This tenure's own tombstone: broken by an operator, or
                    // released through its handle.
                    match ended(r, &lease.label) {
                        Some(ended) => ended,
                        None => continue,
                    }
                }
                Some(Decoded::Record(_) | Decoded::Newer { .. }) => {
                    self.superseded(&newest, key, &lease.label, lease.token)
                }
                Some(Decoded::Torn(_)) | None => continue,
            };
            return Some(lost);
        }
        None
    }

    /// The lease that `handle` proves, read back from the store: how another process
    /// of the holder (a CLI `renew` or `release`, `run`'s child) acts on a lease it
    /// did not acquire itself. Then [`Store::renew`] or [`Store::release`] it.
    ///
    /// The newest record of the resource must be the handle's tenure: its token,
    /// and the hash of its secret. A token alone is never enough.
    ///
    /// # Errors
    ///
    /// - [`Error::NotHolder`] when the newest record is another tenure's, or has
    ///   the token but not the hash of the handle's secret (`newest` names the live
    ///   holder, if any); nothing is changed.
    /// - [`Error::Broken`] / [`Error::Released`] when the tenure already ended that
    ///   way.
    /// - [`Error::Superseded`] when a rival holds the file through another link.
    /// - [`Error::InvalidResource`] and [`Error::Backend`] as for every operation.
    pub fn resume(&self, resource: &Resource, handle: &LeaseHandle) -> Result<Lease> {
        let identity = resource.identity()?;
        let label = resource.target();
        let token = handle.token();
        let secret = handle.secret();
        let newest = self.read_newest(&identity.key)?;
        let record = match newest.decoded() {
            Some(Decoded::Record(r))
                if r.token == token && secret.proves(r.secret_sha256.as_deref()) =>
            {
                if let Some(ended) = ended(r, &label) {
                    return Err(ended);
                }
                r
            }
            _ => {
                // A shared tenure's handle: its own series, through the index.
                if let Some(lease) = self.resume_shared(resource, &identity.key, handle)? {
                    return Ok(lease);
                }
                let now = self.clock.wall_ms();
                return Err(Error::NotHolder {
                    label,
                    token,
                    newest: newest
                        .holder()
                        .filter(|_| newest.envelope().is_some_and(|e| record::is_live(&e, now)))
                        .map(Box::new),
                });
            }
        };
        let mut others = Vec::new();
        if let Some(file_id) = &identity.file_id {
            // The tenure's record in the file-id series, if it has one (not when the
            // file was created after the claim); a live rival there is a takeover.
            let newest = self.read_newest(file_id)?;
            match newest.claim() {
                // The holder id too: every tenure of a session shares its secret.
                Some(held)
                    if held.holder == record.holder
                        && secret.proves(held.secret_sha256.as_deref()) =>
                {
                    others.push(HeldKey {
                        key: file_id.clone(),
                        token: held.token,
                        generation: held.generation,
                        // Read, not stamped here.
                        stamped: crate::protocol::Stamp(None),
                    });
                }
                _ => {
                    if let Some(fenced) =
                        self.fenced_in(file_id, &record.holder, label.clone(), token)?
                    {
                        return Err(fenced);
                    }
                }
            }
        }
        Ok(Lease {
            resource: resource.clone(),
            key: identity.key,
            others,
            label: record.label.to_string(),
            token,
            generation: record.generation,
            holder_id: record.holder.to_string(),
            owner: record.owner.to_string(),
            ttl_ms: record.ttl_ms,
            granted_at_ms: record.granted_at_ms,
            expires_at_ms: record.expires_at_ms,
            secret: secret.clone(),
            tied: false,
            group: None,
            session: None,
            session_tag: record.session.clone(),
            reentered: false,
            siblings: false,
            shared: false,
            queued: false,
            written: Written::of(record),
        })
    }

    /// Checks that `lease` is still current, saying why not: [`Store::check`] with
    /// reasons, for the holder itself (a mediated write checks this immediately
    /// before publishing). Every key of the tenure must still be its newest record,
    /// live, and no rival may hold the file through another link.
    ///
    /// # Errors
    ///
    /// [`Error::Superseded`], [`Error::Expired`], [`Error::Broken`],
    /// [`Error::Released`] for a lease that is no longer current; [`Error::Backend`]
    /// when the store cannot be read.
    pub fn check_lease(&self, lease: &Lease) -> Result<()> {
        for (key, token) in lease.tenures() {
            let newest = self.read_newest(key)?;
            let current = match newest.decoded() {
                Some(Decoded::Record(r))
                    if r.token == token && lease.secret.proves(r.secret_sha256.as_deref()) =>
                {
                    r
                }
                _ => {
                    return Err(self.superseded(&newest, key, &lease.label, lease.token));
                }
            };
            if let Some(ended) = ended(current, &lease.label) {
                return Err(ended);
            }
            if !record::is_live(&current.envelope(), self.clock.wall_ms()) {
                return Err(Error::Expired {
                    label: lease.label.clone(),
                    token: lease.token,
                    expired_at_ms: current.expires_at_ms,
                });
            }
        }
        // The file as it is now, if its file-id series is not one the tenure holds
        // (the file was created after the claim, or replaced by rename): another
        // tenure's record there fences this tenure for good, as in `check`.
        if !lease.shared
            && let Some(file_id) = lease.resource.identity()?.file_id
            && !lease.others.iter().any(|held| held.key == file_id)
            && let Some(fenced) =
                self.fenced_in(&file_id, &lease.holder_id, lease.label.clone(), lease.token)?
        {
            return Err(fenced);
        }
        Ok(())
    }

    /// The live holder of `resource`, if any: the newest record of any of its keys
    /// that is live (for an existing file, its path key or its file-id key), else a
    /// live subtree claim of a directory above it (for a file or a directory), else
    /// a live shared holder of either (named as `Store::try_acquire` names readers:
    /// "X and N other readers (shared)"). For a mediated write with a lock, which a
    /// file or subtree lease, exclusive or shared, always overrides (a breaker: a
    /// lock's write landed on a file another agent held shared, for reading;
    /// `server/tests/authority.rs::a_lock_never_overrides_a_shared_lease`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidResource`] or [`Error::Backend`].
    pub fn holder(&self, resource: &Resource) -> Result<Option<Holder>> {
        if let Some(holder) = self.holder_in_the_way(resource, None)? {
            return Ok(Some(holder));
        }
        for key in resource
            .identity()?
            .keys()
            .into_iter()
            .chain(resource.subtree_keys_above()?)
        {
            if let Some(readers) = self.readers_in_way(&key, "")? {
                return Ok(Some(readers));
            }
        }
        Ok(None)
    }

    /// The live claim of another tenure that a claim of `resource` with `options`
    /// would meet in this store, read only: for an exclusive claim, a live holder
    /// of any of its keys, a live shared participant, a live subtree claim of a
    /// directory above it or of its own path, and for a subtree claim any live
    /// claim below it; for a shared claim ([`AcquireOptions::shared`]), only the
    /// exclusive ones and a waiting writer's intent. A tenure of the claimant's own
    /// session ([`AcquireOptions::session`]) is no conflict, as in
    /// [`Store::try_acquire`].
    ///
    /// For a claim made in *another* store: a caller that claimed `resource` in the
    /// store its location rule picks asks every other store the rule could have
    /// picked under another layout, after its own claim landed (write first, read
    /// second), and gives its claim back when one answers `Some` — so of two claims
    /// of one file made in two stores at once, at least one sees the other. Pinned
    /// by `cli/tests/store_location.rs` (`layout_changes`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidResource`] or [`Error::Backend`].
    ///
    /// [`AcquireOptions::shared`]: crate::AcquireOptions::shared
    /// [`AcquireOptions::session`]: crate::AcquireOptions::session
    pub fn conflict(
        &self,
        resource: &Resource,
        options: &crate::AcquireOptions,
    ) -> Result<Option<Holder>> {
        Ok(self.conflict_way(resource, options)?.map(|way| way.holder))
    }

    /// [`Store::conflict`], with what is in the way: its series and whether its
    /// holder's process provably ended (so that a claim made beside this store can
    /// fence it here, [`Store::fence_dead`]).
    pub(crate) fn conflict_way(
        &self,
        resource: &Resource,
        options: &crate::AcquireOptions,
    ) -> Result<Option<InTheWay>> {
        let secret = options
            .session
            .as_deref()
            .map(crate::proof::Secret::for_session);
        let proof = secret.map(|s| s.proof());
        let proof = proof.as_deref().unwrap_or("");
        let keys = resource.identity()?.keys();
        let chain = resource.tree_chain()?;
        if options.shared {
            let (way, _) = self.exclusive_in_way(&keys, chain.as_ref(), "", proof)?;
            return Ok(way);
        }
        for key in &keys {
            if let Some(way) = self.live_other(key, &resource.target(), "", proof, true)? {
                return Ok(Some(way));
            }
        }
        if let Some(chain) = &chain {
            let down = matches!(resource, Resource::Dir(_));
            #[cfg(feature = "planted-bugs")]
            let down = down && !crate::planted::on(&crate::planted::ELSEWHERE_NOT_DOWN);
            if let Some(way) = self.tree_conflict(chain, "", proof, down, true, false)? {
                return Ok(Some(way));
            }
        }
        Ok(None)
    }

    /// [`Store::holder`] as a claimer with `options` sees it before taking: a
    /// holder whose process provably died is not in the way when
    /// `options.dead_holder_takeover`, because the single acquire would take it
    /// over. The compositions' look-first step uses this, so a set or a slot whose
    /// holder was killed is taken over at once, as one resource is, instead of
    /// waited out for its ttl. A subtree claim of a directory above `resource` is
    /// named in [`Holder::in_the_way`], as a claim refused by it is (a breaker: a
    /// hook refusing a file inside another session's subtree said the file itself
    /// was being edited).
    pub(crate) fn holder_in_the_way(
        &self,
        resource: &Resource,
        options: Option<&crate::AcquireOptions>,
    ) -> Result<Option<Holder>> {
        let now = self.clock.wall_ms();
        let own = resource.identity()?.keys();
        let above = resource.subtree_keys_above()?;
        let own_keys = own.len();
        for (i, key) in own.into_iter().chain(above).enumerate() {
            let newest = self.read_newest(&key)?;
            if !newest.envelope().is_some_and(|e| record::is_live(&e, now)) {
                continue;
            }
            let dead = options.is_some_and(|o| o.dead_holder_takeover)
                && newest
                    .claim()
                    .and_then(|r| r.process.as_ref())
                    .is_some_and(|evidence| self.provably_dead(evidence));
            if !dead {
                let mut holder = newest.holder();
                if let Some((holder, record)) = holder.as_mut().zip(newest.claim())
                    && i >= own_keys
                {
                    let dir = std::path::PathBuf::from(&*record.label);
                    holder.in_the_way = Some(Box::new(Resource::Dir(dir)));
                }
                return Ok(holder);
            }
        }
        Ok(None)
    }
}

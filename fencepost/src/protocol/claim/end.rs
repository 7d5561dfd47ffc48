//! Ending a claim: release by its holder, break by an operator.

use crate::protocol::Store;
use crate::record::BreakNote;
use crate::{Error, Holder, Lease, Resource, Result};

/// Longest break reason, in characters: it is printed in every later message about
/// the resource.
const BREAK_REASON_MAX_CHARS: usize = 1_000;

impl Store {
    /// Releases `lease`: if its tenure still owns the newest record, writes a
    /// tombstone as newest+1 (already expired, not flushed: losing it only delays the
    /// next contender). Never deletes a record of the series and never sweeps
    /// (docs/protocol.md §3.2). Where waiters may be queued (the acquisition queued,
    /// or the backend notifies), the tombstone names the oldest live one, whose turn
    /// it is (docs/format-v1.md §3.7); tickets found gone, the tenure's own among
    /// them, are removed from the key's wait queue after the tombstone landed.
    ///
    /// A lease whose ttl ran out but that nobody superseded is released normally.
    /// The lease's other keys (an existing file's file-id key) are released first,
    /// best effort; the outcome is the primary key's.
    ///
    /// # Errors
    ///
    /// - [`Error::NotHolder`] when the newest record is not this tenure's (it was
    ///   superseded); nothing is written.
    /// - [`Error::Broken`] / [`Error::Released`] when the tenure already ended that
    ///   way.
    /// - [`Error::Backend`] when the store fails and a re-read cannot show that the
    ///   tombstone landed.
    pub fn release(&self, lease: &Lease) -> Result<()> {
        // The other keys best effort: the outcome is the primary key's, and a
        // tombstone that does not land leaves a claim that expires with its ttl.
        for held in &lease.others {
            let _ = self.release_tenure(&held.key, &lease.label, held.token, &lease.secret);
        }
        self.release_tenure_to(
            &lease.key,
            &lease.label,
            lease.token,
            &lease.secret,
            lease.queued || self.backend.notifies_changes(),
        )
    }

    /// Breaks the live lease on `resource` on purpose: the operator's recorded
    /// override. Writes, as newest+1 of each key the tenure holds, a tombstone that
    /// records `by`, the time and `reason` ([`BreakNote`]), **flushed** (a lost break
    /// would silently give the lease back to a holder who was told it is over).
    /// Returns who held it. The broken holder's next renew, release or
    /// [`Store::check_lease`] fails with [`Error::Broken`]; its token never passes
    /// [`Store::check`] again, and the next acquire gets a higher token.
    ///
    /// A break ends the tenure it saw: if that tenure ends and another begins while
    /// the break is being written, the new one is not broken.
    ///
    /// Shared holders of the resource are broken too, every live one, each in its
    /// own series (docs/design-05-subtrees-and-shared.md §4): a refusal by readers
    /// suggests this break, and a human asking for the resource wants all of them
    /// out. The holder returned is then the exclusive one, or else the first reader
    /// broken, its owner followed by how many others were broken with it (CLI
    /// `cli/tests/shared.rs::a_break_ends_every_reader`, checker `break_shared`).
    ///
    /// # Errors
    ///
    /// - [`Error::NotHeld`] when no live lease holds the resource.
    /// - [`Error::InvalidArgument`] for an empty `by` or `reason`, one with control
    ///   characters, or a reason longer than 1000 characters.
    /// - [`Error::InvalidResource`] and [`Error::Backend`] as for every operation.
    pub fn break_lease(&self, resource: &Resource, by: &str, reason: &str) -> Result<Holder> {
        let note = self.break_note(by, reason)?;
        let identity = resource.identity()?;
        // The file-id key before the path key: a holder renews its other keys first,
        // so once the file id is broken it can no longer renew either.
        let mut broken = None;
        for key in identity
            .file_id
            .iter()
            .chain(std::iter::once(&identity.key))
        {
            if let Some(holder) = self.break_key(key, &note)? {
                broken = Some(holder);
            }
        }
        // Broken through another hard link: the tenure also holds the path key of
        // the link its holder claimed, which this resource's path key is not. Break
        // that too, so the whole tenure ends — its row reads broken, and the token
        // reported is the one its holder was given, not its file-id series' own (a
        // new user's `break --file b.txt` left alice's `a.txt` passing `check`).
        // (Its path record no longer live — an acquisition still under way, which
        // will try again — is not broken, but its token is still the one named.)
        if let (Some(file_id), Some(holder)) = (&identity.file_id, &mut broken)
            && let Some((own, link)) = self.path_key_of(file_id, &holder.holder_id)?
            && own != identity.key
        {
            match self.break_key_of(&own, &note, Some(&holder.holder_id))? {
                Some(whole) => *holder = whole,
                None => {
                    if let Some(token) = self.token_in(&own, &holder.holder_id)? {
                        holder.token = token;
                    }
                }
            }
            // The lease broken is on the link its holder claimed, which the report
            // names (it named the link typed, a resource nobody held).
            holder.in_the_way = Some(Box::new(link));
        }
        let readers = self.break_readers(&identity, &note)?;
        broken.or(readers).ok_or(Error::NotHeld {
            label: resource.target(),
        })
    }

    /// Breaks every live tenure of the session tagged `session` in this store, as
    /// [`Store::break_lease`] breaks one: the operator's override for an agent
    /// that ended without releasing (its CLI crashed, so its session's end never
    /// ran, and its claims would hold for their ttl). Each series is broken only
    /// while its newest record is still that very tenure's: a tenure that ended
    /// meanwhile, and one another session began in its place, are left alone.
    /// Writing intents (`want-` series of a waiting writer) hold nothing and are
    /// left to their waiter. Returns each resource broken, as `status` names it
    /// (`lock:NAME`, `file:PATH`, …), with the holder broken there; an existing
    /// file's two series are one resource.
    ///
    /// # Errors
    ///
    /// - [`Error::NotHeld`] when the session holds nothing live in this store.
    /// - [`Error::InvalidArgument`] for `by` or `reason` as [`Store::break_lease`]
    ///   refuses them.
    /// - [`Error::Backend`] as for every operation.
    ///
    /// Pinned by the checker's `break_session` (planted bug
    /// `BREAK_SESSION_UNFILTERED`) and `cli/tests/sessions.rs`
    /// (`break_session_ends_every_claim_of_the_session_and_nothing_else`).
    pub fn break_session(
        &self,
        session: &crate::SessionTag,
        by: &str,
        reason: &str,
    ) -> Result<Vec<(String, Holder)>> {
        let note = self.break_note(by, reason)?;
        let mut broken: Vec<(String, Holder)> = Vec::new();
        for (entry, holder_id) in self.key_rows()? {
            let Some(holder_id) = holder_id else {
                continue;
            };
            if !entry.live
                || entry.session.as_ref() != Some(session)
                || entry.key.as_str().starts_with("want-")
            {
                continue;
            }
            #[cfg(feature = "planted-bugs")]
            let only = (!crate::planted::on(&crate::planted::BREAK_SESSION_UNFILTERED))
                .then_some(holder_id.as_str());
            #[cfg(not(feature = "planted-bugs"))]
            let only = Some(holder_id.as_str());
            if let Some(holder) = self.break_key_of(&entry.key, &note, only)?
                && !broken
                    .iter()
                    .any(|(resource, _)| *resource == entry.resource)
            {
                broken.push((entry.resource, holder));
            }
        }
        if broken.is_empty() {
            return Err(Error::NotHeld {
                label: format!("session {}", session.as_str()),
            });
        }
        Ok(broken)
    }

    /// The note a break records: `by` and `reason` checked (one line of printable
    /// text each, the reason at most [`BREAK_REASON_MAX_CHARS`] characters), the
    /// time now.
    fn break_note(&self, by: &str, reason: &str) -> Result<BreakNote> {
        for (what, text) in [("breaker's name", by), ("reason", reason)] {
            if text.trim().is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "the {what} is empty; say who breaks the lease and why"
                )));
            }
            if text.chars().any(char::is_control) {
                return Err(Error::InvalidArgument(format!(
                    "the {what} contains control characters; use one line of printable text"
                )));
            }
        }
        if reason.chars().count() > BREAK_REASON_MAX_CHARS {
            return Err(Error::InvalidArgument(format!(
                "the reason is longer than {BREAK_REASON_MAX_CHARS} characters; keep it to one sentence"
            )));
        }
        Ok(BreakNote {
            by: by.trim().to_string(),
            at_ms: self.clock.wall_ms(),
            reason: reason.trim().to_string(),
        })
    }

    /// The path key of the link through which tenure `holder_id` claimed the file
    /// whose file-id series is `file_id`, and that link as a resource: from the
    /// label of its newest record there (a file claim's label is its resolved
    /// path). `None` when that record is not this tenure's, or its label names no
    /// file resource.
    fn path_key_of(
        &self,
        file_id: &crate::Key,
        holder_id: &str,
    ) -> Result<Option<(crate::Key, Resource)>> {
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::FILE_ID_TOMBSTONE_IGNORED) {
            return Ok(None);
        }
        let newest = self.read_newest(file_id)?;
        Ok(match newest.decoded() {
            Some(crate::record::Decoded::Record(r)) if &*r.holder == holder_id => {
                let link = Resource::file(&*r.label);
                link.identity().ok().map(|i| (i.key, link))
            }
            _ => None,
        })
    }

    /// The token of tenure `holder_id`'s newest record in series `key`, if that
    /// record is the tenure's.
    fn token_in(&self, key: &crate::Key, holder_id: &str) -> Result<Option<u64>> {
        let newest = self.read_newest(key)?;
        Ok(match newest.decoded() {
            Some(crate::record::Decoded::Record(r)) if &*r.holder == holder_id => Some(r.token),
            _ => None,
        })
    }

    /// Breaks every live shared holder of the resource `identity` names; the first
    /// broken, its owner saying how many others were broken with it.
    fn break_readers(
        &self,
        identity: &crate::identity::Identity,
        note: &BreakNote,
    ) -> Result<Option<Holder>> {
        let mut participants: Vec<crate::Key> = Vec::new();
        for key in std::iter::once(&identity.key).chain(identity.file_id.iter()) {
            self.find_participant(&key.shares(), |participant| {
                if !participants.contains(&participant.key) {
                    participants.push(participant.key);
                }
                Ok(None::<()>)
            })?;
        }
        let mut first: Option<Holder> = None;
        let mut others = 0usize;
        for participant in &participants {
            if let Some(holder) = self.break_key(participant, note)? {
                if first.is_none() {
                    first = Some(holder);
                } else {
                    others += 1;
                }
                #[cfg(feature = "planted-bugs")]
                if crate::planted::on(&crate::planted::BREAK_FIRST_READER_ONLY) {
                    break;
                }
            }
        }
        Ok(first.map(|mut holder| {
            holder.owner = match others {
                0 => format!("{} (shared)", holder.owner),
                1 => format!("{} and 1 other reader (shared)", holder.owner),
                n => format!("{} and {n} other readers (shared)", holder.owner),
            };
            holder
        }))
    }
}

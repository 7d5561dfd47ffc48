//! Sessions: a claim by the session that already holds the resource re-enters its
//! tenure, and any process naming the session may act on it (docs/design-04-claims.md,
//! "Sessions").

use crate::proof::{LeaseHandle, Secret, SessionTag};
use crate::protocol::{AcquireOptions, Lease, Store, is_loss};
use crate::record::{self, Decoded};
use crate::{Error, Key, Resource, Result};

/// Longest session id, in characters: it is shown in `status` and in messages.
const SESSION_MAX_CHARS: usize = 256;

/// Checks a session id ([`AcquireOptions::session`]): printable, not blank, at
/// most 256 characters. It is compared exactly (no trimming or case folding): a
/// name the agent's processes agree on, usually the agent's own session id.
///
/// # Errors
///
/// [`Error::InvalidArgument`] saying what is wrong with it.
pub fn check_session(session: &str) -> Result<()> {
    let problem = if session.trim().is_empty() {
        "is empty; pass the agent's session id, a name all of its processes use"
    } else if session.chars().any(char::is_control) {
        "contains control characters; use printable characters"
    } else if session.chars().count() > SESSION_MAX_CHARS {
        "is longer than 256 characters; use a shorter name"
    } else {
        return Ok(());
    };
    Err(Error::InvalidArgument(format!("the session id {problem}")))
}

impl Store {
    /// The tenure of `session` that holds `resource` right now, as a [`Lease`]: how a
    /// later process of the session (a hook, a CLI `renew` or `release`) acts on a
    /// tenure another process of the session claimed, without its handle. Then
    /// [`Store::renew`] or [`Store::release`] it.
    ///
    /// Knowing the session id is the proof: a session tenure's secret is derived
    /// from the id (records and `status` carry only its [`SessionTag`]) ([`Secret::for_session`]), so this authorizes exactly what the tenure's
    /// handle would — renew and release *that session's* tenures — for any process
    /// that names the session. It never acts on a tenure claimed without a session
    /// or by another session, and it is not needed to `check` a token.
    ///
    /// # Errors
    ///
    /// - [`Error::NotSessionHolder`] when the newest record of the resource is not a
    ///   tenure of `session` (`newest` names the live holder, if any).
    /// - [`Error::Broken`] / [`Error::Released`] when the session's tenure already
    ///   ended that way; [`Error::Superseded`] as for [`Store::resume`].
    /// - [`Error::InvalidArgument`] for a malformed session id;
    ///   [`Error::InvalidResource`] and [`Error::Backend`] as for every operation.
    pub fn resume_session(&self, resource: &Resource, session: &str) -> Result<Lease> {
        check_session(session)?;
        let identity = resource.identity()?;
        let secret = Secret::for_session(session);
        let newest = self.read_newest(&identity.key)?;
        match newest.decoded() {
            Some(Decoded::Record(r))
                if r.session.as_ref() == Some(&SessionTag::of(session))
                    && secret.proves(r.secret_sha256.as_deref()) =>
            {
                let mut lease = self.resume(resource, &LeaseHandle::new(r.token, secret))?;
                lease.session = Some(session.to_string());
                // Another process of the session keeps the tenure (it began it):
                // renewals through this lease never cut short what that process
                // was promised (a breaker: `renew --session S --ttl 300` handed a
                // live `run`'s lease to a rival 318 ms later).
                lease.siblings = true;
                Ok(lease)
            }
            _ => {
                let now = self.clock.wall_ms();
                Err(Error::NotSessionHolder {
                    label: resource.target(),
                    session: session.to_string(),
                    newest: newest
                        .holder()
                        .filter(|_| newest.envelope().is_some_and(|e| record::is_live(&e, now)))
                        .map(Box::new),
                })
            }
        }
    }

    /// Ends `session`'s tenure in the one series `key` (a tombstone, as
    /// [`Store::release`] writes), for a series no [`Resource`] leads to any more:
    /// the file-id series of a file the session renamed or deleted after claiming it.
    /// A release through the resource rebuilds its keys from the path as it is now,
    /// so it ends the path's series and leaves that one held for its ttl, refusing
    /// the renamed file (or a new file that reuses the inode) to everyone else.
    /// `key` comes from [`Store::status`] ([`StatusEntry::key`]).
    ///
    /// Returns `true` when this call ended the tenure, `false` when the series'
    /// newest record is not a live tenure of `session` (nothing of the session's to
    /// end: another's tenure, released, broken, expired, or ended meanwhile). The
    /// proof is the session id, as for [`Store::resume_session`]; a tenure claimed
    /// without a session or by another session is never touched.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a malformed session id, [`Error::Backend`] as
    /// for every operation.
    ///
    /// Pinned by the conformance scenario `session_series_released_by_key` and
    /// `cli/tests/agent_hooks.rs::session_end_releases_a_claim_of_a_file_it_renamed`.
    ///
    /// [`StatusEntry::key`]: crate::StatusEntry::key
    pub fn release_session_series(&self, key: &Key, session: &str) -> Result<bool> {
        check_session(session)?;
        let secret = Secret::for_session(session);
        let newest = self.read_newest(key)?;
        let now = self.clock.wall_ms();
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::SERIES_RELEASE_WITHOUT_PROOF) {
            return self.planted_release_newest(key, &newest, now);
        }
        let (label, token) = match newest.decoded() {
            Some(Decoded::Record(r))
                if r.session.as_ref() == Some(&SessionTag::of(session))
                    && secret.proves(r.secret_sha256.as_deref())
                    && !r.released
                    && r.broken.is_none()
                    && record::is_live(&r.envelope(), now) =>
            {
                (r.label.to_string(), r.token)
            }
            _ => return Ok(false),
        };
        match self.release_tenure_to(key, &label, token, &secret, self.backend.notifies_changes()) {
            Ok(()) => Ok(true),
            // Ended or taken over between the read and the tombstone: not ours now.
            Err(e) if is_loss(&e) || matches!(e, Error::NotHolder { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Planted bug `SERIES_RELEASE_WITHOUT_PROOF`: a tombstone over whatever live
    /// tenure is newest, the session unasked.
    #[cfg(feature = "planted-bugs")]
    fn planted_release_newest(
        &self,
        key: &Key,
        newest: &crate::protocol::series::Newest,
        now: u64,
    ) -> Result<bool> {
        let Some(Decoded::Record(r)) = newest.decoded() else {
            return Ok(false);
        };
        if r.released || !record::is_live(&r.envelope(), now) {
            return Ok(false);
        }
        let generation = newest.generation + 1;
        let tombstone = crate::record::Record {
            generation,
            granted_at_ms: now,
            expires_at_ms: now,
            ttl_ms: 0,
            released: true,
            next: None,
            ..r.clone()
        };
        Ok(matches!(
            self.backend.create(
                key,
                generation,
                &tombstone.encode_owned(),
                crate::Durability::Unflushed
            ),
            Ok(crate::CreateOutcome::Created)
        ))
    }

    /// Ends the session's tenure `token` in the primary series of `resource`, which
    /// [`Store::resume_session`] found written around: its record is still the
    /// newest there, live, but another tenure's record is in the file's file-id
    /// series (a rival came in through a hard link of the file, replaced since the
    /// claim), so the tenure is over for good (design-01, "once fenced, fenced for
    /// good"). Without this the session's own ended tenure kept every claim of the
    /// session out — "held by" the session itself — until its ttl (a breaker; the
    /// checker's `session_fenced_reclaim`, planted bug `FENCED_SESSION_TENURE_KEPT`).
    /// Only that tenure is ended: a tombstone while its record at `token` is the
    /// newest and proves the session's secret; anything newer (a sibling's fresh
    /// claim) is left alone. Best effort: a claim that finds it still there is
    /// refused, as before.
    fn end_fenced_tenure(&self, resource: &Resource, session: &str, token: u64) {
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::FENCED_SESSION_TENURE_KEPT) {
            return;
        }
        let Ok(identity) = resource.identity() else {
            return;
        };
        // Written around by another session (or a claim without one): over for
        // good. A record of this session there is a sibling's claim, perhaps half
        // made (its path taken, its file id not yet): that race is the acquisition's
        // to settle, and ending the tenure here would undo a sibling's claim.
        let tag = SessionTag::of(session);
        let Some(file_id) = &identity.file_id else {
            return;
        };
        let by_another = self
            .read_newest(file_id)
            .is_ok_and(|newest| match newest.decoded() {
                Some(Decoded::Record(r)) => r.session.as_ref() != Some(&tag),
                Some(Decoded::Newer { .. }) => true,
                _ => false,
            });
        if !by_another {
            return;
        }
        let secret = Secret::for_session(session);
        let _ = self.release_tenure(&identity.key, &identity.label, token, &secret);
    }

    /// Re-entry: when `options.session` holds `resource` with a live tenure, that
    /// tenure renewed for `options.ttl_ms` (same token, docs/protocol.md I5);
    /// `None` when the session holds nothing live there (or lost it meanwhile), so
    /// the caller claims as usual. An expired tenure is never revived: its renewal
    /// fails and a fresh claim gets a new token.
    pub(crate) fn reenter(
        &self,
        resource: &Resource,
        options: &AcquireOptions,
    ) -> Result<Option<Lease>> {
        let Some(session) = &options.session else {
            return Ok(None);
        };
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::SESSION_HOLDER_IS_VACANCY) {
            return Ok(None);
        }
        let mut lease = match self.resume_session(resource, session) {
            Ok(lease) => lease,
            Err(Error::NotSessionHolder { .. }) => return Ok(None),
            Err(Error::Superseded { token, .. }) => {
                self.end_fenced_tenure(resource, session, token);
                return Ok(None);
            }
            Err(error) if is_loss(&error) => return Ok(None),
            Err(error) => return Err(error),
        };
        lease.ttl_ms = options.ttl_ms;
        // Never tied to this process: it did not begin the tenure and leaves it
        // held when it ends (`run`, `claim --hold`), so evidence of its life in the
        // records would hand the tenure to anyone once it exits, as a dead holder's,
        // while the session still holds it. Its renewals carry no evidence.
        lease.tied = false;
        lease.reentered = true;
        // And its renewals never end the tenure sooner than the process that
        // holds it was promised (docs/design-04-claims.md, "Sessions").
        lease.siblings = true;
        match self.renew(&mut lease) {
            Ok(()) => Ok(Some(lease)),
            Err(error) if is_loss(&error) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

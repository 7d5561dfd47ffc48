//! Sessions: a claim by the session that already holds the resource re-enters its
//! tenure, and any process naming the session may act on it (docs/design-04-claims.md,
//! "Sessions").

use crate::proof::{LeaseHandle, Secret, SessionTag};
use crate::protocol::{AcquireOptions, Lease, Store, is_loss};
use crate::record::{self, Decoded};
use crate::{Error, Resource, Result};

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

//! A tenure as its holder sees it: [`Lease`], and the non-primary keys it holds.

use std::sync::Arc;

use crate::proof::{LeaseHandle, Secret, SessionTag};
use crate::record::Record;
use crate::{Error, Key, Resource, Result};

/// One tenure: proof that the holder created the newest record of a key (of every
/// key of the resource, for an existing file: its path key and its file-id key).
///
/// The [`token`](Lease::token) is constant for the whole tenure (docs/protocol.md I5); renewals
/// move [`generation`](Lease::generation) and [`expires_at_ms`](Lease::expires_at_ms).
/// Token and generation are those of the primary key ([`Lease::key`]); the tenure's
/// records in its other keys' series carry that series' own numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub(crate) resource: Resource,
    pub(crate) key: Key,
    /// The other keys this tenure holds (an existing file's file-id key).
    pub(crate) others: Vec<HeldKey>,
    pub(crate) label: String,
    pub(crate) token: u64,
    pub(crate) generation: u64,
    pub(crate) holder_id: String,
    pub(crate) owner: String,
    pub(crate) ttl_ms: u64,
    pub(crate) granted_at_ms: u64,
    pub(crate) expires_at_ms: u64,
    /// The tenure's secret: the proof of holding (its hash is in every record).
    pub(crate) secret: Secret,
    /// This process claimed the tenure tied to its life
    /// ([`AcquireOptions::tied_to_process`]): its renewals carry this process's
    /// liveness evidence. False for a lease resumed from a handle.
    pub(crate) tied: bool,
    /// A process group whose members keep the tenure alive too, written into the
    /// evidence of its renewals ([`Keepalive::tie_to_group`]): `fencepost run`'s
    /// command.
    ///
    /// [`Keepalive::tie_to_group`]: crate::Keepalive::tie_to_group
    pub(crate) group: Option<u32>,
    /// The session id this process named for the tenure ([`AcquireOptions::session`]
    /// or [`Store::resume_session`]); `None` for a lease resumed from a handle, which
    /// knows only the tag.
    ///
    /// [`AcquireOptions::session`]: crate::AcquireOptions::session
    /// [`Store::resume_session`]: crate::Store::resume_session
    pub(crate) session: Option<String>,
    /// The tag its records carry ([`SessionTag`]), when a session claimed it.
    pub(crate) session_tag: Option<SessionTag>,
    /// This lease came from a claim that re-entered a tenure its session already
    /// held (same token, renewed), rather than starting one.
    pub(crate) reentered: bool,
    /// Another process keeps this tenure too: this lease re-entered it, or one of
    /// its renewals found the newest record written through another handle (a
    /// session's sibling, a `renew` with the handle). Its renewals then never end
    /// the tenure sooner than that newest record did (a promise made to the other
    /// process stands) and carry no liveness evidence (this process's end no
    /// longer ends the tenure): docs/design-04-claims.md, "Sessions".
    pub(crate) siblings: bool,
    /// A shared tenure ([`crate::AcquireOptions::shared`]): its series is the
    /// participant key `share-…`, its token the resource's exclusive generation when
    /// it was admitted.
    pub(crate) shared: bool,
    /// The acquisition waited in the key's wait queue: the key is contended, so
    /// the release looks for the next waiter in line and names it in its tombstone
    /// (docs/design-07-performance.md, "Who is woken: turns").
    pub(crate) queued: bool,
    /// The primary key's record at [`Lease::generation`] as this handle wrote or
    /// read it, when known: a renewal builds the next generation from it without
    /// reading the series first.
    pub(crate) written: Written,
}

impl Lease {
    /// The resource held.
    pub fn resource(&self) -> &Resource {
        &self.resource
    }
    /// The primary key: the series whose generation is the fencing token.
    pub fn key(&self) -> &Key {
        &self.key
    }
    /// Every key this tenure holds, primary first (a lock or a file that did not
    /// exist when claimed: one; an existing file: its path key and its file-id key).
    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        std::iter::once(&self.key).chain(self.others.iter().map(|held| &held.key))
    }
    /// The session id this process named for the tenure, if it claimed or resumed
    /// it through a session. Records carry only its tag ([`Lease::session_tag`]).
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }
    /// The tag of the session that claimed the tenure, as its records carry it.
    pub fn session_tag(&self) -> Option<&SessionTag> {
        self.session_tag.as_ref()
    }
    /// True when the claim that returned this lease re-entered a tenure its
    /// session already held (same token, renewed) instead of starting a new one.
    pub fn reentered(&self) -> bool {
        self.reentered
    }
    /// Names process group `group` in the liveness evidence of this lease's next
    /// renewals ([`crate::ProcessEvidence::group`]): its holder then counts as gone
    /// only once this process has ended and no process is left in the group. For a
    /// lease tied to its process; [`crate::Keepalive::tie_to_group`] sets it and
    /// renews at once.
    pub fn tie_to_group(&mut self, group: u32) {
        self.group = Some(group);
    }
    /// True for a shared tenure ([`crate::AcquireOptions::shared`]): it authorizes
    /// reading the resource, not writing it.
    pub fn shared(&self) -> bool {
        self.shared
    }
    /// The slot (from 1) of a lease on a [`Resource::Slot`]
    /// ([`crate::Store::acquire_slot`]).
    pub fn slot(&self) -> Option<u32> {
        self.resource.slot_number()
    }
    /// The label stored in its records.
    pub fn label(&self) -> &str {
        &self.label
    }
    /// The fencing token: present it to [`Store::check`](crate::Store::check) before every guarded write.
    pub fn token(&self) -> u64 {
        self.token
    }
    /// The generation of the newest record this tenure wrote.
    pub fn generation(&self) -> u64 {
        self.generation
    }
    /// The unique id of this tenure.
    pub fn holder_id(&self) -> &str {
        &self.holder_id
    }
    /// The owner name.
    pub fn owner(&self) -> &str {
        &self.owner
    }
    /// The lease duration in milliseconds.
    pub fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }
    /// When the newest record was written, milliseconds since the Unix epoch.
    pub fn granted_at_ms(&self) -> u64 {
        self.granted_at_ms
    }
    /// When the lease ends unless renewed, milliseconds since the Unix epoch.
    pub fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
    /// The handle (`<token>.<secret>`) that lets another process of the holder's
    /// act on this lease through [`Store::resume`](crate::Store::resume). Give it only to processes
    /// acting for the holder: it is the proof of holding, where the token is public.
    pub fn handle(&self) -> LeaseHandle {
        LeaseHandle::new(self.token, self.secret.clone())
    }
    /// The tenure's secret, the proof of holding (see [`Lease::handle`]).
    pub fn secret(&self) -> &Secret {
        &self.secret
    }
    /// Sets the ttl later renewals use, in milliseconds (at least 1).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for 0.
    pub fn set_ttl_ms(&mut self, ttl_ms: u64) -> Result<()> {
        if ttl_ms == 0 {
            return Err(Error::InvalidArgument(
                "ttl must be at least 1 millisecond".into(),
            ));
        }
        self.ttl_ms = ttl_ms;
        Ok(())
    }
    /// Every key of this tenure with its token in that key's series, primary first.
    pub(crate) fn tenures(&self) -> impl Iterator<Item = (&Key, u64)> {
        std::iter::once((&self.key, self.token))
            .chain(self.others.iter().map(|held| (&held.key, held.token)))
    }
}

/// A key other than the primary that a tenure holds, with that series' numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeldKey {
    pub(crate) key: Key,
    /// The generation at which this tenure began in this key's series.
    pub(crate) token: u64,
    /// The newest generation this tenure wrote in this key's series.
    pub(crate) generation: u64,
    /// The clock that record was stamped by, when this handle stamped it.
    pub(crate) stamped: Stamp,
}

/// How far the wall clock ran ahead of the monotonic clock when this handle
/// stamped a record (ms; at least that far), or `None` when it did not stamp it:
/// a renewal judges a record it stamped by that clock ([`Written`]). A cache, not
/// part of a lease's identity: any two compare equal.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stamp(pub(crate) Option<i64>);

impl Stamp {
    /// Stamped at `wall_ms` by the wall clock, `mono_before_ms` read before.
    pub(crate) fn at(wall_ms: u64, mono_before_ms: u64) -> Stamp {
        Stamp(Some(wall_ahead(wall_ms, mono_before_ms)))
    }
}

impl PartialEq for Stamp {
    fn eq(&self, _: &Stamp) -> bool {
        true
    }
}

impl Eq for Stamp {}

/// The record a lease's newest generation holds, kept so that a renewal can write
/// the next generation without reading the series first (docs/protocol.md §3.2, renew,
/// "from the record written"). A cache, not part of the lease's identity:
/// two leases of one tenure compare equal whether or not they know it.
///
/// With it, when this handle stamped that record itself, how far the wall clock
/// ran ahead of the monotonic clock as it did (ms; at least that far: both read
/// monotonic first): the renewal judges the record's end on the clock it was
/// stamped by ([`Written::stamped_ahead`]).
#[derive(Clone, Default)]
pub(crate) struct Written(pub(crate) Option<Arc<Record>>, pub(crate) Stamp);

impl Written {
    /// A record read, not stamped by this handle: its clock is unknown.
    pub(crate) fn of(record: &Record) -> Written {
        Written(Some(Arc::new(record.clone())), Stamp(None))
    }

    /// A record this handle stamped at `granted_at_ms` by the wall clock, with
    /// `mono_before_ms` read from the monotonic clock before that.
    pub(crate) fn stamped(record: Record, mono_before_ms: u64) -> Written {
        let stamp = Stamp::at(record.granted_at_ms, mono_before_ms);
        Written(Some(Arc::new(record)), stamp)
    }

    /// How far the wall clock ran ahead of the monotonic clock when this handle
    /// stamped the record (`None`: read, not stamped here).
    pub(crate) fn stamped_ahead(&self) -> Option<i64> {
        self.1.0
    }

    /// The record, when it is the one at `generation` of the tenure `token`.
    pub(crate) fn at(&self, token: u64, generation: u64) -> Option<&Record> {
        self.0
            .as_deref()
            .filter(|r| r.token == token && r.generation == generation)
    }
}

impl PartialEq for Written {
    fn eq(&self, _: &Written) -> bool {
        true
    }
}

impl Eq for Written {}

impl std::fmt::Debug for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(r) => write!(f, "Written(g{})", r.generation),
            None => f.write_str("Written(unknown)"),
        }
    }
}

/// `wall_ms − mono_ms`, saturating: how far the wall clock reads ahead of the
/// monotonic clock.
pub(crate) fn wall_ahead(wall_ms: u64, mono_ms: u64) -> i64 {
    i64::try_from(wall_ms)
        .unwrap_or(i64::MAX)
        .saturating_sub(i64::try_from(mono_ms).unwrap_or(i64::MAX))
}

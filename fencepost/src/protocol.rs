//! The lease protocol, once, generic over the backend (docs/protocol.md §3).

use std::sync::Arc;
use std::time::Duration;

use crate::backend::{CreateOutcome, Durability, LeaseStore};
use crate::clock::{Clock, SystemClock};
use crate::liveness::{Liveness, ProcessEvidence, SystemLiveness, Verdict, same_host};
use crate::proof::{LeaseHandle, Secret};
use crate::record::{self, BreakNote, Decoded, Envelope, FORMAT_VERSION, Record};
use crate::{Error, Holder, Key, Resource, Result};

/// First backoff step while waiting for a held resource, in milliseconds.
const BACKOFF_START_MS: u64 = 4;
/// Largest backoff step; keeps a handoff to a waiter within about this much of the
/// release.
const BACKOFF_CAP_MS: u64 = 64;
/// How often `read_newest` re-lists when the newest listed record vanishes before
/// it is read (a concurrent sweep); after that the vanished record counts as torn.
const VANISHED_RELIST_ATTEMPTS: usize = 8;
/// How often release retries when a concurrent create takes its generation.
const RELEASE_ATTEMPTS: usize = 8;
/// Longest break reason, in characters: it is printed in every later message about
/// the resource.
const BREAK_REASON_MAX_CHARS: usize = 1_000;
/// How many times acquire retries a claim that lapsed before it was confirmed even
/// when the wait is over: one pause (a GC, a swapped-out process) should not fail an
/// acquire with no wait, but creates that are always slower than the ttl must end.
const LAPSE_RETRIES: usize = 2;
/// How many times acquire may lose the create of one generation while the listing
/// still shows the generation below it before the backend is declared broken (it
/// says a record exists that it never lists): a bound instead of a spin.
const INVISIBLE_RECORD_LIMIT: usize = 64;
/// How long a create may take before a reader that sees it torn (in progress, or
/// cut off by a crash) treats it as abandoned, in milliseconds of the reader's
/// monotonic clock; and, symmetrically, how long an acquire's create may take
/// before the acquirer gives its claim back instead of trusting it. Readers wait
/// this out even past their own deadline, so a crash mid-create blocks a key for
/// at most this long beyond any live predecessor (design-01, "torn newest
/// record"; pinned by the checker's `lock_handover` and `torn_renewal` schedules).
pub const CREATE_GRACE_MS: u64 = 1_000;

/// How to acquire: lease duration, who is asking, and how long to wait if held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireOptions {
    /// Lease duration in milliseconds; must be at least 1.
    pub ttl_ms: u64,
    /// Human-readable holder name, stored for diagnostics.
    pub owner: String,
    /// How long to wait for a held resource, in milliseconds; 0 fails at once.
    pub wait_ms: u64,
    /// The tenure lives only as long as this process, which keeps it alive (a
    /// [`crate::Keepalive`], `fencepost run`, the MCP server): its records carry this
    /// process's [`crate::ProcessEvidence`], so a waiter on the same host may take
    /// it over as soon as the process provably ended. Default `false`: a lease
    /// meant to outlive the process that claimed it (the CLI's plain `claim`) must
    /// never look dead.
    pub tied_to_process: bool,
    /// While waiting, treat a holder whose process provably no longer runs on this
    /// host as expired (dead-holder takeover). Default `true`; `false` is pure ttl
    /// semantics.
    pub dead_holder_takeover: bool,
}

impl AcquireOptions {
    /// A ttl of `ttl_ms`, owner `fencepost`, no waiting.
    pub fn new(ttl_ms: u64) -> Self {
        AcquireOptions {
            ttl_ms,
            owner: "fencepost".into(),
            wait_ms: 0,
            tied_to_process: false,
            dead_holder_takeover: true,
        }
    }

    /// Sets [`AcquireOptions::tied_to_process`].
    pub fn tied_to_process(mut self, tied: bool) -> Self {
        self.tied_to_process = tied;
        self
    }

    /// Sets [`AcquireOptions::dead_holder_takeover`].
    pub fn dead_holder_takeover(mut self, enabled: bool) -> Self {
        self.dead_holder_takeover = enabled;
        self
    }

    /// Sets the owner name.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = owner.into();
        self
    }

    /// Sets how long to wait for a held resource, in milliseconds.
    pub fn wait_ms(mut self, wait_ms: u64) -> Self {
        self.wait_ms = wait_ms;
        self
    }
}

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
    /// The label stored in its records.
    pub fn label(&self) -> &str {
        &self.label
    }
    /// The fencing token: present it to [`Store::check`] before every guarded write.
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
    /// act on this lease through [`Store::resume`]. Give it only to processes
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
    fn tenures(&self) -> impl Iterator<Item = (&Key, u64)> {
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
}

/// Per key, what an acquisition has watched across its attempts.
#[derive(Debug, Default)]
struct Watch {
    /// (generation, monotonic ms when first seen newest) for the stagnation bound.
    watched: Option<(u64, u64)>,
    /// (generation, times in a row we lost or failed to confirm it while the listing
    /// never got past the generation below it).
    invisible: (u64, usize),
    /// The last judgement was "a create is in progress" (a torn newest record
    /// seen for less than [`CREATE_GRACE_MS`]): worth waiting for past the deadline.
    in_progress: bool,
}

/// A key's claim taken by an acquisition, with the superseded generations its
/// confirming read listed below it.
struct Taken<'k> {
    key: &'k Key,
    claim: Record,
    below: Vec<u64>,
    /// Monotonic ms read just before the claim was stamped: the claim is live for
    /// `ttl` of this clock from then, whatever the wall clock does meanwhile.
    since_mono: u64,
    /// The create took less than [`CREATE_GRACE_MS`].
    trusted: bool,
}

/// One key's outcome within an acquisition.
#[allow(clippy::large_enum_variant)] // short-lived, one per key per attempt
enum Claim {
    /// Our claim, confirmed newest (possibly lapsed), with the generations below it
    /// and the monotonic time just before it was stamped; `false` when its create
    /// took so long that a reader may have taken it for abandoned.
    Taken(Record, Vec<u64>, u64, bool),
    /// A live holder that has not stagnated.
    Held(Holder),
}

/// The outcome of [`Store::try_acquire`]: the lease, or who holds the resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TryAcquire {
    /// Acquired.
    Acquired(Lease),
    /// Held by someone else (after waiting, if a wait was given).
    Held(Holder),
}

/// What the newest record of a key says, for `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimState {
    /// A live lease.
    Held,
    /// A lease whose ttl ran out.
    Expired,
    /// Released (the newest record is a tombstone).
    Released,
    /// Broken by an operator (the newest record is a break's tombstone; see
    /// [`StatusEntry::broken`]).
    Broken,
    /// The newest record is torn or corrupt; the next acquire supersedes it.
    Unreadable,
    /// A record of a newer format version (see [`Decoded::Newer`]).
    NewerFormat,
}

/// One resource's line in [`Store::status`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StatusEntry {
    /// The resource as `claim --json` names it: `lock:NAME` or `file:PATH` (for an
    /// unreadable series, its key).
    pub resource: String,
    /// The key.
    pub key: Key,
    /// The label of the newest record (empty when unreadable).
    pub label: String,
    /// What the newest record says.
    pub state: ClaimState,
    /// True when the resource is held right now (by the liveness rule).
    pub live: bool,
    /// The newest record's token (0 when unreadable).
    pub token: u64,
    /// The newest generation.
    pub generation: u64,
    /// The owner of the newest record (empty when unknown).
    pub owner: String,
    /// The holder's process id: the process that began the tenure, whoever renewed
    /// it since (0 when unknown).
    pub pid: u32,
    /// The host the holder ran on (empty when unknown, or written by a version that
    /// did not record it).
    pub host: String,
    /// When the newest record expires, milliseconds since the Unix epoch (0 when
    /// unknown).
    pub expires_at_ms: u64,
    /// Who broke the lease, when and why, while the break's tombstone is newest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken: Option<BreakNote>,
}

impl StatusEntry {
    fn unreadable(key: &Key, generation: u64) -> Self {
        StatusEntry {
            resource: key.to_string(),
            key: key.clone(),
            label: String::new(),
            state: ClaimState::Unreadable,
            live: false,
            token: 0,
            generation,
            owner: String::new(),
            pid: 0,
            host: String::new(),
            expires_at_ms: 0,
            broken: None,
        }
    }
}

/// `lock:NAME` or `file:PATH` for a record's label under `key` (a file-id key names
/// a file too).
fn resource_of(key: &Key, label: &str) -> String {
    let kind = match key.as_str().split('-').next() {
        Some("lock") => "lock",
        _ => "file",
    };
    format!("{kind}:{label}")
}

/// A backend plus the protocol on top: acquire, check, renew, release, status,
/// sweep and keepalive.
///
/// Cheap to clone (a few `Arc`s); clones share the backend, clock and liveness probe.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Arc<dyn LeaseStore>,
    clock: Arc<dyn Clock>,
    liveness: Arc<dyn Liveness>,
    watch_interval: Duration,
}

/// How often a [`crate::Keepalive`] looks at its lease between renewals by default,
/// so a takeover or break is noticed within about this long.
pub const DEFAULT_WATCH_INTERVAL: Duration = Duration::from_millis(40);

/// The newest record of a series as read: the highest generation listed (0 for an
/// empty series), and the newest *decodable* record, by which liveness is judged.
///
/// A torn highest record only proves its generation is taken: it may be a create
/// still in progress (a renewal caught half-written), so it is never judged as a
/// vacancy over a live predecessor (docs/design-01-lease-and-fence.md, "torn newest
/// record"; pinned by the checker's `torn_renewal` schedule).
#[derive(Debug)]
struct Newest {
    generation: u64,
    /// The newest decodable record (a v1 record or a newer format) and its
    /// generation; `None` when nothing in the series decodes. Equal to `generation`
    /// unless the highest record is torn.
    judged: Option<(u64, Decoded)>,
    /// The other generations the same listing showed (all below `generation`): what a
    /// sweep above them removes, without listing again.
    below: Vec<u64>,
}

impl Newest {
    fn empty() -> Self {
        Newest {
            generation: 0,
            judged: None,
            below: Vec::new(),
        }
    }

    fn decoded(&self) -> Option<&Decoded> {
        self.judged.as_ref().map(|(_, decoded)| decoded)
    }

    /// True when the highest generation is torn (a create in progress, or a crash
    /// mid-create).
    fn top_is_torn(&self) -> bool {
        self.generation > 0
            && self
                .judged
                .as_ref()
                .is_none_or(|(g, _)| *g != self.generation)
    }

    fn envelope(&self) -> Option<Envelope> {
        match self.decoded() {
            Some(Decoded::Record(record)) if !record.released => Some(record.envelope()),
            Some(Decoded::Newer { envelope, .. }) => Some(*envelope),
            _ => None,
        }
    }

    fn holder(&self) -> Option<Holder> {
        match self.decoded() {
            Some(Decoded::Record(record)) => Some(holder_of(record)),
            Some(Decoded::Newer { v, envelope }) => Some(Holder {
                owner: format!("a writer of format v{v}"),
                holder_id: String::new(),
                pid: 0,
                token: envelope.token,
                generation: envelope.generation,
                expires_at_ms: envelope.expires_at_ms,
            }),
            _ => None,
        }
    }

    /// The newest decodable record, if it is an unreleased v1 claim.
    fn claim(&self) -> Option<&Record> {
        match self.decoded() {
            Some(Decoded::Record(record)) if !record.released => Some(record),
            _ => None,
        }
    }

    /// The highest record itself, if it is a decodable v1 record (a claim or a
    /// tombstone): what a confirming read compares with its own create.
    fn top_record(&self) -> Option<&Record> {
        match &self.judged {
            Some((g, Decoded::Record(record))) if *g == self.generation => Some(record),
            _ => None,
        }
    }

    fn token(&self) -> u64 {
        match self.decoded() {
            Some(Decoded::Record(record)) => record.token,
            Some(Decoded::Newer { envelope, .. }) => envelope.token,
            _ => 0,
        }
    }

    /// The holder id of the newest decodable record; `Some("")` for a newer format
    /// (whose holder cannot be compared, so it is never ours).
    fn holder_id(&self) -> Option<&str> {
        match self.decoded() {
            Some(Decoded::Record(record)) => Some(record.holder.as_str()),
            Some(Decoded::Newer { .. }) => Some(""),
            _ => None,
        }
    }
}

/// How the tenure of `record` (already matched by token and proof) ended, if its
/// record is a tombstone: broken by an operator, or released by a holder of its
/// secret.
fn ended(record: &Record, label: &str) -> Option<Error> {
    if !record.released {
        return None;
    }
    Some(match &record.broken {
        Some(note) => Error::Broken {
            label: label.to_string(),
            token: record.token,
            note: note.clone(),
        },
        None => Error::Released {
            label: label.to_string(),
            token: record.token,
        },
    })
}

fn holder_of(record: &Record) -> Holder {
    Holder {
        owner: record.owner.clone(),
        holder_id: record.holder.clone(),
        pid: record.pid,
        token: record.token,
        generation: record.generation,
        expires_at_ms: record.expires_at_ms,
    }
}

impl Store {
    /// The protocol over `backend`, with the system clock.
    pub fn new(backend: impl LeaseStore + 'static) -> Self {
        Self::with_clock(backend, SystemClock::new())
    }

    /// The protocol over `backend`, with an injected clock (tests step it).
    pub fn with_clock(backend: impl LeaseStore + 'static, clock: impl Clock + 'static) -> Self {
        Self::from_parts(Arc::new(backend), Arc::new(clock))
    }

    /// The protocol over an already shared backend and clock.
    pub fn from_parts(backend: Arc<dyn LeaseStore>, clock: Arc<dyn Clock>) -> Self {
        Store {
            backend,
            clock,
            liveness: Arc::new(SystemLiveness),
            watch_interval: DEFAULT_WATCH_INTERVAL,
        }
    }

    /// The same store with another liveness probe (tests and model checks decide
    /// which processes are dead).
    pub fn with_liveness(mut self, liveness: impl Liveness + 'static) -> Self {
        self.liveness = Arc::new(liveness);
        self
    }

    /// The same store with another watch interval for keepalives (at least 1 ms):
    /// shorter notices a loss sooner, longer reads the backend less often.
    pub fn with_watch_interval(mut self, interval: Duration) -> Self {
        self.watch_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// How often a keepalive looks at its lease between renewals.
    pub fn watch_interval(&self) -> Duration {
        self.watch_interval
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn LeaseStore> {
        &self.backend
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Acquires `resource`, waiting up to `options.wait_ms` while it is held.
    ///
    /// Creates generation newest+1 with token = that generation, flushed; confirms
    /// the record is the newest and still live before returning (a caller paused
    /// between create and return never gets an expired lease); then sweeps older
    /// records. While waiting, backs off with jitter, and treats a newest record that
    /// stayed newest for a full ttl of this process's monotonic clock as expired (the
    /// stagnation bound of docs/protocol.md §3.4).
    ///
    /// # Errors
    ///
    /// - [`Error::Held`] when a live lease of someone else outlasted the wait.
    /// - [`Error::InvalidArgument`] for a ttl of 0; [`Error::InvalidResource`] for a
    ///   resource without a key.
    /// - [`Error::Backend`] when the store fails. If the failure came after a create
    ///   that may have landed, the series is re-read and a landed claim of ours is
    ///   given up with a tombstone (docs/protocol.md I4): an unconfirmed claim is never handed out.
    pub fn acquire(&self, resource: &Resource, options: &AcquireOptions) -> Result<Lease> {
        match self.try_acquire(resource, options)? {
            TryAcquire::Acquired(lease) => Ok(lease),
            TryAcquire::Held(holder) => Err(Error::Held {
                label: resource.target(),
                holder,
            }),
        }
    }

    /// Like [`Store::acquire`], but a resource still held when the wait ends is
    /// reported as [`TryAcquire::Held`] with its holder instead of as an error.
    ///
    /// # Errors
    ///
    /// As [`Store::acquire`], except [`Error::Held`].
    pub fn try_acquire(&self, resource: &Resource, options: &AcquireOptions) -> Result<TryAcquire> {
        self.try_acquire_observed(resource, options, &mut |_, _| {})
    }

    /// Like [`Store::try_acquire`], and calls `on_wait(holder, waited_ms)` each time
    /// it is about to back off because `holder` holds the resource (`waited_ms`: how
    /// long this call has waited so far, by the monotonic clock). For progress
    /// displays; it decides nothing.
    ///
    /// # Errors
    ///
    /// As [`Store::try_acquire`].
    pub fn try_acquire_observed(
        &self,
        resource: &Resource,
        options: &AcquireOptions,
        on_wait: &mut dyn FnMut(&Holder, u64),
    ) -> Result<TryAcquire> {
        if options.ttl_ms == 0 {
            return Err(Error::InvalidArgument(
                "ttl must be at least 1 millisecond".into(),
            ));
        }
        let identity = resource.identity()?;
        let keys = identity.keys();
        let holder_id = new_holder_id(&options.owner);
        // One secret per tenure, whatever the number of keys and attempts: its hash
        // in every record of the tenure is the proof of holding.
        let secret = Secret::generate();
        let proof = secret.sha256();
        let started = self.clock.monotonic_ms();
        let deadline = started.saturating_add(options.wait_ms);
        let mut backoff_ms = BACKOFF_START_MS;
        let mut lapses = 0;
        let mut watches: Vec<Watch> = keys.iter().map(|_| Watch::default()).collect();
        loop {
            // Several keys (an existing file: path and file id): look before taking
            // anything, so a waiter does not write and tombstone claims every round.
            let mut held = None;
            if keys.len() > 1 {
                for (key, watch) in keys.iter().zip(&mut watches) {
                    let newest = self.read_newest(key)?;
                    held = self.live_holder(&newest, watch, options);
                    if held.is_some() {
                        break;
                    }
                }
            }
            // Take every key in sorted order; a key found held part-way gives back
            // the ones already taken, so a failure leaves nothing held.
            let mut taken: Vec<Taken> = Vec::new();
            if held.is_none() {
                for (key, watch) in keys.iter().zip(&mut watches) {
                    match self.claim_key(key, &identity.label, &holder_id, &proof, options, watch) {
                        Ok(Claim::Taken(claim, below, since_mono, trusted)) => taken.push(Taken {
                            key,
                            claim,
                            below,
                            since_mono,
                            trusted,
                        }),
                        Ok(Claim::Held(holder)) => {
                            held = Some(holder);
                            break;
                        }
                        Err(error) => {
                            self.give_back(&taken, &secret);
                            return Err(error);
                        }
                    }
                }
            }
            if held.is_none() {
                // Sweep before the final liveness check, not after: a sweep that
                // stalls (a slow disk, an etcd member without a leader) must not
                // hand out a lease that expired meanwhile (docs/protocol.md §3; found by the
                // etcd cluster test).
                for t in &taken {
                    self.sweep_after_claim(t.key, t.claim.generation, &t.below);
                }
            }
            // "Still live after my create" on the monotonic clock from before the
            // stamp: a wall-clock step during a stalled call cannot make a claim a
            // rival already superseded look live (design-01, "confirm on monotonic
            // time"; pinned by the checker's `clock_step_acquire` schedule).
            let mono = self.clock.monotonic_ms();
            let all_live = taken
                .iter()
                .all(|t| t.trusted && mono.saturating_sub(t.since_mono) < options.ttl_ms);
            if held.is_none() && all_live {
                return Ok(TryAcquire::Acquired(self.confirmed_lease(
                    resource, identity, taken, holder_id, secret, options,
                )));
            }
            self.give_back(&taken, &secret);
            let mono = self.clock.monotonic_ms();
            let Some(holder) = held else {
                // Our claims lapsed before they were confirmed (a pause, or creates
                // slower than the ttl): retry with backoff until the deadline, never
                // in a tight loop that writes a record per pass.
                lapses += 1;
                if mono >= deadline && lapses > LAPSE_RETRIES {
                    return Err(Error::ClaimLapsed {
                        label: resource.target(),
                        ttl_ms: options.ttl_ms,
                    });
                }
                let step = self
                    .jittered(backoff_ms)
                    .min(deadline.saturating_sub(mono))
                    .max(1);
                self.clock.sleep(Duration::from_millis(step));
                backoff_ms = (backoff_ms * 2).min(BACKOFF_CAP_MS);
                continue;
            };
            // A create in progress is waited out even past the deadline: it ends
            // within CREATE_GRACE_MS (completed, or taken for abandoned).
            let in_progress = watches.iter().any(|w| w.in_progress);
            if mono >= deadline && !in_progress {
                return Ok(TryAcquire::Held(holder));
            }
            on_wait(&holder, mono.saturating_sub(started));
            let step = self
                .jittered(backoff_ms)
                .min(deadline.saturating_sub(mono).max(BACKOFF_START_MS))
                .max(1);
            self.clock.sleep(Duration::from_millis(step));
            backoff_ms = (backoff_ms * 2).min(BACKOFF_CAP_MS);
        }
    }

    /// Uniform in `[step/2, step]`: waiters that started together spread out.
    fn jittered(&self, step_ms: u64) -> u64 {
        let half = step_ms / 2;
        half + self.clock.random_u64() % (step_ms - half + 1)
    }

    /// The lease for claims confirmed (and swept below) on every key of `identity`.
    fn confirmed_lease(
        &self,
        resource: &Resource,
        identity: crate::Identity,
        taken: Vec<Taken>,
        holder_id: String,
        secret: Secret,
        options: &AcquireOptions,
    ) -> Lease {
        let mut primary = None;
        let mut others = Vec::new();
        for Taken { key, claim, .. } in taken {
            if *key == identity.key {
                primary = Some(claim);
            } else {
                others.push(HeldKey {
                    key: key.clone(),
                    token: claim.token,
                    generation: claim.generation,
                });
            }
        }
        let claim = primary.expect("the primary key is among the keys taken");
        Lease {
            resource: resource.clone(),
            key: identity.key,
            others,
            label: identity.label,
            token: claim.token,
            generation: claim.generation,
            holder_id,
            owner: options.owner.clone(),
            ttl_ms: options.ttl_ms,
            granted_at_ms: claim.granted_at_ms,
            expires_at_ms: claim.expires_at_ms,
            secret,
            tied: options.tied_to_process,
        }
    }

    /// Releases claims taken by an acquisition that cannot complete, best effort: a
    /// tombstone that fails to land leaves a claim that expires with its ttl, as a
    /// crashed holder's would.
    fn give_back(&self, taken: &[Taken], secret: &Secret) {
        for Taken { key, claim, .. } in taken {
            let _ = self.release_tenure(key, &claim.label, claim.token, secret);
        }
    }

    /// The holder of `newest` if it is live and has not stagnated: the same newest
    /// record seen for a full ttl of this process's monotonic clock counts as
    /// expired (the stagnation bound of docs/protocol.md §3.4). A torn newest record
    /// is a create in progress for [`CREATE_GRACE_MS`] (see [`Watch::in_progress`]).
    fn live_holder(
        &self,
        newest: &Newest,
        watch: &mut Watch,
        options: &AcquireOptions,
    ) -> Option<Holder> {
        watch.in_progress = false;
        let mono = self.clock.monotonic_ms();
        let first_seen = match watch.watched {
            Some((generation, since)) if generation == newest.generation => since,
            _ => {
                watch.watched = Some((newest.generation, mono));
                mono
            }
        };
        let watched_for = mono.saturating_sub(first_seen);
        #[cfg(feature = "planted-bugs")]
        let planted_vacancy = crate::planted::on(&crate::planted::TORN_NEWEST_IS_VACANCY);
        #[cfg(not(feature = "planted-bugs"))]
        let planted_vacancy = false;
        if newest.top_is_torn() && planted_vacancy {
            return None;
        }
        let live = newest
            .envelope()
            .filter(|e| record::is_live(e, self.clock.wall_ms()));
        // Dead-holder takeover: the holder's process is gone, so its record is
        // treated as expired. Safe only because the fence refuses its token from
        // our claim on (docs/design-01-lease-and-fence.md).
        let dead = options.dead_holder_takeover
            && newest
                .claim()
                .and_then(|r| r.process.as_ref())
                .is_some_and(|evidence| self.provably_dead(evidence));
        if let Some(envelope) = live.filter(|_| !dead) {
            let record_ttl = newest.claim().map(|r| r.ttl_ms).unwrap_or(
                envelope
                    .expires_at_ms
                    .saturating_sub(envelope.granted_at_ms),
            );
            if watched_for < record_ttl {
                return Some(newest.holder().expect("a live record has a holder"));
            }
        }
        // A torn newest record is a create that may still be in progress: it only
        // proves its generation is taken. Wait it out for CREATE_GRACE_MS; a
        // creator whose create took that long gives its claim back, so taking over
        // after that is safe.
        if newest.top_is_torn() && watched_for < CREATE_GRACE_MS {
            watch.in_progress = true;
            return Some(Holder {
                owner: "a claim still being written".into(),
                holder_id: String::new(),
                pid: 0,
                token: 0,
                generation: newest.generation,
                expires_at_ms: 0,
            });
        }
        None
    }

    /// True only when `evidence` names a process of this host and boot that the
    /// liveness probe says definitely no longer runs; every doubt is `false`.
    fn provably_dead(&self, evidence: &ProcessEvidence) -> bool {
        self.liveness
            .this_process()
            .is_some_and(|ours| same_host(evidence, &ours))
            && self.liveness.verdict(evidence) == Verdict::Gone
    }

    /// Claims one key without waiting: creates generation newest+1 (token = that
    /// generation), flushed, and confirms it is the newest and live; or reports the
    /// live holder.
    fn claim_key(
        &self,
        key: &Key,
        label: &str,
        holder_id: &str,
        proof: &str,
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
            let claim = Record {
                v: FORMAT_VERSION,
                key: key.to_string(),
                label: label.to_string(),
                token: generation,
                generation,
                holder: holder_id.to_string(),
                owner: options.owner.clone(),
                pid: std::process::id(),
                host: crate::host_name().to_string(),
                granted_at_ms,
                expires_at_ms: granted_at_ms.saturating_add(options.ttl_ms),
                ttl_ms: options.ttl_ms,
                released: false,
                secret_sha256: Some(proof.to_string()),
                broken: None,
                process: if options.tied_to_process {
                    self.liveness.this_process()
                } else {
                    None
                },
            };
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
            let trusted = self.clock.monotonic_ms().saturating_sub(since_mono) < CREATE_GRACE_MS;

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
                    .is_some_and(|r| !r.released && r.holder == holder_id);
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

    /// True only if `token` is the token of the newest record of `resource`'s
    /// (primary) series and that record is live (docs/protocol.md I3). A superseded, released or
    /// expired token returns false, as does any token when the newest record is
    /// unreadable.
    ///
    /// For an existing file it also reads the series of its file-id key: a live
    /// record there of another tenure (a rival that claimed the file through another
    /// hard link) makes the check false. A file-id series that is free — the file was
    /// created after the claim, or its inode changed — does not.
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
        let Some(file_id) = identity.file_id.filter(|_| current) else {
            return Ok(current);
        };
        let holder = newest.claim().map(|r| r.holder.as_str()).unwrap_or("");
        Ok(self.fenced_by(&file_id, holder)?.is_none())
    }

    /// The holder of the newest decodable record of `file_id` (the file's identity
    /// as it is now) when it is another tenure than `holder_id`, live or not: a
    /// rival came in through another hard link, or the file was replaced and
    /// someone claimed the new one. Such a tenure is fenced for good (design-01,
    /// "once fenced, fenced for good"; pinned by the checker's `hard_link_revival`
    /// and `rename_revival` schedules). An empty series, or one with only torn
    /// records, fences nothing; a newer-format record always does (its holder
    /// cannot be compared).
    fn fenced_by(&self, file_id: &Key, holder_id: &str) -> Result<Option<Holder>> {
        let newest = self.read_newest(file_id)?;
        Ok(match newest.holder_id() {
            Some(h) if h != holder_id || h.is_empty() => newest.holder(),
            _ => None,
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
                Some(Decoded::Record(_) | Decoded::Newer { .. }) => Error::Superseded {
                    label: lease.label.clone(),
                    token: lease.token,
                    by_token: newest.token(),
                },
                Some(Decoded::Torn(_)) | None => continue,
            };
            return Some(lost);
        }
        None
    }

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
        let evidence = if lease.tied {
            self.liveness.this_process()
        } else {
            None
        };
        // The other keys first: if one of them is lost, the primary is left to expire
        // rather than renewed for a lease that no longer holds the whole file.
        let others = self.renew_others(lease, &evidence)?;
        let renewed = match self.renew_tenure(
            &lease.key,
            &lease.label,
            lease.token,
            &lease.secret,
            lease.ttl_ms,
            evidence,
        ) {
            Ok(renewed) => renewed,
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
            return Err(Error::Expired {
                label: lease.label.clone(),
                token: lease.token,
                expired_at_ms: renewed.expires_at_ms,
            });
        }
        lease.others = others;
        lease.generation = renewed.generation;
        lease.granted_at_ms = renewed.granted_at_ms;
        lease.expires_at_ms = renewed.expires_at_ms;
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
        let renew = |h: &HeldKey| -> Result<HeldKey> {
            let r = self.renew_tenure(
                &h.key,
                &lease.label,
                h.token,
                &lease.secret,
                lease.ttl_ms,
                evidence.clone(),
            )?;
            Ok(HeldKey {
                generation: r.generation,
                ..h.clone()
            })
        };
        // The identity cannot be resolved now (a directory vanished): keep renewing
        // what is held rather than losing the lease over a lookup.
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
            label: lease.label.clone(),
            token: lease.token,
            by_token: newest.token(),
        };
        for _ in 0..RELEASE_ATTEMPTS {
            let newest = self.read_settled(key)?;
            if let Some(r) = newest
                .claim()
                .filter(|r| lease.secret.proves(r.secret_sha256.as_deref()))
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
                key: key.to_string(),
                label: lease.label.clone(),
                token: generation,
                generation,
                holder: lease.holder_id.clone(),
                owner: lease.owner.clone(),
                pid: std::process::id(),
                host: crate::host_name().to_string(),
                granted_at_ms: now,
                expires_at_ms: now.saturating_add(lease.ttl_ms),
                ttl_ms: lease.ttl_ms,
                released: false,
                secret_sha256: Some(lease.secret.sha256()),
                broken: None,
                // The same evidence as the tenure's renewals.
                process: evidence.clone(),
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
                    .is_some_and(|r| r.holder == lease.holder_id)
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
                let now = self.clock.wall_ms();
                return Err(Error::NotHolder {
                    label,
                    token,
                    newest: newest
                        .holder()
                        .filter(|_| newest.envelope().is_some_and(|e| record::is_live(&e, now))),
                });
            }
        };
        let mut others = Vec::new();
        if let Some(file_id) = &identity.file_id {
            // The tenure's record in the file-id series, if it has one (not when the
            // file was created after the claim); a live rival there is a takeover.
            let newest = self.read_newest(file_id)?;
            match newest.claim() {
                Some(held) if secret.proves(held.secret_sha256.as_deref()) => {
                    others.push(HeldKey {
                        key: file_id.clone(),
                        token: held.token,
                        generation: held.generation,
                    });
                }
                _ => {
                    if let Some(rival) = self.fenced_by(file_id, &record.holder)? {
                        return Err(Error::Superseded {
                            label,
                            token,
                            by_token: rival.token,
                        });
                    }
                }
            }
        }
        Ok(Lease {
            resource: resource.clone(),
            key: identity.key,
            others,
            label: record.label.clone(),
            token,
            generation: record.generation,
            holder_id: record.holder.clone(),
            owner: record.owner.clone(),
            ttl_ms: record.ttl_ms,
            granted_at_ms: record.granted_at_ms,
            expires_at_ms: record.expires_at_ms,
            secret: secret.clone(),
            tied: false,
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
                    return Err(Error::Superseded {
                        label: lease.label.clone(),
                        token: lease.token,
                        by_token: newest.token(),
                    });
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
        if let Some(file_id) = lease.resource.identity()?.file_id
            && !lease.others.iter().any(|held| held.key == file_id)
            && let Some(rival) = self.fenced_by(&file_id, &lease.holder_id)?
        {
            return Err(Error::Superseded {
                label: lease.label.clone(),
                token: lease.token,
                by_token: rival.token,
            });
        }
        Ok(())
    }

    /// The live holder of `resource`, if any: the newest record of any of its keys
    /// that is live (for an existing file, its path key or its file-id key). For a
    /// mediated write with a lock, which a file lease always overrides.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidResource`] or [`Error::Backend`].
    pub fn holder(&self, resource: &Resource) -> Result<Option<Holder>> {
        let now = self.clock.wall_ms();
        for key in resource.identity()?.keys() {
            let newest = self.read_newest(&key)?;
            if newest.envelope().is_some_and(|e| record::is_live(&e, now)) {
                return Ok(newest.holder());
            }
        }
        Ok(None)
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
    /// # Errors
    ///
    /// - [`Error::NotHeld`] when no live lease holds the resource.
    /// - [`Error::InvalidArgument`] for an empty `by` or `reason`, one with control
    ///   characters, or a reason longer than 1000 characters.
    /// - [`Error::InvalidResource`] and [`Error::Backend`] as for every operation.
    pub fn break_lease(&self, resource: &Resource, by: &str, reason: &str) -> Result<Holder> {
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
        let identity = resource.identity()?;
        let note = BreakNote {
            by: by.trim().to_string(),
            at_ms: self.clock.wall_ms(),
            reason: reason.trim().to_string(),
        };
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
        broken.ok_or(Error::NotHeld {
            label: resource.target(),
        })
    }

    /// Breaks the live tenure newest in `key`, if there is one; returns its holder.
    fn break_key(&self, key: &Key, note: &BreakNote) -> Result<Option<Holder>> {
        let now = self.clock.wall_ms();
        let first = self.read_newest(key)?;
        let target = match first.decoded() {
            Some(Decoded::Record(r)) if !r.released && record::is_live(&r.envelope(), now) => {
                r.clone()
            }
            Some(Decoded::Newer { v, envelope }) if record::is_live(envelope, now) => {
                return Err(Error::InvalidArgument(format!(
                    "the lease on {key} was written by a newer fencepost (format v{v}); break it with that version"
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
            match self
                .backend
                .create(key, generation, &tombstone.encode(), Durability::Flushed)
            {
                Ok(CreateOutcome::Created) => return Ok(Some(holder_of(&target))),
                // A renewal (or release) landed first: look again.
                Ok(CreateOutcome::AlreadyExists) => newest = self.read_newest(key)?,
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

    /// `evidence`: what the renewal records as its keeper's liveness evidence. The
    /// keeper of a tied tenure (the process that claimed it) passes its own; a
    /// renewal through a resumed handle (another process keeping the lease alive)
    /// passes none: the lease no longer lives and dies with the claimer, so it must
    /// not be taken over when that process ends.
    fn renew_tenure(
        &self,
        key: &Key,
        label: &str,
        token: u64,
        secret: &Secret,
        ttl_ms: u64,
        evidence: Option<ProcessEvidence>,
    ) -> Result<Record> {
        let newest = self.read_settled(key)?;
        let superseded = |newest: &Newest| Error::Superseded {
            label: label.to_string(),
            token,
            by_token: newest.token(),
        };
        let ours = |r: &Record| r.token == token && secret.proves(r.secret_sha256.as_deref());
        let current = match newest.decoded() {
            Some(Decoded::Record(r)) if ours(r) => r,
            _ => return Err(superseded(&newest)),
        };
        if let Some(ended) = ended(current, label) {
            return Err(ended);
        }
        let since_mono = self.clock.monotonic_ms();
        let now = self.clock.wall_ms();
        let expired = || Error::Expired {
            label: label.to_string(),
            token,
            expired_at_ms: current.expires_at_ms,
        };
        if !record::is_live(&current.envelope(), now) {
            return Err(expired());
        }
        // How long the renewed record stays live from now, by this clock; capped at
        // its ttl (a clock that stepped back makes expiry unknowable, not longer).
        let remaining_ms = current
            .expires_at_ms
            .saturating_sub(now)
            .min(current.ttl_ms);
        let generation = next_generation(key, newest.generation)?;
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
        let late = self.clock.monotonic_ms().saturating_sub(since_mono) >= remaining_ms;
        #[cfg(feature = "planted-bugs")]
        let late = late && !crate::planted::on(&crate::planted::RENEW_SKIPS_POST_CREATE_CHECK);
        if late {
            if !matches!(created, Ok(CreateOutcome::AlreadyExists)) {
                self.give_up_if_landed(key, generation, &current.holder);
            }
            return Err(expired());
        }
        let created = created?;
        let confirmed = self.read_newest(key)?;
        if created == CreateOutcome::Created && confirmed.generation == generation {
            // A renewal is a durable claim of ours that became the newest: the same
            // moment acquire sweeps (docs/protocol.md §3.6). Without it a lease kept
            // alive for hours piles up thousands of records that every read lists
            // (found by the benchmark).
            self.sweep_after_claim(key, generation, &confirmed.below);
            // As acquire: a renewal that stalled after landing (in its confirming
            // read or sweep) until its own ttl ran out is not handed back as live
            // (found by the interleaving checker, schedule `lock_handover`).
            if self.clock.monotonic_ms().saturating_sub(since_mono) >= ttl_ms {
                return Err(expired());
            }
            return Ok(renewal);
        }
        // Lost the create, or something landed above ours: if the newest record is
        // still this same tenure, live (a concurrent renewal of it by the CLI, the
        // server or another keepalive), the lease is renewed, not superseded.
        let now = self.clock.wall_ms();
        match confirmed.decoded() {
            Some(Decoded::Record(r)) if ours(r) => match ended(r, label) {
                Some(ended) => Err(ended),
                None if record::is_live(&r.envelope(), now) => Ok(r.clone()),
                None => Err(superseded(&confirmed)),
            },
            _ => Err(superseded(&confirmed)),
        }
    }

    /// Releases `lease`: if its tenure still owns the newest record, writes a
    /// tombstone as newest+1 (already expired, not flushed: losing it only delays the
    /// next contender). Never deletes a record and never sweeps (docs/protocol.md §3.2).
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
        self.release_tenure(&lease.key, &lease.label, lease.token, &lease.secret)
    }

    fn release_tenure(&self, key: &Key, label: &str, token: u64, secret: &Secret) -> Result<()> {
        for _ in 0..RELEASE_ATTEMPTS {
            let newest = self.read_settled(key)?;
            let current = match newest.decoded() {
                Some(Decoded::Record(r))
                    if r.token == token && secret.proves(r.secret_sha256.as_deref()) =>
                {
                    if let Some(ended) = ended(r, label) {
                        return Err(ended);
                    }
                    r
                }
                _ => {
                    let now = self.clock.wall_ms();
                    return Err(Error::NotHolder {
                        label: label.to_string(),
                        token,
                        newest: newest.holder().filter(|_| {
                            newest.envelope().is_some_and(|e| record::is_live(&e, now))
                        }),
                    });
                }
            };
            let generation = next_generation(key, newest.generation)?;
            let now = self.clock.wall_ms();
            let tombstone = Record {
                generation,
                granted_at_ms: now,
                expires_at_ms: now,
                ttl_ms: 0,
                released: true,
                ..current.clone()
            };
            match self
                .backend
                .create(key, generation, &tombstone.encode(), Durability::Unflushed)
            {
                Ok(CreateOutcome::Created) => {
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
                    let landed = self.read_newest(key).ok().is_some_and(|n| {
                        n.generation == generation
                            && n.top_record()
                                .is_some_and(|r| r.released && r.holder == current.holder)
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

    /// Every resource in the store with what its newest record says, one entry per
    /// resource, sorted by label then key.
    ///
    /// An existing file's tenure holds two series (its path key and its file-id key);
    /// the file-id series is shown only when it says something the path series does
    /// not: a live tenure there that no shown path entry holds. File-id series of
    /// replaced files, and ones whose tenure the path entry already shows, are left
    /// out, so one claimed file is one line.
    ///
    /// # Errors
    ///
    /// [`Error::Backend`] when the store cannot be listed.
    pub fn status(&self) -> Result<Vec<StatusEntry>> {
        let mut entries = Vec::new();
        // File-id keys are decided once every path key is seen.
        let mut file_ids = Vec::new();
        let mut shown_holders = std::collections::HashSet::new();
        for (entry, holder) in self.key_rows()? {
            if entry.key.as_str().starts_with("inode-") {
                file_ids.push((entry, holder));
            } else {
                if let Some(holder) = holder.filter(|_| entry.live) {
                    shown_holders.insert(holder);
                }
                entries.push(entry);
            }
        }
        for (entry, holder) in file_ids {
            let shown = holder.as_ref().is_some_and(|h| shown_holders.contains(h));
            if (entry.live && !shown) || entry.state == ClaimState::Unreadable {
                entries.push(entry);
            }
        }
        entries.sort_by(|a, b| (&a.label, &a.key).cmp(&(&b.label, &b.key)));
        Ok(entries)
    }

    /// Every key in the store with what its newest record says, one entry per key
    /// (an existing file's path key and file-id key apart), sorted by label then key:
    /// the raw view behind [`Store::status`], for tests and tools that inspect series.
    ///
    /// # Errors
    ///
    /// [`Error::Backend`] when the store cannot be listed.
    pub fn key_status(&self) -> Result<Vec<StatusEntry>> {
        let mut entries: Vec<StatusEntry> = self
            .key_rows()?
            .into_iter()
            .map(|(entry, _)| entry)
            .collect();
        entries.sort_by(|a, b| (&a.label, &a.key).cmp(&(&b.label, &b.key)));
        Ok(entries)
    }

    /// Each key's entry and the holder id of its newest record, when it has one.
    fn key_rows(&self) -> Result<Vec<(StatusEntry, Option<String>)>> {
        let now = self.clock.wall_ms();
        let mut rows = Vec::new();
        for key in self.backend.keys()? {
            // One unreadable series (permissions, a broken key directory) is shown as
            // unreadable rather than failing the listing of every other key.
            let Ok(newest) = self.read_newest(&key) else {
                rows.push((StatusEntry::unreadable(&key, 0), None));
                continue;
            };
            if newest.generation == 0 {
                continue;
            }
            // A torn highest record over a live claim is that holder's create in
            // progress: shown as held by the claim below it.
            let live_below =
                newest.top_is_torn() && newest.envelope().is_some_and(|e| record::is_live(&e, now));
            let decoded = if newest.top_is_torn() && !live_below {
                None
            } else {
                newest.decoded()
            };
            let (entry, holder) = match decoded {
                Some(Decoded::Record(r)) => {
                    let live = !r.released && record::is_live(&r.envelope(), now);
                    let entry = StatusEntry {
                        resource: resource_of(&key, &r.label),
                        key: key.clone(),
                        label: r.label.clone(),
                        state: if r.broken.is_some() {
                            ClaimState::Broken
                        } else if r.released {
                            ClaimState::Released
                        } else if live {
                            ClaimState::Held
                        } else {
                            ClaimState::Expired
                        },
                        live,
                        token: r.token,
                        generation: newest.generation,
                        owner: r.owner.clone(),
                        pid: r.pid,
                        host: r.host.clone(),
                        expires_at_ms: r.expires_at_ms,
                        broken: r.broken.clone(),
                    };
                    (entry, Some(r.holder.clone()))
                }
                Some(Decoded::Newer { envelope, .. }) => (
                    StatusEntry {
                        resource: key.to_string(),
                        key: key.clone(),
                        label: String::new(),
                        state: ClaimState::NewerFormat,
                        live: record::is_live(envelope, now),
                        token: envelope.token,
                        generation: newest.generation,
                        owner: String::new(),
                        pid: 0,
                        host: String::new(),
                        expires_at_ms: envelope.expires_at_ms,
                        broken: None,
                    },
                    None,
                ),
                _ => (StatusEntry::unreadable(&key, newest.generation), None),
            };
            rows.push((entry, holder));
        }
        Ok(rows)
    }

    /// Removes the superseded records of `resource`'s series that lie below its newest
    /// *claim* (a flushed record); returns how many were removed. The newest record,
    /// and any tombstone above the newest claim, are kept: a lost unflushed tombstone
    /// plus a surviving removal must never empty the series (docs/protocol.md §3.6).
    ///
    /// Acquire already sweeps after each confirmed claim; this is for tidying by hand.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidResource`] or [`Error::Backend`] when the series cannot be
    /// listed or read. Individual removals are best effort.
    pub fn sweep(&self, resource: &Resource) -> Result<usize> {
        let mut removed = 0;
        for key in resource.identity()?.keys() {
            removed += self.sweep_key(&key)?;
        }
        Ok(removed)
    }

    fn sweep_key(&self, key: &Key) -> Result<usize> {
        let key = key.clone();
        let mut generations = self.backend.generations(&key)?;
        generations.sort_unstable_by(|a, b| b.cmp(a));
        for generation in generations {
            if let Some(bytes) = self.backend.read(&key, generation)?
                && let Decoded::Record(r) = record::decode(&bytes, key.as_str(), generation)
                && !r.released
            {
                return Ok(self.sweep_below(&key, generation));
            }
        }
        Ok(0)
    }

    /// Removes every record of `key` below `generation`, best effort; returns how
    /// many removals succeeded.
    fn sweep_below(&self, key: &Key, generation: u64) -> usize {
        let Ok(generations) = self.backend.generations(key) else {
            return 0;
        };
        let below: Vec<u64> = generations
            .into_iter()
            .filter(|g| *g < generation)
            .collect();
        self.remove_generations(key, &below)
    }

    /// The sweep right after a durable claim of ours (generation `claimed`) was
    /// confirmed newest: removes the generations the confirming read listed below
    /// it, without listing again (design-01, "sweep reuses the confirming listing").
    /// A backend whose listing is not a snapshot is never swept.
    fn sweep_after_claim(&self, key: &Key, claimed: u64, below: &[u64]) {
        if !self.backend.listing_is_snapshot() {
            return;
        }
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::SWEEP_LISTS_AFRESH) {
            // The planted bug: a fresh listing, keeping only whatever is newest now.
            if let Ok(listed) = self.backend.generations(key) {
                let newest = listed.iter().copied().max().unwrap_or(0);
                let stale: Vec<u64> = listed.into_iter().filter(|g| *g < newest).collect();
                self.remove_generations(key, &stale);
            }
            return;
        }
        debug_assert!(below.iter().all(|g| *g < claimed));
        self.remove_generations(key, below);
    }

    /// Removes `generations` of `key`, best effort; returns how many removals
    /// succeeded. Callers pass only generations below a durable claim of their own.
    fn remove_generations(&self, key: &Key, generations: &[u64]) -> usize {
        generations
            .iter()
            .filter(|g| self.backend.remove(key, **g).is_ok())
            .count()
    }

    /// Reads the newest record of `key`: the highest listed generation (by number),
    /// and the newest record that decodes (walking down past a torn highest record).
    /// A record removed between listing and reading (a concurrent sweep) causes a
    /// re-list; one that keeps vanishing counts as torn, so numbering still continues
    /// above it.
    fn read_newest(&self, key: &Key) -> Result<Newest> {
        let mut generation = 0;
        for _ in 0..VANISHED_RELIST_ATTEMPTS {
            let mut listed = self.backend.generations(key)?;
            generation = match listed.iter().copied().max() {
                Some(generation) => generation,
                None => return Ok(Newest::empty()),
            };
            let Some(bytes) = self.backend.read(key, generation)? else {
                continue;
            };
            listed.retain(|g| *g < generation);
            let decoded = record::decode(&bytes, key.as_str(), generation);
            let judged = match decoded {
                Decoded::Torn(_) => self.newest_decodable_below(key, &listed)?,
                decoded => Some((generation, decoded)),
            };
            return Ok(Newest {
                generation,
                judged,
                below: listed,
            });
        }
        Ok(Newest {
            generation,
            judged: None,
            below: Vec::new(),
        })
    }

    /// Reads the newest record of `key` for a write on top of our own record
    /// (renew, release, adopt): a torn newest record may be someone's create in
    /// progress, and writing above it could evict a claim that completes and is
    /// confirmed first, so it is waited out for up to [`CREATE_GRACE_MS`] (after
    /// which its creator no longer trusts it).
    fn read_settled(&self, key: &Key) -> Result<Newest> {
        let started = self.clock.monotonic_ms();
        let mut backoff_ms = BACKOFF_START_MS;
        loop {
            let newest = self.read_newest(key)?;
            let waited = self.clock.monotonic_ms().saturating_sub(started);
            if !newest.top_is_torn() || waited >= CREATE_GRACE_MS {
                return Ok(newest);
            }
            let step = self
                .jittered(backoff_ms)
                .min(CREATE_GRACE_MS - waited)
                .max(1);
            self.clock.sleep(Duration::from_millis(step));
            backoff_ms = (backoff_ms * 2).min(BACKOFF_CAP_MS);
        }
    }

    /// The newest record among `listed` that decodes, reading downwards; records
    /// swept meanwhile are skipped. Only reached when the highest record is torn.
    fn newest_decodable_below(&self, key: &Key, listed: &[u64]) -> Result<Option<(u64, Decoded)>> {
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::TORN_NEWEST_IS_VACANCY) {
            return Ok(None);
        }
        let mut below = listed.to_vec();
        below.sort_unstable_by(|a, b| b.cmp(a));
        for generation in below {
            if let Some(bytes) = self.backend.read(key, generation)? {
                match record::decode(&bytes, key.as_str(), generation) {
                    Decoded::Torn(_) => {}
                    decoded => return Ok(Some((generation, decoded))),
                }
            }
        }
        Ok(None)
    }

    /// After a create failed with an unknown outcome: if our claim landed anyway, it
    /// may not be durable, so give it up with a tombstone rather than hand it out.
    fn give_up_if_landed(&self, key: &Key, generation: u64, holder_id: &str) {
        let Ok(newest) = self.read_newest(key) else {
            return;
        };
        let Some(tombstone_generation) = generation.checked_add(1) else {
            return;
        };
        if newest.generation == generation
            && let Some(record) = newest
                .top_record()
                .filter(|r| !r.released && r.holder == holder_id)
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
            let _ = self.backend.create(
                key,
                tombstone_generation,
                &tombstone.encode(),
                Durability::Unflushed,
            );
        }
    }
}

/// True for the errors that mean the lease is gone (as opposed to a store failure).
fn is_loss(error: &Error) -> bool {
    matches!(
        error,
        Error::Superseded { .. }
            | Error::Expired { .. }
            | Error::NotHolder { .. }
            | Error::Broken { .. }
            | Error::Released { .. }
    )
}

/// The generation after `newest`, or a backend error when the series has reached
/// `u64::MAX` (only a hand-made record can get there; wrapping would restart the
/// numbering, docs/protocol.md I2).
fn next_generation(key: &Key, newest: u64) -> Result<u64> {
    newest.checked_add(1).ok_or_else(|| {
        Error::Backend(crate::BackendError::new(
            "create",
            key,
            std::io::Error::other(
                "the series holds the largest possible generation, so no later claim can be numbered; a record was planted by hand",
            ),
        ))
    })
}

/// A holder id unique to one tenure: owner, pid and a random nonce.
fn new_holder_id(owner: &str) -> String {
    format!("{owner}-{}-{:016x}", std::process::id(), nonce())
}

/// A random number for nonces: holder ids, staging-file names, backoff jitter. From
/// the standard library's per-process random hash keys mixed with a counter and the
/// time — unique enough that a collision only costs a retry; not for secrets.
pub fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    hasher.finish()
}

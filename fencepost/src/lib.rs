//! Leases with fencing tokens for agents that share one working tree.
//!
//! A **lease** is an exclusive, time-limited claim on a [`Resource`]; its **fencing
//! token** is a number that only ever grows. Whatever mutates the resource presents
//! the token ([`Store::check`]) and is refused once it is no longer current, so a
//! holder that was judged dead, was written around, and then woke up cannot land a
//! write.
//!
//! # Choosing a backend
//!
//! - `fencepost-fs` (the default): processes on one machine sharing a working tree.
//!   Every step is an exclusive file create; Windows-safe; no daemon.
//! - `fencepost-memory`: tests, and threads of one process. Fault injection (a create
//!   that fails after landing, torn records, power cuts).
//! - Your own: implement [`LeaseStore`] (one exclusive create per generation) and run
//!   the conformance suite against it.
//!
//! # Why not a lock file or `flock`?
//!
//! A lock file with a pid cannot tell a dead holder from a paused one, and after a
//! takeover the paused holder still has everything it needs to write. `flock` dies
//! with the process and is not shared reliably across network filesystems or
//! containers. Neither gives the writer a number to be refused by. Here every claim
//! is a new generation of an append-only series, and the token of the newest live
//! claim is the only one that passes.
//!
//! # Tokens are public; the lease's secret proves holding
//!
//! A token is an ordering, not a key: anyone may [`Store::check`] any token. Renew and
//! release act only for the tenure's secret, which the [`Lease`] carries (its SHA-256
//! alone is in the records). Another process of the holder gets the lease back from
//! its [`LeaseHandle`] (`TOKEN.SECRET`) with [`Store::resume`]; an operator ends a
//! lease on purpose with [`Store::break_lease`], and its holder learns who, when and
//! why ([`Error::Broken`]).
//!
//! # Example
//!
//! ```
//! use fencepost::{AcquireOptions, Resource, Store};
//! # fn open_store() -> Store { Store::new(fencepost::doc_support::TinyStore::default()) }
//! let store: Store = open_store(); // e.g. fencepost_fs::FsStore::open(location.path), where
//!                                   // location = fencepost_fs::locate_store(None, Some(&resource), cwd)
//! let migrations = Resource::lock("db:migrations");
//! let lease = store.acquire(&migrations, &AcquireOptions::new(30_000).owner("ci"))?;
//! if store.check(&migrations, lease.token())? {
//!     // the only party whose write is authorized
//! }
//! // Another process of the holder, given `lease.handle().to_string()`:
//! let handle: fencepost::LeaseHandle = lease.handle().to_string().parse().unwrap();
//! let mut resumed = store.resume(&migrations, &handle)?;
//! store.renew(&mut resumed)?;
//! store.release(&resumed)?;
//! # Ok::<(), fencepost::Error>(())
//! ```
//!
//! # Sessions: one agent, many processes
//!
//! A claim with [`AcquireOptions::session`] is re-entrant for that session: a claim by
//! the session that already holds the resource returns the same tenure (same token),
//! renewed; anyone else is refused as usual. Any process naming the session acts on
//! its tenure with [`Store::resume_session`]. A session id is the name the agent's
//! processes already share; knowing it is acting as the session, so records and
//! `status` carry only its [`SessionTag`] (docs/protocol.md §11, "Sessions").
//!
//! ```
//! use fencepost::{AcquireOptions, Resource, Store, TryAcquire};
//! # let store = Store::new(fencepost::doc_support::TinyStore::default());
//! let file = Resource::lock("src/auth.rs");
//! let options = AcquireOptions::new(30_000).owner("claude-code").session("agent-7");
//! let first = store.acquire(&file, &options)?; // a pre-edit hook
//! let again = store.acquire(&file, &options)?; // the next hook, another process
//! assert_eq!(again.token(), first.token());
//! assert!(again.reentered());
//! // Another session is refused, as anyone else would be.
//! let other = AcquireOptions::new(30_000).session("agent-8");
//! assert!(matches!(store.try_acquire(&file, &other)?, TryAcquire::Held(_)));
//! // Any process of the session renews and releases without the handle.
//! let lease = store.resume_session(&file, "agent-7")?;
//! store.release(&lease)?;
//! # Ok::<(), fencepost::Error>(())
//! ```
//!
//! # Several resources at once
//!
//! [`Store::acquire_all`] claims several resources all or nothing, one lease each, in
//! one canonical order, giving back what it took when one is held — so two claimers
//! of overlapping sets never deadlock ([`Store::try_acquire_all`] reports the holder).
//!
//! ```
//! use fencepost::{AcquireOptions, Resource, Store, TryAcquireAll};
//! # let store = Store::new(fencepost::doc_support::TinyStore::default());
//! let (db, cache) = (Resource::lock("db"), Resource::lock("cache"));
//! let options = AcquireOptions::new(30_000).owner("agent-a");
//! let leases = store.acquire_all(&[db.clone(), cache.clone()], &options)?;
//! assert_eq!(leases.len(), 2); // in the order given, one token each
//! // Someone wanting {cache, queue} is refused on cache and takes nothing.
//! let queue = Resource::lock("queue");
//! let other = AcquireOptions::new(30_000).owner("agent-b");
//! match store.try_acquire_all(&[cache.clone(), queue.clone()], &other)? {
//!     TryAcquireAll::Held { resource, .. } => assert_eq!(resource, cache),
//!     TryAcquireAll::Acquired(_) => unreachable!("cache is held"),
//! }
//! assert!(store.holder(&queue)?.is_none());
//! for lease in &leases {
//!     store.release(lease)?;
//! }
//! # Ok::<(), fencepost::Error>(())
//! ```
//!
//! # Slots: at most N holders
//!
//! [`Store::acquire_slot`] takes one of N slots of a lock ("4 dev servers"), each its
//! own fenced tenure; [`Lease::slot`] says which, and [`Resource::slot`] names it for
//! `check` and the rest.
//!
//! ```
//! use fencepost::{AcquireOptions, Resource, Store, TryAcquire};
//! # let store = Store::new(fencepost::doc_support::TinyStore::default());
//! let options = AcquireOptions::new(30_000).owner("agent-a");
//! let first = store.acquire_slot("dev-server", 2, &options)?;
//! let second = store.acquire_slot("dev-server", 2, &options)?;
//! assert_eq!((first.slot(), second.slot()), (Some(1), Some(2)));
//! // A third claimer of the 2 slots is refused.
//! assert!(matches!(store.try_acquire_slot("dev-server", 2, &options)?, TryAcquire::Held(_)));
//! assert!(store.check(&Resource::slot("dev-server", 2), second.token())?);
//! # Ok::<(), fencepost::Error>(())
//! ```
//!
//! # Subtrees
//!
//! [`Resource::dir`] claims a directory and everything below it, existing or not:
//! while it is held, a claim of any file or directory below it (or a subtree claim
//! of a directory above it) is [`Error::Held`] by the subtree's holder, and the other
//! way round (`docs/design-05-subtrees-and-shared.md`).
//!
//! ```
//! use fencepost::{AcquireOptions, Error, Resource, Store};
//! # let store = Store::new(fencepost::doc_support::TinyStore::default());
//! let auth = Resource::dir("src/auth");
//! let lease = store.acquire(&auth, &AcquireOptions::new(30_000).owner("agent-a"))?;
//! // A file below it, even one not created yet, is held by the subtree's holder.
//! let login = Resource::file("src/auth/new_login.rs");
//! let refused = store.acquire(&login, &AcquireOptions::new(30_000).owner("agent-b"));
//! assert!(matches!(refused, Err(Error::Held { holder, .. }) if holder.owner == "agent-a"));
//! store.release(&lease)?;
//! assert!(store.acquire(&login, &AcquireOptions::new(30_000).owner("agent-b")).is_ok());
//! # Ok::<(), fencepost::Error>(())
//! ```
//!
//! # Shared claims: many readers, writers wait
//!
//! [`AcquireOptions::shared`] claims a resource for reading: many shared holders at
//! once, none while an exclusive claim of it is held; an exclusive claim waits for
//! every shared holder, and a waiting exclusive claimer keeps new shared claimers out
//! (`docs/design-05-subtrees-and-shared.md` §4). [`Lease::shared`] says which kind a
//! lease is; a shared lease is checked with [`Store::check_lease`].
//!
//! ```
//! use fencepost::{AcquireOptions, Resource, Store, TryAcquire};
//! # let store = Store::new(fencepost::doc_support::TinyStore::default());
//! let docs = Resource::lock("docs");
//! let reader = AcquireOptions::new(30_000).shared(true);
//! let a = store.acquire(&docs, &reader.clone().owner("reader-a"))?;
//! let b = store.acquire(&docs, &reader.clone().owner("reader-b"))?;
//! assert!(a.shared() && b.shared());
//! store.check_lease(&a)?;
//! // An exclusive claim is held while any reader holds.
//! let writer = AcquireOptions::new(30_000).owner("writer");
//! assert!(matches!(store.try_acquire(&docs, &writer)?, TryAcquire::Held(_)));
//! store.release(&a)?;
//! store.release(&b)?;
//! let w = store.acquire(&docs, &writer)?;
//! assert!(w.token() >= a.token());
//! # Ok::<(), fencepost::Error>(())
//! ```
//!
//! The rules this crate implements are in `docs/protocol.md` in the repository (§3 protocol,
//! §4 backend contract, §6 identity), with the reasons in `docs/design-01-lease-and-fence.md`.

#![warn(missing_docs)]

mod backend;
mod clock;
mod error;
mod identity;
mod keepalive;
mod liveness;
mod proof;
mod protocol;
pub mod record;

pub use backend::{
    BackendError, CHANGE_WAIT_MAX, ChangeWatch, CreateOutcome, Durability, LeaseStore,
};
pub use clock::{Clock, ManualClock, SteppedClock, SystemClock};
pub use error::{Error, Holder, Result};
pub use identity::{
    DEPTH_LIMIT, Identity, Key, LOCK_NAME_MAX_BYTES, PATH_LIMIT_BYTES, Resource,
    reserved_device_name,
};
pub use keepalive::Keepalive;
pub use liveness::{Liveness, ProcessEvidence, SystemLiveness, Verdict};
pub use proof::{LeaseHandle, Secret, SessionTag, utc_timestamp};
pub use protocol::{
    AcquireOptions, BESIDE_POLL_MS, Beside, CREATE_GRACE_MS, Cancel, ClaimState, Lease,
    OWNER_MAX_CHARS, SLOTS_MAX, StatusEntry, Store, TURN_MS, TryAcquire, TryAcquireAll,
    check_owner, check_session, nonce,
};

/// This machine's host name, for records and `status` (empty when it cannot be
/// learned). Read once: from the kernel on Linux, `/etc/hostname`, or the
/// `HOSTNAME` / `COMPUTERNAME` variables (no dependency, no process spawned).
pub fn host_name() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let from_file = |path: &str| std::fs::read_to_string(path).ok();
        let from_env = |name: &str| std::env::var(name).ok();
        from_file("/proc/sys/kernel/hostname")
            .or_else(|| from_file("/etc/hostname"))
            .or_else(|| from_env("HOSTNAME"))
            .or_else(|| from_env("COMPUTERNAME"))
            .map(|name| name.trim().chars().filter(|c| !c.is_control()).collect())
            .unwrap_or_default()
    })
}

/// [`host_name`] as one shared string, so each record written names the host by
/// a reference count instead of a copy (docs/design-07-performance.md).
pub(crate) fn host_name_shared() -> std::sync::Arc<str> {
    static HOST: std::sync::OnceLock<std::sync::Arc<str>> = std::sync::OnceLock::new();
    HOST.get_or_init(|| host_name().into()).clone()
}

#[cfg(feature = "planted-bugs")]
#[doc(hidden)]
pub mod planted {
    //! Test-only switches that plant known protocol bugs (feature `planted-bugs`).
    //! All off by default; process-wide, so a test that turns one on must run in
    //! its own test binary.
    use std::sync::atomic::AtomicBool;

    /// Release removes the whole series after writing its tombstone (sweeping the
    /// newest), so numbering restarts.
    pub static RELEASE_SWEEPS_NEWEST: AtomicBool = AtomicBool::new(false);
    /// The liveness rule treats a record granted in the reader's future as expired
    /// instead of held (ignores backwards clocks).
    pub static LIVENESS_IGNORES_BACKWARDS_CLOCK: AtomicBool = AtomicBool::new(false);
    /// Acquire hands out its claim as soon as its create succeeded, without the
    /// confirming read (a slow create of a swept generation, or a rival that saw
    /// the claim half-written, then goes unnoticed).
    pub static ACQUIRE_SKIPS_CONFIRM: AtomicBool = AtomicBool::new(false);
    /// The sweep after a claim lists the series afresh and keeps only whatever is
    /// newest by then, instead of removing what the confirming read listed below
    /// its own claim.
    pub static SWEEP_LISTS_AFRESH: AtomicBool = AtomicBool::new(false);
    /// Renew skips the post-create liveness check: a renewal that lands after the
    /// renewed record expired is reported as a success (silent revival).
    pub static RENEW_SKIPS_POST_CREATE_CHECK: AtomicBool = AtomicBool::new(false);
    /// A renewal written from the record the lease remembers (no read first) trusts
    /// its create: a record above its own in the confirming listing (a newer tenure
    /// that swept the generation free) goes unnoticed and the renewal is reported.
    pub static RENEW_WRITTEN_SKIPS_CONFIRM: AtomicBool = AtomicBool::new(false);
    /// A renewal from the record written that turns out late hands even its own
    /// newest record to the read path, which finds it live and renews on top of it:
    /// the late record is revived instead of given up.
    pub static LATE_RENEWAL_READ_OVER_OURS: AtomicBool = AtomicBool::new(false);
    /// A torn newest record is judged as a vacancy even over a live predecessor (a
    /// renewal caught half-written is taken over).
    pub static TORN_NEWEST_IS_VACANCY: AtomicBool = AtomicBool::new(false);
    /// Dead-holder takeover trusts evidence from another host (or boot): a pid that
    /// does not exist here is taken for a dead holder there.
    pub static TAKEOVER_IGNORES_HOST: AtomicBool = AtomicBool::new(false);
    /// The proof of holding is not checked: any handle with the right token acts as
    /// the holder (the token alone is enough, as before proofs existed).
    pub static PROOF_IGNORED: AtomicBool = AtomicBool::new(false);
    /// A break's tombstone is written unflushed, like a release's: a power cut can
    /// drop it and give the broken lease back to its holder.
    pub static BREAK_UNFLUSHED: AtomicBool = AtomicBool::new(false);
    /// Sessions done naively: a live tenure of the claimer's own session counts as
    /// no conflict, so a second claim of the session starts a new tenure over it
    /// (a new token, fencing the first process while it was promised the lease)
    /// instead of re-entering it.
    pub static SESSION_HOLDER_IS_VACANCY: AtomicBool = AtomicBool::new(false);
    /// An acquisition whose wait is over reports its own session's tenure as the
    /// holder in its way at once, without the grace in which a sibling process's
    /// claim of the resource settles (a file's second key not yet taken): a
    /// session refused by itself.
    pub static OWN_SESSION_NO_GRACE: AtomicBool = AtomicBool::new(false);
    /// A claimer whose wait is over reports at once a rival it found only after
    /// its own claim landed (a reader seen by a writer, or a writer by a reader,
    /// each writing first and reading second), without looking again: the rival
    /// may have seen it too and given back, so both are refused, each naming a
    /// claimer that holds nothing.
    pub static RACE_REFUSED_AT_ONCE: AtomicBool = AtomicBool::new(false);
    /// An acquisition that gives back a claim it will not hand out tombstones the
    /// tenure whatever its newest record is, even a renewal by another process of
    /// its session that re-entered the tenure and was told it holds it.
    pub static GIVE_BACK_OVER_RENEWAL: AtomicBool = AtomicBool::new(false);
    /// A claim of several resources returns once each was taken, without checking
    /// that the first one taken is still live when the last is (a pause or slow
    /// creates in between hand out an expired lease).
    pub static SEVERAL_SKIPS_ALL_LIVE: AtomicBool = AtomicBool::new(false);
    /// A claim of several resources takes a subtree and a path inside it (or one
    /// path as a directory and as a file) in one set: it meets its own subtree
    /// claim as another tenure's and gives everything back, round after round.
    pub static SEVERAL_NESTED_UNCHECKED: AtomicBool = AtomicBool::new(false);
    /// A slot claim tries one slot past the last (`0..=slots` where `1..=slots`
    /// was meant): with every slot held, one more claimer gets in.
    pub static SLOT_PAST_THE_LAST: AtomicBool = AtomicBool::new(false);
    /// A break whose create lost to a concurrent renewal reports the tenure broken
    /// without looking again: the renewal that won keeps the lease live while the
    /// operator is told it was broken.
    pub static BREAK_TRUSTS_LOST_CREATE: AtomicBool = AtomicBool::new(false);
    /// A waiter sleeping on a change notification makes its watch after the read
    /// that found the key held (no second read) and sleeps until its deadline with
    /// no fallback read: a release between that read and the watch is slept
    /// through (a lost wake-up).
    pub static WAIT_WITHOUT_FALLBACK: AtomicBool = AtomicBool::new(false);
    /// A file or subtree claim skips its check up: a subtree claim of a directory
    /// above it is not looked for.
    pub static FILE_SKIPS_CHECK_UP: AtomicBool = AtomicBool::new(false);
    /// A subtree claim skips its check down: claims below its directory are not
    /// looked for.
    pub static SUBTREE_SKIPS_CHECK_DOWN: AtomicBool = AtomicBool::new(false);
    /// A file or subtree claim looks at the other side only before it claims, not
    /// after (read first, write second: two claimants that both looked before
    /// either claimed both hold).
    pub static TREE_CHECK_BEFORE_CLAIM_ONLY: AtomicBool = AtomicBool::new(false);
    /// A claim beside other stores (`Store::claim_beside`) asks them before it
    /// claims, not after (read first, write second: two claims of one file in two
    /// stores that both looked before either claimed both stand).
    pub static ELSEWHERE_LOOKED_BEFORE_CLAIM: AtomicBool = AtomicBool::new(false);
    /// A claim beside other stores (`Store::claim_beside`) lists them once,
    /// before it claims, and asks only those after: a store made meanwhile (a
    /// repository initialised around the file) holds a claim no one asks about.
    pub static OTHERS_LISTED_BEFORE_CLAIM: AtomicBool = AtomicBool::new(false);
    /// A claim beside other stores asks them about its own keys and the subtrees
    /// above it, not about claims below a directory it claims: a file held in a
    /// nested repository's store below a subtree claim stands beside it.
    pub static ELSEWHERE_NOT_DOWN: AtomicBool = AtomicBool::new(false);
    /// A claim beside other stores that was turned away, and then looked and
    /// found the way clear, trusts that look and does not ask again after its
    /// claim landed (read first, write second).
    pub static BESIDE_TRUSTS_ITS_LOOK: AtomicBool = AtomicBool::new(false);

    /// A shared claimer checks for an exclusive claim only before it admits
    /// itself, not after (read first, write second: a writer that claimed in
    /// between and found no participant yet holds together with the reader).
    pub static SHARED_CHECK_BEFORE_ADMIT_ONLY: AtomicBool = AtomicBool::new(false);
    /// A shared claimer ignores a waiting writer's intent: readers that keep
    /// arriving starve the writer.
    pub static SHARED_IGNORES_INTENT: AtomicBool = AtomicBool::new(false);
    /// A shared claimer honours a writer's intent whose waiter provably died: a
    /// killed waiter keeps every reader out until its intent's ttl runs out.
    pub static DEAD_INTENT_HONOURED: AtomicBool = AtomicBool::new(false);
    /// A shared claimer ignores an exclusive holder whose process provably died
    /// without fencing it (no takeover record): the dead tenure's token keeps
    /// passing `check` while the reader holds.
    pub static SHARED_DEAD_NOT_FENCED: AtomicBool = AtomicBool::new(false);
    /// A break of a resource held by readers breaks only the first live one: the
    /// others keep passing their checks after the break returned.
    pub static BREAK_FIRST_READER_ONLY: AtomicBool = AtomicBool::new(false);
    /// A break's first read of its key is unsettled: a renewal in progress above a
    /// swept record is taken for a tenure that ended, so a break of several
    /// readers skips that one and still reports success.
    pub static BREAK_READS_UNSETTLED: AtomicBool = AtomicBool::new(false);
    /// A break re-reads its key unsettled after its create lost: above a claim
    /// still being written it takes the record below for the tenure to break, and
    /// its tombstone lands over that claim and ends it.
    pub static BREAK_REREADS_UNSETTLED: AtomicBool = AtomicBool::new(false);
    /// Dead-holder takeover ignores the process group a holder's evidence names:
    /// a killed `fencepost run` is taken over while its command still runs.
    pub static GROUP_IGNORED: AtomicBool = AtomicBool::new(false);
    /// Dead-holder takeover takes a holder whose command's group is not named yet
    /// ([`crate::ProcessEvidence::GROUP_TO_COME`]) for gone once its process is: a
    /// `fencepost run` killed between starting its command and naming the group is
    /// taken over while the command runs.
    pub static GROUP_TO_COME_IGNORED: AtomicBool = AtomicBool::new(false);
    /// A renewal that finds the newest record of its tenure written through
    /// another handle (a session's sibling) renews as if it had written it: with
    /// its own ttl and evidence, cutting short what the sibling was promised and
    /// handing the tenure over once this process alone dies.
    pub static SIBLING_RENEWAL_IGNORED: AtomicBool = AtomicBool::new(false);
    /// A claim that finds its own tenure renewed above it by another process of
    /// its session (a re-entry before its confirming read) takes itself for lost
    /// and re-enters: every process of the session then says it re-entered, and
    /// none releases the tenure at its end.
    pub static SIBLING_CLAIM_IGNORED: AtomicBool = AtomicBool::new(false);
    /// A renewal through a sibling's handle keeps the sibling's later end in the
    /// tenure's primary series only, and renews its other series (a file's file-id
    /// series) with its own ttl: another hard link of the file is free to claim
    /// while the session holds it.
    pub static OTHER_KEYS_CUT_SHORT: AtomicBool = AtomicBool::new(false);
    /// A file id adopted by a renewal through a sibling's handle (the file was
    /// replaced) gets this process's ttl, not the tenure's later end.
    pub static ADOPTED_KEY_CUT_SHORT: AtomicBool = AtomicBool::new(false);
    /// A renewal, or an acquisition, of several keys reports the primary key's end
    /// as the lease's, though another key's record, written earlier, ends sooner.
    pub static LEASE_END_FROM_PRIMARY: AtomicBool = AtomicBool::new(false);
    /// A renewal that finds a sibling's record of its tenure above its own, ending
    /// sooner than the renewal meant to, takes that record for its renewal: the
    /// tenure is never extended while a sibling keeps re-entering it shorter.
    pub static SIBLING_RECORD_TAKEN_AS_RENEWAL: AtomicBool = AtomicBool::new(false);
    /// A session's claim that finds its own tenure written around (another
    /// tenure's record in the file's file-id series) leaves that tenure's record
    /// the newest of the path's series: the session is kept out of its own file
    /// until the ttl.
    pub static FENCED_SESSION_TENURE_KEPT: AtomicBool = AtomicBool::new(false);
    /// A claim of a file with other names does not look for live claims of those
    /// names: a claim through a hard link of a file saved since another tenure
    /// claimed it under its name gets in, writing around that live tenure.
    pub static OTHER_NAMES_NOT_LOOKED_FOR: AtomicBool = AtomicBool::new(false);
    /// An acquisition never reads its [`crate::AcquireOptions::cancel`]: a waiter
    /// whose caller gave up waits on, takes the resource when it comes free, and
    /// is kept a turn by the release meanwhile.
    pub static CANCEL_IGNORED: AtomicBool = AtomicBool::new(false);
    /// A claim of several resources waits for a member held by readers without an
    /// intent on it: readers that keep arriving starve the set.
    pub static SET_WAITS_WITHOUT_INTENT: AtomicBool = AtomicBool::new(false);
    /// A claim of several resources that took them all gives its intents back
    /// after its final liveness check, not before: a slow give-back returns leases
    /// whose ttl ran out.
    pub static SET_INTENTS_GIVEN_BACK_LATE: AtomicBool = AtomicBool::new(false);
    /// A shared subtree claimer does not look at the intents of writers waiting
    /// for claims below it: readers of a directory that keep arriving starve a
    /// writer of a file in it.
    pub static READERS_IGNORE_INTENTS_BELOW: AtomicBool = AtomicBool::new(false);
    /// A renewal judges the record this handle stamped itself by the holder's
    /// clock (the wall clock's lead over the monotonic clock before a step back):
    /// after a step back of 2/3 ttl, its own fresh record looks expired.
    pub static OWN_STAMP_JUDGED_BY_HOLDER_CLOCK: AtomicBool = AtomicBool::new(false);
    /// A break through another hard link ends the tenure in the file's file-id
    /// series alone (not the path key of the link its holder claimed), and `check`
    /// and `resume` take the tenure's own tombstone there for no answer: its token
    /// passes `check` until the next claim.
    pub static FILE_ID_TOMBSTONE_IGNORED: AtomicBool = AtomicBool::new(false);
    /// An intent carries its waiter's process evidence only when the waiter's
    /// claim is tied to its process: a killed plain `claim --wait` leaves an
    /// intent nobody can prove dead.
    pub static INTENT_UNTIED: AtomicBool = AtomicBool::new(false);
    /// A file claim does not look for a subtree claim of its own path, nor a
    /// subtree claim for a file claim of its directory's path: `dir:P` and
    /// `file:P` are both granted at once.
    pub static SAME_PATH_UNCHECKED: AtomicBool = AtomicBool::new(false);
    /// A participant index sweeps an entry whose participant has not written its
    /// record yet (as if its writer had died): an exclusive claimer that arrives
    /// between the entry and the record, and after the sweep, never sees the
    /// reader it will hold with.
    pub static SHARES_SWEEP_UNWRITTEN: AtomicBool = AtomicBool::new(false);
    /// A stale renewal that lands the first record of a participant series removed
    /// under it (the tenure ended and an exclusive claimer's look removed its entry
    /// and series) is acknowledged: a shared lease revived with no index entry,
    /// invisible to exclusive claimers.
    pub static STALE_RENEWAL_REVIVES_REMOVED_SERIES: AtomicBool = AtomicBool::new(false);
    /// An ended participant's series is removed newest first, and before its index
    /// entry: a stale renewal between the removals finds its own record newest
    /// (live by its clock) with the next generation free, and is acknowledged on
    /// top of a series whose entry is gone.
    pub static PARTICIPANT_REMOVED_NEWEST_FIRST: AtomicBool = AtomicBool::new(false);
    /// A claim covered by a subtree whose holder provably died ignores that
    /// holder without fencing it (no takeover record): the dead tenure's token
    /// keeps passing `check` while the covered claim holds.
    pub static COVERED_DEAD_NOT_FENCED: AtomicBool = AtomicBool::new(false);
    /// A covered claim (a file or subtree below a directory, shared or exclusive)
    /// ignores the intent of a subtree claimer waiting for that directory: a
    /// stream of covered claims starves it.
    pub static COVERED_IGNORES_INTENT: AtomicBool = AtomicBool::new(false);
    /// A release's turn for the next waiter never lapses: once the named waiter
    /// is gone (crashed, or its wait ended), everyone else sleeps on a free key.
    pub static TURN_NEVER_LAPSES: AtomicBool = AtomicBool::new(false);
    /// The waiter a release names in its turn honours the turn as if it were
    /// someone else's: it sleeps on a key that is free for it.
    pub static TURN_FOR_NOBODY: AtomicBool = AtomicBool::new(false);
    /// A release lands its tombstone and rings nobody: the waiter it names sleeps
    /// on its ticket through its own turn.
    pub static RELEASE_RINGS_NOBODY: AtomicBool = AtomicBool::new(false);
    /// A claim over a lapsed turn clears the passed-over tickets after its final
    /// liveness check instead of before: a slow clean-up hands out a lease that
    /// expired meanwhile.
    pub static CLEAR_LAPSED_AFTER_CONFIRM: AtomicBool = AtomicBool::new(false);
    /// A release whose tombstone names nobody rings nobody (it does not list the
    /// queue again): a waiter that queued after the release listed the queue, and
    /// read before the tombstone landed, sleeps on its ticket through the release.
    pub static NAMELESS_RELEASE_RINGS_NOBODY: AtomicBool = AtomicBool::new(false);
    /// A waiter that joins the queue sleeps on its new ticket's watch at once,
    /// without a read made after that watch (nor first on the key's watch, made
    /// before its last read): a release that listed the queue before the ticket
    /// landed, and whose tombstone landed after that read, is slept through.
    pub static TICKET_WATCH_WITHOUT_REREAD: AtomicBool = AtomicBool::new(false);
    /// A queued waiter takes its ticket for still there on every round, as it may
    /// only on the round right after it joined: a waiter passed over (its ticket
    /// removed) sleeps on the watch of a ticket nobody rings.
    pub static TICKET_TRUSTED_WITHOUT_LOOKING: AtomicBool = AtomicBool::new(false);
    /// A waiter keeps its ticket while it holds, for its release to remove after
    /// the tombstone: the next holder's release, should it list the queue first,
    /// names a waiter that already held, and every claimant waits out that turn.
    pub static TICKET_KEPT_WHILE_HOLDING: AtomicBool = AtomicBool::new(false);
    /// A release names the oldest unexpired ticket even when its waiter's process
    /// certainly ended: that turn lapses unclaimed, and every claimant waits it out.
    pub static DEAD_WAITER_NAMED: AtomicBool = AtomicBool::new(false);
    /// Ticket numbers start again at 1 when a queue empties (numbered from the
    /// queue alone): a waiter passed over whose number was given to a later waiter
    /// takes that ticket for its own and sleeps on it (rung only for the other's
    /// turn), and its leaving removes the other waiter's ticket.
    pub static TICKET_NUMBER_RESTARTS: AtomicBool = AtomicBool::new(false);
    /// A ticket numbered from the key's newest generation is kept without reading
    /// that generation again after the create: numbered from a read made before a
    /// release removed a ticket, it may take that ticket's number, given twice.
    pub static TICKET_NUMBER_UNCONFIRMED: AtomicBool = AtomicBool::new(false);
    /// A join whose confirming read of the key fails returns without a ticket but
    /// leaves the ticket it just made in the queue: nobody waits on it, and its
    /// waiter, ticketless, goes on to hold and release with it still queued.
    pub static TICKET_LEFT_ON_FAILED_CONFIRM: AtomicBool = AtomicBool::new(false);
    /// A waiter's own ticket, and a lapsed turn's, are removed through
    /// `remove_superseded` like a sweep's removals: where the backend defers those
    /// (the fs backend's removal thread), the ticket stays queued for every other
    /// process after its waiter left the queue or was passed over.
    pub static TICKET_REMOVAL_DEFERRED: AtomicBool = AtomicBool::new(false);
    /// A claimant ages a torn newest record (someone's create in progress) by the
    /// clock reading taken after its latest read, not before: a pause between that
    /// read and the reading counts as time the create was seen in progress, and a
    /// create that completed quickly in the pause, and was handed out, is claimed
    /// over as abandoned.
    pub static TORN_AGED_AFTER_THE_READ: AtomicBool = AtomicBool::new(false);
    /// A break trusts its tombstone's create: one that landed on a generation the
    /// holder's renewals already created and swept, below the renewal that holds,
    /// is reported as a break while the tenure goes on.
    pub static BREAK_SKIPS_CONFIRM: AtomicBool = AtomicBool::new(false);

    /// A session's release by key (`Store::release_session_series`) ends whatever
    /// live tenure is newest in the series, without asking whether it is the
    /// session's: a session's end then ends another session's claim of a file it
    /// renamed or deleted.
    pub static SERIES_RELEASE_WITHOUT_PROOF: AtomicBool = AtomicBool::new(false);

    /// A claim made beside another store passes over a holder there whose
    /// process provably ended without fencing it: its tenure stands in that store,
    /// and its token passes `check` there while the claimant holds.
    pub static BESIDE_DEAD_UNFENCED: AtomicBool = AtomicBool::new(false);

    /// A break of a session's claims breaks whatever live tenure is newest in each
    /// series it listed, not only the session's: one that another session began
    /// after the listing is broken too.
    pub static BREAK_SESSION_UNFILTERED: AtomicBool = AtomicBool::new(false);

    pub(crate) fn on(switch: &AtomicBool) -> bool {
        switch.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[doc(hidden)]
pub mod doc_support {
    //! A minimal in-memory backend so this crate's doctests run without a backend
    //! crate (the real ones depend on this crate, never the reverse).
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use crate::{BackendError, CreateOutcome, Durability, Key, LeaseStore};

    /// A map of (key, generation) to bytes.
    #[derive(Debug, Default)]
    pub struct TinyStore(Mutex<BTreeMap<(Key, u64), Vec<u8>>>);

    impl LeaseStore for TinyStore {
        fn create(
            &self,
            key: &Key,
            generation: u64,
            bytes: &[u8],
            _: Durability,
        ) -> Result<CreateOutcome, BackendError> {
            let mut map = self.0.lock().unwrap();
            if map.contains_key(&(key.clone(), generation)) {
                return Ok(CreateOutcome::AlreadyExists);
            }
            map.insert((key.clone(), generation), bytes.to_vec());
            Ok(CreateOutcome::Created)
        }
        fn generations(&self, key: &Key) -> Result<Vec<u64>, BackendError> {
            Ok(self
                .0
                .lock()
                .unwrap()
                .keys()
                .filter(|(k, _)| k == key)
                .map(|(_, g)| *g)
                .collect())
        }
        fn read(&self, key: &Key, generation: u64) -> Result<Option<Vec<u8>>, BackendError> {
            Ok(self
                .0
                .lock()
                .unwrap()
                .get(&(key.clone(), generation))
                .cloned())
        }
        fn remove(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
            self.0.lock().unwrap().remove(&(key.clone(), generation));
            Ok(())
        }
        fn keys(&self) -> Result<Vec<Key>, BackendError> {
            let mut keys: Vec<Key> = self
                .0
                .lock()
                .unwrap()
                .keys()
                .map(|(k, _)| k.clone())
                .collect();
            keys.dedup();
            Ok(keys)
        }
        fn locator(&self) -> String {
            "memory".into()
        }
    }
}

//! The filesystem backend of fencepost, and its default: a
//! [`LeaseStore`] kept in a directory (by default in the repository's git directory,
//! see "Store location" below), shared by every process that opens the same
//! directory.
//!
//! Use it when processes on one machine (coding agents, scripts, CI jobs, humans)
//! share a working tree and need leases on things in it. Each claim generation is
//! one small JSON file created exclusively; there is no daemon, no lock held open
//! and nothing to clean up after a crash beyond what the protocol already handles.
//!
//! # Capabilities
//!
//! | | |
//! | --- | --- |
//! | shared across threads | yes (`FsStore` is `Clone + Send + Sync`; clones share state) |
//! | shared across processes | yes, through the directory alone |
//! | durable | yes for claims: file, directory and parents flushed before acknowledging (POSIX); tombstones are not flushed, by design |
//! | atomic exclusive create | yes: a fully written nameless file (Linux `O_TMPFILE`) or staging file hard-linked into place, which fails when the name exists |
//! | readers see partial records | no (yes, briefly, on filesystems without hard links; they read as torn) |
//! | Windows-safe operations only | yes: create-if-absent, hard link, mkdir, read, list, best-effort delete. Nothing replaces, overwrites or edits a file; no lock files (enforced by `clippy.toml`) |
//! | follows symbolic links inside the store | no |
//! | network filesystems | untested |
//!
//! # Layout (format v1)
//!
//! ```text
//! <root>/claims/<key>/g00000001.json    one record per generation, never edited
//! <root>/claims/<key>/.stage-<pid>-<hex>.tmp    a create in progress; ignored by readers
//! ```
//!
//! The project's `docs/format-v1.md` describes the format precisely enough to write
//! a compatible implementation in another language.
//!
//! # Symbolic links and foreign entries
//!
//! The store root may itself be a symbolic link (it is the user's choice of where
//! the store lives). Inside it nothing is followed: a record name that is a symbolic
//! link, a directory or any other non-regular file is a **read error** naming the
//! path (never its target's bytes, and never "absent", which would let numbering
//! restart); a key directory that is a symbolic link or not a directory is an
//! **error** for every operation on that key and is **skipped** by
//! [`keys`](LeaseStore::keys). Names that are not records or keys are ignored. On
//! POSIX the record open itself refuses links (`O_NOFOLLOW`); a key directory is
//! checked by every listing of it (on Linux by the open itself, `O_DIRECTORY |
//! O_NOFOLLOW`, with no window; elsewhere with `lstat` just before), a create, read
//! or removal trusts a check this handle made within the last second (every protocol
//! operation lists first; the removal thread checks again itself, whenever it runs),
//! and `claims/` is checked when the store is opened
//! and listed. That leaves a window only against someone who deliberately swaps a
//! directory for a link while the store is in use: the protection is against
//! accidents and confused tools, not against a hostile user of the same tree.
//!
//! # Removals of superseded records
//!
//! The sweep after each claim and renewal
//! ([`LeaseStore::remove_superseded`]) is handed to a removal thread of the store
//! handle (shared by its clones, started with the first removal), so the claimant
//! does not wait for the disk: where the filesystem discards freed blocks online, an
//! `unlink` of a flushed record waits for the device. Through the handle a queued
//! removal reads as made; the thread checks the key directory again right before
//! removing (never following a link); at most 64 wait, beyond that a removal is made
//! in line. Dropping the last clone of the handle drains the queue (a few seconds at
//! most); [`FsStore::settle`] waits for it. A process killed with removals queued
//! leaves superseded records behind, which is harmless: the next claim's sweep
//! removes every generation below it. [`LeaseStore::remove`] itself is made before
//! it returns.
//!
//! # Example
//!
//! ```
//! use fencepost::{AcquireOptions, Resource, Store};
//! use fencepost_fs::{FsStore, locate_store};
//!
//! # let tmp = tempfile::tempdir()?;
//! # let cwd = tmp.path();
//! # std::fs::create_dir(cwd.join(".fencepost"))?; // keep the example out of the user's store
//! let migrations = Resource::lock("db:migrations");
//! // --store / FENCEPOST_STORE would be passed as the first argument. The resource
//! // decides the store: a file's own directory, a lock's working directory.
//! let location = locate_store(None, Some(&migrations), cwd)?;
//! let store = Store::new(FsStore::open(&location.path)?);
//! let lease = store.acquire(&migrations, &AcquireOptions::new(30_000))?;
//! assert!(store.check(&migrations, lease.token())?);
//! store.release(&lease)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Store location
//!
//! [`locate_store`] implements the rule every fencepost program follows, so that one
//! resource has one store whatever the caller's working directory, worktree or
//! nesting: an explicit store; else the nearest `.fencepost` directory at or above
//! the anchor (a file's resolved parent, or the working directory for a lock); else
//! `fencepost/` in the common git directory of the repository containing the anchor
//! (shared by all its worktrees, never in the work tree); else the per-user state
//! store. Details: `docs/format-v1.md`.

#![warn(missing_docs)]

// The workspace README's library example compiles against this crate (it is a doctest).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct WorkspaceReadmeDoctests;

mod layout;
mod locate;
mod removals;
mod sessions;
mod sys;

use std::collections::{HashMap, HashSet};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use fencepost::{BackendError, ChangeWatch, CreateOutcome, Durability, Key, LeaseStore};

pub use locate::{
    LocateError, REPOSITORY_STORE_NAME, SPLIT_SCAN_LIMIT, STORE_DIR_NAME, StoreLocation,
    StoreScope, SubtreeSplit, git_dir_made_by_write, locate_by_layout, locate_store, locate_with,
    other_stores, store_holding, store_identity, store_record_linked_at, stores_below,
    stores_on_the_path, subtree_split, subtree_split_within, user_store,
};

use layout::{CLAIMS_DIR, STALE_STAGING_AGE};
use sys::check_real_dir;

/// How many fresh staging names a create tries before giving up (a collision needs
/// two writers of one pid and one random 64-bit number, so more than one retry means
/// something else is wrong).
const STAGING_NAME_ATTEMPTS: usize = 4;

/// How long a key directory found to be a real directory is trusted by this handle
/// without another check: long enough for one protocol operation (which lists the key
/// first, checking it), short enough that a directory swapped for a symbolic link
/// by a confused tool is refused by every later operation. Listings never trust it.
const DIR_CHECK_FRESH: Duration = Duration::from_secs(1);

/// A fencepost store in a directory: the default [`LeaseStore`].
///
/// Cheap to clone; clones share the root and what this process learned about it
/// (which directories it already flushed, whether the filesystem has hard links).
/// Any number of `FsStore`s, in any number of processes, may open one root at once.
#[derive(Debug, Clone)]
pub struct FsStore {
    root: PathBuf,
    claims: PathBuf,
    flush: bool,
    shared: Arc<Shared>,
}

/// What clones of one `FsStore` learn at run time.
#[derive(Debug, Default)]
struct Shared {
    /// Set once a hard link failed as unsupported: creates then go straight to the
    /// exclusive-create fallback.
    links_unsupported: AtomicBool,
    /// Tests: how long the fallback waits between creating a record's name and
    /// writing its bytes (a slow disk), so readers see it torn meanwhile.
    #[cfg(test)]
    write_delay: std::sync::Mutex<Option<std::time::Duration>>,
    /// Set once this handle flushed the root's parent and the root, so the entries
    /// naming the root and `claims/` are durable.
    root_flushed: AtomicBool,
    /// Keys whose directory entry in `claims/` this handle has flushed.
    keys_flushed: Mutex<HashSet<Key>>,
    /// When this handle last found each key's directory to be a real directory (not
    /// a symbolic link). Listings check every time (on Linux in the open itself, with
    /// no window); a create, read or removal within [`DIR_CHECK_FRESH`] of such a
    /// check (every protocol operation starts with a listing) skips its own `mkdir`
    /// or `lstat`.
    dirs_checked: Mutex<HashMap<Key, Instant>>,
    /// Set once `O_TMPFILE` (or `/proc/self/fd`) turned out to be missing: creates
    /// then stage a named file.
    anonymous_unsupported: AtomicBool,
    /// Change watches no waiter uses right now, by key directory, kept for the next
    /// wait: closing one costs the kernel milliseconds (see [`sys::DirWatch`]),
    /// which a waiter that just won its claim would otherwise pay while holding it.
    idle_watches: IdleWatches,
    /// Inotify instances of ticket watches no waiter uses right now, their watches
    /// removed, kept for the next (closing one costs what closing a key directory's
    /// watch does).
    blank_watches: BlankWatches,
    /// Removals of superseded records waiting for (or on) the removal thread
    /// (`removals.rs`); dropped with the last clone, which drains them.
    removals: removals::Removals,
}

/// At most this many idle change watches are kept per store handle (each holds an
/// inotify instance, of which a user has 128 by default).
const IDLE_WATCHES_MAX: usize = 8;

/// The idle watches of one store handle, most recently used last.
#[derive(Default)]
struct IdleWatches(Mutex<Vec<(PathBuf, sys::DirWatch)>>);

impl std::fmt::Debug for IdleWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map(|w| w.len()).unwrap_or(0);
        write!(f, "IdleWatches({n})")
    }
}

impl IdleWatches {
    /// An idle watch of `dir` that still watches it, with every event that came
    /// while it was idle consumed (the caller reads the series after this, so
    /// those changes are seen by that read).
    fn take(&self, dir: &Path) -> Option<sys::DirWatch> {
        let mut idle = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let at = idle.iter().rposition(|(d, _)| d == dir)?;
        let (_, mut watch) = idle.swap_remove(at);
        drop(idle);
        watch.drain();
        // One that lost its directory (removed by hand and made again) is closed.
        watch.live().then_some(watch)
    }

    /// Keeps `watch` for the next wait on `dir`, or closes it when it is no longer
    /// live or enough are kept.
    fn give_back(&self, dir: PathBuf, watch: sys::DirWatch) {
        if !watch.live() {
            return;
        }
        let mut idle = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() >= IDLE_WATCHES_MAX {
            // The oldest goes; closed outside the lock.
            let oldest = idle.remove(0);
            idle.push((dir, watch));
            drop(idle);
            drop(oldest);
        } else {
            idle.push((dir, watch));
        }
    }
}

/// The idle inotify instances of one store handle's ticket watches.
#[derive(Default)]
struct BlankWatches(Mutex<Vec<sys::Inotify>>);

impl std::fmt::Debug for BlankWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map(|w| w.len()).unwrap_or(0);
        write!(f, "BlankWatches({n})")
    }
}

impl BlankWatches {
    fn take(&self) -> Option<sys::Inotify> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    /// Keeps `blank` for the next ticket watch, or closes it when enough are kept.
    fn give_back(&self, blank: sys::Inotify) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() < IDLE_WATCHES_MAX {
            kept.push(blank);
        }
    }
}

impl Shared {
    fn dir_checked(&self, key: &Key) -> bool {
        self.dirs_checked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .is_some_and(|at| at.elapsed() < DIR_CHECK_FRESH)
    }

    fn mark_dir_checked(&self, key: &Key) {
        let now = Instant::now();
        let mut checked = self.dirs_checked.lock().unwrap_or_else(|e| e.into_inner());
        match checked.get_mut(key) {
            Some(at) => *at = now,
            None => {
                checked.insert(key.clone(), now);
            }
        }
    }

    /// Forgets `key`'s directory; true when it had been checked (so a create that
    /// found it missing makes it again, once).
    fn forget_dir(&self, key: &Key) -> bool {
        self.dirs_checked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key)
            .is_some()
    }
}

impl FsStore {
    /// Opens the store directory `root`, creating it (and missing parents) if it
    /// does not exist. A relative `root` is made absolute against the working
    /// directory now, so [`locator`](LeaseStore::locator) opens the same store from
    /// anywhere. The absolute form is [`std::path::absolute`]'s: on Windows that
    /// also spells every separator `\` (`a/b` becomes `C:\…\a\b`), and the
    /// locator, [`root`](FsStore::root) and error locations all use that spelling
    /// (pinned by `open_creates_missing_parents_and_reports_an_absolute_root`).
    ///
    /// Nothing else is written, except a `.gitignore` holding `*` when the store
    /// lies in a git work tree (not inside `.git`) and this call created it, or it
    /// is a `.fencepost` directory that has none: a store must never be one `git add
    /// -A` away from being committed. `claims/` and key directories are created by
    /// the first [`create`](LeaseStore::create). Directories created here are
    /// flushed to their parents (POSIX).
    ///
    /// # Errors
    ///
    /// A [`BackendError`] with operation `open store` and the path as location when
    /// the path is empty or not valid UTF-8 (its locator could not round-trip), exists
    /// and is not a directory, lies under a regular file (the message names that
    /// file), cannot be created (permission denied, read-only filesystem), or holds a
    /// `claims` entry that is not a real directory. The error keeps the
    /// [`io::ErrorKind`].
    pub fn open(root: impl AsRef<Path>) -> Result<FsStore, BackendError> {
        FsStore::open_with(root.as_ref(), true)
    }

    /// Opens the store directory `root` for reading, creating nothing: a `root` that
    /// does not exist reads as an empty store (no keys, no generations), and a
    /// [`create`](LeaseStore::create) through it then fails naming the path. For
    /// commands that only read (`check`, `status`) or that act on an existing claim
    /// (`renew`, `release`): a typo or a fresh directory must not leave a store
    /// behind.
    ///
    /// # Errors
    ///
    /// As [`open`](FsStore::open), except that a missing root is not an error.
    pub fn open_existing(root: impl AsRef<Path>) -> Result<FsStore, BackendError> {
        FsStore::open_with(root.as_ref(), false)
    }

    fn open_with(given: &Path, create: bool) -> Result<FsStore, BackendError> {
        let fail = |e: io::Error| BackendError::new("open store", given.display(), e);
        if given.as_os_str().is_empty() {
            return Err(fail(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the store path is empty",
            )));
        }
        let root = std::path::absolute(given).map_err(fail)?;
        let fail = |e: io::Error| BackendError::new("open store", root.display(), e);
        if root.to_str().is_none() {
            return Err(fail(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the path is not valid UTF-8, so the store's locator (FENCEPOST_STORE for \
                 child processes) could not name it exactly; use a store path that is valid UTF-8",
            )));
        }
        match fs::metadata(&root) {
            Ok(metadata) if metadata.is_dir() => {
                if create && root.file_name() == Some(STORE_DIR_NAME.as_ref()) {
                    // A legacy or hand-made `.fencepost`: best effort, it may be
                    // read-only to us and still readable.
                    let _ = ignore_in_work_tree(&root);
                }
            }
            Ok(_) => {
                return Err(fail(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    "exists and is not a directory",
                )));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Windows answers "path not found" where POSIX says "not a directory":
                // a regular file among the ancestors must not read as an empty store
                // (found by the Windows run under Wine).
                let e = explain_non_directory_ancestor(&root, e);
                if e.kind() != io::ErrorKind::NotFound {
                    return Err(fail(e));
                }
                if create {
                    create_store_dir(&root).map_err(fail)?;
                    ignore_in_work_tree(&root).map_err(|e| {
                        BackendError::new("open store", root.join(".gitignore").display(), e)
                    })?;
                }
            }
            Err(e) => return Err(fail(explain_non_directory_ancestor(&root, e))),
        }
        let claims = root.join(CLAIMS_DIR);
        match fs::symlink_metadata(&claims) {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => {
                return Err(BackendError::new(
                    "open store",
                    claims.display(),
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        "is not a directory (a symbolic link or a file); fencepost never \
                         follows links inside the store",
                    ),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(BackendError::new("open store", claims.display(), e)),
        }
        Ok(FsStore {
            root,
            claims,
            flush: true,
            shared: Arc::default(),
        })
    }

    /// The store directory (absolute).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Switches flushing of [`Durability::Flushed`] creates on (the default) or off.
    ///
    /// Off, a claim is acknowledged once visible rather than once durable: a power
    /// cut may then lose it and hand its generation to a rival. Meant for benchmarks
    /// that measure what flushing costs, and for throwaway stores (tests, tmpfs).
    pub fn with_flush(mut self, flush: bool) -> FsStore {
        self.flush = flush;
        self
    }

    /// Waits until every removal of a superseded record queued through this handle
    /// (or a clone) before the call has been made.
    ///
    /// The protocol's sweep after a claim or renewal
    /// ([`LeaseStore::remove_superseded`]) does not wait for the disk: the removal is
    /// queued for this handle's removal thread (at most 64 wait; beyond that a
    /// removal is made on the caller's thread) and made moments later. Through this
    /// handle the records already read as removed, so nothing the protocol does
    /// needs this. Call it when *others* must see the store tidy now: before
    /// counting a series' files from outside, before timing something else on the
    /// same disk (the benchmark settles before every floor sample), or before
    /// handing the directory to a tool. Dropping the last clone of the handle does
    /// the same (waiting at most a few seconds). A process killed with removals
    /// queued leaves superseded records behind: harmless, the next claim's sweep
    /// removes every generation listed below it.
    ///
    /// A removal that fails (permission, a key directory that became a symbolic
    /// link) is dropped, as the protocol would ignore its error.
    pub fn settle(&self) {
        self.shared.removals.settle();
    }

    fn key_dir(&self, key: &Key) -> PathBuf {
        self.claims.join(key.as_str())
    }

    fn record_path(&self, key: &Key, generation: u64) -> PathBuf {
        self.key_dir(key).join(layout::record_file_name(generation))
    }

    /// Creates the key directory (and `claims/`) if missing; refuses one that is a
    /// symbolic link or not a directory. Once per handle and key: then remembered.
    fn ensure_key_dir(&self, key: &Key, dir: &Path) -> Result<(), BackendError> {
        if self.shared.dir_checked(key) {
            return Ok(());
        }
        self.make_key_dir(dir)?;
        self.shared.mark_dir_checked(key);
        Ok(())
    }

    fn make_key_dir(&self, dir: &Path) -> Result<(), BackendError> {
        let fail = |path: &Path, e: io::Error| BackendError::new("create", path.display(), e);
        match fs::create_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match fs::create_dir(&self.claims) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        check_real_dir(&self.claims).map_err(|e| fail(&self.claims, e))?;
                    }
                    Err(e) => return Err(fail(&self.claims, e)),
                }
                match fs::create_dir(dir) {
                    Ok(()) => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(fail(dir, e)),
                }
            }
            Err(e) => return Err(fail(dir, e)),
        }
        check_real_dir(dir).map_err(|e| fail(dir, e))
    }

    /// Writes `bytes` to a fresh staging file in `dir` (flushed if `flush`) and
    /// returns its path and, open, the file. A staging file that cannot be completed
    /// is removed.
    fn stage(
        &self,
        dir: &Path,
        bytes: &[u8],
        flush: bool,
    ) -> Result<(PathBuf, fs::File), BackendError> {
        let mut attempts = 0;
        let (path, mut file) = loop {
            let path = dir.join(layout::staging_file_name());
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => break (path, file),
                Err(e)
                    if e.kind() == io::ErrorKind::AlreadyExists
                        && attempts + 1 < STAGING_NAME_ATTEMPTS =>
                {
                    attempts += 1;
                }
                Err(e) => return Err(BackendError::new("create", path.display(), e)),
            }
        };
        let written = file
            .write_all(bytes)
            .and_then(|()| if flush { file.sync_all() } else { Ok(()) });
        match written {
            Ok(()) => Ok((path, file)),
            Err(e) => {
                let _ = fs::remove_file(&path);
                Err(BackendError::new("create", path.display(), e))
            }
        }
    }

    /// The fallback for filesystems without hard links: exclusive create of the
    /// final name, then write. A reader may see the record empty or partial until the
    /// write completes (it decodes as torn); a failed write leaves it torn for good,
    /// and the protocol supersedes it.
    fn create_in_place(
        &self,
        path: &Path,
        bytes: &[u8],
        flush: bool,
    ) -> Result<CreateOutcome, BackendError> {
        let fail = |e: io::Error| BackendError::new("create", path.display(), e);
        let mut file = match OpenOptions::new().write(true).create_new(true).open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Ok(CreateOutcome::AlreadyExists);
            }
            Err(e) => return Err(fail(e)),
        };
        #[cfg(test)]
        if let Some(delay) = *self.shared.write_delay.lock().unwrap() {
            std::thread::sleep(delay);
        }
        file.write_all(bytes).map_err(fail)?;
        if flush {
            file.sync_all().map_err(fail)?;
        }
        Ok(CreateOutcome::Created)
    }

    /// Creates record `path` in `key_dir` exclusively, by the best procedure this
    /// filesystem allows (docs/design-07-performance.md): a nameless file linked
    /// into place (Linux `O_TMPFILE`), else a staging file linked into place, else
    /// (no hard links) the record name itself. With `flush` the record's file is
    /// flushed; the directory flushes follow in [`flush_names`](Self::flush_names).
    ///
    /// Returns the outcome and, for a nameless file, the key directory's open handle
    /// (`sys::Nameless`), through which [`flush_names`](Self::flush_names) flushes it.
    fn create_record(
        &self,
        key_dir: &Path,
        path: &Path,
        bytes: &[u8],
        flush: bool,
    ) -> Result<(CreateOutcome, Option<sys::Nameless>), BackendError> {
        if self.shared.links_unsupported.load(Ordering::Relaxed) {
            return Ok((self.create_in_place(path, bytes, flush)?, None));
        }
        if !self.shared.anonymous_unsupported.load(Ordering::Relaxed) {
            match sys::anonymous_file(key_dir) {
                Ok(Some(nameless)) => {
                    return self.publish_anonymous(nameless, path, bytes, flush);
                }
                Ok(None) => self
                    .shared
                    .anonymous_unsupported
                    .store(true, Ordering::Relaxed),
                Err(e) => return Err(BackendError::new("create", key_dir.display(), e)),
            }
        }
        let flush_first = flush && !sys::FLUSH_AFTER_LINK;
        let (staged, file) = self.stage(key_dir, bytes, flush_first)?;
        if !sys::FLUSH_AFTER_LINK {
            drop(file);
            let published = publish(&staged, path);
            // Always, whatever the link did: the record (if any) has its own name now.
            let _ = fs::remove_file(&staged);
            return Ok((self.published(published, path, bytes, flush)?, None));
        }
        let published = publish(&staged, path);
        let _ = fs::remove_file(&staged);
        let outcome = self.published(published, path, bytes, flush)?;
        if outcome == CreateOutcome::Created && flush {
            // The file is flushed after the link: one journal commit carries the
            // data, the new name and the staging name's removal.
            file.sync_all()
                .map_err(|e| BackendError::new("create", path.display(), e))?;
        }
        Ok((outcome, None))
    }

    /// What a link's result means; a link the filesystem does not support switches
    /// this handle to the in-place fallback and creates there.
    fn published(
        &self,
        published: io::Result<CreateOutcome>,
        path: &Path,
        bytes: &[u8],
        flush: bool,
    ) -> Result<CreateOutcome, BackendError> {
        match published {
            Ok(outcome) => Ok(outcome),
            Err(e) if sys::links_unsupported(&e) => {
                self.shared.links_unsupported.store(true, Ordering::Relaxed);
                self.create_in_place(path, bytes, flush)
            }
            Err(e) => Err(BackendError::new("create", path.display(), e)),
        }
    }

    /// Writes `bytes` to the nameless `file`, links it to `path` (exclusive: fails
    /// when the name exists), then with `flush` flushes it: one journal commit for
    /// data and name. Readers see the name only once the bytes are complete; a crash
    /// before the link leaves nothing at all.
    fn publish_anonymous(
        &self,
        mut nameless: sys::Nameless,
        path: &Path,
        bytes: &[u8],
        flush: bool,
    ) -> Result<(CreateOutcome, Option<sys::Nameless>), BackendError> {
        let fail = |e: io::Error| BackendError::new("create", path.display(), e);
        nameless.file.write_all(bytes).map_err(fail)?;
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .expect("a record path ends in its record name");
        let linked = match sys::link_anonymous(&nameless, name) {
            Ok(linked) => linked,
            Err(e) if sys::links_unsupported(&e) => {
                drop(nameless);
                self.shared.links_unsupported.store(true, Ordering::Relaxed);
                return Ok((self.create_in_place(path, bytes, flush)?, None));
            }
            Err(e) => return Err(fail(e)),
        };
        if !linked {
            return Ok((CreateOutcome::AlreadyExists, None));
        }
        if flush {
            nameless.file.sync_all().map_err(fail)?;
        }
        Ok((CreateOutcome::Created, Some(nameless)))
    }

    /// Makes a created record's name durable: its key directory, then (once per
    /// handle and key) `claims/`, and (once per handle) the root and its parent.
    ///
    /// Every handle does the `claims/` and root flushes itself before its first
    /// acknowledged claim, instead of trusting whoever created those directories: a
    /// rival may have created them a moment ago and not have flushed them yet.
    fn flush_names(
        &self,
        key: &Key,
        key_dir: &Path,
        open: Option<&sys::Nameless>,
    ) -> Result<(), BackendError> {
        let fail = |path: &Path, e: io::Error| BackendError::new("create", path.display(), e);
        match open {
            Some(nameless) => sys::sync_dir_of(nameless),
            None => sys::sync_dir(key_dir),
        }
        .map_err(|e| fail(key_dir, e))?;
        let mut flushed = self
            .shared
            .keys_flushed
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if flushed.contains(key) {
            return Ok(());
        }
        sys::sync_dir(&self.claims).map_err(|e| fail(&self.claims, e))?;
        if !self.shared.root_flushed.load(Ordering::Acquire) {
            sys::sync_dir(&self.root).map_err(|e| fail(&self.root, e))?;
            if let Some(parent) = self.root.parent() {
                // Best effort: the parent may be readable only by others; the root's
                // own entry was flushed when open created it.
                let _ = sys::sync_dir(parent);
            }
            self.shared.root_flushed.store(true, Ordering::Release);
        }
        flushed.insert(key.clone());
        Ok(())
    }

    /// Removes staging files in `dir` older than [`STALE_STAGING_AGE`] (left behind
    /// by crashed writers), best effort.
    fn remove_stale_staging(dir: &Path, name: &str) {
        let path = dir.join(name);
        let Ok(metadata) = fs::symlink_metadata(&path) else {
            return;
        };
        let age = metadata
            .modified()
            .ok()
            .and_then(|modified| SystemTime::now().duration_since(modified).ok());
        if age.is_some_and(|age| age > STALE_STAGING_AGE) {
            let _ = fs::remove_file(&path);
        }
    }
}

impl LeaseStore for FsStore {
    /// Creates `claims/<key>/g<generation>.json` with `bytes`, only if that name is
    /// free.
    ///
    /// On Linux the bytes go to a nameless file in the key directory (`O_TMPFILE`,
    /// relative to the directory opened with `O_NOFOLLOW`), which is then
    /// hard-linked to the record name (`linkat` of the handle, `AT_EMPTY_PATH`, or
    /// through `/proc/self/fd` where the kernel refuses that); the link fails when
    /// the name exists. Where there is no
    /// `O_TMPFILE`, a staging file (`.stage-<pid>-<hex>.tmp`, created exclusively in
    /// the key directory) takes its place and its name is removed after the link.
    ///
    /// # Atomicity
    ///
    /// Of concurrent creates of one generation, from any process, exactly one link
    /// succeeds. A name that is free is created, whatever the newest generation: one
    /// a sweep removed can be created again below the newest (a slow create, or a
    /// renewal from a lease's remembered record, landing after the sweep), so this
    /// backend does not keep the second promise of docs/protocol.md R5; the
    /// protocol's confirming reads and listings are what catch such a record. Readers never see a partial record: the name appears only once the
    /// bytes are complete. On a filesystem without hard links (detected from the
    /// link error, then remembered) the record is created in place with
    /// `create_new` and written: still exclusive, but readers may briefly see it
    /// empty or partial (torn).
    ///
    /// # Crash safety
    ///
    /// With [`Durability::Flushed`] the record's file is flushed, then the key
    /// directory, before returning; before its first flushed create of a key, a store
    /// handle (with its clones) also flushes `claims/`, the root and the root's
    /// parent. On POSIX the file is flushed *after* the link (one journal commit
    /// carries data and name; Windows flushes before it), so a power cut before the
    /// create returned may leave the name with its data lost: it reads as torn and
    /// is superseded (docs/protocol.md §3.5), and nobody was told it was created. A
    /// process crash leaves no record or a complete one, plus possibly a staging
    /// file, removed once it is older than ten minutes (a nameless file leaves
    /// nothing). [`Durability::Unflushed`] skips every flush. Which flush is needed
    /// where, with measurements: docs/design-07-performance.md.
    ///
    /// # Errors
    ///
    /// `Ok(`[`CreateOutcome::AlreadyExists`]`)` only when the record name exists.
    /// Everything else, including a full disk, permission denied, a read-only store
    /// and a key directory that is a symbolic link, is a [`BackendError`] naming the
    /// path: the outcome is then unknown and the protocol re-reads (docs/protocol.md I4).
    fn create(
        &self,
        key: &Key,
        generation: u64,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<CreateOutcome, BackendError> {
        let flush = self.flush && durability == Durability::Flushed;
        let key_dir = self.key_dir(key);
        let path = key_dir.join(layout::record_file_name(generation));
        if generation == 0 {
            return Err(BackendError::new(
                "create",
                path.display(),
                io::Error::new(io::ErrorKind::InvalidInput, "generations start at 1"),
            ));
        }
        self.ensure_key_dir(key, &key_dir)?;
        let (outcome, open) = match self.create_record(&key_dir, &path, bytes, flush) {
            // The key directory vanished after this handle checked it (removed by
            // hand): make it again, once. The create failed before any name existed.
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.shared.forget_dir(key) => {
                self.ensure_key_dir(key, &key_dir)?;
                self.create_record(&key_dir, &path, bytes, flush)?
            }
            outcome => outcome?,
        };
        if outcome == CreateOutcome::Created && flush {
            self.flush_names(key, &key_dir, open.as_ref())?;
        }
        Ok(outcome)
    }

    /// Lists the generations in `claims/<key>/`: every name that is exactly a record
    /// name (`g` + at least 8 digits, no extra leading zeros, + `.json`), whatever
    /// kind of entry it is, since it occupies that generation — and, on a filesystem
    /// that ignores case (NTFS, APFS), a name that is a record name in another ASCII
    /// case (`G00000002.JSON`), which occupies it there too. Other names are
    /// skipped; staging files older than ten minutes are removed on the way.
    ///
    /// # Errors
    ///
    /// A missing key directory is an empty list. A [`BackendError`] (operation
    /// `list`) when the key directory is a symbolic link or not a directory, or
    /// cannot be read.
    fn generations(&self, key: &Key) -> Result<Vec<u64>, BackendError> {
        let dir = self.key_dir(key);
        // Removals this handle queued read as made (`remove_superseded`); taken
        // before the directory is read (see `Removals::pending_of`).
        let hidden = self.shared.removals.pending_of(key);
        let mut generations = Vec::new();
        let mut stale = Vec::new();
        let listed = sys::list_names(&dir, &mut |name| {
            if let Some(generation) = layout::parse_record_file_name(name) {
                generations.push(generation);
            } else if let Some(generation) = layout::parse_record_file_name_any_case(name) {
                // `G00000002.JSON`: where names match regardless of case (NTFS, APFS)
                // it takes generation 2's name, and a create of it fails; unlisted, the
                // protocol would retry that create forever. Where case matters the
                // record name does not resolve and is still free.
                let exact = dir.join(layout::record_file_name(generation));
                match fs::symlink_metadata(&exact) {
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    _ => generations.push(generation),
                }
            } else if layout::is_staging_file_name(name) {
                stale.push(name.to_string());
            }
        });
        match listed {
            Ok(()) => self.shared.mark_dir_checked(key),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(BackendError::new("list", dir.display(), e)),
        }
        for name in stale {
            Self::remove_stale_staging(&dir, &name);
        }
        // `g00000002.json` and `G00000002.JSON` side by side (where case matters)
        // are one generation.
        generations.sort_unstable();
        generations.dedup();
        #[cfg(test)]
        self.shared.removals.listed();
        if !hidden.is_empty() {
            generations.retain(|g| !hidden.contains(g));
        }
        Ok(generations)
    }

    /// Reads `claims/<key>/g<generation>.json` whole.
    ///
    /// # Atomicity
    ///
    /// A record is published complete (see [`create`](LeaseStore::create)), so the
    /// bytes are the whole record, except on filesystems without hard links, where a
    /// create in progress may read as empty or partial (torn).
    ///
    /// # Errors
    ///
    /// `Ok(None)` when the record (or its key directory) does not exist. A record
    /// name that is a symbolic link, a directory or another non-regular file reads as
    /// empty bytes (a torn record, superseded by the protocol); it is never followed.
    /// A [`BackendError`] (operation `read`) naming the path for anything else,
    /// including a key directory that is a symbolic link and a record that cannot be
    /// opened or read (permissions: never guessed to be torn, as it may be a live
    /// claim of another user).
    fn read(&self, key: &Key, generation: u64) -> Result<Option<Vec<u8>>, BackendError> {
        if generation == 0 || self.shared.removals.hides(key, generation) {
            // Queued for removal by this handle: it reads as removed.
            return Ok(None);
        }
        let dir = self.key_dir(key);
        if !self.shared.dir_checked(key) {
            match check_real_dir(&dir) {
                Ok(()) => self.shared.mark_dir_checked(key),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(BackendError::new("read", dir.display(), e)),
            }
        }
        let path = dir.join(layout::record_file_name(generation));
        // A symlink, directory, FIFO or socket under a record's name occupies the
        // generation but holds no record: it reads as empty, which the protocol
        // treats as torn and supersedes (docs/protocol.md §3.5), instead of blocking
        // the key and failing every `status` (found by the breaker trial). Never
        // followed.
        sys::read_record(&path).map_err(|e| BackendError::new("read", path.display(), e))
    }

    /// Deletes `claims/<key>/g<generation>.json` (a symbolic link by that name is
    /// removed itself, never its target).
    ///
    /// # Crash safety
    ///
    /// Not flushed: a removal lost in a power cut leaves a superseded record behind,
    /// which is harmless. The protocol removes only records below a flushed claim of
    /// its own, so the series never empties (docs/protocol.md §3.6).
    ///
    /// # Errors
    ///
    /// A missing record or key directory is success. A [`BackendError`] (operation
    /// `remove`) when the key directory is a symbolic link or the removal fails
    /// (permission, a directory by that name).
    fn remove(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
        if generation == 0 {
            return Ok(());
        }
        // Relative to the key directory opened without following a link: one
        // swapped for a link after this handle last checked it (a queue's
        // directory, between a release's listing and its removals: found by the
        // breaker) is refused, never followed.
        let dir = self.key_dir(key);
        sys::remove_in(&dir, &layout::record_file_name(generation)).map_err(|e| {
            BackendError::new("remove", self.record_path(key, generation).display(), e)
        })
    }

    /// Removes `claims/<key>/g<generation>.json`, superseded by a claim the protocol
    /// flushed and confirmed, **on this handle's removal thread** (on Unix; on
    /// Windows in line, as [`remove`](LeaseStore::remove)): it returns without
    /// waiting for the disk, and the removal is made moments later (where the
    /// filesystem discards freed blocks online, an `unlink` of a flushed record waits
    /// for the device: docs/design-07-performance.md, "What the floors leave out").
    /// [`FsStore::settle`] waits for it.
    ///
    /// Queued only now, so never made before this call (the protocol calls it only
    /// after the superseding claim's flush returned). Through this handle and its
    /// clones the record reads as removed at once: listings leave it out, a read
    /// returns `None`. The thread checks the key directory right before the removal
    /// (a directory swapped for a symbolic link meanwhile is refused, never
    /// followed) and removes a record name that is a link itself, never its target.
    /// At most 64 removals wait; beyond that, when this handle has not checked
    /// the key directory within the last second, and when the name is not a regular
    /// file (a link, a directory or a FIFO someone planted: foreign, so removed now),
    /// the removal is made here, as [`remove`](LeaseStore::remove) does. A removal left queued by a killed
    /// process leaves a superseded record behind, which is harmless.
    ///
    /// # Errors
    ///
    /// As [`remove`](LeaseStore::remove) when made here; a queued removal that fails
    /// is dropped (the protocol ignores the error either way).
    fn remove_superseded(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
        if generation == 0 {
            return Ok(());
        }
        // The thread is used on Unix, where its gain was measured (a removal that
        // waits for a discard); on Windows removals stay in line, with the
        // sharing-violation behaviour its tests pin (backends/fs/tests/windows.rs).
        if cfg!(unix) && self.shared.dir_checked(key) {
            let dir = self.key_dir(key);
            let path = dir.join(layout::record_file_name(generation));
            // Only a regular file, as this protocol writes them, is left to the
            // thread: a name that is anything else (a link, a directory, a FIFO
            // planted there) is foreign and goes now, as before, never later.
            let regular = fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
            if regular
                && self.shared.removals.queue(key, generation, &dir, path) == removals::Queued::Yes
            {
                return Ok(());
            }
        }
        self.remove(key, generation)
    }

    /// Removes `claims/<key>/` when it is empty (`rmdir`): the last step of
    /// removing an ended participant series (docs/protocol.md §3.6). A directory
    /// that is not empty (a record or staging file landed meanwhile) or missing is
    /// left alone: success. Never follows a link: on POSIX `rmdir` refuses a
    /// symbolic link in place of the directory itself (`ENOTDIR`); elsewhere the
    /// directory is checked to be a real one first, as [`remove`](LeaseStore::remove)
    /// does. This handle forgets its check of the directory, so its next create
    /// makes it again (a create racing the removal through another handle makes it
    /// again too: one that finds it gone makes it once more).
    ///
    /// # Errors
    ///
    /// A [`BackendError`] (operation `remove key`) naming the directory when it is
    /// a symbolic link or not a directory, or cannot be removed (permission; on
    /// Windows, a directory another process has open).
    fn remove_key_if_empty(&self, key: &Key) -> Result<(), BackendError> {
        let dir = self.key_dir(key);
        self.shared.forget_dir(key);
        sys::remove_empty_dir(&dir).map_err(|e| BackendError::new("remove key", dir.display(), e))
    }

    /// Lists the directories in `claims/` whose names are keys
    /// ([`Key::parse`]), and key-named symbolic links: such a link is never followed,
    /// so every operation on its key fails, and listing it lets `status` show the key
    /// as unreadable instead of hiding it (issue 19). Other names, and key-named
    /// regular files, are skipped.
    ///
    /// # Errors
    ///
    /// A missing `claims/` is an empty list. A [`BackendError`] (operation `list`)
    /// when `claims/` is a symbolic link or cannot be read.
    fn keys(&self) -> Result<Vec<Key>, BackendError> {
        let fail = |e: io::Error| BackendError::new("list", self.claims.display(), e);
        match check_real_dir(&self.claims) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(fail(e)),
        }
        let mut keys = Vec::new();
        for entry in fs::read_dir(&self.claims).map_err(fail)? {
            let entry = entry.map_err(fail)?;
            let Some(key) = entry.file_name().to_str().and_then(Key::parse) else {
                continue;
            };
            // `DirEntry::file_type` does not follow links.
            if entry
                .file_type()
                .is_ok_and(|t| t.is_dir() || t.is_symlink())
            {
                keys.push(key);
            }
        }
        Ok(keys)
    }

    /// A change notification on the key's directory (Linux inotify): every record
    /// created in it — a release's tombstone, a claim, a renewal — wakes the
    /// waiter. `None` where there is none (other platforms, no inotify, the key
    /// directory missing or not a real directory): the protocol then polls.
    fn watch_changes(&self, key: &Key) -> Option<Box<dyn ChangeWatch>> {
        let dir = self.key_dir(key);
        check_real_dir(&dir).ok()?;
        let watch = match self.shared.idle_watches.take(&dir) {
            Some(watch) => watch,
            None => sys::watch_dir(&dir)?,
        };
        Some(Box::new(FsChangeWatch {
            watch: Some(watch),
            dir,
            shared: Arc::clone(&self.shared),
        }))
    }

    /// A watch on ticket `ticket` of `key`'s wait queue (Linux inotify on the
    /// ticket file), rung by [`ring`](LeaseStore::ring). `None` where there is
    /// none, or when the queue directory is not a real directory or the ticket is
    /// gone: the waiter then sleeps on the key directory's watch.
    fn watch_ticket(&self, key: &Key, ticket: u64) -> Option<Box<dyn ChangeWatch>> {
        // Checked every time (inotify takes a path, not a directory handle): a
        // queue directory swapped for a link is not watched through.
        let dir = self.key_dir(&key.queue());
        check_real_dir(&dir).ok()?;
        let path = dir.join(layout::record_file_name(ticket));
        let watch = sys::watch_ticket(self.shared.blank_watches.take(), &path)?;
        Some(Box::new(FsTicketWatch {
            watch: Some(watch),
            shared: Arc::clone(&self.shared),
        }))
    }

    /// Rings ticket `ticket` of `key`'s queue: sets its times (`IN_ATTRIB` for its
    /// watch), relative to the queue directory opened without following a link: a
    /// ticket that is a link is touched itself, and a queue directory that is a
    /// link (even one swapped in since this handle last looked) is not rung. Errors (the ticket
    /// gone, no permission) are ignored: the waiter reads again within
    /// [`CHANGE_WAIT_MAX`](fencepost::CHANGE_WAIT_MAX) anyway.
    fn ring(&self, key: &Key, ticket: u64) {
        let dir = self.key_dir(&key.queue());
        let _ = sys::ring(&dir, &layout::record_file_name(ticket));
    }

    /// True where key directories can be watched (Linux, with inotify): waiters
    /// there sleep on notifications and queue for turns, so a release looks for the
    /// next in line.
    fn notifies_changes(&self) -> bool {
        cfg!(any(target_os = "linux", target_os = "android"))
    }

    /// The store root as an absolute path. Exact: [`FsStore::open`] refuses a root
    /// that is not valid UTF-8, so the locator opens this same directory again.
    fn locator(&self) -> String {
        self.root.to_string_lossy().into_owned()
    }
}

/// [`ChangeWatch`] over a key directory's notification; given back to its store
/// handle's idle watches when dropped.
struct FsChangeWatch {
    watch: Option<sys::DirWatch>,
    dir: PathBuf,
    shared: Arc<Shared>,
}

impl ChangeWatch for FsChangeWatch {
    fn wait(&mut self, timeout: Duration) -> bool {
        self.watch.as_mut().is_some_and(|w| w.wait(timeout))
    }
}

impl Drop for FsChangeWatch {
    fn drop(&mut self) {
        if let Some(watch) = self.watch.take() {
            self.shared
                .idle_watches
                .give_back(std::mem::take(&mut self.dir), watch);
        }
    }
}

/// [`ChangeWatch`] over a queued waiter's ticket; its inotify instance goes back
/// to its store handle's blank watches when dropped.
struct FsTicketWatch {
    watch: Option<sys::TicketWatch>,
    shared: Arc<Shared>,
}

impl ChangeWatch for FsTicketWatch {
    fn wait(&mut self, timeout: Duration) -> bool {
        self.watch.as_mut().is_some_and(|w| w.wait(timeout))
    }
}

impl Drop for FsTicketWatch {
    fn drop(&mut self) {
        if let Some(watch) = self.watch.take() {
            self.shared.blank_watches.give_back(watch.into_blank());
        }
    }
}

/// Hard-links the complete staging file `staged` to the record name `path`.
///
/// `AlreadyExists` from the link normally means another writer holds the name. But
/// a link over NFS can land and still report `EEXIST` (the reply was lost and the
/// retried request found the name taken — by this very link), so the staging
/// file's link count decides: 2 means the name is ours. Nothing else ever links a
/// staging file, so a count of 2 cannot mean anything else.
fn publish(staged: &Path, path: &Path) -> io::Result<CreateOutcome> {
    match fs::hard_link(staged, path) {
        Ok(()) => Ok(CreateOutcome::Created),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            if sys::link_count(staged) == Some(2) {
                Ok(CreateOutcome::Created)
            } else {
                Ok(CreateOutcome::AlreadyExists)
            }
        }
        Err(e) => Err(e),
    }
}

/// Creates the store directory and its missing parents, then flushes each directory
/// that gained an entry (POSIX), so a claim acknowledged in the new store cannot
/// lose its whole store to a power cut.
fn create_store_dir(root: &Path) -> io::Result<()> {
    let existing = root
        .ancestors()
        .skip(1)
        .find(|dir| dir.is_dir())
        .map(Path::to_path_buf);
    if let Err(e) = fs::create_dir_all(root) {
        return Err(explain_non_directory_ancestor(root, e));
    }
    if let Some(existing) = existing {
        // Every directory from the deepest pre-existing ancestor down to the root's
        // parent gained an entry. Best effort for the pre-existing one (it may not be
        // ours to open).
        for dir in root.ancestors().skip(1) {
            if dir == existing {
                let _ = sys::sync_dir(dir);
                break;
            }
            sys::sync_dir(dir)?;
        }
    }
    Ok(())
}

/// Writes `<root>/.gitignore` holding `*` when `root` lies in a git work tree and
/// has no `.gitignore` yet (an existing one, whatever it says, is the user's).
fn ignore_in_work_tree(root: &Path) -> io::Result<()> {
    if !locate::in_work_tree(root) {
        return Ok(());
    }
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(root.join(".gitignore"))
    {
        Ok(mut file) => file.write_all(b"*\n"),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Rewrites "not a directory" into "`<ancestor>` is a file, not a directory" when a
/// component of `path` is a regular file, so the user sees which one.
fn explain_non_directory_ancestor(path: &Path, error: io::Error) -> io::Error {
    let culprit = path
        .ancestors()
        .skip(1)
        .find(|dir| fs::metadata(dir).is_ok_and(|m| !m.is_dir()));
    match culprit {
        Some(file) => io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is a file, not a directory", file.display()),
        ),
        None => error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        fencepost::Resource::lock(name).identity().unwrap().key
    }

    fn record_dir_names(store: &FsStore, key: &Key) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(store.key_dir(key))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// The three durable-create procedures (nameless file linked into place, staging
    /// file linked into place, record name written in place), each forced in turn:
    /// exclusive among 8 racing threads, the winner's bytes complete, nothing left
    /// behind but records. docs/design-07-performance.md.
    #[test]
    fn every_create_procedure_is_exclusive_and_leaves_only_records() {
        for (procedure, anonymous_off, links_off) in [
            ("nameless file + link", false, false),
            ("staging file + link", true, false),
            ("in place", true, true),
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let store = FsStore::open(tmp.path()).unwrap();
            store
                .shared
                .anonymous_unsupported
                .store(anonymous_off, Ordering::Relaxed);
            store
                .shared
                .links_unsupported
                .store(links_off, Ordering::Relaxed);
            let k = key("procedure");
            for generation in 1..=3u64 {
                let outcomes: Vec<(usize, CreateOutcome)> = std::thread::scope(|scope| {
                    let handles: Vec<_> = (0..8)
                        .map(|i| {
                            let store = store.clone();
                            let k = k.clone();
                            scope.spawn(move || {
                                let bytes = format!("writer {i} of generation {generation}");
                                let durability = if i % 2 == 0 {
                                    Durability::Flushed
                                } else {
                                    Durability::Unflushed
                                };
                                (
                                    i,
                                    store
                                        .create(&k, generation, bytes.as_bytes(), durability)
                                        .unwrap(),
                                )
                            })
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().unwrap()).collect()
                });
                let winners: Vec<usize> = outcomes
                    .iter()
                    .filter(|(_, o)| *o == CreateOutcome::Created)
                    .map(|(i, _)| *i)
                    .collect();
                assert_eq!(winners.len(), 1, "{procedure}: {outcomes:?}");
                assert_eq!(
                    store.read(&k, generation).unwrap().unwrap(),
                    format!("writer {} of generation {generation}", winners[0]).as_bytes(),
                    "{procedure}"
                );
            }
            assert_eq!(
                record_dir_names(&store, &k),
                ["g00000001.json", "g00000002.json", "g00000003.json"],
                "{procedure}"
            );
            // The procedure forced is the one used (nothing fell back on its own).
            assert_eq!(
                store.shared.links_unsupported.load(Ordering::Relaxed),
                links_off,
                "{procedure}"
            );
        }
    }

    /// On Linux a create uses a nameless `O_TMPFILE` file: the filesystems CI runs
    /// on have it, so the fast procedure is the one tested everywhere else too.
    #[cfg(target_os = "linux")]
    #[test]
    fn linux_creates_use_a_nameless_file() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        let k = key("nameless");
        store.create(&k, 1, b"one", Durability::Flushed).unwrap();
        assert!(
            !store.shared.anonymous_unsupported.load(Ordering::Relaxed),
            "O_TMPFILE was not used on this filesystem"
        );
        assert_eq!(store.read(&k, 1).unwrap().unwrap(), b"one");
        // Each later flushed create flushes its key directory once (through the
        // handle the nameless file was made in); an unflushed one flushes none.
        let flushes = || sys::DIR_FLUSHES.with(std::cell::Cell::get);
        let before = flushes();
        store.create(&k, 2, b"two", Durability::Flushed).unwrap();
        assert_eq!(flushes() - before, 1);
        store
            .create(&k, 3, b"three", Durability::Unflushed)
            .unwrap();
        assert_eq!(flushes() - before, 1);
    }

    /// A key directory removed by hand after this handle made it is made again by
    /// the next create (the handle's memory of it is dropped, not trusted).
    #[test]
    fn a_key_directory_removed_by_hand_is_made_again() {
        for anonymous_off in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let store = FsStore::open(tmp.path()).unwrap();
            store
                .shared
                .anonymous_unsupported
                .store(anonymous_off, Ordering::Relaxed);
            let k = key("removed-dir");
            store.create(&k, 1, b"one", Durability::Flushed).unwrap();
            fs::remove_file(store.record_path(&k, 1)).unwrap();
            fs::remove_dir(store.key_dir(&k)).unwrap();
            assert_eq!(
                store.create(&k, 2, b"two", Durability::Flushed).unwrap(),
                CreateOutcome::Created
            );
            assert_eq!(store.read(&k, 2).unwrap().unwrap(), b"two");
        }
    }

    /// The names of record files in `key`'s directory, as another process sees
    /// them (not through the handle, which hides removals it queued).
    fn records_on_disk(store: &FsStore, k: &Key) -> Vec<String> {
        let mut names: Vec<String> = match fs::read_dir(store.key_dir(k)) {
            Ok(entries) => entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| layout::parse_record_file_name(n).is_some())
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        names
    }

    /// The sweep after a claim goes to the removal thread: queued removals read as
    /// made through the handle at once (listing, read), are on disk until the
    /// thread makes them, and are gone after `settle`.
    #[cfg(unix)] // the removal thread is Unix only
    #[test]
    fn a_queued_removal_reads_as_made_and_is_made_by_settle() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        let k = key("queued");
        for g in 1..=3 {
            store.create(&k, g, b"x", Durability::Flushed).unwrap();
        }
        assert_eq!(store.generations(&k).unwrap(), [1, 2, 3]);
        store.shared.removals.pause(true);
        store.remove_superseded(&k, 1).unwrap();
        store.remove_superseded(&k, 2).unwrap();
        assert_eq!(store.shared.removals.pending(), 2);
        assert_eq!(
            store.generations(&k).unwrap(),
            [3],
            "hidden through the handle"
        );
        assert_eq!(store.read(&k, 1).unwrap(), None);
        assert_eq!(records_on_disk(&store, &k).len(), 3, "not made yet");
        store.shared.removals.pause(false);
        store.settle();
        assert_eq!(store.shared.removals.pending(), 0);
        assert_eq!(records_on_disk(&store, &k), ["g00000003.json"]);
        assert_eq!(store.generations(&k).unwrap(), [3]);
    }

    /// A removal the thread finishes while a listing reads the directory still
    /// reads as made: the listing saw the record, and the queue no longer has it
    /// (CI caught this once in the conformance scenario
    /// `sweep_never_removes_newest`: "acquire left superseded records").
    #[cfg(unix)]
    #[test]
    fn a_removal_made_during_a_listing_is_left_out() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        let k = key("mid-listing");
        for g in 1..=3 {
            store.create(&k, g, b"x", Durability::Flushed).unwrap();
        }
        store.shared.removals.pause(true);
        store.remove_superseded(&k, 1).unwrap();
        store.remove_superseded(&k, 2).unwrap();
        store.shared.removals.settle_mid_next_listing();
        assert_eq!(store.generations(&k).unwrap(), [3]);
        assert_eq!(store.shared.removals.pending(), 0, "made mid-listing");
        assert_eq!(records_on_disk(&store, &k), ["g00000003.json"]);
    }

    /// (a) Bounded: after many renewals and acquire + release rounds and a settle,
    /// the series on disk holds no more records than before them.
    #[test]
    fn renewals_and_handoffs_leave_the_series_bounded_after_settle() {
        use fencepost::{AcquireOptions, Resource, Store};
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        let fenced = Store::new(store.clone());
        let lock = Resource::lock("bounded");
        let k = lock.identity().unwrap().key;
        let options = AcquireOptions::new(60_000);
        let mut lease = fenced.acquire(&lock, &options).unwrap();
        store.settle();
        let before = records_on_disk(&store, &k).len();
        for _ in 0..40 {
            fenced.renew(&mut lease).unwrap();
        }
        fenced.release(&lease).unwrap();
        for _ in 0..40 {
            let lease = fenced.acquire(&lock, &options).unwrap();
            fenced.release(&lease).unwrap();
        }
        let mut lease = fenced.acquire(&lock, &options).unwrap();
        fenced.renew(&mut lease).unwrap();
        store.settle();
        let after = records_on_disk(&store, &k);
        assert!(
            after.len() <= before,
            "{before} records before, after: {after:?}"
        );
    }

    /// (b) Dropping the last clone of the handle drains its queue: with a slow disk
    /// and removals queued, nothing that should have gone is left behind.
    #[cfg(unix)] // the removal thread is Unix only
    #[test]
    fn dropping_the_handle_drains_its_removals() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        let k = key("drained");
        for g in 1..=9 {
            store.create(&k, g, b"x", Durability::Unflushed).unwrap();
        }
        store.generations(&k).unwrap();
        store.shared.removals.slow_down(Duration::from_millis(20));
        for g in 1..=8 {
            store.remove_superseded(&k, g).unwrap();
        }
        let clone = store.clone();
        let other = FsStore::open(tmp.path()).unwrap();
        drop(store);
        assert_eq!(
            records_on_disk(&other, &k).len(),
            9,
            "a clone keeps the queue"
        );
        drop(clone);
        assert_eq!(records_on_disk(&other, &k), ["g00000009.json"]);
    }

    /// (c) The thread checks the key directory itself: one swapped for a symbolic
    /// link after the removal was queued (within the handle's one-second trust) is
    /// refused, never followed; and a record name that is a link is removed
    /// itself, never its target.
    #[cfg(unix)]
    #[test]
    fn a_queued_removal_never_follows_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path().join("store")).unwrap();
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).unwrap();

        // A record name that is a link: the link goes, its target stays.
        let k = key("record-link");
        store.create(&k, 2, b"x", Durability::Flushed).unwrap();
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(outside.join("target.json"))
            .unwrap()
            .write_all(b"not ours")
            .unwrap();
        std::os::unix::fs::symlink(outside.join("target.json"), store.record_path(&k, 1)).unwrap();
        assert_eq!(store.generations(&k).unwrap(), [1, 2]);
        store.remove_superseded(&k, 1).unwrap();
        store.settle();
        assert_eq!(records_on_disk(&store, &k), ["g00000002.json"]);
        assert_eq!(fs::read(outside.join("target.json")).unwrap(), b"not ours");

        // The key directory swapped for a link between the queueing and the removal.
        let k = key("swapped-later");
        store.create(&k, 1, b"one", Durability::Flushed).unwrap();
        store.create(&k, 2, b"two", Durability::Flushed).unwrap();
        assert_eq!(store.generations(&k).unwrap(), [1, 2]);
        store.shared.removals.pause(true);
        store.remove_superseded(&k, 1).unwrap();
        let moved = tmp.path().join("moved");
        fs::create_dir(&moved).unwrap();
        for name in record_dir_names(&store, &k) {
            fs::hard_link(store.key_dir(&k).join(&name), moved.join(&name)).unwrap();
            fs::remove_file(store.key_dir(&k).join(&name)).unwrap();
        }
        fs::remove_dir(store.key_dir(&k)).unwrap();
        std::os::unix::fs::symlink(&moved, store.key_dir(&k)).unwrap();
        assert!(store.shared.dir_checked(&k), "still trusted by the handle");
        store.shared.removals.pause(false);
        store.settle();
        assert!(
            moved.join("g00000001.json").exists(),
            "the removal followed the swapped-in link"
        );
    }

    /// (d) At most `QUEUE_MAX` removals wait: one more is made on the caller's
    /// thread before `remove_superseded` returns.
    #[cfg(unix)] // the removal thread is Unix only
    #[test]
    fn a_full_queue_removes_inline() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        let k = key("full");
        let max = removals::QUEUE_MAX as u64;
        for g in 1..=max + 2 {
            store.create(&k, g, b"x", Durability::Unflushed).unwrap();
        }
        store.generations(&k).unwrap();
        store.shared.removals.pause(true);
        for g in 1..=max {
            store.remove_superseded(&k, g).unwrap();
        }
        assert_eq!(store.shared.removals.pending(), removals::QUEUE_MAX);
        assert!(store.record_path(&k, max).exists(), "queued, not made");
        store.remove_superseded(&k, max + 1).unwrap();
        assert_eq!(store.shared.removals.pending(), removals::QUEUE_MAX);
        assert!(
            !store.record_path(&k, max + 1).exists(),
            "the removal past the bound was not made inline"
        );
        store.shared.removals.pause(false);
        store.settle();
        assert_eq!(records_on_disk(&store, &k).len(), 1);
    }

    /// `remove_key_if_empty` removes an empty key directory (no longer listed by
    /// `keys`), leaves one with a record, succeeds on a missing one, and this handle
    /// makes the directory again on its next create; a key directory that is a
    /// symbolic link is refused, and neither it nor its (empty) target is removed.
    #[test]
    fn an_empty_key_directory_is_removed_and_a_link_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path().join("store")).unwrap();
        let (k, full) = (key("lock-emptied"), key("lock-kept"));
        store.create(&k, 1, b"one", Durability::Flushed).unwrap();
        store.create(&full, 1, b"one", Durability::Flushed).unwrap();
        store.remove(&k, 1).unwrap();
        store.remove_key_if_empty(&k).unwrap();
        store.remove_key_if_empty(&full).unwrap();
        assert!(!store.key_dir(&k).exists());
        assert_eq!(store.keys().unwrap(), vec![full.clone()]);
        assert_eq!(store.generations(&full).unwrap(), vec![1]);
        store.remove_key_if_empty(&k).unwrap();
        assert_eq!(
            store.create(&k, 2, b"two", Durability::Flushed).unwrap(),
            CreateOutcome::Created
        );
        assert_eq!(store.generations(&k).unwrap(), vec![2]);
        #[cfg(unix)]
        {
            let linked = key("lock-linked");
            let outside = tmp.path().join("outside");
            fs::create_dir(&outside).unwrap();
            std::os::unix::fs::symlink(&outside, store.key_dir(&linked)).unwrap();
            assert!(store.remove_key_if_empty(&linked).is_err());
            assert!(outside.is_dir(), "the link's target was removed");
            assert!(
                fs::symlink_metadata(store.key_dir(&linked))
                    .unwrap()
                    .file_type()
                    .is_symlink()
            );
        }
    }

    /// A key directory swapped for a symbolic link after this handle checked it is
    /// refused by the very next listing (which every protocol operation starts with),
    /// and by a bare read once the handle's check is older than `DIR_CHECK_FRESH`.
    #[cfg(unix)]
    #[test]
    fn a_key_directory_swapped_for_a_link_after_use_is_refused() {
        use fencepost::{Resource, Store};
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path().join("store")).unwrap();
        let resource = Resource::lock("swapped");
        let k = resource.identity().unwrap().key;
        let fenced = Store::new(store.clone());
        let lease = fenced
            .acquire(&resource, &fencepost::AcquireOptions::new(60_000))
            .unwrap();
        assert!(fenced.check(&resource, lease.token()).unwrap());
        // Swap: the real directory moves away, a link to a copy takes its place.
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).unwrap();
        for name in record_dir_names(&store, &k) {
            fs::hard_link(store.key_dir(&k).join(&name), outside.join(&name)).unwrap();
            fs::remove_file(store.key_dir(&k).join(&name)).unwrap();
        }
        fs::remove_dir(store.key_dir(&k)).unwrap();
        std::os::unix::fs::symlink(&outside, store.key_dir(&k)).unwrap();

        let error = fenced.check(&resource, lease.token()).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        let error = store.generations(&k).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        std::thread::sleep(DIR_CHECK_FRESH + Duration::from_millis(50));
        let error = store.read(&k, lease.token()).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        let error = store.create(&k, 9, b"x", Durability::Flushed).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
    }

    /// A FIFO named like a record reads as torn at once (never blocks the reader),
    /// a regular record larger than the read buffer reads whole.
    #[cfg(unix)]
    #[test]
    fn a_fifo_reads_as_torn_and_a_large_record_reads_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        let k = key("odd-records");
        store.create(&k, 1, b"1", Durability::Unflushed).unwrap();
        let fifo = store.record_path(&k, 2);
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(store.read(&k, 2).unwrap(), Some(Vec::new()));
        let big: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        store.create(&k, 3, &big, Durability::Flushed).unwrap();
        assert_eq!(store.read(&k, 3).unwrap().unwrap(), big);
        assert_eq!(store.read(&k, 4).unwrap(), None);
    }

    /// The change notification (Linux inotify): a wait times out while nothing
    /// lands, and returns once a record is created in the key's directory by
    /// another handle; a key with no directory has no watch (the protocol polls).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_watch_wakes_on_a_new_record_and_times_out_without_one() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        let k = key("watched");
        assert!(store.watch_changes(&k).is_none(), "a watch on no directory");
        store.create(&k, 1, b"one", Durability::Unflushed).unwrap();
        let mut watch = store.watch_changes(&k).expect("inotify on this machine");
        assert!(!watch.wait(Duration::from_millis(30)), "woken by nothing");
        let other = FsStore::open(tmp.path()).unwrap();
        let writer = {
            let k = k.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                other.create(&k, 2, b"two", Durability::Flushed).unwrap();
            })
        };
        let started = Instant::now();
        assert!(
            watch.wait(Duration::from_secs(30)),
            "the new record did not wake it"
        );
        assert!(started.elapsed() < Duration::from_secs(20));
        writer.join().unwrap();
        // A change that landed before the wait is not lost: it is pending.
        store
            .create(&k, 3, b"three", Durability::Unflushed)
            .unwrap();
        assert!(
            watch.wait(Duration::from_secs(30)),
            "a pending change was lost"
        );
    }

    /// A queued waiter's ticket watch (Linux inotify): a new record of the key
    /// does not wake it, a ring of its own ticket does and one of another ticket
    /// does not, a ring before the wait is pending, not lost, and a ticket removed
    /// (passed over) wakes its waiter. Its inotify instance is kept blank for the next ticket, with no stale
    /// event left in it. Pinned for docs/design-07-performance.md, "Who is woken:
    /// rings".
    #[cfg(target_os = "linux")]
    #[test]
    fn a_ticket_watch_wakes_on_its_own_ring_only() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        let other = FsStore::open(tmp.path()).unwrap();
        let k = key("rung");
        let queue = k.queue();
        let quiet = Duration::from_millis(30);
        let long = Duration::from_secs(30);
        store.create(&k, 1, b"one", Durability::Unflushed).unwrap();
        assert!(store.watch_ticket(&k, 1).is_none(), "a watch on no queue");
        other.ring(&k, 1);
        for ticket in [1, 2] {
            store
                .create(&queue, ticket, b"ticket", Durability::Unflushed)
                .unwrap();
        }
        // No watch on a ticket that is not there (the trait's promise: a waiter
        // that just joined trusts its watch to hear the ticket's removal).
        assert!(store.watch_ticket(&k, 9).is_none(), "a watch on no ticket");
        let mut first = store.watch_ticket(&k, 1).expect("inotify on this machine");
        let mut second = store.watch_ticket(&k, 2).expect("inotify on this machine");
        assert!(
            store.watch_ticket(&k, 9).is_none(),
            "a watch on a ticket that is not there"
        );
        other.create(&k, 2, b"two", Durability::Flushed).unwrap();
        assert!(!first.wait(quiet), "woken by a record of the key");
        other.ring(&k, 1);
        assert!(first.wait(long), "its own ring did not wake it");
        assert!(!second.wait(quiet), "woken by another ticket's ring");
        assert!(!first.wait(quiet), "one ring woke it twice");
        other.ring(&k, 2);
        other.ring(&k, 2);
        assert!(second.wait(long), "a ring before the wait was lost");
        assert!(!first.wait(quiet), "woken by another ticket's ring");
        other.remove(&queue, 2).unwrap();
        assert!(second.wait(long), "its ticket's removal did not wake it");
        drop(second);
        drop(first);
        assert_eq!(store.shared.blank_watches.0.lock().unwrap().len(), 2);
        store
            .create(&queue, 3, b"ticket", Durability::Unflushed)
            .unwrap();
        let mut third = store.watch_ticket(&k, 3).unwrap();
        assert_eq!(store.shared.blank_watches.0.lock().unwrap().len(), 1);
        assert!(
            !third.wait(quiet),
            "a kept instance woke on its last use's events"
        );
        other.ring(&k, 3);
        assert!(third.wait(long), "a kept instance missed its ring");
    }

    /// A ring never follows a symbolic link: a link under a ticket's name is
    /// touched itself, its target keeps its times; and nothing in a queue
    /// directory that is a link is rung or watched.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_ring_never_follows_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path().join("store")).unwrap();
        let k = key("linked");
        let queue = k.queue();
        store
            .create(&queue, 1, b"ticket", Durability::Unflushed)
            .unwrap();
        let outside = tmp.path().join("outside");
        write_new(&outside);
        let old = filetime_of(&outside);
        std::os::unix::fs::symlink(&outside, store.record_path(&queue, 2)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        store.ring(&k, 2);
        assert_eq!(filetime_of(&outside), old, "the ring followed the link");
        // The whole queue directory swapped for a link to a directory outside,
        // which holds files by tickets' names, right after this handle listed the
        // queue (so it trusts its check of the directory): a release's ring and
        // removals there must not follow it (found by the breaker).
        let elsewhere = tmp.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        let decoy = elsewhere.join(layout::record_file_name(1));
        write_new(&decoy);
        let before = filetime_of(&decoy);
        let mut listed = store.generations(&queue).unwrap();
        listed.sort_unstable();
        assert_eq!(listed, vec![1, 2]);
        for name in fs::read_dir(store.key_dir(&queue)).unwrap() {
            fs::remove_file(name.unwrap().path()).unwrap();
        }
        fs::remove_dir(store.key_dir(&queue)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, store.key_dir(&queue)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        store.ring(&k, 1);
        assert_eq!(
            filetime_of(&decoy),
            before,
            "a ticket in a linked queue was rung"
        );
        assert!(
            store.remove(&queue, 1).is_err(),
            "a removal through a linked queue"
        );
        assert!(decoy.exists(), "a removal followed the linked queue");
        assert!(
            store.watch_ticket(&k, 1).is_none(),
            "a watch through a linked queue"
        );
    }

    /// A file under a record's name larger than any record (`RECORD_MAX_BYTES`)
    /// reads as empty (torn), after one bounded read: a planted file of any size
    /// costs neither its size in memory nor its size in reading (found by the
    /// breaker: a 1 GiB ticket was read whole by every release). A record longer
    /// than the one-read buffer is still read whole.
    #[test]
    fn a_file_larger_than_any_record_reads_as_torn() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        let k = key("big");
        store.create(&k, 1, b"one", Durability::Unflushed).unwrap();
        let long = vec![b'x'; 10_000];
        store.create(&k, 2, &long, Durability::Unflushed).unwrap();
        assert_eq!(store.read(&k, 2).unwrap().as_deref(), Some(&long[..]));
        let huge = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(store.record_path(&k, 3))
            .unwrap();
        // Sparse: no disk is spent on it. (A planted foreign file, not a record.)
        #[allow(clippy::disallowed_methods)]
        huge.set_len(64 << 30).unwrap();
        drop(huge);
        assert_eq!(store.read(&k, 3).unwrap(), Some(Vec::new()));
    }

    #[cfg(target_os = "linux")]
    fn write_new(path: &Path) {
        use std::io::Write;
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .unwrap();
        file.write_all(b"not ours").unwrap();
    }

    #[cfg(target_os = "linux")]
    fn filetime_of(path: &Path) -> (i64, i64) {
        use std::os::unix::fs::MetadataExt;
        let meta = fs::metadata(path).unwrap();
        (meta.mtime(), meta.mtime_nsec())
    }

    /// A watch is kept for the next wait when dropped (closing one costs the kernel
    /// milliseconds, which a waiter that just won its claim would pay while holding
    /// it: the handoff bench's 8 ms); what came while it was idle does not wake the
    /// next waiter (its read after the watch sees it), and a watch whose directory
    /// was removed and made again is closed, not reused: the new one wakes.
    #[cfg(target_os = "linux")]
    #[test]
    fn an_idle_watch_is_reused_unless_its_directory_went_away() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        let idle = |store: &FsStore| store.shared.idle_watches.0.lock().unwrap().len();
        let k = key("pooled");
        store.create(&k, 1, b"one", Durability::Unflushed).unwrap();
        drop(store.watch_changes(&k).expect("inotify on this machine"));
        assert_eq!(idle(&store), 1, "a dropped watch is kept");
        // A change while idle: drained when taken, so no stale wake-up.
        store.create(&k, 2, b"two", Durability::Unflushed).unwrap();
        let mut watch = store.watch_changes(&k).unwrap();
        assert_eq!(
            idle(&store),
            0,
            "the kept watch was taken, not a new one made"
        );
        assert!(
            !watch.wait(Duration::from_millis(30)),
            "woken by an old change"
        );
        store
            .create(&k, 3, b"three", Durability::Unflushed)
            .unwrap();
        assert!(
            watch.wait(Duration::from_secs(30)),
            "a reused watch missed a change"
        );
        drop(watch);
        assert_eq!(idle(&store), 1);
        // The key directory removed by hand and made again: the kept watch watches
        // nothing now; it must be closed and a new one made.
        let dir = store.key_dir(&k);
        for g in 1..=3 {
            std::fs::remove_file(store.record_path(&k, g)).unwrap();
        }
        std::fs::remove_dir(&dir).unwrap();
        std::fs::create_dir(&dir).unwrap();
        let mut watch = store.watch_changes(&k).unwrap();
        store.create(&k, 4, b"four", Durability::Unflushed).unwrap();
        assert!(
            watch.wait(Duration::from_secs(30)),
            "a watch of the removed directory was reused"
        );
        drop(watch);
        for n in 0..IDLE_WATCHES_MAX + 3 {
            let k = key(&format!("many-{n}"));
            store.create(&k, 1, b"one", Durability::Unflushed).unwrap();
            drop(store.watch_changes(&k).unwrap());
        }
        assert_eq!(idle(&store), IDLE_WATCHES_MAX, "idle watches are bounded");
    }

    /// The fallback for filesystems without hard links (forced here: this machine's
    /// filesystem has them) keeps create exclusive and leaves no staging files.
    #[test]
    fn fallback_without_hard_links_is_still_exclusive() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        store
            .shared
            .links_unsupported
            .store(true, Ordering::Relaxed);
        let k = key("fallback");
        assert_eq!(
            store.create(&k, 1, b"first", Durability::Flushed).unwrap(),
            CreateOutcome::Created
        );
        assert_eq!(
            store.create(&k, 1, b"second", Durability::Flushed).unwrap(),
            CreateOutcome::AlreadyExists
        );
        assert_eq!(store.read(&k, 1).unwrap().unwrap(), b"first");
        assert_eq!(record_dir_names(&store, &k), ["g00000001.json"]);

        let winners: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let store = store.clone();
                    let k = k.clone();
                    scope.spawn(move || {
                        store.create(
                            &k,
                            2,
                            format!("writer {i}").as_bytes(),
                            Durability::Unflushed,
                        )
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap().unwrap())
                .filter(|outcome| *outcome == CreateOutcome::Created)
                .count()
        });
        assert_eq!(winners, 1);
        assert_eq!(
            record_dir_names(&store, &k),
            ["g00000001.json", "g00000002.json"]
        );
    }

    /// A link that landed but reported `EEXIST` (a retried NFS request) is ours: the
    /// staging file's link count says so. A name taken by someone else is not.
    #[cfg(unix)]
    /// Issue 11 "torn renewal taken over": without hard links (forced) and with
    /// slow writes, waiters used to read a holder's renewal half-written as a
    /// vacancy and take over a live, on-schedule lease (13 of ~41 tenures in 15 s).
    /// A torn newest record is now a create in progress: no live lease is lost.
    #[test]
    fn without_hard_links_and_slow_writes_no_live_lease_is_taken_over() {
        use fencepost::{AcquireOptions, Error, Resource, Store};
        use std::sync::atomic::AtomicUsize;
        use std::time::{Duration, Instant};

        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        store
            .shared
            .links_unsupported
            .store(true, Ordering::Relaxed);
        *store.shared.write_delay.lock().unwrap() = Some(Duration::from_millis(2));
        let lock = Resource::lock("contended");
        let ttl_ms = 600;
        let tenures = AtomicUsize::new(0);
        let stolen = AtomicUsize::new(0);
        let until = Instant::now() + Duration::from_secs(4);
        std::thread::scope(|scope| {
            for n in 0..3 {
                let store = Store::new(store.clone());
                let (lock, tenures, stolen) = (&lock, &tenures, &stolen);
                scope.spawn(move || {
                    let options = AcquireOptions::new(ttl_ms)
                        .owner(format!("h{n}"))
                        .wait_ms(3_000);
                    while Instant::now() < until {
                        let Ok(mut lease) = store.acquire(lock, &options) else {
                            continue;
                        };
                        tenures.fetch_add(1, Ordering::Relaxed);
                        let mut renewed_at = Instant::now();
                        for _ in 0..4 {
                            std::thread::sleep(Duration::from_millis(ttl_ms / 6));
                            match store.renew(&mut lease) {
                                Ok(()) => renewed_at = Instant::now(),
                                // Lost although renewed well inside its ttl: taken over.
                                Err(Error::Superseded { .. })
                                    if renewed_at.elapsed() < Duration::from_millis(ttl_ms / 2) =>
                                {
                                    stolen.fetch_add(1, Ordering::Relaxed);
                                    break;
                                }
                                Err(_) => break,
                            }
                        }
                        let _ = store.release(&lease);
                    }
                });
            }
        });
        let tenures = tenures.into_inner();
        assert!(
            tenures >= 6,
            "only {tenures} tenures: no contention to judge"
        );
        assert_eq!(
            stolen.into_inner(),
            0,
            "live, on-schedule leases were taken over (of {tenures} tenures)"
        );
    }

    #[test]
    fn publish_trusts_the_link_count_over_eexist() {
        let tmp = tempfile::tempdir().unwrap();
        let write = |name: &str| {
            let path = tmp.path().join(name);
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .unwrap()
                .write_all(name.as_bytes())
                .unwrap();
            path
        };
        let ours = write(".stage-1-1.tmp");
        let record = tmp.path().join("g00000001.json");
        fs::hard_link(&ours, &record).unwrap(); // the first, "lost" reply
        assert_eq!(publish(&ours, &record).unwrap(), CreateOutcome::Created);
        let theirs = write(".stage-1-2.tmp");
        assert_eq!(
            publish(&theirs, &record).unwrap(),
            CreateOutcome::AlreadyExists
        );
        let fresh = write(".stage-1-3.tmp");
        let free = tmp.path().join("g00000002.json");
        assert_eq!(publish(&fresh, &free).unwrap(), CreateOutcome::Created);
        assert_eq!(fs::read(&free).unwrap(), b".stage-1-3.tmp");
    }

    /// docs/protocol.md §3.6, durability: a flushed create flushes `claims/` and the root once per
    /// process; unflushed creates and `with_flush(false)` flush nothing.
    #[test]
    fn staging_file_is_removed_and_names_are_flushed_once() {
        let tmp = tempfile::tempdir().unwrap();
        let store = FsStore::open(tmp.path()).unwrap();
        let k = key("flushed-once");
        store.create(&k, 1, b"a", Durability::Flushed).unwrap();
        assert!(store.shared.root_flushed.load(Ordering::Acquire));
        assert!(store.shared.keys_flushed.lock().unwrap().contains(&k));
        let unflushed = key("never-flushed");
        store
            .create(&unflushed, 1, b"a", Durability::Unflushed)
            .unwrap();
        assert!(
            !store
                .shared
                .keys_flushed
                .lock()
                .unwrap()
                .contains(&unflushed)
        );
        let off = FsStore::open(tmp.path()).unwrap().with_flush(false);
        let k3 = key("flush-off");
        off.create(&k3, 1, b"a", Durability::Flushed).unwrap();
        assert!(!off.shared.keys_flushed.lock().unwrap().contains(&k3));
        assert_eq!(record_dir_names(&store, &k), ["g00000001.json"]);
    }
}

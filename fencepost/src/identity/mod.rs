//! Resources, and the keys that name their claim series (docs/protocol.md §6).
//!
//! Two spellings of one resource must produce one key: a split identity gives two
//! writers an uncontested lease each, and no fence repairs that. Where a step is
//! ambiguous the rule merges (a false contention clears itself). The rules, and the
//! test that proves each, are in `docs/design-02-resource-identity.md`.
//!
//! - `sys/` — per platform: the bytes a resolved path's key is derived from, and the
//!   file id (device, inode and birth time) of an existing file.
//! - `windows_rules` — the Windows spelling rules as pure functions, tested on every
//!   platform.
//!
//! No file identity is cached: every call resolves through the filesystem again. A
//! cache keyed by spelling would go on answering a file's old identity after a
//! symlink was retargeted or a missing parent created, splitting one file into two
//! keys for a long-lived process (the MCP server); resolving costs a few `stat`s per
//! operation. A lock's identity depends on its name alone, so the last one is kept
//! per thread (`lock_identity`).

mod spellings;
mod sys;
mod windows_rules;

pub use windows_rules::reserved_device_name;

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use unicode_normalization::UnicodeNormalization;

use crate::{Error, Result};

/// Hex digits of SHA-256 kept in a key: 128 bits, far beyond any collision risk for
/// the keys one store holds, and short enough for every filesystem's name limit.
const KEY_HASH_HEX_DIGITS: usize = 32;

/// What is claimed: a named lock, a file in the working tree, or a directory and
/// everything below it (a subtree).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Resource {
    /// A named lock such as `db:migrations`. Names are trimmed, stripped of invisible
    /// characters, normalized and case-folded, so `DB:Migrations `, `db:migrations`
    /// and `db:\u{200B}migrations` are one lock, as are `Straße` and `STRASSE`.
    Lock(String),
    /// A file, existing or not yet created. Relative paths are resolved against the
    /// working directory at the time of each call.
    File(PathBuf),
    /// A directory and every path below it, existing or not (a subtree claim,
    /// docs/design-05-subtrees-and-shared.md). It conflicts with a claim of any file
    /// or directory below it and with a subtree claim of any directory above it.
    /// Resolved like a file path.
    Dir(PathBuf),
    /// Slot `n` (from 1) of the lock named as in [`Resource::Lock`]: one of the N
    /// separately fenced tenures of a lock that up to N holders share
    /// ([`crate::Store::acquire_slot`]). Its own series, apart from the lock's.
    Slot(String, u32),
}

impl Resource {
    /// A named lock. Validation happens when the key is derived
    /// ([`Resource::identity`]).
    pub fn lock(name: impl Into<String>) -> Self {
        Resource::Lock(name.into())
    }

    /// A file path, absolute or relative to the working directory.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Resource::File(path.into())
    }

    /// A directory path (a subtree claim), absolute or relative to the working
    /// directory.
    pub fn dir(path: impl Into<PathBuf>) -> Self {
        Resource::Dir(path.into())
    }

    /// Slot `slot` (from 1) of the lock `name`.
    pub fn slot(name: impl Into<String>, slot: u32) -> Self {
        Resource::Slot(name.into(), slot)
    }

    /// `lock`, `file`, `dir` or `slot`.
    pub fn kind(&self) -> &'static str {
        match self {
            Resource::Lock(_) => "lock",
            Resource::File(_) => "file",
            Resource::Dir(_) => "dir",
            Resource::Slot(..) => "slot",
        }
    }

    /// The text the caller gave (the lock name, or the path; a slot as
    /// `NAME#SLOT`), for messages.
    pub fn target(&self) -> String {
        match self {
            Resource::Lock(name) => name.clone(),
            Resource::File(path) | Resource::Dir(path) => path.display().to_string(),
            Resource::Slot(name, slot) => format!("{name}#{slot}"),
        }
    }

    /// The slot number of a [`Resource::Slot`].
    pub fn slot_number(&self) -> Option<u32> {
        match self {
            Resource::Slot(_, slot) => Some(*slot),
            _ => None,
        }
    }

    /// Resolves the resource to the keys of its claim series, plus the label stored in
    /// records for `status`.
    ///
    /// Locks: trimmed, invisible characters dropped, case-folded (full Unicode case
    /// folding); empty names and names with control characters are rejected. Files: made absolute against the working directory,
    /// the deepest existing ancestor resolved through the OS (symlinks and `..` the
    /// way the kernel resolves them; a dangling symlink is followed to the file it
    /// would create), the remaining components appended with `.` dropped and `..`
    /// applied (and after a `..`, the result resolved again: it can climb back into
    /// existing directories and links), so a file has one key before and after it
    /// exists; then NFC-normalized
    /// and case-folded (on Windows, through the Windows spelling rules). A file that
    /// exists also gets a [`file_id`](Identity::file_id) key from its device and
    /// inode, so two hard links to it contend. Slots: the lock's canonical name and
    /// the slot number (from 1; 0 is rejected). Lock keys start `lock-`, file keys
    /// `file-`, file-id keys `inode-`, slot keys `slot-`: the namespaces never collide.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidResource`] for a rejected lock name, an empty path, a path
    /// that cannot be made absolute (no working directory), or on Windows a file
    /// named as a reserved device ([`reserved_device_name`]: `CON`, `NUL.json`).
    pub fn identity(&self) -> Result<Identity> {
        match self {
            Resource::Slot(name, slot) => {
                if *slot == 0 {
                    return Err(Error::InvalidResource(
                        "slots are numbered from 1; slot 0 does not exist".into(),
                    ));
                }
                let lock = Resource::Lock(name.clone()).identity()?;
                let canonical = canonical_lock_name(name)?;
                Ok(Identity {
                    path: None,
                    key: Key::derive("slot", format!("{canonical}\u{0}{slot}").as_bytes()),
                    label: format!("{}#{slot}", lock.label),
                    file_id: None,
                })
            }
            Resource::Lock(name) => lock_identity(name),
            Resource::File(path) => {
                let absolute = absolute_file(path)?;
                let resolved = resolve(&absolute, SYMLINK_LIMIT);
                within_limits(&resolved, path)?;
                if resolved.is_dir() {
                    return Err(Error::InvalidResource(format!(
                        "{} is a directory, and a file resource must be a file; claim the \
                         directory and everything below it with a subtree claim (--dir), or a \
                         file in it",
                        path.display()
                    )));
                }
                let shown = sys::display_path(&resolved);
                Ok(Identity {
                    key: Key::derive("file", &sys::path_material(&resolved)),
                    label: shown.display().to_string(),
                    file_id: sys::file_id(&resolved).map(|id| Key::derive("inode", id.as_bytes())),
                    path: Some(shown),
                })
            }
            Resource::Dir(path) => {
                let resolved = resolve_dir(path)?;
                let shown = sys::display_path(&resolved);
                Ok(Identity {
                    key: Key::derive("dir", &sys::path_material(&resolved)),
                    label: shown.display().to_string(),
                    file_id: None,
                    path: Some(shown),
                })
            }
        }
    }

    /// Where a file or subtree claim sits in the directory tree: its own key, and for
    /// every directory above it (the root first) that directory's subtree key and
    /// index key (docs/design-05-subtrees-and-shared.md §2). `None` for a lock.
    /// Built from the same resolved path as [`Resource::identity`] (resolved again:
    /// no identity is cached), by lexical steps up, so a file that does not exist yet,
    /// a symlinked directory and a `..` spelling share one chain.
    ///
    /// # Errors
    ///
    /// As [`Resource::identity`].
    pub(crate) fn tree_chain(&self) -> Result<Option<TreeChain>> {
        let (resolved, own) = match self {
            Resource::Lock(_) | Resource::Slot(..) => return Ok(None),
            Resource::File(path) => {
                let key = self.identity()?.key;
                let absolute = std::path::absolute(path).map_err(|e| {
                    Error::InvalidResource(format!("cannot make {} absolute: {e}", path.display()))
                })?;
                (resolve(&absolute, SYMLINK_LIMIT), key)
            }
            Resource::Dir(path) => {
                let resolved = resolve_dir(path)?;
                let key = Key::derive("dir", &sys::path_material(&resolved));
                (resolved, key)
            }
        };
        let own_index = matches!(self, Resource::Dir(_))
            .then(|| Key::derive("tree", &sys::path_material(&resolved)));
        // A subtree covers its directory itself: the other kind's key of the same
        // path is checked as a directory above is.
        let same_path = Key::derive(
            if matches!(self, Resource::Dir(_)) {
                "file"
            } else {
                "dir"
            },
            &sys::path_material(&resolved),
        );
        let label = sys::display_path(&resolved).display().to_string();
        let mut above: Vec<TreeDir> = resolved
            .ancestors()
            .skip(1)
            .map(|dir| {
                let material = sys::path_material(dir);
                TreeDir {
                    subtree: Key::derive("dir", &material),
                    index: Key::derive("tree", &material),
                    label: sys::display_path(dir).display().to_string(),
                }
            })
            .collect();
        above.reverse();
        Ok(Some(TreeChain {
            own,
            own_index,
            same_path,
            label,
            above,
        }))
    }

    /// The subtree keys of every directory above this resource (for a file or a
    /// directory; none for a lock): a live subtree claim in any of them covers it.
    /// With [`Resource::identity`]'s key of a [`Resource::Dir`], this is how a
    /// tool tells whether one claim covers another.
    ///
    /// # Errors
    ///
    /// As [`Resource::identity`].
    pub fn subtree_keys_above(&self) -> Result<Vec<Key>> {
        Ok(self
            .tree_chain()?
            .map(|chain| chain.above.into_iter().map(|d| d.subtree).collect())
            .unwrap_or_default())
    }

    /// The series whose records in a store show that claims touching this
    /// resource were made there: its own series ([`Resource::own_history_keys`]),
    /// then the other kind's key of the same path, the subtree key of every
    /// directory above it, and for a directory the index its covered claims
    /// register in. Empty for a lock or a slot, whose name is scoped by its store. A
    /// store locator uses them to keep a file's claims in the store they were made
    /// in after the layout around the file changed (`fencepost_fs::locate_store`,
    /// docs/protocol.md §5).
    ///
    /// # Errors
    ///
    /// As [`Resource::identity`].
    pub fn history_keys(&self) -> Result<Vec<Key>> {
        let Some(chain) = self.tree_chain()? else {
            return Ok(Vec::new());
        };
        let mut keys = self.own_history_keys()?;
        keys.push(chain.same_path);
        keys.extend(chain.own_index);
        keys.extend(chain.above.into_iter().map(|d| d.subtree));
        Ok(keys)
    }

    /// The series that number this resource's own tenures: its keys
    /// ([`Identity::keys`]) and the participant index of each (`shares-…`, where
    /// shared claims of it register). A store that holds one of them holds the
    /// resource's tokens, so a locator prefers it to a store that holds only claims
    /// around it ([`Resource::history_keys`]): its tokens then keep increasing
    /// (a breaker: a subtree claim of a parent made in a new store pulled a file's
    /// next claim there, and its token fell from 14 to 1). Empty for a lock or a
    /// slot.
    ///
    /// # Errors
    ///
    /// As [`Resource::identity`].
    pub fn own_history_keys(&self) -> Result<Vec<Key>> {
        if !matches!(self, Resource::File(_) | Resource::Dir(_)) {
            return Ok(Vec::new());
        }
        let own = self.identity()?.keys();
        let shares: Vec<Key> = own.iter().map(Key::shares).collect();
        Ok(own.into_iter().chain(shares).collect())
    }
}

/// A directory above a claimed path: its subtree claim series and its index.
#[derive(Debug, Clone)]
pub(crate) struct TreeDir {
    /// `dir-…`: subtree claims of this directory.
    pub(crate) subtree: Key,
    /// `tree-…`: what was ever claimed directly in it, and its child directories
    /// with entries.
    pub(crate) index: Key,
    /// The directory's resolved path, for index entries.
    pub(crate) label: String,
}

/// A claimed path's place in the tree (see [`Resource::tree_chain`]).
#[derive(Debug, Clone)]
pub(crate) struct TreeChain {
    /// The claim's own key (`file-…` or `dir-…`).
    pub(crate) own: Key,
    /// For a subtree claim, the index of the directory itself (walked to find claims
    /// below it).
    pub(crate) own_index: Option<Key>,
    /// The claim key of the other kind at the same path (`dir-P` for a file claim
    /// of `P`, `file-D` for a subtree claim of `D`): a subtree covers its own
    /// path, so the two conflict (docs/design-05-subtrees-and-shared.md §1).
    pub(crate) same_path: Key,
    /// The claimed path as records label it.
    pub(crate) label: String,
    /// Every directory above, the root first, the parent last.
    pub(crate) above: Vec<TreeDir>,
}

impl Key {
    /// The `link-` marker key that an index entry of `index` pointing to `points_to`
    /// exists (docs/design-05-subtrees-and-shared.md §3.1).
    pub(crate) fn link(index: &Key, points_to: &Key) -> Key {
        let mut material = index.as_str().as_bytes().to_vec();
        material.push(0);
        material.extend_from_slice(points_to.as_str().as_bytes());
        Key::derive("link", &material)
    }

    /// The index of the shared participants of the claim series `self`
    /// (`shares-…`, canonical: the key's text). docs/format-v1.md §3.6.
    ///
    /// The last one this thread derived is kept: an exclusive claim looks for shared
    /// participants twice (before and after its create), so it would hash the same
    /// key twice (docs/design-07-performance.md). A pure function of `self`, so the
    /// kept one is what deriving gives (pinned by
    /// `the_kept_shares_index_is_the_derived_one`).
    pub(crate) fn shares(&self) -> Key {
        use std::cell::RefCell;
        thread_local! {
            static LAST: RefCell<Option<(Key, Key)>> = const { RefCell::new(None) };
        }
        let derive = || Key::derive("shares", self.as_str().as_bytes());
        LAST.try_with(|last| {
            let mut last = last.borrow_mut();
            match last.as_ref() {
                Some((of, index)) if of == self => index.clone(),
                _ => {
                    let index = derive();
                    *last = Some((self.clone(), index.clone()));
                    index
                }
            }
        })
        .unwrap_or_else(|_| derive())
    }

    /// Whether this is a shared tenure's own series ([`Key::share`]).
    pub(crate) fn is_share(&self) -> bool {
        self.0.starts_with("share-")
    }

    /// One shared tenure's own series (`share-…`, canonical: `key || 0x00 || holder
    /// id`): where it renews and releases.
    pub(crate) fn share(&self, holder_id: &str) -> Key {
        let mut material = self.as_str().as_bytes().to_vec();
        material.push(0);
        material.extend_from_slice(holder_id.as_bytes());
        Key::derive("share", &material)
    }

    /// The waiting writers' intent of the claim series `self` (`want-…`, canonical:
    /// the key's text): while it is live no shared claimer is admitted.
    pub(crate) fn intent(&self) -> Key {
        Key::derive("want", self.as_str().as_bytes())
    }

    /// The wait queue of the claim series `self` (`queue-…`, canonical: the key's
    /// text): one ticket per waiter sleeping on a change notification, in arrival
    /// order, from which a contended release names the next holder
    /// (docs/design-07-performance.md, "Who is woken: turns"). Public for backends:
    /// [`LeaseStore::watch_ticket`](crate::LeaseStore::watch_ticket) and
    /// [`LeaseStore::ring`](crate::LeaseStore::ring) take the claim's key and act
    /// on this one.
    pub fn queue(&self) -> Key {
        Key::derive("queue", self.as_str().as_bytes())
    }

    /// True for keys of claim series (`lock-`, `file-`, `inode-`, `dir-`); false for
    /// the index and marker keys of subtree claims (`tree-`, `link-`), the shared
    /// participants' index (`shares-`) and wait queues (`queue-`), which hold no
    /// tenure.
    pub fn is_claim(&self) -> bool {
        !(self.0.starts_with("tree-")
            || self.0.starts_with("link-")
            || self.0.starts_with("shares-")
            || self.0.starts_with("queue-"))
    }
}

/// The longest resolved path a file or subtree claim names, in bytes: the longest
/// path Linux opens (`PATH_MAX`); a longer one can never be a file there.
pub const PATH_LIMIT_BYTES: usize = 4096;

/// The most directories a file or subtree claim's resolved path has above it: a
/// claim is indexed in every directory above it (docs/design-05-subtrees-and-shared.md
/// §3.1), two records each, so an unbounded depth let one claim write hundreds of
/// megabytes (a breaker: 20,000 levels, 662 MB, 58 s). Far deeper than any tree.
pub const DEPTH_LIMIT: usize = 256;

/// Refuses a resolved path beyond [`PATH_LIMIT_BYTES`] or [`DEPTH_LIMIT`], naming
/// `given` (what the caller passed) and what to do.
fn within_limits(resolved: &Path, given: &Path) -> Result<()> {
    let bytes = resolved.as_os_str().len();
    if bytes > PATH_LIMIT_BYTES {
        return Err(Error::InvalidResource(format!(
            "the path {} is {bytes} bytes long once resolved, over the {PATH_LIMIT_BYTES} \
             bytes a path may have; claim a shorter path",
            shorten(given)
        )));
    }
    let depth = resolved.components().count();
    if depth > DEPTH_LIMIT {
        return Err(Error::InvalidResource(format!(
            "the path {} is {depth} levels deep once resolved, over the {DEPTH_LIMIT} a \
             claim may have; claim a directory higher up (--dir) instead",
            shorten(given)
        )));
    }
    Ok(())
}

/// `path` as shown in a refusal: at most its first 60 characters, then `…`.
fn shorten(path: &Path) -> String {
    let text = path.display().to_string();
    match text.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// Resolves a subtree claim's directory as a file path is resolved; an existing
/// path that is not a directory is refused.
fn resolve_dir(path: &Path) -> Result<PathBuf> {
    if path.as_os_str().is_empty() {
        return Err(Error::InvalidResource("the directory path is empty".into()));
    }
    let absolute = std::path::absolute(path).map_err(|e| {
        Error::InvalidResource(format!("cannot make {} absolute: {e}", path.display()))
    })?;
    let resolved = resolve(&absolute, SYMLINK_LIMIT);
    within_limits(&resolved, path)?;
    if resolved.exists() && !resolved.is_dir() {
        return Err(Error::InvalidResource(format!(
            "{} is a file, and a subtree claim names a directory; claim the file itself \
             (--file), or its directory",
            path.display()
        )));
    }
    Ok(resolved)
}

/// A file resource's path made absolute against the working directory, refusing
/// what can never be a file: an empty path, and on Windows a reserved device name
/// (`NUL.json` in any directory is the NUL device: a claim on it would guard
/// nothing, and a write to it would vanish).
fn absolute_file(path: &Path) -> Result<PathBuf> {
    if path.as_os_str().is_empty() {
        return Err(Error::InvalidResource("the file path is empty".into()));
    }
    if cfg!(windows)
        && let Some(device) = path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(reserved_device_name)
    {
        return Err(Error::InvalidResource(format!(
            "{} names the Windows device {device}, not a file; a file resource must be a \
             file: pick another name",
            path.display()
        )));
    }
    std::path::absolute(path).map_err(|e| {
        Error::InvalidResource(format!("cannot make {} absolute: {e}", path.display()))
    })
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind(), self.target())
    }
}

/// A resolved resource: the key of its series, the file-id key of an existing file,
/// and the label to store.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// The primary key: the lock name's, or the resolved path's. A lease's fencing
    /// token is a generation of this key's series.
    pub key: Key,
    /// What the caller typed (a lock name, trimmed and without invisible characters),
    /// or for a file its resolved path (symbolic links and `..` resolved: what the OS
    /// will open); shown by `status`, never used for identity.
    pub label: String,
    /// For a file that exists (on platforms with a stable file id: Unix), the key of
    /// its device, inode and birth time, shared by every hard link to it (and by no
    /// later file given the same inode number, where the filesystem records births). A lease takes it
    /// together with [`key`](Identity::key), so two links to one file contend.
    pub file_id: Option<Key>,
    /// For a file: the resolved path the label shows (exact, even where it is not
    /// valid Unicode), for handing on to a child process (`FENCEPOST_FILE`).
    pub path: Option<PathBuf>,
}

impl Identity {
    /// Whether the file has names besides this one (hard links), by what the file
    /// system says now; `false` for anything but an existing file with a file id.
    pub(crate) fn has_other_names(&self) -> bool {
        self.file_id.is_some()
            && self
                .path
                .as_deref()
                .is_some_and(|path| sys::link_count(path) > 1)
    }

    /// Every key of the resource in the order a lease takes them (sorted, so two
    /// claimants of overlapping key sets never wait on each other in a cycle).
    pub fn keys(&self) -> Vec<Key> {
        let mut keys: Vec<Key> = std::iter::once(self.key.clone())
            .chain(self.file_id.clone())
            .collect();
        keys.sort();
        keys
    }
}

/// The canonical identity of a resource: a short, stable string naming its claim
/// series, safe as a file name on every platform (`lock-`, `file-` or `inode-`
/// followed by 32 lowercase hex digits of SHA-256).
// Shared text: a key is cloned into every lease, listing and backend map that
// names its series, and a clone is then a count, not an allocation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct Key(Arc<str>);

/// Appends `bytes` as lowercase hex digits (keys, hashes): a table lookup per
/// nibble rather than a formatter call per byte, on every call's hot path.
pub(crate) fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for &byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
}

impl Key {
    fn derive(namespace: &str, canonical: &[u8]) -> Key {
        let mut hasher = Sha256::new();
        hasher.update(namespace.as_bytes());
        hasher.update([0u8]);
        hasher.update(canonical);
        let digest = hasher.finalize();
        let mut hex = String::with_capacity(namespace.len() + 1 + KEY_HASH_HEX_DIGITS);
        hex.push_str(namespace);
        hex.push('-');
        push_hex(&mut hex, &digest[..KEY_HASH_HEX_DIGITS / 2]);
        Key(hex.into())
    }

    /// Parses a key as stored by a backend (a directory name, a key prefix); `None`
    /// for anything that is not exactly `lock-`, `file-`, `inode-`, `slot-`, `dir-`,
    /// `tree-`, `link-`, `share-`, `shares-`, `want-` or `queue-` plus 32 lowercase
    /// hex digits, so foreign names in a store are skipped.
    pub fn parse(text: &str) -> Option<Key> {
        let (namespace, hash) = text.split_once('-')?;
        let valid = matches!(
            namespace,
            "lock"
                | "file"
                | "inode"
                | "slot"
                | "dir"
                | "tree"
                | "link"
                | "share"
                | "shares"
                | "want"
                | "queue"
        ) && hash.len() == KEY_HASH_HEX_DIGITS
            && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        valid.then(|| Key(text.into()))
    }

    /// The key as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key's text, shared (a record's `key` field, without a copy).
    pub(crate) fn shared_text(&self) -> Arc<str> {
        Arc::clone(&self.0)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The identity of the lock `name`. It depends on the name alone (no filesystem,
/// unlike a file's), so the last one derived on this thread is kept and handed out
/// again for the same name: an agent claims and releases the same few locks, and
/// each claim would otherwise normalize and hash the name again
/// (docs/design-07-performance.md). Pinned by `a_kept_lock_identity_is_the_derived_one`.
fn lock_identity(name: &str) -> Result<Identity> {
    use std::cell::RefCell;
    thread_local! {
        static LAST: RefCell<Option<(String, Key, String)>> = const { RefCell::new(None) };
    }
    let kept = LAST
        .try_with(|last| {
            last.borrow()
                .as_ref()
                .filter(|(of, ..)| of == name)
                .map(|(_, key, label)| (key.clone(), label.clone()))
        })
        .ok()
        .flatten();
    let (key, label) = match kept {
        Some(kept) => kept,
        None => {
            let (key, label) = derive_lock_identity(name)?;
            let _ = LAST.try_with(|last| {
                *last.borrow_mut() = Some((name.to_string(), key.clone(), label.clone()));
            });
            (key, label)
        }
    };
    Ok(Identity {
        path: None,
        key,
        label,
        file_id: None,
    })
}

/// [`lock_identity`] without the kept one: the key of the canonical name, and the
/// label (the name trimmed, without invisible characters).
fn derive_lock_identity(name: &str) -> Result<(Key, String)> {
    let canonical = canonical_lock_name(name)?;
    // No ASCII character is default ignorable: an ASCII name is only trimmed.
    let label = if name.is_ascii() {
        name.trim().to_string()
    } else {
        name.chars()
            .filter(|&c| !is_default_ignorable(c))
            .collect::<String>()
            .trim()
            .to_string()
    };
    Ok((Key::derive("lock", canonical.as_bytes()), label))
}

/// Longest lock name, in bytes of UTF-8 once trimmed (128 KiB): every record of the
/// lock carries the name, and a record must stay well below what a backend reads
/// back (the fs backend reads at most 1 MiB; a longer record reads as torn, so a
/// claim of a megabyte-long name could never be confirmed). As long as one
/// command-line argument may be on Linux, so no name a shell can pass is refused;
/// `status` shortens long names for its table. Pinned by
/// `fencepost/src/identity/mod.rs::tests::lock_names_have_a_length_limit`.
pub const LOCK_NAME_MAX_BYTES: usize = 128 * 1024;

/// Trims, rejects, drops invisible characters from, normalizes and case-folds a lock
/// name (docs/protocol.md §6).
///
/// Case and compatibility: Unicode's compatibility caseless match (`Straße` =
/// `STRASSE`, `σας` = `ΣΑΣ`, fullwidth `ＡＢＣ` = `abc`, `x¹` = `x1`): NFD, full case
/// folding, NFKD, folding and NFKD again, then NFC for a stable spelling. Blanks: a
/// run of white space (a no-break space, an ideographic space, two spaces) is one
/// space. Invisible characters (Unicode's Default_Ignorable_Code_Point: zero-width
/// spaces and joiners, bidirectional controls, variation selectors, soft hyphens)
/// are dropped before anything else, and a name that is nothing but invisible
/// characters is refused as empty. Merge bias: names a person would type or paste
/// as one are one lock. Letters of different scripts that only look alike (Latin
/// `a`, Cyrillic `а`) stay different names. Pinned by
/// `lock_names_are_trimmed_normalized_and_case_folded`.
fn canonical_lock_name(name: &str) -> Result<String> {
    let length = name.trim().len();
    if length > LOCK_NAME_MAX_BYTES {
        return Err(Error::InvalidResource(format!(
            "the lock name is {length} bytes long, over the {LOCK_NAME_MAX_BYTES} a lock name \
             may have; name what the lock guards (such as db:migrations), not its contents"
        )));
    }
    if let Some(bad) = name.trim().chars().find(|c| c.is_control()) {
        return Err(Error::InvalidResource(format!(
            "the lock name contains the control character U+{:04X}; use printable characters",
            bad as u32
        )));
    }
    // ASCII, the common case: nothing to drop (no ASCII character is default
    // ignorable), NFD and NFC are the identity and full case folding is ASCII
    // lowercasing, so the slow path below would return exactly this (pinned by
    // `ascii_lock_names_fold_as_the_full_path_does`).
    if name.is_ascii() {
        let trimmed = name.trim();
        if trimmed.is_empty() {
            return Err(Error::InvalidResource(
                "the lock name is empty; give a name such as db:migrations".into(),
            ));
        }
        let mut folded = String::with_capacity(trimmed.len());
        for c in trimmed.chars() {
            // A run of blanks is one space (the string is trimmed, so no run
            // starts or ends it).
            if c != ' ' || !folded.ends_with(' ') {
                folded.push(c.to_ascii_lowercase());
            }
        }
        return Ok(folded);
    }
    unicode_lock_name(name)
}

/// `text` with every run of white space made one space, and trimmed.
fn one_space(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// [`canonical_lock_name`] past its control-character check, for any name.
fn unicode_lock_name(name: &str) -> Result<String> {
    let visible: String = name.chars().filter(|&c| !is_default_ignorable(c)).collect();
    let trimmed = visible.trim();
    if trimmed.is_empty() {
        return Err(Error::InvalidResource(if name.trim().is_empty() {
            "the lock name is empty; give a name such as db:migrations".into()
        } else {
            "the lock name has no visible characters; give a name such as db:migrations".into()
        }));
    }
    // Unicode's compatibility caseless match (D146): NFKD(fold(NFKD(fold(NFD(x))))).
    let decomposed: String = trimmed.nfd().collect();
    let folded: String = caseless::default_case_fold_str(&decomposed)
        .nfkd()
        .collect();
    let folded: String = caseless::default_case_fold_str(&folded).nfkd().collect();
    // Compatibility decomposition turns other spaces into U+0020, so blanks are
    // made one space after it.
    Ok(one_space(&folded).nfc().collect())
}

/// Unicode's Default_Ignorable_Code_Point property (DerivedCoreProperties.txt): code
/// points that render as nothing unless a font says otherwise.
fn is_default_ignorable(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x034F
            | 0x061C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFF8
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

/// NFC, lowercase, NFC again (lowercasing can denormalize): the case folding of paths
/// on case-insensitive platforms (simple lowercasing, as those filesystems compare
/// names; lock names use full case folding instead).
fn fold(text: &str) -> String {
    let lowered: String = text.nfc().collect::<String>().to_lowercase();
    lowered.nfc().collect()
}

/// How many dangling symlinks [`resolve`] follows by hand before it stops (the
/// kernel's own limit is of this order: 40 on Linux, 32 on macOS).
const SYMLINK_LIMIT: u32 = 40;

/// Resolves the deepest existing ancestor of `absolute` through the OS, then appends
/// the rest with `.` dropped and `..` applied lexically (the rest does not exist, so
/// there is no symlink in it for the kernel to follow) — and when a `..` was
/// applied, resolves the result again: climbing out of a missing directory can lead
/// back into existing ones.
///
/// A dangling symlink met on the way up is followed by hand — its target joined to
/// its directory, the pending rest appended — because opening it with create would
/// create that target: `link -> new.txt` and `new.txt` must have one key before the
/// file exists, as they do after. At most `links_left` are followed (a cycle stops
/// there and keys the spelling as it is).
fn resolve(absolute: &Path, links_left: u32) -> PathBuf {
    let mut pending: Vec<std::ffi::OsString> = Vec::new();
    let mut candidate = absolute.to_path_buf();
    let base = loop {
        if let Ok(resolved) = std::fs::canonicalize(&candidate) {
            break resolved;
        }
        if links_left > 0
            && let Some(target) = dangling_symlink_target(&candidate)
        {
            let mut next = candidate.parent().unwrap_or(&candidate).join(target);
            for name in pending.iter().rev() {
                next.push(name);
            }
            return resolve(&next, links_left - 1);
        }
        match (candidate.file_name(), candidate.parent()) {
            (Some(name), Some(parent)) => {
                pending.push(name.to_os_string());
                candidate = parent.to_path_buf();
            }
            _ => {
                // `..` as the last component, or the root itself failed to resolve:
                // step up lexically without recording a name.
                match candidate.parent() {
                    Some(parent) => {
                        if matches!(
                            candidate.components().next_back(),
                            Some(Component::ParentDir)
                        ) {
                            pending.push("..".into());
                        }
                        candidate = parent.to_path_buf();
                    }
                    None => break candidate,
                }
            }
        }
    };
    let mut resolved = base;
    let mut rest = pending.into_iter().rev();
    while let Some(name) = rest.next() {
        match name.to_str() {
            Some(".") => {}
            Some("..") => {
                // The name before this `..` is missing (else the OS would have
                // resolved past it), so it is taken off by name. Where that lands
                // exists, and so may the names after it, symbolic links among them
                // — and a later `..` after such a link means the link's parent
                // (`missing/../link/../x`): everything after is resolved again as
                // a path of its own (a breaker, twice: `src/missing/../alias/x` with
                // `alias -> held` was keyed `src/alias/x`, a second holder of
                // `src/held/x`; then `missing/../dlink/../x` was keyed `x` where
                // every tool opens `deep/x`). Each round has one `..` fewer.
                resolved.pop();
                let mut again = resolved;
                again.extend(rest);
                return resolve(&again, links_left);
            }
            _ => resolved.push(name),
        }
    }
    resolved
}

/// The target of `path` if `path` itself is a symlink (whose target does not
/// resolve), else `None`.
fn dangling_symlink_target(path: &Path) -> Option<PathBuf> {
    if !matches!(path.components().next_back(), Some(Component::Normal(_))) {
        return None;
    }
    let metadata = std::fs::symlink_metadata(path).ok()?;
    if !metadata.file_type().is_symlink() {
        return None;
    }
    std::fs::read_link(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shares index kept from the last call is the one deriving gives, for the
    /// same key again and for another key after it.
    #[test]
    fn the_kept_shares_index_is_the_derived_one() {
        let one = Key::derive("lock", b"one");
        let two = Key::derive("lock", b"two");
        for key in [&one, &one, &two, &one, &two, &two] {
            assert_eq!(key.shares(), Key::derive("shares", key.as_str().as_bytes()));
        }
        assert_ne!(one.shares(), two.shares());
    }

    fn key(resource: Resource) -> Key {
        resource.identity().expect("valid resource").key
    }

    #[test]
    fn lock_names_are_trimmed_normalized_and_case_folded() {
        // docs/protocol.md §6: `DB:Migrations ` and `db:migrations` are one lock.
        assert_eq!(
            key(Resource::lock("DB:Migrations ")),
            key(Resource::lock("db:migrations"))
        );
        // NFC: precomposed é and e + combining acute are one name.
        assert_eq!(
            key(Resource::lock("caf\u{e9}")),
            key(Resource::lock("cafe\u{301}"))
        );
        assert_ne!(key(Resource::lock("a")), key(Resource::lock("b")));
        // Blanks: a no-break space, an ideographic space, two spaces are one space
        // (a breaker: a name pasted with a no-break space was another lock).
        for spaced in ["a\u{a0}b", "a  b", "A \u{3000} B", "a\u{2002}b"] {
            assert_eq!(
                key(Resource::lock(spaced)),
                key(Resource::lock("a b")),
                "{spaced:?}"
            );
        }
        // Compatibility forms: fullwidth letters and colon, superscripts, ligatures.
        assert_eq!(key(Resource::lock("ＡＢＣ")), key(Resource::lock("abc")));
        assert_eq!(
            key(Resource::lock("db\u{ff1a}migrations")),
            key(Resource::lock("db:migrations"))
        );
        assert_eq!(key(Resource::lock("x\u{b9}")), key(Resource::lock("x1")));
        assert_eq!(
            key(Resource::lock("\u{fb01}le")),
            key(Resource::lock("FILE"))
        );
        // Different scripts stay different, as do different spellings.
        assert_ne!(
            key(Resource::lock("paypal")),
            key(Resource::lock("p\u{430}ypal"))
        );
        assert_ne!(key(Resource::lock("a b")), key(Resource::lock("ab")));
    }

    /// A lock name of at most `LOCK_NAME_MAX_BYTES` (trimmed) is a lock; one byte
    /// more is refused with its length, ASCII or not, and a slot of it too.
    #[test]
    fn lock_names_have_a_length_limit() {
        let longest = "a".repeat(LOCK_NAME_MAX_BYTES);
        assert!(Resource::lock(format!("  {longest}  ")).identity().is_ok());
        let too_long = "a".repeat(LOCK_NAME_MAX_BYTES + 1);
        let error = Resource::lock(&too_long)
            .identity()
            .unwrap_err()
            .to_string();
        assert!(error.contains("131073 bytes long"), "{error}");
        // é is two bytes: 65,537 of them are 131,074.
        let unicode = "\u{e9}".repeat(LOCK_NAME_MAX_BYTES / 2 + 1);
        let error = Resource::lock(&unicode).identity().unwrap_err().to_string();
        assert!(error.contains("131074 bytes long"), "{error}");
        assert!(Resource::slot(&too_long, 1).identity().is_err());
    }

    /// The ASCII fast path of `canonical_lock_name` returns what the full Unicode
    /// path returns (or refuses what it refuses), for every printable ASCII
    /// character alone, padded and in mixed-case names.
    #[test]
    fn ascii_lock_names_fold_as_the_full_path_does() {
        let mut names: Vec<String> = (0x20u8..0x7f).map(|b| char::from(b).to_string()).collect();
        names.extend(
            [
                "DB:Migrations ",
                "  Build/Release\\x86_64 ",
                "ÿ",
                "\t tab\tinside ",
                "  two  spaces   and three ",
                "ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz 0123456789",
                "",
                "   ",
                " !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ ",
            ]
            .map(String::from),
        );
        for name in names.iter().filter(|n| n.is_ascii()) {
            let fast = canonical_lock_name(name).map_err(|e| e.to_string());
            let full = unicode_lock_name(name).map_err(|e| e.to_string());
            if name.trim().chars().any(|c| c.is_control()) {
                assert!(fast.is_err(), "{name:?}");
                continue;
            }
            assert_eq!(fast, full, "{name:?}");
        }
    }

    /// The identity kept for the last lock name on a thread is what deriving it
    /// gives, for ASCII and Unicode names, after other names and after a refused one;
    /// and the ASCII label is what dropping invisible characters gives.
    #[test]
    fn a_kept_lock_identity_is_the_derived_one() {
        let names = [
            "db:migrations",
            " DB:Migrations ",
            "db:\u{200B}migrations",
            "Straße ",
            "\u{FEFF}x\u{00AD}y",
            "a\0b",
            "db:migrations",
        ];
        for _ in 0..2 {
            for name in names {
                for _ in 0..2 {
                    let kept = Resource::lock(name).identity().map(|i| (i.key, i.label));
                    let derived = derive_lock_identity(name);
                    match (kept, derived) {
                        (Ok(kept), Ok(derived)) => assert_eq!(kept, derived, "{name:?}"),
                        (Err(_), Err(_)) => {}
                        (kept, derived) => panic!("{name:?}: {kept:?} against {derived:?}"),
                    }
                }
            }
        }
        for name in ["  plain ", "db:migrations", "\tx "] {
            let full: String = name.chars().filter(|&c| !is_default_ignorable(c)).collect();
            assert_eq!(derive_lock_identity(name).unwrap().1, full.trim());
        }
    }

    #[test]
    fn bad_lock_names_are_rejected() {
        for bad in ["", "   ", "a\0b", "x\ny"] {
            assert!(
                matches!(
                    Resource::lock(bad).identity(),
                    Err(Error::InvalidResource(_))
                ),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn lock_and_file_namespaces_never_collide() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let as_lock = key(Resource::lock(path.to_str().unwrap()));
        let as_file = key(Resource::file(&path));
        assert_ne!(as_lock, as_file);
        assert!(as_lock.as_str().starts_with("lock-"));
        assert!(as_file.as_str().starts_with("file-"));
    }

    #[test]
    fn file_spellings_collapse_and_survive_creation() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("sub")).unwrap();
        let before = key(Resource::file(root.join("a.txt")));
        assert_eq!(before, key(Resource::file(root.join("sub/../a.txt"))));
        assert_eq!(before, key(Resource::file(root.join("./a.txt"))));
        assert_eq!(before, key(Resource::file(root.join("new/../a.txt"))));
        std::fs::write(root.join("a.txt"), b"x").unwrap();
        assert_eq!(
            before,
            key(Resource::file(root.join("a.txt"))),
            "key changed on creation"
        );
        assert_ne!(before, key(Resource::file(root.join("b.txt"))));
    }

    /// A `..` that climbs out of a missing directory back into existing ones, through a
    /// symbolic link: the name is the target's (a breaker: `src/missing/../alias/x`
    /// was keyed apart from `src/held/x`, two holders of one file, and a subtree
    /// claimed twice).
    #[cfg(unix)]
    #[test]
    fn a_climb_out_of_a_missing_directory_resolves_what_follows() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/held")).unwrap();
        std::fs::write(root.join("src/held/b.rs"), b"x").unwrap();
        std::os::unix::fs::symlink("held", root.join("src/alias")).unwrap();
        for name in ["new.rs", "b.rs"] {
            assert_eq!(
                key(Resource::file(root.join("src/held").join(name))),
                key(Resource::file(root.join("src/missing/../alias").join(name))),
                "{name}"
            );
            assert_eq!(
                key(Resource::file(root.join("src/held").join(name))),
                key(Resource::file(root.join("src/a/b/../../alias").join(name))),
                "{name}"
            );
        }
        assert_eq!(
            key(Resource::dir(root.join("src/held"))),
            key(Resource::dir(root.join("src/missing/../alias")))
        );
        // A `..` after the link, past the climb: the link's parent, as the kernel
        // and every tool that tidies the path first read it (a breaker: keyed by
        // name as `src/x`).
        std::fs::create_dir_all(root.join("deep/dir")).unwrap();
        std::os::unix::fs::symlink("deep/dir", root.join("dlink")).unwrap();
        assert_eq!(
            key(Resource::file(root.join("deep/x"))),
            key(Resource::file(root.join("missing/../dlink/../x")))
        );
        assert_eq!(
            key(Resource::dir(root.join("deep"))),
            key(Resource::dir(root.join("missing/../dlink/..")))
        );
        // A dangling link met after the climb is followed as anywhere else.
        std::os::unix::fs::symlink("held/later.rs", root.join("src/soon.rs")).unwrap();
        assert_eq!(
            key(Resource::file(root.join("src/held/later.rs"))),
            key(Resource::file(root.join("src/gone/../soon.rs")))
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinked_parent_resolves_to_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert_eq!(
            key(Resource::file(root.join("real/x"))),
            key(Resource::file(root.join("link/x")))
        );
    }

    #[test]
    fn slots_have_their_own_keys() {
        // docs/format-v1.md §1.2: sha256("slot" 0x00 canonical-lock-name 0x00 "2").
        let two = key(Resource::slot("Dev-Server ", 2));
        assert_eq!(two.as_str(), "slot-074f4589e445fff18d9270d64152e387");
        assert_eq!(Key::parse(two.as_str()), Some(two.clone()));
        assert_ne!(two, key(Resource::slot("dev-server", 3)));
        assert_ne!(two, key(Resource::lock("dev-server")));
        let identity = Resource::slot("dev-server", 2).identity().unwrap();
        assert_eq!(identity.label, "dev-server#2");
        assert!(Resource::slot("dev-server", 0).identity().is_err());
        assert!(Resource::slot("  ", 1).identity().is_err());
    }

    #[test]
    fn keys_parse_back_and_foreign_names_do_not() {
        let k = key(Resource::lock("x"));
        assert_eq!(Key::parse(k.as_str()), Some(k.clone()));
        for foreign in [
            "lock-",
            "lock-XYZ",
            "tmp-0123456789abcdef0123456789abcdef",
            ".DS_Store",
        ] {
            assert_eq!(Key::parse(foreign), None, "{foreign}");
        }
    }
}

//! Which stores a session claimed in: notes the agent hooks keep in one store (the
//! per-user store), so that the end of the session can release its claims
//! everywhere (`docs/format-v1.md` §1.3).
//!
//! An agent's session works from a directory that changes as it `cd`s, and the
//! store location rule picks a store per *file*: a file in a submodule or a nested
//! repository, or one whose claims stayed in the store they were made in, is
//! claimed in another store than the working directory's. The note is not part of the lease protocol: it never
//! decides who holds what. Lost (a crash, a power cut: it is not flushed), the
//! session's claims there end by their ttl, as before it existed.
//!
//! ```text
//! <root>/sessions/<session tag>/<32 hex digits>   one per other store; holds its path
//! <root>/sessions/<session tag>/tenure-<key>      the token of the session's tenure of the key here
//! ```
//!
//! A tenure note keeps the token of the session's tenure of the key in this store
//! (the claim's own store) as the agent hook last claimed or renewed it: a later
//! claim through the hook that gets another token means the tenure ended in between
//! without the hook's knowing (broken, run out, claimed anew), and the hook tells the
//! model to read the file again. Lost, that notice is not given; it never decides
//! who holds what either.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use fencepost::{BackendError, Key, SessionTag};
use sha2::{Digest, Sha256};

use crate::FsStore;
use crate::sys::check_real_dir;

/// The directory under the store root that holds the notes, one directory per
/// session tag.
const SESSIONS_DIR: &str = "sessions";

/// The longest note read back: a store path longer than this is not one this
/// crate wrote.
const NOTE_MAX_BYTES: u64 = 16 * 1024;

impl FsStore {
    /// Notes in this store that the session tagged `session` claimed in the store at
    /// `other` (absolute; it may be this store). Idempotent: a second note of the same store is a no-op.
    /// Creates `sessions/<tag>/` (and this store's root) as needed; never flushed.
    ///
    /// # Errors
    ///
    /// A [`BackendError`] with operation `note session store` when the directory or
    /// the note cannot be created or written, or `other` is not an absolute path in
    /// UTF-8. Pinned by `session_notes_name_each_other_store_once`.
    pub fn note_session_store(
        &self,
        session: &SessionTag,
        other: &Path,
    ) -> Result<(), BackendError> {
        let dir = self.session_dir(session)?;
        let Some(text) = other.to_str().filter(|_| other.is_absolute()) else {
            return Err(BackendError::new(
                "note session store",
                other.display(),
                io::Error::new(io::ErrorKind::InvalidInput, "not an absolute path in UTF-8"),
            ));
        };
        let fail =
            |at: &Path, e: io::Error| BackendError::new("note session store", at.display(), e);
        self.make_session_dir(&dir, "note session store")?;
        let note = dir.join(note_name(text));
        // The name is the path's digest: a note that exists already names it.
        let mut file = match OpenOptions::new().write(true).create_new(true).open(&note) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
            Err(e) => return Err(fail(&note, e)),
        };
        if let Err(e) = file.write_all(text.as_bytes()) {
            // A partial note would name no store: take it back.
            drop(file);
            let _ = fs::remove_file(&note);
            return Err(fail(&note, e));
        }
        Ok(())
    }

    /// The stores noted for the session tagged `session` (in no particular order).
    /// A note that is not a regular file, is empty or too long, is not UTF-8, names
    /// a relative path or does not match its own name is skipped: nothing here may
    /// point a release anywhere this crate did not write.
    ///
    /// # Errors
    ///
    /// A [`BackendError`] with operation `read session notes` when the directory
    /// exists and cannot be listed. None noted (or no store) is an empty list.
    pub fn session_stores(&self, session: &SessionTag) -> Result<Vec<PathBuf>, BackendError> {
        let dir = self.session_dir(session)?;
        match real_dirs(&dir) {
            Ok(()) => {}
            Err((_, e)) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err((at, e)) => return Err(BackendError::new("read session notes", at.display(), e)),
        }
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(BackendError::new("read session notes", dir.display(), e)),
        };
        let mut stores = Vec::new();
        for entry in entries.flatten() {
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if !is_file {
                continue;
            }
            if let Some(path) = read_note(&entry.path())
                && entry.file_name().to_str() == Some(note_name(&path).as_str())
            {
                stores.push(PathBuf::from(path));
            }
        }
        stores.sort();
        Ok(stores)
    }

    /// Removes the note of the store at `other` for the session tagged `session`,
    /// best effort (the others stay: a store the session's end could not use is
    /// kept noted, for a later end to try again).
    pub fn forget_session_store(&self, session: &SessionTag, other: &Path) {
        if let Ok(dir) = self.session_dir(session)
            && real_dirs(&dir).is_ok()
            && let Some(text) = other.to_str()
        {
            let _ = fs::remove_file(dir.join(note_name(text)));
        }
    }

    /// Removes the notes of the session tagged `session`, best effort: a note left
    /// behind only makes a later end of the same session look in a store once more.
    pub fn forget_session_stores(&self, session: &SessionTag) {
        if let Ok(dir) = self.session_dir(session)
            && real_dirs(&dir).is_ok()
            && let Ok(entries) = fs::read_dir(&dir)
        {
            for entry in entries.flatten() {
                let _ = fs::remove_file(entry.path());
            }
            let _ = fs::remove_dir(&dir);
        }
    }

    /// Notes in this store that the session tagged `session` holds `key` here by
    /// the tenure with fencing token `token` (`sessions/<tag>/tenure-<key>`, the
    /// token in decimal), in place of any earlier note of the key. Never flushed. A
    /// note is replaced by removing it and creating the new one (no rename: the
    /// store's rule), so a crash between loses it, which only loses a notice.
    ///
    /// # Errors
    ///
    /// A [`BackendError`] with operation `note session tenure` when the directory or
    /// the note cannot be made or written. Pinned by
    /// `tenure_notes_are_kept_per_key_and_forgotten`.
    pub fn note_session_tenure(
        &self,
        session: &SessionTag,
        key: &Key,
        token: u64,
    ) -> Result<(), BackendError> {
        let dir = self.session_dir(session)?;
        self.make_session_dir(&dir, "note session tenure")?;
        let note = dir.join(tenure_name(key));
        let fail = |e: io::Error| BackendError::new("note session tenure", note.display(), e);
        match fs::symlink_metadata(&note) {
            Ok(meta) if meta.is_dir() => return Err(fail(io::ErrorKind::AlreadyExists.into())),
            Ok(_) => fs::remove_file(&note).map_err(fail)?,
            Err(_) => {}
        }
        match OpenOptions::new().write(true).create_new(true).open(&note) {
            Ok(mut file) => file.write_all(token.to_string().as_bytes()).map_err(fail),
            // A sibling process of the session noted it meanwhile: the same tenure.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(fail(e)),
        }
    }

    /// The session's tenure note of `key` in this store: `None` when there is none,
    /// `Some(None)` when there is one whose token cannot be read (not a regular
    /// file, empty, not a number: a crash while it was written, or planted),
    /// `Some(Some(token))` otherwise.
    pub fn session_tenure(&self, session: &SessionTag, key: &Key) -> Option<Option<u64>> {
        let dir = self.session_dir(session).ok()?;
        real_dirs(&dir).ok()?;
        let note = dir.join(tenure_name(key));
        let meta = fs::symlink_metadata(&note).ok()?;
        if !meta.is_file() {
            return Some(None);
        }
        let mut text = String::new();
        let read = fs::File::open(&note)
            .and_then(|file| file.take(TOKEN_NOTE_MAX_BYTES).read_to_string(&mut text));
        Some(read.ok().and_then(|_| text.trim().parse().ok()))
    }

    /// Removes the tenure notes of the session tagged `session` in this store, best
    /// effort (the session ended: a note left behind would only give a later session
    /// of the same id one notice too many).
    pub fn forget_session_tenures(&self, session: &SessionTag) {
        if let Ok(dir) = self.session_dir(session)
            && real_dirs(&dir).is_ok()
            && let Ok(entries) = fs::read_dir(&dir)
        {
            for entry in entries.flatten() {
                if entry
                    .file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(TENURE_PREFIX))
                {
                    let _ = fs::remove_file(entry.path());
                }
            }
            // Gone once empty (the stores' notes, if any, keep it).
            let _ = fs::remove_dir(&dir);
        }
    }

    /// Makes this store's root, `sessions/` and the session's directory `dir` as
    /// needed, one level at a time, each checked before the next is made in it: a
    /// `sessions` planted as a link must not get a directory made through it.
    fn make_session_dir(&self, dir: &Path, operation: &'static str) -> Result<(), BackendError> {
        let fail = |at: &Path, e: io::Error| BackendError::new(operation, at.display(), e);
        fs::create_dir_all(self.root()).map_err(|e| fail(self.root(), e))?;
        let sessions = dir.parent().unwrap_or(dir);
        for at in [sessions, dir] {
            match fs::create_dir(at) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(fail(at, e)),
                _ => check_real_dir(at).map_err(|e| fail(at, e))?,
            }
        }
        Ok(())
    }

    fn session_dir(&self, session: &SessionTag) -> Result<PathBuf, BackendError> {
        let tag = session.as_str();
        // Tags this crate's core makes are 16 lowercase hex digits; anything else
        // must not become a path component.
        if tag.is_empty() || !tag.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(BackendError::new(
                "note session store",
                tag,
                io::Error::new(io::ErrorKind::InvalidInput, "not a session tag"),
            ));
        }
        Ok(self.root().join(SESSIONS_DIR).join(tag))
    }
}

/// The longest tenure note read: a token is at most 20 digits.
const TOKEN_NOTE_MAX_BYTES: u64 = 32;

/// How a tenure note's name begins.
const TENURE_PREFIX: &str = "tenure-";

/// A tenure note's file name: the key is lowercase letters, digits and `-` (as
/// [`Key::parse`] accepts), so it is a safe name on every platform.
fn tenure_name(key: &Key) -> String {
    format!("{TENURE_PREFIX}{}", key.as_str())
}

/// The note's file name for a store at `path`: the first 16 bytes of SHA-256 over
/// its UTF-8, in lowercase hex.
fn note_name(path: &str) -> String {
    let digest = Sha256::digest(path.as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// `sessions/` and `sessions/<tag>/` are real directories: fencepost never follows
/// a link inside the store (a planted one must not aim notes or removals elsewhere).
fn real_dirs(dir: &Path) -> Result<(), (PathBuf, io::Error)> {
    let sessions = dir.parent().unwrap_or(dir);
    for at in [sessions, dir] {
        check_real_dir(at).map_err(|e| (at.to_path_buf(), e))?;
    }
    Ok(())
}

fn read_note(path: &Path) -> Option<String> {
    let mut text = String::new();
    fs::File::open(path)
        .ok()?
        .take(NOTE_MAX_BYTES + 1)
        .read_to_string(&mut text)
        .ok()?;
    let fits = !text.is_empty() && text.len() as u64 <= NOTE_MAX_BYTES;
    (fits && Path::new(&text).is_absolute()).then_some(text)
}

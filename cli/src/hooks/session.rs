//! Every place the agent hooks and the git guard touch sessions: how a session id is
//! named, how a hook claims a file for its session, who a holder's session is, and
//! how a session's claims are released. The claims are the core's session claims
//! (`AcquireOptions::session`, `Store::resume_session`): re-entrant for the session
//! that holds the resource, refused to everyone else.

use std::path::{Path, PathBuf};

use fencepost::{AcquireOptions, Beside, Error, Holder, Resource, SessionTag, Store, TryAcquire};

use crate::output::printable;

/// The session a hook acts for: `FENCEPOST_SESSION` when a human set it for the
/// agent (the MCP server the agent starts inherits the same variable), else
/// `<agent>:<the payload's session id>`.
pub fn hook_session(agent: &str, payload_session: &str) -> String {
    match env_session() {
        Some(session) => session,
        None => format!("{agent}:{payload_session}"),
    }
}

/// The session of this process as the environment names it, for the guard:
/// `FENCEPOST_SESSION`, else inside Claude Code (`CLAUDECODE=1`) its session id
/// `CLAUDE_CODE_SESSION_ID`, spelled as the hook spells it. (The MCP server applies
/// the same rule: server/src/main.rs.)
pub fn env_session() -> Option<String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if let Some(session) = var("FENCEPOST_SESSION") {
        return Some(session);
    }
    if var("CLAUDECODE").as_deref() == Some("1") {
        return var("CLAUDE_CODE_SESSION_ID").map(|id| format!("claude-code:{id}"));
    }
    None
}

/// The session's tag as records and `status` show it (`SessionTag`).
pub fn tag(session: &str) -> String {
    SessionTag::of(session).as_str().to_string()
}

/// What a hook's claim came to.
#[derive(Debug)]
pub enum Claimed {
    /// The session holds the file: a new tenure, or its own tenure renewed (same
    /// token, new expiry).
    Ours { token: u64, expires_at_ms: u64 },
    /// Another session (or a holder with no session) holds it.
    Theirs(Holder),
}

/// Claims `resource` for `session`, re-entrantly: the session's own tenure is
/// renewed for `ttl_ms` and keeps its token; anyone else's is reported.
pub fn claim(
    store: &Store,
    elsewhere: &crate::elsewhere::Elsewhere,
    resource: &Resource,
    agent: &str,
    session: &str,
    ttl_ms: u64,
) -> Result<Claimed, Error> {
    // The owner is the agent; the record carries the session's tag beside it (never
    // the id: whoever knows the id can act as the session, docs/protocol.md §11,
    // "Sessions"), and `status` and block messages show both.
    let options = AcquireOptions::new(ttl_ms).owner(agent).session(session);
    // A tenure of the session through a name that no longer leads to this file
    // (renamed since: `git mv`, then an edit of the new name) is ended first: one
    // read of the file's file-id series. Found only by a refusal, it cost the edit
    // the second a claim waits for the session's own claims in progress.
    end_stale_series(store, resource, session)?;
    let mut claimed = claim_once(store, elsewhere, resource, &options)?;
    // Refused by the session itself, through a tenure that no longer agrees with
    // the file: the session renamed it after editing it (`git mv`). That stale
    // series is ended by key and the claim made again; a few times, since a sibling process of the session may be doing
    // the same at once (a breaker: a session was blocked from its own renamed
    // file, told another session held it). A current tenure of the session's —
    // its `run` or MCP server holding the file through another hard link — is not
    // stale, and is never ended here.
    for _ in 0..STALE_RETRIES {
        match &claimed {
            Claimed::Theirs(holder)
                if holder.session.as_deref() == Some(&SessionTag::of(session)) =>
            {
                end_stale_series(store, resource, session)?;
                claimed = claim_once(store, elsewhere, resource, &options)?;
            }
            _ => break,
        }
    }
    Ok(claimed)
}

/// What the newest record of a file's series said of a session, read before a
/// hook's claim (which writes over it).
#[derive(Debug)]
pub enum Prior {
    /// The session's own tenure: live (the claim re-enters), or ended by its ttl or
    /// its own release with nobody after it. Also what an error reads as: the claim
    /// that follows decides.
    Ours,
    /// The session's tenure broken (`fencepost break`, `break --session`): its
    /// token and the break's note.
    Broken(u64, fencepost::record::BreakNote),
    /// Another holder's record, or none. When the session held the file before (a
    /// tenure note says so), its claim ended and someone came after it: the status
    /// entry of the series, when it names a holder (not torn, not of a newer
    /// format): who came after.
    NotOurs(Option<Box<fencepost::StatusEntry>>),
}

/// [`Prior`] of `resource` for `session` in `store`; `noted` says whether the
/// session's tenure note of it is there (only then is the series' status read, to
/// name who came after).
pub fn prior_claim(store: &Store, resource: &Resource, session: &str, noted: bool) -> Prior {
    match store.resume_session(resource, session) {
        Err(Error::Broken { token, note, .. }) => Prior::Broken(token, note),
        Err(Error::NotSessionHolder { .. }) => {
            let key = resource.identity().ok().map(|identity| identity.key);
            let entry = noted
                .then(|| store.status().ok())
                .flatten()
                .and_then(|entries| entries.into_iter().find(|e| Some(&e.key) == key.as_ref()))
                .filter(|e| {
                    !e.owner.is_empty()
                        && !matches!(
                            e.state,
                            fencepost::ClaimState::Unreadable | fencepost::ClaimState::NewerFormat
                        )
                });
            Prior::NotOurs(entry.map(Box::new))
        }
        _ => Prior::Ours,
    }
}

/// The directory store at `claimed_in` (a hook's claim's own store), for its
/// tenure notes; `None` for an etcd store or one that cannot be opened.
fn tenure_notes(claimed_in: &str) -> Option<fencepost_fs::FsStore> {
    if claimed_in.contains("://") {
        return None;
    }
    fencepost_fs::FsStore::open_existing(claimed_in).ok()
}

/// A session's tenure notes of one file in the store its claims go to: read once
/// before the claim, written after it where they say otherwise.
pub struct TenureNotes {
    store: Option<fencepost_fs::FsStore>,
    tag: SessionTag,
    /// Each series the file is found by (its file-id key for an existing file, and
    /// its key: a file renamed after its claim ran out is found by its file id, a
    /// breaker), with its note as read: `None` when none, `Some(None)` when the
    /// note cannot be read.
    noted: Vec<(fencepost::Key, Option<Option<u64>>)>,
}

impl TenureNotes {
    /// The notes of `session`'s tenure of `resource` in the store at `claimed_in`
    /// (none for an etcd store or one that cannot be opened).
    pub fn read(claimed_in: &str, resource: &Resource, session: &str) -> TenureNotes {
        let store = tenure_notes(claimed_in);
        let tag = SessionTag::of(session);
        let keys = resource
            .identity()
            .map(|identity| identity.file_id.into_iter().chain([identity.key]).collect())
            .unwrap_or_else(|_| Vec::new());
        let noted = keys
            .into_iter()
            .map(|key| {
                let note = store.as_ref().and_then(|s| s.session_tenure(&tag, &key));
                (key, note)
            })
            .collect();
        TenureNotes { store, tag, noted }
    }

    /// Whether any note of the file is there.
    pub fn any(&self) -> bool {
        self.noted.iter().any(|(_, note)| note.is_some())
    }

    /// The token a note holds that is not `token` (nor 0: tokens start at 1): the
    /// tenure the session's last edit had ended since. A note that cannot be read
    /// tells nothing.
    pub fn other_than(&self, token: u64) -> Option<u64> {
        self.noted
            .iter()
            .filter_map(|(_, note)| note.flatten())
            .find(|&old| old != token && old != 0)
    }

    /// Notes that the session holds the file by the tenure with token `token`,
    /// under each series whose note said otherwise, so that a later hook claim
    /// that gets another token tells the model that the tenure ended in between.
    /// Best effort: a note not made only loses that notice.
    pub fn note(&self, token: u64) {
        let Some(store) = &self.store else {
            return;
        };
        for (key, note) in &self.noted {
            if *note != Some(Some(token)) {
                let _ = store.note_session_tenure(&self.tag, key, token);
            }
        }
    }
}

/// How many times a claim refused by its own session's stale tenures is made again.
const STALE_RETRIES: usize = 3;

/// Ends `session`'s tenure of the file `resource` names in its file-id series when
/// it was claimed through a path that no longer leads to this file (renamed since).
/// A tenure of this very path, a sibling's claim in progress among them, is never
/// ended; nor is one through another hard link that still leads here. Returns
/// whether one was ended.
pub fn end_stale_series(store: &Store, resource: &Resource, session: &str) -> Result<bool, Error> {
    let identity = resource.identity()?;
    let Some(file_id) = identity.file_id.clone() else {
        return Ok(false);
    };
    let tag = SessionTag::of(session);
    let mut ended = false;
    if let Some(row) = store
        .series_status(&file_id)
        .filter(|e| e.live && e.session.as_ref() == Some(&tag))
    {
        let leads_here = Resource::file(&row.label)
            .identity()
            .ok()
            .and_then(|i| i.file_id)
            == Some(file_id.clone());
        if !leads_here {
            ended |= store.release_session_series(&file_id, session)?;
        }
    }
    Ok(ended)
}

/// One claim of `resource` with `options`, beside the other stores on its path.
fn claim_once(
    store: &Store,
    elsewhere: &crate::elsewhere::Elsewhere,
    resource: &Resource,
    options: &AcquireOptions,
) -> Result<Claimed, Error> {
    // Beside the other stores on the file's path: a live claim of it in one of
    // them (the layout changed since) is another's too.
    let outcome = store.claim_beside(
        std::slice::from_ref(resource),
        options,
        || elsewhere.list(),
        |options| {
            Ok(match store.try_acquire(resource, options)? {
                TryAcquire::Acquired(lease) => Ok(vec![lease]),
                TryAcquire::Held(holder) => Err(holder),
            })
        },
    )?;
    Ok(match outcome {
        Beside::Taken(leases) => Claimed::Ours {
            token: leases[0].token(),
            expires_at_ms: leases[0].expires_at_ms(),
        },
        Beside::Held(holder) => Claimed::Theirs(holder),
        Beside::Elsewhere {
            store,
            resource,
            holder,
        } => Claimed::Theirs(elsewhere.named(&store, &resource, holder)),
    })
}

/// The tag of the session a holder claimed for, if it claimed with one (a hook's
/// claim, a CLI claim with `--session`, the MCP server's). For display only; who may
/// re-enter is decided by the core.
pub fn holder_session(holder: &Holder) -> Option<String> {
    holder.session.as_ref().map(|tag| tag.as_str().to_string())
}

/// The tag of the session of a status entry's holder, if it claimed with one.
pub fn entry_session(entry: &fencepost::StatusEntry) -> Option<String> {
    entry.session.as_ref().map(|tag| tag.as_str().to_string())
}

/// Releases every live claim `session` holds in `store`; returns how many. A claim
/// that ended meanwhile (expired, taken over, broken) is not the session's to
/// release, and is skipped.
pub fn release_all(store: &Store, session: &str) -> Result<usize, Error> {
    let mut released = 0;
    let mut seen = std::collections::HashSet::new();
    let mut counted = std::collections::HashSet::new();
    for entry in store.status()? {
        if !entry.live || entry.session.as_ref() != Some(&SessionTag::of(session)) {
            continue;
        }
        let resource = match entry.resource.split_once(':') {
            Some(("file", path)) => Resource::file(path),
            Some(("lock", name)) => Resource::lock(name),
            Some(("dir", path)) => Resource::dir(path),
            _ => continue,
        };
        if !seen.insert(entry.resource.clone()) {
            continue;
        }
        match store.resume_session(&resource, session) {
            Ok(lease) => {
                store.release(&lease)?;
                released += 1;
                counted.insert(entry.resource.clone());
            }
            Err(Error::Backend(e)) => return Err(Error::Backend(e)),
            Err(_) => {}
        }
    }
    // What the resources did not lead to: the file-id series of a file the session
    // renamed or deleted (its path now names another file, or none), ended by key
    // (a breaker: it stayed held for the ttl, refusing the renamed file). Every
    // series, as listed now: `status` folds a file-id series into a live path row
    // of the same tenure, and a path whose resume failed (another file moved onto
    // it) left that row live (a breaker: "released 2 claims", one still held).
    for entry in store.key_status()? {
        if entry.live
            && entry.session.as_ref() == Some(&SessionTag::of(session))
            && store.release_session_series(&entry.key, session)?
            && counted.insert(entry.resource.clone())
        {
            released += 1;
        }
    }
    Ok(released)
}

/// Where a session's notes of the stores it claimed in are kept: the per-user
/// store (one place, whichever directory the session works from: an agent's
/// working directory changes as it `cd`s), else the store of `cwd`; `None` when
/// `store_flag` (`--store`, `FENCEPOST_STORE`) names one store for everything.
fn notes_store(store_flag: Option<&Path>, cwd: &Path) -> Option<PathBuf> {
    if store_flag.is_some() {
        return None;
    }
    fencepost_fs::user_store().or_else(|| {
        fencepost_fs::locate_store(None, None, cwd)
            .ok()
            .map(|location| location.path)
    })
}

/// After a hook's claim landed in the store at `claimed_in`: notes that store for
/// the session ([`notes_store`]), so that the session's end finds the claim (a
/// file in a submodule or nested repository, one whose claims stayed in an
/// earlier store, or one claimed from another working directory). Best effort:
/// `Err` says why the note could not be made (the claim then ends by its ttl, not
/// at the session's end).
pub fn note_store(
    store_flag: Option<&Path>,
    cwd: &Path,
    claimed_in: &str,
    session: &str,
) -> Result<(), String> {
    let Some(notes) = notes_store(store_flag, cwd) else {
        return Ok(());
    };
    fencepost_fs::FsStore::open(&notes)
        .and_then(|store| store.note_session_store(&SessionTag::of(session), Path::new(claimed_in)))
        .map_err(|e| e.to_string())
}

/// What a session's end did in the stores it reached.
#[derive(Debug, Default)]
pub struct Ended {
    /// Claims released.
    pub released: usize,
    /// One line per store that could not be asked, or whose claims could not all
    /// be released (those end by their ttl).
    pub problems: Vec<String>,
}

/// Releases every live claim `session` holds in the store of `cwd` and in every
/// store noted for it ([`note_store`]), then forgets the notes. A store that
/// cannot be opened or released in is reported in [`Ended::problems`] and the
/// others are still released: one broken store (a worktree whose git directory
/// was pruned, say) must not keep the session's other files held until their ttl.
pub fn release_everywhere(store_flag: Option<&Path>, cwd: &Path, session: &str) -> Ended {
    let mut ended = Ended::default();
    let release_in = |store: Store, at: &str, ended: &mut Ended| match release_all(&store, session)
    {
        Ok(released) => ended.released += released,
        Err(e) => ended.problems.push(format!(
            "in the store {}: {}",
            printable(at),
            crate::output::describe_error(&e)
        )),
    };
    let tag = SessionTag::of(session);
    let forget_tenures = |at: &str| {
        if let Some(store) = tenure_notes(at) {
            store.forget_session_tenures(&tag);
        }
    };
    let here = match crate::store::open(store_flag, None, cwd, crate::store::Access::Existing) {
        Ok(opened) => {
            let here = opened.backend.locator();
            release_in(Store::new(opened.backend), &here, &mut ended);
            forget_tenures(&here);
            Some(PathBuf::from(here))
        }
        Err(e) => {
            ended.problems.push(e);
            None
        }
    };
    let Some(notes) = notes_store(store_flag, cwd) else {
        return ended;
    };
    let Ok(notes) = fencepost_fs::FsStore::open_existing(&notes) else {
        return ended;
    };
    let noted = match notes.session_stores(&tag) {
        Ok(noted) => noted,
        Err(e) => {
            ended.problems.push(format!("cannot {e}"));
            return ended;
        }
    };
    // The notes of the stores that could not be used are kept, so that a later
    // end of the session (the hook run again) tries them again (a breaker: they
    // were forgotten, and the claims there could only wait out their ttl).
    let mut kept = Vec::new();
    for other in noted
        .into_iter()
        .filter(|other| Some(other) != here.as_ref())
    {
        let before = ended.problems.len();
        match fencepost_fs::FsStore::open_existing(&other) {
            Ok(backend) => {
                release_in(
                    Store::new(backend),
                    &other.display().to_string(),
                    &mut ended,
                );
                forget_tenures(&other.display().to_string());
            }
            // A store removed since holds nothing to release.
            Err(_) if std::fs::symlink_metadata(&other).is_err() => {}
            // One that is there but cannot be used still holds claims (a
            // breaker: a planted link was skipped as "removed", silently).
            Err(e) => ended.problems.push(format!(
                "cannot open the store {}: {e}",
                printable(&other.display().to_string())
            )),
        }
        if ended.problems.len() > before {
            kept.push(other);
        } else {
            notes.forget_session_store(&tag, &other);
        }
    }
    if kept.is_empty() {
        notes.forget_session_stores(&tag);
    }
    ended
}

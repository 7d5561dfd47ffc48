//! Every place the agent hooks and the git guard touch sessions: how a session id is
//! named, how a hook claims a file for its session, who a holder's session is, and
//! how a session's claims are released. Kept in one module so the hooks follow the
//! core's session rules (docs/protocol.md) instead of growing their own.

use fencepost::{AcquireOptions, Error, Holder, Resource, Store, TryAcquire};

/// The session a hook acts for: `FENCEPOST_SESSION` when a human set it for the
/// agent (the MCP server the agent starts inherits the same variable), else
/// `<agent>:<the payload's session id>`.
pub fn hook_session(agent: &str, payload_session: &str) -> String {
    match env_session() {
        Some(session) => session,
        None => format!("{agent}:{payload_session}"),
    }
}

/// The session of this process as the environment names it, for the guard and the
/// server: `FENCEPOST_SESSION`, else inside Claude Code (`CLAUDECODE=1`) its session
/// id `CLAUDE_CODE_SESSION_ID`, spelled as the hook spells it.
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

/// The owner recorded with a hook's claims: who, for `status` and for other agents'
/// block messages.
pub fn owner(agent: &str, session: &str) -> String {
    format!("{agent} session {session}")
}

/// What a hook's claim came to.
#[derive(Debug)]
pub enum Claimed {
    /// The session holds the file: a new tenure, or its own tenure renewed.
    Ours { token: u64, expires_at_ms: u64 },
    /// Another session (or a holder with no session) holds it.
    Theirs(Holder),
}

/// Claims `resource` for `session`, re-entrantly: the session's own tenure is
/// renewed and keeps its token; anyone else's is reported.
pub fn claim(
    store: &Store,
    resource: &Resource,
    agent: &str,
    session: &str,
    ttl_ms: u64,
) -> Result<Claimed, Error> {
    let options = AcquireOptions::new(ttl_ms).owner(owner(agent, session));
    match store.try_acquire(resource, &options)? {
        TryAcquire::Acquired(lease) => Ok(Claimed::Ours {
            token: lease.token(),
            expires_at_ms: lease.expires_at_ms(),
        }),
        TryAcquire::Held(holder) if holder_session(&holder).as_deref() == Some(session) => {
            Ok(Claimed::Ours {
                token: holder.token,
                expires_at_ms: holder.expires_at_ms,
            })
        }
        TryAcquire::Held(holder) => Ok(Claimed::Theirs(holder)),
    }
}

/// The session a holder claimed for, if any.
pub fn holder_session(holder: &Holder) -> Option<String> {
    session_of_owner(&holder.owner)
}

/// The session of a status entry's holder, if any.
pub fn entry_session(entry: &fencepost::StatusEntry) -> Option<String> {
    session_of_owner(&entry.owner)
}

fn session_of_owner(owner: &str) -> Option<String> {
    owner
        .split_once(" session ")
        .map(|(_, session)| session.to_string())
}

/// Releases every live claim `session` holds in `store`; returns how many.
pub fn release_all(store: &Store, session: &str) -> Result<usize, Error> {
    // Releasing needs the tenure's proof, which only the core's sessions carry
    // across processes; until then a session's claims end with their ttl.
    let _ = (store, session);
    Ok(0)
}

//! The error type every protocol operation returns.

use crate::backend::BackendError;

/// Who holds a resource, as read from the newest record of its series.
///
/// Carried by [`Error::Held`] and [`crate::TryAcquire::Held`] so a caller can say
/// *who* is in the way. All fields come from the record; `owner` and `pid` are
/// diagnostics only and never decide anything (docs/protocol.md §2).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Holder {
    /// Human-readable name the holder gave (`claude-code`, `ci`, `cli`).
    pub owner: String,
    /// Unique id of the holder's tenure (owner + pid + random nonce).
    pub holder_id: String,
    /// Process id the holder recorded (it may run on another machine, or be dead).
    pub pid: u32,
    /// The holder's fencing token.
    pub token: u64,
    /// Generation of the newest record.
    pub generation: u64,
    /// When the holder's lease ends, in milliseconds since the Unix epoch, by the
    /// holder's clock.
    pub expires_at_ms: u64,
    /// The tag of the session that claimed the tenure, when it claimed with one
    /// ([`crate::SessionTag`]: it names the session to others without revealing the
    /// session id, which would let them act as it). Absent from `--json` when none.
    /// Boxed so that [`Error`], which carries a holder, stays small.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<Box<crate::SessionTag>>,
    /// The resource this holder holds when it is not the one asked for: a subtree
    /// claim of a directory above a requested file or subtree, a file or subtree
    /// claim below a requested subtree, the subtree a waiting exclusive claimer
    /// wants (docs/design-05-subtrees-and-shared.md §3.3, §4.3), or, from
    /// [`crate::Store::break_lease`] of a file, the other hard link of it that the
    /// holder claimed. `None` when the
    /// holder holds the requested resource itself. A refusal names this resource,
    /// and a `break` for a holder that is gone must name it too. Boxed, as
    /// `session` is. In `--json`: `"dir:PATH"` or `"file:PATH"`, absent when none.
    #[serde(
        serialize_with = "serialize_in_the_way",
        skip_serializing_if = "Option::is_none"
    )]
    pub in_the_way: Option<Box<crate::Resource>>,
    /// Not a holder but an exclusive claimer *waiting* for the resource (its
    /// intent, docs/design-05-subtrees-and-shared.md §4.3): claims it would be
    /// overtaken by wait until it got in and out. There is nothing to break; the
    /// next step is to wait.
    pub waiting: bool,
}

/// `in_the_way` as `"dir:PATH"` / `"file:PATH"`.
fn serialize_in_the_way<S: serde::Serializer>(
    in_the_way: &Option<Box<crate::Resource>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match in_the_way {
        Some(resource) => {
            serializer.serialize_str(&format!("{}:{}", resource.kind(), resource.target()))
        }
        None => serializer.serialize_none(),
    }
}

impl Holder {
    /// Who holds it, for messages: the owner, and the session's tag when the tenure
    /// has one (`cli (session 0ed754fc9054df0b)`). An owner that already names the
    /// tag (hooks of earlier versions recorded `AGENT session TAG`) is not repeated.
    pub fn who(&self) -> String {
        owner_and_session(&self.owner, self.session.as_deref())
    }

    /// The session's tag when messages should name it beside the owner: the tenure
    /// has a session and the owner does not already name it.
    pub fn session_to_show(&self) -> Option<&crate::SessionTag> {
        session_to_show(&self.owner, self.session.as_deref())
    }

    /// The format version of the record this holder was read from, when a newer
    /// fencepost wrote it (docs/format-v1.md §3.1): this version honours it while
    /// it is live but cannot break it, so a refusal by it must not send anyone to
    /// `fencepost break` (a breaker: the claim said to break it, and the break
    /// refused). `None` for a record of this format.
    pub fn newer_format(&self) -> Option<u64> {
        if !self.holder_id.is_empty() {
            return None;
        }
        self.owner.strip_prefix(NEWER_FORMAT_OWNER)?.parse().ok()
    }
}

/// How a holder read from a newer format's record is named: `a writer of format vN`.
pub(crate) const NEWER_FORMAT_OWNER: &str = "a writer of format v";

fn session_to_show<'a>(
    owner: &str,
    session: Option<&'a crate::SessionTag>,
) -> Option<&'a crate::SessionTag> {
    session.filter(|tag| !owner.contains(tag.as_str()))
}

/// `OWNER (session TAG)`, or the owner alone (see [`Holder::who`]).
pub(crate) fn owner_and_session(owner: &str, session: Option<&crate::SessionTag>) -> String {
    match session_to_show(owner, session) {
        Some(tag) => format!("{owner} (session {tag})"),
        None => owner.to_string(),
    }
}

impl Error {
    /// True for the errors that say the lease is gone — superseded, expired, not
    /// the holder, broken or released — as opposed to a store failure or bad input.
    pub fn is_loss(&self) -> bool {
        matches!(
            self,
            Error::Superseded { .. }
                | Error::Expired { .. }
                | Error::NotHolder { .. }
                | Error::Broken { .. }
                | Error::Released { .. }
        )
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}pid {}, token {}) until {}",
            self.owner,
            self.session_to_show()
                .map(|tag| format!("session {tag}, "))
                .unwrap_or_default(),
            self.pid,
            self.token,
            crate::utc_timestamp(self.expires_at_ms)
        )
    }
}

/// The text of [`Error::Held`]: who is in the way (the holder of the resource, a
/// holder of another resource that covers it or that it covers, or a claimer
/// waiting for a directory above it), until when, and a next step that works.
fn held_text(label: &str, holder: &Holder) -> String {
    const WAIT: &str = "wait for it (acquire with a wait), work on something else meanwhile";
    match (holder.in_the_way.as_deref(), holder.waiting) {
        (Some(other), true) => format!(
            "{label} is kept free for {other}, which {holder} is waiting for; {WAIT} (the waiting claim goes first)"
        ),
        (None, true) => format!(
            "{label} is kept free for {holder}, who is waiting for it; {WAIT} (the waiting claim goes first)"
        ),
        (Some(other), false) => format!(
            "{label} is blocked by {other}, held by {holder}; {WAIT}, or ask a human operator to break the lease of {other} if its holder is gone"
        ),
        (None, false) => format!(
            "{label} is held by {holder}; {WAIT}, or ask a human operator to break the lease if its holder is gone"
        ),
    }
}

/// Everything a protocol operation can fail with.
///
/// Variants are matchable: a caller tells "someone else holds it" ([`Error::Held`])
/// from "your lease is gone" ([`Error::Superseded`], [`Error::Expired`],
/// [`Error::NotHolder`]) from "the store could not be used" ([`Error::Backend`]).
/// An I/O failure is never reported as held (docs/protocol.md §5).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The resource is held by a live lease of someone else, and the wait (if any)
    /// ran out.
    ///
    /// Its message says who, until when, and what to do next; it never suggests
    /// acting as the holder.
    #[error("{}", held_text(.label, .holder))]
    Held {
        /// The resource's label, as given by the caller.
        label: String,
        /// Who holds it.
        holder: Holder,
    },
    /// Release or renew was asked for a tenure that is not the newest record, or
    /// without its proof: someone else claimed after it, the token never held the
    /// resource, or the secret presented is not the tenure's (a token alone is
    /// public and proves nothing). Nothing was written.
    #[error("not the holder of {label} with token {token}{}", describe_newest(&.newest.as_deref().cloned()))]
    NotHolder {
        /// The resource's label.
        label: String,
        /// The token presented.
        token: u64,
        /// The current holder, if the newest record is a live, decodable claim
        /// (boxed: keeps every `Result` of this crate small).
        newest: Option<Box<Holder>>,
    },
    /// Renew or release was asked for by a session ([`crate::Store::resume_session`])
    /// whose tenure is not the newest record of the resource: it never claimed it,
    /// or its tenure ended or was superseded. Nothing was written.
    #[error("session {session} holds no lease on {label}{}", describe_newest(&.newest.as_deref().cloned()))]
    NotSessionHolder {
        /// The resource's label.
        label: String,
        /// The session named.
        session: String,
        /// The current holder, if the newest record is a live, decodable claim
        /// (boxed: keeps every `Result` of this crate small).
        newest: Option<Box<Holder>>,
    },
    /// The lease was written around: a newer tenure owns the resource now. The
    /// lease's token will never pass [`crate::Store::check`] again (docs/protocol.md I3).
    #[error("lease on {label} with token {token} was {}", superseder(*by_token, through.as_deref(), by.as_deref()))]
    Superseded {
        /// The resource's label.
        label: String,
        /// The lost lease's token.
        token: u64,
        /// The token of the tenure that replaced it (0 when the newest record is
        /// unreadable). With [`through`](Error::Superseded::through), that tenure's
        /// token in the file's file-id series, which is no fencing token of this
        /// resource (a file's path and file id number their series apart).
        by_token: u64,
        /// For a file written around under another name — another tenure's record
        /// in the file's file-id series — the name that tenure claimed the file by (a
        /// hard link of it, or its name before it moved); `None` when the resource's
        /// own series was taken.
        through: Option<String>,
        /// Who holds the tenure that replaced it, when its newest record is a claim
        /// not yet released (boxed: keeps every `Result` of this crate small):
        /// named in the message, so that the loser learns who wrote around it and
        /// until when, not a bare token.
        by: Option<Box<Holder>>,
    },
    /// An operator broke the lease on purpose (`fencepost break`): the tenure is
    /// over, and its token never passes again. Acquire again for a new token, once
    /// whatever the operator wanted is done.
    #[error("lease on {label} with token {token} was {note}")]
    Broken {
        /// The resource's label.
        label: String,
        /// The broken lease's token.
        token: u64,
        /// Who broke it, when and why.
        note: crate::record::BreakNote,
    },
    /// The tenure was already released by a holder of its secret (for a lease
    /// handed to a child process: the child released it).
    #[error("lease on {label} with token {token} was already released by its holder")]
    Released {
        /// The resource's label.
        label: String,
        /// The released lease's token.
        token: u64,
    },
    /// A break found no live lease to end: the resource is free (never claimed,
    /// released or expired), or the tenure it saw ended before the break landed.
    #[error("{label} is not held by anyone: there is nothing to break")]
    NotHeld {
        /// The resource's label.
        label: String,
    },
    /// The lease's ttl ran out before it was renewed. An expired lease is lost: it
    /// is never silently revived (docs/protocol.md §3); acquire again for a new token.
    #[error("lease on {label} with token {token} expired at {}", crate::utc_timestamp(*expired_at_ms))]
    Expired {
        /// The resource's label.
        label: String,
        /// The expired lease's token.
        token: u64,
        /// When it expired, in milliseconds since the Unix epoch.
        expired_at_ms: u64,
    },
    /// Acquire created its claim, but the claim had expired by the time it was
    /// confirmed (the process was paused, or the store's creates take longer than the
    /// ttl), and the wait ran out before a retry could succeed. Nothing is held.
    #[error(
        "the claim on {label} expired before it could be confirmed: the store took longer than the ttl of {ttl_ms} ms; use a longer ttl"
    )]
    ClaimLapsed {
        /// The resource's label.
        label: String,
        /// The ttl that proved too short, in milliseconds.
        ttl_ms: u64,
    },
    /// A resource that cannot name a claim series: an empty lock name, a name with
    /// control characters, a file path that cannot be resolved.
    #[error("invalid resource: {0}")]
    InvalidResource(String),
    /// An argument out of range, such as a ttl of 0.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The backend failed; the message names the operation and the path or key.
    /// Never means "held".
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// What superseded a lease, for [`Error::Superseded`]: its token (and its holder,
/// while that tenure's claim is not released), or (token 0) the unreadable record
/// above it.
fn superseder(by_token: u64, through: Option<&str>, by: Option<&Holder>) -> String {
    match (by_token, through) {
        (_, Some(name)) => format!(
            "written around: another holder claimed the same file as {name} (a hard link of \
             it, or its name before it moved)"
        ),
        (0, None) => {
            "superseded by a newer record that cannot be read (a create that never completed)"
                .into()
        }
        (token, None) => match by {
            Some(holder) => format!("superseded by token {token}, held by {holder}"),
            None => format!("superseded by token {token}"),
        },
    }
}

fn describe_newest(newest: &Option<Holder>) -> String {
    match newest {
        Some(holder) => format!("; it is held by {holder}"),
        None => String::new(),
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::Error;

    /// A loss by expiry names the time, as people read it, not milliseconds since
    /// the epoch (a breaker: the MCP server's `lost:` said "expired at
    /// 1796618380538 ms").
    #[test]
    fn an_expiry_is_shown_as_a_time() {
        let expired = Error::Expired {
            label: "zz9".into(),
            token: 1,
            expired_at_ms: 1_796_618_380_538,
        };
        assert_eq!(
            expired.to_string(),
            format!(
                "lease on zz9 with token 1 expired at {}",
                crate::utc_timestamp(1_796_618_380_538)
            )
        );
        assert!(crate::utc_timestamp(1_796_618_380_538).starts_with("2026-12-"));
    }
}

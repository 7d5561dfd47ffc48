//! What a caller asks for ([`AcquireOptions`]) and what a non-failing acquire
//! answers ([`TryAcquire`]).

use super::Lease;
use crate::{Error, Holder, Result};

/// Longest owner name ([`AcquireOptions::owner`]), in characters: every record of
/// the tenure carries it, and `status` and every other claimant's "held by" message
/// print it.
pub const OWNER_MAX_CHARS: usize = 256;

/// Checks an owner name ([`AcquireOptions::owner`]): not blank, no control
/// characters (it is printed in other agents' terminals and messages, where a line
/// break could forge a line of theirs), at most [`OWNER_MAX_CHARS`] characters.
/// Every acquisition checks it before writing anything.
///
/// # Errors
///
/// [`Error::InvalidArgument`] saying what is wrong with it. Pinned by
/// `fencepost/src/protocol/options.rs::tests::owners_are_printable_and_short`.
pub fn check_owner(owner: &str) -> Result<()> {
    let problem = if owner.trim().is_empty() {
        "is empty; give a name such as ci or claude-code".to_string()
    } else if owner.chars().any(char::is_control) {
        "contains control characters; use printable characters".to_string()
    } else if owner.chars().count() > OWNER_MAX_CHARS {
        format!(
            "is {} characters long, over the {OWNER_MAX_CHARS} an owner name may have; use a \
             shorter name",
            owner.chars().count()
        )
    } else {
        return Ok(());
    };
    Err(Error::InvalidArgument(format!("the owner name {problem}")))
}

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
    /// The holder is about to start a command in a process group of its own, whose
    /// id it will name with [`crate::Keepalive::tie_to_group`] once the command
    /// runs (`fencepost run`). Until then its records carry
    /// [`crate::ProcessEvidence::GROUP_TO_COME`], so the end of the holder's
    /// process alone never proves it gone: a holder killed after starting its
    /// command but before naming the group keeps plain ttl semantics instead of
    /// being taken over while the command runs on
    /// (`fencepost/src/protocol/series/judge.rs`, `provably_dead`; checker schedule
    /// `dead_run_spawning`). Only with [`AcquireOptions::tied_to_process`]; default
    /// `false`.
    pub group_to_come: bool,
    /// While waiting, treat a holder whose process provably no longer runs on this
    /// host as expired (dead-holder takeover). Default `true`; `false` is pure ttl
    /// semantics.
    pub dead_holder_takeover: bool,
    /// The session claiming (docs/design-04-claims.md, "Sessions"): a name the
    /// agent's processes agree on, such as the agent's own session id. A claim by
    /// the session whose tenure already holds the resource returns that tenure (same
    /// token), renewed for `ttl_ms`, instead of "held"; any other claimer is refused
    /// as usual. Any process naming the session can renew and release its tenures
    /// ([`crate::Store::resume_session`]), so knowing the id is acting as the
    /// session: records and `status` carry only its [`crate::SessionTag`]. It is not
    /// a secret to provision (the name the agent's processes already share), but
    /// keep it among them (docs/protocol.md §11). At most 256 characters, no
    /// control characters, not blank. Default `None`: every claim is a new tenure
    /// with a random secret.
    pub session: Option<String>,
    /// A shared claim (docs/design-05-subtrees-and-shared.md §4): many shared
    /// holders at once, none while an exclusive claim of the resource (or, for a
    /// subtree, of anything it covers or that covers it) is live or a writer is
    /// waiting for it. It authorizes reading, not writing: the MCP server's `write`
    /// refuses a shared lease. Its token is the generation of the resource's
    /// newest exclusive record when it was admitted ([`crate::Lease::token`]).
    /// Default `false`: exclusive. A shared claim takes no session.
    pub shared: bool,
    /// Ends the wait early: once it says so, the acquisition stops waiting as if
    /// `wait_ms` had run out (within one wake-up, at most
    /// [`crate::CHANGE_WAIT_MAX`] or a backoff step later) and reports the holder
    /// in its way; what it took or queued is given back as at any end of a wait.
    /// For a caller whose client gave up (the MCP server's cancelled request).
    /// Default `None`. Pinned by `fencepost/tests/cancel.rs::a_cancelled_wait_ends_early_and_leaves_nothing`.
    pub cancel: Option<Cancel>,
}

/// Whether an acquisition's caller gave up: see [`AcquireOptions::cancel`].
/// Compared by identity (two `Cancel`s are equal when they are clones).
#[derive(Clone)]
pub struct Cancel(std::sync::Arc<dyn Fn() -> bool + Send + Sync>);

impl Cancel {
    /// A cancellation that `cancelled` reports: true once the caller gave up.
    pub fn new(cancelled: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Cancel(std::sync::Arc::new(cancelled))
    }

    /// Whether the caller gave up.
    pub fn is_cancelled(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cancel")
    }
}

impl PartialEq for Cancel {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Cancel {}

impl AcquireOptions {
    /// A ttl of `ttl_ms`, owner `fencepost`, no waiting.
    pub fn new(ttl_ms: u64) -> Self {
        AcquireOptions {
            ttl_ms,
            owner: "fencepost".into(),
            wait_ms: 0,
            tied_to_process: false,
            group_to_come: false,
            dead_holder_takeover: true,
            session: None,
            shared: false,
            cancel: None,
        }
    }

    /// Sets [`AcquireOptions::cancel`].
    pub fn cancel(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// `deadline` (monotonic ms), or 0 — the wait is over — once the caller gave
    /// up ([`AcquireOptions::cancel`]).
    pub(crate) fn deadline(&self, deadline: u64) -> u64 {
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::CANCEL_IGNORED) {
            return deadline;
        }
        match &self.cancel {
            Some(cancel) if cancel.is_cancelled() => 0,
            _ => deadline,
        }
    }

    /// Sets [`AcquireOptions::tied_to_process`].
    pub fn tied_to_process(mut self, tied: bool) -> Self {
        self.tied_to_process = tied;
        self
    }

    /// Sets [`AcquireOptions::group_to_come`].
    pub fn group_to_come(mut self, to_come: bool) -> Self {
        self.group_to_come = to_come;
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

    /// Sets [`AcquireOptions::session`].
    pub fn session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }

    /// Sets [`AcquireOptions::shared`].
    pub fn shared(mut self, shared: bool) -> Self {
        self.shared = shared;
        self
    }

    /// Sets how long to wait for a held resource, in milliseconds.
    pub fn wait_ms(mut self, wait_ms: u64) -> Self {
        self.wait_ms = wait_ms;
        self
    }
}

/// The outcome of [`Store::try_acquire`](crate::Store::try_acquire): the lease, or who holds the resource.
// Returned once per acquisition and unpacked at once: boxing the lease would add an
// allocation to every acquire to save a few hundred bytes of stack.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TryAcquire {
    /// Acquired.
    Acquired(Lease),
    /// Held by someone else (after waiting, if a wait was given).
    Held(Holder),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_printable_and_short() {
        assert!(check_owner("claude-code").is_ok());
        assert!(check_owner(&"é".repeat(OWNER_MAX_CHARS)).is_ok());
        for (owner, says) in [
            ("", "is empty"),
            ("  ", "is empty"),
            ("a\nfencepost: forged", "control characters"),
            ("tab\there", "control characters"),
        ] {
            let error = check_owner(owner).unwrap_err().to_string();
            assert!(error.contains(says), "{owner:?}: {error}");
        }
        let long = "x".repeat(OWNER_MAX_CHARS + 1);
        let error = check_owner(&long).unwrap_err().to_string();
        assert!(error.contains("257 characters long"), "{error}");
    }
}

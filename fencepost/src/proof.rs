//! Proof of holding: the per-tenure secret and the lease handle that carries it.
//!
//! A fencing token is an ordering, public by design: `status`, "held by" messages
//! and tool results show it, and anyone may `check` it. Acting *as the holder*
//! (renew, release, a mediated write) needs the tenure's secret: 128 random bits
//! drawn when the tenure begins, of which only the SHA-256 is stored in the record
//! (`secret_sha256`). The [`crate::Lease`] carries the secret; a process that holds
//! the lease across separate commands carries it as a [`LeaseHandle`]
//! (`<token>.<secret>`), which nothing shows to other parties.
//! `docs/design-03-server-and-cli.md` argues the design.

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use sha2::{Digest, Sha256};

/// Hex digits of a secret (128 bits).
const SECRET_HEX_LEN: usize = 32;

/// A tenure's secret: 32 lowercase hexadecimal digits (128 bits from the operating
/// system's random source). Its `Debug` form never shows it.
#[derive(Clone)]
pub struct Secret {
    text: String,
    /// [`Secret::sha256`], computed on first use and kept (a pure function of
    /// `text`): a tenure's acquire writes it and its renewals and release compare
    /// with it, and each would otherwise hash again (docs/design-07-performance.md).
    proof: OnceLock<Arc<str>>,
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Secret {}

impl Secret {
    /// A new random secret (also the random part of a fresh session id, e.g. the
    /// MCP server's default: a session id is as good as its tenures' secret).
    ///
    /// # Panics
    ///
    /// When the operating system's random source fails, which `getrandom` documents
    /// as not happening on supported platforms after boot. A predictable secret
    /// would be worse than no lease.
    pub fn generate() -> Secret {
        let mut bytes = [0u8; SECRET_HEX_LEN / 2];
        getrandom::fill(&mut bytes).expect("the operating system's random source failed");
        Secret::new(hex(&bytes))
    }

    /// The secret of every tenure claimed by `session` (docs/design-04-claims.md,
    /// "Sessions"): the first 128 bits of SHA-256 over `fencepost-session-v1`, a
    /// zero byte and the session id, as 32 lowercase hex digits. Derived, not drawn:
    /// every process that names the session computes the same secret, which is how a
    /// later process of the session renews and releases its tenures — and why such a
    /// tenure's proof is only as private as the session's id, which records and
    /// `status` therefore never show (they carry its [`SessionTag`]).
    pub fn for_session(session: &str) -> Secret {
        let mut hasher = Sha256::new();
        hasher.update(b"fencepost-session-v1\0");
        hasher.update(session.as_bytes());
        Secret::new(hex(&hasher.finalize()[..SECRET_HEX_LEN / 2]))
    }

    fn new(text: String) -> Secret {
        Secret {
            text,
            proof: OnceLock::new(),
        }
    }

    /// The secret's text (32 lowercase hex digits).
    pub fn expose(&self) -> &str {
        &self.text
    }

    /// The SHA-256 of the secret's text, 64 lowercase hex digits: what records store.
    pub fn sha256(&self) -> String {
        self.proof_text().to_string()
    }

    /// [`Secret::sha256`] as the shared text a record holds (`secret_sha256`),
    /// hashed once per secret (and its clones made after).
    pub(crate) fn proof(&self) -> Arc<str> {
        Arc::clone(self.proof_text())
    }

    fn proof_text(&self) -> &Arc<str> {
        self.proof.get_or_init(|| {
            // Hex digits on the stack, then one allocation: the shared text itself.
            const DIGITS: &[u8; 16] = b"0123456789abcdef";
            let digest = Sha256::digest(self.text.as_bytes());
            let mut text = [0u8; 64];
            for (pair, byte) in text.chunks_exact_mut(2).zip(digest.iter()) {
                pair[0] = DIGITS[usize::from(byte >> 4)];
                pair[1] = DIGITS[usize::from(byte & 0x0f)];
            }
            Arc::from(std::str::from_utf8(&text).expect("hex digits are ASCII"))
        })
    }

    /// True when `stored` (a record's `secret_sha256`) is this secret's hash. A
    /// record without a hash matches no secret.
    pub(crate) fn proves(&self, stored: Option<&str>) -> bool {
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::PROOF_IGNORED) {
            return true;
        }
        stored == Some(&**self.proof_text())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl FromStr for Secret {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.len() == SECRET_HEX_LEN
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(Secret::new(text.to_string()))
        } else {
            Err(format!(
                "a lease secret is {SECRET_HEX_LEN} lowercase hexadecimal digits"
            ))
        }
    }
}

/// What records, `status` and "held by" messages show of a session: its *tag*, the
/// first 64 bits of SHA-256 over `fencepost-session-tag-v1`, a zero byte and the
/// session id, as 16 lowercase hex digits (docs/format-v1.md §3.0).
///
/// Why not the id itself: a session tenure's secret is derived from the id
/// ([`Secret::for_session`]), so showing the id would hand every reader of the store
/// the proof of holding. The tag tells sessions apart and lets a process of the
/// session recognize its own tenures ([`SessionTag::of`] of its id), and nothing
/// computes the id or the secret from it. Pinned by
/// `a_session_tag_names_the_session_without_revealing_it` and the conformance
/// scenario `session_records_never_carry_the_session_id`.
#[derive(Clone, PartialEq, Eq, Hash, Debug, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct SessionTag(String);

impl SessionTag {
    /// The tag of session id `session`.
    pub fn of(session: &str) -> SessionTag {
        let mut hasher = Sha256::new();
        hasher.update(b"fencepost-session-tag-v1\0");
        hasher.update(session.as_bytes());
        SessionTag(hex(&hasher.finalize()[..8]))
    }

    /// A tag as `status` prints it: 16 hex digits (either case); `None` for any
    /// other text. For an operator naming a session by what `status` showed
    /// ([`crate::Store::break_session`]). Pinned by
    /// `a_tag_parses_as_status_prints_it_and_nothing_else_does`.
    pub fn parse(text: &str) -> Option<SessionTag> {
        let text = text.trim().to_ascii_lowercase();
        (text.len() == 16 && text.bytes().all(|b| b.is_ascii_hexdigit()))
            .then_some(SessionTag(text))
    }

    /// The tag's text (16 lowercase hex digits in records this crate writes; a
    /// record from elsewhere may carry other text, which matches no session).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the holder of a lease keeps to act on it from another process: the token
/// and the tenure's secret, written `<token>.<secret>` (e.g.
/// `7.3f9a0c…`). [`crate::Store::resume`] turns it back into a [`crate::Lease`].
///
/// `Display` writes the whole handle (that is its purpose); `Debug` hides the
/// secret. Show the handle only to the process that holds the lease (the CLI
/// prints it on `claim`'s stdout, `run` exports it to its child); everything shown
/// to others carries the token alone.
#[derive(Clone, PartialEq, Eq)]
pub struct LeaseHandle {
    token: u64,
    secret: Secret,
}

impl LeaseHandle {
    /// A handle from its parts.
    pub fn new(token: u64, secret: Secret) -> Self {
        LeaseHandle { token, secret }
    }

    /// The fencing token.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The tenure's secret.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }
}

impl fmt::Display for LeaseHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.token, self.secret.text)
    }
}

impl fmt::Debug for LeaseHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseHandle")
            .field("token", &self.token)
            .field("secret", &self.secret)
            .finish()
    }
}

impl FromStr for LeaseHandle {
    type Err = String;
    /// Parses `<token>.<secret>`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let Some((token, secret)) = text.split_once('.') else {
            return Err("a lease handle is <token>.<secret>, as `claim` printed it".into());
        };
        let token = token
            .parse::<u64>()
            .map_err(|_| "a lease handle starts with the token, a whole number".to_string())?;
        Ok(LeaseHandle {
            token,
            secret: secret.parse()?,
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    crate::identity::push_hex(&mut out, bytes);
    out
}

/// `ms` (milliseconds since the Unix epoch) as an RFC 3339 UTC timestamp to the
/// second, `2026-12-01T12:30:05Z`: how messages for people and models name a moment.
pub fn utc_timestamp(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_random_hex_and_hidden_from_debug() {
        let (a, b) = (Secret::generate(), Secret::generate());
        assert_ne!(a, b);
        assert_eq!(a.expose().len(), 32);
        assert!(a.expose().parse::<Secret>().is_ok());
        assert_eq!(format!("{a:?}"), "Secret(…)");
        assert!(a.proves(Some(&a.sha256())));
        assert!(!b.proves(Some(&a.sha256())));
        assert!(!a.proves(None), "a record without a hash proves nothing");
        assert_eq!(a.sha256().len(), 64);
    }

    /// The proof is SHA-256 of the secret's text in lowercase hex, the same whether
    /// it is asked for first on the secret or on a clone, and kept by later clones.
    #[test]
    fn the_kept_proof_is_the_sha256_of_the_secret_text() {
        let secret: Secret = "0123456789abcdef0123456789abcdef".parse().unwrap();
        let expected = "3eb1bd439947eb762998e566ccc2e099c791118b2f40579cc4f7da2b5061b7f9";
        let early_clone = secret.clone();
        assert_eq!(secret.sha256(), expected);
        assert_eq!(&*secret.proof(), expected);
        assert_eq!(early_clone.sha256(), expected);
        assert_eq!(secret.clone().sha256(), expected);
        assert!(secret.proves(Some(expected)));
        assert!(!secret.proves(Some(&expected.to_uppercase())));
        assert_eq!(secret, early_clone);
    }

    #[test]
    fn a_session_secret_is_derived_from_the_session_id_alone() {
        // The vector docs/format-v1.md §3.0 gives, so another implementation can
        // check its derivation.
        let secret = Secret::for_session("agent-7");
        assert_eq!(secret.expose(), "427c97da9c01a527cfbd0790ab1a33fd");
        assert_eq!(Secret::for_session("agent-7"), secret);
        assert_ne!(Secret::for_session("agent-8"), secret);
        assert!(secret.expose().parse::<Secret>().is_ok());
    }

    #[test]
    fn a_tag_parses_as_status_prints_it_and_nothing_else_does() {
        let tag = SessionTag::of("agent-7");
        assert_eq!(SessionTag::parse(tag.as_str()), Some(tag.clone()));
        assert_eq!(SessionTag::parse(&tag.as_str().to_uppercase()), Some(tag));
        for other in [
            "agent-7",
            "",
            "0123456789abcde",
            "0123456789abcdefa",
            "0123456789abcdeg",
        ] {
            assert_eq!(SessionTag::parse(other), None, "{other:?}");
        }
    }

    #[test]
    fn a_session_tag_names_the_session_without_revealing_it() {
        // The vector docs/format-v1.md §3.0 gives.
        let tag = SessionTag::of("agent-7");
        assert_eq!(tag.as_str().len(), 16);
        assert_eq!(tag, SessionTag::of("agent-7"));
        assert_ne!(tag, SessionTag::of("agent-8"));
        let secret = Secret::for_session("agent-7");
        assert!(
            !secret.expose().contains(tag.as_str()),
            "the tag is not a piece of the secret"
        );
        assert!(!tag.as_str().contains("agent"));
        assert_eq!(tag.as_str(), "d6029b4dd9683fb9");
    }

    #[test]
    fn handles_round_trip_and_reject_bad_text() {
        let handle = LeaseHandle::new(7, Secret::generate());
        let text = handle.to_string();
        assert!(text.starts_with("7."));
        assert_eq!(text.parse::<LeaseHandle>().unwrap(), handle);
        assert!(!format!("{handle:?}").contains(handle.secret().expose()));
        for bad in [
            "7",
            "7.",
            "x.0123456789abcdef0123456789abcdef",
            "7.0123456789ABCDEF0123456789ABCDEF",
            "7.0123",
            "-1.0123456789abcdef0123456789abcdef",
        ] {
            assert!(bad.parse::<LeaseHandle>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_timestamp(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc_timestamp(1_796_128_205_999), "2026-12-01T12:30:05Z");
    }
}

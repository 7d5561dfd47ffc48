//! The record format (v1) and its decode rules (docs/protocol.md §3, §5).
//!
//! One JSON object per record. A reader classifies the newest record as a v1
//! [`Record`], a record of a *newer* format honoured through its envelope
//! ([`Decoded::Newer`]), or [`Decoded::Torn`] (empty, truncated, garbage, wrong
//! types, or claiming another key or generation). Torn is never "absent": it is not
//! live and is superseded by the next generation, so numbering never restarts.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The format version this crate writes.
pub const FORMAT_VERSION: u64 = 1;

/// One immutable entry of a key's claim series (format v1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Format version: 1.
    pub v: u64,
    /// The key this record belongs to.
    pub key: Arc<str>,
    /// What the holder typed, for `status`.
    pub label: Arc<str>,
    /// The fencing token: the generation at which the tenure began (docs/protocol.md I5).
    pub token: u64,
    /// This record's position in the series.
    pub generation: u64,
    /// Unique id of the tenure.
    pub holder: Arc<str>,
    /// Human-readable holder name.
    pub owner: Arc<str>,
    /// Process id of the holder: the process that began the tenure (renewals and the
    /// tombstone keep it, whoever writes them), so `status` names the holder.
    pub pid: u32,
    /// The holder's host name (empty when unknown; absent in records written before
    /// it was recorded).
    #[serde(default, skip_serializing_if = "is_empty")]
    pub host: Arc<str>,
    /// When this record was written, milliseconds since the Unix epoch.
    pub granted_at_ms: u64,
    /// When the lease ends, milliseconds since the Unix epoch.
    pub expires_at_ms: u64,
    /// The lease duration in milliseconds.
    pub ttl_ms: u64,
    /// True for a tombstone written by release or break: never live, whatever the
    /// clocks say.
    #[serde(default)]
    pub released: bool,
    /// SHA-256 of the tenure's secret, 64 lowercase hex digits: the proof of holding.
    /// Renew and release act only for a caller presenting the secret whose hash this
    /// is; a record without it (written before proofs existed) can be checked by
    /// token but never acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_sha256: Option<Arc<str>>,
    /// Set on the tombstone written by a break: who ended the tenure, when and why.
    /// A broken record is always `released`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken: Option<BreakNote>,
    /// What proves the tenure's process still runs, for dead-holder takeover; only
    /// in records of a tenure that lives as long as its process (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<crate::ProcessEvidence>,
    /// The tag of the session that claimed the tenure ([`crate::SessionTag`],
    /// docs/design-04-claims.md, "Sessions") — never the session id, from which the
    /// tenure's secret is derived — copied by its renewals and tombstone; absent for
    /// a claim without a session. A session tenure's `secret_sha256` is that of
    /// [`crate::Secret::for_session`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<crate::SessionTag>,
    /// Only on a tombstone written by a release that found waiters queued for the
    /// key: whose turn it is next ([`Turn`]). For [`TURN_MS`](crate::TURN_MS) from the
    /// tombstone's stamp no other claimant takes the key, so the oldest waiter gets it
    /// instead of whoever is fastest (docs/design-07-performance.md, "Who is woken:
    /// turns"). Decides fairness only: every claim is still one exclusive create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Turn>,
}

/// The waiter a contended release hands the key to ([`Record::next`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// The holder id the waiter will claim with (its ticket's `holder`).
    pub holder: Arc<str>,
    /// The generation of its ticket in the key's wait queue (`queue-…`).
    pub ticket: u64,
    /// Its owner and process id, from its ticket: for the status line of the
    /// others, who wait for it.
    #[serde(default)]
    pub owner: Arc<str>,
    /// See [`Turn::owner`].
    #[serde(default)]
    pub pid: u32,
}

fn is_empty(text: &Arc<str>) -> bool {
    text.is_empty()
}

/// Who broke a tenure, when and why (the tombstone of `fencepost break`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakNote {
    /// Who broke it, as the operator named themselves.
    pub by: String,
    /// When, milliseconds since the Unix epoch (the breaker's clock).
    pub at_ms: u64,
    /// Why, in the operator's words.
    pub reason: String,
}

impl std::fmt::Display for BreakNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "broken by {} at {}: {}",
            self.by,
            crate::utc_timestamp(self.at_ms),
            self.reason
        )
    }
}

/// The fields every format version must keep, by which a reader of an older version
/// honours a newer record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Envelope {
    /// The fencing token.
    pub token: u64,
    /// The record's generation.
    pub generation: u64,
    /// When the record was written, milliseconds since the Unix epoch.
    pub granted_at_ms: u64,
    /// When the lease ends, milliseconds since the Unix epoch.
    pub expires_at_ms: u64,
}

/// A record as read back.
// A record is read, matched and dropped; boxing it would only add an allocation
// per read and change the public shape.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// A well-formed v1 record.
    Record(Record),
    /// A well-formed record of a newer format version `v`: held while its envelope
    /// says so, never treated as free, never ours.
    Newer {
        /// Its format version.
        v: u64,
        /// Its envelope fields.
        envelope: Envelope,
    },
    /// Not a usable record; the reason is for diagnostics.
    Torn(String),
}

impl Record {
    /// Serializes the record as one JSON object.
    pub fn encode(&self) -> Vec<u8> {
        let bytes = to_json(self);
        // The confirming read that follows a create decodes exactly these bytes.
        if self.v == FORMAT_VERSION {
            recent::remember(&bytes, self);
        }
        bytes
    }

    /// [`Record::encode`] consuming the record: it moves into the recent-record
    /// cache instead of being cloned there (six strings fewer to allocate on a
    /// release, docs/design-07-performance.md).
    pub(crate) fn encode_owned(self) -> Vec<u8> {
        let bytes = to_json(&self);
        if self.v == FORMAT_VERSION {
            recent::remember_with(&bytes, || self);
        }
        bytes
    }

    /// The envelope of this record.
    pub fn envelope(&self) -> Envelope {
        Envelope {
            token: self.token,
            generation: self.generation,
            granted_at_ms: self.granted_at_ms,
            expires_at_ms: self.expires_at_ms,
        }
    }
}

/// The record as one JSON object, written into a buffer sized for a whole record
/// at once: `serde_json::to_vec` starts empty and grows (copies) its way up
/// (docs/design-07-performance.md). The same bytes either way.
fn to_json(record: &Record) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(RECORD_CAPACITY);
    write_json(&mut bytes, record);
    // Every record a debug build writes (the whole test suite's) is checked against
    // serde's own output, so the writer below cannot drift from the derive.
    #[cfg(debug_assertions)]
    debug_assert_eq!(
        String::from_utf8_lossy(&bytes),
        String::from_utf8_lossy(&serde_json::to_vec(record).expect("records always serialize")),
        "the record writer diverged from serde_json"
    );
    bytes
}

/// Room for a typical record (a claim with a proof, a host and a session tag is
/// under 512 bytes); a longer one grows as before.
const RECORD_CAPACITY: usize = 512;

/// Writes `record` exactly as `serde_json::to_writer` of its derived `Serialize`
/// does (fields in declaration order, the same ones skipped), without serde's
/// per-field dispatch and byte-by-byte string escaping: the claim and the tombstone
/// of every acquire + release are encoded here (docs/design-07-performance.md).
/// The rare nested fields (a break note, process evidence, a session tag, a turn)
/// and any string that needs escaping go through serde_json itself.
fn write_json(out: &mut Vec<u8>, record: &Record) {
    // Named field by field, without `..`: a field added to `Record` does not
    // compile here until it is written.
    let Record {
        v,
        key,
        label,
        token,
        generation,
        holder,
        owner,
        pid,
        host,
        granted_at_ms,
        expires_at_ms,
        ttl_ms,
        released,
        secret_sha256,
        broken,
        process,
        session,
        next,
    } = record;
    out.extend_from_slice(b"{\"v\":");
    push_u64(out, *v);
    out.extend_from_slice(b",\"key\":");
    push_str(out, key);
    out.extend_from_slice(b",\"label\":");
    push_str(out, label);
    out.extend_from_slice(b",\"token\":");
    push_u64(out, *token);
    out.extend_from_slice(b",\"generation\":");
    push_u64(out, *generation);
    out.extend_from_slice(b",\"holder\":");
    push_str(out, holder);
    out.extend_from_slice(b",\"owner\":");
    push_str(out, owner);
    out.extend_from_slice(b",\"pid\":");
    push_u64(out, u64::from(*pid));
    if !is_empty(host) {
        out.extend_from_slice(b",\"host\":");
        push_str(out, host);
    }
    out.extend_from_slice(b",\"granted_at_ms\":");
    push_u64(out, *granted_at_ms);
    out.extend_from_slice(b",\"expires_at_ms\":");
    push_u64(out, *expires_at_ms);
    out.extend_from_slice(b",\"ttl_ms\":");
    push_u64(out, *ttl_ms);
    out.extend_from_slice(if *released {
        &b",\"released\":true"[..]
    } else {
        b",\"released\":false"
    });
    if let Some(secret_sha256) = secret_sha256 {
        out.extend_from_slice(b",\"secret_sha256\":");
        push_str(out, secret_sha256);
    }
    push_nested(out, b",\"broken\":", broken.as_ref());
    push_nested(out, b",\"process\":", process.as_ref());
    push_nested(out, b",\"session\":", session.as_ref());
    push_nested(out, b",\"next\":", next.as_ref());
    out.push(b'}');
}

/// A JSON string as serde_json writes it: as is between quotes unless it holds a
/// byte serde_json escapes (a control character, a quote or a backslash); then
/// serde_json writes it.
fn push_str(out: &mut Vec<u8>, text: &str) {
    if needs_escape(text.as_bytes()) {
        serde_json::to_writer(&mut *out, text).expect("a string always serializes");
    } else {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    }
}

/// Whether `bytes` hold a byte below 0x20, a quote or a backslash. Bitwise, not
/// short-circuiting: the scan compiles to vector compares.
fn needs_escape(bytes: &[u8]) -> bool {
    bytes.iter().fold(false, |any, &b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    })
}

/// An unsigned integer in decimal, as serde_json writes it: four digits per
/// division (a record's timestamps have thirteen), each four as two pairs from a
/// table of the hundred.
fn push_u64(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    out.extend_from_slice(decimal(n, &mut digits));
}

/// Appends `n` in decimal, as `{n}` formats it, to text (a holder id's pid).
pub(crate) fn push_decimal(out: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    // ASCII digits only.
    out.extend(decimal(n, &mut digits).iter().map(|&d| char::from(d)));
}

/// `n` in decimal, as `{n}` formats it, written at the end of `digits`.
fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    const PAIRS: &[u8; 200] = b"\
        0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let pair = |digits: &mut [u8; 20], at: usize, two: u64| {
        let two = two as usize * 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[two..two + 2]);
    };
    let mut at = digits.len();
    while n >= 10_000 {
        let four = n % 10_000;
        n /= 10_000;
        at -= 4;
        pair(digits, at, four / 100);
        pair(digits, at + 2, four % 100);
    }
    if n >= 100 {
        at -= 2;
        pair(digits, at, n % 100);
        n /= 100;
    }
    if n >= 10 {
        at -= 2;
        pair(digits, at, n);
    } else {
        at -= 1;
        digits[at] = b'0' + n as u8;
    }
    &digits[at..]
}

/// An optional field serialized by serde_json, left out when absent (the derive's
/// `skip_serializing_if = "Option::is_none"`).
fn push_nested<T: Serialize>(out: &mut Vec<u8>, name: &[u8], value: Option<&T>) {
    if let Some(value) = value {
        out.extend_from_slice(name);
        serde_json::to_writer(&mut *out, value).expect("records always serialize");
    }
}

/// True when `bytes` are a lease store record of any format version: a JSON object
/// whose `v` is a whole number and whose `key` is a store key ([`crate::Key::parse`]).
/// Wherever it was found (a hard link out of a store reaches a record under any
/// name). Pinned by `record::tests::a_record_is_told_from_other_json`.
pub fn is_record(bytes: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Named {
        v: u64,
        key: String,
    }
    serde_json::from_slice::<Named>(bytes)
        .is_ok_and(|named| named.v >= 1 && crate::Key::parse(&named.key).is_some())
}

/// Decodes `bytes` read as generation `generation` of `key`.
///
/// A record whose `key` or `generation` disagrees with where it was found is torn:
/// a copied or misplaced file must not pass as this series' claim.
pub fn decode(bytes: &[u8], key: &str, generation: u64) -> Decoded {
    if bytes.is_empty() {
        return Decoded::Torn("empty record".into());
    }
    // Bytes this thread encoded or decoded moments ago (a confirming read of its own
    // create, a release's read of the claim it confirmed): their record, unparsed.
    if let Some(decoded) = recent::lookup(bytes, |record| {
        #[cfg(debug_assertions)]
        {
            let parsed = serde_json::from_slice::<Record>(bytes).ok();
            debug_assert_eq!(
                parsed.as_ref(),
                Some(record),
                "the recent-record cache diverged"
            );
        }
        match v1_fault(record, key, generation) {
            None => Decoded::Record(record.clone()),
            Some(fault) => Decoded::Torn(fault),
        }
    }) {
        return decoded;
    }
    // Fast path, the common case: a well-formed v1 record parsed straight into
    // `Record`. It decides exactly as the general path below would: whatever it
    // refuses (another version, duplicate fields, wrong types) goes down that path.
    if let Ok(record) = serde_json::from_slice::<Record>(bytes)
        && record.v == FORMAT_VERSION
    {
        recent::remember(bytes, &record);
        return check_v1(record, key, generation);
    }
    decode_general(bytes, key, generation)
}

/// The few v1 records this thread encoded or decoded last, by their exact bytes.
/// Decoding is a pure function of the bytes (the key and generation checks are made
/// afresh on every hit), so a hit returns what parsing would; in debug builds every
/// hit is parsed anyway and compared (pinned by
/// `record::tests::a_recent_record_decodes_as_parsing_would`). A protocol operation
/// reads back the record it just created and a release reads the claim its acquire
/// confirmed: without this, most of the memory backend's acquire + release is JSON
/// parsing of bytes it has just seen (docs/design-07-performance.md).
mod recent {
    use std::cell::RefCell;

    use super::Record;

    /// Entries kept per thread: a claim, the tombstone below it, a renewal.
    const KEPT: usize = 4;

    /// Up to [`KEPT`] entries; once full, `oldest` is the slot the next one
    /// replaces in place (a ring: no entry is shifted, each is a whole record).
    struct Recent {
        entries: Vec<(Vec<u8>, Record)>,
        oldest: usize,
    }

    thread_local! {
        static RECENT: RefCell<Recent> = const {
            RefCell::new(Recent { entries: Vec::new(), oldest: 0 })
        };
    }

    /// `decode` of the kept record of `bytes`, if one is kept: given a reference
    /// to it, so the record is cloned once, into what `decode` returns, instead
    /// of cloned and then moved through `check_v1` (a record is 344 bytes).
    pub(super) fn lookup<T>(bytes: &[u8], decode: impl FnOnce(&Record) -> T) -> Option<T> {
        RECENT
            .try_with(|recent| {
                let recent = recent.borrow();
                // Newest first: a confirming read, and a release's read of its
                // claim, find the entry remembered last.
                let kept = recent.entries.len();
                (0..kept)
                    .map(|age| &recent.entries[(recent.oldest + kept - 1 - age) % kept])
                    .find(|(b, _)| b.as_slice() == bytes)
                    .map(|(_, r)| decode(r))
            })
            .ok()
            .flatten()
    }

    pub(super) fn remember(bytes: &[u8], record: &Record) {
        remember_with(bytes, || record.clone());
    }

    /// [`remember`], taking the record only when it is not already kept.
    pub(super) fn remember_with(bytes: &[u8], record: impl FnOnce() -> Record) {
        let _ = RECENT.try_with(|recent| {
            let mut recent = recent.borrow_mut();
            if recent.entries.iter().any(|(b, _)| b.as_slice() == bytes) {
                return;
            }
            if recent.entries.len() < KEPT {
                let mut buffer = Vec::with_capacity(super::RECORD_CAPACITY);
                buffer.extend_from_slice(bytes);
                recent.entries.push((buffer, record()));
                return;
            }
            // The evicted entry's buffer holds the new bytes: no allocation.
            let oldest = recent.oldest;
            recent.oldest = (oldest + 1) % KEPT;
            let (buffer, kept) = &mut recent.entries[oldest];
            buffer.clear();
            buffer.extend_from_slice(bytes);
            *kept = record();
        });
    }
}

/// [`decode`] without its fast path: through a JSON value, any format version.
fn decode_general(bytes: &[u8], key: &str, generation: u64) -> Decoded {
    if bytes.is_empty() {
        return Decoded::Torn("empty record".into());
    }
    let value: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(e) => return Decoded::Torn(format!("not JSON: {e}")),
    };
    let Some(v) = value.get("v").and_then(serde_json::Value::as_u64) else {
        return Decoded::Torn("no numeric format version `v`".into());
    };
    match v {
        0 => Decoded::Torn("format version 0 does not exist".into()),
        FORMAT_VERSION => match Record::deserialize(&value) {
            Ok(record) => check_v1(record, key, generation),
            Err(e) => Decoded::Torn(format!("malformed v1 record: {e}")),
        },
        newer => match Envelope::deserialize(&value) {
            Ok(envelope) if envelope.generation != generation => Decoded::Torn(format!(
                "record names generation {}, found as {generation}",
                envelope.generation
            )),
            // A token is the generation its tenure began at, so never above the
            // record's own generation: a larger one would raise the fence past the
            // series and let numbering fall back below an accepted token (I2).
            Ok(envelope) if envelope.token == 0 || envelope.token > envelope.generation => {
                Decoded::Torn(format!(
                    "token {} above generation {}",
                    envelope.token, envelope.generation
                ))
            }
            Ok(envelope) => Decoded::Newer { v: newer, envelope },
            Err(e) => Decoded::Torn(format!("v{newer} record without a readable envelope: {e}")),
        },
    }
}

/// The v1 rules beyond the field types: the record names where it was found, its
/// token can start a tenure at or before its generation, and only a tombstone is
/// broken.
fn check_v1(record: Record, key: &str, generation: u64) -> Decoded {
    match v1_fault(&record, key, generation) {
        None => Decoded::Record(record),
        Some(fault) => Decoded::Torn(fault),
    }
}

/// Why [`check_v1`] finds `record` torn, if it does.
fn v1_fault(record: &Record, key: &str, generation: u64) -> Option<String> {
    if *record.key != *key {
        Some(format!(
            "record names key {}, found under {key}",
            record.key
        ))
    } else if record.generation != generation {
        Some(format!(
            "record names generation {}, found as {generation}",
            record.generation
        ))
    } else if record.token == 0 || record.token > record.generation {
        Some(format!(
            "token {} cannot start a tenure at or before generation {}",
            record.token, record.generation
        ))
    } else if record.broken.is_some() && !record.released {
        Some("a broken record that is not a tombstone".into())
    } else {
        None
    }
}

/// The liveness rule (docs/protocol.md §3.3): live while `now < expires_at`, or while `now` is
/// earlier than the record's `granted_at` (the clock stepped backwards, so expiry is
/// unknowable and the record is held: wrongly blocking is recoverable, wrongly
/// freeing is not).
pub fn is_live(envelope: &Envelope, now_ms: u64) -> bool {
    #[cfg(feature = "planted-bugs")]
    if crate::planted::on(&crate::planted::LIVENESS_IGNORES_BACKWARDS_CLOCK) {
        return now_ms >= envelope.granted_at_ms && now_ms < envelope.expires_at_ms;
    }
    now_ms < envelope.expires_at_ms || now_ms < envelope.granted_at_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            v: 1,
            key: "lock-0123456789abcdef0123456789abcdef".into(),
            label: "db:migrations".into(),
            token: 3,
            generation: 4,
            holder: "cli-1-abc".into(),
            owner: "cli".into(),
            pid: 1,
            host: "".into(),
            granted_at_ms: 1_000,
            expires_at_ms: 31_000,
            ttl_ms: 30_000,
            released: false,
            secret_sha256: Some("ab".repeat(32).into()),
            broken: None,
            next: None,
            process: None,
            session: None,
        }
    }

    fn decode_sample(bytes: &[u8]) -> Decoded {
        decode(bytes, &sample().key, 4)
    }

    /// A record of this version or a newer one is a record under any name; other
    /// JSON, a key that is no store key, and other text are not.
    #[test]
    fn a_record_is_told_from_other_json() {
        assert!(is_record(&sample().encode()));
        assert!(is_record(
            br#"{"v":7,"key":"lock-0123456789abcdef0123456789abcdef","x":1}"#
        ));
        for other in [
            &br#"{"v":1,"key":"hello"}"#[..],
            br#"{"key":"lock-0123456789abcdef0123456789abcdef"}"#,
            br#"{"v":0,"key":"lock-0123456789abcdef0123456789abcdef"}"#,
            br#"{"name":"package","version":"1.0.0"}"#,
            b"fn main() {}\n",
            b"",
        ] {
            assert!(!is_record(other), "{}", String::from_utf8_lossy(other));
        }
    }

    /// Bytes just encoded or decoded come back from the recent-record cache as the
    /// record parsing gives, one per exact byte string, and the key and generation
    /// checks still apply to them.
    #[test]
    fn a_recent_record_decodes_as_parsing_would() {
        let one = sample();
        let mut two = sample();
        two.token = 4;
        two.released = true;
        two.session = Some(crate::proof::SessionTag::of("s"));
        let (a, b) = (one.encode(), two.encode());
        assert_eq!(decode_sample(&a), Decoded::Record(one.clone()));
        assert_eq!(decode_sample(&b), Decoded::Record(two.clone()));
        // A second time (from the cache), and after other records pushed through it.
        for g in 0..10 {
            let mut other = sample();
            other.generation = 100 + g;
            decode(&other.encode(), &other.key, other.generation);
        }
        let c = sample().encode();
        assert_eq!(decode_sample(&c), Decoded::Record(one.clone()));
        // Found under another generation or key: torn, cached or not.
        assert!(matches!(decode(&a, &one.key, 5), Decoded::Torn(_)));
        assert!(matches!(
            decode(&a, "lock-ffffffffffffffffffffffffffffffff", 4),
            Decoded::Torn(_)
        ));
        // Another thread (its own cache, empty) decodes the same.
        let elsewhere = std::thread::spawn(move || decode_sample(&a))
            .join()
            .unwrap();
        assert_eq!(elsewhere, Decoded::Record(one));
    }

    /// The fast path of `decode` (straight into `Record`) decides exactly as the
    /// general path through a JSON value, for good records and for every way a
    /// record can be refused or read differently (issue 17).
    #[test]
    fn the_fast_path_decides_as_the_general_path() {
        let good = String::from_utf8(sample().encode()).unwrap();
        let with = |from: &str, to: &str| good.replacen(from, to, 1);
        let mut broken = sample();
        broken.broken = Some(BreakNote {
            by: "op".into(),
            at_ms: 5,
            reason: "r".into(),
        });
        let variants = [
            good.clone(),
            with("\"v\":1", "\"v\":2"),
            with("\"v\":1", "\"v\":1.0"),
            with("\"v\":1", "\"v\":0"),
            with("\"token\":3", "\"token\":0"),
            with("\"token\":3", "\"token\":5"),
            with("\"token\":3", "\"token\":\"3\""),
            with("\"generation\":4", "\"generation\":7"),
            with("lock-0123", "lock-9999"),
            // A duplicate field: the general path keeps the last, the fast one refuses.
            with("\"token\":3", "\"token\":1,\"token\":3"),
            with("\"token\":3", "\"token\":3,\"token\":9"),
            with("{", "{\"unknown\":[1,2],"),
            good[..good.len() / 2].to_string(),
            format!("{good} trailing"),
            String::from_utf8(broken.encode()).unwrap(),
        ];
        for variant in &variants {
            assert_eq!(
                decode_sample(variant.as_bytes()),
                decode_general(variant.as_bytes(), &sample().key, 4),
                "{variant}"
            );
        }
        assert!(matches!(decode_sample(good.as_bytes()), Decoded::Record(_)));
    }

    /// The hand-written record writer gives serde_json's bytes for every optional
    /// field present or absent, strings that need escaping, non-ASCII text and the
    /// largest numbers (docs/design-07-performance.md).
    #[test]
    fn the_record_writer_writes_what_serde_json_writes() {
        let plain = sample();
        let mut full = sample();
        full.label = "db:\"quoted\" \\ back\u{1}slash\n\ttab \u{7f} é 🦀".into();
        full.owner = "own\u{1f}er".into();
        full.host = "host-1".into();
        full.token = u64::MAX;
        full.generation = u64::MAX;
        full.pid = u32::MAX;
        full.granted_at_ms = 0;
        full.expires_at_ms = u64::MAX;
        full.released = true;
        full.broken = Some(BreakNote {
            by: "op \"x\"".into(),
            at_ms: 5,
            reason: "r\n".into(),
        });
        full.process = Some(crate::ProcessEvidence {
            host: "m".into(),
            boot: "b".into(),
            pid: 7,
            start: 9,
            group: Some(11),
        });
        full.session = Some(crate::proof::SessionTag::of("s"));
        full.next = Some(Turn {
            holder: "h".into(),
            ticket: 3,
            owner: "o".into(),
            pid: 4,
        });
        let mut bare = sample();
        bare.secret_sha256 = None;
        bare.label = "".into();
        for record in [plain, full, bare] {
            let mut written = Vec::new();
            write_json(&mut written, &record);
            assert_eq!(
                String::from_utf8(written).unwrap(),
                serde_json::to_string(&record).unwrap()
            );
        }
    }

    /// The escape test finds every byte serde_json escapes, at every position of
    /// a vector-sized chunk and in the tail, and nothing else.
    #[test]
    fn every_byte_that_needs_escaping_is_found() {
        for len in 0..40 {
            let plain = vec![b'a'; len];
            assert!(!needs_escape(&plain));
            for at in 0..len {
                for byte in 0u8..=0xff {
                    let mut bytes = plain.clone();
                    bytes[at] = byte;
                    let expected = byte < 0x20 || byte == b'"' || byte == b'\\';
                    assert_eq!(needs_escape(&bytes), expected, "{byte:#x} at {at} of {len}");
                }
            }
        }
        // Neighbours of the bytes looked for, and non-ASCII text, need nothing.
        assert!(!needs_escape(" !#[]^~\u{7f}ÿé🦀 \u{2028}".as_bytes()));
    }

    #[test]
    fn numbers_are_written_as_serde_json_writes_them() {
        let mut cases = vec![
            0,
            1,
            9,
            10,
            11,
            99,
            100,
            101,
            999,
            1000,
            u64::MAX,
            u64::MAX - 1,
        ];
        let mut power = 1u64;
        while let Some(next) = power.checked_mul(10) {
            cases.extend([power - 1, power, power + 1, next / 2]);
            power = next;
        }
        for n in cases {
            let mut written = Vec::new();
            push_u64(&mut written, n);
            assert_eq!(String::from_utf8(written).unwrap(), n.to_string());
        }
    }

    #[test]
    fn round_trip() {
        assert_eq!(decode_sample(&sample().encode()), Decoded::Record(sample()));
    }

    #[test]
    fn empty_truncated_garbage_and_wrong_types_are_torn() {
        let full = sample().encode();
        let mut wrong_type = serde_json::to_value(sample()).unwrap();
        wrong_type["token"] = serde_json::json!("three");
        let mut negative = serde_json::to_value(sample()).unwrap();
        negative["expires_at_ms"] = serde_json::json!(-5);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", vec![]),
            ("truncated", full[..full.len() / 2].to_vec()),
            ("garbage", b"\x00\xffnot json".to_vec()),
            ("array", b"[1,2]".to_vec()),
            ("no v", b"{\"token\":1}".to_vec()),
            ("v 0", b"{\"v\":0}".to_vec()),
            ("wrong type", serde_json::to_vec(&wrong_type).unwrap()),
            ("negative", serde_json::to_vec(&negative).unwrap()),
        ];
        for (name, bytes) in cases {
            assert!(
                matches!(decode_sample(&bytes), Decoded::Torn(_)),
                "{name} should be torn"
            );
        }
    }

    #[test]
    fn a_token_above_its_generation_is_torn() {
        // Found by the breaker trial: a hand-made record with token 999 at generation 2
        // passed check, and the next claim then handed out token 3.
        let mut value = serde_json::to_value(sample()).unwrap();
        value["token"] = serde_json::json!(999);
        assert!(matches!(
            decode_sample(&serde_json::to_vec(&value).unwrap()),
            Decoded::Torn(_)
        ));
        value["token"] = serde_json::json!(0);
        assert!(matches!(
            decode_sample(&serde_json::to_vec(&value).unwrap()),
            Decoded::Torn(_)
        ));
        let newer =
            br#"{"v":2,"token":9,"generation":4,"granted_at_ms":1000,"expires_at_ms":31000}"#;
        assert!(matches!(decode_sample(newer), Decoded::Torn(_)));
    }

    #[test]
    fn proof_and_break_fields_round_trip_and_are_optional() {
        let mut broken = sample();
        broken.released = true;
        broken.broken = Some(BreakNote {
            by: "alice".into(),
            at_ms: 5_000,
            reason: "holder wedged".into(),
        });
        assert_eq!(
            decode_sample(&broken.encode()),
            Decoded::Record(broken.clone())
        );
        // A record written before proofs existed decodes without one.
        let mut value = serde_json::to_value(sample()).unwrap();
        value.as_object_mut().unwrap().remove("secret_sha256");
        match decode_sample(&serde_json::to_vec(&value).unwrap()) {
            Decoded::Record(r) => assert_eq!(r.secret_sha256, None),
            other => panic!("{other:?}"),
        }
        // A break note on a record that is not a tombstone is torn (never live).
        broken.released = false;
        assert!(matches!(decode_sample(&broken.encode()), Decoded::Torn(_)));
    }

    #[test]
    fn misplaced_records_are_torn() {
        let record = sample().encode();
        assert!(matches!(
            decode(&record, &sample().key, 5),
            Decoded::Torn(_)
        ));
        assert!(matches!(
            decode(&record, "lock-ffffffffffffffffffffffffffffffff", 4),
            Decoded::Torn(_)
        ));
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let mut value = serde_json::to_value(sample()).unwrap();
        value["hostname"] = serde_json::json!("build-7");
        assert_eq!(
            decode_sample(&serde_json::to_vec(&value).unwrap()),
            Decoded::Record(sample())
        );
    }

    #[test]
    fn newer_versions_are_honoured_through_their_envelope() {
        let bytes = br#"{"v":2,"token":3,"generation":4,"granted_at_ms":1000,"expires_at_ms":31000,"shape":"new"}"#;
        match decode_sample(bytes) {
            Decoded::Newer { v, envelope } => {
                assert_eq!(v, 2);
                assert_eq!(envelope, sample().envelope());
                assert!(is_live(&envelope, 2_000), "a live newer record is held");
            }
            other => panic!("expected Newer, got {other:?}"),
        }
        // Newer but without an envelope: not well-formed, so torn.
        assert!(matches!(
            decode_sample(br#"{"v":2,"token":3}"#),
            Decoded::Torn(_)
        ));
    }

    #[test]
    fn liveness_rule_including_a_backwards_clock() {
        let envelope = sample().envelope(); // granted 1_000, expires 31_000
        assert!(is_live(&envelope, 1_000));
        assert!(is_live(&envelope, 30_999));
        assert!(!is_live(&envelope, 31_000), "expiry is exclusive");
        assert!(!is_live(&envelope, 40_000));
        // The clock stepped back to before the grant: held, not freed.
        assert!(is_live(&envelope, 500));
        let zero_ttl = Envelope {
            expires_at_ms: 1_000,
            ..envelope
        };
        assert!(is_live(&zero_ttl, 999));
        assert!(!is_live(&zero_ttl, 1_000));
    }
}

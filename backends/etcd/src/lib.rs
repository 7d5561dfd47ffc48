#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod gateway;
mod locator;
#[cfg(feature = "testing")]
pub mod testing;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use fencepost::{BackendError, CreateOutcome, Durability, Key, LeaseStore};
use serde_json::json;

use gateway::{Gateway, GatewayError, Retry, b64};
pub use locator::{DEFAULT_PORT, DEFAULT_PREFIX, EtcdUrl, UrlError, is_etcd_url, redacted};

/// Timeouts for every request a store sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtcdOptions {
    /// How long to wait for a TCP connection to one endpoint before moving on to
    /// the next. Default 2 s.
    pub connect_timeout: Duration,
    /// How long one request may take in all (connect, send, etcd's consensus and
    /// fsync, response). Past it a create's outcome is unknown and reported as an
    /// error; the protocol re-reads. Default 10 s (etcd's own proposal timeout is
    /// about 7 s with default settings, so etcd usually answers first).
    pub request_timeout: Duration,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(10),
        }
    }
}

/// A [`LeaseStore`] in etcd, reached through its v3 JSON gateway.
///
/// Cheap to clone; clones share the HTTP connection pool. Opening sends nothing:
/// an unreachable cluster shows up as an error from the first operation.
#[derive(Debug, Clone)]
pub struct EtcdStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    url: EtcdUrl,
    /// `<prefix>/claims/`: every record key starts with it.
    claims: String,
    gateway: Gateway,
}

impl EtcdStore {
    /// Opens the store named by `url` (`etcd://host:2379[,host2:2379…]/prefix`) with
    /// the default timeouts. Sends nothing.
    ///
    /// # Errors
    ///
    /// A [`BackendError`] (`open store`, kind `InvalidInput`) when the URL does not
    /// parse; see [`EtcdUrl::parse`].
    pub fn open(url: &str) -> Result<EtcdStore, BackendError> {
        EtcdStore::open_with(url, EtcdOptions::default())
    }

    /// Opens the store named by `url` with `options`.
    ///
    /// # Errors
    ///
    /// As [`EtcdStore::open`].
    pub fn open_with(url: &str, options: EtcdOptions) -> Result<EtcdStore, BackendError> {
        let url = EtcdUrl::parse(url).map_err(|e| {
            BackendError::new(
                "open store",
                locator::redacted(url),
                io::Error::new(io::ErrorKind::InvalidInput, e.0),
            )
        })?;
        let gateway = Gateway::new(
            url.endpoints.clone(),
            options.connect_timeout,
            options.request_timeout,
        );
        Ok(EtcdStore {
            inner: Arc::new(Inner {
                claims: format!("{}/claims/", url.prefix),
                url,
                gateway,
            }),
        })
    }

    /// The parsed store URL.
    pub fn url(&self) -> &EtcdUrl {
        &self.inner.url
    }

    /// `<prefix>/claims/<key>/`.
    fn series(&self, key: &Key) -> String {
        format!("{}{key}/", self.inner.claims)
    }

    /// `<prefix>/claims/<key>/g<generation, at least 8 digits>`.
    fn record(&self, key: &Key, generation: u64) -> String {
        format!("{}{key}/g{generation:08}", self.inner.claims)
    }

    /// Maps a gateway failure of `operation` on `what` to an error naming the
    /// endpoint it failed at.
    fn fail(
        &self,
        operation: &'static str,
        what: impl std::fmt::Display,
    ) -> impl FnOnce(GatewayError) -> BackendError + '_ {
        let what = what.to_string();
        move |e| {
            let location = format!("{what} at etcd://{}{}", e.endpoint, self.inner.url.prefix);
            BackendError::new(operation, location, e.source)
        }
    }

    /// Maps an undecodable response to an error naming the store.
    fn fail_io(
        &self,
        operation: &'static str,
        what: impl std::fmt::Display,
    ) -> impl FnOnce(io::Error) -> BackendError + '_ {
        let what = what.to_string();
        move |e| BackendError::new(operation, format!("{what} at {}", self.inner.url), e)
    }
}

/// Parses a record name `g<digits>` into its generation: only the one spelling
/// this backend writes (at least 8 digits, zero-padded to 8, no other leading
/// zero; generation 0 is no record). Any other spelling is a foreign key, skipped:
/// counted as generation `n`, it named a record that a read of `g{n:08}` never
/// finds, and a hand-written `g2` ended a live lease at once (a breaker), where the
/// fs backend refuses the same names (`parse_record_file_name`).
fn parse_generation(name: &[u8]) -> Option<u64> {
    let digits = name.strip_prefix(b"g")?;
    if digits.len() < 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits.len() > 8 && digits[0] == b'0' {
        return None;
    }
    let generation: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    (generation > 0).then_some(generation)
}

/// The exclusive-create contract over etcd (docs/protocol.md §4).
///
/// Layout: record `g` of key `k` is the etcd key `<prefix>/claims/<k>/g<g>` (at
/// least 8 digits, zero-padded), its value the record's bytes. Every request is
/// linearizable (no serializable reads), so a read sees every create acknowledged
/// before it started, on whichever member it lands.
impl LeaseStore for EtcdStore {
    /// One transaction: `if create_revision(record) == 0 then put(record)`.
    ///
    /// **Atomicity**: etcd applies the compare and the put as one step in its
    /// replicated log; of any number of racing creates exactly one sees revision 0.
    /// Both [`Durability`] values are durable: etcd acknowledges only after a quorum
    /// of members appended the entry to their fsynced write-ahead logs.
    ///
    /// A create revision of 0 means "no such key now": a key that was created and
    /// then deleted reads 0 again, so a *removed* generation could be created a
    /// second time. The protocol never asks for that (it only removes generations
    /// below the newest, and only ever creates newest+1), so generations still never
    /// repeat; a caller outside the protocol must not rely on it.
    ///
    /// # Errors
    ///
    /// A [`BackendError`] naming the endpoint. The request goes to the next
    /// endpoint only when no connection could be made to this one (it certainly
    /// never left). Any later failure — a timeout, a reset connection, an etcd
    /// error such as "request timed out" — leaves the outcome unknown and is
    /// returned as is: the protocol re-reads (docs/protocol.md I4). Never retried blindly.
    ///
    /// # Crash safety
    ///
    /// A put is atomic in etcd: a record is either absent or complete, never torn.
    ///
    /// Enforced by the conformance scenarios on exclusive create and contention.
    fn create(
        &self,
        key: &Key,
        generation: u64,
        bytes: &[u8],
        _durability: Durability,
    ) -> Result<CreateOutcome, BackendError> {
        let name = self.record(key, generation);
        let what = format!("{key} generation {generation}");
        let k = b64(name.as_bytes());
        let body = json!({
            "compare": [{
                "key": k,
                "result": "EQUAL",
                "target": "CREATE",
                "create_revision": "0",
            }],
            "success": [{ "request_put": { "key": k, "value": b64(bytes) } }],
            "failure": [],
        });
        let response = self
            .inner
            .gateway
            .call("/v3/kv/txn", &body, Retry::OnlyUnsent)
            .map_err(self.fail("create", &what))?;
        match gateway::txn_succeeded(&response) {
            Ok(true) => Ok(CreateOutcome::Created),
            Ok(false) => Ok(CreateOutcome::AlreadyExists),
            Err(e) => Err(self.fail_io("create", &what)(e)),
        }
    }

    /// A keys-only range over `<prefix>/claims/<key>/`; names that are not
    /// `g<digits>` are skipped.
    ///
    /// # Errors
    ///
    /// A [`BackendError`] naming the endpoint when no endpoint answered.
    fn generations(&self, key: &Key) -> Result<Vec<u64>, BackendError> {
        let series = self.series(key);
        let response = self
            .inner
            .gateway
            .call(
                "/v3/kv/range",
                &gateway::range_prefix_keys_only(series.as_bytes()),
                Retry::Idempotent,
            )
            .map_err(self.fail("list", key))?;
        let kvs = gateway::range_kvs(&response).map_err(self.fail_io("list", key))?;
        Ok(kvs
            .iter()
            .filter_map(|(name, _)| parse_generation(name.strip_prefix(series.as_bytes())?))
            .collect())
    }

    /// A linearizable get of the record's key; `None` when absent.
    ///
    /// # Errors
    ///
    /// A [`BackendError`] naming the endpoint when no endpoint answered.
    fn read(&self, key: &Key, generation: u64) -> Result<Option<Vec<u8>>, BackendError> {
        let name = self.record(key, generation);
        let what = format!("{key} generation {generation}");
        let response = self
            .inner
            .gateway
            .call(
                "/v3/kv/range",
                &json!({ "key": b64(name.as_bytes()) }),
                Retry::Idempotent,
            )
            .map_err(self.fail("read", &what))?;
        let kvs = gateway::range_kvs(&response).map_err(self.fail_io("read", &what))?;
        // An empty value is omitted from the response: present with no bytes.
        Ok(kvs
            .into_iter()
            .find(|(k, _)| k == name.as_bytes())
            .map(|(_, value)| value.unwrap_or_default()))
    }

    /// A delete of the record's key; deleting a missing key succeeds.
    ///
    /// # Errors
    ///
    /// A [`BackendError`] naming the endpoint when no endpoint answered.
    fn remove(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
        let name = self.record(key, generation);
        self.inner
            .gateway
            .call(
                "/v3/kv/deleterange",
                &json!({ "key": b64(name.as_bytes()) }),
                Retry::Idempotent,
            )
            .map_err(self.fail("remove", format!("{key} generation {generation}")))?;
        Ok(())
    }

    /// A keys-only range over `<prefix>/claims/`, reduced to the distinct keys.
    ///
    /// This lists every record of every key (etcd has no "list directories"); the
    /// protocol sweeps superseded records, so that is about one or two per key —
    /// fine for the thousands of keys a working tree has, not meant for millions.
    ///
    /// # Errors
    ///
    /// A [`BackendError`] naming the endpoint when no endpoint answered.
    fn keys(&self) -> Result<Vec<Key>, BackendError> {
        let claims = &self.inner.claims;
        let response = self
            .inner
            .gateway
            .call(
                "/v3/kv/range",
                &gateway::range_prefix_keys_only(claims.as_bytes()),
                Retry::Idempotent,
            )
            .map_err(self.fail("list", "keys"))?;
        let kvs = gateway::range_kvs(&response).map_err(self.fail_io("list", "keys"))?;
        let mut keys: Vec<Key> = kvs
            .iter()
            .filter_map(|(name, _)| {
                let rest = name.strip_prefix(claims.as_bytes())?;
                let (key, record) = std::str::from_utf8(rest).ok()?.split_once('/')?;
                parse_generation(record.as_bytes())?;
                Key::parse(key)
            })
            .collect();
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// The normalized store URL (`etcd://host:port,…/prefix`).
    fn locator(&self) -> String {
        self.inner.url.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_names_parse_back() {
        assert_eq!(parse_generation(b"g00000001"), Some(1));
        assert_eq!(parse_generation(b"g123456789"), Some(123_456_789));
        assert_eq!(parse_generation(b"g"), None);
        assert_eq!(parse_generation(b"g12x"), None);
        assert_eq!(parse_generation(b"x1"), None);
        // Only the spelling `record_key` writes: another names no record a read
        // finds (a breaker's hand-written `g2` ended a live lease).
        for foreign in [&b"g2"[..], b"g000000002", b"g0000002", b"g00000000", b"g0"] {
            assert_eq!(parse_generation(foreign), None, "{foreign:?}");
        }
    }

    #[test]
    fn open_refuses_a_bad_url_without_contacting_anything() {
        let error = EtcdStore::open("etcd://h:0/t").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        let store = EtcdStore::open("etcd://127.0.0.1:1/t/").unwrap();
        assert_eq!(store.locator(), "etcd://127.0.0.1:1/t");
    }

    #[test]
    fn an_unreachable_endpoint_is_named() {
        let store = EtcdStore::open("etcd://127.0.0.1:1,127.0.0.1:2/t").unwrap();
        let error = store.keys().unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("127.0.0.1:1") && text.contains("127.0.0.1:2"),
            "{text}"
        );
    }
}

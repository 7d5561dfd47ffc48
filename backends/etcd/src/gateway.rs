//! A minimal client for etcd's v3 JSON gateway (`POST /v3/kv/...` on the client
//! port): JSON bodies, base64 keys and values, 64-bit integers as strings.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

/// Largest response body read (a key listing of a very large store).
const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

/// Whether a request may be sent again, to another member, after a failure that
/// happened once it may have reached etcd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Reads and deletes: sending twice changes nothing, so any failure moves on to
    /// the next endpoint.
    Idempotent,
    /// The exclusive create: only a failure that certainly happened before the
    /// request left (no connection) moves on; anything later is an unknown outcome
    /// and is returned, so the protocol re-reads (docs/protocol.md I4).
    OnlyUnsent,
}

/// A failed request: the endpoint it failed at and the cause.
#[derive(Debug)]
pub(crate) struct GatewayError {
    /// `host:port`, or every endpoint tried when none could be reached.
    pub(crate) endpoint: String,
    pub(crate) source: io::Error,
}

/// The HTTP side of a store: the endpoints, the one that answered last, an agent
/// with the timeouts.
#[derive(Debug)]
pub(crate) struct Gateway {
    endpoints: Vec<String>,
    /// Index of the endpoint that answered last; requests start there.
    current: AtomicUsize,
    agent: ureq::Agent,
}

impl Gateway {
    pub(crate) fn new(
        endpoints: Vec<String>,
        connect_timeout: Duration,
        request_timeout: Duration,
    ) -> Gateway {
        let config = ureq::Agent::config_builder()
            .timeout_connect(Some(connect_timeout))
            .timeout_global(Some(request_timeout))
            // etcd's errors come with a JSON body worth reading.
            .http_status_as_error(false)
            // Keep pooled connections short-lived: a member that was killed and
            // restarted should not leave many dead sockets to trip over.
            .max_idle_age(Duration::from_secs(5))
            .build();
        Gateway {
            endpoints,
            current: AtomicUsize::new(0),
            agent: ureq::Agent::new_with_config(config),
        }
    }

    /// POSTs `body` to `path` (`/v3/kv/range`…), starting at the endpoint that
    /// answered last and failing over to the next as `retry` allows.
    pub(crate) fn call(
        &self,
        path: &str,
        body: &Value,
        retry: Retry,
    ) -> Result<Value, GatewayError> {
        let bytes = serde_json::to_vec(body).expect("a JSON value always serializes");
        let start = self.current.load(Ordering::Relaxed);
        let mut unreachable = Vec::new();
        let mut last = None;
        for step in 0..self.endpoints.len() {
            let index = (start + step) % self.endpoints.len();
            let endpoint = &self.endpoints[index];
            match self.post(endpoint, path, &bytes) {
                Ok(value) => {
                    self.current.store(index, Ordering::Relaxed);
                    return Ok(value);
                }
                Err(failure) => {
                    let may_retry = match retry {
                        Retry::Idempotent => true,
                        Retry::OnlyUnsent => failure.unsent,
                    };
                    if failure.unsent {
                        unreachable.push(format!("{endpoint}: {}", failure.error));
                    }
                    let error = GatewayError {
                        endpoint: endpoint.clone(),
                        source: failure.error,
                    };
                    if !may_retry {
                        return Err(error);
                    }
                    last = Some(error);
                }
            }
        }
        let last = last.expect("a store has at least one endpoint");
        if unreachable.len() == self.endpoints.len() && self.endpoints.len() > 1 {
            // No member could be reached at all: name every one.
            return Err(GatewayError {
                endpoint: self.endpoints.join(","),
                source: io::Error::new(
                    last.source.kind(),
                    format!("no etcd endpoint reachable ({})", unreachable.join("; ")),
                ),
            });
        }
        Err(last)
    }

    fn post(&self, endpoint: &str, path: &str, bytes: &[u8]) -> Result<Value, Failure> {
        let url = format!("http://{endpoint}{path}");
        let mut response = self
            .agent
            .post(&url)
            .header("content-type", "application/json")
            .send(bytes)
            .map_err(Failure::from_ureq)?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_to_vec()
            .map_err(|e| Failure::sent(io_from_ureq(e)))?;
        let value: Value = serde_json::from_slice(&body).map_err(|e| {
            Failure::sent(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("HTTP {status}, undecodable JSON from the etcd gateway: {e}"),
            ))
        })?;
        if status != 200 || value.get("error").is_some() {
            let message = value
                .get("message")
                .or_else(|| value.get("error"))
                .and_then(Value::as_str)
                .unwrap_or("no message");
            return Err(Failure::sent(io::Error::other(format!(
                "etcd answered HTTP {status}: {message}"
            ))));
        }
        Ok(value)
    }
}

/// One endpoint's failure, and whether the request certainly never left.
struct Failure {
    error: io::Error,
    unsent: bool,
}

impl Failure {
    fn sent(error: io::Error) -> Failure {
        Failure {
            error,
            unsent: false,
        }
    }

    fn from_ureq(error: ureq::Error) -> Failure {
        use ureq::Timeout;
        let unsent = match &error {
            ureq::Error::HostNotFound
            | ureq::Error::ConnectionFailed
            | ureq::Error::BadUri(_)
            | ureq::Error::Timeout(Timeout::Resolve | Timeout::Connect) => true,
            // Refused can only come from connecting.
            ureq::Error::Io(e) => e.kind() == io::ErrorKind::ConnectionRefused,
            _ => false,
        };
        Failure {
            error: io_from_ureq(error),
            unsent,
        }
    }
}

fn io_from_ureq(error: ureq::Error) -> io::Error {
    match error {
        ureq::Error::Io(e) => e,
        ureq::Error::Timeout(t) => io::Error::new(
            io::ErrorKind::TimedOut,
            format!("timed out ({t}); the outcome is unknown"),
        ),
        other => io::Error::other(other.to_string()),
    }
}

/// Base64 of `bytes`, as the gateway wants keys and values.
pub(crate) fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

/// The end of the key range holding every key that starts with `prefix`: the
/// prefix with its last byte incremented (etcd's `range_end` convention).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff (never the case for our prefixes): "every key after".
    vec![0]
}

/// A range request for every key starting with `prefix`, keys only.
pub(crate) fn range_prefix_keys_only(prefix: &[u8]) -> Value {
    json!({
        "key": b64(prefix),
        "range_end": b64(&prefix_end(prefix)),
        "keys_only": true,
    })
}

/// One key of a range response, and its value (`None` when keys only, or when the
/// value is empty: the gateway omits empty fields).
pub(crate) type KeyValue = (Vec<u8>, Option<Vec<u8>>);

/// The keys and values of a range response.
pub(crate) fn range_kvs(response: &Value) -> io::Result<Vec<KeyValue>> {
    let Some(kvs) = response.get("kvs") else {
        // An empty result omits the field.
        return Ok(Vec::new());
    };
    let kvs = kvs
        .as_array()
        .ok_or_else(|| invalid("kvs is not an array"))?;
    let mut out = Vec::with_capacity(kvs.len());
    for kv in kvs {
        let key = decode_field(kv, "key")?.ok_or_else(|| invalid("a kv without a key"))?;
        let value = decode_field(kv, "value")?;
        out.push((key, value));
    }
    Ok(out)
}

/// Whether a txn's compares held (`succeeded`; omitted by the gateway when false).
pub(crate) fn txn_succeeded(response: &Value) -> io::Result<bool> {
    match response.get("succeeded") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid("succeeded is not a boolean")),
    }
}

fn decode_field(kv: &Value, name: &str) -> io::Result<Option<Vec<u8>>> {
    match kv.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => B64
            .decode(s)
            .map(Some)
            .map_err(|e| invalid(&format!("{name} is not base64: {e}"))),
        Some(_) => Err(invalid(&format!("{name} is not a string"))),
    }
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unexpected etcd gateway response: {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_the_last_byte() {
        assert_eq!(prefix_end(b"/t/claims/"), b"/t/claims0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff"), b"\0");
    }

    #[test]
    fn empty_range_and_failed_txn_parse() {
        assert!(range_kvs(&json!({"header": {}})).unwrap().is_empty());
        assert!(!txn_succeeded(&json!({"header": {}})).unwrap());
        let kvs = range_kvs(&json!({"kvs": [{"key": b64(b"k"), "value": b64(b"v")}]})).unwrap();
        assert_eq!(kvs, [(b"k".to_vec(), Some(b"v".to_vec()))]);
    }
}

//! What the tools take and return.
//!
//! Field doc comments become the schema descriptions an agent reads in `tools/list`,
//! so they say what to pass, in which unit, and within which bounds. Inputs deny
//! unknown fields: a misspelt `ttl` must not silently fall back to the default.

use std::sync::Arc;

use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Shortest lease a tool accepts, in milliseconds.
pub(crate) const TTL_MIN_MS: i64 = 1_000;
/// Longest lease a tool accepts, in milliseconds (one hour).
pub(crate) const TTL_MAX_MS: i64 = 3_600_000;
/// Lease duration when `ttl_ms` is not given.
pub(crate) const TTL_DEFAULT_MS: i64 = 60_000;
/// Longest wait for a held resource, in milliseconds (two minutes).
pub(crate) const WAIT_MAX_MS: i64 = 120_000;

/// A tool's arguments, deserialized without ever failing the JSON-RPC request.
///
/// rmcp's own `Parameters<T>` also turns a deserialization failure into a tool
/// error, but its message does not say which field was wrong. This extractor keeps
/// the path (`resource.kind: unknown variant ...`), and the tool body turns an
/// error into the one-line tool error the agent reads. The input schema is given
/// to `#[tool(input_schema = ...)]` explicitly, from `T`.
pub(crate) struct Args<T>(pub(crate) Result<T, String>);

impl<S, T: DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Args<T> {
    fn from_context_part(context: &mut ToolCallContext<S>) -> Result<Self, rmcp::ErrorData> {
        let arguments = context.arguments.take().unwrap_or_default();
        Ok(Args(parse(arguments)))
    }
}

/// Deserializes tool arguments, naming the offending field in the error.
fn parse<T: DeserializeOwned>(arguments: JsonObject) -> Result<T, String> {
    serde_path_to_error::deserialize(serde_json::Value::Object(arguments)).map_err(|error| {
        let path = error.path().to_string();
        // serde names our Rust type where an object was expected ("expected struct
        // ResourceArg": a new user's find); say what the object holds instead.
        let inner = error
            .into_inner()
            .to_string()
            .replace(
                "expected struct ResourceArg",
                r#"expected an object {"kind": "file", "dir" or "lock", "target": PATH or NAME}"#,
            )
            .replace(
                "expected struct ",
                "expected an object (tools/list gives each tool's input schema) for ",
            );
        if path.is_empty() || path == "." {
            format!("invalid arguments: {inner}")
        } else {
            format!("invalid arguments: {path}: {inner}")
        }
    })
}

/// The input schema of a tool taking `T`, as rmcp derives it (JSON Schema 2020-12,
/// root type object).
pub(crate) fn input_schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    rmcp::handler::server::common::schema_for_input::<T>()
        .unwrap_or_else(|e| panic!("tool input schema: {e}"))
}

/// Drops the `int64`/`uint64` formats schemars adds to integers: they are not JSON
/// Schema formats, and validators (the TypeScript SDK's ajv) warn about each one.
/// The `minimum`/`maximum` bounds say what matters.
fn plain_schema(schema: &mut schemars::Schema) {
    use schemars::transform::Transform;
    schemars::transform::RestrictFormats::default().transform(schema);
}

/// Checks that an integer argument lies in `min..=max`.
pub(crate) fn in_range(name: &str, value: i64, min: i64, max: i64) -> Result<u64, String> {
    if (min..=max).contains(&value) {
        Ok(value.unsigned_abs())
    } else {
        Err(format!(
            "invalid arguments: {name} must be between {min} and {max}, got {value}"
        ))
    }
}

/// Checks a fencing token argument: tokens start at 1 and are u64s (read as i128 so
/// a token above i64::MAX is a token, and a negative one gets this message instead
/// of serde's "expected u64").
/// A token as any JSON number: a whole one within i128 as it is (its range is
/// judged by [`token`]), a fraction or one beyond 64 bits (which JSON parsers read
/// as a float) as an error that says what a token is (a breaker got "invalid type:
/// floating point `1.8446744073709552e+19`, expected i128").
fn whole_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<i128, D::Error> {
    let number = serde_json::Number::deserialize(deserializer)?;
    match (number.as_u64(), number.as_i64()) {
        (Some(u), _) => Ok(i128::from(u)),
        (None, Some(i)) => Ok(i128::from(i)),
        (None, None) => Err(serde::de::Error::custom(format!(
            "a token is a whole number from 1 to {}, got {number}",
            u64::MAX
        ))),
    }
}

pub(crate) fn token(value: i128) -> Result<u64, String> {
    if value >= 1 {
        u64::try_from(value).map_err(|_| {
            format!(
                "invalid arguments: token must be at most {}, got {value}",
                u64::MAX
            )
        })
    } else {
        Err(format!(
            "invalid arguments: token must be a positive integer (tokens start at 1), got {value}"
        ))
    }
}

/// The kind of resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub(crate) enum Kind {
    // A path in the working tree, relative to the server's root.
    File,
    // A named lock such as `db:migrations`.
    Lock,
    // A directory and everything below it (a subtree), relative to the server's root.
    Dir,
}

/// The resource a lease is on.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub(crate) struct ResourceArg {
    /// `file` for a path in the working tree, `dir` for a directory and everything
    /// below it (a subtree), `lock` for a named lock (a migration sequence, a port, a
    /// release tag...).
    pub(crate) kind: Kind,
    /// For `file` and `dir`: a path relative to the server's root (absolute paths and
    /// paths that leave the root are refused). For `lock`: the lock name; names are
    /// trimmed and case-folded, so `DB:Migrations` and `db:migrations` are one lock.
    pub(crate) target: String,
    /// For `lock` only: one slot (from 1) of the lock, as `claim` with `slots`
    /// returned it; each slot is its own lease with its own token.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1024))]
    pub(crate) slot: Option<i64>,
}

fn default_ttl() -> i64 {
    TTL_DEFAULT_MS
}

/// Arguments of `claim`.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = plain_schema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClaimArgs {
    /// What to claim.
    pub(crate) resource: ResourceArg,
    /// Lease duration in milliseconds. The server renews the lease every ttl/3
    /// until you release it or the server exits, so this is how long the resource
    /// stays blocked if this server dies, not how long you may hold it.
    #[serde(default = "default_ttl")]
    #[schemars(range(min = 1_000, max = 3_600_000))]
    pub(crate) ttl_ms: i64,
    /// How long to wait if someone else holds the resource, in milliseconds; 0
    /// (the default) answers at once.
    #[serde(default)]
    #[schemars(range(min = 0, max = 120_000))]
    pub(crate) wait_ms: i64,
    /// For a lock: claim one of this many slots instead of the lock itself (at most
    /// `slots` holders at once, e.g. 4 dev servers); the result says which slot.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1024))]
    pub(crate) slots: Option<i64>,
    /// A shared claim, for reading: many shared holders at once, none while
    /// anyone holds (or waits for) the resource exclusively. Its token authorizes
    /// reading only: `write` refuses it. Default false (exclusive).
    #[serde(default)]
    pub(crate) shared: bool,
}

/// Arguments of `claim_all`.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = plain_schema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClaimAllArgs {
    /// What to claim, all or nothing (1 to 64 resources, each named once).
    pub(crate) resources: Vec<ResourceArg>,
    /// Lease duration in milliseconds, for every lease (renewed every ttl/3 until
    /// released, as for `claim`).
    #[serde(default = "default_ttl")]
    #[schemars(range(min = 1_000, max = 3_600_000))]
    pub(crate) ttl_ms: i64,
    /// How long to wait while any of them is held by someone else, in
    /// milliseconds; 0 (the default) answers at once. Nothing is held while waiting.
    #[serde(default)]
    #[schemars(range(min = 0, max = 120_000))]
    pub(crate) wait_ms: i64,
}

/// Most resources one `claim_all` takes.
pub(crate) const CLAIM_ALL_MAX: usize = 64;

/// Result of `claim_all`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = plain_schema)]
pub(crate) struct ClaimAllResult {
    /// One lease per resource, in the order given: each its own token, renewed,
    /// asserted and released on its own.
    pub(crate) leases: Vec<ClaimResult>,
}

/// Arguments of `assert`, `renew` and `release`.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = plain_schema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TokenArgs {
    /// The resource the token was issued for.
    pub(crate) resource: ResourceArg,
    /// The fencing token `claim` returned (a whole number from 1 to 2^64-1).
    #[schemars(range(min = 1, max = 18_446_744_073_709_551_615u64))]
    #[serde(deserialize_with = "whole_number")]
    pub(crate) token: i128,
}

/// Arguments of `write`.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = plain_schema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    /// The resource whose lease authorizes the write: a lock guarding the file, or
    /// the file itself (then `path` must be that file).
    pub(crate) resource: ResourceArg,
    /// The fencing token `claim` returned for `resource` (a whole number from 1 to
    /// 2^64-1).
    #[schemars(range(min = 1, max = 18_446_744_073_709_551_615u64))]
    #[serde(deserialize_with = "whole_number")]
    pub(crate) token: i128,
    /// The file to write, relative to the server's root. Missing parent directories
    /// are created. Refused: absolute paths, paths that leave the root (`..`, or a
    /// symbolic link leading outside), paths into the lease store, directories.
    pub(crate) path: String,
    /// The complete new content of the file (UTF-8 text). The file is replaced
    /// atomically: readers see the old content or the new, never a mix.
    pub(crate) content: String,
}

/// Arguments of `status` (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = plain_schema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StatusArgs {
    /// Only the resources held right now (live exclusive or shared holders). A
    /// store keeps a row for every resource ever claimed (its last token, so the
    /// next one is higher), so the full list grows with the work done; the result's
    /// `not_held` counts the rows left out. Default false (every row).
    #[serde(default)]
    pub(crate) held_only: Option<bool>,
}

/// Result of `claim`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = plain_schema)]
pub(crate) struct ClaimResult {
    /// The fencing token. Pass it to `write`, `assert`, `renew` and `release`. It
    /// stays valid across the server's automatic renewals, until release, expiry,
    /// takeover or an operator's break. It is public, not a password: others see it
    /// in `status`, and it lets nobody but this server act as the holder.
    pub(crate) token: u64,
    /// When the lease ends unless renewed, in milliseconds since the Unix epoch (the
    /// server renews it every ttl/3).
    pub(crate) expires_at_ms: u64,
    /// Unique id of this tenure (owner, process id and a random nonce).
    pub(crate) holder: String,
    /// The owner name recorded with the claim.
    pub(crate) owner: String,
    /// The resource as recorded: the lock name, or the file's absolute path.
    pub(crate) label: String,
    /// The session the lease was claimed for: this server's (`--session`,
    /// `FENCEPOST_SESSION`, or its own fresh id). Absent for a shared claim, which
    /// this server holds alone (a new user got `"session": ""`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) session: Option<String>,
    /// True when this server's session already held the resource: the same lease
    /// (same token) was returned, renewed, instead of a new one.
    pub(crate) reentered: bool,
    /// For a claim with `slots`: the slot held (from 1). Name it as the resource's
    /// `slot` in `assert`, `renew`, `release` and `write`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) slot: Option<u32>,
    /// True for a shared claim: it authorizes reading, and `write` refuses it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) shared: bool,
}

impl ClaimResult {
    pub(crate) fn of(lease: &fencepost::Lease) -> Self {
        ClaimResult {
            token: lease.token(),
            expires_at_ms: lease.expires_at_ms(),
            holder: lease.holder_id().to_string(),
            owner: lease.owner().to_string(),
            label: lease.label().to_string(),
            session: lease.session().map(str::to_string),
            reentered: lease.reentered(),
            slot: lease.slot(),
            shared: lease.shared(),
        }
    }
}

/// Result of `assert`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = plain_schema)]
pub(crate) struct AssertResult {
    /// True only if the token is the current, live token of the resource: the holder
    /// of this token is the only party whose writes are authorized right now.
    pub(crate) authorized: bool,
    /// When not authorized: why (released, expired, superseded, held by whom, or
    /// "broken by WHO at TIME: REASON").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
}

/// Result of `renew`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = plain_schema)]
pub(crate) struct RenewResult {
    /// The fencing token, unchanged by renewal.
    pub(crate) token: u64,
    /// The new expiry, in milliseconds since the Unix epoch.
    pub(crate) expires_at_ms: u64,
}

/// Result of `release`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = plain_schema)]
pub(crate) struct ReleaseResult {
    /// True: the lease ended and the token no longer passes.
    pub(crate) released: bool,
}

/// Result of `write`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = plain_schema)]
pub(crate) struct WriteResult {
    /// True: the file now holds exactly the given content.
    pub(crate) written: bool,
    /// Number of bytes written.
    pub(crate) bytes: u64,
    /// The file written, relative to the root, after resolving `.`, `..` and
    /// symbolic links; components separated by `/` on every platform.
    pub(crate) path: String,
}

/// One claim in `status`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(inline)]
pub(crate) struct StatusClaim {
    /// The resource as recorded: the lock name, or the file's absolute path (empty
    /// when the newest record is unreadable).
    pub(crate) label: String,
    /// `file`, `dir` (a subtree) or `lock`.
    pub(crate) kind: String,
    /// `lock:NAME`, `file:/absolute/path` or `dir:/absolute/path`, as `claim` names it.
    pub(crate) resource: String,
    /// The holder's process id (0 when unknown).
    pub(crate) pid: u32,
    /// The holder's host name (empty when unknown).
    pub(crate) host: String,
    /// The token of the newest record (0 when unreadable).
    pub(crate) token: u64,
    /// Who holds or last held it.
    pub(crate) owner: String,
    /// True when the resource is held right now.
    pub(crate) live: bool,
    /// `held`, `expired`, `released`, `broken`, `unreadable` or `newer_format`.
    pub(crate) state: String,
    /// When the newest record expires, in milliseconds since the Unix epoch (0 when
    /// unknown).
    pub(crate) expires_at_ms: u64,
    /// True when this server holds the lease and keeps it alive.
    pub(crate) held_by_this_server: bool,
    /// For a broken lease: "broken by WHO at TIME: REASON".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) broken: Option<String>,
    /// The owners of the live shared leases of the resource, sorted (absent when
    /// none): one row per resource, however many share it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) shared: Vec<String>,
    /// The tag of the session that claimed it, when it claimed with one (absent
    /// otherwise): it tells sessions apart without revealing their ids, which would
    /// let others act as them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) session: Option<String>,
}

/// Result of `status`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = plain_schema)]
pub(crate) struct StatusResult {
    /// The root this server confines file paths to.
    pub(crate) root: String,
    /// The lease store this server uses.
    pub(crate) store: String,
    /// Every resource the store knows, sorted by label (with `held_only`, only
    /// those held right now).
    pub(crate) claims: Vec<StatusClaim>,
    /// With `held_only`: how many rows of resources not held now (released,
    /// expired, broken) were left out; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) not_held: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, String> {
        match value {
            serde_json::Value::Object(object) => parse(object),
            _ => unreachable!(),
        }
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse_value::<TokenArgs>(serde_json::json!({
            "resource": {"kind": "tree", "target": "x"}, "token": 1
        }))
        .unwrap_err();
        assert!(
            e.starts_with("invalid arguments: resource.kind: unknown variant `tree`"),
            "{e}"
        );
        let e = parse_value::<TokenArgs>(serde_json::json!({
            "resource": {"kind": "lock", "target": "x"}, "token": "7"
        }))
        .unwrap_err();
        assert!(
            e.starts_with("invalid arguments: token: invalid type: string"),
            "{e}"
        );
        for (big, shown) in [
            (
                serde_json::json!(18_446_744_073_709_551_616.0f64),
                "1.8446744073709552e+19",
            ),
            (serde_json::json!(1.5), "1.5"),
        ] {
            let e = parse_value::<TokenArgs>(serde_json::json!({
                "resource": {"kind": "lock", "target": "x"}, "token": big
            }))
            .unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "invalid arguments: token: a token is a whole number from 1 to {}, got {shown}",
                    u64::MAX
                )),
                "{e}"
            );
        }
        let e = parse_value::<TokenArgs>(serde_json::json!({"token": 1})).unwrap_err();
        assert_eq!(e, "invalid arguments: missing field `resource`");
        // A resource given as a bare string is told the object's shape, not our
        // Rust type's name (a new user's find).
        let e =
            parse_value::<ClaimArgs>(serde_json::json!({"resource": "db:migrations"})).unwrap_err();
        assert!(
            e.contains(r#"expected an object {"kind": "file", "dir" or "lock", "target""#),
            "{e}"
        );
        assert!(!e.contains("ResourceArg"), "{e}");
        let e = parse_value::<ClaimArgs>(serde_json::json!({
            "resource": {"kind": "lock", "target": "x"}, "ttl": 5
        }))
        .unwrap_err();
        assert!(e.contains("unknown field `ttl`"), "{e}");
    }

    #[test]
    fn schemas_carry_bounds_and_defaults() {
        let schema = serde_json::Value::Object((*input_schema::<ClaimArgs>()).clone());
        let ttl = &schema["properties"]["ttl_ms"];
        assert_eq!(ttl["minimum"], 1_000);
        assert_eq!(ttl["maximum"], 3_600_000);
        assert_eq!(ttl["default"], 60_000);
        assert_eq!(schema["required"], serde_json::json!(["resource"]));
        let text = schema.to_string();
        assert!(
            text.contains("\"file\"") && text.contains("\"lock\""),
            "{text}"
        );
    }
}

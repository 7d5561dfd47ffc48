//! The MCP tools over one store: claim, assert, renew, release, write, status.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use fencepost::{AcquireOptions, ClaimState, Error, Keepalive, Key, Resource, Store};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{Json, RoleServer, ServerHandler, tool, tool_handler, tool_router};

use crate::args::{
    self, Args, AssertResult, ClaimAllArgs, ClaimAllResult, ClaimArgs, ClaimResult, Kind,
    ReleaseResult, RenewResult, ResourceArg, StatusArgs, StatusClaim, StatusResult, TokenArgs,
    WriteArgs, WriteResult, input_schema,
};
use crate::confine::Confinement;
use crate::store::{Access, Stores};
use crate::write::{self, WriteFailure};

/// How the server was started: the tree it mediates, the store, and who it is.
#[derive(Debug, Clone)]
pub struct Config {
    /// The working tree: `file` targets and `write` paths are relative to it and
    /// confined to it.
    pub root: PathBuf,
    /// The store: a directory (relative to the root), opened with the fs backend,
    /// or an `etcd://host:2379[,…]/prefix` URL (needs the `etcd` feature). `None`:
    /// each resource's store is located from the root by the store location rule
    /// (`fencepost_fs::locate_store`), as the CLI locates it.
    pub store: Option<PathBuf>,
    /// The owner name recorded with every claim (diagnostics only).
    pub owner: String,
    /// The server's session (`AcquireOptions::session`); `None`: a fresh id for
    /// this server, `mcp-<pid>-<16 hex>`.
    pub session: Option<String>,
}

/// Why the server could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The root does not exist, cannot be resolved, or is not a directory.
    Root(PathBuf, std::io::Error),
    /// The store could not be opened (or created).
    Store(fencepost::BackendError),
    /// The session id is malformed.
    Session(fencepost::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Root(path, e) => write!(
                f,
                "--root {}: {e}; pass the existing directory of the working tree to serve",
                path.display()
            ),
            StartError::Store(e) => write!(f, "store: {e}"),
            StartError::Session(e) => write!(f, "--session: {e}"),
        }
    }
}

impl std::error::Error for StartError {}

/// The state shared by every request: the store, the confinement, and the leases
/// this server claimed and keeps alive (one per key).
struct Inner {
    stores: Stores,
    confinement: Confinement,
    owner: String,
    /// Every claim carries it: a claim of what this session holds re-enters it.
    session: String,
    leases: Mutex<Held>,
    /// The keys a `claim` of this server is working on: a second claim of the same
    /// key waits for the first, then finds it held and re-enters it (see
    /// [`Inner::claiming`]).
    claiming: Claiming,
}

/// Keys being claimed, and a condition variable to wait for one to be done.
#[derive(Default)]
struct Claiming {
    keys: Mutex<HashSet<Key>>,
    done: Condvar,
}

/// A key this server is claiming; dropping it lets the next claim of the key in.
struct ClaimTurn<'a> {
    claiming: &'a Claiming,
    key: Key,
}

impl Drop for ClaimTurn<'_> {
    fn drop(&mut self) {
        let mut keys = self.claiming.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.remove(&self.key);
        drop(keys);
        self.claiming.done.notify_all();
    }
}

/// The leases this server keeps alive, and whether it is shutting down (then no
/// new lease is kept: one claimed while the server closed is released at once).
#[derive(Default)]
struct Held {
    closing: bool,
    map: HashMap<Key, Keepalive>,
    /// Leases found lost by an explicit `renew` (no longer kept alive), with the
    /// token and the reason, so later calls with that token still say why (e.g.
    /// "broken by …") instead of "not a lease this server holds".
    lost: HashMap<Key, (u64, String)>,
    /// The holder ids of the tenures this server began (not re-entered): released
    /// at its exit, however often it claimed them again since; a tenure its
    /// session began elsewhere is left held.
    began: std::collections::HashSet<String>,
}

impl std::ops::Deref for Held {
    type Target = HashMap<Key, Keepalive>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl std::ops::DerefMut for Held {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.map
    }
}

/// The fencepost MCP server: one per agent, over stdio.
///
/// Cheap to clone (clones share the store and the leases). Leases claimed through
/// it are renewed every ttl/3 on a background thread until `release`, until
/// [`FencepostServer::release_all`], or until the process exits; a killed server's
/// leases simply expire at their ttl.
#[derive(Clone)]
pub struct FencepostServer {
    inner: Arc<Inner>,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for FencepostServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FencepostServer")
            .field("root", &self.inner.confinement.root())
            .field("store", &self.inner.confinement.store())
            .field("owner", &self.inner.owner)
            .finish_non_exhaustive()
    }
}

impl FencepostServer {
    /// Resolves the root, then opens the named store (a located store is opened
    /// per call, and created by the first claim).
    ///
    /// # Errors
    ///
    /// [`StartError::Root`] when the root is not an existing directory (checked
    /// first: nothing is created for a root that does not exist);
    /// [`StartError::Store`] when the named store cannot be opened or created.
    pub fn new(config: Config) -> Result<Self, StartError> {
        let root_error = |e| StartError::Root(config.root.clone(), e);
        let root = std::fs::canonicalize(&config.root).map_err(root_error)?;
        let stores = Stores::new(config.store.as_deref(), &root).map_err(StartError::Store)?;
        let confinement = Confinement::new(&root, stores.guarded_dir()).map_err(root_error)?;
        let session = match config.session {
            Some(session) => {
                fencepost::check_session(&session).map_err(StartError::Session)?;
                session
            }
            // Random, not guessable: whoever knows a session id can act as the
            // session (its tenures' secret derives from it).
            None => format!("mcp-{}", fencepost::Secret::generate().expose()),
        };
        Ok(FencepostServer {
            inner: Arc::new(Inner {
                stores,
                confinement,
                owner: config.owner,
                session,
                leases: Mutex::default(),
                claiming: Claiming::default(),
            }),
            tool_router: Self::tool_router(),
        })
    }

    /// The canonical root.
    pub fn root(&self) -> &std::path::Path {
        self.inner.confinement.root()
    }

    /// The named store directory, or the store located for the root.
    pub fn store_dir(&self) -> &std::path::Path {
        self.inner.confinement.store()
    }

    /// Stops renewing every lease this server holds and releases them (best
    /// effort); returns how many were released. Blocking: call it from a blocking
    /// context.
    pub fn release_all(&self) -> usize {
        let (held, began): (Vec<Keepalive>, _) = {
            let mut leases = self.inner.leases();
            leases.closing = true;
            let began = std::mem::take(&mut leases.began);
            (leases.drain().map(|(_, k)| k).collect(), began)
        };
        held.into_iter()
            .map(|keepalive| release_quietly(keepalive, &began))
            .filter(|released| *released)
            .count()
    }

    /// Runs `f` on the blocking pool (every store call does file I/O and may wait);
    /// a panic there becomes a tool error, never a crash.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inner) -> Result<T, String> + Send + 'static,
    ) -> Result<Json<T>, String> {
        let inner = Arc::clone(&self.inner);
        match tokio::task::spawn_blocking(move || f(&inner)).await {
            Ok(result) => result.map(Json).map_err(one_line),
            Err(e) => Err(format!("internal error: {e}")),
        }
    }
}

/// Releases a kept-alive lease at shutdown; true if it was released. A tenure
/// this server re-entered that another process of its session began (an agent's
/// edit hook, a `run`) is left held, as `run` and `claim --hold` leave one:
/// ending it would free files the session is still editing (a new user's find).
/// One it began itself (in `began`) is released, however often it claimed it
/// again since (a breaker: a second claim of its own left it held).
fn release_quietly(keepalive: Keepalive, began: &std::collections::HashSet<String>) -> bool {
    let token = keepalive.token();
    if keepalive.lease().reentered() && !began.contains(keepalive.lease().holder_id()) {
        let _ = keepalive.stop();
        tracing::debug!(token, "left held at shutdown: the session held it before");
        return false;
    }
    match keepalive.release() {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(token, "releasing at shutdown: {e}");
            false
        }
    }
}

/// Tool errors are read by a model: one line, no trailing whitespace.
fn one_line(message: String) -> String {
    message
        .split(['\n', '\r'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a model refused by a live holder can do next (never "release it").
/// The least time a claim waits for another claim of the same resource by this
/// server to finish (see `Inner::claiming`): a claim of a free resource, or a
/// re-entry, takes well within it.
const TURN_GRACE_MS: u64 = 1_000;

/// How often a claim waiting for its turn looks at whether its client cancelled it.
const TURN_POLL: std::time::Duration = std::time::Duration::from_millis(100);

const NEXT_STEPS: &str = "claim with wait_ms to wait for it, work on something else meanwhile, \
    or, if its holder is gone or stuck, ask the human operator to run `fencepost break` on it";

/// [`NEXT_STEPS`] for a holder of `resource` whose claim is in `store`, another
/// store than the one the location rule picks (a claim made there before the
/// layout changed, or through a named store): the whole `break` to ask for, made
/// there, quoted for a shell (a breaker: the advice named the store unquoted and
/// no resource, and could not be run as printed).
fn next_steps_in(store: Option<&str>, resource: &Resource) -> String {
    match store {
        None => NEXT_STEPS.to_string(),
        Some(store) => format!(
            "claim with wait_ms to wait for it, work on something else meanwhile, or, if its \
             holder is gone or stuck, ask the human operator to run `fencepost --store {} \
             break --{} {} --reason '…'` (its claim is in that store)",
            shell_word(store),
            resource.kind(),
            shell_word(&resource.target())
        ),
    }
}

/// `text` as one POSIX shell word: as is when it needs no quoting, else in single
/// quotes (a `'` inside as `'\''`).
fn shell_word(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/@+,=".contains(c))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// A core error as a tool error.
fn describe(error: Error) -> String {
    match error {
        Error::Held { label, holder } => match (holder.in_the_way.as_deref(), holder.waiting) {
            (Some(other), true) => format!(
                "held: {label} is kept free for {other}, which {holder} is waiting for; claim with \
                 wait_ms to wait (the waiting claim goes first, then yours), or work on something \
                 else meanwhile"
            ),
            (None, true) => format!(
                "held: {label} is kept free for {holder}, who is waiting for it; claim with wait_ms \
                 to wait (the waiting claim goes first, then yours), or work on something else \
                 meanwhile"
            ),
            (Some(other), false) if other.target() == label => {
                format!("held: {label} is held by {holder}; {NEXT_STEPS}")
            }
            (Some(other), false) => format!(
                "held: {label} is blocked by {other}, held by {holder}; claim with wait_ms to wait \
                 for it, work on something else meanwhile, or, if its holder is gone or stuck, ask \
                 the human operator to run `fencepost break` on {other} (not on {label})"
            ),
            (None, false) => match holder.newer_format() {
                // This version's `break` cannot end it (docs/format-v1.md §3.1).
                Some(v) => format!(
                    "held: {label} is held by {holder}, a lease a newer fencepost wrote (format \
                     v{v}); claim with wait_ms to wait for it, work on something else \
                     meanwhile, or, if it must end sooner, ask the human operator to end it \
                     with that newer fencepost"
                ),
                None => format!("held: {label} is held by {holder}; {NEXT_STEPS}"),
            },
        },
        Error::Broken { .. } => format!("lost: {error}; claim it again for a new token"),
        // Written around under another name: the other holder may still hold the
        // file, and a claim now is refused naming it and until when.
        Error::Superseded {
            through: Some(_), ..
        } => format!(
            "lost: {error}; claim it again for a new token (while that holder keeps the file, \
             the claim is refused and says who holds it and until when)"
        ),
        Error::Superseded { .. } | Error::Expired { .. } | Error::Released { .. } => {
            format!("lost: {error}; claim it again for a new token")
        }
        Error::Backend(e) => format!("store error: {e}"),
        other => other.to_string(),
    }
}

/// The refusal for a token this server does not hold a live lease for.
fn not_ours(token: u64, resource: &Resource, what: &str) -> String {
    let refusal = if what == "write" {
        "not authorized"
    } else {
        "not the holder"
    };
    format!(
        "{refusal}: token {token} on {} is not a lease this server holds, so it will not \
         {what} with it; nothing was changed. A token is public (status and messages show it) \
         and proves nothing: only the server that claimed a lease can renew, release or write \
         with it. To use it yourself: {NEXT_STEPS}",
        resource.target()
    )
}

#[tool_router(router = tool_router)]
impl FencepostServer {
    #[tool(
        description = "Claim an exclusive lease on a resource (a file in the working tree, or a \
            named lock) and get its fencing token. The server keeps the lease alive \
            (renewing every ttl/3) until you call release or the server exits; the token \
            stays the same for the whole lease. Pass the token to write (or to your own \
            checks through assert) so that a write is refused once the lease is lost. If \
            someone else holds the resource, the call fails at once (or after wait_ms) \
            and says who holds it and until when. The token is public, not a password: \
            anyone can see it in status and check it with assert, and knowing it lets \
            nobody act as the holder. This server alone can renew, release or write with \
            the leases it claimed (it keeps their secret proof in memory). Claiming a \
            resource this server already holds returns the same token, renewed \
            (reentered: true).",
        input_schema = input_schema::<ClaimArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn claim(
        &self,
        Args(args): Args<ClaimArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<Json<ClaimResult>, String> {
        let args = args?;
        let cancelled = context.ct.clone();
        let cancel = fencepost::Cancel::new(move || cancelled.is_cancelled());
        self.blocking(move |inner| inner.claim(args, cancel)).await
    }

    #[tool(
        description = "Claim several resources at once, all or nothing: either every \
            resource is claimed (one lease and fencing token each, in the order given) \
            or none is. They are taken in one canonical order and given back when any is \
            held, so two agents claiming overlapping sets never deadlock and nothing is \
            held while waiting. If any is held by someone else, the call fails at once \
            (or after wait_ms) and says which and who holds it. Each lease is then used \
            and released on its own, as one from claim.",
        input_schema = input_schema::<ClaimAllArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn claim_all(
        &self,
        Args(args): Args<ClaimAllArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<Json<ClaimAllResult>, String> {
        let args = args?;
        let cancelled = context.ct.clone();
        let cancel = fencepost::Cancel::new(move || cancelled.is_cancelled());
        self.blocking(move |inner| inner.claim_all(args, cancel))
            .await
    }

    #[tool(
        description = "Check a fencing token: authorized is true only if the token is the \
            current token of the resource and its lease is live. Anyone may assert any \
            token (tokens are public, not passwords); a released, expired, broken or \
            superseded token answers false, with the reason.",
        input_schema = input_schema::<TokenArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn assert(&self, Args(args): Args<TokenArgs>) -> Result<Json<AssertResult>, String> {
        let args = args?;
        self.blocking(move |inner| inner.assert(args)).await
    }

    #[tool(
        description = "Renew, at once, a lease this server claimed (it already renews them \
            every ttl/3). The token does not change. Only leases claimed through this \
            server can be renewed here: a token is public, not a password, and another \
            agent's token is refused without changing anything. Fails, saying why, if the \
            lease was lost (expired, taken over, or broken by an operator).",
        input_schema = input_schema::<TokenArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn renew(&self, Args(args): Args<TokenArgs>) -> Result<Json<RenewResult>, String> {
        let args = args?;
        self.blocking(move |inner| inner.renew(args)).await
    }

    #[tool(
        description = "Release a lease this server claimed: renewal stops, the token stops \
            passing, and the next claim gets a higher token. A token this server did not \
            claim is refused and nothing changes: tokens are public, not passwords, so \
            never try to release another agent's lease (wait, do other work, or ask the \
            human operator to break it).",
        input_schema = input_schema::<TokenArgs>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn release(&self, Args(args): Args<TokenArgs>) -> Result<Json<ReleaseResult>, String> {
        let args = args?;
        self.blocking(move |inner| inner.release(args)).await
    }

    #[tool(
        description = "Write a file through the fence: the token is checked, the path is \
            resolved (through symbolic links) and confined to the server's root, the \
            token is checked again immediately before the file is replaced, and the \
            replacement is atomic (old or new content, never a torn file). The token must \
            be one of this server's own leases: a token is public, not a password, and \
            another agent's token is refused. With a file resource, path must be that \
            file; with a lock, any file that no other lease holds as a file (a file lease \
            always wins over a lock). Refused: a token that is not current (the reason is \
            given, e.g. broken by an operator), absolute paths, paths leaving the root, \
            paths into the lease store or into version-control metadata (.git, .hg, .svn, \
            .jj), directories.",
        input_schema = input_schema::<WriteArgs>(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn write(&self, Args(args): Args<WriteArgs>) -> Result<Json<WriteResult>, String> {
        let args = args?;
        self.blocking(move |inner| inner.write(args)).await
    }

    #[tool(
        description = "List every resource in the lease store with its label, token, owner, \
            whether it is live, its state and its expiry, and whether this server holds it.",
        input_schema = input_schema::<StatusArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn status(&self, Args(args): Args<StatusArgs>) -> Result<Json<StatusResult>, String> {
        // `null` is as good as leaving it out (a breaker's client sent it).
        let held_only = args?.held_only.unwrap_or(false);
        self.blocking(move |inner| inner.status(held_only)).await
    }
}

const INSTRUCTIONS: &str = "fencepost gives exclusive leases with fencing tokens on files and \
named locks in a working tree shared with other agents. Before changing something others may \
change too, call claim; keep the returned token; write files with the write tool and that token \
(it refuses the write once your lease is lost, so a stale agent cannot clobber a newer one); call \
release when done. The server renews your leases while it runs. File paths are relative to the \
server's root. Tokens are public, not passwords: only the server that claimed a lease can renew, \
release or write with it. When something is held by another agent, wait (wait_ms), work on \
something else, or ask the human operator to break the lease; never try to act as its holder.";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for FencepostServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "fencepost-server",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }
}

impl Inner {
    fn leases(&self) -> MutexGuard<'_, Held> {
        self.leases.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until no other `claim` of this server is working on `key`, and holds
    /// the key until the returned turn is dropped. Two claims of one resource sent
    /// at once (an MCP client's parallel tool calls) both claimed through the
    /// store: both re-entered the session's tenure, and the second kept lease
    /// replaced the first, whose keepalive, dropped, released the tenure under both
    /// (found by a breaker; pinned by
    /// `server/tests/sessions.rs::parallel_claims_of_one_resource_keep_it_held`).
    /// One at a time, the second finds the first's lease and re-enters it as a
    /// sequential claim does.
    ///
    /// The wait for the turn is the claim's own: at most `wait_ms` (and at least
    /// [`TURN_GRACE_MS`], which a claim of a free resource takes well within), and
    /// not past the client's cancellation; `None` when it ran out. A claim with no
    /// wait queued behind one waiting for a holder answered only when that one gave
    /// up, and a cancelled claim kept its turn (a breaker).
    fn claiming(
        &self,
        key: &Key,
        wait_ms: u64,
        cancelled: &dyn Fn() -> bool,
    ) -> Option<ClaimTurn<'_>> {
        let started = std::time::Instant::now();
        let limit = std::time::Duration::from_millis(wait_ms.max(TURN_GRACE_MS));
        let mut keys = self.claiming.keys.lock().unwrap_or_else(|e| e.into_inner());
        while keys.contains(key) {
            let waited = started.elapsed();
            if waited >= limit || cancelled() {
                return None;
            }
            // Woken when a turn ends; at least every TURN_POLL to see a cancellation.
            let step = (limit - waited).min(TURN_POLL);
            keys = self
                .claiming
                .done
                .wait_timeout(keys, step)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        keys.insert(key.clone());
        Some(ClaimTurn {
            claiming: &self.claiming,
            key: key.clone(),
        })
    }

    /// The refusal of a claim of `resource` whose turn did not come (see
    /// [`Inner::claiming`]): the holder the claim in progress is waiting for, when
    /// the store names one, as any refusal names it.
    fn turn_refusal(&self, resource: &Resource, cancelled: &dyn Fn() -> bool) -> String {
        if cancelled() {
            return "cancelled: the claim was cancelled by the client; nothing is held".into();
        }
        let holder = self
            .stores
            .open(Some(resource), Access::Existing)
            .ok()
            .and_then(|(store, _)| store.holder(resource).ok().flatten());
        match holder {
            Some(holder)
                if holder.session.as_deref() != Some(&fencepost::SessionTag::of(&self.session)) =>
            {
                describe(Error::Held {
                    label: resource.target(),
                    holder,
                })
            }
            _ => format!(
                "held: another claim of {} by this server is still in progress (waiting for \
                 its holder); {NEXT_STEPS}",
                resource.target()
            ),
        }
    }

    /// Records a kept-alive lease; false (after releasing it) when the server is
    /// shutting down. A keepalive it replaces is stopped, not released, when it
    /// keeps the same tenure (same token): dropping it would release the tenure
    /// the new one keeps.
    fn keep(&self, key: Key, keepalive: Keepalive) -> bool {
        let mut leases = self.leases();
        if leases.closing {
            drop(leases);
            let _ = keepalive.release();
            return false;
        }
        // Only a lost keepalive can be replaced (a live one is refused before
        // claiming); dropping it releases nothing.
        leases.lost.remove(&key);
        if !keepalive.lease().reentered() {
            leases
                .began
                .insert(keepalive.lease().holder_id().to_string());
        }
        let token = keepalive.token();
        let replaced = leases.insert(key, keepalive);
        drop(leases);
        match replaced {
            Some(old) if old.token() == token => {
                old.stop();
            }
            old => drop(old),
        }
        true
    }

    /// The resource named by a tool argument; file targets are confined.
    fn resource(&self, arg: &ResourceArg) -> Result<(Resource, Key), String> {
        let resource = match (arg.kind, arg.slot) {
            (Kind::Lock, None) => Resource::lock(arg.target.clone()),
            (Kind::Lock, Some(slot)) => Resource::slot(
                arg.target.clone(),
                u32::try_from(args::in_range(
                    "slot",
                    slot,
                    1,
                    i64::from(fencepost::SLOTS_MAX),
                )?)
                .unwrap_or(1),
            ),
            (Kind::File | Kind::Dir, Some(_)) => {
                return Err("slot: only a lock has slots; drop `slot` or use kind `lock`".into());
            }
            (Kind::File, None) => Resource::file(
                self.confinement
                    .resolve(&arg.target)
                    .map_err(|e| e.to_string())?,
            ),
            // The root itself is a directory a subtree claim may cover, as the
            // CLI's `claim --dir .` does (a breaker: refused as "not a file").
            (Kind::Dir, None) => Resource::dir(match self.confinement.resolve(&arg.target) {
                Err(crate::confine::Refusal::Root(_)) => self.confinement.root().to_path_buf(),
                resolved => resolved.map_err(|e| e.to_string())?,
            }),
        };
        let key = resource.identity().map_err(describe)?.key;
        Ok((resource, key))
    }

    /// The store of `resource`; only `claim` may create it.
    fn store(&self, resource: &Resource, access: Access) -> Result<Store, String> {
        self.stores
            .open(Some(resource), access)
            .map(|(store, _)| store)
    }

    /// Acquires with `acquire` in `store` (located as `chosen`) beside the other
    /// stores on the resources' paths (`Stores::elsewhere`, `Store::claim_beside`):
    /// a live claim of one of them there (the layout around it changed since) is
    /// waited for while `options.wait_ms` lasts, then refused as held, naming the
    /// store.
    fn acquire_beside(
        &self,
        store: &Store,
        chosen: &str,
        resources: &[Resource],
        options: &AcquireOptions,
        acquire: impl Fn(&AcquireOptions) -> fencepost::Result<Vec<fencepost::Lease>>,
    ) -> Result<Vec<fencepost::Lease>, String> {
        let outcome = store
            .claim_beside(
                resources,
                options,
                || self.stores.elsewhere(resources, chosen),
                |options| match acquire(options) {
                    Ok(leases) => Ok(Ok(leases)),
                    Err(Error::Held { label, holder }) => Ok(Err(Error::Held { label, holder })),
                    Err(error) => Err(error),
                },
            )
            .map_err(describe)?;
        match outcome {
            fencepost::Beside::Taken(leases) => Ok(leases),
            // This server's own shared lease is in the way (a subtree claim over a
            // file it reads): it renews that lease, so waiting cannot help, and a
            // break would end its own lease (a new user was told to do both).
            fencepost::Beside::Held(Error::Held { label, holder }) if self.own_shared(&holder) => {
                let what = holder
                    .in_the_way
                    .as_deref()
                    .map_or_else(|| label.clone(), |other| other.to_string());
                Err(format!(
                    "held: {label} is blocked by this server's own shared lease on {what} \
                     (token {}); release that shared lease first (this server renews it, so \
                     waiting would not help), then claim again",
                    holder.token
                ))
            }
            fencepost::Beside::Held(error) => Err(describe(error)),
            fencepost::Beside::Elsewhere {
                store,
                resource,
                mut holder,
            } => {
                holder.owner = format!("{} (in another store on its path, {store})", holder.owner);
                let what = holder
                    .in_the_way
                    .as_deref()
                    .filter(|other| other.target() != resource.target())
                    .map(|other| format!(" (blocked by {other})"))
                    .unwrap_or_default();
                Err(format!(
                    "held: {}{what} is held by {holder}; {}",
                    resource.target(),
                    next_steps_in(
                        Some(&store),
                        holder.in_the_way.as_deref().unwrap_or(&resource)
                    )
                ))
            }
        }
    }

    /// Renews `lease` (in `store`) every ttl/3 until released; a loss is logged.
    fn keep_alive(store: &Store, lease: fencepost::Lease) -> Keepalive {
        let label = lease.label().to_string();
        let token = lease.token();
        store.keepalive_with(lease, move |loss| {
            tracing::warn!(label, token, "lease lost: {loss}");
        })
    }

    /// The token this server holds on `key`, if its lease was not lost.
    fn held_token(&self, key: &Key) -> Option<u64> {
        self.leases()
            .get(key)
            .filter(|k| !k.is_lost())
            .map(Keepalive::token)
    }

    fn claim(&self, args: ClaimArgs, cancel: fencepost::Cancel) -> Result<ClaimResult, String> {
        let cancelled = || cancel.is_cancelled();
        let ttl_ms = args::in_range("ttl_ms", args.ttl_ms, args::TTL_MIN_MS, args::TTL_MAX_MS)?;
        let wait_ms = args::in_range("wait_ms", args.wait_ms, 0, args::WAIT_MAX_MS)?;
        let (resource, key) = self.resource(&args.resource)?;
        // A claim takes the lowest free slot of `slots`; it does not pick one by
        // number, which would take slot 9 of a lock its holders share as 2 (a
        // breaker). `slot` names a slot already held, for the other tools.
        if args.resource.slot.is_some() && args.slots.is_none() {
            return Err(
                "slot: a claim does not pick a slot by number; pass `slots` (how many the lock \
                 has) and it takes the lowest free one. `slot` names a slot you already hold, \
                 in assert, renew, release and write"
                    .into(),
            );
        }
        // One claim of a key at a time in this server (see `claiming`); the wait
        // for the turn is part of the claim's wait, not in addition to it (a
        // breaker: a claim queued behind another answered after twice its wait).
        let turn_started = std::time::Instant::now();
        let Some(_turn) = self.claiming(&key, wait_ms, &cancelled) else {
            return Err(self.turn_refusal(&resource, &cancelled));
        };
        let waited = u64::try_from(turn_started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let wait_ms = wait_ms.saturating_sub(waited);
        // The server keeps its leases alive until released and has no shutdown
        // hook: once it is gone, its leases are a dead holder's (taken over early by
        // a waiter on this host). Every claim carries the server's session, so a
        // claim of what the session holds (here, or through a hook) re-enters it.
        let options = AcquireOptions::new(ttl_ms)
            .owner(self.owner.clone())
            .wait_ms(wait_ms)
            .tied_to_process(true)
            .cancel(cancel.clone());
        // A shared claim takes no session: each is a tenure of its own.
        let options = if args.shared {
            if args.slots.is_some() {
                return Err("shared: slots are exclusive; drop `shared` or `slots`".into());
            }
            if let Some(token) = self.held_token(&key) {
                return Err(format!(
                    "this server already holds {} (token {token}); release it before claiming it shared",
                    resource.target()
                ));
            }
            options.shared(true)
        } else {
            options.session(self.session.clone())
        };
        let (store, chosen) = self.stores.open(Some(&resource), Access::Create)?;
        if let Some(slots) = args.slots {
            return self.claim_slot(&store, &args.resource, slots, &options, &cancelled);
        }
        let held_shared = self
            .leases()
            .get(&key)
            .filter(|k| !k.is_lost())
            .map(|k| (k.token(), k.lease().shared()));
        if let Some((token, true)) = held_shared {
            return Err(format!(
                "this server holds {} shared (token {token}); release it before claiming it exclusively",
                resource.target()
            ));
        }
        if self.held_token(&key).is_some() {
            return self.reclaim(&store, &resource, key, &options);
        }
        let lease = self
            .acquire_beside(
                &store,
                &chosen,
                std::slice::from_ref(&resource),
                &options,
                |o| store.acquire(&resource, o).map(|lease| vec![lease]),
            )?
            .remove(0);
        if cancelled() {
            // The client gave up while we waited: nobody will learn this token, so
            // do not keep it alive. A re-entered lease is its session's, held by
            // another process too: left held (a breaker: a cancelled claim released
            // the lease an agent's hook held for the same session).
            if !lease.reentered() {
                let _ = store.release(&lease);
            }
            return Err("cancelled: the claim was cancelled by the client; nothing is held".into());
        }
        let result = ClaimResult::of(&lease);
        if !self.keep(key, Self::keep_alive(&store, lease)) {
            return Err("cancelled: the server is shutting down; nothing is held".into());
        }
        // At debug: the request's one info line is logged by `transport`.
        tracing::debug!(
            label = result.label,
            token = result.token,
            ttl_ms,
            "claimed"
        );
        Ok(result)
    }

    /// `claim` with `slots`: one free slot of the lock (a slot this server's session
    /// holds is re-entered; its old keepalive is stopped, never dropped, which
    /// would release it).
    fn claim_slot(
        &self,
        store: &Store,
        arg: &ResourceArg,
        slots: i64,
        options: &AcquireOptions,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<ClaimResult, String> {
        let slots = args::in_range("slots", slots, 1, i64::from(fencepost::SLOTS_MAX))?;
        if arg.kind != Kind::Lock || arg.slot.is_some() {
            return Err(
                "slots: only a lock has slots, claimed without `slot` (the claim picks one)".into(),
            );
        }
        let slots = u32::try_from(slots).unwrap_or(1);
        let lease = store
            .acquire_slot(&arg.target, slots, options)
            .map_err(describe)?;
        if cancelled() {
            if !lease.reentered() {
                let _ = store.release(&lease);
            }
            return Err("cancelled: the claim was cancelled by the client; nothing is held".into());
        }
        let result = ClaimResult::of(&lease);
        let key = lease.key().clone();
        let old = self.leases().remove(&key);
        if let Some(old) = old {
            old.stop();
        }
        if !self.keep(key, Self::keep_alive(store, lease)) {
            return Err("cancelled: the server is shutting down; nothing is held".into());
        }
        Ok(result)
    }

    /// A claim of what this server already holds: its session re-enters the tenure
    /// (same token, renewed for the new ttl). The keepalive is stopped first, so two
    /// renewals never race for one generation, and the map stays locked throughout,
    /// so no other call sees the lease missing (one renewal: milliseconds).
    fn reclaim(
        &self,
        store: &Store,
        resource: &Resource,
        key: Key,
        options: &AcquireOptions,
    ) -> Result<ClaimResult, String> {
        let mut leases = self.leases();
        let Some(keepalive) = leases.remove(&key) else {
            drop(leases);
            return self.claim_fresh(store, resource, key, options);
        };
        let held = keepalive.stop();
        // Held by this session, so no wait: re-entry or a definite answer.
        let options = options.clone().wait_ms(0);
        match store.acquire(resource, &options) {
            Ok(lease) => {
                let result = ClaimResult::of(&lease);
                leases.insert(key, Self::keep_alive(store, lease));
                Ok(result)
            }
            Err(error) => {
                // Keep what was held as it was: its own keepalive decides a loss.
                leases.insert(key, Self::keep_alive(store, held));
                Err(describe(error))
            }
        }
    }

    /// A claim after the server's own lease vanished between the look and the
    /// lock (released by another call meanwhile): claimed as usual.
    fn claim_fresh(
        &self,
        store: &Store,
        resource: &Resource,
        key: Key,
        options: &AcquireOptions,
    ) -> Result<ClaimResult, String> {
        let lease = store.acquire(resource, options).map_err(describe)?;
        let result = ClaimResult::of(&lease);
        if !self.keep(key, Self::keep_alive(store, lease)) {
            return Err("cancelled: the server is shutting down; nothing is held".into());
        }
        Ok(result)
    }

    fn claim_all(
        &self,
        args: ClaimAllArgs,
        cancel: fencepost::Cancel,
    ) -> Result<ClaimAllResult, String> {
        let cancelled = || cancel.is_cancelled();
        let ttl_ms = args::in_range("ttl_ms", args.ttl_ms, args::TTL_MIN_MS, args::TTL_MAX_MS)?;
        let wait_ms = args::in_range("wait_ms", args.wait_ms, 0, args::WAIT_MAX_MS)?;
        if args.resources.is_empty() || args.resources.len() > args::CLAIM_ALL_MAX {
            return Err(format!(
                "resources: give 1 to {} resources, got {}",
                args::CLAIM_ALL_MAX,
                args.resources.len()
            ));
        }
        if args.resources.iter().any(|arg| arg.slot.is_some()) {
            return Err(
                "slot: a claim does not pick a slot by number; claim a slot with `claim` and \
                 `slots` (it takes the lowest free one). `slot` names a slot you already hold, \
                 in assert, renew, release and write"
                    .into(),
            );
        }
        let resolved = args
            .resources
            .iter()
            .map(|arg| self.resource(arg))
            .collect::<Result<Vec<_>, _>>()?;
        let (resources, keys): (Vec<Resource>, Vec<Key>) = resolved.into_iter().unzip();
        // All or nothing is only possible within one store.
        let (store, locator) = self.stores.open(Some(&resources[0]), Access::Create)?;
        for resource in &resources[1..] {
            let (_, other) = self.stores.open(Some(resource), Access::Create)?;
            if other != locator {
                return Err(format!(
                    "invalid resources: {} and {} are in different stores ({locator} and {other}); claim them with separate calls",
                    resources[0].target(),
                    resource.target()
                ));
            }
        }
        let options = AcquireOptions::new(ttl_ms)
            .owner(self.owner.clone())
            .wait_ms(wait_ms)
            .tied_to_process(true)
            .session(self.session.clone())
            .cancel(cancel.clone());
        // A resource this server already holds is re-entered (same token, renewed):
        // its old keepalive is stopped once the new lease is kept, never dropped
        // (dropping a live keepalive releases its lease).
        let leases = self.acquire_beside(&store, &locator, &resources, &options, |o| {
            store.acquire_all(&resources, o)
        })?;
        if cancelled() {
            for lease in leases.iter().filter(|lease| !lease.reentered()) {
                let _ = store.release(lease);
            }
            return Err("cancelled: the claim was cancelled by the client; nothing is held".into());
        }
        let results = leases.iter().map(ClaimResult::of).collect();
        for (key, lease) in keys.into_iter().zip(leases) {
            let old = self.leases().remove(&key);
            if let Some(old) = old {
                old.stop();
            }
            if !self.keep(key, Self::keep_alive(&store, lease)) {
                return Err("cancelled: the server is shutting down; nothing is held".into());
            }
        }
        Ok(ClaimAllResult { leases: results })
    }

    fn assert(&self, args: TokenArgs) -> Result<AssertResult, String> {
        let token = args::token(args.token)?;
        let (resource, key) = self.resource(&args.resource)?;
        let store = self.store(&resource, Access::Existing)?;
        let authorized = store.check(&resource, token).map_err(describe)?;
        // A shared token never authorizes a write (docs/protocol.md §3.2).
        let shared = self
            .leases()
            .get(&key)
            .is_some_and(|k| k.token() == token && k.lease().shared());
        let reason = (!authorized).then(|| {
            if shared {
                "it is this server's shared lease, which authorizes reading, not writing".into()
            } else {
                Self::why_not_current(&store, &key, token)
            }
        });
        Ok(AssertResult { authorized, reason })
    }

    /// Why `token` does not pass on `key`, from the store's status (best effort).
    fn why_not_current(store: &Store, key: &Key, token: u64) -> String {
        let Some(entry) = store
            .status()
            .ok()
            .and_then(|entries| entries.into_iter().find(|e| &e.key == key))
        else {
            return "it has never been claimed in this store".into();
        };
        match (&entry.broken, entry.state) {
            (Some(note), _) if entry.token == token => format!("its lease was {note}"),
            (_, ClaimState::Held) if entry.token != token => format!(
                "it is held by {} with token {} until {}",
                entry.who(),
                entry.token,
                fencepost::utc_timestamp(entry.expires_at_ms)
            ),
            (_, ClaimState::Released) if entry.token == token => "its lease was released".into(),
            (_, ClaimState::Expired) if entry.token == token => "its lease expired".into(),
            _ if token > entry.token => "no lease with that token was granted".into(),
            _ => format!("it was superseded by token {}", entry.token),
        }
    }

    /// This server's lease on `key` with `token`, as of its latest renewal; the
    /// loss, described, if it was lost; or the refusal for a token this server does
    /// not hold.
    fn own_lease(
        &self,
        key: &Key,
        token: u64,
        resource: &Resource,
        what: &str,
    ) -> Result<fencepost::Lease, String> {
        let leases = self.leases();
        match leases.get(key) {
            Some(k) if k.token() == token => {
                if k.is_lost() {
                    let lease = k.lease();
                    drop(leases);
                    // The keepalive recorded the loss; ask the store for its reason.
                    let checked = self
                        .store(resource, Access::Existing)
                        .and_then(|store| store.check_lease(&lease).map_err(describe));
                    return Err(match checked {
                        Err(e) => e,
                        Ok(()) => format!(
                            "lost: the lease on {} with token {token} could not be kept alive; claim it again",
                            resource.target()
                        ),
                    });
                }
                Ok(k.lease())
            }
            _ => Err(match leases.lost.get(key) {
                Some((lost, reason)) if *lost == token => reason.clone(),
                _ => not_ours(token, resource, what),
            }),
        }
    }

    fn renew(&self, args: TokenArgs) -> Result<RenewResult, String> {
        let token = args::token(args.token)?;
        let (resource, key) = self.resource(&args.resource)?;
        self.own_lease(&key, token, &resource, "renew")?;
        let store = self.store(&resource, Access::Existing)?;
        let mut leases = self.leases();
        let ours = match leases.get(&key) {
            Some(k) if k.token() == token => leases.remove(&key),
            _ => None,
        };
        let Some(keepalive) = ours else {
            return Err(not_ours(token, &resource, "renew"));
        };
        // Our own keepalive renews this tenure too: stop it first (waiting for a
        // renewal in flight), so two renewals never race for one generation, renew,
        // and keep it alive again. The map stays locked throughout, so no other
        // call sees the lease missing (one renewal: milliseconds).
        let mut lease = keepalive.stop();
        let outcome = store.renew(&mut lease);
        let result = RenewResult {
            token: lease.token(),
            expires_at_ms: lease.expires_at_ms(),
        };
        // A store failure leaves the lease as it was (maybe still live): keep
        // renewing it. Any other failure means the lease is lost.
        let outcome = match outcome {
            Ok(()) | Err(Error::Backend(_)) => {
                leases.insert(key, Self::keep_alive(&store, lease));
                outcome.map_err(describe)
            }
            Err(loss) => {
                let reason = describe(loss);
                leases.lost.insert(key, (token, reason.clone()));
                Err(reason)
            }
        };
        drop(leases);
        outcome?;
        Ok(result)
    }

    fn release(&self, args: TokenArgs) -> Result<ReleaseResult, String> {
        let token = args::token(args.token)?;
        let (resource, key) = self.resource(&args.resource)?;
        let keepalive = {
            let mut leases = self.leases();
            match leases.get(&key).map(Keepalive::token) {
                Some(held) if held == token => leases.remove(&key),
                Some(held) => {
                    return Err(format!(
                        "not the holder: this server holds {} with token {held}, not token {token}; nothing was released",
                        resource.target()
                    ));
                }
                None => match leases.lost.remove(&key) {
                    Some((lost, reason)) if lost == token => return Err(reason),
                    Some(other) => {
                        leases.lost.insert(key.clone(), other);
                        None
                    }
                    None => None,
                },
            }
        };
        let Some(keepalive) = keepalive else {
            return Err(not_ours(token, &resource, "release"));
        };
        keepalive.release().map_err(describe)?;
        tracing::debug!(label = resource.target(), token, "released");
        Ok(ReleaseResult { released: true })
    }

    /// A live tenure holding `target` as a file, other than an exclusive one of this
    /// server's own: a file lease always wins over a lock. This server's own shared
    /// lease counts too (it authorizes reading, and other readers may hold the file
    /// beside it, of whom `Store::holder` names one: a breaker's write landed over
    /// another agent's shared lease because the one named was ours).
    fn file_holder(
        &self,
        target: &std::path::Path,
    ) -> Result<Option<(fencepost::Holder, Option<String>)>, String> {
        // The file's own store (the location rule picks it from the file), which may
        // not be the lock's; then every other store on its path, where a claim made
        // before the layout changed may hold it still (a breaker: the CLI's hook
        // read only the located store, and so did this).
        let file = Resource::file(target);
        let (store, chosen) = self.stores.open(Some(&file), Access::Existing)?;
        let others = self
            .stores
            .elsewhere(std::slice::from_ref(&file), &chosen)
            .map_err(describe)?;
        let located = store.backend().locator();
        for store in std::iter::once(store).chain(others) {
            let holder = store.holder(&file).map_err(describe)?;
            if let Some(holder) = holder.filter(|h| !self.own_exclusive(h)) {
                let locator = store.backend().locator();
                return Ok(Some((holder, (locator != located).then_some(locator))));
            }
        }
        Ok(None)
    }

    /// True when `holder` is a live exclusive lease of this server's.
    fn own_exclusive(&self, holder: &fencepost::Holder) -> bool {
        self.leases().values().any(|k| {
            !k.is_lost() && k.lease().holder_id() == holder.holder_id && !k.lease().shared()
        })
    }

    /// True when `holder` is a live shared lease of this server's.
    fn own_shared(&self, holder: &fencepost::Holder) -> bool {
        self.leases().values().any(|k| {
            !k.is_lost() && k.lease().holder_id() == holder.holder_id && k.lease().shared()
        })
    }

    fn write(&self, args: WriteArgs) -> Result<WriteResult, String> {
        let token = args::token(args.token)?;
        let (resource, key) = self.resource(&args.resource)?;
        let lease = self.own_lease(&key, token, &resource, "write")?;
        if lease.shared() {
            return Err(format!(
                "refused: this server's lease on {} (token {token}) is shared, which authorizes \
                 reading only; nothing was written. To write, release it and claim {} without \
                 `shared` (you get it once the other shared holders released theirs)",
                resource.target(),
                resource.target()
            ));
        }
        let store = self.store(&resource, Access::Existing)?;
        store.check_lease(&lease).map_err(describe)?;
        // A path that names a directory (`src`, `src/a.txt/`) is refused as such
        // before any store is asked about it (a breaker got "store error: cannot
        // choose a store", and `src/a.txt/` written as `src/a.txt`).
        let refuse_directory = |what: String| {
            format!(
                "refused path {:?}: {what}, and write replaces a file's content; name the file",
                args.path
            )
        };
        if args.path.ends_with('/') || (cfg!(windows) && args.path.ends_with('\\')) {
            return Err(refuse_directory(
                "it ends with a slash, so it names a directory".into(),
            ));
        }
        let target = self
            .confinement
            .resolve_for_write(&args.path)
            .map_err(|e| e.to_string())?;
        if target.is_dir() {
            return Err(refuse_directory(format!(
                "{} is a directory",
                self.confinement.relative(&target)
            )));
        }
        if args.resource.kind == Kind::File {
            let target_key = Resource::file(&target).identity().map_err(describe)?.key;
            if target_key != key {
                return Err(format!(
                    "refused path {:?}: a file lease authorizes writes to that file only, and \
                     this is not {}; claim this file, or a lock that guards both",
                    args.path,
                    resource.target()
                ));
            }
        }
        if args.resource.kind == Kind::Dir {
            let above = Resource::file(&target)
                .subtree_keys_above()
                .map_err(describe)?;
            if !above.contains(&key) {
                return Err(format!(
                    "refused path {:?}: a subtree lease authorizes writes below its directory \
                     only, and this is not below {}; claim this file, or a subtree that \
                     contains it",
                    args.path,
                    resource.target()
                ));
            }
            // A repository or store directory made below the subtree since the claim
            // gives the files there a store of their own, where claims never see this
            // lease (design-05 §3.5): the lease does not cover them any more (a
            // breaker: such a write overwrote a file another agent held there).
            let (_, lease_store) = self.stores.open(Some(&resource), Access::Existing)?;
            let (_, target_store) = self
                .stores
                .open(Some(&Resource::file(&target)), Access::Existing)?;
            if lease_store != target_store {
                return Err(format!(
                    "refused path {:?}: it now belongs to the store {target_store} (a repository \
                     or .fencepost directory inside {} made since the claim), where this \
                     lease in {lease_store} is never seen; nothing was written. Claim the file \
                     itself (its claim goes to that store), or claim that directory as a \
                     subtree too",
                    args.path,
                    resource.target()
                ));
            }
        }
        let relative = self.confinement.relative(&target);
        let held_as_file = |(holder, store): (fencepost::Holder, Option<String>)| {
            if self.own_shared(&holder) {
                return format!(
                    "refused path {:?}: this server holds {relative} shared (token {}: a lease \
                     on the file, or on a subtree that contains it), which authorizes reading \
                     only, and a lock never overrides a file or subtree lease; nothing was \
                     written. To write it under the lock, release that shared lease first",
                    args.path, holder.token
                );
            }
            let what = match &holder.in_the_way {
                Some(other) => format!("by a lease on {other}, held by {holder}"),
                None => {
                    format!("by {holder} (a lease on the file, or on a subtree that contains it)")
                }
            };
            let store_note = store
                .as_ref()
                .map(|store| format!(" (its claim is in another store on its path, {store})"))
                .unwrap_or_default();
            format!(
                "refused path {:?}: {relative} is held {what}{store_note}, and a lock never \
                 overrides a file lease or a subtree lease; nothing was written. {}",
                args.path,
                next_steps_in(
                    store.as_deref(),
                    holder
                        .in_the_way
                        .as_deref()
                        .unwrap_or(&Resource::file(&target))
                )
            )
        };
        let guarded_by_lock = args.resource.kind == Kind::Lock;
        if guarded_by_lock && let Some(held) = self.file_holder(&target)? {
            return Err(held_as_file(held));
        }
        let mut refusal = None;
        let recheck = || {
            if let Err(e) = store.check_lease(&lease) {
                refusal = Some(describe(e));
                return false;
            }
            if guarded_by_lock {
                match self.file_holder(&target) {
                    Ok(None) => {}
                    Ok(Some(held)) => {
                        refusal = Some(held_as_file(held));
                        return false;
                    }
                    Err(e) => {
                        refusal = Some(e);
                        return false;
                    }
                }
            }
            true
        };
        match write::replace(
            self.confinement.root(),
            &target,
            args.content.as_bytes(),
            recheck,
        ) {
            Ok(()) => {}
            Err(WriteFailure::Fenced) => {
                return Err(refusal.unwrap_or_else(|| {
                    format!(
                        "not authorized: the lease on {} with token {token} is no longer current; nothing was written",
                        resource.target()
                    )
                }));
            }
            Err(WriteFailure::Moved(dir)) => {
                return Err(format!(
                    "refused path {:?}: {} changed while writing (replaced by a link?); nothing was written",
                    args.path,
                    dir.display()
                ));
            }
            Err(WriteFailure::MovedWhilePublishing(dir)) => {
                return Err(format!(
                    "write failed: {} was moved away while the file was published (another \
                     directory was made in its place), so the content went with it; {:?} is \
                     unchanged: write it again",
                    dir.display(),
                    args.path,
                ));
            }
            Err(WriteFailure::NotAFile(path)) => {
                return Err(format!(
                    "refused path {:?}: {} is a directory or another non-regular file",
                    args.path,
                    path.display()
                ));
            }
            Err(WriteFailure::Io(what, path, e)) => {
                return Err(format!(
                    "write failed: {what} {}: {e}; the file is unchanged",
                    path.display()
                ));
            }
        }
        tracing::debug!(path = relative, token, bytes = args.content.len(), "wrote");
        Ok(WriteResult {
            written: true,
            bytes: args.content.len() as u64,
            path: relative,
        })
    }

    fn status(&self, held_only: bool) -> Result<StatusResult, String> {
        let (store, locator) = self.stores.open(None, Access::Existing)?;
        let mut entries = store.status().map_err(describe)?;
        let before = entries.len();
        if held_only {
            entries.retain(|entry| entry.live);
        }
        let not_held = (before - entries.len()) as u64;
        let held: HashMap<Key, u64> = self
            .leases()
            .iter()
            .filter(|(_, k)| !k.is_lost())
            .map(|(key, k)| (key.clone(), k.token()))
            .collect();
        // A shared lease's own series is its participant's, which `status` folds
        // into its resource's row: matched by the resource as the row names it (a
        // new user saw this server's own reader lease marked as someone else's).
        let shared_held: std::collections::HashSet<String> = self
            .leases()
            .values()
            .filter(|k| !k.is_lost())
            .map(|k| k.lease())
            .filter(|lease| lease.shared())
            .map(|lease| format!("{}:{}", lease.resource().kind(), lease.label()))
            .collect();
        let claims = entries
            .into_iter()
            .map(|entry| StatusClaim {
                held_by_this_server: entry.live
                    && (held.get(&entry.key) == Some(&entry.token)
                        || (!entry.shared.is_empty() && shared_held.contains(&entry.resource))),
                // A file's file-id series is a file too: the schema has two kinds
                // (core `Store::status` already folds a tenure's two series into one
                // row).
                // (A row of shared holders only is named by its resource.)
                kind: match entry.resource.split(':').next() {
                    Some("lock" | "slot") => "lock".into(),
                    Some("dir") => "dir".into(),
                    _ => "file".into(),
                },
                shared: entry.shared,
                session: entry.session.map(|tag| tag.as_str().to_string()),
                resource: entry.resource,
                pid: entry.pid,
                host: entry.host,
                state: serde_json::to_value(entry.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                label: entry.label,
                token: entry.token,
                owner: entry.owner,
                live: entry.live,
                expires_at_ms: entry.expires_at_ms,
                broken: entry.broken.map(|note| note.to_string()),
            })
            .collect();
        Ok(StatusResult {
            root: self.confinement.root().display().to_string(),
            store: locator,
            claims,
            not_held: held_only.then_some(not_held),
        })
    }
}

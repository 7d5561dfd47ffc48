//! Opens the store for a command: an `etcd://` URL named by `--store` /
//! `FENCEPOST_STORE` (the etcd backend, with the `etcd` cargo feature), or a
//! directory (the fs backend), named or located from the resource by the store
//! location rule (`fencepost_fs::locate_store`). Either way the rest of the CLI sees
//! one `LeaseStore`.

use std::path::Path;

use fencepost::{LeaseStore, Resource};
use fencepost_fs::StoreScope;

/// Whether a command may create the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// `claim` and `run`: the store is created if it does not exist.
    Create,
    /// Everything else: nothing is created; a missing store reads as empty.
    Existing,
}

/// An opened backend, and how to name it.
pub struct Opened {
    pub backend: Box<dyn LeaseStore>,
    /// The rule that picked a directory store; `None` for an etcd store.
    pub scope: Option<StoreScope>,
    /// False when a directory store does not exist (yet).
    pub exists: bool,
}

/// The backend for `resource` (`None`: the working directory's store, for
/// `status`), or a one-line reason.
pub fn open(
    store: Option<&Path>,
    resource: Option<&Resource>,
    cwd: &Path,
    access: Access,
) -> Result<Opened, String> {
    if let Some(url) = store.and_then(Path::to_str).filter(|s| is_etcd_url(s)) {
        return Ok(Opened {
            backend: open_etcd(url)?,
            scope: None,
            exists: true,
        });
    }
    let location = fencepost_fs::locate_store(store, resource, cwd).map_err(|e| match e {
        // A bad resource reads as it does everywhere else, not as a store problem.
        fencepost_fs::LocateError::Resource(e) => crate::output::describe_error(&e),
        e => format!("cannot choose a store: {e}"),
    })?;
    let opened = match access {
        Access::Create => fencepost_fs::FsStore::open(&location.path),
        Access::Existing => fencepost_fs::FsStore::open_existing(&location.path),
    };
    let backend = opened.map_err(|e| {
        // `e` reads "open store <path>: <reason>".
        format!("cannot {e}; pass a writable directory with --store or FENCEPOST_STORE")
    })?;
    Ok(Opened {
        exists: backend.root().is_dir(),
        backend: Box::new(backend),
        scope: Some(location.scope),
    })
}

/// `etcd://…`, in any case (checked without the etcd crate, so a build without the
/// feature can say what is missing).
fn is_etcd_url(text: &str) -> bool {
    text.get(..7)
        .is_some_and(|s| s.eq_ignore_ascii_case("etcd://"))
}

#[cfg(feature = "etcd")]
fn open_etcd(url: &str) -> Result<Box<dyn LeaseStore>, String> {
    let backend = fencepost_etcd::EtcdStore::open(url).map_err(|e| format!("cannot {e}"))?;
    Ok(Box::new(backend))
}

#[cfg(not(feature = "etcd"))]
fn open_etcd(url: &str) -> Result<Box<dyn LeaseStore>, String> {
    Err(format!(
        "the store {url} is an etcd store, but this fencepost was built without etcd support; \
         build it with the etcd feature, from the source tree: \
         cargo install --locked --path cli --features etcd"
    ))
}

//! The stores a server uses: the one named by `--store` (a directory, or an
//! `etcd://` URL with the `etcd` cargo feature), or, when none is named, the store
//! the location rule picks for each resource (`fencepost_fs::locate_store`, anchored
//! at a file's own directory, and at the root for locks and `status`) — the same
//! store the `fencepost` CLI picks, so a server and a CLI never split a resource.

use std::path::{Path, PathBuf};

use fencepost::{BackendError, LeaseStore, Resource, Store};

/// Where the server's stores come from: the store named by `--store`, or, without
/// one, the store located for each resource from the root. A located store is
/// opened afresh on each call, never cached: a `.fencepost` marker created later
/// must be obeyed, as the CLI obeys it.
pub(crate) struct Stores {
    /// `--store`: one store for every resource.
    named: Option<Named>,
    root: PathBuf,
    guarded: PathBuf,
}

/// The store named by `--store`.
enum Named {
    /// An etcd store, and how `status` names it (its URL).
    Etcd(Store, String),
    /// A directory (absolute), opened on each call as a located store is, so it
    /// is created by the first claim and not when the server starts (as the
    /// READMEs say; a new user found an empty store made at start).
    Dir(PathBuf),
}

/// Whether a call may create the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// `claim`: the store is created if missing.
    Create,
    /// Every other tool: nothing is created; a missing store reads as empty.
    Existing,
}

impl Stores {
    /// Opens `named` (an etcd URL), or prepares to open it (a directory relative
    /// to `root`; refused when it reads as a URL of another kind,
    /// `fencepost_fs::LocateError::NotADirectory`) or to locate stores from
    /// `root`. Nothing is created until a claim.
    pub(crate) fn new(named: Option<&Path>, root: &Path) -> Result<Stores, BackendError> {
        let located_for_root = || {
            fencepost_fs::locate_store(None, None, root)
                .map_or_else(|_| root.join(fencepost_fs::STORE_DIR_NAME), |l| l.path)
        };
        let named = named.filter(|p| !p.as_os_str().is_empty());
        let (named, guarded) = match named {
            None => (None, located_for_root()),
            Some(url) if url.to_str().is_some_and(is_etcd_url) => {
                let backend = open_etcd(url.to_str().unwrap_or_default())?;
                let label = backend.locator();
                (
                    Some(Named::Etcd(Store::new(backend), label)),
                    located_for_root(),
                )
            }
            Some(dir) => {
                let location = fencepost_fs::locate_store(Some(dir), None, root).map_err(|e| {
                    BackendError::new(
                        "choose the store",
                        dir.display(),
                        std::io::Error::other(e.to_string()),
                    )
                })?;
                (Some(Named::Dir(location.path.clone())), location.path)
            }
        };
        Ok(Stores {
            named,
            root: root.to_path_buf(),
            guarded,
        })
    }

    /// The named store directory, or the store located for the root: `write` stays
    /// out of it (and out of every store located for a target, see `confine`).
    pub(crate) fn guarded_dir(&self) -> &Path {
        &self.guarded
    }

    /// The store of `resource` (`None`: the root's, for `status`) and its locator.
    pub(crate) fn open(
        &self,
        resource: Option<&Resource>,
        access: Access,
    ) -> Result<(Store, String), String> {
        let location = match &self.named {
            Some(Named::Etcd(store, label)) => return Ok((store.clone(), label.clone())),
            Some(Named::Dir(path)) => fencepost_fs::StoreLocation {
                path: path.clone(),
                scope: fencepost_fs::StoreScope::Explicit,
            },
            None => fencepost_fs::locate_store(None, resource, &self.root)
                .map_err(|e| format!("store error: cannot choose a store: {e}"))?,
        };
        // A subtree claim must reach every file below its directory, as the CLI's
        // (`fencepost_fs::subtree_split`): refused over a nested repository or store.
        // With `--store`, every file is in that one store: nothing to split.
        if access == Access::Create
            && self.named.is_none()
            && let Some(resource) = resource
            && let Some(split) = fencepost_fs::subtree_split(resource, &self.root)
                .map_err(|e| format!("store error: cannot choose a store: {e}"))?
        {
            return Err(split.to_string());
        }
        let opened = match access {
            Access::Create => fencepost_fs::FsStore::open(&location.path),
            Access::Existing => fencepost_fs::FsStore::open_existing(&location.path),
        };
        let backend = opened.map_err(|e| format!("store error: {e}"))?;
        let locator = fencepost::LeaseStore::locator(&backend);
        Ok((Store::new(backend), locator))
    }
}

impl Stores {
    /// The other stores the location rule could pick for `resources` under
    /// another layout (`fencepost_fs::other_stores`), besides `chosen` (the
    /// claim's store, by its locator), as they are now, opened for reading: a claim
    /// is made beside them (`Store::claim_beside`, which lists them after the claim
    /// landed), as the CLI's is, with `--store` too. None for locks.
    pub(crate) fn elsewhere(
        &self,
        resources: &[Resource],
        chosen: &str,
    ) -> fencepost::Result<Vec<Store>> {
        let (mut paths, mut stores) = (Vec::<PathBuf>::new(), Vec::new());
        for resource in resources {
            let others = fencepost_fs::other_stores(None, resource, &self.root, Path::new(chosen))
                .map_err(|e| match e {
                    fencepost_fs::LocateError::Resource(e) => e,
                    e => fencepost::Error::Backend(BackendError::new(
                        "list the stores",
                        self.root.display(),
                        std::io::Error::other(format!("for {}: {e}", resource.target())),
                    )),
                })?;
            for other in others {
                if paths.contains(&other.path) {
                    continue;
                }
                if let Ok(backend) = fencepost_fs::FsStore::open_existing(&other.path) {
                    paths.push(other.path);
                    stores.push(Store::new(backend));
                }
            }
        }
        Ok(stores)
    }
}

/// `etcd://…`, in any case (checked without the etcd crate, so a build without the
/// feature can say what is missing).
pub(crate) fn is_etcd_url(text: &str) -> bool {
    text.get(..7)
        .is_some_and(|s| s.eq_ignore_ascii_case("etcd://"))
}

#[cfg(feature = "etcd")]
fn open_etcd(url: &str) -> Result<Box<dyn LeaseStore>, BackendError> {
    Ok(Box::new(fencepost_etcd::EtcdStore::open(url)?))
}

#[cfg(not(feature = "etcd"))]
fn open_etcd(url: &str) -> Result<Box<dyn LeaseStore>, BackendError> {
    Err(BackendError::new(
        "open store",
        url,
        std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "this fencepost-server was built without etcd support; build it with `--features etcd`",
        ),
    ))
}

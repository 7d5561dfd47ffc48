//! Opens the store named in [`Config::store`](crate::Config): an `etcd://` URL (the
//! etcd backend, with the `etcd` cargo feature) or a directory (the fs backend).

use std::path::{Path, PathBuf};

use fencepost::{BackendError, LeaseStore};

/// An opened backend, the directory writes must stay out of, and how `status`
/// names the store.
pub(crate) struct Opened {
    pub(crate) backend: Box<dyn LeaseStore>,
    /// The fs store directory; for an etcd store, the tree's default `.fencepost`
    /// directory (still fencepost's, so still not writable through `write`).
    pub(crate) guarded_dir: PathBuf,
    /// The etcd URL; `None` for a directory (named by the guarded directory).
    pub(crate) label: Option<String>,
}

/// Opens `store` (a directory, or an etcd URL) for the tree at `root`.
pub(crate) fn open(store: &Path, root: &Path) -> Result<Opened, BackendError> {
    if let Some(url) = store.to_str().filter(|s| is_etcd_url(s)) {
        let backend = open_etcd(url)?;
        return Ok(Opened {
            label: Some(backend.locator()),
            backend,
            guarded_dir: fencepost_fs::locate_store(None, root),
        });
    }
    let backend = fencepost_fs::FsStore::open(store)?;
    Ok(Opened {
        guarded_dir: backend.root().to_path_buf(),
        label: None,
        backend: Box::new(backend),
    })
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

//! Opens the store named by `--store` / `FENCEPOST_STORE`: an `etcd://` URL (the
//! etcd backend, with the `etcd` cargo feature) or a directory (the fs backend,
//! with discovery when none is named). Either way the rest of the CLI sees one
//! `LeaseStore`.

use std::path::Path;

use fencepost::LeaseStore;

/// The backend named by `store` (or discovered from `cwd`), or a one-line reason.
pub fn open(store: Option<&Path>, cwd: &Path) -> Result<Box<dyn LeaseStore>, String> {
    if let Some(url) = store.and_then(Path::to_str).filter(|s| is_etcd_url(s)) {
        return open_etcd(url);
    }
    let root = fencepost_fs::locate_store(store, cwd);
    let backend = fencepost_fs::FsStore::open(&root).map_err(|e| {
        // `e` reads "open store <path>: <reason>".
        format!("cannot {e}; pass a writable directory with --store or FENCEPOST_STORE")
    })?;
    Ok(Box::new(backend))
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
         build it with `--features etcd` (cargo install fencepost-cli --features etcd)"
    ))
}

//! The other stores a file's claims could be in. The store location rule reads the
//! layout around a file at each command, and the layout can change while a claim
//! is being made (a repository initialised, a `.fencepost` directory made). So a
//! claim of a file or directory is made beside every other store on the file's
//! path (`fencepost::Store::claim_beside`): once it landed in the store the rule
//! picked, each of them is asked for a live claim in its way, and one found gives
//! the claim back (docs/protocol.md §5, "Layout changes").

use std::path::{Path, PathBuf};

use fencepost::{Holder, Resource, Store};

/// The other stores on the paths of a command's resources, listed when asked
/// (after the claim landed: a store made meanwhile is among them).
#[derive(Default)]
pub struct Elsewhere {
    resources: Vec<Resource>,
    cwd: PathBuf,
    chosen: PathBuf,
}

impl Elsewhere {
    /// The stores other than `chosen` (the directory the command's store is in)
    /// that the location rule could pick for any of `resources` under another
    /// layout, also when `--store` or `FENCEPOST_STORE` named the command's store
    /// (`run` hands its child `FENCEPOST_STORE`, and a child's claim of a file
    /// whose claims live elsewhere must meet them: a breaker found two holders);
    /// none for locks. Nothing is read until [`Elsewhere::list`].
    pub fn new(resources: &[Resource], cwd: &Path, chosen: &Path) -> Elsewhere {
        Elsewhere {
            resources: resources.to_vec(),
            cwd: cwd.to_path_buf(),
            chosen: chosen.to_path_buf(),
        }
    }

    /// The stores as they are now, opened for reading (`fencepost_fs::other_stores`
    /// for each resource; one that cannot be opened holds nothing this user could
    /// claim), for `Store::claim_beside`.
    pub fn list(&self) -> fencepost::Result<Vec<Store>> {
        let mut paths: Vec<PathBuf> = Vec::new();
        let mut stores = Vec::new();
        for resource in &self.resources {
            let others = fencepost_fs::other_stores(None, resource, &self.cwd, &self.chosen)
                .map_err(|e| locate_error(resource, &self.cwd, e))?;
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

    /// `holder`, found in the store `locator` names (a directory store's path), with
    /// that store named in its owner, so the refusal says where the lease is.
    pub fn named(&self, locator: &str, resource: &Resource, mut holder: Holder) -> Holder {
        // The claim in the way is of the resource itself: not named as its blocker
        // (a breaker: "f.txt is blocked by file /…/f.txt").
        let key = |r: &Resource| r.identity().ok().map(|identity| identity.key);
        if holder
            .in_the_way
            .as_deref()
            .is_some_and(|other| other.kind() == resource.kind() && key(other) == key(resource))
        {
            holder.in_the_way = None;
        }
        holder.owner = format!("{} (in another store on its path, {locator})", holder.owner,);
        holder
    }
}

/// A store list that could not be made, as the core's error.
fn locate_error(resource: &Resource, cwd: &Path, e: fencepost_fs::LocateError) -> fencepost::Error {
    match e {
        fencepost_fs::LocateError::Resource(e) => e,
        e => fencepost::Error::Backend(fencepost::BackendError::new(
            "list the stores",
            cwd.display(),
            std::io::Error::other(format!("for {}: {e}", resource.target())),
        )),
    }
}

/// The live claims of files and directories held in another store on `cwd`'s
/// path although the layout as it is now puts them in `chosen`, the store `status`
/// reads from `cwd` (the layout changed since they were made: rule 5 keeps them
/// there, or a store moved away and back left a claim in each): per store, its
/// path and those entries, nearest store first. Without them, `status` run in a
/// repository made since would show none of the claims on its files, and a claim
/// stranded in the other store would be hidden while it still turns claimers
/// away. Stores that cannot be read are skipped (they are not the one asked for).
pub fn kept_for(
    cwd: &Path,
    chosen: &Path,
) -> Result<Vec<(PathBuf, Vec<fencepost::StatusEntry>)>, String> {
    // Stores below `cwd` are not asked: one that exists is the one the layout
    // picks for the files below it.
    let identity = fencepost_fs::store_identity;
    let chosen_identity = identity(chosen);
    let others = fencepost_fs::stores_on_the_path(cwd)
        .into_iter()
        .filter(|store| identity(&store.path) != chosen_identity);
    let mut kept = Vec::new();
    for other in others {
        let Ok(backend) = fencepost_fs::FsStore::open_existing(&other.path) else {
            continue;
        };
        let Ok(entries) = Store::new(backend).status() else {
            continue;
        };
        let entries: Vec<_> = entries
            .into_iter()
            .filter(|entry| entry.live && kept_there(entry, cwd, chosen))
            .collect();
        if !entries.is_empty() {
            kept.push((other.path, entries));
        }
    }
    Ok(kept)
}

/// Whether rules 2 to 4 pick `chosen` for `entry`'s file or directory (an entry
/// of another store: the layout changed since it was claimed).
fn kept_there(entry: &fencepost::StatusEntry, cwd: &Path, chosen: &Path) -> bool {
    let resource = match entry.resource.split_once(':') {
        Some(("file", path)) => Resource::file(path),
        Some(("dir", path)) => Resource::dir(path),
        _ => return false,
    };
    fencepost_fs::locate_by_layout(Some(&resource), cwd).is_ok_and(|at| at.path == chosen)
}

//! The other stores a file's claims could be in. The store location rule reads the
//! layout around a file at each command, and the layout can change while a claim
//! is being made (a repository initialised, a `.fencepost` directory made). So a
//! claim of a file or directory, once it landed in the store the rule picked, asks
//! every other store on the file's path for a live claim in its way
//! (`fencepost::Store::conflict`) and gives its claim back if one answers: write
//! first, read second, so of two claims of one file made in two stores at once at
//! least one sees the other (docs/protocol.md §5, "Layout changes").

use std::path::{Path, PathBuf};

use fencepost::{AcquireOptions, Holder, Resource, Store};

/// The other stores on the paths of a command's resources, opened for reading.
#[derive(Default)]
pub struct Elsewhere {
    stores: Vec<(PathBuf, Store)>,
}

impl Elsewhere {
    /// The stores other than `chosen` (the directory the command's store is in)
    /// that the location rule could pick for any of `resources` under another
    /// layout, and that exist; none when `explicit` (`--store`) names the store or
    /// the resources are locks.
    pub fn open(
        explicit: Option<&Path>,
        resources: &[Resource],
        cwd: &Path,
        chosen: &Path,
    ) -> Result<Elsewhere, String> {
        let mut stores: Vec<(PathBuf, Store)> = Vec::new();
        for resource in resources {
            let others = fencepost_fs::other_stores(explicit, resource, cwd, chosen)
                .map_err(|e| format!("cannot choose a store for {}: {e}", resource.target()))?;
            for other in others {
                if stores.iter().any(|(path, _)| *path == other.path) {
                    continue;
                }
                // One that cannot be opened holds nothing this user could claim.
                if let Ok(backend) = fencepost_fs::FsStore::open_existing(&other.path) {
                    stores.push((other.path, Store::new(backend)));
                }
            }
        }
        Ok(Elsewhere { stores })
    }

    /// The first live claim in another store in the way of a claim of any of
    /// `resources` with `options`: the resource, and its holder with the store
    /// named in its owner (so the refusal says where the lease is).
    pub fn in_the_way(
        &self,
        resources: &[Resource],
        options: &AcquireOptions,
    ) -> fencepost::Result<Option<(Resource, Holder)>> {
        for (path, store) in &self.stores {
            for resource in resources {
                if let Some(mut holder) = store.conflict(resource, options)? {
                    holder.owner = format!(
                        "{} (in another store, {}: the layout around it changed since that claim)",
                        holder.owner,
                        path.display()
                    );
                    return Ok(Some((resource.clone(), holder)));
                }
            }
        }
        Ok(None)
    }
}

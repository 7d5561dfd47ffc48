//! One store for a name in every worktree of a repository. A lock's (or slot's)
//! name is scoped by its store, and the location rule reads the directories above
//! the working directory: a `.fencepost` directory made in one checkout only (the
//! main checkout's, where earlier versions put the store) gave agents in the main
//! checkout one store and agents in its linked worktrees another, two holders of
//! one lock (a breaker). So a lock's store is located from the same place in every
//! checkout of each repository around the working directory, and a disagreement is
//! refused ([`LocateError::WorktreesSplit`]) rather than claimed in one of them.
//!
//! A repository whose main checkout cannot be told from its git directory (a
//! separate git directory, a `.git` link) is seen whole from the main checkout,
//! which lists its linked worktrees: the main checkout refuses, so the name is
//! never held in two stores at once.

use std::ffi::OsString;
use std::fs;
use std::path::Path;

use super::{LocateError, StoreLocation, StoreScope, git, store_identity};

/// How a store is located from a directory (rules 2 to 4).
type Discover =
    dyn Fn(&Path, &dyn Fn(&str) -> Option<OsString>) -> Result<StoreLocation, LocateError>;

/// `Ok` when every checkout of the repository around `anchor` (the working
/// directory, resolved) locates, from the same place relative to its root, the
/// store `location` names, and, when that store is a marker above that
/// repository, every checkout of each repository further around (a
/// superproject's worktrees) does too; else the first checkout that does not, as
/// [`LocateError::WorktreesSplit`]. Checkouts whose store cannot be located are
/// passed over (their own commands report it).
///
/// Pinned by `cli/tests/store_location.rs` (`worktrees_*`).
pub(super) fn one_store_for_names(
    anchor: &Path,
    location: &StoreLocation,
    env: &dyn Fn(&str) -> Option<OsString>,
    discover: &Discover,
) -> Result<(), LocateError> {
    if location.scope == StoreScope::Explicit {
        return Ok(());
    }
    let here = store_identity(&location.path);
    let mut nearest: Option<&Path> = None;
    for root in anchor.ancestors() {
        if !git::marks_repository(root) {
            continue;
        }
        // A repository around the nearest one (a superproject) decides only
        // through a marker above the nearest's root, which joins the two: its
        // other worktrees' copies of the nearest are repositories of their own,
        // with names of their own.
        match nearest {
            None => nearest = Some(root),
            Some(inner) => {
                let joins = location.scope == StoreScope::Marker
                    && location
                        .path
                        .parent()
                        .is_some_and(|dir| inner != dir && inner.starts_with(dir));
                if !joins {
                    break;
                }
            }
        }
        // The nearest repository must be read: a marker above it would otherwise
        // hide a repository whose links are broken (its main checkout moved), and
        // nothing would be compared (a breaker: two holders). A superproject that
        // cannot be read is passed over.
        let common = match git::common_dir(root) {
            Ok(Some(common)) => common,
            Err(e) if nearest == Some(root) => return Err(e),
            _ => continue,
        };
        let Ok(relative) = anchor.strip_prefix(root) else {
            continue;
        };
        let root_identity = store_identity(root);
        for checkout in git::checkouts(&common) {
            if store_identity(&checkout) == root_identity {
                continue;
            }
            let place = match relative.as_os_str().is_empty() {
                true => checkout.clone(),
                false => checkout.join(relative),
            };
            // The same place may lie in a repository of its own there (a nested
            // repository, a submodule on that branch): names of its own, not ours
            // (a breaker: refused over a scratch repository in another worktree).
            if enters_another_repository(&checkout, &place) {
                continue;
            }
            let Ok(there) = discover(&place, env) else {
                continue;
            };
            // A checkout of this repository that reads as outside every repository
            // could not be read (another user's): it says nothing. One that can be
            // read (a `core.worktree` with no `.git` in it) is compared.
            if there.scope == StoreScope::User && fs::read_dir(&checkout).is_err() {
                continue;
            }
            if store_identity(&there.path) != here {
                // The advice names a marker store only when one of the two is one.
                let marker = [location, &there]
                    .into_iter()
                    .find(|store| store.scope == StoreScope::Marker);
                let hint = match marker {
                    Some(marker) => format!(
                        " (a .fencepost directory only some checkouts see, such as {}, can \
                         be removed once `fencepost --store {} status` shows nothing held)",
                        marker.path.display(),
                        marker.path.display()
                    ),
                    None => String::new(),
                };
                return Err(LocateError::WorktreesSplit {
                    here: location.path.clone(),
                    there: there.path,
                    worktree: place,
                    hint,
                });
            }
        }
    }
    Ok(())
}

/// Whether `place` (below `checkout`) lies in a repository other than
/// `checkout`'s: a directory between them, `place` included, that holds a `.git`
/// entry or is a git directory.
fn enters_another_repository(checkout: &Path, place: &Path) -> bool {
    place
        .ancestors()
        .take_while(|dir| *dir != checkout)
        .any(git::marks_repository)
}

//! Claims stay where they were made (`docs/format-v1.md`, "Store location", rule
//! 5): the location rule reads the layout around a file at each command, and the
//! layout can change under a held lease — a repository initialised inside the
//! checkout, a `.fencepost` directory made above or below. Every store numbers its
//! tokens from 1, so a file whose claims moved to a fresh store would get a second
//! holder there, with a token that passes next to the first holder's (found by a
//! breaker: two live holders of one file, both `check`s passing).
//!
//! So a file or directory is claimed, checked, renewed and released in the store
//! its claims were made in: when the store the rule picks holds no record touching
//! it ([`Resource::history_keys`]) and another store the rule could have picked
//! under an earlier layout does, that one is used.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use fencepost::{LeaseStore, Resource};

use super::{REPOSITORY_STORE_NAME, STORE_DIR_NAME, StoreLocation, StoreScope, git, sys};

/// Every store the location rule could pick for a resource anchored at `anchor`
/// under some layout of the directories above it: each `.fencepost` directory at
/// or above the anchor, each repository's store (its common git directory) whose
/// work tree or git directory contains it, then the per-user store; nearest first,
/// each once. Only stores that exist: one that does not holds no claim.
pub(super) fn stores_on_the_path(
    anchor: &Path,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Vec<StoreLocation> {
    let mut found: Vec<StoreLocation> = Vec::new();
    let mut push = |path: PathBuf, scope: StoreScope| {
        if path.is_dir() && !found.iter().any(|s| s.path == path) {
            found.push(StoreLocation { path, scope });
        }
    };
    for dir in anchor.ancestors() {
        push(dir.join(STORE_DIR_NAME), StoreScope::Marker);
        let repository = git::marks_repository(dir);
        // A repository whose `.git` cannot be followed holds no store we could
        // read; the rule reports it when it is the nearest.
        if repository && let Ok(Some(common)) = git::common_dir(dir) {
            push(common.join(REPOSITORY_STORE_NAME), StoreScope::Repository);
        }
    }
    if let Ok(dir) = sys::user_state_dir(env) {
        push(dir.join("fencepost"), StoreScope::User);
    }
    found
}

/// True when the store at `path` holds a record of any of `keys`. A store that
/// cannot be read counts as holding none: nothing could be claimed in it either.
fn holds_any(path: &Path, keys: &[fencepost::Key]) -> bool {
    let Ok(store) = crate::FsStore::open_existing(path) else {
        return false;
    };
    keys.iter()
        .any(|key| store.generations(key).is_ok_and(|g| !g.is_empty()))
}

/// `rule` (the store the location rule picked for `resource`), unless it holds no
/// record touching the resource and another store on the path does: then the
/// nearest such store, as [`StoreScope::Earlier`]. The resource's own series
/// ([`Resource::own_history_keys`]) decide first: a store holding its tokens wins
/// over one holding only claims around it, so its tokens keep increasing.
pub(super) fn follow(
    rule: StoreLocation,
    resource: Option<&Resource>,
    anchor: &Path,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> StoreLocation {
    let Some(resource) = resource else {
        return rule;
    };
    let (own, all) = match (resource.own_history_keys(), resource.history_keys()) {
        (Ok(own), Ok(all)) if !all.is_empty() => (own, all),
        _ => return rule,
    };
    let identity = super::store_identity;
    let rule_identity = identity(&rule.path);
    let others: Vec<StoreLocation> = stores_on_the_path(anchor, env)
        .into_iter()
        .filter(|store| store.path != rule.path && identity(&store.path) != rule_identity)
        .collect();
    // The common case: the rule's store is the only one there is.
    if others.is_empty() {
        return rule;
    }
    for keys in [&own, &all] {
        if holds_any(&rule.path, keys) {
            return rule;
        }
        if let Some(store) = others.iter().find(|store| holds_any(&store.path, keys)) {
            return StoreLocation {
                path: store.path.clone(),
                scope: StoreScope::Earlier,
            };
        }
    }
    rule
}

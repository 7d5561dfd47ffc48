//! The keys a path had before a symbolic link appeared on it.
//!
//! A file or subtree is keyed by its path resolved at the time of the claim
//! (`super::resolve`). When a name on that path later becomes a symbolic link — a
//! directory moved away and a link left in its place, a name claimed before it
//! existed then made a link — the same spelling resolves to another key, and a
//! second claimant gets that key's first token: the same number the first holder
//! has in its own series. A `check` of the bare token through the spelling then
//! passed for both (a breaker; docs/design-02-resource-identity.md, "A name that
//! becomes a link").
//!
//! For each symbolic link on the spelling, [`Resource::keys_before_links`] gives
//! the key the spelling had when that link was a plain name: the path up to the
//! link resolved, the rest appended as spelled. `check` reads them: a live tenure
//! there that is not the one it judges means the spelling names two claimed
//! files, and neither passes through it.

use std::path::{Component, Path, PathBuf};

use super::{Key, Resource, sys};

/// The most links on one spelling whose keys are read (each costs `check` one
/// listing): a deeper chain of links is not looked behind past this many.
const LINKS_LOOKED_BEHIND: usize = 8;

impl Resource {
    /// For a file or subtree, the keys its spelling (made absolute, `.` and `..`
    /// applied as written) would have if one of the symbolic links on it were a
    /// plain name instead — one key per link met, nearest the root first, at most
    /// `LINKS_LOOKED_BEHIND` (8) — leaving out `own`, the key it has now. Empty for a
    /// lock or slot, for a spelling with no link on it, and when the working
    /// directory is gone. Reads the filesystem (one `lstat` per component).
    ///
    /// [`Store::check`](crate::Store::check) fails a token while one of these keys
    /// holds another live tenure
    /// (`cli/tests/identity.rs::a_name_that_becomes_a_link_fences_checks_through_it`).
    pub fn keys_before_links(&self, own: &Key) -> Vec<Key> {
        let (namespace, path) = match self {
            Resource::File(path) => ("file", path),
            Resource::Dir(path) => ("dir", path),
            Resource::Lock(_) | Resource::Slot(..) => return Vec::new(),
        };
        let Ok(absolute) = std::path::absolute(path) else {
            return Vec::new();
        };
        // Links are looked for in the spelling as written: a `..` after a link
        // (`a/../f` with `a` now a link) is where the link changes what the
        // spelling names, so `..` is applied only after (a breaker: tidied first,
        // `a/../f` had no link to look behind).
        let mut keys = Vec::new();
        let mut prefix = PathBuf::new();
        let components: Vec<Component<'_>> = absolute.components().collect();
        for (at, component) in components.iter().enumerate() {
            prefix.push(component);
            if !matches!(component, Component::Normal(_))
                || !std::fs::symlink_metadata(&prefix).is_ok_and(|m| m.file_type().is_symlink())
            {
                continue;
            }
            // The link as a plain name: its directory resolved, the rest as spelled.
            let Some(Ok(above)) = prefix.parent().map(std::fs::canonicalize) else {
                continue;
            };
            let mut before = above;
            for rest in &components[at..] {
                before.push(rest);
            }
            let before = lexical(&before);
            let key = Key::derive(namespace, &sys::path_material(&before));
            if key != *own && !keys.contains(&key) {
                keys.push(key);
            }
            if keys.len() == LINKS_LOOKED_BEHIND {
                break;
            }
        }
        keys
    }
}

/// `path` with `.` dropped and `..` applied to the name before it, without asking
/// the filesystem.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// The key a spelling had before a directory on it became a link is among the
    /// keys looked behind; a spelling without links has none, and a lock none.
    #[test]
    fn the_key_before_a_directory_became_a_link_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        let file = Resource::file(root.join("d/new.rs"));
        let before = file.identity().unwrap().key;
        assert!(file.keys_before_links(&before).is_empty());
        std::fs::rename(root.join("d"), root.join("d2")).unwrap();
        std::os::unix::fs::symlink("d2", root.join("d")).unwrap();
        let now = file.identity().unwrap().key;
        assert_ne!(now, before);
        assert_eq!(file.keys_before_links(&now), vec![before]);
        let lock = Resource::lock("d");
        assert!(lock.keys_before_links(&now).is_empty());
        // A `..` after the link (a breaker: tidied before the look, `a/../f` had
        // no link in it).
        std::fs::create_dir(root.join("a")).unwrap();
        let climbed = Resource::file(root.join("a/../f"));
        let before = climbed.identity().unwrap().key;
        std::fs::rename(root.join("a"), root.join("a_old")).unwrap();
        std::fs::create_dir_all(root.join("deep/dir")).unwrap();
        std::os::unix::fs::symlink("deep/dir", root.join("a")).unwrap();
        let now = climbed.identity().unwrap().key;
        assert_ne!(now, before);
        assert_eq!(climbed.keys_before_links(&now), vec![before]);
    }
}

//! Path confinement: where a `write`, or a `file` claim, may point.
//!
//! Every check is made on the **resolved** location, never on the string: the path
//! is walked one component at a time from the (canonical) root, each existing
//! component is resolved through the operating system (so a symbolic link, to a
//! file or to a directory, is followed exactly as the kernel would follow it), and
//! components that do not exist yet are appended as written (`.` dropped, `..`
//! applied to what was resolved so far). Only then is the result compared with the
//! root, the store and the version-control metadata directories.

use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

use fencepost::Resource;

/// Why a path was refused. Each variant displays as one line naming the path.
#[derive(Debug)]
#[non_exhaustive]
pub enum Refusal {
    /// The path is empty (or only whitespace).
    Empty,
    /// The path is absolute (or, on Windows, has a drive or UNC prefix).
    Absolute(String),
    /// The resolved location lies outside the root.
    Escapes {
        /// The path as given.
        path: String,
        /// Where it resolved to.
        resolved: PathBuf,
    },
    /// The resolved location is the root directory itself.
    Root(String),
    /// The resolved location lies inside the lease store.
    IntoStore {
        /// The path as given.
        path: String,
        /// The store directory.
        store: PathBuf,
    },
    /// Writing the resolved location would make a directory a git directory (or
    /// write a git directory's `commondir`): the location rule would then put the
    /// lease store of every file below it elsewhere
    /// ([`fencepost_fs::git_dir_made_by_write`]).
    MakesRepository {
        /// The path as given.
        path: String,
        /// The directory that would become (or stop being) a git directory.
        dir: PathBuf,
    },
    /// The file has another name and holds a lease store record: a hard link to a
    /// record ([`fencepost_fs::store_record_linked_at`]); a write would change the
    /// record in the store.
    LinkedRecord(String),
    /// The resolved location lies in version-control metadata (`.git`, `.hg`,
    /// `.svn`, `.jj`, at any depth), which only the version-control tool writes.
    IntoVcs {
        /// The path as given.
        path: String,
        /// The metadata directory (or `.git` file) it lies in.
        metadata: PathBuf,
    },
    /// A component is a symbolic link whose target does not exist, so where it
    /// leads cannot be judged.
    DanglingLink {
        /// The path as given.
        path: String,
        /// The link.
        link: PathBuf,
    },
    /// On Windows: a component is a reserved device name (`CON`, `NUL.json`), which
    /// opens that device in every directory instead of a file
    /// ([`fencepost::reserved_device_name`]).
    Device {
        /// The path as given.
        path: String,
        /// The device it names.
        device: &'static str,
    },
    /// A component could not be resolved (a regular file used as a directory, a
    /// symbolic link loop, permission denied, a NUL byte).
    Unresolvable {
        /// The path as given.
        path: String,
        /// The operating system's reason.
        source: io::Error,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Empty => write!(f, "refused path: the path is empty"),
            Refusal::Absolute(path) => write!(
                f,
                "refused path {path:?}: absolute paths are refused; give a path relative to the server's root"
            ),
            Refusal::Escapes { path, resolved } => write!(
                f,
                "refused path {path:?}: it resolves to {} which is outside the server's root",
                resolved.display()
            ),
            Refusal::Root(path) => write!(
                f,
                "refused path {path:?}: it resolves to the root directory itself, not a file"
            ),
            Refusal::IntoStore { path, store } => write!(
                f,
                "refused path {path:?}: it lies in the lease store {} (a `.fencepost` directory is a store for the files around it), which only fencepost writes",
                store.display()
            ),
            Refusal::MakesRepository { path, dir } => write!(
                f,
                "refused path {path:?}: writing it would make {} a git directory (a HEAD file with objects/ and refs/ directories) or change its commondir, which moves the lease store of every file below it and splits their claims; nothing was written. Ask the human to set up a repository",
                dir.display()
            ),
            Refusal::LinkedRecord(path) => write!(
                f,
                "refused path {path:?}: it is another name (a hard link) of a lease record in a store, which only fencepost writes; a write would forge or end a claim. Nothing was written. Leave it alone, and ask the human to remove the link"
            ),
            Refusal::IntoVcs { path, metadata } => write!(
                f,
                "refused path {path:?}: it lies in version-control metadata {}, which only the version-control tool writes",
                metadata.display()
            ),
            Refusal::DanglingLink { path, link } => write!(
                f,
                "refused path {path:?}: {} is a symbolic link to a missing target",
                link.display()
            ),
            Refusal::Device { path, device } => write!(
                f,
                "refused path {path:?}: on Windows it names the device {device}, not a file; pick another name"
            ),
            Refusal::Unresolvable { path, source } => {
                write!(f, "refused path {path:?}: cannot resolve it: {source}")
            }
        }
    }
}

impl std::error::Error for Refusal {}

/// The root that file paths are confined to, and the store they must stay out of.
#[derive(Debug, Clone)]
pub struct Confinement {
    root: PathBuf,
    store: PathBuf,
}

impl Confinement {
    /// Confines paths to `root` and out of `store`. Both are canonicalized when they
    /// exist, so comparisons are made between resolved locations.
    ///
    /// # Errors
    ///
    /// When `root` cannot be canonicalized (it does not exist, or permission
    /// denied) or is not a directory.
    pub fn new(root: &Path, store: &Path) -> io::Result<Confinement> {
        let root = std::fs::canonicalize(root)?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", root.display()),
            ));
        }
        let store = std::fs::canonicalize(store)
            .or_else(|_| std::path::absolute(store))
            .unwrap_or_else(|_| store.to_path_buf());
        Ok(Confinement { root, store })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The store directory (canonical when it exists).
    pub fn store(&self) -> &Path {
        &self.store
    }

    /// [`Confinement::resolve`] for a write: also refused when writing the file
    /// would make a directory a git directory ([`Refusal::MakesRepository`]), and
    /// when the file is a hard link to a lease record ([`Refusal::LinkedRecord`]).
    ///
    /// # Errors
    ///
    /// As [`Confinement::resolve`], [`Refusal::MakesRepository`] and
    /// [`Refusal::LinkedRecord`].
    pub fn resolve_for_write(&self, relative: &str) -> Result<PathBuf, Refusal> {
        let resolved = self.resolve(relative)?;
        if fencepost_fs::store_record_linked_at(&resolved) {
            return Err(Refusal::LinkedRecord(relative.to_string()));
        }
        if let Some(dir) = fencepost_fs::git_dir_made_by_write(&resolved) {
            return Err(Refusal::MakesRepository {
                path: relative.to_string(),
                dir,
            });
        }
        Ok(resolved)
    }

    /// Resolves `relative` against the root and checks where it lands.
    ///
    /// Returns the resolved absolute path: inside the root, not the root itself, not
    /// in the store, with every existing component resolved through symbolic links.
    /// Nothing is created.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] naming the path and the reason.
    pub fn resolve(&self, relative: &str) -> Result<PathBuf, Refusal> {
        if relative.trim().is_empty() {
            return Err(Refusal::Empty);
        }
        let path = Path::new(relative);
        if path.is_absolute() || path.has_root() {
            return Err(Refusal::Absolute(relative.to_string()));
        }
        let mut resolved = self.root.clone();
        for component in path.components() {
            match component {
                Component::Prefix(_) | Component::RootDir => {
                    return Err(Refusal::Absolute(relative.to_string()));
                }
                Component::CurDir => {}
                // `resolved` is canonical up to here (or ends in components that do
                // not exist, hence are no links), so stepping up lexically is what
                // the kernel would do.
                Component::ParentDir => {
                    resolved.pop();
                }
                Component::Normal(name) => {
                    if cfg!(windows)
                        && let Some(device) =
                            name.to_str().and_then(fencepost::reserved_device_name)
                    {
                        return Err(Refusal::Device {
                            path: relative.to_string(),
                            device,
                        });
                    }
                    resolved.push(name);
                    match std::fs::canonicalize(&resolved) {
                        Ok(real) => resolved = real,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            if std::fs::symlink_metadata(&resolved).is_ok() {
                                return Err(Refusal::DanglingLink {
                                    path: relative.to_string(),
                                    link: resolved,
                                });
                            }
                            // Does not exist yet: kept as written.
                        }
                        Err(source) => {
                            return Err(Refusal::Unresolvable {
                                path: relative.to_string(),
                                source,
                            });
                        }
                    }
                }
            }
        }
        self.judge(relative, resolved)
    }

    /// Checks a resolved location against the root and the store.
    fn judge(&self, relative: &str, resolved: PathBuf) -> Result<PathBuf, Refusal> {
        if !resolved.starts_with(&self.root) {
            return Err(Refusal::Escapes {
                path: relative.to_string(),
                resolved,
            });
        }
        if resolved == self.root {
            return Err(Refusal::Root(relative.to_string()));
        }
        if starts_with_folded(&resolved, &self.store) {
            return Err(Refusal::IntoStore {
                path: relative.to_string(),
                store: self.store.clone(),
            });
        }
        // Any store the location rule would pick for this very path (a
        // `.fencepost` marker further down, a nested repository's store) is
        // fencepost's too.
        let located =
            fencepost_fs::locate_store(None, Some(&Resource::file(&resolved)), &self.root);
        if let Ok(location) = located {
            let store = std::fs::canonicalize(&location.path).unwrap_or(location.path);
            if starts_with_folded(&resolved, &store) {
                return Err(Refusal::IntoStore {
                    path: relative.to_string(),
                    store,
                });
            }
        }
        // And every other store a record could be written into: one at or above it
        // under another layout, a bare repository's inside the root, the per-user
        // store (the agent hooks refuse the same paths).
        if let Some(store) = fencepost_fs::store_holding(&resolved, None) {
            return Err(Refusal::IntoStore {
                path: relative.to_string(),
                store,
            });
        }
        let below_root = resolved.strip_prefix(&self.root).unwrap_or(&resolved);
        let mut metadata = self.root.clone();
        for component in below_root.components() {
            metadata.push(component);
            // A `.fencepost` directory is a lease store for everything below the
            // directory that holds it (the location rule): a write that made one
            // would move the store of those files, and split every lease on them
            // between the old store and the new (found by a breaker: a claim
            // through the CLI succeeded while the server still held the lock).
            if is_named(component.as_os_str(), &[fencepost_fs::STORE_DIR_NAME]) {
                return Err(Refusal::IntoStore {
                    path: relative.to_string(),
                    store: metadata,
                });
            }
            if is_vcs_metadata(component.as_os_str()) {
                return Err(Refusal::IntoVcs {
                    path: relative.to_string(),
                    metadata,
                });
            }
        }
        Ok(resolved)
    }

    /// `path` (inside the root) relative to the root, for messages and results:
    /// its components joined with `/` on every platform, the spelling a client
    /// sends, so a reply reads the same from a server on Windows (where the resolved
    /// path is spelt with `\`) as on Unix. Pinned by
    /// `relative_paths_are_spelt_with_forward_slashes` and, under Wine, by the
    /// server test `writes_inside_the_root_land_where_they_resolve`.
    pub fn relative(&self, path: &Path) -> String {
        let inside = path.strip_prefix(&self.root).unwrap_or(path);
        let mut spelt = String::new();
        for component in inside.components() {
            if !spelt.is_empty() {
                spelt.push('/');
            }
            spelt.push_str(&component.as_os_str().to_string_lossy());
        }
        spelt
    }
}

/// The names of version-control metadata directories (and git's `.git` file).
const VCS_METADATA: [&str; 4] = [".git", ".hg", ".svn", ".jj"];

/// True when `name` is, or on some filesystem may be, a version-control metadata
/// name: compared after [`fold`] (case-insensitive filesystems, `.GIT`, `.ſvn` on
/// APFS, `.g\u{200c}it` on HFS+), and ignoring what Windows drops or treats as a
/// stream (`.git.`, `.git `, `.git::$INDEX_ALLOCATION`). Refusing a harmless
/// look-alike costs nothing; letting `.GIT/config` through on a case-insensitive
/// volume breaks the repository.
fn is_vcs_metadata(name: &std::ffi::OsStr) -> bool {
    is_named(name, &VCS_METADATA)
}

/// True when `name` is, or on some filesystem may be, one of `names` (lower case):
/// compared as [`is_vcs_metadata`] compares.
fn is_named(name: &std::ffi::OsStr, names: &[&str]) -> bool {
    let name = fold(&name.to_string_lossy());
    let base = name.split(':').next().unwrap_or(&name);
    let base = base.trim_end_matches(['.', ' ']);
    names.contains(&base)
}

/// `name` as a case-insensitive filesystem may see it: each character through
/// Unicode upper then lower case (so `ſ` is `s`, `ı` is `i`, the Kelvin sign is
/// `k`, as APFS and NTFS fold them, where ASCII folding alone misses them), and
/// without the code points HFS+ ignores in names (the list git checks, CVE-2014-9390).
fn fold(name: &str) -> String {
    name.chars()
        .filter(|&c| {
            !matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
        })
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .collect()
}

/// `path.starts_with(prefix)`, comparing components after [`fold`]: the store
/// reached as `.FENCEPOST` (or `.fencepoſt`) on a case-insensitive filesystem is
/// still the store.
fn starts_with_folded(path: &Path, prefix: &Path) -> bool {
    let mut path = path.components();
    prefix.components().all(|want| {
        path.next().is_some_and(|have| {
            fold(&have.as_os_str().to_string_lossy()) == fold(&want.as_os_str().to_string_lossy())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Confinement) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(root.join(".fencepost/claims")).unwrap();
        let confinement = Confinement::new(&root, &root.join(".fencepost")).unwrap();
        (dir, confinement)
    }

    #[test]
    fn inside_paths_resolve() {
        let (_dir, c) = setup();
        let root = c.root().to_path_buf();
        assert_eq!(c.resolve("a.txt").unwrap(), root.join("a.txt"));
        assert_eq!(c.resolve("./sub/../b").unwrap(), root.join("b"));
        assert_eq!(c.resolve("new/dir/f").unwrap(), root.join("new/dir/f"));
        assert_eq!(c.resolve("new/../f").unwrap(), root.join("f"));
        assert_eq!(c.resolve("sub/").unwrap(), root.join("sub"));
    }

    #[test]
    fn relative_paths_are_spelt_with_forward_slashes() {
        // Issue 18: on Windows the server answered `deep\er\new.txt` for a write to
        // `deep/er/new.txt`. Built from components, so the platform's separator is
        // what the resolved path holds.
        let (_dir, c) = setup();
        let resolved = c.resolve("deep/er/new.txt").unwrap();
        assert_eq!(c.relative(&resolved), "deep/er/new.txt");
        let native = c.root().join("deep").join("er").join("new.txt");
        assert_eq!(c.relative(&native), "deep/er/new.txt");
        assert_eq!(
            c.relative(&c.resolve("./sub/../top.txt").unwrap()),
            "top.txt"
        );
    }

    #[test]
    fn escapes_are_refused() {
        let (_dir, c) = setup();
        for bad in [
            "",
            "  ",
            "../x",
            "sub/../../x",
            "new/../../x",
            "/etc/x",
            ".",
            "sub/..",
        ] {
            assert!(c.resolve(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(matches!(
            c.resolve(".fencepost/claims/x"),
            Err(Refusal::IntoStore { .. })
        ));
        assert!(matches!(
            c.resolve(".fencepost"),
            Err(Refusal::IntoStore { .. })
        ));
        assert!(matches!(
            c.resolve(".fencepo\u{17f}t/claims/x"),
            Err(Refusal::IntoStore { .. })
        ));
        assert!(matches!(
            c.resolve(".FencePost/claims/x"),
            Err(Refusal::IntoStore { .. })
        ));
    }

    #[test]
    fn version_control_metadata_is_refused_at_any_depth_and_case() {
        let (_dir, c) = setup();
        for bad in [
            ".git",
            ".git/config",
            ".GIT/config",
            "sub/.git/HEAD",
            "a/b/.Hg/store",
            ".svn/entries",
            ".jj/repo",
            "sub/../.git/x",
            ".git./config",
            ".git /config",
            ".git::$INDEX_ALLOCATION/config",
            // What APFS/NTFS fold to `.svn`, `.git`, `.jj`, and what HFS+ ignores.
            ".\u{17f}vn/entries",
            ".g\u{131}t/config",
            "sub/.\u{17f}VN",
            ".g\u{200c}it/config",
            ".\u{feff}hg/store",
        ] {
            assert!(
                matches!(c.resolve(bad), Err(Refusal::IntoVcs { .. })),
                "{bad:?} was not refused as metadata"
            );
        }
        for fine in [
            ".github/workflows/ci.yml",
            ".gitignore",
            "git/x",
            "sub/.gitmodules",
        ] {
            assert!(c.resolve(fine).is_ok(), "{fine:?} was refused");
        }
    }

    /// A `.fencepost` directory anywhere below the root is a lease store for the
    /// files around it: a write that created one moved their store and split the
    /// leases on them (breaker). Refused in any case and depth, existing or not.
    #[test]
    fn a_store_marker_directory_is_refused_at_any_depth_and_case() {
        let (_dir, c) = setup();
        for bad in [
            ".fencepost/README",
            "src/.fencepost/notes",
            "a/b/.FencePost/x",
            ".fencepost./x",
            ".fencepost",
        ] {
            assert!(
                matches!(c.resolve(bad), Err(Refusal::IntoStore { .. })),
                "{bad:?} was not refused as a store: {:?}",
                c.resolve(bad)
            );
        }
        for fine in [".fencepostrc", "fencepost/x", "src/.fencepost-notes"] {
            assert!(c.resolve(fine).is_ok(), "{fine:?} was refused");
        }
    }

    /// A bare repository inside the root is a repository to the location rule:
    /// its store (made inside it) is refused, its own files are not; and a write
    /// that would make a directory a git directory is refused as a write (a
    /// breaker, through the agent hooks, which refuse the same).
    #[test]
    fn a_bare_repositorys_store_and_a_write_making_a_git_directory_are_refused() {
        let (_dir, c) = setup();
        let bare = c.root().join("fx.git");
        std::fs::create_dir_all(bare.join("objects")).unwrap();
        std::fs::create_dir_all(bare.join("refs")).unwrap();
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert!(
            matches!(
                c.resolve("fx.git/fencepost/claims/lock-x/g00000002.json"),
                Err(Refusal::IntoStore { .. })
            ),
            "{:?}",
            c.resolve("fx.git/fencepost/claims/lock-x/g00000002.json")
        );
        assert!(c.resolve_for_write("fx.git/description").is_ok());
        let x = c.root().join("x");
        std::fs::create_dir_all(x.join("objects")).unwrap();
        std::fs::write(x.join("HEAD"), "").unwrap();
        assert!(matches!(
            c.resolve_for_write("x/refs/heads/main"),
            Err(Refusal::MakesRepository { .. })
        ));
        // A claim of it writes nothing.
        assert!(c.resolve("x/refs/heads/main").is_ok());
        assert!(c.resolve_for_write("x/objects/ab").is_ok());
    }

    /// A hard link to a lease record, made beside the store, is refused as a
    /// write (a breaker found one editable through the agent hooks, which refuse
    /// the same); a copy of it is a plain file.
    #[test]
    fn a_hard_link_to_a_record_is_refused_as_a_write() {
        let (_dir, c) = setup();
        let store = fencepost::Store::new(fencepost_fs::FsStore::open(c.store()).unwrap());
        let _lease = store
            .acquire(
                &fencepost::Resource::lock("linked"),
                &fencepost::AcquireOptions::new(60_000),
            )
            .unwrap();
        let claims = c.store().join("claims");
        let key_dir = std::fs::read_dir(&claims)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with("lock-"))
            .unwrap()
            .path();
        let record = std::fs::read_dir(&key_dir)
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .path();
        std::fs::hard_link(&record, c.root().join("notes.json")).unwrap();
        std::fs::copy(&record, c.root().join("copy.json")).unwrap();
        assert!(matches!(
            c.resolve_for_write("notes.json"),
            Err(Refusal::LinkedRecord(_))
        ));
        assert!(
            c.resolve("notes.json").is_ok(),
            "claiming it writes nothing"
        );
        assert!(c.resolve_for_write("copy.json").is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_judged_by_where_they_lead() {
        let (dir, c) = setup();
        let root = c.root().to_path_buf();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), root.join("link")).unwrap();
        std::os::unix::fs::symlink(root.join("sub"), root.join("in")).unwrap();
        std::os::unix::fs::symlink(root.join("nowhere"), root.join("dangling")).unwrap();
        assert!(matches!(c.resolve("out/x"), Err(Refusal::Escapes { .. })));
        assert!(matches!(c.resolve("link"), Err(Refusal::Escapes { .. })));
        assert!(matches!(
            c.resolve("dangling"),
            Err(Refusal::DanglingLink { .. })
        ));
        // A link inside the root resolves to its target, and `..` after it steps up
        // from the target, as the kernel does.
        assert_eq!(c.resolve("in/f").unwrap(), root.join("sub/f"));
        assert_eq!(c.resolve("out/../root/f").unwrap(), root.join("f"));
    }
}

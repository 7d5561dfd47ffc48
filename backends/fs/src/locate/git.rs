//! The common git directory of a repository, read from the files git itself keeps,
//! without running git (git may be absent, slow, or a different version).
//!
//! - A main checkout has a `.git` directory: that is the git directory, and the
//!   common one.
//! - A linked worktree (`git worktree add`) and a submodule have a `.git` *file*
//!   holding `gitdir: <path>` (relative to the directory holding the file). That
//!   git directory may hold a `commondir` file (relative to it): a linked worktree's
//!   names the main repository's `.git`; a submodule's git directory usually has
//!   none and is its own common directory.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::{LocateError, sys};

/// Longest `.git` or `commondir` file read (git writes a line of one path).
const LINK_FILE_LIMIT: u64 = 64 * 1024;

/// The common git directory of the repository whose work tree contains `anchor`
/// (the nearest `.git` entry at or above it), resolved; `None` outside every
/// repository.
pub(super) fn common_dir(anchor: &Path) -> Result<Option<PathBuf>, LocateError> {
    // As git discovers a repository: at each level, a `.git` entry, or the
    // directory itself being a git directory (a bare repository, or the inside of
    // a `.git`), so an agent working in a bare repository reaches the store its
    // worktrees use.
    let Some((work_tree, found)) = anchor.ancestors().find_map(|dir| {
        if fs::symlink_metadata(dir.join(".git")).is_ok() {
            Some((dir, Found::DotGit))
        } else if is_git_dir(dir) {
            Some((dir, Found::GitDir))
        } else {
            None
        }
    }) else {
        return Ok(None);
    };
    let dot_git = work_tree.join(".git");
    let fail = |path: &Path, reason: String| LocateError::Repository {
        work_tree: work_tree.to_path_buf(),
        path: path.to_path_buf(),
        reason,
    };
    let git_dir = match found {
        Found::GitDir => work_tree.to_path_buf(),
        Found::DotGit => {
            let metadata = fs::metadata(&dot_git).map_err(|e| fail(&dot_git, format!("({e})")))?;
            if metadata.is_dir() {
                dot_git.clone()
            } else {
                let text = read_link_file(&dot_git).map_err(|reason| fail(&dot_git, reason))?;
                let Some(target) = text.strip_prefix("gitdir:").map(str::trim) else {
                    return Err(fail(
                        &dot_git,
                        "is a file that does not start with `gitdir:`".into(),
                    ));
                };
                work_tree.join(target)
            }
        }
    };
    if !git_dir.is_dir() {
        return Err(fail(&git_dir, "is not a directory".into()));
    }
    // What a `.git` file names must be a git directory, as git requires: a file
    // saying `gitdir: .` must not turn a work tree into a store's home (a
    // breaker: the store was made in the work tree).
    if matches!(found, Found::DotGit) && !dot_git.is_dir() && !is_git_dir(&git_dir) {
        return Err(fail(
            &git_dir,
            "is not a git directory (no HEAD file with objects/ and refs/ directories)".into(),
        ));
    }
    let commondir_file = git_dir.join("commondir");
    let common = if fs::symlink_metadata(&commondir_file).is_ok() {
        let text =
            read_link_file(&commondir_file).map_err(|reason| fail(&commondir_file, reason))?;
        git_dir.join(text.trim())
    } else {
        git_dir
    };
    match fs::canonicalize(&common) {
        Ok(resolved) if resolved.is_dir() => Ok(Some(sys::plain(resolved))),
        Ok(_) => Err(fail(&common, "is not a directory".into())),
        Err(e) => Err(fail(&common, format!("cannot be resolved ({e})"))),
    }
}

/// The checkouts of the repository whose common git directory is `common`
/// (resolved): each live linked worktree git lists in `worktrees/*/gitdir`, and
/// its main checkout when it can be told ([`main_work_tree`]); none when it has no
/// linked worktree (the main checkout alone cannot disagree with itself). Names
/// of one repository are claimed from any of them.
pub(super) fn checkouts(common: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    let Ok(entries) = fs::read_dir(common.join("worktrees")) else {
        return found;
    };
    for entry in entries.flatten() {
        let admin = entry.path();
        // `gitdir` names the worktree's `.git` file (relative to this directory
        // with `worktree.useRelativePaths`).
        let Ok(text) = read_link_file(&admin.join("gitdir")) else {
            continue;
        };
        let dot_git = admin.join(text.trim());
        // Git's own test of a live entry: the worktree's `.git` file leads back
        // here. A stale entry (the worktree deleted or moved without `git worktree
        // prune`, its path reused by another repository) is no checkout of ours
        // (a breaker: refused over another repository's store).
        let leads_back = read_link_file(&dot_git)
            .ok()
            .and_then(|text| {
                let target = text.strip_prefix("gitdir:")?.trim().to_string();
                let base = dot_git.parent()?;
                fs::canonicalize(base.join(target)).ok()
            })
            .is_some_and(|target| fs::canonicalize(&admin).is_ok_and(|a| a == target));
        if leads_back
            && let Some(work_tree) = dot_git.parent()
            && let Ok(resolved) = fs::canonicalize(work_tree)
        {
            found.push(sys::plain(resolved));
        }
    }
    // Without a linked worktree the main checkout is the only one: nothing to
    // compare, and its `config` is not read on every lock command.
    if !found.is_empty() {
        found.extend(main_work_tree(common));
    }
    found
}

/// The main checkout of the repository whose common git directory is `common`
/// (resolved): the directory its `core.worktree` names (a submodule's), else the
/// directory holding it as its own `.git` directory, unless the repository is
/// bare (`core.bare`). `None` when it cannot be told: a git
/// directory kept away from its checkout (`--separate-git-dir`, a `.git` link)
/// names no checkout, as `git worktree list` shows; such a main checkout finds its
/// linked worktrees, which cannot find it.
fn main_work_tree(common: &Path) -> Option<PathBuf> {
    let (bare, worktree) = core_settings(common);
    if bare == Some(true) {
        return None;
    }
    if let Some(worktree) = worktree {
        return fs::canonicalize(common.join(worktree))
            .ok()
            .filter(|dir| dir.is_dir());
    }
    // Not through a link: a `.git` link resolves to a directory named `.git`
    // elsewhere, whose parent is no checkout (a breaker).
    let parent = common.parent()?;
    let holds_it = common.file_name()? == ".git"
        && fs::symlink_metadata(parent.join(".git")).is_ok_and(|m| m.is_dir());
    holds_it.then(|| sys::plain(parent.to_path_buf()))
}

/// `core.bare` and `core.worktree` from the `config` file of git directory
/// `dir`, read as git writes them (`[core]`, then `key = value` lines; keys and
/// section names in any case; a value in double quotes). Includes and other
/// sections' spellings of `core` are not followed: git writes both keys plainly.
fn core_settings(dir: &Path) -> (Option<bool>, Option<String>) {
    let mut text = String::new();
    let read = fs::File::open(dir.join("config"))
        .and_then(|file| file.take(LINK_FILE_LIMIT).read_to_string(&mut text));
    if read.is_err() {
        return (None, None);
    }
    let (mut in_core, mut bare, mut worktree) = (false, None, None);
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_core = line
                .trim_start_matches('[')
                .trim_end_matches(']')
                .trim()
                .eq_ignore_ascii_case("core");
            continue;
        }
        let Some((key, value)) = line.split_once('=').filter(|_| in_core) else {
            continue;
        };
        let value = value.trim().trim_matches('"').to_string();
        match key.trim().to_ascii_lowercase().as_str() {
            "bare" => {
                bare = Some(matches!(
                    value.to_ascii_lowercase().as_str(),
                    "true" | "yes" | "on" | "1"
                ))
            }
            "worktree" => worktree = Some(value),
            _ => {}
        }
    }
    (bare, worktree)
}

/// Whether git finds a repository at `dir`: a `.git` entry there (a directory, or
/// a file naming one), or `dir` being a git directory itself.
pub(super) fn marks_repository(dir: &Path) -> bool {
    fs::symlink_metadata(dir.join(".git")).is_ok() || is_git_dir(dir)
}

/// What marked a repository at some level of the anchor's ancestors.
enum Found {
    /// A `.git` entry (directory, or file naming the git directory).
    DotGit,
    /// The directory is itself a git directory.
    GitDir,
}

/// True when `dir` is a git directory, by git's own test: a `HEAD` file, and
/// `objects/` and `refs/` directories (here or, for a linked worktree's git
/// directory, in the one its `commondir` names).
pub(super) fn is_git_dir(dir: &Path) -> bool {
    if !dir.join("HEAD").is_file() {
        return false;
    }
    let common = if dir.join("commondir").is_file() {
        match read_link_file(&dir.join("commondir")) {
            Ok(text) => dir.join(text.trim()),
            Err(_) => return false,
        }
    } else {
        dir.to_path_buf()
    };
    common.join("objects").is_dir() && common.join("refs").is_dir()
}

/// The first line of a small text file git wrote, or why it cannot be read.
fn read_link_file(path: &Path) -> Result<String, String> {
    let mut text = String::new();
    fs::File::open(path)
        .and_then(|file| file.take(LINK_FILE_LIMIT).read_to_string(&mut text))
        .map_err(|e| format!("cannot be read ({e})"))?;
    Ok(text.lines().next().unwrap_or_default().to_string())
}

//! Store location (issue 12: one resource, one store): with real git repositories —
//! linked worktrees, a submodule added from a local path, a nested repository — and
//! real processes, every working directory and every spelling of a resource lands
//! in one store, and commands that only read create nothing.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::util::{Scratch, handle_of, json_of, one_line_stderr};

/// Runs real git in `dir` with no user or system configuration, failing the test
/// when git fails.
fn git(dir: &Path, args: &[&str]) {
    let output = crate::util::scrubbed(std::process::Command::new("git"))
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .args([
            "-c",
            "user.name=fencepost tests",
            "-c",
            "user.email=tests@fencepost.invalid",
            "-c",
            "init.defaultBranch=main",
            // `git submodule add` from a local path (CVE-2022-39253 hardening).
            "-c",
            "protocol.file.allow=always",
        ])
        .args(args)
        .output()
        .expect("git is required for these tests (apt-get install git)");
    assert!(
        output.status.success(),
        "git {args:?} in {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `git status --porcelain` (untracked files included).
fn porcelain(dir: &Path) -> String {
    let output = crate::util::scrubbed(std::process::Command::new("git"))
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(["status", "--porcelain", "--untracked-files=all"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// A new repository at `dir` with one committed file per name in `files`.
fn repository(dir: &Path, files: &[&str]) {
    fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    for name in files {
        let path = dir.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, format!("{name}\n")).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", "initial"]);
}

/// The scratch directory, resolved (the store location rule resolves anchors), with
/// nothing above it that the rule would find first.
fn top(s: &Scratch) -> PathBuf {
    let top = fs::canonicalize(s.path()).unwrap();
    for dir in top.ancestors() {
        assert!(
            !dir.join(".fencepost").is_dir() && fs::symlink_metadata(dir.join(".git")).is_err(),
            "{} holds a .fencepost or .git; these tests need a clean temp dir",
            dir.display()
        );
    }
    top
}

fn run(s: &Scratch, cwd: &Path, args: &[&str]) -> Output {
    s.bare_cmd(cwd).args(args).output().unwrap()
}

/// `claim` from `cwd`; asserts the exit code, returns the output.
fn claim(s: &Scratch, cwd: &Path, target: &[&str], code: i32) -> Output {
    let output = s.bare_cmd(cwd).arg("claim").args(target).output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(code),
        "claim {target:?} from {}: {output:?}",
        cwd.display()
    );
    output
}

/// The store a `claim --json` reports.
fn store_of(output: &Output) -> String {
    json_of(output)["store"].as_str().unwrap().to_string()
}

/// Labels listed by `status --json` from `cwd`.
fn status_labels(s: &Scratch, cwd: &Path) -> Vec<String> {
    let output = run(s, cwd, &["status", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let mut labels: Vec<String> = json_of(&output)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["label"].as_str().unwrap().to_string())
        .collect();
    // A file that exists has two keys (its path and its file id), one label.
    labels.sort();
    labels.dedup();
    labels
}

/// A linked worktree made inside the main checkout shares its store, so a subtree
/// claim above it covers its files and is not refused as split (a breaker: `claim
/// --dir .` was refused with advice that did not help); a nested repository there
/// still is.
#[test]
fn a_worktree_inside_the_checkout_does_not_split_a_subtree() {
    let s = Scratch::new();
    let main = top(&s).join("main");
    repository(&main, &["a.txt"]);
    git(&main, &["worktree", "add", "-q", "wt", "-b", "inside"]);
    claim(&s, &main, &["--dir", "."], 0);
    // The worktree's file, claimed from inside the worktree, is covered.
    claim(&s, &main.join("wt"), &["--file", "a.txt"], 3);
    fs::create_dir_all(main.join("pkg")).unwrap();
    git(&main.join("pkg"), &["init", "-q"]);
    let refused = claim(&s, &main, &["--dir", "pkg/.."], 1);
    assert!(
        one_line_stderr(&refused).contains("nested repository"),
        "{refused:?}"
    );
}

#[test]
fn linked_worktrees_share_the_repository_store() {
    let s = Scratch::new();
    let top = top(&s);
    let main = top.join("main");
    repository(&main, &["a.txt", "src/lib.rs"]);
    git(&main, &["worktree", "add", "-q", "../wt1", "-b", "one"]);
    git(&main, &["worktree", "add", "-q", "../wt2", "-b", "two"]);
    let (wt1, wt2) = (top.join("wt1"), top.join("wt2"));
    let store = main.join(".git/fencepost");

    // A lock claimed in one checkout is held in every other, from any directory.
    let first = claim(&s, &main, &["--lock", "db:migrations", "--json"], 0);
    assert_eq!(store_of(&first), store.to_str().unwrap());
    claim(&s, &wt1, &["--lock", "db:migrations"], 3);
    claim(&s, &wt2.join("src"), &["--lock", "DB:Migrations"], 3);

    // Files: one store, but each worktree holds its own files. wt1's a.txt and
    // main's a.txt are different files, so both claims succeed; wt1's a.txt
    // spelled from the main checkout is the same file, and is held.
    let wt1_file = claim(&s, &wt1, &["--file", "a.txt", "--json"], 0);
    assert_eq!(store_of(&wt1_file), store.to_str().unwrap());
    claim(&s, &main, &["--file", "a.txt"], 0);
    claim(&s, &main, &["--file", "../wt1/a.txt"], 3);
    claim(
        &s,
        &wt2,
        &["--file", wt1.join("a.txt").to_str().unwrap()],
        3,
    );

    // `status` from any worktree reads the one store, and names it.
    let labels = status_labels(&s, &wt2);
    let expected = [
        "db:migrations".to_string(),
        main.join("a.txt").display().to_string(),
        wt1.join("a.txt").display().to_string(),
    ];
    let mut expected = expected.to_vec();
    expected.sort();
    assert_eq!(labels, expected);
    assert_eq!(labels, status_labels(&s, &main));
    assert_eq!(labels, status_labels(&s, &wt1.join("src")));
    let text = run(&s, &wt2, &["status"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains(&format!("store: {} (", store.display())),
        "status does not name its store:\n{text}"
    );
    // Nothing was written into any work tree.
    for tree in [&main, &wt1, &wt2] {
        assert_eq!(porcelain(tree), "", "{}", tree.display());
        assert!(!tree.join(".fencepost").exists());
    }
}

/// Every spelling in `spellings` (a working directory and a path) claims one file:
/// for every ordered pair, the first claim wins and the second is refused.
fn all_spellings_contend(s: &Scratch, spellings: &[(PathBuf, String)]) {
    for (i, (first_cwd, first)) in spellings.iter().enumerate() {
        for (j, (second_cwd, second)) in spellings.iter().enumerate() {
            if i == j {
                continue;
            }
            let won = claim(s, first_cwd, &["--file", first], 0);
            let refused = claim(s, second_cwd, &["--file", second], 3);
            assert!(
                String::from_utf8_lossy(&refused.stderr).contains("held"),
                "{refused:?}"
            );
            let handle = handle_of(&won);
            let released = s
                .bare_cmd(first_cwd)
                .args(["release", "--file", first, &handle])
                .output()
                .unwrap();
            assert_eq!(released.status.code(), Some(0), "{released:?}");
        }
    }
}

/// `top/super`, a repository with a submodule `sub` (a clone of `top/upstream`,
/// which holds `shared.txt`), committed.
fn superproject(top: &Path) -> PathBuf {
    let upstream = top.join("upstream");
    repository(&upstream, &["shared.txt"]);
    let outer = top.join("super");
    repository(&outer, &["README"]);
    git(
        &outer,
        &["submodule", "add", "-q", upstream.to_str().unwrap(), "sub"],
    );
    git(&outer, &["commit", "-q", "-m", "add sub"]);
    outer
}

#[test]
fn every_spelling_of_a_submodule_file_contends() {
    let s = Scratch::new();
    let top = top(&s);
    let outer = superproject(&top);
    let sub = outer.join("sub");
    assert!(sub.join(".git").is_file(), "a submodule has a .git file");
    fs::create_dir(sub.join("deeper")).unwrap();

    let spellings = [
        (outer.clone(), "sub/shared.txt".to_string()),
        (outer.clone(), "./sub/deeper/../shared.txt".to_string()),
        (sub.clone(), "shared.txt".to_string()),
        (sub.join("deeper"), "../shared.txt".to_string()),
        (top.clone(), sub.join("shared.txt").display().to_string()),
    ];
    all_spellings_contend(&s, &spellings);
    // The submodule's own git directory holds its store: nothing in either work
    // tree, nothing in the superproject's store.
    let inner_store = outer.join(".git/modules/sub/fencepost");
    let output = claim(&s, &outer, &["--file", "sub/shared.txt", "--json"], 0);
    assert_eq!(store_of(&output), inner_store.to_str().unwrap());
    assert!(!outer.join(".git/fencepost").exists());
    assert_eq!(porcelain(&outer), "");
    assert_eq!(porcelain(&sub), "");
}

#[test]
fn every_spelling_of_a_nested_repository_file_contends() {
    let s = Scratch::new();
    let top = top(&s);
    let outer = top.join("outer");
    repository(&outer, &["README"]);
    fs::write(outer.join(".gitignore"), "nested/\nlink\n").unwrap();
    let nested = outer.join("nested");
    repository(&nested, &["shared.txt"]);
    #[cfg(unix)]
    std::os::unix::fs::symlink(&nested, outer.join("link")).unwrap();

    let mut spellings = vec![
        (outer.clone(), "nested/shared.txt".to_string()),
        (nested.clone(), "shared.txt".to_string()),
        (
            nested.clone(),
            nested.join("shared.txt").display().to_string(),
        ),
    ];
    if cfg!(unix) {
        spellings.push((outer.clone(), "link/shared.txt".to_string()));
    }
    all_spellings_contend(&s, &spellings);
    let output = claim(&s, &outer, &["--file", "nested/shared.txt", "--json"], 0);
    assert_eq!(
        store_of(&output),
        nested.join(".git/fencepost").to_str().unwrap()
    );
}

#[test]
fn a_subtree_over_a_nested_repository_is_refused_not_split() {
    let s = Scratch::new();
    let top = top(&s);
    let outer = top.join("outer");
    repository(&outer, &["src/a.rs"]);
    let nested = outer.join("nested");
    repository(&nested, &["n.txt"]);
    // The subtree would be in outer's store and nested/n.txt in nested's: refused,
    // in one line that names the repository and what to do.
    for (cwd, dir) in [(&outer, "."), (&top, "outer")] {
        let output = claim(&s, cwd, &["--dir", dir], 1);
        let line = one_line_stderr(&output);
        assert!(
            line.contains(&format!("cannot cover {}", nested.display()))
                && line.contains("nested repository")
                && line.contains("--store"),
            "{line}"
        );
    }
    // `run` checks before it starts anything.
    let output = run(&s, &outer, &["run", "--dir", ".", "--", "true"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    // Nothing was claimed: the file below is free, and so is the subtree of src/.
    claim(&s, &outer, &["--file", "nested/n.txt"], 0);
    claim(&s, &outer, &["--dir", "src"], 0);
    // Inside the nested repository a subtree covers its files as ever.
    claim(&s, &nested, &["--dir", "."], 3);
    // One store named for both: no split, so no refusal for a split; the claim
    // still meets the subtree of src/ held in the repository's store (a claim in
    // a named store asks the stores on its path).
    let one = top.join("one-store");
    let output = s
        .bare_cmd(&outer)
        .args(["--store", one.to_str().unwrap(), "claim", "--dir", "."])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let line = one_line_stderr(&output);
    assert!(
        line.contains("src") && line.contains("in another store"),
        "{line}"
    );
    // A .fencepost store below a subtree splits it the same way.
    let marked = top.join("marked");
    fs::create_dir_all(marked.join(".fencepost")).unwrap();
    fs::create_dir_all(marked.join("part/.fencepost")).unwrap();
    let line = one_line_stderr(&claim(&s, &marked, &["--dir", "."], 1));
    assert!(line.contains(".fencepost store directory"), "{line}");
}

/// `claim` of a lock from `cwd` that the worktrees do not agree on: exit 1, one
/// line naming the two stores.
fn refused_as_split(s: &Scratch, cwd: &Path, args: &[&str]) {
    let output = run(s, cwd, args);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{args:?} from {}: {output:?}",
        cwd.display()
    );
    let said = one_line_stderr(&output);
    assert!(said.contains("locate different stores for locks"), "{said}");
    assert!(said.contains("status` shows nothing held"), "{said}");
}

/// A `.fencepost` directory in the main checkout only (where earlier versions put
/// the store) gave the main checkout's locks one store and its linked worktrees'
/// another: a lock claimed in each, token 1 twice (a breaker). The worktrees'
/// stores are compared for every lock command, and a disagreement is refused from
/// every side, naming the stores; `status` still reads. Made the same everywhere
/// (a marker above every worktree, or none), the lock is one again.
#[test]
fn worktrees_that_locate_different_stores_refuse_locks() {
    let s = Scratch::new();
    let top = top(&s);
    let main = top.join("main");
    repository(&main, &["sub/a.txt"]);
    git(&main, &["worktree", "add", "-q", "../wt", "-b", "wt"]);
    let wt = top.join("wt");
    fs::create_dir(main.join(".fencepost")).unwrap();
    refused_as_split(&s, &main, &["claim", "--lock", "deploy"]);
    refused_as_split(&s, &wt.join("sub"), &["claim", "--lock", "deploy"]);
    refused_as_split(
        &s,
        &wt,
        &["run", "--lock", "deploy", "--", "sh", "-c", "touch ran"],
    );
    assert!(!wt.join("ran").exists(), "run's command ran");
    assert_eq!(run(&s, &wt, &["status"]).status.code(), Some(0));
    // A worktree's files are its own resources: claimed as before.
    claim(&s, &wt, &["--file", "sub/a.txt"], 0);

    // Removed: the repository's store again, one for every worktree.
    fs::remove_dir(main.join(".fencepost")).unwrap();
    claim(&s, &main, &["--lock", "deploy"], 0);
    claim(&s, &wt, &["--lock", "deploy"], 3);
    // A marker above every worktree is found from each.
    fs::create_dir(top.join(".fencepost")).unwrap();
    claim(&s, &wt, &["--lock", "tag"], 0);
    claim(&s, &main.join("sub"), &["--lock", "tag"], 3);
    // One inside a linked worktree only splits them again.
    fs::create_dir(wt.join(".fencepost")).unwrap();
    refused_as_split(&s, &main, &["claim", "--lock", "tag2"]);
    refused_as_split(&s, &wt, &["claim", "--lock", "tag2"]);
}

/// Only live checkouts are compared, and only where the same place is still this
/// repository's: a stale worktree entry whose path another repository reuses, a
/// worktree deleted and its directory made again, and a repository nested in
/// another worktree are no disagreement (a breaker: each was refused, with advice
/// to remove another repository's store or the per-user store).
#[test]
fn worktrees_compared_are_live_and_stay_in_the_repository() {
    let s = Scratch::new();
    let top = top(&s);
    let main = top.join("main");
    repository(&main, &["sub/a.txt"]);
    let other = top.join("other");
    repository(&other, &["g"]);
    fs::create_dir(top.join("agents")).unwrap();
    git(
        &main,
        &["worktree", "add", "-q", "../agents/task1", "-b", "t1"],
    );
    fs::remove_dir_all(top.join("agents/task1")).unwrap();
    git(
        &other,
        &["worktree", "add", "-q", "../agents/task1", "-b", "t1"],
    );
    git(&main, &["worktree", "add", "-q", "../wt", "-b", "wt"]);
    fs::remove_dir_all(top.join("wt")).unwrap();
    fs::create_dir(top.join("wt")).unwrap();
    git(&main, &["worktree", "add", "-q", "../wt2", "-b", "wt2"]);
    repository(&top.join("wt2/sub"), &[]);
    claim(&s, &main, &["--lock", "deploy"], 0);
    claim(&s, &main.join("sub"), &["--lock", "deploy"], 3);
}

/// A worktree whose main checkout moved (no `git worktree repair`) cannot be
/// compared; under a marker above it, its lock commands are refused with the
/// repository's error instead of claiming unseen (a breaker: the moved main
/// checkout and the worktree each held the lock, token 1).
#[test]
fn worktrees_whose_repository_cannot_be_read_refuse_locks() {
    let s = Scratch::new();
    let top = top(&s);
    fs::create_dir_all(top.join("p/.fencepost")).unwrap();
    fs::create_dir(top.join("q")).unwrap();
    let app = top.join("p/app");
    repository(&app, &["a.txt"]);
    git(&app, &["worktree", "add", "-q", "../wt", "-b", "wt"]);
    claim(&s, &top.join("p/wt"), &["--lock", "before"], 0);
    fs::rename(&app, top.join("q/app")).unwrap();
    claim(&s, &top.join("q/app"), &["--lock", "db"], 0);
    let output = run(&s, &top.join("p/wt"), &["claim", "--lock", "db"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(one_line_stderr(&output).contains("repair"), "{output:?}");
}

/// A submodule is a repository of its own inside each worktree of its
/// superproject (`super/sub` and `superwt/sub` have names of their own, README).
/// A marker in the superproject's main checkout splits the superproject's own
/// checkouts (refused at `super`), joins `super/sub` to it, and leaves
/// `superwt/sub` its own names. A submodule's own linked worktree is compared with
/// the submodule's checkout (`core.worktree`).
#[test]
fn worktrees_of_a_superproject_compare_their_submodules() {
    let s = Scratch::new();
    let top = top(&s);
    let outer = superproject(&top);
    git(&outer, &["worktree", "add", "-q", "../superwt", "-b", "wt"]);
    let superwt = top.join("superwt");
    git(&superwt, &["submodule", "update", "-q", "--init"]);
    assert!(superwt.join("sub/.git").is_file());
    // Without a marker, each submodule checkout is a repository of its own.
    claim(&s, &outer.join("sub"), &["--lock", "deploy"], 0);
    claim(&s, &superwt.join("sub"), &["--lock", "deploy"], 0);
    fs::create_dir(outer.join(".fencepost")).unwrap();
    refused_as_split(&s, &outer, &["claim", "--lock", "tag"]);
    claim(&s, &outer.join("sub"), &["--lock", "tag"], 0);
    claim(&s, &superwt.join("sub"), &["--lock", "tag"], 0);
    fs::remove_dir_all(outer.join(".fencepost")).unwrap();

    // The submodule's own linked worktree, with a marker in the submodule only.
    let sub = outer.join("sub");
    git(
        &sub,
        &["worktree", "add", "-q", "../../subwt", "-b", "subwt"],
    );
    fs::create_dir(sub.join(".fencepost")).unwrap();
    refused_as_split(&s, &sub, &["claim", "--lock", "x"]);
    refused_as_split(&s, &top.join("subwt"), &["claim", "--lock", "x"]);
}

/// A bare repository named `.git` has no main checkout (`core.bare`), though its
/// parent looks like one (a breaker: the parent was taken for one). Its worktrees
/// are compared with each other: a marker inside one of them splits them.
#[test]
fn worktrees_of_a_bare_repository_are_compared_with_each_other() {
    let s = Scratch::new();
    let top = top(&s);
    let upstream = top.join("upstream");
    repository(&upstream, &["a.txt"]);
    let x = top.join("x");
    fs::create_dir(&x).unwrap();
    git(
        &top,
        &[
            "clone",
            "-q",
            "--bare",
            upstream.to_str().unwrap(),
            "x/.git",
        ],
    );
    let bare = x.join(".git");
    git(&bare, &["worktree", "add", "-q", "../a", "-b", "a"]);
    git(&bare, &["worktree", "add", "-q", "../b", "-b", "b"]);
    let output = claim(&s, &x.join("a"), &["--lock", "deploy", "--json"], 0);
    assert_eq!(store_of(&output), bare.join("fencepost").to_str().unwrap());
    claim(&s, &x.join("b"), &["--lock", "deploy"], 3);
    fs::create_dir(x.join("b/.fencepost")).unwrap();
    refused_as_split(&s, &x.join("a"), &["claim", "--lock", "tag"]);
    refused_as_split(&s, &x.join("b"), &["claim", "--lock", "tag"]);
}

/// A main checkout whose git directory is kept elsewhere (`--separate-git-dir`)
/// cannot be found from its linked worktrees, but it finds them: with a marker in
/// the main checkout, the main checkout refuses, so the lock is never held in two
/// stores.
#[test]
fn worktrees_of_a_separate_git_dir_are_compared_from_the_main_checkout() {
    let s = Scratch::new();
    let top = top(&s);
    let main = top.join("main");
    fs::create_dir(&main).unwrap();
    let gd = top.join("gd");
    git(
        &main,
        &["init", "-q", "--separate-git-dir", gd.to_str().unwrap()],
    );
    git(&main, &["commit", "-q", "--allow-empty", "-m", "init"]);
    git(&main, &["worktree", "add", "-q", "../wt", "-b", "wt"]);
    fs::create_dir(main.join(".fencepost")).unwrap();
    refused_as_split(&s, &main, &["claim", "--lock", "deploy"]);
}

#[test]
fn a_marker_above_two_repositories_shares_their_locks() {
    let s = Scratch::new();
    let top = top(&s);
    let (one, two) = (top.join("one"), top.join("two"));
    repository(&one, &[]);
    repository(&two, &[]);
    // Without a marker: two repositories, two lock namespaces.
    claim(&s, &one, &["--lock", "release-tag"], 0);
    claim(&s, &two, &["--lock", "release-tag"], 0);
    // A deliberate .fencepost above both makes one store for both.
    fs::create_dir(top.join(".fencepost")).unwrap();
    let output = claim(&s, &one, &["--lock", "port:8080", "--json"], 0);
    assert_eq!(store_of(&output), top.join(".fencepost").to_str().unwrap());
    claim(&s, &two, &["--lock", "port:8080"], 3);
}

#[test]
fn outside_any_repository_one_user_store_serves_every_directory() {
    let s = Scratch::new();
    let top = top(&s);
    let (left, right) = (top.join("left"), top.join("right/deep"));
    fs::create_dir_all(&left).unwrap();
    fs::create_dir_all(&right).unwrap();
    fs::create_dir_all(top.join("shared")).unwrap();
    let user_store = s.user_state().join("fencepost");

    let output = claim(&s, &left, &["--file", "../shared/f.txt", "--json"], 0);
    assert_eq!(store_of(&output), user_store.to_str().unwrap());
    claim(
        &s,
        &right,
        &["--file", top.join("shared/f.txt").to_str().unwrap()],
        3,
    );
    claim(&s, &left, &["--lock", "x"], 0);
    claim(&s, &right, &["--lock", "x"], 3);
    assert!(!left.join(".fencepost").exists() && !right.join(".fencepost").exists());

    // No HOME and no XDG_STATE_HOME: a clear error, and no store anywhere (not in
    // the working directory, not under `/`).
    let fresh = top.join("fresh");
    fs::create_dir(&fresh).unwrap();
    let under_root = [
        Path::new("/.local/state/fencepost"),
        Path::new("/fencepost"),
        Path::new("/.fencepost"),
    ];
    let existed: Vec<bool> = under_root.iter().map(|p| p.exists()).collect();
    for args in [&["claim", "--lock", "y"][..], &["status"]] {
        let output = s
            .bare_cmd(&fresh)
            .env_remove("HOME")
            .env_remove("XDG_STATE_HOME")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        let stderr = one_line_stderr(&output);
        assert!(
            stderr.contains("HOME") && stderr.contains("--store"),
            "{stderr}"
        );
        assert_eq!(fs::read_dir(&fresh).unwrap().count(), 0);
        let exist: Vec<bool> = under_root.iter().map(|p| p.exists()).collect();
        assert_eq!(exist, existed, "a store appeared under / ({under_root:?})");
    }
}

/// Every path under `dir` with the bytes of each file: what `find` and `cat` see.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            let metadata = fs::symlink_metadata(&path).unwrap();
            if metadata.is_dir() {
                pending.push(path.clone());
                out.insert(path, None);
            } else {
                out.insert(path.clone(), Some(fs::read(&path).unwrap_or_default()));
            }
        }
    }
    out
}

#[test]
fn commands_that_only_read_create_nothing() {
    let s = Scratch::new();
    let top = top(&s);
    let plain = top.join("plain");
    fs::create_dir(&plain).unwrap();
    let repo = top.join("repo");
    repository(&repo, &["a.txt"]);
    let read_only: [&[&str]; 6] = [
        &["status"],
        &["status", "--json"],
        &["check", "--lock", "x", "1"],
        &["check", "--file", "a.txt", "1"],
        &["renew", "--lock", "x", "1"],
        &["release", "--file", "new/b.txt", "1"],
    ];
    for cwd in [&plain, &repo] {
        let before = snapshot(&top);
        for args in read_only {
            let output = run(&s, cwd, args);
            assert!(
                matches!(output.status.code(), Some(0 | 3)),
                "{args:?}: {output:?}"
            );
        }
        assert_eq!(
            before,
            snapshot(&top),
            "a read-only command wrote under {}",
            top.display()
        );
    }
    // `status` names the store it read, and says it does not exist yet.
    let output = run(&s, &repo, &["status"]);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(
        stdout,
        format!(
            "no claims in {} (it does not exist yet; the first claim creates it)\n",
            repo.join(".git/fencepost").display()
        )
    );

    // A named store that does not exist: an empty store, named, and not created.
    let missing = top.join("nonexistent/x");
    let output = run(
        &s,
        &plain,
        &["--store", missing.to_str().unwrap(), "status"],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stdout).starts_with(&format!(
            "no claims in {} (it does not exist yet",
            missing.display()
        )),
        "{output:?}"
    );
    assert!(!top.join("nonexistent").exists());
}

#[test]
fn a_store_in_a_work_tree_is_never_seen_by_git() {
    let s = Scratch::new();
    let top = top(&s);
    let repo = top.join("repo");
    repository(&repo, &["a.txt"]);

    // The default: the store is in the git directory; the work tree is untouched.
    claim(&s, &repo, &["--file", "a.txt"], 0);
    claim(&s, &repo, &["--lock", "x"], 0);
    assert!(repo.join(".git/fencepost/claims").is_dir());
    assert_eq!(porcelain(&repo), "");

    // A named store inside the work tree is created with a .gitignore of `*`.
    let named = repo.join("tmp/leases");
    let output = run(
        &s,
        &repo,
        &["--store", "tmp/leases", "claim", "--lock", "y"],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(fs::read_to_string(named.join(".gitignore")).unwrap(), "*\n");
    assert_eq!(porcelain(&repo), "");

    // A legacy .fencepost at the work tree root keeps working (rule 2) and is
    // ignored from its first claim on.
    fs::create_dir(repo.join(".fencepost")).unwrap();
    let output = claim(&s, &repo.join("."), &["--lock", "z", "--json"], 0);
    assert_eq!(store_of(&output), repo.join(".fencepost").to_str().unwrap());
    assert_eq!(
        fs::read_to_string(repo.join(".fencepost/.gitignore")).unwrap(),
        "*\n"
    );
    assert_eq!(porcelain(&repo), "");
}

/// A store named like a URL other than `etcd://` (a slash missing, another
/// service's) is refused, from `--store` and `FENCEPOST_STORE`, and nothing is
/// created: before, `etcd:/127.0.0.1:2379/x` became a directory of that name in
/// the work tree, hidden from git, and the claim succeeded there (a new user).
#[test]
fn a_store_named_like_a_url_is_refused_and_nothing_is_made() {
    let s = Scratch::new();
    let top = top(&s);
    let repo = top.join("repo");
    repository(&repo, &[]);
    for url in ["etcd:/127.0.0.1:2379/x", "http://x"] {
        let output = run(&s, &repo, &["--store", url, "claim", "--lock", "a"]);
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("reads as a URL") && stderr.contains("etcd://"),
            "{stderr}"
        );
        let output = s
            .bare_cmd(&repo)
            .env("FENCEPOST_STORE", url)
            .args(["claim", "--lock", "a"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
    }
    assert_eq!(porcelain(&repo), "");
    let made: Vec<_> = fs::read_dir(&repo)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(made, vec![std::ffi::OsString::from(".git")]);
}

#[cfg(unix)]
#[test]
fn a_store_path_that_is_not_utf8_is_refused_never_split() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let s = Scratch::new();
    let top = top(&s);
    let bad = top.join(OsStr::from_bytes(b"st\xffre"));
    // Named, by flag or environment: exit 1 before anything is claimed or run.
    let marker = top.join("child-ran");
    let script = format!("touch {}", marker.display());
    for named_by_env in [false, true] {
        let mut cmd = s.bare_cmd(&top);
        if named_by_env {
            cmd.env("FENCEPOST_STORE", &bad);
        } else {
            cmd.arg("--store").arg(&bad);
        }
        let output = cmd
            .args(["run", "--lock", "x", "--", "sh", "-c", &script])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        assert!(one_line_stderr(&output).contains("not valid UTF-8"));
        assert!(!marker.exists(), "the child ran");
        assert!(!bad.exists(), "the store was created");
    }
    // Located: a repository whose path is not UTF-8.
    repository(&bad, &["a.txt"]);
    for args in [
        &["claim", "--lock", "x"][..],
        &["run", "--file", "a.txt", "--", "sh", "-c", &script],
    ] {
        let output = run(&s, &bad, args);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        assert!(one_line_stderr(&output).contains("not valid UTF-8"));
    }
    assert!(!marker.exists(), "the child ran");
    assert!(!bad.join(".git/fencepost").exists());
}

#[cfg(unix)]
#[test]
fn run_hands_its_child_the_same_store() {
    // A store path that is UTF-8 but not ASCII reaches the child exactly: the
    // child's own claim meets its parent's lease.
    let s = Scratch::new();
    let top = top(&s);
    let repo = top.join("dépôt ✓");
    repository(&repo, &["a.txt"]);
    let store = repo.join(".git/fencepost");
    let script =
        r#"printf '%s' "$FENCEPOST_STORE" > seen; "$FP" claim --lock db; echo "rc=$?" >> seen"#;
    let output = run(
        &s,
        &repo,
        &["run", "--lock", "db", "--", "sh", "-c", script],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let seen = fs::read_to_string(repo.join("seen")).unwrap();
    assert_eq!(seen, format!("{}rc=3\n", store.display()));
    // A child that drops FENCEPOST_STORE and moves into a linked worktree locates
    // the same store on its own.
    git(&repo, &["worktree", "add", "-q", "../wt", "-b", "wt"]);
    let script = r#"cd ../wt && env -u FENCEPOST_STORE "$FP" claim --lock db; echo "rc=$?" > ../seen-from-wt"#;
    let output = run(
        &s,
        &repo,
        &["run", "--lock", "db", "--", "sh", "-c", script],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        fs::read_to_string(top.join("seen-from-wt")).unwrap(),
        "rc=3\n"
    );
}

/// The README's fresh-user walk-through, run as written: each line of the block in
/// a shell, in a fresh repository, with the exit code its comment promises.
#[test]
fn the_readme_walk_through_works_as_written() {
    let readme = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let start = readme
        .find("A fresh user, in a repository with a linked worktree:")
        .expect("the walk-through is in the README");
    let block = &readme[start..];
    let block = &block[block.find("```sh\n").unwrap() + 6..];
    let block = &block[..block.find("```").unwrap()];

    let s = Scratch::new();
    let top = top(&s);
    let repo = top.join("repo");
    repository(&repo, &["a.txt"]);
    let bin_dir = crate::util::bin().parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let mut cwd = repo.clone();
    let mut ran = 0;
    for line in block.lines() {
        let (command, comment) = line.split_once('#').unwrap_or((line, ""));
        let command = command.trim();
        if let Some(dir) = command.strip_prefix("cd ") {
            cwd = fs::canonicalize(cwd.join(dir)).unwrap();
            continue;
        }
        let expected = comment
            .split("exit ")
            .nth(1)
            .and_then(|rest| rest.chars().next())
            .and_then(|c| c.to_digit(10))
            .unwrap_or(0) as i32;
        let output = crate::util::scrubbed(std::process::Command::new("sh"))
            .args(["-c", command])
            .current_dir(&cwd)
            .env("PATH", &path)
            .env("XDG_STATE_HOME", s.user_state())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env_remove("FENCEPOST_STORE")
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(expected),
            "{command}: {output:?}"
        );
        // What the comment quotes is what the command prints: a handle, or the
        // held message with its `…` parts filled in.
        if comment.contains("prints a lease handle") {
            let stdout = String::from_utf8_lossy(&output.stdout);
            let (token, secret) = stdout.trim().split_once('.').expect("TOKEN.SECRET");
            assert!(
                token.parse::<u64>().is_ok() && secret.len() == 32,
                "{stdout}"
            );
        }
        if let Some(quoted) = comment.split_once("exit 3: ").map(|(_, q)| q) {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let mut rest = &stderr[..];
            for part in quoted.split('…').map(str::trim).filter(|p| !p.is_empty()) {
                let at = rest
                    .find(part)
                    .unwrap_or_else(|| panic!("{part:?} in {stderr}"));
                rest = &rest[at + part.len()..];
            }
        }
        if command == "fencepost status" {
            let stdout = String::from_utf8_lossy(&output.stdout);
            let last = stdout.lines().last().unwrap_or_default();
            assert!(
                last.starts_with(&format!("store: {}", repo.join(".git/fencepost").display())),
                "{stdout}"
            );
        }
        ran += 1;
    }
    assert_eq!(ran, 4, "the walk-through changed; update this test");
}

/// A bare repository and its linked worktrees are one repository: an agent whose
/// working directory is the bare repository itself (git treats it as one) reaches
/// the store its worktrees use, not the per-user store. (Found by breaking: it was
/// split, both claims got token 1.)
#[test]
fn a_bare_repository_and_its_worktrees_share_one_store() {
    let s = Scratch::new();
    let top = top(&s);
    repository(&top.join("origin"), &["a.txt"]);
    git(&top, &["clone", "-q", "--bare", "origin", "bare.git"]);
    let bare = top.join("bare.git");
    git(&bare, &["worktree", "add", "-q", "../wt"]);
    let wt = top.join("wt");

    let first = claim(&s, &wt, &["--lock", "db:migrations", "--json"], 0);
    assert_eq!(store_of(&first), bare.join("fencepost").to_str().unwrap());
    let refused = claim(&s, &bare, &["--lock", "db:migrations"], 3);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("held by"),
        "{refused:?}"
    );
    // The worktree's file, claimed from inside the bare repository, is the one the
    // worktree's agent claims.
    claim(&s, &wt, &["--file", "a.txt"], 0);
    claim(&s, &bare, &["--file", "../wt/a.txt"], 3);
    assert_eq!(status_labels(&s, &bare), status_labels(&s, &wt));
}

/// The layout around a held file changes — a repository initialised inside the
/// checkout, a `.fencepost` directory made below or above — and every store numbers
/// its tokens from 1. A breaker found a second holder of the file in the fresh
/// store, token 1, both `check`s passing, and the first holder's renew and release
/// failing as "a handle of another resource?". Now claims stay in the store they
/// were made in (rule 5), and a claim that landed elsewhere asks the other stores
/// on the file's path before it stands.
mod layout_changes {
    use super::*;

    /// A claim's token, handle and store.
    type Claim = (u64, String, String);

    /// `claim --json --owner OWNER` from `cwd`: (token, handle, store).
    fn claimed(s: &Scratch, cwd: &Path, target: &[&str], owner: &str) -> Claim {
        let mut args = target.to_vec();
        args.extend(["--json", "--owner", owner]);
        let output = claim(s, cwd, &args, 0);
        let json = json_of(&output);
        (
            json["token"].as_u64().unwrap(),
            json["handle"].as_str().unwrap().to_string(),
            store_of(&output),
        )
    }

    /// Asserts that a claim of `target` from `cwd` is refused as held by `owner`.
    fn refused_by(s: &Scratch, cwd: &Path, target: &[&str], owner: &str) {
        let output = claim(s, cwd, target, 3);
        let message = one_line_stderr(&output);
        assert!(message.contains(owner), "{target:?}: {message}");
    }

    /// The first holder's lease works on, whatever the working directory: check,
    /// renew and release by the file's own path.
    fn holder_carries_on(s: &Scratch, cwd: &Path, target: &[&str], token: u64, handle: &str) {
        let token = token.to_string();
        for command in [
            vec!["check", target[0], target[1], &token],
            vec!["renew", target[0], target[1], handle],
            vec!["release", target[0], target[1], handle],
        ] {
            let output = run(s, cwd, &command);
            assert_eq!(output.status.code(), Some(0), "{command:?}: {output:?}");
        }
    }

    #[test]
    fn a_repository_made_inside_after_a_claim_keeps_the_claim_where_it_was_made() {
        let s = Scratch::new();
        let main = top(&s).join("main");
        repository(&main, &["sub/a.txt"]);
        let (token, handle, store) = claimed(&s, &main, &["--file", "sub/a.txt"], "alice");
        git(&main.join("sub"), &["init", "-q"]);
        // From inside the new repository and from the old one's root alike.
        refused_by(&s, &main.join("sub"), &["--file", "a.txt"], "alice");
        refused_by(&s, &main, &["--file", "sub/a.txt"], "alice");
        holder_carries_on(&s, &main.join("sub"), &["--file", "a.txt"], token, &handle);
        // Its next claim continues the same series: a higher token, the same store.
        let (next, _, next_store) = claimed(&s, &main.join("sub"), &["--file", "a.txt"], "bob");
        assert!(next > token, "token {next} after {token}");
        assert_eq!(next_store, store);
        // A file the old store never saw belongs to the new repository.
        fs::write(main.join("sub/b.txt"), "b\n").unwrap();
        let (_, _, fresh) = claimed(&s, &main.join("sub"), &["--file", "b.txt"], "bob");
        assert_ne!(fresh, store);
    }

    /// `claim` from `cwd` in the background (stderr piped).
    fn claim_in_background(s: &Scratch, cwd: &Path, args: &[&str]) -> crate::util::Background {
        let mut cmd = crate::util::scrubbed(std::process::Command::new(crate::util::bin()));
        cmd.current_dir(cwd)
            .env("XDG_STATE_HOME", s.user_state())
            .env("LOCALAPPDATA", s.user_state())
            .arg("claim")
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        crate::util::Background::spawn(&mut cmd)
    }

    /// Waits until a subtree claimer waits in the repository's store (its
    /// writer's intent, `want-`, is there).
    fn someone_waits(main: &Path) {
        let claims = main.join(".git/fencepost/claims");
        crate::util::wait_until(
            "the claimer waits",
            std::time::Duration::from_secs(20),
            || {
                fs::read_dir(&claims).is_ok_and(|entries| {
                    entries
                        .flatten()
                        .any(|e| e.file_name().to_string_lossy().starts_with("want-"))
                })
            },
        );
    }

    /// A repository made below a directory while a subtree claim of it waits: the
    /// subtree claim, once it lands, asks the stores below it as they are then
    /// (not as they were before it waited), meets the claim of a file there, and
    /// gives back (a breaker: both held).
    #[test]
    fn a_store_made_below_while_a_subtree_claim_waits_is_asked_when_it_lands() {
        let s = Scratch::new();
        let main = top(&s).join("main");
        repository(&main, &["d/g.txt", "d/x/f.txt"]);
        let (_, x_handle, _) = claimed(&s, &main, &["--file", "d/g.txt"], "xavier");
        let mut waiter = claim_in_background(
            &s,
            &main,
            &["--dir", "d", "--wait", "6000", "--owner", "p1"],
        );
        someone_waits(&main);
        git(&main.join("d/x"), &["init", "-q"]);
        let (_, _, store) = claimed(&s, &main.join("d/x"), &["--file", "f.txt"], "p2");
        assert!(store.contains("d/x/.git"), "{store}");
        let output = run(&s, &main, &["release", "--file", "d/g.txt", &x_handle]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let output = waiter.finish();
        assert_eq!(
            output.status.code(),
            Some(3),
            "p1 must not hold d beside p2: {output:?}"
        );
        let message = String::from_utf8_lossy(&output.stderr);
        assert!(
            message.contains("p2") && message.contains("in another store"),
            "{message}"
        );
    }

    /// What the location rule takes for a store below a directory, the subtree
    /// check takes too (a breaker: a `.fencepost` link, and a bare repository, below
    /// a subtree each let a file there be held beside the subtree claim).
    #[cfg(unix)]
    #[test]
    fn a_linked_marker_or_a_bare_repository_below_a_subtree_splits_it() {
        let s = Scratch::new();
        let main = top(&s).join("main");
        repository(&main, &["d/x/f.txt", "e/notes.txt"]);
        let shared = top(&s).join("shared");
        fs::create_dir(&shared).unwrap();
        std::os::unix::fs::symlink(&shared, main.join("d/x/.fencepost")).unwrap();
        claimed(&s, &main, &["--file", "d/x/f.txt"], "alice");
        let output = claim(&s, &main, &["--dir", "d"], 1);
        assert!(
            one_line_stderr(&output).contains("cannot cover"),
            "{output:?}"
        );
        git(&main.join("e"), &["init", "-q", "--bare", "b.git"]);
        fs::write(main.join("e/b.git/notes.txt"), "n\n").unwrap();
        let output = claim(&s, &main, &["--dir", "e"], 1);
        assert!(
            one_line_stderr(&output).contains("cannot cover"),
            "{output:?}"
        );
    }

    /// A `.fencepost` link to a store that is also on the path (the per-user
    /// store) is one store, not two: a claim does not meet its own claim "in
    /// another store" (a breaker: every claim of the file refused, naming itself).
    #[cfg(unix)]
    #[test]
    fn a_store_reached_under_two_names_is_one_store() {
        let s = Scratch::new();
        let project = top(&s).join("project");
        fs::create_dir_all(&project).unwrap();
        fs::write(project.join("f.txt"), "f\n").unwrap();
        claimed(&s, &project, &["--lock", "warm"], "warm");
        let user_store = s.user_state().join("fencepost");
        assert!(user_store.is_dir());
        std::os::unix::fs::symlink(&user_store, project.join(".fencepost")).unwrap();
        let (token, handle, _) = claimed(&s, &project, &["--file", "f.txt"], "alice");
        holder_carries_on(&s, &project, &["--file", "f.txt"], token, &handle);
    }

    /// A file's next token never falls: a store that holds the file's own series
    /// keeps its claims, even when a new store nearer to it holds claims around it
    /// (a breaker: a claim of a sibling directory and of the parent in a new
    /// `.fencepost` pulled the file's next claim there, token 14 -> 1).
    #[test]
    fn a_claim_around_a_file_in_a_new_store_does_not_restart_its_tokens() {
        let s = Scratch::new();
        let main = top(&s).join("main");
        repository(&main, &["a/b/f.txt", "a/b2/g.txt"]);
        let mut last = 0;
        for _ in 0..3 {
            let (token, handle, _) = claimed(&s, &main, &["--file", "a/b/f.txt"], "alice");
            last = token;
            run(&s, &main, &["release", "--file", "a/b/f.txt", &handle]);
        }
        fs::create_dir(main.join("a/.fencepost")).unwrap();
        for dir in ["a/b2", "a"] {
            let (_, handle, store) = claimed(&s, &main, &["--dir", dir], "bob");
            assert!(store.ends_with("a/.fencepost"), "{dir}: {store}");
            run(&s, &main, &["release", "--dir", dir, &handle]);
        }
        let (token, _, store) = claimed(&s, &main, &["--file", "a/b/f.txt"], "carol");
        assert!(token > last, "token {token} after {last} ({store})");
        assert!(store.ends_with(".git/fencepost"), "{store}");
    }

    /// A shared claim is history too: a reader's lease on a file stays in the
    /// store it was made in when a store is made nearer the file, so its renew and
    /// release work and a writer is refused naming the reader (a
    /// breaker: "never been claimed", a false "released", and advice to break in
    /// the wrong store).
    #[test]
    fn a_shared_claim_keeps_its_store_after_a_layout_change() {
        let s = Scratch::new();
        let main = top(&s).join("main");
        repository(&main, &["sub/f.txt"]);
        let output = claim(
            &s,
            &main,
            &[
                "--file",
                "sub/f.txt",
                "--shared",
                "--ttl",
                "120000",
                "--owner",
                "reader",
            ],
            0,
        );
        let handle = handle_of(&output);
        fs::create_dir(main.join("sub/.fencepost")).unwrap();
        let output = claim(
            &s,
            &main.join("sub"),
            &["--file", "f.txt", "--owner", "writer"],
            3,
        );
        let message = one_line_stderr(&output);
        assert!(
            message.contains("reader") && message.contains(".git/fencepost"),
            "{message}"
        );
        for command in [
            vec!["renew", "--file", "sub/f.txt", &handle],
            vec!["release", "--file", "sub/f.txt", &handle],
        ] {
            let output = run(&s, &main, &command);
            assert_eq!(output.status.code(), Some(0), "{command:?}: {output:?}");
        }
    }

    /// A claim made in a store named by `FENCEPOST_STORE` — as `run` hands its
    /// child — still asks the other stores on the file's path (a breaker: a `run`
    /// child claimed a file in the repository's store while its holder held it in
    /// the per-user store, from before `git init`; both held token 1).
    #[test]
    fn a_claim_in_a_named_store_meets_a_claim_in_another_store_on_the_path() {
        let s = Scratch::new();
        let project = top(&s).join("project");
        fs::create_dir_all(&project).unwrap();
        fs::write(project.join("b.txt"), "b\n").unwrap();
        claimed(&s, &project, &["--file", "b.txt"], "first");
        git(&project, &["init", "-q"]);
        let output = s
            .bare_cmd(&project)
            .env("FENCEPOST_STORE", project.join(".git/fencepost"))
            .args(["claim", "--file", "b.txt", "--owner", "second"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3), "{output:?}");
        let message = one_line_stderr(&output);
        assert!(
            message.contains("first") && message.contains("in another store"),
            "{message}"
        );
    }

    /// A `.fencepost` directory made above a nested repository whose subtree is
    /// held: a subtree claim above it, made in the marker's store, asks the nested
    /// repository's store too (the held claim stays there, rule 5), so it is
    /// refused (a breaker: both subtree claims held, both `check`s passed).
    #[test]
    fn a_marker_made_above_a_held_nested_subtree_does_not_give_it_a_second_holder() {
        let s = Scratch::new();
        let main = top(&s).join("main");
        repository(&main, &["d/x/r/a.txt"]);
        git(&main.join("d/x/r"), &["init", "-q"]);
        claimed(&s, &main, &["--dir", "d/x/r"], "alice");
        fs::create_dir_all(main.join(".fencepost")).unwrap();
        refused_by(&s, &main, &["--dir", "d"], "alice");
    }

    /// A repository `main` with a `.fencepost` directory, whose `a.txt` "one"
    /// claims in the marker's store; then, the marker moved away, "two" claims it
    /// in the repository's store; then the marker is moved back, stranding "two"'s
    /// claim. `earlier`: a claim made and released in the marker's store first, so
    /// "one"'s token is above "two"'s. Returns `main` and each claim (token,
    /// handle, store).
    fn stranded(s: &Scratch, earlier: bool) -> (PathBuf, Claim, Claim) {
        let main = top(s).join("main");
        repository(&main, &["a.txt"]);
        let marker = main.join(".fencepost");
        fs::create_dir_all(&marker).unwrap();
        let file = ["--file", "a.txt"];
        if earlier {
            let (_, first, _) = claimed(s, &main, &file, "zed");
            let released = run(s, &main, &["release", "--file", "a.txt", &first]);
            assert_eq!(released.status.code(), Some(0), "{released:?}");
        }
        let one = claimed(s, &main, &file, "one");
        let away = top(s).join("away");
        fs::rename(&marker, &away).unwrap();
        let two = claimed(s, &main, &file, "two");
        fs::rename(&away, &marker).unwrap();
        (main, one, two)
    }

    /// A holder tied to its process (`claim --hold`) of a nested repository's
    /// subtree, in that repository's store, SIGKILLed; then a `.fencepost` made
    /// above: a subtree claim over it, made in the marker's store and asking the
    /// nested store, takes over the dead holder at once, as a claim in the dead
    /// holder's own store would, instead of waiting out its ttl, and the dead
    /// holder's token no longer passes `check` there (a breaker: the waiter waited
    /// the whole ttl while `status` said the next claim takes over at once).
    #[test]
    fn a_killed_holder_in_another_store_is_taken_over_at_once() {
        let s = Scratch::new();
        let main = top(&s).join("main");
        repository(&main, &["d/x/r/a.txt"]);
        git(&main.join("d/x/r"), &["init", "-q"]);
        let mut hold = std::process::Command::new(crate::util::bin());
        hold.current_dir(&main)
            .env("XDG_STATE_HOME", s.user_state())
            .env_remove("FENCEPOST_STORE")
            .env_remove("FENCEPOST_SESSION")
            .args(["claim", "--dir", "d/x/r", "--ttl", "120000", "--hold"])
            .stdout(std::process::Stdio::piped());
        let mut hold = crate::util::Background::spawn(&mut hold);
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(hold.0.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let dead_token = line.trim().split_once('.').unwrap().0.to_string();
        hold.kill_and_reap();
        fs::create_dir_all(main.join(".fencepost")).unwrap();

        let started = std::time::Instant::now();
        let taken = claim(&s, &main, &["--dir", "d", "--wait", "60000", "--json"], 0);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "waited {:?} for a dead holder (its ttl is 120 s)",
            started.elapsed()
        );
        assert_eq!(
            store_of(&taken),
            main.join(".fencepost").display().to_string()
        );
        let nested = main.join("d/x/r/.git/fencepost").display().to_string();
        let checked = run(
            &s,
            &main,
            &["--store", &nested, "check", "--dir", "d/x/r", &dead_token],
        );
        assert!(
            !checked.status.success() && one_line_stderr(&checked).contains("superseded"),
            "the dead holder's token still passes: {checked:?}"
        );
    }

    /// A `.fencepost` directory moved away and back: while it was away the file was
    /// claimed in the repository's store, so both stores hold a claim of it. The
    /// claim stranded in the repository's store is shown by `status`, released by
    /// its handle where it is, not renewed beside the other holder, and a refusal
    /// by it names the store to break it in (a breaker: `status` hid it, its holder
    /// was told its token was never issued, and the `break` advised was made in
    /// the wrong store).
    #[test]
    fn a_claim_stranded_by_a_store_moved_away_and_back_is_found_where_it_is() {
        let s = Scratch::new();
        // Tokens 1 and 2 in the marker's store first, so its holder's token is 3.
        let (main, (one_token, one, one_store), (two_token, two, two_store)) = stranded(&s, true);
        assert_ne!(one_store, two_store);

        let output = run(&s, &main, &["status"]);
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            text.contains("one") && text.contains("two") && text.contains(&two_store),
            "the stranded claim is listed with its store: {text}"
        );
        // Beside a holder in the store the layout picks, it is not renewed.
        let output = run(&s, &main, &["renew", "--file", "a.txt", &two]);
        assert_eq!(output.status.code(), Some(3), "{output:?}");
        assert!(
            one_line_stderr(&output).contains("Two holders"),
            "{output:?}"
        );
        // With that holder gone, a claim meets the stranded one, and is told to
        // break it where it is.
        assert_eq!(
            run(&s, &main, &["release", "--file", "a.txt", &one])
                .status
                .code(),
            Some(0)
        );
        let output = claim(&s, &main, &["--file", "a.txt", "--owner", "three"], 3);
        let message = one_line_stderr(&output);
        assert!(
            message.contains(&format!("fencepost --store {two_store} break --file")),
            "{message}"
        );
        // Its holder carries on where it is: check and renew pass, and release
        // ends it there.
        let token = two_token.to_string();
        assert_ne!(two_token, one_token);
        for command in [
            vec!["check", "--file", "a.txt", &token],
            vec!["renew", "--file", "a.txt", &two],
            vec!["release", "--file", "a.txt", &two],
        ] {
            let output = run(&s, &main, &command);
            assert_eq!(output.status.code(), Some(0), "{command:?}: {output:?}");
        }
        let output = run(&s, &main, &["status"]);
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(!text.contains("two"), "{text}");
        claim(&s, &main, &["--file", "a.txt", "--owner", "three"], 0);
    }

    /// As above, with both stores having issued the same token (each numbers from
    /// 1): `check` of the stranded holder's whole handle is judged by its secret
    /// and refused as a second holder, the other holder's handle passes, and a
    /// bare token is judged by the store the layout picks (a breaker: the
    /// stranded holder's `check` passed by number).
    #[test]
    fn a_stranded_handle_is_checked_by_its_secret_not_its_number_alone() {
        let s = Scratch::new();
        let (main, (one_token, one, _), (two_token, two, _)) = stranded(&s, false);
        assert_eq!(one_token, two_token, "each store numbers from 1");
        let output = run(&s, &main, &["check", "--file", "a.txt", &two]);
        assert_eq!(output.status.code(), Some(3), "{output:?}");
        assert!(
            one_line_stderr(&output).contains("Two holders"),
            "{output:?}"
        );
        let token = one_token.to_string();
        for checked in [one.as_str(), token.as_str()] {
            let output = run(&s, &main, &["check", "--file", "a.txt", checked]);
            assert_eq!(output.status.code(), Some(0), "{checked}: {output:?}");
        }
    }

    /// A stranded lease checked and renewed through a store named by `--store` or
    /// `FENCEPOST_STORE` (as `run` hands its child the store its claim is in) is
    /// refused as a second holder too, when the store the layout picks holds the
    /// file (a breaker: a `run` child's check passed there while the plain path
    /// said "Two holders"); it is still released there.
    #[test]
    fn a_stranded_lease_through_a_named_store_is_a_second_holder_too() {
        let s = Scratch::new();
        let (main, _, (token, two, two_store)) = stranded(&s, false);
        let token = token.to_string();
        for command in [
            vec!["--store", &two_store, "check", "--file", "a.txt", &two],
            vec!["--store", &two_store, "check", "--file", "a.txt", &token],
            vec!["--store", &two_store, "renew", "--file", "a.txt", &two],
        ] {
            let output = run(&s, &main, &command);
            assert_eq!(output.status.code(), Some(3), "{command:?}: {output:?}");
            assert!(
                one_line_stderr(&output).contains("Two holders"),
                "{output:?}"
            );
        }
        let output = run(
            &s,
            &main,
            &["--store", &two_store, "release", "--file", "a.txt", &two],
        );
        assert_eq!(output.status.code(), Some(0), "{output:?}");
    }

    /// A directory below a subtree that cannot be listed fails the subtree claim:
    /// a repository there could hold a claim below it (here a file of a nested
    /// repository, seen through a `.fencepost` made above since), which the claim
    /// could not see (a breaker: a directory made unreadable for a moment let the
    /// subtree claim stand beside the file's). Permissions bind only a user other
    /// than root, so as root the commands run as `nobody` (setpriv).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_subtree_claim_over_an_unreadable_directory_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let s = Scratch::new();
        let top = top(&s);
        let main = top.join("main");
        repository(&main, &["locked/nested/z.txt"]);
        git(&main.join("locked/nested"), &["init", "-q"]);
        // A copy of the binary and a state directory that `nobody` can reach.
        let bin = s.path().join("fencepost-bin");
        fs::copy(crate::util::bin(), &bin).unwrap();
        let state = s.path().join("nobody-state");
        fs::create_dir_all(&state).unwrap();
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let open_up = |path: &Path| {
            let status = std::process::Command::new("chmod")
                .args(["-R", "a+rwX"])
                .arg(path)
                .status()
                .unwrap();
            assert!(status.success());
        };
        for dir in [s.path(), top.as_path()] {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).unwrap();
        }
        open_up(&main);
        open_up(&state);
        let fp = |args: &[&str]| {
            let cmd = if root {
                let mut cmd = std::process::Command::new("setpriv");
                cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                    .arg(&bin);
                cmd
            } else {
                std::process::Command::new(&bin)
            };
            let mut cmd = crate::util::scrubbed(cmd);
            cmd.current_dir(&main)
                .env("XDG_STATE_HOME", &state)
                .args(args)
                .output()
                .unwrap()
        };
        let held = fp(&["claim", "--file", "locked/nested/z.txt", "--ttl", "60000"]);
        assert_eq!(held.status.code(), Some(0), "{held:?}");
        fs::create_dir_all(main.join(".fencepost")).unwrap();
        open_up(&main.join(".fencepost"));
        fs::set_permissions(main.join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
        let claim = fp(&["claim", "--dir", ".", "--ttl", "60000"]);
        fs::set_permissions(main.join("locked"), fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(claim.status.code(), Some(1), "{claim:?}");
        assert!(
            one_line_stderr(&claim).contains("cannot look below")
                && one_line_stderr(&claim).contains("make it readable"),
            "{claim:?}"
        );
    }

    /// A directory below a subtree whose path is too long to list: the claim is
    /// refused, and the advice is not to make it readable (it is; that would not
    /// help).
    #[cfg(unix)]
    #[test]
    fn a_path_too_long_to_list_below_a_subtree_is_not_called_unreadable() {
        let s = Scratch::new();
        let main = top(&s).join("main");
        repository(&main, &["a.txt"]);
        fs::create_dir_all(main.join(".fencepost")).unwrap();
        // Made one level at a time from inside (no single path names the deepest).
        let name = "d".repeat(250);
        let c_name = std::ffi::CString::new(name.clone()).unwrap();
        let top_dir = std::ffi::CString::new(main.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: plain system calls on descriptors this test opens and closes.
        unsafe {
            let mut fd = libc::open(top_dir.as_ptr(), libc::O_DIRECTORY | libc::O_RDONLY);
            assert!(fd >= 0);
            for _ in 0..20 {
                assert_eq!(libc::mkdirat(fd, c_name.as_ptr(), 0o755), 0);
                let next = libc::openat(fd, c_name.as_ptr(), libc::O_DIRECTORY | libc::O_RDONLY);
                assert!(next >= 0);
                libc::close(fd);
                fd = next;
            }
            libc::close(fd);
        }
        let claim = claim(&s, &main, &["--dir", "."], 1);
        let message = one_line_stderr(&claim);
        assert!(
            message.contains("cannot look below") && !message.contains("make it readable"),
            "{message}"
        );
        // Leave nothing the scratch directory's removal could not take away.
        let status = std::process::Command::new("rm")
            .current_dir(&main)
            .args(["-rf", &name])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// `status` in a repository made since a claim of one of its files shows that
    /// claim, kept in the store it was made in, and names that store: its own
    /// store is empty, and "no claims" alone would say the file is free.
    #[test]
    fn status_shows_the_claims_kept_in_an_earlier_store() {
        let s = Scratch::new();
        let main = top(&s).join("main");
        repository(&main, &["sub/a.txt", "b.txt"]);
        let (_, _, store) = claimed(&s, &main, &["--file", "sub/a.txt"], "alice");
        claimed(&s, &main, &["--file", "b.txt"], "carol");
        git(&main.join("sub"), &["init", "-q"]);
        let output = run(&s, &main.join("sub"), &["status"]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.contains("alice") && text.contains("a.txt"), "{text}");
        assert!(
            text.contains("held in another store") && text.contains(&store),
            "{text}"
        );
        // Only the claims the new layout would put here: not the old store's others.
        assert!(!text.contains("carol"), "{text}");
        let output = run(&s, &main.join("sub"), &["status", "--json"]);
        let entries: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(entries.len(), 1, "{entries:?}");
        assert_eq!(entries[0]["owner"], "alice");
        assert_eq!(entries[0]["store"], store.as_str());
        // From the old repository's root nothing is added: the claim is in its store.
        let output = run(&s, &main, &["status", "--json"]);
        let entries: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert!(
            entries.iter().all(|e| e.get("store").is_none()),
            "{entries:?}"
        );
    }

    #[test]
    fn a_fencepost_directory_made_below_or_above_after_a_claim_keeps_the_claim() {
        let s = Scratch::new();
        let top = top(&s);
        let main = top.join("main");
        repository(&main, &["sub/a.txt", "b.txt"]);
        let (a_token, a_handle, _) = claimed(&s, &main, &["--file", "sub/a.txt"], "alice");
        let (b_token, b_handle, _) = claimed(&s, &main, &["--file", "b.txt"], "carol");
        fs::create_dir(main.join("sub/.fencepost")).unwrap();
        fs::create_dir(top.join(".fencepost")).unwrap();
        refused_by(&s, &main.join("sub"), &["--file", "a.txt"], "alice");
        refused_by(&s, &main, &["--file", "b.txt"], "carol");
        holder_carries_on(&s, &main, &["--file", "sub/a.txt"], a_token, &a_handle);
        holder_carries_on(&s, &main, &["--file", "b.txt"], b_token, &b_handle);
    }

    #[test]
    fn a_subtree_meets_claims_across_a_repository_made_below_it_since() {
        let s = Scratch::new();
        let main = top(&s).join("main");
        repository(&main, &["d/inner/f.txt", "e/inner/g.txt"]);
        // A subtree held, then a repository made below it: a file there is covered.
        let (token, handle, _) = claimed(&s, &main, &["--dir", "d"], "alice");
        git(&main.join("d/inner"), &["init", "-q"]);
        refused_by(&s, &main.join("d/inner"), &["--file", "f.txt"], "alice");
        holder_carries_on(&s, &main, &["--dir", "d"], token, &handle);
        // A file held, then a repository made around it: a subtree over it waits.
        let (token, handle, _) = claimed(&s, &main, &["--file", "e/inner/g.txt"], "carol");
        git(&main.join("e/inner"), &["init", "-q"]);
        refused_by(&s, &main.join("e/inner"), &["--dir", "."], "carol");
        holder_carries_on(
            &s,
            &main.join("e/inner"),
            &["--file", "g.txt"],
            token,
            &handle,
        );
    }

    /// Rule 5 keeps a file in the store that holds a record of it; a live claim
    /// of it made in another store on its path (by `--store`, or in a race with a
    /// layout change) is still met: the claim asks every other store after its
    /// own landed, gives its own back and waits, or is refused naming the store.
    #[test]
    fn a_claim_meets_a_live_claim_in_another_store_on_its_path() {
        let s = Scratch::new();
        let main = top(&s).join("main");
        repository(&main, &["sub/b.txt"]);
        git(&main.join("sub"), &["init", "-q"]);
        // sub/b.txt's own store, the nested repository's, has a record of it.
        let (_, handle, inner) = claimed(&s, &main, &["--file", "sub/b.txt"], "seed");
        let output = run(&s, &main, &["release", "--file", "sub/b.txt", &handle]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        // A subtree over it held in the outer repository's store.
        let outer = main.join(".git/fencepost");
        let outer_arg = outer.display().to_string();
        let held = run(
            &s,
            &main,
            &[
                "--store", &outer_arg, "claim", "--dir", "sub", "--owner", "alice", "--json",
            ],
        );
        assert_eq!(held.status.code(), Some(0), "{held:?}");
        let subtree_handle = json_of(&held)["handle"].as_str().unwrap().to_string();
        let output = claim(&s, &main, &["--file", "sub/b.txt", "--owner", "bob"], 3);
        let message = one_line_stderr(&output);
        assert!(
            message.contains("alice") && message.contains(&outer_arg),
            "{message}"
        );
        // Bob's claim was given back in the store it landed in: nothing live.
        let status = run(&s, &main, &["--store", &inner, "status", "--json"]);
        let entries = json_of(&status);
        assert!(
            entries
                .as_array()
                .unwrap()
                .iter()
                .all(|e| e["live"] == false),
            "{entries}"
        );
        // A waiting claim takes it once the subtree is released.
        let mut waiter = s.bare_cmd(&main);
        waiter
            .args([
                "claim",
                "--file",
                "sub/b.txt",
                "--owner",
                "bob",
                "--wait",
                "20000",
            ])
            .timeout(std::time::Duration::from_secs(60));
        let waiting = std::thread::spawn(move || waiter.output().unwrap());
        std::thread::sleep(std::time::Duration::from_millis(300));
        let released = run(
            &s,
            &main,
            &[
                "--store",
                &outer_arg,
                "release",
                "--dir",
                "sub",
                &subtree_handle,
            ],
        );
        assert_eq!(released.status.code(), Some(0), "{released:?}");
        let output = waiting.join().unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
    }
}

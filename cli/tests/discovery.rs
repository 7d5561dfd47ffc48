//! Store discovery (docs/protocol.md §5): two agents in different directories of one tree land
//! in one store, or there is no mutual exclusion.

use std::fs;

use crate::util::{Scratch, json_of};

#[test]
fn the_git_work_tree_root_holds_the_store() {
    let s = Scratch::new();
    let repo = s.path().join("repo");
    let deep = repo.join("src/deep");
    fs::create_dir_all(repo.join(".git")).unwrap();
    fs::create_dir_all(&deep).unwrap();

    s.bare_cmd(&repo)
        .args(["claim", "--lock", "x"])
        .assert()
        .code(0);
    // From a subdirectory: the same store, so the lock is held.
    s.bare_cmd(&deep)
        .args(["claim", "--lock", "x"])
        .assert()
        .code(3);
    assert!(repo.join(".fencepost").is_dir());
    assert!(!deep.join(".fencepost").exists());
    assert!(!repo.join("src/.fencepost").exists());
}

#[test]
fn the_nearest_fencepost_directory_wins() {
    let s = Scratch::new();
    let outer = s.path().join("outer");
    let inner = outer.join("a/b");
    fs::create_dir_all(outer.join(".fencepost")).unwrap();
    fs::create_dir_all(&inner).unwrap();
    // A git work tree further down does not override an existing store above it.
    fs::create_dir_all(outer.join("a/.git")).unwrap();

    let output = s
        .bare_cmd(&inner)
        .args(["claim", "--lock", "x", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        json_of(&output)["store"],
        outer.join(".fencepost").to_str().unwrap()
    );
    s.bare_cmd(&outer)
        .args(["claim", "--lock", "x"])
        .assert()
        .code(3);
}

#[test]
fn outside_any_tree_the_store_is_in_the_working_directory() {
    let s = Scratch::new();
    let output = s
        .bare_cmd(s.path())
        .args(["claim", "--lock", "x", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        json_of(&output)["store"],
        s.path().join(".fencepost").to_str().unwrap()
    );
}

#[test]
fn fencepost_store_is_used_and_store_overrides_it() {
    let s = Scratch::new();
    let from_env = s.path().join("env-store");
    let from_flag = s.path().join("flag-store");
    s.bare_cmd(s.path())
        .env("FENCEPOST_STORE", &from_env)
        .args(["claim", "--lock", "x"])
        .assert()
        .code(0);
    assert!(from_env.is_dir());
    s.bare_cmd(s.path())
        .env("FENCEPOST_STORE", &from_env)
        .args(["claim", "--lock", "x"])
        .assert()
        .code(3);
    s.bare_cmd(s.path())
        .env("FENCEPOST_STORE", &from_env)
        .arg("--store")
        .arg(&from_flag)
        .args(["claim", "--lock", "x"])
        .assert()
        .code(0);
    assert!(from_flag.is_dir());
    assert!(!s.path().join(".fencepost").exists());
}

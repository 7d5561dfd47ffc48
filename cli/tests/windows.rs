//! Windows only (under Wine in CI; docs/windows.md). `run` with Windows' own shell as
//! the child (`cmd /c …`), the way a Windows user or agent calls it: the child's exit
//! code comes back, the lease reaches the child's environment, and the token it was
//! given passes `check` from inside (the portable `run` tests: run.rs). And the
//! reserved device names: fine as lock names, refused as files.

use std::collections::BTreeMap;

use crate::util::{Scratch, one_line_stderr};

#[test]
fn run_exits_with_the_exit_code_of_a_cmd_child() {
    let s = Scratch::new();
    for code in [0, 1, 42, 255] {
        s.cmd()
            .args(["run", "--lock", "x", "--", "cmd", "/c", "exit"])
            .arg(code.to_string())
            .assert()
            .code(code);
    }
    // A code beyond what an exit code can carry is 1, not a wrapped value.
    s.cmd()
        .args(["run", "--lock", "x", "--", "cmd", "/c", "exit", "256"])
        .assert()
        .code(1);
    assert_eq!(s.entry("x").unwrap()["state"], "released");
}

#[test]
fn a_cmd_child_sees_the_lease_and_its_token_passes() {
    let s = Scratch::new();
    let earlier = s.claim_handle("db:migrations", &[]).1;
    s.cmd()
        .args(["release", "--lock", "db:migrations", &earlier])
        .assert()
        .code(0);
    // `set FENCEPOST_` lists every variable starting so; then the child checks its
    // own token through the store it was given (no --store). No space before `&&`:
    // cmd would take it as part of the prefix `set` looks for.
    s.cmd()
        .env("FP", crate::util::bin())
        .args(["run", "--lock", "db:migrations", "--", "cmd", "/c", "set"])
        .args(["FENCEPOST_>env.txt&&%FP%", "check", "--lock"])
        .args(["%FENCEPOST_LOCK%", "%FENCEPOST_TOKEN%"])
        .assert()
        .code(0);
    let env = std::fs::read_to_string(s.path().join("env.txt")).unwrap();
    let vars: BTreeMap<&str, &str> = env
        .lines()
        .filter_map(|line| line.split_once('='))
        .collect();
    assert_eq!(vars.get("FENCEPOST_TOKEN"), Some(&"3"), "{env}");
    assert_eq!(
        vars.get("FENCEPOST_STORE").copied(),
        s.store().to_str(),
        "{env}"
    );
    assert_eq!(
        vars.get("FENCEPOST_RESOURCE"),
        Some(&"lock:db:migrations"),
        "{env}"
    );
    assert_eq!(vars.get("FENCEPOST_LOCK"), Some(&"db:migrations"), "{env}");
    assert_eq!(vars.get("FENCEPOST_FILE"), None, "{env}");
}

#[test]
fn a_cmd_child_whose_check_fails_fails_the_run() {
    // The child checks a token that is not its own: exit 3 from inside comes back.
    let s = Scratch::new();
    s.cmd()
        .env("FP", crate::util::bin())
        .args(["run", "--lock", "x", "--", "cmd", "/c", "%FP%", "check"])
        .args(["--lock", "x", "999"])
        .assert()
        .code(3);
}

#[test]
fn reserved_device_names_are_lock_names_but_never_files() {
    // `NUL.json` in any directory is the NUL device on Windows: a file claim on it
    // would guard nothing (issue 18).
    let s = Scratch::new();
    for name in ["CON", "NUL.json"] {
        let token = s.claim(name, &[]);
        s.cmd()
            .args(["check", "--lock", name, &token.to_string()])
            .assert()
            .code(0);
    }
    std::fs::create_dir(s.path().join("sub")).unwrap();
    for (path, device) in [
        ("NUL.json", "NUL"),
        ("sub/con.txt", "CON"),
        ("COM1", "COM1"),
    ] {
        let output = s.cmd().args(["claim", "--file", path]).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{path}: {output:?}");
        assert!(
            one_line_stderr(&output).contains(&format!("names the Windows device {device}")),
            "{path}: {output:?}"
        );
        let output = s
            .cmd()
            .args([
                "run",
                "--file",
                path,
                "--",
                "cmd",
                "/c",
                "echo",
                "ran>ran.txt",
            ])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{path}: {output:?}");
        assert!(!s.path().join("ran.txt").exists(), "{path}: the child ran");
    }
    assert_eq!(s.status().len(), 2, "only the two locks were claimed");
}

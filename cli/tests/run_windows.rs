//! `run` with Windows' own shell as the child (`cmd /c …`), the way a Windows user
//! or agent calls it: the child's exit code comes back, the lease reaches the
//! child's environment, and the token it was given passes `check` from inside.
//! (The portable `run` tests, under Wine in CI: run.rs; docs/windows.md.)

use std::collections::BTreeMap;

use crate::util::Scratch;

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
    let earlier = s.claim("db:migrations", &[]).to_string();
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

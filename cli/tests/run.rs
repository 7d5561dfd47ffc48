//! `run`: hold the lease for the child's life, renew it, export it, forward
//! signals, release after, and exit with the child's code (docs/protocol.md §7).

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use predicates::prelude::*;

use crate::util::{Background, Scratch, one_line_stderr, send_signal, wait_until};

#[test]
fn run_exits_with_the_childs_exit_code() {
    let s = Scratch::new();
    for code in [0, 1, 42] {
        s.cmd()
            .args(["run", "--lock", "x", "--", "sh", "-c"])
            .arg(format!("exit {code}"))
            .assert()
            .code(code);
    }
}

#[test]
fn a_child_killed_by_a_signal_is_128_plus_the_signal() {
    let s = Scratch::new();
    s.cmd()
        .args(["run", "--lock", "x", "--", "sh", "-c", "kill -KILL $$"])
        .assert()
        .code(128 + 9);
    s.cmd()
        .args(["run", "--lock", "x", "--", "sh", "-c", "kill -TERM $$"])
        .assert()
        .code(128 + 15);
}

#[test]
fn run_exports_the_lease_to_the_child() {
    let s = Scratch::new();
    // Make the token something other than 1.
    let earlier = s.claim("db:migrations", &[]).to_string();
    s.cmd()
        .args(["release", "--lock", "db:migrations", &earlier])
        .assert()
        .code(0);
    // The child checks its own token through the store it was given: no --store,
    // and its working directory would discover a different store.
    let script = r#"printf '%s\n' "$FENCEPOST_TOKEN" "$FENCEPOST_STORE" "$FENCEPOST_RESOURCE" \
        "$FENCEPOST_LOCK" "${FENCEPOST_FILE-unset}" > env.txt
        "$FP" check --lock "$FENCEPOST_LOCK" "$FENCEPOST_TOKEN""#;
    s.cmd()
        .env("FP", crate::util::bin())
        .args(["run", "--lock", "db:migrations", "--", "sh", "-c", script])
        .assert()
        .code(0);
    let env = std::fs::read_to_string(s.path().join("env.txt")).unwrap();
    let lines: Vec<&str> = env.lines().collect();
    assert_eq!(
        lines,
        [
            "3",
            s.store().to_str().unwrap(),
            "lock:db:migrations",
            "db:migrations",
            "unset"
        ]
    );
}

#[test]
fn run_exports_a_file_resource_as_an_absolute_path() {
    let s = Scratch::new();
    let script = r#"printf '%s\n' "$FENCEPOST_RESOURCE" "$FENCEPOST_FILE" "${FENCEPOST_LOCK-unset}" > env.txt"#;
    s.cmd()
        .env("FENCEPOST_LOCK", "leaked-from-an-outer-run")
        .args(["run", "--file", "data.txt", "--", "sh", "-c", script])
        .assert()
        .code(0);
    let env = std::fs::read_to_string(s.path().join("env.txt")).unwrap();
    let file = s.path().join("data.txt");
    let file = file.to_str().unwrap();
    assert_eq!(
        env.lines().collect::<Vec<_>>(),
        [format!("file:{file}").as_str(), file, "unset"]
    );
}

#[test]
fn run_does_not_start_the_child_while_someone_else_holds() {
    let s = Scratch::new();
    s.claim("x", &["--owner", "alice"]);
    let output = s
        .cmd()
        .args(["run", "--lock", "x", "--", "touch", "ran"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(one_line_stderr(&output).contains("x is held by alice"));
    assert!(
        !s.path().join("ran").exists(),
        "the child ran without the lease"
    );
}

#[test]
fn run_releases_after_the_child_ends() {
    let s = Scratch::new();
    s.cmd()
        .args(["run", "--lock", "x", "--", "sh", "-c", "exit 5"])
        .assert()
        .code(5);
    assert_eq!(s.entry("x").unwrap()["state"], "released");
    let next = s.claim("x", &[]);
    assert!(next > 1);
}

#[test]
fn a_command_that_cannot_start_is_exit_127_and_releases() {
    let s = Scratch::new();
    let output = s
        .cmd()
        .args(["run", "--lock", "x", "--", "./no-such-command-here"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(127));
    assert!(one_line_stderr(&output).contains("cannot run ./no-such-command-here"));
    assert_eq!(s.entry("x").unwrap()["state"], "released");
    s.cmd().args(["claim", "--lock", "x"]).assert().code(0);
}

/// docs/protocol.md I5 and §7: `run` renews every ttl/3 for the child's whole life, and the
/// token the child was given stays the one that passes.
#[test]
fn run_holds_past_many_ttls_and_the_token_keeps_passing() {
    let s = Scratch::new();
    // The child sleeps past 4 ttls, then checks its token.
    let script = r#"echo "$FENCEPOST_TOKEN" > started
        sleep 2.5
        "$FP" check --lock x "$FENCEPOST_TOKEN""#;
    let mut run = s.spawn_cmd();
    run.args([
        "run", "--lock", "x", "--ttl", "600", "--", "sh", "-c", script,
    ]);
    let mut child = Background(run.spawn().unwrap());
    let started = s.path().join("started");
    wait_until("the child started", Duration::from_secs(10), || {
        std::fs::read_to_string(&started).is_ok_and(|t| t.ends_with('\n'))
    });
    // Two ttls after the claim: without renewal the lease would be gone.
    std::thread::sleep(Duration::from_millis(1300));
    s.cmd()
        .args(["claim", "--lock", "x", "--owner", "outsider"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("x is held by cli"));
    let token: u64 = std::fs::read_to_string(&started)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let entry = s.entry("x").unwrap();
    assert_eq!(entry["token"], token);
    assert!(
        entry["generation"].as_u64().unwrap() > token,
        "renewals wrote new generations"
    );
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(0), "the child's final check failed");
}

/// docs/protocol.md §7: a lease lost during the run is reported on stderr at once, and the
/// exit code is 3 although the child succeeds.
#[test]
fn a_lost_lease_is_reported_at_once_and_exits_3() {
    let s = Scratch::new();
    // The child gives the lease away behind run's back (release with its token,
    // then a fresh claim by someone else), then waits for the test's go-ahead.
    let script = r#""$FP" release --lock x "$FENCEPOST_TOKEN" || exit 90
        "$FP" claim --lock x --ttl 60000 --owner thief > /dev/null || exit 91
        i=0
        while [ ! -e go ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done
        exit 0"#;
    let mut run = s.spawn_cmd();
    run.args([
        "run", "--lock", "x", "--ttl", "300", "--", "sh", "-c", script,
    ])
    .stderr(Stdio::piped());
    let mut child = Background(run.spawn().unwrap());
    let stderr = child.0.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let first = lines
        .next()
        .expect("run ended without reporting the loss")
        .unwrap();
    // Reported while the child still runs (it waits for `go`).
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "loss reported only after the child ended: {first}"
    );
    assert!(
        first.starts_with("fencepost: lease on x lost: "),
        "unexpected stderr line: {first}"
    );
    std::fs::write(s.path().join("go"), b"").unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    // The thief's lease is untouched by run's exit.
    let entry = s.entry("x").unwrap();
    assert_eq!(entry["owner"], "thief");
    assert_eq!(entry["state"], "held");
}

/// docs/protocol.md §7: termination signals reach the child, and run outlives them to
/// release the lease and report the child's code.
#[test]
fn termination_signals_are_forwarded_to_the_child() {
    for signal in ["TERM", "INT", "HUP"] {
        let s = Scratch::new();
        let script = format!(
            r#"trap 'echo {signal} > got; exit 7' {signal}
            echo ready > ready
            i=0
            while [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done
            exit 0"#
        );
        let mut run = s.spawn_cmd();
        run.args(["run", "--lock", "x", "--", "sh", "-c", &script]);
        let mut child = Background(run.spawn().unwrap());
        let ready = s.path().join("ready");
        wait_until("the child is ready", Duration::from_secs(10), || {
            ready.exists()
        });
        send_signal(child.id(), signal);
        let status = child.0.wait().unwrap();
        assert_eq!(status.code(), Some(7), "SIG{signal}: {status:?}");
        assert_eq!(
            std::fs::read_to_string(s.path().join("got")).unwrap(),
            format!("{signal}\n")
        );
        assert_eq!(s.entry("x").unwrap()["state"], "released", "SIG{signal}");
    }
}

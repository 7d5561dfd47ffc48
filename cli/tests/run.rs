//! `run`: hold the lease for the child's life, renew it, export it, forward
//! signals, release after, and exit with the child's code (docs/protocol.md §7).
//!
//! The children are `fencepost-test-child` steps (tests/child/main.rs), not `sh`
//! scripts, so these run on Windows too; signals are POSIX-only. Windows' own
//! `cmd /c` children: windows.rs.

use std::process::Stdio;
use std::time::{Duration, Instant};

use predicates::prelude::*;

use crate::util::{Background, Scratch, StopFile, child_bin, one_line_stderr, wait_until};

#[test]
fn run_exits_with_the_childs_exit_code() {
    let s = Scratch::new();
    for code in [0, 1, 42, 255] {
        s.cmd()
            .args(["run", "--lock", "x", "--"])
            .arg(child_bin())
            .arg(format!("exit={code}"))
            .assert()
            .code(code);
    }
}

#[cfg(unix)]
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
    let earlier = s.claim_handle("db:migrations", &[]).1;
    s.cmd()
        .args(["release", "--lock", "db:migrations", &earlier])
        .assert()
        .code(0);
    // The child checks its own token through the store it was given: no --store,
    // and its working directory would locate a different store (the per-user one).
    s.cmd()
        .env("FP", crate::util::bin())
        .args(["run", "--lock", "db:migrations", "--"])
        .arg(child_bin())
        .args(["env=env.txt", "check"])
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
    s.cmd()
        .env("FENCEPOST_LOCK", "leaked-from-an-outer-run")
        .args(["run", "--file", "data.txt", "--"])
        .arg(child_bin())
        .arg("env=env.txt")
        .assert()
        .code(0);
    let env = std::fs::read_to_string(s.path().join("env.txt")).unwrap();
    let file = s.path().join("data.txt");
    let file = file.to_str().unwrap();
    assert_eq!(
        env.lines().skip(2).collect::<Vec<_>>(),
        [format!("file:{file}").as_str(), "unset", file]
    );
}

#[test]
fn run_does_not_start_the_child_while_someone_else_holds() {
    let s = Scratch::new();
    s.claim("x", &["--owner", "alice"]);
    let output = s
        .cmd()
        .args(["run", "--lock", "x", "--"])
        .arg(child_bin())
        .arg("touch=ran")
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
        .args(["run", "--lock", "x", "--"])
        .arg(child_bin())
        .arg("exit=5")
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
    // The child sleeps past 3 ttls, then checks its token. The ttl leaves each
    // renewal a second of slack: with 600 ms (200 ms of slack) one slow fsync on a
    // loaded CI disk lost the lease.
    let mut run = s.spawn_cmd();
    run.args(["run", "--lock", "x", "--ttl", "1500", "--"])
        .arg(child_bin())
        .args(["started=started", "sleep=5000", "check"]);
    let mut child = Background::spawn(&mut run);
    let started = s.path().join("started");
    wait_until("the child started", Duration::from_secs(10), || {
        std::fs::read_to_string(&started).is_ok_and(|t| t.ends_with('\n'))
    });
    // Two ttls after the claim: without renewal the lease would be gone.
    std::thread::sleep(Duration::from_millis(3200));
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
    // An operator breaks the lease behind run's back, then someone else claims it
    // (a token alone no longer releases anyone's lease); the child waits for the
    // test's go-ahead.
    let mut run = s.spawn_cmd();
    // A long ttl: run must not lose the lease by itself first (late renewals on a
    // loaded machine, or under Wine), and "at once" means long before the first
    // renewal (ttl/3 = 20 s) could notice the loss: the keepalive watches the
    // lease between renewals. `--on-loss keep`: the child must still run when the
    // loss is reported, however slowly this test reads it (the default policy
    // stops the child at once).
    run.args([
        "run",
        "--lock",
        "x",
        "--ttl",
        "60000",
        "--on-loss",
        "keep",
        "--",
    ])
    .arg(child_bin())
    .args(["touch=started", "wait-for=go"])
    .stderr(Stdio::piped());
    let mut child = Background::spawn(&mut run);
    // The child ends (and so does run) even if the test fails before `go`.
    let _go = StopFile(s.path().join("go"));
    // The child runs only once the lease is confirmed (a break before that would
    // only make run claim again).
    let started = s.path().join("started");
    wait_until("the child started", Duration::from_secs(10), || {
        started.exists()
    });
    let breaking = Instant::now();
    s.cmd()
        .args([
            "break",
            "--lock",
            "x",
            "--reason",
            "taken away for the test",
        ])
        .assert()
        .code(0);
    s.cmd()
        .args(["claim", "--lock", "x", "--ttl", "60000", "--owner", "thief"])
        .assert()
        .code(0);
    let first = child.first_stderr_line("reporting the loss");
    let took = breaking.elapsed();
    // Reported while the child still runs (it waits for `go`), and well before
    // the first renewal would have found the loss.
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "loss reported only after the child ended: {first}"
    );
    assert!(
        took < Duration::from_secs(10),
        "loss reported {took:?} after the break began, not at once: {first}"
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

/// docs/protocol.md §7: by default a lost lease stops the child (SIGTERM, then
/// SIGKILL; on Windows Ctrl+Break to its process group, then its job object is
/// terminated) before `run` exits 3.
#[test]
fn a_lost_lease_stops_the_child_by_default() {
    let s = Scratch::new();
    let _stop = StopFile(s.path().join("go"));
    // Were it left running, the child would go on to create `survived` once `go`
    // appears.
    let mut run = s.spawn_cmd();
    run.args(["run", "--lock", "x", "--ttl", "300", "--grace", "500", "--"])
        .arg(child_bin())
        .args([
            "break=taken away for the test",
            "wait-for=go",
            "touch=survived",
        ]);
    let mut child = Background::spawn(&mut run);
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    std::fs::write(s.path().join("go"), b"").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !s.path().join("survived").exists(),
        "the child outlived its lost lease"
    );
}

/// docs/protocol.md §7: termination signals reach the child, and run outlives them to
/// release the lease and report the child's code.
#[cfg(unix)]
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
        let mut child = Background::spawn(&mut run);
        let ready = s.path().join("ready");
        wait_until("the child is ready", Duration::from_secs(10), || {
            ready.exists()
        });
        crate::util::send_signal(child.id(), signal);
        let status = child.0.wait().unwrap();
        assert_eq!(status.code(), Some(7), "SIG{signal}: {status:?}");
        assert_eq!(
            std::fs::read_to_string(s.path().join("got")).unwrap(),
            format!("{signal}\n")
        );
        assert_eq!(s.entry("x").unwrap()["state"], "released", "SIG{signal}");
    }
}

/// The command is its whole process group: a forwarded Ctrl+C ends the `sh -c`
/// wrapper at once while the real command, in the same group, spends a while
/// cleaning up (writing). The lease is held until that command is done too: a
/// waiting rival got it the moment the wrapper died, while the command still wrote
/// (a breaker). And a process the command leaves running in the background keeps
/// the lease held until it ends.
#[cfg(unix)]
#[test]
fn the_lease_is_held_until_the_commands_whole_group_has_ended() {
    let s = Scratch::new();
    // The wrapper dies on TERM; the command it started traps it and writes for a
    // while before it ends.
    let script = r#"sh -c 'trap "sleep 1.5; echo cleaned > cleaned; exit 0" TERM; echo ready > ready; while :; do sleep 0.05; done' &
wait"#;
    let mut run = s.spawn_cmd();
    run.args(["run", "--lock", "x", "--", "sh", "-c", script]);
    let mut child = Background::spawn(&mut run);
    let ready = s.path().join("ready");
    wait_until("the command is ready", Duration::from_secs(10), || {
        ready.exists()
    });
    crate::util::send_signal(child.id(), "TERM");
    // While the command cleans up, the lease is still held.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!s.path().join("cleaned").exists(), "cleaned up too soon");
    let rival = s.cmd().args(["claim", "--lock", "x"]).output().unwrap();
    assert_eq!(
        rival.status.code(),
        Some(3),
        "a rival got the lease while the command was still cleaning up: {rival:?}"
    );
    let status = child.0.wait().unwrap();
    assert!(
        s.path().join("cleaned").exists(),
        "run ended before its command"
    );
    assert_eq!(s.entry("x").unwrap()["state"], "released", "{status:?}");

    // A process left running in the background.
    let s = Scratch::new();
    let started = Instant::now();
    let mut run = s.spawn_cmd();
    run.args(["run", "--lock", "y", "--", "sh", "-c", "sleep 1.5 & exit 0"])
        .stderr(Stdio::piped());
    let mut child = Background::spawn(&mut run);
    std::thread::sleep(Duration::from_millis(300));
    let rival = s.cmd().args(["claim", "--lock", "y"]).output().unwrap();
    assert_eq!(rival.status.code(), Some(3), "{rival:?}");
    let output = child.finish();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(started.elapsed() >= Duration::from_millis(1400));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("kept until the rest of its process group ends"),
        "{output:?}"
    );
    assert_eq!(s.entry("y").unwrap()["state"], "released");
}

/// A command that fills `run`'s stderr (a pipe nobody reads) and leaves a process
/// behind: `run` still ends once that process has, and releases. Its notice about
/// the wait blocked on the full pipe, and `run` renewed the lease for ever after the
/// group was gone (a breaker).
#[cfg(unix)]
#[test]
fn a_full_stderr_does_not_keep_run_past_its_commands_group() {
    let s = Scratch::new();
    let mut run = s.spawn_cmd();
    run.args(["run", "--lock", "x", "--ttl", "3000", "--"])
        // 64 KiB: a pipe's whole buffer, so `head` ends and the pipe is full.
        .args(["sh", "-c", "head -c 65536 /dev/zero >&2; sleep 2 & exit 0"])
        // A pipe nobody reads.
        .stderr(Stdio::piped());
    let mut child = Background::spawn(&mut run);
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "run still holds x 15 s after its command's group ended: {:?}",
            s.entry("x")
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(s.entry("x").unwrap()["state"], "released");
}

/// A lost lease stops the command even when `run`'s stderr is a pipe nobody reads
/// and the command has filled it: the loss line, which blocks, is written after
/// the stop, on a thread of its own (a breaker: `run` blocked on the line, and the
/// command wrote on beside the rival for as long as it liked).
#[cfg(unix)]
#[test]
fn a_loss_stops_the_command_even_when_stderr_is_full() {
    let s = Scratch::new();
    let script = r#"head -c 200000 /dev/zero >&2 &
while :; do echo x >> marks; sleep 0.05; done"#;
    let mut run = s.spawn_cmd();
    run.args([
        "run", "--lock", "x", "--ttl", "3000", "--grace", "300", "--",
    ])
    .args(["sh", "-c", script])
    // A pipe nobody reads.
    .stderr(Stdio::piped());
    let mut child = Background::spawn(&mut run);
    let marks = s.path().join("marks");
    wait_until("the command writes", Duration::from_secs(10), || {
        marks.exists()
    });
    std::thread::sleep(Duration::from_millis(300));
    let broken = s
        .cmd()
        .args(["break", "--lock", "x", "--reason", "test"])
        .output()
        .unwrap();
    assert_eq!(broken.status.code(), Some(0), "{broken:?}");
    let size = || std::fs::metadata(&marks).map(|m| m.len()).unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = size();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = size();
        if now == last {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the command still writes 10 s after its lease was broken"
        );
        last = now;
    }
    // `run` ends too, with the loss's code, though nobody read its stderr.
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "run did not end");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(3), "{status:?}");
}

/// A command that claims the lock its own `run` holds is told that it holds it
/// already, through its parent, and how to use it — not "held by cli (pid …)"
/// with the advice for someone else's lease (a breaker).
#[cfg(unix)]
#[test]
fn a_claim_from_inside_run_is_told_it_holds_the_lease_already() {
    let s = Scratch::new();
    let store = s.store().display().to_string();
    let script = format!("\"$FP\" --store '{store}' claim --lock x; echo \"rc=$?\" > rc");
    let output = s
        .cmd()
        .args(["run", "--lock", "x", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(s.path().join("rc")).unwrap().trim(),
        "rc=3"
    );
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains(
            "x is held by the `fencepost run` this command runs under (token 1, in FENCEPOST_TOKEN)"
        ) && said.contains("FENCEPOST_LEASE"),
        "{said}"
    );
    // A file inside the directory its `run --dir` holds: pointed at --session, not
    // at breaking its own parent's lease (a new user).
    std::fs::create_dir(s.path().join("d")).unwrap();
    let script = format!("\"$FP\" --store '{store}' claim --file d/f.rs; echo \"rc=$?\" > rc");
    let output = s
        .cmd()
        .args(["run", "--dir", "d", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("which the `fencepost run` this command runs under holds")
            && said.contains("--session")
            && !said.contains("break"),
        "{said}"
    );
}

/// Under `run --shared` a claim to write is told the run holds a reader's lease
/// (whose token passes no check), not that it holds the resource and may write (a
/// breaker), and whatever other reader the refusal names; a file inside its
/// `run --dir --shared` likewise, without pointing at --session, which a shared
/// run cannot take.
#[cfg(unix)]
#[test]
fn a_claim_to_write_from_inside_a_shared_run_is_told_it_holds_a_readers_lease() {
    let s = Scratch::new();
    let store = s.store().display().to_string();
    // Another reader too, which may be the one the refusal names.
    let other = s
        .cmd()
        .args([
            "claim",
            "--lock",
            "x",
            "--shared",
            "--owner",
            "someone-else",
        ])
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(0), "{other:?}");
    let script = format!("\"$FP\" --store '{store}' claim --lock x; echo \"rc=$?\" > rc");
    let output = s
        .cmd()
        .args(["run", "--lock", "x", "--shared", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(s.path().join("rc")).unwrap().trim(),
        "rc=3"
    );
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("a reader's lease") && !said.contains("holds it already"),
        "{said}"
    );
    // Another spelling of the same lock (case, blanks) is told the same (a
    // breaker: it got the generic refusal and a `break` to ask for).
    let script = format!("\"$FP\" --store '{store}' claim --lock ' X'; echo \"rc=$?\" > rc");
    let output = s
        .cmd()
        .args(["run", "--lock", "x", "--shared", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("a reader's lease") && !said.contains("break"),
        "{said}"
    );
    std::fs::create_dir(s.path().join("d")).unwrap();
    let script = format!("\"$FP\" --store '{store}' claim --file d/f.rs; echo \"rc=$?\" > rc");
    let output = s
        .cmd()
        .args(["run", "--dir", "d", "--shared", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("holds as a reader")
            && !said.contains("may write it under that claim")
            && !said.contains("--session"),
        "{said}"
    );
}

/// `FENCEPOST_SESSION` in the environment (which `run --session` gives its command)
/// is not taken for a `--session` by a shared claim, which takes none: it was
/// refused, "'--shared' cannot be used with '--session'" (a breaker). An explicit
/// `--session` with `--shared` is still a usage error (exit 1).
#[cfg(unix)]
#[test]
fn a_shared_claim_ignores_the_session_in_the_environment() {
    let s = Scratch::new();
    let shared = s
        .cmd()
        .env("FENCEPOST_SESSION", "abc")
        .args(["claim", "--lock", "x", "--shared"])
        .output()
        .unwrap();
    assert_eq!(shared.status.code(), Some(0), "{shared:?}");
    let explicit = s
        .cmd()
        .args(["claim", "--lock", "y", "--shared", "--session", "abc"])
        .output()
        .unwrap();
    assert_eq!(explicit.status.code(), Some(1), "{explicit:?}");
    assert!(
        String::from_utf8_lossy(&explicit.stderr).contains("cannot be used with"),
        "{explicit:?}"
    );
    let store = s.store().display().to_string();
    let script = format!("\"$FP\" --store '{store}' claim --lock z --shared");
    let output = s
        .cmd()
        .args([
            "run",
            "--lock",
            "w",
            "--session",
            "S",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}

/// A SIGTERM that reaches `run` just after its claim landed, before its command
/// exists (held open here by a debug-build test seam,
/// `FENCEPOST_TEST_PAUSE_AFTER_CLAIM_MS`), is kept and given to the command as it
/// starts: `run` ends with the command and releases. It killed `run` outright
/// there, leaving the lease held for its whole ttl (a breaker: 2 of 60 runs).
#[cfg(unix)]
#[test]
fn a_signal_just_after_the_claim_releases_it() {
    let s = Scratch::new();
    let mut run = s.spawn_cmd();
    run.env("FENCEPOST_TEST_PAUSE_AFTER_CLAIM_MS", "1500")
        .args(["run", "--lock", "x", "--ttl", "600000", "--"])
        .args(["sh", "-c", "sleep 30"]);
    let mut child = Background::spawn(&mut run);
    wait_until("run holds the lock", Duration::from_secs(10), || {
        s.entry("x").is_some_and(|e| e["state"] == "held")
    });
    crate::util::send_signal(child.id(), "TERM");
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert_eq!(s.entry("x").unwrap()["state"], "released");
}

/// The same, for a `run` killed in the moment after it started its command and
/// before its lease named the command's group (held open here by a debug-build
/// test seam, `FENCEPOST_TEST_PAUSE_AFTER_SPAWN_MS`). The claim said a group was
/// to come, so the waiter waits for the ttl rather than taking a dead `run`'s
/// lease at once; and the guard, forked before the command and told its group by
/// the command itself, stops it (TERM ignored, so killed after --grace). Before,
/// the waiter took over at once, and no guard existed yet to stop the command,
/// which wrote on beside the waiter's forever.
#[cfg(unix)]
#[test]
fn a_run_killed_before_naming_its_group_is_not_taken_over_early() {
    let s = Scratch::new();
    let first = writing_run(&s, &["--ttl", "4000", "--grace", "1000"], true);
    assert_nothing_written_after_the_successor_began(&s, first);
}

/// A `run` killed with SIGKILL is not taken over while its command still runs: its
/// records name the command's process group, and a waiter gets the lease only once
/// the guard has stopped that whole group (here a command that ignores SIGTERM,
/// killed after --grace). Before, the waiter took over at once and the two
/// commands wrote side by side for the whole grace (a breaker:
/// `A … B-start … A … B-end … A`).
#[cfg(unix)]
#[test]
fn a_killed_run_is_not_taken_over_while_its_command_runs() {
    let s = Scratch::new();
    let first = writing_run(&s, &["--ttl", "60000", "--grace", "1500"], false);
    s.wait_group_named("x");
    assert_nothing_written_after_the_successor_began(&s, first);
}

/// `run --lock x OPTIONS -- sh -c '<append A to log, ignoring SIGTERM>'` in the
/// background, once it has written; with `paused`, held by the debug-build seam
/// right after its command started (before its records name the group).
#[cfg(unix)]
fn writing_run(s: &Scratch, options: &[&str], paused: bool) -> Background {
    let mut first = s.spawn_cmd();
    if paused {
        first.env("FENCEPOST_TEST_PAUSE_AFTER_SPAWN_MS", "60000");
    }
    first
        .args(["run", "--lock", "x"])
        .args(options)
        .args([
            "--",
            "sh",
            "-c",
            r#"trap "" TERM; while :; do echo A >> log; sleep 0.02; done"#,
        ])
        .stderr(Stdio::null());
    let first = Background::spawn(&mut first);
    wait_until("the first command writes", Duration::from_secs(20), || {
        std::fs::read_to_string(s.path().join("log")).is_ok_and(|log| log.lines().count() >= 3)
    });
    first
}

/// SIGKILLs `first` (a [`writing_run`]), runs a second `run` that waits for the
/// lease and writes B twice, and asserts that no A follows the first B.
#[cfg(unix)]
fn assert_nothing_written_after_the_successor_began(s: &Scratch, mut first: Background) {
    first.kill_and_reap();
    let second = s
        .cmd()
        .args(["run", "--lock", "x", "--wait", "30000", "--"])
        .args(["sh", "-c", "echo B >> log; sleep 0.3; echo B >> log"])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    std::thread::sleep(Duration::from_millis(300));
    let log = std::fs::read_to_string(s.path().join("log")).unwrap();
    let from_b = log.find('B').expect("the second command wrote");
    assert!(
        !log[from_b..].contains('A'),
        "the first command wrote after the second began: {log:?}"
    );
}

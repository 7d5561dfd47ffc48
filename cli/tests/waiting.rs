//! Waiting and its end, as a person or a script sees it: the status line on a
//! terminal (under a real pseudo-terminal from `script(1)`), silence off one, the
//! give-up message, `--wait forever`; exit codes 126/127 and
//! `--conflict-exit-code`; `claim --hold` (issue 16).

use std::process::{Command, Stdio};
#[cfg(unix)]
use std::time::Duration;

use crate::util::{Scratch, child_bin, one_line_stderr, token_of};

/// Runs the binary with `args` under a pseudo-terminal (`script -qec`), in the
/// scratch directory with its store; returns everything the terminal showed.
fn on_a_terminal(s: &Scratch, args: &str) -> String {
    let command = format!(
        "{} --store {} {args}",
        crate::util::bin().display(),
        s.store().display()
    );
    let output = crate::util::scrubbed(Command::new("script"))
        .args(["-qec", &command, "/dev/null"])
        .current_dir(s.path())
        .env_remove("FENCEPOST_STORE")
        .stdin(Stdio::null())
        .output()
        .expect("running script(1) (util-linux) for a pseudo-terminal");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Issue 16: on a terminal the wait shows one status line, rewritten in place
/// (`\r` + erase line), naming what it waits for, who holds it and the time; it is
/// erased before the give-up message.
#[cfg(target_os = "linux")]
#[test]
fn a_wait_on_a_terminal_shows_a_status_line_and_clears_it() {
    let s = Scratch::new();
    s.claim("w", &["--owner", "alice"]);
    let screen = on_a_terminal(&s, "claim --lock w --wait 900");
    let erase = "\r\x1b[2K";
    let first = screen
        .find(erase)
        .unwrap_or_else(|| panic!("no status line: {screen:?}"));
    let line = &screen[first + erase.len()..];
    assert!(line.starts_with("fencepost: waiting 0."), "{screen:?}");
    assert!(
        line.contains("s of 0.9s for w, held by alice (pid "),
        "{screen:?}"
    );
    assert!(
        screen.matches(erase).count() >= 3,
        "not updated in place: {screen:?}"
    );
    // The last thing before the result is an erase, and no line break was printed
    // while waiting.
    let result = screen
        .rfind("fencepost: gave up after")
        .expect("no give-up message");
    assert!(screen[..result].ends_with(erase), "{screen:?}");
    assert!(!screen[..result].contains('\n'), "{screen:?}");
}

/// Issue 16: a wait that succeeds clears its line; the token follows on a clean line.
#[cfg(target_os = "linux")]
#[test]
fn a_successful_wait_on_a_terminal_ends_with_the_token_alone() {
    let s = Scratch::new();
    let _holder = s.running("w", &["sleep=1000"]);
    let screen = on_a_terminal(&s, "claim --lock w --wait 20000");
    let (waiting, result) = screen.rsplit_once("\r\x1b[2K").expect("no status line");
    assert!(waiting.contains("fencepost: waiting "), "{screen:?}");
    assert!(
        waiting.contains("(no limit)") || waiting.contains("of 20.0s"),
        "{screen:?}"
    );
    assert!(
        result
            .trim_end()
            .split_once('.')
            .is_some_and(|(token, secret)| token.parse::<u64>().is_ok() && secret.len() == 32),
        "the lease handle is not alone after the cleared line: {screen:?}"
    );
}

/// Issue 16: off a terminal nothing is printed while waiting; the result is one
/// line that says it waited, for how long, and who holds it until when.
#[test]
fn off_a_terminal_a_wait_prints_only_the_give_up_line() {
    let s = Scratch::new();
    s.claim("w", &["--owner", "alice"]);
    let output = s
        .cmd()
        .args(["claim", "--lock", "w", "--wait", "300"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let line = one_line_stderr(&output);
    assert!(line.starts_with("fencepost: gave up after 0."), "{line}");
    assert!(
        line.contains("s waiting for w (held by alice, pid "),
        "{line}"
    );
    assert!(line.contains("expires in"), "{line}");
    assert!(!line.contains("pass --wait MS"), "{line}");
    assert!(!line.contains('\x1b'), "{line}");
}

/// Issue 16: `--wait forever` waits for as long as it takes.
#[test]
fn wait_forever_waits_until_the_holder_is_done() {
    let s = Scratch::new();
    let _holder = s.running("w", &["sleep=1000"]);
    let output = s
        .cmd()
        .args(["claim", "--lock", "w", "--wait", "forever"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(token_of(&output) > 1);
    s.cmd()
        .args(["claim", "--lock", "v", "--wait", "always"])
        .assert()
        .code(1);
}

/// Issue 16: the shell's exit codes for a command that cannot start: 127 not
/// found, 126 not executable; the lease is released either way.
#[test]
fn run_of_a_missing_command_is_127_and_of_a_non_executable_126() {
    let s = Scratch::new();
    let output = s
        .cmd()
        .args(["run", "--lock", "x", "--", "./no-such-command-here"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(127));
    let stderr = one_line_stderr(&output);
    assert!(stderr.contains("cannot run ./no-such-command-here"));
    assert!(
        stderr.contains("check the command name and PATH"),
        "{stderr}"
    );
    std::fs::write(s.path().join("data.txt"), b"not a program").unwrap();
    let output = s
        .cmd()
        .args(["run", "--lock", "x", "--", "./data.txt"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(126));
    let stderr = one_line_stderr(&output);
    assert!(stderr.contains("cannot run ./data.txt"));
    // Found but not executable: PATH is not the problem (on Unix, the mode is).
    assert!(!stderr.contains("PATH"), "{stderr}");
    if cfg!(unix) {
        assert!(stderr.contains("chmod +x"), "{stderr}");
    }
    assert_eq!(s.entry("x").unwrap()["state"], "released");
}

/// Issue 16: `--conflict-exit-code N` (flock's -E) replaces 3 for a held resource
/// (claim and run) and for a lost run; 0 is refused.
#[test]
fn conflict_exit_code_replaces_3() {
    let s = Scratch::new();
    s.claim("x", &["--owner", "alice"]);
    s.cmd()
        .args(["claim", "--lock", "x", "--conflict-exit-code", "42"])
        .assert()
        .code(42);
    s.cmd()
        .args(["run", "--lock", "x", "--conflict-exit-code", "42", "--"])
        .arg(child_bin())
        .arg("exit=0")
        .assert()
        .code(42);
    // The child's own 3 stays 3: that is the point of the option.
    s.cmd()
        .args(["run", "--lock", "y", "--conflict-exit-code", "42", "--"])
        .arg(child_bin())
        .arg("exit=3")
        .assert()
        .code(3);
    // A lost run.
    s.cmd()
        .env("FP", crate::util::bin())
        .args(["run", "--lock", "z", "--conflict-exit-code", "42", "--"])
        .arg(child_bin())
        .args(["break=a loss for the test", "sleep=1000"])
        .assert()
        .code(42);
    s.cmd()
        .args(["claim", "--lock", "q", "--conflict-exit-code", "0"])
        .assert()
        .code(1);
}

/// Issue 16: `claim --hold` prints the token first, keeps the lease alive past 3
/// ttls, and releases it on SIGTERM (and on SIGINT), exiting 0. POSIX only: on
/// Windows the end is a console event, which a test without a console cannot send.
#[cfg(unix)]
#[test]
fn claim_hold_keeps_the_lease_until_terminated_then_releases() {
    for signal in ["TERM", "INT"] {
        let s = Scratch::new();
        // A ttl long enough that one renewal slowed by a loaded CI disk (a
        // renewal that lands after its ttl is given up, by design) does not end
        // the hold: what is pinned is "past 3 ttls", not how short a ttl can be.
        let (mut hold, handle) = s.hold("x", 1_500, false);
        let token = crate::util::token_of_handle(&handle);
        std::thread::sleep(Duration::from_millis(3 * 1_500 + 300));
        s.cmd()
            .args(["check", "--lock", "x", &token.to_string()])
            .assert()
            .code(0);
        s.cmd().args(["claim", "--lock", "x"]).assert().code(3);
        crate::util::send_signal(hold.id(), signal);
        let status = hold.0.wait().unwrap();
        assert_eq!(status.code(), Some(0), "SIG{signal}");
        assert_eq!(s.entry("x").unwrap()["state"], "released", "SIG{signal}");
    }
}

/// Issue 16: a hold whose lease is taken away reports it at once and exits 3.
#[test]
fn claim_hold_reports_a_loss_and_exits_3() {
    let s = Scratch::new();
    let (mut hold, _) = s.hold("x", 30_000, true);
    // An operator's break (a release through the hold's own handle would end the
    // hold without a loss: `cli/tests/authority.rs`).
    s.cmd()
        .args(["break", "--lock", "x", "--reason", "a loss for the test"])
        .assert()
        .code(0);
    let status = hold.0.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    let stderr = std::io::read_to_string(hold.0.stderr.take().unwrap()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(
        stderr.starts_with("fencepost: lease on x lost: "),
        "{stderr:?}"
    );
}

/// Issue 16: the child runs in its own process group, and on a terminal that group
/// is made the foreground one, so an interactive child reads the terminal (instead
/// of being stopped by SIGTTIN) and `run` takes the terminal back after it.
#[cfg(target_os = "linux")]
#[test]
fn an_interactive_child_reads_the_terminal() {
    let s = Scratch::new();
    let command = format!(
        "{} --store {} run --lock t -- sh -c 'read line; echo got:$line'; echo run-exit:$?",
        crate::util::bin().display(),
        s.store().display()
    );
    let mut script = crate::util::scrubbed(Command::new("script"))
        .args(["-qec", &command, "/dev/null"])
        .current_dir(s.path())
        .env_remove("FENCEPOST_STORE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("running script(1)");
    let mut stdin = script.stdin.take().unwrap();
    s.wait_held("t");
    std::io::Write::write_all(&mut stdin, b"hello\n").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while script.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            // Leave nothing behind: the run (its pid is in its record) and script.
            if let Some(pid) = s.entry("t").and_then(|e| e["pid"].as_u64()) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            let _ = script.kill();
            panic!("the interactive child never read the terminal (stopped in the background?)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stdin);
    let screen = std::io::read_to_string(script.stdout.take().unwrap()).unwrap();
    assert!(screen.contains("got:hello"), "{screen:?}");
    assert!(screen.contains("run-exit:0"), "{screen:?}");
}

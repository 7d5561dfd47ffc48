//! Helpers shared by the CLI tests: a scratch directory with its own store, and
//! commands for the real `fencepost` binary with a clean environment.

use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test.
pub fn bin() -> &'static Path {
    assert_cmd::cargo::cargo_bin!("fencepost")
}

/// Variables of ours that must never leak from the developer's (or a `fencepost
/// run`'s) environment into a test.
const OUR_VARIABLES: [&str; 12] = [
    "FENCEPOST_SESSION",
    "FENCEPOST_HOOKS",
    "FENCEPOST_GUARD",
    // Inside Claude Code these name its session (the guard reads them).
    "CLAUDECODE",
    "CLAUDE_CODE_SESSION_ID",
    "FENCEPOST_STORE",
    "FENCEPOST_OWNER",
    "FENCEPOST_TOKEN",
    "FENCEPOST_LEASE",
    "FENCEPOST_RESOURCE",
    "FENCEPOST_LOCK",
    "FENCEPOST_FILE",
];

/// A fresh temporary directory, and a store inside it (`<dir>/store`) that no other
/// test shares. Never the repository's own store.
pub struct Scratch {
    dir: tempfile::TempDir,
    store: PathBuf,
}

impl Scratch {
    pub fn new() -> Scratch {
        let dir = tempfile::tempdir().expect("creating a scratch directory");
        let store = dir.path().join("store");
        Scratch { dir, store }
    }

    /// The scratch directory (the working directory of every command).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The store directory passed with `--store`.
    pub fn store(&self) -> &Path {
        &self.store
    }

    /// `fencepost --store <store>` in the scratch directory.
    pub fn cmd(&self) -> assert_cmd::Command {
        let mut cmd = self.bare_cmd(self.path());
        cmd.arg("--store").arg(&self.store);
        cmd
    }

    /// `fencepost` without `--store`, in `cwd`: the store is located from the
    /// resource. The per-user store is the scratch directory's `user-state/fencepost`
    /// (`XDG_STATE_HOME`; `LOCALAPPDATA` on Windows), never the developer's own.
    pub fn bare_cmd(&self, cwd: &Path) -> assert_cmd::Command {
        let mut cmd = assert_cmd::Command::new(bin());
        cmd.current_dir(cwd)
            .env("XDG_STATE_HOME", self.user_state())
            .env("LOCALAPPDATA", self.user_state())
            .env("FP", bin());
        for name in OUR_VARIABLES {
            cmd.env_remove(name);
        }
        cmd
    }

    /// The `XDG_STATE_HOME` (and `LOCALAPPDATA`) of [`Scratch::bare_cmd`]; the
    /// per-user store is `fencepost/` in it.
    pub fn user_state(&self) -> PathBuf {
        self.path().join("user-state")
    }

    /// `fencepost --store <store>` as a std command, for processes a test runs in
    /// the background. `FP` names the binary for shell scripts run by `run`.
    pub fn spawn_cmd(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(bin());
        cmd.current_dir(self.path())
            .env("FP", bin())
            .env("XDG_STATE_HOME", self.user_state())
            .env("LOCALAPPDATA", self.user_state())
            .arg("--store")
            .arg(&self.store);
        for name in OUR_VARIABLES {
            cmd.env_remove(name);
        }
        cmd
    }

    /// Claims `lock` and returns the token.
    pub fn claim(&self, lock: &str, extra: &[&str]) -> u64 {
        self.claim_handle(lock, extra).0
    }

    /// Claims `lock` and returns the token and the whole handle `claim` printed.
    pub fn claim_handle(&self, lock: &str, extra: &[&str]) -> (u64, String) {
        let output = self
            .cmd()
            .args(["claim", "--lock", lock])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "claim failed: {output:?}");
        (token_of(&output), handle_of(&output))
    }

    /// Claims the file `path` (relative to the scratch directory) and returns the token.
    pub fn claim_file(&self, path: &str) -> u64 {
        self.claim_file_handle(path).0
    }

    /// Claims the file `path` (ttl 60 s) and returns the token and the handle.
    pub fn claim_file_handle(&self, path: &str) -> (u64, String) {
        let output = self
            .cmd()
            .args(["claim", "--file", path, "--ttl", "60000"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "claim failed: {output:?}");
        (token_of(&output), handle_of(&output))
    }

    /// `status --json`, parsed.
    pub fn status(&self) -> Vec<Value> {
        let output = self.cmd().args(["status", "--json"]).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "status failed: {output:?}");
        match json_of(&output) {
            Value::Array(entries) => entries,
            other => panic!("status --json is not an array: {other}"),
        }
    }

    /// The status entry whose label is `label`.
    pub fn entry(&self, label: &str) -> Option<Value> {
        self.status().into_iter().find(|e| e["label"] == label)
    }
}

/// The lease handle a `claim` or `renew` printed: the whole of stdout, one line
/// `TOKEN.SECRET` (32 lowercase hex digits of secret).
pub fn handle_of(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.ends_with('\n') && stdout.lines().count() == 1,
        "expected the handle alone on one line, got {stdout:?}"
    );
    let handle = stdout.trim_end().to_string();
    let (token, secret) = handle
        .split_once('.')
        .unwrap_or_else(|| panic!("stdout is not a handle: {stdout:?}"));
    assert!(token.parse::<u64>().is_ok(), "no token in {stdout:?}");
    assert!(
        secret.len() == 32
            && secret
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "no secret in {stdout:?}"
    );
    handle
}

/// The token of the handle a `claim` or `renew` printed.
pub fn token_of(output: &Output) -> u64 {
    let handle = handle_of(output);
    handle.split_once('.').unwrap().0.parse().unwrap()
}

/// Stdout parsed as exactly one JSON value on one line.
pub fn json_of(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout.lines().count(),
        1,
        "expected one line of JSON: {stdout:?}"
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("bad JSON {stdout:?}: {e}"))
}

/// Stderr, asserted to be one line starting `fencepost: `.
pub fn one_line_stderr(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        stderr.starts_with("fencepost: ") && stderr.ends_with('\n') && stderr.lines().count() == 1,
        "expected one line on stderr prefixed `fencepost: `, got {stderr:?}"
    );
    stderr
}

/// Polls `condition` every 10 ms until it holds; panics with `what` after `limit`.
pub fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A background process killed (SIGKILL) and reaped when the test ends, even when
/// it fails, so no test leaves a `fencepost run` behind.
pub struct Background(pub Child);

impl Background {
    pub fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends `signal` (a name such as `TERM`) to `pid` with kill(1).
#[cfg(unix)]
pub fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("running kill");
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// Kills a process that `run` left orphaned, named by a pid file its shell wrote
/// (`echo $$ > pidfile; exec sleep 30`), when the test ends.
#[cfg(unix)]
pub struct PidFileGuard(pub PathBuf);

#[cfg(unix)]
impl Drop for PidFileGuard {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.0) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", pid.trim()])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

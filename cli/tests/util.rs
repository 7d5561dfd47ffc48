//! Helpers shared by the CLI tests: a scratch directory with its own store, and
//! commands for the real `fencepost` binary with a clean environment.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test.
pub fn bin() -> &'static Path {
    assert_cmd::cargo::cargo_bin!("fencepost")
}

/// The portable child for `run`: `fencepost-test-child STEP…` (tests/child/main.rs).
pub fn child_bin() -> &'static Path {
    assert_cmd::cargo::cargo_bin!("fencepost-test-child")
}

/// `ERROR_INTERNAL_ERROR`, which Wine's `CreateProcess` returns now and then under
/// load (docs/windows.md).
const ERROR_INTERNAL_ERROR: i32 = 1359;

/// Spawns `command`, retrying Wine's rare `ERROR_INTERNAL_ERROR`; panics on any
/// other failure.
pub fn spawn(command: &mut std::process::Command) -> Child {
    let mut attempts = 0;
    loop {
        match command.spawn() {
            Ok(child) => return child,
            Err(e) if e.raw_os_error() == Some(ERROR_INTERNAL_ERROR) && attempts < 5 => {
                attempts += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("cannot start {command:?}: {e}"),
        }
    }
}

/// Creates the file a `fencepost-test-child wait-for=FILE` waits for when the test
/// ends (or when dropped earlier), so no child outlives its test — also one that a
/// killed `run` left orphaned.
pub struct StopFile(pub PathBuf);

impl Drop for StopFile {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, b"");
    }
}

/// Variables of ours that must never leak from the developer's (or a `fencepost
/// run`'s) environment into a test.
const OUR_VARIABLES: [&str; 16] = [
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
    "FENCEPOST_DIR",
    "FENCEPOST_SLOT",
    // Changes what a claim does about a dead holder (the takeover tests rely on it).
    "FENCEPOST_NO_DEAD_HOLDER_TAKEOVER",
    "FENCEPOST_LOG",
];

/// `command` without any of our variables: for the processes a test starts
/// directly (`sh` scripts, `git` whose hooks run `fencepost`, the test child),
/// so that none inherits the developer's store, session or switches.
pub fn scrubbed(mut command: std::process::Command) -> std::process::Command {
    for name in OUR_VARIABLES {
        command.env_remove(name);
    }
    command
}

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

    /// The directory of the only key in the store (`claims/<key>`).
    pub fn only_key_dir(&self) -> PathBuf {
        let mut keys = std::fs::read_dir(self.store.join("claims"))
            .expect("the store has no claims directory")
            .map(|e| e.unwrap().path());
        let key = keys.next().expect("the store has no key");
        assert!(keys.next().is_none(), "the store has more than one key");
        key
    }

    /// `run --lock LOCK -- fencepost-test-child STEPS…` in the background, once
    /// `status` shows LOCK held.
    pub fn running(&self, lock: &str, steps: &[&str]) -> Background {
        let mut run = self.spawn_cmd();
        run.args(["run", "--lock", lock, "--"])
            .arg(child_bin())
            .args(steps);
        let run = Background::spawn(&mut run);
        self.wait_held(lock);
        run
    }

    /// Waits (20 s at most) until the `run` holding `label` has named its
    /// command's process group in its records (the renewal right after the command
    /// started: generation 2 of a fresh lease). Killed before that, a `run`'s lease
    /// waits out its ttl, since its command may still run (`cli/tests/run.rs`,
    /// `a_run_killed_before_naming_its_group_is_not_taken_over_early`); a test of
    /// the takeover of a killed `run` waits for this first. POSIX only: elsewhere
    /// a `run` names no group.
    #[cfg(unix)]
    pub fn wait_group_named(&self, label: &str) {
        wait_until(
            "the run names its command's group",
            std::time::Duration::from_secs(20),
            || {
                self.entry(label).is_some_and(|e| {
                    e["live"] == true && e["generation"].as_u64().is_some_and(|g| g >= 2)
                })
            },
        );
    }

    /// Waits (10 s at most) until `status` shows `label` held; returns its token.
    pub fn wait_held(&self, label: &str) -> u64 {
        let mut token = None;
        wait_until(&format!("{label} is held"), Duration::from_secs(10), || {
            token = self
                .entry(label)
                .filter(|e| e["state"] == "held")
                .and_then(|e| e["token"].as_u64());
            token.is_some()
        });
        token.unwrap()
    }

    /// `claim --lock LOCK --ttl TTL_MS --hold` in the background, once it printed
    /// its lease handle: the process (stdout read, stderr piped when
    /// `piped_stderr`) and the handle.
    pub fn hold(&self, lock: &str, ttl_ms: u64, piped_stderr: bool) -> (Background, String) {
        let mut hold = self.spawn_cmd();
        hold.args([
            "claim",
            "--lock",
            lock,
            "--ttl",
            &ttl_ms.to_string(),
            "--hold",
        ])
        .stdout(Stdio::piped());
        if piped_stderr {
            hold.stderr(Stdio::piped());
        }
        let mut hold = Background::spawn(&mut hold);
        let mut line = String::new();
        BufReader::new(hold.0.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let handle = line.trim().to_string();
        assert!(
            handle
                .split_once('.')
                .is_some_and(|(t, _)| t.parse::<u64>().is_ok()),
            "claim --hold printed no lease handle first: {line:?}"
        );
        (hold, handle)
    }
}

/// The token of a lease handle `TOKEN.SECRET`.
pub fn token_of_handle(handle: &str) -> u64 {
    handle
        .split_once('.')
        .and_then(|(token, _)| token.parse().ok())
        .unwrap_or_else(|| panic!("not a lease handle: {handle:?}"))
}

/// `fs::canonicalize(path)` spelt as fencepost shows a resolved path: on Windows
/// without the verbatim prefix (`\\?\C:\x` is shown `C:\x`, `\\?\UNC\srv\share`
/// `\\srv\share`), as labels, `status` and FENCEPOST_FILE spell it.
pub fn resolved(path: &Path) -> PathBuf {
    let canonical = std::fs::canonicalize(path).expect("canonicalizing a test path");
    if cfg!(windows) {
        let text = canonical.to_string_lossy();
        if let Some(rest) = text.strip_prefix(r"\\?\UNC\") {
            return PathBuf::from(format!(r"\\{rest}"));
        }
        if let Some(rest) = text.strip_prefix(r"\\?\")
            && rest.as_bytes().get(1) == Some(&b':')
        {
            return PathBuf::from(rest);
        }
    }
    canonical
}

/// Claims lock `name` (60 s) through the library, owner `library`: for names longer
/// than a Windows command line may be (CreateProcessW takes 32,767 characters).
pub fn claim_through_the_library(s: &Scratch, name: &str) {
    let store = fencepost::Store::new(fencepost_fs::FsStore::open(s.store()).unwrap());
    store
        .acquire(
            &fencepost::Resource::lock(name),
            &fencepost::AcquireOptions::new(60_000).owner("library"),
        )
        .unwrap();
}

/// Writes through the library a lease on lock `name` (owner `library`) that
/// expired a minute ago: granted by a clock stepped a minute back, with a ttl of
/// 1 s. Returns its token. Unlike a `claim --ttl 100` and a sleep, this cannot
/// fail on a loaded machine or under Wine, where a claim may take longer than a
/// short ttl to confirm and then lapses (`ClaimLapsed`).
pub fn expired_claim_through_the_library(s: &Scratch, name: &str) -> u64 {
    let behind = fencepost::SteppedClock::new();
    behind.step_ms(-60_000);
    let store =
        fencepost::Store::with_clock(fencepost_fs::FsStore::open(s.store()).unwrap(), behind);
    store
        .acquire(
            &fencepost::Resource::lock(name),
            &fencepost::AcquireOptions::new(1_000).owner("library"),
        )
        .unwrap()
        .token()
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
    // A run of spaces is a broken line continuation in the source (a new user
    // found "claim the file itself              (--file)"); shorter runs may be
    // input the message quotes.
    assert!(!stderr.contains("    "), "a run of spaces in {stderr:?}");
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
    /// Starts `command` in the background ([`spawn`]: Wine's rare
    /// `ERROR_INTERNAL_ERROR` is retried).
    pub fn spawn(command: &mut std::process::Command) -> Background {
        Background(spawn(command))
    }

    pub fn id(&self) -> u32 {
        self.0.id()
    }

    /// Kills it (SIGKILL; `TerminateProcess` on Windows), so it releases nothing,
    /// and reaps it.
    pub fn kill_and_reap(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }

    /// The first line it writes to its (piped) stderr, without the newline; panics
    /// naming `what` when it ends first.
    pub fn first_stderr_line(&mut self, what: &str) -> String {
        let stderr = self.0.stderr.take().expect("stderr is not piped");
        BufReader::new(stderr)
            .lines()
            .next()
            .unwrap_or_else(|| panic!("it ended without {what}"))
            .unwrap()
    }
}

impl Background {
    /// Waits for it to end on its own and returns its exit status with what it
    /// wrote to its (piped) stdout and stderr.
    pub fn finish(&mut self) -> Output {
        use std::io::Read;
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        if let Some(mut pipe) = self.0.stdout.take() {
            pipe.read_to_end(&mut stdout).unwrap();
        }
        if let Some(mut pipe) = self.0.stderr.take() {
            pipe.read_to_end(&mut stderr).unwrap();
        }
        let status = self.0.wait().unwrap();
        Output {
            status,
            stdout,
            stderr,
        }
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

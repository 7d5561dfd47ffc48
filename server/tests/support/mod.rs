//! Real `fencepost-server` child processes, driven over their stdio by rmcp's
//! client, or by raw JSON-RPC lines.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// The server binary built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_fencepost-server");

/// Variables the server reads (store, owner, session, log filter) or that name a
/// Claude Code session: none may leak from the developer's environment (or from a
/// `fencepost run` around the test run) into a server under test.
const OUR_VARIABLES: [&str; 6] = [
    "FENCEPOST_STORE",
    "FENCEPOST_OWNER",
    "FENCEPOST_SESSION",
    "FENCEPOST_LOG",
    "CLAUDECODE",
    "CLAUDE_CODE_SESSION_ID",
];

/// `command` without any of [`OUR_VARIABLES`]; set what a test needs afterwards.
pub fn scrubbed(command: &mut std::process::Command) -> &mut std::process::Command {
    for name in OUR_VARIABLES {
        command.env_remove(name);
    }
    command
}

/// A scratch directory holding a work tree `root/` (with `root/sub/`), its store
/// `root/.fencepost`, and `outside/`, a sibling that no server may touch.
pub struct Tree {
    _dir: tempfile::TempDir,
    /// The work tree the servers are rooted at (canonical).
    pub root: PathBuf,
    /// The store, inside the root.
    pub store: PathBuf,
    /// A directory outside the root.
    pub outside: PathBuf,
}

impl Tree {
    pub fn new() -> Tree {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical temp dir");
        // As fencepost shows resolved paths: on Windows without the verbatim prefix
        // that canonicalize adds (`\\?\C:\x` is `C:\x`).
        let base = match base.to_str().and_then(|text| text.strip_prefix(r"\\?\")) {
            Some(rest) if cfg!(windows) && rest.as_bytes().get(1) == Some(&b':') => rest.into(),
            _ => base,
        };
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        Tree {
            _dir: dir,
            store: root.join(".fencepost"),
            root,
            outside,
        }
    }

    /// Every path under `dir`, relative to it, sorted.
    pub fn listing(dir: &Path) -> Vec<String> {
        fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                out.push(path.strip_prefix(base).unwrap().display().to_string());
                let is_real_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
                if is_real_dir {
                    walk(base, &path, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(dir, dir, &mut out);
        out.sort();
        out
    }
}

fn server_command(tree: &Tree, owner: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(BIN);
    command
        .arg("--root")
        .arg(&tree.root)
        .arg("--store")
        .arg(&tree.store)
        .arg("--owner")
        .arg(owner);
    scrubbed(command.as_std_mut());
    command
        .env("FENCEPOST_LOG", "error")
        // The server's cwd must not matter: paths are relative to --root.
        .current_dir(&tree.outside);
    command
}

/// A server child process with an rmcp client connected to its stdio.
pub struct Server {
    client: RunningService<RoleClient, ()>,
    pid: u32,
}

/// What a tool call returned: its structured content, or the tool error's text.
pub type Outcome = Result<Value, String>;

impl Server {
    /// Spawns `fencepost-server` on `tree` and completes the MCP handshake.
    pub async fn start(tree: &Tree, owner: &str) -> Server {
        Self::spawn(server_command(tree, owner)).await
    }

    /// As [`Server::start`], with `--session SESSION`.
    pub async fn start_in_session(tree: &Tree, owner: &str, session: &str) -> Server {
        let mut command = server_command(tree, owner);
        command.arg("--session").arg(session);
        Self::spawn(command).await
    }

    /// As [`Server::start`], with these environment variables set.
    pub async fn start_with_env(tree: &Tree, owner: &str, env: &[(&str, &str)]) -> Server {
        let mut command = server_command(tree, owner);
        for (name, value) in env {
            command.env(name, value);
        }
        Self::spawn(command).await
    }

    async fn spawn(command: tokio::process::Command) -> Server {
        let transport = TokioChildProcess::new(command).expect("spawn server");
        let pid = transport.id().expect("server pid");
        let client = ().serve(transport).await.expect("MCP handshake");
        Server { client, pid }
    }

    /// Calls `tool` with `arguments` (a JSON object).
    pub async fn call(&self, tool: &'static str, arguments: Value) -> Outcome {
        let Value::Object(arguments) = arguments else {
            panic!("arguments must be an object");
        };
        let result = self
            .client
            .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
            .await
            .unwrap_or_else(|e| panic!("{tool}: JSON-RPC failure: {e}"));
        let text = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        if result.is_error == Some(true) {
            assert!(
                !text.contains('\n'),
                "{tool}: error is not one line: {text:?}"
            );
            assert!(!text.is_empty(), "{tool}: error without a reason");
            Err(text)
        } else {
            let structured = result
                .structured_content
                .unwrap_or_else(|| panic!("{tool}: no structured content: {text}"));
            // The readable text form is the same JSON.
            assert_eq!(
                serde_json::from_str::<Value>(&text).ok().as_ref(),
                Some(&structured)
            );
            Ok(structured)
        }
    }

    /// `claim` of a lock; returns the token.
    pub async fn claim_lock(&self, name: &str, ttl_ms: u64) -> u64 {
        let result = self
            .call("claim", json!({"resource": lock(name), "ttl_ms": ttl_ms}))
            .await
            .unwrap_or_else(|e| panic!("claim {name}: {e}"));
        result["token"].as_u64().expect("token")
    }

    /// `assert` → `authorized`.
    pub async fn authorized(&self, resource: Value, token: u64) -> bool {
        let result = self
            .call("assert", json!({"resource": resource, "token": token}))
            .await
            .unwrap_or_else(|e| panic!("assert: {e}"));
        result["authorized"].as_bool().expect("authorized")
    }

    /// Kills the server process with SIGKILL: no exit hook runs.
    #[cfg(unix)]
    pub fn kill9(&self) {
        // The shell's builtin `kill`: no dependence on a procps binary.
        let status = std::process::Command::new("sh")
            .args(["-c", &format!("kill -9 {}", self.pid)])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Closes the client side (stdin EOF) and waits for the server to exit.
    pub async fn disconnect(self) {
        let _ = self.client.cancel().await;
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

/// A lock resource argument.
pub fn lock(name: &str) -> Value {
    json!({"kind": "lock", "target": name})
}

/// A file resource argument.
pub fn file(path: &str) -> Value {
    json!({"kind": "file", "target": path})
}

/// A server driven by raw JSON-RPC lines, to see exactly what crosses stdio.
pub struct Raw {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    /// The read end of the server's stderr pipe when a test keeps it open unread.
    _stderr: Option<std::process::ChildStderr>,
}

impl Raw {
    pub fn start(tree: &Tree) -> Raw {
        let mut command = std::process::Command::new(BIN);
        scrubbed(&mut command)
            .env("FENCEPOST_LOG", "error")
            .stderr(Stdio::null());
        Self::spawn(tree, command)
    }

    /// As [`Raw::start`], the server claiming for `session` (`--session`).
    pub fn start_with_session(tree: &Tree, session: &str) -> Raw {
        let mut command = std::process::Command::new(BIN);
        scrubbed(&mut command)
            .env("FENCEPOST_LOG", "error")
            .stderr(Stdio::null())
            .arg("--session")
            .arg(session);
        Self::spawn(tree, command)
    }

    /// As [`Raw::start`] with the default log level (a line per tool call), and the
    /// server's stderr a pipe that nobody reads: as a client that ignores the
    /// server's log.
    pub fn start_with_stderr_unread(tree: &Tree) -> Raw {
        let mut command = std::process::Command::new(BIN);
        scrubbed(&mut command).stderr(Stdio::piped());
        let mut raw = Self::spawn(tree, command);
        raw._stderr = raw.child.stderr.take();
        raw
    }

    fn spawn(tree: &Tree, mut command: std::process::Command) -> Raw {
        let mut child = command
            .arg("--root")
            .arg(&tree.root)
            .arg("--store")
            .arg(&tree.store)
            .current_dir(&tree.outside)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Raw {
            child,
            stdin,
            lines,
            _stderr: None,
        }
    }

    /// Writes one line as is.
    pub fn send_line(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Writes `bytes` and a newline, as they are (not necessarily UTF-8).
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Writes one JSON-RPC message.
    pub fn send(&mut self, message: Value) {
        self.send_line(&message.to_string());
    }

    /// The next line on stdout, which must be one JSON value; None after 10 s.
    pub fn next(&mut self) -> Option<Value> {
        match self.lines.recv_timeout(Duration::from_secs(10)) {
            Ok(line) => Some(
                serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line:?}")),
            ),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }

    /// `initialize` and `notifications/initialized`; returns the initialize result.
    pub fn initialize(&mut self) -> Value {
        self.send(json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"}
            }
        }));
        let response = self.next().expect("initialize response");
        assert_eq!(response["id"], 1, "{response}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        response["result"].clone()
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

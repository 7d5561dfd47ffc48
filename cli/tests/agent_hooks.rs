//! `fencepost hook AGENT` (issue 15): the agents' documented payloads
//! (tests/fixtures/hooks, with their sources), claims for the payload's session,
//! blocks in the agent's protocol, and failing closed.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::util::Scratch;

/// The fixtures of each agent's edit tools.
const EDIT_FIXTURES: [(&str, &str); 6] = [
    ("claude-code", "claude-code-Edit.json"),
    ("claude-code", "claude-code-Write.json"),
    ("claude-code", "claude-code-MultiEdit.json"),
    ("claude-code", "claude-code-NotebookEdit.json"),
    ("gemini", "gemini-write_file.json"),
    ("gemini", "gemini-replace.json"),
];

fn fixture(name: &str, session: &str, cwd: &Path, path: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hooks");
    let text = std::fs::read_to_string(dir.join(name)).unwrap();
    let escape = |s: &str| {
        let quoted = serde_json::to_string(s).unwrap();
        quoted[1..quoted.len() - 1].to_string()
    };
    text.replace("{{SESSION}}", &escape(session))
        .replace("{{CWD}}", &escape(&cwd.display().to_string()))
        .replace("{{PATH}}", &escape(path))
}

/// A git repository in a scratch directory: repo/ holding src/a.rs.
pub struct Repo {
    pub scratch: Scratch,
    pub root: PathBuf,
}

impl Repo {
    pub fn new() -> Repo {
        let scratch = Scratch::new();
        let root = scratch.path().canonicalize().unwrap().join("repo");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "fn old() {}\n").unwrap();
        git(&root, &["init", "-q"]);
        Repo { scratch, root }
    }

    /// Runs `fencepost hook AGENT` in `cwd` with `payload` on stdin (the store is
    /// located: the repository's, in its git directory).
    pub fn hook_in(&self, cwd: &Path, agent: &str, payload: &str, env: &[(&str, &str)]) -> Output {
        let mut cmd = self.scratch.bare_cmd(cwd);
        cmd.args(["hook", agent]).write_stdin(payload.to_string());
        cmd.env_remove("FENCEPOST_HOOKS")
            .env_remove("FENCEPOST_SESSION")
            .env_remove("CLAUDECODE")
            .env_remove("CLAUDE_CODE_SESSION_ID");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// An edit through `fixture` by `session` of `path`, from the repository's root.
    pub fn edit(&self, fixture_name: &str, session: &str, path: &str) -> Output {
        let agent = fixture_name.split("-").next().unwrap();
        let agent = if agent == "claude" {
            "claude-code"
        } else {
            agent
        };
        let payload = fixture(fixture_name, session, &self.root, path);
        self.hook_in(&self.root, agent, &payload, &[])
    }

    /// `fencepost claim ARGS --session SESSION --ttl 60000` from the root: a claim
    /// another process of a session makes (its `run`, its MCP server).
    pub fn claim_for(&self, args: &[&str], session: &str) -> Output {
        self.scratch
            .bare_cmd(&self.root)
            .arg("claim")
            .args(args)
            .args(["--session", session, "--ttl", "60000"])
            .output()
            .unwrap()
    }

    /// `status --json` of the repository's store.
    pub fn status(&self) -> Vec<serde_json::Value> {
        let output = self
            .scratch
            .bare_cmd(&self.root)
            .args(["status", "--json"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        serde_json::from_slice::<Vec<serde_json::Value>>(&output.stdout).unwrap()
    }

    /// The live file claim on `path` (absolute), if any: (token, owner).
    pub fn claim_on(&self, path: &Path) -> Option<(u64, String)> {
        self.status()
            .into_iter()
            .find(|e| e["label"] == path.display().to_string() && e["live"] == true)
            .map(|e| {
                // Who holds it, as messages name it: the owner and its session's tag.
                let owner = e["owner"].as_str().unwrap();
                let who = match e["session"].as_str() {
                    Some(tag) => format!("{owner} (session {tag})"),
                    None => owner.to_string(),
                };
                (e["token"].as_u64().unwrap(), who)
            })
    }
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = crate::util::scrubbed(std::process::Command::new("git"))
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// SessionEnd of claude-code session `session` from the repository's root,
/// asserted allowed, and nothing left held in the store; its output.
fn end_session(repo: &Repo, session: &str) -> Output {
    let end = fixture("claude-code-SessionEnd.json", session, &repo.root, "");
    let out = repo.hook_in(&repo.root, "claude-code", &end, &[]);
    assert_allowed(&out, "claude-code");
    let live: Vec<_> = repo
        .status()
        .into_iter()
        .filter(|e| e["live"] == true)
        .collect();
    assert!(
        live.is_empty(),
        "still held after the session's end: {live:?}"
    );
    out
}

fn assert_allowed(output: &Output, agent: &str) {
    assert_eq!(output.status.code(), Some(0), "not allowed: {output:?}");
    let expected = if agent == "gemini" { "{}\n" } else { "" };
    assert_eq!(String::from_utf8_lossy(&output.stdout), expected);
}

fn assert_blocked(output: &Output) -> String {
    // Both agents: exit 2 blocks and hands stderr to the model; nothing on stdout.
    assert_eq!(output.status.code(), Some(2), "not blocked: {output:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
    stderr(output)
}

/// A reason that refuses an edit by the session's own claim: names the path, says
/// the claim is this session's, never another's, and gives a next step.
fn assert_refused_as_own(said: &str, path: &str) {
    assert!(said.contains(path), "names the path: {said}");
    assert!(
        said.contains("this same session"),
        "says it is its own: {said}"
    );
    assert!(
        !said.contains("another agent session"),
        "not another's: {said}"
    );
    assert!(
        said.contains("try this edit again after"),
        "a next step: {said}"
    );
    assert!(
        !said.contains("--holder"),
        "never acting as a holder: {said}"
    );
}

#[test]
fn every_edit_tool_claims_for_its_session_and_blocks_other_sessions() {
    for (agent, name) in EDIT_FIXTURES {
        let repo = Repo::new();
        let file = repo.root.join("src/a.rs");
        // Unheld: allowed, and claimed for the session.
        let first = repo.edit(name, "s1", "src/a.rs");
        assert_allowed(&first, agent);
        let (token, owner) = repo.claim_on(&file).expect("claimed");
        // The owner names the session by its tag: whoever knows the id can act
        // as the session, and owners are shown to everyone.
        let tag = fencepost::SessionTag::of(&format!("{agent}:s1"));
        assert!(owner.contains(tag.as_str()), "{name}: owner {owner}");
        assert!(
            !owner.contains(&format!("{agent}:s1")),
            "{name}: owner {owner}"
        );
        // The same session again (absolute path this time): allowed, same token.
        let again = repo.edit(name, "s1", &file.display().to_string());
        assert_allowed(&again, agent);
        assert_eq!(repo.claim_on(&file).unwrap().0, token, "{name}");
        // Another session: blocked with a reason naming the holder and the way on.
        let other = repo.edit(name, "s2", "src/a.rs");
        let reason = assert_blocked(&other);
        assert!(reason.contains(tag.as_str()), "{name}: {reason}");
        assert!(
            !reason.contains(&format!("{agent}:s1")),
            "the reason hands the other model the holder's session id: {reason}"
        );
        for args in [&["status"][..], &["status", "--json"]] {
            let shown = repo
                .scratch
                .bare_cmd(&repo.root)
                .args(args)
                .output()
                .unwrap();
            let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
            assert!(
                !shown.contains(&format!("{agent}:s1")),
                "{args:?} shows the id: {shown}"
            );
        }
        assert!(reason.contains(&file.display().to_string()), "{reason}");
        assert!(reason.contains("until 20"), "{reason}");
        assert!(reason.contains("Work on other files"), "{reason}");
        assert!(reason.contains("ask the human"), "{reason}");
        assert!(
            !reason.contains("release"),
            "never suggests acting as the holder: {reason}"
        );
        assert_eq!(
            repo.claim_on(&file).unwrap().0,
            token,
            "{name}: nothing changed"
        );
    }
}

#[test]
fn the_other_session_is_blocked_by_a_claim_from_the_cli_too() {
    let repo = Repo::new();
    let claim = repo
        .scratch
        .bare_cmd(&repo.root)
        .args([
            "claim", "--file", "src/a.rs", "--owner", "ci", "--ttl", "60000",
        ])
        .output()
        .unwrap();
    assert_eq!(claim.status.code(), Some(0), "{claim:?}");
    let reason = assert_blocked(&repo.edit("claude-code-Edit.json", "s1", "src/a.rs"));
    assert!(reason.contains("ci (pid "), "{reason}");
}

#[test]
fn a_payload_it_cannot_read_blocks() {
    let repo = Repo::new();
    for payload in [
        "",
        "not json",
        "[1, 2]",
        r#"{"hook_event_name": "PreToolUse", "tool_name": "Edit", "tool_input": {"file_path": "src/a.rs"}}"#,
        r#"{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": {}}"#,
    ] {
        for agent in ["claude-code", "gemini"] {
            let payload = payload
                .replace(
                    "PreToolUse",
                    if agent == "gemini" {
                        "BeforeTool"
                    } else {
                        "PreToolUse"
                    },
                )
                .replace(
                    "\"Edit\"",
                    if agent == "gemini" {
                        "\"replace\""
                    } else {
                        "\"Edit\""
                    },
                )
                .replace(
                    "\"Write\"",
                    if agent == "gemini" {
                        "\"write_file\""
                    } else {
                        "\"Write\""
                    },
                );
            let out = repo.hook_in(&repo.root, agent, &payload, &[]);
            let reason = assert_blocked(&out);
            assert!(
                reason.starts_with("fencepost blocked this edit"),
                "{agent} {payload:?}: {reason}"
            );
            assert!(reason.contains("tell the human"), "{reason}");
        }
    }
    // A path of the wrong type is named as such, not as missing (found by a
    // breaker); it blocks all the same.
    let out = repo.hook_in(
        &repo.root,
        "claude-code",
        r#"{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Edit", "tool_input": {"file_path": 123}}"#,
        &[],
    );
    let reason = assert_blocked(&out);
    assert!(
        reason.contains("tool_input.file_path is not a string (it is a number)"),
        "{reason}"
    );
    // A hook command the settings got wrong blocks too (not clap's exit 1).
    let out = repo.hook_in(&repo.root, "no-such-agent", "{}", &[]);
    assert_blocked(&out);
}

#[test]
fn a_store_it_cannot_use_blocks() {
    let repo = Repo::new();
    let not_a_dir = repo.scratch.path().join("store-is-a-file");
    std::fs::write(&not_a_dir, "x").unwrap();
    let payload = fixture("claude-code-Edit.json", "s1", &repo.root, "src/a.rs");
    let store = not_a_dir.display().to_string();
    let out = repo.hook_in(
        &repo.root,
        "claude-code",
        &payload,
        &[("FENCEPOST_STORE", &store)],
    );
    let reason = assert_blocked(&out);
    assert!(reason.contains("store-is-a-file"), "{reason}");
}

#[test]
fn the_switch_turns_the_hook_off() {
    let repo = Repo::new();
    let file = repo.root.join("src/a.rs");
    let payload = fixture("claude-code-Edit.json", "s1", &repo.root, "src/a.rs");
    let out = repo.hook_in(
        &repo.root,
        "claude-code",
        &payload,
        &[("FENCEPOST_HOOKS", "off")],
    );
    assert_allowed(&out, "claude-code");
    assert_eq!(repo.claim_on(&file), None, "nothing claimed while off");
    // Off means off even for garbage; on again, the other session is refused.
    assert_allowed(
        &repo.hook_in(&repo.root, "gemini", "garbage", &[("FENCEPOST_HOOKS", "0")]),
        "gemini",
    );
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
    assert_blocked(&repo.edit("claude-code-Edit.json", "s2", "src/a.rs"));
}

#[test]
fn relative_paths_resolve_against_the_payloads_cwd() {
    let repo = Repo::new();
    // The hook runs elsewhere; the payload's cwd is src/.
    let payload = fixture(
        "claude-code-Write.json",
        "s1",
        &repo.root.join("src"),
        "new.rs",
    );
    let out = repo.hook_in(&repo.root, "claude-code", &payload, &[]);
    assert_allowed(&out, "claude-code");
    assert!(
        repo.claim_on(&repo.root.join("src/new.rs")).is_some(),
        "{:?}",
        repo.status()
    );
    // `..` spellings and the absolute path are the same file.
    let blocked = repo.edit("claude-code-Edit.json", "s2", "src/../src/new.rs");
    assert_blocked(&blocked);
}

#[test]
fn paths_outside_the_repository_are_allowed_and_not_claimed() {
    let repo = Repo::new();
    let outside = repo
        .scratch
        .path()
        .canonicalize()
        .unwrap()
        .join("outside.txt");
    let outside = outside.display().to_string();
    for session in ["s1", "s2"] {
        assert_allowed(
            &repo.edit("claude-code-Write.json", session, &outside),
            "claude-code",
        );
    }
    assert_allowed(
        &repo.edit("claude-code-Write.json", "s1", "../elsewhere.txt"),
        "claude-code",
    );
    assert!(repo.status().is_empty(), "{:?}", repo.status());
}

#[test]
fn symlinks_are_judged_where_they_lead() {
    let repo = Repo::new();
    let outside = repo.scratch.path().canonicalize().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, repo.root.join("out")).unwrap();
    std::os::unix::fs::symlink(repo.root.join("src"), outside.join("into-src")).unwrap();
    // A link inside the repository leading out: not the repository's file.
    assert_allowed(
        &repo.edit("claude-code-Write.json", "s1", "out/x.txt"),
        "claude-code",
    );
    assert!(repo.status().is_empty());
    // A link from outside into the repository: the repository's file, one identity.
    let via_link = outside.join("into-src/a.rs").display().to_string();
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", &via_link),
        "claude-code",
    );
    assert!(repo.claim_on(&repo.root.join("src/a.rs")).is_some());
    assert_blocked(&repo.edit("claude-code-Edit.json", "s2", "src/a.rs"));
}

/// A file held by a shared claim (a reader) is said to be read, not edited, in the
/// reason an edit is blocked with (a breaker: "is being edited by reader1 (shared)").
#[test]
fn a_file_held_by_a_reader_is_said_to_be_read() {
    let repo = Repo::new();
    let output = repo
        .scratch
        .bare_cmd(&repo.root)
        .args([
            "claim", "--file", "src/a.rs", "--shared", "--owner", "reader1",
        ])
        .args(["--ttl", "60000"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let reason = assert_blocked(&repo.edit("claude-code-Edit.json", "s1", "src/a.rs"));
    assert!(
        reason.contains("is being read by reader1 (shared)"),
        "{reason}"
    );
    assert!(!reason.contains("edited"), "{reason}");
}

#[test]
fn a_linked_worktree_claims_into_the_shared_store() {
    let repo = Repo::new();
    git(&repo.root, &["add", "."]);
    git(&repo.root, &["commit", "-qm", "init"]);
    let wt = repo.scratch.path().canonicalize().unwrap().join("wt");
    git(&repo.root, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    let payload = fixture("gemini-replace.json", "g1", &wt, "src/a.rs");
    assert_allowed(&repo.hook_in(&wt, "gemini", &payload, &[]), "gemini");
    // The claim is in the main repository's store, on the worktree's own file.
    assert!(
        repo.claim_on(&wt.join("src/a.rs")).is_some(),
        "{:?}",
        repo.status()
    );
    assert!(repo.claim_on(&repo.root.join("src/a.rs")).is_none());
    // Another session in the worktree is blocked, by the claim in the shared store.
    let other = fixture("claude-code-Edit.json", "c1", &wt.join("src"), "a.rs");
    let reason = assert_blocked(&repo.hook_in(&wt, "claude-code", &other, &[]));
    assert!(
        reason.contains(fencepost::SessionTag::of("gemini:g1").as_str()),
        "{reason}"
    );
    // From the main checkout the worktree is outside the project, but its files'
    // claims belong in the shared store, which exists: claimed there all the same
    // (a breaker: unclaimed, the worktree's own session was let edit it at once),
    // and never written over the claim.
    let from_main = fixture("claude-code-Edit.json", "c1", &repo.root, "../wt/src/b.rs");
    assert_allowed(
        &repo.hook_in(&repo.root, "claude-code", &from_main, &[]),
        "claude-code",
    );
    assert!(
        repo.claim_on(&wt.join("src/b.rs")).is_some(),
        "{:?}",
        repo.status()
    );
    let in_wt = fixture("gemini-replace.json", "g1", &wt, "src/b.rs");
    let reason = assert_blocked(&repo.hook_in(&wt, "gemini", &in_wt, &[]));
    assert!(
        reason.contains(fencepost::SessionTag::of("claude-code:c1").as_str()),
        "{reason}"
    );
    let from_main = fixture("claude-code-Edit.json", "c1", &repo.root, "../wt/src/a.rs");
    let reason = assert_blocked(&repo.hook_in(&repo.root, "claude-code", &from_main, &[]));
    assert!(
        reason.contains(fencepost::SessionTag::of("gemini:g1").as_str()),
        "{reason}"
    );
}

/// An edit of a file outside the project is blocked by a claim of it in any store
/// on its path, not only the one the layout picks now: here a claim stranded in
/// the per-user store while a `.fencepost` directory beside the file was away (a
/// breaker: only the located store was read, and the edit went through).
#[test]
fn an_edit_outside_the_project_meets_a_claim_in_another_store_on_its_path() {
    let repo = Repo::new();
    let other = repo.root.parent().unwrap().join("other");
    let marker = other.join(".fencepost");
    std::fs::create_dir_all(&marker).unwrap();
    let cli = |args: &[&str]| {
        let out = repo.scratch.bare_cmd(&other).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // History of x.txt in the marker's store, then a claim made while it was away.
    let handle = cli(&["claim", "--file", "x.txt"]);
    cli(&["release", "--file", "x.txt", &handle]);
    let away = repo.root.parent().unwrap().join("away");
    std::fs::rename(&marker, &away).unwrap();
    cli(&[
        "claim",
        "--file",
        "x.txt",
        "--session",
        "gemini:g2",
        "--ttl",
        "60000",
    ]);
    std::fs::rename(&away, &marker).unwrap();
    let payload = fixture("claude-code-Edit.json", "c1", &repo.root, "../other/x.txt");
    let reason = assert_blocked(&repo.hook_in(&repo.root, "claude-code", &payload, &[]));
    assert!(
        reason.contains(fencepost::SessionTag::of("gemini:g2").as_str()),
        "{reason}"
    );
}

/// A file outside every repository inside another session's subtree claim is
/// refused as inside that directory, naming it, not as the file being edited (a
/// breaker: the reason said the file itself was being edited).
#[test]
fn an_edit_outside_every_repository_under_a_subtree_claim_names_the_directory() {
    let repo = Repo::new();
    let plain = repo.root.parent().unwrap().join("plain");
    std::fs::create_dir_all(plain.join("docs")).unwrap();
    let claimed = repo
        .scratch
        .bare_cmd(&plain)
        .args([
            "claim",
            "--dir",
            "docs",
            "--session",
            "gemini:g2",
            "--ttl",
            "60000",
        ])
        .output()
        .unwrap();
    assert_eq!(claimed.status.code(), Some(0), "{claimed:?}");
    let payload = fixture(
        "claude-code-Write.json",
        "c1",
        &repo.root,
        "../plain/docs/new.md",
    );
    let reason = assert_blocked(&repo.hook_in(&repo.root, "claude-code", &payload, &[]));
    let dir = plain.join("docs").display().to_string();
    assert!(
        reason.contains(&format!("is inside {dir}")),
        "names the directory: {reason}"
    );
    assert!(!reason.contains("is being edited"), "{reason}");
    assert!(
        reason.contains(fencepost::SessionTag::of("gemini:g2").as_str()),
        "{reason}"
    );
}

/// An agent's edit tool never writes a lease store — the named one, the per-user
/// store, a bare repository's store inside the project — nor makes a directory a
/// git directory (which moves the store of every file below it): each is refused
/// with a reason that names it (a breaker: every one of them was allowed).
#[test]
fn edits_into_any_store_or_making_a_git_directory_are_refused() {
    let repo = Repo::new();
    let scratch = repo.scratch.path().canonicalize().unwrap();
    let record = "claims/lock-x/g00000099.json";
    let write = |path: &Path, env: &[(&str, &str)]| {
        let payload = fixture(
            "claude-code-Write.json",
            "s2",
            &repo.root,
            &path.display().to_string(),
        );
        repo.hook_in(&repo.root, "claude-code", &payload, env)
    };
    let named = scratch.join("named");
    let named_env = named.display().to_string();
    let user = repo.scratch.user_state().canonicalize().ok();
    let user = user.unwrap_or_else(|| scratch.join("user-state"));
    let bare = repo.root.join("fx.git");
    std::fs::create_dir_all(bare.join("objects")).unwrap();
    std::fs::create_dir_all(bare.join("refs")).unwrap();
    std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    for (path, env) in [
        (
            named.join(record),
            vec![("FENCEPOST_STORE", named_env.as_str())],
        ),
        (user.join("fencepost").join(record), vec![]),
        (bare.join("fencepost").join(record), vec![]),
    ] {
        let said = assert_blocked(&write(&path, &env));
        assert!(said.contains("lies in the lease store"), "{path:?}: {said}");
        assert!(said.contains("do not write it another way"), "{said}");
    }
    // Through a dangling symbolic link to a record not written yet (a breaker),
    // refused as a write of the record itself is: the one in the repository's git
    // directory as a write inside `.git`.
    for (link, target, said_as) in [
        (
            "dl-user",
            user.join("fencepost").join(record),
            "lies in the lease store",
        ),
        (
            "dl-repo",
            repo.root.join(".git/fencepost").join(record),
            "does not write inside a .git entry",
        ),
    ] {
        std::os::unix::fs::symlink(&target, repo.root.join(link)).unwrap();
        let said = assert_blocked(&write(&repo.root.join(link), &[]));
        assert!(said.contains(said_as), "{link}: {said}");
    }
    // Beside the bare repository's store, its own files are still edited.
    assert_allowed(&write(&bare.join("description"), &[]), "claude-code");
    // Three writes that would make `x` a git directory: the last is refused.
    let x = repo.root.join("x");
    for part in ["HEAD", "objects/.keep"] {
        assert_allowed(&write(&x.join(part), &[]), "claude-code");
        std::fs::create_dir_all(x.join(part).parent().unwrap()).unwrap();
        std::fs::write(x.join(part), "").unwrap();
    }
    let said = assert_blocked(&write(&x.join("refs/.keep"), &[]));
    assert!(
        said.contains(&format!("would make {} a git directory", x.display())),
        "{said}"
    );
}

/// A `..` that climbs out of a missing directory into a symbolic link to the store
/// (`src/missing/../lnk/…`, which every editor tidies to `src/lnk/…`) is judged where
/// it leads: the hook took it for a plain path in the work tree and let a session
/// write a record that ended another's claim (a breaker). So is a dangling link
/// into a `.git` entry (`lnk -> sub/.git`: the write makes `sub` a repository).
#[test]
fn a_climb_or_a_dangling_link_into_metadata_is_refused() {
    let repo = Repo::new();
    std::fs::create_dir_all(repo.root.join("src")).unwrap();
    std::fs::create_dir_all(repo.root.join("sub")).unwrap();
    std::os::unix::fs::symlink("../.git/fencepost", repo.root.join("src/lnkstore")).unwrap();
    std::os::unix::fs::symlink("../.git", repo.root.join("src/lnkgit")).unwrap();
    // Before the store exists (the link dangles) and after (it resolves).
    for store_made in [false, true] {
        if store_made {
            std::fs::write(repo.root.join("src/a.rs"), "a\n").unwrap();
            assert_allowed(
                &repo.edit("claude-code-Edit.json", "s2", "src/a.rs"),
                "claude-code",
            );
            assert!(repo.root.join(".git/fencepost/claims").is_dir());
        }
        for path in [
            "src/missing/../lnkstore/claims/lock-x/g00000002.json",
            "src/a/b/../../lnkstore/claims/lock-x/g00000002.json",
            "src/missing/../lnkgit/hooks/pre-push",
        ] {
            let said = assert_blocked(&repo.edit("claude-code-Write.json", "s1", path));
            assert!(said.starts_with("fencepost: refused"), "{path}: {said}");
        }
    }
    std::os::unix::fs::symlink("sub/.git", repo.root.join("lnk")).unwrap();
    std::os::unix::fs::symlink(".git/hooks/pre-push", repo.root.join("lnk2")).unwrap();
    for path in ["lnk", "lnk2"] {
        let said = assert_blocked(&repo.edit("claude-code-Write.json", "s1", path));
        assert!(said.contains("moves the lease store"), "{path}: {said}");
    }
    assert!(!repo.root.join("sub/.git").exists());
}

/// A hard link to a lease record, made beside the store by a shell command, is
/// not edited through: the edit would change the record in the store (a breaker:
/// it was allowed). A copy of the record is a plain file.
#[test]
fn an_edit_of_a_hard_link_to_a_record_is_refused() {
    let repo = Repo::new();
    let claimed = repo.claim_for(&["--lock", "deploy"], "s1");
    assert!(claimed.status.success(), "{claimed:?}");
    let claims = repo.root.join(".git/fencepost/claims");
    let key_dir = std::fs::read_dir(&claims)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("lock-"))
        .unwrap()
        .path();
    let record = std::fs::read_dir(&key_dir)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    std::fs::hard_link(&record, repo.root.join("src/notes.json")).unwrap();
    std::fs::copy(&record, repo.root.join("src/copy.json")).unwrap();
    for fixture_name in ["claude-code-Write.json", "claude-code-Edit.json"] {
        let said = assert_blocked(&repo.edit(fixture_name, "s2", "src/notes.json"));
        assert!(said.contains("(a hard link) of a lease record"), "{said}");
        assert!(said.contains("ask the human to remove the link"), "{said}");
        assert!(!said.contains("  "), "one line, single spaces: {said}");
    }
    assert_allowed(
        &repo.edit("claude-code-Write.json", "s2", "src/copy.json"),
        "claude-code",
    );
}

/// A shorter claim by another process of the session (its `fencepost claim`, its
/// `run`) keeps the hook's longer end in both of the file's series — its path and
/// its file id: when the shorter ttl has passed, the session still edits the file,
/// and another session is still refused it through another hard link (a breaker:
/// the file-id series was cut short, the session was refused its own file and the
/// other session got it through the link).
#[test]
fn a_shorter_sibling_claim_keeps_the_sessions_end_in_every_series() {
    let repo = Repo::new();
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
    let shorter = repo
        .scratch
        .bare_cmd(&repo.root)
        .args(["claim", "--file", "src/a.rs", "--session", "claude-code:s1"])
        .args(["--ttl", "300"])
        .output()
        .unwrap();
    assert!(shorter.status.success(), "{shorter:?}");
    std::fs::hard_link(repo.root.join("src/a.rs"), repo.root.join("src/hl.rs")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let held = assert_blocked(&repo.edit("claude-code-Edit.json", "s2", "src/hl.rs"));
    assert!(held.contains("another agent session"), "{held}");
    // Named as the same file under another name, never as a directory around it
    // (a breaker).
    assert!(
        held.contains("claimed as") && held.contains("a.rs (one file under two names"),
        "{held}"
    );
    assert!(
        !held.contains("everything below") && !held.contains("is inside"),
        "{held}"
    );
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
}

/// A relative FENCEPOST_STORE names another store from each directory the agent
/// `cd`s to, so two sessions could both hold a file: the hook blocks (fails
/// closed) and says it must be absolute; an absolute one is used (a breaker: two
/// sessions, from the root and from a subdirectory, both held one file).
#[test]
fn a_relative_store_in_the_environment_blocks_and_says_so() {
    let repo = Repo::new();
    let sub = repo.root.join("src");
    let payload = fixture("claude-code-Edit.json", "s1", &sub, "a.rs");
    let said = assert_blocked(&repo.hook_in(
        &sub,
        "claude-code",
        &payload,
        &[("FENCEPOST_STORE", "leases")],
    ));
    assert!(
        said.contains("FENCEPOST_STORE (or --store) is the relative path leases")
            && said.contains("must be an absolute path"),
        "{said}"
    );
    assert!(!sub.join("leases").exists() && !repo.root.join("leases").exists());
    // A store URL is no relative path (whatever else it fails on here).
    let url = repo.hook_in(
        &sub,
        "claude-code",
        &payload,
        &[("FENCEPOST_STORE", "etcd://127.0.0.1:9/x")],
    );
    assert!(!stderr(&url).contains("relative path"), "{url:?}");
    let absolute = repo.root.join("leases").display().to_string();
    assert_allowed(
        &repo.hook_in(
            &sub,
            "claude-code",
            &payload,
            &[("FENCEPOST_STORE", &absolute)],
        ),
        "claude-code",
    );
}

#[test]
fn fencepost_session_names_the_session_for_every_process_of_the_agent() {
    let repo = Repo::new();
    let file = repo.root.join("src/a.rs");
    // Two payload ids, one FENCEPOST_SESSION: one session.
    for id in ["p1", "p2"] {
        let payload = fixture("claude-code-Edit.json", id, &repo.root, "src/a.rs");
        let out = repo.hook_in(
            &repo.root,
            "claude-code",
            &payload,
            &[("FENCEPOST_SESSION", "agent-a")],
        );
        assert_allowed(&out, "claude-code");
    }
    assert!(
        repo.claim_on(&file)
            .unwrap()
            .1
            .contains(fencepost::SessionTag::of("agent-a").as_str())
    );
    assert_blocked(&repo.edit("claude-code-Edit.json", "p1", "src/a.rs"));
}

#[test]
fn other_tools_and_events_pass() {
    let repo = Repo::new();
    let read = r#"{"session_id":"s","cwd":"/","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/etc/hosts"}}"#;
    assert_allowed(
        &repo.hook_in(&repo.root, "claude-code", read, &[]),
        "claude-code",
    );
    let end = fixture("claude-code-SessionEnd.json", "s1", &repo.root, "");
    assert_allowed(
        &repo.hook_in(&repo.root, "claude-code", &end, &[]),
        "claude-code",
    );
    let end = fixture("gemini-SessionEnd.json", "s1", &repo.root, "");
    assert_allowed(&repo.hook_in(&repo.root, "gemini", &end, &[]), "gemini");
}

/// Two agents (two session ids) edit overlapping files through the hook, each edit
/// a real hook process: a file is never allowed to one session while the other's
/// tenure on it is live. Oracle: per file, every allow carries the tenure's token,
/// and a change of session comes with a new, greater token (a new tenure).
#[test]
fn two_sessions_alternating_never_both_hold_one_file() {
    let repo = std::sync::Arc::new(Repo::new());
    let files = ["src/a.rs", "src/b.rs", "src/c.rs"];
    let rounds = 12;
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let workers: Vec<_> = ["s1", "s2"]
        .into_iter()
        .enumerate()
        .map(|(n, session)| {
            let repo = repo.clone();
            let log = log.clone();
            std::thread::spawn(move || {
                for round in 0..rounds {
                    let file = files[(round + n) % files.len()];
                    let payload = fixture("claude-code-Edit.json", session, &repo.root, file);
                    let mut cmd = repo.scratch.bare_cmd(&repo.root);
                    // A short ttl, so tenures end and the other session gets turns.
                    cmd.args(["hook", "claude-code", "--ttl", "150"])
                        .write_stdin(payload)
                        .env_remove("FENCEPOST_SESSION")
                        .env_remove("FENCEPOST_HOOKS");
                    let out = cmd.output().unwrap();
                    let at = std::time::Instant::now();
                    match out.status.code() {
                        Some(0) => {
                            let note = stderr(&out);
                            let token: u64 = note
                                .split("token ")
                                .nth(1)
                                .and_then(|t| t.split(')').next())
                                .and_then(|t| t.parse().ok())
                                .unwrap_or_else(|| panic!("no token in {note:?}"));
                            log.lock().unwrap().push((at, file, session, token));
                        }
                        Some(2) => assert!(stderr(&out).contains("is being edited by"), "{out:?}"),
                        _ => panic!("neither allowed nor blocked: {out:?}"),
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let mut log = log.lock().unwrap().clone();
    log.sort_by_key(|entry| entry.0);
    // Both sessions got edits through (the oracle below compares them). How many
    // depends on process start-up against the 150 ms ttl, i.e. on the machine's
    // load, so no count is asserted.
    for session in ["s1", "s2"] {
        assert!(
            log.iter().any(|entry| entry.2 == session),
            "{session} never got an edit through: {log:?}"
        );
    }
    for file in files {
        let mut last: Option<(&str, u64)> = None;
        for (_, _, session, token) in log.iter().filter(|e| e.1 == file) {
            if let Some((prev_session, prev_token)) = last {
                if prev_session == *session {
                    assert!(*token >= prev_token, "{file}: {log:?}");
                } else {
                    assert!(
                        *token > prev_token,
                        "{file}: two sessions in one tenure: {log:?}"
                    );
                }
            }
            last = Some((session, *token));
        }
    }
    // Per token, one session.
    let mut owners = std::collections::HashMap::new();
    for (_, file, session, token) in &log {
        let prev = owners.insert((*file, *token), *session);
        assert!(
            prev.is_none() || prev == Some(*session),
            "{file} token {token}: {log:?}"
        );
    }
}

/// With the core's sessions: every edit renews the session's tenure (same token,
/// later expiry), and SessionEnd releases what the session holds, so the next
/// session gets the file at once, with a greater token.
#[test]
fn each_edit_renews_the_claim_and_session_end_releases_it() {
    let repo = Repo::new();
    let file = repo.root.join("src/a.rs");
    let expiry = |repo: &Repo| {
        repo.status()
            .into_iter()
            .find(|e| e["label"] == file.display().to_string() && e["live"] == true)
            .map(|e| {
                (
                    e["token"].as_u64().unwrap(),
                    e["expires_at_ms"].as_u64().unwrap(),
                )
            })
    };
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
    let (token, first) = expiry(&repo).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
    let (again, second) = expiry(&repo).unwrap();
    assert_eq!(again, token, "same tenure");
    assert!(second > first, "renewed: {first} -> {second}");
    // SessionEnd of another session releases nothing of s1's.
    let end = fixture("claude-code-SessionEnd.json", "s2", &repo.root, "");
    assert_allowed(
        &repo.hook_in(&repo.root, "claude-code", &end, &[]),
        "claude-code",
    );
    assert!(expiry(&repo).is_some());
    let end = fixture("claude-code-SessionEnd.json", "s1", &repo.root, "");
    let out = repo.hook_in(&repo.root, "claude-code", &end, &[]);
    assert_allowed(&out, "claude-code");
    assert!(stderr(&out).contains("released 1 claim"), "{out:?}");
    assert_eq!(expiry(&repo), None, "released: {:?}", repo.status());
    assert_allowed(
        &repo.edit("gemini-replace.json", "s2", "src/a.rs"),
        "gemini",
    );
    assert!(expiry(&repo).unwrap().0 > token);
}

/// The hook's session is the one `fencepost claim --session` and the MCP server
/// (inside Claude Code) name: `claude-code:ID`. A claim made by either re-enters.
#[test]
fn the_hook_and_the_cli_agree_on_the_session() {
    let repo = Repo::new();
    let claim = repo.claim_for(&["--file", "src/a.rs"], "claude-code:s1");
    assert_eq!(claim.status.code(), Some(0), "{claim:?}");
    let token: u64 = String::from_utf8_lossy(&claim.stdout)
        .split('.')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_allowed(
        &repo.edit("claude-code-Write.json", "s1", "src/a.rs"),
        "claude-code",
    );
    assert_eq!(repo.claim_on(&repo.root.join("src/a.rs")).unwrap().0, token);
    assert_blocked(&repo.edit("claude-code-Write.json", "s2", "src/a.rs"));
}

/// The guard's escapes are the human's: an agent's shell command taking one is
/// blocked (a deterrent: a command can hide them), and other commands pass.
#[test]
fn shell_commands_taking_the_humans_escapes_are_blocked() {
    let repo = Repo::new();
    let shell = |agent: &str, command: &str| {
        let (event, tool) = match agent {
            "gemini" => ("BeforeTool", "run_shell_command"),
            _ => ("PreToolUse", "Bash"),
        };
        let payload = serde_json::json!({
            "session_id": "s1", "cwd": repo.root, "hook_event_name": event,
            "tool_name": tool, "tool_input": {"command": command, "description": "x"}
        });
        repo.hook_in(&repo.root, agent, &payload.to_string(), &[])
    };
    for command in [
        "git commit --no-verify -m wip",
        "FENCEPOST_GUARD=off git commit -am x",
        "git -c core.hooksPath=/dev/null commit -m x",
        "fencepost hooks uninstall --git",
        "fencepost break --file src/a.rs --reason mine",
    ] {
        for agent in ["claude-code", "gemini"] {
            let reason = assert_blocked(&shell(agent, command));
            assert!(
                reason.contains("the human's decision"),
                "{command}: {reason}"
            );
        }
    }
    for command in [
        "cargo test",
        "git commit -m 'no verify needed'",
        "grep -rn FENCEPOST_GUARD src",
    ] {
        assert_allowed(&shell("claude-code", command), "claude-code");
    }
    assert!(repo.status().is_empty(), "a shell command claims nothing");
}

/// A subtree (`--dir`) held by another session blocks the hook's edits of every
/// file below it, existing or not; the holding session edits below its own subtree.
#[test]
fn a_subtree_another_session_holds_blocks_edits_below_it() {
    let repo = Repo::new();
    let claim = repo.claim_for(&["--dir", "src"], "claude-code:s1");
    assert_eq!(claim.status.code(), Some(0), "{claim:?}");
    // The block names the directory held, not "this file" (which nobody holds),
    // and the holder by its session's tag (a CLI claim with --session is a
    // session's claim like a hook's), never `cli (pid N)` and never the id.
    let src = std::fs::canonicalize(repo.root.join("src")).unwrap();
    let tag = fencepost::SessionTag::of("claude-code:s1");
    let inside = format!(
        "is inside {}, and another agent session ({tag})",
        src.display()
    );
    for path in ["src/a.rs", "src/new/deep.rs"] {
        let reason = assert_blocked(&repo.edit("claude-code-Edit.json", "s2", path));
        assert!(reason.contains(&inside), "{path}: {reason}");
        assert!(
            reason.contains("holds it with everything below it until")
                && !reason.contains("this file"),
            "{path}: {reason}"
        );
        assert!(
            !reason.contains("(pid") && !reason.contains("claude-code:s1"),
            "{path}: {reason}"
        );
        let reason = assert_blocked(&repo.edit("gemini-write_file.json", "g1", path));
        assert!(reason.contains(&inside), "{path}: {reason}");
    }
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
    assert_allowed(
        &repo.edit("claude-code-Write.json", "s2", "README.md"),
        "claude-code",
    );
}

/// A breaker: a session's Write of `sub/.git/notes` made `sub` a repository of its
/// own, with a fresh store where another session then claimed `sub/a.txt`, which
/// the first session held. Every edit tool is refused inside a `.git` or
/// `.fencepost` entry of the project (as the MCP server's `write` is), nothing is
/// created there, and the session's claim of `sub/a.txt` still blocks the other.
#[test]
fn edits_inside_git_or_fencepost_directories_are_refused() {
    let repo = Repo::new();
    std::fs::create_dir_all(repo.root.join("sub")).unwrap();
    std::fs::write(repo.root.join("sub/a.txt"), "a\n").unwrap();
    assert_allowed(
        &repo.edit("claude-code-Write.json", "s1", "sub/a.txt"),
        "claude-code",
    );
    for (_, fixture_name) in EDIT_FIXTURES {
        for path in [
            "sub/.git/notes",
            "sub/.fencepost/x",
            ".git/hooks/pre-commit",
            "sub/.GIT/HEAD",
        ] {
            let reason = assert_blocked(&repo.edit(fixture_name, "s1", path));
            assert!(
                reason.starts_with("fencepost: refused")
                    && reason.contains("moves the lease store"),
                "{fixture_name} {path}: {reason}"
            );
        }
    }
    // From a repository nested in the project, the outer repository's metadata
    // and another directory's new `.git` are refused too.
    std::fs::create_dir_all(repo.root.join("inner")).unwrap();
    git(&repo.root.join("inner"), &["init", "-q"]);
    for path in [
        "../d/.git",
        "../.git/fencepost/claims/x",
        "../sub/.fencepost/x",
    ] {
        let payload = fixture(
            "claude-code-Write.json",
            "s1",
            &repo.root.join("inner"),
            path,
        );
        let out = repo.hook_in(&repo.root.join("inner"), "claude-code", &payload, &[]);
        let reason = assert_blocked(&out);
        assert!(reason.contains("moves the lease store"), "{path}: {reason}");
    }
    assert!(!repo.root.join("sub/.git").exists());
    assert!(!repo.root.join("sub/.fencepost").exists());
    // The store did not move: the other session is still blocked by s1's claim.
    let reason = assert_blocked(&repo.edit("claude-code-Write.json", "s2", "sub/a.txt"));
    assert!(reason.contains("another agent session"), "{reason}");
    // A name that merely starts like one is an ordinary file.
    assert_allowed(
        &repo.edit("claude-code-Write.json", "s1", "sub/.gitignore"),
        "claude-code",
    );
}

/// A repository nested in `repo` at `dir` (relative to its root), holding `file`
/// with `contents`: its files are claimed in its own store. Returns its path.
fn nested_repository(repo: &Repo, dir: &str, file: &str, contents: &str) -> PathBuf {
    let nested = repo.root.join(dir);
    std::fs::create_dir_all(&nested).unwrap();
    std::fs::write(nested.join(file), contents).unwrap();
    git(&nested, &["init", "-q"]);
    nested
}

/// A session working from the project's root edits a file of a repository nested
/// in it (a submodule's or a nested checkout's files are claimed in that
/// repository's store), then `cd`s into another and edits there: SessionEnd from the
/// root releases those claims too, so another session gets the files at once —
/// not only after the hook's ttl.
#[test]
fn session_end_releases_claims_in_a_nested_repositorys_store() {
    let repo = Repo::new();
    let nested = nested_repository(&repo, "vendor/lib", "b.rs", "fn b() {}\n");
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "vendor/lib/b.rs"),
        "claude-code",
    );
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
    // The agent `cd`s into another nested repository and edits from there: its
    // payload's cwd changes.
    let other = nested_repository(&repo, "vendor/other", "c.rs", "fn c() {}\n");
    let payload = fixture("claude-code-Edit.json", "s1", &other, "c.rs");
    assert_allowed(
        &repo.hook_in(&other, "claude-code", &payload, &[]),
        "claude-code",
    );
    assert!(
        nested.join(".git/fencepost/claims").is_dir(),
        "the nested file is claimed in its own repository's store"
    );
    let reason = assert_blocked(&repo.edit("gemini-replace.json", "s2", "vendor/lib/b.rs"));
    assert!(reason.contains("another agent session"), "{reason}");

    let end = fixture("claude-code-SessionEnd.json", "s1", &repo.root, "");
    let out = repo.hook_in(&repo.root, "claude-code", &end, &[]);
    assert_allowed(&out, "claude-code");
    assert!(stderr(&out).contains("released 3 claims"), "{out:?}");
    assert!(
        !stderr(&out).contains("claude-code:s1"),
        "the id, not the tag: {out:?}"
    );
    assert_allowed(
        &repo.edit("gemini-replace.json", "s2", "vendor/lib/b.rs"),
        "gemini",
    );
    assert_allowed(
        &repo.edit("gemini-replace.json", "s2", "vendor/other/c.rs"),
        "gemini",
    );
    assert_allowed(
        &repo.edit("gemini-replace.json", "s2", "src/a.rs"),
        "gemini",
    );
    // The notes went with the session: a second end releases nothing more.
    let out = repo.hook_in(&repo.root, "claude-code", &end, &[]);
    assert_allowed(&out, "claude-code");
    assert!(!stderr(&out).contains("released"), "{out:?}");
}

/// A noted store that is there but cannot be opened (its claims directory
/// replaced by a link) is reported at the session's end, not skipped as if it had
/// been removed (a breaker: "released 1 claim", exit 0, the other claim held on).
#[cfg(unix)]
#[test]
fn session_end_reports_a_noted_store_it_cannot_open() {
    let repo = Repo::new();
    let nested = nested_repository(&repo, "nested", "n.txt", "n\n");
    assert_allowed(
        &repo.edit("claude-code-Write.json", "s1", "nested/n.txt"),
        "claude-code",
    );
    let claims = nested.join(".git/fencepost/claims");
    std::fs::rename(&claims, nested.join(".git/fencepost/claims.real")).unwrap();
    std::os::unix::fs::symlink("claims.real", &claims).unwrap();
    let end = fixture("claude-code-SessionEnd.json", "s1", &repo.root, "");
    let said = stderr(&repo.hook_in(&repo.root, "claude-code", &end, &[]));
    assert!(
        said.contains("could not use every store") && said.contains("nested"),
        "{said}"
    );
    // Its note was kept: once the store is repaired, the next end releases there.
    std::fs::remove_file(&claims).unwrap();
    std::fs::rename(nested.join(".git/fencepost/claims.real"), &claims).unwrap();
    let out = repo.hook_in(&repo.root, "claude-code", &end, &[]);
    assert_allowed(&out, "claude-code");
    assert!(stderr(&out).contains("released 1 claim"), "{out:?}");
}

/// SessionEnd from a directory whose store cannot be opened (a worktree whose git
/// directory was pruned) still releases the session's claims in every store it
/// noted, and says what it could not do in words for a session's end, not the
/// edit-blocking text (breaker).
#[test]
fn session_end_releases_the_noted_stores_past_a_broken_one() {
    let repo = Repo::new();
    nested_repository(&repo, "vendor/lib", "b.rs", "fn b() {}\n");
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "vendor/lib/b.rs"),
        "claude-code",
    );
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
    // The session ends in a worktree whose git directory is gone.
    let pruned = repo.root.join("pruned");
    std::fs::create_dir_all(&pruned).unwrap();
    std::fs::write(
        pruned.join(".git"),
        format!("gitdir: {}\n", repo.root.join("no-such-gitdir").display()),
    )
    .unwrap();
    let end = fixture("claude-code-SessionEnd.json", "s1", &pruned, "");
    let out = repo.hook_in(&pruned, "claude-code", &end, &[]);
    let said = stderr(&out);
    assert!(
        said.contains("released 2 claims, and could not use every store"),
        "the noted stores were not all released: {out:?}"
    );
    assert!(!said.contains("blocked this edit"), "{said}");
    // The session is named by its tag: its id lets a process act as it.
    assert!(!said.contains("claude-code:s1"), "{said}");
    // A SessionEnd payload the hook cannot use is said in words for a session's
    // end too, not as a blocked edit.
    let relative = end.replace(&pruned.display().to_string(), "relative/dir");
    let said = stderr(&repo.hook_in(&pruned, "claude-code", &relative, &[]));
    assert!(
        said.contains("at this session's end, nothing was released")
            && !said.contains("blocked this edit"),
        "{said}"
    );
    assert_allowed(
        &repo.edit("gemini-replace.json", "s2", "vendor/lib/b.rs"),
        "gemini",
    );
    assert_allowed(
        &repo.edit("gemini-replace.json", "s2", "src/a.rs"),
        "gemini",
    );
}

/// A session that renamed or deleted a file it edited still gives up all of its
/// claim at its end: the file-id (inode) series follows the file, not its old path,
/// and the next session's edit of the renamed file is not refused for the ttl.
#[test]
fn session_end_releases_a_claim_of_a_file_it_renamed() {
    let repo = Repo::new();
    std::fs::write(repo.root.join("src/c.rs"), "fn c() {}\n").unwrap();
    for path in ["src/a.rs", "src/c.rs"] {
        assert_allowed(
            &repo.edit("claude-code-Edit.json", "s1", path),
            "claude-code",
        );
    }
    std::fs::rename(repo.root.join("src/a.rs"), repo.root.join("src/b.rs")).unwrap();
    std::fs::remove_file(repo.root.join("src/c.rs")).unwrap();
    let out = end_session(&repo, "s1");
    assert!(stderr(&out).contains("released 2 claims"), "{out:?}");
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s2", "src/b.rs"),
        "claude-code",
    );
}

/// Another file moved onto a path the session claimed (a write to a temporary
/// file, moved over the original: a common agent pattern), then the session's
/// end: nothing of the session stays held, the old file (kept by a hard link)
/// included (a breaker: "released 2 claims" with one still held, refusing the
/// next session for the ttl).
#[test]
fn session_end_releases_a_claim_whose_path_another_file_was_moved_onto() {
    let repo = Repo::new();
    let (a, backup, tmp) = (
        repo.root.join("src/a.rs"),
        repo.root.join("src/backup.rs"),
        repo.root.join("src/tmp.rs"),
    );
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
    std::fs::hard_link(&a, &backup).unwrap();
    std::fs::write(&tmp, "fn new() {}\n").unwrap();
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/tmp.rs"),
        "claude-code",
    );
    std::fs::rename(&tmp, &a).unwrap();
    end_session(&repo, "s1");
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s2", "src/backup.rs"),
        "claude-code",
    );
}

/// A session renames a file it edited (`git mv`) and edits it under its new name:
/// its own stale claim of the old path does not block it, and the file is then the
/// session's, refused to another session (a breaker: blocked for the ttl, told
/// another session — its own — held it).
#[test]
fn a_session_edits_a_file_it_renamed() {
    let repo = Repo::new();
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
    std::fs::rename(repo.root.join("src/a.rs"), repo.root.join("src/b.rs")).unwrap();
    let started = std::time::Instant::now();
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/b.rs"),
        "claude-code",
    );
    // Without waiting out the second a claim gives the session's own claims in
    // progress (`CREATE_GRACE_MS`): the stale claim is found by one look first.
    assert!(
        started.elapsed() < std::time::Duration::from_millis(fencepost::CREATE_GRACE_MS),
        "the edit waited {:?}",
        started.elapsed()
    );
    let said = assert_blocked(&repo.edit("claude-code-Edit.json", "s2", "src/b.rs"));
    assert!(said.contains("src/b.rs"), "{said}");
}

/// The session's own current tenure of a file, held by another of its processes
/// (a `claim --session`, as its `run` or MCP server holds one) through one hard
/// link, is not taken for stale when the hook edits the file through another link:
/// it stays current (a breaker: the session's `run` was stopped as superseded).
#[test]
fn a_sessions_current_claim_through_another_hard_link_is_not_ended() {
    let repo = Repo::new();
    std::fs::hard_link(repo.root.join("src/a.rs"), repo.root.join("src/h.rs")).unwrap();
    let claim = repo.claim_for(&["--file", "src/a.rs"], "claude-code:s1");
    assert_eq!(claim.status.code(), Some(0), "{claim:?}");
    let token = String::from_utf8_lossy(&claim.stdout)
        .split('.')
        .next()
        .unwrap()
        .to_string();
    // The edit through the other link is refused by the session's own claim, and
    // the reason says it is the session's own (a breaker: it said another session).
    let said = assert_blocked(&repo.edit("claude-code-Edit.json", "s1", "src/h.rs"));
    assert_refused_as_own(&said, "src/h.rs");
    let check = repo
        .scratch
        .bare_cmd(&repo.root)
        .args(["check", "--file", "src/a.rs", &token])
        .output()
        .unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "the session's current claim was ended: {check:?}"
    );
}

/// Several hook runs of one session at once on a file it renamed: none is blocked
/// by the session itself (a breaker: a run that found the stale tenures already
/// ended by its sibling gave up, naming its own session).
#[test]
fn parallel_edits_of_a_renamed_file_by_one_session_are_all_allowed() {
    let repo = Repo::new();
    for round in 0..6 {
        let (old, new) = (format!("src/r{round}.rs"), format!("src/s{round}.rs"));
        std::fs::write(repo.root.join(&old), "x\n").unwrap();
        assert_allowed(
            &repo.edit("claude-code-Edit.json", "s1", &old),
            "claude-code",
        );
        std::fs::rename(repo.root.join(&old), repo.root.join(&new)).unwrap();
        let outputs: Vec<_> = std::thread::scope(|scope| {
            let runs: Vec<_> = (0..3)
                .map(|_| scope.spawn(|| repo.edit("claude-code-Edit.json", "s1", &new)))
                .collect();
            runs.into_iter().map(|run| run.join().unwrap()).collect()
        });
        for output in &outputs {
            assert_allowed(output, "claude-code");
        }
    }
}

/// A path the session moved another of its files onto stays refused by its own
/// claim of the file replaced (until the session's end or the ttl), and the
/// reason says so: the session's own claim, never "another agent session" (a
/// breaker: the model was told someone else was editing the file).
#[test]
fn a_path_the_session_moved_another_file_onto_is_refused_as_its_own() {
    let repo = Repo::new();
    let (a, tmp) = (repo.root.join("src/a.rs"), repo.root.join("src/tmp.rs"));
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
    std::fs::write(&tmp, "fn new() {}\n").unwrap();
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/tmp.rs"),
        "claude-code",
    );
    std::fs::rename(&tmp, &a).unwrap();
    let said = assert_blocked(&repo.edit("claude-code-Edit.json", "s1", "src/a.rs"));
    assert_refused_as_own(&said, "src/a.rs");
}

/// A record of the session's claim that cannot be read, above its live record (a
/// torn write, a corrupted file), ends the claim's renewals: the session's next
/// edit is refused until the ttl, and told the claim is its own (a breaker: it was
/// told another file had been moved onto the path). Another session stays blocked
/// meanwhile, and the way out the reason names — the human's `break --session` of
/// this session — lets the session edit again.
#[test]
fn a_torn_record_above_the_sessions_claim_is_refused_as_its_own() {
    let repo = Repo::new();
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
    let row = repo
        .status()
        .into_iter()
        .find(|row| {
            row["resource"]
                .as_str()
                .is_some_and(|r| r.ends_with("src/a.rs"))
        })
        .expect("the session's claim of src/a.rs");
    let key = row["key"].as_str().unwrap();
    let series = repo.root.join(".git/fencepost/claims").join(key);
    assert!(series.join("g00000001.json").exists(), "{series:?}");
    std::fs::write(series.join("g00000009.json"), "garbage\n").unwrap();
    let said = assert_blocked(&repo.edit("claude-code-Edit.json", "s1", "src/a.rs"));
    assert_refused_as_own(&said, "src/a.rs");
    assert!(
        said.contains("cannot read"),
        "names the unreadable record: {said}"
    );
    let other = assert_blocked(&repo.edit("claude-code-Edit.json", "s2", "src/a.rs"));
    assert!(other.contains("another agent session"), "{other}");
    // The way out the reason names: the human breaks this session's claims.
    let tag = said
        .split("break --session ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the reason names the session's break")
        .to_string();
    let broke = repo
        .scratch
        .bare_cmd(&repo.root)
        .args(["break", "--session", &tag, "--reason", "torn record"])
        .output()
        .unwrap();
    assert_eq!(broke.status.code(), Some(0), "{broke:?}");
    // Told once that its claim was broken (the file may have changed since), then
    // let edit under its new claim.
    let told = assert_blocked(&repo.edit("claude-code-Edit.json", "s1", "src/a.rs"));
    assert!(told.contains("was broken by"), "{told}");
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
}

/// A session's claim of a file that ended without its knowing — broken, and then
/// another session claimed the file (whose sweep removed the break) and let it go —
/// refuses the session's next edit once, naming who came after it; the file is
/// claimed for the session again, so the edit made again passes. A claim that ran
/// out, or that another process of the session made anew, is told the same; a
/// first claim after another session's passes at once (a breaker: the notice was
/// lost once another session had claimed the file).
#[test]
fn an_edit_after_another_session_held_the_file_is_refused_once() {
    let repo = Repo::new();
    let a = repo.root.join("src/a.rs");
    let edit = |session: &str| repo.edit("claude-code-Edit.json", session, "src/a.rs");
    let tag = || {
        repo.status()
            .into_iter()
            .find(|e| e["label"] == a.display().to_string() && e["live"] == true)
            .and_then(|e| e["session"].as_str().map(str::to_string))
            .expect("a live claim of the file with a session")
    };
    assert_allowed(&edit("s1"), "claude-code");
    let s1 = tag();
    let output = repo
        .scratch
        .bare_cmd(&repo.root)
        .args(["break", "--session", &s1, "--reason", "stuck"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    // Another session claims the file (its sweep removes the break) and ends.
    assert_allowed(&edit("s2"), "claude-code");
    let (s2_token, s2) = (repo.claim_on(&a).unwrap().0, tag());
    end_session(&repo, "s2");
    let said = assert_blocked(&edit("s1"));
    for part in [
        a.display().to_string(),
        "ended since this session last edited the file".to_string(),
        s2.clone(),
        format!("token {s2_token}"),
        "read ".to_string(),
        "make this edit again".to_string(),
    ] {
        assert!(said.contains(&part), "says {part:?}: {said}");
    }
    assert!(!said.contains("--holder"), "{said}");
    assert!(!said.contains("  "), "single spaces: {said}");
    let (token, who) = repo.claim_on(&a).expect("claimed for the session anew");
    assert!(who.contains(&s1) && token > s2_token, "{who} {token}");
    assert!(said.contains(&format!("token {token}")), "{said}");
    for _ in 0..2 {
        assert_allowed(&edit("s1"), "claude-code");
    }
    // The sessions' ends forget their notes; a session that never held the file
    // claims it after s1's at once.
    let sessions = repo.root.join(".git/fencepost/sessions");
    let tenure_notes = || {
        std::fs::read_dir(&sessions)
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|dir| {
                std::fs::read_dir(dir.path())
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .filter(|note| note.file_name().to_string_lossy().starts_with("tenure-"))
            .count()
    };
    assert_eq!(
        tenure_notes(),
        2,
        "s1's notes, by the path and by the file id (s2's were forgotten at its end)"
    );
    end_session(&repo, "s1");
    assert_eq!(tenure_notes(), 0);
    assert_allowed(&edit("s3"), "claude-code");
    // A claim that ran out is told too: another session may have held the file
    // through a claim of a directory above it (a breaker: silent), and the file's
    // own records would not show it.
    let short = |session: &str, path: &str| {
        let payload = fixture("claude-code-Edit.json", session, &repo.root, path);
        let mut cmd = repo.scratch.bare_cmd(&repo.root);
        cmd.args(["hook", "claude-code", "--ttl", "200"])
            .write_stdin(payload)
            .env_remove("FENCEPOST_HOOKS")
            .env_remove("FENCEPOST_SESSION")
            .env_remove("CLAUDECODE")
            .env_remove("CLAUDE_CODE_SESSION_ID");
        cmd.output().unwrap()
    };
    let run_out = || {
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert_eq!(repo.claim_on(&a), None, "the claim ran out");
    };
    end_session(&repo, "s3");
    assert_allowed(&short("s4", "src/a.rs"), "claude-code");
    run_out();
    let cli = |args: &[&str]| {
        let output = repo
            .scratch
            .bare_cmd(&repo.root)
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {output:?}");
    };
    cli(&[
        "claim",
        "--dir",
        "src",
        "--session",
        "other",
        "--ttl",
        "60000",
    ]);
    cli(&["release", "--dir", "src", "--session", "other"]);
    let said = assert_blocked(&short("s4", "src/a.rs"));
    assert!(
        said.contains("ended since this session last edited the file")
            && said.contains("another session may have held the file meanwhile"),
        "{said}"
    );
    assert!(!said.contains("  "), "single spaces: {said}");
    assert_allowed(&short("s4", "src/a.rs"), "claude-code");
    // Claimed anew by another process of the session (its MCP server, its `run`):
    // the tenure the hook noted ended all the same (a breaker: silent).
    run_out();
    cli(&[
        "claim",
        "--file",
        "src/a.rs",
        "--session",
        "claude-code:s4",
        "--ttl",
        "60000",
    ]);
    let said = assert_blocked(&short("s4", "src/a.rs"));
    assert!(
        said.contains("ended since this session last edited"),
        "{said}"
    );
    assert_allowed(&short("s4", "src/a.rs"), "claude-code");
    // The session's record torn since (emptied): no holder named from it (a
    // breaker: an empty name and token 0).
    end_session(&repo, "s4");
    assert_allowed(&short("s5", "src/a.rs"), "claude-code");
    run_out();
    let key_dirs: Vec<_> = std::fs::read_dir(repo.root.join(".git/fencepost/claims"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("file-")
        })
        .collect();
    for dir in key_dirs {
        let newest = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('g') && n.ends_with(".json"))
            .max_by_key(|n| n[1..n.len() - 5].parse::<u64>().unwrap())
            .unwrap();
        std::fs::write(dir.join(newest), "").unwrap();
    }
    let said = assert_blocked(&short("s5", "src/a.rs"));
    assert!(
        said.contains("another session may have held the file"),
        "{said}"
    );
    assert!(!said.contains("token 0)") && !said.contains("  "), "{said}");
    assert_allowed(&short("s5", "src/a.rs"), "claude-code");
    // Renamed after the claim ran out, then held by another session under the new
    // name: found by the file's own series (a breaker: the note was kept under the
    // path alone).
    run_out();
    std::fs::rename(&a, repo.root.join("src/b.rs")).unwrap();
    assert_allowed(&short("s6", "src/b.rs"), "claude-code");
    end_session(&repo, "s6");
    let said = assert_blocked(&short("s5", "src/b.rs"));
    assert!(
        said.contains("ended since this session last edited"),
        "{said}"
    );
    assert_allowed(&short("s5", "src/b.rs"), "claude-code");
    // A note that cannot be replaced (a directory planted in its place) tells
    // nothing, and never refuses every edit (a breaker: it did).
    for note in std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .flat_map(|dir| std::fs::read_dir(dir.path()).unwrap().flatten())
        .filter(|note| note.file_name().to_string_lossy().starts_with("tenure-"))
    {
        std::fs::remove_file(note.path()).unwrap();
        std::fs::create_dir(note.path()).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(repo.claim_on(&repo.root.join("src/b.rs")), None, "ran out");
    for _ in 0..2 {
        assert_allowed(&short("s5", "src/b.rs"), "claude-code");
    }
}

/// A session whose claim a human broke (`fencepost break --session`) is told so at
/// its next edit of the file, once: another session may have changed the file
/// since, so the edit is refused for the model to read the file again, and the file
/// is claimed for the session anew, so the edit made again passes. Had another
/// session claimed the file meanwhile, that session's claim refuses it as before
/// (a breaker: after the break, the session's next edit re-claimed the file in
/// silence, and the model never learnt that its claim had ended).
#[test]
fn an_edit_after_a_break_of_the_sessions_claim_is_refused_once() {
    let repo = Repo::new();
    let a = repo.root.join("src/a.rs");
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
        "claude-code",
    );
    let tag = |path: &Path| {
        repo.status()
            .into_iter()
            .find(|e| e["label"] == path.display().to_string() && e["live"] == true)
            .and_then(|e| e["session"].as_str().map(str::to_string))
            .expect("a live claim of the file with a session")
    };
    let s1 = tag(&a);
    let (old_token, _) = repo.claim_on(&a).unwrap();
    let brk = |session: &str| {
        let output = repo
            .scratch
            .bare_cmd(&repo.root)
            .args(["break", "--session", session, "--reason", "stuck in a loop"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
    };
    brk(&s1);
    assert_eq!(repo.claim_on(&a), None, "the break ended the claim");
    let said = assert_blocked(&repo.edit("claude-code-Edit.json", "s1", "src/a.rs"));
    for part in [
        a.display().to_string(),
        format!("token {old_token}"),
        "was broken by".to_string(),
        "stuck in a loop".to_string(),
        "read ".to_string(),
        "make this edit again".to_string(),
    ] {
        assert!(said.contains(&part), "says {part:?}: {said}");
    }
    assert!(!said.contains("another agent session"), "{said}");
    assert!(!said.contains("--holder"), "{said}");
    let (new_token, who) = repo.claim_on(&a).expect("claimed for the session anew");
    assert!(new_token > old_token, "{new_token} > {old_token}");
    assert!(who.contains(&s1), "{who}");
    assert!(said.contains(&format!("token {new_token}")), "{said}");
    // Once: the edit made again passes, and so does the next.
    for _ in 0..2 {
        assert_allowed(
            &repo.edit("claude-code-Edit.json", "s1", "src/a.rs"),
            "claude-code",
        );
    }
    // Broken again, and another session claims the file first: its claim refuses
    // the edit, as any other session's claim does.
    brk(&s1);
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s2", "src/a.rs"),
        "claude-code",
    );
    let held = assert_blocked(&repo.edit("claude-code-Edit.json", "s1", "src/a.rs"));
    assert!(held.contains("another agent session"), "{held}");
}

/// The README's hand-fed payloads do what its comments say: session s1's edit is
/// allowed, s2's blocked, and s1's SessionEnd releases the file (so s2 may edit).
/// Their session ids are made unguessable first (a new user's `s1` SessionEnd
/// released another tester's claims of the same pasted id).
#[test]
fn the_readmes_hand_fed_payloads_do_what_it_says() {
    let repo = Repo::new();
    let readme = include_str!("../../README.md");
    assert!(
        readme.contains("\ns1=s1-$RANDOM$RANDOM$RANDOM s2=s2-$RANDOM$RANDOM$RANDOM\n"),
        "the README's session ids are drawn before use"
    );
    let root = repo.root.display().to_string();
    let outcomes: Vec<(String, Option<i32>)> = readme
        .lines()
        .filter(|line| {
            line.starts_with("echo '{\"session_id\"")
                && line.contains("| fencepost hook claude-code")
        })
        .map(|line| {
            let payload = line
                .strip_prefix("echo '")
                .and_then(|rest| rest.split("' | fencepost hook").next())
                .unwrap()
                .replace("'$PWD'", &root)
                .replace("'$s1'", "s1-20731")
                .replace("'$s2'", "s2-9114");
            let said = line.split("# exit ").nth(1).unwrap().to_string();
            let code = repo
                .hook_in(&repo.root, "claude-code", &payload, &[])
                .status
                .code();
            (said, code)
        })
        .collect();
    assert_eq!(
        outcomes.len(),
        3,
        "the README's three payloads: {outcomes:?}"
    );
    for (said, code) in &outcomes {
        let expected: i32 = said[..1].parse().unwrap();
        assert_eq!(*code, Some(expected), "README says exit {said}");
    }
    assert_allowed(
        &repo.edit("claude-code-Edit.json", "s2", "src/a.rs"),
        "claude-code",
    );
}

/// A session's first edit, of another worktree's file, before any claim made the
/// repository's store: claimed all the same (the store is made), so that
/// worktree's own session is blocked; a file outside every repository is still
/// neither claimed nor given a store.
#[test]
fn another_worktrees_file_is_claimed_before_the_store_exists() {
    let repo = Repo::new();
    git(&repo.root, &["add", "."]);
    git(&repo.root, &["commit", "-qm", "init"]);
    let wt = repo.scratch.path().canonicalize().unwrap().join("wt");
    git(&repo.root, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    assert!(repo.status().is_empty());
    let from_main = fixture("claude-code-Edit.json", "c1", &repo.root, "../wt/src/a.rs");
    assert_allowed(
        &repo.hook_in(&repo.root, "claude-code", &from_main, &[]),
        "claude-code",
    );
    assert!(
        repo.claim_on(&wt.join("src/a.rs")).is_some(),
        "{:?}",
        repo.status()
    );
    let in_wt = fixture("claude-code-Edit.json", "c2", &wt, "src/a.rs");
    assert_blocked(&repo.hook_in(&wt, "claude-code", &in_wt, &[]));
    let loose = repo
        .scratch
        .path()
        .canonicalize()
        .unwrap()
        .join("loose.txt");
    let loose = fixture(
        "claude-code-Write.json",
        "c1",
        &repo.root,
        loose.to_str().unwrap(),
    );
    assert_allowed(
        &repo.hook_in(&repo.root, "claude-code", &loose, &[]),
        "claude-code",
    );
    assert!(
        !repo.scratch.user_state().join("fencepost/claims").exists(),
        "a store was made for a file outside every repository"
    );
}

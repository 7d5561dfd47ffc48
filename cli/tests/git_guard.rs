//! `fencepost guard` as git's pre-commit and pre-push hooks, and `fencepost hooks
//! install|uninstall|status` (issue 15), in real git repositories.

use std::path::Path;
use std::process::Output;

use crate::agent_hooks::{Repo, git};

fn path_with_fencepost() -> String {
    let dir = crate::util::bin().parent().unwrap().display().to_string();
    format!("{dir}:{}", std::env::var("PATH").unwrap_or_default())
}

impl Repo {
    /// `fencepost hooks …` in `dir`.
    fn hooks(&self, dir: &Path, args: &[&str]) -> Output {
        self.scratch
            .bare_cmd(dir)
            .arg("hooks")
            .args(args)
            .output()
            .unwrap()
    }

    /// Holds `path` (relative to the root) for Claude Code session `session`,
    /// through the hook.
    fn hold(&self, session: &str, path: &str) {
        let payload = format!(
            r#"{{"session_id":"{session}","cwd":"{}","hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{{"file_path":"{path}","content":""}}}}"#,
            self.root.display()
        );
        let out = self.hook_in(&self.root, "claude-code", &payload, &[]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }

    /// A git command in `dir` with the installed hooks able to run `fencepost`.
    fn git_with_hooks(&self, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = crate::util::scrubbed(std::process::Command::new("git"));
        cmd.current_dir(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .env("PATH", path_with_fencepost())
            .env("XDG_STATE_HOME", self.scratch.user_state())
            .env_remove("FENCEPOST_SESSION")
            .env_remove("FENCEPOST_STORE")
            .env_remove("FENCEPOST_GUARD")
            .env_remove("CLAUDECODE")
            .env_remove("CLAUDE_CODE_SESSION_ID");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    fn commit_all(&self, dir: &Path, env: &[(&str, &str)]) -> Output {
        git(dir, &["add", "-A"]);
        self.git_with_hooks(dir, &["commit", "-qm", "change"], env)
    }

    fn initial_commit(&self) {
        git(&self.root, &["add", "-A"]);
        git(&self.root, &["commit", "-qm", "init"]);
    }
}

fn refusals(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter(|l| l.starts_with("fencepost: refusing to "))
        .map(str::to_string)
        .collect()
}

fn guarded_repo() -> Repo {
    let repo = Repo::new();
    repo.initial_commit();
    let out = repo.hooks(&repo.root, &["install", "--git"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    repo
}

/// The commits `git merge` and `git am` make run no pre-commit, only their own
/// hooks, which the install guards too: a merge or an applied patch that changes a
/// file another session holds is refused, and one that does not lands (a breaker:
/// both committed the held file).
#[test]
fn a_merge_or_an_applied_patch_of_a_held_file_is_refused() {
    let repo = guarded_repo();
    let root = &repo.root;
    let branch = git(root, &["rev-parse", "--abbrev-ref", "HEAD"]);
    let branch = branch.trim();
    // A side branch changes a.rs; the current branch moves on, so the merge commits.
    git(root, &["checkout", "-qb", "side"]);
    std::fs::write(root.join("src/a.rs"), "side\n").unwrap();
    git(root, &["commit", "-nqam", "side changes a.rs"]);
    let patch = root.parent().unwrap().join("side.patch");
    let formatted = git(root, &["format-patch", "-1", "--stdout", "side"]);
    std::fs::write(&patch, formatted).unwrap();
    git(root, &["checkout", "-q", branch]);
    std::fs::write(root.join("src/free.rs"), "main\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-nqm", "main moves on"]);
    repo.hold("s1", "src/a.rs");
    let s2 = [("FENCEPOST_SESSION", "claude-code:s2")];
    let head = || git(root, &["rev-parse", "HEAD"]);
    let before = head();
    let merged = repo.git_with_hooks(root, &["merge", "--no-edit", "side"], &s2);
    assert_ne!(merged.status.code(), Some(0), "{merged:?}");
    let lines = refusals(&merged);
    assert!(
        lines.len() == 1
            && lines[0].contains("refusing to commit src/a.rs")
            && lines[0].contains("git merge --abort"),
        "{merged:?}"
    );
    assert_eq!(head(), before, "nothing was committed");
    git(root, &["merge", "--abort"]);
    let applied = repo.git_with_hooks(root, &["am", "-q", patch.to_str().unwrap()], &s2);
    assert_ne!(applied.status.code(), Some(0), "{applied:?}");
    let lines = refusals(&applied);
    assert!(
        lines.len() == 1 && lines[0].contains("git am --abort"),
        "{applied:?}"
    );
    assert_eq!(head(), before, "nothing was committed");
    git(root, &["am", "--abort"]);
    // The holder's own session merges.
    let own = [("FENCEPOST_SESSION", "claude-code:s1")];
    let merged = repo.git_with_hooks(root, &["merge", "--no-edit", "side"], &own);
    assert_eq!(merged.status.code(), Some(0), "{merged:?}");
    assert_ne!(head(), before);
}

#[test]
fn a_commit_of_a_file_another_session_holds_is_refused() {
    let repo = guarded_repo();
    repo.hold("s1", "src/a.rs");
    std::fs::write(repo.root.join("src/a.rs"), "changed\n").unwrap();
    std::fs::write(repo.root.join("src/free.rs"), "free\n").unwrap();
    for env in [vec![], vec![("FENCEPOST_SESSION", "claude-code:s2")]] {
        let out = repo.commit_all(&repo.root, &env);
        assert_ne!(out.status.code(), Some(0), "{out:?}");
        let lines = refusals(&out);
        assert_eq!(lines.len(), 1, "one line per held path: {out:?}");
        assert!(
            lines[0].contains("src/a.rs")
                && lines[0].contains(fencepost::SessionTag::of("claude-code:s1").as_str())
                && !lines[0].contains("claude-code:s1"),
            "{lines:?}"
        );
        assert!(
            lines[0].contains("until 20") && lines[0].contains("ask the human"),
            "{lines:?}"
        );
    }
    // The committer's own session commits it; inside Claude Code its session id
    // comes from the environment Claude Code gives its Bash tool.
    let out = repo.commit_all(
        &repo.root,
        &[("CLAUDECODE", "1"), ("CLAUDE_CODE_SESSION_ID", "s1")],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// A file another session holds through a hard link of it is refused under its
/// other name too: both names are one file (its file-id series). A breaker: the
/// commit went through, while the hook blocked the same edit.
#[test]
fn a_commit_of_a_file_held_through_another_hard_link_is_refused() {
    let repo = guarded_repo();
    std::fs::hard_link(repo.root.join("src/a.rs"), repo.root.join("src/a_link.rs")).unwrap();
    git(&repo.root, &["add", "-A"]);
    git(&repo.root, &["commit", "-qm", "link", "--no-verify"]);
    repo.hold("s1", "src/a_link.rs");
    std::fs::write(repo.root.join("src/a.rs"), "changed\n").unwrap();
    git(&repo.root, &["add", "src/a.rs"]);
    let out = repo.git_with_hooks(&repo.root, &["commit", "-qm", "change"], &[]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    let lines = refusals(&out);
    // src/a.rs under its own name; git also sees src/a_link.rs unchanged (one inode:
    // the content changed under both names, but only src/a.rs was staged).
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(
        lines[0].contains("refusing to commit src/a.rs")
            && lines[0].contains("claimed it as src/a_link.rs (")
            && lines[0].contains(fencepost::SessionTag::of("claude-code:s1").as_str()),
        "{lines:?}"
    );
    // The holder's own session commits it.
    let out = repo.git_with_hooks(
        &repo.root,
        &["commit", "-qm", "change"],
        &[("FENCEPOST_SESSION", "claude-code:s1")],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn renames_and_deletions_of_held_files_are_refused() {
    let repo = guarded_repo();
    repo.hold("s1", "src/a.rs");
    // Out of a held path: both names, the new one being the held file itself.
    git(&repo.root, &["mv", "src/a.rs", "src/moved.rs"]);
    let out = repo.git_with_hooks(&repo.root, &["commit", "-qm", "mv"], &[]);
    let lines = refusals(&out);
    assert_eq!(lines.len(), 2, "{out:?}");
    assert!(
        lines[1].contains("src/moved.rs") && lines[1].contains("claimed it as src/a.rs ("),
        "{lines:?}"
    );
    git(&repo.root, &["reset", "-q", "--hard"]);
    // Into a held path (a new name another session claimed first).
    repo.hold("s1", "src/target.rs");
    std::fs::write(repo.root.join("src/b.rs"), "b\n").unwrap();
    git(&repo.root, &["add", "src/b.rs"]);
    git(&repo.root, &["commit", "-qm", "b", "--no-verify"]);
    git(&repo.root, &["mv", "src/b.rs", "src/target.rs"]);
    let out = repo.git_with_hooks(&repo.root, &["commit", "-qm", "mv"], &[]);
    let lines = refusals(&out);
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(lines[0].contains("src/target.rs"), "{lines:?}");
    git(&repo.root, &["reset", "-q", "--hard"]);
    // A deletion.
    git(&repo.root, &["rm", "-q", "src/a.rs"]);
    let out = repo.git_with_hooks(&repo.root, &["commit", "-qm", "rm"], &[]);
    assert_eq!(refusals(&out).len(), 1, "{out:?}");
}

#[test]
fn the_humans_escapes_let_a_commit_through() {
    let repo = guarded_repo();
    repo.hold("s1", "src/a.rs");
    std::fs::write(repo.root.join("src/a.rs"), "changed\n").unwrap();
    git(&repo.root, &["add", "-A"]);
    let out = repo.git_with_hooks(
        &repo.root,
        &["commit", "-qm", "x"],
        &[("FENCEPOST_GUARD", "off")],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    std::fs::write(repo.root.join("src/a.rs"), "again\n").unwrap();
    git(&repo.root, &["add", "-A"]);
    let out = repo.git_with_hooks(&repo.root, &["commit", "-qm", "y", "--no-verify"], &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn an_existing_hook_is_chained_kept_and_given_back() {
    let repo = Repo::new();
    repo.initial_commit();
    let hooks = repo.root.join(".git/hooks");
    let original = "#!/bin/sh\necho ran >> \"$(git rev-parse --git-dir)/chained-ran\"\n";
    std::fs::write(hooks.join("pre-commit"), original).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        hooks.join("pre-commit"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    for _ in 0..2 {
        let out = repo.hooks(&repo.root, &["install", "--git"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    let status = repo.hooks(&repo.root, &["status", "--git"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("pre-commit: installed, chaining"),
        "{status:?}"
    );
    std::fs::write(repo.root.join("src/free.rs"), "x\n").unwrap();
    let out = repo.commit_all(&repo.root, &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        repo.root.join(".git/chained-ran").exists(),
        "the existing hook ran"
    );
    // Refused by the guard: the chained hook does not run after a refusal.
    repo.hold("s1", "src/a.rs");
    std::fs::write(repo.root.join("src/a.rs"), "changed\n").unwrap();
    assert_ne!(repo.commit_all(&repo.root, &[]).status.code(), Some(0));
    // Uninstall: the original hook is back, bytes and mode.
    let out = repo.hooks(&repo.root, &["uninstall", "--git"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-commit")).unwrap(),
        original
    );
    let mode = std::fs::metadata(hooks.join("pre-commit"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o750);
    assert!(!hooks.join("pre-push").exists());
}

/// A hook git ignores (not executable) stays ignored once chained: before the
/// install, commits went through with git's "hook was ignored" hint; the chain ran
/// it anyway (`exec` of a non-executable file), so every commit failed with
/// "Permission denied" after the install (found by the breaker). Pre-push alike.
#[test]
fn a_chained_hook_git_ignored_stays_ignored() {
    let repo = Repo::new();
    repo.initial_commit();
    let hooks = repo.root.join(".git/hooks");
    for hook in ["pre-commit", "pre-push"] {
        std::fs::write(
            hooks.join(hook),
            "#!/bin/sh
echo disabled >&2
exit 1
",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(hooks.join(hook), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::write(repo.root.join("src/free.rs"), "x\n").unwrap();
    let before = repo.commit_all(&repo.root, &[]);
    assert_eq!(
        before.status.code(),
        Some(0),
        "git ignores the hook: {before:?}"
    );
    let out = repo.hooks(&repo.root, &["install", "--git"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    std::fs::write(repo.root.join("src/free.rs"), "y\n").unwrap();
    let after = repo.commit_all(&repo.root, &[]);
    assert_eq!(
        after.status.code(),
        Some(0),
        "the install woke an ignored hook: {after:?}"
    );
    git(&repo.root, &["init", "-q", "--bare", "remote.git"]);
    let push = repo.git_with_hooks(&repo.root, &["push", "-q", "remote.git", "HEAD:main"], &[]);
    assert_eq!(
        push.status.code(),
        Some(0),
        "the install woke an ignored pre-push hook: {push:?}"
    );
}

#[test]
fn the_guard_runs_in_a_linked_worktree() {
    let repo = guarded_repo();
    let wt = repo.scratch.path().canonicalize().unwrap().join("wt");
    git(&repo.root, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    // A session in the worktree holds its copy of a.rs.
    let payload = format!(
        r#"{{"session_id":"w1","cwd":"{}","hook_event_name":"PreToolUse","tool_name":"Edit","tool_input":{{"file_path":"src/a.rs"}}}}"#,
        wt.display()
    );
    assert_eq!(
        repo.hook_in(&wt, "claude-code", &payload, &[])
            .status
            .code(),
        Some(0)
    );
    std::fs::write(wt.join("src/a.rs"), "changed\n").unwrap();
    let out = repo.commit_all(&wt, &[]);
    let lines = refusals(&out);
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(
        lines[0].contains(fencepost::SessionTag::of("claude-code:w1").as_str()),
        "{lines:?}"
    );
    // The main checkout's a.rs is another file: committing it there is fine.
    std::fs::write(repo.root.join("src/a.rs"), "main\n").unwrap();
    assert_eq!(repo.commit_all(&repo.root, &[]).status.code(), Some(0));
}

#[test]
fn core_ignorecase_folds_the_names() {
    let repo = guarded_repo();
    repo.hold("s1", "src/README.md");
    std::fs::write(repo.root.join("src/readme.md"), "x\n").unwrap();
    git(&repo.root, &["add", "-A"]);
    git(&repo.root, &["config", "core.ignorecase", "true"]);
    let out = repo.git_with_hooks(&repo.root, &["commit", "-qm", "x"], &[]);
    assert_eq!(refusals(&out).len(), 1, "{out:?}");
    git(&repo.root, &["config", "core.ignorecase", "false"]);
    let out = repo.git_with_hooks(&repo.root, &["commit", "-qm", "x"], &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn a_push_of_commits_touching_a_held_file_is_refused() {
    let repo = guarded_repo();
    let remote = repo.scratch.path().join("remote.git");
    git(
        repo.scratch.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    git(
        &repo.root,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    let branch = git(&repo.root, &["branch", "--show-current"])
        .trim()
        .to_string();
    let out = repo.git_with_hooks(&repo.root, &["push", "-q", "origin", &branch], &[]);
    assert_eq!(out.status.code(), Some(0), "first push: {out:?}");
    // A commit changing a.rs, made before anyone held it.
    std::fs::write(repo.root.join("src/a.rs"), "changed\n").unwrap();
    assert_eq!(repo.commit_all(&repo.root, &[]).status.code(), Some(0));
    repo.hold("s1", "src/a.rs");
    let out = repo.git_with_hooks(&repo.root, &["push", "-q", "origin", &branch], &[]);
    let lines = refusals(&out);
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(
        lines[0].starts_with("fencepost: refusing to push src/a.rs"),
        "{lines:?}"
    );
    // A push cannot leave a file out of commits already made (a new user).
    assert!(
        lines[0].contains("push only commits that do not change it"),
        "{lines:?}"
    );
    let out = repo.git_with_hooks(
        &repo.root,
        &["push", "-q", "origin", &branch],
        &[("FENCEPOST_SESSION", "claude-code:s1")],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "the holder's own session pushes: {out:?}"
    );
}

/// A push over a remote commit this repository does not have (someone pushed since
/// the last fetch; a force-push) cannot be checked: the guard refuses it saying
/// why and to fetch first, instead of git's "bad object" (a breaker).
#[test]
fn a_push_over_an_unfetched_remote_commit_says_to_fetch() {
    let repo = guarded_repo();
    let local = git(&repo.root, &["rev-parse", "HEAD"]).trim().to_string();
    let unknown = "b5e72f7b5e72f7b5e72f7b5e72f7b5e72f7b5e72";
    let out = repo
        .scratch
        .bare_cmd(&repo.root)
        .args(["guard", "pre-push", "origin", "/nowhere"])
        .write_stdin(format!(
            "refs/heads/main {local} refs/heads/main {unknown}\n"
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains(unknown)
            && said.contains("not in this repository")
            && said.contains("run `git fetch`, then push again")
            && !said.contains("bad object"),
        "{said}"
    );
}

/// The hooks run `fencepost` by name: `hooks install` warns when there is none on
/// PATH (a new user, with only the demo's build in target/release, got "fencepost:
/// not found" from every commit and edit), and says nothing when there is one.
#[test]
fn install_warns_when_fencepost_is_not_on_path() {
    let repo = Repo::new();
    let install = |path: &str| {
        repo.scratch
            .bare_cmd(&repo.root)
            .env("PATH", path)
            .args(["hooks", "install", "--agent", "claude-code"])
            .output()
            .unwrap()
    };
    let without = install("/nonexistent");
    assert_eq!(without.status.code(), Some(0), "{without:?}");
    let said = String::from_utf8_lossy(&without.stderr);
    assert!(
        said.contains("there is no `fencepost` on PATH here")
            && said.contains("cargo install --locked --path cli"),
        "{said}"
    );
    let with = install(&path_with_fencepost());
    assert!(with.stderr.is_empty(), "{with:?}");
}

/// `hooks install` outside a git repository writes nothing when it cannot do all
/// it was asked (the git hooks), and says how to install the agents' hooks alone;
/// those alone then install (a new user's find: the agents' settings were left
/// written beside an error naming --git, which they had not passed).
#[test]
fn install_outside_git_writes_nothing_half() {
    let repo = Repo::new();
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().display().to_string();
    let out = repo.hooks(&repo.root, &["install", "--project", &dir]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("nothing was installed")
            && said.contains("--agent claude-code --agent gemini"),
        "{said}"
    );
    for written in [".claude", ".gemini"] {
        assert!(
            !project.path().join(written).exists(),
            "{written} was written by a failed install"
        );
    }
    // `status`, which writes nothing anyway, says what it did not do (a new user's
    // find: it said "nothing was installed or removed").
    let out = repo.hooks(&repo.root, &["status", "--project", &dir]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("no hook was looked at") && !said.contains("installed"),
        "{said}"
    );
    let out = repo.hooks(
        &repo.root,
        &[
            "install",
            "--project",
            &dir,
            "--agent",
            "claude-code",
            "--agent",
            "gemini",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(project.path().join(".claude/settings.json").is_file());
}

/// `--local` is Claude Code's alone: refused for Gemini (it would write the
/// committed settings after all), and `status` and `uninstall` without it say
/// when the hook is in the local file (a new user was told "not installed").
#[test]
fn local_settings_are_claude_codes_and_are_reported_without_local() {
    let repo = Repo::new();
    for args in [
        &["install", "--agent", "gemini", "--local"][..],
        &["install", "--local"][..],
    ] {
        let out = repo.hooks(&repo.root, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert!(!repo.root.join(".gemini").exists(), "{args:?}: {out:?}");
    }
    let out = repo.hooks(
        &repo.root,
        &["install", "--agent", "claude-code", "--local"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for command in ["status", "uninstall"] {
        let out = repo.hooks(&repo.root, &[command, "--agent", "claude-code"]);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            said.contains("settings.local.json (`fencepost hooks")
                && said.contains("--agent claude-code --local` for that one"),
            "{command}: {out:?}"
        );
    }
    assert!(repo.root.join(".claude/settings.local.json").exists());
}

/// `hooks install` in a repository whose hooks directory cannot be made (a
/// `core.hooksPath` naming a file) fails with the agents' settings untouched, and
/// so does one whose agent settings cannot be edited: nothing is half-installed
/// (a breaker: the agents' settings were written before the failure).
#[test]
fn install_that_fails_writes_nothing_half() {
    let repo = Repo::new();
    std::fs::write(repo.root.join("hooksfile"), "").unwrap();
    git(&repo.root, &["config", "core.hooksPath", "hooksfile"]);
    let out = repo.hooks(&repo.root, &["install"]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    for written in [".claude", ".gemini"] {
        assert!(!repo.root.join(written).exists(), "{written}: {out:?}");
    }
    git(&repo.root, &["config", "--unset", "core.hooksPath"]);
    std::fs::create_dir_all(repo.root.join(".gemini")).unwrap();
    std::fs::write(repo.root.join(".gemini/settings.json"), "not json").unwrap();
    let out = repo.hooks(&repo.root, &["install"]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(!repo.root.join(".claude").exists(), "{out:?}");
    assert!(!repo.root.join(".git/hooks/pre-commit").exists(), "{out:?}");
    // A write that fails after others were made says what was done.
    #[cfg(unix)]
    {
        std::fs::remove_file(repo.root.join(".gemini/settings.json")).unwrap();
        std::os::unix::fs::symlink(
            repo.root.join("no/such/dir/g.json"),
            repo.root.join(".gemini/settings.json"),
        )
        .unwrap();
        let out = repo.hooks(&repo.root, &["install"]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let done = String::from_utf8_lossy(&out.stdout);
        assert!(
            done.contains("claude-code: installed") && done.contains("pre-commit: installed"),
            "{out:?}"
        );
    }
}

/// `hooks install` into an empty project and into one with settings of its own:
/// everything else byte-identical, twice = once, uninstall gives back the bytes.
#[test]
fn install_twice_then_uninstall_gives_back_the_original_bytes() {
    let repo = Repo::new();
    let claude = repo.root.join(".claude/settings.json");
    let gemini = repo.root.join(".gemini/settings.json");
    // Empty project: the files are created, then removed again.
    for _ in 0..2 {
        let out = repo.hooks(
            &repo.root,
            &["install", "--agent", "claude-code", "--agent", "gemini"],
        );
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    let text = std::fs::read_to_string(&claude).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        value["hooks"]["PreToolUse"][0]["matcher"],
        "Edit|Write|MultiEdit|NotebookEdit|Bash"
    );
    assert_eq!(
        value["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        "fencepost hook claude-code || exit 2"
    );
    assert_eq!(value["hooks"]["SessionEnd"].as_array().unwrap().len(), 1);
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&gemini).unwrap()).unwrap();
    assert_eq!(
        value["hooks"]["BeforeTool"][0]["matcher"],
        "write_file|replace|run_shell_command"
    );
    let status = repo.hooks(&repo.root, &["status", "--agent", "claude-code"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("claude-code: installed in"),
        "{status:?}"
    );
    let out = repo.hooks(
        &repo.root,
        &["uninstall", "--agent", "claude-code", "--agent", "gemini"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(!claude.exists() && !gemini.exists() && !repo.root.join(".claude").exists());
    // A project with settings and hooks of its own.
    std::fs::create_dir_all(claude.parent().unwrap()).unwrap();
    let original = "{\n    \"permissions\": {\"allow\": [\"Bash(cargo test:*)\"]},\n    \"hooks\": {\n        \"PreToolUse\": [\n            {\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"./check.sh\"}]}\n        ],\n        \"Stop\": []\n    }\n}\n";
    std::fs::write(&claude, original).unwrap();
    repo.hooks(&repo.root, &["install", "--agent", "claude-code"]);
    let once = std::fs::read_to_string(&claude).unwrap();
    repo.hooks(&repo.root, &["install", "--agent", "claude-code"]);
    assert_eq!(
        std::fs::read_to_string(&claude).unwrap(),
        once,
        "twice = once"
    );
    let value: serde_json::Value = serde_json::from_str(&once).unwrap();
    let groups = value["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "the existing entry is kept: {once}");
    assert_eq!(groups[0]["hooks"][0]["command"], "./check.sh");
    // Byte-identical except the added entries: removing them from the text by hand
    // gives the original.
    let added_pre = format!(",{}", serde_json::to_string(&groups[1]).unwrap());
    let added_end = format!(
        ",\"SessionEnd\":[{}]",
        serde_json::to_string(&value["hooks"]["SessionEnd"][0]).unwrap()
    );
    assert_eq!(
        once.replacen(&added_pre, "", 1).replacen(&added_end, "", 1),
        original,
        "{once}"
    );
    let out = repo.hooks(&repo.root, &["uninstall", "--agent", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), original);
    // Settings that are not JSON are refused with the file named; nothing changes.
    std::fs::write(&claude, "{ not json").unwrap();
    let out = repo.hooks(&repo.root, &["install", "--agent", "claude-code"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("settings.json"),
        "{out:?}"
    );
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), "{ not json");
}

#[test]
fn local_settings_and_git_hooks_install_from_a_worktree() {
    let repo = Repo::new();
    repo.initial_commit();
    let wt = repo.scratch.path().canonicalize().unwrap().join("wt");
    git(&repo.root, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    let out = repo.hooks(
        &wt,
        &["install", "--agent", "claude-code", "--local", "--git"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(wt.join(".claude/settings.local.json").exists());
    assert!(!wt.join(".claude/settings.json").exists());
    // The git hooks are in the common git directory: every worktree runs them.
    assert!(repo.root.join(".git/hooks/pre-commit").exists());
    let status = repo.hooks(&repo.root, &["status", "--git"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("pre-commit: installed"),
        "{status:?}"
    );
}

#[test]
fn a_subtree_another_session_holds_refuses_commits_below_it() {
    let repo = guarded_repo();
    let claim = repo.claim_for(&["--dir", "src"], "claude-code:s1");
    assert_eq!(claim.status.code(), Some(0), "{claim:?}");
    std::fs::write(repo.root.join("src/a.rs"), "changed\n").unwrap();
    let out = repo.commit_all(&repo.root, &[]);
    let lines = refusals(&out);
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(lines[0].contains("which holds the directory"), "{lines:?}");
    let out = repo.commit_all(&repo.root, &[("FENCEPOST_SESSION", "claude-code:s1")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the subtree's session commits: {out:?}"
    );
}

/// A file held by a claim made without a session (a human's or an agent's plain
/// `claim`) refuses the commit, since the guard cannot tell its holder from the
/// committer, and the refusal says how its own holder goes on: release it, or
/// claim with a session and commit as that session (a new user's find: the
/// refusal of their own claim gave no way forward).
#[test]
fn a_claim_without_a_session_refuses_and_says_how_its_holder_goes_on() {
    let repo = guarded_repo();
    let claim = repo
        .scratch
        .bare_cmd(&repo.root)
        .args(["claim", "--file", "src/a.rs", "--ttl", "60000"])
        .output()
        .unwrap();
    assert_eq!(claim.status.code(), Some(0), "{claim:?}");
    let handle = String::from_utf8_lossy(&claim.stdout).trim().to_string();
    std::fs::write(repo.root.join("src/a.rs"), "changed\n").unwrap();
    let out = repo.commit_all(&repo.root, &[]);
    let lines = refusals(&out);
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(
        lines[0].contains("if it is your own, release it with the handle"),
        "{lines:?}"
    );
    let release = repo
        .scratch
        .bare_cmd(&repo.root)
        .args(["release", "--file", "src/a.rs", &handle])
        .output()
        .unwrap();
    assert_eq!(release.status.code(), Some(0), "{release:?}");
    let out = repo.commit_all(&repo.root, &[]);
    assert_eq!(out.status.code(), Some(0), "released, it commits: {out:?}");
}

/// A repository made inside the checkout after a claim: `sub/a.txt` keeps its claim
/// in the outer store (rule 5), `sub/b.txt`, claimed since, has its claim in the new
/// one. The guard of the inner repository reads every store on the path, so both
/// refuse a commit by a third session (before, the first path located one store
/// for the whole directory and the other claim was missed).
#[test]
fn the_guard_sees_claims_in_every_store_on_the_path() {
    let repo = guarded_repo();
    let sub = repo.root.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("a.txt"), "a\n").unwrap();
    std::fs::write(sub.join("b.txt"), "b\n").unwrap();
    repo.hold("s1", "sub/a.txt");
    git(&sub, &["init", "-q"]);
    git(&sub, &["add", "-A"]);
    git(&sub, &["commit", "-qm", "init"]);
    let out = repo.hooks(&sub, &["install", "--git"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    repo.hold("s2", "sub/b.txt");
    std::fs::write(sub.join("a.txt"), "changed\n").unwrap();
    std::fs::write(sub.join("b.txt"), "changed\n").unwrap();
    let out = repo.commit_all(&sub, &[("FENCEPOST_SESSION", "claude-code:s3")]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    let lines = refusals(&out);
    assert_eq!(lines.len(), 2, "{out:?}");
    for (line, (file, session)) in lines.iter().zip([("a.txt", "s1"), ("b.txt", "s2")]) {
        let tag = fencepost::SessionTag::of(&format!("claude-code:{session}"));
        assert!(
            line.contains(file) && line.contains(tag.as_str()),
            "{lines:?}"
        );
    }
}

/// A staged entry that is a directory — a submodule's new commit, a symbolic link
/// to a directory — is checked as a subtree, not refused as a file that cannot be
/// one (a breaker: every submodule bump failed "cannot check this commit: … is a
/// directory", and an agent cannot skip the guard). A subtree claim of the
/// submodule by another session refuses its bump.
#[test]
fn a_staged_submodule_or_directory_link_is_checked_as_a_subtree() {
    let repo = guarded_repo();
    repo.hold("s9", "src/b.rs"); // the repository's store exists
    let upstream = tempfile::tempdir().unwrap();
    git(upstream.path(), &["init", "-q"]);
    std::fs::write(upstream.path().join("f"), "1\n").unwrap();
    git(upstream.path(), &["add", "f"]);
    git(upstream.path(), &["commit", "-qm", "1"]);
    let url = upstream.path().display().to_string();
    git(
        &repo.root,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &url,
            "s",
        ],
    );
    let out = repo.git_with_hooks(&repo.root, &["commit", "-qm", "add s"], &[]);
    assert_eq!(out.status.code(), Some(0), "adding the submodule: {out:?}");
    // Git runs the submodule's own hooks inside it: install and status say so.
    let out = repo.hooks(&repo.root, &["status", "--git"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("run `fencepost hooks status --git` inside each submodule"),
        "{out:?}"
    );
    std::fs::create_dir(repo.root.join("d")).unwrap();
    std::fs::write(repo.root.join("d/x"), "x\n").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("d", repo.root.join("lnk")).unwrap();
    let out = repo.commit_all(&repo.root, &[]);
    assert_eq!(out.status.code(), Some(0), "a link to a directory: {out:?}");
    let bump = |n: &str| {
        let sub = repo.root.join("s");
        std::fs::write(sub.join("f"), n).unwrap();
        git(&sub, &["commit", "-qam", n]);
        git(&repo.root, &["add", "s"]);
        repo.git_with_hooks(&repo.root, &["commit", "-qm", "bump"], &[])
    };
    let out = bump("2\n");
    assert_eq!(out.status.code(), Some(0), "a submodule bump: {out:?}");
    let claim = repo.claim_for(&["--dir", "s"], "claude-code:s1");
    assert_eq!(claim.status.code(), Some(0), "{claim:?}");
    let out = bump("3\n");
    let lines = refusals(&out);
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(lines[0].contains("which holds the directory"), "{lines:?}");
}

/// Run with no `fencepost` on PATH, the installed hook refuses the commit with one
/// line saying what to do (before, the shell's "fencepost: not found" only), and
/// `FENCEPOST_GUARD=off` lets the commit through without the check (a new user).
#[test]
fn a_commit_without_fencepost_on_path_is_refused_saying_what_to_do() {
    let repo = guarded_repo();
    let bare_path = "/usr/bin:/bin";
    for dir in bare_path.split(':') {
        assert!(
            !Path::new(dir).join("fencepost").exists(),
            "this test needs a PATH without fencepost: {dir} has one"
        );
    }
    std::fs::write(repo.root.join("new.txt"), "x").unwrap();
    let refused = repo.commit_all(&repo.root, &[("PATH", bare_path)]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("cannot check this commit: the fencepost command is not on PATH")
            && said.contains("FENCEPOST_GUARD=off"),
        "{said}"
    );
    let through = repo.git_with_hooks(
        &repo.root,
        &["commit", "-qm", "unchecked"],
        &[("PATH", bare_path), ("FENCEPOST_GUARD", " Off ")],
    );
    assert_eq!(through.status.code(), Some(0), "{through:?}");
    assert!(through.stderr.is_empty(), "{through:?}");
}

//! The git guard's row (issue 15): `fencepost guard pre-commit` over a commit of
//! 1000 staged files, as the whole process git runs, warm. Ten of the files are
//! held by the committer's own session, so the guard reads the store, looks every
//! path up and lets the commit through (exit 0): the full check, no refusal.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::rows::{Row, Target, paired, timed};
use crate::{Iters, R};

/// Files in the measured commit.
pub const FILES: usize = 1000;
/// How many of them the committer's session holds.
const HELD: usize = 10;
const SESSION: &str = "bench-committer";

fn git(repo: &Path, args: &[&str]) -> R<()> {
    let out = Command::new("git")
        .current_dir(repo)
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run git (needed for the guard row): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`git {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    Ok(())
}

/// The guard row, and its floor: one `git diff --cached --name-only` process over
/// the same index (what the guard itself must at least run).
pub fn rows(bin: &Path, dir: &Path, it: &Iters) -> R<Vec<Row>> {
    let repo = dir.join("guard-repo");
    std::fs::create_dir_all(repo.join("src"))?;
    git(&repo, &["init", "-q"])?;
    for n in 0..FILES {
        std::fs::write(repo.join(format!("src/f{n:04}.rs")), format!("// {n}\n"))?;
    }
    git(&repo, &["add", "-A"])?;
    let store = dir.join("guard-store");
    for n in 0..HELD {
        let payload = format!(
            r#"{{"session_id":"x","cwd":"{}","hook_event_name":"PreToolUse","tool_name":"Edit","tool_input":{{"file_path":"src/f{n:04}.rs"}}}}"#,
            repo.display()
        );
        let mut child = Command::new(bin)
            .current_dir(&repo)
            .arg("--store")
            .arg(&store)
            .args(["hook", "claude-code"])
            .env("FENCEPOST_SESSION", SESSION)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(payload.as_bytes())?;
        if !child.wait()?.success() {
            return Err("the hook refused a claim while setting up the guard row".into());
        }
    }
    let mut op = || {
        timed(|| {
            let out = Command::new(bin)
                .current_dir(&repo)
                .arg("--store")
                .arg(&store)
                .args(["guard", "pre-commit"])
                .env("FENCEPOST_SESSION", SESSION)
                .stdin(Stdio::null())
                .output()?;
            if !out.status.success() {
                return Err(format!(
                    "`fencepost guard pre-commit` exited with {}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                )
                .into());
            }
            Ok(())
        })
        .map(|(_, t)| t)
    };
    let mut floor = || {
        let (_, t) = timed(|| {
            Ok(Command::new("git")
                .current_dir(&repo)
                .args(["diff", "--cached", "--name-only", "-z", "--no-renames"])
                .stdout(Stdio::null())
                .status()?)
        })?;
        Ok(t)
    };
    let iters = (it.process / 3).max(3);
    let (summary, fl) = paired(iters, 3, &mut op, Some(&mut floor))?;
    Ok(vec![Row {
        group: "git guard, fs".into(),
        name: format!(
            "`fencepost guard pre-commit`, {FILES} staged files, {HELD} held by the committer's session"
        ),
        summary,
        floor: fl.map(|f| ("one `git diff --cached --name-only` process".into(), f)),
        floor_one: None,
        floor_swept: None,
        back_to_back: None,
        weather: None,
        target: Some(Target::P50AtMost(Duration::from_millis(100))),
    }])
}

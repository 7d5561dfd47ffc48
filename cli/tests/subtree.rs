//! Subtree claims through the binary (`--dir`, docs/design-05-subtrees-and-shared.md):
//! conflicts both ways, bad input, `status`, and real processes racing a subtree
//! against files inside it.

#[cfg(unix)]
use std::process::Stdio;

#[cfg(unix)]
use crate::util::Background;
use crate::util::{Scratch, one_line_stderr, token_of};

fn claim(s: &Scratch, args: &[&str]) -> std::process::Output {
    s.cmd()
        .arg("claim")
        .args(args)
        .args(["--ttl", "60000"])
        .output()
        .unwrap()
}

#[test]
fn a_subtree_and_the_files_below_it_exclude_each_other() {
    let s = Scratch::new();
    std::fs::create_dir_all(s.path().join("src/auth")).unwrap();
    let tree = claim(&s, &["--dir", "src", "--owner", "tree-agent"]);
    assert_eq!(tree.status.code(), Some(0), "{tree:?}");
    // A file below it that does not exist yet, through a `..` spelling: refused (3),
    // naming the subtree's holder.
    let file = claim(
        &s,
        &["--file", "docs/../src/auth/new.rs", "--owner", "file-agent"],
    );
    assert_eq!(file.status.code(), Some(3), "{file:?}");
    let message = one_line_stderr(&file);
    assert!(message.contains("tree-agent"), "{message}");
    // A directory above: refused too. Beside it: free.
    assert_eq!(claim(&s, &["--dir", "."]).status.code(), Some(3));
    assert_eq!(claim(&s, &["--file", "README.md"]).status.code(), Some(0));
    // status: one row for the subtree, of kind dir, and no index rows.
    let status = s.status();
    let dirs: Vec<_> = status
        .iter()
        .filter(|e| {
            e["resource"]
                .as_str()
                .is_some_and(|r| r.starts_with("dir:"))
        })
        .collect();
    assert_eq!(dirs.len(), 1, "{status:?}");
    assert!(
        status.iter().all(|e| e["key"]
            .as_str()
            .is_some_and(|k| !k.starts_with("tree-") && !k.starts_with("link-"))),
        "{status:?}"
    );
    // Released, the file can be claimed, and then the subtree is refused.
    let handle = crate::util::handle_of(&tree);
    let released = s
        .cmd()
        .args(["release", "--dir", "src", &handle])
        .output()
        .unwrap();
    assert_eq!(released.status.code(), Some(0), "{released:?}");
    let file = claim(&s, &["--file", "src/auth/new.rs", "--owner", "file-agent"]);
    assert_eq!(file.status.code(), Some(0), "{file:?}");
    let tree = claim(&s, &["--dir", "src"]);
    assert_eq!(tree.status.code(), Some(3), "{tree:?}");
    assert!(one_line_stderr(&tree).contains("file-agent"));
    // check takes the subtree's token.
    let token = token_of(&claim(&s, &["--dir", "docs"]));
    let check = s
        .cmd()
        .args(["check", "--dir", "docs", &token.to_string()])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{check:?}");
}

#[test]
fn a_file_given_as_a_subtree_is_refused_with_the_flag_to_use() {
    let s = Scratch::new();
    std::fs::write(s.path().join("notes.txt"), b"x").unwrap();
    let output = claim(&s, &["--dir", "notes.txt"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let message = one_line_stderr(&output);
    assert!(message.contains("--file"), "{message}");
    // And a directory given as a file points to --dir.
    std::fs::create_dir(s.path().join("src")).unwrap();
    let output = claim(&s, &["--file", "src"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(one_line_stderr(&output).contains("--dir"));
}

/// Each `run` child: a subtree holder creates `tree.busy` and finds no file marker;
/// a file holder creates its own marker and finds no `tree.busy`. Both write their
/// marker first and look second, so any two inside at once are seen by at least
/// one of them (exit 9).
#[cfg(unix)]
const CRITICAL: &str = r#"
if [ "$KIND" = tree ]; then
  : > tree.busy
  for m in file-*.busy; do [ -e "$m" ] && { echo "overlap: $m while the subtree is held" >&2; exit 9; }; done
else
  : > "file-$$.busy"
  [ -e tree.busy ] && { echo "overlap: tree.busy while $FENCEPOST_FILE is held" >&2; exit 9; }
fi
echo "$KIND $FENCEPOST_TOKEN" >> log
sleep 0.02
rm -f tree.busy "file-$$.busy"
"#;

#[cfg(unix)]
const WORKER: &str = r#"
fails=0
i=0
while [ $i -lt "$ROUNDS" ]; do
  "$FP" run $TARGET --wait 60000 --ttl 5000 -- sh -c "$CRITICAL" || fails=$((fails+1))
  i=$((i+1))
done
exit $fails
"#;

/// Unix only: the workers and their critical sections are `sh` scripts (the
/// same exclusion among threads, the conformance scenario
/// `subtree_contention_threads`, runs under Wine).
#[cfg(unix)]
#[test]
fn racing_processes_never_hold_a_subtree_and_a_file_inside_it_at_once() {
    const ROUNDS: usize = 4;
    let s = Scratch::new();
    std::fs::create_dir_all(s.path().join("src/a")).unwrap();
    std::fs::write(s.path().join("src/a/one.rs"), b"x").unwrap();
    let targets = [
        ("tree", "--dir src"),
        ("tree", "--dir ./src/../src"),
        ("file", "--file src/a/one.rs"),
        ("file", "--file src/b/new.rs"),
        ("file", "--file src/a/one.rs"),
        ("file", "--file src/c/d/e.rs"),
    ];
    let workers: Vec<Background> = targets
        .iter()
        .map(|(kind, target)| {
            let child = crate::util::scrubbed(std::process::Command::new("sh"))
                .args(["-c", WORKER])
                .current_dir(s.path())
                .env("FP", crate::util::bin())
                .env("FENCEPOST_STORE", s.store())
                .env_remove("FENCEPOST_OWNER")
                .env("ROUNDS", ROUNDS.to_string())
                .env("TARGET", target)
                .env("KIND", kind)
                .env("CRITICAL", CRITICAL)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            Background(child)
        })
        .collect();
    for mut worker in workers {
        let stderr = worker.0.stderr.take();
        let status = worker.0.wait().unwrap();
        let mut text = String::new();
        if let Some(mut stderr) = stderr {
            std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
        }
        assert_eq!(status.code(), Some(0), "a worker failed: {text}");
    }
    let log = std::fs::read_to_string(s.path().join("log")).unwrap();
    assert_eq!(log.lines().count(), targets.len() * ROUNDS, "log:\n{log}");
    // The subtree's tokens strictly increase.
    let tree: Vec<u64> = log
        .lines()
        .filter_map(|l| l.strip_prefix("tree "))
        .map(|t| t.parse().unwrap())
        .collect();
    assert!(tree.windows(2).all(|w| w[0] < w[1]), "{tree:?}");
}

/// The `break` a refusal suggests names the path whole, not as the claimer spelled
/// it relative to its own working directory: the human asked to run it may be
/// elsewhere (a new user was told `break --dir src`).
#[test]
fn a_suggested_break_names_the_path_whole() {
    let s = Scratch::new();
    std::fs::create_dir_all(s.path().join("src")).unwrap();
    let tree = claim(&s, &["--dir", "src", "--owner", "tree-agent"]);
    assert_eq!(tree.status.code(), Some(0), "{tree:?}");
    let refused = claim(&s, &["--dir", "src", "--shared"]);
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    let message = one_line_stderr(&refused);
    let whole = std::path::absolute(s.path().join("src")).unwrap();
    let whole = whole.display().to_string();
    let word = if cfg!(windows) {
        format!("'{whole}'")
    } else {
        whole
    };
    assert!(
        message.contains(&format!("fencepost break --dir {word} --reason")),
        "{message}"
    );
}

/// A refusal by a subtree above names the subtree, its holder and a `break` of the
/// subtree (the one that works), not of the file asked for; a refusal of a subtree
/// by a file below it names the file. The suggested `break` is run and works.
#[test]
fn a_refusal_names_the_resource_in_the_way_and_a_break_that_works() {
    let s = Scratch::new();
    std::fs::create_dir_all(s.path().join("src/auth")).unwrap();
    // As fencepost shows it (no `\\?\` prefix on Windows), and as a `break`
    // command spells it: quoted when it has characters a shell reads (`\`, `:`).
    let src = crate::util::resolved(&s.path().join("src"));
    let word = |path: &std::path::Path| {
        let text = path.display().to_string();
        if cfg!(windows) {
            format!("'{text}'")
        } else {
            text
        }
    };
    let tree = claim(&s, &["--dir", "src", "--owner", "tree-agent"]);
    assert_eq!(tree.status.code(), Some(0), "{tree:?}");
    let file = claim(&s, &["--file", "src/auth/login.rs"]);
    assert_eq!(file.status.code(), Some(3), "{file:?}");
    let message = one_line_stderr(&file);
    let break_dir = format!("fencepost break --dir {} --reason", word(&src));
    assert!(
        message.contains(&format!(
            "blocked by dir {}, held by tree-agent",
            src.display()
        )) && message.contains(&break_dir)
            && !message.contains("break --file"),
        "{message}"
    );
    // With a wait, the same.
    let waited = claim(&s, &["--file", "src/auth/login.rs", "--wait", "200"]);
    let message = one_line_stderr(&waited);
    assert!(
        message.contains("gave up after") && message.contains(&break_dir),
        "{message}"
    );
    // The suggested break (a human's) works, and then the file can be claimed.
    let broke = s
        .cmd()
        .args(["break", "--dir"])
        .arg(&src)
        .args(["--reason", "test"])
        .output()
        .unwrap();
    assert_eq!(broke.status.code(), Some(0), "{broke:?}");
    let file = claim(
        &s,
        &["--file", "src/auth/login.rs", "--owner", "file-agent"],
    );
    assert_eq!(file.status.code(), Some(0), "{file:?}");
    // The other way: a subtree refused by a file below it names the file.
    let tree = claim(&s, &["--dir", "src"]);
    let message = one_line_stderr(&tree);
    let login = src.join("auth").join("login.rs");
    assert!(
        message.contains(&format!(
            "blocked by file {}, held by file-agent",
            login.display()
        )) && message.contains(&format!("fencepost break --file {} --reason", word(&login))),
        "{message}"
    );
    // --json carries the resource in the way.
    let json = s
        .cmd()
        .args(["claim", "--dir", "src", "--json"])
        .output()
        .unwrap();
    let verdict = crate::util::json_of(&json);
    assert_eq!(
        verdict["holder"]["in_the_way"],
        format!("file:{}", login.display()),
        "{verdict}"
    );
}

/// A subtree covers its directory's own path: `--dir zz` and `--file zz` are never
/// both granted, in either order.
#[test]
fn a_subtree_and_a_file_of_the_same_path_exclude_each_other() {
    let s = Scratch::new();
    for (first, second) in [("--dir", "--file"), ("--file", "--dir")] {
        let held = claim(&s, &[first, "zz", "--owner", "first"]);
        assert_eq!(held.status.code(), Some(0), "{held:?}");
        let refused = claim(&s, &[second, "zz"]);
        assert_eq!(
            refused.status.code(),
            Some(3),
            "{second} zz while {first} zz: {refused:?}"
        );
        assert!(one_line_stderr(&refused).contains("first"));
        let released = s
            .cmd()
            .args(["release", first, "zz", &crate::util::handle_of(&held)])
            .output()
            .unwrap();
        assert_eq!(released.status.code(), Some(0), "{released:?}");
    }
}

/// A `run --dir` SIGKILLed while holding: a claim of a file below it gets in at
/// once (as a claim of the subtree itself would), and the dead subtree token no
/// longer passes `check`.
#[cfg(unix)]
#[test]
fn a_sigkilled_subtree_holder_does_not_keep_covered_files_out() {
    use std::io::{BufRead, BufReader};
    let s = Scratch::new();
    std::fs::create_dir_all(s.path().join("src")).unwrap();
    let mut run = s.spawn_cmd();
    run.args([
        "run",
        "--dir",
        "src",
        "--ttl",
        "60000",
        "--",
        "sh",
        "-c",
        "echo held; exec sleep 60",
    ])
    .stdout(Stdio::piped());
    let mut run = crate::util::Background(run.spawn().unwrap());
    let mut line = String::new();
    BufReader::new(run.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held");
    crate::util::wait_until(
        "the run names its command's group",
        std::time::Duration::from_secs(20),
        || {
            s.status().iter().any(|e| {
                e["resource"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("dir:"))
                    && e["generation"].as_u64().is_some_and(|g| g >= 2)
            })
        },
    );
    let dead = s.status();
    let dead = dead
        .iter()
        .find(|e| {
            e["resource"]
                .as_str()
                .is_some_and(|r| r.starts_with("dir:"))
        })
        .and_then(|e| e["token"].as_u64())
        .expect("the subtree's row");
    // Alive: the file is refused.
    assert_eq!(claim(&s, &["--file", "src/a.rs"]).status.code(), Some(3));
    // SIGKILL the run: its guard stops the child at once, and the holder is gone
    // once the child's group is (a wait covers the guard's few milliseconds).
    run.0.kill().unwrap();
    run.0.wait().unwrap();
    let started = std::time::Instant::now();
    let file = claim(&s, &["--file", "src/a.rs", "--wait", "20000"]);
    assert_eq!(file.status.code(), Some(0), "not taken at once: {file:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    s.cmd()
        .args(["check", "--dir", "src", &dead.to_string()])
        .assert()
        .code(3);
}

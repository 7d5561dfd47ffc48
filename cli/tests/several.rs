//! Several resources at once (issue 14): `claim --lock a --lock b --file c` claims
//! all or nothing, one handle per resource, in one canonical order so that two
//! claimers never deadlock.

#[cfg(unix)]
use std::io::{BufRead, BufReader};
#[cfg(unix)]
use std::process::Stdio;

#[cfg(unix)]
use crate::util::{Background, handle_of, send_signal};
use crate::util::{Scratch, json_of, one_line_stderr};

/// The handles a multi-resource `claim` printed, one per line.
fn handles(output: &std::process::Output) -> Vec<String> {
    assert_eq!(output.status.code(), Some(0), "claim failed: {output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn token(handle: &str) -> String {
    handle.split_once('.').unwrap().0.to_string()
}

#[test]
fn several_resources_get_one_handle_each_in_the_order_given() {
    let s = Scratch::new();
    std::fs::write(s.path().join("c.txt"), "c").unwrap();
    let output = s
        .cmd()
        .args(["claim", "--file", "c.txt", "--lock", "b", "--lock", "a"])
        .output()
        .unwrap();
    let lines = handles(&output);
    assert_eq!(lines.len(), 3, "{lines:?}");
    // Locks in the order given, then files.
    for (line, target) in lines
        .iter()
        .zip([["--lock", "b"], ["--lock", "a"], ["--file", "c.txt"]])
    {
        s.cmd()
            .args(["check", target[0], target[1], &token(line)])
            .assert()
            .code(0);
    }
    // Each is its own lease: released on its own with its own handle.
    s.cmd()
        .args(["release", "--lock", "b", &lines[0]])
        .assert()
        .code(0);
    s.cmd()
        .args(["check", "--lock", "a", &token(&lines[1])])
        .assert()
        .code(0);

    let json = s
        .cmd()
        .args(["claim", "--lock", "x", "--lock", "y", "--json"])
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(0), "{json:?}");
    let json = json_of(&json);
    assert_eq!(json["ok"], true);
    let leases = json["leases"].as_array().unwrap();
    assert_eq!(leases.len(), 2);
    assert_eq!(leases[0]["resource"], "lock:x");
    assert_eq!(leases[1]["resource"], "lock:y");
    assert_ne!(leases[0]["holder"], leases[1]["holder"], "one tenure each");
}

#[test]
fn one_held_resource_refuses_the_claim_and_nothing_is_taken() {
    let s = Scratch::new();
    let holder = s.claim("a", &["--owner", "agent-a"]);
    let output = s
        .cmd()
        .args([
            "claim", "--lock", "free", "--lock", "a", "--owner", "agent-b",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stderr = one_line_stderr(&output);
    assert!(stderr.contains("a is held by agent-a"), "{stderr}");
    assert!(stderr.contains(&format!("token {holder}")), "{stderr}");
    assert!(
        stderr.contains("none of the 2 resources was claimed"),
        "{stderr}"
    );
    assert!(
        s.entry("free").is_none_or(|e| e["live"] == false),
        "the free resource was left held"
    );
    let json = s
        .cmd()
        .args(["claim", "--lock", "free", "--lock", "a", "--json"])
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(3));
    let verdict = json_of(&json);
    assert_eq!(verdict["reason"], "held");
    assert_eq!(verdict["resource"], "lock:a");
    // --conflict-exit-code applies as for one resource.
    s.cmd()
        .args([
            "claim",
            "--lock",
            "free",
            "--lock",
            "a",
            "--conflict-exit-code",
            "9",
        ])
        .assert()
        .code(9);
}

/// A subtree and something inside it in one claim is refused up front, with or
/// without a session, and nothing is written (a breaker: the claim met its own
/// subtree claim, blamed itself as the holder and burnt a token per round until its
/// wait ran out).
#[test]
fn a_subtree_and_a_path_inside_it_in_one_claim_are_refused() {
    let s = Scratch::new();
    std::fs::create_dir_all(s.path().join("d/x")).unwrap();
    std::fs::write(s.path().join("d/f"), "f").unwrap();
    for (args, inner) in [
        (vec!["--dir", "d", "--file", "d/f", "--wait", "2000"], "d/f"),
        (
            vec!["--file", "d/f", "--dir", "d", "--session", "s1"],
            "d/f",
        ),
        (vec!["--dir", "d/x", "--dir", "d"], "d/x"),
    ] {
        let output = s.cmd().arg("claim").args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        let line = one_line_stderr(&output);
        assert!(
            line.contains(&format!("{inner} is inside d, which this claim also names")),
            "{line}"
        );
    }
    // One path, as a directory and as a file (it need not exist).
    for path in ["zz", "d/new"] {
        let output = s
            .cmd()
            .args(["claim", "--dir", path, "--file", path, "--wait", "2000"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{path}: {output:?}");
        let line = one_line_stderr(&output);
        assert!(
            line.contains("name one path as a directory and as a file"),
            "{line}"
        );
    }
    assert_eq!(
        s.status(),
        Vec::<serde_json::Value>::new(),
        "nothing claimed"
    );
}

#[test]
fn bad_sets_are_one_clear_line() {
    let s = Scratch::new();
    let output = s
        .cmd()
        .args(["claim", "--lock", "Dup", "--lock", "dup "])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        one_line_stderr(&output).contains("are one resource"),
        "{output:?}"
    );

    // Two stores (a .fencepost directory below the working directory): refused,
    // naming both, before anything is claimed.
    let sub = s.path().join("sub");
    std::fs::create_dir_all(sub.join(".fencepost")).unwrap();
    std::fs::create_dir_all(s.path().join(".fencepost")).unwrap();
    std::fs::write(sub.join("f.txt"), "f").unwrap();
    let output = s
        .bare_cmd(s.path())
        .args(["claim", "--lock", "here", "--file", "sub/f.txt"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = one_line_stderr(&output);
    assert!(stderr.contains("in different stores"), "{stderr}");
    assert!(
        stderr.contains("separate commands, or pass --store"),
        "{stderr}"
    );
}

/// The issue's test through real processes: two shell loops claim {a, b} and
/// {b, a} with `fencepost claim`, 10 rounds each, waiting; both finish (no
/// deadlock) and never hold b at the same time (an exclusive `mkdir` marker), and
/// the tokens of b in the log strictly increase.
#[cfg(unix)]
#[test]
fn two_processes_claiming_ab_and_ba_never_deadlock_and_never_share_b() {
    let s = Scratch::new();
    let script = r#"
        set -e
        i=0
        while [ $i -lt 10 ]; do
            out=$("$FP" --store "$STORE" claim --lock "$1" --lock "$2" --wait 60000)
            set -- "$1" "$2" $out
            if [ "$1" = b ]; then tb=$3; else tb=$4; fi
            if mkdir "$DIR/busy" 2>/dev/null; then
                echo "${tb%%.*}" >> "$DIR/log"
                rmdir "$DIR/busy"
            else
                echo "OVERLAP ${tb%%.*}" >> "$DIR/log"
            fi
            "$FP" --store "$STORE" release --lock "$1" "$3"
            "$FP" --store "$STORE" release --lock "$2" "$4"
            set -- "$1" "$2"
            i=$((i + 1))
        done
    "#;
    let spawn = |first: &str, second: &str| {
        let mut cmd = crate::util::scrubbed(std::process::Command::new("sh"));
        cmd.args(["-c", script, "sh", first, second])
            .current_dir(s.path())
            .env("FP", crate::util::bin())
            .env_remove("FENCEPOST_SESSION")
            .env_remove("FENCEPOST_STORE")
            .env("STORE", s.store())
            .env("DIR", s.path())
            .stdout(Stdio::null());
        Background(cmd.spawn().unwrap())
    };
    let mut ab = spawn("a", "b");
    let mut ba = spawn("b", "a");
    assert!(ab.0.wait().unwrap().success(), "the {{a, b}} loop failed");
    assert!(ba.0.wait().unwrap().success(), "the {{b, a}} loop failed");
    let log = std::fs::read_to_string(s.path().join("log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 20, "{log}");
    assert!(!log.contains("OVERLAP"), "two holders of b at once: {log}");
    let tokens: Vec<u64> = lines.iter().map(|l| l.parse().unwrap()).collect();
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "b's tokens do not strictly increase: {tokens:?}"
    );
}

#[cfg(unix)]
#[test]
fn hold_keeps_every_lease_and_releases_them_all() {
    let s = Scratch::new();
    let mut hold = s.spawn_cmd();
    hold.args([
        "claim", "--lock", "a", "--lock", "b", "--hold", "--ttl", "3000",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut hold = Background(hold.spawn().unwrap());
    let mut reader = BufReader::new(hold.0.stdout.take().unwrap());
    let mut lines = Vec::new();
    for _ in 0..2 {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        lines.push(line.trim().to_string());
    }
    for (line, lock) in lines.iter().zip(["a", "b"]) {
        s.cmd()
            .args(["check", "--lock", lock, &token(line)])
            .assert()
            .code(0);
    }
    send_signal(hold.id(), "TERM");
    assert!(hold.0.wait().unwrap().success());
    for (line, lock) in lines.iter().zip(["a", "b"]) {
        s.cmd()
            .args(["check", "--lock", lock, &token(line)])
            .assert()
            .code(3);
    }
    // The single-resource output is unchanged: the handle alone.
    let output = s.cmd().args(["claim", "--lock", "c"]).output().unwrap();
    handle_of(&output);
}

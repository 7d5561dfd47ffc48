//! Slots (issue 14): `--slots N` on a lock admits at most N holders, each slot its
//! own fenced tenure; the result says which slot.

#[cfg(unix)]
use std::process::Stdio;

use crate::util::{Scratch, json_of, one_line_stderr};

/// `claim --lock pool --slots N`: `SLOT HANDLE`.
fn claim_slot(s: &Scratch, slots: &str, owner: &str) -> (u32, String) {
    let output = s
        .cmd()
        .args([
            "claim", "--lock", "pool", "--slots", slots, "--owner", owner,
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let (slot, handle) = stdout.trim().split_once(' ').expect("SLOT HANDLE");
    (slot.parse().unwrap(), handle.to_string())
}

fn token(handle: &str) -> String {
    handle.split_once('.').unwrap().0.to_string()
}

#[test]
fn at_most_n_holders_each_slot_its_own_lease() {
    let s = Scratch::new();
    let (one, h1) = claim_slot(&s, "2", "a");
    let (two, h2) = claim_slot(&s, "2", "b");
    assert_eq!((one, two), (1, 2));
    let output = s
        .cmd()
        .args(["claim", "--lock", "pool", "--slots", "2", "--owner", "c"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stderr = one_line_stderr(&output);
    assert!(stderr.contains("all 2 slots of pool"), "{stderr}");
    assert!(
        stderr.contains("held by a") || stderr.contains("held by b"),
        "{stderr}"
    );
    // Each slot is checked, renewed and released as its own resource.
    s.cmd()
        .args(["check", "--lock", "pool", "--slot", "2", &token(&h2)])
        .assert()
        .code(0);
    s.cmd()
        .args(["check", "--lock", "pool", "--slot", "1", &token(&h2)])
        .assert()
        .code(if token(&h1) == token(&h2) { 0 } else { 3 });
    s.cmd()
        .args(["renew", "--lock", "pool", "--slot", "1", &h1])
        .assert()
        .code(0);
    s.cmd()
        .args(["release", "--lock", "pool", "--slot", "1", &h1])
        .assert()
        .code(0);
    let json = s
        .cmd()
        .args(["claim", "--lock", "pool", "--slots", "2", "--json"])
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(0), "{json:?}");
    let json = json_of(&json);
    assert_eq!(json["slot"], 1, "the freed slot");
    assert_eq!(json["resource"], "slot:pool#1");
    assert!(json["token"].as_u64().unwrap() > token(&h1).parse().unwrap());
    let status = s.status();
    assert!(
        status
            .iter()
            .any(|e| e["resource"] == "slot:pool#2" && e["state"] == "held"),
        "{status:?}"
    );
}

/// When every slot is held, the refusal (`claim` and `run`) names the slot in the way,
/// and the `break` it tells the human to run is one that works: `--lock L --slot N`,
/// not the plain lock (which nobody holds: "nothing to break").
#[test]
fn all_slots_held_names_a_slot_a_human_can_break() {
    let s = Scratch::new();
    claim_slot(&s, "2", "a");
    claim_slot(&s, "2", "b");
    let claim = s
        .cmd()
        .args(["claim", "--lock", "pool", "--slots", "2", "--owner", "c"])
        .output()
        .unwrap();
    let run = s
        .cmd()
        .args(["run", "--lock", "pool", "--slots", "2", "--", "true"])
        .output()
        .unwrap();
    for output in [claim, run] {
        assert_eq!(output.status.code(), Some(3), "{output:?}");
        let stderr = one_line_stderr(&output);
        assert!(stderr.contains("all 2 slots of pool are held"), "{stderr}");
        assert!(stderr.contains("pool#1 is held by a"), "{stderr}");
        assert!(
            stderr.contains("`fencepost break --lock pool --slot 1 --reason '…'`"),
            "{stderr}"
        );
    }
    s.cmd()
        .args([
            "break", "--lock", "pool", "--slot", "1", "--reason", "wedged",
        ])
        .assert()
        .code(0);
}

#[test]
fn bad_slot_input_is_one_clear_line() {
    let s = Scratch::new();
    for (args, says) in [
        (&["claim", "--lock", "p", "--slots", "0"][..], "from 1"),
        (&["claim", "--lock", "p", "--slots", "x"][..], "from 1"),
        (
            &["claim", "--file", "f", "--slots", "2"][..],
            "--slots applies only to a --lock",
        ),
        // `run` ran its command without a slot before (a new user).
        (
            &["run", "--dir", ".", "--slots", "3", "--", "true"][..],
            "--slots applies only to a --lock",
        ),
        (
            &["run", "--file", "f", "--slots", "3", "--", "true"][..],
            "drop --slots",
        ),
        // What `claim --slots` printed, passed whole as the handle.
        (
            &[
                "release",
                "--lock",
                "p",
                "--slot",
                "1",
                "1 7.00112233445566778899aabbccddeeff",
            ][..],
            "pass them apart: --slot 1 7.00112233445566778899aabbccddeeff",
        ),
        (
            &["claim", "--lock", "p", "--lock", "q", "--slots", "2"][..],
            "--slots applies to one --lock",
        ),
        (
            &["check", "--file", "f", "--slot", "1", "3"][..],
            "cannot be used with",
        ),
    ] {
        let output = s.cmd().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        let stderr = one_line_stderr(&output);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// `--slot` is an option of `--lock`, not a fourth kind of resource: the usage
/// line of every command taking one resource offers `--lock`, `--file` or `--dir`,
/// and lists `--slot` with the options.
#[test]
fn usage_offers_slot_as_an_option_of_lock() {
    let s = Scratch::new();
    for command in ["run", "check", "renew", "release", "break"] {
        let output = s.cmd().args([command, "--help"]).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{command}: {output:?}");
        let help = String::from_utf8_lossy(&output.stdout);
        let usage = help
            .lines()
            .find(|line| line.starts_with("Usage:"))
            .unwrap_or_else(|| panic!("{command} --help has a usage line: {help}"));
        // `break` also takes a session instead of one resource.
        let kinds = if command == "break" {
            "<--lock <NAME>|--file <PATH>|--dir <PATH>|--session <TAG|ID>>"
        } else {
            "<--lock <NAME>|--file <PATH>|--dir <PATH>>"
        };
        assert!(usage.contains(kinds), "{command}: {usage}");
        assert!(!usage.contains("--slot"), "{command}: {usage}");
        assert!(help.contains("--slot <N>"), "{command}: {help}");
    }
}

/// The issue's test through real processes: 12 `fencepost run --slots 4` processes
/// at once, each a few times; never two in one slot (an exclusive `mkdir` marker per
/// slot, so never more than 4 inside), slots 1 to 4 only, and tokens per slot
/// strictly increase in the log.
#[cfg(unix)]
#[test]
fn twelve_processes_on_four_slots() {
    let s = Scratch::new();
    let script = r#"
        i=0
        while [ $i -lt 3 ]; do
            "$FP" --store "$STORE" run --lock pool --slots 4 --wait 60000 -- sh -c '
                if mkdir "$DIR/slot-$FENCEPOST_SLOT" 2>/dev/null; then
                    echo "$FENCEPOST_SLOT $FENCEPOST_TOKEN" >> "$DIR/log"
                    sleep 0.05
                    rmdir "$DIR/slot-$FENCEPOST_SLOT"
                else
                    echo "OVERLAP $FENCEPOST_SLOT" >> "$DIR/log"
                fi' || exit 1
            i=$((i + 1))
        done
    "#;
    let children: Vec<_> = (0..12)
        .map(|_| {
            let mut cmd = crate::util::scrubbed(std::process::Command::new("sh"));
            cmd.args(["-c", script])
                .current_dir(s.path())
                .env("FP", crate::util::bin())
                .env_remove("FENCEPOST_SESSION")
                .env_remove("FENCEPOST_STORE")
                .env("STORE", s.store())
                .env("DIR", s.path())
                .stdout(Stdio::null());
            crate::util::Background(cmd.spawn().unwrap())
        })
        .collect();
    for mut child in children {
        assert!(child.0.wait().unwrap().success(), "a loop failed");
    }
    let log = std::fs::read_to_string(s.path().join("log")).unwrap();
    assert!(!log.contains("OVERLAP"), "two holders in one slot: {log}");
    let mut last = std::collections::HashMap::new();
    let mut lines = 0;
    for line in log.lines() {
        lines += 1;
        let (slot, token) = line.split_once(' ').unwrap();
        let (slot, token): (u32, u64) = (slot.parse().unwrap(), token.parse().unwrap());
        assert!((1..=4).contains(&slot), "slot {slot} of 4");
        let previous = last.insert(slot, token).unwrap_or(0);
        assert!(
            token > previous,
            "slot {slot}: token {token} after {previous}"
        );
    }
    assert_eq!(lines, 36, "{log}");
}

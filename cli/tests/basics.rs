//! claim, check, renew, release and status: outputs and exit codes (docs/protocol.md §7).

use std::time::Duration;

use predicates::prelude::*;

use crate::util::{Scratch, json_of, one_line_stderr, token_of};

#[test]
fn claim_prints_the_token_alone_and_exits_0() {
    let s = Scratch::new();
    let output = s
        .cmd()
        .args(["claim", "--lock", "db:migrations"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(token_of(&output), 1, "the handle starts with the token");
    assert!(output.stderr.is_empty(), "{output:?}");
}

#[test]
fn claim_json_describes_the_lease() {
    let s = Scratch::new();
    let output = s
        .cmd()
        .args([
            "claim",
            "--lock",
            "DB:Migrations",
            "--ttl",
            "5000",
            "--json",
        ])
        .args(["--owner", "alice"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let lease = json_of(&output);
    assert_eq!(lease["ok"], true);
    assert_eq!(lease["token"], 1);
    let secret = lease["secret"].as_str().unwrap();
    assert_eq!(secret.len(), 32);
    assert_eq!(lease["handle"], format!("1.{secret}"));
    assert_eq!(lease["generation"], 1);
    assert_eq!(lease["label"], "DB:Migrations");
    assert_eq!(lease["resource"], "lock:DB:Migrations");
    assert_eq!(lease["owner"], "alice");
    assert_eq!(lease["ttl_ms"], 5000);
    assert_eq!(lease["store"], s.store().to_str().unwrap());
    assert!(lease["key"].as_str().unwrap().starts_with("lock-"));
    assert!(lease["holder"].as_str().unwrap().starts_with("alice-"));
    let granted = lease["granted_at_ms"].as_u64().unwrap();
    assert_eq!(lease["expires_at_ms"].as_u64().unwrap(), granted + 5000);
}

#[test]
fn second_claim_exits_3_and_names_the_holder() {
    let s = Scratch::new();
    s.claim("db:migrations", &["--owner", "alice"]);
    let output = s
        .cmd()
        .args(["claim", "--lock", "db:migrations", "--owner", "bob"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(output.stdout.is_empty(), "{output:?}");
    let stderr = one_line_stderr(&output);
    let expected = predicate::str::is_match(
        r"^fencepost: db:migrations is held by alice \(pid \d+, token 1\) until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(in \d+\.\ds\); pass --wait MS to wait for it, work on something else meanwhile, or, if its holder is gone or stuck, ask a human to run `fencepost break --lock db:migrations --reason '…'` \(store [^)]+\)\n",
    )
    .unwrap();
    assert!(expected.eval(&stderr), "{stderr}");
}

#[test]
fn held_claim_with_json_describes_the_holder_on_stdout() {
    let s = Scratch::new();
    s.claim("x", &["--owner", "alice"]);
    let output = s
        .cmd()
        .args(["claim", "--lock", "x", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let verdict = json_of(&output);
    assert_eq!(verdict["ok"], false);
    assert_eq!(verdict["reason"], "held");
    assert_eq!(verdict["holder"]["owner"], "alice");
    assert_eq!(verdict["holder"]["token"], 1);
    assert!(verdict["holder"]["expires_at_ms"].as_u64().unwrap() > 0);
    one_line_stderr(&output);
}

#[test]
fn owner_comes_from_fencepost_owner_unless_given() {
    let s = Scratch::new();
    s.cmd()
        .env("FENCEPOST_OWNER", "carol")
        .args(["claim", "--lock", "a"])
        .assert()
        .code(0);
    s.cmd()
        .env("FENCEPOST_OWNER", "carol")
        .args(["claim", "--lock", "b", "--owner", "dave"])
        .assert()
        .code(0);
    s.cmd().args(["claim", "--lock", "c"]).assert().code(0);
    assert_eq!(s.entry("a").unwrap()["owner"], "carol");
    assert_eq!(s.entry("b").unwrap()["owner"], "dave");
    assert_eq!(s.entry("c").unwrap()["owner"], "cli", "the default owner");
}

#[test]
fn check_passes_only_the_current_live_token() {
    let s = Scratch::new();
    let (first, first_handle) = s.claim_handle("x", &[]);
    s.cmd()
        .args(["release", "--lock", "x", &first_handle])
        .assert()
        .code(0);
    let (token, handle) = s.claim_handle("x", &[]);
    assert!(token > first + 1, "the tombstone took a generation");
    // The whole handle is accepted too; only its number is used.
    s.cmd()
        .args(["check", "--lock", "x", &handle])
        .assert()
        .code(0);
    s.cmd()
        .args(["check", "--lock", "x", &token.to_string()])
        .assert()
        .code(0)
        .stdout("")
        .stderr("");
    for stale in [token - 1, first] {
        let output = s
            .cmd()
            .args(["check", "--lock", "x", &stale.to_string()])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3), "token {stale} passed");
        assert!(one_line_stderr(&output).contains("is not current for x"));
    }
    // A token never granted does not pass either.
    s.cmd()
        .args(["check", "--lock", "x", &(token + 1).to_string()])
        .assert()
        .code(3);
    // Nor does any token of a lock never claimed.
    s.cmd().args(["check", "--lock", "y", "1"]).assert().code(3);
}

#[test]
fn check_json_says_whether_the_token_passes() {
    let s = Scratch::new();
    let token = s.claim("x", &[]);
    let pass = s
        .cmd()
        .args(["check", "--lock", "x", &token.to_string(), "--json"])
        .output()
        .unwrap();
    assert_eq!(pass.status.code(), Some(0));
    assert_eq!(json_of(&pass)["ok"], true);
    let fail = s
        .cmd()
        .args(["check", "--lock", "x", &(token + 1).to_string(), "--json"])
        .output()
        .unwrap();
    assert_eq!(fail.status.code(), Some(3));
    assert_eq!(json_of(&fail)["ok"], false);
}

#[test]
fn check_of_a_released_token_exits_3() {
    let s = Scratch::new();
    let (token, handle) = s.claim_handle("x", &[]);
    let token = token.to_string();
    s.cmd()
        .args(["check", "--lock", "x", &token])
        .assert()
        .code(0);
    s.cmd()
        .args(["release", "--lock", "x", &handle])
        .assert()
        .code(0);
    s.cmd()
        .args(["check", "--lock", "x", &token])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("released"));
    // Token 0 was never granted: tokens start at 1 (it was "superseded by token
    // 3", a new user).
    s.cmd()
        .args(["check", "--lock", "x", "0"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("tokens start at 1"));
}

/// A lease on lock `name` (owner `library`) that ends `expires_in_ms` from now
/// (negative: ended that long ago), written through the library by a clock a minute
/// behind with a ttl of a minute more: its own claim is confirmed with a minute to
/// spare however loaded the machine is, where a `claim --ttl 150` may take longer
/// than its ttl to confirm and lapse. Returns the token and the handle.
pub(crate) fn lease_ending_in(s: &Scratch, name: &str, expires_in_ms: i64) -> (u64, String) {
    let behind = fencepost::SteppedClock::new();
    behind.step_ms(-60_000);
    let store =
        fencepost::Store::with_clock(fencepost_fs::FsStore::open(s.store()).unwrap(), behind);
    let ttl = u64::try_from(60_000 + expires_in_ms).expect("ended less than a minute ago");
    let lease = store
        .acquire(
            &fencepost::Resource::lock(name),
            &fencepost::AcquireOptions::new(ttl).owner("library"),
        )
        .unwrap();
    (lease.token(), lease.handle().to_string())
}

/// `check` with a whole handle judges its secret too: the handle of another
/// resource's tenure with the same token does not pass, and says why; the bare
/// token and the right handle do.
#[test]
fn check_of_a_handle_of_another_tenure_with_the_same_token_exits_3() {
    let s = Scratch::new();
    let (token, _) = lease_ending_in(&s, "a", 30_000);
    let (other, other_handle) = lease_ending_in(&s, "b", 30_000);
    assert_eq!(token, other, "both first claims");
    let output = s
        .cmd()
        .args(["check", "--lock", "a", &other_handle])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert!(
        one_line_stderr(&output).contains("this handle's secret is not its tenure's"),
        "{output:?}"
    );
    for (lock, checked) in [("a", token.to_string()), ("b", other_handle)] {
        s.cmd()
            .args(["check", "--lock", lock, &checked])
            .assert()
            .code(0);
    }
}

#[test]
fn check_of_an_expired_token_exits_3() {
    let s = Scratch::new();
    let token = lease_ending_in(&s, "x", -1_000).0.to_string();
    s.cmd()
        .args(["check", "--lock", "x", &token])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("expired"));
}

#[test]
fn renew_keeps_the_token_and_moves_the_expiry() {
    let s = Scratch::new();
    let claimed = s
        .cmd()
        .args(["claim", "--lock", "x", "--ttl", "60000", "--json"])
        .output()
        .unwrap();
    let claimed = json_of(&claimed);
    let token = claimed["token"].as_u64().unwrap();
    let handle = claimed["handle"].as_str().unwrap();
    // A minute of ttl: the renewal comes well before the lease ends, however loaded
    // the machine; the renewed expiry still moves by at least the difference.
    let renewed = s
        .cmd()
        .args(["renew", "--lock", "x", handle, "--ttl", "120000"])
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(renewed.status.code(), Some(0), "{renewed:?}");
    let renewed = json_of(&renewed);
    assert_eq!(
        renewed["token"], token,
        "docs/protocol.md I5: renewal keeps the token"
    );
    assert!(renewed["generation"].as_u64() > claimed["generation"].as_u64());
    assert_eq!(renewed["ttl_ms"], 120000);
    assert!(
        renewed["expires_at_ms"].as_u64().unwrap()
            >= claimed["expires_at_ms"].as_u64().unwrap() + 60_000
    );
    // Without --json: the same handle alone; and the token still passes.
    let plain = s
        .cmd()
        .args(["renew", "--lock", "x", handle])
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(0));
    assert_eq!(crate::util::handle_of(&plain), handle);
    s.cmd()
        .args(["check", "--lock", "x", &token.to_string()])
        .assert()
        .code(0);
}

/// A refusal names a lock as `status` shows it, not with the blanks it was typed
/// with (a new user: `fencepost:   C1   is held`).
#[test]
fn a_refusal_names_a_lock_as_status_shows_it() {
    let s = Scratch::new();
    s.claim_handle("C1", &["--ttl", "60000"]);
    let output = s
        .cmd()
        .args(["claim", "--lock", "  C1  "])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert!(
        one_line_stderr(&output).starts_with("fencepost: C1 is held by"),
        "{output:?}"
    );
}

/// A release of a lease that expired, which nobody took meanwhile, ends it (exit
/// 0), and says that it had expired and since when: what its holder wrote after
/// that was not protected (a new user: an exit 0 alone said nothing of it). A
/// release of a live lease says nothing.
#[test]
fn release_of_an_expired_lease_says_it_had_expired() {
    let s = Scratch::new();
    let expired = lease_ending_in(&s, "x", -1_000).1;
    let output = s
        .cmd()
        .args(["release", "--lock", "x", &expired])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let said = one_line_stderr(&output);
    assert!(
        said.contains("had expired at") && said.contains("not protected"),
        "{said}"
    );
    let live = lease_ending_in(&s, "y", 30_000).1;
    let output = s
        .cmd()
        .args(["release", "--lock", "y", &live])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(output.stderr.is_empty(), "{output:?}");
}

#[test]
fn renew_of_a_stale_released_or_expired_token_exits_3() {
    let s = Scratch::new();
    // Expired: never revived (docs/protocol.md §3.2).
    let expired = lease_ending_in(&s, "x", -1_000).1;
    let output = s
        .cmd()
        .args(["renew", "--lock", "x", &expired])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(one_line_stderr(&output).contains("expired"));
    // Superseded by a new tenure.
    let current = s.claim_handle("x", &["--owner", "alice"]).1;
    let output = s
        .cmd()
        .args(["renew", "--lock", "x", &expired, "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let verdict = json_of(&output);
    assert_eq!(verdict["ok"], false);
    assert_eq!(verdict["reason"], "not_holder");
    assert!(one_line_stderr(&output).contains("alice"));
    // Released.
    s.cmd()
        .args(["release", "--lock", "x", &current])
        .assert()
        .code(0);
    s.cmd()
        .args(["renew", "--lock", "x", &current])
        .assert()
        .code(3)
        .stdout("");
}

#[test]
fn release_twice_exits_3_the_second_time() {
    let s = Scratch::new();
    let token = s.claim_handle("x", &[]).1;
    s.cmd()
        .args(["release", "--lock", "x", &token])
        .assert()
        .code(0)
        .stdout("")
        .stderr("");
    let output = s
        .cmd()
        .args(["release", "--lock", "x", &token, "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(json_of(&output)["reason"], "released");
    assert!(one_line_stderr(&output).contains("its lease was released by its holder"));
}

#[test]
fn release_by_a_token_that_does_not_hold_exits_3_and_keeps_the_holder() {
    let s = Scratch::new();
    let token = s.claim("x", &["--owner", "alice"]);
    let output = s
        .cmd()
        .args(["release", "--lock", "x", &(token + 1).to_string()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(one_line_stderr(&output).contains("held by alice"));
    s.cmd()
        .args(["check", "--lock", "x", &token.to_string()])
        .assert()
        .code(0);
}

#[test]
fn a_claim_after_release_gets_a_larger_token() {
    let s = Scratch::new();
    let mut previous = 0;
    for _ in 0..3 {
        let (token, handle) = s.claim_handle("x", &[]);
        assert!(token > previous, "token {token} after {previous}");
        s.cmd()
            .args(["release", "--lock", "x", &handle])
            .assert()
            .code(0);
        previous = token;
    }
}

#[test]
fn claim_with_wait_takes_over_when_the_holder_expires() {
    let s = Scratch::new();
    // Held for another second: the waiter starts while it is live (or, on a machine
    // slow enough, just after; either way it must end up with a newer token).
    let first = lease_ending_in(&s, "x", 1_000).0;
    let output = s
        .cmd()
        .args(["claim", "--lock", "x", "--wait", "10000"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(token_of(&output) > first);
}

#[test]
fn files_are_resources_apart_from_locks() {
    let s = Scratch::new();
    std::fs::create_dir(s.path().join("sub")).unwrap();
    s.cmd().args(["claim", "--file", "a.txt"]).assert().code(0);
    // Another spelling of the same file contends (docs/protocol.md §6)...
    s.cmd()
        .args(["claim", "--file", "sub/../a.txt"])
        .assert()
        .code(3);
    // ...a lock of the same name does not.
    s.cmd().args(["claim", "--lock", "a.txt"]).assert().code(0);
    let file = s.path().join("a.txt");
    let entry = s.entry(file.to_str().unwrap()).expect("file entry by path");
    assert!(entry["key"].as_str().unwrap().starts_with("file-"));
}

#[test]
fn status_lists_every_resource() {
    let s = Scratch::new();
    s.cmd()
        .args(["status"])
        .assert()
        .code(0)
        .stdout(predicate::str::starts_with("no claims in "));
    assert!(s.status().is_empty());

    s.claim("held-one", &["--owner", "alice"]);
    let gone = s.claim_handle("gone", &[]).1;
    s.cmd()
        .args(["release", "--lock", "gone", &gone])
        .assert()
        .code(0);
    // Long enough to be confirmed while live on a loaded machine (and under Wine).
    s.claim("brief", &["--ttl", "1000"]);
    std::thread::sleep(Duration::from_millis(1200));

    let table = s.cmd().arg("status").output().unwrap();
    assert_eq!(table.status.code(), Some(0));
    let table = String::from_utf8(table.stdout).unwrap();
    let line = |label: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("lock:{label} ")))
            .unwrap_or_else(|| panic!("no line for {label} in\n{table}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert!(table.starts_with("RESOURCE"), "{table}");
    let held = line("held-one");
    assert_eq!(held[1], "held");
    assert_eq!(held[3], "alice");
    // PID, HOST, then the expiry in words (issue 19: "in 29.9s", "expired 0.2s ago").
    assert_eq!(held[held.len() - 2], "in", "{table}");
    assert!(held[held.len() - 1].ends_with('s'), "{table}");
    assert_eq!(line("gone")[1], "released");
    let brief = line("brief");
    assert_eq!(brief[1], "expired");
    assert_eq!(brief[brief.len() - 1], "ago", "{table}");

    let entries = s.status();
    assert_eq!(entries.len(), 3);
    let held = s.entry("held-one").unwrap();
    assert_eq!(held["state"], "held");
    assert_eq!(held["live"], true);
    assert_eq!(held["owner"], "alice");
    assert_eq!(s.entry("gone").unwrap()["state"], "released");
    assert_eq!(s.entry("brief").unwrap()["state"], "expired");
}

/// `fencepost status | head -0`: a reader that went away is not an error
/// (ripgrep's rule: a broken pipe ends the program quietly).
#[cfg(unix)]
#[test]
fn a_closed_stdout_is_not_an_error() {
    let s = Scratch::new();
    s.claim("x", &[]);
    let script = r#"(sleep 0.3; "$FP" --store "$STORE" status --json; echo "rc=$?" >&2) | true"#;
    let output = crate::util::scrubbed(std::process::Command::new("sh"))
        .args(["-c", script])
        .env("FP", crate::util::bin())
        .env("STORE", s.store())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stderr), "rc=0\n");
}

#[test]
fn status_survives_a_label_longer_than_any_format_width() {
    // Breaker trial: a 65,536-character lock name made `status` panic for everyone.
    // The record is written through the library, not `claim --lock <name>`: Windows'
    // CreateProcessW refuses a command line over 32,767 characters (issue 18).
    let s = Scratch::new();
    let long = "a".repeat(70_000);
    crate::util::claim_through_the_library(&s, &long);
    let out = s.cmd().arg("status").output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The table elides it in the middle (issue 19); --json has it whole.
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(table.contains("lock:aaa") && table.contains('…'), "{table}");
    assert!(s.entry(&long).is_some());
}

#[test]
fn owners_written_by_others_are_printed_with_control_characters_escaped() {
    // A record written by another tool (the library takes any owner) must not drive
    // the reader's terminal.
    let s = Scratch::new();
    s.claim("x", &[]);
    let key_dir = s.only_key_dir();
    let record = key_dir.join("g00000001.json");
    let text = std::fs::read_to_string(&record).unwrap();
    let tampered = text.replace("\"owner\":\"cli\"", "\"owner\":\"evil\\u001b[31m\"");
    assert_ne!(text, tampered, "the record layout changed: {text}");
    std::fs::remove_file(&record).unwrap();
    std::fs::write(&record, tampered).unwrap();
    let out = s.cmd().args(["claim", "--lock", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains('\u{1b}'), "raw escape printed: {stderr:?}");
    assert!(stderr.contains("evil\\u{1b}[31m"), "{stderr}");
    let table = s.cmd().arg("status").output().unwrap();
    assert!(!String::from_utf8_lossy(&table.stdout).contains('\u{1b}'));
}

/// The files of the store's one key directory (`claims/<key>/`), counted from
/// outside the processes that wrote them.
fn records_on_disk(s: &Scratch) -> usize {
    let claims = s.store().join("claims");
    let mut dirs = std::fs::read_dir(&claims)
        .unwrap()
        .map(|e| e.unwrap().path());
    let dir = dirs.next().expect("a key directory");
    assert!(dirs.next().is_none(), "one key only");
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with('g') && name.ends_with(".json")
        })
        .count()
}

/// The fs backend sweeps on a removal thread (docs/design-07-performance.md): a
/// short-lived `claim`, `release` or `run` process must still make its sweep's
/// removals before it exits (the store handle is dropped, which drains them), so a
/// series used only through the CLI stays bounded: after every claim it holds the
/// claim alone, after every release the claim and its tombstone.
#[test]
fn a_series_used_through_short_lived_processes_stays_bounded() {
    let s = Scratch::new();
    for round in 0..6 {
        let output = s
            .cmd()
            .args(["claim", "--lock", "tidy", "--ttl", "60000"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let handle = String::from_utf8(output.stdout).unwrap();
        assert_eq!(records_on_disk(&s), 1, "after claim {round}");
        s.cmd()
            .args(["release", "--lock", "tidy", handle.trim()])
            .assert()
            .success();
        assert_eq!(records_on_disk(&s), 2, "after release {round}");
    }
    for round in 0..3 {
        s.cmd()
            .args(["run", "--lock", "tidy", "--"])
            .arg(crate::util::child_bin())
            .arg("exit=0")
            .assert()
            .success();
        assert_eq!(records_on_disk(&s), 2, "after run {round}");
    }
}

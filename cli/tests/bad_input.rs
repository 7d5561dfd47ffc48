//! Bad input is exit 1 with one line on stderr naming the problem (docs/protocol.md §7); never
//! exit 3, never clap's default 2. `--help` and `--version` are exit 0.

use predicates::prelude::*;

use crate::util::{Scratch, one_line_stderr};

/// Runs `args` and asserts exit 1, nothing on stdout, and one stderr line that
/// contains `says`.
fn rejects(s: &Scratch, args: &[&str], says: &str) {
    let output = s.cmd().args(args).output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "{args:?} should exit 1: {output:?}"
    );
    assert!(output.stdout.is_empty(), "{args:?} printed on stdout");
    let stderr = one_line_stderr(&output);
    assert!(stderr.contains(says), "{args:?}: {stderr:?} lacks {says:?}");
}

#[test]
fn a_resource_is_required() {
    let s = Scratch::new();
    rejects(&s, &["claim"], "--lock");
    rejects(&s, &["check", "1"], "--lock");
    rejects(&s, &["renew", "1"], "--lock");
    rejects(&s, &["release", "1"], "--lock");
    rejects(&s, &["run", "--", "true"], "--lock");
}

/// One resource per command, except `claim`, which takes several at once (issue 14,
/// `cli/tests/several.rs`).
#[test]
fn lock_and_file_exclude_each_other() {
    let s = Scratch::new();
    rejects(
        &s,
        &["run", "--lock", "a", "--file", "b", "--", "true"],
        "cannot be used with",
    );
    rejects(
        &s,
        &["check", "--file", "b", "--lock", "a", "1"],
        "cannot be used with",
    );
}

#[test]
fn tokens_are_whole_numbers() {
    let s = Scratch::new();
    for bad in ["abc", "-1", "1.5", "", "18446744073709551616"] {
        rejects(&s, &["check", "--lock", "x", bad], "token");
        for command in ["renew", "release"] {
            rejects(&s, &[command, "--lock", "x", bad], "handle");
        }
    }
    rejects(&s, &["check", "--lock", "x"], "TOKEN");
}

#[test]
fn token_zero_is_never_current_not_bad_input() {
    // Acceptance of issue 2: `check N-1` after the first claim (N = 1) exits 3.
    let s = Scratch::new();
    let token = s.claim("x", &[]);
    assert_eq!(token, 1);
    for command in ["check", "renew", "release"] {
        let out = s
            .cmd()
            .args([command, "--lock", "x", "0"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{command} 0: {out:?}");
    }
}

#[test]
fn ttls_are_positive_whole_milliseconds() {
    let s = Scratch::new();
    // The last two: longer than 30 days (2,592,000,000 ms), and 2^64 - 1, which
    // was accepted ("until 584556019-04-03").
    for bad in [
        "0",
        "-5",
        "abc",
        "1e3",
        "2592000001",
        "18446744073709551615",
    ] {
        rejects(&s, &["claim", "--lock", "x", "--ttl", bad], "ttl");
        rejects(&s, &["renew", "--lock", "x", "1", "--ttl", bad], "ttl");
        rejects(
            &s,
            &["run", "--lock", "x", "--ttl", bad, "--", "true"],
            "ttl",
        );
    }
    // Far past 2^64 - 1 ms is "too long", not "not a number" (a new user).
    rejects(
        &s,
        &["claim", "--lock", "x", "--ttl", "99999999999999999999"],
        "at most 30 days",
    );
    rejects(&s, &["claim", "--lock", "x", "--wait", "-1"], "wait");
    // Nothing was claimed by any of these.
    assert!(s.status().is_empty());
    // 30 days exactly is accepted.
    s.claim("x", &["--ttl", "2592000000"]);
}

#[test]
fn a_subtree_claim_of_a_file_says_what_to_claim_instead() {
    let s = Scratch::new();
    std::fs::write(s.path().join("schema.sql"), "").unwrap();
    rejects(
        &s,
        &["claim", "--dir", "schema.sql"],
        "claim the file itself (--file), or its directory",
    );
}

#[test]
fn an_empty_lock_name_is_rejected() {
    let s = Scratch::new();
    rejects(&s, &["claim", "--lock", ""], "lock name is empty");
    rejects(&s, &["claim", "--lock", "   "], "lock name is empty");
    rejects(&s, &["check", "--lock", "", "1"], "lock name is empty");
    rejects(
        &s,
        &["run", "--lock", "", "--", "true"],
        "lock name is empty",
    );
    rejects(&s, &["claim", "--file", ""], "--file");
}

#[test]
fn an_empty_owner_is_rejected() {
    let s = Scratch::new();
    rejects(&s, &["claim", "--lock", "x", "--owner", ""], "owner");
}

/// Every record of a tenure carries its owner, and every other claimant's "held by"
/// prints it: a 100 KB owner was accepted. Over 256 characters is refused, nothing
/// written; 256 works. (A lock name over its limit, 128 KiB, cannot even be passed
/// as one argument on Linux or Windows; the library and the MCP server refuse it:
/// `server/tests/polish.rs::an_overlong_lock_name_is_refused_with_its_length`.)
#[test]
fn owners_have_a_length_limit() {
    let s = Scratch::new();
    let owner = "o".repeat(fencepost::OWNER_MAX_CHARS + 1);
    rejects(
        &s,
        &["claim", "--lock", "x", "--owner", &owner],
        "257 characters long",
    );
    assert!(s.status().is_empty());
    let owner = "o".repeat(fencepost::OWNER_MAX_CHARS);
    s.claim("x", &["--owner", &owner]);
}

#[test]
fn run_needs_a_command() {
    let s = Scratch::new();
    rejects(&s, &["run", "--lock", "x"], "COMMAND");
    rejects(&s, &["run", "--lock", "x", "--"], "COMMAND");
}

#[test]
fn unknown_commands_and_flags_are_usage_errors() {
    let s = Scratch::new();
    rejects(&s, &["frobnicate"], "frobnicate");
    rejects(&s, &["claim", "--lock", "x", "--bogus"], "--bogus");
    rejects(&s, &[], "no command given");
    let output = s.bare_cmd(s.path()).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(one_line_stderr(&output).contains("no command given"));
    // A command with subcommands, named alone, is told its own (a new user's find:
    // `fencepost hooks` listed the top level's), and a bad value below it points at
    // the help that documents it.
    rejects(
        &s,
        &["hooks"],
        "use one of install, uninstall, status; see 'fencepost hooks --help'",
    );
    rejects(
        &s,
        &["hooks", "install", "--agent", "codex"],
        "see 'fencepost hooks install --help'",
    );
}

/// docs/protocol.md §5: an unusable store is an I/O error, exit 1, never "held".
#[test]
fn a_store_under_a_regular_file_is_an_error() {
    let s = Scratch::new();
    let file = s.path().join("plain-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let store = file.join("store");
    for args in [
        &["claim", "--lock", "x"][..],
        &["check", "--lock", "x", "1"],
        &["release", "--lock", "x", "1"],
        &["status"],
        &["run", "--lock", "x", "--", "true"],
    ] {
        let output = s
            .bare_cmd(s.path())
            .arg("--store")
            .arg(&store)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        let stderr = one_line_stderr(&output);
        assert!(stderr.contains("plain-file"), "{stderr}");
        assert!(stderr.contains("--store"), "says what to do: {stderr}");
    }
    // The same through the environment variable.
    s.bare_cmd(s.path())
        .env("FENCEPOST_STORE", &file)
        .args(["claim", "--lock", "x"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("not a directory"));
}

#[test]
fn help_and_version_exit_0() {
    let s = Scratch::new();
    s.cmd()
        .arg("--help")
        .assert()
        .code(0)
        .stdout(predicate::str::contains("Exit codes:"))
        .stdout(predicate::str::contains("3  refused"))
        .stderr("");
    for command in ["claim", "check", "renew", "release", "run", "status"] {
        s.cmd()
            .args([command, "--help"])
            .assert()
            .code(0)
            .stdout(predicate::str::contains("Exit codes:"));
    }
    s.cmd()
        .args(["help", "run"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("FENCEPOST_TOKEN"));
    s.cmd()
        .arg("--version")
        .assert()
        .code(0)
        .stdout(format!("fencepost {}\n", env!("CARGO_PKG_VERSION")));
    s.cmd()
        .args(["claim", "--version"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn owners_with_control_characters_are_rejected() {
    // Breaker trial: an owner with ANSI escapes reached other agents' terminals raw.
    let s = Scratch::new();
    rejects(
        &s,
        &["claim", "--lock", "x", "--owner", "evil\u{1b}[31m"],
        "control characters",
    );
}

/// A series planted by hand at the largest generation: no later claim can be
/// numbered (wrapping would restart the tokens). The refusal says why and what to
/// do instead, and no longer adds the store remedy "check that the store is a
/// writable directory", which nothing about the store called for.
#[test]
fn a_series_at_the_largest_generation_says_to_use_another_name() {
    let s = Scratch::new();
    s.cmd()
        .args(["claim", "--lock", "top", "--ttl", "300"])
        .assert()
        .success();
    let dir = s.only_key_dir();
    let first = dir.join("g00000001.json");
    let record = std::fs::read_to_string(&first).unwrap();
    let planted = record
        .replace("\"token\":1,", &format!("\"token\":{},", u64::MAX))
        .replace(
            "\"generation\":1,",
            &format!("\"generation\":{},", u64::MAX),
        );
    std::fs::write(dir.join(format!("g{}.json", u64::MAX)), planted).unwrap();
    std::fs::remove_file(first).unwrap();
    // Expired, so the claim goes on to number its own record.
    std::thread::sleep(std::time::Duration::from_millis(400));
    let output = s.cmd().args(["claim", "--lock", "top"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let line = one_line_stderr(&output);
    assert!(line.contains("use a resource of another name"), "{line}");
    assert!(!line.contains("writable directory"), "{line}");
}

/// The `break` a refusal suggests for a file whose name holds a line break names
/// that file when a human pastes it into bash (ANSI-C quoting, `$'n\nl'`); the
/// escaped form shown before (`'n\u{a}l'`) named another file (a breaker).
#[cfg(unix)]
#[test]
fn the_suggested_break_for_a_name_with_a_line_break_names_that_file() {
    // Also a C1 control (two bytes in UTF-8) and a name that looks like an option.
    for name in ["n\nl", "c1\u{85}x", "-x"] {
        suggested_break_names(name);
    }
}

fn suggested_break_names(name: &str) {
    let s = Scratch::new();
    std::fs::write(s.path().join(name), "x").unwrap();
    let file = format!("--file={name}");
    s.cmd().args(["claim", &file]).assert().success();
    let refused = s.cmd().args(["claim", &file]).output().unwrap();
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    let line = one_line_stderr(&refused);
    let suggested = line
        .split('`')
        .find(|part| part.starts_with("fencepost break"))
        .unwrap_or_else(|| panic!("no break suggested: {line}"))
        .replace('…', "stuck")
        .replacen("fencepost", "\"$FP\"", 1);
    let broke = std::process::Command::new("bash")
        .current_dir(s.path())
        .env("FP", env!("CARGO_BIN_EXE_fencepost"))
        .env("FENCEPOST_STORE", s.store())
        .args(["-c", &suggested])
        .output()
        .unwrap();
    assert_eq!(broke.status.code(), Some(0), "{suggested}: {broke:?}");
}

/// A renewal that lands below a record left unreadable past the create grace (a
/// create that never completed, here planted above a gap) is not trusted, and says
/// so: superseded by a record that cannot be read. It said "expired -56.4s ago",
/// the end of a lease that had not ended (a breaker).
#[test]
fn a_renewal_under_an_unreadable_record_says_so_without_a_negative_time() {
    let s = Scratch::new();
    let (_, handle) = s.claim_handle("gap", &["--ttl", "60000"]);
    std::fs::write(s.only_key_dir().join("g00000009.json"), "{\"v\":1,\"key").unwrap();
    let output = s
        .cmd()
        .args(["renew", &handle, "--lock", "gap"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let line = one_line_stderr(&output);
    assert!(
        line.contains("superseded by a newer record that cannot be read"),
        "{line}"
    );
    assert!(!line.contains(" -"), "a negative time: {line}");
}

/// A lease written by a newer fencepost (a record of a higher format version) is
/// honoured while live, and this version cannot break it: a claim it refuses says
/// so and never sends anyone to `fencepost break`, and `break` says why it cannot,
/// naming no raw key (a breaker: the claim said to break it, the break refused,
/// naming `lock-…`).
#[test]
fn a_newer_format_holder_is_not_sent_to_break() {
    let s = Scratch::new();
    let (_, handle) = s.claim_handle("v2", &["--ttl", "60000"]);
    s.cmd()
        .args(["release", &handle, "--lock", "v2"])
        .assert()
        .code(0);
    let dir = s.only_key_dir();
    let key = dir.file_name().unwrap().to_str().unwrap().to_string();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    std::fs::write(
        dir.join("g00000009.json"),
        format!(
            r#"{{"v":2,"key":"{key}","token":9,"generation":9,"granted_at_ms":{now},"expires_at_ms":{}}}"#,
            now + 600_000
        ),
    )
    .unwrap();
    let refused = s.cmd().args(["claim", "--lock", "v2"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    let line = one_line_stderr(&refused);
    assert!(
        line.contains("a writer of format v2")
            && line.contains("end it with the newer fencepost that wrote it (format v2"),
        "{line}"
    );
    assert!(!line.contains("run `fencepost break"), "{line}");
    let broke = s
        .cmd()
        .args(["break", "--lock", "v2", "--reason", "x"])
        .output()
        .unwrap();
    assert_eq!(broke.status.code(), Some(1), "{broke:?}");
    let line = one_line_stderr(&broke);
    assert!(
        line.contains("written by a newer fencepost (format v2), which this version cannot break"),
        "{line}"
    );
    assert!(!line.contains(&key), "names the raw key: {line}");
}

/// A long bad value is shown by its start and length, not whole (a breaker: a
/// 100 KB handle made a 100 KB error line).
#[test]
fn a_long_bad_value_is_shown_by_its_start() {
    let s = Scratch::new();
    // 10,000: within Windows' 32,767-character command line.
    let handle = "x".repeat(10_000);
    let output = s
        .cmd()
        .args(["release", "--lock", "a", &handle])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let line = one_line_stderr(&output);
    assert!(line.len() < 1000, "{} bytes", line.len());
    assert!(line.contains("… (10000 characters)"), "{line}");
    assert!(
        line.contains("a lease handle is <token>.<secret>"),
        "{line}"
    );
}

//! What a new user trips on (issue 19): lock-name folding, messages, conveniences.
//! Each test goes through the real binary and failed before its fix.

use crate::util::{Scratch, one_line_stderr};

/// Claims `first`, then tries `second`; the second claim's exit code (3 = one lock).
fn second_claim_exit(first: &str, second: &str) -> i32 {
    let s = Scratch::new();
    s.claim(first, &["--ttl", "60000"]);
    let output = s
        .cmd()
        .args(["claim", "--lock", second, "--ttl", "60000"])
        .output()
        .unwrap();
    output.status.code().expect("exited")
}

#[test]
fn lock_names_use_full_case_folding() {
    // docs/protocol.md §6: case-folded, not lowercased.
    assert_eq!(second_claim_exit("Straße", "STRASSE"), 3, "ß folds to ss");
    assert_eq!(second_claim_exit("σας", "ΣΑΣ"), 3, "final sigma folds to σ");
    assert_eq!(
        second_claim_exit("ﬁle", "FILE"),
        3,
        "the fi ligature folds to fi"
    );
    assert_eq!(second_claim_exit("db:migrations", "db:seeds"), 0);
}

#[test]
fn invisible_characters_do_not_split_a_lock() {
    // docs/protocol.md §6, merge bias: names that look the same are one lock.
    for invisible in [
        "db:\u{200B}migrations",
        "db:mig\u{200D}rations",
        "\u{202E}db:migrations",
        "db:migrations\u{FEFF}",
    ] {
        assert_eq!(
            second_claim_exit("db:migrations", invisible),
            3,
            "{invisible:?}"
        );
    }
}

#[test]
fn a_lock_name_of_only_invisible_characters_is_refused() {
    let s = Scratch::new();
    let output = s
        .cmd()
        .args(["claim", "--lock", "\u{200B}\u{200D}"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        one_line_stderr(&output).contains("no visible characters"),
        "{output:?}"
    );
}

#[test]
fn completions_generate_for_every_shell() {
    // issue 19: shell completions people expect, generated from the clap definition.
    let s = Scratch::new();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let output = s.cmd().args(["completions", shell]).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{shell}: {output:?}");
        let script = String::from_utf8(output.stdout).unwrap();
        for word in ["claim", "release", "status", "completions", "lock", "ttl"] {
            assert!(script.contains(word), "{shell} completions lack {word}");
        }
    }
    assert!(!s.store().exists(), "completions must not create a store");
    // The bash script is valid bash.
    let script = s.path().join("fencepost.bash");
    let output = s.cmd().args(["completions", "bash"]).output().unwrap();
    std::fs::write(&script, output.stdout).unwrap();
    let syntax = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output();
    if let Ok(syntax) = syntax {
        assert!(syntax.status.success(), "bash -n: {syntax:?}");
    }
    let bad = s.cmd().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(1));
    one_line_stderr(&bad);
}

/// Every page a manual page refers to (`fencepost\-claim(1)`, and below it
/// `fencepost\-hooks\-install(1)`) is one `fencepost man` prints: before, the main
/// page named pages nothing generated (a new user).
#[test]
fn every_manual_page_referred_to_exists() {
    let s = Scratch::new();
    let mut pending = vec![Vec::<String>::new()];
    let mut rendered = 0;
    while let Some(path) = pending.pop() {
        let output = s.cmd().arg("man").args(&path).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "man {path:?}: {output:?}");
        let page = String::from_utf8(output.stdout).unwrap();
        let own = std::iter::once("fencepost".to_string())
            .chain(path.iter().cloned())
            .collect::<Vec<_>>()
            .join("-");
        assert!(page.contains(&format!(".TH {own} 1")), "{own}: {page:.300}");
        rendered += 1;
        for line in page.lines() {
            let Some(name) = line.strip_suffix("(1)") else {
                continue;
            };
            let words: Vec<String> = name.split("\\-").map(str::to_string).collect();
            assert_eq!(words[0], "fencepost", "{line}");
            assert_eq!(words.len(), path.len() + 2, "{own} refers to {line}");
            pending.push(words[1..].to_vec());
        }
    }
    // The main page, its 12 commands, and the 3 below `hooks`.
    assert_eq!(rendered, 16);
    let bad = s.cmd().args(["man", "nope"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(one_line_stderr(&bad).contains("pages exist for: claim"));
}

#[test]
fn the_man_page_generates() {
    let s = Scratch::new();
    let output = s.cmd().arg("man").output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let page = String::from_utf8(output.stdout).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH fencepost"),
        "{page:.200}"
    );
    for word in [
        "claim",
        "check",
        "renew",
        "release",
        "run",
        "status",
        "Exit codes",
    ] {
        assert!(page.contains(word), "the man page lacks {word}");
    }
    assert!(!s.store().exists(), "man must not create a store");
}

#[test]
fn owner_is_offered_only_where_it_acts() {
    // issue 19: --owner was accepted by check, release and status, where it did nothing.
    let s = Scratch::new();
    let token = s.claim("x", &["--owner", "alice"]).to_string();
    assert_eq!(s.entry("x").unwrap()["owner"], "alice");
    for args in [
        vec!["check", "--lock", "x", &token, "--owner", "bob"],
        vec!["release", "--lock", "x", &token, "--owner", "bob"],
        vec!["renew", "--lock", "x", &token, "--owner", "bob"],
        vec!["status", "--owner", "bob"],
        vec!["--owner", "bob", "status"],
    ] {
        let output = s.cmd().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        assert!(one_line_stderr(&output).contains("--owner"), "{args:?}");
    }
    for command in ["check", "release", "renew", "status"] {
        let help = s.cmd().args([command, "--help"]).output().unwrap();
        let text = String::from_utf8(help.stdout).unwrap();
        assert!(!text.contains("--owner"), "{command} --help offers --owner");
    }
    for command in ["claim", "run"] {
        let help = s.cmd().args([command, "--help"]).output().unwrap();
        let text = String::from_utf8(help.stdout).unwrap();
        assert!(text.contains("--owner"), "{command} --help lacks --owner");
    }
}

#[test]
fn clap_tips_are_their_own_clause() {
    // issue 19: "unexpected argument '--lok' found tip: a similar argument exists".
    let s = Scratch::new();
    let output = s.cmd().args(["claim", "--lok", "x"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let line = one_line_stderr(&output);
    assert!(!line.contains("found tip"), "{line}");
    assert!(
        line.contains("found; a similar argument exists: '--lock'"),
        "{line}"
    );
    let output = s.cmd().args(["claim"]).output().unwrap();
    let line = one_line_stderr(&output);
    assert!(line.contains("were not provided: <--lock"), "{line}");
}

#[test]
fn an_empty_store_or_owner_variable_means_unset() {
    // issue 19: FENCEPOST_STORE= gave clap's "a value is required".
    let s = Scratch::new();
    let repo = s.path().join("repo");
    std::fs::create_dir_all(repo.join(".fencepost")).unwrap();
    let output = s
        .bare_cmd(&repo)
        .env("FENCEPOST_STORE", "")
        .env("FENCEPOST_OWNER", "")
        .args(["claim", "--lock", "x", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let lease = crate::util::json_of(&output);
    assert_eq!(
        lease["owner"], "cli",
        "an empty FENCEPOST_OWNER is the default"
    );
    assert_eq!(
        lease["store"],
        repo.join(".fencepost").display().to_string(),
        "an empty FENCEPOST_STORE is discovery"
    );
}

#[test]
fn a_directory_is_not_a_file() {
    // issue 19: `claim --file DIR` succeeded; directory claims will be --dir.
    let s = Scratch::new();
    std::fs::create_dir(s.path().join("sub")).unwrap();
    for args in [
        vec!["claim", "--file", "sub"],
        vec!["check", "--file", "sub", "1"],
        vec!["run", "--file", "sub", "--", "true"],
    ] {
        let output = s.cmd().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        let line = one_line_stderr(&output);
        assert!(
            line.contains("is a directory") && line.contains("--dir"),
            "{line}"
        );
    }
    assert!(s.status().is_empty(), "nothing was claimed");
}

#[test]
fn release_and_renew_of_a_never_claimed_lock_say_so_and_name_the_store() {
    // issue 19: they said "it was released, expired or superseded".
    let s = Scratch::new();
    s.claim("other", &[]); // the store exists
    let store = s.store().display().to_string();
    for command in ["release", "renew"] {
        let output = s
            .cmd()
            .args([command, "--lock", "never", "1"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3), "{output:?}");
        let line = one_line_stderr(&output);
        assert!(line.contains("never been claimed"), "{command}: {line}");
        // A misspelt name lands here too: the next step is to check the name,
        // never to claim the misspelt one (a new user).
        assert!(line.contains("check the name"), "{command}: {line}");
        assert!(line.contains("fencepost status"), "{command}: {line}");
        assert!(!line.contains("claim it first"), "{command}: {line}");
        assert!(line.contains(&store), "{command}: {line}");
    }
    // A released one says released.
    let token = s.claim_handle("gone", &[]).1;
    s.cmd()
        .args(["release", "--lock", "gone", &token])
        .assert()
        .code(0);
    let output = s
        .cmd()
        .args(["release", "--lock", "gone", &token])
        .output()
        .unwrap();
    let line = one_line_stderr(&output);
    assert!(line.contains("its lease was released"), "{line}");
    assert!(line.contains(&store), "{line}");
}

#[test]
fn every_refusal_names_the_store() {
    let s = Scratch::new();
    let store = s.store().display().to_string();
    let token = s.claim("x", &["--ttl", "60000"]).to_string();
    for args in [
        vec!["claim", "--lock", "x"],
        vec!["check", "--lock", "x", "99"],
        vec!["check", "--lock", "never", "1"],
        vec!["renew", "--lock", "x", "99"],
    ] {
        let output = s.cmd().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(3), "{args:?}: {output:?}");
        assert!(
            one_line_stderr(&output).contains(&store),
            "{args:?}: {output:?}"
        );
    }
    let _ = token;
}

#[cfg(unix)]
#[test]
fn a_lost_run_names_the_store() {
    // issue 19: name the store in every refusal, the loss of `run` included.
    let s = Scratch::new();
    let output = s
        .cmd()
        .args(["run", "--lock", "x", "--ttl", "60000", "--", "sh", "-c"])
        // The child outlives the break: `run` sees the loss and stops it (SIGTERM),
        // however long a loaded machine takes to notice.
        .arg(r#""$FP" break --lock x --reason "lost for the test"; sleep 60"#)
        .env("FP", crate::util::bin())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let loss = stderr
        .lines()
        .find(|l| l.contains("lost:"))
        .expect("a loss line");
    assert!(loss.contains(&s.store().display().to_string()), "{loss}");
}

#[cfg(unix)]
#[test]
fn check_after_a_hard_link_split_agrees_with_status() {
    // issue 19: `check` said "renewed or claimed again meanwhile" while `status`
    // showed the lease held.
    let s = Scratch::new();
    // new.txt is claimed before it exists; the file that takes its name later is
    // claimed through another link first (a claim after the rename would find
    // new.txt held and be refused).
    let a_token = s.claim_file("new.txt").to_string();
    std::fs::write(s.path().join("new.tmp"), "x").unwrap();
    std::fs::hard_link(s.path().join("new.tmp"), s.path().join("other.txt")).unwrap();
    let b_token = s.claim_file("other.txt").to_string();
    std::fs::rename(s.path().join("new.tmp"), s.path().join("new.txt")).unwrap();
    let output = s
        .cmd()
        .args(["check", "--file", "new.txt", &a_token])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let line = one_line_stderr(&output);
    assert!(!line.contains("renewed or claimed again"), "{line}");
    assert!(line.contains("held through another link"), "{line}");
    assert!(
        line.contains("other.txt") && line.contains(&format!("token {b_token}")),
        "{line}"
    );
    // status shows exactly that: other.txt held with B's token.
    let rows = s.status();
    let other = rows
        .iter()
        .find(|e| e["label"].as_str().unwrap().ends_with("other.txt"))
        .unwrap();
    assert_eq!(other["state"], "held");
    assert_eq!(other["token"].to_string(), b_token);
}

#[cfg(unix)]
#[test]
fn a_symlinked_key_directory_is_shown_and_named_as_the_cause() {
    // issue 19: status hid it ("no claims", rc 0) while every command on the key failed
    // with "check that the store is a writable directory".
    let s = Scratch::new();
    s.claim("x", &[]);
    let key = s.only_key_dir();
    let elsewhere = s.path().join("elsewhere");
    std::fs::rename(&key, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &key).unwrap();
    let rows = s.status();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["state"], "unreadable");
    let output = s.cmd().args(["claim", "--lock", "x"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let line = one_line_stderr(&output);
    assert!(line.contains("symbolic link"), "{line}");
    assert!(!line.contains("writable directory"), "{line}");
    // Said once, and the advice to move a directory back is only for the key's own
    // (a breaker found both: the cause repeated, and advice that would copy another
    // key's records into this key's directory).
    assert_eq!(line.matches("follow").count(), 1, "{line}");
    assert!(line.contains("this key's own directory"), "{line}");
    assert!(line.contains("otherwise remove the link"), "{line}");
}

#[test]
fn a_file_in_place_of_a_key_directory_is_named_with_what_to_do() {
    let s = Scratch::new();
    s.claim("x", &[]);
    let key = s.only_key_dir();
    std::fs::remove_dir_all(&key).unwrap();
    std::fs::write(&key, "stray\n").unwrap();
    let output = s.cmd().args(["claim", "--lock", "x"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let line = one_line_stderr(&output);
    assert!(line.contains("is not a directory"), "{line}");
    assert!(!line.contains("writable directory"), "{line}");
    assert!(line.contains("move it out of the store"), "{line}");
}

/// Unmounts a tmpfs when the test ends, even when it fails.
#[cfg(target_os = "linux")]
struct Mount(std::path::PathBuf);

#[cfg(target_os = "linux")]
impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_is_named_as_the_cause() {
    // issue 19: a full disk was reported as "check that the store is a writable
    // directory". Mounting a small tmpfs needs root (CI runs as root).
    let s = Scratch::new();
    let mount_point = s.path().join("small");
    std::fs::create_dir(&mount_point).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&mount_point)
        .status()
        .expect("running mount");
    assert!(
        mounted.success(),
        "this test mounts a tmpfs and needs root (CI runs as root)"
    );
    let _mount = Mount(mount_point.clone());
    let _ = std::process::Command::new("dd")
        .args(["if=/dev/zero", "bs=4k"])
        .arg(format!("of={}", mount_point.join("fill").display()))
        .stderr(std::process::Stdio::null())
        .status();
    let output = s
        .bare_cmd(s.path())
        .arg("--store")
        .arg(mount_point.join("store"))
        .args(["claim", "--lock", "x"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let line = one_line_stderr(&output);
    assert!(line.contains("full"), "{line}");
    assert!(!line.contains("writable directory"), "{line}");
}

/// The README's first Command line example, run as written: claim, check by the token
/// alone, renew and release, each exit 0 (a `check … 7` with a made-up token exited
/// 3 for a new user copying it).
#[cfg(unix)]
#[test]
fn the_readme_lease_lifecycle_runs_as_written() {
    let readme = include_str!("../../README.md");
    let section = &readme[readme.find("\n## Command line").unwrap()..];
    let block = &section[section.find("```sh\n").unwrap() + 6..];
    let lines: Vec<&str> = block.lines().take(4).collect();
    assert!(lines[0].starts_with("lease=$(fencepost claim"), "{lines:?}");
    let script: String = lines
        .iter()
        .map(|line| {
            format!(
                "{}\necho \"rc=$?\" >&2\n",
                line.split(" # ").next().unwrap()
            )
        })
        .collect();
    let s = Scratch::new();
    let bin_dir = crate::util::bin().parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let output = crate::util::scrubbed(std::process::Command::new("sh"))
        .args(["-c", &script])
        .current_dir(s.path())
        .env("PATH", path)
        .env("FENCEPOST_STORE", s.store())
        .env_remove("FENCEPOST_SESSION")
        .env_remove("FENCEPOST_OWNER")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let codes: Vec<&str> = stderr.lines().filter(|l| l.starts_with("rc=")).collect();
    assert_eq!(codes, ["rc=0"; 4], "{script}\n{stderr}");
}

/// `fencepost claim db:migrations` (the resource without its flag): the error says
/// how to name it, on one line.
#[test]
fn a_resource_without_its_flag_is_told_the_flags() {
    let s = Scratch::new();
    for command in [
        &["claim", "db:migrations"][..],
        &["break", "db:migrations", "--reason", "r"],
    ] {
        let output = s.cmd().args(command).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let line = one_line_stderr(&output);
        assert!(
            line.contains("name the resource with --lock db:migrations (a named lock), --file db:migrations or --dir db:migrations"),
            "{line}"
        );
    }
    // An unknown flag is not a resource.
    let output = s.cmd().args(["claim", "--lok", "x"]).output().unwrap();
    assert!(!one_line_stderr(&output).contains("name the resource"));
}

/// `--owner` and `--session` belong to some commands, not to `fencepost` itself:
/// given before the command, the error says where they go (clap alone suggested
/// `--version` for `--session`).
#[test]
fn a_command_option_before_its_command_is_told_where_it_goes() {
    let s = Scratch::new();
    for (argv, flag) in [
        (
            &["--session", "s1", "claim", "--lock", "x"][..],
            "--session ID",
        ),
        (&["--session=s1", "claim", "--lock", "x"], "--session ID"),
        (&["--owner", "bob", "claim", "--lock", "x"], "--owner NAME"),
    ] {
        let output = s.cmd().args(argv).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let line = one_line_stderr(&output);
        assert!(
            line.contains(&format!("{flag} goes after the command it applies to")),
            "{argv:?}: {line}"
        );
        assert!(!line.contains("--version"), "{argv:?}: {line}");
    }
    // After the command they work.
    s.cmd()
        .args(["claim", "--session", "s1", "--owner", "bob", "--lock", "x"])
        .assert()
        .success();
}

/// `claim --slot 2` is told what --slots and --slot are for (clap's tip named
/// `--slots`, which means how many slots the lock has), and `run -- cmd --lock x`
/// that run's options go before `--` (both a new user's finds).
#[test]
fn a_slot_given_to_claim_and_options_after_the_double_dash_are_explained() {
    let s = Scratch::new();
    for argv in [
        &["claim", "--lock", "a", "--slot", "2"][..],
        &["claim", "--lock", "a", "--slot=2"],
    ] {
        let output = s.cmd().args(argv).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let line = one_line_stderr(&output);
        assert!(
            line.contains("claim takes no --slot: --slots N claims a free one"),
            "{line}"
        );
        assert!(!line.contains("similar argument"), "{line}");
    }
    let output = s
        .cmd()
        .args(["run", "--", "echo", "hi", "--lock", "x"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let line = one_line_stderr(&output);
    assert!(line.contains("run's options go before `--`"), "{line}");
    // Without a resource after `--`, no such hint.
    let output = s.cmd().args(["run", "--", "echo", "hi"]).output().unwrap();
    assert!(
        !one_line_stderr(&output).contains("go before"),
        "{output:?}"
    );
}

/// A value with DEL in it is shown escaped (clap's rendering dropped it, and the
/// value read as empty), and a value that begins with `-` is told to go with `=`
/// (clap said only "unexpected argument '-r'"); both a breaker's finds.
#[test]
fn odd_option_values_are_shown_and_explained() {
    let s = Scratch::new();
    let output = s
        .cmd()
        .args(["claim", "--lock", "x", "--session", "a\u{7f}b"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let line = one_line_stderr(&output);
    assert!(line.contains(r"invalid value 'a\u{7f}b'"), "{line}");
    for (argv, hint) in [
        (
            &["claim", "--lock", "x", "--session", "-rf"][..],
            "--session=-rf",
        ),
        (&["claim", "--lock", "-x"], "--lock=-x"),
    ] {
        let output = s.cmd().args(argv).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let line = one_line_stderr(&output);
        assert!(
            line.contains(&format!(
                "a value that begins with '-' is given with '=': {hint}"
            )),
            "{line}"
        );
    }
    s.cmd().args(["claim", "--lock=-x"]).assert().success();
}

/// Given to a command that does not take it (`check --session`), `--session` or
/// `--owner` is named with the commands that do (clap alone suggested `--version`,
/// found by a new user).
#[test]
fn a_command_option_on_a_command_without_it_names_the_commands_that_take_it() {
    let s = Scratch::new();
    for (argv, expected) in [
        (
            &["check", "--lock", "x", "1", "--session", "s1"][..],
            "'check' takes no --session (only claim, run, renew and release do)",
        ),
        (
            &["status", "--owner", "bob"],
            "'status' takes no --owner (only claim, run and break do)",
        ),
    ] {
        let output = s.cmd().args(argv).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let line = one_line_stderr(&output);
        assert!(line.contains(expected), "{argv:?}: {line}");
        assert!(!line.contains("--version"), "{argv:?}: {line}");
    }
}

/// A value with a line break in it is shown escaped in the one-line error, not
/// split into two clauses (`invalid value 'a; b'`, found by a new user).
#[test]
fn an_invalid_value_with_a_line_break_is_shown_escaped() {
    let s = Scratch::new();
    let output = s
        .cmd()
        .args(["claim", "--lock", "x", "--owner", "a\nb"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let line = one_line_stderr(&output);
    assert!(line.contains("invalid value 'a\\u{a}b'"), "{line}");
    assert!(!line.contains("'a; b'"), "{line}");
}

/// Releasing a lease someone took over after it expired: the refusal says the lease
/// ended, to stop writing, and how to get the resource again (found by a
/// fresh-user walk-through: it gave no next step), never to act as the new holder.
#[test]
fn a_release_after_a_takeover_says_what_to_do_next() {
    let s = Scratch::new();
    let (_, old) = s.claim_handle("t", &["--ttl", "200"]);
    std::thread::sleep(std::time::Duration::from_millis(400));
    s.claim_handle("t", &["--ttl", "60000", "--owner", "agent-b"]);
    let output = s
        .cmd()
        .args(["release", "--lock", "t", &old])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let line = one_line_stderr(&output);
    assert!(line.contains("it is held by agent-b"), "{line}");
    assert!(
        line.contains("Your lease ended: stop writing to t"),
        "{line}"
    );
    assert!(line.contains("claim it with --wait MS"), "{line}");
}

/// A message that names fencepost first is not prefixed `fencepost: ` again (the
/// guard outside a repository, the hook run with no agent named).
#[test]
fn a_message_naming_fencepost_is_not_prefixed_twice() {
    let s = Scratch::new();
    let outside = tempfile::tempdir().unwrap();
    let guard = s
        .cmd()
        .current_dir(outside.path())
        .args(["guard", "pre-commit"])
        .output()
        .unwrap();
    let hook = s.cmd().arg("hook").output().unwrap();
    for output in [guard, hook] {
        let line = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(line.starts_with("fencepost "), "{line}");
        assert!(!line.contains("fencepost: fencepost"), "{line}");
    }
}

/// A nested `run` passes on only its own resource's variables: an outer `run
/// --dir`'s FENCEPOST_DIR (or slot's FENCEPOST_SLOT) does not reach the inner child.
#[cfg(unix)]
#[test]
fn a_nested_run_does_not_pass_the_outer_resource_on() {
    let s = Scratch::new();
    let script = r#"printf '%s\n' "${FENCEPOST_DIR-unset}" "${FENCEPOST_SLOT-unset}" "${FENCEPOST_FILE-unset}" "$FENCEPOST_LOCK""#;
    let output = s
        .cmd()
        .env("FENCEPOST_DIR", "/leaked/from/an/outer/run")
        .env("FENCEPOST_SLOT", "9")
        .env("FENCEPOST_FILE", "/leaked")
        .args(["run", "--lock", "inner", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "unset\nunset\nunset\ninner\n"
    );
}

/// A refused `renew` or `release` named `fencepost break` with no resource, where
/// a refused `claim` names the whole command (found by a new user's trial). Both
/// now name it.
#[test]
fn a_refused_renew_names_the_whole_break_command() {
    let s = Scratch::new();
    let token = s.claim("deploy-lock", &["--owner", "alice", "--ttl", "60000"]);
    for command in ["renew", "release"] {
        let output = s
            .cmd()
            .args([command, "--lock", "deploy-lock", &token.to_string()])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3), "{output:?}");
        let line = one_line_stderr(&output);
        assert!(
            line.contains("`fencepost break --lock deploy-lock --reason '…'`"),
            "{command}: {line}"
        );
    }
    // Nothing was released.
    assert_eq!(s.entry("deploy-lock").unwrap()["state"], "held");
}

/// A whole handle of another resource is named as such, never as a lease that
/// ended nor as a bare token (a new user was told "Your lease ended: stop writing"
/// about a lock the handle never held, and "needs the lease handle" when it gave
/// one).
#[test]
fn a_handle_of_another_resource_is_named_as_such() {
    let s = Scratch::new();
    // Token 5 on `a` (two claims and releases before); `b` holds token 1.
    for _ in 0..2 {
        let (_, handle) = s.claim_handle("a", &[]);
        s.cmd()
            .args(["release", "--lock", "a", &handle])
            .assert()
            .success();
    }
    let (_, of_a) = s.claim_handle("a", &[]);
    let (_, of_c) = s.claim_handle("c", &[]);
    s.claim("b", &[]);
    // A token `b` never issued, and `b`'s own token with another secret.
    for (handle, says) in [
        (
            &of_a,
            "this handle is not a lease of b: b never issued token 5",
        ),
        (&of_c, "this handle's secret is not that of token 1 on b"),
    ] {
        for command in ["release", "renew"] {
            let out = s
                .cmd()
                .args([command, "--lock", "b", handle])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(3), "{out:?}");
            let line = one_line_stderr(&out);
            assert!(line.contains(says), "{line}");
            assert!(!line.contains("lease ended"), "{line}");
        }
    }
}

/// A slot's handle used without `--slot` says to pass it (a new user was told the
/// lock "has never been claimed; claim it first").
#[test]
fn a_slot_handle_without_its_slot_says_to_pass_it() {
    let s = Scratch::new();
    let output = s
        .cmd()
        .args(["claim", "--lock", "dev-server", "--slots", "2"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed = String::from_utf8(output.stdout).unwrap();
    let handle = printed.split_whitespace().nth(1).unwrap().to_string();
    let out = s
        .cmd()
        .args(["release", "--lock", "dev-server", &handle])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let line = one_line_stderr(&out);
    assert!(line.contains("--slot N"), "{line}");
    assert!(!line.contains("claim it first"), "{line}");
}

/// A file's path passed as a lock name, with the file's handle, is told to pass
/// it as --file (a new user was told only to check the name against `status`).
#[test]
fn a_files_path_given_as_a_lock_name_is_told_to_use_file() {
    let s = Scratch::new();
    std::fs::write(s.path().join("auth.rs"), "x").unwrap();
    let claimed = s
        .cmd()
        .args(["claim", "--file", "auth.rs"])
        .output()
        .unwrap();
    assert_eq!(claimed.status.code(), Some(0), "{claimed:?}");
    let handle = String::from_utf8(claimed.stdout)
        .unwrap()
        .trim()
        .to_string();
    let output = s
        .cmd()
        .args(["release", "--lock", "auth.rs", &handle])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let said = one_line_stderr(&output);
    assert!(said.contains("pass it as --file"), "{said}");
    // A lock name that is no file's keeps the advice to check the name.
    let output = s
        .cmd()
        .args(["release", "--lock", "no-such-lock", &handle])
        .output()
        .unwrap();
    assert!(
        one_line_stderr(&output).contains("fencepost status"),
        "{output:?}"
    );
}

//! `status` tells the truth (issue 19): the holder's pid and host, one row per
//! resource, readable expiries, resolved labels, bounded widths, the `resource` field.

use crate::util::{Scratch, child_bin, resolved};

#[test]
fn labels_and_the_child_environment_show_the_resolved_path() {
    // issue 19: `file:/repo/sub/../a.txt` in status, FENCEPOST_FILE and FENCEPOST_RESOURCE.
    let s = Scratch::new();
    std::fs::create_dir(s.path().join("sub")).unwrap();
    std::fs::write(s.path().join("a.txt"), "a").unwrap();
    let resolved = resolved(&s.path().join("a.txt"));
    // The child writes its environment, then stays while the test reads status.
    let mut run = s.spawn_cmd();
    run.args(["run", "--file", "sub/../a.txt", "--"])
        .arg(child_bin())
        .args(["env=env.txt", "wait-for=go"]);
    let _go = crate::util::StopFile(s.path().join("go"));
    let mut child = crate::util::Background::spawn(&mut run);
    let env = s.path().join("env.txt");
    crate::util::wait_until(
        "the child wrote its environment",
        std::time::Duration::from_secs(10),
        || std::fs::read_to_string(&env).is_ok_and(|e| e.lines().count() == 5),
    );
    let env = std::fs::read_to_string(&env).unwrap();
    let lines: Vec<&str> = env.lines().collect();
    assert_eq!(lines[4], resolved.to_str().unwrap(), "FENCEPOST_FILE");
    assert_eq!(
        lines[2],
        format!("file:{}", resolved.display()),
        "FENCEPOST_RESOURCE"
    );
    let status = s.status();
    let labels: Vec<&str> = status
        .iter()
        .map(|e| e["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, [resolved.to_str().unwrap()], "{status:?}");
    assert!(!env.contains(".."), "{env}");
    drop(_go);
    assert_eq!(child.0.wait().unwrap().code(), Some(0));
}

/// `status` (the table) as text.
fn table(s: &Scratch) -> String {
    let output = s.cmd().arg("status").output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_pid_is_the_holders_not_the_last_writers() {
    // issue 19: the PID column showed the renewer's (or releaser's) pid.
    let s = Scratch::new();
    let claim = s
        .spawn_cmd()
        .args(["claim", "--lock", "x", "--ttl", "60000"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let holder_pid = claim.id();
    let output = claim.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let token = String::from_utf8(output.stdout).unwrap().trim().to_string();
    let renew = s
        .cmd()
        .args(["renew", "--lock", "x", &token])
        .output()
        .unwrap();
    assert_eq!(renew.status.code(), Some(0), "{renew:?}");
    let entry = s.entry("x").unwrap();
    assert_eq!(entry["pid"], holder_pid, "{entry}");
    assert!(table(&s).contains(&holder_pid.to_string()));
}

#[cfg(target_os = "linux")]
#[test]
fn the_holders_host_is_shown() {
    let s = Scratch::new();
    s.claim("x", &[]);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim();
    assert!(!host.is_empty());
    assert_eq!(s.entry("x").unwrap()["host"], host);
    let table = table(&s);
    assert!(table.lines().next().unwrap().contains("HOST"), "{table}");
    assert!(table.lines().nth(1).unwrap().contains(host), "{table}");
}

#[test]
fn one_claimed_file_is_one_row() {
    // issue 19: an existing file showed `file:` and `inode:` rows, and the `inode:`
    // rows of replaced files piled up.
    let s = Scratch::new();
    let file = s.path().join("a.txt");
    std::fs::write(&file, "1").unwrap();
    for round in 0..3 {
        let (token, handle) = s.claim_file_handle("a.txt");
        let rows = s.status();
        assert_eq!(rows.len(), 1, "round {round}: {rows:?}");
        assert_eq!(rows[0]["state"], "held");
        assert_eq!(rows[0]["token"], token);
        let release = s
            .cmd()
            .args(["release", "--file", "a.txt", &handle])
            .output()
            .unwrap();
        assert_eq!(release.status.code(), Some(0), "{release:?}");
        // Replace the file: a new inode, as editors and `write` do.
        std::fs::write(s.path().join("a.new"), round.to_string()).unwrap();
        std::fs::rename(s.path().join("a.new"), &file).unwrap();
    }
    let rows = s.status();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["state"], "released");
    assert!(!table(&s).contains("inode"), "{}", table(&s));
}

#[test]
fn expiries_read_in_and_ago() {
    // issue 19: `--ttl 1000` showed `0s` right after the claim; expired rows `-1s`.
    // Ended a second ago, written through the library (a `--ttl 200` claim can lapse
    // before a loaded machine confirms it); ends in ten seconds, however long the
    // claim and `status` take to start.
    let s = Scratch::new();
    crate::basics::lease_ending_in(&s, "gone", -1_000);
    s.claim("soon", &["--ttl", "10000"]);
    let table = table(&s);
    let soon = table.lines().find(|l| l.contains("lock:soon")).unwrap();
    // Tenths of a second (`in 9.9s`), never whole seconds rounded down (`in 9s`).
    let left = soon
        .rsplit("in ")
        .next()
        .and_then(|rest| rest.strip_suffix('s'))
        .unwrap_or("");
    assert!(
        left.split_once('.').is_some_and(|(whole, tenth)| {
            whole.parse::<u64>().is_ok_and(|w| w <= 10)
                && tenth.len() == 1
                && tenth.parse::<u8>().is_ok()
        }),
        "{soon}"
    );
    let gone = table.lines().find(|l| l.contains("lock:gone")).unwrap();
    // A tenth of a second's precision; how long ago depends on how fast the two
    // claims ran (more than a second apart under Wine).
    let ago = gone
        .rsplit("expired ")
        .next()
        .and_then(|rest| rest.strip_suffix("s ago"))
        .unwrap_or("");
    assert!(
        ago.split_once('.').is_some_and(|(whole, tenth)| {
            whole.parse::<u64>().is_ok() && tenth.len() == 1 && tenth.parse::<u8>().is_ok()
        }),
        "{gone}"
    );
    assert!(!table.contains("-1s") && !table.contains(" 0s"), "{table}");
}

#[test]
fn a_huge_label_does_not_pad_every_row() {
    // issue 19: a 60,000-character lock name gave 1.4 MB of output for 22 rows.
    let s = Scratch::new();
    let huge = format!("{}-end", "n".repeat(60_000));
    // Through the library: Windows' CreateProcessW refuses a command line this long
    // (and Wine silently truncates it; docs/windows.md).
    crate::util::claim_through_the_library(&s, &huge);
    for name in ["a", "b", "c"] {
        s.claim(name, &[]);
    }
    let table = table(&s);
    assert!(table.len() < 2_000, "{} bytes", table.len());
    let row = table.lines().find(|l| l.contains("-end")).unwrap();
    assert!(row.contains("lock:nnn") && row.contains('…'), "{row}");
    // --json keeps the label whole.
    assert!(s.status().iter().any(|e| e["label"] == huge.as_str()));
}

#[test]
fn status_json_rows_name_the_resource() {
    // issue 19: claim --json and check --json have `resource`; status --json lacked it.
    let s = Scratch::new();
    s.claim("db:migrations", &[]);
    std::fs::write(s.path().join("a.txt"), "a").unwrap();
    s.claim_file("a.txt");
    let file = resolved(&s.path().join("a.txt"));
    let mut resources: Vec<String> = s
        .status()
        .iter()
        .map(|e| e["resource"].as_str().unwrap().to_string())
        .collect();
    resources.sort();
    assert_eq!(
        resources,
        [
            format!("file:{}", file.display()),
            "lock:db:migrations".into()
        ]
    );
}

/// A store path with a newline in it is shown escaped on `status`'s store line,
/// which stays one line (a breaker: it was printed raw, over two lines).
#[cfg(unix)]
#[test]
fn a_store_path_with_a_newline_stays_on_one_line() {
    let s = Scratch::new();
    let store = s.path().join("st\nore");
    let store_arg = store.to_str().unwrap();
    let claimed = s
        .bare_cmd(s.path())
        .args(["--store", store_arg, "claim", "--lock", "a"])
        .output()
        .unwrap();
    assert_eq!(claimed.status.code(), Some(0), "{claimed:?}");
    let status = s
        .bare_cmd(s.path())
        .args(["--store", store_arg, "status"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("store: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("st\\u{a}ore"), "{text}");
}

/// `status --held` lists only what is held now, and counts the rest on its last
/// lines (a new user: `status` listed every resource ever claimed, 44 rows after
/// 40 commands); `--held --json` leaves them out too.
#[test]
fn held_lists_only_what_is_held_and_counts_the_rest() {
    let s = Scratch::new();
    let _held = s.claim_handle("kept", &[]);
    for name in ["done-1", "done-2"] {
        let (_, handle) = s.claim_handle(name, &[]);
        s.cmd()
            .args(["release", "--lock", name, &handle])
            .assert()
            .code(0);
    }
    let output = s.cmd().args(["status", "--held"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("lock:kept"), "{text}");
    assert!(!text.contains("done-"), "{text}");
    assert!(text.contains("2 resources not held"), "{text}");
    // Without --held, every row.
    let all = table(&s);
    assert!(
        all.contains("lock:done-1") && all.contains("lock:kept"),
        "{all}"
    );
    let json = s
        .cmd()
        .args(["status", "--held", "--json"])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(rows.as_array().map(Vec::len), Some(1), "{rows}");
}

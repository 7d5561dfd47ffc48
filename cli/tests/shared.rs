//! Shared claims (issue 14, docs/design-05-subtrees-and-shared.md §4) through real
//! `fencepost` processes: many readers at once, a writer waits for all of them, and
//! readers that keep arriving do not starve a waiting writer.

use std::process::Stdio;
use std::time::Duration;
#[cfg(unix)]
use std::time::Instant;

#[cfg(unix)]
use crate::util::bin;
use crate::util::{Background, Scratch, StopFile, child_bin, json_of, one_line_stderr, wait_until};

/// A `sh -c SCRIPT` with the binary as `$FP`, the store as `$STORE` and the scratch
/// directory as `$DIR`.
#[cfg(unix)]
fn shell(s: &Scratch, script: &str) -> std::process::Command {
    let mut cmd = crate::util::scrubbed(std::process::Command::new("sh"));
    cmd.args(["-c", script])
        .current_dir(s.path())
        .env("FP", bin())
        .env_remove("FENCEPOST_SESSION")
        .env_remove("FENCEPOST_STORE")
        .env("STORE", s.store())
        .env("DIR", s.path())
        .stdout(Stdio::null());
    cmd
}

fn markers(s: &Scratch, prefix: &str) -> usize {
    std::fs::read_dir(s.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().starts_with(prefix))
        })
        .count()
}

/// 8 `run --shared` readers hold at once (each leaves a marker while inside and
/// stays until told to go); `status` shows one row listing the 8; a writer waits
/// until every reader left, and sees no marker when it gets in. The children are
/// `fencepost-test-child` steps, so this runs on Windows too.
#[test]
fn eight_readers_at_once_then_the_writer() {
    let s = Scratch::new();
    let _stop = StopFile(s.path().join("go"));
    let readers: Vec<_> = (0..8)
        .map(|n| {
            let owner = format!("reader-{n}");
            let marker = format!("in-{n}");
            let mut cmd = s.spawn_cmd();
            cmd.args(["run", "--lock", "doc", "--shared", "--owner", &owner])
                .args(["--wait", "60000", "--"])
                .arg(child_bin())
                .arg(format!("touch={marker}"))
                .arg("wait-for=go")
                .arg(format!("remove={marker}"))
                .stdout(Stdio::null());
            Background::spawn(&mut cmd)
        })
        .collect();
    wait_until(
        "8 readers are inside at once",
        Duration::from_secs(60),
        || markers(&s, "in-") == 8,
    );
    let rows: Vec<_> = s
        .status()
        .into_iter()
        .filter(|e| e["resource"] == "lock:doc")
        .collect();
    assert_eq!(rows.len(), 1, "one row for the resource: {rows:?}");
    assert_eq!(rows[0]["state"], "held");
    assert_eq!(
        rows[0]["shared"].as_array().map(Vec::len),
        Some(8),
        "{rows:?}"
    );
    let table = s.cmd().arg("status").output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("8 shared: reader-0"), "{table}");
    // An exclusive claim without waiting is refused, naming a reader.
    let refused = s.cmd().args(["claim", "--lock", "doc"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    assert!(
        one_line_stderr(&refused).contains("(shared)"),
        "{refused:?}"
    );
    let mut writer = s.spawn_cmd();
    writer
        .args([
            "run", "--lock", "doc", "--owner", "writer", "--wait", "60000", "--",
        ])
        .arg(child_bin())
        .arg("count=in-:writer-saw")
        .stdout(Stdio::null());
    let mut writer = Background::spawn(&mut writer);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !s.path().join("writer-saw").exists(),
        "the writer got in while 8 readers held"
    );
    std::fs::write(s.path().join("go"), b"").unwrap();
    assert!(writer.0.wait().unwrap().success(), "the writer failed");
    let saw = std::fs::read_to_string(s.path().join("writer-saw")).unwrap();
    assert_eq!(saw.trim(), "0", "the writer saw readers inside");
    for mut r in readers {
        assert!(r.0.wait().unwrap().success(), "a reader failed");
    }
}

/// Readers keep arriving (three loops, each starting an overlapping 0.6 s reader
/// every 0.15 s, so some reader always holds); a writer that starts waiting among
/// them gets in once the readers already inside left, long before its wait ends,
/// and no reader is inside with it. Unix only: the readers arrive from shell loops
/// every 0.15 s, faster than Wine starts a `run` and its child, so under Wine the
/// stream would have gaps and the test would no longer be about starvation.
#[cfg(unix)]
#[test]
fn a_waiting_writer_is_not_starved_by_arriving_readers() {
    let s = Scratch::new();
    std::fs::write(s.path().join("readers-on"), b"").unwrap();
    let loop_script = r#"
        while [ -e "$DIR/readers-on" ]; do
            "$FP" --store "$STORE" run --lock doc --shared --owner reader --wait 60000 -- sh -c '
                mkdir -p "$DIR/inside"; touch "$DIR/inside/$$"
                [ -e "$DIR/writer-in" ] && touch "$DIR/OVERLAP"
                sleep 0.6; rm "$DIR/inside/$$"' &
            sleep 0.15
        done
        wait"#;
    let loops: Vec<_> = (0..3)
        .map(|_| Background(shell(&s, loop_script).spawn().unwrap()))
        .collect();
    wait_until("readers are inside", Duration::from_secs(60), || {
        std::fs::read_dir(s.path().join("inside")).is_ok_and(|d| d.count() > 0)
    });
    let started = Instant::now();
    let writer = s
        .cmd()
        .args([
            "run", "--lock", "doc", "--owner", "writer", "--wait", "30000", "--", "sh", "-c",
            r#"touch writer-in; n=$(ls inside | wc -l); echo $n > writer-saw; sleep 0.3; rm writer-in"#,
        ])
        .output()
        .unwrap();
    let waited = started.elapsed();
    std::fs::remove_file(s.path().join("readers-on")).unwrap();
    for mut l in loops {
        let _ = l.0.wait();
    }
    assert_eq!(
        writer.status.code(),
        Some(0),
        "the writer was starved: {writer:?}"
    );
    assert!(
        waited < Duration::from_secs(20),
        "the writer waited {waited:?} with readers arriving"
    );
    let saw = std::fs::read_to_string(s.path().join("writer-saw")).unwrap();
    assert_eq!(saw.trim(), "0", "readers were inside with the writer");
    assert!(
        !s.path().join("OVERLAP").exists(),
        "a reader got in with the writer"
    );
}

/// Runs `claimant` (a command line after `fencepost --store …`) while three shell
/// loops keep starting overlapping readers of `resource` (`run RESOURCE --shared`,
/// 0.6 s each, one every 0.15 s per loop, so some reader always holds): its output,
/// and how many readers were inside when it returned. Unix only, as above.
#[cfg(unix)]
fn amid_arriving_readers(
    s: &Scratch,
    resource: &str,
    claimant: &[&str],
) -> (std::process::Output, usize) {
    std::fs::write(s.path().join("readers-on"), b"").unwrap();
    let loop_script = format!(
        r#"
        while [ -e "$DIR/readers-on" ]; do
            "$FP" --store "$STORE" run {resource} --shared --owner reader --wait 60000 -- sh -c '
                mkdir -p "$DIR/inside"; touch "$DIR/inside/$$"; sleep 0.6; rm "$DIR/inside/$$"' &
            sleep 0.15
        done
        wait"#
    );
    let loops: Vec<_> = (0..3)
        .map(|_| Background(shell(s, &loop_script).spawn().unwrap()))
        .collect();
    wait_until("readers are inside", Duration::from_secs(60), || {
        std::fs::read_dir(s.path().join("inside")).is_ok_and(|d| d.count() > 0)
    });
    let output = s.cmd().args(claimant).output().unwrap();
    let inside = std::fs::read_dir(s.path().join("inside")).map_or(0, |d| d.count());
    std::fs::remove_file(s.path().join("readers-on")).unwrap();
    for mut l in loops {
        let _ = l.0.wait();
    }
    (output, inside)
}

/// As above for a claim of several resources, one of which the readers share: the
/// set holds an intent on the member it waits for, so it gets in once the readers
/// already inside left. It was starved for its whole wait (a breaker: `claim --lock
/// ma --lock mb --wait 10000` gave up after 10 s, and no reader was refused).
#[cfg(unix)]
#[test]
fn a_waiting_set_is_not_starved_by_arriving_readers_of_a_member() {
    let s = Scratch::new();
    let (set, inside) = amid_arriving_readers(
        &s,
        "--lock doc",
        &[
            "claim", "--lock", "other", "--lock", "doc", "--owner", "set", "--ttl", "3000",
            "--wait", "30000",
        ],
    );
    assert_eq!(set.status.code(), Some(0), "the set was starved: {set:?}");
    assert_eq!(inside, 0, "readers were inside with the set");
}

/// As above for a writer of a file below a directory the readers share as a
/// subtree: the writer's intent keeps new subtree readers out. It was starved for
/// its whole wait (a breaker: readers of `--dir d --shared` every 0.3 s against
/// `claim --file d/f --wait 10000`, none refused).
#[cfg(unix)]
#[test]
fn a_writer_below_a_shared_subtree_is_not_starved_by_arriving_readers() {
    let s = Scratch::new();
    std::fs::create_dir(s.path().join("d")).unwrap();
    let (writer, inside) = amid_arriving_readers(
        &s,
        r#"--dir "$DIR/d""#,
        &[
            "claim", "--file", "d/f", "--owner", "writer", "--ttl", "3000", "--wait", "30000",
        ],
    );
    assert_eq!(
        writer.status.code(),
        Some(0),
        "the writer was starved: {writer:?}"
    );
    assert_eq!(inside, 0, "readers were inside with the writer");
}

/// A set waiting for a member held by readers takes nothing meanwhile: its look
/// sees the readers. It took the members before that one and gave them back every
/// round (a breaker: `mcA`'s token climbed to hundreds in seconds, and others'
/// claims of `mcA` were refused by those passing claims).
#[test]
fn a_set_waiting_for_readers_of_a_member_takes_nothing() {
    let s = Scratch::new();
    let reader = s
        .cmd()
        .args(["claim", "--lock", "mc", "--shared", "--ttl", "60000"])
        .output()
        .unwrap();
    assert_eq!(reader.status.code(), Some(0), "{reader:?}");
    let set = s
        .cmd()
        .args(["claim", "--lock", "mcA", "--lock", "mc", "--wait", "1500"])
        .output()
        .unwrap();
    assert_eq!(set.status.code(), Some(3), "{set:?}");
    let after = s.claim("mcA", &[]);
    assert_eq!(after, 1, "the waiting set took and gave back mcA");
}

/// A new reader of a directory refused for a writer waiting below it is told the
/// path the writer waits for, not the directory (a breaker: "d is kept free for
/// file /…/d, which cli (an exclusive claimer waiting) … is waiting for").
#[cfg(unix)]
#[test]
fn a_reader_kept_out_for_a_writer_below_is_told_the_writers_path() {
    let s = Scratch::new();
    std::fs::create_dir(s.path().join("d")).unwrap();
    let first = s
        .cmd()
        .args(["claim", "--dir", "d", "--shared", "--ttl", "60000"])
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let mut writer = s.spawn_cmd();
    writer.args([
        "claim", "--file", "d/f.txt", "--owner", "writer", "--wait", "30000",
    ]);
    let _writer = Background::spawn(&mut writer);
    let mut said = String::new();
    wait_until("a new reader is kept out", Duration::from_secs(20), || {
        let output = s
            .cmd()
            .args(["claim", "--dir", "d", "--shared", "--ttl", "60000"])
            .output()
            .unwrap();
        if output.status.code() == Some(0) {
            // In before the writer's intent: give it back and look again.
            let handle = String::from_utf8_lossy(&output.stdout).trim().to_string();
            s.cmd()
                .args(["release", "--dir", "d", &handle])
                .output()
                .unwrap();
            return false;
        }
        said = one_line_stderr(&output);
        true
    });
    assert!(
        said.contains("kept free for file") && said.contains("d/f.txt"),
        "{said}"
    );
}

/// `claim --shared` prints a handle that renews and releases the shared tenure;
/// `--json` says `"shared": true`; --shared with --session or --slots is refused.
#[test]
fn claim_shared_handle_and_bad_input() {
    let s = Scratch::new();
    let out = s
        .cmd()
        .args(["claim", "--lock", "doc", "--shared", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json = json_of(&out);
    assert_eq!(json["shared"], true, "{json}");
    let handle = json["handle"].as_str().unwrap().to_string();
    let second = s
        .cmd()
        .args(["claim", "--lock", "doc", "--shared"])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(0), "a second reader: {second:?}");
    s.cmd()
        .args(["renew", "--lock", "doc", &handle])
        .assert()
        .code(0);
    s.cmd()
        .args(["release", "--lock", "doc", &handle])
        .assert()
        .code(0);
    for (args, says) in [
        (
            &["claim", "--lock", "d", "--shared", "--session", "x"][..],
            "cannot be used with",
        ),
        (
            &["claim", "--lock", "d", "--shared", "--slots", "2"][..],
            "slots are exclusive",
        ),
    ] {
        let output = s.cmd().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        assert!(
            one_line_stderr(&output).contains(says),
            "{args:?}: {output:?}"
        );
    }
}

/// A shared claimer, an exclusive claimer and another shared claimer of one free
/// lock, started at once and none waiting, are never all refused (found by a
/// breaker: about 1 round in 40 all three were refused, each naming as the holder
/// a claimer that had given back too). Each side writes first and reads the other
/// second; a claimer that finds its rival only after its own claim landed looks
/// again before it reports it (docs/design-05-subtrees-and-shared.md §4.4). Every
/// exit is 0 or 3 (refused). Each round claims a lock of its own; under Wine, where
/// a process start costs tens of milliseconds, fewer rounds (the checker's
/// `shared_exclusive_race` explores the race on every platform).
#[test]
fn racing_readers_and_a_writer_of_a_free_lock_are_never_all_refused() {
    let rounds = if cfg!(windows) { 30 } else { 300 };
    let s = Scratch::new();
    for round in 0..rounds {
        let lock = format!("race-{round}");
        let children: Vec<_> = [true, false, true]
            .into_iter()
            .map(|shared| {
                let mut cmd = s.spawn_cmd();
                cmd.args(["claim", "--lock", &lock, "--ttl", "60000"]);
                if shared {
                    cmd.arg("--shared");
                }
                cmd.stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outputs: Vec<_> = children
            .into_iter()
            .map(|child| child.wait_with_output().unwrap())
            .collect();
        for output in &outputs {
            assert!(
                matches!(output.status.code(), Some(0 | 3)),
                "round {round}: {output:?}"
            );
        }
        let refusals: Vec<_> = outputs
            .iter()
            .filter(|o| o.status.code() == Some(3))
            .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
            .collect();
        assert!(
            refusals.len() < 3,
            "round {round}: a free lock, and all three claimers were refused: {refusals:#?}"
        );
    }
}

/// A writer waiting for a reader holds an intent that keeps new readers out. One
/// killed while it waits (SIGKILL) left an intent that kept every reader out for a
/// whole ttl, naming a dead process (found by a breaker). The intent is tied to its
/// waiter's process: once the waiter provably died, a reader gets in at once.
#[cfg(unix)]
#[test]
fn a_killed_waiting_writer_keeps_no_reader_out() {
    let s = Scratch::new();
    let reader = s
        .cmd()
        .args(["claim", "--lock", "w", "--shared", "--ttl", "60000"])
        .output()
        .unwrap();
    assert_eq!(reader.status.code(), Some(0), "{reader:?}");
    let mut writer = s.spawn_cmd();
    writer
        .args([
            "claim", "--lock", "w", "--wait", "forever", "--ttl", "60000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut writer = writer.spawn().unwrap();
    // The writer waits: a new reader is refused, naming it.
    wait_until("the writer waits", Duration::from_secs(20), || {
        let out = s
            .cmd()
            .args(["claim", "--lock", "w", "--shared"])
            .output()
            .unwrap();
        out.status.code() == Some(3)
            && String::from_utf8_lossy(&out.stderr).contains("an exclusive claimer waiting")
    });
    writer.kill().unwrap();
    writer.wait().unwrap();
    let started = Instant::now();
    let out = s
        .cmd()
        .args(["claim", "--lock", "w", "--shared"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", one_line_stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// A reader takes a SIGKILLed exclusive holder over as a writer would: `fencepost
/// run` (a tenure tied to its process) is killed holding; a shared claim with no
/// wait gets in at once, and the dead tenure's token no longer passes `check`.
/// Before, the reader was refused for the whole ttl (60 s here) while `status`
/// said "the next claim takes the lease over at once" (a breaker).
#[cfg(unix)]
#[test]
fn a_reader_takes_over_a_killed_exclusive_holder_at_once() {
    let s = Scratch::new();
    let _stop = StopFile(s.path().join("go"));
    let mut holder = s.spawn_cmd();
    holder
        .args(["run", "--lock", "d", "--ttl", "60000", "--"])
        .arg(child_bin())
        .arg("wait-for=go")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut holder = holder.spawn().unwrap();
    // Held, and its records name its command's group (the renewal right after the
    // command started): killed before that, `run` keeps its ttl (its command may
    // still run; `cli/tests/run.rs`).
    s.wait_group_named("d");
    holder.kill().unwrap();
    holder.wait().unwrap();
    // At once: within the guard's few milliseconds to stop the command, not the
    // 60 s ttl.
    let out = s
        .cmd()
        .args(["claim", "--lock", "d", "--shared", "--wait", "5000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", one_line_stderr(&out));
    let dead = s
        .cmd()
        .args(["check", "--lock", "d", "1"])
        .output()
        .unwrap();
    assert_eq!(dead.status.code(), Some(3), "{dead:?}");
}

/// A waiting writer that is stopped (SIGSTOP) keeps readers out only as long as
/// its intent's ttl, at most 10 s, not for its claim's whole ttl (a breaker: a
/// writer waiting with --ttl 600000, stopped, kept every reader out for ten
/// minutes).
#[cfg(unix)]
#[test]
fn a_stopped_waiting_writer_keeps_readers_out_for_at_most_ten_seconds() {
    let s = Scratch::new();
    s.claim("m", &["--shared", "--ttl", "60000"]);
    let mut writer = s.spawn_cmd();
    writer
        .args([
            "claim", "--lock", "m", "--wait", "forever", "--ttl", "600000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut writer = Background::spawn(&mut writer);
    wait_until("the writer waits", Duration::from_secs(20), || {
        let out = s
            .cmd()
            .args(["claim", "--lock", "m", "--shared"])
            .output()
            .unwrap();
        out.status.code() == Some(3)
            && String::from_utf8_lossy(&out.stderr).contains("an exclusive claimer waiting")
    });
    crate::util::send_signal(writer.0.id(), "STOP");
    let stopped = Instant::now();
    let out = s
        .cmd()
        .args(["claim", "--lock", "m", "--shared", "--wait", "30000"])
        .output()
        .unwrap();
    let waited = stopped.elapsed();
    crate::util::send_signal(writer.0.id(), "CONT");
    writer.kill_and_reap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        waited < Duration::from_secs(20),
        "a reader waited {waited:?}"
    );
}

/// The break a refusal by readers suggests works: it ends every reader (their
/// renewals then fail, naming the break), and the writer gets in. Before, `break`
/// answered "not held by anyone" and the suggestion was a dead end (a new user).
#[test]
fn a_break_ends_every_reader() {
    let s = Scratch::new();
    let (_, first) = s.claim_handle("doc", &["--shared", "--owner", "reader-a"]);
    let (_, second) = s.claim_handle("doc", &["--shared", "--owner", "reader-b"]);
    let refused = s
        .cmd()
        .args(["claim", "--lock", "doc", "--wait", "0"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    assert!(one_line_stderr(&refused).contains("fencepost break --lock doc"));
    let broke = s
        .cmd()
        .args(["break", "--lock", "doc", "--reason", "readers stuck"])
        .output()
        .unwrap();
    assert_eq!(broke.status.code(), Some(0), "{broke:?}");
    let said = String::from_utf8_lossy(&broke.stdout);
    assert!(
        said.contains("broke the shared leases of reader-a and 1 other reader (shared)"),
        "{said}"
    );
    // A shared token is no exclusive one: nothing is promised about the bare token
    // or the next claim's (a breaker: the next exclusive claim got the same number).
    assert!(!said.contains("never passes again"), "{said}");
    for handle in [&first, &second] {
        let renew = s
            .cmd()
            .args(["renew", "--lock", "doc", handle])
            .output()
            .unwrap();
        assert_eq!(renew.status.code(), Some(3), "{renew:?}");
        assert!(one_line_stderr(&renew).contains("readers stuck"));
    }
    s.claim("doc", &["--wait", "0"]);
}

/// `status` after every shared tenure of a lock ended shows how the last one ended
/// — broken, with the break's reason, or released — as it does for an exclusive
/// tenure (a breaker: the row vanished, and a reader whose lease was broken found
/// nothing in `status` to say so).
#[test]
fn status_shows_how_the_last_shared_tenure_ended() {
    let s = Scratch::new();
    let row = |s: &Scratch| {
        let output = s.cmd().args(["status", "--json"]).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let rows: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "lock:doc")
            .cloned()
    };
    s.claim("doc", &["--shared", "--owner", "reader-a"]);
    s.claim("doc", &["--shared", "--owner", "reader-b"]);
    let broke = s
        .cmd()
        .args(["break", "--lock", "doc", "--reason", "readers stuck"])
        .output()
        .unwrap();
    assert_eq!(broke.status.code(), Some(0), "{broke:?}");
    let broken = row(&s).expect("a row for the broken lock");
    assert_eq!(broken["state"], "broken", "{broken}");
    assert_eq!(broken["live"], false, "{broken}");
    assert!(broken.to_string().contains("readers stuck"), "{broken}");
    let text = s.cmd().arg("status").output().unwrap();
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("broken"),
        "{text:?}"
    );

    let (_, handle) = s.claim_handle("doc", &["--shared", "--owner", "reader-c"]);
    let released = s
        .cmd()
        .args(["release", "--lock", "doc", &handle])
        .output()
        .unwrap();
    assert_eq!(released.status.code(), Some(0), "{released:?}");
    let ended = row(&s).expect("a row for the released lock");
    assert_eq!(ended["state"], "released", "{ended}");
    assert_eq!(ended["owner"], "reader-c", "{ended}");
    // `check` of the ended shared token agrees (a new user was told "it has never
    // been claimed").
    let token = handle.split_once('.').unwrap().0;
    let check = s
        .cmd()
        .args(["check", "--lock", "doc", token])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(3), "{check:?}");
    let said = one_line_stderr(&check);
    assert!(
        said.contains("only ever held shared") && said.contains("released it"),
        "{said}"
    );
}

/// An exclusive claim refused by several readers names the reader whose lease ends
/// last and how many hold beside it: its "until" is when the last reader's lease
/// ends, which is when the claim can first get in. Before, the refusal named the
/// first reader in the index and its expiry (a breaker: an agent told to wait until
/// then was refused again).
#[test]
fn a_refusal_by_several_readers_names_the_last_to_end_and_counts_the_others() {
    let s = Scratch::new();
    for (owner, ttl) in [
        ("reader-a", "60000"),
        ("reader-c", "180000"),
        ("reader-b", "120000"),
    ] {
        s.claim("doc", &["--shared", "--owner", owner, "--ttl", ttl]);
    }
    let output = s
        .cmd()
        .args(["claim", "--lock", "doc", "--owner", "writer", "--wait", "0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let line = one_line_stderr(&output);
    assert!(
        line.contains("held by reader-c and 2 other readers (shared)"),
        "{line}"
    );
    // Its own expiry: about three minutes away, not one.
    assert!(
        line.contains("(in 2m5") || line.contains("(in 3m"),
        "{line}"
    );
}

/// `check` of a shared lease's token says why it does not pass (check judges
/// exclusive tokens) and names the readers, instead of "it has never been claimed"
/// of a resource `status` shows held (a new user and a breaker).
#[test]
fn checking_a_shared_token_says_it_is_held_shared() {
    let s = Scratch::new();
    let token = s.claim("doc", &["--shared", "--owner", "reader-a"]);
    let out = s
        .cmd()
        .args(["check", "--lock", "doc", &token.to_string()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let line = one_line_stderr(&out);
    assert!(line.contains("held shared (by reader-a)"), "{line}");
    assert!(!line.contains("never been claimed"), "{line}");
}

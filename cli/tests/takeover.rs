//! Dead-holder takeover through the real binary: a `run` or `claim --hold` whose
//! process provably died on this host is taken over at once, with a higher token,
//! and the dead token fails `check`; a paused (alive) holder, a record from another
//! host or boot, a plain `claim` (whose lease outlives its process) and the off
//! switch all keep ttl semantics (issue 16; docs/design-01-lease-and-fence.md).

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::loss::{read_pid, running};
use crate::util::{
    Background, PidFileGuard, Scratch, json_of, send_signal, token_of_handle, wait_until,
};

/// A `run --ttl 60000` holding `lock` (its child sleeps), once it holds.
fn holding_run(s: &Scratch, lock: &str) -> (Background, PidFileGuard, u64) {
    let guard = PidFileGuard(s.path().join(format!("{lock}.child")));
    let mut run = s.spawn_cmd();
    run.args(["run", "--lock", lock, "--ttl", "60000", "--", "sh", "-c"])
        .arg(format!(
            r#"echo $$ > {lock}.tmp && mv {lock}.tmp {lock}.child; exec sleep 60"#
        ));
    let run = Background::spawn(&mut run);
    read_pid(&guard.0);
    let token = s.wait_held(lock);
    s.wait_group_named(lock);
    (run, guard, token)
}

/// A `claim --hold --ttl 60000` of `lock`, and the token it printed.
fn holding_claim(s: &Scratch, lock: &str) -> (Background, u64) {
    let (hold, handle) = s.hold(lock, 60_000, false);
    (hold, token_of_handle(&handle))
}

/// Issue 16: SIGKILL a `run` holding with ttl 60 s; a waiter gets the lease within
/// 1 s, with a higher token, and the dead token fails check.
#[test]
fn a_sigkilled_run_is_taken_over_within_a_second() {
    let s = Scratch::new();
    let (mut run, _child, dead) = holding_run(&s, "x");
    run.kill_and_reap();
    let killed = Instant::now();
    let output = s
        .cmd()
        .args([
            "claim",
            "--lock",
            "x",
            "--owner",
            "successor",
            "--wait",
            "5000",
            "--json",
        ])
        .output()
        .unwrap();
    let took = killed.elapsed();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(took < Duration::from_secs(1), "taken over after {took:?}");
    let successor = json_of(&output);
    assert!(successor["token"].as_u64().unwrap() > dead);
    s.cmd()
        .args(["check", "--lock", "x", &dead.to_string()])
        .assert()
        .code(3);
}

/// Issue 16: the same for `claim --hold`, with no wait at all: the dead holder is
/// not in the way.
#[test]
fn a_sigkilled_hold_is_taken_over_at_once() {
    let s = Scratch::new();
    let (mut hold, dead) = holding_claim(&s, "x");
    hold.kill_and_reap();
    let token = s.claim("x", &["--owner", "successor"]);
    assert!(token > dead);
    s.cmd()
        .args(["check", "--lock", "x", &dead.to_string()])
        .assert()
        .code(3);
}

/// `status` tells a killed tied holder from a live one: its row is still held (a
/// claim takes it over; until then the record stands) but says the process ended,
/// with a note naming the pid and what the next claim does; a live holder's row
/// says neither.
#[test]
fn status_shows_a_killed_holder_s_process_ended() {
    let s = Scratch::new();
    let (mut hold, token) = holding_claim(&s, "x");
    let entry = s.entry("x").unwrap();
    assert_eq!(entry["state"], "held");
    assert!(entry.get("holder_ended").is_none(), "{entry}");
    let table = s.cmd().arg("status").output().unwrap();
    assert!(!String::from_utf8_lossy(&table.stdout).contains("process ended"));

    hold.kill_and_reap();
    let entry = s.entry("x").unwrap();
    assert_eq!(entry["state"], "held");
    assert_eq!(entry["holder_ended"], true, "{entry}");
    let table = s.cmd().arg("status").output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("held (process ended)"), "{table}");
    assert!(
        table.contains(&format!(
            "lock:x token {token}: its holder's process (pid {}) has ended; the next claim takes the lease over at once",
            entry["pid"]
        )),
        "{table}"
    );
    assert!(s.claim("x", &[]) > token);
}

/// The same for a resource held only by shared holders: once every reader's
/// process ended, its row says so (a breaker: a SIGKILLed `claim --shared --hold`
/// showed plainly held, though a writer took it over at once); while one lives,
/// it does not.
#[test]
fn status_shows_killed_shared_holders_processes_ended() {
    let s = Scratch::new();
    let mut hold = s.spawn_cmd();
    hold.args([
        "claim", "--lock", "y", "--shared", "--ttl", "60000", "--hold",
    ])
    .stdout(Stdio::piped());
    let mut hold = Background::spawn(&mut hold);
    let mut line = String::new();
    BufReader::new(hold.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let entry = s.entry("y").unwrap();
    assert_eq!(entry["state"], "held", "{entry}");
    assert!(entry.get("holder_ended").is_none(), "{entry}");
    hold.kill_and_reap();
    let entry = s.entry("y").unwrap();
    assert_eq!(entry["holder_ended"], true, "{entry}");
    let table = s.cmd().arg("status").output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("held (process ended)")
            && table.contains("the processes of its shared holders have ended"),
        "{table}"
    );
}

/// A killed `run` whose command still runs (it ignores SIGTERM, `--on-loss keep`
/// leaves it running) is not "process ended" in `status`: the next claim would be
/// refused (a breaker: status promised a takeover at once that the claim refused).
#[test]
fn status_does_not_promise_a_takeover_while_a_killed_runs_command_runs() {
    let s = Scratch::new();
    let guard = PidFileGuard(s.path().join("x.child"));
    let mut run = s.spawn_cmd();
    run.args([
        "run",
        "--lock",
        "x",
        "--ttl",
        "60000",
        "--on-loss",
        "keep",
        "--",
    ])
    .args([
        "sh",
        "-c",
        r#"echo $$ > x.tmp && mv x.tmp x.child; exec sleep 60"#,
    ]);
    let mut run = Background::spawn(&mut run);
    read_pid(&guard.0);
    s.wait_held("x");
    s.wait_group_named("x");
    run.kill_and_reap();
    let entry = s.entry("x").unwrap();
    assert_eq!(entry["state"], "held");
    assert!(entry.get("holder_ended").is_none(), "{entry}");
    let table = s.cmd().arg("status").output().unwrap();
    assert!(
        !String::from_utf8_lossy(&table.stdout).contains("takes the lease over at once"),
        "{table:?}"
    );
    s.cmd()
        .args(["claim", "--lock", "x", "--wait", "0"])
        .assert()
        .code(3);
}

/// Issue 16: a SIGSTOPped holder is alive, so it is not taken over before its ttl.
#[test]
fn a_sigstopped_run_is_not_taken_over_early() {
    let s = Scratch::new();
    let (run, _child, token) = holding_run(&s, "x");
    send_signal(run.id(), "STOP");
    let output = s
        .cmd()
        .args(["claim", "--lock", "x", "--wait", "1500"])
        .output()
        .unwrap();
    send_signal(run.id(), "CONT");
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("gave up after"), "{stderr}");
    assert_eq!(s.entry("x").unwrap()["token"], token);
}

/// Issue 16: the off switch (flag or environment) keeps pure ttl semantics.
#[test]
fn the_off_switch_waits_out_the_ttl() {
    let s = Scratch::new();
    let (mut run, _child, _) = holding_run(&s, "x");
    run.kill_and_reap();
    s.cmd()
        .args(["claim", "--lock", "x", "--no-dead-holder-takeover"])
        .assert()
        .code(3);
    s.cmd()
        .env("FENCEPOST_NO_DEAD_HOLDER_TAKEOVER", "1")
        .args(["claim", "--lock", "x"])
        .assert()
        .code(3);
    // (A wait covers the guard's few milliseconds stopping the child's group.)
    s.cmd()
        .env("FENCEPOST_NO_DEAD_HOLDER_TAKEOVER", "false")
        .args(["claim", "--lock", "x", "--wait", "20000"])
        .assert()
        .code(0);
}

/// Issue 16: a plain `claim` lives until its ttl although its process exited at
/// once: its records carry no liveness evidence.
#[test]
fn a_plain_claim_is_never_taken_over_early() {
    let s = Scratch::new();
    s.claim("x", &["--owner", "alice"]);
    s.cmd().args(["claim", "--lock", "x"]).assert().code(3);
}

/// The newest record file of the only key in `s`'s store.
fn newest_record(s: &Scratch) -> std::path::PathBuf {
    let key = s.only_key_dir();
    let mut records: Vec<_> = std::fs::read_dir(&key)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    records.sort();
    records.pop().unwrap()
}

/// Issue 16: a dead holder's record naming another host id, or another boot, keeps
/// ttl semantics (never across hosts, never on doubt); the same record with this
/// host's evidence is taken over.
#[test]
fn evidence_from_another_host_or_boot_keeps_ttl_semantics() {
    let s = Scratch::new();
    let (mut hold, _) = holding_claim(&s, "x");
    hold.kill_and_reap();
    let path = newest_record(&s);
    let original = std::fs::read(&path).unwrap();
    let record: serde_json::Value = serde_json::from_slice(&original).unwrap();
    assert!(record["process"].is_object(), "no evidence in {record}");
    for (field, value) in [("host", "another-host pid:[1]"), ("boot", "another-boot")] {
        let mut planted = record.clone();
        planted["process"][field] = value.into();
        // Records are immutable in the protocol; the test rewrites one in place.
        std::fs::write(&path, serde_json::to_vec(&planted).unwrap()).unwrap();
        let output = s.cmd().args(["claim", "--lock", "x"]).output().unwrap();
        assert_eq!(output.status.code(), Some(3), "{field}: {output:?}");
    }
    // The record as written, with this host's evidence: a dead holder.
    std::fs::write(&path, &original).unwrap();
    s.cmd().args(["claim", "--lock", "x"]).assert().code(0);
}

/// Issue 16: a record naming a running process with its start time is a live
/// holder (held); with another start time the pid was reused, so the holder is
/// dead (taken over).
#[test]
fn a_reused_pid_is_a_dead_holder_and_a_live_pid_is_not() {
    let s = Scratch::new();
    let (mut hold, _) = holding_claim(&s, "x");
    hold.kill_and_reap();
    let path = newest_record(&s);
    let mut record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let sleeper = Background::spawn(std::process::Command::new("sleep").arg("30"));
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", sleeper.id())).unwrap();
    let start: u64 = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    assert!(running(sleeper.id()));
    record["process"]["pid"] = sleeper.id().into();
    record["process"]["start"] = start.into();
    std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
    s.cmd().args(["claim", "--lock", "x"]).assert().code(3);
    record["process"]["start"] = (start + 1).into();
    std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
    s.cmd().args(["claim", "--lock", "x"]).assert().code(0);
}

/// Issue 16: a lease renewed through its handle by another process no longer lives
/// and dies with the process that claimed it, so that process's death is no longer
/// a reason to take it over early.
#[test]
fn a_lease_renewed_elsewhere_is_not_taken_over_when_its_claimer_dies() {
    let s = Scratch::new();
    let (mut hold, handle) = s.hold("x", 60_000, false);
    s.cmd()
        .args(["renew", "--lock", "x", &handle])
        .assert()
        .code(0);
    hold.kill_and_reap();
    let output = s.cmd().args(["claim", "--lock", "x"]).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
}

/// Issue 16: the keeper's own renewals keep its evidence: a holder killed after
/// several renewals is still taken over at once.
#[test]
fn a_holder_killed_after_renewals_is_taken_over_at_once() {
    let s = Scratch::new();
    let (mut hold, _) = s.hold("x", 3000, false);
    let first = s.entry("x").unwrap()["generation"].as_u64().unwrap();
    wait_until("the hold renewed twice", Duration::from_secs(10), || {
        s.entry("x")
            .is_some_and(|e| e["generation"].as_u64().unwrap() >= first + 2)
    });
    hold.kill_and_reap();
    s.cmd().args(["claim", "--lock", "x"]).assert().code(0);
}

/// A `claim --hold` of the only slot, or of one of a set, SIGKILLed: the next
/// claim of the slot, or of the set, takes it over at once with a higher token, as
/// a claim of the one lock does. (Found by the breaker: the compositions' look
/// step counted a provably dead holder as in the way, so the slot and the set
/// were refused as "held by" the dead pid until its 60 s ttl ran out.)
#[test]
fn a_sigkilled_slot_or_set_member_holder_is_taken_over_at_once() {
    let s = Scratch::new();
    let mut slot = s.spawn_cmd();
    slot.args([
        "claim", "--lock", "pool", "--slots", "1", "--ttl", "60000", "--hold",
    ])
    .stdout(std::process::Stdio::piped());
    let mut slot = Background::spawn(&mut slot);
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(slot.0.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.starts_with("1 1."), "the first slot, token 1: {line}");
    let (mut member, dead) = holding_claim(&s, "a");
    slot.kill_and_reap();
    member.kill_and_reap();

    let output = s
        .cmd()
        .args(["claim", "--lock", "pool", "--slots", "1", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "slot not taken over: {output:?}"
    );
    let taken = json_of(&output);
    assert_eq!(taken["slot"], 1);
    assert!(taken["token"].as_u64().unwrap() > 1, "{taken}");

    let output = s
        .cmd()
        .args(["claim", "--lock", "a", "--lock", "b"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "set not taken over: {output:?}"
    );
    let first = String::from_utf8_lossy(&output.stdout);
    let token: u64 = first.split('.').next().unwrap().trim().parse().unwrap();
    assert!(token > dead, "a's token went from {dead} to {token}");
    s.cmd()
        .args(["check", "--lock", "a", &dead.to_string()])
        .assert()
        .code(3);
}

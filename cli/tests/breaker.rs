//! Adversarial regressions: holes found by attacking `run` and the store location
//! rule with real processes and signals, each pinned here.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::loss::{read_pid, running};
use crate::util::{Background, PidFileGuard, Scratch, send_signal, wait_until};

/// Waits until `run` (pid) has forked its guard: two children, the command and the
/// guard. (The guard is forked just after the command starts; a signal in between
/// finds no guard — a window of a few system calls, stated in design-01.)
fn wait_for_guard(run: u32) {
    wait_until("run forked its guard", Duration::from_secs(10), || {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{run}/task")) else {
            return false;
        };
        let children: usize = tasks
            .flatten()
            .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
            .map(|list| list.split_whitespace().count())
            .sum();
        children >= 2
    });
}

/// `run` killed with SIGKILL cannot stop its child itself, and its lease is taken
/// over at once by a waiter on this host (dead-holder takeover). Its guard stops the
/// child's whole group instead, with the --on-loss policy: SIGTERM, then SIGKILL
/// after --grace for a child (and a grandchild) that ignore SIGTERM.
#[test]
fn a_killed_run_does_not_leave_its_child_writing() {
    let s = Scratch::new();
    let _child = PidFileGuard(s.path().join("child"));
    let _grandchild = PidFileGuard(s.path().join("gc"));
    let mut run = s.spawn_cmd();
    run.args([
        "run", "--lock", "x", "--ttl", "60000", "--grace", "500", "--",
    ])
    .args(["sh", "-c"])
    .arg(
        r#"trap "" TERM
            sh -c 'trap "" TERM; echo $$ > gc.tmp && mv gc.tmp gc; exec sleep 60' &
            echo $$ > child.tmp && mv child.tmp child
            while :; do echo "$FENCEPOST_TOKEN" >> out; sleep 0.05; done"#,
    )
    .stderr(Stdio::piped());
    let mut holder = Background::spawn(&mut run);
    let child = read_pid(&s.path().join("child"));
    let grandchild = read_pid(&s.path().join("gc"));
    wait_for_guard(holder.id());

    holder.kill_and_reap();
    wait_until(
        "the killed run's child and grandchild are gone",
        Duration::from_secs(15),
        || !running(child) && !running(grandchild),
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut holder.0.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("ended without releasing its lease"),
        "the guard says why it stops the command: {stderr:?}"
    );
    // Nothing writes any more.
    let written = std::fs::read_to_string(s.path().join("out")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        std::fs::read_to_string(s.path().join("out")).unwrap(),
        written
    );
}

/// The same with `run`'s stderr a pipe nobody reads, filled by the command: the
/// guard stops the command first and writes its line only if stderr takes it now
/// (a breaker: the guard blocked on its line, and the orphaned command ran on
/// beside the rival that took the lease at its ttl).
#[test]
fn a_killed_runs_guard_stops_the_command_even_when_stderr_is_full() {
    let s = Scratch::new();
    let _child = PidFileGuard(s.path().join("child"));
    let mut run = s.spawn_cmd();
    run.args([
        "run", "--lock", "x", "--ttl", "60000", "--grace", "500", "--",
    ])
    .args(["sh", "-c"])
    .arg(
        r#"head -c 200000 /dev/zero >&2 &
            echo $$ > child.tmp && mv child.tmp child
            while :; do echo x >> out; sleep 0.05; done"#,
    )
    // A pipe nobody reads.
    .stderr(Stdio::piped());
    let mut holder = Background::spawn(&mut run);
    let child = read_pid(&s.path().join("child"));
    wait_for_guard(holder.id());
    // The command has filled the pipe by now.
    std::thread::sleep(Duration::from_millis(300));
    holder.kill_and_reap();
    wait_until(
        "the killed run's command is gone",
        Duration::from_secs(15),
        || !running(child),
    );
}

/// The guard stands down when `run` ends normally: the child's group is not
/// signalled. A process the child left running in its group is neither stopped nor
/// left holding nothing: `run` keeps the lease until it ends (it may still write;
/// a breaker: a rival got the lease while it ran), then releases and exits with
/// the child's code.
#[test]
fn a_run_that_ends_normally_leaves_no_guard_and_spares_what_the_child_left() {
    let s = Scratch::new();
    let _left = PidFileGuard(s.path().join("left"));
    let started = Instant::now();
    // The child leaves a process of its own group behind (`&` without wait).
    let output = s
        .cmd()
        .args(["run", "--lock", "x", "--", "sh", "-c"])
        .arg(r#"sh -c 'echo $$ > left.tmp && mv left.tmp left; sleep 2; echo done > finished' >/dev/null 2>&1 & exit 7"#)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(7), "{output:?}");
    assert!(
        s.path().join("finished").exists(),
        "what the child left was stopped, or run ended before it: {output:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(1900));
    let left = read_pid(&s.path().join("left"));
    assert!(!running(left));
    assert_eq!(s.entry("x").unwrap()["state"], "released");
}

/// `run` stopped (SIGSTOP) past its ttl cannot renew, so a rival takes the lease —
/// and before the guard, its child went on writing until `run` was continued. Now
/// the guard stops the child's group soon after the lease expired (never while it
/// is still valid), the rival holds, the old token fails, and `run` exits 3 once
/// continued.
#[test]
fn a_stopped_run_does_not_leave_its_child_writing_after_its_ttl() {
    let s = Scratch::new();
    let _child = PidFileGuard(s.path().join("child"));
    let mut run = s.spawn_cmd();
    run.args([
        "run", "--lock", "x", "--ttl", "1000", "--grace", "500", "--",
    ])
    .args(["sh", "-c"])
    .arg(
        r#"echo $$ > child.tmp && mv child.tmp child
            while :; do echo "$FENCEPOST_TOKEN" >> out; sleep 0.05; done"#,
    )
    .stderr(Stdio::piped());
    let mut holder = Background::spawn(&mut run);
    let child = read_pid(&s.path().join("child"));
    let token = s.entry("x").unwrap()["token"].as_u64().unwrap();
    wait_for_guard(holder.id());

    send_signal(holder.id(), "STOP");
    let stopped = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    // Its lease was renewed at most ttl/3 before the stop: still valid, so the child
    // still runs.
    assert!(
        running(child) || stopped.elapsed() > Duration::from_millis(600),
        "the child was stopped while its lease was still valid"
    );
    wait_until(
        "the stopped run's child is gone",
        Duration::from_secs(15),
        || !running(child),
    );
    // A rival gets the lease (at once or after its expiry), with a higher token.
    let rival = s.claim("x", &["--wait", "10000", "--owner", "rival"]);
    assert!(rival > token);
    s.cmd()
        .args(["check", "--lock", "x", &token.to_string()])
        .assert()
        .code(3);

    send_signal(holder.id(), "CONT");
    let status = holder.0.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut holder.0.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("was not heard from for 1.5 x its ttl (stopped, or starved of CPU"),
        "{stderr:?}"
    );
}

/// A pause shorter than the ttl is no loss: the guard leaves the child alone and
/// `run` ends with the child's own code.
#[test]
fn a_run_stopped_briefly_keeps_its_child() {
    let s = Scratch::new();
    let mut run = s.spawn_cmd();
    run.args(["run", "--lock", "x", "--ttl", "4000", "--"])
        .args(["sh", "-c", "touch started; sleep 2; exit 5"]);
    let mut holder = Background::spawn(&mut run);
    wait_until("the child started", Duration::from_secs(10), || {
        s.path().join("started").exists()
    });
    send_signal(holder.id(), "STOP");
    std::thread::sleep(Duration::from_millis(1500));
    send_signal(holder.id(), "CONT");
    assert_eq!(holder.0.wait().unwrap().code(), Some(5));
}

/// Unmounts a loop-mounted filesystem when the test ends, even when it fails.
struct LoopMount(std::path::PathBuf);

impl Drop for LoopMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// A breaker (2026-12-07): on journaled ext4 an editor's save (a temporary file
/// renamed over the original) often gets the inode of a file deleted a moment
/// before. When that file had been claimed, the saved file took over its file-id
/// series and its history: another session's released record there fenced the
/// tenure, and the session that held the file was refused its own file ("held by"
/// itself, a human asked to break it) until the ttl. The file id now carries the
/// file's birth time (`fencepost/src/identity/sys/unix.rs`). Makes a journaled
/// ext4 on a loop device: needs root and mkfs.ext4 (CI has both).
#[test]
fn an_editor_save_onto_a_deleted_files_inode_keeps_the_session_its_file() {
    let s = Scratch::new();
    let image = s.path().join("ext4.img");
    std::fs::File::create(&image)
        .and_then(|f| f.set_len(16 << 20))
        .unwrap();
    let made = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&image)
        .status()
        .expect("running mkfs.ext4 (apt-get install e2fsprogs)");
    assert!(made.success(), "mkfs.ext4 failed on {}", image.display());
    let mount_point = s.path().join("ext4");
    std::fs::create_dir(&mount_point).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-o", "loop"])
        .arg(&image)
        .arg(&mount_point)
        .status()
        .expect("running mount");
    assert!(
        mounted.success(),
        "this test loop-mounts a journaled ext4 and needs root (CI runs as root)"
    );
    let _mount = LoopMount(mount_point.clone());
    // The store stays outside: its own files would take the freed inode.
    let work = mount_point.join("work");
    std::fs::create_dir(&work).unwrap();
    let (a, b) = (work.join("a.txt"), work.join("b.txt"));
    std::fs::write(&a, "a").unwrap();
    std::fs::write(&b, "b").unwrap();
    let claim = |path: &std::path::Path, session: &str| {
        s.cmd()
            .args(["claim", "--ttl", "600000", "--session", session, "--file"])
            .arg(path)
            .output()
            .unwrap()
    };
    let other = claim(&b, "X");
    assert_eq!(other.status.code(), Some(0), "{other:?}");
    let released = s
        .cmd()
        .args(["release", "--file"])
        .arg(&b)
        .arg(crate::util::handle_of(&other))
        .output()
        .unwrap();
    assert_eq!(released.status.code(), Some(0), "{released:?}");
    let first = claim(&a, "S");
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    // The save: b.txt deleted, a temporary file renamed over a.txt.
    use std::os::unix::fs::MetadataExt;
    let b_inode = std::fs::metadata(&b).unwrap().ino();
    std::fs::remove_file(&b).unwrap();
    let tmp = work.join(".a.txt.swp");
    std::fs::write(&tmp, "a, edited").unwrap();
    assert_eq!(
        std::fs::metadata(&tmp).unwrap().ino(),
        b_inode,
        "the precondition: ext4 gave the temporary file b.txt's inode"
    );
    std::fs::rename(&tmp, &a).unwrap();
    let again = claim(&a, "S");
    assert_eq!(
        again.status.code(),
        Some(0),
        "the session was refused its own file after a save: {again:?}"
    );
    assert_eq!(
        crate::util::token_of(&again),
        crate::util::token_of(&first),
        "{again:?}"
    );
    // Still the session's, through the new file id too.
    std::fs::hard_link(&a, work.join("link.txt")).unwrap();
    let rival = claim(&work.join("link.txt"), "Y");
    assert_eq!(rival.status.code(), Some(3), "{rival:?}");
}

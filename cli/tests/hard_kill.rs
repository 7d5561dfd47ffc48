//! With dead-holder takeover switched off, a hard-killed holder blocks until its
//! ttl, no longer, and its token never passes again (docs/protocol.md I3). (With it on, the
//! default, see takeover.rs.)

use std::time::Duration;

use crate::util::{Background, Scratch, StopFile, child_bin, json_of, wait_until};

#[test]
fn a_killed_run_blocks_until_its_ttl_and_its_token_is_dead() {
    let s = Scratch::new();
    let pidfile = s.path().join("pidfile");
    // The child outlives the killed run; it ends when `stop` appears.
    let orphan = StopFile(s.path().join("stop"));
    let mut run = s.spawn_cmd();
    run.args(["run", "--lock", "x", "--ttl", "4000", "--"])
        .arg(child_bin())
        .args(["pid=pidfile", "wait-for=stop"]);
    let mut holder = Background::spawn(&mut run);

    wait_until("the child started", Duration::from_secs(10), || {
        pidfile.exists()
    });
    let token = s.wait_held("x");

    // SIGKILL (TerminateProcess on Windows): no release, no more renewals. Its
    // child is orphaned; stop it too.
    holder.kill_and_reap();
    drop(orphan);

    // The dead lease, as its last record left it.
    let dead = s.entry("x").unwrap();
    assert_eq!(dead["token"], token);
    let dead_expires = dead["expires_at_ms"].as_u64().unwrap();

    // Nobody may take it before its ttl. A claim refused (3) proves it was still
    // in the way; a claim granted proves nothing unless the dead lease had expired
    // by then, which a loaded machine (or Wine, where every spawn is slow) may
    // take as long as the ttl to reach. Windows records no process evidence
    // (fencepost/src/liveness/sys/windows.rs), so there even the default, with
    // dead-holder takeover on, keeps the ttl.
    let mut tries: Vec<&[&str]> = vec![&["--no-dead-holder-takeover"]];
    if cfg!(windows) {
        tries.insert(0, &[]);
    }
    let mut successor = None;
    for extra in tries {
        let output = s
            .cmd()
            .args(["claim", "--lock", "x", "--wait", "0", "--json"])
            .args(extra)
            .output()
            .unwrap();
        match output.status.code() {
            Some(3) => {
                let stderr = String::from_utf8_lossy(&output.stderr);
                assert!(
                    stderr.contains(&format!("token {token})")),
                    "{extra:?}: not refused for the dead holder: {stderr}"
                );
            }
            Some(0) => {
                successor = Some(json_of(&output));
                break;
            }
            _ => panic!("{extra:?}: {output:?}"),
        }
    }

    // Waiting gets it, with a larger token, and not before the dead lease expired.
    let successor = successor.unwrap_or_else(|| {
        let output = s
            .cmd()
            .args(["claim", "--lock", "x", "--wait", "20000", "--json"])
            .arg("--no-dead-holder-takeover")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        json_of(&output)
    });
    assert!(successor["token"].as_u64().unwrap() > token);
    let granted = successor["granted_at_ms"].as_u64().unwrap();
    assert!(
        granted >= dead_expires,
        "taken over at {granted} ms, before the dead lease expired at {dead_expires} ms"
    );

    // The dead holder's token never passes again.
    s.cmd()
        .args(["check", "--lock", "x", &token.to_string()])
        .assert()
        .code(3);
}

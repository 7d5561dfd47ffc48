//! Real processes contending for one lock through `fencepost run` (docs/protocol.md §3, §7):
//! N workers × M rounds, then the exact count (the arrow-rs object_store oracle).

use std::process::Stdio;

use crate::util::{Background, Scratch, child_bin};

const WORKERS: usize = 8;
const ROUNDS: usize = 6;

/// The critical section each `run` child executes (`fencepost-test-child
/// critical=log`): it creates the `busy` marker exclusively, so two children inside
/// at once make one fail; checks its token from inside; appends it to the shared log.
const CRITICAL_SECTION: &str = "critical=log";

#[test]
fn processes_take_turns_with_strictly_increasing_tokens() {
    let s = Scratch::new();
    let workers: Vec<Background> = (0..WORKERS)
        .map(|_| {
            // Each worker: ROUNDS sequential runs; exits with the number that failed.
            let mut worker = crate::util::scrubbed(std::process::Command::new(child_bin()));
            worker
                .arg(format!("repeat={ROUNDS}"))
                .args([
                    "--", "run", "--lock", "x", "--wait", "60000", "--ttl", "5000", "--",
                ])
                .arg(child_bin())
                .arg(CRITICAL_SECTION)
                .current_dir(s.path())
                .env("FP", crate::util::bin())
                .env("FENCEPOST_STORE", s.store())
                .env_remove("FENCEPOST_OWNER")
                .stderr(Stdio::piped());
            Background::spawn(&mut worker)
        })
        .collect();
    for worker in workers {
        let output = {
            let mut worker = worker;
            let stderr = worker.0.stderr.take();
            let status = worker.0.wait().unwrap();
            let mut text = String::new();
            if let Some(mut stderr) = stderr {
                std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
            }
            (status, text)
        };
        assert_eq!(output.0.code(), Some(0), "a worker failed: {}", output.1);
    }

    let log = std::fs::read_to_string(s.path().join("log")).unwrap();
    let tokens: Vec<u64> = log.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(tokens.len(), WORKERS * ROUNDS, "log:\n{log}");
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens not strictly increasing: {tokens:?}"
    );
    assert!(!s.path().join("busy").exists());
}

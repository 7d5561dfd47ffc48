//! The model check must find planted protocol bugs within its default budget, with a
//! replayable seed. Each bug is planted through a test-only switch (feature
//! `planted-bugs` of the core) in this binary only, one test at a time.

mod model;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn finds(switch: &AtomicBool, expected: &str) {
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    switch.store(true, Ordering::SeqCst);
    let outcome = model::explore(1, 20, 500);
    switch.store(false, Ordering::SeqCst);
    let report = outcome.expect_err("the planted bug went unnoticed by the model check");
    assert!(report.contains(expected), "unexpected report: {report}");
    // The printed seed replays to the same failure.
    let seed: u64 = report.split_whitespace().nth(1).unwrap().parse().unwrap();
    switch.store(true, Ordering::SeqCst);
    let again = model::replay(&model::generate(seed, 500));
    switch.store(false, Ordering::SeqCst);
    assert!(again.is_err(), "seed {seed} did not replay the failure");
    eprintln!("{report}");
}

#[test]
fn finds_a_release_that_sweeps_the_newest() {
    finds(&fencepost::planted::RELEASE_SWEEPS_NEWEST, "fails at step");
}

#[test]
fn finds_a_proof_of_holding_that_is_not_checked() {
    finds(&fencepost::planted::PROOF_IGNORED, "forged secret");
}

#[test]
fn finds_a_break_whose_tombstone_a_power_cut_can_drop() {
    finds(&fencepost::planted::BREAK_UNFLUSHED, "passes check again");
}

#[test]
fn finds_a_liveness_rule_that_ignores_backwards_clocks() {
    finds(
        &fencepost::planted::LIVENESS_IGNORES_BACKWARDS_CLOCK,
        "live by its own clock",
    );
}

//! The dead-holder takeover scenario must catch a takeover that trusts evidence
//! from another host or boot (planted through the core's `planted-bugs` switch, in
//! this binary only), while the honest protocol passes it.

use std::sync::atomic::Ordering;

use fencepost_conformance::{Backend, run_scenario};
use fencepost_memory::MemoryStore;

#[test]
fn a_takeover_that_ignores_the_host_is_caught() {
    let backend = Backend::in_process("memory", MemoryStore::new);
    let scenario = "takeover_needs_same_host_and_a_definite_death";
    assert_eq!(
        run_scenario(&backend, scenario).map_err(|f| format!("{f:?}")),
        Ok(true)
    );
    fencepost::planted::TAKEOVER_IGNORES_HOST.store(true, Ordering::SeqCst);
    let planted = run_scenario(&backend, scenario);
    fencepost::planted::TAKEOVER_IGNORES_HOST.store(false, Ordering::SeqCst);
    let report = format!("{:?}", planted.expect_err("the planted bug went unnoticed"));
    assert!(
        report.contains("another host: taken over before its ttl"),
        "{report}"
    );
}

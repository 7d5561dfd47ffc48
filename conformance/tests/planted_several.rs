//! The all-or-nothing scenario must catch a claim of several resources that lets a
//! subtree and a path inside it into one set (planted through the core's
//! `planted-bugs` switch, in this binary only), while the honest protocol passes
//! it.

use std::sync::atomic::Ordering;

use fencepost_conformance::{Backend, run_scenario};
use fencepost_memory::MemoryStore;

#[test]
fn a_nested_set_let_through_is_caught() {
    let backend = Backend::in_process("memory", MemoryStore::new);
    let scenario = "several_resources_all_or_nothing";
    assert_eq!(
        run_scenario(&backend, scenario).map_err(|f| format!("{f:?}")),
        Ok(true)
    );
    fencepost::planted::SEVERAL_NESTED_UNCHECKED.store(true, Ordering::SeqCst);
    let planted = run_scenario(&backend, scenario);
    fencepost::planted::SEVERAL_NESTED_UNCHECKED.store(false, Ordering::SeqCst);
    let report = format!("{:?}", planted.expect_err("the planted bug went unnoticed"));
    assert!(
        report.contains("a subtree and a file inside it was not refused"),
        "{report}"
    );
}

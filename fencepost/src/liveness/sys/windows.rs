//! Windows: no evidence yet, so leases keep plain ttl semantics.
//!
//! A process's creation time (`GetProcessTimes`) would serve as its start time, but
//! Windows offers no per-boot random id through the standard library, and the core
//! takes no Windows API crate; without a boot id two machines cloned from one image
//! could not be told apart, so nothing here claims to know.

use super::super::{ProcessEvidence, Verdict};

/// No evidence on this platform yet.
pub(crate) fn this_process() -> Option<ProcessEvidence> {
    None
}

/// Always unknown on this platform.
pub(crate) fn verdict(_evidence: &ProcessEvidence) -> Verdict {
    Verdict::Unknown
}

/// Never known on this platform.
pub(crate) fn surely_gone(_evidence: &ProcessEvidence) -> bool {
    false
}

/// Always unknown on this platform.
pub(crate) fn group_verdict(_group: u32) -> Verdict {
    Verdict::Unknown
}

/// Unknown on this platform.
#[allow(dead_code)] // used by the tests
pub(crate) fn start_of(_pid: u32) -> Option<u64> {
    None
}

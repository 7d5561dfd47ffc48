//! Platforms without a supported process table (macOS, the BSDs, …): no evidence is
//! written and every verdict is unknown, so leases keep plain ttl semantics.

use super::super::{ProcessEvidence, Verdict};

/// No evidence on this platform.
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

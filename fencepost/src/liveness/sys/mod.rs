//! Platform parts of liveness evidence, one module per platform family with
//! identical signatures: `this_process() -> Option<ProcessEvidence>`,
//! `verdict(&ProcessEvidence) -> Verdict`, `surely_gone(&ProcessEvidence) -> bool`,
//! `group_verdict(group) -> Verdict` and `start_of(pid) -> Option<u64>`.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
#[allow(unused_imports)]
pub(crate) use linux::{group_verdict, start_of, surely_gone, this_process, verdict};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
#[allow(unused_imports)]
pub(crate) use windows::{group_verdict, start_of, surely_gone, this_process, verdict};

#[cfg(not(any(target_os = "linux", windows)))]
mod other;
#[cfg(not(any(target_os = "linux", windows)))]
#[allow(unused_imports)]
pub(crate) use other::{group_verdict, start_of, surely_gone, this_process, verdict};

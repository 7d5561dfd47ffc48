//! Liveness evidence: what proves, on the writer's host, that a tenure's process
//! still runs, so a same-host waiter can take over a provably dead holder before its
//! ttl ("dead-holder takeover", `docs/design-01-lease-and-fence.md`).
//!
//! A record written by a process that keeps its own lease alive (`fencepost run`,
//! `claim --hold`, the MCP server, a library [`crate::Keepalive`]) carries
//! [`ProcessEvidence`]: host id, boot id, pid and process start time. A waiter whose
//! own evidence names the same host and the same boot asks its [`Liveness`] probe
//! whether that process still runs. Only a definite [`Verdict::Gone`] frees the
//! record early; every doubt ([`Verdict::Unknown`], another host, another boot, no
//! evidence) leaves plain ttl semantics.
//!
//! Taking over early is safe only because of the fence: should the verdict ever be
//! wrong, the "dead" holder's token is superseded and refused by every
//! [`crate::Store::check`], exactly as after a ttl expiry.

use std::fmt::Debug;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

mod sys;

/// What identifies one running process across the processes sharing a store.
///
/// Two pieces of evidence name the same *host* only when both `host` and `boot`
/// are equal: `host` is the machine id qualified by the pid namespace (pids mean
/// nothing across namespaces, and containers may share a machine id), `boot` is the
/// kernel's random per-boot id. A different boot is treated as doubt, not as
/// death: it cannot be told apart from a cloned machine that kept its machine id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessEvidence {
    /// The machine id (or host name) plus the pid namespace.
    pub host: String,
    /// The boot id of the running kernel.
    pub boot: String,
    /// The process id, as seen in that pid namespace.
    pub pid: u32,
    /// The process start time in the platform's own unit (clock ticks since boot
    /// on Linux): a reused pid has another start time.
    pub start: u64,
    /// A process group whose members keep the holder alive too, on Unix: the group
    /// of the command `fencepost run` runs, which may outlive `run` (killed) until
    /// its guard has stopped it. The holder is gone only once the process is and no
    /// process is left in the group ([`Liveness::group_verdict`]). `None`: the
    /// process alone. [`ProcessEvidence::GROUP_TO_COME`]: a group not named yet.
    /// Absent from records that carry none (docs/format-v1.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
}

impl ProcessEvidence {
    /// The [`ProcessEvidence::group`] of a holder that is starting a command in a
    /// group of its own and has not named it yet
    /// ([`crate::AcquireOptions::group_to_come`]): no process proves such a holder
    /// gone, so it keeps plain ttl semantics. 0 is no process group's id on any
    /// Unix; a reader that predates it asks `kill(0, 0)`, which finds its own
    /// group, so it too never takes such a holder over early.
    pub const GROUP_TO_COME: u32 = 0;
}

/// Whether the process named by some evidence still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It runs (or a process with its pid and start time does).
    Running,
    /// It provably no longer runs: no process has its pid, the pid's process has
    /// another start time, or it is a zombie.
    Gone,
    /// Cannot tell (permissions, an unreadable process table, an unsupported
    /// platform). Treated as running.
    Unknown,
}

/// The probe the protocol consults for dead-holder takeover. Tests and model checks
/// inject their own; [`SystemLiveness`] asks the operating system.
pub trait Liveness: Send + Sync + Debug {
    /// Evidence naming this process, or `None` where the platform cannot give it
    /// (records then carry none, and nobody takes this process's leases early).
    fn this_process(&self) -> Option<ProcessEvidence>;
    /// Whether the process named by `evidence` (already known to be on this host,
    /// in this boot) still runs.
    fn verdict(&self, evidence: &ProcessEvidence) -> Verdict;

    /// Whether the process named by `evidence` (on this host, in this boot) has
    /// certainly ended, by the cheapest check the platform has; `false` when in
    /// doubt. For decisions where a wrong "still running" costs only time (whom a
    /// release names next, docs/design-07-performance.md, "A ticket outlives its
    /// tenure"), never for a takeover. The default asks [`Liveness::verdict`];
    /// [`SystemLiveness`] makes one `kill(pid, 0)` on Linux.
    fn surely_gone(&self, evidence: &ProcessEvidence) -> bool {
        self.verdict(evidence) == Verdict::Gone
    }

    /// Whether any process is left in process group `group` on this host
    /// ([`ProcessEvidence::group`]): `Gone` only when certainly none is. The default
    /// cannot tell ([`Verdict::Unknown`]: a holder with a group is never taken over
    /// early); [`SystemLiveness`] asks `kill(-group, 0)` on Linux.
    fn group_verdict(&self, group: u32) -> Verdict {
        let _ = group;
        Verdict::Unknown
    }
}

/// The operating system's answer: `/proc` and `kill(pid, 0)` on Linux. Elsewhere
/// (other Unixes, Windows) no evidence is given yet, so leases keep ttl semantics.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLiveness;

impl Liveness for SystemLiveness {
    fn this_process(&self) -> Option<ProcessEvidence> {
        static THIS: OnceLock<Option<ProcessEvidence>> = OnceLock::new();
        let mut evidence = THIS.get_or_init(sys::this_process).clone()?;
        // A forked child that reuses the cache must not claim its parent's identity.
        if evidence.pid != std::process::id() {
            evidence = sys::this_process()?;
        }
        Some(evidence)
    }

    fn verdict(&self, evidence: &ProcessEvidence) -> Verdict {
        sys::verdict(evidence)
    }

    fn surely_gone(&self, evidence: &ProcessEvidence) -> bool {
        sys::surely_gone(evidence)
    }

    fn group_verdict(&self, group: u32) -> Verdict {
        sys::group_verdict(group)
    }
}

/// True when `evidence` names a process on the same host and boot as `ours`.
pub(crate) fn same_host(evidence: &ProcessEvidence, ours: &ProcessEvidence) -> bool {
    #[cfg(feature = "planted-bugs")]
    if crate::planted::on(&crate::planted::TAKEOVER_IGNORES_HOST) {
        return true;
    }
    evidence.host == ours.host && evidence.boot == ours.boot
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_running_and_a_reused_pid_is_gone() {
        let Some(me) = SystemLiveness.this_process() else {
            // Platforms without evidence: nothing to take over early.
            return;
        };
        assert_eq!(me.pid, std::process::id());
        assert_eq!(SystemLiveness.verdict(&me), Verdict::Running);
        let reused = ProcessEvidence {
            start: me.start + 1,
            ..me.clone()
        };
        assert_eq!(SystemLiveness.verdict(&reused), Verdict::Gone);
    }

    #[test]
    fn a_reaped_child_is_gone_and_a_zombie_too() {
        if SystemLiveness.this_process().is_none() {
            return;
        }
        let me = SystemLiveness.this_process().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let start = sys::start_of(pid).expect("start time of a running child");
        let evidence = ProcessEvidence { pid, start, ..me };
        assert_eq!(SystemLiveness.verdict(&evidence), Verdict::Running);
        child.kill().unwrap();
        // Not reaped yet: a zombie cannot renew, so it is gone.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while SystemLiveness.verdict(&evidence) != Verdict::Gone {
            assert!(
                std::time::Instant::now() < deadline,
                "the zombie still counts as running"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.wait().unwrap();
        assert_eq!(SystemLiveness.verdict(&evidence), Verdict::Gone);
    }
}

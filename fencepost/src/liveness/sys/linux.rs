//! Linux: evidence from `/proc`, verdicts from `kill(pid, 0)` and `/proc/<pid>/stat`.
//!
//! Every step that cannot be read with certainty gives no evidence or an unknown
//! verdict, never "gone":
//! - `kill(pid, 0)` decides existence (it sees through `hidepid`, which hides other
//!   users' `/proc` entries): only `ESRCH` means no such process.
//! - An existing pid is gone only if its `/proc` entry is readable and shows another
//!   start time (the pid was reused) or a zombie (it exited and can never renew).
//! - Our own evidence is given only when `/proc` belongs to our pid namespace
//!   (`/proc/self/stat` names our own pid).

use super::super::{ProcessEvidence, Verdict};

/// Evidence for this process, or `None` when any part is unreadable.
pub(crate) fn this_process() -> Option<ProcessEvidence> {
    let pid = std::process::id();
    let (stat_pid, _, start) = parse_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
    if stat_pid != pid {
        return None;
    }
    let machine = ["/etc/machine-id", "/var/lib/dbus/machine-id"]
        .iter()
        .find_map(|path| read_trimmed(path))
        .or_else(|| read_trimmed("/proc/sys/kernel/hostname"))?;
    let namespace = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let boot = read_trimmed("/proc/sys/kernel/random/boot_id")?;
    Some(ProcessEvidence {
        host: format!("{machine} {}", namespace.to_string_lossy()),
        boot,
        pid,
        start,
        group: None,
    })
}

/// Whether the process `evidence` names still runs (same host and boot assumed).
pub(crate) fn verdict(evidence: &ProcessEvidence) -> Verdict {
    let Ok(pid) = libc::pid_t::try_from(evidence.pid) else {
        return Verdict::Unknown;
    };
    if pid <= 0 {
        return Verdict::Unknown;
    }
    // SAFETY: kill(2) with signal 0 sends nothing; it only checks that the pid (a
    // positive number: one process, never a group) exists.
    let exists = unsafe { libc::kill(pid, 0) } == 0;
    if !exists {
        return match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ESRCH) => Verdict::Gone,
            // EPERM: it exists, owned by someone else. Anything else: doubt.
            _ => stat_verdict(evidence).unwrap_or(Verdict::Unknown),
        };
    }
    stat_verdict(evidence).unwrap_or(Verdict::Unknown)
}

/// Whether no process has `evidence`'s pid (`kill(pid, 0)` says `ESRCH`): one
/// system call, and certain; a pid that exists (perhaps reused) says nothing.
pub(crate) fn surely_gone(evidence: &ProcessEvidence) -> bool {
    let Ok(pid) = libc::pid_t::try_from(evidence.pid) else {
        return false;
    };
    // SAFETY: as in `verdict`: signal 0 to one positive pid sends nothing.
    pid > 0
        && unsafe { libc::kill(pid, 0) } != 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Whether any process is left in process group `group`: `kill(-group, 0)`, which
/// only `ESRCH` answers "none" (`EPERM`: one exists, owned by someone else).
pub(crate) fn group_verdict(group: u32) -> Verdict {
    let Ok(group) = libc::pid_t::try_from(group) else {
        return Verdict::Unknown;
    };
    if group <= 1 {
        return Verdict::Unknown;
    }
    // SAFETY: kill(2) with signal 0 sends nothing; a negative pid names a group.
    if unsafe { libc::kill(-group, 0) } != 0 {
        return match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ESRCH) => Verdict::Gone,
            Some(libc::EPERM) => Verdict::Running,
            _ => Verdict::Unknown,
        };
    }
    // Some process has the group, perhaps only zombies: an orphaned command is
    // reaped by init, which may take its time (seconds here), and a zombie writes
    // nothing. Gone when every member `/proc` shows is one; a member it does not
    // show (another user's, under `hidepid`) leaves it unknown.
    members_verdict(group)
}

/// The verdict from the members of `group` that `/proc` lists: `Running` when one
/// runs, `Gone` when some are listed and all are zombies, else `Unknown`.
fn members_verdict(group: libc::pid_t) -> Verdict {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Verdict::Unknown;
    };
    let mut zombies = false;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((state, pgrp)) = parse_group(&text) else {
            continue;
        };
        if pgrp != group {
            continue;
        }
        if matches!(state, 'Z' | 'X' | 'x') {
            zombies = true;
        } else {
            return Verdict::Running;
        }
    }
    if zombies {
        Verdict::Gone
    } else {
        Verdict::Unknown
    }
}

/// (state, process group) from a `/proc/<pid>/stat` line: fields 3 and 5, counted
/// after the last `)` as in [`parse_stat`].
fn parse_group(text: &str) -> Option<(char, libc::pid_t)> {
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let pgrp = fields.nth(1)?.parse().ok()?;
    Some((state, pgrp))
}

/// The verdict from `/proc/<pid>/stat`, or `None` when it cannot be read (hidden,
/// or vanished between the two looks: the next round decides).
fn stat_verdict(evidence: &ProcessEvidence) -> Option<Verdict> {
    let text = std::fs::read_to_string(format!("/proc/{}/stat", evidence.pid)).ok()?;
    let (_, state, start) = parse_stat(&text)?;
    Some(
        if start != evidence.start || matches!(state, 'Z' | 'X' | 'x') {
            Verdict::Gone
        } else {
            Verdict::Running
        },
    )
}

/// The start time of process `pid` (clock ticks since boot).
#[allow(dead_code)] // used by the tests
pub(crate) fn start_of(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text).map(|(_, _, start)| start)
}

/// (pid, state, start time) from a `/proc/<pid>/stat` line. The command name (field
/// 2) may contain spaces and parentheses, so fields are counted after the last `)`.
fn parse_stat(text: &str) -> Option<(u32, char, u64)> {
    let (head, rest) = text.rsplit_once(')')?;
    let pid = head.split_once(' ')?.0.trim().parse().ok()?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // After the state (field 3) come fields 4..; the start time is field 22.
    let start = fields.nth(18)?.parse().ok()?;
    Some((pid, state, start))
}

fn read_trimmed(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::{parse_stat, surely_gone, this_process};

    /// `surely_gone` says so only for a pid no process has: a reaped child's (no
    /// other process took its pid meanwhile: checked), never this process's.
    #[test]
    fn only_a_pid_nobody_has_is_surely_gone() {
        let ours = this_process().expect("evidence of this process");
        assert!(!surely_gone(&ours));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let reaped = super::super::super::ProcessEvidence { pid, ..ours };
        // SAFETY: signal 0 sends nothing; it asks whether the pid exists.
        let taken_again = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
        assert_eq!(surely_gone(&reaped), !taken_again);
        let nobody = super::super::super::ProcessEvidence { pid: 0, ..reaped };
        assert!(
            !surely_gone(&nobody),
            "pid 0 is a process group, never asked"
        );
    }

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let line = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_stat(line), Some((4242, 'S', 987654)));
        assert_eq!(parse_stat("garbage"), None);
    }
}

//! Machine facts, gathered at run time: nothing in the report is typed by hand.

use std::path::Path;
use std::process::Command;

/// What the report says about where it ran.
#[derive(Debug)]
pub struct Machine {
    pub cpu: String,
    pub cores: String,
    pub kernel: String,
    pub filesystem: String,
    /// The bench directory's mount: type, source and the filesystem's own options,
    /// from `/proc/self/mountinfo` (Linux), e.g. whether it discards online.
    pub mount: Mount,
    pub rustc: String,
    pub date: String,
    pub commit: String,
    /// `/proc/loadavg`'s 1, 5 and 15 minute load averages when the run started.
    pub load: String,
}

/// The load averages now (1, 5, 15 min), from `/proc/loadavg`.
pub fn load_now() -> String {
    match std::fs::read_to_string("/proc/loadavg") {
        Ok(text) => text
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => format!("unknown (/proc/loadavg: {e})"),
    }
}

/// Stdout of `program args`, trimmed, or a note saying why it is unknown.
fn output_of(program: &str, args: &[&str]) -> String {
    match Command::new(program).args(args).output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        Ok(out) => format!("unknown (`{program}` exited with {})", out.status),
        Err(e) => format!("unknown (`{program}`: {e})"),
    }
}

/// The mount that holds a directory, as `/proc/self/mountinfo` describes it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Mount {
    /// `ext4 /dev/vda (rw,discard,...)`, or why it is unknown.
    pub described: String,
    /// Mounted with online discard (`discard`): freeing a block waits for the device
    /// to discard it, so every removal of a flushed record costs a device round trip
    /// (docs/design-07-performance.md, "What the floors leave out").
    pub online_discard: bool,
}

impl Mount {
    /// The mount of `dir` in `mountinfo` (the text of `/proc/self/mountinfo`): the
    /// one whose mount point is the longest prefix of `dir` (canonical), the last
    /// such line when one is mounted over another.
    pub fn of(dir: &Path, mountinfo: &str) -> Option<Mount> {
        let mut best: Option<(usize, Mount)> = None;
        for line in mountinfo.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            let Some(dash) = fields.iter().position(|f| *f == "-") else {
                continue;
            };
            let (Some(point), Some(fs_type), Some(source), Some(options)) = (
                fields.get(4),
                fields.get(dash + 1),
                fields.get(dash + 2),
                fields.get(dash + 3),
            ) else {
                continue;
            };
            let point = Path::new(point);
            if !dir.starts_with(point) {
                continue;
            }
            let depth = point.components().count();
            if best.as_ref().is_some_and(|(d, _)| *d > depth) {
                continue;
            }
            let online_discard = options.split(',').any(|o| o == "discard");
            best = Some((
                depth,
                Mount {
                    described: format!("{fs_type} {source} ({options})"),
                    online_discard,
                },
            ));
        }
        best.map(|(_, m)| m)
    }

    fn gather(dir: &Path) -> Mount {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        match std::fs::read_to_string("/proc/self/mountinfo") {
            Ok(text) => Mount::of(&dir, &text).unwrap_or_else(|| Mount {
                described: "unknown (no mount in /proc/self/mountinfo holds it)".into(),
                online_discard: false,
            }),
            Err(e) => Mount {
                described: format!("unknown (/proc/self/mountinfo: {e})"),
                online_discard: false,
            },
        }
    }
}

impl Machine {
    /// Gathers the facts; `bench_dir` is the directory every fs row runs in.
    pub fn gather(bench_dir: &Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown (no model name in /proc/cpuinfo)".into());
        let logical = cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count();
        let usable = std::thread::available_parallelism().map_or(0, |n| n.get());
        let cores = format!("{logical} logical in /proc/cpuinfo, {usable} usable by this process");
        let dir = bench_dir.display().to_string();
        let fs_type = output_of("stat", &["-f", "-c", "%T", &dir]);
        Machine {
            cpu,
            cores,
            kernel: output_of("uname", &["-r"]),
            filesystem: format!("{fs_type} (`{dir}`)"),
            mount: Mount::gather(bench_dir),
            rustc: output_of("rustc", &["--version"]),
            date: output_of("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]),
            commit: output_of("git", &["describe", "--always", "--dirty"]),
            load: load_now(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard,delalloc
30 22 0:26 / /tmp rw,nosuid shared:2 - tmpfs tmpfs rw,size=100k
31 22 254:16 / /work/fast rw shared:3 - xfs /dev/vdb rw,noquota
";

    #[test]
    fn the_longest_mount_point_holding_the_directory_is_the_mount() {
        let root = Mount::of(Path::new("/work/slow/x"), MOUNTINFO).unwrap();
        assert_eq!(root.described, "ext4 /dev/vda (rw,discard,delalloc)");
        assert!(root.online_discard);
        let fast = Mount::of(Path::new("/work/fast/bench"), MOUNTINFO).unwrap();
        assert_eq!(fast.described, "xfs /dev/vdb (rw,noquota)");
        assert!(!fast.online_discard);
        // `/work/fastest` is not under `/work/fast`: whole components only.
        let other = Mount::of(Path::new("/work/fastest"), MOUNTINFO).unwrap();
        assert!(other.described.starts_with("ext4"));
    }
}

/// CPU time the hypervisor took from this virtual machine while the bench ran: the
/// `steal` column of `/proc/stat`, as a share of the CPUs' busy time (user, nice,
/// system, irq, softirq and steal), over the whole run and per step. A step with a
/// large share was measured on a CPU that was often taken away: its figures are the
/// host's weather, not the code's (docs/design-07-performance.md, "The CPU's own
/// spells").
pub mod steal {
    use std::sync::Mutex;

    /// (step name, steal and busy ticks at its start).
    static OPEN: Mutex<Option<(String, [u64; 2])>> = Mutex::new(None);
    /// Closed steps: (name, steal ticks, busy ticks).
    static CLOSED: Mutex<Vec<(String, u64, u64)>> = Mutex::new(Vec::new());

    /// Steal and busy ticks of all CPUs so far, `None` where `/proc/stat` has no
    /// such line (not Linux).
    pub fn ticks() -> Option<[u64; 2]> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        parse(text.lines().next()?)
    }

    /// The aggregate `cpu` line's steal and busy ticks.
    pub fn parse(line: &str) -> Option<[u64; 2]> {
        let mut fields = line.split_whitespace();
        if fields.next()? != "cpu" {
            return None;
        }
        let n: Vec<u64> = fields.map(str::parse).collect::<Result<_, _>>().ok()?;
        // user nice system idle iowait irq softirq steal …
        let (user, nice, system, irq, softirq, steal) = (
            *n.first()?,
            *n.get(1)?,
            *n.get(2)?,
            *n.get(5)?,
            *n.get(6)?,
            *n.get(7)?,
        );
        Some([steal, user + nice + system + irq + softirq + steal])
    }

    /// A new step begins: the one before it ends here.
    pub fn mark(name: &str) {
        let now = ticks();
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some((before, start)), Some(now)) = (open.take(), now) {
            CLOSED.lock().unwrap_or_else(|e| e.into_inner()).push((
                before,
                now[0].saturating_sub(start[0]),
                now[1].saturating_sub(start[1]),
            ));
        }
        *open = now.map(|now| (name.to_string(), now));
    }

    /// "N% over the run (step a%, step b%, …)", closing the last step now (a step
    /// with too little CPU time to tell gets "—"); or why it is unknown.
    pub fn summary() -> String {
        mark("");
        let closed = CLOSED.lock().unwrap_or_else(|e| e.into_inner());
        let (steal, busy) = closed
            .iter()
            .fold((0, 0), |(s, b), (_, st, bu)| (s + st, b + bu));
        if busy == 0 {
            return "unknown (no `cpu` line in /proc/stat)".into();
        }
        let share = |s: u64, b: u64| 100.0 * s as f64 / b.max(1) as f64;
        let steps: Vec<String> = closed
            .iter()
            .filter(|(name, ..)| !name.is_empty())
            // Under 20 ticks (0.2 s of CPU at 100 Hz) a share says nothing.
            .map(|(name, s, b)| match *b {
                b if b < 20 => format!("{name} —"),
                b => format!("{name} {:.0}%", share(*s, b)),
            })
            .collect();
        format!(
            "{:.0}% over the run ({})",
            share(steal, busy),
            steps.join(", ")
        )
    }

    #[cfg(test)]
    mod tests {
        /// The aggregate line's steal (8th number) against its busy time; other lines
        /// and short lines are not read.
        #[test]
        fn the_cpu_line_gives_steal_and_busy_ticks() {
            assert_eq!(
                super::parse("cpu  100 5 20 900 7 1 2 30 0 0"),
                Some([30, 100 + 5 + 20 + 1 + 2 + 30])
            );
            assert_eq!(super::parse("cpu0 100 5 20 900 7 1 2 30 0 0"), None);
            assert_eq!(super::parse("cpu  100 5 20"), None);
        }
    }
}

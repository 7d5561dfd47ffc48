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
            rustc: output_of("rustc", &["--version"]),
            date: output_of("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]),
            commit: output_of("git", &["describe", "--always", "--dirty"]),
            load: load_now(),
        }
    }
}

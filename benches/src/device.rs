//! What a block of operations asked of the device and of the CPU: requests the
//! bench directory's block device completed (`/proc/diskstats`: writes, flushes,
//! discards) and the CPU time this process used (`getrusage(RUSAGE_SELF)`, every
//! thread, the fs backend's removal thread included). With both, a row slower than
//! its floor is put down to the disk only when it sent the device no more requests
//! and spent no more CPU than the excess (docs/design-07-performance.md, "Telling
//! the disk from the code").

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// Requests the device completed (whole device: anything else writing to it counts
/// too, so the bench runs alone).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Requests {
    pub writes: f64,
    pub flushes: f64,
    pub discards: f64,
}

/// A reading, or the difference of two.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub cpu: Duration,
    /// `None` where the directory's device is not in `/proc/diskstats` (tmpfs,
    /// overlay, not Linux).
    pub requests: Option<Requests>,
}

impl Usage {
    /// `self` minus `earlier`.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            cpu: self.cpu.saturating_sub(earlier.cpu),
            requests: match (self.requests, earlier.requests) {
                (Some(a), Some(b)) => Some(Requests {
                    writes: a.writes - b.writes,
                    flushes: a.flushes - b.flushes,
                    discards: a.discards - b.discards,
                }),
                _ => None,
            },
        }
    }

    /// Nothing yet, counting requests where [`now`] can.
    pub fn zero() -> Usage {
        Usage {
            cpu: Duration::ZERO,
            requests: now().requests.map(|_| Requests::default()),
        }
    }

    /// `self` plus `other`.
    pub fn plus(&self, other: &Usage) -> Usage {
        Usage {
            cpu: self.cpu + other.cpu,
            requests: match (self.requests, other.requests) {
                (Some(a), Some(b)) => Some(Requests {
                    writes: a.writes + b.writes,
                    flushes: a.flushes + b.flushes,
                    discards: a.discards + b.discards,
                }),
                _ => None,
            },
        }
    }

    /// Per operation, over `n` operations.
    pub fn per(&self, n: usize) -> Usage {
        let n = n.max(1);
        Usage {
            cpu: self.cpu / u32::try_from(n).unwrap_or(u32::MAX),
            requests: self.requests.map(|r| Requests {
                writes: r.writes / n as f64,
                flushes: r.flushes / n as f64,
                discards: r.discards / n as f64,
            }),
        }
    }
}

/// The device (`major:minor`) whose counts [`now`] reads.
static DEVICE: OnceLock<Option<(u32, u32)>> = OnceLock::new();

/// Counts requests of the block device holding `dir` from now on (its mount's
/// `major:minor` in `/proc/self/mountinfo`).
pub fn watch(dir: &Path) {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let device = std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|text| device_of(&dir, &text));
    let _ = DEVICE.set(device);
}

/// The `major:minor` of the mount holding `dir` (the longest mount point, the last
/// line of equals).
pub fn device_of(dir: &Path, mountinfo: &str) -> Option<(u32, u32)> {
    let mut best: Option<(usize, (u32, u32))> = None;
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(numbers), Some(point)) = (fields.get(2), fields.get(4)) else {
            continue;
        };
        let point = Path::new(point);
        if !dir.starts_with(point) {
            continue;
        }
        let Some((major, minor)) = numbers.split_once(':') else {
            continue;
        };
        let (Ok(major), Ok(minor)) = (major.parse(), minor.parse()) else {
            continue;
        };
        let depth = point.components().count();
        if best.as_ref().is_some_and(|(d, _)| *d > depth) {
            continue;
        }
        best = Some((depth, (major, minor)));
    }
    best.map(|(_, d)| d)
}

/// Completed writes, flushes and discards of device `major:minor` in `diskstats`
/// (the text of `/proc/diskstats`; discards and flushes need Linux 4.18 and 5.5).
pub fn requests_of((major, minor): (u32, u32), diskstats: &str) -> Option<Requests> {
    diskstats.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.first()?.parse::<u32>().ok()? != major || f.get(1)?.parse::<u32>().ok()? != minor {
            return None;
        }
        let at = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
        Some(Requests {
            writes: at(7)? as f64,
            discards: at(14)? as f64,
            flushes: at(18)? as f64,
        })
    })
}

/// This process's CPU time and its device's request counts now.
pub fn now() -> Usage {
    let requests = DEVICE.get().copied().flatten().and_then(|device| {
        let text = std::fs::read_to_string("/proc/diskstats").ok()?;
        requests_of(device, &text)
    });
    Usage {
        cpu: own_cpu(),
        requests,
    }
}

/// CPU time (user + system) of this process, all its threads.
fn own_cpu() -> Duration {
    // SAFETY: an out-pointer to a zeroed `rusage` alive for the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_of_the_longest_mount_point_is_counted() {
        let mountinfo = "\
22 1 8:1 / / rw - ext4 /dev/sda1 rw
36 22 254:0 / /work rw,relatime - ext4 /dev/vda rw,discard
40 36 0:50 / /work/tmp rw - tmpfs tmpfs rw";
        assert_eq!(
            device_of(Path::new("/work/main/x"), mountinfo),
            Some((254, 0))
        );
        assert_eq!(
            device_of(Path::new("/work/tmp/x"), mountinfo),
            Some((0, 50))
        );
        assert_eq!(device_of(Path::new("/etc"), mountinfo), Some((8, 1)));
        let diskstats = " 254       0 vda 1212781 65521 118425610 2649878 8975397 718567 192183072 1475798 0 1056068 4568445 2479041 173 144743680 285621 3155139 157146\n";
        assert_eq!(
            requests_of((254, 0), diskstats),
            Some(Requests {
                writes: 8975397.0,
                discards: 2479041.0,
                flushes: 3155139.0
            })
        );
        assert_eq!(requests_of((0, 50), diskstats), None);
    }
}

//! Sorted-sample statistics and duration formatting.

use std::time::Duration;

/// The distribution of one row's samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// How many samples.
    pub n: usize,
    /// Median.
    pub p50: Duration,
    /// 95th percentile.
    pub p95: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Fastest sample.
    pub min: Duration,
    /// Slowest sample.
    pub max: Duration,
    /// Arithmetic mean: what a row whose cost falls on some operations only (a
    /// sweep every few claims) charges on average, which its p50 would hide.
    pub mean: Duration,
}

/// Nearest-rank percentile of sorted samples: the smallest sample with at least
/// `pct` percent of the samples at or below it.
fn percentile(sorted: &[Duration], pct: f64) -> Duration {
    let rank = ((pct / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Summarizes `samples`; panics on an empty set (a row always runs).
pub fn summarize(mut samples: Vec<Duration>) -> Summary {
    assert!(!samples.is_empty(), "a row without samples");
    samples.sort_unstable();
    let total: Duration = samples.iter().sum();
    Summary {
        mean: total / u32::try_from(samples.len()).unwrap_or(u32::MAX),
        n: samples.len(),
        p50: percentile(&samples, 50.0),
        p95: percentile(&samples, 95.0),
        p99: percentile(&samples, 99.0),
        min: samples[0],
        max: samples[samples.len() - 1],
    }
}

/// A duration in the unit that keeps three significant digits readable.
pub fn fmt(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 10_000.0 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1_000_000.0 {
        format!("{:.0} µs", ns / 1e3)
    } else if ns < 1_000_000_000.0 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// `a / b` as a ratio, e.g. `1.23×`.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_nanos() as f64 / (b.as_nanos() as f64).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: u64) -> Duration {
        Duration::from_micros(v)
    }

    #[test]
    fn nearest_rank_percentiles() {
        let s = summarize((1..=100).rev().map(us).collect());
        assert_eq!((s.n, s.min, s.max), (100, us(1), us(100)));
        assert_eq!((s.p50, s.p95, s.p99), (us(50), us(95), us(99)));
        let one = summarize(vec![us(7)]);
        assert_eq!(
            (one.p50, one.p99, one.min, one.max),
            (us(7), us(7), us(7), us(7))
        );
    }

    #[test]
    fn the_mean_sees_a_cost_the_median_hides() {
        // One sample in four pays a sweep: the p50 is the cheap case, the mean is not.
        let s = summarize(vec![us(100), us(100), us(100), us(500)]);
        assert_eq!((s.p50, s.mean), (us(100), us(200)));
    }

    #[test]
    fn formats_in_readable_units() {
        assert_eq!(fmt(Duration::from_nanos(1_234)), "1.23 µs");
        assert_eq!(fmt(us(456)), "456 µs");
        assert_eq!(fmt(us(2_500)), "2.50 ms");
        assert_eq!(fmt(Duration::from_millis(3_100)), "3.10 s");
    }
}

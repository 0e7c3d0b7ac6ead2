//! Latency statistics as fio keeps them: exact min, max, mean and standard deviation, and percentiles from a
//! log-linear histogram (64 buckets per power of two, so a percentile is within 1/64 of the true value; fio's
//! `FIO_IO_U_PLAT_BITS = 6` has the same resolution).

const SUB_BITS: u32 = 6;
const SUB_BUCKETS: u64 = 1 << SUB_BITS;

fn bucket_of(value: u64) -> usize {
    if value < SUB_BUCKETS {
        return value as usize;
    }
    let msb = 63 - value.leading_zeros();
    let shift = msb - SUB_BITS;
    (((u64::from(shift) + 1) << SUB_BITS) + ((value >> shift) & (SUB_BUCKETS - 1))) as usize
}

/// The middle of a bucket's range.
fn bucket_value(bucket: usize) -> u64 {
    let bucket = bucket as u64;
    if bucket < SUB_BUCKETS {
        return bucket;
    }
    let shift = (bucket >> SUB_BITS) - 1;
    let low = (SUB_BUCKETS + (bucket & (SUB_BUCKETS - 1))) << shift;
    low + ((1u64 << shift) >> 1)
}

/// Latency samples in nanoseconds, as fio's histogram keeps them: each in its bucket, with the least and the
/// most seen. Enough for percentiles, in memory that does not grow with the samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    count: u64,
    /// The least sample, `u64::MAX` before the first (`min` says 0 then).
    least: u64,
    max: u64,
    buckets: Vec<u64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { count: 0, least: u64::MAX, max: 0, buckets: Vec::new() }
    }
}

impl Histogram {
    /// Inlined: the closed loop records every command's latency.
    #[inline]
    pub fn record(&mut self, value_ns: u64) {
        self.least = self.least.min(value_ns);
        self.max = self.max.max(value_ns);
        self.count += 1;
        let bucket = bucket_of(value_ns);
        if self.buckets.len() <= bucket {
            self.buckets.resize(bucket + 1, 0);
        }
        self.buckets[bucket] += 1;
    }

    /// Adds another set of samples.
    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        self.least = self.least.min(other.least);
        self.max = self.max.max(other.max);
        self.count += other.count;
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
    }

    /// The value at `percent` (0 to 100): the bucket holding that rank, clamped to the observed range.
    pub fn percentile(&self, percent: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((percent / 100.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bucket, &hits) in self.buckets.iter().enumerate() {
            seen += hits;
            if seen >= rank {
                return bucket_value(bucket).clamp(self.least, self.max);
            }
        }
        self.max
    }

    /// The least sample (0 when there is none).
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.least
        }
    }

    /// The non-empty bins, as (the middle of the bin in ns, samples in it): fio's json+ `bins`.
    pub fn bins(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, &hits)| hits > 0)
            .map(|(bucket, &hits)| (bucket_value(bucket), hits))
    }
}

/// Latency samples in nanoseconds: exact mean and standard deviation beside the histogram.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencyStats {
    mean: f64,
    m2: f64,
    histogram: Histogram,
}

impl LatencyStats {
    pub fn record(&mut self, value_ns: u64) {
        self.histogram.record(value_ns);
        let delta = value_ns as f64 - self.mean;
        self.mean += delta / self.histogram.count as f64;
        self.m2 += delta * (value_ns as f64 - self.mean);
    }

    /// Adds another set of samples (group reporting).
    pub fn merge(&mut self, other: &LatencyStats) {
        let (mine, theirs) = (self.count(), other.count());
        if theirs == 0 {
            return;
        }
        let count = mine + theirs;
        let delta = other.mean - self.mean;
        self.m2 += other.m2 + delta * delta * mine as f64 * theirs as f64 / count as f64;
        self.mean += delta * theirs as f64 / count as f64;
        self.histogram.merge(&other.histogram);
    }

    pub fn count(&self) -> u64 {
        self.histogram.count
    }

    pub fn min(&self) -> u64 {
        self.histogram.min()
    }

    pub fn max(&self) -> u64 {
        self.histogram.max
    }

    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Sample standard deviation, as fio prints it.
    pub fn stddev(&self) -> f64 {
        if self.count() < 2 {
            0.0
        } else {
            (self.m2 / (self.count() - 1) as f64).sqrt()
        }
    }

    /// The histogram's non-empty bins, as (the middle of the bin in ns, samples in it): fio's json+ `bins`.
    pub fn bins(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.histogram.bins()
    }

    /// The value at `percent` (0 to 100), as `Histogram::percentile`.
    pub fn percentile(&self, percent: f64) -> u64 {
        self.histogram.percentile(percent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_within_a_sixty_fourth() {
        for value in [0u64, 1, 63, 64, 65, 127, 128, 1000, 11_360, 1 << 40, u64::MAX / 3] {
            let middle = bucket_value(bucket_of(value));
            let error = (middle as f64 - value as f64).abs() / (value.max(1) as f64);
            assert!(error <= 1.0 / 64.0, "{value} -> {middle}");
        }
    }

    #[test]
    fn statistics_match_the_samples() {
        let mut stats = LatencyStats::default();
        for value in 1..=1000u64 {
            stats.record(value * 1000);
        }
        assert_eq!((stats.count(), stats.min(), stats.max()), (1000, 1000, 1_000_000));
        assert!((stats.mean() - 500_500.0).abs() < 1e-6);
        assert!((stats.stddev() - 288_819.4).abs() < 1.0);
        let p50 = stats.percentile(50.0) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.02, "{p50}");
        assert_eq!(stats.percentile(100.0), 1_000_000);
        let mut halves = LatencyStats::default();
        let mut other = LatencyStats::default();
        for value in 1..=1000u64 {
            if value % 2 == 0 {
                halves.record(value * 1000)
            } else {
                other.record(value * 1000)
            }
        }
        halves.merge(&other);
        assert_eq!(halves.count(), 1000);
        assert!((halves.mean() - stats.mean()).abs() < 1e-6 && (halves.stddev() - stats.stddev()).abs() < 1e-6);
        assert_eq!(halves.percentile(99.0), stats.percentile(99.0));
    }
}

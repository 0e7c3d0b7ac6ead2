//! fio's `random_distribution`: which block a random I/O picks. Uniform by default; `zipf:theta` and
//! `pareto:h` make a few blocks hot, `normal:dev` (fio's gauss) centres picks with a spread of `dev` percent of
//! the range. As in fio (`lib/zipf.c`, `lib/gauss.c`), the skewed draw is a rank that a hash then scatters
//! over the range, so the hot blocks are not simply the first ones.

use zonelab_runtime::rng::SplitMix64;

use super::options::FioError;

/// Ranks whose zeta term is summed exactly; fio caps the sum at the same 10 million (`ZIPF_MAX_GEN`).
const ZIPF_MAX_GEN: u64 = 10_000_000;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    Uniform,
    Zipf { theta: f64 },
    Pareto { h: f64 },
    Normal { dev_percent: f64 },
}

impl Distribution {
    pub fn parse(text: &str) -> Result<Distribution, FioError> {
        let refuse = |why: &str| Err(FioError::Options(format!("option random_distribution: {text:?} {why}")));
        let (name, value) = text.trim().split_once(':').unwrap_or((text.trim(), ""));
        let value: Option<f64> =
            if value.is_empty() { None } else { value.parse().ok().filter(|v: &f64| v.is_finite()) };
        match (name, value) {
            ("random", _) => Ok(Distribution::Uniform),
            ("zipf", Some(theta)) if theta > 0.0 && theta != 1.0 => Ok(Distribution::Zipf { theta }),
            ("pareto", Some(h)) if h > 0.0 && h < 1.0 => Ok(Distribution::Pareto { h }),
            ("normal", Some(dev)) if dev > 0.0 && dev <= 100.0 => Ok(Distribution::Normal { dev_percent: dev }),
            ("zipf", _) => refuse("needs a theta above 0 other than 1 (zipf:1.2)"),
            ("pareto", _) => refuse("needs an h between 0 and 1 (pareto:0.9)"),
            ("normal", _) => refuse("needs a deviation in percent of the range (normal:10)"),
            _ => refuse("is not random, zipf:theta, pareto:h or normal:dev (zonelab has no zoned: or random: mixes)"),
        }
    }
}

/// Draws ranges of `n` blocks by a distribution.
#[derive(Clone, Debug)]
pub struct Picker {
    distribution: Distribution,
    n: u64,
    /// Zipf's normalising sums: zeta(n, theta) and zeta(2, theta).
    zetan: f64,
    zeta2: f64,
}

impl Picker {
    pub fn new(distribution: Distribution, n: u64) -> Picker {
        let n = n.max(1);
        let (zetan, zeta2) = match distribution {
            Distribution::Zipf { theta } => {
                ((1..=n.min(ZIPF_MAX_GEN)).map(|rank| (rank as f64).powf(-theta)).sum(), 1.0 + 0.5f64.powf(theta))
            }
            _ => (0.0, 0.0),
        };
        Picker { distribution, n, zetan, zeta2 }
    }

    /// A block index below `n`.
    pub fn next(&self, rng: &mut SplitMix64) -> u64 {
        let mut uniform = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let n = self.n;
        let rank = match self.distribution {
            Distribution::Uniform => (uniform() * n as f64) as u64,
            Distribution::Zipf { theta } => {
                // Gray et al.'s quick zipf, as fio's zipf_next.
                let u = uniform();
                let alpha = 1.0 / (1.0 - theta);
                let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - self.zeta2 / self.zetan);
                let z = u * self.zetan;
                if z < 1.0 {
                    0
                } else if z < 1.0 + 0.5f64.powf(theta) {
                    1
                } else {
                    ((n as f64) * (eta * u - eta + 1.0).powf(alpha)) as u64
                }
            }
            Distribution::Pareto { h } => {
                let power = h.ln() / (1.0 - h).ln();
                ((n - 1) as f64 * uniform().powf(power)) as u64
            }
            Distribution::Normal { dev_percent } => {
                // The sum of 12 uniforms less 6 is close to a standard normal; picks outside the range are
                // drawn again, as fio's gauss does.
                loop {
                    let standard: f64 = (0..12).map(|_| uniform()).sum::<f64>() - 6.0;
                    let offset = n as f64 / 2.0 + standard * dev_percent / 100.0 * n as f64;
                    if (0.0..n as f64).contains(&offset) {
                        break offset as u64;
                    }
                }
            }
        };
        match self.distribution {
            Distribution::Uniform => rank.min(n - 1),
            _ => scatter(rank.min(n - 1)) % n,
        }
    }
}

/// A fixed 64-bit mix (the finaliser of MurmurHash3) that spreads hot ranks over the range.
fn scatter(mut value: u64) -> u64 {
    value ^= value >> 33;
    value = value.wrapping_mul(0xff51_afd7_ed55_8ccd);
    value ^= value >> 33;
    value = value.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    value ^ (value >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The share of draws that land on the most drawn tenth of the blocks.
    fn hottest_tenth(distribution: Distribution) -> f64 {
        let picker = Picker::new(distribution, 1000);
        let mut rng = SplitMix64::new(7);
        let mut hits = vec![0u64; 1000];
        for _ in 0..100_000 {
            hits[picker.next(&mut rng) as usize] += 1;
        }
        hits.sort_unstable_by(|a, b| b.cmp(a));
        hits[..100].iter().sum::<u64>() as f64 / 100_000.0
    }

    #[test]
    fn skewed_distributions_concentrate_on_a_few_blocks() {
        let uniform = hottest_tenth(Distribution::Uniform);
        assert!(uniform < 0.15, "uniform: {uniform}");
        let zipf = hottest_tenth(Distribution::Zipf { theta: 1.2 });
        assert!(zipf > 0.7, "zipf:1.2 puts most draws on a tenth of the blocks: {zipf}");
        let pareto = hottest_tenth(Distribution::Pareto { h: 0.9 });
        assert!(pareto > 0.5, "pareto:0.9: {pareto}");
        let normal = hottest_tenth(Distribution::Normal { dev_percent: 5.0 });
        assert!(normal > 0.3 && normal < zipf, "normal:5: {normal}");
    }

    #[test]
    fn parse_refuses_what_fio_would() {
        assert_eq!(Distribution::parse("zipf:1.2").expect("zipf"), Distribution::Zipf { theta: 1.2 });
        for bad in ["zipf", "zipf:1", "pareto:1.5", "normal:0", "zoned:50/5:50/95", "lognormal:2"] {
            assert!(Distribution::parse(bad).is_err(), "{bad}");
        }
    }
}

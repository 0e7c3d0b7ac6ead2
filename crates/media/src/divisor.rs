//! Division by a number fixed when the model is built. A read divides its zone offset by the program unit and
//! the page, and takes unit and zone numbers modulo the zone's planes and the zone groups: a chain of 64-bit
//! divisions, each of which waits for the last (docs/notes/calibration-log.md, "Simulation speed"). A divisor below 2^32 divides
//! numbers below 2^32 by a multiplication (Lemire, Kaser and Kurz, "Faster Remainder by Direct Computation",
//! 2019: with c = ceil(2^64 / d), n / d = (c * n) >> 64 for every n < 2^32 and 1 < d < 2^32).

/// A divisor fixed once, with what dividing by it quickly takes: below `limit`, n / d is the high word of
/// `magic * n` (ceil(2^64 / d)), plus n itself when d is 1 (`one`, all ones then), with no branch on the divisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Divisor {
    divisor: u64,
    magic: u64,
    one: u64,
    /// 2^32, or 0 for a divisor of 2^32 or more, which always divides the usual way.
    limit: u64,
}

impl Divisor {
    /// Panics on 0: a layout with an empty dimension is refused before the model is built.
    pub fn new(divisor: u64) -> Divisor {
        assert!(divisor > 0, "a divisor of 0");
        let (magic, one, limit) = match divisor {
            1 => (0, u64::MAX, 1 << 32),
            2..0x1_0000_0000 => (u64::MAX / divisor + 1, 0, 1 << 32),
            _ => (0, 0, 0),
        };
        Divisor { divisor, magic, one, limit }
    }

    pub fn get(self) -> u64 {
        self.divisor
    }

    #[inline]
    pub fn div(self, n: u64) -> u64 {
        if n < self.limit {
            ((u128::from(self.magic) * u128::from(n)) >> 64) as u64 + (n & self.one)
        } else {
            n / self.divisor
        }
    }

    #[inline]
    pub fn rem(self, n: u64) -> u64 {
        n - self.div(n) * self.divisor
    }

    #[inline]
    pub fn div_ceil(self, n: u64) -> u64 {
        let quotient = self.div(n);
        quotient + u64::from(quotient * self.divisor != n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the `/`, `%` and `div_ceil` of the standard library, at the edges of each method and at seeded
    /// random points.
    #[test]
    fn divides_as_the_standard_library_does() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut divisors =
            vec![1, 2, 3, 5, 7, 24, 32, 98_304, 786_432, (1 << 32) - 1, 1 << 32, (1 << 32) + 1, u64::MAX];
        divisors.extend((0..200).map(|_| next() % 1_000_000 + 1));
        divisors.extend((0..50).map(|_| (next() >> (next() % 64)).max(1)));
        for d in divisors {
            let divisor = Divisor::new(d);
            let mut numbers = vec![0, 1, d - 1, d, d.saturating_add(1), (1 << 32) - 1, 1 << 32, u64::MAX];
            numbers.extend((0..200).map(|_| next() >> (next() % 64)));
            numbers.extend((0..200).map(|_| next() % (1 << 32)));
            for n in numbers {
                assert_eq!(divisor.div(n), n / d, "{n} / {d}");
                assert_eq!(divisor.rem(n), n % d, "{n} % {d}");
                assert_eq!(divisor.div_ceil(n), n.div_ceil(d), "{n} div_ceil {d}");
            }
        }
    }
}

//! The seeded generator every random choice in zonelab comes from. One master seed is split per component, so
//! adding a random choice in one place does not change the numbers another place draws.

/// SplitMix64: small, fast, and fully determined by its seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// A generator for one named component, independent of the others drawn from the same master seed.
    pub fn split(master: u64, component: &str) -> SplitMix64 {
        let tag = component
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3));
        let mut mixer = SplitMix64(master ^ tag);
        SplitMix64(mixer.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (bound > 0), by multiply-shift.
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// Shuffles `items` in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_numbers_and_components_differ() {
        let draw = |mut rng: SplitMix64| (0..4).map(|_| rng.next_u64()).collect::<Vec<_>>();
        assert_eq!(draw(SplitMix64::split(7, "reorder")), draw(SplitMix64::split(7, "reorder")));
        assert_ne!(draw(SplitMix64::split(7, "reorder")), draw(SplitMix64::split(7, "workload")));
        let mut rng = SplitMix64::new(1);
        assert!((0..1000).all(|_| rng.below(10) < 10));
    }
}

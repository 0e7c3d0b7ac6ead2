//! How fio 3.33 spreads a uniform random job over its range (`get_next_rand_offset` in io_u.c): each pass
//! touches every block once. With the default `random_generator=tausworthe` a block is drawn at random and, if
//! the pass has already used it, the next unused block after it is taken instead (the random map, fio's
//! `lib/axmap.c`); `norandommap` turns the map off, so blocks repeat and some are never touched. With
//! `random_generator=lfsr` a full-period sequence visits each block once without a map. When a pass has used
//! every block, a job with more to move (`time_based`, `io_size` beyond `size`, `loops`) starts a new pass.

use zonelab_runtime::rng::SplitMix64;

use super::options::FioError;

/// `random_generator`: where a uniform random job's blocks come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RandomGenerator {
    /// fio's default (`tausworthe`, `tausworthe64`): independent draws, deduplicated by the random map.
    Draw,
    /// `lfsr`: a sequence that visits each block of the range once per pass, with no map.
    FullCycle,
}

impl RandomGenerator {
    pub fn parse(value: &str) -> Result<RandomGenerator, FioError> {
        match value.trim() {
            "tausworthe" | "tausworthe64" => Ok(RandomGenerator::Draw),
            "lfsr" => Ok(RandomGenerator::FullCycle),
            other => Err(FioError::Options(format!(
                "option random_generator: {other:?} is not tausworthe, tausworthe64 or lfsr"
            ))),
        }
    }
}

/// Which blocks of a range a pass has used: one bit per block, and one bit per word of those that is set when
/// the word is full, so that finding the next unused block skips used stretches 4,096 blocks at a time.
#[derive(Clone, Debug)]
pub struct BlockMap {
    blocks: u64,
    used: Vec<u64>,
    full_words: Vec<u64>,
    used_count: u64,
}

impl BlockMap {
    pub fn new(blocks: u64) -> BlockMap {
        let words = blocks.div_ceil(64) as usize;
        BlockMap { blocks, used: vec![0; words], full_words: vec![0; words.div_ceil(64)], used_count: 0 }
    }

    pub fn is_free(&self, block: u64) -> bool {
        self.used[(block / 64) as usize] & (1 << (block % 64)) == 0
    }

    pub fn is_full(&self) -> bool {
        self.used_count == self.blocks
    }

    /// The first unused block at or after `block`, wrapping to the range's start (`axmap_next_free`); None when
    /// the pass has used every block.
    pub fn next_free(&self, block: u64) -> Option<u64> {
        if self.is_full() {
            return None;
        }
        self.free_in(block, self.blocks).or_else(|| self.free_in(0, block))
    }

    /// The first unused block in `from..to`.
    fn free_in(&self, from: u64, to: u64) -> Option<u64> {
        let mut word = from / 64;
        let mut unused = !self.used.get(word as usize)? & (u64::MAX << (from % 64));
        loop {
            if unused != 0 {
                let block = word * 64 + u64::from(unused.trailing_zeros());
                return (block < to).then_some(block);
            }
            word = self.next_word_with_room(word + 1)?;
            if word * 64 >= to {
                return None;
            }
            unused = !self.used[word as usize];
        }
    }

    /// The first word at or after `word` with an unused block.
    fn next_word_with_room(&self, word: u64) -> Option<u64> {
        let mut group = word / 64;
        let mut room = !self.full_words.get(group as usize)? & (u64::MAX << (word % 64));
        loop {
            if room != 0 {
                let found = group * 64 + u64::from(room.trailing_zeros());
                return (found < self.used.len() as u64).then_some(found);
            }
            group += 1;
            room = !*self.full_words.get(group as usize)?;
        }
    }

    /// Marks the unused blocks from `block` on, at most `count`, stopping at the first one already used; returns
    /// how many it marked (`axmap_set_nr`: an I/O is cut short where it would overlap one of its pass).
    pub fn mark(&mut self, block: u64, count: u64) -> u64 {
        let mut marked = 0;
        while marked < count && block + marked < self.blocks && self.is_free(block + marked) {
            let at = block + marked;
            let word = (at / 64) as usize;
            self.used[word] |= 1 << (at % 64);
            if self.used[word] == u64::MAX || (word + 1 == self.used.len() && self.word_done(word)) {
                self.full_words[word / 64] |= 1 << (word % 64);
            }
            marked += 1;
        }
        self.used_count += marked;
        marked
    }

    /// The last word, which may hold fewer than 64 blocks, has every block it holds used.
    fn word_done(&self, word: usize) -> bool {
        let held = self.blocks - word as u64 * 64;
        self.used[word].count_ones() as u64 == held
    }

    /// A new pass: every block unused again.
    pub fn clear(&mut self) {
        self.used.fill(0);
        self.full_words.fill(0);
        self.used_count = 0;
    }
}

/// `random_generator=lfsr`'s role: each block of `0..blocks` once per pass, in a scrambled order fixed by the
/// seed. fio uses a Galois LFSR; zonelab steps a full-period linear congruential generator over the next power
/// of two (Hull and Dobell's conditions: an odd increment and a multiplier of 1 mod 4) and scrambles each value
/// with a bijection of the same width, skipping values past the range. The guarantee is fio's, the order is not.
#[derive(Clone, Debug)]
pub struct FullCycle {
    blocks: u64,
    bits: u32,
    state: u64,
    increment: u64,
    steps: u64,
}

/// Knuth's MMIX multiplier, 1 mod 4 as a full period needs.
const MULTIPLIER: u64 = 6_364_136_223_846_793_005;

impl FullCycle {
    pub fn new(blocks: u64, rng: &mut SplitMix64) -> FullCycle {
        let bits = blocks.max(2).next_power_of_two().trailing_zeros();
        let mask = Self::mask_of(bits);
        FullCycle { blocks, bits, state: rng.next_u64() & mask, increment: (rng.next_u64() | 1) & mask, steps: 0 }
    }

    fn mask_of(bits: u32) -> u64 {
        if bits >= 64 {
            u64::MAX
        } else {
            (1 << bits) - 1
        }
    }

    /// The next block of the pass; None once the pass has visited every block (the next call starts another).
    pub fn next_block(&mut self) -> Option<u64> {
        let mask = Self::mask_of(self.bits);
        loop {
            if self.steps > mask {
                self.steps = 0;
                return None;
            }
            self.steps += 1;
            self.state = self.state.wrapping_mul(MULTIPLIER).wrapping_add(self.increment) & mask;
            let block = self.scramble(self.state);
            if block < self.blocks {
                return Some(block);
            }
        }
    }

    /// A bijection of `bits`-bit numbers (xor-shift and odd multiply, each invertible) that hides the low bits'
    /// short periods of a power-of-two congruential generator.
    fn scramble(&self, mut value: u64) -> u64 {
        let mask = Self::mask_of(self.bits);
        let shift = self.bits.div_ceil(2).max(1);
        value ^= value >> shift;
        value = value.wrapping_mul(0x9e37_79b9_7f4a_7c15) & mask;
        value ^ (value >> shift)
    }
}

/// A uniform random job's pass over the blocks of its range, by its `random_generator`.
#[derive(Clone, Debug)]
pub enum RandomPass {
    Map(BlockMap),
    Cycle(FullCycle),
}

impl RandomPass {
    /// The pass of a job with `blocks` blocks, or None when fio keeps no pass for it (`norandommap`).
    pub fn new(generator: RandomGenerator, norandommap: bool, blocks: u64, seed: &mut SplitMix64) -> Option<Self> {
        match (generator, norandommap) {
            (RandomGenerator::FullCycle, _) => Some(RandomPass::Cycle(FullCycle::new(blocks, seed))),
            (RandomGenerator::Draw, false) => Some(RandomPass::Map(BlockMap::new(blocks))),
            (RandomGenerator::Draw, true) => None,
        }
    }

    /// The next block, from a new pass when this one has used every block.
    pub fn next_block(&mut self, rng: &mut SplitMix64) -> u64 {
        match self {
            RandomPass::Map(map) => {
                if map.is_full() {
                    map.clear();
                }
                let drawn = rng.below(map.blocks);
                map.next_free(drawn).expect("a pass that is not full has an unused block")
            }
            RandomPass::Cycle(cycle) => {
                cycle.next_block().or_else(|| cycle.next_block()).expect("a new pass of a full cycle has a first block")
            }
        }
    }

    /// Takes up to `count` blocks from `block` for one I/O; returns how many it may cover (fio cuts an I/O short
    /// where the map says its pass has used a block already).
    pub fn claim(&mut self, block: u64, count: u64) -> u64 {
        match self {
            RandomPass::Map(map) => map.mark(block, count),
            RandomPass::Cycle(_) => count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_finds_the_next_unused_block_wrapping_and_knows_when_it_is_full() {
        for blocks in [1, 63, 64, 65, 4_097, 10_000] {
            let mut map = BlockMap::new(blocks);
            let mut rng = SplitMix64::new(blocks);
            let mut seen = vec![false; blocks as usize];
            for _ in 0..blocks {
                let drawn = rng.below(blocks);
                let block = map.next_free(drawn).expect("a block is left");
                assert!(!seen[block as usize], "{blocks}: block {block} given twice");
                let skipped = if block >= drawn { drawn..block } else { drawn..blocks };
                assert!(skipped.clone().all(|b| !map.is_free(b)), "{blocks}: {block} for {drawn} skips a free block");
                seen[block as usize] = true;
                assert_eq!(map.mark(block, 1), 1);
            }
            assert!(map.is_full(), "{blocks}");
            assert_eq!(map.next_free(0), None);
            map.clear();
            assert_eq!(map.next_free(blocks - 1), Some(blocks - 1));
        }
    }

    #[test]
    fn a_mark_stops_at_a_block_already_used() {
        let mut map = BlockMap::new(256);
        assert_eq!(map.mark(10, 1), 1);
        assert_eq!(map.mark(6, 8), 4, "6..10 are free, 10 is used");
        assert_eq!(map.next_free(6), Some(11));
        assert_eq!(map.mark(250, 16), 6, "the range ends at 256");
    }

    #[test]
    fn a_full_cycle_visits_each_block_once_per_pass() {
        for blocks in [1, 2, 3, 1_000, 4_096] {
            let mut cycle = FullCycle::new(blocks, &mut SplitMix64::new(9));
            for _ in 0..2 {
                let mut seen: Vec<u64> = std::iter::from_fn(|| cycle.next_block()).collect();
                let first: Vec<u64> = seen.iter().copied().take(8).collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..blocks).collect::<Vec<_>>(), "{blocks}");
                if blocks >= 1_000 {
                    assert_ne!(first, (0..8).collect::<Vec<_>>(), "the order is scrambled");
                }
            }
        }
    }
}

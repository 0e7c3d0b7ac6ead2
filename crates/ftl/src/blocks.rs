//! The block table: each block's state, valid pages, write pointer, erase count and age, the free list, and
//! the choice of a garbage-collection victim.

use std::collections::VecDeque;

use crate::config::VictimPolicy;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockState {
    Free,
    /// Taking writes: a host stream's (0..streams) or garbage collection's (`streams`).
    Open(u32),
    Full,
}

pub(crate) struct Blocks {
    pub state: Vec<BlockState>,
    /// Valid pages in each block.
    pub valid: Vec<u32>,
    /// Pages written into each block since its erase.
    pub written: Vec<u32>,
    pub erase_count: Vec<u32>,
    /// When each block was last written, for cost-benefit's age.
    pub last_write_ns: Vec<u64>,
    /// When each block's last erase ends: a program into it waits for that.
    pub erased_ns: Vec<u64>,
    /// Erased blocks, oldest erase first, so that blocks take turns (a simple wear spread).
    pub free: VecDeque<u32>,
}

impl Blocks {
    pub fn new(blocks: u32) -> Blocks {
        let count = blocks as usize;
        Blocks {
            state: vec![BlockState::Free; count],
            valid: vec![0; count],
            written: vec![0; count],
            erase_count: vec![0; count],
            last_write_ns: vec![0; count],
            erased_ns: vec![0; count],
            free: (0..blocks).collect(),
        }
    }

    /// Takes the next free block for `owner`.
    pub fn open(&mut self, owner: u32) -> Option<u32> {
        let block = self.free.pop_front()?;
        debug_assert_eq!(self.state[block as usize], BlockState::Free);
        self.state[block as usize] = BlockState::Open(owner);
        Some(block)
    }

    /// The full block to collect: None when no full block holds an invalid page (collecting would free
    /// nothing).
    pub fn victim(&self, policy: VictimPolicy, pages_per_block: u32, now: u64) -> Option<u32> {
        let full = (0..self.state.len())
            .filter(|&block| self.state[block] == BlockState::Full && self.valid[block] < pages_per_block);
        match policy {
            VictimPolicy::Greedy => full.min_by_key(|&block| (self.valid[block], block)).map(|block| block as u32),
            VictimPolicy::CostBenefit => full
                .max_by(|&a, &b| {
                    let score = |block: usize| {
                        let used = f64::from(self.valid[block]) / f64::from(pages_per_block);
                        let age = (now.saturating_sub(self.last_write_ns[block]) + 1) as f64;
                        if used == 0.0 {
                            f64::INFINITY
                        } else {
                            (1.0 - used) / (2.0 * used) * age
                        }
                    };
                    score(a).total_cmp(&score(b)).then(b.cmp(&a))
                })
                .map(|block| block as u32),
        }
    }

    /// A collected block, erased by `erased_ns`: free again, at the back of the list.
    pub fn erased(&mut self, block: u32, erased_ns: u64) {
        let index = block as usize;
        debug_assert_eq!(self.valid[index], 0, "a block is erased only once nothing in it is valid");
        self.state[index] = BlockState::Free;
        self.written[index] = 0;
        self.erase_count[index] += 1;
        self.erased_ns[index] = erased_ns;
        self.free.push_back(block);
    }
}

//! A calendar's parts: which of its buckets hold anything (a bit each, with a summary bit per word, so that the
//! first occupied bucket after a given one, or the last before it, is found in a few instructions), and the slab
//! that holds the nodes of the buckets' lists. A calendar keeps things due over a window of time in buckets of a
//! fixed width, indexed round a ring, which is cheaper to search than a binary heap or a sorted list whose
//! searches chain dependent loads: the runtimes' timers and the flash model's way out to the host are both
//! calendars.

use std::ops::{Index, IndexMut};

/// Buckets round the ring.
pub const BUCKETS: usize = 1 << 12;
const WORDS: usize = BUCKETS / 64;

/// No node: an empty bucket, or the end of a bucket's list.
pub const NIL: u32 = u32::MAX;

/// A bit per bucket.
#[derive(Clone, Debug)]
pub struct BucketBits {
    words: [u64; WORDS],
    /// Bit w: word w has a bit set.
    summary: u64,
}

impl Default for BucketBits {
    fn default() -> Self {
        BucketBits { words: [0; WORDS], summary: 0 }
    }
}

impl BucketBits {
    pub fn set(&mut self, bucket: usize) {
        self.words[bucket / 64] |= 1 << (bucket % 64);
        self.summary |= 1 << (bucket / 64);
    }

    pub fn clear(&mut self, bucket: usize) {
        self.words[bucket / 64] &= !(1 << (bucket % 64));
        if self.words[bucket / 64] == 0 {
            self.summary &= !(1 << (bucket / 64));
        }
    }

    /// The first occupied bucket going round the ring from `start` (itself included).
    pub fn first_from(&self, start: usize) -> Option<usize> {
        let (word, bit) = (start / 64, start % 64);
        let here = self.words[word] & (u64::MAX << bit);
        if here != 0 {
            return Some(word * 64 + here.trailing_zeros() as usize);
        }
        // Then the words after the start's, then from the first word on, which ends with the start's own
        // word's buckets before the start.
        let after = self.summary & u64::MAX.checked_shl(word as u32 + 1).unwrap_or(0);
        let next = match (after, self.summary) {
            (0, 0) => return None,
            (0, all) => all.trailing_zeros() as usize,
            (after, _) => after.trailing_zeros() as usize,
        };
        Some(next * 64 + self.words[next].trailing_zeros() as usize)
    }

    /// The first occupied bucket going back round the ring from `start` (itself included).
    pub fn last_through(&self, start: usize) -> Option<usize> {
        let (word, bit) = (start / 64, start % 64);
        let here = self.words[word] & (u64::MAX >> (63 - bit));
        if here != 0 {
            return Some(word * 64 + 63 - here.leading_zeros() as usize);
        }
        // Then the words before the start's, then from the last word back, which ends with the start's own
        // word's buckets after the start.
        let before = self.summary & ((1u64 << word) - 1);
        let previous = match (before, self.summary) {
            (0, 0) => return None,
            (0, all) => 63 - all.leading_zeros() as usize,
            (before, _) => 63 - before.leading_zeros() as usize,
        };
        Some(previous * 64 + 63 - self.words[previous].leading_zeros() as usize)
    }
}

/// The nodes of a calendar's bucket lists, in one vector whose freed places are reused, so that they stay few
/// and in cache (a bucket holds one item or none most of the time). A node is named by its index; the freed ones
/// are linked through their own `next`.
#[derive(Clone, Debug)]
pub struct Slab<T> {
    nodes: Vec<T>,
    free: u32,
}

/// A node of a list: the index of the next one, or `NIL`.
pub trait Linked {
    fn next_mut(&mut self) -> &mut u32;
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { nodes: Vec::new(), free: NIL }
    }
}

impl<T: Linked> Slab<T> {
    /// Keeps `node`; returns its index.
    pub fn insert(&mut self, node: T) -> u32 {
        match self.free {
            NIL => {
                self.nodes.push(node);
                u32::try_from(self.nodes.len() - 1).ok().filter(|&index| index != NIL).expect("fewer than 2^32 nodes")
            }
            free => {
                self.free = *self.nodes[free as usize].next_mut();
                self.nodes[free as usize] = node;
                free
            }
        }
    }

    /// Lets node `index` be reused (its `next` then links the free nodes).
    pub fn release(&mut self, index: u32) {
        *self.nodes[index as usize].next_mut() = self.free;
        self.free = index;
    }

    /// Every node, released or not.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.nodes.iter_mut()
    }
}

impl<T> Index<u32> for Slab<T> {
    type Output = T;

    fn index(&self, index: u32) -> &T {
        &self.nodes[index as usize]
    }
}

impl<T> IndexMut<u32> for Slab<T> {
    fn index_mut(&mut self, index: u32) -> &mut T {
        &mut self.nodes[index as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a plain array of flags, walked round the ring.
    #[test]
    fn searches_match_a_walk_round_the_ring() {
        let (mut bits, mut flags) = (BucketBits::default(), vec![false; BUCKETS]);
        let mut state = 5u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        for step in 0..20_000 {
            let bucket = next() % BUCKETS;
            // Mostly sparse, at times crowded in one stretch, at times emptied.
            match next() % 10 {
                0..=3 => {
                    bits.set(bucket);
                    flags[bucket] = true;
                }
                4 => {
                    for (near, flag) in flags.iter_mut().enumerate().skip(bucket).take(100) {
                        bits.set(near);
                        *flag = true;
                    }
                }
                _ => {
                    bits.clear(bucket);
                    flags[bucket] = false;
                }
            }
            if step % 997 == 0 {
                bits = BucketBits::default();
                flags.iter_mut().for_each(|flag| *flag = false);
            }
            let start = next() % BUCKETS;
            let forward = (0..BUCKETS).map(|offset| (start + offset) % BUCKETS).find(|&at| flags[at]);
            let backward = (0..BUCKETS).map(|offset| (start + BUCKETS - offset) % BUCKETS).find(|&at| flags[at]);
            assert_eq!(bits.first_from(start), forward, "step {step} from {start}");
            assert_eq!(bits.last_through(start), backward, "step {step} back from {start}");
            assert_eq!(bits.first_from(0).is_none(), forward.is_none(), "step {step}: any bucket occupied");
        }
    }
}

//! The page cache: clean pages, least recently used first out. Every page written back or read goes through it,
//! so its bookkeeping is on the path of every block: a slab of entries on an intrusive list in the order they
//! were last used (no ordered map to rebalance), found through a hash map whose hash is one multiplication.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::Page;

/// No entry: the end of the list.
const NONE: usize = usize::MAX;

/// A page's key: its inode and block.
type Key = (u32, u64);

/// The multiplicative hash of rustc's `FxHasher` (a word folded in by a rotate, an xor and a multiplication by an
/// odd constant near 2^64 / the golden ratio): keys are small integers, which need no protection from a
/// chosen-collision attack, and SipHash's rounds were a third of the cache's cost.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u32(&mut self, value: u32) {
        self.write_u64(u64::from(value));
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

struct Entry {
    key: Key,
    page: Page,
    /// Neighbours on the list: toward the least recently used, and toward the most.
    older: usize,
    newer: usize,
}

/// Clean pages, least recently used first out.
#[derive(Default)]
pub(crate) struct PageCache {
    slots: HashMap<Key, usize, BuildHasherDefault<KeyHasher>>,
    entries: Vec<Entry>,
    /// Entries no page holds, for reuse.
    free: Vec<usize>,
    /// The least and the most recently used entry.
    oldest: usize,
    newest: usize,
    limit_pages: usize,
}

impl PageCache {
    pub(crate) fn new(limit_pages: usize) -> PageCache {
        PageCache { oldest: NONE, newest: NONE, limit_pages, ..PageCache::default() }
    }

    pub(crate) fn get(&mut self, ino: u32, block: u64) -> Option<Page> {
        let slot = *self.slots.get(&(ino, block))?;
        self.unlink(slot);
        self.push_newest(slot);
        Some(self.entries[slot].page.clone())
    }

    /// Caches a page; returns the pages evicted to make room (their inodes forget them).
    pub(crate) fn insert(&mut self, ino: u32, block: u64, page: Page) -> Vec<Key> {
        let key = (ino, block);
        match self.slots.get(&key) {
            Some(&slot) => {
                self.unlink(slot);
                self.entries[slot].page = page;
                self.push_newest(slot);
            }
            None => {
                let entry = Entry { key, page, older: NONE, newer: NONE };
                let slot = match self.free.pop() {
                    Some(slot) => {
                        self.entries[slot] = entry;
                        slot
                    }
                    None => {
                        self.entries.push(entry);
                        self.entries.len() - 1
                    }
                };
                self.slots.insert(key, slot);
                self.push_newest(slot);
            }
        }
        let mut evicted = Vec::new();
        while self.slots.len() > self.limit_pages {
            let slot = self.oldest;
            let key = self.entries[slot].key;
            self.forget(slot);
            evicted.push(key);
        }
        evicted
    }

    pub(crate) fn remove(&mut self, ino: u32, block: u64) {
        if let Some(&slot) = self.slots.get(&(ino, block)) {
            self.forget(slot);
        }
    }

    /// Drops the page of `slot` and frees the slot.
    fn forget(&mut self, slot: usize) {
        self.unlink(slot);
        self.slots.remove(&self.entries[slot].key);
        // The page's memory goes now, not when the slot is reused.
        self.entries[slot].page = Page::Zeros;
        self.free.push(slot);
    }

    fn unlink(&mut self, slot: usize) {
        let (older, newer) = (self.entries[slot].older, self.entries[slot].newer);
        match older {
            NONE => self.oldest = newer,
            older => self.entries[older].newer = newer,
        }
        match newer {
            NONE => self.newest = older,
            newer => self.entries[newer].older = older,
        }
    }

    fn push_newest(&mut self, slot: usize) {
        self.entries[slot].older = self.newest;
        self.entries[slot].newer = NONE;
        match self.newest {
            NONE => self.oldest = slot,
            newest => self.entries[newest].newer = slot,
        }
        self.newest = slot;
    }
}

/// The blocks of one inode that the cache holds, a bit each by block number: a page read or written back sets
/// its bit and an eviction clears it, in any order, where an ordered set rebalanced a tree each time.
#[derive(Debug, Default)]
pub(crate) struct CachedBlocks {
    words: Vec<u64>,
}

impl CachedBlocks {
    pub(crate) fn insert(&mut self, block: u64) {
        let word = (block / 64) as usize;
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << (block % 64);
    }

    /// Clears `block`; whether it was set.
    pub(crate) fn remove(&mut self, block: u64) -> bool {
        let Some(word) = self.words.get_mut((block / 64) as usize) else { return false };
        let bit = 1 << (block % 64);
        let was = *word & bit != 0;
        *word &= !bit;
        was
    }

    /// The blocks set, in ascending order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.words.iter().enumerate().flat_map(|(index, &word)| {
            let mut left = word;
            std::iter::from_fn(move || {
                (left != 0).then(|| {
                    let bit = u64::from(left.trailing_zeros());
                    left &= left - 1;
                    index as u64 * 64 + bit
                })
            })
        })
    }

    /// Clears every block from `first` on and returns them, in ascending order.
    pub(crate) fn split_off(&mut self, first: u64) -> Vec<u64> {
        let dropped: Vec<u64> = self.iter().filter(|&block| block >= first).collect();
        for &block in &dropped {
            self.remove(block);
        }
        self.words.truncate(first.div_ceil(64) as usize);
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(byte: u8) -> Page {
        Page::Bytes(vec![byte; 8].into_boxed_slice())
    }

    #[test]
    fn the_least_recently_used_page_goes_first() {
        let mut cache = PageCache::new(3);
        for block in 0..3 {
            assert!(cache.insert(1, block, page(block as u8)).is_empty());
        }
        // A read makes block 0 the most recent; block 1 is now the oldest.
        assert!(matches!(cache.get(1, 0), Some(Page::Bytes(bytes)) if bytes[0] == 0));
        assert_eq!(cache.insert(1, 3, page(3)), [(1, 1)]);
        // Writing a cached page again makes it the most recent too.
        assert!(cache.insert(1, 2, page(9)).is_empty());
        assert_eq!(cache.insert(2, 0, page(4)), [(1, 0)]);
        cache.remove(1, 3);
        assert!(cache.get(1, 3).is_none() && cache.get(1, 1).is_none());
        assert!(matches!(cache.get(1, 2), Some(Page::Bytes(bytes)) if bytes[0] == 9));
        // A removed page's slot is reused, and the order still holds: block 2 was just read, so (2, 0) is oldest.
        assert!(cache.insert(3, 0, page(5)).is_empty());
        assert_eq!(cache.insert(3, 1, page(6)), [(2, 0)]);
        assert_eq!(cache.entries.len(), 4, "the slab holds at most one entry past the limit");
    }

    #[test]
    fn cached_blocks_are_set_cleared_and_cut_in_order() {
        let mut blocks = CachedBlocks::default();
        for block in [130, 3, 64, 63, 0] {
            blocks.insert(block);
        }
        assert!(blocks.remove(3) && !blocks.remove(3) && !blocks.remove(10_000));
        assert_eq!(blocks.iter().collect::<Vec<_>>(), [0, 63, 64, 130]);
        assert_eq!(blocks.split_off(64), [64, 130]);
        assert_eq!(blocks.iter().collect::<Vec<_>>(), [0, 63]);
    }
}

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
}

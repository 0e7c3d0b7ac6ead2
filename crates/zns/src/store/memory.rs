use std::collections::BTreeMap;

use super::{MediaStore, StoreError};

const PAGE_BYTES: u64 = 4096;

/// Sparse in-memory data: only 4 KiB pages that were written take memory, and a discard frees them.
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    pages: BTreeMap<u64, Box<[u8; PAGE_BYTES as usize]>>,
    size_bytes: u64,
}

impl MemoryStore {
    pub fn new(size_bytes: u64) -> MemoryStore {
        MemoryStore { pages: BTreeMap::new(), size_bytes }
    }

    /// Calls `visit(page, offset_in_page, range_in_buffer)` for each page piece of `[offset, offset + len)`.
    fn for_each_piece(offset_bytes: u64, len: usize, mut visit: impl FnMut(u64, usize, std::ops::Range<usize>)) {
        let mut done = 0usize;
        while done < len {
            let at = offset_bytes + done as u64;
            let in_page = (at % PAGE_BYTES) as usize;
            let piece = (PAGE_BYTES as usize - in_page).min(len - done);
            visit(at / PAGE_BYTES, in_page, done..done + piece);
            done += piece;
        }
    }
}

impl MediaStore for MemoryStore {
    fn read_at(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        debug_assert!(offset_bytes + buf.len() as u64 <= self.size_bytes);
        MemoryStore::for_each_piece(offset_bytes, buf.len(), |page, in_page, range| {
            let len = range.len();
            match self.pages.get(&page) {
                Some(bytes) => buf[range].copy_from_slice(&bytes[in_page..in_page + len]),
                None => buf[range].fill(0),
            }
        });
        Ok(())
    }

    fn write_at(&mut self, offset_bytes: u64, data: &[u8]) -> Result<(), StoreError> {
        debug_assert!(offset_bytes + data.len() as u64 <= self.size_bytes);
        MemoryStore::for_each_piece(offset_bytes, data.len(), |page, in_page, range| {
            let len = range.len();
            let bytes = self.pages.entry(page).or_insert_with(|| Box::new([0; PAGE_BYTES as usize]));
            bytes[in_page..in_page + len].copy_from_slice(&data[range]);
        });
        Ok(())
    }

    /// Zeros take no memory: whole pages are dropped, and only the partial pages at the ends are written.
    fn write_zeroes_at(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        let end = offset_bytes + len_bytes;
        let first_whole = offset_bytes.div_ceil(PAGE_BYTES) * PAGE_BYTES;
        let end_whole = (end / PAGE_BYTES * PAGE_BYTES).max(first_whole);
        let zeros = [0u8; PAGE_BYTES as usize];
        let head = first_whole.min(end) - offset_bytes;
        self.write_at(offset_bytes, &zeros[..head as usize])?;
        self.discard(first_whole, end_whole - first_whole)?;
        if end > end_whole && end_whole >= first_whole {
            self.write_at(end_whole, &zeros[..(end - end_whole) as usize])?;
        }
        Ok(())
    }

    fn discard(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        let first_whole = offset_bytes.div_ceil(PAGE_BYTES);
        let end_whole = (offset_bytes + len_bytes) / PAGE_BYTES;
        if first_whole < end_whole {
            let doomed: Vec<u64> = self.pages.range(first_whole..end_whole).map(|(&page, _)| page).collect();
            for page in doomed {
                self.pages.remove(&page);
            }
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}

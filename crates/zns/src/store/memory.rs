use std::collections::BTreeMap;

use super::{MediaStore, StoreError};

/// Bytes per allocation. Large enough that the allocator maps each chunk on its own (glibc's mmap threshold is
/// 128 KiB) rather than growing a heap in small steps: with 4 KiB pages, a 128 KiB write cost about 200 us of
/// allocator system calls on a real-time device. The kernel still gives memory a page at a time, as it is
/// first touched.
const CHUNK_BYTES: u64 = 256 << 10;

/// Sparse in-memory data: only chunks that were written take memory, and a discard frees whole chunks.
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    chunks: BTreeMap<u64, Box<[u8]>>,
    size_bytes: u64,
}

impl MemoryStore {
    pub fn new(size_bytes: u64) -> MemoryStore {
        MemoryStore { chunks: BTreeMap::new(), size_bytes }
    }

    /// Calls `visit(chunk, offset_in_chunk, range_in_buffer)` for each chunk piece of `[offset, offset + len)`.
    fn for_each_piece(offset_bytes: u64, len: usize, mut visit: impl FnMut(u64, usize, std::ops::Range<usize>)) {
        let mut done = 0usize;
        while done < len {
            let at = offset_bytes + done as u64;
            let in_chunk = (at % CHUNK_BYTES) as usize;
            let piece = (CHUNK_BYTES as usize - in_chunk).min(len - done);
            visit(at / CHUNK_BYTES, in_chunk, done..done + piece);
            done += piece;
        }
    }
}

impl MediaStore for MemoryStore {
    fn read_at(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        debug_assert!(offset_bytes + buf.len() as u64 <= self.size_bytes);
        MemoryStore::for_each_piece(offset_bytes, buf.len(), |chunk, in_chunk, range| {
            let len = range.len();
            match self.chunks.get(&chunk) {
                Some(bytes) => buf[range].copy_from_slice(&bytes[in_chunk..in_chunk + len]),
                None => buf[range].fill(0),
            }
        });
        Ok(())
    }

    fn write_at(&mut self, offset_bytes: u64, data: &[u8]) -> Result<(), StoreError> {
        debug_assert!(offset_bytes + data.len() as u64 <= self.size_bytes);
        MemoryStore::for_each_piece(offset_bytes, data.len(), |chunk, in_chunk, range| {
            let len = range.len();
            let bytes = self.chunks.entry(chunk).or_insert_with(|| vec![0; CHUNK_BYTES as usize].into_boxed_slice());
            bytes[in_chunk..in_chunk + len].copy_from_slice(&data[range]);
        });
        Ok(())
    }

    /// Zeros take no memory: whole chunks are dropped, and the parts of others are zeroed where they exist.
    fn write_zeroes_at(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        debug_assert!(offset_bytes + len_bytes <= self.size_bytes);
        self.discard(offset_bytes, len_bytes)?;
        let len = usize::try_from(len_bytes).unwrap_or(usize::MAX);
        MemoryStore::for_each_piece(offset_bytes, len, |chunk, in_chunk, range| {
            if let Some(bytes) = self.chunks.get_mut(&chunk) {
                bytes[in_chunk..in_chunk + range.len()].fill(0);
            }
        });
        Ok(())
    }

    fn discard(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        let first_whole = offset_bytes.div_ceil(CHUNK_BYTES);
        let end_whole = (offset_bytes + len_bytes) / CHUNK_BYTES;
        if first_whole < end_whole {
            let doomed: Vec<u64> = self.chunks.range(first_whole..end_whole).map(|(&chunk, _)| chunk).collect();
            for chunk in doomed {
                self.chunks.remove(&chunk);
            }
        }
        Ok(())
    }

    /// Whole chunks are freed, the pieces of chunks at either end zeroed.
    fn deallocate(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        let end = offset_bytes + len_bytes;
        let head_end = end.min(offset_bytes.next_multiple_of(CHUNK_BYTES));
        let tail_start = (end / CHUNK_BYTES * CHUNK_BYTES).max(head_end);
        self.write_zeroes_at(offset_bytes, head_end - offset_bytes)?;
        self.discard(head_end, tail_start - head_end)?;
        self.write_zeroes_at(tail_start, end - tail_start)
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_crosses_chunks_and_zeros_and_discards_free_whole_chunks_only() {
        let size = 4 * CHUNK_BYTES;
        let mut store = MemoryStore::new(size);
        let data: Vec<u8> = (0..CHUNK_BYTES + 8192).map(|i| (i % 251) as u8 + 1).collect();
        let at = CHUNK_BYTES - 4096;
        store.write_at(at, &data).expect("write");
        let mut back = vec![0u8; data.len()];
        store.read_at(at, &mut back).expect("read");
        assert_eq!(back, data, "a write across two chunk boundaries reads back");
        assert_eq!(store.chunks.len(), 3);

        store.write_zeroes_at(at, 8192).expect("zeroes");
        store.read_at(at, &mut back[..8192]).expect("read");
        assert!(back[..8192].iter().all(|&byte| byte == 0), "zeroes read as zeros inside a kept chunk");
        store.discard(CHUNK_BYTES, CHUNK_BYTES).expect("discard");
        assert_eq!(store.chunks.len(), 2, "the whole middle chunk is freed");
        let mut tail = vec![0u8; 4096];
        store.read_at(2 * CHUNK_BYTES, &mut tail).expect("read");
        assert_eq!(tail, data[(CHUNK_BYTES + 4096) as usize..(CHUNK_BYTES + 8192) as usize], "the last chunk stays");
    }
}

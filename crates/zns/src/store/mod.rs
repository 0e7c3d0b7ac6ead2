//! Where a namespace keeps its data: the `MediaStore` trait, its three stores, and a fault-injecting wrapper for
//! tests.
//!
//! A store holds bytes only; zone state lives in the namespace (and, for a device image, in its zone journal).
//! The namespace never reads a store above a zone's write pointer, so a store may return anything there.

mod faulty;
mod file;
mod memory;
mod null;

pub use faulty::FaultyStore;
pub use file::FileStore;
pub use memory::MemoryStore;
pub use null::NullStore;

/// A failure of the medium under the namespace; the namespace turns it into Write Fault or Unrecovered Read Error
/// and keeps the cause for `ZonedNamespace::take_host_fault`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("store I/O failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Byte storage under a namespace. Offsets and lengths are in bytes from the namespace start. `Send`, so that
/// a real-time device can be driven from whichever thread submits to it.
pub trait MediaStore: Send {
    /// Fills `buf` with the bytes at `offset_bytes`; bytes never written read as zeros.
    fn read_at(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), StoreError>;
    /// Stores `data` at `offset_bytes`; on error, any part of it may or may not have been stored.
    fn write_at(&mut self, offset_bytes: u64, data: &[u8]) -> Result<(), StoreError>;
    /// Stores `len_bytes` zeros at `offset_bytes`.
    fn write_zeroes_at(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let mut done = 0;
        while done < len_bytes {
            let chunk = (len_bytes - done).min(ZEROS.len() as u64);
            self.write_at(offset_bytes + done, &ZEROS[..chunk as usize])?;
            done += chunk;
        }
        Ok(())
    }
    /// Gives back the space of a range whose contents no longer matter (a zone reset).
    fn discard(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError>;
    /// Makes a range read as zeros, giving back what space it can (a conventional namespace's Deallocate).
    fn deallocate(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        self.write_zeroes_at(offset_bytes, len_bytes)
    }
    /// Makes every completed write durable (Flush).
    fn sync(&mut self) -> Result<(), StoreError>;
    /// The byte ranges that may hold data, in order (a sparse file's extents), for a layer that rebuilds what
    /// it keeps about the data from the data; empty when the store holds none it can tell of.
    fn data_ranges(&self) -> Result<Vec<(u64, u64)>, StoreError> {
        Ok(Vec::new())
    }
}

/// Lets a namespace over a boxed store (a device image picks its store at run time) be printed.
impl std::fmt::Debug for dyn MediaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MediaStore")
    }
}

impl<S: MediaStore + ?Sized> MediaStore for Box<S> {
    fn read_at(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        (**self).read_at(offset_bytes, buf)
    }
    fn write_at(&mut self, offset_bytes: u64, data: &[u8]) -> Result<(), StoreError> {
        (**self).write_at(offset_bytes, data)
    }
    fn write_zeroes_at(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        (**self).write_zeroes_at(offset_bytes, len_bytes)
    }
    fn discard(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        (**self).discard(offset_bytes, len_bytes)
    }
    fn deallocate(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        (**self).deallocate(offset_bytes, len_bytes)
    }
    fn sync(&mut self) -> Result<(), StoreError> {
        (**self).sync()
    }
    fn data_ranges(&self) -> Result<Vec<(u64, u64)>, StoreError> {
        (**self).data_ranges()
    }
}

#[cfg(test)]
mod contract_tests {
    //! The same contract checked on every store that keeps data.
    use super::*;

    fn keeps_what_was_written(store: &mut dyn MediaStore) {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        store.write_at(3000, &data).expect("write");
        let mut back = vec![0xeeu8; 10_000];
        store.read_at(3000, &mut back).expect("read");
        assert_eq!(back, data);

        let mut unwritten = vec![0xeeu8; 5000];
        store.read_at(1 << 20, &mut unwritten).expect("read unwritten");
        assert!(unwritten.iter().all(|&b| b == 0), "never-written bytes read as zeros");

        store.write_zeroes_at(4000, 100).expect("write zeroes");
        store.read_at(3000, &mut back).expect("read");
        assert!(back[1000..1100].iter().all(|&b| b == 0));
        assert_eq!(back[1100..], data[1100..]);

        store.write_at(300_000, &data).expect("write");
        store.deallocate(300_100, 600_000).expect("deallocate");
        let mut after = vec![0xeeu8; 10_000];
        store.read_at(300_000, &mut after).expect("read");
        assert_eq!(after[..100], data[..100], "bytes before the range stay");
        assert!(after[100..].iter().all(|&b| b == 0), "a deallocated range reads as zeros, chunk edges included");

        store.discard(0, 1 << 20).expect("discard");
        store.sync().expect("sync");
    }

    #[test]
    fn memory_store_keeps_data() {
        keeps_what_was_written(&mut MemoryStore::new(2 << 20));
    }

    #[test]
    fn file_store_keeps_data() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = FileStore::create(&dir.path().join("data"), 2 << 20).expect("create");
        keeps_what_was_written(&mut store);
    }

    #[test]
    fn null_store_reads_zeros() {
        let mut store = NullStore;
        store.write_at(0, &[1, 2, 3]).expect("write");
        let mut back = [9u8; 3];
        store.read_at(0, &mut back).expect("read");
        assert_eq!(back, [0, 0, 0]);
    }
}

//! A store that fails on a countdown, for tests of what a namespace does when its medium fails (as redb's and
//! TigerBeetle's tests inject faults): after `fail_after` more mutating operations (write, write zeroes,
//! discard, sync) succeed, every mutating operation fails with ENOSPC (a full host disk) until `heal` is called, and any
//! part of a failed write may or may not have been stored (the trait's contract), so the store keeps the first
//! half of a failed write's bytes. Reads pass through, so a test can check what survived.

use super::{MediaStore, StoreError};

#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: S,
    /// Mutating operations that still succeed; `None`: no fault armed.
    remaining: Option<u64>,
    failures: u64,
}

impl<S: MediaStore> FaultyStore<S> {
    /// `inner` with a fault armed after `fail_after` successful mutating operations.
    pub fn new(inner: S, fail_after: u64) -> FaultyStore<S> {
        FaultyStore { inner, remaining: Some(fail_after), failures: 0 }
    }

    /// Disarms the fault: every operation succeeds again.
    pub fn heal(&mut self) {
        self.remaining = None;
    }

    /// Operations failed so far.
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// Counts one mutating operation down; an error once the countdown has run out.
    fn tick(&mut self) -> Result<(), StoreError> {
        match &mut self.remaining {
            Some(0) => {
                self.failures += 1;
                Err(StoreError::Io(std::io::Error::from_raw_os_error(libc::ENOSPC)))
            }
            Some(left) => {
                *left -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }
}

impl<S: MediaStore> MediaStore for FaultyStore<S> {
    fn read_at(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        self.inner.read_at(offset_bytes, buf)
    }

    fn write_at(&mut self, offset_bytes: u64, data: &[u8]) -> Result<(), StoreError> {
        if let Err(error) = self.tick() {
            // A torn write: what reached the medium before the fault.
            self.inner.write_at(offset_bytes, &data[..data.len() / 2])?;
            return Err(error);
        }
        self.inner.write_at(offset_bytes, data)
    }

    fn discard(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        self.tick()?;
        self.inner.discard(offset_bytes, len_bytes)
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        self.tick()?;
        self.inner.sync()
    }
    fn data_ranges(&self) -> Result<Vec<(u64, u64)>, StoreError> {
        self.inner.data_ranges()
    }
}

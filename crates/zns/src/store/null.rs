use super::{MediaStore, StoreError};

/// Keeps no data: writes vanish and reads return zeros. For large, fast simulations where only timing and
/// zone state matter.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullStore;

impl MediaStore for NullStore {
    fn read_at(&self, _offset_bytes: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        buf.fill(0);
        Ok(())
    }
    fn write_at(&mut self, _offset_bytes: u64, _data: &[u8]) -> Result<(), StoreError> {
        Ok(())
    }
    fn write_zeroes_at(&mut self, _offset_bytes: u64, _len_bytes: u64) -> Result<(), StoreError> {
        Ok(())
    }
    fn discard(&mut self, _offset_bytes: u64, _len_bytes: u64) -> Result<(), StoreError> {
        Ok(())
    }
    fn deallocate(&mut self, _offset_bytes: u64, _len_bytes: u64) -> Result<(), StoreError> {
        Ok(())
    }
    fn sync(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}

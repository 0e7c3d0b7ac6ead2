use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

use super::{MediaStore, StoreError};

/// Data in a sparse file the size of the namespace, so that an image costs only the blocks written.
/// Discard punches holes; where the file system cannot, the bytes stay and the namespace hides them.
#[derive(Debug)]
pub struct FileStore {
    file: File,
}

impl FileStore {
    /// Creates (or truncates) the data file at `path` with `size_bytes` of holes.
    pub fn create(path: &Path, size_bytes: u64) -> std::io::Result<FileStore> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
        file.set_len(size_bytes)?;
        Ok(FileStore { file })
    }

    /// A data file of `size_bytes` of holes in the temporary directory, unlinked at once: it lasts as long as
    /// the store.
    pub fn temporary(size_bytes: u64) -> std::io::Result<FileStore> {
        let file = tempfile::tempfile()?;
        file.set_len(size_bytes)?;
        Ok(FileStore { file })
    }

    /// Opens an existing data file (for writing too if `writable`), which must be exactly `size_bytes` long.
    pub fn open(path: &Path, size_bytes: u64, writable: bool) -> std::io::Result<FileStore> {
        let file = OpenOptions::new().read(true).write(writable).open(path)?;
        let actual = file.metadata()?.len();
        if actual != size_bytes {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} is {actual} bytes long; the namespace needs {size_bytes}", path.display()),
            ));
        }
        Ok(FileStore { file })
    }
}

impl FileStore {
    /// Gives a range's space back to the file system; false when it cannot punch holes.
    fn punch_hole(&self, offset_bytes: u64, len_bytes: u64) -> Result<bool, StoreError> {
        let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset_bytes), libc::off_t::try_from(len_bytes)) else {
            return Ok(false);
        };
        // SAFETY: fallocate only reads its integer arguments; the descriptor is owned by `self.file`.
        let result = unsafe {
            libc::fallocate(self.file.as_raw_fd(), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset, len)
        };
        if result == 0 {
            return Ok(true);
        }
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() == Some(libc::EOPNOTSUPP) {
            Ok(false)
        } else {
            Err(error.into())
        }
    }
}

impl MediaStore for FileStore {
    /// The file's data extents, found with `SEEK_DATA` and `SEEK_HOLE`: holes were never written (or were
    /// discarded).
    fn data_ranges(&self) -> Result<Vec<(u64, u64)>, StoreError> {
        let fd = self.file.as_raw_fd();
        let end = libc::off_t::try_from(self.file.metadata()?.len()).unwrap_or(libc::off_t::MAX);
        let mut ranges = Vec::new();
        let mut at: libc::off_t = 0;
        while at < end {
            // SAFETY: lseek only reads its integer arguments; the descriptor is owned by `self.file`.
            let data = unsafe { libc::lseek(fd, at, libc::SEEK_DATA) };
            if data < 0 {
                let error = std::io::Error::last_os_error();
                // ENXIO: no data past `at`.
                if error.raw_os_error() == Some(libc::ENXIO) {
                    break;
                }
                return Err(error.into());
            }
            // SAFETY: as above.
            let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
            if hole < 0 {
                return Err(std::io::Error::last_os_error().into());
            }
            ranges.push((data as u64, hole as u64));
            at = hole;
        }
        Ok(ranges)
    }

    fn read_at(&self, offset_bytes: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        Ok(self.file.read_exact_at(buf, offset_bytes)?)
    }

    fn write_at(&mut self, offset_bytes: u64, data: &[u8]) -> Result<(), StoreError> {
        Ok(self.file.write_all_at(data, offset_bytes)?)
    }

    fn discard(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        // A file system without hole punching keeps the bytes; the namespace never reads above a write pointer,
        // so they stay invisible.
        self.punch_hole(offset_bytes, len_bytes).map(|_| ())
    }

    fn deallocate(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), StoreError> {
        // A punched hole reads as zeros and costs one call however long it is (a whole-device discard from
        // mkfs); only a file system without hole punching has the zeros written.
        if self.punch_hole(offset_bytes, len_bytes)? {
            return Ok(());
        }
        self.write_zeroes_at(offset_bytes, len_bytes)
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        Ok(self.file.sync_data()?)
    }
}

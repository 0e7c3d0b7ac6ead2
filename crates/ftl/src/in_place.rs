//! A write-in-place mapping, for media that program a page where it lies without erasing it first: 3D XPoint
//! in Intel's Optane SSDs, whose "direct read and in-place write operations" leave no garbage to collect
//! (AnandTech, "The Intel Optane SSD 900p Review", 2017). Logical page `n` lives at physical page `n` for good:
//! no map, no spare blocks, no erases; a write is acknowledged when its program ends (the 900P has no DRAM
//! buffer, same source).

use zonelab_media::OpSource;

use crate::config::{FtlConfig, FtlError};
use crate::flash::Flash;
use crate::ftl::FtlCounters;

/// The mapping: which pages hold data (the rest read as never written, without flash), and its counters.
pub struct InPlace {
    config: FtlConfig,
    /// One bit a page: written and not deallocated since.
    written: Vec<u64>,
    counters: FtlCounters,
}

impl InPlace {
    /// A mapping of `config`'s logical pages onto as many physical pages, `config.pages_per_block` a block;
    /// a program unit must be one page, the media's write granularity.
    pub fn new(config: FtlConfig) -> Result<InPlace, FtlError> {
        if config.pages_per_unit != 1 || config.pages_per_block == 0 || config.logical_pages == 0 {
            return Err(FtlError::Config(format!(
                "a write-in-place mapping programs single pages: {} pages a program unit (must be 1), {} a block",
                config.pages_per_unit, config.pages_per_block
            )));
        }
        Ok(InPlace {
            written: vec![0; config.logical_pages.div_ceil(64) as usize],
            config,
            counters: Default::default(),
        })
    }

    /// Blocks the mapping takes: the logical pages' own, nothing spare.
    pub fn blocks(config: &FtlConfig) -> u32 {
        config.logical_pages.div_ceil(u64::from(config.pages_per_block.max(1))) as u32
    }

    pub fn counters(&self) -> &FtlCounters {
        &self.counters
    }

    fn check_lpn(&self, lpn: u64) -> Result<(), FtlError> {
        if lpn >= self.config.logical_pages {
            return Err(FtlError::OutOfRange { lpn, pages: self.config.logical_pages });
        }
        Ok(())
    }

    /// Page `lpn` has been written and not deallocated since.
    pub fn is_written(&self, lpn: u64) -> bool {
        self.written[(lpn / 64) as usize] & (1 << (lpn % 64)) != 0
    }

    fn set_written(&mut self, lpn: u64, written: bool) {
        let (word, bit) = ((lpn / 64) as usize, 1u64 << (lpn % 64));
        self.written[word] = if written { self.written[word] | bit } else { self.written[word] & !bit };
    }

    fn place(&self, lpn: u64) -> (u32, u64) {
        let ppb = u64::from(self.config.pages_per_block);
        ((lpn / ppb) as u32, lpn % ppb)
    }

    /// Programs logical page `lpn` in place once its data is in the controller at `now`; returns when the
    /// program ends.
    pub fn write(&mut self, flash: &mut impl Flash, now: u64, lpn: u64) -> Result<u64, FtlError> {
        self.check_lpn(lpn)?;
        let (block, unit) = self.place(lpn);
        self.set_written(lpn, true);
        self.counters.host_pages_written += 1;
        Ok(flash.program(now, block, unit, now, OpSource::HostWrite))
    }

    /// Reads `count` logical pages from `first` at `now`; returns when their data is in the controller (at
    /// once for pages never written or deallocated).
    pub fn read_range(&mut self, flash: &mut impl Flash, now: u64, first: u64, count: u64) -> Result<u64, FtlError> {
        self.check_lpn(first + count.max(1) - 1)?;
        self.counters.host_pages_read += count;
        let page_bytes = self.config.page_bytes;
        let mut done = now;
        for lpn in (first..first + count).filter(|&lpn| self.is_written(lpn)) {
            let (block, unit) = self.place(lpn);
            done = done.max(flash.sense(now, now, block, unit, 0, page_bytes, OpSource::HostRead));
        }
        Ok(done)
    }

    /// Deallocates logical page `lpn`: it reads as never written.
    pub fn trim(&mut self, lpn: u64) -> Result<(), FtlError> {
        self.check_lpn(lpn)?;
        if self.is_written(lpn) {
            self.counters.pages_trimmed += 1;
        }
        self.set_written(lpn, false);
        Ok(())
    }

    /// Marks every page of `lpns` written, with no flash time: the media holds data there as after a fill.
    /// The counters then start from zero.
    pub fn precondition(&mut self, lpns: impl Iterator<Item = u64>) -> Result<(), FtlError> {
        lpns.into_iter().try_for_each(|lpn| self.check_lpn(lpn).map(|()| self.set_written(lpn, true)))
    }

    /// Bytes of the mapping's state: its bitmap.
    pub fn memory_bytes(&self) -> usize {
        self.written.len() * std::mem::size_of::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flash::Untimed;

    fn config() -> FtlConfig {
        let mut config = FtlConfig::with_over_provisioning(1 << 20, 0.0, 16, 1);
        config.write_buffer_units = 1;
        config
    }

    /// Counts the flash operations it is asked for, each taking 10 time units.
    #[derive(Default)]
    struct Counting {
        programs: Vec<(u32, u64)>,
        senses: Vec<(u32, u64)>,
    }

    impl Flash for Counting {
        fn sense(&mut self, _: u64, start: u64, block: u32, unit: u64, _: u64, _: u64, _: OpSource) -> u64 {
            self.senses.push((block, unit));
            start + 10
        }
        fn program(&mut self, _: u64, block: u32, unit: u64, ready: u64, _: OpSource) -> u64 {
            self.programs.push((block, unit));
            ready + 10
        }
        fn erase(&mut self, _: u64, _: u64, _: u32, _: OpSource) -> u64 {
            panic!("a write-in-place mapping never erases")
        }
    }

    #[test]
    fn a_page_is_programmed_where_it_lies_and_overwritten_there() {
        let mut mapping = InPlace::new(config()).expect("in range");
        let mut flash = Counting::default();
        assert_eq!(mapping.write(&mut flash, 5, 17).expect("in range"), 15, "acknowledged when the program ends");
        mapping.write(&mut flash, 20, 17).expect("in range");
        assert_eq!(flash.programs, vec![(1, 1), (1, 1)], "page 17 is unit 1 of block 1, both times");
        assert_eq!(mapping.counters().write_amplification(), 1.0);
    }

    #[test]
    fn only_written_pages_reach_flash_and_a_trim_unwrites() {
        let mut mapping = InPlace::new(config()).expect("in range");
        let mut flash = Counting::default();
        mapping.write(&mut flash, 0, 3).expect("in range");
        assert_eq!(mapping.read_range(&mut flash, 100, 0, 8).expect("in range"), 110);
        assert_eq!(flash.senses, vec![(0, 3)]);
        mapping.trim(3).expect("in range");
        assert_eq!(mapping.read_range(&mut flash, 200, 3, 1).expect("in range"), 200, "a trimmed page needs no flash");
        assert_eq!(mapping.counters().pages_trimmed, 1);
        assert!(matches!(mapping.read_range(&mut Untimed, 0, 255, 2), Err(FtlError::OutOfRange { lpn: 256, .. })));
    }

    #[test]
    fn program_units_larger_than_a_page_are_refused() {
        let mut config = config();
        config.pages_per_unit = 2;
        assert!(matches!(InPlace::new(config), Err(FtlError::Config(_))));
    }
}

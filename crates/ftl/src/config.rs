//! What an FTL is built with: the logical space it exports, the physical blocks behind it (the logical space
//! plus over-provisioning) and its garbage collection thresholds.

use serde::{Deserialize, Serialize};

/// How garbage collection picks the block to empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VictimPolicy {
    #[default]
    /// The full block with the fewest valid pages: the least copying now (NVMeVirt's conv_ftl, FEMU's BBSSD).
    Greedy,
    /// The block with the best `(1 - u) / 2u x age` (Rosenblum and Ousterhout's cleaning policy for LFS, as
    /// SSD papers use it): old, mostly invalid blocks first, so that cold data is copied less often.
    CostBenefit,
}

/// A page-mapped FTL's shape. Pages are mapping units (the host page, 4 KiB); a block is the erase unit of
/// the FTL, one flash block on each plane of a stripe (a superblock), so that its pages spread over dies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FtlConfig {
    /// Logical pages the namespace exports.
    pub logical_pages: u64,
    /// Bytes of one page: 4 KiB, NVMeVirt's conv_ftl (`secs_per_pg` x `secsz`) and most SSDs' mapping unit.
    pub page_bytes: u64,
    /// Pages per block.
    pub pages_per_block: u32,
    /// Pages per program unit: a unit is programmed once all its pages are written (the write buffer holds
    /// the rest).
    pub pages_per_unit: u32,
    /// Physical blocks: the logical pages' blocks plus over-provisioning.
    pub blocks: u32,
    pub victim: VictimPolicy,
    /// A write that needs a new block while no more than this many are free collects garbage first
    /// (foreground GC). NVMeVirt's conv_ftl collects when free lines fall to `gc_thres_lines_high` (2).
    pub foreground_free_blocks: u32,
    /// Idle time collects until this many blocks are free (background GC).
    pub background_free_blocks: u32,
    /// Host write streams, each with an open block of its own (NVMe's streams directive); garbage collection
    /// writes to one more.
    pub streams: u32,
    /// Program units a stream's write buffer holds: a write that fills a unit completes once the program of
    /// the unit this many before it has ended. 1 (NVMeVirt's conv_ftl): one unit gathers while one programs.
    pub write_buffer_units: u32,
    /// Units garbage collection may have sensed and not yet programmed: as many as a block's stripe has planes,
    /// so that every die works on a collection (NVMeVirt's conv_ftl books a collection's reads and programs on
    /// every LUN at once), while none senses far ahead of its programs.
    pub collection_units_in_flight: u32,
    /// Pages the controller senses ahead of a sequential read stream into its memory; 0 for none.
    pub read_ahead_pages: u32,
}

/// The most page entries the logical and physical maps may hold together (4 bytes each: 4 GiB), so that a
/// capacity typed wrong is refused with a message instead of aborting the process on the allocation.
pub const MAX_MAP_ENTRIES: u64 = 1 << 30;

/// Why a configuration or a command is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FtlError {
    #[error("invalid FTL configuration: {0}")]
    Config(String),
    #[error(
        "the FTL's maps of {logical} logical and {physical} physical pages would take {} GiB of memory; zonelab \
         keeps them within 4 GiB ({MAX_MAP_ENTRIES} entries of 4 bytes: about 2 TB of 4 KiB pages)",
        ((logical + physical) * 4) >> 30
    )]
    MapTooLarge { logical: u64, physical: u64 },
    #[error("logical page {lpn} is past the namespace's {pages} pages")]
    OutOfRange { lpn: u64, pages: u64 },
    #[error("stream {stream} is past the {streams} streams")]
    NoSuchStream { stream: u32, streams: u32 },
    /// A saved state (`Ftl::from_saved`) that does not describe an FTL of this configuration.
    #[error("the saved FTL state: {0}")]
    Saved(String),
}

impl FtlConfig {
    /// `logical_bytes` exported, with `over_provisioning` more physical space (0.07 is 7 %: physical =
    /// logical x 1.07), in blocks of `pages_per_block`; greedy victims, one stream, NVMeVirt's thresholds.
    pub fn with_over_provisioning(
        logical_bytes: u64,
        over_provisioning: f64,
        pages_per_block: u32,
        pages_per_unit: u32,
    ) -> FtlConfig {
        const PAGE_BYTES: u64 = 4096;
        let logical_pages = logical_bytes / PAGE_BYTES;
        let physical_pages = (logical_pages as f64 * (1.0 + over_provisioning)).ceil() as u64;
        let blocks = physical_pages.div_ceil(u64::from(pages_per_block.max(1)));
        FtlConfig {
            logical_pages,
            page_bytes: PAGE_BYTES,
            pages_per_block,
            pages_per_unit,
            blocks: u32::try_from(blocks).unwrap_or(u32::MAX),
            victim: VictimPolicy::Greedy,
            foreground_free_blocks: 2,
            background_free_blocks: 8,
            streams: 1,
            write_buffer_units: 1,
            collection_units_in_flight: 1,
            read_ahead_pages: 0,
        }
    }

    /// Over-provisioning as a fraction of the logical space: physical / logical - 1.
    pub fn over_provisioning(&self) -> f64 {
        (u64::from(self.blocks) * u64::from(self.pages_per_block)) as f64 / self.logical_pages as f64 - 1.0
    }

    /// Checks that the shape can work: every logical page has a home with the blocks the open streams and
    /// garbage collection hold aside, page numbers fit 32 bits, units divide blocks.
    pub fn validate(&self) -> Result<(), FtlError> {
        let bad = |reason: String| Err(FtlError::Config(reason));
        if self.logical_pages == 0
            || self.pages_per_block == 0
            || self.pages_per_unit == 0
            || self.streams == 0
            || self.write_buffer_units == 0
            || self.collection_units_in_flight == 0
        {
            return bad(
                "logical pages, pages per block, pages per unit, streams, write buffer units and collection units in flight \
                 must be positive"
                    .into(),
            );
        }
        if !self.pages_per_block.is_multiple_of(self.pages_per_unit) {
            return bad(format!(
                "a block's {} pages are not whole units of {} pages",
                self.pages_per_block, self.pages_per_unit
            ));
        }
        let physical_pages = u64::from(self.blocks) * u64::from(self.pages_per_block);
        if physical_pages >= u64::from(u32::MAX) {
            return bad(format!("{physical_pages} physical pages do not fit 32-bit page numbers"));
        }
        let entries = self.logical_pages + physical_pages;
        if entries > MAX_MAP_ENTRIES {
            return Err(FtlError::MapTooLarge { logical: self.logical_pages, physical: physical_pages });
        }
        // Open blocks (one per stream and one for GC) and the foreground reserve, which the collection's next
        // block comes from.
        let aside = u64::from(self.streams + 1 + self.foreground_free_blocks);
        let needed = self.logical_pages.div_ceil(u64::from(self.pages_per_block)) + aside;
        if u64::from(self.blocks) < needed {
            return bad(format!(
                "{} blocks hold {} logical pages only with {needed}: the over-provisioning is too small for the \
                 open blocks and the garbage collection reserve",
                self.blocks, self.logical_pages
            ));
        }
        if self.background_free_blocks < self.foreground_free_blocks {
            return bad("background GC must aim at least as high as foreground GC".into());
        }
        Ok(())
    }
}

//! The page-mapped FTL: the logical-to-physical map, writes into each stream's open block, reads, trims, and
//! garbage collection that moves valid pages through the same flash (so it competes with host I/O for dies
//! and channels by mechanism, not by a penalty).

mod saved;

use std::collections::VecDeque;

use serde::Serialize;
use zonelab_media::OpSource;

use crate::blocks::{BlockState, Blocks};
use crate::config::{FtlConfig, FtlError};
use crate::flash::{Flash, Untimed};

/// No physical page: a logical page never written, or trimmed.
const UNMAPPED: u32 = u32::MAX;
/// No logical page: a physical page that holds nothing live.
const INVALID: u32 = u32::MAX;

/// How many of a command's first pages' logical map entries the FTL asks for before its work on them begins.
const PREFETCH_PAGES: u32 = 16;

/// Asks the processor to bring `slot`'s cache line in ahead of its use.
#[inline]
fn prefetch<T>(slot: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing into the program and faults on no address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((slot as *const T).cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = slot;
}

/// What the FTL did, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FtlCounters {
    pub host_pages_written: u64,
    pub host_pages_read: u64,
    pub pages_trimmed: u64,
    /// Valid pages garbage collection copied to another block.
    pub gc_pages_moved: u64,
    /// Blocks garbage collection emptied and erased.
    pub gc_blocks_erased: u64,
    /// Collections a write waited for (free blocks ran short), and ones idle time ran.
    pub foreground_collections: u64,
    pub background_collections: u64,
}

impl FtlCounters {
    /// Pages programmed per page the host wrote: 1 without garbage collection.
    pub fn write_amplification(&self) -> f64 {
        if self.host_pages_written == 0 {
            return 1.0;
        }
        (self.host_pages_written + self.gc_pages_moved) as f64 / self.host_pages_written as f64
    }

    /// What was counted since `earlier` (a snapshot of the same counters).
    pub fn since(&self, earlier: &FtlCounters) -> FtlCounters {
        FtlCounters {
            host_pages_written: self.host_pages_written - earlier.host_pages_written,
            host_pages_read: self.host_pages_read - earlier.host_pages_read,
            pages_trimmed: self.pages_trimmed - earlier.pages_trimmed,
            gc_pages_moved: self.gc_pages_moved - earlier.gc_pages_moved,
            gc_blocks_erased: self.gc_blocks_erased - earlier.gc_blocks_erased,
            foreground_collections: self.foreground_collections - earlier.foreground_collections,
            background_collections: self.background_collections - earlier.background_collections,
        }
    }
}

/// A block taking writes, with the write buffer's view of its unit being gathered.
#[derive(Clone, Copy, Debug)]
struct OpenBlock {
    block: u32,
    /// When the data of the unit being gathered is all in the controller.
    unit_ready_ns: u64,
}

/// The controller's read-ahead of one sequential read stream: the pages it holds, from `first` on, and when
/// each is in its memory.
#[derive(Default)]
struct ReadAhead {
    /// Where the stream's next read is expected.
    next: Option<u64>,
    first: u64,
    ready: VecDeque<u64>,
}

impl ReadAhead {
    fn end(&self) -> u64 {
        self.first + self.ready.len() as u64
    }
}

/// A page-mapped FTL: the mapping and its blocks. The flash it drives is passed to each call that reaches
/// flash, so that it can be one device's flash model shared with other namespaces.
pub struct Ftl {
    config: FtlConfig,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    blocks: Blocks,
    /// Each host stream's open block, then garbage collection's.
    open: Vec<Option<OpenBlock>>,
    /// When each stream's programs in the write buffer end, oldest first (at most `write_buffer_units`; the
    /// collection's, at most `collection_units_in_flight`).
    programs: Vec<VecDeque<u64>>,
    read_ahead: ReadAhead,
    counters: FtlCounters,
    /// The logical pages of the unit garbage collection is moving (kept for its allocation).
    moving: Vec<u32>,
    /// Host pages still to be written before foreground collection looks at the free blocks again (not kept
    /// in a saved state, like the write buffer's programs: a loaded or preconditioned FTL looks at its first
    /// write).
    write_credits: u64,
}

impl Ftl {
    pub fn new(config: FtlConfig) -> Result<Ftl, FtlError> {
        config.validate()?;
        let physical_pages = config.blocks as usize * config.pages_per_block as usize;
        Ok(Ftl {
            l2p: vec![UNMAPPED; config.logical_pages as usize],
            p2l: vec![INVALID; physical_pages],
            blocks: Blocks::new(config.blocks),
            open: vec![None; config.streams as usize + 1],
            programs: vec![VecDeque::new(); config.streams as usize + 1],
            read_ahead: ReadAhead::default(),
            counters: FtlCounters::default(),
            moving: Vec::new(),
            write_credits: 0,
            config,
        })
    }

    pub fn config(&self) -> &FtlConfig {
        &self.config
    }

    pub fn counters(&self) -> &FtlCounters {
        &self.counters
    }

    /// Erases of each block so far.
    pub fn erase_counts(&self) -> &[u32] {
        &self.blocks.erase_count
    }

    pub fn free_blocks(&self) -> u32 {
        self.blocks.free.len() as u32
    }

    /// The physical page holding `lpn`, if any.
    pub fn lookup(&self, lpn: u64) -> Option<u64> {
        let ppn = *self.l2p.get(lpn as usize)?;
        (ppn != UNMAPPED).then_some(u64::from(ppn))
    }

    /// Asks for the map entries of the first pages of `lpns` before a command's work on them begins, so that
    /// their misses (the map is larger than the caches, and a random write's entry is rarely in them) overlap the
    /// command's other work instead of waiting at its end.
    pub fn prefetch_map(&self, lpns: std::ops::Range<u64>) {
        for lpn in lpns.take(PREFETCH_PAGES as usize) {
            if let Some(entry) = self.l2p.get(lpn as usize) {
                prefetch(entry);
            }
        }
    }

    /// Bytes of the FTL's state: the two maps and the block table.
    pub fn memory_bytes(&self) -> usize {
        let per_block =
            std::mem::size_of::<BlockState>() + 3 * std::mem::size_of::<u32>() + 2 * std::mem::size_of::<u64>();
        (self.l2p.len() + self.p2l.len()) * std::mem::size_of::<u32>() + self.blocks.state.len() * per_block
    }

    fn check_lpn(&self, lpn: u64) -> Result<(), FtlError> {
        if lpn >= self.config.logical_pages {
            return Err(FtlError::OutOfRange { lpn, pages: self.config.logical_pages });
        }
        Ok(())
    }

    /// Writes logical page `lpn` through `stream` at `now` (its data in the controller); returns when the
    /// write may complete: at once while the buffer has room, after the stream's previous program when a
    /// unit fills, after garbage collection when free blocks ran short.
    pub fn write(&mut self, flash: &mut impl Flash, now: u64, lpn: u64, stream: u32) -> Result<u64, FtlError> {
        self.check_lpn(lpn)?;
        if stream >= self.config.streams {
            return Err(FtlError::NoSuchStream { stream, streams: self.config.streams });
        }
        let mut done = now;
        // Foreground collection keeps pace with the host: once the host has written as many pages as the last
        // collection freed, one more victim is collected if free blocks are low (NVMeVirt's conv_ftl.c, its
        // write credits: `check_and_refill_write_credit`, `forground_gc`). The write does not wait for it: the
        // collection's reads and programs take the dies and channels the host's programs then queue for.
        if self.write_credits == 0 {
            self.write_credits = u64::from(self.config.pages_per_block);
            if self.free_blocks() <= self.config.foreground_free_blocks + 1 {
                let moved = self.counters.gc_pages_moved;
                if self.collect_one(flash, now, now).is_some() {
                    self.counters.foreground_collections += 1;
                    let freed = u64::from(self.config.pages_per_block) - (self.counters.gc_pages_moved - moved);
                    self.write_credits = freed.max(1);
                }
            }
        }
        self.write_credits -= 1;
        // Should the host still run out of blocks (a stream opening its first, a victim with nothing to free), it
        // waits for collections until the reserve is back.
        if self.open[stream as usize].is_none() && self.free_blocks() <= self.config.foreground_free_blocks {
            let collected = self.collect_until(flash, now, self.config.foreground_free_blocks + 1);
            if collected.is_some() {
                self.counters.foreground_collections += 1;
            }
            done = done.max(collected.unwrap_or(now));
        }
        self.invalidate(lpn);
        done = done.max(self.append(flash, now, stream, &[lpn as u32], now, OpSource::HostWrite));
        self.counters.host_pages_written += 1;
        Ok(done)
    }

    /// Reads logical page `lpn` at `now`; returns when its data is in the controller (at once for a page
    /// never written, trimmed, or still in the write buffer).
    pub fn read(&mut self, flash: &mut impl Flash, now: u64, lpn: u64) -> Result<u64, FtlError> {
        self.read_range(flash, now, lpn, 1)
    }

    /// Reads `count` logical pages from `first` at `now`; returns when their data is all in the controller.
    /// Neighbouring pages in one program unit are sensed together, once, and only their bytes move. With
    /// read-ahead, a read that continues a sequential stream (or finds its pages read ahead) has the pages up to
    /// `read_ahead_pages` past it sensed too, so that the stream's next reads find them in the controller.
    pub fn read_range(&mut self, flash: &mut impl Flash, now: u64, first: u64, count: u64) -> Result<u64, FtlError> {
        self.check_lpn(first + count.max(1) - 1)?;
        self.counters.host_pages_read += count;
        let end = first + count;
        let ahead = &self.read_ahead;
        let held = ahead.first <= first && end <= ahead.end();
        if self.config.read_ahead_pages == 0 || !(held || ahead.next == Some(first)) {
            if self.config.read_ahead_pages != 0 {
                self.read_ahead = ReadAhead { next: Some(end), first: end, ready: VecDeque::new() };
            }
            return Ok(self.sense_range(flash, now, first..end, None));
        }
        // Pages behind the read are let go; a stream that ran past what is held starts holding from here.
        let ahead = &mut self.read_ahead;
        if ahead.end() < first || ahead.first > first {
            (ahead.first, ahead.ready) = (first, VecDeque::new());
        }
        while ahead.first < first {
            ahead.ready.pop_front();
            ahead.first += 1;
        }
        let horizon = (end + u64::from(self.config.read_ahead_pages)).min(self.config.logical_pages);
        let from = self.read_ahead.end();
        let mut ready = vec![now; horizon.saturating_sub(from) as usize];
        self.sense_range(flash, now, from..horizon, Some(&mut ready));
        let ahead = &mut self.read_ahead;
        ahead.ready.extend(ready);
        ahead.next = ahead.next.max(Some(end));
        Ok(ahead.ready.range(..count as usize).copied().max().unwrap_or(now).max(now))
    }

    /// Senses the pages of `lpns` from `now`, each unit's together; returns when they are all in the controller,
    /// and puts when each one is into `ready` (indexed from the range's start) if given.
    fn sense_range(
        &mut self,
        flash: &mut impl Flash,
        now: u64,
        lpns: std::ops::Range<u64>,
        mut ready: Option<&mut Vec<u64>>,
    ) -> u64 {
        let mut done = now;
        // The unit being gathered into one sense, the first and last of its pages wanted, and the index of the
        // range's first page in it.
        let mut group: Option<((u32, u32), u32, u32, usize)> = None;
        let start = lpns.start;
        let mut sense = |this: &Self, flash: &mut _, group: ((u32, u32), u32, u32, usize), to: usize| {
            let ((block, unit), low, high, from) = group;
            let at = this.sense_pages(flash, now, now, block, unit, low..high + 1, OpSource::HostRead);
            if let Some(ready) = ready.as_deref_mut() {
                ready[from..to].iter_mut().for_each(|page| *page = at);
            }
            at
        };
        for lpn in lpns.clone() {
            let ppn = self.l2p[lpn as usize];
            if ppn == UNMAPPED {
                continue;
            }
            let (block, offset) = self.place(ppn);
            let unit = offset / self.config.pages_per_unit;
            let gathering = self.blocks.written[block as usize] / self.config.pages_per_unit;
            if matches!(self.blocks.state[block as usize], BlockState::Open(_)) && unit == gathering {
                continue;
            }
            let page = offset % self.config.pages_per_unit;
            let index = (lpn - start) as usize;
            match &mut group {
                Some((at, low, high, _)) if *at == (block, unit) => {
                    (*low, *high) = ((*low).min(page), (*high).max(page))
                }
                _ => {
                    if let Some(previous) = group.replace(((block, unit), page, page, index)) {
                        done = done.max(sense(self, flash, previous, index));
                    }
                }
            }
        }
        if let Some(last) = group {
            done = done.max(sense(self, flash, last, (lpns.end - start) as usize));
        }
        done
    }

    /// Senses `pages` (counted within the unit) of `unit` of `block` from `start`; returns when they are in the
    /// controller.
    #[allow(clippy::too_many_arguments)]
    fn sense_pages(
        &self,
        flash: &mut impl Flash,
        now: u64,
        start: u64,
        block: u32,
        unit: u32,
        pages: std::ops::Range<u32>,
        source: OpSource,
    ) -> u64 {
        let page_bytes = self.config.page_bytes;
        let (offset, bytes) = (u64::from(pages.start) * page_bytes, u64::from(pages.len() as u32) * page_bytes);
        flash.sense(now, start, block, u64::from(unit), offset, bytes, source)
    }

    /// Deallocates logical page `lpn` (Dataset Management's deallocate; fio's trim): it reads as never
    /// written, and garbage collection no longer copies it.
    pub fn trim(&mut self, lpn: u64) -> Result<(), FtlError> {
        self.check_lpn(lpn)?;
        if self.l2p[lpn as usize] != UNMAPPED {
            self.counters.pages_trimmed += 1;
        }
        self.invalidate(lpn);
        Ok(())
    }

    /// Background garbage collection while the device is idle at `now`: empties one victim if fewer than
    /// the background target of blocks are free. Returns when it is done, or None if there was nothing to do.
    pub fn collect_idle(&mut self, flash: &mut impl Flash, now: u64) -> Option<u64> {
        if self.free_blocks() >= self.config.background_free_blocks {
            return None;
        }
        let done = self.collect_one(flash, now, now)?;
        self.counters.background_collections += 1;
        Some(done)
    }

    /// Writes `lpns` in order with no flash time, as a drive preconditioned before a measurement: the map,
    /// the blocks' valid counts and the garbage collection they need come out as the writes would leave them.
    /// The counters then start from zero.
    pub fn precondition(&mut self, lpns: impl Iterator<Item = u64>) -> Result<(), FtlError> {
        let result = lpns.into_iter().try_for_each(|lpn| self.write(&mut Untimed, 0, lpn, 0).map(|_| ()));
        self.counters = FtlCounters::default();
        // As a loaded state does, the measurement starts with foreground collection looking at its first write.
        self.write_credits = 0;
        result
    }

    fn place(&self, ppn: u32) -> (u32, u32) {
        (ppn / self.config.pages_per_block, ppn % self.config.pages_per_block)
    }

    /// Drops `lpn`'s old physical page, if it has one (and the read-ahead, if it holds the page).
    fn invalidate(&mut self, lpn: u64) {
        if (self.read_ahead.first..self.read_ahead.end()).contains(&lpn) {
            self.read_ahead = ReadAhead::default();
        }
        let old = std::mem::replace(&mut self.l2p[lpn as usize], UNMAPPED);
        if old != UNMAPPED {
            self.p2l[old as usize] = INVALID;
            let (block, _) = self.place(old);
            self.blocks.valid[block as usize] -= 1;
        }
    }

    /// Drops page `ppn` of `block`, which holds `lpn` and which garbage collection is moving. Unlike
    /// `invalidate` it does not read the logical map, whose entry the move's append overwrites: that read
    /// misses the cache for nearly every page moved, and was most of a collection's time.
    fn drop_moved(&mut self, lpn: u64, ppn: u32, block: u32) {
        debug_assert_eq!(self.l2p[lpn as usize], ppn, "a victim's valid page is the one its logical page maps to");
        if (self.read_ahead.first..self.read_ahead.end()).contains(&lpn) {
            self.read_ahead = ReadAhead::default();
        }
        self.p2l[ppn as usize] = INVALID;
        self.blocks.valid[block as usize] -= 1;
    }

    /// Puts `lpns` in the next pages of `owner`'s open block (a new one whenever it has none), their data in the
    /// controller at `ready`; programs each unit the pages fill. Returns when the last write may complete.
    fn append(
        &mut self,
        flash: &mut impl Flash,
        now: u64,
        owner: u32,
        lpns: &[u32],
        ready: u64,
        source: OpSource,
    ) -> u64 {
        let (ppb, ppu) = (self.config.pages_per_block, self.config.pages_per_unit);
        let depth = if owner == self.config.streams {
            self.config.collection_units_in_flight
        } else {
            self.config.write_buffer_units
        } as usize;
        let mut done = now;
        let mut rest = lpns;
        while !rest.is_empty() {
            let mut open = match self.open[owner as usize] {
                Some(open) => open,
                None => {
                    // The foreground reserve exists for this: a write or a collection always finds a block.
                    let block = self.blocks.open(owner).expect("the garbage collection reserve keeps a free block");
                    OpenBlock { block, unit_ready_ns: ready }
                }
            };
            let block = open.block;
            let written = self.blocks.written[block as usize];
            let (these, later) = rest.split_at(rest.len().min((ppb - written) as usize));
            for (offset, &lpn) in (written..).zip(these) {
                let ppn = block * ppb + offset;
                debug_assert_eq!(self.p2l[ppn as usize], INVALID, "a page is written once between erases");
                self.l2p[lpn as usize] = ppn;
                self.p2l[ppn as usize] = lpn;
                open.unit_ready_ns = open.unit_ready_ns.max(ready);
                if (offset + 1).is_multiple_of(ppu) {
                    // A block takes programs once its last erase is done.
                    let unit_ready = open.unit_ready_ns.max(self.blocks.erased_ns[block as usize]);
                    let programmed = flash.program(now, block, u64::from(offset / ppu), unit_ready, source);
                    // The write that fills the buffer's last free unit waits until the oldest unit's program ends.
                    let programs = &mut self.programs[owner as usize];
                    if programs.len() >= depth {
                        done = done.max(programs.pop_front().unwrap_or(now));
                    }
                    programs.push_back(programmed);
                    open.unit_ready_ns = 0;
                }
            }
            let count = these.len() as u32;
            self.blocks.valid[block as usize] += count;
            self.blocks.written[block as usize] += count;
            self.blocks.last_write_ns[block as usize] = now;
            if written + count == ppb {
                self.blocks.state[block as usize] = BlockState::Full;
                self.open[owner as usize] = None;
            } else {
                self.open[owner as usize] = Some(open);
            }
            rest = later;
        }
        done
    }

    /// Collects victims until `target` blocks are free or none is worth collecting; returns when the last
    /// erase ends, or None if nothing was collected.
    fn collect_until(&mut self, flash: &mut impl Flash, now: u64, target: u32) -> Option<u64> {
        let mut done = None;
        while self.free_blocks() < target {
            let Some(erased) = self.collect_one(flash, now, done.unwrap_or(now)) else { break };
            done = Some(erased);
        }
        done
    }

    /// Empties one victim from `start`: senses each unit holding valid pages, writes those pages to the
    /// collection's open block, then erases the victim. Returns when the erase ends.
    fn collect_one(&mut self, flash: &mut impl Flash, now: u64, start: u64) -> Option<u64> {
        let (ppb, ppu) = (self.config.pages_per_block, self.config.pages_per_unit);
        let victim = self.blocks.victim(self.config.victim, ppb, now)?;
        let collector = self.config.streams;
        let mut moved_by = start;
        // A unit is sensed once the collection has room for it (the program of the unit
        // `collection_units_in_flight` before has ended): the copies flow through the controller as a pipeline,
        // so a die holds sensed pages only until its channel takes them, and a sense never jumps ahead of
        // programs booked before it.
        let mut issue = start;
        let mut moving = std::mem::take(&mut self.moving);
        for unit in 0..ppb / ppu {
            let first = victim * ppb + unit * ppu;
            moving.clear();
            let mut valid: Option<(u32, u32)> = None;
            for ppn in first..first + ppu {
                let lpn = self.p2l[ppn as usize];
                if lpn == INVALID {
                    continue;
                }
                // The moves write these map entries, which lie all over the map: asked for now, they arrive
                // while the unit is sensed.
                prefetch(&self.l2p[lpn as usize]);
                let page = ppn - first;
                valid = Some(valid.map_or((page, page), |(low, _)| (low, page)));
                self.drop_moved(u64::from(lpn), ppn, victim);
                moving.push(lpn);
            }
            // The valid pages are sensed together and cross the channel to the controller, as a host read of
            // them would (NVMeVirt's conv_ftl.c, `clean_one_flashpg`: a read moving the valid pages' bytes).
            let Some((low, high)) = valid else { continue };
            let ready = self.sense_pages(flash, now, issue, victim, unit, low..high + 1, OpSource::GcRead);
            let room = self.append(flash, now, collector, &moving, ready, OpSource::GcWrite);
            issue = issue.max(room);
            moved_by = moved_by.max(room);
            self.counters.gc_pages_moved += moving.len() as u64;
        }
        self.moving = moving;
        let erased = flash.erase(now, moved_by, victim, OpSource::GcErase);
        self.blocks.erased(victim, erased);
        self.counters.gc_blocks_erased += 1;
        Some(erased)
    }

    /// Checks the FTL's invariants: the two maps are inverse, every block's valid count is the live pages in
    /// it and within what it has written, free blocks hold nothing, and each stream has one open block.
    pub fn check(&self) -> Result<(), String> {
        let ppb = self.config.pages_per_block;
        let mut valid = vec![0u32; self.blocks.state.len()];
        for (lpn, &ppn) in self.l2p.iter().enumerate() {
            if ppn == UNMAPPED {
                continue;
            }
            if self.p2l.get(ppn as usize) != Some(&(lpn as u32)) {
                return Err(format!("logical page {lpn} maps to physical page {ppn}, which maps elsewhere"));
            }
            let (block, offset) = self.place(ppn);
            if offset >= self.blocks.written[block as usize] {
                return Err(format!("logical page {lpn} lies past block {block}'s write pointer"));
            }
            valid[block as usize] += 1;
        }
        if self.p2l.iter().filter(|&&lpn| lpn != INVALID).count() != self.l2p.iter().filter(|&&p| p != UNMAPPED).count()
        {
            return Err("the physical map holds pages the logical map does not name".into());
        }
        for (block, (&counted, &kept)) in valid.iter().zip(&self.blocks.valid).enumerate() {
            if counted != kept {
                return Err(format!("block {block} counts {kept} valid pages; the map puts {counted} in it"));
            }
            let written = self.blocks.written[block];
            match self.blocks.state[block] {
                BlockState::Free if written != 0 => return Err(format!("free block {block} holds {written} pages")),
                BlockState::Full if written != ppb => return Err(format!("full block {block} holds {written} pages")),
                _ => {}
            }
        }
        for (owner, open) in self.open.iter().enumerate() {
            if let Some(open) = open {
                if self.blocks.state.get(open.block as usize) != Some(&BlockState::Open(owner as u32)) {
                    return Err(format!("stream {owner}'s open block {} is not open to it", open.block));
                }
            }
        }
        Ok(())
    }
}

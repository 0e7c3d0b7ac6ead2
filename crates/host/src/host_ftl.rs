//! A block-level host FTL over a zoned namespace: the ZNS study's integration level (b) (Figure 1 of
//! *Understanding NVMe Zoned Namespace (ZNS) Flash SSD Storage Devices*), as dm-zap builds it. It exports a
//! randomly writable namespace of the NVM command set (read, write, write zeroes, deallocate, flush) and keeps
//! the block-to-zone map in host memory: a write goes to the next blocks of an open zone, an overwrite or a
//! deallocate leaves the old blocks invalid, and when free zones run short the host collects garbage: it reads
//! the valid blocks of the full zone with the fewest, writes them to a zone of its own and resets the victim.
//! Write amplification is the host's here, and the device's stays 1: the cost ZNS moves, not removes.
//!
//! It is a `CommandQueue` over a `CommandQueue`, so host code and fio run on it unchanged. It takes the zoned
//! namespace as empty (a fresh device), keeps two zones open (host writes, collection), and maps one zoned LBA
//! to one exported LBA, at 8 bytes a block (both maps). A read waits for the in-flight writes of the blocks it
//! reads, so it returns the newest data issued; a zone is reset only once no read or write of it is in flight.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::rc::Rc;

use serde::Serialize;
use zonelab_runtime::sync::{Mutex, Notify};
use zonelab_runtime::{CommandQueue, IoData, Output, QueuedCommand};
use zonelab_zns::{ByteSize, ConventionalConfig, Geometry, Status, ZoneSendAction};

/// Free zones at or below which a host write that needs a zone collects garbage first: one for the write, one
/// for the collection's own zone.
const RESERVE_ZONES: usize = 2;
/// The host's writes and the collection's each fill a zone of their own.
const HOST: usize = 0;
const COLLECTOR: usize = 1;
const UNMAPPED: u64 = u64::MAX;
const INVALID: u32 = u32::MAX;

/// What the host FTL did, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HostFtlCounters {
    pub host_blocks_written: u64,
    pub host_blocks_read: u64,
    pub blocks_deallocated: u64,
    /// Valid blocks garbage collection read and wrote to another zone.
    pub gc_blocks_moved: u64,
    /// Zones garbage collection emptied and reset.
    pub gc_zones_reset: u64,
}

impl HostFtlCounters {
    /// What happened since `earlier`.
    pub fn since(&self, earlier: &HostFtlCounters) -> HostFtlCounters {
        HostFtlCounters {
            host_blocks_written: self.host_blocks_written - earlier.host_blocks_written,
            host_blocks_read: self.host_blocks_read - earlier.host_blocks_read,
            blocks_deallocated: self.blocks_deallocated - earlier.blocks_deallocated,
            gc_blocks_moved: self.gc_blocks_moved - earlier.gc_blocks_moved,
            gc_zones_reset: self.gc_zones_reset - earlier.gc_zones_reset,
        }
    }

    /// Blocks written to the zoned namespace per block the host wrote.
    pub fn write_amplification(&self) -> f64 {
        if self.host_blocks_written == 0 {
            return 1.0;
        }
        (self.host_blocks_written + self.gc_blocks_moved) as f64 / self.host_blocks_written as f64
    }
}

/// Why a host FTL cannot be built over a namespace.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("host FTL: {0}")]
pub struct HostFtlError(String);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ZoneUse {
    Free,
    Open,
    Full,
}

struct State {
    zoned: Geometry,
    exported: Geometry,
    /// Zoned LBA of each exported LBA.
    l2p: Vec<u64>,
    /// Exported LBA held by each zoned block, zone by zone over its capacity.
    p2l: Vec<u32>,
    valid: Vec<u64>,
    zone_use: Vec<ZoneUse>,
    free: VecDeque<u32>,
    /// Each writer's open zone and the offset of its next block.
    open: [Option<(u32, u64)>; 2],
    /// Writes in flight per zone, as block ranges from the zone start; reads of those blocks wait for them.
    in_flight: Vec<Vec<(u64, u64)>>,
    /// Reads in flight per zone: a zone is reset only when none is.
    readers: Vec<u32>,
    /// Where each zone's completed writes end: a write is issued when the one before it in its zone has
    /// completed, so that it reaches the device at the write pointer whatever the path reorders (mq-deadline's
    /// zone write lock does the same below; `none` and a device that reorders do not).
    written_to: Vec<u64>,
    counters: HostFtlCounters,
}

impl State {
    fn slot(&self, zone: u32, offset: u64) -> usize {
        (u64::from(zone) * self.zoned.zone_cap_lba + offset) as usize
    }

    fn zone_lba(&self, zone: u32, offset: u64) -> u64 {
        self.zoned.zone_start_lba(zone) + offset
    }

    /// The zone and offset of a zoned LBA.
    fn place(&self, lba: u64) -> (u32, u64) {
        let zone = self.zoned.zone_of(lba);
        (zone, lba - self.zoned.zone_start_lba(zone))
    }

    fn invalidate(&mut self, lba: u64) {
        let old = std::mem::replace(&mut self.l2p[lba as usize], UNMAPPED);
        if old != UNMAPPED {
            let (zone, offset) = self.place(old);
            let slot = self.slot(zone, offset);
            self.p2l[slot] = INVALID;
            self.valid[zone as usize] -= 1;
        }
    }

    fn map(&mut self, lba: u64, zone: u32, offset: u64) {
        self.invalidate(lba);
        let slot = self.slot(zone, offset);
        self.l2p[lba as usize] = self.zone_lba(zone, offset);
        self.p2l[slot] = lba as u32;
        self.valid[zone as usize] += 1;
    }

    /// Up to `want` blocks in `owner`'s open zone, opening a free one if it has none; None when that needs a
    /// zone the reserve keeps for the collection.
    fn allocate(&mut self, owner: usize, want: u64) -> Option<(u32, u64, u64)> {
        if self.open[owner].is_none() {
            if owner == HOST && self.free.len() <= RESERVE_ZONES {
                return None;
            }
            let zone = self.free.pop_front()?;
            self.zone_use[zone as usize] = ZoneUse::Open;
            self.open[owner] = Some((zone, 0));
        }
        let (zone, offset) = self.open[owner]?;
        let len = want.min(self.zoned.zone_cap_lba - offset);
        if offset + len == self.zoned.zone_cap_lba {
            self.zone_use[zone as usize] = ZoneUse::Full;
            self.open[owner] = None;
        } else {
            self.open[owner] = Some((zone, offset + len));
        }
        Some((zone, offset, len))
    }

    /// Whether a write of any of blocks `start..end` of `zone` is in flight.
    fn writing(&self, zone: u32, start: u64, end: u64) -> bool {
        self.in_flight[zone as usize].iter().any(|&(from, to)| from < end && start < to)
    }
}

/// The namespace a host FTL exports over `zoned` with `over_provisioning` (0.28 is 28 %: the zones' capacity
/// is the exported one times 1.28): its geometry, or why it cannot be built.
pub fn host_ftl_geometry(zoned: &Geometry, over_provisioning: f64) -> Result<Geometry, HostFtlError> {
    if !(0.0..=4.0).contains(&over_provisioning) {
        return Err(HostFtlError(format!("over-provisioning {over_provisioning} is not within 0 to 4")));
    }
    let physical = u64::from(zoned.zones) * zoned.zone_cap_lba;
    let exported = (physical as f64 / (1.0 + over_provisioning)) as u64;
    // The two open zones and the collection's reserve hold no data of their own in the worst case.
    let spare_zones = (RESERVE_ZONES + 2) as u64;
    if exported == 0 || exported + spare_zones * zoned.zone_cap_lba > physical {
        return Err(HostFtlError(format!(
            "{} zones of {} blocks at {over_provisioning} over-provisioning leave no room for the {spare_zones} \
             zones the open zones and the collection's reserve need",
            zoned.zones, zoned.zone_cap_lba
        )));
    }
    if exported >= u64::from(INVALID) {
        return Err(HostFtlError(format!("{exported} blocks do not fit 32-bit block numbers")));
    }
    let lba_bytes = u64::from(zoned.lba_size);
    let config = ConventionalConfig {
        capacity: ByteSize(exported * lba_bytes),
        lba_size: zoned.lba_size,
        mdts: ByteSize(zoned.max_transfer_lba.map_or(0, |blocks| blocks * lba_bytes)),
    };
    config.validate().map_err(|error| HostFtlError(error.to_string()))
}

/// A randomly writable namespace over the zoned namespace behind `Q`.
pub struct HostFtl<Q> {
    inner: Q,
    state: Rc<RefCell<State>>,
    /// Woken when a write or read completes.
    progress: Rc<Notify>,
    /// One collection at a time.
    collecting: Rc<Mutex<()>>,
    /// Whether collection carries the blocks' bytes; not over a device that keeps none (the null store).
    moves_data: bool,
}

impl<Q: Clone> Clone for HostFtl<Q> {
    fn clone(&self) -> Self {
        HostFtl {
            inner: self.inner.clone(),
            state: Rc::clone(&self.state),
            progress: Rc::clone(&self.progress),
            collecting: Rc::clone(&self.collecting),
            moves_data: self.moves_data,
        }
    }
}

impl<Q: CommandQueue + Clone + 'static> HostFtl<Q> {
    /// A host FTL over the empty zoned namespace behind `inner`.
    pub fn new(inner: Q, over_provisioning: f64) -> Result<HostFtl<Q>, HostFtlError> {
        let zoned = inner.geometry();
        let exported = host_ftl_geometry(&zoned, over_provisioning)?;
        let zones = zoned.zones as usize;
        let state = State {
            l2p: vec![UNMAPPED; exported.nsze_lba as usize],
            p2l: vec![INVALID; zones * zoned.zone_cap_lba as usize],
            valid: vec![0; zones],
            zone_use: vec![ZoneUse::Free; zones],
            free: (0..zoned.zones).collect(),
            open: [None; 2],
            in_flight: vec![Vec::new(); zones],
            readers: vec![0; zones],
            written_to: vec![0; zones],
            counters: HostFtlCounters::default(),
            zoned,
            exported,
        };
        Ok(HostFtl {
            inner,
            state: Rc::new(RefCell::new(state)),
            progress: Rc::new(Notify::new()),
            collecting: Rc::new(Mutex::new(())),
            moves_data: true,
        })
    }

    /// The same FTL for a device that keeps no data (the null store): collection reads and writes the same
    /// blocks in the same commands but carries no bytes, which would cost the simulation a copy of every
    /// block moved.
    pub fn without_data(self) -> HostFtl<Q> {
        HostFtl { moves_data: false, ..self }
    }

    pub fn counters(&self) -> HostFtlCounters {
        self.state.borrow().counters
    }

    /// The queue of the zoned namespace underneath.
    pub fn inner(&self) -> &Q {
        &self.inner
    }

    fn check_range(&self, slba: u64, nlb: u64, transfer: bool) -> Result<(), Status> {
        let exported = self.state.borrow().exported;
        if nlb == 0 {
            return Err(Status::InvalidField);
        }
        if transfer && matches!(exported.max_transfer_lba, Some(limit) if nlb > limit) {
            return Err(Status::InvalidField);
        }
        match slba.checked_add(nlb) {
            Some(end) if end <= exported.nsze_lba => Ok(()),
            _ => Err(Status::LbaOutOfRange),
        }
    }

    async fn write(&self, slba: u64, data: IoData) -> Result<(), Status> {
        let lba_bytes = u64::from(self.state.borrow().exported.lba_size);
        if data.is_empty() || !data.len().is_multiple_of(lba_bytes) {
            return Err(Status::InvalidField);
        }
        let nlb = data.len() / lba_bytes;
        self.check_range(slba, nlb, true)?;
        let mut done = 0;
        while done < nlb {
            let (zone, offset, len) = self.allocate_for_host(nlb - done).await?;
            let zoned_lba = {
                let mut state = self.state.borrow_mut();
                for i in 0..len {
                    state.map(slba + done + i, zone, offset + i);
                }
                state.counters.host_blocks_written += len;
                state.in_flight[zone as usize].push((offset, offset + len));
                state.zone_lba(zone, offset)
            };
            let piece = data.range(done * lba_bytes, len * lba_bytes);
            self.wait_turn(zone, offset).await;
            let result = self.inner.submit(QueuedCommand::Write { slba: zoned_lba, data: piece }).await;
            self.finish_write(zone, offset, len);
            result?;
            done += len;
        }
        Ok(())
    }

    /// Waits until the writes before `offset` in `zone` have completed.
    async fn wait_turn(&self, zone: u32, offset: u64) {
        loop {
            let notified = self.progress.notified();
            if self.state.borrow().written_to[zone as usize] == offset {
                return;
            }
            notified.await;
        }
    }

    /// A write of `len` blocks at `offset` of `zone` has completed (or failed: the next one goes on regardless).
    fn finish_write(&self, zone: u32, offset: u64, len: u64) {
        let mut state = self.state.borrow_mut();
        state.written_to[zone as usize] = offset + len;
        let in_flight = &mut state.in_flight[zone as usize];
        if let Some(at) = in_flight.iter().position(|&(start, _)| start == offset) {
            in_flight.swap_remove(at);
        }
        drop(state);
        self.progress.notify_waiters();
    }

    /// Blocks for a host write: in the host's open zone, collecting garbage first when a new zone would dip
    /// into the reserve.
    async fn allocate_for_host(&self, want: u64) -> Result<(u32, u64, u64), Status> {
        // Each collection frees a zone or finds nothing to collect; the bound is the zone count.
        let zones = self.state.borrow().zoned.zones;
        for _ in 0..=zones {
            if let Some(run) = self.state.borrow_mut().allocate(HOST, want) {
                return Ok(run);
            }
            if !self.collect().await? {
                // Nothing to collect: the reserve is all that is left, and the host takes it.
                let mut state = self.state.borrow_mut();
                if let Some(zone) = state.free.pop_front() {
                    state.zone_use[zone as usize] = ZoneUse::Open;
                    state.open[HOST] = Some((zone, 0));
                }
            }
        }
        Err(Status::WriteFault)
    }

    /// Empties the full zone with the fewest valid blocks, unless another collection freed enough meanwhile;
    /// returns whether a zone was freed or enough are free.
    async fn collect(&self) -> Result<bool, Status> {
        let _one_at_a_time = self.collecting.lock().await;
        let victim = {
            let state = self.state.borrow();
            if state.free.len() > RESERVE_ZONES {
                return Ok(true);
            }
            let cap = state.zoned.zone_cap_lba;
            let full = (0..state.zoned.zones).filter(|&zone| state.zone_use[zone as usize] == ZoneUse::Full);
            match full.filter(|&zone| state.valid[zone as usize] < cap).min_by_key(|&zone| state.valid[zone as usize]) {
                Some(zone) => zone,
                None => return Ok(false),
            }
        };
        let cap = self.state.borrow().zoned.zone_cap_lba;
        let max_run = self.state.borrow().zoned.max_transfer_lba.unwrap_or(cap).max(1);
        let mut offset = 0;
        while offset < cap {
            // The next span of up to one transfer from a valid block to the last valid one within it, read
            // whole: the invalid blocks between ride along (the flash senses whole pages anyway), so that a victim
            // of scattered valid blocks is copied in few large commands rather than one per run.
            let (start, end) = {
                let state = self.state.borrow();
                let valid = |at: u64| state.p2l[state.slot(victim, at)] != INVALID;
                let Some(start) = (offset..cap).find(|&at| valid(at)) else { break };
                let last = (start..cap.min(start + max_run)).rev().find(|&at| valid(at)).unwrap_or(start);
                (start, last + 1)
            };
            offset = end;
            self.wait_for_writes(victim, start, end).await;
            let read = self.read_zoned(victim, start, end - start, self.moves_data).await?;
            self.move_blocks(victim, start, end, read).await?;
        }
        // Nothing of the victim is valid now; once no read or write of it is in flight, it is reset.
        loop {
            let notified = self.progress.notified();
            {
                let state = self.state.borrow();
                if state.readers[victim as usize] == 0 && state.in_flight[victim as usize].is_empty() {
                    break;
                }
            }
            notified.await;
        }
        let zslba = self.state.borrow().zone_lba(victim, 0);
        debug_assert_eq!(self.state.borrow().valid[victim as usize], 0, "a victim is reset only when empty");
        self.inner
            .submit(QueuedCommand::ZoneSend { slba: zslba, action: ZoneSendAction::Reset, select_all: false })
            .await?;
        let mut state = self.state.borrow_mut();
        state.zone_use[victim as usize] = ZoneUse::Free;
        state.written_to[victim as usize] = 0;
        state.free.push_back(victim);
        state.counters.gc_zones_reset += 1;
        Ok(true)
    }

    /// Writes the blocks `start..end` of `victim`, read as `data`, to the collection's zone: those still mapped
    /// there (a host write may have replaced some since they were read).
    async fn move_blocks(&self, victim: u32, start: u64, end: u64, data: Option<Vec<u8>>) -> Result<(), Status> {
        let lba_bytes = u64::from(self.state.borrow().zoned.lba_size);
        let mut at = start;
        while at < end {
            let (zone, offset, moved, pieces) = {
                let mut state = self.state.borrow_mut();
                // The blocks of the span that are still the victim's, as many as the collection's zone takes at
                // once: one write, however scattered they were.
                let still: Vec<(u64, u32)> = (at..end)
                    .filter_map(|block| {
                        let lba = state.p2l[state.slot(victim, block)];
                        (lba != INVALID).then_some((block, lba))
                    })
                    .collect();
                if still.is_empty() {
                    break;
                }
                let Some((zone, offset, len)) = state.allocate(COLLECTOR, still.len() as u64) else {
                    return Err(Status::WriteFault);
                };
                let taken = &still[..len as usize];
                for (i, &(_, lba)) in (0..).zip(taken) {
                    state.map(u64::from(lba), zone, offset + i);
                }
                state.counters.gc_blocks_moved += len;
                state.in_flight[zone as usize].push((offset, offset + len));
                at = taken[taken.len() - 1].0 + 1;
                (zone, offset, len, taken.iter().map(|&(block, _)| block - start).collect::<Vec<u64>>())
            };
            let payload = match &data {
                Some(bytes) => IoData::Bytes(
                    pieces
                        .iter()
                        .flat_map(|&block| &bytes[(block * lba_bytes) as usize..((block + 1) * lba_bytes) as usize])
                        .copied()
                        .collect(),
                ),
                None => IoData::Zeros(moved * lba_bytes),
            };
            let zoned_lba = self.state.borrow().zone_lba(zone, offset);
            self.wait_turn(zone, offset).await;
            let result = self.inner.submit(QueuedCommand::Write { slba: zoned_lba, data: payload }).await;
            self.finish_write(zone, offset, moved);
            result?;
        }
        Ok(())
    }

    /// Waits until no write of blocks `start..end` of `zone` is in flight.
    async fn wait_for_writes(&self, zone: u32, start: u64, end: u64) {
        loop {
            let notified = self.progress.notified();
            if !self.state.borrow().writing(zone, start, end) {
                return;
            }
            notified.await;
        }
    }

    /// Reads `nlb` blocks of `zone` from `offset`, counted as a reader of the zone while in flight.
    async fn read_zoned(&self, zone: u32, offset: u64, nlb: u64, keep: bool) -> Result<Option<Vec<u8>>, Status> {
        let slba = {
            let mut state = self.state.borrow_mut();
            state.readers[zone as usize] += 1;
            state.zone_lba(zone, offset)
        };
        let result = self.inner.submit(QueuedCommand::Read { slba, nlb, keep }).await;
        self.state.borrow_mut().readers[zone as usize] -= 1;
        self.progress.notify_waiters();
        match result? {
            Output::Data(bytes) => Ok(Some(*bytes)),
            _ => Ok(None),
        }
    }

    async fn read(&self, slba: u64, nlb: u64, keep: bool) -> Result<Output, Status> {
        self.check_range(slba, nlb, true)?;
        let lba_bytes = u64::from(self.state.borrow().exported.lba_size);
        let mut buffer = keep.then(|| vec![0u8; (nlb * lba_bytes) as usize]);
        self.state.borrow_mut().counters.host_blocks_read += nlb;
        let mut at = 0;
        while at < nlb {
            // The next run of blocks mapped to consecutive zoned blocks of one zone (or unmapped: zeros).
            let (zone, offset, len) = loop {
                let notified = self.progress.notified();
                let run = {
                    let state = self.state.borrow();
                    let first = state.l2p[(slba + at) as usize];
                    if first == UNMAPPED {
                        let len = (at..nlb).take_while(|&i| state.l2p[(slba + i) as usize] == UNMAPPED).count() as u64;
                        at += len;
                        None
                    } else {
                        let (zone, offset) = state.place(first);
                        let len = (at..nlb)
                            .take_while(|&i| state.l2p[(slba + i) as usize] == first + (i - at))
                            .take_while(|&i| offset + (i - at) < state.zoned.zone_cap_lba)
                            .count() as u64;
                        let writing = state.writing(zone, offset, offset + len);
                        Some((zone, offset, len, writing))
                    }
                };
                match run {
                    None if at >= nlb => break (0, 0, 0),
                    None => continue,
                    Some((_, _, _, true)) => notified.await,
                    Some((zone, offset, len, false)) => break (zone, offset, len),
                }
            };
            if len == 0 {
                break;
            }
            let data = self.read_zoned(zone, offset, len, keep).await?;
            if let (Some(buffer), Some(data)) = (buffer.as_mut(), data) {
                buffer[(at * lba_bytes) as usize..((at + len) * lba_bytes) as usize].copy_from_slice(&data);
            }
            at += len;
        }
        Ok(buffer.map_or(Output::Done, |bytes| Output::Data(Box::new(bytes))))
    }

    fn deallocate(&self, slba: u64, nlb: u64) -> Result<(), Status> {
        self.check_range(slba, nlb, false)?;
        let mut state = self.state.borrow_mut();
        for lba in slba..slba + nlb {
            if state.l2p[lba as usize] != UNMAPPED {
                state.counters.blocks_deallocated += 1;
            }
            state.invalidate(lba);
        }
        Ok(())
    }
}

impl<Q: CommandQueue + Clone + 'static> CommandQueue for HostFtl<Q> {
    fn submit(&self, command: QueuedCommand) -> impl Future<Output = Result<Output, Status>> {
        let this = self.clone();
        async move {
            match command {
                QueuedCommand::Read { slba, nlb, keep } => this.read(slba, nlb, keep).await,
                QueuedCommand::Write { slba, data } => this.write(slba, data).await.map(|()| Output::Done),
                // Write Zeroes deallocates: the blocks read as zeros, and no data moves.
                QueuedCommand::WriteZeroes { slba, nlb } | QueuedCommand::Deallocate { slba, nlb } => {
                    this.deallocate(slba, nlb).map(|()| Output::Done)
                }
                QueuedCommand::Flush => this.inner.submit(QueuedCommand::Flush).await,
                QueuedCommand::Append { .. } | QueuedCommand::ZoneSend { .. } | QueuedCommand::Report { .. } => {
                    Err(Status::InvalidOpcode)
                }
            }
        }
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    fn geometry(&self) -> Geometry {
        self.state.borrow().exported
    }

    fn task(&self) -> Option<u32> {
        self.inner.task()
    }

    fn sleep(&self, duration_ns: u64) -> impl Future<Output = ()> {
        self.inner.sleep(duration_ns)
    }

    fn pass_alone(&self, until_ns: u64) -> bool {
        self.inner.pass_alone(until_ns)
    }
}

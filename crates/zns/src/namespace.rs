//! The zoned namespace: zone state machine, resource accounting and command execution, exactly as
//! `docs/semantics.md` decides (its decision table first, then QEMU's check order).
//!
//! Pure and synchronous: `execute(command)` runs a command to completion and returns its completion or its
//! NVMe status. A command that fails changes nothing: every check runs before the first change.

use std::collections::BTreeMap;

use crate::effect::{Effect, Effects, Executed, TransitionCause};
use crate::journal::{Intent, ZoneJournal, ZoneRecord};
use crate::{
    CloseEmptyOpenZone, Geometry, HostFault, MediaStore, NamespaceConfig, ReportFilter, Status, StoreError,
    ZoneDescriptor, ZoneReport, ZoneSendAction, ZoneState, REPORT_HEADER_BYTES, WP_INVALID, ZONE_DESCRIPTOR_BYTES,
};

/// Zone Receive Action of Zone Management Receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReceiveAction {
    ReportZones = 0,
    ExtendedReportZones = 1,
}

impl ReceiveAction {
    /// ZRA values above 1 are Invalid Field.
    pub const fn from_raw(value: u8) -> Result<ReceiveAction, Status> {
        match value {
            0 => Ok(ReceiveAction::ReportZones),
            1 => Ok(ReceiveAction::ExtendedReportZones),
            _ => Err(Status::InvalidField),
        }
    }
}

/// An I/O or admin command of the zoned command set. Data lengths are whole LBAs; the buffers are the host's.
#[derive(Debug)]
pub enum Command<'a> {
    /// Read (0x02): `buf.len()` bytes from `slba`.
    Read { slba: u64, buf: &'a mut [u8] },
    /// A Read of `nlb` blocks whose data the host does not take (a benchmark's): the same checks and outcome as
    /// a Read, with no data moved.
    ReadDiscard { slba: u64, nlb: u64 },
    /// Write (0x01) of `data` at `slba`, which must be the zone's write pointer.
    Write { slba: u64, data: &'a [u8] },
    /// Write Zeroes (0x08): `nlb` zeroed blocks at `slba`; exempt from MDTS.
    WriteZeroes { slba: u64, nlb: u64 },
    /// Zone Append (0x7d) of `data` to the zone starting at `zslba`.
    Append { zslba: u64, data: &'a [u8] },
    /// Flush (0x00): every completed command becomes durable.
    Flush,
    /// Dataset Management (0x09) with Deallocate, one range: `nlb` blocks at `slba` read as zeros afterwards
    /// and their flash holds nothing live. A conventional namespace's command; a zoned namespace has no use
    /// for it (a reset frees a zone) and refuses it as an invalid opcode.
    Deallocate { slba: u64, nlb: u64 },
    /// Zone Management Send (0x79).
    ZoneManagementSend { slba: u64, action: ZoneSendAction, select_all: bool },
    /// Zone Management Receive (0x7a): the report is written into `buf` as the device lays it out.
    ZoneManagementReceive { slba: u64, action: ReceiveAction, filter: ReportFilter, partial: bool, buf: &'a mut [u8] },
}

/// A successful completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    Success,
    /// Zone Append: the LBA the data was written at (completion dwords 0 and 1).
    Appended {
        lba: u64,
    },
}

/// The controller-level identify fields of the zoned command set (case 62, 72 of docs/conformance.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZonedIdentify {
    /// Maximum Active Resources, 0's based; 0xFFFFFFFF means no limit.
    pub mar: u32,
    /// Maximum Open Resources, 0's based; 0xFFFFFFFF means no limit.
    pub mor: u32,
    /// Optional Zoned Command Support; bit 0 is RAZB (reads across zone boundaries).
    pub ozcs: u16,
    /// Zone size in LBAs.
    pub zsze: u64,
    /// Zone Append Size Limit as a power of two of 4 KiB pages; 0 means MDTS.
    pub zasl: u8,
    /// Maximum Data Transfer Size as a power of two of 4 KiB pages; 0 means no limit.
    pub mdts: u8,
    /// Opcodes listed in the Commands Supported and Effects log; Zone Append must be among them or Linux
    /// forces the namespace read-only.
    pub io_opcodes_supported: &'static [u8],
}

/// NVMe I/O opcodes this namespace executes.
pub const SUPPORTED_IO_OPCODES: &[u8] = &[0x00, 0x01, 0x02, 0x08, 0x79, 0x7a, 0x7d];

/// In-memory state of one zone. `wp_lba` is the internal write pointer: it stays where the data ends when a
/// zone is finished or made read-only, so reads above it return zeros; reports show all-ones instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ZoneMeta {
    state: ZoneState,
    attrs: u8,
    wp_lba: u64,
    open_seq: u64,
}

/// A zoned namespace over a media store, optionally journaled to a device image.
#[derive(Debug)]
pub struct ZonedNamespace<S> {
    config: NamespaceConfig,
    geometry: Geometry,
    zones: Vec<ZoneMeta>,
    nr_open: u32,
    nr_active: u32,
    nr_empty: u32,
    /// IMPL_OPEN zones by the order they became IMPL_OPEN: the first entry is the auto-close victim.
    implicitly_opened: BTreeMap<u64, u32>,
    next_open_seq: u64,
    store: S,
    journal: Option<ZoneJournal>,
    /// What the command under way has done so far; `execute` hands it out.
    effects: Effects,
    /// The host error behind the last Write Fault or Unrecovered Read Error, until taken.
    host_fault: Option<HostFault>,
}

/// Namespaces up to this many zones get a full invariant scan after every command in debug builds.
const FULL_CHECK_MAX_ZONES: u32 = 256;

/// Where the zones processed by Select All are listed (docs/semantics.md 1.2).
const fn processed_by_select_all(action: ZoneSendAction, state: ZoneState) -> bool {
    use ZoneState::*;
    match action {
        ZoneSendAction::Open => matches!(state, Closed),
        ZoneSendAction::Close => matches!(state, ImplicitlyOpened | ExplicitlyOpened),
        ZoneSendAction::Finish => matches!(state, ImplicitlyOpened | ExplicitlyOpened | Closed),
        ZoneSendAction::Reset => matches!(state, ImplicitlyOpened | ExplicitlyOpened | Closed | Full),
        ZoneSendAction::Offline => matches!(state, ReadOnly),
        ZoneSendAction::SetZoneDescriptorExtension | ZoneSendAction::ZrwaFlush => false,
    }
}

impl<S: MediaStore> ZonedNamespace<S> {
    /// A fresh namespace, every zone EMPTY, with no journal (state lives as long as the value).
    pub fn new(config: NamespaceConfig, store: S) -> Result<ZonedNamespace<S>, crate::ConfigError> {
        let geometry = config.validate()?;
        let zones = (0..geometry.zones)
            .map(|zone| ZoneMeta {
                state: ZoneState::Empty,
                attrs: 0,
                wp_lba: geometry.zone_start_lba(zone),
                open_seq: 0,
            })
            .collect();
        Ok(ZonedNamespace {
            config,
            geometry,
            zones,
            nr_open: 0,
            nr_active: 0,
            nr_empty: geometry.zones,
            implicitly_opened: BTreeMap::new(),
            next_open_seq: 1,
            store,
            journal: None,
            effects: Effects::new(),
            host_fault: None,
        })
    }

    /// A namespace restored from journal records, which keeps journaling every change. `records` must have one
    /// entry per zone, each already checked against the geometry by the journal.
    pub(crate) fn restore(
        config: NamespaceConfig,
        store: S,
        journal: ZoneJournal,
        records: &[ZoneRecord],
    ) -> Result<ZonedNamespace<S>, String> {
        let mut namespace = ZonedNamespace::new(config, store).map_err(|error| error.to_string())?;
        for (zone, record) in (0u32..).zip(records) {
            let start = namespace.geometry.zone_start_lba(zone);
            let meta = ZoneMeta {
                state: record.state,
                attrs: record.attrs,
                wp_lba: start + record.wp_offset_lba,
                open_seq: record.open_seq,
            };
            let fresh = namespace.zones[zone as usize];
            namespace.account(zone, &fresh, &meta);
            namespace.zones[zone as usize] = meta;
            namespace.next_open_seq = namespace.next_open_seq.max(record.open_seq + 1);
        }
        namespace.journal = Some(journal);
        namespace.check_invariants()?;
        Ok(namespace)
    }

    pub fn config(&self) -> &NamespaceConfig {
        &self.config
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// The bytes behind the namespace, to change as a bad cell or a stray write would (fault injection in
    /// tests); zone states and write pointers stay as they are.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Zones holding an open resource (IMPL_OPEN + EXPL_OPEN).
    pub fn open_zones(&self) -> u32 {
        self.nr_open
    }

    /// Zones holding an active resource (open + CLOSED).
    pub fn active_zones(&self) -> u32 {
        self.nr_active
    }

    /// EMPTY zones: those a host can open without resetting one first.
    pub fn empty_zones(&self) -> u32 {
        self.nr_empty
    }

    /// Where a zone's written data ends: its blocks from here on were never written and read as zeros. Unlike a
    /// report's write pointer, it is kept for a full zone (where its writes stopped).
    pub fn written_end_lba(&self, zone: u32) -> u64 {
        self.zones[zone as usize].wp_lba
    }

    /// The descriptor of one zone, as a report would show it.
    pub fn zone(&self, zone: u32) -> ZoneDescriptor {
        let meta = &self.zones[zone as usize];
        ZoneDescriptor {
            index: zone,
            state: meta.state,
            attrs: meta.attrs,
            start_lba: self.geometry.zone_start_lba(zone),
            size_lba: self.geometry.zone_size_lba,
            capacity_lba: self.geometry.zone_cap_lba,
            wp_lba: if meta.state.has_valid_wp() { meta.wp_lba } else { WP_INVALID },
        }
    }

    /// Blocks written from the zone's start: its internal write pointer, which a report hides for FULL,
    /// READ_ONLY and OFFLINE zones. Data below it reads back.
    pub fn written_lba(&self, zone: u32) -> u64 {
        self.zones[zone as usize].wp_lba - self.geometry.zone_start_lba(zone)
    }

    pub fn identify(&self) -> ZonedIdentify {
        let exponent = |bytes: u64| (bytes / crate::config::MIN_PAGE_BYTES).trailing_zeros() as u8;
        let zero_based = |limit: u32| if limit == 0 { u32::MAX } else { limit - 1 };
        ZonedIdentify {
            mar: zero_based(self.geometry.max_active),
            mor: zero_based(self.geometry.max_open),
            ozcs: u16::from(self.config.cross_zone_reads),
            zsze: self.geometry.zone_size_lba,
            zasl: if self.config.zasl.bytes() == 0 { 0 } else { exponent(self.config.zasl.bytes()) },
            mdts: if self.config.mdts.bytes() == 0 { 0 } else { exponent(self.config.mdts.bytes()) },
            io_opcodes_supported: SUPPORTED_IO_OPCODES,
        }
    }

    /// Runs one command to completion: the only way a command reaches the namespace (the named methods below
    /// call it). Returns the completion with the list of what the command did, or the status of a command that
    /// changed nothing. The namespace's invariants are checked after every command that can change state.
    pub fn execute(&mut self, command: Command<'_>) -> Result<Executed, Status> {
        self.effects.clear();
        let changes = !matches!(
            command,
            Command::Read { .. } | Command::ReadDiscard { .. } | Command::ZoneManagementReceive { .. }
        );
        let completion = match command {
            Command::Read { slba, buf } => self.run_read(slba, buf).map(|()| Completion::Success),
            Command::ReadDiscard { slba, nlb } => self.check_read(slba, nlb).map(|()| Completion::Success),
            Command::Write { slba, data } => self.run_write(slba, data).map(|()| Completion::Success),
            Command::WriteZeroes { slba, nlb } => self.run_write_zeroes(slba, nlb).map(|()| Completion::Success),
            Command::Append { zslba, data } => self.run_append(zslba, data).map(|lba| Completion::Appended { lba }),
            Command::Flush => self.run_flush().map(|()| Completion::Success),
            Command::Deallocate { .. } => Err(Status::InvalidOpcode),
            Command::ZoneManagementSend { slba, action, select_all } => {
                self.run_zone_management_send(slba, action, select_all).map(|()| Completion::Success)
            }
            Command::ZoneManagementReceive { slba, action, filter, partial, buf } => {
                self.run_zone_management_receive(slba, action, filter, partial, buf).map(|()| Completion::Success)
            }
        };
        // Reads and reports change nothing, so they can break no invariant.
        if changes {
            self.check_after_change();
        }
        let effects = std::mem::take(&mut self.effects);
        completion.map(|completion| Executed { completion, effects })
    }

    /// Checks the invariants a change may have broken: the resource counts against the limits and every zone
    /// the change touched, on every call; everything, in builds with debug assertions on namespaces small enough
    /// (`FULL_CHECK_MAX_ZONES`) that a whole scan per command does not dominate a test. A broken invariant is a
    /// bug in this module, so it panics.
    fn check_after_change(&self) {
        let limits = &self.geometry;
        assert!(limits.max_open == 0 || self.nr_open <= limits.max_open, "{} open zones exceed max-open", self.nr_open);
        assert!(
            limits.max_active == 0 || self.nr_active <= limits.max_active,
            "{} active zones exceed max-active",
            self.nr_active
        );
        for effect in &self.effects {
            let zone = match *effect {
                Effect::Transition { zone, .. } | Effect::Written { zone, .. } => zone,
            };
            let (meta, start) = (&self.zones[zone as usize], limits.zone_start_lba(zone));
            assert!(
                meta.wp_lba >= start && meta.wp_lba <= start + limits.zone_cap_lba,
                "zone {zone} has its write pointer {} outside its capacity",
                meta.wp_lba
            );
            assert!(meta.state != ZoneState::Empty || meta.wp_lba == start, "EMPTY zone {zone} has data");
        }
        if cfg!(debug_assertions) && self.geometry.zones <= FULL_CHECK_MAX_ZONES {
            assert_eq!(self.check_invariants(), Ok(()));
        }
    }

    /// Read (0x02) into `buf`.
    pub fn read(&mut self, slba: u64, buf: &mut [u8]) -> Result<(), Status> {
        self.execute(Command::Read { slba, buf }).map(|_| ())
    }

    /// Write (0x01) at the write pointer.
    pub fn write(&mut self, slba: u64, data: &[u8]) -> Result<(), Status> {
        self.execute(Command::Write { slba, data }).map(|_| ())
    }

    /// Write Zeroes (0x08) at the write pointer.
    pub fn write_zeroes(&mut self, slba: u64, nlb: u64) -> Result<(), Status> {
        self.execute(Command::WriteZeroes { slba, nlb }).map(|_| ())
    }

    /// Zone Append (0x7d) to the zone starting at `zslba`; returns the LBA the data landed at.
    pub fn append(&mut self, zslba: u64, data: &[u8]) -> Result<u64, Status> {
        match self.execute(Command::Append { zslba, data })?.completion {
            Completion::Appended { lba } => Ok(lba),
            Completion::Success => unreachable!("an append completes with its LBA"),
        }
    }

    /// Flush (0x00).
    pub fn flush(&mut self) -> Result<(), Status> {
        self.execute(Command::Flush).map(|_| ())
    }

    /// Zone Management Send (0x79) for the zone starting at `slba`, or every zone the action processes.
    pub fn zone_management_send(&mut self, slba: u64, action: ZoneSendAction, select_all: bool) -> Result<(), Status> {
        self.execute(Command::ZoneManagementSend { slba, action, select_all }).map(|_| ())
    }

    /// Zone Management Receive (0x7a) into `buf`.
    pub fn zone_management_receive(
        &mut self,
        slba: u64,
        action: ReceiveAction,
        filter: ReportFilter,
        partial: bool,
        buf: &mut [u8],
    ) -> Result<(), Status> {
        self.execute(Command::ZoneManagementReceive { slba, action, filter, partial, buf }).map(|_| ())
    }

    /// Number of whole LBAs in a host buffer; a buffer that is empty or not whole LBAs is Invalid Field.
    fn byte_offset(&self, lba: u64) -> u64 {
        lba << self.geometry.lba_shift
    }

    /// Every check a read of `nlb` blocks at `slba` passes before data moves: MDTS, bounds, zone boundary,
    /// zone state, DULBE. A host that wants only the read's outcome, not its data, calls this alone.
    pub fn check_read(&self, slba: u64, nlb: u64) -> Result<(), Status> {
        if nlb == 0 {
            return Err(Status::InvalidField);
        }
        self.geometry.check_transfer(nlb)?;
        self.geometry.check_range(slba, nlb)?;
        let end = slba + nlb;
        let first_zone = self.geometry.zone_of(slba);
        let last_zone = self.geometry.zone_of(end - 1);
        if first_zone != last_zone && !self.config.cross_zone_reads {
            return Err(Status::ZoneBoundaryError);
        }
        for zone in first_zone..=last_zone {
            if self.zones[zone as usize].state == ZoneState::Offline {
                return Err(Status::ZoneIsOffline);
            }
        }
        if self.config.dulbe {
            for zone in first_zone..=last_zone {
                let piece_end = end.min(self.geometry.zone_start_lba(zone) + self.geometry.zone_size_lba);
                if piece_end > self.zones[zone as usize].wp_lba.max(slba) {
                    return Err(Status::DeallocatedOrUnwrittenLogicalBlock);
                }
            }
        }
        Ok(())
    }

    /// Read: MDTS, bounds, zone boundary and state checks, DULBE (QEMU `nvme_read`). Blocks at or above a zone's
    /// write pointer read as zeros whatever the store holds.
    fn run_read(&mut self, slba: u64, buf: &mut [u8]) -> Result<(), Status> {
        let nlb = self.geometry.blocks_in(buf.len())?;
        self.check_read(slba, nlb)?;
        let end = slba + nlb;
        let first_zone = self.geometry.zone_of(slba);
        let last_zone = self.geometry.zone_of(end - 1);
        for zone in first_zone..=last_zone {
            let piece_start = slba.max(self.geometry.zone_start_lba(zone));
            let piece_end = end.min(self.geometry.zone_start_lba(zone) + self.geometry.zone_size_lba);
            let written_end = piece_end.min(self.zones[zone as usize].wp_lba).max(piece_start);
            let lba_shift = self.geometry.lba_shift;
            let at = |lba: u64| ((lba - slba) << lba_shift) as usize;
            if written_end > piece_start {
                self.store
                    .read_at(self.byte_offset(piece_start), &mut buf[at(piece_start)..at(written_end)])
                    .map_err(|StoreError::Io(error)| self.fault(HostFault::DATA, false, error))?;
            }
            buf[at(written_end)..at(piece_end)].fill(0);
        }
        Ok(())
    }

    /// Write at the write pointer.
    fn run_write(&mut self, slba: u64, data: &[u8]) -> Result<(), Status> {
        let nlb = self.geometry.blocks_in(data.len())?;
        self.geometry.check_transfer(nlb)?;
        self.geometry.check_range(slba, nlb)?;
        self.zoned_write(self.geometry.zone_of(slba), slba, nlb, Some(data)).map(|_| ())
    }

    /// Write Zeroes at the write pointer; no MDTS check.
    fn run_write_zeroes(&mut self, slba: u64, nlb: u64) -> Result<(), Status> {
        if nlb == 0 {
            return Err(Status::InvalidField);
        }
        self.geometry.check_range(slba, nlb)?;
        self.zoned_write(self.geometry.zone_of(slba), slba, nlb, None).map(|_| ())
    }

    /// Zone Append to the zone starting at `zslba`; returns the LBA the data landed at.
    fn run_append(&mut self, zslba: u64, data: &[u8]) -> Result<u64, Status> {
        let nlb = self.geometry.blocks_in(data.len())?;
        self.geometry.check_transfer(nlb)?;
        self.geometry.check_range(zslba, nlb)?;
        let zone = self.geometry.zone_of(zslba);
        if zslba != self.geometry.zone_start_lba(zone) {
            return Err(Status::InvalidField);
        }
        if matches!(self.geometry.max_append_lba, Some(limit) if nlb > limit) {
            return Err(Status::InvalidField);
        }
        let wp = self.zones[zone as usize].wp_lba;
        self.zoned_write(zone, wp, nlb, Some(data))
    }

    /// The shared write path from step 4 of docs/semantics.md 1.4 (the caller has checked MDTS and bounds, on the
    /// command's own SLBA, and names the zone, since an append's `slba` may be its write boundary): zone state, write pointer, capacity, resources; then data, then zone state. `data`
    /// None writes zeros.
    fn zoned_write(&mut self, zone: u32, slba: u64, nlb: u64, data: Option<&[u8]>) -> Result<u64, Status> {
        let meta = self.zones[zone as usize];
        match meta.state {
            ZoneState::Full => return Err(Status::ZoneIsFull),
            ZoneState::Offline => return Err(Status::ZoneIsOffline),
            ZoneState::ReadOnly => return Err(Status::ZoneIsReadOnly),
            _ => {}
        }
        if slba != meta.wp_lba {
            return Err(Status::ZoneInvalidWrite);
        }
        let write_boundary = self.geometry.zone_start_lba(zone) + self.geometry.zone_cap_lba;
        if slba + nlb > write_boundary {
            return Err(Status::ZoneBoundaryError);
        }
        let victim = self.make_room_to_open(zone, meta.state)?;

        let offset = self.byte_offset(slba);
        let stored = match data {
            Some(bytes) => self.store.write_at(offset, bytes),
            None => self.store.write_zeroes_at(offset, nlb << self.geometry.lba_shift),
        };
        stored.map_err(|StoreError::Io(error)| self.fault(HostFault::DATA, true, error))?;
        self.effects.push(Effect::Written { zone, slba, nlb });

        if let Some(victim) = victim {
            self.auto_close(victim)?;
        }
        let new_wp = slba + nlb;
        let new_state = if new_wp == write_boundary {
            ZoneState::Full
        } else if matches!(meta.state, ZoneState::Empty | ZoneState::Closed) {
            ZoneState::ImplicitlyOpened
        } else {
            meta.state
        };
        self.commit(zone, new_state, new_wp, meta.attrs, TransitionCause::Write)?;
        Ok(slba)
    }

    /// Checks that `zone`, in `state`, may take the resources of an open zone (docs/semantics.md 2.2, 2.3): the
    /// active limit first, then the open limit, which auto-close may satisfy by naming the oldest IMPL_OPEN
    /// zone as the victim. Nothing changes here, so a failure leaves no trace.
    fn make_room_to_open(&self, zone: u32, state: ZoneState) -> Result<Option<u32>, Status> {
        let needs_active = state == ZoneState::Empty;
        let needs_open = matches!(state, ZoneState::Empty | ZoneState::Closed);
        let limits = &self.geometry;
        if needs_active && limits.max_active != 0 && self.nr_active >= limits.max_active {
            return Err(Status::TooManyActiveZones);
        }
        if !needs_open || limits.max_open == 0 || self.nr_open < limits.max_open {
            return Ok(None);
        }
        match self.implicitly_opened.values().next() {
            Some(&victim) if self.config.auto_close => {
                debug_assert_ne!(victim, zone);
                Ok(Some(victim))
            }
            _ => Err(Status::TooManyOpenZones),
        }
    }

    /// Closes an IMPL_OPEN zone to free its open resource: CLOSED, or EMPTY if nothing was written to it.
    fn auto_close(&mut self, victim: u32) -> Result<(), Status> {
        let meta = self.zones[victim as usize];
        debug_assert_eq!(meta.state, ZoneState::ImplicitlyOpened);
        let state =
            if meta.wp_lba == self.geometry.zone_start_lba(victim) { ZoneState::Empty } else { ZoneState::Closed };
        self.commit(victim, state, meta.wp_lba, meta.attrs, TransitionCause::AutoClose)
    }

    /// Moves a zone to its new state, write pointer and attributes: journals it first, then updates the resource
    /// counts and the implicit-open order, and records the transition among the command's effects. Every state
    /// change goes through here, and nothing changes when the journal refuses it.
    fn commit(
        &mut self,
        zone: u32,
        state: ZoneState,
        wp_lba: u64,
        attrs: u8,
        cause: TransitionCause,
    ) -> Result<(), Status> {
        let old = self.zones[zone as usize];
        let open_seq = match (old.state, state) {
            (ZoneState::ImplicitlyOpened, ZoneState::ImplicitlyOpened) => old.open_seq,
            (_, ZoneState::ImplicitlyOpened) => self.next_open_seq,
            _ => 0,
        };
        let new = ZoneMeta { state, attrs, wp_lba, open_seq };
        if let Some(journal) = &mut self.journal {
            let record = ZoneRecord {
                state,
                attrs: new.attrs,
                wp_offset_lba: wp_lba - self.geometry.zone_start_lba(zone),
                open_seq,
            };
            if let Err(error) = journal.write_zone(zone, &record) {
                return Err(self.fault(HostFault::JOURNAL, true, error));
            }
        }
        if open_seq == self.next_open_seq {
            self.next_open_seq += 1;
        }
        self.account(zone, &old, &new);
        self.zones[zone as usize] = new;
        if old.state != state || cause == TransitionCause::PowerLoss {
            self.effects.push(Effect::Transition { zone, from: old.state, to: state, cause });
        }
        Ok(())
    }

    /// Moves the resource and EMPTY counts and the implicit-open order from `old` to `new`.
    fn account(&mut self, zone: u32, old: &ZoneMeta, new: &ZoneMeta) {
        if (old.state, old.open_seq) == (new.state, new.open_seq) {
            // A write inside an open zone moves only its write pointer: nothing to recount (the common case).
            return;
        }
        self.nr_open -= u32::from(old.state.is_open());
        self.nr_active -= u32::from(old.state.is_active());
        self.nr_empty -= u32::from(old.state == ZoneState::Empty);
        if old.state == ZoneState::ImplicitlyOpened {
            self.implicitly_opened.remove(&old.open_seq);
        }
        self.nr_open += u32::from(new.state.is_open());
        self.nr_active += u32::from(new.state.is_active());
        self.nr_empty += u32::from(new.state == ZoneState::Empty);
        if new.state == ZoneState::ImplicitlyOpened {
            self.implicitly_opened.insert(new.open_seq, zone);
        }
    }

    /// Keeps a host file's error for `take_host_fault`; returns the NVMe status the command fails with.
    fn fault(&mut self, file: &'static str, writing: bool, error: std::io::Error) -> Status {
        self.host_fault = Some(HostFault { file, writing, error });
        if writing {
            Status::WriteFault
        } else {
            Status::UnrecoveredReadError
        }
    }

    /// The host error behind the last Write Fault or Unrecovered Read Error (a full host disk, say), once.
    pub fn take_host_fault(&mut self) -> Option<HostFault> {
        self.host_fault.take()
    }

    /// Flush: the store and the journal reach stable storage.
    fn run_flush(&mut self) -> Result<(), Status> {
        self.store.sync().map_err(|StoreError::Io(error)| self.fault(HostFault::DATA, true, error))?;
        if let Some(Err(error)) = self.journal.as_mut().map(ZoneJournal::sync) {
            return Err(self.fault(HostFault::JOURNAL, true, error));
        }
        Ok(())
    }

    /// Zone Management Send for one zone (by its start LBA) or, with `select_all`, for every zone the action
    /// processes (docs/semantics.md 1.2, 1.3).
    fn run_zone_management_send(&mut self, slba: u64, action: ZoneSendAction, select_all: bool) -> Result<(), Status> {
        if matches!(action, ZoneSendAction::SetZoneDescriptorExtension | ZoneSendAction::ZrwaFlush) {
            // Neither descriptor extensions nor ZRWA are offered, so both actions are Invalid Field.
            return Err(Status::InvalidField);
        }
        if select_all {
            return self.select_all(action);
        }
        if slba >= self.geometry.nsze_lba {
            return Err(Status::LbaOutOfRange);
        }
        let zone = self.geometry.zone_of(slba);
        if slba != self.geometry.zone_start_lba(zone) {
            return Err(Status::InvalidField);
        }
        self.zone_action(zone, action)
    }

    /// One action on one zone (docs/semantics.md 1.1, with the decision table's choices).
    fn zone_action(&mut self, zone: u32, action: ZoneSendAction) -> Result<(), Status> {
        use ZoneState::*;
        let meta = self.zones[zone as usize];
        let start = self.geometry.zone_start_lba(zone);
        let cause = TransitionCause::Host(action);
        match (action, meta.state) {
            (ZoneSendAction::Open, Empty | Closed) => {
                if let Some(victim) = self.make_room_to_open(zone, meta.state)? {
                    self.auto_close(victim)?;
                }
                self.commit(zone, ExplicitlyOpened, meta.wp_lba, meta.attrs, cause)
            }
            (ZoneSendAction::Open, ImplicitlyOpened) => {
                self.commit(zone, ExplicitlyOpened, meta.wp_lba, meta.attrs, cause)
            }
            (ZoneSendAction::Open, ExplicitlyOpened) => Ok(()),
            (ZoneSendAction::Close, ImplicitlyOpened | ExplicitlyOpened) => {
                let to_empty = meta.wp_lba == start && self.config.close_empty_open_zone == CloseEmptyOpenZone::Empty;
                self.commit(zone, if to_empty { Empty } else { Closed }, meta.wp_lba, meta.attrs, cause)
            }
            (ZoneSendAction::Close, Closed) => Ok(()),
            (ZoneSendAction::Finish, Empty | Closed) => {
                if self.config.finish_checks_resources {
                    if let Some(victim) = self.make_room_to_open(zone, meta.state)? {
                        self.auto_close(victim)?;
                    }
                }
                self.commit(zone, Full, meta.wp_lba, meta.attrs, cause)
            }
            (ZoneSendAction::Finish, ImplicitlyOpened | ExplicitlyOpened) => {
                self.commit(zone, Full, meta.wp_lba, meta.attrs, cause)
            }
            (ZoneSendAction::Finish, Full) => Ok(()),
            (ZoneSendAction::Reset, ImplicitlyOpened | ExplicitlyOpened | Closed | Full) => {
                self.commit(zone, Empty, start, 0, cause)?;
                self.discard_zone(zone);
                Ok(())
            }
            (ZoneSendAction::Reset, Empty) => Ok(()),
            (ZoneSendAction::Offline, ReadOnly) => self.commit(zone, Offline, meta.wp_lba, meta.attrs, cause),
            (ZoneSendAction::Offline, Offline) => Ok(()),
            _ => Err(Status::InvalidZoneStateTransition),
        }
    }

    /// Frees a reset zone's data. The zone already reads as zeros (its write pointer is at the start), so a
    /// store that cannot give the space back is not an error.
    fn discard_zone(&mut self, zone: u32) {
        let start = self.byte_offset(self.geometry.zone_start_lba(zone));
        let _ = self.store.discard(start, self.byte_offset(self.geometry.zone_size_lba));
    }

    /// Select All: every zone in a processed state, in zone order, journaled as one intent. Open checks its
    /// resources for all zones up front and changes nothing when they do not suffice; it does not auto-close,
    /// so that the command is all-or-nothing and a replay after a crash processes the same zones. Finish with
    /// `finish-checks-resources` skips the check: every zone it touches ends FULL holding nothing.
    fn select_all(&mut self, action: ZoneSendAction) -> Result<(), Status> {
        let selected: Vec<u32> = (0..self.geometry.zones)
            .filter(|&zone| processed_by_select_all(action, self.zones[zone as usize].state))
            .collect();
        if action == ZoneSendAction::Open && self.geometry.max_open != 0 {
            let free = self.geometry.max_open - self.nr_open;
            if selected.len() as u64 > u64::from(free) {
                return Err(Status::TooManyOpenZones);
            }
        }
        if selected.is_empty() {
            return Ok(());
        }
        self.with_intent(Intent::SelectAll(action as u8), |namespace| {
            for zone in selected {
                match action {
                    ZoneSendAction::Finish => {
                        let meta = namespace.zones[zone as usize];
                        namespace.commit(
                            zone,
                            ZoneState::Full,
                            meta.wp_lba,
                            meta.attrs,
                            TransitionCause::Host(action),
                        )?
                    }
                    _ => namespace.zone_action(zone, action)?,
                }
            }
            Ok(())
        })
    }

    /// Runs a command that changes several zones between a journaled intent and its clearing.
    fn with_intent(
        &mut self,
        intent: Intent,
        apply: impl FnOnce(&mut Self) -> Result<(), Status>,
    ) -> Result<(), Status> {
        if let Some(Err(error)) = self.journal.as_mut().map(|journal| journal.begin(intent)) {
            return Err(self.fault(HostFault::JOURNAL, true, error));
        }
        apply(self)?;
        if let Some(Err(error)) = self.journal.as_mut().map(ZoneJournal::end) {
            return Err(self.fault(HostFault::JOURNAL, true, error));
        }
        Ok(())
    }

    /// Completes a many-zone command that a crash interrupted (the journal's intent).
    pub(crate) fn replay(&mut self, intent: Intent) -> Result<(), Status> {
        match intent {
            Intent::PowerCycle => self.power_cycle(),
            Intent::SelectAll(raw) => self.select_all(ZoneSendAction::from_raw(raw)?),
        }
    }

    /// Zone Management Receive into a host buffer of `(NUMD + 1) * 4` bytes (docs/semantics.md 5).
    fn run_zone_management_receive(
        &mut self,
        slba: u64,
        action: ReceiveAction,
        filter: ReportFilter,
        partial: bool,
        buf: &mut [u8],
    ) -> Result<(), Status> {
        if action == ReceiveAction::ExtendedReportZones {
            return Err(Status::InvalidField);
        }
        if buf.len() < REPORT_HEADER_BYTES || !buf.len().is_multiple_of(4) {
            return Err(Status::InvalidField);
        }
        if matches!(self.geometry.max_transfer_lba, Some(limit) if buf.len() as u64 > limit << self.geometry.lba_shift)
        {
            return Err(Status::InvalidField);
        }
        let fits = (buf.len() - REPORT_HEADER_BYTES) / ZONE_DESCRIPTOR_BYTES;
        let report = self.report_zones(slba, filter, partial, Some(fits))?;
        report.encode_into(buf);
        Ok(())
    }

    /// Report Zones from the zone holding `slba` (which need not be zone-aligned), listing at most
    /// `max_descriptors` zones that match `filter`. `nr_zones` follows NVMe's rule for `partial`.
    pub fn report_zones(
        &self,
        slba: u64,
        filter: ReportFilter,
        partial: bool,
        max_descriptors: Option<usize>,
    ) -> Result<ZoneReport, Status> {
        if slba >= self.geometry.nsze_lba {
            return Err(Status::LbaOutOfRange);
        }
        let limit = max_descriptors.unwrap_or(usize::MAX);
        let mut zones = Vec::new();
        let mut matching = 0u64;
        for zone in self.geometry.zone_of(slba)..self.geometry.zones {
            if filter.matches(self.zones[zone as usize].state) {
                matching += 1;
                if zones.len() < limit {
                    zones.push(self.zone(zone));
                } else if partial {
                    break;
                }
            }
        }
        let nr_zones = if partial { zones.len() as u64 } else { matching };
        Ok(ZoneReport { nr_zones, zones })
    }

    /// Controller reset or power cycle: IMPL_OPEN, EXPL_OPEN and CLOSED zones become CLOSED if written, else
    /// EMPTY; no zone stays open.
    pub fn power_cycle(&mut self) -> Result<(), Status> {
        self.effects.clear();
        let affected: Vec<u32> =
            (0..self.geometry.zones).filter(|&zone| self.zones[zone as usize].state.is_active()).collect();
        self.with_intent(Intent::PowerCycle, |namespace| {
            for zone in affected {
                let ZoneMeta { wp_lba, attrs, .. } = namespace.zones[zone as usize];
                let written = wp_lba > namespace.geometry.zone_start_lba(zone);
                let state = if written { ZoneState::Closed } else { ZoneState::Empty };
                namespace.commit(zone, state, wp_lba, attrs, TransitionCause::PowerCycle)?;
            }
            Ok(())
        })
    }

    /// What a power loss leaves of a zone whose write buffer was not programmed: its write pointer moves back to
    /// `durable_wp_lba` (never forward). An open or closed zone left with nothing is EMPTY. A FULL zone stays
    /// FULL, with Zone Finished by Controller set, since reopening it could exceed the active limit; the blocks
    /// it lost read as zeros. The caller applies the controller-reset rule afterwards (`power_cycle`).
    pub fn lose_unwritten_data(&mut self, zone: u32, durable_wp_lba: u64) -> Result<(), Status> {
        self.effects.clear();
        let meta = self.zones[zone as usize];
        let start = self.geometry.zone_start_lba(zone);
        let affected = meta.state.is_active() || meta.state == ZoneState::Full;
        if !affected || durable_wp_lba >= meta.wp_lba || durable_wp_lba < start {
            return Ok(());
        }
        let cause = TransitionCause::PowerLoss;
        if meta.state == ZoneState::Full {
            return self.commit(zone, ZoneState::Full, durable_wp_lba, meta.attrs | crate::zone_attrs::ZFC, cause);
        }
        if durable_wp_lba == start {
            self.commit(zone, ZoneState::Empty, start, meta.attrs, cause)?;
            self.discard_zone(zone);
            return Ok(());
        }
        self.commit(zone, meta.state, durable_wp_lba, meta.attrs, cause)
    }

    /// The controller finishes an open or closed zone on its own, as NVMe lets it (ReZNS's zombie scan): the
    /// zone becomes FULL and its report shows Zone Finished by Controller until a reset.
    pub fn finish_by_controller(&mut self, zone: u32) -> Result<(), Status> {
        self.effects.clear();
        let meta = self.zones[zone as usize];
        if !meta.state.is_active() {
            return Err(Status::InvalidZoneStateTransition);
        }
        let attrs = meta.attrs | crate::zone_attrs::ZFC;
        self.commit(zone, ZoneState::Full, meta.wp_lba, attrs, TransitionCause::Controller)
    }

    /// Fault injection as null_blk's configfs `zone_readonly` / `zone_offline` offers it: the zone gives up its
    /// resources and takes the condition; injecting the condition it already has returns it to EMPTY. Data
    /// written to a READ_ONLY zone stays readable.
    pub fn inject_zone_state(&mut self, zone: u32, state: ZoneState) -> Result<(), InjectError> {
        self.effects.clear();
        if zone >= self.geometry.zones {
            return Err(InjectError::NoSuchZone { zone, zones: self.geometry.zones });
        }
        if !matches!(state, ZoneState::ReadOnly | ZoneState::Offline) {
            return Err(InjectError::NotAFault(state));
        }
        let meta = self.zones[zone as usize];
        let start = self.geometry.zone_start_lba(zone);
        if meta.state == state {
            self.commit(zone, ZoneState::Empty, start, meta.attrs, TransitionCause::Injected)
                .map_err(InjectError::Journal)?;
            self.discard_zone(zone);
        } else {
            self.commit(zone, state, meta.wp_lba, meta.attrs, TransitionCause::Injected)
                .map_err(InjectError::Journal)?;
        }
        Ok(())
    }

    /// Checks the namespace's invariants: resource counts match the zone states and respect the limits, write
    /// pointers lie within [zone start, zone start + capacity], EMPTY zones have theirs at the start, and the
    /// implicit-open order lists exactly the IMPL_OPEN zones.
    pub fn check_invariants(&self) -> Result<(), String> {
        let open = self.zones.iter().filter(|meta| meta.state.is_open()).count() as u32;
        let active = self.zones.iter().filter(|meta| meta.state.is_active()).count() as u32;
        let empty = self.zones.iter().filter(|meta| meta.state == ZoneState::Empty).count() as u32;
        if (open, active, empty) != (self.nr_open, self.nr_active, self.nr_empty) {
            return Err(format!(
                "counted {open} open / {active} active / {empty} empty zones but the namespace holds {} / {} / {}",
                self.nr_open, self.nr_active, self.nr_empty
            ));
        }
        let limits = &self.geometry;
        if limits.max_open != 0 && open > limits.max_open {
            return Err(format!("{open} open zones exceed max-open {}", limits.max_open));
        }
        if limits.max_active != 0 && active > limits.max_active {
            return Err(format!("{active} active zones exceed max-active {}", limits.max_active));
        }
        for (zone, meta) in (0u32..).zip(&self.zones) {
            let start = limits.zone_start_lba(zone);
            if meta.wp_lba < start || meta.wp_lba > start + limits.zone_cap_lba {
                return Err(format!("zone {zone} has its write pointer {} outside its capacity", meta.wp_lba));
            }
            if meta.state == ZoneState::Empty && meta.wp_lba != start {
                return Err(format!("EMPTY zone {zone} has its write pointer {} past its start", meta.wp_lba));
            }
            if (meta.state == ZoneState::ImplicitlyOpened)
                != (self.implicitly_opened.get(&meta.open_seq) == Some(&zone))
            {
                return Err(format!("zone {zone} ({}) is misplaced in the implicit-open order", meta.state));
            }
        }
        let implicit = self.zones.iter().filter(|meta| meta.state == ZoneState::ImplicitlyOpened).count();
        if implicit != self.implicitly_opened.len() {
            return Err("the implicit-open order lists zones that are not IMPL_OPEN".into());
        }
        Ok(())
    }
}

/// Why a fault could not be injected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InjectError {
    #[error("zone {zone} does not exist: the namespace has zones 0 to {}", zones - 1)]
    NoSuchZone { zone: u32, zones: u32 },
    #[error("{0} is not an injectable condition: use read-only or offline")]
    NotAFault(ZoneState),
    #[error("the zone journal could not record the fault: {0}")]
    Journal(Status),
}

//! The physical API: what a mapping above the model asks of flash. A zoned namespace's zone placement reaches
//! it through `write`, `read` and `reset`; a conventional namespace's page-mapped FTL (crate `zonelab-ftl`)
//! calls it directly, on physical zones set aside for it (`add_physical_zones`) that stripe over the same
//! planes and channels as the zones, so both kinds of namespace compete for one device's dies by mechanism.
//! The host side of an FTL's commands (command processor, firmware, host link, budgets) is here too, so that a
//! conventional write or read pays what a zoned one pays before and after flash.

use super::costs::transfer_ns;
use super::{FlashModel, PlaneErase};
use crate::energy::{FlashOp, OpSource};
use crate::{LogicalZone, MappingPolicy, PhysicalZone, ProgramUnit, WriteKind};

impl FlashModel {
    /// Program `unit` of physical zone `physical_zone` once its data is in the controller at `ready`, for
    /// `source`. Returns when the program ends.
    pub fn program_physical(
        &mut self,
        now: u64,
        physical_zone: PhysicalZone,
        physical_unit: ProgramUnit,
        ready: u64,
        source: OpSource,
    ) -> u64 {
        let place = self.layout.place(physical_zone, physical_unit);
        let ready = ready.max(self.wear.erased_until(physical_zone));
        let channel_ns = transfer_ns(self.layout.unit_bytes.get(), self.costs.channel_ns_per_byte);
        let moved = self.resources.channels[place.channel].reserve(now, ready, channel_ns);
        let done = self.resources.program(now, place.plane, moved, self.costs.program_ns);
        self.resources.page_register[place.plane] = None;
        let pages = self.layout.pages_per_unit.get();
        self.note(FlashOp::PageProgram, source, pages, place, done - self.costs.program_ns, done);
        done
    }

    /// The pages of `unit` of physical zone `physical_zone` that hold its bytes `offset..offset + bytes` are
    /// sensed from `start` and those bytes move over its channel, for `source`; when the plane's register still
    /// holds the pages (a flash whose reads need not sense every time, `sense-every-read = false`), only the
    /// move. Returns when the data is in the controller.
    #[allow(clippy::too_many_arguments)]
    pub fn sense_physical(
        &mut self,
        now: u64,
        start: u64,
        physical_zone: PhysicalZone,
        unit: ProgramUnit,
        offset: u64,
        bytes: u64,
        source: OpSource,
    ) -> u64 {
        let place = self.layout.place(physical_zone, unit);
        let unit_page = unit.0 * self.layout.pages_per_unit.get();
        let first_page = unit_page + self.layout.page_at(offset).min(self.layout.pages_per_unit.get() - 1);
        let end_page = (unit_page + self.layout.pages_to(offset + bytes))
            .clamp(first_page + 1, unit_page + self.layout.pages_per_unit.get());
        // The register is keyed by zone: the physical zone's own number, which no logical zone read shares here.
        let zone = LogicalZone(physical_zone.0);
        let held = self.resources.page_register[place.plane].filter(|held| {
            !self.costs.sense_every_read
                && held.zone == zone
                && held.first_page <= first_page
                && end_page <= held.end_page
        });
        match held {
            Some(held) => {
                let channel_ns = transfer_ns(bytes, self.costs.channel_ns_per_byte);
                self.resources.channels[place.channel].reserve(now, held.ready_ns.max(start), channel_ns)
            }
            None => {
                self.sense_and_move(now, start, zone, (physical_zone, unit, place), first_page..end_page, bytes, source)
            }
        }
    }

    /// Every block of physical zone `physical_zone` from `start`, for `source`; programs into it wait for the
    /// erases. Returns when they are done.
    pub fn erase_physical(&mut self, now: u64, start: u64, physical_zone: PhysicalZone, source: OpSource) -> u64 {
        self.erase_physical_zones(now, start, &[physical_zone], true, source)
    }

    /// Erases one row of a physical zone from `start`: its `row`-th block on each of its planes (units
    /// `row * units_per_row()` up to the next row's), for `source`. Returns when the erases are done. Unlike a
    /// whole zone's erase, it does not hold back programs into the zone's other rows: the caller gives a
    /// program into this row a `ready` after the erase.
    pub fn erase_physical_row(
        &mut self,
        now: u64,
        start: u64,
        physical_zone: PhysicalZone,
        row: u64,
        source: OpSource,
    ) -> u64 {
        debug_assert!(row < self.rows_per_zone(), "row {row} of a physical zone of {}", self.rows_per_zone());
        let erase = PlaneErase { seal_ns: 0, first_block: row, waited_blocks: 1, blocks: 1 };
        (0..self.layout.planes_per_zone.get())
            .map(|plane_in_zone| self.erase_on_plane(now, start, physical_zone, plane_in_zone, erase, source).0)
            .fold(start, u64::max)
    }

    /// Sets `count` more physical zones aside for a mapping that addresses them directly (a conventional
    /// namespace's FTL), past every zone the namespace's zones map to; returns the first. Their blocks wear and
    /// are counted like the zones'. Not under `rezns`, whose renewable mapping takes physical zones past the
    /// namespace's as it needs them (the device refuses that combination).
    pub fn add_physical_zones(&mut self, count: u32) -> PhysicalZone {
        debug_assert!(self.config.mapping.policy != MappingPolicy::Rezns);
        let first = self.zones.len() as u32 + self.extra_physical_zones;
        self.extra_physical_zones += count;
        self.wear.cover((first + count) as usize);
        PhysicalZone(first)
    }

    /// Bytes of one program unit.
    pub fn unit_bytes(&self) -> u64 {
        self.layout.unit_bytes.get()
    }

    /// Program units in one physical zone.
    pub fn units_per_zone(&self) -> u64 {
        self.layout.units_per_zone
    }

    /// Program units in one row of a physical zone: one block on each of the planes it stripes over (the
    /// erase unit of a mapping that erases less than a zone, a superblock).
    pub fn units_per_row(&self) -> u64 {
        self.layout.planes_per_zone.get() * self.layout.block_units()
    }

    /// Rows in one physical zone.
    pub fn rows_per_zone(&self) -> u64 {
        self.layout.blocks_per_zone_plane
    }

    /// The controller's part of a host write of `len_bytes` to a namespace that gathers its writes itself (an
    /// FTL): command processing, firmware, the host link and the write budget. Returns when the write may be
    /// acknowledged at the earliest, and when its data is in the device.
    pub fn accept_host_write(&mut self, now: u64, len_bytes: u64, kind: WriteKind) -> (u64, u64) {
        self.take_write_data(now, len_bytes, kind, false, None)
    }

    /// The controller's part of a host read of `len_bytes` before flash: returns when the command is processed
    /// and when flash may start on it.
    pub fn accept_host_read(&mut self, now: u64, len_bytes: u64) -> (u64, u64) {
        self.take_read_command(now, len_bytes)
    }

    /// The controller's part of a host read after flash: its data, in the controller at `data_out`, leaves
    /// through the read budget and the host link. Returns when the read completes.
    pub fn return_host_read(&mut self, now: u64, command_done: u64, data_out: u64, len_bytes: u64) -> u64 {
        self.deliver_read(now, command_done, data_out, len_bytes)
    }
}

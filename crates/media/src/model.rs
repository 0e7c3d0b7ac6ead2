//! The timing model: resources that keep the time they are next free, reserved by each command at submission.

use std::collections::VecDeque;

use crate::energy::{FlashCounters, FlashOp, OpSource};
use crate::renewable::{RenewableMap, RenewableStats};
use crate::timeline::Timeline;
use crate::{MappingPolicy, MediaConfig};

/// What kind of write a `write` call models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    Write,
    Append,
    /// Write Zeroes: no data crosses the host link.
    Zeroes,
}

/// A program unit whose data is in a zone's write buffer until its program ends.
#[derive(Clone, Copy, Debug)]
struct BufferedUnit {
    unit: u64,
    release_ns: u64,
    bytes: u64,
}

/// What the model keeps of one zone.
#[derive(Clone, Debug, Default)]
struct ZoneMedia {
    /// Host bytes written from the zone start (the write pointer, in bytes).
    written_bytes: u64,
    /// Program units reserved on planes, host data and padding alike, from the zone start.
    programmed_units: u64,
    /// Program units, from the zone start, that hold host data and have been programmed.
    host_units: u64,
    /// Units in the write buffer waiting for their program to end, in unit order.
    in_flight: VecDeque<BufferedUnit>,
    /// Bytes held in the write buffer (in-flight units and the partial unit not yet programmed).
    buffered_bytes: u64,
    /// The zone's partially programmed blocks have been closed (the zone filled, or was finished).
    sealed: bool,
    /// Recent flushes: each made the first `.0` host bytes durable once its program ended at `.1`. A later
    /// flush may still be running when an earlier one has finished, so the last few are kept.
    flushed: VecDeque<(u64, u64)>,
}

fn ns(us: f64) -> u64 {
    (us * 1000.0).round() as u64
}

/// Nanoseconds per byte at `mib_per_s`; 0 when the rate is 0 (no limit).
fn ns_per_byte(mib_per_s: f64) -> f64 {
    if mib_per_s <= 0.0 {
        0.0
    } else {
        1e9 / (mib_per_s * 1_048_576.0)
    }
}

/// Nanoseconds to move `bytes` at `ns_per_byte`.
fn transfer_ns(bytes: u64, ns_per_byte: f64) -> u64 {
    (bytes as f64 * ns_per_byte + 0.5) as u64
}

/// The configuration's times in nanoseconds and rates in nanoseconds per byte, converted once.
#[derive(Clone, Debug)]
struct Costs {
    read_ns: u64,
    program_ns: u64,
    erase_ns: u64,
    seal_ns: u64,
    channel_ns_per_byte: f64,
    link_ns_per_byte: f64,
    write_budget_ns_per_byte: f64,
    read_budget_ns_per_byte: f64,
    read_firmware_ns: u64,
    write_firmware_ns: u64,
    write_firmware_per_4k_ns: u64,
    append_extra_ns: u64,
    implicit_open_extra_ns: u64,
    read_command_ns: u64,
    write_command_ns: u64,
    append_command_ns: u64,
    management_command_ns: u64,
    open_ns: u64,
    close_ns: u64,
    close_written_ns: u64,
    reset_ns: u64,
    finish_ns: u64,
    zone_write_buffer_bytes: u64,
    early_completion: bool,
    aggregate_program_units: bool,
    append_maps_post_write_pointer: bool,
}

impl Costs {
    fn new(config: &MediaConfig) -> Costs {
        let (nand, controller) = (&config.nand, &config.controller);
        Costs {
            read_ns: ns(nand.read_latency_us),
            program_ns: ns(nand.program_latency_us),
            erase_ns: ns(nand.erase_latency_us),
            seal_ns: ns(nand.seal_latency_us),
            channel_ns_per_byte: ns_per_byte(nand.channel_mib_per_s),
            link_ns_per_byte: ns_per_byte(controller.host_link_mib_per_s),
            write_budget_ns_per_byte: ns_per_byte(controller.write_mib_per_s),
            read_budget_ns_per_byte: ns_per_byte(controller.read_mib_per_s),
            read_firmware_ns: ns(controller.read_firmware_us),
            write_firmware_ns: ns(controller.write_firmware_us),
            write_firmware_per_4k_ns: ns(controller.write_firmware_per_4k_us),
            append_extra_ns: ns(controller.append_extra_us),
            implicit_open_extra_ns: ns(controller.implicit_open_extra_us),
            read_command_ns: ns(controller.read_command_us),
            write_command_ns: ns(controller.write_command_us),
            append_command_ns: ns(controller.append_command_us),
            management_command_ns: ns(controller.management_command_us),
            open_ns: ns(controller.open_us),
            close_ns: ns(controller.close_us),
            close_written_ns: ns(controller.close_written_us),
            reset_ns: ns(controller.reset_us),
            finish_ns: ns(controller.finish_us),
            zone_write_buffer_bytes: controller.zone_write_buffer_bytes,
            early_completion: controller.early_completion,
            aggregate_program_units: controller.aggregate_program_units,
            append_maps_post_write_pointer: controller.append_maps_post_write_pointer,
        }
    }
}

/// The flash model of one device: its resources, its zones' placement and occupancy, and its counters.
#[derive(Clone, Debug)]
pub struct FlashModel {
    config: MediaConfig,
    zone_cap_bytes: u64,
    unit_bytes: u64,
    units_per_zone: u64,
    planes_per_zone: u64,
    blocks_per_zone_plane: u64,
    pages_per_unit: u64,
    page_bytes: u64,
    costs: Costs,
    /// Planes keep timelines too, so that a read fits between programs queued for later (a finish's padding
    /// is reserved when the finish is submitted); erases and seals queue after everything else.
    planes: Vec<Timeline>,
    /// What each plane's page register holds after its last read: (zone, first page, end page, time the data
    /// is there). A read of those pages needs no new sensing (a cache read); any program or erase clears it.
    page_register: Vec<Option<(u32, u64, u64, u64)>>,
    /// Resources reserved for future instants fill gaps (see `Timeline`); the command processor and the
    /// write budget are reserved in arrival order.
    channels: Vec<Timeline>,
    erase_slot_free: Vec<u64>,
    command_free: u64,
    link_to_device_free: u64,
    /// The way out to the host: the read budget and the host link, whichever is narrower, as one resource.
    output: Timeline,
    write_budget_free: u64,
    zones: Vec<ZoneMedia>,
    /// Under the `rezns` policy, where each zone's units live; otherwise zone `z` is physical zone `z`.
    renewable: Option<RenewableMap>,
    /// Erase count per block, physical zone by physical zone.
    wear: Vec<u32>,
    /// When each physical zone's last whole-zone erase ends: a zone recycled by the renewable mapping takes
    /// programs only after it, although plane timelines would fit them in earlier gaps.
    erased_until: Vec<u64>,
    /// Block erases that a reset waited for, and those that ran after it completed.
    erases_inline: u64,
    erases_deferred: u64,
    counters: FlashCounters,
}

/// Wear: erase counts per block, and how erases were timed.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct EraseSummary {
    pub blocks: u64,
    /// Blocks that make up one zone, so erases can be counted in zones.
    pub blocks_per_zone: u64,
    pub erases: u64,
    /// Erases a reset waited for.
    pub inline: u64,
    /// Erases that ran after their reset completed.
    pub deferred: u64,
    pub mean_per_block: f64,
    pub max_per_block: u32,
    /// Blocks by erase count.
    pub histogram: std::collections::BTreeMap<u32, u64>,
    /// What the renewable mapping did, under the `rezns` policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renewable: Option<RenewableStats>,
}

impl FlashModel {
    /// A model for `zones` zones of `zone_cap_bytes` writable bytes each; `config` must have been validated.
    pub fn new(config: MediaConfig, zones: u32, zone_cap_bytes: u64) -> FlashModel {
        let nand = &config.nand;
        let unit_bytes = nand.program_unit_bytes;
        let units_per_zone = zone_cap_bytes.div_ceil(unit_bytes);
        let planes_per_zone = u64::from(config.planes_per_zone());
        let blocks_per_zone_plane =
            units_per_zone.div_ceil(planes_per_zone).div_ceil(u64::from(nand.block_program_units));
        let planes = (nand.channels * nand.dies_per_channel * nand.planes_per_die) as usize;
        let page_bytes = if config.energy.page_bytes == 0 { unit_bytes } else { config.energy.page_bytes };
        FlashModel {
            zone_cap_bytes,
            unit_bytes,
            units_per_zone,
            planes_per_zone,
            blocks_per_zone_plane,
            pages_per_unit: unit_bytes.div_ceil(page_bytes),
            page_bytes,
            costs: Costs::new(&config),
            planes: vec![Timeline::default(); planes],
            page_register: vec![None; planes],
            channels: vec![Timeline::default(); nand.channels as usize],
            erase_slot_free: vec![0; nand.erase_concurrency as usize],
            command_free: 0,
            link_to_device_free: 0,
            output: Timeline::default(),
            write_budget_free: 0,
            zones: vec![ZoneMedia::default(); zones as usize],
            renewable: (config.mapping.policy == MappingPolicy::Rezns)
                .then(|| RenewableMap::new(zones, units_per_zone, config.mapping.renew_above)),
            wear: vec![0; zones as usize * (planes_per_zone * blocks_per_zone_plane) as usize],
            erased_until: vec![0; zones as usize],
            erases_inline: 0,
            erases_deferred: 0,
            counters: FlashCounters::default(),
            config,
        }
    }

    pub fn config(&self) -> &MediaConfig {
        &self.config
    }

    pub fn counters(&self) -> &FlashCounters {
        &self.counters
    }

    /// Erase count of every block, physical zone by physical zone, plane by plane.
    pub fn erase_counts(&self) -> &[u32] {
        &self.wear
    }

    /// The global plane and channel of a zone's `unit`-th program unit: units go round-robin over the zone's
    /// planes, the planes of one die first, then the next channel, then the next die on the same channels
    /// (ConfZNS's order; with one plane per die it is NVMeVirt's). Zones narrower than the device take turns
    /// over disjoint channel and die groups.
    fn place(&self, zone: u32, unit: u64) -> (usize, usize) {
        let nand = &self.config.nand;
        let within = (unit % self.planes_per_zone) as u32;
        let plane_in_die = within % nand.planes_per_die;
        let stripe = within / nand.planes_per_die;
        let channel_in_zone = stripe % nand.channels_per_zone;
        let die_in_zone = stripe / nand.channels_per_zone;
        let channel_groups = nand.channels / nand.channels_per_zone;
        let die_groups = nand.dies_per_channel / nand.dies_per_channel_per_zone;
        let group = zone % (channel_groups * die_groups);
        let channel = (group % channel_groups) * nand.channels_per_zone + channel_in_zone;
        let die = (group / channel_groups) * nand.dies_per_channel_per_zone + die_in_zone;
        let plane = (die * nand.channels + channel) * nand.planes_per_die + plane_in_die;
        (plane as usize, channel as usize)
    }

    /// The physical zone and unit that hold a zone's `unit`, mapping it if the zone has not reached it yet.
    fn locate(&mut self, zone: u32, unit: u64) -> (u32, u64) {
        let Some(map) = self.renewable.as_mut() else { return (zone, unit) };
        let found = map.locate(zone, unit);
        let physical_zones = map.physical_zones();
        let blocks = physical_zones * (self.planes_per_zone * self.blocks_per_zone_plane) as usize;
        if self.wear.len() < blocks {
            self.wear.resize(blocks, 0);
            self.erased_until.resize(physical_zones, 0);
        }
        found
    }

    /// The physical zone and unit of a unit the zone has reached.
    fn lookup(&self, zone: u32, unit: u64) -> (u32, u64) {
        self.renewable.as_ref().and_then(|map| map.lookup(zone, unit)).unwrap_or((zone, unit))
    }

    /// Index into `wear` of the block that holds a physical zone's `unit`.
    fn block_of(&self, zone: u32, unit: u64) -> usize {
        let plane_in_zone = unit % self.planes_per_zone;
        let block = unit / self.planes_per_zone / u64::from(self.config.nand.block_program_units);
        ((u64::from(zone) * self.planes_per_zone + plane_in_zone) * self.blocks_per_zone_plane + block) as usize
    }

    /// Reserves the controller's command processor for `busy_us` from `now`; returns when it is done.
    fn command(&mut self, now: u64, busy_ns: u64) -> u64 {
        let start = self.command_free.max(now);
        self.command_free = start + busy_ns;
        self.command_free
    }

    /// Programs one unit whose data is in the controller at `ready`: the channel moves it, then the plane
    /// programs it. Returns when the program ends.
    fn program(&mut self, now: u64, zone: u32, unit: u64, ready: u64, source: OpSource) -> u64 {
        let (physical_zone, physical_unit) = self.locate(zone, unit);
        let (plane, channel) = self.place(physical_zone, physical_unit);
        let ready = ready.max(self.erased_until[physical_zone as usize]);
        let moved =
            self.channels[channel].reserve(now, ready, transfer_ns(self.unit_bytes, self.costs.channel_ns_per_byte));
        let done = self.planes[plane].reserve(now, moved, self.costs.program_ns);
        self.page_register[plane] = None;
        self.counters.add(FlashOp::PageProgram, source, self.pages_per_unit);
        done
    }

    /// Waits until `bytes` fit in the zone's write buffer, from `now`; returns when they do.
    fn admit(&mut self, zone: u32, bytes: u64, now: u64) -> u64 {
        let capacity = self.costs.zone_write_buffer_bytes;
        let media = &mut self.zones[zone as usize];
        let mut at = now;
        while let Some(front) = media.in_flight.front() {
            if front.release_ns > at && media.buffered_bytes + bytes <= capacity {
                break;
            }
            at = at.max(front.release_ns);
            media.buffered_bytes -= front.bytes;
            media.in_flight.pop_front();
        }
        media.buffered_bytes += bytes;
        at
    }

    /// A write, append or write zeroes of `len_bytes` at `offset_bytes` from the zone start, submitted to the
    /// device at `now`; `opens_zone` marks the first write to a zone it opens implicitly. Returns the time the
    /// device completes it.
    pub fn write(
        &mut self,
        now: u64,
        zone: u32,
        offset_bytes: u64,
        len_bytes: u64,
        kind: WriteKind,
        opens_zone: bool,
    ) -> u64 {
        debug_assert!(offset_bytes + len_bytes <= self.zone_cap_bytes);
        let costs = &self.costs;
        let append = kind == WriteKind::Append;
        let append_extra = if append { costs.append_extra_ns } else { 0 };
        let firmware_done = now
            + costs.write_firmware_ns
            + costs.write_firmware_per_4k_ns * len_bytes.div_ceil(4096)
            + append_extra
            + if opens_zone { costs.implicit_open_extra_ns } else { 0 };
        let (link_ns, budget_ns) =
            (transfer_ns(len_bytes, costs.link_ns_per_byte), transfer_ns(len_bytes, costs.write_budget_ns_per_byte));
        let buffered = costs.zone_write_buffer_bytes != 0;
        let command_done =
            self.command(now, if append { self.costs.append_command_ns } else { self.costs.write_command_ns });
        let mut data_ready = now + append_extra;
        if buffered {
            data_ready = self.admit(zone, len_bytes, data_ready);
        }
        let mut data_in = data_ready;
        if kind != WriteKind::Zeroes {
            self.link_to_device_free = self.link_to_device_free.max(data_ready) + link_ns;
            data_in = self.link_to_device_free;
        }
        self.write_budget_free = self.write_budget_free.max(data_ready) + budget_ns;
        data_in = data_in.max(self.write_budget_free);

        let source = if append { OpSource::Append } else { OpSource::HostWrite };
        let end_bytes = offset_bytes + len_bytes;
        self.zones[zone as usize].written_bytes = end_bytes;
        let mut programmed = data_in;
        if self.costs.aggregate_program_units {
            let fills_zone = end_bytes == self.zone_cap_bytes;
            let complete = if fills_zone { self.units_per_zone } else { end_bytes / self.unit_bytes };
            programmed = programmed.max(self.program_through(now, zone, complete, data_in, source));
            if fills_zone {
                self.seal(now, zone, programmed);
            }
        } else {
            let position = if append && self.costs.append_maps_post_write_pointer { end_bytes } else { offset_bytes };
            let first = (position / self.unit_bytes).min(self.units_per_zone - 1);
            for unit in first..first + len_bytes.div_ceil(self.unit_bytes) {
                let unit = unit.min(self.units_per_zone - 1);
                programmed = programmed.max(self.program(now, zone, unit, data_in, source));
                let media = &mut self.zones[zone as usize];
                media.programmed_units = media.programmed_units.max(unit + 1);
                media.host_units = media.programmed_units;
            }
        }
        let acknowledged = firmware_done.max(command_done).max(data_in);
        if self.costs.early_completion {
            acknowledged
        } else {
            acknowledged.max(programmed)
        }
    }

    /// Programs a zone's host-data units up to `units` (exclusive) once their data is in at `ready`; returns
    /// when the last program ends.
    fn program_through(&mut self, now: u64, zone: u32, units: u64, ready: u64, source: OpSource) -> u64 {
        let mut last = ready;
        let first = self.zones[zone as usize].programmed_units;
        for unit in first..units {
            let done = self.program(now, zone, unit, ready, source);
            last = last.max(done);
            let bytes = self.unit_bytes.min(self.zone_cap_bytes - unit * self.unit_bytes);
            let media = &mut self.zones[zone as usize];
            if self.costs.zone_write_buffer_bytes != 0 {
                media.in_flight.push_back(BufferedUnit { unit, release_ns: done, bytes });
            }
            media.programmed_units = unit + 1;
            media.host_units = unit + 1;
        }
        last
    }

    /// Closes the partially programmed last block on each of the zone's planes, after `after`.
    fn seal(&mut self, now: u64, zone: u32, after: u64) -> u64 {
        let media = &self.zones[zone as usize];
        let programmed = media.programmed_units;
        let mut done = after;
        if !media.sealed && self.costs.seal_ns != 0 {
            for plane_in_zone in 0..self.planes_per_zone.min(programmed) {
                let on_plane =
                    programmed / self.planes_per_zone + u64::from(plane_in_zone < programmed % self.planes_per_zone);
                if !on_plane.is_multiple_of(u64::from(self.config.nand.block_program_units)) {
                    // The plane of the last unit programmed in this stripe (under `rezns`, the unit's block is
                    // partial or not by its physical position; the logical count stands in for it).
                    let last =
                        plane_in_zone + (programmed - 1 - plane_in_zone) / self.planes_per_zone * self.planes_per_zone;
                    let (physical_zone, physical_unit) = self.lookup(zone, last);
                    let (plane, _) = self.place(physical_zone, physical_unit);
                    let sealed = self.planes[plane].reserve_after_all(now, after, self.costs.seal_ns);
                    self.page_register[plane] = None;
                    done = done.max(sealed);
                    self.counters.add(FlashOp::PageProgram, OpSource::Seal, self.pages_per_unit);
                }
            }
        }
        self.zones[zone as usize].sealed = true;
        done
    }

    /// A read of `len_bytes` at `offset_bytes` from the zone start. Data still in the write buffer, or never
    /// written, needs no flash read.
    pub fn read(&mut self, now: u64, zone: u32, offset_bytes: u64, len_bytes: u64) -> u64 {
        let command_done = self.command(now, self.costs.read_command_ns);
        let start = now + self.costs.read_firmware_ns;
        let mut data_out = start;
        let programmed = self.zones[zone as usize].programmed_units;
        let mut offset = offset_bytes;
        let end = offset_bytes + len_bytes;
        while offset < end {
            let unit = offset / self.unit_bytes;
            let piece = ((unit + 1) * self.unit_bytes).min(end) - offset;
            if unit < programmed {
                let (physical_zone, physical_unit) = self.lookup(zone, unit);
                let (plane, channel) = self.place(physical_zone, physical_unit);
                let (first_page, end_page) = (offset / self.page_bytes, (offset + piece).div_ceil(self.page_bytes));
                let sensed = match self.page_register[plane] {
                    Some((held_zone, low, high, ready))
                        if held_zone == zone && low <= first_page && end_page <= high =>
                    {
                        ready.max(start)
                    }
                    _ => {
                        let sensed = self.planes[plane].reserve(now, start, self.costs.read_ns);
                        self.page_register[plane] = Some((zone, first_page, end_page, sensed));
                        self.counters.add(FlashOp::PageRead, OpSource::HostRead, end_page - first_page);
                        sensed
                    }
                };
                let moved =
                    self.channels[channel].reserve(now, sensed, transfer_ns(piece, self.costs.channel_ns_per_byte));
                data_out = data_out.max(moved);
            }
            offset += piece;
        }
        let output_ns = transfer_ns(len_bytes, self.costs.read_budget_ns_per_byte.max(self.costs.link_ns_per_byte));
        let output_done = self.output.reserve(now, data_out, output_ns);
        command_done.max(output_done)
    }

    /// A zone management command that changes nothing on flash: the command processor's time only.
    pub fn management(&mut self, now: u64) -> u64 {
        self.command(now, self.costs.management_command_ns)
    }

    /// Explicit open.
    pub fn open(&mut self, now: u64) -> u64 {
        self.management(now).max(now + self.costs.open_ns)
    }

    /// Close; closing a zone that holds data costs more.
    pub fn close(&mut self, now: u64, zone: u32) -> u64 {
        let cost = if self.zones[zone as usize].written_bytes == 0 {
            self.costs.close_ns
        } else {
            self.costs.close_written_ns
        };
        self.management(now).max(now + cost)
    }

    /// Reset: the controller's cost, then the erases the mapping policy asks for. Under `static-written-erase`,
    /// on each of the zone's planes the blocks that hold host data are erased before the reset completes (a
    /// partially programmed block is sealed first) and blocks that hold only finish padding after it, keeping
    /// their planes busy. Under `static-full-erase`, every block of a written zone is erased before it
    /// completes. Under `rezns`, the renewable mapping decides which physical zones are erased, and whether
    /// the reset waits for them. Data in the write buffer is dropped.
    pub fn reset(&mut self, now: u64, zone: u32) -> u64 {
        let command_done = self.management(now);
        let start = now + self.costs.reset_ns;
        let media = std::mem::take(&mut self.zones[zone as usize]);
        for register in &mut self.page_register {
            if register.is_some_and(|(held_zone, ..)| held_zone == zone) {
                *register = None;
            }
        }
        let mut done = start.max(command_done);
        if let Some(map) = self.renewable.as_mut() {
            let plan = map.reset(zone);
            done = done.max(self.erase_physical_zones(now, start, &plan.inline, true));
            self.erase_physical_zones(now, start, &plan.deferred, false);
            return done;
        }
        let block_units = u64::from(self.config.nand.block_program_units);
        let full_erase = self.config.mapping.policy == MappingPolicy::StaticFullErase && media.written_bytes > 0;
        let planes = if full_erase { self.planes_per_zone } else { self.planes_per_zone.min(media.programmed_units) };
        for plane_in_zone in 0..planes {
            let units_on =
                |units: u64| units / self.planes_per_zone + u64::from(plane_in_zone < units % self.planes_per_zone);
            let programmed_here = units_on(media.programmed_units);
            let host_here = units_on(media.host_units);
            let partial = !programmed_here.is_multiple_of(block_units);
            let (sync_seal, sync_blocks, all_blocks) = if full_erase {
                (0, self.blocks_per_zone_plane, self.blocks_per_zone_plane)
            } else if media.sealed || !partial {
                (0, host_here / block_units, programmed_here.div_ceil(block_units))
            } else {
                (self.costs.seal_ns, host_here.div_ceil(block_units), programmed_here.div_ceil(block_units))
            };
            let (plane_done, _) =
                self.erase_on_plane(now, start, zone, plane_in_zone, sync_seal, sync_blocks, all_blocks);
            done = done.max(plane_done);
        }
        done
    }

    /// Erases every block of whole physical zones from `start`; returns when they are done if the caller waits
    /// for them (`inline`), or `start`. Programs into those zones wait for their erases (`erased_until`).
    fn erase_physical_zones(&mut self, now: u64, start: u64, physical_zones: &[u32], inline: bool) -> u64 {
        let blocks = self.blocks_per_zone_plane;
        let sync_blocks = if inline { blocks } else { 0 };
        let mut done = start;
        for &physical_zone in physical_zones {
            for plane_in_zone in 0..self.planes_per_zone {
                let (plane_done, erased) =
                    self.erase_on_plane(now, start, physical_zone, plane_in_zone, 0, sync_blocks, blocks);
                done = done.max(plane_done);
                let until = &mut self.erased_until[physical_zone as usize];
                *until = (*until).max(erased);
            }
        }
        done
    }

    /// Erases the first `all_blocks` blocks of a physical zone on one of its planes from `start`, after a seal
    /// of `seal_ns`; returns when the first `sync_blocks` erases (the ones a reset waits for) are done, and when
    /// all of them are.
    #[allow(clippy::too_many_arguments)]
    fn erase_on_plane(
        &mut self,
        now: u64,
        start: u64,
        physical_zone: u32,
        plane_in_zone: u64,
        seal_ns: u64,
        sync_blocks: u64,
        all_blocks: u64,
    ) -> (u64, u64) {
        let block_units = u64::from(self.config.nand.block_program_units);
        let (plane, _) = self.place(physical_zone, plane_in_zone);
        self.page_register[plane] = None;
        let mut at = self.planes[plane].reserve_after_all(now, start, seal_ns);
        let mut plane_done = if seal_ns == 0 && sync_blocks == 0 { start } else { at };
        for block in 0..all_blocks {
            at = self.erase_block(now, plane, at);
            if block < sync_blocks {
                plane_done = at;
                self.erases_inline += 1;
            } else {
                self.erases_deferred += 1;
            }
            let index = self.block_of(physical_zone, block * block_units * self.planes_per_zone + plane_in_zone);
            self.wear[index] += 1;
        }
        self.counters.add(FlashOp::BlockErase, OpSource::Reset, all_blocks);
        (plane_done, at)
    }

    /// Erase counts over every block, and how erases were timed.
    pub fn erase_summary(&self) -> EraseSummary {
        let mut histogram = std::collections::BTreeMap::new();
        for &count in &self.wear {
            *histogram.entry(count).or_insert(0u64) += 1;
        }
        let total: u64 = self.wear.iter().map(|&count| u64::from(count)).sum();
        EraseSummary {
            blocks: self.wear.len() as u64,
            blocks_per_zone: self.planes_per_zone * self.blocks_per_zone_plane,
            erases: total,
            inline: self.erases_inline,
            deferred: self.erases_deferred,
            mean_per_block: total as f64 / self.wear.len().max(1) as f64,
            max_per_block: self.wear.iter().copied().max().unwrap_or(0),
            histogram,
            renewable: self.renewable.as_ref().map(RenewableMap::stats),
        }
    }

    /// Checks the renewable mapping's invariants against what each zone has programmed (always fine under the
    /// static policies): every programmed unit has a physical unit of its own in a physical zone its zone holds.
    pub fn check_mapping(&self) -> Result<(), String> {
        self.renewable.as_ref().map_or(Ok(()), |map| map.check(|zone| self.zones[zone as usize].programmed_units))
    }

    /// One block erase on `plane` from `at`, through the device's erase slots when their number is bounded.
    fn erase_block(&mut self, now: u64, plane: usize, at: u64) -> u64 {
        let erase_ns = self.costs.erase_ns;
        match self.erase_slot_free.iter_mut().min_by_key(|free| **free) {
            Some(slot) => {
                let begin = (*slot).max(at).max(self.planes[plane].last_end());
                *slot = self.planes[plane].reserve_after_all(now, begin, erase_ns);
                *slot
            }
            None => self.planes[plane].reserve_after_all(now, at, erase_ns),
        }
    }

    /// Finish: the controller's cost, then padding for the rest of the capacity through the write budget and
    /// the zone's planes, and the sealing of the last partial blocks. An empty zone needs no padding, and a
    /// zone already sealed (full, or finished before) none either.
    pub fn finish(&mut self, now: u64, zone: u32) -> u64 {
        let command_done = self.management(now);
        let start = now + self.costs.finish_ns;
        let budget_ns_per_byte = self.costs.write_budget_ns_per_byte;
        let written = self.zones[zone as usize].written_bytes;
        if written == 0 || self.zones[zone as usize].sealed {
            self.zones[zone as usize].sealed = true;
            return start.max(command_done);
        }
        let padding = self.zone_cap_bytes - written;
        let budget_start = self.write_budget_free.max(start);
        self.write_budget_free = budget_start + transfer_ns(padding, budget_ns_per_byte);
        let host_units = written.div_ceil(self.unit_bytes);
        let mut last = self.program_through(now, zone, host_units, budget_start, OpSource::HostWrite);
        for unit in host_units..self.units_per_zone {
            let padded_to = ((unit + 1) * self.unit_bytes).min(self.zone_cap_bytes) - written;
            let ready = budget_start + transfer_ns(padded_to, budget_ns_per_byte);
            last = last.max(self.program(now, zone, unit, ready, OpSource::FinishPadding));
            self.zones[zone as usize].programmed_units = unit + 1;
        }
        let media = &mut self.zones[zone as usize];
        media.written_bytes = self.zone_cap_bytes;
        media.in_flight.clear();
        media.buffered_bytes = 0;
        let sealed = self.seal(now, zone, last);
        sealed.max(self.write_budget_free).max(command_done)
    }

    /// The controller finished an idle open zone (ReZNS's zombie scan). Under `rezns` nothing is padded: what
    /// the write buffer holds is programmed, and the erased rest of the zone becomes a spare for new zones.
    /// Under the static policies it is a finish like the host's. Returns when the flash work is done.
    pub fn finish_by_controller(&mut self, now: u64, zone: u32) -> u64 {
        if self.renewable.is_none() {
            return self.finish(now, zone);
        }
        let media = &self.zones[zone as usize];
        let (written, host_units) = (media.written_bytes, media.host_units);
        let partial_units = written.div_ceil(self.unit_bytes);
        let mut done = now;
        if partial_units > host_units {
            done = self.program_through(now, zone, partial_units, now, OpSource::HostWrite);
        }
        let media = &mut self.zones[zone as usize];
        media.in_flight.clear();
        media.buffered_bytes = 0;
        media.sealed = true;
        // Only now, with every unit of the zone handed out, is the rest of its physical zone known.
        if let Some(map) = self.renewable.as_mut() {
            let plan = map.release_rest(zone);
            self.erase_physical_zones(now, now, &plan.deferred, false);
        }
        done
    }

    /// Host bytes of the zone that are durable at `at`: programmed, and every unit before them too. What is
    /// only in the write buffer is not.
    pub fn durable_bytes(&self, zone: u32, at: u64) -> u64 {
        let media = &self.zones[zone as usize];
        let durable_units =
            media.in_flight.iter().find(|unit| unit.release_ns > at).map_or(media.host_units, |unit| unit.unit);
        let flushed = media.flushed.iter().filter(|&&(_, done)| done <= at).map(|&(bytes, _)| bytes).max().unwrap_or(0);
        (durable_units * self.unit_bytes).max(flushed).min(media.written_bytes)
    }

    /// Flush: every write completed so far becomes durable. The programs already under way finish, and the
    /// partial unit each zone holds in its write buffer is programmed as it is (a real drive writes it to a
    /// flush area; the model charges one program of the unit on its plane). Returns when all of it is done.
    pub fn flush(&mut self, now: u64) -> u64 {
        let mut done = self.command(now, self.costs.management_command_ns);
        for zone in 0..self.zones.len() as u32 {
            let media = &self.zones[zone as usize];
            let pending = media.in_flight.iter().map(|unit| unit.release_ns).max().unwrap_or(0);
            done = done.max(pending);
            let written = media.written_bytes;
            let partial = self.costs.aggregate_program_units
                && written > media.host_units * self.unit_bytes
                && written < self.zone_cap_bytes
                && media.flushed.back().is_none_or(|&(bytes, _)| bytes < written);
            if partial {
                let unit = media.host_units;
                let programmed = self.program(now, zone, unit, now, OpSource::HostWrite);
                let flushes = &mut self.zones[zone as usize].flushed;
                if flushes.len() == 16 {
                    flushes.pop_front();
                }
                flushes.push_back((written, programmed));
                done = done.max(programmed);
            }
        }
        done
    }

    /// A power loss at `at`: each zone keeps `durable_bytes` and its write buffer is gone. With power-loss
    /// protection the caller does not call this: the buffer is flushed on capacitor power.
    pub fn lose_power(&mut self, at: u64) {
        for zone in 0..self.zones.len() as u32 {
            let durable = self.durable_bytes(zone, at);
            let unit_bytes = self.unit_bytes;
            let media = &mut self.zones[zone as usize];
            media.written_bytes = durable;
            media.host_units = durable / unit_bytes;
            media.programmed_units = media.host_units;
            media.in_flight.clear();
            media.buffered_bytes = 0;
            media.flushed.clear();
        }
        self.page_register.fill(None);
        for line in self.planes.iter_mut().chain(self.channels.iter_mut()).chain([&mut self.output]) {
            line.truncate(at);
        }
    }

    /// Marks the first `bytes` of a zone as written and programmed long ago, with no time spent: a drive
    /// preconditioned before a measurement. The tail that does not fill a program unit waits in the buffer.
    pub fn precondition(&mut self, zone: u32, bytes: u64) {
        let units = if bytes == self.zone_cap_bytes { self.units_per_zone } else { bytes / self.unit_bytes };
        if units > 0 {
            self.locate(zone, units - 1);
        }
        let media = &mut self.zones[zone as usize];
        *media = ZoneMedia {
            written_bytes: bytes,
            programmed_units: units,
            host_units: units,
            in_flight: VecDeque::new(),
            buffered_bytes: bytes - (units * self.unit_bytes).min(bytes),
            sealed: bytes == self.zone_cap_bytes,
            flushed: VecDeque::new(),
        };
    }

    /// The latest time any resource is reserved to; no command submitted later completes before it needs to.
    pub fn busy_until(&self) -> u64 {
        let timelines = self.planes.iter().chain(self.channels.iter()).chain([&self.output]).map(Timeline::last_end);
        self.erase_slot_free
            .iter()
            .chain([&self.command_free, &self.link_to_device_free, &self.write_budget_free])
            .copied()
            .chain(timelines)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ControllerConfig, EnergyConfig, MappingConfig, NandConfig};

    const UNIT: u64 = 16384;

    /// 2 channels x 2 dies, one plane each; zones stripe over all 4 dies in 16 KiB units; 4-unit blocks.
    fn config() -> MediaConfig {
        MediaConfig {
            nand: NandConfig {
                channels: 2,
                dies_per_channel: 2,
                planes_per_die: 1,
                channels_per_zone: 2,
                dies_per_channel_per_zone: 2,
                program_unit_bytes: UNIT,
                block_program_units: 4,
                read_latency_us: 50.0,
                program_latency_us: 500.0,
                erase_latency_us: 3000.0,
                seal_latency_us: 0.0,
                channel_mib_per_s: 1000.0 * 1_000_000.0 / 1_048_576.0, // 1000 MB/s: one nanosecond per byte
                erase_concurrency: 0,
            },
            controller: ControllerConfig {
                host_link_mib_per_s: 0.0,
                read_firmware_us: 10.0,
                write_firmware_us: 5.0,
                write_firmware_per_4k_us: 0.0,
                append_extra_us: 2.0,
                implicit_open_extra_us: 0.0,
                read_command_us: 1.0,
                write_command_us: 4.0,
                append_command_us: 6.0,
                management_command_us: 0.0,
                write_mib_per_s: 0.0,
                read_mib_per_s: 0.0,
                zone_write_buffer_bytes: 4 * UNIT,
                early_completion: true,
                aggregate_program_units: true,
                append_maps_post_write_pointer: false,
                open_us: 0.0,
                close_us: 0.0,
                close_written_us: 0.0,
                reset_us: 100.0,
                finish_us: 0.0,
            },
            energy: EnergyConfig {
                page_bytes: UNIT,
                page_read_nj: 10.0,
                page_program_nj: 100.0,
                block_erase_nj: 1000.0,
            },
            mapping: MappingConfig::default(),
        }
    }

    fn model(config: MediaConfig) -> FlashModel {
        config.validate().expect("valid test configuration");
        FlashModel::new(config, 4, 64 * UNIT)
    }

    #[test]
    fn a_read_is_firmware_then_sense_then_channel() {
        let mut flash = model(config());
        flash.precondition(0, 64 * UNIT);
        let done = flash.read(1_000_000, 0, 0, 4096);
        assert_eq!(done - 1_000_000, 10_000 + 50_000 + 4096, "fw 10 us + tR 50 us + 4096 B at 1 ns/B");
        assert_eq!(flash.counters().get(FlashOp::PageRead, OpSource::HostRead), 1);
    }

    #[test]
    fn a_page_still_in_the_register_is_read_without_sensing() {
        let mut flash = model(config());
        flash.precondition(0, 64 * UNIT);
        let first = flash.read(0, 0, 0, 4096);
        let same_page = flash.read(first, 0, 4096, 4096);
        assert_eq!(same_page - first, 10_000 + 4096, "firmware and transfer only");
        assert_eq!(flash.counters().get(FlashOp::PageRead, OpSource::HostRead), 1);
        flash.write(same_page, 1, 0, UNIT, WriteKind::Write, false);
        flash.reset(same_page, 0);
        flash.precondition(0, 64 * UNIT);
        let after_erase = flash.read(10_000_000_000, 0, 4096, 4096);
        assert_eq!(after_erase - 10_000_000_000, 10_000 + 50_000 + 4096, "an erase empties the register");
    }

    #[test]
    fn unprogrammed_data_needs_no_flash_read() {
        let mut flash = model(config());
        flash.precondition(0, 4096);
        let done = flash.read(0, 0, 0, 4096);
        assert_eq!(done, 10_000, "data still in the write buffer comes from the controller");
        assert_eq!(flash.counters().total(FlashOp::PageRead), 0);
    }

    #[test]
    fn reads_on_one_die_queue_behind_each_other() {
        let mut flash = model(config());
        flash.precondition(0, 64 * UNIT);
        let first = flash.read(0, 0, 0, 4096);
        let same_die = flash.read(0, 0, 4 * UNIT, 4096);
        let other_die = flash.read(0, 0, UNIT, 4096);
        assert!(same_die >= first + 50_000, "unit 4 is on unit 0's die: {first} then {same_die}");
        assert!(other_die < same_die, "unit 1 is on another die");
    }

    #[test]
    fn the_command_processor_serializes_commands() {
        let mut flash = model(config());
        let mut last = 0;
        for i in 0..10u64 {
            last = flash.write(0, i as u32 % 4, (i / 4) * 4096, 4096, WriteKind::Write, false);
        }
        assert!(last >= 10 * 4_000, "10 writes at 4 us each through one command processor: {last}");
        let append = flash.write(last, 3, 4096 * 3, 4096, WriteKind::Append, false);
        assert_eq!(append - last, 7_000, "append: firmware 5 us + append extra 2 us");
    }

    #[test]
    fn early_completion_acknowledges_before_the_program() {
        let mut flash = model(config());
        let early = flash.write(0, 0, 0, UNIT, WriteKind::Write, false);
        assert!(early < 500_000, "acknowledged from the buffer: {early}");
        let mut late_config = config();
        late_config.controller.early_completion = false;
        let mut flash = model(late_config);
        let late = flash.write(0, 0, 0, UNIT, WriteKind::Write, false);
        assert!(late >= 500_000 + UNIT, "waits for the channel and the program: {late}");
    }

    #[test]
    fn the_write_budget_bounds_bandwidth() {
        let mut limited = config();
        limited.controller.write_mib_per_s = 100.0;
        let mut flash = model(limited);
        let mut last = 0;
        for i in 0..8u64 {
            last = flash.write(0, (i % 4) as u32, (i / 4) * 65536, 65536, WriteKind::Write, false);
        }
        let minimum = (8.0 * 65536.0 / (100.0 * 1_048_576.0) * 1e9) as u64;
        assert!(last >= minimum, "8 x 64 KiB at 100 MiB/s need {minimum} ns, got {last}");
    }

    #[test]
    fn a_full_write_buffer_holds_writes_back() {
        let mut flash = model(config());
        let mut completions = Vec::new();
        for i in 0..16u64 {
            completions.push(flash.write(0, 0, i * UNIT, UNIT, WriteKind::Write, false));
        }
        assert!(completions[3] < 500_000, "four units fit in the buffer");
        assert!(completions[15] >= 500_000, "later ones wait for programs to free the buffer: {completions:?}");
    }

    #[test]
    fn reset_cost_grows_with_occupancy_and_wears_blocks() {
        let reset_after = |bytes: u64| {
            let mut flash = model(config());
            flash.precondition(0, bytes);
            let done = flash.reset(0, 0);
            (done, flash.counters().total(FlashOp::BlockErase), flash.erase_counts().iter().sum::<u32>())
        };
        let (empty, empty_erases, _) = reset_after(0);
        assert_eq!((empty, empty_erases), (100_000, 0), "an empty zone costs the controller's time only");
        let (quarter, quarter_erases, _) = reset_after(16 * UNIT);
        let (full, full_erases, wear) = reset_after(64 * UNIT);
        assert_eq!(quarter, 100_000 + 3_000_000, "16 units over 4 dies: one block each, erased in parallel");
        assert_eq!(full, 100_000 + 4 * 3_000_000, "64 units: four blocks on each die, one after another");
        assert_eq!((quarter_erases, full_erases, wear), (4, 16, 16));
    }

    #[test]
    fn bounded_erase_concurrency_serializes_erases() {
        let mut serial = config();
        serial.nand.erase_concurrency = 1;
        let mut flash = model(serial);
        flash.precondition(0, 64 * UNIT);
        assert_eq!(flash.reset(0, 0), 100_000 + 16 * 3_000_000);
    }

    #[test]
    fn finish_pads_through_the_write_budget_and_the_planes() {
        let mut limited = config();
        limited.controller.write_mib_per_s = 100.0;
        let mut flash = model(limited);
        flash.precondition(0, 4096);
        let done = flash.finish(0, 0);
        let padding_ns = ((64 * UNIT - 4096) as f64 / (100.0 * 1_048_576.0) * 1e9) as u64;
        assert!(done >= padding_ns, "padding {padding_ns} ns through the budget, finished at {done}");
        assert_eq!(flash.counters().get(FlashOp::PageProgram, OpSource::FinishPadding), 63);
        assert_eq!(flash.counters().get(FlashOp::PageProgram, OpSource::HostWrite), 1);
        let write_after = flash.write(0, 1, 0, 4096, WriteKind::Write, false);
        assert!(write_after >= padding_ns, "a write submitted during the finish waits for the budget: {write_after}");
    }

    #[test]
    fn energy_follows_the_counted_operations() {
        let mut flash = model(config());
        flash.precondition(0, 64 * UNIT);
        flash.read(0, 0, 0, UNIT);
        flash.reset(1_000_000_000, 0);
        let energy = &config().energy;
        assert_eq!(flash.counters().energy_nj(energy, OpSource::HostRead), 10.0);
        assert_eq!(flash.counters().energy_nj(energy, OpSource::Reset), 16.0 * 1000.0);
    }

    #[test]
    fn only_programmed_data_survives_a_power_loss() {
        let mut flash = model(config());
        let acknowledged = flash.write(0, 0, 0, 2 * UNIT + 4096, WriteKind::Write, false);
        assert_eq!(flash.durable_bytes(0, acknowledged), 0, "acknowledged but not yet programmed");
        assert_eq!(flash.durable_bytes(0, 10_000_000), 2 * UNIT, "two programmed units; the tail is in the buffer");
        flash.lose_power(acknowledged);
        assert_eq!(flash.durable_bytes(0, u64::MAX), 0);
    }

    #[test]
    fn completion_is_never_before_submission_and_resources_never_move_back() {
        for (policy, seeds) in [
            (MappingPolicy::StaticWrittenErase, 1..=3),
            (MappingPolicy::StaticFullErase, 1..=3),
            (MappingPolicy::Rezns, 1..=20),
        ] {
            for seed in seeds {
                random_commands(policy, seed);
            }
        }
    }

    /// A seeded random mix of reads, writes, finishes, flushes and resets, checking after each command that
    /// nothing completes before it is submitted, no resource moves back in time, and the mapping holds.
    fn random_commands(policy: MappingPolicy, seed: u64) {
        let mut flash =
            model(MediaConfig { mapping: MappingConfig { policy, ..MappingConfig::default() }, ..config() });
        let mut state = seed;
        let mut now = 0u64;
        let mut written = [0u64; 4];
        let mut busy = 0;
        for step in 0..3000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            now += (state >> 33) % 20_000;
            let zone = ((state >> 20) % 4) as u32;
            let at = &mut written[zone as usize];
            let done = match (state >> 10) % 9 {
                0 if *at > 0 => flash.read(now, zone, 0, 4096),
                1 => {
                    *at = 0;
                    flash.reset(now, zone)
                }
                2 if (state >> 40).is_multiple_of(4) => {
                    *at = 64 * UNIT;
                    flash.finish(now, zone)
                }
                3 => flash.flush(now),
                4 if *at > 0 && *at < 64 * UNIT && (state >> 40).is_multiple_of(3) => {
                    *at = 64 * UNIT;
                    flash.finish_by_controller(now, zone)
                }
                _ if *at + 8192 <= 64 * UNIT => {
                    let offset = *at;
                    *at += 8192;
                    flash.write(now, zone, offset, 8192, WriteKind::Write, false)
                }
                _ => now,
            };
            let context = format!("policy {policy:?}, seed {seed}, step {step}");
            assert!(done >= now, "{context}: completed at {done}, before its submission at {now}");
            let reached = flash.busy_until();
            assert!(reached >= busy, "{context}: resources moved back from {busy} to {reached}");
            busy = reached;
            if let Err(broken) = flash.check_mapping() {
                panic!("{context}: {broken}");
            }
        }
    }

    fn rezns() -> MediaConfig {
        MediaConfig { mapping: MappingConfig { policy: MappingPolicy::Rezns, ..MappingConfig::default() }, ..config() }
    }

    #[test]
    fn a_rezns_reset_of_a_mostly_empty_zone_erases_nothing_and_its_room_is_reused() {
        let mut flash = model(rezns());
        flash.precondition(0, 16 * UNIT);
        assert_eq!(flash.reset(0, 0), 100_000, "48 of 64 units left: kept as a spare, nothing erased");
        assert_eq!(flash.erase_summary().erases, 0);
        // Zone 1 takes the spare's 48 units, then 16 from a fresh physical zone; its reset keeps that one.
        for unit in 0..64 {
            flash.write(1_000_000 + unit * 1_000_000, 1, unit * UNIT, UNIT, WriteKind::Write, false);
        }
        flash.check_mapping().expect("mapping");
        let done = flash.reset(1_000_000_000, 1);
        assert_eq!(done, 1_000_100_000, "the reset does not wait for the full physical zone's erase");
        let summary = flash.erase_summary();
        assert_eq!((summary.inline, summary.deferred), (0, 16), "the full physical zone: 4 blocks on 4 planes");
        let stats = summary.renewable.expect("rezns stats");
        assert_eq!((stats.renewed_resets, stats.normal_resets, stats.spare_reuses), (2, 0, 1));
        assert_eq!(stats.spare_zones, 1);
        assert!(flash.busy_until() >= 1_000_100_000 + 4 * 3_000_000, "the deferred erases still keep planes busy");
    }

    #[test]
    fn a_rezns_reset_of_a_nearly_full_zone_erases_it_before_completing() {
        let mut flash = model(rezns());
        flash.precondition(0, 60 * UNIT);
        assert_eq!(flash.reset(0, 0), 100_000 + 4 * 3_000_000, "4 left of 64: erased like on a ZNS SSD");
        let summary = flash.erase_summary();
        assert_eq!((summary.inline, summary.deferred), (16, 0));
    }

    #[test]
    fn a_recycled_physical_zone_takes_programs_only_after_its_background_erase() {
        // One erase at a time across the device, so each plane's erases leave gaps a program could fit in.
        let mut waits = rezns();
        waits.controller.early_completion = false;
        waits.nand.erase_concurrency = 1;
        let mut flash = model(waits);
        flash.precondition(0, 16 * UNIT);
        flash.reset(1_000_000_000, 0); // physical 0 becomes a spare
        flash.precondition(1, 64 * UNIT); // 48 units in physical 0, 16 in physical 1
        let reset_at = 3_000_000_000;
        assert_eq!(flash.reset(reset_at, 1), reset_at + 100_000, "physical 0 is erased in the background");
        let erase_end = reset_at + 100_000 + 16 * 3_000_000;
        // Zone 2 takes the spare (physical 1), then physical 2; zone 3 takes physical 3; so zone 0's first unit
        // lands in physical 0, whose erase is still running.
        flash.precondition(2, 64 * UNIT);
        flash.precondition(3, 64 * UNIT);
        let done = flash.write(reset_at + 300_000, 0, 0, UNIT, WriteKind::Write, false);
        assert!(done >= erase_end + 500_000, "programmed at {done}, before the erase ends at {erase_end} + 0.5 ms");
        flash.check_mapping().expect("mapping");
    }
}

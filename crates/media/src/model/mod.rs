//! The timing model: resources that keep the time they are next free, reserved by each command at submission.
//!
//! `FlashModel` carries out commands over its parts, each with one job: `Costs` (the configuration in
//! nanoseconds), `Layout` (where a unit lives), `Resources` (what is busy until when), `ZoneMedia` (each zone's
//! progress, write buffer and durability), the renewable mapping (ReZNS), `Wear` (erase counts) and the
//! operation counters. Zones are `LogicalZone`s at the interface and `PhysicalZone`s on flash.

mod costs;
mod layout;
mod output;
mod physical;
mod resources;
mod trace;
mod wear;
mod zone_media;

use costs::{ns_per_byte, transfer_ns, Costs};
use layout::{Layout, Place};
use output::NO_COMMAND;
use resources::{HeldPages, Processed, ProcessorTimes, Resources, Suspend, WriteBudget, NO_STREAM};
pub use trace::FlashEvent;
use trace::FlashTrace;
pub use wear::EraseSummary;
use wear::Wear;
use zone_media::{BufferedUnit, ZoneMedia};

use crate::energy::{FlashCounters, FlashOp, OpSource};
use crate::renewable::RenewableMap;
use crate::{LogicalZone, MappingPolicy, MediaConfig, PhysicalZone, ProgramUnit};

/// What kind of write a `write` call models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    Write,
    Append,
    /// Write Zeroes: no data crosses the host link.
    Zeroes,
}

/// What the flash model keeps over a device's life, which a device image saves when its device closes: the
/// erase counts (so wear accumulates from one process to the next) and, under `rezns`, the renewable mapping
/// with the zone occupancy it was saved against (a mapping only fits the data it maps).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct MediaState {
    pub policy: MappingPolicy,
    /// Kept as runs of equal counts: most blocks of a device share their count.
    #[serde(with = "runs")]
    pub erase_counts: Vec<u32>,
    pub erases_inline: u64,
    pub erases_deferred: u64,
    pub renewable: Option<RenewableMap>,
    /// Host bytes written in each zone when the state was saved.
    pub zone_written_bytes: Vec<u64>,
}

/// A list of counts as `[count, repeat]` pairs.
mod runs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(counts: &[u32], serializer: S) -> Result<S::Ok, S::Error> {
        let mut runs: Vec<(u32, u64)> = Vec::new();
        for &count in counts {
            match runs.last_mut() {
                Some((value, repeat)) if *value == count => *repeat += 1,
                _ => runs.push((count, 1)),
            }
        }
        runs.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u32>, D::Error> {
        let runs = Vec::<(u32, u64)>::deserialize(deserializer)?;
        let total = runs.iter().try_fold(0u64, |sum, &(_, repeat)| sum.checked_add(repeat));
        // A bound on what a file may ask to allocate: far more blocks than any device has.
        match total {
            Some(blocks) if blocks <= 1 << 32 => {}
            _ => return Err(serde::de::Error::custom("erase counts cover more than 2^32 blocks")),
        }
        Ok(runs.into_iter().flat_map(|(count, repeat)| std::iter::repeat_n(count, repeat as usize)).collect())
    }
}

/// What `FlashModel::restore` took from a saved state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restored {
    /// Erase counts, and the mapping if the policy has one.
    Everything,
    /// Erase counts only: the zones hold other data than the mapping was saved with (a process ended without
    /// saving after writing), so zones are mapped afresh.
    EraseCountsOnly,
}

/// The flash model of one device: its resources, its zones' placement and occupancy, and its counters.
#[derive(Clone, Debug)]
pub struct FlashModel {
    config: MediaConfig,
    costs: Costs,
    layout: Layout,
    resources: Resources,
    zones: Vec<ZoneMedia>,
    /// Under the `rezns` policy, where each zone's units live; otherwise logical zone `z` is physical zone `z`.
    renewable: Option<RenewableMap>,
    /// Physical zones past the zones' own, set aside for a mapping that addresses them directly (`physical.rs`).
    extra_physical_zones: u32,
    wear: Wear,
    counters: FlashCounters,
    /// Every flash operation, when a trace was asked for (`enable_trace`).
    trace: Option<Box<FlashTrace>>,
}

impl FlashModel {
    /// A model for `zones` zones of `zone_cap_bytes` writable bytes each; `config` must have been validated.
    pub fn new(config: MediaConfig, zones: u32, zone_cap_bytes: u64) -> FlashModel {
        let layout = Layout::new(&config.nand, zone_cap_bytes, config.energy.page_bytes, config.planes_per_zone());
        let costs = Costs::new(&config);
        FlashModel {
            resources: Resources::new(
                layout.device_planes(),
                layout.device_channels(),
                config.nand.erase_concurrency,
                WriteBudget::new(
                    ns_per_byte(config.controller.write_mib_per_s),
                    config.controller.write_drain_unit_bytes,
                    config.controller.write_drain_buffer_bytes,
                ),
                Suspend { latency_ns: costs.suspend_ns, resume_before_suspend_ns: costs.resume_before_suspend_ns },
                ProcessorTimes { cv: config.controller.command_time_cv, idle_slice_ns: costs.idle_slice_ns },
            ),
            costs,
            zones: vec![ZoneMedia::default(); zones as usize],
            renewable: (config.mapping.policy == MappingPolicy::Rezns)
                .then(|| RenewableMap::new(zones, layout.units_per_zone, config.mapping.renew_above)),
            extra_physical_zones: 0,
            wear: Wear::new(zones as usize, layout.blocks_per_zone()),
            counters: FlashCounters::default(),
            trace: None,
            layout,
            config,
        }
    }

    /// Names the command the model works for from now on (None: one no runtime retimes), so that a later
    /// change to its completion can be reported under that name (`take_moved`).
    pub fn serve(&mut self, command: Option<u64>) {
        self.resources.serve(command.unwrap_or(NO_COMMAND));
    }

    /// Whether a command's completion has moved later since the last `take_moved`.
    pub fn any_moved(&self) -> bool {
        self.resources.any_moved()
    }

    /// The commands (as `serve` named them) whose completions later work has moved since the last call, each
    /// with a new time it completes by: a reset whose erases reads suspended (the die works that much longer),
    /// a read whose data a later read's, ready sooner, went ahead of on the way out, a finish whose padding
    /// host writes shared the write budget with.
    pub fn take_moved(&mut self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.resources.take_moved()
    }

    /// Forgets the names of the commands in flight (a power loss, or a new driver whose names mean others).
    pub fn forget_commands(&mut self) {
        self.resources.forget_commands();
    }

    pub fn config(&self) -> &MediaConfig {
        &self.config
    }

    /// Bytes of host writes in the controller's write buffer at `now`, not yet absorbed by the flash.
    pub fn write_buffer_bytes(&self, now: u64) -> u64 {
        self.resources.write_budget.held_bytes(now)
    }

    pub fn counters(&self) -> &FlashCounters {
        &self.counters
    }

    /// Starts recording every flash operation, up to `limit` of them (those past it are counted only).
    pub fn enable_trace(&mut self, limit: usize) {
        self.trace.get_or_insert_with(|| Box::new(FlashTrace::new(limit)));
    }

    /// Names what the operations booked from now on are for (a traced command), or nothing.
    #[inline]
    pub fn trace_cause(&mut self, cause: Option<u64>) {
        if let Some(trace) = self.trace.as_mut() {
            trace.cause = cause;
        }
    }

    /// The flash operations recorded so far, and how many past the bound were not kept.
    pub fn flash_trace(&self) -> (&[FlashEvent], u64) {
        self.trace.as_ref().map_or((&[], 0), |trace| (&trace.events, trace.dropped))
    }

    /// Counts `count` operations `op` for `source` on `place`, from `start_ns` to `end_ns`, and records them
    /// when tracing.
    #[inline]
    fn note(&mut self, op: FlashOp, source: OpSource, count: u64, place: Place, start_ns: u64, end_ns: u64) {
        self.counters.add(op, source, count);
        if let Some(trace) = self.trace.as_mut() {
            let (plane, channel) = (place.plane as u32, place.channel as u32);
            trace.push(FlashEvent { op, source, plane, channel, start_ns, end_ns, count, cause: None });
        }
    }

    /// Erase count of every block, physical zone by physical zone, plane by plane.
    pub fn erase_counts(&self) -> &[u32] {
        self.wear.erase_counts()
    }

    /// The state to save with a device image.
    pub fn state(&self) -> MediaState {
        let (erases_inline, erases_deferred) = self.wear.timing_counts();
        MediaState {
            policy: self.config.mapping.policy,
            erase_counts: self.wear.erase_counts().to_vec(),
            erases_inline,
            erases_deferred,
            renewable: self.renewable.clone(),
            zone_written_bytes: self.zones.iter().map(|media| media.written_bytes).collect(),
        }
    }

    /// Restores a saved state into a new model, before any zone is preconditioned or written. `written_bytes`
    /// is what each zone holds now (as `precondition` will be told): the mapping is taken only if it equals what
    /// the state was saved against, and only if it passes its own checks. Refused when the state belongs to
    /// another geometry or mapping policy.
    pub fn restore(&mut self, state: MediaState, written_bytes: &[u64]) -> Result<Restored, String> {
        if state.policy != self.config.mapping.policy {
            return Err(format!("saved under the {:?} policy, not {:?}", state.policy, self.config.mapping.policy));
        }
        if state.zone_written_bytes.len() != self.zones.len() || written_bytes.len() != self.zones.len() {
            return Err(format!("saved for {} zones, not {}", state.zone_written_bytes.len(), self.zones.len()));
        }
        let fresh_wear = self.wear.clone();
        self.wear.restore(&state.erase_counts, state.erases_inline, state.erases_deferred)?;
        let map = match state.renewable {
            Some(map) if map.shape() == (self.zones.len(), self.layout.units_per_zone) => map,
            None if self.renewable.is_none() => return Ok(Restored::Everything),
            _ => {
                self.wear = fresh_wear;
                return Err("the saved mapping does not fit this geometry".into());
            }
        };
        if state.zone_written_bytes != written_bytes {
            return Ok(Restored::EraseCountsOnly);
        }
        let fresh_map = self.renewable.replace(map);
        let unit_bytes = self.layout.unit_bytes.get();
        let fits = self.renewable.as_ref().is_some_and(|map| {
            self.wear.cover(map.physical_zones());
            map.check(|zone| written_bytes[zone.index()] / unit_bytes).is_ok()
        });
        if fits {
            Ok(Restored::Everything)
        } else {
            self.renewable = fresh_map;
            Ok(Restored::EraseCountsOnly)
        }
    }

    fn zone(&self, zone: LogicalZone) -> &ZoneMedia {
        &self.zones[zone.index()]
    }

    fn zone_mut(&mut self, zone: LogicalZone) -> &mut ZoneMedia {
        &mut self.zones[zone.index()]
    }

    /// The physical zone and unit that hold a zone's `unit`, mapping it if the zone has not reached it yet.
    fn locate(&mut self, zone: LogicalZone, unit: ProgramUnit) -> (PhysicalZone, ProgramUnit) {
        let Some(map) = self.renewable.as_mut() else { return (PhysicalZone(zone.0), unit) };
        let found = map.locate(zone, unit);
        self.wear.cover(map.physical_zones());
        found
    }

    /// The physical zone and unit of a unit the zone has reached.
    fn lookup(&self, zone: LogicalZone, unit: ProgramUnit) -> (PhysicalZone, ProgramUnit) {
        self.renewable.as_ref().and_then(|map| map.lookup(zone, unit)).unwrap_or((PhysicalZone(zone.0), unit))
    }

    /// Programs one unit whose data is in the controller at `ready`: the channel moves it, then the plane
    /// programs it. Returns when the program ends.
    fn program(&mut self, now: u64, zone: LogicalZone, unit: ProgramUnit, ready: u64, source: OpSource) -> u64 {
        let (physical_zone, physical_unit) = self.locate(zone, unit);
        self.program_physical(now, physical_zone, physical_unit, ready, source)
    }

    /// A write, append or write zeroes of `len_bytes` at `offset_bytes` from the start of zone `zone` (the
    /// namespace's index), submitted to the device at `now`; `opens_zone` marks the first write to a zone it
    /// opens implicitly. Returns the time the device completes it.
    pub fn write(
        &mut self,
        now: u64,
        zone: u32,
        offset_bytes: u64,
        len_bytes: u64,
        kind: WriteKind,
        opens_zone: bool,
    ) -> u64 {
        let zone = LogicalZone(zone);
        debug_assert!(offset_bytes + len_bytes <= self.layout.zone_cap_bytes);
        let append = kind == WriteKind::Append;
        let (acknowledge_from, data_in) = self.take_write_data(now, len_bytes, kind, opens_zone, Some(zone));

        let source = if append { OpSource::Append } else { OpSource::HostWrite };
        let end_bytes = offset_bytes + len_bytes;
        self.zone_mut(zone).written_bytes = end_bytes;
        let mut programmed = data_in;
        let (unit_bytes, units_per_zone) = (self.layout.unit_bytes.get(), self.layout.units_per_zone);
        if self.costs.aggregate_program_units {
            let fills_zone = end_bytes == self.layout.zone_cap_bytes;
            let complete = if fills_zone { units_per_zone } else { end_bytes / unit_bytes };
            programmed = programmed.max(self.program_through(now, zone, complete, data_in, source));
            if fills_zone {
                self.seal(now, zone, programmed);
            }
        } else {
            // Every unit the written bytes touch, as ConfZNS's znsssd_write walks start_lpn..=end_lpn: a write
            // that straddles a unit boundary programs both units.
            let position = if append && self.costs.append_maps_post_write_pointer { end_bytes } else { offset_bytes };
            let first = (position / unit_bytes).min(units_per_zone - 1);
            let last = ((position + len_bytes.max(1) - 1) / unit_bytes).min(units_per_zone - 1);
            for unit in first..=last {
                programmed = programmed.max(self.program(now, zone, ProgramUnit(unit), data_in, source));
                let media = self.zone_mut(zone);
                media.programmed_units = media.programmed_units.max(unit + 1);
                media.host_units = media.programmed_units;
            }
        }
        let acknowledged = acknowledge_from.max(data_in);
        if self.costs.early_completion {
            acknowledged
        } else {
            acknowledged.max(programmed)
        }
    }

    /// The controller's part of a write of `len_bytes`: its turn on the command processor and its firmware,
    /// the zone's write buffer (`zone`, when writes gather per zone), the data over the host link and into the
    /// device's write budget. Returns when the controller may acknowledge it at the earliest, and when its data
    /// is in the device.
    fn take_write_data(
        &mut self,
        now: u64,
        len_bytes: u64,
        kind: WriteKind,
        opens_zone: bool,
        zone: Option<LogicalZone>,
    ) -> (u64, u64) {
        let append = kind == WriteKind::Append;
        let command_ns = if append { self.costs.append_command_ns } else { self.costs.write_command_ns };
        let command = self.resources.command(now, command_ns);
        let costs = &self.costs;
        let append_extra = if append { costs.append_extra_ns } else { 0 };
        let firmware_done = command.taken_ns
            + costs.write_firmware_ns
            + costs.write_firmware_per_4k_ns * len_bytes.div_ceil(4096)
            + append_extra
            + if opens_zone { costs.implicit_open_extra_ns } else { 0 };
        let link_ns = transfer_ns(len_bytes, costs.link_ns_per_byte);
        let buffer_bytes = costs.zone_write_buffer_bytes;
        let mut data_ready = command.taken_ns + append_extra;
        if let (Some(zone), true) = (zone, buffer_bytes != 0) {
            data_ready = self.zone_mut(zone).admit(buffer_bytes, len_bytes, data_ready);
        }
        let mut data_in = data_ready;
        if kind != WriteKind::Zeroes {
            data_in = self.resources.link_to_device(data_ready, link_ns);
            if self.costs.write_fetch_ns_per_byte != 0.0 {
                let fetch_ns = transfer_ns(len_bytes, self.costs.write_fetch_ns_per_byte);
                data_in = data_in.max(data_ready + self.costs.write_fetch_setup_ns + fetch_ns);
            }
        }
        // Flash absorbs data the controller has fetched.
        data_in =
            data_in.max(self.resources.write_budget.take(data_in, len_bytes, zone.map_or(NO_STREAM, |zone| zone.0)));
        (firmware_done.max(command.done_ns), data_in)
    }

    /// Programs a zone's host-data units up to `units` (exclusive) once their data is in at `ready`; returns
    /// when the last program ends.
    fn program_through(&mut self, now: u64, zone: LogicalZone, units: u64, ready: u64, source: OpSource) -> u64 {
        let mut last = ready;
        let first = self.zone(zone).programmed_units;
        let buffered = self.costs.zone_write_buffer_bytes != 0;
        for unit in first..units {
            let done = self.program(now, zone, ProgramUnit(unit), ready, source);
            last = last.max(done);
            let bytes =
                self.layout.unit_bytes.get().min(self.layout.zone_cap_bytes - unit * self.layout.unit_bytes.get());
            let media = self.zone_mut(zone);
            if buffered {
                media.in_flight.push_back(BufferedUnit { unit: ProgramUnit(unit), release_ns: done, bytes });
            }
            media.programmed_units = unit + 1;
            media.host_units = unit + 1;
        }
        last
    }

    /// Closes the partially programmed last block on each of the zone's planes, after `after`.
    fn seal(&mut self, now: u64, zone: LogicalZone, after: u64) -> u64 {
        let media = self.zone(zone);
        let programmed = media.programmed_units;
        let mut done = after;
        if !media.sealed && self.costs.seal_ns != 0 {
            let planes_per_zone = self.layout.planes_per_zone.get();
            for plane_in_zone in 0..planes_per_zone.min(programmed) {
                let on_plane = self.layout.units_on_plane(programmed, plane_in_zone);
                if !on_plane.is_multiple_of(self.layout.block_units()) {
                    // The plane of the last unit programmed in this stripe (under `rezns`, the unit's block is
                    // partial or not by its physical position; the logical count stands in for it).
                    let last = plane_in_zone + (programmed - 1 - plane_in_zone) / planes_per_zone * planes_per_zone;
                    let (physical_zone, physical_unit) = self.lookup(zone, ProgramUnit(last));
                    let place = self.layout.place(physical_zone, physical_unit);
                    let sealed = self.resources.planes[place.plane].reserve_after_all(now, after, self.costs.seal_ns);
                    self.resources.page_register[place.plane] = None;
                    done = done.max(sealed);
                    let pages = self.layout.pages_per_unit.get();
                    let seal_ns = self.costs.seal_ns;
                    self.note(FlashOp::PageProgram, OpSource::Seal, pages, place, sealed - seal_ns, sealed);
                }
            }
        }
        self.zone_mut(zone).sealed = true;
        done
    }

    /// A read of `len_bytes` at `offset_bytes` from the zone start. Data still in the write buffer, or never
    /// written, needs no flash read.
    pub fn read(&mut self, now: u64, zone: u32, offset_bytes: u64, len_bytes: u64) -> u64 {
        let zone = LogicalZone(zone);
        let (command_done, start) = self.take_read_command(now, len_bytes);
        let end = offset_bytes + len_bytes;
        let data_out = if self.costs.read_ahead_bytes == 0 {
            self.read_pages(now, start, zone, offset_bytes, end)
        } else {
            // A read continues the stream when it starts where the stream ends, or when its pages are among
            // those read ahead: commands outstanding together may run out of order, and the controller serves
            // from its memory whatever it holds. One that the stream has passed by no more than its read-ahead
            // (it ran after later reads of the stream, which let its page go) is read from flash and leaves the
            // stream as it is.
            let stream = &self.zone(zone).read_ahead;
            let at_end = stream.next_offset == Some(offset_bytes);
            let held = stream.ready(self.layout.page_at(offset_bytes), self.layout.pages_to(end)).is_some();
            if at_end || held {
                let stream = &mut self.zone_mut(zone).read_ahead;
                stream.next_offset = stream.next_offset.max(Some(end));
                self.read_ahead(now, start, zone, offset_bytes, end, at_end)
            } else if stream.has_passed(offset_bytes, self.costs.read_ahead_bytes) {
                self.read_pages(now, start, zone, offset_bytes, end)
            } else {
                let stream = &mut self.zone_mut(zone).read_ahead;
                stream.next_offset = Some(end);
                stream.pages.clear();
                self.read_pages(now, start, zone, offset_bytes, end)
            }
        };
        self.deliver_read(now, command_done, data_out, len_bytes)
    }

    /// A read's turn on the command processor and its firmware: returns when the command is processed, and
    /// when flash may start on it.
    fn take_read_command(&mut self, now: u64, len_bytes: u64) -> (u64, u64) {
        let command_ns = self.costs.read_command_ns + self.costs.read_command_per_4k_ns * len_bytes.div_ceil(4096);
        let command = self.resources.command(now, command_ns);
        (command.done_ns, command.taken_ns + self.costs.read_firmware_ns)
    }

    /// A read's data, in the controller at `data_out`, through the read budget and over the host link; returns
    /// when the read completes.
    fn deliver_read(&mut self, now: u64, command_done: u64, data_out: u64, len_bytes: u64) -> u64 {
        let output_ns = transfer_ns(len_bytes, self.costs.read_budget_ns_per_byte.max(self.costs.link_ns_per_byte));
        let output_done = self.resources.transfer_out(now, data_out, output_ns);
        command_done.max(output_done)
    }

    /// Reads a zone's bytes `offset..end` from flash from `start` (after the firmware): each program unit's
    /// piece is sensed on its plane, unless the plane's register holds it, and moved over its channel. Returns
    /// when the data is in the controller.
    fn read_pages(&mut self, now: u64, start: u64, zone: LogicalZone, offset: u64, end: u64) -> u64 {
        let mut data_out = start;
        let programmed = self.zone(zone).programmed_units;
        let (unit_bytes, page_bytes) = (self.layout.unit_bytes.get(), self.layout.page_bytes.get());
        let mut offset = offset;
        while offset < end {
            let unit = self.layout.unit_at(offset);
            let piece = ((unit.0 + 1) * unit_bytes).min(end) - offset;
            if unit.0 < programmed {
                let (physical_zone, physical_unit) = self.lookup(zone, unit);
                let place = self.layout.place(physical_zone, physical_unit);
                let (first_page, end_page) = (self.layout.page_at(offset), self.layout.pages_to(offset + piece));
                let moved_bytes =
                    if self.costs.transfer_whole_pages { (end_page - first_page) * page_bytes } else { piece };
                let held = self.resources.page_register[place.plane].filter(|held| {
                    !self.costs.sense_every_read
                        && held.zone == zone
                        && held.first_page <= first_page
                        && end_page <= held.end_page
                });
                let moved = match held {
                    Some(held) => {
                        let channel_ns = transfer_ns(moved_bytes, self.costs.channel_ns_per_byte);
                        self.resources.channels[place.channel].reserve(now, held.ready_ns.max(start), channel_ns)
                    }
                    None => {
                        let physical = (physical_zone, physical_unit, place);
                        let pages = first_page..end_page;
                        self.sense_and_move(now, start, zone, physical, pages, moved_bytes, OpSource::HostRead)
                    }
                };
                data_out = data_out.max(moved);
            }
            offset += piece;
        }
        data_out
    }

    /// Senses `pages` of `zone` on `place`'s plane from `start` (as long as their slowest page type), then moves
    /// `bytes` of them over its channel; returns when they are in the controller. The die holds what it sensed
    /// in its register until the channel has moved it out, and senses nothing else meanwhile (no cache read), as
    /// NVMeVirt's read sets `lun.next_avail = chnl_end` (docs/calibration.md a.1): a random read that lands on a
    /// die another read holds waits for that transfer too. With it, 4 KiB random reads at QD 64 on the ZN540
    /// model 400 K/s against 365 K/s measured, where a die free after tR gave 435 K/s (docs/calibration.md c.1).
    ///
    /// `physical` is where the pages are: their unit of a physical zone, and its place. Each read retry the unit's
    /// block needs (`read_retries`) senses and moves the pages once more before the read that succeeds: the die
    /// is busy that much longer (the retries' transfers are counted on the die, not on the channel).
    #[allow(clippy::too_many_arguments)]
    fn sense_and_move(
        &mut self,
        now: u64,
        start: u64,
        zone: LogicalZone,
        physical: (PhysicalZone, ProgramUnit, Place),
        pages: std::ops::Range<u64>,
        bytes: u64,
        source: OpSource,
    ) -> u64 {
        let (physical_zone, unit, place) = physical;
        let retries = self.read_retries(physical_zone, unit);
        let read_ns = self.costs.read_ns(self.layout.page_in_unit(pages.start), pages.end - pages.start);
        let move_ns = transfer_ns(bytes, self.costs.channel_ns_per_byte);
        let sense_ns = read_ns + retries * (read_ns + move_ns);
        let (sensed, suspended) = self.resources.sense(now, place.plane, start, sense_ns);
        self.resources.page_register[place.plane] =
            Some(HeldPages { zone, first_page: pages.start, end_page: pages.end, ready_ns: sensed });
        self.note(
            FlashOp::PageRead,
            source,
            (pages.end - pages.start) * (1 + retries),
            place,
            sensed - sense_ns,
            sensed,
        );
        let moved = self.resources.channels[place.channel].reserve(now, sensed, move_ns);
        if suspended {
            self.resources.hold_suspended(now, place.plane, moved);
        } else {
            self.resources.planes[place.plane].reserve(now, sensed, moved - sensed);
        }
        moved
    }

    /// The read retries a sense of `unit` of `physical_zone` needs: on average `read_retries_per_pe` times its
    /// block's erase count, the fraction drawn with the device's count of page reads so far as the seed, so that
    /// a run is reproducible. None on a device whose blocks were never erased.
    fn read_retries(&self, physical_zone: PhysicalZone, unit: ProgramUnit) -> u64 {
        if self.costs.read_retries_per_pe == 0.0 || !self.wear.any_erased() {
            return 0;
        }
        let erases = self.wear.erase_counts()[self.layout.block_of(physical_zone, unit)];
        let expected = self.costs.read_retries_per_pe * f64::from(erases);
        let whole = expected.floor();
        let draw = resources::uniform(self.counters.get(FlashOp::PageRead, OpSource::HostRead));
        whole as u64 + u64::from(draw < expected - whole)
    }

    /// A read that continues the zone's sequential stream: the controller has its pages in memory, or senses
    /// them now, whole, together with the pages up to `read_ahead_bytes` past `end` (as far as the zone is
    /// written), so that the stream's next reads find their data there. A read at the stream's end (`at_end`)
    /// passes the pages before it; one that ran ahead of an earlier read keeps them for it. Returns when the
    /// read's data is in.
    fn read_ahead(&mut self, now: u64, start: u64, zone: LogicalZone, offset: u64, end: u64, at_end: bool) -> u64 {
        let page_bytes = self.layout.page_bytes.get();
        let (first, end_page) = (self.layout.page_at(offset), self.layout.pages_to(end));
        let written_pages = self.layout.pages_to(self.zone(zone).written_bytes);
        let horizon = self.layout.pages_to(end + self.costs.read_ahead_bytes).min(written_pages).max(end_page);
        let programmed = self.zone(zone).programmed_units;
        let stream = &mut self.zone_mut(zone).read_ahead;
        if at_end {
            stream.consume_before(first);
        }
        if stream.pages.front().is_some_and(|&(front, _)| front > first) {
            stream.pages.clear();
        }
        let mut page = stream.next_page(first);
        while page < horizon {
            let unit = self.layout.unit_of_page(page);
            let ready = if unit.0 < programmed {
                let (physical_zone, physical_unit) = self.lookup(zone, unit);
                let place = self.layout.place(physical_zone, physical_unit);
                let physical = (physical_zone, physical_unit, place);
                self.sense_and_move(now, start, zone, physical, page..page + 1, page_bytes, OpSource::HostRead)
            } else {
                start
            };
            self.zone_mut(zone).read_ahead.pages.push_back((page, ready));
            page += 1;
        }
        self.zone(zone).read_ahead.ready(first, end_page).unwrap_or(start).max(start)
    }

    /// A zone management command's turn on the command processor.
    fn management_command(&mut self, now: u64) -> Processed {
        self.resources.command(now, self.costs.management_command_ns)
    }

    /// A zone management command that changes nothing on flash: the command processor's time only.
    pub fn management(&mut self, now: u64) -> u64 {
        self.management_command(now).done_ns
    }

    /// Explicit open.
    pub fn open(&mut self, now: u64) -> u64 {
        let command = self.management_command(now);
        command.done_ns.max(command.taken_ns + self.costs.open_ns)
    }

    /// Close; closing a zone that holds data costs more.
    pub fn close(&mut self, now: u64, zone: u32) -> u64 {
        let cost = if self.zone(LogicalZone(zone)).written_bytes == 0 {
            self.costs.close_ns
        } else {
            self.costs.close_written_ns
        };
        let command = self.management_command(now);
        command.done_ns.max(command.taken_ns + cost)
    }

    /// Reset: the controller's cost, then the erases the mapping policy asks for. Under `static-written-erase`,
    /// on each of the zone's planes the blocks that hold host data are erased before the reset completes (a
    /// partially programmed block is sealed first) and blocks that hold only finish padding after it, keeping
    /// their planes busy. Under `static-full-erase`, every block of a written zone is erased before it
    /// completes. Under `rezns`, the renewable mapping decides which physical zones are erased, and whether
    /// the reset waits for them. Data in the write buffer is dropped.
    pub fn reset(&mut self, now: u64, zone: u32) -> u64 {
        let zone = LogicalZone(zone);
        let command = self.management_command(now);
        let (command_done, start) = (command.done_ns, command.taken_ns + self.costs.reset_ns);
        let media = std::mem::take(self.zone_mut(zone));
        self.resources.forget_pages_of(zone);
        let mut done = start.max(command_done);
        if let Some(map) = self.renewable.as_mut() {
            let plan = map.reset(zone);
            done = done.max(self.erase_physical_zones(now, start, &plan.inline, true, OpSource::Reset));
            self.erase_physical_zones(now, start, &plan.deferred, false, OpSource::Reset);
            return done;
        }
        let block_units = self.layout.block_units();
        let blocks_per_plane = self.layout.blocks_per_zone_plane;
        let full_erase = self.config.mapping.policy == MappingPolicy::StaticFullErase && media.written_bytes > 0;
        let planes_per_zone = self.layout.planes_per_zone.get();
        let planes = if full_erase { planes_per_zone } else { planes_per_zone.min(media.programmed_units) };
        for plane_in_zone in 0..planes {
            let programmed_here = self.layout.units_on_plane(media.programmed_units, plane_in_zone);
            let host_here = self.layout.units_on_plane(media.host_units, plane_in_zone);
            let partial = !programmed_here.is_multiple_of(block_units);
            let erase = if full_erase {
                PlaneErase { seal_ns: 0, first_block: 0, waited_blocks: blocks_per_plane, blocks: blocks_per_plane }
            } else if media.sealed || !partial {
                PlaneErase {
                    seal_ns: 0,
                    first_block: 0,
                    waited_blocks: host_here / block_units,
                    blocks: programmed_here.div_ceil(block_units),
                }
            } else {
                PlaneErase {
                    seal_ns: self.costs.seal_ns,
                    first_block: 0,
                    waited_blocks: host_here.div_ceil(block_units),
                    blocks: programmed_here.div_ceil(block_units),
                }
            };
            let (plane_done, _) =
                self.erase_on_plane(now, start, PhysicalZone(zone.0), plane_in_zone, erase, OpSource::Reset);
            done = done.max(plane_done);
        }
        done
    }

    /// Erases every block of whole physical zones from `start`; returns when they are done if the caller waits
    /// for them (`inline`), or `start`. Programs into those zones wait for their erases (`Wear::erased_until`).
    fn erase_physical_zones(
        &mut self,
        now: u64,
        start: u64,
        physical_zones: &[PhysicalZone],
        inline: bool,
        source: OpSource,
    ) -> u64 {
        let blocks = self.layout.blocks_per_zone_plane;
        let erase = PlaneErase { seal_ns: 0, first_block: 0, waited_blocks: if inline { blocks } else { 0 }, blocks };
        let mut done = start;
        for &physical_zone in physical_zones {
            for plane_in_zone in 0..self.layout.planes_per_zone.get() {
                let (plane_done, erased) = self.erase_on_plane(now, start, physical_zone, plane_in_zone, erase, source);
                done = done.max(plane_done);
                self.wear.erased_at(physical_zone, erased);
            }
        }
        done
    }

    /// Erases the first `erase.blocks` blocks of a physical zone on one of its planes from `start`, after a
    /// seal; returns when the erases a reset waits for are done, and when all of them are.
    fn erase_on_plane(
        &mut self,
        now: u64,
        start: u64,
        physical_zone: PhysicalZone,
        plane_in_zone: u64,
        erase: PlaneErase,
        source: OpSource,
    ) -> (u64, u64) {
        let block_units = self.layout.block_units();
        let plane = self.layout.place(physical_zone, ProgramUnit(plane_in_zone)).plane;
        self.resources.page_register[plane] = None;
        let zone_latency = self.costs.erase_zone_latency;
        let mut at = if zone_latency {
            start
        } else {
            self.resources.planes[plane].reserve_after_all(now, start, erase.seal_ns)
        };
        let mut plane_done = if erase.seal_ns == 0 && erase.waited_blocks == 0 { start } else { at };
        let mut first_start = None;
        for nth in 0..erase.blocks {
            let block = erase.first_block + nth;
            // At zone granularity the zone's erases end together, `erase_ns` after the reset starts, on no plane.
            at = if zone_latency {
                start + self.costs.erase_ns
            } else {
                self.resources.erase_block(now, plane, at, self.costs.erase_ns)
            };
            first_start.get_or_insert(at - self.costs.erase_ns);
            let waited = nth < erase.waited_blocks;
            if waited {
                plane_done = at;
            }
            if nth + 1 == erase.waited_blocks && !zone_latency {
                self.resources.await_erase(now, plane, at);
            }
            let unit = ProgramUnit(block * block_units * self.layout.planes_per_zone.get() + plane_in_zone);
            self.wear.record_erase(self.layout.block_of(physical_zone, unit), waited);
        }
        let place = self.layout.place(physical_zone, ProgramUnit(plane_in_zone));
        self.note(FlashOp::BlockErase, source, erase.blocks, place, first_start.unwrap_or(at), at);
        (plane_done, at)
    }

    /// Erase counts over every block, and how erases were timed.
    pub fn erase_summary(&self) -> EraseSummary {
        self.wear.summary(self.renewable.as_ref().map(RenewableMap::stats))
    }

    /// Checks the renewable mapping's invariants against what each zone has programmed (always fine under the
    /// static policies): every programmed unit has a physical unit of its own in a physical zone its zone holds.
    pub fn check_mapping(&self) -> Result<(), String> {
        self.renewable.as_ref().map_or(Ok(()), |map| map.check(|zone| self.zone(zone).programmed_units))
    }

    /// Finish: the controller's cost, then padding for the rest of the capacity through the write budget and
    /// the zone's planes, and the sealing of the last partial blocks. An empty zone needs no padding, and a
    /// zone already sealed (full, or finished before) none either.
    pub fn finish(&mut self, now: u64, zone: u32) -> u64 {
        let zone = LogicalZone(zone);
        let command = self.management_command(now);
        let (command_done, start) = (command.done_ns, command.taken_ns + self.costs.finish_ns);
        let written = self.zone(zone).written_bytes;
        if written == 0 || self.zone(zone).sealed {
            self.zone_mut(zone).sealed = true;
            return start.max(command_done);
        }
        let (zone_cap_bytes, unit_bytes) = (self.layout.zone_cap_bytes, self.layout.unit_bytes.get());
        let padding = zone_cap_bytes - written;
        let (budget_start, budget_done) = self.resources.pad(start, padding);
        let host_units = written.div_ceil(unit_bytes);
        let mut last = self.program_through(now, zone, host_units, budget_start, OpSource::HostWrite);
        for unit in host_units..self.layout.units_per_zone {
            let padded_to = ((unit + 1) * unit_bytes).min(zone_cap_bytes) - written;
            // Each padded unit is in once its share of the padding's budget is spent.
            let ready = budget_start + resources::mul_div(budget_done - budget_start, padded_to, padding);
            last = last.max(self.program(now, zone, ProgramUnit(unit), ready, OpSource::FinishPadding));
            self.zone_mut(zone).programmed_units = unit + 1;
        }
        let media = self.zone_mut(zone);
        media.written_bytes = zone_cap_bytes;
        media.drop_buffer();
        let completion = self.seal(now, zone, last).max(budget_done).max(command_done);
        self.resources.write_budget.padding_completes(completion);
        completion
    }

    /// The controller finished an idle open zone (ReZNS's zombie scan). Under `rezns` nothing is padded: what
    /// the write buffer holds is programmed, and the erased rest of the zone becomes a spare for new zones.
    /// Under the static policies it is a finish like the host's. Returns when the flash work is done.
    pub fn finish_by_controller(&mut self, now: u64, zone: u32) -> u64 {
        if self.renewable.is_none() {
            return self.finish(now, zone);
        }
        let zone = LogicalZone(zone);
        let media = self.zone(zone);
        let (written, host_units) = (media.written_bytes, media.host_units);
        let partial_units = written.div_ceil(self.layout.unit_bytes.get());
        let mut done = now;
        if partial_units > host_units {
            done = self.program_through(now, zone, partial_units, now, OpSource::HostWrite);
        }
        let media = self.zone_mut(zone);
        media.drop_buffer();
        media.sealed = true;
        // Only now, with every unit of the zone handed out, is the rest of its physical zone known.
        if let Some(map) = self.renewable.as_mut() {
            let plan = map.release_rest(zone);
            self.erase_physical_zones(now, now, &plan.deferred, false, OpSource::Reset);
        }
        done
    }

    /// Host bytes of the zone that are durable at `at`: programmed, and every unit before them too. What is
    /// only in the write buffer is not.
    pub fn durable_bytes(&self, zone: u32, at: u64) -> u64 {
        self.zone(LogicalZone(zone)).durable_bytes(at, self.layout.unit_bytes.get())
    }

    /// Flush: every write completed so far becomes durable. The programs already under way finish, and the
    /// partial unit each zone holds in its write buffer is programmed as it is (a real drive writes it to a
    /// flush area; the model charges one program of the unit on its plane). Returns when all of it is done.
    pub fn flush(&mut self, now: u64) -> u64 {
        let command = self.management_command(now);
        let mut done = command.done_ns;
        let (unit_bytes, zone_cap_bytes) = (self.layout.unit_bytes.get(), self.layout.zone_cap_bytes);
        for index in 0..self.zones.len() as u32 {
            let zone = LogicalZone(index);
            let media = self.zone(zone);
            let pending = media.in_flight.iter().map(|unit| unit.release_ns).max().unwrap_or(0);
            done = done.max(pending);
            let written = media.written_bytes;
            let partial = self.costs.aggregate_program_units
                && written > media.host_units * unit_bytes
                && written < zone_cap_bytes
                && media.flushed.back().is_none_or(|&(bytes, _)| bytes < written);
            if partial {
                let unit = ProgramUnit(media.host_units);
                let programmed = self.program(now, zone, unit, command.taken_ns, OpSource::HostWrite);
                self.zone_mut(zone).record_flush(written, programmed);
                done = done.max(programmed);
            }
        }
        done
    }

    /// A power loss at `at`: each zone keeps `durable_bytes` and its write buffer is gone. With power-loss
    /// protection the caller does not call this: the buffer is flushed on capacitor power.
    pub fn lose_power(&mut self, at: u64) {
        let unit_bytes = self.layout.unit_bytes.get();
        for media in &mut self.zones {
            media.lose_power(at, unit_bytes);
        }
        self.resources.lose_power(at);
    }

    /// Marks the first `bytes` of a zone as written and programmed long ago, with no time spent: a drive
    /// preconditioned before a measurement. The tail that does not fill a program unit waits in the buffer.
    pub fn precondition(&mut self, zone: u32, bytes: u64) {
        let zone = LogicalZone(zone);
        let (unit_bytes, zone_cap_bytes) = (self.layout.unit_bytes.get(), self.layout.zone_cap_bytes);
        let units = if bytes == zone_cap_bytes { self.layout.units_per_zone } else { bytes / unit_bytes };
        if units > 0 {
            self.locate(zone, ProgramUnit(units - 1));
        }
        *self.zone_mut(zone) = ZoneMedia {
            written_bytes: bytes,
            programmed_units: units,
            host_units: units,
            buffered_bytes: bytes - (units * unit_bytes).min(bytes),
            sealed: bytes == zone_cap_bytes,
            ..ZoneMedia::default()
        };
    }

    /// The latest time any resource is reserved to; no command submitted later completes before it needs to.
    pub fn busy_until(&self) -> u64 {
        self.resources.busy_until()
    }

    /// When the flash fell idle, if it is idle at `now` (see `Resources::idle_since`).
    pub fn idle_since(&self, now: u64) -> Option<u64> {
        self.resources.idle_since(now)
    }
}

/// What a reset erases on one plane: a seal of the partial block first (0 for none), then `blocks` blocks, of
/// which the reset waits for the first `waited_blocks`.
#[derive(Clone, Copy, Debug)]
struct PlaneErase {
    seal_ns: u64,
    /// The plane's first block to erase, counted from the physical zone's first on that plane.
    first_block: u64,
    waited_blocks: u64,
    blocks: u64,
}

#[cfg(test)]
mod tests;

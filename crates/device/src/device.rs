//! The controller: each command runs through the namespace (what happens) and the flash model (when it
//! completes). Times are the device's: a command arrives at the controller at `now`, and completes when the
//! controller posts its completion; what the host path costs on either side is the host's (`HostSide`).

use serde::Serialize;
use zonelab_media::{FlashModel, MediaState, Restored, WriteKind};
use zonelab_zns::{
    Command, Completion, Effect, Executed, Geometry, ImageLock, InjectError, MediaStore, MemoryStore, Status,
    TransitionCause, ZoneSendAction, ZoneState, ZonedNamespace,
};

use crate::conventional::{Conventional, ConventionalStats};
use crate::queue::SubmissionQueue;
use crate::DeviceConfig;

/// A submitted command's outcome and when the device completes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submitted {
    pub complete_ns: u64,
    pub result: Result<Completion, Status>,
}

/// One command as the trace records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TraceEvent {
    pub submit_ns: u64,
    /// The completion the device gave when the command was submitted (one moved later afterwards, see
    /// `Device::moved_completions`, keeps its first time here).
    pub complete_ns: u64,
    pub nsid: u32,
    pub opcode: u8,
    /// A Zone Management Send's action (ZSA: 1 close, 2 finish, 3 open, 4 reset, 5 offline); 0 for others.
    pub action: u8,
    pub slba: u64,
    pub nlb: u64,
    /// NVMe status code, 0 on success.
    pub status: u16,
    /// The zoned namespace's open, active and EMPTY zones once the command has run.
    pub open_zones: u32,
    pub active_zones: u32,
    pub empty_zones: u32,
    /// Host data in the controller's write buffer, not yet absorbed by the flash, once the command has taken
    /// its own (`FlashModel::write_buffer_bytes` at its arrival).
    pub write_buffer_bytes: u64,
    /// The host task that submitted it, where the runtime tells (a simulation's task index): what joins a host
    /// operation (a compaction) to the commands it caused.
    pub submitter: Option<u32>,
}

/// A fault injected into a zone of a running device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneFault {
    /// The zone becomes READ_ONLY (again: EMPTY), as null_blk's configfs `zone_readonly` makes it.
    ReadOnly,
    /// The zone becomes OFFLINE (again: EMPTY), as null_blk's `zone_offline` makes it.
    Offline,
    /// The next read, write or append to the zone fails with a media error (Unrecovered Read Error for a read,
    /// Write Fault otherwise) and changes nothing, as dm-error or a failing drive gives one: what exercises a
    /// host's error path (zonefs's `errors=`) while the zone itself stays as it was.
    IoError,
}

/// Commands, and flash operations, a trace keeps at most: with the I/Os and the arrows between them about 700,000
/// events, 75 MB of trace-event JSON, which Perfetto's UI loads in seconds (a second of 4 KiB random reads on the
/// zn540 preset at QD 64 is about 280,000 commands, so its trace holds the first 0.36 s); past it a trace counts
/// what it drops.
pub const TRACE_LIMIT: usize = 100_000;

/// Commands and bytes the device has completed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceCounters {
    pub reads: u64,
    pub writes: u64,
    pub appends: u64,
    pub zone_management: u64,
    pub resets: u64,
    pub finishes: u64,
    /// Open zones the zombie scan finished.
    pub controller_finishes: u64,
    pub errors: u64,
    /// Dataset Management deallocates (a conventional namespace's trims).
    pub deallocates: u64,
    /// Reads that reached blocks no write has reached (at or past their zone's write pointer, or past its
    /// capacity; in a conventional namespace, never written or deallocated since): the device returns zeros for
    /// those blocks without reading flash.
    pub reads_of_unwritten: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl DeviceCounters {
    /// What was counted since `earlier` (a snapshot of the same counters).
    pub fn since(&self, earlier: &DeviceCounters) -> DeviceCounters {
        DeviceCounters {
            reads: self.reads - earlier.reads,
            writes: self.writes - earlier.writes,
            appends: self.appends - earlier.appends,
            zone_management: self.zone_management - earlier.zone_management,
            resets: self.resets - earlier.resets,
            finishes: self.finishes - earlier.finishes,
            controller_finishes: self.controller_finishes - earlier.controller_finishes,
            errors: self.errors - earlier.errors,
            deallocates: self.deallocates - earlier.deallocates,
            reads_of_unwritten: self.reads_of_unwritten - earlier.reads_of_unwritten,
            bytes_read: self.bytes_read - earlier.bytes_read,
            bytes_written: self.bytes_written - earlier.bytes_written,
        }
    }
}

/// How a command is timed, read off it before the namespace takes it.
#[derive(Clone, Copy)]
enum Timing {
    Read { slba: u64, nlb: u64 },
    Write(WriteKind),
    Flush,
    ZoneSend { slba: u64, action: ZoneSendAction, select_all: bool },
    Report,
}

/// What a device has done over its life so far: its commands, its flash operations with their energy, and the
/// wear of its blocks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceStats {
    pub name: String,
    pub counters: DeviceCounters,
    pub flash: zonelab_media::FlashCounters,
    /// Energy of every flash operation so far, from the preset's per-operation constants.
    pub energy_j_total: f64,
    pub wear: zonelab_media::EraseSummary,
    /// The conventional namespace's FTL, when the device has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conventional: Option<ConventionalStats>,
}

/// An emulated ZNS SSD over a media store: a zoned namespace, and a conventional one beside it when its
/// configuration has one, sharing the controller, link and dies.
#[derive(Debug)]
pub struct Device<S> {
    name: String,
    namespace: ZonedNamespace<S>,
    zoned_nsid: u32,
    conventional: Option<Conventional>,
    /// The namespace commands go to when the host names none (`enqueue`, `submit`).
    attached_nsid: u32,
    pub(crate) media: FlashModel,
    power_loss_protection: bool,
    counters: DeviceCounters,
    trace: Option<Vec<TraceEvent>>,
    trace_dropped: u64,
    zombie_scan: Option<ZombieScan>,
    /// When each zone was last written, for the zombie scan.
    last_write_ns: Vec<u64>,
    /// Zones whose next read, write or append fails (`ZoneFault::IoError`).
    io_faults: Vec<u32>,
    /// Commands waiting for the device (`queue.rs`).
    pub(crate) queue: SubmissionQueue,
    /// The host task of the command running now, for its trace event.
    pub(crate) trace_submitter: Option<u32>,
    /// The write running now took a place ahead of an outstanding write of its zone (`queue.rs`) and fails.
    pub(crate) overtaken_write: bool,
    /// The device image this device drives: held exclusively, and given the flash model's and the
    /// conventional namespace's FTL state on drop where they differ from what the device opened with.
    image: Option<OpenedImage>,
    /// What was taken from the image's saved media state, or why it was refused.
    media_restored: Option<Result<Restored, String>>,
}

/// ReZNS's zombie-zone daemon: every `period_ns` it finishes the open zones nobody wrote for `idle_ns`.
#[derive(Clone, Copy, Debug)]
struct ZombieScan {
    period_ns: u64,
    idle_ns: u64,
    next_ns: u64,
}

impl<S: MediaStore> Device<S> {
    /// A device as `config` describes it, over `store`; a conventional namespace keeps its data in memory.
    pub fn new(config: &DeviceConfig, store: S) -> Result<Device<S>, zonelab_zns::ConfigError> {
        let namespace = ZonedNamespace::new(config.namespace.clone(), store)?;
        Ok(Device::with_namespace(config, namespace))
    }

    /// A device over an existing namespace; a conventional namespace keeps its data in memory.
    pub fn with_namespace(config: &DeviceConfig, namespace: ZonedNamespace<S>) -> Device<S> {
        let memory = |bytes: u64| Box::new(MemoryStore::new(bytes)) as Box<dyn MediaStore>;
        Device::with_namespaces(config, namespace, config.conventional.as_ref().map(|cnv| memory(cnv.capacity.bytes())))
    }

    /// A device over an existing zoned namespace and, when `config` has a conventional namespace, `conventional`
    /// as its store (None leaves it out).
    pub fn with_namespaces(
        config: &DeviceConfig,
        namespace: ZonedNamespace<S>,
        conventional: Option<Box<dyn MediaStore>>,
    ) -> Device<S> {
        Device::assemble(config, namespace, conventional, None)
    }

    /// A device over a device image's namespace: the flash model takes up the state (wear, ReZNS's mapping) the
    /// image's last device saved, and this device saves its own through `lock` when it is dropped.
    ///
    /// The conventional namespace's FTL takes up the state the image's last device saved (`saved_ftl`), then
    /// maps data written after that save; an image without one has its FTL rebuilt from the data, every page
    /// that holds some written once, in order, as a sequential fill would have left them. An error names the
    /// image's file that is wrong, and why.
    pub fn over_image(
        config: &DeviceConfig,
        namespace: ZonedNamespace<S>,
        conventional: Option<Box<dyn MediaStore>>,
        lock: ImageLock,
        saved: Option<MediaState>,
        saved_ftl: Option<Vec<u8>>,
    ) -> Result<Device<S>, (&'static str, String)> {
        let mut device = Device::assemble(config, namespace, conventional, saved);
        if let Some(cnv) = device.conventional.as_mut() {
            match &saved_ftl {
                Some(bytes) => cnv.restore_ftl(bytes).map_err(|reason| (zonelab_zns::FTL_STATE_FILE, reason))?,
                None => cnv.map_stored_data().map_err(|error| ("conventional.data", error.to_string()))?,
            }
        }
        let ftl_state = device.conventional.as_ref().and_then(Conventional::saved_ftl).map(|bytes| digest(&bytes));
        device.image = Some(OpenedImage { lock, media_state: encoded_state(&device.media), ftl_state });
        Ok(device)
    }

    fn assemble(
        config: &DeviceConfig,
        namespace: ZonedNamespace<S>,
        conventional: Option<Box<dyn MediaStore>>,
        saved: Option<MediaState>,
    ) -> Device<S> {
        let geometry = *namespace.geometry();
        let zone_cap_bytes = geometry.zone_cap_lba << geometry.lba_shift;
        let mut media = FlashModel::new(config.media.clone(), geometry.zones, zone_cap_bytes);
        // The conventional namespace's blocks are physical zones past the zones' own, set aside before the saved
        // wear is restored so that it covers them too.
        let conventional = config.conventional.as_ref().zip(conventional).map(|(cnv, store)| {
            Conventional::new(cnv, store, &mut media).expect("a device configuration is validated when it is loaded")
        });
        // What the namespace already holds (an image written by an earlier process) was programmed long ago: a
        // FULL zone wholly (data and finish padding), any other the blocks below its write pointer.
        let written_bytes: Vec<u64> = (0..geometry.zones)
            .map(|zone| match namespace.zone(zone).state {
                ZoneState::Full => zone_cap_bytes,
                ZoneState::Offline => 0,
                _ => namespace.written_lba(zone) << geometry.lba_shift,
            })
            .collect();
        let media_restored = saved.map(|state| media.restore(state, &written_bytes));
        for (zone, &bytes) in (0..).zip(&written_bytes) {
            if bytes > 0 {
                media.precondition(zone, bytes);
            }
        }
        Device {
            name: config.name.clone(),
            namespace,
            zoned_nsid: config.zoned_nsid,
            conventional,
            attached_nsid: config.default_nsid(),
            media,
            power_loss_protection: config.power_loss_protection,
            counters: DeviceCounters::default(),
            trace: None,
            trace_dropped: 0,
            zombie_scan: (config.media.mapping.zombie_scan_period_s > 0.0).then(|| {
                let period_ns = (config.media.mapping.zombie_scan_period_s * 1e9) as u64;
                ZombieScan { period_ns, idle_ns: (config.media.mapping.zombie_idle_s * 1e9) as u64, next_ns: period_ns }
            }),
            last_write_ns: vec![0; geometry.zones as usize],
            io_faults: Vec::new(),
            queue: SubmissionQueue::default(),
            trace_submitter: None,
            overtaken_write: false,
            image: None,
            media_restored,
        }
    }

    /// The host error behind the last Write Fault or Unrecovered Read Error of an image's files, once.
    pub fn take_host_fault(&mut self) -> Option<zonelab_zns::HostFault> {
        self.namespace.take_host_fault()
    }

    /// What was taken from the image's saved media state (None when there was none), or why it was refused.
    pub fn media_restored(&self) -> Option<&Result<Restored, String>> {
        self.media_restored.as_ref()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The zoned namespace (on a device without one, the superblock-shaped namespace no host reaches:
    /// `DeviceConfig::superblock_namespace`).
    pub fn namespace(&self) -> &ZonedNamespace<S> {
        &self.namespace
    }

    /// The namespace IDs the device has, lowest first.
    pub fn namespace_ids(&self) -> Vec<u32> {
        let zoned = Some(self.zoned_nsid).filter(|&nsid| nsid != 0);
        let mut ids: Vec<u32> = zoned.into_iter().chain(self.conventional.as_ref().map(|cnv| cnv.nsid)).collect();
        ids.sort_unstable();
        ids
    }

    /// The zoned namespace's ID.
    pub fn zoned_nsid(&self) -> u32 {
        self.zoned_nsid
    }

    /// The geometry of namespace `nsid` (what Identify Namespace tells a host), if the device has it.
    pub fn geometry_of(&self, nsid: u32) -> Option<Geometry> {
        if nsid != 0 && nsid == self.zoned_nsid {
            return Some(*self.namespace.geometry());
        }
        self.conventional.as_ref().filter(|cnv| cnv.nsid == nsid).map(|cnv| *cnv.namespace.geometry())
    }

    /// The namespace commands go to when the host names none, and its geometry.
    pub fn attached_nsid(&self) -> u32 {
        self.attached_nsid
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry_of(self.attached_nsid).unwrap_or(*self.namespace.geometry())
    }

    /// Checks a read of `nlb` blocks at `slba` on namespace `nsid` as it would run, moving no data.
    pub fn check_read(&self, nsid: u32, slba: u64, nlb: u64) -> Result<(), Status> {
        match &self.conventional {
            _ if nsid != 0 && nsid == self.zoned_nsid => self.namespace.check_read(slba, nlb),
            Some(cnv) if cnv.nsid == nsid => cnv.namespace.check_read(slba, nlb),
            _ => Err(Status::InvalidNamespaceOrFormat),
        }
    }

    /// Sends the commands that name no namespace to `nsid`; Invalid Namespace or Format if there is none.
    pub fn attach(&mut self, nsid: u32) -> Result<(), Status> {
        self.geometry_of(nsid).ok_or(Status::InvalidNamespaceOrFormat)?;
        self.attached_nsid = nsid;
        Ok(())
    }

    /// Brings the conventional namespace to a steady state with no time passing: every page written once,
    /// then `random_passes` times more at random (seeded). Invalid Namespace or Format without one.
    pub fn precondition_conventional(&mut self, random_passes: u32, seed: u64) -> Result<(), Status> {
        let cnv = self.conventional.as_mut().ok_or(Status::InvalidNamespaceOrFormat)?;
        cnv.precondition(random_passes, seed);
        Ok(())
    }

    /// The stored bytes, to damage behind the controller's back in fault-injection tests.
    pub fn store_mut(&mut self) -> &mut S {
        self.namespace.store_mut()
    }

    pub fn media(&self) -> &FlashModel {
        &self.media
    }

    pub fn stats(&self) -> DeviceStats {
        DeviceStats {
            name: self.name.clone(),
            counters: self.counters.clone(),
            flash: self.media.counters().clone(),
            energy_j_total: self.media.counters().total_energy_nj(&self.media.config().energy) / 1e9,
            wear: self.media.erase_summary(),
            conventional: self.conventional.as_ref().map(Conventional::stats),
        }
    }

    pub fn counters(&self) -> &DeviceCounters {
        &self.counters
    }

    /// Starts recording a trace event per command, and every flash operation with the command it was booked
    /// for (`FlashModel::flash_trace`), up to `TRACE_LIMIT` of each.
    pub fn enable_trace(&mut self) {
        self.trace.get_or_insert_with(Vec::new);
        self.media.enable_trace(TRACE_LIMIT);
    }

    pub fn trace(&self) -> &[TraceEvent] {
        self.trace.as_deref().unwrap_or(&[])
    }

    /// The commands a trace did not keep (past `TRACE_LIMIT`).
    pub fn trace_dropped(&self) -> u64 {
        self.trace_dropped
    }

    /// Names the command about to run as the cause of the flash operations it books: its place in the trace.
    /// Untraced, nothing: every command passes here.
    #[inline]
    fn trace_next_command(&mut self) {
        if let Some(trace) = &self.trace {
            let next = trace.len() as u64;
            self.media.trace_cause((next < TRACE_LIMIT as u64).then_some(next));
        }
    }

    /// Marks the first `bytes` of a zone as written long ago (a preconditioned drive), without time passing:
    /// the namespace gets the data through its store, the flash model the occupancy.
    pub fn precondition(&mut self, zone: u32, bytes: u64) -> Result<(), Status> {
        let geometry = *self.namespace.geometry();
        let start = geometry.zone_start_lba(zone);
        let blocks = bytes >> geometry.lba_shift;
        if blocks > 0 {
            self.namespace.write_zeroes(start, blocks)?;
        }
        self.media.precondition(zone, blocks << geometry.lba_shift);
        Ok(())
    }

    /// Runs `command` on the attached namespace (`attach`); see `submit_to`.
    pub fn submit(&mut self, now: u64, command: Command<'_>) -> Submitted {
        self.submit_to(self.attached_nsid, now, command)
    }

    /// Runs `command` on namespace `nsid`, arrived at the controller at `now`: the namespace decides what
    /// happens, the flash model when the device is done.
    pub fn submit_to(&mut self, nsid: u32, now: u64, command: Command<'_>) -> Submitted {
        if nsid == 0 || nsid != self.zoned_nsid {
            return self.submit_conventional(nsid, now, command);
        }
        let described = self.trace.is_some().then(|| describe(nsid, &command, self.namespace.geometry().lba_shift));
        self.trace_next_command();
        let changes_mapping = cfg!(debug_assertions) && matches!(command, Command::ZoneManagementSend { .. });
        let overtaken = std::mem::take(&mut self.overtaken_write);
        let outcome = match self.take_io_fault(&command) {
            Some(status) => Err(status),
            None if overtaken => Err(Status::ZoneInvalidWrite),
            None => self.scan_for_zombies(now).and_then(|()| self.run(now, command)),
        };
        // The namespace checks its own invariants after every change (debug builds); the mapping of logical
        // to physical zones (ReZNS's renewals) is the flash model's, checked here after the commands that move
        // it, on devices small enough for a full check each time.
        if changes_mapping && self.namespace.geometry().zones <= 256 {
            if let Err(broken) = self.media.check_mapping() {
                panic!("the zone mapping broke at {now} ns: {broken}");
            }
        }
        self.complete(now, described, outcome)
    }

    /// Injects `fault` into zone `zone` of the zoned namespace.
    pub fn inject_fault(&mut self, zone: u32, fault: ZoneFault) -> Result<(), InjectError> {
        match fault {
            ZoneFault::ReadOnly => self.namespace.inject_zone_state(zone, ZoneState::ReadOnly),
            ZoneFault::Offline => self.namespace.inject_zone_state(zone, ZoneState::Offline),
            ZoneFault::IoError => {
                let zones = self.namespace.geometry().zones;
                if zone >= zones {
                    return Err(InjectError::NoSuchZone { zone, zones });
                }
                self.io_faults.push(zone);
                Ok(())
            }
        }
    }

    /// The media error an injected I/O fault gives `command`, taking the fault, if it reads or writes a zone that
    /// has one.
    fn take_io_fault(&mut self, command: &Command<'_>) -> Option<Status> {
        if self.io_faults.is_empty() {
            return None;
        }
        let (lba, status) = match command {
            Command::Read { slba, .. } | Command::ReadDiscard { slba, .. } => (*slba, Status::UnrecoveredReadError),
            Command::Write { slba, .. } | Command::WriteZeroes { slba, .. } => (*slba, Status::WriteFault),
            Command::Append { zslba, .. } => (*zslba, Status::WriteFault),
            _ => return None,
        };
        let zone = self.namespace.geometry().zone_of(lba);
        let index = self.io_faults.iter().position(|&faulty| faulty == zone)?;
        self.io_faults.swap_remove(index);
        Some(status)
    }

    /// A command to a namespace other than the zoned one: the conventional namespace's, if `nsid` is its.
    fn submit_conventional(&mut self, nsid: u32, now: u64, command: Command<'_>) -> Submitted {
        let shift = self.geometry_of(nsid).map_or(0, |geometry| geometry.lba_shift);
        let described = self.trace.is_some().then(|| describe(nsid, &command, shift));
        self.trace_next_command();
        // What the command adds to the counters if it succeeds: reads and their bytes, writes and theirs,
        // deallocates.
        let (reads, bytes_read, writes, bytes_written, deallocates) = match &command {
            Command::Read { buf, .. } => (1, buf.len() as u64, 0, 0, 0),
            Command::ReadDiscard { nlb, .. } => (1, nlb << shift, 0, 0, 0),
            Command::Write { data, .. } => (0, 0, 1, data.len() as u64, 0),
            Command::Deallocate { .. } => (0, 0, 0, 0, 1),
            _ => (0, 0, 0, 0, 0),
        };
        let mut unwritten = 0;
        let outcome = match self.conventional.as_mut().filter(|cnv| cnv.nsid == nsid) {
            Some(cnv) => {
                cnv.collect_while_idle(&mut self.media, now);
                let before = cnv.reads_of_unwritten;
                let outcome = cnv.run(&mut self.media, self.power_loss_protection, now, command);
                unwritten = cnv.reads_of_unwritten - before;
                outcome
            }
            None => Err(Status::InvalidNamespaceOrFormat),
        };
        if outcome.is_ok() {
            let counters = &mut self.counters;
            counters.reads += reads;
            counters.bytes_read += bytes_read;
            counters.writes += writes;
            counters.bytes_written += bytes_written;
            counters.deallocates += deallocates;
            counters.reads_of_unwritten += unwritten;
        }
        self.complete(now, described, outcome)
    }

    /// The end of a command: errors complete as soon as the device has them; the trace records it (`described`
    /// when there is a trace). Inlined, with the trace out of line: every command ends here.
    #[inline]
    fn complete(
        &mut self,
        now: u64,
        described: Option<(u32, u8, u64, u64, u8)>,
        outcome: Result<(u64, Completion), Status>,
    ) -> Submitted {
        let (device_done, result) = match outcome {
            Ok((done, completion)) => (done, Ok(completion)),
            Err(status) => {
                self.counters.errors += 1;
                (now, Err(status))
            }
        };
        let complete_ns = device_done.max(now);
        if let Some(described) = described {
            self.record(now, complete_ns, described, result.err());
        }
        Submitted { complete_ns, result }
    }

    /// Records an ended command in the trace (`described` is Some only when there is one), or counts it dropped
    /// once the trace is full.
    #[cold]
    fn record(
        &mut self,
        now: u64,
        complete_ns: u64,
        (nsid, opcode, slba, nlb, action): (u32, u8, u64, u64, u8),
        error: Option<Status>,
    ) {
        let Some(trace) = &mut self.trace else { return };
        if trace.len() < TRACE_LIMIT {
            let status = error.map_or(0, Status::code);
            let (open_zones, active_zones) = (self.namespace.open_zones(), self.namespace.active_zones());
            trace.push(TraceEvent {
                submit_ns: now,
                complete_ns,
                nsid,
                opcode,
                action,
                slba,
                nlb,
                status,
                open_zones,
                active_zones,
                empty_zones: self.namespace.empty_zones(),
                write_buffer_bytes: self.media.write_buffer_bytes(now),
                submitter: self.trace_submitter,
            });
        } else {
            self.trace_dropped += 1;
        }
        self.media.trace_cause(None);
    }

    /// Runs `command` through the namespace, then hands what it did (its effects) to the flash model.
    fn run(&mut self, at: u64, command: Command<'_>) -> Result<(u64, Completion), Status> {
        let lba_shift = self.namespace.geometry().lba_shift;
        let timing = match &command {
            Command::Read { slba, buf } => Timing::Read { slba: *slba, nlb: buf.len() as u64 >> lba_shift },
            Command::ReadDiscard { slba, nlb } => Timing::Read { slba: *slba, nlb: *nlb },
            Command::Write { .. } => Timing::Write(WriteKind::Write),
            Command::WriteZeroes { .. } => Timing::Write(WriteKind::Zeroes),
            Command::Append { .. } => Timing::Write(WriteKind::Append),
            Command::Flush => Timing::Flush,
            // The zoned namespace refuses it before any timing.
            Command::Deallocate { .. } => Timing::Report,
            Command::ZoneManagementSend { slba, action, select_all } => {
                Timing::ZoneSend { slba: *slba, action: *action, select_all: *select_all }
            }
            Command::ZoneManagementReceive { .. } => Timing::Report,
        };
        let executed = self.namespace.execute(command)?;
        let done = match timing {
            Timing::Read { slba, nlb } => self.timed_read(at, slba, nlb << lba_shift),
            Timing::Write(kind) => self.timed_write(at, &executed, kind),
            // With power-loss protection the write buffer is durable on capacitor power: a flush has nothing
            // to program and costs the command alone (Linux does not even send one to a drive that reports no
            // volatile write cache). Without it, the partial units of the write buffer are programmed.
            Timing::Flush if self.power_loss_protection => self.media.management(at),
            Timing::Flush => self.media.flush(at),
            Timing::ZoneSend { slba, action, select_all } => {
                self.timed_zone_send(at, &executed, slba, action, select_all)
            }
            Timing::Report => at,
        };
        Ok((done, executed.completion))
    }

    /// The flash time of a read of `len_bytes` at `slba`, zone by zone.
    fn timed_read(&mut self, at: u64, slba: u64, len_bytes: u64) -> u64 {
        let geometry = *self.namespace.geometry();
        let lba_shift = geometry.lba_shift;
        let mut done = at;
        let mut unwritten = false;
        let (mut lba, end) = (slba, slba + (len_bytes >> lba_shift));
        while lba < end {
            let zone = geometry.zone_of(lba);
            let piece_end = end.min(geometry.zone_start_lba(zone) + geometry.zone_size_lba);
            let offset = (lba - geometry.zone_start_lba(zone)) << lba_shift;
            done = done.max(self.media.read(at, zone, offset, (piece_end - lba) << lba_shift));
            unwritten |= piece_end > self.namespace.written_end_lba(zone);
            lba = piece_end;
        }
        self.counters.reads += 1;
        self.counters.reads_of_unwritten += u64::from(unwritten);
        self.counters.bytes_read += len_bytes;
        done
    }

    /// The flash time of a write, write zeroes or append, from its effects: the range written (the first write
    /// to a zone it opens implicitly pays the open), and the zone an auto-close closed to make room, which the
    /// controller closes before it opens the new one.
    fn timed_write(&mut self, at: u64, executed: &Executed, kind: WriteKind) -> u64 {
        let geometry = *self.namespace.geometry();
        let mut done = at;
        for effect in &executed.effects {
            match *effect {
                Effect::Written { zone, slba, nlb } => {
                    let opens = executed.transitions_of(zone).any(|(from, _, cause)| {
                        cause == TransitionCause::Write && matches!(from, ZoneState::Empty | ZoneState::Closed)
                    });
                    self.last_write_ns[zone as usize] = at;
                    let offset = (slba - geometry.zone_start_lba(zone)) << geometry.lba_shift;
                    let len_bytes = nlb << geometry.lba_shift;
                    done = done.max(self.media.write(at, zone, offset, len_bytes, kind, opens));
                    if kind == WriteKind::Append {
                        self.counters.appends += 1;
                    } else {
                        self.counters.writes += 1;
                    }
                    self.counters.bytes_written += len_bytes;
                }
                Effect::Transition { zone, cause: TransitionCause::AutoClose, .. } => {
                    done = done.max(self.media.close(at, zone));
                }
                Effect::Transition { .. } => {}
            }
        }
        done
    }

    /// The flash time of a Zone Management Send, zone by zone from its effects. A command that changed no zone
    /// (resetting an EMPTY zone, finishing a FULL one) still costs the controller its work: a reset asks the
    /// flash model (which erases nothing), anything else is command processing only.
    fn timed_zone_send(
        &mut self,
        at: u64,
        executed: &Executed,
        slba: u64,
        action: ZoneSendAction,
        select_all: bool,
    ) -> u64 {
        self.counters.zone_management += 1;
        if executed.effects.is_empty() {
            let zone = self.namespace.geometry().zone_of(slba);
            return match action {
                ZoneSendAction::Reset if !select_all => self.media.reset(at, zone),
                _ => self.media.management(at),
            };
        }
        let mut done = at;
        for effect in &executed.effects {
            let Effect::Transition { zone, cause, .. } = *effect else { continue };
            let finished = match cause {
                TransitionCause::AutoClose => self.media.close(at, zone),
                TransitionCause::Host(ZoneSendAction::Reset) => {
                    self.counters.resets += 1;
                    self.media.reset(at, zone)
                }
                TransitionCause::Host(ZoneSendAction::Finish) => {
                    self.counters.finishes += 1;
                    self.media.finish(at, zone)
                }
                TransitionCause::Host(ZoneSendAction::Open) => self.media.open(at),
                TransitionCause::Host(ZoneSendAction::Close) => self.media.close(at, zone),
                _ => self.media.management(at),
            };
            done = done.max(finished);
        }
        done
    }

    /// Runs the zombie scans due by `now` (the last one only: between commands nothing changes): open zones
    /// unwritten for the idle time are finished by the controller.
    fn scan_for_zombies(&mut self, now: u64) -> Result<(), Status> {
        let Some(scan) = self.zombie_scan.as_mut() else { return Ok(()) };
        if now < scan.next_ns {
            return Ok(());
        }
        let at = scan.next_ns + (now - scan.next_ns) / scan.period_ns * scan.period_ns;
        scan.next_ns = at + scan.period_ns;
        let idle_ns = scan.idle_ns;
        for zone in 0..self.namespace.geometry().zones {
            let state = self.namespace.zone(zone).state;
            let open = matches!(state, ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened);
            if open && self.last_write_ns[zone as usize].saturating_add(idle_ns) <= at {
                self.namespace.finish_by_controller(zone)?;
                self.media.finish_by_controller(at, zone);
                self.counters.controller_finishes += 1;
            }
        }
        Ok(())
    }

    /// A power loss at `at`. Without power-loss protection, data that was acknowledged but sat unprogrammed in a
    /// write buffer is lost and each zone's write pointer rolls back to what was durable; with it, everything
    /// acknowledged survives. Either way the controller then comes back up (the controller-reset rule).
    pub fn power_loss(&mut self, at: u64) -> Result<(), Status> {
        if !self.power_loss_protection {
            let geometry = *self.namespace.geometry();
            for zone in 0..geometry.zones {
                let durable_lba = self.media.durable_bytes(zone, at) >> geometry.lba_shift;
                self.namespace.lose_unwritten_data(zone, geometry.zone_start_lba(zone) + durable_lba)?;
            }
            self.media.lose_power(at);
        }
        self.forget_in_flight();
        self.namespace.power_cycle()
    }
}

/// Namespace, opcode, SLBA, block count and zone send action (0 for other commands) of a command, for the
/// trace.
fn describe(nsid: u32, command: &Command<'_>, lba_shift: u32) -> (u32, u8, u64, u64, u8) {
    let action = match command {
        Command::ZoneManagementSend { action, .. } => *action as u8,
        _ => 0,
    };
    let (opcode, slba, nlb) = match command {
        Command::Read { slba, buf } => (0x02, *slba, (buf.len() as u64) >> lba_shift),
        Command::ReadDiscard { slba, nlb } => (0x02, *slba, *nlb),
        Command::Write { slba, data } => (0x01, *slba, (data.len() as u64) >> lba_shift),
        Command::WriteZeroes { slba, nlb } => (0x08, *slba, *nlb),
        Command::Append { zslba, data } => (0x7d, *zslba, (data.len() as u64) >> lba_shift),
        Command::Flush => (0x00, 0, 0),
        Command::Deallocate { slba, nlb } => (0x09, *slba, *nlb),
        Command::ZoneManagementSend { slba, .. } => (0x79, *slba, 0),
        Command::ZoneManagementReceive { slba, .. } => (0x7a, *slba, 0),
    };
    (nsid, opcode, slba, nlb, action)
}

/// The flash model's state as an image keeps it (`media.json`).
fn encoded_state(media: &FlashModel) -> Vec<u8> {
    serde_json::to_vec(&media.state()).expect("a media state always encodes")
}

/// The image a device drives, and what it opened with of the states it saves.
#[derive(Debug)]
struct OpenedImage {
    lock: ImageLock,
    media_state: Vec<u8>,
    /// A digest of the conventional namespace's FTL state (None: none built).
    ftl_state: Option<u64>,
}

/// Tells a changed FTL state from an unchanged one without keeping a copy of it (megabytes for GiBs).
fn digest(bytes: &[u8]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(bytes, &mut hasher);
    std::hash::Hasher::finish(&hasher)
}

/// A device over an image leaves the flash model's state in it, so the next device takes up its wear, and the
/// conventional namespace's FTL state, so the next takes up its steady state. A device that changed neither
/// leaves the image as it was.
impl<S> Drop for Device<S> {
    fn drop(&mut self) {
        let Some(opened) = &self.image else { return };
        let state = encoded_state(&self.media);
        if state != opened.media_state {
            if let Err(error) = opened.lock.save_media_state(&state) {
                eprintln!("zonelab: warning: the image's wear and mapping were not saved: {error}");
            }
        }
        if let Some(ftl) = self.conventional.as_ref().and_then(Conventional::saved_ftl) {
            if Some(digest(&ftl)) != opened.ftl_state {
                if let Err(error) = opened.lock.save_ftl_state(&ftl) {
                    eprintln!("zonelab: warning: the conventional namespace's FTL state was not saved: {error}");
                }
            }
        }
    }
}

//! A run as a cross-layer trace in the Chrome trace-event JSON format, which Perfetto's UI (ui.perfetto.dev) and
//! chrome://tracing open as is (`--trace FILE` of zonelab's tools in virtual time; `trace=FILE` in the spec of a
//! real-time device: the mount, the C library, the RocksDB plugin). Four processes hold the tracks:
//!
//! - **the program**: a track per fio job instance or host thread, a slice per I/O from when it was prepared to
//!   its completion, and a track per kind of a program's operations (kv-bench's flushes and compactions, the
//!   RocksDB plugin's file calls by thread);
//! - **device**: a track per zone of the zoned namespace (and one per other namespace), a slice per command
//!   from its arrival at the controller to its completion, and counters of open, active and EMPTY zones and of
//!   the write buffer's fill;
//! - **flash**: a track per plane (with its channel), a slice per sense, program or erase, named by its
//!   source (host write, finish padding, garbage collection...);
//! - **scheduler**: a track per queue of the host's scheduler (mq-deadline's writes waiting for a zone's lock,
//!   ZINC's held resets and finishes), a slice per request that waited there, named by how it left, with an
//!   arrow to the command it became.
//!
//! Flow arrows join an I/O to the commands it became (a command of its kind within its range, arrived while the
//! I/O was in flight), a program's operation to the commands its task submitted while it ran (a compaction to its
//! reads, writes and the zone resets its deleted inputs caused), and a command to the flash operations the device
//! booked while running it, even those that run after it completed (a write buffer's program). Slices that overlap on one track (several commands in
//! flight to a zone, a read that suspends a program) go to lanes of it, numbered after the first. The device
//! keeps at most `TRACE_LIMIT` commands and as many flash operations; the file says how many it left out.

use std::io::Write;
use std::path::Path;

use std::borrow::Cow;

pub use zonelab_device::TRACE_LIMIT;
use zonelab_device::{Device, TraceEvent};
use zonelab_media::{FlashOp, OpSource};
use zonelab_runtime::{IoData, QueuedCommand};
use zonelab_zns::{MediaStore, ZoneSendAction};

use crate::{QueueSpan, SchedulerQueue};

/// What an I/O asked for, which names its slice and says which commands it may have become.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoKind {
    Read,
    /// A write or a zone append.
    Write,
    /// A deallocate or a zone reset.
    Trim,
    /// A flush.
    Sync,
    /// A zone open, close or finish.
    Zone,
}

impl IoKind {
    /// What `command` is as an I/O of a host thread: its kind, first block and blocks (none for a report).
    pub fn of(command: &QueuedCommand, lba_shift: u32) -> Option<(IoKind, u64, u64)> {
        let blocks = |data: &IoData| data.len() >> lba_shift;
        Some(match command {
            QueuedCommand::Read { slba, nlb, .. } => (IoKind::Read, *slba, *nlb),
            QueuedCommand::Write { slba, data } => (IoKind::Write, *slba, blocks(data)),
            QueuedCommand::WriteZeroes { slba, nlb } => (IoKind::Write, *slba, *nlb),
            QueuedCommand::Append { zslba, data } => (IoKind::Write, *zslba, blocks(data)),
            QueuedCommand::Flush => (IoKind::Sync, 0, 0),
            QueuedCommand::Deallocate { slba, nlb } => (IoKind::Trim, *slba, *nlb),
            QueuedCommand::ZoneSend { slba, action: ZoneSendAction::Reset, .. } => (IoKind::Trim, *slba, 1),
            QueuedCommand::ZoneSend { slba, .. } => (IoKind::Zone, *slba, 1),
            QueuedCommand::Report { .. } => return None,
        })
    }
}

/// One I/O of a job or host thread, as the trace draws it.
#[derive(Clone, Copy, Debug)]
pub struct IoSpan {
    pub kind: IoKind,
    pub lba: u64,
    pub blocks: u64,
    /// When fio began preparing it, when it was issued, and when it completed, in device time.
    pub start_ns: u64,
    pub issued_ns: u64,
    pub end_ns: u64,
    pub ok: bool,
}

/// An operation of a program other than fio (kv-bench's flushes and compactions), on a track of its kind.
#[derive(Clone, Debug)]
pub struct OperationSpan {
    pub track: Cow<'static, str>,
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The simulation task that ran it: the commands that task submitted within the span are the operation's
    /// (`TraceEvent::submitter`), joined to it by flow arrows.
    pub task: Option<u32>,
}

/// Processes of the trace.
const FIO_PID: u32 = 1;
const DEVICE_PID: u32 = 2;
const FLASH_PID: u32 = 3;
const SCHEDULER_PID: u32 = 4;

/// Lanes a track may take: thread ids are `track * LANES + lane`.
const LANES: u64 = 64;

/// One slice before it is written: its track, its span, and what it was (the index of its I/O, command or
/// flash operation, whose fields name it when it is written).
struct Slice {
    pid: u32,
    track: u64,
    start_ns: u64,
    end_ns: u64,
    what: What,
    /// Its lane on the track, assigned once every slice of the track is known.
    lane: u64,
}

#[derive(Clone, Copy)]
enum What {
    Io(IoSpan),
    Operation(usize),
    Command(usize),
    Flash(usize),
    Queued(usize),
}

impl Slice {
    fn tid(&self) -> u64 {
        self.track * LANES + self.lane
    }
}

/// A scheduler queue's track: ZINC's two, then a zone's write queue by its number.
fn queue_track(queue: SchedulerQueue) -> u64 {
    match queue {
        SchedulerQueue::Resets => 0,
        SchedulerQueue::Finishes => 1,
        SchedulerQueue::ZoneWrites(zone) => 2 + zone,
    }
}

/// Checks before a run that its trace can be written at `path`, so that a path in a missing directory or on a
/// full device is refused up front instead of losing the whole trace when the run ends: writes an empty trace
/// there, which the run's trace replaces.
pub fn prepare_trace(path: &Path) -> std::io::Result<()> {
    // An unbuffered write: a full device (/dev/full) refuses it here.
    std::io::Write::write_all(&mut std::fs::File::create(path)?, b"{\"traceEvents\":[]}\n")
}

/// Writes the trace of a run of `program` (fio, wal-bench...): the jobs' I/Os by thread name (none for a
/// program other than fio), the scheduler's queues, and the device's commands and flash operations.
pub fn write_trace<S: MediaStore>(
    path: &Path,
    program: &str,
    jobs: &[(String, Vec<IoSpan>)],
    operations: &[OperationSpan],
    queued: &[QueueSpan],
    device: &Device<S>,
) -> std::io::Result<()> {
    let commands = device.trace();
    let (flash, flash_dropped) = device.media().flash_trace();
    let geometry = *device.namespace().geometry();
    let zoned_nsid = device.zoned_nsid();
    // Past the device's bound the trace ends where its commands or flash operations stop: I/Os that start later
    // are left out too, so what the file holds is the whole stack up to that instant.
    let window_end = |dropped: u64, last: Option<u64>| if dropped > 0 { last } else { None };
    let ends = [
        window_end(device.trace_dropped(), commands.last().map(|command| command.submit_ns)),
        window_end(flash_dropped, flash.iter().map(|op| op.start_ns).max()),
    ];
    let until_ns = ends.into_iter().flatten().min().unwrap_or(u64::MAX);
    let mut slices = Vec::with_capacity(jobs.iter().map(|(_, spans)| spans.len()).sum::<usize>() + commands.len());
    for (index, (_, spans)) in jobs.iter().enumerate() {
        for span in spans.iter().filter(|span| span.start_ns <= until_ns) {
            let (start_ns, end_ns, what) = (span.start_ns, span.end_ns, What::Io(*span));
            slices.push(Slice { pid: FIO_PID, track: index as u64, start_ns, end_ns, what, lane: 0 });
        }
    }
    // A program's operations follow the jobs' tracks, a track per kind in the order the kinds first appear.
    let mut kinds: Vec<&str> = Vec::new();
    let mut operation_slices = Vec::new();
    for (index, operation) in operations.iter().enumerate().filter(|(_, op)| op.start_ns <= until_ns) {
        operation_slices.push((index, slices.len()));
        let kind = match kinds.iter().position(|&kind| kind == operation.track) {
            Some(kind) => kind,
            None => {
                kinds.push(&operation.track);
                kinds.len() - 1
            }
        };
        let (start_ns, end_ns, what) = (operation.start_ns, operation.end_ns, What::Operation(index));
        slices.push(Slice { pid: FIO_PID, track: (jobs.len() + kind) as u64, start_ns, end_ns, what, lane: 0 });
    }
    let first_command = slices.len();
    // A zone's track is its number; another namespace's follows the zoned one's zones.
    let command_track = |event: &TraceEvent| match event.nsid == zoned_nsid {
        true => geometry.zone_of(event.slba.min(geometry.nsze_lba.saturating_sub(1))) as u64,
        false => u64::from(geometry.zones) + u64::from(event.nsid),
    };
    for (index, event) in commands.iter().enumerate() {
        let (track, what) = (command_track(event), What::Command(index));
        slices.push(Slice {
            pid: DEVICE_PID,
            track,
            start_ns: event.submit_ns,
            end_ns: event.complete_ns,
            what,
            lane: 0,
        });
    }
    let first_flash = slices.len();
    for (index, event) in flash.iter().enumerate() {
        let (track, what) = (u64::from(event.plane), What::Flash(index));
        slices.push(Slice { pid: FLASH_PID, track, start_ns: event.start_ns, end_ns: event.end_ns, what, lane: 0 });
    }
    let first_queued = slices.len();
    for (index, span) in queued.iter().enumerate().filter(|(_, span)| span.start_ns <= until_ns) {
        let (track, what) = (queue_track(span.queue), What::Queued(index));
        slices.push(Slice { pid: SCHEDULER_PID, track, start_ns: span.start_ns, end_ns: span.end_ns, what, lane: 0 });
    }
    let queued_slices = slices.len() - first_queued;
    let tracks = assign_lanes(&mut slices);

    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    write!(out, "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{")?;
    write!(
        out,
        "\"zonelab\":\"a {program} run: ts in microseconds of device time (virtual, or since the device opened in \
         real time); past the limit of commands or flash operations the trace ends (until_us), and what it left out \
         is counted\",\"limit\":{TRACE_LIMIT},\
         \"dropped_commands\":{},\"dropped_flash_operations\":{},\"until_us\":{},\"zoned_nsid\":{zoned_nsid},\
         \"zones\":{},\"zone_size_lba\":{},\"zone_cap_lba\":{},\"lba_bytes\":{}",
        device.trace_dropped(),
        flash_dropped,
        if until_ns == u64::MAX { "null".to_string() } else { Line::default().micros(until_ns).text().to_string() },
        geometry.zones,
        geometry.zone_size_lba,
        geometry.zone_cap_lba,
        geometry.lba_size
    )?;
    write!(out, "}},\"traceEvents\":[")?;
    let mut first = true;
    // Events are formatted straight into the file: a trace holds millions.
    let mut event =
        |out: &mut std::io::BufWriter<std::fs::File>, text: std::fmt::Arguments<'_>| -> std::io::Result<()> {
            if !std::mem::take(&mut first) {
                out.write_all(b",\n")?;
            }
            out.write_fmt(text)
        };
    let processes =
        [(FIO_PID, program), (DEVICE_PID, "device commands"), (FLASH_PID, "flash"), (SCHEDULER_PID, "scheduler")];
    for (pid, name) in processes {
        event(&mut out, format_args!("{}", metadata(pid, None, "process_name", name)))?;
    }
    // Each lane's name, once.
    for track in &tracks {
        let slice = &slices[track.slice];
        let base = match slice.pid {
            FIO_PID => match jobs.get(slice.track as usize) {
                Some((name, _)) => name.clone(),
                None => kinds[slice.track as usize - jobs.len()].to_string(),
            },
            DEVICE_PID if slice.track < u64::from(geometry.zones) => format!("zone {}", slice.track),
            DEVICE_PID => format!("namespace {}", slice.track - u64::from(geometry.zones)),
            SCHEDULER_PID => match slice.track {
                0 => "held resets (ZINC)".to_string(),
                1 => "held finishes (ZINC)".to_string(),
                track => format!("zone {} write lock", track - 2),
            },
            // A plane's track, named with the channel that reaches it (its operations carry both).
            _ => match slice.what {
                What::Flash(index) => format!("plane {} (channel {})", slice.track, flash[index].channel),
                _ => format!("plane {}", slice.track),
            },
        };
        for lane in 0..track.lanes {
            let name = if lane == 0 { base.clone() } else { format!("{base} #{}", lane + 1) };
            let tid = slice.track * LANES + lane;
            event(&mut out, format_args!("{}", metadata(slice.pid, Some(tid), "thread_name", &name)))?;
        }
    }
    // The processes' names came first, so every slice follows an event. Slices are most of the file: each is
    // laid out by hand (`Line`), at a third of what the format machinery costs.
    let mut line = Line::default();
    for slice in &slices {
        line.clear()
            .str(",\n{\"ph\":\"X\",\"pid\":")
            .num(u64::from(slice.pid))
            .str(",\"tid\":")
            .num(slice.tid())
            .str(",\"ts\":")
            .micros(slice.start_ns)
            .str(",\"dur\":")
            .micros(slice.end_ns.saturating_sub(slice.start_ns))
            .str(",\"name\":");
        match slice.what {
            What::Io(span) => {
                line.str("\"").str(kind_name(span.kind)).str("\",\"args\":{\"lba\":").num(span.lba);
                line.str(",\"blocks\":").num(span.blocks).str(",\"issued_us\":").micros(span.issued_ns);
                line.str(",\"ok\":").str(if span.ok { "true}}" } else { "false}}" });
            }
            What::Operation(index) => {
                line.str(&serde_json::Value::from(operations[index].name.as_str()).to_string()).str("}");
            }
            What::Command(index) => {
                let command = &commands[index];
                line.str("\"").str(command_name(command)).str("\",\"args\":{\"nsid\":").num(u64::from(command.nsid));
                line.str(",\"slba\":").num(command.slba).str(",\"nlb\":").num(command.nlb);
                line.str(",\"status\":").num(u64::from(command.status)).str("}}");
            }
            What::Queued(index) => {
                let span = &queued[index];
                line.str("\"").str(span.left).str("\",\"args\":{\"lba\":").num(span.lba).str("}}");
            }
            What::Flash(index) => {
                let op = &flash[index];
                line.str("\"").str(flash_op_name(op.op)).str(" (").str(source_name(op.source)).str(")\"");
                line.str(",\"args\":{\"count\":").num(op.count).str(",\"channel\":").num(u64::from(op.channel));
                line.str("}}");
            }
        }
        out.write_all(line.bytes())?;
    }
    // Flows: each I/O to its commands, each command to its flash operations.
    let mut flow_id = 0u64;
    let mut flow = |out: &mut std::io::BufWriter<std::fs::File>, from: &Slice, to: &Slice| -> std::io::Result<()> {
        flow_id += 1;
        // The arrow leaves its slice where the cause begins to matter and lands where the effect begins, never
        // earlier than it left; it binds to the slice that encloses its end ("bp":"e").
        let leave = to.start_ns.clamp(from.start_ns, from.end_ns);
        let land = to.start_ns.max(leave);
        line.clear().str(",\n{\"ph\":\"s\",\"id\":").num(flow_id).str(",\"pid\":").num(u64::from(from.pid));
        line.str(",\"tid\":").num(from.tid()).str(",\"ts\":").micros(leave);
        line.str(",\"name\":\"caused\",\"cat\":\"cause\"}");
        line.str(",\n{\"ph\":\"f\",\"id\":").num(flow_id).str(",\"pid\":").num(u64::from(to.pid));
        line.str(",\"tid\":").num(to.tid()).str(",\"ts\":").micros(land);
        line.str(",\"name\":\"caused\",\"cat\":\"cause\",\"bp\":\"e\"}");
        out.write_all(line.bytes())
    };
    for (io, command) in join_ios_to_commands(jobs, until_ns, commands) {
        flow(&mut out, &slices[io], &slices[first_command + command])?;
    }
    // Each operation to the commands its task submitted while it ran (commands are in submission order).
    for &(index, slice) in &operation_slices {
        let operation = &operations[index];
        let Some(task) = operation.task else { continue };
        let first = commands.partition_point(|command| command.submit_ns < operation.start_ns);
        let caused = commands[first..]
            .iter()
            .enumerate()
            .take_while(|(_, command)| command.submit_ns <= operation.end_ns)
            .filter(|(_, command)| command.submitter == Some(task));
        for (offset, _) in caused {
            flow(&mut out, &slices[slice], &slices[first_command + first + offset])?;
        }
    }
    // Each wait that ended in a dispatch to the command it became: the first of its kind at its LBA submitted
    // from its end on (a merged request's arrow is its I/O's).
    for offset in 0..queued_slices {
        let slice = &slices[first_queued + offset];
        let What::Queued(index) = slice.what else { continue };
        let span = &queued[index];
        let wanted = |command: &TraceEvent| match span.queue {
            SchedulerQueue::ZoneWrites(_) => command.opcode == 0x01,
            SchedulerQueue::Resets => command.opcode == 0x79 && command.action == 0x04,
            SchedulerQueue::Finishes => command.opcode == 0x79 && command.action == 0x02,
        };
        if span.left == "merged" {
            continue;
        }
        let first = commands.partition_point(|command| command.submit_ns < span.end_ns);
        // It reaches the device within the host path's latency, a few commands later at most.
        let mut candidates = commands[first..].iter().take(1024);
        let became = candidates.position(|command| command.slba == span.lba && wanted(command));
        if let Some(command) = became {
            flow(&mut out, slice, &slices[first_command + first + command])?;
        }
    }
    for (index, op) in flash.iter().enumerate() {
        if let Some(cause) = op.cause.filter(|&cause| (cause as usize) < commands.len()) {
            flow(&mut out, &slices[first_command + cause as usize], &slices[first_flash + index])?;
        }
    }
    // Open, active and EMPTY zones where they change, and the write buffer's fill where it moves by a 32nd of
    // the buffer or empties (a step per command would double the file).
    let buffer_step = (device.media().config().controller.write_drain_buffer_bytes / 32).max(1);
    let (mut last_zones, mut last_buffer) = (None, None);
    for command in commands {
        let zones = (command.open_zones, command.active_zones, command.empty_zones);
        if last_zones != Some(zones) {
            last_zones = Some(zones);
            event(
                &mut out,
                format_args!(
                    "{{\"ph\":\"C\",\"pid\":{DEVICE_PID},\"ts\":{},\"name\":\"zones\",\"args\":{{\"open\":{},\"active\":{},\
                     \"empty\":{}}}}}",
                    Line::default().micros(command.submit_ns).text(),
                    zones.0,
                    zones.1,
                    zones.2
                ),
            )?;
        }
        let buffered = command.write_buffer_bytes;
        let moved = last_buffer
            .is_none_or(|last: u64| last.abs_diff(buffered) >= buffer_step || (buffered == 0) != (last == 0));
        if moved {
            last_buffer = Some(buffered);
            event(
                &mut out,
                format_args!(
                    "{{\"ph\":\"C\",\"pid\":{DEVICE_PID},\"ts\":{},\"name\":\"write buffer\",\"args\":{{\"KiB\":{}}}}}",
                    Line::default().micros(command.submit_ns).text(),
                    buffered / 1024
                ),
            )?;
        }
    }
    writeln!(out, "]}}")?;
    out.flush()
}

/// A track of the trace and the lanes its slices took; `slice` is one of its slices.
struct Track {
    slice: usize,
    lanes: u64,
}

/// Puts each slice on the first lane of its track that is free at its start; returns the tracks with the lanes
/// each took.
fn assign_lanes(slices: &mut [Slice]) -> Vec<Track> {
    // Sorted by (process, track, start): packed into one key, a comparison is one instruction.
    let key =
        |slice: &Slice| (u128::from(slice.pid) << 96) | (u128::from(slice.track) << 64) | u128::from(slice.start_ns);
    let mut order: Vec<(u128, usize)> = slices.iter().enumerate().map(|(index, slice)| (key(slice), index)).collect();
    order.sort_unstable();
    // Per track, when each lane is free again.
    let mut free_at: Vec<u64> = Vec::new();
    let mut tracks: Vec<Track> = Vec::new();
    let mut current = None;
    for (_, index) in order {
        let slice = &slices[index];
        if current != Some((slice.pid, slice.track)) {
            current = Some((slice.pid, slice.track));
            free_at.clear();
            tracks.push(Track { slice: index, lanes: 0 });
        }
        let lane = match free_at.iter().position(|&free| free <= slice.start_ns) {
            Some(lane) => lane,
            None if free_at.len() < LANES as usize => {
                free_at.push(0);
                free_at.len() - 1
            }
            // More than LANES slices at once on one track: the last lane takes the rest, overlapping.
            None => LANES as usize - 1,
        };
        free_at[lane] = free_at[lane].max(slice.end_ns.max(slice.start_ns + 1));
        slices[index].lane = lane as u64;
        if let Some(track) = tracks.last_mut() {
            track.lanes = track.lanes.max(lane as u64 + 1);
        }
    }
    tracks
}

/// Pairs (slice of an I/O, command index): a command of the I/O's kind whose blocks meet the I/O's and that
/// arrived while it was in flight; I/Os that start after `until_ns` have no slice. A command the scheduler merged from several I/Os pairs with each of them.
fn join_ios_to_commands(jobs: &[(String, Vec<IoSpan>)], until_ns: u64, commands: &[TraceEvent]) -> Vec<(usize, usize)> {
    // The commands by opcode and first block, then in trace order.
    let mut by_start: Vec<(u8, u64, usize)> =
        commands.iter().enumerate().map(|(index, command)| (command.opcode, command.slba, index)).collect();
    by_start.sort_unstable();
    // A command of an opcode that meets an I/O starts at most this many blocks before it.
    let mut longest = [0u64; 256];
    for command in commands {
        let most = &mut longest[usize::from(command.opcode)];
        *most = (*most).max(command.nlb);
    }
    let mut pairs = Vec::new();
    let mut slice = 0;
    for (_, spans) in jobs {
        for span in spans.iter().filter(|span| span.start_ns <= until_ns) {
            let end = span.lba + span.blocks.max(1);
            for &opcode in opcodes_of(span.kind) {
                let from = (opcode, span.lba.saturating_sub(longest[usize::from(opcode)]));
                let first = by_start.partition_point(|&(op, slba, _)| (op, slba) < from);
                for &(_, slba, index) in
                    by_start[first..].iter().take_while(|&&(op, slba, _)| (op, slba) < (opcode, end))
                {
                    let command = &commands[index];
                    let meets = slba + command.nlb.max(1) > span.lba;
                    if meets && (span.issued_ns..=span.end_ns).contains(&command.submit_ns) {
                        pairs.push((slice, index));
                    }
                }
            }
            slice += 1;
        }
    }
    pairs
}

/// The NVMe opcodes an I/O of `kind` may become.
fn opcodes_of(kind: IoKind) -> &'static [u8] {
    match kind {
        IoKind::Read => &[0x02],
        IoKind::Write => &[0x01, 0x7d, 0x08],
        IoKind::Trim => &[0x79, 0x09],
        IoKind::Sync => &[0x00],
        IoKind::Zone => &[0x79],
    }
}

fn kind_name(kind: IoKind) -> &'static str {
    match kind {
        IoKind::Read => "read",
        IoKind::Write => "write",
        IoKind::Trim => "trim",
        IoKind::Sync => "sync",
        IoKind::Zone => "zone management",
    }
}

/// A command's name: its opcode's, or a Zone Management Send's action's.
fn command_name(command: &TraceEvent) -> &'static str {
    match (command.opcode, command.action) {
        (0x79, 0x01) => "zone close",
        (0x79, 0x02) => "zone finish",
        (0x79, 0x03) => "zone open",
        (0x79, 0x04) => "zone reset",
        (0x79, 0x05) => "zone offline",
        (opcode, _) => opcode_name(opcode),
    }
}

fn opcode_name(opcode: u8) -> &'static str {
    match opcode {
        0x00 => "flush",
        0x01 => "write",
        0x02 => "read",
        0x08 => "write zeroes",
        0x09 => "deallocate",
        0x79 => "zone management send",
        0x7a => "zone management receive",
        0x7d => "zone append",
        _ => "command",
    }
}

fn flash_op_name(op: FlashOp) -> &'static str {
    match op {
        FlashOp::PageRead => "sense",
        FlashOp::PageProgram => "program",
        FlashOp::BlockErase => "erase",
    }
}

fn source_name(source: OpSource) -> &'static str {
    match source {
        OpSource::HostRead => "host read",
        OpSource::HostWrite => "host write",
        OpSource::Append => "append",
        OpSource::FinishPadding => "finish padding",
        OpSource::Seal => "seal",
        OpSource::Reset => "reset",
        OpSource::GcRead => "gc read",
        OpSource::GcWrite => "gc write",
        OpSource::GcErase => "gc erase",
    }
}

/// One event's text, laid out by hand.
#[derive(Default)]
struct Line(Vec<u8>);

impl Line {
    fn clear(&mut self) -> &mut Line {
        self.0.clear();
        self
    }

    fn str(&mut self, text: &str) -> &mut Line {
        self.0.extend_from_slice(text.as_bytes());
        self
    }

    fn num(&mut self, mut value: u64) -> &mut Line {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (value % 10) as u8;
            value /= 10;
            if value == 0 {
                break;
            }
        }
        self.0.extend_from_slice(&digits[at..]);
        self
    }

    /// Nanoseconds as the format's microseconds, exactly: three decimals.
    fn micros(&mut self, ns: u64) -> &mut Line {
        let fraction = ns % 1000;
        self.num(ns / 1000);
        self.0.extend_from_slice(&[b'.', b'0' + (fraction / 100) as u8, b'0' + (fraction / 10 % 10) as u8]);
        self.0.push(b'0' + (fraction % 10) as u8);
        self
    }

    fn bytes(&self) -> &[u8] {
        &self.0
    }

    fn text(&self) -> &str {
        std::str::from_utf8(&self.0).expect("only ASCII is laid out")
    }
}

fn metadata(pid: u32, tid: Option<u64>, kind: &str, name: &str) -> String {
    let name = serde_json::to_string(name).unwrap_or_else(|_| "\"?\"".into());
    match tid {
        Some(tid) => {
            format!("{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"{kind}\",\"args\":{{\"name\":{name}}}}}")
        }
        None => format!("{{\"ph\":\"M\",\"pid\":{pid},\"name\":\"{kind}\",\"args\":{{\"name\":{name}}}}}"),
    }
}

/// The trace of a run of `program` with no I/O tracks of its own: its `operations` on a track per kind, each with
/// arrows to the commands its task submitted while it ran, then the device's commands per zone and its flash
/// operations per plane, with the arrows between them (`wal-bench`, `kv-bench` and `file-churn --trace`). The
/// device must have traced the run (`Device::enable_trace`).
pub fn write_device_trace<S: MediaStore>(
    path: &Path,
    program: &str,
    operations: &[OperationSpan],
    queued: &[QueueSpan],
    device: &Device<S>,
) -> std::io::Result<()> {
    write_trace(path, program, &[], operations, queued, device)
}

/// What the host side of a real-time device did, recorded from any thread while it runs and written with the
/// device's commands at its end (`write`): each thread's I/Os on a track of its own (the C library's calls, the
/// mount's requests) and operations joined to their commands by the task that ran them (the RocksDB plugin's file
/// calls). At most `TRACE_LIMIT` of each are kept, as the device keeps commands; the file says how many were not.
#[derive(Default)]
pub struct HostTrace {
    recorded: std::sync::Mutex<Recorded>,
}

#[derive(Default)]
struct Recorded {
    ios: Vec<(String, Vec<IoSpan>)>,
    io_count: usize,
    operations: Vec<OperationSpan>,
}

impl HostTrace {
    /// Records `span` on the track named `track` (made on its first I/O).
    pub fn io(&self, track: &str, span: IoSpan) {
        let mut recorded = self.recorded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if recorded.io_count >= TRACE_LIMIT {
            return;
        }
        recorded.io_count += 1;
        match recorded.ios.iter_mut().find(|(name, _)| name == track) {
            Some((_, spans)) => spans.push(span),
            None => recorded.ios.push((track.to_string(), vec![span])),
        }
    }

    /// Records an operation, joined to the commands its task submitted while it ran.
    pub fn operation(&self, span: OperationSpan) {
        let mut recorded = self.recorded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if recorded.operations.len() < TRACE_LIMIT {
            recorded.operations.push(span);
        }
    }

    /// Writes what was recorded with the device's commands, flash operations and the scheduler's `queued` spans;
    /// the device must have traced the run (`Device::enable_trace`).
    pub fn write<S: MediaStore>(
        &self,
        path: &Path,
        program: &str,
        queued: &[QueueSpan],
        device: &Device<S>,
    ) -> std::io::Result<()> {
        let recorded = self.recorded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        write_trace(path, program, &recorded.ios, &recorded.operations, queued, device)
    }
}

/// Takes `trace=FILE` out of a device spec (`preset:zn540,trace=/tmp/run.json`): where a real-time front end
/// writes its trace when the device stops. The rest of the spec is for the device builder.
pub fn split_trace_option(spec: &str) -> (String, Option<std::path::PathBuf>) {
    let mut parts = spec.split(',');
    let mut kept: Vec<&str> = parts.next().into_iter().collect();
    let mut trace = None;
    for part in parts {
        match part.strip_prefix("trace=") {
            Some(path) => trace = Some(std::path::PathBuf::from(path)),
            None => kept.push(part),
        }
    }
    (kept.join(","), trace)
}

#[cfg(test)]
mod tests {
    use super::{split_trace_option, Line};

    #[test]
    fn a_spec_gives_up_its_trace_option_and_keeps_the_rest() {
        let (spec, trace) = split_trace_option("preset:zn540,zones=8,trace=/tmp/run.json,device-cpu=0");
        assert_eq!(spec, "preset:zn540,zones=8,device-cpu=0");
        assert_eq!(trace.as_deref(), Some(std::path::Path::new("/tmp/run.json")));
        assert_eq!(split_trace_option("/images/a.zl,ns=1"), ("/images/a.zl,ns=1".to_string(), None));
    }

    #[test]
    fn microseconds_print_with_three_decimals() {
        let shown: Vec<String> =
            [0, 5, 999, 1000, 1_234_567, u64::MAX].map(|ns| Line::default().micros(ns).text().to_string()).into();
        assert_eq!(shown, ["0.000", "0.005", "0.999", "1.000", "1234.567", "18446744073709551.615"]);
    }
}

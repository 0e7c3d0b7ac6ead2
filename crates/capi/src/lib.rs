//! # zonelab-capi: the C library
//!
//! A front end (layer 7 of docs/design.md): C programs open an emulated ZNS device by the same spec strings as fio's
//! `--filename` (`preset:zn540,zones=64` or an image path), in virtual time (each call runs the simulation until
//! its command completes: the clock jumps) or in real time (a device thread paces completions by the wall
//! clock), and issue synchronous NVMe commands on it. The header `include/zonelab.h` is generated from this
//! file by cbindgen and committed; a test fails when it is stale.
//!
//! Every function returns `ZL_OK` (0), a positive NVMe status code (`(SCT << 8) | SC`, e.g. 0x1bc for Zone
//! Invalid Write), or a negative `ZL_E*` library error; `zl_strerror` names any of them. No panic crosses the
//! boundary (it becomes `ZL_EINTERNAL`), and a null or stale handle is `ZL_EHANDLE`, never a crash.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use zonelab_device::{DeviceBuilder, DeviceSpec, HostPath, StoreChoice};
use zonelab_host::trace::{prepare_trace, split_trace_option, HostTrace, IoKind, IoSpan};
use zonelab_runtime::{
    block_on, CommandQueue, IoData, Output, Placement, QueuedCommand, RealTime, RealTimeHost, Simulation,
};
use zonelab_zns::{Geometry, MediaStore, NamespaceKind, ReportFilter, Status, ZoneSendAction};

mod fs;

pub use fs::*;

/// Success.
pub const ZL_OK: i32 = 0;
/// A null, closed or unknown device handle (or a virtual-time handle used from another thread).
pub const ZL_EHANDLE: i32 = -1;
/// A null pointer, a string that is not UTF-8, or a value out of range.
pub const ZL_EINVAL: i32 = -2;
/// The device could not be opened (missing or corrupt image, unknown preset, bad override).
pub const ZL_EOPEN: i32 = -3;
/// A bug inside zonelab (a panic, caught at the boundary).
pub const ZL_EINTERNAL: i32 = -4;

thread_local! {
    /// The calling thread's last failure in words, for `zl_last_error`.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `message` as the calling thread's last error (unless the thread's storage is gone: a C++ static
/// destructor at process exit) and returns `code`.
fn failed(code: i32, message: impl std::fmt::Display) -> i32 {
    let message = CString::new(message.to_string().replace('\0', " ")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = message);
    code
}

/// The calling thread's last failure of a `zl_*` or `zlfs_*` call that says why (a device that could not be
/// opened: the preset, image or override at fault), in words; empty if none. Valid until its next failure.
#[no_mangle]
pub extern "C" fn zl_last_error() -> *const c_char {
    LAST_ERROR.try_with(|last| last.borrow().as_ptr()).unwrap_or(c"".as_ptr())
}

/// Virtual time: each call runs the simulation until its command completes.
pub const ZL_MODE_VIRTUAL: u32 = 0;
/// Real time: a device thread delivers completions at their modelled wall-clock times.
pub const ZL_MODE_REALTIME: u32 = 1;

/// Zone Management Send actions, as NVMe numbers them.
pub const ZL_ZONE_CLOSE: u32 = 1;
pub const ZL_ZONE_FINISH: u32 = 2;
pub const ZL_ZONE_OPEN: u32 = 3;
pub const ZL_ZONE_RESET: u32 = 4;

/// What Identify tells a host about the namespace.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zl_geometry {
    pub lba_size_bytes: u32,
    pub nr_zones: u32,
    pub zone_size_lba: u64,
    pub zone_capacity_lba: u64,
    pub namespace_size_lba: u64,
    /// 0: no limit.
    pub max_open_zones: u32,
    /// 0: no limit.
    pub max_active_zones: u32,
    /// Largest zone append, in bytes; 0: no limit beyond MDTS.
    pub zasl_bytes: u64,
    /// Largest data transfer, in bytes; 0: no limit.
    pub mdts_bytes: u64,
    /// `ZL_NS_ZONED`, or `ZL_NS_CONVENTIONAL` for a namespace of the NVM command set (`ns=` in the spec): one
    /// randomly writable range, reported as one zone of the namespace's size that is always full.
    pub kind: u32,
}

/// Kinds of namespace in `zl_geometry`.
pub const ZL_NS_ZONED: u32 = 0;
pub const ZL_NS_CONVENTIONAL: u32 = 1;

/// One zone of a report, with libzbd's field names and units in the names.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zl_zone {
    pub start_lba: u64,
    pub len_lba: u64,
    pub capacity_lba: u64,
    /// The write pointer; all ones where NVMe reports none (FULL, READ_ONLY, OFFLINE).
    pub wp_lba: u64,
    /// Zone state as NVMe encodes it: 1 EMPTY, 2 IMPLICITLY OPENED, 3 EXPLICITLY OPENED, 4 CLOSED, 0xd READ
    /// ONLY, 0xe FULL, 0xf OFFLINE.
    pub cond: u8,
    /// Zone attributes (bit 0: Zone Finished by Controller).
    pub attrs: u8,
}

/// Opcodes of `zl_io`.
pub const ZL_OP_READ: u32 = 0x02;
pub const ZL_OP_WRITE: u32 = 0x01;
pub const ZL_OP_APPEND: u32 = 0x7d;
pub const ZL_OP_FLUSH: u32 = 0x00;
pub const ZL_OP_ZONE_MGMT: u32 = 0x79;
/// Dataset Management's deallocate of `nlb` blocks from `slba`: a conventional namespace's trim.
pub const ZL_OP_DEALLOCATE: u32 = 0x09;

/// One command for `zl_submit`. The buffer stays the caller's and must stay valid until the command's
/// completion has been returned by `zl_poll` (a read's data is copied into it then).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zl_io {
    /// `ZL_OP_*`.
    pub opcode: u32,
    /// Blocks to read, write or append.
    pub nlb: u32,
    /// The LBA (read, write), the zone start (append, zone management).
    pub slba: u64,
    /// Data to write or append, or room for the data read; null for flush and zone management.
    pub buf: *mut u8,
    /// `ZL_ZONE_*` for zone management.
    pub action: u32,
    /// Non-zero: zone management on every zone.
    pub all: u32,
}

/// One completion from `zl_poll`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zl_completion {
    /// The caller's tag from `zl_submit`.
    pub tag: u64,
    /// `ZL_OK`, an NVMe status code or a `ZL_E*` error.
    pub status: i32,
    /// For an append: the LBA the data landed at.
    pub lba: u64,
}

/// A submitted command waiting to be polled: its tag, where a read's data goes, the thread that submitted it,
/// what a trace draws of it, and its result or future.
struct Inflight<F> {
    tag: u64,
    read_into: Option<usize>,
    submitter: std::thread::ThreadId,
    traced: Option<TracedIo>,
    pending: F,
}

/// A command of a traced device as its submitting thread's I/O: kind, blocks, when it was submitted and (in
/// virtual time, where the task that waits sees it) when it completed.
#[derive(Clone, Copy)]
struct TracedIo {
    kind: IoKind,
    lba: u64,
    blocks: u64,
    start_ns: u64,
    end_ns: Option<u64>,
}

/// Where a traced device's trace goes and what its host side did (`trace=FILE` in the spec).
struct Tracing {
    path: std::path::PathBuf,
    host: HostTrace,
}

impl Tracing {
    /// Notes `io` of the calling thread, ended at `end_ns`.
    fn record(&self, io: TracedIo, end_ns: u64, ok: bool) {
        let TracedIo { kind, lba, blocks, start_ns, .. } = io;
        let end_ns = io.end_ns.unwrap_or(end_ns);
        self.host.io(&thread_track(), IoSpan { kind, lba, blocks, start_ns, issued_ns: start_ns, end_ns, ok });
    }
}

/// The calling thread's track in a trace: its number, after its name (Rust's, or the one the system has for a
/// thread the program started: RocksDB's `rocksdb:high`...) when it has one.
fn thread_track() -> String {
    thread_local! {
        static TRACK: String = {
            let thread = std::thread::current();
            let number = format!("{:?}", thread.id()).replace("ThreadId(", "thread ").replace(')', "");
            match thread.name().map(str::to_string).or_else(system_thread_name) {
                Some(name) => format!("{name} ({number})"),
                None => number,
            }
        };
    }
    TRACK.with(String::clone)
}

/// The calling thread's name as the system has it (`pthread_setname_np`), if it has one.
fn system_thread_name() -> Option<String> {
    let mut name = [0 as c_char; 64];
    // SAFETY: the buffer has room for the name and its NUL (at most 16 bytes on Linux).
    let found = unsafe { libc::pthread_getname_np(libc::pthread_self(), name.as_mut_ptr(), name.len()) } == 0;
    // SAFETY: on success the buffer holds a NUL-terminated string.
    let name = found.then(|| unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned());
    name.filter(|name| !name.is_empty())
}

/// What a traced device's trace draws of `command`, submitted now to `host`; an untraced device reads no clock.
fn traced_io(tracing: Option<&Tracing>, command: &QueuedCommand, host: &impl CommandQueue) -> Option<TracedIo> {
    tracing?;
    let (kind, lba, blocks) = IoKind::of(command, host.geometry().lba_shift)?;
    Some(TracedIo { kind, lba, blocks, start_ns: host.now_ns(), end_ns: None })
}

type PendingCommand = std::pin::Pin<Box<zonelab_runtime::Pending>>;
type Completed = Inflight<Result<Output, Status>>;

/// A real-time device: shared by every thread that holds its handle.
struct RealDevice {
    runtime: Mutex<Option<RealTime>>,
    host: RealTimeHost,
    inflight: Mutex<Vec<Inflight<PendingCommand>>>,
    tracing: Option<Tracing>,
}

/// A virtual-time device: it lives on the thread that opened it.
struct VirtualDevice {
    simulation: Simulation<Box<dyn MediaStore>>,
    /// Results of submitted commands, as their tasks finish.
    done: Rc<RefCell<Vec<Completed>>>,
    tracing: Option<Tracing>,
}

static NEXT_HANDLE: AtomicU64 = AtomicU64::new(1);
static REAL: Mutex<Option<HashMap<u64, Arc<RealDevice>>>> = Mutex::new(None);

thread_local! {
    static VIRTUAL: RefCell<HashMap<u64, VirtualDevice>> = RefCell::new(HashMap::new());
    /// This thread's queue pair on each real-time device it has used: as NVMe gives each CPU a queue pair,
    /// threads submitting to one device never share a submission queue.
    static QUEUE_PAIRS: RefCell<HashMap<u64, RealTimeHost>> = RefCell::new(HashMap::new());
}

/// The calling thread's queue pair on the real-time device of `handle` (a device or a mount), made on first
/// use from `runtime` (or `fallback` once it has stopped).
fn queue_pair(handle: u64, runtime: &Mutex<Option<RealTime>>, fallback: &RealTimeHost) -> RealTimeHost {
    QUEUE_PAIRS.with(|pairs| {
        pairs
            .borrow_mut()
            .entry(handle)
            .or_insert_with(|| lock(runtime).as_ref().map_or_else(|| fallback.clone(), RealTime::host))
            .clone()
    })
}

/// Forgets the calling thread's queue pair of a closed handle. At process exit (a C++ static destructor
/// unmounting), the thread's own storage may be gone already, and with it the pair.
fn forget_queue_pair(handle: u64) {
    let _ = QUEUE_PAIRS.try_with(|pairs| pairs.borrow_mut().remove(&handle));
}

fn real(handle: u64) -> Option<Arc<RealDevice>> {
    lock(&REAL).as_ref()?.get(&handle).cloned()
}

/// Runs `f` with no panic crossing the boundary.
fn guard(f: impl FnOnce() -> i32) -> i32 {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(ZL_EINTERNAL)
}

fn status_code(status: Status) -> i32 {
    i32::from(status.code())
}

/// Runs one command on the device behind `handle`.
fn execute(handle: u64, command: QueuedCommand) -> Result<Output, i32> {
    if let Some(device) = real(handle) {
        let host = queue_pair(handle, &device.runtime, &device.host);
        let traced = traced_io(device.tracing.as_ref(), &command, &host);
        let result = block_on(host.submit(command));
        if let (Some(tracing), Some(io)) = (&device.tracing, traced) {
            tracing.record(io, host.now_ns(), result.is_ok());
        }
        return result.map_err(status_code);
    }
    VIRTUAL.with(|devices| {
        let mut devices = devices.borrow_mut();
        let device = devices.get_mut(&handle).ok_or(ZL_EHANDLE)?;
        let host = device.simulation.host();
        let traced = traced_io(device.tracing.as_ref(), &command, &host);
        let slot = Rc::new(RefCell::new(None));
        let result = Rc::clone(&slot);
        let for_task = host.clone();
        device.simulation.spawn(async move {
            *result.borrow_mut() = Some(for_task.submit(command).await);
        });
        device.simulation.run();
        let outcome = slot.borrow_mut().take().ok_or(ZL_EINTERNAL)?;
        if let (Some(tracing), Some(io)) = (&device.tracing, traced) {
            tracing.record(io, host.now_ns(), outcome.is_ok());
        }
        outcome.map_err(status_code)
    })
}

fn geometry_of(handle: u64) -> Result<Geometry, i32> {
    if let Some(device) = real(handle) {
        return Ok(device.host.geometry());
    }
    VIRTUAL.with(|devices| {
        let devices = devices.borrow();
        let device = devices.get(&handle).ok_or(ZL_EHANDLE)?;
        Ok(device.simulation.host().geometry())
    })
}

/// Opens the device `spec` names (`preset:NAME[,key=value...]` or an image path) in `mode`
/// (`ZL_MODE_VIRTUAL` or `ZL_MODE_REALTIME`) and stores its handle in `*handle`. The device keeps data in
/// memory for a preset, in the image for an image. A virtual-time handle may be used only from the thread that
/// opened it; a real-time handle from any thread. Close it with `zl_close`.
///
/// # Safety
/// `spec` is a NUL-terminated string or null; `handle` points to a writable `uint64_t` or is null.
#[no_mangle]
pub unsafe extern "C" fn zl_open(spec: *const c_char, mode: u32, handle: *mut u64) -> i32 {
    guard(|| {
        if spec.is_null() || handle.is_null() {
            return ZL_EINVAL;
        }
        // SAFETY: the caller passes a NUL-terminated string (checked non-null above).
        let Ok(spec) = unsafe { CStr::from_ptr(spec) }.to_str() else {
            return failed(ZL_EINVAL, "the device spec is not UTF-8");
        };
        let (spec, trace_path) = split_trace_option(spec);
        if let Some(path) = &trace_path {
            if let Err(error) = prepare_trace(path) {
                return failed(ZL_EINVAL, format!("trace {}: {error}", path.display()));
            }
        }
        let (spec, placement) = match Placement::split_spec(&spec) {
            Ok(split) => split,
            Err(error) => return failed(ZL_EINVAL, error),
        };
        let tracing = trace_path.map(|path| Tracing { path, host: HostTrace::default() });
        let builder = DeviceBuilder::new(DeviceSpec::parse(&spec)).host(HostPath::Spdk).store(StoreChoice::Memory);
        let id = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
        match mode {
            ZL_MODE_REALTIME => {
                let runtime = match RealTime::start_placed(builder, placement) {
                    Ok(runtime) => runtime,
                    Err(error) => return failed(ZL_EOPEN, error),
                };
                if tracing.is_some() {
                    runtime.enable_trace();
                }
                let host = runtime.host();
                let runtime = Mutex::new(Some(runtime));
                let device = Arc::new(RealDevice { runtime, host, inflight: Mutex::new(Vec::new()), tracing });
                lock(&REAL).get_or_insert_with(HashMap::new).insert(id, device);
            }
            ZL_MODE_VIRTUAL => {
                let built = match builder.build() {
                    Ok(built) => built,
                    Err(error) => return failed(ZL_EOPEN, error),
                };
                let simulation = Simulation::over(built, None);
                if tracing.is_some() {
                    simulation.with_device(|device| device.enable_trace());
                }
                let device = VirtualDevice { simulation, done: Rc::default(), tracing };
                VIRTUAL.with(|devices| devices.borrow_mut().insert(id, device));
            }
            _ => return failed(ZL_EINVAL, format!("mode {mode}: not ZL_MODE_VIRTUAL (0) or ZL_MODE_REALTIME (1)")),
        }
        // SAFETY: checked non-null above; the caller passes a writable uint64_t.
        unsafe { *handle = id };
        ZL_OK
    })
}

/// Closes a device: waits for its commands, flushes it (an image keeps every completed write) and releases
/// the handle, which is stale from then on.
#[no_mangle]
pub extern "C" fn zl_close(handle: u64) -> i32 {
    guard(|| {
        let removed = lock(&REAL).as_mut().and_then(|map| map.remove(&handle));
        forget_queue_pair(handle);
        if let Some(device) = removed {
            let runtime = device.runtime.lock().unwrap_or_else(PoisonError::into_inner).take();
            let Some(runtime) = runtime else { return ZL_EHANDLE };
            let (stopped, written) = runtime.stop_then(|stopped| write_trace(device.tracing.as_ref(), stopped));
            if let Some(warning) = stopped.pacing.summary().warning() {
                eprintln!("zonelab: {warning}");
            }
            return match (written, stopped.flushed) {
                (Err(code), _) => code,
                (Ok(()), flushed) => flushed.map_or_else(status_code, |()| ZL_OK),
            };
        }
        let flushed = execute(handle, QueuedCommand::Flush);
        if flushed == Err(ZL_EHANDLE) {
            return ZL_EHANDLE;
        }
        let device = VIRTUAL.with(|devices| devices.borrow_mut().remove(&handle));
        let written = device.map_or(Ok(()), |device| {
            device.simulation.with_device(|stopped| write_trace(device.tracing.as_ref(), stopped))
        });
        written.and(flushed).map_or_else(|code| code, |_| ZL_OK)
    })
}

/// Writes a traced device's trace (`trace=FILE` in its spec): its threads' I/Os, commands and flash operations.
fn write_trace(tracing: Option<&Tracing>, device: &zonelab_device::Device<Box<dyn MediaStore>>) -> Result<(), i32> {
    let Some(tracing) = tracing else { return Ok(()) };
    tracing.host.write(&tracing.path, "C library", &[], device).map_err(|error| {
        failed(ZL_EINVAL, format!("the trace could not be written to {}: {error}", tracing.path.display()))
    })
}

/// Fills `*geometry` with the namespace's geometry and limits.
///
/// # Safety
/// `geometry` points to a writable `zl_geometry` or is null.
#[no_mangle]
pub unsafe extern "C" fn zl_get_geometry(handle: u64, geometry: *mut zl_geometry) -> i32 {
    guard(|| {
        if geometry.is_null() {
            return ZL_EINVAL;
        }
        let g = match geometry_of(handle) {
            Ok(g) => g,
            Err(code) => return code,
        };
        let bytes = |blocks: Option<u64>| blocks.map_or(0, |blocks| blocks << g.lba_shift);
        let out = zl_geometry {
            lba_size_bytes: g.lba_size,
            nr_zones: g.zones,
            zone_size_lba: g.zone_size_lba,
            zone_capacity_lba: g.zone_cap_lba,
            namespace_size_lba: g.nsze_lba,
            max_open_zones: g.max_open,
            max_active_zones: g.max_active,
            zasl_bytes: bytes(g.max_append_lba),
            mdts_bytes: bytes(g.max_transfer_lba),
            kind: match g.kind {
                NamespaceKind::Zoned => ZL_NS_ZONED,
                NamespaceKind::Conventional => ZL_NS_CONVENTIONAL,
            },
        };
        // SAFETY: checked non-null above; the caller passes a writable zl_geometry.
        unsafe { *geometry = out };
        ZL_OK
    })
}

/// Reports up to `*nr_zones` zones from the zone holding `start_lba` into `zones`, and sets `*nr_zones` to how
/// many it wrote.
///
/// # Safety
/// `zones` points to `*nr_zones` writable `zl_zone`s; `nr_zones` is writable. Either may be null only if the
/// other is too (an error).
#[no_mangle]
pub unsafe extern "C" fn zl_report_zones(handle: u64, start_lba: u64, zones: *mut zl_zone, nr_zones: *mut u32) -> i32 {
    guard(|| {
        if zones.is_null() || nr_zones.is_null() {
            return ZL_EINVAL;
        }
        // SAFETY: checked non-null; the caller passes a readable and writable uint32_t.
        let room = unsafe { *nr_zones };
        let command =
            QueuedCommand::Report { slba: start_lba, filter: ReportFilter::All, partial: true, max_zones: room };
        let report = match execute(handle, command) {
            Ok(Output::Report(report)) => report,
            Ok(_) => return ZL_EINTERNAL,
            Err(code) => {
                // No zones were reported (a conventional namespace refuses the command): say so in the count too.
                // SAFETY: as above.
                unsafe { *nr_zones = 0 };
                return code;
            }
        };
        // SAFETY: the caller passes room for `room` zones, and a report lists at most `max_zones` = `room`
        // (and no more than the namespace has, so a huge `room` never becomes a huge slice).
        let out = unsafe { std::slice::from_raw_parts_mut(zones, report.zones.len().min(room as usize)) };
        for (slot, zone) in out.iter_mut().zip(&report.zones) {
            *slot = zl_zone {
                start_lba: zone.start_lba,
                len_lba: zone.size_lba,
                capacity_lba: zone.capacity_lba,
                wp_lba: zone.wp_lba,
                cond: zone.state as u8,
                attrs: zone.attrs,
            };
        }
        // SAFETY: as above.
        unsafe { *nr_zones = report.zones.len().min(room as usize) as u32 };
        ZL_OK
    })
}

/// Reads `nlb` blocks at `slba` into `buf` (`nlb` x the LBA size bytes).
///
/// # Safety
/// `buf` points to `nlb * lba_size_bytes` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn zl_read(handle: u64, slba: u64, nlb: u32, buf: *mut u8) -> i32 {
    guard(|| {
        if buf.is_null() {
            return ZL_EINVAL;
        }
        match execute(handle, QueuedCommand::Read { slba, nlb: u64::from(nlb), keep: true }) {
            Ok(Output::Data(data)) => {
                // SAFETY: the caller passes room for nlb blocks, which is what a successful read returns.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf, data.len()) };
                ZL_OK
            }
            Ok(_) => ZL_EINTERNAL,
            Err(code) => code,
        }
    })
}

/// The `nlb` blocks at `buf`, copied, after the geometry check that a handle is live.
///
/// # Safety
/// `buf` points to `nlb * lba_size_bytes` readable bytes.
unsafe fn blocks(handle: u64, nlb: u32, buf: *const u8) -> Result<IoData, i32> {
    if buf.is_null() {
        return Err(ZL_EINVAL);
    }
    let geometry = geometry_of(handle)?;
    // Past MDTS the device refuses the command whatever its data: refuse it before copying nlb blocks, as
    // many as 4 billion, from a buffer the caller may not have.
    if geometry.max_transfer_lba.is_some_and(|limit| u64::from(nlb) > limit) {
        return Err(status_code(Status::InvalidField));
    }
    let len = (u64::from(nlb) << geometry.lba_shift) as usize;
    // SAFETY: the caller passes nlb blocks of readable bytes.
    Ok(IoData::Bytes(unsafe { std::slice::from_raw_parts(buf, len) }.to_vec()))
}

/// Writes `nlb` blocks from `buf` at `slba`, which must be the zone's write pointer.
///
/// # Safety
/// `buf` points to `nlb * lba_size_bytes` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn zl_write(handle: u64, slba: u64, nlb: u32, buf: *const u8) -> i32 {
    guard(|| {
        // SAFETY: forwarded from the caller.
        let data = match unsafe { blocks(handle, nlb, buf) } {
            Ok(data) => data,
            Err(code) => return code,
        };
        execute(handle, QueuedCommand::Write { slba, data }).map_or_else(|code| code, |_| ZL_OK)
    })
}

/// Zone Append of `nlb` blocks from `buf` to the zone starting at `zslba`; the LBA the data landed at goes to
/// `*lba` (which may be null).
///
/// # Safety
/// `buf` points to `nlb * lba_size_bytes` readable bytes; `lba` is writable or null.
#[no_mangle]
pub unsafe extern "C" fn zl_append(handle: u64, zslba: u64, nlb: u32, buf: *const u8, lba: *mut u64) -> i32 {
    guard(|| {
        // SAFETY: forwarded from the caller.
        let data = match unsafe { blocks(handle, nlb, buf) } {
            Ok(data) => data,
            Err(code) => return code,
        };
        match execute(handle, QueuedCommand::Append { zslba, data }) {
            Ok(Output::Appended(landed)) => {
                if !lba.is_null() {
                    // SAFETY: non-null and writable, as the caller promises.
                    unsafe { *lba = landed };
                }
                ZL_OK
            }
            Ok(_) => ZL_EINTERNAL,
            Err(code) => code,
        }
    })
}

/// Flush: every completed write becomes durable.
#[no_mangle]
pub extern "C" fn zl_flush(handle: u64) -> i32 {
    guard(|| execute(handle, QueuedCommand::Flush).map_or_else(|code| code, |_| ZL_OK))
}

/// Dataset Management's deallocate of `nlb` blocks from `slba` (a conventional namespace's trim): they read as
/// zeros afterwards. A zoned namespace refuses it: the NVMe status Invalid Opcode (1) is returned.
#[no_mangle]
pub extern "C" fn zl_deallocate(handle: u64, slba: u64, nlb: u64) -> i32 {
    guard(|| execute(handle, QueuedCommand::Deallocate { slba, nlb }).map_or_else(|code| code, |_| ZL_OK))
}

/// Zone Management Send: `action` (`ZL_ZONE_OPEN`, `_CLOSE`, `_FINISH`, `_RESET`) on the zone starting at
/// `zslba`, or with `all` non-zero on every zone the action applies to.
#[no_mangle]
pub extern "C" fn zl_zone_mgmt(handle: u64, action: u32, zslba: u64, all: u32) -> i32 {
    guard(|| {
        let Some(action) = zone_action(action) else { return ZL_EINVAL };
        execute(handle, QueuedCommand::ZoneSend { slba: zslba, action, select_all: all != 0 })
            .map_or_else(|code| code, |_| ZL_OK)
    })
}

/// The owned command a `zl_io` describes, and where a read's data is to go.
///
/// # Safety
/// As `zl_submit`.
unsafe fn command_of(handle: u64, io: &zl_io) -> Result<(QueuedCommand, Option<usize>), i32> {
    let nlb = u64::from(io.nlb);
    Ok(match io.opcode {
        ZL_OP_READ if !io.buf.is_null() => {
            (QueuedCommand::Read { slba: io.slba, nlb, keep: true }, Some(io.buf as usize))
        }
        // SAFETY (both): forwarded from the caller.
        ZL_OP_WRITE => (QueuedCommand::Write { slba: io.slba, data: unsafe { blocks(handle, io.nlb, io.buf) }? }, None),
        ZL_OP_APPEND => {
            (QueuedCommand::Append { zslba: io.slba, data: unsafe { blocks(handle, io.nlb, io.buf) }? }, None)
        }
        ZL_OP_FLUSH => (QueuedCommand::Flush, None),
        ZL_OP_DEALLOCATE => (QueuedCommand::Deallocate { slba: io.slba, nlb }, None),
        ZL_OP_ZONE_MGMT => {
            let action = zone_action(io.action).ok_or(ZL_EINVAL)?;
            (QueuedCommand::ZoneSend { slba: io.slba, action, select_all: io.all != 0 }, None)
        }
        _ => return Err(ZL_EINVAL),
    })
}

/// Submits `*io` under the caller's `tag` and returns at once; `zl_poll` returns its completion. Write and
/// append data are copied now; a read's buffer must stay valid until its completion is polled.
///
/// # Safety
/// `io` points to a valid `zl_io` whose `buf` holds (or has room for) `nlb` blocks.
#[no_mangle]
pub unsafe extern "C" fn zl_submit(handle: u64, io: *const zl_io, tag: u64) -> i32 {
    guard(|| {
        if io.is_null() {
            return ZL_EINVAL;
        }
        // SAFETY: checked non-null; the caller passes a valid zl_io.
        let (command, read_into) = match unsafe { command_of(handle, &*io) } {
            Ok(found) => found,
            Err(code) => return code,
        };
        let submitter = std::thread::current().id();
        if let Some(device) = real(handle) {
            let host = queue_pair(handle, &device.runtime, &device.host);
            let traced = traced_io(device.tracing.as_ref(), &command, &host);
            let pending = Box::pin(host.submit_pending(command));
            lock(&device.inflight).push(Inflight { tag, read_into, submitter, traced, pending });
            return ZL_OK;
        }
        VIRTUAL.with(|devices| {
            let devices = devices.borrow();
            let Some(device) = devices.get(&handle) else { return ZL_EHANDLE };
            let (host, done) = (device.simulation.host(), Rc::clone(&device.done));
            let traced = traced_io(device.tracing.as_ref(), &command, &host);
            device.simulation.host().spawn(async move {
                let pending = host.submit(command).await;
                let traced = traced.map(|io| TracedIo { end_ns: Some(host.now_ns()), ..io });
                done.borrow_mut().push(Inflight { tag, read_into, submitter, traced, pending });
            });
            ZL_OK
        })
    })
}

/// Moves up to `max` completed commands into `completions` and sets `*count` to how many; returns at once
/// (real time) or after running the simulation until its submitted commands complete (virtual time). A
/// handle's completions go to whichever thread polls it.
///
/// # Safety
/// `completions` points to `max` writable `zl_completion`s; `count` is writable.
#[no_mangle]
pub unsafe extern "C" fn zl_poll(handle: u64, completions: *mut zl_completion, max: u32, count: *mut u32) -> i32 {
    guard(|| {
        match take_completed(handle, max as usize, None) {
            // SAFETY: the caller's promises are `deliver`'s.
            Ok((ready, _)) => unsafe { deliver(&ready, completions, max, count) },
            Err(code) => code,
        }
    })
}

/// As `zl_poll`, but for the commands the calling thread submitted only, and it first waits, asleep, until at
/// least `min` of them have completed (at most `max`), until none is in flight, or until `timeout_ns`
/// nanoseconds have passed (0: no limit); `*count` may then be below `min`. What an I/O engine's "get events"
/// needs when several threads share a device: fio's external engine uses it. A `zl_poll` from another thread
/// never takes its wake-up.
///
/// # Safety
/// `completions` points to `max` writable `zl_completion`s; `count` is writable.
#[no_mangle]
pub unsafe extern "C" fn zl_poll_wait(
    handle: u64,
    completions: *mut zl_completion,
    max: u32,
    min: u32,
    timeout_ns: u64,
    count: *mut u32,
) -> i32 {
    guard(|| {
        if completions.is_null() || count.is_null() || min > max {
            return ZL_EINVAL;
        }
        let deadline = (timeout_ns > 0).then(|| Instant::now() + Duration::from_nanos(timeout_ns));
        let waker = std::task::Waker::from(Arc::new(Unparker(std::thread::current())));
        let mut ready = Vec::new();
        let spin_until = Instant::now() + SPIN_BEFORE_PARK;
        loop {
            let me = std::thread::current().id();
            let left = match take_completed(handle, max as usize - ready.len(), Some((&waker, me))) {
                Ok((more, left)) => {
                    ready.extend(more);
                    left
                }
                Err(code) => return code,
            };
            let now = Instant::now();
            if ready.len() >= min as usize || left == 0 || deadline.is_some_and(|deadline| now >= deadline) {
                break;
            }
            // A completion due soon is caught by looking again at once for a short while, which on an idle core
            // costs less than being woken; after that, the device thread wakes this one.
            if now < spin_until {
                std::hint::spin_loop();
                continue;
            }
            std::thread::park_timeout(deadline.map_or(WAIT_SLICE, |deadline| (deadline - now).min(WAIT_SLICE)));
        }
        // SAFETY: the caller's promises are `deliver`'s.
        unsafe { deliver(&ready, completions, max, count) }
    })
}

/// Writes `ready` into the caller's `completions` (copying read data into the callers' buffers) and its length
/// into `*count`.
///
/// # Safety
/// `completions` points to `max` writable `zl_completion`s, `max >= ready.len()`; `count` is writable; each
/// read's buffer is still valid.
unsafe fn deliver(ready: &[Completed], completions: *mut zl_completion, max: u32, count: *mut u32) -> i32 {
    if completions.is_null() || count.is_null() {
        return ZL_EINVAL;
    }
    // SAFETY: the caller passes room for `max` completions; `ready` holds at most `max`.
    let out = unsafe { std::slice::from_raw_parts_mut(completions, max as usize) };
    for (slot, done) in out.iter_mut().zip(ready) {
        *slot = zl_completion { tag: done.tag, status: ZL_OK, lba: 0 };
        match &done.pending {
            Ok(Output::Appended(lba)) => slot.lba = *lba,
            Ok(Output::Data(data)) => {
                if let Some(address) = done.read_into {
                    // SAFETY: the caller keeps the read's buffer, of the read's size, valid until now.
                    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), address as *mut u8, data.len()) };
                }
            }
            Ok(_) => {}
            Err(status) => slot.status = status_code(*status),
        }
    }
    // SAFETY: checked non-null; writable as the caller promises.
    unsafe { *count = ready.len() as u32 };
    ZL_OK
}

/// How long a waiting poll keeps looking before it sleeps.
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(250);

/// The longest a waiting poll sleeps before it looks again (a bound, in case a wake-up is missed).
const WAIT_SLICE: Duration = Duration::from_millis(10);

/// Wakes a thread parked in `zl_poll_wait`.
struct Unparker(std::thread::Thread);

impl std::task::Wake for Unparker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Up to `max` completed commands of the device behind `handle`, removed from its in-flight list, and how many
/// of those looked at are still in flight. Without `waiter`, any thread's commands are looked at and no waker is
/// touched (real time). With `waiter`, only the commands its thread submitted, and those still in flight wake
/// its waker when they complete; another thread's are not polled, so that their wakers stay theirs.
fn take_completed(
    handle: u64,
    max: usize,
    waiter: Option<(&std::task::Waker, std::thread::ThreadId)>,
) -> Result<(Vec<Completed>, usize), i32> {
    let mine = |submitter: std::thread::ThreadId| waiter.is_none_or(|(_, thread)| thread == submitter);
    if let Some(device) = real(handle) {
        let mut inflight = lock(&device.inflight);
        let (mut ready, mut index, mut left) = (Vec::new(), 0, 0);
        while index < inflight.len() && ready.len() < max {
            if !mine(inflight[index].submitter) {
                index += 1;
                continue;
            }
            let outcome = match waiter {
                Some((waker, _)) => {
                    match inflight[index].pending.as_mut().poll(&mut std::task::Context::from_waker(waker)) {
                        std::task::Poll::Ready(result) => Some(result),
                        std::task::Poll::Pending => None,
                    }
                }
                None => inflight[index].pending.try_take(),
            };
            match outcome {
                Some(result) => {
                    let done = inflight.remove(index);
                    if let (Some(tracing), Some(io)) = (&device.tracing, done.traced) {
                        tracing.record(io, device.host.now_ns(), result.is_ok());
                    }
                    let (tag, read_into, submitter, traced) = (done.tag, done.read_into, done.submitter, done.traced);
                    ready.push(Inflight { tag, read_into, submitter, traced, pending: result });
                }
                None => {
                    index += 1;
                    left += 1;
                }
            }
        }
        left += inflight[index..].iter().filter(|command| mine(command.submitter)).count();
        return Ok((ready, left));
    }
    VIRTUAL.with(|devices| {
        let mut devices = devices.borrow_mut();
        let device = devices.get_mut(&handle).ok_or(ZL_EHANDLE)?;
        device.simulation.run();
        let mut done = device.done.borrow_mut();
        let take = done.len().min(max);
        let ready: Vec<Completed> = done.drain(..take).collect();
        if let Some(tracing) = &device.tracing {
            for (io, completed) in ready.iter().filter_map(|completed| Some((completed.traced?, completed))) {
                tracing.record(io, 0, completed.pending.is_ok());
            }
        }
        Ok((ready, done.len()))
    })
}

fn zone_action(action: u32) -> Option<ZoneSendAction> {
    match action {
        ZL_ZONE_CLOSE => Some(ZoneSendAction::Close),
        ZL_ZONE_FINISH => Some(ZoneSendAction::Finish),
        ZL_ZONE_OPEN => Some(ZoneSendAction::Open),
        ZL_ZONE_RESET => Some(ZoneSendAction::Reset),
        _ => None,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes the device's statistics as a NUL-terminated JSON object into `buf` (`len` bytes): command
/// counters, flash operations by source, total energy in joules and wear (erase counts per block), and for a
/// real-time device how it kept the model's pace (`pacing`: completions, late share, error p50/p99/max). Sets
/// `*needed` to the bytes the whole text takes with its NUL; a `len` below that is `ZL_EINVAL` and writes nothing.
///
/// # Safety
/// `buf` points to `len` writable bytes (or is null with `len` 0); `needed` is writable.
#[no_mangle]
pub unsafe extern "C" fn zl_stats_json(handle: u64, buf: *mut c_char, len: usize, needed: *mut usize) -> i32 {
    guard(|| {
        if needed.is_null() || (buf.is_null() && len != 0) {
            return ZL_EINVAL;
        }
        // A real-time device's stats say how well it kept the model's pace.
        let stats = match real(handle) {
            Some(device) => device.host.stats().and_then(|stats| {
                let mut value = serde_json::to_value(stats).ok()?;
                value["pacing"] = serde_json::to_value(device.host.pacing()?).ok()?;
                Some(value)
            }),
            None => VIRTUAL.with(|devices| {
                let devices = devices.borrow();
                let device = devices.get(&handle)?;
                serde_json::to_value(device.simulation.with_device(|device| device.stats())).ok()
            }),
        };
        let Some(stats) = stats else { return ZL_EHANDLE };
        let Ok(text) = serde_json::to_string(&stats) else { return ZL_EINTERNAL };
        // SAFETY: as the caller promises for `buf`, `len` and `needed`.
        match unsafe { copy_c_string(&text, buf, len, needed) } {
            true => ZL_OK,
            false => ZL_EINVAL,
        }
    })
}

/// Writes how a real-time device has kept the model's pace so far as one NUL-terminated line of text into `buf`
/// (`len` bytes): late share, pacing error p50/p99/max, the wall time its thread could not run, and where that
/// thread runs; what front ends print when a run ends. Sets `*needed` as `zl_stats_json` does; a virtual-time
/// device keeps no pace (`ZL_EINVAL`).
///
/// # Safety
/// `buf` points to `len` writable bytes (or is null with `len` 0); `needed` is writable.
#[no_mangle]
pub unsafe extern "C" fn zl_pacing_line(handle: u64, buf: *mut c_char, len: usize, needed: *mut usize) -> i32 {
    guard(|| {
        if needed.is_null() || (buf.is_null() && len != 0) {
            return ZL_EINVAL;
        }
        let Some(device) = real(handle) else {
            let virtual_time = VIRTUAL.with(|devices| devices.borrow().contains_key(&handle));
            return match virtual_time {
                true => failed(ZL_EINVAL, "a virtual-time device keeps no pace with the wall clock"),
                false => ZL_EHANDLE,
            };
        };
        let Some(pacing) = device.host.pacing() else { return ZL_EINTERNAL };
        // SAFETY: as the caller promises for `buf`, `len` and `needed`.
        match unsafe { copy_c_string(&pacing.line(), buf, len, needed) } {
            true => ZL_OK,
            false => ZL_EINVAL,
        }
    })
}

/// Sets `*needed` to the bytes `text` takes with its NUL and, if `len` is that much, copies it into `buf`;
/// returns whether it did.
///
/// # Safety
/// `needed` is writable; `buf` points to `len` writable bytes.
unsafe fn copy_c_string(text: &str, buf: *mut c_char, len: usize, needed: *mut usize) -> bool {
    // SAFETY: as the caller promises.
    unsafe { *needed = text.len() + 1 };
    if len < text.len() + 1 {
        return false;
    }
    // SAFETY: the caller passes `len` writable bytes, at least the text and its NUL.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
        *buf.add(text.len()) = 0;
    }
    true
}

/// The errno a Linux host would see for any code this library returns: for an NVMe status as the kernel maps
/// it (Too Many Active Zones: EOVERFLOW; Too Many Open Zones: ETOOMANYREFS; any other: EIO), 0 for ZL_OK.
#[no_mangle]
pub extern "C" fn zl_errno(code: i32) -> i32 {
    match code {
        ZL_OK => 0,
        ZL_EHANDLE => libc::EBADF,
        ZL_EINVAL => libc::EINVAL,
        ZL_EOPEN => libc::ENODEV,
        code => u16::try_from(code).ok().and_then(Status::from_code).map_or(libc::EIO, Status::errno),
    }
}

/// A static, NUL-terminated description of any code this library returns.
#[no_mangle]
pub extern "C" fn zl_strerror(code: i32) -> *const c_char {
    let text: &'static CStr = match code {
        ZL_OK => c"success",
        ZL_EHANDLE => c"invalid device handle (null, closed, unknown, or a virtual-time handle from another thread)",
        ZL_EINVAL => c"invalid argument",
        ZL_EOPEN => c"the device could not be opened",
        ZL_EINTERNAL => c"internal error in zonelab",
        code => match u16::try_from(code).ok().and_then(Status::from_code) {
            Some(status) => status_cstr(status),
            None => c"unknown status",
        },
    };
    text.as_ptr()
}

/// The zns layer's name of `status`, NUL-terminated, made once for the life of the process.
fn status_cstr(status: Status) -> &'static CStr {
    static NAMES: std::sync::OnceLock<Vec<std::ffi::CString>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        Status::ALL.iter().map(|status| std::ffi::CString::new(status.name()).unwrap_or_default()).collect()
    });
    let index = Status::ALL.iter().position(|known| *known == status).unwrap_or(0);
    names[index].as_c_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_match_the_zns_layer() {
        for status in Status::ALL {
            assert_eq!(status_cstr(status).to_str().ok(), Some(status.name()), "{status:?}");
            // SAFETY: zl_strerror returns a static NUL-terminated string.
            let named = unsafe { CStr::from_ptr(zl_strerror(status_code(status))) };
            assert_eq!(named.to_str().ok(), Some(status.name()));
        }
    }

    #[test]
    fn a_stale_or_null_handle_is_an_error() {
        assert_eq!(zl_flush(0), ZL_EHANDLE);
        assert_eq!(zl_close(u64::MAX), ZL_EHANDLE);
        // SAFETY: null pointers are what is tested; the functions check them.
        assert_eq!(unsafe { zl_open(std::ptr::null(), ZL_MODE_VIRTUAL, std::ptr::null_mut()) }, ZL_EINVAL);
    }

    #[test]
    fn a_conventional_namespace_says_so_and_takes_deallocates() {
        for mode in [ZL_MODE_VIRTUAL, ZL_MODE_REALTIME] {
            let (mut conventional, mut zoned) = (0, 0);
            // SAFETY: NUL-terminated specs and writable handles.
            unsafe {
                assert_eq!(zl_open(c"preset:zn540,ns=1".as_ptr(), mode, &mut conventional), ZL_OK);
                assert_eq!(zl_open(c"preset:zn540,zones=8".as_ptr(), mode, &mut zoned), ZL_OK);
            }
            let kind = |handle| {
                let mut geometry = zl_geometry::default();
                // SAFETY: a writable geometry.
                assert_eq!(unsafe { zl_get_geometry(handle, &mut geometry) }, ZL_OK);
                (geometry.kind, geometry.namespace_size_lba * u64::from(geometry.lba_size_bytes))
            };
            assert_eq!(kind(conventional), (ZL_NS_CONVENTIONAL, 4 << 30));
            assert_eq!(kind(zoned).0, ZL_NS_ZONED);
            let mut block = [7u8; 4096];
            // SAFETY: a buffer of one block.
            assert_eq!(unsafe { zl_write(conventional, 100, 1, block.as_ptr()) }, ZL_OK);
            assert_eq!(zl_deallocate(conventional, 100, 1), ZL_OK);
            // SAFETY: room for one block.
            assert_eq!(unsafe { zl_read(conventional, 100, 1, block.as_mut_ptr()) }, ZL_OK);
            assert_eq!(block, [0u8; 4096], "a deallocated block reads as zeros");
            assert_eq!(zl_deallocate(zoned, 0, 1), status_code(Status::InvalidOpcode));
            assert_eq!(zl_close(conventional), ZL_OK);
            assert_eq!(zl_close(zoned), ZL_OK);
        }
    }

    #[test]
    fn sizes_past_mdts_or_the_zone_count_are_refused_or_capped_without_allocating_them() {
        let mut handle = 0;
        for mode in [ZL_MODE_VIRTUAL, ZL_MODE_REALTIME] {
            let spec = c"preset:instant,zones=8";
            // SAFETY: a NUL-terminated spec and a writable handle.
            assert_eq!(unsafe { zl_open(spec.as_ptr(), mode, &mut handle) }, ZL_OK);
            let mut buf = vec![0u8; 4096];
            // A read of 4 billion blocks: the device's status, not an allocation of 16 TiB.
            // SAFETY: the call fails before it writes to `buf`.
            let code = unsafe { zl_read(handle, 0, u32::MAX, buf.as_mut_ptr()) };
            assert_eq!(code, status_code(Status::InvalidField), "mode {mode}");
            let io = zl_io { opcode: ZL_OP_READ, nlb: u32::MAX, slba: 0, buf: buf.as_mut_ptr(), action: 0, all: 0 };
            // SAFETY: `io` is valid, and its read fails before any data moves.
            assert_eq!(unsafe { zl_submit(handle, &io, 7) }, ZL_OK);
            let mut completions = [zl_completion::default(); 1];
            let mut count = 0;
            while count == 0 {
                // SAFETY: room for one completion and a writable count.
                assert_eq!(unsafe { zl_poll(handle, completions.as_mut_ptr(), 1, &mut count) }, ZL_OK);
            }
            assert_eq!((completions[0].tag, completions[0].status), (7, status_code(Status::InvalidField)));
            // Room for 4 billion zones: the report lists the eight there are.
            let mut zones = vec![zl_zone::default(); 8];
            let mut nr_zones = u32::MAX;
            // SAFETY: the report writes no more zones than the namespace has, and `zones` has room for all.
            assert_eq!(unsafe { zl_report_zones(handle, 0, zones.as_mut_ptr(), &mut nr_zones) }, ZL_OK);
            assert_eq!(nr_zones, 8);
            assert_eq!(zl_close(handle), ZL_OK);
        }
    }

    #[test]
    fn a_real_time_device_reports_how_it_kept_pace() {
        let stats = |handle| {
            let mut needed = 0;
            // SAFETY: a null buffer of length 0 asks for the size.
            assert_eq!(unsafe { zl_stats_json(handle, std::ptr::null_mut(), 0, &mut needed) }, ZL_EINVAL);
            let mut buf = vec![0 as c_char; needed];
            // SAFETY: room for `needed` bytes.
            assert_eq!(unsafe { zl_stats_json(handle, buf.as_mut_ptr(), buf.len(), &mut needed) }, ZL_OK);
            // SAFETY: zl_stats_json wrote a NUL-terminated string.
            let text = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().expect("UTF-8").to_string();
            serde_json::from_str::<serde_json::Value>(&text).expect("JSON")
        };
        for (mode, paced) in [(ZL_MODE_REALTIME, true), (ZL_MODE_VIRTUAL, false)] {
            let mut handle = 0;
            // SAFETY: a NUL-terminated spec and a writable handle.
            assert_eq!(unsafe { zl_open(c"preset:zn540,zones=8".as_ptr(), mode, &mut handle) }, ZL_OK);
            let mut block = [0u8; 4096];
            for _ in 0..3 {
                // SAFETY: room for one block.
                assert_eq!(unsafe { zl_read(handle, 0, 1, block.as_mut_ptr()) }, ZL_OK);
            }
            let value = stats(handle);
            assert_eq!(value["pacing"].is_object(), paced, "mode {mode}: {value}");
            if paced {
                let pacing = &value["pacing"];
                assert!(pacing["completions"].as_u64().expect("completions") >= 3, "{pacing}");
                let late_share = pacing["late_share"].as_f64().expect("late share");
                assert!((0.0..=1.0).contains(&late_share), "{pacing}");
                assert!(pacing["error_p99_ns"].as_u64() <= pacing["error_max_ns"].as_u64(), "{pacing}");
                assert!(pacing["placement"].as_str().is_some_and(|said| said.contains("wait")), "{pacing}");
                // An idle device's figures read the same twice, so a caller that asks the size, then the text,
                // gets what it sized for.
                std::thread::sleep(std::time::Duration::from_millis(30));
                assert_eq!(stats(handle), value, "mode {mode}: an idle device's statistics hold still");
            }
            assert_eq!(zl_close(handle), ZL_OK);
        }
    }
}

//! The zoned file system for C and C++ (`zlfs_*`): what the RocksDB plugin (`rocksdb/`) calls. A mount opens
//! a device in real time, puts the I/O scheduler it names in front of it and mounts zonedfs there, on a host
//! thread of its own (`HostThread`); every call may come from any thread and blocks until the file system has
//! done it, durably where the function says so.
//!
//! Unlike the device functions, these return 0 or a POSIX errno (ENOENT, ENOSPC, EIO, ...), and
//! `zlfs_last_error` describes the calling thread's last failure in words.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use zonelab_device::{DeviceBuilder, DeviceSpec, HostPath, StoreChoice};
use zonelab_host::trace::{prepare_trace, split_trace_option, HostTrace, OperationSpan};
use zonelab_host::{run_reset_load, ResetLoadStats, Scheduled, SchedulerKind, WalDesign};
use zonelab_runtime::{
    block_on, CommandQueue, HostThread, Output, Pending, Placement, QueuedCommand, RealTime, RealTimeHost,
};
use zonelab_zonedfs::{FsOptions, OpenMode, ReadPlan, ZonedFs, ZonedFsError};

use crate::{copy_c_string, failed, forget_queue_pair, guard, lock, queue_pair, thread_track, NEXT_HANDLE};

type Fs = ZonedFs<Scheduled<RealTimeHost>>;

/// What lives on a mount's host thread: the file system, and the reset load beside it (if asked for).
struct Context {
    fs: Fs,
    reset_load: Rc<RefCell<ResetLoadStats>>,
    running: Rc<Cell<bool>>,
}

/// The largest request the scheduler merges writes into: Linux's default max_sectors_kb for NVMe (1280 KiB),
/// as `zonelab fio` uses.
const MAX_REQUEST_BYTES: u64 = 1280 << 10;

/// A mounted file system: its host thread, and the device's real-time runtime, stopped at unmount. Reads of
/// closed files skip the host thread: the caller reads the extents of the file's `ReadPlan` from the device on
/// its own queue pair (as Linux sends reads past the scheduler's zone locks) and keeps the data if no zone was
/// reset meanwhile; otherwise it asks the file system again.
struct Mounted {
    host: HostThread<Context>,
    runtime: Mutex<Option<RealTime>>,
    device: RealTimeHost,
    block_bytes: u64,
    reset_generation: Arc<AtomicU64>,
    plans: Mutex<HashMap<u64, Arc<ReadPlan>>>,
    /// Where the trace goes and the calls it draws, when the spec asked for one (`trace=FILE`).
    tracing: Option<(std::path::PathBuf, Arc<HostTrace>)>,
}

static MOUNTS: Mutex<Option<HashMap<u64, Arc<Mounted>>>> = Mutex::new(None);

fn mounted(handle: u64) -> Result<Arc<Mounted>, i32> {
    lock(&MOUNTS).as_ref().and_then(|map| map.get(&handle).cloned()).ok_or_else(|| failed(libc::EBADF, "no such mount"))
}

fn fs_error(error: &ZonedFsError) -> i32 {
    failed(error.errno(), error.to_string())
}

fn text<'a>(pointer: *const c_char) -> Result<&'a str, i32> {
    if pointer.is_null() {
        return Err(failed(libc::EINVAL, "a string argument is null"));
    }
    // SAFETY: the caller passes a NUL-terminated string (checked non-null above).
    unsafe { CStr::from_ptr(pointer) }.to_str().map_err(|_| failed(libc::EINVAL, "a string argument is not UTF-8"))
}

/// Runs `op` (the call `name` says) on the mounted file system and maps its error; a traced mount draws it on
/// the calling thread's track, joined to the commands its task submitted.
fn on_fs<R: Send + 'static, F: std::future::Future<Output = Result<R, ZonedFsError>> + 'static>(
    handle: u64,
    name: &'static str,
    op: impl FnOnce(Fs) -> F + Send + 'static,
) -> Result<R, i32> {
    let mount = mounted(handle)?;
    let result = match mount.tracing.as_ref() {
        None => mount.host.call(move |context| op(context.fs.clone())),
        Some((_, trace)) => {
            let (trace, track) = (Arc::clone(trace), thread_track());
            mount.host.call(move |context| async move {
                let queue = context.fs.queue().clone();
                let start_ns = queue.now_ns();
                let result = op(context.fs.clone()).await;
                let (task, end_ns) = (queue.task(), queue.now_ns());
                trace.operation(OperationSpan { track: track.into(), name: name.into(), start_ns, end_ns, task });
                result
            })
        }
    };
    result.map_err(|error| fs_error(&error))
}

fn status_of(result: Result<(), i32>) -> i32 {
    result.map_or_else(|errno| errno, |()| 0)
}

/// The mount options that are not the file system's own.
#[derive(Debug)]
struct MountOptions {
    /// None: what Linux gives the host path (mq-deadline through the block layer, none past it).
    scheduler: Option<SchedulerKind>,
    host: HostPath,
    /// Resets per second of the reset load, 0 for none.
    reset_load_per_s: f64,
    /// Zones at the end of the device, filled at start, that the reset load resets.
    reset_pool_zones: u32,
    /// Where the device thread runs: the environment's, then the spec's keys, then the options'.
    placement: Placement,
}

/// Splits mount options into the device's and the load's (`scheduler=`, `host=`, `reset_load=`,
/// `reset_pool=`, the placement keys over `placement`'s) and the file system's.
fn parse_options(options: &str, placement: Placement) -> Result<(MountOptions, FsOptions), String> {
    let mut mount =
        MountOptions { scheduler: None, host: HostPath::Kernel, reset_load_per_s: 0.0, reset_pool_zones: 0, placement };
    let mut fs_options = FsOptions { format_blank: true, ..FsOptions::default() };
    let mut rest = Vec::new();
    for item in options.split(['&', ',']).filter(|item| !item.is_empty()) {
        match item.split_once('=') {
            Some(("scheduler", name)) => {
                mount.scheduler = Some(
                    SchedulerKind::parse(name)
                        .ok_or_else(|| format!("scheduler={name}: not none, mq-deadline or zinc"))?,
                );
            }
            Some(("host", name)) => {
                mount.host = HostPath::parse(name).ok_or_else(|| format!("host={name}: not a host path"))?;
            }
            Some(("reset_load", rate)) => {
                mount.reset_load_per_s = rate
                    .parse::<f64>()
                    .ok()
                    .filter(|rate| (0.0..=1e6).contains(rate))
                    .ok_or_else(|| format!("reset_load={rate}: not a rate from 0 to 1e6 resets per second"))?;
            }
            Some(("reset_pool", zones)) => {
                mount.reset_pool_zones =
                    zones.parse().map_err(|_| format!("reset_pool={zones}: not a number of zones"))?;
            }
            Some((key, value)) if mount.placement.set(key, value)? => {}
            _ => rest.push(item),
        }
    }
    if mount.reset_load_per_s > 0.0 && mount.reset_pool_zones == 0 {
        return Err("reset_load needs reset_pool=N: the zones at the end of the device that it resets".into());
    }
    fs_options.apply(&rest.join("&")).map_err(|error| error.to_string())?;
    fs_options.reserved_tail_zones = mount.reset_pool_zones;
    if fs_options.wal == Some(WalDesign::Zwal) && !mount.host.carries_append() {
        return Err(format!(
            "wal=zwal writes with zone appends, which host={} cannot carry (as Linux's block layer cannot); \
             use host=io_uring_cmd or host=spdk",
            mount.host.name()
        ));
    }
    Ok((mount, fs_options))
}

/// Mounts zonedfs on the device `spec` names (`preset:NAME[,key=value...]` or an image path), in real time,
/// and stores the mount's handle in `*handle`. `options` (may be null or empty) is `key=value` pairs
/// separated by `&`: `scheduler=none|mq-deadline|zinc` (default mq-deadline, as Linux picks for a zoned disk,
/// or none on the paths that bypass the block layer), `host=kernel|spdk|io_uring|io_uring_cmd` (default
/// kernel), `format=0|1` (format a blank device, default 1), `write_buffer_bytes`, `finish_threshold`,
/// `max_active_zones`, `gc_reserve_zones`; WALs through the WAL library with `wal=zwal|conventional|file`,
/// `wal_buffer_bytes`, `wal_queue_depth`, `wal_barrier_bytes` (ZWAL needs host=spdk or io_uring_cmd); and a load of zone
/// resets beside the file system through the same scheduler (ZINC's workload-level experiment):
/// `reset_pool=N` fills the last N zones at start and leaves them out of the file system, `reset_load=R`
/// resets R of them a second, one at a time. The spec and the options may place the device thread
/// (`device-cpu=N`, `device-sched=fifo|normal`, `device-wait=adaptive|poll`, `device-placement=strict|best-effort`,
/// over the environment's `ZONELAB_DEVICE_*`; docs/realtime.md). A device that holds data but no file system is refused
/// (EUCLEAN); run `zonelab fs mkfs` on it.
///
/// # Safety
/// `spec` and `options` are NUL-terminated strings or null; `handle` points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn zlfs_mount(spec: *const c_char, options: *const c_char, handle: *mut u64) -> i32 {
    guard(|| {
        let result = (|| {
            let spec = text(spec)?;
            let options = if options.is_null() { "" } else { text(options)? };
            if handle.is_null() {
                return Err(failed(libc::EINVAL, "handle is null"));
            }
            let (spec, trace_path) = split_trace_option(spec);
            if let Some(path) = &trace_path {
                prepare_trace(path)
                    .map_err(|error| failed(libc::EINVAL, format!("trace {}: {error}", path.display())))?;
            }
            let (spec, placement) = Placement::split_spec(&spec).map_err(|message| failed(libc::EINVAL, &message))?;
            let (mount_options, fs_options) =
                parse_options(options, placement).map_err(|message| failed(libc::EINVAL, &message))?;
            let builder = DeviceBuilder::new(DeviceSpec::parse(&spec))
                .host(mount_options.host)
                .store(StoreChoice::Memory)
                .full_tail_zones(mount_options.reset_pool_zones);
            let scheduler = mount_options.scheduler.unwrap_or(SchedulerKind::linux_default(mount_options.host));
            let runtime = RealTime::start_placed(builder, mount_options.placement)
                .map_err(|error| failed(libc::ENODEV, error.to_string()))?;
            let traced = trace_path.is_some();
            if traced {
                runtime.enable_trace();
            }
            let device = runtime.host();
            let epoch_s = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_secs())
                .saturating_sub(runtime.now_ns() / 1_000_000_000);
            let for_host = device.clone();
            let host = HostThread::start("zonelab-fs", move || async move {
                let queue = Scheduled::new(for_host, scheduler, MAX_REQUEST_BYTES);
                if traced {
                    queue.record_queues();
                }
                let fs = ZonedFs::mount(queue, FsOptions { epoch_s, ..fs_options }).await?;
                if traced {
                    fs.record_activity();
                }
                Ok(Context { fs, reset_load: Rc::default(), running: Rc::new(Cell::new(true)) })
            })
            .map_err(|error| fs_error(&error))?;
            let reset_generation = host.call(|context| async move { context.fs.reset_generation() });
            if mount_options.reset_load_per_s > 0.0 {
                let (rate, pool_zones) = (mount_options.reset_load_per_s, mount_options.reset_pool_zones);
                host.spawn(move |context| async move {
                    let zones = context.fs.geometry().zones;
                    let running = Rc::clone(&context.running);
                    let queue = context.fs.queue().clone();
                    let pool = zones - pool_zones..zones;
                    run_reset_load(queue, pool, rate, move || running.get(), Rc::clone(&context.reset_load)).await;
                });
            }
            let id = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
            let mount = Arc::new(Mounted {
                host,
                runtime: Mutex::new(Some(runtime)),
                block_bytes: u64::from(device.geometry().lba_size),
                device,
                reset_generation,
                plans: Mutex::new(HashMap::new()),
                tracing: trace_path.map(|path| (path, Arc::default())),
            });
            lock(&MOUNTS).get_or_insert_with(HashMap::new).insert(id, mount);
            // SAFETY: checked non-null above; the caller passes a writable uint64_t.
            unsafe { *handle = id };
            Ok(())
        })();
        status_of(result)
    })
}

/// Unmounts: syncs every file still open for writing, flushes the device, stops it; the handle is stale after.
#[no_mangle]
pub extern "C" fn zlfs_unmount(handle: u64) -> i32 {
    guard(|| {
        let Some(mount) = lock(&MOUNTS).as_mut().and_then(|map| map.remove(&handle)) else {
            return failed(libc::EBADF, "no such mount");
        };
        forget_queue_pair(handle);
        let (synced, queued, activity) = mount.host.call(|context| async move {
            context.running.set(false);
            (context.fs.unmount().await, context.fs.queue().queue_spans(), context.fs.activity())
        });
        let Ok(mount) = Arc::try_unwrap(mount) else {
            return failed(libc::EBUSY, "the mount is in use by another call");
        };
        let runtime = lock(&mount.runtime).take();
        drop(mount.host);
        let tracing = mount.tracing;
        if let Some((_, trace)) = &tracing {
            activity.into_iter().for_each(|span| trace.operation(span));
        }
        let stopped = runtime.map(|runtime| {
            runtime.stop_then(|device| match &tracing {
                Some((path, trace)) => trace.write(path, "RocksDB plugin", &queued, device).map_err(|error| {
                    failed(libc::EIO, format!("the trace could not be written to {}: {error}", path.display()))
                }),
                None => Ok(()),
            })
        });
        if let Some(warning) = stopped.as_ref().and_then(|(stopped, _)| stopped.pacing.summary().warning()) {
            eprintln!("zonelab: {warning}");
        }
        match (synced, stopped.map(|(stopped, written)| (stopped.flushed, written))) {
            (Err(error), _) => fs_error(&error),
            (Ok(()), Some((Err(status), _))) => failed(libc::EIO, format!("the device's last flush failed: {status}")),
            (Ok(()), Some((Ok(()), Err(errno)))) => errno,
            _ => 0,
        }
    })
}

/// Opens `name` for writing and stores a file id in `*file`: `append` 0 replaces any file of that name with an
/// empty one (RocksDB's NewWritableFile), 1 appends to it. `lifetime` is RocksDB's write-lifetime hint (0 not
/// set .. 5 extreme): files of similar lifetimes share zones. The creation is durable when this returns.
///
/// # Safety
/// `name` is a NUL-terminated string; `file` points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn zlfs_open_write(
    handle: u64,
    name: *const c_char,
    lifetime: u32,
    append: u32,
    file: *mut u64,
) -> i32 {
    guard(|| {
        let result = (|| {
            let name = text(name)?.to_string();
            if file.is_null() {
                return Err(failed(libc::EINVAL, "file is null"));
            }
            let mode = match append {
                0 => OpenMode::Truncate,
                1 => OpenMode::Append,
                _ => return Err(failed(libc::EINVAL, format!("append={append}: not 0 (truncate) or 1 (append)"))),
            };
            let lifetime = lifetime_hint(lifetime)?;
            let id =
                on_fs(handle, "open for writing", move |fs| async move { fs.open_write(&name, lifetime, mode).await })?;
            // SAFETY: checked non-null above.
            unsafe { *file = id };
            Ok(())
        })();
        status_of(result)
    })
}

/// A lifetime hint as the C API takes it; zonedfs refuses the ones past `MAX_LIFETIME` with their value.
fn lifetime_hint(lifetime: u32) -> Result<u8, i32> {
    u8::try_from(lifetime).map_err(|_| failed(libc::EINVAL, format!("lifetime hint {lifetime}: not 0 to 5")))
}

/// Sets the write-lifetime hint (0 not set .. 5 extreme) of a file open for writing, for the data written from
/// now on: RocksDB sets it after it creates the file.
#[no_mangle]
pub extern "C" fn zlfs_set_lifetime(handle: u64, file: u64, lifetime: u32) -> i32 {
    guard(|| {
        status_of(lifetime_hint(lifetime).and_then(|lifetime| {
            on_fs(handle, "set lifetime", move |fs| async move { fs.set_lifetime(file, lifetime) })
        }))
    })
}

/// Opens `name` for reading and stores its file id in `*file`.
///
/// # Safety
/// `name` is a NUL-terminated string; `file` points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn zlfs_open_read(handle: u64, name: *const c_char, file: *mut u64) -> i32 {
    guard(|| {
        let result = (|| {
            let name = text(name)?.to_string();
            if file.is_null() {
                return Err(failed(libc::EINVAL, "file is null"));
            }
            let (id, plan) = on_fs(handle, "open for reading", move |fs| async move {
                let id = fs.open_read(&name)?;
                Ok((id, fs.read_plan(id)))
            })?;
            if let (Some(plan), Ok(mount)) = (plan, mounted(handle)) {
                lock(&mount.plans).insert(id, Arc::new(plan));
            }
            // SAFETY: checked non-null above.
            unsafe { *file = id };
            Ok(())
        })();
        status_of(result)
    })
}

/// Appends `len` bytes to a file open for writing (buffered until a buffer's worth or `zlfs_sync`).
///
/// # Safety
/// `buf` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn zlfs_append(handle: u64, file: u64, buf: *const u8, len: usize) -> i32 {
    guard(|| {
        if buf.is_null() && len != 0 {
            return failed(libc::EINVAL, "buf is null");
        }
        let data = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: the caller passes `len` readable bytes.
            unsafe { std::slice::from_raw_parts(buf, len) }.to_vec()
        };
        status_of(on_fs(handle, "append", move |fs| async move { fs.append(file, &data).await }))
    })
}

/// Makes everything appended to the file durable.
#[no_mangle]
pub extern "C" fn zlfs_sync(handle: u64, file: u64) -> i32 {
    guard(|| status_of(on_fs(handle, "sync", move |fs| async move { fs.sync(file).await })))
}

/// Closes a file id (a writer is synced first).
#[no_mangle]
pub extern "C" fn zlfs_close(handle: u64, file: u64) -> i32 {
    guard(|| {
        if let Ok(mount) = mounted(handle) {
            lock(&mount.plans).remove(&file);
        }
        status_of(on_fs(handle, "close", move |fs| async move { fs.close(file).await }))
    })
}

/// Waits for a command by polling for up to 20 us, as a polled NVMe driver does, before sleeping: the device
/// thread completes an instant command within that, and a sleep and wake-up cost more than the read.
fn wait_briefly_then_block(pending: Pending) -> Result<Output, zonelab_zns::Status> {
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_micros(20) {
        if let Some(result) = pending.try_take() {
            return result;
        }
        std::hint::spin_loop();
    }
    block_on(pending)
}

/// Reads through the file's plan on the caller's own queue pair; None if there is no plan, a read failed or a
/// zone was reset meanwhile (the file system then reads, and the plan is made anew).
fn read_directly(handle: u64, file: u64, offset: u64, len: u64) -> Option<Vec<u8>> {
    let mount = mounted(handle).ok()?;
    let plan = lock(&mount.plans).get(&file).cloned()?;
    let queue = queue_pair(handle, &mount.runtime, &mount.device);
    let start_ns = queue.now_ns();
    let mut out = Vec::with_capacity(len.min(plan.size_bytes.saturating_sub(offset)) as usize);
    for (lba, blocks, skip, take) in plan.pieces(offset, len, mount.block_bytes) {
        let pending = queue.submit_pending(QueuedCommand::Read { slba: lba, nlb: blocks, keep: true });
        let bytes = match wait_briefly_then_block(pending) {
            Ok(Output::Data(bytes)) => bytes,
            _ => return None,
        };
        out.extend_from_slice(&bytes[skip as usize..(skip + take) as usize]);
    }
    if mount.reset_generation.load(Ordering::Acquire) != plan.generation {
        // A fresh plan for the next read; this one goes through the file system.
        match mount.host.call(move |context| async move { context.fs.read_plan(file) }) {
            Some(fresh) => lock(&mount.plans).insert(file, Arc::new(fresh)),
            None => lock(&mount.plans).remove(&file),
        };
        return None;
    }
    if let Some((_, trace)) = &mount.tracing {
        let (track, task, end_ns) = (thread_track().into(), queue.task(), queue.now_ns());
        trace.operation(OperationSpan { track, name: "read".into(), start_ns, end_ns, task });
    }
    Some(out)
}

/// Reads up to `len` bytes at `offset` of a file into `buf`; stores the bytes read in `*got` (fewer at the end).
///
/// # Safety
/// `buf` points to `len` writable bytes; `got` is writable.
#[no_mangle]
pub unsafe extern "C" fn zlfs_read(
    handle: u64,
    file: u64,
    offset: u64,
    buf: *mut u8,
    len: usize,
    got: *mut usize,
) -> i32 {
    guard(|| {
        if (buf.is_null() && len != 0) || got.is_null() {
            return failed(libc::EINVAL, "buf or got is null");
        }
        let data = match read_directly(handle, file, offset, len as u64) {
            Some(data) => Ok(data),
            None => on_fs(handle, "read", move |fs| async move { fs.read(file, offset, len as u64).await }),
        };
        match data {
            Ok(data) => {
                // SAFETY: the caller passes `len` writable bytes; `data` is at most `len` long.
                unsafe {
                    std::ptr::copy_nonoverlapping(data.as_ptr(), buf, data.len());
                    *got = data.len();
                }
                0
            }
            Err(errno) => errno,
        }
    })
}

/// Deletes a file (durable on return; its space is reclaimed at its last close).
///
/// # Safety
/// `name` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn zlfs_delete(handle: u64, name: *const c_char) -> i32 {
    guard(|| {
        let result = text(name).map(str::to_string);
        status_of(result.and_then(|name| on_fs(handle, "delete", move |fs| async move { fs.delete(&name).await })))
    })
}

/// Renames a file, replacing any file named `to` (durable on return).
///
/// # Safety
/// `from` and `to` are NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn zlfs_rename(handle: u64, from: *const c_char, to: *const c_char) -> i32 {
    guard(|| {
        let result = text(from).and_then(|from| Ok((from.to_string(), text(to)?.to_string())));
        status_of(
            result.and_then(|(from, to)| on_fs(handle, "rename", move |fs| async move { fs.rename(&from, &to).await })),
        )
    })
}

/// Creates a directory (EEXIST if it exists).
///
/// # Safety
/// `path` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn zlfs_mkdir(handle: u64, path: *const c_char) -> i32 {
    guard(|| {
        let result = text(path).map(str::to_string);
        status_of(result.and_then(|path| on_fs(handle, "mkdir", move |fs| async move { fs.mkdir(&path).await })))
    })
}

/// Removes an empty directory.
///
/// # Safety
/// `path` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn zlfs_rmdir(handle: u64, path: *const c_char) -> i32 {
    guard(|| {
        let result = text(path).map(str::to_string);
        status_of(result.and_then(|path| on_fs(handle, "rmdir", move |fs| async move { fs.rmdir(&path).await })))
    })
}

/// What `path` is: stores 0 (nothing), 1 (a file) or 2 (a directory) in `*kind`, and a file's size and
/// modification time (seconds since the epoch) in `*size_bytes` and `*mtime_s` (either may be null).
///
/// # Safety
/// `path` is a NUL-terminated string; `kind` is writable; `size_bytes` and `mtime_s` are writable or null.
#[no_mangle]
pub unsafe extern "C" fn zlfs_stat(
    handle: u64,
    path: *const c_char,
    kind: *mut u32,
    size_bytes: *mut u64,
    mtime_s: *mut u64,
) -> i32 {
    guard(|| {
        let result = (|| {
            let path = text(path)?.to_string();
            if kind.is_null() {
                return Err(failed(libc::EINVAL, "kind is null"));
            }
            let found = on_fs(handle, "stat", move |fs| async move {
                Ok(match fs.stat(&path) {
                    Ok(info) => (1u32, info.size_bytes, info.mtime_s),
                    Err(_) if fs.is_dir(&path) => (2, 0, 0),
                    Err(_) => (0, 0, 0),
                })
            })?;
            // SAFETY: `kind` checked non-null; the others are written only when non-null.
            unsafe {
                *kind = found.0;
                if !size_bytes.is_null() {
                    *size_bytes = found.1;
                }
                if !mtime_s.is_null() {
                    *mtime_s = found.2;
                }
            }
            Ok(())
        })();
        status_of(result)
    })
}

/// Writes the names in directory `dir` into `buf` (`len` bytes), each followed by a NUL; sets `*needed` to
/// the bytes all of them take. A `len` below that is ERANGE and writes nothing.
///
/// # Safety
/// `dir` is a NUL-terminated string; `buf` points to `len` writable bytes (or is null with `len` 0);
/// `needed` is writable.
#[no_mangle]
pub unsafe extern "C" fn zlfs_list(
    handle: u64,
    dir: *const c_char,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> i32 {
    guard(|| {
        let result = (|| {
            let dir = text(dir)?.to_string();
            if needed.is_null() || (buf.is_null() && len != 0) {
                return Err(failed(libc::EINVAL, "buf or needed is null"));
            }
            let names = on_fs(handle, "list", move |fs| async move { fs.list(&dir) })?;
            let mut bytes = Vec::new();
            for name in names {
                bytes.extend_from_slice(name.as_bytes());
                bytes.push(0);
            }
            // SAFETY: checked non-null above.
            unsafe { *needed = bytes.len() };
            if len < bytes.len() {
                return Err(failed(libc::ERANGE, "the buffer is too small for the names"));
            }
            // SAFETY: the caller passes `len` writable bytes, at least `bytes.len()`.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len()) };
            Ok(())
        })();
        status_of(result)
    })
}

/// Stores the bytes that can still be written (empty and partly written zones) in `*free_bytes`.
///
/// # Safety
/// `free_bytes` is writable.
#[no_mangle]
pub unsafe extern "C" fn zlfs_free_space(handle: u64, free_bytes: *mut u64) -> i32 {
    guard(|| {
        if free_bytes.is_null() {
            return failed(libc::EINVAL, "free_bytes is null");
        }
        match on_fs(handle, "free space", |fs| async move { Ok(fs.space().free_bytes) }) {
            Ok(free) => {
                // SAFETY: checked non-null above.
                unsafe { *free_bytes = free };
                0
            }
            Err(errno) => errno,
        }
    })
}

/// Writes the mount's counters as a NUL-terminated JSON object into `buf`: the device's (`device`, as
/// `zl_stats_json`: commands, flash operations, energy, wear), how the device kept the model's pace (`pacing`),
/// the file system's (`fs`: bytes written and read,
/// journal commits and rolls, zone resets and finishes, garbage collection) and the reset load's
/// (`reset_load`: resets, mean and largest latency); `*needed` as `zl_stats_json` does.
///
/// # Safety
/// `buf` points to `len` writable bytes (or is null with `len` 0); `needed` is writable.
#[no_mangle]
pub unsafe extern "C" fn zlfs_stats_json(handle: u64, buf: *mut c_char, len: usize, needed: *mut usize) -> i32 {
    guard(|| {
        if needed.is_null() || (buf.is_null() && len != 0) {
            return failed(libc::EINVAL, "buf or needed is null");
        }
        let stats = mounted(handle).map(|mount| {
            let (device, pacing) = (mount.device.stats(), mount.device.pacing());
            mount.host.call(move |context| async move {
                let load = context.reset_load.borrow().clone();
                let value = serde_json::json!({
                    "device": device,
                    "pacing": pacing,
                    "fs": context.fs.stats(),
                    "reset_load": {
                        "resets": load.resets,
                        "latency_ms_mean": load.latency_ms_mean(),
                        "latency_ms_max": load.latency_ns_max as f64 / 1e6,
                        "pool_exhausted": load.pool_exhausted,
                    },
                });
                value.to_string()
            })
        });
        match stats {
            // SAFETY: as the caller promises for `buf`, `len` and `needed`.
            Ok(text) => match unsafe { copy_c_string(&text, buf, len, needed) } {
                true => 0,
                false => failed(libc::ERANGE, "the buffer is too small for the statistics"),
            },
            Err(errno) => errno,
        }
    })
}

/// The calling thread's last failure of a `zlfs_*` (or `zl_*`) call, in words (empty if none); valid until its
/// next failure. The same as `zl_last_error`.
#[no_mangle]
pub extern "C" fn zlfs_last_error() -> *const c_char {
    crate::zl_last_error()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheduler_defaults_to_what_linux_gives_the_host_path() {
        let (kernel, _) = parse_options("", Placement::default()).expect("options");
        assert_eq!((kernel.host, kernel.scheduler), (HostPath::Kernel, None));
        let (passthrough, fs) =
            parse_options("host=io_uring_cmd&wal=zwal&wal_buffer_bytes=8192", Placement::default()).expect("options");
        assert_eq!(passthrough.host, HostPath::IoUringCmd);
        assert!(!passthrough.host.through_block_layer() && HostPath::Kernel.through_block_layer());
        assert_eq!((fs.wal, fs.wal_buffer_bytes), (Some(WalDesign::Zwal), 8192));
    }

    #[test]
    fn the_options_place_the_device_thread_over_the_spec() {
        let from_spec = Placement { cpu: Some(0), ..Placement::default() };
        let (mount, _) = parse_options("device-cpu=2&device-wait=poll&host=spdk", from_spec).expect("options");
        assert_eq!((mount.placement.cpu, mount.placement.wait), (Some(2), zonelab_runtime::Wait::Poll));
        let error = parse_options("device-sched=rr", Placement::default()).expect_err("refused");
        assert_eq!(error, "device-sched=rr: not fifo or normal");
    }

    #[test]
    fn zwal_is_refused_on_a_path_that_cannot_carry_zone_appends() {
        for host in ["kernel", "io_uring"] {
            let error = parse_options(&format!("host={host}&wal=zwal"), Placement::default()).expect_err("refused");
            assert!(error.contains("zone appends") && error.contains("host=io_uring_cmd"), "{error}");
        }
        assert!(parse_options("wal=conventional", Placement::default()).is_ok());
        let error = parse_options("wal=fast", Placement::default()).expect_err("refused");
        assert!(error.contains("wal=fast: not file, zwal or conventional"), "{error}");
    }
}

//! The kernel's view of a zonelab device: every namespace as a Linux block device through ublk (user-space block
//! devices, `ublk_drv`; zoned devices since Linux 6.6). A zoned namespace is a host-managed zoned block device
//! (zone size, capacity, open and active limits and the zone append limit in sysfs, as on a real ZNS drive); a
//! conventional namespace is a regular block device with discard. Every request becomes a command to the same
//! device as every other front end, on one real-time device thread: the zone rules, the status codes and the
//! timing are the device's own, and a refused command is the errno the kernel's NVMe driver gives for it.
//!
//! Data moves with `UBLK_F_USER_COPY` (read and written through the control character device at the request's
//! offset), which a zoned device needs: the completion's buffer field carries zone append's LBA.

use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::pin::Pin;
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::JoinHandle;

use libublk::ctrl::{UblkCtrl, UblkCtrlBuilder};
use libublk::io::{BufDescList, UblkDev, UblkIOCtx, UblkQueue};
use libublk::sys;
use libublk::{BufDesc, UblkFlags, UblkIORes};
use zonelab_host::trace::{HostTrace, IoKind, IoSpan};
use zonelab_runtime::{CommandQueue, IoData, Output, Pending, QueuedCommand, RealTime, RealTimeHost};
use zonelab_zns::{Geometry, NamespaceKind, ReportFilter, Status, ZoneDescriptor, ZoneSendAction, ZoneState};

/// Why a namespace could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "this kernel has no ublk (/dev/ublk-control is missing): load it with `modprobe ublk_drv` (Linux 6.0 or \
         newer; 6.6 or newer for a zoned namespace), or run zonelab in the guest of docs/kernel.md"
    )]
    NoUblk,
    #[error("this kernel's ublk serves no zoned devices (UBLK_F_ZONED needs Linux 6.6 or newer)")]
    NoZonedUblk,
    #[error("this kernel's ublk cannot hand a device to a new server (UBLK_F_USER_RECOVERY_REISSUE needs Linux 6.0)")]
    NoRecovery,
    #[error("namespace {nsid}: {reason}")]
    Namespace { nsid: u32, reason: String },
    #[error("cannot record the device numbers in {path}: {source}")]
    DeviceNumbers { path: String, source: std::io::Error },
    #[error("cannot delete /dev/ublkb{number}: {source:?}")]
    Delete { number: u32, source: libublk::UblkError },
    #[error("ublk refused namespace {nsid}'s {step}: {source:?}")]
    Ublk { nsid: u32, step: &'static str, source: libublk::UblkError },
}

/// The largest request the kernel sends, when the namespace sets no MDTS: 512 KiB, libublk's default buffer.
const DEFAULT_MAX_IO_BYTES: u64 = 512 * 1024;

/// The largest discard (Dataset Management deallocate) or write zeroes the kernel sends in one request.
const MAX_DISCARD_BYTES: u64 = 1 << 30;

/// How long a new recoverable server waits, in steps of 100 ms, for the kernel to quiesce the device of a
/// killed one.
const RECOVERY_WAIT_STEPS: u32 = 100;

/// Requests a namespace's queue takes at once.
const QUEUE_DEPTH: u16 = 128;

/// One namespace served as a block device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    pub nsid: u32,
    /// ublk's device number: the block device is `/dev/ublkbN`, its control device `/dev/ublkcN`.
    pub dev_id: u32,
    pub geometry: Geometry,
}

impl Served {
    pub fn block_device(&self) -> String {
        format!("/dev/ublkb{}", self.dev_id)
    }

    /// What a user reads at start: which namespace is which block device, and its shape.
    pub fn describe(&self) -> String {
        let geometry = &self.geometry;
        let bytes = geometry.nsze_lba << geometry.lba_shift;
        match geometry.kind {
            NamespaceKind::Zoned => format!(
                "namespace {} (zoned): {}, {} zones of {} MiB ({} MiB writable), {} B blocks, max open {} active {}",
                self.nsid,
                self.block_device(),
                geometry.zones,
                (geometry.zone_size_lba << geometry.lba_shift) >> 20,
                (geometry.zone_cap_lba << geometry.lba_shift) >> 20,
                geometry.lba_size,
                limit(geometry.max_open),
                limit(geometry.max_active),
            ),
            NamespaceKind::Conventional => format!(
                "namespace {} (conventional): {}, {} MiB, {} B blocks, discard",
                self.nsid,
                self.block_device(),
                bytes >> 20,
                geometry.lba_size
            ),
        }
    }
}

fn limit(value: u32) -> String {
    if value == 0 {
        "unlimited".into()
    } else {
        value.to_string()
    }
}

/// The namespaces of a running device, each served by a thread of its own until stopped.
pub struct Server {
    served: Vec<Served>,
    threads: Vec<JoinHandle<()>>,
    /// Each namespace thread sends its namespace ID here when its device goes away (stopped here, or deleted
    /// from outside with `zonelab ublk del`), until a caller takes it (`take_ends`).
    ended: Option<mpsc::Receiver<u32>>,
}

impl Server {
    /// Serves every namespace of `device` as a block device; returns once all of them are live. With
    /// `numbers`, a file beside an image, each namespace gets the device number it had the last time, so that
    /// `/dev/ublkbN` stays the same across restarts, as file systems that record their devices' paths (F2FS's
    /// second device) need. A device that a killed server left behind is deleted first, or, when it was served
    /// `recoverable`, taken over: its requests waited for a new server, and a mounted file system carries on.
    /// With `trace`, each request is recorded on a track of its block device, for the trace written at stop.
    pub fn start(
        device: &RealTime,
        numbers: Option<&Path>,
        recoverable: bool,
        trace: Option<Arc<HostTrace>>,
    ) -> Result<Server, ServeError> {
        if !Path::new("/dev/ublk-control").exists() {
            return Err(ServeError::NoUblk);
        }
        let previous = numbers.map(read_numbers).unwrap_or_default();
        let host = device.host();
        let (ended_tx, ended) = mpsc::channel();
        let mut server = Server { served: Vec::new(), threads: Vec::new(), ended: Some(ended) };
        for nsid in host.namespace_ids() {
            let Some(namespace) = host.on_namespace(nsid) else { continue };
            let number = match previous.iter().find(|(recorded, _)| *recorded == nsid) {
                Some(&(_, number)) => reclaim(nsid, number, &namespace.geometry(), recoverable)?,
                None => Number::Any,
            };
            let (live_tx, live) = mpsc::channel();
            let ended_tx = ended_tx.clone();
            let trace = trace.clone();
            let thread = std::thread::Builder::new()
                .name(format!("zonelab-ublk-ns{nsid}"))
                .spawn(move || {
                    if let Err(error) = serve_namespace(nsid, number, recoverable, namespace, trace, &live_tx) {
                        let _ = live_tx.send(Err(error));
                    }
                    let _ = ended_tx.send(nsid);
                })
                .map_err(|error| ServeError::Namespace { nsid, reason: error.to_string() })?;
            server.threads.push(thread);
            match live.recv() {
                Ok(Ok(served)) => server.served.push(served),
                Ok(Err(error)) => {
                    server.stop();
                    return Err(error);
                }
                Err(_) => {
                    server.stop();
                    return Err(ServeError::Namespace { nsid, reason: "its thread ended before the device".into() });
                }
            }
        }
        if let Some(path) = numbers {
            let text: String =
                server.served.iter().map(|served| format!("{} {}\n", served.nsid, served.dev_id)).collect();
            std::fs::write(path, text)
                .map_err(|source| ServeError::DeviceNumbers { path: path.display().to_string(), source })?;
        }
        Ok(server)
    }

    pub fn served(&self) -> &[Served] {
        &self.served
    }

    /// Where the namespace ID of each device that goes away arrives (once: the first caller takes it).
    pub fn take_ends(&mut self) -> Option<mpsc::Receiver<u32>> {
        self.ended.take()
    }

    /// Removes every device and waits for its thread.
    pub fn stop(&mut self) {
        for served in &self.served {
            if let Ok(ctrl) = UblkCtrl::new_simple(served.dev_id as i32) {
                let _ = ctrl.kill_dev();
            }
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The namespace IDs and device numbers a `numbers` file records (`NSID NUMBER` lines); a line that does not
/// read is skipped (the number is a wish, not state).
fn read_numbers(path: &Path) -> Vec<(u32, i32)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (nsid, number) = line.split_once(' ')?;
            Some((nsid.parse().ok()?, number.parse().ok().filter(|&number: &i32| number >= 0)?))
        })
        .collect()
}

/// Deletes block device `/dev/ublkbN` (`zonelab ublk del N`): stops it when its server runs (the server then
/// removes its other devices and ends), deletes it at once when its server is gone.
pub fn delete(number: u32) -> Result<(), ServeError> {
    let failed = |source| ServeError::Delete { number, source };
    let ctrl = UblkCtrl::new_simple(number as i32).map_err(failed)?;
    if server_alive(&ctrl.dev_info()) {
        ctrl.kill_dev().map_err(failed)?;
    } else {
        ctrl.del_dev().map_err(failed)?;
    }
    Ok(())
}

/// Whether the process that serves a device still runs.
fn server_alive(info: &sys::ublksrv_ctrl_dev_info) -> bool {
    // SAFETY: kill with signal 0 only asks whether the process exists.
    info.ublksrv_pid > 0 && unsafe { libc::kill(info.ublksrv_pid, 0) } == 0
}

/// Which device number a namespace's block device gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Number {
    /// Whichever ublk gives.
    Any,
    /// This one, free.
    Free(i32),
    /// This device, left quiesced by a killed recoverable server: taken over as it is.
    Recover(i32),
}

/// Device number `number` for namespace `nsid` again: free; or held by a device whose server is gone, which is
/// taken over when both its server and this one are recoverable and it has the namespace's shape, and deleted
/// first otherwise; or any number when another device uses it. A live device of a running server is refused.
fn reclaim(nsid: u32, number: i32, geometry: &Geometry, recoverable: bool) -> Result<Number, ServeError> {
    if !Path::new(&format!("/sys/class/ublk-char/ublkc{number}")).exists() {
        return Ok(Number::Free(number));
    }
    let Ok(mut ctrl) = UblkCtrl::new_simple(number) else { return Ok(Number::Any) };
    let mut info = ctrl.dev_info();
    let server_alive = server_alive(&info);
    // The kernel quiesces a recoverable device a moment after its server dies: wait for it rather than delete it.
    let recoverable_device = info.flags & u64::from(sys::UBLK_F_USER_RECOVERY) != 0;
    for _ in 0..RECOVERY_WAIT_STEPS {
        if !(recoverable && recoverable_device && !server_alive && u32::from(info.state) == sys::UBLK_S_DEV_LIVE) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let Ok(again) = UblkCtrl::new_simple(number) else { return Ok(Number::Any) };
        info = again.dev_info();
        ctrl = again;
    }
    if u32::from(info.state) == sys::UBLK_S_DEV_LIVE && server_alive {
        return Err(ServeError::Namespace {
            nsid,
            reason: format!("/dev/ublkb{number} is served by process {}: stop it first", info.ublksrv_pid),
        });
    }
    let quiesced = u32::from(info.state) == sys::UBLK_S_DEV_QUIESCED && recoverable_device;
    if recoverable && quiesced && !server_alive && same_shape(&ctrl, geometry) {
        return Ok(Number::Recover(number));
    }
    Ok(if ctrl.del_dev().is_ok() { Number::Free(number) } else { Number::Any })
}

/// Whether the device `ctrl` controls has the namespace's size, block size and kind (zoned or not).
fn same_shape(ctrl: &UblkCtrl, geometry: &Geometry) -> bool {
    let mut params = sys::ublk_params::default();
    if ctrl.get_params(&mut params).is_err() {
        return false;
    }
    let sectors = (geometry.nsze_lba << geometry.lba_shift) >> 9;
    let zoned = params.types & sys::UBLK_PARAM_TYPE_ZONED != 0;
    params.basic.dev_sectors == sectors
        && u32::from(params.basic.logical_bs_shift) == geometry.lba_shift
        && zoned == (geometry.kind == NamespaceKind::Zoned)
}

/// Creates the block device of namespace `nsid` (or takes over the one `number` names) and serves its requests
/// until the device is stopped; `live` hears of it once it is up. A `recoverable` device outlives a killed
/// server: the kernel holds its requests (those the server had taken are sent again) until a new server takes
/// it over.
fn serve_namespace(
    nsid: u32,
    number: Number,
    recoverable: bool,
    host: RealTimeHost,
    trace: Option<Arc<HostTrace>>,
    live: &mpsc::Sender<Result<Served, ServeError>>,
) -> Result<(), ServeError> {
    let geometry = host.geometry();
    let ublk = |step| move |source| ServeError::Ublk { nsid, step, source };
    let zoned = geometry.kind == NamespaceKind::Zoned;
    let max_io_bytes = geometry
        .max_transfer_lba
        .map_or(DEFAULT_MAX_IO_BYTES, |blocks| (blocks << geometry.lba_shift).min(DEFAULT_MAX_IO_BYTES));
    if zoned && !geometry.zone_size_lba.is_power_of_two() {
        return Err(ServeError::Namespace {
            nsid,
            reason: format!(
                "its zone size ({} blocks) is not a power of two, which Linux requires of a zoned block device",
                geometry.zone_size_lba
            ),
        });
    }
    let mut flags = u64::from(sys::UBLK_F_USER_COPY);
    if zoned {
        flags |= u64::from(sys::UBLK_F_ZONED);
    }
    if recoverable {
        if UblkCtrl::get_features().is_none_or(|features| features & u64::from(sys::UBLK_F_USER_RECOVERY_REISSUE) == 0)
        {
            return Err(ServeError::NoRecovery);
        }
        flags |= u64::from(sys::UBLK_F_USER_RECOVERY | sys::UBLK_F_USER_RECOVERY_REISSUE);
    }
    let (id, dev_flags) = match number {
        Number::Any => (-1, UblkFlags::UBLK_DEV_F_ADD_DEV),
        Number::Free(number) => (number, UblkFlags::UBLK_DEV_F_ADD_DEV),
        Number::Recover(number) => {
            UblkCtrl::new_simple(number).and_then(|old| old.start_user_recover()).map_err(ublk("recovery"))?;
            (number, UblkFlags::UBLK_DEV_F_RECOVER_DEV)
        }
    };
    let name = format!("zonelab-ns{nsid}");
    let ctrl = UblkCtrlBuilder::default()
        .name(&name)
        .id(id)
        .nr_queues(1)
        .depth(QUEUE_DEPTH)
        .io_buf_bytes(max_io_bytes as u32)
        .ctrl_flags(flags)
        .dev_flags(dev_flags)
        .build()
        .map_err(ublk("device"))?;
    if zoned && ctrl.get_driver_features().is_none_or(|features| features & u64::from(sys::UBLK_F_ZONED) == 0) {
        return Err(ServeError::NoZonedUblk);
    }
    let target = move |dev: &mut UblkDev| {
        set_params(dev, &geometry, max_io_bytes);
        // One slot beyond the queue's requests for the doorbell's poll, and room for every completion at once.
        dev.tgt.extra_ios = 1;
        dev.tgt.sq_depth = QUEUE_DEPTH + 1;
        dev.tgt.cq_depth = 2 * QUEUE_DEPTH;
        Ok(())
    };
    let queue_host = host.clone();
    let queue = move |qid: u16, dev: &UblkDev| serve_queue(qid, dev, &queue_host, &geometry, trace.as_deref());
    let live = live.clone();
    let started = move |ctrl: &UblkCtrl| {
        let _ = live.send(Ok(Served { nsid, dev_id: ctrl.dev_info().dev_id, geometry }));
    };
    ctrl.run_target(target, queue, started).map_err(ublk("start"))?;
    if matches!(number, Number::Recover(_)) {
        // A device taken over is not deleted when its control goes, as one this server added is.
        let _ = ctrl.del_dev();
    }
    Ok(())
}

/// The block device's limits from the namespace's geometry, as the kernel's NVMe driver sets them from Identify.
fn set_params(dev: &mut UblkDev, geometry: &Geometry, max_io_bytes: u64) {
    let bytes = geometry.nsze_lba << geometry.lba_shift;
    dev.set_default_params(bytes);
    let params = &mut dev.tgt.params;
    let shift = geometry.lba_shift as u8;
    params.basic.logical_bs_shift = shift;
    params.basic.physical_bs_shift = shift.max(12);
    params.basic.io_min_shift = shift.max(12);
    params.basic.io_opt_shift = shift.max(12);
    params.basic.max_sectors = (max_io_bytes >> 9) as u32;
    match geometry.kind {
        NamespaceKind::Zoned => {
            let zone_sectors = (geometry.zone_size_lba << geometry.lba_shift) >> 9;
            let append_sectors = geometry
                .max_append_lba
                .map_or(max_io_bytes >> 9, |blocks| (blocks << geometry.lba_shift) >> 9)
                .min(max_io_bytes >> 9);
            params.types |= sys::UBLK_PARAM_TYPE_ZONED;
            params.basic.chunk_sectors = zone_sectors as u32;
            // ublk refuses a limit above the zone count (a device of fewer zones than its limits has none).
            params.zoned = sys::ublk_param_zoned {
                max_open_zones: geometry.max_open.min(geometry.zones),
                max_active_zones: geometry.max_active.min(geometry.zones),
                max_zone_append_sectors: append_sectors as u32,
                ..Default::default()
            };
        }
        NamespaceKind::Conventional => {
            params.types |= sys::UBLK_PARAM_TYPE_DISCARD;
            params.discard = sys::ublk_param_discard {
                discard_alignment: 0,
                discard_granularity: geometry.lba_size,
                // A whole number of blocks, so that the kernel never splits a discard off a block boundary.
                max_discard_sectors: (MAX_DISCARD_BYTES >> 9) as u32,
                max_write_zeroes_sectors: (MAX_DISCARD_BYTES >> 9) as u32,
                max_discard_segments: 1,
                ..Default::default()
            };
        }
    }
}

/// Serves one queue with up to `QUEUE_DEPTH` requests on the device at once, as a real drive's submission queue
/// takes them: each request is decoded and submitted to the device in the order the kernel sent it, and
/// completed when the device completes it. A command the device completes later wakes the queue through an
/// eventfd that the queue's io_uring polls (the extra tag `QUEUE_DEPTH`), since the device thread cannot
/// complete a ublk request itself.
fn serve_queue(qid: u16, dev: &UblkDev, host: &RealTimeHost, geometry: &Geometry, trace: Option<&HostTrace>) {
    let cdev = dev.tgt.fds[0];
    let doorbell = match Doorbell::new() {
        Ok(doorbell) => Arc::new(doorbell),
        Err(error) => {
            eprintln!("zonelab-ublk: queue {qid} of {} has no eventfd: {error}", dev.dev_info.dev_id);
            return;
        }
    };
    let queue = match UblkQueue::new(qid, dev)
        .and_then(|queue| queue.submit_fetch_commands_unified(BufDescList::Slices(None)))
    {
        Ok(queue) => queue,
        Err(error) => {
            eprintln!("zonelab-ublk: queue {qid} of {} did not start: {error}", dev.dev_info.dev_id);
            return;
        }
    };
    let track = format!("/dev/ublkb{} requests", dev.dev_info.dev_id);
    let request = Request { host, geometry, cdev, qid, trace: trace.map(|trace| (trace, track.as_str())) };
    let mut inflight: Vec<Option<(Pending, Finish, Option<IoSpan>)>> = (0..QUEUE_DEPTH).map(|_| None).collect();
    let wakers: Vec<Waker> =
        (0..QUEUE_DEPTH).map(|tag| Waker::from(Arc::new(TagWaker { tag, doorbell: Arc::clone(&doorbell) }))).collect();
    if let Err(error) = queue.ublk_submit_sqe_sync(doorbell.poll()) {
        eprintln!("zonelab-ublk: queue {qid} of {} cannot wait for its device: {error}", dev.dev_info.dev_id);
        return;
    }
    let complete = |queue: &UblkQueue, tag: u16, (result, appended): (i32, Option<u64>)| {
        let buffer = match appended {
            Some(sector) => BufDesc::ZonedAppendLba(sector),
            None => BufDesc::Slice(&[]),
        };
        if let Err(error) = queue.complete_io_cmd_unified(tag, buffer, Ok(UblkIORes::Result(result))) {
            eprintln!("zonelab-ublk: completing request {tag} failed: {error}");
        }
    };
    // Requests waiting on the device now, and the most at once: the queue depth the device saw.
    let (mut on_device, mut most_on_device) = (0u32, 0u32);
    queue.wait_and_handle_io(|queue: &UblkQueue, tag: u16, io: &UblkIOCtx| {
        if !io.is_tgt_io() {
            debug_assert!(inflight[usize::from(tag)].is_none(), "the kernel reuses a tag only once it completed");
            match request.start(tag, queue.get_iod(tag)) {
                Started::Done(done) => complete(queue, tag, done),
                Started::OnDevice(mut pending, finish, span) => {
                    match Pin::new(&mut pending).poll(&mut Context::from_waker(&wakers[usize::from(tag)])) {
                        Poll::Ready(result) => complete(queue, tag, request.finish(tag, finish, span, result)),
                        Poll::Pending => {
                            inflight[usize::from(tag)] = Some((pending, finish, span));
                            on_device += 1;
                            most_on_device = most_on_device.max(on_device);
                        }
                    }
                }
            }
            return;
        }
        debug_assert_eq!(tag, QUEUE_DEPTH, "the only target I/O is the doorbell's poll");
        for tag in doorbell.take_rung() {
            let Some((pending, _, _)) = inflight[usize::from(tag)].as_mut() else { continue };
            let Poll::Ready(result) = Pin::new(pending).poll(&mut Context::from_waker(&wakers[usize::from(tag)]))
            else {
                continue;
            };
            let (_, finish, span) = inflight[usize::from(tag)].take().expect("checked above");
            on_device -= 1;
            complete(queue, tag, request.finish(tag, finish, span, result));
        }
        if let Err(error) = queue.ublk_submit_sqe_sync(doorbell.poll()) {
            eprintln!("zonelab-ublk: queue {qid} cannot wait for its device again: {error}");
        }
    });
    eprintln!(
        "zonelab ublk: /dev/ublkb{}: at most {most_on_device} requests were waiting on the device at once",
        dev.dev_info.dev_id
    );
}

/// How a queue thread hears that the device thread has completed its commands: the tags whose futures are
/// ready, and an eventfd the queue's io_uring polls.
struct Doorbell {
    eventfd: OwnedFd,
    rung: Mutex<Vec<u16>>,
}

impl Doorbell {
    fn new() -> std::io::Result<Doorbell> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor that we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by eventfd and nothing else owns it.
        Ok(Doorbell { eventfd: unsafe { OwnedFd::from_raw_fd(fd) }, rung: Mutex::new(Vec::new()) })
    }

    /// The io_uring poll that completes once the doorbell has rung (a poll, not a read, so that no buffer of
    /// ours is in the kernel's hands when the queue ends).
    fn poll(&self) -> io_uring::squeue::Entry {
        io_uring::opcode::PollAdd::new(io_uring::types::Fd(self.eventfd.as_raw_fd()), libc::POLLIN as u32)
            .build()
            .user_data(UblkIOCtx::build_user_data(QUEUE_DEPTH, 0, 0, true))
    }

    fn ring(&self, tag: u16) {
        self.rung.lock().unwrap_or_else(PoisonError::into_inner).push(tag);
        let one = 1u64;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd we own; a full counter (never, at 2^64 - 2)
        // would only mean the queue is already woken.
        unsafe { libc::write(self.eventfd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// The tags rung since the last call, the eventfd cleared first: a ring after the clear is either in the
    /// list taken or sets the eventfd again for the next poll.
    fn take_rung(&self) -> Vec<u16> {
        let mut count = 0u64;
        // SAFETY: reads 8 bytes into a live u64 from an eventfd we own; EAGAIN (not rung) leaves it untouched.
        unsafe { libc::read(self.eventfd.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
        std::mem::take(&mut *self.rung.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The waker of one tag's command: rings its queue's doorbell with the tag.
struct TagWaker {
    tag: u16,
    doorbell: Arc<Doorbell>,
}

impl Wake for TagWaker {
    fn wake(self: Arc<Self>) {
        self.doorbell.ring(self.tag);
    }
}

/// A request taken from the kernel: done at once (refused, or completed as it was submitted), or on the device.
enum Started {
    Done((i32, Option<u64>)),
    /// On the device, with what its completion needs and, when traced, the request's span begun.
    OnDevice(Pending, Finish, Option<IoSpan>),
}

/// What a request's completion still needs once the device has answered.
#[derive(Clone, Copy)]
enum Finish {
    /// `bytes` moved, nothing to copy back (a write, a flush, a discard, a zone action reports 0).
    Done(i32),
    /// Copy the data read into the request's buffer.
    Read,
    /// Return the LBA the zone append landed at.
    Append(i32),
    /// Copy the zones into the request's buffer as the kernel's `struct blk_zone`s.
    Report,
}

/// What one request needs: the namespace, its geometry and where its data is copied.
struct Request<'a> {
    host: &'a RealTimeHost,
    geometry: &'a Geometry,
    cdev: RawFd,
    qid: u16,
    /// Where a traced server records its requests, and the block device's track.
    trace: Option<(&'a HostTrace, &'a str)>,
}

impl Request<'_> {
    /// Submits request `tag` to the device (a write's data copied in first).
    fn start(&self, tag: u16, iod: &sys::ublksrv_io_desc) -> Started {
        let op = iod.op_flags & 0xff;
        let shift = self.geometry.lba_shift;
        let slba = (iod.start_sector << 9) >> shift;
        let bytes = u64::from(iod.nr_sectors) << 9;
        let nlb = bytes >> shift;
        let submit = |command: QueuedCommand, finish| {
            let span = self.trace.and_then(|_| IoKind::of(&command, shift)).map(|(kind, lba, blocks)| {
                let now = self.host.now_ns();
                IoSpan { kind, lba, blocks, start_ns: now, issued_ns: now, end_ns: now, ok: true }
            });
            Started::OnDevice(self.host.submit_pending(command), finish, span)
        };
        let zone_send =
            |slba, action, select_all| submit(QueuedCommand::ZoneSend { slba, action, select_all }, Finish::Done(0));
        match op {
            sys::UBLK_IO_OP_READ => submit(QueuedCommand::Read { slba, nlb, keep: true }, Finish::Read),
            sys::UBLK_IO_OP_WRITE => match self.copy_in(tag, bytes) {
                Ok(data) => {
                    submit(QueuedCommand::Write { slba, data: IoData::Bytes(data) }, Finish::Done(bytes as i32))
                }
                Err(error) => Started::Done((error, None)),
            },
            sys::UBLK_IO_OP_ZONE_APPEND => match self.copy_in(tag, bytes) {
                Ok(data) => submit(
                    QueuedCommand::Append { zslba: slba, data: IoData::Bytes(data) },
                    Finish::Append(bytes as i32),
                ),
                Err(error) => Started::Done((error, None)),
            },
            sys::UBLK_IO_OP_FLUSH => submit(QueuedCommand::Flush, Finish::Done(0)),
            sys::UBLK_IO_OP_DISCARD => submit(QueuedCommand::Deallocate { slba, nlb }, Finish::Done(0)),
            sys::UBLK_IO_OP_WRITE_ZEROES => submit(QueuedCommand::WriteZeroes { slba, nlb }, Finish::Done(0)),
            sys::UBLK_IO_OP_REPORT_ZONES => {
                let max_zones = iod.nr_sectors;
                submit(
                    QueuedCommand::Report { slba, filter: ReportFilter::All, partial: true, max_zones },
                    Finish::Report,
                )
            }
            sys::UBLK_IO_OP_ZONE_OPEN => zone_send(slba, ZoneSendAction::Open, false),
            sys::UBLK_IO_OP_ZONE_CLOSE => zone_send(slba, ZoneSendAction::Close, false),
            sys::UBLK_IO_OP_ZONE_FINISH => zone_send(slba, ZoneSendAction::Finish, false),
            sys::UBLK_IO_OP_ZONE_RESET => zone_send(slba, ZoneSendAction::Reset, false),
            sys::UBLK_IO_OP_ZONE_RESET_ALL => zone_send(0, ZoneSendAction::Reset, true),
            _ => Started::Done((-libc::EOPNOTSUPP, None)),
        }
    }

    /// Request `tag`'s completion from the device's answer: the bytes done (or a negative errno), and zone
    /// append's sector.
    fn finish(
        &self,
        tag: u16,
        finish: Finish,
        span: Option<IoSpan>,
        result: Result<Output, Status>,
    ) -> (i32, Option<u64>) {
        if let (Some((trace, track)), Some(span)) = (self.trace, span) {
            trace.io(track, IoSpan { end_ns: self.host.now_ns(), ok: result.is_ok(), ..span });
        }
        let output = match result {
            Ok(output) => output,
            Err(status) => return (errno(status), None),
        };
        match (finish, output) {
            (Finish::Done(bytes), _) => (bytes, None),
            (Finish::Read, Output::Data(data)) => (self.copy_out(tag, &data), None),
            (Finish::Append(bytes), Output::Appended(lba)) => (bytes, Some((lba << self.geometry.lba_shift) >> 9)),
            (Finish::Report, Output::Report(report)) => {
                let mut bytes = Vec::with_capacity(report.zones.len() * BLK_ZONE_BYTES);
                for zone in &report.zones {
                    bytes.extend_from_slice(&blk_zone(zone, self.geometry.lba_shift));
                }
                (self.copy_out(tag, &bytes), None)
            }
            _ => (-libc::EIO, None),
        }
    }

    /// Copies `data` into the request's buffer; gives the bytes copied or a negative errno.
    fn copy_out(&self, tag: u16, data: &[u8]) -> i32 {
        let at = UblkIOCtx::ublk_user_copy_pos(self.qid, tag, 0);
        // SAFETY: `data` is a live slice of `data.len()` bytes; pwrite only reads it.
        let written = unsafe { libc::pwrite(self.cdev, data.as_ptr().cast(), data.len(), at as libc::off_t) };
        if written < 0 {
            -std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
        } else {
            written as i32
        }
    }

    /// The request's `bytes` of data, or a negative errno.
    fn copy_in(&self, tag: u16, bytes: u64) -> Result<Vec<u8>, i32> {
        let mut data = vec![0u8; bytes as usize];
        let at = UblkIOCtx::ublk_user_copy_pos(self.qid, tag, 0);
        // SAFETY: `data` is a live buffer of `data.len()` bytes, which pread fills.
        let read = unsafe { libc::pread(self.cdev, data.as_mut_ptr().cast(), data.len(), at as libc::off_t) };
        if read < 0 {
            return Err(-std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
        }
        if read as u64 != bytes {
            return Err(-libc::EIO);
        }
        Ok(data)
    }
}

/// The size of the kernel's `struct blk_zone` (include/uapi/linux/blkzoned.h).
pub const BLK_ZONE_BYTES: usize = 64;

/// A zone as the kernel's `struct blk_zone` lays it out, in 512-byte sectors: start, len, wp (le64), type,
/// cond, non_seq, reset, 4 reserved bytes, capacity (le64), 24 reserved bytes. A full zone's write pointer is
/// its end, and so is that of a zone without one (read-only, offline), as the kernel's NVMe driver reports them.
pub fn blk_zone(zone: &ZoneDescriptor, lba_shift: u32) -> [u8; BLK_ZONE_BYTES] {
    let sectors = |lba: u64| (lba << lba_shift) >> 9;
    let start = sectors(zone.start_lba);
    let len = sectors(zone.size_lba);
    let wp = match (zone.state, zone.wp_lba()) {
        (ZoneState::Full, _) | (_, None) => start + len,
        (_, Some(wp)) => sectors(wp),
    };
    let mut bytes = [0u8; BLK_ZONE_BYTES];
    bytes[0..8].copy_from_slice(&start.to_le_bytes());
    bytes[8..16].copy_from_slice(&len.to_le_bytes());
    bytes[16..24].copy_from_slice(&wp.to_le_bytes());
    bytes[24] = sys::BLK_ZONE_TYPE_SEQWRITE_REQ as u8;
    bytes[25] = zone.state as u8;
    bytes[32..40].copy_from_slice(&sectors(zone.capacity_lba).to_le_bytes());
    bytes
}

/// The errno the kernel's NVMe driver makes of a status (`nvme_error_status`): the open and active limits
/// have block-layer statuses of their own (BLK_STS_ZONE_OPEN_RESOURCE and BLK_STS_ZONE_ACTIVE_RESOURCE,
/// ETOOMANYREFS and EOVERFLOW in ublk's errno), an unsupported command is EOPNOTSUPP, a bad field EINVAL, and
/// everything else (the zone boundary, full, read-only, offline and invalid-write errors among them) is EIO.
pub fn errno(status: Status) -> i32 {
    -match status {
        Status::TooManyOpenZones => libc::ETOOMANYREFS,
        Status::TooManyActiveZones => libc::EOVERFLOW,
        Status::InvalidOpcode => libc::EOPNOTSUPP,
        Status::InvalidField => libc::EINVAL,
        _ => libc::EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zone_is_laid_out_as_the_kernels_blk_zone() {
        let zone = ZoneDescriptor {
            index: 3,
            state: ZoneState::ImplicitlyOpened,
            attrs: 0,
            start_lba: 3 * 256,
            size_lba: 256,
            capacity_lba: 200,
            wp_lba: 3 * 256 + 10,
        };
        let bytes = blk_zone(&zone, 12);
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        assert_eq!((word(0), word(8), word(16), word(32)), (3 * 256 * 8, 256 * 8, (3 * 256 + 10) * 8, 200 * 8));
        assert_eq!((bytes[24], bytes[25]), (2, 2), "sequential write required, implicitly open");
        let full = ZoneDescriptor { state: ZoneState::Full, wp_lba: 3 * 256 + 200, ..zone };
        let bytes = blk_zone(&full, 12);
        assert_eq!(
            u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes")),
            4 * 256 * 8,
            "a full zone's wp is its end"
        );
    }

    #[test]
    fn statuses_become_the_errnos_of_the_kernels_nvme_driver() {
        assert_eq!(errno(Status::ZoneInvalidWrite), -libc::EIO);
        assert_eq!(errno(Status::ZoneBoundaryError), -libc::EIO);
        assert_eq!(errno(Status::ZoneIsFull), -libc::EIO);
        assert_eq!(errno(Status::TooManyOpenZones), -libc::ETOOMANYREFS);
        assert_eq!(errno(Status::TooManyActiveZones), -libc::EOVERFLOW);
    }
}

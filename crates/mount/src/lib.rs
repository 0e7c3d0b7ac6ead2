//! # zonelab-mount: the zonefs-compatible FUSE mount
//!
//! A front end (layer 7 of docs/design.md): every zone of an emulated ZNS device is a file `seq/N`, with the
//! behaviour of Linux zonefs (kernel `Documentation/filesystems/zonefs.rst`), so that fio, dd, shell scripts and
//! programs written for zonefs run on any preset or image. The device runs in real time: a reply goes back
//! to the kernel only when the device model completes the command.
//!
//! Where it differs from zonefs, and why:
//! - every zone is a file, `seq/0` included: zonelab has no on-disk superblock (mkzonefs writes one into the
//!   first zone); the options come from the mount command instead;
//! - `cnv/0` is the device's conventional namespace, when it has one (a ZNS drive's namespaces have no
//!   conventional zones; zonefs aggregates a device's conventional zones into `cnv/0`, and this is the
//!   closest thing a ZNS drive has), randomly writable, its size fixed;
//! - every file is opened in FUSE's direct I/O mode, so reads bypass the page cache too (zonefs caches reads
//!   that are not O_DIRECT): the device's timing is what a program sees;
//! - `statfs` reports FUSE's magic number, not zonefs's;
//! - without `async-dio`, FUSE serves one thread's asynchronous direct I/Os one at a time (with it, Linux turns a
//!   short asynchronous write into EIO); faults and writes behind the mount's back come through its control
//!   channel (`control.rs`).

mod cnv;
mod completions;
mod fs;
mod options;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use options::{ErrorsPolicy, MountOptions, OptionError};
use zonelab_device::DeviceBuilder;
use zonelab_host::trace::HostTrace;
use zonelab_runtime::control::ControlChannel;
use zonelab_runtime::{block_on, Placement, RealTime, StartError, Stopped};
use zonelab_zns::Status;

/// Why a mount failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
    #[error(transparent)]
    Device(#[from] StartError),
    #[error("the zone report at mount failed: {0}")]
    Report(Status),
    #[error("cannot mount on {mountpoint}: {source}")]
    Fuse { mountpoint: String, source: std::io::Error },
    #[error("cannot listen on the control socket {path}: {source}")]
    Control { path: String, source: std::io::Error },
    /// What `mount` refuses too: a mountpoint that is no directory (ENOTDIR), or one that is not empty (its
    /// files would be hidden) unless `nonempty` says so.
    #[error("cannot mount on {mountpoint}: {reason}")]
    Mountpoint { mountpoint: String, reason: String },
    /// `trace=PATH` that cannot be written: refused before the mount, not found out when the trace is lost.
    #[error("trace {}: {source}", path.display())]
    Trace { path: std::path::PathBuf, source: std::io::Error },
}

/// Refuses a mountpoint that `mount` would refuse, or that would hide files.
fn check_mountpoint(mountpoint: &Path, nonempty: bool) -> Result<(), MountError> {
    let refuse = |reason: String| MountError::Mountpoint { mountpoint: mountpoint.display().to_string(), reason };
    let metadata = std::fs::metadata(mountpoint).map_err(|error| refuse(error.to_string()))?;
    if !metadata.is_dir() {
        return Err(refuse(std::io::Error::from_raw_os_error(libc::ENOTDIR).to_string()));
    }
    let mut entries = std::fs::read_dir(mountpoint).map_err(|error| refuse(error.to_string()))?;
    if !nonempty && entries.next().is_some() {
        return Err(refuse("the directory is not empty (mount -o nonempty to hide what it holds)".into()));
    }
    Ok(())
}

/// A mounted device: the FUSE session and the device thread behind it.
pub struct Mounted {
    session: fuser::Session<fs::ZonefsMount>,
    device: RealTime,
    control: Option<ControlChannel>,
    files: u32,
    conventional_bytes: Option<u64>,
    /// Where a traced mount's trace goes, and its requests.
    trace: Option<(PathBuf, Arc<HostTrace>)>,
}

/// Unmounts a mount from another thread (a signal handler's, say).
pub struct Unmounter(fuser::SessionUnmounter);

impl Unmounter {
    pub fn unmount(&mut self) -> std::io::Result<()> {
        self.0.unmount()
    }
}

impl Mounted {
    /// Opens the device on a real-time device thread placed as `placement` says, reads every zone's write
    /// pointer (a file's size, as zonefs does at mount) and mounts the file system on `mountpoint`. Serve
    /// requests with `run`.
    pub fn mount(
        builder: DeviceBuilder,
        placement: Placement,
        device_name: &str,
        mountpoint: &Path,
        options: MountOptions,
    ) -> Result<Mounted, MountError> {
        check_mountpoint(mountpoint, options.nonempty)?;
        if let Some(path) = &options.trace {
            zonelab_host::trace::prepare_trace(path)
                .map_err(|source| MountError::Trace { path: path.clone(), source })?;
        }
        let device = RealTime::start_placed(builder, placement)?;
        let trace = options.trace.clone().map(|path| {
            device.enable_trace();
            (path, Arc::new(HostTrace::default()))
        });
        let host = device.host();
        let files = block_on(zonelab_host::read_files(&host)).map_err(MountError::Report)?;
        let conventional = host.stats().and_then(|stats| host.on_namespace(stats.conventional?.nsid));
        let conventional_bytes = conventional.as_ref().map(|cnv| {
            let geometry = zonelab_runtime::CommandQueue::geometry(cnv);
            geometry.nsze_lba << geometry.lba_shift
        });
        let count = files.len() as u32;
        let mut mount_options = vec![
            // The source /proc/mounts shows, so that tools listing zoned mounts can tell which device it is.
            fuser::MountOption::FSName(format!("zonelab:{device_name}")),
            fuser::MountOption::Subtype("zonefs".into()),
            fuser::MountOption::DefaultPermissions,
            fuser::MountOption::NoAtime,
        ];
        if options.read_only {
            mount_options.push(fuser::MountOption::RO);
        }
        let mut config = fuser::Config::default();
        config.mount_options = mount_options;
        let poll = options.poll;
        let control = match &options.control {
            Some(path) => Some(
                ControlChannel::start(path, host.clone())
                    .map_err(|source| MountError::Control { path: path.display().to_string(), source })?,
            ),
            None => None,
        };
        let requests = trace.as_ref().map(|(_, requests)| Arc::clone(requests));
        let filesystem = fs::ZonefsMount::new(host, files, conventional, options, requests);
        let fuse_error = |source| MountError::Fuse { mountpoint: mountpoint.display().to_string(), source };
        let before = fuse_descriptors().map_err(fuse_error)?;
        let session = fuser::Session::new(filesystem, mountpoint, &config).map_err(fuse_error)?;
        if poll {
            for fd in fuse_descriptors().map_err(fuse_error)?.difference(&before) {
                set_nonblocking(*fd).map_err(fuse_error)?;
            }
        }
        Ok(Mounted { session, device, control, files: count, conventional_bytes, trace })
    }

    /// How many files `seq/` holds.
    pub fn files(&self) -> u32 {
        self.files
    }

    /// The size of `cnv/0`, when the device has a conventional namespace.
    pub fn conventional_bytes(&self) -> Option<u64> {
        self.conventional_bytes
    }

    pub fn unmounter(&mut self) -> Unmounter {
        Unmounter(self.session.unmount_callable())
    }

    /// Serves the kernel's requests until the file system is unmounted, then lets every command in flight
    /// complete, stops the device and flushes it: every completed write is durable in an image. A traced mount
    /// then writes its trace.
    pub fn run(self) -> std::io::Result<Stopped> {
        let served = self.session.run();
        drop(self.control);
        let trace = self.trace;
        let (stopped, written) = self.device.stop_then(|device| match &trace {
            Some((path, requests)) => requests.write(path, "zonefs mount", &[], device).map_err(|error| {
                std::io::Error::new(
                    error.kind(),
                    format!("the trace could not be written to {}: {error}", path.display()),
                )
            }),
            None => Ok(()),
        });
        served.and(written).map(|()| stopped)
    }
}

/// This process's open descriptors of the FUSE device. fuser does not hand out the one a session reads, so
/// the mount takes the one that appeared with the session (a process mounts once).
pub fn fuse_descriptors() -> std::io::Result<std::collections::BTreeSet<i32>> {
    let mut found = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let entry = entry?;
        if std::fs::read_link(entry.path()).is_ok_and(|target| target == Path::new("/dev/fuse")) {
            if let Ok(fd) = entry.file_name().to_string_lossy().parse() {
                found.insert(fd);
            }
        }
    }
    Ok(found)
}

/// A non-blocking FUSE descriptor makes fuser's request loop retry its read at once (it retries EAGAIN)
/// instead of sleeping until the kernel wakes it: a polling loop.
pub fn set_nonblocking(fd: i32) -> std::io::Result<()> {
    // SAFETY: F_GETFL and F_SETFL on a descriptor this process holds open; no memory is passed.
    let done = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) >= 0
    };
    if done {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

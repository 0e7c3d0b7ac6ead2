//! `zonelab mount`: the zonefs-compatible FUSE mount, in the foreground until it is unmounted (`fusermount3
//! -u`, `umount`, or Ctrl-C / SIGTERM, which unmount it), then the device is flushed.

use std::path::{Path, PathBuf};

use zonelab_device::{BuildError, DeviceBuilder, DeviceSpec, HostPath, StoreChoice};
use zonelab_mount::{MountError, MountOptions, Mounted};
use zonelab_runtime::control::{control_request, from_hex, ControlReply, CONTROL_SOCKET};
use zonelab_runtime::{Placement, StartError};
use zonelab_zns::{ByteSize, ReportFilter, ZoneReport};

use crate::CliError;

#[derive(Debug, clap::Args)]
pub struct MountArgs {
    /// A device image, or preset:NAME[,key=value...] (kept in memory: gone at unmount); either may carry the
    /// device thread's placement (device-cpu=, device-sched=, device-wait=, device-placement=).
    device: String,
    /// An existing empty directory (or, with `-o nonempty`, any directory).
    mountpoint: PathBuf,
    /// zonefs's mount options: errors=remount-ro|zone-ro|zone-offline|repair, explicit-open, uid=, gid=,
    /// perm=, ro; and poll (the request loop polls instead of sleeping: lower latency, a busy core),
    /// control=PATH (the control channel's socket, by default IMAGE/control.sock for an image: zonelab inject
    /// and zonelab write reach the mounted device through it),
    /// nonempty (mount over a directory that holds files), async-dio (libaio and io_uring reads of one thread in
    /// flight together; a write crossing a zone's capacity then fails with EIO instead of being cut short, as
    /// Linux's FUSE has it) and the device thread's placement (device-cpu=N,
    /// device-sched=fifo|normal, device-wait=adaptive|poll, device-placement=strict|best-effort).
    #[arg(short = 'o', default_value = "")]
    options: String,
}

pub fn run(args: &MountArgs) -> Result<(), CliError> {
    let (spec, trace) = zonelab_host::trace::split_trace_option(&args.device);
    let (spec, mut placement) = Placement::split_spec(&spec).map_err(CliError::Usage)?;
    let mut zonefs_options = Vec::new();
    for option in args.options.split(',').filter(|option| !option.is_empty()) {
        let taken = match option.split_once('=') {
            Some((key, value)) => placement.set(key, value).map_err(CliError::Usage)?,
            None => false,
        };
        if !taken {
            zonefs_options.push(option);
        }
    }
    let mut options: MountOptions = zonefs_options
        .join(",")
        .parse()
        .map_err(|error: zonelab_mount::OptionError| CliError::Usage(error.to_string()))?;
    options.trace = options.trace.or(trace);
    let device = DeviceSpec::parse(&spec);
    // An image's control channel is found beside its files: `zonelab inject IMAGE` and `zonelab write IMAGE`
    // reach the mounted device through it.
    if let (DeviceSpec::Image(image), None) = (&device, &options.control) {
        options.control = Some(image.join(CONTROL_SOCKET));
    }
    // Signals are taken by one thread, with sigwait; every thread started from here on inherits the mask.
    let signals = zonelab_runtime::block_termination_signals();
    // The mount pays the FUSE and kernel cost for real, so the device model adds no host path of its own.
    let builder = DeviceBuilder::new(device).host(HostPath::Spdk).store(StoreChoice::Memory);
    let mut mounted =
        Mounted::mount(builder, placement, &spec, &args.mountpoint, options).map_err(|error| match error {
            MountError::Device(StartError::Build(BuildError::Config { .. } | BuildError::Namespace { .. })) => {
                CliError::Config(error.to_string())
            }
            MountError::Device(StartError::Placement(_)) => CliError::Usage(error.to_string()),
            MountError::Mountpoint { .. } => CliError::Usage(error.to_string()),
            other => CliError::Failed(other.to_string()),
        })?;
    let mut unmounter = mounted.unmounter();
    std::thread::Builder::new()
        .name("zonelab-signals".into())
        .spawn(move || {
            let mut signal = 0;
            // SAFETY: `signals` is a valid, initialised set; sigwait writes one signal number.
            if unsafe { libc::sigwait(&signals, &mut signal) } == 0 {
                let _ = unmounter.unmount();
            }
        })
        .map_err(|error| CliError::Io(PathBuf::from("<signal thread>"), error))?;
    let cnv = mounted.conventional_bytes().map_or(String::new(), |bytes| format!(", cnv/0 of {}", ByteSize(bytes)));
    eprintln!("zonelab mount: {} on {}: {} files in seq/{cnv}", spec, args.mountpoint.display(), mounted.files());
    let stopped = mounted.run().map_err(|error| CliError::Io(args.mountpoint.clone(), error))?;
    stopped.flushed?;
    let pacing = stopped.pacing.summary();
    eprintln!("zonelab mount: unmounted {}; device flushed; {}", args.mountpoint.display(), pacing.line());
    if let Some(warning) = pacing.warning() {
        eprintln!("zonelab mount: {warning}");
    }
    Ok(())
}

/// Sends `request` to the live device serving `image` (a mount or a ublk server: `image` itself when it is a
/// control socket, else the socket in the image's directory); None when nothing listens there, so that the
/// command opens the image itself (a socket a killed server left behind refuses connections).
pub(crate) fn through_control_socket(image: &Path, request: &str) -> Option<Result<String, CliError>> {
    let is_socket =
        std::fs::metadata(image).is_ok_and(|meta| std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()));
    let socket = if is_socket { image.to_path_buf() } else { image.join(CONTROL_SOCKET) };
    if !socket.exists() {
        return None;
    }
    match control_request(&socket, request) {
        Ok(ControlReply::Ok(answer)) => Some(Ok(answer)),
        Ok(ControlReply::Refused(status)) => Some(Err(CliError::Device(status))),
        Ok(ControlReply::Error(message)) => Some(Err(CliError::Usage(message))),
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused && !is_socket => None,
        Err(error) => Some(Err(CliError::Io(socket, error))),
    }
}

/// The LBA size, MDTS and zone size (in LBAs) a mount's `geometry` answer gives.
pub(crate) fn geometry(answer: &str) -> Result<(u64, u64, u64), CliError> {
    let mut numbers = answer.split_whitespace().map(str::parse::<u64>);
    match (numbers.next(), numbers.next(), numbers.next()) {
        (Some(Ok(lba_size)), Some(Ok(mdts)), Some(Ok(zone_size_lba))) => Ok((lba_size, mdts, zone_size_lba)),
        _ => Err(CliError::Failed(format!("the mount answered '{answer}' for its geometry"))),
    }
}

/// A zone report of the mounted device serving `image`, and its LBA size; None when no mount listens there.
pub(crate) fn report(
    image: &Path,
    slba: u64,
    filter: ReportFilter,
    partial: bool,
    count: Option<usize>,
) -> Option<Result<(ZoneReport, u32), CliError>> {
    let answer = through_control_socket(image, "geometry")?;
    Some(answer.and_then(|answer| {
        let (lba_size, _, zone_size_lba) = geometry(&answer)?;
        let max_zones = count.map_or(u32::MAX, |count| u32::try_from(count).unwrap_or(u32::MAX));
        let request = format!("report {slba} {} {} {max_zones}", filter as u8, u8::from(partial));
        let answer = through_control_socket(image, &request).unwrap_or_else(|| Err(gone(image)))?;
        let report = from_hex(&answer)
            .and_then(|buf| ZoneReport::decode(&buf, zone_size_lba))
            .ok_or_else(|| CliError::Failed("the mount's zone report does not decode".into()))?;
        Ok((report, lba_size as u32))
    }))
}

/// The mount went away between two requests.
pub(crate) fn gone(image: &Path) -> CliError {
    CliError::Failed(format!("the mount of {} went away", image.display()))
}

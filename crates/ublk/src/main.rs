//! `zonelab-ublk` (also run as `zonelab ublk`): serve a device spec as one Linux block device per namespace,
//! in the foreground until SIGINT or SIGTERM, or until `zonelab ublk del N` deletes one of its devices; the
//! devices are then removed and the device flushed (an image keeps its data).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use std::sync::Arc;
use zonelab_device::{BuildError, DeviceBuilder, DeviceSpec, HostPath, StoreChoice};

use zonelab_host::trace::HostTrace;
use zonelab_runtime::control::{ControlChannel, CONTROL_SOCKET};
use zonelab_runtime::{Placement, RealTime, StartError};
use zonelab_ublk::Server;

#[derive(Parser)]
#[command(name = "zonelab ublk", about = "Every namespace of a zonelab device as a Linux block device (ublk)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve DEVICE (an image, or preset:NAME[,key=value...]) until SIGINT or SIGTERM: one /dev/ublkbN per
    /// namespace, named on standard output as each comes up. Needs Linux's ublk_drv (6.6 or newer for a zoned
    /// namespace) and the privilege to create block devices.
    Serve {
        /// An image directory or a preset spec, with device-cpu=, device-wait= and trace= as for `zonelab
        /// mount`. An image's live device takes `zonelab inject` and `zonelab write` through IMAGE/control.sock.
        device: String,
        /// Let the devices outlive a killed server (ublk's user recovery): the kernel holds their requests
        /// until the next `serve` of the same image takes them over, so that a mounted file system carries on.
        /// Without a new server those requests wait until the devices are deleted (`zonelab ublk del N`).
        #[arg(long)]
        recoverable: bool,
    },
    /// Delete block device /dev/ublkbN: its server removes its other devices and stops; a device whose server
    /// is gone (killed, or a recoverable one waiting for a new server) is deleted at once.
    Del {
        /// The N of /dev/ublkbN.
        id: u32,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve { device, recoverable } => serve(&device, recoverable),
        Command::Del { id } => zonelab_ublk::delete(id).map_err(|error| (1, error.to_string())),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, message)) => {
            eprintln!("error: {message}");
            ExitCode::from(code)
        }
    }
}

/// The file beside an image's files that keeps its namespaces' ublk device numbers.
const DEVICE_NUMBERS: &str = "ublk-devices";

fn serve(spec: &str, recoverable: bool) -> Result<(), (u8, String)> {
    let (spec, placement) = Placement::split_spec(spec).map_err(|error| (2, error))?;
    let (spec, trace) = zonelab_host::trace::split_trace_option(&spec);
    if let Some(path) = &trace {
        zonelab_host::trace::prepare_trace(path).map_err(|error| (2, format!("trace {}: {error}", path.display())))?;
    }
    // Signals are taken by one thread with sigwait; every thread started from here on inherits the mask.
    let signals = zonelab_runtime::block_termination_signals();
    // The kernel's block layer and ublk cost what they cost for real: the model adds no host path of its own.
    let device_spec = DeviceSpec::parse(&spec);
    // An image keeps its namespaces' device numbers beside it, so that a restarted server gives the same devices.
    let numbers = match &device_spec {
        DeviceSpec::Image(image) => Some(image.join(DEVICE_NUMBERS)),
        _ => None,
    };
    let builder = DeviceBuilder::new(device_spec).host(HostPath::Spdk).store(StoreChoice::Memory);
    let device = RealTime::start_placed(builder, placement).map_err(|error| match error {
        StartError::Build(BuildError::Config { .. } | BuildError::Namespace { .. }) | StartError::Placement(_) => {
            (2, error.to_string())
        }
        other => (1, other.to_string()),
    })?;
    let requests = trace.as_ref().map(|_| {
        device.enable_trace();
        Arc::new(HostTrace::default())
    });
    let mut server = match Server::start(&device, numbers.as_deref(), recoverable, requests.clone()) {
        Ok(server) => server,
        Err(error) => {
            let _ = device.stop();
            return Err((1, error.to_string()));
        }
    };
    // An image's live device takes `zonelab inject IMAGE` and `zonelab write IMAGE` through its control socket,
    // as a mounted image does.
    let control = match &numbers {
        Some(numbers) => {
            let path = numbers.with_file_name(CONTROL_SOCKET);
            match ControlChannel::start(&path, device.host()) {
                Ok(control) => Some(control),
                Err(error) => {
                    server.stop();
                    let _ = device.stop();
                    return Err((1, format!("control socket {}: {error}", path.display())));
                }
            }
        }
        None => None,
    };
    for served in server.served() {
        println!("zonelab ublk: {}", served.describe());
    }
    let (stop_tx, stop) = std::sync::mpsc::channel();
    let signalled = stop_tx.clone();
    std::thread::Builder::new()
        .name("zonelab-signals".into())
        .spawn(move || {
            let mut signal = 0;
            // SAFETY: `signals` is a valid, initialised set; sigwait writes one signal number.
            if unsafe { libc::sigwait(&signals, &mut signal) } == 0 {
                let _ = signalled.send(format!("signal {signal}"));
            }
        })
        .map_err(|error| (1, format!("cannot start the signal thread: {error}")))?;
    if let Some(ends) = server.take_ends() {
        let deleted = stop_tx.clone();
        std::thread::spawn(move || {
            if let Ok(nsid) = ends.recv() {
                let _ = deleted.send(format!("namespace {nsid}'s device was deleted"));
            }
        });
    }
    let why = stop.recv().unwrap_or_default();
    eprintln!("zonelab ublk: stopping ({why})");
    server.stop();
    drop(control);
    let (stopped, written) = device.stop_then(|device| match (&trace, &requests) {
        (Some(path), Some(requests)) => requests
            .write(path, "zonelab ublk", &[], device)
            .map_err(|error| (1, format!("the trace could not be written to {}: {error}", path.display()))),
        _ => Ok(()),
    });
    stopped.flushed.map_err(|status| (1, format!("the device's flush at stop failed: {status}")))?;
    written?;
    let pacing = stopped.pacing.summary();
    eprintln!("zonelab ublk: devices removed; device flushed; {}", pacing.line());
    if let Some(warning) = pacing.warning() {
        eprintln!("zonelab ublk: {warning}");
    }
    Ok(())
}

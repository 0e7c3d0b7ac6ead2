//! The control channel of a live real-time device: a Unix socket through which `zonelab inject` and `zonelab
//! write` reach the device under a mounted file system or behind the kernel's block devices, as null_blk's
//! configfs (`zone_readonly`, `zone_offline`), dm-error and plain writes to the block device reach a device under
//! a mounted zonefs. It is how run-time error handling (zonefs's `errors=` option, a file system on a ublk device)
//! is tested here as on Linux (zonefs-tools' cases that change the device behind a mount). The mount and the ublk
//! server each open one (by default `IMAGE/control.sock` for an image).
//!
//! One request per connection, one line each way:
//! - `geometry`: answered `ok LBA_SIZE MDTS_BYTES ZONE_SIZE_LBA` (MDTS 0: no limit), what a client needs to build
//!   a write or read a report
//! - `report SLBA FILTER PARTIAL MAX_ZONES`: a Zone Management Receive (FILTER the report's ZRASF value, 0 for all;
//!   PARTIAL 0 or 1), answered `ok HEX` with the report as the device lays it out
//! - `inject ZONE read-only|offline|io-error`
//! - `write LBA HEX`: a Write of the bytes HEX spells (whole blocks) at LBA, behind the file system's back
//!
//! answered `ok` (with the answer, if any), `status CODE` (the device refused the command with NVMe status CODE) or `error MESSAGE` (the
//! request cannot be carried out: a bad zone, malformed data).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{block_on, IoData, Output, QueuedCommand, RealTimeHost};
use zonelab_device::ZoneFault;
use zonelab_zns::{ReportFilter, Status, REPORT_HEADER_BYTES, ZONE_DESCRIPTOR_BYTES};

/// The control socket of a served image, in the image's directory.
pub const CONTROL_SOCKET: &str = "control.sock";

/// What the device's front end answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlReply {
    /// Done; the answer to a question (`geometry`), empty otherwise.
    Ok(String),
    /// The device refused the command.
    Refused(Status),
    /// The request could not be carried out, and why.
    Error(String),
}

/// The listening side, served by a thread of its own until dropped; the socket file goes with it.
pub struct ControlChannel {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlChannel {
    /// Listens on `path` for requests to `host`'s device (see [`listen`] for what may already be there).
    pub fn start(path: &Path, host: RealTimeHost) -> io::Result<ControlChannel> {
        let listener = listen(path)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("zonelab-control".into()).spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                // A client that goes away mid-request loses its answer; the device goes on. Only its server's own
                // user (or root) may drive the device: the socket is 0600, and its peer is checked as well, since
                // a client may have connected in the moment between the bind and the chmod.
                if let Ok(stream) = stream.and_then(|stream| peer_may_drive(&stream).map(|()| stream)) {
                    let _ = serve(stream, &host);
                }
            }
        })?;
        Ok(ControlChannel { path: path.to_path_buf(), stop, thread: Some(thread) })
    }
}

impl Drop for ControlChannel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees `stop`.
        let _ = UnixStream::connect(&self.path);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// How long a client may take to send its request: a silent one must not hold the device's other clients (or
/// the unmount) behind it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest request line: a `write` of 1 MiB in hex, with its words.
const MAX_REQUEST_BYTES: u64 = 2 * 1024 * 1024 + 64;

/// Binds the control socket at `path`, readable and writable by the server's user alone. What is already at `path`
/// is replaced only when it is a socket nobody answers (left by a mount that died); anything else (a user's file,
/// a live server's socket) is refused, naming it, and left as it is.
fn listen(path: &Path) -> io::Result<UnixListener> {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if !metadata.file_type().is_socket() => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; the control channel replaces only a stale socket",
                    path.display()
                ),
            ));
        }
        Ok(_) if UnixStream::connect(path).is_ok() => {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{} is the control socket of a running mount", path.display()),
            ));
        }
        Ok(_) => std::fs::remove_file(path)?,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Accepts a client run by the server's own user or by root, refuses any other (SO_PEERCRED).
fn peer_may_drive(stream: &UnixStream) -> io::Result<()> {
    let mut credentials = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut length = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED fills a `ucred` of the length given, on a socket this function borrows.
    let result = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut credentials as *mut libc::ucred).cast(),
            &mut length,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: geteuid has no preconditions.
    let own = unsafe { libc::geteuid() };
    if credentials.uid == own || credentials.uid == 0 {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("user {} may not drive this mount", credentials.uid),
        ))
    }
}

fn serve(stream: UnixStream, host: &RealTimeHost) -> io::Result<()> {
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&stream).take(MAX_REQUEST_BYTES)).read_line(&mut line)?;
    if !line.ends_with('\n') {
        let reply = format!("error the request must be one line of at most {MAX_REQUEST_BYTES} bytes\n");
        return (&stream).write_all(reply.as_bytes());
    }
    let reply = match execute(line.trim_end(), host) {
        ControlReply::Ok(answer) if answer.is_empty() => "ok".to_string(),
        ControlReply::Ok(answer) => format!("ok {answer}"),
        ControlReply::Refused(status) => format!("status {}", status.code()),
        ControlReply::Error(message) => format!("error {message}"),
    };
    (&stream).write_all(format!("{reply}\n").as_bytes())
}

fn execute(request: &str, host: &RealTimeHost) -> ControlReply {
    let words: Vec<&str> = request.split_whitespace().collect();
    match words.as_slice() {
        ["geometry"] => {
            let geometry = crate::CommandQueue::geometry(host);
            let mdts_bytes = geometry.max_transfer_lba.map_or(0, |blocks| blocks << geometry.lba_shift);
            ControlReply::Ok(format!("{} {mdts_bytes} {}", geometry.lba_size, geometry.zone_size_lba))
        }
        ["report", slba, filter, partial, max_zones] => {
            let (Ok(slba), Ok(filter), Ok(max_zones)) = (slba.parse(), filter.parse::<u8>(), max_zones.parse()) else {
                return ControlReply::Error(format!("malformed report request '{request}'"));
            };
            let filter = match ReportFilter::from_raw(filter) {
                Ok(filter) => filter,
                Err(status) => return ControlReply::Refused(status),
            };
            let command = QueuedCommand::Report { slba, filter, partial: *partial == "1", max_zones };
            match block_on(host.submit_pending(command)) {
                Ok(Output::Report(report)) => {
                    let mut buf = vec![0u8; REPORT_HEADER_BYTES + ZONE_DESCRIPTOR_BYTES * report.zones.len()];
                    report.encode_into(&mut buf);
                    ControlReply::Ok(to_hex(&buf))
                }
                Ok(_) => ControlReply::Error("the device answered a report with no zones".into()),
                Err(status) => ControlReply::Refused(status),
            }
        }
        ["inject", zone, fault] => {
            let Ok(zone) = zone.parse::<u32>() else {
                return ControlReply::Error(format!("'{zone}' is not a zone number"));
            };
            let fault = match *fault {
                "read-only" => ZoneFault::ReadOnly,
                "offline" => ZoneFault::Offline,
                "io-error" => ZoneFault::IoError,
                other => return ControlReply::Error(format!("'{other}' is no fault: read-only, offline or io-error")),
            };
            match host.inject(zone, fault) {
                Ok(()) => ControlReply::Ok(String::new()),
                Err(error) => ControlReply::Error(error.to_string()),
            }
        }
        ["write", lba, hex] => {
            let Ok(slba) = lba.parse::<u64>() else {
                return ControlReply::Error(format!("'{lba}' is not an LBA"));
            };
            let Some(data) = from_hex(hex) else {
                return ControlReply::Error("the data is not hexadecimal bytes".into());
            };
            let command = QueuedCommand::Write { slba, data: IoData::Bytes(data) };
            match block_on(host.submit_pending(command)) {
                Ok(_) => ControlReply::Ok(String::new()),
                Err(status) => ControlReply::Refused(status),
            }
        }
        _ => ControlReply::Error(format!(
            "unknown request '{request}': geometry, report, inject ZONE FAULT, or write LBA HEX"
        )),
    }
}

/// Sends one request to the front end listening on `path` and returns its answer.
pub fn control_request(path: &Path, request: &str) -> io::Result<ControlReply> {
    let mut stream = UnixStream::connect(path)?;
    stream.write_all(format!("{request}\n").as_bytes())?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let line = line.trim_end();
    let malformed = || io::Error::new(io::ErrorKind::InvalidData, format!("the device's front end answered '{line}'"));
    match line.split_once(' ') {
        None if line == "ok" => Ok(ControlReply::Ok(String::new())),
        Some(("ok", answer)) => Ok(ControlReply::Ok(answer.to_string())),
        Some(("status", code)) => {
            code.parse().ok().and_then(Status::from_code).map(ControlReply::Refused).ok_or_else(malformed)
        }
        Some(("error", message)) => Ok(ControlReply::Error(message.to_string())),
        _ => Err(malformed()),
    }
}

/// `data` as the hex `write` requests carry.
pub fn to_hex(data: &[u8]) -> String {
    data.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The bytes `to_hex` spelled, if `text` is hex.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        let data = [0u8, 1, 0xab, 0xff];
        assert_eq!(from_hex(&to_hex(&data)), Some(data.to_vec()));
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
    }

    #[test]
    fn the_control_socket_replaces_only_a_stale_socket_and_is_private() {
        let dir = std::env::temp_dir().join(format!("zonelab-control-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let file = dir.join("user-file");
        std::fs::write(&file, b"a user's data").expect("write the user's file");
        let error = listen(&file).expect_err("a regular file is not a socket to replace");
        assert!(error.to_string().contains("is not a socket"), "{error}");
        assert_eq!(std::fs::read(&file).expect("the file is still there"), b"a user's data");

        let socket = dir.join("control.sock");
        let live = listen(&socket).expect("a fresh socket");
        let mode = std::fs::metadata(&socket).expect("socket metadata").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the socket is the server's user's alone");
        let error = listen(&socket).expect_err("a live server's socket is not stale");
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse, "{error}");
        drop(live);
        listen(&socket).expect("a socket nobody answers is stale and replaced");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}

//! `zonelab mount` with the programs users run on zonefs: real fio (psync and libaio, with verification),
//! coreutils (dd, truncate, stat, touch, rm), and a kill -9 in the middle of writes. These need FUSE
//! (/dev/fuse, fusermount3) and fio; without them a test stops early, except under CI=true, where it fails.

mod common;

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::ok;

/// Whether `tools` (and FUSE) are here; under CI=true a missing one is a failure, not a skip.
fn have(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .chain(["fusermount3"])
        .filter(|tool| {
            Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .map_or(true, |out| !out.status.success())
        })
        .chain((!Path::new("/dev/fuse").exists()).then_some("/dev/fuse"))
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and {missing:?} missing: .ci/run must install them");
    eprintln!("skipped: {missing:?} not installed");
    false
}

/// A running `zonelab mount`; unmounted (and the process waited for) when dropped.
struct Mount {
    child: Option<Child>,
    dir: PathBuf,
}

impl Mount {
    fn start(device: &str, dir: &Path, options: &str) -> Mount {
        std::fs::create_dir_all(dir).expect("mountpoint");
        let child = Command::new(env!("CARGO_BIN_EXE_zonelab"))
            .args(["mount", device, dir.to_str().expect("utf-8 path"), "-o", options])
            .stderr(Stdio::piped())
            .spawn()
            .expect("start zonelab mount");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !dir.join("seq").exists() {
            assert!(Instant::now() < deadline, "the mount did not appear within 30 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        Mount { child: Some(child), dir: dir.to_path_buf() }
    }

    fn file(&self, index: u32) -> PathBuf {
        self.dir.join("seq").join(index.to_string())
    }

    /// Unmounts as a user does and returns what the mount printed; it must exit 0.
    fn unmount(mut self) -> String {
        let status = Command::new("fusermount3").arg("-u").arg(&self.dir).status().expect("fusermount3");
        assert!(status.success(), "fusermount3 -u failed");
        let output = self.child.take().expect("running").wait_with_output().expect("wait for the mount");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "zonelab mount exited with {:?}: {stderr}", output.status);
        stderr
    }

    /// SIGKILL, then clear the dead mount as an administrator would: lazily, since a writer may still hold a
    /// file of it open (a plain unmount would then fail with EBUSY and leave the dead mount in the way).
    fn kill(mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("kill -9");
        let _ = child.wait();
        let status = Command::new("fusermount3").arg("-uz").arg(&self.dir).status().expect("fusermount3");
        assert!(status.success(), "fusermount3 -uz failed on the dead mount");
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("fusermount3").arg("-uz").arg(&self.dir).status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn fio(args: &[String]) -> serde_json::Value {
    let output = Command::new("fio").args(args).arg("--output-format=json").output().expect("run fio");
    assert!(output.status.success(), "fio {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("fio's JSON");
    assert_eq!(json["jobs"][0]["error"], 0, "fio job error");
    json
}

/// fio's options for a zonefs file: no layout, no unlink, writes from the file's end.
fn fio_on(file: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> =
        // --verify_state_save=0: fio would leave its verify state file in the working directory.
        ["--name=job", "--direct=1", "--allow_file_create=0", "--create_on_open=1", "--unlink=0", "--size=1M", "--verify_state_save=0"]
            .map(String::from)
            .to_vec();
    args.push(format!("--filename={}", file.display()));
    args.extend(extra.iter().map(|arg| arg.to_string()));
    args
}

fn errno_of(result: std::io::Result<impl Sized>) -> Option<i32> {
    result.err().and_then(|error| error.raw_os_error())
}

/// Runs `f` on a zeroed buffer of `len` bytes aligned as O_DIRECT wants.
fn with_aligned<T>(len: usize, f: impl FnOnce(&mut [u8]) -> T) -> T {
    let layout = std::alloc::Layout::from_size_align(len.max(4096), 4096).expect("layout");
    // SAFETY: the layout has a non-zero size; the buffer is freed below with the same layout.
    let buffer = unsafe { std::alloc::alloc_zeroed(layout) };
    // SAFETY: `buffer` holds at least `len` bytes.
    let result = f(unsafe { std::slice::from_raw_parts_mut(buffer, len) });
    // SAFETY: allocated above with this layout.
    unsafe { std::alloc::dealloc(buffer, layout) };
    result
}

fn direct_write(path: &Path, append: bool, data: &[u8]) -> std::io::Result<usize> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).append(append).custom_flags(libc::O_DIRECT);
    let mut file = options.open(path)?;
    with_aligned(data.len(), |buffer| {
        buffer.copy_from_slice(data);
        file.write(buffer)
    })
}

/// Reads up to `len` bytes from the start of `path` with O_DIRECT.
fn direct_read(path: &Path, len: usize) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path)?;
    with_aligned(len, |buffer| {
        let read = std::io::Read::read(&mut file, buffer)?;
        Ok(buffer[..read].to_vec())
    })
}

const DEVICE: &str = "preset:instant,namespace.zones=4,namespace.zone-size=\"1MiB\",namespace.zone-cap=\"768KiB\"";

#[test]
fn real_fio_writes_verifies_and_reads_files_and_zonelab_read_sees_the_same_bytes() {
    if !have(&["fio"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let image = dir.path().join("img");
    ok(&["create", image.to_str().expect("path"), "--zones", "4", "--zone-size", "1M", "--mdts", "0"]);
    let mount = Mount::start(image.to_str().expect("path"), &dir.path().join("mnt"), "");

    let written = fio(&fio_on(
        &mount.file(0),
        &["--ioengine=psync", "--rw=write", "--bs=64k", "--file_append=1", "--verify=crc32c"],
    ));
    assert_eq!(written["jobs"][0]["write"]["io_bytes"], 1 << 20);
    assert_eq!(written["jobs"][0]["read"]["io_bytes"], 1 << 20, "the verify pass read everything back");
    assert_eq!(std::fs::metadata(mount.file(0)).expect("stat").len(), 1 << 20, "size = write pointer");

    let libaio = fio(&fio_on(
        &mount.file(1),
        &["--ioengine=libaio", "--iodepth=8", "--rw=write", "--bs=16k", "--file_append=1", "--verify=crc32c"],
    ));
    assert_eq!(libaio["jobs"][0]["write"]["io_bytes"], 1 << 20);
    let random = fio(&fio_on(&mount.file(0), &["--ioengine=libaio", "--iodepth=4", "--rw=randread", "--bs=4k"]));
    assert_eq!(random["jobs"][0]["read"]["io_bytes"], 1 << 20);

    // A full file: one more write is EFBIG; truncate to 0 resets it and fio can fill it again.
    assert_eq!(errno_of(direct_write(&mount.file(0), true, &[1; 4096])), Some(libc::EFBIG));
    assert!(Command::new("truncate").args(["-s", "0"]).arg(mount.file(0)).status().expect("truncate").success());
    assert_eq!(std::fs::metadata(mount.file(0)).expect("stat").len(), 0);
    fio(&fio_on(
        &mount.file(0),
        &["--ioengine=psync", "--rw=write", "--bs=128k", "--file_append=1", "--verify=crc32c"],
    ));

    let through_mount = std::fs::read(mount.file(1)).expect("read seq/1");
    let stderr = mount.unmount();
    assert!(stderr.contains("device flushed"), "{stderr}");
    assert!(stderr.contains("completions, pacing error p50"), "the mount says how it kept pace: {stderr}");
    assert!(stderr.contains("device thread stalled"), "and the time its device thread lost: {stderr}");
    let out = dir.path().join("zone1");
    ok(&[
        "read",
        image.to_str().expect("path"),
        "--lba",
        "256",
        "--blocks",
        "256",
        "--out",
        out.to_str().expect("path"),
    ]);
    assert!(std::fs::read(out).expect("zone 1 bytes") == through_mount, "zonelab read sees what the mount served");
}

#[test]
fn a_polling_mount_serves_real_fio_and_unmounts_cleanly() {
    if !have(&["fio"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let device = "preset:instant,namespace.zones=4,namespace.zone-size=\"1MiB\"";
    let mount = Mount::start(device, &dir.path().join("mnt"), "poll,device-wait=poll");
    // The request loop reads the FUSE device without blocking: fdinfo's flags carry O_NONBLOCK (octal 04000).
    let pid = mount.child.as_ref().expect("running").id();
    let fuse_flags: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the mount's descriptors")
        .filter_map(|entry| entry.ok())
        .filter(|entry| std::fs::read_link(entry.path()).is_ok_and(|target| target == Path::new("/dev/fuse")))
        .map(|entry| {
            let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", entry.file_name().to_string_lossy()))
                .expect("fdinfo");
            let flags = info.lines().find_map(|line| line.strip_prefix("flags:")).expect("flags line");
            u32::from_str_radix(flags.trim(), 8).expect("octal flags")
        })
        .collect();
    assert!(!fuse_flags.is_empty(), "the mount holds the FUSE device");
    assert!(
        fuse_flags.iter().all(|flags| flags & libc::O_NONBLOCK as u32 != 0),
        "the FUSE descriptors' flags: {fuse_flags:?}"
    );
    let written = fio(&fio_on(
        &mount.file(0),
        &["--ioengine=psync", "--rw=write", "--bs=4k", "--file_append=1", "--verify=crc32c"],
    ));
    assert_eq!(written["jobs"][0]["write"]["io_bytes"], 1 << 20);
    assert_eq!(written["jobs"][0]["read"]["io_bytes"], 1 << 20, "the verify pass read everything back");
    let random = fio(&fio_on(&mount.file(0), &["--ioengine=libaio", "--iodepth=8", "--rw=randread", "--bs=4k"]));
    assert_eq!(random["jobs"][0]["read"]["io_bytes"], 1 << 20);
    let stderr = mount.unmount();
    assert!(stderr.contains("unpinned, normal class, busy-polling"), "the exit line names the placement: {stderr}");
}

/// zonefs cuts a direct write that crosses a file's capacity short, whichever way it is submitted. With FUSE's
/// asynchronous direct I/O Linux would turn the short count into EIO (`fuse_get_res_by_io`), so the mount does
/// without it unless asked (`async-dio`): libaio's and io_uring's appends end at the capacity with no error,
/// one of them short, and so does a write the kernel splits into several requests (2 MiB, above the mount's
/// 1 MiB requests).
#[test]
fn asynchronous_direct_writes_that_cross_the_capacity_are_cut_short() {
    if !have(&["fio"]) {
        return;
    }
    let capacity: u64 = (3 << 20) - 4096;
    let dir = tempfile::tempdir().expect("tempdir");
    let device = "preset:instant,namespace.zones=4,namespace.zone-size=\"4MiB\",namespace.zone-cap=\"3068KiB\"";
    let mount = Mount::start(device, &dir.path().join("mnt"), "");
    // Each job's last write is the one that crosses the capacity.
    for (file, engine, bs, size) in [(0, "libaio", "8k", "3M"), (1, "io_uring", "8k", "3M"), (2, "libaio", "2M", "4M")]
    {
        let size = format!("--size={size}");
        let job = fio(&fio_on(
            &mount.file(file),
            &[
                &format!("--ioengine={engine}"),
                "--iodepth=4",
                "--rw=write",
                &format!("--bs={bs}"),
                "--file_append=1",
                &size,
            ],
        ));
        let write = &job["jobs"][0]["write"];
        assert_eq!(write["short_ios"], 1, "{engine} {bs}: one write cut short: {write}");
        let len = std::fs::metadata(mount.file(file)).expect("stat").len();
        assert_eq!(len, capacity, "{engine} {bs}: the file ends at the capacity");
    }
    mount.unmount();
}

#[test]
fn coreutils_meet_zonefs_rules_and_errnos() {
    if !have(&["dd", "truncate"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mount = Mount::start(DEVICE, &dir.path().join("mnt"), "perm=600");
    let capacity = 768 << 10;

    let names: Vec<String> = std::fs::read_dir(mount.dir.join("seq"))
        .expect("readdir")
        .map(|entry| entry.expect("entry").file_name().into_string().expect("name"))
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, ["0", "1", "2", "3"]);
    // zonefs's inode numbers: the root the number of zones, seq/ two more, seq/N its zone's index; seq/0,
    // whose index 0 would be no inode to Linux, the number after the directories'. readdir gives the same.
    let ino = |path: &Path| std::fs::metadata(path).expect("stat").ino();
    assert_eq!((ino(&mount.dir), ino(&mount.dir.join("seq"))), (4, 6));
    assert_eq!([0, 1, 3].map(|file| ino(&mount.file(file))), [7, 1, 3]);
    let mut listed: Vec<(String, u64)> = std::fs::read_dir(mount.dir.join("seq"))
        .expect("readdir")
        .map(|entry| entry.expect("entry"))
        .map(|entry| (entry.file_name().into_string().expect("name"), std::os::unix::fs::DirEntryExt::ino(&entry)))
        .collect();
    listed.sort();
    assert_eq!(listed, [("0".into(), 7), ("1".into(), 1), ("2".into(), 2), ("3".into(), 3)]);
    let meta = std::fs::metadata(mount.file(2)).expect("stat");
    assert_eq!((meta.len(), meta.permissions().mode() & 0o777, meta.blocks()), (0, 0o600, capacity / 512));

    // Direct appends grow the file; a write anywhere but the end, unaligned, or buffered is refused.
    assert_eq!(direct_write(&mount.file(2), false, &[7; 8192]).expect("write at 0"), 8192);
    assert_eq!(direct_write(&mount.file(2), true, &[9; 4096]).expect("O_APPEND write"), 4096);
    assert_eq!(std::fs::metadata(mount.file(2)).expect("stat").len(), 12288);
    assert_eq!(errno_of(direct_write(&mount.file(2), false, &[1; 4096])), Some(libc::EINVAL), "not at the end");
    assert_eq!(errno_of(direct_write(&mount.file(2), true, &[1; 100])), Some(libc::EINVAL), "unaligned");
    let buffered =
        std::fs::OpenOptions::new().append(true).open(mount.file(2)).and_then(|mut file| file.write(&[1; 4096]));
    assert_eq!(errno_of(buffered), Some(libc::EIO), "buffered writes to sequential files are EIO");
    let data = std::fs::read(mount.file(2)).expect("read");
    assert_eq!((&data[..8192], &data[8192..]), (&[7u8; 8192][..], &[9u8; 4096][..]));

    // Truncate: only to 0 (reset) or the capacity (finish).
    let truncate = |size: u64| {
        Command::new("truncate")
            .arg("-s")
            .arg(size.to_string())
            .arg(mount.file(2))
            .status()
            .expect("truncate")
            .success()
    };
    assert!(!truncate(4096), "truncate to 4096 is EPERM");
    assert!(truncate(capacity), "truncate to the capacity finishes the zone");
    assert_eq!(std::fs::metadata(mount.file(2)).expect("stat").len(), capacity);
    assert!(truncate(0), "truncate to 0 resets the zone");
    assert_eq!(std::fs::metadata(mount.file(2)).expect("stat").len(), 0);
    // A write that crosses the capacity is cut short; one at the capacity is EFBIG.
    assert_eq!(direct_write(&mount.file(3), false, &vec![5; 1 << 20]).expect("short write"), capacity as usize);
    assert_eq!(errno_of(direct_write(&mount.file(3), true, &[5; 4096])), Some(libc::EFBIG));

    // Files are zones: none can be created, removed or renamed.
    assert_eq!(errno_of(std::fs::File::create(mount.dir.join("seq/new"))), Some(libc::EPERM));
    assert_eq!(errno_of(std::fs::remove_file(mount.file(1))), Some(libc::EPERM));
    assert_eq!(errno_of(std::fs::rename(mount.file(1), mount.dir.join("seq/x"))), Some(libc::EPERM));
    assert!(!mount.dir.join("seq/4").exists() && !mount.dir.join("seq/01").exists());

    // statfs: capacity of every zone, used = what the files hold.
    let stat = nix_statfs(&mount.dir);
    assert_eq!((stat.0 * stat.2, stat.1 * stat.2), (4 * capacity, 3 * capacity));
    mount.unmount();
}

/// (f_blocks, f_bfree, f_bsize) of a mounted path.
fn nix_statfs(path: &Path) -> (u64, u64, u64) {
    let path = std::ffi::CString::new(path.to_str().expect("path")).expect("no NUL");
    // SAFETY: a zeroed statvfs is valid storage for the call to fill; `path` is NUL-terminated.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &mut stat) }, 0, "statvfs");
    (stat.f_blocks, stat.f_bfree, stat.f_bsize)
}

#[test]
fn zone_conditions_and_the_errors_option_shape_files() {
    if !have(&[]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let image = dir.path().join("img");
    let path = image.to_str().expect("path");
    ok(&["create", path, "--zones", "5", "--zone-size", "1M", "--max-active", "2", "--max-open", "2"]);
    ok(&["inject", path, "--zone", "2", "--state", "read-only"]);
    ok(&["inject", path, "--zone", "3", "--state", "offline"]);
    let mountpoint = dir.path().join("mnt");

    let mount = Mount::start(path, &mountpoint, "errors=zone-ro");
    let read_only = std::fs::metadata(mount.file(2)).expect("stat");
    // Read-only when mounted: every permission gone and empty, as zonefs_inode_update_mode makes it.
    assert_eq!((read_only.permissions().mode() & 0o777, read_only.len()), (0, 0), "zonefs mounts it empty");
    assert_eq!(errno_of(direct_write(&mount.file(2), true, &[1; 4096])), Some(libc::EPERM));
    let offline = std::fs::metadata(mount.file(3)).expect("stat");
    assert_eq!((offline.permissions().mode() & 0o777, offline.len()), (0, 0));
    // Two active zones, then a third is refused: EOVERFLOW, as Linux maps Too Many Active Zones. Under
    // errors=zone-ro only that file turns read-only.
    direct_write(&mount.file(0), true, &[1; 4096]).expect("zone 0 active");
    direct_write(&mount.file(1), true, &[1; 4096]).expect("zone 1 active");
    assert_eq!(errno_of(direct_write(&mount.file(4), true, &[1; 4096])), Some(libc::EOVERFLOW));
    // Read-only while mounted: only the write permissions go.
    assert_eq!(std::fs::metadata(mount.file(4)).expect("stat").permissions().mode() & 0o777, 0o440);
    assert_eq!(errno_of(direct_write(&mount.file(4), true, &[1; 4096])), Some(libc::EPERM));
    direct_write(&mount.file(0), true, &[2; 4096]).expect("other files still take writes");
    mount.unmount();

    // The default, errors=remount-ro: after the same error every write is EROFS; reads go on.
    let mount = Mount::start(path, &mountpoint, "");
    assert_eq!(errno_of(direct_write(&mount.file(4), true, &[1; 4096])), Some(libc::EOVERFLOW));
    assert_eq!(errno_of(direct_write(&mount.file(0), true, &[3; 4096])), Some(libc::EROFS));
    assert_eq!(std::fs::read(mount.file(0)).expect("read").len(), 8192);
    mount.unmount();

    // explicit-open: a file open for writing holds an open zone; past the open limit, open(2) is EBUSY.
    let mount = Mount::start(path, &mountpoint, "explicit-open,errors=repair");
    let writer =
        |file: u32| std::fs::OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(mount.file(file));
    let (first, second) = (writer(0).expect("open 0"), writer(1).expect("open 1"));
    assert_eq!(errno_of(writer(4)), Some(libc::EBUSY));
    drop(first);
    drop(second);
    // errors=repair: after the error the file keeps its permissions; only its size is fixed. (FUSE sends the
    // releases of the two closed files after close(2) returns: EBUSY until they arrive.)
    let deadline = Instant::now() + Duration::from_secs(10);
    let errno = loop {
        match errno_of(direct_write(&mount.file(4), true, &[1; 4096])) {
            Some(libc::EBUSY) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            other => break other,
        }
    };
    assert_eq!(errno, Some(libc::EOVERFLOW));
    let repaired = std::fs::metadata(mount.file(4)).expect("stat");
    assert_eq!((repaired.permissions().mode() & 0o777, repaired.len()), (0o640, 0));
    mount.unmount();
}

/// The control channel: `zonelab inject`, `zonelab write` and `zonelab report` on a mounted image reach the live
/// device (through IMAGE/control.sock), as null_blk's configfs, dm-error, blkzone and writes to the block device
/// reach a device under a mounted zonefs, and the mount handles what follows as zonefs's `__zonefs_io_error` does
/// under errors=zone-ro.
#[test]
fn faults_and_raw_writes_reach_a_mounted_image_through_its_control_socket() {
    if !have(&[]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let image = dir.path().join("img");
    let path = image.to_str().expect("path");
    ok(&["create", path, "--zones", "4", "--zone-size", "1M"]);
    let refused = common::zonelab(&["inject", path, "--zone", "1", "--state", "io-error"]);
    assert_eq!(refused.code, 2, "an I/O error needs a running device: {}", refused.stderr);
    let mount = Mount::start(path, &dir.path().join("mnt"), "errors=zone-ro");
    let socket = image.join("control.sock");
    assert!(socket.exists(), "the mount listens beside the image's files");
    let mode = |file: u32| std::fs::metadata(mount.file(file)).expect("stat").permissions().mode() & 0o777;

    // An I/O error: the next write fails with EIO, and zone-ro takes the file's write permissions.
    direct_write(&mount.file(1), true, &[1; 8192]).expect("write");
    // The live device's report, as blkzone would read it under a mounted zonefs.
    let report: serde_json::Value =
        serde_json::from_str(&ok(&["report", path, "--count", "2", "--format", "json"])).expect("report");
    assert_eq!(
        (&report["zones"][1]["wp_lba"], &report["zones"][1]["state"], report["zones"].as_array().map(Vec::len)),
        (&serde_json::json!(258), &serde_json::json!("open-implicit"), Some(2))
    );
    ok(&["inject", path, "--zone", "1", "--state", "io-error"]);
    assert_eq!(errno_of(direct_write(&mount.file(1), true, &[1; 4096])), Some(libc::EIO));
    assert_eq!((mode(1), std::fs::metadata(mount.file(1)).expect("stat").len()), (0o440, 8192));
    // A zone that turns read-only under the mount: the file keeps its permissions until a write fails.
    ok(&["inject", path, "--zone", "2", "--state", "read-only"]);
    assert_eq!(mode(2), 0o640);
    assert_eq!(errno_of(direct_write(&mount.file(2), true, &[1; 4096])), Some(libc::EIO));
    assert_eq!(mode(2), 0o440);
    // A write to the device behind the mount's back: the file's next append lands past where the file ends, which
    // zonefs takes for a corrupted write pointer.
    ok(&["write", path, "--lba", "768", "--pattern", "0xab", "--blocks", "2"]);
    assert_eq!(errno_of(direct_write(&mount.file(3), true, &[1; 4096])), Some(libc::EIO));
    assert_eq!(mode(3), 0o440);
    // What the device refuses, and requests that make no sense, are errors that name them.
    let off_pointer = common::zonelab(&["write", path, "--lba", "0", "--pattern", "1", "--blocks", "1"]);
    assert_eq!(off_pointer.code, 0, "zone 0 is empty: its start is its write pointer");
    let refused = common::zonelab(&["write", path, "--lba", "0", "--pattern", "1", "--blocks", "1"]);
    assert_eq!((refused.code, refused.stderr.contains("Zone Invalid Write")), (1, true), "{}", refused.stderr);
    let bad_zone = common::zonelab(&["inject", path, "--zone", "9", "--state", "offline"]);
    assert_eq!((bad_zone.code, bad_zone.stderr.contains("zone 9 does not exist")), (2, true), "{}", bad_zone.stderr);
    mount.unmount();

    assert!(!socket.exists(), "the socket goes with the mount");
    let zone3 = common::zonelab(&["read", path, "--lba", "768", "--blocks", "2"]).raw_stdout;
    assert_eq!(zone3, vec![0xab; 8192], "the raw write reached the device and the image");
}

#[test]
fn a_killed_mount_keeps_every_acknowledged_write() {
    if !have(&[]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let image = dir.path().join("img");
    let path = image.to_str().expect("path");
    ok(&["create", path, "--zones", "8", "--zone-size", "4M"]);
    let mountpoint = dir.path().join("mnt");
    let mount = Mount::start(path, &mountpoint, "");
    let files: Vec<PathBuf> = (0..8).map(|file| mount.file(file)).collect();
    // Appends through the files in order until the kill; block n of the whole run holds byte n % 251 + 1.
    let pattern = |block: usize| (block % 251 + 1) as u8;
    let writer = std::thread::spawn(move || {
        let mut acknowledged = 0usize;
        'files: for file in &files {
            for _ in 0..1024 {
                match direct_write(file, true, &[pattern(acknowledged); 4096]) {
                    Ok(4096) => acknowledged += 1,
                    _ => break 'files,
                }
            }
        }
        acknowledged
    });
    std::thread::sleep(Duration::from_millis(100));
    mount.kill();
    let acknowledged = writer.join().expect("writer");
    assert!(acknowledged > 0, "some writes completed before the kill");
    eprintln!("{acknowledged} of 8192 writes acknowledged before the kill");

    let mount = Mount::start(path, &mountpoint, "");
    let mut data = Vec::new();
    for file in 0..8 {
        data.extend(std::fs::read(mount.file(file)).expect("read after remount"));
    }
    assert!(data.len() >= acknowledged * 4096, "{} bytes, {acknowledged} writes acknowledged", data.len());
    for (index, block) in data.chunks(4096).enumerate() {
        assert!(block.iter().all(|&byte| byte == pattern(index)), "block {index} holds the write it was given");
    }
    mount.unmount();
}

#[test]
fn bad_options_and_devices_are_refused_before_anything_is_mounted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mountpoint = dir.path().to_str().expect("path");
    common::usage_error(&["mount", "preset:instant", mountpoint, "-o", "errors=panic"], "mount option 'errors=panic'");
    common::usage_error(&["mount", "preset:no-such-preset", mountpoint], "no-such-preset");
    // The device thread's placement: a value it cannot read, and one the system refuses (CPU 1023 is no CPU here).
    common::usage_error(&["mount", "preset:instant", mountpoint, "-o", "device-cpu=many"], "device-cpu=many");
    common::usage_error(&["mount", "preset:instant,device-cpu=1023", mountpoint], "device-cpu=1023: ");
    let missing = dir.path().join("missing");
    let run = common::zonelab(&["mount", missing.to_str().expect("path"), mountpoint]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("not a zonelab image"), "{}", run.stderr);
    // A mountpoint mount(8) would refuse, or one whose files the mount would hide: refused before the device
    // opens (ENOTDIR as mount says it; "not empty" unless -o nonempty).
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").expect("a regular file");
    common::usage_error(&["mount", "preset:instant", file.to_str().expect("path")], "Not a directory");
    common::usage_error(&["mount", "preset:instant", mountpoint], "the directory is not empty");
}

#[test]
fn a_read_only_shared_mapping_of_a_file_reads_its_data() {
    if !have(&["python3"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mount = Mount::start(DEVICE, &dir.path().join("mnt"), "");
    direct_write(&mount.file(1), true, &[0x5a; 8192]).expect("a direct append");
    // Python's mmap: PROT_READ, MAP_SHARED, the whole file.
    let script = "import mmap, sys\nwith open(sys.argv[1], 'rb') as f:\n    m = mmap.mmap(f.fileno(), 0, \
                  flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)\n    sys.stdout.write(m[:8192].hex())";
    let output = Command::new("python3").args(["-c", script]).arg(mount.file(1)).output().expect("python3");
    assert!(output.status.success(), "mmap failed: {}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "5a".repeat(8192));
    mount.unmount();
}

#[test]
fn proc_mounts_names_the_device_and_nonempty_mounts_over_files() {
    if !have(&[]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).expect("mountpoint");
    std::fs::write(mnt.join("hidden"), b"x").expect("a file in the mountpoint");
    let device = "preset:instant,zones=4";
    let mount = Mount::start(device, &mnt, "nonempty");
    let mounts = std::fs::read_to_string("/proc/mounts").expect("/proc/mounts");
    let line = mounts.lines().find(|line| line.contains(mnt.to_str().expect("path"))).expect("listed");
    assert!(line.starts_with("zonelab:preset:instant,zones=4 "), "{line}");
    mount.unmount();
    assert!(mnt.join("hidden").exists(), "the mountpoint's file is there again after the unmount");
}

/// The conventional namespace of an image made from the zn540 preset is `cnv/0`: its size fixed, writable
/// anywhere (a write covering a block in part keeps the bytes around it), EFBIG at its end and EPERM for a
/// truncate, as zonefs has its conventional files; its data outlives the mount. Where this kernel gives loop
/// devices, ext4 runs on it: a kernel file system on the emulated conventional SSD.
#[test]
fn cnv_0_is_the_conventional_namespace_and_carries_ext4() {
    if !have(&["dd"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let image = dir.path().join("img");
    let path = image.to_str().expect("path");
    ok(&["create", path, "--preset", "zn540", "--zones", "4"]);
    let mountpoint = dir.path().join("mnt");
    let mount = Mount::start(path, &mountpoint, "");
    let cnv = mountpoint.join("cnv").join("0");
    assert_eq!(std::fs::metadata(&cnv).expect("cnv/0").len(), 4 << 30, "the ZN540's 4 GiB conventional namespace");
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&cnv).expect("open cnv/0");
    use std::os::unix::fs::FileExt as _;
    // Past the first GiB, which ext4 takes below.
    let at = (2 << 30) + 8192;
    file.write_all_at(&[0xab; 4096], at).expect("an aligned write");
    file.write_all_at(b"zonelab", at + 3).expect("a write inside a block");
    let mut back = [0u8; 4096];
    file.read_exact_at(&mut back, at).expect("read back");
    assert_eq!(&back[..3], &[0xab; 3]);
    assert_eq!(&back[3..10], b"zonelab");
    assert!(back[10..].iter().all(|&byte| byte == 0xab), "the rest of the block stayed");
    assert_eq!(errno_of(file.write_at(b"x", 4 << 30)), Some(libc::EFBIG));
    assert_eq!(errno_of(file.set_len(1 << 20)), Some(libc::EPERM), "no truncate changes a conventional file");
    drop(file);
    let ext4 = Path::new("/dev/loop-control").exists() && loop_device_free();
    if ext4 {
        assert!(have(&["losetup", "mkfs.ext4", "mount", "umount"]));
        let device = run_text("losetup", &["-f", "--show", cnv.to_str().expect("path")]);
        let device = device.trim();
        let fs = dir.path().join("ext4");
        std::fs::create_dir_all(&fs).expect("ext4 mountpoint");
        run_text("mkfs.ext4", &["-q", "-F", device, "1G"]);
        run_text("mount", &[device, fs.to_str().expect("path")]);
        std::fs::write(fs.join("note"), b"on the emulated conventional SSD").expect("write a file on ext4");
        run_text("umount", &[fs.to_str().expect("path")]);
        run_text("losetup", &["-d", device]);
    } else {
        eprintln!("ext4 part skipped: no free loop device here");
    }
    mount.unmount();

    let mount = Mount::start(path, &mountpoint, "");
    let file = std::fs::File::open(&cnv).expect("open cnv/0 again");
    file.read_exact_at(&mut back, at).expect("read after remount");
    assert_eq!(&back[3..10], b"zonelab", "the data outlived the mount");
    drop(file);
    if ext4 {
        let device = run_text("losetup", &["-f", "--show", cnv.to_str().expect("path")]);
        let device = device.trim();
        let fs = dir.path().join("ext4");
        run_text("mount", &[device, fs.to_str().expect("path")]);
        let note = std::fs::read(fs.join("note"));
        run_text("umount", &[fs.to_str().expect("path")]);
        run_text("losetup", &["-d", device]);
        assert_eq!(note.expect("the file ext4 wrote"), b"on the emulated conventional SSD");
    }
    mount.unmount();
}

/// Whether a loop device can be set up here (root, and a free device): a container may have neither.
fn loop_device_free() -> bool {
    Command::new("losetup").arg("-f").output().is_ok_and(|out| out.status.success())
}

/// Runs `program` with `args`, which must succeed; its standard output.
fn run_text(program: &str, args: &[&str]) -> String {
    let output = Command::new(program).args(args).output().expect(program);
    assert!(output.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `trace=FILE` in the device spec: at unmount the mount writes its FUSE requests on a track of their own, each
/// joined by an arrow to the commands it became (a write to its writes, a read to its reads, a truncate to 0 to
/// its zone reset), beside the device's commands per zone.
#[test]
fn a_traced_mount_draws_its_requests_joined_to_their_commands() {
    if !have(&["truncate"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mount.json");
    let mount = Mount::start(&format!("{DEVICE},trace={}", path.display()), &dir.path().join("mnt"), "");
    assert_eq!(direct_write(&mount.file(1), false, &[3; 16384]).expect("write"), 16384);
    assert_eq!(direct_read(&mount.file(1), 16384).expect("read"), [3; 16384]);
    let reset = Command::new("truncate").arg("-s").arg("0").arg(mount.file(1)).status().expect("truncate");
    assert!(reset.success());
    mount.unmount();

    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("written at unmount")).expect("JSON");
    let events = trace["traceEvents"].as_array().expect("events");
    let named = |pid: u64, name: &str| {
        events.iter().any(|event| event["ph"] == "M" && event["pid"] == pid && event["args"]["name"] == name)
    };
    assert!(named(1, "zonefs mount") && named(1, "FUSE requests") && named(2, "zone 1"));
    let requests: Vec<&serde_json::Value> =
        events.iter().filter(|event| event["ph"] == "X" && event["pid"] == 1).collect();
    let kinds = |name: &str| requests.iter().filter(|slice| slice["name"] == name).count();
    assert!(kinds("write") >= 1 && kinds("read") >= 1 && kinds("trim") == 1, "{requests:?}");
    // Arrows from the requests land on the device's commands of their kinds.
    let landed: std::collections::HashMap<u64, &serde_json::Value> = events
        .iter()
        .filter(|event| event["ph"] == "f" && event["pid"] == 2)
        .map(|event| (event["id"].as_u64().expect("id"), event))
        .collect();
    let from_requests = events.iter().filter(|event| event["ph"] == "s" && event["pid"] == 1);
    let on_commands: std::collections::HashSet<&str> = from_requests
        .filter_map(|start| landed.get(&start["id"].as_u64().expect("id")))
        .filter_map(|end| {
            let at = end["ts"].as_f64().expect("ts");
            events.iter().find(|slice| {
                slice["ph"] == "X"
                    && slice["pid"] == 2
                    && slice["tid"] == end["tid"]
                    && slice["ts"].as_f64().is_some_and(|ts| ts <= at + 1e-3)
                    && at <= slice["ts"].as_f64().unwrap_or(0.0) + slice["dur"].as_f64().unwrap_or(0.0) + 1e-3
            })
        })
        .filter_map(|slice| slice["name"].as_str())
        .collect();
    for command in ["write", "read", "zone reset"] {
        assert!(on_commands.contains(command), "a request's arrow lands on a {command}: {on_commands:?}");
    }
}

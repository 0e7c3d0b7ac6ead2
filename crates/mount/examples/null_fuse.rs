//! The floor under the mount's cost: a FUSE file system with the mount's shape (`seq/0`, direct I/O, the same
//! FUSE crate and kernel settings) that answers every read with zeros and every write at once, with no device
//! behind it. What fio measures on it at QD 1 is what the kernel's FUSE round trip costs on this machine
//! alone; `scripts/bench_mount.sh null` runs the mount's benchmark on it (docs/mount.md).
//!
//!   cargo build --release --example null_fuse && target/release/examples/null_fuse DIR [--poll]
//!
//! `--poll` polls the FUSE device as the mount's `poll` option does.

use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, FopenFlags, INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags,
    ReplyAttr, ReplyData, ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};

const ROOT: u64 = 1;
const SEQ_DIR: u64 = 2;
const FILE: u64 = 16;
/// Large enough for any offset the benchmark reads or appends at.
const FILE_BYTES: u64 = 1 << 40;

struct NullFs {
    mounted_at: SystemTime,
}

impl NullFs {
    fn attr(&self, ino: u64) -> FileAttr {
        let (kind, size, perm, nlink) = match ino {
            FILE => (FileType::RegularFile, FILE_BYTES, 0o640, 1),
            _ => (FileType::Directory, 1, 0o555, 2),
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size >> 9,
            atime: self.mounted_at,
            mtime: self.mounted_at,
            ctime: self.mounted_at,
            crtime: self.mounted_at,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }
}

impl fuser::Filesystem for NullFs {
    fn init(&mut self, _request: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // As the mount asks: several direct I/Os of one file in flight at once.
        let _ = config.add_capabilities(InitFlags::FUSE_ASYNC_DIO);
        Ok(())
    }

    fn lookup(&self, _request: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match (parent.0, name.to_str()) {
            (ROOT, Some("seq")) => reply.entry(&Duration::from_secs(3600), &self.attr(SEQ_DIR), fuser::Generation(0)),
            (SEQ_DIR, Some("0")) => reply.entry(&Duration::ZERO, &self.attr(FILE), fuser::Generation(0)),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _request: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match ino.0 {
            ROOT | SEQ_DIR | FILE => reply.attr(&Duration::ZERO, &self.attr(ino.0)),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _request: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn read(
        &self,
        _request: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        reply.data(&vec![0; size as usize]);
    }

    fn write(
        &self,
        _request: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        reply.written(data.len() as u32);
    }
}

fn main() -> std::io::Result<()> {
    let Some(mountpoint) = std::env::args().nth(1) else {
        eprintln!("usage: null_fuse MOUNTPOINT");
        std::process::exit(2);
    };
    let mut config = fuser::Config::default();
    config.mount_options = vec![fuser::MountOption::FSName("zonelab-null".into()), fuser::MountOption::NoAtime];
    let poll = std::env::args().nth(2).as_deref() == Some("--poll");
    let before = zonelab_mount::fuse_descriptors()?;
    let session = fuser::Session::new(NullFs { mounted_at: SystemTime::now() }, Path::new(&mountpoint), &config)?;
    if poll {
        for fd in zonelab_mount::fuse_descriptors()?.difference(&before) {
            zonelab_mount::set_nonblocking(*fd)?;
        }
    }
    session.run()
}

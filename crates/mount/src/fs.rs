//! The file system the kernel talks to: zonefs's files and rules (`zonelab_host::ZoneLayout`) over a device in
//! real time. The FUSE request loop runs every check and submits every command itself, in the order the
//! kernel sends requests, so writes to one zone reach the device in order; the completion thread replies when
//! the device completes them.

use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, FopenFlags, INodeNo, InitFlags, KernelConfig, LockOwner, OpenAccMode,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use zonelab_host::trace::{HostTrace, IoKind, IoSpan};
use zonelab_host::{FileState, FsError, ZoneLayout};
use zonelab_runtime::{CommandQueue, IoData, Output, Pending, QueuedCommand, RealTimeHost};
use zonelab_zns::{Geometry, ReportFilter, Status, ZoneSendAction, ZoneState};

use crate::cnv::{ConventionalFile, CNV_DIR, CNV_FILE};
use crate::completions::Completions;
use crate::options::{ErrorsPolicy, MountOptions};

const ROOT: u64 = 1;
const SEQ_DIR: u64 = 2;
/// Node id of `seq/0`; file N is `FIRST_FILE + N`. Node ids name files to FUSE; `stat` and `readdir` show
/// zonefs's inode numbers (`Shared::zonefs_ino`).
const FIRST_FILE: u64 = 16;
/// zonefs's `ZONEFS_FNAME_MAX`, what statfs reports as the longest name.
const NAME_MAX: u32 = 16;
/// The kernel asks for attributes each time: a file's change with every write, and `stat` shows zonefs's inode
/// numbers only from a getattr reply (FUSE keeps the node id as the inode number of attributes it caches, and
/// fuser's entries give node ids, which must differ: 0 and 1 are FUSE's own).
const ATTR_TTL: Duration = Duration::ZERO;
/// Directory names never change.
const DIR_ENTRY_TTL: Duration = Duration::from_secs(3600);
/// The largest request the kernel sends, and the most it may have in flight before it stops sending.
const MAX_WRITE_BYTES: u32 = 1 << 20;
const MAX_BACKGROUND: u16 = 256;

/// How a file may be accessed after its zone's condition and the `errors=` policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Normal,
    /// zonefs makes the file immutable and drops its write permissions.
    ReadOnly,
    /// zonefs makes the file immutable, drops every permission and shows it empty.
    Offline,
}

impl Access {
    fn of(condition: ZoneState) -> Access {
        match condition {
            ZoneState::ReadOnly => Access::ReadOnly,
            ZoneState::Offline => Access::Offline,
            _ => Access::Normal,
        }
    }
}

/// One file as the mount knows it.
struct Entry {
    /// Size as completed writes made it (zonefs's `i_size`) and the zone's condition.
    file: FileState,
    /// Where the next write must start: the end of every write submitted (zonefs's `i_wpoffset`).
    wp_offset: u64,
    access: Access,
    perm: u16,
    uid: u32,
    gid: u32,
    /// Open file descriptions with write access.
    writers: u32,
    /// The zone was opened explicitly (`explicit-open`) and must be closed when the last writer closes.
    explicitly_open: bool,
}

/// What the request loop and the completion thread share.
struct Shared {
    host: RealTimeHost,
    layout: ZoneLayout,
    geometry: Geometry,
    options: MountOptions,
    entries: Mutex<Vec<Entry>>,
    /// Set by `ro` or by an error under `errors=remount-ro`.
    read_only: AtomicBool,
    /// Files open for writing whose zones were opened explicitly (bounded by the open-zone limit).
    explicitly_open: AtomicU32,
    mounted_at: SystemTime,
    /// `cnv/0`, when the device has a conventional namespace.
    conventional: Option<ConventionalFile>,
    /// The requests of a traced mount (`trace=`).
    trace: Option<Arc<HostTrace>>,
}

impl Shared {
    fn entries(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a file may be written: EROFS on a read-only mount, EPERM for an immutable file (zonefs makes
    /// read-only and offline zones immutable).
    fn check_writable(&self, entry: &Entry) -> Result<(), Errno> {
        if self.read_only.load(Ordering::SeqCst) {
            return Err(Errno::EROFS);
        }
        if entry.access != Access::Normal {
            return Err(Errno::EPERM);
        }
        Ok(())
    }

    /// The file no longer holds an explicitly opened zone (closed, finished, failed or gone bad).
    fn drop_explicit_open(&self, entry: &mut Entry) {
        if entry.explicitly_open {
            entry.explicitly_open = false;
            self.explicitly_open.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn file_attr(&self, file: u32, entry: &Entry) -> FileAttr {
        let (perm, size) = match entry.access {
            Access::Normal => (entry.perm, entry.file.size),
            Access::ReadOnly => (entry.perm & !0o222, entry.file.size),
            Access::Offline => (0, 0),
        };
        FileAttr {
            ino: INodeNo(FIRST_FILE + u64::from(file)),
            size,
            // zonefs reports every file as allocated up to its maximum size.
            blocks: self.layout.capacity_bytes >> 9,
            atime: self.mounted_at,
            mtime: self.mounted_at,
            ctime: self.mounted_at,
            crtime: self.mounted_at,
            kind: FileType::RegularFile,
            perm,
            nlink: 1,
            uid: entry.uid,
            gid: entry.gid,
            rdev: 0,
            blksize: self.layout.lba_size,
            flags: 0,
        }
    }

    /// zonefs's inode number of node `node`: a file's is its zone's index, the root's the number of zones, `cnv/`'s
    /// and `seq/`'s the next two (`zonefs_get_file_inode`, `zonefs_get_zgroup_inode`). Two files have no zonefs
    /// number: `seq/0`, whose would be 0, which Linux takes for no inode (glibc's readdir skips such entries; on
    /// zonefs mkzonefs's superblock holds zone 0, so no file has it), and `cnv/0`, a namespace and no zone here.
    /// They take the two numbers after the directories'.
    fn zonefs_ino(&self, node: u64) -> u64 {
        let zones = u64::from(self.geometry.zones);
        match node {
            ROOT => zones,
            CNV_DIR => zones + 1,
            SEQ_DIR => zones + 2,
            FIRST_FILE => zones + 3,
            CNV_FILE => zones + 4,
            file => file - FIRST_FILE,
        }
    }

    /// Attributes as `stat` shows them: with zonefs's inode number.
    fn stat(&self, attr: FileAttr) -> FileAttr {
        FileAttr { ino: INodeNo(self.zonefs_ino(attr.ino.0)), ..attr }
    }

    fn dir_attr(&self, ino: u64) -> FileAttr {
        let subdirectories = 1 + u64::from(self.conventional.is_some());
        let (size, nlink) = match ino {
            ROOT => (subdirectories, 2 + subdirectories as u32),
            CNV_DIR => (1, 2),
            _ => (u64::from(self.geometry.zones), 2),
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: 0,
            atime: self.mounted_at,
            mtime: self.mounted_at,
            ctime: self.mounted_at,
            crtime: self.mounted_at,
            kind: FileType::Directory,
            perm: 0o555,
            nlink,
            uid: self.options.uid,
            gid: self.options.gid,
            rdev: 0,
            blksize: self.layout.lba_size,
            flags: 0,
        }
    }

    /// What zonefs does after an I/O error on a file (`__zonefs_io_error`): the zone's report says what the
    /// file now is, and the `errors=` policy decides what becomes of it.
    async fn io_error(&self, file: u32, write: bool) {
        let report = QueuedCommand::Report {
            slba: self.layout.zslba(file),
            filter: ReportFilter::All,
            partial: false,
            max_zones: 1,
        };
        let Ok(Output::Report(report)) = self.host.submit_pending(report).await else {
            eprintln!("zonelab mount: seq/{file}: the zone report after an I/O error failed");
            return;
        };
        let Some(zone) = report.zones.first() else { return };
        let mut entries = self.entries();
        let entry = &mut entries[file as usize];
        let known = entry.file.size;
        let reported = self.layout.file_of(zone, known);
        let bad_zone = matches!(zone.state, ZoneState::ReadOnly | ZoneState::Offline);
        if !bad_zone && !write && reported.size == known {
            return;
        }
        if reported.size != known {
            eprintln!("zonelab mount: seq/{file}: invalid size {known} (should be {})", reported.size);
        }
        let mut size = reported.size;
        if zone.state == ZoneState::Offline || self.options.errors == ErrorsPolicy::ZoneOffline {
            eprintln!("zonelab mount: seq/{file}: read/write access disabled");
            entry.access = Access::Offline;
            size = 0;
        } else if zone.state == ZoneState::ReadOnly || self.options.errors == ErrorsPolicy::ZoneRo {
            eprintln!("zonelab mount: seq/{file}: write access disabled");
            entry.access = Access::ReadOnly;
            size = known;
        } else if self.options.errors == ErrorsPolicy::RemountRo && size > known {
            // Do not expose data that no completed write put there.
            size = known;
        }
        if entry.access != Access::Normal {
            self.drop_explicit_open(entry);
        }
        if self.options.errors == ErrorsPolicy::RemountRo && !self.read_only.swap(true, Ordering::SeqCst) {
            eprintln!("zonelab mount: remounting filesystem read-only");
        }
        entry.file = FileState { size, condition: zone.state };
        entry.wp_offset = size;
    }
}

/// The errno Linux returns for an NVMe status (`Status::errno`).
fn errno_of(status: Status) -> Errno {
    Errno::from_i32(status.errno())
}

fn fs_errno(error: &FsError) -> Errno {
    Errno::from_i32(error.errno())
}

fn has_flag(flags: OpenFlags, flag: i32) -> bool {
    flags.0 & flag != 0
}

fn writes(flags: OpenFlags) -> bool {
    !matches!(flags.acc_mode(), OpenAccMode::O_RDONLY)
}

/// Awaits every command of a request; the first failure, if any.
/// The bytes of reads' outputs, in order.
pub(crate) fn data_of(outputs: Vec<Output>) -> Vec<u8> {
    let mut bytes = Vec::new();
    for output in outputs {
        if let Output::Data(data) = output {
            bytes.extend_from_slice(&data);
        }
    }
    bytes
}

pub(crate) async fn all_done(pendings: Vec<Pending>) -> Result<Vec<Output>, Status> {
    let mut outputs = Vec::with_capacity(pendings.len());
    let mut failed = None;
    for pending in pendings {
        match pending.await {
            Ok(output) => outputs.push(output),
            Err(status) => failed = failed.or(Some(status)),
        }
    }
    failed.map_or(Ok(outputs), Err)
}

/// A request's commands as one I/O of a trace, begun now: the first command's kind and block, and the blocks
/// of all of them (a write's chunks follow each other; a truncate's reset and open name one zone).
fn request_io(host: &RealTimeHost, commands: &[QueuedCommand]) -> Option<IoSpan> {
    let lba_shift = host.geometry().lba_shift;
    let (kind, lba, _) = IoKind::of(commands.first()?, lba_shift)?;
    let blocks =
        commands.iter().filter_map(|command| IoKind::of(command, lba_shift)).map(|(_, _, blocks)| blocks).sum();
    let now = host.now_ns();
    Some(IoSpan { kind, lba, blocks, start_ns: now, issued_ns: now, end_ns: now, ok: true })
}

/// The zonefs-compatible file system on a real-time device.
pub(crate) struct ZonefsMount {
    shared: Arc<Shared>,
    completions: Completions,
}

impl ZonefsMount {
    /// `files` comes from a zone report of the whole device, taken before the mount; `conventional` is a
    /// handle on the device's conventional namespace, if it has one.
    pub(crate) fn new(
        host: RealTimeHost,
        files: Vec<FileState>,
        conventional: Option<RealTimeHost>,
        options: MountOptions,
        trace: Option<Arc<HostTrace>>,
    ) -> ZonefsMount {
        let geometry = zonelab_runtime::CommandQueue::geometry(&host);
        let entries = files
            .into_iter()
            .map(|file| Entry {
                file,
                wp_offset: file.size,
                access: Access::of(file.condition),
                // zonefs_inode_update_mode: a zone read-only when mounted loses every permission; one that turns
                // read-only while mounted loses only its write permissions (`file_attr`).
                perm: if file.condition == ZoneState::ReadOnly { 0 } else { options.perm },
                uid: options.uid,
                gid: options.gid,
                writers: 0,
                explicitly_open: false,
            })
            .collect();
        let conventional = conventional.map(|cnv| ConventionalFile::new(cnv, options.perm, options.uid, options.gid));
        let shared = Shared {
            layout: ZoneLayout::new(&geometry),
            geometry,
            host,
            read_only: AtomicBool::new(options.read_only),
            options,
            entries: Mutex::new(entries),
            explicitly_open: AtomicU32::new(0),
            mounted_at: SystemTime::now(),
            conventional,
            trace,
        };
        ZonefsMount { shared: Arc::new(shared), completions: Completions::default() }
    }

    fn cnv_attr(&self, cnv: &ConventionalFile) -> FileAttr {
        cnv.attr(self.shared.mounted_at, self.shared.read_only.load(Ordering::SeqCst))
    }

    /// The file an inode names, if it names one.
    fn file_of(&self, ino: INodeNo) -> Option<u32> {
        let file = ino.0.checked_sub(FIRST_FILE)?;
        (file < u64::from(self.shared.geometry.zones)).then_some(file as u32)
    }

    /// Submits `commands` now and replies through `finish` when all of them complete.
    fn submit<F, Done>(&self, commands: Vec<QueuedCommand>, finish: F)
    where
        F: FnOnce(Arc<Shared>, Result<Vec<Output>, Status>) -> Done + Send + 'static,
        Done: std::future::Future<Output = ()> + Send + 'static,
    {
        self.submit_on(&self.shared.host, commands, finish);
    }

    /// `submit` to the namespace behind `host`.
    fn submit_on<F, Done>(&self, host: &RealTimeHost, commands: Vec<QueuedCommand>, finish: F)
    where
        F: FnOnce(Arc<Shared>, Result<Vec<Output>, Status>) -> Done + Send + 'static,
        Done: std::future::Future<Output = ()> + Send + 'static,
    {
        let traced = self.shared.trace.as_ref().and_then(|_| request_io(host, &commands));
        let pendings: Vec<Pending> = commands.into_iter().map(|command| host.submit_pending(command)).collect();
        let shared = Arc::clone(&self.shared);
        // A traced request keeps the queue pair's clock to time its end; an untraced one clones nothing.
        let traced = traced.map(|span| (span, host.clone()));
        self.completions.spawn(async move {
            let result = all_done(pendings).await;
            if let (Some(trace), Some((span, clock))) = (&shared.trace, traced) {
                let end_ns = clock.now_ns();
                trace.io("FUSE requests", IoSpan { end_ns, ok: result.is_ok(), ..span });
            }
            finish(shared, result).await;
        });
    }

    /// A read of `cnv/0`: anywhere in it, cut at its end.
    fn read_conventional(&self, cnv: &ConventionalFile, offset: u64, size: u32, reply: ReplyData) {
        let end = offset.saturating_add(u64::from(size)).min(cnv.size());
        if end <= offset {
            return reply.data(&[]);
        }
        let (first, commands) = cnv.reads(offset, end);
        let (skip, len) = ((offset - first) as usize, (end - offset) as usize);
        self.submit_on(cnv.host(), commands, move |_, result: Result<Vec<Output>, Status>| async move {
            match result {
                Ok(outputs) => reply.data(&data_of(outputs)[skip..skip + len]),
                Err(status) => reply.error(errno_of(status)),
            }
        });
    }

    /// A write of `cnv/0`: anywhere in it, cut at its end; EFBIG at or past it, as zonefs has it.
    fn write_conventional(&self, offset: u64, data: &[u8], reply: ReplyWrite) {
        if self.shared.read_only.load(Ordering::SeqCst) {
            return reply.error(Errno::EROFS);
        }
        let Some(size) = self.shared.conventional.as_ref().map(ConventionalFile::size) else {
            return reply.error(Errno::ENOENT);
        };
        if offset >= size {
            return reply.error(Errno::EFBIG);
        }
        let data = data[..(data.len() as u64).min(size - offset) as usize].to_vec();
        let shared = Arc::clone(&self.shared);
        self.completions.spawn(async move {
            let cnv = shared.conventional.as_ref().expect("checked above");
            match cnv.write(offset, &data).await {
                Ok(()) => reply.written(data.len() as u32),
                Err(status) => reply.error(errno_of(status)),
            }
        });
    }

    fn truncate(&self, file: u32, size: u64, reply: ReplyAttr) {
        let mut entries = self.shared.entries();
        let entry = &mut entries[file as usize];
        let current = FileState { size: entry.wp_offset, condition: entry.file.condition };
        let action = match self.shared.layout.truncate_action(file, &current, size) {
            Ok(action) => action,
            Err(error) => return reply.error(fs_errno(&error)),
        };
        let Some(action) = action else {
            return reply.attr(&ATTR_TTL, &self.shared.stat(self.shared.file_attr(file, entry)));
        };
        let zslba = self.shared.layout.zslba(file);
        let mut commands = vec![QueuedCommand::ZoneSend { slba: zslba, action, select_all: false }];
        // With explicit-open, a reset zone is opened again for the writers still holding the file; a finished
        // one is closed by the finish itself.
        if entry.explicitly_open {
            if action == ZoneSendAction::Reset {
                commands.push(QueuedCommand::ZoneSend { slba: zslba, action: ZoneSendAction::Open, select_all: false });
            } else {
                self.shared.drop_explicit_open(entry);
            }
        }
        entry.wp_offset = size;
        drop(entries);
        self.submit(commands, move |shared: Arc<Shared>, result: Result<Vec<Output>, Status>| async move {
            match result {
                Ok(_) => {
                    let mut entries = shared.entries();
                    let entry = &mut entries[file as usize];
                    let condition = match (size, entry.explicitly_open) {
                        (0, true) => ZoneState::ExplicitlyOpened,
                        (0, false) => ZoneState::Empty,
                        _ => ZoneState::Full,
                    };
                    entry.file = FileState { size, condition };
                    reply.attr(&ATTR_TTL, &shared.stat(shared.file_attr(file, entry)));
                }
                Err(status) => {
                    shared.io_error(file, true).await;
                    reply.error(errno_of(status));
                }
            }
        });
    }
}

impl fuser::Filesystem for ZonefsMount {
    fn init(&mut self, _request: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Without FUSE's asynchronous direct I/O the kernel sends a libaio or io_uring direct I/O as a synchronous
        // one and returns a short write's count, as zonefs does for a write crossing the capacity; with it, one
        // thread's direct I/Os are in flight together, but any short write becomes EIO (`async-dio`).
        if self.shared.options.async_dio {
            let _ = config.add_capabilities(InitFlags::FUSE_ASYNC_DIO);
        }
        // Shared mappings of direct-I/O files (Linux 6.6 and later), so that a read-only shared mmap of a
        // file works as on zonefs; a kernel without it keeps refusing mmap (ENODEV).
        let _ = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        let _ = config.set_max_write(MAX_WRITE_BYTES);
        let _ = config.set_max_background(MAX_BACKGROUND);
        Ok(())
    }

    fn lookup(&self, _request: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let name = name.to_str().unwrap_or("");
        match parent.0 {
            ROOT if name == "seq" => {
                reply.entry_with_ttls(&ATTR_TTL, &DIR_ENTRY_TTL, &self.shared.dir_attr(SEQ_DIR), fuser::Generation(0))
            }
            ROOT if name == "cnv" && self.shared.conventional.is_some() => {
                reply.entry_with_ttls(&ATTR_TTL, &DIR_ENTRY_TTL, &self.shared.dir_attr(CNV_DIR), fuser::Generation(0))
            }
            CNV_DIR if name == "0" => match &self.shared.conventional {
                Some(cnv) => reply.entry(&ATTR_TTL, &self.cnv_attr(cnv), fuser::Generation(0)),
                None => reply.error(Errno::ENOENT),
            },
            SEQ_DIR => match name.parse::<u32>() {
                // Only the canonical name: "007" is not file 7.
                Ok(file) if file < self.shared.geometry.zones && file.to_string() == name => {
                    let entries = self.shared.entries();
                    reply.entry(&ATTR_TTL, &self.shared.file_attr(file, &entries[file as usize]), fuser::Generation(0))
                }
                _ => reply.error(Errno::ENOENT),
            },
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _request: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match (ino.0, self.file_of(ino), &self.shared.conventional) {
            (ROOT | SEQ_DIR, ..) | (CNV_DIR, _, Some(_)) => {
                reply.attr(&ATTR_TTL, &self.shared.stat(self.shared.dir_attr(ino.0)))
            }
            (CNV_FILE, _, Some(cnv)) => reply.attr(&ATTR_TTL, &self.shared.stat(self.cnv_attr(cnv))),
            (_, Some(file), _) => {
                let entries = self.shared.entries();
                reply.attr(&ATTR_TTL, &self.shared.stat(self.shared.file_attr(file, &entries[file as usize])));
            }
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _request: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        if let (CNV_FILE, Some(cnv)) = (ino.0, &self.shared.conventional) {
            // zonefs: a conventional file's size is its zone's, and no truncate changes it.
            if size.is_some_and(|size| size != cnv.size()) {
                return reply.error(Errno::EPERM);
            }
            let mut owner = cnv.owner();
            owner.0 = mode.map_or(owner.0, |mode| (mode & 0o777) as u16);
            owner.1 = uid.unwrap_or(owner.1);
            owner.2 = gid.unwrap_or(owner.2);
            drop(owner);
            return reply.attr(&ATTR_TTL, &self.shared.stat(self.cnv_attr(cnv)));
        }
        let Some(file) = self.file_of(ino) else {
            // Files cannot be created or deleted, so the directories take no write permission.
            return match mode {
                Some(mode) if mode & 0o222 != 0 => reply.error(Errno::EPERM),
                _ => reply.attr(&ATTR_TTL, &self.shared.stat(self.shared.dir_attr(ino.0))),
            };
        };
        let mut entries = self.shared.entries();
        let entry = &mut entries[file as usize];
        if entry.access != Access::Normal {
            return reply.error(Errno::EPERM);
        }
        if size.is_some() && self.shared.read_only.load(Ordering::SeqCst) {
            return reply.error(Errno::EROFS);
        }
        // Like zonefs, owner and mode live in memory only: the next mount takes them from its options again.
        if let Some(mode) = mode {
            entry.perm = (mode & 0o777) as u16;
        }
        entry.uid = uid.unwrap_or(entry.uid);
        entry.gid = gid.unwrap_or(entry.gid);
        match size {
            Some(size) => {
                drop(entries);
                self.truncate(file, size, reply);
            }
            None => reply.attr(&ATTR_TTL, &self.shared.stat(self.shared.file_attr(file, entry))),
        }
    }

    fn open(&self, _request: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        // Direct I/O only: the page cache never hides the device's timing.
        let opened = FopenFlags::FOPEN_DIRECT_IO;
        if ino.0 == CNV_FILE && self.shared.conventional.is_some() {
            if writes(flags) && self.shared.read_only.load(Ordering::SeqCst) {
                return reply.error(Errno::EROFS);
            }
            return reply.opened(FileHandle(0), opened);
        }
        let Some(file) = self.file_of(ino) else { return reply.error(Errno::EISDIR) };
        if !writes(flags) {
            return reply.opened(FileHandle(0), opened);
        }
        let mut entries = self.shared.entries();
        let entry = &mut entries[file as usize];
        if let Err(errno) = self.shared.check_writable(entry) {
            return reply.error(errno);
        }
        let open_zone = self.shared.options.explicit_open
            && entry.writers == 0
            && entry.wp_offset < self.shared.layout.capacity_bytes;
        if open_zone {
            let limit = self.shared.geometry.max_open;
            if limit != 0 && self.shared.explicitly_open.load(Ordering::SeqCst) >= limit {
                return reply.error(Errno::EBUSY);
            }
            self.shared.explicitly_open.fetch_add(1, Ordering::SeqCst);
            entry.explicitly_open = true;
        }
        entry.writers += 1;
        drop(entries);
        if !open_zone {
            return reply.opened(FileHandle(0), opened);
        }
        let open = QueuedCommand::ZoneSend {
            slba: self.shared.layout.zslba(file),
            action: ZoneSendAction::Open,
            select_all: false,
        };
        self.submit(vec![open], move |shared: Arc<Shared>, result: Result<Vec<Output>, Status>| async move {
            match result {
                Ok(_) => reply.opened(FileHandle(0), opened),
                Err(status) => {
                    let mut entries = shared.entries();
                    let entry = &mut entries[file as usize];
                    entry.writers -= 1;
                    shared.drop_explicit_open(entry);
                    reply.error(errno_of(status));
                }
            }
        });
    }

    fn release(
        &self,
        _request: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let Some(file) = self.file_of(ino) else { return reply.ok() };
        if !writes(flags) {
            return reply.ok();
        }
        let mut entries = self.shared.entries();
        let entry = &mut entries[file as usize];
        entry.writers = entry.writers.saturating_sub(1);
        if entry.writers > 0 || !entry.explicitly_open {
            return reply.ok();
        }
        self.shared.drop_explicit_open(entry);
        // A full zone is no longer open; only a zone with room left needs closing.
        let still_open = entry.wp_offset < self.shared.layout.capacity_bytes;
        drop(entries);
        if !still_open {
            return reply.ok();
        }
        let close = QueuedCommand::ZoneSend {
            slba: self.shared.layout.zslba(file),
            action: ZoneSendAction::Close,
            select_all: false,
        };
        self.submit(vec![close], move |shared: Arc<Shared>, result: Result<Vec<Output>, Status>| async move {
            {
                if result.is_err() {
                    shared.io_error(file, true).await;
                }
                reply.ok();
            }
        });
    }

    fn read(
        &self,
        _request: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if let (CNV_FILE, Some(cnv)) = (ino.0, &self.shared.conventional) {
            return self.read_conventional(cnv, offset, size, reply);
        }
        let Some(file) = self.file_of(ino) else { return reply.error(Errno::EISDIR) };
        let layout = self.shared.layout;
        let file_size = {
            let entries = self.shared.entries();
            let entry = &entries[file as usize];
            if entry.access == Access::Offline {
                return reply.error(Errno::EPERM);
            }
            entry.file.size
        };
        let mask = u64::from(layout.lba_size) - 1;
        if has_flag(flags, libc::O_DIRECT) && (offset | u64::from(size)) & mask != 0 {
            return reply.error(Errno::EINVAL);
        }
        let end = offset.saturating_add(u64::from(size)).min(file_size);
        if end <= offset {
            return reply.data(&[]);
        }
        let (slba, nlb) = layout.blocks_of(file, offset, end);
        let commands =
            layout.commands(slba, nlb).map(|(slba, nlb)| QueuedCommand::Read { slba, nlb, keep: true }).collect();
        let skip = (offset & mask) as usize;
        let len = (end - offset) as usize;
        self.submit(commands, move |shared: Arc<Shared>, result: Result<Vec<Output>, Status>| async move {
            match result {
                Ok(outputs) => reply.data(&data_of(outputs)[skip..skip + len]),
                Err(status) => {
                    shared.io_error(file, false).await;
                    reply.error(errno_of(status));
                }
            }
        });
    }

    fn write(
        &self,
        _request: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if ino.0 == CNV_FILE {
            return self.write_conventional(offset, data, reply);
        }
        let Some(file) = self.file_of(ino) else { return reply.error(Errno::EISDIR) };
        let layout = self.shared.layout;
        let mut entries = self.shared.entries();
        let entry = &mut entries[file as usize];
        if let Err(errno) = self.shared.check_writable(entry) {
            return reply.error(errno);
        }
        let append = has_flag(flags, libc::O_APPEND);
        let offset = if append { entry.wp_offset } else { offset };
        // zonefs's `zonefs_file_write_iter` refuses a write at or past the maximum size before it looks at
        // how the file was opened, so EFBIG comes before the buffered-write EIO.
        if offset >= layout.capacity_bytes {
            return reply.error(Errno::EFBIG);
        }
        // zonefs refuses buffered writes to sequential files: their write-back order is not the write order.
        if !has_flag(flags, libc::O_DIRECT) {
            return reply.error(Errno::EIO);
        }
        let submitted = FileState { size: entry.wp_offset, condition: entry.file.condition };
        let mut accepted = match layout.check_write(file, &submitted, offset, data.len() as u64) {
            Ok(accepted) => accepted,
            Err(error) => return reply.error(fs_errno(&error)),
        };
        if accepted == 0 {
            return reply.written(0);
        }
        let slba = layout.zslba(file) + (offset >> layout.lba_shift);
        let commands = if append {
            // zonefs writes an O_APPEND direct write as one Zone Append, cut short at the device's limit.
            if let Some(max_append_lba) = self.shared.geometry.max_append_lba {
                accepted = accepted.min(max_append_lba << layout.lba_shift);
            }
            let data = IoData::Bytes(data[..accepted as usize].to_vec());
            vec![QueuedCommand::Append { zslba: layout.zslba(file), data }]
        } else {
            layout
                .commands(slba, accepted >> layout.lba_shift)
                .map(|(chunk_slba, nlb)| {
                    let start = ((chunk_slba - slba) << layout.lba_shift) as usize;
                    let bytes = data[start..start + (nlb << layout.lba_shift) as usize].to_vec();
                    QueuedCommand::Write { slba: chunk_slba, data: IoData::Bytes(bytes) }
                })
                .collect()
        };
        entry.wp_offset = offset + accepted;
        drop(entries);
        let end = offset + accepted;
        self.submit(commands, move |shared: Arc<Shared>, result: Result<Vec<Output>, Status>| async move {
            // A zone written behind the file system's back takes an append where its write pointer is, not where
            // the file ends: zonefs checks where the append landed and fails it with EIO (`zonefs_file_dio_append`,
            // "Corrupted write pointer"), then handles the error as any other.
            let misplaced = |outputs: &[Output]| append && outputs.first() != Some(&Output::Appended(slba));
            match result {
                Ok(outputs) if misplaced(&outputs) => {
                    eprintln!("zonelab mount: seq/{file}: corrupted write pointer (the append landed elsewhere)");
                    shared.io_error(file, true).await;
                    reply.error(Errno::EIO);
                }
                Ok(_) => {
                    let mut entries = shared.entries();
                    let entry = &mut entries[file as usize];
                    // Completions may come out of order; a completed write means every earlier one completed too.
                    if entry.file.size < end {
                        entry.file.size = end;
                        entry.file.condition = match (end == shared.layout.capacity_bytes, entry.explicitly_open) {
                            (true, _) => ZoneState::Full,
                            (false, true) => ZoneState::ExplicitlyOpened,
                            (false, false) => ZoneState::ImplicitlyOpened,
                        };
                    }
                    reply.written(accepted as u32);
                }
                Err(status) => {
                    shared.io_error(file, true).await;
                    reply.error(errno_of(status));
                }
            }
        });
    }

    fn flush(&self, _request: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        // close(2): writes are direct, so nothing waits in a cache.
        reply.ok();
    }

    fn fsync(&self, _request: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        if let (CNV_FILE, Some(cnv)) = (ino.0, &self.shared.conventional) {
            return self.submit_on(cnv.host(), vec![QueuedCommand::Flush], move |_, result| async move {
                match result {
                    Ok(_) => reply.ok(),
                    Err(status) => reply.error(errno_of(status)),
                }
            });
        }
        let Some(file) = self.file_of(ino) else { return reply.ok() };
        if self.shared.entries()[file as usize].access != Access::Normal {
            return reply.error(Errno::EPERM);
        }
        self.submit(
            vec![QueuedCommand::Flush],
            move |shared: Arc<Shared>, result: Result<Vec<Output>, Status>| async move {
                {
                    match result {
                        Ok(_) => reply.ok(),
                        Err(status) => {
                            shared.io_error(file, true).await;
                            reply.error(errno_of(status));
                        }
                    }
                }
            },
        );
    }

    fn opendir(&self, _request: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match ino.0 {
            ROOT | SEQ_DIR => reply.opened(FileHandle(0), FopenFlags::empty()),
            CNV_DIR if self.shared.conventional.is_some() => reply.opened(FileHandle(0), FopenFlags::empty()),
            _ => reply.error(Errno::ENOTDIR),
        }
    }

    fn readdir(&self, _request: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let conventional = self.shared.conventional.is_some();
        let (parent, children) = match ino.0 {
            ROOT => (ROOT, 1 + u64::from(conventional)),
            SEQ_DIR => (ROOT, u64::from(self.shared.geometry.zones)),
            CNV_DIR if conventional => (ROOT, 1),
            _ => return reply.error(Errno::ENOTDIR),
        };
        // Entry i has offset i + 1: ".", "..", then the children.
        for index in offset..children + 2 {
            let (child, kind, name) = match index {
                0 => (ino.0, FileType::Directory, ".".to_string()),
                1 => (parent, FileType::Directory, "..".to_string()),
                2 if ino.0 == ROOT => (SEQ_DIR, FileType::Directory, "seq".to_string()),
                _ if ino.0 == ROOT => (CNV_DIR, FileType::Directory, "cnv".to_string()),
                _ if ino.0 == CNV_DIR => (CNV_FILE, FileType::RegularFile, "0".to_string()),
                _ => (FIRST_FILE + index - 2, FileType::RegularFile, (index - 2).to_string()),
            };
            if reply.add(INodeNo(self.shared.zonefs_ino(child)), index + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _request: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let shift = self.shared.layout.lba_shift;
        let zones = u64::from(self.shared.geometry.zones);
        // zonefs counts a conventional file as full: its size never changes.
        let cnv_blocks = self.shared.conventional.as_ref().map_or(0, |cnv| cnv.size() >> shift);
        let blocks = zones * (self.shared.layout.capacity_bytes >> shift) + cnv_blocks;
        let used: u64 = self.shared.entries().iter().map(|entry| entry.file.size >> shift).sum::<u64>() + cnv_blocks;
        let free = blocks.saturating_sub(used);
        let bsize = self.shared.layout.lba_size;
        reply.statfs(blocks, free, free, zones + 1, 0, bsize, NAME_MAX, bsize);
    }

    // Files are zones: none can be created, removed, renamed or linked.

    fn mknod(&self, _: &Request, _: INodeNo, _: &OsStr, _: u32, _: u32, _: u32, reply: ReplyEntry) {
        reply.error(Errno::EPERM);
    }

    fn mkdir(&self, _: &Request, _: INodeNo, _: &OsStr, _: u32, _: u32, reply: ReplyEntry) {
        reply.error(Errno::EPERM);
    }

    fn create(&self, _: &Request, _: INodeNo, _: &OsStr, _: u32, _: u32, _: i32, reply: ReplyCreate) {
        reply.error(Errno::EPERM);
    }

    fn unlink(&self, _: &Request, _: INodeNo, _: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::EPERM);
    }

    fn rmdir(&self, _: &Request, _: INodeNo, _: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::EPERM);
    }

    fn rename(&self, _: &Request, _: INodeNo, _: &OsStr, _: INodeNo, _: &OsStr, _: RenameFlags, reply: ReplyEmpty) {
        reply.error(Errno::EPERM);
    }
}

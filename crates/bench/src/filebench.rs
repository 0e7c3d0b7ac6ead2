//! The ReZNS paper's file workloads on logfs, the F2FS-like file system (seed 002, sections 4.2 and 4.3):
//! - `fio`: each job lays out its file (not timed), then for `rounds` rounds overwrites every block of it
//!   once in random order (fio's random map) in `bs` writes at queue depth 1, with an fsync every `fsync`
//!   writes; the jobs' files stay, as fio leaves them when the same job runs again.
//! - `varmail` and `fileserver`: filebench's personalities as its `varmail.f` and `fileserver.f` define them,
//!   with the paper's parameters (section 4.3: 1000 files and 16 threads for varmail; 10,000 files and 50
//!   threads for fileserver; 16 KiB appends, 1 MiB I/O). One fileset shared by all threads, 80 % of it
//!   preallocated (not timed); file sizes from filebench's gamma distribution (mean 16 KiB for varmail,
//!   128 KiB for fileserver, shape 1.5); `createfile` picks a file that does not exist, the other flowops one
//!   that does, never one another thread holds (filebench's busy flag). Every flowop counts as one operation,
//!   as filebench's IO Summary counts them; opening and closing cost nothing here.
//!
//! Host CPU: every flowop costs its system calls' CPU time (VFS work and the copy between the user's buffer
//! and the page cache), measured on Linux with `scripts/vfs_cost.c` on tmpfs, and the threads share the
//! paper's 10 cores (seed 002 section 4.1: a 10-core Xeon Gold 5215). Without it a workload that stays in the
//! page cache (fileserver never fsyncs) would run infinitely fast.

use std::cell::RefCell;
use std::rc::Rc;

use serde::Serialize;
use zonelab_logfs::{LogFs, LogFsError, LogFsStats, BLOCK};
use zonelab_runtime::rng::SplitMix64;
use zonelab_runtime::sync::Channel;
use zonelab_runtime::{CommandQueue, IoData};

use crate::filechurn::{FileChurnSpec, FileWorkload};

/// filebench's I/O size for whole-file reads and writes (`iosize=1m`).
const IO_BYTES: u64 = 1 << 20;
/// filebench's `meanappendsize=16k`: appendfilerand appends a uniformly random size up to it.
const APPEND_BYTES: u64 = 16 << 10;
/// filebench's `prealloc=80`.
const PREALLOCATED: f64 = 0.8;
/// The gamma shape of filebench's file sizes (`cvar-gamma`, `gamma:1.5`).
const SIZE_SHAPE: f64 = 1.5;

// Host CPU per system call, measured with `scripts/vfs_cost.c` on tmpfs (Linux 6.x, a core of an AMD EPYC
// virtual machine; the run is in docs/logfs.md): the means of 40,000 calls each.
/// `open(O_CREAT)` and `close` of a new file.
const CREATE_NS: u64 = 4_600;
/// `open` and `close` of an existing file.
const OPEN_CLOSE_NS: u64 = 1_900;
/// `stat` of a cached inode.
const STAT_NS: u64 = 950;
/// `unlink` of an empty file.
const UNLINK_NS: u64 = 4_700;
/// A `pread` or `pwrite` call without its copy: a 4 KiB `pwrite` (1.7 us) less 4 KiB at the copy rate.
const IO_CALL_NS: u64 = 1_170;
/// Copy into the page cache (1 MiB `pwrite`s: 0.13 ns per byte).
const WRITE_PS_PER_BYTE: u64 = 130;
/// Copy out of the page cache (1 MiB `pread`s: 0.09 ns per byte).
const READ_PS_PER_BYTE: u64 = 90;
/// The paper's host: a 10-core Xeon Gold 5215 (seed 002 section 4.1).
pub const PAPER_CORES: u32 = 10;

/// What the jobs did, counted as they went.
#[derive(Clone, Debug, Default)]
pub struct Counts {
    pub flowops: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub windows: WriteWindows,
}

/// The fio workload's writes cut into consecutive windows of equal bytes, as block-interface-tax reads a run
/// over time: each window's write() and fsync() calls (a call's latency includes any cleaning or writeback it
/// waited for) and what logfs wrote to the device meanwhile.
#[derive(Clone, Debug, Default)]
pub struct WriteWindows {
    /// Bytes the jobs write in each window; 0 keeps no windows.
    pub window_bytes: u64,
    /// When the window being written began, and logfs's counters then.
    begun: Option<(u64, LogFsStats)>,
    bytes: u64,
    writes: u64,
    latencies: zonelab_fio::LatencyStats,
    pub closed: Vec<WriteWindow>,
}

/// One window of writes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WriteWindow {
    pub bytes_written: u64,
    pub device_time_ns: u64,
    /// Thousands of write() calls a second of device time.
    pub kiops: f64,
    /// The latency of the window's write() and fsync() calls.
    pub p99_9_us: f64,
    pub max_us: f64,
    /// Blocks logfs wrote to the device (data, the cleaner's moves, nodes, checkpoints) per block written.
    pub host_waf: f64,
    pub blocks_moved: u64,
}

impl WriteWindows {
    /// Starts the first window at `now_ns` (the first job to start does; later ones find it started).
    pub fn start(&mut self, now_ns: u64, stats: LogFsStats) {
        if self.window_bytes > 0 && self.begun.is_none() {
            self.begun = Some((now_ns, stats));
        }
    }

    /// Counts a write() of `bytes` (or an fsync(), of none) that took from `began_ns` to `ended_ns`; closes the
    /// window a write fills, with logfs's counters (`stats`) at its end.
    pub fn note(&mut self, began_ns: u64, ended_ns: u64, bytes: u64, stats: impl FnOnce() -> LogFsStats) {
        let Some((start_ns, before)) = &self.begun else { return };
        self.latencies.record(ended_ns - began_ns);
        self.bytes += bytes;
        self.writes += u64::from(bytes > 0);
        if self.bytes < self.window_bytes {
            return;
        }
        let after = stats();
        let device_time_ns = ended_ns - start_ns;
        let written_blocks = (after.data_blocks_written - before.data_blocks_written)
            + (after.node_blocks_written - before.node_blocks_written)
            + (after.checkpoint_blocks_written - before.checkpoint_blocks_written);
        self.closed.push(WriteWindow {
            bytes_written: self.bytes,
            device_time_ns,
            kiops: self.writes as f64 / (device_time_ns as f64 / 1e9) / 1e3,
            p99_9_us: self.latencies.percentile(99.9) as f64 / 1e3,
            max_us: self.latencies.max() as f64 / 1e3,
            host_waf: written_blocks as f64 / (self.bytes / BLOCK) as f64,
            blocks_moved: after.blocks_moved - before.blocks_moved,
        });
        self.begun = Some((ended_ns, after));
        (self.bytes, self.writes) = (0, 0);
        self.latencies = zonelab_fio::LatencyStats::default();
    }
}

type Shared<T> = Rc<RefCell<T>>;

/// One file of a fileset.
struct Entry {
    name: String,
    exists: bool,
    busy: bool,
    size: u64,
}

/// filebench's fileset: the entries all threads pick from.
pub struct Fileset {
    entries: Vec<Entry>,
}

fn uniform(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// A gamma variate of shape `shape` (at least 1) and mean `mean` (Marsaglia and Tsang, 2000).
fn gamma(rng: &mut SplitMix64, shape: f64, mean: f64) -> f64 {
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let normal = (-2.0 * (1.0 - uniform(rng)).ln()).sqrt() * (2.0 * std::f64::consts::PI * uniform(rng)).cos();
        let v = (1.0 + c * normal).powi(3);
        if v > 0.0 && (1.0 - uniform(rng)).ln() < 0.5 * normal * normal + d - d * v + d * v.ln() {
            return d * v * mean / shape;
        }
    }
}

impl Fileset {
    fn new(files: u32, mean_bytes: u64, rng: &mut SplitMix64) -> Fileset {
        let entries = (0..files)
            .map(|i| Entry {
                name: format!("f{i:06}"),
                exists: false,
                busy: false,
                size: (gamma(rng, SIZE_SHAPE, mean_bytes as f64) as u64).max(1),
            })
            .collect();
        Fileset { entries }
    }

    /// A random entry that exists (or not) and no thread holds; it is held until `release`.
    fn pick(&mut self, exists: bool, rng: &mut SplitMix64) -> Option<usize> {
        let n = self.entries.len();
        let fits = |e: &Entry| e.exists == exists && !e.busy;
        let mut found = (0..64).map(|_| rng.below(n as u64) as usize).find(|&i| fits(&self.entries[i]));
        if found.is_none() {
            let start = rng.below(n as u64) as usize;
            found = (0..n).map(|k| (start + k) % n).find(|&i| fits(&self.entries[i]));
        }
        let index = found?;
        self.entries[index].busy = true;
        Some(index)
    }

    fn release(&mut self, index: usize) {
        self.entries[index].busy = false;
    }
}

/// The host's cores: a system call's CPU time waits for a free one, first come first served.
pub struct Cores {
    busy: Channel<()>,
}

impl Cores {
    pub fn new(cores: u32) -> Cores {
        Cores { busy: Channel::bounded(cores as usize) }
    }

    async fn run<Q: CommandQueue>(&self, queue: &Q, ns: u64) {
        self.busy.send(()).await.expect("the cores are never closed");
        queue.sleep(ns).await;
        self.busy.recv().await;
    }
}

/// logfs through system calls: a timed call first spends its CPU time on one of the host's cores (set-up is
/// not timed, as benchmarks do not time theirs).
pub struct Vfs<'a, Q> {
    fs: &'a LogFs<Q>,
    cores: Option<&'a Cores>,
}

impl<'a, Q: CommandQueue> Vfs<'a, Q> {
    pub fn timed(fs: &'a LogFs<Q>, cores: &'a Cores) -> Self {
        Vfs { fs, cores: Some(cores) }
    }

    pub fn untimed(fs: &'a LogFs<Q>) -> Self {
        Vfs { fs, cores: None }
    }

    fn now_ns(&self) -> u64 {
        self.fs.device().now_ns()
    }

    async fn cpu(&self, ns: u64) {
        if let Some(cores) = self.cores {
            cores.run(self.fs.device(), ns).await;
        }
    }

    async fn create(&self, name: &str) -> Result<(), LogFsError> {
        self.cpu(CREATE_NS).await;
        self.fs.create(name).await
    }

    async fn open_close(&self) {
        self.cpu(OPEN_CLOSE_NS).await;
    }

    async fn unlink(&self, name: &str) -> Result<(), LogFsError> {
        self.cpu(UNLINK_NS).await;
        self.fs.unlink(name).await
    }

    async fn size(&self, name: &str) -> Result<u64, LogFsError> {
        self.cpu(STAT_NS).await;
        Ok(self.fs.stat(name)?.size)
    }

    async fn write(&self, name: &str, offset: u64, len: u64) -> Result<(), LogFsError> {
        self.cpu(IO_CALL_NS + len * WRITE_PS_PER_BYTE / 1000).await;
        self.fs.write(name, offset, IoData::Zeros(len)).await.map(|_| ())
    }

    async fn read(&self, name: &str, offset: u64, len: u64) -> Result<u64, LogFsError> {
        let got = self.fs.read(name, offset, len).await?.len() as u64;
        self.cpu(IO_CALL_NS + got * READ_PS_PER_BYTE / 1000).await;
        Ok(got)
    }

    async fn fsync(&self, name: &str) -> Result<(), LogFsError> {
        self.cpu(IO_CALL_NS).await;
        self.fs.fsync(name).await
    }
}

/// Writes `len` bytes at `offset` in I/O-size pieces.
async fn write_whole<Q: CommandQueue>(vfs: &Vfs<'_, Q>, name: &str, offset: u64, len: u64) -> Result<(), LogFsError> {
    let mut done = 0;
    while done < len {
        let piece = (len - done).min(IO_BYTES);
        vfs.write(name, offset + done, piece).await?;
        done += piece;
    }
    Ok(())
}

async fn read_whole<Q: CommandQueue>(vfs: &Vfs<'_, Q>, name: &str) -> Result<u64, LogFsError> {
    let size = vfs.size(name).await?;
    let mut done = 0;
    while done < size {
        let got = vfs.read(name, done, IO_BYTES).await?;
        if got == 0 {
            break;
        }
        done += got;
    }
    Ok(done)
}

/// The fileset before the run: 80 % of the files created and written (filebench's preallocation).
pub async fn preallocate<Q: CommandQueue>(
    fs: &LogFs<Q>,
    fileset: &Shared<Fileset>,
    rng: &mut SplitMix64,
) -> Result<(), LogFsError> {
    let vfs = Vfs::untimed(fs);
    let n = fileset.borrow().entries.len();
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    for &index in order.iter().take((n as f64 * PREALLOCATED).round() as usize) {
        let (name, size) = {
            let set = fileset.borrow();
            (set.entries[index].name.clone(), set.entries[index].size)
        };
        vfs.create(&name).await?;
        write_whole(&vfs, &name, 0, size).await?;
        fileset.borrow_mut().entries[index].exists = true;
    }
    fs.sync().await
}

/// The fileset a workload uses, sized as the paper ran it.
pub fn fileset_for(spec: &FileChurnSpec, rng: &mut SplitMix64) -> Shared<Fileset> {
    let mean = if spec.workload == FileWorkload::Varmail { 16 << 10 } else { 128 << 10 };
    Rc::new(RefCell::new(Fileset::new(spec.fileset_files, mean, rng)))
}

/// Holds a picked entry until dropped.
struct Held<'a> {
    set: &'a Shared<Fileset>,
    index: usize,
    name: String,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.set.borrow_mut().release(self.index);
    }
}

fn hold<'a>(set: &'a Shared<Fileset>, exists: bool, rng: &mut SplitMix64) -> Option<Held<'a>> {
    let index = set.borrow_mut().pick(exists, rng)?;
    let name = set.borrow().entries[index].name.clone();
    Some(Held { set, index, name })
}

async fn append_random<Q: CommandQueue>(
    vfs: &Vfs<'_, Q>,
    name: &str,
    rng: &mut SplitMix64,
    counts: &Shared<Counts>,
) -> Result<(), LogFsError> {
    let len = 1 + rng.below(APPEND_BYTES);
    let size = vfs.size(name).await?;
    vfs.write(name, size, len).await?;
    counts.borrow_mut().bytes_written += len;
    Ok(())
}

/// Opens a file, reads it whole and closes it.
async fn read_file<Q: CommandQueue>(vfs: &Vfs<'_, Q>, name: &str, counts: &Shared<Counts>) -> Result<(), LogFsError> {
    vfs.open_close().await;
    counts.borrow_mut().bytes_read += read_whole(vfs, name).await?;
    Ok(())
}

/// A pass in which every pick found its file busy or missing still costs a thread its time, as filebench's
/// threads spend it looking; without it such a pass would take no time at all.
async fn idle_pass<Q: CommandQueue>(vfs: &Vfs<'_, Q>, flowops: u64) {
    if flowops == 0 {
        vfs.open_close().await;
    }
}

/// One pass of varmail.f's flowops.
pub async fn varmail<Q: CommandQueue>(
    vfs: &Vfs<'_, Q>,
    set: &Shared<Fileset>,
    rng: &mut SplitMix64,
    counts: &Shared<Counts>,
) -> Result<(), LogFsError> {
    let mut flowops = 0;
    if let Some(held) = hold(set, true, rng) {
        vfs.unlink(&held.name).await?;
        set.borrow_mut().entries[held.index].exists = false;
        flowops += 1; // deletefile
    }
    if let Some(held) = hold(set, false, rng) {
        vfs.create(&held.name).await?;
        set.borrow_mut().entries[held.index].exists = true;
        append_random(vfs, &held.name, rng, counts).await?;
        vfs.fsync(&held.name).await?;
        flowops += 4; // createfile, appendfilerand, fsync, closefile
    }
    if let Some(held) = hold(set, true, rng) {
        vfs.open_close().await;
        counts.borrow_mut().bytes_read += read_whole(vfs, &held.name).await?;
        append_random(vfs, &held.name, rng, counts).await?;
        vfs.fsync(&held.name).await?;
        flowops += 5; // openfile, readwholefile, appendfilerand, fsync, closefile
    }
    if let Some(held) = hold(set, true, rng) {
        read_file(vfs, &held.name, counts).await?;
        flowops += 3; // openfile, readwholefile, closefile
    }
    idle_pass(vfs, flowops).await;
    counts.borrow_mut().flowops += flowops;
    Ok(())
}

/// One pass of fileserver.f's flowops.
pub async fn fileserver<Q: CommandQueue>(
    vfs: &Vfs<'_, Q>,
    set: &Shared<Fileset>,
    rng: &mut SplitMix64,
    counts: &Shared<Counts>,
) -> Result<(), LogFsError> {
    let mut flowops = 0;
    if let Some(held) = hold(set, false, rng) {
        vfs.create(&held.name).await?;
        set.borrow_mut().entries[held.index].exists = true;
        let size = set.borrow().entries[held.index].size;
        write_whole(vfs, &held.name, 0, size).await?;
        counts.borrow_mut().bytes_written += size;
        flowops += 3; // createfile, writewholefile, closefile
    }
    if let Some(held) = hold(set, true, rng) {
        vfs.open_close().await;
        append_random(vfs, &held.name, rng, counts).await?;
        flowops += 3; // openfile, appendfilerand, closefile
    }
    if let Some(held) = hold(set, true, rng) {
        read_file(vfs, &held.name, counts).await?;
        flowops += 3; // openfile, readwholefile, closefile
    }
    if let Some(held) = hold(set, true, rng) {
        vfs.unlink(&held.name).await?;
        set.borrow_mut().entries[held.index].exists = false;
        flowops += 1; // deletefile
    }
    if let Some(held) = hold(set, true, rng) {
        vfs.size(&held.name).await?;
        flowops += 1; // statfile
    }
    idle_pass(vfs, flowops).await;
    counts.borrow_mut().flowops += flowops;
    Ok(())
}

/// The paper's fio job on one file: `rounds` passes of random overwrites, an fsync every `fsync_every` writes.
pub async fn overwrite_rounds<Q: CommandQueue>(
    vfs: &Vfs<'_, Q>,
    name: &str,
    spec: &FileChurnSpec,
    rng: &mut SplitMix64,
    counts: &Shared<Counts>,
) -> Result<(), LogFsError> {
    let blocks = spec.file_bytes / spec.write_bytes;
    let mut order: Vec<u64> = (0..blocks).collect();
    counts.borrow_mut().windows.start(vfs.now_ns(), vfs.fs.stats());
    for _ in 0..spec.rounds {
        rng.shuffle(&mut order);
        for (k, &block) in order.iter().enumerate() {
            let began_ns = vfs.now_ns();
            vfs.write(name, block * spec.write_bytes, spec.write_bytes).await?;
            {
                let mut c = counts.borrow_mut();
                c.bytes_written += spec.write_bytes;
                c.flowops += 1;
                c.windows.note(began_ns, vfs.now_ns(), spec.write_bytes, || vfs.fs.stats());
            }
            if spec.fsync_every > 0 && (k as u64 + 1).is_multiple_of(spec.fsync_every) {
                let began_ns = vfs.now_ns();
                vfs.fsync(name).await?;
                let mut c = counts.borrow_mut();
                c.flowops += 1;
                c.windows.note(began_ns, vfs.now_ns(), 0, || vfs.fs.stats());
            }
        }
    }
    Ok(())
}

/// fio's layout of a job's file (before the timed run).
pub async fn lay_out<Q: CommandQueue>(fs: &LogFs<Q>, name: &str, bytes: u64) -> Result<(), LogFsError> {
    let vfs = Vfs::untimed(fs);
    vfs.create(name).await?;
    write_whole(&vfs, name, 0, bytes).await?;
    fs.fsync(name).await
}

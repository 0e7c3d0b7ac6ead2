//! `zonelab kv-bench`: RocksDB's write path in virtual time, on zonedfs, for the ZINC slides' workload-level
//! table. db_bench `fillrandom` shaped: writer threads put key-value pairs (host CPU per put, a record appended
//! to the WAL file), a memtable that is flushed to an L0 SST when full (writers stall while the one immutable
//! memtable RocksDB allows is still being flushed), and leveled compaction that reads SSTs, merges them (host
//! CPU per byte) and writes new ones, deleting its inputs, so that zonedfs resets the zones they emptied. A reset
//! load can run beside it on zones the file system leaves alone, through the same I/O scheduler.
//!
//! RocksDB's defaults (7.8, `options.h`): 64 MiB memtables, two of them at most, 64 MiB SSTs, L0 compaction at
//! 4 files, 256 MiB for L1 and 10x per level; one flush and one compaction at a time (`max_background_jobs` 2).
//! Write-lifetime hints as RocksDB gives them: the WAL short, L0 and L1 medium, L2 long, deeper levels extreme.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use serde::Serialize;
use zonelab_device::{DeviceBuilder, DeviceSpec, HostPath, StoreChoice, TRACE_LIMIT};

use crate::zonemap::{draw, summarize, zone_map, MapSummary};
use zonelab_host::trace::{write_device_trace, OperationSpan};
use zonelab_host::{run_reset_load, ResetLoadStats, Scheduled, SchedulerKind};
use zonelab_runtime::sync::{Channel, Mutex, Notify};
use zonelab_runtime::{CommandQueue, Simulation};
use zonelab_zonedfs::{FsOptions, FsStats, OpenMode, ZonedFs};

use crate::args::{take, Slot, ToolError, ToolOption};
use zonelab_fio::LatencyStats;

/// RocksDB's write-lifetime hints (`Env::WriteLifeTimeHint`), which zonedfs places by.
const LIFETIME_SHORT: u8 = 2;
const LIFETIME_MEDIUM: u8 = 3;
const LIFETIME_LONG: u8 = 4;
const LIFETIME_EXTREME: u8 = 5;

/// Bytes moved per file system call when an SST is written or read: RocksDB's writable file buffer
/// (`writable_file_max_buffer_size`, 1 MiB by default); compaction reads its inputs in the same pieces.
const IO_CHUNK_BYTES: u64 = 1 << 20;

/// A WAL record's framing beyond key and value (RocksDB's 7-byte record header and the write batch's 12-byte
/// header and per-entry tag and lengths): about 24 bytes.
const WAL_RECORD_OVERHEAD_BYTES: u64 = 24;

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KvBenchSpec {
    /// A preset spec (`NAME[,key=value...]`); its data is not kept (the null store).
    pub preset: String,
    pub scheduler: SchedulerKind,
    /// db_bench `--threads`.
    pub writers: u32,
    pub key_bytes: u64,
    pub value_bytes: u64,
    /// Host CPU per put on its writer's core (memtable insert, write batch, the WAL record's encoding). Default
    /// 12.56 us, fitted: one unsynced writer on zn540 then makes the ZINC slides' 78.9 KIOPS with no resets.
    pub put_cost_ns: u64,
    /// db_bench `--sync`: each put returns once its WAL record is durable (a WAL sync, shared by the puts
    /// that queued behind it, as RocksDB's group commit shares one).
    pub sync: bool,
    pub memtable_bytes: u64,
    pub sst_bytes: u64,
    pub l0_trigger: u32,
    pub level_base_bytes: u64,
    pub level_multiplier: u64,
    /// Host CPU of flushing and compaction per KiB they write (building SST blocks, merging). Default 1.9 us:
    /// RocksDB 7.8.3's own compaction statistics on this project's 2-core machine (db_bench fillrandom,compact
    /// of 1,000,000 400-byte values on tmpfs, no compression) give 0.65 s of merge CPU for the 376 MB its
    /// flushes wrote (1.77 us/KiB) and 0.87 s for the 441 MB its L0-L1 compactions wrote (2.02 us/KiB).
    pub build_cost_ns_per_kib: u64,
    pub runtime_ns: u64,
    /// Zone resets a second beside the database, of full zones at the end of the device (0: none).
    pub resets_per_second: f64,
    /// Zones at the end of the device that the reset load resets, prefilled full; zonedfs never writes them.
    pub reset_pool_zones: u32,
    pub seed: u64,
    pub json: bool,
    /// Give files RocksDB's write-lifetime hints (zonedfs groups files of a lifetime in zones), or none.
    pub lifetime_hints: bool,
    /// Draw the zone-utilization map at the end into this PNG.
    pub map: Option<std::path::PathBuf>,
    /// Write the device's commands and flash operations as a Perfetto trace here (`zonelab_host::trace::write_device_trace`).
    #[serde(skip)]
    pub trace: Option<std::path::PathBuf>,
}

impl Default for KvBenchSpec {
    fn default() -> Self {
        KvBenchSpec {
            preset: "zn540,zones=64".into(),
            scheduler: SchedulerKind::MqDeadline,
            writers: 1,
            key_bytes: 16,
            value_bytes: 100,
            put_cost_ns: 12_560,
            sync: false,
            memtable_bytes: 64 << 20,
            sst_bytes: 64 << 20,
            l0_trigger: 4,
            level_base_bytes: 256 << 20,
            level_multiplier: 10,
            build_cost_ns_per_kib: 1_900,
            runtime_ns: 30_000_000_000,
            resets_per_second: 0.0,
            reset_pool_zones: 8,
            seed: 1,
            json: false,
            lifetime_hints: true,
            map: None,
            trace: None,
        }
    }
}

impl KvBenchSpec {
    /// The hint a file of `lifetime` gets: RocksDB's, or none (0) without hints.
    fn hint(&self, lifetime: u8) -> u8 {
        if self.lifetime_hints {
            lifetime
        } else {
            0
        }
    }
}

/// Parses `--key=value` options; an unknown option is an error that names it.
pub fn parse_args(args: &[String]) -> Result<KvBenchSpec, ToolError> {
    let mut spec = KvBenchSpec::default();
    for arg in args {
        let option = ToolOption::parse(arg)?;
        match option.key {
            "preset" => spec.preset = option.value()?.to_string(),
            "scheduler" => {
                let name = option.value()?;
                spec.scheduler = SchedulerKind::parse(name).ok_or_else(|| {
                    ToolError::Usage(format!("option scheduler: {name:?} is not none, mq-deadline or zinc"))
                })?
            }
            "threads" => spec.writers = option.number()?,
            "key-size" => spec.key_bytes = option.bytes()?,
            "value-size" => spec.value_bytes = option.bytes()?,
            "put-cost-us" => spec.put_cost_ns = option.host_time_ns()?,
            "sync" => spec.sync = option.number::<u8>()? != 0,
            "build-cost-us-per-kib" => spec.build_cost_ns_per_kib = option.host_time_ns()?,
            "memtable-size" => spec.memtable_bytes = option.bytes()?,
            "sst-size" => spec.sst_bytes = option.bytes()?,
            "l0-trigger" => spec.l0_trigger = option.number()?,
            "level-base-size" => spec.level_base_bytes = option.bytes()?,
            "level-multiplier" => spec.level_multiplier = option.number()?,
            "runtime" => spec.runtime_ns = option.run_time_ns()?,
            "resets-per-second" => spec.resets_per_second = option.number()?,
            "reset-pool-zones" => spec.reset_pool_zones = option.number()?,
            "seed" => spec.seed = option.number()?,
            "output-format" => spec.json = option.json()?,
            "lifetime-hints" => spec.lifetime_hints = option.number::<u8>()? != 0,
            "map" => spec.map = Some(option.value()?.into()),
            "trace" => spec.trace = Some(option.value()?.into()),
            _ => return Err(option.unknown()),
        }
    }
    let positive = [
        ("threads", u64::from(spec.writers)),
        ("key-size", spec.key_bytes),
        ("value-size", spec.value_bytes),
        ("memtable-size", spec.memtable_bytes),
        ("sst-size", spec.sst_bytes),
        ("l0-trigger", u64::from(spec.l0_trigger)),
        ("level-base-size", spec.level_base_bytes),
        ("level-multiplier", spec.level_multiplier),
        ("runtime", spec.runtime_ns),
    ];
    if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
        return Err(ToolError::Usage(format!("option {name} must be positive")));
    }
    if spec.writers > 1024 || spec.key_bytes + spec.value_bytes > IO_CHUNK_BYTES {
        return Err(ToolError::Usage("at most 1024 threads, and a key and value of at most 1 MiB".into()));
    }
    if !(0.0..=1e6).contains(&spec.resets_per_second) {
        return Err(ToolError::Usage(format!("option resets-per-second: {} is not 0 to 1e6", spec.resets_per_second)));
    }
    Ok(spec)
}

/// What a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct KvBenchResult {
    pub spec: KvBenchSpec,
    pub puts: u64,
    pub kiops: f64,
    #[serde(skip)]
    pub put_latency: LatencyStats,
    /// Device time writers spent waiting for a memtable to be flushed.
    pub stall_ns: u64,
    pub flushes: u64,
    pub compactions: u64,
    pub compaction_bytes_written: u64,
    /// Files in each level at the end.
    pub level_files: Vec<usize>,
    pub fs: FsStats,
    /// Which files share which zones at the end (`zonemap`).
    pub zones: MapSummary,
    pub reset_load: ResetLoadStats,
    /// Blocks the device erased and the energy of its flash operations over the run (the reset pool's prefill
    /// included): what ReZNS's renewed zones save where a host resets zones it had not filled.
    pub blocks_erased: u64,
    pub energy_j: f64,
    pub wall_seconds: f64,
}

/// An SST file: its name and size.
#[derive(Clone, Debug)]
struct Sst {
    name: String,
    bytes: u64,
}

/// What the writers, the flush and the compaction share.
struct Db<Q> {
    fs: ZonedFs<Q>,
    spec: KvBenchSpec,
    /// The WAL file of the active memtable and the bytes put into that memtable; writers take it in turn, as
    /// RocksDB's write group leader writes the WAL for the group.
    active: Mutex<Active>,
    /// WAL bytes of puts not written yet, and the puts counted in order: issued, and written (and synced).
    wal_pending_bytes: Cell<u64>,
    puts_issued: Cell<u64>,
    puts_logged: Cell<u64>,
    /// Immutable memtables not flushed yet (RocksDB allows one beside the active one).
    immutable: Cell<u32>,
    flushed: Notify,
    flush_jobs: Channel<String>,
    levels: RefCell<Vec<Vec<Sst>>>,
    work: Notify,
    next_file: Cell<u64>,
    running: Cell<bool>,
    puts: Cell<u64>,
    stall_ns: Cell<u64>,
    flushes: Cell<u64>,
    compactions: Cell<u64>,
    compaction_bytes_written: Cell<u64>,
    /// Each flush and compaction with its span in device time, when the run is traced.
    operations: Option<RefCell<Vec<OperationSpan>>>,
    /// The simulation tasks of the flush and compaction threads, which the trace joins to the commands they
    /// submitted.
    flush_task: Cell<Option<u32>>,
    compaction_task: Cell<Option<u32>>,
}

struct Active {
    wal_name: String,
    wal: u64,
    bytes: u64,
}

impl<Q: CommandQueue + Clone + 'static> Db<Q> {
    /// Formats zonedfs on the device and opens the first memtable's WAL.
    async fn open(queue: Q, options: FsOptions, spec: KvBenchSpec) -> Result<Rc<Db<Q>>, ToolError> {
        let traced = spec.trace.is_some();
        let fs = ZonedFs::format(queue, options).await?;
        if traced {
            fs.record_activity();
        }
        fs.mkdir("/db").await?;
        let wal_name = "/db/000000.log".to_string();
        let wal = fs.open_write(&wal_name, spec.hint(LIFETIME_SHORT), OpenMode::Truncate).await?;
        Ok(Rc::new(Db {
            fs,
            spec,
            active: Mutex::new(Active { wal_name, wal, bytes: 0 }),
            wal_pending_bytes: Cell::new(0),
            puts_issued: Cell::new(0),
            puts_logged: Cell::new(0),
            immutable: Cell::new(0),
            flushed: Notify::new(),
            flush_jobs: Channel::bounded(2),
            levels: RefCell::new(vec![Vec::new(), Vec::new()]),
            work: Notify::new(),
            next_file: Cell::new(1),
            running: Cell::new(true),
            puts: Cell::new(0),
            stall_ns: Cell::new(0),
            flushes: Cell::new(0),
            compactions: Cell::new(0),
            compaction_bytes_written: Cell::new(0),
            operations: traced.then(|| RefCell::new(Vec::new())),
            flush_task: Cell::new(None),
            compaction_task: Cell::new(None),
        }))
    }

    /// The writers are done: the flush thread ends once its queue is empty, compaction after the one it runs.
    fn stop(&self) {
        self.running.set(false);
        self.flush_jobs.close();
        self.work.notify_waiters();
    }

    /// Immutable memtables not flushed (a run that ends with some has a task that waited forever).
    fn has_unflushed_memtables(&self) -> bool {
        self.immutable.get() != 0
    }

    fn file_name(&self, suffix: &str) -> String {
        let number = self.next_file.get();
        self.next_file.set(number + 1);
        format!("/db/{number:06}.{suffix}")
    }

    /// One put: its CPU, then its record in the WAL and the memtable; a full memtable is switched for a new
    /// one (and a new WAL) once the previous immutable one is flushed. The writer that takes the WAL writes
    /// the records of every put queued so far (RocksDB's write group), and syncs them if asked.
    async fn put(&self, queue: &Q) -> Result<(), ToolError> {
        let spec = &self.spec;
        let (started, task) = (queue.now_ns(), queue.task());
        let mut logged = None;
        queue.sleep(spec.put_cost_ns).await;
        self.wal_pending_bytes
            .set(self.wal_pending_bytes.get() + spec.key_bytes + spec.value_bytes + WAL_RECORD_OVERHEAD_BYTES);
        self.puts_issued.set(self.puts_issued.get() + 1);
        let ticket = self.puts_issued.get();
        let mut active = self.active.lock().await;
        if self.puts_logged.get() < ticket {
            let group = self.puts_issued.get();
            let bytes = self.wal_pending_bytes.replace(0);
            self.fs.append(active.wal, &vec![0u8; bytes as usize]).await?;
            if spec.sync {
                self.fs.sync(active.wal).await?;
            }
            logged = Some((group - self.puts_logged.get(), bytes));
            self.puts_logged.set(group);
        }
        active.bytes += spec.key_bytes + spec.value_bytes;
        if active.bytes >= spec.memtable_bytes {
            let stalled = queue.now_ns();
            while self.immutable.get() >= 1 {
                self.flushed.notified().await;
            }
            self.stall_ns.set(self.stall_ns.get() + queue.now_ns() - stalled);
            let wal_name = self.file_name("log");
            let wal = self.fs.open_write(&wal_name, self.spec.hint(LIFETIME_SHORT), OpenMode::Truncate).await?;
            let full = std::mem::replace(&mut *active, Active { wal_name, wal, bytes: 0 });
            self.fs.close(full.wal).await?;
            self.immutable.set(self.immutable.get() + 1);
            let _ = self.flush_jobs.send(full.wal_name).await;
        }
        // The puts of the trace's window (it ends at the device's bound of commands, which so many puts pass).
        if self.operations.as_ref().is_some_and(|operations| operations.borrow().len() < TRACE_LIMIT) {
            let name = match logged {
                Some((puts, bytes)) => format!("put, appending {puts} puts to the WAL ({bytes} B)"),
                None => "put".to_string(),
            };
            self.record("puts", name, task, started, queue.now_ns());
        }
        Ok(())
    }

    /// Writes `bytes` of a new SST at `level` in chunks, with the CPU of building it; returns the file.
    async fn write_sst(&self, queue: &Q, level: usize, bytes: u64) -> Result<Sst, ToolError> {
        let lifetime = match level {
            0 | 1 => LIFETIME_MEDIUM,
            2 => LIFETIME_LONG,
            _ => LIFETIME_EXTREME,
        };
        let name = self.file_name("sst");
        let file = self.fs.open_write(&name, self.spec.hint(lifetime), OpenMode::Truncate).await?;
        let mut written = 0;
        while written < bytes {
            let chunk = IO_CHUNK_BYTES.min(bytes - written);
            queue.sleep(self.spec.build_cost_ns_per_kib * chunk / 1024).await;
            self.fs.append(file, &vec![0u8; chunk as usize]).await?;
            written += chunk;
        }
        self.fs.sync(file).await?;
        self.fs.close(file).await?;
        Ok(Sst { name, bytes })
    }

    /// The flush thread: each immutable memtable becomes an L0 SST, and its WAL is deleted.
    async fn flush_thread(&self, queue: &Q) -> Result<(), ToolError> {
        while let Some(wal_name) = self.flush_jobs.recv().await {
            let started = queue.now_ns();
            let sst = self.write_sst(queue, 0, self.spec.memtable_bytes).await?;
            self.fs.delete(&wal_name).await?;
            let name = format!("flush to L0 ({})", sst.name);
            self.record("flush", name, self.flush_task.get(), started, queue.now_ns());
            self.levels.borrow_mut()[0].push(sst);
            self.flushes.set(self.flushes.get() + 1);
            self.immutable.set(self.immutable.get() - 1);
            self.flushed.notify_waiters();
            self.work.notify_waiters();
        }
        Ok(())
    }

    /// The next compaction, as RocksDB's leveled compaction picks it: L0 into L1 once L0 has `l0_trigger`
    /// files, else the oldest file of the first level over its target into the next, with the files of that
    /// level it overlaps (about `level_multiplier` of them, keys being uniform).
    fn pick(&self) -> Option<(usize, Vec<Sst>)> {
        let mut levels = self.levels.borrow_mut();
        let spec = &self.spec;
        if levels[0].len() >= spec.l0_trigger as usize {
            let mut inputs: Vec<Sst> = levels[0].drain(..).collect();
            inputs.append(&mut levels[1]);
            return Some((1, inputs));
        }
        let mut target = spec.level_base_bytes;
        for level in 1..levels.len() {
            let bytes: u64 = levels[level].iter().map(|sst| sst.bytes).sum();
            if bytes > target {
                if level + 1 == levels.len() {
                    levels.push(Vec::new());
                }
                let mut inputs = vec![levels[level].remove(0)];
                let overlapping = (spec.level_multiplier as usize).min(levels[level + 1].len());
                inputs.extend(levels[level + 1].drain(..overlapping));
                return Some((level + 1, inputs));
            }
            target = target.saturating_mul(spec.level_multiplier);
        }
        None
    }

    /// The compaction thread: reads its inputs, writes their merge as SSTs of the output level, and deletes
    /// the inputs (zonedfs resets the zones they leave empty).
    async fn compaction_thread(&self, queue: &Q) -> Result<(), ToolError> {
        loop {
            if !self.running.get() {
                return Ok(());
            }
            let Some((level, inputs)) = self.pick() else {
                self.work.notified().await;
                continue;
            };
            let started = queue.now_ns();
            let mut total = 0;
            for input in &inputs {
                let file = self.fs.open_read(&input.name)?;
                let mut offset = 0;
                while offset < input.bytes {
                    let chunk = IO_CHUNK_BYTES.min(input.bytes - offset);
                    self.fs.read(file, offset, chunk).await?;
                    offset += chunk;
                }
                self.fs.close(file).await?;
                total += input.bytes;
            }
            let mut outputs = Vec::new();
            let mut left = total;
            while left > 0 {
                let bytes = self.spec.sst_bytes.min(left);
                outputs.push(self.write_sst(queue, level, bytes).await?);
                left -= bytes;
            }
            for input in &inputs {
                self.fs.delete(&input.name).await?;
            }
            let mut levels = self.levels.borrow_mut();
            levels[level].extend(outputs);
            drop(levels);
            self.compactions.set(self.compactions.get() + 1);
            self.compaction_bytes_written.set(self.compaction_bytes_written.get() + total);
            let name = format!("compaction into L{level} ({} files, {} KiB)", inputs.len(), total >> 10);
            self.record("compaction", name, self.compaction_task.get(), started, queue.now_ns());
        }
    }

    /// Notes an operation of simulation task `task` for the trace, when the run is traced.
    fn record(&self, track: &'static str, name: String, task: Option<u32>, start_ns: u64, end_ns: u64) {
        if let Some(operations) = &self.operations {
            operations.borrow_mut().push(OperationSpan { track: track.into(), name, start_ns, end_ns, task });
        }
    }
}

/// Runs the benchmark.
pub fn run(spec: &KvBenchSpec) -> Result<KvBenchResult, ToolError> {
    let built =
        DeviceBuilder::new(DeviceSpec::preset(&spec.preset)).host(HostPath::Kernel).store(StoreChoice::Null).build()?;
    let mut device = built.device;
    if spec.trace.is_some() {
        device.enable_trace();
    }
    let geometry = *device.namespace().geometry();
    // Two journal zones, two data zones at least, and the pool.
    if spec.reset_pool_zones + 4 > geometry.zones {
        return Err(ToolError::Usage(format!(
            "a reset pool of {} zones leaves too few of the device's {} for the database",
            spec.reset_pool_zones, geometry.zones
        )));
    }
    let pool = geometry.zones - spec.reset_pool_zones..geometry.zones;
    let cap_bytes = geometry.zone_cap_lba << geometry.lba_shift;
    for zone in pool.clone() {
        device.precondition(zone, cap_bytes).map_err(|status| ToolError::Prefill { zone, status })?;
    }
    let mut simulation = Simulation::with_host(device, built.host, Some(spec.seed));
    let queue = Scheduled::new(simulation.host(), spec.scheduler, 1280 << 10);
    if spec.trace.is_some() {
        queue.record_queues();
    }
    let wall = Instant::now();

    let opened: Slot<Rc<Db<_>>> = Rc::new(RefCell::new(None));
    let sink = Rc::clone(&opened);
    let options = FsOptions { reserved_tail_zones: spec.reset_pool_zones, ..FsOptions::default() };
    let (setup_queue, setup_spec) = (queue.clone(), spec.clone());
    simulation.spawn(async move {
        *sink.borrow_mut() = Some(Db::open(setup_queue, options, setup_spec).await);
    });
    simulation.run();
    let db = take(&opened, "formatting zonedfs")?;

    let failure: Rc<RefCell<Option<ToolError>>> = Rc::new(RefCell::new(None));
    let fail = |failure: &Rc<RefCell<Option<ToolError>>>, result: Result<(), ToolError>| {
        if let Err(error) = result {
            failure.borrow_mut().get_or_insert(error);
        }
    };
    let end_ns = queue.now_ns() + spec.runtime_ns;
    let latency = Rc::new(RefCell::new(LatencyStats::default()));
    let writers_left = Rc::new(Cell::new(spec.writers));
    for _ in 0..spec.writers {
        let (db, queue, latency, failure, writers_left) =
            (Rc::clone(&db), queue.clone(), Rc::clone(&latency), Rc::clone(&failure), Rc::clone(&writers_left));
        simulation.spawn(async move {
            let result = async {
                while queue.now_ns() < end_ns {
                    let started = queue.now_ns();
                    db.put(&queue).await?;
                    if queue.now_ns() <= end_ns {
                        db.puts.set(db.puts.get() + 1);
                        latency.borrow_mut().record(queue.now_ns() - started);
                    }
                }
                Ok(())
            }
            .await;
            fail(&failure, result);
            writers_left.set(writers_left.get() - 1);
            if writers_left.get() == 0 {
                db.stop();
            }
        });
    }
    let (flush_db, flush_queue, flush_failure) = (Rc::clone(&db), queue.clone(), Rc::clone(&failure));
    let flush_task = simulation.spawn(async move { fail(&flush_failure, flush_db.flush_thread(&flush_queue).await) });
    db.flush_task.set(Some(flush_task));
    let (compaction_db, compaction_queue, compaction_failure) = (Rc::clone(&db), queue.clone(), Rc::clone(&failure));
    let compaction_task = simulation
        .spawn(async move { fail(&compaction_failure, compaction_db.compaction_thread(&compaction_queue).await) });
    db.compaction_task.set(Some(compaction_task));
    let reset_stats = Rc::new(RefCell::new(ResetLoadStats::default()));
    let running_db = Rc::clone(&db);
    simulation.spawn(run_reset_load(
        queue.clone(),
        pool,
        spec.resets_per_second,
        move || running_db.running.get(),
        Rc::clone(&reset_stats),
    ));
    simulation.run();
    if let Some(error) = failure.borrow_mut().take() {
        return Err(error);
    }
    if writers_left.get() != 0 || db.has_unflushed_memtables() {
        return Err(ToolError::Unfinished("the database"));
    }
    let puts = db.puts.get();
    let device = simulation.with_device(|device| device.stats());
    let reset_load = reset_stats.borrow().clone();
    let put_latency = latency.borrow().clone();
    let level_files = db.levels.borrow().iter().map(Vec::len).collect();
    let files = db.fs.files();
    let map = zone_map(&files, &db.fs.zones(), &db.fs.geometry());
    if let Some(path) = &spec.map {
        let hints = if spec.lifetime_hints { "lifetime hints" } else { "no lifetime hints" };
        draw(path, &format!("kv-bench on zonedfs, {hints}: files in zones at the end"), &map, &files)
            .map_err(|message| ToolError::Usage(format!("option map: {message}")))?;
    }
    if let Some(path) = &spec.trace {
        simulation
            .with_device(|device| {
                let mut operations = db.operations.as_ref().map(|operations| operations.take()).unwrap_or_default();
                operations.extend(db.fs.activity());
                write_device_trace(path, "kv-bench", &operations, &queue.queue_spans(), device)
            })
            .map_err(|error| ToolError::Usage(format!("option trace: {}: {error}", path.display())))?;
    }
    Ok(KvBenchResult {
        spec: spec.clone(),
        puts,
        kiops: puts as f64 / (spec.runtime_ns as f64 / 1e9) / 1000.0,
        put_latency,
        stall_ns: db.stall_ns.get(),
        flushes: db.flushes.get(),
        compactions: db.compactions.get(),
        compaction_bytes_written: db.compaction_bytes_written.get(),
        level_files,
        fs: db.fs.stats(),
        zones: summarize(&map),
        reset_load,
        blocks_erased: device.flash.block_erases.iter().sum(),
        energy_j: device.energy_j_total,
        wall_seconds: wall.elapsed().as_secs_f64(),
    })
}

pub fn to_json(result: &KvBenchResult) -> serde_json::Value {
    let latency = &result.put_latency;
    let mut value = serde_json::to_value(result).unwrap_or_default();
    value["put_latency_ns"] = serde_json::json!({
        "mean": latency.mean(), "N": latency.count(),
        "percentile": { "50.000000": latency.percentile(50.0), "99.000000": latency.percentile(99.0),
                        "99.900000": latency.percentile(99.9) },
    });
    value
}

pub fn to_text(result: &KvBenchResult) -> String {
    let spec = &result.spec;
    format!(
        "kv-bench: {} thread(s), {}-byte keys, {}-byte values, sync {}, {} scheduler on {}; {:.1} resets/s beside it\n  put: {} in {:.1} s of device time, IOPS={:.2}k\n    lat (usec): avg={:.2}, p50={:.2}, p99={:.2}, p99.9={:.2}; stalled {:.3} s waiting for a flush\n  rocksdb: {} flushes, {} compactions writing {} MiB; files per level {:?}\n  zonedfs: {} zone resets, {} finishes, {} GC runs moving {} MiB; {} zones in use, {:.1} files a zone (at most {}), {:.1} % of written bytes live\n  reset load: {} resets, mean {:.2} ms\n  zonelab: {:.3} s of wall time\n",
        spec.writers,
        spec.key_bytes,
        spec.value_bytes,
        u8::from(spec.sync),
        spec.scheduler.name(),
        spec.preset,
        spec.resets_per_second,
        result.puts,
        spec.runtime_ns as f64 / 1e9,
        result.kiops,
        result.put_latency.mean() / 1000.0,
        result.put_latency.percentile(50.0) as f64 / 1000.0,
        result.put_latency.percentile(99.0) as f64 / 1000.0,
        result.put_latency.percentile(99.9) as f64 / 1000.0,
        result.stall_ns as f64 / 1e9,
        result.flushes,
        result.compactions,
        result.compaction_bytes_written >> 20,
        result.level_files,
        result.fs.zone_resets,
        result.fs.zone_finishes,
        result.fs.gc_runs,
        result.fs.gc_bytes_moved >> 20,
        result.zones.zones_in_use,
        result.zones.files_per_zone,
        result.zones.most_files_in_a_zone,
        result.zones.live_fraction * 100.0,
        result.reset_load.resets,
        result.reset_load.latency_ms_mean(),
        result.wall_seconds
    )
}

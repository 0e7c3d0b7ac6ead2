//! fio's options, from the command line (`--name=x --rw=write ...`) and from job files (INI sections with a
//! `[global]` section), with fio's names and meanings. An unknown option is an error that names it, as in fio;
//! options that make no sense in a simulation (CPU and NUMA placement) are accepted and reported as ignored.

use std::path::PathBuf;

use zonelab_device::HostPath;
use zonelab_host::{SchedulerKind, ZincConfig};

use super::distribution::Distribution;
use super::randommap::RandomGenerator;
use super::verify::{parse_pattern, VerifyMethod};

/// Why a fio run could not start or went wrong before its jobs ran, naming what is wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FioError {
    /// An option, job file or argument that does not make a run (fio's usage errors).
    #[error("fio: {0}")]
    Options(String),
    /// The `--filename` device could not be opened: a missing or corrupt image, or an invalid preset.
    #[error("fio: filename {0}")]
    Device(#[from] zonelab_device::BuildError),
    /// The device refused the preconditioning `prefill=` asked for.
    #[error("fio: job {job}: prefill of zone {zone} failed: {status}")]
    Prefill { job: String, zone: u32, status: zonelab_zns::Status },
    /// The trace `--trace` names could not be written.
    #[error("fio: trace {path}: {message}")]
    Trace { path: String, message: String },
}

impl FioError {
    /// The message without the `fio: ` prefix, for errors nested in a job file's line.
    fn message(&self) -> String {
        match self {
            FioError::Options(message) => message.clone(),
            other => other.to_string(),
        }
    }
}

fn fail<T>(message: impl Into<String>) -> Result<T, FioError> {
    Err(FioError::Options(message.into()))
}

/// A size as fio takes it: bytes, a percentage of the device, or a number of zones (`3z`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SizeSpec {
    Bytes(u64),
    Percent(f64),
    Zones(u64),
}

impl SizeSpec {
    /// Bytes on a device of `device_bytes` with zones of `zone_bytes`.
    pub fn resolve(self, device_bytes: u64, zone_bytes: u64) -> u64 {
        match self {
            SizeSpec::Bytes(bytes) => bytes,
            SizeSpec::Percent(percent) => (device_bytes as f64 * percent / 100.0) as u64,
            SizeSpec::Zones(zones) => zones.saturating_mul(zone_bytes),
        }
    }
}

/// Parses sizes as zonelab's own tools take them: `4096`, `4k`, `4Ki`, `4KiB`, `100G`, `3z`, `50%`, every unit
/// binary.
pub fn parse_size(key: &str, text: &str) -> Result<SizeSpec, FioError> {
    parse_size_in(key, text, None)
}

/// Parses a size as fio 3.33 does under `kb_base` (`__get_mult_bytes`): `k`, `kb` and `ki` are kb_base, and the
/// IEC forms (`KiB`, `MiB`, ...) are the other base: 1000 under the default kb_base=1024 ("compatibility
/// mode": fio reads `1MiB` as 1,000,000 bytes), 1024 under kb_base=1000.
fn parse_fio_size(key: &str, text: &str, kb_base: u32) -> Result<SizeSpec, FioError> {
    parse_size_in(key, text, Some(kb_base))
}

/// `kb_base`: None for zonelab's binary units, else fio's rules.
fn parse_size_in(key: &str, text: &str, kb_base: Option<u32>) -> Result<SizeSpec, FioError> {
    let bad = || FioError::Options(format!("option {key}: {text:?} is not a size (e.g. 4k, 4Ki, 1G, 3z, 50%)"));
    let trimmed = text.trim();
    if let Some(percent) = trimmed.strip_suffix('%') {
        let value: f64 = percent.parse().map_err(|_| bad())?;
        if !(0.0..=100.0).contains(&value) {
            return Err(bad());
        }
        return Ok(SizeSpec::Percent(value));
    }
    let digits = trimmed.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(trimmed.len());
    let number: f64 = trimmed[..digits].parse().map_err(|_| bad())?;
    let suffix = trimmed[digits..].to_ascii_lowercase();
    if suffix == "z" {
        return Ok(SizeSpec::Zones(number as u64));
    }
    let power = match suffix.get(..1) {
        _ if suffix.is_empty() || suffix == "b" => 0,
        Some("k") => 1,
        Some("m") => 2,
        Some("g") => 3,
        Some("t") => 4,
        Some("p") => 5,
        _ => return Err(bad()),
    };
    if !["", "b", "i", "ib"].contains(&suffix.get(1..).unwrap_or("")) {
        return Err(bad());
    }
    let multiplier = match kb_base {
        None => 1024.0,
        Some(base) if suffix.ends_with("ib") => {
            if base == 1000 {
                1024.0
            } else {
                1000.0
            }
        }
        Some(base) => f64::from(base),
    };
    // Past 2^64 bytes a size saturates: fio's own arithmetic wraps such sizes rather than refusing them.
    Ok(SizeSpec::Bytes((number * multiplier.powi(power)) as u64))
}

/// Parses fio's times; a bare number is in `default_unit_ns`.
pub fn parse_time_ns(key: &str, text: &str, default_unit_ns: u64) -> Result<u64, FioError> {
    let trimmed = text.trim();
    let digits = trimmed.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(trimmed.len());
    let number: f64 =
        trimmed[..digits].parse().map_err(|_| FioError::Options(format!("option {key}: {text:?} is not a time")))?;
    let unit = match trimmed[digits..].to_ascii_lowercase().as_str() {
        "" => default_unit_ns,
        "ns" | "nsec" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return fail(format!("option {key}: {text:?} has an unknown time unit")),
    };
    Ok((number * unit as f64) as u64)
}

fn parse_bool(key: &str, value: Option<&str>) -> Result<bool, FioError> {
    match value.map(str::trim) {
        None | Some("1") | Some("true") | Some("yes") | Some("on") => Ok(true),
        Some("0") | Some("false") | Some("no") | Some("off") => Ok(false),
        Some(other) => fail(format!("option {key}: {other:?} is not a boolean")),
    }
}

fn parse_number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, FioError> {
    value.trim().parse().map_err(|_| FioError::Options(format!("option {key}: {value:?} is not a number")))
}

/// An integer option within `[min, max]`, refused with fio 3.33's own words when it is not.
fn parse_bounded(key: &str, value: &str, min: u32, max: u32) -> Result<u32, FioError> {
    let number: u64 = parse_number(key, value)?;
    if number < u64::from(min) {
        return fail(format!("{key}: min value out of range: {number} ({min} min)"));
    }
    if number > u64::from(max) {
        return fail(format!("{key}: max value out of range: {number} ({max} max)"));
    }
    Ok(number as u32)
}

/// A fraction option in `[0, 1]` (fio's zone_reset_threshold and zone_reset_frequency); fio's words for a value
/// out of range, and NaN refused too (fio 3.33 takes it and then never resets).
fn parse_fraction(key: &str, value: &str) -> Result<f64, FioError> {
    let number: f64 = parse_number(key, value)?;
    if number.is_nan() {
        return fail(format!("{key}: {value:?} is not a number from 0 to 1"));
    }
    if number < 0.0 {
        return fail(format!("{key}: value out of range: {number:.6} (range min: 0.000000)"));
    }
    if number > 1.0 {
        return fail(format!("{key}: value out of range: {number:.6} (range max: 1.000000)"));
    }
    Ok(number)
}

/// fio's `continue_on_error`: which failed I/Os a job counts and goes on past. fio goes on only past the
/// errors it deems non-fatal (EIO and EILSEQ, `td_non_fatal_error`); trims count as writes; `verify` covers
/// blocks that read back wrong.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContinueOnError {
    pub read: bool,
    pub write: bool,
    pub verify: bool,
}

impl ContinueOnError {
    fn parse(value: &str) -> Result<ContinueOnError, FioError> {
        let (read, write, verify) = match value.trim() {
            "none" | "0" => (false, false, false),
            "read" => (true, false, false),
            "write" => (false, true, false),
            "io" => (true, true, false),
            "verify" => (false, false, true),
            "all" | "1" => (true, true, true),
            other => {
                return fail(format!(
                    "option continue_on_error: {other:?} is not one of none, read, write, io, verify, all"
                ))
            }
        };
        Ok(ContinueOnError { read, write, verify })
    }

    pub fn any(self) -> bool {
        self.read || self.write || self.verify
    }
}

/// fio's `bssplit`: `4k/50:8k/30:64k/20` (block size / weight); a size without a weight shares what is left.
fn parse_bssplit(text: &str, kb_base: u32) -> Result<Vec<(u64, u64)>, FioError> {
    let mut split = Vec::new();
    for part in text.split(':').filter(|part| !part.is_empty()) {
        let (size, weight) = part.split_once('/').unwrap_or((part, ""));
        let bytes = match parse_fio_size("bssplit", size, kb_base)? {
            SizeSpec::Bytes(bytes) if bytes > 0 => bytes,
            _ => return fail(format!("option bssplit: {size:?} is not a positive block size")),
        };
        let weight = if weight.is_empty() { 0 } else { u64::from(parse_bounded("bssplit", weight, 0, 100)?) };
        split.push((bytes, weight));
    }
    let given: u64 = split.iter().map(|(_, weight)| weight).sum();
    let unweighted = split.iter().filter(|(_, weight)| *weight == 0).count() as u64;
    if given > 100 || split.is_empty() || (unweighted == 0 && given == 0) {
        return fail(format!("option bssplit: {text:?} has weights that do not add up to at most 100"));
    }
    for entry in split.iter_mut().filter(|(_, weight)| *weight == 0) {
        entry.1 = (100 - given) / unweighted.max(1);
    }
    Ok(split)
}

/// The I/O pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadWrite {
    Read,
    Write,
    RandRead,
    RandWrite,
    ReadWrite,
    RandRw,
    Trim,
    RandTrim,
    /// zonelab extension: each I/O finishes the next zone of the range (zbd mode).
    Finish,
}

impl ReadWrite {
    fn parse(value: &str) -> Result<ReadWrite, FioError> {
        Ok(match value {
            "read" => ReadWrite::Read,
            "write" => ReadWrite::Write,
            "randread" => ReadWrite::RandRead,
            "randwrite" => ReadWrite::RandWrite,
            "rw" | "readwrite" => ReadWrite::ReadWrite,
            "randrw" => ReadWrite::RandRw,
            "trim" => ReadWrite::Trim,
            "randtrim" => ReadWrite::RandTrim,
            "finish" => ReadWrite::Finish,
            other => return fail(format!("option rw: unknown pattern {other:?}")),
        })
    }

    /// fio's letter for the pattern in its status line.
    pub fn letter(self) -> char {
        match self {
            ReadWrite::Read => 'R',
            ReadWrite::Write => 'W',
            ReadWrite::RandRead => 'r',
            ReadWrite::RandWrite => 'w',
            ReadWrite::ReadWrite => 'M',
            ReadWrite::RandRw => 'm',
            ReadWrite::Trim => 'T',
            ReadWrite::RandTrim => 't',
            ReadWrite::Finish => 'F',
        }
    }

    /// The pattern as fio names it.
    pub fn name(self) -> &'static str {
        match self {
            ReadWrite::Read => "read",
            ReadWrite::Write => "write",
            ReadWrite::RandRead => "randread",
            ReadWrite::RandWrite => "randwrite",
            ReadWrite::ReadWrite => "rw",
            ReadWrite::RandRw => "randrw",
            ReadWrite::Trim => "trim",
            ReadWrite::RandTrim => "randtrim",
            ReadWrite::Finish => "finish",
        }
    }

    /// Whether the pattern writes.
    pub fn writes(self) -> bool {
        matches!(self, ReadWrite::Write | ReadWrite::RandWrite | ReadWrite::ReadWrite | ReadWrite::RandRw)
    }

    pub fn is_random(self) -> bool {
        matches!(self, ReadWrite::RandRead | ReadWrite::RandWrite | ReadWrite::RandRw | ReadWrite::RandTrim)
    }
}

/// fio's I/O engines, each a host path of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoEngine {
    /// Synchronous: one I/O outstanding per job, through the kernel block layer.
    Psync,
    Libaio,
    IoUring,
    IoUringCmd,
    Spdk,
}

impl IoEngine {
    /// The scheduler a job gets when it names none: Linux's for the engine's path to the device
    /// (`SchedulerKind::linux_default`).
    pub fn default_scheduler(self) -> SchedulerKind {
        SchedulerKind::linux_default(self.host_path())
    }

    /// How the engine reaches the device.
    pub fn host_path(self) -> HostPath {
        match self {
            IoEngine::Psync | IoEngine::Libaio => HostPath::Kernel,
            IoEngine::IoUring => HostPath::IoUring,
            IoEngine::IoUringCmd => HostPath::IoUringCmd,
            IoEngine::Spdk => HostPath::Spdk,
        }
    }

    fn parse(value: &str) -> Result<IoEngine, FioError> {
        Ok(match value {
            "psync" | "sync" | "pvsync" => IoEngine::Psync,
            "libaio" => IoEngine::Libaio,
            "io_uring" => IoEngine::IoUring,
            "io_uring_cmd" => IoEngine::IoUringCmd,
            "spdk" | "spdk_bdev" => IoEngine::Spdk,
            other => return fail(format!("option ioengine: engine {other:?} is not one zonelab models (psync, libaio, io_uring, io_uring_cmd, spdk)")),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            IoEngine::Psync => "psync",
            IoEngine::Libaio => "libaio",
            IoEngine::IoUring => "io_uring",
            IoEngine::IoUringCmd => "io_uring_cmd",
            IoEngine::Spdk => "spdk",
        }
    }
}

/// Everything one job is told.
#[derive(Clone, Debug, PartialEq)]
pub struct JobOptions {
    pub name: String,
    pub filename: Option<String>,
    pub rw: ReadWrite,
    pub rwmixread: u32,
    pub bs_bytes: u64,
    pub size: Option<SizeSpec>,
    pub offset: SizeSpec,
    pub offset_increment: SizeSpec,
    pub io_size: Option<SizeSpec>,
    pub iodepth: u32,
    /// `iodepth_batch_submit` (`iodepth_batch`): I/Os fio queues before it submits them in one call; 0 means
    /// `iodepth`. fio also submits what it has queued when it has nothing else to do but wait for completions.
    pub iodepth_batch_submit: u32,
    /// `iodepth_batch_complete_min` (`iodepth_batch_complete`) and `iodepth_batch_complete_max`: the completions
    /// fio waits for, at least, and reaps, at most, each time its queue is full (a most below the least, 0 by
    /// default, is the least, as fio's `fixup_options` makes it).
    pub iodepth_batch_complete_min: u32,
    pub iodepth_batch_complete_max: u32,
    /// `iodepth_low`: once its queue is full, fio lets it drain to this depth before it fills it again (0 or
    /// more than `iodepth`: `iodepth`, the queue kept full).
    pub iodepth_low: u32,
    pub numjobs: u32,
    pub ioengine: IoEngine,
    pub direct: bool,
    pub zonemode_zbd: bool,
    /// `zonemode=strided`: I/O moves through windows of `zonerange` bytes, `zonesize` bytes in each, then
    /// skips `zoneskip` bytes.
    pub zonemode_strided: bool,
    /// `zonesize`: strided mode's bytes per window; in zbd mode it must be the device's zone size.
    pub zonesize: Option<SizeSpec>,
    /// `zonerange`: strided mode's window (default: zonesize).
    pub zonerange: Option<SizeSpec>,
    /// `zoneskip`: bytes skipped after each window (strided), or after each zone a sequential job is done
    /// with (zbd, a whole number of zones: `2z`).
    pub zoneskip: SizeSpec,
    /// `filesize`: where the file ends (fixed, or drawn from a `low-high` range), which bounds the job's range
    /// in place of `size`.
    pub filesize: Option<(SizeSpec, SizeSpec)>,
    /// `nrfiles`: with one filename fio caps it at one file.
    pub nrfiles: u32,
    pub max_open_zones: u32,
    /// `job_max_open_zones`: this job's own bound on the zones it writes (0: none).
    pub job_max_open_zones: u32,
    /// `ignore_zone_limits`: do not check `max_open_zones` against the device's limit.
    pub ignore_zone_limits: bool,
    pub zone_reset_threshold: f64,
    pub zone_reset_frequency: f64,
    pub rate_iops: u64,
    pub runtime_ns: Option<u64>,
    pub time_based: bool,
    pub ramp_time_ns: u64,
    pub group_reporting: bool,
    pub percentile_list: Vec<f64>,
    pub lat_percentiles: bool,
    pub clat_percentiles: bool,
    pub randseed: u64,
    pub stonewall: bool,
    pub new_group: bool,
    pub zone_append: bool,
    /// io_uring's `hipri` (the kernel polls the device for completions) and `sqthread_poll` (a kernel thread
    /// submits and fio spins on the completion ring, never calling `io_uring_enter` to wait: `fio_ioring_getevents`
    /// in engines/io_uring.c): with either, the job's thread never sleeps (`JobOptions::polls`).
    pub hipri: bool,
    pub sqthread_poll: bool,
    pub scheduler: SchedulerKind,
    /// No `scheduler` was given: the job gets the one Linux gives a zoned block device (see
    /// `IoEngine::default_scheduler`).
    pub scheduler_defaulted: bool,
    /// zonelab extension: write each zone of the job's range before its group starts, in no time (a drive
    /// preconditioned long ago): `Some(None)` fills the zones, `Some(Some(size))` writes that much of each.
    pub prefill: Option<Option<SizeSpec>>,
    /// zonelab extension: run the jobs on a block-level host FTL over the zoned namespace (dm-zap's level), with
    /// this over-provisioning (0.28: the zones hold 1.28 times what it exports).
    pub hostftl: Option<f64>,
    pub seed: Option<u64>,
    /// `write_lat_log`, `write_bw_log`, `write_iops_log`: the prefix of each log file (the job's name for a
    /// bare flag), and `log_avg_msec`.
    pub lat_log: Option<String>,
    pub bw_log: Option<String>,
    pub iops_log: Option<String>,
    pub log_avg_msec: u64,
    pub continue_on_error: ContinueOnError,
    /// `startdelay`: device time between the group's start and the job's first I/O.
    pub startdelay_ns: u64,
    /// `loops`: how many times the job moves its size (a size-bound job).
    pub loops: u64,
    /// `number_ios`: the job ends after this many I/Os (0: no limit).
    pub number_ios: u64,
    /// `bssplit`: block sizes in bytes with their weights; each I/O draws one (empty: every I/O is `bs`).
    pub bssplit: Vec<(u64, u64)>,
    /// `random_distribution`: how random I/Os pick their blocks.
    pub random_distribution: Distribution,
    /// `norandommap`: uniform random I/Os draw blocks with no map of the ones a pass has used, so blocks repeat;
    /// `random_generator`: where those draws come from (see `randommap.rs`).
    pub norandommap: bool,
    pub random_generator: RandomGenerator,
    /// `fsync` (and `fdatasync`): a Flush after every this many writes (0: none); `end_fsync`: a Flush when the
    /// job's writes are done. On a block device both reach the drive as NVMe Flush.
    pub fsync_blocks: u64,
    pub end_fsync: bool,
    /// `verify`: how written data is checked when read back (None: not checked).
    pub verify: Option<VerifyMethod>,
    /// `do_verify`: a writing job reads back and checks what it wrote once its writes are done.
    pub do_verify: bool,
    /// `verify_backlog`: after this many writes, check that many before writing on (0: only at the end);
    /// `verify_batch`: how many to check then (0: the backlog).
    pub verify_backlog: u64,
    pub verify_batch: u64,
    /// `verify_interval`: bytes each verify header covers (None: the block size).
    pub verify_interval: Option<u64>,
    /// `verify_pattern`: the bytes a verified block's data repeats (random bytes from the block's seed when
    /// None); `buffer_pattern`: what the data of writes that are not verified repeats (zeros when None).
    pub verify_pattern: Option<Vec<u8>>,
    pub buffer_pattern: Option<Vec<u8>>,
    /// `read_iolog`: replay this trace instead of generating I/O; `replay_no_stall`: without its delays.
    pub read_iolog: Option<String>,
    pub replay_no_stall: bool,
    /// `write_iolog`: append a trace of every I/O issued to this file.
    pub write_iolog: Option<String>,
    /// `kb_base`: 1024 (fio's compatibility mode) or 1000, for the sizes given after it and the output.
    pub kb_base: u32,
    /// `unit_base=1`: rates print in bits.
    pub unit_bits: bool,
    /// Options accepted but meaningless here, as given.
    pub ignored: Vec<String>,
    /// The options set on this job itself (not inherited from global ones), as given, in order: fio's
    /// `job options` in its JSON.
    pub given: Vec<(String, String)>,
}

/// fio's default percentiles.
pub const DEFAULT_PERCENTILES: [f64; 17] =
    [1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99];

impl Default for JobOptions {
    fn default() -> Self {
        JobOptions {
            name: String::new(),
            filename: None,
            rw: ReadWrite::Read,
            rwmixread: 50,
            bs_bytes: 4096,
            size: None,
            offset: SizeSpec::Bytes(0),
            offset_increment: SizeSpec::Bytes(0),
            io_size: None,
            iodepth: 1,
            iodepth_batch_submit: 1,
            iodepth_batch_complete_min: 1,
            iodepth_batch_complete_max: 0,
            iodepth_low: 0,
            numjobs: 1,
            ioengine: IoEngine::Psync,
            direct: false,
            zonemode_zbd: false,
            zonemode_strided: false,
            zonesize: None,
            zonerange: None,
            zoneskip: SizeSpec::Bytes(0),
            filesize: None,
            nrfiles: 1,
            max_open_zones: 0,
            job_max_open_zones: 0,
            ignore_zone_limits: false,
            zone_reset_threshold: 0.0,
            zone_reset_frequency: 0.0,
            rate_iops: 0,
            runtime_ns: None,
            time_based: false,
            ramp_time_ns: 0,
            group_reporting: false,
            percentile_list: DEFAULT_PERCENTILES.to_vec(),
            lat_percentiles: false,
            clat_percentiles: true,
            randseed: 0x89,
            stonewall: false,
            new_group: false,
            zone_append: false,
            hipri: false,
            sqthread_poll: false,
            scheduler: SchedulerKind::None,
            scheduler_defaulted: true,
            prefill: None,
            hostftl: None,
            seed: None,
            lat_log: None,
            bw_log: None,
            iops_log: None,
            log_avg_msec: 0,
            continue_on_error: ContinueOnError::default(),
            startdelay_ns: 0,
            loops: 1,
            number_ios: 0,
            bssplit: Vec::new(),
            random_distribution: Distribution::Uniform,
            norandommap: false,
            random_generator: RandomGenerator::Draw,
            fsync_blocks: 0,
            end_fsync: false,
            verify: None,
            do_verify: true,
            verify_backlog: 0,
            verify_batch: 0,
            verify_interval: None,
            verify_pattern: None,
            buffer_pattern: None,
            read_iolog: None,
            replay_no_stall: false,
            write_iolog: None,
            kb_base: 1024,
            unit_bits: false,
            ignored: Vec::new(),
            given: Vec::new(),
        }
    }
}

/// Options fio has that place work on CPUs, memory or the kernel, which a simulation accepts and ignores.
const IGNORED: &[&str] = &[
    "numa_cpu_nodes",
    "numa_mem_policy",
    "cpus_allowed",
    "cpus_allowed_policy",
    "cpumask",
    "thread",
    "nice",
    "prio",
    "prioclass",
    "softrandommap",
    "randrepeat",
    "invalidate",
    "exitall",
    "gtod_reduce",
    "refill_buffers",
    "fixedbufs",
    "registerfiles",
    "unified_rw_reporting",
    "disable_slat",
    "disable_clat",
    "disable_lat",
    "create_on_open",
    "allow_mounted_write",
];

impl JobOptions {
    /// Whether the job's thread busy-polls for its completions and so never leaves its core: SPDK's always,
    /// io_uring's with `hipri` or `sqthread_poll`.
    pub fn polls(&self) -> bool {
        let io_uring = matches!(self.ioengine, IoEngine::IoUring | IoEngine::IoUringCmd);
        self.ioengine.host_path().polls() || (io_uring && (self.hipri || self.sqthread_poll))
    }

    /// Sets one option; `value` is None for a bare flag.
    pub fn set<'a>(&mut self, raw_key: &str, value: Option<&'a str>) -> Result<(), FioError> {
        let key = raw_key.trim().replace('-', "_");
        let need =
            |value: Option<&'a str>| value.ok_or_else(|| FioError::Options(format!("option {key} needs a value")));
        match key.as_str() {
            "name" => self.name = need(value)?.to_string(),
            "filename" => self.filename = Some(need(value)?.to_string()),
            "rw" | "readwrite" => self.rw = ReadWrite::parse(need(value)?.trim())?,
            "rwmixread" => self.rwmixread = parse_bounded(&key, need(value)?, 0, 100)?,
            "rwmixwrite" => self.rwmixread = 100 - parse_bounded(&key, need(value)?, 0, 100)?,
            "bs" | "blocksize" => match parse_fio_size(&key, need(value)?, self.kb_base)? {
                SizeSpec::Bytes(bytes) if bytes > 0 => self.bs_bytes = bytes,
                _ => return fail(format!("option {key}: the block size must be a positive number of bytes")),
            },
            "size" => self.size = Some(parse_fio_size(&key, need(value)?, self.kb_base)?),
            "offset" => self.offset = parse_fio_size(&key, need(value)?, self.kb_base)?,
            "offset_increment" => self.offset_increment = parse_fio_size(&key, need(value)?, self.kb_base)?,
            "io_size" | "io_limit" => self.io_size = Some(parse_fio_size(&key, need(value)?, self.kb_base)?),
            "iodepth" => self.iodepth = parse_bounded(&key, need(value)?, 1, 65_535)?,
            "iodepth_batch" | "iodepth_batch_submit" => {
                self.iodepth_batch_submit = parse_bounded(&key, need(value)?, 0, 65_535)?;
            }
            "iodepth_batch_complete" | "iodepth_batch_complete_min" => {
                self.iodepth_batch_complete_min = parse_bounded(&key, need(value)?, 0, 65_535)?;
            }
            "iodepth_low" => self.iodepth_low = parse_bounded(&key, need(value)?, 0, 65_535)?,
            "iodepth_batch_complete_max" => {
                self.iodepth_batch_complete_max = parse_bounded(&key, need(value)?, 0, 65_535)?;
            }
            "numjobs" => self.numjobs = parse_bounded(&key, need(value)?, 1, 4_096)?,
            "ioengine" => self.ioengine = IoEngine::parse(need(value)?.trim())?,
            "direct" => self.direct = parse_bool(&key, value)?,
            "buffered" => self.direct = !parse_bool(&key, value)?,
            "zonemode" => {
                (self.zonemode_zbd, self.zonemode_strided) = match need(value)?.trim() {
                    "zbd" => (true, false),
                    "strided" => (false, true),
                    "none" => (false, false),
                    other => return fail(format!("option zonemode: {other:?} is not none, strided or zbd")),
                }
            }
            "zonesize" => self.zonesize = Some(parse_fio_size(&key, need(value)?, self.kb_base)?),
            "zonerange" => self.zonerange = Some(parse_fio_size(&key, need(value)?, self.kb_base)?),
            "zoneskip" => self.zoneskip = parse_fio_size(&key, need(value)?, self.kb_base)?,
            "filesize" => {
                let text = need(value)?;
                let (low, high) = text.split_once('-').unwrap_or((text, text));
                self.filesize =
                    Some((parse_fio_size(&key, low, self.kb_base)?, parse_fio_size(&key, high, self.kb_base)?));
            }
            "nrfiles" | "nr_files" => self.nrfiles = parse_bounded(&key, need(value)?, 1, u32::MAX)?,
            "max_open_zones" => self.max_open_zones = parse_number(&key, need(value)?)?,
            "job_max_open_zones" => self.job_max_open_zones = parse_number(&key, need(value)?)?,
            "ignore_zone_limits" => self.ignore_zone_limits = parse_bool(&key, value)?,
            "zone_reset_threshold" => self.zone_reset_threshold = parse_fraction(&key, need(value)?)?,
            "zone_reset_frequency" => self.zone_reset_frequency = parse_fraction(&key, need(value)?)?,
            "rate_iops" => self.rate_iops = parse_number(&key, need(value)?)?,
            "runtime" | "timeout" => self.runtime_ns = Some(parse_time_ns(&key, need(value)?, 1_000_000_000)?),
            "time_based" => self.time_based = parse_bool(&key, value)?,
            "ramp_time" => self.ramp_time_ns = parse_time_ns(&key, need(value)?, 1_000_000_000)?,
            "group_reporting" => self.group_reporting = parse_bool(&key, value)?,
            "percentile_list" => {
                self.percentile_list = need(value)?
                    .split(':')
                    .map(|part| parse_number::<f64>(&key, part))
                    .collect::<Result<Vec<_>, _>>()?;
                if self.percentile_list.iter().any(|p| !(0.0..=100.0).contains(p)) {
                    return fail("option percentile_list: percentiles are between 0 and 100");
                }
            }
            "lat_percentiles" => self.lat_percentiles = parse_bool(&key, value)?,
            "clat_percentiles" => self.clat_percentiles = parse_bool(&key, value)?,
            "randseed" => self.randseed = parse_number(&key, need(value)?)?,
            "stonewall" | "wait_for_previous" => self.stonewall = parse_bool(&key, value)?,
            "new_group" => self.new_group = parse_bool(&key, value)?,
            "zone_append" => self.zone_append = parse_bool(&key, value)?,
            "hipri" => self.hipri = parse_bool(&key, value)?,
            "sqthread_poll" => self.sqthread_poll = parse_bool(&key, value)?,
            "scheduler" => {
                self.scheduler_defaulted = false;
                let name = need(value)?.trim();
                let zinc = match self.scheduler {
                    SchedulerKind::Zinc(zinc) => zinc,
                    _ => ZincConfig::default(),
                };
                self.scheduler = match SchedulerKind::parse(name) {
                    Some(SchedulerKind::Zinc(_)) => SchedulerKind::Zinc(zinc),
                    Some(kind) => kind,
                    None => {
                        return fail(format!("option scheduler: {name:?} is not one of {}", SchedulerKind::names()))
                    }
                };
            }
            "zinc_epoch" | "zinc_tokens" | "zinc_max_holds" | "zinc_threshold" => {
                let SchedulerKind::Zinc(mut zinc) = self.scheduler else {
                    return fail(format!("option {key} needs scheduler=zinc first"));
                };
                let text = need(value)?;
                match key.as_str() {
                    "zinc_epoch" => zinc.epoch_ns = parse_time_ns(&key, text, 1_000)?.max(1),
                    "zinc_tokens" => zinc.tokens = parse_number(&key, text)?,
                    "zinc_max_holds" => zinc.max_holds = parse_number(&key, text)?,
                    _ => zinc.concurrency_threshold = parse_number(&key, text)?,
                }
                self.scheduler = SchedulerKind::Zinc(zinc);
            }
            "prefill" => {
                let text = need(value)?;
                self.prefill =
                    Some(if text == "full" { None } else { Some(parse_fio_size(&key, text, self.kb_base)?) });
            }
            "seed" => self.seed = Some(parse_number(&key, need(value)?)?),
            "hostftl" => self.hostftl = Some(parse_number(&key, need(value)?)?),
            "write_lat_log" | "write_bw_log" | "write_iops_log" => {
                // A bare flag names the logs after the job, as fio does when the option has no value.
                let prefix = Some(value.map_or_else(|| self.name.clone(), str::to_string));
                match key.as_str() {
                    "write_lat_log" => self.lat_log = prefix,
                    "write_bw_log" => self.bw_log = prefix,
                    _ => self.iops_log = prefix,
                }
            }
            "log_avg_msec" => self.log_avg_msec = parse_number(&key, need(value)?)?,
            "continue_on_error" => self.continue_on_error = ContinueOnError::parse(need(value)?)?,
            "startdelay" => self.startdelay_ns = parse_time_ns(&key, need(value)?, 1_000_000_000)?,
            "loops" => self.loops = u64::from(parse_bounded(&key, need(value)?, 1, u32::MAX)?),
            "number_ios" => self.number_ios = parse_number(&key, need(value)?)?,
            "bssplit" => self.bssplit = parse_bssplit(need(value)?, self.kb_base)?,
            "random_distribution" => self.random_distribution = Distribution::parse(need(value)?)?,
            "norandommap" => self.norandommap = parse_bool(&key, value)?,
            "fsync" | "fdatasync" => self.fsync_blocks = parse_number(&key, need(value)?)?,
            "end_fsync" => self.end_fsync = parse_bool(&key, value)?,
            "random_generator" => self.random_generator = RandomGenerator::parse(need(value)?)?,
            // fio applies kb_base to the sizes given after it on the command line (it is parsed in order).
            "kb_base" => {
                self.kb_base = match need(value)?.trim() {
                    "1024" => 1024,
                    "1000" => 1000,
                    other => return fail(format!("option kb_base: {other:?} is not 1024 or 1000")),
                }
            }
            "unit_base" => {
                self.unit_bits = match need(value)?.trim() {
                    "0" | "8" => false,
                    "1" => true,
                    other => return fail(format!("option unit_base: {other:?} is not 0, 8 or 1")),
                }
            }
            // fio options zonelab cannot honour on one emulated device: an error that says so, never a silent
            // change of the workload.
            "verify" => self.verify = VerifyMethod::parse(need(value)?)?,
            "do_verify" => self.do_verify = parse_bool(&key, value)?,
            "verify_backlog" => self.verify_backlog = parse_number(&key, need(value)?)?,
            "verify_batch" => self.verify_batch = parse_number(&key, need(value)?)?,
            "verify_interval" => match parse_fio_size(&key, need(value)?, self.kb_base)? {
                SizeSpec::Bytes(bytes) if bytes > 0 => self.verify_interval = Some(bytes),
                _ => return fail(format!("option {key}: the interval must be a positive number of bytes")),
            },
            "verify_pattern" => {
                self.verify_pattern = Some(parse_pattern(&key, need(value)?)?);
                // fio: a verify pattern with no verify method given verifies by the pattern alone.
                self.verify.get_or_insert(VerifyMethod::Pattern);
            }
            "buffer_pattern" => self.buffer_pattern = Some(parse_pattern(&key, need(value)?)?),
            "read_iolog" => self.read_iolog = Some(need(value)?.trim().to_string()),
            "replay_no_stall" => self.replay_no_stall = parse_bool(&key, value)?,
            "write_iolog" => self.write_iolog = Some(need(value)?.trim().to_string()),
            "trim_percentage" => {
                return fail(format!(
                    "option {key}={}: zonelab cannot honour it (a zoned device discards whole zones, not the \
                     blocks fio's trim verification discards)",
                    value.unwrap_or("")
                ));
            }
            "description" => {}
            ignored if IGNORED.contains(&ignored) => {
                self.ignored.push(match value {
                    Some(value) => format!("{ignored}={value}"),
                    None => ignored.to_string(),
                });
            }
            _ => return fail(format!("unrecognized option '{raw_key}'")),
        }
        self.given.push((raw_key.trim().to_string(), value.unwrap_or("").to_string()));
        Ok(())
    }
}

/// How fio prints its results: any of its formats at once (`--output-format=normal,json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputFormat {
    pub normal: bool,
    /// fio's terse version 3 (`--minimal`, `--output-format=terse`): one `;`-separated line per job.
    pub terse: bool,
    pub json: bool,
    /// `json+`: JSON with each completion-latency histogram's bins.
    pub json_plus: bool,
}

impl OutputFormat {
    pub const NORMAL: OutputFormat = OutputFormat { normal: true, terse: false, json: false, json_plus: false };

    fn parse(text: &str) -> Result<OutputFormat, FioError> {
        let mut format = OutputFormat { normal: false, terse: false, json: false, json_plus: false };
        for name in text.split(',').map(str::trim) {
            match name {
                "normal" => format.normal = true,
                "terse" => format.terse = true,
                "json" => format.json = true,
                "json+" => format.json_plus = true,
                other => {
                    return fail(format!("option output-format: {other:?} is not one of terse, json, json+, normal"))
                }
            }
        }
        Ok(format)
    }
}

/// A whole fio invocation: jobs in order, and where and how to print.
#[derive(Clone, Debug, PartialEq)]
pub struct FioInvocation {
    pub jobs: Vec<JobOptions>,
    /// Options given before the first job or in `[global]`, as given: fio's `global options`.
    pub global_given: Vec<(String, String)>,
    pub output_format: OutputFormat,
    pub output: Option<PathBuf>,
    /// `--section`: the only job-file sections to run (empty: all of them).
    pub sections: Vec<String>,
    /// `--eta`: when to print the status line while jobs run.
    pub eta: Eta,
    /// `--eta-newline`: start a new status line this often (ns of wall time) instead of rewriting one.
    pub eta_newline_ns: Option<u64>,
    /// `--status-interval`: print the results so far this often, in ns of device time.
    pub status_interval_ns: Option<u64>,
    /// zonelab's `--trace`: write a cross-layer trace of the run here (`fio::trace`).
    pub trace: Option<PathBuf>,
}

/// fio's `--eta`: the status line while jobs run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Eta {
    /// On a terminal, once a run has taken a second (fio's default).
    #[default]
    Auto,
    Always,
    Never,
}

/// Options that belong to the invocation, not to a job.
fn set_invocation(invocation: &mut FioInvocation, key: &str, value: Option<&str>) -> Result<bool, FioError> {
    match key.replace('-', "_").as_str() {
        "output_format" => {
            let text = value.ok_or_else(|| FioError::Options("option output-format needs a value".into()))?;
            invocation.output_format = OutputFormat::parse(text)?;
            Ok(true)
        }
        "eta" => {
            invocation.eta = match value.map(str::trim) {
                Some("auto") => Eta::Auto,
                Some("always") => Eta::Always,
                Some("never") => Eta::Never,
                other => return fail(format!("option eta: {:?} is not always, never or auto", other.unwrap_or(""))),
            };
            Ok(true)
        }
        "eta_newline" => {
            let text = value.ok_or_else(|| FioError::Options("option eta-newline needs a time".into()))?;
            invocation.eta_newline_ns = Some(parse_time_ns("eta-newline", text, 1_000_000_000)?.max(1));
            Ok(true)
        }
        "status_interval" => {
            let text = value.ok_or_else(|| FioError::Options("option status-interval needs a time".into()))?;
            // fio's default unit here is seconds; its minimum is 1 ms (`--status-interval` in fio's init.c).
            invocation.status_interval_ns = Some(parse_time_ns("status-interval", text, 1_000_000_000)?.max(1_000_000));
            Ok(true)
        }
        "section" => {
            let name = value.ok_or_else(|| FioError::Options("option section needs a section name".into()))?;
            invocation.sections.push(name.to_string());
            Ok(true)
        }
        "minimal" => {
            invocation.output_format = OutputFormat { normal: false, terse: true, json: false, json_plus: false };
            Ok(true)
        }
        "output" => {
            invocation.output =
                Some(PathBuf::from(value.ok_or_else(|| FioError::Options("option output needs a file".into()))?));
            Ok(true)
        }
        "trace" => {
            invocation.trace =
                Some(PathBuf::from(value.ok_or_else(|| FioError::Options("option trace needs a file".into()))?));
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Parses a job file's text: `[global]` and job sections of `key=value` lines; `;` and `#` start comments.
/// `base` holds the options given before any job on the command line.
fn parse_job_file(origin: &str, text: &str, base: &JobOptions, invocation: &mut FioInvocation) -> Result<(), FioError> {
    let mut global = base.clone();
    let mut current: Option<JobOptions> = None;
    let mut skipped: Option<JobOptions> = None;
    for (number, raw) in text.lines().enumerate() {
        let line = raw.split([';', '#']).next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
            if let Some(job) = current.take() {
                invocation.jobs.push(job);
            }
            let chosen = invocation.sections.is_empty() || invocation.sections.iter().any(|name| name == section);
            if section != "global" && !chosen {
                // Parsed like any other section (its errors still count), then left out.
                let mut job = global.clone();
                job.name = section.to_string();
                skipped = Some(job);
                current = None;
                continue;
            }
            skipped = None;
            if section != "global" {
                let mut job = global.clone();
                job.given.clear();
                job.name = section.to_string();
                current = Some(job);
            }
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((key, value)) => (key.trim(), Some(value.trim())),
            None => (line, None),
        };
        if set_invocation(invocation, key, value)? {
            continue;
        }
        let target = match (current.as_mut(), skipped.as_mut()) {
            (Some(job), _) | (None, Some(job)) => job,
            (None, None) => &mut global,
        };
        target
            .set(key, value)
            .map_err(|error| FioError::Options(format!("{origin}:{}: {}", number + 1, error.message())))?;
    }
    if let Some(job) = current {
        invocation.jobs.push(job);
    }
    invocation.global_given.extend(global.given.drain(base.given.len()..));
    Ok(())
}

/// Parses `zonelab fio` arguments: `--key=value` options (a `--name` starts a job; options before the first
/// job are global) and job files.
pub fn parse_invocation(
    args: &[String],
    read_file: impl Fn(&str) -> Result<String, String>,
) -> Result<FioInvocation, FioError> {
    let mut invocation = FioInvocation {
        jobs: Vec::new(),
        global_given: Vec::new(),
        output_format: OutputFormat::NORMAL,
        output: None,
        sections: Vec::new(),
        eta: Eta::Auto,
        eta_newline_ns: None,
        status_interval_ns: None,
        trace: None,
    };
    let mut global = JobOptions::default();
    let mut current: Option<JobOptions> = None;
    let mut files = Vec::new();
    for arg in args {
        let Some(option) = arg.strip_prefix("--") else {
            files.push(arg.clone());
            continue;
        };
        let (key, value) = match option.split_once('=') {
            Some((key, value)) => (key, Some(value)),
            None => (option, None),
        };
        if set_invocation(&mut invocation, key, value)? {
            continue;
        }
        if key == "name" {
            if let Some(job) = current.take() {
                invocation.jobs.push(job);
            }
            let mut job = global.clone();
            job.given.clear();
            job.set(key, value).map_err(|_| FioError::Options(format!("unrecognized option '{arg}'")))?;
            current = Some(job);
            continue;
        }
        let target = current.as_mut().unwrap_or(&mut global);
        target.set(key, value).map_err(|error| {
            if error.message().starts_with("unrecognized") {
                FioError::Options(format!("unrecognized option '{arg}'"))
            } else {
                error
            }
        })?;
    }
    if let Some(job) = current {
        invocation.jobs.push(job);
    }
    invocation.global_given = global.given.clone();
    for file in files {
        let text =
            read_file(&file).map_err(|error| FioError::Options(format!("failed to open job file {file}: {error}")))?;
        parse_job_file(&file, &text, &global, &mut invocation)?;
    }
    if invocation.jobs.is_empty() {
        return fail("no jobs defined: give --name=NAME with options, or a job file");
    }
    for job in &mut invocation.jobs {
        if job.scheduler_defaulted {
            job.scheduler = job.ioengine.default_scheduler();
        }
        // A bare log flag given before the job had a name: its logs take the job's name.
        for prefix in [&mut job.lat_log, &mut job.bw_log, &mut job.iops_log].into_iter().flatten() {
            if prefix.is_empty() {
                prefix.clone_from(&job.name);
            }
        }
    }
    Ok(invocation)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    fn no_files(_: &str) -> Result<String, String> {
        Err("no such file".into())
    }

    #[test]
    fn command_line_jobs_inherit_global_options() {
        let invocation = parse_invocation(
            &args("--direct=1 --bs=4Ki --name=a --rw=write --size=3z --name=b --rw=randread --iodepth=8 --output-format=json"),
            no_files,
        )
        .expect("parses");
        assert_eq!(invocation.jobs.len(), 2);
        assert!(invocation.output_format.json && !invocation.output_format.normal);
        let (a, b) = (&invocation.jobs[0], &invocation.jobs[1]);
        assert_eq!(
            (a.name.as_str(), a.rw, a.size, a.direct, a.bs_bytes),
            ("a", ReadWrite::Write, Some(SizeSpec::Zones(3)), true, 4096)
        );
        assert_eq!((b.rw, b.iodepth, b.size), (ReadWrite::RandRead, 8, None));
    }

    #[test]
    fn sizes_and_times() {
        assert_eq!(parse_size("bs", "4k").ok(), Some(SizeSpec::Bytes(4096)));
        assert_eq!(parse_size("bs", "4Ki").ok(), Some(SizeSpec::Bytes(4096)));
        assert_eq!(parse_size("size", "100G").ok(), Some(SizeSpec::Bytes(100 << 30)));
        assert_eq!(parse_size("size", "50%").ok(), Some(SizeSpec::Percent(50.0)));
        assert_eq!(parse_size("size", "3z").ok(), Some(SizeSpec::Zones(3)));
        assert!(parse_size("size", "3q").is_err());
        // fio's compatibility mode (kb_base=1024) reads IEC suffixes as powers of 1000, kb_base=1000 the reverse.
        assert_eq!(parse_fio_size("size", "1MiB", 1024).ok(), Some(SizeSpec::Bytes(1_000_000)));
        assert_eq!(parse_fio_size("bs", "4KiB", 1024).ok(), Some(SizeSpec::Bytes(4000)));
        assert_eq!(parse_fio_size("bs", "4Ki", 1024).ok(), Some(SizeSpec::Bytes(4096)));
        assert_eq!(parse_fio_size("bs", "4kb", 1024).ok(), Some(SizeSpec::Bytes(4096)));
        assert_eq!(parse_fio_size("size", "1MiB", 1000).ok(), Some(SizeSpec::Bytes(1 << 20)));
        assert_eq!(parse_fio_size("size", "1M", 1000).ok(), Some(SizeSpec::Bytes(1_000_000)));
        assert!(parse_fio_size("size", "1Mx", 1000).is_err());
        assert_eq!(parse_time_ns("runtime", "30", 1_000_000_000).ok(), Some(30_000_000_000));
        assert_eq!(parse_time_ns("runtime", "100ms", 1_000_000_000).ok(), Some(100_000_000));
        assert!(parse_time_ns("runtime", "3 fortnights", 1).is_err());
    }

    #[test]
    fn every_error_names_what_is_wrong() {
        let error = |text: &str| parse_invocation(&args(text), no_files).expect_err(text).to_string();
        assert!(error("--name=a --frobnicate=1").contains("unrecognized option '--frobnicate=1'"));
        assert!(error("--name=a --rw=sideways").contains("unknown pattern \"sideways\""));
        assert!(error("--name=a --ioengine=windowsaio").contains("windowsaio"));
        assert!(error("--name=a --bs=0").contains("block size"));
        assert!(error("--name=a --zonemode=host").contains("zonemode"));
        assert!(error("--name=a --percentile_list=50:101").contains("percentile"));
        assert!(error("--name=a --output-format=xml").contains("output-format"));
        assert!(error("--name=a --scheduler=bfq").contains("bfq"));
        assert!(error("--name=a --iodepth=many").contains("iodepth"));
        // fio 3.33's own words for values out of range.
        assert_eq!(error("--name=a --rwmixread=150"), "fio: rwmixread: max value out of range: 150 (100 max)");
        assert_eq!(error("--name=a --iodepth=0"), "fio: iodepth: min value out of range: 0 (1 min)");
        assert_eq!(error("--name=a --numjobs=0"), "fio: numjobs: min value out of range: 0 (1 min)");
        assert_eq!(
            error("--name=a --zone_reset_threshold=-1"),
            "fio: zone_reset_threshold: value out of range: -1.000000 (range min: 0.000000)"
        );
        assert!(error("--name=a --zone_reset_frequency=nan").contains("zone_reset_frequency"));
        assert!(error("--rw=write").contains("no jobs"));
        assert!(error("missing.fio").contains("failed to open job file missing.fio"));
    }

    #[test]
    fn ignored_options_are_kept_for_the_report() {
        let invocation = parse_invocation(&args("--name=a --numa_cpu_nodes=0 --cpus_allowed=1-3 --thread"), no_files)
            .expect("parses");
        assert_eq!(invocation.jobs[0].ignored, vec!["numa_cpu_nodes=0", "cpus_allowed=1-3", "thread"]);
    }

    #[test]
    fn job_files_have_global_sections_and_comments() {
        let file = "; a job file\n[global]\nioengine=libaio\niodepth=4 # deep\n\n[seq]\nrw=write\nsize=1z\nstonewall\n[rand]\nrw=randread\niodepth=16\n[a job with spaces]\n";
        let read = |name: &str| if name == "jobs.fio" { Ok(file.to_string()) } else { Err("no".into()) };
        let invocation = parse_invocation(&args("--direct=1 jobs.fio"), read).expect("parses");
        assert_eq!(invocation.jobs.len(), 3);
        assert_eq!(invocation.jobs[2].name, "a job with spaces");
        let (seq, rand) = (&invocation.jobs[0], &invocation.jobs[1]);
        assert_eq!(
            (seq.name.as_str(), seq.ioengine, seq.iodepth, seq.stonewall, seq.direct),
            ("seq", IoEngine::Libaio, 4, true, true)
        );
        assert_eq!((rand.iodepth, rand.rw, rand.stonewall), (16, ReadWrite::RandRead, false));
        let bad = "[job]\nrw=write\nbogus=3\n";
        let error = parse_invocation(&args("bad.fio"), |_| Ok(bad.to_string())).expect_err("bad option");
        assert!(error.to_string().contains("bad.fio:3") && error.to_string().contains("bogus"), "{error}");
    }
}

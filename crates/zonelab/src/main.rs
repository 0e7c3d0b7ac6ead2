//! `zonelab`: the command line of the ZNS SSD laboratory. Each subcommand opens a device image, runs one NVMe
//! command (or one report) on it and prints the result; a command the device rejects prints its NVMe status and
//! exits 1, a usage error exits 2.

mod bench;
mod bench_experiments;
mod bench_fio;
mod bench_ftl;
mod bench_realtime;
mod calibrate;
mod churn;
mod demo;
mod experiment;
mod fio;
mod format;
mod mount;
mod zonedfs_tool;

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use zonelab_device::{DeviceBuilder, DeviceConfig, HostPath};
use zonelab_zns::{
    Access, ByteSize, Command as ZnsCommand, Completion, ConfigError, Image, ImageError, InjectError, MediaStore,
    NamespaceConfig, ReportFilter, Status, StoreKind, ZoneSendAction, ZoneState, ZonedNamespace,
};

#[derive(Parser)]
#[command(name = "zonelab", version, about = "A ZNS (NVMe Zoned Namespace) SSD laboratory in user space")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a device image: a directory holding the namespace configuration, zone states and data.
    Create(CreateArgs),
    /// Show the geometry, limits and open/active zone counts of an image.
    Info {
        image: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Report zones (Zone Management Receive).
    Report(ReportArgs),
    /// Explicitly open a zone, or every CLOSED zone with --all.
    Open(ZoneActionArgs),
    /// Close a zone, or every open zone with --all.
    Close(ZoneActionArgs),
    /// Finish a zone (make it FULL), or every open and closed zone with --all.
    Finish(ZoneActionArgs),
    /// Reset a zone's write pointer, or every non-empty zone with --all.
    Reset(ZoneActionArgs),
    /// Take a READ_ONLY zone offline, or every READ_ONLY zone with --all.
    Offline(ZoneActionArgs),
    /// Write at a zone's write pointer; on a mounted or ublk-served image, to the running device behind the
    /// file system's back.
    Write(WriteArgs),
    /// Zone Append: the device picks the LBA and reports it.
    Append(AppendArgs),
    /// Read blocks as raw bytes.
    Read(ReadArgs),
    /// Put a zone into READ_ONLY or OFFLINE, as null_blk's configfs does; injecting the same state again
    /// returns the zone to EMPTY. On a mounted or ublk-served image (or its control socket) the fault reaches the
    /// running device, and io-error makes the zone's next read or write fail with a media error.
    Inject(InjectArgs),
    /// Power-cycle the device: open zones become CLOSED (or EMPTY if unwritten).
    PowerCycle { image: PathBuf },
    /// Flush: make every completed command durable on the host's disk.
    Flush { image: PathBuf },
    /// Rebuild the zone records of an image's zone journal that do not check, from the data: each zone's write
    /// pointer after its last block that is not all zeros (zeros written at a zone's end read as unwritten).
    RepairZones { image: PathBuf },
    /// Run random writes, appends, resets and zone management on an image, with self-verifying data.
    Churn(churn::ChurnArgs),
    /// Run fio jobs (fio's options and job files, fio's output) on a simulated device, in virtual time.
    /// --filename is a device image or preset:NAME[,key=value...]. Example:
    /// zonelab fio --name=w --filename=preset:zn540 --zonemode=zbd --rw=write --bs=4k --size=1z
    #[command(disable_help_flag = true)]
    Fio {
        /// fio options (--key=value) and job files.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Reproduce published ZNS results: `experiment list`, `experiment run ID|all [--quick] [--out DIR]`.
    Experiment {
        #[command(subcommand)]
        action: experiment::ExperimentAction,
    },
    /// A WAL-bound PUT stream into ZWAL or the conventional WAL, and optionally its recovery. Options:
    /// --preset=NAME --design=zwal|conventional --buffer=SIZE (at most 1GiB) --qd=N (at most 65536)
    /// --barrier=SIZE|zone --record-size=SIZE (at most 64MiB) --records=N (at most 2^32) --put-cost-us=F (0 to
    /// 1e6) --apply-cost-us=F --read-size=SIZE --sync-every=N --recover --store=memory|temp-file (where a
    /// recovered log's data is kept; default: memory up to 256 MiB of log) --seed=N --output-format=normal|json
    /// --trace=FILE (the device's commands and flash operations, for Perfetto)
    #[command(name = "wal-bench", disable_help_flag = true)]
    WalBench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// RocksDB's write path (db_bench fillrandom) on zonedfs in virtual time: puts with host CPU, a WAL,
    /// memtable flushes and leveled compaction, optionally beside a load of zone resets. Options:
    /// --preset=NAME[,key=value...] --scheduler=none|mq-deadline|zinc --threads=N --key-size=SIZE
    /// --value-size=SIZE --put-cost-us=F --sync=0|1 --build-cost-us-per-kib=F --memtable-size=SIZE --sst-size=SIZE
    /// --l0-trigger=N --level-base-size=SIZE --level-multiplier=N --runtime=SECONDS --resets-per-second=F
    /// --reset-pool-zones=N --seed=N --lifetime-hints=0|1 --map=FILE.png (the zone map at the end)
    /// --trace=FILE (the device's commands and flash operations, for Perfetto) --output-format=normal|json
    #[command(name = "kv-bench", disable_help_flag = true)]
    KvBench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// The ReZNS paper's file workloads in virtual time, after prefilling part of the device: fio's writes and
    /// deletes, or filebench's varmail and fileserver, on logfs (F2FS-like, the default) or zonefs (a file per
    /// zone). Options: --workload=fio|varmail|fileserver --fs=logfs|zonefs --preset=NAME[,key=value...]
    /// (default nvmevirt-rezns) --jobs=N (64) --files=N per job (8) --fileset=N (1000) --file-size=SIZE (15MiB)
    /// --bs=SIZE (4KiB; whole blocks) --fsync=N (16; 0 never) --rounds=N (3) --windows=N (0; the fio workload's
    /// writes on logfs in N windows, each with its throughput, tail latency and write amplification) --runtime=SECONDS (60; filebench's)
    /// --prefill=FRACTION (0.5) --cores=N --seed=N --start-jitter-us=F (1000) --output-format=normal|json --trace=FILE (the timed run: each job, and logfs's checkpoints and cleanings, with arrows to their commands, the device's commands and flash operations, for Perfetto) --map=FILE.png (logfs's zones at the end: each file's data and nodes, the table's summary)
    #[command(name = "file-churn", disable_help_flag = true)]
    FileChurn {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Zones over time from a `--trace` file (fio, kv-bench, file-churn, wal-bench, experiments): a strip per zone
    /// of how full it is, interval by interval, with a red mark where it was reset (PNG), the same as a table
    /// (--tsv), and a line per zone on standard output. Example: zonelab zone-timeline run.json --png zones.png
    ZoneTimeline(ZoneTimelineArgs),
    /// List the device presets.
    Presets,
    /// Replay a preset's reference measurements in virtual time and print model against measurement.
    Calibrate(calibrate::CalibrateArgs),
    /// fio over a grid of options and seeds (GRID.toml: `args`, `seeds`, and `[axes]` of option lists), every
    /// point in virtual time, `--jobs` at a time; one CSV row per point and job, appended to the table, whose
    /// points already there are skipped.
    Sweep {
        grid: PathBuf,
        /// The table (CSV) to append to.
        #[arg(long, default_value = "sweep.csv")]
        out: PathBuf,
        /// Also write the whole table as Parquet here (typed columns, empty fields null).
        #[arg(long, value_name = "FILE")]
        parquet: Option<PathBuf>,
        /// Points at once (default: the cores available); the rows are the same for any number.
        #[arg(long)]
        jobs: Option<usize>,
        /// Also write each point's Perfetto trace into this directory, as POINT.json (POINT: the table's point
        /// column).
        #[arg(long, value_name = "DIR")]
        trace: Option<PathBuf>,
    },
    /// Measure performance.
    Bench {
        #[command(subcommand)]
        which: bench::BenchCommand,
    },
    /// zonedfs, the file system the RocksDB plugin mounts: mkfs, ls, df, dump (the journal), fsck.
    Fs {
        #[command(subcommand)]
        action: zonedfs_tool::FsCommand,
    },
    /// Mount a device as a zonefs-compatible file system (FUSE): seq/N is zone N. Runs until unmounted.
    /// Example: zonelab mount preset:zn540,namespace.zones=64 /mnt/zns -o errors=zone-ro
    Mount(mount::MountArgs),
    /// Every namespace of a device as a Linux block device through ublk (`zonelab ublk serve DEVICE`, `zonelab
    /// ublk del N`): runs the `zonelab-ublk` program installed beside this one (docs/kernel.md).
    #[command(disable_help_flag = true)]
    Ublk {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// A guided tour: create an image, write, append, hit the limits, and report.
    Demo {
        /// Where to create the tour's image (default: a fresh temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Args)]
struct CreateArgs {
    image: PathBuf,
    /// Start from this TOML namespace configuration; the flags below override its fields.
    #[arg(long, conflicts_with = "preset")]
    config: Option<PathBuf>,
    /// Start from a device preset (see `zonelab presets`) or a preset TOML file: its namespace, and its flash
    /// model kept with the image. The flags below override namespace fields.
    #[arg(long)]
    preset: Option<String>,
    /// Override one preset field, e.g. --set media.nand.channels=16 (repeatable; needs --preset).
    #[arg(long = "set", value_name = "KEY=VALUE", requires = "preset")]
    overrides: Vec<String>,
    #[arg(long)]
    zones: Option<u32>,
    #[arg(long, value_name = "SIZE")]
    zone_size: Option<ByteSize>,
    /// Writable capacity of each zone, at least one LBA (default: the zone size).
    #[arg(long, value_name = "SIZE", value_parser = nonzero_size)]
    zone_cap: Option<ByteSize>,
    #[arg(long, value_name = "512|4096")]
    lba_size: Option<u32>,
    /// 0 means no limit.
    #[arg(long, value_name = "N")]
    max_open: Option<u32>,
    /// 0 means no limit.
    #[arg(long, value_name = "N")]
    max_active: Option<u32>,
    /// Zone Append Size Limit; 0 means MDTS.
    #[arg(long, value_name = "SIZE")]
    zasl: Option<ByteSize>,
    /// Maximum Data Transfer Size; 0 means no limit.
    #[arg(long, value_name = "SIZE")]
    mdts: Option<ByteSize>,
    #[arg(long, value_enum, default_value_t = StoreArg::File)]
    store: StoreArg,
    /// Replace an existing image.
    #[arg(long)]
    force: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum StoreArg {
    /// A sparse data file in the image: zone states and data persist.
    File,
    /// Zone states persist; data lives only while one process has the image open.
    Memory,
    /// Zone states persist; no data is kept (reads return zeros).
    Null,
}

#[derive(Args)]
struct ReportArgs {
    image: PathBuf,
    /// Report from the zone holding this LBA.
    #[arg(long, default_value_t = 0)]
    start_lba: u64,
    /// Report at most N zones.
    #[arg(long, value_name = "N")]
    count: Option<usize>,
    /// Only zones in this state: empty implicit-open explicit-open closed full read-only offline (or em oi oe cl
    /// fu ro ol).
    #[arg(long)]
    state: Option<ZoneState>,
    /// Set the Partial Report bit: nr_zones counts the zones returned, not all that match.
    #[arg(long)]
    partial: bool,
    #[arg(long, value_enum, default_value_t = format::ReportFormat::Text)]
    format: format::ReportFormat,
}

#[derive(Args)]
#[group(required = true, multiple = false, id = "target")]
struct ZoneTarget {
    /// The zone by index.
    #[arg(long, value_name = "N")]
    zone: Option<u32>,
    /// The zone by its start LBA.
    #[arg(long, value_name = "LBA")]
    start_lba: Option<u64>,
}

#[derive(Args)]
#[command(group(ArgGroup::new("which").required(true).args(["zone", "start_lba", "all"])))]
struct ZoneActionArgs {
    image: PathBuf,
    /// The zone by index.
    #[arg(long, value_name = "N")]
    zone: Option<u32>,
    /// The zone by its start LBA.
    #[arg(long, value_name = "LBA")]
    start_lba: Option<u64>,
    /// Select All: every zone the action processes.
    #[arg(long)]
    all: bool,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
struct DataSource {
    /// Write this file's bytes (a whole number of LBAs).
    #[arg(long, value_name = "FILE")]
    data: Option<PathBuf>,
    /// Fill the blocks with this byte (decimal or 0x-hex); needs --blocks.
    #[arg(long, value_name = "BYTE", value_parser = parse_byte, requires = "blocks")]
    pattern: Option<u8>,
}

#[derive(Args)]
struct WriteArgs {
    image: PathBuf,
    #[arg(long)]
    lba: u64,
    #[command(flatten)]
    source: DataSource,
    #[arg(long, value_name = "N")]
    blocks: Option<u64>,
}

#[derive(Args)]
struct AppendArgs {
    image: PathBuf,
    #[command(flatten)]
    target: ZoneTarget,
    #[command(flatten)]
    source: DataSource,
    #[arg(long, value_name = "N")]
    blocks: Option<u64>,
}

#[derive(Args)]
struct ZoneTimelineArgs {
    /// A trace written by `--trace=FILE`.
    trace: PathBuf,
    /// Draw the timeline into this PNG.
    #[arg(long, value_name = "FILE")]
    png: Option<PathBuf>,
    /// Write a row per zone and interval (zone, start_s, written_bytes, fill, resets).
    #[arg(long, value_name = "FILE")]
    tsv: Option<PathBuf>,
    /// Intervals the trace's span is cut into.
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    intervals: u32,
}

#[derive(Args)]
struct ReadArgs {
    image: PathBuf,
    #[arg(long)]
    lba: u64,
    #[arg(long, value_name = "N")]
    blocks: u64,
    /// Write the bytes to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct InjectArgs {
    image: PathBuf,
    #[arg(long, value_name = "N")]
    zone: u32,
    #[arg(long, value_enum)]
    state: FaultArg,
}

#[derive(Clone, Copy, ValueEnum)]
enum FaultArg {
    ReadOnly,
    Offline,
    /// The zone's next read or write fails with a media error (a running device only: a mounted or served image).
    IoError,
}

fn parse_byte(text: &str) -> Result<u8, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u8::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("{text:?} is not a byte (0 to 255, or 0x00 to 0xff)"))
}

/// Everything that ends a command unsuccessfully, with the exit code it maps to.
#[derive(Debug)]
pub enum CliError {
    /// The device rejected the command: exit 1.
    Device(Status),
    /// The image could not be created or opened: exit 1.
    Image(ImageError),
    /// A host-side file could not be read or written: exit 1.
    Io(PathBuf, io::Error),
    /// A bad configuration: exit 2.
    Config(String),
    /// Arguments that do not make a command: exit 2.
    Usage(String),
    /// Data that was found wrong (churn's verification): exit 1.
    Failed(String),
    /// The device rejected the command because a host file of the image failed (a full disk): exit 1.
    HostFault(Status, String),
}

impl From<Status> for CliError {
    fn from(status: Status) -> Self {
        CliError::Device(status)
    }
}

impl From<ImageError> for CliError {
    fn from(error: ImageError) -> Self {
        match error {
            ImageError::Config(error) => CliError::Config(error.to_string()),
            other => CliError::Image(other),
        }
    }
}

/// wal-bench and file-churn: what the user asked wrongly exits 2 (a bad preset too, as in `create`), a run
/// that failed exits 1.
impl From<zonelab_bench::ToolError> for CliError {
    fn from(error: zonelab_bench::ToolError) -> Self {
        if error.is_usage() {
            CliError::Usage(error.to_string())
        } else {
            CliError::Failed(error.to_string())
        }
    }
}

impl From<ConfigError> for CliError {
    fn from(error: ConfigError) -> Self {
        CliError::Config(error.to_string())
    }
}

impl CliError {
    fn report(&self) -> ExitCode {
        let (message, code) = match self {
            CliError::Device(status) => (status.to_string(), 1),
            CliError::Image(error) => (error.to_string(), 1),
            CliError::Io(path, error) => (format!("{}: {error}", path.display()), 1),
            CliError::Config(message) => (message.clone(), 2),
            CliError::Usage(message) => (message.clone(), 2),
            CliError::Failed(message) => (message.clone(), 1),
            CliError::HostFault(status, cause) => (format!("{status}: {cause}"), 1),
        };
        eprintln!("error: {message}");
        ExitCode::from(code)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`zonelab report IMG | head -1`): stop quietly, as coreutils do.
        Err(CliError::Io(path, error))
            if error.kind() == io::ErrorKind::BrokenPipe && path.as_os_str() == "<stdout>" =>
        {
            ExitCode::SUCCESS
        }
        Err(error) => error.report(),
    }
}

/// The tools that take fio-style `--key=value` options answer `--help` and `-h` as clap's own commands do,
/// with the same text as `zonelab help NAME`.
fn tool_help(command: &Command) -> Option<String> {
    let (name, args) = match command {
        Command::WalBench { args } => ("wal-bench", args),
        Command::KvBench { args } => ("kv-bench", args),
        Command::FileChurn { args } => ("file-churn", args),
        _ => return None,
    };
    args.iter().any(|arg| arg == "--help" || arg == "-h").then(|| {
        let mut cli = <Cli as clap::CommandFactory>::command();
        cli.build();
        cli.find_subcommand_mut(name).map(|tool| tool.render_long_help().to_string()).unwrap_or_default()
    })
}

/// `zonelab zone-timeline`: the zones of a trace over time.
fn zone_timeline(args: ZoneTimelineArgs, out: &mut impl Write) -> Result<(), CliError> {
    let text = fs::read(&args.trace).map_err(|error| CliError::Io(args.trace.clone(), error))?;
    let trace: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|error| CliError::Usage(format!("{}: not a trace's JSON: {error}", args.trace.display())))?;
    let timeline = zonelab_bench::zonetimeline::zone_timeline(&trace, args.intervals as usize)
        .map_err(|error| CliError::Usage(format!("{}: {error}", args.trace.display())))?;
    if let Some(path) = &args.tsv {
        fs::write(path, timeline.tsv()).map_err(|error| CliError::Io(path.clone(), error))?;
    }
    if let Some(path) = &args.png {
        timeline.draw(path).map_err(CliError::Failed)?;
    }
    writeln!(out, "zone\tbytes_written\tresets\tfill_at_end").map_err(stdout_error)?;
    for zone in &timeline.zones {
        let end = zone.written_bytes.last().copied().unwrap_or(0) as f64 / timeline.zone_cap_bytes.max(1) as f64;
        let resets: u32 = zone.resets.iter().sum();
        writeln!(out, "{}\t{}\t{resets}\t{end:.4}", zone.zone, zone.bytes_written_total).map_err(stdout_error)?;
    }
    Ok(())
}

fn run(command: Command) -> Result<(), CliError> {
    let mut stdout = io::stdout().lock();
    if let Some(help) = tool_help(&command) {
        return write!(stdout, "{help}").map_err(stdout_error);
    }
    match command {
        Command::Create(args) => create(args, &mut stdout),
        Command::Info { image, json } => {
            let image = open_to_read(&image)?;
            format::info(&image, json, &mut stdout).map_err(stdout_error)
        }
        Command::Report(args) => report(args, &mut stdout),
        Command::ZoneTimeline(args) => zone_timeline(args, &mut stdout),
        Command::Open(args) => zone_action(args, ZoneSendAction::Open),
        Command::Close(args) => zone_action(args, ZoneSendAction::Close),
        Command::Finish(args) => zone_action(args, ZoneSendAction::Finish),
        Command::Reset(args) => zone_action(args, ZoneSendAction::Reset),
        Command::Offline(args) => zone_action(args, ZoneSendAction::Offline),
        Command::Write(args) => {
            if let Some(shape) = mount::through_control_socket(&args.image, "geometry") {
                let (lba_size, mdts, _) = mount::geometry(&shape?)?;
                let data = load_data((lba_size, mdts), &args.source, args.blocks)?;
                let request = format!("write {} {}", args.lba, zonelab_runtime::control::to_hex(&data));
                return mount::through_control_socket(&args.image, &request)
                    .unwrap_or_else(|| Err(mount::gone(&args.image)))
                    .map(drop);
            }
            let image = Image::open(&args.image)?;
            let data = load_data(data_shape(&image), &args.source, args.blocks)?;
            on_device(image, ZnsCommand::Write { slba: args.lba, data: &data }).map(drop)
        }
        Command::Append(args) => {
            let image = Image::open(&args.image)?;
            let data = load_data(data_shape(&image), &args.source, args.blocks)?;
            let zslba = target_lba(&image, &args.target)?;
            let Completion::Appended { lba } = on_device(image, ZnsCommand::Append { zslba, data: &data })? else {
                return Err(CliError::Failed("the device completed the append without an LBA".into()));
            };
            writeln!(stdout, "appended at LBA {lba} ({lba:#x})").map_err(stdout_error)
        }
        Command::Read(args) => read(args, &mut stdout),
        Command::Inject(args) => {
            let fault = args.state.to_possible_value().map(|value| value.get_name().to_string()).unwrap_or_default();
            if let Some(reply) = mount::through_control_socket(&args.image, &format!("inject {} {fault}", args.zone)) {
                return reply.map(drop);
            }
            let state = match args.state {
                FaultArg::ReadOnly => ZoneState::ReadOnly,
                FaultArg::Offline => ZoneState::Offline,
                FaultArg::IoError => {
                    return Err(CliError::Usage(
                        "io-error is a fault of a running device: inject it into a mounted image (or a mount's \
                         control socket)"
                            .into(),
                    ))
                }
            };
            let mut image = Image::open(&args.image)?;
            match image.namespace_mut().inject_zone_state(args.zone, state) {
                Err(InjectError::Journal(status)) => on_image(&mut image, |_| Err(status)),
                other => other.map_err(|error| CliError::Usage(error.to_string())),
            }
        }
        Command::PowerCycle { image } => on_image(&mut Image::open(&image)?, |namespace| namespace.power_cycle()),
        Command::Flush { image } => on_image(&mut Image::open(&image)?, |namespace| namespace.flush()),
        Command::RepairZones { image } => {
            let (opened, header, rebuilt) = Image::rebuild_zone_records(&image)?;
            if let Some(header) = header {
                writeln!(stdout, "zone journal: {header}").map_err(stdout_error)?;
            }
            for zone in &rebuilt {
                writeln!(
                    stdout,
                    "zone {}: {}; rebuilt as {} with its write pointer {} blocks in",
                    zone.zone, zone.damage, zone.state, zone.wp_offset_lba
                )
                .map_err(stdout_error)?;
            }
            writeln!(stdout, "{}: {} zone records rebuilt", image.display(), rebuilt.len()).map_err(stdout_error)?;
            // The zone records first: the device's saved states open only over a whole namespace.
            drop(opened);
            let set_aside =
                DeviceBuilder::repair_saved_states(&image).map_err(|error| CliError::Failed(error.to_string()))?;
            for (file, reason) in set_aside {
                let rebuilt = match file {
                    "media.json" => "the flash model's wear starts again from zero",
                    _ => "the conventional namespace's map is rebuilt from the data it holds",
                };
                writeln!(stdout, "{file}: {reason}; set aside as {file}.damaged, {rebuilt}").map_err(stdout_error)?;
            }
            Ok(())
        }
        Command::Churn(args) => churn::run(&args, &mut stdout),
        Command::Fio { args } => fio::run(&args, &mut stdout),
        Command::Experiment { action } => experiment::run(action, &mut stdout),
        Command::Sweep { grid, out, parquet, jobs, trace } => {
            use zonelab_experiments::sweep::{self, SweepError};
            let failed = |error: SweepError| match error {
                SweepError::Grid { .. } => CliError::Config(error.to_string()),
                _ => CliError::Failed(error.to_string()),
            };
            let grid = sweep::Grid::load(&grid).map_err(failed)?;
            let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)).max(1);
            let outcome = sweep::run(&grid, &out, jobs, trace.as_deref()).map_err(failed)?;
            if let Some(parquet) = &parquet {
                sweep::write_parquet(&out, parquet).map_err(failed)?;
            }
            writeln!(
                stdout,
                "{}: {} points, {} already there, {} failed; {} rows added",
                out.display(),
                outcome.points,
                outcome.skipped,
                outcome.failed,
                outcome.rows
            )
            .map_err(stdout_error)
        }
        Command::Fs { action } => zonedfs_tool::run(action, &mut stdout),
        Command::WalBench { args } => {
            let spec = zonelab_bench::walbench::parse_args(&args).map_err(CliError::from)?;
            let result = zonelab_bench::walbench::run(&spec).map_err(CliError::from)?;
            print_json_or_text(
                &mut stdout,
                spec.json,
                || zonelab_bench::walbench::to_json(&result),
                || zonelab_bench::walbench::to_text(&result),
            )
        }
        Command::KvBench { args } => {
            let spec = zonelab_bench::kvbench::parse_args(&args).map_err(CliError::from)?;
            let result = zonelab_bench::kvbench::run(&spec).map_err(CliError::from)?;
            print_json_or_text(
                &mut stdout,
                spec.json,
                || zonelab_bench::kvbench::to_json(&result),
                || zonelab_bench::kvbench::to_text(&result),
            )
        }
        Command::FileChurn { args } => {
            let spec = zonelab_bench::filechurn::parse_args(&args).map_err(CliError::from)?;
            let result = zonelab_bench::filechurn::run(&spec).map_err(CliError::from)?;
            print_json_or_text(
                &mut stdout,
                spec.json,
                || serde_json::to_value(&result).unwrap_or_default(),
                || zonelab_bench::filechurn::to_text(&result),
            )
        }
        Command::Presets => calibrate::list_presets(&mut stdout),
        Command::Calibrate(args) => calibrate::run(&args, &mut stdout),
        Command::Bench { which } => bench::run(which, &mut stdout),
        Command::Mount(args) => mount::run(&args),
        Command::Ublk { args } => run_ublk(&args),
        Command::Demo { dir } => {
            drop(stdout);
            demo::run_tour(dir.as_deref(), &mut io::stdout())
        }
    }
}

/// Runs `zonelab-ublk` from beside this program, in its place: the kernel front end is a program of its own
/// because it builds with libclang (libublk's bindings), which the rest of zonelab does without.
fn run_ublk(args: &[String]) -> Result<(), CliError> {
    use std::os::unix::process::CommandExt;
    let program = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("zonelab-ublk")))
        .filter(|program| program.exists())
        .unwrap_or_else(|| PathBuf::from("zonelab-ublk"));
    let error = std::process::Command::new(&program).args(args).exec();
    Err(CliError::Io(program, error))
}

fn stdout_error(error: io::Error) -> CliError {
    CliError::Io(PathBuf::from("<stdout>"), error)
}

/// A `--output-format=json|normal` tool's result: pretty JSON, or its text.
fn print_json_or_text(
    out: &mut impl Write,
    json: bool,
    value: impl FnOnce() -> serde_json::Value,
    text: impl FnOnce() -> String,
) -> Result<(), CliError> {
    let text = if json {
        format!("{}\n", serde_json::to_string_pretty(&value()).map_err(|e| CliError::Failed(e.to_string()))?)
    } else {
        text()
    };
    out.write_all(text.as_bytes()).map_err(stdout_error)
}

/// A size that must not be 0 (where a configuration file's 0 means "the default", a flag says what it means).
fn nonzero_size(text: &str) -> Result<ByteSize, String> {
    match text.parse::<ByteSize>().map_err(|error| error.to_string())? {
        ByteSize(0) => Err("0 bytes leaves nothing to write; leave the flag out for the zone size".into()),
        size => Ok(size),
    }
}

fn create(args: CreateArgs, out: &mut impl Write) -> Result<(), CliError> {
    let mut device_model = None;
    let mut config = match (&args.config, &args.preset) {
        (Some(path), _) => {
            let text = fs::read_to_string(path).map_err(|error| CliError::Io(path.clone(), error))?;
            NamespaceConfig::from_toml(&text)
                .map_err(|error| CliError::Config(format!("{}: {error}", path.display())))?
        }
        (None, Some(preset)) => {
            let device =
                DeviceConfig::load(preset, &args.overrides).map_err(|error| CliError::Config(error.to_string()))?;
            if device.zoned_nsid == 0 {
                return Err(CliError::Config(format!(
                    "preset {preset} has no zoned namespace, and an image holds one; run its conventional namespace \
                     from the preset instead (--filename=preset:{preset})"
                )));
            }
            let mut table = toml::Table::try_from(&device).map_err(|error| CliError::Failed(error.to_string()))?;
            table.remove("namespace");
            device_model = Some(table);
            device.namespace
        }
        (None, None) => NamespaceConfig::default(),
    };
    if let Some(zones) = args.zones {
        config.zones = zones;
    }
    if let Some(size) = args.zone_size {
        config.zone_size = size;
    }
    if let Some(cap) = args.zone_cap {
        config.zone_cap = cap;
    }
    if let Some(lba_size) = args.lba_size {
        config.lba_size = lba_size;
    }
    if let Some(max_open) = args.max_open {
        config.max_open = max_open;
    }
    if let Some(max_active) = args.max_active {
        config.max_active = max_active;
    }
    if let Some(zasl) = args.zasl {
        config.zasl = zasl;
    }
    if let Some(mdts) = args.mdts {
        config.mdts = mdts;
    }
    let store = match args.store {
        StoreArg::File => StoreKind::File,
        StoreArg::Memory => StoreKind::Memory,
        StoreArg::Null => StoreKind::Null,
    };
    let image = Image::create(&args.image, store, config, device_model, args.force)?;
    let geometry = image.namespace().geometry();
    writeln!(
        out,
        "created {}: {} zones of {} ({} writable), {}-byte LBAs, {} store ({})",
        args.image.display(),
        geometry.zones,
        ByteSize(geometry.zone_size_lba << geometry.lba_shift),
        ByteSize(geometry.zone_cap_lba << geometry.lba_shift),
        geometry.lba_size,
        store.name(),
        store.what_persists()
    )
    .map_err(stdout_error)
}

/// Opens an image to look at it, saying on stderr which zones a damaged record shows offline.
pub(crate) fn open_to_read(path: &std::path::Path) -> Result<Image, CliError> {
    let image = Image::open_as(path, Access::ReadOnly)?;
    for (zone, reason) in image.damaged_zones() {
        eprintln!(
            "warning: {}: {reason}; zone {zone} is shown offline (`zonelab repair-zones` rebuilds it)",
            path.display()
        );
    }
    Ok(image)
}

fn report(args: ReportArgs, out: &mut impl Write) -> Result<(), CliError> {
    let filter = args.state.map_or(ReportFilter::All, ReportFilter::only);
    // A mounted image: the live device's report, through the mount's control channel.
    if let Some(report) = mount::report(&args.image, args.start_lba, filter, args.partial, args.count) {
        let (report, lba_size) = report?;
        return format::report(lba_size, &report, args.format, out).map_err(stdout_error);
    }
    let image = open_to_read(&args.image)?;
    let report = image.namespace().report_zones(args.start_lba, filter, args.partial, args.count)?;
    format::report(image.namespace().geometry().lba_size, &report, args.format, out).map_err(stdout_error)
}

/// The start LBA named by `--zone` or `--start-lba`. A zone index past the last zone is LBA Out of Range, as
/// the device says of a start LBA past the end; it is refused here because, shifted into an LBA, it could wrap
/// at 64 bits and name another zone.
fn target_lba(image: &Image, target: &ZoneTarget) -> Result<u64, CliError> {
    let geometry = image.namespace().geometry();
    match (target.zone, target.start_lba) {
        (Some(zone), None) if zone >= geometry.zones => Err(CliError::Device(Status::LbaOutOfRange)),
        (Some(zone), None) => Ok(geometry.zone_start_lba(zone)),
        (None, Some(lba)) => Ok(lba),
        _ => Err(CliError::Usage("name the zone with exactly one of --zone or --start-lba".into())),
    }
}

/// Runs a command on an image's namespace; a failure names the host error behind it, if any (a full disk).
fn on_image<T>(
    image: &mut Image,
    command: impl FnOnce(&mut ZonedNamespace<Box<dyn MediaStore>>) -> Result<T, Status>,
) -> Result<T, CliError> {
    command(image.namespace_mut()).map_err(|status| match image.namespace_mut().take_host_fault() {
        Some(fault) => CliError::HostFault(status, fault.describe(image.path())),
        None => CliError::Device(status),
    })
}

/// Runs a command that changes an image through the emulated device over it, so that the flash model sees it:
/// a reset erases blocks, and the image keeps their wear. A failure names the host error behind it, if any.
fn on_device(image: Image, command: ZnsCommand<'_>) -> Result<Completion, CliError> {
    let path = image.path().to_path_buf();
    let built = DeviceBuilder::over_image(image, HostPath::Spdk, &path.display().to_string())
        .map_err(|error| CliError::Failed(error.to_string()))?;
    let mut device = built.device;
    device.submit(0, command).result.map_err(|status| match device.take_host_fault() {
        Some(fault) => CliError::HostFault(status, fault.describe(&path)),
        None => CliError::Device(status),
    })
}

fn zone_action(args: ZoneActionArgs, action: ZoneSendAction) -> Result<(), CliError> {
    let image = Image::open(&args.image)?;
    let slba = if args.all {
        0
    } else {
        target_lba(&image, &ZoneTarget { zone: args.zone, start_lba: args.start_lba }).map_err(|error| match error {
            CliError::Usage(message) if message.starts_with("name the zone") => {
                CliError::Usage("name the zones with exactly one of --zone, --start-lba or --all".into())
            }
            other => other,
        })?
    };
    on_device(image, ZnsCommand::ZoneManagementSend { slba, action, select_all: args.all }).map(drop)
}

/// What data for a write must fit: the LBA size and MDTS in bytes (0: no limit).
fn data_shape(image: &Image) -> (u64, u64) {
    (u64::from(image.namespace().geometry().lba_size), image.namespace().config().mdts.0)
}

fn load_data(shape: (u64, u64), source: &DataSource, blocks: Option<u64>) -> Result<Vec<u8>, CliError> {
    let (lba_size, mdts) = shape;
    match (&source.data, source.pattern, blocks) {
        (Some(path), None, None) => {
            let data = fs::read(path).map_err(|error| CliError::Io(path.clone(), error))?;
            if data.is_empty() || !(data.len() as u64).is_multiple_of(lba_size) {
                return Err(CliError::Usage(format!(
                    "{} is {} bytes long, not a whole number of {lba_size}-byte LBAs",
                    path.display(),
                    data.len()
                )));
            }
            Ok(data)
        }
        (None, Some(byte), Some(blocks)) if blocks > 0 => {
            let bytes = blocks
                .checked_mul(lba_size)
                .filter(|&bytes| bytes <= 1 << 32)
                .ok_or_else(|| CliError::Usage(format!("--blocks {blocks} is more than one command can carry")))?;
            // Past MDTS the device refuses the command; say so before building its data.
            if mdts != 0 && bytes > mdts {
                return Err(CliError::Device(Status::InvalidField));
            }
            Ok(vec![byte; bytes as usize])
        }
        (None, Some(_), _) => Err(CliError::Usage("--pattern needs --blocks N with N at least 1".into())),
        _ => Err(CliError::Usage("give the data as --data FILE, or as --pattern BYTE --blocks N".into())),
    }
}

fn read(args: ReadArgs, out: &mut impl Write) -> Result<(), CliError> {
    let mut image = open_to_read(&args.image)?;
    let lba_size = u64::from(image.namespace().geometry().lba_size);
    let bytes = args
        .blocks
        .checked_mul(lba_size)
        .filter(|&bytes| bytes <= 1 << 32)
        .ok_or_else(|| CliError::Usage(format!("--blocks {} is more than one command can carry", args.blocks)))?;
    let mut buf = vec![0u8; bytes as usize];
    on_image(&mut image, |namespace| namespace.read(args.lba, &mut buf))?;
    match &args.out {
        Some(path) => write_file(path, &buf),
        None => out.write_all(&buf).map_err(stdout_error),
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    fs::write(path, bytes).map_err(|error| CliError::Io(path.to_path_buf(), error))
}

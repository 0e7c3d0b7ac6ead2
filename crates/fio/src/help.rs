//! fio's own help: `--help`, `--version` and `--cmdhelp[=option]`, for the options `zonelab fio` accepts, in
//! fio 3.33's layout so that a fio user finds what they expect where they expect it.

/// The fio release whose options, output and zbd rules `zonelab fio` follows.
pub const FIO_RELEASE: &str = "fio-3.33";

/// One job option as `--cmdhelp` describes it.
pub struct OptionDoc {
    pub name: &'static str,
    pub alias: Option<&'static str>,
    /// fio's words for the value's type.
    pub kind: &'static str,
    pub default: Option<&'static str>,
    pub range: Option<&'static str>,
    pub help: &'static str,
    /// A value the option accepts, for the test that every documented option parses.
    pub example: &'static str,
}

const fn doc(name: &'static str, kind: &'static str, help: &'static str, example: &'static str) -> OptionDoc {
    OptionDoc { name, alias: None, kind, default: None, range: None, help, example }
}

const INT: &str = "integer value (opt=100)";
const BOOL: &str = "boolean value (opt=100)";
const STR: &str = "string (opt=bla)";
const TIME: &str = "integer value (opt=100)";
const FLOAT: &str = "float value";
const SIZE: &str = "integer value (opt=100)";

/// Every job option `zonelab fio` honours (options it accepts but ignores are listed by `IGNORED` in
/// `options.rs` and reported when used). zonelab's own options say so.
pub const JOB_OPTIONS: &[OptionDoc] = &[
    doc("description", STR, "Text job description", "a job"),
    doc("name", STR, "Name of this job", "job1"),
    OptionDoc {
        help: "Device to use: an image path, or preset:NAME[,key=value...] (zonelab: the emulated ZNS device)",
        ..doc("filename", STR, "", "preset:instant")
    },
    OptionDoc {
        alias: Some("readwrite"),
        default: Some("read"),
        help: "IO direction: read, write, randread, randwrite, rw, randrw, trim, randtrim (zone resets), \
               finish (zonelab: zone finishes)",
        ..doc("rw", STR, "", "randread")
    },
    OptionDoc {
        default: Some("50"),
        range: Some("min=0, max=100"),
        ..doc("rwmixread", INT, "Percentage of mixed workload that is reads", "70")
    },
    OptionDoc {
        default: Some("50"),
        range: Some("min=0, max=100"),
        ..doc("rwmixwrite", INT, "Percentage of mixed workload that is writes", "30")
    },
    OptionDoc {
        alias: Some("blocksize"),
        default: Some("4096"),
        range: Some("min=1, max=-1"),
        ..doc("bs", INT, "Block size unit", "8k")
    },
    doc("size", SIZE, "Total size of device or files (also N% or Nz, zones)", "1z"),
    OptionDoc { default: Some("0"), ..doc("offset", SIZE, "Start IO from this offset", "0") },
    OptionDoc {
        default: Some("0"),
        ..doc("offset_increment", SIZE, "What is the increment from one offset to the next", "1z")
    },
    OptionDoc { alias: Some("io_limit"), ..doc("io_size", SIZE, "Total size of I/O to be performed", "4M") },
    OptionDoc {
        default: Some("1"),
        range: Some("min=1, max=65535"),
        ..doc("iodepth", INT, "Number of IO buffers to keep in flight", "8")
    },
    OptionDoc {
        alias: Some("iodepth_batch"),
        default: Some("1"),
        range: Some("min=0, max=65535"),
        ..doc("iodepth_batch_submit", INT, "I/Os queued before they are submitted in one call (0: iodepth)", "4")
    },
    OptionDoc {
        alias: Some("iodepth_batch_complete"),
        default: Some("1"),
        range: Some("min=0, max=65535"),
        ..doc("iodepth_batch_complete_min", INT, "Completions waited for at least when the queue is full", "4")
    },
    OptionDoc {
        default: Some("0"),
        range: Some("min=0, max=65535"),
        ..doc("iodepth_batch_complete_max", INT, "Completions reaped at most at once (default: the min)", "8")
    },
    OptionDoc {
        default: Some("0"),
        range: Some("min=0, max=65535"),
        ..doc("iodepth_low", INT, "Low water mark for queuing depth (0: iodepth)", "2")
    },
    OptionDoc {
        default: Some("1"),
        range: Some("min=1, max=4096"),
        ..doc("numjobs", INT, "Duplicate this job this many times", "2")
    },
    OptionDoc {
        default: Some("psync"),
        help: "IO engine to use: psync and libaio (kernel path), io_uring, io_uring_cmd, spdk (zonelab: each \
               picks the host path the device is reached through)",
        ..doc("ioengine", STR, "", "libaio")
    },
    OptionDoc { default: Some("0"), ..doc("direct", BOOL, "Use O_DIRECT IO (negates buffered)", "1") },
    OptionDoc { default: Some("1"), ..doc("buffered", BOOL, "Use buffered IO (negates direct)", "0") },
    OptionDoc {
        default: Some("none"),
        help: "Mode for the zonesize, zonerange and zoneskip parameters: none, strided or zbd",
        ..doc("zonemode", STR, "", "zbd")
    },
    doc("zonesize", SIZE, "Amount of data to read per zone (strided); the device's zone size (zbd)", "64k"),
    doc("zonerange", SIZE, "Give size of an IO zone (strided)", "1M"),
    OptionDoc { default: Some("0"), ..doc("zoneskip", SIZE, "Space between IO zones (also Nz, zones)", "1z") },
    doc("filesize", SIZE, "Size of individual files (or a low-high range)", "1G"),
    OptionDoc { default: Some("1"), ..doc("nrfiles", INT, "Split job workload between this number of files", "1") },
    OptionDoc {
        default: Some("0"),
        ..doc("max_open_zones", INT, "Limit on the number of simultaneously opened sequential write zones", "4")
    },
    OptionDoc {
        default: Some("0"),
        ..doc("job_max_open_zones", INT, "Limit on the number of sequential write zones opened by this job", "2")
    },
    OptionDoc {
        default: Some("0"),
        ..doc("ignore_zone_limits", BOOL, "Ignore the zone resource limits (max open/active zones) of the device", "1")
    },
    OptionDoc {
        default: Some("0"),
        range: Some("min=0, max=1"),
        ..doc("zone_reset_threshold", FLOAT, "Zoned block device reset threshold", "0.5")
    },
    OptionDoc {
        default: Some("0"),
        range: Some("min=0, max=1"),
        ..doc("zone_reset_frequency", FLOAT, "Zoned block device zone reset frequency in HZ", "0.1")
    },
    doc("rate_iops", INT, "Limit IO used to this number of IO operations/sec", "1000"),
    OptionDoc {
        alias: Some("timeout"),
        ..doc("runtime", TIME, "Stop workload when this amount of time has passed", "10ms")
    },
    OptionDoc { default: Some("0"), ..doc("time_based", BOOL, "Keep running until runtime/timeout is met", "1") },
    OptionDoc { default: Some("0"), ..doc("ramp_time", TIME, "Ramp up time before measuring performance", "1ms") },
    OptionDoc { default: Some("0"), ..doc("group_reporting", BOOL, "Do reporting on a per-group basis", "1") },
    doc(
        "percentile_list",
        "list of floating point values separated by ':' (opt=5.0:99.5)",
        "Specify a custom list of percentiles to report for completion latency and block errors",
        "50:99.9",
    ),
    OptionDoc {
        default: Some("0"),
        ..doc("lat_percentiles", BOOL, "Enable the reporting of latency percentiles", "1")
    },
    OptionDoc {
        default: Some("1"),
        ..doc("clat_percentiles", BOOL, "Enable the reporting of completion latency percentiles", "0")
    },
    OptionDoc { default: Some("0x89"), ..doc("randseed", INT, "Set the random generator seed value", "7") },
    OptionDoc {
        alias: Some("wait_for_previous"),
        default: Some("0"),
        ..doc("stonewall", BOOL, "Insert a hard barrier between this job and previous", "1")
    },
    OptionDoc { default: Some("0"), ..doc("new_group", BOOL, "Mark the start of a new group (for reporting)", "1") },
    OptionDoc {
        default: Some("0"),
        ..doc("zone_append", BOOL, "zonelab: write with Zone Append (io_uring_cmd and spdk carry it)", "1")
    },
    OptionDoc {
        default: Some("0"),
        ..doc("hipri", BOOL, "Use polled IO completions (io_uring; the job's thread polls, never sleeps)", "1")
    },
    OptionDoc {
        default: Some("0"),
        ..doc("sqthread_poll", BOOL, "Offload submission/completion to kernel thread (io_uring; fio spins)", "1")
    },
    OptionDoc {
        help: "zonelab: the host's I/O scheduler: none, mq-deadline or zinc (default: mq-deadline through the \
               block layer, as Linux sets for a zoned device; none for spdk and io_uring_cmd)",
        ..doc("scheduler", STR, "", "mq-deadline")
    },
    OptionDoc {
        default: Some("64ms"),
        ..doc("zinc_epoch", TIME, "zonelab: ZINC's epoch, RESET_EPOCH_INTERVAL (needs scheduler=zinc first)", "64ms")
    },
    OptionDoc {
        default: Some("2000"),
        ..doc(
            "zinc_tokens",
            INT,
            "zonelab: 8 KiB write units after which ZINC lets a held reset or finish go at its epoch (needs scheduler=zinc first)",
            "2000",
        )
    },
    OptionDoc {
        default: Some("3"),
        ..doc("zinc_max_holds", INT, "zonelab: epochs ZINC holds a reset or finish at most (needs scheduler=zinc first)", "3")
    },
    OptionDoc {
        default: Some("3"),
        ..doc(
            "zinc_threshold",
            INT,
            "zonelab: with fewer 8 KiB write units in flight ZINC lets a reset or finish go at once (needs scheduler=zinc first)",
            "3",
        )
    },
    doc("write_lat_log", STR, "Write log of latency during run (PREFIX_lat.N.log, _slat, _clat; ns)", "x"),
    doc("write_bw_log", STR, "Write log of bandwidth during run (PREFIX_bw.N.log; KiB/s)", "x"),
    doc("write_iops_log", STR, "Write log of IOPS during run (PREFIX_iops.N.log)", "x"),
    OptionDoc {
        default: Some("0"),
        ..doc("log_avg_msec", INT, "Average bw/iops/lat logs over this period of time", "10")
    },
    OptionDoc {
        default: Some("none"),
        help: "Continue on non-fatal errors during IO: none, read, write, io, verify, all",
        ..doc("continue_on_error", STR, "", "io")
    },
    OptionDoc { default: Some("0"), ..doc("startdelay", TIME, "Only start job when this period has passed", "1ms") },
    OptionDoc {
        default: Some("1"),
        range: Some("min=1, max=4294967295"),
        ..doc("loops", INT, "Number of times to run the job", "2")
    },
    OptionDoc { default: Some("0"), ..doc("number_ios", INT, "Force job completion after this number of IOs", "100") },
    OptionDoc {
        default: Some("random"),
        help: "Random offset distribution generator: random, zipf:theta, pareto:h, normal:dev",
        ..doc("random_distribution", STR, "", "zipf:1.2")
    },
    OptionDoc {
        default: Some("0"),
        ..doc("norandommap", BOOL, "Accept potential duplicate random blocks", "1")
    },
    OptionDoc { default: Some("0"), ..doc("fsync", INT, "Issue fsync for writes every given number of blocks", "32") },
    OptionDoc {
        default: Some("0"),
        ..doc("fdatasync", INT, "Issue fdatasync for writes every given number of blocks", "32")
    },
    OptionDoc { default: Some("0"), ..doc("end_fsync", BOOL, "Include fsync at the end of job", "1") },
    OptionDoc {
        default: Some("tausworthe"),
        help: "Type of Random Number Generator to use: tausworthe, lfsr, tausworthe64 (zonelab: lfsr visits each \
               block once per pass, in an order of its own)",
        ..doc("random_generator", STR, "", "lfsr")
    },
    doc("bssplit", STR, "Set a specific mix of block sizes", "4k/50:64k/50"),
    OptionDoc {
        default: Some("0"),
        help: "Verify data written: md5, crc32c, crc32c-intel, crc32, meta, pattern, null",
        ..doc("verify", STR, "", "crc32c")
    },
    OptionDoc { default: Some("1"), ..doc("do_verify", BOOL, "Run verification stage after write", "0") },
    doc("verify_backlog", INT, "Verify after this number of blocks are written", "16"),
    doc("verify_batch", INT, "Verify this number of IO blocks", "8"),
    doc("verify_interval", SIZE, "Store verify buffer header every N bytes", "4k"),
    doc("verify_pattern", STR, "Fill pattern for IO buffers", "0xdeadbeef"),
    doc("buffer_pattern", STR, "Fill pattern for IO buffers", "\"zone\""),
    doc("read_iolog", STR, "Playback IO pattern from file", "trace.log"),
    OptionDoc {
        default: Some("1024"),
        help: "Unit prefix interpretation for quantities of data (IEC and SI): 1024 or 1000",
        ..doc("kb_base", STR, "", "1000")
    },
    OptionDoc {
        default: Some("0"),
        help: "Bit multiple of result summary data (8 for byte, 1 for bit)",
        ..doc("unit_base", STR, "", "1")
    },
    OptionDoc {
        default: Some("0"),
        ..doc("replay_no_stall", BOOL, "Playback IO pattern file as fast as possible without stalls", "1")
    },
    doc("write_iolog", STR, "Store IO pattern to file", "trace.log"),
    doc("section", STR, "Only run specified section in job file (command line; repeatable)", "a"),
    doc("prefill", STR, "zonelab: write the job's zones beforehand in no time: full, or a size per zone", "full"),
    doc("seed", INT, "zonelab: seed of the reordering of concurrent submissions", "3"),
    doc("trace", STR, "zonelab: write the run as a Perfetto / Chrome trace (command line)", "run.json"),
    doc(
        "hostftl",
        FLOAT,
        "zonelab: a block-level host FTL over the zoned namespace with this over-provisioning (dm-zap's level)",
        "0.28",
    ),
];

/// `fio --version`.
pub fn version() -> String {
    format!("{FIO_RELEASE}\n")
}

/// `fio --help`: the options of the invocation, as fio 3.33 lists them, for those zonelab has.
pub fn usage() -> String {
    format!(
        "{FIO_RELEASE}\n\
         zonelab fio [options] [job options] <job file(s)>\n\
         \x20 --output\t\tWrite output to file\n\
         \x20 --minimal\t\tMinimal (terse) output\n\
         \x20 --output-format=type\tOutput format (terse,json,json+,normal)\n\
         \x20 --version\t\tPrint version info and exit\n\
         \x20 --help\t\tPrint this page\n\
         \x20 --cmdhelp=cmd\t\tPrint command help, \"all\" for all of them\n\
         \x20 --eta=when\t\tWhen ETA estimate should be printed\n\
         \x20           \t\tMay be \"always\", \"never\" or \"auto\"\n\
         \x20 --eta-newline=t\tForce a new line for every 't' period passed\n\
         \x20 --status-interval=t\tForce full status dump every 't' period passed (of device time)\n\
         \x20 --section=name\tOnly run specified section in job file, multiple sections can be specified\n\
         \n\
         zonelab fio runs fio's jobs in virtual time on an emulated ZNS device, with fio 3.33's options, zbd\n\
         rules and output; `--cmdhelp=all` lists the job options it accepts. Real fio drives zonelab in real time\n\
         through the external ioengine (docs/fio-engine.md).\n"
    )
}

/// `fio --cmdhelp[=option]`: every option on a line, or one option in full. None if no option has that name.
pub fn cmdhelp(which: Option<&str>) -> Option<String> {
    let which = which.map(|name| name.trim().replace('-', "_"));
    match which.as_deref() {
        None | Some("all") => {
            Some(JOB_OPTIONS.iter().map(|option| format!("{:<24}: {}\n", option.name, option.help)).collect())
        }
        Some(name) => {
            let option = JOB_OPTIONS.iter().find(|option| option.name == name || option.alias == Some(name))?;
            let mut text = format!("{:>20}: {}\n", option.name, option.help);
            if let Some(alias) = option.alias {
                text.push_str(&format!("{:>20}: {alias}\n", "alias"));
            }
            text.push_str(&format!("{:>20}: {}\n", "type", option.kind));
            if let Some(default) = option.default {
                text.push_str(&format!("{:>20}: {default}\n", "default"));
            }
            if let Some(range) = option.range {
                text.push_str(&format!("{:>20}: {range}\n", "range"));
            }
            text.push('\n');
            Some(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_invocation;

    #[test]
    fn every_documented_option_parses_with_its_example() {
        for option in JOB_OPTIONS {
            let mut args = vec!["--name=j".to_string()];
            if option.name.starts_with("zinc_") {
                args.push("--scheduler=zinc".into());
            }
            args.push(format!("--{}={}", option.name, option.example));
            if let Some(alias) = option.alias {
                args.push(format!("--{alias}={}", option.example));
            }
            if let Err(error) = parse_invocation(&args, |_| Err("no files".into())) {
                panic!("--{}={}: {error}", option.name, option.example);
            }
        }
    }

    #[test]
    fn cmdhelp_describes_one_option_or_lists_them_all() {
        let bs = cmdhelp(Some("blocksize")).expect("bs by its alias");
        assert!(bs.starts_with("                  bs: Block size unit\n               alias: blocksize\n"), "{bs}");
        assert!(bs.contains("             default: 4096\n"), "{bs}");
        let all = cmdhelp(None).expect("all");
        assert_eq!(all.lines().count(), JOB_OPTIONS.len());
        assert!(all.contains("rwmixread               : Percentage of mixed workload that is reads\n"), "{all}");
        assert!(cmdhelp(Some("bogus")).is_none());
    }
}

//! `zonelab demo`: a tour of the command line on a small image, run through the very same argument parsing and
//! commands a user types, so that what it shows is what the CLI does.

use std::io::Write;
use std::path::Path;

use clap::Parser;

use crate::{run, stdout_error, Cli, CliError};

pub fn run_tour(dir: Option<&Path>, out: &mut impl Write) -> Result<(), CliError> {
    let dir = match dir {
        Some(dir) => dir.to_path_buf(),
        None => std::env::temp_dir().join(format!("zonelab-demo-{}", std::process::id())),
    };
    let image = dir.display().to_string();
    let steps: &[(&str, String)] = &[
        (
            "A namespace of 8 zones of 1 MiB, 768 KiB writable, at most 2 open and 3 active zones.",
            format!("create {image} --zones 8 --zone-size 1MiB --zone-cap 768KiB --max-open 2 --max-active 3 --force"),
        ),
        (
            "Writes go to the write pointer; the zone opens implicitly.",
            format!("write {image} --lba 0 --pattern 0xaa --blocks 16"),
        ),
        (
            "Writing anywhere else is refused with the NVMe status.",
            format!("write {image} --lba 0 --pattern 0xbb --blocks 1"),
        ),
        ("Zone Append lets the device choose the LBA.", format!("append {image} --zone 1 --pattern 0xcc --blocks 8")),
        (
            "A third open zone: the oldest implicitly opened zone (0) is closed to make room.",
            format!("write {image} --lba 512 --pattern 0xdd --blocks 4"),
        ),
        (
            "Closed zones still hold an active resource: a fourth zone is one too many.",
            format!("write {image} --lba 768 --pattern 0xee --blocks 1"),
        ),
        ("Finishing zone 0 releases its resources.", format!("finish {image} --zone 0")),
        ("Now zone 3 can be written.", format!("write {image} --lba 768 --pattern 0xee --blocks 1")),
        ("The report, as util-linux blkzone prints it (512-byte sectors).", format!("report {image} --format blkzone")),
        (
            "Only the CLOSED zones, as nvme-cli prints them (LBAs, raw state byte).",
            format!("report {image} --state closed --format nvme"),
        ),
        ("A power cycle closes every open zone.", format!("power-cycle {image}")),
        ("Zone states persist between invocations.", format!("info {image}")),
    ];
    for (why, args) in steps {
        writeln!(out, "# {why}\n$ zonelab {args}").map_err(stdout_error)?;
        out.flush().map_err(stdout_error)?;
        let argv = std::iter::once("zonelab").chain(args.split_whitespace());
        let cli = Cli::try_parse_from(argv).map_err(|error| CliError::Usage(error.to_string()))?;
        if let Err(CliError::Device(status)) = run(cli.command) {
            writeln!(out, "error: {status}").map_err(stdout_error)?;
        }
        writeln!(out).map_err(stdout_error)?;
    }
    writeln!(out, "The image is left at {image}: try `zonelab report {image}`.").map_err(stdout_error)
}

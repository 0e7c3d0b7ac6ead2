//! `zonelab demo`: a tour of the command line on a small image, run through the very same argument parsing and
//! commands a user types, so that what it shows is what the CLI does.

use std::io::Write;
use std::path::Path;

use clap::Parser;

use crate::{run, stdout_error, Cli, CliError};

/// Runs the tour on an image it creates at `dir` (a fresh temporary directory if None). It never replaces
/// anything: an existing image or file at `dir` is refused, as `zonelab create` without `--force` refuses it.
/// The steps that show a refusal print the device's status; any other failure stops the tour.
pub fn run_tour(dir: Option<&Path>, out: &mut impl Write) -> Result<(), CliError> {
    let dir = match dir {
        Some(dir) => dir.to_path_buf(),
        None => std::env::temp_dir().join(format!("zonelab-demo-{}", std::process::id())),
    };
    let image = dir.display().to_string();
    // (why, arguments after the image path's command, whether the device refuses it)
    let step = |why: &'static str, command: &str, rest: &str, refused: bool| {
        let mut args = vec![command.to_string(), image.clone()];
        args.extend(rest.split_whitespace().map(str::to_string));
        (why, args, refused)
    };
    let steps = [
        step(
            "A namespace of 8 zones of 1 MiB, 768 KiB writable, at most 2 open and 3 active zones.",
            "create",
            "--zones 8 --zone-size 1MiB --zone-cap 768KiB --max-open 2 --max-active 3",
            false,
        ),
        step(
            "Writes go to the write pointer; the zone opens implicitly.",
            "write",
            "--lba 0 --pattern 0xaa --blocks 16",
            false,
        ),
        step(
            "Writing anywhere else is refused with the NVMe status.",
            "write",
            "--lba 0 --pattern 0xbb --blocks 1",
            true,
        ),
        step("Zone Append lets the device choose the LBA.", "append", "--zone 1 --pattern 0xcc --blocks 8", false),
        step(
            "A third open zone: the oldest implicitly opened zone (0) is closed to make room.",
            "write",
            "--lba 512 --pattern 0xdd --blocks 4",
            false,
        ),
        step(
            "Closed zones still hold an active resource: a fourth zone is one too many.",
            "write",
            "--lba 768 --pattern 0xee --blocks 1",
            true,
        ),
        step("Finishing zone 0 releases its resources.", "finish", "--zone 0", false),
        step("Now zone 3 can be written.", "write", "--lba 768 --pattern 0xee --blocks 1", false),
        step("The report, as util-linux blkzone prints it (512-byte sectors).", "report", "--format blkzone", false),
        step(
            "Only the CLOSED zones, as nvme-cli prints them (LBAs, raw state byte).",
            "report",
            "--state closed --format nvme",
            false,
        ),
        step("A power cycle closes every open zone.", "power-cycle", "", false),
        step("Zone states persist between invocations.", "info", "", false),
    ];
    for (why, args, refused) in steps {
        let shown: Vec<String> =
            args.iter().map(|arg| if arg.contains(' ') { format!("'{arg}'") } else { arg.clone() }).collect();
        writeln!(out, "# {why}\n$ zonelab {}", shown.join(" ")).map_err(stdout_error)?;
        out.flush().map_err(stdout_error)?;
        let cli = Cli::try_parse_from(std::iter::once("zonelab".to_string()).chain(args))
            .map_err(|error| CliError::Usage(error.to_string()))?;
        match run(cli.command) {
            Ok(()) => {}
            Err(CliError::Device(status)) if refused => writeln!(out, "error: {status}").map_err(stdout_error)?,
            Err(error) => return Err(error),
        }
        writeln!(out).map_err(stdout_error)?;
    }
    writeln!(out, "The image is left at {image}: try `zonelab report {image}`.").map_err(stdout_error)
}

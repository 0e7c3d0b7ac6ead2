//! `zonelab fio`: parse fio's arguments and job files, run them in virtual time, print fio's output.

use std::io::Write;
use std::time::{Duration, Instant};

use zonelab_device::BuildError;
use zonelab_fio::{
    help, parse_invocation, run_reporting, status_line, to_json, to_terse, to_text, write_logs, Eta, FioError,
    FioResult, OutputFormat, Progress,
};

use crate::{stdout_error, CliError};

/// `--help`, `--version` and `--cmdhelp[=option]` answer and end the invocation, as in fio.
fn help(args: &[String]) -> Option<Result<String, CliError>> {
    args.iter().find_map(|arg| match arg.split_once('=').map_or((arg.as_str(), None), |(k, v)| (k, Some(v))) {
        ("--help" | "-h", _) => Some(Ok(help::usage())),
        ("--version", _) => Some(Ok(help::version())),
        ("--cmdhelp", which) => Some(help::cmdhelp(which).ok_or_else(|| {
            CliError::Usage(format!("no such option {:?}: --cmdhelp=all lists them", which.unwrap_or("")))
        })),
        _ => None,
    })
}

pub fn run(args: &[String], out: &mut impl Write) -> Result<(), CliError> {
    if let Some(text) = help(args) {
        return out.write_all(text?.as_bytes()).map_err(stdout_error);
    }
    let invocation = parse_invocation(args, |path| std::fs::read_to_string(path).map_err(|error| error.to_string()))
        .map_err(|error| CliError::Usage(error.to_string()))?;
    // fio's status line, on standard error so that it never mixes with the report: on a terminal (or with
    // --eta=always), once a second, rewritten in place unless --eta-newline asks for new lines.
    let show = match invocation.eta {
        Eta::Always => true,
        Eta::Never => false,
        // SAFETY: isatty only reads the descriptor's state.
        Eta::Auto => (unsafe { libc::isatty(2) }) == 1,
    };
    let (mut printed, mut line_started) = (false, Instant::now());
    let mut print_status = |progress: &Progress| {
        let line = status_line(progress);
        let newline =
            invocation.eta_newline_ns.is_some_and(|every| line_started.elapsed().as_nanos() >= u128::from(every));
        if newline {
            line_started = Instant::now();
        }
        eprint!("{}{line}", if newline && printed { "\n" } else { "\r" });
        printed = true;
    };
    let reporting = show.then_some((Duration::from_secs(1), &mut print_status as &mut dyn FnMut(&Progress)));
    // --status-interval: the results so far in the chosen formats, as they come (or kept for --output).
    let (mut dumped, mut dump_error) = (String::new(), None);
    let mut dump = |snapshot: &FioResult| match render(snapshot, invocation.output_format) {
        Ok(text) if invocation.output.is_some() => dumped.push_str(&text),
        Ok(text) => {
            if let Err(error) = out.write_all(text.as_bytes()) {
                dump_error.get_or_insert(stdout_error(error));
            }
        }
        Err(error) => {
            dump_error.get_or_insert(error);
        }
    };
    let result = run_reporting(&invocation, 1, reporting, Some(&mut dump));
    if let Some(error) = dump_error {
        return Err(error);
    }
    if printed {
        eprintln!();
    }
    let result = result.map_err(|error| match error {
        // A bad preset, namespace, precondition or namespace ID in the spec is a configuration error (exit 2); a
        // missing or corrupt image, or a device that refused the prefill, exits 1 as every other command does.
        FioError::Device(
            BuildError::Config { .. }
            | BuildError::Namespace { .. }
            | BuildError::Precondition { .. }
            | BuildError::NoSuchNamespace { .. },
        ) => CliError::Config(error.to_string()),
        FioError::Device(_) | FioError::Prefill { .. } => CliError::Failed(error.to_string()),
        _ => CliError::Usage(error.to_string()),
    })?;
    for note in &result.notes {
        eprintln!("note: {note}");
    }
    let here = std::path::Path::new(".");
    write_logs(&result.io_logs, here).map_err(|error| CliError::Io(here.to_path_buf(), error))?;
    let text = dumped + &render(&result, invocation.output_format)?;
    match &invocation.output {
        Some(path) => std::fs::write(path, &text).map_err(|error| CliError::Io(path.clone(), error))?,
        None => out.write_all(text.as_bytes()).map_err(stdout_error)?,
    }
    if let Some(job) = result.jobs.iter().find(|job| job.error != 0) {
        return Err(CliError::Failed(format!(
            "job {} failed: {}",
            job.options.name,
            job.error_message.as_deref().unwrap_or("I/O error")
        )));
    }
    Ok(())
}

/// The results in each format asked for: fio prints terse lines, then the normal report, then the JSON
/// document.
fn render(result: &FioResult, format: OutputFormat) -> Result<String, CliError> {
    let mut text = String::new();
    if format.terse {
        text.push_str(&to_terse(result));
    }
    if format.normal {
        text.push_str(&to_text(result));
    }
    if format.json || format.json_plus {
        let document = to_json(result, format.json_plus);
        text.push_str(&serde_json::to_string_pretty(&document).map_err(|error| CliError::Failed(error.to_string()))?);
        text.push('\n');
    }
    Ok(text)
}

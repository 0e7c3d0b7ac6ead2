//! `zonelab experiment`: list and run the reproductions of published results.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::Subcommand;
use zonelab_experiments::experiment::{experiments, run_traced as run_experiment, summary, ExperimentError};

use crate::{stdout_error, CliError};

#[derive(Subcommand)]
pub enum ExperimentAction {
    /// The experiments and the papers they reproduce.
    List,
    /// Run one experiment, or `all`, writing results.json, report.md and PNG plots.
    Run {
        /// An experiment id, or `all`.
        id: String,
        /// Fewer points and shorter runs (seconds instead of minutes).
        #[arg(long)]
        quick: bool,
        /// Directory for the results; each experiment writes into DIR/ID.
        #[arg(long, default_value = "results")]
        out: PathBuf,
        /// Virtual-time runs at once (default: the cores available); the results are the same bytes for any
        /// number. Real RocksDB runs one at a time whatever this is.
        #[arg(long)]
        jobs: Option<usize>,
        /// Also write a Perfetto trace of every virtual-time run (fio, wal-bench, kv-bench, file-churn) into
        /// DIR/ID/traces, with traces.tsv naming each file's run; the results are the same bytes.
        #[arg(long)]
        trace: bool,
    },
    /// The claims of every experiment in a results directory with their verdicts (reproduced, direction only,
    /// not reproduced), whether each is fitted or predicted, and the counts, as Markdown.
    Summary {
        /// The directory `run` wrote into.
        #[arg(default_value = "results")]
        dir: PathBuf,
    },
}

pub fn run(action: ExperimentAction, out: &mut impl Write) -> Result<(), CliError> {
    match action {
        ExperimentAction::List => {
            for experiment in experiments() {
                writeln!(out, "{:<22} {}\n{:<22} source: {}", experiment.id, experiment.title, "", experiment.source)
                    .map_err(stdout_error)?;
            }
            Ok(())
        }
        ExperimentAction::Summary { dir } => {
            let text = summary(&dir).map_err(|error| CliError::Failed(error.to_string()))?;
            out.write_all(text.as_bytes()).map_err(stdout_error)
        }
        ExperimentAction::Run { id, quick, out: directory, jobs, trace } => {
            let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)).max(1);
            let all = id == "all";
            let ids: Vec<String> =
                if all { experiments().into_iter().map(|experiment| experiment.id).collect() } else { vec![id] };
            let count = ids.len();
            for (index, id) in ids.into_iter().enumerate() {
                // A full run takes minutes: say what runs, on standard error so the summary stays clean.
                if count > 1 {
                    eprintln!("[{}/{count}] {id}{}", index + 1, if quick { " (quick)" } else { "" });
                }
                let started = Instant::now();
                let outcome =
                    run_experiment(&id, quick, &directory.join(&id), jobs, trace).map_err(|error| match error {
                        ExperimentError::Unknown(_) => CliError::Usage(error.to_string()),
                        other => CliError::Failed(other.to_string()),
                    })?;
                writeln!(
                    out,
                    "{}: wrote {} in {:.1} s",
                    outcome.id,
                    outcome.directory.display(),
                    started.elapsed().as_secs_f64()
                )
                .map_err(stdout_error)?;
                for line in outcome.summary {
                    writeln!(out, "  {line}").map_err(stdout_error)?;
                }
            }
            if all {
                // The state of every claim at a glance, beside the experiments' directories.
                let text = summary(&directory).map_err(|error| CliError::Failed(error.to_string()))?;
                let path = directory.join("summary.md");
                std::fs::write(&path, &text).map_err(|error| CliError::Io(path.clone(), error))?;
                let counts = text.lines().find(|line| line.contains(" claims: ")).unwrap_or_default();
                writeln!(out, "summary: {} ({counts})", path.display()).map_err(stdout_error)?;
            }
            // What a worker running these points needs (`zonelab bench experiments` reads it); RocksDB's own
            // processes are not counted.
            if let Some(peak) = crate::bench::peak_rss_bytes() {
                eprintln!("zonelab: peak memory of this process: {} MiB", peak >> 20);
            }
            Ok(())
        }
    }
}

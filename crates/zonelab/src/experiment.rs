//! `zonelab experiment`: list and run the reproductions of published results.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::Subcommand;
use zonelab_workload::experiment::{experiments, run as run_experiment, ExperimentError};

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
        ExperimentAction::Run { id, quick, out: directory } => {
            let ids: Vec<String> = if id == "all" {
                experiments().into_iter().map(|experiment| experiment.id).collect()
            } else {
                vec![id]
            };
            for id in ids {
                let started = Instant::now();
                let outcome = run_experiment(&id, quick, &directory.join(&id)).map_err(|error| match error {
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
            Ok(())
        }
    }
}

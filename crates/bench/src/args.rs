//! What the `--key=value` tools (wal-bench, file-churn, kv-bench) share: option values, errors, and result slots.

use std::cell::RefCell;
use std::rc::Rc;

use zonelab_device::BuildError;
use zonelab_host::{FsError, WalError};
use zonelab_zns::Status;

use zonelab_fio::{parse_size, SizeSpec};

/// Why wal-bench or file-churn could not run, or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// An option unknown, malformed or out of range, or a workload that does not fit the device.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Device(#[from] BuildError),
    /// The device refused to precondition a zone.
    #[error("prefill of zone {zone}: {status}")]
    Prefill { zone: u32, status: Status },
    #[error(transparent)]
    Wal(#[from] WalError),
    /// The log's recovery returned records other than those written: a bug in the log or the device.
    #[error("recovery returned {0} records that differ from the records written")]
    RecoveredAltered(u64),
    /// The zonefs-like layer could not read the device's zones.
    #[error("mount: {0}")]
    Mount(Status),
    #[error("job {job}: {source}")]
    Fs { job: u32, source: FsError },
    /// logfs failed in a phase of a file-churn run (set-up, or a job).
    #[error("{phase}: {source}")]
    LogFs { phase: String, source: zonelab_logfs::LogFsError },
    /// zonedfs failed under kv-bench's database.
    #[error("zonedfs: {0}")]
    ZonedFs(#[from] zonelab_zonedfs::ZonedFsError),
    /// A simulated task ended without leaving its result: host code waited for something that never came.
    #[error("{0} did not finish")]
    Unfinished(&'static str),
}

impl ToolError {
    /// The user asked for something that cannot be (exit 2), rather than a run that failed (exit 1).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ToolError::Usage(_) | ToolError::Device(BuildError::Config { .. } | BuildError::Namespace { .. })
        )
    }
}

/// One `--key` or `--key=value` option.
pub(crate) struct ToolOption<'a> {
    pub key: &'a str,
    value: Option<&'a str>,
    arg: &'a str,
}

impl<'a> ToolOption<'a> {
    /// Splits `--key=value`; anything that does not start with `--` is refused.
    pub fn parse(arg: &'a str) -> Result<ToolOption<'a>, ToolError> {
        let option = arg
            .strip_prefix("--")
            .ok_or_else(|| ToolError::Usage(format!("unexpected argument {arg:?}: options are --key=value")))?;
        let (key, value) = option.split_once('=').map_or((option, None), |(key, value)| (key, Some(value)));
        Ok(ToolOption { key, value, arg })
    }

    /// The value, which the option must have.
    pub fn value(&self) -> Result<&'a str, ToolError> {
        self.value.ok_or_else(|| ToolError::Usage(format!("option {} needs a value", self.key)))
    }

    pub fn bytes(&self) -> Result<u64, ToolError> {
        bytes(self.key, self.value()?).map_err(ToolError::Usage)
    }

    pub fn number<T: std::str::FromStr>(&self) -> Result<T, ToolError> {
        number(self.key, self.value()?).map_err(ToolError::Usage)
    }

    /// A host time in microseconds (`--put-cost-us` and the like), from 0 to 1 s, in nanoseconds.
    pub fn host_time_ns(&self) -> Result<u64, ToolError> {
        const MOST_US: f64 = 1e6;
        let us = self.number::<f64>()?;
        if !(0.0..=MOST_US).contains(&us) {
            return Err(ToolError::Usage(format!(
                "option {}: {us} is not a time from 0 to {MOST_US} microseconds",
                self.key
            )));
        }
        Ok((us * 1000.0).round() as u64)
    }

    /// A run's length in seconds of device time (`--runtime`), above 0 and at most a day, in nanoseconds: a
    /// simulation of more would not end in a person's lifetime, and infinity or 1e30 would wrap the clock.
    pub fn run_time_ns(&self) -> Result<u64, ToolError> {
        const MOST_S: f64 = 86_400.0;
        let seconds = self.number::<f64>()?;
        if !(seconds > 0.0 && seconds <= MOST_S) {
            return Err(ToolError::Usage(format!(
                "option {}: {seconds} is not a time above 0 and at most {MOST_S} seconds",
                self.key
            )));
        }
        Ok((seconds * 1e9).round() as u64)
    }

    /// `--output-format`: true for json, false for normal; anything else is refused.
    pub fn json(&self) -> Result<bool, ToolError> {
        match self.value()? {
            "json" => Ok(true),
            "normal" => Ok(false),
            other => Err(ToolError::Usage(format!("option output-format: {other:?} is not normal or json"))),
        }
    }

    pub fn unknown(&self) -> ToolError {
        ToolError::Usage(format!("unrecognized option '{}'", self.arg))
    }
}

/// A size option in bytes (`4096`, `4KiB`, `1m`).
fn bytes(key: &str, value: &str) -> Result<u64, String> {
    // fio's parser words the error for fio; these tools are not fio.
    let size = parse_size(key, value).map_err(|error| match error {
        zonelab_fio::FioError::Options(message) => message,
        other => other.to_string(),
    })?;
    match size {
        SizeSpec::Bytes(u64::MAX) => Err(format!("option {key}: {value:?} is 2^64 bytes or more")),
        SizeSpec::Bytes(bytes) => Ok(bytes),
        _ => Err(format!("option {key}: {value:?} must be a size in bytes")),
    }
}

fn number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, String> {
    value.parse().map_err(|_| format!("option {key}: {value:?} is not a number"))
}

/// Where a simulated task leaves its result for the caller.
pub(crate) type Slot<T> = Rc<RefCell<Option<Result<T, ToolError>>>>;

/// Takes the result a task left in `slot`; `task` names it when there is none.
pub(crate) fn take<T>(slot: &Slot<T>, task: &'static str) -> Result<T, ToolError> {
    slot.borrow_mut().take().ok_or(ToolError::Unfinished(task))?
}

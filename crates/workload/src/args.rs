//! What the `--key=value` tools (wal-bench, file-churn) share: option values, presets, and result slots.

use std::cell::RefCell;
use std::rc::Rc;

use crate::fio::{parse_size, SizeSpec};

/// One `--key` or `--key=value` option.
pub(crate) struct ToolOption<'a> {
    pub key: &'a str,
    value: Option<&'a str>,
    arg: &'a str,
}

impl<'a> ToolOption<'a> {
    /// Splits `--key=value`; anything that does not start with `--` is refused.
    pub fn parse(arg: &'a str) -> Result<ToolOption<'a>, String> {
        let option =
            arg.strip_prefix("--").ok_or_else(|| format!("unexpected argument {arg:?}: options are --key=value"))?;
        let (key, value) = option.split_once('=').map_or((option, None), |(key, value)| (key, Some(value)));
        Ok(ToolOption { key, value, arg })
    }

    /// The value, which the option must have.
    pub fn value(&self) -> Result<&'a str, String> {
        self.value.ok_or_else(|| format!("option {} needs a value", self.key))
    }

    pub fn bytes(&self) -> Result<u64, String> {
        bytes(self.key, self.value()?)
    }

    pub fn number<T: std::str::FromStr>(&self) -> Result<T, String> {
        number(self.key, self.value()?)
    }

    pub fn unknown(&self) -> String {
        format!("unrecognized option '{}'", self.arg)
    }
}

/// A size option in bytes (`4096`, `4KiB`, `1m`).
fn bytes(key: &str, value: &str) -> Result<u64, String> {
    match parse_size(key, value).map_err(|error| error.to_string())? {
        SizeSpec::Bytes(bytes) => Ok(bytes),
        _ => Err(format!("option {key}: {value:?} must be a size in bytes")),
    }
}

fn number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, String> {
    value.parse().map_err(|_| format!("option {key}: {value:?} is not a number"))
}

/// Where a simulated task leaves its result for the caller.
pub(crate) type Slot<T> = Rc<RefCell<Option<Result<T, String>>>>;

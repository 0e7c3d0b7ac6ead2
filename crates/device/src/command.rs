//! Commands as a host queues them: they own their data, since they outlive the call that queued them, and the
//! device's submission queue holds them until it executes them.

use zonelab_zns::{ReportFilter, Status, ZoneReport, ZoneSendAction};

/// Data a write carries: real bytes, or zeros of a length (for simulations that keep no data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoData {
    Bytes(Vec<u8>),
    Zeros(u64),
}

impl IoData {
    pub fn len(&self) -> u64 {
        match self {
            IoData::Bytes(bytes) => bytes.len() as u64,
            IoData::Zeros(len) => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `len` bytes from `start` (the caller keeps the range within the data).
    pub fn range(&self, start: u64, len: u64) -> IoData {
        match self {
            IoData::Bytes(bytes) => IoData::Bytes(bytes[start as usize..(start + len) as usize].to_vec()),
            IoData::Zeros(_) => IoData::Zeros(len),
        }
    }

    /// Runs `f` on the bytes; zeros come from a shared buffer when they fit in it, so that simulations keeping
    /// no data allocate none.
    pub fn with_bytes<T>(&self, f: impl FnOnce(&[u8]) -> T) -> T {
        static ZEROS: [u8; 1 << 20] = [0; 1 << 20];
        match self {
            IoData::Bytes(bytes) => f(bytes),
            IoData::Zeros(len) => match ZEROS.get(..*len as usize) {
                Some(zeros) => f(zeros),
                None => f(&vec![0u8; *len as usize]),
            },
        }
    }
}

/// A command as host code queues it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueuedCommand {
    /// Read `nlb` blocks; with `keep` false the data is dropped (the timing is what matters).
    Read {
        slba: u64,
        nlb: u64,
        keep: bool,
    },
    Write {
        slba: u64,
        data: IoData,
    },
    WriteZeroes {
        slba: u64,
        nlb: u64,
    },
    Append {
        zslba: u64,
        data: IoData,
    },
    Flush,
    /// Dataset Management's deallocate of `nlb` blocks at `slba` (a conventional namespace's trim).
    Deallocate {
        slba: u64,
        nlb: u64,
    },
    ZoneSend {
        slba: u64,
        action: ZoneSendAction,
        select_all: bool,
    },
    Report {
        slba: u64,
        filter: ReportFilter,
        partial: bool,
        max_zones: u32,
    },
}

/// What a completed command returns. Data and reports are boxed so that an `Output`, and the result a command
/// resolves to, is two words and moves in registers: at four words it moved through the stack in pieces that the
/// next copy read back whole, a stalled store-to-load forward costing about 3 % of a simulated random read
/// (`zonelab bench sim`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Done,
    Appended(u64),
    Data(Box<Vec<u8>>),
    Report(Box<ZoneReport>),
}

const _: () = assert!(std::mem::size_of::<Result<Output, Status>>() == 16, "a command's result stays two words");

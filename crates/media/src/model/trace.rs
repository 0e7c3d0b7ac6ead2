//! An optional record of every flash operation the model books: what it was, why, on which plane, when, and the
//! traced command being served when it was booked, so that a trace can draw an arrow from a host command to the
//! senses, programs and erases it caused. Off unless asked for: a model without it books nothing extra.

use crate::energy::{FlashOp, OpSource};

/// One flash operation on one plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashEvent {
    pub op: FlashOp,
    pub source: OpSource,
    pub plane: u32,
    pub channel: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Pages sensed or programmed, or blocks erased.
    pub count: u64,
    /// The cause the device named when the operation was booked (its command's place in the device's trace);
    /// None for work of the device's own between commands.
    pub cause: Option<u64>,
}

/// The flash events recorded so far, up to a bound.
#[derive(Clone, Debug)]
pub(super) struct FlashTrace {
    pub events: Vec<FlashEvent>,
    pub cause: Option<u64>,
    pub limit: usize,
    /// Events past the bound, counted but not kept.
    pub dropped: u64,
}

impl FlashTrace {
    pub fn new(limit: usize) -> FlashTrace {
        FlashTrace { events: Vec::new(), cause: None, limit, dropped: 0 }
    }

    pub fn push(&mut self, event: FlashEvent) {
        if self.events.len() < self.limit {
            self.events.push(FlashEvent { cause: self.cause, ..event });
        } else {
            self.dropped += 1;
        }
    }
}

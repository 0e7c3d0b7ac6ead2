//! What the model keeps of one logical zone: how far it is written and programmed, its write buffer, and what
//! recent flushes made durable.

use std::collections::VecDeque;

use crate::ProgramUnit;

/// A program unit whose data is in a zone's write buffer until its program ends.
#[derive(Clone, Copy, Debug)]
pub(super) struct BufferedUnit {
    pub unit: ProgramUnit,
    pub release_ns: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, Default)]
pub(super) struct ZoneMedia {
    /// Host bytes written from the zone start (the write pointer, in bytes).
    pub written_bytes: u64,
    /// Program units reserved on planes, host data and padding alike, from the zone start.
    pub programmed_units: u64,
    /// Program units, from the zone start, that hold host data and have been programmed.
    pub host_units: u64,
    /// Units in the write buffer waiting for their program to end, in unit order.
    pub in_flight: VecDeque<BufferedUnit>,
    /// Bytes held in the write buffer (in-flight units and the partial unit not yet programmed).
    pub buffered_bytes: u64,
    /// The zone's partially programmed blocks have been closed (the zone filled, or was finished).
    pub sealed: bool,
    /// Recent flushes: each made the first `.0` host bytes durable once its program ended at `.1`. A later
    /// flush may still be running when an earlier one has finished, so the last few are kept.
    pub flushed: VecDeque<(u64, u64)>,
    pub read_ahead: ReadAhead,
}

/// A zone's sequential read stream as the controller follows it: where the next sequential read would start,
/// and the pages it has sensed ahead of the stream into its memory, with the time each is there.
#[derive(Clone, Debug, Default)]
pub(super) struct ReadAhead {
    /// The end of the zone's last read, in bytes from the zone start: where a sequential read would start.
    pub next_offset: Option<u64>,
    /// Pages read ahead, in page order: (page index in the zone, when its data is in the controller).
    pub pages: VecDeque<(u64, u64)>,
}

impl ReadAhead {
    /// When pages `first..end` are all in the controller's memory, if they were read ahead.
    pub fn ready(&self, first: u64, end: u64) -> Option<u64> {
        let front = self.pages.front()?.0;
        let (from, to) = (first.checked_sub(front)? as usize, (end - front) as usize);
        (to <= self.pages.len()).then(|| self.pages.range(from..to).map(|&(_, ready)| ready).max().unwrap_or(0))
    }

    /// Whether the stream's end is past `offset` by no more than `within` bytes.
    pub fn has_passed(&self, offset: u64, within: u64) -> bool {
        self.next_offset.is_some_and(|next| offset < next && next - offset <= within)
    }

    /// The first page not read ahead yet, from `page` on.
    pub fn next_page(&self, page: u64) -> u64 {
        self.pages.back().map_or(page, |&(last, _)| (last + 1).max(page))
    }

    /// Forgets pages before `page`: the stream has passed them.
    pub fn consume_before(&mut self, page: u64) {
        while self.pages.front().is_some_and(|&(front, _)| front < page) {
            self.pages.pop_front();
        }
    }
}

/// Flushes a zone remembers; older ones are covered by the later ones once those end.
const FLUSHES_KEPT: usize = 16;

impl ZoneMedia {
    /// Waits until `bytes` fit in a write buffer of `capacity` bytes, from `now`; returns when they do.
    pub fn admit(&mut self, capacity: u64, bytes: u64, now: u64) -> u64 {
        let mut at = now;
        while let Some(front) = self.in_flight.front() {
            if front.release_ns > at && self.buffered_bytes + bytes <= capacity {
                break;
            }
            at = at.max(front.release_ns);
            self.buffered_bytes -= front.bytes;
            self.in_flight.pop_front();
        }
        self.buffered_bytes += bytes;
        at
    }

    /// The write buffer is empty (its contents were programmed or dropped).
    pub fn drop_buffer(&mut self) {
        self.in_flight.clear();
        self.buffered_bytes = 0;
    }

    /// A flush made the first `bytes` durable once its program ends at `done`.
    pub fn record_flush(&mut self, bytes: u64, done: u64) {
        if self.flushed.len() == FLUSHES_KEPT {
            self.flushed.pop_front();
        }
        self.flushed.push_back((bytes, done));
    }

    /// Host bytes durable at `at`: programmed, and every unit before them too, or covered by a finished flush.
    /// What is only in the write buffer is not.
    pub fn durable_bytes(&self, at: u64, unit_bytes: u64) -> u64 {
        let durable_units =
            self.in_flight.iter().find(|unit| unit.release_ns > at).map_or(self.host_units, |unit| unit.unit.0);
        let flushed = self.flushed.iter().filter(|&&(_, done)| done <= at).map(|&(bytes, _)| bytes).max().unwrap_or(0);
        (durable_units * unit_bytes).max(flushed).min(self.written_bytes)
    }

    /// What is left after a power loss at `at`: the durable bytes, as programmed units, and no buffer.
    pub fn lose_power(&mut self, at: u64, unit_bytes: u64) {
        let durable = self.durable_bytes(at, unit_bytes);
        *self = ZoneMedia {
            written_bytes: durable,
            programmed_units: durable / unit_bytes,
            host_units: durable / unit_bytes,
            // The durable tail of a unit counts as buffered, as after a precondition: the unit's program,
            // when the host completes it, releases the whole unit.
            buffered_bytes: durable % unit_bytes,
            sealed: self.sealed,
            ..ZoneMedia::default()
        };
    }
}

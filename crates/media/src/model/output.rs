//! The way out to the host (the read budget and the host link, whichever is narrower, as one resource). Read
//! data leaves in the order it comes ready in the controller, not in the order its commands came: a read whose
//! dies were free overtakes one queued behind other reads on its die. Past the way out's ceiling that is what
//! spreads latencies; booked in submission order, every read would wait the same backlog (docs/calibration.md,
//! "Read data leaves as it is ready").
//!
//! Each transfer is booked when its read is submitted, from when its data will be ready. One booked later with
//! data ready earlier goes ahead of those whose data comes later, and their ends move later: the device hands
//! the moves on, named by the command each transfer is for (`take_moved`), so that a runtime can complete those
//! commands later.
//!
//! The transfers are kept in a calendar by ready time (`BucketBits`): a booking finds the one before it and
//! those after it through the bitmap, where a sorted list had it search with a chain of dependent loads and
//! move every later transfer to make room (docs/notes/calibration-log.md, "Simulation speed").

use std::collections::VecDeque;

use crate::{BucketBits, Linked, Slab, BUCKETS, NIL};

/// A booked transfer: when its data is ready, how long it takes, when it ends, and the command it is for
/// (`NO_COMMAND` when nothing may move its completion).
#[derive(Clone, Copy, Debug)]
struct Transfer {
    ready_ns: u64,
    duration_ns: u64,
    end_ns: u64,
    command: u64,
}

/// The command of work no runtime will retime.
pub(super) const NO_COMMAND: u64 = u64::MAX;

/// A bucket holds 2^10 ns (1.024 us) of ready times: with 4096 buckets, a window of 4.19 ms.
const BUCKET_SHIFT: u32 = 10;
/// A transfer in a bucket: a node of the bucket's list.
#[derive(Clone, Debug)]
struct Node {
    transfer: Transfer,
    next: u32,
}

impl Linked for Node {
    fn next_mut(&mut self) -> &mut u32 {
        &mut self.next
    }
}

#[derive(Clone, Debug)]
pub(super) struct OutputQueue {
    /// The transfers not over, in the order they leave: by ready time, ties in booking order. Each starts once
    /// its data is ready and the one before it has left, so their ends increase. Those ready within the window
    /// (buckets `origin` to `origin + BUCKETS` of ready time) are listed in their bucket round the ring, in
    /// order, from `heads` to `tails`; `far` holds those ready past it when booked, all later than these.
    heads: Vec<u32>,
    tails: Vec<u32>,
    nodes: Slab<Node>,
    occupied: BucketBits,
    origin: u64,
    far: VecDeque<Transfer>,
    /// When the last transfer over ended: the way out came free then (0 before any).
    over_end_ns: u64,
    /// Commands whose transfers have moved later since the device last looked, with their new ends.
    moved: Vec<(u64, u64)>,
}

/// A transfer moved behind one that now ends at `before`: its new end, or None if it waited for its data
/// anyway and nothing after it moves either.
fn follow(later: &mut Transfer, before: u64, moved: &mut Vec<(u64, u64)>) -> Option<u64> {
    let end = later.ready_ns.max(before) + later.duration_ns;
    if end == later.end_ns {
        return None;
    }
    later.end_ns = end;
    if later.command != NO_COMMAND {
        moved.push((later.command, end));
    }
    Some(end)
}

impl Default for OutputQueue {
    fn default() -> Self {
        OutputQueue {
            heads: vec![NIL; BUCKETS],
            tails: vec![NIL; BUCKETS],
            nodes: Slab::default(),
            occupied: BucketBits::default(),
            origin: 0,
            far: VecDeque::new(),
            over_end_ns: 0,
            moved: Vec::new(),
        }
    }
}

impl OutputQueue {
    /// Books a transfer of `duration_ns` whose data is ready at `ready` for `command`, submitted at `now` (never
    /// after `ready`); returns when it ends.
    pub fn book(&mut self, now: u64, ready: u64, duration_ns: u64, command: u64) -> u64 {
        self.drop_over(now);
        let mut transfer = Transfer { ready_ns: ready, duration_ns, end_ns: 0, command };
        let bucket = ready >> BUCKET_SHIFT;
        if bucket >= self.origin + BUCKETS as u64 {
            // After every transfer in the window, and after the far ones ready by then.
            let at = self.far.partition_point(|other| other.ready_ns <= ready);
            let before = match at {
                0 => self.last_in_window().map_or(self.over_end_ns, |last| last.end_ns),
                at => self.far[at - 1].end_ns,
            };
            transfer.end_ns = ready.max(before) + duration_ns;
            self.far.insert(at, transfer);
            let mut before = transfer.end_ns;
            for later in self.far.range_mut(at + 1..) {
                let Some(end) = follow(later, before, &mut self.moved) else { break };
                before = end;
            }
            return transfer.end_ns;
        }
        let index = bucket as usize % BUCKETS;
        // The last node of the bucket ready by then, if any.
        let (mut previous, mut next) = (NIL, self.heads[index]);
        while next != NIL && self.nodes[next].transfer.ready_ns <= ready {
            (previous, next) = (next, self.nodes[next].next);
        }
        let before = match previous {
            NIL => self.last_before(index).map_or(self.over_end_ns, |last| last.end_ns),
            previous => self.nodes[previous].transfer.end_ns,
        };
        transfer.end_ns = ready.max(before) + duration_ns;
        let node = self.nodes.insert(Node { transfer, next });
        match previous {
            NIL => self.heads[index] = node,
            previous => self.nodes[previous].next = node,
        }
        if next == NIL {
            self.tails[index] = node;
        }
        self.occupied.set(index);
        self.move_later(index, next, transfer.end_ns);
        transfer.end_ns
    }

    /// How far round the ring from the window's start bucket `index` is.
    fn offset(&self, index: usize) -> usize {
        (index + BUCKETS - self.origin as usize % BUCKETS) % BUCKETS
    }

    /// Those ready later than the transfer that ends at `end`, from node `next` of bucket `index` on, leave
    /// after it: each moves until a gap (a wait for its data) takes up the shift.
    fn move_later(&mut self, index: usize, next: u32, end: u64) {
        let (mut before, mut index, mut next) = (end, index, next);
        loop {
            while next != NIL {
                let node = &mut self.nodes[next];
                let Some(end) = follow(&mut node.transfer, before, &mut self.moved) else { return };
                (before, next) = (end, node.next);
            }
            match self.occupied.first_from((index + 1) % BUCKETS) {
                Some(later) if self.offset(later) > self.offset(index) => (index, next) = (later, self.heads[later]),
                _ => break,
            }
        }
        for later in &mut self.far {
            let Some(end) = follow(later, before, &mut self.moved) else { return };
            before = end;
        }
    }

    /// The last transfer in the buckets before `index` in the window.
    fn last_before(&self, index: usize) -> Option<&Transfer> {
        let previous = self.occupied.last_through((index + BUCKETS - 1) % BUCKETS)?;
        (self.offset(previous) < self.offset(index)).then(|| &self.nodes[self.tails[previous]].transfer)
    }

    /// The last transfer in the window.
    fn last_in_window(&self) -> Option<&Transfer> {
        let last = self.occupied.last_through((self.origin as usize + BUCKETS - 1) % BUCKETS)?;
        Some(&self.nodes[self.tails[last]].transfer)
    }

    /// Drops the transfers over by `now` (a prefix of the order, as their ends increase), then moves the window
    /// up to the first transfer left or to `now`, whichever is sooner, and takes in the far transfers it reaches.
    fn drop_over(&mut self, now: u64) {
        let first_left = loop {
            match self.occupied.first_from(self.origin as usize % BUCKETS) {
                Some(index) => {
                    let first = self.heads[index];
                    let node = &mut self.nodes[first];
                    if node.transfer.end_ns > now {
                        break Some(self.origin + self.offset(index) as u64);
                    }
                    self.over_end_ns = node.transfer.end_ns;
                    self.heads[index] = node.next;
                    self.nodes.release(first);
                    if self.heads[index] == NIL {
                        self.tails[index] = NIL;
                        self.occupied.clear(index);
                    }
                }
                None => {
                    match self.far.front() {
                        Some(first) if first.end_ns <= now => self.over_end_ns = first.end_ns,
                        _ => break None,
                    }
                    self.far.pop_front();
                }
            }
        };
        let origin = first_left.unwrap_or(u64::MAX).min(now >> BUCKET_SHIFT);
        if origin > self.origin {
            self.origin = origin;
            while let Some(first) =
                self.far.front().filter(|far| far.ready_ns >> BUCKET_SHIFT < origin + BUCKETS as u64)
            {
                let first = *first;
                self.far.pop_front();
                self.append(first);
            }
        }
    }

    /// Lists `transfer`, later than every transfer listed, in its bucket of the window.
    fn append(&mut self, transfer: Transfer) {
        let index = (transfer.ready_ns >> BUCKET_SHIFT) as usize % BUCKETS;
        let node = self.nodes.insert(Node { transfer, next: NIL });
        match self.tails[index] {
            NIL => self.heads[index] = node,
            tail => self.nodes[tail].next = node,
        }
        self.tails[index] = node;
        self.occupied.set(index);
    }

    /// Every transfer not over, in the order they leave.
    fn in_order(&self) -> Vec<Transfer> {
        let mut ordered = Vec::new();
        let start = self.origin as usize % BUCKETS;
        for index in (0..BUCKETS).map(|offset| (start + offset) % BUCKETS) {
            let mut next = self.heads[index];
            while next != NIL {
                ordered.push(self.nodes[next].transfer);
                next = self.nodes[next].next;
            }
        }
        ordered.extend(self.far.iter().copied());
        ordered
    }

    /// Whether a transfer has moved since the device last took the moves.
    pub fn any_moved(&self) -> bool {
        !self.moved.is_empty()
    }

    /// Forgets whom the transfers are for: nothing of theirs is reported any more.
    pub fn forget_commands(&mut self) {
        let listed = self.nodes.iter_mut().map(|node| &mut node.transfer);
        listed.chain(&mut self.far).for_each(|transfer| transfer.command = NO_COMMAND);
        self.moved.clear();
    }

    /// The commands whose transfers moved later since the last call, each with its transfer's new end, in the
    /// order they moved (a command reading from several zones may come more than once).
    pub fn take_moved(&mut self) -> std::vec::Drain<'_, (u64, u64)> {
        self.moved.drain(..)
    }

    /// When the last booked transfer ends.
    pub fn last_end(&self) -> u64 {
        self.far.back().or_else(|| self.last_in_window()).map_or(self.over_end_ns, |last| last.end_ns)
    }

    /// A power loss at `at`: transfers not begun by then never happen, and one under way stops.
    pub fn truncate(&mut self, at: u64) {
        let mut left = self.in_order();
        // Transfers start in the order they leave.
        left.retain(|transfer| transfer.end_ns - transfer.duration_ns < at);
        match left.last_mut() {
            Some(last) => last.end_ns = last.end_ns.min(at),
            None => self.over_end_ns = self.over_end_ns.min(at),
        }
        self.heads.iter_mut().chain(&mut self.tails).for_each(|node| *node = NIL);
        (self.nodes, self.occupied) = (Slab::default(), BucketBits::default());
        self.far.clear();
        for transfer in left {
            if transfer.ready_ns >> BUCKET_SHIFT < self.origin + BUCKETS as u64 {
                self.append(transfer);
            } else {
                self.far.push_back(transfer);
            }
        }
        self.moved.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain model: every transfer in one list by ready time, a new one inserted after those ready by
    /// then, the later ones moved until a gap.
    #[derive(Default)]
    struct PlainQueue {
        transfers: Vec<Transfer>,
        moved: Vec<(u64, u64)>,
    }

    impl PlainQueue {
        fn book(&mut self, ready: u64, duration_ns: u64, command: u64) -> u64 {
            let at = self.transfers.partition_point(|transfer| transfer.ready_ns <= ready);
            let before = at.checked_sub(1).map_or(0, |previous| self.transfers[previous].end_ns);
            let end_ns = ready.max(before) + duration_ns;
            self.transfers.insert(at, Transfer { ready_ns: ready, duration_ns, end_ns, command });
            let mut before = end_ns;
            for later in &mut self.transfers[at + 1..] {
                let Some(end) = follow(later, before, &mut self.moved) else { break };
                before = end;
            }
            end_ns
        }

        fn truncate(&mut self, at: u64) {
            self.transfers.retain(|transfer| transfer.end_ns - transfer.duration_ns < at);
            if let Some(last) = self.transfers.last_mut() {
                last.end_ns = last.end_ns.min(at);
            }
            self.moved.clear();
        }
    }

    /// Against the plain model, over bookings of every kind: ready soon (most), ready at once, ready past the
    /// window (a read behind a long erase), backlogs past the way out's rate, power losses. Every end, move and
    /// last end is the same.
    #[test]
    fn bookings_match_the_plain_model() {
        for seed in 1..=12u64 {
            let (mut queue, mut plain) = (OutputQueue::default(), PlainQueue::default());
            let mut state = seed;
            let mut next = || {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                state >> 33
            };
            let mut now = 0u64;
            for step in 0..30_000u64 {
                now += match next() % 20 {
                    0 => 2_000_000 + next() % 20_000_000,
                    1..=9 => 0,
                    _ => next() % 3_000,
                };
                if next() % 5_000 == 0 {
                    let at = now + next() % 400_000;
                    queue.truncate(at);
                    plain.truncate(at);
                    now = at;
                    assert_eq!(queue.last_end(), plain.transfers.last().map_or(0, |t| t.end_ns), "seed {seed}, {step}");
                    continue;
                }
                let ready = now
                    + match next() % 50 {
                        0 => 0,
                        1 => 4_000_000 + next() % 30_000_000,
                        2..=4 => next() % 3_000_000,
                        _ => 60_000 + next() % 500_000,
                    };
                let duration = 300 + next() % 9_000;
                let command = if next() % 7 == 0 { NO_COMMAND } else { step };
                let end = queue.book(now, ready, duration, command);
                assert_eq!(end, plain.book(ready, duration, command), "seed {seed}, step {step}");
                assert_eq!(
                    queue.take_moved().collect::<Vec<_>>(),
                    std::mem::take(&mut plain.moved),
                    "seed {seed}, {step}"
                );
                assert_eq!(queue.last_end(), plain.transfers.last().map_or(0, |t| t.end_ns), "seed {seed}, {step}");
            }
        }
    }

    #[test]
    fn data_ready_earlier_leaves_first_and_moves_the_later_data_behind_it() {
        let mut output = OutputQueue::default();
        // A read whose data is ready at 100 books [100, 110); one booked after it with data at 50 takes
        // [50, 60) without moving it; a third with data at 95 leaves first, and the first moves to [105, 115).
        assert_eq!(output.book(0, 100, 10, 7), 110);
        assert_eq!(output.book(1, 50, 10, 8), 60);
        assert!(!output.any_moved(), "a gap before the first took the second");
        assert_eq!(output.book(2, 95, 10, 9), 105);
        assert_eq!(output.take_moved().collect::<Vec<_>>(), vec![(7, 115)]);
        assert_eq!(output.last_end(), 115);
    }

    #[test]
    fn a_shift_stops_at_the_first_gap() {
        let mut output = OutputQueue::default();
        for (command, ready) in [(1, 100), (2, 110), (3, 200)] {
            output.book(0, ready, 10, command);
        }
        // Ready at 95, it pushes the two back to back behind it by 5; the third waited for its data anyway.
        output.book(0, 95, 10, 4);
        assert_eq!(output.take_moved().collect::<Vec<_>>(), vec![(1, 115), (2, 125)]);
        assert_eq!(output.last_end(), 210);
        // A transfer for no command moves unreported, and so do all once their commands are forgotten.
        assert_eq!(output.book(0, 300, 10, NO_COMMAND), 310);
        output.book(0, 295, 10, 5);
        assert!(!output.any_moved());
        assert_eq!(output.last_end(), 315);
        output.forget_commands();
        output.book(0, 90, 10, 6);
        assert!(!output.any_moved());
    }

    #[test]
    fn transfers_over_are_forgotten_and_a_power_loss_stops_the_one_under_way() {
        let mut output = OutputQueue::default();
        assert_eq!(output.book(0, 10, 100, 1), 110);
        // Ready before the first ends: it follows it, and nothing moves.
        assert_eq!(output.book(50, 60, 100, 2), 210);
        assert!(!output.any_moved());
        // Booked after both ended: it starts when its data is ready.
        assert_eq!(output.book(300, 305, 5, 3), 310);
        output.truncate(307);
        assert_eq!(output.last_end(), 307);
    }
}

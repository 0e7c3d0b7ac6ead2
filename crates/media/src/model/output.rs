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

/// A booked transfer: when its data is ready, how long it takes, when it ends, and the command it is for
/// (`NO_COMMAND` when nothing may move its completion). Four words: a booking moves those behind it in the list.
#[derive(Clone, Copy, Debug)]
struct Transfer {
    ready_ns: u64,
    duration_ns: u64,
    end_ns: u64,
    command: u64,
}

/// The command of work no runtime will retime.
pub(super) const NO_COMMAND: u64 = u64::MAX;

#[derive(Clone, Debug, Default)]
pub(super) struct OutputQueue {
    /// Transfers in the order they leave: by ready time, ties in booking order. Each starts once its data is
    /// ready and the one before it has left, so their ends increase. Those before `over` had ended by the last
    /// booking's present and count as gone; they are dropped in batches, so that a booking does not shift the
    /// whole list each time one ends.
    transfers: Vec<Transfer>,
    over: usize,
    /// Commands whose transfers have moved later since the device last looked, with their new ends.
    moved: Vec<(u64, u64)>,
}

/// How many ended transfers may wait before they are dropped.
const OVER_BATCH: usize = 64;

impl OutputQueue {
    /// Books a transfer of `duration_ns` whose data is ready at `ready` for `command`, submitted at `now` (never
    /// after `ready`); returns when it ends.
    pub fn book(&mut self, now: u64, ready: u64, duration_ns: u64, command: u64) -> u64 {
        let transfers = &mut self.transfers;
        while transfers.get(self.over).is_some_and(|transfer| transfer.end_ns <= now) {
            self.over += 1;
        }
        if self.over >= OVER_BATCH {
            transfers.drain(..self.over - 1);
            self.over = 1;
        }
        // After every transfer whose data is ready by then (those over certainly were); the last one over, kept
        // when the others are dropped, says when the way out came free.
        let at = self.over + transfers[self.over..].partition_point(|transfer| transfer.ready_ns <= ready);
        let before = at.checked_sub(1).map_or(0, |previous| transfers[previous].end_ns);
        let end_ns = ready.max(before) + duration_ns;
        transfers.insert(at, Transfer { ready_ns: ready, duration_ns, end_ns, command });
        // Those ready later leave after it: each moves until a gap (a wait for its data) takes up the shift.
        let mut before = end_ns;
        for later in &mut transfers[at + 1..] {
            let end = later.ready_ns.max(before) + later.duration_ns;
            if end == later.end_ns {
                break;
            }
            later.end_ns = end;
            if later.command != NO_COMMAND {
                self.moved.push((later.command, end));
            }
            before = end;
        }
        end_ns
    }

    /// Whether a transfer has moved since the device last took the moves.
    pub fn any_moved(&self) -> bool {
        !self.moved.is_empty()
    }

    /// Forgets whom the transfers are for: nothing of theirs is reported any more.
    pub fn forget_commands(&mut self) {
        self.transfers.iter_mut().for_each(|transfer| transfer.command = NO_COMMAND);
        self.moved.clear();
    }

    /// The commands whose transfers moved later since the last call, each with its transfer's new end, in the
    /// order they moved (a command reading from several zones may come more than once).
    pub fn take_moved(&mut self) -> std::vec::Drain<'_, (u64, u64)> {
        self.moved.drain(..)
    }

    /// When the last booked transfer ends.
    pub fn last_end(&self) -> u64 {
        self.transfers.last().map_or(0, |transfer| transfer.end_ns)
    }

    /// A power loss at `at`: transfers not begun by then never happen, and one under way stops.
    pub fn truncate(&mut self, at: u64) {
        self.transfers.retain(|transfer| transfer.end_ns - transfer.duration_ns < at);
        self.over = self.over.min(self.transfers.len());
        if let Some(last) = self.transfers.last_mut() {
            last.end_ns = last.end_ns.min(at);
        }
        self.moved.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

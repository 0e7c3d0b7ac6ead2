//! The device's shared resources, each keeping the time it is next free: planes (with what each plane's page
//! register holds), channels, the erase slots, the controller's command processor, the host link into the
//! device, the write budget, and the way out to the host.

use std::collections::VecDeque;

use super::costs::whole_ns;
use super::output::{OutputQueue, NO_COMMAND};
use crate::timeline::{deque_partition_point_from_end, Timeline};
use crate::LogicalZone;

/// Pages of one zone a plane's register holds after a read, from the time they are there; a read of them needs
/// no new sensing (a cache read). Any program or erase on the plane clears it.
#[derive(Clone, Copy, Debug)]
pub(super) struct HeldPages {
    pub zone: LogicalZone,
    pub first_page: u64,
    pub end_page: u64,
    pub ready_ns: u64,
}

#[derive(Clone, Debug)]
pub(super) struct Resources {
    /// Planes keep timelines, so that a read fits between programs queued for later (a finish's padding is
    /// reserved when the finish is submitted); erases and seals queue after everything else.
    pub planes: Vec<Timeline>,
    pub page_register: Vec<Option<HeldPages>>,
    /// Programs and erases each plane has ahead, `[start, end)` in time order, kept only when reads may suspend
    /// them: a read that lands in one is served during it. A plane's operations never overlap, so their ends
    /// are in order too, and a search by time is a binary one (a collection queues hundreds per plane).
    suspendable: Vec<VecDeque<(u64, u64)>>,
    /// When each plane's reads served during a suspended operation are done (they follow each other).
    suspended_reads_free: Vec<u64>,
    /// The end of the operation each plane last suspended, which identifies it.
    last_suspended_end: Vec<u64>,
    /// When each plane's last suspension began.
    suspension_start: Vec<u64>,
    suspend_ns: u64,
    resume_before_suspend_ns: u64,
    /// The command the work reserved now is for, as the caller named it (`NO_COMMAND`: none a runtime retimes):
    /// moves of its completion are reported under that name.
    serving: u64,
    /// Erases that resets wait for while reads may suspend them, and the resets whose erases suspensions have
    /// moved later since the device last looked, each with its erase's new end. The erases are kept by plane:
    /// a read that suspends a die looks at that die's alone (garbage collection keeps many erases ahead).
    awaited_erases: Vec<Vec<AwaitedErase>>,
    moved_resets: Vec<(u64, u64)>,
    /// Resources reserved for future instants fill gaps (see `Timeline`); the command processor, the link into
    /// the device and the write budget are reserved in arrival order.
    pub channels: Vec<Timeline>,
    /// When each of the device's erase slots is next free; empty when erases are not bounded device-wide.
    erase_slot_free: Vec<u64>,
    command: CommandProcessor,
    link_to_device_free: u64,
    /// The way out to the host: the read budget and the host link, whichever is narrower, as one resource.
    output: OutputQueue,
    pub write_budget: WriteBudget,
}

/// The rate at which flash absorbs written data, the device's write ceiling, spent in arrival order. With a
/// drain unit it is spent unit by unit, each unit taking an exponentially distributed time around the mean
/// (seeded by the unit's index, so a run is reproducible): whether the next unit is absorbed soon depends on
/// which of many busy dies frees first, so the times are memoryless. A buffer in front of the flash absorbs the
/// spread while the host writes below the ceiling; once it is full a write waits for the flash to absorb what
/// is ahead of it, a sum of unit times whose spread grows with the square root of the bytes in flight, as the
/// grid's tails do.
#[derive(Clone, Debug)]
pub(super) struct WriteBudget {
    free_ns: u64,
    ns_per_byte: f64,
    unit_bytes: u64,
    buffer_bytes: u64,
    /// Bytes taken since the device was built: which unit the next byte falls in.
    spent_bytes: u64,
    /// What the flash absorbs of the last `buffer_bytes` taken: byte ranges with the times they start and
    /// end being absorbed, oldest first.
    absorbing: VecDeque<Absorbing>,
    /// The unit being spent and its time factor, drawn once for the many writes that share a unit.
    current_unit: Option<(u64, f64)>,
    /// Finish padding not yet absorbed, oldest first (see `pad`), and the finishes whose completions host writes
    /// moved that are no longer in the list.
    paddings: VecDeque<Padding>,
    moved_finishes: Vec<(u64, u64)>,
    /// The streams (zones) of the last `RECENT_STREAMS` host writes taken while padding is pending, oldest
    /// first: how many streams share the budget with the padding.
    recent_streams: VecDeque<u32>,
}

/// Host writes remembered to count the streams beside a padding: more than the zones a drive keeps open at once
/// (14 on a ZN540), so that each stream writing at depth is among them.
const RECENT_STREAMS: usize = 32;

/// The stream of host writes that belong to no zone (a conventional namespace's).
pub(super) const NO_STREAM: u32 = u32::MAX;

/// The padding of a finish, absorbed through the budget beside the host's writes.
#[derive(Clone, Copy, Debug)]
struct Padding {
    /// When the last of it is absorbed, as far as the host writes taken so far let it be.
    end_ns: u64,
    /// The finish it is for (`NO_COMMAND`: none a runtime retimes), how long after the padding that finish
    /// completes, and whether its completion moved since it was last reported.
    command: u64,
    tail_ns: u64,
    moved: bool,
}

impl Padding {
    fn completion(&self) -> (u64, u64) {
        (self.command, self.end_ns + self.tail_ns)
    }
}

#[derive(Clone, Copy, Debug)]
struct Absorbing {
    first_byte: u64,
    end_byte: u64,
    start_ns: u64,
    end_ns: u64,
}

/// `a * b / c`, rounded down, in 64 bits when the product fits (nearly always: a 128-bit division is a call
/// and many times slower on every write).
pub(super) fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    match a.checked_mul(b) {
        Some(product) => product / c,
        None => (u128::from(a) * u128::from(b) / u128::from(c)) as u64,
    }
}

impl WriteBudget {
    pub fn new(ns_per_byte: f64, unit_bytes: u64, buffer_bytes: u64) -> WriteBudget {
        WriteBudget {
            free_ns: 0,
            ns_per_byte,
            unit_bytes,
            buffer_bytes,
            spent_bytes: 0,
            absorbing: VecDeque::new(),
            current_unit: None,
            paddings: VecDeque::new(),
            moved_finishes: Vec::new(),
            recent_streams: VecDeque::new(),
        }
    }

    /// The flash time `bytes` take, unit by unit with each unit's time factor, and counts them as spent.
    fn spend(&mut self, bytes: u64) -> u64 {
        if self.unit_bytes == 0 || self.ns_per_byte == 0.0 {
            self.spent_bytes += bytes;
            return whole_ns(bytes as f64 * self.ns_per_byte);
        }
        let mut ns = 0.0;
        let mut left = bytes;
        while left > 0 {
            let unit = self.spent_bytes / self.unit_bytes;
            let in_unit = (self.unit_bytes - self.spent_bytes % self.unit_bytes).min(left);
            let factor = match self.current_unit {
                Some((current, factor)) if current == unit => factor,
                _ => {
                    let factor = exponential(unit);
                    self.current_unit = Some((unit, factor));
                    factor
                }
            };
            ns += in_unit as f64 * self.ns_per_byte * factor;
            self.spent_bytes += in_unit;
            left -= in_unit;
        }
        whole_ns(ns)
    }

    /// Takes `bytes` of host writes to `stream` (their zone, or `NO_STREAM`) whose data is ready at `ready`;
    /// returns when they are in the device (the write may complete), which is when the flash has absorbed them
    /// unless the buffer holds them.
    pub fn take(&mut self, ready: u64, bytes: u64, stream: u32) -> u64 {
        let first_byte = self.spent_bytes;
        let ns = self.spend(bytes);
        let start_ns = self.free_ns.max(ready);
        self.free_ns = start_ns + ns + self.share_with_paddings(start_ns, ns, stream);
        if self.buffer_bytes == 0 {
            return self.free_ns;
        }
        let absorbed = Absorbing { first_byte, end_byte: self.spent_bytes, start_ns, end_ns: self.free_ns };
        self.absorbing.push_back(absorbed);
        // In once all but the last `buffer_bytes` taken, these bytes included, are absorbed.
        let must_absorb = self.spent_bytes.saturating_sub(self.buffer_bytes);
        while self.absorbing.front().is_some_and(|range| range.end_byte < must_absorb) {
            self.absorbing.pop_front();
        }
        let range = self.absorbing.front().copied().unwrap_or(absorbed);
        let through = must_absorb.saturating_sub(range.first_byte);
        let span = (range.end_byte - range.first_byte).max(1);
        let at = range.start_ns + mul_div(range.end_ns - range.start_ns, through, span);
        ready.max(at)
    }

    /// Bytes taken that the flash has not absorbed by `now`, at most the buffer's size: how full the write buffer
    /// is (a range being absorbed counts what its linear drain has left). Without a buffer, none.
    pub fn held_bytes(&self, now: u64) -> u64 {
        let left = |range: &Absorbing| {
            let bytes = range.end_byte - range.first_byte;
            match now {
                now if now <= range.start_ns => bytes,
                now if now >= range.end_ns => 0,
                now => mul_div(bytes, range.end_ns - now, range.end_ns - range.start_ns),
            }
        };
        self.absorbing.iter().map(left).sum::<u64>().min(self.buffer_bytes)
    }

    /// Absorbs a finish's `bytes` of padding from `at` (after the host writes and padding taken before) in the
    /// background: the padding is one stream beside the zones the host writes, and the budget is shared equally
    /// among the streams with bytes to absorb, as a WD ZN540 shares its write ceiling in the ZINC artifact's
    /// `append-on-finish-interference` data (one appender at QD 7 and the padding: 624 and 598 MB/s; two QD 1
    /// writers and the padding: 821 and 411 MB/s; one QD 1 writer, below its share, keeps its 487 MB/s and the
    /// padding has the rest), instead of waiting behind all of it. `command` is the finish (`NO_COMMAND`: none a
    /// runtime retimes). Returns when the padding starts and when it would end if no host write came.
    pub fn pad(&mut self, at: u64, bytes: u64, command: u64) -> (u64, u64) {
        let start = self.paddings.back().map_or(at, |last| last.end_ns.max(at)).max(self.free_ns);
        let end_ns = start + self.spend(bytes);
        self.paddings.push_back(Padding { end_ns, command, tail_ns: 0, moved: false });
        (start, end_ns)
    }

    /// The finish whose padding `pad` took last completes at `completion_ns` as things stand.
    pub fn padding_completes(&mut self, completion_ns: u64) {
        if let Some(last) = self.paddings.back_mut() {
            last.tail_ns = completion_ns.saturating_sub(last.end_ns);
        }
    }

    /// A host write to `stream` absorbed from `start` for `ns` shares the budget with the padding left then:
    /// with `k` host streams writing, the host's streams have k/(k+1) of it and the padding 1/(k+1), so the
    /// write takes up to 1/k longer and each padding ends as much later as the host's bytes take. Returns the
    /// time the write gave up.
    fn share_with_paddings(&mut self, start: u64, ns: u64, stream: u32) -> u64 {
        while let Some(done) = self.paddings.front().filter(|padding| padding.end_ns <= start).copied() {
            self.paddings.pop_front();
            if done.moved {
                self.moved_finishes.push(done.completion());
            }
        }
        let Some(last_end) = self.paddings.back().map(|last| last.end_ns) else {
            self.recent_streams.clear();
            return 0;
        };
        let streams = self.note_stream(stream);
        let given_up = (ns / streams).min(last_end - start);
        for padding in &mut self.paddings {
            padding.end_ns += ns.min((padding.end_ns - start).saturating_mul(streams));
            padding.moved = padding.command != NO_COMMAND;
        }
        given_up
    }

    /// Remembers a host write to `stream` beside padding; returns how many distinct streams the writes
    /// remembered are to.
    fn note_stream(&mut self, stream: u32) -> u64 {
        if self.recent_streams.len() == RECENT_STREAMS {
            self.recent_streams.pop_front();
        }
        self.recent_streams.push_back(stream);
        let recent = &self.recent_streams;
        recent.iter().enumerate().filter(|&(i, stream)| !recent.range(..i).any(|seen| seen == stream)).count() as u64
    }

    /// Whether host writes moved a finish's completion since the last `take_moved`.
    pub fn any_moved(&self) -> bool {
        !self.moved_finishes.is_empty() || self.paddings.iter().any(|padding| padding.moved)
    }

    /// The finishes whose completions host writes moved later since the last call, with their new completions.
    pub fn take_moved(&mut self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let in_list = self.paddings.iter_mut().filter(|padding| padding.moved).map(|padding| {
            padding.moved = false;
            padding.completion()
        });
        self.moved_finishes.drain(..).chain(in_list)
    }

    /// Forgets which finishes the padding in flight is for: none of it is reported any more.
    pub fn forget_commands(&mut self) {
        self.moved_finishes.clear();
        for padding in &mut self.paddings {
            (padding.command, padding.moved) = (NO_COMMAND, false);
        }
    }

    /// When the budget has absorbed everything taken so far, host writes and padding.
    pub fn busy_until(&self) -> u64 {
        self.paddings.back().map_or(self.free_ns, |last| last.end_ns.max(self.free_ns))
    }
}

/// A command's turn on the controller's command processor. The firmware handles a command only once the
/// processor has taken it from the submission queue: its firmware time, data fetch and flash work start at
/// `taken_ns`, so a command queued behind others is delayed by its wait, not only bounded by it.
#[derive(Clone, Copy, Debug)]
pub struct Processed {
    pub taken_ns: u64,
    pub done_ns: u64,
}

/// How the command processor's time varies: its coefficient of variation, and the slice of background work it
/// runs whenever its queue empties.
#[derive(Clone, Copy, Debug)]
pub(super) struct ProcessorTimes {
    pub cv: f64,
    pub idle_slice_ns: u64,
}

/// The controller's command processor: one command at a time, in arrival order. A command's time there varies
/// around its mean (firmware paths differ from command to command, and the controller's cores also run
/// background work): a fixed `1 - cv` of the mean plus an exponentially distributed rest with mean `cv` of it,
/// so that `cv` is the coefficient of variation. Background work it defers while commands wait runs when its
/// queue empties, in a slice a command arriving meanwhile waits out: two commands in flight collide there
/// often, many (which keep the queue from emptying) or one alone (which arrives after the slice) seldom.
#[derive(Clone, Debug)]
struct CommandProcessor {
    free_ns: u64,
    idle_slice_ns: u64,
    /// The share of its mean a command takes, in 1/2^16ths, at the midpoints of `SHARE_STEPS` equal steps of
    /// probability; a draw picks one. A table, because a logarithm per command would cost the simulation 5 %
    /// of its speed. Empty when every command takes its mean.
    shares: Vec<u32>,
    /// A linear congruential sequence (Knuth's MMIX constants), whose top bits pick the next draw.
    state: u64,
    /// The share the next command takes, drawn one command ahead: its load from the table, which a read's
    /// other structures often push out of the first-level cache, is done by the time the command needs it.
    next_share: u32,
}

/// Steps of the table of shares: the largest holds the exponential's quantile at 1 - 1/2048, -ln(0.5 / 1024) = 7.6.
const SHARE_STEPS: u32 = 1024;

impl CommandProcessor {
    fn new(times: ProcessorTimes) -> CommandProcessor {
        let cv = times.cv;
        let shares = if cv == 0.0 {
            Vec::new()
        } else {
            let steps = f64::from(SHARE_STEPS);
            let share = |step: u32| 1.0 - cv - cv * ((f64::from(step) + 0.5) / steps).ln();
            (0..SHARE_STEPS).map(|step| (share(step) * 65536.0).round() as u32).collect()
        };
        let mut processor =
            CommandProcessor { free_ns: 0, idle_slice_ns: times.idle_slice_ns, shares, state: 0, next_share: 0 };
        processor.draw();
        processor
    }

    /// Draws the share of the command after the next.
    fn draw(&mut self) {
        if !self.shares.is_empty() {
            self.state = self.state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            self.next_share = self.shares[(self.state >> 54) as usize];
        }
    }

    /// Takes a command that arrives at `now` once the commands before it are done, and once the background
    /// slice is over if it arrives in one (the queue emptied when the processor was last free; there is none
    /// before its first command), and keeps the processor for the command's time.
    fn take(&mut self, now: u64, mean_ns: u64) -> Processed {
        let busy_ns = self.time_ns(mean_ns);
        let slice_end = self.free_ns + self.idle_slice_ns;
        let taken_ns = if self.free_ns != 0 && (self.free_ns..slice_end).contains(&now) {
            slice_end
        } else {
            self.free_ns.max(now)
        };
        self.free_ns = taken_ns + busy_ns;
        Processed { taken_ns, done_ns: self.free_ns }
    }

    /// The time of the next command whose mean time is `mean_ns`.
    fn time_ns(&mut self, mean_ns: u64) -> u64 {
        if self.shares.is_empty() {
            return mean_ns;
        }
        let share = u64::from(self.next_share);
        self.draw();
        (mean_ns * share + (1 << 15)) >> 16
    }
}

/// A draw of the exponential distribution with mean 1, fixed by `index`.
fn exponential(index: u64) -> f64 {
    -uniform(index).ln()
}

/// A draw of the uniform distribution on (0, 1), fixed by `index` (SplitMix64's finalizer as the hash).
pub(super) fn uniform(index: u64) -> f64 {
    let mut z = index.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// Program/erase suspend: how long a suspension takes (0: reads wait for the operation instead) and how long
/// a resumed operation runs before it may be suspended again.
#[derive(Clone, Copy, Debug)]
pub(super) struct Suspend {
    pub latency_ns: u64,
    pub resume_before_suspend_ns: u64,
}

/// An erase the reset of `command` waits for: it ends at `end` (on the plane whose list holds it).
#[derive(Clone, Copy, Debug)]
struct AwaitedErase {
    command: u64,
    end: u64,
}

/// Drops the operations that ended by `now`.
fn forget_finished(ops: &mut VecDeque<(u64, u64)>, now: u64) {
    while ops.front().is_some_and(|&(_, end)| end <= now) {
        ops.pop_front();
    }
}

impl Resources {
    pub fn new(
        planes: usize,
        channels: usize,
        erase_concurrency: u32,
        write_budget: WriteBudget,
        suspend: Suspend,
        processor: ProcessorTimes,
    ) -> Resources {
        Resources {
            planes: vec![Timeline::default(); planes],
            page_register: vec![None; planes],
            suspendable: vec![VecDeque::new(); planes],
            suspended_reads_free: vec![0; planes],
            last_suspended_end: vec![0; planes],
            suspension_start: vec![0; planes],
            suspend_ns: suspend.latency_ns,
            resume_before_suspend_ns: suspend.resume_before_suspend_ns,
            serving: NO_COMMAND,
            awaited_erases: vec![Vec::new(); planes],
            moved_resets: Vec::new(),
            channels: vec![Timeline::default(); channels],
            erase_slot_free: vec![0; erase_concurrency as usize],
            command: CommandProcessor::new(processor),
            link_to_device_free: 0,
            output: OutputQueue::default(),
            write_budget,
        }
    }

    /// Reserves the controller's command processor for a command whose mean time there is `mean_ns`, from
    /// `now` on; returns when the processor takes the command and when it is done with it.
    pub fn command(&mut self, now: u64, mean_ns: u64) -> Processed {
        self.command.take(now, mean_ns)
    }

    /// Moves data into the device over the host link from `ready`; returns when it is in.
    pub fn link_to_device(&mut self, ready: u64, link_ns: u64) -> u64 {
        self.link_to_device_free = self.link_to_device_free.max(ready) + link_ns;
        self.link_to_device_free
    }

    /// A program of `program_ns` on `plane` once its data is there at `ready`; returns when it ends.
    pub fn program(&mut self, now: u64, plane: usize, ready: u64, program_ns: u64) -> u64 {
        let done = self.planes[plane].reserve(now, ready, program_ns);
        self.note_suspendable(now, plane, done - program_ns, done);
        done
    }

    fn note_suspendable(&mut self, now: u64, plane: usize, start: u64, end: u64) {
        if self.suspend_ns != 0 {
            let ops = &mut self.suspendable[plane];
            forget_finished(ops, now);
            let at = deque_partition_point_from_end(ops, |&(other_start, _)| other_start <= start);
            ops.insert(at, (start, end));
        }
    }

    /// Senses for `sense_ns` on `plane` from `start`: in the first gap, or, when suspend is on and that would
    /// overlap a program or erase (once the die's earlier suspended reads are done), during the operation:
    /// `suspend_ns` after it could begin, or at once if the die is still suspended for an earlier read. An
    /// operation resumed after a suspension runs `resume_before_suspend_ns` before it may be suspended again (its
    /// progress is guaranteed), so a read that comes in that window waits for the window's end, or for the
    /// operation's end if that is sooner. The die's time the suspension takes is added after the operation
    /// (`hold_suspended`); the operation's reservation stays, and a reset that waits for an erase the added time
    /// delays learns its later end (`take_moved`). Returns when the sense ends and whether an operation was
    /// suspended.
    pub fn sense(&mut self, now: u64, plane: usize, start: u64, sense_ns: u64) -> (u64, bool) {
        if self.suspend_ns != 0 {
            forget_finished(&mut self.suspendable[plane], now);
        }
        let free = self.suspended_reads_free[plane];
        if self.suspendable[plane].is_empty() {
            return (self.planes[plane].reserve(now, start.max(free), sense_ns), false);
        }
        let mut at = start.max(free);
        // A read queued behind the die's last suspended read finds the operation still suspended.
        let still_suspended = free != 0 && start <= free;
        // Each pass moves past one operation that ends before it may be suspended: bounded by their number.
        for _ in 0..=self.suspendable[plane].len() {
            let unsuspended_end = self.planes[plane].first_fit(at, sense_ns) + sense_ns;
            let ops = &self.suspendable[plane];
            let overlapped = ops
                .get(deque_partition_point_from_end(ops, |&(_, op_end)| op_end <= at))
                .filter(|&&(op_start, _)| op_start < unsuspended_end)
                .copied();
            let Some((op_start, op_end)) = overlapped else {
                break;
            };
            if still_suspended && at == start.max(free) {
                return (at + sense_ns, true);
            }
            let resumed = self.last_suspended_end[plane] == op_end;
            let may_suspend_at = if resumed { at.max(free + self.resume_before_suspend_ns) } else { at.max(op_start) };
            if may_suspend_at < op_end {
                self.last_suspended_end[plane] = op_end;
                self.suspension_start[plane] = may_suspend_at;
                return (may_suspend_at + self.suspend_ns + sense_ns, true);
            }
            at = op_end;
        }
        (self.planes[plane].reserve(now, at, sense_ns), false)
    }

    /// The die of a suspended operation holds what a read sensed until `moved`, when its channel has moved it.
    /// The operation resumes only then, so the die is busy that much longer: the time this read adds to the
    /// suspension is reserved on the plane from the operation's end, as an operation reads may suspend in turn
    /// (part of the same one when it follows it directly).
    pub fn hold_suspended(&mut self, now: u64, plane: usize, moved: u64) {
        let from = self.suspended_reads_free[plane].max(self.suspension_start[plane]);
        self.suspended_reads_free[plane] = self.suspended_reads_free[plane].max(moved);
        let added = moved.saturating_sub(from);
        if added == 0 {
            return;
        }
        let op_end = self.last_suspended_end[plane];
        let end = self.planes[plane].reserve(now, op_end, added);
        // The die works `added` longer from the suspended operation on: an awaited erase from there up to where
        // the added time found room (no gap in between to absorb it) ends that much later.
        for erase in &mut self.awaited_erases[plane] {
            if op_end <= erase.end && erase.end <= end - added {
                erase.end += added;
                self.moved_resets.push((erase.command, erase.end));
            }
        }
        let ops = &mut self.suspendable[plane];
        let suspended = deque_partition_point_from_end(ops, |op| op.1 < op_end);
        match ops.get_mut(suspended).filter(|op| op.1 == op_end) {
            Some(op) if end - added == op_end => {
                op.1 = end;
                self.last_suspended_end[plane] = end;
            }
            _ => self.note_suspendable(now, plane, end - added, end),
        }
    }

    /// Names the command the work reserved from now on is for (`NO_COMMAND`: none a runtime retimes).
    pub fn serve(&mut self, command: u64) {
        self.serving = command;
    }

    /// Books the way out to the host for the command served: `duration_ns` once its data is ready at `ready`.
    pub fn transfer_out(&mut self, now: u64, ready: u64, duration_ns: u64) -> u64 {
        self.output.book(now, ready, duration_ns, self.serving)
    }

    /// Notes that the reset being served completes once `plane`'s erase ending at `end` is done, so that the
    /// reads that suspend the die before then move the reset's completion (when reads may suspend at all and a
    /// runtime can retime the reset).
    pub fn await_erase(&mut self, now: u64, plane: usize, end: u64) {
        if self.suspend_ns != 0 && self.serving != NO_COMMAND {
            for erases in &mut self.awaited_erases {
                erases.retain(|erase| erase.end > now);
            }
            self.moved_resets.retain(|&(_, end)| end > now);
            self.awaited_erases[plane].push(AwaitedErase { command: self.serving, end });
        }
    }

    /// Whether a command's completion has moved since the last `take_moved`.
    pub fn any_moved(&self) -> bool {
        !self.moved_resets.is_empty() || self.output.any_moved() || self.write_budget.any_moved()
    }

    /// The commands whose completions have moved later since the last call (resets whose awaited erases reads
    /// suspended, reads whose transfers others overtook, finishes whose padding host writes shared the write
    /// budget with), each with a new time it completes by.
    pub fn take_moved(&mut self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.moved_resets.drain(..).chain(self.output.take_moved()).chain(self.write_budget.take_moved())
    }

    /// Absorbs a finish's padding through the write budget for the command served (`WriteBudget::pad`).
    pub fn pad(&mut self, at: u64, bytes: u64) -> (u64, u64) {
        self.write_budget.pad(at, bytes, self.serving)
    }

    /// Forgets whom the work in flight is for (a new driver's names mean other commands): nothing of it is
    /// reported any more.
    pub fn forget_commands(&mut self) {
        self.serving = NO_COMMAND;
        self.awaited_erases.iter_mut().for_each(Vec::clear);
        self.moved_resets.clear();
        self.output.forget_commands();
        self.write_budget.forget_commands();
    }

    /// One block erase of `erase_ns` on `plane` from `at`, through the device's erase slots when their number
    /// is bounded; returns when it ends.
    pub fn erase_block(&mut self, now: u64, plane: usize, at: u64, erase_ns: u64) -> u64 {
        match self.erase_slot_free.iter_mut().min_by_key(|free| **free) {
            Some(slot) => {
                let begin = (*slot).max(at).max(self.planes[plane].last_end());
                *slot = self.planes[plane].reserve_after_all(now, begin, erase_ns);
                let end = *slot;
                self.note_suspendable(now, plane, end - erase_ns, end);
                end
            }
            None => {
                let end = self.planes[plane].reserve_after_all(now, at, erase_ns);
                self.note_suspendable(now, plane, end - erase_ns, end);
                end
            }
        }
    }

    /// Forgets what plane registers hold of `zone` (its data is gone).
    pub fn forget_pages_of(&mut self, zone: LogicalZone) {
        for register in &mut self.page_register {
            if register.is_some_and(|held| held.zone == zone) {
                *register = None;
            }
        }
    }

    /// A power loss at `at`: registers are empty and nothing reserved past `at` happens.
    pub fn lose_power(&mut self, at: u64) {
        self.page_register.fill(None);
        for ops in &mut self.suspendable {
            ops.retain(|&(start, _)| start < at);
        }
        self.awaited_erases.iter_mut().for_each(Vec::clear);
        self.moved_resets.clear();
        self.write_budget.forget_commands();
        for line in self.planes.iter_mut().chain(self.channels.iter_mut()) {
            line.truncate(at);
        }
        self.output.truncate(at);
    }

    /// The latest time any resource is reserved to.
    pub fn busy_until(&self) -> u64 {
        self.reserved_until().max().unwrap_or(0)
    }

    /// When every resource fell idle, if all of them are idle at `now`. It stops at the first resource busy then,
    /// so that a device with work queued ahead (garbage collection behind the writes) learns it without
    /// reading every plane's timeline.
    pub fn idle_since(&self, now: u64) -> Option<u64> {
        if self.reserved_until().any(|end| end >= now) {
            return None;
        }
        Some(self.busy_until())
    }

    /// The end of each resource's reservations, the single counters first.
    fn reserved_until(&self) -> impl Iterator<Item = u64> + '_ {
        let timelines = self.planes.iter().chain(self.channels.iter()).map(Timeline::last_end);
        [self.write_budget.busy_until(), self.command.free_ns, self.link_to_device_free, self.output.last_end()]
            .into_iter()
            .chain(self.erase_slot_free.iter().copied())
            .chain(timelines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS_PER_BYTE: f64 = 1.0;
    const UNIT: u64 = 100_000;

    /// Programs, erases and reads on two dies in a random order: whatever reads suspend, each die's operations
    /// stay in time order and never overlap, a read is never served before its sense could end, and every
    /// suspension's die time is added to the die.
    #[test]
    fn suspensions_keep_each_dies_operations_ordered_and_disjoint() {
        for seed in 1..=20u64 {
            let suspend = Suspend { latency_ns: 20_000, resume_before_suspend_ns: 50_000 };
            let mut resources = Resources::new(
                2,
                1,
                0,
                WriteBudget::new(0.0, 0, 0),
                suspend,
                ProcessorTimes { cv: 0.0, idle_slice_ns: 0 },
            );
            let mut state = seed;
            let mut draw = |below: u64| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 33) % below
            };
            let mut now = 0;
            for step in 0..3000 {
                now += draw(100_000);
                let plane = draw(2) as usize;
                match draw(4) {
                    0 => {
                        resources.program(now, plane, now + draw(50_000), 500_000);
                    }
                    1 => {
                        resources.erase_block(now, plane, now, 3_000_000);
                    }
                    _ => {
                        let start = now + 10_000;
                        let (sensed, suspended) = resources.sense(now, plane, start, 50_000);
                        assert!(sensed >= start + 50_000, "seed {seed} step {step}: sensed at {sensed}");
                        let moved = resources.channels[0].reserve(now, sensed, 4096);
                        if suspended {
                            let held_before = resources.suspended_reads_free[plane];
                            let added = moved.saturating_sub(held_before.max(resources.suspension_start[plane]));
                            let op_end = resources.last_suspended_end[plane];
                            resources.hold_suspended(now, plane, moved);
                            assert!(
                                resources.planes[plane].last_end() >= op_end + added,
                                "seed {seed} step {step}: the suspension's {added} ns are on the die after {op_end}"
                            );
                        } else {
                            resources.planes[plane].reserve(now, sensed, moved - sensed);
                        }
                    }
                }
                for ops in &resources.suspendable {
                    assert!(
                        ops.iter().zip(ops.iter().skip(1)).all(|(a, b)| a.0 < a.1 && a.1 <= b.0),
                        "seed {seed} step {step}: operations out of order or overlapping: {ops:?}"
                    );
                }
            }
        }
    }

    /// When the flash has absorbed `bytes` taken at `ready`.
    fn absorbed(budget: &mut WriteBudget, ready: u64, bytes: u64) -> u64 {
        absorbed_in(budget, ready, bytes, 0)
    }

    /// When the flash has absorbed `bytes` of `stream` taken at `ready`.
    fn absorbed_in(budget: &mut WriteBudget, ready: u64, bytes: u64, stream: u32) -> u64 {
        budget.take(ready, bytes, stream);
        budget.free_ns
    }

    #[test]
    fn a_steady_budget_spends_bytes_at_its_rate_in_arrival_order() {
        let mut budget = WriteBudget::new(NS_PER_BYTE, 0, 0);
        assert_eq!(budget.take(0, 1000, 0), 1000);
        assert_eq!(budget.take(0, 1000, 0), 2000);
        assert_eq!(absorbed(&mut budget, 5000, 1000), 6000, "an idle budget starts when the data is ready");
    }

    #[test]
    fn a_drain_buffer_lets_writes_in_until_it_is_full() {
        let mut budget = WriteBudget::new(NS_PER_BYTE, 0, 4000);
        let taken: Vec<(u64, u64)> = (0..8).map(|_| (budget.take(0, 1000, 0), budget.free_ns)).collect();
        for (i, &(_, absorbed)) in taken.iter().enumerate() {
            assert_eq!(absorbed, 1000 * (i as u64 + 1), "the flash absorbs at its rate");
        }
        assert!(taken[..4].iter().all(|&(in_device, _)| in_device == 0), "four fit: {taken:?}");
        // The fifth is in once the first is absorbed, the eighth once the fourth is.
        assert_eq!(taken[4].0, 1000);
        assert_eq!(taken[7].0, 4000);
    }

    #[test]
    fn drain_units_vary_around_the_mean_rate_and_repeat_run_to_run() {
        let units = 20_000u64;
        let take_all = || {
            let mut budget = WriteBudget::new(NS_PER_BYTE, UNIT, 0);
            (0..units).map(|_| absorbed(&mut budget, 0, UNIT)).collect::<Vec<_>>()
        };
        let ends = take_all();
        assert_eq!(ends, take_all(), "the same units take the same times");
        let mean_rate = ends[ends.len() - 1] as f64 / (units * UNIT) as f64;
        assert!((mean_rate - NS_PER_BYTE).abs() < 0.03, "mean ns per byte {mean_rate}");
        let mut times: Vec<u64> = std::iter::once(ends[0]).chain(ends.windows(2).map(|w| w[1] - w[0])).collect();
        times.sort_unstable();
        let unit_ns = UNIT as f64 * NS_PER_BYTE;
        // Exponential unit times: the median is ln 2 of the mean and the 99th percentile ln 100 of it.
        let quantile = |q: f64| times[(q * (times.len() - 1) as f64) as usize] as f64 / unit_ns;
        assert!((quantile(0.5) - 2f64.ln()).abs() < 0.05, "median {}", quantile(0.5));
        assert!((quantile(0.99) - 100f64.ln()).abs() < 0.4, "p99 {}", quantile(0.99));
    }

    #[test]
    fn host_writes_share_the_budget_with_a_finishs_padding_half_each() {
        let mut budget = WriteBudget::new(NS_PER_BYTE, 0, 0);
        let (start, alone) = budget.pad(0, 1_000_000, 7);
        assert_eq!((start, alone), (0, 1_000_000), "padding alone drains at the full rate");
        budget.padding_completes(alone + 500);
        assert!(!budget.any_moved());
        // Back-to-back host writes of 10 kB from 100 us on: each takes twice its time while padding is left.
        let ends: Vec<u64> = (0..30).map(|_| absorbed(&mut budget, 100_000, 10_000)).collect();
        assert_eq!(ends[0], 120_000, "the first write shares from 100 us");
        assert!(ends.windows(2).all(|pair| pair[1] - pair[0] == 20_000), "half the budget each: {ends:?}");
        let moved: Vec<_> = budget.take_moved().collect();
        assert_eq!(moved, vec![(7, 1_300_000 + 500)], "the finish ends later by the writes' 300 us, tail kept");
        assert!(!budget.any_moved(), "reported once");
        // Once the padding is absorbed, a write has the whole budget.
        assert_eq!(absorbed(&mut budget, 2_000_000, 10_000), 2_010_000);
        assert_eq!(budget.take_moved().count(), 0);
    }

    #[test]
    fn each_stream_of_host_writes_shares_the_budget_equally_with_the_padding() {
        let mut budget = WriteBudget::new(NS_PER_BYTE, 0, 0);
        budget.pad(0, 1_000_000, NO_COMMAND);
        // Two zones written in turn: the host has two thirds of the budget, so each write takes 1.5 times as
        // long (once both streams are seen), and the padding ends later by all the host's bytes.
        let ends: Vec<u64> = (0..20).map(|i| absorbed_in(&mut budget, 0, 10_000, i % 2)).collect();
        assert_eq!(ends[0], 20_000, "one stream seen so far: half");
        assert!(ends.windows(2).skip(1).all(|pair| pair[1] - pair[0] == 15_000), "two thirds: {ends:?}");
        assert_eq!(budget.busy_until(), 1_000_000 + 200_000);
    }

    #[test]
    fn the_streams_beside_a_new_padding_are_counted_afresh_oldest_replaced_first() {
        let mut budget = WriteBudget::new(NS_PER_BYTE, 0, 0);
        budget.pad(0, 1_000_000, NO_COMMAND);
        // The streams remembered, full, and one more write, so that the oldest has been dropped once.
        for _ in 0..=RECENT_STREAMS {
            absorbed_in(&mut budget, 0, 1_000, 1);
        }
        let after_first = budget.busy_until();
        // No padding left: the next write forgets the streams. A second finish, then one write to zone 5 and
        // as many more as are remembered to zone 6: the write to zone 5 is the oldest, the one the last drops.
        absorbed_in(&mut budget, after_first, 1_000, 2);
        budget.pad(after_first + 10_000, 1_000_000, NO_COMMAND);
        absorbed_in(&mut budget, 0, 1_000, 5);
        for _ in 1..RECENT_STREAMS {
            absorbed_in(&mut budget, 0, 1_000, 6);
        }
        let before = budget.free_ns;
        let end = absorbed_in(&mut budget, 0, 1_000, 6);
        assert_eq!(end - before, 2_000, "one stream (zone 6) beside the padding: half the budget");
    }

    #[test]
    fn a_write_that_outlasts_the_padding_shares_only_until_it_is_absorbed() {
        let mut budget = WriteBudget::new(NS_PER_BYTE, 0, 0);
        budget.pad(0, 10_000, NO_COMMAND);
        // 6 us of padding left at 4 us: both run at half speed for 12 us, then the write alone for 4 us.
        assert_eq!(absorbed(&mut budget, 4_000, 10_000), 4_000 + 12_000 + 4_000);
        assert_eq!(budget.busy_until(), 20_000);
        assert!(!budget.any_moved(), "a padding no runtime retimes is not reported");
    }

    #[test]
    fn a_wait_behind_more_bytes_spreads_by_the_square_root() {
        // Sums of k exponential unit times: p99 - mean grows as sqrt(k), so 16x the bytes gives ~4x the spread.
        let spread = |k: u64| {
            let mut budget = WriteBudget::new(NS_PER_BYTE, UNIT, 0);
            let mut sums: Vec<f64> = (0..4000)
                .map(|_| {
                    let start = budget.free_ns;
                    (absorbed(&mut budget, 0, k * UNIT) - start) as f64
                })
                .collect();
            sums.sort_by(f64::total_cmp);
            let mean = sums.iter().sum::<f64>() / sums.len() as f64;
            sums[(0.99 * (sums.len() - 1) as f64) as usize] - mean
        };
        let ratio = spread(64) / spread(4);
        assert!((3.2..4.8).contains(&ratio), "spread ratio {ratio} for 16x the bytes");
    }

    /// Back-to-back commands on the command processor: the time of each.
    fn command_times(cv: f64, mean_ns: u64, commands: usize) -> Vec<u64> {
        let mut processor = CommandProcessor::new(ProcessorTimes { cv, idle_slice_ns: 0 });
        (0..commands).map(|_| processor.time_ns(mean_ns)).collect()
    }

    #[test]
    fn command_times_vary_by_their_coefficient_of_variation_around_their_mean() {
        let mean_ns = 7_100;
        assert!(command_times(0.0, mean_ns, 1000).iter().all(|&time| time == mean_ns), "cv 0 is exact");
        let times = command_times(0.4, mean_ns, 200_000);
        assert_eq!(times, command_times(0.4, mean_ns, 200_000), "the same commands take the same times");
        let mean = times.iter().sum::<u64>() as f64 / times.len() as f64;
        assert!((mean / mean_ns as f64 - 1.0).abs() < 0.01, "mean {mean} ns against {mean_ns}");
        let variance = times.iter().map(|&time| (time as f64 - mean).powi(2)).sum::<f64>() / times.len() as f64;
        let cv = variance.sqrt() / mean;
        assert!((cv - 0.4).abs() < 0.02, "coefficient of variation {cv}");
        let shortest = *times.iter().min().expect("times");
        assert!(shortest >= (0.6 * mean_ns as f64) as u64, "never under the fixed 60 %: {shortest}");
        assert!(times.iter().any(|&time| time > 3 * mean_ns), "an exponential tail reaches past 3x the mean");
    }

    #[test]
    fn a_varying_command_time_keeps_the_processors_rate() {
        // Commands all queued at 0: each is taken when the one before is done, and the processor ends the last
        // when the sum of their times is spent.
        let suspend = Suspend { latency_ns: 0, resume_before_suspend_ns: 0 };
        let mut resources =
            Resources::new(1, 1, 0, WriteBudget::new(0.0, 0, 0), suspend, ProcessorTimes { cv: 0.4, idle_slice_ns: 0 });
        let mut done = 0;
        for command in 0..100_000 {
            let turn = resources.command(0, 5_400);
            assert_eq!(turn.taken_ns, done, "command {command} is taken when the one before is done");
            done = turn.done_ns;
        }
        let per_command = done as f64 / 100_000.0;
        assert!((per_command / 5_400.0 - 1.0).abs() < 0.01, "{per_command} ns a command");
    }

    #[test]
    fn a_command_arriving_while_the_processor_runs_its_idle_slice_waits_for_its_end() {
        let suspend = Suspend { latency_ns: 0, resume_before_suspend_ns: 0 };
        let times = ProcessorTimes { cv: 0.0, idle_slice_ns: 4_000 };
        let mut resources = Resources::new(1, 1, 0, WriteBudget::new(0.0, 0, 0), suspend, times);
        let first = resources.command(1_000, 5_000);
        assert_eq!((first.taken_ns, first.done_ns), (1_000, 6_000), "none before the first command");
        let queued = resources.command(2_000, 5_000);
        assert_eq!(queued.taken_ns, 6_000, "a command queued behind another is taken when it is done");
        // The queue empties at 11 us: a slice runs to 15 us.
        let during = resources.command(12_000, 5_000);
        assert_eq!(during.taken_ns, 15_000, "a command arriving in the slice waits for its end");
        let after = resources.command(24_000, 5_000);
        assert_eq!(after.taken_ns, 24_000, "one arriving after the slice (20 to 24 us) is taken at once");
        let at_the_end = resources.command(33_000, 5_000);
        assert_eq!(at_the_end.taken_ns, 33_000, "the slice (29 to 33 us) is over as it ends");
    }
}

//! A resource that can be reserved into the gaps between earlier reservations.
//!
//! A plain "next free at" timestamp serves reservations in the order they are made. That is right for a
//! resource whose requests arrive in time order (the command processor), but wrong for one reserved for a
//! future instant: a read whose data leaves its die at T would block the channel for a read whose die finished
//! earlier but was reserved later. A timeline keeps the busy intervals and fills gaps, as a channel arbiter or
//! NVMeVirt's credit-based channel model does.

/// Busy intervals `[start, end)`, sorted, disjoint and never touching (touching ones are merged). Those before
/// `ended` had ended by the last reservation's present and count as gone; they are dropped in batches, so that a
/// reservation does not shift the whole list each time one ends.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    busy: Vec<(u64, u64)>,
    ended: usize,
}

/// How many ended intervals may wait before they are dropped.
const ENDED_BATCH: usize = 64;

/// Past this many live intervals the oldest are forgotten (their time is treated as busy), which bounds the
/// cost of a reservation; far more than any queue depth leaves unmerged.
const MAX_INTERVALS: usize = 4096;

/// `slice.partition_point(pred)`, found by galloping back from the end (1, 2, 4... items) before bisecting:
/// reservations mostly land among the last few of hundreds of intervals, so the search touches a few cache lines
/// instead of a path through the whole list.
pub(crate) fn partition_point_from_end<T>(slice: &[T], pred: impl Fn(&T) -> bool) -> usize {
    let (mut low, mut high, mut step) = (0, slice.len(), 1);
    while high > low {
        let probe = high.saturating_sub(step).max(low);
        if pred(&slice[probe]) {
            low = probe + 1;
            break;
        }
        high = probe;
        step *= 2;
    }
    low + slice[low..high].partition_point(pred)
}

/// `partition_point_from_end` over a deque's two slices.
pub(crate) fn deque_partition_point_from_end<T>(
    deque: &std::collections::VecDeque<T>,
    pred: impl Fn(&T) -> bool,
) -> usize {
    let (front, back) = deque.as_slices();
    match back.first() {
        Some(first) if pred(first) => front.len() + partition_point_from_end(back, pred),
        _ => partition_point_from_end(front, pred),
    }
}

impl Timeline {
    /// Reserves `duration` starting no earlier than `earliest`, in the first gap that fits; intervals that end
    /// by `now` (no reservation can start before the present) are dropped. Returns the end of the reservation.
    /// Always inlined: a read makes four, and out of line the calls cost some 50 instructions a read.
    #[inline(always)]
    pub fn reserve(&mut self, now: u64, earliest: u64, duration: u64) -> u64 {
        if let Some(&(_, end)) = self.busy.get(self.ended) {
            // Whether the first live interval has ended is a coin toss a branch would often guess wrong; about
            // one ends between two reservations, so step past it with arithmetic, and leave the rarer cases (the
            // next has ended too, or all have) to `forget_before`.
            self.ended += usize::from(end <= now);
            if self.busy.get(self.ended).is_none_or(|&(_, end)| end <= now)
                || self.ended >= ENDED_BATCH
                || self.busy.len() > MAX_INTERVALS
            {
                self.forget_before(now);
            }
        }
        if duration == 0 {
            return earliest;
        }
        // Most reservations land after everything reserved so far (the last interval, if any, has not ended:
        // `forget_before` empties the list when all have).
        match self.busy.last_mut() {
            None => self.busy.push((earliest, earliest + duration)),
            Some(last) if earliest == last.1 => last.1 += duration,
            Some(last) if earliest > last.1 => self.busy.push((earliest, earliest + duration)),
            Some(_) => return self.reserve_in_gap(earliest, duration),
        }
        earliest + duration
    }

    /// Drops the intervals that ended by `now`, and forgets the oldest past `MAX_INTERVALS`.
    #[inline(never)]
    fn forget_before(&mut self, now: u64) {
        self.ended = self.first_ending_after(self.ended, now);
        if self.ended == self.busy.len() {
            self.busy.clear();
            self.ended = 0;
        } else if self.ended >= ENDED_BATCH {
            self.busy.drain(..self.ended);
            self.ended = 0;
        }
        if self.live().len() > MAX_INTERVALS {
            let forget = self.ended + self.live().len() - MAX_INTERVALS;
            let floor = self.busy[forget].0;
            self.busy.drain(..forget);
            self.busy.insert(0, (now.min(floor), floor));
            self.ended = 0;
        }
    }

    /// Reserves `duration` from `earliest` in the first gap that fits, when one ends after `earliest`.
    #[inline(never)]
    fn reserve_in_gap(&mut self, earliest: u64, duration: u64) -> u64 {
        let (index, start) = self.fit(earliest, duration);
        let end = start + duration;
        self.insert(index, start, end);
        end
    }

    /// Where `duration` from `earliest` on would start if reserved now, reserving nothing.
    pub fn first_fit(&self, earliest: u64, duration: u64) -> u64 {
        self.fit(earliest, duration).1
    }

    /// The intervals that have not ended.
    fn live(&self) -> &[(u64, u64)] {
        &self.busy[self.ended..]
    }

    /// The first gap from `earliest` that holds `duration`: the index of the interval it precedes, and its start.
    fn fit(&self, earliest: u64, duration: u64) -> (usize, u64) {
        let mut start = earliest;
        let mut index = self.first_live_ending_after(start);
        while let Some(&(busy_start, busy_end)) = self.busy.get(index) {
            if start + duration <= busy_start {
                break;
            }
            start = start.max(busy_end);
            index += 1;
        }
        (index, start)
    }

    /// The index of the first live interval that ends after `at`, where a search for room from `at` begins.
    fn first_live_ending_after(&self, at: u64) -> usize {
        self.ended + partition_point_from_end(self.live(), |&(_, end)| end <= at)
    }

    /// The index of the first interval from `from` on that ends after `at`, for dropping the intervals that have
    /// ended: about one ends between two reservations, so a short scan finds it before a binary search would
    /// (gaps are searched from wherever a reservation starts, which is rarely among the first).
    fn first_ending_after(&self, from: usize, at: u64) -> usize {
        const SCAN: usize = 8;
        let rest = &self.busy[from..];
        match rest.iter().take(SCAN).position(|&(_, end)| end > at) {
            Some(offset) => from + offset,
            None if rest.len() <= SCAN => self.busy.len(),
            None => from + SCAN + rest[SCAN..].partition_point(|&(_, end)| end <= at),
        }
    }

    /// Inserts `[start, end)` before `index`, merging with neighbours it touches.
    fn insert(&mut self, index: usize, start: u64, end: u64) {
        let joins_previous = index > self.ended && self.busy[index - 1].1 == start;
        let joins_next = self.busy.get(index).is_some_and(|&(next_start, _)| next_start == end);
        match (joins_previous, joins_next) {
            (true, true) => {
                self.busy[index - 1].1 = self.busy[index].1;
                self.busy.remove(index);
            }
            (true, false) => self.busy[index - 1].1 = end,
            (false, true) => self.busy[index].0 = start,
            (false, false) => self.busy.insert(index, (start, end)),
        }
    }

    /// Reserves `duration` after every existing reservation and no earlier than `earliest` (work that must
    /// follow what is already queued, such as an erase after the programs of its block). Returns its end.
    pub fn reserve_after_all(&mut self, now: u64, earliest: u64, duration: u64) -> u64 {
        self.reserve(now, earliest.max(self.last_end()), duration)
    }

    /// When the last reservation ends.
    pub fn last_end(&self) -> u64 {
        self.live().last().map_or(0, |&(_, end)| end)
    }

    /// Moves every reservation after `at` back to `at` (a power loss stops all work).
    pub fn truncate(&mut self, at: u64) {
        self.busy.drain(..self.ended);
        self.ended = 0;
        self.busy.retain(|&(start, _)| start < at);
        if let Some(last) = self.busy.last_mut() {
            last.1 = last.1.min(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn galloping_from_the_end_finds_the_partition_point() {
        let items: Vec<u64> = (0..100).map(|i| i * 3).collect();
        for at in 0..310 {
            assert_eq!(partition_point_from_end(&items, |&x| x <= at), items.partition_point(|&x| x <= at), "{at}");
        }
        let mut deque: std::collections::VecDeque<u64> = items.iter().copied().collect();
        deque.rotate_left(37);
        deque.rotate_right(37);
        for _ in 0..50 {
            deque.pop_front();
            deque.push_back(deque.back().copied().unwrap_or(0) + 3);
        }
        for at in 0..500 {
            assert_eq!(deque_partition_point_from_end(&deque, |&x| x <= at), deque.partition_point(|&x| x <= at));
        }
        assert_eq!(partition_point_from_end(&[] as &[u64], |&x| x <= 1), 0);
    }

    #[test]
    fn fills_gaps_and_merges() {
        let mut line = Timeline::default();
        assert_eq!(line.reserve(0, 100, 10), 110);
        assert_eq!(line.reserve(0, 0, 10), 10, "an earlier gap is used");
        assert_eq!(line.reserve(0, 95, 10), 120, "no gap before 110 fits 10");
        assert_eq!(line.reserve(0, 10, 5), 15, "touching the first interval merges");
        assert_eq!(line.live(), [(0, 15), (100, 120)]);
        assert_eq!(line.reserve(200, 200, 1), 201, "intervals ended by now are dropped");
        assert_eq!(line.live(), [(200, 201)]);
        assert_eq!(line.last_end(), 201);
    }

    /// Sorts the plain model's intervals and merges those that touch.
    fn sort_and_merge(busy: &mut Vec<(u64, u64)>) {
        busy.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for &(busy_start, busy_end) in busy.iter() {
            match merged.last_mut() {
                Some(last) if last.1 == busy_start => last.1 = busy_end,
                _ => merged.push((busy_start, busy_end)),
            }
        }
        *busy = merged;
    }

    /// The plain model: intervals ended by `now` dropped at once, the first gap found by a scan, touching
    /// intervals merged.
    fn reference_reserve(busy: &mut Vec<(u64, u64)>, now: u64, earliest: u64, duration: u64) -> u64 {
        busy.retain(|&(_, end)| end > now);
        let mut start = earliest;
        for &(busy_start, busy_end) in busy.iter() {
            if busy_end > start && start + duration > busy_start {
                start = busy_end;
            }
        }
        busy.push((start, start + duration));
        sort_and_merge(busy);
        start + duration
    }

    #[test]
    fn never_overlaps() {
        let mut line = Timeline::default();
        let mut seed = 1u64;
        for step in 0..2000u64 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let earliest = step * 3 + (seed >> 40) % 500;
            let duration = 1 + (seed >> 20) % 40;
            let end = line.reserve(step * 3, earliest, duration);
            assert!(end >= earliest + duration);
            assert!(line.live().windows(2).all(|pair| pair[0].1 < pair[1].0), "disjoint and merged at step {step}");
        }
    }

    /// Reservations against the plain model: the ended intervals that the timeline drops in batches change
    /// nothing.
    #[test]
    fn reservations_match_the_plain_model() {
        let (mut line, mut reference) = (Timeline::default(), Vec::new());
        let mut seed = 7u64;
        for step in 0..40_000u64 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let now = step * 5;
            // Mostly ahead of the present, sometimes behind it, as a sense's earliest start can be.
            let earliest = (now + (seed >> 40) % 400).saturating_sub(50);
            let duration = 1 + (seed >> 20) % 30;
            let end = line.reserve(now, earliest, duration);
            assert_eq!(end, reference_reserve(&mut reference, now, earliest, duration), "step {step}");
            assert_eq!(line.live(), reference, "step {step}");
            assert_eq!(line.last_end(), reference.iter().map(|&(_, end)| end).max().unwrap_or(0), "step {step}");
        }
    }
}

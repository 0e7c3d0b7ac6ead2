//! The queue of things due at device times that both runtimes keep: completions and sleeps, earliest first,
//! and items due at the same time in the order they were set, so that nothing depends on the heap's internals.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

struct Entry<T> {
    at_ns: u64,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at_ns, self.seq) == (other.at_ns, other.seq)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at_ns, self.seq).cmp(&(other.at_ns, other.seq))
    }
}

pub(crate) struct Timers<T> {
    heap: BinaryHeap<Reverse<Entry<T>>>,
    seq: u64,
}

impl<T> Timers<T> {
    pub(crate) fn new() -> Timers<T> {
        Timers { heap: BinaryHeap::new(), seq: 0 }
    }

    /// `item` is due at `at_ns`.
    pub(crate) fn set(&mut self, at_ns: u64, item: T) {
        self.seq += 1;
        self.heap.push(Reverse(Entry { at_ns, seq: self.seq, item }));
    }

    /// When the earliest item is due.
    pub(crate) fn next_ns(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse(entry)| entry.at_ns)
    }

    /// The earliest item, with its time, if it is due by `now_ns`.
    pub(crate) fn pop_due(&mut self, now_ns: u64) -> Option<(u64, T)> {
        if self.next_ns()? > now_ns {
            return None;
        }
        self.heap.pop().map(|Reverse(entry)| (entry.at_ns, entry.item))
    }
}

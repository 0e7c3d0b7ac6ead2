//! The queue of things due at device times that both runtimes keep: completions and sleeps, earliest first,
//! and items due at the same time in the order they were set, so that nothing depends on the queue's internals.
//!
//! A calendar queue: most items fall due within a few milliseconds (a command's latency), so they go into
//! buckets of about a microsecond each over a window that slides forward with the clock, and a bitmap
//! (`BucketBits`) finds the first bucket that holds one. Setting and taking an item cost a few instructions
//! each, where a binary heap of the 64 completions of a QD-64 run sifts through six levels per item
//! (docs/notes/calibration-log.md, "Simulation speed").
//! Items past the window (long sleeps, latencies of many milliseconds) wait in a binary heap.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use zonelab_media::{BucketBits, Linked, Slab, BUCKETS, NIL};

struct Entry<T> {
    at_ns: u64,
    seq: u64,
    item: T,
}

impl<T> Entry<T> {
    fn key(&self) -> (u64, u64) {
        (self.at_ns, self.seq)
    }
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
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
        self.key().cmp(&other.key())
    }
}

/// A bucket spans 2^10 ns (1.024 us): with 4096 buckets, a window of 4.19 ms.
const BUCKET_SHIFT: u32 = 10;
/// An item in a bucket: a node of the bucket's list.
struct Node<T> {
    at_ns: u64,
    seq: u64,
    next: u32,
    item: Option<T>,
}

impl<T> Linked for Node<T> {
    fn next_mut(&mut self) -> &mut u32 {
        &mut self.next
    }
}

pub(crate) struct Timers<T> {
    /// Bucket `(at_ns >> BUCKET_SHIFT) % BUCKETS` lists the items due in the window, in (time, order set) order,
    /// from `heads` to `tails`. The window starts at bucket `origin` (the bucket of the last item taken, or later)
    /// and holds the items due before `origin + BUCKETS`; an item set for a time before the window waits in the
    /// window's first bucket, ahead of the later ones there.
    heads: Box<[u32]>,
    tails: Box<[u32]>,
    nodes: Slab<Node<T>>,
    occupied: BucketBits,
    origin: u64,
    /// Items due at or after the window's end when they were set.
    later: BinaryHeap<Reverse<Entry<T>>>,
    seq: u64,
    /// The earliest item, kept as items come and go: asked for at every instant, it is found once per item taken.
    front: Option<Front>,
}

/// Where the earliest item is: its time and order, and its bucket (None: among the later items).
#[derive(Clone, Copy)]
struct Front {
    at_ns: u64,
    seq: u64,
    bucket: Option<usize>,
}

impl<T> Timers<T> {
    pub(crate) fn new() -> Timers<T> {
        Timers {
            heads: vec![NIL; BUCKETS].into_boxed_slice(),
            tails: vec![NIL; BUCKETS].into_boxed_slice(),
            nodes: Slab::default(),
            occupied: BucketBits::default(),
            origin: 0,
            later: BinaryHeap::new(),
            seq: 0,
            front: None,
        }
    }

    /// `item` is due at `at_ns`.
    pub(crate) fn set(&mut self, at_ns: u64, item: T) {
        self.seq += 1;
        let seq = self.seq;
        let bucket = (at_ns >> BUCKET_SHIFT).max(self.origin);
        let place = if bucket >= self.origin + BUCKETS as u64 {
            self.later.push(Reverse(Entry { at_ns, seq, item }));
            None
        } else {
            let index = bucket as usize % BUCKETS;
            let new = self.nodes.insert(Node { at_ns, seq, next: NIL, item: Some(item) });
            self.link(index, new);
            self.occupied.set(index);
            Some(index)
        };
        // Set last, it goes ahead of the earliest only if it is due sooner.
        if self.front.is_none_or(|front| at_ns < front.at_ns) {
            self.front = Some(Front { at_ns, seq, bucket: place });
        }
    }

    /// Puts node `new` in bucket `index` after the items due no later than it.
    fn link(&mut self, index: usize, new: u32) {
        let at_ns = self.nodes[new].at_ns;
        let tail = self.tails[index];
        // Items are mostly set in time order: the new one usually goes last.
        if tail == NIL || self.nodes[tail].at_ns <= at_ns {
            match tail {
                NIL => self.heads[index] = new,
                tail => self.nodes[tail].next = new,
            }
            self.tails[index] = new;
            return;
        }
        let (mut previous, mut next) = (NIL, self.heads[index]);
        while self.nodes[next].at_ns <= at_ns {
            (previous, next) = (next, self.nodes[next].next);
        }
        self.nodes[new].next = next;
        match previous {
            NIL => self.heads[index] = new,
            previous => self.nodes[previous].next = new,
        }
    }

    /// When the earliest item is due.
    pub(crate) fn next_ns(&self) -> Option<u64> {
        self.front.map(|front| front.at_ns)
    }

    /// The earliest item, with its time, if it is due by `now_ns`.
    pub(crate) fn pop_due(&mut self, now_ns: u64) -> Option<(u64, T)> {
        let front = self.front.filter(|front| front.at_ns <= now_ns)?;
        let item = match front.bucket {
            Some(index) => {
                let first = self.heads[index];
                let node = &mut self.nodes[first];
                let item = node.item.take().expect("a listed node holds its item");
                self.heads[index] = node.next;
                self.nodes.release(first);
                if self.heads[index] == NIL {
                    self.tails[index] = NIL;
                    self.occupied.clear(index);
                }
                item
            }
            None => self.later.pop().expect("the earliest item is a later one").0.item,
        };
        // Nothing left is due before this item, so the window may start at its bucket. It never moves back:
        // items set in the past wait in its first bucket.
        self.origin = self.origin.max(front.at_ns >> BUCKET_SHIFT);
        self.front = self.find_front();
        Some((front.at_ns, item))
    }

    /// The earliest item: the first in the first bucket from the window's start that holds one, or a later item
    /// due sooner.
    fn find_front(&self) -> Option<Front> {
        let bucketed = self.occupied.first_from(self.origin as usize % BUCKETS).map(|index| {
            let first = &self.nodes[self.heads[index]];
            Front { at_ns: first.at_ns, seq: first.seq, bucket: Some(index) }
        });
        let later = self.later.peek().map(|Reverse(entry)| Front { at_ns: entry.at_ns, seq: entry.seq, bucket: None });
        match (bucketed, later) {
            (Some(bucketed), Some(later)) if (later.at_ns, later.seq) < (bucketed.at_ns, bucketed.seq) => Some(later),
            (bucketed, later) => bucketed.or(later),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a binary heap of (time, order set): every item comes out in the same order, whatever the mix of
    /// times set (the past, the window, far past it) and of clocks asked about.
    #[test]
    fn items_come_out_as_from_a_heap_of_time_and_order() {
        for seed in 1..=20u64 {
            let (mut timers, mut reference) = (Timers::new(), BinaryHeap::new());
            let (mut state, mut now, mut order) = (seed, 0u64, 0u64);
            let mut next = || {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                state >> 33
            };
            for step in 0..20_000u64 {
                let roll = next() % 100;
                if roll < 55 {
                    let at = match next() % 10 {
                        0 => now.saturating_sub(next() % 5_000),
                        1 => now,
                        2 => now + 4_000_000 + next() % 50_000_000,
                        3 => now + next() % 3,
                        _ => now + next() % 600_000,
                    };
                    order += 1;
                    timers.set(at, step);
                    reference.push(Reverse((at, order, step)));
                } else {
                    if roll > 95 {
                        now = timers.next_ns().unwrap_or(now).max(now);
                    } else {
                        now += next() % 400_000;
                    }
                    loop {
                        let expected = reference.peek().filter(|Reverse((at, _, _))| *at <= now).map(|r| r.0);
                        let got = timers.pop_due(now);
                        assert_eq!(got, expected.map(|(at, _, item)| (at, item)), "seed {seed}, step {step}");
                        if got.is_none() {
                            break;
                        }
                        reference.pop();
                    }
                    let next_due = reference.peek().map(|Reverse((at, _, _))| *at);
                    assert_eq!(timers.next_ns(), next_due, "seed {seed}, step {step}");
                }
            }
        }
    }
}

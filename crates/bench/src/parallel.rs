//! Independent work on several threads: each item on whichever thread is free, the results in the items' order,
//! so that what comes out does not depend on how many threads there were. On a terminal, a line on standard
//! error shows how many are done and how long the rest should take; elsewhere nothing is printed.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// `work` of every item, `jobs` at a time (at least one), in the items' order; `what` names them in the
/// progress line (`runs`, `points`).
pub fn map<T: Sync, R: Send>(items: &[T], jobs: usize, what: &str, work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    map_as_done(items, jobs, what, work, |_, _| ())
}

/// As [`map`], and `done` sees each item with its result as soon as it finishes, one at a time, in the order
/// they finish: what a caller saves there survives an interruption of the rest.
pub fn map_as_done<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    what: &str,
    work: impl Fn(&T) -> R + Sync,
    done: impl Fn(&T, &R) + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let finished = Mutex::new(Vec::with_capacity(items.len()));
    let progress = Progress::new(what, items.len());
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(index) else { break };
                let result = work(item);
                let mut finished = finished.lock().unwrap_or_else(PoisonError::into_inner);
                done(item, &result);
                finished.push((index, result));
                progress.show(finished.len());
            });
        }
    });
    progress.clear();
    let mut finished = finished.into_inner().unwrap_or_else(PoisonError::into_inner);
    finished.sort_by_key(|&(index, _)| index);
    finished.into_iter().map(|(_, result)| result).collect()
}

/// The progress line, on a terminal only.
struct Progress<'a> {
    what: &'a str,
    total: usize,
    started: Instant,
    terminal: bool,
}

impl Progress<'_> {
    fn new(what: &str, total: usize) -> Progress<'_> {
        Progress { what, total, started: Instant::now(), terminal: std::io::stderr().is_terminal() && total > 1 }
    }

    /// `done` of the items are: the count and, from the pace so far, the time the rest should take.
    fn show(&self, done: usize) {
        if !self.terminal {
            return;
        }
        let left = self.started.elapsed().as_secs_f64() / done as f64 * (self.total - done) as f64;
        let _ = write!(std::io::stderr(), "\r  {done}/{} {} done, about {left:.0} s left   ", self.total, self.what);
    }

    fn clear(&self) {
        if self.terminal {
            let _ = write!(std::io::stderr(), "\r{}\r", " ".repeat(60));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_in_the_items_order_for_any_number_of_threads() {
        let items: Vec<u64> = (0..100).collect();
        for jobs in [1, 3, 8] {
            assert_eq!(super::map(&items, jobs, "items", |&n| n * n), items.iter().map(|n| n * n).collect::<Vec<_>>());
        }
    }
}

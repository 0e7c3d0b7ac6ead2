//! Independent work on several threads: each item on whichever thread is free, the results in the items' order,
//! so that what comes out does not depend on how many threads there were.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// `work` of every item, `jobs` at a time (at least one), in the items' order.
pub fn map<T: Sync, R: Send>(items: &[T], jobs: usize, work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let finished = Mutex::new(Vec::with_capacity(items.len()));
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(index) else { break };
                let result = work(item);
                finished.lock().unwrap_or_else(PoisonError::into_inner).push((index, result));
            });
        }
    });
    let mut finished = finished.into_inner().unwrap_or_else(PoisonError::into_inner);
    finished.sort_by_key(|&(index, _)| index);
    finished.into_iter().map(|(_, result)| result).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_in_the_items_order_for_any_number_of_threads() {
        let items: Vec<u64> = (0..100).collect();
        for jobs in [1, 3, 8] {
            assert_eq!(super::map(&items, jobs, |&n| n * n), items.iter().map(|n| n * n).collect::<Vec<_>>());
        }
    }
}

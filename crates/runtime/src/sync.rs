//! Waker-based coordination for host tasks that share one thread (an I/O scheduler's requests, a file
//! system's writers): a mutex whose guard unlocks on drop, a notification, and a bounded channel. They work
//! under any executor, since they wait by registering the waker of the `Context` they are polled with.

use std::cell::{Cell, RefCell, RefMut};
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::task::{Poll, Waker};

/// Returns to the executor once: the task is polled again after the other tasks ready now (the block layer's
/// plug: requests submitted at the same instant get to join a queue before it is dispatched).
pub fn yield_now() -> impl Future<Output = ()> {
    let mut yielded = false;
    poll_fn(move |context| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        context.waker().wake_by_ref();
        Poll::Pending
    })
}

/// Wakers waiting for something; all are woken at once and re-check what they wait for. Each waking starts a new
/// round of the list.
#[derive(Default)]
struct Waiters {
    wakers: RefCell<Vec<Waker>>,
    round: Cell<u64>,
}

/// Where one waiting future's waker stands: listed in a round of a `Waiters`, or not yet. Polled again in the same
/// round with the same waker, the future is listed already, so listing needs no search of the list (many tasks may
/// wait on one primitive, and each would search it on every wake).
#[derive(Default)]
struct Listing(Option<(u64, Waker)>);

impl Waiters {
    /// Lists `waker` for the next waking, unless `listing` says it is listed already.
    fn register(&self, listing: &mut Listing, waker: &Waker) {
        let round = self.round.get();
        if matches!(&listing.0, Some((listed_round, listed)) if *listed_round == round && listed.will_wake(waker)) {
            return;
        }
        self.wakers.borrow_mut().push(waker.clone());
        listing.0 = Some((round, waker.clone()));
    }

    /// Inlined, with the waking out of line: a notify with no waiter (every write a worker completes, in a
    /// zone no other worker waits for) only counts the round.
    #[inline]
    fn wake_all(&self) {
        self.round.set(self.round.get() + 1);
        if !self.wakers.borrow().is_empty() {
            self.wake_listed();
        }
    }

    /// Wakes every listed waker and empties the list.
    fn wake_listed(&self) {
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for waker in wakers {
            waker.wake();
        }
    }
}

/// A mutual-exclusion lock for tasks of one thread. `lock` waits without blocking the thread; the guard
/// unlocks when dropped, so a task dropped while holding it (a cancelled future) releases it too.
#[derive(Default)]
pub struct Mutex<T> {
    locked: Cell<bool>,
    waiters: Waiters,
    value: RefCell<T>,
}

/// Access to a locked `Mutex`'s value.
pub struct MutexGuard<'a, T> {
    value: Option<RefMut<'a, T>>,
    mutex: &'a Mutex<T>,
}

impl<T> Mutex<T> {
    pub fn new(value: T) -> Mutex<T> {
        Mutex { locked: Cell::new(false), waiters: Waiters::default(), value: RefCell::new(value) }
    }

    /// Waits for the lock.
    pub async fn lock(&self) -> MutexGuard<'_, T> {
        let mut listing = Listing::default();
        poll_fn(|context| {
            if self.locked.get() {
                self.waiters.register(&mut listing, context.waker());
                return Poll::Pending;
            }
            self.locked.set(true);
            Poll::Ready(())
        })
        .await;
        MutexGuard { value: Some(self.value.borrow_mut()), mutex: self }
    }

    pub fn is_locked(&self) -> bool {
        self.locked.get()
    }
}

impl<T> std::ops::Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value.as_ref().expect("held until drop")
    }
}

impl<T> std::ops::DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value.as_mut().expect("held until drop")
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.value = None;
        self.mutex.locked.set(false);
        self.mutex.waiters.wake_all();
    }
}

/// A shared/exclusive lock for tasks of one thread, preferring the writer: once `write` waits, new readers
/// wait behind it (a file system's checkpoint lock: operations share it, a checkpoint takes it alone and must
/// not starve). Guards release on drop.
#[derive(Default)]
pub struct RwLock {
    readers: Cell<u32>,
    writer: Cell<bool>,
    writers_waiting: Cell<u32>,
    waiters: Waiters,
}

/// A held `RwLock`, shared or exclusive.
pub struct RwLockGuard<'a> {
    lock: &'a RwLock,
    exclusive: bool,
}

impl RwLock {
    pub fn new() -> RwLock {
        RwLock::default()
    }

    /// Waits for shared access: no writer holds or waits for the lock.
    pub async fn read(&self) -> RwLockGuard<'_> {
        let mut listing = Listing::default();
        poll_fn(|context| {
            if self.writer.get() || self.writers_waiting.get() > 0 {
                self.waiters.register(&mut listing, context.waker());
                return Poll::Pending;
            }
            self.readers.set(self.readers.get() + 1);
            Poll::Ready(())
        })
        .await;
        RwLockGuard { lock: self, exclusive: false }
    }

    /// Waits for exclusive access: the readers in drain, new ones wait.
    pub async fn write(&self) -> RwLockGuard<'_> {
        self.writers_waiting.set(self.writers_waiting.get() + 1);
        let waiting = WaitingWriter(self);
        let mut listing = Listing::default();
        poll_fn(|context| {
            if self.writer.get() || self.readers.get() > 0 {
                self.waiters.register(&mut listing, context.waker());
                return Poll::Pending;
            }
            self.writer.set(true);
            Poll::Ready(())
        })
        .await;
        drop(waiting);
        RwLockGuard { lock: self, exclusive: true }
    }
}

/// Counts a writer as waiting until it holds the lock or its future is dropped.
struct WaitingWriter<'a>(&'a RwLock);

impl Drop for WaitingWriter<'_> {
    fn drop(&mut self) {
        self.0.writers_waiting.set(self.0.writers_waiting.get() - 1);
        self.0.waiters.wake_all();
    }
}

impl Drop for RwLockGuard<'_> {
    fn drop(&mut self) {
        if self.exclusive {
            self.lock.writer.set(false);
        } else {
            self.lock.readers.set(self.lock.readers.get() - 1);
        }
        self.lock.waiters.wake_all();
    }
}

/// A notification: `notified` resolves at the first `notify_waiters` after it was first polled.
#[derive(Default)]
pub struct Notify {
    waiters: Waiters,
}

impl Notify {
    pub fn new() -> Notify {
        Notify::default()
    }

    /// Wakes every task waiting in `notified`.
    pub fn notify_waiters(&self) {
        self.waiters.wake_all();
    }

    pub fn notified(&self) -> impl Future<Output = ()> + '_ {
        let mut seen = None;
        let mut listing = Listing::default();
        poll_fn(move |context| {
            let round = self.waiters.round.get();
            match seen {
                Some(seen) if seen != round => Poll::Ready(()),
                _ => {
                    seen.get_or_insert(round);
                    self.waiters.register(&mut listing, context.waker());
                    Poll::Pending
                }
            }
        })
    }
}

/// A bounded first-in first-out channel between tasks of one thread: `send` waits while it is full, `recv`
/// while it is empty; `recv` returns None once `close` was called and everything sent was received.
pub struct Channel<T> {
    items: RefCell<VecDeque<T>>,
    bound: usize,
    closed: Cell<bool>,
    senders: Waiters,
    receivers: Waiters,
}

impl<T> Channel<T> {
    /// A channel that holds at most `bound` items (at least one).
    pub fn bounded(bound: usize) -> Channel<T> {
        Channel {
            items: RefCell::new(VecDeque::new()),
            bound: bound.max(1),
            closed: Cell::new(false),
            senders: Waiters::default(),
            receivers: Waiters::default(),
        }
    }

    /// Sends `item`, waiting for room; a closed channel hands it back.
    pub async fn send(&self, item: T) -> Result<(), T> {
        let mut item = Some(item);
        let mut listing = Listing::default();
        poll_fn(|context| {
            if self.closed.get() {
                return Poll::Ready(Err(item.take().expect("sent once")));
            }
            let mut items = self.items.borrow_mut();
            if items.len() >= self.bound {
                self.senders.register(&mut listing, context.waker());
                return Poll::Pending;
            }
            items.push_back(item.take().expect("sent once"));
            drop(items);
            self.receivers.wake_all();
            Poll::Ready(Ok(()))
        })
        .await
    }

    /// The next item, waiting for one; None when the channel is closed and drained.
    pub async fn recv(&self) -> Option<T> {
        let mut listing = Listing::default();
        poll_fn(|context| {
            let next = self.items.borrow_mut().pop_front();
            match next {
                Some(item) => {
                    self.senders.wake_all();
                    Poll::Ready(Some(item))
                }
                None if self.closed.get() => Poll::Ready(None),
                None => {
                    self.receivers.register(&mut listing, context.waker());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// No more sends; receivers drain what is left.
    pub fn close(&self) {
        self.closed.set(true);
        self.senders.wake_all();
        self.receivers.wake_all();
    }

    pub fn len(&self) -> usize {
        self.items.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Runs every future to completion as one future (several tasks on one thread under `block_on`, say),
/// polling each when the shared waker fires; their outputs, in order.
pub async fn join_all<T, F: Future<Output = T>>(futures: Vec<F>) -> Vec<T> {
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<T>> = futures.iter().map(|_| None).collect();
    poll_fn(move |context| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(context) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(outputs.iter_mut().filter_map(Option::take).collect())
        }
    })
    .await
}

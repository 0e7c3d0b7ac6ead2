//! The thread that answers FUSE requests when the device completes them. The request loop submits each
//! request's commands at once (so they reach the device in the order the kernel sent them) and hands the rest
//! of the request, a future that awaits the completions and sends the reply, to this thread. Each future has
//! a waker of its own, so the device thread's completion wakes exactly the request it finishes.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Wake, Waker};
use std::thread::{JoinHandle, Thread};

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

#[derive(Default)]
struct Queue {
    new: Vec<Task>,
    woken: Vec<usize>,
    stop: bool,
}

struct Inner {
    queue: Mutex<Queue>,
    thread: Thread,
}

impl Inner {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Wakes the task in one slot. A wake that arrives after the slot was reused polls the new task once more,
/// which a future tolerates.
struct SlotWaker {
    slot: usize,
    inner: Arc<Inner>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.inner.queue().woken.push(self.slot);
        self.inner.thread.unpark();
    }
}

/// The completion thread and its tasks.
pub(crate) struct Completions {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
}

impl Completions {
    pub(crate) fn start() -> Completions {
        let (inner_tx, inner_rx) = std::sync::mpsc::channel::<Arc<Inner>>();
        let thread = std::thread::Builder::new()
            .name("zonelab-replies".into())
            .spawn(move || {
                if let Ok(inner) = inner_rx.recv() {
                    run(&inner);
                }
            })
            .expect("spawn the completion thread");
        let inner = Arc::new(Inner { queue: Mutex::default(), thread: thread.thread().clone() });
        inner_tx.send(Arc::clone(&inner)).expect("the completion thread waits for its queue");
        Completions { inner, thread: Some(thread) }
    }

    /// Runs `task` on the completion thread.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.inner.queue().new.push(Box::pin(task));
        self.inner.thread.unpark();
    }
}

impl Drop for Completions {
    /// Lets every task run to its end, then ends the thread.
    fn drop(&mut self) {
        self.inner.queue().stop = true;
        self.inner.thread.unpark();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(inner: &Arc<Inner>) {
    let mut tasks: Vec<Option<Task>> = Vec::new();
    let mut wakers: Vec<Waker> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut running = 0usize;
    loop {
        let (new, mut to_poll, stop) = {
            let mut queue = inner.queue();
            (std::mem::take(&mut queue.new), std::mem::take(&mut queue.woken), queue.stop)
        };
        for task in new {
            let slot = free.pop().unwrap_or_else(|| {
                tasks.push(None);
                wakers.push(Waker::from(Arc::new(SlotWaker { slot: tasks.len() - 1, inner: Arc::clone(inner) })));
                tasks.len() - 1
            });
            tasks[slot] = Some(task);
            running += 1;
            to_poll.push(slot);
        }
        for slot in to_poll {
            let Some(task) = tasks[slot].as_mut() else { continue };
            if task.as_mut().poll(&mut Context::from_waker(&wakers[slot])).is_ready() {
                tasks[slot] = None;
                free.push(slot);
                running -= 1;
            }
        }
        if stop && running == 0 && inner.queue().new.is_empty() {
            return;
        }
        std::thread::park();
    }
}

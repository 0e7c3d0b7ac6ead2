//! Where FUSE requests finish. The request loop submits each request's commands at once (so they reach the
//! device in the order the kernel sent them) and hands the rest of the request, a future that awaits the
//! completions and sends the reply, to `Completions::spawn`. The future is polled once on the request loop;
//! after that, whoever wakes it polls it: the device thread, when the model completes the last command it
//! waits for. So a reply leaves on the thread that completed the command, with no thread between them:
//! each wake-up of a parked thread costs tens of microseconds on a loaded host.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Wake, Waker};
use std::time::Duration;

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One request's remainder; polled by whichever thread wakes it.
struct TaskCell {
    task: Mutex<Option<Task>>,
    unfinished: Arc<AtomicUsize>,
}

impl TaskCell {
    /// Polls the task; once it is done it is dropped and no longer counted. A wake that arrives while
    /// another thread polls waits for that poll, so no wake is lost.
    fn poll(self: &Arc<Self>) {
        let mut slot = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(task) = slot.as_mut() else { return };
        let waker = Waker::from(Arc::clone(self));
        if task.as_mut().poll(&mut Context::from_waker(&waker)).is_ready() {
            *slot = None;
            self.unfinished.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Wake for TaskCell {
    fn wake(self: Arc<Self>) {
        self.poll();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.poll();
    }
}

/// The requests in flight.
#[derive(Default)]
pub(crate) struct Completions {
    unfinished: Arc<AtomicUsize>,
}

impl Completions {
    /// Polls `task` now and from then on whenever it is woken.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.unfinished.fetch_add(1, Ordering::SeqCst);
        let cell =
            Arc::new(TaskCell { task: Mutex::new(Some(Box::pin(task))), unfinished: Arc::clone(&self.unfinished) });
        cell.poll();
    }
}

impl Drop for Completions {
    /// Waits until every request in flight has had its reply (the device thread runs until after this).
    fn drop(&mut self) {
        while self.unfinished.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

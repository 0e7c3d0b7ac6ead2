//! A thread that runs host code for callers on other threads. Host code (a scheduler, a file system) is
//! single-threaded async, as in a simulation; against a real-time device, a program with many threads of its
//! own (RocksDB) reaches it through a `HostThread`: each call sends a job that builds its future on the host
//! thread, where it runs among the others as a task, and blocks the caller until its result comes back.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Wake, Waker};
use std::thread::{JoinHandle, Thread};

use crate::realtime::{as_task, block_on, new_submitter};

type LocalTask = Pin<Box<dyn Future<Output = ()>>>;
type Job<C> = Box<dyn FnOnce(Rc<C>) -> LocalTask + Send>;

struct Shared<C> {
    jobs: Mutex<VecDeque<Job<C>>>,
    /// Tasks woken since the host thread last looked.
    ready: Mutex<VecDeque<usize>>,
    stopping: AtomicBool,
}

/// Host code on its own thread, around a context `C` (the host software's state) that never leaves it.
pub struct HostThread<C: 'static> {
    shared: Arc<Shared<C>>,
    thread: Thread,
    handle: Option<JoinHandle<()>>,
}

struct TaskWaker<C> {
    task: usize,
    shared: Arc<Shared<C>>,
    thread: Thread,
}

impl<C> Wake for TaskWaker<C> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        lock(&self.shared.ready).push_back(self.task);
        self.thread.unpark();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<C: 'static> HostThread<C> {
    /// Starts the thread and builds the context there with `init` (which may wait on the device); returns
    /// the thread, or what `init` failed with.
    pub fn start<E: Send + 'static, F: Future<Output = Result<C, E>> + 'static>(
        name: &str,
        init: impl FnOnce() -> F + Send + 'static,
    ) -> Result<HostThread<C>, E> {
        let shared = Arc::new(Shared {
            jobs: Mutex::new(VecDeque::new()),
            ready: Mutex::new(VecDeque::new()),
            stopping: AtomicBool::new(false),
        });
        let (started, outcome) = std::sync::mpsc::sync_channel(1);
        let for_thread = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || match block_on(init()) {
                Ok(context) => {
                    let _ = started.send(Ok(()));
                    run(&for_thread, Rc::new(context));
                }
                Err(error) => {
                    let _ = started.send(Err(error));
                }
            })
            .expect("the host thread starts");
        match outcome.recv() {
            Ok(Ok(())) => Ok(HostThread { shared, thread: handle.thread().clone(), handle: Some(handle) }),
            Ok(Err(error)) => {
                let _ = handle.join();
                Err(error)
            }
            Err(_) => panic!("the host thread ended while building its context"),
        }
    }

    /// Runs `job` on the host thread with the context and returns what its future resolves to; other calls
    /// run beside it meanwhile.
    pub fn call<R: Send + 'static, F: Future<Output = R> + 'static>(
        &self,
        job: impl FnOnce(Rc<C>) -> F + Send + 'static,
    ) -> R {
        let (done, result) = std::sync::mpsc::sync_channel(1);
        let job: Job<C> = Box::new(move |context| {
            Box::pin(async move {
                let _ = done.send(job(context).await);
            })
        });
        lock(&self.shared.jobs).push_back(job);
        self.thread.unpark();
        result.recv().expect("the host thread runs every job it takes")
    }
}

impl<C: 'static> HostThread<C> {
    /// Starts `job` on the host thread as a task of its own and returns at once; the thread ends only after
    /// the task has, so a long-running task needs a way to be told to stop.
    pub fn spawn<F: Future<Output = ()> + 'static>(&self, job: impl FnOnce(Rc<C>) -> F + Send + 'static) {
        let job: Job<C> = Box::new(move |context| Box::pin(job(context)));
        lock(&self.shared.jobs).push_back(job);
        self.thread.unpark();
    }
}

impl<C: 'static> Drop for HostThread<C> {
    /// Lets the tasks under way finish, then ends the thread (dropping the context there).
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::Release);
        self.thread.unpark();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// The host thread's executor: jobs become tasks; a task is polled when its waker says so.
fn run<C: 'static>(shared: &Arc<Shared<C>>, context: Rc<C>) {
    let thread = std::thread::current();
    // Each task with the number a device trace names it by.
    let mut tasks: Vec<Option<(LocalTask, u32)>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut live = 0usize;
    loop {
        let jobs: Vec<Job<C>> = lock(&shared.jobs).drain(..).collect();
        for job in jobs {
            let task = job(Rc::clone(&context));
            let slot = free.pop().unwrap_or_else(|| {
                tasks.push(None);
                tasks.len() - 1
            });
            tasks[slot] = Some((task, new_submitter()));
            live += 1;
            lock(&shared.ready).push_back(slot);
        }
        let ready: Vec<usize> = lock(&shared.ready).drain(..).collect();
        for slot in &ready {
            let Some((task, id)) = tasks[*slot].as_mut() else { continue };
            let waker =
                Waker::from(Arc::new(TaskWaker { task: *slot, shared: Arc::clone(shared), thread: thread.clone() }));
            if as_task(*id, || task.as_mut().poll(&mut Context::from_waker(&waker))).is_ready() {
                tasks[*slot] = None;
                free.push(*slot);
                live -= 1;
            }
        }
        let idle = lock(&shared.ready).is_empty() && lock(&shared.jobs).is_empty();
        if idle && live == 0 && shared.stopping.load(Ordering::Acquire) {
            return;
        }
        if idle {
            std::thread::park();
        }
    }
}

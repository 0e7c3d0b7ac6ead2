//! The runtime's futures and primitives wait through the waker of the `Context` they are polled with, so they
//! work under any executor; a guard releases its lock even when the future holding it is dropped.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use zonelab_device::{Device, DeviceConfig};
use zonelab_runtime::sync::{Channel, Mutex, Notify};
use zonelab_runtime::{CommandQueue, HostExt, IoData, Simulation};
use zonelab_zns::{MemoryStore, NullStore};

fn simulation() -> Simulation<NullStore> {
    let config = DeviceConfig::load("zn540", &["namespace.zones=4".into()]).expect("preset");
    Simulation::new(Device::new(&config, NullStore).expect("device"), None)
}

/// A waker that counts its wakes and passes them on to another.
struct Counting {
    wakes: AtomicUsize,
    inner: Waker,
}

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.inner.wake_by_ref();
    }
}

#[test]
fn a_command_wakes_the_waker_it_was_polled_with() {
    let mut simulation = simulation();
    let host = simulation.host();
    let wakes = Rc::new(Cell::new(0));
    let seen = Rc::clone(&wakes);
    simulation.spawn(async move {
        let mut write = pin!(host.write(0, IoData::Zeros(4096)));
        let mut counting: Option<Arc<Counting>> = None;
        let result = poll_fn(|context| {
            let counting = counting.get_or_insert_with(|| {
                Arc::new(Counting { wakes: AtomicUsize::new(0), inner: context.waker().clone() })
            });
            let waker = Waker::from(Arc::clone(counting));
            write.as_mut().poll(&mut Context::from_waker(&waker))
        })
        .await;
        result.expect("write");
        seen.set(counting.map_or(0, |counting| counting.wakes.load(Ordering::SeqCst)));
    });
    simulation.run();
    assert_eq!(simulation.unfinished_tasks(), 0);
    assert!(wakes.get() >= 1, "the completion woke the foreign waker");
}

#[test]
fn a_dropped_lock_holder_releases_the_lock() {
    let mut simulation = simulation();
    let host = simulation.host();
    let lock = Rc::new(Mutex::new(0u32));
    let order = Rc::new(RefCell::new(Vec::new()));
    {
        let (lock, host) = (Rc::clone(&lock), host.clone());
        simulation.spawn(async move {
            // Takes the lock inside a future that is abandoned while it sleeps holding it.
            let mut holder = pin!(async {
                let _guard = lock.lock().await;
                host.sleep(1_000_000).await;
            });
            let polled_once = poll_fn(|context| Poll::Ready(holder.as_mut().poll(context).is_pending())).await;
            assert!(polled_once && lock.is_locked());
        });
    }
    for task in 0..3u32 {
        let (lock, host, order) = (Rc::clone(&lock), host.clone(), Rc::clone(&order));
        simulation.spawn(async move {
            let mut guard = lock.lock().await;
            *guard += 1;
            host.sleep(10).await;
            order.borrow_mut().push((task, *guard, host.now_ns()));
        });
    }
    simulation.run();
    assert_eq!(simulation.unfinished_tasks(), 0, "no task is left waiting for the abandoned lock");
    let order = order.borrow();
    assert_eq!(order.iter().map(|&(_, count, _)| count).collect::<Vec<_>>(), [1, 2, 3], "one holder at a time");
    assert!(order.windows(2).all(|pair| pair[1].2 >= pair[0].2 + 10), "each waited for the one before: {order:?}");
}

#[test]
fn a_bounded_channel_holds_senders_back_and_notify_wakes_waiters() {
    let mut simulation = simulation();
    let host = simulation.host();
    let channel = Rc::new(Channel::bounded(2));
    let received = Rc::new(RefCell::new(Vec::new()));
    let sent_at = Rc::new(RefCell::new(Vec::new()));
    let notify = Rc::new(Notify::new());
    {
        let (channel, host, sent_at) = (Rc::clone(&channel), host.clone(), Rc::clone(&sent_at));
        simulation.spawn(async move {
            for item in 0..6u64 {
                channel.send(item).await.expect("open");
                assert!(channel.len() <= 2);
                sent_at.borrow_mut().push(host.now_ns());
            }
            channel.close();
        });
    }
    {
        let (channel, host, received, notify) =
            (Rc::clone(&channel), host.clone(), Rc::clone(&received), Rc::clone(&notify));
        simulation.spawn(async move {
            while let Some(item) = channel.recv().await {
                received.borrow_mut().push((item, host.now_ns()));
                host.sleep(100).await;
            }
            notify.notify_waiters();
        });
    }
    let woken_at = Rc::new(Cell::new(0));
    {
        let (notify, host, woken_at) = (Rc::clone(&notify), host.clone(), Rc::clone(&woken_at));
        simulation.spawn(async move {
            notify.notified().await;
            woken_at.set(host.now_ns());
        });
    }
    simulation.run();
    let received = received.borrow();
    assert_eq!(*received, [(0, 0), (1, 100), (2, 200), (3, 300), (4, 400), (5, 500)], "one a receive");
    assert_eq!(*sent_at.borrow(), [0, 0, 0, 100, 200, 300], "with two in the channel, the sender waits for room");
    assert_eq!(woken_at.get(), 600, "the waiter woke when the receiver finished");
}

#[test]
fn host_code_reads_what_it_wrote_through_the_device_queue() {
    let config = DeviceConfig::load("zn540", &["namespace.zones=4".into()]).expect("preset");
    let geometry = config.namespace.validate().expect("geometry");
    let store = MemoryStore::new(geometry.nsze_lba << geometry.lba_shift);
    let mut simulation = Simulation::new(Device::new(&config, store).expect("device"), Some(9));
    let host = simulation.host();
    let back = Rc::new(RefCell::new(Vec::new()));
    let out = Rc::clone(&back);
    simulation.spawn(async move {
        host.write(0, IoData::Bytes(vec![0x5a; 8192])).await.expect("write");
        *out.borrow_mut() = host.read(0, 2).await.expect("read");
    });
    simulation.run();
    assert_eq!(*back.borrow(), vec![0x5a; 8192]);
}

#[test]
fn join_all_runs_every_task_and_keeps_their_order() {
    let mut simulation = simulation();
    let host = simulation.host();
    let out = Rc::new(RefCell::new(Vec::new()));
    let sink = Rc::clone(&out);
    simulation.spawn(async move {
        let nap = |ns: u64| {
            let host = host.clone();
            async move {
                host.sleep(ns).await;
                (ns, host.now_ns())
            }
        };
        *sink.borrow_mut() = zonelab_runtime::sync::join_all(vec![nap(300), nap(100), nap(200)]).await;
    });
    simulation.run();
    assert_eq!(*out.borrow(), [(300, 300), (100, 100), (200, 200)], "in order given, each at its own time");
}

/// A sequential task's sleeps and commands move the clock themselves only while nothing else is due first:
/// beside another task's timers every event keeps its time and order.
#[test]
fn a_sequential_task_moves_the_clock_only_past_nothing() {
    let mut simulation = simulation();
    let events = Rc::new(RefCell::new(Vec::new()));
    let (host, log) = (simulation.host(), Rc::clone(&events));
    simulation.spawn_sequential(async move {
        for _ in 0..3 {
            host.sleep(100).await;
            log.borrow_mut().push(("sequential", host.now_ns()));
        }
        // Its completion comes after the other task's sleep ends, at 310, and alone after that.
        let blocks = 4096 >> host.geometry().lba_shift;
        for lba in [0, blocks] {
            host.write(lba, IoData::Zeros(4096)).await.expect("the write succeeds");
            log.borrow_mut().push(("written", host.now_ns()));
        }
        host.sleep(1).await;
        log.borrow_mut().push(("sequential", host.now_ns()));
    });
    let (host, log) = (simulation.host(), Rc::clone(&events));
    simulation.spawn(async move {
        host.sleep(150).await;
        log.borrow_mut().push(("plain", host.now_ns()));
        host.sleep(160).await;
        log.borrow_mut().push(("plain", host.now_ns()));
    });
    simulation.run();
    let events = events.borrow();
    let expected_start =
        [("sequential", 100), ("plain", 150), ("sequential", 200), ("sequential", 300), ("plain", 310)];
    assert_eq!(events[..5], expected_start);
    let (first, second) = (events[5], events[6]);
    assert!(first.0 == "written" && first.1 > 310, "the write takes device time: {first:?}");
    assert!(second.0 == "written" && second.1 > first.1, "{second:?}");
    assert_eq!(events[7], ("sequential", second.1 + 1));
}

/// A waker that only counts its wakes.
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A wait is listed once however often it is polled, and a poll with another waker lists that one too: the
/// notification wakes each waker it holds once, the latest included.
#[test]
fn a_notification_wakes_each_waker_of_a_wait_once() {
    let notify = Notify::new();
    let (first, second) = (Arc::new(Count(AtomicUsize::new(0))), Arc::new(Count(AtomicUsize::new(0))));
    let (first_waker, second_waker) = (Waker::from(Arc::clone(&first)), Waker::from(Arc::clone(&second)));
    let mut wait = pin!(notify.notified());
    for waker in [&first_waker, &first_waker, &second_waker, &second_waker] {
        assert!(wait.as_mut().poll(&mut Context::from_waker(waker)).is_pending());
    }
    notify.notify_waiters();
    assert_eq!(first.0.load(Ordering::SeqCst), 1, "polled twice with one waker, woken once");
    assert_eq!(second.0.load(Ordering::SeqCst), 1, "the waker of the latest poll is woken");
    assert!(wait.as_mut().poll(&mut Context::from_waker(&second_waker)).is_ready());
    notify.notify_waiters();
    assert_eq!(second.0.load(Ordering::SeqCst), 1, "a finished wait is no longer listed");
}

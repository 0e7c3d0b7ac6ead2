//! The same host code runs under both clocks: an mq-deadline scheduler with several writers into one zone, and
//! a ZWAL that appends, syncs and recovers its records, give the same results in virtual time and in real time (where a device thread
//! paces completions by the wall clock). No assertion here reads a duration off the wall clock; only the
//! ordering the runtime promises: no completion before its modelled time.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use zonelab_device::{DeviceBuilder, DeviceSpec, HostPath, StoreChoice};
use zonelab_host::{Scheduled, SchedulerKind, Wal, WalConfig, WalDesign};
use zonelab_runtime::sync::join_all;
use zonelab_runtime::{block_on, CommandQueue, HostExt, IoData, Output, QueuedCommand, RealTime, Simulation};
use zonelab_zns::Status;

fn builder() -> DeviceBuilder {
    DeviceBuilder::new(DeviceSpec::parse("preset:zn540,zones=4")).host(HostPath::Kernel).store(StoreChoice::Memory)
}

type Task = Pin<Box<dyn Future<Output = ()>>>;

type Results = Rc<RefCell<Vec<Result<(), Status>>>>;

/// Eight writers share a cursor into zone 0 through mq-deadline; the results of their writes.
fn scenario<Q: CommandQueue + Clone + 'static>(queue: Q) -> (Vec<Task>, Results) {
    let scheduled = Scheduled::new(queue, SchedulerKind::MqDeadline, 1280 << 10);
    let cursor = Rc::new(RefCell::new(0u64));
    let out = Rc::new(RefCell::new(Vec::new()));
    let mut tasks: Vec<Task> = Vec::new();
    for writer in 0..8u8 {
        let (queue, cursor, out) = (scheduled.clone(), Rc::clone(&cursor), Rc::clone(&out));
        tasks.push(Box::pin(async move {
            for _ in 0..4 {
                let lba = {
                    let mut next = cursor.borrow_mut();
                    *next += 1;
                    *next - 1
                };
                let result = queue.write(lba, IoData::Bytes(vec![writer + 1; 4096])).await;
                out.borrow_mut().push(result);
            }
        }));
    }
    (tasks, out)
}

fn check(results: &[Result<(), Status>], data: &[u8]) {
    assert_eq!(results.len(), 32);
    assert!(results.iter().all(Result::is_ok), "mq-deadline keeps one zone's writes in order: {results:?}");
    assert_eq!(data.len(), 32 * 4096);
    assert!(
        data.chunks(4096).all(|block| block.iter().all(|&byte| byte != 0 && byte == block[0])),
        "every block was written whole"
    );
}

#[test]
fn the_same_scheduler_scenario_passes_in_virtual_and_real_time() {
    let mut simulation = Simulation::over(builder().build().expect("device"), Some(5));
    let host = simulation.host();
    let (tasks, out) = scenario(host.clone());
    for task in tasks {
        simulation.spawn(task);
    }
    simulation.run();
    let read_back = Rc::new(RefCell::new(Vec::new()));
    let sink = Rc::clone(&read_back);
    simulation.spawn(async move { *sink.borrow_mut() = host.read(0, 32).await.expect("read") });
    simulation.run();
    check(&out.borrow(), &read_back.borrow());

    let realtime = RealTime::start(builder()).expect("real-time device");
    let host = realtime.host();
    let (tasks, out) = scenario(host.clone());
    block_on(join_all(tasks));
    let data = block_on(host.read(0, 32)).expect("read");
    check(&out.borrow(), &data);
    let stopped = realtime.stop();
    assert_eq!(stopped.flushed, Ok(()));
    assert_eq!(stopped.counters.bytes_written, 32 * 4096);
    assert!(stopped.pacing.completions >= 2, "every write command and the read completed through the pacer");
}

#[test]
fn no_completion_arrives_before_its_modelled_time() {
    // The modelled latency of the first command on a fresh device, in virtual time.
    let mut simulation = Simulation::over(builder().build().expect("device"), None);
    let host = simulation.host();
    let latency = Rc::new(RefCell::new(0));
    let seen = Rc::clone(&latency);
    simulation.spawn(async move {
        let start = host.now_ns();
        host.write(0, IoData::Zeros(128 << 10)).await.expect("write");
        *seen.borrow_mut() = host.now_ns() - start;
    });
    simulation.run();
    let modelled_ns = *latency.borrow();
    assert!(modelled_ns > 0);

    let realtime = RealTime::start(builder()).expect("real-time device");
    let host = realtime.host();
    let start = host.now_ns();
    block_on(host.write(0, IoData::Zeros(128 << 10))).expect("write");
    let observed_ns = host.now_ns() - start;
    assert!(observed_ns >= modelled_ns, "completed after {observed_ns} ns, modelled {modelled_ns} ns");
    let slept_from = host.now_ns();
    block_on(host.sleep(200_000));
    assert!(host.now_ns() - slept_from >= 200_000, "a sleep ends no earlier than asked");
    let stopped = realtime.stop();
    assert_eq!(stopped.pacing.completions, 1);
    assert!(stopped.pacing.errors_ns.len() == 1);
}

#[test]
fn a_device_that_cannot_open_is_an_error_not_a_thread_panic() {
    let error = RealTime::start(DeviceBuilder::new(DeviceSpec::parse("/nonexistent/zonelab-image")))
        .err()
        .expect("no such image");
    assert!(error.to_string().contains("/nonexistent/zonelab-image"), "{error}");
}

/// ZWAL with zone appends at QD 8: appends 120 records (syncing every 10), then a second log on the same zones
/// recovers them.
async fn wal_round_trip<Q: CommandQueue + Clone + 'static>(queue: Q) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let config = WalConfig {
        design: WalDesign::Zwal,
        zones: vec![1, 2],
        buffer_bytes: 8192,
        queue_depth: 8,
        barrier_bytes: 65536,
        recovery_read_bytes: 0,
    };
    let records: Vec<Vec<u8>> =
        (0..120u32).map(|index| vec![index as u8; 100 + (index as usize * 37) % 3000]).collect();
    let mut wal = Wal::new(queue.clone(), config.clone()).expect("configuration");
    for (index, record) in records.iter().enumerate() {
        wal.append(record).await.expect("append");
        if index % 10 == 9 {
            wal.sync().await.expect("sync");
        }
    }
    let recovered = Wal::new(queue, config).expect("configuration").recover().await.expect("recover");
    (records, recovered)
}

#[test]
fn the_same_wal_appends_and_recovers_in_virtual_and_real_time() {
    let spdk = || builder().host(HostPath::Spdk);
    let mut simulation = Simulation::over(spdk().build().expect("device"), Some(11));
    let host = simulation.host();
    let out = Rc::new(RefCell::new(None));
    let sink = Rc::clone(&out);
    simulation.spawn(async move { *sink.borrow_mut() = Some(wal_round_trip(host).await) });
    simulation.run();
    let (records, recovered) = out.borrow_mut().take().expect("the simulation ran the WAL");
    assert_eq!(recovered, records, "virtual time: every synced record comes back, in order");

    let realtime = RealTime::start(spdk()).expect("real-time device");
    let (records, recovered) = block_on(wal_round_trip(realtime.host()));
    assert_eq!(recovered, records, "real time: every synced record comes back, in order");
    assert_eq!(realtime.stop().flushed, Ok(()));
}

/// A host thread that finds the device free executes its command itself: on a device with no flash time the
/// completion is there when the submission returns. Commands of one queue pair stay in order whichever way each
/// goes (a read after a write of the same blocks sees the write). The device thread takes the engine for its
/// rounds, so a submission may find it busy and queue instead: the test asks for one inline completion in 200.
#[test]
fn a_free_device_completes_an_instant_command_on_the_submitting_thread() {
    let instant = DeviceBuilder::new(DeviceSpec::parse("preset:instant,zones=4"))
        .host(HostPath::Kernel)
        .store(StoreChoice::Memory);
    let realtime = RealTime::start(instant).expect("real-time device");
    let host = realtime.host();
    let mut completed_on_submission = 0;
    for round in 0..200u64 {
        let data = vec![round as u8; 4096];
        let lba = round;
        let write = host.submit_pending(QueuedCommand::Write { slba: lba, data: IoData::Bytes(data.clone()) });
        let read = host.submit_pending(QueuedCommand::Read { slba: lba, nlb: 1, keep: true });
        let written = match write.try_take() {
            Some(result) => {
                completed_on_submission += 1;
                result
            }
            None => block_on(write),
        };
        assert!(written.is_ok(), "round {round}: {written:?}");
        match block_on(read) {
            Ok(Output::Data(bytes)) => assert_eq!(*bytes, data, "round {round}: the read sees the write before it"),
            other => panic!("round {round}: read gave {other:?}"),
        }
    }
    assert!(completed_on_submission > 0, "no command completed on the submitting thread");
    let stopped = realtime.stop();
    assert_eq!(stopped.pacing.completions, 400, "every command counts, however it completed");
}

/// A host may address either namespace of a device under both clocks: the ZN540's conventional namespace (nsid 1)
/// takes writes anywhere while the zoned one (nsid 2, the attached one) keeps its rules, and each keeps its data.
#[test]
fn a_host_reaches_each_namespace_of_a_device_under_both_clocks() {
    async fn scenario<Q: CommandQueue>(zoned: Q, conventional: Q) -> (Vec<u8>, Vec<u8>, Result<(), Status>) {
        assert_eq!(conventional.geometry().kind, zonelab_zns::NamespaceKind::Conventional);
        assert_eq!(zoned.geometry().kind, zonelab_zns::NamespaceKind::Zoned);
        conventional.write(777, IoData::Bytes(vec![1; 4096])).await.expect("anywhere on nsid 1");
        zoned.write(0, IoData::Bytes(vec![2; 4096])).await.expect("at the write pointer on nsid 2");
        let off_pointer = zoned.write(777, IoData::Bytes(vec![3; 4096])).await;
        let read = |slba| QueuedCommand::Read { slba, nlb: 1, keep: true };
        let (Ok(Output::Data(a)), Ok(Output::Data(b))) =
            (conventional.submit(read(777)).await, zoned.submit(read(0)).await)
        else {
            panic!("reads return data")
        };
        (a.to_vec(), b.to_vec(), off_pointer)
    }
    let check = |(conventional, zoned, off_pointer): (Vec<u8>, Vec<u8>, Result<(), Status>)| {
        assert_eq!((conventional[0], zoned[0]), (1, 2), "each namespace keeps its own data");
        assert_eq!(off_pointer.err(), Some(Status::ZoneInvalidWrite));
    };
    let mut simulation = Simulation::over(builder().build().expect("device"), None);
    let host = simulation.host();
    let conventional = host.on_namespace(1).expect("nsid 1");
    assert!(host.on_namespace(3).is_none(), "no namespace 3");
    let outcome = Rc::new(RefCell::new(None));
    let out = Rc::clone(&outcome);
    simulation.spawn(async move { *out.borrow_mut() = Some(scenario(host, conventional).await) });
    simulation.run();
    check(outcome.borrow_mut().take().expect("ran"));

    let runtime = RealTime::start(builder()).expect("device");
    let host = runtime.host();
    let conventional = host.on_namespace(1).expect("nsid 1");
    check(block_on(scenario(host, conventional)));
    runtime.stop().flushed.expect("flushed");
}

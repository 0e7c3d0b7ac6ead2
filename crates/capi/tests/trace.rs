//! `trace=FILE` in a device's spec: the C library and the file system calls the RocksDB plugin makes draw what
//! each thread did, joined by arrows to the device's commands, in the Perfetto trace written when the device
//! closes.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;

use serde_json::Value;
use zonelab::*;

/// The trace at `path`: its events, and the name of each track (by process and thread id).
fn read_trace(path: &std::path::Path) -> (Vec<Value>, HashMap<(u64, u64), String>) {
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("trace written")).expect("JSON");
    let events = trace["traceEvents"].as_array().expect("events").clone();
    let names = events
        .iter()
        .filter(|event| event["ph"] == "M" && event["name"] == "thread_name")
        .map(|event| {
            let key = (event["pid"].as_u64().expect("pid"), event["tid"].as_u64().expect("tid"));
            (key, event["args"]["name"].as_str().expect("name").to_string())
        })
        .collect();
    (events, names)
}

/// For each flow arrow, the slices it leaves and lands on, each as (pid, tid, name, start in ns).
type Arrow = ((u64, u64, String, u64), (u64, u64, String, u64));

fn arrows(events: &[Value]) -> Vec<Arrow> {
    let mut ends: HashMap<u64, [Option<&Value>; 2]> = HashMap::new();
    for event in events.iter().filter(|event| event["ph"] == "s" || event["ph"] == "f") {
        let at = usize::from(event["ph"] == "f");
        ends.entry(event["id"].as_u64().expect("id")).or_default()[at] = Some(event);
    }
    let ns = |value: &Value| (value.as_f64().expect("ts") * 1000.0).round() as u64;
    // The slice of the end's track that holds the end.
    let slice_at = |end: &Value| {
        let (pid, tid, at) = (&end["pid"], &end["tid"], ns(&end["ts"]));
        let holds = |slice: &&Value| {
            let on_track = slice["ph"] == "X" && &slice["pid"] == pid && &slice["tid"] == tid;
            on_track && (ns(&slice["ts"])..=ns(&slice["ts"]) + ns(&slice["dur"])).contains(&at)
        };
        let slice = events.iter().find(holds).expect("an arrow's end is on a slice");
        let name = slice["name"].as_str().expect("name").to_string();
        (pid.as_u64().expect("pid"), tid.as_u64().expect("tid"), name, ns(&slice["ts"]))
    };
    ends.values().map(|[from, to]| (slice_at(from.expect("leaves")), slice_at(to.expect("lands")))).collect()
}

/// Each mode's device draws a track per thread that issued I/O, a slice per I/O (synchronous calls and polled
/// submissions alike), and an arrow from each write to the command it became on its zone's track.
#[test]
fn a_traced_device_draws_each_threads_io_joined_to_its_commands() {
    for mode in [ZL_MODE_VIRTUAL, ZL_MODE_REALTIME] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c.json");
        let spec = CString::new(format!("preset:zn540,zones=8,trace={}", path.display())).expect("spec");
        let mut handle = 0;
        // SAFETY: a NUL-terminated spec and a writable handle.
        assert_eq!(unsafe { zl_open(spec.as_ptr(), mode, &mut handle) }, ZL_OK);
        let mut geometry = zl_geometry::default();
        // SAFETY: a writable geometry.
        assert_eq!(unsafe { zl_get_geometry(handle, &mut geometry) }, ZL_OK);
        let zone = geometry.zone_size_lba;
        let write_zone = move |index: u64| {
            let block = vec![index as u8; geometry.lba_size_bytes as usize];
            for offset in 0..4 {
                // SAFETY: a buffer of one block.
                assert_eq!(unsafe { zl_write(handle, index * zone + offset, 1, block.as_ptr()) }, ZL_OK);
            }
        };
        // A virtual-time handle is used from the thread that opened it; a real-time one from two more.
        if mode == ZL_MODE_REALTIME {
            let writers: Vec<_> = (0..2).map(|index| std::thread::spawn(move || write_zone(index))).collect();
            writers.into_iter().for_each(|writer| writer.join().expect("writer"));
        } else {
            write_zone(0);
            write_zone(1);
        }
        let mut data = vec![0u8; geometry.lba_size_bytes as usize];
        let append = zl_io { opcode: ZL_OP_APPEND, nlb: 1, slba: 2 * zone, buf: data.as_mut_ptr(), action: 0, all: 0 };
        for tag in 0..3 {
            // SAFETY: `append` holds one block.
            assert_eq!(unsafe { zl_submit(handle, &append, tag) }, ZL_OK);
        }
        let (mut completions, mut reaped) = ([zl_completion::default(); 3], 0);
        while reaped < 3 {
            let mut count = 0;
            // SAFETY: room for the completions not yet reaped, and a writable count.
            let polled = unsafe { zl_poll(handle, completions[reaped..].as_mut_ptr(), 3 - reaped as u32, &mut count) };
            assert_eq!(polled, ZL_OK);
            reaped += count as usize;
        }
        // SAFETY: room for one block.
        assert_eq!(unsafe { zl_read(handle, 0, 1, data.as_mut_ptr()) }, ZL_OK);
        assert_eq!(zl_close(handle), ZL_OK);

        let (events, names) = read_trace(&path);
        let slices: Vec<&Value> = events.iter().filter(|event| event["ph"] == "X").collect();
        // zl_close flushes a virtual-time device through the queue, a real-time one as its thread stops.
        let ios: Vec<&&Value> = slices.iter().filter(|slice| slice["pid"] == 1 && slice["name"] != "sync").collect();
        let count = |name: &str| ios.iter().filter(|slice| slice["name"] == name).count();
        assert_eq!((count("write"), count("read"), ios.len()), (11, 1, 12), "mode {mode}: 8 writes, 3 appends, a read");
        // A track per thread, named with its number (its lanes, where its I/Os overlap, `#2`...).
        let track =
            |slice: &&&Value| names[&(1, slice["tid"].as_u64().expect("tid"))].split(" #").next().map(str::to_string);
        let threads: HashSet<String> = ios.iter().filter_map(track).collect();
        assert_eq!(threads.len(), if mode == ZL_MODE_REALTIME { 3 } else { 1 }, "{threads:?}");
        assert!(threads.iter().all(|name| name.contains("thread ")), "{threads:?}");
        // Each I/O has arrows to a command of its kind on its zone's track (appends in flight together to one
        // zone cannot be told apart, so each points at all of them), and every command has one from its I/O.
        let from_ios: Vec<Arrow> =
            arrows(&events).into_iter().filter(|((pid, ..), (_, _, name, _))| *pid == 1 && name != "flush").collect();
        let sources: HashSet<&(u64, u64, String, u64)> = from_ios.iter().map(|(from, _)| from).collect();
        assert_eq!(sources.len(), 12, "mode {mode}: every I/O has an arrow");
        for (_, (pid, tid, landed_on, _)) in &from_ios {
            assert_eq!(*pid, 2, "mode {mode}: an I/O's arrow lands on a command");
            assert!(["write", "zone append", "read"].contains(&landed_on.as_str()), "mode {mode}: {landed_on}");
            assert!(names[&(2, *tid)].starts_with("zone "), "{}", names[&(2, *tid)]);
        }
        let on_zone = |zone: u64| {
            let track = format!("zone {zone}");
            let landings =
                from_ios.iter().filter(|(_, (_, tid, _, _))| names[&(2, *tid)].split(" #").next() == Some(&track));
            landings.map(|(_, (_, tid, _, ns))| (*tid, *ns)).collect::<HashSet<_>>().len()
        };
        assert_eq!((on_zone(0), on_zone(1), on_zone(2)), (5, 4, 3), "mode {mode}: the commands each zone took");
        assert!(events.iter().any(|event| event["ph"] == "M" && event["args"]["name"] == "C library"));
    }
}

/// The RocksDB plugin's calls: each on its thread's track, named, and a sync's arrows reach the writes it made.
#[test]
fn a_traced_file_system_draws_its_calls_and_the_writes_they_caused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fs.json");
    let spec = CString::new(format!("preset:zn540,zones=32,trace={}", path.display())).expect("spec");
    let mut handle = 0;
    // SAFETY: NUL-terminated strings and a writable handle.
    assert_eq!(unsafe { zlfs_mount(spec.as_ptr(), c"scheduler=mq-deadline".as_ptr(), &mut handle) }, 0);
    let mut file = 0;
    // SAFETY: a NUL-terminated name and a writable id.
    assert_eq!(unsafe { zlfs_open_write(handle, c"000007.log".as_ptr(), 2, 0, &mut file) }, 0);
    let record = vec![5u8; 64 << 10];
    for _ in 0..4 {
        // SAFETY: `record` is readable.
        assert_eq!(unsafe { zlfs_append(handle, file, record.as_ptr(), record.len()) }, 0);
        assert_eq!(zlfs_sync(handle, file), 0);
    }
    assert_eq!(zlfs_close(handle, file), 0);
    assert_eq!(zlfs_unmount(handle), 0);

    let (events, names) = read_trace(&path);
    let calls: Vec<&Value> = events.iter().filter(|event| event["ph"] == "X" && event["pid"] == 1).collect();
    let count = |name: &str| calls.iter().filter(|slice| slice["name"] == name).count();
    assert_eq!((count("open for writing"), count("append"), count("sync"), count("close")), (1, 4, 4, 1));
    let tracks: HashSet<&String> = calls
        .iter()
        .filter(|slice| slice["name"].as_str().is_some_and(|name| !name.starts_with("commit of ")))
        .map(|slice| &names[&(1, slice["tid"].as_u64().expect("tid"))])
        .collect();
    assert_eq!(tracks.len(), 1, "one calling thread: {tracks:?}");
    // The syncs wrote the data: their arrows land on write commands of the device.
    let from_calls: Vec<Arrow> = arrows(&events).into_iter().filter(|((pid, ..), _)| *pid == 1).collect();
    let syncs_writing: HashSet<u64> = from_calls
        .iter()
        .filter(|((_, _, call, _), (pid, _, command, _))| call == "sync" && *pid == 2 && command == "write")
        .map(|((_, _, _, start_ns), _)| *start_ns)
        .collect();
    assert_eq!(syncs_writing.len(), 4, "each sync's arrows reach the writes of its data: {from_calls:?}");
    assert!(events.iter().any(|event| event["ph"] == "M" && event["args"]["name"] == "RocksDB plugin"));
    // zonedfs's journal commits (the creation, each sync's extents) on a track of their own.
    let commits =
        calls.iter().filter(|slice| slice["name"].as_str().is_some_and(|name| name.starts_with("commit of ")));
    let tracks: HashSet<&String> = commits.map(|slice| &names[&(1, slice["tid"].as_u64().expect("tid"))]).collect();
    assert_eq!(tracks.into_iter().collect::<Vec<_>>(), [&"zonedfs journal".to_string()]);
}

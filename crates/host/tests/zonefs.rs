//! The zonefs-like file layer on a simulated device: sizes follow write pointers, writes go at the end,
//! truncate resets or finishes, zonefs's errors come back with its errnos, and concurrent appends to one file
//! land one after another.

use std::cell::RefCell;
use std::rc::Rc;

use zonelab_device::{Device, DeviceConfig};
use zonelab_host::{FsError, ZoneFs};
use zonelab_runtime::{Host, IoData, Simulation};
use zonelab_zns::MemoryStore;

/// A small device with real data: 8 zones of 1 MiB, 768 KiB capacity, 4 KiB blocks.
fn simulation() -> Simulation<MemoryStore> {
    let overrides: Vec<String> =
        ["namespace.zones=8", "namespace.zone-size=\"1MiB\"", "namespace.zone-cap=\"768KiB\"", "namespace.max-open=3"]
            .map(String::from)
            .to_vec();
    let config = DeviceConfig::load("instant", &overrides).expect("preset");
    let geometry = config.namespace.validate().expect("geometry");
    let store = MemoryStore::new(geometry.nsze_lba << geometry.lba_shift);
    Simulation::new(Device::new(&config, store).expect("device"), Some(1))
}

/// Mounts the file system in the simulation and runs `body` on it to the end.
fn with_fs<T: 'static>(
    simulation: &mut Simulation<MemoryStore>,
    body: impl AsyncFnOnce(Rc<ZoneFs<Host<MemoryStore>>>) -> T + 'static,
) -> T {
    let out = Rc::new(RefCell::new(None));
    let (sink, host) = (Rc::clone(&out), simulation.host());
    simulation.spawn(async move {
        let fs = Rc::new(ZoneFs::mount(host).await.expect("mount"));
        *sink.borrow_mut() = Some(body(fs).await);
    });
    simulation.run();
    let result = out.borrow_mut().take().expect("the body ran to the end");
    result
}

#[test]
fn files_grow_at_their_end_and_truncate_resets_or_finishes_them() {
    let mut simulation = simulation();
    with_fs(&mut simulation, async |fs| {
        assert_eq!((fs.files(), fs.capacity()), (8, 768 << 10));
        assert_eq!(fs.append(2, IoData::Bytes(vec![7; 8192])).await, Ok(0));
        assert_eq!(fs.append(2, IoData::Bytes(vec![9; 4096])).await, Ok(8192));
        assert_eq!(fs.size(2), Ok(12288));
        let read = fs.read(2, 4096, 8192).await.expect("read");
        assert_eq!((&read[..4096], &read[4096..]), (&[7u8; 4096][..], &[9u8; 4096][..]));
        assert_eq!(fs.read(2, 10_000, 100_000).await.expect("short read").len(), 12288 - 10_000, "short at EOF");
        assert!(fs.read(2, 12288, 10).await.expect("read at EOF").is_empty());

        let not_at_end = fs.write(2, 4096, IoData::Zeros(4096)).await.expect_err("not at the end");
        assert_eq!((not_at_end.errno(), &not_at_end), (22, &FsError::NotAtEnd { file: 2, offset: 4096, size: 12288 }));
        assert_eq!(fs.append(2, IoData::Zeros(1000)).await.expect_err("misaligned").errno(), 22);
        assert_eq!(fs.truncate(2, 4096).await.expect_err("bad truncate").errno(), 1);
        // To the size it has, any size: a no-op, as zonefs_inode_setattr makes it.
        fs.truncate(2, 12288).await.expect("a truncate to the current size");
        assert_eq!(fs.size(2), Ok(12288));
        assert_eq!(fs.append(8, IoData::Zeros(4096)).await.expect_err("no such file").errno(), 2);

        fs.truncate(2, 768 << 10).await.expect("finish");
        assert_eq!(fs.size(2), Ok(768 << 10));
        fs.truncate(2, 768 << 10).await.expect("a truncate to the size it has is no command");
        assert_eq!(fs.append(2, IoData::Zeros(4096)).await.expect_err("at the capacity").errno(), 27);
        fs.truncate(2, 0).await.expect("reset");
        assert_eq!(fs.size(2), Ok(0));
        assert!(fs.read(2, 0, 4096).await.expect("read").is_empty());
        fs.append(2, IoData::Zeros(4096)).await.expect("append");
        assert_eq!(fs.write(2, 4096, IoData::Zeros(768 << 10)).await, Ok((768 << 10) - 4096), "cut short");
        assert_eq!(fs.size(2), Ok(768 << 10));
        let stats = fs.stats();
        assert_eq!((stats.writes, stats.resets, stats.finishes), (4, 1, 1));
    });
}

#[test]
fn a_remount_takes_sizes_from_the_write_pointers() {
    let mut simulation = simulation();
    with_fs(&mut simulation, async |fs| {
        fs.append(0, IoData::Zeros(64 << 10)).await.expect("append");
        fs.truncate(1, 768 << 10).await.expect("finish");
        fs.fsync(0).await.expect("fsync");
    });
    let sizes =
        with_fs(&mut simulation, async |fs| (0..3).map(|file| fs.size(file).expect("size")).collect::<Vec<_>>());
    assert_eq!(sizes, vec![64 << 10, 768 << 10, 0]);
}

#[test]
fn concurrent_appends_to_one_file_land_one_after_another() {
    let mut simulation = simulation();
    let fs = with_fs(&mut simulation, async |fs| fs);
    let landed = Rc::new(RefCell::new(Vec::new()));
    for task in 0..4u8 {
        let (fs, landed) = (Rc::clone(&fs), Rc::clone(&landed));
        simulation.spawn(async move {
            for _ in 0..3 {
                let at = fs.append(5, IoData::Bytes(vec![task; 4096])).await.expect("append");
                landed.borrow_mut().push(at);
            }
        });
    }
    simulation.run();
    let mut offsets = landed.borrow().clone();
    offsets.sort_unstable();
    assert_eq!(offsets, (0..12).map(|block| block * 4096).collect::<Vec<u64>>(), "12 appends, no gap, no overlap");
    assert_eq!(fs.size(5), Ok(12 * 4096));
    let data = with_fs(&mut simulation, async |fs| fs.read(5, 0, 12 * 4096).await.expect("read"));
    for (block, chunk) in data.chunks(4096).enumerate() {
        assert!(chunk.iter().all(|&byte| byte == chunk[0] && byte < 4), "block {block} is whole: {:?}", &chunk[..8]);
    }
}

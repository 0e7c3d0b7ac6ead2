//! The FTL on the ZN540's flash model: garbage collection takes the same dies as host writes, so once the
//! space is full writes wait for it, and its reads, programs and erases are counted under their own sources.

use zonelab_device::DeviceConfig;
use zonelab_ftl::{Ftl, FtlConfig};
use zonelab_media::{FlashModel, FlashOp, OpSource};

/// A 512 MiB space at 25 % over-provisioning, in blocks of one flash block on each die of one channel.
fn ftl() -> (Ftl, FlashModel) {
    ftl_over_provisioned(0.25)
}

/// A 512 MiB space at `over_provisioning`, in blocks of one flash block on each die of one channel.
fn ftl_over_provisioned(over_provisioning: f64) -> (Ftl, FlashModel) {
    let mut media = DeviceConfig::load("zn540", &[]).expect("preset").media;
    media.nand.channels_per_zone = 1;
    let unit_bytes = media.nand.program_unit_bytes;
    let block_bytes = u64::from(media.planes_per_zone()) * u64::from(media.nand.block_program_units) * unit_bytes;
    let config = FtlConfig::with_over_provisioning(
        512 << 20,
        over_provisioning,
        (block_bytes / 4096) as u32,
        (unit_bytes / 4096) as u32,
    );
    let blocks = config.blocks;
    (Ftl::new(config).expect("config"), FlashModel::new(media, blocks, block_bytes))
}

/// QD 1 random writes from `start`; returns each write's latency and the time reached.
fn random_writes((ftl, flash): &mut (Ftl, FlashModel), start: u64, count: u64, seed: u64) -> (Vec<u64>, u64) {
    let pages = ftl.config().logical_pages;
    let mut now = start;
    let mut latencies = Vec::new();
    for i in 0..count {
        let lpn = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed) % pages;
        let done = ftl.write(flash, now, lpn, 0).expect("write");
        latencies.push(done - now);
        now = done + 1000;
    }
    (latencies, now)
}

#[test]
fn once_the_space_is_full_writes_wait_for_garbage_collection_on_the_same_dies() {
    let mut fresh = ftl();
    let pages = fresh.0.config().logical_pages;
    let (before, _) = random_writes(&mut fresh, 0, pages / 2, 1);
    assert_eq!(fresh.0.counters().gc_pages_moved, 0, "half the space written: nothing to collect yet");

    let mut full = ftl();
    full.0.precondition((0..pages).chain((0..pages).map(|i| (i * 7919) % pages))).expect("precondition");
    let (after, _) = random_writes(&mut full, 0, pages / 2, 1);
    let counters = *full.0.counters();
    assert!(counters.gc_pages_moved > 0 && counters.foreground_collections > 0, "{counters:?}");
    let worst = |latencies: &[u64]| latencies.iter().copied().max().unwrap_or(0);
    assert!(
        worst(&after) > 10 * worst(&before),
        "a write that waits for a collection waits for its copies and erase: {} ns against {} ns",
        worst(&after),
        worst(&before)
    );
    let mean = |latencies: &[u64]| latencies.iter().sum::<u64>() as f64 / latencies.len() as f64;
    assert!(mean(&after) > mean(&before), "{} against {}", mean(&after), mean(&before));
    // The flash counted what the collection did under its own sources, page for page.
    let flash = full.1.counters();
    let pages_per_unit = u64::from(full.0.config().pages_per_unit);
    assert!(flash.get(FlashOp::PageProgram, OpSource::GcWrite) > 0);
    assert!(flash.get(FlashOp::PageRead, OpSource::GcRead) > 0);
    assert!(flash.get(FlashOp::BlockErase, OpSource::GcErase) >= counters.gc_blocks_erased);
    assert!(
        flash.get(FlashOp::PageProgram, OpSource::HostWrite) <= counters.host_pages_written / pages_per_unit * 3 + 3,
        "host programs are whole units of host pages"
    );
}

#[test]
fn collection_reads_each_page_it_moves_and_keeps_pace_with_the_host() {
    // At 7 % a victim frees a tenth of a block or less: a host that waited to need a block would then wait for
    // ten collections at once.
    let mut full = ftl_over_provisioned(0.07);
    let pages = full.0.config().logical_pages;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % pages
    };
    full.0.precondition((0..pages).chain((0..pages).map(|_| uniform()))).expect("precondition");
    let (mut now, mut collections, mut paced) = (0, 0, Vec::new());
    let mut since = 0u64;
    for i in 0..pages {
        now = full.0.write(&mut full.1, now, uniform(), 0).expect("write") + 1000;
        let counted = full.0.counters().foreground_collections;
        assert!(counted - collections <= 1, "write {i} started {} collections at once", counted - collections);
        if counted > collections {
            paced.push(since);
            since = 0;
        } else {
            since += 1;
        }
        collections = counted;
    }
    // Between two collections the host writes about what one frees, far less than a block.
    let block = u64::from(full.0.config().pages_per_block);
    assert!(paced.len() > 10, "{} collections", paced.len());
    assert!(paced.iter().skip(1).all(|&writes| writes < block / 2), "host writes between collections: {paced:?}");
    // Every moved page is sensed and crosses the channel: the collection reads about as many flash pages as it
    // programs (one flash page per unit would be a third of them on the ZN540's three-page units).
    let flash = full.1.counters();
    let (read, programmed) =
        (flash.get(FlashOp::PageRead, OpSource::GcRead), flash.get(FlashOp::PageProgram, OpSource::GcWrite));
    assert!(read * 10 >= programmed * 9, "{read} flash pages read for {programmed} programmed");
}

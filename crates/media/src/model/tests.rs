//! The flash model's unit tests.

use super::*;
use crate::{ControllerConfig, EnergyConfig, MappingConfig, NandConfig};

const UNIT: u64 = 16384;

/// 2 channels x 2 dies, one plane each; zones stripe over all 4 dies in 16 KiB units; 4-unit blocks.
pub(super) fn config() -> MediaConfig {
    MediaConfig {
        nand: NandConfig {
            channels: 2,
            dies_per_channel: 2,
            planes_per_die: 1,
            channels_per_zone: 2,
            dies_per_channel_per_zone: 2,
            program_unit_bytes: UNIT,
            block_program_units: 4,
            read_latency_us: 50.0,
            read_page_factors: Vec::new(),
            program_latency_us: 500.0,
            erase_latency_us: 3000.0,
            seal_latency_us: 0.0,
            suspend_latency_us: 0.0,
            resume_before_suspend_us: 0.0,
            channel_mib_per_s: 1000.0 * 1_000_000.0 / 1_048_576.0, // 1000 MB/s: one nanosecond per byte
            erase_concurrency: 0,
            erase_timing: crate::EraseTiming::Dies,
            stripe_start: crate::StripeStart::FirstDie,
            sense_every_read: false,
            transfer_whole_pages: false,
            read_retries_per_1000_pe: 0.0,
        },
        controller: ControllerConfig {
            host_link_mib_per_s: 0.0,
            read_firmware_us: 10.0,
            write_firmware_us: 5.0,
            write_firmware_per_4k_us: 0.0,
            append_extra_us: 2.0,
            implicit_open_extra_us: 0.0,
            write_fetch_setup_us: 0.0,
            write_fetch_mib_per_s: 0.0,
            read_command_us: 1.0,
            read_command_per_4k_us: 0.0,
            write_command_us: 4.0,
            append_command_us: 6.0,
            management_command_us: 0.0,
            command_time_cv: 0.0,
            idle_slice_us: 0.0,
            write_mib_per_s: 0.0,
            read_mib_per_s: 0.0,
            write_drain_unit_bytes: 0,
            write_drain_buffer_bytes: 0,
            zone_write_buffer_bytes: 4 * UNIT,
            read_ahead_bytes: 0,
            early_completion: true,
            aggregate_program_units: true,
            append_maps_post_write_pointer: false,
            open_us: 0.0,
            close_us: 0.0,
            close_written_us: 0.0,
            reset_us: 100.0,
            finish_us: 0.0,
        },
        energy: EnergyConfig { page_bytes: UNIT, page_read_nj: 10.0, page_program_nj: 100.0, block_erase_nj: 1000.0 },
        mapping: MappingConfig::default(),
    }
}

fn model(config: MediaConfig) -> FlashModel {
    config.validate().expect("valid test configuration");
    FlashModel::new(config, 4, 64 * UNIT)
}

#[test]
fn a_read_is_firmware_then_sense_then_channel() {
    let mut flash = model(config());
    flash.precondition(0, 64 * UNIT);
    let done = flash.read(1_000_000, 0, 0, 4096);
    assert_eq!(done - 1_000_000, 10_000 + 50_000 + 4096, "fw 10 us + tR 50 us + 4096 B at 1 ns/B");
    assert_eq!(flash.counters().get(FlashOp::PageRead, OpSource::HostRead), 1);
}

#[test]
fn a_page_still_in_the_register_is_read_without_sensing() {
    let mut flash = model(config());
    flash.precondition(0, 64 * UNIT);
    let first = flash.read(0, 0, 0, 4096);
    let same_page = flash.read(first, 0, 4096, 4096);
    assert_eq!(same_page - first, 10_000 + 4096, "firmware and transfer only");
    assert_eq!(flash.counters().get(FlashOp::PageRead, OpSource::HostRead), 1);
    flash.write(same_page, 1, 0, UNIT, WriteKind::Write, false);
    flash.reset(same_page, 0);
    flash.precondition(0, 64 * UNIT);
    let after_erase = flash.read(10_000_000_000, 0, 4096, 4096);
    assert_eq!(after_erase - 10_000_000_000, 10_000 + 50_000 + 4096, "an erase empties the register");
}

/// A fresh device reads without retries; blocks erased 2,500 times at one retry per 1000 cycles need 2 or 3
/// retries a read, 2.5 on average, each a sense and a transfer more.
#[test]
fn worn_blocks_need_read_retries() {
    let mut config = config();
    config.nand.read_retries_per_1000_pe = 1.0;
    let mut flash = model(config);
    flash.precondition(0, 64 * UNIT);
    assert_eq!(flash.read(0, 0, 0, 4096), 10_000 + 50_000 + 4096, "never erased: no retry");
    let blocks = flash.wear.erase_counts().len();
    flash.wear.restore(&vec![2_500; blocks], 2_500 * blocks as u64, 0).expect("counts of this geometry");
    let reads = 1_000u64;
    let mut retries = Vec::new();
    for read in 0..reads {
        let at = 1_000_000_000 * (read + 1);
        let took = flash.read(at, 0, (read % 63 + 1) * UNIT, 4096) - at;
        retries.push((took - 10_000 - 50_000 - 4096) as f64 / (50_000.0 + 4096.0));
    }
    assert!(retries.iter().all(|&r| r == 2.0 || r == 3.0), "whole retries of tR and a transfer: {retries:?}");
    let mean = retries.iter().sum::<f64>() / reads as f64;
    assert!((mean - 2.5).abs() < 0.1, "mean retries {mean}");
}

/// The emulators' reads (ConfZNS, NVMeVirt): every read senses, and ConfZNS moves whole pages.
#[test]
fn an_emulators_read_senses_every_time_and_may_move_whole_pages() {
    let mut config = config();
    config.nand.sense_every_read = true;
    let mut flash = model(config.clone());
    flash.precondition(0, 64 * UNIT);
    let first = flash.read(0, 0, 0, 4096);
    let same_page = flash.read(first, 0, 4096, 4096);
    assert_eq!(same_page - first, 10_000 + 50_000 + 4096, "sensed again");
    assert_eq!(flash.counters().get(FlashOp::PageRead, OpSource::HostRead), 2);

    config.nand.transfer_whole_pages = true;
    config.energy.page_bytes = UNIT / 4;
    let mut flash = model(config);
    flash.precondition(0, 64 * UNIT);
    let page = UNIT / 4;
    assert_eq!(flash.read(0, 0, 0, 4096), 10_000 + 50_000 + page, "a 4 KiB read moves its whole page");
    let at = 1_000_000_000;
    assert_eq!(flash.read(at, 0, page - 4096, 8192) - at, 10_000 + 50_000 + 2 * page, "two pages touched, two moved");
}

#[test]
fn a_page_reads_in_the_time_of_its_type() {
    let mut config = config();
    config.nand.read_page_factors = vec![0.5, 1.0, 1.5];
    config.energy.page_bytes = UNIT / 4;
    let mut flash = model(config);
    flash.precondition(0, 64 * UNIT);
    // Pages 0 to 3 of unit 0 are of types 0, 1, 2, 0; each read lands on a die that is free again.
    let sense_ns = |page: u64, flash: &mut FlashModel| {
        let at = 1_000_000_000 * (page + 1);
        flash.read(at, 0, page * UNIT / 4, 4096) - at - 10_000 - 4096
    };
    let senses: Vec<u64> = (0..4).map(|page| sense_ns(page, &mut flash)).collect();
    assert_eq!(senses, [25_000, 50_000, 75_000, 25_000], "tR 50 us times each page type's factor");
    // A read across pages 1 and 2 senses both word-line pages at once, as long as the slower one.
    let at = 10_000_000_000;
    assert_eq!(flash.read(at, 0, UNIT / 4, 8192) - at, 10_000 + 75_000 + 8192);
}

/// The test model reading two program units ahead of a stream, with zone 0's first 64 units written.
fn read_ahead_model() -> FlashModel {
    let mut config = config();
    config.controller.read_ahead_bytes = 2 * UNIT;
    let mut flash = model(config);
    flash.precondition(0, 64 * UNIT);
    flash
}

#[test]
fn a_sequential_stream_finds_its_pages_read_ahead() {
    let mut flash = read_ahead_model();
    // The first read starts no stream; the second continues it, and the controller senses the read's unit
    // again, whole, and the two units after it, on their dies.
    flash.read(0, 0, 0, 4096);
    let at = 1_000_000_000;
    let second = flash.read(at, 0, 4096, 4096);
    assert_eq!(second - at, 10_000 + 50_000 + UNIT, "the read's page is sensed and moved whole");
    assert_eq!(flash.counters().get(FlashOp::PageRead, OpSource::HostRead), 1 + 3);
    // Later reads of the stream find units 0 and 1 in the controller's memory: firmware time only. (Each
    // comes as the command processor is done with the one before, 1 us on.)
    let later = 2_000_000_000;
    let ahead = flash.read(later, 0, 8192, UNIT - 8192);
    assert_eq!(ahead - later, 10_000, "no sensing and no channel");
    let next_unit = flash.read(later + 1_000, 0, UNIT, 4096);
    assert_eq!(next_unit - later - 1_000, 10_000);
    // A read elsewhere breaks the stream and reads from flash again.
    let elsewhere = flash.read(later + 2_000, 0, 40 * UNIT, 4096);
    assert_eq!(elsewhere - later - 2_000, 10_000 + 50_000 + 4096);
}

/// The read-ahead model with zone 0's stream started by two reads.
fn started_stream() -> FlashModel {
    let mut flash = read_ahead_model();
    flash.read(0, 0, 0, 4096);
    flash.read(1_000_000_000, 0, 4096, 4096);
    flash
}

/// When the `read`-th read after `started_stream` comes: as the command processor is done with the one
/// before, 1 us on.
fn at(read: u64) -> u64 {
    2_000_000_000 + read * 1_000
}

#[test]
fn reads_that_run_out_of_order_keep_the_stream_and_its_pages() {
    let mut flash = started_stream();
    // Two reads outstanding together run in the other order: the later one is in memory, and the earlier
    // one, which the stream has not passed, still is.
    assert_eq!(flash.read(at(0), 0, 12288, 4096) - at(0), 10_000, "ahead of the stream, in memory");
    assert_eq!(flash.read(at(1), 0, 8192, 4096) - at(1), 10_000, "behind the read that ran first");
    assert_eq!(flash.read(at(2), 0, 16384, 4096) - at(2), 10_000, "the stream goes on after both");
    // A read outside what the controller holds still breaks the stream.
    assert_eq!(flash.read(at(3), 0, 40 * UNIT, 4096) - at(3), 10_000 + 50_000 + 4096);
    assert!(flash.read(at(4), 0, 20480, 4096) - at(4) > 10_000, "the controller dropped the stream's pages");
}

#[test]
fn a_read_the_stream_has_passed_comes_from_flash_and_leaves_the_stream() {
    let mut flash = started_stream();
    // The stream reaches the second unit, and its memory lets the first unit go; a read of the first unit
    // runs after that (commands outstanding together run in any order).
    assert_eq!(flash.read(at(0), 0, 8192, UNIT - 8192) - at(0), 10_000);
    assert_eq!(flash.read(at(1), 0, UNIT, 4096) - at(1), 10_000, "the stream's next unit, in memory");
    assert!(flash.read(at(2), 0, UNIT - 4096, 4096) - at(2) > 10_000, "the straggler comes from flash");
    assert_eq!(flash.read(at(3), 0, UNIT + 4096, 4096) - at(3), 10_000, "the stream goes on from memory");
    assert_eq!(flash.read(at(4), 0, UNIT + 8192, 4096) - at(4), 10_000);
}

#[test]
fn unprogrammed_data_needs_no_flash_read() {
    let mut flash = model(config());
    flash.precondition(0, 4096);
    let done = flash.read(0, 0, 0, 4096);
    assert_eq!(done, 10_000, "data still in the write buffer comes from the controller");
    assert_eq!(flash.counters().total(FlashOp::PageRead), 0);
}

#[test]
fn reads_on_one_die_queue_behind_each_other() {
    let mut flash = model(config());
    flash.precondition(0, 64 * UNIT);
    let first = flash.read(0, 0, 0, 4096);
    let same_die = flash.read(0, 0, 4 * UNIT, 4096);
    let other_die = flash.read(0, 0, UNIT, 4096);
    // The die senses the second page only once the first has left its register over the channel.
    assert_eq!(same_die, first + 50_000 + 4096, "unit 4 is on unit 0's die: {first} then {same_die}");
    assert!(other_die < same_die, "unit 1 is on another die");
}

#[test]
fn stripes_start_on_die_zero_or_rotate_by_zone() {
    // Zones 0 and 1, first unit each: on one die with first-die stripes, on two with by-zone ones.
    let first_die = |stripe_start| {
        let mut config = config();
        config.nand.stripe_start = stripe_start;
        let mut flash = model(config);
        flash.precondition(0, 64 * UNIT);
        flash.precondition(1, 64 * UNIT);
        let zone_0 = flash.read(0, 0, 0, 4096);
        (zone_0, flash.read(0, 1, 0, 4096))
    };
    let (zone_0, zone_1) = first_die(crate::StripeStart::FirstDie);
    assert_eq!(zone_1, zone_0 + 50_000 + 4096, "both zones start on die 0: the second read waits");
    let (zone_0, zone_1) = first_die(crate::StripeStart::ByZone);
    assert!(zone_1 < zone_0 + 50_000, "zone 1 starts on die 1: {zone_0} and {zone_1}");
}

#[test]
fn the_command_processor_serializes_commands() {
    let mut flash = model(config());
    let mut last = 0;
    for i in 0..10u64 {
        last = flash.write(0, i as u32 % 4, (i / 4) * 4096, 4096, WriteKind::Write, false);
    }
    assert!(last >= 10 * 4_000, "10 writes at 4 us each through one command processor: {last}");
    let append = flash.write(last, 3, 4096 * 3, 4096, WriteKind::Append, false);
    assert_eq!(append - last, 7_000, "append: firmware 5 us + append extra 2 us");
}

#[test]
fn a_command_queued_for_the_processor_starts_its_firmware_when_taken() {
    let mut flash = model(config());
    // Two writes at once to two zones: the second is taken when the first is done with the processor (4 us),
    // and its firmware (5 us) runs from there; were they overlapped, it would complete at 8 us.
    let first = flash.write(0, 0, 0, 4096, WriteKind::Write, false);
    let second = flash.write(0, 1, 0, 4096, WriteKind::Write, false);
    assert_eq!((first, second), (5_000, 9_000));
    // A read taken 1 us after it came (behind another read) reaches its die 1 us later than one taken at once.
    let alone = model(config()).read(20_000, 0, 0, 4096);
    let mut queued = model(config());
    queued.read(20_000, 1, 0, 4096);
    let behind = queued.read(20_000, 0, 0, 4096);
    assert_eq!(behind - alone, 1_000, "firmware, sense and transfer start 1 us late");
}

#[test]
fn a_writes_data_fetch_shows_once_it_outlasts_the_firmware() {
    let mut fetching = config();
    // 1000 MB/s: one nanosecond per byte, after a 2 us setup.
    (fetching.controller.write_fetch_setup_us, fetching.controller.write_fetch_mib_per_s) =
        (2.0, 1000.0 * 1_000_000.0 / 1_048_576.0);
    let mut flash = model(fetching);
    let small = flash.write(0, 0, 0, 2048, WriteKind::Write, false);
    assert_eq!(small, 5_000, "2 + 2.048 us of fetch hide under the 5 us of firmware");
    let start = 1_000_000;
    let large = flash.write(start, 1, 0, 8192, WriteKind::Write, false);
    assert_eq!(large - start, 2_000 + 8_192, "the fetch outlasts the firmware");
    let zeroes = flash.write(2 * start, 2, 0, 8192, WriteKind::Zeroes, false);
    assert_eq!(zeroes - 2 * start, 5_000, "write zeroes carry no data to fetch");
}

#[test]
fn early_completion_acknowledges_before_the_program() {
    let mut flash = model(config());
    let early = flash.write(0, 0, 0, UNIT, WriteKind::Write, false);
    assert!(early < 500_000, "acknowledged from the buffer: {early}");
    let mut late_config = config();
    late_config.controller.early_completion = false;
    let mut flash = model(late_config);
    let late = flash.write(0, 0, 0, UNIT, WriteKind::Write, false);
    assert!(late >= 500_000 + UNIT, "waits for the channel and the program: {late}");
}

#[test]
fn the_write_budget_bounds_bandwidth() {
    let mut limited = config();
    limited.controller.write_mib_per_s = 100.0;
    let mut flash = model(limited);
    let mut last = 0;
    for i in 0..8u64 {
        last = flash.write(0, (i % 4) as u32, (i / 4) * 65536, 65536, WriteKind::Write, false);
    }
    let minimum = (8.0 * 65536.0 / (100.0 * 1_048_576.0) * 1e9) as u64;
    assert!(last >= minimum, "8 x 64 KiB at 100 MiB/s need {minimum} ns, got {last}");
}

#[test]
fn a_full_write_buffer_holds_writes_back() {
    let mut flash = model(config());
    let mut completions = Vec::new();
    for i in 0..16u64 {
        completions.push(flash.write(0, 0, i * UNIT, UNIT, WriteKind::Write, false));
    }
    assert!(completions[3] < 500_000, "four units fit in the buffer");
    assert!(completions[15] >= 500_000, "later ones wait for programs to free the buffer: {completions:?}");
}

#[test]
fn reset_cost_grows_with_occupancy_and_wears_blocks() {
    let reset_after = |bytes: u64| {
        let mut flash = model(config());
        flash.precondition(0, bytes);
        let done = flash.reset(0, 0);
        (done, flash.counters().total(FlashOp::BlockErase), flash.erase_counts().iter().sum::<u32>())
    };
    let (empty, empty_erases, _) = reset_after(0);
    assert_eq!((empty, empty_erases), (100_000, 0), "an empty zone costs the controller's time only");
    let (quarter, quarter_erases, _) = reset_after(16 * UNIT);
    let (full, full_erases, wear) = reset_after(64 * UNIT);
    assert_eq!(quarter, 100_000 + 3_000_000, "16 units over 4 dies: one block each, erased in parallel");
    assert_eq!(full, 100_000 + 4 * 3_000_000, "64 units: four blocks on each die, one after another");
    assert_eq!((quarter_erases, full_erases, wear), (4, 16, 16));
}

#[test]
fn reads_suspend_an_erase_or_a_program_when_the_die_allows_it() {
    let read_beside_reset = |suspend_latency_us: f64| {
        let mut suspending = config();
        suspending.nand.suspend_latency_us = suspend_latency_us;
        let mut flash = model(suspending);
        flash.precondition(0, 64 * UNIT);
        flash.precondition(1, 64 * UNIT);
        let reset_done = flash.reset(0, 0);
        // Two reads of zone 1 on the same die, 1 ms into the reset's 12 ms of erases.
        let first = flash.read(1_000_000, 1, 0, 4096);
        let second = flash.read(1_000_000, 1, 4 * UNIT, 4096);
        let die_busy = [0, 1].map(|plane| flash.resources.planes[plane].last_end());
        (reset_done, first - 1_000_000, second - 1_000_000, die_busy)
    };
    let (reset_waiting, first_waiting, _, _) = read_beside_reset(0.0);
    assert!(first_waiting > 10_000_000, "without suspend a read waits for every erase: {first_waiting} ns");
    let (reset_suspending, first, second, die_busy) = read_beside_reset(20.0);
    assert_eq!(first, 10_000 + 20_000 + 50_000 + 4096, "firmware, suspend, sense, channel");
    assert_eq!(second, first + 50_000 + 4096, "the second waits for the first's sense and transfer");
    assert_eq!(reset_suspending, reset_waiting, "the reset's end was fixed when it was submitted");
    assert_eq!(
        die_busy,
        [reset_waiting + 20_000 + 2 * (50_000 + 4096), reset_waiting],
        "the die the reads suspended erases that much longer; the others do not"
    );

    // A read whose sense would run into the erases' start (they begin 100 us after the reset) suspends
    // them as they begin rather than waiting for all of them.
    let mut suspending = config();
    suspending.nand.suspend_latency_us = 20.0;
    let mut flash = model(suspending);
    flash.precondition(0, 64 * UNIT);
    flash.precondition(1, 64 * UNIT);
    flash.reset(0, 0);
    let done = flash.read(85_000, 1, 0, 4096);
    assert_eq!(done, 100_000 + 20_000 + 50_000 + 4096, "the erase starts, is suspended, the read is sensed");

    let mut suspending = config();
    suspending.nand.suspend_latency_us = 20.0;
    let mut flash = model(suspending);
    flash.precondition(1, 64 * UNIT);
    let programmed = flash.write(0, 0, 0, 4 * UNIT, WriteKind::Write, false);
    let read = flash.read(programmed + 100_000, 1, 0, 4096) - programmed - 100_000;
    assert_eq!(read, 10_000 + 20_000 + 50_000 + 4096, "a program is suspended as an erase is");

    // Once resumed, the erase runs 200 us before it may be suspended again: a read that comes 10 us after
    // the die's last suspended read waits for that window, then suspends the erase again.
    let mut guarded = config();
    guarded.nand.suspend_latency_us = 20.0;
    guarded.nand.resume_before_suspend_us = 200.0;
    let mut flash = model(guarded);
    flash.precondition(0, 64 * UNIT);
    flash.precondition(1, 64 * UNIT);
    flash.reset(0, 0);
    let first = flash.read(1_000_000, 1, 0, 4096);
    assert_eq!(first - 1_000_000, 10_000 + 20_000 + 50_000 + 4096, "the first read suspends at once");
    let second = flash.read(first + 10_000, 1, 4 * UNIT, 4096);
    assert_eq!(second - first, 200_000 + 20_000 + 50_000 + 4096, "the window, the suspension, sense, channel");
}

#[test]
fn bounded_erase_concurrency_serializes_erases() {
    let mut serial = config();
    serial.nand.erase_concurrency = 1;
    let mut flash = model(serial);
    flash.precondition(0, 64 * UNIT);
    assert_eq!(flash.reset(0, 0), 100_000 + 16 * 3_000_000);
}

/// `erase-timing = "zone-latency"` (NVMeVirt's reset with the ReZNS paper's zone erase latency): a reset
/// that erases completes the zone's latency after it starts, resets of two zones overlap, and reads of the
/// zone's dies go on beside them.
#[test]
fn zone_latency_erases_delay_the_reset_and_hold_no_die() {
    let mut zone_latency = config();
    zone_latency.nand.erase_timing = crate::EraseTiming::ZoneLatency;
    zone_latency.nand.erase_latency_us = 96_000.0;
    let mut flash = model(zone_latency);
    flash.precondition(0, 64 * UNIT);
    flash.precondition(1, 64 * UNIT);
    flash.precondition(2, 4 * UNIT);
    let (first, second) = (flash.reset(0, 0), flash.reset(0, 1));
    assert_eq!((first, second), (100_000 + 96_000_000, 100_000 + 96_000_000), "the two resets overlap");
    let read = flash.read(1_000_000, 2, 0, 4096);
    assert!(read < 2_000_000, "a read on the same dies is not held behind the erases: {read}");
    let empty = flash.reset(0, 3);
    assert!(empty < 2_000_000, "an empty zone erases nothing, so it waits for no erase: {empty}");
    assert_eq!(flash.counters().total(FlashOp::BlockErase), 32, "the erases are still counted: 16 a zone");
}

/// A model whose write budget is 100 MiB/s, with 4 KiB in zone 0: a finish of it pads 63 units.
fn nearly_empty_zone_on_a_slow_budget() -> FlashModel {
    let mut limited = config();
    limited.controller.write_mib_per_s = 100.0;
    let mut flash = model(limited);
    flash.precondition(0, 4096);
    flash
}

#[test]
fn finish_pads_through_the_write_budget_and_the_planes() {
    let mut flash = nearly_empty_zone_on_a_slow_budget();
    let done = flash.finish(0, 0);
    let padding_ns = ((64 * UNIT - 4096) as f64 / (100.0 * 1_048_576.0) * 1e9) as u64;
    assert!(done >= padding_ns, "padding {padding_ns} ns through the budget, finished at {done}");
    assert_eq!(flash.counters().get(FlashOp::PageProgram, OpSource::FinishPadding), 63);
    assert_eq!(flash.counters().get(FlashOp::PageProgram, OpSource::HostWrite), 1);
    let write_during = flash.write(0, 1, 0, 4096, WriteKind::Write, false);
    assert!(write_during < padding_ns / 10, "a write during the finish shares the budget: {write_during}");
}

#[test]
fn writes_during_a_finish_move_its_completion_later() {
    let mut flash = nearly_empty_zone_on_a_slow_budget();
    flash.serve(Some(9));
    let finished = flash.finish(0, 0);
    flash.serve(None);
    let zone_bytes = 64 * UNIT;
    let mut write_done = 0;
    for zone in 1..4 {
        write_done = flash.write(1_000, zone, 0, zone_bytes, WriteKind::Write, false);
    }
    let moved: Vec<_> = flash.take_moved().collect();
    assert_eq!(moved.len(), 1, "the finish moved: {moved:?}");
    let (command, later) = moved[0];
    assert_eq!(command, 9);
    // The writes outlast the padding, which has half the budget throughout: it takes twice as long.
    let ratio = later as f64 / finished as f64;
    assert!((1.9..2.1).contains(&ratio), "{finished} -> {later} ns");
    let writes_alone_ns = (3 * zone_bytes) as f64 / (100.0 * 1_048_576.0) * 1e9;
    assert!(write_done as f64 > writes_alone_ns, "the writes gave up half the budget for a while: {write_done}");
}

#[test]
fn energy_follows_the_counted_operations() {
    let mut flash = model(config());
    flash.precondition(0, 64 * UNIT);
    flash.read(0, 0, 0, UNIT);
    flash.reset(1_000_000_000, 0);
    let energy = &config().energy;
    assert_eq!(flash.counters().energy_nj(energy, OpSource::HostRead), 10.0);
    assert_eq!(flash.counters().energy_nj(energy, OpSource::Reset), 16.0 * 1000.0);
}

#[test]
fn a_flush_programs_what_its_zones_buffer_once_the_processor_takes_it() {
    // A write of part of a unit keeps the processor 4 us; a flush that comes with it is taken then, so its
    // program of the buffered part ends as late as that of a flush that comes at 4 us.
    let flushed = |flush_at: u64| {
        let mut flash = model(config());
        flash.write(0, 0, 0, 4096, WriteKind::Write, false);
        flash.flush(flush_at)
    };
    assert_eq!(flushed(0), flushed(4_000));
    assert!(flushed(0) > 4_000, "the flush waited for the program it started");
}

#[test]
fn only_programmed_data_survives_a_power_loss() {
    let mut flash = model(config());
    let acknowledged = flash.write(0, 0, 0, 2 * UNIT + 4096, WriteKind::Write, false);
    assert_eq!(flash.durable_bytes(0, acknowledged), 0, "acknowledged but not yet programmed");
    assert_eq!(flash.durable_bytes(0, 10_000_000), 2 * UNIT, "two programmed units; the tail is in the buffer");
    flash.lose_power(acknowledged);
    assert_eq!(flash.durable_bytes(0, u64::MAX), 0);
}

/// An emulator without a write buffer (ConfZNS): a write programs every unit it touches, one that straddles
/// a unit boundary both, and all it wrote is durable once it completes.
#[test]
fn an_unbuffered_write_across_a_unit_boundary_programs_both_units() {
    let mut config = config();
    config.controller.zone_write_buffer_bytes = 0;
    config.controller.early_completion = false;
    config.controller.aggregate_program_units = false;
    let mut flash = model(config);
    let done = flash.write(0, 0, UNIT - 4096, 8192, WriteKind::Write, true);
    assert_eq!(flash.counters().get(FlashOp::PageProgram, OpSource::HostWrite), 2);
    assert_eq!(flash.durable_bytes(0, done), UNIT + 4096, "everything acknowledged is programmed");
}

#[test]
fn completion_is_never_before_submission_and_resources_never_move_back() {
    for (policy, seeds) in [
        (MappingPolicy::StaticWrittenErase, 1..=3),
        (MappingPolicy::StaticFullErase, 1..=3),
        (MappingPolicy::Rezns, 1..=20),
    ] {
        for seed in seeds {
            random_commands(policy, seed);
        }
    }
}

/// A seeded random mix of reads, writes, finishes, flushes and resets, checking after each command that
/// nothing completes before it is submitted, no resource moves back in time, and the mapping holds.
fn random_commands(policy: MappingPolicy, seed: u64) {
    let mut flash = model(MediaConfig { mapping: MappingConfig { policy, ..MappingConfig::default() }, ..config() });
    let mut state = seed;
    let mut now = 0u64;
    let mut written = [0u64; 4];
    let mut busy = 0;
    for step in 0..3000 {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        now += (state >> 33) % 20_000;
        let zone = ((state >> 20) % 4) as u32;
        let at = &mut written[zone as usize];
        let done = match (state >> 10) % 9 {
            0 if *at > 0 => flash.read(now, zone, 0, 4096),
            1 => {
                *at = 0;
                flash.reset(now, zone)
            }
            2 if (state >> 40).is_multiple_of(4) => {
                *at = 64 * UNIT;
                flash.finish(now, zone)
            }
            3 => flash.flush(now),
            4 if *at > 0 && *at < 64 * UNIT && (state >> 40).is_multiple_of(3) => {
                *at = 64 * UNIT;
                flash.finish_by_controller(now, zone)
            }
            _ if *at + 8192 <= 64 * UNIT => {
                let offset = *at;
                *at += 8192;
                flash.write(now, zone, offset, 8192, WriteKind::Write, false)
            }
            _ => now,
        };
        let context = format!("policy {policy:?}, seed {seed}, step {step}");
        assert!(done >= now, "{context}: completed at {done}, before its submission at {now}");
        let reached = flash.busy_until();
        assert!(reached >= busy, "{context}: resources moved back from {busy} to {reached}");
        busy = reached;
        if let Err(broken) = flash.check_mapping() {
            panic!("{context}: {broken}");
        }
    }
}

fn rezns() -> MediaConfig {
    MediaConfig { mapping: MappingConfig { policy: MappingPolicy::Rezns, ..MappingConfig::default() }, ..config() }
}

#[test]
fn a_rezns_reset_of_a_mostly_empty_zone_erases_nothing_and_its_room_is_reused() {
    let mut flash = model(rezns());
    flash.precondition(0, 16 * UNIT);
    assert_eq!(flash.reset(0, 0), 100_000, "48 of 64 units left: kept as a spare, nothing erased");
    assert_eq!(flash.erase_summary().erases, 0);
    // Zone 1 takes the spare's 48 units, then 16 from a fresh physical zone; its reset keeps that one.
    for unit in 0..64 {
        flash.write(1_000_000 + unit * 1_000_000, 1, unit * UNIT, UNIT, WriteKind::Write, false);
    }
    flash.check_mapping().expect("mapping");
    let done = flash.reset(1_000_000_000, 1);
    assert_eq!(done, 1_000_100_000, "the reset does not wait for the full physical zone's erase");
    let summary = flash.erase_summary();
    assert_eq!((summary.inline, summary.deferred), (0, 16), "the full physical zone: 4 blocks on 4 planes");
    let stats = summary.renewable.expect("rezns stats");
    assert_eq!((stats.renewed_resets, stats.normal_resets, stats.spare_reuses), (2, 0, 1));
    assert_eq!(stats.spare_zones, 1);
    assert!(flash.busy_until() >= 1_000_100_000 + 4 * 3_000_000, "the deferred erases still keep planes busy");
}

#[test]
fn a_rezns_reset_of_a_nearly_full_zone_erases_it_before_completing() {
    let mut flash = model(rezns());
    flash.precondition(0, 60 * UNIT);
    assert_eq!(flash.reset(0, 0), 100_000 + 4 * 3_000_000, "4 left of 64: erased like on a ZNS SSD");
    let summary = flash.erase_summary();
    assert_eq!((summary.inline, summary.deferred), (16, 0));
}

#[test]
fn a_recycled_physical_zone_takes_programs_only_after_its_background_erase() {
    // One erase at a time across the device, so each plane's erases leave gaps a program could fit in.
    let mut waits = rezns();
    waits.controller.early_completion = false;
    waits.nand.erase_concurrency = 1;
    let mut flash = model(waits);
    flash.precondition(0, 16 * UNIT);
    flash.reset(1_000_000_000, 0); // physical 0 becomes a spare
    flash.precondition(1, 64 * UNIT); // 48 units in physical 0, 16 in physical 1
    let reset_at = 3_000_000_000;
    assert_eq!(flash.reset(reset_at, 1), reset_at + 100_000, "physical 0 is erased in the background");
    let erase_end = reset_at + 100_000 + 16 * 3_000_000;
    // Zone 2 takes the spare (physical 1), then physical 2; zone 3 takes physical 3; so zone 0's first unit
    // lands in physical 0, whose erase is still running.
    flash.precondition(2, 64 * UNIT);
    flash.precondition(3, 64 * UNIT);
    let done = flash.write(reset_at + 300_000, 0, 0, UNIT, WriteKind::Write, false);
    assert!(done >= erase_end + 500_000, "programmed at {done}, before the erase ends at {erase_end} + 0.5 ms");
    flash.check_mapping().expect("mapping");
}

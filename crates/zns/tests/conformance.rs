//! docs/conformance.md, case by case, against the zns layer. Test names carry the case number.

mod common;

use common::*;
use zonelab_zns::{
    ByteSize, CloseEmptyOpenZone, Command, Completion, NamespaceConfig, ReceiveAction, ReportFilter, Status,
    ZoneReport, ZoneSendAction as Zsa, ZoneState as S, WP_INVALID,
};

// 8.1 Basic transitions

#[test]
fn case_01_open_empty() {
    let mut ns = fresh();
    send(&mut ns, 3, Zsa::Open).expect("open");
    assert_eq!((state(&ns, 3), wp(&ns, 3)), (S::ExplicitlyOpened, zslba(&ns, 3)));
    assert_eq!((ns.open_zones(), ns.active_zones()), (1, 1));
}

#[test]
fn case_02_close_empty_is_invalid_transition() {
    let mut ns = fresh();
    refused(&mut ns, Status::InvalidZoneStateTransition, |ns| send(ns, 3, Zsa::Close));
    assert_eq!(state(&ns, 3), S::Empty);
}

#[test]
fn case_03_finish_empty() {
    let mut ns = fresh();
    send(&mut ns, 3, Zsa::Finish).expect("finish");
    assert_eq!(state(&ns, 3), S::Full);
    assert_eq!(wp(&ns, 3), WP_INVALID, "NVMe reports all-ones for a FULL zone");
    assert_eq!((ns.open_zones(), ns.active_zones()), (0, 0));
}

#[test]
fn case_04_reset_empty() {
    let mut ns = fresh();
    send(&mut ns, 3, Zsa::Reset).expect("reset");
    assert_eq!((state(&ns, 3), wp(&ns, 3)), (S::Empty, zslba(&ns, 3)));
}

#[test]
fn case_05_write_opens_implicitly() {
    let mut ns = fresh();
    write_at(&mut ns, 2, 1).expect("write");
    assert_eq!((state(&ns, 2), wp(&ns, 2)), (S::ImplicitlyOpened, zslba(&ns, 2) + 1));
}

#[test]
fn case_07_open_implicitly_opened() {
    let mut ns = fresh();
    write_zone(&mut ns, 2, 3).expect("write");
    send(&mut ns, 2, Zsa::Open).expect("open");
    assert_eq!((state(&ns, 2), wp(&ns, 2)), (S::ExplicitlyOpened, zslba(&ns, 2) + 3));
    assert_eq!((ns.open_zones(), ns.active_zones()), (1, 1));
}

#[test]
fn case_08_close_written_implicitly_opened() {
    let mut ns = fresh();
    write_zone(&mut ns, 2, 3).expect("write");
    send(&mut ns, 2, Zsa::Close).expect("close");
    assert_eq!((state(&ns, 2), wp(&ns, 2)), (S::Closed, zslba(&ns, 2) + 3));
    assert_eq!((ns.open_zones(), ns.active_zones()), (0, 1));
}

#[test]
fn case_09_finish_implicitly_opened() {
    let mut ns = fresh();
    write_zone(&mut ns, 2, 3).expect("write");
    send(&mut ns, 2, Zsa::Finish).expect("finish");
    assert_eq!(state(&ns, 2), S::Full);
    assert_eq!((ns.open_zones(), ns.active_zones()), (0, 0));
}

#[test]
fn case_10_reset_implicitly_opened() {
    let mut ns = fresh();
    write_zone(&mut ns, 2, 3).expect("write");
    send(&mut ns, 2, Zsa::Reset).expect("reset");
    assert_eq!((state(&ns, 2), wp(&ns, 2)), (S::Empty, zslba(&ns, 2)));
    assert_eq!((ns.open_zones(), ns.active_zones()), (0, 0));
}

#[test]
fn case_11_open_explicitly_opened_is_a_no_op() {
    let mut ns = fresh();
    send(&mut ns, 2, Zsa::Open).expect("open");
    send(&mut ns, 2, Zsa::Open).expect("open again");
    assert_eq!(state(&ns, 2), S::ExplicitlyOpened);
    assert_eq!(ns.open_zones(), 1);
}

#[test]
fn case_13_write_keeps_explicit_open() {
    let mut ns = fresh();
    send(&mut ns, 2, Zsa::Open).expect("open");
    write_at(&mut ns, 2, 1).expect("write");
    assert_eq!((state(&ns, 2), wp(&ns, 2)), (S::ExplicitlyOpened, zslba(&ns, 2) + 1));
}

#[test]
fn case_15_closed_zone_actions() {
    let closed = || {
        let mut ns = fresh();
        write_zone(&mut ns, 1, 2).expect("write");
        send(&mut ns, 1, Zsa::Close).expect("close");
        ns
    };
    let mut ns = closed();
    send(&mut ns, 1, Zsa::Open).expect("open");
    assert_eq!(state(&ns, 1), S::ExplicitlyOpened);
    let mut ns = closed();
    send(&mut ns, 1, Zsa::Close).expect("close");
    assert_eq!(state(&ns, 1), S::Closed);
    let mut ns = closed();
    send(&mut ns, 1, Zsa::Finish).expect("finish");
    assert_eq!(state(&ns, 1), S::Full);
    assert_eq!(ns.active_zones(), 0);
    let mut ns = closed();
    send(&mut ns, 1, Zsa::Reset).expect("reset");
    assert_eq!((state(&ns, 1), wp(&ns, 1)), (S::Empty, zslba(&ns, 1)));
    assert_eq!(ns.active_zones(), 0);
}

#[test]
fn case_17_reset_full_reads_zeros() {
    let mut ns = fresh();
    let cap = ns.geometry().zone_cap_lba;
    write_zone(&mut ns, 0, cap).expect("fill");
    assert_eq!(state(&ns, 0), S::Full);
    send(&mut ns, 0, Zsa::Reset).expect("reset");
    assert_eq!((state(&ns, 0), wp(&ns, 0)), (S::Empty, 0));
    assert!(read(&mut ns, 0, cap).expect("read").iter().all(|&b| b == 0));
}

#[test]
fn case_18_open_or_close_full_is_invalid_transition() {
    let mut ns = fresh();
    send(&mut ns, 0, Zsa::Finish).expect("finish");
    refused(&mut ns, Status::InvalidZoneStateTransition, |ns| send(ns, 0, Zsa::Open));
    refused(&mut ns, Status::InvalidZoneStateTransition, |ns| send(ns, 0, Zsa::Close));
}

#[test]
fn case_19_writes_to_capacity_make_the_zone_full() {
    let mut ns = namespace(NamespaceConfig { zone_cap: ByteSize(768 << 10), max_open: 2, ..config() });
    let cap = ns.geometry().zone_cap_lba;
    write_zone(&mut ns, 0, cap - 10).expect("write");
    assert_eq!((ns.open_zones(), ns.active_zones()), (1, 1));
    write_zone(&mut ns, 0, 10).expect("last write");
    assert_eq!(state(&ns, 0), S::Full);
    assert_eq!((ns.open_zones(), ns.active_zones()), (0, 0));
}

// 8.2 Write errors

#[test]
fn case_21_write_to_full() {
    let mut ns = fresh();
    send(&mut ns, 0, Zsa::Finish).expect("finish");
    refused(&mut ns, Status::ZoneIsFull, |ns| write(ns, 0, 1));
    refused(&mut ns, Status::ZoneIsFull, |ns| write(ns, 7, 1));
    assert!(Status::ZoneIsFull.do_not_retry());
}

#[test]
fn case_22_write_above_wp() {
    let mut ns = fresh();
    refused(&mut ns, Status::ZoneInvalidWrite, |ns| write(ns, 1, 1));
    assert_eq!((state(&ns, 0), wp(&ns, 0)), (S::Empty, 0));
}

#[test]
fn case_23_write_below_wp() {
    let mut ns = fresh();
    write_zone(&mut ns, 0, 8).expect("write");
    refused(&mut ns, Status::ZoneInvalidWrite, |ns| write(ns, 4, 1));
}

#[test]
fn case_25_write_past_capacity() {
    let mut ns = namespace(NamespaceConfig { zone_cap: ByteSize(768 << 10), ..config() });
    let cap = ns.geometry().zone_cap_lba;
    write_zone(&mut ns, 0, cap - 1).expect("write");
    refused(&mut ns, Status::ZoneBoundaryError, |ns| write_zone(ns, 0, 2));
    assert_eq!(state(&ns, 0), S::ImplicitlyOpened);
}

#[test]
fn case_27_write_past_namespace_end() {
    let mut ns = fresh();
    let nsze = ns.geometry().nsze_lba;
    refused(&mut ns, Status::LbaOutOfRange, |ns| write(ns, nsze - 1, 2));
    refused(&mut ns, Status::LbaOutOfRange, |ns| write(ns, u64::MAX, 1));
}

#[test]
fn case_28_write_and_append_to_read_only() {
    let mut ns = fresh();
    ns.inject_zone_state(0, S::ReadOnly).expect("inject");
    refused(&mut ns, Status::ZoneIsReadOnly, |ns| write(ns, 0, 1));
    let data = block(&ns, 1, 1);
    refused(&mut ns, Status::ZoneIsReadOnly, |ns| ns.append(0, &data).map(|_| ()));
}

#[test]
fn case_29_write_and_read_offline() {
    let mut ns = fresh();
    ns.inject_zone_state(0, S::Offline).expect("inject");
    refused(&mut ns, Status::ZoneIsOffline, |ns| write(ns, 0, 1));
    refused(&mut ns, Status::ZoneIsOffline, |ns| read(ns, 0, 1).map(|_| ()));
}

// 8.3 Zone management addressing / select-all

#[test]
fn case_32_management_slba_not_a_zone_start() {
    let mut ns = fresh();
    let slba = zslba(&ns, 1) + 1;
    for action in [Zsa::Open, Zsa::Close, Zsa::Finish, Zsa::Reset] {
        refused(&mut ns, Status::InvalidField, |ns| ns.zone_management_send(slba, action, false));
    }
}

#[test]
fn case_33_management_slba_at_namespace_end() {
    let mut ns = fresh();
    let nsze = ns.geometry().nsze_lba;
    for action in [Zsa::Open, Zsa::Close, Zsa::Finish, Zsa::Reset] {
        refused(&mut ns, Status::LbaOutOfRange, |ns| ns.zone_management_send(nsze, action, false));
    }
    // With Select All the SLBA is ignored.
    ns.zone_management_send(nsze + 12345, Zsa::Reset, true).expect("select-all ignores SLBA");
}

#[test]
fn case_35_open_all_opens_only_closed_zones() {
    let mut ns = fresh();
    write_zone(&mut ns, 2, 1).expect("write");
    write_zone(&mut ns, 3, 1).expect("write");
    send(&mut ns, 3, Zsa::Close).expect("close");
    send_all(&mut ns, Zsa::Open).expect("open all");
    assert_eq!((state(&ns, 1), state(&ns, 2), state(&ns, 3)), (S::Empty, S::ImplicitlyOpened, S::ExplicitlyOpened));
}

#[test]
fn case_36_close_all() {
    let mut ns = fresh();
    write_zone(&mut ns, 1, 1).expect("write");
    send(&mut ns, 2, Zsa::Open).expect("open");
    write_zone(&mut ns, 2, 1).expect("write");
    send_all(&mut ns, Zsa::Close).expect("close all");
    assert_eq!((state(&ns, 1), state(&ns, 2)), (S::Closed, S::Closed));
    assert_eq!((ns.open_zones(), ns.active_zones()), (0, 2));
}

#[test]
fn select_all_finish_and_reset_process_their_states() {
    let mut ns = fresh();
    write_zone(&mut ns, 1, 1).expect("write");
    write_zone(&mut ns, 2, 1).expect("write");
    send(&mut ns, 2, Zsa::Close).expect("close");
    ns.inject_zone_state(4, S::ReadOnly).expect("inject");
    send_all(&mut ns, Zsa::Finish).expect("finish all");
    assert_eq!((state(&ns, 0), state(&ns, 1), state(&ns, 2)), (S::Empty, S::Full, S::Full));
    send_all(&mut ns, Zsa::Reset).expect("reset all");
    assert!(report_all(&ns).iter().enumerate().all(|(i, z)| (z.state == S::Empty) != (i == 4)));
    assert_eq!(state(&ns, 4), S::ReadOnly, "reset-all skips READ_ONLY");
    send_all(&mut ns, Zsa::Offline).expect("offline all");
    assert_eq!(state(&ns, 4), S::Offline);
}

#[test]
fn case_39_offline_read_only() {
    let mut ns = fresh();
    ns.inject_zone_state(5, S::ReadOnly).expect("inject");
    send(&mut ns, 5, Zsa::Offline).expect("offline");
    assert_eq!(state(&ns, 5), S::Offline);
    send(&mut ns, 5, Zsa::Offline).expect("offline again is ok");
}

#[test]
fn case_40_offline_empty_is_invalid_transition() {
    let mut ns = fresh();
    refused(&mut ns, Status::InvalidZoneStateTransition, |ns| send(ns, 5, Zsa::Offline));
}

#[test]
fn case_41_management_of_read_only_or_offline_touches_nothing() {
    for fault in [S::ReadOnly, S::Offline] {
        let mut ns = fresh();
        write_zone(&mut ns, 6, 1).expect("write the next zone");
        ns.inject_zone_state(5, fault).expect("inject");
        for action in [Zsa::Reset, Zsa::Open, Zsa::Close, Zsa::Finish] {
            refused(&mut ns, Status::InvalidZoneStateTransition, |ns| send(ns, 5, action));
        }
        assert_eq!(state(&ns, 6), S::ImplicitlyOpened, "QEMU's reset quirk must not touch the next zone");
    }
}

#[test]
fn case_42_undefined_zone_send_action() {
    assert_eq!(Zsa::from_raw(0x07), Err(Status::InvalidField));
    let mut ns = fresh();
    refused(&mut ns, Status::InvalidField, |ns| send(ns, 0, Zsa::SetZoneDescriptorExtension));
    refused(&mut ns, Status::InvalidField, |ns| ns.zone_management_send(0, Zsa::ZrwaFlush, true));
}

// 8.4 Resource limits (MO = 4, MA = 6)

#[test]
fn case_45_open_beyond_max_open() {
    let mut ns = limited();
    for zone in 0..4 {
        send(&mut ns, zone, Zsa::Open).expect("open");
    }
    refused(&mut ns, Status::TooManyOpenZones, |ns| send(ns, 4, Zsa::Open));
    assert_eq!(state(&ns, 4), S::Empty);
}

#[test]
fn case_47_writes_beyond_max_open() {
    let mut ns = limited();
    write_zone(&mut ns, 5, 1).expect("write");
    send(&mut ns, 5, Zsa::Close).expect("close");
    for zone in 0..4 {
        send(&mut ns, zone, Zsa::Open).expect("open");
    }
    refused(&mut ns, Status::TooManyOpenZones, |ns| write_zone(ns, 4, 1));
    refused(&mut ns, Status::TooManyOpenZones, |ns| write_zone(ns, 5, 1));
    assert_eq!(Status::TooManyOpenZones.errno(), libc_etoomanyrefs());
}

fn libc_etoomanyrefs() -> i32 {
    109
}

#[test]
fn case_48_open_with_one_spare() {
    let mut ns = limited();
    for zone in 0..3 {
        send(&mut ns, zone, Zsa::Open).expect("open");
    }
    send(&mut ns, 3, Zsa::Open).expect("the last open resource");
    assert_eq!(ns.open_zones(), 4);
}

#[test]
fn case_50_auto_close_oldest_implicitly_opened() {
    let mut ns = namespace(NamespaceConfig { max_open: 4, ..config() });
    for zone in 0..8 {
        write_zone(&mut ns, zone, 1).expect("write");
        assert!(ns.open_zones() <= 4);
    }
    let states: Vec<S> = (0..8).map(|zone| state(&ns, zone)).collect();
    assert_eq!(&states[..4], &[S::Closed; 4], "the earliest zones are closed first");
    assert_eq!(&states[4..], &[S::ImplicitlyOpened; 4]);
    // FIFO by when a zone became IMPL_OPEN, not by zone number: reopen zone 0, then zone 4 is the oldest.
    write_zone(&mut ns, 0, 1).expect("write");
    assert_eq!((state(&ns, 0), state(&ns, 4)), (S::ImplicitlyOpened, S::Closed));
}

#[test]
fn case_51_explicit_open_auto_closes() {
    let mut ns = limited();
    for zone in 0..4 {
        write_zone(&mut ns, zone, 1).expect("write");
    }
    send(&mut ns, 4, Zsa::Open).expect("open");
    assert_eq!((state(&ns, 0), state(&ns, 4)), (S::Closed, S::ExplicitlyOpened));
    assert_eq!(ns.open_zones(), 4);
}

#[test]
fn case_57_too_many_active() {
    let mut ns = limited();
    for zone in 0..6 {
        write_zone(&mut ns, zone, 1).expect("write");
    }
    assert_eq!(ns.active_zones(), 6);
    refused(&mut ns, Status::TooManyActiveZones, |ns| write_zone(ns, 6, 1));
    assert_eq!(Status::TooManyActiveZones.errno(), 75, "EOVERFLOW");
    refused(&mut ns, Status::TooManyActiveZones, |ns| send(ns, 6, Zsa::Open));
}

#[test]
fn auto_close_does_not_happen_when_the_active_limit_fails() {
    let mut ns = namespace(NamespaceConfig { max_open: 2, max_active: 2, ..config() });
    write_zone(&mut ns, 0, 1).expect("write");
    write_zone(&mut ns, 1, 1).expect("write");
    refused(&mut ns, Status::TooManyActiveZones, |ns| write_zone(ns, 2, 1));
    assert_eq!(state(&ns, 0), S::ImplicitlyOpened, "no side effect from a failed command");
}

#[test]
fn case_58_closed_zones_reopen_with_only_an_open_resource() {
    let mut ns = namespace(NamespaceConfig { max_open: 6, max_active: 6, ..config() });
    for zone in 0..6 {
        write_zone(&mut ns, zone, 1).expect("write");
        send(&mut ns, zone, Zsa::Close).expect("close");
    }
    for zone in [3, 0, 5, 1, 4, 2, 3, 0] {
        write_zone(&mut ns, zone, 1).expect("write to a closed zone");
    }
    refused(&mut ns, Status::TooManyActiveZones, |ns| write_zone(ns, 6, 1));
}

#[test]
fn case_60_reset_frees_an_active_resource() {
    let mut ns = limited();
    for zone in 0..6 {
        write_zone(&mut ns, zone, 1).expect("write");
    }
    send(&mut ns, 2, Zsa::Reset).expect("reset");
    write_zone(&mut ns, 7, 1).expect("write after reset");
}

#[test]
fn case_62_identify_limits_are_zeros_based() {
    let ns = limited();
    let id = ns.identify();
    assert_eq!((id.mor, id.mar), (3, 5));
    let id = fresh().identify();
    assert_eq!((id.mor, id.mar), (u32::MAX, u32::MAX));
}

#[test]
fn case_72_zone_append_is_a_supported_command() {
    let id = fresh().identify();
    assert!(id.io_opcodes_supported.contains(&0x7d));
    assert!(id.io_opcodes_supported.contains(&0x79) && id.io_opcodes_supported.contains(&0x7a));
}

// 8.5 Zone append

#[test]
fn case_63_append_to_empty() {
    let mut ns = fresh();
    let z = zslba(&ns, 3);
    let data = block(&ns, 7, 5);
    assert_eq!(
        ns.execute(Command::Append { zslba: z, data: &data }).map(|done| done.completion),
        Ok(Completion::Appended { lba: z })
    );
    assert_eq!((state(&ns, 3), wp(&ns, 3)), (S::ImplicitlyOpened, z + 5));
    assert_eq!(ns.append(z, &data), Ok(z + 5), "the next append lands at the write pointer");
    assert_eq!(read(&mut ns, z + 5, 5).expect("read"), data);
}

#[test]
fn case_65_append_not_at_zone_start() {
    let mut ns = fresh();
    let data = block(&ns, 7, 1);
    refused(&mut ns, Status::InvalidField, |ns| ns.append(zslba(ns, 3) + 1, &data).map(|_| ()));
    assert!(Status::InvalidField.do_not_retry());
}

#[test]
fn case_66_append_above_zasl() {
    let mut ns = namespace(NamespaceConfig { zasl: ByteSize(8 << 10), mdts: ByteSize(128 << 10), ..config() });
    let data = block(&ns, 7, 3);
    refused(&mut ns, Status::InvalidField, |ns| ns.append(0, &data).map(|_| ()));
    ns.write(0, &data).expect("ZASL does not limit writes");
    assert_eq!(ns.identify().zasl, 1);
}

#[test]
fn case_67_append_above_mdts_with_zasl_zero() {
    let mut ns = namespace(NamespaceConfig { mdts: ByteSize(16 << 10), ..config() });
    let data = block(&ns, 7, 5);
    refused(&mut ns, Status::InvalidField, |ns| ns.append(0, &data).map(|_| ()));
    refused(&mut ns, Status::InvalidField, |ns| ns.write(0, &data));
    ns.write_zeroes(0, 5).expect("write zeroes is exempt from MDTS");
}

#[test]
fn case_70_append_to_full_read_only_offline() {
    let mut ns = fresh();
    send(&mut ns, 0, Zsa::Finish).expect("finish");
    ns.inject_zone_state(1, S::ReadOnly).expect("inject");
    ns.inject_zone_state(2, S::Offline).expect("inject");
    let data = block(&ns, 7, 1);
    for (zone, status) in [(0, Status::ZoneIsFull), (1, Status::ZoneIsReadOnly), (2, Status::ZoneIsOffline)] {
        refused(&mut ns, status, |ns| ns.append(zslba(ns, zone), &data).map(|_| ()));
    }
}

#[test]
fn case_71_append_beyond_max_open() {
    let mut ns = limited();
    for zone in 0..4 {
        send(&mut ns, zone, Zsa::Open).expect("open");
    }
    let data = block(&ns, 7, 1);
    refused(&mut ns, Status::TooManyOpenZones, |ns| ns.append(zslba(ns, 5), &data).map(|_| ()));
}

#[test]
fn append_past_capacity_writes_nothing() {
    let mut ns = namespace(NamespaceConfig { zone_cap: ByteSize(768 << 10), ..config() });
    let cap = ns.geometry().zone_cap_lba;
    write_zone(&mut ns, 0, cap - 2).expect("write");
    let data = block(&ns, 7, 3);
    refused(&mut ns, Status::ZoneBoundaryError, |ns| ns.append(0, &data).map(|_| ()));
}

// 8.6 Reads

#[test]
fn case_73_read_back_written_data() {
    let mut ns = fresh();
    let data: Vec<u8> = (0..8 * 4096u32).map(|i| (i * 7 % 253) as u8).collect();
    ns.write(zslba(&ns, 4), &data).expect("write");
    assert_eq!(read_at(&mut ns, 4, 8).expect("read"), data);
}

#[test]
fn case_74_read_empty_zone_returns_zeros() {
    let mut ns = fresh();
    assert!(read(&mut ns, 0, 16).expect("read").iter().all(|&b| b == 0));
}

#[test]
fn case_76_read_across_zone_boundary() {
    let mut ns = fresh();
    let last = zslba(&ns, 1) - 1;
    assert_eq!(read(&mut ns, last, 2), Err(Status::ZoneBoundaryError));
}

#[test]
fn case_77_cross_read_into_offline_zone() {
    let mut ns = namespace(NamespaceConfig { cross_zone_reads: true, ..config() });
    let last = zslba(&ns, 1) - 1;
    assert_eq!(read(&mut ns, last, 2).map(|data| data.len()), Ok(8192));
    ns.inject_zone_state(1, S::Offline).expect("inject");
    assert_eq!(read(&mut ns, last, 2), Err(Status::ZoneIsOffline));
    assert_eq!(ns.identify().ozcs & 1, 1, "RAZB is advertised");
}

#[test]
fn case_79_read_read_only_and_offline() {
    let mut ns = fresh();
    write_zone(&mut ns, 1, 2).expect("write");
    ns.inject_zone_state(1, S::ReadOnly).expect("inject");
    assert_eq!(read_at(&mut ns, 1, 2).expect("read-only zones are readable"), block(&ns, 0xa5, 2));
    ns.inject_zone_state(2, S::Offline).expect("inject");
    assert_eq!(read_at(&mut ns, 2, 1), Err(Status::ZoneIsOffline));
}

#[test]
fn case_81_fill_then_reset_all_reads_zeros() {
    let mut ns = namespace(NamespaceConfig { zones: 4, ..config() });
    let cap = ns.geometry().zone_cap_lba;
    for zone in 0..4 {
        let data = block(&ns, 0xaa, cap);
        ns.write(zslba(&ns, zone), &data).expect("fill");
    }
    send_all(&mut ns, Zsa::Reset).expect("reset all");
    let nsze = ns.geometry().nsze_lba;
    for zone in 0..4 {
        assert!(read_at(&mut ns, zone, cap).expect("read").iter().all(|&b| b == 0));
    }
    assert_eq!(nsze, 4 * cap);
}

#[test]
fn reads_above_wp_and_in_the_capacity_gap_are_zeros() {
    let mut ns = namespace(NamespaceConfig { zone_cap: ByteSize(768 << 10), ..config() });
    write_zone(&mut ns, 0, 4).expect("write");
    let all = read(&mut ns, 0, 256).expect("the read boundary is the zone size");
    assert!(all[..4 * 4096].iter().all(|&b| b == 0xa5));
    assert!(all[4 * 4096..].iter().all(|&b| b == 0));
    send(&mut ns, 0, Zsa::Finish).expect("finish");
    let after = read(&mut ns, 0, 256).expect("read");
    assert_eq!(after, all, "finish pads nothing the host can see");
}

#[test]
fn dulbe_refuses_unwritten_blocks() {
    let mut ns = namespace(NamespaceConfig { dulbe: true, ..config() });
    write_zone(&mut ns, 0, 4).expect("write");
    read(&mut ns, 0, 4).expect("written blocks read");
    assert_eq!(read(&mut ns, 2, 4), Err(Status::DeallocatedOrUnwrittenLogicalBlock));
}

#[test]
fn misaligned_buffers_and_mdts_are_invalid_field() {
    let mut ns = namespace(NamespaceConfig { mdts: ByteSize(16 << 10), ..config() });
    refused(&mut ns, Status::InvalidField, |ns| ns.write(0, &[1u8; 1000]));
    refused(&mut ns, Status::InvalidField, |ns| ns.write(0, &[]));
    assert_eq!(read(&mut ns, 0, 5), Err(Status::InvalidField));
}

// 8.7 Report zones / geometry

#[test]
fn case_82_fresh_report() {
    let ns = fresh();
    let zones = report_all(&ns);
    assert_eq!(zones.len() as u64, ns.geometry().nsze_lba / ns.geometry().zone_size_lba);
    for (i, zone) in zones.iter().enumerate() {
        assert_eq!(zone.start_lba, i as u64 * ns.geometry().zone_size_lba);
        assert_eq!((zone.state, zone.wp_lba), (S::Empty, zone.start_lba));
        assert!(zone.capacity_lba <= zone.size_lba);
    }
}

fn mixed_states() -> Ns {
    let mut ns = fresh();
    write_zone(&mut ns, 1, 1).expect("write");
    send(&mut ns, 2, Zsa::Open).expect("open");
    write_zone(&mut ns, 3, 1).expect("write");
    send(&mut ns, 3, Zsa::Close).expect("close");
    send(&mut ns, 4, Zsa::Finish).expect("finish");
    ns.inject_zone_state(5, S::ReadOnly).expect("inject");
    ns.inject_zone_state(6, S::Offline).expect("inject");
    write_zone(&mut ns, 7, 1).expect("write");
    ns
}

#[test]
fn case_83_report_filters() {
    let ns = mixed_states();
    let expected = [
        (ReportFilter::Empty, vec![0, 8, 9, 10, 11, 12, 13, 14, 15]),
        (ReportFilter::ImplicitlyOpened, vec![1, 7]),
        (ReportFilter::ExplicitlyOpened, vec![2]),
        (ReportFilter::Closed, vec![3]),
        (ReportFilter::Full, vec![4]),
        (ReportFilter::ReadOnly, vec![5]),
        (ReportFilter::Offline, vec![6]),
    ];
    for (filter, zones) in expected {
        let report = ns.report_zones(0, filter, false, None).expect("report");
        assert_eq!(report.zones.iter().map(|z| z.index).collect::<Vec<_>>(), zones, "{filter:?}");
        assert_eq!(report.nr_zones, zones.len() as u64);
    }
}

#[test]
fn report_partial_bit_and_unaligned_start() {
    let ns = mixed_states();
    // Start inside zone 1; at most 3 descriptors.
    let full_count = ns.report_zones(zslba(&ns, 1) + 17, ReportFilter::All, false, Some(3)).expect("report");
    assert_eq!(full_count.zones.iter().map(|z| z.index).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(full_count.nr_zones, 15, "without Partial: every matching zone to the end");
    let partial = ns.report_zones(zslba(&ns, 1) + 17, ReportFilter::All, true, Some(3)).expect("report");
    assert_eq!(partial.nr_zones, 3, "with Partial: the descriptors returned");
    let full = ns.report_zones(0, ReportFilter::All, false, None).expect("report");
    assert_eq!(full.zones[4].wp_lba, WP_INVALID);
    assert_eq!(full.zones[5].wp_lba, WP_INVALID);
}

#[test]
fn report_through_the_receive_command_buffer() {
    let mut ns = mixed_states();
    let mut buf = vec![0xffu8; 64 + 2 * 64 + 32];
    let command = Command::ZoneManagementReceive {
        slba: zslba(&ns, 3),
        action: ReceiveAction::ReportZones,
        filter: ReportFilter::All,
        partial: false,
        buf: &mut buf,
    };
    ns.execute(command).expect("report");
    let report = ZoneReport::decode(&buf, ns.geometry().zone_size_lba).expect("decodes");
    assert_eq!(report.nr_zones, 13);
    assert_eq!(report.zones.len(), 2);
    assert_eq!((report.zones[0].state, report.zones[1].state), (S::Closed, S::Full));
    assert!(buf[64 + 128..].iter().all(|&b| b == 0), "the rest of the buffer is zeroed");
}

#[test]
fn case_87_report_at_namespace_end() {
    let ns = fresh();
    assert_eq!(ns.report_zones(ns.geometry().nsze_lba, ReportFilter::All, false, None), Err(Status::LbaOutOfRange));
}

#[test]
fn case_88_89_report_field_errors() {
    assert_eq!(ReportFilter::from_raw(8), Err(Status::InvalidField));
    assert_eq!(ReceiveAction::from_raw(2), Err(Status::InvalidField));
    let mut ns = fresh();
    let mut receive = |action, len| {
        let mut buf = vec![0u8; len];
        ns.zone_management_receive(0, action, ReportFilter::All, false, &mut buf)
    };
    assert_eq!(receive(ReceiveAction::ExtendedReportZones, 4096), Err(Status::InvalidField));
    assert_eq!(receive(ReceiveAction::ReportZones, 32), Err(Status::InvalidField));
    assert_eq!(receive(ReceiveAction::ReportZones, 64), Ok(()));
}

#[test]
fn case_91_reset_write_report_with_512_byte_sectors() {
    let mut ns = namespace(NamespaceConfig { lba_size: 512, ..config() });
    ns.zone_management_send(0, Zsa::Reset, true).expect("reset all");
    for zone in 0..2 {
        let data = vec![1u8; 4096];
        ns.write(zslba(&ns, zone), &data).expect("write 4 KiB");
        assert_eq!(wp(&ns, zone), zslba(&ns, zone) + 8);
    }
    send(&mut ns, 0, Zsa::Reset).expect("reset");
    send(&mut ns, 1, Zsa::Reset).expect("reset");
    assert_eq!((wp(&ns, 0), wp(&ns, 1)), (zslba(&ns, 0), zslba(&ns, 1)));
}

#[test]
fn case_93_in_order_sequential_writes() {
    let mut ns = namespace(NamespaceConfig { zone_size: ByteSize(64 << 20), zones: 2, ..config() });
    let data = vec![3u8; 256 << 10];
    for i in 0..128u64 {
        ns.write(i * 64, &data).expect("sequential write");
    }
    assert_eq!(wp(&ns, 0), 128 * 64);
}

// Decision-table switches

#[test]
fn close_of_unwritten_open_zone_follows_the_switch() {
    let mut ns = fresh();
    send(&mut ns, 0, Zsa::Open).expect("open");
    send(&mut ns, 0, Zsa::Close).expect("close");
    assert_eq!((state(&ns, 0), ns.active_zones()), (S::Empty, 0));
    let mut ns = namespace(NamespaceConfig { close_empty_open_zone: CloseEmptyOpenZone::Closed, ..config() });
    send(&mut ns, 0, Zsa::Open).expect("open");
    send(&mut ns, 0, Zsa::Close).expect("close");
    assert_eq!((state(&ns, 0), ns.active_zones()), (S::Closed, 1));
}

#[test]
fn finish_resource_checks_follow_the_switch() {
    let full_of_explicit = |finish_checks_resources| {
        let mut ns = namespace(NamespaceConfig { max_open: 2, max_active: 2, finish_checks_resources, ..config() });
        send(&mut ns, 0, Zsa::Open).expect("open");
        send(&mut ns, 1, Zsa::Open).expect("open");
        ns
    };
    let mut qemu = full_of_explicit(false);
    send(&mut qemu, 5, Zsa::Finish).expect("QEMU: finish needs no resources");
    let mut null_blk = full_of_explicit(true);
    refused(&mut null_blk, Status::TooManyActiveZones, |ns| send(ns, 5, Zsa::Finish));
}

#[test]
fn auto_close_off_refuses_instead() {
    let mut ns = namespace(NamespaceConfig { max_open: 1, auto_close: false, ..config() });
    write_zone(&mut ns, 0, 1).expect("write");
    refused(&mut ns, Status::TooManyOpenZones, |ns| write_zone(ns, 1, 1));
}

#[test]
fn open_all_is_all_or_nothing() {
    let mut ns = namespace(NamespaceConfig { max_open: 2, ..config() });
    for zone in 0..3 {
        write_zone(&mut ns, zone, 1).expect("write");
        send(&mut ns, zone, Zsa::Close).expect("close");
    }
    send(&mut ns, 7, Zsa::Open).expect("open");
    refused(&mut ns, Status::TooManyOpenZones, |ns| send_all(ns, Zsa::Open));
    send(&mut ns, 7, Zsa::Close).expect("close");
    refused(&mut ns, Status::TooManyOpenZones, |ns| send_all(ns, Zsa::Open));
    send(&mut ns, 2, Zsa::Reset).expect("reset");
    send_all(&mut ns, Zsa::Open).expect("two closed zones fit two open resources");
    assert_eq!((state(&ns, 0), state(&ns, 1)), (S::ExplicitlyOpened, S::ExplicitlyOpened));
}

#[test]
fn power_cycle_applies_the_controller_reset_rule() {
    let mut ns = fresh();
    write_zone(&mut ns, 0, 1).expect("write");
    send(&mut ns, 1, Zsa::Open).expect("open");
    send(&mut ns, 2, Zsa::Open).expect("open");
    write_zone(&mut ns, 2, 1).expect("write");
    write_zone(&mut ns, 3, 1).expect("write");
    send(&mut ns, 3, Zsa::Close).expect("close");
    send(&mut ns, 4, Zsa::Finish).expect("finish");
    ns.power_cycle().expect("power cycle");
    let states: Vec<S> = (0..5).map(|zone| state(&ns, zone)).collect();
    assert_eq!(states, vec![S::Closed, S::Empty, S::Closed, S::Closed, S::Full]);
    assert_eq!((ns.open_zones(), ns.active_zones()), (0, 3));
}

#[test]
fn injecting_the_same_fault_again_clears_it() {
    let mut ns = limited();
    write_zone(&mut ns, 0, 3).expect("write");
    ns.inject_zone_state(0, S::ReadOnly).expect("inject");
    assert_eq!((ns.open_zones(), ns.active_zones()), (0, 0), "a faulted zone gives up its resources");
    ns.inject_zone_state(0, S::ReadOnly).expect("inject again");
    assert_eq!((state(&ns, 0), wp(&ns, 0)), (S::Empty, 0));
    assert!(ns.inject_zone_state(99, S::Offline).is_err());
    assert!(ns.inject_zone_state(1, S::Full).is_err());
}

//! Property test with a failing medium: a namespace over a `FaultyStore` that fails after a drawn number of
//! operations runs the same random commands as a shadow namespace over a healthy store, which skips the
//! commands that failed. A failed command must change nothing (reports and counts equal the shadow's), and every
//! block acknowledged before or after the fault must read back once the store heals. proptest prints the
//! countdown and command list that fail.

use proptest::prelude::*;
use zonelab_zns::{
    ByteSize, FaultyStore, MemoryStore, NamespaceConfig, ReportFilter, Status, ZoneSendAction, ZonedNamespace,
};

#[derive(Clone, Debug)]
enum Op {
    Write { zone: u32, blocks: u64 },
    Append { zone: u32, blocks: u64 },
    Zone { zone: u32, action: ZoneSendAction },
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..6u32, 1..5u64).prop_map(|(zone, blocks)| Op::Write { zone, blocks }),
        3 => (0..6u32, 1..5u64).prop_map(|(zone, blocks)| Op::Append { zone, blocks }),
        2 => (0..6u32, prop_oneof![
            Just(ZoneSendAction::Reset),
            Just(ZoneSendAction::Finish),
            Just(ZoneSendAction::Open),
            Just(ZoneSendAction::Close)
        ])
        .prop_map(|(zone, action)| Op::Zone { zone, action }),
        1 => Just(Op::Flush),
    ]
}

fn config() -> NamespaceConfig {
    NamespaceConfig {
        zones: 6,
        zone_size: ByteSize(64 << 10),
        lba_size: 512,
        max_open: 2,
        max_active: 3,
        mdts: ByteSize(0),
        ..NamespaceConfig::default()
    }
}

fn run<S: zonelab_zns::MediaStore>(ns: &mut ZonedNamespace<S>, op: &Op, step: u8) -> Result<(), Status> {
    let geometry = *ns.geometry();
    let start = |zone| geometry.zone_start_lba(zone);
    let data = |blocks: u64| vec![step | 1; (blocks << geometry.lba_shift) as usize];
    match *op {
        Op::Write { zone, blocks } => {
            let wp = ns.zone(zone).wp_lba;
            let wp = if wp == zonelab_zns::WP_INVALID { start(zone) } else { wp };
            ns.write(wp, &data(blocks))
        }
        Op::Append { zone, blocks } => ns.append(start(zone), &data(blocks)).map(|_| ()),
        Op::Zone { zone, action } => ns.zone_management_send(start(zone), action, false),
        Op::Flush => ns.flush(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn a_failed_command_changes_nothing_and_acknowledged_data_survives(
        fail_after in 0..40u64,
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let geometry = config().validate().expect("geometry");
        let bytes = geometry.nsze_lba << geometry.lba_shift;
        let mut faulty = ZonedNamespace::new(config(), FaultyStore::new(MemoryStore::new(bytes), fail_after))
            .expect("namespace");
        let mut shadow = ZonedNamespace::new(config(), MemoryStore::new(bytes)).expect("namespace");
        for (step, op) in ops.iter().enumerate() {
            let step = step as u8;
            match run(&mut faulty, op, step) {
                Err(Status::WriteFault | Status::UnrecoveredReadError) => {}
                result => prop_assert_eq!(result, run(&mut shadow, op, step), "step {}: {:?}", step, op),
            }
            let reports = (
                faulty.report_zones(0, ReportFilter::All, false, None).expect("report"),
                shadow.report_zones(0, ReportFilter::All, false, None).expect("report"),
            );
            prop_assert_eq!(&reports.0, &reports.1, "step {}: {:?} left the zones unlike the shadow's", step, op);
            prop_assert_eq!(
                (faulty.open_zones(), faulty.active_zones()),
                (shadow.open_zones(), shadow.active_zones())
            );
        }
        for zone in 0..geometry.zones {
            let written = shadow.written_lba(zone);
            if written == 0 {
                continue;
            }
            let mut got = vec![0u8; (written << geometry.lba_shift) as usize];
            let mut want = got.clone();
            let start = geometry.zone_start_lba(zone);
            faulty.read(start, &mut got).expect("read after the faults");
            shadow.read(start, &mut want).expect("read");
            prop_assert!(got == want, "zone {} lost acknowledged data", zone);
        }
    }
}

#[test]
fn a_failed_store_write_keeps_its_host_cause_beside_the_status() {
    let mut ns = ZonedNamespace::new(config(), FaultyStore::new(MemoryStore::new(6 * (64 << 10)), 1)).expect("ns");
    ns.write(0, &[1u8; 512]).expect("the first write succeeds");
    assert!(ns.take_host_fault().is_none(), "no fault yet");
    assert_eq!(ns.write(1, &[2u8; 512]), Err(Status::WriteFault));
    let fault = ns.take_host_fault().expect("the cause is kept");
    assert_eq!(fault.to_string(), "host file system full (ENOSPC) writing data");
    assert!(ns.take_host_fault().is_none(), "a cause is handed out once");
    assert_eq!(ns.flush(), Err(Status::WriteFault), "a sync fails too");
    assert!(ns.take_host_fault().is_some_and(|fault| fault.writing));
}

//! A conventional namespace's commands: what it takes (read, write in any order, write zeroes, deallocate,
//! flush), what it refuses and with which status, and a property test against a plain array of blocks.

use proptest::prelude::*;
use zonelab_zns::{
    ByteSize, Command, ConventionalConfig, ConventionalNamespace, MemoryStore, NamespaceKind, ReceiveAction,
    ReportFilter, Status, ZoneSendAction,
};

const BLOCKS: u64 = 256;

fn namespace() -> ConventionalNamespace<MemoryStore> {
    let config =
        ConventionalConfig { capacity: ByteSize(BLOCKS * 4096), mdts: ByteSize(16 << 10), ..Default::default() };
    ConventionalNamespace::new(config, MemoryStore::new(BLOCKS * 4096)).expect("valid")
}

fn read(ns: &mut ConventionalNamespace<MemoryStore>, slba: u64, nlb: u64) -> Result<Vec<u8>, Status> {
    let mut buf = vec![0xeeu8; (nlb * 4096) as usize];
    ns.execute(Command::Read { slba, buf: &mut buf }).map(|_| buf)
}

#[test]
fn blocks_are_written_in_any_order_and_read_back() {
    let mut ns = namespace();
    assert_eq!(ns.geometry().kind, NamespaceKind::Conventional);
    for slba in [200, 3, 100, 3] {
        ns.execute(Command::Write { slba, data: &[slba as u8; 8192] }).expect("any block, any order, twice");
    }
    assert_eq!(read(&mut ns, 3, 2).expect("read"), vec![3u8; 8192]);
    assert_eq!(read(&mut ns, 200, 1).expect("read"), vec![200u8; 4096]);
    assert_eq!(read(&mut ns, 50, 1).expect("read"), vec![0u8; 4096], "never written: zeros");
}

#[test]
fn write_zeroes_and_deallocate_read_as_zeros_and_pass_mdts() {
    let mut ns = namespace();
    ns.execute(Command::Write { slba: 10, data: &[7; 16384] }).expect("write");
    ns.execute(Command::WriteZeroes { slba: 10, nlb: 1 }).expect("write zeroes");
    ns.execute(Command::Deallocate { slba: 12, nlb: 64 }).expect("deallocate past MDTS: no data moves");
    let back = read(&mut ns, 10, 4).expect("read");
    assert_eq!(back[..4096], [0; 4096]);
    assert_eq!(back[4096..8192], [7; 4096], "block 11 untouched");
    assert!(back[8192..].iter().all(|&b| b == 0));
    ns.execute(Command::Flush).expect("flush");
}

#[test]
fn bad_commands_get_the_nvm_command_sets_statuses() {
    let mut ns = namespace();
    let write = |ns: &mut ConventionalNamespace<MemoryStore>, slba, len: usize| {
        ns.execute(Command::Write { slba, data: &vec![1; len] })
    };
    assert_eq!(write(&mut ns, BLOCKS - 1, 8192), Err(Status::LbaOutOfRange), "past the end");
    assert_eq!(write(&mut ns, u64::MAX, 4096), Err(Status::LbaOutOfRange), "an LBA that overflows");
    assert_eq!(write(&mut ns, 0, 20480), Err(Status::InvalidField), "above MDTS (16 KiB)");
    assert_eq!(write(&mut ns, 0, 1000), Err(Status::InvalidField), "not whole blocks");
    assert_eq!(write(&mut ns, 0, 0), Err(Status::InvalidField), "no data");
    assert_eq!(ns.execute(Command::Deallocate { slba: BLOCKS, nlb: 1 }), Err(Status::LbaOutOfRange));
    assert_eq!(ns.execute(Command::WriteZeroes { slba: 0, nlb: 0 }), Err(Status::InvalidField));
    assert_eq!(ns.execute(Command::ReadDiscard { slba: 0, nlb: 5 }), Err(Status::InvalidField), "above MDTS");
    // Zone commands do not exist here (the drive's conventional namespace answers Invalid Opcode).
    assert_eq!(ns.execute(Command::Append { zslba: 0, data: &[0; 4096] }), Err(Status::InvalidOpcode));
    let send = Command::ZoneManagementSend { slba: 0, action: ZoneSendAction::Reset, select_all: true };
    assert_eq!(ns.execute(send), Err(Status::InvalidOpcode));
    let mut buf = [0u8; 128];
    let receive = Command::ZoneManagementReceive {
        slba: 0,
        action: ReceiveAction::ReportZones,
        filter: ReportFilter::All,
        partial: false,
        buf: &mut buf,
    };
    assert_eq!(ns.execute(receive), Err(Status::InvalidOpcode));
    assert_eq!(read(&mut ns, 0, 1).expect("nothing was written"), vec![0; 4096]);
}

#[test]
fn a_bad_configuration_names_its_field() {
    let refused = |config: ConventionalConfig| config.validate().expect_err("refused").field;
    assert_eq!(refused(ConventionalConfig { capacity: ByteSize(0), ..Default::default() }), "capacity");
    assert_eq!(refused(ConventionalConfig { capacity: ByteSize(6000), ..Default::default() }), "capacity");
    assert_eq!(refused(ConventionalConfig { lba_size: 1024, ..Default::default() }), "lba-size");
    assert_eq!(refused(ConventionalConfig { mdts: ByteSize(6000), ..Default::default() }), "mdts");
}

#[derive(Clone, Debug)]
enum Op {
    Write { slba: u64, nlb: u64, byte: u8 },
    Zeroes { slba: u64, nlb: u64 },
    Deallocate { slba: u64, nlb: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    let range = (0..BLOCKS, 1..5u64);
    prop_oneof![
        (range.clone(), any::<u8>()).prop_map(|((slba, nlb), byte)| Op::Write { slba, nlb, byte }),
        range.clone().prop_map(|(slba, nlb)| Op::Zeroes { slba, nlb }),
        (0..BLOCKS, 1..100u64).prop_map(|(slba, nlb)| Op::Deallocate { slba, nlb }),
    ]
}

proptest! {
    /// Every block reads what was last written to it (zeros after write zeroes or deallocate); a command past
    /// the end fails and changes nothing.
    #[test]
    fn every_block_reads_its_last_write(ops in proptest::collection::vec(op(), 1..200)) {
        let mut ns = namespace();
        let mut model = vec![0u8; BLOCKS as usize];
        for op in &ops {
            let (slba, nlb, byte, result) = match *op {
                Op::Write { slba, nlb, byte } => {
                    let data = vec![byte; (nlb * 4096) as usize];
                    (slba, nlb, byte, ns.execute(Command::Write { slba, data: &data }))
                }
                Op::Zeroes { slba, nlb } => (slba, nlb, 0, ns.execute(Command::WriteZeroes { slba, nlb })),
                Op::Deallocate { slba, nlb } => (slba, nlb, 0, ns.execute(Command::Deallocate { slba, nlb })),
            };
            if slba + nlb <= BLOCKS {
                prop_assert!(result.is_ok(), "{:?}: {:?}", op, result);
                model[slba as usize..(slba + nlb) as usize].fill(byte);
            } else {
                prop_assert_eq!(result, Err(Status::LbaOutOfRange));
            }
        }
        for block in 0..BLOCKS {
            let back = read(&mut ns, block, 1).expect("read");
            prop_assert!(back.iter().all(|&b| b == model[block as usize]), "block {}", block);
        }
    }
}

//! Metadata under damage, over many seeds: files written and fsynced around a checkpoint, then one seeded bit
//! flipped behind the device's back in a checkpoint zone or in a node block (the blocks that carry a CRC). The
//! contract: a mount either recovers every file with at least what its last fsync covered, or fails with an
//! error; it never mounts clean with a file missing or short. A failure prints the seed.

mod common;

use std::collections::BTreeMap;

use common::{bytes, device, options, run};
use zonelab_logfs::{LogFs, LogFsError};
use zonelab_runtime::rng::SplitMix64;
use zonelab_runtime::IoData;
use zonelab_zns::MediaStore;

const BLOCK: u64 = 4096;
/// The first bytes of every node block (format.rs's NODE_MAGIC, little-endian).
const NODE_MAGIC: &[u8] = b"LFSN";

/// Twelve files: the first six written and fsynced before a checkpoint (`sync`), all twelve fsynced after it
/// (so roll-forward has node blocks to find). Returns each file's fsynced content.
async fn populate(fs: LogFs<zonelab_runtime::Host<zonelab_zns::MemoryStore>>, seed: u64) -> BTreeMap<String, Vec<u8>> {
    let mut model = BTreeMap::new();
    for round in 0..2 {
        for file in 0..12 {
            if round == 0 && file >= 6 {
                continue;
            }
            let name = format!("f{file:02}");
            if !fs.list().contains(&name) {
                fs.create(&name).await.expect("create");
            }
            let content: &mut Vec<u8> = model.entry(name.clone()).or_default();
            let len = 2000 + (seed * 31 + file as u64 * 977 + round) % 12_000;
            let data = bytes(file * 2 + round as usize, content.len() as u64, len);
            fs.write(&name, content.len() as u64, IoData::Bytes(data.clone())).await.expect("write");
            fs.fsync(&name).await.expect("fsync");
            content.extend(data);
        }
        if round == 0 {
            fs.sync().await.expect("checkpoint");
        }
    }
    model
}

/// The blocks a bit flip may hit: every written block of the checkpoint zones, and every node block.
fn metadata_blocks(device: &zonelab_device::Device<zonelab_zns::MemoryStore>) -> Vec<u64> {
    let geometry = *device.namespace().geometry();
    let mut blocks = Vec::new();
    for zone in 0..geometry.zones {
        let descriptor = device.namespace().zone(zone);
        let written = descriptor.wp_lba().map_or(descriptor.capacity_lba, |wp| wp - descriptor.start_lba);
        for offset in 0..written {
            let block = descriptor.start_lba + offset;
            let mut bytes = vec![0u8; BLOCK as usize];
            device.namespace().store().read_at(block * BLOCK, &mut bytes).expect("read");
            if zone < 2 || bytes.starts_with(NODE_MAGIC) {
                blocks.push(block);
            }
        }
    }
    blocks
}

#[test]
fn a_flipped_bit_in_metadata_is_recovered_whole_or_refused_never_lost_in_silence() {
    let mut refused = 0;
    for seed in 0..60 {
        let (model, mut device) = run(device(40, true), seed, |host| async move {
            let fs = LogFs::format(host, options()).await.expect("format");
            populate(fs, seed).await
        });
        let candidates = metadata_blocks(&device);
        let mut rng = SplitMix64::split(seed, "logfs damage");
        let block = candidates[rng.below(candidates.len() as u64) as usize];
        let at = block * BLOCK + rng.below(BLOCK);
        let mut byte = [0u8];
        device.store_mut().read_at(at, &mut byte).expect("read");
        byte[0] ^= 1 << rng.below(8);
        device.store_mut().write_at(at, &byte).expect("write");
        let (mounted, _) = run(device, seed, |host| async move {
            let (fs, _) = LogFs::mount(host, options()).await?;
            let mut files = BTreeMap::new();
            for name in fs.list() {
                let size = fs.stat(&name)?.size;
                files.insert(name.clone(), fs.read(&name, 0, size).await?);
            }
            Ok::<_, LogFsError>(files)
        });
        match mounted {
            Ok(files) => {
                for (name, content) in &model {
                    let got = files.get(name).unwrap_or_else(|| panic!("seed {seed}: block {block}: {name} lost"));
                    assert!(
                        got.len() >= content.len() && got[..content.len()] == content[..],
                        "seed {seed}: a flip in block {block} left {name} short or changed in a clean mount"
                    );
                }
            }
            Err(error) => {
                refused += 1;
                assert!(
                    matches!(error, LogFsError::Corrupt(_) | LogFsError::NotFormatted(_)),
                    "seed {seed}: block {block}: {error}"
                );
            }
        }
    }
    eprintln!("refused {refused} of 60");
    assert!(refused >= 6, "the flips reached live metadata: {refused} refused");
}

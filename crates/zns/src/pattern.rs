//! Self-verifying block contents: each block carries its own LBA and a byte pattern derived from it, so that a
//! reader can tell, block by block, whether what it reads is what a writer of this pattern put there. Used by
//! `zonelab churn` and the crash tests.

/// Fills `buf`, which starts at `first_lba` and holds whole `lba_size`-byte blocks, with the stamp of each.
pub fn stamp_blocks(first_lba: u64, lba_size: usize, buf: &mut [u8]) {
    for (lba, block) in (first_lba..).zip(buf.chunks_exact_mut(lba_size)) {
        block[..8].copy_from_slice(&lba.to_le_bytes());
        let seed = lba.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for (i, byte) in block[8..].iter_mut().enumerate() {
            *byte = (seed >> ((i % 8) * 8)) as u8 ^ (i as u8);
        }
    }
}

/// The first LBA in `buf` (starting at `first_lba`) whose block is not its stamp, if any.
pub fn first_unstamped_block(first_lba: u64, lba_size: usize, buf: &[u8]) -> Option<u64> {
    let mut expected = vec![0u8; lba_size];
    (first_lba..).zip(buf.chunks_exact(lba_size)).find_map(|(lba, block)| {
        stamp_blocks(lba, lba_size, &mut expected);
        (block != expected.as_slice()).then_some(lba)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_verify_and_differ_per_block() {
        let mut buf = vec![0u8; 4 * 512];
        stamp_blocks(100, 512, &mut buf);
        assert_eq!(first_unstamped_block(100, 512, &buf), None);
        assert_ne!(buf[..512], buf[512..1024]);
        assert_eq!(first_unstamped_block(101, 512, &buf), Some(101));
        buf[3 * 512 + 100] ^= 1;
        assert_eq!(first_unstamped_block(100, 512, &buf), Some(103));
    }
}

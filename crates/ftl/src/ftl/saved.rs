//! The FTL's state as a device image keeps it between processes (`ftl.state`): the logical-to-physical map,
//! each block's state, owner, pages written and erases, the free list's order and each stream's open block,
//! so that a namespace preconditioned or aged by one process is in the same steady state in the next. Times
//! are not kept (each process's device time starts at 0), nor the write buffer and read-ahead, which a close
//! drains. The physical map and valid counts follow from the logical map.
//!
//! Layout, little-endian: the magic `ZLFTL\0\0\x01`; logical pages (u64), blocks, pages per block and owners
//! (u32 each); the logical map (u32 a page, `u32::MAX` unmapped); per block its state (u8: 0 free, 1 open,
//! 2 full), owner, pages written and erase count (u32 each); the free list (u32 count, then blocks); each
//! owner's open block (u32, `u32::MAX` none); a CRC-32C of everything before it.

use std::collections::VecDeque;

use super::{Ftl, OpenBlock, INVALID, UNMAPPED};
use crate::blocks::BlockState;
use crate::config::{FtlConfig, FtlError};

const MAGIC: &[u8; 8] = b"ZLFTL\0\0\x01";

impl Ftl {
    /// The state to keep (see the module's doc).
    pub fn saved(&self) -> Vec<u8> {
        let blocks = self.blocks.state.len();
        let mut out = Vec::with_capacity(32 + self.l2p.len() * 4 + blocks * 17 + self.open.len() * 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.config.logical_pages.to_le_bytes());
        for value in [blocks as u32, self.config.pages_per_block, self.open.len() as u32] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        self.l2p.iter().for_each(|ppn| out.extend_from_slice(&ppn.to_le_bytes()));
        for block in 0..blocks {
            let (state, owner) = match self.blocks.state[block] {
                BlockState::Free => (0u8, 0),
                BlockState::Open(owner) => (1, owner),
                BlockState::Full => (2, 0),
            };
            out.push(state);
            for value in [owner, self.blocks.written[block], self.blocks.erase_count[block]] {
                out.extend_from_slice(&value.to_le_bytes());
            }
        }
        out.extend_from_slice(&(self.blocks.free.len() as u32).to_le_bytes());
        self.blocks.free.iter().for_each(|block| out.extend_from_slice(&block.to_le_bytes()));
        for open in &self.open {
            out.extend_from_slice(&open.map_or(u32::MAX, |open| open.block).to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// The FTL `saved` describes, for `config`; an error names what does not fit (another geometry, a torn or
    /// altered file, a state whose invariants do not hold).
    pub fn from_saved(config: FtlConfig, bytes: &[u8]) -> Result<Ftl, FtlError> {
        let corrupt = |reason: String| FtlError::Saved(reason);
        let (body, crc) = bytes.split_at_checked(bytes.len().saturating_sub(4)).unwrap_or((&[], &[]));
        if crc.len() != 4 || crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
            return Err(corrupt(format!("its checksum does not match its {} bytes", bytes.len())));
        }
        let mut reader = Reader { bytes: body, at: 0 };
        if reader.take(8)? != MAGIC {
            return Err(corrupt("it does not start with the FTL state's magic".into()));
        }
        let mut ftl = Ftl::new(config)?;
        let shape = (reader.u64()?, reader.u32()?, reader.u32()?, reader.u32()?);
        let expected = (
            ftl.config.logical_pages,
            ftl.blocks.state.len() as u32,
            ftl.config.pages_per_block,
            ftl.open.len() as u32,
        );
        if shape != expected {
            return Err(corrupt(format!(
                "it is of {} logical pages, {} blocks of {} pages and {} writers; the namespace has {}, {}, {} and {}",
                shape.0, shape.1, shape.2, shape.3, expected.0, expected.1, expected.2, expected.3
            )));
        }
        let physical_pages = ftl.p2l.len() as u32;
        for lpn in 0..ftl.l2p.len() {
            let ppn = reader.u32()?;
            if ppn != UNMAPPED && ppn >= physical_pages {
                return Err(corrupt(format!("logical page {lpn} maps past the {physical_pages} physical pages")));
            }
            ftl.l2p[lpn] = ppn;
        }
        for block in 0..ftl.blocks.state.len() {
            let (state, owner) = (reader.u8()?, reader.u32()?);
            ftl.blocks.state[block] = match state {
                0 => BlockState::Free,
                1 if owner < ftl.open.len() as u32 => BlockState::Open(owner),
                2 => BlockState::Full,
                _ => return Err(corrupt(format!("block {block} has state {state} of owner {owner}"))),
            };
            ftl.blocks.written[block] = reader.u32()?;
            ftl.blocks.erase_count[block] = reader.u32()?;
            if ftl.blocks.written[block] > ftl.config.pages_per_block {
                return Err(corrupt(format!("block {block} has more pages written than it holds")));
            }
        }
        let free = reader.u32()? as usize;
        if free > ftl.blocks.state.len() {
            return Err(corrupt(format!("its free list of {free} blocks is longer than the block table")));
        }
        ftl.blocks.free = (0..free).map(|_| reader.u32()).collect::<Result<VecDeque<u32>, _>>()?;
        let mut listed = vec![false; ftl.blocks.state.len()];
        for &block in &ftl.blocks.free {
            if ftl.blocks.state.get(block as usize) != Some(&BlockState::Free) || listed[block as usize] {
                return Err(corrupt(format!("its free list names block {block}, which is not free or listed twice")));
            }
            listed[block as usize] = true;
        }
        if let Some(block) =
            (0..listed.len()).find(|&block| ftl.blocks.state[block] == BlockState::Free && !listed[block])
        {
            return Err(corrupt(format!("free block {block} is not on the free list")));
        }
        for owner in 0..ftl.open.len() {
            ftl.open[owner] = match reader.u32()? {
                u32::MAX => None,
                block if (block as usize) < ftl.blocks.state.len() => Some(OpenBlock { block, unit_ready_ns: 0 }),
                block => {
                    let blocks = ftl.blocks.state.len();
                    return Err(corrupt(format!("writer {owner}'s open block {block} is past the {blocks} blocks")));
                }
            };
        }
        if reader.at != body.len() {
            return Err(corrupt(format!("{} bytes follow the state", body.len() - reader.at)));
        }
        for (lpn, &ppn) in ftl.l2p.iter().enumerate() {
            if ppn == UNMAPPED {
                continue;
            }
            if ftl.p2l[ppn as usize] != INVALID {
                return Err(corrupt(format!("two logical pages map to physical page {ppn}")));
            }
            ftl.p2l[ppn as usize] = lpn as u32;
            ftl.blocks.valid[(ppn / ftl.config.pages_per_block) as usize] += 1;
        }
        ftl.check().map_err(corrupt)?;
        Ok(ftl)
    }
}

/// Reads the saved state's fields in order; running out is an error that says so.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, count: usize) -> Result<&[u8], FtlError> {
        let bytes = self
            .bytes
            .get(self.at..self.at + count)
            .ok_or_else(|| FtlError::Saved(format!("it ends at byte {} inside its fields", self.bytes.len())))?;
        self.at += count;
        Ok(bytes)
    }

    fn u8(&mut self) -> Result<u8, FtlError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, FtlError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Result<u64, FtlError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Untimed;

    fn aged() -> Ftl {
        let config = FtlConfig::with_over_provisioning(4 << 20, 0.25, 64, 4);
        let mut ftl = Ftl::new(config).expect("config");
        let pages = ftl.config.logical_pages;
        let random = (0..3 * pages).map(|i| (i * 7919 + 13) % pages);
        ftl.precondition((0..pages).chain(random)).expect("in range");
        for lpn in (0..pages).step_by(5) {
            ftl.trim(lpn).expect("in range");
        }
        ftl
    }

    #[test]
    fn a_saved_ftl_comes_back_as_it_was_and_goes_on_the_same() {
        let mut ftl = aged();
        let bytes = ftl.saved();
        let mut restored = Ftl::from_saved(ftl.config.clone(), &bytes).expect("restored");
        assert_eq!(restored.l2p, ftl.l2p);
        assert_eq!(restored.p2l, ftl.p2l);
        assert_eq!(restored.blocks.valid, ftl.blocks.valid);
        assert_eq!(restored.blocks.free, ftl.blocks.free);
        assert_eq!(restored.saved(), bytes);
        // Further writes place pages and collect garbage exactly as in the original.
        for lpn in (0..ftl.config.logical_pages).rev().step_by(3) {
            ftl.write(&mut Untimed, 0, lpn, 0).expect("write");
            restored.write(&mut Untimed, 0, lpn, 0).expect("write");
        }
        assert_eq!(restored.saved(), ftl.saved());
        assert!(ftl.counters().gc_pages_moved > 0, "garbage collection ran: {:?}", ftl.counters());
    }

    #[test]
    fn a_damaged_or_foreign_state_is_refused_with_what_is_wrong() {
        let ftl = aged();
        let bytes = ftl.saved();
        let mut flipped = bytes.clone();
        flipped[40] ^= 1;
        let error = Ftl::from_saved(ftl.config.clone(), &flipped).err().expect("refused");
        assert!(error.to_string().contains("checksum"), "{error}");
        let error = Ftl::from_saved(ftl.config.clone(), &bytes[..100]).err().expect("refused");
        assert!(error.to_string().contains("checksum"), "{error}");
        let other = FtlConfig::with_over_provisioning(8 << 20, 0.25, 64, 4);
        let error = Ftl::from_saved(other, &bytes).err().expect("refused");
        assert!(error.to_string().contains("logical pages"), "{error}");
        // A state whose checksum holds but whose map does not: logical pages 1 and 2 (neither trimmed) on one
        // physical page.
        assert!(ftl.lookup(1).is_some() && ftl.lookup(2).is_some());
        let mut doubled = bytes[..bytes.len() - 4].to_vec();
        let first = 28 + 4;
        let mapped = doubled[first..first + 4].to_vec();
        doubled[first + 4..first + 8].copy_from_slice(&mapped);
        let crc = crc32c::crc32c(&doubled);
        doubled.extend_from_slice(&crc.to_le_bytes());
        let error = Ftl::from_saved(ftl.config.clone(), &doubled).err().expect("refused");
        assert!(error.to_string().contains("physical page"), "{error}");
        // A valid checksum over an open block past the block table: refused, not a panic.
        let writers = ftl.open.len();
        let mut far = bytes[..bytes.len() - 4].to_vec();
        let last_open = far.len() - 4;
        assert!(writers > 0);
        far[last_open..].copy_from_slice(&1_000_000u32.to_le_bytes());
        let crc = crc32c::crc32c(&far);
        far.extend_from_slice(&crc.to_le_bytes());
        let error = Ftl::from_saved(ftl.config.clone(), &far).err().expect("refused");
        assert!(error.to_string().contains("open block 1000000 is past the"), "{error}");
    }
}

//! Little-endian fields of the on-media formats (zone reports, the zone journal, and the layers above).

/// The little-endian u64 at `at`; the caller has checked that 8 bytes are there.
pub fn u64_le(bytes: &[u8], at: usize) -> u64 {
    let mut le = [0u8; 8];
    le.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(le)
}

/// The little-endian u32 at `at`; the caller has checked that 4 bytes are there.
pub fn u32_le(bytes: &[u8], at: usize) -> u32 {
    let mut le = [0u8; 4];
    le.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(le)
}

//! What logfs writes on the device, block by block: node blocks (an inode or a direct node: a file's block
//! addresses), directory buckets (the root directory's entries) and checkpoint records. Every kind starts with
//! a magic number and a CRC-32C of the rest, so recovery never believes a torn or foreign block.

/// The file system block, as F2FS's: 4 KiB.
pub const BLOCK: u64 = 4096;

/// A block address in the whole device: zone * blocks per zone + offset.
pub type Addr = u32;
/// No block: a hole, or a node never written.
pub const NULL_ADDR: Addr = u32::MAX;

/// Block addresses an inode node holds: F2FS's DEF_ADDRS_PER_INODE.
pub const INODE_ADDRS: u64 = 923;
/// Block addresses a direct node holds: F2FS's ADDRS_PER_BLOCK is 1018; our header is larger than its footer.
pub const DIRECT_ADDRS: u64 = 1015;

const NODE_MAGIC: u32 = 0x4e53_464c; // "LFSN"
const BUCKET_MAGIC: u32 = 0x4253_464c; // "LFSB"
const CHECKPOINT_MAGIC: u32 = 0x4353_464c; // "LFSC"

/// Written by fsync (roll-forward recovers it).
pub const FLAG_FSYNC: u8 = 1;
/// The last node of one fsync: a batch without it is not recovered.
pub const FLAG_FSYNC_LAST: u8 = 2;
/// The inode's directory entry is not in a checkpoint yet: recovery adds it from the node's name.
pub const FLAG_DENTRY: u8 = 4;

/// The node that holds the address of file block `block`, and the slot in it.
pub fn node_of(block: u64) -> (u32, usize) {
    if block < INODE_ADDRS {
        (0, block as usize)
    } else {
        let rest = block - INODE_ADDRS;
        (1 + (rest / DIRECT_ADDRS) as u32, (rest % DIRECT_ADDRS) as usize)
    }
}

/// The first file block node `index` covers, and how many it covers.
pub fn node_range(index: u32) -> (u64, u64) {
    if index == 0 {
        (0, INODE_ADDRS)
    } else {
        (INODE_ADDRS + u64::from(index - 1) * DIRECT_ADDRS, DIRECT_ADDRS)
    }
}

/// Nodes a file of `blocks` blocks needs (at least its inode).
pub fn nodes_for(blocks: u64) -> u32 {
    if blocks <= INODE_ADDRS {
        1
    } else {
        1 + (blocks - INODE_ADDRS).div_ceil(DIRECT_ADDRS) as u32
    }
}

/// What an inode node holds beyond addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InodeHead {
    pub size: u64,
    pub mtime_ns: u64,
    pub directory: bool,
    /// The name in the root directory (F2FS keeps i_name too, for the same reason: roll-forward recovers the
    /// directory entry of a file created after the last checkpoint from it).
    pub name: String,
}

/// One node block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeBlock {
    pub ino: u32,
    pub index: u32,
    /// The checkpoint this node was written after.
    pub checkpoint: u64,
    /// Position in the order nodes were written.
    pub seq: u64,
    pub flags: u8,
    pub inode: Option<InodeHead>,
    pub addrs: Vec<Addr>,
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// A node's addresses in one pass over room made once: a node is written at every fsync, and a push per
    /// address was a quarter of a random-overwrite run.
    fn u32s(&mut self, values: &[u32]) {
        let start = self.0.len();
        self.0.resize(start + 4 * values.len(), 0);
        for (slot, value) in self.0[start..].chunks_exact_mut(4).zip(values) {
            slot.copy_from_slice(&value.to_le_bytes());
        }
    }
    fn name(&mut self, name: &str) {
        self.u8(name.len() as u8);
        self.0.extend_from_slice(name.as_bytes());
    }
    /// Seals: magic, CRC of everything after the CRC field, padded to whole blocks.
    fn seal(mut self, magic: u32) -> Vec<u8> {
        let len = self.0.len().div_ceil(BLOCK as usize) * BLOCK as usize;
        self.0.resize(len, 0);
        self.0[0..4].copy_from_slice(&magic.to_le_bytes());
        let crc = crc32c::crc32c(&self.0[8..]);
        self.0[4..8].copy_from_slice(&crc.to_le_bytes());
        self.0
    }
}

/// A writer with room for a block, which most records fill.
fn writer() -> Writer {
    let mut bytes = Vec::with_capacity(BLOCK as usize);
    bytes.resize(8, 0);
    Writer(bytes)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// Checks magic and CRC over `bytes` (whole blocks).
    fn open(bytes: &'a [u8], magic: u32) -> Option<Reader<'a>> {
        if bytes.len() < 8 || u32::from_le_bytes(bytes[0..4].try_into().ok()?) != magic {
            return None;
        }
        let crc = u32::from_le_bytes(bytes[4..8].try_into().ok()?);
        (crc32c::crc32c(&bytes[8..]) == crc).then_some(Reader { bytes, at: 8 })
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.at..self.at + n)?;
        self.at += n;
        Some(slice)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes(b.try_into().expect("2 bytes")))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    fn name(&mut self) -> Option<String> {
        let len = self.u8()? as usize;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }
}

impl NodeBlock {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = writer();
        w.u32(self.ino);
        w.u32(self.index);
        w.u64(self.checkpoint);
        w.u64(self.seq);
        w.u8(self.flags);
        if let Some(head) = &self.inode {
            w.u64(head.size);
            w.u64(head.mtime_ns);
            w.u8(u8::from(head.directory));
            w.name(&head.name);
        }
        w.u16(self.addrs.len() as u16);
        w.u32s(&self.addrs);
        let sealed = w.seal(NODE_MAGIC);
        debug_assert_eq!(sealed.len() as u64, BLOCK, "a node fits one block");
        sealed
    }

    /// Whether `bytes` starts as a node block does, whether or not the rest checks.
    pub fn has_magic(bytes: &[u8]) -> bool {
        bytes.get(..4) == Some(&NODE_MAGIC.to_le_bytes()[..])
    }

    pub fn decode(bytes: &[u8]) -> Option<NodeBlock> {
        let mut r = Reader::open(bytes, NODE_MAGIC)?;
        let (ino, index, checkpoint, seq, flags) = (r.u32()?, r.u32()?, r.u64()?, r.u64()?, r.u8()?);
        let inode = if index == 0 {
            Some(InodeHead { size: r.u64()?, mtime_ns: r.u64()?, directory: r.u8()? != 0, name: r.name()? })
        } else {
            None
        };
        let count = r.u16()? as usize;
        let addrs = (0..count).map(|_| r.u32()).collect::<Option<Vec<_>>>()?;
        Some(NodeBlock { ino, index, checkpoint, seq, flags, inode, addrs })
    }
}

/// Bytes an entry takes in a directory bucket.
pub fn entry_bytes(name: &str) -> usize {
    4 + 1 + name.len()
}

/// Room for entries in one bucket block.
pub const BUCKET_ROOM: usize = BLOCK as usize - 8 - 2;

pub fn encode_bucket(entries: &[(&str, u32)]) -> Vec<u8> {
    let mut w = writer();
    w.u16(entries.len() as u16);
    for (name, ino) in entries {
        w.u32(*ino);
        w.name(name);
    }
    w.seal(BUCKET_MAGIC)
}

pub fn decode_bucket(bytes: &[u8]) -> Option<Vec<(String, u32)>> {
    let mut r = Reader::open(bytes, BUCKET_MAGIC)?;
    let count = r.u16()?;
    (0..count).map(|_| r.u32().and_then(|ino| Some((r.name()?, ino)))).collect()
}

/// Where a node log stood when a checkpoint was taken (roll-forward starts there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogPosition {
    pub zone: u32,
    pub offset: u32,
}

/// A checkpoint: the node address table (every inode's node addresses) and where the node logs stood.
/// Everything else (block validity, sizes, names) is rebuilt from the nodes and the directory at mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub version: u64,
    pub next_ino: u32,
    pub next_seq: u64,
    pub node_logs: Vec<Option<LogPosition>>,
    pub nat: Vec<(u32, Vec<Addr>)>,
}

impl Checkpoint {
    /// The record in whole blocks: a header block (magic, CRC, payload length) and the payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut payload = Writer(Vec::new());
        payload.u64(self.version);
        payload.u32(self.next_ino);
        payload.u64(self.next_seq);
        payload.u8(self.node_logs.len() as u8);
        for log in &self.node_logs {
            let LogPosition { zone, offset } = log.unwrap_or(LogPosition { zone: NULL_ADDR, offset: 0 });
            payload.u32(zone);
            payload.u32(offset);
        }
        payload.u32(self.nat.len() as u32);
        for (ino, nodes) in &self.nat {
            payload.u32(*ino);
            payload.u32(nodes.len() as u32);
            for &addr in nodes {
                payload.u32(addr);
            }
        }
        let mut header = writer();
        header.u64(payload.0.len() as u64);
        header.u32(crc32c::crc32c(&payload.0));
        let mut bytes = header.seal(CHECKPOINT_MAGIC);
        bytes.extend_from_slice(&payload.0);
        bytes.resize(bytes.len().div_ceil(BLOCK as usize) * BLOCK as usize, 0);
        bytes
    }

    /// The payload length a header block announces, in bytes.
    pub fn payload_len(header: &[u8]) -> Option<u64> {
        Reader::open(header, CHECKPOINT_MAGIC)?.u64()
    }

    /// Decodes a record from its header block and payload blocks.
    pub fn decode(header: &[u8], payload: &[u8]) -> Option<Checkpoint> {
        let mut h = Reader::open(header, CHECKPOINT_MAGIC)?;
        let (len, crc) = (h.u64()? as usize, h.u32()?);
        let payload = payload.get(..len)?;
        if crc32c::crc32c(payload) != crc {
            return None;
        }
        let mut r = Reader { bytes: payload, at: 0 };
        let (version, next_ino, next_seq) = (r.u64()?, r.u32()?, r.u64()?);
        let logs = r.u8()?;
        let mut node_logs = Vec::new();
        for _ in 0..logs {
            let (zone, offset) = (r.u32()?, r.u32()?);
            node_logs.push((zone != NULL_ADDR).then_some(LogPosition { zone, offset }));
        }
        let count = r.u32()?;
        let mut nat = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let ino = r.u32()?;
            let nodes = r.u32()?;
            nat.push((ino, (0..nodes).map(|_| r.u32()).collect::<Option<Vec<_>>>()?));
        }
        Some(Checkpoint { version, next_ino, next_seq, node_logs, nat })
    }
}

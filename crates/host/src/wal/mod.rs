//! Write-ahead logs on zones, with one API and two designs (seed 001, ZWAL; docs/host-stack.md section 2):
//!
//! - `Conventional`, the ZenFS way: the buffer is flushed as regular writes at the write pointer, one write in
//!   flight per zone;
//! - `Zwal`: dedicated zones written with zone appends, up to `queue_depth` in flight; the device may place them
//!   in any order, and the entries' sequence numbers restore it. A barrier every `barrier_bytes` waits for every
//!   outstanding append, so no entry straddles a barrier, a zone's capacity or ZASL (larger entries are split,
//!   each fragment with its own sequence number).
//!
//! The durability contract, for both: once `sync` returns, every record appended before it survives a power
//! loss; what `recover` returns is always a prefix of what was appended, with no hole, no reordering and no
//! corrupted record. After `recover`, a caller replays the records and starts a new log with `delete`, as
//! RocksDB does with a new WAL file.

mod format;

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use zonelab_runtime::{CommandQueue, IoData, Output, QueuedCommand};
use zonelab_zns::{Geometry, ReportFilter, Status, ZoneSendAction, ZoneState};

pub use format::{
    encode_entry, entry_bytes, frame, parse_region, records_from, Entry, RecordStream, RegionParser, HEADER_BYTES,
};

/// Which design.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WalDesign {
    Conventional,
    Zwal,
}

/// How a log is laid out and written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WalConfig {
    pub design: WalDesign,
    /// The log's dedicated zones, used in this order.
    pub zones: Vec<u32>,
    /// The WAL buffer: the largest entry, header and padding included.
    pub buffer_bytes: u64,
    /// Zone appends in flight at most (ZWAL).
    pub queue_depth: u32,
    /// Bytes between barriers (ZWAL); 0 for none.
    pub barrier_bytes: u64,
    /// The largest read recovery issues, in bytes; 0 for no limit but the device's MDTS. The ZWAL paper's
    /// implementation read through SZD in 64 KiB pieces.
    pub recovery_read_bytes: u64,
}

/// Why a log operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    #[error("the device refused a WAL command: {0}")]
    Device(Status),
    #[error("the log's {0} zones are full")]
    Full(usize),
    #[error("invalid WAL configuration: {0}")]
    Config(String),
    #[error("the log was recovered with entries past a hole; delete it before appending")]
    NeedsDelete,
}

impl From<Status> for WalError {
    fn from(status: Status) -> Self {
        WalError::Device(status)
    }
}

/// What the log did, for benchmarks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WalStats {
    pub records: u64,
    pub entries: u64,
    pub payload_bytes: u64,
    pub flash_bytes: u64,
    pub barriers: u64,
    pub syncs: u64,
    pub zone_rolls: u64,
}

type Pending = Pin<Box<dyn Future<Output = Result<Output, Status>>>>;

/// Gives a log one more empty zone when its zones are full, or None when there is none. A file system that
/// allocates zones as a log grows (and records them before they are written) passes one to `with_zone_source`.
pub type ZoneSource = Box<dyn FnMut() -> Pin<Box<dyn Future<Output = Option<u32>>>>>;

/// A write-ahead log on a device reached through `Q`.
pub struct Wal<Q> {
    queue: Q,
    config: WalConfig,
    geometry: Geometry,
    lba_bytes: u64,
    /// Largest entry: the buffer, the device's transfer (or append) limit.
    max_entry_bytes: u64,
    /// Framed record bytes not yet in an entry: `stream[stream_sent..]`. The front already sent is dropped once
    /// it is half the vector, so cutting a 64 MiB record into entries costs linear time, not quadratic.
    stream: Vec<u8>,
    stream_sent: usize,
    next_record: u64,
    next_seq: u64,
    zone_slot: usize,
    /// Where the next entry goes in the current zone, in LBAs from its start (host-predicted for appends).
    head_lba: u64,
    since_barrier: u64,
    in_flight: Vec<Pending>,
    needs_delete: bool,
    zone_source: Option<ZoneSource>,
    stats: WalStats,
    last_recovery: RecoveryStats,
}

/// What the last `recover` did. Device time is virtual; parsing and ordering are this host's own CPU time
/// (wall-clock), since the model has no host CPU.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecoveryStats {
    pub reads: u64,
    pub bytes_read: u64,
    pub entries: u64,
    /// Device time from the start of recovery to the last read's completion.
    pub io_device_ns: u64,
    pub parse_wall_ns: u64,
    /// Sorting by sequence number, checking contiguity and re-framing records.
    pub order_wall_ns: u64,
}

impl<Q: CommandQueue + Clone + 'static> Wal<Q> {
    /// A log on `config.zones`, which must be empty (use `delete` on a used log).
    pub fn new(queue: Q, config: WalConfig) -> Result<Wal<Q>, WalError> {
        let geometry = queue.geometry();
        let lba_bytes = u64::from(geometry.lba_size);
        if config.zones.is_empty() || config.zones.iter().any(|&zone| zone >= geometry.zones) {
            return Err(WalError::Config(format!(
                "zones {:?} are not zones of this {}-zone device",
                config.zones, geometry.zones
            )));
        }
        let transfer = match config.design {
            WalDesign::Zwal => geometry.max_append_lba,
            WalDesign::Conventional => geometry.max_transfer_lba,
        }
        .map_or(u64::MAX, |lbas| lbas * lba_bytes);
        let max_entry_bytes = config.buffer_bytes.min(transfer) / lba_bytes * lba_bytes;
        if max_entry_bytes < lba_bytes {
            return Err(WalError::Config(format!(
                "a {}-byte buffer holds no {lba_bytes}-byte block",
                config.buffer_bytes
            )));
        }
        if config.design == WalDesign::Zwal && config.queue_depth == 0 {
            return Err(WalError::Config("queue depth 0".into()));
        }
        if config.barrier_bytes != 0 && config.barrier_bytes < lba_bytes {
            return Err(WalError::Config(format!("a {}-byte barrier is smaller than one block", config.barrier_bytes)));
        }
        Ok(Wal {
            queue,
            config,
            geometry,
            lba_bytes,
            max_entry_bytes,
            stream: Vec::new(),
            stream_sent: 0,
            next_record: 0,
            next_seq: 0,
            zone_slot: 0,
            head_lba: 0,
            since_barrier: 0,
            in_flight: Vec::new(),
            needs_delete: false,
            zone_source: None,
            stats: WalStats::default(),
            last_recovery: RecoveryStats::default(),
        })
    }

    /// Lets the log ask `source` for another zone when its zones are full, instead of failing with `Full`.
    pub fn with_zone_source(mut self, source: ZoneSource) -> Wal<Q> {
        self.zone_source = Some(source);
        self
    }

    pub fn stats(&self) -> &WalStats {
        &self.stats
    }

    pub fn last_recovery(&self) -> &RecoveryStats {
        &self.last_recovery
    }

    pub fn config(&self) -> &WalConfig {
        &self.config
    }

    /// Appends one record; returns its sequence number (0, 1, 2, ... in append order). The record is durable
    /// after the next `sync`.
    pub async fn append(&mut self, record: &[u8]) -> Result<u64, WalError> {
        if self.needs_delete {
            return Err(WalError::NeedsDelete);
        }
        frame(record, &mut self.stream);
        let seq = self.next_record;
        self.next_record += 1;
        self.stats.records += 1;
        let full_payload = self.max_entry_bytes - HEADER_BYTES;
        while self.unsent() >= full_payload {
            self.emit(full_payload).await?;
        }
        Ok(seq)
    }

    /// Flushes the buffer, waits for every write in flight, and makes it durable (Flush).
    pub async fn sync(&mut self) -> Result<(), WalError> {
        while self.unsent() > 0 {
            self.emit(self.unsent()).await?;
        }
        self.drain().await?;
        self.queue.submit(QueuedCommand::Flush).await?;
        self.stats.syncs += 1;
        Ok(())
    }

    /// Framed bytes not yet in an entry.
    fn unsent(&self) -> u64 {
        (self.stream.len() - self.stream_sent) as u64
    }

    /// Writes one entry of at most `max_payload` bytes from the front of the stream.
    async fn emit(&mut self, max_payload: u64) -> Result<(), WalError> {
        loop {
            let zone_room = (self.geometry.zone_cap_lba - self.head_lba) * self.lba_bytes;
            let barrier_room = match (self.config.design, self.config.barrier_bytes) {
                (WalDesign::Zwal, barrier) if barrier != 0 => barrier - self.since_barrier,
                _ => u64::MAX,
            };
            if barrier_room < self.lba_bytes {
                self.drain().await?;
                self.since_barrier = 0;
                self.stats.barriers += 1;
                continue;
            }
            if zone_room < self.lba_bytes {
                self.roll().await?;
                continue;
            }
            let limit = self.max_entry_bytes.min(zone_room).min(barrier_room) / self.lba_bytes * self.lba_bytes;
            let payload = self.unsent().min(max_payload).min(limit - HEADER_BYTES) as usize;
            if payload == 0 {
                return Ok(());
            }
            let sent = self.stream_sent;
            let entry = encode_entry(self.next_seq, &self.stream[sent..sent + payload], self.lba_bytes);
            self.stream_sent += payload;
            if self.stream_sent * 2 >= self.stream.len() {
                self.stream.drain(..self.stream_sent);
                self.stream_sent = 0;
            }
            let zone_start = self.geometry.zone_start_lba(self.config.zones[self.zone_slot]);
            let entry_len = entry.len() as u64;
            let command = match self.config.design {
                WalDesign::Zwal => QueuedCommand::Append { zslba: zone_start, data: IoData::Bytes(entry) },
                WalDesign::Conventional => {
                    QueuedCommand::Write { slba: zone_start + self.head_lba, data: IoData::Bytes(entry) }
                }
            };
            self.next_seq += 1;
            self.head_lba += entry_len / self.lba_bytes;
            debug_assert!(self.head_lba <= self.geometry.zone_cap_lba, "a WAL entry never runs past its zone");
            self.since_barrier += entry_len;
            self.stats.entries += 1;
            self.stats.payload_bytes += payload as u64;
            self.stats.flash_bytes += entry_len;
            return match self.config.design {
                WalDesign::Conventional => self.queue.submit(command).await.map(|_| ()).map_err(WalError::from),
                WalDesign::Zwal => self.start(command).await,
            };
        }
    }

    /// Starts a command without waiting for it, keeping at most `queue_depth` in flight.
    async fn start(&mut self, command: QueuedCommand) -> Result<(), WalError> {
        while self.in_flight.len() >= self.config.queue_depth as usize {
            self.wait_one().await?;
        }
        let queue = self.queue.clone();
        let mut pending: Pending = Box::pin(async move { queue.submit(command).await });
        let mut early = None;
        poll_fn(|context| {
            if let Poll::Ready(result) = pending.as_mut().poll(context) {
                early = Some(result);
            }
            Poll::Ready(())
        })
        .await;
        match early {
            Some(result) => result.map(|_| ()).map_err(WalError::from),
            None => {
                self.in_flight.push(pending);
                Ok(())
            }
        }
    }

    /// Waits for one command in flight to complete.
    async fn wait_one(&mut self) -> Result<(), WalError> {
        let in_flight = &mut self.in_flight;
        let result = poll_fn(|context| {
            for index in 0..in_flight.len() {
                if let Poll::Ready(result) = in_flight[index].as_mut().poll(context) {
                    drop(in_flight.swap_remove(index));
                    return Poll::Ready(result);
                }
            }
            Poll::Pending
        })
        .await;
        result.map(|_| ()).map_err(WalError::from)
    }

    /// Waits for every command in flight.
    async fn drain(&mut self) -> Result<(), WalError> {
        let mut first_error = None;
        while !self.in_flight.is_empty() {
            if let Err(error) = self.wait_one().await {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Waits for every write in flight, without a flush: before the log's zones are reset by someone else.
    pub async fn quiesce(&mut self) -> Result<(), WalError> {
        self.drain().await
    }

    /// Moves to the next zone of the log once the current one is full, asking the zone source for one when
    /// every zone of the log is used.
    async fn roll(&mut self) -> Result<(), WalError> {
        self.drain().await?;
        if self.zone_slot + 1 >= self.config.zones.len() {
            let more = match self.zone_source.as_mut() {
                Some(source) => source().await,
                None => None,
            };
            match more {
                Some(zone) if zone < self.geometry.zones => self.config.zones.push(zone),
                _ => return Err(WalError::Full(self.config.zones.len())),
            }
        }
        self.zone_slot += 1;
        self.head_lba = 0;
        self.stats.zone_rolls += 1;
        Ok(())
    }

    /// Reads the log back: every zone up to its write pointer, in large reads, entries parsed stepping over
    /// padding, sorted by sequence number, and the gap-free prefix's records in append order.
    pub async fn recover(&mut self) -> Result<Vec<Vec<u8>>, WalError> {
        let mut records = Vec::new();
        self.recover_each(|record| records.push(record)).await?;
        Ok(records)
    }

    /// `recover`, handing each record to `apply` as soon as the entries before it are read (as RocksDB applies
    /// each to its memtable): only entries read ahead of a missing seq are held, not the whole log. Returns how
    /// many records there were.
    pub async fn recover_each(&mut self, mut apply: impl FnMut(Vec<u8>)) -> Result<u64, WalError> {
        self.drain().await?;
        let started = self.queue.now_ns();
        // ZWAL reads a barrier window at a time, ZenFS an entry at a time (docs/host-stack.md 2.5); both within MDTS.
        let window_bytes = match self.config.design {
            WalDesign::Zwal if self.config.barrier_bytes != 0 => self.config.barrier_bytes,
            WalDesign::Zwal => self.geometry.zone_cap_lba * self.lba_bytes,
            WalDesign::Conventional => self.max_entry_bytes,
        };
        let window_bytes = match self.config.recovery_read_bytes {
            0 => window_bytes,
            limit => window_bytes.min(limit),
        };
        let chunk_lbas = (window_bytes / self.lba_bytes).max(1).min(self.geometry.max_transfer_lba.unwrap_or(u64::MAX));
        let mut recovery = RecoveryStats::default();
        let mut stream = RecordStream::new(0);
        let mut records = 0u64;
        let mut seen = 0u64;
        let mut last_written = (0usize, 0u64);
        let mut order = |entry: Entry, recovery: &mut RecoveryStats| {
            let ordering = Instant::now();
            recovery.entries += 1;
            seen = seen.max(entry.seq + 1);
            stream.push(entry, |record| {
                records += 1;
                apply(record);
            });
            recovery.order_wall_ns += ordering.elapsed().as_nanos() as u64;
        };
        for (slot, &zone) in self.config.zones.iter().enumerate() {
            let start = self.geometry.zone_start_lba(zone);
            let report = self
                .queue
                .submit(QueuedCommand::Report { slba: start, filter: ReportFilter::All, partial: true, max_zones: 1 })
                .await?;
            let Output::Report(report) = report else { unreachable!("a report completes with zones") };
            let Some(descriptor) = report.zones.first() else { continue };
            let written = match descriptor.state {
                ZoneState::Full => self.geometry.zone_cap_lba,
                ZoneState::Offline => 0,
                _ => descriptor.wp_lba().map_or(0, |wp| wp - start),
            };
            if written == 0 {
                continue;
            }
            last_written = (slot, written);
            let mut parser = RegionParser::new(self.lba_bytes);
            let mut found = Vec::new();
            let mut lba = 0;
            while lba < written {
                let blocks = chunk_lbas.min(written - lba);
                let data =
                    self.queue.submit(QueuedCommand::Read { slba: start + lba, nlb: blocks, keep: true }).await?;
                let Output::Data(bytes) = data else { unreachable!("a read completes with data") };
                recovery.reads += 1;
                recovery.bytes_read += bytes.len() as u64;
                lba += blocks;
                let parsing = Instant::now();
                parser.push(&bytes, |entry| found.push(entry));
                recovery.parse_wall_ns += parsing.elapsed().as_nanos() as u64;
                for entry in found.drain(..) {
                    order(entry, &mut recovery);
                }
            }
            parser.finish(|entry| found.push(entry));
            for entry in found.drain(..) {
                order(entry, &mut recovery);
            }
        }
        recovery.io_device_ns = self.queue.now_ns() - started;
        let next_seq = stream.next_seq();
        self.last_recovery = recovery;
        self.needs_delete = next_seq != seen;
        self.stream.clear();
        self.stream_sent = 0;
        self.next_record = records;
        self.next_seq = next_seq;
        self.zone_slot = last_written.0;
        self.head_lba = last_written.1;
        self.since_barrier = if self.config.barrier_bytes == 0 {
            0
        } else {
            (self.head_lba * self.lba_bytes) % self.config.barrier_bytes
        };
        Ok(records)
    }

    /// Drops the log: waits for writes in flight, resets every zone of it, and starts again from sequence 0.
    pub async fn delete(&mut self) -> Result<(), WalError> {
        let _ = self.drain().await;
        for &zone in &self.config.zones {
            let start = self.geometry.zone_start_lba(zone);
            self.queue
                .submit(QueuedCommand::ZoneSend { slba: start, action: ZoneSendAction::Reset, select_all: false })
                .await?;
        }
        self.stream.clear();
        self.stream_sent = 0;
        self.next_record = 0;
        self.next_seq = 0;
        self.zone_slot = 0;
        self.head_lba = 0;
        self.since_barrier = 0;
        self.needs_delete = false;
        Ok(())
    }
}

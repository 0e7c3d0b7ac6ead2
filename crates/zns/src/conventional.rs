//! A conventional namespace: the NVM command set's read, write, write zeroes, flush and dataset management
//! (deallocate) over a flat range of blocks that may be written in any order. It keeps no zone state; where its
//! data lives on flash is the FTL's business, in the layers above (`zonelab-ftl`, the device). Zone commands
//! (Zone Append, Zone Management Send and Receive) are Invalid Opcode here, as on a drive's conventional
//! namespace.
//!
//! ```
//! use zonelab_zns::{ByteSize, Command, ConventionalConfig, ConventionalNamespace, MemoryStore, Status};
//!
//! let config = ConventionalConfig { capacity: ByteSize(1 << 20), ..ConventionalConfig::default() };
//! let mut ns = ConventionalNamespace::new(config, MemoryStore::new(1 << 20))?;
//! ns.execute(Command::Write { slba: 7, data: &[0xab; 4096] })?; // any block, in any order
//! ns.execute(Command::Deallocate { slba: 7, nlb: 1 })?;
//! let mut back = [0xffu8; 4096];
//! ns.execute(Command::Read { slba: 7, buf: &mut back })?;
//! assert!(back.iter().all(|&byte| byte == 0), "deallocated blocks read as zeros");
//! assert_eq!(ns.execute(Command::Append { zslba: 0, data: &[0; 4096] }), Err(Status::InvalidOpcode));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use serde::{Deserialize, Serialize};

use crate::config::{check_page_multiple, refuse};
use crate::{
    ByteSize, Command, Completion, ConfigError, Geometry, HostFault, MediaStore, NamespaceKind, Status, StoreError,
};

/// A conventional namespace as a user describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct ConventionalConfig {
    /// Bytes the namespace exports (NSZE). Default 1GiB; whole LBAs, at least one.
    pub capacity: ByteSize,
    /// Logical block size in bytes: 512 or 4096. Default 4096.
    pub lba_size: u32,
    /// Maximum Data Transfer Size; 0 means no limit. Default 512KiB; a power of two multiple of 4KiB.
    pub mdts: ByteSize,
}

impl Default for ConventionalConfig {
    fn default() -> Self {
        ConventionalConfig { capacity: ByteSize(1 << 30), lba_size: 4096, mdts: ByteSize(512 << 10) }
    }
}

impl ConventionalConfig {
    /// Checks the configuration once, naming the field at fault, and derives the geometry.
    pub fn validate(&self) -> Result<Geometry, ConfigError> {
        if self.lba_size != 512 && self.lba_size != 4096 {
            return Err(refuse("lba-size", format!("{} is not 512 or 4096", self.lba_size)));
        }
        let (lba_bytes, bytes) = (u64::from(self.lba_size), self.capacity.bytes());
        if bytes < lba_bytes || !bytes.is_multiple_of(lba_bytes) {
            return Err(refuse("capacity", format!("{} is not a positive whole number of LBAs", self.capacity)));
        }
        check_page_multiple("mdts", self.mdts)?;
        let nsze_lba = bytes / lba_bytes;
        let zone_size_lba = nsze_lba.next_power_of_two();
        Ok(Geometry {
            kind: NamespaceKind::Conventional,
            lba_size: self.lba_size,
            lba_shift: self.lba_size.trailing_zeros(),
            zones: 1,
            zone_size_lba,
            zone_shift: zone_size_lba.trailing_zeros(),
            zone_cap_lba: nsze_lba,
            nsze_lba,
            max_open: 0,
            max_active: 0,
            max_transfer_lba: (self.mdts.bytes() != 0).then(|| self.mdts.bytes() / lba_bytes),
            max_append_lba: None,
        })
    }
}

/// A conventional namespace over a store.
#[derive(Debug)]
pub struct ConventionalNamespace<S> {
    config: ConventionalConfig,
    geometry: Geometry,
    store: S,
    host_fault: Option<HostFault>,
}

impl<S: MediaStore> ConventionalNamespace<S> {
    pub fn new(config: ConventionalConfig, store: S) -> Result<ConventionalNamespace<S>, ConfigError> {
        let geometry = config.validate()?;
        Ok(ConventionalNamespace { config, geometry, store, host_fault: None })
    }

    pub fn config(&self) -> &ConventionalConfig {
        &self.config
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// The host error behind the last Write Fault or Unrecovered Read Error, once.
    pub fn take_host_fault(&mut self) -> Option<HostFault> {
        self.host_fault.take()
    }

    /// Checks a read of `nlb` blocks at `slba` as the namespace would, moving no data.
    pub fn check_read(&self, slba: u64, nlb: u64) -> Result<(), Status> {
        if nlb == 0 {
            return Err(Status::InvalidField);
        }
        self.geometry.check_transfer(nlb)?;
        self.geometry.check_range(slba, nlb)
    }

    /// Runs one command to completion.
    pub fn execute(&mut self, command: Command<'_>) -> Result<Completion, Status> {
        let shift = self.geometry.lba_shift;
        match command {
            Command::Read { slba, buf } => {
                self.check_read(slba, self.geometry.blocks_in(buf.len())?)?;
                let read = self.store.read_at(slba << shift, buf);
                self.fault(read, Status::UnrecoveredReadError)
            }
            Command::ReadDiscard { slba, nlb } => self.check_read(slba, nlb),
            Command::Write { slba, data } => {
                let nlb = self.geometry.blocks_in(data.len())?;
                self.geometry.check_transfer(nlb)?;
                self.geometry.check_range(slba, nlb)?;
                let written = self.store.write_at(slba << shift, data);
                self.fault(written, Status::WriteFault)
            }
            // Write Zeroes and Deallocate are exempt from MDTS: they move no data.
            Command::WriteZeroes { slba, nlb } | Command::Deallocate { slba, nlb } => {
                if nlb == 0 {
                    return Err(Status::InvalidField);
                }
                self.geometry.check_range(slba, nlb)?;
                // Both leave the range reading as zeros, which the store's deallocate gives at the least cost (a
                // punched hole in an image): a whole-device Write Zeroes (mkfs) writes no gigabytes of zeros.
                let zeroed = self.store.deallocate(slba << shift, nlb << shift);
                self.fault(zeroed, Status::WriteFault)
            }
            Command::Flush => {
                let synced = self.store.sync();
                self.fault(synced, Status::WriteFault)
            }
            Command::Append { .. } | Command::ZoneManagementSend { .. } | Command::ZoneManagementReceive { .. } => {
                Err(Status::InvalidOpcode)
            }
        }
        .map(|()| Completion::Success)
    }

    /// A store failure becomes `status` (Write Fault or Unrecovered Read Error), its cause kept for
    /// `take_host_fault`.
    fn fault(&mut self, result: Result<(), StoreError>, status: Status) -> Result<(), Status> {
        result.map_err(|StoreError::Io(error)| {
            let writing = status == Status::WriteFault;
            self.host_fault = Some(HostFault { file: HostFault::DATA, writing, error });
            status
        })
    }
}

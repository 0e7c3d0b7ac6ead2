//! Flash operations counted by source, so that write amplification and energy per source fall out (MQSim tags
//! every internal operation the same way).

use serde::Serialize;

use crate::EnergyConfig;

/// Why a flash operation happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpSource {
    HostRead,
    HostWrite,
    Append,
    FinishPadding,
    /// Dummy programs that close a partially programmed block.
    Seal,
    Reset,
    /// A conventional namespace's garbage collection: the valid pages it senses and programs elsewhere, and
    /// the blocks it erases.
    GcRead,
    GcWrite,
    GcErase,
}

impl OpSource {
    pub const ALL: [OpSource; 9] = [
        OpSource::HostRead,
        OpSource::HostWrite,
        OpSource::Append,
        OpSource::FinishPadding,
        OpSource::Seal,
        OpSource::Reset,
        OpSource::GcRead,
        OpSource::GcWrite,
        OpSource::GcErase,
    ];
}

/// A kind of flash operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashOp {
    PageRead,
    PageProgram,
    BlockErase,
}

/// How many sources operations are counted under.
const SOURCES: usize = OpSource::ALL.len();

/// Counts of flash operations by source.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlashCounters {
    pub page_reads: [u64; SOURCES],
    pub page_programs: [u64; SOURCES],
    pub block_erases: [u64; SOURCES],
}

impl FlashCounters {
    pub fn add(&mut self, op: FlashOp, source: OpSource, count: u64) {
        let slot = match op {
            FlashOp::PageRead => &mut self.page_reads,
            FlashOp::PageProgram => &mut self.page_programs,
            FlashOp::BlockErase => &mut self.block_erases,
        };
        slot[source as usize] += count;
    }

    pub fn get(&self, op: FlashOp, source: OpSource) -> u64 {
        match op {
            FlashOp::PageRead => self.page_reads[source as usize],
            FlashOp::PageProgram => self.page_programs[source as usize],
            FlashOp::BlockErase => self.block_erases[source as usize],
        }
    }

    /// The operations counted since `earlier` (a snapshot of the same counters).
    pub fn since(&self, earlier: &FlashCounters) -> FlashCounters {
        let minus = |now: &[u64; SOURCES], then: &[u64; SOURCES]| std::array::from_fn(|i| now[i] - then[i]);
        FlashCounters {
            page_reads: minus(&self.page_reads, &earlier.page_reads),
            page_programs: minus(&self.page_programs, &earlier.page_programs),
            block_erases: minus(&self.block_erases, &earlier.block_erases),
        }
    }

    /// Device write amplification: every page programmed (garbage collection's copies, finish padding) per
    /// page the host's writes and appends programmed; 1 when the host wrote nothing.
    pub fn write_amplification(&self) -> f64 {
        let host =
            self.get(FlashOp::PageProgram, OpSource::HostWrite) + self.get(FlashOp::PageProgram, OpSource::Append);
        if host == 0 {
            return 1.0;
        }
        self.total(FlashOp::PageProgram) as f64 / host as f64
    }

    pub fn total(&self, op: FlashOp) -> u64 {
        OpSource::ALL.iter().map(|&source| self.get(op, source)).sum()
    }

    /// Energy in nanojoules of the counted operations of one source.
    pub fn energy_nj(&self, energy: &EnergyConfig, source: OpSource) -> f64 {
        self.get(FlashOp::PageRead, source) as f64 * energy.page_read_nj
            + self.get(FlashOp::PageProgram, source) as f64 * energy.page_program_nj
            + self.get(FlashOp::BlockErase, source) as f64 * energy.block_erase_nj
    }

    pub fn total_energy_nj(&self, energy: &EnergyConfig) -> f64 {
        OpSource::ALL.iter().map(|&source| self.energy_nj(energy, source)).sum()
    }
}

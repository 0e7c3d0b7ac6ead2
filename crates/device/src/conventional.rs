//! A conventional namespace on the device: the NVM command set's semantics (`zonelab_zns::ConventionalNamespace`)
//! over a page-mapped FTL (`zonelab_ftl::Ftl`) whose blocks are rows of physical zones the device's flash model
//! sets aside for it, so that its host I/O and garbage collection take the same dies, channels, host link and
//! command processor as the zoned namespace's commands. A third namespace kind would be a file like this one,
//! with its own configuration table and its `run`.

use serde::{Deserialize, Serialize};
use zonelab_ftl::{Flash, Ftl, FtlConfig, FtlCounters, FtlError, InPlace, Rows, VictimPolicy};
use zonelab_media::{FlashModel, MappingPolicy, MediaConfig, PhysicalZone, WriteKind};
use zonelab_zns::{
    ByteSize, Command, Completion, ConfigError, ConventionalConfig, ConventionalNamespace, Geometry, MediaStore, Status,
};

/// Bytes of a mapping unit: NVMeVirt's conv_ftl (`secs_per_pg` x `secsz`) and most SSDs map 4 KiB pages.
const PAGE_BYTES: u64 = 4096;

/// A conventional namespace as a preset describes it (the `[conventional]` table).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ConventionalNamespaceConfig {
    /// The namespace ID the drive gives it; the zoned namespace's is `DeviceConfig::zoned_nsid`.
    pub nsid: u32,
    /// Bytes the namespace exports.
    pub capacity: ByteSize,
    /// Logical block size in bytes: 512 or 4096. Default 4096.
    #[serde(default = "default_lba_size")]
    pub lba_size: u32,
    /// Maximum Data Transfer Size; 0 means no limit. Default 512KiB.
    #[serde(default = "default_mdts")]
    pub mdts: ByteSize,
    /// Physical space beyond the exported one, as a fraction of it (0.07 is 7 %). At least 0, at most 4.
    pub over_provisioning: f64,
    /// How garbage collection picks its victim. Default greedy.
    #[serde(default)]
    pub victim: VictimPolicy,
    /// Where a logical page lives: `page-mapped` (anywhere, with garbage collection; the default) or
    /// `in-place` (where it lies, for media that write without erasing; no over-provisioning then).
    #[serde(default)]
    pub mapping: MappingKind,
    /// Program units the write buffer holds for the stream (page-mapped only): a write that fills one waits
    /// for the program this many units before it. Default 1: one unit gathers while one programs.
    #[serde(default = "default_write_buffer_units")]
    pub write_buffer_units: u32,
}

/// How a conventional namespace maps its logical pages onto flash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MappingKind {
    /// A page-mapped FTL with garbage collection (`zonelab_ftl::Ftl`).
    #[default]
    PageMapped,
    /// Each page where it lies, programmed in place (`zonelab_ftl::InPlace`): 3D XPoint.
    InPlace,
}

fn default_write_buffer_units() -> u32 {
    1
}

fn default_lba_size() -> u32 {
    4096
}

fn default_mdts() -> ByteSize {
    ByteSize(512 << 10)
}

impl ConventionalNamespaceConfig {
    /// The namespace's own configuration.
    pub fn namespace(&self) -> ConventionalConfig {
        ConventionalConfig { capacity: self.capacity, lba_size: self.lba_size, mdts: self.mdts }
    }

    /// The FTL's shape on `media`: a block is one row of a physical zone (a block on each plane a zone
    /// stripes over, as `FlashModel::units_per_row`), pages are 4 KiB.
    pub fn ftl(&self, media: &MediaConfig) -> FtlConfig {
        let pages_per_unit = (media.nand.program_unit_bytes / PAGE_BYTES) as u32;
        let pages_per_block = media.planes_per_zone() * media.nand.block_program_units * pages_per_unit;
        let mut config = FtlConfig::with_over_provisioning(
            self.capacity.bytes(),
            self.over_provisioning,
            pages_per_block,
            pages_per_unit,
        );
        config.victim = self.victim;
        config.write_buffer_units = self.write_buffer_units;
        config.collection_units_in_flight = media.planes_per_zone();
        // The controller's read-ahead, which the zoned namespace's reads use too.
        config.read_ahead_pages = (media.controller.read_ahead_bytes / PAGE_BYTES) as u32;
        if self.mapping == MappingKind::InPlace {
            config.blocks = InPlace::blocks(&config);
        }
        config
    }

    /// Checks the namespace and what the FTL needs of the flash model, naming the field at fault.
    pub fn validate(&self, media: &MediaConfig) -> Result<Geometry, ConfigError> {
        let refuse = |field: &'static str, reason: String| ConfigError::new(field, reason);
        if self.nsid == 0 || self.nsid == u32::MAX {
            return Err(refuse("conventional.nsid", format!("{} is not a namespace ID (1 to 2^32 - 2)", self.nsid)));
        }
        let geometry = self.namespace().validate()?;
        if !(0.0..=4.0).contains(&self.over_provisioning) {
            return Err(refuse(
                "conventional.over-provisioning",
                format!("{} is not within 0 to 4", self.over_provisioning),
            ));
        }
        if media.mapping.policy == MappingPolicy::Rezns {
            return Err(refuse(
                "conventional",
                "the rezns mapping takes physical zones as it needs them; a conventional namespace cannot share them"
                    .into(),
            ));
        }
        let unit_bytes = media.nand.program_unit_bytes;
        if !unit_bytes.is_multiple_of(PAGE_BYTES) || !self.capacity.bytes().is_multiple_of(PAGE_BYTES) {
            return Err(refuse(
                "conventional.capacity",
                format!(
                    "the FTL maps 4 KiB pages: {} and the {unit_bytes}-byte program unit must be whole pages",
                    self.capacity
                ),
            ));
        }
        match self.mapping {
            MappingKind::PageMapped => self.ftl(media).validate().map_err(|error| {
                let field = match error {
                    FtlError::MapTooLarge { .. } => "conventional.capacity",
                    _ => "conventional.over-provisioning",
                };
                refuse(field, error.to_string())
            })?,
            MappingKind::InPlace if self.over_provisioning != 0.0 => {
                return Err(refuse(
                    "conventional.over-provisioning",
                    "an in-place mapping keeps no spare space: it must be 0".into(),
                ))
            }
            MappingKind::InPlace if unit_bytes != PAGE_BYTES => {
                return Err(refuse(
                    "conventional.mapping",
                    format!("in-place writes program single 4 KiB pages, not {unit_bytes}-byte units"),
                ))
            }
            MappingKind::InPlace => {}
        }
        Ok(geometry)
    }
}

/// The namespace's mapping of either kind, with the calls the namespace makes of it.
enum Mapping {
    PageMapped(Box<Ftl>),
    InPlace(InPlace),
}

impl Mapping {
    fn counters(&self) -> &FtlCounters {
        match self {
            Mapping::PageMapped(ftl) => ftl.counters(),
            Mapping::InPlace(mapping) => mapping.counters(),
        }
    }

    /// Writes logical page `lpn` (the one host stream).
    fn write(&mut self, flash: &mut impl Flash, now: u64, lpn: u64) -> Result<u64, FtlError> {
        match self {
            Mapping::PageMapped(ftl) => ftl.write(flash, now, lpn, 0),
            Mapping::InPlace(mapping) => mapping.write(flash, now, lpn),
        }
    }

    fn read_range(&mut self, flash: &mut impl Flash, now: u64, first: u64, count: u64) -> Result<u64, FtlError> {
        match self {
            Mapping::PageMapped(ftl) => ftl.read_range(flash, now, first, count),
            Mapping::InPlace(mapping) => mapping.read_range(flash, now, first, count),
        }
    }

    /// Whether page `lpn` holds data a write left (not never written, not deallocated).
    fn holds(&self, lpn: u64) -> bool {
        match self {
            Mapping::PageMapped(ftl) => ftl.lookup(lpn).is_some(),
            Mapping::InPlace(mapping) => mapping.is_written(lpn),
        }
    }

    fn trim(&mut self, lpn: u64) -> Result<(), FtlError> {
        match self {
            Mapping::PageMapped(ftl) => ftl.trim(lpn),
            Mapping::InPlace(mapping) => mapping.trim(lpn),
        }
    }

    fn precondition(&mut self, lpns: impl Iterator<Item = u64>) -> Result<(), FtlError> {
        match self {
            Mapping::PageMapped(ftl) => ftl.precondition(lpns),
            Mapping::InPlace(mapping) => mapping.precondition(lpns),
        }
    }
}

/// What a command asks of the FTL, read off it before the namespace takes it.
enum Work {
    Read { slba: u64, nlb: u64 },
    Write { slba: u64, nlb: u64 },
    Trim { slba: u64, nlb: u64 },
    Flush,
    Nothing,
}

/// What the conventional namespace has done, for a device's stats.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConventionalStats {
    pub nsid: u32,
    pub ftl: FtlCounters,
    /// Pages programmed per page the host wrote (host and garbage collection writes over host writes).
    pub write_amplification: f64,
    pub free_blocks: u32,
    pub blocks: u32,
}

/// The conventional namespace of a device, with its FTL.
pub(crate) struct Conventional {
    pub nsid: u32,
    pub namespace: ConventionalNamespace<Box<dyn MediaStore>>,
    ftl_config: FtlConfig,
    kind: MappingKind,
    /// Built at the namespace's first command: a page map takes 8 bytes a page, which a device whose host
    /// never uses the namespace should not pay for.
    ftl: Option<Mapping>,
    first_zone: PhysicalZone,
    /// Reads that reached a page no write had reached (never written, or deallocated since): the namespace
    /// returns zeros for those without reading flash, as for reads past a zone's write pointer.
    pub reads_of_unwritten: u64,
}

impl std::fmt::Debug for Conventional {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conventional").field("nsid", &self.nsid).field("geometry", self.namespace.geometry()).finish()
    }
}

impl Conventional {
    /// The namespace of `config` over `store`, its FTL's blocks set aside on `media`.
    pub fn new(
        config: &ConventionalNamespaceConfig,
        store: Box<dyn MediaStore>,
        media: &mut FlashModel,
    ) -> Result<Conventional, ConfigError> {
        config.validate(media.config())?;
        let ftl_config = config.ftl(media.config());
        let first_zone = media.add_physical_zones(Rows::zones_for(media, ftl_config.blocks));
        Ok(Conventional {
            nsid: config.nsid,
            namespace: ConventionalNamespace::new(config.namespace(), store)?,
            ftl_config,
            kind: config.mapping,
            ftl: None,
            first_zone,
            reads_of_unwritten: 0,
        })
    }

    fn ftl(&mut self) -> &mut Mapping {
        let (config, kind) = (&self.ftl_config, self.kind);
        self.ftl.get_or_insert_with(|| {
            let built = "validated when the namespace was made";
            match kind {
                MappingKind::PageMapped => Mapping::PageMapped(Box::new(Ftl::new(config.clone()).expect(built))),
                MappingKind::InPlace => Mapping::InPlace(InPlace::new(config.clone()).expect(built)),
            }
        })
    }

    pub fn stats(&self) -> ConventionalStats {
        let counters = self.ftl.as_ref().map(|ftl| *ftl.counters()).unwrap_or_default();
        let free_blocks = match &self.ftl {
            Some(Mapping::PageMapped(ftl)) => ftl.free_blocks(),
            Some(Mapping::InPlace(_)) => 0,
            None => self.ftl_config.blocks,
        };
        ConventionalStats {
            nsid: self.nsid,
            ftl: counters,
            write_amplification: counters.write_amplification(),
            free_blocks,
            blocks: self.ftl_config.blocks,
        }
    }

    /// Writes every page of the namespace once, then `random_passes` times more at random (seeded), with no
    /// time passing: the steady state the study reached by "writing the entire space numerous times".
    pub fn precondition(&mut self, random_passes: u32, seed: u64) {
        let pages = self.ftl_config.logical_pages;
        let mut rng = crate::rng::SplitMix64::split(seed, "precondition");
        let random = std::iter::repeat_with(move || rng.below(pages)).take((pages * u64::from(random_passes)) as usize);
        self.ftl().precondition((0..pages).chain(random)).expect("every page is in range");
    }

    /// The page-mapped FTL's state for a device image to keep (`Ftl::saved`); None for an in-place mapping,
    /// or one never built (the namespace unused).
    pub fn saved_ftl(&self) -> Option<Vec<u8>> {
        match &self.ftl {
            Some(Mapping::PageMapped(ftl)) => Some(ftl.saved()),
            _ => None,
        }
    }

    /// Takes up the FTL state a device image kept, then maps the pages that hold data the state does not map,
    /// in order, as `map_stored_data` does: written by a process that ended before it could save its state.
    pub fn restore_ftl(&mut self, saved: &[u8]) -> Result<(), String> {
        if self.kind != MappingKind::PageMapped {
            return Err("the namespace maps its pages in place, which keeps no state".into());
        }
        let ftl = Ftl::from_saved(self.ftl_config.clone(), saved).map_err(|error| error.to_string())?;
        let unmapped: Vec<u64> =
            self.stored_pages().map_err(|error| error.to_string())?.filter(|&lpn| ftl.lookup(lpn).is_none()).collect();
        let mut mapping = Mapping::PageMapped(Box::new(ftl));
        if !unmapped.is_empty() {
            mapping.precondition(unmapped.into_iter()).map_err(|error| error.to_string())?;
        }
        self.ftl = Some(mapping);
        Ok(())
    }

    /// The logical pages holding data in the namespace's store, in order (none for a store that keeps none).
    fn stored_pages(&self) -> Result<impl Iterator<Item = u64> + use<>, zonelab_zns::StoreError> {
        let ranges = self.namespace.store().data_ranges()?;
        let pages = self.ftl_config.logical_pages;
        Ok(ranges.into_iter().flat_map(move |(start, end)| start / PAGE_BYTES..end.div_ceil(PAGE_BYTES).min(pages)))
    }

    /// Maps the pages that hold data in the namespace's store (a device image's, written by an earlier process)
    /// as one sequential write of them would, with no time passing.
    pub fn map_stored_data(&mut self) -> Result<(), zonelab_zns::StoreError> {
        let mut lpns = self.stored_pages()?.peekable();
        if lpns.peek().is_none() {
            return Ok(());
        }
        self.ftl().precondition(lpns).expect("every page is in range");
        Ok(())
    }

    /// Runs `command` at `now`: the namespace decides what happens, the FTL and the flash model when it is done.
    /// With power-loss protection a flush has nothing to program (as on the zoned namespace).
    pub fn run(
        &mut self,
        media: &mut FlashModel,
        power_loss_protection: bool,
        now: u64,
        command: Command<'_>,
    ) -> Result<(u64, Completion), Status> {
        let shift = self.namespace.geometry().lba_shift;
        let pages = |slba: u64, nlb: u64| {
            let first = (slba << shift) / PAGE_BYTES;
            (first, ((slba + nlb) << shift).div_ceil(PAGE_BYTES) - first)
        };
        let work = match &command {
            Command::Read { slba, buf } => Work::Read { slba: *slba, nlb: buf.len() as u64 >> shift },
            Command::ReadDiscard { slba, nlb } => Work::Read { slba: *slba, nlb: *nlb },
            Command::Write { slba, data } => Work::Write { slba: *slba, nlb: data.len() as u64 >> shift },
            Command::Deallocate { slba, nlb } | Command::WriteZeroes { slba, nlb } => {
                Work::Trim { slba: *slba, nlb: *nlb }
            }
            Command::Flush => Work::Flush,
            _ => Work::Nothing,
        };
        if let (Some(Mapping::PageMapped(ftl)), Work::Read { slba, nlb } | Work::Write { slba, nlb }) =
            (&self.ftl, &work)
        {
            let (first, count) = pages(*slba, *nlb);
            ftl.prefetch_map(first..first + count);
        }
        let completion = self.namespace.execute(command)?;
        let first_zone = self.first_zone;
        let ftl = self.ftl();
        let mut flash = Rows { model: media, first: first_zone };
        let done = match work {
            Work::Read { slba, nlb } => {
                let len_bytes = nlb << shift;
                let (command_done, start) = flash.model.accept_host_read(now, len_bytes);
                let (first, count) = pages(slba, nlb);
                let unwritten = (first..first + count).any(|lpn| !ftl.holds(lpn));
                let data_out = ftl.read_range(&mut flash, start, first, count).expect("the namespace checked it");
                self.reads_of_unwritten += u64::from(unwritten);
                flash.model.return_host_read(now, command_done, data_out, len_bytes)
            }
            Work::Write { slba, nlb } => {
                let (acknowledge_from, data_in) = flash.model.accept_host_write(now, nlb << shift, WriteKind::Write);
                let (first, count) = pages(slba, nlb);
                let (start_bytes, end_bytes) = (slba << shift, (slba + nlb) << shift);
                let whole = |lpn: u64| lpn * PAGE_BYTES >= start_bytes && (lpn + 1) * PAGE_BYTES <= end_bytes;
                let mut done = acknowledge_from.max(data_in);
                for lpn in first..first + count {
                    // A page the write covers only in part is read first and written back whole.
                    let ready = if whole(lpn) {
                        data_in
                    } else {
                        ftl.read_range(&mut flash, data_in, lpn, 1).expect("in range")
                    };
                    done = done.max(ftl.write(&mut flash, ready, lpn).expect("in range"));
                }
                done
            }
            Work::Trim { slba, nlb } => {
                // Write Zeroes deallocates too: the blocks read as zeros either way (DLFEAT), and no data moves.
                // Pages the range covers in part keep their other blocks' data.
                let (start_bytes, end_bytes) = (slba << shift, (slba + nlb) << shift);
                for lpn in start_bytes.div_ceil(PAGE_BYTES)..end_bytes / PAGE_BYTES {
                    ftl.trim(lpn).expect("in range");
                }
                flash.model.management(now)
            }
            Work::Flush if power_loss_protection => flash.model.management(now),
            Work::Flush => flash.model.flush(now),
            Work::Nothing => now,
        };
        Ok((done, completion))
    }

    /// Garbage collection in idle time: while the flash is idle before `now` and free blocks are below the
    /// background target, collects one victim after another from when the flash fell idle.
    pub fn collect_while_idle(&mut self, media: &mut FlashModel, now: u64) {
        let Some(Mapping::PageMapped(ftl)) = self.ftl.as_mut() else { return };
        let mut flash = Rows { model: media, first: self.first_zone };
        // Each collection frees a block or finds nothing to collect; the bound is the block count. The free
        // count is asked first: most commands arrive with the target met, and need not scan the resources.
        for _ in 0..self.ftl_config.blocks {
            if ftl.free_blocks() >= self.ftl_config.background_free_blocks {
                break;
            }
            let Some(idle_from) = flash.model.idle_since(now) else { break };
            if ftl.collect_idle(&mut flash, idle_from).is_none() {
                break;
            }
        }
    }
}

//! Device images: a directory that holds a powered-on zoned namespace between invocations.
//!
//! - `config.toml`: format version, store kind and the namespace configuration (written last at creation, so a
//!   half-created directory is never taken for an image);
//! - `zones.meta`: the zone journal (see `journal`), which keeps zone states, including open ones, and write
//!   pointers; only `power_cycle` applies the controller-reset rule;
//! - `data`: a sparse file with the namespace's data, for the `file` store. With the `memory` store data lives
//!   as long as the image stays open; with `null` it is never kept. Zone state persists with every store;
//! - `conventional.data`: the data of the device's conventional namespace, when its model has one: a sparse
//!   file of the namespace's size for the `file` store, made the first time a writer opens the image;
//! - `media.json`: the flash model's state (erase counts per block, ReZNS's mapping), written by the device layer
//!   when a device over the image closes, so that wear accumulates over the image's life; absent until then.
//!   A process killed before closing loses the wear of that process only.
//! - `ftl.state`: the conventional namespace's FTL state (its map, block table, free list and open blocks),
//!   written by the device layer when a device that used the namespace closes, so that a preconditioned or aged
//!   namespace keeps its steady state; the next device maps data written after it as a sequential fill would.
//!
//! An image is driven by one process at a time (an exclusive lock on the journal); processes that only look at
//! it (reports, reads) share it among themselves (a shared lock).

use std::fs;
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::journal::{JournalError, ZoneJournal, ZoneRecord};
use crate::{FileStore, Geometry, MediaStore, MemoryStore, NamespaceConfig, NullStore, ZoneState, ZonedNamespace};

/// Bumped whenever the image layout changes; an image of another version is refused.
pub const IMAGE_FORMAT_VERSION: u32 = 1;

const CONFIG_FILE: &str = "config.toml";
const JOURNAL_FILE: &str = "zones.meta";
const DATA_FILE: &str = "data";
const CONVENTIONAL_DATA_FILE: &str = "conventional.data";
const MEDIA_STATE_FILE: &str = "media.json";
/// The conventional namespace's FTL state, written by the device layer (`zonelab_ftl::Ftl::saved`).
pub const FTL_STATE_FILE: &str = "ftl.state";

/// Where an image keeps its data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// A sparse data file in the image: data survives between invocations and crashes.
    #[default]
    File,
    /// Sparse memory: data lives while the image is open.
    Memory,
    /// No data: reads return zeros.
    Null,
}

impl StoreKind {
    pub const fn name(self) -> &'static str {
        match self {
            StoreKind::File => "file",
            StoreKind::Memory => "memory",
            StoreKind::Null => "null",
        }
    }

    /// What an image with this store keeps from one process to the next, for a user who might expect more.
    pub const fn what_persists(self) -> &'static str {
        match self {
            StoreKind::File => "zone states and data persist",
            StoreKind::Memory => {
                "zone states persist; data lives only while one process has the image open, and later reads return zeros"
            }
            StoreKind::Null => "zone states persist; no data is kept (reads return zeros)",
        }
    }
}

/// The contents of `config.toml`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ImageConfig {
    pub format_version: u32,
    pub store: StoreKind,
    pub namespace: NamespaceConfig,
    /// The device model the image was created with (a preset's media and host sections), kept for the layers
    /// above; the zns layer does not read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<toml::Table>,
}

/// Why an image could not be created or opened. The image on disk is left as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{0} already exists; pass --force to replace it")]
    Exists(PathBuf),
    #[error("{0} is not a zonelab image (no config.toml); refusing to replace it")]
    NotAnImage(PathBuf),
    #[error("{0} is not a zonelab image: it has no config.toml")]
    Missing(PathBuf),
    #[error("{path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("{path} has image format version {found}; this zonelab reads version {IMAGE_FORMAT_VERSION}")]
    Version { path: PathBuf, found: u32 },
    #[error(transparent)]
    Config(#[from] crate::ConfigError),
    #[error("{0} is in use by another zonelab process")]
    Busy(PathBuf),
    #[error("{0} was left in the middle of a many-zone command; any command that changes it completes that first")]
    NeedsRecovery(PathBuf),
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// The exclusive hold on an image of a namespace taken out of it; through it the device layer saves the flash
/// model's state beside the namespace.
#[derive(Debug)]
pub struct ImageLock {
    _file: fs::File,
    dir: PathBuf,
}

impl ImageLock {
    /// Replaces the image's media state (`media.json`) with `bytes`: written beside it, synced, then renamed
    /// over it, so a crash leaves the old state or the new one, never a torn one.
    pub fn save_media_state(&self, bytes: &[u8]) -> io::Result<()> {
        self.replace_file(MEDIA_STATE_FILE, bytes)
    }

    /// Replaces the conventional namespace's FTL state (`ftl.state`) with `bytes`, as `save_media_state`.
    pub fn save_ftl_state(&self, bytes: &[u8]) -> io::Result<()> {
        self.replace_file(FTL_STATE_FILE, bytes)
    }

    fn replace_file(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let path = self.dir.join(name);
        let partial = self.dir.join(format!("{name}.partial"));
        // A crash may have left a partial copy; whatever is at that name (a symbolic link planted there too) is
        // removed, never written through, and the copy is a file created new (O_EXCL does not follow a link).
        match fs::remove_file(&partial) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
            _ => {}
        }
        let mut file = fs::OpenOptions::new().write(true).create_new(true).open(&partial)?;
        io::Write::write_all(&mut file, bytes)?;
        file.sync_all()?;
        fs::rename(&partial, &path)?;
        fs::File::open(&self.dir)?.sync_all()
    }
}

/// An open device image: the namespace and the directory it persists to.
#[derive(Debug)]
pub struct Image {
    path: PathBuf,
    store_kind: StoreKind,
    device: Option<toml::Table>,
    namespace: ZonedNamespace<Box<dyn MediaStore>>,
    /// Zones whose journal record did not check, with why: a reader sees them offline.
    damaged_zones: Vec<(u32, String)>,
    /// Opened to drive it (files writable), or only to look at it.
    writable: bool,
    /// Holds the image's exclusive lock until the image is dropped.
    _lock: fs::File,
}

/// What `Image::rebuild_zone_records` made of a zone whose record did not check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RebuiltZone {
    pub zone: u32,
    pub damage: String,
    pub state: ZoneState,
    pub wp_offset_lba: u64,
}

/// The first namespace key an image's `config.toml` lacks. Every image records every key: a user's configuration
/// may leave one to its default, but a key missing from an image means the file was damaged (a deleted
/// `max-open` must not silently lift the limit).
fn missing_namespace_key(table: &toml::Table) -> Option<String> {
    let recorded = table.get("namespace").and_then(toml::Value::as_table)?;
    let every = toml::Table::try_from(NamespaceConfig::default()).expect("a namespace configuration serializes");
    every.keys().find(|key| !recorded.contains_key(*key)).cloned()
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> ImageError + '_ {
    move |source| ImageError::Io { path: path.to_path_buf(), source }
}

/// How an image is opened: to drive it (an exclusive lock, files writable), or only to look at it (a shared
/// lock, files read-only), which works on an image the user may not write and beside other readers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    ReadWrite,
    ReadOnly,
}

/// Blocks from zone `zone`'s start to just past its last block that is not all zeros.
fn written_extent(store: &dyn MediaStore, geometry: &Geometry, zone: u32) -> io::Result<u64> {
    const CHUNK_LBA: u64 = 256;
    let lba_bytes = 1u64 << geometry.lba_shift;
    let start = geometry.zone_start_lba(zone);
    let mut written = 0;
    let mut buf = vec![0u8; (CHUNK_LBA * lba_bytes) as usize];
    let mut at = 0;
    while at < geometry.zone_cap_lba {
        let count = CHUNK_LBA.min(geometry.zone_cap_lba - at);
        let chunk = &mut buf[..(count * lba_bytes) as usize];
        store.read_at((start + at) * lba_bytes, chunk).map_err(|error| io::Error::other(error.to_string()))?;
        if let Some(last) = chunk.chunks(lba_bytes as usize).rposition(|block| block.iter().any(|&byte| byte != 0)) {
            written = at + last as u64 + 1;
        }
        at += count;
    }
    Ok(written)
}

/// A namespace's store of `kind`, `size_bytes` long; for the file store, the data file at `path`.
fn open_store(
    kind: StoreKind,
    path: &Path,
    size_bytes: u64,
    writable: bool,
) -> Result<Box<dyn MediaStore>, ImageError> {
    Ok(match kind {
        StoreKind::File => {
            let store = FileStore::open(path, size_bytes, writable).map_err(|error| match error.kind() {
                io::ErrorKind::InvalidData => {
                    ImageError::Corrupt { path: path.to_path_buf(), reason: error.to_string() }
                }
                _ => io_error(path)(error),
            })?;
            Box::new(store)
        }
        StoreKind::Memory => Box::new(MemoryStore::new(size_bytes)),
        StoreKind::Null => Box::new(NullStore),
    })
}

/// Takes the lock on an image's journal: exclusive to drive it, shared to look at it.
fn lock(dir: &Path, journal_path: &Path, access: Access) -> Result<fs::File, ImageError> {
    let file = fs::File::open(journal_path).map_err(io_error(journal_path))?;
    let kind = if access == Access::ReadWrite { libc::LOCK_EX } else { libc::LOCK_SH };
    // SAFETY: flock only reads its integer arguments; the descriptor is owned by `file`.
    if unsafe { libc::flock(file.as_raw_fd(), kind | libc::LOCK_NB) } != 0 {
        return Err(ImageError::Busy(dir.to_path_buf()));
    }
    Ok(file)
}

/// The directory beside `dir` that a creation by process `pid` builds in, and where the image it replaces
/// goes before it is removed: `.NAME.zonelab-new-PID`.
fn sibling(dir: &Path, pid: u32) -> PathBuf {
    let name = dir.file_name().map_or_else(|| "image".into(), |name| name.to_string_lossy().into_owned());
    dir.with_file_name(format!(".{name}.zonelab-new-{pid}"))
}

/// Exchanges two directories at once, so that no instant sees neither.
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let (a, b) = (std::ffi::CString::new(a.as_os_str().as_bytes())?, std::ffi::CString::new(b.as_os_str().as_bytes())?);
    // SAFETY: both paths are NUL-terminated strings that live across the call.
    let result =
        unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Removes what creations of `dir` by processes no longer running left beside it.
fn remove_leftovers(dir: &Path) {
    let Some(name) = dir.file_name().map(|name| name.to_string_lossy().into_owned()) else { return };
    let parent = match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(entries) = fs::read_dir(&parent) else { return };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = file_name.strip_prefix(&format!(".{name}.zonelab-new-")) else { continue };
        let running = pid.parse::<u32>().is_ok_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if !running {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

impl Image {
    /// Creates an image at `dir` with every zone EMPTY. An existing image is replaced only with `force`, and
    /// a directory that is not an image is never replaced.
    ///
    /// The new image is built in a directory beside `dir` and renamed into place only when it is complete, so
    /// a failed or killed creation leaves what was at `dir` as it was. Replacing an image holds its lock from
    /// before the new one is built until the old one is gone: a second creation racing it gets "in use". What a
    /// killed creation left beside `dir` is removed by the next one.
    pub fn create(
        dir: &Path,
        store: StoreKind,
        namespace: NamespaceConfig,
        device: Option<toml::Table>,
        force: bool,
    ) -> Result<Image, ImageError> {
        let geometry = namespace.validate()?;
        let (mut old_lock, mut replace) = (None, false);
        if dir.exists() {
            let is_image = dir.join(CONFIG_FILE).exists();
            let is_empty_dir = fs::read_dir(dir).map(|mut entries| entries.next().is_none()).unwrap_or(false);
            if !is_image && !is_empty_dir {
                return Err(ImageError::NotAnImage(dir.to_path_buf()));
            }
            if is_image && !force {
                return Err(ImageError::Exists(dir.to_path_buf()));
            }
            let journal_path = dir.join(JOURNAL_FILE);
            if is_image && journal_path.exists() {
                old_lock = Some(lock(dir, &journal_path, Access::ReadWrite)?);
            }
            replace = is_image;
        }
        remove_leftovers(dir);
        let building = sibling(dir, std::process::id());
        // Errors name the image's own files, not the directory it is built in.
        let named = |path: PathBuf| path.strip_prefix(&building).map_or(path.clone(), |file| dir.join(file));
        let built = Image::build(&building, store, &geometry, namespace, device).map_err(|error| match error {
            ImageError::Io { path, source } => ImageError::Io { path: named(path), source },
            ImageError::Journal(JournalError::Io { path, source }) => {
                ImageError::Journal(JournalError::Io { path: named(path), source })
            }
            other => other,
        });
        // The new image is opened (and locked) before it is put in place, so that no other process can take it
        // between the exchange and this one's open: the lock moves with the directory.
        let opened = built.and_then(|()| Image::open(&building));
        let placed = opened.and_then(|image| Image::put_in_place(&building, dir, replace).map(|()| image));
        let mut image = match placed {
            Ok(image) => image,
            Err(error) => {
                let _ = fs::remove_dir_all(&building);
                return Err(error);
            }
        };
        image.path = dir.to_path_buf();
        drop(old_lock);
        Ok(image)
    }

    /// Writes a complete image (data file, journal, then configuration) into the new directory `dir`.
    fn build(
        dir: &Path,
        store: StoreKind,
        geometry: &crate::Geometry,
        namespace: NamespaceConfig,
        device: Option<toml::Table>,
    ) -> Result<(), ImageError> {
        fs::create_dir_all(dir).map_err(io_error(dir))?;
        if store == StoreKind::File {
            let data_path = dir.join(DATA_FILE);
            FileStore::create(&data_path, geometry.nsze_lba << geometry.lba_shift).map_err(io_error(&data_path))?;
        }
        ZoneJournal::create(&dir.join(JOURNAL_FILE), geometry)?;
        let config = ImageConfig { format_version: IMAGE_FORMAT_VERSION, store, namespace, device };
        let text = toml::to_string(&config).expect("an image configuration always serializes");
        let config_path = dir.join(CONFIG_FILE);
        fs::write(&config_path, text).map_err(io_error(&config_path))?;
        fs::File::open(dir).and_then(|handle| handle.sync_all()).map_err(io_error(dir))
    }

    /// Moves the complete image at `building` to `dir`: over nothing or an empty directory, or, with
    /// `replace`, over the old image, exchanging the two at once (`renameat2(RENAME_EXCHANGE)`), then removing
    /// the old one.
    fn put_in_place(building: &Path, dir: &Path, replace: bool) -> Result<(), ImageError> {
        let taken = |error: io::Error| match error.raw_os_error() {
            Some(libc::ENOTEMPTY) | Some(libc::EEXIST) => ImageError::Exists(dir.to_path_buf()),
            _ => io_error(dir)(error),
        };
        if !replace {
            return fs::rename(building, dir).map_err(taken);
        }
        exchange(building, dir).map_err(io_error(dir))?;
        let _ = fs::remove_dir_all(building);
        Ok(())
    }

    /// Opens an image, completing any many-zone command a crash interrupted.
    pub fn open(dir: &Path) -> Result<Image, ImageError> {
        Image::open_as(dir, Access::ReadWrite)
    }

    /// Opens an image to look at it (reports, reads) without changing it: files read-only, beside other
    /// readers. An image a crash left in the middle of a many-zone command must be opened to drive it first.
    ///
    /// A zone whose record in the zone journal does not check fails a read-write open, naming it; a read-only
    /// open shows it offline (`damaged_zones` says which and why), so that the rest can still be read.
    pub fn open_as(dir: &Path, access: Access) -> Result<Image, ImageError> {
        Image::open_with(dir, access, false).map(|(image, _, _)| image)
    }

    /// Opens an image read-write after rebuilding every zone record that does not check from the data: the
    /// write pointer after the zone's last block that is not all zeros, the zone EMPTY, CLOSED or FULL by it.
    /// Zeros written at a zone's end cannot be told from blocks never written, so such a zone comes back with
    /// a lower write pointer. Returns what each rebuilt zone became.
    ///
    /// A zone journal whose header is damaged gets a new one first (`ZoneJournal::rebuild_header`), and what was
    /// done is returned beside the zones.
    pub fn rebuild_zone_records(dir: &Path) -> Result<(Image, Option<String>, Vec<RebuiltZone>), ImageError> {
        Image::open_with(dir, Access::ReadWrite, true)
    }

    fn open_with(
        dir: &Path,
        access: Access,
        rebuild: bool,
    ) -> Result<(Image, Option<String>, Vec<RebuiltZone>), ImageError> {
        let config_path = dir.join(CONFIG_FILE);
        let text = match fs::read_to_string(&config_path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Err(ImageError::Missing(dir.to_path_buf()))
            }
            Err(error) => return Err(io_error(&config_path)(error)),
        };
        let corrupt = |reason: String| ImageError::Corrupt { path: config_path.clone(), reason };
        let table: toml::Table = crate::toml_decode::decode(&text).map_err(corrupt)?;
        let version = table
            .get("format-version")
            .and_then(toml::Value::as_integer)
            .ok_or_else(|| corrupt("it has no format-version".into()))?;
        if version != i64::from(IMAGE_FORMAT_VERSION) {
            return Err(ImageError::Version { path: config_path, found: u32::try_from(version).unwrap_or(u32::MAX) });
        }
        if let Some(key) = missing_namespace_key(&table) {
            return Err(corrupt(format!("[namespace] lacks {key}, which every image records")));
        }
        let config: ImageConfig = crate::toml_decode::decode(&text).map_err(corrupt)?;
        let geometry = config.namespace.validate()?;
        let journal_path = dir.join(JOURNAL_FILE);
        let lock_holder = lock(dir, &journal_path, access)?;
        let header = if rebuild { ZoneJournal::rebuild_header(&journal_path, &geometry)? } else { None };
        let writable = access == Access::ReadWrite;
        let (mut journal, records, intent) = ZoneJournal::open(&journal_path, &geometry, writable)?;
        if intent.is_some() && !writable {
            return Err(ImageError::NeedsRecovery(dir.to_path_buf()));
        }
        let damaged_zones: Vec<(u32, String)> =
            records.iter().zip(0u32..).filter_map(|(record, zone)| Some((zone, record.clone().err()?))).collect();
        if let Some((zone, reason)) = damaged_zones.first().filter(|_| writable && !rebuild) {
            return Err(ImageError::Corrupt {
                path: journal_path,
                reason: format!(
                    "{reason} ({} damaged zone records); nothing writes to it. Readers (info, report, read, fs) \
                     open it with zone {zone} offline; `zonelab repair-zones {}` rebuilds the records from the data",
                    damaged_zones.len(),
                    dir.display()
                ),
            });
        }
        let store = open_store(config.store, &dir.join(DATA_FILE), geometry.nsze_lba << geometry.lba_shift, writable)?;
        let mut rebuilt = Vec::new();
        let records: Vec<ZoneRecord> = records
            .into_iter()
            .zip(0u32..)
            .map(|(record, zone)| match record {
                Ok(record) => Ok(record),
                Err(_) if !rebuild => {
                    Ok(ZoneRecord { state: ZoneState::Offline, attrs: 0, wp_offset_lba: 0, open_seq: 0 })
                }
                Err(damage) => {
                    let wp_offset_lba =
                        written_extent(store.as_ref(), &geometry, zone).map_err(io_error(&journal_path))?;
                    let state = match wp_offset_lba {
                        0 => ZoneState::Empty,
                        wp if wp == geometry.zone_cap_lba => ZoneState::Full,
                        _ => ZoneState::Closed,
                    };
                    let record = ZoneRecord { state, attrs: 0, wp_offset_lba, open_seq: 0 };
                    journal.write_zone(zone, &record).map_err(io_error(&journal_path))?;
                    rebuilt.push(RebuiltZone { zone, damage, state, wp_offset_lba });
                    Ok(record)
                }
            })
            .collect::<Result<_, ImageError>>()?;
        if !rebuilt.is_empty() {
            journal.sync().map_err(io_error(&journal_path))?;
        }
        let mut namespace = ZonedNamespace::restore(config.namespace, store, journal, &records)
            .map_err(|reason| ImageError::Corrupt { path: journal_path.clone(), reason })?;
        if let Some(intent) = intent {
            namespace.replay(intent).map_err(|status| ImageError::Corrupt {
                path: journal_path.clone(),
                reason: format!("the interrupted command {intent:?} could not be completed: {status}"),
            })?;
        }
        let damaged_zones = if rebuild { Vec::new() } else { damaged_zones };
        let image = Image {
            path: dir.to_path_buf(),
            store_kind: config.store,
            device: config.device,
            namespace,
            damaged_zones,
            writable,
            _lock: lock_holder,
        };
        Ok((image, header, rebuilt))
    }

    /// Zones whose journal record does not check (shown offline by a read-only open), with why.
    pub fn damaged_zones(&self) -> &[(u32, String)] {
        &self.damaged_zones
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn store_kind(&self) -> StoreKind {
        self.store_kind
    }

    /// The device model stored with the image, if it was created from one.
    pub fn device(&self) -> Option<&toml::Table> {
        self.device.as_ref()
    }

    pub fn namespace(&self) -> &ZonedNamespace<Box<dyn MediaStore>> {
        &self.namespace
    }

    pub fn namespace_mut(&mut self) -> &mut ZonedNamespace<Box<dyn MediaStore>> {
        &mut self.namespace
    }

    /// The flash model's state saved by the last device that closed this image; None before the first.
    pub fn media_state(&self) -> Result<Option<Vec<u8>>, ImageError> {
        self.saved_file(MEDIA_STATE_FILE)
    }

    /// The conventional namespace's FTL state saved by the last device that closed this image and had used
    /// the namespace; None before that.
    pub fn ftl_state(&self) -> Result<Option<Vec<u8>>, ImageError> {
        self.saved_file(FTL_STATE_FILE)
    }

    fn saved_file(&self, name: &str) -> Result<Option<Vec<u8>>, ImageError> {
        let path = self.path.join(name);
        match fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io_error(&path)(error)),
        }
    }

    /// The store of the device's conventional namespace (`size_bytes` of data), of the image's store kind. Its
    /// data file is made, all holes, the first time a writer asks for it; a reader of an image no writer has
    /// given one reads zeros.
    pub fn conventional_store(&self, size_bytes: u64) -> Result<Box<dyn MediaStore>, ImageError> {
        let path = self.path.join(CONVENTIONAL_DATA_FILE);
        if self.store_kind == StoreKind::File && !path.exists() {
            if !self.writable {
                return Ok(Box::new(NullStore));
            }
            let created = FileStore::create(&path, size_bytes).map_err(io_error(&path))?;
            fs::File::open(&self.path).and_then(|dir| dir.sync_all()).map_err(io_error(&self.path))?;
            return Ok(Box::new(created));
        }
        open_store(self.store_kind, &path, size_bytes, self.writable)
    }

    /// Gives the namespace to an owner that drives it (a simulated device); the returned lock keeps the image
    /// reserved to this process until it is dropped.
    pub fn into_namespace(self) -> (ZonedNamespace<Box<dyn MediaStore>>, ImageLock) {
        (self.namespace, ImageLock { _file: self._lock, dir: self.path })
    }
}

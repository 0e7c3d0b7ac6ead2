//! # zonelab-zns: the zoned namespace
//!
//! The bottom layer of zonelab (see `docs/design.md`): an NVMe Zoned Namespace that follows the ZNS
//! command set exactly as `docs/semantics.md` decides: zone states and transitions, open and active
//! resource limits with auto-close, zone append with ZASL, zone capacity below zone size, reports with filters
//! and the Partial bit, the controller-reset rule, fault injection, and NVMe status codes.
//!
//! It is pure and synchronous and has no notion of time: `ZonedNamespace::execute(command)` returns the
//! completion or the status. The flash timing model, the controller's queues and the runtimes are the layers
//! above. Data lives behind the `MediaStore` trait (`NullStore`, `MemoryStore`, `FileStore`); an `Image` is a
//! directory that keeps a namespace, zone states included, across invocations and crashes of the process.
//!
//! ```
//! use zonelab_zns::{ByteSize, MemoryStore, NamespaceConfig, Status, ZoneState, ZonedNamespace};
//!
//! let config = NamespaceConfig { zones: 4, zone_size: ByteSize(1 << 20), max_open: 1, ..NamespaceConfig::default() };
//! let mut ns = ZonedNamespace::new(config, MemoryStore::new(4 << 20))?;
//! let block = [0xabu8; 4096];
//!
//! ns.write(0, &block)?; // at zone 0's write pointer: the zone opens implicitly
//! assert_eq!(ns.zone(0).state, ZoneState::ImplicitlyOpened);
//! assert_eq!(ns.write(0, &block), Err(Status::ZoneInvalidWrite)); // no longer the write pointer
//!
//! let lba = ns.append(256, &block)?; // zone 1; the open limit auto-closes zone 0
//! assert_eq!((lba, ns.zone(0).state), (256, ZoneState::Closed));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod codec;
mod config;
mod conventional;
mod effect;
mod fault;
mod image;
mod journal;
mod namespace;
pub mod pattern;
mod size;
mod status;
mod store;
pub mod toml_decode;
mod zone;

pub use config::{
    transfers, CloseEmptyOpenZone, ConfigError, Geometry, NamespaceConfig, NamespaceKind, MAX_ZONES, MIN_PAGE_BYTES,
};
pub use conventional::{ConventionalConfig, ConventionalNamespace};
pub use effect::{Effect, Effects, Executed, TransitionCause};
pub use fault::HostFault;
pub use image::{
    Access, Image, ImageConfig, ImageError, ImageLock, RebuiltZone, StoreKind, FTL_STATE_FILE, IMAGE_FORMAT_VERSION,
};
pub use journal::{JournalError, JOURNAL_FORMAT_VERSION};
pub use namespace::{
    Command, Completion, InjectError, ReceiveAction, ZonedIdentify, ZonedNamespace, SUPPORTED_IO_OPCODES,
};
pub use size::{ByteSize, ParseSizeError};
pub use status::{Status, STATUS_DNR};
pub use store::{FaultyStore, FileStore, MediaStore, MemoryStore, NullStore, StoreError};
pub use zone::{
    zone_attrs, ParseZoneStateError, ReportFilter, ZoneDescriptor, ZoneReport, ZoneSendAction, ZoneState,
    REPORT_HEADER_BYTES, WP_INVALID, ZONE_DESCRIPTOR_BYTES, ZONE_TYPE_SEQUENTIAL_WRITE_REQUIRED,
};

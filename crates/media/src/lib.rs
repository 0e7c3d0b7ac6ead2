//! # zonelab-media: the flash model
//!
//! Layer 2 of `docs/design.md`: how long each command takes on flash, what it costs in energy, and what it
//! wears. It knows NAND geometry (channels, dies, planes, pages, the program unit, blocks), where each zone's
//! data lives, and the resources a command needs: planes, channels, the host link, the controller's command
//! processor, each zone's write buffer, and the device's read and write bandwidth budgets. Every resource keeps
//! the time at which it is next free; a command reserves what it needs when it is submitted and so gets its
//! completion time (NVMeVirt's approach, see `docs/calibration.md` a.1). Resets erase blocks on
//! the planes that hold them and Finish writes padding through the same planes and bandwidth, so interference
//! between zone management and I/O comes out of the reservations, not out of special cases.
//!
//! The model has no notion of zone states or commands' legality: the zns layer decides those, and the device
//! layer tells this model what happened. Time is `u64` nanoseconds of device time.

mod buckets;
mod config;
mod divisor;
mod energy;
mod ids;
mod model;
mod renewable;
mod timeline;

pub use buckets::{BucketBits, Linked, Slab, BUCKETS, NIL};
pub use config::{
    ControllerConfig, EnergyConfig, EraseTiming, MappingConfig, MappingPolicy, MediaConfig, MediaConfigError,
    NandConfig, StripeStart,
};
pub use energy::{FlashCounters, FlashOp, OpSource};
pub use ids::{LogicalZone, PhysicalZone, ProgramUnit};
pub use model::{EraseSummary, FlashEvent, FlashModel, MediaState, Restored, WriteKind};
pub use renewable::RenewableStats;

//! What a command did to the namespace, as `ZonedNamespace::execute` reports it: the layers above (the flash
//! model, traces) act on this list instead of re-deriving it from zone states.

use smallvec::SmallVec;

use crate::{ZoneSendAction, ZoneState};

/// Why a zone changed state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionCause {
    /// A write or append: the zone opened implicitly, or filled to its capacity and became FULL.
    Write,
    /// The zone was the oldest implicitly opened one and was closed to free an open resource for another.
    AutoClose,
    /// A Zone Management Send action from the host (one zone or Select All).
    Host(ZoneSendAction),
    /// The controller finished the zone on its own (Zone Finished by Controller).
    Controller,
    /// A controller reset or power cycle closed the zone.
    PowerCycle,
    /// A power loss moved the zone's write pointer back to what was durable.
    PowerLoss,
    /// Fault injection (read-only, offline, or back to EMPTY).
    Injected,
}

/// One effect of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// A zone moved from one state to another (or, for `PowerLoss`, kept its state with a new write pointer).
    Transition { zone: u32, from: ZoneState, to: ZoneState, cause: TransitionCause },
    /// `nlb` blocks were written at `slba` (a write, write zeroes or append; zeros count as data).
    Written { zone: u32, slba: u64, nlb: u64 },
}

/// The effects of one command, in the order they happened. Most commands have at most three (a write that
/// auto-closes a victim and opens its zone), so they live inline; Select All spills to the heap.
pub type Effects = SmallVec<[Effect; 3]>;

/// A successful command: its completion and what it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executed {
    pub completion: crate::Completion,
    pub effects: Effects,
}

impl Executed {
    /// The transitions `zone` went through, in order.
    pub fn transitions_of(&self, zone: u32) -> impl Iterator<Item = (ZoneState, ZoneState, TransitionCause)> + '_ {
        self.effects.iter().filter_map(move |effect| match *effect {
            Effect::Transition { zone: z, from, to, cause } if z == zone => Some((from, to, cause)),
            _ => None,
        })
    }
}

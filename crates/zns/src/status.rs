//! NVMe status codes that the zoned namespace returns (docs/semantics.md section 0).

use std::fmt;

/// A failed command's NVMe status: Status Code Type and Status Code, as QEMU encodes them (`(SCT << 8) | SC`).
///
/// Every zone error carries Do Not Retry, as QEMU sets it; `errno` gives the Linux view of the same failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    InvalidOpcode,
    InvalidField,
    /// The command names a namespace the controller does not have.
    InvalidNamespaceOrFormat,
    LbaOutOfRange,
    InvalidZoneOperationRequest,
    ZrwaResourcesUnavailable,
    ZoneBoundaryError,
    ZoneIsFull,
    ZoneIsReadOnly,
    ZoneIsOffline,
    ZoneInvalidWrite,
    TooManyActiveZones,
    TooManyOpenZones,
    InvalidZoneStateTransition,
    WriteFault,
    UnrecoveredReadError,
    DeallocatedOrUnwrittenLogicalBlock,
}

/// The Do Not Retry bit of the status field, in QEMU's encoding.
pub const STATUS_DNR: u16 = 0x4000;

impl Status {
    /// Every status, for lookups by code.
    pub const ALL: [Status; 17] = [
        Status::InvalidOpcode,
        Status::InvalidField,
        Status::InvalidNamespaceOrFormat,
        Status::LbaOutOfRange,
        Status::InvalidZoneOperationRequest,
        Status::ZrwaResourcesUnavailable,
        Status::ZoneBoundaryError,
        Status::ZoneIsFull,
        Status::ZoneIsReadOnly,
        Status::ZoneIsOffline,
        Status::ZoneInvalidWrite,
        Status::TooManyActiveZones,
        Status::TooManyOpenZones,
        Status::InvalidZoneStateTransition,
        Status::WriteFault,
        Status::UnrecoveredReadError,
        Status::DeallocatedOrUnwrittenLogicalBlock,
    ];

    /// The status with `code` (`(SCT << 8) | SC`), if it is one of ours.
    pub fn from_code(code: u16) -> Option<Status> {
        Status::ALL.into_iter().find(|status| status.code() == code)
    }

    /// `(SCT << 8) | SC`, e.g. `0x1bc` for Zone Invalid Write.
    pub const fn code(self) -> u16 {
        match self {
            Status::InvalidOpcode => 0x001,
            Status::InvalidField => 0x002,
            Status::InvalidNamespaceOrFormat => 0x00b,
            Status::LbaOutOfRange => 0x080,
            Status::InvalidZoneOperationRequest => 0x1b6,
            Status::ZrwaResourcesUnavailable => 0x1b7,
            Status::ZoneBoundaryError => 0x1b8,
            Status::ZoneIsFull => 0x1b9,
            Status::ZoneIsReadOnly => 0x1ba,
            Status::ZoneIsOffline => 0x1bb,
            Status::ZoneInvalidWrite => 0x1bc,
            Status::TooManyActiveZones => 0x1bd,
            Status::TooManyOpenZones => 0x1be,
            Status::InvalidZoneStateTransition => 0x1bf,
            Status::WriteFault => 0x280,
            Status::UnrecoveredReadError => 0x281,
            Status::DeallocatedOrUnwrittenLogicalBlock => 0x287,
        }
    }

    /// The libnvme name of the status.
    pub const fn name(self) -> &'static str {
        match self {
            Status::InvalidOpcode => "Invalid Opcode",
            Status::InvalidField => "Invalid Field in Command",
            Status::InvalidNamespaceOrFormat => "Invalid Namespace or Format",
            Status::LbaOutOfRange => "LBA Out of Range",
            Status::InvalidZoneOperationRequest => "Invalid Zone Operation Request",
            Status::ZrwaResourcesUnavailable => "ZRWA Resources Unavailable",
            Status::ZoneBoundaryError => "Zone Boundary Error",
            Status::ZoneIsFull => "Zone Is Full",
            Status::ZoneIsReadOnly => "Zone Is Read Only",
            Status::ZoneIsOffline => "Zone Is Offline",
            Status::ZoneInvalidWrite => "Zone Invalid Write",
            Status::TooManyActiveZones => "Too Many Active Zones",
            Status::TooManyOpenZones => "Too Many Open Zones",
            Status::InvalidZoneStateTransition => "Invalid Zone State Transition",
            Status::WriteFault => "Write Fault",
            Status::UnrecoveredReadError => "Unrecovered Read Error",
            Status::DeallocatedOrUnwrittenLogicalBlock => "Deallocated or Unwritten Logical Block",
        }
    }

    /// Whether the completion carries Do Not Retry. QEMU sets it on every zone and field error; media errors
    /// (Write Fault, Unrecovered Read Error) may succeed when retried.
    pub const fn do_not_retry(self) -> bool {
        !matches!(self, Status::WriteFault | Status::UnrecoveredReadError)
    }

    /// The status field as a completion entry carries it: the code with DNR where it applies.
    pub const fn status_field(self) -> u16 {
        if self.do_not_retry() {
            self.code() | STATUS_DNR
        } else {
            self.code()
        }
    }

    /// The errno a Linux host sees (`nvme_error_status()`): the two resource errors have their own, every
    /// other failure is EIO.
    pub const fn errno(self) -> i32 {
        match self {
            Status::TooManyActiveZones => libc::EOVERFLOW,
            Status::TooManyOpenZones => libc::ETOOMANYREFS,
            _ => libc::EIO,
        }
    }
}

impl fmt::Display for Status {
    /// `Zone Invalid Write (0x1bc)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:#05x})", self.name(), self.code())
    }
}

impl std::error::Error for Status {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_status_and_code() {
        assert_eq!(Status::ZoneInvalidWrite.to_string(), "Zone Invalid Write (0x1bc)");
        assert_eq!(Status::InvalidField.to_string(), "Invalid Field in Command (0x002)");
        assert_eq!(Status::LbaOutOfRange.to_string(), "LBA Out of Range (0x080)");
    }

    #[test]
    fn zone_errors_carry_dnr_and_linux_errnos() {
        assert_eq!(Status::ZoneIsFull.status_field(), 0x41b9);
        assert_eq!(Status::WriteFault.status_field(), 0x280);
        assert_eq!(Status::TooManyActiveZones.errno(), libc::EOVERFLOW);
        assert_eq!(Status::TooManyOpenZones.errno(), libc::ETOOMANYREFS);
        assert_eq!(Status::ZoneInvalidWrite.errno(), libc::EIO);
    }
}

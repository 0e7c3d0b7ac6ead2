//! The host error behind a Write Fault or an Unrecovered Read Error: a device image lives in host files, and a
//! full host file system must say so, not only report the NVMe status.

use std::io;
use std::path::Path;

/// Which of a device image's files failed, and how.
#[derive(Debug)]
pub struct HostFault {
    /// The file, as named inside an image directory: `data` or `zones.meta`.
    pub file: &'static str,
    pub writing: bool,
    pub error: io::Error,
}

impl HostFault {
    /// The image file that holds a namespace's data.
    pub const DATA: &'static str = "data";
    /// The image file that holds its zone journal.
    pub const JOURNAL: &'static str = "zones.meta";
}

impl HostFault {
    /// `host file system full (ENOSPC) writing IMG/data`, for the image in `image_dir`.
    pub fn describe(&self, image_dir: &Path) -> String {
        format!("{} {} {}", self.cause(), self.verb(), image_dir.join(self.file).display())
    }

    /// The errno by name where users meet it, else the system's message.
    fn cause(&self) -> String {
        match self.error.raw_os_error() {
            Some(libc::ENOSPC) => "host file system full (ENOSPC)".into(),
            Some(libc::EDQUOT) => "host disk quota exceeded (EDQUOT)".into(),
            Some(libc::EROFS) => "host file system is read-only (EROFS)".into(),
            Some(libc::EIO) => "host I/O error (EIO)".into(),
            _ => self.error.to_string(),
        }
    }

    fn verb(&self) -> &'static str {
        if self.writing {
            "writing"
        } else {
            "reading"
        }
    }
}

impl std::fmt::Display for HostFault {
    /// `host file system full (ENOSPC) writing data`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.cause(), self.verb(), self.file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_named_with_its_errno_and_the_file() {
        let fault =
            HostFault { file: HostFault::DATA, writing: true, error: io::Error::from_raw_os_error(libc::ENOSPC) };
        assert_eq!(fault.to_string(), "host file system full (ENOSPC) writing data");
        assert_eq!(fault.describe(Path::new("img")), "host file system full (ENOSPC) writing img/data");
        let other = HostFault { file: HostFault::JOURNAL, writing: false, error: io::Error::other("torn") };
        assert_eq!(other.to_string(), "torn reading zones.meta");
    }
}

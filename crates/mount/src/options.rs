//! Mount options, with zonefs's names and defaults (Documentation/filesystems/zonefs.rst, "Mount options").

use std::str::FromStr;

/// What zonefs does to a file (or the whole mount) after an I/O error: the `errors=` option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ErrorsPolicy {
    /// The whole file system becomes read-only (zonefs's default).
    #[default]
    RemountRo,
    /// The file whose zone failed becomes read-only.
    ZoneRo,
    /// The file whose zone failed becomes inaccessible, as if its zone were offline.
    ZoneOffline,
    /// The file's size is fixed from its zone's write pointer; writing goes on.
    Repair,
}

/// The options of one mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountOptions {
    pub errors: ErrorsPolicy,
    /// Open a file's zone explicitly (Zone Open) when the file is first opened for writing and close it
    /// when the last writer closes it; opens for writing beyond the device's open-zone limit fail with EBUSY.
    pub explicit_open: bool,
    /// Owner, group and permission bits of every file (zonefs: `uid=`, `gid=`, `perm=`; 0, 0 and 0640).
    pub uid: u32,
    pub gid: u32,
    pub perm: u16,
    /// Mount read-only (`ro`).
    pub read_only: bool,
    /// zonelab's own (`poll`): the request loop polls the FUSE device instead of sleeping in its read, so
    /// the kernel never has to wake it; it keeps a core busy (docs/mount.md measures what it saves).
    pub poll: bool,
    /// Mount over a directory that holds files (`nonempty`, as FUSE names it), hiding them until unmounted.
    pub nonempty: bool,
    /// zonelab's own (`async-dio`): ask the kernel for FUSE's asynchronous direct I/O, so that one thread's
    /// libaio reads are in flight together. Linux then turns any short asynchronous direct write into EIO
    /// (`fuse_get_res_by_io`), so a libaio or io_uring write that crosses a zone's capacity fails instead of
    /// being cut short as zonefs cuts it; off by default.
    pub async_dio: bool,
    /// zonelab's own (`control=PATH`): the Unix socket of the mount's control channel (`control.rs`), through which
    /// faults and raw writes reach the live device.
    pub control: Option<std::path::PathBuf>,
    /// zonelab's own (`trace=PATH`, or `trace=` in the device spec): write the mount's requests, the device's
    /// commands and its flash operations as a Perfetto trace at unmount (`zonelab_host::trace`).
    pub trace: Option<std::path::PathBuf>,
}

impl Default for MountOptions {
    fn default() -> MountOptions {
        MountOptions {
            errors: ErrorsPolicy::default(),
            explicit_open: false,
            uid: 0,
            gid: 0,
            perm: 0o640,
            read_only: false,
            poll: false,
            nonempty: false,
            async_dio: false,
            control: None,
            trace: None,
        }
    }
}

/// An option the mount does not know or cannot read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("mount option '{option}': {reason}")]
pub struct OptionError {
    pub option: String,
    pub reason: String,
}

impl FromStr for MountOptions {
    type Err = OptionError;

    /// Reads a comma-separated list, as `mount -o` takes it: `errors=remount-ro|zone-ro|zone-offline|repair`,
    /// `explicit-open`, `uid=N`, `gid=N`, `perm=OCTAL`, `ro`, `rw`, and zonelab's `poll`, `nonempty`,
    /// `async-dio`, `control=PATH` and `trace=PATH`.
    fn from_str(text: &str) -> Result<MountOptions, OptionError> {
        let mut options = MountOptions::default();
        for option in text.split(',').filter(|option| !option.is_empty()) {
            let error = |reason: &str| OptionError { option: option.to_string(), reason: reason.to_string() };
            let (key, value) = match option.split_once('=') {
                Some((key, value)) => (key, Some(value)),
                None => (option, None),
            };
            match (key, value) {
                ("errors", Some(value)) => {
                    options.errors = match value {
                        "remount-ro" => ErrorsPolicy::RemountRo,
                        "zone-ro" => ErrorsPolicy::ZoneRo,
                        "zone-offline" => ErrorsPolicy::ZoneOffline,
                        "repair" => ErrorsPolicy::Repair,
                        _ => return Err(error("expected remount-ro, zone-ro, zone-offline or repair")),
                    }
                }
                ("explicit-open", None) => options.explicit_open = true,
                ("uid", Some(value)) => options.uid = value.parse().map_err(|_| error("expected a user id"))?,
                ("gid", Some(value)) => options.gid = value.parse().map_err(|_| error("expected a group id"))?,
                ("perm", Some(value)) => {
                    options.perm = u16::from_str_radix(value, 8)
                        .ok()
                        .filter(|perm| *perm <= 0o777)
                        .ok_or_else(|| error("expected octal permission bits, at most 777"))?
                }
                ("ro", None) => options.read_only = true,
                ("rw", None) => options.read_only = false,
                ("poll", None) => options.poll = true,
                ("nonempty", None) => options.nonempty = true,
                ("async-dio", None) => options.async_dio = true,
                ("control", Some(path)) if !path.is_empty() => options.control = Some(path.into()),
                ("trace", Some(path)) if !path.is_empty() => options.trace = Some(path.into()),
                _ => {
                    return Err(error(
                        "unknown; zonefs's options are errors=, explicit-open, uid=, gid=, perm=, ro, rw (and zonelab's poll, \
                         nonempty, async-dio, control=, trace=)",
                    ))
                }
            }
        }
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_read_as_zonefs_names_them_and_bad_ones_are_named() {
        let options: MountOptions =
            "errors=zone-offline,explicit-open,uid=7,perm=600,ro,poll,nonempty,async-dio,control=/run/c.sock,trace=t.json"
                .parse()
                .expect("options");
        assert_eq!(
            options,
            MountOptions {
                errors: ErrorsPolicy::ZoneOffline,
                explicit_open: true,
                uid: 7,
                gid: 0,
                perm: 0o600,
                read_only: true,
                poll: true,
                nonempty: true,
                async_dio: true,
                control: Some("/run/c.sock".into()),
                trace: Some("t.json".into()),
            }
        );
        assert_eq!("".parse::<MountOptions>(), Ok(MountOptions::default()));
        let error = "errors=panic".parse::<MountOptions>().expect_err("bad policy");
        assert_eq!(error.option, "errors=panic");
        assert!("perm=999".parse::<MountOptions>().is_err());
        assert!("explicit-open=1".parse::<MountOptions>().is_err());
        assert!("poll=1".parse::<MountOptions>().is_err());
        assert!("compress".parse::<MountOptions>().expect_err("unknown").to_string().contains("'compress'"));
    }
}

//! Where and how the real-time device thread runs. A user-space device shares cores with the programs it serves,
//! and a completion is late whenever the device thread is not on a core at its time (NVMeVirt gives its
//! dispatcher dedicated cores for this reason). Every real-time front end takes the same keys, from its spec
//! (`preset:zn540,device-cpu=1`), its options (the mount's `-o`, zlfs's and the RocksDB plugin's URI query) or
//! the environment (`ZONELAB_DEVICE_CPU=1`), a spec or option winning over the environment:
//!
//! - `device-cpu=N`: pin the thread to CPU N (`sched_setaffinity`);
//! - `device-sched=fifo|normal`: the real-time class at its lowest priority (`SCHED_FIFO` 1, which needs
//!   CAP_SYS_NICE), or the normal class;
//! - `device-wait=adaptive|poll`: between commands, spin briefly, then yield, then park (the default: right for
//!   a thread that shares its core), or busy-poll without ever giving the core up (right for a core of its own);
//! - `device-placement=strict|best-effort`: whether a placement the system refuses fails the open (the default)
//!   or leaves the thread where the kernel puts it, saying so.
//!
//! The defaults leave the thread unpinned in the normal class: on a machine with spare cores the kernel runs it
//! on an idle one. Every pacing report names the placement it ran with.

/// How the device thread waits between commands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Wait {
    /// Spin for a few microseconds, yield for a while, then park until the next submission or completion.
    #[default]
    Adaptive,
    /// Spin without ever yielding or parking: the lowest latency, a core kept busy.
    Poll,
}

/// Where and how the device thread runs; see the module documentation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    pub cpu: Option<usize>,
    pub fifo: bool,
    pub wait: Wait,
    pub best_effort: bool,
}

/// The environment variable each key is read from.
const ENVIRONMENT: [(&str, &str); 4] = [
    ("device-cpu", "ZONELAB_DEVICE_CPU"),
    ("device-sched", "ZONELAB_DEVICE_SCHED"),
    ("device-wait", "ZONELAB_DEVICE_WAIT"),
    ("device-placement", "ZONELAB_DEVICE_PLACEMENT"),
];

impl Placement {
    /// Sets `key` to `value` if `key` is a placement key: Ok(true); Ok(false) for any other key; an error that
    /// names the key and what it takes for a value it cannot read.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let value = value.trim();
        match key {
            "device-cpu" => {
                let cpu =
                    value.parse::<usize>().ok().filter(|cpu| *cpu < libc::CPU_SETSIZE as usize).ok_or_else(|| {
                        format!("device-cpu={value}: not a CPU number (0 to {})", libc::CPU_SETSIZE - 1)
                    })?;
                self.cpu = Some(cpu);
            }
            "device-sched" => {
                self.fifo = match value {
                    "fifo" => true,
                    "normal" => false,
                    _ => return Err(format!("device-sched={value}: not fifo or normal")),
                }
            }
            "device-wait" => {
                self.wait = match value {
                    "adaptive" => Wait::Adaptive,
                    "poll" => Wait::Poll,
                    _ => return Err(format!("device-wait={value}: not adaptive or poll")),
                }
            }
            "device-placement" => {
                self.best_effort = match value {
                    "strict" => false,
                    "best-effort" => true,
                    _ => return Err(format!("device-placement={value}: not strict or best-effort")),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The placement the environment asks for.
    pub fn from_env() -> Result<Placement, String> {
        Placement::from_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Placement, String> {
        let mut placement = Placement::default();
        for (key, variable) in ENVIRONMENT {
            if let Some(value) = lookup(variable) {
                placement.set(key, &value).map_err(|error| format!("{variable}: {error}"))?;
            }
        }
        Ok(placement)
    }

    /// Takes the placement keys out of a device spec (`preset:zn540,device-cpu=1`, `IMAGE,device-wait=poll`),
    /// over the environment's: the spec the device builder reads, and the placement.
    pub fn split_spec(spec: &str) -> Result<(String, Placement), String> {
        let mut placement = Placement::from_env()?;
        let mut parts = spec.split(',');
        let mut kept: Vec<&str> = parts.next().into_iter().collect();
        for part in parts {
            let taken = match part.split_once('=') {
                Some((key, value)) => placement.set(key, value)?,
                None => false,
            };
            if !taken {
                kept.push(part);
            }
        }
        Ok((kept.join(","), placement))
    }

    /// Places the calling thread. What it did, for pacing reports to name; an error when the system refused and
    /// the placement is strict (best effort says what was refused and goes on).
    pub(crate) fn apply(&self) -> Result<String, String> {
        let mut said = Vec::new();
        let mut refused = Vec::new();
        match self.cpu {
            Some(cpu) => match pin_this_thread(cpu) {
                Ok(()) => said.push(format!("pinned to CPU {cpu}")),
                Err(error) => refused.push(format!("device-cpu={cpu}: {error}")),
            },
            None => said.push("unpinned".to_string()),
        }
        if self.fifo {
            let param = libc::sched_param { sched_priority: 1 };
            // SAFETY: sets this thread's (pid 0) policy from a valid sched_param.
            match unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } {
                0 => said.push("SCHED_FIFO 1".to_string()),
                _ => refused.push(format!(
                    "device-sched=fifo: {} (SCHED_FIFO needs CAP_SYS_NICE)",
                    std::io::Error::last_os_error()
                )),
            }
        } else {
            said.push("normal class".to_string());
        }
        said.push(match self.wait {
            Wait::Adaptive => "adaptive wait".to_string(),
            Wait::Poll => "busy-polling".to_string(),
        });
        if refused.is_empty() {
            return Ok(said.join(", "));
        }
        if !self.best_effort {
            return Err(format!("{} (device-placement=best-effort runs on without it)", refused.join("; ")));
        }
        said.push(format!("not placed as asked: {}", refused.join("; ")));
        Ok(said.join(", "))
    }
}

/// Pins the calling thread to `cpu` (also for load generators that compete with the device thread on purpose).
pub fn pin_this_thread(cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes within it (`set` checked cpu <
    // CPU_SETSIZE), and sched_setaffinity reads it for this thread (pid 0).
    let done = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    match done {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// The CPUs the calling thread may run on, lowest first.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid storage that sched_getaffinity fills for this thread (pid 0);
    // CPU_ISSET reads within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|cpu| libc::CPU_ISSET(*cpu, &set)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_from_the_spec_over_the_environment_and_bad_values_are_named() {
        let environment = |name: &str| match name {
            "ZONELAB_DEVICE_CPU" => Some("3".to_string()),
            "ZONELAB_DEVICE_WAIT" => Some("poll".to_string()),
            _ => None,
        };
        let placement = Placement::from_lookup(environment).expect("valid");
        assert_eq!(placement, Placement { cpu: Some(3), fifo: false, wait: Wait::Poll, best_effort: false });
        let bad = Placement::from_lookup(|name| (name == "ZONELAB_DEVICE_SCHED").then(|| "rr".to_string()));
        assert_eq!(bad.expect_err("refused"), "ZONELAB_DEVICE_SCHED: device-sched=rr: not fifo or normal");

        let (spec, placement) =
            Placement::split_spec("preset:zn540,zones=8,device-cpu=0,device-placement=best-effort").expect("valid");
        assert_eq!(spec, "preset:zn540,zones=8", "the device builder sees the rest");
        assert_eq!((placement.cpu, placement.best_effort), (Some(0), true));
        let (spec, _) = Placement::split_spec("/images/a.zl,ns=1").expect("valid");
        assert_eq!(spec, "/images/a.zl,ns=1");
        let error = Placement::split_spec("preset:zn540,device-cpu=many").expect_err("refused");
        assert!(error.starts_with("device-cpu=many: not a CPU number"), "{error}");
    }

    #[test]
    fn a_refused_placement_fails_unless_best_effort_and_says_what_it_did() {
        let apply = |placement: Placement| std::thread::spawn(move || placement.apply()).join().expect("ran");
        let cpu = allowed_cpus()[0];
        let pinned = apply(Placement { cpu: Some(cpu), ..Placement::default() }).expect("an allowed CPU");
        assert_eq!(pinned, format!("pinned to CPU {cpu}, normal class, adaptive wait"));
        // A CPU this machine does not have: the kernel refuses it.
        let absent = Placement { cpu: Some(libc::CPU_SETSIZE as usize - 1), ..Placement::default() };
        let error = apply(absent.clone()).expect_err("refused");
        assert!(error.starts_with("device-cpu=1023: ") && error.contains("best-effort"), "{error}");
        let went_on = apply(Placement { best_effort: true, ..absent }).expect("best effort goes on");
        assert!(went_on.contains("not placed as asked: device-cpu=1023"), "{went_on}");
        let fifo = apply(Placement { fifo: true, wait: Wait::Poll, best_effort: true, ..Placement::default() });
        let fifo = fifo.expect("best effort");
        assert!(fifo.contains("SCHED_FIFO 1") || fifo.contains("CAP_SYS_NICE"), "{fifo}");
        assert!(fifo.contains("busy-polling"), "{fifo}");
    }
}

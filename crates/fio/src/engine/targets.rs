//! The namespaces an invocation's jobs run on. Jobs name one device; their filenames may differ in the namespace
//! alone (`preset:zn540,ns=1` beside `preset:zn540`), and each namespace is a block device of its own, as Linux
//! makes it: its own scheduler, fio's zone bookkeeping for it, and a host FTL over it when asked.

use super::*;
use zonelab_device::Device;

/// One namespace the jobs run on.
pub(super) struct Target<S: MediaStore + 'static> {
    /// What the jobs see: the namespace's geometry, or the one a host FTL over it exports.
    pub(super) geometry: Geometry,
    pub(super) scheduled: Scheduled<Host<S>>,
    /// What the jobs submit to: the scheduler, or a host FTL over it.
    pub(super) queue: JobQueue<S>,
    pub(super) zones: Rc<RefCell<ZoneCache>>,
}

/// A filename's device and the namespace it names (`ns=`), as the device layer parses specs.
pub(super) fn split_namespace(filename: &str) -> (DeviceSpec, Option<String>) {
    DeviceSpec::parse(filename).split_namespace()
}

/// The namespace of each job (by filename, as an index into the returned IDs, which are in the order the jobs
/// first name them); an error names a namespace the device does not have.
pub(super) fn namespaces_of<S: MediaStore>(
    invocation: &FioInvocation,
    device: &Device<S>,
    default_nsid: u32,
) -> Result<(Vec<u32>, HashMap<String, usize>), FioError> {
    let (mut nsids, mut target_of) = (Vec::new(), HashMap::new());
    for job in &invocation.jobs {
        let filename = job.filename.clone().unwrap_or_default();
        if target_of.contains_key(&filename) {
            continue;
        }
        let nsid = match split_namespace(&filename).1.as_deref() {
            None => default_nsid,
            Some(id) => id.parse().ok().filter(|&nsid| device.geometry_of(nsid).is_some()).ok_or_else(|| {
                let ids: Vec<String> = device.namespace_ids().iter().map(u32::to_string).collect();
                FioError::Options(format!(
                    "job {}: {filename}: the device has no namespace {id} (its namespaces: {})",
                    job.name,
                    ids.join(", ")
                ))
            })?,
        };
        let index = nsids.iter().position(|&known| known == nsid).unwrap_or_else(|| {
            nsids.push(nsid);
            nsids.len() - 1
        });
        target_of.insert(filename, index);
    }
    Ok((nsids, target_of))
}

/// What the jobs on namespace `nsid` (`jobs`, the first of them first) can do there: the geometry they see
/// (a host FTL's, with `hostftl`), and fio's write pointers. Refuses what the namespace's kind does not take.
pub(super) fn check_namespace<S: MediaStore>(
    device: &Device<S>,
    nsid: u32,
    jobs: &[&JobOptions],
) -> Result<(Geometry, Vec<u64>), FioError> {
    let first = jobs[0];
    let filename = first.filename.as_deref().unwrap_or_default();
    let device_geometry = device.geometry_of(nsid).expect("the jobs' namespaces exist");
    // With a host FTL the jobs see the namespace it exports: randomly writable, as a conventional one.
    let geometry = match first.hostftl {
        Some(_) if device_geometry.kind == NamespaceKind::Conventional => {
            return Err(FioError::Options(format!(
                "hostftl on {filename}, a conventional namespace: a host FTL runs over a zoned one"
            )));
        }
        Some(over_provisioning) => host_ftl_geometry(&device_geometry, over_provisioning)
            .map_err(|error| FioError::Options(error.to_string()))?,
        None => device_geometry,
    };
    // A conventional namespace is one range, every block of it readable.
    let zone_wps: Vec<u64> = match geometry.kind {
        NamespaceKind::Conventional => vec![geometry.nsze_lba],
        NamespaceKind::Zoned => (0..geometry.zones)
            .map(|zone| {
                let descriptor = device.namespace().zone(zone);
                match descriptor.state {
                    ZoneState::Full | ZoneState::ReadOnly | ZoneState::Offline => {
                        descriptor.start_lba + geometry.zone_cap_lba
                    }
                    _ => descriptor.wp_lba,
                }
            })
            .collect(),
    };
    if geometry.kind == NamespaceKind::Conventional {
        if let Some(job) = jobs.iter().find(|job| job.zonemode_zbd) {
            return Err(FioError::Options(format!(
                "job {}: zonemode=zbd on {filename}, a conventional namespace: it is not a zoned block device",
                job.name
            )));
        }
    } else if let Some(job) =
        jobs.iter().find(|job| matches!(job.rw, ReadWrite::Trim | ReadWrite::RandTrim) && !job.zonemode_zbd)
    {
        return Err(FioError::Options(format!(
            "job {}: rw=trim needs zonemode=zbd (zone resets) on {filename}, a zoned namespace; a conventional \
             namespace (ns= in the filename) takes trims as deallocates",
            job.name
        )));
    }
    Ok((geometry, zone_wps))
}

/// The scheduler of the namespace the jobs `jobs` run on (the first job's, as the block layer has one per
/// device), the host FTL over it if asked, and notes on what the jobs get.
pub(super) fn target<S: MediaStore + 'static>(
    simulation: &Simulation<S>,
    nsid: u32,
    jobs: &[&JobOptions],
    (geometry, zone_wps): (Geometry, Vec<u64>),
    keeps_data: bool,
    notes: &mut Vec<String>,
) -> Result<Target<S>, FioError> {
    let first = jobs[0];
    let host = simulation.host().on_namespace(nsid).expect("the jobs' namespaces exist");
    let namespace_geometry = host.geometry();
    let conventional = namespace_geometry.kind == NamespaceKind::Conventional;
    let scheduler = scheduler_on(first, &namespace_geometry);
    if first.scheduler_defaulted {
        let why = match (scheduler, conventional) {
            (SchedulerKind::None, true) => "gets none, as Linux gives a namespace that is not zoned",
            (SchedulerKind::None, false) => "bypasses the block layer's scheduler",
            _ => "goes through the block layer, where Linux sets it on a zoned device",
        };
        notes.push(format!(
            "scheduler {}: ioengine {} {why} (choose with --scheduler=)",
            scheduler.name(),
            first.ioengine.name()
        ));
    }
    if let Some(other) = jobs.iter().find(|job| !job.scheduler_defaulted && job.scheduler != scheduler) {
        notes.push(format!(
            "job {} asks for scheduler {}, but its namespace has one scheduler: {} (its first job's)",
            other.name,
            other.scheduler.name(),
            scheduler.name()
        ));
    }
    let scheduled = Scheduled::new(host, scheduler, 1280 << 10);
    let queue = match first.hostftl {
        Some(over_provisioning) => {
            let ftl = HostFtl::new(scheduled.clone(), over_provisioning)
                .map_err(|error| FioError::Options(error.to_string()))?;
            JobQueue::HostFtl(if keeps_data { ftl } else { ftl.without_data() })
        }
        None => JobQueue::Direct(scheduled.clone()),
    };
    let zones = Rc::new(RefCell::new(ZoneCache::new(zone_wps, geometry)));
    Ok(Target { geometry, scheduled, queue, zones })
}

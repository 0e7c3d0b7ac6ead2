//! What the jobs ask of the device, checked before anything runs, and how jobs split into groups and ranges.

use super::*;

/// Checks what the jobs ask of the device as a whole: one device (their filenames may differ in the namespace,
/// `ns=`, alone), a host path that can carry what they issue. Returns the first job's filename, the host path
/// (the first job's) and notes on what differs from what was asked.
pub(super) fn check_jobs(invocation: &FioInvocation) -> Result<(String, HostPath, Vec<String>), FioError> {
    let first = &invocation.jobs[0];
    let filename = first
        .filename
        .clone()
        .ok_or_else(|| FioError::Options("no filename given: use --filename=IMAGE or --filename=preset:NAME".into()))?;
    let device = split_namespace(&filename).0;
    let same_device = |job: &&JobOptions| job.filename.as_deref().is_some_and(|name| split_namespace(name).0 == device);
    if let Some(other) = invocation.jobs.iter().find(|job| !same_device(job)) {
        let theirs = other.filename.as_deref().map_or("no filename".to_string(), |name| format!("filename {name}"));
        return Err(FioError::Options(format!(
            "job {} has {theirs}: zonelab runs every job of one invocation on one device ({filename}); their \
             filenames may differ in the namespace (ns=) alone",
            other.name
        )));
    }
    let host = first.ioengine.host_path();
    let mut notes = Vec::new();
    if let Some(other) = invocation.jobs.iter().find(|job| job.ioengine.host_path() != host) {
        notes.push(format!(
            "job {} uses ioengine {}: its commands cost that path's host CPU, but the device is attached through {} \
             (the first job's)",
            other.name,
            other.ioengine.name(),
            host.name()
        ));
    }
    for job in &invocation.jobs {
        if job.zone_append && !host.carries_append() {
            return Err(FioError::Options(format!(
                "job {}: zone_append=1 needs an ioengine that carries zone append (io_uring_cmd or spdk), not {}",
                job.name,
                job.ioengine.name()
            )));
        }
        if job.verify.is_some() && job.zone_append {
            return Err(FioError::Options(format!(
                "job {}: verify with zone_append=1: an append's offset is known only when it completes, after its \
                 verify header is written",
                job.name
            )));
        }
        if job.verify.is_some() && job.zone_reset_frequency > 0.0 {
            return Err(FioError::Options(format!(
                "job {}: verify with zone_reset_frequency: a threshold reset loses data still to be verified (fio \
                 3.33 stops on an assertion)",
                job.name
            )));
        }
        if job.rw == ReadWrite::Finish && !job.zonemode_zbd {
            return Err(FioError::Options(format!("job {}: rw=finish needs zonemode=zbd", job.name)));
        }
        if job.nrfiles > 1 {
            notes.push(format!(
                "job {}: nrfiles={} with one filename is one file, as fio caps it at the files named",
                job.name, job.nrfiles
            ));
        }
        if !job.ignored.is_empty() {
            notes.push(format!(
                "job {}: ignored options with no meaning in a simulation: {}",
                job.name,
                job.ignored.join(" ")
            ));
        }
    }
    Ok((filename, host, notes))
}

/// The scheduler a job runs under on a namespace of `geometry`: the one it asks for, or the one Linux gives the
/// device (`IoEngine::default_scheduler` on a zoned one; none on a namespace that is not zoned).
pub(super) fn scheduler_on(job: &JobOptions, geometry: &Geometry) -> SchedulerKind {
    if job.scheduler_defaulted && geometry.kind == NamespaceKind::Conventional {
        SchedulerKind::None
    } else {
        job.scheduler
    }
}

/// What fio 3.33 requires of the zone options (`zbd_verify_sizes`, strided mode's setup): in zbd mode
/// `zonesize` is the device's zone size and `zoneskip` a whole number of zones; strided mode needs a zonesize.
pub(super) fn check_zone_options(job: &JobOptions, geometry: &Geometry) -> Result<(), FioError> {
    let device_bytes = geometry.nsze_lba << geometry.lba_shift;
    let zone_bytes = geometry.zone_size_lba << geometry.lba_shift;
    let file = job.filename.as_deref().unwrap_or_default();
    let zonesize = job.zonesize.map(|size| size.resolve(device_bytes, zone_bytes));
    let skip = job.zoneskip.resolve(device_bytes, zone_bytes);
    if job.zonemode_zbd {
        if let Some(size) = zonesize.filter(|&size| size != zone_bytes) {
            return Err(FioError::Options(format!(
                "{file}: zonesize {size} does not match the device zone size {zone_bytes}."
            )));
        }
        if !skip.is_multiple_of(zone_bytes) {
            return Err(FioError::Options(format!(
                "{file}: zoneskip {skip} is not a multiple of the device zone size {zone_bytes}."
            )));
        }
    }
    if job.zonemode_strided && zonesize.unwrap_or(0) == 0 {
        return Err(FioError::Options(format!("job {}: zonemode=strided needs a zonesize", job.name)));
    }
    Ok(())
}

/// Bytes each verify header covers: `verify_interval`, else the smallest block size (fio's `min_bs`).
pub(super) fn verify_interval(job: &JobOptions) -> u64 {
    let smallest = job.bssplit.iter().map(|&(bytes, _)| bytes).chain([job.bs_bytes]).min().unwrap_or(job.bs_bytes);
    job.verify_interval.unwrap_or(smallest)
}

/// What fio 3.33 requires of a verifying job's sizes (`zbd_verify_bs`, `fixup_options`): each block size
/// divides the zone size in zbd mode, and is a whole number of verify intervals.
pub(super) fn check_verify_sizes(job: &JobOptions, geometry: &Geometry) -> Result<(), FioError> {
    if job.verify.is_none() {
        return Ok(());
    }
    let zone_bytes = geometry.zone_size_lba << geometry.lba_shift;
    let interval = verify_interval(job);
    for bytes in job.bssplit.iter().map(|&(bytes, _)| bytes).chain([job.bs_bytes]) {
        if job.zonemode_zbd && !zone_bytes.is_multiple_of(bytes) {
            return Err(FioError::Options(format!(
                "job {}: block size {bytes} is not a divisor of the zone size {zone_bytes}",
                job.name
            )));
        }
        if bytes % interval != 0 {
            return Err(FioError::Options(format!(
                "job {}: block size {bytes} is not a multiple of verify_interval {interval}",
                job.name
            )));
        }
    }
    Ok(())
}

/// The jobs as fio runs and reports them: run groups, one after another, each split at a job with `stonewall`;
/// within one, jobs run side by side, each with its reporting group (fio's `groupid`), which a job with
/// `stonewall` or `new_group` moves to the next one (`add_job` in fio's init.c).
pub(super) fn job_groups(invocation: &FioInvocation) -> Vec<Vec<(u32, &JobOptions)>> {
    let mut groups: Vec<Vec<(u32, &JobOptions)>> = Vec::new();
    let mut groupid = 0;
    for job in &invocation.jobs {
        if !groups.is_empty() && (job.stonewall || job.new_group) {
            groupid += 1;
        }
        if groups.is_empty() || job.stonewall {
            groups.push(Vec::new());
        }
        groups.last_mut().expect("a group exists").push((groupid, job));
    }
    groups
}

/// The LBA range `[start, end)` one instance of a job works on: its offset (moved by `offset_increment` per
/// instance) and size, aligned to zones in zbd mode; an error when it holds no block of the job's size.
pub(super) fn instance_range(job: &JobOptions, instance: u32, geometry: &Geometry) -> Result<(u64, u64), FioError> {
    let device_bytes = geometry.nsze_lba << geometry.lba_shift;
    let zone_bytes = geometry.zone_size_lba << geometry.lba_shift;
    let offset = job.offset.resolve(device_bytes, zone_bytes)
        + u64::from(instance) * job.offset_increment.resolve(device_bytes, zone_bytes);
    let size = match job.filesize {
        Some((low, high)) => {
            // fio's `filesize` (`setup_files`): a device outside [low, high] is used as a file of that size,
            // drawn for a range and aligned down to the block size; the job's range ends there.
            let (low, high) = (low.resolve(device_bytes, zone_bytes), high.resolve(device_bytes, zone_bytes));
            let end = if device_bytes < low || device_bytes > high {
                let mut rng = SplitMix64::split(job.randseed, &format!("filesize/{}/{instance}", job.name));
                let drawn = low + rng.below(high.saturating_sub(low).saturating_add(1));
                drawn - drawn % job.bs_bytes.max(1)
            } else {
                device_bytes
            };
            end.saturating_sub(offset)
        }
        None => job.size.map_or(device_bytes.saturating_sub(offset), |size| size.resolve(device_bytes, zone_bytes)),
    };
    let (mut start_lba, mut end_lba) =
        (offset >> geometry.lba_shift, ((offset + size) >> geometry.lba_shift).min(geometry.nsze_lba));
    if job.zonemode_zbd {
        start_lba = start_lba.div_ceil(geometry.zone_size_lba) * geometry.zone_size_lba;
        end_lba = end_lba / geometry.zone_size_lba * geometry.zone_size_lba;
    }
    let bs_blocks = job.bs_bytes >> geometry.lba_shift;
    for bytes in job.bssplit.iter().map(|&(bytes, _)| bytes).chain([job.bs_bytes]) {
        if !bytes.is_multiple_of(u64::from(geometry.lba_size)) || bytes < u64::from(geometry.lba_size) {
            return Err(FioError::Options(format!(
                "job {}: bs={bytes} is not a multiple of the {}-byte LBA",
                job.name, geometry.lba_size
            )));
        }
    }
    if end_lba <= start_lba || end_lba - start_lba < bs_blocks {
        return Err(FioError::Options(format!(
            "job {}: the I/O range at offset {offset} of {size} bytes is empty on this device{}",
            job.name,
            if job.zonemode_zbd { " once aligned to zones" } else { "" }
        )));
    }
    Ok((start_lba, end_lba))
}

//! The fio engine end to end: its JSON schema parses back, a seed fixes the output, and fio's zoned-device
//! rules hold.

use serde_json::Value;
use zonelab_fio::{parse_invocation, run, to_json, FioResult};
use zonelab_media::{FlashOp, OpSource};

fn fio(args: &str) -> Result<FioResult, String> {
    let args: Vec<String> = args.split_whitespace().map(str::to_string).collect();
    let invocation = parse_invocation(&args, |_| Err("no job files here".into())).map_err(|e| e.to_string())?;
    run(&invocation, 1).map_err(|e| e.to_string())
}

/// The JSON without the wall-clock figures, which are the only ones that vary between runs.
fn deterministic_json(result: &FioResult) -> String {
    let mut json = to_json(result, false);
    for key in ["timestamp", "timestamp_ms", "time"] {
        json.as_object_mut().expect("document").remove(key);
    }
    for job in json["jobs"].as_array_mut().expect("jobs") {
        job["zonelab"].as_object_mut().expect("zonelab").remove("wall");
    }
    serde_json::to_string(&json).expect("serializes")
}

const DEVICE: &str = "--filename=preset:zn540,zones=16 --zonemode=zbd --direct=1";

#[test]
fn json_has_fios_schema_and_parses_back() {
    let result =
        fio(&format!("{DEVICE} --name=w --rw=write --bs=8k --size=1z --ioengine=spdk --percentile_list=50:99.9"))
            .expect("runs");
    let text = serde_json::to_string_pretty(&to_json(&result, false)).expect("json");
    let json: Value = serde_json::from_str(&text).expect("parses back");
    assert!(json["fio version"].is_string());
    let job = &json["jobs"][0];
    assert_eq!(job["jobname"], "w");
    assert_eq!(job["error"], 0);
    let write = &job["write"];
    for key in ["io_bytes", "io_kbytes", "bw_bytes", "bw", "iops", "runtime", "total_ios"] {
        assert!(write[key].is_number(), "write.{key}");
    }
    for stat in ["slat_ns", "clat_ns", "lat_ns"] {
        for key in ["min", "max", "mean", "stddev", "N"] {
            assert!(write[stat][key].is_number(), "write.{stat}.{key}");
        }
    }
    let percentiles = write["clat_ns"]["percentile"].as_object().expect("percentiles");
    assert_eq!(percentiles.keys().cloned().collect::<Vec<_>>(), vec!["50.000000", "99.900000"]);
    assert_eq!(write["io_bytes"].as_u64(), Some(1077 << 20), "one zone's capacity, not its size");
    assert_eq!(write["total_ios"].as_u64(), Some((1077 << 20) / 8192));
    assert!(job["zonelab"]["group_flash"]["page_programs"]["host_write"].as_u64().expect("programs") > 0);
    assert!(job["zonelab"]["wall"]["simulated_commands_per_second"].as_f64().expect("rate") > 0.0);
    assert_eq!(job["read"]["total_ios"], 0);
}

#[test]
fn the_same_seed_gives_the_same_output() {
    let args = format!("{DEVICE} --name=fill --rw=write --bs=64k --size=2z --ioengine=spdk --name=reads --stonewall --rw=randread --bs=4k --size=2z --iodepth=16 --ioengine=spdk --runtime=20ms --time_based");
    let first = deterministic_json(&fio(&args).expect("runs"));
    assert_eq!(first, deterministic_json(&fio(&args).expect("runs")));
    let reseeded = deterministic_json(&fio(&format!("{args} --randseed=7")).expect("runs"));
    assert_ne!(first, reseeded, "randseed moves the random reads");
}

#[test]
fn zbd_writes_fill_zones_and_trim_resets_them() {
    let result = fio(&format!("{DEVICE} --name=fill --rw=write --bs=128k --size=2z --ioengine=spdk --name=trim --stonewall --rw=trim --size=2z --io_size=2z --name=again --stonewall --rw=write --bs=128k --size=1z --ioengine=spdk")).expect("runs");
    assert_eq!(result.jobs.len(), 3);
    assert_eq!(result.jobs[0].write.bytes, 2 * (1077 << 20));
    assert_eq!(result.jobs[1].trim.ios, 2, "one reset per zone");
    assert_eq!(result.jobs[1].zone_resets, 2);
    assert_eq!(result.jobs[2].write.bytes, 1077 << 20, "the reset zone takes a full capacity again");
    assert!(result.jobs.iter().all(|job| job.error == 0));
    // Two full zones reset: every block of both was erased once, and no block twice.
    let wear = &to_json(&result, false)["zonelab"]["wear"];
    let erases = wear["erases"].as_u64().expect("erase count");
    assert!(
        erases > 0 && erases == wear["inline"].as_u64().expect("inline") + wear["deferred"].as_u64().expect("deferred")
    );
    assert_eq!(wear["max_per_block"], 1, "{wear}");
    assert_eq!(wear["histogram"]["1"].as_u64(), Some(erases), "{wear}");
}

#[test]
fn a_sequential_writer_resets_a_full_zone_before_writing_it_again() {
    let result =
        fio(&format!("{DEVICE} --name=w --rw=write --bs=256k --size=1z --io_size=2z --ioengine=spdk")).expect("runs");
    // Real fio 3.33 on the same job through the engine: 4096 MiB written, 3 zone resets (the zone's capacity is
    // 1077 MiB, so the writer comes round to its full zone three times; the resets are not I/Os of the job).
    assert_eq!(result.jobs[0].error, 0);
    assert_eq!(result.jobs[0].zone_resets, 3, "each time the writer comes round to the full zone, it resets it");
    assert_eq!(result.jobs[0].write.bytes, 4 * (1 << 30), "io_size counts the bytes written, not resets");
}

#[test]
fn reads_stay_below_write_pointers() {
    let result = fio(&format!("{DEVICE} --name=fill --rw=write --bs=64k --size=1z --io_size=100m --ioengine=spdk --name=r --stonewall --rw=randread --size=4z --iodepth=8 --ioengine=spdk --io_size=20m")).expect("runs");
    assert_eq!(result.jobs[1].error, 0);
    assert_eq!(result.jobs[1].read.bytes, 20 << 20);
    let empty = fio(&format!("{DEVICE} --name=r --rw=randread --size=2z --ioengine=spdk")).expect("runs");
    assert_ne!(empty.jobs[0].error, 0, "nothing written, nothing to read");
}

/// SPDK's threads poll and never sleep: more of them than the zn540 host's 10 cores take turns, so 14 jobs at
/// QD 1 complete about as much as 10 would, and a read whose thread is off its core waits for the thread's next
/// turn. libaio's and io_uring's threads sleep while they wait and keep no core, unless io_uring is told to poll
/// (`sqthread_poll`: fio then spins on the completion ring).
#[test]
fn polling_jobs_beyond_the_hosts_cores_take_turns() {
    let run = |engine: &str, jobs: u32| {
        let args = format!("{DEVICE} --prefill=full --name=r --rw=randread --bs=4k --size=1z --offset_increment=1z --numjobs={jobs} --ioengine={engine} --runtime=100ms --ramp_time=10ms --time_based --group_reporting");
        to_json(&fio(&args).expect("runs"), false)["jobs"][0].clone()
    };
    let reads = |engine: &str, jobs: u32| {
        let job = run(engine, jobs);
        (job["read"]["iops"].as_f64().expect("iops"), job["read"]["clat_ns"]["max"].as_u64().expect("max clat"))
    };
    let (eight, eight_max) = reads("spdk", 8);
    let (fourteen, fourteen_max) = reads("spdk", 14);
    assert!(eight_max < 1_000_000, "eight threads, each on its own core, never wait for one: {eight_max} ns");
    assert!(fourteen_max >= 10_000_000, "a read waited for its thread's next turn (14.7 ms): {fourteen_max} ns");
    let ratio = fourteen / eight;
    assert!(ratio < 1.35, "14 polling jobs on 10 cores complete about what 10 do: {fourteen:.0} against {eight:.0}");
    let (_, sleeping_max) = reads("libaio", 14);
    assert!(sleeping_max < 1_000_000, "libaio's threads sleep, so 14 take no turns: {sleeping_max} ns");
    let (_, io_uring_max) = reads("io_uring --scheduler=none", 14);
    assert!(io_uring_max < 1_000_000, "io_uring's threads sleep in io_uring_enter: {io_uring_max} ns");
    let (_, spinning_max) = reads("io_uring --scheduler=none --sqthread_poll=1", 14);
    assert!(spinning_max >= 10_000_000, "with sqthread_poll fio spins, so 14 take turns: {spinning_max} ns");
}

/// fio's `usr_cpu`, `sys_cpu` and `ctx` come from the model's threads: a polling thread is busy whenever it is
/// on its core, a sleeping one only for its commands' CPU, in the kernel.
#[test]
fn cpu_figures_follow_the_threads() {
    // Long enough (34 turns of 14.7 ms) that a partly run cycle of turns moves the share by less than a point.
    let job = |engine: &str, jobs: u32| {
        let args = format!("{DEVICE} --prefill=full --name=r --rw=randread --bs=4k --size=1z --offset_increment=1z --numjobs={jobs} --ioengine={engine} --runtime=500ms --ramp_time=10ms --time_based --group_reporting");
        let json = to_json(&fio(&args).expect("runs"), false);
        let job = &json["jobs"][0];
        let figure = |key: &str| job[key].as_f64().expect("a number");
        (
            figure("usr_cpu"),
            figure("sys_cpu"),
            figure("ctx"),
            figure("job_runtime"),
            job["read"]["total_ios"].as_f64().expect("ios"),
        )
    };
    let (usr, sys, ctx, runtime_ms, _) = job("spdk", 8);
    assert!(
        (usr - 100.0).abs() < 0.01 && sys == 0.0 && ctx == 0.0,
        "8 polling threads, a core each: {usr} {sys} {ctx}"
    );
    assert!((runtime_ms - 4000.0).abs() <= 8.0, "job_runtime sums the threads' run times, as fio's: {runtime_ms} ms");
    let (usr, _, ctx, _, _) = job("spdk", 14);
    assert!((usr - 100.0 * 10.0 / 14.0).abs() < 1.5, "14 polling threads on 10 cores: {usr} % of their time");
    assert!(ctx > 0.0, "taking turns switches them");
    let (usr, sys, ctx, _, ios) = job("psync --scheduler=none", 1);
    assert_eq!(usr, 0.0, "fio's own user-space work is not modelled");
    // 1.65 + 1.65 us of kernel CPU per read (none adds no scheduler's), over a read's latency of about 75 us.
    let per_read_us = sys / 100.0 * 500_000.0 / ios;
    assert!((per_read_us - 3.3).abs() < 0.1, "psync's kernel CPU per read: {per_read_us} us");
    assert!((ctx - ios).abs() <= 1.0, "a psync thread sleeps once per read: {ctx} switches, {ios} reads");
}

#[test]
fn schedulers_decide_whether_deep_writes_in_a_zone_fail() {
    // Under `none` the device has several writes of the zone outstanding together and may run them in any
    // order: those that reach it in one call of four, and those submitted one a call (fio's default) while the
    // earlier ones are still in flight. mq-deadline's zone write lock lets one through at a time.
    for (batch, seed) in [(4, 3), (1, 1), (1, 2), (1, 3), (1, 4)] {
        let none = fio(&format!(
            "{DEVICE} --name=w --rw=write --bs=4k --size=1z --ioengine=libaio --iodepth=4 --iodepth_batch_submit={batch} --runtime=10ms --time_based --scheduler=none --seed={seed}"
        ))
        .expect("runs");
        assert_eq!(none.jobs[0].error, 5, "EIO at batch {batch}, seed {seed}");
        assert!(none.jobs[0].error_message.as_deref().expect("message").contains("Zone Invalid Write (0x1bc)"));
    }
    for batch in [1, 4] {
        let deadline = fio(&format!("{DEVICE} --name=w --rw=write --bs=4k --size=1z --ioengine=libaio --iodepth=4 --iodepth_batch_submit={batch} --runtime=10ms --time_based --scheduler=mq-deadline")).expect("runs");
        let job = &deadline.jobs[0];
        assert_eq!(job.error, 0);
        assert!(
            job.scheduler.merged_requests > 0 && job.scheduler.write_commands < job.write.ios,
            "{:?}",
            job.scheduler
        );
    }
}

/// `continue_on_error` goes past the failed writes of a job that names it for writes (counting them, as fio's
/// `total_err` and `first_error`), and not past them when it names only reads.
#[test]
fn continue_on_error_goes_past_the_errors_it_names() {
    let job = |coe: &str| {
        fio(&format!("{DEVICE} --name=w --rw=write --bs=4k --size=1z --ioengine=libaio --iodepth=4 --iodepth_batch_submit=4 --scheduler=none --runtime=5ms --time_based --continue_on_error={coe}"))
            .expect("runs")
    };
    let past = job("write");
    let json = to_json(&past, false);
    assert_eq!(json["jobs"][0]["error"], 0);
    assert!(json["jobs"][0]["total_err"].as_u64().expect("total_err") > 0);
    assert_eq!(json["jobs"][0]["first_error"], 5, "EIO");
    let stopped = job("read");
    assert_eq!((stopped.jobs[0].error, stopped.jobs[0].total_errors), (5, 0));
    assert!(to_json(&stopped, false)["jobs"][0].get("total_err").is_some(), "named, so reported");
    assert!(job("none").jobs[0].error == 5 && to_json(&job("none"), false)["jobs"][0].get("total_err").is_none());
}

/// startdelay, loops, number_ios and bssplit change the workload as in fio; options zonelab cannot honour are
/// refused by name; `--section` picks job-file sections.
#[test]
fn workload_shaping_options_do_what_fio_does() {
    let base = format!("{DEVICE} --name=w --rw=write --size=1z --io_size=1M --ioengine=spdk");
    let plain = fio(&base).expect("runs");
    let delayed = fio(&format!("{base} --startdelay=5ms")).expect("runs");
    assert!(
        delayed.groups[0].device_time_ns >= plain.groups[0].device_time_ns + 5_000_000,
        "the job starts 5 ms late: {} against {} ns",
        delayed.groups[0].device_time_ns,
        plain.groups[0].device_time_ns
    );
    assert_eq!(delayed.jobs[0].runtime_ns, plain.jobs[0].runtime_ns, "the delay is not in the job's runtime");
    assert_eq!(fio(&format!("{base} --loops=3")).expect("runs").jobs[0].write.bytes, 3 << 20);
    assert_eq!(fio(&format!("{base} --number_ios=10")).expect("runs").jobs[0].write.ios, 10);
    let split = fio(&format!("{base} --bssplit=4k/50:64k/50")).expect("runs");
    let (ios, bytes) = (split.jobs[0].write.ios, split.jobs[0].write.bytes);
    assert!(bytes > ios * 4096 && bytes < ios * 65536, "a mix of 4 KiB and 64 KiB: {bytes} bytes in {ios} I/Os");
    let error = fio(&format!("{base} --trim_percentage=10")).expect_err("refused");
    assert!(error.contains("zonelab cannot honour it"), "{error}");
    let job_file = "[global]\nfilename=preset:zn540,zones=16\nzonemode=zbd\nrw=write\nsize=1z\nio_size=1M\n[a]\n[b]\n";
    let args: Vec<String> = ["--section=b", "jobs.fio"].iter().map(|arg| arg.to_string()).collect();
    let invocation = parse_invocation(&args, |_| Ok(job_file.to_string())).expect("parses");
    assert_eq!(invocation.jobs.iter().map(|job| job.name.as_str()).collect::<Vec<_>>(), ["b"]);
}

/// fio 3.33's `zbd_set_max_open_zones`: a zbd job's open-zone bound defaults to the device's limit and may
/// not exceed it unless `ignore_zone_limits` is set, and then the device refuses the zone past its limit.
#[test]
fn max_open_zones_is_checked_against_the_device_as_fio_does() {
    // zn540 allows 14 open zones.
    let base = "--filename=preset:zn540,zones=64 --zonemode=zbd --name=w --rw=randwrite --size=64z --io_size=64M --ioengine=spdk";
    let error = fio(&format!("{base} --max_open_zones=20")).expect_err("above the device's limit");
    assert!(error.contains("Specified --max_open_zones (20) is larger than max (14)"), "{error}");
    let within = fio(&format!("{base} --max_open_zones=4")).expect("within the device's limit");
    assert_eq!(within.jobs[0].error, 0, "{:?}", within.jobs[0].error_message);
    let ignored = fio(&format!("{base} --max_open_zones=20 --ignore_zone_limits=1")).expect("the check is skipped");
    assert!(ignored.jobs[0].error != 0, "and the device itself refuses a 15th open zone");
    assert!(
        ignored.jobs[0].error_message.as_deref().unwrap_or("").contains("Too Many"),
        "{:?}",
        ignored.jobs[0].error_message
    );
}

/// fio 3.33's zone_reset_frequency: past the threshold, the write that brings a device-wide countdown from
/// 1/frequency to zero resets its zone first.
#[test]
fn zone_reset_frequency_resets_every_nth_write_past_the_threshold() {
    let run = |extra: &str| {
        let result =
            fio(&format!("{DEVICE} --name=w --rw=write --bs=4k --size=2z --io_size=64k --ioengine=spdk {extra}"))
                .expect("runs");
        (result.jobs[0].write.ios, result.jobs[0].zone_resets)
    };
    assert_eq!(run("--zone_reset_frequency=0.25"), (16, 4), "every fourth write, from the first");
    assert_eq!(
        run("--zone_reset_threshold=0.5 --zone_reset_frequency=0.25"),
        (16, 0),
        "2 zones are far from half full"
    );
    assert_eq!(run("--zone_reset_threshold=0.5"), (16, 0), "no frequency, no threshold resets (fio's default)");
}

/// The status line's progress reports come from running the simulation in slices, which changes nothing:
/// the output is the one `run` gives, and the share done only grows.
#[test]
fn progress_reports_do_not_change_the_run() {
    let text = format!("{DEVICE} --name=r --rw=randread --bs=4k --size=2z --ioengine=libaio --iodepth=8 --prefill=full --runtime=30ms --time_based --name=w --rw=write --bs=64k --size=2z --offset=4z --ioengine=spdk --runtime=30ms --time_based");
    let args: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    let invocation = parse_invocation(&args, |_| Err("no files".into())).expect("parses");
    let plain = deterministic_json(&zonelab_fio::run(&invocation, 1).expect("runs"));
    let mut reports: Vec<zonelab_fio::Progress> = Vec::new();
    let mut keep = |progress: &zonelab_fio::Progress| reports.push(progress.clone());
    let reported =
        zonelab_fio::run_reporting(&invocation, 1, Some((std::time::Duration::ZERO, &mut keep)), None).expect("runs");
    assert_eq!(deterministic_json(&reported), plain, "slicing the run changes nothing");
    assert!(reports.len() >= 20, "a report per millisecond of device time: {}", reports.len());
    assert!(reports.windows(2).all(|pair| pair[1].done >= pair[0].done), "the share done only grows");
    let line = zonelab_fio::status_line(&reports[5]);
    assert!(line.starts_with("Jobs: 2 (f=2): [r(1),W(1)]["), "{line}");
    assert!(line.contains("IOPS][eta "), "{line}");
}

/// `--status-interval`: the results so far every interval of device time, growing, while the jobs run; the
/// final results are the ones a run without dumps gives.
#[test]
fn status_interval_dumps_the_results_so_far() {
    let text = format!("{DEVICE} --name=w --rw=write --bs=64k --size=2z --ioengine=spdk --runtime=35ms --time_based --status-interval=10ms");
    let args: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    let invocation = parse_invocation(&args, |_| Err("no files".into())).expect("parses");
    assert_eq!(invocation.status_interval_ns, Some(10_000_000));
    let plain = deterministic_json(&zonelab_fio::run(&invocation, 1).expect("runs"));
    let mut dumps: Vec<(u64, u64)> = Vec::new();
    let mut keep = |snapshot: &FioResult| dumps.push((snapshot.groups[0].device_time_ns, snapshot.jobs[0].write.bytes));
    let dumped = zonelab_fio::run_reporting(&invocation, 1, None, Some(&mut keep)).expect("runs");
    assert_eq!(deterministic_json(&dumped), plain, "dumps change nothing");
    // Each dump stands at the last event before its instant: 10, 20 and 30 ms.
    let instants: Vec<u64> = dumps.iter().map(|&(ns, _)| ns.div_ceil(1_000_000)).collect();
    assert_eq!(instants, [10, 20, 30], "{dumps:?}");
    assert!(dumps.windows(2).all(|pair| pair[1].1 > pair[0].1), "the bytes written grow: {dumps:?}");
    assert!(dumps[2].1 < dumped.jobs[0].write.bytes, "the last dump comes before the end");
}

/// A skewed `random_distribution` moves reads onto a few hot blocks, which the device serves differently from
/// uniform ones; an unknown distribution is refused by name.
#[test]
fn random_distribution_skews_the_reads() {
    let run = |distribution: &str| {
        fio(&format!("{DEVICE} --name=r --rw=randread --bs=4k --size=4z --io_size=16M --ioengine=spdk --iodepth=16 --prefill=full --random_distribution={distribution}"))
    };
    let uniform = run("random").expect("runs");
    let zipf = run("zipf:1.2").expect("runs");
    assert_eq!((zipf.jobs[0].error, zipf.jobs[0].read.bytes), (0, 16 << 20));
    assert_ne!(zipf.jobs[0].read.clat.mean(), uniform.jobs[0].read.clat.mean(), "other blocks, other latencies");
    assert_eq!(deterministic_json(&run("zipf:1.2").expect("runs")), deterministic_json(&zipf), "and deterministic");
    assert!(run("zoned:50/5:50/95").expect_err("refused").contains("random_distribution"));
}

/// Linux sets mq-deadline on a zoned block device, so the usual libaio job writing a zone at QD 8 works without
/// naming a scheduler; SPDK and io_uring passthrough bypass the block layer's scheduler.
#[test]
fn the_default_scheduler_is_the_one_linux_gives_a_zoned_device() {
    let job = |engine: &str| {
        fio(&format!("{DEVICE} --name=w --rw=write --bs=4k --size=1z --io_size=1M --ioengine={engine} --iodepth=8"))
            .expect("runs")
    };
    let libaio = job("libaio");
    assert_eq!((libaio.jobs[0].error, libaio.jobs[0].options.scheduler.name()), (0, "mq-deadline"));
    assert!(
        libaio
            .notes
            .iter()
            .any(|note| note.contains("scheduler mq-deadline: ioengine libaio goes through the block layer")),
        "{:?}",
        libaio.notes
    );
    for engine in ["spdk", "io_uring_cmd"] {
        assert_eq!(job(engine).jobs[0].options.scheduler.name(), "none", "{engine}");
    }
}

/// fio locks a zone from choosing an offset in it until the I/O completes (`zbd.c`, `zone_lock`), so two
/// synchronous jobs writing one zone take turns at its write pointer and never collide, even without a
/// scheduler.
#[test]
fn jobs_sharing_a_zone_take_turns_as_fios_zone_locks_make_them() {
    let writers = fio(&format!(
        "{DEVICE} --name=w --rw=write --bs=4k --size=1z --io_size=4M --numjobs=2 --ioengine=psync --scheduler=none"
    ))
    .expect("runs");
    for job in &writers.jobs {
        assert_eq!((job.error, job.write.bytes), (0, 4 << 20), "{:?}", job.error_message);
    }
    assert_eq!(writers.groups[0].device.bytes_written, 8 << 20, "both jobs wrote the one zone, one after another");
    let mixed = fio(&format!(
        "{DEVICE} --name=w --rw=write --bs=4k --size=1z --io_size=2M --ioengine=psync --name=r --rw=randread --bs=4k --size=1z --io_size=2M --ioengine=psync --prefill=64k"
    ))
    .expect("runs");
    // The reader waits for the writer's lock, then reads below the write pointer it finds.
    assert!(mixed.jobs.iter().all(|job| job.error == 0), "{:?}", mixed.jobs[1].error_message);
    assert_eq!(mixed.jobs[1].read.bytes, 2 << 20);
}

#[test]
fn time_ramp_and_rate_are_honoured() {
    let result = fio(&format!("{DEVICE} --name=r --rw=write --bs=4k --size=4z --ioengine=spdk --rate_iops=1000 --runtime=2 --ramp_time=1 --time_based")).expect("runs");
    let ios = result.jobs[0].write.ios;
    assert!((1990..=2010).contains(&ios), "1000 IOPS for the 2 s after a 1 s ramp: {ios}");
    let runtime_ms = result.jobs[0].runtime_ns / 1_000_000;
    assert!((1990..=2001).contains(&runtime_ms), "{runtime_ms}");
}

#[test]
fn appends_need_a_path_that_carries_them() {
    let ok = fio(&format!("{DEVICE} --name=a --rw=write --bs=8k --size=1z --io_size=8m --zone_append=1 --ioengine=io_uring_cmd --iodepth=8")).expect("runs");
    assert_eq!((ok.jobs[0].error, ok.jobs[0].write.bytes), (0, 8 << 20), "appends at QD 8 in one zone never fail");
    let refused = fio(&format!("{DEVICE} --name=a --rw=write --bs=8k --size=1z --zone_append=1 --ioengine=libaio"))
        .expect_err("libaio has no append");
    assert!(refused.contains("zone_append=1 needs an ioengine"), "{refused}");
}

#[test]
fn engine_errors_name_the_problem() {
    let error = |args: &str| fio(args).expect_err(args);
    assert!(error("--name=a --rw=write").contains("no filename"));
    assert!(error("--name=a --filename=preset:nope --rw=write").contains("unknown preset"));
    assert!(error(&format!("--name=a {} --rw=trim --zonemode=none", "--filename=preset:zn540,zones=4"))
        .contains("rw=trim needs zonemode=zbd"));
    assert!(error(&format!("{DEVICE} --name=a --rw=write --bs=1000")).contains("not a multiple"));
    assert!(error(&format!("{DEVICE} --name=a --rw=write --offset=100z")).contains("empty"));
    assert!(error(&format!("{DEVICE} --name=a --name=b --filename=preset:instant")).contains("one device"));
}

/// Jobs whose filenames differ in the namespace alone run on one device, each namespace a block device of its
/// own as Linux makes it: the conventional namespace's job under none, the zoned one's under mq-deadline, both
/// on the same dies and clock. A namespace the device lacks, another device, or a host FTL under jobs of two
/// namespaces are refused by name.
#[test]
fn jobs_on_two_namespaces_share_one_device() {
    let result =
        fio("--ioengine=libaio --time_based --runtime=20ms --name=cnv --filename=preset:zn540,ns=1 --rw=randwrite \
         --bs=4k --iodepth=4 --size=256m --name=zns --filename=preset:zn540 --zonemode=zbd --rw=write --bs=128k \
         --size=1z")
        .expect("runs");
    let (cnv, zns) = (&result.jobs[0], &result.jobs[1]);
    assert_eq!((cnv.error, zns.error), (0, 0));
    assert_eq!(cnv.options.scheduler.name(), "none", "a namespace that is not zoned gets none");
    assert_eq!(zns.options.scheduler.name(), "mq-deadline", "a zoned one gets mq-deadline under libaio");
    assert!(cnv.write.ios > 1000 && zns.write.ios > 100, "both ran: {} and {}", cnv.write.ios, zns.write.ios);
    let device = &result.groups[0].device;
    assert_eq!(device.writes, cnv.write.ios + zns.write.ios, "both namespaces' writes reached the one device");
    assert!(result.notes.iter().any(|note| note.starts_with("namespace 1: scheduler none")), "{:?}", result.notes);
    let error = |args: &str| fio(args).expect_err(args);
    let missing = error("--name=a --filename=preset:zn540,ns=7 --rw=write --name=b --filename=preset:zn540,ns=1");
    assert!(missing.contains("no namespace 7") && missing.contains("1, 2"), "{missing}");
    let later = error("--name=a --filename=preset:zn540 --rw=read --name=b --filename=preset:zn540,ns=9 --rw=read");
    assert!(later.contains("job b") && later.contains("no namespace 9 (its namespaces: 1, 2)"), "{later}");
    let other = error("--name=a --filename=preset:zn540 --rw=read --name=b --filename=preset:zn540,zones=8");
    assert!(other.contains("may differ in the namespace (ns=) alone"), "{other}");
    let ftl = error(
        "--hostftl=0.28 --name=a --filename=preset:zn540,zones=20 --rw=randwrite --name=b \
         --filename=preset:zn540,zones=20,ns=1 --rw=randwrite",
    );
    assert!(ftl.contains("hostftl with jobs on several namespaces"), "{ftl}");
}

/// Linux keeps mq-deadline's zone write locks for zoned devices only: on a conventional namespace four writers
/// of one region all progress, none waiting behind the others' lower LBAs for the whole run.
#[test]
fn mq_deadline_locks_no_zones_on_a_conventional_namespace() {
    let result =
        fio("--filename=preset:zn540,ns=1 --scheduler=mq-deadline --time_based --runtime=50ms --name=w --rw=write \
         --bs=8k --size=64m --offset_increment=64m --numjobs=4 --ioengine=psync")
        .expect("runs");
    let completed: Vec<u64> = result.jobs.iter().map(|job| job.write.ios).collect();
    assert!(completed.iter().all(|&ios| ios > 1000), "every writer progressed: {completed:?}");
    assert!(result.jobs.iter().all(|job| job.write.clat.max() < 1_000_000), "no write waited a millisecond");
}

/// Zones small enough that verified writes (whose data the device keeps) stay quick.
const SMALL: &str = "--filename=preset:zn540,zones=8,zone-size=4MiB,zone-cap=4MiB --zonemode=zbd --direct=1";

#[test]
fn verify_reads_back_every_write_and_counts_the_reads() {
    for method in ["crc32c", "md5", "crc32", "meta"] {
        let result = fio(&format!(
            "{SMALL} --name=w --rw=write --bs=64k --size=2z --verify={method} --ioengine=libaio --iodepth=8"
        ))
        .expect("runs");
        let job = &result.jobs[0];
        assert_eq!(job.error, 0, "{method}: {:?}", job.error_message);
        // fio's verify phase reads every block written, and reports the reads as reads.
        assert_eq!((job.write.bytes, job.read.bytes), (8 << 20, 8 << 20), "{method}");
    }
    // Random writes in zbd mode verify too, with at most max_open_zones zones written at once.
    let random =
        fio(&format!("{SMALL} --name=w --rw=randwrite --bs=16k --size=4z --verify=crc32c --max_open_zones=2 --ioengine=libaio --iodepth=4"))
            .expect("runs");
    assert_eq!((random.jobs[0].error, random.jobs[0].read.bytes), (0, 16 << 20), "{:?}", random.jobs[0].error_message);
}

#[test]
fn verify_backlog_checks_writes_while_the_job_writes() {
    let run = |extra: &str| {
        fio(&format!("{SMALL} --name=w --rw=write --bs=64k --size=1z --verify=crc32c --write_lat_log {extra}"))
            .expect("runs")
    };
    let last_write_and_first_read = |result: &FioResult| {
        let entries = &result.io_logs[0].entries;
        let last_write = entries.iter().rposition(|entry| entry.direction == 1).expect("writes");
        let first_read = entries.iter().position(|entry| entry.direction == 0).expect("reads");
        (last_write, first_read)
    };
    let (last_write, first_read) = last_write_and_first_read(&run(""));
    assert!(first_read > last_write, "without a backlog every check comes after the last write");
    let backlog = run("--verify_backlog=8");
    let (last_write, first_read) = last_write_and_first_read(&backlog);
    assert!(first_read < last_write, "with a backlog of 8, checks start among the writes");
    assert_eq!(first_read, 8, "after the 8th write");
    assert_eq!(backlog.jobs[0].read.bytes, 4 << 20, "each block is checked once");
    // do_verify=0 with no backlog: nothing is read back.
    assert_eq!(run("--do_verify=0").jobs[0].read.bytes, 0);
}

#[test]
fn a_block_that_reads_back_wrong_fails_the_job_with_fios_message() {
    // A reader with the writer's seed checks what the writer left; a zone rewritten since then fails.
    let writer = "--name=w --rw=write --bs=16k --size=2z --verify=crc32c --do_verify=0";
    let rewrite = "--name=t --stonewall --rw=trim --bs=4M --size=1z --name=z --stonewall --rw=write --bs=16k --size=1z --io_size=64k";
    let reader = "--name=r --stonewall --rw=read --bs=16k --size=2z --verify=crc32c";
    let clean = fio(&format!("{SMALL} {writer} {reader}")).expect("runs");
    assert!(clean.jobs.iter().all(|job| job.error == 0), "{:?}", clean.jobs[1].error_message);
    assert_eq!(clean.jobs[1].read.bytes, 8 << 20);
    let damaged = fio(&format!("{SMALL} {writer} {rewrite} {reader}")).expect("runs");
    let read = damaged.jobs.last().expect("reader");
    assert_eq!(read.error, 84, "EILSEQ, as fio");
    assert_eq!(
        read.error_message.as_deref(),
        Some(
            "verify: bad magic header 0, wanted acca at file preset:zn540,zones=8,zone-size=4MiB,zone-cap=4MiB \
             offset 0, length 16384 (requested block: offset=0, length=16384)"
        )
    );
    // Another seed: the header's random seed is not the reader's.
    let other_seed = fio(&format!("{SMALL} {writer} {reader} --randseed=99")).expect("runs");
    let message = other_seed.jobs[1].error_message.clone().unwrap_or_default();
    assert!(message.starts_with("verify: bad header rand_seed"), "{message}");
    // continue_on_error=verify goes on and counts every bad block.
    let counted = fio(&format!("{SMALL} {writer} {rewrite} {reader} --continue_on_error=verify")).expect("runs");
    let read = counted.jobs.last().expect("reader");
    assert_eq!((read.error, read.first_error, read.read.bytes), (0, 84, 8 << 20));
    // In zbd mode the reader reads below write pointers only: zone 0's 64 KiB rewritten without a header (4
    // blocks) and zone 1; its 8 MiB wrap over them, reading the 4 bad blocks twice.
    assert_eq!(read.total_errors, 8, "each read of a rewritten block");
}

#[test]
fn patterns_fill_the_data_and_verify_pattern_checks_it() {
    let result = fio(&format!(
        "{SMALL} --name=w --rw=write --bs=4k --size=1z --verify_pattern=0xdeadbeef --name=r --stonewall --rw=read --bs=4k --size=1z --verify=pattern --verify_pattern=0xdeadbeef"
    ))
    .expect("runs");
    assert!(result.jobs.iter().all(|job| job.error == 0), "{:?}", result.jobs[1].error_message);
    let wrong = fio(&format!(
        "{SMALL} --name=w --rw=write --bs=4k --size=1z --buffer_pattern=0xdeadbeef --name=r --stonewall --rw=read --bs=4k --size=1z --verify_pattern=0xfeedface"
    ))
    .expect("runs");
    assert_eq!(wrong.jobs[1].error, 84, "buffer_pattern wrote deadbeef, the reader wants feedface");
    let matching = fio(&format!(
        "{SMALL} --name=w --rw=write --bs=4k --size=1z --buffer_pattern=\"zone\" --name=r --stonewall --rw=read --bs=4k --size=1z --verify_pattern=\"zone\""
    ))
    .expect("runs");
    assert_eq!(matching.jobs[1].error, 0, "{:?}", matching.jobs[1].error_message);
}

#[test]
fn verify_refuses_what_fio_refuses() {
    let error =
        |extra: &str| fio(&format!("{SMALL} --name=w --rw=write --size=1z --verify=crc32c {extra}")).expect_err(extra);
    assert!(error("--bs=12k").contains("block size 12288 is not a divisor of the zone size 4194304"));
    assert!(error("--bs=4k --verify_interval=8k").contains("not a multiple of verify_interval 8192"));
    assert!(error("--bs=4k --zone_reset_frequency=0.1").contains("zone_reset_frequency"));
    assert!(error("--bs=4k --zone_append=1 --ioengine=spdk").contains("zone_append"));
    assert!(error("--bs=4k --verify=sha256").contains("\"sha256\" is not one zonelab implements"));
}

#[test]
fn a_written_iolog_replays_the_same_io() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("trace.log");
    let trace = trace.to_str().expect("utf-8");
    let written = fio(&format!(
        "{SMALL} --name=w --rw=randwrite --bs=16k --size=2z --io_size=512k --ioengine=libaio --iodepth=4 --write_iolog={trace}"
    ))
    .expect("runs");
    zonelab_fio::write_logs(&written.io_logs, std::path::Path::new("/")).expect("writes the trace");
    let text = std::fs::read_to_string(trace).expect("trace");
    assert!(text.starts_with("fio version 3 iolog\n0 preset:zn540"), "{text}");
    assert_eq!(text.lines().filter(|line| line.contains(" write ")).count(), 32, "one line per write");
    let replayed = fio(&format!(
        "--filename=preset:zn540,zones=8,zone-size=4MiB,zone-cap=4MiB --name=r --read_iolog={trace} --ioengine=libaio --iodepth=4"
    ))
    .expect("runs");
    let (before, after) = (&written.jobs[0], &replayed.jobs[0]);
    assert_eq!(after.error, 0, "{:?}", after.error_message);
    assert_eq!((after.write.ios, after.write.bytes), (before.write.ios, before.write.bytes));
    assert_eq!(replayed.groups[0].device.bytes_written, written.groups[0].device.bytes_written);
    let iops = |job: &zonelab_fio::JobResult| job.write.ios as f64 * 1e9 / job.runtime_ns as f64;
    let ratio = iops(after) / iops(before);
    assert!((0.95..1.05).contains(&ratio), "the replay runs at the rate of the run it traced: {ratio:.3}");
}

#[test]
fn a_version_2_trace_replays_reads_writes_resets_and_flushes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("v2.log");
    let trace = "fio version 2 iolog\nx add\nx open\nx write 0 4096\nx sync 0 0\nx wait 2000 0\nx trim 0 4194304\nx write 0 8192\nx read 0 8192\nx close\n";
    std::fs::write(&path, trace).expect("writes");
    let path = path.to_str().expect("utf-8");
    let result =
        fio(&format!("--filename=preset:zn540,zones=8,zone-size=4MiB,zone-cap=4MiB --name=r --read_iolog={path}"))
            .expect("runs");
    let job = &result.jobs[0];
    assert_eq!(job.error, 0, "{:?}", job.error_message);
    assert_eq!((job.write.bytes, job.read.bytes, job.trim.ios, job.sync.ios), (12288, 8192, 1, 1));
    assert!(result.groups[0].device_time_ns >= 2_000_000, "the 2 ms wait is replayed");
    let json = to_json(&result, false);
    assert_eq!(json["jobs"][0]["sync"]["total_ios"], 1);
    let stalled = fio(&format!(
        "--filename=preset:zn540,zones=8,zone-size=4MiB,zone-cap=4MiB --name=r --read_iolog={path} --replay_no_stall"
    ))
    .expect("runs");
    assert!(stalled.groups[0].device_time_ns < result.groups[0].device_time_ns - 1_000_000, "no wait");
    // Replayed as written: a write off the write pointer fails as it would on the drive.
    std::fs::write(path, "fio version 2 iolog\nx write 8192 4096\n").expect("writes");
    let off =
        fio(&format!("--filename=preset:zn540,zones=8,zone-size=4MiB,zone-cap=4MiB --name=r --read_iolog={path}"))
            .expect("runs");
    assert_eq!(off.jobs[0].error, 5, "Zone Invalid Write is EIO");
    std::fs::write(path, "fio version 2 iolog\nx write 100 4096\n").expect("writes");
    let error =
        fio(&format!("--filename=preset:zn540,zones=8,zone-size=4MiB,zone-cap=4MiB --name=r --read_iolog={path}"))
            .expect_err("misaligned");
    assert!(error.contains(":2: write at offset 100 of 4096 bytes is not whole 4096-byte blocks"), "{error}");
}

/// The offsets a run wrote or read, in order, from its `write_iolog` trace.
fn traced_offsets(args: &str) -> (FioResult, Vec<u64>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("t.log");
    let result = fio(&format!("{args} --write_iolog={}", trace.display())).expect("runs");
    zonelab_fio::write_logs(&result.io_logs, std::path::Path::new("/")).expect("writes the trace");
    let text = std::fs::read_to_string(&trace).expect("trace");
    let offsets = text
        .lines()
        .filter(|line| line.contains(" read ") || line.contains(" write "))
        .map(|line| line.split_whitespace().nth(3).expect("offset").parse().expect("number"))
        .collect();
    (result, offsets)
}

/// zoneskip in zbd mode (fio 3.33's `setup_zbd_zone_mode`), strided mode's windows, filesize and zonesize as
/// fio checks them.
#[test]
fn zone_skips_strides_and_file_sizes_move_io_as_fio_does() {
    const ZONE: u64 = 4 << 20;
    let zones_in_order = |offsets: &[u64]| {
        let mut zones: Vec<u64> = offsets.iter().map(|offset| offset / ZONE).collect();
        zones.dedup();
        zones
    };
    let (_, writes) =
        traced_offsets(&format!("{SMALL} --name=w --rw=write --bs=128k --size=6z --io_size=3z --zoneskip=1z"));
    assert_eq!(writes.len(), 96);
    assert_eq!(zones_in_order(&writes), [0, 2, 4], "each zone written, then one skipped");
    let (read, reads) = traced_offsets(&format!(
        "{SMALL} --name=w --rw=write --bs=128k --size=6z --io_size=3z --zoneskip=1z --name=r --stonewall --rw=read --bs=128k --size=6z --io_size=3z --zoneskip=4M"
    ));
    assert_eq!(read.jobs[1].error, 0, "{:?}", read.jobs[1].error_message);
    assert_eq!((reads.len(), zones_in_order(&reads)), (96, vec![0, 2, 4]), "the reader skips the same zones");
    let (_, strided) = traced_offsets(&format!(
        "{SMALL} --name=r --zonemode=strided --rw=read --bs=16k --size=8M --io_size=192k --zonerange=1M --zonesize=64k --zoneskip=1M --prefill=full"
    ));
    let k = 1024;
    assert_eq!(
        strided,
        [0, 16 * k, 32 * k, 48 * k, 2048 * k, 2064 * k, 2080 * k, 2096 * k, 4096 * k, 4112 * k, 4128 * k, 4144 * k],
        "64 KiB from each 1 MiB window, then 1 MiB skipped"
    );
    let sized = fio(&format!("{SMALL} --name=r --rw=read --bs=64k --filesize=2M --prefill=full --zonemode=none"))
        .expect("runs");
    assert_eq!(sized.jobs[0].read.bytes, 2 << 20, "filesize ends the range");
    let error = |extra: &str| fio(&format!("{SMALL} --name=w --rw=write --size=2z {extra}")).expect_err(extra);
    assert!(error("--zonesize=8M").ends_with("zonesize 8388608 does not match the device zone size 4194304."));
    assert!(error("--zoneskip=1M").ends_with("zoneskip 1048576 is not a multiple of the device zone size 4194304."));
    assert!(error("--zonemode=strided").contains("strided needs a zonesize"));
}

/// fio's timestamps: a synchronous engine samples no submission latency (its clat is the whole system call),
/// an asynchronous one samples its submission's CPU as slat, and a job bound by its core keeps every one of its
/// iodepth I/Os in flight from its preparation to its reap: fio's thread reaps one completion when its queue is
/// full and prepares one I/O in its place, so the completions it has not reaped yet wait in clat.
#[test]
fn latencies_split_as_fios_timestamps_do() {
    let read = |engine: &str, depth: u32| {
        let result = fio(&format!(
            "--filename=preset:zn540,zones=4 --prefill=full --name=r --rw=read --bs=4k --size=1z --io_size=64m \
             --ioengine={engine} --iodepth={depth} --scheduler=none"
        ))
        .expect("runs");
        to_json(&result, false)["jobs"][0]["read"].clone()
    };
    let psync = read("psync", 1);
    assert_eq!(psync["slat_ns"]["N"], 0, "psync samples no slat");
    assert_eq!(psync["clat_ns"]["mean"], psync["lat_ns"]["mean"], "psync's clat is its whole latency");

    let libaio = read("libaio", 1);
    assert_eq!(libaio["slat_ns"]["N"], libaio["clat_ns"]["N"]);
    let slat_ns = libaio["slat_ns"]["mean"].as_f64().expect("slat");
    assert!((1000.0..3000.0).contains(&slat_ns), "slat is the kernel path's submission CPU: {slat_ns} ns");
    let lat = |stats: &Value| stats["lat_ns"]["mean"].as_f64().expect("lat");
    assert!((lat(&libaio) - lat(&psync)).abs() < 100.0, "at QD 1 both pay the same path: {libaio} {psync}");

    // At QD 14 one libaio job is bound by its core (3.3 us a command), and Little's law over iodepth holds:
    // 14 x 3.3 = 46 us from preparation to reap.
    let deep = read("libaio", 14);
    let iops = deep["iops"].as_f64().expect("iops");
    assert!(iops > 290_000.0, "bound by its core: {iops} IOPS");
    let iodepth_latency_ns = 14.0 / iops * 1e9;
    let ratio = lat(&deep) / iodepth_latency_ns;
    assert!((0.97..1.01).contains(&ratio), "lat {} ns against {iodepth_latency_ns} ns", lat(&deep));
}

/// A host path's latency and its CPU time differ: one deep job is bound by the CPU per command on its core, not
/// by the latency, while an I/O at QD 1 waits through all of the latency.
#[test]
fn a_deep_job_is_bound_by_its_paths_cpu_and_a_lone_io_pays_its_whole_latency() {
    let device = "--filename=preset:instant,zones=4,host.io-uring.submit-us=4,host.io-uring.complete-us=4,host.io-uring.submit-cpu-us=1,host.io-uring.complete-cpu-us=1";
    let job = |depth: u32| {
        let result = fio(&format!(
            "{device} --name=r --rw=randread --bs=4k --size=1z --ioengine=io_uring --scheduler=none --iodepth={depth} --number_ios=20000"
        ))
        .expect("runs");
        let read = &to_json(&result, false)["jobs"][0]["read"];
        (read["iops"].as_f64().expect("iops"), read["lat_ns"]["mean"].as_f64().expect("latency"))
    };
    let (deep_iops, _) = job(64);
    assert!((480_000.0..=505_000.0).contains(&deep_iops), "2 us of CPU a command: {deep_iops} IOPS");
    let (lone_iops, lone_latency) = job(1);
    assert!(lone_latency >= 8_000.0, "4 + 4 us of path latency: {lone_latency} ns");
    assert!(lone_iops < 125_001.0, "{lone_iops} IOPS at QD 1");
}

/// Where Linux defers a command's dispatch to a kblockd worker, the command leaves that much later: reads and
/// writes a scheduler takes without a plug (fio's one iocb per io_submit, psync's reads), and psync's writes
/// under any scheduler (their plug is flushed when the task sleeps); none issues the others directly. io_uring's
/// measured path latency already holds its dispatch.
#[test]
fn deferred_dispatches_wait_for_the_kblockd_worker() {
    let clat_us = |wait_us: f64, engine: &str, rw: &str, scheduler: &str| {
        let result = fio(&format!(
            "--filename=preset:instant,zones=4,host.kblockd-dispatch-us={wait_us}{prefill} --zonemode=zbd \
             --name=j --rw={rw} --bs=4k --size=1z --io_size=4m --ioengine={engine} --iodepth=1 --scheduler={scheduler}",
            prefill = if rw.contains("read") { " --prefill=full" } else { "" },
        ))
        .expect("runs");
        let direction = if rw.contains("read") { "read" } else { "write" };
        to_json(&result, false)["jobs"][0][direction]["clat_ns"]["mean"].as_f64().expect("clat") / 1000.0
    };
    for (engine, rw, scheduler, deferred) in [
        ("libaio", "randread", "mq-deadline", true),
        ("libaio", "randread", "none", false),
        ("psync", "randread", "mq-deadline", true),
        ("psync", "randread", "none", false),
        ("libaio", "write", "mq-deadline", true),
        ("psync", "write", "none", true),
        ("io_uring", "randread", "mq-deadline", false),
        ("spdk", "randread", "none", false),
    ] {
        let added = clat_us(10.0, engine, rw, scheduler) - clat_us(0.0, engine, rw, scheduler);
        let expected = if deferred { 10.0 } else { 0.0 };
        assert!((added - expected).abs() < 0.01, "{engine} {rw} under {scheduler}: +{added} us, not +{expected}");
    }
}

/// Sequential reads that one submission call hands the drive together arrive at one instant, and the device runs
/// those in any order; a read that runs after later reads of its stream must not restart the drive's read-ahead,
/// or the reads after it miss too and wait for flash. (fio's thread here reaps four completions at a time and
/// submits four reads in one call, which Linux plugs, so all four reach the device at once.)
#[test]
fn sequential_reads_dispatched_together_keep_the_read_ahead() {
    let result =
        fio("--filename=preset:zn540,zones=4,host.mq-deadline-us=0.2 --prefill=full --zonemode=zbd --direct=1 \
         --name=j --rw=read --bs=4k --size=1z --time_based --runtime=200ms --ramp_time=20ms --ioengine=libaio \
         --iodepth=14 --iodepth_batch_submit=4 --iodepth_batch_complete_min=4 --scheduler=mq-deadline \
         --percentile_list=50:99.9")
        .expect("runs");
    let read = &to_json(&result, false)["jobs"][0]["read"];
    let iops = read["iops"].as_f64().expect("iops");
    let tail = read["clat_ns"]["percentile"]["99.900000"].as_f64().expect("percentile") / 1000.0;
    // The job's core allows 1 / 3.5 us = 286 K reads a second; restarted streams leave a quarter of that, and a
    // tail of reads that waited for flash behind each other.
    assert!(iops > 250_000.0 && tail < 300.0, "{iops:.0} IOPS, p99.9 {tail:.1} us: reads waited for flash");
}

/// `iodepth_batch_complete_max` left unset reaps at most `iodepth_batch_complete_min` a round, as fio's
/// `fixup_options` makes it, not the whole queue depth: a job whose completions pile up while its core is busy
/// (sequential reads the read-ahead serves, at QD 16) reaps the same rounds as with the max set to the min, and
/// other rounds than with the max at the depth.
#[test]
fn the_most_completions_a_round_reaps_defaults_to_the_least() {
    let clat = |extra: &str| {
        let result = fio(&format!(
            "--filename=preset:zn540,zones=4 --prefill=full --zonemode=zbd --direct=1 --name=j --rw=read --bs=4k \
             --size=1z --io_size=64m --ioengine=libaio --iodepth=16 --scheduler=none --iodepth_batch_complete_min=4 \
             {extra}"
        ))
        .expect("runs");
        to_json(&result, false)["jobs"][0]["read"]["clat_ns"].clone()
    };
    let unset = clat("");
    assert_eq!(unset, clat("--iodepth_batch_complete_max=4"), "the max defaults to the min");
    assert_ne!(unset, clat("--iodepth_batch_complete_max=16"), "rounds of up to 16 differ");
}

/// `iodepth_batch_submit` and `iodepth_batch_complete_min`: with both at the queue depth fio's thread submits a
/// full queue in one call and reaps only whole rounds. Linux plugs a call of more than two iocbs and flushes the
/// plug from the submitting thread, so mq-deadline's kblockd wait vanishes from such calls and stays in calls
/// of two; and a round waits for its slowest command, which costs throughput against reaping each completion.
#[test]
fn batched_submissions_are_plugged_and_reaped_in_rounds() {
    let read = |args: &str| {
        let result = fio(&format!(
            "--filename=preset:zn540,zones=4,host.kblockd-dispatch-us=10 --prefill=full --zonemode=zbd --direct=1 \
             --name=j --rw=randread --bs=4k --size=1z --io_size=8m --ioengine=libaio {args}"
        ))
        .expect("runs");
        to_json(&result, false)["jobs"][0]["read"].clone()
    };
    let clat_us = |json: &Value| json["clat_ns"]["mean"].as_f64().expect("clat") / 1000.0;
    for (batch, plugged) in [(8, true), (2, false)] {
        let batched = format!("--iodepth={batch} --iodepth_batch_submit={batch} --iodepth_batch_complete_min={batch}");
        let added = clat_us(&read(&format!("{batched} --scheduler=mq-deadline")))
            - clat_us(&read(&format!("{batched} --scheduler=none")));
        // mq-deadline's 0.2 us of CPU per command shifts the round's reaps a little; the wait is 10 us.
        let waited = added > 5.0;
        assert_eq!(waited, !plugged, "calls of {batch} iocbs under mq-deadline: +{added} us against none");
    }
    let each = read("--iodepth=8 --scheduler=none");
    let rounds = read("--iodepth=8 --iodepth_batch_submit=8 --iodepth_batch_complete_min=8 --scheduler=none");
    let (each_iops, rounds_iops) = (each["iops"].as_f64().expect("iops"), rounds["iops"].as_f64().expect("iops"));
    assert!(rounds_iops < each_iops * 0.8, "reaping rounds of 8: {rounds_iops:.0} IOPS against {each_iops:.0}");
    let slat_us = |json: &Value| json["slat_ns"]["mean"].as_f64().expect("slat") / 1000.0;
    assert!(
        slat_us(&rounds) > 2.0 * slat_us(&each),
        "an I/O queued for a call of 8 waits for the others' preparation: slat {} against {} us",
        slat_us(&rounds),
        slat_us(&each)
    );
}

#[test]
fn batch_options_are_checked_and_take_fios_defaults() {
    assert!(fio("--filename=preset:instant --name=j --iodepth_batch_submit=-1")
        .expect_err("a negative batch")
        .contains("iodepth_batch"));
    // 0 means the queue depth for submissions, and 0 completions at least means 1: both run.
    let result =
        fio("--filename=preset:instant,zones=4 --zonemode=zbd --name=j --rw=write --bs=4k --size=1z --io_size=1m \
                      --ioengine=libaio --iodepth=4 --iodepth_batch=0 --iodepth_batch_complete=0")
        .expect("runs");
    assert_eq!(to_json(&result, false)["jobs"][0]["write"]["total_ios"].as_u64(), Some(256));
}

/// With batches, I/Os that wait for a zone or for their rate leave fio's thread free to submit and reap: a zbd
/// write job held to fewer open zones than its queue depth, a verified one and a rate-bound reader all finish
/// with every I/O done.
#[test]
fn batched_jobs_that_wait_for_zones_or_their_rate_finish() {
    let batched = "--ioengine=libaio --iodepth_batch_submit=4 --iodepth_batch_complete_min=3 --scheduler=mq-deadline";
    for (args, direction, ios) in [
        ("--rw=write --iodepth=8 --size=4z --io_size=8m --max_open_zones=2", "write", 2048),
        ("--rw=randwrite --iodepth=16 --size=4z --io_size=4m --max_open_zones=2", "write", 1024),
        ("--rw=write --iodepth=8 --size=1z --io_size=4m --verify=crc32c --verify_backlog=64", "read", 1024),
        ("--rw=randread --iodepth=32 --size=2z --prefill=full --rate_iops=20000 --io_size=2m", "read", 512),
    ] {
        let result = fio(&format!("{DEVICE} --name=j --bs=4k {batched} {args}")).expect("runs");
        let json = to_json(&result, false);
        assert_eq!(json["jobs"][0]["error"], 0, "{args}");
        assert_eq!(json["jobs"][0][direction]["total_ios"].as_u64(), Some(ios), "{args}");
    }
}

/// `iodepth_low`: once its queue is full, fio lets it drain to the low-water mark before it fills it again, so
/// fewer commands are out on average; at the queue depth (and by default) the queue is kept full.
#[test]
fn iodepth_low_lets_the_queue_drain_before_it_is_filled() {
    let job = |extra: &str| {
        let result = fio(&format!(
            "{DEVICE} --prefill=full --name=j --rw=randread --bs=4k --size=1z --io_size=8m --ioengine=libaio \
             --iodepth=8 --scheduler=none {extra}"
        ))
        .expect("runs");
        to_json(&result, false)["jobs"][0].clone()
    };
    let (full, kept, drained) = (job(""), job("--iodepth_low=8"), job("--iodepth_low=2"));
    let iops = |job: &Value| job["read"]["iops"].as_f64().expect("iops");
    let at_depth_8 = |job: &Value| job["iodepth_level"]["8"].as_f64().expect("depth share");
    assert_eq!(iops(&kept), iops(&full), "a low-water mark at the queue depth keeps the queue full");
    assert!(iops(&drained) < 0.85 * iops(&full), "draining to 2: {} IOPS against {}", iops(&drained), iops(&full));
    assert!(at_depth_8(&drained) < 50.0, "draining to 2 keeps 8 out {} % of the time", at_depth_8(&drained));
}

/// The ZN540's conventional namespace (`ns=1`) is a plain block target: random writes in place, trims that
/// deallocate, reads of what is mapped from flash; preconditioned, its random writes collect garbage and run
/// far slower than fresh.
#[test]
fn a_conventional_namespace_takes_random_writes_and_trims() {
    let job = |spec: &str, rw: &str| {
        let args = format!(
            "--filename=preset:zn540,ns=1,conventional.capacity=1GiB,conventional.over-provisioning=0.3{spec} \
             --name=j --rw={rw} --bs=4k --iodepth=16 --ioengine=io_uring --io_size=64M"
        );
        let result = fio(&args).expect("runs");
        let json = to_json(&result, false);
        let direction = if rw.ends_with("trim") {
            "trim"
        } else if rw.ends_with("read") {
            "read"
        } else {
            "write"
        };
        assert_eq!(json["jobs"][0]["error"], 0, "{rw}");
        assert_eq!(json["jobs"][0][direction]["io_bytes"].as_u64(), Some(64 << 20), "{rw}");
        json["jobs"][0][direction]["iops"].as_f64().expect("iops")
    };
    let fresh = job("", "randwrite");
    let steady = job(",precondition=random:2", "randwrite");
    assert!(steady < fresh / 2.0, "garbage collection: {steady:.0} IOPS steady against {fresh:.0} fresh");
    let trims = job(",precondition=sequential", "randtrim");
    assert!(trims > 0.0);
    let unmapped = job("", "randread");
    let mapped = job(",precondition=sequential", "randread");
    assert!(mapped < unmapped, "mapped pages are sensed: {mapped:.0} IOPS against {unmapped:.0} unmapped");
    let error = fio("--filename=preset:zn540,ns=1 --zonemode=zbd --name=z --rw=write --bs=4k --size=1M")
        .expect_err("not zoned");
    assert!(error.contains("not a zoned block device"), "{error}");
    let error = fio("--filename=preset:instant,precondition=random --name=z --rw=write --bs=4k --size=1M")
        .expect_err("a device without a conventional namespace");
    assert!(error.contains("precondition=random: the device has no conventional namespace"), "{error}");
    let error = fio("--filename=preset:zn540,zones=16 --name=t --rw=randtrim --bs=4k --size=1M").expect_err("zoned");
    assert!(error.contains("a conventional namespace (ns= in the filename) takes trims"), "{error}");
}

/// A host FTL's counters come group by group, so that consecutive stonewalled jobs show when collection set
/// in: a sequential fill moves nothing, random overwrites after it do, and the device's own write amplification
/// stays 1 throughout. Without verification the device keeps no data and collection moves none either.
#[test]
fn a_host_ftl_reports_each_group_s_collection() {
    let result =
        fio("--filename=preset:instant,zones=16,zone-size=1MiB --hostftl=0.5 --ioengine=io_uring --rw=randwrite \
         --bs=4k --iodepth=8 --stonewall --name=fill --rw=write --bs=64k --size=100% --name=overwrite --io_size=40M")
        .expect("runs");
    let [fill, overwrite] = [&result.groups[0], &result.groups[1]];
    let (fill_ftl, overwrite_ftl) = (fill.host_ftl.expect("a host FTL"), overwrite.host_ftl.expect("a host FTL"));
    assert_eq!(fill_ftl.gc_blocks_moved, 0, "a fill of an empty space collects nothing");
    assert_eq!(fill_ftl.write_amplification(), 1.0);
    assert!(overwrite_ftl.gc_blocks_moved > 0 && overwrite_ftl.write_amplification() > 1.0, "{overwrite_ftl:?}");
    assert_eq!(overwrite_ftl.host_blocks_written, 40 << 8, "40 MiB of 4 KiB blocks");
    let note = result.notes.iter().find(|note| note.starts_with("host FTL")).expect("the run's totals");
    let moved = fill_ftl.gc_blocks_moved + overwrite_ftl.gc_blocks_moved;
    assert!(note.contains(&format!("its garbage collection moved {moved} ")), "{note}");
    for group in [fill, overwrite] {
        assert_eq!(group.device.errors, 0, "no write off a write pointer");
        assert_eq!(group.flash.get(FlashOp::PageProgram, OpSource::GcWrite), 0, "the device collects nothing");
    }
    let json = to_json(&result, false);
    let reported = &json["jobs"][1]["zonelab"]["group_host_ftl"];
    assert_eq!(reported["counters"]["gc_blocks_moved"], overwrite_ftl.gc_blocks_moved);
    assert!(reported["write_amplification"].as_f64().unwrap_or(0.0) > 1.0, "{reported}");
}

/// `hostftl=OP` runs the jobs on a block-level host FTL over the zoned namespace (dm-zap's level): random
/// overwrites of four times its space verify intact while its garbage collection moves blocks and resets zones,
/// and the device sees only sequential writes.
#[test]
fn a_host_ftl_makes_the_zoned_namespace_randomly_writable() {
    let device = "--filename=preset:instant,zones=16,zone-size=1MiB";
    let result = fio(&format!(
        "{device} --hostftl=0.5 --name=h --rw=randwrite --bs=4k --iodepth=8 --ioengine=io_uring --io_size=40M \
         --verify=crc32c"
    ))
    .expect("runs");
    let json = to_json(&result, false);
    assert_eq!(json["jobs"][0]["error"], 0, "every block verified after the collections moved them");
    assert!(json["jobs"][0]["read"]["io_bytes"].as_u64().unwrap_or(0) > 8 << 20);
    let note = result.notes.iter().find(|note| note.starts_with("host FTL")).expect("the host FTL's counters");
    assert!(note.contains("host write amplification 1.") || note.contains("host write amplification 2."), "{note}");
    assert_eq!(result.groups[0].device.errors, 0, "no write off a write pointer");
    // Without mq-deadline's zone lock, and with the device reordering what is outstanding together, the host FTL
    // still writes each zone in order: one write of a zone in flight at a time.
    let unordered = fio(&format!(
        "{device} --hostftl=0.5 --scheduler=none --name=h --rw=randwrite --bs=4k --iodepth=8 --ioengine=io_uring \
         --io_size=24M --verify=crc32c"
    ))
    .expect("runs");
    assert_eq!(to_json(&unordered, false)["jobs"][0]["error"], 0);
    assert_eq!(unordered.groups[0].device.errors, 0);
    let error = fio("--filename=preset:conventional --hostftl=0.5 --name=h --rw=randwrite --bs=4k --io_size=1M")
        .expect_err("not over a conventional namespace");
    assert!(error.contains("a host FTL runs over a zoned one"), "{error}");
    let error = fio(&format!("{device} --hostftl=0.05 --name=h --rw=randwrite --bs=4k --io_size=1M"))
        .expect_err("too little spare");
    assert!(error.contains("leave no room"), "{error}");
}

/// `--trace FILE`: the run as a Chrome trace-event JSON document. Every flow arrow lands no earlier than it
/// leaves, the flash operations on the planes' tracks add up to the run's counters, a write's arrow reaches the
/// program it caused, and tracing leaves the run's own output as it was.
#[test]
fn a_trace_holds_every_flash_operation_and_arrows_forward_in_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trace.json");
    let args = format!(
        "{DEVICE} --name=w --rw=write --bs=64k --iodepth=4 --ioengine=io_uring --size=2z --io_size=64m \
         --name=r --rw=randread --bs=4k --iodepth=8 --ioengine=io_uring --size=1z --io_size=8m"
    );
    let traced = fio(&format!("{args} --trace={}", path.display())).expect("runs");
    let plain = fio(&args).expect("runs");
    assert_eq!(deterministic_json(&traced), deterministic_json(&plain), "tracing changes nothing the run reports");

    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("trace")).expect("JSON");
    assert_eq!(trace["otherData"]["dropped_flash_operations"], 0);
    let events = trace["traceEvents"].as_array().expect("events");
    let slices: Vec<&Value> = events.iter().filter(|event| event["ph"] == "X").collect();
    for event in events {
        assert!(["X", "s", "f", "M", "C"].contains(&event["ph"].as_str().expect("phase")), "{event}");
    }
    for slice in &slices {
        assert!(slice["dur"].as_f64().expect("dur") >= 0.0 && slice["ts"].as_f64().is_some(), "{slice}");
    }
    // Flows: each id leaves once and lands once, never before it left.
    let mut flows: std::collections::HashMap<u64, (Option<f64>, Option<f64>)> = Default::default();
    for event in events.iter().filter(|event| event["ph"] == "s" || event["ph"] == "f") {
        let entry = flows.entry(event["id"].as_u64().expect("id")).or_default();
        let at = event["ts"].as_f64().expect("ts");
        match event["ph"].as_str() {
            Some("s") => assert!(entry.0.replace(at).is_none(), "one start per flow"),
            _ => assert!(entry.1.replace(at).is_none(), "one end per flow"),
        }
    }
    assert!(!flows.is_empty());
    for (id, (leaves, lands)) in &flows {
        let (leaves, lands) = (leaves.expect("leaves"), lands.expect("lands"));
        assert!(leaves <= lands, "flow {id} leaves at {leaves} and lands at {lands}");
    }
    // The flash tracks hold every operation the run counted, by kind and source.
    let counted = |name: &str| -> u64 {
        slices
            .iter()
            .filter(|slice| slice["pid"] == 3 && slice["name"] == name)
            .map(|slice| slice["args"]["count"].as_u64().expect("count"))
            .sum()
    };
    let flash = traced.groups.iter().fold(zonelab_media::FlashCounters::default(), |mut sum, group| {
        for op in [FlashOp::PageRead, FlashOp::PageProgram, FlashOp::BlockErase] {
            for source in OpSource::ALL {
                sum.add(op, source, group.flash.get(op, source));
            }
        }
        sum
    });
    assert!(
        flash.get(FlashOp::PageProgram, OpSource::HostWrite) > 0
            && flash.get(FlashOp::PageRead, OpSource::HostRead) > 0
    );
    assert_eq!(counted("program (host write)"), flash.get(FlashOp::PageProgram, OpSource::HostWrite));
    assert_eq!(counted("sense (host read)"), flash.get(FlashOp::PageRead, OpSource::HostRead));
    // One process per layer, and the jobs' I/Os reach the device's commands.
    let ios = slices.iter().filter(|slice| slice["pid"] == 1).count() as u64;
    assert_eq!(ios, traced.jobs.iter().map(|job| job.read.ios + job.write.ios).sum::<u64>());
    let tids_of = |pid: u64| -> std::collections::HashSet<u64> {
        events.iter().filter(|e| e["pid"] == pid && e["ph"] != "M").filter_map(|e| e["tid"].as_u64()).collect()
    };
    let landing_on_programs = events.iter().filter(|event| event["ph"] == "f" && event["pid"] == 3).count();
    assert!(landing_on_programs > 0, "commands point at their flash operations");
    assert!(tids_of(1).len() >= 2 && !tids_of(2).is_empty() && !tids_of(3).is_empty());
    // Counters: the writer fills zone 0 of 16 and leaves it open; the write buffer fills while it writes and
    // never holds more than its size (zn540's `write-drain-buffer-bytes`, 1.5 MiB).
    let counter = |name: &str, arg: &str| -> Vec<u64> {
        let of_name = events.iter().filter(|event| event["ph"] == "C" && event["name"] == name);
        of_name.map(|event| event["args"][arg].as_u64().expect("value")).collect()
    };
    let (empty, open) = (counter("zones", "empty"), counter("zones", "open"));
    assert_eq!((empty.last(), open.last()), (Some(&15), Some(&1)), "{empty:?} {open:?}");
    let buffered = counter("write buffer", "KiB");
    let most = buffered.iter().max().copied().expect("a write buffer counter");
    assert!(most > 0 && most <= 1536, "{buffered:?}");
}

/// The scheduler's queues in a trace: under ZINC, a reset job's held resets sit on their own track, each named
/// by the rule that let it go and joined by an arrow to the zone reset it became; the writer's requests that
/// waited for their zone's lock sit on the zone's write-lock track. The counts agree with the scheduler's.
#[test]
fn a_trace_shows_the_schedulers_queues_and_what_left_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trace.json");
    let result = fio(&format!(
        "--filename=preset:zn540,zones=16 --zonemode=zbd --scheduler=zinc \
         --name=w --rw=write --bs=64k --ioengine=libaio --iodepth=8 --size=8z --runtime=300ms --time_based \
         --name=t --rw=trim --bs=2048m --offset=8z --size=8z --prefill=full --runtime=300ms --time_based --trace={}",
        path.display()
    ))
    .expect("runs");
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("trace")).expect("JSON");
    let events = trace["traceEvents"].as_array().expect("events");
    let queued: Vec<&Value> = events.iter().filter(|event| event["ph"] == "X" && event["pid"] == 4).collect();
    let on_track = |track: u64| queued.iter().filter(move |slice| slice["tid"].as_u64().expect("tid") / 64 == track);
    let counters = &result.jobs[0].scheduler;
    let held: Vec<&&Value> = on_track(0).collect();
    assert!(!held.is_empty() && held.len() as u64 <= counters.management_held, "{} held, {counters:?}", held.len());
    let by_rule = |rule: &str| held.iter().filter(|slice| slice["name"] == rule).count() as u64;
    assert!(by_rule("tokens spent") > 0, "a busy writer spends the tokens: {counters:?}");
    assert!(by_rule("tokens spent") <= counters.released_by_tokens);
    // Every held reset's arrow lands on a zone reset of the device, no earlier than the hold ended.
    let (starts, ends): (Vec<&Value>, Vec<&Value>) =
        events.iter().filter(|event| event["ph"] == "s" || event["ph"] == "f").partition(|event| event["ph"] == "s");
    let end_of = |id: &Value| ends.iter().find(|end| end["id"] == *id).expect("each flow lands");
    let from_held: Vec<&&Value> =
        starts.iter().filter(|start| start["pid"] == 4 && start["tid"].as_u64().expect("tid") / 64 == 0).collect();
    assert_eq!(from_held.len(), held.len(), "an arrow from every held reset");
    let resets: Vec<&Value> = events
        .iter()
        .filter(|event| event["ph"] == "X" && event["pid"] == 2 && event["name"] == "zone reset")
        .collect();
    for start in from_held {
        let end = end_of(&start["id"]);
        assert_eq!(end["pid"], 2);
        let landed = resets.iter().any(|reset| reset["tid"] == end["tid"] && reset["ts"] == end["ts"]);
        assert!(landed, "the arrow {start} lands on a zone reset: {end}");
    }
    // The writer's waits for zone locks: each dispatched head or merged request, never more than counted.
    let locked: Vec<&&Value> = on_track(2).collect();
    let named = |name: &str| locked.iter().filter(|slice| slice["name"] == name).count() as u64;
    assert!(named("dispatched") > 0 && named("dispatched") <= counters.write_commands, "{counters:?}");
    assert!(named("merged") > 0 && named("merged") <= counters.merged_requests, "{counters:?}");
    assert_eq!(named("dispatched") + named("merged"), locked.len() as u64);
}

/// `new_group` starts a reporting group, not a run: its jobs run beside the ones before it, as fio runs them,
/// where `stonewall` waits for them; `group_reporting` folds every job of a reporting group into one result,
/// each direction over the window of the jobs that moved data in it.
#[test]
fn new_group_reports_apart_jobs_that_run_beside_each_other() {
    let jobs = "--filename=preset:conventional --ioengine=psync --bs=4k --size=8M --group_reporting \
                --name=a --rw=write --name=b --rw=randread --name=c --rw=randwrite";
    let beside = fio(&jobs.replace("--name=b", "--name=b --new_group")).expect("runs");
    let after = fio(&jobs.replace("--name=b", "--name=b --stonewall")).expect("runs");
    for result in [&beside, &after] {
        let shape: Vec<(&str, u32, u32, u64, u64)> = result
            .jobs
            .iter()
            .map(|job| (job.options.name.as_str(), job.groupid, job.instances, job.read.bytes, job.write.bytes))
            .collect();
        assert_eq!(shape, [("a", 0, 1, 0, 8 << 20), ("b", 1, 2, 8 << 20, 8 << 20)], "c folds into b's result");
        let b = &result.jobs[1];
        assert!(b.read.runtime_ns > 0 && b.write.runtime_ns > 0);
        assert_ne!(b.read.runtime_ns, b.write.runtime_ns, "each direction has its own jobs' window");
    }
    assert_eq!(beside.groups.len(), 1, "one run: a, b and c side by side");
    assert_eq!(after.groups.len(), 2, "a, then b and c");
    let alone_ns: u64 = after.jobs.iter().map(|job| job.runtime_ns).sum();
    assert!(
        beside.groups[0].device_time_ns < alone_ns,
        "side by side the run takes {} ns, less than the {alone_ns} ns of its groups one after another",
        beside.groups[0].device_time_ns
    );
    let text = zonelab_fio::to_text(&beside);
    assert!(text.contains("device commands, shared with group 1, which ran beside it"), "{text}");
    assert!(!zonelab_fio::to_text(&after).contains("shared with"), "stonewalled groups share nothing");
    let json = to_json(&beside, false);
    assert_eq!(json["jobs"][1]["groupid"], 1);
    assert_eq!(json["disk_util"][0]["write_ios"], 4096, "the run's device figures are counted once");
}

/// The offsets of the writes in a job's `write_iolog`, as fio's iolog names them.
fn written_offsets(args: &str) -> Vec<u64> {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("trace.log");
    let trace = trace.to_str().expect("utf-8");
    let result = fio(&format!("{args} --write_iolog={trace}")).expect("runs");
    assert_eq!(result.jobs[0].error, 0, "{:?}", result.jobs[0].error_message);
    zonelab_fio::write_logs(&result.io_logs, std::path::Path::new("/")).expect("writes the trace");
    let text = std::fs::read_to_string(trace).expect("trace");
    text.lines()
        .filter_map(|line| line.split_once(" write ").map(|(_, rest)| rest))
        .map(|rest| rest.split_whitespace().next().expect("offset").parse().expect("a number"))
        .collect()
}

#[test]
fn a_random_pass_touches_every_block_once_as_fios_random_map_makes_it() {
    let job = "--filename=preset:conventional --name=w --rw=randwrite --bs=4k --size=4M";
    let covered = |extra: &str| {
        let offsets = written_offsets(&format!("{job} {extra}"));
        (offsets.len(), offsets.into_iter().collect::<std::collections::BTreeSet<_>>().len())
    };
    assert_eq!(covered(""), (1024, 1024), "the random map: 1,024 writes, each block once");
    assert_eq!(covered("--random_generator=lfsr"), (1024, 1024), "lfsr: each block once without a map");
    let (writes, distinct) = covered("--norandommap");
    assert_eq!(writes, 1024);
    assert!((600..700).contains(&distinct), "norandommap draws blocks again: {distinct} of 1,024 (1 - 1/e)");
    // A second pass (io_size twice the size) starts when the first has used every block.
    let offsets = written_offsets(&format!("{job} --io_size=8M"));
    let distinct = |part: &[u64]| part.iter().collect::<std::collections::BTreeSet<_>>().len();
    assert_eq!((distinct(&offsets[..1024]), distinct(&offsets[1024..])), (1024, 1024));
}

#[test]
fn random_writes_at_depth_verify_on_a_conventional_namespace() {
    // Without the random map two writes of one block in flight complete out of order and the later check sees
    // the other's numberio (fio's "bad header numberio"); with it a pass never writes a block twice.
    for seed in 1..=3 {
        let result = fio(&format!(
            "--filename=preset:conventional --name=v --rw=randwrite --bs=4k --size=16M --verify=crc32c \
             --iodepth=32 --ioengine=io_uring --randseed={seed}"
        ))
        .expect("runs");
        let job = &result.jobs[0];
        assert_eq!(job.error, 0, "seed {seed}: {:?}", job.error_message);
        assert_eq!(job.read.bytes, 16 << 20, "seed {seed}: every block is read back");
    }
}

#[test]
fn a_mixed_job_on_full_zones_reads_and_writes_for_its_whole_runtime() {
    // Its first writes reset both full zones, leaving nothing to read for a moment: fio draws again and goes on.
    let result =
        fio("--filename=preset:zn540,zones=8 --zonemode=zbd --name=m --rw=randrw --bs=16k --size=2z --iodepth=8 \
         --ioengine=io_uring --prefill=full --runtime=50ms --time_based")
        .expect("runs");
    let job = &result.jobs[0];
    assert_eq!(job.error, 0, "{:?}", job.error_message);
    assert!(
        job.read.bytes > 1 << 20 && job.write.bytes > 1 << 20,
        "{} read, {} written",
        job.read.bytes,
        job.write.bytes
    );
    assert!(job.runtime_ns >= 50_000_000, "runs its whole runtime: {} ns", job.runtime_ns);
    // A job that only reads still fails, naming the cause, when its zones hold nothing.
    let empty =
        fio("--filename=preset:zn540,zones=8 --zonemode=zbd --name=r --rw=randread --bs=16k --size=2z").expect("runs");
    assert_eq!(empty.jobs[0].error_message.as_deref(), Some("r: no written data to read in the job's zones"));
}

#[test]
fn reads_of_a_never_written_conventional_namespace_are_noted_as_on_a_zoned_one() {
    let run = |spec: &str| {
        fio(&format!("--filename={spec} --name=r --rw=randread --bs=4k --iodepth=16 --ioengine=io_uring --io_size=4M"))
            .expect("runs")
    };
    let unwritten = |notes: &[String]| notes.iter().any(|note| note.contains("reached blocks no write had reached"));
    let fresh = run("preset:zn540,ns=1");
    assert!(unwritten(&fresh.notes), "{:?}", fresh.notes);
    assert_eq!(fresh.groups[0].device.reads_of_unwritten, 1024);
    let written = run("preset:zn540,ns=1,precondition=sequential");
    assert!(!unwritten(&written.notes), "{:?}", written.notes);
    let speed = |result: &FioResult| result.jobs[0].read.ios as f64 / result.jobs[0].runtime_ns as f64;
    assert!(speed(&fresh) > speed(&written), "zeros come back sooner than data");
}

#[test]
fn fsync_and_end_fsync_flush_the_namespace_as_fio_syncs_it() {
    let run = |extra: &str| {
        let result = fio(&format!("--filename=preset:zn540,ns=1 --name=c --rw=randwrite --bs=4k --io_size=1M {extra}"))
            .expect("runs");
        assert!(!result.jobs[0].options.ignored.iter().any(|option| option.contains("sync")), "honoured, not ignored");
        (result.jobs[0].sync.ios, result.jobs[0].write.ios)
    };
    assert_eq!(run("--fsync=16"), (16, 256), "a Flush after every 16th write");
    assert_eq!(run("--fdatasync=100"), (2, 256));
    assert_eq!(run("--end_fsync=1"), (1, 256), "one Flush once the writes are done");
    assert_eq!(run("--fsync=100 --end_fsync=1"), (3, 256), "after writes 100 and 200, and at the end");
    assert_eq!(run(""), (0, 256));
}

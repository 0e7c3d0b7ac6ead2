//! Zones over time, replayed from a run's trace.

use serde_json::Value;
use zonelab_fio::{parse_invocation, run};

/// Zones over time from a trace: a job fills two zones, then another resets the first; the replayed write
/// pointers fill both, the reset empties the first, and every byte the job wrote is counted once.
#[test]
fn a_zone_timeline_replays_the_write_pointers_of_a_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trace.json");
    let args = format!(
        "--filename=preset:nvmevirt-rezns,zones=8 --zonemode=zbd --name=w --rw=write --bs=128k --ioengine=libaio \
         --iodepth=4 --size=2z --name=r --stonewall --rw=trim --bs=64m --size=1z --trace={}",
        path.display()
    );
    let args: Vec<String> = args.split_whitespace().map(str::to_string).collect();
    let invocation = parse_invocation(&args, |_| Err("no job files here".into())).expect("parses");
    let result = run(&invocation, 1).expect("runs");
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("trace")).expect("JSON");
    let timeline = zonelab_bench::zonetimeline::zone_timeline(&trace, 10).expect("a timeline");
    let capacity = timeline.zone_cap_bytes;
    assert_eq!(timeline.zones.iter().map(|zone| zone.zone).collect::<Vec<_>>(), [0, 1], "the zones the run touched");
    let (first, second) = (&timeline.zones[0], &timeline.zones[1]);
    let written = result.jobs[0].write.bytes;
    assert_eq!(first.bytes_written_total + second.bytes_written_total, written);
    assert_eq!((first.resets.iter().sum::<u32>(), second.resets.iter().sum::<u32>()), (1, 0));
    assert_eq!((first.written_bytes.last(), second.written_bytes.last()), (Some(&0), Some(&capacity)));
    assert!(first.written_bytes.contains(&capacity), "zone 0 was full before its reset: {:?}", first.written_bytes);
    assert!(first.written_bytes.windows(2).take_while(|pair| pair[1] != 0).all(|pair| pair[0] <= pair[1]));
    assert_eq!(timeline.tsv().lines().count(), 1 + 2 * 10);
    let png = dir.path().join("zones.png");
    timeline.draw(&png).expect("drawn");
    assert!(std::fs::metadata(&png).expect("a PNG").len() > 1000);
}

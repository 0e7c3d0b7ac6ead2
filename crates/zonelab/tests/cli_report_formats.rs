//! `report` in each format, and the Partial bit's effect on nr_zones.

mod common;

use common::*;

fn mixed() -> TestImage {
    let img = image(&["--lba-size", "512", "--zone-cap", "768KiB"]);
    ok(&["write", img.s(), "--lba", "0", "--pattern", "1", "--blocks", "16"]);
    ok(&["open", img.s(), "--zone", "1"]);
    ok(&["finish", img.s(), "--zone", "2"]);
    ok(&["write", img.s(), "--lba", "6144", "--pattern", "1", "--blocks", "8"]);
    ok(&["close", img.s(), "--zone", "3"]);
    ok(&["inject", img.s(), "--zone", "4", "--state", "offline"]);
    img
}

#[test]
fn blkzone_format_is_util_linux_byte_for_byte() {
    let img = mixed();
    let out = ok(&["report", img.s(), "--format", "blkzone", "--count", "5"]);
    let expected: String = [
        "  start: 0x000000000, len 0x000800, cap 0x000600, wptr 0x000010 reset:0 non-seq:0, zcond: 2(oi) [type: 2(SEQ_WRITE_REQUIRED)]\n",
        "  start: 0x000000800, len 0x000800, cap 0x000600, wptr 0x000000 reset:0 non-seq:0, zcond: 3(oe) [type: 2(SEQ_WRITE_REQUIRED)]\n",
        "  start: 0x000001000, len 0x000800, cap 0x000600, wptr N/A reset:0 non-seq:0, zcond:14(fu) [type: 2(SEQ_WRITE_REQUIRED)]\n",
        "  start: 0x000001800, len 0x000800, cap 0x000600, wptr 0x000008 reset:0 non-seq:0, zcond: 4(cl) [type: 2(SEQ_WRITE_REQUIRED)]\n",
        "  start: 0x000002000, len 0x000800, cap 0x000600, wptr N/A reset:0 non-seq:0, zcond:15(of) [type: 2(SEQ_WRITE_REQUIRED)]\n",
    ]
    .concat();
    assert_eq!(out, expected);
}

#[test]
fn nvme_format_is_nvme_cli_byte_for_byte() {
    let img = mixed();
    let out = ok(&["report", img.s(), "--format", "nvme", "--count", "3", "--start-lba", "2050"]);
    let expected = "\
nr_zones: 7
SLBA: 0x800      WP: 0x800      Cap: 0x600      State: 0x30 Type: 0x2  Attrs: 0    AttrsInfo: 0   
SLBA: 0x1000     WP: 0xffffffffffffffff Cap: 0x600      State: 0xe0 Type: 0x2  Attrs: 0    AttrsInfo: 0   
SLBA: 0x1800     WP: 0x1808     Cap: 0x600      State: 0x40 Type: 0x2  Attrs: 0    AttrsInfo: 0   
";
    assert_eq!(out, expected);
}

#[test]
fn json_nr_zones_follows_the_partial_bit() {
    let img = mixed();
    let whole: serde_json::Value =
        serde_json::from_str(&ok(&["report", img.s(), "--format", "json", "--count", "2"])).expect("json");
    assert_eq!(whole["nr_zones"], 8, "without --partial: all matching zones");
    assert_eq!(whole["zones"].as_array().expect("zones").len(), 2);
    assert_eq!(whole["lba_size"], 512);
    assert_eq!(whole["zones"][0]["capacity_lba"], 1536);
    let partial: serde_json::Value =
        serde_json::from_str(&ok(&["report", img.s(), "--format", "json", "--count", "2", "--partial"])).expect("json");
    assert_eq!(partial["nr_zones"], 2, "with --partial: the zones returned");
    let empty: serde_json::Value =
        serde_json::from_str(&ok(&["report", img.s(), "--format", "json", "--state", "em"])).expect("json");
    assert_eq!(empty["nr_zones"], 3);
    assert!(empty["zones"].as_array().expect("zones").iter().all(|z| z["state"] == "empty"));
}

#[test]
fn text_format_lists_every_zone() {
    let img = mixed();
    let out = ok(&["report", img.s()]);
    assert_eq!(out.lines().count(), 1 + 8 + 1);
    assert!(out.lines().nth(3).expect("zone 2").contains("full"));
    assert!(out.ends_with("nr_zones: 8\n"));
}

//! Crash consistency of the file store: `zonelab churn` writes, appends, resets and power-cycles an image in a
//! loop and is killed with SIGKILL at random instants, many times. After every kill the image must open, its
//! invariants must hold, every block below a write pointer must hold exactly what was written there and every
//! block above must read as zeros (`churn --verify`). The churn seeds and kill instants come from one test seed,
//! printed on failure; `ZONELAB_CRASH_SEED=0x...` replays a failing one (the churn seeds exactly, the kill
//! instants as closely as the wall clock allows).

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

#[test]
fn killed_at_random_instants_the_image_stays_consistent() {
    let img = image(&["--zone-cap", "768KiB", "--lba-size", "512", "--max-open", "3", "--max-active", "4"]);
    let seed = std::env::var("ZONELAB_CRASH_SEED")
        .ok()
        .and_then(|text| u64::from_str_radix(text.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0x5eed_c0de);
    let mut rng = seed;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let kills = 100;
    // The most blocks any verify found written: the test means something only if the churn wrote between
    // kills (the image after the last kill may be empty, when its last command reset every zone).
    let mut most_verified = 0u64;
    for kill in 0..kills {
        let churn_seed = (next() % 1_000_000).to_string();
        let mut child = Command::new(env!("CARGO_BIN_EXE_zonelab"))
            .args(["churn", img.s(), "--seed", &churn_seed, "--ops", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn churn");
        let delay_ms = 5 + next() % 60;
        std::thread::sleep(Duration::from_millis(delay_ms));
        let still_running = child.try_wait().expect("poll churn").is_none();
        child.kill().expect("SIGKILL churn");
        let output = child.wait_with_output().expect("reap churn");
        assert!(
            still_running,
            "churn exited by itself before kill {kill} (ZONELAB_CRASH_SEED={seed:#x}, churn seed {churn_seed}): {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let verify = zonelab(&["churn", img.s(), "--verify"]);
        assert_eq!(
            verify.code, 0,
            "after kill {kill} at {delay_ms} ms (ZONELAB_CRASH_SEED={seed:#x}, churn seed {churn_seed}): {}",
            verify.stderr
        );
        let blocks = verify.stdout.split_whitespace().nth(1).and_then(|count| count.parse::<u64>().ok());
        most_verified = most_verified.max(blocks.expect("verify says how many blocks it checked"));
    }
    assert!(most_verified > 0, "the churn never got to write (ZONELAB_CRASH_SEED={seed:#x})");
}

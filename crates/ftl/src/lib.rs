//! # zonelab-ftl: the conventional namespace's flash translation layer
//!
//! Layer 2 of docs/design.md, above the flash model's physical API: where a zoned namespace maps each zone
//! onto physical zones statically (or renews them, ReZNS), a conventional namespace maps every 4 KiB logical
//! page anywhere, as NVMeVirt's `conv_ftl.c` and FEMU's BBSSD do. Writes go to the next page of a stream's
//! open block; an overwrite or a trim invalidates the old page; when free blocks run short a write waits
//! while garbage collection picks a victim (greedy or cost-benefit), senses its valid pages, programs them
//! into a block of its own and erases the victim. Those operations reserve the same dies and channels as host
//! I/O, so garbage collection slows host I/O by mechanism. Counters split programs by cause, so write
//! amplification falls out; erase counts per block give the wear.
//!
//! Media that write in place (3D XPoint) need none of this: `InPlace` keeps each logical page where it lies.
//!
//! The device (`zonelab-device`) holds one as its conventional namespace's mapping, its blocks rows of physical
//! zones of the device's flash model (`Rows`); `zonelab bench ftl` drives it on a model of its own.

mod blocks;
mod config;
mod flash;
mod ftl;
mod in_place;

pub use config::{FtlConfig, FtlError, VictimPolicy};
pub use flash::{Flash, Rows, Untimed};
pub use ftl::{Ftl, FtlCounters};
pub use in_place::InPlace;

/// Write amplification of greedy garbage collection under uniform random page writes, from "An Improved
/// Analytic Expression for Write Amplification in NAND Flash" (Luojie Xiang and Brian M. Kurkoski, 2012):
/// `A = a / (a + W(-a e^-a))` with `a = 1 + over_provisioning` (physical over logical space) and `W` the
/// principal branch of Lambert's W function. It assumes many blocks of many pages; their paper finds it within
/// 1 % of simulation at an over-provisioning of 0.3 (2.36 against 2.35).
pub fn greedy_write_amplification(over_provisioning: f64) -> f64 {
    let a = 1.0 + over_provisioning;
    a / (a + lambert_w0(-a * (-a).exp()))
}

/// The principal branch of Lambert's W on [-1/e, 0), by Newton's method from the branch point's expansion.
fn lambert_w0(x: f64) -> f64 {
    let p = (2.0 * (1.0 + std::f64::consts::E * x)).max(0.0).sqrt();
    let mut w = -1.0 + p - p * p / 3.0;
    for _ in 0..50 {
        let e = w.exp();
        let step = (w * e - x) / (e * (w + 1.0)).max(f64::MIN_POSITIVE);
        w -= step;
        if step.abs() < 1e-12 {
            break;
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_analytic_write_amplification_matches_the_papers_figure() {
        // Xiang and Kurkoski's example: 2.36 at an over-provisioning of 0.3.
        assert!((greedy_write_amplification(0.3) - 2.36).abs() < 0.01, "{}", greedy_write_amplification(0.3));
        assert!(greedy_write_amplification(0.07) > greedy_write_amplification(0.28));
    }
}

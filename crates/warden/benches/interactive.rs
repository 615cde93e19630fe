//! Interactive mode, side by side in one run: time from `Jail::spawn` to the first byte of the
//! child's stdout (what an MCP client waits for), against the whole capture-mode round trip
//! (`Jail::run`) of the same command through the same helper. Prints medians and p95.
//!
//! Run with `cargo bench -p warden --bench interactive` (root, Linux).

#![allow(clippy::expect_used)]

use std::io::Read;
use std::time::{Duration, Instant};

use warden_jail::{Jail, Policy};

/// The `p`-th percentile (0..=100) of sorted samples.
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let last = sorted.len().saturating_sub(1);
    let i = (last * p).div_ceil(100).min(last);
    sorted[i]
}

fn measure(n: usize, mut f: impl FnMut() -> Duration) -> (Duration, Duration) {
    for _ in 0..10 {
        f();
    }
    let mut t: Vec<Duration> = (0..n).map(|_| f()).collect();
    t.sort();
    (percentile(&t, 50), percentile(&t, 95))
}

fn main() {
    let jail = Jail::with_helper(env!("CARGO_BIN_EXE_warden"));
    let policy = Policy::default();
    let argv: Vec<String> = ["echo", "hi"].iter().map(|s| s.to_string()).collect();
    let n = 200;
    let first_byte = measure(n, || {
        let start = Instant::now();
        let mut running = jail.spawn(&policy, &argv).expect("spawn");
        let mut byte = [0u8; 1];
        running
            .stdout
            .as_mut()
            .expect("stdout")
            .read_exact(&mut byte)
            .expect("first byte");
        let took = start.elapsed();
        running.wait().expect("wait");
        took
    });
    let capture = measure(n, || {
        let start = Instant::now();
        let o = jail.run(&policy, &argv, b"").expect("run");
        assert_eq!(o.stdout, b"hi\n");
        start.elapsed()
    });
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("interactive mode (helper re-exec, {n} runs each):");
    println!(
        "  spawn -> first stdout byte   median {:6.2} ms   p95 {:6.2} ms",
        ms(first_byte.0),
        ms(first_byte.1)
    );
    println!(
        "  capture run (whole round trip) median {:6.2} ms   p95 {:6.2} ms",
        ms(capture.0),
        ms(capture.1)
    );
}

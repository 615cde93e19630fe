//! The jail's helper, side by side in one run: time from `Jail::spawn` to the first byte of the
//! child's stdout (interactive mode, what an MCP client waits for) and the whole capture-mode
//! round trip (`Jail::run`), through the small `warden-jail` and through the whole `warden`
//! re-executed. Prints medians, p95 and the ratios.
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

/// Spawn to first stdout byte, and the whole capture round trip, through `jail`.
fn round(jail: &Jail, n: usize) -> (Vec<Duration>, Vec<Duration>) {
    let policy = Policy::default();
    let argv: Vec<String> = ["echo", "hi"].iter().map(|s| s.to_string()).collect();
    let first_byte = (0..n)
        .map(|_| {
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
        })
        .collect();
    let capture = (0..n)
        .map(|_| {
            let start = Instant::now();
            let o = jail.run(&policy, &argv, b"").expect("run");
            assert_eq!(o.stdout, b"hi\n");
            start.elapsed()
        })
        .collect();
    (first_byte, capture)
}

fn main() {
    // The small helper (`warden-jail`, what `warden` starts when it sits beside it) and the
    // whole `warden` re-executed, in alternating rounds.
    let helpers = [
        (
            "warden-jail",
            Jail::with_helper(env!("CARGO_BIN_EXE_warden-jail")),
        ),
        ("warden", Jail::with_helper(env!("CARGO_BIN_EXE_warden"))),
    ];
    let (rounds, n) = (4, 50);
    let mut samples: Vec<(Vec<Duration>, Vec<Duration>)> = vec![Default::default(); 2];
    for (_, jail) in &helpers {
        round(jail, 10);
    }
    for _ in 0..rounds {
        for (i, (_, jail)) in helpers.iter().enumerate() {
            let (a, b) = round(jail, n);
            samples[i].0.extend(a);
            samples[i].1.extend(b);
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let stats = |mut v: Vec<Duration>| {
        v.sort();
        (percentile(&v, 50), percentile(&v, 95))
    };
    println!(
        "jail helper, `echo hi` ({} runs each, {rounds} alternating rounds):",
        rounds * n
    );
    let mut medians = Vec::new();
    for ((name, _), (first, capture)) in helpers.iter().zip(samples) {
        let (f, c) = (stats(first), stats(capture));
        println!(
            "  {name:12} spawn -> first stdout byte median {:6.2} ms p95 {:6.2} ms; capture round trip median {:6.2} ms p95 {:6.2} ms",
            ms(f.0),
            ms(f.1),
            ms(c.0),
            ms(c.1)
        );
        medians.push((f.0, c.0));
    }
    println!(
        "  warden-jail / warden: first byte {:.2}x, capture {:.2}x",
        ms(medians[0].0) / ms(medians[1].0),
        ms(medians[0].1) / ms(medians[1].1)
    );
}

//! Every limit has a default and ends a bomb cleanly, reported in the outcome.

use super::common::*;

#[test]
pub fn memory_bomb_is_stopped_and_reported() {
    let v = run_json(
        &["--memory", "64M"],
        &["python3", "-c", "x = bytearray(512 << 20)"],
    );
    assert_eq!(v["limit_hit"], "memory", "{v}");
    assert_eq!(v["signal"], 9);
    assert!(v["usage"]["peak_memory_bytes"].as_u64().unwrap() <= 64 << 20);
}

#[test]
pub fn fork_bomb_is_stopped_and_reported() {
    let bomb =
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n";
    let v = run_json(
        &["--pids", "32", "--timeout", "30"],
        &["python3", "-c", bomb],
    );
    assert_eq!(v["limit_hit"], "pids", "{v}");
    assert!(v["duration_ms"].as_u64().unwrap() < 20_000, "{v}");
}

#[test]
pub fn cpu_spin_of_a_whole_tree_is_stopped() {
    let spin = "for i in 1 2 3; do (while :; do :; done) & done; wait";
    let v = run_json(&["--cpu", "1", "--timeout", "30"], &["sh", "-c", spin]);
    assert_eq!(v["limit_hit"], "cpu_time", "{v}");
    assert!(v["usage"]["cpu_time_ms"].as_u64().unwrap() >= 1000, "{v}");
    assert!(v["duration_ms"].as_u64().unwrap() < 20_000, "{v}");
}

#[test]
pub fn output_flood_is_cut_and_reported() {
    let v = run_json(&["--output-limit", "100K"], &["yes"]);
    assert_eq!(v["limit_hit"], "output", "{v}");
    assert_eq!(v["stdout_truncated"], true);
    assert_eq!(v["stdout"].as_str().unwrap().len(), 100 << 10);
    // Streaming mode stops at the same place.
    let r = warden(&["run", "--output-limit", "100K", "--", "yes"]);
    assert_eq!(r.stdout.len(), 100 << 10);
    assert!(r.stderr.contains("limit hit: output"), "{r:?}");
}

#[test]
pub fn wall_time_kills_the_tree() {
    let start = std::time::Instant::now();
    let v = run_json(&["--timeout", "1"], &["sh", "-c", "sleep 100 & sleep 100"]);
    assert_eq!(v["limit_hit"], "wall_time", "{v}");
    assert_eq!(v["signal"], 9);
    assert!(start.elapsed().as_secs_f64() < 5.0);
}

#[test]
pub fn file_size_limit_stops_a_large_write() {
    let v = run_json(
        &["--fsize", "1M"],
        &["dd", "if=/dev/zero", "of=big", "bs=1M", "count=8"],
    );
    assert_eq!(v["limit_hit"], "file_size", "{v}");
    assert_eq!(v["signal"], 25);
}

#[test]
pub fn tmp_fill_ends_with_enospc_not_a_host_problem() {
    let v = run_json(
        &["--tmp-size", "8M"],
        &[
            "sh",
            "-c",
            "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>&1; echo rc=$?",
        ],
    );
    let out = v["stdout"].as_str().unwrap();
    assert!(
        out.contains("No space left on device") && out.contains("rc=1"),
        "{v}"
    );
    assert_eq!(v["limit_hit"], serde_json::Value::Null);
}

#[test]
pub fn open_files_limit_applies() {
    let v = run_json(&["--nofile", "64"], &["sh", "-c", "ulimit -n"]);
    assert_eq!(v["stdout"].as_str().unwrap().trim(), "64", "{v}");
}

#[test]
pub fn every_limit_has_a_default_and_a_mechanism() {
    let v = run_json(&[], &["true"]);
    let e = &v["enforcement"];
    for key in [
        "wall_time",
        "cpu_time",
        "memory",
        "pids",
        "open_files",
        "file_size",
        "output",
        "tmp",
    ] {
        assert!(!e[key].as_array().unwrap().is_empty(), "{key}: {v}");
    }
    assert_eq!(e["seccomp"], true);
    let defaults = warden_jail::Limits::default();
    assert!(defaults.wall_time_ms > 0 && defaults.memory_bytes > 0 && defaults.pids > 0);
}

/// Regression: forwarding output used to block the supervisor on a reader that never reads,
/// and with it the wall-time limit and signal handling.
#[test]
pub fn a_stalled_reader_stops_neither_limits_nor_signals() {
    use std::process::{Command, Stdio};
    let n = nonce();
    let mut w = Command::new(warden_bin())
        .args(["run", "--timeout", "2", "--", "yes", &n])
        .stdin(Stdio::null())
        .stdout(Stdio::piped()) // never read
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Up: warden, the jail's init and `yes`.
    assert!(eventually(10, || host_processes_and_inits_with(&n).len() >= 3));
    let start = std::time::Instant::now();
    // The jail dies at its wall time although our stdout is full: only warden itself, still
    // waiting to hand over the output it holds, is left.
    assert!(
        eventually(10, || host_processes_and_inits_with(&n).len() == 1),
        "{:?}",
        host_processes_and_inits_with(&n)
    );
    assert!(
        start.elapsed().as_secs_f64() > 1.0,
        "gone before its wall time"
    );
    assert!(w.try_wait().unwrap().is_none());
    // And it still answers SIGTERM.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(w.id().cast_signed()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(
        eventually(5, || w.try_wait().unwrap().is_some()),
        "warden ignored SIGTERM"
    );
}

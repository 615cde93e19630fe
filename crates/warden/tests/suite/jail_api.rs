//! The library API used by later work: capture and interactive modes through the helper.

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use warden_jail::{Jail, JailError, Policy};

use super::common::*;

fn jail() -> Jail {
    Jail::with_helper(warden_bin())
}

fn argv(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn capture_mode_feeds_stdin_and_keeps_output() {
    let o = jail()
        .run(
            &Policy::default(),
            &argv(&["sh", "-c", "tr a-z A-Z; echo e >&2; exit 4"]),
            b"hello",
        )
        .unwrap();
    assert_eq!(o.stdout, b"HELLO");
    assert_eq!(o.stderr, b"e\n");
    assert_eq!(o.exit_code, Some(4));
}

#[test]
fn capture_mode_reports_typed_errors() {
    let e = jail()
        .run(&Policy::default(), &argv(&["no-such-program"]), b"")
        .unwrap_err();
    assert!(
        matches!(e, JailError::NotFound(ref p) if p == "no-such-program"),
        "{e:?}"
    );
    let mut p = Policy::default();
    p.limits.memory_bytes = 0;
    let e = jail().run(&p, &argv(&["true"]), b"").unwrap_err();
    assert!(matches!(e, JailError::Policy(_)), "{e:?}");
}

#[test]
fn interactive_mode_talks_over_pipes_and_can_be_killed() {
    let mut r = jail().spawn(&Policy::default(), &argv(&["cat"])).unwrap();
    let mut stdin = r.stdin.take().unwrap();
    let mut stdout = BufReader::new(r.stdout.take().unwrap());
    stdin.write_all(b"ping\n").unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "ping\n");
    assert!(
        r.wait_timeout(Duration::from_millis(100))
            .unwrap()
            .is_none()
    );
    r.kill();
    let o = r.wait().unwrap();
    assert!(o.killed);
}

#[test]
fn interactive_mode_ends_when_the_child_exits() {
    let mut r = jail()
        .spawn(&Policy::default(), &argv(&["sh", "-c", "read x; exit 5"]))
        .unwrap();
    r.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let o = r.wait().unwrap();
    assert_eq!(o.exit_code, Some(5));
    assert!(!o.killed);
}

#[test]
fn interactive_mode_honours_the_wall_time() {
    let mut p = Policy::default();
    p.limits.wall_time_ms = 300;
    let mut r = jail().spawn(&p, &argv(&["sleep", "60"])).unwrap();
    let o = r
        .wait_timeout(Duration::from_secs(10))
        .unwrap()
        .expect("ended");
    assert_eq!(o.limit_hit, Some(warden_jail::LimitKind::WallTime));
}

/// A helper of another build refuses the request (so a stale `warden-jail` that slipped past
/// the caller's check never runs a policy it may not understand), and the small helper of
/// this build runs it.
#[test]
fn a_helper_of_another_build_refuses_and_the_small_helper_runs() {
    let small = env!("CARGO_BIN_EXE_warden-jail");
    let o = Jail::with_helper(small)
        .run(&Policy::default(), &argv(&["echo", "small"]), b"")
        .unwrap();
    assert_eq!(o.stdout, b"small\n");
    let dir = tempfile::tempdir().unwrap();
    let stale = dir.path().join("stale-helper");
    {
        use std::os::unix::fs::PermissionsExt;
        // The same helper, told it is another build (descriptors 3 and 4 pass through exec).
        std::fs::write(
            &stale,
            format!("#!/bin/sh\nexec {small} \"$1\" 0000000000000000\n"),
        )
        .unwrap();
        std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let e = Jail::with_helper(&stale)
        .run(&Policy::default(), &argv(&["echo", "no"]), b"")
        .unwrap_err();
    assert!(format!("{e:?}").contains("another build"), "{e:?}");
}

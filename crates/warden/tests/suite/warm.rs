//! Prepared ("warm") jails: set up ahead, one command each, nothing shared between two.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use warden_jail::warm::Command;
use warden_jail::{Jail, JailError, LimitKind, Policy};

use super::common::*;

fn jail() -> Jail {
    Jail::with_helper(warden_bin())
}

fn cmd(argv: &[&str]) -> Command {
    Command {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        ..Command::default()
    }
}

#[test]
fn a_prepared_jail_runs_its_command_with_stdin_env_and_limits() {
    let mut p = Policy::default();
    p.env.insert("FROM_POLICY".into(), "p".into());
    let warm = jail().prepare(&p).unwrap();
    // Let it finish preparing: the command then meets a waiting init.
    std::thread::sleep(Duration::from_millis(200));
    let mut c = cmd(&[
        "sh",
        "-c",
        "tr a-z A-Z; echo \"$FROM_POLICY $FROM_CALL\" >&2; ulimit -t; exit 3",
    ]);
    c.stdin = b"hello".to_vec();
    c.env = BTreeMap::from([("FROM_CALL".to_owned(), "c".to_owned())]);
    c.cpu_time_ms = Some(7000);
    let o = warm.start(&c).unwrap().wait().unwrap();
    assert_eq!(o.stdout, b"HELLO7\n");
    assert_eq!(o.stderr, b"p c\n");
    assert_eq!(o.exit_code, Some(3));
}

#[test]
fn a_prepared_jails_clock_starts_with_its_command() {
    let mut p = Policy::default();
    p.limits.wall_time_ms = 60_000;
    let warm = jail().prepare(&p).unwrap();
    // Waiting longer than the command's own limit does not use it up.
    std::thread::sleep(Duration::from_millis(700));
    let mut c = cmd(&["sh", "-c", "sleep 0.2; echo done"]);
    c.wall_time_ms = Some(600);
    let o = warm.start(&c).unwrap().wait().unwrap();
    assert_eq!(o.stdout, b"done\n", "{o:?}");
    assert_eq!(o.limit_hit, None);
    assert!(o.duration_ms < 600, "{}", o.duration_ms);
    let warm = jail().prepare(&p).unwrap();
    let mut c = cmd(&["sleep", "60"]);
    c.wall_time_ms = Some(300);
    let t = Instant::now();
    let o = warm.start(&c).unwrap().wait().unwrap();
    assert_eq!(o.limit_hit, Some(LimitKind::WallTime));
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_prepared_jail_reports_errors_as_a_cold_one_does() {
    let warm = jail().prepare(&Policy::default()).unwrap();
    let e = warm
        .start(&cmd(&["no-such-program"]))
        .unwrap()
        .wait()
        .unwrap_err();
    assert!(
        matches!(e, JailError::NotFound(ref p) if p == "no-such-program"),
        "{e:?}"
    );
    // A policy the jail cannot set up fails at `wait`, with the set-up failure.
    let mut p = Policy::default();
    p.binds.push(warden_jail::Bind {
        source: "/no/such/source".into(),
        target: Some("/mnt/x".into()),
        writable: false,
    });
    match jail().prepare(&p) {
        Err(e) => assert!(matches!(e, JailError::Policy(_)), "{e:?}"),
        Ok(warm) => {
            let e = warm.start(&cmd(&["true"])).unwrap().wait().unwrap_err();
            assert!(matches!(e, JailError::Setup(_)), "{e:?}");
        }
    }
    // Runs that protect workspace paths (their read-only binds would be stale).
    let ws = tempfile::tempdir().unwrap();
    let p = Policy {
        protect: true,
        workspace: Some(ws.path().to_owned()),
        ..Policy::default()
    };
    assert!(matches!(jail().prepare(&p), Err(JailError::BadCommand(_))));
    // A command too long to hand to the init is refused as such, not lost.
    let warm = jail().prepare(&Policy::default()).unwrap();
    let e = warm
        .start(&cmd(&["echo", &"x".repeat(5 << 20)]))
        .unwrap()
        .wait()
        .unwrap_err();
    assert!(format!("{e:?}").contains("too long"), "{e:?}");
    // A NUL in the command is refused before anything runs.
    let warm = jail().prepare(&Policy::default()).unwrap();
    let e = warm
        .start(&cmd(&["echo", "a\0b"]))
        .unwrap()
        .wait()
        .unwrap_err();
    assert!(!matches!(e, JailError::NotFound(_)), "{e:?}");
}

#[test]
fn a_prepared_traced_jail_traces_its_command_from_the_first_syscall() {
    use warden_events::EventKind;
    let p = Policy {
        trace: true,
        ..Policy::default()
    };
    let warm = jail().prepare(&p).unwrap();
    // Long enough for the tracer to have taken the listener and the clock to have run.
    std::thread::sleep(Duration::from_millis(500));
    let c = cmd(&[
        "sh",
        "-c",
        "cat /etc/hostname >/dev/null; echo hi >/tmp/made; exec python3 -c 'import socket; \
         s = socket.socket(); s.settimeout(2); s.connect((\"192.0.2.77\", 9))' 2>/dev/null; true",
    ]);
    let o = warm.start(&c).unwrap().wait().unwrap();
    let e = &o.events;
    // The trace starts with the command, its clock with it.
    assert_eq!(e[0].kind, EventKind::SandboxStarted, "{e:?}");
    assert_eq!(e[0].data["argv"][0], "sh");
    assert!(e[0].t_ms <= 1, "{}", e[0].t_ms);
    let spawn = e
        .iter()
        .find(|e| e.kind == EventKind::ProcessSpawn)
        .unwrap();
    assert_eq!(spawn.data["argv"][0], "sh", "{e:?}");
    assert!(spawn.t_ms < 400, "{}", spawn.t_ms);
    let has = |kind: EventKind, key: &str, value: &str| {
        e.iter()
            .any(|x| x.kind == kind && x.data[key].as_str() == Some(value))
    };
    assert!(has(EventKind::FileOpen, "path", "/etc/hostname"), "{e:?}");
    assert!(has(EventKind::FileWrite, "path", "/tmp/made"), "{e:?}");
    // The capture network was up while the jail waited: the connect met its sink.
    assert!(has(EventKind::NetConnect, "address", "192.0.2.77"), "{e:?}");
    assert!(has(EventKind::NetSend, "captured", "sink"), "{e:?}");
    assert!(e.iter().any(|x| x.kind == EventKind::SandboxExited));
    // Cold and prepared traced runs of one command give the same kinds of events.
    let cold = jail().run(&p, &c.argv, b"").unwrap();
    let kinds = |es: &[warden_events::Event]| {
        let mut k: Vec<String> = es.iter().map(|e| format!("{:?}", e.kind)).collect();
        k.sort();
        k.dedup();
        k
    };
    assert_eq!(kinds(e), kinds(&cold.events));
}

#[test]
fn a_traced_command_given_at_once_waits_for_the_tracer() {
    // No pause: the command may come while the tracer is still taking the listener (it goes
    // to the init on the same socket, after the tracer's answer).
    use warden_events::EventKind;
    let p = Policy {
        trace: true,
        ..Policy::default()
    };
    for _ in 0..5 {
        let warm = jail().prepare(&p).unwrap();
        let o = warm
            .start(&cmd(&["cat", "/etc/hostname"]))
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(o.exit_code, Some(0), "{o:?}");
        assert_eq!(o.events[0].kind, EventKind::SandboxStarted);
        assert!(
            o.events
                .iter()
                .any(|e| e.kind == EventKind::FileOpen && e.data["path"] == "/etc/hostname"),
            "{:?}",
            o.events
        );
    }
    // Dropped unused, a prepared traced jail leaves no process behind.
    let warm = jail().prepare(&p).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let helper = warm.supervisor_pid().unwrap();
    drop(warm);
    assert!(!std::path::Path::new(&format!("/proc/{helper}")).exists());
}

#[test]
fn a_prepared_jail_dropped_unused_leaves_nothing_behind() {
    let marker = format!("warm-unused-{}", nonce());
    let p = Policy {
        hostname: marker.clone(),
        ..Policy::default()
    };
    let mut warm = jail().prepare(&p).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(warm.alive());
    let helper = warm.supervisor_pid().unwrap();
    drop(warm);
    assert!(
        !std::path::Path::new(&format!("/proc/{helper}")).exists()
            || std::fs::read_to_string(format!("/proc/{helper}/stat"))
                .is_ok_and(|s| s.contains(") Z ")),
        "the helper outlived its prepared jail"
    );
    // No process is left in a namespace with that host name.
    assert!(eventually(5, || host_processes_with(&marker).is_empty()));
}

/// A termination signal ends a waiting prepared jail as it ends a running one (its helper
/// does not sit waiting for a command that will never come).
#[test]
fn a_waiting_prepared_jail_ends_on_a_termination_signal() {
    let mut warm = jail().prepare(&Policy::default()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(warm.alive());
    let helper = warm.supervisor_pid().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(helper).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(
        eventually(5, || !warm.alive()),
        "the waiting helper ignored SIGTERM"
    );
}

/// What one command leaves behind is invisible to the next, each in its own prepared jail.
#[test]
fn nothing_left_by_one_prepared_command_reaches_the_next() {
    let p = Policy::default();
    let first = jail().prepare(&p).unwrap();
    let second = jail().prepare(&p).unwrap();
    let leave = "echo left > /tmp/left; export LEFT=1; (sleep 30 &) ; \
        ipcmk -M 4096 >/dev/null 2>&1; ipcmk -Q >/dev/null 2>&1; \
        echo x > /dev/shm/left 2>/dev/null; \
        python3 -c 'import ctypes,os,time; l=ctypes.CDLL(None); fd=l.inotify_init(); \
        l.inotify_add_watch(fd, b\"/tmp\", 0x100); os.fork() or time.sleep(30)' & \
        timeout 0.5 sh -c 'while :; do :; done'; ipcs; echo END";
    let o = first
        .start(&cmd(&["sh", "-c", leave]))
        .unwrap()
        .wait()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.contains("END"), "{o:?}");
    let spent = o.usage.cpu_time_ms;
    let look = "ls /tmp /dev/shm; echo \"LEFT=${LEFT:-none}\"; ps -e -o comm=; ipcs -m -q; \
        cat /proc/sys/fs/inotify/max_user_watches >/dev/null; \
        ls -l /proc/*/fd 2>/dev/null | grep -c inotify || true";
    let o = second
        .start(&cmd(&["sh", "-c", look]))
        .unwrap()
        .wait()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(!out.contains("left"), "a file crossed over: {out}");
    assert!(out.contains("LEFT=none"), "{out}");
    assert!(!out.contains("sleep"), "a process crossed over: {out}");
    assert!(!out.contains("python3"), "a process crossed over: {out}");
    assert!(!out.contains("0x"), "an IPC object crossed over: {out}");
    assert!(
        out.trim_end().ends_with('0'),
        "an inotify instance crossed over: {out}"
    );
    // The cgroup's counters start again: the first run's CPU time is not counted.
    if let (Some(first), Some(second)) = (spent, o.usage.cpu_time_ms) {
        assert!(
            first >= 300 && second < 200,
            "CPU {first} ms then {second} ms"
        );
    }
}

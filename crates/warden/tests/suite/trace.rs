//! `warden run --trace`: events from seccomp user notification, checked field by field, absent
//! when nothing happened, and with every deny rule still in force while tracing.

use super::common::*;

/// `warden run OPTIONS --trace FILE -- CMD...`; the run and its events.
fn traced(options: &[&str], cmd: &[&str]) -> (Run, Vec<serde_json::Value>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.jsonl");
    let mut args = vec!["run", "--trace", file.to_str().unwrap()];
    args.extend_from_slice(options);
    args.push("--");
    args.extend_from_slice(cmd);
    let r = warden(&args);
    let events = read_events(&file);
    (r, events)
}

fn trace(cmd: &str) -> (Run, Vec<serde_json::Value>) {
    traced(&[], &["sh", "-c", cmd])
}

fn find<'a>(
    events: &'a [serde_json::Value],
    kind: &str,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> Option<&'a serde_json::Value> {
    events
        .iter()
        .find(|e| e["kind"] == kind && pred(&e["data"]))
}

#[test]
pub fn processes_files_deletes_renames_and_connections_are_traced() {
    let cmd = "cat /etc/hostname >/dev/null; echo hi > f; mv f g; rm g; \
               python3 -c 'import socket\ntry: socket.create_connection((\"127.0.0.1\", 9), 1)\nexcept OSError: pass'";
    let (r, ev) = trace(cmd);
    assert_eq!(r.status, 0, "{r:?}");
    let cat = find(&ev, "process.spawn", |d| {
        d["argv"] == serde_json::json!(["cat", "/etc/hostname"])
    })
    .expect("cat spawn");
    assert_eq!(cat["data"]["path"], "/usr/bin/cat");
    assert!(cat["pid"].as_i64().unwrap() > 1 && cat["id"].as_u64().unwrap() > 0);
    let open = find(&ev, "file.open", |d| d["path"] == "/etc/hostname").expect("open");
    assert_eq!(open["data"]["access"], "read");
    assert!(open["t_ms"].is_u64());
    let write = find(&ev, "file.write", |d| d["path"] == "/workspace/f").expect("write");
    assert_eq!(write["data"]["create"], true);
    let mv = find(&ev, "file.rename", |d| d["from"] == "/workspace/f").expect("rename");
    assert_eq!(mv["data"]["to"], "/workspace/g");
    assert!(find(&ev, "file.delete", |d| d["path"] == "/workspace/g").is_some());
    let conn = find(&ev, "net.connect", |d| d["port"] == 9).expect("connect");
    assert_eq!(conn["data"]["address"], "127.0.0.1");
    assert_eq!(conn["data"]["family"], "inet");
    let last = ev.last().unwrap();
    assert_eq!(last["kind"], "sandbox.exited");
    assert_eq!(last["data"]["exit_code"], 0);
    let ids: Vec<u64> = ev.iter().map(|e| e["id"].as_u64().unwrap()).collect();
    assert!(
        ids.windows(2).all(|w| w[1] == w[0] + 1),
        "ids are sequential"
    );
}

#[test]
pub fn nothing_happening_means_no_such_event() {
    let (_r, ev) = trace("true");
    assert!(find(&ev, "net.connect", |_| true).is_none());
    assert!(find(&ev, "file.delete", |_| true).is_none());
    assert!(find(&ev, "file.rename", |_| true).is_none());
    assert!(
        find(&ev, "file.write", |d| d["path"]
            .as_str()
            .unwrap_or("")
            .starts_with("/workspace"))
        .is_none()
    );
    // Without --trace there are no events at all.
    let v = run_json(&[], &["true"]);
    assert!(v.get("events").is_none(), "{v}");
}

#[test]
pub fn limits_are_traced() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.jsonl");
    let r = warden(&[
        "run",
        "--timeout",
        "1",
        "--trace",
        file.to_str().unwrap(),
        "--",
        "sleep",
        "10",
    ]);
    assert_eq!(r.status, 137);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains(r#""kind":"sandbox.limit_hit""#) && text.contains(r#""limit":"wall_time""#),
        "{text}"
    );
}

#[test]
pub fn deny_rules_still_apply_while_tracing() {
    // Under tracing the denials go through the tracer (notify-then-deny): every attack program
    // of the battery must still be stopped exactly as without it.
    for (name, min_ok) in [
        ("namespaces", 9),
        ("setuid_create", 15),
        ("kernel", 31),
        ("sockets", 12),
        ("mounts", 13),
        ("tty", 8),
        ("ptrace", 6),
    ] {
        let ws = workspace_with(name);
        let args = [
            "run",
            "--trace",
            "/dev/null",
            "--workspace",
            ws.path().to_str().unwrap(),
            "--",
        ];
        let mut argv = args.to_vec();
        let prog = format!("./{name}");
        argv.push(&prog);
        assert_blocked(&warden(&argv), min_ok);
    }
}

#[test]
pub fn denied_attempts_are_evidence() {
    let ws = workspace_with("namespaces");
    let (r, ev) = traced(
        &["--workspace", ws.path().to_str().unwrap()],
        &["./namespaces"],
    );
    assert_blocked(&r, 9);
    let denied = |syscall: &str| find(&ev, "sandbox.denied", |d| d["syscall"] == syscall);
    let unshare = denied("unshare").expect("unshare denial recorded");
    assert_eq!(unshare["data"]["errno"], libc_eperm());
    assert_eq!(unshare["data"]["by"], "seccomp");
    assert!(unshare["pid"].as_i64().unwrap() > 1);
    assert_eq!(denied("clone3").expect("clone3")["data"]["errno"], 38);
    assert!(denied("setns").is_some() && denied("clone").is_some());
    // A plain fork is not a denial.
    let clones = ev
        .iter()
        .filter(|e| e["data"]["syscall"] == "clone")
        .count();
    assert!(clones >= 2, "both CLONE_NEW* attempts: {clones}");
}

fn libc_eperm() -> i64 {
    1
}

#[test]
pub fn process_exits_carry_their_status() {
    let (r, ev) = trace("sh -c 'exit 3'; exit 5");
    assert_eq!(r.status, 5);
    let inner = find(&ev, "process.exit", |d| d["code"] == 3).expect("the inner shell's exit");
    let outer = find(&ev, "process.exit", |d| d["code"] == 5).expect("the command's exit");
    assert_ne!(inner["pid"], outer["pid"]);
    assert!(
        ev.iter().all(|e| e["pid"] != 1),
        "the jail's own init is not traced"
    );
}

#[test]
pub fn the_run_frame_directories_modes_and_listening_sockets() {
    let script = "import os, socket\nos.mkdir('d', 0o750)\nos.chmod('d', 0o700)\n\
                  s = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen(1)";
    let (r, ev) = traced(&["--memory", "256M"], &["python3", "-c", script]);
    assert_eq!(r.status, 0, "{r:?}");
    let first = &ev[0];
    assert_eq!(first["kind"], "sandbox.started");
    assert_eq!(first["id"], 1);
    assert_eq!(first["data"]["argv"][0], "python3");
    assert_eq!(first["data"]["decoys"], false);
    assert_eq!(first["data"]["limits"]["memory_bytes"], 256 << 20);
    let mkdir = find(&ev, "file.write", |d| d["op"] == "mkdir").expect("mkdir");
    assert_eq!(mkdir["data"]["path"], "/workspace/d");
    assert_eq!(mkdir["data"]["mode"], "750");
    let chmod = find(&ev, "file.write", |d| d["op"] == "chmod").expect("chmod");
    assert_eq!(chmod["data"]["path"], "/workspace/d");
    assert_eq!(chmod["data"]["mode"], "700");
    let bind = find(&ev, "net.connect", |d| d["op"] == "bind").expect("bind");
    assert_eq!(bind["data"]["address"], "127.0.0.1");
    let listen = find(&ev, "net.connect", |d| d["op"] == "listen").expect("listen");
    assert_eq!(
        listen["data"]["address"], "127.0.0.1",
        "listen carries its bind's address"
    );
    assert!(find(&ev, "net.connect", |d| d["op"] == "connect").is_none());
    let last = ev.last().unwrap();
    assert_eq!(last["kind"], "sandbox.exited");
    assert!(last["data"]["peak_memory_bytes"].as_u64().unwrap() > 0);
    assert!(last["data"]["cpu_time_ms"].is_u64());
    assert!(last["data"]["duration_ms"].is_u64());
    assert_eq!(last["data"]["events_dropped"], 0);
}

/// Regression: the first line of `--trace -` was a bare `{"canaries": …}` object; every line is
/// now an event (kind, id), and the planted canaries are in `sandbox.started`.
#[test]
pub fn every_trace_line_is_an_event_and_the_canaries_are_in_the_first() {
    let r = warden(&["run", "--decoys", "--trace", "-", "--", "true"]);
    assert_eq!(r.status, 0, "{r:?}");
    let lines: Vec<serde_json::Value> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() > 2, "{r:?}");
    for (i, e) in lines.iter().enumerate() {
        assert!(
            e["kind"].is_string() && e["id"].as_u64().is_some(),
            "line {i}: {e}"
        );
    }
    assert_eq!(lines[0]["kind"], "sandbox.started");
    let canaries = lines[0]["data"]["canaries"].as_array().unwrap();
    assert!(
        canaries
            .iter()
            .any(|c| c["planted"] == "env:AWS_SECRET_ACCESS_KEY"),
        "{canaries:?}"
    );
}

/// Fileless execution (a program copied into `memfd_create` and run from its descriptor, by
/// `execveat(AT_EMPTY_PATH)` and by `execve("/proc/self/fd/N")`) is not blocked, and each is a
/// `process.spawn` marked `fileless` with the memory file's name.
#[test]
pub fn fileless_execution_is_recorded() {
    let ws = workspace_with("memfd_exec");
    let file = ws.path().join("events.jsonl");
    let r = warden(&[
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--trace",
        file.to_str().unwrap(),
        "--",
        "./memfd_exec",
    ]);
    assert_eq!(r.status, 0, "{r:?}");
    assert!(r.stdout.contains("execveat 0, execve 0"), "{r:?}");
    let ev = read_events(&file);
    let fileless: Vec<&serde_json::Value> = ev
        .iter()
        .filter(|e| e["kind"] == "process.spawn" && e["data"]["fileless"] == true)
        .collect();
    assert_eq!(fileless.len(), 2, "{fileless:?}");
    for e in &fileless {
        assert_eq!(e["data"]["memfd"], "warden-payload", "{e}");
        assert!(
            e["data"]["path"]
                .as_str()
                .unwrap()
                .starts_with("/memfd:warden-payload")
        );
    }
    let ordinary = find(&ev, "process.spawn", |d| d["argv"][0] == "./memfd_exec").unwrap();
    assert!(ordinary["data"].get("fileless").is_none(), "{ordinary}");
}

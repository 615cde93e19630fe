//! `warden run` as a user sees it: the acceptance commands, exit statuses, flags, policy files.

use super::common::*;

#[test]
pub fn id_is_the_unprivileged_uid_the_policy_names() {
    let r = warden(&["run", "--", "id", "-u"]);
    assert_eq!(r.stdout.trim(), "1000", "{r:?}");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.toml");
    std::fs::write(&p, "uid = 2000\ngid = 2000\n").unwrap();
    let r = warden(&["run", "--policy", p.to_str().unwrap(), "--", "id", "-u"]);
    assert_eq!(r.stdout.trim(), "2000", "{r:?}");
}

/// Issue #35: the jail's pid 1 is an ordinary `init`; the host's command line (its `--env`
/// values with it) is not readable from inside.
#[test]
pub fn pid_one_shows_no_host_command_line() {
    let r = warden(&[
        "run",
        "--env",
        "SECRET_THING=hunter2-q7z",
        "--",
        "sh",
        "-c",
        "od -An -c /proc/1/cmdline | tr -d ' \\n'; echo; cat /proc/1/comm",
    ]);
    assert_eq!(r.status, 0, "{r:?}");
    let mut lines = r.stdout.lines();
    // Exactly the name, no padding that would tell the host command line's length.
    assert_eq!(lines.next(), Some("/sbin/init\\0"), "{r:?}");
    assert_eq!(lines.next(), Some("init"), "{r:?}");
    assert!(
        !r.stdout.contains("hunter2") && !r.stdout.contains("warden"),
        "{r:?}"
    );
}

#[test]
pub fn shadow_and_system_writes_fail() {
    let r = warden(&["run", "--", "cat", "/etc/shadow"]);
    assert_ne!(r.status, 0);
    let r = warden(&["run", "--", "sh", "-c", "echo x > /usr/x"]);
    assert_ne!(r.status, 0);
    assert!(r.stderr.contains("Read-only file system"), "{r:?}");
}

#[test]
pub fn root_and_work_are_not_there() {
    let r = warden(&["run", "--", "ls", "/root", "/work"]);
    assert_ne!(r.status, 0);
    assert!(r.stdout.is_empty(), "{r:?}");
    assert!(r.stderr.contains("No such file"), "{r:?}");
}

#[test]
pub fn exit_status_passes_through() {
    assert_eq!(warden(&["run", "--", "sh", "-c", "exit 42"]).status, 42);
    assert_eq!(
        warden(&["run", "--", "sh", "-c", "kill -TERM $$"]).status,
        128 + 15
    );
    let r = warden(&["run", "--", "no-such-program-here"]);
    assert_eq!(r.status, 127, "{r:?}");
    assert!(r.stderr.contains("command not found"), "{r:?}");
    let r = warden(&["run", "--", "/etc/hostname"]);
    assert_eq!(r.status, 126, "{r:?}");
}

#[test]
pub fn stdout_stderr_and_stdin_stream_through() {
    use std::io::Write;
    let mut child = std::process::Command::new(warden_bin())
        .args(["run", "--", "sh", "-c", "cat; echo err >&2"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello through stdin\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello through stdin\n"
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
}

#[test]
pub fn env_is_only_what_the_policy_gives() {
    let r = warden(&[
        "run",
        "--env",
        "FOO=bar baz",
        "--",
        "sh",
        "-c",
        "echo \"$FOO\"; env | wc -l",
    ]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "bar baz");
    // PATH HOME LANG TMPDIR USER FOO PWD (set by sh)
    assert!(lines[1].trim().parse::<u32>().unwrap() <= 8, "{r:?}");
    let r = warden(&["run", "--env", "NOEQUALS", "--", "true"]);
    assert_eq!(r.status, 125);
}

#[test]
pub fn binds_and_tmpfs_from_flags() {
    let ro = tempfile::tempdir().unwrap();
    std::fs::write(ro.path().join("data"), "read me").unwrap();
    let rw = tempfile::tempdir().unwrap();
    let ro_spec = format!("{}:/opt/ro", ro.path().display());
    let rw_spec = format!("{}:/opt/rw", rw.path().display());
    let script = "cat /opt/ro/data; echo; echo no > /opt/ro/x || echo ro-refused; \
                  echo out > /opt/rw/out && echo rw-ok; echo t > /scratch/t && echo tmpfs-ok";
    let r = warden(&[
        "run",
        "--ro-bind",
        &ro_spec,
        "--rw-bind",
        &rw_spec,
        "--tmpfs",
        "/scratch:1M",
        "--",
        "sh",
        "-c",
        script,
    ]);
    for want in ["read me", "ro-refused", "rw-ok", "tmpfs-ok"] {
        assert!(r.stdout.contains(want), "{want}: {r:?}");
    }
    assert_eq!(
        std::fs::read_to_string(rw.path().join("out")).unwrap(),
        "out\n"
    );
    // Files written through an id-mapped bind belong to the directory's owner on the host.
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(rw.path().join("out")).unwrap();
    assert_eq!(meta.uid(), std::fs::metadata(rw.path()).unwrap().uid());
}

#[test]
pub fn binds_over_the_jails_own_mounts_are_refused() {
    let r = warden(&["run", "--ro-bind", "/usr:/proc", "--", "true"]);
    assert_eq!(r.status, 125);
    assert!(r.stderr.contains("collides"), "{r:?}");
}

#[test]
pub fn workspace_is_mounted_and_kept() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("in.txt"), "input").unwrap();
    let r = warden(&[
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "pwd; cat in.txt; echo; echo output > out.txt",
    ]);
    assert_eq!(r.stdout, "/workspace\ninput\n", "{r:?}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out.txt")).unwrap(),
        "output\n"
    );
}

#[test]
pub fn default_workspace_is_a_fresh_bounded_tmpfs() {
    let r = warden(&[
        "run",
        "--",
        "sh",
        "-c",
        "ls -A; echo hi > f; ls; stat -f -c %T .",
    ]);
    assert_eq!(r.stdout, "f\ntmpfs\n", "{r:?}");
    // Nothing carries over to the next run.
    let r = warden(&["run", "--", "ls", "-A"]);
    assert_eq!(r.stdout, "", "{r:?}");
    // Filling it ends in ENOSPC at --tmp-size, not on the host's disk.
    let r = warden(&[
        "run",
        "--tmp-size",
        "4M",
        "--",
        "sh",
        "-c",
        "dd if=/dev/zero of=fill bs=1M count=64 2>&1; echo rc=$?",
    ]);
    assert!(
        r.stdout.contains("No space left on device") && r.stdout.contains("rc=1"),
        "{r:?}"
    );
}

#[test]
pub fn json_outcome_has_the_documented_fields() {
    let v = run_json(&[], &["sh", "-c", "echo out; echo err >&2; exit 3"]);
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["signal"], serde_json::Value::Null);
    assert_eq!(v["stdout"], "out\n");
    assert_eq!(v["stderr"], "err\n");
    assert_eq!(v["stdout_truncated"], false);
    assert_eq!(v["limit_hit"], serde_json::Value::Null);
    assert_eq!(v["enforcement"]["uid_inside"], 1000);
    assert!(v["duration_ms"].is_u64());
}

#[test]
pub fn bad_policy_files_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.toml");
    std::fs::write(&p, "[limits]\nmemroy = 1\n").unwrap();
    let r = warden(&["run", "--policy", p.to_str().unwrap(), "--", "true"]);
    assert_eq!(r.status, 125);
    assert!(r.stderr.contains("memroy"), "{r:?}");
}

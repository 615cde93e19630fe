//! Container blockers, simulated here with `unshare`, bind mounts and a seccomp filter (no
//! Docker): each one either is worked around (a masked `/proc`) or stops the run with exit
//! 125 and the setting that fixes it named; under `detonate` it is `INCONCLUSIVE` (exit 3).

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use super::common::*;

fn containers() -> std::path::PathBuf {
    fixtures().join("containers")
}

/// `no_userns ARGS…`: ARGS under a seccomp filter like Docker's default profile.
fn without_user_namespaces(args: &[&str]) -> Output {
    Command::new(compiled_from(&containers(), "no_userns"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Run `script` (sh) as root of a new user namespace that maps ids 0–199999 to themselves and
/// has a mount namespace of its own: a container with its own user namespace. With `masked`,
/// the runtime's masks go on `/proc` first, outside that user namespace (so they are locked
/// inside it, as a runtime's are).
fn in_a_user_namespace(script: &str, masked: bool) -> Output {
    // The script runs once the maps are written (an exec after that has root's capabilities).
    let inner = r#"read _ && exec sh -c "$0""#;
    let outer = if masked {
        r#". "$0" && exec unshare --user --mount -- sh -c "$1" "$2""#
    } else {
        r#"exec unshare --user --mount -- sh -c "$1" "$2""#
    };
    let mut child = Command::new("unshare")
        .args(["--mount", "--", "sh", "-c", outer])
        .arg(containers().join("masks.sh"))
        .args([inner, script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // No fork on the way (every step execs), so the child's pid is the namespace's owner's.
    let proc_dir = format!("/proc/{}", child.id());
    let mut mapped = false;
    for _ in 0..100 {
        let ns = std::fs::read_link(format!("{proc_dir}/ns/user")).ok();
        if ns != std::fs::read_link("/proc/self/ns/user").ok() {
            std::fs::write(format!("{proc_dir}/uid_map"), "0 0 200000").unwrap();
            std::fs::write(format!("{proc_dir}/gid_map"), "0 0 200000").unwrap();
            mapped = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(mapped, "the user namespace never appeared");
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn a_seccomp_profile_that_refuses_user_namespaces_is_named() {
    let out = without_user_namespaces(&[the_binary(), "run", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--security-opt seccomp=unconfined"), "{err}");
    assert!(err.contains("seccompProfile.type: Unconfined"), "{err}");
    // The detonation did not happen: INCONCLUSIVE at the sandbox, with the same setting.
    let server = fixtures().join("mcp/servers/benign_echo.py");
    let command = format!("python3 {}", server.display());
    let out = without_user_namespaces(&[
        the_binary(),
        "detonate",
        "--output",
        "json",
        "--mcp-command",
        &command,
    ]);
    assert_eq!(out.status.code(), Some(3));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["verdict"], "INCONCLUSIVE");
    assert_eq!(r["why"]["stage"], "sandbox");
    let reason = r["why"]["reason"].as_str().unwrap();
    assert!(reason.contains("seccomp=unconfined"), "{reason}");
}

#[test]
fn user_namespaces_switched_off_are_named() {
    let script = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces && exec {} run -- true",
        the_binary()
    );
    let out = in_a_user_namespace(&script, false);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sysctl -w user.max_user_namespaces="), "{err}");
}

#[test]
fn a_masked_proc_gets_a_procfs_of_the_jails_own() {
    let bare = run_json(&[], &["true"]);
    assert_eq!(bare["enforcement"]["proc"], "fresh", "{bare}");
    let out = Command::new(fixtures().join("containers/masked-proc.sh"))
        .args([the_binary(), "run", "--json", "--", "sh", "-c"])
        .arg("ls -d /proc/[0-9]* | wc -l; grep -c ' /proc/sys ' /proc/self/mountinfo")
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(r["enforcement"]["proc"], "handed", "{r}");
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("weaker"),
        "nothing is weaker: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn without_cap_sys_admin_the_containers_proc_is_refused_unless_allowed_and_said_to_be_weaker() {
    let scratch = tempfile::tempdir_in("/var/tmp").unwrap();
    // In a container with its own user namespace, the runtime's masks are locked: neither the
    // jail nor Warden itself may mount a procfs.
    // A run, then a detonation with an install phase (two sandboxes in one process).
    let script = format!(
        "{w} run -- true 2> {out}/refused.txt; echo $? > {out}/refused.code; \
         {w} run --allow-host-proc --json -- sh -c 'echo hi > /proc/sys/kernel/core_pattern' \
           > {out}/run.json; \
         {w} detonate --allow-host-proc --output json {hook} > {out}/detonate.json",
        w = the_binary(),
        out = scratch.path().display(),
        hook = fixtures().join("mcp/npm-hook").display(),
    );
    let out = in_a_user_namespace(&script, true);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("systempaths=unconfined"), "{err}");
    assert_eq!(
        err.matches("weaker sandbox").count(),
        2,
        "once per warden process: {err}"
    );
    let read = |name: &str| -> Value {
        let text = std::fs::read_to_string(scratch.path().join(name)).unwrap();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}\n{err}"))
    };
    // Review finding: the weaker view was taken silently by default. Now it must be asked for.
    let refused = std::fs::read_to_string(scratch.path().join("refused.txt")).unwrap();
    let code = std::fs::read_to_string(scratch.path().join("refused.code")).unwrap();
    assert_eq!(code.trim(), "125", "{refused}");
    assert!(refused.contains("--allow-host-proc"), "{refused}");
    assert!(refused.contains("--cap-add SYS_ADMIN"), "{refused}");
    let r = read("run.json");
    assert_eq!(r["enforcement"]["proc"], "host_bind", "{r}");
    assert_ne!(r["exit_code"], 0, "/proc/sys stays read-only: {err}");
    // The detonation still happened and still judges: the hook reads the key and plants
    // persistence, as on the bare machine.
    let d = read("detonate.json");
    assert_eq!(d["verdict"], "HIGH", "{}", d["why"]);
    let rules: Vec<&str> = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["rule"].as_str())
        .collect();
    assert!(rules.contains(&"install-writes-outside"), "{rules:?}");
    assert!(rules.contains(&"sensitive-file-read"), "{rules:?}");
}

/// `no_pivot ARGS…`: ARGS under a seccomp filter that refuses `pivot_root`, as Docker's and
/// containerd's default profiles do even with `CAP_SYS_ADMIN`.
fn without_pivot_root(args: &[&str]) -> Output {
    Command::new(compiled_from(&containers(), "no_pivot"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_runtime_refusing_pivot_root_gets_a_moved_root_and_says_so() {
    let out = without_pivot_root(&[
        the_binary(),
        "run",
        "--json",
        "--",
        "sh",
        "-c",
        "ls / && cat /proc/self/mountinfo | wc -l",
    ]);
    let o: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!("{}", String::from_utf8_lossy(&out.stderr));
    });
    assert_eq!(o["exit_code"], 0, "{o}");
    assert_eq!(o["enforcement"]["root"], "move_chroot", "{o}");
    let listing = o["stdout"].as_str().unwrap_or_default();
    assert!(listing.contains("workspace"), "{listing}");
    // The host's own top level (its /var and /root) is not what the jail sees.
    assert!(std::path::Path::new("/var").is_dir() && std::path::Path::new("/root").is_dir());
    assert!(
        !listing.lines().any(|l| l == "var" || l == "root"),
        "{listing}"
    );
    // The control: without the filter the root is pivoted.
    let plain = warden(&["run", "--json", "--", "true"]);
    let p: Value = serde_json::from_str(&plain.stdout).unwrap();
    assert_eq!(p["enforcement"]["root"], "pivot_root", "{p}");
}

#[test]
fn a_moved_root_holds_against_the_mount_and_chroot_battery() {
    // The mount battery (pivot_root, chroot, every mount call) inside a jail whose root was
    // moved rather than pivoted: the old root stays beneath, out of reach.
    let ws = workspace_with("mounts");
    let out = without_pivot_root(&[
        the_binary(),
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--",
        "./mounts",
    ]);
    let r = Run {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_blocked(&r, 13);
    // Nothing of the host outside the view: its secrets are not readable by any path.
    let probe = without_pivot_root(&[
        the_binary(),
        "run",
        "--",
        "sh",
        "-c",
        "cat /etc/shadow /root/.bashrc /proc/1/root/etc/shadow 2>&1; ls /.. /../.. 2>&1",
    ]);
    let text = String::from_utf8_lossy(&probe.stdout);
    assert!(!text.contains("root:"), "{text}");
    assert!(
        !text.lines().any(|l| l == "var" || l == "root"),
        "the host's top level shows: {text}"
    );
}

#[test]
fn environment_reads_are_seen_under_a_runtime_profile_that_refuses_unknown_syscalls() {
    // A runtime's allowlist refuses syscall numbers no kernel has, and its EPERM outranks the
    // jail's notification: the interposers' announcement must use a call such profiles allow.
    let out = without_pivot_root(&[
        the_binary(),
        "run",
        "--decoys",
        "--trace",
        "-",
        "--",
        "/usr/bin/python3",
        "-c",
        "import os; os.environ.get('GITHUB_TOKEN')",
    ]);
    let trace = String::from_utf8_lossy(&out.stderr);
    let read = trace
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|e| e["kind"] == "env.read" && e["data"]["name"] == "GITHUB_TOKEN");
    assert!(read, "no env.read of GITHUB_TOKEN: {trace}");
    // The control: the filter does refuse an unknown syscall number.
    let probe = without_pivot_root(&[
        "/usr/bin/python3",
        "-c",
        "import ctypes, sys; r = ctypes.CDLL(None, use_errno=True).syscall(0x574400); \
         sys.exit(0 if r == -1 and ctypes.get_errno() == 1 else 3)",
    ]);
    assert_eq!(probe.status.code(), Some(0), "{probe:?}");
}

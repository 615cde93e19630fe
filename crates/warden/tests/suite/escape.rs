//! The escape battery: real attack programs from `fixtures/attacks/`, run inside the jail, each
//! with an oracle that can fail (a specific errno or signal, a host-side canary, a host process
//! that must survive or must be gone). Controls run some of the same programs outside the jail
//! to show that the oracle does see an escape when there is one.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use super::common::*;

#[test]
pub fn host_secrets_are_not_visible() {
    let n = nonce();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let canary_home = format!("{home}/.warden-canary-{n}");
    std::fs::write(&canary_home, format!("secret-{n}")).unwrap();
    let r = attack("read_secrets.sh", &[&canary_home, "/work", "/root"]);
    std::fs::remove_file(&canary_home).unwrap();
    assert!(!r.stdout.contains(&format!("secret-{n}")));
    assert_blocked(&r, 7);
}

#[test]
pub fn control_read_secrets_oracle_sees_a_readable_canary() {
    let n = nonce();
    let dir = tempfile::tempdir().unwrap();
    let canary = dir.path().join("canary");
    std::fs::write(&canary, format!("secret-{n}")).unwrap();
    let out = Command::new("sh")
        .arg(attacks().join("read_secrets.sh"))
        .arg(&canary)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("ESCAPE read {}", canary.display())),
        "{text}"
    );
    assert!(!out.status.success());
}

#[test]
pub fn writes_outside_the_workspace_fail() {
    let r = attack("write_outside.sh", &[]);
    assert_blocked(&r, 11);
    for p in ["/usr/warden-x", "/usr/bin/warden-x", "/warden-x"] {
        assert!(
            !std::path::Path::new(p).exists(),
            "{p} appeared on the host"
        );
    }
}

#[test]
pub fn proc_does_not_reach_the_host_or_the_runtime() {
    let warden_before = std::fs::read(the_binary()).unwrap();
    let me = std::process::id().to_string();
    let r = attack("proc", &[&me]);
    assert_blocked(&r, 16);
    assert_eq!(
        std::fs::read(the_binary()).unwrap(),
        warden_before,
        "the warden binary changed"
    );
    let core = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap();
    assert!(!core.contains("pwned"));
}

#[test]
pub fn ptrace_and_cross_process_memory_are_denied() {
    assert_blocked(&attack("ptrace", &[]), 6);
}

#[test]
pub fn mounts_and_the_new_mount_api_are_denied() {
    assert_blocked(&attack("mounts", &[]), 13);
}

#[test]
pub fn new_namespaces_and_setns_are_denied() {
    assert_blocked(&attack("namespaces", &[]), 9);
}

#[test]
pub fn control_namespace_oracle_sees_unshare_on_the_host() {
    let out = Command::new(compiled("namespaces")).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ESCAPE unshare user"), "{text}");
}

#[test]
pub fn kernel_attack_surface_is_closed() {
    assert_blocked(&attack("kernel", &[]), 31);
}

#[test]
pub fn terminal_injection_is_denied() {
    assert_blocked(&attack("tty", &[]), 8);
}

#[test]
pub fn only_unix_and_ip_sockets_exist() {
    assert_blocked(&attack("sockets", &[]), 12);
}

#[test]
pub fn host_loopback_and_abstract_sockets_are_unreachable() {
    use std::os::linux::net::SocketAddrExt;
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port().to_string();
    let name = format!("warden-test-{}", nonce());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let unix = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    unix.set_nonblocking(true).unwrap();
    let r = attack("host_network.py", &[&port, &name]);
    assert_blocked(&r, 3);
    assert!(
        tcp.accept().is_err(),
        "a connection reached the host listener"
    );
    assert!(
        unix.accept().is_err(),
        "a connection reached the host abstract socket"
    );
}

#[test]
pub fn rename_race_cannot_leave_the_workspace() {
    let parent = tempfile::tempdir().unwrap();
    let canary = format!("warden-canary-{}", nonce());
    std::fs::write(
        parent.path().join(&canary),
        "host file next to the workspace",
    )
    .unwrap();
    let ws = parent.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::copy(compiled("rename_race"), ws.join("rename_race")).unwrap();
    let r = warden(&[
        "run",
        "--workspace",
        ws.to_str().unwrap(),
        "--",
        "./rename_race",
        &canary,
    ]);
    assert_blocked(&r, 1);
}

#[test]
pub fn symlinks_planted_in_the_workspace_resolve_inside_the_jail() {
    let ws = tempfile::tempdir().unwrap();
    let canary = ws.path().with_extension("canary");
    std::fs::write(&canary, "host secret").unwrap();
    let script = format!(
        "ln -s {c} link && ln -s /etc/hostname h && cat link; echo rc=$?; cat h",
        c = canary.display()
    );
    let r = warden(&[
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    std::fs::remove_file(&canary).unwrap();
    assert!(r.stdout.contains("rc=1"), "{r:?}");
    assert!(!r.stdout.contains("host secret"), "{r:?}");
    assert!(
        r.stdout.contains("warden"),
        "/etc/hostname is the jail's: {r:?}"
    );
}

#[test]
pub fn setuid_binaries_grant_nothing() {
    // A setuid-root binary owned by host root, bound read-only, and one in the workspace.
    let dir = tempfile::tempdir().unwrap();
    let suid = dir.path().join("whoami");
    std::fs::copy(compiled("setuid"), &suid).unwrap();
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let bind = format!("{}:/opt/suid", dir.path().display());
    let r = warden(&["run", "--ro-bind", &bind, "--", "/opt/suid/whoami"]);
    assert_eq!(r.stdout.trim(), "euid=1000 uid=1000", "{r:?}");
    let ws = workspace_with("setuid");
    std::fs::set_permissions(
        ws.path().join("setuid"),
        std::fs::Permissions::from_mode(0o4755),
    )
    .unwrap();
    let r = warden(&[
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--",
        "./setuid",
    ]);
    assert_eq!(r.stdout.trim(), "euid=1000 uid=1000", "{r:?}");
    // The system's own setuid programs do not work either.
    let r = warden(&[
        "run",
        "--",
        "sh",
        "-c",
        "su -c id root </dev/null; echo rc=$?",
    ]);
    assert!(!r.stdout.contains("uid=0"), "{r:?}");
}

#[test]
pub fn inherited_descriptors_are_closed() {
    // Start warden with extra descriptors open (5 and 7, to a host file).
    let ws = workspace_with("fds");
    let script = format!(
        "exec 5</etc/hostname 7>>{tmp}/leak; exec {w} run --workspace {ws} -- ./fds",
        tmp = ws.path().display(),
        w = warden_bin(),
        ws = ws.path().display()
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    let r = Run {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    };
    assert_blocked(&r, 1);
}

#[test]
pub fn control_fds_oracle_sees_an_inherited_descriptor() {
    let script = format!("exec 5</etc/hostname; {}", compiled("fds").display());
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("inherited fd 5"));
}

#[test]
pub fn host_processes_cannot_be_signalled() {
    let mut victim = Command::new("sleep")
        .arg(format!("1002.{}", nonce()))
        .spawn()
        .unwrap();
    let pid = victim.id().to_string();
    let r = attack("signals", &[&pid]);
    assert_blocked(&r, 3);
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the host process died"
    );
    victim.kill().unwrap();
    victim.wait().unwrap();
}

#[test]
pub fn background_grandchild_does_not_outlive_the_timeout() {
    let n = nonce();
    let script =
        format!("(setsid sleep 1001.{n} &) ; (setsid sh -c 'sleep 1003.{n}' &); sleep 100");
    let start = std::time::Instant::now();
    let r = warden(&["run", "--timeout", "1", "--", "sh", "-c", &script]);
    let took = start.elapsed();
    assert_eq!(r.status, 137, "{r:?}");
    assert!(took.as_secs_f64() < 10.0, "took {took:?}");
    assert!(
        host_processes_with(&n).is_empty(),
        "a sandboxed process survived"
    );
}

#[test]
pub fn the_sandbox_dies_with_warden() {
    let n = nonce();
    let mut w = Command::new(warden_bin())
        .args(["run", "--", "sh", "-c", &format!("sleep 1004.{n}; :")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let needle = format!("1004.{n}");
    // Warden, the command and the jail's init above it.
    assert!(eventually(10, || host_processes_and_inits_with(&needle)
        .len()
        >= 3));
    let tree = host_processes_and_inits_with(&needle);
    w.kill().unwrap(); // SIGKILL: no chance to clean up.
    w.wait().unwrap();
    let alive = || {
        tree.iter()
            .copied()
            .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
            .collect::<Vec<i32>>()
    };
    assert!(
        eventually(5, || alive().is_empty()),
        "the sandboxed process outlived warden: {:?}",
        alive()
    );
}

/// Regression: the parent-death signal was set before the init and the command changed their
/// ids, and the kernel clears it on every credential change, so a SIGKILLed `warden run` left
/// its init and command running. Checks the init as well as the command, every time.
#[test]
pub fn regression_parent_death_signal_survives_the_id_change() {
    for _ in 0..3 {
        let n = nonce();
        let mut w = Command::new(warden_bin())
            .args(["run", "--", "sleep", &format!("1006.{n}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let needle = format!("1006.{n}");
        // Both the init (the command's parent, named `init`) and the command must be up.
        assert!(eventually(10, || host_processes_and_inits_with(&needle)
            .len()
            >= 3));
        let tree = host_processes_and_inits_with(&needle);
        w.kill().unwrap();
        w.wait().unwrap();
        let alive = || {
            tree.iter()
                .copied()
                .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
                .collect::<Vec<i32>>()
        };
        assert!(
            eventually(5, || alive().is_empty()),
            "left behind: {:?}",
            alive()
        );
    }
}

#[test]
pub fn the_sandbox_dies_with_the_library_caller_lifeline() {
    let n = nonce();
    let jail = warden_jail::Jail::with_helper(warden_bin());
    let argv = vec!["sleep".to_string(), format!("1005.{n}")];
    let running = jail.spawn(&warden_jail::Policy::default(), &argv).unwrap();
    assert!(eventually(10, || !host_processes_with(&format!(
        "1005.{n}"
    ))
    .is_empty()));
    drop(running);
    assert!(host_processes_with(&format!("1005.{n}")).is_empty());
}

#[test]
pub fn probe_from_the_inside() {
    let ws = workspace_with("probe.sh");
    let r = warden(&[
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--",
        "sh",
        "./probe.sh",
    ]);
    let line = |key: &str| {
        r.stdout
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no {key} in {r:?}"))
            .to_owned()
    };
    assert!(line("NoNewPrivs:").ends_with("\t1"), "{r:?}");
    assert!(line("Seccomp:").ends_with("\t2"), "{r:?}");
    for cap in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        assert!(line(cap).ends_with("0000000000000000"), "{cap} {r:?}");
    }
    assert_eq!(line("Uid:"), "Uid:\t1000\t1000\t1000\t1000");
    // The uid maps to a host uid that is neither root nor the invoking user.
    let map = line("uid_map:");
    let host_uid: u32 = map
        .split(';')
        .find_map(|m| {
            let f: Vec<&str> = m.split_whitespace().collect();
            (f.first() == Some(&"1000")).then(|| f[1].parse().unwrap())
        })
        .expect("1000 is mapped");
    assert_ne!(host_uid, 0);
    // SAFETY-free check of our own uid via /proc.
    let me = std::fs::read_to_string("/proc/self/status").unwrap();
    let my_uid = me
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_owned();
    assert_ne!(host_uid.to_string(), my_uid);
    assert_eq!(line("interfaces:").trim(), "interfaces: lo");
    assert_eq!(line("hostname:"), "hostname: warden");
    assert_eq!(line("cwd:"), "cwd: /workspace");
    assert!(line("tty:").contains("not a tty"), "{r:?}");
    assert!(
        line("environ-of-init:").contains("Permission denied"),
        "{r:?}"
    );
    let env = line("env:");
    assert!(!env.contains("CARGO"), "the host environment leaked: {env}");
}

#[test]
pub fn landlock_is_an_independent_layer() {
    // /proc is mounted writable for a process's own files (like /proc/self/comm); Landlock
    // allows only reading there. With Landlock off the write works, with it on it does not.
    let dir = tempfile::tempdir().unwrap();
    let off = dir.path().join("off.toml");
    std::fs::write(&off, "landlock = 'off'\n").unwrap();
    let on = dir.path().join("on.toml");
    std::fs::write(&on, "landlock = 'required'\n").unwrap();
    let cmd = "echo renamed > /proc/self/comm && echo wrote";
    let r = warden(&[
        "run",
        "--policy",
        off.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        cmd,
    ]);
    assert!(r.stdout.contains("wrote"), "{r:?}");
    let r = warden(&[
        "run",
        "--policy",
        on.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        cmd,
    ]);
    assert!(
        !r.stdout.contains("wrote") && r.stderr.contains("Permission denied"),
        "{r:?}"
    );
    let v = run_json(&["--policy", on.to_str().unwrap()], &["true"]);
    assert_eq!(v["enforcement"]["landlock"]["status"], "fully_enforced");
    assert_eq!(v["enforcement"]["landlock"]["abi"], 7);
    let _ = std::io::stdout().flush();
}

/// A symlink left in a workspace by an earlier run must not redirect a later bind: the source
/// `ws/cache -> /etc` would otherwise bind host /etc read-write, id-mapped to the command.
#[test]
pub fn symlinked_bind_sources_are_refused() {
    let ws = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/etc", ws.path().join("cache")).unwrap();
    let src = format!("{}:/cache", ws.path().join("cache").display());
    for flag in ["--rw-bind", "--ro-bind"] {
        let r = warden(&[
            "run",
            flag,
            &src,
            "--",
            "sh",
            "-c",
            "ls /cache/shadow && echo reached",
        ]);
        assert_eq!(r.status, 125, "{r:?}");
        assert!(r.stderr.contains("symlink"), "{r:?}");
        assert!(!r.stdout.contains("reached"), "{r:?}");
    }
    // A workspace given through a symlink is refused the same way.
    let link = ws.path().with_extension("link");
    std::os::unix::fs::symlink(ws.path(), &link).unwrap();
    let r = warden(&["run", "--workspace", link.to_str().unwrap(), "--", "true"]);
    std::fs::remove_file(&link).unwrap();
    assert_eq!(r.status, 125, "{r:?}");
}

/// Mount points beneath a host workspace are created without following symlinks planted there:
/// `ws/link -> <host dir>` must not make `--tmpfs /workspace/link/sub` create or mount anything
/// in the host directory.
#[test]
pub fn symlinked_mount_targets_in_the_workspace_are_refused() {
    let ws = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), ws.path().join("link")).unwrap();
    let r = warden(&[
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--tmpfs",
        "/workspace/link/sub",
        "--",
        "true",
    ]);
    assert_eq!(r.status, 125, "{r:?}");
    assert!(r.stderr.contains("symlink"), "{r:?}");
    assert!(
        !elsewhere.path().join("sub").exists(),
        "created through the link"
    );
    // The same target as a real directory works, created as the command's user.
    std::fs::remove_file(ws.path().join("link")).unwrap();
    let r = warden(&[
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--tmpfs",
        "/workspace/link/sub",
        "--",
        "sh",
        "-c",
        "touch link/sub/f && stat -c %U link",
    ]);
    assert_eq!(r.stdout.trim(), "sandbox", "{r:?}");
}

/// Setuid and setgid bits cannot be set by any syscall, so an id-mapped workspace (which makes
/// the command the owner of the owner's files on the host's disk) never gains a setuid program.
#[test]
pub fn setuid_bits_cannot_be_planted_in_the_workspace() {
    let ws = workspace_with("setuid_create");
    let r = warden(&[
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--",
        "./setuid_create",
    ]);
    assert_blocked(&r, 15);
    use std::os::unix::fs::PermissionsExt;
    for e in std::fs::read_dir(ws.path()).unwrap().flatten() {
        let mode = e.metadata().unwrap().permissions().mode();
        assert_eq!(mode & 0o6000, 0, "{:?} has mode {mode:o}", e.path());
    }
}

/// A writable workspace that is a repository: git's configuration and hooks, agents' and
/// editors' settings, direnv and dotenv files cannot be planted or changed (they would run
/// outside the sandbox later), `.git` cannot be swapped; work and commits go on. Checked from
/// the host after the run: nothing changed there, and the placeholders are gone.
#[test]
pub fn code_that_runs_later_cannot_be_planted_in_the_workspace() {
    let ws = workspace_with("plant_config.sh");
    let root = ws.path();
    let git = |args: &[&str]| {
        let st = std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["config", "user.email", "owner@example.test"]);
    std::fs::create_dir_all(root.join(".git/info")).unwrap();
    std::fs::create_dir_all(root.join(".vscode")).unwrap();
    std::fs::write(root.join(".vscode/settings.json"), "{}").unwrap();
    std::fs::write(root.join(".env"), "A=1\n").unwrap();
    std::fs::write(root.join(".env.local"), "B=2\n").unwrap();
    // The jail's user writes the workspace (its owner, through the id mapping) and git runs
    // inside as that user: let it own the repository, as a real checkout would be owned.
    let config_before = std::fs::read(root.join(".git/config")).unwrap();
    let r = warden(&[
        "run",
        "--workspace",
        root.to_str().unwrap(),
        "--env",
        "GIT_CONFIG_NOSYSTEM=1",
        "--",
        "sh",
        "./plant_config.sh",
    ]);
    assert_blocked(&r, 14);
    assert_eq!(
        std::fs::read(root.join(".git/config")).unwrap(),
        config_before
    );
    assert!(!root.join(".git/hooks/pre-commit").exists());
    assert!(!root.join(".git/hooks/post-checkout").exists());
    assert!(!root.join(".git/info/attributes").exists());
    assert!(!root.join(".git-away").exists() && root.join(".git/HEAD").exists());
    assert!(!root.join(".vscode/tasks.json").exists());
    assert_eq!(std::fs::read_to_string(root.join(".env")).unwrap(), "A=1\n");
    assert_eq!(
        std::fs::read_to_string(root.join(".env.local")).unwrap(),
        "B=2\n"
    );
    for placeholder in [
        ".mcp.json",
        ".claude",
        ".cursor",
        ".idea",
        ".envrc",
        "x.json",
    ] {
        assert!(!root.join(placeholder).exists(), "{placeholder} is left");
    }
    let log = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["log", "--oneline"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&log.stdout).contains("work"),
        "the commit landed"
    );
    // --allow-protected opens one path, and only that one.
    let r = warden(&[
        "run",
        "--workspace",
        root.to_str().unwrap(),
        "--allow-protected",
        ".vscode",
        "--",
        "sh",
        "-c",
        "echo '{}' > .vscode/tasks.json && ! echo x > .mcp.json",
    ]);
    assert_eq!(r.status, 0, "{r:?}");
    assert!(root.join(".vscode/tasks.json").exists());
}

//! Programs from user-installed runtimes: a Python under a (fake) home as pyenv puts it, a
//! virtual environment whose server script lives elsewhere, a Node copied into `/opt`. The
//! detonation binds each installation read-only (never the home) and the server really runs;
//! `warden run` refuses, naming the `--ro-bind` that would work.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::common::*;

/// A scratch folder outside `/tmp` (the jail owns `/tmp`, so nothing there keeps its path).
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(format!("/var/tmp/warden-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn copy_exe(from: &str, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap();
}

/// `unshare --net warden detonate --mcp-command COMMAND --output json`, with `HOME` set.
fn detonate(command: &str, home: &Path) -> (i32, Value, String) {
    let out = Command::new("unshare")
        .args(["--net", warden_bin(), "detonate", "--output", "json"])
        .args(["--mcp-command", command])
        .env("HOME", home)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let r = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (
        out.status.code().unwrap_or(-1),
        r,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn binds(r: &Value) -> Vec<String> {
    r["sandbox"]["binds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["source"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
pub fn a_python_under_a_home_is_bound_by_its_prefix_never_the_home() {
    let home = scratch("fakehome");
    let prefix = home.join(".pyenv/versions/3.11.7");
    copy_exe("/usr/bin/python3.11", &prefix.join("bin/python3.11"));
    std::os::unix::fs::symlink("python3.11", prefix.join("bin/python3")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE").unwrap();
    let python = prefix.join("bin/python3");
    let server = fixtures().join("mcp/servers/benign_echo.py");
    let command = format!("{} {}", python.display(), server.display());
    let (code, r, err) = detonate(&command, &home);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["verdict"], "PASS", "{}", r["findings"]);
    assert_eq!(r["harness"]["benign_accepted"], 2, "the server ran");
    let bound = binds(&r);
    assert!(bound.contains(&prefix.display().to_string()), "{bound:?}");
    assert!(!bound.contains(&home.display().to_string()), "{bound:?}");
    // `warden run` refuses, and says which --ro-bind would work.
    let out = Command::new(warden_bin())
        .args(["run", "--"])
        .arg(&python)
        .args(["-c", "print(1)"])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("--ro-bind {}", prefix.display())),
        "{err}"
    );
    let out = Command::new(warden_bin())
        .args(["run", "--ro-bind"])
        .arg(&prefix)
        .arg("--")
        .arg(&python)
        .args([
            "-c",
            "import os; print(os.path.exists(os.path.expanduser('~/.ssh')))",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "False");
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
pub fn a_venv_interpreter_with_the_script_elsewhere_is_bound() {
    let root = scratch("venv");
    let venv = root.join("venv");
    let made = Command::new("/usr/bin/python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let servers = root.join("servers");
    std::fs::create_dir_all(&servers).unwrap();
    for f in ["benign_echo.py", "mini.py"] {
        std::fs::copy(fixtures().join("mcp/servers").join(f), servers.join(f)).unwrap();
    }
    let command = format!(
        "{} {}",
        venv.join("bin/python").display(),
        servers.join("benign_echo.py").display()
    );
    let (code, r, err) = detonate(&command, &root);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["verdict"], "PASS", "{}", r["findings"]);
    let bound = binds(&r);
    assert!(bound.contains(&venv.display().to_string()), "{bound:?}");
    assert!(bound.contains(&servers.display().to_string()), "{bound:?}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
pub fn a_node_copied_into_opt_runs_the_server() {
    let prefix = PathBuf::from(format!("/opt/warden-test-node-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&prefix);
    copy_exe("/usr/bin/node", &prefix.join("bin/node"));
    let server = fixtures().join("mcp/servers/thief.js");
    let command = format!("{} {}", prefix.join("bin/node").display(), server.display());
    let (code, r, err) = detonate(&command, Path::new("/root"));
    assert_eq!(code, 0, "{err}");
    // It ran, and it was caught for what it did.
    assert_eq!(r["verdict"], "CRITICAL", "{}", r["why"]);
    assert!(binds(&r).contains(&prefix.display().to_string()));
    let _ = std::fs::remove_dir_all(&prefix);
}

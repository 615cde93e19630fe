//! What tracing and decoys add to a policy before the jail starts: a private host directory
//! holding the environment interposer and the Python hook (bound read-only at `/.warden`) and,
//! with decoys, the decoy home (bound writable at `/home/sandbox`), plus the environment that
//! points programs at them and the canary credentials.
//!
//! The directory is created fresh for each run (mode 0700, under the system's temporary
//! directory) and removed when the run's [`Observation`] is dropped.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use warden_trace::Decoys;
use warden_trace::interposer::{LIBRARY, sitecustomize};

use crate::error::{JailError, SetupFailure, Stage};
use crate::policy::{Bind, Policy};

/// Where the interposer and the Python hook appear inside the jail.
pub const TOOLS_MOUNT: &str = "/.warden";
/// The decoy home inside the jail.
pub const DECOY_HOME: &str = "/home/sandbox";

/// The host side of one run's observation; dropping it removes the files.
#[derive(Debug)]
pub struct Observation {
    _dir: tempfile::TempDir,
    /// The run's decoys, when on.
    pub decoys: Option<Decoys>,
}

fn fail(what: &str, e: &std::io::Error) -> JailError {
    JailError::Setup(SetupFailure::io(Stage::Supervisor, what, e))
}

fn write(path: &Path, contents: &[u8], mode: u32) -> Result<(), JailError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| fail("writing an observation file", &e))?;
    f.write_all(contents)
        .map_err(|e| fail("writing an observation file", &e))
}

fn mkdir(path: &Path, mode: u32) -> Result<(), JailError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
        .map_err(|e| fail("creating an observation directory", &e))
}

/// Prepend `value` to the `:`-separated variable `name`.
fn prepend(policy: &mut Policy, name: &str, value: &str) {
    let v = match policy.env.get(name) {
        Some(old) if !old.is_empty() => format!("{value}:{old}"),
        _ => value.to_owned(),
    };
    policy.env.insert(name.to_owned(), v);
}

/// Rewrite `policy` for tracing and decoys; `None` when neither is on. Decoys imply tracing
/// (a canary is only worth planting if its appearance is watched for).
pub fn prepare(policy: &mut Policy) -> Result<Option<Observation>, JailError> {
    if policy.decoys {
        policy.trace = true;
    }
    if !policy.trace {
        return Ok(None);
    }
    let dir = tempfile::Builder::new()
        .prefix("warden-observe-")
        .tempdir()
        .map_err(|e| fail("creating the observation directory", &e))?;
    let tools = dir.path().join("tools");
    mkdir(&tools.join("python"), 0o755)?;
    write(&tools.join("libwarden_env.so"), LIBRARY, 0o644)?;
    write(
        &tools.join("python/sitecustomize.py"),
        sitecustomize().as_bytes(),
        0o644,
    )?;
    policy.binds.push(Bind {
        source: tools,
        target: Some(PathBuf::from(TOOLS_MOUNT)),
        writable: false,
    });
    prepend(
        policy,
        "LD_PRELOAD",
        &format!("{TOOLS_MOUNT}/libwarden_env.so"),
    );
    prepend(policy, "PYTHONPATH", &format!("{TOOLS_MOUNT}/python"));
    let decoys = if policy.decoys {
        let d = Decoys::generate();
        let home = dir.path().join("home");
        mkdir(&home, 0o755)?;
        for f in &d.files {
            let path = home.join(f.path);
            if let Some(parent) = path.parent() {
                mkdir(parent, 0o700)?;
            }
            write(&path, f.contents.as_bytes(), f.mode)?;
        }
        policy.binds.push(Bind {
            source: home,
            target: Some(PathBuf::from(DECOY_HOME)),
            writable: true,
        });
        policy.env.insert("HOME".into(), DECOY_HOME.into());
        for (k, v) in &d.env {
            // What the operator set explicitly stays.
            policy.env.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Some(d)
    } else {
        None
    };
    Ok(Some(Observation { _dir: dir, decoys }))
}

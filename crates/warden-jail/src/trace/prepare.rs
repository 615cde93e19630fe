//! What tracing and decoys add to a policy before the jail starts: the environment interposer,
//! the Python hook and the run's own clock record (see [`super::clock`]), shown read-only at
//! [`TOOLS_MOUNT`] and preloaded through the jail's own `/etc/ld.so.preload`; with decoys, the
//! decoy home (bound writable at `/home/USER`, the policy's user: see [`crate::persona`]) and
//! the canary credentials; with TLS opened, the run's authority in the system trust bundle.
//!
//! Nothing it adds names Warden inside the jail: no variable names the tools (the interposer
//! puts a Python interpreter onto its hook and the hook takes that out again), the tools'
//! folder is an ordinary library folder, and what is bound comes from the run's own
//! directory (an ordinary temporary name, so `/proc/self/mountinfo` shows nothing more).
//!
//! The tools are made once (root-owned, not writable by anyone else, checked on every reuse)
//! in `/run/warden/tools-<digest>`, with the Python hook's bytecode compiled by the system's
//! Python; each run copies them (some 30 KB, modification times kept so the bytecode stays
//! valid) into its own directory beside its clock. Where that directory's file system does
//! not allow executable mappings, the shared folder itself is bound (and its name shows in
//! the jail's mount table). The run's directory, the decoy home included (mode 0700, under the
//! system's temporary directory), is removed when the run's [`Observation`] is dropped.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use warden_trace::Decoys;
use warden_trace::interposer::{LIBRARY, LIBRARY_NAME, sitecustomize};

use crate::error::{JailError, SetupFailure, Stage};
use crate::policy::{Bind, Policy};

/// Where the interposer, the Python hook and the clock record appear inside the jail.
pub const TOOLS_MOUNT: &str = warden_trace::interposer::TOOLS_DIR;
/// The interposer's path inside the jail (named by the jail's `/etc/ld.so.preload`).
pub fn interposer_path() -> String {
    format!("{TOOLS_MOUNT}/{LIBRARY_NAME}")
}

/// The host side of one run's observation; dropping it removes the run's own files.
#[derive(Debug)]
pub struct Observation {
    /// The decoy home's own tmpfs (unmounted on drop, before the directory is removed).
    home_mount: Option<PathBuf>,
    _dir: Option<tempfile::TempDir>,
    /// The run's decoys, when on.
    pub decoys: Option<Decoys>,
    /// The run's TLS authority, when TLS is opened (`open_tls` with decoys).
    pub authority: Option<std::sync::Arc<warden_capture::Authority>>,
    /// The planted files, by device and inode.
    pub decoy_ids: Vec<super::identity::DecoyId>,
    /// The run's virtual clock, shown over the tools' placeholder.
    pub clock: Option<std::sync::Arc<super::clock::Clock>>,
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

/// Size of the decoy home's tmpfs.
pub const DECOY_HOME_BYTES: u64 = 64 << 20;

impl Drop for Observation {
    fn drop(&mut self) {
        if let Some(home) = self.home_mount.take() {
            let _ = nix::mount::umount2(&home, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

/// Shared tools are kept under the first of these directories on a file system that allows
/// executable mappings (the interposer is a shared library: on a `noexec` mount, as systemd
/// hosts mount `/run`, the loader cannot map it and ignores it).
const SHARED: [&str; 2] = ["/run/warden", "/var/lib/warden"];

/// Whether files under `path` (or its nearest existing ancestor) can be mapped executable.
fn executable_fs(path: &Path) -> bool {
    let mut at = Some(path);
    while let Some(p) = at {
        if let Ok(st) = nix::sys::statvfs::statvfs(p) {
            return !st.flags().contains(nix::sys::statvfs::FsFlags::ST_NOEXEC);
        }
        at = p.parent();
    }
    false
}

/// A short digest of the tools' contents, so a new Warden never reuses an old directory.
fn digest() -> String {
    use std::hash::{Hash, Hasher};
    // Not for security (the directory's ownership is what is trusted): only to tell versions
    // apart. `DefaultHasher::new()` is deterministic.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    LIBRARY.hash(&mut h);
    sitecustomize().hash(&mut h);
    CLOCK_PLACEHOLDER.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// Whether `path` is a directory that only we can write to.
fn trusted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| {
        m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw() && m.mode() & 0o022 == 0
    })
}

/// The tools' file that each run's clock record is bound over (empty: a program that finds it
/// unbound reads no record and keeps the real clocks).
const CLOCK_PLACEHOLDER: &str = "clock";

/// Fill `dir` with the interposer, the Python hook (and the hook's bytecode, best effort) and
/// the clock's placeholder.
fn fill_tools(dir: &Path) -> Result<(), JailError> {
    mkdir(&dir.join("python"), 0o755)?;
    write(&dir.join(LIBRARY_NAME), LIBRARY, 0o644)?;
    write(&dir.join(CLOCK_PLACEHOLDER), b"", 0o644)?;
    let hook = dir.join("python/sitecustomize.py");
    write(&hook, sitecustomize().as_bytes(), 0o644)?;
    // The jail runs the system's own Python (it sees the host's /usr): compile the hook with it
    // once, isolated from any environment, so traced runs load bytecode instead of compiling.
    for python in ["/usr/bin/python3", "/usr/local/bin/python3"] {
        if Path::new(python).exists() {
            let _ = std::process::Command::new(python)
                .args([
                    "-I",
                    "-S",
                    "-c",
                    "import py_compile,sys; py_compile.compile(sys.argv[1], doraise=True)",
                ])
                .arg(&hook)
                .env_clear()
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
    Ok(())
}

/// Copy the tools in `from` into `to` (created), each file's modification time kept (Python
/// checks a bytecode file against its source's), leaving out the clock's placeholder.
fn copy_tools(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().mode(0o755).create(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tools(&source, &target)?;
        } else if kind.is_file() && entry.file_name() != CLOCK_PLACEHOLDER {
            let bytes = std::fs::read(&source)?;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&target)?;
            f.write_all(&bytes)?;
            f.set_modified(entry.metadata()?.modified()?)?;
        }
    }
    Ok(())
}

/// The shared tools directory, created on first use; `None` when it cannot be used.
fn shared_tools() -> Option<PathBuf> {
    let root = Path::new(SHARED.into_iter().find(|r| executable_fs(Path::new(r)))?);
    if !root.exists() {
        let _ = std::fs::DirBuilder::new().mode(0o755).create(root);
    }
    if !trusted(root) {
        return None;
    }
    let dir = root.join(format!("tools-{}", digest()));
    if trusted(&dir)
        && dir.join("python/sitecustomize.py").is_file()
        && dir.join(CLOCK_PLACEHOLDER).is_file()
    {
        return Some(dir);
    }
    // Built aside and renamed into place, so no run ever sees a half-written directory.
    let staging = tempfile::Builder::new()
        .prefix(".tools-")
        .tempdir_in(root)
        .ok()?;
    std::fs::set_permissions(
        staging.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .ok()?;
    fill_tools(staging.path()).ok()?;
    let staged = staging.keep();
    if std::fs::rename(&staged, &dir).is_err() {
        // Another run won the race: use its directory.
        let _ = std::fs::remove_dir_all(&staged);
    }
    trusted(&dir).then_some(dir)
}

/// Rewrite `policy` for tracing and decoys; `None` when neither is on. Decoys imply tracing
/// (a canary is only worth planting if its appearance is watched for), and so does egress (it
/// goes through the capture network).
pub fn prepare(policy: &mut Policy) -> Result<Option<Observation>, JailError> {
    policy.trace = policy.traced();
    if !policy.trace {
        return Ok(None);
    }
    // The run's own directory, under an ordinary temporary name: the binds from it show their
    // host path in the jail's mount table.
    let run = tempfile::Builder::new()
        .tempdir()
        .map_err(|e| fail("creating the observation directory", &e))?;
    let base = run.path().to_path_buf();
    let local = base.join("lib");
    let (tools, clock_path) = if executable_fs(&base) {
        match shared_tools() {
            Some(shared) => {
                copy_tools(&shared, &local).map_err(|e| fail("copying the tracer's tools", &e))?
            }
            None => {
                fill_tools(&local)?;
                std::fs::remove_file(local.join(CLOCK_PLACEHOLDER))
                    .map_err(|e| fail("writing the run's clock", &e))?;
            }
        }
        (local.clone(), local.join(CLOCK_PLACEHOLDER))
    } else if let Some(shared) = shared_tools() {
        // The shared folder itself, with the run's clock bound over its placeholder.
        (shared, base.join(CLOCK_PLACEHOLDER))
    } else {
        fill_tools(&local)?;
        tracing::warn!(
            "the tracer's environment interposer is on a noexec file system ({}): \
             environment reads are not recorded (give Warden /run/warden or \
             /var/lib/warden on an exec mount)",
            local.display()
        );
        (local, base.join(CLOCK_PLACEHOLDER))
    };
    let loadable = executable_fs(&tools);
    policy.binds.push(Bind {
        source: tools.clone(),
        target: Some(PathBuf::from(TOOLS_MOUNT)),
        writable: false,
    });
    if loadable {
        policy.preload = Some(PathBuf::from(interposer_path()));
    }
    let clock = {
        let clock = super::clock::Clock::create(&clock_path)
            .map_err(|e| fail("writing the run's clock", &e))?;
        if !clock_path.starts_with(&tools) {
            // Over the shared tools' placeholder (bound after them).
            policy.binds.push(Bind {
                source: clock_path.clone(),
                target: Some(PathBuf::from(warden_trace::clock::FILE_IN_JAIL)),
                writable: false,
            });
        }
        std::sync::Arc::new(clock)
    };
    let mut home_mount = None;
    let mut decoy_ids = Vec::new();
    let decoy_home = policy.decoy_home();
    let decoys = if policy.decoys {
        let mut d = Decoys::generate();
        // The credentials the operator configured are watched too (where the user's data goes
        // with them), before the chamber's own variables join the environment.
        d.watch_configured(policy.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let home = base.join("home");
        mkdir(&home, 0o755)?;
        // Its own small tmpfs: the jail may write to its home, but never fill the host's disk.
        let flags = nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV;
        let opts = format!("size={DECOY_HOME_BYTES},mode=0755");
        match nix::mount::mount(
            Some("tmpfs"),
            &home,
            Some("tmpfs"),
            flags,
            Some(opts.as_str()),
        ) {
            Ok(()) => {
                let private = nix::mount::MsFlags::MS_PRIVATE;
                let _ = nix::mount::mount(None::<&str>, &home, None::<&str>, private, None::<&str>);
                home_mount = Some(home.clone());
            }
            Err(e) => tracing::warn!(error = %e, "the decoy home is not size-limited"),
        }
        for f in &d.files {
            let path = home.join(f.path);
            if let Some(parent) = path.parent() {
                mkdir(parent, 0o700)?;
            }
            write(&path, f.contents.as_bytes(), f.mode)?;
            if let Ok(st) = nix::sys::stat::lstat(&path) {
                decoy_ids.push(super::identity::DecoyId {
                    dev: st.st_dev,
                    ino: st.st_ino,
                    path: format!("{decoy_home}/{}", f.path),
                });
            }
        }
        if home_mount.is_some() {
            crate::idmap::give_tmpfs_to_jail_user(&home, policy.uid, policy.gid)
                .map_err(|e| fail("handing the decoy home to the jail's user", &e))?;
        }
        policy.binds.push(Bind {
            source: home,
            target: Some(PathBuf::from(&decoy_home)),
            writable: true,
        });
        policy.env.insert("HOME".into(), decoy_home.clone());
        policy.env.insert("USER".into(), policy.user.clone());
        policy.env.insert("LOGNAME".into(), policy.user.clone());
        for (k, v) in &d.env {
            // What the operator set explicitly stays.
            policy.env.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Some(d)
    } else {
        None
    };
    let authority = if decoys.is_some() && policy.open_tls {
        match warden_capture::Authority::new() {
            Ok(a) => {
                trust(policy, &base, a.cert_pem())?;
                Some(std::sync::Arc::new(a))
            }
            Err(e) => {
                tracing::warn!("TLS is not opened in this run: {e}");
                None
            }
        }
    } else {
        None
    };
    Ok(Some(Observation {
        home_mount,
        _dir: Some(run),
        decoys,
        authority,
        decoy_ids,
        clock: Some(clock),
    }))
}

/// The system trust bundles of the distributions whose `/etc/ssl` the jail shows.
const SYSTEM_BUNDLES: [&str; 2] = ["/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/cert.pem"];

/// Make the jail trust the run's authority `pem`: a bundle of the system's roots and it, bound
/// over the system bundle (Debian's path when the host has neither) and named by
/// `SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`, `GIT_SSL_CAINFO` and
/// `NODE_EXTRA_CA_CERTS` (Node adds its certificates to its own store), the variables a
/// developer behind a company's TLS inspection sets. What the operator set explicitly stays.
fn trust(policy: &mut Policy, base: &Path, pem: &str) -> Result<(), JailError> {
    let dir = base.join("certs");
    mkdir(&dir, 0o755)?;
    let system = SYSTEM_BUNDLES
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let mut bundle = system;
    if !bundle.is_empty() && !bundle.ends_with('\n') {
        bundle.push('\n');
    }
    bundle.push_str(pem);
    let file = dir.join("ca-certificates.crt");
    write(&file, bundle.as_bytes(), 0o644)?;
    let present: Vec<&str> = SYSTEM_BUNDLES
        .into_iter()
        .filter(|p| Path::new(p).is_file())
        .collect();
    let targets = if present.is_empty() {
        vec![SYSTEM_BUNDLES[0]]
    } else {
        present
    };
    for target in &targets {
        policy.binds.push(Bind {
            source: file.clone(),
            target: Some(PathBuf::from(target)),
            writable: false,
        });
    }
    for name in [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
        "NODE_EXTRA_CA_CERTS",
    ] {
        policy
            .env
            .entry(name.into())
            .or_insert_with(|| targets[0].to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_directories_nobody_else_can_write_are_trusted() {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(trusted(d.path()));
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o775)).unwrap();
        assert!(!trusted(d.path()));
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o757)).unwrap();
        assert!(!trusted(d.path()));
        let link = d.path().join("link");
        std::os::unix::fs::symlink("/", &link).unwrap();
        assert!(!trusted(&link), "a symlink is not a directory we made");
        assert!(!trusted(&d.path().join("missing")));
    }

    #[test]
    fn tools_are_complete() {
        let d = tempfile::tempdir().unwrap();
        fill_tools(d.path()).unwrap();
        assert_eq!(std::fs::read(d.path().join(LIBRARY_NAME)).unwrap(), LIBRARY);
        let hook = std::fs::read_to_string(d.path().join("python/sitecustomize.py")).unwrap();
        assert_eq!(hook, sitecustomize());
        // The interposer opens the clock at the placeholder's place in the jail.
        assert!(d.path().join(CLOCK_PLACEHOLDER).is_file());
        assert_eq!(
            warden_trace::clock::FILE_IN_JAIL,
            format!("{TOOLS_MOUNT}/{CLOCK_PLACEHOLDER}")
        );
        assert_eq!(digest(), digest());
        // A run's copy keeps the bytecode valid (the same modification times) and leaves the
        // placeholder to the run's clock; no name in it says Warden.
        let other = tempfile::tempdir().unwrap();
        let copy = other.path().join("lib");
        copy_tools(d.path(), &copy).unwrap();
        let time = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
        let py = "python/sitecustomize.py";
        assert_eq!(time(&d.path().join(py)), time(&copy.join(py)));
        assert!(!copy.join(CLOCK_PLACEHOLDER).exists());
        assert!(!format!("{TOOLS_MOUNT}{LIBRARY_NAME}").contains("warden"));
    }
}
